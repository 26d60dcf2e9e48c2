package core_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// pollProvider is the tcp provider whose endpoints count how the engine
// drives their progress (core.FDPoller).
type pollProvider struct {
	core.Provider
	log *pollLog
}

// pollLog counts the passes that told an endpoint its socket was ready
// and quiet, and the parks, which it keeps from the provider: so the
// connection goroutine never reads, and what arrives while the group
// sleeps waits for a pass.
type pollLog struct{ ready, quiet, parks atomic.Int64 }

type pollDomain struct {
	core.ProviderDomain
	log *pollLog
}

type pollEP struct {
	core.Endpoint
	fdp core.FDPoller
	log *pollLog
}

func (p pollProvider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.Provider.OpenDomain(name)
	if err != nil {
		return nil, err
	}
	return pollDomain{d, p.log}, nil
}

func (d pollDomain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	e, err := d.ProviderDomain.NewEndpoint(info, req, ev)
	if err != nil {
		return nil, err
	}
	return pollEP{e, e.(core.FDPoller), d.log}, nil
}

func (e pollEP) Poll() bool  { return e.fdp.Poll() }
func (e pollEP) Park()       { e.log.parks.Add(1) }
func (e pollEP) PollFD() int { return e.fdp.PollFD() }
func (e pollEP) PollReady(ready bool) bool {
	if ready {
		e.log.ready.Add(1)
	} else {
		e.log.quiet.Add(1)
	}
	return e.fdp.PollReady(ready)
}

// TestEngineAsksBeforeReading: an engine group that polls a hot endpoint
// whose socket is quiet tells it so (one poll(2) per pass, no read), and
// tells it to read once its socket has a message.
func TestEngineAsksBeforeReading(t *testing.T) {
	tp, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	log := &pollLog{}
	d := loOf(t, pollProvider{tp, log})
	sa, sb, mem, cqr := ringPair(t, d)
	deadline := time.Now().Add(10 * time.Second)
	wait := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (passes told quiet %d, ready %d; parks %d)",
					what, log.quiet.Load(), log.ready.Load(), log.parks.Load())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var cqes []ring.CQE
	reapCQ := func() bool {
		head, tail := cqr.Peek()
		for ; head != tail; head++ {
			c, err := ring.DecodeCQE(cqr.Entry(head))
			if err != nil || c.Err != 0 {
				t.Fatalf("completion %+v, %v", c, err)
			}
			cqes = append(cqes, c)
		}
		cqr.Release(head)
		return false
	}

	// A's receive makes it hot; with nothing arriving, the group's passes
	// find its socket quiet and say so, until the group sleeps.
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 1, Len: 64})
	wait("the group to sleep", func() bool { return log.parks.Load() >= 1 })
	if q, r := log.quiet.Load(), log.ready.Load(); q < 3 || r != 0 {
		t.Fatalf("with nothing sent: %d passes told the endpoints quiet, %d ready; want 3 or more and none", q, r)
	}

	// B sends; nobody reads A's socket while the group has it parked.
	copy(mem[1024+512:], "ping")
	sb.post(t, sb.tx, ring.WR{Op: ring.OpSend, Context: 2, Offset: 512, Len: 4})
	wait("B's send completion", func() bool { reapCQ(); return len(cqes) == 1 })
	if cqes[0].Context != 2 {
		t.Fatalf("completion %+v, want B's send (context 2)", cqes[0])
	}

	// A second receive wakes the group, which takes it (no send in that
	// pass), finds A's socket ready and has A read the message. (Once the
	// group has slept again, B's passes are over.)
	wait("the group to sleep again", func() bool { return log.parks.Load() >= 2 })
	ready := log.ready.Load()
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 3, Offset: 64, Len: 64})
	wait("A's receive", func() bool { reapCQ(); return len(cqes) == 2 })
	if c := cqes[1]; c.Context != 1 || c.Len != 4 || string(mem[:4]) != "ping" {
		t.Fatalf("receive completion %+v, buffer %q; want context 1 with ping", c, mem[:4])
	}
	if log.ready.Load() == ready {
		t.Error("A's message was read, but no pass told A its socket was ready")
	}
}

// TestBrokenWorkRing: a work ring whose producer sets tail more than
// entry_count past head is not a queue: the engine reports it once, with
// an FI_EIO completion, and stops serving it, rather than take up to 2^32
// requests in one pass; the other queues of its group go on.
func TestBrokenWorkRing(t *testing.T) {
	sa, sb, mem, cqr := ringPair(t, lo(t))
	sa.tx.Publish(1 << 31)

	var cqes []ring.CQE
	reapUntil := func(what string, n int) {
		t.Helper()
		cqes = reapCQEs(t, cqr, cqes, n, what)
	}
	reapUntil("the broken ring's error", 1)
	if c := cqes[0]; c.Err != -int32(fi.EIO) || c.Flags&uint64(fi.SEND) == 0 {
		t.Fatalf("completion %+v, want one FI_EIO error for the send queue", c)
	}

	// B sends to A through the same group: served.
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 7, Len: 64})
	copy(mem[1024+512:], "still")
	sb.post(t, sb.tx, ring.WR{Op: ring.OpSend, Context: 8, Offset: 512, Len: 5})
	reapUntil("B's send and A's receive", 3)
	got := map[uint64]ring.CQE{}
	for _, c := range cqes[1:] {
		if c.Err != 0 {
			t.Fatalf("completion %+v: only one error, for the broken ring, was due", c)
		}
		got[c.Context] = c
	}
	if c, ok := got[7]; !ok || c.Len != 5 || string(mem[:5]) != "still" {
		t.Fatalf("completions %+v, A's buffer %q; want A's receive of still", cqes, mem[:5])
	}
	time.Sleep(20 * time.Millisecond)
	if head, tail := cqr.Peek(); head != tail {
		t.Fatalf("%d more completions after the broken ring's one error", tail-head)
	}
}

// TestWorkRequestOps: the engine answers a request it cannot serve with an
// error completion carrying the request's context: an operation number it
// does not know (below, inside and past the table of operations), an
// atomic, a receive on the tx ring and a tagged send on an endpoint
// without FI_TAGGED.
func TestWorkRequestOps(t *testing.T) {
	sa, _, _, cqr := ringPair(t, lo(t))
	cases := []struct {
		op   uint8
		want fi.Errno
	}{
		{0, fi.EINVAL}, {ring.OpCompareAtomic + 1, fi.EINVAL}, {255, fi.EINVAL},
		{ring.OpAtomic, fi.EOPNOTSUPP}, {ring.OpRecv, fi.EINVAL}, {ring.OpTSend, fi.EOPNOTSUPP},
	}
	for i, c := range cases {
		sa.post(t, sa.tx, ring.WR{Op: c.op, Context: uint64(100 + i), Len: 8})
	}
	got := reapCQEs(t, cqr, nil, len(cases), "the error completions")
	for i, c := range cases {
		if q := got[i]; q.Context != uint64(100+i) || q.Err != -int32(c.want) {
			t.Errorf("operation %d: completion %+v, want context %d, err -%d", c.op, q, 100+i, c.want)
		}
	}
}

// reapCQEs appends the completions in cq to cs until it holds n, polling,
// and fails after 10 s, saying it waited for what.
func reapCQEs(t *testing.T, cq *ring.Ring, cs []ring.CQE, n int, what string) []ring.CQE {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(cs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; completions %+v", what, cs)
		}
		head, tail := cq.Peek()
		for ; head != tail; head++ {
			c, err := ring.DecodeCQE(cq.Entry(head))
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		cq.Release(head)
		time.Sleep(100 * time.Microsecond)
	}
	return cs
}

// TestRewoundHead: the daemon keeps its own copy of a work ring's head, so
// a client that writes head back does not make it take requests again.
func TestRewoundHead(t *testing.T) {
	sa, sb, mem, cqr := ringPair(t, lo(t))
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 1, Len: 64})
	copy(mem[1024:], "once")
	sb.post(t, sb.tx, ring.WR{Op: ring.OpSend, Context: 2, Len: 4})
	cqes := reapCQEs(t, cqr, nil, 2, "the send and the receive")
	sb.tx.Release(0) // the client rewinds the consumer's index
	sa.rx.Release(0)
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 3, Len: 64})
	copy(mem[1024:], "next")
	sb.post(t, sb.tx, ring.WR{Op: ring.OpSend, Context: 4, Len: 4})
	cqes = reapCQEs(t, cqr, cqes, 4, "the second send and receive")
	time.Sleep(20 * time.Millisecond)
	if head, tail := cqr.Peek(); head != tail {
		cqes = reapCQEs(t, cqr, cqes, len(cqes)+int(tail-head), "the extra completions")
	}
	seen := map[uint64]int{}
	for _, c := range cqes {
		if c.Err != 0 {
			t.Errorf("completion %+v has an error", c)
		}
		seen[c.Context]++
	}
	if len(cqes) != 4 || seen[1] != 1 || seen[2] != 1 || seen[3] != 1 || seen[4] != 1 {
		t.Fatalf("completions %+v; want contexts 1 to 4 once each", cqes)
	}
	if string(mem[:4]) != "next" {
		t.Errorf("A's buffer %q, want next", mem[:4])
	}
}
