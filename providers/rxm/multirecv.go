package rxm

import (
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// FI_MULTI_RECV, as libfabric 1.17's rxm does it (rxm_msg.c
// rxm_post_mrecv, rxm_cq.c rxm_adjust_multi_recv): an untagged receive
// whose buffer takes message after message, from any sender.
//
//   - A message that arrives for it takes the next len(message) bytes when
//     they fit and at least min_multi_recv bytes would be left; its
//     completion is a plain one (with its place in the buffer), and the
//     receive goes to the head of the queue. Otherwise the message takes
//     the rest of the buffer (truncated if longer), and its completion,
//     with FI_MULTI_RECV, releases the buffer.
//   - Posted while unexpected messages wait, it takes them in order, each
//     into the next min(len, left) bytes (plain completions, truncated if
//     longer), while at least min_multi_recv bytes are left; if fewer are
//     left, a completion of its own with FI_MULTI_RECV only (length 0)
//     releases the buffer; otherwise it is queued.
//   - min_multi_recv is FI_OPT_MIN_MULTI_RECV, 16384 (rxm's buffer size)
//     unless set, read at each decision.
//
// A rendezvous message placed in the buffer completes when read, and a
// segmented one when its last segment is in, possibly after messages that
// follow it; the release waits for every one of them (libfabric does not
// wait for a rendezvous: its release may come first).

// multiRecv is the state of a receive with FI_MULTI_RECV. Guarded by
// endpoint.mu.
type multiRecv struct {
	off     int              // bytes of the buffer given to messages
	reading int              // rendezvous or segmented messages being received into it
	held    *core.Completion // the release, waiting for reading to reach 0
}

// isMulti reports whether op is a receive with FI_MULTI_RECV.
func isMulti(op *core.Op) bool { return op.Flags&fi.OpFlags(fi.MULTI_RECV) != 0 }

// release completes op with c, which releases its buffer, unless messages
// are still being read into the buffer: then the last of them does.
func (mr *multiRecv) release(op *core.Op, c core.Completion) {
	if mr.reading > 0 {
		mr.held = &c
		return
	}
	op.Complete(c)
}

// partDone is the completion c of a message whose bytes came after it was
// placed in the buffer (a rendezvous read, a segmented message): it
// returns the completions to give now, in order, holding the release
// (c with FI_MULTI_RECV) until the last such message is in.
func (mr *multiRecv) partDone(c core.Completion) []core.Completion {
	mr.reading--
	switch {
	case c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0 && mr.reading > 0:
		mr.held = &c // the release waits for the others
		return nil
	case mr.reading == 0 && mr.held != nil:
		now := []core.Completion{c, *mr.held}
		mr.held = nil
		return now
	}
	return []core.Completion{c}
}

// arrivedMulti places msg in op's buffer (op, matched, is off its queue).
func (m *matcher) arrivedMulti(op *core.Op, mr *multiRecv, msg *message) {
	off, left, n := mr.off, uint64(len(op.Buf)-mr.off), msg.len()
	if n <= left && left-n >= m.minMulti {
		mr.off += int(n)
		m.recvs[0] = slices.Insert(m.recvs[0], 0, op)
		m.deliver(op, msg, op.Buf[off:mr.off], off, mr, false)
		return
	}
	delete(m.multi, op)
	mr.off = len(op.Buf)
	m.deliver(op, msg, op.Buf[off:], off, mr, true)
}

// postMulti posts a receive with FI_MULTI_RECV: it takes the unexpected
// untagged messages while enough room is left, then is released or
// queued. It reports whether that brought the unexpected bytes back under
// the limit.
func (m *matcher) postMulti(op *core.Op) bool {
	mr := &multiRecv{}
	was := m.over()
	for len(m.unexp[0]) > 0 {
		msg := m.unexp[0][0]
		m.unexp[0] = slices.Delete(m.unexp[0], 0, 1)
		m.bytes -= msg.cost()
		off := mr.off
		mr.off += int(min(msg.len(), uint64(len(op.Buf)-off)))
		m.deliver(op, msg, op.Buf[off:mr.off], off, mr, false)
		if uint64(len(op.Buf)-mr.off) < m.minMulti {
			mr.release(op, core.Completion{Flags: fi.CQFlags(fi.MULTI_RECV), Offset: uint64(mr.off)})
			return was && !m.over()
		}
	}
	m.multi[op] = mr
	m.recvs[0] = append(m.recvs[0], op)
	return was && !m.over()
}
