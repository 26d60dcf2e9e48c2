package rxm

import (
	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// RMA over RDM, as libfabric 1.17's rxm does it over tcp (docs/rxm.md
// 5.7): no rxm header; fi_write, fi_writedata, fi_inject_write and fi_read
// go to the tcp connection of the peer, unchanged (tcp ops 4, 2 and 3),
// with the application's key, offset and op flags (FI_DELIVERY_COMPLETE
// asks tcp for an ACK), and the registration of the local buffer (Op.Mem)
// when the domain registers memory. They wait for the connection as sends
// do, in the same queue, so they keep their order with the peer's sends.
//
// Over a provider whose remote CQ data takes a receive (FI_RX_CQ_DATA:
// verbs's RDMA write with immediate), a peer's fi_writedata completes one
// of the connection's receive buffers with FI_REMOTE_WRITE and the data
// (conn.received); it is reported through the endpoint's events as the
// tcp connection reports it, and the buffer is reposted.
//
// The target side is the tcp connection's: it asks the endpoint's events
// for the region of a key (connEvents.Region: rendezvous keys are rxm's,
// the others the application's) and reports the peer's operation once done
// (connEvents.Remote), which goes on to core's counters and, for a write
// with CQ data, to the receive CQ.

// rmaFlags are the op flags passed to the connection.
const rmaFlags = fi.OpFlags(fi.REMOTE_CQ_DATA) | fi.TRANSMIT_COMPLETE | fi.DELIVERY_COMPLETE | fi.COMMIT_COMPLETE

// postRMA starts an fi_write or fi_read to op.Peer. An injected write is
// copied at Post, as the application may reuse its buffer at once while the
// write may wait for the connection.
func (e *endpoint) postRMA(op *core.Op) error {
	n := len(op.Buf)
	inject := op.Flags&fi.INJECT != 0
	switch {
	case e.info.Caps&fi.RMA == 0:
		return core.Errorf(fi.EOPNOTSUPP, "rxm: RMA on an endpoint without FI_RMA")
	case op.Kind == core.OpRead && inject:
		return core.Errorf(fi.EINVAL, "rxm: a read cannot be injected")
	case inject && n > e.inject:
		return core.Errorf(fi.EINVAL, "rxm: inject of %d bytes; inject_size is %d", n, e.inject)
	case !op.Peer.IP.Addr().IsValid() || op.Peer.IP.Port() == 0:
		return core.Errorf(fi.EINVAL, "rxm: RMA without a destination address")
	}
	it := itemPool.Get().(*sendItem)
	it.op, it.rma = op, true
	it.msg = core.Op{Kind: op.Kind, Flags: op.Flags & rmaFlags, Buf: op.Buf, Data: op.Data, Addr: op.Addr, Key: op.Key,
		Mem: op.Mem, MemOff: op.MemOff}
	if inject {
		it.buf = bufPool.Get().(*[]byte)
		it.msg.Buf, it.msg.Mem, it.msg.MemOff = (*it.buf)[:n], nil, 0
		copy(it.msg.Buf, op.Buf)
	}
	what := "write"
	if op.Kind == core.OpRead {
		what = "read"
	}
	return e.enqueue(it, what)
}

// lentRead is one region a connection's read request was given: n bytes,
// the application's (app) or a rendezvous message's.
type lentRead struct {
	n   uint64
	app bool
}

// noteRead records a region given to a read request of c, until the
// response's Remote.
func (e *endpoint) noteRead(c *conn, n uint64, app bool) {
	e.mu.Lock()
	c.reads = append(c.reads, lentRead{n, app})
	e.mu.Unlock()
}

// readReported takes the regions of the read response of n bytes that a
// connection has written (responses go out in the order of their
// requests) and reports whether one was the application's: then the read
// is the application's remote read, else rxm's own rendezvous read. A
// response of n bytes took regions of n bytes in all (a zero-length
// response one zero-length region). Only a peer sending odd requests
// (zero-length regions among others) can make a read count as the wrong
// kind; the bookkeeping ends with its connection.
func (e *endpoint) readReported(c *conn, n uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n == 0 {
		if len(c.reads) == 0 || c.reads[0].n != 0 {
			return false
		}
		app := c.reads[0].app
		c.reads = c.reads[1:]
		return app
	}
	app := false
	var sum uint64
	k := 0
	for ; k < len(c.reads) && sum < n; k++ {
		sum += c.reads[k].n
		app = app || c.reads[k].app
	}
	c.reads = c.reads[k:]
	return app
}
