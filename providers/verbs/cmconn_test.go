package verbs

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// twoDevices opens devices on 127.0.0.1 and 127.0.0.2 and their domains.
func twoDevices(t testing.TB, fault *ibv.Fault) (*Provider, *domain, *domain) {
	p := testProvider(t, fault, "127.0.0.1", "127.0.0.2")
	return p, openDomain(t, p, "rxe_127_0_0_1"), openDomain(t, p, "rxe_127_0_0_2")
}

// TestConnectAcceptData: private data travels with the request and the
// accept; the request names the requester's address, which is its
// endpoint's name, and each side's peer is the other's name.
func TestConnectAcceptData(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	_, pev, addr := listen(t, p, db)
	if addr.IP.Addr() != netip.MustParseAddr("127.0.0.2") || addr.IP.Port() == 0 {
		t.Fatalf("listener name %v", addr)
	}
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(addr, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	req := pev.WaitReq(t)
	if !bytes.Equal(req.Data(), []byte("hello")) {
		t.Errorf("request data %q, want hello", req.Data())
	}
	srv := newSide(t, db, req.Info(), req)
	if err := srv.ep.Accept([]byte("welcome")); err != nil {
		t.Fatal(err)
	}
	if d := cli.ev.WaitConnected(t); !bytes.Equal(d, []byte("welcome")) {
		t.Errorf("connected data %q, want welcome", d)
	}
	if d := srv.ev.WaitConnected(t); len(d) != 0 {
		t.Errorf("the accepting side's connected data %q, want none", d)
	}
	cliName, _ := cli.ep.Name()
	cliPeer, _ := cli.ep.Peer()
	srvName, _ := srv.ep.Name()
	srvPeer, _ := srv.ep.Peer()
	if *req.Info().DestAddr != cliName || srvPeer != cliName || cliPeer != addr || srvName != addr {
		t.Errorf("request from %v; client %v -> %v; server %v -> %v; listener %v", req.Info().DestAddr, cliName, cliPeer, srvName, srvPeer, addr)
	}
	if _, err := d2(req); err == nil {
		t.Error("a second endpoint took the same request")
	}
}

// d2 tries to make a second endpoint from a request already taken.
func d2(req core.ConnReq) (core.Endpoint, error) {
	r := req.(*connReq)
	return r.pep.d.NewEndpoint(req.Info(), req, provtest.NewEPEvents())
}

func TestReject(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	cli, req := request(t, p, da, db)
	srv := side{ev: provtest.NewEPEvents()}
	e, err := db.NewEndpoint(req.Info(), req, srv.ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reject([]byte("go-away")); err != nil {
		t.Fatal(err)
	}
	e.Close()
	f := cli.ev.WaitFailed(t)
	if !errors.Is(f.Err, fi.ECONNREFUSED) || !bytes.Equal(f.Data, []byte("go-away")) {
		t.Errorf("Failed(%v, %q), want FI_ECONNREFUSED with go-away", f.Err, f.Data)
	}
	if srv.ev.Count() != 0 {
		t.Error("the rejecting endpoint got events")
	}
}

// TestNoListener: a request for a port nobody listens on is refused.
func TestNoListener(t *testing.T) {
	p, da, _ := twoDevices(t, nil)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(fi.SockAddr(netip.MustParseAddrPort("127.0.0.2:7")), nil); err != nil {
		t.Fatal(err)
	}
	if f := cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.ECONNREFUSED) {
		t.Errorf("Failed(%v), want FI_ECONNREFUSED", f.Err)
	}
}

// TestConnectTimeout: a request to an address without a device is sent
// again until the retries run out: FI_ETIMEDOUT.
func TestConnectTimeout(t *testing.T) {
	shortTimers(t)
	p, da, _ := twoDevices(t, nil)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(fi.SockAddr(netip.MustParseAddrPort("127.0.0.9:7")), nil); err != nil {
		t.Fatal(err)
	}
	if f := cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.ETIMEDOUT) {
		t.Errorf("Failed(%v), want FI_ETIMEDOUT", f.Err)
	}
}

// shortTimers makes the connection manager retransmit after 10 ms, for
// the rest of the test.
func shortTimers(t *testing.T) {
	old := [4]any{cmTimeout, cmMaxTimeout, cmRetries, cmLinger}
	cmTimeout, cmMaxTimeout, cmRetries, cmLinger = 10*time.Millisecond, 40*time.Millisecond, 8, time.Second
	t.Cleanup(func() {
		cmTimeout, cmMaxTimeout, cmRetries, cmLinger = old[0].(time.Duration), old[1].(time.Duration), old[2].(int), old[3].(time.Duration)
	})
}

func TestPrivateDataLimit(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	_, pev, addr := listen(t, p, db)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(addr, make([]byte, MaxPrivateData+1)); !errors.Is(err, fi.EINVAL) {
		t.Errorf("Connect with %d bytes = %v, want FI_EINVAL", MaxPrivateData+1, err)
	}
	data := pattern(MaxPrivateData, 3)
	if err := cli.ep.Connect(addr, data); err != nil {
		t.Fatal(err)
	}
	if req := pev.WaitReq(t); !bytes.Equal(req.Data(), data) {
		t.Errorf("request data %x, want %x", req.Data(), data)
	}
}

// TestShutdown: fi_shutdown on one side reports FI_SHUTDOWN on both; the
// receives posted complete with FI_ECANCELED; sends fail afterwards.
func TestShutdown(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)})
	if err := pr.cli.ep.Shutdown(); err != nil {
		t.Fatal(err)
	}
	pr.cli.ev.WaitShutdown(t)
	pr.srv.ev.WaitShutdown(t)
	if d := pr.srv.wait(t); d.c.Err != fi.ECANCELED {
		t.Errorf("posted receive: %v, want FI_ECANCELED", d.c.Err)
	}
	if err := pr.cli.try(&core.Op{Kind: core.OpSend, Buf: []byte("x")}); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("send after shutdown = %v, want FI_ENOTCONN", err)
	}
	if err := pr.cli.ep.Shutdown(); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("second shutdown = %v, want FI_ENOTCONN", err)
	}
	time.Sleep(50 * time.Millisecond)
	if pr.cli.ev.Count() != 2 || pr.srv.ev.Count() != 2 {
		t.Errorf("%d and %d events, want Connected and Shutdown each", pr.cli.ev.Count(), pr.srv.ev.Count())
	}
}

// TestCloseDisconnects: closing a connected endpoint shuts its peer down.
func TestCloseDisconnects(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	pr.cli.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)})
	if err := pr.cli.ep.Close(); err != nil {
		t.Fatal(err)
	}
	if d := pr.cli.wait(t); d.c.Err != fi.ECANCELED {
		t.Errorf("receive posted at close: %v, want FI_ECANCELED", d.c.Err)
	}
	pr.srv.ev.WaitShutdown(t)
}

// TestListenerCloseRejects: requests the listener holds when it closes
// are rejected.
func TestListenerCloseRejects(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pep, pev, addr := listen(t, p, db)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(addr, nil); err != nil {
		t.Fatal(err)
	}
	pev.WaitReq(t)
	pep.Close()
	if f := cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.ECONNREFUSED) {
		t.Errorf("Failed(%v), want FI_ECONNREFUSED", f.Err)
	}
	if err := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil).ep.Connect(addr, nil); err != nil {
		t.Fatal(err)
	}
}

// TestListenAddresses: a listener takes its device's address or none;
// a port is taken once.
func TestListenAddresses(t *testing.T) {
	p, _, db := twoDevices(t, nil)
	_, _, addr := listen(t, p, db)
	pep, err := db.NewPassiveEndpoint(infoOf(t, p, db.name, fi.EP_MSG), provtest.NewPEPEvents())
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	if err := pep.Listen(addr); !errors.Is(err, fi.EADDRINUSE) {
		t.Errorf("listen on a taken port = %v, want FI_EADDRINUSE", err)
	}
	if err := pep.Listen(fi.SockAddr(netip.MustParseAddrPort("127.0.0.1:5000"))); !errors.Is(err, fi.EADDRNOTAVAIL) {
		t.Errorf("listen on another device's address = %v, want FI_EADDRNOTAVAIL", err)
	}
	if err := pep.Listen(fi.SockAddr(netip.MustParseAddrPort("127.0.0.2:5000"))); err != nil {
		t.Fatal(err)
	}
	if n, _ := pep.Name(); n.IP.Port() != 5000 {
		t.Errorf("name %v, want port 5000", n)
	}
}

// TestLossyConnections: with datagrams dropped, duplicated and reordered,
// connections are made (each request reported once), carry messages, and
// shut down on both sides.
func TestLossyConnections(t *testing.T) {
	shortTimers(t)
	p, da, db := twoDevices(t, &ibv.Fault{Drop: 0.2, Duplicate: 0.2, Reorder: 0.2, Seed: 7})
	_, pev, addr := listen(t, p, db)
	for i := range 5 {
		cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
		if err := cli.ep.Connect(addr, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		req := pev.WaitReq(t)
		if d := req.Data(); len(d) != 1 || d[0] != byte(i) {
			t.Fatalf("connection %d: request data %x", i, d)
		}
		srv := newSide(t, db, req.Info(), req)
		if err := srv.ep.Accept(nil); err != nil {
			t.Fatal(err)
		}
		cli.ev.WaitConnected(t)
		srv.ev.WaitConnected(t)
		msg := pattern(3000, i)
		srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 4000)})
		cli.post(t, &core.Op{Kind: core.OpSend, Buf: msg})
		if d := srv.wait(t); d.c.Err != 0 || !bytes.Equal(d.op.Buf[:d.c.Len], msg) {
			t.Fatalf("connection %d: receive %+v", i, d.c)
		}
		if err := srv.ep.Shutdown(); err != nil {
			t.Fatal(err)
		}
		srv.ev.WaitShutdown(t)
		cli.ev.WaitShutdown(t)
	}
	select {
	case r := <-pev.Reqs:
		t.Errorf("a duplicate request was reported: %q", r.Data())
	case <-time.After(100 * time.Millisecond):
	}
}

// TestRTULost: every RTU the active side sends is lost. The passive
// side takes its first receive completion for the RTU
// (IBV_EVENT_COMM_EST): it is connected when that receive completes, so
// it may answer at once; it reports FI_CONNECTED once; and it sends REP
// no more. (The peer's first message can also overtake the RTU: they
// travel on different QPs.)
func TestRTULost(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	var reqs, reps atomic.Int32
	da.dev.cm.mu.Lock()
	da.dev.cm.lose = func(m cm.Msg) bool {
		// REQ once: a REQ sent again would be answered with REP again,
		// which the count of REPs below is not about.
		return m.Type == cm.RTU || m.Type == cm.REQ && reqs.Add(1) > 1
	}
	da.dev.cm.mu.Unlock()
	db.dev.cm.mu.Lock()
	db.dev.cm.lose = func(m cm.Msg) bool {
		if m.Type == cm.REP {
			reps.Add(1)
		}
		return false
	}
	db.dev.cm.mu.Unlock()
	cli, req := request(t, p, da, db)
	srv := newSide(t, db, req.Info(), req)
	srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 100)})
	if err := srv.ep.Accept(nil); err != nil {
		t.Fatal(err)
	}
	cli.ev.WaitConnected(t)
	select {
	case <-srv.ev.ConnectedCh:
		t.Fatal("FI_CONNECTED on the passive side without an RTU or a message")
	default:
	}
	cli.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 100)})
	cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("first")})
	if d := srv.wait(t); d.c.Err != 0 || string(d.op.Buf[:d.c.Len]) != "first" {
		t.Fatalf("receive %+v", d.c)
	}
	sent := reps.Load()
	// The answer at once: before the fix, FI_ENOTCONN.
	srv.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("answer")})
	if d := srv.wait(t); d.c.Err != 0 {
		t.Fatalf("send %+v", d.c)
	}
	cli.wait(t) // the send of "first"
	if d := cli.wait(t); d.c.Err != 0 || string(d.op.Buf[:d.c.Len]) != "answer" {
		t.Fatalf("receive %+v", d.c)
	}
	srv.ev.WaitConnected(t)
	// REP would be sent again cmTimeout after the first, then 2 cmTimeout
	// after that: none goes out, and FI_CONNECTED is not reported again.
	time.Sleep(3 * cmTimeout)
	if n := reps.Load(); n != sent {
		t.Errorf("%d REPs after the connection was established", n-sent)
	}
	select {
	case <-srv.ev.ConnectedCh:
		t.Error("FI_CONNECTED reported twice")
	case f := <-srv.ev.FailedCh:
		t.Errorf("the passive side failed: %v", f.Err)
	default:
	}
}

// orderEvents records the order of an endpoint's connection events.
type orderEvents struct {
	*provtest.EPEvents
	mu     sync.Mutex
	events []string
}

func (o *orderEvents) note(what string) {
	o.mu.Lock()
	o.events = append(o.events, what)
	o.mu.Unlock()
}

func (o *orderEvents) Connected(data []byte) { o.note("connected"); o.EPEvents.Connected(data) }
func (o *orderEvents) Shutdown()             { o.note("shutdown"); o.EPEvents.Shutdown() }
func (o *orderEvents) Failed(err error, data []byte) {
	o.note("failed")
	o.EPEvents.Failed(err, data)
}

// TestRTULostThenShutdown: the RTU is lost, and the peer shuts down right
// after its first message. The passive side's FI_CONNECTED, which that
// message makes (TestRTULost), comes before its FI_SHUTDOWN.
func TestRTULostThenShutdown(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	da.dev.cm.mu.Lock()
	da.dev.cm.lose = func(m cm.Msg) bool { return m.Type == cm.RTU }
	da.dev.cm.mu.Unlock()
	cli, req := request(t, p, da, db)
	ev := &orderEvents{EPEvents: provtest.NewEPEvents()}
	srv := side{ev: ev.EPEvents, done: make(chan done, 16)}
	ep, err := db.NewEndpoint(req.Info(), req, ev)
	if err != nil {
		t.Fatal(err)
	}
	srv.ep = ep
	t.Cleanup(func() { ep.Close() })
	if err := ep.Enable(); err != nil {
		t.Fatal(err)
	}
	srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 100)})
	if err := ep.Accept(nil); err != nil {
		t.Fatal(err)
	}
	cli.ev.WaitConnected(t)
	cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("first")})
	if err := cli.ep.Shutdown(); err != nil {
		t.Fatal(err)
	}
	srv.ev.WaitShutdownOrFailed(t)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.events) != 2 || ev.events[0] != "connected" {
		t.Errorf("events %v, want connected, then shutdown (or failed)", ev.events)
	}
}

// sendRaw sends b as a datagram from a's QP1 to the QP1 of the device
// with IP dst.
func sendRaw(t *testing.T, a *agent, dst netip.Addr, b []byte) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		t.Fatal("no free send slot")
	}
	slot := a.free[len(a.free)-1]
	s := a.slot(slot)
	clear(s)
	copy(s, b)
	ah, err := a.ahLocked(dst)
	if err != nil {
		t.Fatal(err)
	}
	wr := ibv.SendWR{WRID: uint64(slot), Opcode: ibv.WRSend, Flags: ibv.SendSignaled, AH: ah, RemoteQPN: ibv.GSIQPN, RemoteQKey: ibv.GSIQKey,
		SGList: []ibv.SGE{{Addr: a.mr.IOVA + uint64(slot*cmSlotSize), Length: uint32(len(b)), LKey: a.mr.LKey}}}
	if err := a.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	a.free = a.free[:len(a.free)-1]
}

// TestMalformedMADs: datagrams that are not CM messages, and CM messages
// about connections that do not exist, are dropped or answered without
// harm; the agent goes on connecting.
func TestMalformedMADs(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	a, b := da.dev.cm, db.dev.cm
	dst := db.dev.ip
	valid := func(m cm.Msg) []byte {
		var buf [cm.MADSize]byte
		if err := m.Encode(buf[:]); err != nil {
			t.Fatal(err)
		}
		return buf[:]
	}
	bad := [][]byte{
		nil,
		[]byte("short"),
		bytes.Repeat([]byte{0xff}, cm.MADSize),
		append(valid(cm.Msg{Type: cm.RTU, LocalCommID: 1, RemoteCommID: 2}), 0), // too long
	}
	for _, d := range bad {
		sendRaw(t, a, dst, d)
	}
	req := valid(cm.Msg{Type: cm.REQ, LocalCommID: 1, PathMTU: 3})
	req[cm.HeaderSize+32] = 200 // private data longer than the field
	sendRaw(t, a, dst, req)
	// Well-formed, about nothing.
	for _, m := range []cm.Msg{
		{Type: cm.REP, LocalCommID: 5, RemoteCommID: 6, PathMTU: 3},
		{Type: cm.RTU, LocalCommID: 5, RemoteCommID: 6},
		{Type: cm.REJ, LocalCommID: 5, RemoteCommID: 6},
		{Type: cm.DREQ, LocalCommID: 5, RemoteCommID: 6},
		{Type: cm.DREP, LocalCommID: 5, RemoteCommID: 6},
		{Type: cm.SIDRREP, RequestID: 9},
		{Type: cm.REQ, LocalCommID: 7, PathMTU: 3, ServiceID: cm.ServiceID(cm.PortSpaceUDP, 1)},
	} {
		sendRaw(t, a, dst, valid(m))
	}
	deadline := time.Now().Add(waitTime)
	for {
		b.mu.Lock()
		n := b.malformed
		b.mu.Unlock()
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d datagrams counted as malformed, want 5", n)
		}
		time.Sleep(time.Millisecond)
	}
	pr := connect(t, p, da, db)
	msg := []byte("still working")
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 64)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: msg})
	if d := pr.srv.wait(t); !bytes.Equal(d.op.Buf[:d.c.Len], msg) {
		t.Errorf("received %q", d.op.Buf[:d.c.Len])
	}
}
