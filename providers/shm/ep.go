package shm

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// message is a send that found no receive at its target: copied aside
// (eager: kept holds the copy) or still in its sender's buffer (op, the
// sender's operation, completes when a receive takes it).
type message struct {
	tagged bool
	tag    uint64
	data   uint64
	flags  fi.CQFlags // fi.REMOTE_CQ_DATA or 0
	src    fi.Addr
	kept   []byte
	op     *core.Op  // a held send, or nil
	from   *endpoint // its sender, for a held send
}

func (m *message) payload() []byte {
	if m.op != nil {
		return m.op.Buf
	}
	return m.kept
}

// endpoint is an FI_EP_RDM endpoint of the provider.
type endpoint struct {
	prov   *Provider
	ev     core.EndpointEvents
	name   fi.Addr
	rxSize int
	inject int // tx_attr.inject_size, at most InjectSize
	caps   fi.Caps
	key    []byte // ep_attr.auth_key

	// active counts Posts under way on this endpoint and its held sends
	// a receive has taken and not completed yet: Close waits for none.
	active atomic.Int64
	closed atomic.Bool
	// held counts its sends waiting at other endpoints, so that Close
	// looks for them only when there are some.
	held atomic.Int64

	mu       sync.Mutex
	enabled  bool
	gone     bool                    // closed: takes no more messages
	recvs    [2][]*core.Op           // posted receives: untagged, tagged
	multi    map[*core.Op]*multiRecv // the posted untagged ones with FI_MULTI_RECV
	minMulti uint64                  // FI_OPT_MIN_MULTI_RECV
	unexp    [2][]*message           // unexpected messages, in arrival order
	claimed  map[uint64]*message     // messages claimed by FI_PEEK|FI_CLAIM, by claim key
	bytes    int                     // what the eager and claimed ones hold
}

var _ core.Endpoint = (*endpoint)(nil)

func queueOf(tagged bool) int {
	if tagged {
		return 1
	}
	return 0
}

// Enable puts the endpoint in the provider's table under its name, which
// no other enabled endpoint may have: FI_EADDRINUSE, as bind(2) of an
// address in use (libfabric's shm fails with FI_EBUSY when a live process
// has the name).
func (e *endpoint) Enable() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return core.Errorf(fi.EOPBADSTATE, "shm: endpoint closed")
	}
	if e.enabled {
		return nil
	}
	e.prov.mu.Lock()
	defer e.prov.mu.Unlock()
	if _, taken := e.prov.eps[e.name.Str]; taken {
		return core.Errorf(fi.EADDRINUSE, "shm: an endpoint named %s exists", e.name.Str)
	}
	e.prov.eps[e.name.Str] = e
	e.enabled = true
	return nil
}

func (e *endpoint) Connect(fi.Addr, []byte) error {
	return core.Errorf(fi.EOPNOTSUPP, "shm: FI_EP_RDM endpoints do not connect")
}
func (e *endpoint) Accept([]byte) error {
	return core.Errorf(fi.EOPNOTSUPP, "shm: FI_EP_RDM endpoints do not accept")
}
func (e *endpoint) Reject([]byte) error {
	return core.Errorf(fi.EOPNOTSUPP, "shm: FI_EP_RDM endpoints do not reject")
}
func (e *endpoint) Shutdown() error {
	return core.Errorf(fi.EOPNOTSUPP, "shm: FI_EP_RDM endpoints have no connection to shut down")
}

// Name is the endpoint's fi_shm:// address.
func (e *endpoint) Name() (fi.Addr, error) { return e.name, nil }

// Peer fails: the endpoint is connectionless.
func (e *endpoint) Peer() (fi.Addr, error) {
	return fi.Addr{}, core.Errorf(fi.ENOTCONN, "shm: FI_EP_RDM endpoints have no peer")
}

// Post does the operation (package doc).
func (e *endpoint) Post(op *core.Op) error {
	e.active.Add(1)
	defer e.active.Add(-1)
	if e.closed.Load() {
		return core.Errorf(fi.EOPBADSTATE, "shm: endpoint closed")
	}
	if op.Flags&fi.INJECT != 0 {
		// fi_msg(3) FI_INJECT: "This flag can only be used with
		// messages smaller than inject_size"; nothing comes back to an
		// injected operation.
		switch {
		case op.Kind == core.OpRead || op.Kind == core.OpFetchAtomic || op.Kind == core.OpCompareAtomic:
			return core.Errorf(fi.EINVAL, "shm: operation kind %d cannot be injected", op.Kind)
		case len(op.Buf) > e.inject:
			return core.Errorf(fi.EINVAL, "shm: inject of %d bytes; inject_size is %d", len(op.Buf), e.inject)
		}
	}
	switch op.Kind {
	case core.OpRecv, core.OpTRecv:
		return e.postRecv(op)
	case core.OpSend, core.OpTSend:
		return e.send(op)
	case core.OpWrite, core.OpRead:
		e.rma(op)
		return nil
	case core.OpAtomic, core.OpFetchAtomic, core.OpCompareAtomic:
		e.atomic(op)
		return nil
	}
	return core.Errorf(fi.EOPNOTSUPP, "shm: operation kind %d not supported", op.Kind)
}

// peer is the enabled endpoint called a, which e may talk to: one with
// the same authorization key (fi_endpoint(3) auth_key: "Only peer
// endpoints that are programmed to use the same authorization key may
// communicate"), else fi.ECONNREFUSED, as an FI_EP_RDM peer over tcp
// refuses the connection; fi.EHOSTUNREACH if there is none.
func (e *endpoint) peer(a fi.Addr) (*endpoint, fi.Errno) {
	t := e.prov.lookup(a)
	switch {
	case t == nil:
		return nil, fi.EHOSTUNREACH
	case !bytes.Equal(t.key, e.key):
		return nil, fi.ECONNREFUSED
	}
	return t, 0
}

// send delivers op to the first matching receive of its target, or leaves
// it there as an unexpected message.
func (e *endpoint) send(op *core.Op) error {
	c := core.Completion{Flags: op.Kind.CQFlags(), Len: uint64(len(op.Buf))}
	t, err := e.peer(op.Peer)
	if err != 0 {
		c.Err = err
		op.Complete(c)
		return nil
	}
	msg := message{tagged: op.Kind == core.OpTSend, tag: op.Tag, src: e.name}
	if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
		msg.flags, msg.data = fi.CQFlags(fi.REMOTE_CQ_DATA), op.Data
	}
	q := queueOf(msg.tagged)
	t.mu.Lock()
	if t.gone {
		t.mu.Unlock()
		c.Err = fi.EHOSTUNREACH
		op.Complete(c)
		return nil
	}
	if i := slices.IndexFunc(t.recvs[q], func(r *core.Op) bool { return matches(r, &msg) }); i >= 0 {
		r := t.recvs[q][i]
		if mr := t.multi[r]; mr != nil {
			t.placeMulti(r, mr, i, &msg, op.Buf)
			op.Complete(c)
			return nil
		}
		t.recvs[q] = slices.Delete(t.recvs[q], i, i+1)
		t.mu.Unlock()
		deliver(r, &msg, op.Buf)
		op.Complete(c)
		return nil
	}
	n := len(op.Buf)
	eager := n <= EagerLimit && t.bytes+n <= UnexpectedLimit
	switch {
	case eager || op.Flags&fi.INJECT != 0:
		if !eager {
			t.mu.Unlock()
			return core.Errorf(fi.EAGAIN, "shm: %s holds %d bytes of unexpected messages", t.name, t.bytes)
		}
		msg.kept = slices.Clone(op.Buf)
		t.bytes += n
		t.unexp[q] = append(t.unexp[q], &msg)
		t.mu.Unlock()
		op.Complete(c)
	default:
		msg.op, msg.from = op, e
		e.held.Add(1)
		t.unexp[q] = append(t.unexp[q], &msg)
		t.mu.Unlock()
	}
	return nil
}

// matches reports whether the receive r takes msg: the same queue, the
// tag under r's ignore bits, and the sender r names, if any (FI_DIRECTED_RECV).
func matches(r *core.Op, msg *message) bool {
	if msg.tagged && (r.Tag|r.Ignore) != (msg.tag|r.Ignore) {
		return false
	}
	return r.Peer == (fi.Addr{}) || r.Peer == msg.src
}

// deliver completes the receive r with payload placed in its buffer. A
// receive without a buffer gets one of the message's size, at most
// MaxDynamicRecv.
func deliver(r *core.Op, msg *message, payload []byte) {
	if r.Buf == nil {
		r.Buf = make([]byte, min(len(payload), MaxDynamicRecv))
	}
	r.Complete(placed(r, msg, payload, r.Buf))
}

// placed copies payload into buf, the part of r's buffer msg takes, and
// returns r's completion for it: truncated with fi.ETRUNC if longer.
func placed(r *core.Op, msg *message, payload, buf []byte) core.Completion {
	c := core.Completion{Flags: r.Kind.CQFlags() | msg.flags, Data: msg.data, Src: msg.src}
	if msg.tagged {
		c.Tag = msg.tag
	}
	n := copy(buf, payload)
	c.Len = uint64(n)
	if rest := len(payload) - n; rest > 0 {
		c.Err, c.OLen = fi.ETRUNC, uint64(rest)
	}
	return c
}

// postRecv delivers the first unexpected message r matches, or queues r.
// A receive with FI_MULTI_RECV is postMulti's.
func (e *endpoint) postRecv(r *core.Op) error {
	q := queueOf(r.Kind == core.OpTRecv)
	if isMulti(r) && (r.Kind != core.OpRecv || e.caps&fi.MULTI_RECV == 0) {
		return core.Errorf(fi.EOPNOTSUPP, "shm: FI_MULTI_RECV is for untagged receives of endpoints with the FI_MULTI_RECV capability")
	}
	e.mu.Lock()
	if r.Kind == core.OpTRecv && r.Flags&(fi.PEEK|fi.CLAIM) != 0 {
		return e.peekLocked(r)
	}
	if isMulti(r) {
		return e.postMulti(r)
	}
	i := slices.IndexFunc(e.unexp[q], func(m *message) bool { return matches(r, m) })
	if i < 0 {
		if len(e.recvs[0])+len(e.recvs[1]) >= e.rxSize {
			e.mu.Unlock()
			return core.Errorf(fi.EAGAIN, "shm: %d receives posted (rx_size)", e.rxSize)
		}
		if e.gone {
			e.mu.Unlock()
			return core.Errorf(fi.EOPBADSTATE, "shm: endpoint closed")
		}
		e.recvs[q] = append(e.recvs[q], r)
		e.mu.Unlock()
		return nil
	}
	msg := e.takeLocked(q, i)
	e.mu.Unlock()
	deliver(r, msg, msg.payload())
	msg.sent(0)
	return nil
}

// takeLocked removes the unexpected message i of queue q. A held send
// counts as active at its sender until sent completes it.
func (e *endpoint) takeLocked(q, i int) *message {
	msg := e.unexp[q][i]
	e.unexp[q] = slices.Delete(e.unexp[q], i, i+1)
	e.bytes -= len(msg.kept)
	if msg.op != nil {
		msg.from.active.Add(1)
		msg.from.held.Add(-1)
	}
	return msg
}

// sent completes a held send taken by takeLocked, with err (0: placed).
func (msg *message) sent(err fi.Errno) {
	if msg.op == nil {
		return
	}
	msg.op.Complete(core.Completion{Flags: msg.op.Kind.CQFlags(), Len: uint64(len(msg.op.Buf)), Err: err})
	msg.from.active.Add(-1)
}

// peekLocked serves a tagged receive with FI_PEEK or FI_CLAIM
// (fi_tagged(3)), which never waits. FI_PEEK completes with the length,
// tag and data of the first unexpected message it matches, or with
// fi.ENOMSG; with FI_DISCARD the message is dropped; with FI_CLAIM it is
// set aside, copied out of a sender still waiting, for the FI_CLAIM
// receive of the same claim key (Op.Key, the application's context):
// "Claimed messages can only be retrieved using a subsequent, paired
// receive operation with the FI_CLAIM flag set." That receive places it
// (its completion has FI_CLAIM: fi_msg(3), "the CQ entry flags will have
// the FI_CLAIM bit set"), or drops it with FI_DISCARD; with no message
// claimed under its key it completes with fi.ENOMSG. A claimed message
// counts against UnexpectedLimit until taken. It unlocks e.mu.
func (e *endpoint) peekLocked(r *core.Op) error {
	c := core.Completion{Flags: r.Kind.CQFlags(), Err: fi.ENOMSG}
	if r.Flags&fi.PEEK == 0 {
		msg := e.claimed[r.Key]
		if msg == nil {
			e.mu.Unlock()
			r.Complete(c)
			return nil
		}
		delete(e.claimed, r.Key)
		e.bytes -= len(msg.kept)
		e.mu.Unlock()
		if r.Flags&fi.DISCARD != 0 {
			r.Complete(core.Completion{Flags: r.Kind.CQFlags() | msg.flags | fi.CQFlags(fi.CLAIM), Data: msg.data, Tag: msg.tag, Src: msg.src})
			return nil
		}
		if r.Buf == nil {
			r.Buf = make([]byte, len(msg.kept))
		}
		c = placed(r, msg, msg.kept, r.Buf)
		c.Flags |= fi.CQFlags(fi.CLAIM)
		r.Complete(c)
		return nil
	}
	i := slices.IndexFunc(e.unexp[1], func(m *message) bool { return matches(r, m) })
	if i < 0 {
		e.mu.Unlock()
		r.Complete(c)
		return nil
	}
	msg := e.unexp[1][i]
	c = core.Completion{Flags: r.Kind.CQFlags() | msg.flags, Len: uint64(len(msg.payload())), Data: msg.data, Tag: msg.tag, Src: msg.src}
	switch {
	case r.Flags&fi.DISCARD != 0:
		e.takeLocked(1, i)
	case r.Flags&fi.CLAIM != 0 && e.claimed[r.Key] != nil:
		e.mu.Unlock()
		r.Complete(core.Completion{Flags: r.Kind.CQFlags(), Err: fi.EINVAL}) // the key holds a claim already
		return nil
	case r.Flags&fi.CLAIM != 0:
		e.takeLocked(1, i)
		kept := *msg
		kept.op, kept.from, kept.kept = nil, nil, slices.Clone(msg.payload())
		e.bytes += len(kept.kept)
		if e.claimed == nil {
			e.claimed = map[uint64]*message{}
		}
		e.claimed[r.Key] = &kept
	default:
		e.mu.Unlock()
		r.Complete(c)
		return nil
	}
	e.mu.Unlock()
	r.Complete(c)
	msg.sent(0)
	return nil
}

// rma does a write or read on the target's region, as the target's
// events resolve it, and reports it there.
func (e *endpoint) rma(op *core.Op) {
	c := core.Completion{Flags: op.Kind.CQFlags(), Len: uint64(len(op.Buf))}
	t, perr := e.peer(op.Peer)
	if perr != 0 {
		c.Err = perr
		op.Complete(c)
		return
	}
	access, remote := fi.REMOTE_WRITE, core.Completion{Flags: fi.CQFlags(fi.RMA | fi.REMOTE_WRITE), Len: c.Len, Key: op.Key}
	if op.Kind == core.OpRead {
		access, remote.Flags = fi.REMOTE_READ, fi.CQFlags(fi.RMA|fi.REMOTE_READ)
	}
	buf, release, err := t.ev.Region(op.Key, op.Addr, c.Len, access)
	if err != nil {
		c.Err = core.Code(err)
		op.Complete(c)
		return
	}
	if op.Kind == core.OpRead {
		copy(op.Buf, buf)
	} else {
		copy(buf, op.Buf)
		if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
			remote.Flags, remote.Data = remote.Flags|fi.CQFlags(fi.REMOTE_CQ_DATA), op.Data
		}
	}
	release()
	t.ev.Remote(remote)
	op.Complete(c)
}

// Cancel completes a posted receive that has not matched with
// fi.ECANCELED. Sends are never cancelled: they are placed at once or
// wait at their target.
func (e *endpoint) Cancel(op *core.Op) bool {
	e.mu.Lock()
	for q := range e.recvs {
		if i := slices.Index(e.recvs[q], op); i >= 0 {
			e.recvs[q] = slices.Delete(e.recvs[q], i, i+1)
			done := e.endRecvLocked(op, core.Completion{Flags: op.Kind.CQFlags(), Err: fi.ECANCELED})
			e.mu.Unlock()
			done()
			return true
		}
	}
	e.mu.Unlock()
	return false
}

// Close takes the endpoint out of the table, completes its receives with
// fi.ECANCELED and the sends held at it with fi.EHOSTUNREACH (their
// target is gone), and withdraws its own sends held at other endpoints,
// completing them with fi.ECANCELED, before it returns.
func (e *endpoint) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.prov.mu.Lock()
	if e.prov.eps[e.name.Str] == e {
		delete(e.prov.eps, e.name.Str)
	}
	e.prov.mu.Unlock()

	e.mu.Lock()
	e.gone = true
	var ended []func()
	for q := range e.recvs {
		for _, r := range e.recvs[q] {
			ended = append(ended, e.endRecvLocked(r, core.Completion{Flags: r.Kind.CQFlags(), Err: fi.ECANCELED}))
		}
	}
	unexp := e.unexp
	e.recvs, e.unexp, e.claimed, e.bytes = [2][]*core.Op{}, [2][]*message{}, nil, 0
	for q := range unexp {
		for _, msg := range unexp[q] {
			if msg.op != nil {
				msg.from.active.Add(1)
				msg.from.held.Add(-1)
			}
		}
	}
	e.mu.Unlock()
	for _, done := range ended {
		done()
	}
	for q := range unexp {
		for _, msg := range unexp[q] {
			msg.sent(fi.EHOSTUNREACH)
		}
	}

	// Posts under way finish; then no new send of ours can be held.
	e.settle()
	if e.held.Load() > 0 {
		e.withdraw()
		e.settle()
	}
	e.prov.open.Release()
	return nil
}

// settle waits until no Post runs on the endpoint and no receive is
// placing one of its held sends.
func (e *endpoint) settle() {
	for e.active.Load() != 0 {
		time.Sleep(50 * time.Microsecond)
	}
}

// withdraw completes the sends of e held at other endpoints with
// fi.ECANCELED.
func (e *endpoint) withdraw() {
	e.prov.mu.RLock()
	targets := make([]*endpoint, 0, len(e.prov.eps))
	for _, t := range e.prov.eps {
		targets = append(targets, t)
	}
	e.prov.mu.RUnlock()
	for _, t := range targets {
		var mine []*message
		t.mu.Lock()
		for q := range t.unexp {
			t.unexp[q] = slices.DeleteFunc(t.unexp[q], func(m *message) bool {
				if m.from == e {
					e.held.Add(-1)
					mine = append(mine, m)
					return true
				}
				return false
			})
		}
		t.mu.Unlock()
		for _, m := range mine {
			m.op.Complete(core.Completion{Flags: m.op.Kind.CQFlags(), Err: fi.ECANCELED})
		}
	}
}
