package verbs

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// RC QP attributes: libfabric verbs's (rdma_cm's) choices.
const (
	rcTimeout     = 14 // local ACK timeout 4.096 us * 2^14: 67 ms
	rcRetryCount  = 7
	rcRNRRetry    = 7  // forever: a send waits for the peer's receive (FI_RM_ENABLED: "retried")
	rcMinRNRTimer = 12 // libfabric verbs's VERBS_DEFAULT_MIN_RNR_TIMER: 0.64 ms
	rcAccess      = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
)

// keepaliveInterval: a connected endpoint whose QP took no packet from
// its peer for this long sends a keepalive (keepalive).
const keepaliveInterval = time.Second

// deadPeerBound is how long after its peer dies (sends nothing more, not
// even a DREQ) a connected endpoint's QP is in error, with every posted
// operation completed with an error: at most two keepalive intervals of
// silence, then the keepalive's retries (rcRetryCount+1 local ACK
// timeouts).
const deadPeerBound = 2*keepaliveInterval + (rcRetryCount+1)*(4096*time.Nanosecond<<rcTimeout)

// rcState is where an FI_EP_MSG endpoint is.
type rcState uint8

const (
	rcIdle       rcState = iota // not connected; or made from a request not yet answered
	rcConnecting                // REQ sent, or REP sent
	rcConnected
	rcDown // shut down, failed or rejected: its one terminal event is reported
	rcClosed
)

// rcEndpoint is an FI_EP_MSG endpoint: an RC QP connected by the agent.
// Its events come from the agent's goroutine, each at most once and in
// order: one Connected, then one Shutdown or Failed.
type rcEndpoint struct {
	qpBase
	info *fi.Info

	estMu    sync.Mutex  // one established at a time
	awaitRTU atomic.Bool // accepted, not yet established: a receive completion stands for the RTU

	// guarded by qpBase.mu
	state      rcState
	connQueued bool    // Connected is queued on the agent's goroutine: a terminal event goes behind it
	c          *cmConn // the connection, or the request it was made from
	fromReq    bool
	psn        uint32 // our starting PSN
	port       uint16 // our service port: bound at Connect, or the listener's
	bound      bool   // port is ours to give back
	remote     netip.AddrPort
	depth      uint8       // the RDMA reads we issue at once, once connected
	alive      *time.Timer // the keepalive timer, while connected
	heard      uint64      // the QP's Heard at the last keepalive tick
	probing    bool        // a keepalive is posted
}

var (
	_ core.Endpoint = (*rcEndpoint)(nil)
	_ core.Poller   = (*rcEndpoint)(nil)
)

func newRCEndpoint(o *owned, info *fi.Info, tx, rx int, ev core.EndpointEvents) *rcEndpoint {
	e := &rcEndpoint{info: info, psn: rand.Uint32N(roce.PSNMask + 1)}
	e.init(o, ev, tx, rx, info, false)
	e.fatal = e.qpFailed
	e.received = e.commEst
	return e
}

// adopt makes e the endpoint of the connection request c.
func (e *rcEndpoint) adopt(c *cmConn) {
	e.c, e.fromReq = c, true
	if l := c.pep; l != nil {
		e.authKey = string(l.info.EPAttr.AuthKey) // the listener took the request with it
		l.mu.Lock()
		e.port = l.port
		l.mu.Unlock()
	}
	e.remote = netip.AddrPortFrom(c.peer, c.req.SrcPort)
}

// Enable makes the QP and takes it to INIT: receives may be posted. The
// QP is charged to the endpoint's owner as a connection (core.Take), until
// it is destroyed; past the owner's limit Enable fails with FI_ENOSPC.
func (e *rcEndpoint) Enable() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.state == rcClosed:
		return core.Errorf(fi.EOPBADSTATE, "verbs: endpoint is closed")
	case e.qp != nil:
		return nil
	}
	if err := core.Take(e.ev, core.Connections, 1); err != nil {
		return core.WithOp("verbs: queue pair", err)
	}
	if err := e.createQPLocked(ibv.QPTRC); err != nil {
		core.Give(e.ev, core.Connections, 1)
		return err
	}
	e.charged = true
	a := ibv.QPAttr{State: ibv.QPSInit, PKeyIndex: 0, PortNum: 1, AccessFlags: rcAccess}
	if err := e.qp.Modify(&a, ibv.QPState_|ibv.QPPKeyIndex|ibv.QPPort|ibv.QPAccessFlags); err != nil {
		return ibvError("taking the QP to INIT", err)
	}
	return nil
}

// checkData refuses private data longer than cm_data_size.
func checkData(what string, data []byte) error {
	if len(data) > MaxPrivateData {
		return core.Errorf(fi.EINVAL, "verbs: %s: %d bytes of private data; at most %d (cm_data_size)", what, len(data), MaxPrivateData)
	}
	return nil
}

// Connect sends a connection request to addr (a device's IP and a
// listener's service port) with data.
func (e *rcEndpoint) Connect(addr fi.Addr, data []byte) error {
	if err := checkData("connect", data); err != nil {
		return err
	}
	dst := addr.IP.Addr().Unmap().WithZone("")
	if !dst.IsValid() || dst.IsUnspecified() || addr.IP.Port() == 0 {
		return core.Errorf(fi.EINVAL, "verbs: connect: %v is not a device address with a port", addr)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.fromReq || e.state != rcIdle:
		return core.Errorf(fi.EOPBADSTATE, "verbs: connect: endpoint is not idle")
	case e.qp == nil:
		return core.Errorf(fi.EOPBADSTATE, "verbs: connect: endpoint is not enabled")
	}
	a := e.d.dev.cm
	port, err := a.bindRC(e.srcPort(), nil)
	if err != nil {
		return err
	}
	// The answer may come before connect returns: it waits for mu.
	e.port, e.bound, e.remote, e.state = port, true, netip.AddrPortFrom(dst, addr.IP.Port()), rcConnecting
	c, err := a.connect(e, dst, addr.IP.Port(), port, e.qp.QPNum(), e.psn, data)
	if err != nil {
		a.unbindRC(port)
		e.port, e.bound, e.remote, e.state = 0, false, netip.AddrPort{}, rcIdle
		return err
	}
	e.c = c
	return nil
}

// cmEstablish is the REP to our REQ: the QP goes to RTR and RTS with the
// peer's QP, PSN and read resources, and the endpoint is connected
// (FI_CONNECTED queued). The agent sends RTU next.
func (e *rcEndpoint) cmEstablish(rep *cm.Msg) error {
	e.mu.Lock()
	ok, peer := e.state == rcConnecting, e.remote.Addr()
	e.mu.Unlock()
	if !ok {
		return core.Errorf(fi.EOPBADSTATE, "verbs: the endpoint is no longer connecting")
	}
	at := e.d.dev.attr
	rtr := ibv.QPAttr{State: ibv.QPSRTR, PathMTU: min(ibv.MTU(rep.PathMTU), at.ActiveMTU), DestQPNum: rep.QPN, RQPSN: rep.PSN,
		MaxDestRdAtomic: rep.InitiatorDepth, MinRNRTimer: rcMinRNRTimer, AH: ibv.AHAttr{Dest: e.d.dev.peer(peer), TrafficClass: trafficClass(e.info)}}
	if err := e.toRTR(&rtr); err != nil {
		return err
	}
	e.mu.Lock()
	e.depth = rep.ResponderResources
	e.mu.Unlock()
	if err := e.toRTS(rep.RNRRetryCount); err != nil {
		return err
	}
	// Connected before the agent sends the RTU, after which the peer may
	// send at once: its first message may complete here before the agent
	// goes on.
	e.mu.Lock()
	e.connectedLocked(rep.PrivateData)
	e.mu.Unlock()
	return nil
}

// trafficClass is the GRH traffic class of the packets of an endpoint
// with info: the DSCP its tx_attr.tclass maps to (fi.TClass.IPDSCP, as
// tcp's sockets take it) in the upper six bits, ECN 0; 0 (the device
// socket's own) for FI_TC_UNSPEC.
func trafficClass(info *fi.Info) uint8 {
	if info == nil || info.TxAttr == nil {
		return 0
	}
	dscp, _ := info.TxAttr.TClass.IPDSCP()
	return dscp << 2
}

const rtrMask = ibv.QPState_ | ibv.QPAV | ibv.QPPathMTU | ibv.QPDestQPN | ibv.QPRQPSN | ibv.QPMaxDestRdAtomic | ibv.QPMinRNRTimer

// toRTR takes the QP to RTR with rtr, after recording the service port
// of its connection for the requests its peer sends from then on
// (device.badKey).
func (e *rcEndpoint) toRTR(rtr *ibv.QPAttr) error {
	e.mu.Lock()
	if e.qp != nil {
		e.d.dev.ports.Store(e.qp.QPNum(), e.qpPortLocked())
	}
	e.mu.Unlock()
	return e.modify(rtr, rtrMask)
}

// qpPortLocked is the service port e's connection went to: its
// listener's if e was made from a request, else the peer's.
func (e *rcEndpoint) qpPortLocked() qpPort {
	if e.fromReq {
		return qpPort{port: e.port}
	}
	return qpPort{port: e.remote.Port(), out: true}
}

// toRTS takes the QP from RTR to RTS.
func (e *rcEndpoint) toRTS(rnrRetry uint8) error {
	e.mu.Lock()
	rts := ibv.QPAttr{State: ibv.QPSRTS, SQPSN: e.psn, Timeout: rcTimeout, RetryCnt: rcRetryCount, RNRRetry: rnrRetry, MaxRdAtomic: e.depth}
	e.mu.Unlock()
	return e.modify(&rts, ibv.QPState_|ibv.QPSQPSN|ibv.QPTimeout|ibv.QPRetryCnt|ibv.QPRNRRetry|ibv.QPMaxQPRdAtomic)
}

// Accept answers the request the endpoint was made from: the QP goes to
// RTR with the requester's QP and PSN, and REP goes out; FI_CONNECTED
// follows the RTU (or the first receive: commEst).
func (e *rcEndpoint) Accept(data []byte) error {
	if err := checkData("accept", data); err != nil {
		return err
	}
	e.mu.Lock()
	c, qp := e.c, e.qp
	switch {
	case !e.fromReq || e.state != rcIdle:
		e.mu.Unlock()
		return core.Errorf(fi.EOPBADSTATE, "verbs: accept: the endpoint has no pending request")
	case qp == nil:
		e.mu.Unlock()
		return core.Errorf(fi.EOPBADSTATE, "verbs: accept: endpoint is not enabled")
	}
	at := e.d.dev.attr
	req := c.req
	mtu := min(ibv.MTU(req.PathMTU), at.ActiveMTU)
	resp := min(uint8(min(at.MaxQPRdAtom, 255)), req.InitiatorDepth)
	e.depth = min(uint8(min(at.MaxQPInitRdAtom, 255)), req.ResponderResources)
	e.mu.Unlock()
	rtr := ibv.QPAttr{State: ibv.QPSRTR, PathMTU: mtu, DestQPNum: req.QPN, RQPSN: req.PSN, MaxDestRdAtomic: resp,
		MinRNRTimer: rcMinRNRTimer, AH: ibv.AHAttr{Dest: e.d.dev.peer(c.peer), TrafficClass: trafficClass(e.info)}}
	if err := e.toRTR(&rtr); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != rcIdle {
		return core.Errorf(fi.EOPBADSTATE, "verbs: accept: the endpoint was closed")
	}
	// Before REP goes out: the peer's first message may come at once, and
	// its commEst then waits for mu.
	e.awaitRTU.Store(true)
	if err := e.d.dev.cm.accept(c, e, qp.QPNum(), e.psn, resp, e.depth, uint8(mtu), data); err != nil {
		e.awaitRTU.Store(false)
		return err
	}
	e.state = rcConnecting
	return nil
}

// established makes the connection we accepted usable: the QP goes to
// RTS and the endpoint is connected. It runs on the RTU, or on the first
// receive completion if that comes first (commEst); the later of the two
// waits for the earlier to finish and then finds nothing to do. Either
// way FI_CONNECTED (or the failure) is queued for the agent's goroutine,
// and nothing of the application's runs here.
func (e *rcEndpoint) established() {
	e.estMu.Lock()
	defer e.estMu.Unlock()
	defer e.awaitRTU.Store(false) // last, so that a commEst meanwhile waits for this one
	e.mu.Lock()
	st, c := e.state, e.c
	e.mu.Unlock()
	if st != rcConnecting {
		return
	}
	if err := e.toRTS(c.req.RNRRetryCount); err != nil {
		e.later(func() { e.cmFailed(err, nil) })
		return
	}
	e.mu.Lock()
	e.connectedLocked(nil)
	e.mu.Unlock()
}

// commEst is IBV_EVENT_COMM_EST: a receive completed on the QP of a
// connection we accepted, before its RTU was handled. The RTU travels
// apart from the peer's messages (another QP, another goroutine here), so
// the peer's first message can overtake it, or it can be lost. As ib_cm
// does on that event, the CM takes the receive for the RTU: the endpoint
// is connected before the receive completes, so that the application
// (rxm, answering a rendezvous request with a read) may answer at once.
func (e *rcEndpoint) commEst() {
	if !e.awaitRTU.Load() {
		return
	}
	e.mu.Lock()
	c := e.c
	e.mu.Unlock()
	e.d.dev.cm.rtuImplied(c)
	e.established()
}

// connectedLocked makes a connecting endpoint, whose QP is in RTS,
// connected, and queues FI_CONNECTED with data for the agent's
// goroutine. It is queued under mu, with connQueued set, so that a
// terminal event reported from then on goes behind it (down, later). mu
// is held.
func (e *rcEndpoint) connectedLocked(data []byte) {
	if e.state != rcConnecting {
		return
	}
	e.state, e.connQueued = rcConnected, true
	e.alive = time.AfterFunc(keepaliveInterval, e.keepalive)
	e.d.dev.cm.do(func() {
		e.mu.Lock()
		e.connQueued = false
		closed := e.state == rcClosed
		e.mu.Unlock()
		if !closed {
			e.ev.Connected(data)
		}
	})
}

// keepalive runs every keepaliveInterval while the endpoint is
// connected. If the QP took no packet from the peer since the last tick,
// and no keepalive is under way, it posts a zero-length RDMA write: the
// peer's device ACKs it without a key check or a completion there (as
// RC does for a zero-length write), and a dead peer's silence exhausts
// its retries, which puts the QP in error (qpFailed): every operation
// posted completes with an error, and the application learns FI_EIO on
// the EQ. An endpoint waiting for its peer without a work request posted
// (rxm's rendezvous sender, waiting for a read-done) otherwise never
// learns that its peer died.
func (e *rcEndpoint) keepalive() {
	e.mu.Lock()
	if e.state != rcConnected || e.dead || e.qp == nil {
		e.mu.Unlock()
		return
	}
	heard := e.qp.Heard()
	probe := heard == e.heard && !e.probing
	e.heard, e.probing = heard, e.probing || probe
	e.alive.Reset(keepaliveInterval)
	e.mu.Unlock()
	if !probe {
		return
	}
	op := &core.Op{Kind: core.OpWrite}
	op.OnComplete(func(*core.Op, core.Completion) {
		e.mu.Lock()
		e.probing = false
		e.mu.Unlock()
	})
	if e.postSend(op, ibv.SendWR{Opcode: ibv.WRRDMAWrite}) != nil { // a full send queue has its own retries
		e.mu.Lock()
		e.probing = false
		e.mu.Unlock()
	}
}

// Reject refuses the request the endpoint was made from, with data.
func (e *rcEndpoint) Reject(data []byte) error {
	if err := checkData("reject", data); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.fromReq || e.state != rcIdle {
		return core.Errorf(fi.EOPBADSTATE, "verbs: reject: the endpoint has no pending request")
	}
	if err := e.d.dev.cm.reject(e.c, cm.RejConsumer, data); err != nil {
		return err
	}
	e.state = rcDown
	return nil
}

// Shutdown disconnects: DREQ to the peer, the QP to the error state
// (posted operations complete with FI_ECANCELED), and FI_SHUTDOWN here
// too, as libfabric reports it on the side that calls fi_shutdown.
func (e *rcEndpoint) Shutdown() error {
	e.mu.Lock()
	if e.state != rcConnected && e.state != rcConnecting {
		e.mu.Unlock()
		return core.Errorf(fi.ENOTCONN, "verbs: shutdown: endpoint is not connected")
	}
	e.state = rcDown
	c := e.c
	e.mu.Unlock()
	e.toError()
	e.d.dev.cm.disconnect(c)
	e.later(e.ev.Shutdown)
	return nil
}

// later reports an event on the agent's goroutine, after the events it
// reports itself, unless the endpoint is closed by then.
func (e *rcEndpoint) later(report func()) {
	e.d.dev.cm.do(func() {
		e.mu.Lock()
		closed := e.state == rcClosed
		e.mu.Unlock()
		if !closed {
			report()
		}
	})
}

// cmDisconnected is the peer's DREQ: FI_SHUTDOWN.
func (e *rcEndpoint) cmDisconnected() {
	e.down(e.ev.Shutdown)
}

// cmFailed is a connection that could not be made or ended in error:
// rejected (with the rejecter's data), timed out, or its QP in error.
func (e *rcEndpoint) cmFailed(err error, data []byte) {
	e.down(func() { e.ev.Failed(err, data) })
}

// down ends the connection from the peer's side or by an error, on the
// agent's goroutine, and reports the endpoint's terminal event with
// report if it is still to be reported: at once, or behind a Connected
// still queued (established).
func (e *rcEndpoint) down(report func()) {
	e.mu.Lock()
	live := e.state == rcConnecting || e.state == rcConnected
	if live {
		e.state = rcDown
	}
	behind := live && e.connQueued
	e.mu.Unlock()
	if !live {
		return
	}
	e.toError()
	if behind {
		e.later(report)
	} else {
		report()
	}
}

// qpFailed is a completion error that put the QP in the error state: the
// connection is over. The peer learns it by DREQ, the application by
// FI_EIO on the EQ (after the completion).
func (e *rcEndpoint) qpFailed(wc *ibv.WC) {
	e.mu.Lock()
	live := e.state == rcConnected || e.state == rcConnecting
	if live {
		e.state = rcDown
	}
	c := e.c
	e.mu.Unlock()
	if !live {
		return
	}
	e.d.dev.cm.disconnect(c)
	err := core.Errorf(fi.EIO, "verbs: the connection failed: completion status %v", wc.Status)
	e.later(func() { e.ev.Failed(err, nil) })
}

// Post starts a send, RMA write or read, or atomic (atomic.go) on a
// connected endpoint, or a receive.
func (e *rcEndpoint) Post(op *core.Op) error {
	if op == nil {
		return core.Errorf(fi.EINVAL, "verbs: post: no operation")
	}
	if op.Kind == core.OpRecv {
		return e.postRecv(op)
	}
	e.mu.Lock()
	st := e.state
	e.mu.Unlock()
	if st != rcConnected {
		return core.Errorf(fi.ENOTCONN, "verbs: endpoint is not connected")
	}
	if len(op.Buf) > e.d.maxMsg {
		return core.Errorf(fi.EMSGSIZE, "verbs: %d bytes; max_msg_size is %d", len(op.Buf), e.d.maxMsg)
	}
	wr := &ibv.SendWR{}
	withData := op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0
	switch op.Kind {
	case core.OpSend:
		wr.Opcode = ibv.WRSend
		if withData {
			wr.Opcode = ibv.WRSendWithImm
		}
	case core.OpWrite, core.OpRead:
		if op.Key > 1<<32-1 {
			return core.Errorf(fi.EINVAL, "verbs: key %#x is wider than mr_key_size %d", op.Key, MRKeySize)
		}
		wr.RemoteAddr, wr.RKey = op.Addr, uint32(op.Key)
		wr.Opcode = ibv.WRRDMAWrite
		switch {
		case op.Kind == core.OpRead:
			if op.Flags&fi.INJECT != 0 {
				return core.Errorf(fi.EINVAL, "verbs: a read cannot be injected")
			}
			wr.Opcode = ibv.WRRDMARead
		case withData:
			wr.Opcode = ibv.WRRDMAWriteWithImm
		}
	case core.OpAtomic, core.OpFetchAtomic, core.OpCompareAtomic:
		return e.postAtomic(op)
	default:
		return core.Errorf(fi.EOPNOTSUPP, "verbs: operation kind %d is not supported", op.Kind)
	}
	if withData {
		if op.Data > 1<<32-1 {
			return core.Errorf(fi.EINVAL, "verbs: remote CQ data %#x is wider than cq_data_size %d", op.Data, CQDataSize)
		}
		wr.Imm = uint32(op.Data)
	}
	return e.postSend(op, *wr)
}

// Cancel cannot take back a posted receive or send: a QP offers no way
// to, as with libfabric's verbs (fi_cancel is fi_no_cancel there). It
// returns false; the operation completes normally, or with FI_ECANCELED
// when the connection ends or the endpoint closes.
func (e *rcEndpoint) Cancel(*core.Op) bool { return false }

// Name is the device's address and the endpoint's service port: until
// Connect binds one, the port of its src_addr (fi_setname's), which
// Connect binds.
func (e *rcEndpoint) Name() (fi.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	port := e.port
	if port == 0 {
		port = e.srcPort()
	}
	return fi.SockAddr(e.d.dev.addr(port)), nil
}

// srcPort is the service port of the endpoint's src_addr (fi_setname's,
// core.EP.SetName): an FI_EP_MSG endpoint connects from it; 0 lets
// Connect take a free one.
func (e *rcEndpoint) srcPort() uint16 {
	if e.info != nil && e.info.SrcAddr != nil {
		a := e.info.SrcAddr
		return a.IP.Port()
	}
	return 0
}

// Peer is the peer's device address and service port.
func (e *rcEndpoint) Peer() (fi.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.remote.IsValid() {
		return fi.Addr{}, core.Errorf(fi.ENOTCONN, "verbs: endpoint is not connected")
	}
	return fi.SockAddr(e.remote), nil
}

// Close disconnects (DREQ, or REJ for a request never answered), destroys
// the QP and completes what was posted with FI_ECANCELED.
func (e *rcEndpoint) Close() error {
	e.mu.Lock()
	if e.state == rcClosed {
		e.mu.Unlock()
		return nil
	}
	e.state = rcClosed
	c, port, bound := e.c, e.port, e.bound
	if e.alive != nil {
		e.alive.Stop()
	}
	if e.qp != nil {
		e.d.dev.ports.CompareAndDelete(e.qp.QPNum(), e.qpPortLocked())
	}
	e.mu.Unlock()
	a := e.d.dev.cm
	if c != nil {
		a.disconnect(c)
	}
	e.destroy()
	if bound {
		a.unbindRC(port)
	}
	e.d.release()
	return nil
}
