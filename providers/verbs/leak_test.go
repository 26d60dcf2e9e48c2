package verbs

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm"
)

// objects is what a device holds: its QPs and CQs.
type objects struct{ qps, cqs int }

func objectsOf(d *device) objects { return objects{d.dev.NumQPs(), d.dev.NumCQs()} }

// settle waits until each device of devs holds what want says, and
// reports whether they did within a second.
func settle(devs []*device, want ...objects) bool {
	for end := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		ok := true
		for i, d := range devs {
			ok = ok && objectsOf(d) == want[i]
		}
		if ok || time.Now().After(end) {
			return ok
		}
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestRDMFailedConnectionsFreeQPs: the connections of an RDM endpoint
// over verbs that fail (a bad key puts the QP in error; the target then
// refuses the next requests for a while, probe.go) give their QPs and CQs
// back to the device as soon as each attempt fails, on both sides, and
// hold no memory after: 500 failed attempts of a user's endpoint against
// root's, on one device or from another, polled as the daemon's engine
// group polls them, leave the devices' QP and CQ counts at their baseline
// after each attempt and the live heap within 2 KiB per attempt (the
// connection manager's records linger cmLinger to answer duplicates).
func TestRDMFailedConnectionsFreeQPs(t *testing.T) {
	const attempts = 500
	const perAttempt = 2 << 10 // bytes of live heap an attempt may leave
	for _, tc := range []struct{ name, from string }{
		{"same device", "rxe_127_0_0_2"},
		{"other device", "rxe_127_0_0_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
			w := rxm.Wrap(p)
			db, b, nameB := rdmEndpoint(t, w, "rxe_127_0_0_2", 0)
			_, a, _ := rdmEndpoint(t, w, tc.from, 1000)
			stop := make(chan struct{})
			polled := make(chan struct{})
			go func() {
				defer close(polled)
				for {
					select {
					case <-stop:
						return
					default:
					}
					a.ep.(core.Poller).Poll()
					b.ep.(core.Poller).Poll()
					time.Sleep(100 * time.Microsecond)
				}
			}()
			defer func() { close(stop); <-polled }()
			m, err := db.(core.MemoryRegistrar).RegisterMemory(0, sharedMem(t, 4096), 0, fi.REMOTE_READ|fi.REMOTE_WRITE, uint64(fi.KEY_NOTAVAIL), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			base := []objects{objectsOf(p.devs[0]), objectsOf(p.devs[1])}
			before := heapAlloc()
			failed := map[fi.Errno]int{}
			for i := range attempts {
				key := m.Key() ^ uint64(1+i)
				kind := core.OpWrite
				if i%2 == 1 {
					kind = core.OpRead
				}
				a.post(t, &core.Op{Kind: kind, Buf: []byte("evil"), Key: key, Peer: nameB})
				d := a.wait(t)
				if d.c.Err == 0 {
					t.Fatalf("RMA (kind %d) with key %#x succeeded", kind, key)
				}
				failed[d.c.Err]++
				if !settle(p.devs, base...) {
					t.Fatalf("after failed attempt %d (%v): devices hold %+v and %+v, baseline %+v",
						i+1, d.c.Err, objectsOf(p.devs[0]), objectsOf(p.devs[1]), base)
				}
			}
			after := heapAlloc()
			t.Logf("%d attempts failed %v; live heap %d -> %d bytes", attempts, failed, before, after)
			if after > before && (after-before)/attempts > perAttempt {
				t.Errorf("live heap grew %d bytes per failed attempt, want at most %d", (after-before)/attempts, perAttempt)
			}
		})
	}
}

// TestRDMCloseWhileConnecting: closing an RDM endpoint over verbs whose
// connections are still being made (their requests go to an address
// where no device answers) destroys their QPs and CQs.
func TestRDMCloseWhileConnecting(t *testing.T) {
	p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
	a, _, _, _, _, _ := rdmPairOf(t, p)
	base := objectsOf(p.devs[0])
	for i := range 20 {
		to := fi.SockAddr(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), uint16(7000+i)))
		a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("hi"), Peer: to})
	}
	time.Sleep(50 * time.Millisecond)
	t.Logf("while connecting: %+v, baseline %+v", objectsOf(p.devs[0]), base)
	a.ep.Close()
	for range 20 {
		if d := a.wait(t); d.c.Err != fi.ECANCELED {
			t.Errorf("send completed with %v, want FI_ECANCELED", d.c.Err)
		}
	}
	if !settle(p.devs[:1], base) {
		t.Errorf("after close: device holds %+v, baseline %+v", objectsOf(p.devs[0]), base)
	}
}

// TestRDMConnectFailuresFreeQPs: connections that fail because nothing
// answers (the connection manager gives up after its retries) or nothing
// listens at the port (the peer's REJ) give their QPs and CQs back as
// soon as their sends fail.
func TestRDMConnectFailuresFreeQPs(t *testing.T) {
	shortTimers(t)
	p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
	a, _, _, nameB, _, _ := rdmPairOf(t, p)
	base := []objects{objectsOf(p.devs[0]), objectsOf(p.devs[1])}
	for _, tc := range []struct {
		name string
		to   netip.Addr
	}{{"no answer", netip.MustParseAddr("127.0.0.9")}, {"no listener", nameB.IP.Addr()}} {
		const n = 20
		for i := range n {
			to := fi.SockAddr(netip.AddrPortFrom(tc.to, uint16(7000+i)))
			a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("hi"), Peer: to})
		}
		for range n {
			if d := a.wait(t); d.c.Err == 0 {
				t.Errorf("%s: a send completed without error", tc.name)
			}
		}
		if !settle(p.devs, base...) {
			t.Errorf("%s: devices hold %+v and %+v, baseline %+v", tc.name, objectsOf(p.devs[0]), objectsOf(p.devs[1]), base)
		}
	}
}
