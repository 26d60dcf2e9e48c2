package shm

import (
	"math"
	"slices"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// FI_MULTI_RECV: an untagged receive whose buffer takes message after
// message, as providers/rxm places them, so that both of the tree's
// FI_EP_RDM providers behave alike.
//
//   - A message that finds it takes the next len(message) bytes when they
//     fit and at least min_multi_recv bytes would be left: a plain
//     completion with its place in the buffer (Completion.Offset), the
//     receive staying where it is in the queue. Otherwise it takes the
//     rest of the buffer (truncated with FI_ETRUNC if longer), and its
//     completion, with FI_MULTI_RECV, releases the buffer.
//   - Posted while unexpected messages wait, it takes those it matches in
//     order, each into the next min(len, left) bytes, while at least
//     min_multi_recv bytes are left; if fewer are left, a completion of
//     its own with FI_MULTI_RECV only (length 0) releases the buffer;
//     otherwise it is queued.
//   - min_multi_recv is FI_OPT_MIN_MULTI_RECV, DefaultMinMultiRecv until
//     set, read at each decision.
//
// Messages are copied into the buffer without the target's lock, so two
// senders may fill one buffer at once; the release waits until every
// message placed before it has completed (multiRecv.placing), so it is
// the buffer's last completion, as core requires.

// DefaultMinMultiRecv is FI_OPT_MIN_MULTI_RECV until set: libfabric's
// shm's (SMR_INJECT_SIZE).
const DefaultMinMultiRecv = 4096

// multiRecv is the state of a posted receive with FI_MULTI_RECV. Guarded
// by endpoint.mu.
type multiRecv struct {
	off     int              // bytes of the buffer given to messages
	placing int              // messages being copied into it without the lock
	held    *core.Completion // the release, waiting for placing to reach 0
}

func isMulti(r *core.Op) bool { return r.Flags&fi.OpFlags(fi.MULTI_RECV) != 0 }

// placeMulti places msg, whose payload is p, in the multi-receive r, at
// index i of the untagged receives (package doc above). Called with e.mu
// held; it unlocks it.
func (e *endpoint) placeMulti(r *core.Op, mr *multiRecv, i int, msg *message, p []byte) {
	off, left := mr.off, len(r.Buf)-mr.off
	last := len(p) > left || uint64(left-len(p)) < e.minMulti
	end := off + len(p)
	if last {
		end = len(r.Buf)
		e.recvs[0] = slices.Delete(e.recvs[0], i, i+1)
		delete(e.multi, r)
	}
	mr.off = end
	mr.placing++
	e.mu.Unlock()
	c := placed(r, msg, p, r.Buf[off:end:end])
	c.Offset = uint64(off)
	if !last {
		r.Complete(c)
		c = core.Completion{}
	} else {
		c.Flags |= fi.CQFlags(fi.MULTI_RECV)
	}
	e.mu.Lock()
	mr.placing--
	if last {
		mr.held = &c
	}
	done := e.releaseLocked(r, mr)
	e.mu.Unlock()
	done()
}

// releaseLocked returns what gives r's held release, once no message is
// being placed in it any more (else the last of them gives it).
func (e *endpoint) releaseLocked(r *core.Op, mr *multiRecv) func() {
	if mr.placing > 0 || mr.held == nil {
		return func() {}
	}
	c := *mr.held
	mr.held = nil
	return func() { r.Complete(c) }
}

// endRecvLocked ends the posted receive r, which the caller has taken off
// its queue, with the completion c (FI_ECANCELED: cancelled, or its
// endpoint closed), which releases a multi-receive's buffer: it returns
// what gives c, to be called without e.mu.
func (e *endpoint) endRecvLocked(r *core.Op, c core.Completion) func() {
	mr := e.multi[r]
	if mr == nil {
		return func() { r.Complete(c) }
	}
	delete(e.multi, r)
	c.Flags |= fi.CQFlags(fi.MULTI_RECV)
	mr.held = &c
	return e.releaseLocked(r, mr)
}

// postMulti posts the multi-receive r (package doc above). Called with
// e.mu held; it unlocks it.
func (e *endpoint) postMulti(r *core.Op) error {
	if len(r.Buf) == 0 {
		e.mu.Unlock()
		return core.Errorf(fi.EINVAL, "shm: FI_MULTI_RECV needs a buffer")
	}
	if len(e.recvs[0])+len(e.recvs[1]) >= e.rxSize {
		e.mu.Unlock()
		return core.Errorf(fi.EAGAIN, "shm: %d receives posted (rx_size)", e.rxSize)
	}
	off := 0
	for {
		i := slices.IndexFunc(e.unexp[0], func(m *message) bool { return matches(r, m) })
		if i < 0 {
			break
		}
		msg := e.takeLocked(0, i)
		e.mu.Unlock()
		p := msg.payload()
		end := off + min(len(p), len(r.Buf)-off)
		c := placed(r, msg, p, r.Buf[off:end:end])
		c.Offset = uint64(off)
		r.Complete(c)
		msg.sent(0)
		off = end
		e.mu.Lock()
		if uint64(len(r.Buf)-off) < e.minMulti {
			e.mu.Unlock()
			r.Complete(core.Completion{Flags: fi.CQFlags(fi.MULTI_RECV), Offset: uint64(off)})
			return nil
		}
	}
	if e.gone {
		e.mu.Unlock()
		r.Complete(core.Completion{Flags: r.Kind.CQFlags() | fi.CQFlags(fi.MULTI_RECV), Err: fi.ECANCELED, Offset: uint64(off)})
		return nil
	}
	e.recvs[0] = append(e.recvs[0], r)
	e.multi[r] = &multiRecv{off: off}
	e.mu.Unlock()
	return nil
}

// SetOpt takes FI_OPT_MIN_MULTI_RECV (core.Options).
func (e *endpoint) SetOpt(name string, value uint64) error {
	if name == "min_multi_recv" {
		e.mu.Lock()
		e.minMulti = value
		e.mu.Unlock()
	}
	return nil
}

var _ core.Options = (*endpoint)(nil)

// EndpointOptions lists FI_OPT_MIN_MULTI_RECV, the one option of the
// domain's FI_EP_RDM endpoints (core.EndpointOptions).
func (d *domain) EndpointOptions(t fi.EPType, passive bool) []core.Option {
	if t != fi.EP_RDM || passive {
		return nil
	}
	return []core.Option{{Name: "min_multi_recv", Value: DefaultMinMultiRecv, Max: math.MaxUint64}}
}

var _ core.EndpointOptions = (*domain)(nil)
