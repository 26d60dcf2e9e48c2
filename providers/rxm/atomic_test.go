package rxm

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
	"github.com/fabricfs/fabricfs/providers/verbs"
)

// atomicOp makes an atomic of kind with op on datatype dt, to dst's
// region key at addr: operand buf, compare values cmp, and a result buffer
// of n bytes for the fetching kinds.
func (r *rdm) atomicOp(kind core.OpKind, dst fi.Addr, dt fi.AtomicType, op fi.AtomicOp, buf, cmp []byte, n int, addr, key uint64) *core.Op {
	o := r.op(kind, buf)
	o.Peer, o.Datatype, o.AtomicOp, o.Compare, o.Addr, o.Key = dst, dt, op, cmp, addr, key
	if kind != core.OpAtomic {
		o.Result = make([]byte, n)
	}
	return o
}

var atomicOpKinds = []core.OpKind{core.OpAtomic, core.OpFetchAtomic, core.OpCompareAtomic}

// TestAtomicsEveryPair does every atomic rxm supports, of each kind, from
// one RDM endpoint on the other's memory, three elements at a time, the
// first opening the connection, and checks the target memory, the result
// ("The initial value is read into the user provided result buffer",
// fi_atomic(3)), the completion, and the target's remote event (a remote
// write for fi_atomic, a remote read for the fetching kinds, as
// libfabric's rxm counts them). Pairs rxm does not take are refused at
// Post: "-FI_EOPNOTSUPP The requested atomic operation is not supported
// on this endpoint."
func TestAtomicsEveryPair(t *testing.T) {
	p, d := testDomain(t)
	atomicsEveryPair(t, newRDM(t, p, d), newRDM(t, p, d))
}

// TestAtomicsOverVerbs is TestAtomicsEveryPair between RDM endpoints over
// the verbs provider's RC connections (verbs;ofi_rxm), one on each of two
// devices: rxm's atomics are messages over any MSG provider, as
// libfabric's verbs;ofi_rxm does them.
func TestAtomicsOverVerbs(t *testing.T) {
	vp, err := verbs.New(verbs.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}, Port: freeUDPPort(t)})
	if err != nil {
		t.Fatalf("verbs.New: %v", err)
	}
	t.Cleanup(func() { vp.Close() })
	w := Wrap(vp)
	var eps []*rdm
	for _, name := range []string{"rxe_127_0_0_1", "rxe_127_0_0_2"} {
		d, err := w.OpenDomain(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		for _, in := range w.Infos() {
			if in.DomainAttr.Name == name && in.EPAttr.Type == fi.EP_RDM {
				eps = append(eps, newRDMWith(t, d, in))
				break
			}
		}
	}
	if len(eps) != 2 {
		t.Fatalf("%d FI_EP_RDM endpoints over verbs, want 2", len(eps))
	}
	atomicsEveryPair(t, eps[0], eps[1])
}

// freeUDPPort is a UDP port of 127.0.0.1 free a moment ago: the RoCE port
// of a test's verbs provider.
func freeUDPPort(t *testing.T) int {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// atomicsEveryPair does every atomic from a on b's memory and checks it.
func atomicsEveryPair(t *testing.T, a, b *rdm) {
	t.Helper()
	const key = 0xa70
	mem := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	remotes, pairs := 0, 0
	for _, kind := range atomicOpKinds {
		ak, _ := atomicKinds(kind)
		for aop := fi.MIN; aop < fi.ATOMIC_OP_LAST; aop++ {
			for dt := fi.INT8; dt <= fi.UINT128; dt++ {
				size := atomic.Size(dt)
				n := 3 * size
				operand, cmp := randBytes(rng, n), []byte(nil)
				if kind == core.OpCompareAtomic {
					cmp = randBytes(rng, n)
				}
				if aop == fi.ATOMIC_READ {
					operand = nil
				}
				if !atomic.Supported(ak, dt, aop) {
					op := a.atomicOp(kind, b.addr, dt, aop, operand, cmp, n, 0, key)
					if err := a.ep.Post(op); !errors.Is(err, fi.EOPNOTSUPP) {
						t.Errorf("%v %v on %v: Post %v, want FI_EOPNOTSUPP", ak, aop, dt, err)
					}
					continue
				}
				pairs++
				off := 64 * (pairs % 60)
				target := randBytes(rng, n)
				if cmp != nil {
					copy(cmp[size:], target[size:2*size]) // the middle element compares equal
				}
				copy(mem[off:], target)
				b.ev.Expose(key, mem, fi.REMOTE_READ|fi.REMOTE_WRITE) // publishes mem to b's goroutines
				want, wantResult := slices.Clone(target), make([]byte, n)
				if err := atomic.Apply(ak, dt, aop, want, operand, cmp, wantResult); err != nil {
					t.Fatal(err)
				}

				op := a.atomicOp(kind, b.addr, dt, aop, operand, cmp, n, uint64(off), key)
				if err := a.ep.Post(op); err != nil {
					t.Fatalf("%v %v on %v: %v", ak, aop, dt, err)
				}
				c := a.waitFor(t, op)
				if c.Err != 0 || c.Flags != kind.CQFlags() {
					t.Fatalf("%v %v on %v: completion %+v", ak, aop, dt, c)
				}
				rc := b.remote(t, remotes) // also orders mem's bytes before the reads below
				remotes++
				wantFlags := fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ)
				if kind == core.OpAtomic {
					wantFlags = fi.CQFlags(fi.ATOMIC | fi.REMOTE_WRITE)
				}
				if rc.Flags != wantFlags || rc.Len != uint64(n) {
					t.Errorf("%v %v on %v: remote event %+v", ak, aop, dt, rc)
				}
				if !bytes.Equal(mem[off:off+n], want) {
					t.Errorf("%v %v on %v: target %x, want %x (was %x, operand %x, compare %x)", ak, aop, dt, mem[off:off+n], want, target, operand, cmp)
				}
				if kind != core.OpAtomic && !bytes.Equal(op.Result, wantResult) {
					t.Errorf("%v %v on %v: result %x, want %x", ak, aop, dt, op.Result, wantResult)
				}
			}
		}
	}
	if pairs != 301 { // as many as real tcp;ofi_rxm's fi_query_atomic takes
		t.Errorf("%d pairs supported, want 301", pairs)
	}
	if errs := b.ev.errors(); len(errs) > 0 {
		t.Errorf("async errors: %v", errs)
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestAtomicBadKey: a key the target does not have, a region without the
// access the kind needs ("The target buffer of fetch-atomic operations
// must be enabled for remote read access", fi_atomic(3)) and a range
// beyond the region complete with FI_EACCES at the initiator, as
// libfabric's rxm answers them, leave the memory alone, and keep the
// connection: the next atomic works.
func TestAtomicBadKey(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	ro, rw, wo := make([]byte, 64), make([]byte, 64), make([]byte, 64)
	b.ev.Expose(1, ro, fi.REMOTE_READ)
	b.ev.Expose(2, rw, fi.REMOTE_READ|fi.REMOTE_WRITE)
	b.ev.Expose(3, wo, fi.REMOTE_WRITE)
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for _, c := range []struct {
		name      string
		kind      core.OpKind
		aop       fi.AtomicOp
		addr, key uint64
		buf       []byte
	}{
		{"unknown key", core.OpAtomic, fi.SUM, 0, 99, one},
		{"write to a read-only region", core.OpAtomic, fi.SUM, 0, 1, one},
		{"fetch-add on a read-only region", core.OpFetchAtomic, fi.SUM, 0, 1, one},
		{"read of a write-only region", core.OpFetchAtomic, fi.ATOMIC_READ, 0, 3, nil},
		{"beyond the region", core.OpAtomic, fi.SUM, 60, 2, one},
		{"past the end of the address space", core.OpFetchAtomic, fi.SUM, ^uint64(0) - 3, 2, one},
	} {
		op := a.atomicOp(c.kind, b.addr, fi.UINT64, c.aop, c.buf, nil, 8, c.addr, c.key)
		if err := a.ep.Post(op); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if comp := a.waitFor(t, op); comp.Err != fi.EACCES || comp.Flags != c.kind.CQFlags() {
			t.Errorf("%s: completion %+v, want FI_EACCES", c.name, comp)
		}
	}
	// The connection stays: these work, on the regions that allow them.
	rd := a.atomicOp(core.OpFetchAtomic, b.addr, fi.UINT64, fi.ATOMIC_READ, nil, nil, 8, 0, 1)
	add := a.atomicOp(core.OpAtomic, b.addr, fi.UINT64, fi.SUM, one, nil, 8, 8, 3)
	for _, op := range []*core.Op{rd, add} {
		if err := a.ep.Post(op); err != nil {
			t.Fatal(err)
		}
		if c := a.waitFor(t, op); c.Err != 0 {
			t.Fatalf("after the refusals: %+v", c)
		}
	}
	b.remote(t, 1)
	if !bytes.Equal(ro, make([]byte, 64)) || !bytes.Equal(rw, make([]byte, 64)) || wo[8] != 1 {
		t.Errorf("memory after refused atomics: %x %x %x", ro, rw, wo)
	}
	if n := b.numRemotes(); n != 2 {
		t.Errorf("%d remote events, want 2 (refused atomics are not counted)", n)
	}
	if a.liveConns() != 1 || len(a.ev.errors())+len(b.ev.errors()) > 0 {
		t.Errorf("%d connections, errors %v %v", a.liveConns(), a.ev.errors(), b.ev.errors())
	}
}

// TestAtomicPostErrors: what Post refuses, with libfabric's codes.
func TestAtomicPostErrors(t *testing.T) {
	p, d := testDomain(t)
	a := newRDM(t, p, d)
	peer := fi.Addr{Format: fi.SOCKADDR_IN, IP: netip.MustParseAddrPort("127.0.0.1:9")}
	eight := make([]byte, 8)
	for _, c := range []struct {
		name string
		op   *core.Op
		want fi.Errno
	}{
		{"unsupported pair", a.atomicOp(core.OpAtomic, peer, fi.DOUBLE, fi.BOR, eight, nil, 0, 0, 1), fi.EOPNOTSUPP},
		{"128-bit integers", a.atomicOp(core.OpAtomic, peer, fi.INT128, fi.SUM, make([]byte, 16), nil, 0, 0, 1), fi.EOPNOTSUPP},
		{"remote CQ data", func() *core.Op {
			op := a.atomicOp(core.OpAtomic, peer, fi.UINT64, fi.SUM, eight, nil, 0, 0, 1)
			op.Flags = fi.OpFlags(fi.REMOTE_CQ_DATA)
			return op
		}(), fi.EINVAL},
		// "-FI_EMSGSIZE The number of atomic operations in a single
		// request exceeds that supported by the underlying provider."
		{"too many elements", a.atomicOp(core.OpAtomic, peer, fi.UINT8, fi.SUM, make([]byte, EagerLimit-wire.AtomicHeaderSize+1), nil, 0, 0, 1), fi.EMSGSIZE},
		{"too many compares", a.atomicOp(core.OpCompareAtomic, peer, fi.UINT8, fi.CSWAP, make([]byte, 8145), make([]byte, 8145), 8145, 0, 1), fi.EMSGSIZE},
		{"too many to fetch", a.atomicOp(core.OpFetchAtomic, peer, fi.UINT8, fi.ATOMIC_READ, nil, nil, EagerLimit-wire.AtomicHeaderSize+1, 0, 1), fi.EMSGSIZE},
		{"no elements", a.atomicOp(core.OpAtomic, peer, fi.UINT64, fi.SUM, nil, nil, 0, 0, 1), fi.EINVAL},
		{"part of an element", a.atomicOp(core.OpAtomic, peer, fi.UINT64, fi.SUM, make([]byte, 12), nil, 0, 0, 1), fi.EINVAL},
		{"operand shorter than the result", a.atomicOp(core.OpFetchAtomic, peer, fi.UINT64, fi.SUM, eight, nil, 16, 0, 1), fi.EINVAL},
		{"compare shorter than the result", a.atomicOp(core.OpCompareAtomic, peer, fi.UINT64, fi.CSWAP, make([]byte, 16), eight, 16, 0, 1), fi.EINVAL},
		{"injected fetch", func() *core.Op {
			op := a.atomicOp(core.OpFetchAtomic, peer, fi.UINT64, fi.SUM, eight, nil, 8, 0, 1)
			op.Flags = fi.INJECT
			return op
		}(), fi.EINVAL},
		{"no destination", a.atomicOp(core.OpAtomic, fi.Addr{}, fi.UINT64, fi.SUM, eight, nil, 0, 0, 1), fi.EINVAL},
	} {
		if err := a.ep.Post(c.op); !errors.Is(err, c.want) {
			t.Errorf("%s: Post %v, want %v", c.name, err, c.want)
		}
	}
	a.none(t)

	info := loInfo(t, p).Clone()
	info.Caps &^= fi.ATOMIC
	noAtomics := newRDMWith(t, d, info)
	op := noAtomics.atomicOp(core.OpAtomic, peer, fi.UINT64, fi.SUM, eight, nil, 0, 0, 1)
	if err := noAtomics.ep.Post(op); !errors.Is(err, fi.EOPNOTSUPP) {
		t.Errorf("endpoint without FI_ATOMIC: Post %v, want FI_EOPNOTSUPP", err)
	}
}

// TestQueryAtomic: the domain answers fi_query_atomic for FI_EP_RDM as
// real tcp;ofi_rxm does (count = (16384 - 96) / size, halved for
// compares), and has no atomics for tcp's FI_EP_MSG.
func TestQueryAtomic(t *testing.T) {
	_, d := testDomain(t)
	q, ok := d.(core.Atomics)
	if !ok {
		t.Fatal("the rxm domain does not implement core.Atomics")
	}
	for _, c := range []struct {
		kind        core.OpKind
		dt          fi.AtomicType
		aop         fi.AtomicOp
		count, size uint64
		err         fi.Errno
	}{
		{core.OpAtomic, fi.INT8, fi.SUM, 16288, 1, 0},
		{core.OpFetchAtomic, fi.UINT64, fi.ATOMIC_READ, 2036, 8, 0},
		{core.OpCompareAtomic, fi.UINT16, fi.CSWAP, 4072, 2, 0},
		{core.OpCompareAtomic, fi.FLOAT_COMPLEX, fi.CSWAP_NE, 1018, 8, 0},
		{core.OpAtomic, fi.UINT128 + 1, fi.SUM, 0, 0, fi.EOPNOTSUPP},
		{core.OpAtomic, fi.DOUBLE, fi.BXOR, 0, 0, fi.EOPNOTSUPP},
		{core.OpAtomic, fi.LONG_DOUBLE, fi.SUM, 0, 0, fi.EOPNOTSUPP},
		{core.OpCompareAtomic, fi.INT32, fi.SUM, 0, 0, fi.EOPNOTSUPP},
		{core.OpSend, fi.INT32, fi.SUM, 0, 0, fi.EINVAL},
	} {
		count, size, err := q.QueryAtomic(fi.EP_RDM, c.kind, c.dt, c.aop)
		if count != c.count || size != c.size || (c.err == 0) != (err == nil) || c.err != 0 && !errors.Is(err, c.err) {
			t.Errorf("QueryAtomic(RDM, %d, %v, %v) = %d, %d, %v; want %d, %d, %v", c.kind, c.dt, c.aop, count, size, err, c.count, c.size, c.err)
		}
	}
	if _, _, err := q.QueryAtomic(fi.EP_MSG, core.OpAtomic, fi.INT32, fi.SUM); err == nil {
		t.Errorf("QueryAtomic(MSG) over tcp: no error")
	}
}

// TestAtomicsWaitLikeSends: atomics posted before the connection is up
// wait for it, in order, and count against tx_size until answered: with
// tx_size 2, a third is refused with FI_EAGAIN; the two complete once the
// peer has answered them.
func TestAtomicsWaitLikeSends(t *testing.T) {
	p, d := testDomain(t)
	info := loInfo(t, p).Clone()
	info.TxAttr.Size = 2
	a, b := newRDMWith(t, d, info), newRDM(t, p, d)
	mem := make([]byte, 8)
	b.ev.Expose(1, mem, fi.REMOTE_READ|fi.REMOTE_WRITE)
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	ops := []*core.Op{
		a.atomicOp(core.OpAtomic, b.addr, fi.UINT64, fi.SUM, one, nil, 0, 0, 1),
		a.atomicOp(core.OpFetchAtomic, b.addr, fi.UINT64, fi.SUM, one, nil, 8, 0, 1),
	}
	for _, op := range ops {
		if err := a.ep.Post(op); err != nil {
			t.Fatal(err)
		}
	}
	third := a.atomicOp(core.OpAtomic, b.addr, fi.UINT64, fi.SUM, one, nil, 0, 0, 1)
	if err := a.ep.Post(third); !errors.Is(err, fi.EAGAIN) {
		t.Fatalf("a third atomic with tx_size 2: %v, want FI_EAGAIN", err)
	}
	for _, op := range ops {
		if c := a.waitFor(t, op); c.Err != 0 {
			t.Fatalf("completion %+v", c)
		}
	}
	if got := ops[1].Result; !bytes.Equal(got, one) {
		t.Errorf("the fetch after the add read %x, want %x (in order)", got, one)
	}
	b.remote(t, 1)
	if mem[0] != 2 {
		t.Errorf("target %x after two adds of 1", mem)
	}
	if err := a.ep.Post(third); err != nil {
		t.Errorf("after the completions: %v", err)
	}
	a.waitFor(t, third)
}

// TestAtomicsUnanswered: an atomic whose peer never answers stays in
// flight (it holds its tx_size slot and the connection) until the
// connection ends, which fails it with FI_ECONNRESET; one in flight at
// Close completes with FI_ECANCELED.
func TestAtomicsUnanswered(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for i, closeEP := range []bool{false, true} {
		port := uint16(42000 + i)
		c, _ := rawPeer(t, r, port) // a peer that reads and never answers
		go io.Copy(io.Discard, c)
		peer := fi.Addr{Format: fi.SOCKADDR_IN, IP: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)}
		op := r.atomicOp(core.OpFetchAtomic, peer, fi.UINT64, fi.SUM, one, nil, 8, 0, 1)
		if err := r.ep.Post(op); err != nil {
			t.Fatal(err)
		}
		r.none(t)
		r.ep.mu.Lock()
		inFlight := len(r.ep.atomics)
		r.ep.mu.Unlock()
		if inFlight != 1 {
			t.Fatalf("%d atomics in flight, want 1", inFlight)
		}
		want := fi.ECONNRESET
		if closeEP {
			want = fi.ECANCELED
			r.ep.Close()
		} else {
			c.Close()
		}
		if comp := r.waitFor(t, op); comp.Err != want {
			t.Errorf("close endpoint %v: completion %+v, want %v", closeEP, comp, want)
		}
	}
}

// TestAtomicRepliesWait: with replySends responses in flight on a
// connection, further responses wait in order, each keeping the receive
// buffer its request came in (so the peer runs out of room to send more);
// as room comes they go out in order and give their buffers back; a
// connection that ends drops those still waiting.
func TestAtomicRepliesWait(t *testing.T) {
	ev := &events{}
	ev.Expose(1, make([]byte, 64), fi.REMOTE_READ|fi.REMOTE_WRITE)
	e := &endpoint{ev: ev, atomics: map[uint64]*sendItem{}}
	tcp := &fakeConn{}
	c := &conn{ep: e, tcp: tcp, peer: &peer{}}
	c.replying = replySends
	var recvs []*core.Op
	for id := range uint64(3) {
		req := wire.AtomicRequest{Datatype: fi.UINT32, AtomicOp: fi.SUM, Count: 1, Operand: []byte{1, 0, 0, 0}}
		req.Ioc[0] = wire.RMAIoc{Addr: 4 * id, Count: 1, Key: 1}
		body, err := req.AppendBody(nil, wire.OpAtomicFetch)
		if err != nil {
			t.Fatal(err)
		}
		h := req.Header(0, 100+id, wire.OpAtomicFetch)
		recv := c.newBuf()
		recvs = append(recvs, recv)
		if err := e.serveAtomic(c, &h, body, recv); err != nil {
			t.Fatal(err)
		}
	}
	if len(tcp.sent) != 0 || len(e.replies) != 3 || c.waiting != 3 || len(c.free) != 0 {
		t.Fatalf("full: %d sent, %d waiting (%d counted), %d buffers given back; want 0, 3, 3, 0", len(tcp.sent), len(e.replies), c.waiting, len(c.free))
	}
	c.replying = replySends - 1 // one response has been sent
	e.sendReplies()
	var h wire.Header
	if len(tcp.sent) != 1 || h.Decode(tcp.sent[0]) != nil || h.MsgID != 100 {
		t.Fatalf("after room for one: %d sent (msg_id %d), want the first", len(tcp.sent), h.MsgID)
	}
	if c.waiting != 2 || !slices.Contains(c.free, recvs[0]) || slices.Contains(c.free, recvs[1]) {
		t.Errorf("after room for one: %d waiting; the first buffer given back %v, the second %v", c.waiting,
			slices.Contains(c.free, recvs[0]), slices.Contains(c.free, recvs[1]))
	}
	e.mu.Lock()
	e.atomicsGoneLocked(c, fi.ECONNRESET)
	e.mu.Unlock()
	if c.waiting != 0 || len(e.replies) != 0 {
		t.Errorf("after the connection ended: %d waiting (%d counted)", len(e.replies), c.waiting)
	}
}

// TestAtomicReadTooLong: a peer's FI_ATOMIC_READ of more elements than
// one response carries (its request is small: it sends no operand) is
// answered with -FI_EMSGSIZE, as fi_atomic(3) names the error ("The
// number of atomic operations in a single request exceeds that supported
// by the underlying provider."), and the connection stays; the most that
// fit are read.
func TestAtomicReadTooLong(t *testing.T) {
	ev := &events{}
	ev.Expose(1, make([]byte, 1<<16), fi.REMOTE_READ)
	e := &endpoint{ev: ev, atomics: map[uint64]*sendItem{}}
	tcp := &fakeConn{}
	c := &conn{ep: e, tcp: tcp, peer: &peer{}}
	most := maxAtomicCount(atomic.Fetch, 8)
	for i, count := range []uint64{most + 1, most} {
		req := wire.AtomicRequest{Datatype: fi.UINT64, AtomicOp: fi.ATOMIC_READ, Count: 1}
		req.Ioc[0] = wire.RMAIoc{Count: count, Key: 1}
		body, err := req.AppendBody(nil, wire.OpAtomicFetch)
		if err != nil {
			t.Fatal(err)
		}
		h := req.Header(0, 7, wire.OpAtomicFetch)
		if err := e.serveAtomic(c, &h, body, c.newBuf()); err != nil {
			t.Fatalf("%d elements: %v", count, err)
		}
		var rh wire.Header
		if err := rh.Decode(tcp.sent[i]); err != nil {
			t.Fatal(err)
		}
		r, err := wire.DecodeAtomicResponse(&rh, tcp.sent[i][wire.HeaderSize:])
		want, wantLen := int32(0), int(8*count)
		if count > most {
			want, wantLen = -int32(fi.EMSGSIZE), 0
		}
		if err != nil || r.Status != want || len(r.Result) != wantLen {
			t.Errorf("%d elements: status %d, %d result bytes (%v); want %d, %d", count, r.Status, len(r.Result), err, want, wantLen)
		}
	}
}
