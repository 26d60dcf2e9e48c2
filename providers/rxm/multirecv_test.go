package rxm

import (
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// multiComp is one completion of a receive with FI_MULTI_RECV.
type multiComp struct {
	off, n  int
	release bool // FI_MULTI_RECV
	err     fi.Errno
}

// wantMulti takes len(want) completions of op and checks them in order,
// and that each message i (by its offset) holds msgs[i]'s bytes.
func wantMulti(t *testing.T, r *rdm, op *core.Op, want []multiComp, msgs map[int][]byte) {
	t.Helper()
	for i, w := range want {
		c := r.waitFor(t, op)
		got := multiComp{int(c.Offset), int(c.Len), c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0, c.Err}
		if got != w {
			t.Fatalf("completion %d: %+v (%+v), want %+v", i, got, c, w)
		}
		if m, ok := msgs[w.off]; ok && string(op.Buf[w.off:w.off+w.n]) != string(m[:w.n]) {
			t.Fatalf("completion %d: wrong bytes at %d", i, w.off)
		}
		if !w.release && c.Flags != op.Kind.CQFlags() {
			t.Fatalf("completion %d: flags %v", i, c.Flags)
		}
	}
}

func postMulti(t *testing.T, r *rdm, n int) *core.Op {
	t.Helper()
	op := r.op(core.OpRecv, make([]byte, n))
	op.Flags = fi.OpFlags(fi.MULTI_RECV)
	if err := r.ep.Post(op); err != nil {
		t.Fatal(err)
	}
	return op
}

// TestMultiRecv: messages, eager and rendezvous, are packed into one
// buffer while at least min_multi_recv bytes would be left; the message
// that leaves less takes the rest and its completion, with FI_MULTI_RECV,
// releases the buffer, after every rendezvous read into it; a longer last
// message is truncated.
func TestMultiRecv(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	if err := b.ep.SetOpt("min_multi_recv", 1000); err != nil {
		t.Fatal(err)
	}
	// Eager: 3000 x 3 leave 1000 (>= 1000): packed; 100 leaves 900: the last.
	op := postMulti(t, b, 10000)
	msgs := map[int][]byte{}
	for i, n := range []int{3000, 3000, 3000, 100} {
		msgs[i*3000] = pattern(i, n)
		a.send(t, core.OpSend, b.addr, msgs[i*3000], 0)
	}
	wantMulti(t, b, op, []multiComp{{0, 3000, false, 0}, {3000, 3000, false, 0}, {6000, 3000, false, 0}, {9000, 100, true, 0}}, msgs)

	// Rendezvous and eager mixed: the rendezvous ones complete when read,
	// the release last of all.
	op = postMulti(t, b, 300000)
	sizes := []int{100000, 50, 100000, 99000}
	msgs, off := map[int][]byte{}, 0
	for i, n := range sizes {
		msgs[off] = pattern(10+i, n)
		a.send(t, core.OpSend, b.addr, msgs[off], 0)
		off += n
	}
	got := map[int]multiComp{}
	for range sizes {
		c := b.waitFor(t, op)
		o := int(c.Offset)
		got[o] = multiComp{o, int(c.Len), c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0, c.Err}
		if string(op.Buf[o:o+int(c.Len)]) != string(msgs[o][:c.Len]) {
			t.Fatalf("wrong bytes at %d", o)
		}
		if len(got) < len(sizes) && got[o].release {
			t.Fatalf("released before every message completed: %+v", got)
		}
	}
	want := map[int]multiComp{0: {0, 100000, false, 0}, 100000: {100000, 50, false, 0}, 100050: {100050, 100000, false, 0}, 200050: {200050, 99000, true, 0}}
	for o, w := range want {
		if got[o] != w {
			t.Fatalf("at %d: %+v, want %+v", o, got[o], w)
		}
	}

	// A last message longer than the rest: truncated, and released.
	op = postMulti(t, b, 6000)
	m := pattern(20, 4500)
	a.send(t, core.OpSend, b.addr, m, 0)
	wantMulti(t, b, op, []multiComp{{0, 4500, false, 0}}, map[int][]byte{0: m})
	a.send(t, core.OpSend, b.addr, pattern(21, 30000), 0)
	wantMulti(t, b, op, []multiComp{{4500, 1500, true, fi.ETRUNC}}, map[int][]byte{4500: pattern(21, 30000)})

	// Tagged receives, and receives without a buffer, cannot have it.
	for _, bad := range []*core.Op{{Kind: core.OpTRecv, Buf: make([]byte, 10)}, {Kind: core.OpRecv}} {
		bad.Flags = fi.OpFlags(fi.MULTI_RECV)
		if err := b.ep.Post(bad); core.Code(err) != fi.EINVAL {
			t.Errorf("FI_MULTI_RECV on %+v: %v, want EINVAL", bad, err)
		}
	}
	noRndvLeft(t, a)
	noRndvLeft(t, b)
}

// TestMultiRecvUnexpected: posted while messages wait, the buffer takes
// them in order while at least min_multi_recv bytes are left, then is
// released by a completion of its own (FI_MULTI_RECV, length 0); with room
// left, it is queued for the next messages. Cancel releases it.
func TestMultiRecvUnexpected(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	if err := b.ep.SetOpt("min_multi_recv", 2000); err != nil {
		t.Fatal(err)
	}
	msgs := map[int][]byte{}
	for i := range 3 {
		msgs[i*1500] = pattern(i, 1500)
		a.waitFor(t, a.send(t, core.OpSend, b.addr, msgs[i*1500], 0))
	}
	rndv := pattern(3, 20000)
	a.send(t, core.OpSend, b.addr, rndv, 0) // left waiting: the first buffer has no room
	waitUnexpectedN(t, b, 4)
	op := postMulti(t, b, 5000)
	wantMulti(t, b, op, []multiComp{{0, 1500, false, 0}, {1500, 1500, false, 0}, {3000, 1500, false, 0}, {4500, 0, true, 0}}, msgs)
	b.none(t)

	// Room left after the unexpected one (a rendezvous, read into the
	// buffer): queued for the next.
	op = postMulti(t, b, 30000)
	wantMulti(t, b, op, []multiComp{{0, 20000, false, 0}}, map[int][]byte{0: rndv})
	a.send(t, core.OpSend, b.addr, pattern(6, 200), 0)
	wantMulti(t, b, op, []multiComp{{20000, 200, false, 0}}, map[int][]byte{20000: pattern(6, 200)})
	if !b.ep.Cancel(op) {
		t.Fatal("cancel of a posted multi-receive failed")
	}
	if c := b.waitFor(t, op); c.Err != fi.ECANCELED || c.Flags&fi.CQFlags(fi.MULTI_RECV) == 0 {
		t.Fatalf("cancelled multi-receive: %+v", c)
	}
	noRndvLeft(t, a)
	noRndvLeft(t, b)
}

// waitUnexpectedN waits until r holds n unexpected untagged messages.
func waitUnexpectedN(t *testing.T, r *rdm, n int) {
	t.Helper()
	for range 10000 {
		r.ep.mu.Lock()
		got := len(r.ep.rx.unexp[0])
		r.ep.mu.Unlock()
		if got >= n {
			return
		}
		r.none(t)
	}
	t.Fatalf("fewer than %d unexpected messages", n)
}
