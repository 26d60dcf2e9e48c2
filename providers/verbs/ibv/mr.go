package ibv

import (
	"crypto/rand"
	"encoding/binary"
	"syscall"
)

// MR is a registered memory region (ibv_reg_mr). Local work requests name
// its bytes as SGE{Addr: IOVA+offset, LKey}, remote ones as (IOVA+offset,
// RKey).
type MR struct {
	LKey, RKey uint32
	IOVA       uint64 // the address the region's first byte has in work requests

	pd     *PD
	buf    []byte
	access Access
	dead   bool // deregistered; guarded by the device's mrMu
	// authKey: only QPs with this authorization key reach the region
	// remotely ("": any QP of pd); RegMRAuth.
	authKey string
}

// RegMR registers buf with the address iova (ibv_reg_mr_iova: a provider
// that wants offsets passes 0) and access. A key is 32 random bits
// (crypto/rand) that no other live region of the device has, and not 0:
// the device finds regions in a map, so no bit of a key is an index a
// peer could count, and a peer that does not know a key can only guess
// it among 2^32 (each wrong guess costs it its connection, resp.go). The
// lkey and the rkey are the same. Remote
// write and atomic access require local write (EINVAL otherwise), as in
// libibverbs. The device reads and writes buf until Dereg.
func (pd *PD) RegMR(buf []byte, iova uint64, access Access) (*MR, error) {
	return pd.RegMRAuth(buf, iova, access, "")
}

// RegMRAuth is RegMR for a region with an authorization key (fabricfs's
// fi_mr auth_key; "": none): peers reach it only through QPs made with
// that key (QPInitAttr.AuthKey), or any QP of its PD when it has none.
// An extension of ibverbs.
func (pd *PD) RegMRAuth(buf []byte, iova uint64, access Access, authKey string) (*MR, error) {
	const all = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	switch {
	case access&^all != 0:
		return nil, errorf(syscall.EINVAL, "reg mr: unknown access flags %#x", uint32(access&^all))
	case access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0:
		return nil, errorf(syscall.EINVAL, "reg mr: remote write or atomic access without local write")
	case uint64(len(buf)) > deviceAttr.MaxMRSize || iova+uint64(len(buf)) < iova:
		return nil, errorf(syscall.EINVAL, "reg mr: %d bytes at %#x", len(buf), iova)
	}
	if err := pd.useCounted("reg mr", func(c *objCounts) *int { return &c.mr }, deviceAttr.MaxMR, "regions"); err != nil {
		return nil, err
	}
	d := pd.dev
	mr := &MR{IOVA: iova, pd: pd, buf: buf, access: access, authKey: authKey}
	d.mrMu.Lock()
	for mr.LKey == 0 || d.mrs[mr.LKey] != nil {
		var b [4]byte
		rand.Read(b[:])
		mr.LKey = binary.LittleEndian.Uint32(b[:])
	}
	d.mrs[mr.LKey] = mr
	mr.RKey = mr.LKey
	d.mrMu.Unlock()
	return mr, nil
}

// Dereg deregisters the region; operations using it afterwards fail with
// protection errors. It returns once no packet is being copied to or from
// the region, so the memory is the caller's again.
func (mr *MR) Dereg() error {
	d := mr.pd.dev
	d.mrMu.Lock()
	if mr.dead {
		d.mrMu.Unlock()
		return errorf(syscall.EINVAL, "dereg mr: deregistered already")
	}
	mr.dead = true
	if d.mrs[mr.LKey] == mr {
		delete(d.mrs, mr.LKey)
	}
	d.mrMu.Unlock()
	d.mu.Lock()
	d.nobj.mr--
	d.mu.Unlock()
	mr.pd.release()
	return nil
}

// lookupMR returns the live region whose key is key, or nil. d.mrMu is
// held.
func (d *Device) lookupMR(key uint32) *MR {
	return d.mrs[key]
}

// span returns the n bytes of mr at address addr, if they lie in it, are
// reachable from pd and allowed by need.
func (mr *MR) span(pd *PD, addr, n uint64, need Access) ([]byte, bool) {
	if mr == nil || mr.pd != pd || mr.access&need != need || addr < mr.IOVA {
		return nil, false
	}
	off := addr - mr.IOVA
	if off > uint64(len(mr.buf)) || n > uint64(len(mr.buf))-off {
		return nil, false
	}
	return mr.buf[off : off+n : off+n], true
}

// remote returns the n bytes at addr of the region rkey names, for the
// peer of qp that asks for access; ok is false when the key, the PD, the
// authorization key, the range or the access does not allow it. d.mrMu
// is held.
func (d *Device) remote(qp *QP, rkey uint32, addr, n uint64, access Access) ([]byte, bool) {
	mr := d.lookupMR(rkey)
	if mr != nil && mr.authKey != "" && mr.authKey != qp.init.AuthKey {
		return nil, false
	}
	return mr.span(qp.pd, addr, n, access)
}

// sgeBytes returns the bytes of one SGE. d.mrMu is held.
func (d *Device) sgeBytes(pd *PD, s SGE, need Access) ([]byte, bool) {
	return d.lookupMR(s.LKey).span(pd, s.Addr, uint64(s.Length), need)
}

// gather returns n bytes at offset off of the message an SGE list
// describes: a slice of the region when one SGE holds them all, else a
// copy in scratch. ok is false if an SGE is not a valid local region of
// pd. d.mrMu is held, and must stay held while the result is used.
func (d *Device) gather(pd *PD, sges []SGE, off, n int, scratch []byte) (b []byte, ok bool) {
	if n == 0 {
		return nil, true
	}
	out := scratch[:0]
	for _, s := range sges {
		if off >= int(s.Length) {
			off -= int(s.Length)
			continue
		}
		m, ok := d.sgeBytes(pd, s, 0)
		if !ok {
			return nil, false
		}
		m = m[off:]
		off = 0
		need := n - len(out)
		if len(out) == 0 && len(m) >= need {
			return m[:need], true
		}
		out = append(out, m[:min(len(m), need)]...)
		if len(out) == n {
			return out, true
		}
	}
	return nil, false
}

// scatter copies b to offset off of the message an SGE list describes.
// It returns WCLocLenErr if the SGEs are too short and WCLocProtErr if an
// SGE is not a valid region of pd with local write access. d.mrMu is
// held.
func (d *Device) scatter(pd *PD, sges []SGE, off int, b []byte) WCStatus {
	for _, s := range sges {
		if len(b) == 0 {
			return WCSuccess
		}
		if off >= int(s.Length) {
			off -= int(s.Length)
			continue
		}
		m, ok := d.sgeBytes(pd, s, AccessLocalWrite)
		if !ok {
			return WCLocProtErr
		}
		n := copy(m[off:], b)
		b = b[n:]
		off = 0
	}
	if len(b) > 0 {
		return WCLocLenErr
	}
	return WCSuccess
}

// sgeTotal is the length of the message an SGE list describes.
func sgeTotal(sges []SGE) uint64 {
	var n uint64
	for _, s := range sges {
		n += uint64(s.Length)
	}
	return n
}
