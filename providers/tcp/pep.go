package tcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// HandshakeTimeout bounds how long a passive endpoint waits for a new
// connection's request, and how long sending a CM answer may take
// (Config.HandshakeTimeout replaces it).
const HandshakeTimeout = 10 * time.Second

// ConnReqTimeout bounds how long a new connection may stay silent: a
// peer sends its connreq as soon as it connects (Config.ConnReqTimeout
// replaces it).
const ConnReqTimeout = 3 * time.Second

// handshakeTimeout, connReqTimeout, maxHandshakes, maxListenerConns and
// maxHostConns are HandshakeTimeout, ConnReqTimeout, MaxHandshakes,
// MaxListenerConns and MaxHostConns; tests shrink them.
var (
	handshakeTimeout       = HandshakeTimeout
	connReqTimeout         = ConnReqTimeout
	maxHandshakes          = MaxHandshakes
	maxListenerConns int64 = MaxListenerConns
	maxHostConns           = MaxHostConns
)

// passiveEndpoint listens and turns each well-formed connreq into a
// connReq. One goroutine accepts; each new connection gets a goroutine that
// reads its connreq with a deadline and then ends.
//
// Its owner is charged (core.Take on its events, as core.Connections) for
// the listening socket only: what peers open at it is bounded per
// listener, never charged to the owner, so that peers cannot use up the
// owner's quota. At most maxHandshakes connections are read at once: a
// new one sheds the oldest, so that silent connections do not lock out
// real requests. At most core.MaxPendingReqs requests wait for an
// endpoint; the endpoint made from one charges its own owner when it
// takes the connection (NewEndpoint). At most maxListenerConns
// connections accepted by the listener are open, endpoints made from them
// included, and at most maxHostConns of them from one remote host.
type passiveEndpoint struct {
	dom  *domain
	info *fi.Info
	ev   core.PassiveEvents
	done chan struct{} // closed by Close

	mu      sync.Mutex
	ln      *net.TCPListener
	closed  bool
	shaking map[*net.TCPConn]time.Time // connections whose connreq is being read, and since when
	pending core.PendingReqs[*connReq]
	wg      sync.WaitGroup

	conns  atomic.Int64                  // connections accepted and not yet closed, endpoints' included
	byHost map[core.HostKey]int          // conns from each remote host and user (core.HostOf); under mu
	hostOf map[*net.TCPConn]core.HostKey // each counted connection's key; under mu
	cookie uint64                        // the listening socket's (core.OwnSocket); under mu
}

var _ core.PassiveEndpoint = (*passiveEndpoint)(nil)

func newPassiveEndpoint(d *domain, info *fi.Info, ev core.PassiveEvents) *passiveEndpoint {
	return &passiveEndpoint{
		dom: d, info: info, ev: ev, done: make(chan struct{}),
		shaking: map[*net.TCPConn]time.Time{}, byHost: map[core.HostKey]int{}, hostOf: map[*net.TCPConn]core.HostKey{},
	}
}

// Listen starts listening on addr, or on the fi_info's source address when
// addr has no IP. Port 0 picks a free port; Name shows it.
func (p *passiveEndpoint) Listen(addr fi.Addr) error {
	if !addr.IP.Addr().IsValid() {
		if p.info.SrcAddr == nil {
			return core.Errorf(fi.EINVAL, "tcp: listen: no address")
		}
		addr = *p.info.SrcAddr
	}
	ta, err := p.dom.tcpAddr(addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return core.Errorf(fi.EOPBADSTATE, "tcp: listen: passive endpoint is closed")
	case p.ln != nil:
		return core.Errorf(fi.EOPBADSTATE, "tcp: listen: already listening on %v", p.ln.Addr())
	}
	if err := core.Take(p.ev, core.Connections, 1); err != nil {
		return err
	}
	ln, err := p.dom.cfg.listen(ta)
	if err != nil {
		core.Give(p.ev, core.Connections, 1)
		return netError("listen on "+ta.String(), err)
	}
	if err := core.CheckConn(core.OwnerOf(p.ev), ln, "tcp: listen on "+ta.String()); err != nil {
		ln.Close()
		core.Give(p.ev, core.Connections, 1)
		return err
	}
	rc, err := ln.SyscallConn()
	if err == nil {
		p.cookie, err = core.OwnSocket(rc, core.OwnerOf(p.ev))
	}
	if err != nil {
		ln.Close()
		core.Give(p.ev, core.Connections, 1)
		return netError("listen on "+ta.String(), err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return nil
}

// Name is the listening address.
func (p *passiveEndpoint) Name() (fi.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return fi.Addr{}, core.Errorf(fi.EOPBADSTATE, "tcp: passive endpoint is not listening")
	}
	return sockAddr(p.ln.Addr()), nil
}

// Close stops listening, drops connections whose request has not arrived,
// rejects the requests nobody took, and waits for its goroutines.
func (p *passiveEndpoint) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	ln, shaking, cookie := p.ln, p.shaking, p.cookie
	p.shaking = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
		core.DisownSocket(cookie)
	}
	for c := range shaking {
		c.Close()
	}
	reject, _ := wire.AppendCM(nil, wire.CMReject, nil, nil)
	for _, r := range p.pending.Close() {
		rejectConn(r.conn, reject, p.dom.cfg.handshakeTimeout())
		p.dropped(r.conn)
	}
	p.wg.Wait()
	if ln != nil {
		core.Give(p.ev, core.Connections, 1)
	}
	p.dom.release()
	return nil
}

// admit decides on a connection the listener accepted: it is read, or
// closed when the daemon's descriptors run low, the listener holds
// maxListenerConns, or maxHostConns from the connection's host. A full
// set of handshakes sheds its oldest.
func (p *passiveEndpoint) admit(c *net.TCPConn) bool {
	if inReserve(c) || p.conns.Load() >= maxListenerConns {
		return false
	}
	h := core.HostOf(c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort())
	p.mu.Lock()
	if p.closed || p.byHost[h] >= maxHostConns {
		p.mu.Unlock()
		return false
	}
	if len(p.shaking) >= maxHandshakes {
		var oldest *net.TCPConn
		var since time.Time
		for o, t := range p.shaking {
			if oldest == nil || t.Before(since) {
				oldest, since = o, t
			}
		}
		delete(p.shaking, oldest)
		oldest.Close() // its handshake ends, and gives back what it held
	}
	p.shaking[c] = time.Now()
	p.conns.Add(1)
	p.byHost[h]++
	p.hostOf[c] = h
	p.wg.Add(1)
	p.mu.Unlock()
	return true
}

// dropped forgets connection c the listener admitted, when c or the
// endpoint that took it is closed.
func (p *passiveEndpoint) dropped(c *net.TCPConn) {
	p.mu.Lock()
	h := p.hostOf[c]
	delete(p.hostOf, c)
	if p.byHost[h]--; p.byHost[h] <= 0 {
		delete(p.byHost, h)
	}
	p.mu.Unlock()
	p.conns.Add(-1)
}

func (p *passiveEndpoint) acceptLoop(ln *net.TCPListener) {
	defer p.wg.Done()
	var delay time.Duration
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if !temporary(err) {
				p.ev.Failed(netError("accept", err))
				return
			}
			// Out of file descriptors or memory: back off, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-p.done:
				return
			}
			continue
		}
		delay = 0
		if !p.admit(c) {
			c.Close()
			continue
		}
		go p.handshake(c)
	}
}

// handshake reads the connreq of a new connection and reports it. A
// malformed, over-long or late request closes that connection only. A
// peer sends its request as it connects, in one write: it has
// connReqTimeout to arrive.
func (p *passiveEndpoint) handshake(c *net.TCPConn) {
	defer p.wg.Done()
	data, key, err := readCM(c, time.Now().Add(min(p.dom.cfg.connReqTimeout(), p.dom.cfg.handshakeTimeout())), wire.CMConnReq)
	// "Only peer endpoints that are programmed to use the same
	// authorization key may communicate" (fi_endpoint(3)): the listener
	// rejects another key (or none, or one where it has none) itself, and
	// the application never sees the request.
	refuse := err == nil && !bytes.Equal(key, p.info.EPAttr.AuthKey)
	var req *connReq
	if err == nil && !refuse {
		info := p.info.Clone()
		peer := sockAddr(c.RemoteAddr())
		info.DestAddr = &peer
		req = &connReq{pep: p, conn: c, info: info, data: data}
	}
	p.mu.Lock()
	_, kept := p.shaking[c] // not shed by admit, nor dropped by Close
	delete(p.shaking, c)
	p.mu.Unlock()
	if err == nil && !kept {
		c.Close()
		p.dropped(c)
		return
	}
	if err != nil || refuse || !p.pending.Add(req) {
		if err == nil {
			reject, _ := wire.AppendCM(nil, wire.CMReject, nil, nil)
			rejectConn(c, reject, p.dom.cfg.handshakeTimeout())
		} else {
			c.Close()
		}
		p.dropped(c)
		return
	}
	p.ev.ConnReq(req)
}

// connReq is a connection request waiting for an endpoint to accept or
// reject it. NewEndpoint takes its connection.
type connReq struct {
	pep  *passiveEndpoint
	conn *net.TCPConn
	info *fi.Info
	data []byte
}

var _ core.ConnReq = (*connReq)(nil)

// Info is the passive endpoint's fi_info with DestAddr set to the
// requester's address.
func (r *connReq) Info() *fi.Info { return r.info.Clone() }

// Data is the private data of the request.
func (r *connReq) Data() []byte { return slices.Clone(r.data) }

// take hands the request's connection to a new endpoint, once: the
// endpoint charges its own owner. The connection still counts in the
// listener's conns until the endpoint closes (its lst).
func (r *connReq) take() (*net.TCPConn, error) {
	if !r.pep.pending.Take(r) {
		return nil, core.Errorf(fi.EINVAL, "tcp: connection request already taken, or its passive endpoint closed")
	}
	return r.conn, nil
}

// readCM reads one CM message of type want, or a reject when want is a
// connresp, before deadline (zero: none). It returns the private data and
// the authorization key (nil: none); a reject returns its data and an
// error wrapping fi.ECONNREFUSED.
func readCM(c *net.TCPConn, deadline time.Time, want wire.CMType) (data, key []byte, err error) {
	c.SetReadDeadline(deadline)
	var hb [wire.CMHeaderSize]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		if errors.Is(err, io.EOF) && want == wire.CMConnResp {
			return nil, nil, core.Errorf(fi.ECONNREFUSED, "tcp: %v closed the connection without answering", c.RemoteAddr())
		}
		return nil, nil, netError("reading connection message", err)
	}
	h, err := wire.DecodeCMHeader(hb[:])
	if err != nil {
		return nil, nil, core.Errorf(fi.EIO, "tcp: malformed connection message from %v: %v", c.RemoteAddr(), err)
	}
	if h.Type != want && !(want == wire.CMConnResp && h.Type == wire.CMReject) {
		return nil, nil, core.Errorf(fi.EIO, "tcp: %v sent a %v, want a %v", c.RemoteAddr(), h.Type, want)
	}
	var rest []byte
	if n := h.DataLen + h.KeyLen; n > 0 {
		rest = make([]byte, n)
	}
	if _, err := io.ReadFull(c, rest); err != nil {
		return nil, nil, netError("reading connection data", err)
	}
	c.SetReadDeadline(time.Time{})
	if h.DataLen > 0 {
		data = rest[:h.DataLen:h.DataLen]
	}
	if h.KeyLen > 0 {
		key = rest[h.DataLen:]
	}
	if h.Type == wire.CMReject {
		return data, nil, core.Errorf(fi.ECONNREFUSED, "tcp: connection rejected by %v", c.RemoteAddr())
	}
	return data, key, nil
}

// writeCM sends a whole CM message in one write, within timeout.
func writeCM(c *net.TCPConn, msg []byte, timeout time.Duration) error {
	c.SetWriteDeadline(time.Now().Add(timeout))
	defer c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return netError("sending connection message", err)
	}
	return nil
}

// rejectConn sends a reject, then shuts the connection down and closes it,
// as tcpx_pep_reject does; like it, it ignores a peer that is gone. The
// reject is sent within timeout.
func rejectConn(c *net.TCPConn, msg []byte, timeout time.Duration) {
	writeCM(c, msg, timeout)
	shutdownConn(c)
	c.Close()
}

// shutdownConn is shutdown(SHUT_RDWR): the peer reads EOF, and this side's
// blocked reads and writes return.
func shutdownConn(c *net.TCPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
}

// netError wraps a socket error with its libfabric code: the errno it
// carries, fi.ETIMEDOUT for a deadline, else fi.EIO.
func netError(what string, err error) error {
	code := core.Code(err)
	if code == fi.EOTHER {
		code = fi.EIO
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			code = fi.ETIMEDOUT
		}
	}
	return &causeError{core.Errorf(code, "tcp: %s: %v", what, err), err}
}

// causeError is a *core.Error that also unwraps to the socket error behind
// it, so that the errno shows as the provider errno of the event.
type causeError struct {
	err   error // the *core.Error
	cause error
}

func (e *causeError) Error() string   { return e.err.Error() }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }

// inReserve reports whether socket c, a peer's, took one of the
// descriptors the daemon keeps for its own use (core.InReserve).
func inReserve(c *net.TCPConn) bool { return core.InReserve(core.ConnFD(c)) }

// temporary reports whether an accept error may go away by itself.
func temporary(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
