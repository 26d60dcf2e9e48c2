package ring

import "fmt"

// WR is a work request, the entry of a work ring (docs/abi.md, "Work
// request"). Field names follow the table; RMAAddr is rma_addr and so on.
type WR struct {
	Op            uint8 // OpSend, OpRecv, ...
	IOVCount      uint8 // iov_count: with RMAIOVCount, the segment-array form if either is not 0
	RMAIOVCount   uint8 // rma_iov_count
	Flags         uint64
	Context       uint64
	Desc          uint64
	Offset        uint64
	Len           uint64
	Addr          uint64
	Data          uint64
	Tag           uint64
	Ignore        uint64
	RMAAddr       uint64
	RMAKey        uint64
	ResultDesc    uint64
	ResultOffset  uint64
	CompareOffset uint64
	Datatype      uint8
	AtomicOp      uint8
}

// Byte offsets of the work request's fields.
const (
	wrOp            = 0
	wrIOVCount      = 1
	wrRMAIOVCount   = 2
	wrReserved1     = 3 // 5 bytes
	wrFlags         = 8
	wrContext       = 16
	wrDesc          = 24
	wrOffset        = 32
	wrLen           = 40
	wrAddr          = 48
	wrData          = 56
	wrTag           = 64
	wrIgnore        = 72
	wrRMAAddr       = 80
	wrRMAKey        = 88
	wrResultDesc    = 96
	wrResultOffset  = 104
	wrCompareOffset = 112
	wrDatatype      = 120
	wrAtomicOp      = 121
	wrReserved2     = 122 // 6 bytes
)

// Encode writes w into b, exactly as docs/abi.md lays it out, reserved bytes
// zero. b must hold EntrySize bytes (it panics otherwise), typically
// r.Entry(i).
func (w *WR) Encode(b []byte) {
	b = b[:EntrySize:EntrySize]
	b[wrOp] = w.Op
	b[wrIOVCount] = w.IOVCount
	b[wrRMAIOVCount] = w.RMAIOVCount
	clear(b[wrReserved1:wrFlags])
	ne.PutUint64(b[wrFlags:], w.Flags)
	ne.PutUint64(b[wrContext:], w.Context)
	ne.PutUint64(b[wrDesc:], w.Desc)
	ne.PutUint64(b[wrOffset:], w.Offset)
	ne.PutUint64(b[wrLen:], w.Len)
	ne.PutUint64(b[wrAddr:], w.Addr)
	ne.PutUint64(b[wrData:], w.Data)
	ne.PutUint64(b[wrTag:], w.Tag)
	ne.PutUint64(b[wrIgnore:], w.Ignore)
	ne.PutUint64(b[wrRMAAddr:], w.RMAAddr)
	ne.PutUint64(b[wrRMAKey:], w.RMAKey)
	ne.PutUint64(b[wrResultDesc:], w.ResultDesc)
	ne.PutUint64(b[wrResultOffset:], w.ResultOffset)
	ne.PutUint64(b[wrCompareOffset:], w.CompareOffset)
	b[wrDatatype] = w.Datatype
	b[wrAtomicOp] = w.AtomicOp
	clear(b[wrReserved2:EntrySize])
}

// DecodeWR reads a work request from b. It fails with a *FieldError if b is
// shorter than EntrySize (field "entry") or a reserved byte is not zero
// (field "reserved"); in the second case the returned WR is still fully
// decoded, so the caller can report the error against its Context. The op
// is not validated: the daemon answers an unknown op per request.
//
// b usually aliases a ring shared with another process, which may change it
// at any time: DecodeWR reads every byte once, so the result is a snapshot.
func DecodeWR(b []byte) (WR, error) {
	if len(b) < EntrySize {
		return WR{}, &FieldError{In: "work request", Field: "entry", Offset: 0,
			Reason: fmt.Sprintf("%d bytes, want %d", len(b), EntrySize)}
	}
	var e [EntrySize]byte
	copy(e[:], b) // one snapshot: validate and decode the same bytes
	w := WR{
		Op:            e[wrOp],
		IOVCount:      e[wrIOVCount],
		RMAIOVCount:   e[wrRMAIOVCount],
		Flags:         ne.Uint64(e[wrFlags:]),
		Context:       ne.Uint64(e[wrContext:]),
		Desc:          ne.Uint64(e[wrDesc:]),
		Offset:        ne.Uint64(e[wrOffset:]),
		Len:           ne.Uint64(e[wrLen:]),
		Addr:          ne.Uint64(e[wrAddr:]),
		Data:          ne.Uint64(e[wrData:]),
		Tag:           ne.Uint64(e[wrTag:]),
		Ignore:        ne.Uint64(e[wrIgnore:]),
		RMAAddr:       ne.Uint64(e[wrRMAAddr:]),
		RMAKey:        ne.Uint64(e[wrRMAKey:]),
		ResultDesc:    ne.Uint64(e[wrResultDesc:]),
		ResultOffset:  ne.Uint64(e[wrResultOffset:]),
		CompareOffset: ne.Uint64(e[wrCompareOffset:]),
		Datatype:      e[wrDatatype],
		AtomicOp:      e[wrAtomicOp],
	}
	if err := checkReserved("work request", e[:], wrReserved1, wrFlags); err != nil {
		return w, err
	}
	if err := checkReserved("work request", e[:], wrReserved2, EntrySize); err != nil {
		return w, err
	}
	return w, nil
}

// SegArray reports whether w is in the segment-array form: its desc,
// offset and len name an array of IOVCount Segs then RMAIOVCount RMASegs.
func (w *WR) SegArray() bool { return w.IOVCount != 0 || w.RMAIOVCount != 0 }

// Seg is a local segment of a work request in the segment-array form
// (docs/abi.md, "Scatter-gather"): Len bytes at Offset of the memory
// region whose desc is Desc.
type Seg struct{ Desc, Offset, Len uint64 }

// RMASeg is a remote segment: Len bytes at Addr of the peer's region
// whose key is Key.
type RMASeg struct{ Addr, Len, Key uint64 }

// Byte offsets of the segments' fields; each segment is SegSize bytes.
const (
	segDesc    = 0
	segOffset  = 8
	segLen     = 16
	rmaSegAddr = 0
	rmaSegLen  = 8
	rmaSegKey  = 16
)

// EncodeSegs writes the segment array of local then remote into b, which
// must hold (len(local)+len(remote))*SegSize bytes (it panics otherwise).
func EncodeSegs(b []byte, local []Seg, remote []RMASeg) {
	for i, s := range local {
		e := b[i*SegSize : (i+1)*SegSize]
		ne.PutUint64(e[segDesc:], s.Desc)
		ne.PutUint64(e[segOffset:], s.Offset)
		ne.PutUint64(e[segLen:], s.Len)
	}
	b = b[len(local)*SegSize:]
	for i, s := range remote {
		e := b[i*SegSize : (i+1)*SegSize]
		ne.PutUint64(e[rmaSegAddr:], s.Addr)
		ne.PutUint64(e[rmaSegLen:], s.Len)
		ne.PutUint64(e[rmaSegKey:], s.Key)
	}
}

// DecodeSegs fills local and then remote from the segment array in b. It
// fails with a *FieldError (field "segments") if b is not exactly
// (len(local)+len(remote))*SegSize bytes. Like DecodeWR it reads each
// byte once: b usually lies in memory another process writes.
func DecodeSegs(b []byte, local []Seg, remote []RMASeg) error {
	if want := (len(local) + len(remote)) * SegSize; len(b) != want {
		return &FieldError{In: "work request", Field: "len", Offset: wrLen,
			Reason: fmt.Sprintf("segment array of %d bytes, want %d (%d+%d segments of %d)", len(b), want, len(local), len(remote), SegSize)}
	}
	var e [SegSize]byte
	for i := range local {
		copy(e[:], b[i*SegSize:])
		local[i] = Seg{Desc: ne.Uint64(e[segDesc:]), Offset: ne.Uint64(e[segOffset:]), Len: ne.Uint64(e[segLen:])}
	}
	b = b[len(local)*SegSize:]
	for i := range remote {
		copy(e[:], b[i*SegSize:])
		remote[i] = RMASeg{Addr: ne.Uint64(e[rmaSegAddr:]), Len: ne.Uint64(e[rmaSegLen:]), Key: ne.Uint64(e[rmaSegKey:])}
	}
	return nil
}

func checkReserved(in string, b []byte, from, to int) error {
	for i := from; i < to; i++ {
		if b[i] != 0 {
			return &FieldError{In: in, Field: "reserved", Offset: from,
				Reason: fmt.Sprintf("byte %d is %#x, want 0", i, b[i])}
		}
	}
	return nil
}

// CQE is a completion, the entry of a completion ring (docs/abi.md,
// "Completion"). Context is op_context, SrcAddr src_addr, OLen olen.
type CQE struct {
	Context   uint64
	Flags     uint64
	Len       uint64
	Buf       uint64
	Data      uint64
	Tag       uint64
	SrcAddr   uint64
	Err       int32 // 0 or a negative FI_E* code
	ProvErrno int32
	OLen      uint64
	Desc      uint64
	// ErrData is err_data: with -FI_EADDRNOTAVAIL (FI_SOURCE_ERR) the
	// sender's address as a struct sockaddr_in or sockaddr_in6, zero
	// otherwise.
	ErrData [ErrDataSize]byte
}

// ErrDataSize is the size of a completion's err_data: room for a struct
// sockaddr_in6 (28 bytes).
const ErrDataSize = 32

// Byte offsets of the completion's fields.
const (
	cqContext   = 0
	cqFlags     = 8
	cqLen       = 16
	cqBuf       = 24
	cqData      = 32
	cqTag       = 40
	cqSrcAddr   = 48
	cqErr       = 56
	cqProvErrno = 60
	cqOLen      = 64
	cqDesc      = 72
	cqErrData   = 80  // ErrDataSize bytes
	cqReserved  = 112 // 16 bytes
)

// Encode writes c into b, exactly as docs/abi.md lays it out, reserved bytes
// zero. b must hold EntrySize bytes (it panics otherwise).
func (c *CQE) Encode(b []byte) {
	b = b[:EntrySize:EntrySize]
	ne.PutUint64(b[cqContext:], c.Context)
	ne.PutUint64(b[cqFlags:], c.Flags)
	ne.PutUint64(b[cqLen:], c.Len)
	ne.PutUint64(b[cqBuf:], c.Buf)
	ne.PutUint64(b[cqData:], c.Data)
	ne.PutUint64(b[cqTag:], c.Tag)
	ne.PutUint64(b[cqSrcAddr:], c.SrcAddr)
	ne.PutUint32(b[cqErr:], uint32(c.Err))
	ne.PutUint32(b[cqProvErrno:], uint32(c.ProvErrno))
	ne.PutUint64(b[cqOLen:], c.OLen)
	ne.PutUint64(b[cqDesc:], c.Desc)
	copy(b[cqErrData:], c.ErrData[:])
	clear(b[cqReserved:EntrySize])
}

// DecodeCQE reads a completion from b, with the same rules as DecodeWR: a
// *FieldError for a short buffer ("entry") or a non-zero reserved byte
// ("reserved", the CQE still decoded).
func DecodeCQE(b []byte) (CQE, error) {
	if len(b) < EntrySize {
		return CQE{}, &FieldError{In: "completion", Field: "entry", Offset: 0,
			Reason: fmt.Sprintf("%d bytes, want %d", len(b), EntrySize)}
	}
	var e [EntrySize]byte
	copy(e[:], b)
	c := CQE{
		Context:   ne.Uint64(e[cqContext:]),
		Flags:     ne.Uint64(e[cqFlags:]),
		Len:       ne.Uint64(e[cqLen:]),
		Buf:       ne.Uint64(e[cqBuf:]),
		Data:      ne.Uint64(e[cqData:]),
		Tag:       ne.Uint64(e[cqTag:]),
		SrcAddr:   ne.Uint64(e[cqSrcAddr:]),
		Err:       int32(ne.Uint32(e[cqErr:])),
		ProvErrno: int32(ne.Uint32(e[cqProvErrno:])),
		OLen:      ne.Uint64(e[cqOLen:]),
		Desc:      ne.Uint64(e[cqDesc:]),
		ErrData:   [ErrDataSize]byte(e[cqErrData:cqReserved]),
	}
	if err := checkReserved("completion", e[:], cqReserved, EntrySize); err != nil {
		return c, err
	}
	return c, nil
}
