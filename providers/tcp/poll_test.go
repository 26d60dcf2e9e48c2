package tcp

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
)

// readable waits until fd has input, as an engine group's poll(2) sees it.
func readable(t *testing.T, fd int) {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(waitTime)
	for time.Now().Before(deadline) {
		if n, err := unix.Poll(pfd, 100); err == nil && n == 1 {
			return
		}
	}
	t.Fatalf("descriptor %d never became readable", fd)
}

// TestPollReady: driven by an engine group (core.FDPoller), the endpoint
// reads its socket only when told the socket is ready; a message that
// waited for a receive is placed without a read; and after the group
// parks the endpoint its connection goroutine reads again.
func TestPollReady(t *testing.T) {
	p := connect(t)
	srv, cli := p.srv.ep, p.cli.ep
	fd := srv.PollFD()
	if fd < 0 {
		t.Fatal("a connected endpoint has no descriptor to poll")
	}
	srv.PollReady(false) // the group takes the socket over

	// A message arrives before any receive is posted.
	post(t, cli, &core.Op{Kind: core.OpSend, Buf: []byte("first")})
	waitDone(t, p.cli.done)
	readable(t, fd)
	for range 10 {
		srv.PollReady(false) // quiet as far as the group knows: no read
	}
	rbuf := make([]byte, 64)
	post(t, srv, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	srv.PollReady(false)
	noDone(t, p.srv.done, 50*time.Millisecond) // neither the group nor the connection goroutine read it

	// Told it is ready, it reads the message into the receive.
	if !srv.PollReady(true) {
		t.Error("PollReady(true) with a message waiting reports no progress")
	}
	if d := waitDone(t, p.srv.done); d.c.Err != 0 || string(rbuf[:d.c.Len]) != "first" {
		t.Fatalf("receive %+v %q, want first", d.c, rbuf[:d.c.Len])
	}

	// A message that found no receive waits in the staging buffer; once a
	// receive is posted, a pass that found the socket quiet places it.
	post(t, cli, &core.Op{Kind: core.OpSend, Buf: []byte("second")})
	waitDone(t, p.cli.done)
	readable(t, fd)
	srv.PollReady(true) // reads it, finds no receive
	noDone(t, p.srv.done, 10*time.Millisecond)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 0); n != 0 {
		t.Fatal("the socket still has input after a read of the whole message")
	}
	post(t, srv, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	if !srv.PollReady(false) {
		t.Error("placing a held message reports no progress")
	}
	if d := waitDone(t, p.srv.done); d.c.Err != 0 || string(rbuf[:d.c.Len]) != "second" {
		t.Fatalf("receive %+v %q, want second", d.c, rbuf[:d.c.Len])
	}

	// Parked, the connection goroutine reads the next message itself.
	srv.Park()
	post(t, srv, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	post(t, cli, &core.Op{Kind: core.OpSend, Buf: []byte("third")})
	if d := waitDone(t, p.srv.done); d.c.Err != 0 || string(rbuf[:d.c.Len]) != "third" {
		t.Fatalf("receive %+v %q, want third", d.c, rbuf[:d.c.Len])
	}
}

// inEpollSet reports whether fd is registered in the netpoller's epoll
// set, as /proc/self/fdinfo lists it.
func inEpollSet(t *testing.T, fd int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", thePoller.epfd))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) {
			return true
		}
	}
	return false
}

// TestPolledSocketLeavesEpoll: while an engine group polls an endpoint,
// neither of its descriptors is in the netpoller's epoll set (each would
// be called on every arriving segment); once parked, the connection
// goroutine puts the socket back when it waits, and is woken through it.
func TestPolledSocketLeavesEpoll(t *testing.T) {
	p := connect(t)
	srv, cli := p.srv.ep, p.cli.ep
	fd, fdOut := srv.PollFD(), srv.fdOut
	if !inEpollSet(t, fd) || !inEpollSet(t, fdOut) {
		t.Fatal("a connected endpoint's descriptors are not in the epoll set")
	}
	// The connection goroutine may be in its first pass, holding the
	// receive side or about to arm: the group's passes take the socket over
	// once it is out of the way.
	for deadline := time.Now().Add(waitTime); inEpollSet(t, fd) || inEpollSet(t, fdOut); {
		if time.Now().After(deadline) {
			t.Fatal("a polled endpoint's descriptors are still in the epoll set")
		}
		srv.PollReady(false)
		time.Sleep(time.Millisecond)
	}

	rbuf := make([]byte, 64)
	post(t, srv, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	post(t, cli, &core.Op{Kind: core.OpSend, Buf: []byte("polled")})
	readable(t, fd)
	srv.PollReady(true)
	if d := waitDone(t, p.srv.done); d.c.Err != 0 || string(rbuf[:d.c.Len]) != "polled" {
		t.Fatalf("receive %+v %q, want polled", d.c, rbuf[:d.c.Len])
	}
	if inEpollSet(t, fd) {
		t.Fatal("the socket went back into the epoll set while polled")
	}

	srv.Park()
	deadline := time.Now().Add(waitTime)
	for !inEpollSet(t, fd) {
		if time.Now().After(deadline) {
			t.Fatal("the parked endpoint's connection goroutine never put its socket back")
		}
		time.Sleep(time.Millisecond)
	}
	post(t, srv, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	post(t, cli, &core.Op{Kind: core.OpSend, Buf: []byte("parked")})
	if d := waitDone(t, p.srv.done); d.c.Err != 0 || string(rbuf[:d.c.Len]) != "parked" {
		t.Fatalf("receive %+v %q, want parked", d.c, rbuf[:d.c.Len])
	}
}

// TestArmFailureRetriesLater: a descriptor that cannot be put back in the
// epoll set (here: the number now names a regular file, which epoll
// refuses with EPERM) wakes its waiter after armRetry,
// neither never (a hang) nor at once (a spin while the shortage lasts).
func TestArmFailureRetriesLater(t *testing.T) {
	p, err := getPoller()
	if err != nil {
		t.Fatal(err)
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1)
	w, err := p.add(fds[0], unix.EPOLLIN, ch)
	if err != nil {
		t.Fatal(err)
	}
	w.detach()
	f, err := os.CreateTemp(t.TempDir(), "regular")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Dup3(int(f.Fd()), fds[0], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	defer w.remove()
	start := time.Now()
	w.arm()
	select {
	case <-ch:
		t.Fatal("a failed arm woke the waiter at once")
	default:
	}
	select {
	case <-ch:
		if d := time.Since(start); d < armRetry {
			t.Errorf("woken after %v, before armRetry", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed arm never woke the waiter")
	}
}
