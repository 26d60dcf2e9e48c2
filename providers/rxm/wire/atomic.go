package wire

import (
	"encoding/binary"

	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Atomics over rxm (prov/rxm/src/rxm_atomic.c, rxm_cq.c).
//
// A request is a Header of type CtrlAtomic, op OpAtomic, OpAtomicFetch or
// OpAtomicCompare, whose tag field holds three bytes instead of a tag:
//
//	off size field
//	56  1    datatype   enum fi_datatype
//	57  1    op         enum fi_op
//	58  1    ioc_count  1..4
//	59  5    0
//
// and whose size is the body's length. The body is struct rxm_atomic_hdr
// and the operands:
//
//	off size field
//	0   96   rma_ioc[4]  {addr, count, key}, u64 each (struct fi_rma_ioc);
//	                     count is in elements of the datatype
//	96  n    operand     n = elements * datatype size; none for FI_ATOMIC_READ
//	96+n n   compare     OpAtomicCompare only
//
// The answer is a Header of type CtrlAtomicResp with the request's op,
// datatype and atomic op (ioc_count 0) and msg_id, and this body (struct
// rxm_atomic_resp_hdr), its two numbers BIG-endian (htonl):
//
//	off size field
//	0   4    status      0, or a negative libfabric error code (-FI_EACCES)
//	4   4    result_len  bytes of result
//	8   n    result      the target's values before the operation
//	                     (OpAtomicFetch, OpAtomicCompare); none for OpAtomic
const (
	AtomicHeaderSize = 96 // sizeof(struct rxm_atomic_hdr)
	AtomicRespSize   = 8  // sizeof(struct rxm_atomic_resp_hdr)
	rmaIocSize       = 24
)

// RMAIoc is struct fi_rma_ioc: a remote buffer of Count elements.
type RMAIoc struct {
	Addr, Count, Key uint64
}

// AtomicRequest is a decoded atomic request body with the atomic fields of
// its header. Operand and Compare alias the decoded buffer. Entries of Ioc
// past Count are kept as received.
type AtomicRequest struct {
	Datatype fi.AtomicType
	AtomicOp fi.AtomicOp
	Count    uint8 // valid Ioc entries: ioc_count
	Ioc      [MaxIov]RMAIoc
	Operand  []byte
	Compare  []byte
}

// AtomicResponse is a decoded atomic response body. Result aliases the
// decoded buffer.
type AtomicResponse struct {
	Status int32 // 0 or a negative libfabric error code
	Result []byte
}

// atomicOpValid says whether libfabric allows atomic op a with rxm op o
// (ofi_atomic_iswrite_op, ofi_atomic_isreadwrite_op, ofi_atomic_isswap_op).
func atomicOpValid(o Op, a fi.AtomicOp) bool {
	switch o {
	case OpAtomic:
		return a <= fi.ATOMIC_WRITE && a != fi.ATOMIC_READ
	case OpAtomicFetch:
		return a <= fi.ATOMIC_WRITE
	case OpAtomicCompare:
		return a >= fi.CSWAP && a <= fi.MSWAP
	}
	return false
}

// AtomicTag returns the tag field of an atomic header.
func AtomicTag(t fi.AtomicType, a fi.AtomicOp, count uint8) uint64 {
	return uint64(uint8(t)) | uint64(uint8(a))<<8 | uint64(count)<<16
}

// AtomicFields returns the datatype, atomic op and ioc_count that an
// atomic header carries in its tag field.
func (h *Header) AtomicFields() (fi.AtomicType, fi.AtomicOp, uint8) {
	return fi.AtomicType(uint8(h.Tag)), fi.AtomicOp(uint8(h.Tag >> 8)), uint8(h.Tag >> 16)
}

// operandLen returns the length of the operand (and of the compare data,
// if any) that r's entries call for, or false when they call for more
// elements than an rxm buffer holds.
func (r *AtomicRequest) operandLen(o Op) (uint64, bool) {
	var elems uint64
	for _, v := range r.Ioc[:min(int(r.Count), MaxIov)] {
		if v.Count > EagerLimit {
			return 0, false
		}
		elems += v.Count
	}
	if elems > EagerLimit {
		return 0, false
	}
	if o == OpAtomicFetch && r.AtomicOp == fi.ATOMIC_READ {
		return 0, true
	}
	return elems * uint64(atomic.Size(r.Datatype)), true
}

// Validate checks r for rxm op o: a datatype rxm takes, an atomic op that
// goes with o, 1..4 entries, and operands of the length the entries call
// for.
func (r *AtomicRequest) Validate(o Op) error {
	if !o.isAtomic() {
		return errorf("atomic request with op %s", o)
	}
	if atomic.Size(r.Datatype) == 0 {
		return errorf("atomic request with datatype %d", uint32(r.Datatype))
	}
	if !atomicOpValid(o, r.AtomicOp) {
		return errorf("atomic request %s with atomic op %d", o, uint32(r.AtomicOp))
	}
	if r.Count < 1 || r.Count > MaxIov {
		return errorf("atomic request with %d entries, want 1..%d", r.Count, MaxIov)
	}
	n, ok := r.operandLen(o)
	if !ok {
		return errorf("atomic request of more than %d elements", EagerLimit)
	}
	if uint64(len(r.Operand)) != n {
		return errorf("atomic request with %d operand bytes, entries call for %d", len(r.Operand), n)
	}
	want := uint64(0)
	if o == OpAtomicCompare {
		want = n
	}
	if uint64(len(r.Compare)) != want {
		return errorf("atomic request with %d compare bytes, want %d", len(r.Compare), want)
	}
	if size := AtomicHeaderSize + len(r.Operand) + len(r.Compare); size > EagerLimit {
		return errorf("atomic request of %d bytes does not fit one rxm buffer", size)
	}
	return nil
}

// Header returns the header to send before r's body (r must be valid for
// o): to the peer that announced index connID, with the sender's msgID
// that the response will echo.
func (r *AtomicRequest) Header(connID, msgID uint64, o Op) Header {
	return Header{
		Type:   CtrlAtomic,
		ConnID: connID,
		MsgID:  msgID,
		Op:     o,
		Size:   uint64(AtomicHeaderSize + len(r.Operand) + len(r.Compare)),
		Tag:    AtomicTag(r.Datatype, r.AtomicOp, r.Count),
	}
}

// AppendBody validates r for rxm op o and appends its body to dst.
func (r *AtomicRequest) AppendBody(dst []byte, o Op) ([]byte, error) {
	if err := r.Validate(o); err != nil {
		return dst, err
	}
	var b [AtomicHeaderSize]byte
	for i, v := range r.Ioc {
		off := i * rmaIocSize
		binary.LittleEndian.PutUint64(b[off:], v.Addr)
		binary.LittleEndian.PutUint64(b[off+8:], v.Count)
		binary.LittleEndian.PutUint64(b[off+16:], v.Key)
	}
	dst = append(dst, b[:]...)
	dst = append(dst, r.Operand...)
	return append(dst, r.Compare...), nil
}

// DecodeAtomicRequest decodes and validates the body of the atomic request
// whose header is h (decoded and checked with BodyLen, so len(body) ==
// h.Size).
func DecodeAtomicRequest(h *Header, body []byte) (AtomicRequest, error) {
	if h.Type != CtrlAtomic {
		return AtomicRequest{}, errorf("%s message is not an atomic request", h.Type)
	}
	if uint64(len(body)) != h.Size {
		return AtomicRequest{}, errorf("atomic request body of %d bytes, header says %d", len(body), h.Size)
	}
	if len(body) < AtomicHeaderSize {
		return AtomicRequest{}, ErrShort
	}
	if h.Tag>>24 != 0 {
		return AtomicRequest{}, errorf("atomic request tag %#x has bits above ioc_count", h.Tag)
	}
	var r AtomicRequest
	r.Datatype, r.AtomicOp, r.Count = h.AtomicFields()
	for i := range r.Ioc {
		off := i * rmaIocSize
		r.Ioc[i] = RMAIoc{
			Addr:  binary.LittleEndian.Uint64(body[off:]),
			Count: binary.LittleEndian.Uint64(body[off+8:]),
			Key:   binary.LittleEndian.Uint64(body[off+16:]),
		}
	}
	data := body[AtomicHeaderSize:]
	// Validate below checks the lengths against the entries; split the
	// data as the entries say, or as evenly as a compare needs.
	n := uint64(len(data))
	if h.Op == OpAtomicCompare {
		n /= 2
	}
	r.Operand = data[:n:n]
	r.Compare = data[n:]
	if h.Op != OpAtomicCompare {
		r.Compare = nil
	}
	if err := r.Validate(h.Op); err != nil {
		return AtomicRequest{}, err
	}
	return r, nil
}

// Validate checks r as the answer to a request with rxm op o and datatype
// t: a status of 0 or a negative error code, no result with an error or
// for OpAtomic, and a whole number of elements.
func (r *AtomicResponse) Validate(o Op, t fi.AtomicType) error {
	if !o.isAtomic() {
		return errorf("atomic response with op %s", o)
	}
	size := atomic.Size(t)
	if size == 0 {
		return errorf("atomic response with datatype %d", uint32(t))
	}
	if r.Status > 0 {
		return errorf("atomic response status %d, want 0 or a negative error code", r.Status)
	}
	if len(r.Result) > 0 && (r.Status != 0 || o == OpAtomic) {
		return errorf("atomic response with %d result bytes for %s, status %d", len(r.Result), o, r.Status)
	}
	if len(r.Result)%size != 0 {
		return errorf("atomic response of %d bytes for %d-byte elements", len(r.Result), size)
	}
	if AtomicRespSize+len(r.Result) > EagerLimit {
		return errorf("atomic response of %d bytes does not fit one rxm buffer", AtomicRespSize+len(r.Result))
	}
	return nil
}

// Header returns the header that answers the atomic request req with r.
func (r *AtomicResponse) Header(connID uint64, req *Header) Header {
	t, a, _ := req.AtomicFields()
	return Header{
		Type:   CtrlAtomicResp,
		ConnID: connID,
		MsgID:  req.MsgID,
		Op:     req.Op,
		Size:   uint64(AtomicRespSize + len(r.Result)),
		Tag:    AtomicTag(t, a, 0),
	}
}

// AppendBody validates r as the answer to a request with rxm op o and
// datatype t, and appends its body to dst.
func (r *AtomicResponse) AppendBody(dst []byte, o Op, t fi.AtomicType) ([]byte, error) {
	if err := r.Validate(o, t); err != nil {
		return dst, err
	}
	var b [AtomicRespSize]byte
	binary.BigEndian.PutUint32(b[:], uint32(r.Status))
	binary.BigEndian.PutUint32(b[4:], uint32(len(r.Result)))
	dst = append(dst, b[:]...)
	return append(dst, r.Result...), nil
}

// DecodeAtomicResponse decodes and validates the body of the atomic
// response whose header is h (so len(body) == h.Size). Whether the result
// has the length the request called for is the requester's check: libfabric
// fails the operation with FI_EIO when it does not.
func DecodeAtomicResponse(h *Header, body []byte) (AtomicResponse, error) {
	if h.Type != CtrlAtomicResp {
		return AtomicResponse{}, errorf("%s message is not an atomic response", h.Type)
	}
	if uint64(len(body)) != h.Size {
		return AtomicResponse{}, errorf("atomic response body of %d bytes, header says %d", len(body), h.Size)
	}
	if len(body) < AtomicRespSize {
		return AtomicResponse{}, ErrShort
	}
	t, _, count := h.AtomicFields()
	if count != 0 || h.Tag>>24 != 0 {
		return AtomicResponse{}, errorf("atomic response tag %#x, want ioc_count 0", h.Tag)
	}
	r := AtomicResponse{
		Status: int32(binary.BigEndian.Uint32(body)),
		Result: body[AtomicRespSize:],
	}
	if n := binary.BigEndian.Uint32(body[4:]); uint64(n) != uint64(len(r.Result)) {
		return AtomicResponse{}, errorf("atomic response result_len %d, %d bytes follow", n, len(r.Result))
	}
	if err := r.Validate(h.Op, t); err != nil {
		return AtomicResponse{}, err
	}
	return r, nil
}
