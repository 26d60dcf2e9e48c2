package rxm

import (
	"fmt"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Segmented messages (SAR), as libfabric 1.17's rxm sends them when its
// dynamic receive buffers are off (FI_OFI_RXM_ENABLE_DYN_RBUF=0): a
// message above EagerLimit and up to the sender's SAR limit (131072 by
// default) goes as segments, rxm header type 1 (docs/rxm.md 5.4). Every
// segment carries the whole message's size, op, tag, flags and data and
// the sender's msg_id; seg_no counts from 0, every segment but the last
// carries EagerLimit bytes, and ctrl_data says first, middle or last.
//
// Receiving, as rxm does it: the first segment is matched like an eager
// message (a receive, or the tail of the unexpected list), so a segmented
// message keeps its place in arrival order; the later ones are found by
// msg_id among the connection's messages being received, so segments of
// different messages may interleave on one connection. A matched message's
// segments go straight into the receive's buffer (the part beyond it is
// dropped: fi.ETRUNC with olen at the end, as rxm reports it) and the
// receive completes with the last segment. An unexpected one is kept as
// its segments come, each counting against the unexpected limit; a
// receive that takes it before the last segment gets what came so far and
// the rest as it comes. A segment that does not continue a message in
// progress as the rules above say ends the connection; so does a
// connection's end drop what it was receiving (a matched receive fails
// with the connection's error).
//
// fabricfs does not send segments: above EagerLimit it sends a
// rendezvous, which every 1.17 receiver takes whatever its dyn_rbuf
// setting, and which needs no copy.

// sarRecv is a segmented message of a connection being received, in
// conn.sar under its msg_id until its last segment. Guarded by
// endpoint.mu.
type sarRecv struct {
	hdr  wire.Header // the first segment's: the later ones must agree
	next uint32      // the seg_no expected next
	got  uint64      // the message's bytes received so far
	msg  *message    // while unexpected (or claimed): the kept message, whose payload grows

	// Matched to a receive (op non-nil), or dropped (op and msg nil).
	op    *core.Op
	buf   []byte     // where the bytes go: the receive's, at most the message's size
	multi *multiRecv // op's FI_MULTI_RECV state, or nil
	comp  core.Completion
}

// check reports whether h, a segment's header, continues s (nil: no
// message with h's msg_id is being received on the connection).
func (s *sarRecv) check(h *wire.Header) error {
	if h.Size <= EagerLimit {
		return fmt.Errorf("a segmented message of %d bytes; up to %d go as one eager message", h.Size, EagerLimit)
	}
	var got uint64
	switch {
	case s == nil && (h.SegType() != wire.SegFirst || h.SegNo != 0):
		return fmt.Errorf("segment %d (type %d) of msg_id %d, which is not a message being received", h.SegNo, h.SegType(), h.MsgID)
	case s == nil:
	case h.SegType() == wire.SegFirst:
		return fmt.Errorf("a first segment for msg_id %d, a message being received", h.MsgID)
	case h.SegNo != s.next:
		return fmt.Errorf("segment %d of msg_id %d; segment %d comes next", h.SegNo, h.MsgID, s.next)
	case h.Op != s.hdr.Op || h.Tag != s.hdr.Tag || h.Flags != s.hdr.Flags || h.Data != s.hdr.Data || h.Size != s.hdr.Size:
		return fmt.Errorf("segment %d of msg_id %d differs from the first in op, tag, flags, data or size", h.SegNo, h.MsgID)
	default:
		got = s.got
	}
	n, rest := uint64(h.SegSize), h.Size-got
	if h.SegType() == wire.SegLast {
		if n != rest {
			return fmt.Errorf("last segment %d of msg_id %d carries %d bytes; %d remain", h.SegNo, h.MsgID, n, rest)
		}
	} else if n != EagerLimit || n >= rest {
		return fmt.Errorf("segment %d of msg_id %d carries %d bytes with %d remaining; want %d and more to come",
			h.SegNo, h.MsgID, n, rest, EagerLimit)
	}
	return nil
}

// segmentArrived takes m, a segment of c (decode left its header in
// m.hdr and its bytes in m.payload), with e.mu held. A first segment is
// matched as a message; a later one is added to its message. It returns
// the completion to call without mu once a matched message is whole, or
// the reason to end c.
func (e *endpoint) segmentArrived(c *conn, m *message) (func(), error) {
	h := &m.hdr
	s := c.sar[h.MsgID]
	if err := s.check(h); err != nil {
		return nil, err
	}
	if s == nil {
		s = &sarRecv{hdr: *h, next: 1, got: uint64(len(m.payload))}
		if c.sar == nil {
			c.sar = make(map[uint64]*sarRecv)
		}
		c.sar[h.MsgID] = s
		m.sar = s
		e.rx.arrived(m)
		return nil, nil
	}
	off := s.got
	s.got += uint64(len(m.payload))
	s.next++
	switch {
	case s.msg != nil:
		s.msg.payload = append(s.msg.payload, m.payload...)
		e.rx.bytes += len(m.payload)
	case off < uint64(len(s.buf)):
		copy(s.buf[off:], m.payload)
	}
	if h.SegType() != wire.SegLast {
		return nil, nil
	}
	delete(c.sar, h.MsgID)
	switch {
	case s.msg != nil:
		s.msg.sar = nil // whole: an unexpected message like an eager one
	case s.op != nil:
		return s.finish(s.comp), nil
	}
	return nil, nil
}

// matched makes op's buffer buf (a part of it with FI_MULTI_RECV, whose
// state mr is) the destination of msg, s's message: what came so far is
// copied, the rest goes there as it comes. c is the receive's completion,
// without its length.
func (s *sarRecv) matched(op *core.Op, buf []byte, msg *message, mr *multiRecv, c core.Completion) {
	n := fitTo(&c, len(buf), msg.size)
	s.op, s.buf, s.multi, s.comp, s.msg = op, buf[:n], mr, c, nil
	copy(s.buf, msg.payload)
	if mr != nil {
		mr.reading++
	}
}

// finish returns the call that completes s's receive with c; with
// FI_MULTI_RECV its state is updated at once (mu held) and the release
// waits for the other parts being received (multiRecv.partDone).
func (s *sarRecv) finish(c core.Completion) func() {
	op := s.op
	if s.multi == nil {
		return func() { op.Complete(c) }
	}
	now := s.multi.partDone(c)
	return func() {
		for _, c := range now {
			op.Complete(c)
		}
	}
}

// sarGoneLocked drops the segmented messages c was receiving: matched
// receives fail with code. The unexpected ones are the matcher's
// (matcher.dropConn).
func (e *endpoint) sarGoneLocked(c *conn, code fi.Errno) []func() {
	var fins []func()
	for _, s := range c.sar {
		if s.op != nil {
			fins = append(fins, s.finish(core.Completion{Flags: s.comp.Flags, Offset: s.comp.Offset, Err: code}))
		}
	}
	c.sar = nil
	return fins
}

// fitTo sets c's length for a message of size bytes received into room
// bytes, with fi.ETRUNC and olen the rest if it is longer, and returns
// that length.
func fitTo(c *core.Completion, room int, size uint64) uint64 {
	n := min(uint64(room), size)
	c.Len = n
	if rest := size - n; rest > 0 {
		c.Err, c.OLen = fi.ETRUNC, rest
	}
	return n
}
