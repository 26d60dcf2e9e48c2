package ibv

import (
	"time"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// timers is the time-keeping of an RC requester, in its completer. One
// time.Timer per QP serves three purposes:
//
//   - the local ACK timeout (4.096 us * 2^timeout, none for timeout 0):
//     with no PSN acknowledged for that long the requester resends from
//     the oldest unacknowledged PSN and spends one of retry_cnt retries;
//     with none left the oldest request completes with
//     IBV_WC_RETRY_EXC_ERR;
//   - the tail-loss probe: after a few round trips without progress
//     (4 times the smoothed RTT, at least 200 us, doubling while nothing
//     moves, never beyond the timeout) the requester resends from the
//     oldest unacknowledged PSN without spending a retry. It recovers
//     the losses no later packet reveals (the last packets before the
//     window closes, a lost NAK) long before the timeout would. The
//     device shares the host's CPUs with its users: an ACK is often late
//     because a receive goroutine waited for a CPU, not lost. A probe
//     that comes due while datagrams wait in the device's socket (the
//     ACK may be among them) waits one more interval, once per
//     progress;
//   - the end of an RNR wait.
type timers struct {
	deadline time.Time // the local ACK timeout, or the end of an RNR wait
	probeAt  time.Time // the next tail-loss probe
	probes   uint      // probes since the last progress
	held     bool      // a probe waited for queued datagrams since the last progress
	armed    bool      // the timer is set
	rnrWait  bool      // waiting after an RNR NAK: the requester sends nothing

	// The smoothed round trip time, sampled on one A-bit packet at a
	// time, never across a go-back (its ACKs are ambiguous).
	srtt   time.Duration
	rttOn  bool
	rttPSN uint32
	rttAt  time.Time
}

// minProbe is the shortest tail-loss probe interval.
const minProbe = 200 * time.Microsecond

// timeout is the QP's local ACK timeout; 0 means none.
func (qp *QP) timeout() time.Duration {
	d, _ := roce.RetransmitTimeout(qp.attr.Timeout)
	return d
}

// probeInterval is how long the requester waits without progress before
// a probe.
func (qp *QP) probeInterval() time.Duration {
	c := &qp.comp
	d := time.Millisecond
	if c.srtt > 0 {
		d = max(4*c.srtt, minProbe)
	}
	return min(d<<min(c.probes, 8), qp.timeout())
}

// sentNew notes a packet sent for the first time at PSN psn: the timers
// start if nothing was outstanding before it, and an A-bit packet may
// start a round trip sample. qp.mu is held.
func (qp *QP) sentNew(psn uint32, ackReq bool) {
	c := &qp.comp
	var now time.Time
	if qp.req.maxPSN == c.psn {
		now = time.Now()
		c.deadline = now.Add(qp.timeout())
		c.probeAt = now.Add(qp.probeInterval())
	}
	if ackReq && !c.rttOn {
		if now.IsZero() {
			now = time.Now()
		}
		c.rttOn, c.rttPSN, c.rttAt = true, psn, now
	}
}

// progressTimers restarts the timeout and the probe after an
// acknowledgement, and takes a round trip sample if it acknowledged the
// timed packet. qp.mu is held.
func (qp *QP) progressTimers() {
	c := &qp.comp
	now := time.Now()
	if c.rttOn && roce.PSNCompare(c.psn, c.rttPSN) > 0 {
		c.rttOn = false
		if sample := now.Sub(c.rttAt); c.srtt == 0 {
			c.srtt = sample
		} else {
			c.srtt += (sample - c.srtt) / 8
		}
	}
	c.probes, c.held = 0, false
	c.deadline = now.Add(qp.timeout())
	c.probeAt = now.Add(qp.probeInterval())
}

// rnrWait stops the requester for d after an RNR NAK. qp.mu is held.
func (qp *QP) rnrWait(d time.Duration) {
	c := &qp.comp
	c.rnrWait = true
	c.deadline = time.Now().Add(d)
	c.armed = true
	qp.setTimer(d)
}

// armTimer sets the timer for the next deadline, if it is not set and
// there is one. qp.mu is held.
func (qp *QP) armTimer() {
	c := &qp.comp
	if c.armed {
		return
	}
	at := c.deadline
	if !c.rnrWait {
		if !qp.outstanding() || qp.timeout() == 0 {
			return
		}
		if c.probeAt.Before(at) {
			at = c.probeAt
		}
	}
	c.armed = true
	qp.setTimer(time.Until(at))
}

// setTimer has the QP's timer fire after d, making it the first time: a
// QP that never waits for its peer (a connection refused before it sent)
// never has one. qp.mu is held.
func (qp *QP) setTimer(d time.Duration) {
	if qp.timer == nil {
		qp.timer = time.AfterFunc(d, qp.onTimer)
		return
	}
	qp.timer.Reset(d)
}

// onTimer runs when the QP's timer fires, and does what is due: the end
// of an RNR wait (the requester resends the message the RNR NAK was
// for), a timeout, or a probe. It sets the timer again for what is next.
func (qp *QP) onTimer() {
	qp.mu.Lock()
	defer qp.unlock()
	c := &qp.comp
	c.armed = false
	if qp.dead || (qp.attr.State != QPSRTS && qp.attr.State != QPSSQD) {
		return
	}
	now := time.Now()
	switch {
	case c.rnrWait:
		if now.Before(c.deadline) {
			break
		}
		c.rnrWait = false
		c.deadline = now.Add(qp.timeout())
		c.probeAt = now.Add(qp.probeInterval())
		qp.reqRun()
	case !qp.outstanding():
		return
	case !now.Before(c.deadline):
		qp.dev.stats.timeouts.Add(1)
		if trace.On(trace.Retransmit) {
			qp.tracef(trace.Retransmit, "qpn %d timeout at psn %d, %d retries left", qp.qpn, c.psn, c.retries)
		}
		if c.retries == 0 {
			qp.failHead(WCRetryExcErr)
			return
		}
		c.retries--
		qp.retry(c.psn, true)
		c.deadline = now.Add(qp.timeout())
		c.probeAt = now.Add(qp.probeInterval())
		qp.reqRun()
	case !now.Before(c.probeAt) && !c.held && qp.dev.queued():
		// Datagrams wait in the socket: the ACK may be among them, the
		// receive goroutine has not run yet. Probe one interval later.
		c.held = true
		c.probeAt = now.Add(qp.probeInterval())
	case !now.Before(c.probeAt):
		qp.dev.stats.probes.Add(1)
		c.probes++
		qp.retry(c.psn, false)
		c.probeAt = now.Add(qp.probeInterval())
		qp.reqRun()
	}
	qp.armTimer()
}
