package rxm

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Limits of an RDM endpoint.
const (
	// bufsPerConn is how many receive buffers of EagerLimit + headers each
	// connection keeps posted, at most: it starts with bufsStart and gains
	// one with each message it receives, so that an idle connection costs
	// little. repostBatch is how many the worker reposts at a time (fewer
	// while a connection has fewer buffers).
	bufsPerConn = 16
	bufsStart   = 2
	repostBatch = 4
	// bufSize holds any message a 1.17 peer sends with rendezvous off the
	// table: an rxm header and an eager payload, or a rendezvous request
	// with FI_BUFFERED_RECV data.
	bufSize = 64 + 104 + EagerLimit
	// ctrlSends are room in each connection's send queue beyond the
	// endpoint's tx_size and replySends, for messages of the protocol's
	// own (rendezvous reads, read-dones).
	ctrlSends = 64
	// MaxPeers bounds the peer table: addresses sent to, and peers that
	// connected, while they have a connection or sends waiting for one.
	MaxPeers = 1 << 16
	// MaxPeersPerHost bounds the peers of one remote host (an IPv4
	// address, an IPv6 /64), or of one user of this host (core.HostOf),
	// in the table, so that one host or user cannot take every slot: as
	// tcp.MaxHostConns bounds their connections at the listener.
	MaxPeersPerHost = 256
	// UnexpectedLimit bounds the bytes of unexpected messages an endpoint
	// keeps. Beyond it, connections stop being read (TCP back-pressure)
	// until receives are posted.
	UnexpectedLimit = 16 << 20
	// MaxDynamicRecv bounds the buffer made for a receive without one:
	// a longer rendezvous message is truncated to it.
	MaxDynamicRecv = 64 << 20
)

// ConnIdleTimeout is how long a connection may stay up without having
// carried a message, either way, before the endpoint closes it and
// forgets its peer: rxm connects to send, so a connection that carries
// nothing only holds a slot of the table.
const ConnIdleTimeout = time.Minute

// UsedIdleTimeout is how long a connection that carried messages may stay
// quiet, with no operation in flight either way, before the endpoint
// closes it and forgets its peer: a peer cannot keep a slot of the table
// (and a connection of the owner's) for ever by sending one message.
// Closing loses nothing: rxm connects again when either side sends.
const UsedIdleTimeout = 10 * time.Minute

// maxPeers, maxPeersPerHost, connIdleTimeout and usedIdleTimeout are
// MaxPeers, MaxPeersPerHost, ConnIdleTimeout and UsedIdleTimeout; tests
// shrink them.
var (
	maxPeers, maxPeersPerHost = MaxPeers, MaxPeersPerHost
	connIdleTimeout           = ConnIdleTimeout
	usedIdleTimeout           = UsedIdleTimeout
)

type epState uint8

const (
	epIdle epState = iota
	epEnabled
	epClosed
)

// endpoint is an FI_EP_RDM endpoint: a listener of the wrapped provider,
// whose address is the endpoint's name, and one MSG connection per peer,
// opened by the first send to it or accepted from it (conn.go). Sends
// carry the rxm header (send.go); received messages are matched against
// posted receives or kept as unexpected (recv.go, match.go).
//
// Locking: mu guards the endpoint's state, peers, connections' bookkeeping
// and the receive queues. It is never held while calling the wrapped
// provider (its completions and events take mu), and it is held while
// completing receives, to keep them in order.
type endpoint struct {
	dom    *domain
	info   *fi.Info
	msg    *fi.Info // the fi_info of the listener and the connections
	ev     core.EndpointEvents
	pid    uint32 // the "process id" of our ConnIDs: random, non-zero, per endpoint
	txSize int
	inject int // the largest FI_INJECT payload: tx_attr.inject_size, at most EagerLimit

	mu     sync.Mutex
	state  epState
	pep    core.PassiveEndpoint
	name   netip.AddrPort   // the listening address, canonical
	peers  map[uint32]*peer // by our index
	byAddr map[netip.AddrPort]*peer
	byHost map[core.HostKey]int // how many peers each host and user has: see core.HostOf
	free   []uint32             // indexes of forgotten peers, for new ones
	conns  map[*conn]struct{}   // every connection not yet closed
	// closedStats are the counts of the connections' endpoints that
	// closed (stats.go).
	closedStats []core.Count
	rx          matcher
	rxSize      int
	txOut       int // application sends not completed
	// held are the connected peers whose queues have sends posted with
	// fi.MORE, for Flush; heldSpare is the other slice Flush uses.
	held, heldSpare []*peer

	rndvSends map[uint64]*sendItem       // rendezvous sends in progress, by msg_id
	rndvNext  uint64                     // the next msg_id to try
	atomics   map[uint64]*sendItem       // atomics sent and not answered, by msg_id (atomic.go)
	atomNext  uint64                     // the next msg_id to try for them
	replies   []*reply                   // responses to peers' atomics waiting for room, in order
	rndvRead  []*rndvRecv                // rendezvous receives read, for the worker to answer
	pollers   atomic.Pointer[[]pollable] // the connections with an endpoint, for Poll

	// epfd is an epoll set of the connections' sockets (those of MSG
	// endpoints that are core.FDPollers), level-triggered: readable when
	// any of them is, it is the endpoint's own descriptor for an engine
	// group's poll(2) (PollFD). Registrations end when the sockets close.
	// It is made, under mu, when an engine group first polls a connection
	// (watch), so that the thousands of endpoints a daemon may hold that
	// never connect through the rings hold no descriptor for it; -1
	// before. pollFD is epfd until Close closes it, then -1.
	epfd   int
	pollFD atomic.Int32
	evs    []unix.EpollEvent // PollReady's, used by the one engine group polling the endpoint

	kick chan struct{} // wakes the worker
	// worker is whether the worker runs: from the first connection (it
	// serves connections only), so that the thousands of endpoints a
	// daemon may hold that never connect cost no goroutine and no ticker.
	worker  bool
	pending atomic.Bool // the worker's work is waiting: reposts, rendezvous reads, read-dones

	repostMu  sync.Mutex    // one repost at a time: the worker's or the engine group's
	reposting []repostWork  // repost's list, kept for its room
	polled    atomic.Bool   // an engine group polls the endpoint and does that work itself
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
}

var _ core.Endpoint = (*endpoint)(nil)
var _ core.FDPoller = (*endpoint)(nil)
var _ core.Flusher = (*endpoint)(nil)
var _ core.Options = (*endpoint)(nil)

func newEndpoint(d *domain, info *fi.Info, ev core.EndpointEvents) (*endpoint, error) {
	if ev == nil {
		return nil, core.Errorf(fi.EINVAL, "rxm: endpoint without event handler")
	}
	if info.Caps&^(rdmCaps|fi.LOCAL_COMM|fi.REMOTE_COMM) != 0 {
		return nil, core.Errorf(fi.EOPNOTSUPP, "rxm: capabilities %v not supported", info.Caps&^(rdmCaps|fi.LOCAL_COMM|fi.REMOTE_COMM))
	}
	txSize, rxSize := uint64(DefaultTxSize), uint64(DefaultRxSize)
	if info.TxAttr != nil && info.TxAttr.Size != 0 {
		txSize = info.TxAttr.Size
	}
	if info.RxAttr != nil && info.RxAttr.Size != 0 {
		rxSize = info.RxAttr.Size
	}
	if txSize > core.MaxQueueSize-ctrlSends-replySends || rxSize > core.MaxQueueSize {
		return nil, core.Errorf(fi.EINVAL, "rxm: tx_size %d, rx_size %d: at most %d and %d", txSize, rxSize, core.MaxQueueSize-ctrlSends-replySends, core.MaxQueueSize)
	}
	info = info.Clone()
	if info.TxAttr == nil {
		info.TxAttr = &fi.TxAttr{}
	}
	info.TxAttr.Size = txSize
	switch {
	case info.TxAttr.InjectSize == 0:
		info.TxAttr.InjectSize = InjectSize
	case info.TxAttr.InjectSize > EagerLimit:
		info.TxAttr.InjectSize = EagerLimit // injected payloads are copied into eager buffers
	}
	msg, err := d.msgInfo(info)
	if err != nil {
		return nil, err
	}
	e := &endpoint{
		dom: d, info: info, msg: msg, ev: ev, pid: rand.Uint32() | 1, txSize: int(txSize), rxSize: int(rxSize),
		inject: int(info.TxAttr.InjectSize),
		peers:  map[uint32]*peer{}, byAddr: map[netip.AddrPort]*peer{}, byHost: map[core.HostKey]int{}, conns: map[*conn]struct{}{}, rndvSends: map[uint64]*sendItem{},
		atomics: map[uint64]*sendItem{},
		kick:    make(chan struct{}, 1), done: make(chan struct{}),
	}
	e.rx.directed, e.rx.limit = info.Caps&fi.DIRECTED_RECV != 0, UnexpectedLimit
	e.rx.named = info.Caps&fi.NAMED_RX_CTX != 0 && info.EPAttr.RxCtxCnt > 1 && info.EPAttr.RxCtxCnt != fi.SHARED_CONTEXT
	e.rx.multi, e.rx.minMulti = map[*core.Op]*multiRecv{}, DefaultMinMultiRecv
	if info.Mode&fi.BUFFERED_RECV != 0 {
		be, ok := ev.(core.BufferedEvents)
		if !ok {
			return nil, core.Errorf(fi.EINVAL, "rxm: FI_BUFFERED_RECV needs events that take buffered messages")
		}
		e.rx.report = be.Buffered
	}
	e.epfd = -1
	e.pollFD.Store(-1)
	return e, nil
}

// Enable listens on the fi_info's source address (the domain's address,
// port 0 unless one was chosen) and starts the worker that reposts
// receive buffers.
func (e *endpoint) Enable() error {
	e.mu.Lock()
	st := e.state
	e.mu.Unlock()
	if st != epIdle {
		return core.Errorf(fi.EOPBADSTATE, "rxm: endpoint is already enabled or closed")
	}
	if e.info.SrcAddr == nil {
		return core.Errorf(fi.EINVAL, "rxm: no source address to listen on")
	}
	pep, err := e.dom.inner.NewPassiveEndpoint(e.msg, pepEvents{e})
	if err != nil {
		return err
	}
	if err := pep.Listen(*e.info.SrcAddr); err != nil {
		pep.Close()
		return err
	}
	name, err := pep.Name()
	if err != nil {
		pep.Close()
		return err
	}
	e.mu.Lock()
	if e.state != epIdle {
		e.mu.Unlock()
		pep.Close()
		return core.Errorf(fi.EOPBADSTATE, "rxm: endpoint was closed")
	}
	e.pep, e.name, e.state = pep, canon(name.IP), epEnabled
	e.mu.Unlock()
	return nil
}

// addConnLocked adds c to the endpoint's connections, starting the worker
// with the first. Called with mu held while the endpoint is enabled.
func (e *endpoint) addConnLocked(c *conn) {
	e.conns[c] = struct{}{}
	if !e.worker {
		e.worker = true
		e.wg.Add(1) // under mu while open: Close waits for it
		go e.runWorker()
	}
}

// Name is the listening address: what a peer inserts into its AV.
func (e *endpoint) Name() (fi.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != epEnabled {
		if e.info.SrcAddr != nil {
			return *e.info.SrcAddr, nil
		}
		return fi.Addr{}, core.Errorf(fi.EADDRNOTAVAIL, "rxm: endpoint has no address before enable")
	}
	return fi.SockAddr(e.name), nil
}

// Peer is fi_getpeer, which a connectionless endpoint does not have.
func (e *endpoint) Peer() (fi.Addr, error) {
	return fi.Addr{}, core.Errorf(fi.ENOTCONN, "rxm: an FI_EP_RDM endpoint has no peer")
}

// Connect, Accept, Reject and Shutdown are for FI_EP_MSG endpoints.
func (e *endpoint) Connect(fi.Addr, []byte) error { return errConnectionless("connect") }
func (e *endpoint) Accept([]byte) error           { return errConnectionless("accept") }
func (e *endpoint) Reject([]byte) error           { return errConnectionless("reject") }
func (e *endpoint) Shutdown() error               { return errConnectionless("shutdown") }

func errConnectionless(what string) error {
	return core.Errorf(fi.EOPBADSTATE, "rxm: %s: an FI_EP_RDM endpoint has no connection of its own", what)
}

// Post starts a send (OpSend, OpTSend), an RMA operation (OpWrite,
// OpRead), an atomic (OpAtomic, OpFetchAtomic, OpCompareAtomic) or a
// receive (OpRecv, OpTRecv).
func (e *endpoint) Post(op *core.Op) error {
	if op == nil {
		return core.Errorf(fi.EINVAL, "rxm: post: no operation")
	}
	switch op.Kind {
	case core.OpSend, core.OpTSend:
		return e.postSend(op)
	case core.OpWrite, core.OpRead:
		return e.postRMA(op)
	case core.OpAtomic, core.OpFetchAtomic, core.OpCompareAtomic:
		return e.postAtomic(op)
	case core.OpRecv, core.OpTRecv:
		return e.postRecv(op)
	}
	return core.Errorf(fi.EOPNOTSUPP, "rxm: operation kind %d is not supported", op.Kind)
}

// Cancel removes a posted receive, or a send or RMA operation still
// waiting for its connection, and completes it with fi.ECANCELED.
func (e *endpoint) Cancel(op *core.Op) bool {
	e.mu.Lock()
	found := e.rx.cancel(op)
	if !found {
		for _, p := range e.peers {
			if it, ok := p.unqueue(op); ok {
				e.forgetLocked(p)
				e.mu.Unlock()
				e.sendFailed(it, fi.ECANCELED)
				return true
			}
		}
	}
	e.mu.Unlock()
	return found
}

// Close stops listening, closes every connection (their sends complete
// with fi.ECANCELED), and completes what is still posted or queued with
// fi.ECANCELED.
func (e *endpoint) Close() error {
	e.mu.Lock()
	if e.state == epClosed {
		e.mu.Unlock()
		return nil
	}
	wasEnabled := e.state == epEnabled
	e.state = epClosed
	e.pollFD.Store(-1)
	if e.epfd >= 0 {
		unix.Close(e.epfd) // under mu: watch makes it and adds to it only before this
	}
	pep := e.pep
	var tcps []core.Endpoint
	var fins []func()
	for c := range e.conns {
		c.dead = true
		if c.tcp != nil {
			tcps = append(tcps, c.tcp)
		}
		fins = append(fins, e.connGoneLocked(c, fi.ECANCELED)...)
	}
	var queued []*sendItem
	for _, p := range e.peers {
		queued = append(queued, p.queue...)
		p.queue = nil
	}
	e.mu.Unlock()
	for _, fin := range fins {
		fin()
	}
	if pep != nil {
		pep.Close()
	}
	if wasEnabled {
		close(e.done)
	}
	for _, t := range tcps {
		e.closeInner(t)
	}
	e.wg.Wait()
	for _, it := range queued {
		e.sendFailed(it, fi.ECANCELED)
	}
	e.mu.Lock()
	rs := append(e.rx.started, e.rndvRead...)
	e.rx.started, e.rndvRead = nil, nil
	e.mu.Unlock()
	for _, r := range rs {
		e.completeRndv(r, core.Completion{Flags: r.comp.Flags, Offset: r.comp.Offset, Err: fi.ECANCELED})
	}
	e.mu.Lock()
	e.rx.flush()
	e.mu.Unlock()
	return nil
}

// SetOpt takes FI_OPT_MIN_MULTI_RECV and FI_OPT_BUFFERED_MIN (buffered.go);
// buffered_limit is core's (the bytes a report shows).
func (e *endpoint) SetOpt(name string, value uint64) error {
	e.mu.Lock()
	switch name {
	case "min_multi_recv":
		e.rx.minMulti = value
	case "buffered_min":
		e.rx.bufferedMin = value
	}
	e.mu.Unlock()
	return nil
}

// Poll drives the connections' progress on the engine's goroutine, and
// does the worker's work there too, so that a busy conversation needs no
// hand-off to the worker goroutine.
func (e *endpoint) Poll() bool { return e.PollReady(true) }

// PollFD is core.FDPoller's: the epoll set of the connections' sockets.
func (e *endpoint) PollFD() int { return int(e.pollFD.Load()) }

// PollReady is core.FDPoller's: Poll, told whether a connection's socket
// was ready at the engine group's poll(2) of PollFD. Not ready, no socket
// is read; ready, with several connections, one epoll_wait says which.
// Connections over a MSG provider without descriptors (verbs) are polled
// whatever the group says.
func (e *endpoint) PollReady(ready bool) bool {
	if !e.polled.Load() {
		e.polled.Store(true)
	}
	any := false
	if e.pending.Swap(false) {
		e.repost()
		e.startRndv()
		e.sendReplies()
		any = true
	}
	ps := e.pollers.Load()
	if ps == nil {
		return any
	}
	// Which sockets to read: none, all, or (filter) those in evs. An
	// error (EINTR, or closed under us) or a full array reads them all.
	var evs []unix.EpollEvent
	filter := false
	epfd := int(e.pollFD.Load())
	if epfd < 0 {
		// No epoll set yet (watch makes it), or it could not be made:
		// the group's poll(2) knows nothing of the sockets, so all are
		// read.
		ready = true
	} else if ready && len(*ps) > 1 {
		if n, err := unix.EpollWait(epfd, e.evs, 0); err == nil && n < len(e.evs) {
			evs, filter = e.evs[:n], true
		}
	}
	for _, pc := range *ps {
		var made bool
		if fp := pc.fd; fp != nil {
			if !pc.c.watched {
				e.watch(pc.c, fp)
			}
			made = fp.PollReady(ready && (!filter || hasFD(evs, fp.PollFD())))
		} else {
			made = pc.p.Poll()
		}
		any = any || made
	}
	return any
}

// watch adds c's socket to the endpoint's epoll set (PollFD) once it has
// one, making the set with the first, so that the group's poll(2) sees it
// from its next pass on. (What it holds now is in the set's ready list at
// once, level-triggered.) It takes mu so that Close's closing of the set
// cannot come between. A set that cannot be made (no descriptor left for
// the owner: core.CheckFD) is tried again at the next pass; meanwhile
// PollReady reads every socket.
func (e *endpoint) watch(c *conn, fp core.FDPoller) {
	fd := fp.PollFD()
	if fd < 0 {
		return // not connected yet, or closed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == epClosed {
		return
	}
	if e.epfd < 0 {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		if core.CheckFD(core.OwnerOf(e.ev), epfd, "rxm: epoll set") != nil {
			unix.Close(epfd)
			return
		}
		e.epfd, e.evs = epfd, make([]unix.EpollEvent, 64)
		e.pollFD.Store(int32(epfd))
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	// A registration ends when its socket closes; EEXIST would mean the
	// same socket, watched already.
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err == nil || err == unix.EEXIST {
		c.watched = true
	}
}

// hasFD reports whether the epoll events include descriptor fd.
func hasFD(evs []unix.EpollEvent, fd int) bool {
	for _, ev := range evs {
		if int(ev.Fd) == fd {
			return true
		}
	}
	return false
}

// Park hands the connections back to their own goroutines, and the
// worker's work back to the worker.
func (e *endpoint) Park() {
	e.polled.Store(false)
	if e.pending.Load() {
		e.kickWorker()
	}
	if ps := e.pollers.Load(); ps != nil {
		for _, pc := range *ps {
			pc.p.Park()
		}
	}
}

// pollable is a connection whose endpoint can be polled, with its
// interfaces found once rather than on every pass.
type pollable struct {
	c  *conn
	p  core.Poller
	fd core.FDPoller // nil if it has no descriptor
}

// updatePollersLocked republishes the connections that can be polled.
func (e *endpoint) updatePollersLocked() {
	var ps []pollable
	for c := range e.conns {
		if p, ok := c.tcp.(core.Poller); ok && !c.dead {
			fp, _ := p.(core.FDPoller)
			ps = append(ps, pollable{c, p, fp})
		}
	}
	e.pollers.Store(&ps)
}

// runWorker reposts the receive buffers that messages have been taken from,
// and posts the reads and read-dones of rendezvous receives; every half
// connIdleTimeout it closes the connections that never carried a message
// and shrinks those that carried none meanwhile (closeIdle).
func (e *endpoint) runWorker() {
	defer e.wg.Done()
	tick := time.NewTicker(max(connIdleTimeout/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-e.kick:
		case now := <-tick.C:
			e.closeIdle(now)
			continue
		case <-e.done:
			return
		}
		e.pending.Store(false)
		e.repost()
		e.startRndv()
		e.sendReplies()
	}
}

// repost posts every connection's free buffers, unless unexpected
// messages hold too many bytes: then the connections wait (TCP
// back-pressure) until receives take them.
func (e *endpoint) repost() {
	// The buffers are moved to reposting, reused from call to call, so
	// that c.free keeps its room too.
	e.repostMu.Lock()
	defer e.repostMu.Unlock()
	todo := e.reposting[:0]
	e.mu.Lock()
	if !e.rx.over() {
		for c := range e.conns {
			if len(c.free) > 0 && c.tcp != nil && !c.dead {
				todo = append(todo, repostWork{c: c})
				for _, op := range c.free {
					todo = append(todo, repostWork{op: op})
				}
				clear(c.free)
				c.free = c.free[:0]
			}
		}
	}
	e.mu.Unlock()
	var c *conn
	for _, w := range todo {
		switch {
		case w.c != nil:
			c = w.c
		case c != nil && c.tcp.Post(w.op) != nil:
			c = nil // the connection is going down: skip its other buffers
		}
	}
	clear(todo)
	e.reposting = todo[:0]
}

// repostWork is one entry of repost's list: a connection, then the
// buffers to post to it.
type repostWork struct {
	c  *conn
	op *core.Op
}

// wake has the worker's work done: by the engine group polling the
// endpoint, or else by the worker.
func (e *endpoint) wake() {
	e.pending.Store(true)
	if !e.polled.Load() {
		e.kickWorker()
	}
}

// kickWorker wakes the worker without blocking.
func (e *endpoint) kickWorker() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// asyncError reports an error that does not end the endpoint, if core
// listens for them. Called without mu.
func (e *endpoint) asyncError(err error) {
	if r, ok := e.ev.(core.AsyncErrors); ok {
		r.AsyncError(err)
	}
}

// canon is the form addresses are compared in: IPv4-mapped IPv6 as IPv4,
// no zone.
func canon(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
}
