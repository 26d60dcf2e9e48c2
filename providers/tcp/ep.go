package tcp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// epState is where an endpoint is in its life.
type epState uint8

const (
	stIdle       epState = iota // not connected; or made from a request not yet answered
	stConnecting                // Connect or Accept under way
	stConnected
	stDown   // shut down, failed or rejected: no more data transfers
	stClosed // Close was called
)

// txItem is a send, RMA write or read request, or the response to a peer's
// read request, waiting for or in the writer.
type txItem struct {
	op    *core.Op          // nil for a read response
	inj   *[InjectSize]byte // the copied payload of an FI_INJECT send or write
	flags wire.Flags        // FlagDeliveryComplete, FlagCommitComplete: completes on the peer's ACK
	rsp   *readRsp
	// waits: the operation completes on the peer's ACK or read response,
	// not when written. Decided when the batch is made: by the time the
	// batch is done the answer may have completed the Op, which then goes
	// back to core's pool and must not be looked at.
	waits bool
}

// readRsp is the response to a peer's read request: the request's header,
// which the response copies, and the bytes read, held until written.
type readRsp struct {
	h       wire.Header
	data    [wire.MaxRMAIov][]byte
	release [wire.MaxRMAIov]func()
	n       int
}

// rxDone is a filled receive and its completion; ack says the sender asked
// for an ACK.
type rxDone struct {
	op  *core.Op
	c   core.Completion
	ack bool
}

// needsAck reports whether the send or write completes on the peer's ACK.
func (it *txItem) needsAck() bool {
	return it.flags&(wire.FlagDeliveryComplete|wire.FlagCommitComplete) != 0
}

var injectPool = sync.Pool{New: func() any { return new([InjectSize]byte) }}

// errDown ends the reader or writer when the endpoint goes down locally.
var errDown = errors.New("tcp: endpoint is going down")

// endpoint is an FI_EP_MSG endpoint over one TCP connection.
//
// Its connection goroutine dials or answers, reports FI_CONNECTED, then
// receives until the connection ends (io.go: it shares the socket with the
// engine through Poll), and reports how it ended: it alone delivers
// EndpointEvents, so each endpoint gets at most one Connected and then
// exactly one Shutdown or Failed. Sends are written by whoever posts them;
// a writer goroutine finishes what a full socket did not take. Both park
// in the netpoller or on channels when idle.
type endpoint struct {
	dom     *domain
	info    *fi.Info
	ev      core.EndpointEvents
	txSize  int
	rxSize  int
	fromReq bool // made from a connection request: Accept or Reject, not Connect
	// lst is the passive endpoint whose listener accepted the connection
	// (fromReq): it counts the connection until Close.
	lst *passiveEndpoint

	// complete, if set, replaces Op.Complete (tests watch completions).
	complete func(*core.Op, core.Completion)

	mu      sync.Mutex
	state   epState
	enabled bool
	// conn is set before the connection goroutine starts reading or
	// writing it, and never changes after: the reader and writer use it
	// without the lock.
	conn      *net.TCPConn
	cancel    context.CancelFunc // aborts a dial under way
	cookie    uint64             // of the socket dial made (core.OwnSocket); under mu
	charged   bool               // its socket is charged to its owner (core.Connections) until Close
	shutdown  bool               // Shutdown was called: the connection ends cleanly
	failure   error              // why the writer stopped; the connection goroutine reports it
	rxOut     int                // receives posted and not completed: at most rxSize
	txOut     int                // sends posted and not completed: at most txSize
	rxq       ring[*core.Op]     // posted receives
	rxStalled bool               // a message waits for a receive: postRecv wakes the reader
	rxDone    ring[rxDone]       // filled receives completed after the ACKs ahead of them are written
	rxHeld    int                // filled receives in the writer's batch, not yet completed
	txq       ring[txItem]       // sends not yet taken by the writer
	ackq      ring[txItem]       // sends waiting for the peer's ACK, oldest first
	readq     ring[txItem]       // reads waiting for their response, oldest first
	rspq      ring[*readRsp]     // responses to peers' reads, written before sends

	// fd is the connected socket, which the endpoint owns once the
	// handshake is done (netpoll.go); -1 before and after. It changes only
	// with rxMu, txMu and mu all held, so holding any one keeps it open.
	// fdOut is a dup of it for waiting until the socket has room.
	fd, fdOut int
	lastInfo  *unix.TCPInfo // the socket's TCP_INFO when it closed (stats.go), under mu
	rxW, txW  *watch
	pollFD    atomic.Int32 // fd, for PollFD, which holds no lock

	rxMu    sync.Mutex // the receive side: rd, and reading the socket
	rd      reader
	polled  atomic.Bool   // an engine group polls the socket: the connection goroutine leaves it alone
	rxEnded atomic.Bool   // the stream ended; rd.err says how
	rxWake  chan struct{} // Park, or a receive was posted while rxStalled

	txMu      sync.Mutex    // the send side: wr, and writing the socket
	wr        *writer       // made by the first write: an idle endpoint goes without
	txWant    atomic.Bool   // work was queued: whoever holds txMu writes it before letting go
	txBlocked atomic.Bool   // the socket is full: the writer goroutine writes once it drains
	txWake    chan struct{} // the socket became full

	down     chan struct{} // closed when the endpoint stops transferring data
	downOnce sync.Once
	wg       sync.WaitGroup // the connection goroutine and the writer
}

var _ core.Endpoint = (*endpoint)(nil)
var _ core.Flusher = (*endpoint)(nil)

func newEndpoint(d *domain, info *fi.Info, txSize, rxSize int, ev core.EndpointEvents) *endpoint {
	e := &endpoint{
		dom: d, info: info, ev: ev, txSize: txSize, rxSize: rxSize,
		rxq:    newRing[*core.Op](rxSize),
		rxDone: newRing[rxDone](rxSize + maxReadRsps),
		txq:    newRing[txItem](txSize),
		ackq:   newRing[txItem](txSize),
		readq:  newRing[txItem](txSize),
		rspq:   newRing[*readRsp](maxReadRsps),
		rxWake: make(chan struct{}, 1),
		txWake: make(chan struct{}, 1),
		down:   make(chan struct{}),
	}
	e.fd, e.fdOut = -1, -1
	e.pollFD.Store(-1)
	return e
}

// Enable allows posting receives; Connect and Accept enable too.
func (e *endpoint) Enable() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stClosed {
		return core.Errorf(fi.EOPBADSTATE, "tcp: endpoint is closed")
	}
	e.enabled = true
	return nil
}

// Connect dials addr and sends a connreq with data; the outcome arrives as
// Connected, or Failed (wrapping fi.ECONNREFUSED, with the peer's data, for
// a reject).
func (e *endpoint) Connect(addr fi.Addr, data []byte) error {
	msg, err := wire.AppendCM(nil, wire.CMConnReq, data, e.info.EPAttr.AuthKey)
	if err != nil {
		return core.Errorf(fi.EINVAL, "tcp: connect: %v", err)
	}
	raddr, err := e.dom.tcpAddr(addr)
	if err != nil {
		return err
	}
	if raddr.Port == 0 {
		return core.Errorf(fi.EINVAL, "tcp: connect: %v has no port", addr)
	}
	laddr := e.bindAddr(raddr)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fromReq || e.state != stIdle {
		return core.Errorf(fi.EOPBADSTATE, "tcp: connect: endpoint is not idle")
	}
	if err := core.Take(e.ev, core.Connections, 1); err != nil {
		return core.WithOp("tcp: connect", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.state, e.enabled, e.cancel, e.charged = stConnecting, true, cancel, true
	e.wg.Add(1)
	go e.run(func() ([]byte, error) { return e.dial(ctx, laddr, raddr, msg) })
	return nil
}

// bindAddr is the local address to dial from: the fi_info's source address
// when it names an IP or a port of raddr's family, as libfabric binds to
// src_addr; nil lets the kernel choose.
func (e *endpoint) bindAddr(raddr *net.TCPAddr) *net.TCPAddr {
	src := e.info.SrcAddr
	if src == nil || !src.IP.Addr().IsValid() {
		return nil
	}
	ip := src.IP.Addr().Unmap()
	if ip.Is4() != (raddr.IP.To4() != nil) || (ip.IsUnspecified() && src.IP.Port() == 0) {
		return nil
	}
	a, err := e.dom.tcpAddr(*src)
	if err != nil {
		return nil
	}
	return a
}

// dial connects, sends the connreq and reads the answer.
func (e *endpoint) dial(ctx context.Context, laddr, raddr *net.TCPAddr, msg []byte) ([]byte, error) {
	// The socket is the owner's before it connects, so that the listener
	// counts it under the owner (core.HostOf).
	d := e.dom.cfg.dialer(laddr, func(network, _ string, rc syscall.RawConn) error {
		cookie, err := core.OwnSocket(rc, core.OwnerOf(e.ev))
		e.mu.Lock()
		e.cookie = cookie
		e.mu.Unlock()
		if err == nil {
			// Before connect, so that the handshake carries it too.
			err = e.applyTClass(rc, network == "tcp6")
		}
		return err
	})
	c, err := d.DialContext(ctx, "tcp", raddr.String())
	if err != nil {
		return nil, netError("connect to "+raddr.String(), err)
	}
	conn := c.(*net.TCPConn)
	if err := core.CheckConn(core.OwnerOf(e.ev), conn, "tcp: connect to "+raddr.String()); err != nil {
		conn.Close()
		return nil, err
	}
	e.mu.Lock()
	if e.state != stConnecting || e.shutdown {
		e.mu.Unlock()
		conn.Close()
		return nil, errDown
	}
	e.conn = conn
	e.mu.Unlock()
	if err := writeCM(conn, msg, e.dom.cfg.handshakeTimeout()); err != nil {
		return nil, err
	}
	data, key, err := readCM(conn, time.Time{}, wire.CMConnResp) // no deadline: the peer may take its time to accept
	if err == nil && !bytes.Equal(key, e.info.EPAttr.AuthKey) {
		// A fabricfs listener refuses another key itself; a peer that
		// accepts anyway does not know keys (libfabric's tcp).
		return nil, core.Errorf(fi.ECONNREFUSED, "tcp: %v accepted without this endpoint's authorization key", raddr)
	}
	return data, err
}

// Accept answers the request the endpoint was made from with a connresp
// and data; Connected follows.
func (e *endpoint) Accept(data []byte) error {
	msg, err := wire.AppendCM(nil, wire.CMConnResp, data, e.info.EPAttr.AuthKey)
	if err != nil {
		return core.Errorf(fi.EINVAL, "tcp: accept: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.fromReq || e.state != stIdle {
		return core.Errorf(fi.EOPBADSTATE, "tcp: accept: endpoint has no connection request to accept")
	}
	e.state, e.enabled = stConnecting, true
	conn := e.conn
	e.wg.Add(1)
	go e.run(func() ([]byte, error) {
		// The answer already goes with the endpoint's traffic class.
		if raw, err := conn.SyscallConn(); err == nil {
			if err := e.applyTClass(raw, conn.LocalAddr().(*net.TCPAddr).IP.To4() == nil); err != nil {
				return nil, err
			}
		}
		return nil, writeCM(conn, msg, e.dom.cfg.handshakeTimeout())
	})
	return nil
}

// Reject answers the request the endpoint was made from with a reject and
// data, then shuts the connection down and closes it.
func (e *endpoint) Reject(data []byte) error {
	msg, err := wire.AppendCM(nil, wire.CMReject, data, nil)
	if err != nil {
		return core.Errorf(fi.EINVAL, "tcp: reject: %v", err)
	}
	e.mu.Lock()
	if !e.fromReq || e.state != stIdle {
		e.mu.Unlock()
		return core.Errorf(fi.EOPBADSTATE, "tcp: reject: endpoint has no connection request to reject")
	}
	e.state = stDown
	conn := e.conn
	e.mu.Unlock()
	rejectConn(conn, msg, e.dom.cfg.handshakeTimeout())
	return nil
}

// Shutdown is shutdown(SHUT_RDWR). Queued operations complete with
// fi.ECANCELED, and the Shutdown event follows, here as on the peer.
func (e *endpoint) Shutdown() error {
	e.mu.Lock()
	if e.state != stConnecting && e.state != stConnected {
		e.mu.Unlock()
		return core.Errorf(fi.ENOTCONN, "tcp: shutdown: endpoint is not connected")
	}
	e.shutdown = true
	cancel := e.cancel
	e.mu.Unlock()
	e.signalDown()
	if cancel != nil {
		cancel()
	}
	e.shutdownSocket()
	return nil
}

// Close closes the socket, waits for the endpoint's goroutines, completes
// every operation still posted with fi.ECANCELED, and drops the
// connection's buffers (freeBuffers). It sends no event. It must not be
// called from the endpoint's own event or completion callbacks.
func (e *endpoint) Close() error {
	e.mu.Lock()
	if e.state == stClosed {
		e.mu.Unlock()
		return nil
	}
	e.state = stClosed
	conn, cancel, charged, lst := e.conn, e.cancel, e.charged, e.lst
	e.mu.Unlock()
	e.signalDown()
	if cancel != nil {
		cancel()
	}
	if conn != nil {
		conn.Close() // ends a handshake under way
	}
	e.wg.Wait()
	e.closeSocket()
	e.flush()
	e.mu.Lock()
	cookie := e.cookie // dial is done
	e.mu.Unlock()
	core.DisownSocket(cookie)
	e.freeBuffers()
	if charged {
		core.Give(e.ev, core.Connections, 1)
	}
	if lst != nil {
		lst.dropped(conn)
	}
	e.dom.release()
	return nil
}

// Name is the socket's local address, or before there is one the fi_info's
// source address.
func (e *endpoint) Name() (fi.Addr, error) {
	e.mu.Lock()
	c := e.conn
	e.mu.Unlock()
	switch {
	case c != nil:
		return sockAddr(c.LocalAddr()), nil
	case e.info.SrcAddr != nil:
		return *e.info.SrcAddr, nil
	}
	return fi.Addr{}, core.Errorf(fi.EADDRNOTAVAIL, "tcp: endpoint has no address yet")
}

// Peer is the connected peer's address.
func (e *endpoint) Peer() (fi.Addr, error) {
	e.mu.Lock()
	c := e.conn
	e.mu.Unlock()
	if c == nil {
		return fi.Addr{}, core.Errorf(fi.ENOTCONN, "tcp: endpoint is not connected")
	}
	return sockAddr(c.RemoteAddr()), nil
}

// Post queues a send or a receive. A send needs a connected endpoint; a
// receive may be posted as soon as the endpoint is enabled. Beyond tx_size
// sends or rx_size receives outstanding, Post returns fi.EAGAIN.
func (e *endpoint) Post(op *core.Op) error {
	if op == nil {
		return core.Errorf(fi.EINVAL, "tcp: post: no operation")
	}
	switch op.Kind {
	case core.OpSend:
		return e.postSend(op)
	case core.OpRecv:
		return e.postRecv(op)
	case core.OpWrite, core.OpRead:
		if e.info.Caps&fi.RMA == 0 {
			return core.Errorf(fi.EOPNOTSUPP, "tcp: RMA on an endpoint without FI_RMA")
		}
		if op.Kind == core.OpRead && op.Flags&fi.INJECT != 0 {
			return core.Errorf(fi.EINVAL, "tcp: a read cannot be injected")
		}
		return e.postSend(op)
	}
	return core.Errorf(fi.EOPNOTSUPP, "tcp: post: operation kind %d is not supported", op.Kind)
}

func (e *endpoint) postSend(op *core.Op) error {
	it := txItem{op: op}
	if op.Flags&(fi.TRANSMIT_COMPLETE|fi.DELIVERY_COMPLETE) != 0 {
		it.flags |= wire.FlagDeliveryComplete
	}
	if op.Flags&fi.COMMIT_COMPLETE != 0 {
		it.flags |= wire.FlagCommitComplete
	}
	if op.Flags&fi.INJECT != 0 {
		if len(op.Buf) > InjectSize {
			return core.Errorf(fi.EINVAL, "tcp: inject of %d bytes; inject_size is %d", len(op.Buf), InjectSize)
		}
		it.inj = injectPool.Get().(*[InjectSize]byte)
		copy(it.inj[:], op.Buf)
	}
	// op is the writer's once queued: it may complete and be reused
	// before the lock is even released.
	more := op.Flags&fi.MORE != 0
	e.mu.Lock()
	var err error
	switch {
	case e.state == stClosed:
		err = core.Errorf(fi.EOPBADSTATE, "tcp: send: endpoint is closed")
	case e.state != stConnected || e.shutdown:
		err = core.Errorf(fi.ENOTCONN, "tcp: send: endpoint is not connected")
	case e.txOut >= e.txSize:
		err = fi.EAGAIN
	default:
		e.txq.push(it)
		e.txOut++
	}
	e.mu.Unlock()
	if err != nil {
		if it.inj != nil {
			injectPool.Put(it.inj)
		}
		return err
	}
	if !more {
		e.kickTx()
	}
	return nil
}

// Flush writes the sends held since the last write: those posted with
// fi.MORE, which the engine posts a pass of before it flushes
// (core.Flusher). They go out in as few writevs as maxBatch allows.
func (e *endpoint) Flush() { e.kickTx() }

func (e *endpoint) postRecv(op *core.Op) error {
	e.mu.Lock()
	var err error
	switch {
	case e.state == stClosed:
		err = core.Errorf(fi.EOPBADSTATE, "tcp: recv: endpoint is closed")
	case e.state == stDown || e.shutdown:
		err = core.Errorf(fi.ENOTCONN, "tcp: recv: connection is down")
	case !e.enabled:
		err = core.Errorf(fi.EOPBADSTATE, "tcp: recv: endpoint is not enabled")
	case e.rxOut >= e.rxSize:
		err = fi.EAGAIN
	default:
		e.rxq.push(op)
		e.rxOut++
	}
	wake := e.rxStalled
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if wake && !e.polled.Load() {
		kick(e.rxWake)
	}
	return nil
}

// Cancel removes op if it is still queued and completes it with
// fi.ECANCELED. A receive being filled or a send being written or waiting
// for its ACK is under way: Cancel returns false.
func (e *endpoint) Cancel(op *core.Op) bool {
	e.mu.Lock()
	_, found := e.rxq.remove(func(o *core.Op) bool { return o == op })
	var it txItem
	if found {
		e.rxOut--
	} else if it, found = e.txq.remove(func(t txItem) bool { return t.op == op }); found {
		e.txOut--
	}
	e.mu.Unlock()
	if !found {
		return false
	}
	if it.inj != nil {
		injectPool.Put(it.inj)
	}
	e.completeOp(op, core.Completion{Err: fi.ECANCELED})
	return true
}

// run is the connection goroutine: it completes the handshake, reports
// Connected, starts the writer, reads until the connection ends, and
// reports the end.
func (e *endpoint) run(handshake func() ([]byte, error)) {
	defer e.wg.Done()
	peerData, err := handshake()
	if err != nil {
		e.finish(err, peerData) // a reject's data goes with its error
		return
	}
	e.mu.Lock()
	if e.state != stConnecting || e.shutdown {
		e.mu.Unlock()
		e.finish(errDown, nil)
		return
	}
	conn := e.conn
	e.mu.Unlock()
	if err := e.ownSocket(conn); err != nil {
		e.finish(err, nil)
		return
	}
	go e.writeLoop()
	e.ev.Connected(peerData)
	e.finish(e.readLoop(), nil)
}

// finish takes the endpoint down after its connection ended with err (nil:
// cleanly) and reports it, unless the endpoint was closed: Shutdown after a
// local Shutdown or the peer's EOF, else Failed.
func (e *endpoint) finish(err error, data []byte) {
	e.mu.Lock()
	closed := e.state == stClosed
	if !closed {
		e.state = stDown
	}
	switch {
	case e.shutdown:
		err = nil
	case e.failure != nil:
		err = e.failure
	}
	e.mu.Unlock()
	e.signalDown()
	e.shutdownSocket()
	e.flush()
	if closed {
		return
	}
	if err == nil {
		e.ev.Shutdown()
	} else {
		e.ev.Failed(err, data)
	}
}

// flush completes, once the endpoint no longer transfers data, the
// writer's batch and the filled receives it did not get to, as they are
// (their ACKs are lost), then every queued operation with fi.ECANCELED.
// A receive being filled completes with fi.ECANCELED.
func (e *endpoint) flush() {
	e.rxMu.Lock()
	if !e.rxEnded.Load() {
		e.endRead(errDown)
	}
	e.rxMu.Unlock()
	e.txMu.Lock()
	e.batchDone(errDown)
	e.txMu.Unlock()
	e.mu.Lock()
	filled := e.rxDone.drain(nil)
	recvs := e.rxq.drain(nil)
	sends := e.readq.drain(e.ackq.drain(e.txq.drain(nil)))
	rsps := e.rspq.drain(nil)
	e.rxOut -= receives(filled) + len(recvs)
	e.txOut -= len(sends)
	e.mu.Unlock()
	for _, r := range filled {
		if r.op != nil {
			e.completeOp(r.op, r.c)
		}
	}
	for _, r := range rsps {
		r.done()
	}
	for _, op := range recvs {
		e.completeOp(op, core.Completion{Err: fi.ECANCELED})
	}
	for _, it := range sends {
		if it.inj != nil {
			injectPool.Put(it.inj)
		}
		e.completeOp(it.op, core.Completion{Err: fi.ECANCELED})
	}
}

// completeOp delivers op's completion, with the flags of its kind. The
// caller has already taken op off the rxOut or txOut count.
func (e *endpoint) completeOp(op *core.Op, c core.Completion) {
	c.Flags |= op.Kind.CQFlags()
	if e.complete != nil {
		e.complete(op, c)
		return
	}
	op.Complete(c)
}

// ownSocket takes the connected socket out of Go's netpoller (netpoll.go):
// the endpoint keeps a dup of its descriptor, non-blocking like the
// original, and a second dup to wait for room on, both registered with the
// netpoller; the net.Conn is closed. Then the endpoint is connected.
func (e *endpoint) ownSocket(c *net.TCPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return netError("connection", err)
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		if err := e.applyTClass(raw, a.IP.To4() == nil); err != nil {
			c.Close()
			return err
		}
	}
	fd, fdOut := -1, -1
	cerr := raw.Control(func(s uintptr) {
		if fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			fdOut, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
		}
	})
	c.Close()
	var rxW, txW *watch
	p, perr := getPoller()
	switch {
	case cerr != nil:
		err = errDown // closed under us
	case err != nil:
		err = netError("connection", err)
	case perr != nil:
		err = core.Errorf(fi.EIO, "tcp: %v", perr)
	default:
		if rxW, err = p.add(fd, unix.EPOLLIN, e.rxWake); err == nil {
			if txW, err = p.add(fdOut, unix.EPOLLOUT, e.txWake); err != nil {
				rxW.remove()
			}
		}
	}
	e.rxMu.Lock()
	e.txMu.Lock()
	e.mu.Lock()
	if err == nil && (e.state != stConnecting || e.shutdown) {
		err = errDown
	}
	if err == nil {
		e.fd, e.fdOut, e.rxW, e.txW = fd, fdOut, rxW, txW
		e.pollFD.Store(int32(fd))
		e.rd.buf = make([]byte, readBufSize)
		e.state = stConnected
		e.wg.Add(1) // the writer
	}
	e.mu.Unlock()
	e.txMu.Unlock()
	e.rxMu.Unlock()
	if err != nil {
		if txW != nil {
			rxW.remove()
			txW.remove()
		}
		for _, d := range []int{fd, fdOut} {
			if d >= 0 {
				unix.Close(d)
			}
		}
	}
	return err
}

// shutdownSocket is shutdown(SHUT_RDWR) of the connection, in whichever
// hands it is: the peer reads EOF, and waiting goroutines wake.
func (e *endpoint) shutdownSocket() {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.fd >= 0:
		unix.Shutdown(e.fd, unix.SHUT_RDWR)
	case e.conn != nil:
		shutdownConn(e.conn)
	}
}

// closeSocket closes the endpoint's descriptors, once nothing runs that
// could use them but the engine, which takes rxMu first.
func (e *endpoint) closeSocket() {
	e.rxMu.Lock()
	e.txMu.Lock()
	e.mu.Lock()
	if e.fd >= 0 {
		e.rxW.remove()
		e.txW.remove()
		e.pollFD.Store(-1)
		e.lastInfo = tcpInfo(e.fd)
		unix.Close(e.fd)
		unix.Close(e.fdOut)
		e.fd, e.fdOut = -1, -1
	}
	e.mu.Unlock()
	e.txMu.Unlock()
	e.rxMu.Unlock()
}

// freeBuffers drops the connection's read buffer and writer once the
// socket is closed and flushed: a closed endpoint may stay referenced
// (the file tree keeps its object until the kernel forgets the inode).
func (e *endpoint) freeBuffers() {
	e.rxMu.Lock()
	e.txMu.Lock()
	e.rd.buf, e.wr = nil, nil
	e.txMu.Unlock()
	e.rxMu.Unlock()
}

func (e *endpoint) signalDown() { e.downOnce.Do(func() { close(e.down) }) }

// kick wakes the goroutine waiting on ch, if any, without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// applyTClass gives the socket the endpoint's traffic class (tx_attr.tclass,
// fi_endpoint(3)): the DSCP it maps to (fi.TClass.IPDSCP) in the IP
// header's traffic class byte (IP_TOS, IPV6_TCLASS). FI_TC_UNSPEC leaves
// the socket as it is.
//
// Unlike libfabric's tcp, FI_TC_BULK_DATA leaves Nagle's algorithm off
// (TCP_NODELAY, Go's default) like every class. libfabric writes each
// operation as it is posted and lets Nagle gather them; here a pass's
// sends already go out in one writev (FI_MORE, Flush). With Nagle on, a
// write that ends in a short segment holds back the next write until the
// peer ACKs it, which the peer's kernel delays (40 ms on Linux) while its
// program has nothing to send, as a receiver waiting for the rest of a
// window does: fabtests' bandwidth programs, which ask for this class,
// stalled 40 ms per window (TestBulkDataNoAckStall).
func (e *endpoint) applyTClass(rc syscall.RawConn, ipv6 bool) error {
	t := e.info.TxAttr.TClass
	dscp, ok := t.IPDSCP()
	if !ok {
		return nil
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		if ipv6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(dscp)<<2)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, int(dscp)<<2)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return core.Errorf(fi.EIO, "tcp: traffic class %v: %v", t, err)
	}
	return nil
}
