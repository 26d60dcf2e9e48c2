package core

// The shell's data file of an endpoint: one message per write or read,
// and the ctl verbs dest, tag, src, cqdata and rxbuf that shape them.

import (
	"context"
	"fmt"

	"github.com/fabricfs/fabricfs/core/fi"
)

// dataParams are the parameters of the data file's operations that the
// ctl verbs tag, src, cqdata and rxbuf set. The zero value, but for src,
// is fi_send and fi_recv of the whole message from anyone.
type dataParams struct {
	tagged      bool   // writes are fi_tsend with tag; reads fi_trecv of tag under ignore
	tag, ignore uint64 //
	src         uint64 // FI_DIRECTED_RECV: the only sender reads accept; ADDR_UNSPEC: anyone
	hasData     bool   // writes carry remote CQ data (fi_senddata)
	data        uint64 //
	rxbuf       uint64 // the size of a read's receive; 0: the message's
}

var defaultDataParams = dataParams{src: uint64(fi.ADDR_UNSPEC)}

// SetDest is the ctl verb dest of a connectionless endpoint: data-file writes
// go to fi_addr a of its AV from now on.
func (e *EP) SetDest(a uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.connectionlessLocked() {
		return Errorf(fi.EOPBADSTATE, "dest is for FI_EP_RDM and FI_EP_DGRAM endpoints; a connected endpoint sends to its peer")
	}
	if e.av == nil {
		return Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	if _, ok := e.av.Lookup(a); !ok {
		return Errorf(fi.EINVAL, "%s has no fi_addr %d", e.av.obj, a)
	}
	e.dest = a
	return nil
}

// maxRxBuf is the largest receive size of the ctl verb rxbuf: as large
// as the providers' receives sized to the message.
const maxRxBuf = 64 << 20

// SetTag is the ctl verb tag: writes to the data file become fi_tsend
// with tag, reads fi_trecv matching tag under ignore. It needs FI_TAGGED.
func (e *EP) SetTag(tag, ignore uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.info.Caps&fi.TAGGED == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint's caps lack FI_TAGGED")
	}
	e.shell.tagged, e.shell.tag, e.shell.ignore = true, tag, ignore
	return nil
}

// ClearTag is `tag off`: the data file's messages are untagged again.
func (e *EP) ClearTag() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.tagged, e.shell.tag, e.shell.ignore = false, 0, 0
}

// SetSrc is the ctl verb src: reads of the data file accept messages from
// fi_addr a of the AV only (FI_DIRECTED_RECV); fi.ADDR_UNSPEC (`src any`)
// accepts anyone again.
func (e *EP) SetSrc(a uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a == uint64(fi.ADDR_UNSPEC) {
		e.shell.src = a
		return nil
	}
	if e.info.Caps&fi.DIRECTED_RECV == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint's caps lack FI_DIRECTED_RECV")
	}
	if e.av == nil {
		return Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	if _, ok := e.av.Lookup(a); !ok {
		return Errorf(fi.EINVAL, "%s has no fi_addr %d", e.av.obj, a)
	}
	e.shell.src = a
	return nil
}

// SetCQData is the ctl verb cqdata: writes to the data file carry remote
// CQ data v (fi_senddata), which must fit the domain's cq_data_size.
func (e *EP) SetCQData(v uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	size := e.info.DomainAttr.CQDataSize
	if size == 0 {
		return Errorf(fi.EOPNOTSUPP, "the domain's cq_data_size is 0")
	}
	if size < 8 && v>>(8*size) != 0 {
		return Errorf(fi.EINVAL, "%#x does not fit cq_data_size %d", v, size)
	}
	e.shell.hasData, e.shell.data = true, v
	return nil
}

// ClearCQData is `cqdata off`.
func (e *EP) ClearCQData() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.hasData, e.shell.data = false, 0
}

// SetRxBuf is the ctl verb rxbuf: a read of the data file posts a receive
// of n bytes (1..maxRxBuf); 0 (`rxbuf off`) sizes it to the message again.
func (e *EP) SetRxBuf(n uint64) error {
	if n > maxRxBuf {
		return Errorf(fi.EINVAL, "%d bytes is more than %d", n, maxRxBuf)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shell.rxbuf = n
	return nil
}

// WriteData sends b as one message: a write to the data file. The message
// is an fi_send with the endpoint's default flags (tx_op_flags), so with
// none it is reported on the send CQ unless that binding is selective; an
// fi_tsend after `tag`, with remote CQ data after `cqdata`. A connectionless
// endpoint sends it to its dest.
func (e *EP) WriteData(ctx context.Context, b []byte) error {
	e.mu.Lock()
	p := e.shell
	e.mu.Unlock()
	op := &Op{Kind: OpSend, Buf: b}
	if p.tagged {
		op.Kind, op.Tag = OpTSend, p.tag
	}
	if p.hasData {
		op.Flags, op.Data = fi.OpFlags(fi.REMOTE_CQ_DATA), p.data
	}
	return e.do(ctx, op, "send", func() {})
}

// do posts op, addressed to the dest of a connectionless endpoint, and waits
// for its completion, whose error it returns: the data file's writes and
// the ctl's RMA verbs. The completion also reaches the CQ and counters as
// every operation's. When ctx ends first (a signal), do returns nil: the
// operation was taken and goes on. release runs once op is no longer in
// use: after its completion, also when ctx ends first, or when it could
// not be posted.
func (e *EP) do(ctx context.Context, op *Op, what string, release func()) error {
	e.mu.Lock()
	rdm, dest := e.connectionlessLocked(), e.dest
	e.mu.Unlock()
	if rdm {
		if dest == uint64(fi.ADDR_UNSPEC) {
			release()
			return Errorf(fi.ENOTCONN, "no destination; write 'dest FIADDR' to ctl first")
		}
		var err error
		if op.Peer, op.RxCtx, err = e.peerRx(dest); err != nil {
			release()
			return err
		}
	}
	op.Flags |= e.defaultFlags(op.Kind)
	return e.postWait(ctx, op, what, release)
}

// postWait posts op and waits for its completion, as do says.
func (e *EP) postWait(ctx context.Context, op *Op, what string, release func()) error {
	done := make(chan Completion, 1)
	if err := e.post(op, func(c Completion) { done <- c }); err != nil {
		release()
		return err
	}
	select {
	case c := <-done:
		release()
		if c.Err != 0 {
			return Errorf(c.Err, "%s: %v", what, c.Err)
		}
		return nil
	case <-ctx.Done():
		// The provider has taken the operation; its completion still
		// reaches the CQ and counters. The write succeeds: failing it
		// with EINTR would have the writer (Go, libc wrappers, shells)
		// write it again, and the message would go twice.
		go func() {
			<-done
			release()
		}()
		return nil
	}
}

// defaultFlags are the flags of the shell's operations of kind k (the
// data file, the ctl verbs write, read and the atomics): the endpoint's
// tx_op_flags, or rx_op_flags for a receive. Like fi_send, fi_recv,
// fi_write and fi_read, which take no flags of their own, they use "the
// default operation flags" of their context (fi_endpoint(3)):
// FI_COMPLETION under a selective binding, FI_INJECT,
// FI_DELIVERY_COMPLETE. Ring requests carry their own flags, as
// fi_sendmsg's. FI_MULTI_RECV is left out: a read of the data file takes
// one message into a buffer of its own; and FI_INJECT from fetch_atomic
// and compare_atomic, which fi_atomic(3) offers no inject form of (only
// fi_inject_atomic, a base atomic).
func (e *EP) defaultFlags(k OpKind) fi.OpFlags {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case k.IsRecv():
		return e.info.RxAttr.OpFlags &^ fi.OpFlags(fi.MULTI_RECV)
	case k == OpFetchAtomic || k == OpCompareAtomic:
		return e.info.TxAttr.OpFlags &^ (fi.INJECT | fi.MORE)
	}
	// FI_MORE is the engine's (Flusher): a send of the data file is the
	// last of its pass.
	return e.info.TxAttr.OpFlags &^ fi.MORE
}

// ReadData is a read of the data file. It returns the rest of the current
// message if a previous read left some; otherwise, at offset 0, it receives
// the next message (blocking), and at any other offset it returns 0 (end of
// file). So `cat data` prints one message and a program reads message after
// message with pread at offset 0.
func (e *EP) ReadData(ctx context.Context, p []byte, off int64) (int, error) {
	e.dataMu.lock()
	defer e.dataMu.unlock()
	if len(e.pending) == 0 {
		if err := e.pendingErr; err != nil {
			e.pendingErr = nil
			return 0, err
		}
		if off != 0 {
			return 0, nil
		}
		msg, err := e.recvMessage(ctx)
		e.pending = msg
		if Code(err) == fi.ETRUNC {
			e.pendingErr, err = err, nil // after the bytes that fit
		}
		if err != nil || len(msg) == 0 {
			return 0, err
		}
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

// recvMessage posts a receive, with a buffer the provider sizes to the
// message or of rxbuf bytes, and waits for it; after `tag` it is an
// fi_trecv, after `src` it takes that sender's messages only. If ctx ends
// first the receive is cancelled; if it had already completed, the
// message is returned with fi.EINTR, to be kept for the next read; if it
// cannot be cancelled, it stays posted and the next read waits for it
// instead of posting one. A receive taken back so is withdrawn: its
// FI_ECANCELED reaches neither the CQ nor a counter, since the read that
// posted it had no effect (a signal handler's restarted read posts
// another). A message longer than rxbuf is returned truncated, with
// fi.ETRUNC. Called with dataMu held.
func (e *EP) recvMessage(ctx context.Context) ([]byte, error) {
	h := e.held
	e.held = nil
	if h == nil {
		var err error
		if h, err = e.postRecvMessage(); err != nil {
			return nil, err
		}
	}
	op, done := h.op, h.done
	var c Completion
	select {
	case c = <-done:
	case <-ctx.Done():
		e.mu.Lock()
		prov := e.prov
		op.withdrawn = true // before Cancel, which may complete it
		e.mu.Unlock()
		if !prov.Cancel(op) {
			e.mu.Lock()
			op.withdrawn = false
			e.mu.Unlock()
			select {
			case c = <-done:
			default:
				// Under way, or a provider that cannot take a
				// receive back (verbs): the next read takes its
				// message.
				e.held = h
				return nil, Errorf(fi.EINTR, "interrupted; the receive stays posted for the next read")
			}
		} else {
			c = <-done
		}
		if c.Err == 0 {
			return placed(op, c), Errorf(fi.EINTR, "interrupted; the message is kept for the next read")
		}
		if c.Err == fi.ECANCELED {
			return nil, Errorf(fi.EINTR, "interrupted")
		}
	}
	switch c.Err {
	case 0:
		return placed(op, c), nil
	case fi.ETRUNC:
		return placed(op, c), Errorf(c.Err, "receive: a message of %d bytes, truncated to rxbuf %d", c.Len+c.OLen, c.Len)
	}
	return nil, Errorf(c.Err, "receive: %v", c.Err)
}

// heldRecv is a receive of the data file, the channel of its completion,
// and a channel closed once the completion is in done (for poll).
type heldRecv struct {
	op      *Op
	done    chan Completion
	arrived chan struct{}
}

// postRecvMessage posts a receive for a read of the data file, with the
// parameters of the ctl verbs tag, src and rxbuf.
func (e *EP) postRecvMessage() (*heldRecv, error) {
	e.mu.Lock()
	p, srx := e.shell, e.srx
	e.mu.Unlock()
	if srx != nil {
		return nil, Errorf(fi.EOPNOTSUPP, "the endpoint takes its receives from %s", srx.obj)
	}
	op := &Op{Kind: OpRecv, Flags: e.defaultFlags(OpRecv)}
	if p.tagged {
		op.Kind, op.Tag, op.Ignore = OpTRecv, p.tag, p.ignore
	}
	if p.src != uint64(fi.ADDR_UNSPEC) {
		var err error
		if op.Peer, err = e.peer(p.src); err != nil {
			return nil, err
		}
	}
	if p.rxbuf > 0 {
		op.Buf = make([]byte, p.rxbuf)
	}
	h := &heldRecv{op: op, done: make(chan Completion, 1), arrived: make(chan struct{})}
	if err := e.post(op, func(c Completion) {
		h.done <- c
		close(h.arrived)
	}); err != nil {
		return nil, err
	}
	return h, nil
}

// MultiRecv is the ctl verb multi_recv: it posts a receive with
// FI_MULTI_RECV of n bytes at off in memory region mr, with op_context
// context, and returns once it is posted. The buffer takes message after
// message (fi_msg(3): "Received messages will be packed into the receive
// buffer until the buffer has been consumed"), each completing on the
// receive CQ with its place in the region (buf), until fewer than
// FI_OPT_MIN_MULTI_RECV bytes would be left: the completion that releases
// it has FI_MULTI_RECV. The receive carries the endpoint's rx_op_flags; it
// needs FI_MULTI_RECV in the endpoint's receive capabilities.
func (e *EP) MultiRecv(mr *Object, off, n, context uint64) error {
	e.mu.Lock()
	caps, srx := e.info.RxAttr.Caps, e.srx
	e.mu.Unlock()
	switch {
	case caps&fi.MULTI_RECV == 0:
		return Errorf(fi.EOPNOTSUPP, "the endpoint's receive caps lack FI_MULTI_RECV")
	case srx != nil:
		return Errorf(fi.EOPNOTSUPP, "the endpoint takes its receives from %s", srx.obj)
	case n == 0:
		return Errorf(fi.EINVAL, "a multi-receive buffer of 0 bytes")
	}
	op := &Op{Kind: OpRecv, Flags: e.defaultFlags(OpRecv) | fi.OpFlags(fi.MULTI_RECV), Context: context}
	if err := e.takeRegion(op, mr, off, n); err != nil {
		return err
	}
	// The region is held until the completion that releases the buffer,
	// the last of the receive.
	err := e.post(op, func(c Completion) {
		if c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0 {
			mr.drop()
		}
	})
	if err != nil {
		mr.drop()
	}
	return err
}

// Claim is the ctl verbs claim and discard of an endpoint with
// FI_BUFFERED_RECV: a receive with FI_CLAIM of the message buffered under
// claim key into n bytes at off in memory region mr, with op_context
// context, or with FI_DISCARD (mr nil), which drops it. It returns when
// the receive completes, with its error (fi.ENOMSG: the key holds no
// message); the completion also reaches the receive CQ, as every
// operation's.
func (e *EP) Claim(ctx context.Context, key uint64, mr *Object, off, n, context uint64) error {
	e.mu.Lock()
	buffered := e.info.Mode&fi.BUFFERED_RECV != 0
	e.mu.Unlock()
	if !buffered {
		return Errorf(fi.EOPNOTSUPP, "the endpoint's mode lacks FI_BUFFERED_RECV")
	}
	op := &Op{Kind: OpRecv, Flags: e.defaultFlags(OpRecv) | fi.DISCARD, Key: key, Context: context}
	if mr == nil {
		return e.postWait(ctx, op, "discard", func() {})
	}
	op.Flags = op.Flags&^fi.DISCARD | fi.CLAIM
	if err := e.takeRegion(op, mr, off, n); err != nil {
		return err
	}
	return e.postWait(ctx, op, "claim", mr.drop)
}

// takeRegion points op, an operation of a ctl verb, at n bytes at off in
// memory region mr, which must be the endpoint owner's, and holds mr: the
// caller drops it once the operation is done, or at once if posting fails.
func (e *EP) takeRegion(op *Op, mr *Object, off, n uint64) error {
	if mr.Owner != e.obj.Owner {
		return Errorf(fi.EACCES, "memory region %s belongs to another user", mr.ID)
	}
	if err := mr.hold(); err != nil {
		return err
	}
	buf, mem, memOff, err := mr.Impl.(*MR).sliceMem(off, n)
	if err != nil {
		mr.drop()
		return err
	}
	op.Buf, op.Mem, op.MemOff, op.desc, op.offset = buf, mem, memOff, mr.Serial, off
	return nil
}

// DataReady is poll(2) on ep/N/data: it reports whether a read at offset
// 0 would not block now, and gives a channel closed when that may change.
// A message is known only once a receive takes it, so with post DataReady
// posts the receive the next read would post (and that read then takes
// it): a message, or an error a read would report at once, is ready.
// Without post it only looks at such a receive, if there is one. While a
// read blocks, the message is that read's: not ready, until it returns.
func (e *EP) DataReady(post bool) (bool, <-chan struct{}) {
	locked, freed := e.dataMu.tryLock()
	if !locked {
		return false, freed
	}
	defer e.dataMu.unlock()
	if len(e.pending) > 0 || e.pendingErr != nil {
		return true, nil
	}
	if e.held == nil {
		if !post {
			return false, nil
		}
		h, err := e.postRecvMessage()
		if err != nil {
			return true, nil // the read fails at once
		}
		e.held = h
	}
	if len(e.held.done) > 0 {
		return true, nil
	}
	return false, e.held.arrived
}

// placed is the message a receive's completion c says op.Buf holds. A
// receive taken by the remote CQ data of a peer's RMA write (a provider
// with FI_RX_CQ_DATA, such as verbs) holds none: its completion's length
// is the write's.
func placed(op *Op, c Completion) []byte {
	if c.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		return nil
	}
	return op.Buf[:min(c.Len, uint64(len(op.Buf)))]
}

// fields are the data file's parameters in status: in the line only the
// ones set ("tag=0x1/0x0 src=fi_addr:2 cqdata=0x5 rxbuf=64"), in JSON
// every one, null when not set.
func (p dataParams) fields() []Field {
	tag := Field{Key: "tag", Text: fmt.Sprintf("%#x/%#x", p.tag, p.ignore), Hide: !p.tagged}
	if p.tagged {
		tag.JSON = Record{{Key: "tag", JSON: p.tag}, {Key: "ignore", JSON: p.ignore}}
	}
	src := Field{Key: "src", Text: fmt.Sprintf("fi_addr:%d", p.src), Hide: p.src == uint64(fi.ADDR_UNSPEC)}
	if !src.Hide {
		src.JSON = p.src
	}
	cqdata := Field{Key: "cqdata", Text: fmt.Sprintf("%#x", p.data), Hide: !p.hasData}
	if p.hasData {
		cqdata.JSON = p.data
	}
	rxbuf := Field{Key: "rxbuf", Text: fmt.Sprint(p.rxbuf), Hide: p.rxbuf == 0}
	if p.rxbuf > 0 {
		rxbuf.JSON = p.rxbuf
	}
	return []Field{tag, src, cqdata, rxbuf}
}
