package rxm

import (
	"strconv"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// rndvSizes are message sizes around and above the eager limit.
var rndvSizes = []int{EagerLimit + 1, 20000, 100000, 1 << 20, 3<<20 + 17, 8 << 20}

// TestRendezvous sends messages above the eager limit both ways, untagged
// and tagged, with remote CQ data, to receives posted before (matched at
// arrival) and after (taken from the unexpected list), and checks content,
// flags, tags, sources and that no state is left behind.
func TestRendezvous(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	for i, size := range rndvSizes {
		for _, dir := range []struct{ from, to *rdm }{{a, b}, {b, a}} {
			for _, kind := range []core.OpKind{core.OpSend, core.OpTSend} {
				for _, early := range []bool{true, false} {
					msg := pattern(i+int(kind), size)
					tag := uint64(1000 + i)
					var r *core.Op
					if early {
						r = dir.to.recv(t, kind+1, size, tag, 0)
					}
					s := dir.from.op(kind, msg)
					s.Peer, s.Tag, s.Data, s.Flags = dir.to.addr, tag, uint64(size), fi.OpFlags(fi.REMOTE_CQ_DATA)
					if err := dir.from.ep.Post(s); err != nil {
						t.Fatal(err)
					}
					if !early {
						waitUnexpected(t, dir.to, kind == core.OpTSend)
						r = dir.to.recv(t, kind+1, size+5, tag, 0)
					}
					c := dir.to.waitFor(t, r)
					if c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) == 0 || c.Data != uint64(size) {
						t.Fatalf("%d bytes: completion %+v, want remote CQ data %d", size, c, size)
					}
					c.Flags &^= fi.CQFlags(fi.REMOTE_CQ_DATA)
					wantRecv(t, r, c, msg, tag, dir.from.addr)
					if c := dir.from.waitFor(t, s); c.Err != 0 || c.Len != uint64(size) || c.Flags != s.Kind.CQFlags() {
						t.Fatalf("%d bytes: send completion %+v", size, c)
					}
				}
			}
		}
	}
	for _, r := range []*rdm{a, b} {
		noRndvLeft(t, r)
		if errs := r.ev.errors(); len(errs) > 0 {
			t.Errorf("async errors: %v", errs)
		}
		r.ev.mu.Lock()
		remotes := len(r.ev.remotes)
		r.ev.mu.Unlock()
		if remotes != 0 {
			t.Errorf("%d remote events reported for rxm's own reads", remotes)
		}
	}
	if a.liveConns() != 1 || b.liveConns() != 1 {
		t.Errorf("connections: %d and %d, want one each", a.liveConns(), b.liveConns())
	}
}

// waitUnexpected waits until r holds an unexpected message of the kind.
func waitUnexpected(t *testing.T, r *rdm, tagged bool) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for {
		r.ep.mu.Lock()
		n := len(r.ep.rx.unexp[queueOf(tagged)])
		r.ep.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the rendezvous request did not arrive")
		}
		time.Sleep(time.Millisecond)
	}
}

// noRndvLeft checks that r keeps no rendezvous state and no connection
// has reads or read-dones outstanding.
func noRndvLeft(t *testing.T, r *rdm) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for {
		r.ep.mu.Lock()
		sends, started, read, out := len(r.ep.rndvSends), len(r.ep.rx.started), len(r.ep.rndvRead), r.ep.txOut
		ctrl := 0
		for c := range r.ep.conns {
			ctrl += c.ctrl
		}
		r.ep.mu.Unlock()
		if sends+started+read+out+ctrl == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left: %d rendezvous sends, %d receives to start, %d to answer, %d sends, %d control messages", sends, started, read, out, ctrl)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRendezvousTruncation: a receive shorter than the message reads what
// fits and completes with fi.ETRUNC and olen; a receive of 0 bytes reads
// nothing (and many of them do not run out of control slots); a receive
// without a buffer gets one of the message's size; the senders complete
// normally in every case.
func TestRendezvousTruncation(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	const size = 200000
	for _, n := range []int{0, 1, EagerLimit, size - 1} {
		msg := pattern(n, size)
		r := b.recv(t, core.OpTRecv, n, 3, 0)
		s := a.send(t, core.OpTSend, b.addr, msg, 3)
		c := b.waitFor(t, r)
		if c.Err != fi.ETRUNC || c.Len != uint64(n) || c.OLen != uint64(size-n) || string(r.Buf) != string(msg[:n]) || c.Tag != 3 {
			t.Fatalf("receive of %d: %+v, want ETRUNC with len %d olen %d and the first bytes", n, c, n, size-n)
		}
		if c := a.waitFor(t, s); c.Err != 0 || c.Len != size {
			t.Fatalf("send: %+v", c)
		}
	}
	// More empty receives than a connection's control slots: each takes
	// a slot for its read-done only; none waits forever.
	const many = 3 * ctrlSends
	var rs []*core.Op
	for range many {
		rs = append(rs, b.recv(t, core.OpRecv, 0, 0, 0))
	}
	for i := range many {
		a.send(t, core.OpSend, b.addr, pattern(i, EagerLimit+1), 0)
	}
	for _, r := range rs {
		if c := b.waitFor(t, r); c.Err != fi.ETRUNC || c.OLen != EagerLimit+1 {
			t.Fatalf("empty receive: %+v", c)
		}
	}
	for range many {
		if res := a.wait(t); res.c.Err != 0 {
			t.Fatalf("send: %+v", res.c)
		}
	}
	dyn := b.op(core.OpRecv, nil)
	if err := b.ep.Post(dyn); err != nil {
		t.Fatal(err)
	}
	msg := pattern(9, size)
	a.send(t, core.OpSend, b.addr, msg, 0)
	wantRecv(t, dyn, b.waitFor(t, dyn), msg, 0, a.addr)
	noRndvLeft(t, a)
	noRndvLeft(t, b)
}

// TestRendezvousMany has many rendezvous and eager messages in flight each
// way at once, more than a connection's control slots, mixed with eager
// ones, and checks each arrives once, in order, intact.
func TestRendezvousMany(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	const n, window = 300, 100
	size := func(i int) int { return []int{100, 50000, EagerLimit, 300000, EagerLimit + 1, 7}[i%6] }
	streamBothWays(t, a, b, n, window, 300000, size, false)
	noRndvLeft(t, a)
	noRndvLeft(t, b)
}

// TestRendezvousClose: closing the receiver while a rendezvous send waits
// for its read-done fails the send; closing the sender cancels its
// rendezvous sends; a receive matched to a request whose connection is
// gone fails.
func TestRendezvousClose(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	s := a.send(t, core.OpSend, b.addr, pattern(1, 100000), 0)
	waitUnexpected(t, b, false)
	b.ep.Close()
	if c := a.waitFor(t, s); c.Err == 0 {
		t.Errorf("send to a closed receiver: %+v", c)
	}
	noRndvLeft(t, a)

	c := newRDM(t, p, d)
	s2 := a.send(t, core.OpSend, c.addr, pattern(2, 100000), 0)
	waitUnexpected(t, c, false)
	a.ep.Close()
	if got := a.waitFor(t, s2); got.Err != fi.ECANCELED {
		t.Errorf("send of a closed endpoint: %+v", got)
	}
	// The request's connection is gone: the receive cannot read it, and
	// it is dropped rather than matched.
	deadline := time.Now().Add(waitTime)
	for c.liveConns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("connection to a closed peer still up")
		}
		time.Sleep(time.Millisecond)
	}
	r := c.recv(t, core.OpRecv, 100000, 0, 0)
	c.none(t)
	c.ep.Cancel(r)
	noRndvLeft(t, c)
}

// BenchmarkRendezvous measures one-way throughput of rendezvous messages
// between two endpoints over lo, one at a time and with 4 in flight.
func BenchmarkRendezvous(b *testing.B) {
	for _, size := range []int{100000, 1 << 20, 8 << 20} {
		for _, window := range []int{1, 4} {
			b.Run(strconv.Itoa(size)+"/window-"+strconv.Itoa(window), func(b *testing.B) { benchRendezvous(b, size, window) })
		}
	}
}

func benchRendezvous(b *testing.B, size, window int) {
	p, d := testDomain(b)
	from, to := newRDM(b, p, d), newRDM(b, p, d)
	msg := pattern(1, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i += window {
		k := min(window, b.N-i)
		for range k {
			to.recv(b, core.OpRecv, size, 0, 0)
			from.send(b, core.OpSend, to.addr, msg, 0)
		}
		for range k {
			if res := <-to.comps; res.c.Err != 0 || res.c.Len != uint64(size) {
				b.Fatal(res.c)
			}
			if res := <-from.comps; res.c.Err != 0 {
				b.Fatal(res.c)
			}
		}
	}
}

// BenchmarkEagerPingPong is a round trip of 64-byte eager messages
// between two endpoints over lo, with its operations reused: its
// allocs/op are rxm's own per-message allocations (two messages per op).
func BenchmarkEagerPingPong(b *testing.B) {
	const size = 64
	p, d := testDomain(b)
	x, y := newRDM(b, p, d), newRDM(b, p, d)
	sx, sy := x.op(core.OpSend, pattern(1, size)), y.op(core.OpSend, pattern(2, size))
	sx.Peer, sy.Peer = y.addr, x.addr
	rx, ry := x.op(core.OpRecv, make([]byte, size)), y.op(core.OpRecv, make([]byte, size))
	post := func(r *rdm, op *core.Op) {
		if err := r.ep.Post(op); err != nil {
			b.Fatal(err)
		}
	}
	wait := func(r *rdm, n int) {
		for range n {
			if res := <-r.comps; res.c.Err != 0 { // no timer: it would allocate
				b.Fatal(res.c)
			}
		}
	}
	post(x, rx)
	post(y, ry)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		post(x, sx)
		wait(y, 1) // y's receive
		post(y, ry)
		post(y, sy)
		wait(x, 2) // x's send and receive
		post(x, rx)
		wait(y, 1) // y's send
	}
}
