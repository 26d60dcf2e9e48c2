package wire

import "encoding/binary"

// The rendezvous header: struct rxm_rndv_hdr (prov/rxm/src/rxm.h), right
// after the Header of a CtrlRndvReq (the sender's buffers, to be read) or a
// CtrlRndvWrData (the receiver's buffers, to be written).
//
//	off size field
//	0   24   iov[0]  {addr, len, key}, u64 each (struct ofi_rma_iov)
//	24  24   iov[1]
//	48  24   iov[2]
//	72  24   iov[3]
//	96  1    count   1..4 valid entries
//	97  7    padding
//
// addr is what the reader must put in its tcp read request: an offset into
// the registered buffer (0 for its start) over tcp, whose memory regions
// do not use FI_MR_VIRT_ADDR; key is the tcp memory region's key. A 1.17
// sender makes its keys from a per-domain counter: RndvKey.
const (
	RndvHeaderSize = 104
	MaxIov         = 4 // RXM_IOV_LIMIT
	rmaIovSize     = 24
)

// KeyProvSpecific is FI_PROV_SPECIFIC, the bit rxm sets in the keys of the
// memory regions it registers itself (rxm_msg_mr_reg_internal).
const KeyProvSpecific = 1 << 31

// RndvKey returns the key a 1.17 rxm domain gives its n-th internal
// registration (counting from 0, over rendezvous sends and receives alike).
// A fabricfs sender may use any key: the reader echoes it.
func RndvKey(n uint64) uint64 { return n | KeyProvSpecific }

// RMAIov is struct ofi_rma_iov: a remote buffer.
type RMAIov struct {
	Addr, Len, Key uint64
}

// RndvHeader is a decoded rendezvous header. Entries past Count and the
// padding are kept as received (libfabric leaves stale bytes there); a
// fabricfs sender leaves them zero.
type RndvHeader struct {
	Count uint8
	Iov   [MaxIov]RMAIov
	Pad   [7]byte
}

// Total is the length of the valid entries together. It is meaningful
// only for a header that Validate accepts.
func (r *RndvHeader) Total() uint64 {
	var n uint64
	for _, v := range r.Iov[:min(int(r.Count), MaxIov)] {
		n += v.Len
	}
	return n
}

// Validate checks the count (libfabric's reader asserts 1..4, and with 0
// would never answer) and that the entries' lengths add up without
// overflow.
func (r *RndvHeader) Validate() error {
	if r.Count < 1 || r.Count > MaxIov {
		return errorf("rendezvous header with %d entries, want 1..%d", r.Count, MaxIov)
	}
	var n uint64
	for _, v := range r.Iov[:r.Count] {
		if n+v.Len < n {
			return errorf("rendezvous header lengths overflow")
		}
		n += v.Len
	}
	return nil
}

// CheckSize checks a rendezvous request's header against its Header.Size:
// a 1.17 sender describes exactly the message's bytes.
func (r *RndvHeader) CheckSize(size uint64) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if t := r.Total(); t != size {
		return errorf("rendezvous header describes %d bytes of a %d-byte message", t, size)
	}
	return nil
}

// Encode validates r and writes it into b (at least RndvHeaderSize bytes).
func (r *RndvHeader) Encode(b []byte) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if len(b) < RndvHeaderSize {
		return ErrShort
	}
	for i, v := range r.Iov {
		off := i * rmaIovSize
		binary.LittleEndian.PutUint64(b[off:], v.Addr)
		binary.LittleEndian.PutUint64(b[off+8:], v.Len)
		binary.LittleEndian.PutUint64(b[off+16:], v.Key)
	}
	b[96] = r.Count
	copy(b[97:RndvHeaderSize], r.Pad[:])
	return nil
}

// AppendRndvHeader appends the encoding of r to dst.
func AppendRndvHeader(dst []byte, r *RndvHeader) ([]byte, error) {
	var b [RndvHeaderSize]byte
	if err := r.Encode(b[:]); err != nil {
		return dst, err
	}
	return append(dst, b[:]...), nil
}

// Decode decodes and validates the rendezvous header at the start of b.
func (r *RndvHeader) Decode(b []byte) error {
	if len(b) < RndvHeaderSize {
		return ErrShort
	}
	var d RndvHeader
	for i := range d.Iov {
		off := i * rmaIovSize
		d.Iov[i] = RMAIov{
			Addr: binary.LittleEndian.Uint64(b[off:]),
			Len:  binary.LittleEndian.Uint64(b[off+8:]),
			Key:  binary.LittleEndian.Uint64(b[off+16:]),
		}
	}
	d.Count = b[96]
	copy(d.Pad[:], b[97:RndvHeaderSize])
	if err := d.Validate(); err != nil {
		return err
	}
	*r = d
	return nil
}
