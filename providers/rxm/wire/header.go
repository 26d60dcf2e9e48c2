package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The rxm header: struct rxm_pkt (prov/rxm/src/rxm.h), an ofi_ctrl_hdr and
// an ofi_op_hdr (include/ofi_proto.h), 64 bytes at the start of the payload
// of a tcp OpMsg without the tagged flag.
//
//	off size field
//	0   1    version     CtrlVersion
//	1   1    type        CtrlType
//	2   2    seg_size    CtrlSeg: this segment's payload bytes
//	4   4    seg_no      CtrlSeg: this segment's number, from 0
//	8   8    conn_id     the index the RECEIVER announced in its ConnID
//	16  8    msg_id      the sender's id of the message; echoed in replies
//	24  8    ctrl_data   CtrlSeg: segment type in bits 0-1; CtrlCredit: credits
//	32  1    op version  OpVersion
//	33  1    rx_index    0
//	34  1    op          Op
//	35  1    op_data     0
//	36  4    flags       FlagRemoteCQData or 0
//	40  8    size        message bytes (eager: the payload; rendezvous and
//	                     segments: the whole message; atomics: the body)
//	48  8    data        remote CQ data
//	56  8    tag         tagged messages; atomics: datatype, op, ioc count
//	64       payload or body
const HeaderSize = 64

// CtrlType is ofi_ctrl_hdr.type for rxm (the anonymous enum rxm_ctrl_*).
type CtrlType uint8

const (
	CtrlEager      CtrlType = 0 // rxm_ctrl_eager: message with its payload
	CtrlSeg        CtrlType = 1 // rxm_ctrl_seg: one segment (SAR; not used over tcp by default)
	CtrlRndvReq    CtrlType = 2 // rxm_ctrl_rndv_req: rendezvous request, RndvHeader follows
	CtrlRndvRdDone CtrlType = 3 // rxm_ctrl_rndv_rd_done: the receiver has read the data
	CtrlAtomic     CtrlType = 4 // rxm_ctrl_atomic: atomic request, AtomicRequest follows
	CtrlAtomicResp CtrlType = 5 // rxm_ctrl_atomic_resp: AtomicResponse follows
	CtrlCredit     CtrlType = 6 // rxm_ctrl_credit: flow-control credits (never over tcp)
	CtrlRndvWrData CtrlType = 7 // rxm_ctrl_rndv_wr_data: write rendezvous, receiver's RndvHeader
	CtrlRndvWrDone CtrlType = 8 // rxm_ctrl_rndv_wr_done: write rendezvous, sender has written

	ctrlLast = CtrlRndvWrDone
)

var ctrlNames = [...]string{"eager", "seg", "rndv_req", "rndv_rd_done", "atomic", "atomic_resp",
	"credit", "rndv_wr_data", "rndv_wr_done"}

func (t CtrlType) String() string {
	if int(t) < len(ctrlNames) {
		return ctrlNames[t]
	}
	return fmt.Sprintf("ctrl(%d)", uint8(t))
}

// Op is ofi_op_hdr.op (enum ofi_op, include/ofi_proto.h); rxm uses these.
type Op uint8

const (
	OpMsg           Op = 0 // ofi_op_msg
	OpTagged        Op = 1 // ofi_op_tagged
	OpAtomic        Op = 6 // ofi_op_atomic: fi_atomic
	OpAtomicFetch   Op = 7 // ofi_op_atomic_fetch: fi_fetch_atomic
	OpAtomicCompare Op = 8 // ofi_op_atomic_compare: fi_compare_atomic
)

func (o Op) String() string {
	switch o {
	case OpMsg:
		return "msg"
	case OpTagged:
		return "tagged"
	case OpAtomic:
		return "atomic"
	case OpAtomicFetch:
		return "atomic_fetch"
	case OpAtomicCompare:
		return "atomic_compare"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

func (o Op) isAtomic() bool { return o >= OpAtomic && o <= OpAtomicCompare }

// Flags is ofi_op_hdr.flags: libfabric operation flags (fi.Caps values).
type Flags uint32

// FlagRemoteCQData is FI_REMOTE_CQ_DATA, the only flag rxm sends: data
// holds remote CQ data. rxm ORs the flags into the receiver's completion
// flags as they are.
const FlagRemoteCQData Flags = 1 << 17

// SegType is the segment type of a CtrlSeg message, in the low two bits of
// ctrl_data (union rxm_sar_ctrl_data; the other bits are stale).
type SegType uint8

const (
	SegFirst  SegType = 1 // RXM_SAR_SEG_FIRST
	SegMiddle SegType = 2 // RXM_SAR_SEG_MIDDLE
	SegLast   SegType = 3 // RXM_SAR_SEG_LAST
)

// Header is a decoded rxm header. Every field is kept as it was on the
// wire, including those the message type does not use, where libfabric
// leaves stale values (see Validate).
type Header struct {
	Type     CtrlType
	SegSize  uint16
	SegNo    uint32
	ConnID   uint64
	MsgID    uint64
	CtrlData uint64
	RxIndex  uint8
	Op       Op
	OpData   uint8
	Flags    Flags
	Size     uint64
	Data     uint64
	Tag      uint64
}

// ErrShort means the buffer ends before the header or body does.
var ErrShort = errors.New("rxm: short buffer")

// Eager returns the header of an eager message of n bytes (op OpMsg or
// OpTagged; give FlagRemoteCQData to carry data) for the peer that
// announced index connID.
func Eager(connID uint64, op Op, n uint64, flags Flags, data, tag uint64) Header {
	return Header{Type: CtrlEager, ConnID: connID, Op: op, Flags: flags, Size: n, Data: data, Tag: tag}
}

// RndvReq returns the header of a rendezvous request for a message of n
// bytes; a RndvHeader follows it.
func RndvReq(connID, msgID uint64, op Op, n uint64, flags Flags, data, tag uint64) Header {
	return Header{Type: CtrlRndvReq, ConnID: connID, MsgID: msgID, Op: op, Flags: flags, Size: n, Data: data, Tag: tag}
}

// ReadDone returns a read-done header: the answer to the rendezvous request
// msgID of the peer that announced index connID, once its data is read.
func ReadDone(connID, msgID uint64) Header {
	return Header{Type: CtrlRndvRdDone, ConnID: connID, MsgID: msgID}
}

// SegType returns the segment type of a CtrlSeg header.
func (h *Header) SegType() SegType { return SegType(h.CtrlData & 3) }

// Validate checks the fields that mean something for h's type against what
// libfabric 1.17 sends:
//   - a known type, and a conn_id that fits rxm's int;
//   - eager, segment and rendezvous messages: op OpMsg or OpTagged, no flag
//     but FlagRemoteCQData, eager size and segment size at most EagerLimit,
//     a segment type;
//   - atomics: an atomic op, no flags, a body of at most EagerLimit bytes;
//
// msg_id, rx_index and op_data are not checked, nor any field of a type
// that does not use it.
func (h *Header) Validate() error {
	if h.Type > ctrlLast {
		return errorf("unknown message type %d", uint8(h.Type))
	}
	if h.ConnID > MaxIndex {
		return errorf("%s: conn_id %#x does not fit an int", h.Type, h.ConnID)
	}
	switch h.Type {
	case CtrlEager, CtrlSeg, CtrlRndvReq:
		if h.Op != OpMsg && h.Op != OpTagged {
			return errorf("%s: op %s", h.Type, h.Op)
		}
		if f := h.Flags &^ FlagRemoteCQData; f != 0 {
			return errorf("%s: unknown flags %#x", h.Type, uint32(f))
		}
	case CtrlAtomic, CtrlAtomicResp:
		if !h.Op.isAtomic() {
			return errorf("%s: op %s", h.Type, h.Op)
		}
		if h.Flags != 0 {
			return errorf("%s: flags %#x", h.Type, uint32(h.Flags))
		}
	}
	switch h.Type {
	case CtrlEager:
		if h.Size > EagerLimit {
			return errorf("eager message of %d bytes, at most %d", h.Size, EagerLimit)
		}
	case CtrlSeg:
		if h.SegSize == 0 || h.SegSize > EagerLimit {
			return errorf("segment of %d bytes, want 1..%d", h.SegSize, EagerLimit)
		}
		if h.SegType() == 0 {
			return errorf("segment without a segment type")
		}
	case CtrlAtomic:
		if h.Size < AtomicHeaderSize || h.Size > EagerLimit {
			return errorf("atomic request of %d bytes, want %d..%d", h.Size, AtomicHeaderSize, EagerLimit)
		}
	case CtrlAtomicResp:
		if h.Size < AtomicRespSize || h.Size > EagerLimit {
			return errorf("atomic response of %d bytes, want %d..%d", h.Size, AtomicRespSize, EagerLimit)
		}
	}
	return nil
}

// BodyLen checks h against n, the tcp message's payload length (its size
// minus hdr_size: this header and what follows it), and returns the number
// of bytes after this header. The rendezvous header of a rendezvous request
// or write-data message may be followed by more bytes (FI_BUFFERED_RECV
// sends the start of the message there); every other type's length is
// fixed by the header.
func (h *Header) BodyLen(n uint64) (uint64, error) {
	if n < HeaderSize {
		return 0, errorf("%s: tcp payload of %d bytes, shorter than the header", h.Type, n)
	}
	body := n - HeaderSize
	var want uint64
	switch h.Type {
	case CtrlEager, CtrlAtomic, CtrlAtomicResp:
		want = h.Size
	case CtrlSeg:
		want = uint64(h.SegSize)
	case CtrlRndvReq, CtrlRndvWrData:
		if body < RndvHeaderSize || body > RndvHeaderSize+EagerLimit {
			return 0, errorf("%s: body of %d bytes, want %d..%d", h.Type, body, RndvHeaderSize, RndvHeaderSize+EagerLimit)
		}
		return body, nil
	default:
		want = 0
	}
	if body != want {
		return 0, errorf("%s: body of %d bytes, header says %d", h.Type, body, want)
	}
	return body, nil
}

// Encode validates h and writes it into b (at least HeaderSize bytes).
func (h *Header) Encode(b []byte) error {
	if err := h.Validate(); err != nil {
		return err
	}
	if len(b) < HeaderSize {
		return ErrShort
	}
	b[0] = CtrlVersion
	b[1] = byte(h.Type)
	binary.LittleEndian.PutUint16(b[2:], h.SegSize)
	binary.LittleEndian.PutUint32(b[4:], h.SegNo)
	binary.LittleEndian.PutUint64(b[8:], h.ConnID)
	binary.LittleEndian.PutUint64(b[16:], h.MsgID)
	binary.LittleEndian.PutUint64(b[24:], h.CtrlData)
	b[32] = OpVersion
	b[33] = h.RxIndex
	b[34] = byte(h.Op)
	b[35] = h.OpData
	binary.LittleEndian.PutUint32(b[36:], uint32(h.Flags))
	binary.LittleEndian.PutUint64(b[40:], h.Size)
	binary.LittleEndian.PutUint64(b[48:], h.Data)
	binary.LittleEndian.PutUint64(b[56:], h.Tag)
	return nil
}

// AppendHeader appends the encoding of h to dst.
func AppendHeader(dst []byte, h *Header) ([]byte, error) {
	var b [HeaderSize]byte
	if err := h.Encode(b[:]); err != nil {
		return dst, err
	}
	return append(dst, b[:]...), nil
}

// Decode decodes and validates the header at the start of b.
func (h *Header) Decode(b []byte) error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	if b[0] != CtrlVersion || b[32] != OpVersion {
		return errorf("header versions %d and %d, want %d and %d", b[0], b[32], CtrlVersion, OpVersion)
	}
	d := Header{
		Type:     CtrlType(b[1]),
		SegSize:  binary.LittleEndian.Uint16(b[2:]),
		SegNo:    binary.LittleEndian.Uint32(b[4:]),
		ConnID:   binary.LittleEndian.Uint64(b[8:]),
		MsgID:    binary.LittleEndian.Uint64(b[16:]),
		CtrlData: binary.LittleEndian.Uint64(b[24:]),
		RxIndex:  b[33],
		Op:       Op(b[34]),
		OpData:   b[35],
		Flags:    Flags(binary.LittleEndian.Uint32(b[36:])),
		Size:     binary.LittleEndian.Uint64(b[40:]),
		Data:     binary.LittleEndian.Uint64(b[48:]),
		Tag:      binary.LittleEndian.Uint64(b[56:]),
	}
	if err := d.Validate(); err != nil {
		return err
	}
	*h = d
	return nil
}
