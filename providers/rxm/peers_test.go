package rxm

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
	tcpwire "github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// connectFrom dials r's listener from address src (a loopback address)
// as a peer announcing port, and returns the connection and the type of
// the answer.
func connectFrom(t *testing.T, r *rdm, src string, port uint16) (net.Conn, tcpwire.CMType) {
	t.Helper()
	cd := wire.NewConnect(port, wire.MakeConnID(7, 0))
	data, err := cd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c, typ, _ := rawConnectFrom(t, r, src, data)
	return c, typ
}

// setPeerLimits shrinks the peer table for one test.
func setPeerLimits(t *testing.T, total, perHost int) {
	oldTotal, oldHost := maxPeers, maxPeersPerHost
	maxPeers, maxPeersPerHost = total, perHost
	t.Cleanup(func() { maxPeers, maxPeersPerHost = oldTotal, oldHost })
}

// waitPeers waits until r keeps n peers.
func waitPeers(t *testing.T, r *rdm, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for {
		r.ep.mu.Lock()
		got := len(r.ep.peers)
		r.ep.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d peers, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Peers whose connection went away are forgotten: a stream of peers that
// each connect and leave, announcing new ports, never fills the table.
func TestGonePeersAreForgotten(t *testing.T) {
	setPeerLimits(t, 8, 8)
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	for i := range 40 {
		c, typ := connectFrom(t, r, "127.0.0.1", uint16(20000+i))
		if typ != tcpwire.CMConnResp {
			t.Fatalf("peer %d (table of %d): answer %v, want an accept", i, maxPeers, typ)
		}
		c.Close()
		waitPeers(t, r, 0)
	}
}

// One host cannot take every slot of the table: past maxPeersPerHost its
// requests are rejected, and another host still gets in.
func TestPeersPerHost(t *testing.T) {
	setPeerLimits(t, 16, 4)
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	for i := range 4 {
		if _, typ := connectFrom(t, r, "127.0.0.2", uint16(30000+i)); typ != tcpwire.CMConnResp {
			t.Fatalf("peer %d of host 127.0.0.2: answer %v, want an accept", i, typ)
		}
	}
	if _, typ := connectFrom(t, r, "127.0.0.2", 30100); typ != tcpwire.CMReject {
		t.Fatalf("5th peer of host 127.0.0.2: answer %v, want a reject", typ)
	}
	wantAsyncError(t, r, "127.0.0.2")
	if _, typ := connectFrom(t, r, "127.0.0.3", 30000); typ != tcpwire.CMConnResp {
		t.Fatalf("peer of host 127.0.0.3: answer %v, want an accept", typ)
	}
}

// One user of this host cannot lock another out of an endpoint's peer
// table: the peers of each (host, user) pair are counted apart
// (core.HostOf), the user of the daemon's own endpoints being their owner.
func TestPeersPerHostUser(t *testing.T) {
	setPeerLimits(t, 16, 2)
	p, d := testDomain(t)
	info := loInfo(t, p)
	r := newRDM(t, p, d)
	var rop *core.Op // a receive for the next message that gets through
	send := func(from *rdm) core.Completion {
		t.Helper()
		if rop == nil {
			rop = r.recv(t, core.OpRecv, 16, 0, 0)
		}
		c := from.waitFor(t, from.send(t, core.OpSend, r.addr, []byte("hello"), 0))
		if c.Err == 0 {
			wantRecv(t, rop, r.waitFor(t, rop), []byte("hello"), 0, from.addr)
			rop = nil
		}
		return c
	}
	for i := range maxPeersPerHost {
		if c := send(newRDMOf(t, d, info, 1000)); c.Err != 0 {
			t.Fatalf("uid 1000's peer %d: send failed: %+v", i, c)
		}
	}
	if c := send(newRDMOf(t, d, info, 1000)); c.Err == 0 {
		t.Fatal("uid 1000 got a peer past its share of the host")
	}
	wantAsyncError(t, r, "uid 1000")
	if c := send(newRDMOf(t, d, info, 0)); c.Err != 0 {
		t.Fatalf("root's peer beside uid 1000's: send failed: %+v", c)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// maxIdleConnBytes bounds the heap an accepted connection that carries
// nothing costs the endpoint: its receive buffers, its MSG endpoint's
// queues and its bookkeeping.
const maxIdleConnBytes = 80 << 10

// An accepted connection that carries nothing costs at most
// maxIdleConnBytes: receive buffers are added as messages arrive.
func TestIdleConnMemory(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	const n = 64
	connectFrom(t, r, "127.0.0.1", 1) // warm up: pools, goroutine stacks
	before := heapInUse()
	for i := range n {
		connectFrom(t, r, "127.0.0.1", uint16(40000+i))
	}
	waitPeers(t, r, n+1)
	per := (heapInUse() - before) / n
	t.Logf("%d bytes of heap per idle accepted connection", per)
	if per > maxIdleConnBytes {
		t.Fatalf("%d bytes per idle connection, want at most %d", per, maxIdleConnBytes)
	}
}

// A connection over which nothing passed for connIdleTimeout is closed and
// its peer forgotten (a peer that connects and stays silent holds no slot);
// one that carried messages is kept.
func TestSilentConnectionsClosed(t *testing.T) {
	defer func(d time.Duration) { connIdleTimeout = d }(connIdleTimeout)
	connIdleTimeout = 100 * time.Millisecond
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	c, typ := connectFrom(t, a, "127.0.0.1", 50000)
	if typ != tcpwire.CMConnResp {
		t.Fatalf("answer %v, want an accept", typ)
	}
	rop := b.recv(t, core.OpRecv, 16, 0, 0)
	sop := a.send(t, core.OpSend, b.addr, []byte("hello"), 0)
	a.waitFor(t, sop)
	wantRecv(t, rop, b.waitFor(t, rop), []byte("hello"), 0, a.addr)
	waitClosed(t, c)
	waitPeers(t, a, 1) // b's
	time.Sleep(5 * connIdleTimeout)
	if n := a.liveConns(); n != 1 {
		t.Fatalf("%d connections after the silent one closed, want 1 (b's)", n)
	}
}

// A connection's receive buffers grow with the messages it carries and
// shrink back to bufsStart once it is quiet; it keeps working.
func TestQuietConnectionsShrink(t *testing.T) {
	defer func(d time.Duration) { connIdleTimeout = d }(connIdleTimeout)
	connIdleTimeout = 100 * time.Millisecond
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	exchange := func(n int) {
		t.Helper()
		for i := range n {
			rop := b.recv(t, core.OpRecv, 64, 0, 0)
			sop := a.send(t, core.OpSend, b.addr, pattern(i, 64), 0)
			a.waitFor(t, sop)
			wantRecv(t, rop, b.waitFor(t, rop), pattern(i, 64), 0, a.addr)
		}
	}
	bufsOfB := func() int {
		b.ep.mu.Lock()
		defer b.ep.mu.Unlock()
		n := 0
		for c := range b.ep.conns {
			n += len(c.bufs)
		}
		return n
	}
	exchange(2 * bufsPerConn)
	if n := bufsOfB(); n <= bufsStart { // bufsPerConn, unless a pause let it shrink meanwhile
		t.Fatalf("%d receive buffers after %d messages, want more than %d", n, 2*bufsPerConn, bufsStart)
	}
	deadline := time.Now().Add(waitTime)
	for bufsOfB() != bufsStart {
		if time.Now().After(deadline) {
			t.Fatalf("%d receive buffers on a quiet connection, want %d", bufsOfB(), bufsStart)
		}
		time.Sleep(10 * time.Millisecond)
	}
	exchange(2 * bufsPerConn)
}

// setIdleTimeouts shrinks connIdleTimeout and usedIdleTimeout for one test.
func setIdleTimeouts(t *testing.T, silent, used time.Duration) {
	oldSilent, oldUsed := connIdleTimeout, usedIdleTimeout
	connIdleTimeout, usedIdleTimeout = silent, used
	t.Cleanup(func() { connIdleTimeout, usedIdleTimeout = oldSilent, oldUsed })
}

// waitConns waits until r has n live connections.
func waitConns(t *testing.T, r *rdm, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for r.liveConns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d live connections, want %d", r.liveConns(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A connection that carried messages and then stayed quiet for
// usedIdleTimeout, with nothing in flight, is closed on both sides and its
// peer forgotten: one message does not keep a slot for ever. The next
// send connects again.
func TestQuietConnectionsClosed(t *testing.T) {
	setIdleTimeouts(t, 50*time.Millisecond, 300*time.Millisecond)
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	exchange := func(i int) {
		t.Helper()
		rop := b.recv(t, core.OpRecv, 64, 0, 0)
		sop := a.send(t, core.OpSend, b.addr, pattern(i, 64), 0)
		a.waitFor(t, sop)
		wantRecv(t, rop, b.waitFor(t, rop), pattern(i, 64), 0, a.addr)
	}
	exchange(0)
	waitConns(t, a, 0)
	waitConns(t, b, 0)
	waitPeers(t, a, 0)
	waitPeers(t, b, 0)
	exchange(1)
	// traffic more often than usedIdleTimeout keeps the connection
	for i := range 8 {
		time.Sleep(usedIdleTimeout / 4)
		exchange(2 + i)
		if n := a.liveConns(); n != 1 {
			t.Fatalf("%d connections while messages pass, want 1", n)
		}
	}
}

// A quiet connection with an operation in flight is kept: a rendezvous
// send whose receiver has posted no receive yet stays on its connection
// past usedIdleTimeout and completes when the receive comes.
func TestBusyConnectionsKept(t *testing.T) {
	setIdleTimeouts(t, 50*time.Millisecond, 200*time.Millisecond)
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	big := pattern(7, 4*EagerLimit)
	sop := a.send(t, core.OpSend, b.addr, big, 0)
	time.Sleep(5 * usedIdleTimeout)
	if na, nb := a.liveConns(), b.liveConns(); na != 1 || nb != 1 {
		t.Fatalf("with a rendezvous in flight: %d and %d connections, want 1 and 1", na, nb)
	}
	rop := b.recv(t, core.OpRecv, len(big), 0, 0)
	wantRecv(t, rop, b.waitFor(t, rop), big, 0, a.addr)
	if c := a.waitFor(t, sop); c.Err != 0 {
		t.Fatalf("the rendezvous send: %v", c.Err)
	}
}

// ownedEvents are the events of an endpoint of uid (core.Owned).
type ownedEvents struct {
	*events
	uid uint32
}

func (ev ownedEvents) Owner() uint32 { return ev.uid }

// An RDM endpoint holds no epoll set until an engine group polls it
// (TestPollReady, TestPollReadyWithoutSet), so making one of a user other
// than root needs no descriptor of the daemon's last core.FDReserve.
func TestFDReserveEpoll(t *testing.T) {
	p, d := testDomain(t)
	info := loInfo(t, p)
	defer func(n int) { core.FDReserve = n }(core.FDReserve)
	core.FDReserve = 1 << 30 // every descriptor is in the reserve
	ep, err := d.NewEndpoint(info, nil, ownedEvents{&events{}, 1000})
	if err != nil {
		t.Fatalf("uid 1000's RDM endpoint in the reserve: %v, want it made", err)
	}
	if fd := ep.(*endpoint).PollFD(); fd >= 0 {
		t.Errorf("a new RDM endpoint holds descriptor %d, want none", fd)
	}
	ep.Close()
}
