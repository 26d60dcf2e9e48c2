package core

import (
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// epRings are an enabled endpoint's work queues (docs/abi.md) and the
// memory regions its requests have used.
type epRings struct {
	tx, rx     *workQueue
	txShm      *ring.Region
	rxShm      *ring.Region
	mrs        map[uint64]*MR // by desc; each held until the endpoint closes
	closed     bool
	injectSize uint64
	poller     Poller   // the provider endpoint, if the engine can drive its progress
	fdPoller   FDPoller // the same, if it has a descriptor to poll
	hot        bool     // in its group's hot list; used by the group's worker only
	sent       bool     // took a send in the group's current pass; used by the worker only
}

// newRingsLocked makes the endpoint's tx and rx rings. Called by Enable
// with e.mu held.
func (e *EP) newRingsLocked() (*epRings, error) {
	fab := e.obj.Dom.fab
	mk := func(name string, size uint64) (*ring.Region, *ring.Ring, error) {
		n, err := ring.RoundUp(size)
		if err != nil {
			return nil, nil, Errorf(fi.EINVAL, "%s_size %d: %v", name, size, err)
		}
		reg, err := fab.alloc(e.obj, name, ring.Size(n))
		if err != nil {
			return nil, nil, err
		}
		r, err := ring.Init(reg.Mem, ring.TypeWork, n, ring.FeatFutex)
		if err != nil {
			reg.Close()
			return nil, nil, Errorf(fi.EIO, "%s ring: %v", name, err)
		}
		return reg, r, nil
	}
	txShm, txr, err := mk("tx", e.info.TxAttr.Size)
	if err != nil {
		return nil, err
	}
	rxShm, rxr, err := mk("rx", e.info.RxAttr.Size)
	if err != nil {
		txShm.Close()
		return nil, err
	}
	rs := &epRings{
		txShm: txShm, rxShm: rxShm, mrs: map[uint64]*MR{}, injectSize: e.info.TxAttr.InjectSize,
	}
	rs.tx = &workQueue{ep: e, rs: rs, r: txr, kind: OpSend}
	rs.rx = &workQueue{ep: e, rs: rs, r: rxr, kind: OpRecv}
	return rs, nil
}

// free gives back the memory of rings that were never started.
func (rs *epRings) free() {
	rs.txShm.Close()
	rs.rxShm.Close()
}

// startRingsLocked hands the rings to the engine, over the enabled
// provider endpoint. Called by Enable with e.mu held.
func (e *EP) startRingsLocked(rs *epRings) {
	rs.poller, _ = e.prov.(Poller)
	rs.fdPoller, _ = e.prov.(FDPoller)
	e.rings = rs
	e.obj.Dom.fab.eng.add(rs, e.engineCPU)
}

// stopRings stops the engine serving the endpoint's rings rs (nil: it had
// none) and unmaps them.
func (e *EP) stopRings(rs *epRings) {
	if rs == nil {
		return
	}
	e.obj.Dom.fab.eng.remove(rs)
	e.ringMu.Lock()
	rs.closed = true
	e.ringMu.Unlock()
	for _, q := range []*workQueue{rs.tx, rs.rx} {
		q.r.SetFlags(ring.Dead)
		q.r.Wake()
	}
	rs.free()
}

// releaseRegions lets go of the memory regions the endpoint's requests
// used (through its rings rs, nil if it had none); the provider endpoint
// is closed, so none is in use.
func (e *EP) releaseRegions(rs *epRings) {
	if rs == nil {
		return
	}
	e.ringMu.Lock()
	mrs := rs.mrs
	rs.mrs = nil
	e.ringMu.Unlock()
	for _, m := range mrs {
		m.obj.drop()
	}
}

// Ring returns the shared memory of the tx or rx ring, for ep/N/tx and
// ep/N/rx.
func (e *EP) Ring(name string) (*ring.Region, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stateClosed {
		return nil, gone(e.obj)
	}
	if e.rings == nil {
		return nil, Errorf(fi.EOPBADSTATE, "endpoint is %s; its rings exist once it is enabled", stateText(e.state))
	}
	if name == "tx" {
		return e.rings.txShm, nil
	}
	return e.rings.rxShm, nil
}

// maxTake bounds the requests consume takes from one queue in one pass, so
// that a queue of failing requests (each an error completion) does not
// hold up the other queues of its group for long.
const maxTake = 256

// consume takes the requests published on q, at most maxTake, and posts
// them. It returns how many it took. Called only by q's engine group.
func (e *EP) consume(q *workQueue) int {
	e.ringMu.Lock()
	defer e.ringMu.Unlock()
	if e.rings == nil || e.rings.closed {
		return 0
	}
	r := q.r
	head, tail := q.head, r.Tail()
	if tail-head > r.Entries() {
		// Not a queue any more: serving it would post (or fail) up to 2^32
		// requests in one pass while the group's other queues wait.
		q.broken = true
		e.requestFailed(&ring.WR{}, q.kind, Errorf(fi.EIO,
			"%s ring: tail %d - head %d is more than its %d entries; the queue is no longer served", q.name(), tail, head, r.Entries()))
		return 0
	}
	n := 0
	for head != tail && n < maxTake {
		w, err := ring.DecodeWR(r.Entry(head))
		var op *Op
		if err == nil {
			op, err = e.opFromWR(&w, q)
		} else {
			err = Errorf(fi.EINVAL, "malformed work request: %w", err)
		}
		if err == nil {
			err = e.post(op, nil)
			if Code(err) == fi.EAGAIN {
				// The provider's queue is full. Mark the queue blocked
				// first, so that a completion from now on unblocks it,
				// then try once more in case one came before.
				q.blocked.Store(true)
				if err = e.post(op, nil); Code(err) == fi.EAGAIN {
					freeOp(op) // made again from the request next time
					break
				}
				q.blocked.Store(false)
			}
			if err != nil {
				freeOp(op) // the provider did not take it
			}
		}
		if err != nil {
			e.requestFailed(&w, q.kind, err)
		}
		head++
		n++
	}
	r.Release(head)
	q.head = head
	return n
}

// wrKinds are the work-request operations the endpoint serves, and the
// kinds of Op they become; an array, so that finding one costs no hashing.
var wrKinds = [...]struct {
	kind OpKind
	ok   bool
}{
	ring.OpSend: {OpSend, true}, ring.OpRecv: {OpRecv, true}, ring.OpTSend: {OpTSend, true},
	ring.OpTRecv: {OpTRecv, true}, ring.OpWrite: {OpWrite, true}, ring.OpRead: {OpRead, true},
	ring.OpAtomic: {OpAtomic, true}, ring.OpFetchAtomic: {OpFetchAtomic, true},
	ring.OpCompareAtomic: {OpCompareAtomic, true},
}

// wrKind is the kind of Op a work-request operation becomes, if the
// endpoint serves it.
func wrKind(op uint8) (OpKind, bool) {
	if int(op) >= len(wrKinds) {
		return 0, false
	}
	return wrKinds[op].kind, wrKinds[op].ok
}

// kindCaps is the capability each kind needs.
var kindCaps = [...]fi.Caps{OpSend: fi.MSG, OpRecv: fi.MSG, OpTSend: fi.TAGGED, OpTRecv: fi.TAGGED, OpWrite: fi.RMA, OpRead: fi.RMA,
	OpAtomic: fi.ATOMIC, OpFetchAtomic: fi.ATOMIC, OpCompareAtomic: fi.ATOMIC}

// injectable reports whether operations of kind k take FI_INJECT: those
// that only send bytes the poster gives (sends, writes, fi_inject_atomic).
func (k OpKind) injectable() bool {
	return k == OpSend || k == OpTSend || k == OpWrite || k == OpAtomic
}

// opFromWR checks a work request taken from the ring q serves and makes
// the operation for it.
func (e *EP) opFromWR(w *ring.WR, q *workQueue) (*Op, error) {
	kind, ok := wrKind(w.Op)
	switch {
	case !ok:
		return nil, Errorf(fi.EINVAL, "unknown operation %d", w.Op)
	case kind.IsRecv() != q.kind.IsRecv():
		return nil, Errorf(fi.EINVAL, "operation %d belongs on the other ring", w.Op)
	case e.info.Caps&kindCaps[kind] == 0:
		return nil, Errorf(fi.EOPNOTSUPP, "operation %d needs %v, which the endpoint does not have", w.Op, kindCaps[kind])
	}
	flags := fi.OpFlags(w.Flags)
	if flags&fi.INJECT != 0 && (!kind.injectable() || w.Len > e.rings.injectSize) {
		return nil, Errorf(fi.EINVAL, "FI_INJECT of %d bytes (inject_size %d)", w.Len, e.rings.injectSize)
	}
	op := newOp()
	op.Kind, op.Flags, op.Context, op.Data, op.Tag, op.Ignore = kind, flags, w.Context, w.Data, w.Tag, w.Ignore
	op.Addr, op.Key, op.desc, op.offset = w.RMAAddr, w.RMAKey, w.Desc, w.Offset
	if err := e.wrBufs(op, w); err != nil {
		freeOp(op)
		return nil, err
	}
	// A connectionless endpoint's sends go to addr; its receives take it
	// as the only sender they accept, with FI_DIRECTED_RECV only.
	directed := !kind.IsRecv() || e.info.Caps&fi.DIRECTED_RECV != 0
	if e.info.EPAttr.Type != fi.EP_MSG && w.Addr != fi.ADDR_UNSPEC && directed {
		var err error
		if op.Peer, err = e.peer(w.Addr); err != nil {
			freeOp(op)
			return nil, err
		}
	}
	return op, nil
}

// wrBufs sets the buffers of op, made from the request w, from the
// memory regions w names.
func (e *EP) wrBufs(op *Op, w *ring.WR) error {
	if !op.Kind.isAtomic() {
		m, err := e.regionFor(w.Desc)
		if err != nil {
			return err
		}
		op.Buf, op.Mem, op.MemOff, err = m.sliceMem(w.Offset, w.Len)
		return err
	}
	op.Datatype, op.AtomicOp = fi.AtomicType(w.Datatype), fi.AtomicOp(w.AtomicOp)
	if err := e.checkAtomic(e.info.EPAttr.Type, op.Kind, op.Datatype, op.AtomicOp, w.Len); err != nil {
		return err
	}
	var m, rm *MR
	var err error
	if usesOperand(op.Kind, op.AtomicOp) {
		if m, err = e.regionFor(w.Desc); err != nil {
			return err
		}
	}
	if op.Kind != OpAtomic {
		if rm, err = e.regionFor(w.ResultDesc); err != nil {
			return err
		}
	}
	return atomicBufs(op, w.Len, m, w.Offset, w.CompareOffset, rm, w.ResultOffset)
}

// peer resolves an fi_addr through the endpoint's AV.
func (e *EP) peer(fiAddr uint64) (fi.Addr, error) {
	e.mu.Lock()
	av := e.av
	e.mu.Unlock()
	if av == nil {
		return fi.Addr{}, Errorf(fi.ENOAV, "no av bound")
	}
	a, ok := av.Lookup(fiAddr)
	if !ok {
		return fi.Addr{}, Errorf(fi.EINVAL, "%s has no fi_addr %d", av.obj, fiAddr)
	}
	return a, nil
}

// regionFor finds the memory region named by desc for this endpoint, and
// holds it until the endpoint closes.
func (e *EP) regionFor(desc uint64) (*MR, error) {
	if m, ok := e.rings.mrs[desc]; ok {
		return m, nil
	}
	o, ok := e.obj.Dom.lookupSerial(KindMR, desc)
	if !ok {
		return nil, Errorf(fi.EINVAL, "no memory region with desc %#x in domain %s", desc, e.obj.Dom.Name)
	}
	if o.Owner != e.obj.Owner {
		return nil, Errorf(fi.EACCES, "memory region %s belongs to another user", o.ID)
	}
	if err := o.hold(); err != nil {
		return nil, err
	}
	m := o.Impl.(*MR)
	e.rings.mrs[desc] = m
	return m, nil
}

// requestFailed reports a request that could not be posted as an error
// completion, on the queue's CQ and counter.
func (e *EP) requestFailed(w *ring.WR, kind OpKind, err error) {
	e.obj.SetErr(WithOp("work request", err))
	if k, ok := wrKind(w.Op); ok && k.IsRecv() == kind.IsRecv() {
		kind = k
	}
	cl := kind.class()
	e.deliver(cl, CQEntry{Context: w.Context, Flags: kind.CQFlags(), Err: Code(err),
		Src: uint64(fi.ADDR_NOTAVAIL), Desc: w.Desc, Buf: w.Offset}, true)
}
