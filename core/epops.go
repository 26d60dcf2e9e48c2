package core

// An endpoint's operation bookkeeping: posting, delivering completions to
// the bound CQ and counters, the operations in flight, cancel.

import (
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// post starts op on the endpoint; wait, if not nil, gets the completion too.
func (e *EP) post(op *Op, wait func(Completion)) error {
	e.mu.Lock()
	if e.prov == nil || e.state == stateClosed {
		st := e.state
		e.mu.Unlock()
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; enable it first", stateText(st))
	}
	if err := e.refusesLocked(op.Kind); err != nil {
		e.mu.Unlock()
		return err
	}
	if e.sep != nil && e.ctxDir == ctxRx {
		op.RxCtx = uint8(e.ctxIdx) // it takes only the messages sent to its context
	}
	if d := e.info.DomainAttr; d != nil && d.ResourceMgmt == fi.RM_ENABLED {
		// Room for its completion, or FI_EAGAIN (CQ.reserve).
		if cq := e.sinkLocked(op.Kind.class()).cq; cq != nil {
			if err := cq.reserve(op.queue); err != nil {
				e.mu.Unlock()
				return err
			}
			op.credit = cq
		}
	}
	prov := e.prov
	e.inflight.add(op)
	if !op.Kind.IsRecv() {
		e.txBusy++
	}
	e.mu.Unlock()
	// A function value, not a closure: no allocation per operation.
	op.done, op.ep, op.wait = opDone, e, wait
	if trace.On(trace.Data | trace.RMA) {
		e.tracePost(op)
	}
	if err := postTo(prov, op); err != nil {
		e.mu.Lock()
		e.inflight.remove(op)
		if !op.Kind.IsRecv() {
			e.txBusy--
		}
		e.mu.Unlock()
		op.releaseCredit()
		return err
	}
	return nil
}

// releaseCredit gives back the room op held in a CQ (CQ.reserve), if any.
func (op *Op) releaseCredit() {
	if op.credit != nil {
		op.credit.release()
		op.credit = nil
	}
}

// fenced is FI_FENCE for a transmit from the endpoint's ring: fi_rma(3),
// "the requested operation, also known as the fenced operation, and any
// operation posted after the fenced operation will be deferred until all
// previous operations targeting the same peer endpoint have completed".
// While any earlier transmit is in flight (to any peer: a stronger fence)
// it returns EAGAIN, so the tx queue waits at the request, and each
// transmit's completion lets it look again (completed unblocks the queue).
func (e *EP) fenced() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.info.Caps&fi.FENCE == 0 {
		return Errorf(fi.EINVAL, "FI_FENCE needs the FI_FENCE capability, which the endpoint does not have")
	}
	if e.txBusy > 0 {
		return Errorf(fi.EAGAIN, "fenced: %d transmits in flight", e.txBusy)
	}
	return nil
}

// opDone is the done function of the operations an endpoint posts.
func opDone(op *Op, c Completion) { op.ep.completed(op, c) }

// completed delivers the completion of an operation the endpoint posted,
// and lets its work queue, if it waited for room, go on.
func (e *EP) completed(op *Op, c Completion) {
	if trace.On(trace.Data | trace.RMA) {
		e.traceDone(op, c)
	}
	// A receive with FI_MULTI_RECV completes once per message, and is
	// over when its buffer is released.
	final := op.Flags&fi.OpFlags(fi.MULTI_RECV) == 0 || c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0
	op.received(c)
	if final {
		op.mrs.release() // the provider and received are done with its buffers
	}
	// One hold of the lock for the bookkeeping and where the entry goes.
	var rings *epRings
	var q *workQueue // the ring the completion frees room in, if made
	e.mu.Lock()
	if final {
		e.inflight.remove(op)
		if !op.Kind.IsRecv() {
			e.txBusy--
		}
		rings = e.rings
		if rings != nil {
			q = rings.queueFor(op.Kind)
		}
	}
	withdrawn := final && op.withdrawn && c.Err == fi.ECANCELED
	// "Outstanding operations posted to the endpoint when fi_close is
	// called will be discarded. Discarded operations will silently be
	// dropped, with no completions reported" (fi_endpoint(3)), unless
	// the application asked for them (cancel_on_close).
	discarded := e.state == stateClosed && !e.cancelOnClose
	to, av, caps := e.sinkLocked(op.Kind.class()), e.av, e.info.Caps
	e.mu.Unlock()
	if !withdrawn {
		e.ops.count(int(op.Kind), opSize(op, c), c.Err != 0)
	}
	if op.Kind.IsRecv() && c.Err == 0 && c.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		// A peer's write with remote CQ data that took this receive
		// (FI_RX_CQ_DATA: verbs): a remote write too, which the
		// counter bound for remote_write counts, besides the receive.
		e.ops.count(statRemoteWrite, c.Len, false)
		e.count(classRemoteWrite, false)
	}
	if !withdrawn && !discarded {
		ent := CQEntry{Context: op.Context, Flags: c.Flags, Len: c.Len, Buf: op.offset + c.Offset, Data: c.Data,
			Tag: c.Tag, Err: c.Err, ProvErrno: c.ProvErrno, OLen: c.OLen, Desc: op.desc}
		ent.source(av, c.Src, caps)
		to.deliver(ent, op.Flags&fi.COMPLETION != 0)
	}
	if final {
		op.releaseCredit() // after the entry, so that it is never over the room
		// A claim or discard took its buffered message (fi.ENOMSG: there
		// was none; another error leaves it claimable): its slot is free.
		if op.Flags&(fi.CLAIM|fi.DISCARD) != 0 && op.Flags&fi.PEEK == 0 && (c.Err == 0 || c.Err == fi.ETRUNC) {
			if b := e.bufferedArea(); b != nil {
				b.taken(op.Key, e.obj.Serial)
			}
		}
	}
	if op.wait != nil {
		op.wait(c)
	}
	if q != nil {
		q.unblock()
	}
	if final && op.pooled && e.cancelling.Load() == 0 {
		freeOp(op)
	}
}

// opList is an endpoint's posted operations, linked through the Ops
// themselves: adding and removing one costs no hashing and no allocation.
type opList struct {
	head *Op
	n    int // how many
}

func (l *opList) add(op *Op) {
	if op.list != nil {
		return // listed already: a second add would make a loop
	}
	op.list, op.prev, op.next = l, nil, l.head
	if l.head != nil {
		l.head.prev = op
	}
	l.head = op
	l.n++
}

// remove takes op out of the list; an Op not in it (in none, or in
// another endpoint's) stays as it is.
func (l *opList) remove(op *Op) {
	if op.list != l {
		return
	}
	if op.prev != nil {
		op.prev.next = op.next
	} else {
		l.head = op.next
	}
	if op.next != nil {
		op.next.prev = op.prev
	}
	op.list, op.prev, op.next = nil, nil, nil
	l.n--
}

// opPool holds the Ops of work requests that completed: the rings post
// one per request, and reusing them keeps the data path free of
// allocations. An Op goes back only after its final completion, when
// neither the provider (Op.Complete's contract) nor inflight holds it,
// and not while Cancel may hold it without the lock (cancelling).
var opPool = sync.Pool{New: func() any { return new(Op) }}

// newOp is a zeroed Op from the pool, to go back with freeOp.
func newOp() *Op {
	op := opPool.Get().(*Op)
	op.pooled = true
	return op
}

// freeOp lets go of op's memory regions, zeroes it, dropping its buffer
// and callbacks, and pools it.
func freeOp(op *Op) {
	op.mrs.release()
	*op = Op{}
	opPool.Put(op)
}

// source sets the sender of ent, a completion of an endpoint with
// capabilities caps and AV av, from a, the sender's address if the
// provider knows it: Src (source), and with FI_SOURCE_ERR for a sender
// outside av the error: "if the source address cannot be converted into
// a valid fi_addr_t value, fi_cq_readfrom will return -FI_EAVAIL, even if
// the data were received successfully" (fi_cq(3)), the address in
// err_data (Unknown).
func (ent *CQEntry) source(av *AV, a fi.Addr, caps fi.Caps) {
	ent.Src = source(av, a, caps&fi.AV_USER_ID != 0)
	if caps&fi.SOURCE_ERR != 0 && ent.Err == 0 && ent.Src == uint64(fi.ADDR_NOTAVAIL) && a.IP.IsValid() {
		ent.Err, ent.Unknown = fi.EADDRNOTAVAIL, a
	}
}

// source is the fi_addr a completion reports for a sender: its entry in
// av, the endpoint's AV (or the user id inserted with it, with userIDs),
// or FI_ADDR_NOTAVAIL.
func source(av *AV, a fi.Addr, userIDs bool) uint64 {
	if a == (fi.Addr{}) {
		return uint64(fi.ADDR_NOTAVAIL) // the provider does not know: most completions
	}
	if av != nil {
		if i, ok := av.Find(a); ok {
			// FI_AV_USER_ID: "User identifiers are returned with
			// completion data in place of the AV address"
			// (fi_getinfo(3)).
			if id, ok := av.UserID(i); ok && userIDs {
				return id
			}
			return i
		}
	}
	return uint64(fi.ADDR_NOTAVAIL)
}

// deliver reports a completion of an operation of class cl, from the
// provider or from a request that could not be posted. It goes to the CQ
// bound for the class's direction, unless that binding is selective and the
// operation did not ask for an entry (requested: FI_COMPLETION); errors
// always do. Then the counter bound for the class counts it, entry or not:
// "Counters increment on all successful completions, separately from
// whether the operation generates an entry in an event queue" (fi_cntr(3));
// an error counts in its error value. The CQ comes first, so a program
// woken by the counter finds the entry. Every completion of every data path
// passes here; RMA completions will too, with their own classes.
func (e *EP) deliver(cl opClass, ent CQEntry, requested bool) {
	e.mu.Lock()
	to := e.sinkLocked(cl)
	e.mu.Unlock()
	to.deliver(ent, requested)
}

// sink is where the completions of one class go: the CQ bound for its
// direction (sel: the binding is selective) and the counter bound for it.
type sink struct {
	cq   *CQ
	sel  bool
	cntr *Cntr
}

func (e *EP) sinkLocked(cl opClass) sink {
	if classes[cl].rx {
		return sink{e.rxcq, e.rxSel, e.cntrs[cl]}
	}
	return sink{e.txcq, e.txSel, e.cntrs[cl]}
}

func (to sink) deliver(ent CQEntry, requested bool) {
	if to.cq != nil && (ent.Err != 0 || !to.sel || requested) {
		to.cq.post(ent)
	}
	if to.cntr != nil {
		// An FI_EADDRNOTAVAIL receive received its message: a success.
		to.cntr.completed(ent.Err != 0 && ent.Err != fi.EADDRNOTAVAIL)
	}
}

// count counts a completion of class cl on the counter bound for it.
func (e *EP) count(cl opClass, failed bool) {
	e.mu.Lock()
	cntr := e.cntrs[cl]
	e.mu.Unlock()
	if cntr != nil {
		cntr.completed(failed)
	}
}

// Cancel is fi_cancel: it cancels one posted operation with op_context
// context that has not started, the oldest such ("If multiple
// outstanding operations match the context parameter, only one will be
// canceled"), which completes with FI_ECANCELED. Finding none (the
// operation completed, is under way, or never was) is no error, as
// libfabric's providers return 0 then.
func (e *EP) Cancel(context uint64) error {
	e.mu.Lock()
	// The Ops found here are used without the lock: none goes back to
	// the pool meanwhile, even if it completes, lest Cancel cancel a new
	// operation in the same Op.
	e.cancelling.Add(1)
	defer e.cancelling.Add(-1)
	var ops []*Op // newest first: the list adds at its head
	for op := e.inflight.head; op != nil; op = op.next {
		if op.Context == context {
			ops = append(ops, op)
		}
	}
	prov := e.prov
	e.mu.Unlock()
	for i := len(ops) - 1; i >= 0; i-- {
		if prov.Cancel(ops[i]) {
			return nil
		}
	}
	return nil
}
