package verbs

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
)

// Connections, as IB CM sets them up (docs/verbs.md):
//
//	active                              passive
//	Connect: QP INIT, REQ  ------------> listener: FI_CONNREQ
//	                                     Accept: QP RTR, REP (resent until RTU)
//	QP RTR, RTS, RTU       <------------
//	FI_CONNECTED           ------------> QP RTS, FI_CONNECTED
//	                                     (Reject: REJ with private data)
//
// Shutdown (or closing a connected endpoint) sends DREQ, resent until
// DREP; the peer answers DREP and reports FI_SHUTDOWN. Requests are sent
// again after each timeout; a duplicate is answered as the first was
// (REP again, RTU again, REJ again, DREP again), never acted on twice. A
// finished connection lingers cmLinger to answer duplicates.

// cmState is where a connection is.
type cmState uint8

const (
	cmReqSent     cmState = iota // active: REQ sent, waiting for REP or REJ
	cmReqRcvd                    // passive: REQ received, waiting for the application
	cmRepSent                    // passive: REP sent, waiting for RTU
	cmEstablished                // RTU sent (active) or received (passive)
	cmDreqSent                   // DREQ sent, waiting for DREP
	cmDone                       // over; lingering to answer duplicates
)

// cmConn is one connection of the agent. Guarded by agent.mu.
type cmConn struct {
	a           *agent
	local       uint32 // our communication ID
	remote      uint32 // the peer's; 0 until known
	peer        netip.Addr
	passive     bool
	state       cmState
	established bool        // it was: a late REP is a duplicate, not a stale answer
	ep          *rcEndpoint // the endpoint it connects, once there is one
	pep         *passiveEndpoint
	req         cm.Msg  // passive: the REQ
	remoteQPN   uint32  // the peer's QP
	answer      *cm.Msg // passive: the REP or REJ sent, for duplicate REQs
	r           retx
}

// stop ends the connection's retransmissions.
func (c *cmConn) stop() { c.r.stop() }

// finishLocked ends c and forgets it after cmLinger.
func (c *cmConn) finishLocked() {
	c.state = cmDone
	c.ep = nil
	c.stop()
	a := c.a
	time.AfterFunc(cmLinger, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.conns[c.local] == c {
			delete(a.conns, c.local)
		}
		if rid := (remoteID{c.peer, c.remote}); c.passive && a.byRemote[rid] == c {
			delete(a.byRemote, rid)
		}
	})
}

// connect starts a connection of e to service port port of the device
// with IP dst, sending REQ with e's QP, starting PSN and private data.
func (a *agent) connect(e *rcEndpoint, dst netip.Addr, port, srcPort uint16, qpn, psn uint32, data []byte) (*cmConn, error) {
	at := a.d.attr
	m := cm.Msg{
		Type: cm.REQ, TransactionID: rand.Uint64(), ServiceID: cm.ServiceID(cm.PortSpaceTCP, port), QPN: qpn, PSN: psn,
		ResponderResources: uint8(min(at.MaxQPRdAtom, 255)), InitiatorDepth: uint8(min(at.MaxQPInitRdAtom, 255)),
		PathMTU: uint8(at.ActiveMTU), RetryCount: rcRetryCount, RNRRetryCount: rcRNRRetry, SrcPort: srcPort, PrivateData: data,
		AuthKey: e.info.EPAttr.AuthKey,
	}
	if _, refused := a.d.probers.refused(probed{dst, port, true}, time.Now()); refused {
		return nil, core.Errorf(fi.ECONNREFUSED, "verbs: this device refuses to connect to %v for a while: requests of earlier connections to it presented bad memory keys", netip.AddrPortFrom(dst, port))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, core.Errorf(fi.ENODEV, "verbs: device %s is closed", a.d.name)
	}
	c := &cmConn{a: a, local: a.newCommIDLocked(), peer: dst, ep: e}
	m.LocalCommID = c.local
	a.conns[c.local] = c
	a.armLocked(&c.r, dst, m, func() { a.gaveUp(c, cmReqSent) })
	return c, nil
}

// accept answers c's REQ with REP: e's QP (in RTR) and starting PSN, and
// private data. FI_CONNECTED follows the RTU (or the first receive:
// rcEndpoint.commEst).
func (a *agent) accept(c *cmConn, e *rcEndpoint, qpn, psn uint32, resp, depth, mtu uint8, data []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.state != cmReqRcvd {
		return core.Errorf(fi.EOPBADSTATE, "verbs: accept: the request is no longer pending")
	}
	m := cm.Msg{Type: cm.REP, TransactionID: c.req.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote,
		QPN: qpn, PSN: psn, ResponderResources: resp, InitiatorDepth: depth, PathMTU: mtu, RNRRetryCount: rcRNRRetry, PrivateData: data,
		AuthKey: c.pep.info.EPAttr.AuthKey} // the key the listener took the request with
	c.ep, c.state, c.answer = e, cmRepSent, &m
	a.armLocked(&c.r, c.peer, m, func() { a.gaveUp(c, cmRepSent) })
	return nil
}

// reject answers c's REQ with REJ, reason and private data.
func (a *agent) reject(c *cmConn, reason uint16, data []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.state != cmReqRcvd {
		return core.Errorf(fi.EOPBADSTATE, "verbs: reject: the request is no longer pending")
	}
	m := cm.Msg{Type: cm.REJ, TransactionID: c.req.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote,
		Reason: reason, PrivateData: data}
	c.answer = &m
	a.sendLocked(c.peer, m)
	c.finishLocked()
	return nil
}

// disconnect ends c from our side: DREQ if it is (being) established,
// sent again until DREP even after the endpoint is gone; a request still
// pending is abandoned. It reports whether a DREQ went out.
func (a *agent) disconnect(c *cmConn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c.ep = nil
	switch c.state {
	case cmEstablished, cmRepSent:
		c.state = cmDreqSent
		m := cm.Msg{Type: cm.DREQ, TransactionID: rand.Uint64(), LocalCommID: c.local, RemoteCommID: c.remote, QPN: c.remoteQPN}
		a.armLocked(&c.r, c.peer, m, func() {
			a.mu.Lock()
			c.finishLocked()
			a.mu.Unlock()
		})
		return true
	case cmReqRcvd:
		m := cm.Msg{Type: cm.REJ, TransactionID: c.req.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote, Reason: cm.RejConsumer}
		c.answer = &m
		a.sendLocked(c.peer, m)
		c.finishLocked()
	case cmReqSent:
		c.finishLocked()
	}
	return false
}

// gaveUp is the end of c's retransmissions in state st: no answer came.
func (a *agent) gaveUp(c *cmConn, st cmState) {
	a.mu.Lock()
	if c.state != st {
		a.mu.Unlock()
		return
	}
	e := c.ep
	if st == cmRepSent {
		a.sendLocked(c.peer, cm.Msg{Type: cm.REJ, TransactionID: c.req.TransactionID, LocalCommID: c.local,
			RemoteCommID: c.remote, Reason: cm.RejTimeout})
	}
	c.finishLocked()
	a.mu.Unlock()
	if e != nil {
		e.cmFailed(core.Errorf(fi.ETIMEDOUT, "verbs: no answer from %v's connection manager", c.peer), nil)
	}
}

// handle is a MAD from the device with IP src.
func (a *agent) handle(src netip.Addr, m *cm.Msg) {
	switch m.Type {
	case cm.REQ:
		a.handleREQ(src, m)
	case cm.REP:
		a.handleREP(src, m)
	case cm.RTU:
		a.handleRTU(src, m)
	case cm.REJ:
		a.handleREJ(src, m)
	case cm.DREQ:
		a.handleDREQ(src, m)
	case cm.DREP:
		a.mu.Lock()
		if c := a.conns[m.RemoteCommID]; c != nil && c.peer == src && c.state == cmDreqSent {
			c.finishLocked()
		}
		a.mu.Unlock()
	case cm.SIDRREQ:
		a.handleSIDRREQ(src, m)
	case cm.SIDRREP:
		a.handleSIDRREP(src, m)
	}
}

func (a *agent) handleREQ(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	rid := remoteID{src, m.LocalCommID}
	if c := a.byRemote[rid]; c != nil {
		if c.answer != nil { // a duplicate: our REP or REJ was lost
			a.sendLocked(src, *c.answer)
		}
		a.mu.Unlock()
		return
	}
	port, ok := cm.ServicePort(m.ServiceID, cm.PortSpaceTCP)
	if _, refused := a.d.probers.refused(probed{src, port, false}, time.Now()); ok && refused {
		a.sendLocked(src, cm.Msg{Type: cm.REJ, TransactionID: m.TransactionID, RemoteCommID: m.LocalCommID, Reason: cm.RejNoResources})
		a.mu.Unlock()
		return
	}
	l := a.rcPorts[port]
	if !ok || l == nil {
		a.sendLocked(src, cm.Msg{Type: cm.REJ, TransactionID: m.TransactionID, RemoteCommID: m.LocalCommID, Reason: cm.RejInvalidService})
		a.mu.Unlock()
		return
	}
	if !bytes.Equal(m.AuthKey, l.info.EPAttr.AuthKey) {
		// "Only peer endpoints that are programmed to use the same
		// authorization key may communicate": refused here, unseen by
		// the listener's application.
		a.sendLocked(src, cm.Msg{Type: cm.REJ, TransactionID: m.TransactionID, RemoteCommID: m.LocalCommID, Reason: cm.RejConsumer})
		a.mu.Unlock()
		return
	}
	c := &cmConn{a: a, local: a.newCommIDLocked(), remote: m.LocalCommID, peer: src, passive: true, state: cmReqRcvd,
		pep: l, req: *m, remoteQPN: m.QPN}
	a.conns[c.local] = c
	a.byRemote[rid] = c
	a.mu.Unlock()
	if !l.request(c) {
		a.reject(c, cm.RejNoQP, nil)
	}
}

func (a *agent) handleREP(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	c := a.conns[m.RemoteCommID]
	switch {
	case c == nil || c.peer != src || c.passive:
		a.mu.Unlock()
		return
	case c.established && c.remote == m.LocalCommID:
		if c.state == cmEstablished { // our RTU was lost
			a.sendLocked(src, cm.Msg{Type: cm.RTU, TransactionID: m.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote})
		}
		a.mu.Unlock()
		return
	case c.state != cmReqSent:
		// The endpoint gave up or went away: refuse the late reply.
		a.sendLocked(src, cm.Msg{Type: cm.REJ, TransactionID: m.TransactionID, LocalCommID: c.local, RemoteCommID: m.LocalCommID, Reason: cm.RejTimeout})
		a.mu.Unlock()
		return
	}
	c.stop()
	c.remote, c.remoteQPN = m.LocalCommID, m.QPN
	e := c.ep
	a.mu.Unlock()
	var err error
	if !bytes.Equal(m.AuthKey, e.info.EPAttr.AuthKey) {
		err = core.Errorf(fi.ECONNREFUSED, "verbs: %v accepted without this endpoint's authorization key", src)
	} else {
		err = e.cmEstablish(m)
	}
	a.mu.Lock()
	if c.state != cmReqSent { // the endpoint closed meanwhile
		a.mu.Unlock()
		return
	}
	if err != nil {
		reason := uint16(cm.RejNoQP)
		if core.Code(err) == fi.ECONNREFUSED {
			reason = cm.RejConsumer
		}
		a.sendLocked(src, cm.Msg{Type: cm.REJ, TransactionID: m.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote, Reason: reason})
		c.finishLocked()
		a.mu.Unlock()
		e.cmFailed(err, nil)
		return
	}
	c.state, c.established = cmEstablished, true
	a.sendLocked(src, cm.Msg{Type: cm.RTU, TransactionID: m.TransactionID, LocalCommID: c.local, RemoteCommID: c.remote})
	a.mu.Unlock()
}

func (a *agent) handleRTU(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	c := a.conns[m.RemoteCommID]
	if c == nil || c.peer != src || !c.passive || c.state != cmRepSent || c.remote != m.LocalCommID {
		a.mu.Unlock()
		return
	}
	c.stop()
	c.state, c.established = cmEstablished, true
	e := c.ep
	a.mu.Unlock()
	e.established()
}

// rtuImplied takes a receive completion on the QP of c, a connection we
// accepted, for its RTU (rcEndpoint.commEst): REP is not sent again, and
// a late RTU is a duplicate.
func (a *agent) rtuImplied(c *cmConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.state == cmRepSent {
		c.stop()
		c.state, c.established = cmEstablished, true
	}
}

func (a *agent) handleREJ(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	c := a.conns[m.RemoteCommID]
	if c == nil || c.peer != src || (c.state != cmReqSent && c.state != cmRepSent) {
		a.mu.Unlock()
		return
	}
	e := c.ep
	c.finishLocked()
	a.mu.Unlock()
	if e == nil {
		return
	}
	var err error
	switch m.Reason {
	case cm.RejConsumer:
		err = core.Errorf(fi.ECONNREFUSED, "verbs: connection rejected by %v", src)
	case cm.RejInvalidService:
		err = core.Errorf(fi.ECONNREFUSED, "verbs: nobody listens on that port of %v", src)
	case cm.RejNoResources:
		err = core.Errorf(fi.ECONNREFUSED, "verbs: %v refuses connections from this device to that port for a while: requests of earlier connections presented bad memory keys", src)
	default:
		err = core.Errorf(fi.ECONNREFUSED, "verbs: connection refused by %v (reason %d)", src, m.Reason)
	}
	e.cmFailed(err, m.PrivateData)
}

func (a *agent) handleDREQ(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	a.sendLocked(src, cm.Msg{Type: cm.DREP, TransactionID: m.TransactionID, LocalCommID: m.RemoteCommID, RemoteCommID: m.LocalCommID})
	c := a.conns[m.RemoteCommID]
	if c == nil || c.peer != src || c.remote != m.LocalCommID {
		a.mu.Unlock()
		return
	}
	var e *rcEndpoint
	switch c.state {
	case cmEstablished, cmRepSent:
		e = c.ep
		c.finishLocked()
	case cmDreqSent: // both sides disconnect: ours has been reported
		c.finishLocked()
	}
	a.mu.Unlock()
	if e != nil {
		e.cmDisconnected()
	}
}

// Service ID resolution for UD endpoints.

// sidrReq is a resolution under way.
type sidrReq struct {
	id   uint32
	port uint16
	done func(qpn, qkey uint32, err error)
	r    retx
}

func (s *sidrReq) stop() { s.r.stop() }

// resolve asks the device with IP dst for the QP number and Q_Key of its
// UD endpoint on service port port; done is called on the agent's
// goroutine.
func (a *agent) resolve(dst netip.Addr, port uint16, done func(qpn, qkey uint32, err error)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		go done(0, 0, core.Errorf(fi.ENODEV, "verbs: device %s is closed", a.d.name))
		return
	}
	s := &sidrReq{port: port, done: done}
	for s.id == 0 || a.sidrs[s.id] != nil {
		s.id = rand.Uint32()
	}
	a.sidrs[s.id] = s
	m := cm.Msg{Type: cm.SIDRREQ, TransactionID: rand.Uint64(), RequestID: s.id, ServiceID: cm.ServiceID(cm.PortSpaceUDP, port)}
	a.armLocked(&s.r, dst, m, func() {
		a.mu.Lock()
		delete(a.sidrs, s.id)
		a.mu.Unlock()
		done(0, 0, core.Errorf(fi.EHOSTUNREACH, "verbs: %s does not answer", fmtAddr(dst, port)))
	})
}

func (a *agent) handleSIDRREQ(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rep := cm.Msg{Type: cm.SIDRREP, TransactionID: m.TransactionID, RequestID: m.RequestID, Status: cm.SIDRNotSupported}
	if port, ok := cm.ServicePort(m.ServiceID, cm.PortSpaceUDP); ok {
		if e := a.udPorts[port]; e != nil {
			rep.Status, rep.QPN, rep.QKey = cm.SIDRValid, e.qpn, e.qkey
		}
	}
	a.sendLocked(src, rep)
}

func (a *agent) handleSIDRREP(src netip.Addr, m *cm.Msg) {
	a.mu.Lock()
	s := a.sidrs[m.RequestID]
	if s == nil || s.r.dst != src {
		a.mu.Unlock()
		return
	}
	delete(a.sidrs, s.id)
	s.stop()
	a.mu.Unlock()
	if m.Status != cm.SIDRValid {
		s.done(0, 0, core.Errorf(fi.EHOSTUNREACH, "verbs: no datagram endpoint on %s", fmtAddr(src, s.port)))
		return
	}
	s.done(m.QPN, m.QKey, nil)
}
