package ibv

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// QP is a queue pair (ibv_create_qp). Its lock covers its send and
// receive queues and the state of its requester, completer and responder:
// a poster's goroutine, the device's receive goroutine and the QP's timer
// take it in turn.
type QP struct {
	dev  *Device
	pd   *PD
	qpn  uint32
	init QPInitAttr

	heard atomic.Uint64 // RC: packets taken from the peer (Heard)

	mu   sync.Mutex
	attr QPAttr
	dead bool
	// notifySend and notifyRecv say that completions were added to the
	// send or receive CQ under mu; unlock calls their notify callbacks.
	notifySend, notifyRecv bool
	// executed is the access of a peer's request executed under mu (0:
	// none), executedLen its length and executedKey the rkey it named:
	// unlock reports it (QPInitAttr.Executed). A packet executes at most
	// one request.
	executed    Access
	executedLen uint32
	executedKey uint32

	rq recvQueue // receives, unless the QP uses an SRQ

	// RC: the peer, and the transport state of each direction.
	dest netip.AddrPort
	path roce.Path // the path of the packets the QP sends
	sq   sendQueue
	req  requester
	comp completer
	resp responder
	// timer fires the retransmit timeout and the end of an RNR wait.
	timer *time.Timer

	udPSN uint32 // UD: the PSN of the next datagram

	txbuf   []byte // the packet being sent
	scratch []byte // a payload gathered from several SGEs
}

// CreateQP creates a QP in the RESET state. A.Type QPTGSI creates the
// device's QP1 (at most one per device: EBUSY for a second).
func (pd *PD) CreateQP(a QPInitAttr) (*QP, error) {
	if pd == nil {
		return nil, errorf(syscall.EINVAL, "create qp: no PD")
	}
	d := pd.dev
	c := a.Cap
	switch {
	case a.Type != QPTRC && a.Type != QPTUD && a.Type != QPTGSI:
		return nil, errorf(syscall.EINVAL, "create qp: type %d", a.Type)
	case a.SendCQ == nil || a.RecvCQ == nil || a.SendCQ.dev != d || a.RecvCQ.dev != d:
		return nil, errorf(syscall.EINVAL, "create qp: send and receive CQs of device %s needed", d.name)
	case a.SRQ != nil && a.SRQ.pd.dev != d:
		return nil, errorf(syscall.EINVAL, "create qp: SRQ of another device")
	case c.MaxSendWR > uint32(deviceAttr.MaxQPWR) || (a.SRQ == nil && c.MaxRecvWR > uint32(deviceAttr.MaxQPWR)):
		return nil, errorf(syscall.EINVAL, "create qp: %d send and %d receive work requests, at most %d",
			c.MaxSendWR, c.MaxRecvWR, deviceAttr.MaxQPWR)
	case c.MaxSendSGE > uint32(deviceAttr.MaxSGE) || c.MaxRecvSGE > uint32(deviceAttr.MaxSGE):
		return nil, errorf(syscall.EINVAL, "create qp: %d send and %d receive SGEs, at most %d",
			c.MaxSendSGE, c.MaxRecvSGE, deviceAttr.MaxSGE)
	case c.MaxInlineData > uint32(deviceAttr.MaxInlineData):
		return nil, errorf(syscall.EINVAL, "create qp: %d bytes of inline data, at most %d", c.MaxInlineData, deviceAttr.MaxInlineData)
	}
	if a.SRQ != nil {
		a.Cap.MaxRecvWR, a.Cap.MaxRecvSGE = 0, 0
	}
	if err := pd.use("create qp"); err != nil {
		return nil, err
	}
	qp := &QP{dev: d, pd: pd, init: a, txbuf: make([]byte, roce.MaxPacketSize), scratch: make([]byte, 0, roce.MaxPayload)}
	if err := qp.bind(); err != nil {
		pd.release()
		return nil, err
	}
	if a.SRQ == nil {
		qp.rq = newRecvQueue(int(c.MaxRecvWR), int(c.MaxRecvSGE))
	}
	maxRecvSGE := int(c.MaxRecvSGE)
	if a.SRQ != nil {
		maxRecvSGE = a.SRQ.q.maxSGE
	}
	qp.resp.wqe.sges = make([]SGE, 0, maxRecvSGE)
	if a.Type == QPTRC {
		qp.sq = newSendQueue(c)
	}
	if err := d.addQP(qp); err != nil {
		qp.unbind()
		pd.release()
		return nil, err
	}
	return qp, nil
}

// bind counts the QP as a user of its CQs and SRQ.
func (qp *QP) bind() error {
	a := &qp.init
	if err := a.SendCQ.bind(qp); err != nil {
		return err
	}
	if err := a.RecvCQ.bind(qp); err != nil {
		a.SendCQ.unbind(qp)
		return err
	}
	if a.SRQ != nil {
		if err := a.SRQ.use(); err != nil {
			a.SendCQ.unbind(qp)
			a.RecvCQ.unbind(qp)
			return err
		}
	}
	return nil
}

// unbind undoes bind.
func (qp *QP) unbind() {
	qp.init.SendCQ.unbind(qp)
	qp.init.RecvCQ.unbind(qp)
	if qp.init.SRQ != nil {
		qp.init.SRQ.release()
	}
}

// addQP numbers qp and enters it in the device's table.
func (d *Device) addQP(qp *QP) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return errorf(syscall.EINVAL, "create qp: device %s is closed", d.name)
	case d.nobj.qp >= deviceAttr.MaxQP:
		return errorf(syscall.ENOMEM, "create qp: %d QPs already", d.nobj.qp)
	case qp.init.Type == QPTGSI && d.gsi != nil:
		return errorf(syscall.EBUSY, "create qp: device %s has its GSI QP already", d.name)
	}
	if qp.init.Type == QPTGSI {
		qp.qpn = GSIQPN
		d.gsi = qp
	} else {
		qp.qpn = d.allocQPN()
	}
	d.nobj.qp++
	d.qpMu.Lock()
	d.qps[qp.qpn] = qp
	d.qpMu.Unlock()
	return nil
}

// QPNum is the QP's number.
func (qp *QP) QPNum() uint32 { return qp.qpn }

// Query is ibv_query_qp.
func (qp *QP) Query() (QPAttr, QPInitAttr) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.attr, qp.init
}

// Destroy destroys the QP; its outstanding work requests are discarded
// without completions, as ibv_destroy_qp does.
func (qp *QP) Destroy() error {
	d := qp.dev
	d.qpMu.Lock()
	if d.qps[qp.qpn] == qp {
		delete(d.qps, qp.qpn)
	}
	d.qpMu.Unlock()
	if !qp.shutdown() {
		return errorf(syscall.EINVAL, "destroy qp %#x: destroyed already", qp.qpn)
	}
	d.mu.Lock()
	d.nobj.qp--
	if d.gsi == qp {
		d.gsi = nil
	}
	d.mu.Unlock()
	qp.unbind()
	qp.pd.release()
	return nil
}

// shutdown stops the QP for good: it takes no more work, its timer no
// longer fires, and it lets go of its queues and packet buffers (every
// path checks dead first), so that a reference to it that outlives it
// (a stopped timer the runtime has not dropped yet, a lingering
// connection) holds only the QP itself. It reports false if the QP was
// shut down already.
func (qp *QP) shutdown() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead {
		return false
	}
	qp.dead = true
	qp.reset()
	qp.rq, qp.sq = recvQueue{}, sendQueue{}
	qp.resp = responder{}
	qp.txbuf, qp.scratch = nil, nil
	return true
}

// unlock releases the QP's lock and then notifies the CQs that received
// completions while it was held, and reports a request of the peer it
// executed.
func (qp *QP) unlock() {
	s, r := qp.notifySend, qp.notifyRecv
	qp.notifySend, qp.notifyRecv = false, false
	x, xn, xk := qp.executed, qp.executedLen, qp.executedKey
	qp.executed, qp.executedLen, qp.executedKey = 0, 0, 0
	qp.mu.Unlock()
	if x != 0 && qp.init.Executed != nil {
		qp.init.Executed(x, xn, xk)
	}
	if s {
		qp.init.SendCQ.signal()
	}
	if r && (!s || qp.init.RecvCQ != qp.init.SendCQ) {
		qp.init.RecvCQ.signal()
	}
}

// completeSend adds a send completion. qp.mu is held.
func (qp *QP) completeSend(wc *WC) {
	wc.QPNum = qp.qpn
	qp.init.SendCQ.push(wc)
	qp.notifySend = true
}

// completeRecv adds a receive completion. qp.mu is held.
func (qp *QP) completeRecv(wc *WC) {
	wc.QPNum = qp.qpn
	qp.init.RecvCQ.push(wc)
	qp.notifyRecv = true
}

// sendOpcode is the completion opcode of a send work request.
func sendOpcode(op WROpcode) WCOpcode {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	}
	return WCSend
}

// PostSend posts a send work request (ibv_post_send). It fails with
// ENOMEM when the send queue is full and EINVAL for a malformed request
// or a QP in a state that does not take sends; once accepted, a request
// completes (if signaled, or with an error) on the send CQ.
//
// RC requests are taken in RTS and SQD (where they wait for RTS); the
// packets the window allows leave before PostSend returns. A UD request
// is sent before PostSend returns, in RTS and SQD. In SQE and ERR a
// request completes at once with IBV_WC_WR_FLUSH_ERR. With
// IBV_SEND_INLINE the bytes the SGEs name are copied before PostSend
// returns (the SGEs must still name registered regions: this API has no
// raw pointers).
func (qp *QP) PostSend(wr *SendWR) error {
	if wr == nil {
		return errorf(syscall.EINVAL, "post send: no work request")
	}
	qp.mu.Lock()
	defer qp.unlock()
	if err := qp.checkSend(wr); err != nil {
		return err
	}
	switch qp.attr.State {
	case QPSRTS, QPSSQD:
	case QPSSQE, QPSErr:
		qp.completeSend(&WC{WRID: wr.WRID, Status: WCWRFlushErr, Opcode: sendOpcode(wr.Opcode)})
		return nil
	default:
		return errorf(syscall.EINVAL, "post send: QP %#x is in state %d", qp.qpn, qp.attr.State)
	}
	if qp.init.Type != QPTRC {
		return qp.sendUD(wr)
	}
	return qp.postRC(wr)
}

// checkSend checks a send work request against the QP's type and
// capabilities. qp.mu is held.
func (qp *QP) checkSend(wr *SendWR) error {
	c := &qp.init.Cap
	n := sgeTotal(wr.SGList)
	switch {
	case qp.dead:
		return errorf(syscall.EINVAL, "post send: QP destroyed")
	case wr.Opcode > WRAtomicFetchAndAdd:
		return errorf(syscall.EINVAL, "post send: opcode %d", wr.Opcode)
	case qp.init.Type != QPTRC && wr.Opcode != WRSend && wr.Opcode != WRSendWithImm:
		return errorf(syscall.EINVAL, "post send: opcode %d on a UD QP", wr.Opcode)
	case wr.Flags&^(SendFence|SendSignaled|SendSolicited|SendInline) != 0:
		return errorf(syscall.EINVAL, "post send: flags %#x", uint32(wr.Flags))
	case len(wr.SGList) > int(c.MaxSendSGE):
		return errorf(syscall.EINVAL, "post send: %d SGEs, at most %d", len(wr.SGList), c.MaxSendSGE)
	case n > 1<<31:
		return errorf(syscall.EINVAL, "post send: %d bytes, at most 2^31", n)
	case wr.Flags&SendInline != 0 && (n > uint64(c.MaxInlineData) || isAtomic(wr.Opcode) || wr.Opcode == WRRDMARead):
		return errorf(syscall.EINVAL, "post send: %d bytes inline (at most %d, and not for reads and atomics)", n, c.MaxInlineData)
	case isAtomic(wr.Opcode) && (len(wr.SGList) != 1 || n != 8 || wr.RemoteAddr&7 != 0):
		return errorf(syscall.EINVAL, "post send: an atomic takes one 8-byte SGE and an 8-byte aligned remote address")
	case qp.init.Type != QPTRC && (wr.AH == nil || n > uint64(qp.dev.mtu.Bytes())):
		// A UD (or GSI) message is one packet of the device's active MTU.
		return errorf(syscall.EINVAL, "post send: UD sends need an AH and carry at most %d bytes", qp.dev.mtu.Bytes())
	}
	return nil
}

// isAtomic reports whether op is an atomic operation.
func isAtomic(op WROpcode) bool { return op == WRAtomicCmpAndSwp || op == WRAtomicFetchAndAdd }

// PostRecv posts a receive (ibv_post_recv); ENOMEM when the receive queue
// is full. A QP that uses an SRQ takes no receives of its own (EINVAL).
// In the ERR state the receive completes at once with
// IBV_WC_WR_FLUSH_ERR.
func (qp *QP) PostRecv(wr *RecvWR) error {
	qp.mu.Lock()
	defer qp.unlock()
	switch {
	case qp.dead:
		return errorf(syscall.EINVAL, "post recv: QP destroyed")
	case qp.init.SRQ != nil:
		return errorf(syscall.EINVAL, "post recv: QP %#x receives from an SRQ", qp.qpn)
	case qp.attr.State == QPSReset:
		return errorf(syscall.EINVAL, "post recv: QP %#x is in state RESET", qp.qpn)
	}
	if err := qp.rq.check(wr); err != nil {
		return err
	}
	if qp.attr.State == QPSErr {
		qp.completeRecv(&WC{WRID: wr.WRID, Status: WCWRFlushErr, Opcode: WCRecv})
		return nil
	}
	qp.rq.push(wr)
	return nil
}

// takeRecv takes the next receive, from the SRQ or the QP's own queue,
// into qp.resp.wqe. qp.mu is held.
func (qp *QP) takeRecv() bool {
	if s := qp.init.SRQ; s != nil {
		return s.pop(&qp.resp.wqe)
	}
	return qp.rq.pop(&qp.resp.wqe)
}

// setError moves the QP to the error state (a CQ overrun does so). It
// takes qp.mu.
func (qp *QP) setError() {
	qp.mu.Lock()
	defer qp.unlock()
	if !qp.dead && qp.attr.State != QPSReset {
		qp.toError()
	}
}

// Heard counts the packets an RC QP has taken from its peer: requests and
// responses that reached its responder or completer (a duplicate or a
// NAK too). A count that stays the same says the peer was silent; a
// keepalive (a zero-length RDMA write, whose ACK counts) tells a silent
// peer from a dead one.
func (qp *QP) Heard() uint64 { return qp.heard.Load() }

// toError moves the QP to the ERR state: every outstanding send and
// receive work request completes with IBV_WC_WR_FLUSH_ERR, sends first,
// in order. qp.mu is held.
func (qp *QP) toError() {
	qp.attr.State = QPSErr
	if qp.timer != nil {
		qp.timer.Stop()
	}
	qp.flushSends()
	if qp.resp.inRecv {
		qp.resp.inRecv = false
		qp.completeRecv(&WC{WRID: qp.resp.wqe.wrid, Status: WCWRFlushErr, Opcode: WCRecv})
	}
	if qp.init.SRQ == nil {
		for w := qp.rq.peek(); w != nil; w = qp.rq.peek() {
			qp.completeRecv(&WC{WRID: w.wrid, Status: WCWRFlushErr, Opcode: WCRecv})
			qp.rq.head = (qp.rq.head + 1) % len(qp.rq.slots)
			qp.rq.n--
		}
	}
}

// reset empties the QP's queues without completions and forgets its
// transport state, as the RESET state asks. qp.mu is held.
func (qp *QP) reset() {
	if qp.timer != nil {
		qp.timer.Stop()
	}
	qp.rq.clear()
	qp.sq.clear()
	qp.req = requester{}
	qp.comp = completer{}
	qp.resp = responder{wqe: recvWQE{sges: qp.resp.wqe.sges[:0]}}
	qp.udPSN = 0
}
