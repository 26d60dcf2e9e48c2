package verbs

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// Data operations, shared by RC and UD endpoints. Every operation is one
// work request of the endpoint's QP, signaled, so that its completion
// reaches core (which applies selective completion itself: an operation
// without FI_COMPLETION on a selective binding makes no CQ entry but is
// still counted, and frees its ring slot); the WRID finds the operation.
// The endpoint's one CQ takes both queues' completions.
//
// Progress: the device calls the CQ's notification from its goroutines;
// it drains the CQ there, unless an engine group polls the endpoint
// (core.Poller), which then drains it on its own goroutine. One drainer
// at a time (pollMu) completes operations in the CQ's order.

// pending is a posted operation.
type pending struct {
	op   *core.Op
	mem  opMem
	recv bool
}

// qpBase is the queue pair, CQ and posted operations of an endpoint.
type qpBase struct {
	o              *owned  // the protection domain of the endpoint's owner
	d              *domain // o's
	ev             core.EndpointEvents
	txSize, rxSize int
	inject         int    // the largest FI_INJECT payload: the QP's max_inline_data
	ud             bool   // receives start with the GRH area; sends need an address
	authKey        string // the endpoint's authorization key, which its QP gets

	mu    sync.Mutex // guards the fields below and the embedding endpoint's state
	cq    *ibv.CQ
	qp    *ibv.QP
	next  uint64 // the next WRID
	ops   map[uint64]*pending
	txOut int
	rxOut int
	dead  bool // closed (destroy, or the embedding endpoint's Close): nothing more is posted
	// charged: the QP is charged to the owner as a connection (an RC
	// endpoint's, at Enable), given back when destroy destroys it.
	charged bool

	pollMu   sync.Mutex // one drainer at a time
	wcs      []ibv.WC   // guarded by pollMu
	again    atomic.Bool
	polled   atomic.Bool
	fatal    func(wc *ibv.WC)         // a completion error other than a flush: the QP is in error
	received func()                   // a receive completed, before its operation completes
	source   func(wc *ibv.WC) fi.Addr // UD: the sender of a datagram, if known
}

func (b *qpBase) init(o *owned, ev core.EndpointEvents, tx, rx int, info *fi.Info, ud bool) {
	d := o.d
	b.o, b.d, b.ev, b.txSize, b.rxSize, b.ud = o, d, ev, tx, rx, ud
	if info.EPAttr != nil {
		b.authKey = string(info.EPAttr.AuthKey)
	}
	b.inject = d.dev.attr.MaxInlineData
	if info.TxAttr != nil && info.TxAttr.InjectSize < uint64(b.inject) {
		b.inject = int(info.TxAttr.InjectSize)
	}
	b.ops = map[uint64]*pending{}
	b.wcs = make([]ibv.WC, 32)
}

// createQP makes the endpoint's CQ and QP of type t (in RESET). Called
// with mu held.
func (b *qpBase) createQPLocked(t ibv.QPType) error {
	cq, err := b.d.dev.dev.CreateCQ(b.txSize+b.rxSize, b.notify)
	if err != nil {
		return ibvError("creating a CQ", err)
	}
	sges := uint32(2) // the buffer, then the discard region
	if b.ud {
		sges = 3 // the GRH area first
	}
	a := ibv.QPInitAttr{Type: t, SendCQ: cq, RecvCQ: cq, Cap: ibv.QPCap{
		MaxSendWR: uint32(b.txSize), MaxRecvWR: uint32(b.rxSize), MaxSendSGE: 1, MaxRecvSGE: sges,
		MaxInlineData: uint32(b.inject)}}
	if t == ibv.QPTRC {
		a.Executed = b.executed
	}
	a.TraceUID, a.TracePath, a.AuthKey = core.OwnerOf(b.ev), core.TracePathOf(b.ev), b.authKey
	qp, err := b.o.pd.CreateQP(a)
	if err != nil {
		cq.Destroy()
		return ibvError("creating a QP", err)
	}
	b.pollMu.Lock()
	b.cq, b.qp = cq, qp
	b.pollMu.Unlock()
	return nil
}

// modify is ibv_modify_qp with the QP the endpoint has (EOPBADSTATE once
// it is closed).
func (b *qpBase) modify(a *ibv.QPAttr, mask ibv.QPAttrMask) error {
	b.mu.Lock()
	qp := b.qp
	b.mu.Unlock()
	if qp == nil {
		return core.Errorf(fi.EOPBADSTATE, "verbs: the endpoint has no QP")
	}
	if err := qp.Modify(a, mask); err != nil {
		return ibvError("modifying the QP", err)
	}
	return nil
}

// toError moves the QP to the error state: what is posted completes with
// FI_ECANCELED (IBV_WC_WR_FLUSH_ERR).
func (b *qpBase) toError() {
	b.modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.QPState_)
}

// add registers a posted operation and returns its WRID and the QP to
// post it to, or fi.EAGAIN when its queue is full.
func (b *qpBase) add(p *pending) (uint64, *ibv.QP, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.dead || b.qp == nil:
		return 0, nil, core.Errorf(fi.EOPBADSTATE, "verbs: the endpoint is not enabled, or closed")
	case p.recv && b.rxOut >= b.rxSize, !p.recv && b.txOut >= b.txSize:
		return 0, nil, fi.EAGAIN
	}
	if p.recv {
		b.rxOut++
	} else {
		b.txOut++
	}
	b.next++
	b.ops[b.next] = p
	return b.next, b.qp, nil
}

// take removes the operation of wrid; nil if it is gone.
func (b *qpBase) take(wrid uint64) *pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.ops[wrid]
	if p == nil {
		return nil
	}
	delete(b.ops, wrid)
	if p.recv {
		b.rxOut--
	} else {
		b.txOut--
	}
	return p
}

// postRecv posts a receive: the buffer, then the discard region for the
// rest of a longer message (after the GRH area on UD).
func (b *qpBase) postRecv(op *core.Op) error {
	if op.Flags&fi.OpFlags(fi.MULTI_RECV) != 0 {
		return core.Errorf(fi.EOPNOTSUPP, "verbs: FI_MULTI_RECV is not supported")
	}
	m, err := b.o.opMemory(op, b.d.maxMsg)
	if err != nil {
		return err
	}
	p := &pending{op: op, mem: m, recv: true}
	wrid, qp, err := b.add(p)
	if err != nil {
		m.release(op, 0)
		return err
	}
	var sgs [3]ibv.SGE
	sg := sgs[:0]
	if b.ud {
		sg = append(sg, b.o.discard.sge(0, GRHSize))
	}
	if m.has {
		sg = append(sg, m.sge)
	}
	if rest := b.d.maxMsg - m.bufLen(); rest > 0 {
		sg = append(sg, b.o.discard.sge(GRHSize, rest))
	}
	if err := qp.PostRecv(&ibv.RecvWR{WRID: wrid, SGList: sg}); err != nil {
		b.take(wrid)
		m.release(op, 0)
		return ibvError("posting a receive", err)
	}
	return nil
}

// postSend posts wr for op, with op's buffer as its one entry; an
// injected payload (at most inject bytes) goes inline, copied by the
// device at post. wr is a copy, so that its scatter list can be an array
// on the stack.
func (b *qpBase) postSend(op *core.Op, wr ibv.SendWR) error {
	if op.Flags&fi.INJECT != 0 && len(op.Buf) > b.inject {
		return core.Errorf(fi.EINVAL, "verbs: inject of %d bytes; inject_size is %d", len(op.Buf), b.inject)
	}
	m, err := b.o.opMemory(op, 0)
	if err != nil {
		return err
	}
	return b.postSendMem(op, wr, m)
}

// postSendMem posts wr for op with m as its one entry: op's buffer
// (postSend), or an atomic's result buffer. m is released if the post
// fails.
func (b *qpBase) postSendMem(op *core.Op, wr ibv.SendWR, m opMem) error {
	p := &pending{op: op, mem: m}
	wrid, qp, err := b.add(p)
	if err != nil {
		m.release(op, 0)
		return err
	}
	wr.WRID = wrid
	var sge [1]ibv.SGE
	if m.has {
		sge[0] = m.sge
		wr.SGList = sge[:]
	}
	wr.Flags |= ibv.SendSignaled
	if op.Flags&fi.INJECT != 0 {
		wr.Flags |= ibv.SendInline
	}
	if err := qp.PostSend(&wr); err != nil {
		b.take(wr.WRID)
		m.release(op, 0)
		return ibvError("posting a send", err)
	}
	return nil
}

// executed reports a peer's request that the QP executed on the
// endpoint's memory to its events (FI_RMA_EVENT: the counters bound for
// remote_write and remote_read count it), classed as fi_endpoint(3)'s
// counter bindings class them: an RDMA write (an RMA write, or
// FI_ATOMIC_WRITE) as FI_RMA|FI_REMOTE_WRITE, an RDMA read as
// FI_RMA|FI_REMOTE_READ, an atomic (fetch-and-add or compare-and-swap:
// the fetching atomics) as FI_ATOMIC|FI_REMOTE_READ. A write with remote
// CQ data is not among them: it completes a receive (complete), which
// reports it. A zero-length write is not reported: the peer endpoint's
// keepalive is one (ep.go), which the application did not write.
func (b *qpBase) executed(access ibv.Access, n, rkey uint32) {
	var flags fi.Caps
	switch access {
	case ibv.AccessRemoteWrite:
		if n == 0 {
			return
		}
		flags = fi.RMA | fi.REMOTE_WRITE
	case ibv.AccessRemoteRead:
		flags = fi.RMA | fi.REMOTE_READ
	case ibv.AccessRemoteAtomic:
		flags = fi.ATOMIC | fi.REMOTE_READ
	default:
		return
	}
	b.mu.Lock()
	dead := b.dead
	b.mu.Unlock()
	if !dead {
		b.ev.Remote(core.Completion{Flags: fi.CQFlags(flags), Len: uint64(n), Key: uint64(rkey)})
	}
}

// notify is the CQ's notification.
func (b *qpBase) notify() {
	if b.polled.Load() {
		b.again.Store(true) // the engine drains it on its next pass
		return
	}
	b.drain()
}

// Poll drains the CQ on the engine's goroutine (core.Poller).
func (b *qpBase) Poll() bool {
	b.polled.Store(true)
	return b.drain()
}

// Park hands the CQ back to its notifications, draining once what came
// meanwhile.
func (b *qpBase) Park() {
	b.polled.Store(false)
	b.drain()
}

// drain completes the operations of every completion in the CQ, and
// reports whether there were any. A notification while another goroutine
// drains makes that one look again.
func (b *qpBase) drain() bool {
	any := false
	for {
		if !b.pollMu.TryLock() {
			b.again.Store(true)
			return any
		}
		b.again.Store(false)
		for b.cq != nil {
			n := b.cq.Poll(b.wcs)
			for i := range b.wcs[:n] {
				b.complete(&b.wcs[i])
			}
			any = any || n > 0
			if n < len(b.wcs) {
				break
			}
		}
		b.pollMu.Unlock()
		if !b.again.Load() {
			return any
		}
	}
}

// complete turns one work completion into its operation's.
func (b *qpBase) complete(wc *ibv.WC) {
	p := b.take(wc.WRID)
	if p == nil {
		return
	}
	op := p.op
	c := core.Completion{Flags: op.Kind.CQFlags()}
	placed := 0
	switch {
	case wc.Status != ibv.WCSuccess:
		c.Err, c.ProvErrno = wcErrno(wc.Status), int(wc.Status)
	case !p.recv:
		c.Len = uint64(len(op.Buf))
	case wc.Opcode == ibv.WCRecvRDMAWithImm:
		// The remote CQ data of a peer's RMA write took the receive
		// (FI_RX_CQ_DATA): as libfabric's verbs reports it.
		c.Flags = fi.CQFlags(fi.RMA | fi.REMOTE_WRITE | fi.REMOTE_CQ_DATA)
		c.Len, c.Data = uint64(wc.ByteLen), uint64(wc.Imm)
	default:
		n := int(wc.ByteLen)
		if b.ud {
			n = max(n-GRHSize, 0)
		}
		buf := p.mem.bufLen()
		placed = min(n, buf)
		c.Len = uint64(placed)
		if n > buf {
			c.Err, c.OLen = fi.ETRUNC, uint64(n-buf)
		}
		if wc.Flags&ibv.WCWithImm != 0 {
			c.Flags |= fi.CQFlags(fi.REMOTE_CQ_DATA)
			c.Data = uint64(wc.Imm)
		}
		if b.source != nil {
			c.Src = b.source(wc)
		}
	}
	p.mem.release(op, placed)
	if p.recv && wc.Status == ibv.WCSuccess && b.received != nil {
		b.received()
	}
	op.Complete(c)
	if wc.Status != ibv.WCSuccess && wc.Status != ibv.WCWRFlushErr && b.fatal != nil {
		b.fatal(wc)
	}
}

// destroy ends the QP and CQ, and completes every operation still posted
// with fi.ECANCELED, in the order they were posted.
func (b *qpBase) destroy() {
	b.mu.Lock()
	b.dead = true
	b.mu.Unlock()
	b.pollMu.Lock()
	b.mu.Lock()
	qp, cq, charged := b.qp, b.cq, b.charged
	b.qp, b.cq, b.charged = nil, nil, false
	b.mu.Unlock()
	if qp != nil {
		qp.Destroy() // discards what is posted, without completions
	}
	if charged {
		core.Give(b.ev, core.Connections, 1)
	}
	if cq != nil {
		for n := cq.Poll(b.wcs); n > 0; n = cq.Poll(b.wcs) {
			for i := range b.wcs[:n] {
				b.complete(&b.wcs[i])
			}
		}
		cq.Destroy()
	}
	b.pollMu.Unlock()
	b.mu.Lock()
	wrids := make([]uint64, 0, len(b.ops))
	for id := range b.ops {
		wrids = append(wrids, id)
	}
	b.mu.Unlock()
	slices.Sort(wrids)
	for _, id := range wrids {
		if p := b.take(id); p != nil {
			p.mem.release(p.op, 0)
			p.op.Complete(core.Completion{Flags: p.op.Kind.CQFlags(), Err: fi.ECANCELED})
		}
	}
}

// wcErrno is the libfabric error of a completion status: FI_ECANCELED for
// a flushed request, FI_ETRUNC for a receive too short for its message,
// FI_EIO for the others, as libfabric's verbs reports them (with the
// status as prov_errno).
func wcErrno(s ibv.WCStatus) fi.Errno {
	switch s {
	case ibv.WCWRFlushErr:
		return fi.ECANCELED
	case ibv.WCLocLenErr:
		return fi.ETRUNC
	}
	return fi.EIO
}
