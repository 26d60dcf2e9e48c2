package core

// Scatter-gather: the work requests in the segment-array form (docs/abi.md,
// "Scatter-gather"). An operation with one local segment and at most one
// remote one is an ordinary Op over that segment. Otherwise core gathers
// the local segments into one buffer (sends and writes) or scatters the
// buffer into them at the completion (receives and reads), so that every
// provider takes one buffer; and a WRITE or READ with several remote
// segments goes as one operation per remote segment, one after the other,
// completing once.

import (
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// opIOV is the scatter-gather state of an operation with more than one
// local or remote segment.
type opIOV struct {
	segs [ring.IOVLimit][]byte // the local segments; Op.Buf is their concatenation
	nseg int
	rma  [ring.IOVLimit]ring.RMASeg // the remote segments of a WRITE or READ
	nrma int

	// A WRITE or READ with more than one remote segment: the operation
	// (never given to the provider), the provider endpoint its parts go
	// to, the next part and where it starts in the operation's Buf, the
	// bytes done and the first error. The parts go one at a time, each
	// posted from the completion of the one before, so nothing here
	// needs a lock.
	parent *Op
	prov   Endpoint
	next   int
	off    uint64
	done   uint64
	err    fi.Errno
	onPart func(*Op, Completion)
}

// wrSegs sets the buffers of op, made from the request w in the
// segment-array form, from the segments w's array names.
func (e *EP) wrSegs(op *Op, w *ring.WR) error {
	n, m := int(w.IOVCount), int(w.RMAIOVCount)
	// The endpoint's limits, which are at most the ABI's.
	iovLimit, rmaLimit := e.info.TxAttr.IovLimit, e.info.TxAttr.RMAIovLimit
	if op.Kind.IsRecv() {
		iovLimit = e.info.RxAttr.IovLimit
	}
	iovLimit, rmaLimit = min(iovLimit, ring.IOVLimit), min(rmaLimit, ring.IOVLimit)
	switch {
	case op.Kind.isAtomic():
		return Errorf(fi.EINVAL, "an atomic takes no segment array")
	case n < 1 || uint64(n) > iovLimit || uint64(m) > rmaLimit:
		return Errorf(fi.EINVAL, "%d local and %d remote segments (1 to iov_limit %d local, at most rma_iov_limit %d remote)", n, m, iovLimit, rmaLimit)
	case m > 0 && op.Kind != OpWrite && op.Kind != OpRead:
		return Errorf(fi.EINVAL, "remote segments on operation kind %d, which has no remote buffer", op.Kind)
	case n > 1 && op.Flags&fi.OpFlags(fi.MULTI_RECV) != 0:
		return Errorf(fi.EOPNOTSUPP, "FI_MULTI_RECV takes one segment")
	}
	am, err := e.regionFor(op, w.Desc)
	if err != nil {
		return err
	}
	arr, _, _, err := am.sliceMem(w.Offset, w.Len)
	if err != nil {
		return err
	}
	var local [ring.IOVLimit]ring.Seg
	v := &opIOV{nseg: n, nrma: m}
	if err := ring.DecodeSegs(arr, local[:n], v.rma[:m]); err != nil {
		return Errorf(fi.EINVAL, "%v", err)
	}
	var total uint64
	var mem Memory
	var memOff uint64
	for i, s := range local[:n] {
		sm, err := e.regionFor(op, s.Desc)
		if err != nil {
			return err
		}
		if v.segs[i], mem, memOff, err = sm.sliceMem(s.Offset, s.Len); err != nil {
			return err
		}
		total += s.Len
	}
	if m > 0 {
		var rtotal uint64
		for _, r := range v.rma[:m] {
			rtotal += r.Len
		}
		if rtotal != total {
			return Errorf(fi.EINVAL, "remote segments of %d bytes for local segments of %d", rtotal, total)
		}
		op.Addr, op.Key = v.rma[0].Addr, v.rma[0].Key
	}
	// The completion's desc and buf are those of the first segment.
	op.desc, op.offset = local[0].Desc, local[0].Offset
	if n == 1 && m <= 1 {
		op.Buf, op.Mem, op.MemOff = v.segs[0], mem, memOff // as the plain form: zero copy
		return nil
	}
	op.Buf, op.iov = make([]byte, total), v
	if !op.Kind.IsRecv() && op.Kind != OpRead {
		v.gather(op.Buf)
	}
	return nil
}

// gather copies the local segments into b, their concatenation.
func (v *opIOV) gather(b []byte) {
	for _, s := range v.segs[:v.nseg] {
		b = b[copy(b, s):]
	}
}

// scatter copies b, the start of the concatenation, into the local
// segments.
func (v *opIOV) scatter(b []byte) {
	for _, s := range v.segs[:v.nseg] {
		if len(b) == 0 {
			return
		}
		b = b[copy(s, b):]
	}
}

// received scatters what a receive or READ op placed in its buffer, as
// its completion c says, into its segments.
func (op *Op) received(c Completion) {
	if op.iov == nil || (!op.Kind.IsRecv() && op.Kind != OpRead) {
		return
	}
	n := min(c.Len, uint64(len(op.Buf)))
	op.iov.scatter(op.Buf[:n])
}

// postTo gives op to the provider endpoint prov: as it is, or as one
// part per remote segment.
func postTo(prov Endpoint, op *Op) error {
	if op.iov == nil || op.iov.nrma <= 1 {
		return prov.Post(op)
	}
	v := op.iov
	v.parent, v.prov, v.onPart = op, prov, v.partDone
	return v.postNext()
}

// postNext posts the next part. An error posting the first is the
// operation's, which the poster gets (fi.EAGAIN: it tries again later);
// an error posting a later one completes the operation with it.
func (v *opIOV) postNext() error {
	op, r := v.parent, v.rma[v.next]
	p := opPool.Get().(*Op)
	p.Kind, p.Peer, p.Addr, p.Key = op.Kind, op.Peer, r.Addr, r.Key
	p.Buf = op.Buf[v.off : v.off+r.Len : v.off+r.Len]
	// Remote CQ data goes with the last part, after every byte.
	p.Flags = op.Flags &^ fi.OpFlags(fi.REMOTE_CQ_DATA)
	if v.next == v.nrma-1 {
		p.Flags, p.Data = op.Flags, op.Data
	}
	if v.next > 0 {
		// Posted from the previous part's completion, not in an engine
		// pass: nothing flushes after it.
		p.Flags &^= fi.MORE
	}
	p.OnComplete(v.onPart)
	first := v.next == 0
	v.next++
	v.off += r.Len
	err := v.prov.Post(p)
	if err == nil {
		return nil
	}
	freeOp(p)
	if first {
		v.next, v.off = 0, 0
		return err
	}
	v.err = Code(err)
	v.finish()
	return nil
}

// partDone is the done function of the parts: it posts the next part,
// or completes the operation after the last or at the first error.
func (v *opIOV) partDone(p *Op, c Completion) {
	freeOp(p)
	v.done += c.Len
	if c.Err != 0 {
		v.err = c.Err
	}
	if c.Err != 0 || v.next == v.nrma {
		v.finish()
		return
	}
	v.postNext() // its error, if any, completes the operation
}

// finish completes the operation of the parts.
func (v *opIOV) finish() {
	v.parent.Complete(Completion{Flags: v.parent.Kind.CQFlags(), Len: v.done, Err: v.err})
}
