package core

// Shared contexts (fi_endpoint(3), "SHARED CONTEXTS"): stx/N, a shared
// transmit context, and srx/N, a shared receive context with an rx ring
// of its own. docs/design.md, "Shared contexts", says where the work
// happens: in core, above the providers, so that every provider and
// endpoint type has them.

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// SharedCtxEPs is the most endpoints one shared context serves: the
// domains' max_ep_stx_ctx and max_ep_srx_ctx ("The maximum number of
// endpoints that may be associated with a shared transmit context"), at
// most their ep_cnt; libfabric 1.17's tcp reports 8192 for its shared
// receive contexts.
const SharedCtxEPs = 8192

// srxCredits is how many receives of its own, of each kind it takes, core
// keeps posted on each endpoint bound to a shared receive context (fewer
// if the endpoint's rx_size is smaller). A message that arrives in one
// while the context has no receive for it waits in the context, and the
// receive is posted again only when the message is taken: so the messages
// an endpoint holds there are bounded, and a sender beyond them waits as
// it would for an endpoint with no receive posted.
const srxCredits = 16

// ctxAttrs are the attribute files of a shared context: the fields of
// infoFields of its direction (prefix tx_ or rx_), without the prefix, as
// fi_tx_attr and fi_rx_attr name them (tx_ctx_cnt and rx_ctx_cnt are
// fi_ep_attr's).
func ctxAttrs(mu *sync.Mutex, info func() *fi.Info, frozen func() error, prefix string) []Attr {
	var out []Attr
	for _, a := range infoAttrs(mu, info, frozen) {
		if name, ok := strings.CutPrefix(a.Name, prefix); ok && name != "ctx_cnt" {
			a.Name = name
			out = append(out, a)
		}
	}
	return out
}

// STX is a shared transmit context (fi_stx_context). "The use of a shared
// transmit context is mostly opaque to an application. Applications must
// allocate and bind shared transmit contexts to endpoints, but operations
// are posted directly to the endpoint. Shared transmit contexts are not
// associated with completion queues or counters. Completed operations are
// posted to the CQs bound to the endpoint." So it has no ring: the
// endpoints bound to it send through their own tx rings. Its attributes
// are fi_stx_context's attr, writable until an endpoint is bound.
type STX struct {
	obj *Object

	mu   sync.Mutex
	info *fi.Info // its tx_attr is the context's
	eps  int      // endpoints bound to it
}

func newSTX(o *Object) (Impl, error) {
	info := bestInfo(o.Dom, fi.EP_UNSPEC)
	if info == nil {
		return nil, Errorf(fi.ENODATA, "domain %s offers no endpoint", o.Dom.Name)
	}
	return &STX{obj: o, info: info}, nil
}

func (t *STX) Status() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Record{num("eps", t.eps)}
}

func (t *STX) Attrs() []Attr {
	return ctxAttrs(&t.mu, func() *fi.Info { return t.info }, func() error {
		if t.eps > 0 {
			return Errorf(fi.EOPBADSTATE, "%s is bound to %d endpoint(s); set attributes before binding", t.obj, t.eps)
		}
		return nil
	}, "tx_")
}

func (t *STX) Close() error { return nil }

// bind counts an endpoint bound to the context, which holds it.
func (t *STX) bind() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.eps >= SharedCtxEPs {
		return Errorf(fi.ENOSPC, "%s serves %d endpoints already (max_ep_stx_ctx)", t.obj, t.eps)
	}
	if err := t.obj.hold(); err != nil {
		return err
	}
	t.eps++
	return nil
}

// unbind undoes bind.
func (t *STX) unbind() {
	t.mu.Lock()
	t.eps--
	t.mu.Unlock()
	t.obj.drop()
}

// SRX is a shared receive context (fi_srx_context): "Users post receive
// buffers directly to a shared receive context, with the buffers usable by
// any endpoint bound to the shared receive context. Shared receive
// contexts are not associated with completion queues or counters.
// Completed receive operations are posted to the CQs bound to the
// endpoint."
//
// Its rx ring takes receives as an endpoint's does. They wait in the
// context (posted) until a message for them arrives at a bound endpoint.
// Core keeps receives of its own posted on every bound endpoint, with
// buffers the provider sizes to the message (srxCredits); a message
// arriving in one is matched with the oldest posted receive that takes it
// (its kind, its tag under its ignore bits, its source for
// FI_DIRECTED_RECV), copied into that receive's buffer, and completed on
// the receive CQ and counter of the endpoint it arrived at, with the
// receive's context. A message no receive takes waits in the context
// (held) for the next one that does.
type SRX struct {
	obj *Object

	mu     sync.Mutex
	info   *fi.Info // its rx_attr is the context's
	state  string   // stateIdle, stateEnabled or stateClosed
	eps    []*EP    // bound, in bind order
	posted []*srxRecv
	held   []*srxMsg
	rings  *epRings   // the rx ring, after enable
	ringMu sync.Mutex // serialises the engine's consume with closing the ring

	dataMu   readerLock // serialises readers of the data file
	pending  []byte     // the rest of a message a data-file read did not take
	dataRecv *srxRecv   // a receive a poll of the data file posted, for the next read
}

// srxRecv is a receive posted to a shared receive context.
type srxRecv struct {
	kind         OpKind // OpRecv or OpTRecv
	flags        fi.OpFlags
	context      uint64
	buf          []byte
	mr           *MR // the region buf lies in, held (MR.use) until the receive is over; nil for the data file's
	desc, offset uint64
	tag, ignore  uint64
	src          fi.Addr // FI_DIRECTED_RECV: the only sender it takes; zero: any
	// shell, for a receive of the data file (buf nil: the whole
	// message), gets the message; closing the context closes it. Then
	// arrived is closed (for poll).
	shell   chan []byte
	arrived chan struct{}
}

// release lets go of r's memory region: r is over, and its buffer unused.
func (r *srxRecv) release() {
	if r.mr != nil {
		r.mr.unuse()
		r.mr = nil
	}
}

// srxMsg is a message an endpoint bound to the context received.
type srxMsg struct {
	ep   *EP
	kind OpKind // of the receive it arrived in
	data []byte
	c    Completion
}

// takes reports whether r takes message m: "the buffers usable by any
// endpoint bound to the shared receive context".
func (r *srxRecv) takes(m *srxMsg) bool {
	if r.kind != m.kind {
		return false
	}
	if r.kind == OpTRecv && (r.tag^m.c.Tag)&^r.ignore != 0 {
		return false
	}
	return r.src == (fi.Addr{}) || r.src == m.c.Src
}

func newSRX(o *Object) (Impl, error) {
	info := bestInfo(o.Dom, fi.EP_UNSPEC)
	if info == nil {
		return nil, Errorf(fi.ENODATA, "domain %s offers no endpoint", o.Dom.Name)
	}
	// A receive posted to the context names one buffer: its ring takes
	// no segment array (take).
	info.RxAttr.IovLimit = 1
	return &SRX{obj: o, info: info, state: stateIdle}, nil
}

func (s *SRX) Status() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Record{bare("state", s.state), num("eps", len(s.eps)), num("posted", len(s.posted)), num("held", len(s.held))}
}

func (s *SRX) Attrs() []Attr {
	attrs := ctxAttrs(&s.mu, func() *fi.Info { return s.info }, func() error { return s.idleLocked("setting attributes") }, "rx_")
	return append(attrs, Attr{Name: "mapping", Get: func() string { return s.obj.Dom.fab.Shm.Mode }})
}

func (s *SRX) idleLocked(what string) error {
	switch s.state {
	case stateClosed:
		return gone(s.obj)
	case stateEnabled:
		return Errorf(fi.EOPBADSTATE, "%s is enabled; %s must come before enable", s.obj, what)
	}
	return nil
}

// Enable is the ctl verb enable: the context gets its rx ring, and its
// attributes are fixed from then on. Enabling an endpoint bound to it
// enables it too.
func (s *SRX) Enable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.idleLocked("enable"); err != nil {
		return err
	}
	return s.enableLocked()
}

// enableLocked enables the context if it is idle.
func (s *SRX) enableLocked() error {
	switch s.state {
	case stateEnabled:
		return nil
	case stateClosed:
		return gone(s.obj)
	}
	reg, r, err := newWorkRing(s.obj, "rx", s.info.RxAttr.Size, 0)
	if err != nil {
		return err
	}
	rs := &epRings{rxShm: reg}
	rs.rx = &workQueue{to: s, rs: rs, r: r, kind: OpRecv}
	s.rings, s.state = rs, stateEnabled
	s.obj.Dom.fab.eng.add(nil, rs.rx, -1)
	return nil
}

// Ring is the shared memory of the rx ring, for srx/N/rx.
func (s *SRX) Ring() (*ring.Region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return nil, gone(s.obj)
	}
	if s.rings == nil {
		return nil, Errorf(fi.EOPBADSTATE, "%s is idle; its ring exists once it is enabled", s.obj)
	}
	return s.rings.rxShm, nil
}

func (s *SRX) lockRing() bool {
	s.ringMu.Lock()
	return s.rings != nil && !s.rings.closed
}

func (s *SRX) unlockRing() { s.ringMu.Unlock() }

// flush is the context's wrTaker's: its queue takes receives, which no
// provider holds.
func (s *SRX) flush() {}

// take posts the receive of the work request w. Called by consume, with
// ringMu held.
func (s *SRX) take(w *ring.WR, q *workQueue) error {
	kind, ok := wrKind(w.Op)
	if !ok || !kind.IsRecv() {
		return Errorf(fi.EINVAL, "operation %d: a shared receive context takes receives only", w.Op)
	}
	if w.SegArray() {
		return Errorf(fi.EOPNOTSUPP, "a shared receive context takes one buffer per receive (iov_limit 1)")
	}
	flags := fi.OpFlags(w.Flags)
	if f := flags & (fi.OpFlags(fi.MULTI_RECV) | fi.PEEK | fi.CLAIM | fi.DISCARD | fi.INJECT); f != 0 {
		return Errorf(fi.EOPNOTSUPP, "%v on a shared receive context", f)
	}
	m, err := s.rings.mrs.find(s.obj, w.Desc)
	if err != nil {
		return err
	}
	if !m.use() {
		return unknownDesc(s.obj.Dom, w.Desc)
	}
	r := &srxRecv{kind: kind, flags: flags, context: w.Context, mr: m, desc: w.Desc, offset: w.Offset, tag: w.Tag, ignore: w.Ignore}
	if err := s.postFrom(r, w); err != nil {
		r.release()
		return err
	}
	return nil
}

// postFrom posts r, holding its region, with the buffer and sender the
// work request w names.
func (s *SRX) postFrom(r *srxRecv, w *ring.WR) error {
	var err error
	if r.buf, _, _, err = r.mr.sliceMem(w.Offset, w.Len); err != nil {
		return err
	}
	if w.Addr != fi.ADDR_UNSPEC {
		s.mu.Lock()
		directed, eps := s.info.RxAttr.Caps&fi.DIRECTED_RECV != 0, slices.Clone(s.eps)
		s.mu.Unlock()
		if directed {
			if r.src, err = s.source(eps, w.Addr); err != nil {
				return err
			}
		}
	}
	return s.post(r)
}

// post gives receive r the oldest message held that it takes, or holds
// it, as one of at most attr/size; fi.EAGAIN beyond.
func (s *SRX) post(r *srxRecv) error {
	s.mu.Lock()
	switch s.state {
	case stateClosed:
		s.mu.Unlock()
		return gone(s.obj)
	case stateIdle:
		s.mu.Unlock()
		return Errorf(fi.EOPBADSTATE, "%s is idle; enable it first", s.obj)
	}
	for i, m := range s.held {
		if r.takes(m) {
			s.held = slices.Delete(s.held, i, i+1)
			s.mu.Unlock()
			s.complete(r, m)
			return nil
		}
	}
	if len(s.posted) >= int(s.rings.rx.r.Entries()) {
		s.mu.Unlock()
		return fi.EAGAIN
	}
	s.posted = append(s.posted, r)
	s.mu.Unlock()
	return nil
}

// source resolves fi_addr a through the AV of one of the endpoints eps,
// bound to the context: "all connectionless endpoints associated with a
// shared receive context must also share the same address vector".
func (s *SRX) source(eps []*EP, a uint64) (fi.Addr, error) {
	for _, e := range eps {
		if addr, err := e.peer(a); err == nil {
			return addr, nil
		}
	}
	return fi.Addr{}, Errorf(fi.EINVAL, "no endpoint bound to %s has fi_addr %d in its av", s.obj, a)
}

// requestFailed reports a receive that could not be posted: the error
// goes to err and, as a completion, to the receive CQ of the first bound
// endpoint, the context having none of its own.
func (s *SRX) requestFailed(w *ring.WR, kind OpKind, err error) {
	s.obj.SetErr(WithOp("work request", err))
	if k, ok := wrKind(w.Op); ok && k.IsRecv() {
		kind = k
	}
	s.toFirst(CQEntry{Context: w.Context, Flags: kind.CQFlags(), Err: Code(err), Src: uint64(fi.ADDR_NOTAVAIL),
		Desc: w.Desc, Buf: w.Offset})
}

// toFirst delivers an entry that belongs to no endpoint (a failed or
// cancelled receive) to the first bound endpoint's receive CQ; with none
// bound there is nowhere to report it.
func (s *SRX) toFirst(ent CQEntry) {
	s.mu.Lock()
	var e *EP
	if len(s.eps) > 0 {
		e = s.eps[0]
	}
	s.mu.Unlock()
	if e != nil {
		e.deliver(classRecv, ent, true)
	}
}

// Cancel is fi_cancel on the context: its posted receive with this
// context completes with FI_ECANCELED.
func (s *SRX) Cancel(context uint64) error {
	r := s.withdraw(func(r *srxRecv) bool { return r.shell == nil && r.context == context })
	if r == nil {
		return Errorf(fi.ENOENT, "no cancelable receive with context %#x", context)
	}
	r.release()
	s.toFirst(CQEntry{Context: r.context, Flags: r.kind.CQFlags(), Err: fi.ECANCELED, Src: uint64(fi.ADDR_NOTAVAIL),
		Desc: r.desc, Buf: r.offset})
	return nil
}

// withdraw takes the first posted receive that f chooses back, if there
// is one.
func (s *SRX) withdraw(f func(*srxRecv) bool) *srxRecv {
	s.mu.Lock()
	i := slices.IndexFunc(s.posted, f)
	if i < 0 {
		s.mu.Unlock()
		return nil
	}
	r := s.posted[i]
	s.posted = slices.Delete(s.posted, i, i+1)
	rings := s.rings
	s.mu.Unlock()
	rings.rx.unblock()
	return r
}

// ReadData is a read of srx/N/data, the shell's receive: at offset 0 it
// posts a receive of the next message, of any size, untagged, from any
// sender, and waits for it (its completion goes to the receive CQ of the
// endpoint that got it, as every receive's); further reads return the
// rest of the message, then 0 (end of file). A read interrupted before a
// message came takes its receive back (fi.EINTR).
func (s *SRX) ReadData(ctx context.Context, p []byte, off int64) (int, error) {
	s.dataMu.lock()
	defer s.dataMu.unlock()
	if len(s.pending) == 0 {
		if off != 0 {
			return 0, nil
		}
		r := s.dataRecv
		s.dataRecv = nil
		if r == nil {
			var err error
			if r, err = s.postData(); err != nil {
				return 0, err
			}
		}
		var msg []byte
		ok := true
		select {
		case msg, ok = <-r.shell:
		case <-ctx.Done():
			if s.withdraw(func(x *srxRecv) bool { return x == r }) != nil {
				return 0, Errorf(fi.EINTR, "interrupted")
			}
			msg, ok = <-r.shell // it completed meanwhile, or the context closed
		}
		if !ok {
			return 0, gone(s.obj)
		}
		s.pending = msg
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// postData posts the receive of a read of the data file. Called with
// dataMu held.
func (s *SRX) postData() (*srxRecv, error) {
	s.mu.Lock()
	flags := s.info.RxAttr.OpFlags &^ fi.OpFlags(fi.MULTI_RECV)
	s.mu.Unlock()
	r := &srxRecv{kind: OpRecv, flags: flags, shell: make(chan []byte, 1), arrived: make(chan struct{})}
	if err := s.post(r); err != nil {
		return nil, err
	}
	return r, nil
}

// DataReady is poll(2) on srx/N/data, as EP.DataReady: with post it posts
// the receive the next read would post, and reports whether it has a
// message (or the read would fail at once).
func (s *SRX) DataReady(post bool) (bool, <-chan struct{}) {
	locked, freed := s.dataMu.tryLock()
	if !locked {
		return false, freed
	}
	defer s.dataMu.unlock()
	if len(s.pending) > 0 {
		return true, nil
	}
	if s.dataRecv == nil {
		if !post {
			return false, nil
		}
		r, err := s.postData()
		if err != nil {
			return true, nil
		}
		s.dataRecv = r
	}
	select {
	case <-s.dataRecv.arrived:
		return true, nil
	default:
		return false, s.dataRecv.arrived
	}
}

// bind attaches an idle endpoint to the context. Called with e.mu held.
func (s *SRX) bind(e *EP) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return gone(s.obj)
	}
	if len(s.eps) >= SharedCtxEPs {
		return Errorf(fi.ENOSPC, "%s serves %d endpoints already (max_ep_srx_ctx)", s.obj, len(s.eps))
	}
	if err := s.obj.hold(); err != nil {
		return err
	}
	s.eps = append(s.eps, e)
	return nil
}

// attach posts core's receives on the enabled endpoint e (srxCredits).
// Called without e.mu, as a provider may complete a receive inside Post.
func (s *SRX) attach(e *EP) {
	e.mu.Lock()
	caps, n := e.info.Caps, min(uint64(srxCredits), e.info.RxAttr.Size)
	e.mu.Unlock()
	if caps&fi.RECV == 0 {
		return
	}
	for _, k := range []OpKind{OpRecv, OpTRecv} {
		if caps&kindCaps[k] == 0 {
			continue
		}
		for range n {
			if err := e.postShared(k); err != nil {
				e.obj.SetErr(WithOp("posting receives for "+s.obj.String(), err))
				return
			}
		}
	}
}

// detach forgets the closed endpoint e and the messages it held, and
// drops its hold.
func (s *SRX) detach(e *EP) {
	s.mu.Lock()
	s.eps = slices.DeleteFunc(s.eps, func(x *EP) bool { return x == e })
	s.held = slices.DeleteFunc(s.held, func(m *srxMsg) bool { return m.ep == e })
	s.mu.Unlock()
	s.obj.drop()
}

// arrived matches a message that arrived in one of core's receives with
// the oldest posted receive that takes it, or holds it.
func (s *SRX) arrived(m *srxMsg) {
	s.mu.Lock()
	if s.state == stateClosed || !slices.Contains(s.eps, m.ep) {
		s.mu.Unlock()
		return
	}
	for i, r := range s.posted {
		if r.takes(m) {
			s.posted = slices.Delete(s.posted, i, i+1)
			rings := s.rings
			s.mu.Unlock()
			s.complete(r, m)
			rings.rx.unblock()
			return
		}
	}
	s.held = append(s.held, m)
	s.mu.Unlock()
}

// complete places message m in receive r and reports it on the receive
// CQ and counter of the endpoint it arrived at; that endpoint gets a
// receive of core's in place of the one m came in. That receive is posted
// from a goroutine of its own: complete runs inside the completion of the
// receive m came in, and a provider may hold there the lock its Post
// takes (rxm's matcher does).
func (s *SRX) complete(r *srxRecv, m *srxMsg) {
	e := m.ep
	if r.shell != nil && r.buf == nil {
		r.buf = m.data
	}
	n := copy(r.buf, m.data)
	r.release()
	ent := CQEntry{Context: r.context, Flags: m.c.Flags | r.kind.CQFlags(), Len: uint64(n), Buf: r.offset,
		Data: m.c.Data, Tag: m.c.Tag, Desc: r.desc}
	if m.c.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		ent.Len = m.c.Len // the remote CQ data of a write: no bytes of its own
	}
	if rest := len(m.data) - n; rest > 0 {
		ent.Err, ent.OLen = fi.ETRUNC, uint64(rest)
	}
	e.mu.Lock()
	ent.source(e.av, m.c.Src, e.info.Caps)
	e.mu.Unlock()
	e.ops.count(int(r.kind), uint64(n), ent.Err != 0 && ent.Err != fi.EADDRNOTAVAIL)
	e.deliver(classRecv, ent, r.flags&fi.COMPLETION != 0)
	if r.shell != nil {
		r.shell <- r.buf[:n]
		close(r.arrived)
	}
	go func() {
		if err := e.postShared(m.kind); err != nil {
			e.obj.SetErr(WithOp("posting a receive for "+s.obj.String(), err))
		}
	}()
}

// Close is fi_close: "Outstanding operations posted to the endpoint when
// fi_close is called will be discarded. Discarded operations will silently
// be dropped, with no completions reported." No endpoint is bound by then:
// each holds the context.
func (s *SRX) Close() error {
	s.mu.Lock()
	s.state = stateClosed
	rs := s.rings
	for _, r := range s.posted {
		r.release()
		if r.shell != nil {
			close(r.shell) // a blocked read of the data file fails
			close(r.arrived)
		}
	}
	s.posted, s.held = nil, nil
	s.mu.Unlock()
	if rs != nil {
		rs.stop(s.obj, &s.ringMu)
		rs.release(&s.ringMu)
	}
	return nil
}

// BindSRX is fi_ep_bind of a shared receive context: "If an endpoint is
// using a shared transmit and/or receive context, the shared contexts
// must be bound to the endpoint. CQs, counters, AV, and shared contexts
// must be bound to endpoints before they are enabled". The endpoint's
// rx_ctx_cnt becomes FI_SHARED_CONTEXT.
func (e *EP) BindSRX(s *SRX) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.srx != nil {
		// "An endpoint may only be associated with a single receive context"
		return Errorf(fi.EINVAL, "%s is bound already", e.srx.obj)
	}
	if err := s.bind(e); err != nil {
		return err
	}
	e.srx = s
	e.info.EPAttr.RxCtxCnt = fi.SHARED_CONTEXT
	return nil
}

// BindSTX is fi_ep_bind of a shared transmit context: "An endpoint may
// only be associated with a single shared transmit context." The
// endpoint's tx_ctx_cnt becomes FI_SHARED_CONTEXT.
func (e *EP) BindSTX(t *STX) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.stx != nil {
		return Errorf(fi.EINVAL, "%s is bound already", e.stx.obj)
	}
	if err := t.bind(); err != nil {
		return err
	}
	e.stx = t
	e.info.EPAttr.TxCtxCnt = fi.SHARED_CONTEXT
	return nil
}

// postShared posts one of core's receives of kind on the endpoint, bound
// to a shared receive context: no buffer (the provider sizes one to the
// message), any tag, any sender. It is no operation of the application's:
// it is in no inflight list, and cancel does not see it.
func (e *EP) postShared(kind OpKind) error {
	e.mu.Lock()
	p := e.prov
	if e.state == stateClosed || p == nil {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	op := &Op{Kind: kind, ep: e, done: sharedArrived}
	if kind == OpTRecv {
		op.Ignore = ^uint64(0)
	}
	return p.Post(op)
}

// sharedArrived is the done function of core's receives for a shared
// receive context.
func sharedArrived(op *Op, c Completion) {
	e := op.ep
	e.mu.Lock()
	s, closed := e.srx, e.state == stateClosed
	e.mu.Unlock()
	if s == nil {
		return
	}
	if c.Err != 0 {
		// Not posted again: an endpoint whose receives fail (its
		// connection is down) would fail the next at once.
		if c.Err != fi.ECANCELED && !closed {
			e.obj.SetErr(WithOp("receive for "+s.obj.String(), Errorf(c.Err, "%v", c.Err)))
		}
		return
	}
	s.arrived(&srxMsg{ep: e, kind: op.Kind, data: placed(op, c), c: c})
}
