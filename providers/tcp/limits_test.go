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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

// account is one user's Connections, as core.Fabric keeps them, with a
// limit.
type account struct {
	mu          sync.Mutex
	held, limit int64
}

func (a *account) Take(r core.Resource, n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r == core.Connections && a.held+n > a.limit {
		return core.Errorf(fi.ENOSPC, "uid 1000 holds %d of %s, the limit is %d", a.held, r, a.limit)
	}
	a.held += n
	return nil
}

func (a *account) Give(r core.Resource, n int64) {
	a.mu.Lock()
	a.held -= n
	a.mu.Unlock()
}

func (a *account) now() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// waitHeld waits until the account holds n.
func (a *account) waitHeld(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for a.now() != n {
		if time.Now().After(deadline) {
			t.Fatalf("account holds %d connections, want %d", a.now(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The events of a user's endpoints and passive endpoints: charged to a.
type userEP struct {
	*provtest.EPEvents
	*account
}

type userPEP struct {
	*provtest.PEPEvents
	*account
}

// Every socket a user's endpoints and passive endpoints hold is charged
// to the user: the listener, handshakes in progress at it, connections
// made. Past the limit, sockets accepted for the user are closed and a
// connect fails with ENOSPC; what was charged is given back.
func TestSocketsAreCharged(t *testing.T) {
	d, info := loDomain()
	a := &account{limit: 3}
	pev := provtest.NewPEPEvents()
	pep, err := d.NewPassiveEndpoint(info, userPEP{pev, a})
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	if err := pep.Listen(fi.Addr{}); err != nil {
		t.Fatal(err)
	}
	a.waitHeld(t, 1)
	addr, _ := pep.Name()
	idle := []net.Conn{rawDial(t, addr), rawDial(t, addr)}
	a.waitHeld(t, 3)
	over := rawDial(t, addr)
	waitClosed(t, over) // the user's fourth socket
	over.Close()

	e, err := d.NewEndpoint(info, nil, userEP{provtest.NewEPEvents(), a})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Connect(addr, nil); core.Code(err) != fi.ENOSPC {
		t.Fatalf("connect past the limit: %v, want ENOSPC", err)
	}
	for _, c := range idle {
		c.Close()
	}
	a.waitHeld(t, 1)
	if err := e.Connect(addr, nil); err != nil {
		t.Fatalf("connect within the limit: %v", err)
	}
	srv, _ := accept(t, d, pev, nil)
	srv.ev.WaitConnected(t)
	a.waitHeld(t, 2) // the listener and e; srv is another user's
	srv.ep.Close()
	e.Close()
	pep.Close()
	a.waitHeld(t, 0)
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

// A connection that sends nothing is closed after ConnReqTimeout, well
// before HandshakeTimeout.
func TestSilentConnectionsTimeOut(t *testing.T) {
	defer func(d time.Duration) { connReqTimeout = d }(connReqTimeout)
	connReqTimeout = 200 * time.Millisecond
	d, info := loDomain()
	pep, _ := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	c := rawDial(t, addr)
	defer c.Close()
	start := time.Now()
	waitClosed(t, c)
	if el := time.Since(start); el > handshakeTimeout/2 {
		t.Fatalf("silent connection closed after %v", el)
	}
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
	a := &account{limit: 0}
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
