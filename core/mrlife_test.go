package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestMRCloseInFlight: closing a memory region ends it at once, while a
// receive naming it is in flight. fi_mr(3): "When closing the MR, there
// must be no opened endpoints or counters associated with the MR" is
// about the application's bindings (fi_mr_bind), not the requests that
// named it, and "Note that accesses to a closed MR from a remote peer
// will result in an error at the peer." fi_cntr(3): "When closing the
// counter, there must be no opened endpoints, transmit contexts, receive
// contexts or memory regions associated with the counter": the closed
// region is not. Its directory goes, its requested key can be registered
// again, its counter closes, and a new request naming its desc fails
// (FI_EINVAL). Its memory stays (the receive lands in it; fi_mr(3):
// "Active or queued operations that reference a memory region being
// closed may fail or result in accesses to invalid memory", which the
// daemon must not make) until the receive completes, then goes back to
// the user's limit; a peer's read with its key fails afterwards.
func TestMRCloseInFlight(t *testing.T) {
	ctx := context.Background()
	f, d := loFabric(t)
	a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
	memory := func() int64 { return f.Held(0)[core.MemoryBytes] }
	creg, err := cq.Region()
	if err != nil {
		t.Fatal(err)
	}
	cqr, err := ring.Open(creg.Mem)
	if err != nil {
		t.Fatal(err)
	}
	atx, arx := ringsOf(t, a)
	btx, _ := ringsOf(t, b)
	post := func(r *ring.Ring, w ring.WR) {
		t.Helper()
		slot, ok := r.Reserve()
		if !ok {
			t.Fatal("work ring full")
		}
		w.Encode(slot)
		r.Publish(1)
	}
	var cqes []ring.CQE
	completion := func(context uint64) ring.CQE {
		t.Helper()
		for n := len(cqes) + 1; ; n++ {
			for i, c := range cqes {
				if c.Context == context {
					cqes = append(cqes[:i], cqes[i+1:]...)
					return c
				}
			}
			cqes = reapCQEs(t, cqr, cqes, n, fmt.Sprintf("the completion of context %d", context))
		}
	}

	// b's messages come from s; x is the source of b's RMA.
	s, err := regMR(t, d, "s", 4096, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sr, err := s.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regMR(t, d, "x", 4096, "", ""); err != nil {
		t.Fatal(err)
	}
	before := memory()
	m, err := regMR(t, d, "m", 8192, "0x55", "FI_SEND,FI_RECV,FI_REMOTE_READ")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ctl(ctx, 0, "read x 0 8 0 0x55"); err != nil {
		t.Fatalf("a peer's read with the live region's key: %v", err)
	}
	k := create(t, d, core.KindCntr, "k")
	run(t, m, "bind cntr k remote_read")
	if err := k.Remove(); err == nil {
		t.Fatal("a counter bound to a live region closed")
	}
	desc := m.Serial
	post(arx, ring.WR{Op: ring.OpRecv, Context: 1, Desc: desc, Offset: 100, Len: 64})
	for deadline := time.Now().Add(5 * time.Second); arx.Len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not take the receive")
		}
	}

	if err := m.Remove(); err != nil {
		t.Fatal(err)
	}
	if present(d, core.KindMR, "m") {
		t.Error("mr/m is still there after its close")
	}
	if err := k.Remove(); err != nil {
		t.Errorf("closing the counter bound to the closed region: %v", err)
	}
	again, err := regMR(t, d, "again", 4096, "0x55", "")
	if err != nil {
		t.Errorf("registering the closed region's key again: %v", err)
	} else if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := memory(); got != before+8192 {
		t.Errorf("with the receive in flight the user holds %d bytes, want %d (the region's memory stays)", got, before+8192)
	}
	post(atx, ring.WR{Op: ring.OpSend, Context: 2, Desc: desc, Len: 8})
	if c := completion(2); c.Err != -int32(fi.EINVAL) {
		t.Errorf("a send naming the closed region's desc completed %+v, want error FI_EINVAL", c)
	}

	// The receive in flight completes into the memory it holds.
	copy(sr.Mem, "in flight")
	post(btx, ring.WR{Op: ring.OpSend, Context: 3, Desc: s.Serial, Len: 9})
	if c := completion(3); c.Err != 0 {
		t.Fatalf("b's send: %+v", c)
	}
	if c := completion(1); c.Err != 0 || c.Len != 9 {
		t.Fatalf("the receive into the closed region completed %+v, want 9 bytes", c)
	}
	if got := memory(); got != before {
		t.Errorf("after the receive completed the user holds %d bytes, want %d", got, before)
	}
	if err := b.Ctl(ctx, 0, "read x 0 8 0 0x55"); err == nil {
		t.Error("a peer's read with the closed region's key succeeded")
	}
}

// TestMRCloseAfterUse: a region the endpoint's requests used, now done,
// goes at once when closed: its memory back to the user's limit, its key
// free, its desc unknown to the endpoint's next request.
func TestMRCloseAfterUse(t *testing.T) {
	f, d := loFabric(t)
	sa, sb, _, cqr := ringPair(t, d)
	memory := func() int64 { return f.Held(0)[core.MemoryBytes] }
	before := memory()
	m, err := regMR(t, d, "u", 4096, "0x66", "")
	if err != nil {
		t.Fatal(err)
	}
	u := &ringSide{desc: m.Serial, tx: sa.tx, rx: sa.rx}
	sb.post(t, sb.rx, ring.WR{Op: ring.OpRecv, Context: 1, Len: 64})
	u.post(t, u.tx, ring.WR{Op: ring.OpSend, Context: 2, Len: 16})
	reap(t, cqr, 2)
	if err := m.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := memory(); got != before {
		t.Errorf("after closing a region used and done the user holds %d bytes, want %d", got, before)
	}
	if _, err := regMR(t, d, "v", 4096, "0x66", ""); err != nil {
		t.Errorf("registering the closed region's key again: %v", err)
	}
	u.post(t, u.tx, ring.WR{Op: ring.OpSend, Context: 3, Len: 16})
	cs := reapCQEs(t, cqr, nil, 1, "the failed send's completion")
	if cs[0].Context != 3 || cs[0].Err != -int32(fi.EINVAL) {
		t.Errorf("a send naming the closed region's desc completed %+v, want error FI_EINVAL", cs[0])
	}
}

// TestMRCloseSRX: a receive posted to a shared receive context holds its
// region's memory, not the region: the region closes at once, the
// message still lands in the memory, which then goes back; a receive
// naming the closed region's desc fails (FI_EINVAL, on the first bound
// endpoint's receive CQ, as every failed receive of the context).
func TestMRCloseSRX(t *testing.T) {
	f, d := loFabric(t)
	p := newSharedPair(t, d, 1)
	memory := func() int64 { return f.Held(0)[core.MemoryBytes] }
	before := memory()
	p.post(t, 1, 0)
	p.await(t, "posted=1")
	if err := p.mr.Remove(); err != nil {
		t.Fatal(err)
	}
	if present(d, core.KindMR, p.mr.ID) {
		t.Error("the region is still there after its close")
	}
	if got := memory(); got != before {
		t.Errorf("with the receive posted the user holds %d bytes, want %d", got, before)
	}
	p.send(t, 0, "hello")
	if c := next(t, p.cqs[0]); c.Err != 0 || c.Len != 5 || c.Context != 1 {
		t.Errorf("the receive into the closed region completed %+v, want 5 bytes", c)
	}
	if got := memory(); got != before-4096 {
		t.Errorf("after the receive the user holds %d bytes, want %d", got, before-4096)
	}
	p.post(t, 2, 0)
	if c := next(t, p.cqs[0]); c.Err != fi.EINVAL || c.Context != 2 {
		t.Errorf("a receive naming the closed region's desc completed %+v, want FI_EINVAL", c)
	}
}
