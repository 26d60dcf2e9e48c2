package rxm

import (
	"net/netip"
	"sync"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Sending. Every message, tagged or not, is an rxm eager message: the
// 64-byte rxm header (op msg or tagged, the tag, remote CQ data) and the
// payload, in one tcp message (docs/rxm.md 5.1, 5.2: the header form of
// tagged messages is the one every 1.17 peer takes). The payload is copied
// behind the header at Post, so every send is also an inject.
//
// Messages above EagerLimit go by the read rendezvous (rndv.go): the
// message is the request, and the application's buffer is read by the
// peer, so it must stay untouched until the send completes.

// sendItem is one application send: its message (header and payload, or
// header and rendezvous header) and the operation of the wrapped provider
// that carries it; or one application RMA operation (rma.go).
type sendItem struct {
	op     *core.Op // the application's
	hdr    wire.Header
	buf    *[]byte // pooled: the header's room, then the payload or rendezvous header
	msg    core.Op // posted to the connection
	rndv   *rndvSend
	atomic *atomicSend // an atomic: msg is its request (atomic.go)
	rma    bool        // an fi_write or fi_read: msg is the operation itself, without rxm header
	conn   *conn       // the connection msg was posted on, until it completes: counted in its sends

	ep   *endpoint
	done func(*core.Op, core.Completion) // msg's: sendDone of the item, made once per item
}

// itemPool holds the items of eager sends and RMA operations that
// completed, so that a send allocates nothing. (The items of rendezvous
// sends and atomics are finished by rndvSent and atomicSent and not
// reused.)
var itemPool = sync.Pool{New: func() any { return new(sendItem) }}

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, wire.HeaderSize+EagerLimit)
	return &b
}}

// free returns the item's buffer.
func (it *sendItem) free() {
	if it.buf != nil {
		bufPool.Put(it.buf)
		it.buf = nil
	}
}

func (e *endpoint) postSend(op *core.Op) error {
	n := len(op.Buf)
	switch {
	case op.Flags&fi.INJECT != 0 && n > e.inject:
		return core.Errorf(fi.EINVAL, "rxm: inject of %d bytes; inject_size is %d", n, e.inject)
	case !op.Peer.IP.Addr().IsValid() || op.Peer.IP.Port() == 0:
		return core.Errorf(fi.EINVAL, "rxm: send without a destination address")
	}
	it := itemPool.Get().(*sendItem)
	it.op, it.buf = op, bufPool.Get().(*[]byte)
	wop := wire.OpMsg
	if op.Kind == core.OpTSend {
		wop = wire.OpTagged
	}
	var flags wire.Flags
	if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
		flags = wire.FlagRemoteCQData
	}
	if n > EagerLimit {
		it.rndv = &rndvSend{}
		if err := e.exposeRndv(it); err != nil {
			it.free()
			return err
		}
		it.hdr = wire.RndvReq(0, 0, wop, uint64(n), flags, op.Data, op.Tag)
		it.msg = core.Op{Kind: core.OpSend, Buf: (*it.buf)[:wire.HeaderSize+wire.RndvHeaderSize]}
	} else {
		it.hdr = wire.Eager(0, wop, uint64(n), flags, op.Data, op.Tag)
		copy((*it.buf)[wire.HeaderSize:], op.Buf)
		it.msg = core.Op{Kind: core.OpSend, Buf: (*it.buf)[:wire.HeaderSize+n]}
	}
	it.hdr.RxIndex = op.RxCtx // the peer's receive context: a scalable endpoint's (fi_rx_addr), else 0
	return e.enqueue(it, "send")
}

// enqueue queues the item of an application send or RMA operation for
// its peer's connection, connecting to the peer if it has none, and posts
// it at once if the connection is up. The item's buffer is freed if it
// fails.
func (e *endpoint) enqueue(it *sendItem, what string) error {
	op := it.op
	n := len(op.Buf)
	if it.done == nil {
		it.done = func(_ *core.Op, c core.Completion) { it.ep.sendDone(it, c) }
	}
	it.ep = e
	it.msg.OnComplete(it.done)
	addr := canon(op.Peer.IP)
	e.mu.Lock()
	var err error
	var p *peer
	switch {
	case e.state != epEnabled:
		err = core.Errorf(fi.EOPBADSTATE, "rxm: %s: endpoint is not enabled", what)
	case e.txOut >= e.txSize:
		err = fi.EAGAIN
	default:
		p, err = e.peerLocked(addr, netip.AddrPort{})
	}
	if err != nil {
		e.mu.Unlock()
		it.rndv.unexpose()
		it.free()
		return err
	}
	e.txOut++
	if it.rndv != nil {
		it.rndv.id = newIDLocked(e.rndvSends, &e.rndvNext)
		it.hdr.MsgID = it.rndv.id
		rh := wire.RndvHeader{Count: 1}
		rh.Iov[0] = wire.RMAIov{Addr: 0, Len: uint64(n), Key: it.rndv.key()}
		rh.Encode((*it.buf)[wire.HeaderSize:])
		e.rndvSends[it.rndv.id] = it
	}
	if it.atomic != nil {
		it.atomic.id = newIDLocked(e.atomics, &e.atomNext)
		it.hdr.MsgID = it.atomic.id
		e.atomics[it.atomic.id] = it
	}
	p.queue = append(p.queue, it)
	if p.state == pIdle {
		e.connectLocked(p)
	}
	up := p.state == pConnected
	hold := up && op.Flags&fi.MORE != 0
	p.waiting = hold
	if hold && !p.held {
		p.held = true
		e.held = append(e.held, p)
	}
	e.mu.Unlock()
	if up && !hold {
		e.flush(p)
	}
	return nil
}

// Flush posts the sends held since the last flush: those posted with
// fi.MORE, which the engine posts a pass of before it flushes
// (core.Flusher). Each peer's go to its connection together.
func (e *endpoint) Flush() {
	e.mu.Lock()
	// The two slices take turns, as a peer's queue and spare do.
	held := e.held
	e.held, e.heldSpare = e.heldSpare[:0], nil
	for _, p := range held {
		p.held, p.waiting = false, false
	}
	e.mu.Unlock()
	for _, p := range held {
		e.flush(p)
	}
	clear(held)
	e.mu.Lock()
	if e.heldSpare == nil {
		e.heldSpare = held[:0]
	}
	e.mu.Unlock()
}

// newIDLocked picks a msg_id for an operation that waits for the peer's
// answer (a rendezvous send, an atomic): the next value of the counter
// next below bit 31 that is not a key of used.
func newIDLocked[V any](used map[uint64]V, next *uint64) uint64 {
	for {
		id := *next % wire.KeyProvSpecific
		*next++
		if _, ok := used[id]; !ok {
			return id
		}
	}
}

// flush posts p's queued sends to its connection, in order. One goroutine
// at a time does it for a peer; sends queued meanwhile are taken by it,
// unless the newest came with fi.MORE: those wait for Flush.
func (e *endpoint) flush(p *peer) {
	e.mu.Lock()
	if p.flushing {
		e.mu.Unlock()
		return
	}
	p.flushing = true
	for first := true; len(p.queue) > 0 && p.state == pConnected && (first || !p.waiting); first = false {
		// The two slices of p take turns: items are posted from one
		// while sends queue in the other, so queueing allocates nothing.
		items, c := p.queue, p.conn
		p.queue, p.spare = p.spare[:0], nil
		c.carried, c.recent = true, true
		c.sends += len(items)
		for _, it := range items {
			it.conn = c
			if it.rndv != nil {
				it.rndv.conn = c
			}
			if it.atomic != nil {
				it.atomic.conn = c
			}
		}
		e.mu.Unlock()
		// The connection writes the batch together if it can hold
		// sends for a flush (core.Flusher).
		fl, _ := c.tcp.(core.Flusher)
		for i, it := range items {
			var err error
			if !it.rma {
				it.hdr.ConnID = uint64(c.remoteIndex)
				err = it.hdr.Encode(*it.buf)
			}
			if fl != nil {
				it.msg.Flags |= fi.MORE
			}
			if err == nil {
				err = c.tcp.Post(&it.msg)
			}
			if err != nil {
				e.mu.Lock()
				c.sends -= len(items) - i // not posted
				e.mu.Unlock()
				for _, rest := range items[i:] {
					e.sendFailed(rest, core.Code(err))
				}
				break
			}
		}
		if fl != nil {
			fl.Flush()
		}
		clear(items)
		e.mu.Lock()
		p.spare = items[:0]
	}
	p.flushing = false
	e.forgetLocked(p)
	e.mu.Unlock()
}

// sendDone completes an application send when the connection has written
// its message (or failed to).
func (e *endpoint) sendDone(it *sendItem, c core.Completion) {
	e.mu.Lock()
	it.conn.sends--
	if it.rndv == nil && it.atomic == nil {
		e.txOut--
	}
	e.mu.Unlock()
	if it.rndv != nil {
		e.rndvSent(it, c)
		return
	}
	if it.atomic != nil {
		e.atomicSent(it, c)
		return
	}
	it.free()
	comp := core.Completion{Flags: it.op.Kind.CQFlags(), Len: uint64(len(it.op.Buf))}
	if c.Err != 0 {
		comp = core.Completion{Flags: it.op.Kind.CQFlags(), Err: c.Err, ProvErrno: c.ProvErrno}
	}
	it.op.Complete(comp)
	// Nothing holds the item now: the connection is done with msg, and
	// flush with the item once it posted it.
	*it = sendItem{done: it.done}
	itemPool.Put(it)
}

// sendFailed completes an application send that never went out and is
// no longer queued.
func (e *endpoint) sendFailed(it *sendItem, code fi.Errno) {
	e.mu.Lock()
	e.txOut--
	if it.rndv != nil {
		delete(e.rndvSends, it.rndv.id)
	}
	if it.atomic != nil {
		delete(e.atomics, it.atomic.id)
	}
	e.mu.Unlock()
	it.rndv.unexpose()
	it.free()
	it.op.Complete(core.Completion{Flags: it.op.Kind.CQFlags(), Err: code})
}
