package core

import (
	"strconv"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// epRings are an enabled endpoint's work queues (docs/abi.md) and the
// memory regions its requests have named. The rings themselves are made
// when the tx or rx file is first opened (Ring), not at enable: their
// memory is charged to the owner at enable (so enable fails when it would
// not fit, as before), but an endpoint driven through its data file never
// has the two memfds, their pages, nor a place in an engine group, whose
// sleeping worker is a thread per groupSize queues.
type epRings struct {
	tx, rx     *workQueue // nil until made; set under the owner's mu
	txShm      *ring.Region
	rxShm      *ring.Region
	txEntries  uint32 // the rings' entries, for the files' sizes before they exist
	rxEntries  uint32
	reserved   int64       // bytes charged at enable that no region holds yet
	mrs        regionCache // the regions its requests named
	closed     bool
	injectSize uint64
	poller     Poller   // the provider endpoint, if the engine can drive its progress
	fdPoller   FDPoller // the same, if it has a descriptor to poll
	flusher    Flusher  // the same, if it holds sends for the end of a pass
	hot        bool     // in its group's hot list; used by the group's worker only
	sent       bool     // took a send in the group's current pass; used by the worker only
}

// newRingsLocked charges the endpoint's tx and rx rings. Called by Enable
// with e.mu held.
func (e *EP) newRingsLocked() (*epRings, error) { return e.newRingsFor(e.info) }

// newRingsFor checks the sizes of the endpoint's tx and rx rings, of the
// sizes and inject size of info, and charges their memory to its owner;
// makeRingsLocked makes them.
func (e *EP) newRingsFor(info *fi.Info) (*epRings, error) {
	tx, err := ringEntries("tx", info.TxAttr.Size)
	if err != nil {
		return nil, err
	}
	rx, err := ringEntries("rx", info.RxAttr.Size)
	if err != nil {
		return nil, err
	}
	size := ring.Size(tx) + ring.Size(rx)
	if err := e.obj.Dom.fab.takeMemory(e.obj, "tx and rx", size); err != nil {
		return nil, err
	}
	return &epRings{txEntries: tx, rxEntries: rx, reserved: int64(size), injectSize: info.TxAttr.InjectSize}, nil
}

// ringEntries is the entries of the work ring called name of at least
// size entries.
func ringEntries(name string, size uint64) (uint32, error) {
	n, err := ring.RoundUp(size)
	if err != nil {
		return 0, Errorf(fi.EINVAL, "%s_size %d: %v", name, size, err)
	}
	return n, nil
}

// makeRingsLocked makes the rings of rs in the memory charged at enable,
// if they do not exist yet, and hands them to the engine. A failure keeps
// what was made, for the next try. Called with e.mu held, on an endpoint
// that is not closed.
func (e *EP) makeRingsLocked(rs *epRings) error {
	if rs.tx != nil {
		return nil
	}
	for _, r := range []struct {
		name    string
		entries uint32
		shm     **ring.Region
	}{{"tx", rs.txEntries, &rs.txShm}, {"rx", rs.rxEntries, &rs.rxShm}} {
		if *r.shm != nil {
			continue
		}
		size := ring.Size(r.entries)
		reg, err := e.obj.Dom.fab.allocTaken(e.obj, r.name, size)
		rs.reserved -= int64(size) // given back by the region's close, or by allocTaken's failure
		if err != nil {
			// Charge it again for the next try, which free gives back
			// if there is none.
			if terr := e.obj.Dom.fab.takeMemory(e.obj, r.name, size); terr == nil {
				rs.reserved += int64(size)
			}
			return err
		}
		*r.shm = reg
	}
	txr, err := ring.Init(rs.txShm.Mem, ring.TypeWork, rs.txEntries, ring.FeatFutex|ring.FeatIOV)
	if err != nil {
		return Errorf(fi.EIO, "tx ring: %v", err)
	}
	rxr, err := ring.Init(rs.rxShm.Mem, ring.TypeWork, rs.rxEntries, ring.FeatFutex|ring.FeatIOV)
	if err != nil {
		return Errorf(fi.EIO, "rx ring: %v", err)
	}
	tx := &workQueue{to: e, rs: rs, r: txr, kind: OpSend}
	rx := &workQueue{to: e, rs: rs, r: rxr, kind: OpRecv}
	e.obj.Dom.fab.eng.add(tx, rx, e.engineCPU)
	rs.tx, rs.rx = tx, rx
	return nil
}

// newWorkRing makes the work ring called name of o, of at least size
// entries, in shared memory charged to o's owner; its header has
// FeatFutex and the features feat.
func newWorkRing(o *Object, name string, size uint64, feat uint64) (*ring.Region, *ring.Ring, error) {
	n, err := ringEntries(name, size)
	if err != nil {
		return nil, nil, err
	}
	reg, err := o.Dom.fab.alloc(o, name, ring.Size(n))
	if err != nil {
		return nil, nil, err
	}
	r, err := ring.Init(reg.Mem, ring.TypeWork, n, ring.FeatFutex|feat)
	if err != nil {
		reg.Close()
		return nil, nil, Errorf(fi.EIO, "%s ring: %v", name, err)
	}
	return reg, r, nil
}

// free gives back the memory of the rings, made or only charged.
func (rs *epRings) free(f *Fabric, owner uint32) {
	for _, m := range []*ring.Region{rs.txShm, rs.rxShm} {
		if m != nil {
			m.Close()
		}
	}
	if rs.reserved > 0 {
		f.Give(owner, MemoryBytes, rs.reserved)
		rs.reserved = 0
	}
}

// queues are the rings' work queues that exist: tx and rx, or a shared
// receive context's rx alone, or none before the rings are made.
func (rs *epRings) queues() []*workQueue {
	switch {
	case rs.rx == nil:
		return nil
	case rs.tx == nil:
		return []*workQueue{rs.rx}
	}
	return []*workQueue{rs.tx, rs.rx}
}

// queueFor is the queue operations of kind k are posted on: rx for
// receives, tx for the rest; nil before the rings are made. Called with
// the owner's mu held.
func (rs *epRings) queueFor(k OpKind) *workQueue {
	if k.IsRecv() {
		return rs.rx
	}
	return rs.tx
}

// startRingsLocked makes rs the endpoint's rings, over the enabled
// provider endpoint; the engine serves them once they are made
// (makeRingsLocked). Called by Enable with e.mu held.
func (e *EP) startRingsLocked(rs *epRings) {
	rs.poller, _ = e.prov.(Poller)
	rs.fdPoller, _ = e.prov.(FDPoller)
	rs.flusher, _ = e.prov.(Flusher)
	e.rings = rs
}

// stopRings stops the engine serving the endpoint's rings rs (nil: it had
// none) and unmaps them.
func (e *EP) stopRings(rs *epRings) {
	if rs != nil {
		rs.stop(e.obj, &e.ringMu)
	}
}

// Kick is the doorbell of the endpoint's rings (ctl verb kick): it wakes
// the engine's worker serving them, for a producer that posts requests
// without futex_wake on the ring's wake word (docs/abi.md).
func (e *EP) Kick() error {
	e.mu.Lock()
	rs := e.rings
	var rx *workQueue
	if rs != nil {
		rx = rs.rx
	}
	e.mu.Unlock()
	if rs == nil {
		return Errorf(fi.EOPBADSTATE, "endpoint is not enabled; it has no rings")
	}
	if rx != nil { // else no ring was opened: nothing can be posted
		e.obj.Dom.fab.eng.kick(rx)
	}
	return nil
}

// Kick is EP.Kick for the context's rx ring.
func (s *SRX) Kick() error {
	s.mu.Lock()
	rs := s.rings
	s.mu.Unlock()
	if rs == nil {
		return Errorf(fi.EOPBADSTATE, "shared receive context is not enabled; it has no ring")
	}
	s.obj.Dom.fab.eng.kick(rs.rx)
	return nil
}

// stop has the engine stop serving the rings of o, marks them dead, and
// unmaps them; mu is o's lock of lockRing. o is closed: no ring is made
// from now on.
func (rs *epRings) stop(o *Object, mu *sync.Mutex) {
	qs := rs.queues()
	if len(qs) > 0 {
		o.Dom.fab.eng.remove(rs)
	}
	mu.Lock()
	rs.closed = true
	mu.Unlock()
	for _, q := range qs {
		q.r.SetFlags(ring.Dead)
		q.r.Wake()
	}
	rs.free(o.Dom.fab, o.Owner)
}

// releaseRegions forgets the memory regions the endpoint's requests
// named (through its rings rs, nil if it had none).
func (e *EP) releaseRegions(rs *epRings) {
	if rs != nil {
		rs.release(&e.ringMu)
	}
}

// release forgets the memory regions the rings' requests named; mu is
// their owner's lock of lockRing. The operations hold what they use.
func (rs *epRings) release(mu *sync.Mutex) {
	mu.Lock()
	rs.mrs = regionCache{}
	mu.Unlock()
}

// Ring returns the shared memory of the tx or rx ring, for ep/N/tx and
// ep/N/rx, making both rings on first use.
func (e *EP) Ring(name string) (*ring.Region, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ringsLocked(); err != nil {
		return nil, err
	}
	if err := e.makeRingsLocked(e.rings); err != nil {
		return nil, err
	}
	if name == "tx" {
		return e.rings.txShm, nil
	}
	return e.rings.rxShm, nil
}

// RingSize is the size of the tx or rx ring's file, whether or not the
// ring has been made, so that a stat of the file does not make it.
func (e *EP) RingSize(name string) (uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ringsLocked(); err != nil {
		return 0, err
	}
	if name == "tx" {
		return uint64(ring.Size(e.rings.txEntries)), nil
	}
	return uint64(ring.Size(e.rings.rxEntries)), nil
}

// ringsLocked reports why the endpoint has no rings, if it has none.
func (e *EP) ringsLocked() error {
	switch {
	case e.state == stateClosed:
		return gone(e.obj)
	case e.scalable:
		return Errorf(fi.EOPNOTSUPP, "%s is a scalable endpoint; its contexts have the rings", e.obj)
	case e.rings == nil:
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; its rings exist once it is enabled", stateText(e.state))
	}
	return nil
}

// sizeLeft is attr/tx_size_left (rx false) or rx_size_left:
// fi_tx_size_left and fi_rx_size_left, "a lower bound on the number of
// transmit operations that may be posted to the given endpoint without
// that operation returning -FI_EAGAIN": the free entries of the ring, "-"
// while it has none (fi_endpoint(3)'s FI_EOPBADSTATE before enable).
func (e *EP) sizeLeft(rx bool) string {
	e.mu.Lock()
	rs := e.rings
	var q *workQueue
	free := uint64(0)
	if rs != nil {
		q, free = rs.tx, uint64(rs.txEntries)
		if rx {
			q, free = rs.rx, uint64(rs.rxEntries)
		}
	}
	e.mu.Unlock()
	if rs == nil {
		return "-"
	}
	if q == nil { // not made yet: empty
		return strconv.FormatUint(free, 10)
	}
	e.ringMu.Lock()
	defer e.ringMu.Unlock()
	if rs.closed {
		return "-"
	}
	return strconv.FormatUint(uint64(q.r.Free()), 10)
}

// maxTake bounds the requests consume takes from one queue in one pass, so
// that a queue of failing requests (each an error completion) does not
// hold up the other queues of its group for long.
const maxTake = 256

// consume takes the requests published on q, at most maxTake, and hands
// them to the queue's taker. It returns how many it took. Called only by
// q's engine group.
func (q *workQueue) consume() int {
	t := q.to
	if !t.lockRing() {
		t.unlockRing()
		return 0
	}
	defer t.unlockRing()
	r := q.r
	head, tail := q.head, r.Tail()
	if tail-head > r.Entries() {
		// Not a queue any more: serving it would post (or fail) up to 2^32
		// requests in one pass while the group's other queues wait.
		q.broken = true
		t.requestFailed(&ring.WR{}, q.kind, Errorf(fi.EIO,
			"%s ring: tail %d - head %d is more than its %d entries; the queue is no longer served", q.name(), tail, head, r.Entries()))
		return 0
	}
	n := 0
	w := &q.wr
	for head != tail && n < maxTake {
		var err error
		*w, err = ring.DecodeWR(r.Entry(head))
		if err == nil {
			err = t.take(w, q)
			if Code(err) == fi.EAGAIN {
				// The taker's queue is full. Mark the queue blocked
				// first, so that a completion from now on unblocks it,
				// then try once more in case one came before.
				q.blocked.Store(true)
				if err = t.take(w, q); Code(err) == fi.EAGAIN {
					break // taken again next time
				}
				q.blocked.Store(false)
			}
		} else {
			err = Errorf(fi.EINVAL, "malformed work request: %w", err)
		}
		if err != nil {
			t.requestFailed(w, q.kind, err)
		}
		head++
		n++
	}
	r.Release(head)
	q.head = head
	if n > 0 && !q.kind.IsRecv() {
		t.flush()
	}
	return n
}

// lockRing is the endpoint's wrTaker's: ringMu, and whether the rings are
// still served.
func (e *EP) lockRing() bool {
	e.ringMu.Lock()
	return e.rings != nil && !e.rings.closed
}

func (e *EP) unlockRing() { e.ringMu.Unlock() }

// flush is the endpoint's wrTaker's: the provider endpoint writes the
// sends of the pass it held (Flusher).
func (e *EP) flush() {
	if f := e.rings.flusher; f != nil {
		f.Flush()
	}
}

// take posts the operation of the work request w from the ring q. A
// receive on an endpoint bound to a shared receive context is refused:
// receives are posted to the context (fi_endpoint(3): "Users post receive
// buffers directly to a shared receive context").
func (e *EP) take(w *ring.WR, q *workQueue) error {
	if q.kind.IsRecv() && e.srx != nil {
		return Errorf(fi.EOPNOTSUPP, "the endpoint takes its receives from %s; post them there", e.srx.obj)
	}
	if w.Flags&uint64(fi.FENCE) != 0 && !q.kind.IsRecv() {
		if err := e.fenced(); err != nil {
			return err
		}
	}
	op, err := e.opFromWR(w, q)
	if err != nil {
		return err
	}
	if !q.kind.IsRecv() && e.rings.flusher != nil {
		op.Flags |= fi.MORE // written at flush, with the rest of the pass
	}
	op.queue = q // woken when its CQ has room, if it has none now
	if err := e.post(op, nil); err != nil {
		freeOp(op) // the provider did not take it
		return err
	}
	return nil
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
	op := newOp()
	// fi.MORE is the engine's to give (take), not the request's: the
	// engine flushes at the end of every pass anyway.
	op.Kind, op.Flags, op.Context, op.Data, op.Tag, op.Ignore = kind, fi.OpFlags(w.Flags)&^fi.MORE, w.Context, w.Data, w.Tag, w.Ignore
	op.Addr, op.Key, op.desc, op.offset = w.RMAAddr, w.RMAKey, w.Desc, w.Offset
	bufs := e.wrBufs
	if w.SegArray() {
		bufs = e.wrSegs
	}
	if err := bufs(op, w); err != nil {
		freeOp(op)
		return nil, err
	}
	if n := uint64(len(op.Buf)); op.Flags&fi.INJECT != 0 && (!kind.injectable() || n > e.rings.injectSize) {
		freeOp(op)
		return nil, Errorf(fi.EINVAL, "FI_INJECT of %d bytes (inject_size %d)", n, e.rings.injectSize)
	}
	// A connectionless endpoint's sends go to addr; its receives take it
	// as the only sender they accept, with FI_DIRECTED_RECV only.
	directed := !kind.IsRecv() || e.info.Caps&fi.DIRECTED_RECV != 0
	if e.info.EPAttr.Type != fi.EP_MSG && w.Addr != fi.ADDR_UNSPEC && directed {
		var err error
		if op.Peer, op.RxCtx, err = e.peerRx(w.Addr); err != nil {
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
		m, err := e.regionFor(op, w.Desc)
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
		if m, err = e.regionFor(op, w.Desc); err != nil {
			return err
		}
	}
	if op.Kind != OpAtomic {
		if rm, err = e.regionFor(op, w.ResultDesc); err != nil {
			return err
		}
	}
	return atomicBufs(op, w.Len, m, w.Offset, w.CompareOffset, rm, w.ResultOffset)
}

// peer resolves an fi_addr through the endpoint's AV.
func (e *EP) peer(fiAddr uint64) (fi.Addr, error) {
	a, _, err := e.peerRx(fiAddr)
	return a, err
}

// peerRx is peer that also returns the receive context the fi_addr names
// (fi_rx_addr; 0 unless the AV has rx_ctx_bits).
func (e *EP) peerRx(fiAddr uint64) (fi.Addr, uint8, error) {
	e.mu.Lock()
	av := e.av
	e.mu.Unlock()
	if av == nil {
		return fi.Addr{}, 0, Errorf(fi.ENOAV, "no av bound")
	}
	a, rx, ok := av.LookupRx(fiAddr)
	if !ok {
		return fi.Addr{}, 0, Errorf(fi.EINVAL, "%s has no fi_addr %d", av.obj, fiAddr)
	}
	return a, rx, nil
}

// regionFor finds the memory region named by desc for this endpoint's
// operation op, which holds its memory until its final completion.
func (e *EP) regionFor(op *Op, desc uint64) (*MR, error) {
	m, err := e.rings.mrs.find(e.obj, desc)
	if err != nil {
		return nil, err
	}
	if !op.mrs.hold(m) {
		return nil, unknownDesc(e.obj.Dom, desc)
	}
	return m, nil
}

// regionCache finds the memory regions the requests of o's rings name by
// desc, in o's domain and of o's owner: a region found once is found
// again by one map lookup and an atomic load, and a closed one is
// forgotten (and its desc fails, as an unknown one). Its user holds its
// lock of lockRing.
type regionCache struct {
	m       map[uint64]*MR
	sweepAt int // the size at which closed regions are swept out
}

// find returns the live region with desc.
func (c *regionCache) find(o *Object, desc uint64) (*MR, error) {
	if m, ok := c.m[desc]; ok {
		if !m.closed.Load() {
			return m, nil
		}
		delete(c.m, desc)
	}
	r, ok := o.Dom.lookupSerial(KindMR, desc)
	if !ok {
		return nil, unknownDesc(o.Dom, desc)
	}
	if r.Owner != o.Owner {
		return nil, Errorf(fi.EACCES, "memory region %s belongs to another user", r.ID)
	}
	m := r.Impl.(*MR)
	if m.closed.Load() {
		return nil, unknownDesc(o.Dom, desc)
	}
	if c.m == nil {
		c.m = map[uint64]*MR{}
	}
	if len(c.m) >= c.sweepAt {
		// Regions closed and never named again leave: the map stays
		// within twice the live regions named, at a cost per region
		// named of O(1) on average.
		for d, x := range c.m {
			if x.closed.Load() {
				delete(c.m, d)
			}
		}
		c.sweepAt = 2*len(c.m) + 64
	}
	c.m[desc] = m
	return m, nil
}

// unknownDesc is the error of a desc that names no live memory region.
func unknownDesc(d *Domain, desc uint64) error {
	return Errorf(fi.EINVAL, "no memory region with desc %#x in domain %s", desc, d.Name)
}

// opMRs are the memory regions an operation from a ring uses, each held
// once (MR.use) until its final completion, so that closing one keeps
// its memory until then: the array and segments of a segment array, or
// an atomic's operand and result.
type opMRs struct {
	m [ring.IOVLimit + 1]*MR
	n uint8
}

// hold holds m for the operation, once however many of its buffers lie
// in it; false if m is closed.
func (h *opMRs) hold(m *MR) bool {
	for _, x := range h.m[:h.n] {
		if x == m {
			return true
		}
	}
	if int(h.n) == len(h.m) || !m.use() {
		return false
	}
	h.m[h.n] = m
	h.n++
	return true
}

// release lets go of the regions held.
func (h *opMRs) release() {
	for i, m := range h.m[:h.n] {
		m.unuse()
		h.m[i] = nil
	}
	h.n = 0
}

// requestFailed reports a request that could not be posted as an error
// completion, on the queue's CQ and counter.
func (e *EP) requestFailed(w *ring.WR, kind OpKind, err error) {
	e.obj.SetErr(WithOp("work request", err))
	if k, ok := wrKind(w.Op); ok && k.IsRecv() == kind.IsRecv() {
		kind = k
	}
	cl := kind.class()
	e.ops.count(int(kind), 0, true)
	e.deliver(cl, CQEntry{Context: w.Context, Flags: kind.CQFlags(), Err: Code(err),
		Src: uint64(fi.ADDR_NOTAVAIL), Desc: w.Desc, Buf: w.Offset}, true)
}
