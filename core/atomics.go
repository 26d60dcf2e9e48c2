package core

// Atomic operations (fi_atomic(3)) in the tree: what a domain answers to
// fi_query_atomic, the checks and buffers of an atomic operation posted
// from a ring or the shell, the ctl verbs atomic, fetch_atomic and
// compare_atomic, and the FI_ATOMIC capability of the entries core offers.

import (
	"context"
	"fmt"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// isAtomic reports whether operations of kind k are atomics.
func (k OpKind) isAtomic() bool { return k >= OpAtomic && k <= OpCompareAtomic }

// atomicNames are the names of the atomic kinds from OpAtomic on, as the
// ctl verbs and the query_atomic file write them: libfabric's calls
// without fi_.
var atomicNames = [...]string{"atomic", "fetch_atomic", "compare_atomic"}

func atomicName(k OpKind) string {
	if !k.isAtomic() {
		return fmt.Sprintf("operation kind %d", k)
	}
	return atomicNames[k-OpAtomic]
}

// parseAtomicKind reads an atomic kind's name: atomic, fetch_atomic or
// compare_atomic, in any case, with or without fi_.
func parseAtomicKind(s string) (OpKind, error) {
	name := strings.ToLower(s)
	name = strings.TrimPrefix(name, "fi_")
	for i, n := range atomicNames {
		if n == name {
			return OpAtomic + OpKind(i), nil
		}
	}
	return 0, Errorf(fi.EINVAL, "unknown atomic function %q: atomic, fetch_atomic or compare_atomic", s)
}

// QueryAtomic is fi_query_atomic for the domain's endpoints of type t: for
// an atomic operation of kind k (OpAtomic, OpFetchAtomic, OpCompareAtomic:
// fi_query_atomic's flags 0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC) on
// datatype dt with op, the most elements one operation carries and the
// size of one, from the provider domain (Atomics). A pair the provider does
// not take is its error; a domain whose provider has no atomics answers
// fi.ENOSYS, as libfabric's fi_no_query_atomic does.
func (d *Domain) QueryAtomic(t fi.EPType, k OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error) {
	if count, size, err = d.queryAtomic(t, k, dt, op); err != nil {
		return 0, 0, Errorf(Code(err), "%s %v %v on %v: %v", atomicName(k), op, dt, t, err)
	}
	return count, size, nil
}

// queryAtomic is QueryAtomic with the bare error, for the loops over
// every operation, which ask mostly about operations a domain does not
// take.
func (d *Domain) queryAtomic(t fi.EPType, k OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error) {
	a, ok := d.prov.(Atomics)
	switch {
	case !k.isAtomic():
		return 0, 0, fi.EINVAL
	case !ok:
		return 0, 0, Errorf(fi.ENOSYS, "domain %s has no atomic operations", d.Name)
	}
	count, size, err = a.QueryAtomic(t, k, dt, op)
	if err == nil && (count == 0 || size == 0) {
		// Not an answer: no operation could be posted with it.
		return 0, 0, Errorf(fi.EIO, "the provider answers count %d, size %d", count, size)
	}
	return count, size, err
}

// atomicEPTypes are the endpoint types that may take atomics.
var atomicEPTypes = [...]fi.EPType{fi.EP_MSG, fi.EP_DGRAM, fi.EP_RDM}

// answersAtomics reports whether the domain takes some atomic operation
// on endpoints of type t: the provider answers QueryAtomic for at least
// one kind, op and datatype. Providers answer from tables, so this is
// asked once, when the domain opens (Domain.atomicTypes).
func (d *Domain) answersAtomics(t fi.EPType) bool {
	if _, ok := d.prov.(Atomics); !ok {
		return false
	}
	for k := OpAtomic; k <= OpCompareAtomic; k++ {
		for op := fi.AtomicOp(0); op < fi.ATOMIC_OP_LAST; op++ {
			for dt := fi.AtomicType(0); dt <= fi.UINT128; dt++ {
				if _, _, err := d.queryAtomic(t, k, dt, op); err == nil {
					return true
				}
			}
		}
	}
	return false
}

// offer is the entry in as core offers it: as the provider made it, but
// without FI_ATOMIC unless the domain answers atomics (offerAtomics), and
// with the domain's traffic class (attr/tclass) as domain_attr.tclass.
// d is nil for an entry whose domain is not open.
func (d *Domain) offer(in *fi.Info) *fi.Info {
	in = d.offerAtomics(in)
	if d == nil || in.DomainAttr == nil {
		return in
	}
	if tc := fi.TClass(d.tclass.Load()); tc != fi.TC_UNSPEC {
		in = in.Clone()
		in.DomainAttr.TClass = tc
	}
	return in
}

// offerAtomics is in without FI_ATOMIC (in caps, tx_attr.caps and
// rx_attr.caps) unless the domain d answers QueryAtomic for the entry's
// endpoint type, so that getinfo never offers atomics an endpoint would
// refuse. Without FI_ATOMIC and FI_RMA, the modifiers that need one of
// them go too (FI_READ: "This flag requires that FI_RMA and/or FI_ATOMIC
// be set.", fi_getinfo(3)).
func (d *Domain) offerAtomics(in *fi.Info) *fi.Info {
	caps := in.Caps
	if in.TxAttr != nil {
		caps |= in.TxAttr.Caps
	}
	if in.RxAttr != nil {
		caps |= in.RxAttr.Caps
	}
	if caps&fi.ATOMIC == 0 || (d != nil && in.EPAttr != nil && d.atomicTypes[in.EPAttr.Type]) {
		return in
	}
	c := in.Clone()
	c.Caps = withoutAtomic(c.Caps)
	if c.TxAttr != nil {
		c.TxAttr.Caps = withoutAtomic(c.TxAttr.Caps)
	}
	if c.RxAttr != nil {
		c.RxAttr.Caps = withoutAtomic(c.RxAttr.Caps)
	}
	return c
}

// withoutAtomic is c without FI_ATOMIC, and without the modifiers of
// FI_RMA and FI_ATOMIC if FI_RMA is not in c either.
func withoutAtomic(c fi.Caps) fi.Caps {
	c &^= fi.ATOMIC
	if c&fi.RMA == 0 {
		c &^= fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
	}
	return c
}

// AtomicAnswer is one operation a domain takes, as fi_query_atomic
// answers for it: a line of query_atomic, an object of query_atomic.json.
type AtomicAnswer struct {
	EPType   string `json:"ep_type"`
	Kind     string `json:"kind"`
	Op       string `json:"op"`
	Datatype string `json:"datatype"`
	Count    uint64 `json:"count"`
	Size     uint64 `json:"size"`
}

// String is the answer's line, `EP_TYPE KIND OP DATATYPE COUNT SIZE`.
func (a AtomicAnswer) String() string {
	return fmt.Sprintf("%s %s %s %s %d %d\n", a.EPType, a.Kind, a.Op, a.Datatype, a.Count, a.Size)
}

func atomicAnswer(t fi.EPType, k OpKind, dt fi.AtomicType, op fi.AtomicOp, count, size uint64) AtomicAnswer {
	return AtomicAnswer{EPType: t.String(), Kind: atomicName(k), Op: op.String(), Datatype: dt.String(), Count: count, Size: size}
}

// QueryAtomics are the operations the domain takes, by endpoint type,
// kind, op and datatype in libfabric's order; none for a domain without
// atomics.
func (d *Domain) QueryAtomics() []AtomicAnswer {
	out := []AtomicAnswer{}
	for _, t := range atomicEPTypes {
		if !d.atomicTypes[t] {
			continue
		}
		for k := OpAtomic; k <= OpCompareAtomic; k++ {
			for op := fi.AtomicOp(0); op < fi.ATOMIC_OP_LAST; op++ {
				for dt := fi.AtomicType(0); dt <= fi.UINT128; dt++ {
					if count, size, err := d.queryAtomic(t, k, dt, op); err == nil {
						out = append(out, atomicAnswer(t, k, dt, op, count, size))
					}
				}
			}
		}
	}
	return out
}

// QueryAtomicText is the query_atomic file before a query: QueryAtomics,
// one line each (`FI_EP_RDM fetch_atomic FI_SUM FI_UINT64 1 8`).
func (d *Domain) QueryAtomicText() string {
	var b strings.Builder
	for _, a := range d.QueryAtomics() {
		b.WriteString(a.String())
	}
	return b.String()
}

// QueryAtomicAsk answers one question written to the query_atomic file,
// `EP_TYPE KIND OP DATATYPE` (`FI_EP_RDM fetch_atomic FI_SUM FI_UINT64`;
// libfabric's names with or without FI_, in any case; KIND atomic,
// fetch_atomic or compare_atomic): its answer, or the error
// fi_query_atomic returns for it.
func (d *Domain) QueryAtomicAsk(q string) (AtomicAnswer, error) {
	words := strings.Fields(q)
	if len(words) != 4 {
		return AtomicAnswer{}, Errorf(fi.EINVAL, "fi_query_atomic: %d words, want EP_TYPE KIND OP DATATYPE", len(words))
	}
	t, err := fi.Parse[fi.EPType](words[0])
	if err != nil {
		return AtomicAnswer{}, &Error{Op: "fi_query_atomic", Code: fi.EINVAL, Err: err}
	}
	k, err := parseAtomicKind(words[1])
	if err != nil {
		return AtomicAnswer{}, WithOp("fi_query_atomic", err)
	}
	op, err := fi.Parse[fi.AtomicOp](words[2])
	if err != nil {
		return AtomicAnswer{}, &Error{Op: "fi_query_atomic", Code: fi.EINVAL, Err: err}
	}
	dt, err := fi.Parse[fi.AtomicType](words[3])
	if err != nil {
		return AtomicAnswer{}, &Error{Op: "fi_query_atomic", Code: fi.EINVAL, Err: err}
	}
	count, size, err := d.QueryAtomic(t, k, dt, op)
	if err != nil {
		return AtomicAnswer{}, WithOp("fi_query_atomic", err)
	}
	return atomicAnswer(t, k, dt, op, count, size), nil
}

// checkAtomic checks an atomic operation of kind k on n bytes of
// datatype dt with op, for an endpoint of type t: the domain must take
// the pair ("The requested operation and data type must also be valid for
// the given provider.", fi_atomic(3); else QueryAtomic's error), n must
// be a whole, non-zero number of elements, and their count at most the
// domain's ("This must be between 1 and the maximum returned through the
// relevant valid operation, inclusive."; else -FI_EMSGSIZE: "The number of
// atomic operations in a single request exceeds that supported by the
// underlying provider.").
func (e *EP) checkAtomic(t fi.EPType, k OpKind, dt fi.AtomicType, op fi.AtomicOp, n uint64) error {
	count, size, err := e.obj.Dom.QueryAtomic(t, k, dt, op)
	switch {
	case err != nil:
		return err
	case n == 0 || n%size != 0:
		return Errorf(fi.EINVAL, "len %d is not a whole number of %d-byte %v elements", n, size, dt)
	case n/size > count:
		return Errorf(fi.EMSGSIZE, "%d elements of %v, more than the %d of one %s", n/size, dt, count, atomicName(k))
	}
	return nil
}

// usesOperand reports whether an atomic operation of kind k with op reads
// its operand buffer: all but a fetching FI_ATOMIC_READ, whose "source
// buffer operand (e.g. fi_fetch_atomic buf parameter) is ignored and may
// be NULL" (fi_atomic(3)).
func usesOperand(k OpKind, op fi.AtomicOp) bool {
	return !(k == OpFetchAtomic && op == fi.ATOMIC_READ)
}

// atomicBufs sets the buffers of the atomic operation op (Kind, Datatype
// and AtomicOp set) of n bytes: the operand, bytes [off, off+n) of m
// (Buf, Mem, MemOff; not for a fetching FI_ATOMIC_READ); the values to
// compare with, [cmpOff, cmpOff+n) of m too (Compare; OpCompareAtomic);
// the buffer for the target's old values, [roff, roff+n) of rm (Result,
// ResultMem, ResultMemOff; OpFetchAtomic, OpCompareAtomic). m or rm may be
// nil where it is not used.
func atomicBufs(op *Op, n uint64, m *MR, off, cmpOff uint64, rm *MR, roff uint64) error {
	var err error
	if usesOperand(op.Kind, op.AtomicOp) {
		if op.Buf, op.Mem, op.MemOff, err = m.sliceMem(off, n); err != nil {
			return err
		}
	}
	if op.Kind == OpCompareAtomic {
		if op.Compare, _, _, err = m.sliceMem(cmpOff, n); err != nil {
			return err
		}
	}
	if op.Kind != OpAtomic {
		if op.Result, op.ResultMem, op.ResultMemOff, err = rm.sliceMem(roff, n); err != nil {
			return err
		}
	}
	return nil
}

// atomicArgs are the operands of the ctl verbs atomic, fetch_atomic and
// compare_atomic.
type atomicArgs struct {
	kind     OpKind
	op       fi.AtomicOp
	datatype fi.AtomicType
	mr       *Object // the operand at [off, off+n), the compare values at cmpOff; nil for a fetching FI_ATOMIC_READ
	off, n   uint64
	cmpOff   uint64
	result   *Object // fetch_atomic, compare_atomic: the target's old values go to [roff, roff+n)
	roff     uint64
	raddr    uint64
	key      uint64
}

// atomic runs the ctl verbs atomic, fetch_atomic and compare_atomic: an
// fi_atomic, fi_fetch_atomic or fi_compare_atomic on the peer's region
// key at offset raddr; an FI_EP_RDM endpoint's peer is its dest. The
// regions are objects of the endpoint's domain, which must belong to the
// endpoint's owner; they stay registered while the operation runs. It
// returns once the operation completes, with its error, as RMA does; the
// completion (op_context 0, buf the operand's offset) also goes to the
// bound CQ and the write (atomic) or read (fetch_atomic, compare_atomic)
// counter.
func (e *EP) atomic(ctx context.Context, a atomicArgs) error {
	info := e.Info()
	if info.Caps&fi.ATOMIC == 0 {
		return Errorf(fi.EOPNOTSUPP, "the endpoint does not have FI_ATOMIC")
	}
	if err := e.checkAtomic(info.EPAttr.Type, a.kind, a.datatype, a.op, a.n); err != nil {
		return err
	}
	var held []*Object
	release := func() {
		for _, o := range held {
			o.drop()
		}
	}
	region := func(o *Object) (*MR, error) {
		if o == nil {
			return nil, nil
		}
		if o.Owner != e.obj.Owner {
			return nil, Errorf(fi.EACCES, "memory region %s belongs to another user", o.ID)
		}
		if err := o.hold(); err != nil {
			return nil, err
		}
		held = append(held, o)
		return o.Impl.(*MR), nil
	}
	m, err := region(a.mr)
	if err != nil {
		release()
		return err
	}
	rm, err := region(a.result)
	if err != nil {
		release()
		return err
	}
	op := &Op{Kind: a.kind, Datatype: a.datatype, AtomicOp: a.op, Addr: a.raddr, Key: a.key, offset: a.off}
	if a.mr != nil {
		op.desc = a.mr.Serial
	}
	if err := atomicBufs(op, a.n, m, a.off, a.cmpOff, rm, a.roff); err != nil {
		release()
		return err
	}
	return e.do(ctx, op, atomicName(a.kind), release)
}
