package core

import (
	"context"

	"github.com/fabricfs/fabricfs/core/fi"
)

// RMA is the ctl verbs write and read: an fi_write (fi_writedata when data
// is not nil) from bytes [off, off+n) of the memory region mr, or an
// fi_read into them, with the peer's region key at offset raddr; an
// FI_EP_RDM endpoint's peer is its dest. mr is an object of the endpoint's
// domain, which must belong to the endpoint's owner; it stays registered
// while the operation runs. RMA returns once the operation completes, with
// its error, as a write to the data file does; the completion (op_context
// 0, buf the offset) also goes to the bound CQ and counters.
func (e *EP) RMA(ctx context.Context, kind OpKind, mr *Object, off, n, raddr, key uint64, data *uint64) error {
	if kind != OpWrite && kind != OpRead {
		return Errorf(fi.EINVAL, "not an RMA operation")
	}
	if e.Info().Caps&fi.RMA == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint does not have FI_RMA")
	}
	op := &Op{Kind: kind, Addr: raddr, Key: key}
	if err := e.takeRegion(op, mr, off, n); err != nil {
		return err
	}
	if data != nil {
		op.Flags, op.Data = fi.OpFlags(fi.REMOTE_CQ_DATA), *data
	}
	what := map[OpKind]string{OpWrite: "write", OpRead: "read"}[kind]
	return e.do(ctx, op, what, mr.drop)
}

// Remote memory access from peers: the provider finds the target memory of
// a peer's write or read through EndpointEvents.Region, and reports the
// operation once done through EndpointEvents.Remote.

// Region finds, for a peer's RMA operation on this endpoint, the memory
// region with key: registered in the endpoint's domain by the endpoint's
// owner (a key never reaches another user's memory), allowing access
// (fi.REMOTE_READ or fi.REMOTE_WRITE), taking the endpoint's authorization
// key (sameKey), and holding [addr, addr+n). addr is
// an offset from the region's base (attr/base; byte 0 unless set): the
// domain's mr_mode has no FI_MR_VIRT_ADDR, as libfabric's tcp, and peers
// reach only [base, len). The region's memory stays until release is
// called, even if the region closes meanwhile.
func (ev epEvents) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	e := ev.e
	o, ok := e.obj.Dom.regionByKey(key)
	if !ok || o.Owner != e.obj.Owner || !o.Impl.(*MR).use() {
		return nil, nil, Errorf(fi.EINVAL, "no memory region with key %#x for %s", key, e.obj)
	}
	m := o.Impl.(*MR)
	m.mu.Lock()
	allowed := m.access&access == access
	keyOK := sameKey(m.authKey, e.authKey)
	m.mu.Unlock()
	buf, err := m.remote(addr, n)
	switch {
	case !keyOK:
		err = Errorf(fi.EACCES, "memory region %s takes another authorization key than %s's", o.ID, e.obj)
	case !allowed:
		err = Errorf(fi.EACCES, "memory region %s does not allow %v", o.ID, access)
	case err != nil:
		err = Errorf(fi.EINVAL, "key %#x: %v", key, err)
	}
	if err != nil {
		m.unuse()
		return nil, nil, err
	}
	m.counts.remotes.Add(1)
	return buf, m.unuse, nil
}

// Remote reports a peer's write into (c.Flags has fi.REMOTE_WRITE) or read
// from (fi.REMOTE_READ) this endpoint's memory, once done: an RMA
// operation, or an atomic (fi.ATOMIC; a base atomic with fi.REMOTE_WRITE,
// a fetch or compare atomic with fi.REMOTE_READ, as fi_ep_bind(3) counts
// them). The counter bound for remote_write or remote_read counts it
// (FI_RMA_EVENT). Only a
// write that carried remote CQ data makes an entry on the receive CQ,
// without consuming a posted receive, with the flags libfabric 1.17's tcp
// gives it: FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA (0x22000, seen from a C peer
// in providers/rxm's interop test), without FI_RMA.
func (ev epEvents) Remote(c Completion) {
	cl, st := classRemoteRead, statRemoteRead
	if c.Flags&fi.CQFlags(fi.REMOTE_WRITE) != 0 {
		cl, st = classRemoteWrite, statRemoteWrite
	}
	ev.e.ops.count(st, c.Len, c.Err != 0)
	ev.e.obj.Dom.countRemote(ev.e.obj.Owner, c.Key, cl == classRemoteWrite, c.Err != 0)
	if c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) == 0 {
		ev.e.count(cl, c.Err != 0)
		return
	}
	ev.e.deliver(cl, CQEntry{Flags: c.Flags &^ fi.CQFlags(fi.RMA), Len: c.Len, Data: c.Data, Src: uint64(fi.ADDR_NOTAVAIL), Err: c.Err}, true)
}

// Buffered is BufferedEvents: a message the provider buffered completes
// on the receive CQ, always (fi_msg(3): "When a provider receives a
// message, it will write an entry to the completion queue associated
// with the receiving endpoint"), with its claim key as op_context and its
// first bytes in the endpoint's buffered area (bufferedArea.report). It
// is counted once claimed or discarded, as the receive that takes it.
func (ev epEvents) Buffered(c Completion, bytes []byte) {
	e := ev.e
	e.mu.Lock()
	cq, av, caps, b := e.rxcq, e.av, e.info.Caps, e.buffered
	e.mu.Unlock()
	if cq != nil && b != nil {
		// Its sender as fi_addr (or user id), but never FI_SOURCE_ERR's
		// error: the report is no data yet, and the claim that takes it
		// completes as a receive.
		b.report(c, bytes, cq, source(av, c.Src, caps&fi.AV_USER_ID != 0), e.obj.Serial)
	}
}
