package tests

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/ring"
)

// What docs/abi.md says of requests the daemon cannot serve: each is one
// completion with its context and a negative FI_E* code, and the
// endpoint's err file says why.

// postRaw publishes w on r as it is, after mutate (if not nil) has changed
// its encoded bytes: the reserved bytes, for instance, which WR.Encode
// always zeroes.
func postRaw(t *testing.T, r *ring.Ring, w ring.WR, mutate func([]byte)) {
	t.Helper()
	b, ok := r.Reserve()
	if !ok {
		t.Fatal("ring full")
	}
	w.Encode(b)
	if mutate != nil {
		mutate(b)
	}
	r.Publish(1)
}

// TestMalformedRequests posts each kind of request the daemon rejects
// before it reaches the provider, on a connected FI_EP_MSG endpoint of
// tcp (no FI_TAGGED, no FI_ATOMIC; tx_inject_size 128), and checks the
// completion's context, flags and error code, and the endpoint's err
// file.
func TestMalformedRequests(t *testing.T) {
	d := mount(t)
	p := newRingPair(t, d, 4096)
	tx, err := p.a.Tx()
	must(t, err)
	rx, err := p.a.Rx()
	must(t, err)
	desc := p.mrA.Desc()
	const (
		einval     = int32(syscall.EINVAL)
		eopnotsupp = int32(syscall.EOPNOTSUPP)
		inject     = 1 << 25 // FI_INJECT
	)
	cases := []struct {
		name   string
		r      *ring.Ring
		w      ring.WR
		mutate func([]byte)
		err    int32
		flags  uint64 // the completion's
	}{
		{"reserved byte 1", tx, ring.WR{Op: ring.OpSend, Desc: desc, Len: 8}, func(b []byte) { b[1] = 1 }, einval, 0x802},
		{"reserved byte 127", rx, ring.WR{Op: ring.OpRecv, Desc: desc, Len: 8}, func(b []byte) { b[127] = 1 }, einval, 0x402},
		{"op 0 (a zeroed entry)", tx, ring.WR{}, nil, einval, 0x802},
		{"op 10", tx, ring.WR{Op: 10, Desc: desc, Len: 8}, nil, einval, 0x802},
		{"receive on tx", tx, ring.WR{Op: ring.OpRecv, Desc: desc, Len: 8}, nil, einval, 0x802},
		{"send on rx", rx, ring.WR{Op: ring.OpSend, Desc: desc, Len: 8}, nil, einval, 0x402},
		{"FI_INJECT receive", rx, ring.WR{Op: ring.OpRecv, Flags: inject, Desc: desc, Len: 8}, nil, einval, 0x402},
		{"FI_INJECT read", tx, ring.WR{Op: ring.OpRead, Flags: inject, Desc: desc, Len: 8}, nil, einval, 0x104},
		{"FI_INJECT past inject_size", tx, ring.WR{Op: ring.OpSend, Flags: inject, Desc: desc, Len: 129}, nil, einval, 0x802},
		{"unknown desc", tx, ring.WR{Op: ring.OpSend, Desc: desc + 1000, Len: 8}, nil, einval, 0x802},
		{"past the region", tx, ring.WR{Op: ring.OpSend, Desc: desc, Offset: 4090, Len: 8}, nil, einval, 0x802},
		{"atomic without FI_ATOMIC", tx, ring.WR{Op: ring.OpAtomic, Desc: desc, Len: 8}, nil, eopnotsupp, 0x210},
		{"fetch atomic without FI_ATOMIC", tx, ring.WR{Op: ring.OpFetchAtomic, Desc: desc, Len: 8}, nil, eopnotsupp, 0x110},
		{"tagged send without FI_TAGGED", tx, ring.WR{Op: ring.OpTSend, Desc: desc, Len: 8}, nil, eopnotsupp, 0x808},
	}
	for i, c := range cases {
		c.w.Context = uint64(100 + i)
		postRaw(t, c.r, c.w, c.mutate)
		got := pollN(t, p.cqA, 1)[0]
		if got.Context != c.w.Context || got.Err != -c.err || got.Flags != c.flags {
			t.Errorf("%s: completion %+v, want context %d, err %d, flags %#x", c.name, got, c.w.Context, -c.err, c.flags)
		}
		if e := p.a.Err(); !strings.Contains(e, "work request") {
			t.Errorf("%s: ep err %q does not say which work request failed", c.name, e)
		}
	}
	// A request still goes through afterwards.
	must(t, p.b.PostRecv(p.mrB, 0, 8, 1, 0))
	must(t, p.a.PostSend(p.mrA, 0, 8, 2, 0))
	if c := pollN(t, p.cqA, 1)[0]; c.Context != 2 || c.Err != 0 || c.Flags != 0x802 {
		t.Errorf("send after the malformed requests: %+v", c)
	}
}

// TestZeroedRDMReceive: on an FI_EP_RDM endpoint (FI_DIRECTED_RECV among
// its default capabilities) a receive's addr is its only accepted source,
// so a receive with addr 0 is a directed receive from fi_addr 0: with an
// empty AV it fails with -FI_EINVAL, and with a peer inserted at fi_addr
// 0 it takes that peer's message. FI_ADDR_UNSPEC takes anyone's.
func TestZeroedRDMReceive(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	type side struct {
		av *fabricfs.AV
		cq *fabricfs.CQ
		ep *fabricfs.EP
		mr *fabricfs.MR
	}
	mk := func() *side {
		s := &side{}
		var err error
		s.av, err = dom.NewAV()
		must(t, err)
		s.cq, err = dom.NewCQ(0)
		must(t, err)
		s.ep, err = dom.NewRDM(s.av, s.cq)
		must(t, err)
		s.mr, err = dom.NewMR(64, "FI_SEND,FI_RECV")
		must(t, err)
		t.Cleanup(func() {
			for _, c := range []interface{ Close() error }{s.mr, s.ep, s.cq, s.av} {
				c.Close()
			}
		})
		return s
	}
	a, b := mk(), mk()
	if caps, err := b.ep.Attr("caps"); err != nil || !strings.Contains(caps, "FI_DIRECTED_RECV") {
		t.Fatalf("RDM caps %q (%v), want FI_DIRECTED_RECV", caps, err)
	}
	// b's AV is empty: fi_addr 0 names nobody.
	must(t, b.ep.Post(b.mr, ring.WR{Op: ring.OpRecv, Context: 1, Len: 64}))
	if c := pollN(t, b.cq, 1)[0]; c.Context != 1 || c.Err != -int32(syscall.EINVAL) {
		t.Fatalf("zeroed receive with an empty AV: %+v, want -FI_EINVAL", c)
	}
	// With a at fi_addr 0 in b's AV, the zeroed receive takes a's message.
	aAddr, err := a.ep.Local()
	must(t, err)
	if n, err := b.av.Insert(aAddr); err != nil || n != 0 {
		t.Fatalf("insert: fi_addr %d, %v", n, err)
	}
	bAddr, err := b.ep.Local()
	must(t, err)
	if n, err := a.av.Insert(bAddr); err != nil || n != 0 {
		t.Fatalf("insert: fi_addr %d, %v", n, err)
	}
	must(t, b.ep.Post(b.mr, ring.WR{Op: ring.OpRecv, Context: 2, Len: 64}))
	copy(a.mr.Mem(), "from a")
	must(t, a.ep.Post(a.mr, ring.WR{Op: ring.OpSend, Context: 3, Len: 6}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs := b.cq.Poll(1)
		if len(cs) == 1 {
			if c := cs[0]; c.Context != 2 || c.Err != 0 || c.Len != 6 || string(b.mr.Mem()[:6]) != "from a" {
				t.Fatalf("zeroed receive: %+v %q", c, b.mr.Mem()[:6])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receive completion (b err: %s; a err: %s)", b.ep.Err(), a.ep.Err())
		}
		b.cq.Wait(time.Second)
	}
}
