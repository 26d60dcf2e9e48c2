package core

// Endpoints that share another's provider endpoint. Scalable endpoints
// (fi_endpoint(3), "SCALABLE ENDPOINTS"): an endpoint with attr/scalable
// true is fi_scalable_ep; its transmit and receive contexts
// (fi_tx_context, fi_rx_context) are endpoints of their own, made contexts
// of it with the ctl verb `context`. Aliases (fi_ep_alias): an endpoint
// made an alias of another with the ctl verb `alias`. docs/design.md,
// "Scalable endpoints and aliases", says how they share it.

import (
	"strconv"

	"github.com/fabricfs/fabricfs/core/fi"
)

// ScalableCtxs is the most transmit and the most receive contexts of a
// scalable endpoint: max_ep_tx_ctx and max_ep_rx_ctx of the domains that
// have them (FI_EP_RDM over rxm, whose rx_index byte names a receive
// context).
const ScalableCtxs = 1 << MaxRxCtxBits

// Context directions, the index of EP.ctxs.
const (
	ctxTx = 0
	ctxRx = 1
)

var ctxDirs = [2]string{"tx", "rx"}

// ParseCtxDir reads the direction argument of the context verb: tx or rx.
func parseCtxDir(s string) (int, bool) {
	for d, n := range ctxDirs {
		if s == n {
			return d, true
		}
	}
	return 0, false
}

// setScalable is a write of attr/scalable before enable. Called with e.mu
// held.
func (e *EP) setScalable(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return Errorf(fi.EINVAL, "bad scalable %q: want true or false", s)
	}
	switch {
	case e.sep != nil:
		return Errorf(fi.EINVAL, "%s is a context of %s; a context is not scalable", e.obj, e.sep.obj)
	case v && !e.connectionlessLocked():
		return Errorf(fi.EINVAL, "scalable endpoints are connectionless here (FI_EP_RDM, FI_EP_DGRAM); write the type first")
	case v && (e.srx != nil || e.stx != nil || e.txcq != nil || e.rxcq != nil):
		return Errorf(fi.EINVAL, "a scalable endpoint binds an av only (fi_scalable_ep_bind); its contexts bind the rest")
	case !v && e.ctxCountLocked() > 0:
		return Errorf(fi.EBUSY, "%s has contexts", e.obj)
	}
	e.scalable = v
	return nil
}

// setCtxCnt is a write of attr/tx_ctx_cnt (dir ctxTx) or rx_ctx_cnt on a
// scalable endpoint before enable: 1 to the domain's max_ep_tx_ctx or
// max_ep_rx_ctx, and no fewer than the contexts made. Called with e.mu
// held.
func (e *EP) setCtxCnt(dir int, s string) error {
	switch {
	case !e.scalable:
		return Errorf(fi.EINVAL, "only a scalable endpoint has several contexts; write attr/scalable true first")
	case e.prov != nil:
		return Errorf(fi.EOPBADSTATE, "%s's provider endpoint exists (a context of it is enabled); set the counts before", e.obj)
	}
	max := uint64(1)
	if d := e.info.DomainAttr; d != nil && dir == ctxTx {
		max = d.MaxEPTxCtx
	} else if d != nil {
		max = d.MaxEPRxCtx
	}
	v, err := ParseUint(s)
	if err != nil || v < 1 || v > max {
		return Errorf(fi.EINVAL, "bad %s_ctx_cnt %q: want 1 to %d (the domain's max_ep_%s_ctx)", ctxDirs[dir], s, max, ctxDirs[dir])
	}
	for i := v; i < uint64(len(e.ctxs[dir])); i++ {
		if e.ctxs[dir][i] != nil {
			return Errorf(fi.EBUSY, "%s context %d exists", ctxDirs[dir], i)
		}
	}
	if dir == ctxTx {
		e.info.EPAttr.TxCtxCnt = v
	} else {
		e.info.EPAttr.RxCtxCnt = v
	}
	return nil
}

// ctxCountLocked is how many contexts the scalable endpoint has.
func (e *EP) ctxCountLocked() int {
	n := 0
	for _, cs := range e.ctxs {
		for _, c := range cs {
			if c != nil {
				n++
			}
		}
	}
	return n
}

// MakeContext is fi_tx_context (dir ctxTx) or fi_rx_context of the
// scalable endpoint sep, index idx: the idle endpoint e, bound to
// nothing, becomes that context. It takes sep's fi_info, its capabilities
// narrowed to the direction, and holds sep until it closes. It binds its
// own CQs and counters and has its own rings; the av is sep's.
func (e *EP) MakeContext(sep *EP, dir int, idx uint64) error {
	if e == sep {
		return Errorf(fi.EINVAL, "an endpoint is not a context of itself")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("context"); err != nil {
		return err
	}
	if err := e.freshLocked("a context"); err != nil {
		return err
	}
	sep.mu.Lock()
	defer sep.mu.Unlock()
	cnt := sep.info.EPAttr.TxCtxCnt
	if dir == ctxRx {
		cnt = sep.info.EPAttr.RxCtxCnt
	}
	switch {
	case sep.state == stateClosed:
		return gone(sep.obj)
	case !sep.scalable:
		return Errorf(fi.EINVAL, "%s is not scalable (attr/scalable)", sep.obj)
	case idx >= cnt:
		return Errorf(fi.EINVAL, "%s has %d %s contexts (%s_ctx_cnt); index %d", sep.obj, cnt, ctxDirs[dir], ctxDirs[dir], idx)
	case idx < uint64(len(sep.ctxs[dir])) && sep.ctxs[dir][idx] != nil:
		return Errorf(fi.EBUSY, "%s context %d of %s is %s", ctxDirs[dir], idx, sep.obj, sep.ctxs[dir][idx].obj)
	}
	if err := sep.obj.hold(); err != nil {
		return err
	}
	for uint64(len(sep.ctxs[dir])) <= idx {
		sep.ctxs[dir] = append(sep.ctxs[dir], nil)
	}
	sep.ctxs[dir][idx] = e
	in := sep.info.Clone()
	// A context moves data one way: fi_tx_context's "transmit context"
	// and fi_rx_context's "receive context".
	if dir == ctxTx {
		in.Caps = in.Caps&^fi.RECV | fi.SEND
	} else {
		in.Caps = in.Caps&^fi.SEND | fi.RECV
	}
	in.EPAttr.TxCtxCnt, in.EPAttr.RxCtxCnt = 1, 1
	e.info, e.sep, e.ctxDir, e.ctxIdx = in, sep, dir, int(idx)
	e.shell = defaultDataParams
	return nil
}

// freshLocked checks that the endpoint is new: idle, bound to nothing, no
// context, alias or scalable endpoint; what names what it is to become.
func (e *EP) freshLocked(what string) error {
	if err := e.idleLocked(what); err != nil {
		return err
	}
	if e.sep != nil || e.parent != nil || e.scalable || e.req != nil || e.txcq != nil || e.rxcq != nil || e.eq != nil ||
		e.av != nil || e.srx != nil || e.stx != nil || e.cntrs != ([numClasses]*Cntr{}) {
		return Errorf(fi.EINVAL, "%s is made of a new endpoint, bound to nothing", what)
	}
	return nil
}

// enableScalableLocked enables a scalable endpoint or one of its
// contexts. A scalable endpoint has one provider endpoint, made and
// enabled by whichever of it and its contexts is enabled first (fabtests
// enable the contexts first); it has no rings, moving no data itself. A
// context has rings and binds CQs and counters of its own, and posts its
// operations on that provider endpoint: the completions come back to it
// (Op.ep), and a receive context's receives take only the messages sent to
// it (Op.RxCtx). Called with e.mu held.
func (e *EP) enableScalableLocked() error {
	if e.sep == nil {
		_, err := e.scalableProvLocked()
		return err
	}
	caps := e.info.Caps
	if caps&(fi.MSG|fi.TAGGED) != 0 && e.ctxDir == ctxRx && e.rxcq == nil {
		return Errorf(fi.ENOCQ, "no cq bound for recv; write 'bind cq ID recv' first")
	}
	if caps&(fi.MSG|fi.TAGGED) != 0 && e.ctxDir == ctxTx && e.txcq == nil {
		return Errorf(fi.ENOCQ, "no cq bound for send; write 'bind cq ID send' first")
	}
	rs, err := e.newRingsLocked()
	if err != nil {
		return err
	}
	sep := e.sep
	sep.mu.Lock()
	p, err := sep.scalableProvLocked()
	av := sep.av
	if err == nil {
		err = av.obj.hold()
	}
	sep.mu.Unlock()
	if err != nil {
		rs.free(e.obj.Dom.fab, e.obj.Owner)
		return err
	}
	e.prov, e.av = p, av
	e.startRingsLocked(rs)
	return nil
}

// scalableProvLocked returns the scalable endpoint's provider endpoint,
// made and enabled on first use. Called with e.mu held.
func (e *EP) scalableProvLocked() (Endpoint, error) {
	switch {
	case e.state == stateClosed:
		return nil, gone(e.obj)
	case e.av == nil:
		return nil, Errorf(fi.ENOAV, "no av bound to scalable endpoint %s; write 'bind av ID' there first", e.obj)
	case e.prov != nil:
		return e.prov, nil
	}
	if err := e.makeProvLocked(); err != nil {
		return nil, err
	}
	if err := e.prov.Enable(); err != nil {
		e.prov.Close()
		e.prov = nil
		return nil, err
	}
	return e.prov, nil
}

// refusesLocked says why the endpoint does not take an operation of kind
// k: a scalable endpoint takes none ("the scalable endpoint itself is not
// used for data transfers"), a transmit context no receive, a receive
// context nothing else.
func (e *EP) refusesLocked(k OpKind) error {
	switch {
	case e.scalable:
		return Errorf(fi.EOPNOTSUPP, "%s is a scalable endpoint; post to its contexts", e.obj)
	case e.sep != nil && (e.ctxDir == ctxRx) != k.IsRecv():
		return Errorf(fi.EOPNOTSUPP, "%s is %s context %d of %s; it takes %s operations only", e.obj, ctxDirs[e.ctxDir],
			e.ctxIdx, e.sep.obj, map[bool]string{true: "receive", false: "transmit"}[e.ctxDir == ctxRx])
	}
	return nil
}

// closeShared ends e, a context of a scalable endpoint or an alias, whose
// provider endpoint is another's and stays: e's operations not under way
// are cancelled (their completions are dropped, as at any endpoint's
// close), and a context's place is free again.
func (e *EP) closeShared(p Endpoint) {
	e.mu.Lock()
	e.cancelling.Add(1)
	defer e.cancelling.Add(-1)
	var ops []*Op
	for op := e.inflight.head; op != nil; op = op.next {
		ops = append(ops, op)
	}
	sep, parent, dir, idx := e.sep, e.parent, e.ctxDir, e.ctxIdx
	e.mu.Unlock()
	if p != nil {
		for _, op := range ops {
			p.Cancel(op)
		}
	}
	if parent != nil {
		parent.obj.drop()
		return
	}
	sep.mu.Lock()
	sep.ctxs[dir][idx] = nil
	sep.mu.Unlock()
	sep.obj.drop()
}

// MakeAlias is fi_ep_alias: the idle endpoint e, bound to nothing, becomes
// an alias of the enabled endpoint parent. "An alias EP differs from its
// parent endpoint only by its default data transfer flags": e posts on
// parent's provider endpoint, through rings of its own, and its
// completions go to parent's CQs and counters (their bindings at this
// call), with parent's AV. "The flags passed to fi_ep_alias must include
// FI_TRANSMIT or FI_RECV (not both) with other operational flags OR'ed
// in. This will override the transmit or receive flags, respectively":
// the other flags become e's tx_op_flags or rx_op_flags. parent is held
// until e closes ("All allocated aliases must be closed for the
// underlying endpoint to be released").
func (e *EP) MakeAlias(parent *EP, flags fi.OpFlags) error {
	send, recv := flags&fi.OpFlags(fi.TRANSMIT) != 0, flags&fi.OpFlags(fi.RECV) != 0
	if send == recv {
		return Errorf(fi.EINVAL, "alias flags %v: want FI_TRANSMIT or FI_RECV, not both", flags)
	}
	if e == parent {
		return Errorf(fi.EINVAL, "an endpoint is not an alias of itself")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.freshLocked("an alias"); err != nil {
		return err
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	switch {
	case parent.state == stateClosed:
		return gone(parent.obj)
	case parent.state == stateIdle || parent.prov == nil:
		return Errorf(fi.EOPBADSTATE, "%s is idle; alias an enabled endpoint", parent.obj)
	case parent.scalable || parent.sep != nil || parent.parent != nil:
		return Errorf(fi.EINVAL, "%s is a scalable endpoint, a context or an alias; alias an endpoint", parent.obj)
	case parent.srx != nil:
		return Errorf(fi.EINVAL, "%s takes its receives from %s; it has no alias", parent.obj, parent.srx.obj)
	}
	rs, err := e.newRingsFor(parent.info)
	if err != nil {
		return err
	}
	if err := parent.obj.hold(); err != nil {
		rs.free(e.obj.Dom.fab, e.obj.Owner)
		return err
	}
	in := parent.info.Clone()
	if send {
		in.TxAttr.OpFlags = flags &^ fi.OpFlags(fi.TRANSMIT)
	} else {
		in.RxAttr.OpFlags = flags &^ fi.OpFlags(fi.RECV)
	}
	// The parent's bindings, held as binds hold them: Close lets go.
	for _, cq := range []*CQ{parent.txcq, parent.rxcq} {
		if cq != nil {
			cq.bind() // parent holds it: it is not closing
		}
	}
	for _, c := range parent.cntrs {
		if c != nil {
			c.bind()
		}
	}
	if parent.av != nil {
		parent.av.obj.hold()
	}
	e.info, e.parent, e.prov, e.shell = in, parent, parent.prov, defaultDataParams
	e.txcq, e.rxcq, e.txSel, e.rxSel, e.cntrs, e.av = parent.txcq, parent.rxcq, parent.txSel, parent.rxSel, parent.cntrs, parent.av
	e.startRingsLocked(rs)
	e.state = stateEnabled
	return nil
}

// ctxAttr is attr/context: "tx N" or "rx N" for a context of a scalable
// endpoint, "-" for any other endpoint. Called with e.mu held.
func (e *EP) ctxAttrLocked() string {
	if e.sep == nil {
		return "-"
	}
	return ctxDirs[e.ctxDir] + " " + strconv.Itoa(e.ctxIdx)
}
