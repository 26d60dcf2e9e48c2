package core_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/ring"
)

// ringSide is one endpoint of BenchmarkRingRoundTrip as a client sees it:
// its work rings, and the CQ ring both endpoints share.
type ringSide struct {
	tx, rx *ring.Ring
	desc   uint64 // the memory region both sides use
	off    uint64 // where this side's buffers start in it
}

// ringsOf opens an endpoint's tx and rx rings in this process.
func ringsOf(b testing.TB, o *core.Object) (tx, rx *ring.Ring) {
	b.Helper()
	ep := o.Impl.(*core.EP)
	open := func(name string) *ring.Ring {
		reg, err := ep.Ring(name)
		if err != nil {
			b.Fatal(err)
		}
		r, err := ring.Open(reg.Mem)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	return open("tx"), open("rx")
}

// ringPair connects two endpoints of d that share a CQ and returns them
// as clients see them: their rings, one registered 4 KiB region (A's
// buffers from 0, B's from 1024) and its mapping, and the CQ's ring.
func ringPair(t testing.TB, d *core.Domain) (sa, sb *ringSide, mem []byte, cqr *ring.Ring) {
	t.Helper()
	a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
	mr := create(t, d, core.KindMR, "m")
	for _, at := range mr.Impl.Attrs() {
		if at.Name == "len" {
			if err := at.Set("4096"); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, mr, "reg")
	mreg, err := mr.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := cq.Region()
	if err != nil {
		t.Fatal(err)
	}
	if cqr, err = ring.Open(reg.Mem); err != nil {
		t.Fatal(err)
	}
	sa = &ringSide{desc: mr.Serial, off: 0}
	sb = &ringSide{desc: mr.Serial, off: 1024}
	sa.tx, sa.rx = ringsOf(t, a)
	sb.tx, sb.rx = ringsOf(t, b)
	return sa, sb, mreg.Mem, cqr
}

// post publishes one work request.
func (s *ringSide) post(b testing.TB, r *ring.Ring, w ring.WR) {
	slot, ok := r.Reserve()
	if !ok {
		b.Fatal("work ring full")
	}
	w.Desc = s.desc
	w.Offset += s.off
	w.Encode(slot)
	r.Publish(1)
}

// reap takes n completions from the CQ ring, spinning, and fails on an
// error entry.
func reap(b testing.TB, cq *ring.Ring, n int) {
	for n > 0 {
		head, tail := cq.Peek()
		if head == tail {
			runtime.Gosched()
			continue
		}
		for ; head != tail && n > 0; head++ {
			c, err := ring.DecodeCQE(cq.Entry(head))
			if err != nil || c.Err != 0 {
				b.Fatalf("completion %+v, %v", c, err)
			}
			n--
		}
		cq.Release(head)
	}
}

// BenchmarkRingRoundTrip is fi_pingpong's loop through the rings of two
// connected endpoints of one daemon (in this process): A sends, B's
// receive completes, B sends back, A's receive completes; each side keeps
// one receive posted. Its allocs/op are the daemon's per-message
// allocations on the ring -> provider -> completion path (two messages
// per op).
func BenchmarkRingRoundTrip(b *testing.B) {
	b.ReportAllocs()
	roundTrips(b, b.N, b.ResetTimer)
	b.StopTimer()
}

// roundTrips makes n of BenchmarkRingRoundTrip's round trips, calling
// start after the setup.
func roundTrips(tb testing.TB, n int, start func()) {
	const size = 64
	sa, sb, _, cqr := ringPair(tb, lo(tb))
	recv := ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: size}
	send := ring.WR{Op: ring.OpSend, Context: 2, Offset: 512, Len: size}
	sa.post(tb, sa.rx, recv)
	sb.post(tb, sb.rx, recv)
	start()
	for range n {
		sa.post(tb, sa.tx, send)
		reap(tb, cqr, 2) // A's send, B's receive
		sb.post(tb, sb.rx, recv)
		sb.post(tb, sb.tx, send)
		reap(tb, cqr, 2) // B's send, A's receive
		sa.post(tb, sa.rx, recv)
	}
}

// TestRingPathAllocs: the ring -> provider -> completion path allocates
// nothing per message (docs/design.md): over 500 of
// BenchmarkRingRoundTrip's round trips (2,000 requests, 2,000
// completions), the whole process makes at most a few dozen allocations
// (the pools' refills after a garbage collection, the runtime's own), not
// one per request.
func TestRingPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	const n = 500
	var before, after runtime.MemStats
	roundTrips(t, n, func() { runtime.ReadMemStats(&before) })
	runtime.ReadMemStats(&after)
	if got := after.Mallocs - before.Mallocs; got > 100 {
		t.Errorf("%d allocations in %d round trips (%d requests)", got, n, 4*n)
	}
}

// BenchmarkRingWakeFromSleep is one message of BenchmarkRingRoundTrip's
// pair after the engine's groups went to sleep (2 ms idle, untimed): the
// post's futex wake-up, the group's return to its thread, the send and
// the receive's completion. It is the cost of the sleep path (the
// sleeper's, core/sleeper, or futex_waitv's) that the round trip, whose
// groups spin, never pays.
func BenchmarkRingWakeFromSleep(b *testing.B) {
	const size = 64
	sa, sb, _, cqr := ringPair(b, lo(b))
	recv := ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: size}
	send := ring.WR{Op: ring.OpSend, Context: 2, Offset: 512, Len: size}
	sb.post(b, sb.rx, recv)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		time.Sleep(2 * time.Millisecond)
		b.StartTimer()
		sa.post(b, sa.tx, send)
		reap(b, cqr, 2) // A's send, B's receive
		sb.post(b, sb.rx, recv)
	}
	b.StopTimer()
}
