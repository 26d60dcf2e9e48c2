package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// The events of a user's endpoints and passive endpoints: charged to a.
type userEP struct {
	*provtest.EPEvents
	*provtest.Account
}

type userPEP struct {
	*provtest.PEPEvents
	*provtest.Account
}

// listenAs makes a passive endpoint of the user of a and listens on it;
// the test's cleanup closes it.
func listenAs(t *testing.T, d *domain, info *fi.Info, a *provtest.Account) (core.PassiveEndpoint, *provtest.PEPEvents) {
	t.Helper()
	pev := provtest.NewPEPEvents()
	pep, err := d.NewPassiveEndpoint(info, userPEP{pev, a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pep.Close() })
	if err := pep.Listen(fi.Addr{}); err != nil {
		t.Fatal(err)
	}
	return pep, pev
}

// The sockets a user's endpoints and passive endpoints hold are charged
// to the user: the listener, connections made, connections accepted (when
// an endpoint takes the request). Past the limit a connect fails with
// ENOSPC; what was charged is given back.
func TestSocketsAreCharged(t *testing.T) {
	d, info := loDomain()
	a := provtest.NewAccount(2)
	pep, pev := listenAs(t, d, info, a)
	a.WaitHeld(t, "connections", 1)
	addr, _ := pep.Name()
	held := []side{dial(t, d, info, addr, nil)}
	srv := acceptAs(t, d, pev, a)
	a.WaitHeld(t, "connections", 2) // the listener and srv
	held = append(held, srv)

	e, err := d.NewEndpoint(info, nil, userEP{provtest.NewEPEvents(), a})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Connect(addr, nil); core.Code(err) != fi.ENOSPC {
		t.Fatalf("connect past the limit: %v, want ENOSPC", err)
	}
	for _, s := range held {
		s.ep.Close()
	}
	a.WaitHeld(t, "connections", 1)
	if err := e.Connect(addr, nil); err != nil {
		t.Fatalf("connect within the limit: %v", err)
	}
	srv2, _ := accept(t, d, pev, nil)
	srv2.ev.WaitConnected(t)
	a.WaitHeld(t, "connections", 2) // the listener and e; srv2 is another user's
	srv2.ep.Close()
	e.Close()
	pep.Close()
	a.WaitHeld(t, "connections", 0)
}

// acceptAs accepts the next request at pev with an endpoint charged to a.
func acceptAs(t *testing.T, d *domain, pev *provtest.PEPEvents, a *provtest.Account) side {
	t.Helper()
	req := pev.WaitReq(t)
	ev := provtest.NewEPEvents()
	e, err := d.NewEndpoint(req.Info(), req, userEP{ev, a})
	if err != nil {
		t.Fatalf("NewEndpoint(req): %v", err)
	}
	s := side{ep: e.(*endpoint), ev: ev}
	if err := e.Enable(); err != nil {
		t.Fatalf("Enable: %v", err)
	}
	if err := e.Accept(nil); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	return s
}

// What peers open at a user's listener (silent handshakes, requests
// nobody took) is bounded per listener and never charged to the user: a
// peer without credentials cannot use up the user's connections. The
// user is charged when an endpoint of theirs takes a request.
func TestPeersAreNotCharged(t *testing.T) {
	d, info := loDomain()
	a := provtest.NewAccount(3)
	pep, pev := listenAs(t, d, info, a)
	addr, _ := pep.Name()
	var silent []net.Conn
	for range 4 {
		silent = append(silent, rawDial(t, addr))
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	peer := dial(t, d, info, addr, nil)
	defer peer.ep.Close()
	req := pev.WaitReq(t)
	time.Sleep(50 * time.Millisecond) // the silent ones are admitted
	if n := pep.(*passiveEndpoint).conns.Load(); n != 5 {
		t.Fatalf("the listener holds %d connections, want 5", n)
	}
	if got := a.Held(); got != 1 {
		t.Fatalf("with 4 silent handshakes and a request the user holds %d connections, want 1 (the listener)", got)
	}
	mine, err := d.NewEndpoint(info, nil, userEP{provtest.NewEPEvents(), a})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	if err := mine.Connect(addr, nil); err != nil {
		t.Fatalf("the user's connect beside the peers: %v", err)
	}
	a.WaitHeld(t, "connections", 2)
	srv, err := d.NewEndpoint(req.Info(), req, userEP{provtest.NewEPEvents(), a})
	if err != nil {
		t.Fatalf("taking the request: %v", err)
	}
	a.WaitHeld(t, "connections", 3)
	srv.Close()
	a.WaitHeld(t, "connections", 2)
}

// One remote host keeps at most MaxHostConns connections open at a
// listener: past them its new connections are closed at once, while
// another host still gets in.
func TestHostConnectionLimit(t *testing.T) {
	defer func(h, c time.Duration) { handshakeTimeout, connReqTimeout = h, c }(handshakeTimeout, connReqTimeout)
	handshakeTimeout, connReqTimeout = time.Minute, time.Minute
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range MaxHostConns {
		conns = append(conns, rawDial(t, addr))
	}
	over := rawDial(t, addr)
	defer over.Close()
	start := time.Now()
	waitClosed(t, over)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("connection %d of one host closed after %v, want at once", MaxHostConns+1, el)
	}
	// another host of lo
	if !addr.IP.Addr().Is4() {
		t.Skip("the listener is not on 127.0.0.1")
	}
	d2 := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d2.Dial("tcp", addr.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	msg, _ := wire.AppendCM(nil, wire.CMConnReq, nil, nil)
	if _, err := other.Write(msg); err != nil {
		t.Fatal(err)
	}
	req := pev.WaitReq(t)
	if got := req.Info().DestAddr.IP.Addr(); got.String() != "127.0.0.2" {
		t.Fatalf("request from %v, want 127.0.0.2", got)
	}
}

// One user of the listener's host cannot lock out another: the
// connections of each (host, user) pair are counted apart (core.HostOf),
// the user known from the kernel for a process's socket and from the
// endpoint's owner for the daemon's own.
func TestHostConnectionLimitPerUser(t *testing.T) {
	defer func(n int, h, c time.Duration) { maxHostConns, handshakeTimeout, connReqTimeout = n, h, c }(maxHostConns, handshakeTimeout, connReqTimeout)
	maxHostConns, handshakeTimeout, connReqTimeout = 4, time.Minute, time.Minute
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	for range maxHostConns {
		provtest.DialAs(t, 1000, "", addr.IP.String())
	}
	waitClosed(t, provtest.DialAs(t, 1000, "", addr.IP.String()))
	ev := provtest.NewEPEvents()
	ev.OwnerUID = 1000
	theirs, err := d.NewEndpoint(info, nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	if err := theirs.Enable(); err != nil {
		t.Fatal(err)
	}
	if err := theirs.Connect(addr, nil); err != nil {
		t.Fatal(err)
	}
	if f := ev.WaitFailed(t); f.Err == nil {
		t.Fatal("uid 1000's endpoint got in past its share of the host")
	}
	mine := dial(t, d, info, addr, []byte("root's endpoint"))
	defer mine.ep.Close()
	if req := pev.WaitReq(t); string(req.Data()) != "root's endpoint" {
		t.Fatalf("request with %q, want root's endpoint's", req.Data())
	}
	raw := provtest.DialAs(t, 0, "", addr.IP.String())
	msg, _ := wire.AppendCM(nil, wire.CMConnReq, []byte("root's socket"), nil)
	if _, err := raw.Write(msg); err != nil {
		t.Fatal(err)
	}
	if req := pev.WaitReq(t); string(req.Data()) != "root's socket" {
		t.Fatalf("request with %q, want root's socket's", req.Data())
	}
}

// Idle connections do not lock a listener: when every handshake slot is
// taken, the oldest is dropped, and a real request gets through.
func TestIdleHandshakesAreShed(t *testing.T) {
	defer func(n int) { maxHandshakes = n }(maxHandshakes)
	maxHandshakes = 4
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	var idle []net.Conn
	for range 3 * maxHandshakes {
		idle = append(idle, rawDial(t, addr))
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	waitClosed(t, idle[0]) // the oldest
	cli := dial(t, d, info, addr, []byte("real"))
	defer cli.ep.Close()
	srv, _ := accept(t, d, pev, nil)
	defer srv.ep.Close()
	cli.ev.WaitConnected(t)
}

// A listener keeps at most maxListenerConns connections open: handshakes,
// requests and the endpoints made from them. Closing one makes room.
func TestListenerConnectionLimit(t *testing.T) {
	defer func(n int64) { maxListenerConns = n }(maxListenerConns)
	maxListenerConns = 2
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	var srvs []side
	for range 2 {
		cli := dial(t, d, info, addr, nil)
		defer cli.ep.Close()
		srv, _ := accept(t, d, pev, nil)
		defer srv.ep.Close()
		cli.ev.WaitConnected(t)
		srvs = append(srvs, srv)
	}
	over := rawDial(t, addr)
	waitClosed(t, over)
	over.Close()
	srvs[0].ep.Close()
	cli := dial(t, d, info, addr, nil)
	defer cli.ep.Close()
	srv, _ := accept(t, d, pev, nil)
	defer srv.ep.Close()
	cli.ev.WaitConnected(t)
}

// dialerEnv makes the test binary a process that dials connections
// (TestDialer): the test's own sockets must not count against the
// daemon's descriptors.
const dialerEnv = "FABRICFS_TEST_DIALER"

// TestDialer is not a test: run with dialerEnv=ADDR,N, it dials ADDR N
// times, keeps the connections, prints how many it made and waits for
// its standard input to close.
func TestDialer(t *testing.T) {
	arg := os.Getenv(dialerEnv)
	if arg == "" {
		t.Skip("the dialer of TestFDReserve")
	}
	addr, count, _ := strings.Cut(arg, ",")
	n, _ := strconv.Atoi(count)
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	fmt.Println(len(conns))
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// Connections that peers open never take the daemon's last FDReserve
// descriptors: after a flood, the daemon can still make descriptors of
// its own (listen, shared memory).
func TestFDReserve(t *testing.T) {
	// Set before the listener's goroutines start, restored after they end.
	defer func(n int) { core.FDReserve = n }(core.FDReserve)
	core.FDReserve = 40
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	d, info := loDomain()
	pep, _ := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()

	probe, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(probe.Fd()) + 200
	probe.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)

	cmd := exec.Command(os.Args[0], "-test.run=^TestDialer$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", dialerEnv, addr.IP, 400))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dialer: %v", err)
	}
	t.Logf("the dialer made %s connections", line[:len(line)-1])
	time.Sleep(200 * time.Millisecond) // the listener accepts the last ones

	var mine []*os.File
	defer func() {
		for _, f := range mine {
			f.Close()
		}
	}()
	for i := range core.FDReserve / 2 {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			t.Fatalf("descriptor %d of the daemon's own: %v", i, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, f)
	}
	pep2, _ := listen(t, d, info)
	pep2.Close()
}

// Accepting a request with an endpoint whose owner is at the limit fails
// with ENOSPC, and the requester is refused.
func TestAcceptPastTheLimit(t *testing.T) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	cli := dial(t, d, info, addr, nil)
	defer cli.ep.Close()
	req := pev.WaitReq(t)
	a := provtest.NewAccount(0)
	if _, err := d.NewEndpoint(req.Info(), req, userEP{provtest.NewEPEvents(), a}); core.Code(err) != fi.ENOSPC {
		t.Fatalf("accept past the limit: %v, want ENOSPC", err)
	}
	if f := cli.ev.WaitFailed(t); core.Code(f.Err) != fi.ECONNREFUSED {
		t.Fatalf("requester: %v, want ECONNREFUSED", f.Err)
	}
	if n := pep.(*passiveEndpoint).conns.Load(); n != 0 {
		t.Fatalf("the listener counts %d connections, want 0", n)
	}
}

// owned is events of an endpoint or passive endpoint of uid (core.Owned).
type owned struct{ uid uint32 }

func (o owned) Owner() uint32 { return o.uid }

// A listening socket of a user other than root does not take one of the
// daemon's last core.FDReserve descriptors: listen fails with EMFILE.
func TestFDReserveListen(t *testing.T) {
	d, info := loDomain()
	defer func(n int) { core.FDReserve = n }(core.FDReserve)
	core.FDReserve = 1 << 30 // every descriptor is in the reserve
	pep, err := d.NewPassiveEndpoint(info, struct {
		*provtest.PEPEvents
		owned
	}{provtest.NewPEPEvents(), owned{1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	if err := pep.Listen(fi.Addr{}); core.Code(err) != fi.EMFILE {
		t.Fatalf("uid 1000's listen in the reserve: %v, want EMFILE", err)
	}
}
