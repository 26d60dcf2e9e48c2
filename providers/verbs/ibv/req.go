package ibv

import (
	"syscall"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// Requester limits (rxe's RXE_MAX_UNACKED_PSNS, and a tighter
// RXE_MAX_PKT_PER_ACK).
const (
	maxUnacked = 128 // PSNs a requester may have sent and not seen acknowledged
	minCwnd    = 8   // the smallest the window gets after losses
)

// A sendWQE is a posted RC send work request and its progress.
type sendWQE struct {
	wr       SendWR // SGList aliases sges (nil for inline data)
	sges     []SGE
	inline   []byte // the data of an inline request
	length   uint32 // the message's bytes
	signaled bool

	// Set when the requester starts the message, and again (to the same
	// values) when it resends it from its first packet.
	started     bool
	first, last uint32 // the PSNs the message uses
	// counted says a read or atomic request went out and counts in
	// requester.rdAtomic until it completes or is to be resent.
	counted bool
	// answered says a response to the read came: the responder executed
	// it, and it may be requested again in parts.
	answered bool
}

// A sendQueue is the ring of an RC QP's send work requests. Indices run
// free and wrap around 2^32; the slot of index i is i modulo the number
// of slots, a power of two (so that consecutive indices keep distinct
// slots across the wrap), of which the queue uses size.
type sendQueue struct {
	slots      []sendWQE
	size       uint32 // MaxSendWR: the requests the queue holds
	head, tail uint32 // the oldest incomplete request; the next free slot
}

// newSendQueue makes the queue's slots. A slot gets its SGE and inline
// arrays at its first post (of the QP's maximum sizes, kept from then on):
// a daemon holds thousands of QPs, most of which never use most of their
// slots, and untouched slots cost no page.
func newSendQueue(c QPCap) sendQueue {
	n := 1
	for n < int(c.MaxSendWR) {
		n <<= 1
	}
	return sendQueue{slots: make([]sendWQE, n), size: c.MaxSendWR}
}

func (q *sendQueue) at(i uint32) *sendWQE { return &q.slots[i&uint32(len(q.slots)-1)] }
func (q *sendQueue) full() bool           { return q.tail-q.head >= q.size }
func (q *sendQueue) clear()               { q.head, q.tail = 0, 0 }

// requester is the sending side of an RC QP: where in the send queue and
// in the PSN space it is.
type requester struct {
	idx      uint32 // the send queue index of the message being sent
	psn      uint32 // the PSN of the next packet to send
	fresh    bool   // the message at idx has not been started (its PSNs are not assigned)
	maxPSN   uint32 // one past the highest PSN sent
	rdAtomic int    // read and atomic requests out (counted)
	noAck    int    // packets sent since the last with the A bit
	cwnd     int    // packets that may be unacknowledged now (at most maxUnacked)
}

// startRequester readies the requester and completer at the send PSN
// (RTR -> RTS). qp.mu is held.
func (qp *QP) startRequester() {
	psn := qp.attr.SQPSN
	qp.req = requester{idx: qp.sq.head, psn: psn, fresh: true, maxPSN: psn, cwnd: maxUnacked}
	qp.comp = completer{psn: psn}
	qp.resetRetries()
}

// postRC queues an RC send work request, which checkSend accepted, and
// runs the requester. qp.mu is held.
func (qp *QP) postRC(wr *SendWR) error {
	q := &qp.sq
	if q.full() {
		return errorf(syscall.ENOMEM, "post send: the send queue holds %d requests already", q.size)
	}
	w := q.at(q.tail)
	// Field by field: storing the caller's SGList, even for a moment,
	// would make every caller's SGE array escape to the heap.
	w.wr = SendWR{WRID: wr.WRID, Opcode: wr.Opcode, Flags: wr.Flags, Imm: wr.Imm, RemoteAddr: wr.RemoteAddr,
		RKey: wr.RKey, CompareAdd: wr.CompareAdd, Swap: wr.Swap}
	if w.sges == nil {
		w.sges = make([]SGE, 0, qp.init.Cap.MaxSendSGE)
	}
	w.sges = append(w.sges[:0], wr.SGList...)
	w.wr.SGList = w.sges
	w.length = uint32(sgeTotal(wr.SGList))
	w.signaled = qp.init.SigAll || wr.Flags&SendSignaled != 0
	w.started, w.counted, w.answered = false, false, false
	w.inline = w.inline[:0]
	if wr.Flags&SendInline != 0 && w.length > 0 {
		d := qp.dev
		d.mrMu.RLock()
		b, ok := d.gather(qp.pd, wr.SGList, 0, int(w.length), qp.scratch)
		if ok {
			if w.inline == nil {
				w.inline = make([]byte, 0, qp.init.Cap.MaxInlineData)
			}
			w.inline = append(w.inline, b...)
		}
		d.mrMu.RUnlock()
		if !ok {
			return errorf(syscall.EINVAL, "post send: inline SGEs outside registered regions")
		}
		w.wr.SGList = nil
	}
	q.tail++
	qp.reqRun()
	return nil
}

// isReadAtomic reports whether op has a response other than an ACK.
func isReadAtomic(op WROpcode) bool { return op == WRRDMARead || isAtomic(op) }

// npsn is the number of PSNs a message of the opcode and length uses at
// the path MTU: one per packet, and for a read one per response packet.
func npsn(op WROpcode, length uint32, mtu int) uint32 {
	if isAtomic(op) || length == 0 {
		return 1
	}
	return (length + uint32(mtu) - 1) / uint32(mtu)
}

// window is the number of unacknowledged PSNs the requester may have.
func (qp *QP) window() int { return min(qp.req.cwnd, maxUnacked) }

// ackEvery is how many packets may go without the A bit: a quarter of
// the window, so that ACKs keep it open, between 2 and 16 (rxe's
// RXE_MAX_PKT_PER_ACK is 64).
func (qp *QP) ackEvery() int { return max(2, min(16, qp.window()/4)) }

// reqRun sends packets of the send queue while the state, the window,
// fences and the read/atomic limit allow. It is called wherever one of
// them may have changed: a post, an ACK, a timer, a modify. qp.mu is
// held.
func (qp *QP) reqRun() {
	r, q := &qp.req, &qp.sq
	for r.idx != q.tail && !qp.comp.rnrWait {
		st := qp.attr.State
		if st != QPSRTS && st != QPSSQD {
			return
		}
		w := q.at(r.idx)
		if r.fresh {
			if st == QPSSQD {
				return // a drained send queue starts no new message
			}
			if w.wr.Flags&SendFence != 0 && r.rdAtomic > 0 {
				return // a fence waits for the reads and atomics before it
			}
			if isReadAtomic(w.wr.Opcode) && r.rdAtomic >= int(qp.attr.MaxRdAtomic) && qp.attr.MaxRdAtomic > 0 {
				return
			}
			if status := qp.checkLocal(w); status != WCSuccess {
				if q.head == r.idx {
					qp.failHead(status)
				}
				return // fails once the messages before it complete
			}
			w.started = true
			w.first = r.psn
			w.last = roce.PSNAdd(r.psn, int(npsn(w.wr.Opcode, w.length, qp.attr.PathMTU.Bytes()))-1)
			r.fresh = false
		}
		// r.psn is never behind comp.psn; a negative difference is the
		// 2^23 PSNs of a 2 GiB read at MTU 256: the window is full.
		if d := roce.PSNDiff(r.psn, qp.comp.psn); d < 0 || int(d) >= qp.window() {
			return
		}
		if !qp.sendPacket(w) {
			if q.head == r.idx {
				qp.failHead(WCLocProtErr)
			}
			return
		}
	}
}

// checkLocal checks that a message's local buffers are registered regions
// of the QP's PD with the access it needs, and that a read or atomic may
// be issued at all. qp.mu is held.
func (qp *QP) checkLocal(w *sendWQE) WCStatus {
	if isReadAtomic(w.wr.Opcode) && qp.attr.MaxRdAtomic == 0 {
		return WCLocQPOpErr
	}
	need := Access(0)
	if isReadAtomic(w.wr.Opcode) {
		need = AccessLocalWrite
	}
	d := qp.dev
	d.mrMu.RLock()
	defer d.mrMu.RUnlock()
	for _, s := range w.wr.SGList {
		if s.Length == 0 {
			continue
		}
		if _, ok := d.sgeBytes(qp.pd, s, need); !ok {
			return WCLocProtErr
		}
	}
	return WCSuccess
}

// sendPacket sends the packet of message w at PSN qp.req.psn and moves
// the requester on. It returns false if the message's local memory is no
// longer there. qp.mu is held.
func (qp *QP) sendPacket(w *sendWQE) bool {
	r := &qp.req
	mtu := qp.attr.PathMTU.Bytes()
	k := int(roce.PSNDiff(r.psn, w.first)) // the packet's index in the message
	n := int(roce.PSNDiff(w.last, w.first)) + 1
	off := k * mtu
	p := roce.Packet{BTH: roce.BTH{PKey: roce.DefaultPKey, DestQP: qp.attr.DestQPNum, PSN: r.psn}}
	next := roce.PSNAdd(r.psn, 1)
	var payload []byte
	locked := false // holding d.mrMu while the payload is region memory
	d := qp.dev
	switch op := w.wr.Opcode; op {
	case WRRDMARead:
		// A read goes as one request. Resent once a response came (so
		// the responder executed the whole read and saved it), it goes
		// in parts of at most a window of PSNs, each a duplicate the
		// responder answers from the saved read: a loss then costs the
		// rest of a part, not the rest of the read.
		n := n - k
		if w.answered {
			n = min(n, qp.window())
		}
		p.Opcode = roce.RCRDMAReadRequest
		p.RETH = roce.RETH{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: uint32(min(n*mtu, int(w.length)-off))}
		p.AckReq = true
		next = roce.PSNAdd(r.psn, n)
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		p.Opcode = roce.RCFetchAdd
		p.AtomicETH = roce.AtomicETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: w.wr.CompareAdd}
		if op == WRAtomicCmpAndSwp {
			p.Opcode = roce.RCCompareSwap
			p.AtomicETH.SwapAdd, p.AtomicETH.Compare = w.wr.Swap, w.wr.CompareAdd
		}
		p.AckReq = true
	default:
		p.Opcode = dataOpcode(op, k, n)
		last := k == n-1
		if op == WRRDMAWrite || op == WRRDMAWriteWithImm {
			if k == 0 {
				p.RETH = roce.RETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
			}
		}
		if last && (op == WRSendWithImm || op == WRRDMAWriteWithImm) {
			p.ImmDt = w.wr.Imm
		}
		p.SE = last && w.wr.Flags&SendSolicited != 0 && op != WRRDMAWrite
		p.AckReq = last || r.noAck+1 >= qp.ackEvery() || int(roce.PSNDiff(next, qp.comp.psn)) >= qp.window()
		size := min(mtu, int(w.length)-off)
		if w.wr.SGList == nil {
			payload = w.inline[off : off+size]
		} else {
			d.mrMu.RLock()
			locked = true
			var ok bool
			if payload, ok = d.gather(qp.pd, w.wr.SGList, off, size, qp.scratch); !ok {
				d.mrMu.RUnlock()
				return false
			}
		}
	}
	p.Payload = payload
	if roce.PSNCompare(r.psn, r.maxPSN) < 0 {
		d.stats.retransmits.Add(1)
		if trace.On(trace.Retransmit) {
			qp.tracef(trace.Retransmit, "qpn %d retransmit %s psn %d", qp.qpn, p.Opcode, r.psn)
		}
	} else {
		qp.sentNew(r.psn, p.AckReq)
	}
	qp.transmit(&p, qp.dest, qp.attr.AH.TrafficClass)
	if locked {
		d.mrMu.RUnlock()
	}
	if p.AckReq {
		r.noAck = 0
	} else {
		r.noAck++
	}
	r.psn = next
	if roce.PSNCompare(next, r.maxPSN) > 0 {
		r.maxPSN = next
	}
	if roce.PSNCompare(next, w.last) > 0 {
		// The message is out: go on to the next.
		if isReadAtomic(w.wr.Opcode) && !w.counted {
			w.counted = true
			r.rdAtomic++
		}
		r.idx++
		r.fresh = true
	}
	qp.armTimer()
	return true
}

// dataOpcode is the opcode of packet k of the n packets of a send or
// write.
func dataOpcode(op WROpcode, k, n int) roce.Opcode {
	first, last := k == 0, k == n-1
	var o roce.Opcode
	switch {
	case first && last:
		o = roce.RCSendOnly
	case first:
		o = roce.RCSendFirst
	case last:
		o = roce.RCSendLast
	default:
		o = roce.RCSendMiddle
	}
	switch op {
	case WRSendWithImm:
		if last {
			o++ // SEND_LAST_WITH_IMMEDIATE, SEND_ONLY_WITH_IMMEDIATE
		}
	case WRRDMAWrite, WRRDMAWriteWithImm:
		o += roce.RCRDMAWriteFirst - roce.RCSendFirst
		if first && last {
			o = roce.RCRDMAWriteOnly
		}
		if last && op == WRRDMAWriteWithImm {
			o++ // WRITE_LAST_WITH_IMMEDIATE, WRITE_ONLY_WITH_IMMEDIATE
		}
	}
	return o
}

// seek moves the requester to PSN x, which lies in a message that was
// started or is the next to start: back for a retry, or forward past
// messages an ACK acknowledged while the requester was resending them.
// Reads and atomics it moves back over count as not sent. qp.mu is held.
func (qp *QP) seek(x uint32) {
	r, q := &qp.req, &qp.sq
	i := q.head
	for i != q.tail {
		w := q.at(i)
		if !w.started || roce.PSNCompare(x, w.last) <= 0 {
			break
		}
		i++
	}
	for j := i; int32(j-r.idx) < 0; j++ {
		if w := q.at(j); w.counted {
			w.counted = false
			r.rdAtomic--
		}
	}
	r.idx, r.psn = i, x
	r.fresh = i == q.tail || !q.at(i).started
}
