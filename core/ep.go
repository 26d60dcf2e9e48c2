package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Endpoint states, as shown in status.
const (
	stateIdle       = "idle"       // created, attributes still writable
	stateEnabled    = "enabled"    // fi_enable done
	stateConnecting = "connecting" // fi_connect or fi_accept sent, waiting for FI_CONNECTED
	stateConnected  = "connected"
	stateShutdown   = "shutdown" // fi_shutdown, or the peer shut down
	stateRejected   = "rejected"
	stateError      = "error"
	stateClosed     = "closed"
)

// EP is an active endpoint (fi_endpoint): its fi_info, bindings and state,
// over a provider's Endpoint.
type EP struct {
	obj *Object

	mu    sync.Mutex
	info  *fi.Info
	prov  Endpoint // made at enable, or when rejecting a request
	req   ConnReq  // the connection request it was made from, if any
	state string
	txcq  *CQ
	rxcq  *CQ
	txSel bool // FI_SELECTIVE_COMPLETION on the transmit binding
	rxSel bool
	eq    *EQ
	av    *AV
	cntrs [numClasses]*Cntr // bound counters, by class
	opts  map[string]uint64
	// engineCPU is attr/engine_cpu: the CPU whose engine group serves the
	// rings (a group of the endpoints placed there, pinned to it); -1: a
	// shared group, on the engine's CPUs.
	engineCPU int
	inflight  opList // posted and not finally completed
	// cancelling counts the Cancel calls under way: see opPool.
	cancelling atomic.Int32
	rings      *epRings   // after enable
	ringMu     sync.Mutex // serialises the engine's consume with closing the rings

	dataMu     sync.Mutex // serialises readers of the data file
	pending    []byte     // the rest of a message a data-file read did not take
	pendingErr error      // the error a read returns once pending is taken: a truncation
	held       *heldRecv  // a receive an interrupted read left posted, for the next read
	dest       uint64     // FI_EP_RDM, FI_EP_DGRAM: the fi_addr data-file writes go to (ctl dest); ADDR_UNSPEC: none
	shell      dataParams // how the data file sends and receives (ctl tag, src, cqdata, rxbuf)
}

// dataParams are the parameters of the data file's operations that the
// ctl verbs tag, src, cqdata and rxbuf set. The zero value, but for src,
// is fi_send and fi_recv of the whole message from anyone.
type dataParams struct {
	tagged      bool   // writes are fi_tsend with tag; reads fi_trecv of tag under ignore
	tag, ignore uint64 //
	src         uint64 // FI_DIRECTED_RECV: the only sender reads accept; ADDR_UNSPEC: anyone
	hasData     bool   // writes carry remote CQ data (fi_senddata)
	data        uint64 //
	rxbuf       uint64 // the size of a read's receive; 0: the message's
}

var defaultDataParams = dataParams{src: uint64(fi.ADDR_UNSPEC)}

func newEP(o *Object) (Impl, error) {
	info := bestInfo(o.Dom, fi.EP_MSG)
	if info == nil {
		info = bestInfo(o.Dom, fi.EP_UNSPEC) // a domain without FI_EP_MSG (verbs's -dgram)
	}
	if info == nil {
		return nil, Errorf(fi.ENODATA, "domain %s offers no endpoint", o.Dom.Name)
	}
	return &EP{obj: o, info: info, state: stateIdle, opts: map[string]uint64{}, engineCPU: -1,
		dest: uint64(fi.ADDR_UNSPEC), shell: defaultDataParams}, nil
}

// bestInfo returns a copy of the domain's first entry of type t, or of its
// first entry when t is fi.EP_UNSPEC or none has that type.
func bestInfo(d *Domain, t fi.EPType) *fi.Info {
	infos := d.Infos()
	for _, in := range infos {
		if in.EPAttr != nil && in.EPAttr.Type == t {
			return in.Clone()
		}
	}
	if len(infos) > 0 && t == fi.EP_UNSPEC {
		return infos[0].Clone()
	}
	return nil
}

// Info returns a copy of the endpoint's fi_info.
func (e *EP) Info() *fi.Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info.Clone()
}

// BindCQ is fi_ep_bind of a CQ with flags fi.SEND, fi.RECV and
// fi.SELECTIVE_COMPLETION: "FI_SELECTIVE_COMPLETION ... only operations
// that specify the FI_COMPLETION flag ... will generate a completion".
func (e *EP) BindCQ(cq *CQ, send, recv, selective bool) error {
	if !send && !recv {
		return Errorf(fi.EINVAL, "bind cq needs send, recv or both")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if (send && e.txcq != nil) || (recv && e.rxcq != nil) {
		return Errorf(fi.EINVAL, "a cq is already bound for %s", map[bool]string{true: "send", false: "recv"}[send && e.txcq != nil])
	}
	if send {
		if err := cq.bind(); err != nil {
			return err
		}
		e.txcq, e.txSel = cq, selective
	}
	if recv {
		if err := cq.bind(); err != nil {
			return err
		}
		e.rxcq, e.rxSel = cq, selective
	}
	return nil
}

// BindEQ is fi_ep_bind of an event queue.
func (e *EP) BindEQ(eq *EQ) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.eq != nil {
		return Errorf(fi.EINVAL, "an eq is already bound")
	}
	if err := eq.obj.hold(); err != nil {
		return err
	}
	e.eq = eq
	return nil
}

// BindAV is fi_ep_bind of an address vector.
func (e *EP) BindAV(av *AV) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.av != nil {
		return Errorf(fi.EINVAL, "an av is already bound")
	}
	if err := av.obj.hold(); err != nil {
		return err
	}
	e.av = av
	return nil
}

func (e *EP) idleLocked(what string) error {
	if e.state != stateIdle {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; %s must come before enable", stateText(e.state), what)
	}
	return nil
}

// connectionlessLocked reports whether the endpoint is connectionless
// (FI_EP_RDM, FI_EP_DGRAM): it sends to addresses of its AV and has no
// connection of its own.
func (e *EP) connectionlessLocked() bool {
	t := e.info.EPAttr.Type
	return t == fi.EP_RDM || t == fi.EP_DGRAM
}

// setType is a write of attr/type before enable: the endpoint takes the
// domain's best fi_info of that type, replacing every attribute (so write
// the type first, then the others).
func (e *EP) setType(in *fi.Info, s string) error {
	t, err := fi.Parse[fi.EPType](s)
	if err != nil {
		return Errorf(fi.EINVAL, "%w", err)
	}
	if e.req != nil {
		return Errorf(fi.EINVAL, "an endpoint made from a connection request is FI_EP_MSG")
	}
	best := bestInfo(e.obj.Dom, t)
	if best == nil || t == fi.EP_UNSPEC {
		return Errorf(fi.ENODATA, "domain %s offers no %v endpoint", e.obj.Dom.Name, t)
	}
	*in = *best
	e.shell = defaultDataParams // they depend on the capabilities
	return nil
}

// Enable is fi_enable. A connection-oriented endpoint needs an EQ, a
// connectionless one an AV (FI_ENOEQ, FI_ENOAV); both a CQ for each
// direction their capabilities use (FI_ENOCQ).
func (e *EP) Enable() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateIdle {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; it was enabled already", stateText(e.state))
	}
	if e.info.EPAttr.Type == fi.EP_MSG && e.eq == nil {
		return Errorf(fi.ENOEQ, "no eq bound; write 'bind eq ID' first")
	}
	if e.connectionlessLocked() && e.av == nil {
		return Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	caps := e.info.Caps
	if caps&(fi.MSG|fi.TAGGED) != 0 && caps&fi.RECV != 0 && e.rxcq == nil {
		return Errorf(fi.ENOCQ, "no cq bound for recv; write 'bind cq ID recv' first")
	}
	if caps&(fi.MSG|fi.TAGGED) != 0 && caps&fi.SEND != 0 && e.txcq == nil {
		return Errorf(fi.ENOCQ, "no cq bound for send; write 'bind cq ID send' first")
	}
	if err := e.makeProvLocked(); err != nil {
		return err
	}
	if err := e.prov.Enable(); err != nil {
		return err
	}
	if err := e.openRingsLocked(); err != nil {
		return err
	}
	e.state = stateEnabled
	return nil
}

func (e *EP) makeProvLocked() error {
	if e.prov != nil {
		return nil
	}
	p, err := e.obj.Dom.prov.NewEndpoint(e.info, e.req, epEvents{e})
	if err != nil {
		return err
	}
	if o, ok := p.(Options); ok {
		for name, value := range e.opts {
			if err := o.SetOpt(name, value); err != nil {
				p.Close()
				return err
			}
		}
	}
	e.prov = p
	return nil
}

// Connect is fi_connect; FI_CONNECTED or an error event follows on the EQ.
func (e *EP) Connect(addr fi.Addr, data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.connectionlessLocked() {
		return Errorf(fi.EOPBADSTATE, "connect is for FI_EP_MSG endpoints; a connectionless endpoint sends to the addresses of its av")
	}
	if e.state != stateEnabled || e.req != nil {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; connect needs an enabled endpoint that was not made from a request", stateText(e.state))
	}
	if err := e.prov.Connect(addr, data); err != nil {
		return err
	}
	e.state = stateConnecting
	return nil
}

// Accept is fi_accept on an endpoint made from a connection request.
func (e *EP) Accept(data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.req == nil {
		return Errorf(fi.EOPBADSTATE, "endpoint was not made from a connection request; read a pep's listen file for one")
	}
	if e.state != stateEnabled {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; bind an eq and cq and enable it before accept", stateText(e.state))
	}
	if err := e.prov.Accept(data); err != nil {
		return err
	}
	e.state = stateConnecting
	return nil
}

// Reject is fi_reject of the connection request the endpoint was made from.
func (e *EP) Reject(data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.req == nil {
		return Errorf(fi.EOPBADSTATE, "endpoint was not made from a connection request")
	}
	if e.state != stateIdle && e.state != stateEnabled {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; only a pending request can be rejected", stateText(e.state))
	}
	if err := e.makeProvLocked(); err != nil {
		return err
	}
	if err := e.prov.Reject(data); err != nil {
		return err
	}
	e.state = stateRejected
	return nil
}

// Shutdown is fi_shutdown.
//
// The provider is called without e.mu held: it may complete operations
// before Shutdown returns (verbs flushes the posted ones as its QP goes to
// the error state), and their completions take e.mu.
func (e *EP) Shutdown() error {
	e.mu.Lock()
	if e.connectionlessLocked() {
		e.mu.Unlock()
		return Errorf(fi.EOPBADSTATE, "shutdown is for FI_EP_MSG endpoints; a connectionless endpoint has no connection of its own")
	}
	if e.state != stateConnected && e.state != stateConnecting {
		e.mu.Unlock()
		return Errorf(fi.ENOTCONN, "endpoint is %s, not connected", stateText(e.state))
	}
	prov := e.prov
	e.mu.Unlock()
	if err := prov.Shutdown(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.state == stateConnected || e.state == stateConnecting {
		e.state = stateShutdown
	}
	e.mu.Unlock()
	return nil
}

// SetOpt is fi_setopt at level FI_OPT_ENDPOINT.
func (e *EP) SetOpt(name string, value uint64) error {
	n := strings.ToLower(strings.TrimPrefix(strings.ToUpper(name), "FI_OPT_"))
	switch n {
	case "min_multi_recv", "buffered_min", "buffered_limit":
	case "cm_data_size":
		return Errorf(fi.ENOPROTOOPT, "option %s is read-only (fi_getopt only)", name)
	default:
		return Errorf(fi.ENOPROTOOPT, "unknown option %q; options: min_multi_recv, buffered_min, buffered_limit", name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.prov.(Options); ok {
		if err := o.SetOpt(n, value); err != nil {
			return err
		}
	}
	e.opts[n] = value
	return nil
}

// post starts op on the endpoint; wait, if not nil, gets the completion too.
func (e *EP) post(op *Op, wait func(Completion)) error {
	e.mu.Lock()
	if e.prov == nil || e.state == stateClosed {
		st := e.state
		e.mu.Unlock()
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; enable it first", stateText(st))
	}
	prov := e.prov
	e.inflight.add(op)
	e.mu.Unlock()
	// A function value, not a closure: no allocation per operation.
	op.done, op.ep, op.wait = opDone, e, wait
	if err := prov.Post(op); err != nil {
		e.mu.Lock()
		e.inflight.remove(op)
		e.mu.Unlock()
		return err
	}
	return nil
}

// opDone is the done function of the operations an endpoint posts.
func opDone(op *Op, c Completion) { op.ep.completed(op, c) }

// completed delivers the completion of an operation the endpoint posted,
// and lets its work queue, if it waited for room, go on.
func (e *EP) completed(op *Op, c Completion) {
	// A receive with FI_MULTI_RECV completes once per message, and is
	// over when its buffer is released.
	final := op.Flags&fi.OpFlags(fi.MULTI_RECV) == 0 || c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0
	// One hold of the lock for the bookkeeping and where the entry goes.
	var rings *epRings
	e.mu.Lock()
	if final {
		e.inflight.remove(op)
		rings = e.rings
	}
	withdrawn := final && op.withdrawn && c.Err == fi.ECANCELED
	to, av := e.sinkLocked(op.Kind.class()), e.av
	e.mu.Unlock()
	if !withdrawn {
		to.deliver(CQEntry{Context: op.Context, Flags: c.Flags, Len: c.Len, Buf: op.offset + c.Offset, Data: c.Data,
			Tag: c.Tag, Src: source(av, c.Src), Err: c.Err, ProvErrno: c.ProvErrno, OLen: c.OLen, Desc: op.desc},
			op.Flags&fi.COMPLETION != 0)
	}
	if op.wait != nil {
		op.wait(c)
	}
	if rings != nil {
		if op.Kind.IsRecv() {
			rings.rx.unblock()
		} else {
			rings.tx.unblock()
		}
	}
	if final && op.pooled && e.cancelling.Load() == 0 {
		freeOp(op)
	}
}

// opList is an endpoint's posted operations, linked through the Ops
// themselves: adding and removing one costs no hashing and no allocation.
type opList struct{ head *Op }

func (l *opList) add(op *Op) {
	if op.list != nil {
		return // listed already: a second add would make a loop
	}
	op.list, op.prev, op.next = l, nil, l.head
	if l.head != nil {
		l.head.prev = op
	}
	l.head = op
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

// freeOp zeroes op, dropping its buffer and callbacks, and pools it.
func freeOp(op *Op) {
	*op = Op{}
	opPool.Put(op)
}

// source is the fi_addr a completion reports for a sender: its entry in
// av, the endpoint's AV, or FI_ADDR_NOTAVAIL.
func source(av *AV, a fi.Addr) uint64 {
	if a == (fi.Addr{}) {
		return uint64(fi.ADDR_NOTAVAIL) // the provider does not know: most completions
	}
	if av != nil {
		if i, ok := av.Find(a); ok {
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
		to.cntr.completed(ent.Err != 0)
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

// Cancel is fi_cancel of the posted operations with this context.
func (e *EP) Cancel(context uint64) error {
	e.mu.Lock()
	// The Ops found here are used without the lock: none goes back to
	// the pool meanwhile, even if it completes, lest Cancel cancel a new
	// operation in the same Op.
	e.cancelling.Add(1)
	defer e.cancelling.Add(-1)
	var ops []*Op
	for op := e.inflight.head; op != nil; op = op.next {
		if op.Context == context {
			ops = append(ops, op)
		}
	}
	prov := e.prov
	e.mu.Unlock()
	n := 0
	for _, op := range ops {
		if prov.Cancel(op) {
			n++
		}
	}
	if n == 0 {
		return Errorf(fi.ENOENT, "no cancelable operation with context %#x", context)
	}
	return nil
}

// SetDest is the ctl verb dest of a connectionless endpoint: data-file writes
// go to fi_addr a of its AV from now on.
func (e *EP) SetDest(a uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.connectionlessLocked() {
		return Errorf(fi.EOPBADSTATE, "dest is for FI_EP_RDM and FI_EP_DGRAM endpoints; a connected endpoint sends to its peer")
	}
	if e.av == nil {
		return Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	if _, ok := e.av.Lookup(a); !ok {
		return Errorf(fi.EINVAL, "%s has no fi_addr %d", e.av.obj, a)
	}
	e.dest = a
	return nil
}

// maxRxBuf is the largest receive size of the ctl verb rxbuf: as large
// as the providers' receives sized to the message.
const maxRxBuf = 64 << 20

// SetTag is the ctl verb tag: writes to the data file become fi_tsend
// with tag, reads fi_trecv matching tag under ignore. It needs FI_TAGGED.
func (e *EP) SetTag(tag, ignore uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.info.Caps&fi.TAGGED == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint's caps lack FI_TAGGED")
	}
	e.shell.tagged, e.shell.tag, e.shell.ignore = true, tag, ignore
	return nil
}

// ClearTag is `tag off`: the data file's messages are untagged again.
func (e *EP) ClearTag() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.tagged, e.shell.tag, e.shell.ignore = false, 0, 0
}

// SetSrc is the ctl verb src: reads of the data file accept messages from
// fi_addr a of the AV only (FI_DIRECTED_RECV); fi.ADDR_UNSPEC (`src any`)
// accepts anyone again.
func (e *EP) SetSrc(a uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a == uint64(fi.ADDR_UNSPEC) {
		e.shell.src = a
		return nil
	}
	if e.info.Caps&fi.DIRECTED_RECV == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint's caps lack FI_DIRECTED_RECV")
	}
	if e.av == nil {
		return Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	if _, ok := e.av.Lookup(a); !ok {
		return Errorf(fi.EINVAL, "%s has no fi_addr %d", e.av.obj, a)
	}
	e.shell.src = a
	return nil
}

// SetCQData is the ctl verb cqdata: writes to the data file carry remote
// CQ data v (fi_senddata), which must fit the domain's cq_data_size.
func (e *EP) SetCQData(v uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	size := e.info.DomainAttr.CQDataSize
	if size == 0 {
		return Errorf(fi.EOPNOTSUPP, "the domain's cq_data_size is 0")
	}
	if size < 8 && v>>(8*size) != 0 {
		return Errorf(fi.EINVAL, "%#x does not fit cq_data_size %d", v, size)
	}
	e.shell.hasData, e.shell.data = true, v
	return nil
}

// ClearCQData is `cqdata off`.
func (e *EP) ClearCQData() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.hasData, e.shell.data = false, 0
}

// SetRxBuf is the ctl verb rxbuf: a read of the data file posts a receive
// of n bytes (1..maxRxBuf); 0 (`rxbuf off`) sizes it to the message again.
func (e *EP) SetRxBuf(n uint64) error {
	if n > maxRxBuf {
		return Errorf(fi.EINVAL, "%d bytes is more than %d", n, maxRxBuf)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.rxbuf = n
	return nil
}

// WriteData sends b as one message: a write to the data file. The message
// is an fi_send with the endpoint's default flags (tx_op_flags), so with
// none it is reported on the send CQ unless that binding is selective; an
// fi_tsend after `tag`, with remote CQ data after `cqdata`. A connectionless
// endpoint sends it to its dest.
func (e *EP) WriteData(ctx context.Context, b []byte) error {
	e.mu.Lock()
	p := e.shell
	e.mu.Unlock()
	op := &Op{Kind: OpSend, Buf: b}
	if p.tagged {
		op.Kind, op.Tag = OpTSend, p.tag
	}
	if p.hasData {
		op.Flags, op.Data = fi.OpFlags(fi.REMOTE_CQ_DATA), p.data
	}
	return e.do(ctx, op, "send", func() {})
}

// do posts op, addressed to the dest of a connectionless endpoint, and waits
// for its completion, whose error it returns: the data file's writes and
// the ctl's RMA verbs. The completion also reaches the CQ and counters as
// every operation's. When ctx ends first (a signal), do returns nil: the
// operation was taken and goes on. release runs once op is no longer in
// use: after its completion, also when ctx ends first, or when it could
// not be posted.
func (e *EP) do(ctx context.Context, op *Op, what string, release func()) error {
	e.mu.Lock()
	rdm, dest := e.connectionlessLocked(), e.dest
	e.mu.Unlock()
	if rdm {
		if dest == uint64(fi.ADDR_UNSPEC) {
			release()
			return Errorf(fi.ENOTCONN, "no destination; write 'dest FIADDR' to ctl first")
		}
		var err error
		if op.Peer, err = e.peer(dest); err != nil {
			release()
			return err
		}
	}
	op.Flags |= e.defaultFlags(op.Kind)
	done := make(chan Completion, 1)
	if err := e.post(op, func(c Completion) { done <- c }); err != nil {
		release()
		return err
	}
	select {
	case c := <-done:
		release()
		if c.Err != 0 {
			return Errorf(c.Err, "%s: %v", what, c.Err)
		}
		return nil
	case <-ctx.Done():
		// The provider has taken the operation; its completion still
		// reaches the CQ and counters. The write succeeds: failing it
		// with EINTR would have the writer (Go, libc wrappers, shells)
		// write it again, and the message would go twice.
		go func() {
			<-done
			release()
		}()
		return nil
	}
}

// defaultFlags are the flags of the shell's operations of kind k (the
// data file, the ctl verbs write and read): the endpoint's tx_op_flags,
// or rx_op_flags for a receive. Like fi_send, fi_recv, fi_write and
// fi_read, which take no flags of their own, they use "the default
// operation flags" of their context (fi_endpoint(3)): FI_COMPLETION under
// a selective binding, FI_INJECT, FI_DELIVERY_COMPLETE. Ring requests
// carry their own flags, as fi_sendmsg's. FI_MULTI_RECV is left out: a
// read of the data file takes one message into a buffer of its own.
func (e *EP) defaultFlags(k OpKind) fi.OpFlags {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k.IsRecv() {
		return e.info.RxAttr.OpFlags &^ fi.OpFlags(fi.MULTI_RECV)
	}
	return e.info.TxAttr.OpFlags
}

// ReadData is a read of the data file. It returns the rest of the current
// message if a previous read left some; otherwise, at offset 0, it receives
// the next message (blocking), and at any other offset it returns 0 (end of
// file). So `cat data` prints one message and a program reads message after
// message with pread at offset 0.
func (e *EP) ReadData(ctx context.Context, p []byte, off int64) (int, error) {
	e.dataMu.Lock()
	defer e.dataMu.Unlock()
	if len(e.pending) == 0 {
		if err := e.pendingErr; err != nil {
			e.pendingErr = nil
			return 0, err
		}
		if off != 0 {
			return 0, nil
		}
		msg, err := e.recvMessage(ctx)
		e.pending = msg
		if Code(err) == fi.ETRUNC {
			e.pendingErr, err = err, nil // after the bytes that fit
		}
		if err != nil || len(msg) == 0 {
			return 0, err
		}
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

// recvMessage posts a receive, with a buffer the provider sizes to the
// message or of rxbuf bytes, and waits for it; after `tag` it is an
// fi_trecv, after `src` it takes that sender's messages only. If ctx ends
// first the receive is cancelled; if it had already completed, the
// message is returned with fi.EINTR, to be kept for the next read; if it
// cannot be cancelled, it stays posted and the next read waits for it
// instead of posting one. A receive taken back so is withdrawn: its
// FI_ECANCELED reaches neither the CQ nor a counter, since the read that
// posted it had no effect (a signal handler's restarted read posts
// another). A message longer than rxbuf is returned truncated, with
// fi.ETRUNC. Called with dataMu held.
func (e *EP) recvMessage(ctx context.Context) ([]byte, error) {
	h := e.held
	e.held = nil
	if h == nil {
		var err error
		if h, err = e.postRecvMessage(); err != nil {
			return nil, err
		}
	}
	op, done := h.op, h.done
	var c Completion
	select {
	case c = <-done:
	case <-ctx.Done():
		e.mu.Lock()
		prov := e.prov
		op.withdrawn = true // before Cancel, which may complete it
		e.mu.Unlock()
		if !prov.Cancel(op) {
			e.mu.Lock()
			op.withdrawn = false
			e.mu.Unlock()
			select {
			case c = <-done:
			default:
				// Under way, or a provider that cannot take a
				// receive back (verbs): the next read takes its
				// message.
				e.held = h
				return nil, Errorf(fi.EINTR, "interrupted; the receive stays posted for the next read")
			}
		} else {
			c = <-done
		}
		if c.Err == 0 {
			return placed(op, c), Errorf(fi.EINTR, "interrupted; the message is kept for the next read")
		}
		if c.Err == fi.ECANCELED {
			return nil, Errorf(fi.EINTR, "interrupted")
		}
	}
	switch c.Err {
	case 0:
		return placed(op, c), nil
	case fi.ETRUNC:
		return placed(op, c), Errorf(c.Err, "receive: a message of %d bytes, truncated to rxbuf %d", c.Len+c.OLen, c.Len)
	}
	return nil, Errorf(c.Err, "receive: %v", c.Err)
}

// heldRecv is a receive of the data file and the channel of its
// completion.
type heldRecv struct {
	op   *Op
	done chan Completion
}

// postRecvMessage posts a receive for a read of the data file, with the
// parameters of the ctl verbs tag, src and rxbuf.
func (e *EP) postRecvMessage() (*heldRecv, error) {
	e.mu.Lock()
	p := e.shell
	e.mu.Unlock()
	op := &Op{Kind: OpRecv, Flags: e.defaultFlags(OpRecv)}
	if p.tagged {
		op.Kind, op.Tag, op.Ignore = OpTRecv, p.tag, p.ignore
	}
	if p.src != uint64(fi.ADDR_UNSPEC) {
		var err error
		if op.Peer, err = e.peer(p.src); err != nil {
			return nil, err
		}
	}
	if p.rxbuf > 0 {
		op.Buf = make([]byte, p.rxbuf)
	}
	done := make(chan Completion, 1)
	if err := e.post(op, func(c Completion) { done <- c }); err != nil {
		return nil, err
	}
	return &heldRecv{op, done}, nil
}

// placed is the message a receive's completion c says op.Buf holds. A
// receive taken by the remote CQ data of a peer's RMA write (a provider
// with FI_RX_CQ_DATA, such as verbs) holds none: its completion's length
// is the write's.
func placed(op *Op, c Completion) []byte {
	if c.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		return nil
	}
	return op.Buf[:min(c.Len, uint64(len(op.Buf)))]
}

// Name is fi_getname.
func (e *EP) Name() (fi.Addr, error) {
	e.mu.Lock()
	p := e.prov
	e.mu.Unlock()
	if p == nil {
		return fi.Addr{}, Errorf(fi.EOPBADSTATE, "endpoint has no address before enable")
	}
	return p.Name()
}

// Peer is fi_getpeer.
func (e *EP) Peer() (fi.Addr, error) {
	e.mu.Lock()
	p := e.prov
	e.mu.Unlock()
	if p == nil {
		return fi.Addr{}, Errorf(fi.ENOTCONN, "endpoint is not connected")
	}
	return p.Peer()
}

func addrText(a fi.Addr, err error) string {
	if err != nil {
		return "-"
	}
	return a.String()
}

func (e *EP) Status() string {
	local, remote := addrText(e.Name()), addrText(e.Peer())
	e.mu.Lock()
	defer e.mu.Unlock()
	typ := strings.ToLower(strings.TrimPrefix(e.info.EPAttr.Type.String(), "FI_EP_"))
	state := e.state
	if e.req != nil && state == stateIdle {
		state = "connreq"
	}
	if e.connectionlessLocked() && e.dest != uint64(fi.ADDR_UNSPEC) {
		remote = fmt.Sprintf("fi_addr:%d", e.dest)
	}
	return fmt.Sprintf("%s %s cq=%s/%s eq=%s av=%s cntr=%s local=%s remote=%s%s", typ, state,
		objID(e.txcq), objID(e.rxcq), objID(e.eq), objID(e.av), e.cntrStatusLocked(), local, remote, e.shell)
}

// String is the data file's parameters in status: the ones set, each as
// ` VERB=VALUE`.
func (p dataParams) String() string {
	var b strings.Builder
	if p.tagged {
		fmt.Fprintf(&b, " tag=%#x/%#x", p.tag, p.ignore)
	}
	if p.src != uint64(fi.ADDR_UNSPEC) {
		fmt.Fprintf(&b, " src=fi_addr:%d", p.src)
	}
	if p.hasData {
		fmt.Fprintf(&b, " cqdata=%#x", p.data)
	}
	if p.rxbuf > 0 {
		fmt.Fprintf(&b, " rxbuf=%d", p.rxbuf)
	}
	return b.String()
}

// objID is the id of a bound object, or "-".
func objID(x interface{ object() *Object }) string {
	if o := x.object(); o != nil {
		return o.ID
	}
	return "-"
}

func (c *CQ) object() *Object {
	if c == nil {
		return nil
	}
	return c.obj
}

func (e *EQ) object() *Object {
	if e == nil {
		return nil
	}
	return e.obj
}

func (a *AV) object() *Object {
	if a == nil {
		return nil
	}
	return a.obj
}

// Links shows the bindings: txcq, rxcq, eq, av, cntr_send, cntr_recv...
func (e *EP) Links() []Link {
	e.mu.Lock()
	defer e.mu.Unlock()
	var l []Link
	if e.txcq != nil {
		l = append(l, Link{"txcq", e.txcq.obj})
	}
	if e.rxcq != nil {
		l = append(l, Link{"rxcq", e.rxcq.obj})
	}
	if e.eq != nil {
		l = append(l, Link{"eq", e.eq.obj})
	}
	if e.av != nil {
		l = append(l, Link{"av", e.av.obj})
	}
	for i, c := range e.cntrs {
		if c != nil {
			l = append(l, Link{"cntr_" + classes[i].name, c.obj})
		}
	}
	return l
}

func (e *EP) Attrs() []Attr {
	attrs := infoAttrs(&e.mu, func() *fi.Info { return e.info }, func() error { return e.idleLocked("setting attributes") })
	for i := range attrs {
		if attrs[i].Name == "type" {
			attrs[i] = guarded(&e.mu, "type", func() error { return e.idleLocked("setting the type") },
				func() string { return e.info.EPAttr.Type.String() }, func(s string) error { return e.setType(e.info, s) })
		}
	}
	attrs = append(attrs, Attr{Name: "mapping", Get: func() string { return e.obj.Dom.fab.Shm.Mode }},
		guarded(&e.mu, "engine_cpu", func() error { return e.idleLocked("setting engine_cpu") },
			func() string { return strconv.Itoa(e.engineCPU) }, e.setEngineCPU))
	for _, name := range []string{"min_multi_recv", "buffered_min", "buffered_limit"} {
		attrs = append(attrs, Attr{Name: "opt_" + name, Get: func() string {
			e.mu.Lock()
			defer e.mu.Unlock()
			return strconv.FormatUint(e.opts[name], 10)
		}})
	}
	return attrs
}

// setEngineCPU is a write of attr/engine_cpu before enable: -1, or a CPU
// this process may run on. Called with e.mu held.
func (e *EP) setEngineCPU(s string) error {
	s = strings.TrimSpace(s)
	if s == "-1" {
		e.engineCPU = -1
		return nil
	}
	v, err := ParseUint(s)
	if err != nil || v > 1<<20 {
		return Errorf(fi.EINVAL, "bad engine_cpu %q: want -1 or a CPU number", s)
	}
	cpu := int(v)
	if !e.obj.Dom.fab.eng.mayRunOn(cpu) {
		return Errorf(fi.EINVAL, "CPU %d is not one this daemon may run on", cpu)
	}
	e.engineCPU = cpu
	return nil
}

// Close is fi_close: the engine stops serving the rings, the provider
// endpoint closes (completing what was outstanding), then the memory
// regions and bindings are released.
func (e *EP) Close() error {
	e.stopRings()
	e.mu.Lock()
	p := e.prov
	e.mu.Unlock()
	var err error
	if p != nil {
		err = p.Close()
	}
	e.releaseRegions()
	e.mu.Lock()
	txcq, rxcq, eq, av, cntrs := e.txcq, e.rxcq, e.eq, e.av, e.cntrs
	e.txcq, e.rxcq, e.eq, e.av, e.cntrs = nil, nil, nil, nil, [numClasses]*Cntr{}
	e.state = stateClosed
	e.mu.Unlock()
	for _, c := range cntrs {
		if c != nil {
			c.unbind()
		}
	}
	if txcq != nil {
		txcq.unbind()
	}
	if rxcq != nil {
		rxcq.unbind()
	}
	if eq != nil {
		eq.obj.drop()
	}
	if av != nil {
		av.obj.drop()
	}
	return err
}

// epEvents turns the provider's connection events into state changes and
// EQ entries.
type epEvents struct{ e *EP }

func (ev epEvents) Connected(data []byte) {
	e := ev.e
	e.mu.Lock()
	e.state = stateConnected
	eq := e.eq
	e.mu.Unlock()
	if eq != nil {
		eq.post(EQEvent{Event: fi.CONNECTED, FID: e.obj.Path(), Data: data})
	}
}

func (ev epEvents) Shutdown() {
	e := ev.e
	e.mu.Lock()
	e.state = stateShutdown
	eq := e.eq
	e.mu.Unlock()
	if eq != nil {
		eq.post(EQEvent{Event: fi.SHUTDOWN, FID: e.obj.Path()})
	}
}

func (ev epEvents) Failed(err error, data []byte) {
	e := ev.e
	e.mu.Lock()
	e.state = stateError
	eq := e.eq
	e.mu.Unlock()
	e.obj.SetErr(WithOp("connection", err))
	if eq != nil {
		eq.post(EQEvent{FID: e.obj.Path(), Err: Code(err), ProvErrno: provErrno(err), Data: data})
	}
}

// Owner is core.Owned's: the uid that made the endpoint.
func (ev epEvents) Owner() uint32 { return ev.e.obj.Owner }

// AsyncError is core.AsyncErrors': an error of the provider that leaves the
// endpoint usable goes to its err file.
func (ev epEvents) AsyncError(err error) {
	ev.e.obj.SetErr(WithOp("provider", err))
}
