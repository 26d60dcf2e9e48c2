package rxm

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
)

// TestPollReady: driven by an engine group (core.FDPoller), an RDM
// endpoint with two connections reads neither socket while the group says
// its descriptor is quiet; its descriptor is readable once a peer's
// message is waiting; told it is ready, it reads both peers' messages.
func TestPollReady(t *testing.T) {
	p, d := testDomain(t)
	a1, a2, b := newRDM(t, p, d), newRDM(t, p, d), newRDM(t, p, d)
	// A first message from each peer makes the connections, received by
	// the connections' own goroutines.
	for i, a := range []*rdm{a1, a2} {
		r := b.recv(t, core.OpRecv, 100, 0, 0)
		a.waitFor(t, a.send(t, core.OpSend, b.addr, pattern(i, 10), 0))
		b.waitFor(t, r)
	}
	if n := b.liveConns(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	fd := b.ep.PollFD()
	if fd < 0 {
		t.Fatal("an RDM endpoint has no descriptor to poll")
	}
	b.ep.PollReady(false) // the group takes the connections over

	r1, r2 := b.recv(t, core.OpRecv, 100, 0, 0), b.recv(t, core.OpRecv, 100, 0, 0)
	a1.waitFor(t, a1.send(t, core.OpSend, b.addr, []byte("one"), 0))
	a2.waitFor(t, a2.send(t, core.OpSend, b.addr, []byte("two"), 0))
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(waitTime)
	for {
		if n, err := unix.Poll(pfd, 100); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the endpoint's descriptor never became readable")
		}
	}
	for range 10 {
		b.ep.PollReady(false)
	}
	b.none(t)

	if !b.ep.PollReady(true) {
		t.Error("PollReady(true) with two messages waiting reports no progress")
	}
	got := map[string]bool{}
	for range 2 {
		res := b.wait(t)
		if (res.op != r1 && res.op != r2) || res.c.Err != 0 {
			t.Fatalf("completion %+v of op %p, want the receives' (%p, %p)", res.c, res.op, r1, r2)
		}
		got[string(res.op.Buf[:res.c.Len])] = true
	}
	if !got["one"] || !got["two"] {
		t.Errorf("received %v, want one and two", got)
	}
}
