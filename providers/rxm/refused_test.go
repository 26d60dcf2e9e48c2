package rxm

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestRefusedConnectionsFreeSockets: over tcp, connections refused
// because nothing listens at the peer's port each end with their send's
// error, and give back their socket, their connection record and their
// memory at once: after each of 300 attempts the process's descriptors
// and the endpoint's connections are back at their baseline, and the
// live heap grows by less than 2 KiB per attempt.
func TestRefusedConnectionsFreeSockets(t *testing.T) {
	const attempts = 300
	p, d := testDomain(t)
	a := newRDM(t, p, d)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).AddrPort()
	l.Close() // nothing listens there now
	to := fi.SockAddr(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), closed.Port()))
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	baseFDs, before := openFDs(t), heap()
	for i := range attempts {
		a.send(t, 0, to, []byte("hi"), 0)
		if res := a.wait(t); res.c.Err == 0 {
			t.Fatalf("attempt %d: the send to %v succeeded", i+1, to)
		}
		fds, conns := 0, 0
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if fds, conns = openFDs(t), a.liveConns(); fds <= baseFDs && conns == 0 {
				break
			}
		}
		if fds > baseFDs || conns != 0 {
			t.Fatalf("after refused attempt %d: %d descriptors (baseline %d), %d connections", i+1, fds, baseFDs, conns)
		}
	}
	after := heap()
	t.Logf("%d refused attempts; live heap %d -> %d bytes", attempts, before, after)
	if after > before && (after-before)/attempts > 2<<10 {
		t.Errorf("live heap grew %d bytes per refused attempt, want at most 2048", (after-before)/attempts)
	}
}
