package verbs

import (
	"math/rand/v2"
	"net/netip"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// udEndpoint is an FI_EP_DGRAM endpoint: a UD QP bound to a service port
// of its device's UDP port space. Its address is the device's IP and that
// port (FI_SOCKADDR_IN/IN6); a send to an address the endpoint has not
// sent to before first asks that device's connection manager for the QP
// number and Q_Key behind the port (SIDR, cmconn.go), and waits for the
// answer with the address's other sends.
type udEndpoint struct {
	qpBase
	info *fi.Info

	// guarded by qpBase.mu
	port   uint16 // bound at Enable
	qpn    uint32 // set before the port is bound, then read by the agent
	qkey   uint32
	queued int // sends waiting for their address
	dests  map[netip.AddrPort]*udDest
	byQP   map[udSource]netip.AddrPort // resolved addresses by device and QP: the senders of received datagrams
}

// udDest is a destination: resolved, or being resolved with sends waiting.
type udDest struct {
	ah        *ibv.AH
	qpn, qkey uint32
	waiting   []*core.Op // nil once resolved
}

type udSource struct {
	ip  netip.Addr
	qpn uint32
}

var (
	_ core.Endpoint = (*udEndpoint)(nil)
	_ core.Poller   = (*udEndpoint)(nil)
)

func newUDEndpoint(o *owned, info *fi.Info, tx, rx int, ev core.EndpointEvents) *udEndpoint {
	e := &udEndpoint{info: info, dests: map[netip.AddrPort]*udDest{}, byQP: map[udSource]netip.AddrPort{}}
	e.init(o, ev, tx, rx, info, true)
	e.source = e.sourceOf
	return e
}

// Enable makes the UD QP, takes it to RTS with a Q_Key of its own, and
// binds the service port of the fi_info's source address (0: a free one).
func (e *udEndpoint) Enable() error {
	var want uint16
	if src := e.info.SrcAddr; src != nil {
		if err := checkLocal(e.d.dev, *src); err != nil {
			return err
		}
		want = src.IP.Port()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.dead:
		return core.Errorf(fi.EOPBADSTATE, "verbs: endpoint is closed")
	case e.qp != nil:
		return nil
	}
	if err := e.createQPLocked(ibv.QPTUD); err != nil {
		return err
	}
	e.qpn, e.qkey = e.qp.QPNum(), rand.Uint32()&0x7fffffff // bit 31 set is a controlled Q_Key
	if err := udToRTS(e.qp, e.qkey); err != nil {
		return err
	}
	port, err := e.d.dev.cm.bindUD(want, e)
	if err != nil {
		return err
	}
	e.port = port
	return nil
}

// Connect, Accept, Reject and Shutdown are for FI_EP_MSG endpoints.
func (e *udEndpoint) Connect(fi.Addr, []byte) error { return errDatagram("connect") }
func (e *udEndpoint) Accept([]byte) error           { return errDatagram("accept") }
func (e *udEndpoint) Reject([]byte) error           { return errDatagram("reject") }
func (e *udEndpoint) Shutdown() error               { return errDatagram("shutdown") }

func errDatagram(what string) error {
	return core.Errorf(fi.EOPBADSTATE, "verbs: %s: an FI_EP_DGRAM endpoint has no connection", what)
}

// Post starts a send to op.Peer (at most the MTU), or a receive.
func (e *udEndpoint) Post(op *core.Op) error {
	switch {
	case op == nil:
		return core.Errorf(fi.EINVAL, "verbs: post: no operation")
	case op.Kind == core.OpRecv:
		return e.postRecv(op)
	case op.Kind != core.OpSend:
		return core.Errorf(fi.EOPNOTSUPP, "verbs: FI_EP_DGRAM sends and receives messages only")
	case len(op.Buf) > e.d.maxMsg:
		return core.Errorf(fi.EMSGSIZE, "verbs: a datagram of %d bytes; max_msg_size is the MTU, %d", len(op.Buf), e.d.maxMsg)
	case op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 && op.Data > 1<<32-1:
		return core.Errorf(fi.EINVAL, "verbs: remote CQ data %#x is wider than cq_data_size %d", op.Data, CQDataSize)
	}
	dst := netip.AddrPortFrom(op.Peer.IP.Addr().Unmap().WithZone(""), op.Peer.IP.Port())
	if !dst.Addr().IsValid() || dst.Port() == 0 {
		return core.Errorf(fi.EINVAL, "verbs: a datagram without a destination address")
	}
	e.mu.Lock()
	switch {
	case e.dead || e.qp == nil:
		e.mu.Unlock()
		return core.Errorf(fi.EOPBADSTATE, "verbs: the endpoint is not enabled, or closed")
	case e.txOut+e.queued >= e.txSize:
		e.mu.Unlock()
		return fi.EAGAIN
	}
	d := e.dests[dst]
	if d == nil || d.waiting != nil {
		if d == nil {
			d = &udDest{}
			e.dests[dst] = d
			e.d.dev.cm.resolve(dst.Addr(), dst.Port(), func(qpn, qkey uint32, err error) { e.resolved(dst, d, qpn, qkey, err) })
		}
		d.waiting = append(d.waiting, op)
		e.queued++
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	return e.send(op, d)
}

// send posts op to the resolved destination d.
func (e *udEndpoint) send(op *core.Op, d *udDest) error {
	wr := &ibv.SendWR{Opcode: ibv.WRSend, AH: d.ah, RemoteQPN: d.qpn, RemoteQKey: d.qkey}
	if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
		wr.Opcode, wr.Imm = ibv.WRSendWithImm, uint32(op.Data)
	}
	return e.postSend(op, *wr)
}

// resolved is the agent's answer for dst: the waiting sends go out, or
// fail (and the next send asks again).
func (e *udEndpoint) resolved(dst netip.AddrPort, d *udDest, qpn, qkey uint32, err error) {
	var ah *ibv.AH
	if err == nil {
		if ah, err = e.o.pd.CreateAH(ibv.AHAttr{Dest: e.d.dev.peer(dst.Addr()), TrafficClass: trafficClass(e.info)}); err != nil {
			err = ibvError("address handle for "+dst.String(), err)
		}
	}
	e.mu.Lock()
	ops := d.waiting
	e.queued -= len(ops)
	if e.dead || err != nil {
		delete(e.dests, dst)
		d.waiting = nil
		e.mu.Unlock()
		if ah != nil {
			ah.Destroy()
		}
		if err == nil {
			err = core.Errorf(fi.ECANCELED, "verbs: the endpoint closed")
		}
		for _, op := range ops {
			op.Complete(core.Completion{Flags: op.Kind.CQFlags(), Err: core.Code(err)})
		}
		return
	}
	d.ah, d.qpn, d.qkey, d.waiting = ah, qpn, qkey, nil
	e.byQP[udSource{dst.Addr(), qpn}] = dst
	e.mu.Unlock()
	for _, op := range ops {
		if err := e.send(op, d); err != nil {
			op.Complete(core.Completion{Flags: op.Kind.CQFlags(), Err: core.Code(err)})
		}
	}
}

// sourceOf is the address of a received datagram's sender, if the
// endpoint has sent to it.
func (e *udEndpoint) sourceOf(wc *ibv.WC) fi.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.byQP[udSource{wc.Src.Addr().Unmap().WithZone(""), wc.SrcQP}]; ok {
		return fi.SockAddr(a)
	}
	return fi.Addr{}
}

// Cancel cannot take back what a QP has: see rcEndpoint.Cancel.
func (e *udEndpoint) Cancel(*core.Op) bool { return false }

// Name is the device's address and the endpoint's service port.
func (e *udEndpoint) Name() (fi.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fi.SockAddr(e.d.dev.addr(e.port)), nil
}

// Peer: a datagram endpoint has none.
func (e *udEndpoint) Peer() (fi.Addr, error) {
	return fi.Addr{}, core.Errorf(fi.ENOTCONN, "verbs: an FI_EP_DGRAM endpoint has no peer")
}

// Close gives the port back, destroys the QP and completes what was posted
// or waiting with FI_ECANCELED.
func (e *udEndpoint) Close() error {
	e.mu.Lock()
	if e.dead {
		e.mu.Unlock()
		return nil
	}
	e.dead = true
	port := e.port
	var waiting []*core.Op
	var ahs []*ibv.AH
	for dst, d := range e.dests {
		waiting = append(waiting, d.waiting...)
		e.queued -= len(d.waiting)
		d.waiting = nil
		if d.ah != nil {
			ahs = append(ahs, d.ah)
		}
		delete(e.dests, dst)
	}
	e.mu.Unlock()
	if port != 0 {
		e.d.dev.cm.unbindUD(port)
	}
	e.destroy()
	for _, op := range waiting {
		op.Complete(core.Completion{Flags: op.Kind.CQFlags(), Err: fi.ECANCELED})
	}
	for _, ah := range ahs {
		ah.Destroy()
	}
	e.d.release()
	return nil
}
