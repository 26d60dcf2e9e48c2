package rxm

import (
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// peekOp posts a tagged receive with flags (FI_PEEK, FI_CLAIM,
// FI_DISCARD) and claim key, with buf as its buffer, and returns its
// completion.
func (r *rdm) peekOp(t *testing.T, tag uint64, flags fi.OpFlags, key uint64, buf []byte) (*core.Op, core.Completion) {
	t.Helper()
	op := r.op(core.OpTRecv, buf)
	op.Tag, op.Flags, op.Key = tag, flags, key
	if err := r.ep.Post(op); err != nil {
		t.Fatalf("post with flags %v: %v", flags, err)
	}
	return op, r.waitFor(t, op)
}

// waitTagged waits until r holds n unexpected tagged messages.
func waitTagged(t *testing.T, r *rdm, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for {
		r.ep.mu.Lock()
		got := len(r.ep.rx.unexp[1])
		r.ep.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unexpected tagged messages, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPeekClaimDiscard follows fi_tagged(3): FI_PEEK reports a matching
// unexpected message (length, tag, data, source) without taking it, or
// FI_ENOMSG; with FI_CLAIM the message is kept for the FI_CLAIM receive of
// the same claim key, which no other receive matches; FI_DISCARD drops it,
// and its sender completes (a rendezvous one too). Eager and rendezvous
// sizes.
func TestPeekClaimDiscard(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	recvFlags := core.OpTRecv.CQFlags()
	for _, size := range []int{100, EagerLimit + 1000} {
		var sends []*core.Op
		for i := range 5 {
			s := a.op(core.OpTSend, pattern(i, size))
			s.Peer, s.Tag, s.Data, s.Flags = b.addr, uint64(0x900d+i), uint64(i), fi.OpFlags(fi.REMOTE_CQ_DATA)
			if err := a.ep.Post(s); err != nil {
				t.Fatal(err)
			}
			sends = append(sends, s)
		}
		waitTagged(t, b, 5)
		msgFlags := recvFlags | fi.CQFlags(fi.REMOTE_CQ_DATA)

		// Nothing matches: FI_ENOMSG, with or without FI_CLAIM.
		for _, f := range []fi.OpFlags{fi.PEEK, fi.PEEK | fi.CLAIM} {
			if _, c := b.peekOp(t, 0xbad, f, 1, nil); c.Err != fi.ENOMSG || c.Flags != recvFlags {
				t.Fatalf("%d bytes: %v of tag 0xbad: %+v, want FI_ENOMSG", size, f, c)
			}
		}
		// FI_PEEK reports the first message and leaves it.
		_, c := b.peekOp(t, 0x900d, fi.PEEK, 0, nil)
		if c.Err != 0 || c.Len != uint64(size) || c.Tag != 0x900d || c.Data != 0 || c.Flags != msgFlags || c.Src != a.addr {
			t.Fatalf("%d bytes: FI_PEEK: %+v", size, c)
		}
		r := b.recv(t, core.OpTRecv, size, 0x900d, 0)
		c = b.waitFor(t, r)
		c.Flags &^= fi.CQFlags(fi.REMOTE_CQ_DATA)
		wantRecv(t, r, c, pattern(0, size), 0x900d, a.addr)

		// FI_PEEK | FI_CLAIM: an ordinary receive no longer matches it;
		// another key's claim finds nothing; the key's claim takes it.
		_, c = b.peekOp(t, 0x900e, fi.PEEK|fi.CLAIM, 7, nil)
		if c.Err != 0 || c.Len != uint64(size) || c.Tag != 0x900e || c.Data != 1 {
			t.Fatalf("%d bytes: FI_PEEK|FI_CLAIM: %+v", size, c)
		}
		if _, c := b.peekOp(t, 0x900e, fi.PEEK|fi.CLAIM, 7, nil); c.Err != fi.ENOMSG {
			t.Fatalf("%d bytes: second FI_PEEK|FI_CLAIM of a claimed message: %+v, want FI_ENOMSG", size, c)
		}
		plain := b.recv(t, core.OpTRecv, size, 0x900e, 0)
		b.none(t)
		if _, c := b.peekOp(t, 0, fi.CLAIM, 8, make([]byte, size)); c.Err != fi.ENOMSG {
			t.Fatalf("%d bytes: FI_CLAIM of key 8: %+v, want FI_ENOMSG", size, c)
		}
		r, c = b.peekOp(t, 0, fi.CLAIM, 7, make([]byte, size))
		c.Flags &^= fi.CQFlags(fi.REMOTE_CQ_DATA)
		wantRecv(t, r, c, pattern(1, size), 0x900e, a.addr)
		if !b.ep.Cancel(plain) || b.waitFor(t, plain).Err != fi.ECANCELED {
			t.Fatalf("%d bytes: the ordinary receive of the claimed tag was not waiting", size)
		}

		// FI_PEEK | FI_DISCARD drops the message.
		_, c = b.peekOp(t, 0x900f, fi.PEEK|fi.DISCARD, 0, nil)
		if c.Err != 0 || c.Len != 0 || c.Tag != 0x900f {
			t.Fatalf("%d bytes: FI_PEEK|FI_DISCARD: %+v", size, c)
		}
		if _, c := b.peekOp(t, 0x900f, fi.PEEK, 0, nil); c.Err != fi.ENOMSG {
			t.Fatalf("%d bytes: FI_PEEK after FI_DISCARD: %+v, want FI_ENOMSG", size, c)
		}
		// FI_CLAIM | FI_DISCARD drops a claimed one.
		b.peekOp(t, 0x9010, fi.PEEK|fi.CLAIM, 9, nil)
		if _, c := b.peekOp(t, 0, fi.CLAIM|fi.DISCARD, 9, nil); c.Err != 0 || c.Len != 0 || c.Tag != 0x9010 {
			t.Fatalf("%d bytes: FI_CLAIM|FI_DISCARD: %+v", size, c)
		}
		r = b.recv(t, core.OpTRecv, size, 0x9011, 0)
		c = b.waitFor(t, r)
		c.Flags &^= fi.CQFlags(fi.REMOTE_CQ_DATA)
		wantRecv(t, r, c, pattern(4, size), 0x9011, a.addr)

		for i, s := range sends {
			if c := a.waitFor(t, s); c.Err != 0 {
				t.Fatalf("%d bytes: send %d: %+v", size, i, c)
			}
		}
		b.ep.mu.Lock()
		left, claimed := b.ep.rx.bytes, len(b.ep.rx.claimed)
		b.ep.mu.Unlock()
		if left != 0 || claimed != 0 {
			t.Fatalf("%d bytes: %d unexpected bytes and %d claims left", size, left, claimed)
		}
	}
	noRndvLeft(t, a)
	noRndvLeft(t, b)
}

// TestClaimKeyTaken: a second FI_PEEK|FI_CLAIM under a key that holds a
// claimed message fails with FI_EINVAL and leaves both messages.
func TestClaimKeyTaken(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	a.send(t, core.OpTSend, b.addr, []byte("one"), 1)
	a.send(t, core.OpTSend, b.addr, []byte("two"), 2)
	waitTagged(t, b, 2)
	if _, c := b.peekOp(t, 1, fi.PEEK|fi.CLAIM, 5, nil); c.Err != 0 {
		t.Fatalf("claim: %+v", c)
	}
	if _, c := b.peekOp(t, 2, fi.PEEK|fi.CLAIM, 5, nil); c.Err != fi.EINVAL {
		t.Fatalf("second claim under key 5: %+v, want FI_EINVAL", c)
	}
	r, c := b.peekOp(t, 0, fi.CLAIM, 5, make([]byte, 8))
	wantRecv(t, r, c, []byte("one"), 1, a.addr)
	r = b.recv(t, core.OpTRecv, 8, 2, 0)
	wantRecv(t, r, b.waitFor(t, r), []byte("two"), 2, a.addr)
}
