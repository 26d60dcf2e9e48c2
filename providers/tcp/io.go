package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

const (
	readBufSize = 16 << 10 // per connection; larger payloads are read straight into the receive buffer
	maxBatch    = 64       // sends (and ACKs) per writev
)

// readLoop reads messages until the connection ends. It returns nil when
// the peer closed the stream between two messages.
func (e *endpoint) readLoop() error {
	br := bufio.NewReaderSize(e.conn, readBufSize)
	var hb [wire.MaxHeaderSize]byte
	var h wire.Header
	for {
		if _, err := io.ReadFull(br, hb[:wire.BaseHeaderSize]); err != nil {
			if err == io.EOF {
				return nil
			}
			return e.readError(err)
		}
		n, err := wire.PeekHeaderSize(hb[:])
		if err != nil {
			return e.protocolError(err)
		}
		if _, err := io.ReadFull(br, hb[wire.BaseHeaderSize:n]); err != nil {
			return e.readError(err)
		}
		if _, err := h.Decode(hb[:n]); err != nil {
			return e.protocolError(err)
		}
		switch {
		case h.IsAck():
			err = e.handleAck()
		case h.Op == wire.OpMsg && !h.HasTag():
			err = e.handleMsg(br, &h)
		default:
			// Tagged messages and RMA are not offered on this endpoint.
			err = e.protocolError(fmt.Errorf("unexpected %v message (flags %#x)", h.Op, uint16(h.Flags)))
		}
		if err != nil {
			return err
		}
	}
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

// handleMsg places a message into the oldest posted receive, waiting for
// one if none is posted: meanwhile the socket is not read and TCP pushes
// back on the sender, as with libfabric.
func (e *endpoint) handleMsg(br *bufio.Reader, h *wire.Header) error {
	op, err := e.takeRecv()
	if err != nil {
		return err
	}
	var c core.Completion
	if h.Flags&wire.FlagRemoteCQData != 0 {
		c.Flags, c.Data = fi.CQFlags(fi.REMOTE_CQ_DATA), h.CQData
	}
	if op.Buf == nil {
		if h.Len > MaxDynamicRecv {
			e.recvDone(op, core.Completion{Err: fi.EMSGSIZE, OLen: h.Len}, false)
			return core.Errorf(fi.EMSGSIZE, "tcp: %v sent a message of %d bytes; receives without a buffer take at most %d",
				e.conn.RemoteAddr(), h.Len, MaxDynamicRecv)
		}
		op.Buf = make([]byte, h.Len)
	}
	n := min(uint64(len(op.Buf)), h.Len)
	if _, err := io.ReadFull(br, op.Buf[:n]); err != nil {
		e.recvDone(op, core.Completion{Err: fi.ECANCELED}, false)
		return e.readError(err)
	}
	if rest := h.Len - n; rest > 0 {
		// Truncated: keep the stream in step by reading the rest away.
		if err := discard(br, rest); err != nil {
			e.recvDone(op, core.Completion{Err: fi.ECANCELED}, false)
			return e.readError(err)
		}
		c.Err, c.OLen = fi.ETRUNC, rest
	}
	c.Len = n
	e.recvDone(op, c, h.Flags&(wire.FlagDeliveryComplete|wire.FlagCommitComplete) != 0)
	return nil
}

// takeRecv returns the oldest posted receive, waiting for one.
func (e *endpoint) takeRecv() (*core.Op, error) {
	for {
		select {
		case <-e.down:
			return nil, errDown
		default:
		}
		e.mu.Lock()
		op, ok := e.rxq.pop()
		e.mu.Unlock()
		if ok {
			return op, nil
		}
		select {
		case <-e.rxKick:
		case <-e.down:
		}
	}
}

// recvDone completes the receive the reader held. When the sender asked
// for an ACK, the writer sends it and then completes the receive, so an
// application that sees the completion and shuts down at once does not
// leave the sender waiting; receives filled after it complete behind it,
// in order. The reader does not wait for the writer.
func (e *endpoint) recvDone(op *core.Op, c core.Completion, ack bool) {
	e.mu.Lock()
	viaWriter := ack || e.rxDone.len() > 0 || e.rxHeld > 0
	if viaWriter {
		e.rxDone.push(rxDone{op, c, ack})
	} else {
		e.rxOut--
	}
	e.mu.Unlock()
	if viaWriter {
		kick(e.txKick)
		return
	}
	e.completeOp(op, c)
}

// discard reads n bytes away.
func discard(br *bufio.Reader, n uint64) error {
	for n > 0 {
		k, err := br.Discard(int(min(n, 1<<30)))
		n -= uint64(k)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
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

// writer is the writer goroutine's reusable state: one writev sends the
// ACKs of up to maxBatch filled receives and up to maxBatch messages, with
// headers encoded into hdrs.
type writer struct {
	filled [maxBatch]rxDone
	items  [maxBatch]txItem
	hdrs   [maxBatch][wire.MaxHeaderSize]byte
	acks   [maxBatch * wire.BaseHeaderSize]byte
	iov    [][]byte
	bufs   net.Buffers
	acked  int   // sends of the batch that complete on their ACK, not when written
	id     uint8 // the header id of the next message: a per-connection sequence
}

// writeLoop sends the ACKs owed and queued sends, ACKs first (like
// libfabric's priority queue), in batches of one writev each. Then it
// completes the batch's filled receives and sends.
func (e *endpoint) writeLoop() {
	defer e.wg.Done()
	w := &writer{iov: make([][]byte, 0, 2*maxBatch+1)}
	for {
		nf, n, ok := e.nextBatch(w)
		if !ok {
			return
		}
		iov := w.iov[:0]
		nacks := 0
		for _, r := range w.filled[:nf] {
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
		for i := range w.items[:n] {
			it := &w.items[i]
			op := it.op
			h := wire.Header{Op: wire.OpMsg, Flags: it.flags, ID: w.id, Len: uint64(len(op.Buf))}
			w.id++
			if op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0 {
				h.Flags |= wire.FlagRemoteCQData
				h.CQData = op.Data
			}
			k, _ := h.Encode(w.hdrs[i][:])
			iov = append(iov, w.hdrs[i][:k])
			payload := op.Buf
			if it.inj != nil {
				payload = it.inj[:len(op.Buf)]
			}
			if len(payload) > 0 {
				iov = append(iov, payload)
			}
		}
		w.bufs = iov
		_, err := w.bufs.WriteTo(e.conn)
		clear(iov)
		w.iov = iov[:0]
		e.mu.Lock()
		e.rxOut -= nf
		e.txOut -= n - w.acked
		e.mu.Unlock()
		for i := range w.filled[:nf] {
			e.completeOp(w.filled[i].op, w.filled[i].c) // data placed, ACK sent or lost with the connection
			w.filled[i] = rxDone{}
		}
		for i := range w.items[:n] {
			it := &w.items[i]
			if !it.needsAck() {
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
		if err != nil {
			e.writeFailed(err)
			return
		}
	}
}

// nextBatch waits for work and moves it into w: nf filled receives (whose
// ACKs to send) and n sends. Sends that wait for an ACK go to the ACK queue
// now, before the peer can answer. ok is false when the writer must stop;
// what it leaves queued, flush completes.
func (e *endpoint) nextBatch(w *writer) (nf, n int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rxHeld = 0 // the previous batch is complete
	for e.rxDone.len() == 0 && e.txq.len() == 0 {
		e.mu.Unlock()
		select {
		case <-e.txKick:
		case <-e.down:
		}
		e.mu.Lock()
		if e.state != stConnected || e.shutdown || e.failure != nil {
			return 0, 0, false
		}
	}
	if e.state != stConnected || e.shutdown || e.failure != nil {
		return 0, 0, false
	}
	for nf < maxBatch {
		r, ok := e.rxDone.pop()
		if !ok {
			break
		}
		w.filled[nf] = r
		nf++
	}
	e.rxHeld = nf
	w.acked = 0
	for n < maxBatch {
		it, ok := e.txq.pop()
		if !ok {
			break
		}
		if it.needsAck() {
			e.ackq.push(it)
			w.acked++
		}
		w.items[n] = it
		n++
	}
	return nf, n, true
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
	shutdownConn(e.conn)
}
