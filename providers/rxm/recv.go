package rxm

import (
	"fmt"
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Receiving. Each connection keeps receives of bufSize bytes posted on
// its endpoint of the wrapped provider, bufsStart at first and one more
// with each message received, up to bufsPerConn; every message lands in
// one whole, is decoded here, and goes to the matcher, which copies it into
// the application's receive or keeps a copy as unexpected. The buffer is
// then reposted by the endpoint's worker, repostBatch at a time (a
// completion must not call back into the endpoint that completes it).
//
// Atomic requests and responses (atomic.go) are handled as they arrive;
// segments (sar.go) join the message they belong to.
//
// A message longer than bufSize (the tcp layer truncates it), a header
// that does not decode, a conn_id other than the index we announced to
// that peer, or a type fabricfs does not implement ends that connection,
// with the reason in the endpoint's err file.

// newBufs makes c's first receive buffers.
func (c *conn) newBufs() []*core.Op {
	ops := make([]*core.Op, bufsStart)
	for i := range ops {
		ops[i] = c.newBuf()
	}
	c.bufs = slices.Clone(ops)
	return ops
}

// newBuf makes one receive buffer of c.
func (c *conn) newBuf() *core.Op {
	op := &core.Op{Kind: core.OpRecv, Buf: make([]byte, bufSize)}
	op.OnComplete(c.received)
	return op
}

// received handles one message of c, in the buffer of op.
func (c *conn) received(op *core.Op, comp core.Completion) {
	e := c.ep
	switch comp.Err {
	case 0:
	case fi.ECANCELED:
		return // the connection is going down
	case fi.ETRUNC:
		e.protocolError(c, fmt.Errorf("a message of %d bytes, more than an eager message", comp.Len+comp.OLen))
		return
	default:
		return // the connection reports its own end
	}
	if comp.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		e.ev.Remote(core.Completion{Flags: comp.Flags, Len: comp.Len, Data: comp.Data, Key: comp.Key})
		c.reuse(op)
		return
	}
	m, err := c.decode(op.Buf[:comp.Len], comp)
	if err == nil && m != nil && m.readDone {
		err, m = e.readDoneArrived(c, m.id), nil
	}
	if err == nil && m != nil && m.atomic {
		if m.hdr.Type == wire.CtrlAtomicResp {
			err, m = e.atomicAnswered(c, &m.hdr, m.payload), nil
		} else if err = e.serveAtomic(c, &m.hdr, m.payload, op); err == nil {
			return // the response gives the buffer back
		}
	}
	if err != nil {
		e.protocolError(c, err)
		return
	}
	var fin func()
	e.mu.Lock()
	if m != nil {
		m.conn = c
		if m.hdr.Type == wire.CtrlSeg {
			fin, err = e.segmentArrived(c, m)
		} else {
			e.rx.arrived(m)
		}
	}
	if err != nil {
		e.mu.Unlock()
		e.protocolError(c, err)
		return
	}
	kick := c.reuseLocked(op)
	e.mu.Unlock()
	if fin != nil {
		fin()
	}
	if kick {
		e.wake()
	}
}

// reuse gives the receive buffer of op back to c, to be reposted.
func (c *conn) reuse(op *core.Op) {
	e := c.ep
	e.mu.Lock()
	kick := c.reuseLocked(op)
	e.mu.Unlock()
	if kick {
		e.wake()
	}
}

// reuseLocked is reuse with e.mu held, and adds a buffer while c has
// fewer than bufsPerConn; it reports whether the endpoint must be woken
// to repost.
func (c *conn) reuseLocked(op *core.Op) bool {
	c.carried, c.recent = true, true
	c.free = append(c.free, op)
	if len(c.bufs) < bufsPerConn {
		b := c.newBuf()
		c.bufs = append(c.bufs, b)
		c.free = append(c.free, b)
	}
	return len(c.free) >= min(repostBatch, len(c.bufs)) || len(c.ep.rx.started) > 0
}

// decode reads one message: a bare tagged message (the tcp layer reports
// its tag), or an rxm header and what follows. It returns nil for a
// message with nothing to deliver (credits).
func (c *conn) decode(b []byte, comp core.Completion) (*message, error) {
	// The connection's one message: its completions come one at a time,
	// and the matcher copies a message it keeps.
	m := &c.msg
	*m = message{src: c.peer.addr}
	if comp.Flags&fi.CQFlags(fi.TAGGED) != 0 {
		if len(b) > EagerLimit {
			return nil, fmt.Errorf("a tagged message of %d bytes, more than %d", len(b), EagerLimit)
		}
		m.tagged, m.tag, m.payload = true, comp.Tag, b
		if comp.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) != 0 {
			m.flags, m.data = fi.CQFlags(fi.REMOTE_CQ_DATA), comp.Data
		}
		return m, nil
	}
	var h wire.Header
	if err := h.Decode(b); err != nil {
		return nil, err
	}
	body, err := h.BodyLen(uint64(len(b)))
	if err != nil {
		return nil, err
	}
	if h.Type == wire.CtrlCredit {
		return nil, nil // flow control is off over tcp; libfabric ignores them too
	}
	if h.ConnID != uint64(c.peer.index) {
		return nil, fmt.Errorf("%s message with conn_id %d; we announced %d", h.Type, h.ConnID, c.peer.index)
	}
	switch h.Type {
	case wire.CtrlEager:
		m.payload = b[wire.HeaderSize:][:body]
	case wire.CtrlRndvReq:
		m.rndv, m.size, m.id = new(wire.RndvHeader), h.Size, h.MsgID
		if err := m.rndv.Decode(b[wire.HeaderSize:]); err != nil {
			return nil, err
		}
		if err := m.rndv.CheckSize(h.Size); err != nil {
			return nil, err
		}
	case wire.CtrlSeg:
		m.hdr, m.payload, m.size = h, b[wire.HeaderSize:][:body], h.Size
	case wire.CtrlRndvRdDone:
		*m = message{readDone: true, id: h.MsgID}
		return m, nil
	case wire.CtrlAtomic, wire.CtrlAtomicResp:
		*m = message{atomic: true, hdr: h, payload: b[wire.HeaderSize:][:body]}
		return m, nil
	default:
		return nil, fmt.Errorf("%s messages are not implemented", h.Type)
	}
	if h.Op == wire.OpTagged {
		m.tagged, m.tag = true, h.Tag
	}
	m.rx = h.RxIndex
	if h.Flags&wire.FlagRemoteCQData != 0 {
		m.flags, m.data = fi.CQFlags(fi.REMOTE_CQ_DATA), h.Data
	}
	return m, nil
}

// postRecv posts an application receive: it takes the first unexpected
// message it matches, or waits in the receive queue.
func (e *endpoint) postRecv(op *core.Op) error {
	e.mu.Lock()
	var err error
	wake := false
	switch {
	case e.state != epEnabled:
		err = core.Errorf(fi.EOPBADSTATE, "rxm: recv: endpoint is not enabled")
	case isMulti(op) && (op.Kind != core.OpRecv || op.Buf == nil):
		err = core.Errorf(fi.EINVAL, "rxm: FI_MULTI_RECV is for untagged receives with a buffer")
	case e.rx.posted() >= e.rxSize:
		err = fi.EAGAIN
	default:
		wake = e.rx.post(op) || len(e.rx.started) > 0
	}
	e.mu.Unlock()
	if wake {
		e.wake()
	}
	return err
}
