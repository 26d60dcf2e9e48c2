package tcp

import (
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
