package rxm

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Connections, as libfabric 1.17's rxm makes them (docs/rxm.md section 3):
// lazily, by the first send to a peer; one per pair of endpoints, carrying
// both directions; crossing requests settled by comparing addresses.

// peerState is where a peer's connection is.
type peerState uint8

const (
	pIdle       peerState = iota // no connection
	pConnecting                  // we sent a connect request
	pAccepting                   // we accepted the peer's request
	pConnected
)

// Retries after a reject with "already connected" (RejectAlready): the
// peer's own request normally arrives within milliseconds; if it does not
// (the peer still holds a connection we lost), we connect again.
const (
	alreadyRetries = 100
	alreadyDelay   = 20 * time.Millisecond
)

// peer is one remote RDM endpoint: an address we sent to, or that
// connected to us. Guarded by endpoint.mu.
type peer struct {
	index    uint32         // ours: announced in ConnIDs, echoed as conn_id by the peer
	addr     netip.AddrPort // its listening address, canonical
	host     core.HostKey   // its host and user, counted in byHost
	state    peerState
	conn     *conn       // the connection our sends use, or that is being set up
	queue    []*sendItem // sends waiting for conn, in order
	spare    []*sendItem // the other slice flush uses: see flush
	flushing bool        // a goroutine is posting queue to conn
	held     bool        // in endpoint.held: queue has sends posted with fi.MORE
	waiting  bool        // queue's newest send came with fi.MORE: flush leaves it for Flush
	retries  int         // RejectAlready answers in a row
}

// unqueue removes the queued send of op.
func (p *peer) unqueue(op *core.Op) (*sendItem, bool) {
	for i, it := range p.queue {
		if it.op == op {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return it, true
		}
	}
	return nil, false
}

// conn is one MSG connection of the wrapped provider. Guarded by
// endpoint.mu, except tcp, which is set once (attach) and then read freely.
type conn struct {
	ep          *endpoint
	peer        *peer
	tcp         core.Endpoint // nil until made
	accepted    bool          // made from the peer's request
	remoteIndex uint32        // the peer's index of us: conn_id of what we send
	remotePID   uint32        // the pid in the peer's ConnID; 0: unknown
	dead        bool          // abandoned: whoever set this closes tcp
	free        []*core.Op    // receive buffers to repost
	bufs        []*core.Op    // its receive buffers: at most bufsPerConn
	upAt        time.Time     // when it was connected
	carried     bool          // a message went over it, either way
	recent      bool          // one did since closeIdle last looked
	quietSince  time.Time     // closeIdle first saw it quiet (not recent) after its last message
	sends       int           // sends posted on it whose completion has not come (sendItem.conn)
	msg         message       // the message being received: decode
	ctrl        int           // rendezvous reads and read-dones posted, at most ctrlSends
	replying    int           // responses to atomics posted, at most replySends
	waiting     int           // responses to atomics waiting in endpoint.replies
	reads       []lentRead    // regions given to the peer's read requests, until their responses are written
	watched     bool          // its socket is in the endpoint's epoll set; used by PollReady only

	// The segmented messages being received on it, by msg_id (sar.go).
	sar map[uint64]*sarRecv
}

// connEvents are a connection's events. The RDM endpoint's own events
// are embedded, so that what a connection reports about the endpoint's
// memory reaches it.
type connEvents struct {
	core.EndpointEvents
	c *conn
}

// Owner passes the RDM endpoint's owner on to the connection
// (core.Owned): its peers reach that owner's memory only.
func (ev connEvents) Owner() uint32 { return core.OwnerOf(ev.EndpointEvents) }

// Take and Give charge the connection to the RDM endpoint's owner
// (core.Accounter).
func (ev connEvents) Take(r core.Resource, n int64) error { return core.Take(ev.EndpointEvents, r, n) }
func (ev connEvents) Give(r core.Resource, n int64)       { core.Give(ev.EndpointEvents, r, n) }

func (ev connEvents) Connected(data []byte)         { ev.c.ep.connected(ev.c, data) }
func (ev connEvents) Shutdown()                     { ev.c.ep.connDown(ev.c, nil, nil) }
func (ev connEvents) Failed(err error, data []byte) { ev.c.ep.connDown(ev.c, err, data) }

// rejectEvents are the events of an endpoint made only to reject a request.
type rejectEvents struct{ core.EndpointEvents }

func (rejectEvents) Connected([]byte)     {}
func (rejectEvents) Shutdown()            {}
func (rejectEvents) Failed(error, []byte) {}

// pepEvents are the listener's.
type pepEvents struct{ e *endpoint }

func (ev pepEvents) ConnReq(req core.ConnReq) { ev.e.connReq(req) }
func (ev pepEvents) Failed(err error)         { ev.e.asyncError(err) }

// Owner is the RDM endpoint's owner (core.Owned): its listening socket is
// that user's.
func (ev pepEvents) Owner() uint32 { return core.OwnerOf(ev.e.ev) }

// Take and Give charge the listener and its handshakes to the RDM
// endpoint's owner (core.Accounter).
func (ev pepEvents) Take(r core.Resource, n int64) error { return core.Take(ev.e.ev, r, n) }
func (ev pepEvents) Give(r core.Resource, n int64)       { core.Give(ev.e.ev, r, n) }

// peerLocked finds or makes the peer with address a. A new peer takes a
// free slot of the table, if its host and user (core.HostOf) have not
// used their share: those of the socket the peer connected from (from),
// or for a peer this side connects to (from zero) those of its listener.
func (e *endpoint) peerLocked(a, from netip.AddrPort) (*peer, error) {
	if p := e.byAddr[a]; p != nil {
		return p, nil
	}
	if len(e.peers) >= maxPeers {
		return nil, core.Errorf(fi.ENOSPC, "rxm: %d peers, the most an endpoint keeps", maxPeers)
	}
	h := core.HostOf(netip.AddrPort{}, a)
	if from.IsValid() {
		h = core.HostOf(e.name, from)
	}
	if e.byHost[h] >= maxPeersPerHost {
		return nil, core.Errorf(fi.ENOSPC, "rxm: %d peers at %v, the most one host (one user of this host) may have", maxPeersPerHost, h)
	}
	index := uint32(len(e.peers)) // indexes below it are taken or free
	if n := len(e.free); n > 0 {
		index, e.free = e.free[n-1], e.free[:n-1]
	}
	p := &peer{index: index, addr: a, host: h}
	e.peers[index] = p
	e.byAddr[a] = p
	e.byHost[h]++
	return p, nil
}

// forgetLocked drops p from the table if nothing holds it: no connection,
// no send waiting for one. A later send to its address, or its own
// connect request, makes it again, with a new connection.
func (e *endpoint) forgetLocked(p *peer) {
	if p.state != pIdle || p.conn != nil || len(p.queue) > 0 || p.flushing || e.byAddr[p.addr] != p {
		return
	}
	delete(e.byAddr, p.addr)
	delete(e.peers, p.index)
	if e.byHost[p.host]--; e.byHost[p.host] <= 0 {
		delete(e.byHost, p.host)
	}
	e.free = append(e.free, p.index)
}

// connectLocked starts a connection to p, whose sends wait in its queue.
func (e *endpoint) connectLocked(p *peer) {
	c := &conn{ep: e, peer: p}
	p.conn, p.state = c, pConnecting
	if trace.On(trace.CM) {
		e.tracef(trace.CM, "connect to peer %s", fi.SockAddr(p.addr))
	}
	e.addConnLocked(c)
	e.wg.Add(1)
	go e.dial(c)
}

// dial makes c's endpoint, posts its receive buffers and sends the
// connect request: connected or connDown follows.
func (e *endpoint) dial(c *conn) {
	defer e.wg.Done()
	cd := wire.NewConnect(e.name.Port(), wire.MakeConnID(e.pid, c.peer.index))
	data, err := cd.Encode()
	if err != nil {
		e.connDown(c, core.Errorf(fi.EINVAL, "rxm: connect data: %v", err), nil)
		return
	}
	t, err := e.open(c, nil)
	if err != nil {
		e.connDown(c, err, nil)
		return
	}
	if t == nil {
		return // abandoned meanwhile
	}
	if err := t.Connect(fi.SockAddr(c.peer.addr), data); err != nil {
		e.connDown(c, err, nil)
	}
}

// open makes c's endpoint of the wrapped provider (from req, if accepting),
// enables it and posts its receive buffers. It returns nil if c was
// abandoned meanwhile.
func (e *endpoint) open(c *conn, req core.ConnReq) (core.Endpoint, error) {
	t, err := e.dom.inner.NewEndpoint(e.msg, req, connEvents{e.ev, c})
	if err != nil {
		return nil, err
	}
	if err := t.Enable(); err != nil {
		t.Close()
		return nil, err
	}
	for _, op := range c.newBufs() {
		if err := t.Post(op); err != nil {
			t.Close()
			return nil, err
		}
	}
	e.mu.Lock()
	if c.dead {
		e.mu.Unlock()
		t.Close()
		return nil, nil
	}
	c.tcp = t
	e.updatePollersLocked()
	e.mu.Unlock()
	return t, nil
}

// connected is FI_CONNECTED on c: with the accept data of our request, or
// after our accept. The peer's queued sends go out.
func (e *endpoint) connected(c *conn, data []byte) {
	var acc wire.Accept
	if !c.accepted {
		var err error
		if acc, err = wire.DecodeAccept(data); err != nil {
			e.protocolError(c, err)
			return
		}
	}
	e.mu.Lock()
	p := c.peer
	if c.dead || p.conn != c {
		e.mu.Unlock() // a separate connection from ourselves, or abandoned
		return
	}
	if !c.accepted {
		c.remoteIndex, c.remotePID = acc.ConnID.Index(), acc.ConnID.PID()
	}
	p.state, p.retries = pConnected, 0
	c.upAt = time.Now()
	e.mu.Unlock()
	if trace.On(trace.CM) {
		e.tracef(trace.CM, "peer %s connected", fi.SockAddr(p.addr))
	}
	e.log("peer connected", "peer", fi.SockAddr(p.addr).String())
	e.flush(p)
}

// closeIdle closes the connections that are up, have nothing waiting to
// be sent and no operation in flight either way (busyLocked), and either
// carried no message since connIdleTimeout before now or were quiet for
// usedIdleTimeout, and forgets their peers: the peer sees a shutdown, and a
// send from either side connects again (rxm connects on demand).
// Connections that carried none since it last looked give back their
// receive buffers beyond bufsStart.
func (e *endpoint) closeIdle(now time.Time) {
	e.mu.Lock()
	if e.state != epEnabled {
		e.mu.Unlock()
		return
	}
	var silent []core.Endpoint
	var quiet []*conn
	for c := range e.conns {
		p := c.peer
		if c.carried && !c.dead && c.tcp != nil {
			if c.recent {
				c.quietSince = now
			} else if len(c.bufs) > bufsStart {
				quiet = append(quiet, c)
			}
			c.recent = false
		}
		if c.dead || c.tcp == nil || p.conn != c || p.state != pConnected || len(p.queue) > 0 || p.flushing {
			continue
		}
		since, idle := c.quietSince, usedIdleTimeout
		if !c.carried {
			since, idle = c.upAt, connIdleTimeout
		}
		if now.Sub(since) < idle || e.busyLocked(c) {
			continue
		}
		c.dead = true
		delete(e.conns, c)
		p.conn, p.state = nil, pIdle
		e.forgetLocked(p)
		silent = append(silent, c.tcp)
		e.wg.Add(1) // under mu while open: Close waits for it
	}
	if len(silent) > 0 {
		e.updatePollersLocked()
	}
	var extra [][]*core.Op
	for _, c := range quiet {
		extra = append(extra, slices.Clone(c.bufs[bufsStart:]))
	}
	e.mu.Unlock()
	for _, t := range silent {
		go func() {
			defer e.wg.Done()
			t.Shutdown()
			e.closeInner(t)
		}()
	}
	for i, c := range quiet {
		c.shrink(extra[i])
	}
}

// busyLocked reports whether an operation is in flight on c, either way:
// a send posted on it and not completed; a rendezvous request of ours sent
// on it whose data the peer has not finished reading; a rendezvous request
// of the peer's on it, waiting for a receive, being read or answered; a
// read of our memory by the peer; an atomic of ours not answered, or a
// response to the peer's not sent.
func (e *endpoint) busyLocked(c *conn) bool {
	if c.sends > 0 || c.ctrl > 0 || c.replying > 0 || c.waiting > 0 || len(c.reads) > 0 {
		return true
	}
	for _, it := range e.atomics {
		if it.atomic.conn == c {
			return true
		}
	}
	for _, it := range e.rndvSends {
		if it.rndv.conn == c {
			return true
		}
	}
	for _, r := range e.rx.started {
		if r.conn == c {
			return true
		}
	}
	for _, q := range e.rx.unexp {
		for _, m := range q {
			if m.rndv != nil && m.conn == c {
				return true
			}
		}
	}
	return false
}

// shrink takes back receive buffers ops of c: those still posted (the
// wrapped provider cancels them) or waiting to be reposted. The rest are
// in use, and stay.
func (c *conn) shrink(ops []*core.Op) {
	for _, op := range ops {
		cancelled := c.tcp.Cancel(op) // it completes with ECANCELED: received drops it
		e := c.ep
		e.mu.Lock()
		if i := slices.Index(c.free, op); i >= 0 {
			c.free = slices.Delete(c.free, i, i+1)
			cancelled = true
		}
		if cancelled {
			c.bufs = slices.DeleteFunc(c.bufs, func(b *core.Op) bool { return b == op })
		}
		e.mu.Unlock()
	}
}

// connDown is the end of c: the peer's shutdown (err nil), a failure, or a
// reject (err wrapping fi.ECONNREFUSED, data the reject's). Queued sends
// wait for the peer's own request after RejectAlready, go on a new
// connection if c had been up, and fail otherwise.
func (e *endpoint) connDown(c *conn, err error, data []byte) {
	e.mu.Lock()
	p := c.peer
	mine := !c.dead // we take c down: we close its endpoint
	c.dead = true
	delete(e.conns, c)
	e.updatePollersLocked()
	var failed []*sendItem
	already := false
	if mine && p.conn == c {
		was := p.state
		p.conn, p.state = nil, pIdle
		switch {
		case e.state == epClosed:
		case was == pConnecting && isRejectAlready(err, data):
			already = true
			if p.retries++; p.retries > alreadyRetries {
				failed, p.queue = p.queue, nil
			} else {
				time.AfterFunc(alreadyDelay, func() { e.retry(p) })
			}
		case was == pConnecting:
			failed, p.queue = p.queue, nil
		case len(p.queue) > 0:
			if trace.On(trace.Retransmit) {
				e.tracef(trace.Retransmit, "reconnect to peer %s: sends are queued", fi.SockAddr(p.addr))
			}
			e.connectLocked(p)
		}
	}
	code := core.Code(err)
	if err == nil {
		code = fi.ECONNRESET
	}
	var fins []func()
	if mine {
		fins = e.connGoneLocked(c, code)
	}
	e.forgetLocked(p)
	closed := e.state == epClosed
	t := c.tcp
	closeT := mine && t != nil && !closed
	if closeT {
		e.wg.Add(1) // under mu while open: Close waits for it
	}
	e.mu.Unlock()
	if mine && !already && trace.On(trace.CM) {
		e.tracef(trace.CM, "peer %s connection lost: %s", fi.SockAddr(p.addr), errText(err))
	}
	if mine && !already {
		e.log("peer connection lost", "peer", fi.SockAddr(p.addr).String(), "why", errText(err))
	}
	if mine && err != nil && !already && !closed {
		e.asyncError(core.WithOp("connection to "+fi.SockAddr(p.addr).String(), err))
	}
	for _, fin := range fins {
		fin()
	}
	for _, it := range failed {
		e.sendFailed(it, code)
	}
	if closeT {
		e.closeAsync(t)
	}
}

// isRejectAlready reports whether a connect ended with the peer's reject
// saying it connects to us itself.
func isRejectAlready(err error, data []byte) bool {
	if core.Code(err) != fi.ECONNREFUSED {
		return false
	}
	r, derr := wire.DecodeReject(data)
	return derr == nil && r.Reason == wire.RejectAlready
}

// retry connects to p again after a RejectAlready, unless the peer's own
// connection has come meanwhile.
func (e *endpoint) retry(p *peer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == epEnabled && p.state == pIdle && p.conn == nil && len(p.queue) > 0 {
		if trace.On(trace.Retransmit) {
			e.tracef(trace.Retransmit, "connect to peer %s again: it was connecting to us at the same time", fi.SockAddr(p.addr))
		}
		e.connectLocked(p)
	}
	e.forgetLocked(p)
}

// connReq is a connect request on the listener. It is accepted or rejected
// by the rules of libfabric's rxm_process_connreq (docs/rxm.md 3.5).
func (e *endpoint) connReq(req core.ConnReq) {
	cd, err := wire.DecodeConnect(req.Data())
	dest := req.Info().DestAddr
	if err == nil && dest == nil {
		err = errors.New("rxm: connect request without the peer's address")
	}
	if err != nil {
		e.reject(req, wire.RejectConnRefused)
		e.asyncError(core.Errorf(fi.ECONNREFUSED, "rxm: refused a connect request: %v", err))
		return
	}
	addr := canon(netip.AddrPortFrom(dest.IP.Addr(), cd.Port))
	e.mu.Lock()
	if e.state != epEnabled {
		e.mu.Unlock()
		e.reject(req, wire.RejectConnRefused)
		return
	}
	p, err := e.peerLocked(addr, canon(dest.IP))
	if err != nil {
		e.mu.Unlock()
		e.reject(req, wire.RejectConnRefused)
		e.asyncError(err)
		return
	}
	c := &conn{ep: e, peer: p, accepted: true, remoteIndex: cd.ConnID.Index(), remotePID: cd.ConnID.PID()}
	self := false
	var old *conn
	switch p.state {
	case pConnecting:
		switch cmp := addr.Compare(e.name); {
		case cmp < 0: // our request wins
			e.mu.Unlock()
			e.reject(req, wire.RejectAlready)
			return
		case cmp > 0: // the peer's wins: abandon ours, its sends go on this one
			old = p.conn
		default: // we connect to ourselves: a separate connection takes it
			self = true
		}
	case pAccepting, pConnected:
		if p.conn.remotePID != 0 && p.conn.remotePID == cd.ConnID.PID() {
			e.mu.Unlock()
			e.reject(req, wire.RejectAlready) // a duplicate
			return
		}
		old = p.conn // the peer restarted
	}
	if !self {
		p.conn, p.state = c, pAccepting
	}
	e.addConnLocked(c)
	var oldTCP core.Endpoint
	var fins []func()
	if old != nil {
		old.dead = true
		delete(e.conns, old)
		oldTCP = old.tcp
		if oldTCP != nil {
			e.wg.Add(1) // under mu while open: Close waits for it
		}
		e.updatePollersLocked()
		fins = e.connGoneLocked(old, fi.ECONNRESET)
	}
	e.mu.Unlock()
	for _, fin := range fins {
		fin()
	}
	if oldTCP != nil {
		e.closeAsync(oldTCP)
	}
	t, err := e.open(c, req)
	if err != nil {
		e.connDown(c, err, nil)
		return
	}
	if t == nil {
		return
	}
	ad := wire.NewAccept(wire.MakeConnID(e.pid, p.index))
	data, err := ad.Encode()
	if err == nil {
		err = t.Accept(data)
	}
	if err != nil {
		e.connDown(c, err, nil)
	}
}

// reject answers req with reason.
func (e *endpoint) reject(req core.ConnReq, reason wire.RejectReason) {
	r := wire.Reject{Reason: reason}
	data, _ := r.Encode()
	t, err := e.dom.inner.NewEndpoint(e.msg, req, rejectEvents{e.ev})
	if err != nil {
		return // the listener rejects it when it closes
	}
	t.Reject(data)
	t.Close()
}

// protocolError ends c after a malformed or unsupported message.
func (e *endpoint) protocolError(c *conn, err error) {
	e.connDown(c, core.Errorf(fi.EIO, "rxm: bad message from %v: %v", fi.SockAddr(c.peer.addr), err), nil)
}

// closeAsync closes a connection's endpoint on a goroutine of its own:
// the caller may be inside that endpoint's callbacks. The caller has
// counted it in e.wg while holding e.mu with the endpoint not closed, so
// that Close, which marks the endpoint closed under e.mu before it waits,
// cannot miss it.
func (e *endpoint) closeAsync(t core.Endpoint) {
	go func() {
		defer e.wg.Done()
		e.closeInner(t)
	}()
}
