package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Data messages: a 16-byte base header (struct tcpx_base_hdr,
// prov/tcp/src/tcpx.h), optional 8-byte extensions, then the payload.
//
//	off size field
//	0   1    version      3
//	1   1    op           Op
//	2   2    flags        Flags
//	4   1    op_data      0, or OpDataAck
//	5   1    rma_iov_cnt  RMA descriptors (read request, write); anything for other ops
//	6   1    hdr_size     header bytes, 16..120
//	7   1    id           per-connection sequence number
//	8   8    size         header PLUS payload
//	16       cq_data      u64, with FlagRemoteCQData
//	         tag          u64, for tagged messages
//	         rma_iov[n]   {addr, len, key} u64 each, for OpReadReq and OpWrite
//
// Multi-byte fields are in the sender's byte order; fabricfs writes and
// reads little-endian, and refuses a peer of the other order at connect
// time (see DecodeCMHeader).
const (
	Version        = 3   // TCPX_HDR_VERSION
	BaseHeaderSize = 16  // sizeof(struct tcpx_base_hdr)
	MaxHeaderSize  = 120 // TCPX_MAX_HDR: cq_data plus four RMA descriptors
	MaxRMAIov      = 4   // TCPX_IOV_LIMIT
	RMAIovSize     = 24  // sizeof(struct ofi_rma_iov)
)

// Op is tcpx_base_hdr.op (enum ofi_op in include/ofi_proto.h).
type Op uint8

const (
	OpMsg     Op = 0 // send; also rxm-tagged messages (FlagTagged) and ACKs (OpDataAck)
	OpTagged  Op = 1 // tagged send matched by the tcp provider (shared receive context)
	OpReadReq Op = 2 // RMA read request: descriptors, no payload
	OpReadRsp Op = 3 // RMA read response: base header, then the data read
	OpWrite   Op = 4 // RMA write: descriptors, then the data
)

var opNames = [...]string{"msg", "tagged", "read_req", "read_rsp", "write"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Flags is tcpx_base_hdr.flags.
type Flags uint16

const (
	FlagRemoteCQData     Flags = 1 << 0 // TCPX_REMOTE_CQ_DATA: cq_data follows the base header
	FlagDeliveryComplete Flags = 1 << 2 // TCPX_DELIVERY_COMPLETE: receiver ACKs after placing the data
	FlagCommitComplete   Flags = 1 << 3 // TCPX_COMMIT_COMPLETE: receiver ACKs after committing (pmem)
	FlagTagged           Flags = 1 << 7 // TCPX_TAGGED: an rxm tagged message on OpMsg; tag follows

	knownFlags = FlagRemoteCQData | FlagDeliveryComplete | FlagCommitComplete | FlagTagged
)

// OpDataAck in op_data of an OpMsg header marks an ACK (TCPX_OP_ACK): a
// bare 16-byte header that completes the oldest send that asked for
// delivery or commit completion.
const OpDataAck = 2

// RMAIov is struct ofi_rma_iov: one remote buffer of an RMA operation.
type RMAIov struct {
	Addr, Len, Key uint64
}

// Header is a decoded data header. Fields that do not apply to an operation
// are zero, except RMACount, which keeps the wire byte as sent (libfabric
// leaves garbage there for operations without descriptors).
type Header struct {
	Op       Op
	Flags    Flags
	OpData   uint8
	RMACount uint8 // rma_iov_cnt; the number of valid RMA entries for OpReadReq and OpWrite
	ID       uint8
	Len      uint64 // payload bytes after the header: size - hdr_size
	CQData   uint64 // with FlagRemoteCQData
	Tag      uint64 // with HasTag
	RMA      [MaxRMAIov]RMAIov
}

// ErrShort means the buffer ends before the header or message does.
var ErrShort = errors.New("wire: short buffer")

// Ack returns the header of an ACK with sequence number id.
func Ack(id uint8) Header { return Header{Op: OpMsg, OpData: OpDataAck, ID: id} }

// IsAck reports whether h is an ACK.
func (h *Header) IsAck() bool { return h.Op == OpMsg && h.OpData == OpDataAck }

// HasTag reports whether the header carries a tag: OpTagged, or OpMsg with
// FlagTagged.
func (h *Header) HasTag() bool {
	return h.Op == OpTagged || (h.Op == OpMsg && h.Flags&FlagTagged != 0)
}

// HasRMA reports whether the header carries RMA descriptors.
func (h *Header) HasRMA() bool { return h.Op == OpReadReq || h.Op == OpWrite }

// Size is the header's length on the wire (hdr_size). It is meaningful only
// for a header that Validate accepts.
func (h *Header) Size() int {
	if h.IsAck() || h.Op == OpReadRsp {
		// An ACK is a bare base header whatever its flags say; a read
		// response copies the request's flags and rma_iov_cnt but is a bare
		// base header too.
		return BaseHeaderSize
	}
	n := BaseHeaderSize
	if h.Flags&FlagRemoteCQData != 0 {
		n += 8
	}
	if h.HasTag() {
		n += 8
	}
	if h.HasRMA() {
		n += RMAIovSize * int(h.RMACount)
	}
	return n
}

// Validate checks that the fields describe a message libfabric 1.17's tcp
// provider could send.
func (h *Header) Validate() error {
	if h.Op > OpWrite {
		return errorf("unknown op %d", uint8(h.Op))
	}
	if h.IsAck() {
		// libfabric fills neither flags nor rma_iov_cnt of an ACK: ignore them.
		if h.Len != 0 {
			return errorf("ACK with %d bytes of payload", h.Len)
		}
		return nil
	}
	if h.OpData != 0 {
		return errorf("op %s with op_data %d", h.Op, h.OpData)
	}
	if f := h.Flags &^ knownFlags; f != 0 {
		return errorf("op %s with unknown flags %#x", h.Op, uint16(f))
	}
	if h.Op != OpMsg && h.Op != OpTagged && h.Flags&FlagTagged != 0 {
		return errorf("op %s with the tagged flag", h.Op)
	}
	switch h.Op {
	case OpReadReq:
		if h.Flags&FlagRemoteCQData != 0 {
			return errorf("read request with remote CQ data")
		}
		if h.Len != 0 {
			return errorf("read request with %d bytes of payload", h.Len)
		}
	case OpWrite:
		var total uint64
		for _, r := range h.RMA[:min(int(h.RMACount), MaxRMAIov)] {
			if total+r.Len < total {
				return errorf("write descriptors overflow")
			}
			total += r.Len
		}
		if total != h.Len {
			return errorf("write of %d bytes for descriptors of %d bytes", h.Len, total)
		}
	}
	if h.HasRMA() && h.RMACount > MaxRMAIov {
		return errorf("op %s with %d RMA descriptors, at most %d", h.Op, h.RMACount, MaxRMAIov)
	}
	if s := h.Size(); s > MaxHeaderSize {
		return errorf("header of %d bytes, at most %d", s, MaxHeaderSize)
	}
	if h.Len > ^uint64(0)-uint64(h.Size()) {
		return errorf("payload of %d bytes overflows size", h.Len)
	}
	return nil
}

// Encode writes h into b, which must hold h.Size() bytes, and returns the
// number of bytes written. It validates h first.
func (h *Header) Encode(b []byte) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	n := h.Size()
	if len(b) < n {
		return 0, ErrShort
	}
	b[0] = Version
	b[1] = byte(h.Op)
	binary.LittleEndian.PutUint16(b[2:], uint16(h.Flags))
	b[4] = h.OpData
	b[5] = h.RMACount
	b[6] = byte(n)
	b[7] = h.ID
	binary.LittleEndian.PutUint64(b[8:], uint64(n)+h.Len)
	if n == BaseHeaderSize {
		return n, nil
	}
	off := BaseHeaderSize
	if h.Flags&FlagRemoteCQData != 0 {
		binary.LittleEndian.PutUint64(b[off:], h.CQData)
		off += 8
	}
	if h.HasTag() {
		binary.LittleEndian.PutUint64(b[off:], h.Tag)
		off += 8
	}
	if h.HasRMA() {
		for _, r := range h.RMA[:h.RMACount] {
			binary.LittleEndian.PutUint64(b[off:], r.Addr)
			binary.LittleEndian.PutUint64(b[off+8:], r.Len)
			binary.LittleEndian.PutUint64(b[off+16:], r.Key)
			off += RMAIovSize
		}
	}
	return n, nil
}

// AppendHeader appends the encoding of h to dst.
func AppendHeader(dst []byte, h *Header) ([]byte, error) {
	var b [MaxHeaderSize]byte
	n, err := h.Encode(b[:])
	if err != nil {
		return dst, err
	}
	return append(dst, b[:n]...), nil
}

// PeekHeaderSize checks the base header at the start of b (at least
// BaseHeaderSize bytes) and returns hdr_size, so that a stream reader knows
// how many header bytes to read before calling Decode.
func PeekHeaderSize(b []byte) (int, error) {
	if len(b) < BaseHeaderSize {
		return 0, ErrShort
	}
	if b[0] != Version {
		return 0, errorf("version %d, want %d", b[0], Version)
	}
	n := int(b[6])
	if n < BaseHeaderSize || n > MaxHeaderSize {
		return 0, errorf("hdr_size %d outside %d..%d", n, BaseHeaderSize, MaxHeaderSize)
	}
	return n, nil
}

// Decode decodes and validates the header at the start of b and returns its
// length (hdr_size). hdr_size must be exactly what the operation, flags and
// descriptor count call for, and size at least hdr_size.
func (h *Header) Decode(b []byte) (int, error) {
	n, err := PeekHeaderSize(b)
	if err != nil {
		return 0, err
	}
	*h = Header{
		Op:       Op(b[1]),
		Flags:    Flags(binary.LittleEndian.Uint16(b[2:])),
		OpData:   b[4],
		RMACount: b[5],
		ID:       b[7],
	}
	if h.Op > OpWrite {
		return 0, errorf("unknown op %d", b[1])
	}
	if h.HasRMA() && h.RMACount > MaxRMAIov {
		return 0, errorf("op %s with %d RMA descriptors, at most %d", h.Op, h.RMACount, MaxRMAIov)
	}
	if want := h.Size(); n != want {
		return 0, errorf("hdr_size %d, want %d for op %s flags %#x rma_iov_cnt %d", n, want, h.Op, uint16(h.Flags), h.RMACount)
	}
	if len(b) < n {
		return 0, ErrShort
	}
	size := binary.LittleEndian.Uint64(b[8:])
	if size < uint64(n) {
		return 0, errorf("size %d smaller than hdr_size %d", size, n)
	}
	h.Len = size - uint64(n)
	if n > BaseHeaderSize {
		off := BaseHeaderSize
		if h.Flags&FlagRemoteCQData != 0 {
			h.CQData = binary.LittleEndian.Uint64(b[off:])
			off += 8
		}
		if h.HasTag() {
			h.Tag = binary.LittleEndian.Uint64(b[off:])
			off += 8
		}
		if h.HasRMA() {
			for i := range h.RMA[:h.RMACount] {
				r := &h.RMA[i]
				r.Addr = binary.LittleEndian.Uint64(b[off:])
				r.Len = binary.LittleEndian.Uint64(b[off+8:])
				r.Key = binary.LittleEndian.Uint64(b[off+16:])
				off += RMAIovSize
			}
		}
	}
	if err := h.Validate(); err != nil {
		return 0, err
	}
	return n, nil
}

func errorf(format string, a ...any) error {
	return fmt.Errorf("wire: "+format, a...)
}
