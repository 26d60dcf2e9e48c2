package rxm

import (
	"fmt"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// The read rendezvous, as libfabric 1.17's rxm does it over tcp
// (docs/rxm.md 5.5): messages above EagerLimit.
//
// Sender: the request (rxm header type 2 and a rendezvous header with one
// entry: offset 0, the message's length, key RndvKey(msg_id)) goes out
// like an eager message; the application's buffer stays exposed under
// that key, to read requests arriving on the connection the request went
// out on only, until the peer's read-done (type 3, the same msg_id). The
// send completes when the read-done has arrived, its request's own send
// has completed and no read response still holds the buffer.
//
// Over a provider that registers memory (core.MemoryRegistrar: verbs),
// whose peers read registered memory without asking the endpoint, the
// buffer is registered with the wrapped domain for remote reads instead,
// and the entry carries that registration's key, offset 0 being its
// first byte, as libfabric's rxm registers it with fi_mr_reg on its msg
// domain; the registration ends with the rendezvous.
//
// Receiver: a request matched to a receive (at once, or later from the
// unexpected list) becomes an rndvRecv; the worker posts its tcp read
// requests (one per remote entry, while bytes that fit the receive
// remain) on the connection it came on, then the read-done, and the
// receive completes when the read-done's send has: with fi.ETRUNC and
// olen if the receive was shorter than the message.

// rndvSend is the sender's state of a rendezvous; its sendItem is in
// endpoint.rndvSends under id until it completes. Guarded by endpoint.mu.
type rndvSend struct {
	id    uint64      // msg_id of the request; the key is wire.RndvKey(id), or mem's
	mem   core.Memory // the buffer's registration with a domain that registers memory
	conn  *conn       // the connection the request went out on; nil while queued
	holds int         // slices of the buffer lent to read responses, not yet released
	sent  bool        // the request's send has completed
	done  bool        // the peer's read-done has arrived
	err   fi.Errno
}

// rndvRecv is the receiver's state of a rendezvous: a receive matched to
// a request of conn, being read into.
type rndvRecv struct {
	op      *core.Op
	buf     []byte     // where the data goes: op.Buf, or a part of it (FI_MULTI_RECV)
	multi   *multiRecv // op's FI_MULTI_RECV state, or nil
	conn    *conn
	id      uint64          // the request's msg_id, echoed in the read-done
	parts   []wire.RMAIov   // the reads, in order, and where they go in buf
	offs    []int           // offset in buf of each part
	comp    core.Completion // the receive's completion once read
	pending int             // reads posted and not completed
	err     fi.Errno        // a read failed
	done    core.Op         // the read-done message
	hdr     [wire.HeaderSize]byte
	// peek is a buffered message's report waiting for buf, the message's
	// first FI_OPT_BUFFERED_MIN bytes (buffered.go): the reads end there,
	// without a read-done, and op is nil.
	peek *pendingReport
}

// newRndvRecv plans the reads of msg into buf, a part of op's buffer:
// each remote entry in order, while bytes that fit remain. comp is the
// receive's completion, without Len.
func newRndvRecv(op *core.Op, buf []byte, msg *message, comp core.Completion) *rndvRecv {
	n := fitTo(&comp, len(buf), msg.size)
	r := &rndvRecv{op: op, buf: buf, conn: msg.conn, id: msg.id, comp: comp}
	left, off := n, 0
	for _, v := range msg.rndv.Iov[:msg.rndv.Count] {
		if left == 0 {
			break
		}
		l := min(v.Len, left)
		if l == 0 {
			continue
		}
		r.parts = append(r.parts, wire.RMAIov{Addr: v.Addr, Len: l, Key: v.Key})
		r.offs = append(r.offs, off)
		left -= l
		off += int(l)
	}
	return r
}

// exposeRndv registers the buffer of a rendezvous send for remote reads
// when the wrapped domain registers memory.
func (e *endpoint) exposeRndv(it *sendItem) error {
	if e.dom.reg == nil {
		return nil
	}
	m, err := e.dom.reg.RegisterMemory(core.OwnerOf(e.ev), it.op.Buf, 0, fi.REMOTE_READ, uint64(fi.KEY_NOTAVAIL), e.info.EPAttr.AuthKey)
	if err != nil {
		return err
	}
	it.rndv.mem = m
	return nil
}

// key is the key the request announces.
func (rs *rndvSend) key() uint64 {
	if rs.mem != nil {
		return rs.mem.Key()
	}
	return wire.RndvKey(rs.id)
}

// unexpose ends the buffer's registration, if any; rs may be nil.
func (rs *rndvSend) unexpose() {
	if rs != nil && rs.mem != nil {
		rs.mem.Close()
		rs.mem = nil
	}
}

// lend answers a read request of c for key, if key is one of the
// endpoint's rendezvous keys (ok): the bytes [addr, addr+n) of the
// message, held until release, or an error that ends c.
func (e *endpoint) lend(c *conn, key, addr, n uint64, access fi.Caps) (buf []byte, release func(), ok bool, err error) {
	if key&wire.KeyProvSpecific == 0 {
		return nil, nil, false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	it := e.rndvSends[key&^wire.KeyProvSpecific]
	if it == nil {
		return nil, nil, false, nil
	}
	rs, b := it.rndv, it.op.Buf
	switch {
	case rs.conn != c:
		err = core.Errorf(fi.EACCES, "rxm: rendezvous key %#x belongs to another connection", key)
	case access != fi.REMOTE_READ:
		err = core.Errorf(fi.EACCES, "rxm: rendezvous key %#x allows remote reads only", key)
	case rs.done || rs.err != 0:
		err = core.Errorf(fi.EACCES, "rxm: rendezvous key %#x is no longer valid", key)
	case addr > uint64(len(b)) || n > uint64(len(b))-addr:
		err = core.Errorf(fi.EINVAL, "rxm: bytes %d+%d of a %d-byte rendezvous message", addr, n, len(b))
	}
	if err != nil {
		return nil, nil, true, err
	}
	rs.holds++
	release = func() {
		e.mu.Lock()
		rs.holds--
		fin := e.finishRndvLocked(it)
		e.mu.Unlock()
		fin()
	}
	return b[addr : addr+n], release, true, nil
}

// finishRndvLocked ends a rendezvous send that is over: answered (or
// failed), its request sent, its buffer no longer lent. It returns what
// completes the application's send, to be called without mu.
func (e *endpoint) finishRndvLocked(it *sendItem) func() {
	rs := it.rndv
	if !rs.sent || rs.holds > 0 || (!rs.done && rs.err == 0) || e.rndvSends[rs.id] != it {
		return func() {}
	}
	delete(e.rndvSends, rs.id)
	e.txOut--
	comp := core.Completion{Flags: it.op.Kind.CQFlags(), Len: uint64(len(it.op.Buf))}
	if rs.err != 0 {
		comp = core.Completion{Flags: it.op.Kind.CQFlags(), Err: rs.err}
	}
	return func() {
		rs.unexpose()
		it.op.Complete(comp)
	}
}

// rndvSent is the completion of a rendezvous request's send.
func (e *endpoint) rndvSent(it *sendItem, c core.Completion) {
	e.mu.Lock()
	rs := it.rndv
	rs.sent = true
	if c.Err != 0 && rs.err == 0 {
		rs.err = c.Err
	}
	fin := e.finishRndvLocked(it)
	e.mu.Unlock()
	it.free()
	fin()
}

// readDoneArrived is the peer's read-done for rendezvous id, on c.
func (e *endpoint) readDoneArrived(c *conn, id uint64) error {
	e.mu.Lock()
	it := e.rndvSends[id]
	if it == nil || it.rndv.conn != c || it.rndv.done {
		e.mu.Unlock()
		return fmt.Errorf("read-done for msg_id %d, which is not a rendezvous in progress on this connection", id)
	}
	it.rndv.done = true
	fin := e.finishRndvLocked(it)
	e.mu.Unlock()
	fin()
	return nil
}

// connGoneLocked fails what depends on c, which has ended: rendezvous
// sends whose request went out on it (they complete once their buffer is
// released), unexpected rendezvous requests and the segmented messages
// that came on it (their data cannot come any more), and what atomics
// depend on it (atomicsGoneLocked). It returns the completions to call without mu.
func (e *endpoint) connGoneLocked(c *conn, code fi.Errno) []func() {
	var fins []func()
	for _, it := range e.rndvSends {
		if rs := it.rndv; rs.conn == c && !rs.done && rs.err == 0 {
			rs.err = code
			fins = append(fins, e.finishRndvLocked(it))
		}
	}
	e.rx.dropConn(c)
	fins = append(fins, e.sarGoneLocked(c, code)...)
	return append(fins, e.atomicsGoneLocked(c, code)...)
}

// startRndv posts the reads of the matched rendezvous receives whose
// connections have room for them (reads and the read-done take
// ctrlSends slots of the connection's queue), and the read-done of those
// whose reads are over. The worker calls it: a completion callback must
// not post to the endpoint completing it.
func (e *endpoint) startRndv() {
	e.mu.Lock()
	var start, failed []*rndvRecv
	keep := e.rx.started[:0]
	for _, r := range e.rx.started {
		switch c := r.conn; {
		case c.dead || c.tcp == nil:
			failed = append(failed, r)
		case c.ctrl+r.ctrlNeeded() > ctrlSends:
			keep = append(keep, r)
		default:
			c.ctrl += r.ctrlNeeded()
			r.pending = len(r.parts)
			start = append(start, r)
		}
	}
	clear(e.rx.started[len(keep):])
	e.rx.started = keep
	read := e.rndvRead
	e.rndvRead = nil
	e.mu.Unlock()
	for _, r := range failed {
		e.completeRndv(r, core.Completion{Flags: r.comp.Flags, Offset: r.comp.Offset, Err: fi.ECONNRESET})
	}
	for _, r := range start {
		if len(r.parts) == 0 {
			read = append(read, r) // nothing fits: answer at once
			continue
		}
		for i, p := range r.parts {
			op := &core.Op{Kind: core.OpRead, Buf: r.buf[r.offs[i]:][:p.Len], Addr: p.Addr, Key: p.Key}
			op.OnComplete(func(_ *core.Op, c core.Completion) { e.rndvReadDone(r, c) })
			if err := r.conn.tcp.Post(op); err != nil {
				for range r.parts[i:] {
					e.rndvReadDone(r, core.Completion{Err: core.Code(err)})
				}
				break
			}
		}
	}
	for _, r := range read {
		e.sendReadDone(r)
	}
}

// ctrlNeeded is the connection's control slots r takes: its reads, and
// its read-done unless it only peeks.
func (r *rndvRecv) ctrlNeeded() int {
	if r.peek != nil {
		return len(r.parts)
	}
	return len(r.parts) + 1
}

// rndvReadDone is the completion of one of r's reads. After the last, the
// worker sends the read-done.
func (e *endpoint) rndvReadDone(r *rndvRecv, c core.Completion) {
	e.mu.Lock()
	r.pending--
	r.conn.ctrl--
	if c.Err != 0 && r.err == 0 {
		r.err = c.Err
	}
	last := r.pending == 0
	if last {
		e.rndvRead = append(e.rndvRead, r)
	}
	waiting := len(e.rx.started) > 0
	e.mu.Unlock()
	if last || waiting {
		e.wake()
	}
}

// readDoneSent frees the connection slot of r's read-done: receives
// waiting for one may start.
func (e *endpoint) readDoneSent(r *rndvRecv) {
	e.mu.Lock()
	r.conn.ctrl--
	waiting := len(e.rx.started) > 0
	e.mu.Unlock()
	if waiting {
		e.wake()
	}
}

// sendReadDone tells the sender r's data has been read; the receive
// completes when that message is sent. A failed read fails the receive
// instead (its connection is ending).
func (e *endpoint) sendReadDone(r *rndvRecv) {
	if r.peek != nil {
		e.peeked(r)
		return
	}
	fail := func(code fi.Errno) {
		e.readDoneSent(r)
		e.completeRndv(r, core.Completion{Flags: r.comp.Flags, Offset: r.comp.Offset, Err: code})
	}
	if r.err != 0 {
		fail(r.err)
		return
	}
	e.mu.Lock()
	h := wire.ReadDone(uint64(r.conn.remoteIndex), r.id)
	e.mu.Unlock()
	h.Encode(r.hdr[:])
	r.done = core.Op{Kind: core.OpSend, Buf: r.hdr[:]}
	r.done.OnComplete(func(_ *core.Op, c core.Completion) {
		if c.Err != 0 {
			fail(c.Err)
			return
		}
		e.readDoneSent(r)
		e.completeRndv(r, r.comp)
	})
	if err := r.conn.tcp.Post(&r.done); err != nil {
		fail(core.Code(err))
	}
}

// completeRndv completes r's receive with c; for a part of a buffer with
// FI_MULTI_RECV, the buffer's release comes after every part read into it
// (multiRecv.partDone).
func (e *endpoint) completeRndv(r *rndvRecv, c core.Completion) {
	if r.peek != nil {
		r.err = c.Err // the connection is gone: the report shows nothing
		e.peeked(r)
		return
	}
	if r.multi == nil {
		r.op.Complete(c)
		return
	}
	e.mu.Lock()
	now := r.multi.partDone(c)
	e.mu.Unlock()
	for _, c := range now {
		r.op.Complete(c)
	}
}

// connEvents' answers about memory: a connection's read requests may
// read the rendezvous messages sent on it; other keys are the RDM
// endpoint's. The reads of rendezvous messages are rxm's own, so their
// remote read events are not passed on; the application's remote reads
// and remote writes are (FI_RMA_EVENT; rma.go). Over a provider that
// registers memory, the event names the registration read (Key).

func (ev connEvents) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	buf, release, ok, err := ev.c.ep.lend(ev.c, key, addr, n, access)
	if !ok {
		buf, release, err = ev.EndpointEvents.Region(key, addr, n, access)
	}
	if err == nil && access == fi.REMOTE_READ {
		ev.c.ep.noteRead(ev.c, n, !ok)
	}
	return buf, release, err
}

func (ev connEvents) Remote(c core.Completion) {
	e := ev.c.ep
	switch {
	case c.Flags&fi.CQFlags(fi.REMOTE_READ) == 0:
	case e.dom.reg != nil:
		// A provider that registers memory serves reads without asking
		// Region, and names the registration read: rxm's own are those of
		// its rendezvous sends.
		if e.rndvKey(c.Key) {
			return
		}
	case !e.readReported(ev.c, c.Len):
		return
	}
	ev.EndpointEvents.Remote(c)
}

// rndvKey reports whether key is the registration of one of the
// endpoint's rendezvous sends (exposeRndv).
func (e *endpoint) rndvKey(key uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, it := range e.rndvSends {
		if m := it.rndv.mem; m != nil && m.Key() == key {
			return true
		}
	}
	return false
}
