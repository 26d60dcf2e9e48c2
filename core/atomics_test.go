package core_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// atomicProvider is the tcp provider with FI_ATOMIC in every entry (caps,
// tx and rx caps), whose domains take a few atomics (core.Atomics) on the
// endpoint types in types and perform them on the target's bytes, which
// they find through EndpointEvents.Region as providers do for a peer's
// operation. With plain set its domains have no core.Atomics at all.
type atomicProvider struct {
	core.Provider
	types  map[fi.EPType]bool
	plain  bool
	dropRM bool // entries lose FI_RMA as well: FI_ATOMIC is their only use of FI_READ...

	mu     sync.Mutex
	events []core.EndpointEvents // of the endpoints made, in order
	posted []core.Op             // copies of the atomics posted, in order
}

type atomicDomain struct {
	core.ProviderDomain
	p *atomicProvider
}

type atomicEP struct {
	core.Endpoint
	p  *atomicProvider
	ev core.EndpointEvents
}

func (p *atomicProvider) Infos() []*fi.Info {
	var out []*fi.Info
	for _, in := range p.Provider.Infos() {
		c := in.Clone()
		c.Caps |= fi.ATOMIC
		c.TxAttr.Caps |= fi.ATOMIC
		c.RxAttr.Caps |= fi.ATOMIC
		if p.dropRM {
			c.Caps &^= fi.RMA
			c.TxAttr.Caps &^= fi.RMA
			c.RxAttr.Caps &^= fi.RMA
		}
		out = append(out, c)
	}
	return out
}

func (p *atomicProvider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.Provider.OpenDomain(name)
	if err != nil || p.plain {
		return d, err
	}
	return atomicDomain{d, p}, nil
}

// fakeSizes are the datatypes the fake takes, and their sizes.
var fakeSizes = map[fi.AtomicType]uint64{fi.INT32: 4, fi.UINT64: 8}

// fakeOps are the ops the fake takes, per kind.
var fakeOps = map[core.OpKind][]fi.AtomicOp{
	core.OpAtomic:        {fi.MIN, fi.SUM, fi.ATOMIC_WRITE},
	core.OpFetchAtomic:   {fi.SUM, fi.ATOMIC_READ, fi.ATOMIC_WRITE},
	core.OpCompareAtomic: {fi.CSWAP},
}

// fakeCount is the most elements of one operation.
const fakeCount = 64

// QueryAtomic answers with the errors libfabric's verbs gives: -FI_ENOSYS
// for an op it does not take, -FI_EINVAL for a datatype; and
// -FI_EOPNOTSUPP for an endpoint type without atomics.
func (d atomicDomain) QueryAtomic(t fi.EPType, k core.OpKind, dt fi.AtomicType, op fi.AtomicOp) (uint64, uint64, error) {
	if !d.p.types[t] {
		return 0, 0, fi.EOPNOTSUPP
	}
	ok := false
	for _, o := range fakeOps[k] {
		ok = ok || o == op
	}
	if !ok {
		return 0, 0, fi.ENOSYS
	}
	size, ok := fakeSizes[dt]
	if !ok {
		return 0, 0, fi.EINVAL
	}
	return fakeCount, size, nil
}

// tcpInfo is info without FI_ATOMIC, for the tcp endpoints below.
func tcpInfo(info *fi.Info) *fi.Info {
	c := info.Clone()
	c.Caps &^= fi.ATOMIC
	c.TxAttr.Caps &^= fi.ATOMIC
	c.RxAttr.Caps &^= fi.ATOMIC
	return c
}

func (d atomicDomain) NewPassiveEndpoint(info *fi.Info, ev core.PassiveEvents) (core.PassiveEndpoint, error) {
	return d.ProviderDomain.NewPassiveEndpoint(tcpInfo(info), ev)
}

func (d atomicDomain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	e, err := d.ProviderDomain.NewEndpoint(tcpInfo(info), req, ev)
	if err != nil {
		return nil, err
	}
	d.p.mu.Lock()
	d.p.events = append(d.p.events, ev)
	d.p.mu.Unlock()
	return atomicEP{e, d.p, ev}, nil
}

func (e atomicEP) Post(op *core.Op) error {
	if op.Kind < core.OpAtomic {
		return e.Endpoint.Post(op)
	}
	e.p.mu.Lock()
	e.p.posted = append(e.p.posted, *op)
	e.p.mu.Unlock()
	go func() { op.Complete(e.apply(op)) }()
	return nil
}

// apply performs op on the target's bytes, as fi_atomic(3) describes
// each operation, element by element, little-endian.
func (e atomicEP) apply(op *core.Op) core.Completion {
	c := core.Completion{Flags: op.Kind.CQFlags()}
	size := fakeSizes[op.Datatype]
	n := uint64(len(op.Buf))
	if op.Kind != core.OpAtomic {
		n = uint64(len(op.Result))
	}
	access := fi.REMOTE_READ | fi.REMOTE_WRITE
	switch {
	case op.Kind == core.OpAtomic:
		access = fi.REMOTE_WRITE
	case op.AtomicOp == fi.ATOMIC_READ:
		access = fi.REMOTE_READ
	}
	target, release, err := e.ev.Region(op.Key, op.Addr, n, access)
	if err != nil {
		c.Err = core.Code(err)
		return c
	}
	defer release()
	get := func(b []byte, i uint64) uint64 {
		if size == 4 {
			return uint64(binary.LittleEndian.Uint32(b[i*4:]))
		}
		return binary.LittleEndian.Uint64(b[i*8:])
	}
	put := func(b []byte, i, v uint64) {
		if size == 4 {
			binary.LittleEndian.PutUint32(b[i*4:], uint32(v))
			return
		}
		binary.LittleEndian.PutUint64(b[i*8:], v)
	}
	less := func(a, b uint64) bool {
		if op.Datatype == fi.INT32 {
			return int32(a) < int32(b)
		}
		return a < b
	}
	for i := uint64(0); i < n/size; i++ {
		old := get(target, i)
		if op.Result != nil {
			put(op.Result, i, old)
		}
		switch op.AtomicOp {
		case fi.MIN:
			if v := get(op.Buf, i); less(v, old) {
				put(target, i, v)
			}
		case fi.SUM:
			put(target, i, old+get(op.Buf, i))
		case fi.ATOMIC_WRITE:
			put(target, i, get(op.Buf, i))
		case fi.CSWAP:
			if get(op.Compare, i) == old {
				put(target, i, get(op.Buf, i))
			}
		}
	}
	c.Len = n
	return c
}

// atomicFabric opens a fabric over atomicProvider and returns its lo
// domain.
func atomicFabric(t *testing.T, p *atomicProvider) (*core.Fabric, *core.Domain) {
	t.Helper()
	tp, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	p.Provider = tp
	return fabricOf(t, p)
}

// atomicRig is two connected endpoints of a domain taking atomics on
// FI_EP_MSG, sharing CQ c, a's counters w (write) and r (read) bound; one
// registered region m of 4096 bytes that peers may read and write (the
// operands and results from 0, the target from 2048; its key), mapped;
// and a's tx ring and the CQ's ring.
type atomicRig struct {
	p        *atomicProvider
	d        *core.Domain
	a, b, mr *core.Object
	w, r     *core.Cntr
	mem      []byte
	key      uint64
	tx, cq   *ring.Ring
}

const target = 2048 // where the rig's atomics act, in m

func newAtomicRig(t *testing.T) *atomicRig {
	t.Helper()
	g := &atomicRig{p: &atomicProvider{types: map[fi.EPType]bool{fi.EP_MSG: true}}}
	_, g.d = atomicFabric(t, g.p)
	w := create(t, g.d, core.KindCntr, "w")
	r := create(t, g.d, core.KindCntr, "r")
	g.w, g.r = w.Impl.(*core.Cntr), r.Impl.(*core.Cntr)
	var cq *core.CQ
	g.a, g.b, _, _, cq = pair(t, g.d, "bind cq c send,recv", "bind cntr w write", "bind cntr r read")
	var err error
	g.mr, err = regMR(t, g.d, "m", 4096, "", "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := g.mr.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	g.mem, g.key = reg.Mem, g.mr.Impl.(*core.MR).Key()
	g.tx, _ = ringsOf(t, g.a)
	creg, err := cq.Region()
	if err != nil {
		t.Fatal(err)
	}
	if g.cq, err = ring.Open(creg.Mem); err != nil {
		t.Fatal(err)
	}
	return g
}

// post publishes w on a's tx ring, with m as its regions unless w names
// others, and returns its completion.
func (g *atomicRig) post(t *testing.T, w ring.WR) ring.CQE {
	t.Helper()
	slot, ok := g.tx.Reserve()
	if !ok {
		t.Fatal("tx ring full")
	}
	if w.Desc == 0 {
		w.Desc = g.mr.Serial
	}
	if w.ResultDesc == 0 {
		w.ResultDesc = g.mr.Serial
	}
	if w.RMAKey == 0 {
		w.RMAKey = g.key
	}
	w.Encode(slot)
	g.tx.Publish(1)
	return reapCQEs(t, g.cq, nil, 1, fmt.Sprintf("the completion of op %d context %d", w.Op, w.Context))[0]
}

func (g *atomicRig) u64s(off uint64, vs ...uint64) {
	for i, v := range vs {
		binary.LittleEndian.PutUint64(g.mem[off+uint64(i)*8:], v)
	}
}

func (g *atomicRig) read64(off uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(g.mem[off+uint64(i)*8:])
	}
	return out
}

func want64(t *testing.T, what string, got []uint64, want ...uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

const (
	flagsAtomicWrite = uint64(fi.ATOMIC | fi.WRITE) // 0x210
	flagsAtomicRead  = uint64(fi.ATOMIC | fi.READ)  // 0x110
)

// TestAtomicRing posts ring operations 7 ATOMIC, 8 FETCH_ATOMIC and 9
// COMPARE_ATOMIC (docs/abi.md) and checks the target's bytes, the result
// buffers, the completions and the counters.
func TestAtomicRing(t *testing.T) {
	g := newAtomicRig(t)
	check := func(name string, c ring.CQE, flags uint64) {
		t.Helper()
		if c.Err != 0 || c.Flags != flags {
			t.Errorf("%s: completion %+v, want flags %#x and no error", name, c, flags)
		}
	}

	// "FI_SUM Sum: addr[i] = addr[i] + buf[i]"
	g.u64s(target, 5, 7)
	g.u64s(0, 10, 20)
	c := g.post(t, ring.WR{Op: ring.OpAtomic, Context: 1, Len: 16, RMAAddr: target,
		Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.SUM)})
	check("atomic sum", c, flagsAtomicWrite)
	if c.Context != 1 || c.Desc != g.mr.Serial {
		t.Errorf("atomic sum: completion %+v, want context 1 and desc %#x", c, g.mr.Serial)
	}
	want64(t, "target after atomic sum", g.read64(target, 2), 15, 27)

	// "The fetch atomic routines return the initial value that was stored
	// at the target to the user."
	g.u64s(0, 1, 2)
	check("fetch_atomic sum", g.post(t, ring.WR{Op: ring.OpFetchAtomic, Context: 2, Len: 16, RMAAddr: target,
		ResultOffset: 1024, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.SUM)}), flagsAtomicRead)
	want64(t, "result of fetch_atomic sum", g.read64(1024, 2), 15, 27)
	want64(t, "target after fetch_atomic sum", g.read64(target, 2), 16, 29)

	// "For FI_ATOMIC_READ operations, the source buffer operand (e.g.
	// fi_fetch_atomic buf parameter) is ignored and may be NULL.": a desc
	// that names no region is no error.
	check("fetch_atomic atomic_read", g.post(t, ring.WR{Op: ring.OpFetchAtomic, Context: 3, Desc: 0xdead, Len: 16,
		RMAAddr: target, ResultOffset: 1040, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.ATOMIC_READ)}), flagsAtomicRead)
	want64(t, "result of atomic_read", g.read64(1040, 2), 16, 29)
	want64(t, "target after atomic_read", g.read64(target, 2), 16, 29)

	// "FI_CSWAP Compare values and if equal swap with data": the compare
	// values lie at compare_offset of the operand's region.
	g.u64s(0, 100, 200)
	g.u64s(64, 16, 99)
	check("compare_atomic cswap", g.post(t, ring.WR{Op: ring.OpCompareAtomic, Context: 4, Len: 16, CompareOffset: 64,
		RMAAddr: target, ResultOffset: 1056, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.CSWAP)}), flagsAtomicRead)
	want64(t, "result of cswap", g.read64(1056, 2), 16, 29)
	want64(t, "target after cswap", g.read64(target, 2), 100, 29)

	// A 4-byte datatype, with FI_INJECT (a base atomic within
	// inject_size): "FI_MIN Minimum: if (buf[i] < addr[i]) addr[i] = buf[i]".
	binary.LittleEndian.PutUint32(g.mem[0:], uint32(0xfffffff6)) // -10
	binary.LittleEndian.PutUint32(g.mem[4:], 50)
	binary.LittleEndian.PutUint32(g.mem[target+8:], 3)
	binary.LittleEndian.PutUint32(g.mem[target+12:], 4)
	check("atomic min int32 inject", g.post(t, ring.WR{Op: ring.OpAtomic, Flags: uint64(fi.INJECT), Context: 5, Len: 8,
		RMAAddr: target + 8, Datatype: uint8(fi.INT32), AtomicOp: uint8(fi.MIN)}), flagsAtomicWrite)
	if a, b := int32(binary.LittleEndian.Uint32(g.mem[target+8:])), binary.LittleEndian.Uint32(g.mem[target+12:]); a != -10 || b != 4 {
		t.Errorf("int32 target after min = %d %d, want -10 4", a, b)
	}

	// The operations the provider got carry what the requests said.
	g.p.mu.Lock()
	posted := g.p.posted
	g.p.mu.Unlock()
	if len(posted) != 5 {
		t.Fatalf("%d atomics posted, want 5", len(posted))
	}
	if op := posted[3]; op.Kind != core.OpCompareAtomic || op.Datatype != fi.UINT64 || op.AtomicOp != fi.CSWAP ||
		op.Key != g.key || op.Addr != target || len(op.Buf) != 16 || len(op.Compare) != 16 || len(op.Result) != 16 {
		t.Errorf("compare_atomic posted as %+v", op)
	}
	if op := posted[2]; op.Buf != nil || len(op.Result) != 16 {
		t.Errorf("fetch_atomic atomic_read posted with Buf %v, Result of %d bytes; want no operand", op.Buf, len(op.Result))
	}

	// "FI_WRITE Increments the specified counter whenever an RMA write or
	// base atomic operation initiated from the endpoint has completed";
	// "FI_READ ... an RMA read, atomic fetch, or atomic compare operation"
	// (fi_endpoint(3)).
	if g.w.Value() != 2 || g.r.Value() != 3 {
		t.Errorf("write counter %d, read counter %d; want 2 and 3", g.w.Value(), g.r.Value())
	}
}

// TestAtomicRingErrors posts atomics the daemon refuses before they reach
// the provider: each completes with its error and the flags of its kind,
// counts as an error on its counter, and the endpoint's err says why.
func TestAtomicRingErrors(t *testing.T) {
	g := newAtomicRig(t)
	other, err := regMRAs(t, g.d, 1000, "theirs", 64, "", "")
	if err != nil {
		t.Fatal(err)
	}
	u64, sum := uint8(fi.UINT64), uint8(fi.SUM)
	cases := []struct {
		name  string
		w     ring.WR
		err   fi.Errno
		flags uint64
	}{
		{"len 0", ring.WR{Op: ring.OpAtomic, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		{"len not a whole number of elements", ring.WR{Op: ring.OpAtomic, Len: 12, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		// "-FI_EMSGSIZE The number of atomic operations in a single
		// request exceeds that supported by the underlying provider."
		{"count past the query's", ring.WR{Op: ring.OpAtomic, Len: (fakeCount + 1) * 8, Datatype: u64, AtomicOp: sum}, fi.EMSGSIZE, flagsAtomicWrite},
		// "The requested operation and data type must also be valid for
		// the given provider.": the error is the provider's answer.
		{"datatype the domain does not take", ring.WR{Op: ring.OpAtomic, Len: 8, Datatype: uint8(fi.DOUBLE), AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		{"op the domain does not take", ring.WR{Op: ring.OpAtomic, Len: 8, Datatype: u64, AtomicOp: uint8(fi.PROD)}, fi.ENOSYS, flagsAtomicWrite},
		{"cswap as a base atomic", ring.WR{Op: ring.OpAtomic, Len: 8, Datatype: u64, AtomicOp: uint8(fi.CSWAP)}, fi.ENOSYS, flagsAtomicWrite},
		{"sum as a compare atomic", ring.WR{Op: ring.OpCompareAtomic, Len: 8, Datatype: u64, AtomicOp: sum}, fi.ENOSYS, flagsAtomicRead},
		{"FI_INJECT on a fetch", ring.WR{Op: ring.OpFetchAtomic, Flags: uint64(fi.INJECT), Len: 8, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicRead},
		{"FI_INJECT on a compare", ring.WR{Op: ring.OpCompareAtomic, Flags: uint64(fi.INJECT), Len: 8, Datatype: u64, AtomicOp: uint8(fi.CSWAP)}, fi.EINVAL, flagsAtomicRead},
		{"FI_INJECT past inject_size", ring.WR{Op: ring.OpAtomic, Flags: uint64(fi.INJECT), Len: 136, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		{"operand past the region", ring.WR{Op: ring.OpAtomic, Offset: 4090, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		{"unknown operand desc", ring.WR{Op: ring.OpAtomic, Desc: 0xdead, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicWrite},
		{"no result region", ring.WR{Op: ring.OpFetchAtomic, ResultDesc: 0xdead, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicRead},
		{"result past the region", ring.WR{Op: ring.OpFetchAtomic, ResultOffset: 4089, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EINVAL, flagsAtomicRead},
		{"compare past the region", ring.WR{Op: ring.OpCompareAtomic, CompareOffset: 4089, Len: 8, Datatype: u64, AtomicOp: uint8(fi.CSWAP)}, fi.EINVAL, flagsAtomicRead},
		{"another user's operand", ring.WR{Op: ring.OpAtomic, Desc: other.Serial, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EACCES, flagsAtomicWrite},
		{"another user's result", ring.WR{Op: ring.OpFetchAtomic, ResultDesc: other.Serial, Len: 8, Datatype: u64, AtomicOp: sum}, fi.EACCES, flagsAtomicRead},
	}
	writes, reads := 0, 0
	for i, c := range cases {
		c.w.Context = uint64(100 + i)
		got := g.post(t, c.w)
		if got.Context != c.w.Context || got.Err != -int32(c.err) || got.Flags != c.flags {
			t.Errorf("%s: completion %+v, want context %d, err %d (%s), flags %#x", c.name, got, c.w.Context, -int32(c.err), c.err.Name(), c.flags)
		}
		if e := g.a.Err(); !strings.HasPrefix(e, "work request: ") {
			t.Errorf("%s: err %q does not say a work request failed", c.name, e)
		}
		if c.flags == flagsAtomicWrite {
			writes++
		} else {
			reads++
		}
	}
	g.p.mu.Lock()
	n := len(g.p.posted)
	g.p.mu.Unlock()
	if n != 0 {
		t.Errorf("%d refused atomics reached the provider", n)
	}
	if g.w.Value() != 0 || g.w.Errors() != uint64(writes) || g.r.Value() != 0 || g.r.Errors() != uint64(reads) {
		t.Errorf("write counter %d/%d errors, read counter %d/%d; want 0/%d and 0/%d",
			g.w.Value(), g.w.Errors(), g.r.Value(), g.r.Errors(), writes, reads)
	}
}

// TestAtomicRingWithoutFIAtomic: an endpoint without FI_ATOMIC (its
// domain answers QueryAtomic for no type, so core does not offer it)
// answers the atomic operations with -FI_EOPNOTSUPP, in the flags of
// their kind.
func TestAtomicRingWithoutFIAtomic(t *testing.T) {
	p := &atomicProvider{types: map[fi.EPType]bool{}}
	_, d := atomicFabric(t, p)
	sa, _, _, cqr := ringPair(t, d)
	for i, w := range []ring.WR{
		{Op: ring.OpAtomic, Len: 8, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.SUM)},
		{Op: ring.OpFetchAtomic, Len: 8, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.SUM)},
		{Op: ring.OpCompareAtomic, Len: 8, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.CSWAP)},
	} {
		w.Context = uint64(i + 1)
		sa.post(t, sa.tx, w)
		c := reapCQEs(t, cqr, nil, 1, "the refused atomic")[0]
		flags := flagsAtomicRead
		if w.Op == ring.OpAtomic {
			flags = flagsAtomicWrite
		}
		if c.Context != w.Context || c.Err != -int32(fi.EOPNOTSUPP) || c.Flags != flags {
			t.Errorf("op %d: completion %+v, want -FI_EOPNOTSUPP, flags %#x", w.Op, c, flags)
		}
	}
}

// TestAtomicCtl runs the ctl verbs atomic, fetch_atomic and
// compare_atomic, and their errors.
func TestAtomicCtl(t *testing.T) {
	g := newAtomicRig(t)
	ctx := context.Background()
	key := fmt.Sprintf("%#x", g.key)
	ctl := func(cmd string) error { return g.a.Ctl(ctx, 0, cmd) }

	g.u64s(target, 1, 2)
	g.u64s(0, 40, 50)
	if err := ctl("atomic FI_SUM FI_UINT64 m 0 16 2048 " + key); err != nil {
		t.Fatal(err)
	}
	want64(t, "target after atomic sum", g.read64(target, 2), 41, 52)
	// Names with or without FI_, in any case.
	g.u64s(0, 7)
	if err := ctl("fetch_atomic atomic_write uint64 m 0 8 m 512 2048 " + key); err != nil {
		t.Fatal(err)
	}
	want64(t, "result of fetch_atomic atomic_write", g.read64(512, 1), 41)
	want64(t, "target after fetch_atomic atomic_write", g.read64(target, 2), 7, 52)
	// FI_ATOMIC_READ reads no operand: MRID and OFFSET are not looked at.
	if err := ctl("fetch_atomic FI_ATOMIC_READ FI_UINT64 - - 16 m 520 2048 " + key); err != nil {
		t.Fatal(err)
	}
	want64(t, "result of atomic_read", g.read64(520, 2), 7, 52)
	g.u64s(0, 8, 9)
	g.u64s(16, 7, 0)
	if err := ctl("compare_atomic cswap uint64 m 0 16 16 m 600 2048 " + key); err != nil {
		t.Fatal(err)
	}
	want64(t, "result of cswap", g.read64(600, 2), 7, 52)
	want64(t, "target after cswap", g.read64(target, 2), 8, 52)
	if g.w.Value() != 1 || g.r.Value() != 3 {
		t.Errorf("write counter %d, read counter %d; want 1 and 3", g.w.Value(), g.r.Value())
	}

	theirs, err := regMRAs(t, g.d, 1000, "theirs", 64, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		code fi.Errno
	}{
		{"atomic FI_SUM FI_UINT64 m 0 16 2048", fi.EINVAL},                      // too few words
		{"atomic FI_FOO FI_UINT64 m 0 16 2048 " + key, fi.EINVAL},               // no such op
		{"atomic FI_SUM FI_UINT65 m 0 16 2048 " + key, fi.EINVAL},               // no such datatype
		{"atomic FI_SUM FI_UINT64 nosuch 0 16 2048 " + key, fi.ENOENT},          // no such region
		{"atomic FI_SUM FI_UINT64 m 0 12 2048 " + key, fi.EINVAL},               // not whole elements
		{"atomic FI_SUM FI_UINT64 m 0 520 2048 " + key, fi.EMSGSIZE},            // 65 elements
		{"atomic FI_SUM FI_DOUBLE m 0 16 2048 " + key, fi.EINVAL},               // the provider's answer
		{"atomic FI_CSWAP FI_UINT64 m 0 16 2048 " + key, fi.ENOSYS},             // the provider's answer
		{"atomic FI_SUM FI_UINT64 m 4090 16 2048 " + key, fi.EINVAL},            // outside the region
		{"atomic FI_SUM FI_UINT64 theirs 0 16 2048 " + key, fi.EACCES},          // another user's
		{"fetch_atomic FI_SUM FI_UINT64 m 0 8 theirs 0 2048 " + key, fi.EACCES}, // another user's result
		{"atomic FI_SUM FI_UINT64 m 0 16 2048 0x1", fi.EINVAL},                  // no region with that key
	} {
		err := ctl(c.cmd)
		wantCode(t, c.cmd, err, c.code)
	}
	if theirs.Remove() != nil {
		t.Error("the other user's region stayed held")
	}

	// An endpoint without FI_ATOMIC refuses the verbs.
	_, plain := atomicFabric(t, &atomicProvider{plain: true})
	if _, err := regMR(t, plain, "m", 64, "", ""); err != nil {
		t.Fatal(err)
	}
	ep := create(t, plain, core.KindEP, "x")
	wantCode(t, "atomic on an endpoint without FI_ATOMIC", ep.Ctl(ctx, 0, "atomic FI_SUM FI_UINT64 m 0 16 2048 1"), fi.EOPNOTSUPP)
}

// TestAtomicRemoteCounters: a peer's atomics on the endpoint's memory,
// which the provider reports through EndpointEvents.Remote, count on
// the counters bound remote_write (base atomics: "FI_REMOTE_WRITE
// Increments the specified counter whenever an RMA write or base atomic
// operation is initiated from a remote endpoint that targets the given
// endpoint.") and remote_read (fetch and compare: "FI_REMOTE_READ ...
// an RMA read, atomic fetch, or atomic compare operation").
func TestAtomicRemoteCounters(t *testing.T) {
	p := &atomicProvider{types: map[fi.EPType]bool{fi.EP_MSG: true}}
	_, d := atomicFabric(t, p)
	rw := create(t, d, core.KindCntr, "rw").Impl.(*core.Cntr)
	rr := create(t, d, core.KindCntr, "rr").Impl.(*core.Cntr)
	pair(t, d, "bind cq c send,recv", "bind cntr rw remote_write", "bind cntr rr remote_read")
	p.mu.Lock()
	evs := p.events
	p.mu.Unlock()
	if len(evs) != 2 {
		t.Fatalf("%d endpoints made, want 2", len(evs))
	}
	b := evs[1]
	b.Remote(core.Completion{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_WRITE), Len: 8})
	b.Remote(core.Completion{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ), Len: 8})
	b.Remote(core.Completion{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ), Len: 8})
	b.Remote(core.Completion{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ), Err: fi.EACCES})
	if rw.Value() != 1 || rr.Value() != 2 || rr.Errors() != 1 {
		t.Errorf("remote_write %d, remote_read %d (errors %d); want 1, 2 (1)", rw.Value(), rr.Value(), rr.Errors())
	}
}

// TestQueryAtomic: fi_query_atomic from a domain that takes atomics, and
// from one that has none ("fi_no_query_atomic": -FI_ENOSYS).
func TestQueryAtomic(t *testing.T) {
	_, d := atomicFabric(t, &atomicProvider{types: map[fi.EPType]bool{fi.EP_MSG: true}})
	text := d.QueryAtomicText()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 2*(3+3+1) { // two datatypes; three ops of atomic and fetch, one of compare
		t.Errorf("query_atomic lists %d operations, want 14:\n%s", len(lines), text)
	}
	for _, want := range []string{
		"FI_EP_MSG atomic FI_MIN FI_INT32 64 4",
		"FI_EP_MSG fetch_atomic FI_ATOMIC_READ FI_UINT64 64 8",
		"FI_EP_MSG compare_atomic FI_CSWAP FI_UINT64 64 8",
	} {
		if !strings.Contains("\n"+text, "\n"+want+"\n") {
			t.Errorf("query_atomic has no line %q:\n%s", want, text)
		}
	}
	if lines[0] != "FI_EP_MSG atomic FI_MIN FI_INT32 64 4" {
		t.Errorf("first line %q, want the first kind, op and datatype", lines[0])
	}
	for _, c := range []struct {
		q, want string
		code    fi.Errno
	}{
		{"FI_EP_MSG fetch_atomic FI_SUM FI_UINT64", "FI_EP_MSG fetch_atomic FI_SUM FI_UINT64 64 8\n", 0},
		{"msg FI_COMPARE_ATOMIC cswap int32\n", "FI_EP_MSG compare_atomic FI_CSWAP FI_INT32 64 4\n", 0},
		{"FI_EP_RDM atomic FI_SUM FI_UINT64", "", fi.EOPNOTSUPP},
		{"FI_EP_MSG atomic FI_PROD FI_UINT64", "", fi.ENOSYS},
		{"FI_EP_MSG atomic FI_SUM FI_DOUBLE", "", fi.EINVAL},
		{"FI_EP_MSG atomic FI_SUM", "", fi.EINVAL},
		{"FI_EP_MSG swap FI_SUM FI_UINT64", "", fi.EINVAL},
		{"FI_EP_MOO atomic FI_SUM FI_UINT64", "", fi.EINVAL},
	} {
		got, err := d.QueryAtomicAsk(c.q)
		if c.code != 0 {
			wantCode(t, c.q, err, c.code)
			if err != nil && !strings.HasPrefix(err.Error(), "fi_query_atomic: ") {
				t.Errorf("%q: error %q does not name fi_query_atomic", c.q, err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%q = %q, %v; want %q", c.q, got, err, c.want)
		}
	}

	_, plain := atomicFabric(t, &atomicProvider{plain: true})
	if text := plain.QueryAtomicText(); text != "" {
		t.Errorf("query_atomic of a domain without atomics: %q, want nothing", text)
	}
	_, err := plain.QueryAtomicAsk("FI_EP_MSG atomic FI_SUM FI_UINT64")
	wantCode(t, "a query of a domain without atomics", err, fi.ENOSYS)
	_, _, err = plain.QueryAtomic(fi.EP_MSG, core.OpAtomic, fi.UINT64, fi.SUM)
	wantCode(t, "QueryAtomic of a domain without atomics", err, fi.ENOSYS)
}

// TestAtomicCapsOffered: core offers FI_ATOMIC only on the entries whose
// domain answers QueryAtomic for their endpoint type, whatever the
// provider put in them ("FI_ATOMIC Specifies that the endpoint supports
// some set of atomic operations.", fi_getinfo(3)), and hints asking for it
// match those entries only.
func TestAtomicCapsOffered(t *testing.T) {
	hasAtomic := func(in *fi.Info) bool {
		return in.Caps&fi.ATOMIC != 0 || in.TxAttr.Caps&fi.ATOMIC != 0 || in.RxAttr.Caps&fi.ATOMIC != 0
	}
	// entries is every entry the fabric offers, by each of the ways.
	entries := func(f *core.Fabric, d *core.Domain) []*fi.Info {
		out := append(f.Infos(), d.Infos()...)
		return append(out, f.ProviderInfos(f.Providers()[0])...)
	}
	askAtomic := func(f *core.Fabric) error {
		_, err := fi.GetInfo(context.Background(), fi.APIVersion, "", "", 0, &fi.Info{Caps: fi.ATOMIC}, f.Infos())
		return err
	}
	for _, c := range []struct {
		name  string
		p     *atomicProvider
		offer bool
	}{
		{"domain without core.Atomics", &atomicProvider{plain: true}, false},
		{"domain with atomics on another endpoint type", &atomicProvider{types: map[fi.EPType]bool{fi.EP_RDM: true}}, false},
		{"domain with atomics on FI_EP_MSG", &atomicProvider{types: map[fi.EPType]bool{fi.EP_MSG: true}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, d := atomicFabric(t, c.p)
			for _, in := range entries(f, d) {
				if hasAtomic(in) != c.offer {
					t.Errorf("%s entry: caps %v, tx %v, rx %v; want FI_ATOMIC %v", in.DomainAttr.Name, in.Caps, in.TxAttr.Caps, in.RxAttr.Caps, c.offer)
				}
				if in.Caps&fi.RMA == 0 || in.Caps&fi.READ == 0 {
					t.Errorf("%s entry: caps %v lost FI_RMA or FI_READ", in.DomainAttr.Name, in.Caps)
				}
			}
			if ep := create(t, d, core.KindEP, "e"); hasAtomic(ep.Impl.(*core.EP).Info()) != c.offer {
				t.Errorf("an endpoint's caps %v; want FI_ATOMIC %v", ep.Impl.(*core.EP).Info().Caps, c.offer)
			}
			err := askAtomic(f)
			if c.offer && err != nil {
				t.Errorf("getinfo with hints FI_ATOMIC: %v", err)
			}
			if !c.offer && !errors.Is(err, fi.ENODATA) {
				t.Errorf("getinfo with hints FI_ATOMIC: %v, want FI_ENODATA", err)
			}
		})
	}

	// FI_READ: "This flag requires that FI_RMA and/or FI_ATOMIC be set.":
	// an entry whose FI_ATOMIC goes and that has no FI_RMA loses the
	// modifiers with it.
	f, _ := atomicFabric(t, &atomicProvider{plain: true, dropRM: true})
	for _, in := range f.Infos() {
		mods := fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
		if in.Caps&(fi.ATOMIC|mods) != 0 || in.TxAttr.Caps&(fi.ATOMIC|mods) != 0 || in.RxAttr.Caps&(fi.ATOMIC|mods) != 0 {
			t.Errorf("entry without FI_RMA: caps %v, tx %v, rx %v; want no FI_ATOMIC and none of its modifiers", in.Caps, in.TxAttr.Caps, in.RxAttr.Caps)
		}
		if in.Caps&fi.MSG == 0 {
			t.Errorf("entry lost FI_MSG: %v", in.Caps)
		}
	}
}

// TestAtomicCtlDefaultFlags: the ctl atomics carry the endpoint's
// tx_op_flags, but FI_INJECT only on the base atomic: fi_atomic(3) has an
// inject form of fi_atomic alone ("The fi_inject_atomic call is an
// optimized version of fi_atomic.").
func TestAtomicCtlDefaultFlags(t *testing.T) {
	p := &atomicProvider{types: map[fi.EPType]bool{fi.EP_MSG: true}}
	_, d := atomicFabric(t, p)
	m, err := regMR(t, d, "m", 4096, "", "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%#x", m.Impl.(*core.MR).Key())
	create(t, d, core.KindEQ, "e")
	create(t, d, core.KindCQ, "c")
	ep := create(t, d, core.KindEP, "x")
	setAttrs(t, ep, map[string]string{"tx_op_flags": "FI_INJECT,FI_COMPLETION"})
	// Enabled and not connected: the fake performs atomics without a
	// connection.
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable",
		"atomic sum uint64 m 0 8 2048 " + key, "fetch_atomic sum uint64 m 0 8 m 512 2048 " + key,
		"compare_atomic cswap uint64 m 0 8 16 m 512 2048 " + key} {
		run(t, ep, c)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.posted) != 3 {
		t.Fatalf("%d atomics posted, want 3", len(p.posted))
	}
	for i, want := range []fi.OpFlags{fi.INJECT | fi.COMPLETION, fi.COMPLETION, fi.COMPLETION} {
		if got := p.posted[i].Flags; got != want {
			t.Errorf("%s posted with flags %v, want %v", atomicNames[i], got, want)
		}
	}
}

var atomicNames = []string{"atomic", "fetch_atomic", "compare_atomic"}
