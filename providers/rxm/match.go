package rxm

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// Matching, as libfabric's rxm does it (docs/rxm.md 5.10): two queues,
// untagged and tagged; a message takes the first posted receive of its
// queue that matches (tag under the receive's ignore bits; with
// FI_DIRECTED_RECV, the receive's source address if it names one), or
// joins the queue's unexpected list; a new receive takes the first
// unexpected message it matches, in arrival order.

// message is a received message on its way to a receive.
type message struct {
	tagged  bool
	tag     uint64
	data    uint64     // remote CQ data
	flags   fi.CQFlags // fi.REMOTE_CQ_DATA or 0
	payload []byte     // eager: in a receive buffer until kept as unexpected
	src     netip.AddrPort
	rx      uint8 // rx_index: the receive context it was sent to

	// A rendezvous request: the size bytes are read from conn's peer,
	// where rndv says, and the read-done names id.
	rndv *wire.RndvHeader
	size uint64
	id   uint64
	conn *conn

	// A segmented message (sar.go) whose later segments are still to
	// come; size is its length, payload what came so far.
	sar *sarRecv

	readDone bool // not a message: the read-done of our rendezvous id

	// Not a message either: an atomic request or response (atomic.go),
	// with its body in payload.
	atomic bool
	hdr    wire.Header
}

// rndvCost is what an unexpected rendezvous request counts against the
// unexpected limit: its headers.
const rndvCost = wire.HeaderSize + wire.RndvHeaderSize

// len is the message's length.
func (msg *message) len() uint64 {
	if msg.rndv != nil || msg.sar != nil {
		return msg.size
	}
	return uint64(len(msg.payload))
}

// cost is what msg counts against the unexpected limit.
func (msg *message) cost() int {
	if msg.rndv != nil {
		return rndvCost
	}
	return len(msg.payload)
}

// matcher holds the posted receives and the unexpected messages, each by
// queue (0 untagged, 1 tagged). Guarded by endpoint.mu.
type matcher struct {
	directed bool // FI_DIRECTED_RECV: receives may name their source
	// named: a scalable endpoint with FI_NAMED_RX_CTX, whose receives take
	// only the messages sent to their context (Op.RxCtx, rx_index).
	named    bool
	limit    int // UnexpectedLimit
	recvs    [2][]*core.Op
	unexp    [2][]*message
	bytes    int                     // what the unexpected messages cost
	started  []*rndvRecv             // rendezvous receives matched, whose reads the worker starts
	multi    map[*core.Op]*multiRecv // the posted receives with FI_MULTI_RECV
	minMulti uint64                  // FI_OPT_MIN_MULTI_RECV
	claimed  map[uint64]*message     // messages claimed by FI_PEEK|FI_CLAIM, and buffered ones, by claim key (Op.Key)
	// report is core.BufferedEvents.Buffered on an endpoint with
	// FI_BUFFERED_RECV (buffered.go), nil otherwise; nextKey numbers
	// the buffered messages.
	report  func(core.Completion, []byte)
	nextKey uint64
	// bufferedMin is FI_OPT_BUFFERED_MIN; reports are the reports not
	// yet made, in the order of their messages: one waits while the
	// first bytes of a rendezvous message before it are being read.
	bufferedMin uint64
	reports     []*pendingReport
}

func queueOf(tagged bool) int {
	if tagged {
		return 1
	}
	return 0
}

func (m *matcher) matches(op *core.Op, msg *message) bool {
	if m.named && op.RxCtx != msg.rx {
		return false
	}
	if msg.tagged && (op.Tag|op.Ignore) != (msg.tag|op.Ignore) {
		return false
	}
	if m.directed && op.Peer != (fi.Addr{}) && !isMulti(op) && canon(op.Peer.IP) != msg.src {
		return false
	}
	return true
}

// arrived delivers msg to the first matching receive, or keeps a copy;
// with FI_BUFFERED_RECV it keeps and reports it.
func (m *matcher) arrived(msg *message) {
	if m.report != nil {
		m.buffer(msg)
		return
	}
	q := queueOf(msg.tagged)
	for i, op := range m.recvs[q] {
		if !m.matches(op, msg) {
			continue
		}
		m.recvs[q] = slices.Delete(m.recvs[q], i, i+1)
		if mr := m.multi[op]; mr != nil {
			m.arrivedMulti(op, mr, msg)
		} else {
			m.deliver(op, msg, op.Buf, 0, nil, false)
		}
		return
	}
	kept := keep(msg)
	m.unexp[q] = append(m.unexp[q], kept)
	m.bytes += kept.cost()
}

// post delivers the first unexpected message op matches, or queues op. It
// reports whether that brought the unexpected bytes back under the limit.
func (m *matcher) post(op *core.Op) bool {
	if isMulti(op) {
		return m.postMulti(op)
	}
	if op.Kind == core.OpTRecv && op.Flags&(fi.PEEK|fi.CLAIM) != 0 || m.claims(op) {
		return m.peek(op)
	}
	q := queueOf(op.Kind == core.OpTRecv)
	for i, msg := range m.unexp[q] {
		if m.matches(op, msg) {
			m.unexp[q] = slices.Delete(m.unexp[q], i, i+1)
			was := m.over()
			m.bytes -= msg.cost()
			m.deliver(op, msg, op.Buf, 0, nil, false)
			return was && !m.over()
		}
	}
	m.recvs[q] = append(m.recvs[q], op)
	return false
}

// peek serves a tagged receive with FI_PEEK or FI_CLAIM (fi_tagged(3)),
// which never waits. FI_PEEK looks for the first unexpected message op
// matches and completes op with its length, tag and data, or with
// fi.ENOMSG; with FI_CLAIM too the message is taken aside for a later
// FI_CLAIM receive of the same claim key (op.Key), with FI_DISCARD it is
// dropped. FI_CLAIM alone receives the claimed message into op's buffer,
// or drops it with FI_DISCARD. It reports whether taking a message brought
// the unexpected bytes back under the limit.
func (m *matcher) peek(op *core.Op) bool {
	c := core.Completion{Flags: op.Kind.CQFlags(), Err: fi.ENOMSG}
	if op.Flags&fi.PEEK == 0 {
		msg := m.claimed[op.Key]
		if msg == nil {
			op.Complete(c)
			return false
		}
		delete(m.claimed, op.Key)
		was := m.over()
		m.bytes -= msg.cost()
		if op.Flags&fi.DISCARD != 0 {
			m.discard(op, msg)
		} else {
			m.deliver(op, msg, op.Buf, 0, nil, false)
		}
		return was && !m.over()
	}
	i := slices.IndexFunc(m.unexp[1], func(msg *message) bool { return m.matches(op, msg) })
	if i < 0 {
		op.Complete(c)
		return false
	}
	msg := m.unexp[1][i]
	c = core.Completion{Flags: op.Kind.CQFlags() | msg.flags, Len: msg.len(), Data: msg.data, Tag: msg.tag,
		Src: fi.SockAddr(msg.src)}
	switch {
	case op.Flags&fi.DISCARD != 0:
		m.unexp[1] = slices.Delete(m.unexp[1], i, i+1)
		was := m.over()
		m.bytes -= msg.cost()
		m.discard(op, msg)
		return was && !m.over()
	case op.Flags&fi.CLAIM != 0 && m.claimed[op.Key] != nil:
		op.Complete(core.Completion{Flags: op.Kind.CQFlags(), Err: fi.EINVAL}) // the key holds a claim already
	case op.Flags&fi.CLAIM != 0:
		// A claimed message still counts against the unexpected
		// limit: a peer cannot fill the daemon through claims.
		m.unexp[1] = slices.Delete(m.unexp[1], i, i+1)
		if m.claimed == nil {
			m.claimed = make(map[uint64]*message)
		}
		m.claimed[op.Key] = msg
		op.Complete(c)
	default:
		op.Complete(c)
	}
	return false
}

// discard completes op with msg dropped: no bytes. A rendezvous request
// is answered as if read (its read-done, with nothing read), so that its
// sender completes.
func (m *matcher) discard(op *core.Op, msg *message) {
	c := core.Completion{Flags: op.Kind.CQFlags() | msg.flags, Data: msg.data, Tag: msg.tag, Src: fi.SockAddr(msg.src)}
	if msg.sar != nil {
		msg.sar.msg = nil // its later segments are dropped
	}
	if msg.rndv == nil {
		op.Complete(c)
		return
	}
	r := newRndvRecv(op, nil, msg, c)
	r.comp.Err, r.comp.OLen = 0, 0
	m.started = append(m.started, r)
}

// posted is the number of receives waiting.
func (m *matcher) posted() int { return len(m.recvs[0]) + len(m.recvs[1]) }

// over reports whether unexpected messages hold more than the limit.
func (m *matcher) over() bool { return m.bytes > m.limit }

// cancel completes op with fi.ECANCELED if it is waiting (a receive with
// FI_MULTI_RECV: its buffer is released).
func (m *matcher) cancel(op *core.Op) bool {
	for q := range m.recvs {
		if i := slices.Index(m.recvs[q], op); i >= 0 {
			m.recvs[q] = slices.Delete(m.recvs[q], i, i+1)
			m.cancelled(op)
			return true
		}
	}
	return false
}

// dropConn forgets the unexpected rendezvous requests and segmented
// messages that came on c: their data cannot come any more.
func (m *matcher) dropConn(c *conn) {
	maps.DeleteFunc(m.claimed, func(_ uint64, msg *message) bool {
		if (msg.rndv != nil || msg.sar != nil) && msg.conn == c {
			m.bytes -= msg.cost()
			return true
		}
		return false
	})
	for q := range m.unexp {
		m.unexp[q] = slices.DeleteFunc(m.unexp[q], func(msg *message) bool {
			if (msg.rndv != nil || msg.sar != nil) && msg.conn == c {
				m.bytes -= msg.cost()
				return true
			}
			return false
		})
	}
}

// flush completes every waiting receive with fi.ECANCELED and drops the
// unexpected messages. The caller has ended the rendezvous receives.
func (m *matcher) flush() {
	for q := range m.recvs {
		for _, op := range m.recvs[q] {
			m.cancelled(op)
		}
		m.recvs[q], m.unexp[q] = nil, nil
	}
	m.claimed = nil
	m.bytes = 0
}

// cancelled completes op, taken off its queue, with fi.ECANCELED.
func (m *matcher) cancelled(op *core.Op) {
	c := core.Completion{Flags: op.Kind.CQFlags(), Err: fi.ECANCELED}
	if mr := m.multi[op]; mr != nil {
		delete(m.multi, op)
		c.Flags |= fi.CQFlags(fi.MULTI_RECV)
		c.Offset = uint64(mr.off)
		mr.release(op, c)
		return
	}
	op.Complete(c)
}

// deliver completes op with msg placed in buf, at off in op.Buf: the
// payload copied, truncated with fi.ETRUNC if longer. A receive without a
// buffer gets one of the message's size (at most MaxDynamicRecv). A
// rendezvous request is read first: it joins started; a segmented message
// still coming completes with its last segment (sar.go). mr is the state of
// a receive with FI_MULTI_RECV, last says its buffer is released with msg.
func (m *matcher) deliver(op *core.Op, msg *message, buf []byte, off int, mr *multiRecv, last bool) {
	c := core.Completion{Flags: op.Kind.CQFlags() | msg.flags, Data: msg.data, Src: fi.SockAddr(msg.src), Offset: uint64(off)}
	if msg.tagged {
		c.Tag = msg.tag
	}
	if m.claims(op) {
		// fi_msg(3): "the CQ entry flags will have the FI_CLAIM bit set".
		c.Flags |= fi.CQFlags(fi.CLAIM)
	}
	if last {
		c.Flags |= fi.CQFlags(fi.MULTI_RECV)
	}
	if op.Buf == nil {
		op.Buf = make([]byte, min(msg.len(), MaxDynamicRecv))
		buf = op.Buf
	}
	if msg.sar != nil {
		msg.sar.matched(op, buf, msg, mr, c)
		return
	}
	if msg.rndv != nil {
		r := newRndvRecv(op, buf, msg, c)
		if mr != nil {
			r.multi = mr
			mr.reading++
		}
		m.started = append(m.started, r)
		return
	}
	copy(buf, msg.payload[:fitTo(&c, len(buf), uint64(len(msg.payload)))])
	if last {
		mr.release(op, c)
		return
	}
	op.Complete(c)
}
