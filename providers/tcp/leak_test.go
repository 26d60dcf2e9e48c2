package tcp

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// settle waits until the goroutine and fd counts drop to the baseline.
func settle(t testing.TB, fds, goroutines int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, g := openFDs(t), runtime.NumGoroutine()
		if f <= fds && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("leak: %d fds (baseline %d), %d goroutines (baseline %d)\n%s", f, fds, g, goroutines, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoLeaks opens and closes 100 passive endpoints with 10 connections
// each (1000 endpoint pairs), ending them every way there is, and checks
// that file descriptors and goroutines return to their baseline.
func TestNoLeaks(t *testing.T) {
	d, info := loDomain()
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	for round := 0; round < 100; round++ {
		pep, pev := listen(t, d, info)
		addr, _ := pep.Name()
		var clis, srvs []side
		for i := 0; i < 9; i++ {
			clis = append(clis, dial(t, d, info, addr, []byte("leak?")))
			s, _ := accept(t, d, pev, []byte("no"))
			srvs = append(srvs, s)
		}
		pending := dial(t, d, info, addr, nil)
		pev.WaitReq(t) // reported, never answered
		for i, s := range srvs {
			s.ev.WaitConnected(t)
			clis[i].ev.WaitConnected(t)
			// Every server has a receive posted and some a send waiting
			// for an ACK when they go.
			post(t, s.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
			post(t, clis[i].ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
			if i%2 == 0 {
				post(t, s.ep, &core.Op{Kind: core.OpSend, Buf: []byte("bye"), Flags: fi.DELIVERY_COMPLETE})
			}
			switch i % 3 {
			case 0: // shut down first
				s.ep.Shutdown()
				s.ev.WaitShutdown(t)
				clis[i].ev.WaitShutdown(t)
			case 1: // the server goes first
				s.ep.Close()
			case 2: // the client goes first
				clis[i].ep.Close()
			}
		}
		for i := range srvs {
			clis[i].ep.Close()
			srvs[i].ep.Close()
		}
		pep.Close() // rejects the pending request
		f := pending.ev.WaitFailed(t)
		if !errors.Is(f.Err, fi.ECONNREFUSED) {
			t.Fatalf("pending request: Failed(%v), want ECONNREFUSED", f.Err)
		}
		pending.ep.Close()
	}
	if err := d.Close(); err != nil {
		t.Errorf("domain Close: %v", err)
	}
	settle(t, fds, goroutines)
}

// TestClosedEndpointHoldsNoBuffers checks that Close gives back the
// connection's read buffer and writer (about 34 KiB): the file tree keeps
// a closed endpoint's object until the kernel forgets its inode, which it
// may never do for an object reached by a clone file.
func TestClosedEndpointHoldsNoBuffers(t *testing.T) {
	p := connect(t)
	got, sent := completions(p.srv.ep, 1), completions(p.cli.ep, 1)
	post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("hi")})
	for _, ch := range []chan done{got, sent} {
		if c := waitDone(t, ch).c; c.Err != 0 {
			t.Fatalf("completion: %v", c.Err)
		}
	}
	if e := p.cli.ep; e.rd.buf == nil || e.wr == nil {
		t.Fatalf("sender without its buffers: read buffer %d bytes, writer %v", len(e.rd.buf), e.wr != nil)
	}
	for _, e := range []*endpoint{p.cli.ep, p.srv.ep} {
		e.Close()
		if e.rd.buf != nil || e.wr != nil {
			t.Errorf("closed endpoint holds its read buffer (%d bytes) or writer (%v)", len(e.rd.buf), e.wr != nil)
		}
	}
}
