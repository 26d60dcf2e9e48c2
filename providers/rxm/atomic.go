package rxm

import (
	"fmt"
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Atomics over RDM, as libfabric 1.17's rxm does them (docs/rxm.md 5.8):
// in software, by messages.
//
// Initiator: fi_atomic, fi_fetch_atomic and fi_compare_atomic become a
// request (rxm header type 4, op 6, 7 or 8, one fi_rma_ioc naming the
// target, the operand and the compare values) sent like an eager message,
// in the same queue as sends, with a msg_id of the endpoint's. The
// operation completes when the request's send has completed and the
// peer's response (type 5, the same msg_id) has arrived: with the values
// from before it copied into Op.Result, or with the response's status as
// the completion's error (-FI_EACCES for a bad key, as libfabric's target
// answers). An atomic counts against tx_size until then.
//
// Target: a request is decoded, each entry's memory found through the
// endpoint's events (EndpointEvents.Region, as for peers' RMA) with the
// access its kind needs, the operation applied by package core/atomic
// (under the lock that serialises atomics across the daemon), and the
// response sent on the same connection; a key, range or access that does
// not check out is answered with -FI_EACCES, an op/datatype pair rxm does
// not take with -FI_EOPNOTSUPP, and the connection stays. The peer's
// operation is reported as libfabric counts it: fi_atomic as a remote
// write, the fetching kinds as a remote read (EndpointEvents.Remote with
// FI_ATOMIC). A malformed request ends the connection, as any malformed
// message does.
//
// Responses are posted at once while a connection has fewer than
// replySends in flight; beyond, they wait in order, each holding the
// receive buffer its request came in, so that a peer that does not read
// its responses runs out of room to send requests (TCP back-pressure).

// QueryAtomic answers fi_query_atomic (core.Atomics): for FI_EP_RDM with
// rxm's table (package core/atomic) and counts (rxm_ep_query_atomic: an
// rxm buffer less the atomic header, halved for compares, over the
// element size); other types are the wrapped domain's, if it has atomics.
func (d *domain) QueryAtomic(t fi.EPType, k core.OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error) {
	if t != fi.EP_RDM {
		if a, ok := d.inner.(core.Atomics); ok {
			return a.QueryAtomic(t, k, dt, op)
		}
		return 0, 0, core.Errorf(fi.EOPNOTSUPP, "rxm: %v endpoints of domain %s have no atomics", t, d.name)
	}
	if k != core.OpAtomic && k != core.OpFetchAtomic && k != core.OpCompareAtomic {
		return 0, 0, core.Errorf(fi.EINVAL, "rxm: operation kind %d is not an atomic", k)
	}
	ak, _ := atomicKinds(k)
	if !atomic.Supported(ak, dt, op) {
		return 0, 0, core.Errorf(fi.EOPNOTSUPP, "rxm: %v with %v on %v is not supported", ak, op, dt)
	}
	s := atomic.Size(dt)
	return maxAtomicCount(ak, s), uint64(s), nil
}

var _ core.Atomics = (*domain)(nil)

// replySends bounds the atomic responses in flight on a connection; its
// send queue has room for them beyond tx_size and ctrlSends.
const replySends = 256

// atomicSend is the initiator's state of one atomic; its sendItem is in
// endpoint.atomics under id until it completes. Guarded by endpoint.mu.
type atomicSend struct {
	id       uint64
	conn     *conn // the connection the request went out on; nil while queued
	sent     bool  // the request's send has completed
	answered bool  // the response has arrived
	err      fi.Errno
}

// reply is a response to a peer's atomic, waiting to be posted or in
// flight.
type reply struct {
	conn *conn
	buf  *[]byte  // pooled: header, response body, result
	msg  core.Op  // the send of buf
	recv *core.Op // while it waits: the receive buffer of the request
}

// atomicKinds gives the core/atomic kind and rxm op of each atomic kind.
func atomicKinds(k core.OpKind) (atomic.Kind, wire.Op) {
	switch k {
	case core.OpFetchAtomic:
		return atomic.Fetch, wire.OpAtomicFetch
	case core.OpCompareAtomic:
		return atomic.Compare, wire.OpAtomicCompare
	}
	return atomic.Write, wire.OpAtomic
}

// postAtomic starts an atomic of op.Kind to op.Peer. Its elements are
// len(op.Buf) over the datatype's size for OpAtomic, len(op.Result) over it
// for the others. The operand and compare values are copied at Post.
func (e *endpoint) postAtomic(op *core.Op) error {
	k, wop := atomicKinds(op.Kind)
	size := atomic.Size(op.Datatype)
	n, operand, compare := len(op.Buf), op.Buf, op.Compare
	if op.Kind != core.OpAtomic {
		n = len(op.Result)
	}
	if op.AtomicOp == fi.ATOMIC_READ {
		operand = nil
	}
	if op.Kind != core.OpCompareAtomic {
		compare = nil
	}
	wantCompare := 0
	if op.Kind == core.OpCompareAtomic {
		wantCompare = n
	}
	switch {
	case e.info.Caps&fi.ATOMIC == 0:
		return core.Errorf(fi.EOPNOTSUPP, "rxm: atomic on an endpoint without FI_ATOMIC")
	case op.Flags&fi.OpFlags(fi.REMOTE_CQ_DATA) != 0:
		return core.Errorf(fi.EINVAL, "rxm: atomics carry no remote CQ data")
	case !atomic.Supported(k, op.Datatype, op.AtomicOp):
		return core.Errorf(fi.EOPNOTSUPP, "rxm: %v with %v on %v is not supported", k, op.AtomicOp, op.Datatype)
	case n == 0 || n%size != 0:
		return core.Errorf(fi.EINVAL, "rxm: an atomic of %d bytes of %d-byte elements", n, size)
	case op.AtomicOp != fi.ATOMIC_READ && len(operand) != n:
		return core.Errorf(fi.EINVAL, "rxm: an atomic of %d bytes with %d operand bytes", n, len(operand))
	case len(compare) != wantCompare:
		return core.Errorf(fi.EINVAL, "rxm: an atomic of %d bytes with %d compare bytes", n, len(compare))
	case uint64(n/size) > maxAtomicCount(k, size):
		// fi_atomic(3): "The number of atomic operations in a single
		// request exceeds that supported by the underlying provider."
		// (The request, or the response with the values fetched, would
		// not fit one rxm buffer.)
		return core.Errorf(fi.EMSGSIZE, "rxm: an atomic of %d elements; at most %d fit one message", n/size, maxAtomicCount(k, size))
	case op.Flags&fi.INJECT != 0 && (op.Kind != core.OpAtomic || n > e.inject):
		return core.Errorf(fi.EINVAL, "rxm: inject of a %v of %d bytes; inject_size is %d", k, n, e.inject)
	case !op.Peer.IP.Addr().IsValid() || op.Peer.IP.Port() == 0:
		return core.Errorf(fi.EINVAL, "rxm: atomic without a destination address")
	}
	req := wire.AtomicRequest{Datatype: op.Datatype, AtomicOp: op.AtomicOp, Count: 1, Operand: operand, Compare: compare}
	req.Ioc[0] = wire.RMAIoc{Addr: op.Addr, Count: uint64(n / size), Key: op.Key}
	it := &sendItem{op: op, buf: bufPool.Get().(*[]byte), atomic: &atomicSend{}}
	body, err := req.AppendBody((*it.buf)[wire.HeaderSize:wire.HeaderSize], wop)
	if err != nil {
		it.free()
		return core.Errorf(fi.EINVAL, "rxm: %v", err)
	}
	it.hdr = req.Header(0, 0, wop)
	it.msg = core.Op{Kind: core.OpSend, Buf: (*it.buf)[:wire.HeaderSize+len(body)]}
	return e.enqueue(it, "atomic")
}

// maxAtomicCount is the most elements of size bytes one atomic of kind k
// carries: an rxm buffer less the atomic header, halved when compare
// values come too (rxm_ep_query_atomic). Its request and its response
// then fit one rxm buffer each.
func maxAtomicCount(k atomic.Kind, size int) uint64 {
	room := EagerLimit - wire.AtomicHeaderSize
	if k == atomic.Compare {
		room /= 2
	}
	return uint64(room / size)
}

// atomicSent is the completion of an atomic request's send.
func (e *endpoint) atomicSent(it *sendItem, c core.Completion) {
	e.mu.Lock()
	as := it.atomic
	as.sent = true
	if c.Err != 0 && as.err == 0 {
		as.err = c.Err
	}
	fin := e.finishAtomicLocked(it)
	e.mu.Unlock()
	it.free()
	fin()
}

// finishAtomicLocked ends an atomic that is over: its request sent and
// answered (or failed). It returns what completes the application's
// operation, to be called without mu.
func (e *endpoint) finishAtomicLocked(it *sendItem) func() {
	as := it.atomic
	if !as.sent || (!as.answered && as.err == 0) || e.atomics[as.id] != it {
		return func() {}
	}
	delete(e.atomics, as.id)
	e.txOut--
	// libfabric's rxm reports an atomic's completion with len 0.
	comp := core.Completion{Flags: it.op.Kind.CQFlags(), Err: as.err}
	return func() { it.op.Complete(comp) }
}

// atomicAnswered is the peer's response h, body on c to one of our
// atomics. A response that answers nothing of ours on c is an error that
// ends c.
func (e *endpoint) atomicAnswered(c *conn, h *wire.Header, body []byte) error {
	resp, err := wire.DecodeAtomicResponse(h, body)
	if err != nil {
		return err
	}
	dt, aop, _ := h.AtomicFields()
	e.mu.Lock()
	it := e.atomics[h.MsgID]
	if it == nil || it.atomic.conn != c || it.atomic.answered {
		e.mu.Unlock()
		return fmt.Errorf("atomic response for msg_id %d, which is not an atomic in flight on this connection", h.MsgID)
	}
	op := it.op
	if _, wop := atomicKinds(op.Kind); h.Op != wop || dt != op.Datatype || aop != op.AtomicOp {
		e.mu.Unlock()
		return fmt.Errorf("atomic response for msg_id %d is for %s %v %v; the request was %s %v %v", h.MsgID, h.Op, aop, dt, wop, op.AtomicOp, op.Datatype)
	}
	as := it.atomic
	as.answered = true
	switch {
	case resp.Status != 0:
		as.err = fi.Errno(-resp.Status)
	case op.Kind != core.OpAtomic && len(resp.Result) != len(op.Result):
		as.err = fi.EIO // as libfabric's rxm fails a result of the wrong size
	default:
		copy(op.Result, resp.Result)
	}
	fin := e.finishAtomicLocked(it)
	e.mu.Unlock()
	fin()
	return nil
}

// atomicsGoneLocked fails the atomics whose request went out on c, which
// has ended (they complete once their send has), and drops the responses
// waiting to go out on it. It returns the completions to call without mu.
func (e *endpoint) atomicsGoneLocked(c *conn, code fi.Errno) []func() {
	e.replies = slices.DeleteFunc(e.replies, func(rp *reply) bool {
		if rp.conn != c {
			return false
		}
		c.waiting--
		bufPool.Put(rp.buf)
		return true
	})
	var fins []func()
	for _, it := range e.atomics {
		if as := it.atomic; as.conn == c && !as.answered && as.err == 0 {
			as.err = code
			fins = append(fins, e.finishAtomicLocked(it))
		}
	}
	return fins
}

// serveAtomic answers the peer's atomic request h, body, which came on c
// in the receive buffer recv: it applies the operation and sends the
// response. An error (a malformed request) ends c.
func (e *endpoint) serveAtomic(c *conn, h *wire.Header, body []byte, recv *core.Op) error {
	req, err := wire.DecodeAtomicRequest(h, body)
	if err != nil {
		return err
	}
	k, _ := atomicKinds(kindOfWire(h.Op))
	buf := bufPool.Get().(*[]byte)
	result := (*buf)[wire.HeaderSize+wire.AtomicRespSize:]
	n, status := e.applyAtomic(k, &req, result)
	resp := wire.AtomicResponse{Status: status}
	if status == 0 && k != atomic.Write {
		resp.Result = result[:n]
	}
	b, err := resp.AppendBody((*buf)[wire.HeaderSize:wire.HeaderSize], h.Op, req.Datatype)
	if err == nil {
		e.mu.Lock()
		rh := resp.Header(uint64(c.remoteIndex), h)
		e.mu.Unlock()
		err = rh.Encode(*buf)
	}
	if err != nil {
		bufPool.Put(buf)
		return err
	}
	rp := &reply{conn: c, buf: buf, recv: recv}
	rp.msg = core.Op{Kind: core.OpSend, Buf: (*buf)[:wire.HeaderSize+len(b)]}
	rp.msg.OnComplete(func(*core.Op, core.Completion) { e.replySent(rp) })
	e.mu.Lock()
	if c.waiting > 0 || c.replying >= replySends {
		e.replies = append(e.replies, rp) // recv is given back when it is posted
		c.waiting++
		e.mu.Unlock()
		return nil
	}
	c.replying++
	rp.recv = nil
	kick := c.reuseLocked(recv)
	e.mu.Unlock()
	if kick {
		e.wake()
	}
	e.postReply(rp)
	return nil
}

// kindOfWire is the operation kind of an rxm atomic op.
func kindOfWire(o wire.Op) core.OpKind {
	switch o {
	case wire.OpAtomicFetch:
		return core.OpFetchAtomic
	case wire.OpAtomicCompare:
		return core.OpCompareAtomic
	}
	return core.OpAtomic
}

// applyAtomic performs req of kind k on the endpoint's memory, the
// values from before it going to result, and returns their length and the
// response's status: 0, -FI_EACCES when an entry's key, range or access
// does not check out (nothing is applied then), -FI_EOPNOTSUPP for a pair
// rxm does not take, -FI_EMSGSIZE for more elements than one response
// carries (an FI_ATOMIC_READ asks for them without sending any). A done
// operation is reported as libfabric counts it.
func (e *endpoint) applyAtomic(k atomic.Kind, req *wire.AtomicRequest, result []byte) (int, int32) {
	if !atomic.Supported(k, req.Datatype, req.AtomicOp) {
		return 0, -int32(fi.EOPNOTSUPP)
	}
	var elems uint64
	for _, v := range req.Ioc[:req.Count] {
		elems += v.Count // at most 4 x EagerLimit: wire's check
	}
	if elems > maxAtomicCount(k, atomic.Size(req.Datatype)) {
		return 0, -int32(fi.EMSGSIZE)
	}
	// The access libfabric's rxm target checks (ofi_rx_mr_reg_flags).
	access := fi.REMOTE_READ | fi.REMOTE_WRITE
	switch {
	case k == atomic.Write:
		access = fi.REMOTE_WRITE
	case req.AtomicOp == fi.ATOMIC_READ:
		access = fi.REMOTE_READ
	}
	size := uint64(atomic.Size(req.Datatype))
	var targets [wire.MaxIov][]byte
	var releases [wire.MaxIov]func()
	count := int(req.Count)
	defer func() {
		for _, rel := range releases[:count] {
			if rel != nil {
				rel()
			}
		}
	}()
	for i, v := range req.Ioc[:count] {
		buf, rel, err := e.ev.Region(v.Key, v.Addr, v.Count*size, access)
		if err != nil {
			return 0, -int32(fi.EACCES)
		}
		targets[i], releases[i] = buf, rel
	}
	off := 0
	for _, t := range targets[:count] {
		var operand, compare, res []byte
		if len(req.Operand) > 0 {
			operand = req.Operand[off : off+len(t)]
		}
		if len(req.Compare) > 0 {
			compare = req.Compare[off : off+len(t)]
		}
		if k != atomic.Write {
			res = result[off : off+len(t)]
		}
		if err := atomic.Apply(k, req.Datatype, req.AtomicOp, t, operand, compare, res); err != nil {
			return 0, -int32(core.Code(err)) // not reached: the request was validated
		}
		off += len(t)
	}
	flags := fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ)
	if k == atomic.Write {
		flags = fi.CQFlags(fi.ATOMIC | fi.REMOTE_WRITE)
	}
	e.ev.Remote(core.Completion{Flags: flags, Len: uint64(off), Key: req.Ioc[0].Key})
	return off, 0
}

// postReply sends a response; a failed post means the connection is
// going down.
func (e *endpoint) postReply(rp *reply) {
	if err := rp.conn.tcp.Post(&rp.msg); err != nil {
		e.replySent(rp)
	}
}

// replySent frees a response's slot and buffer once sent (or failed):
// waiting responses may go.
func (e *endpoint) replySent(rp *reply) {
	e.mu.Lock()
	rp.conn.replying--
	waiting := len(e.replies) > 0
	e.mu.Unlock()
	bufPool.Put(rp.buf)
	if waiting {
		e.wake()
	}
}

// sendReplies posts the waiting responses, in order, of connections with
// room, and gives back their receive buffers; those of connections that
// have ended are dropped. The worker calls it.
func (e *endpoint) sendReplies() {
	e.mu.Lock()
	if len(e.replies) == 0 {
		e.mu.Unlock()
		return
	}
	var post []*reply
	var drop []*reply
	keep := e.replies[:0]
	kick := false
	for _, rp := range e.replies {
		switch c := rp.conn; {
		case c.dead || c.tcp == nil:
			c.waiting--
			drop = append(drop, rp)
		case c.replying >= replySends:
			keep = append(keep, rp)
		default:
			c.waiting--
			c.replying++
			kick = c.reuseLocked(rp.recv) || kick
			rp.recv = nil
			post = append(post, rp)
		}
	}
	clear(e.replies[len(keep):])
	e.replies = keep
	e.mu.Unlock()
	if kick {
		e.wake()
	}
	for _, rp := range drop {
		bufPool.Put(rp.buf)
	}
	for _, rp := range post {
		e.postReply(rp)
	}
}
