package shm

import (
	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Atomics (fi_atomic(3)) are done as writes and reads are: inside Post,
// on the target's region as its events resolve it, by package
// core/atomic (the daemon's one atomic engine, under the lock that
// serialises atomics across the daemon, so that they do not interleave
// with those of tcp's or verbs' peers on the same memory). The pairs are
// core/atomic's (libfabric's util table, which libfabric's shm also
// takes); one operation carries at most AtomicSize bytes, half of it for
// compares, as libfabric's shm (SMR_INJECT_SIZE, SMR_COMP_INJECT_SIZE).

// AtomicSize bounds the bytes of one atomic operation: libfabric's
// shm's SMR_INJECT_SIZE; a compare carries half as many.
const AtomicSize = 4096

// atomicKind is the core/atomic kind of an atomic operation kind.
func atomicKind(k core.OpKind) (atomic.Kind, bool) {
	switch k {
	case core.OpAtomic:
		return atomic.Write, true
	case core.OpFetchAtomic:
		return atomic.Fetch, true
	case core.OpCompareAtomic:
		return atomic.Compare, true
	}
	return 0, false
}

// QueryAtomic answers fi_query_atomic (core.Atomics) for FI_EP_RDM, the
// one type: core/atomic's pairs, AtomicSize bytes (half for a compare)
// over the datatype's size.
func (d *domain) QueryAtomic(t fi.EPType, k core.OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error) {
	ak, ok := atomicKind(k)
	switch {
	case t != fi.EP_RDM:
		return 0, 0, core.Errorf(fi.EOPNOTSUPP, "shm: %v endpoints are not offered", t)
	case !ok:
		return 0, 0, core.Errorf(fi.EINVAL, "shm: operation kind %d is not an atomic", k)
	case !atomic.Supported(ak, dt, op):
		return 0, 0, core.Errorf(fi.EOPNOTSUPP, "shm: %v with %v on %v is not supported", ak, op, dt)
	}
	room := AtomicSize
	if ak == atomic.Compare {
		room /= 2
	}
	s := atomic.Size(dt)
	return uint64(room / s), uint64(s), nil
}

var _ core.Atomics = (*domain)(nil)

// atomic applies op to the target's region and reports it there as
// libfabric counts it (fi_atomic as a remote write, the fetching kinds as
// a remote read); the values from before it go to op.Result. It completes
// with len 0, as libfabric's providers report atomics.
func (e *endpoint) atomic(op *core.Op) {
	c := core.Completion{Flags: op.Kind.CQFlags()}
	k, _ := atomicKind(op.Kind)
	n, operand, compare, result := len(op.Buf), op.Buf, []byte(nil), []byte(nil)
	access, remote := fi.REMOTE_WRITE, fi.CQFlags(fi.ATOMIC|fi.REMOTE_WRITE)
	if k != atomic.Write {
		n, result = len(op.Result), op.Result
		access, remote = fi.REMOTE_READ|fi.REMOTE_WRITE, fi.CQFlags(fi.ATOMIC|fi.REMOTE_READ)
	}
	if op.AtomicOp == fi.ATOMIC_READ {
		operand, access = nil, fi.REMOTE_READ
	}
	if k == atomic.Compare {
		compare = op.Compare
	}
	t, perr := e.peer(op.Peer)
	if perr != 0 {
		c.Err = perr
		op.Complete(c)
		return
	}
	buf, release, err := t.ev.Region(op.Key, op.Addr, uint64(n), access)
	if err != nil {
		c.Err = core.Code(err)
		op.Complete(c)
		return
	}
	err = atomic.Apply(k, op.Datatype, op.AtomicOp, buf, operand, compare, result)
	release()
	if err != nil {
		c.Err = core.Code(err)
	} else {
		t.ev.Remote(core.Completion{Flags: remote, Len: uint64(n), Key: op.Key})
	}
	op.Complete(c)
}
