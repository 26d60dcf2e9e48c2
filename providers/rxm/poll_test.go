package rxm

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
)

// TestPollReady: driven by an engine group (core.FDPoller), an RDM
// endpoint with two connections holds no descriptor until the group first
// polls it; from then on it reads neither socket while the group says its
// descriptor is quiet; its descriptor is readable once a peer's message is
// waiting; told it is ready, it reads both peers' messages.
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
	if fd := b.ep.PollFD(); fd >= 0 {
		t.Fatalf("an RDM endpoint no group polled holds descriptor %d, want none", fd)
	}
	b.ep.PollReady(false) // the group takes the connections over, and the set is made
	fd := b.ep.PollFD()
	if fd < 0 {
		t.Fatal("an RDM endpoint a group polled has no descriptor to poll")
	}

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

// TestPollReadyWithoutSet: an RDM endpoint of a user other than root
// whose epoll set would take one of the daemon's last core.FDReserve
// descriptors has none (PollFD -1, so the group's poll(2) knows nothing of
// its sockets), and PollReady reads every socket instead: a message still
// arrives through the group.
func TestPollReadyWithoutSet(t *testing.T) {
	p, d := testDomain(t)
	info := loInfo(t, p)
	a, b := newRDM(t, p, d), newRDMOf(t, d, info, 1000)
	r := b.recv(t, core.OpRecv, 100, 0, 0)
	a.waitFor(t, a.send(t, core.OpSend, b.addr, []byte("hello"), 0)) // the connection
	b.waitFor(t, r)

	defer func(n int) { core.FDReserve = n }(core.FDReserve)
	core.FDReserve = 1 << 30 // every descriptor is in the reserve
	b.ep.PollReady(false)    // the group takes the connection over
	if fd := b.ep.PollFD(); fd >= 0 {
		t.Fatalf("uid 1000's epoll set in the reserve: descriptor %d, want none", fd)
	}
	r = b.recv(t, core.OpRecv, 100, 0, 0)
	a.waitFor(t, a.send(t, core.OpSend, b.addr, []byte("again"), 0))
	deadline := time.Now().Add(waitTime)
	for {
		b.ep.PollReady(false) // the group's poll(2) saw nothing: it has no descriptor
		select {
		case res := <-b.comps:
			if res.op != r || res.c.Err != 0 || string(res.op.Buf[:res.c.Len]) != "again" {
				t.Fatalf("completion %+v of op %p, want the receive's (%p) of \"again\"", res.c, res.op, r)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the message never arrived through PollReady")
		}
		time.Sleep(time.Millisecond)
	}
}
