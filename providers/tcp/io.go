package tcp

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// The data path of a connected endpoint. Its socket is non-blocking, and
// both directions are state machines that move what they can and return:
//
//   - Receiving: whoever drives progress calls progress. That is the
//     connection goroutine, parked (netpoll.go) while the socket is
//     empty; or, while the endpoint's rings keep an engine group busy, the
//     group's goroutine through Poll (core.Poller), so a message goes from
//     the socket into the receiver's completion ring on the thread that
//     also takes the requests, with no hand-off. rxMu makes them take turns.
//   - Sending: the goroutine that queues a send (or the ACK of a filled
//     receive) writes it at once with one writev (kickTx); a send posted
//     with fi.MORE waits for the Flush that ends the engine's pass, so
//     that a pass's sends share a writev (core.Flusher). What the socket
//     does not take is written once it drains: by the engine group polling
//     the endpoint, on its next passes, else by the writer goroutine,
//     which waits in the netpoller (waitRoom).
const (
	readBufSize = 16 << 10 // per connection: small messages are read several per system call
	directRead  = 4 << 10  // a payload with this much left to place is read straight into its buffer
	maxBatch    = 64       // sends (and ACKs) per writev
	pollBudget  = 16       // messages one Poll takes from a socket, so one busy peer does not starve a group
	maxReadRsps = 64       // responses to a peer's reads queued at once; beyond, its requests wait in the socket
)

// rxStatus says why progress stopped.
type rxStatus uint8

const (
	rxOK     rxStatus = iota // (internal) keep going
	rxBudget                 // took its share of messages; the socket may hold more
	rxEmpty                  // the socket has nothing more for now
	rxNoRecv                 // a message waits for a receive to be posted, or a read request for room
	rxEnd                    // the stream ended; reader.err says how
)

// reader is the receive side's state, guarded by endpoint.rxMu: the
// connection's staging buffer and the message being placed.
type reader struct {
	buf   []byte // bytes read and not yet used are buf[r:w]
	r, w  int
	total uint64 // bytes read so far: Poll reports progress by it
	// quiet says the socket had nothing more at the last look, so read
	// returns rxEmpty without a system call. Only the engine's passes set
	// it (PollReady): their poll(2) tells when the socket has input again.
	quiet bool

	inMsg bool     // a message's payload is being placed
	op    *core.Op // the receive, or the read whose response it is; nil for a peer's write
	c     core.Completion
	ack   bool     // the sender asked for an ACK
	dst   []byte   // the part of the current buffer still to fill
	dsts  [][]byte // the buffers after it (a write to several regions)
	skip  uint64   // bytes of the payload that do not fit, to read away
	rel   []func() // a peer's write: releases the regions it targets
	rsps  bool     // responses to reads were queued: progress writes them

	err error // how the stream ended: nil at an EOF between messages
}

// progress handles what the socket holds, at most budget messages, without
// blocking, and then writes the responses to the peer's reads it queued,
// together. Called with rxMu held.
func (e *endpoint) progress(fd, budget int) rxStatus {
	st := e.handle(fd, budget)
	if e.rd.rsps {
		e.rd.rsps = false
		e.kickTx()
	}
	return st
}

// handle is progress's loop over the messages.
func (e *endpoint) handle(fd, budget int) rxStatus {
	if e.rxEnded.Load() {
		return rxEnd
	}
	for range budget {
		if !e.rd.inMsg {
			if st := e.nextHeader(fd); st != rxOK {
				return st
			}
		}
		if e.rd.inMsg {
			if st := e.place(fd); st != rxOK {
				return st
			}
		}
	}
	return rxBudget
}

// nextHeader reads and handles one header: an ACK completes a send; a
// message takes the oldest posted receive and starts to fill it. A
// message that finds no receive posted stays in the buffer, and the
// socket is not read until one is: TCP holds the sender back, as with
// libfabric.
func (e *endpoint) nextHeader(fd int) rxStatus {
	rd := &e.rd
	if st := e.fill(fd, wire.BaseHeaderSize); st != rxOK {
		return st
	}
	n, err := wire.PeekHeaderSize(rd.buf[rd.r:rd.w])
	if err != nil {
		return e.endRead(e.protocolError(err))
	}
	if st := e.fill(fd, n); st != rxOK {
		return st
	}
	var h wire.Header
	if _, err := h.Decode(rd.buf[rd.r : rd.r+n]); err != nil {
		return e.endRead(e.protocolError(err))
	}
	switch {
	case h.IsAck():
		rd.r += n
		if err := e.handleAck(); err != nil {
			return e.endRead(err)
		}
		return rxOK
	case h.Op == wire.OpWrite && e.info.Caps&fi.RMA != 0:
		return e.startWrite(&h, n)
	case h.Op == wire.OpReadReq && e.info.Caps&fi.RMA != 0:
		return e.readRequest(&h, n)
	case h.Op == wire.OpReadRsp:
		return e.startReadRsp(&h, n)
	case h.Op == wire.OpMsg && (!h.HasTag() || e.info.Caps&fi.TAGGED != 0):
		// A tagged message on OpMsg is how libfabric's rxm sends small
		// tagged messages; an endpoint opened with FI_TAGGED (an rxm
		// connection) takes it into the next receive, with its tag.
	default:
		// Tagged messages of the tcp provider's own (OpTagged) need a
		// shared receive context, which is not offered.
		return e.endRead(e.protocolError(fmt.Errorf("unexpected %v message (flags %#x)", h.Op, uint16(h.Flags))))
	}
	op := e.takeRecv()
	if op == nil {
		return rxNoRecv
	}
	rd.r += n
	var c core.Completion
	if h.Flags&wire.FlagRemoteCQData != 0 {
		c.Flags, c.Data = fi.CQFlags(fi.REMOTE_CQ_DATA), h.CQData
	}
	if h.HasTag() {
		c.Flags, c.Tag = c.Flags|fi.CQFlags(fi.TAGGED), h.Tag
	}
	if op.Buf == nil {
		if h.Len > MaxDynamicRecv {
			e.recvDone(op, core.Completion{Err: fi.EMSGSIZE, OLen: h.Len}, false)
			return e.endRead(core.Errorf(fi.EMSGSIZE, "tcp: %v sent a message of %d bytes; receives without a buffer take at most %d",
				e.conn.RemoteAddr(), h.Len, MaxDynamicRecv))
		}
		op.Buf = make([]byte, h.Len)
	}
	c.Len = min(uint64(len(op.Buf)), h.Len)
	if rest := h.Len - c.Len; rest > 0 {
		// Truncated: the rest is read away, so the stream stays in step.
		c.Err, c.OLen = fi.ETRUNC, rest
	}
	rd.inMsg, rd.op, rd.c, rd.dst, rd.skip = true, op, c, op.Buf[:c.Len], h.Len-c.Len
	rd.ack = h.Flags&(wire.FlagDeliveryComplete|wire.FlagCommitComplete) != 0
	return rxOK
}

// place moves the current message's payload into its receive, reading
// large remainders straight from the socket, and completes the receive.
func (e *endpoint) place(fd int) rxStatus {
	rd := &e.rd
	for len(rd.dst) > 0 || len(rd.dsts) > 0 {
		if len(rd.dst) == 0 {
			rd.dst, rd.dsts = rd.dsts[0], rd.dsts[1:]
			continue
		}
		if rd.r < rd.w {
			k := copy(rd.dst, rd.buf[rd.r:rd.w])
			rd.r += k
			rd.dst = rd.dst[k:]
			continue
		}
		if len(rd.dst) < directRead {
			if st := e.fill(fd, 1); st != rxOK {
				return st
			}
			continue
		}
		k, st := e.read(fd, rd.dst)
		if st != rxOK {
			return st
		}
		rd.dst = rd.dst[k:]
	}
	for rd.skip > 0 {
		if rd.r == rd.w {
			if st := e.fill(fd, 1); st != rxOK {
				return st
			}
		}
		k := min(rd.skip, uint64(rd.w-rd.r))
		rd.r += int(k)
		rd.skip -= k
	}
	op, c, ack := rd.op, rd.c, rd.ack
	rd.inMsg, rd.op, rd.dst = false, nil, nil
	switch {
	case op == nil:
		e.writeDone(c, ack)
	case op.Kind == core.OpRead:
		e.readDone(op, c)
	default:
		e.recvDone(op, c, ack)
	}
	return rxOK
}

// fill reads until the staging buffer holds at least n unused bytes.
func (e *endpoint) fill(fd, n int) rxStatus {
	rd := &e.rd
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
	}
	for rd.w-rd.r < n {
		if len(rd.buf)-rd.r < n {
			rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
			rd.r = 0
		}
		k, st := e.read(fd, rd.buf[rd.w:])
		if st != rxOK {
			return st
		}
		rd.w += k
	}
	return rxOK
}

// read is one non-blocking read(2). It turns EOF and errors into the end
// of the stream.
func (e *endpoint) read(fd int, p []byte) (int, rxStatus) {
	if e.rd.quiet {
		return 0, rxEmpty
	}
	for {
		k, err := unix.Read(fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, rxEmpty
		case err != nil:
			return 0, e.endRead(e.readError(err))
		case k == 0:
			if e.rd.inMsg || e.rd.r < e.rd.w {
				return 0, e.endRead(e.readError(io.ErrUnexpectedEOF))
			}
			return 0, e.endRead(nil)
		}
		e.rd.total += uint64(k)
		// A read that did not fill p took all the socket had: an engine
		// pass reads again only once poll(2) says there is more.
		e.rd.quiet = k < len(p) && e.polled.Load()
		return k, rxOK
	}
}

// endRead ends the stream with err (nil: cleanly). A receive being filled
// completes with fi.ECANCELED.
func (e *endpoint) endRead(err error) rxStatus {
	rd := &e.rd
	rd.err = err
	op, inMsg := rd.op, rd.inMsg
	rd.inMsg, rd.op, rd.dst, rd.dsts = false, nil, nil, nil
	switch {
	case !inMsg:
	case op == nil:
		e.releaseWrite()
	case op.Kind == core.OpRead:
		e.readDone(op, core.Completion{Err: fi.ECANCELED})
	default:
		e.recvDone(op, core.Completion{Err: fi.ECANCELED}, false)
	}
	e.rxEnded.Store(true)
	return rxEnd
}

// handleAck completes the oldest send waiting for an ACK.
func (e *endpoint) handleAck() error {
	e.mu.Lock()
	it, ok := e.ackq.pop()
	if ok {
		e.txOut--
	}
	e.mu.Unlock()
	if !ok {
		return e.protocolError(errors.New("ACK for no send"))
	}
	if it.inj != nil {
		injectPool.Put(it.inj)
	}
	e.completeOp(it.op, core.Completion{Len: uint64(len(it.op.Buf))})
	return nil
}

// takeRecv returns the oldest posted receive, or nil; then rxStalled tells
// postRecv to wake the reader.
func (e *endpoint) takeRecv() *core.Op {
	e.mu.Lock()
	defer e.mu.Unlock()
	op, ok := e.rxq.pop()
	e.rxStalled = !ok
	return op
}

// recvDone completes a filled receive. When the sender asked for an ACK,
// the ACK is written first and then the receive completes, so an
// application that sees the completion and shuts down at once does not
// leave the sender waiting; receives filled after it complete behind it,
// in order.
func (e *endpoint) recvDone(op *core.Op, c core.Completion, ack bool) {
	e.mu.Lock()
	queued := ack || e.rxDone.len() > 0 || e.rxHeld > 0
	if queued {
		e.rxDone.push(rxDone{op, c, ack})
	} else if op != nil {
		e.rxOut--
	}
	e.mu.Unlock()
	if queued {
		e.kickTx()
		return
	}
	if op != nil {
		e.completeOp(op, c)
	}
}

// receives counts the filled receives among rs; the rest are ACKs owed for
// peers' writes.
func receives(rs []rxDone) int {
	n := 0
	for _, r := range rs {
		if r.op != nil {
			n++
		}
	}
	return n
}

// readLoop is the connection goroutine's part of receiving: it drives
// progress whenever no engine group polls the endpoint, parking until the
// socket has data or a receive is posted, and returns how the stream ended
// (nil: the peer closed it between two messages).
func (e *endpoint) readLoop() error {
	for {
		if e.rxEnded.Load() {
			return e.rd.err // set before rxEnded; nothing writes it any more
		}
		if !e.polled.Load() {
			e.rxMu.Lock()
			e.rd.quiet = false
			st := e.progress(e.fd, maxBatch)
			if st == rxEmpty {
				e.rxW.arm()
			}
			e.rxMu.Unlock()
			switch st {
			case rxBudget, rxEnd:
				continue
			}
		}
		// Wait for data (armed above), a posted receive, Park, or the
		// end. An engine group that polls the socket leaves it disarmed,
		// so it wakes no one.
		select {
		case <-e.rxWake:
		case <-e.down:
			return errDown
		}
	}
}

// Poll is core.Poller's: the engine group serving the endpoint's rings
// reads the socket on its own goroutine while it is busy.
func (e *endpoint) Poll() bool { return e.PollReady(true) }

// PollFD is core.FDPoller's: the socket.
func (e *endpoint) PollFD() int { return int(e.pollFD.Load()) }

// PollReady is core.FDPoller's: Poll, reading the socket only if the
// group's poll(2) found it ready, and then only until a read finds it
// drained. Without reading it still places what the staging buffer holds
// (a message that waited for a receive) and retries a blocked write.
func (e *endpoint) PollReady(ready bool) bool {
	if !e.polled.Load() {
		e.polled.Store(true)
	}
	if !e.rxMu.TryLock() {
		return false // the connection goroutine is at it
	}
	defer e.rxMu.Unlock()
	if e.fd < 0 || e.rxEnded.Load() {
		return false
	}
	// Nobody waits in the netpoller while the group polls (a waiter that
	// armed before is woken by Park); one that arms meanwhile is taken out
	// again on the next pass.
	e.rxW.detach()
	e.txW.detach()
	wrote := e.pollTx()
	total, r, w := e.rd.total, e.rd.r, e.rd.w
	e.rd.quiet = !ready
	if e.progress(e.fd, pollBudget) == rxEnd {
		kick(e.rxWake) // the connection goroutine reports the end
	}
	// Without reading, the staging buffer's bounds move only when bytes
	// in it are used.
	return wrote || e.rd.total != total || e.rd.r != r || e.rd.w != w
}

// Park is core.Poller's: the connection goroutine reads the socket again,
// and the writer goroutine finishes a write the socket did not take.
func (e *endpoint) Park() {
	e.polled.Store(false)
	kick(e.rxWake)
	if e.txBlocked.Load() {
		kick(e.txWake)
	}
}

// readError is the error a failed read ends the connection with. A read
// that fails because the endpoint is going down is not an error of its
// own: finish reports the local reason.
func (e *endpoint) readError(err error) error {
	select {
	case <-e.down:
		return errDown
	default:
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return core.Errorf(fi.ECONNRESET, "tcp: %v closed the connection in the middle of a message", e.conn.RemoteAddr())
	}
	return netError("receive from "+e.conn.RemoteAddr().String(), err)
}

// protocolError is the error of a malformed or unexpected message: the
// connection ends with fi.EIO, as libfabric ends it.
func (e *endpoint) protocolError(err error) error {
	return core.Errorf(fi.EIO, "tcp: bad message from %v: %v", e.conn.RemoteAddr(), err)
}

// writer is the send side's state, guarded by endpoint.txMu: one batch of
// the ACKs of up to maxBatch filled receives and up to maxBatch messages,
// with headers encoded into reused buffers, and the part of it the socket
// has not taken yet.
type writer struct {
	filled  [maxBatch]rxDone
	items   [maxBatch]txItem
	nf, n   int // the batch: filled receives, and responses and sends
	waiting int // sends of the batch that complete on their ACK or read response, not when written
	rsps    int // read responses in the batch
	hdrs    [maxBatch][wire.MaxHeaderSize]byte
	acks    [maxBatch * wire.BaseHeaderSize]byte
	store   [][]byte // backing array of iov
	iov     [][]byte // the batch's bytes not yet written
	id      uint8    // the header id of the next message: a per-connection sequence
	dead    bool     // writing failed: nothing more is written
}

// txStatus says why write stopped.
type txStatus uint8

const (
	txIdle    txStatus = iota // everything queued is written (or can never be)
	txBlocked                 // the socket is full
)

// kickTx writes what is queued, unless another goroutine is writing (it
// sees the new work before it stops) or the socket is full (the rest is
// written once it drains: waitRoom).
func (e *endpoint) kickTx() {
	e.txWant.Store(true)
	for e.txWant.Load() && !e.txBlocked.Load() && e.txMu.TryLock() {
		e.txWant.Store(false)
		if e.fd >= 0 && e.write(e.fd) == txBlocked {
			e.txBlocked.Store(true)
			e.waitRoom()
		}
		e.txMu.Unlock()
	}
}

// waitRoom has the rest of a write that filled the socket written once it
// drains: by the engine group that polls the endpoint, which retries on
// its passes (pollTx), so that a large message costs no wake-up of the
// writer goroutine; else by the writer goroutine, woken by the
// netpoller. Park hands a blocked socket to the writer goroutine; with
// txBlocked stored before polled is loaded here, and polled before
// txBlocked in Park, one of them does. Called with txMu held.
func (e *endpoint) waitRoom() {
	if !e.polled.Load() {
		e.txW.arm()
	}
}

// pollTx is the engine group's retry of a write the socket did not take
// whole; it reports whether the socket took it all.
func (e *endpoint) pollTx() bool {
	if !e.txBlocked.Load() || !e.txMu.TryLock() {
		return false
	}
	st := e.writeQueued()
	e.txMu.Unlock()
	if st == txBlocked {
		return false
	}
	e.kickTx() // what was queued meanwhile
	return true
}

// writeQueued writes what is queued, if the socket is open, and clears
// txBlocked unless the socket is still full. Called with txMu held.
func (e *endpoint) writeQueued() txStatus {
	st := txIdle
	if e.fd >= 0 {
		st = e.write(e.fd)
	}
	if st != txBlocked {
		e.txBlocked.Store(false)
	}
	return st
}

// write sends ACKs owed and queued sends, ACKs first (like libfabric's
// priority queue), a batch per writev, until the queues are empty or the
// socket is full. Called with txMu held. Completions are delivered here,
// in order: filled receives, then sends that do not wait for an ACK.
func (e *endpoint) write(fd int) txStatus {
	if e.wr == nil {
		e.wr = new(writer)
	}
	w := e.wr
	for !w.dead {
		if len(w.iov) == 0 {
			e.batchDone(nil)
			if !e.nextBatch() {
				return txIdle
			}
		}
		k, err := unix.Writev(fd, w.iov)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return txBlocked
		case err != nil:
			w.dead = true
			e.batchDone(err)
			e.writeFailed(err)
			return txIdle
		}
		// Drop what was written; an empty slice never stays in front, so
		// a writev always has bytes to write.
		for len(w.iov) > 0 && k >= len(w.iov[0]) {
			k -= len(w.iov[0])
			w.iov[0] = nil
			w.iov = w.iov[1:]
		}
		if k > 0 {
			w.iov[0] = w.iov[0][k:]
		}
	}
	return txIdle
}

// nextBatch moves queued work into the writer: filled receives (whose
// ACKs to send), responses to peers' reads, and sends, writes and read
// requests, and encodes the batch. Operations that complete later go to
// the ACK or read queue now, before the peer can answer. It reports false
// when there is nothing to write or the endpoint no longer writes; what is
// left queued, flush completes.
func (e *endpoint) nextBatch() bool {
	w := e.wr
	e.mu.Lock()
	if e.state != stConnected || e.shutdown || e.failure != nil {
		e.mu.Unlock()
		return false
	}
	for w.nf < maxBatch {
		r, ok := e.rxDone.pop()
		if !ok {
			break
		}
		w.filled[w.nf] = r
		w.nf++
	}
	e.rxHeld = w.nf
	w.waiting, w.rsps = 0, 0
	for w.n < maxBatch {
		rsp, ok := e.rspq.pop()
		if !ok {
			break
		}
		w.items[w.n] = txItem{rsp: rsp}
		w.n++
		w.rsps++
	}
	for w.n < maxBatch {
		it, ok := e.txq.pop()
		if !ok {
			break
		}
		switch {
		case it.op.Kind == core.OpRead:
			it.waits = true
			e.readq.push(it)
			w.waiting++
		case it.needsAck():
			it.waits = true
			e.ackq.push(it)
			w.waiting++
		}
		w.items[w.n] = it
		w.n++
	}
	e.mu.Unlock()
	if w.nf+w.n == 0 {
		return false
	}
	iov := w.store[:0]
	nacks := 0
	for _, r := range w.filled[:w.nf] {
		if r.ack {
			h := wire.Ack(w.id)
			w.id++
			h.Encode(w.acks[nacks*wire.BaseHeaderSize:])
			nacks++
		}
	}
	if nacks > 0 {
		iov = append(iov, w.acks[:nacks*wire.BaseHeaderSize])
	}
	for i := range w.items[:w.n] {
		it := &w.items[i]
		h := it.header()
		h.ID = w.id
		w.id++
		k, _ := h.Encode(w.hdrs[i][:])
		iov = append(iov, w.hdrs[i][:k])
		iov = it.appendPayload(iov)
	}
	w.store, w.iov = iov, iov
	if nacks == 0 && w.n == 0 {
		// Only receives that waited behind earlier ACKs: nothing to write.
		w.iov = w.iov[:0]
	}
	return true
}

// header is the wire header of the item (without its sequence id).
func (it *txItem) header() wire.Header {
	if it.rsp != nil {
		return it.rsp.h
	}
	op := it.op
	h := wire.Header{Op: wire.OpMsg, Flags: it.flags, Len: uint64(len(op.Buf))}
	switch op.Kind {
	case core.OpWrite:
		h.Op, h.RMACount = wire.OpWrite, 1
		h.RMA[0] = wire.RMAIov{Addr: op.Addr, Len: uint64(len(op.Buf)), Key: op.Key}
	case core.OpRead:
		h = wire.Header{Op: wire.OpReadReq, RMACount: 1}
		h.RMA[0] = wire.RMAIov{Addr: op.Addr, Len: uint64(len(op.Buf)), Key: op.Key}
		return h
	}
	if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
		h.Flags |= wire.FlagRemoteCQData
		h.CQData = op.Data
	}
	return h
}

// appendPayload appends the bytes that follow the item's header.
func (it *txItem) appendPayload(iov [][]byte) [][]byte {
	switch {
	case it.rsp != nil:
		for _, b := range it.rsp.data[:it.rsp.n] {
			if len(b) > 0 {
				iov = append(iov, b)
			}
		}
	case it.op.Kind == core.OpRead || len(it.op.Buf) == 0:
	case it.inj != nil:
		iov = append(iov, it.inj[:len(it.op.Buf)])
	default:
		iov = append(iov, it.op.Buf)
	}
	return iov
}

// batchDone completes the writer's batch: its filled receives (their ACKs
// written, or lost with the connection), the responses to peers' reads
// (reported to the application's counters), and the sends and writes that
// do not wait for an ACK, with fi.ECANCELED if err says writing failed.
func (e *endpoint) batchDone(err error) {
	w := e.wr
	if w == nil || w.nf+w.n == 0 {
		return
	}
	clear(w.store)
	w.iov = nil
	// Count them done first: a completion lets its owner post again. But
	// rxHeld stays until they are complete, so that no receive filled
	// after them completes before them.
	e.mu.Lock()
	e.rxOut -= receives(w.filled[:w.nf])
	e.txOut -= w.n - w.waiting - w.rsps
	wake := e.rxStalled && !e.polled.Load()
	e.mu.Unlock()
	for i := range w.filled[:w.nf] {
		if w.filled[i].op != nil {
			e.completeOp(w.filled[i].op, w.filled[i].c)
		}
		w.filled[i] = rxDone{}
	}
	for i := range w.items[:w.n] {
		it := &w.items[i]
		switch {
		case it.rsp != nil:
			if err == nil {
				// The response's header is the request's: RMA[0] is the first region read.
				e.ev.Remote(core.Completion{Flags: fi.CQFlags(fi.RMA | fi.REMOTE_READ), Len: it.rsp.h.Len, Key: it.rsp.h.RMA[0].Key})
			}
			it.rsp.done()
		case !it.waits:
			if it.inj != nil {
				injectPool.Put(it.inj)
			}
			c := core.Completion{Len: uint64(len(it.op.Buf))}
			if err != nil {
				c = core.Completion{Err: fi.ECANCELED}
			}
			e.completeOp(it.op, c)
		}
		*it = txItem{}
	}
	if w.nf > 0 {
		e.mu.Lock()
		e.rxHeld = 0
		e.mu.Unlock()
	}
	w.nf, w.n, w.waiting, w.rsps = 0, 0, 0, 0
	if wake {
		kick(e.rxWake) // a read request or write waited for room
	}
}

// writeLoop is the writer goroutine: when the socket is full it waits
// for room and writes the rest.
func (e *endpoint) writeLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.txWake:
		case <-e.down:
			return
		}
		e.txMu.Lock()
		e.txWant.Store(false)
		st := e.writeQueued()
		if st == txBlocked {
			e.waitRoom()
		}
		e.txMu.Unlock()
		if st != txBlocked {
			e.kickTx() // what was queued while the socket was full
		}
	}
}

// writeFailed records why sending stopped and takes the connection down;
// the connection goroutine reports it.
func (e *endpoint) writeFailed(err error) {
	e.mu.Lock()
	if e.failure == nil && e.state == stConnected && !e.shutdown {
		e.failure = netError("send to "+e.conn.RemoteAddr().String(), err)
	}
	e.mu.Unlock()
	e.signalDown()
	e.shutdownSocket()
}

// startWrite starts placing a peer's RMA write: each descriptor must name
// a region this endpoint's owner exposes for FI_REMOTE_WRITE, else the
// connection ends with fi.EIO, as libfabric drops it.
func (e *endpoint) startWrite(h *wire.Header, n int) rxStatus {
	rd := &e.rd
	ack := h.Flags&(wire.FlagDeliveryComplete|wire.FlagCommitComplete) != 0
	if ack && !e.roomForAck() {
		return rxNoRecv
	}
	rd.r += n
	rd.dsts = rd.dsts[:0]
	for _, r := range h.RMA[:h.RMACount] {
		buf, release, err := e.ev.Region(r.Key, r.Addr, r.Len, fi.REMOTE_WRITE)
		if err != nil {
			e.releaseWrite()
			return e.endRead(e.protocolError(fmt.Errorf("write: %v", err)))
		}
		rd.dsts = append(rd.dsts, buf)
		rd.rel = append(rd.rel, release)
	}
	c := core.Completion{Flags: fi.CQFlags(fi.RMA | fi.REMOTE_WRITE), Len: h.Len, Key: h.RMA[0].Key}
	if h.Flags&wire.FlagRemoteCQData != 0 {
		c.Flags, c.Data = c.Flags|fi.CQFlags(fi.REMOTE_CQ_DATA), h.CQData
	}
	rd.inMsg, rd.op, rd.c, rd.dst, rd.skip, rd.ack = true, nil, c, nil, 0, ack
	return rxOK
}

// roomForAck reports whether an ACK for a peer's write can be queued; if
// not, the write waits in the socket until the writer catches up.
func (e *endpoint) roomForAck() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := e.rxDone.len()+e.rxHeld < maxReadRsps
	e.rxStalled = !ok
	return ok
}

// writeDone finishes a peer's write: the regions are released, the write
// reported (counters, and the CQ for remote CQ data), and the ACK queued
// if the peer asked for one.
func (e *endpoint) writeDone(c core.Completion, ack bool) {
	e.releaseWrite()
	e.ev.Remote(c)
	if ack {
		e.recvDone(nil, core.Completion{}, true)
	}
}

func (e *endpoint) releaseWrite() {
	for i, release := range e.rd.rel {
		release()
		e.rd.rel[i] = nil
	}
	e.rd.rel = e.rd.rel[:0]
}

// readRequest answers a peer's read request: the response, with the bytes
// of the regions it names (which must allow FI_REMOTE_READ, else the
// connection ends with fi.EIO), goes ahead of queued sends.
func (e *endpoint) readRequest(h *wire.Header, n int) rxStatus {
	e.mu.Lock()
	full := e.rspq.full()
	e.rxStalled = full
	e.mu.Unlock()
	if full {
		return rxNoRecv
	}
	e.rd.r += n
	rsp := &readRsp{h: *h}
	rsp.h.Op, rsp.h.Len = wire.OpReadRsp, 0
	for _, r := range h.RMA[:h.RMACount] {
		buf, release, err := e.ev.Region(r.Key, r.Addr, r.Len, fi.REMOTE_READ)
		if err != nil {
			rsp.done()
			return e.endRead(e.protocolError(fmt.Errorf("read: %v", err)))
		}
		rsp.data[rsp.n], rsp.release[rsp.n] = buf, release
		rsp.n++
		rsp.h.Len += r.Len
	}
	e.mu.Lock()
	e.rspq.push(rsp)
	e.mu.Unlock()
	e.rd.rsps = true
	return rxOK
}

// done releases the regions a read response held.
func (r *readRsp) done() {
	for i := range r.n {
		r.release[i]()
		r.release[i], r.data[i] = nil, nil
	}
	r.n = 0
}

// startReadRsp starts placing the response to the oldest read this
// endpoint requested; it must carry exactly the bytes asked for.
func (e *endpoint) startReadRsp(h *wire.Header, n int) rxStatus {
	e.mu.Lock()
	it, ok := e.readq.pop()
	e.mu.Unlock()
	switch {
	case !ok:
		return e.endRead(e.protocolError(errors.New("read response for no read")))
	case h.Len != uint64(len(it.op.Buf)):
		e.readDone(it.op, core.Completion{Err: fi.EIO})
		return e.endRead(e.protocolError(fmt.Errorf("read response of %d bytes for a read of %d", h.Len, len(it.op.Buf))))
	}
	rd := &e.rd
	rd.r += n
	rd.inMsg, rd.op, rd.c, rd.dst, rd.skip, rd.ack = true, it.op, core.Completion{Len: h.Len}, it.op.Buf, 0, false
	return rxOK
}

// readDone completes a read this endpoint requested.
func (e *endpoint) readDone(op *core.Op, c core.Completion) {
	e.mu.Lock()
	e.txOut--
	e.mu.Unlock()
	e.completeOp(op, c)
}
