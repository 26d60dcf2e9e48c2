package ibv

import (
	"encoding/binary"
	"net/netip"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// completer is the acknowledging side of an RC QP's send queue: which PSN
// is the oldest not acknowledged, the retry budget, the timer.
type completer struct {
	psn        uint32 // the oldest PSN not acknowledged
	retries    uint8  // timeouts left before IBV_WC_RETRY_EXC_ERR
	rnrRetries uint8  // RNR NAKs left before IBV_WC_RNR_RETRY_EXC_ERR (7: no limit)
	recover    uint32 // the PSN of the last go-back: the window halves for a loss after it
	// After a go-back for a lost response (backOn: since the last
	// progress), responses to what the old round sent keep arriving,
	// with rising PSNs, and look like more losses. sigMax is the highest
	// PSN of such a signal; one well below it comes from the resent
	// round, whose first packet was lost again (see restarted).
	backOn bool
	sigMax uint32

	timers
}

// resetRetries restores the retry budgets; the requester made progress.
// qp.mu is held.
func (qp *QP) resetRetries() {
	qp.comp.retries = qp.attr.RetryCnt
	qp.comp.rnrRetries = qp.attr.RNRRetry
}

// outstanding reports whether packets were sent and not acknowledged.
func (qp *QP) outstanding() bool { return qp.comp.psn != qp.req.maxPSN }

// retry makes the requester resend from PSN x after a loss: a sequence
// NAK, an implied NAK or a timeout. The window shrinks: halved for each
// loss after the last go-back's PSN, to its minimum after a timeout; it
// grows back by a packet per acknowledgement. qp.mu is held.
func (qp *QP) retry(x uint32, timeout bool) {
	r, c := &qp.req, &qp.comp
	qp.seek(x)
	c.backOn, c.rttOn = false, false
	switch {
	case timeout:
		r.cwnd = minCwnd
	case roce.PSNCompare(x, c.recover) > 0:
		r.cwnd = max(r.cwnd/2, minCwnd)
	}
	c.recover = x
}

// impliedNAK handles a response with PSN y past a read or atomic whose own
// response has not come: that response was lost, and the requester
// resends from the oldest unacknowledged PSN, unless y is a late response
// to what it sent before its last such go-back. qp.mu is held.
func (qp *QP) impliedNAK(y uint32) {
	c := &qp.comp
	if c.backOn && !restarted(y, c.psn, c.sigMax) {
		if roce.PSNCompare(y, c.sigMax) > 0 {
			c.sigMax = y
		}
		return
	}
	qp.retry(c.psn, false)
	c.backOn, c.sigMax = true, y
}

// inputResponse is the completer's handling of an ACK, NAK, read
// response or atomic ACK for an outstanding PSN; anything else is a late
// duplicate and dropped.
func (qp *QP) inputResponse(p *roce.Packet, src netip.AddrPort) {
	qp.mu.Lock()
	defer qp.unlock()
	st := qp.attr.State
	if qp.dead || (st != QPSRTS && st != QPSSQD) || src != qp.dest {
		qp.dev.stats.dropped.Add(1)
		return
	}
	qp.heard.Add(1)
	if roce.PSNCompare(p.PSN, qp.req.maxPSN) >= 0 || roce.PSNCompare(p.PSN, qp.comp.psn) < 0 {
		return
	}
	switch p.Opcode {
	case roce.RCAcknowledge:
		qp.onAck(p)
	case roce.RCAtomicAcknowledge:
		qp.onAtomicAck(p)
	default:
		qp.onReadResponse(p)
	}
	qp.reqRun()
	qp.armTimer()
}

// onAck handles an ACK or NAK. qp.mu is held.
func (qp *QP) onAck(p *roce.Packet) {
	c, psn, syn := &qp.comp, p.PSN, p.AETH.Syndrome
	if syn.Kind() == roce.AETHAck {
		qp.ackTo(psn, true)
		return
	}
	// A NAK acknowledges every PSN before its own.
	qp.ackTo(roce.PSNAdd(psn, -1), true)
	if psn != c.psn || qp.attr.State == QPSErr {
		return
	}
	switch {
	case syn.Kind() == roce.AETHRNRNAK:
		qp.dev.stats.rnrRcvd.Add(1)
		if trace.On(trace.Retransmit) {
			qp.tracef(trace.Retransmit, "qpn %d RNR NAK received for psn %d", qp.qpn, psn)
		}
		if c.rnrRetries == 0 {
			qp.failHead(WCRNRRetryExcErr)
			return
		}
		if c.rnrRetries != 7 {
			c.rnrRetries--
		}
		wait, _ := roce.RNRTimer(syn.Value())
		qp.seek(psn)
		qp.rnrWait(wait)
	case syn == roce.AETHNAKPSNSeqError:
		qp.dev.stats.naksRcvd.Add(1)
		if trace.On(trace.Retransmit) {
			qp.tracef(trace.Retransmit, "qpn %d sequence NAK received: resend from psn %d", qp.qpn, psn)
		}
		if qp.req.psn != psn {
			qp.retry(psn, false)
		}
	case syn == roce.AETHNAKInvalidReq:
		qp.failHead(WCRemInvReqErr)
	case syn == roce.AETHNAKRemAccErr:
		qp.failHead(WCRemAccessErr)
	case syn == roce.AETHNAKRemOpErr:
		qp.failHead(WCRemOpErr)
	default:
		qp.failHead(WCBadRespErr)
	}
}

// ackTo acknowledges every PSN up to psn: sends and writes that end there
// or before complete, in order. A read or atomic whose PSNs it covers had
// its response lost (an implied NAK): if implied is set, the requester
// resends from it. qp.mu is held.
func (qp *QP) ackTo(psn uint32, implied bool) {
	c, q := &qp.comp, &qp.sq
	progress := false
	for q.head != q.tail && qp.attr.State != QPSErr {
		w := q.at(q.head)
		if !w.started || roce.PSNCompare(psn, w.first) < 0 {
			break
		}
		if isReadAtomic(w.wr.Opcode) {
			if implied {
				qp.impliedNAK(psn)
			}
			break
		}
		if roce.PSNCompare(psn, w.last) < 0 {
			if roce.PSNCompare(psn, c.psn) >= 0 {
				c.psn = roce.PSNAdd(psn, 1)
				progress = true
			}
			break
		}
		c.psn = roce.PSNAdd(w.last, 1)
		progress = true
		qp.completeHead(WCSuccess)
	}
	if progress {
		qp.onProgress()
	}
}

// onProgress notes that PSNs were acknowledged: the retry budgets are
// whole again, the timers restart, the window grows, and a requester
// resending PSNs now acknowledged skips them. qp.mu is held.
func (qp *QP) onProgress() {
	c, r := &qp.comp, &qp.req
	qp.resetRetries()
	c.backOn = false
	qp.progressTimers()
	if r.cwnd < maxUnacked {
		r.cwnd++
	}
	if roce.PSNCompare(c.psn, r.psn) > 0 {
		qp.seek(c.psn)
	}
}

// onReadResponse places a read response's payload in the read's local
// buffers. Responses come in PSN order; a gap means some were lost, and
// the read is requested again from the first missing PSN. qp.mu is held.
func (qp *QP) onReadResponse(p *roce.Packet) {
	c, psn := &qp.comp, p.PSN
	w := qp.responseTo(psn, WRRDMARead)
	if w == nil {
		return
	}
	w.answered = true
	if psn != c.psn {
		qp.ackTo(psn, true) // an implied NAK for the missing responses
		return
	}
	mtu := qp.attr.PathMTU.Bytes()
	off := int(roce.PSNDiff(psn, w.first)) * mtu
	// A read resent in parts (see sendPacket) has responses FIRST to
	// LAST per part: only the length says where a response belongs.
	if len(p.Payload) != min(mtu, int(w.length)-off) {
		qp.failHead(WCBadRespErr)
		return
	}
	d := qp.dev
	d.mrMu.RLock()
	st := d.scatter(qp.pd, w.wr.SGList, off, p.Payload)
	d.mrMu.RUnlock()
	if st != WCSuccess {
		qp.failHead(WCLocProtErr)
		return
	}
	c.psn = roce.PSNAdd(psn, 1)
	if psn == w.last {
		qp.completeHead(WCSuccess)
	}
	qp.onProgress()
}

// onAtomicAck places an atomic's original remote value in its local 8
// bytes (in host order, as the remote memory holds it). qp.mu is held.
func (qp *QP) onAtomicAck(p *roce.Packet) {
	w := qp.responseTo(p.PSN, WRAtomicFetchAndAdd)
	if w == nil || p.PSN != qp.comp.psn {
		return
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], p.AtomicAck)
	d := qp.dev
	d.mrMu.RLock()
	st := d.scatter(qp.pd, w.wr.SGList, 0, b[:])
	d.mrMu.RUnlock()
	if st != WCSuccess {
		qp.failHead(WCLocProtErr)
		return
	}
	qp.comp.psn = roce.PSNAdd(p.PSN, 1)
	qp.completeHead(WCSuccess)
	qp.onProgress()
}

// responseTo acknowledges the sends and writes before a read response or
// atomic ACK with PSN psn and returns the request it answers: the oldest
// one, if it is a read (want WRRDMARead) or an atomic (otherwise) whose
// PSNs hold psn. A response past the oldest read or atomic means its own
// response was lost (an implied NAK). qp.mu is held.
func (qp *QP) responseTo(psn uint32, want WROpcode) *sendWQE {
	q := &qp.sq
	qp.ackTo(roce.PSNAdd(psn, -1), false)
	if q.head == q.tail || qp.attr.State == QPSErr {
		return nil
	}
	w := q.at(q.head)
	if !w.started || (w.wr.Opcode == WRRDMARead) != (want == WRRDMARead) || !isReadAtomic(w.wr.Opcode) ||
		roce.PSNCompare(psn, w.first) < 0 || roce.PSNCompare(psn, w.last) > 0 {
		if w.started && isReadAtomic(w.wr.Opcode) && roce.PSNCompare(psn, w.last) > 0 {
			qp.ackTo(psn, true)
		}
		return nil
	}
	return w
}

// completeHead completes the oldest send work request with status: a
// completion if it failed or is signaled. qp.mu is held.
func (qp *QP) completeHead(status WCStatus) {
	q := &qp.sq
	w := q.at(q.head)
	if w.counted {
		w.counted = false
		qp.req.rdAtomic--
	}
	if status != WCSuccess || w.signaled {
		wc := WC{WRID: w.wr.WRID, Status: status, Opcode: sendOpcode(w.wr.Opcode)}
		if status == WCSuccess {
			wc.ByteLen = w.length
		}
		qp.completeSend(&wc)
	}
	w.started = false
	q.head++
	if int32(qp.req.idx-q.head) < 0 {
		qp.req.idx = q.head
		qp.req.fresh = q.head == q.tail || !q.at(q.head).started
	}
}

// failHead completes the oldest send work request with an error status
// and moves the QP to the error state. qp.mu is held.
func (qp *QP) failHead(status WCStatus) {
	if qp.sq.head != qp.sq.tail {
		qp.completeHead(status)
	}
	qp.toError()
}

// flushSends completes every queued send work request with
// IBV_WC_WR_FLUSH_ERR, oldest first. qp.mu is held.
func (qp *QP) flushSends() {
	q := &qp.sq
	for ; q.head != q.tail; q.head++ {
		w := q.at(q.head)
		w.started, w.counted = false, false
		qp.completeSend(&WC{WRID: w.wr.WRID, Status: WCWRFlushErr, Opcode: sendOpcode(w.wr.Opcode)})
	}
	qp.req.idx, qp.req.fresh, qp.req.rdAtomic = q.head, true, 0
	qp.comp.rnrWait = false
}
