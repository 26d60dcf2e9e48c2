package verbs

import (
	"encoding/binary"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// Atomics (fi_atomic(3)) of FI_EP_MSG endpoints, with the device's RC
// atomics, as libfabric 1.17's verbs provider offers them: one element of
// 8 bytes per operation, of the four operations a 64-bit integer device
// does as one work request:
//
//   - FI_ATOMIC_WRITE (fi_atomic): an 8-byte RDMA write;
//   - FI_ATOMIC_READ (fi_fetch_atomic): a fetch-and-add of 0, which reads
//     the 8 bytes atomically among the device's atomics (libfabric's
//     verbs uses an RDMA read, which is not);
//   - FI_SUM (fi_fetch_atomic): a fetch-and-add;
//   - FI_CSWAP (fi_compare_atomic): a compare-and-swap.
//
// The datatypes are FI_INT64 and FI_UINT64: the device adds and compares
// 64-bit integers, which is right for both (two's complement). libfabric
// also lists FI_FLOAT and FI_DOUBLE, which the hardware would add as
// integers; they are refused. The fetching ones place the target's value
// from before the operation in Op.Result, which is memory the device
// writes (FI_MR_LOCAL: Op.ResultMem, or a registration made for the
// operation). The target's memory must be registered with FI_REMOTE_WRITE,
// which gives the device's remote atomic access too (mem.go): FI_ATOMIC_READ
// is a fetch-and-add, so a region registered with FI_REMOTE_READ alone
// refuses it. A bad key is an error completion that ends the connection,
// as for RMA. FI_ATOMIC_WRITE, a plain write, is atomic among writes of
// the same 8 bytes but not against another QP's concurrent fetch-and-add
// or compare-and-swap of them, as on hardware with IBV_ATOMIC_HCA.

// atomicSize is the size of the one element of an atomic operation.
const atomicSize = 8

var _ core.Atomics = (*domain)(nil)

// QueryAtomic answers fi_query_atomic as libfabric's verbs does
// (vrb_query_atomic): for FI_EP_MSG endpoints, count 1 and size 8 for the
// operations above, -FI_ENOSYS for other operations, then -FI_EINVAL for
// datatypes other than FI_INT64 and FI_UINT64. Other endpoint types (and
// the -dgram domain) take no atomics: FI_EOPNOTSUPP.
func (d *domain) QueryAtomic(t fi.EPType, k core.OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error) {
	if d.dgram || t != fi.EP_MSG {
		return 0, 0, core.Errorf(fi.EOPNOTSUPP, "verbs: %v endpoints of domain %s take no atomics", t, d.name)
	}
	if _, ok := atomicOpcode(k, op); !ok {
		return 0, 0, core.Errorf(fi.ENOSYS, "verbs: atomic %v is not supported as operation kind %d", op, k)
	}
	if dt != fi.INT64 && dt != fi.UINT64 {
		return 0, 0, core.Errorf(fi.EINVAL, "verbs: atomic datatype %v is not supported (FI_INT64 and FI_UINT64 are)", dt)
	}
	return 1, atomicSize, nil
}

// atomicOpcode is the work request doing op as an operation of kind k.
func atomicOpcode(k core.OpKind, op fi.AtomicOp) (ibv.WROpcode, bool) {
	switch {
	case k == core.OpAtomic && op == fi.ATOMIC_WRITE:
		return ibv.WRRDMAWrite, true
	case k == core.OpFetchAtomic && (op == fi.ATOMIC_READ || op == fi.SUM):
		return ibv.WRAtomicFetchAndAdd, true
	case k == core.OpCompareAtomic && op == fi.CSWAP:
		return ibv.WRAtomicCmpAndSwp, true
	}
	return 0, false
}

// oneElement checks that b holds exactly one element: a length that is not
// a whole number of elements is FI_EINVAL, a count other than 1 FI_E2BIG,
// as libfabric's verbs refuses it.
func oneElement(what string, b []byte) error {
	switch {
	case len(b)%atomicSize != 0:
		return core.Errorf(fi.EINVAL, "verbs: atomic %s of %d bytes is not a whole number of 8-byte elements", what, len(b))
	case len(b) != atomicSize:
		return core.Errorf(fi.E2BIG, "verbs: atomic %s of %d elements; the count is 1", what, len(b)/atomicSize)
	}
	return nil
}

// postAtomic posts an atomic operation on a connected endpoint.
func (e *rcEndpoint) postAtomic(op *core.Op) error {
	if _, _, err := e.d.QueryAtomic(fi.EP_MSG, op.Kind, op.Datatype, op.AtomicOp); err != nil {
		return err
	}
	opcode, _ := atomicOpcode(op.Kind, op.AtomicOp)
	withData := op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0
	switch {
	case op.Key > 1<<32-1:
		return core.Errorf(fi.EINVAL, "verbs: key %#x is wider than mr_key_size %d", op.Key, MRKeySize)
	case op.Addr%atomicSize != 0:
		return core.Errorf(fi.EINVAL, "verbs: atomic target address %#x is not 8-byte aligned", op.Addr)
	case op.Kind != core.OpAtomic && op.Flags&fi.INJECT != 0:
		return core.Errorf(fi.EINVAL, "verbs: an atomic with a result cannot be injected")
	case op.Kind != core.OpAtomic && withData:
		return core.Errorf(fi.EINVAL, "verbs: an atomic with a result carries no remote CQ data")
	case withData && op.Data > 1<<32-1:
		return core.Errorf(fi.EINVAL, "verbs: remote CQ data %#x is wider than cq_data_size %d", op.Data, CQDataSize)
	}
	if op.Kind != core.OpFetchAtomic || op.AtomicOp != fi.ATOMIC_READ {
		if err := oneElement("operand", op.Buf); err != nil {
			return err
		}
	}
	wr := ibv.SendWR{Opcode: opcode, RemoteAddr: op.Addr, RKey: uint32(op.Key)}
	if op.Kind == core.OpAtomic {
		if withData {
			wr.Opcode, wr.Imm = ibv.WRRDMAWriteWithImm, uint32(op.Data)
		}
		return e.postSend(op, wr)
	}
	if err := oneElement("result", op.Result); err != nil {
		return err
	}
	switch op.AtomicOp {
	case fi.SUM:
		wr.CompareAdd = binary.NativeEndian.Uint64(op.Buf)
	case fi.CSWAP:
		if err := oneElement("compare", op.Compare); err != nil {
			return err
		}
		wr.CompareAdd, wr.Swap = binary.NativeEndian.Uint64(op.Compare), binary.NativeEndian.Uint64(op.Buf)
	}
	m, err := e.o.bufMemory(op.Result, op.ResultMem, op.ResultMemOff)
	if err != nil {
		return err
	}
	return e.postSendMem(op, wr, m)
}
