package rxm

import (
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Buffered receives (FI_BUFFERED_RECV in the endpoint's mode; fi_msg(3),
// "Buffered Receives"), as libfabric 1.17's rxm serves them
// (rxm_finish_buf_recv): every message and tagged message that arrives is
// kept by the endpoint and reported at once on the receive CQ, matched to
// no posted receive (core.BufferedEvents). The report's op_context is a
// claim key, fabricfs's struct fi_recv_context; its len is the message's
// size, and it carries the bytes the endpoint holds (an eager message's,
// the segments of a segmented one that came so far, and of a rendezvous
// request the first FI_OPT_BUFFERED_MIN, read from the sender before the
// report, which the reports behind it wait for), which core shows up to
// FI_OPT_BUFFERED_LIMIT, with FI_MORE when the message is longer. A receive with FI_CLAIM and the key
// (Op.Key, a ring request's rma_key) receives the message into its
// buffer, like any receive, and completes with its own op_context and
// FI_CLAIM; one with FI_DISCARD drops it. A key that holds no message
// fails the receive with fi.ENOMSG. Kept messages count against the
// unexpected limit, so a peer cannot fill the daemon faster than the
// application claims.

// bufferedKey marks the claim keys of buffered messages, apart from the
// keys applications choose for FI_PEEK|FI_CLAIM.
const bufferedKey = 1 << 63

// keep returns a copy of msg the matcher can hold: msg is its
// connection's, for the next message.
func keep(msg *message) *message {
	kept := *msg
	kept.payload = slices.Clone(msg.payload)
	if kept.sar != nil {
		kept.sar.msg = &kept // its later segments join the copy
	}
	return &kept
}

// buffer keeps msg under a new claim key and reports it (endpoint.mu
// held).
func (m *matcher) buffer(msg *message) {
	kept := keep(msg)
	m.nextKey++
	key := bufferedKey | m.nextKey
	if m.claimed == nil {
		m.claimed = make(map[uint64]*message)
	}
	m.claimed[key] = kept
	m.bytes += kept.cost()
	kind := core.OpRecv
	if msg.tagged {
		kind = core.OpTRecv
	}
	c := core.Completion{Flags: kind.CQFlags() | msg.flags, Len: msg.len(), Data: msg.data, Src: fi.SockAddr(msg.src), Key: key}
	if msg.tagged {
		c.Tag = msg.tag
	}
	p := &pendingReport{c: c, bytes: kept.payload, ready: true}
	// A segmented message's first segment has EagerLimit bytes, at least
	// any FI_OPT_BUFFERED_MIN.
	if kept.rndv != nil && m.bufferedMin > 0 && kept.size > 0 {
		// FI_OPT_BUFFERED_MIN: "When the FI_MORE bit is set, `buf' will
		// reference at least FI_OPT_BUFFERED_MIN bytes of data" (fi_msg(3)).
		// A rendezvous request carries none: the worker reads the first
		// ones from the sender first, as a claim would read them all,
		// but without the read-done, which would end the rendezvous.
		p.ready = false
		r := newRndvRecv(nil, make([]byte, min(m.bufferedMin, kept.size)), kept, core.Completion{})
		r.peek = p
		m.started = append(m.started, r)
	}
	m.reports = append(m.reports, p)
	m.flushReports()
}

// pendingReport is a buffered message's report, ready once its bytes are
// (a rendezvous message's first ones may still be read).
type pendingReport struct {
	c     core.Completion
	bytes []byte
	ready bool
}

// flushReports makes the reports that are ready, in order, up to the first
// that is not (endpoint.mu held).
func (m *matcher) flushReports() {
	for len(m.reports) > 0 && m.reports[0].ready {
		p := m.reports[0]
		m.reports[0] = nil
		m.reports = m.reports[1:]
		m.report(p.c, p.bytes)
	}
	if len(m.reports) == 0 {
		m.reports = nil
	}
}

// peeked ends the reads of a rendezvous message's first bytes, r: its
// report shows them (none if a read failed: the connection is ending, and
// a claim will fail too), and the reports behind it follow.
func (e *endpoint) peeked(r *rndvRecv) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.peek.ready = true
	if r.err == 0 {
		r.peek.bytes = r.buf
	}
	e.rx.flushReports()
}

// claims reports whether op takes a buffered message: a receive with
// FI_CLAIM or FI_DISCARD on an endpoint with FI_BUFFERED_RECV.
func (m *matcher) claims(op *core.Op) bool {
	return m.report != nil && op.Flags&(fi.CLAIM|fi.DISCARD) != 0 && op.Flags&fi.PEEK == 0
}
