package verbs

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// Memory. The device places data only in registered memory, so every
// buffer of an operation is named by a registration (FI_MR_LOCAL):
//
//   - a buffer of a ring request or an RMA ctl verb lies in a memory
//     region that core registered with the domain, in the protection
//     domain of its owner (RegisterMemory; the operation's Op.Mem and
//     Op.MemOff), and is used as it is;
//   - any other buffer (the data file's, rxm's own) is registered for the
//     operation alone and deregistered when it completes: a software
//     device registers by recording the slice, so this costs a map entry,
//     and keeps every operation zero-copy;
//   - a receive posted without a buffer (a read of the data file) gets a
//     fresh anonymous mapping of max_msg_size bytes, of which only the
//     pages the message touches are ever backed; the message is copied
//     out of it at completion, and the mapping unmapped.
//
// Each protection domain also registers one discard region (an
// anonymous mapping as large as the longest message the domain's
// endpoints receive), whose bytes nobody reads: every receive names it after its own buffer, so a
// message longer than the buffer fills the buffer, spills into the
// discard region and completes as a truncation (FI_ETRUNC, with olen)
// instead of a length error that would end the connection; and a UD
// receive names it first, for the 40-byte GRH the device writes ahead of
// each datagram. Mappings are outside Go's heap: concurrent writes of the
// device into the discard region are meaningless, not races.

// mem is a registration made for core (core.Memory): a memory region of
// the tree, or a buffer rxm lends to its peer's reads.
type mem struct {
	o    *owned
	mr   *ibv.MR
	once sync.Once
}

var _ core.Memory = (*mem)(nil)

// Key is the region's rkey.
func (m *mem) Key() uint64 { return uint64(m.mr.RKey) }

// Close deregisters the region.
func (m *mem) Close() error {
	var err error
	m.once.Do(func() {
		if err = m.mr.Dereg(); err != nil {
			err = ibvError("deregistering memory", err)
		}
	})
	return err
}

// RegisterMemory registers buf with the owner's protection domain at
// iova (ibv_reg_mr_iova): peers' addresses in work requests are iova and
// up, as on a real device. Local write is always
// allowed (receives, reads, and remote writes need it); remote access as
// fi_mr_reg's access says (remote atomics with remote write). The
// requested key is ignored: the domain's mr_mode has FI_MR_PROV_KEY, and
// the device makes keys. A region with an authorization key serves
// only the QPs of endpoints with that key (ibv's RegMRAuth).
func (d *domain) RegisterMemory(owner uint32, buf []byte, iova uint64, access fi.Caps, _ uint64, authKey []byte) (core.Memory, error) {
	if len(buf) == 0 {
		return nil, core.Errorf(fi.EINVAL, "verbs: registering no memory")
	}
	o, err := d.owner(owner)
	if err != nil {
		return nil, err
	}
	acc := ibv.AccessLocalWrite
	if access&fi.REMOTE_READ != 0 {
		acc |= ibv.AccessRemoteRead
	}
	if access&fi.REMOTE_WRITE != 0 {
		// Atomics write the region too: they come with remote write,
		// as libfabric's verbs registers FI_REMOTE_WRITE.
		acc |= ibv.AccessRemoteWrite | ibv.AccessRemoteAtomic
	}
	mr, err := o.pd.RegMRAuth(buf, iova, acc, string(authKey))
	if err != nil {
		return nil, ibvError("registering memory", err)
	}
	return &mem{o: o, mr: mr}, nil
}

// mapping is an anonymous mapping outside Go's heap, registered for local
// writes.
type mapping struct {
	b  []byte
	mr *ibv.MR
}

// newMapping maps and registers n bytes; pages are backed when written.
func (o *owned) newMapping(n int) (*mapping, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, core.Errorf(fi.ENOMEM, "verbs: mapping %d bytes: %v", n, err)
	}
	mr, err := o.pd.RegMR(b, 0, ibv.AccessLocalWrite)
	if err != nil {
		unix.Munmap(b)
		return nil, ibvError("registering a mapping", err)
	}
	return &mapping{b: b, mr: mr}, nil
}

func (m *mapping) sge(off, n int) ibv.SGE {
	return ibv.SGE{Addr: m.mr.IOVA + uint64(off), Length: uint32(n), LKey: m.mr.LKey}
}

func (m *mapping) close() {
	m.mr.Dereg()
	unix.Munmap(m.b)
}

// opMem is the memory of one operation: its buffer's scatter/gather
// entry, and what was made for it alone, undone by release.
type opMem struct {
	sge     ibv.SGE
	has     bool     // sge names bytes (the buffer is not empty)
	mr      *ibv.MR  // a registration of the buffer for this operation
	mapping *mapping // the buffer made for a receive without one
}

// opMemory resolves the buffer of op for the device: op.Mem when it is a
// registration of this protection domain, a registration for op
// otherwise, and for a receive without a buffer a mapping of max bytes.
func (o *owned) opMemory(op *core.Op, max int) (opMem, error) {
	if op.Buf == nil && op.Kind.IsRecv() {
		m, err := o.newMapping(max)
		if err != nil {
			return opMem{}, err
		}
		return opMem{sge: m.sge(0, max), has: true, mapping: m}, nil
	}
	return o.bufMemory(op.Buf, op.Mem, op.MemOff)
}

// bufMemory resolves buf, which lies at off in the registration reg (if
// any), for the device: reg when it is a registration of this protection
// domain, a registration for the operation otherwise.
func (o *owned) bufMemory(buf []byte, reg core.Memory, off uint64) (opMem, error) {
	if len(buf) == 0 {
		return opMem{}, nil
	}
	if m, ok := reg.(*mem); ok && m.o == o {
		mr := m.mr
		return opMem{sge: ibv.SGE{Addr: mr.IOVA + off, Length: uint32(len(buf)), LKey: mr.LKey}, has: true}, nil
	}
	mr, err := o.pd.RegMR(buf, 0, ibv.AccessLocalWrite)
	if err != nil {
		return opMem{}, ibvError("registering a buffer", err)
	}
	return opMem{sge: ibv.SGE{Addr: mr.IOVA, Length: uint32(len(buf)), LKey: mr.LKey}, has: true, mr: mr}, nil
}

// release undoes what opMemory made. For a receive that had no buffer,
// the n bytes that arrived become op.Buf first.
func (m *opMem) release(op *core.Op, n int) {
	if m.mr != nil {
		m.mr.Dereg()
		m.mr = nil
	}
	if m.mapping != nil {
		op.Buf = append([]byte(nil), m.mapping.b[:min(n, len(m.mapping.b))]...)
		m.mapping.close()
		m.mapping = nil
	}
}

// bufLen is the length of the operation's buffer as the device sees it.
func (m *opMem) bufLen() int { return int(m.sge.Length) }
