package verbs

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

const waitTime = 10 * time.Second

// testProvider opens a provider with one device per address (127.0.0.x
// on lo), all on a free UDP port, closed at the end of the test.
func testProvider(t testing.TB, fault *ibv.Fault, addrs ...string) *Provider {
	t.Helper()
	var ips []netip.Addr
	for _, a := range addrs {
		ips = append(ips, netip.MustParseAddr(a))
	}
	var lastErr error
	for range 5 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := c.LocalAddr().(*net.UDPAddr).Port
		c.Close()
		p, err := New(Config{Addrs: ips, Port: port, fault: fault})
		if err == nil {
			t.Cleanup(func() { p.Close() })
			return p
		}
		lastErr = err
	}
	t.Fatalf("New: %v", lastErr)
	return nil
}

// openDomain opens a domain of p, closed at the end of the test.
func openDomain(t testing.TB, p *Provider, name string) *domain {
	t.Helper()
	d, err := p.OpenDomain(name)
	if err != nil {
		t.Fatalf("OpenDomain(%s): %v", name, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing domain %s: %v", name, err)
		}
	})
	return d.(*domain)
}

// infoOf is p's entry of type typ for domain dom.
func infoOf(t testing.TB, p *Provider, dom string, typ fi.EPType) *fi.Info {
	t.Helper()
	for _, in := range p.Infos() {
		if in.DomainAttr.Name == dom && in.EPAttr.Type == typ {
			return in
		}
	}
	t.Fatalf("no %v entry for %s", typ, dom)
	return nil
}

// epEvents records an endpoint's connection events.
type epEvents struct {
	connected chan []byte
	shutdown  chan struct{}
	failed    chan failure
	remote    chan core.Completion
	owner     uint32 // core.Owned

	mu sync.Mutex
	n  int
}

func (ev *epEvents) Owner() uint32 { return ev.owner }

type failure struct {
	err  error
	data []byte
}

func newEPEvents() *epEvents {
	return &epEvents{connected: make(chan []byte, 4), shutdown: make(chan struct{}, 4), failed: make(chan failure, 4),
		remote: make(chan core.Completion, 64)}
}

func (ev *epEvents) inc() {
	ev.mu.Lock()
	ev.n++
	ev.mu.Unlock()
}

func (ev *epEvents) count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.n
}

func (ev *epEvents) Connected(data []byte)      { ev.inc(); ev.connected <- data }
func (ev *epEvents) Shutdown()                  { ev.inc(); ev.shutdown <- struct{}{} }
func (ev *epEvents) Failed(err error, d []byte) { ev.inc(); ev.failed <- failure{err, d} }
func (ev *epEvents) Remote(c core.Completion)   { ev.remote <- c }

// Region: a verbs endpoint's peers reach registered memory through the
// device; nothing asks the endpoint.
func (ev *epEvents) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	return nil, nil, core.Errorf(fi.EINVAL, "verbs endpoints do not ask for regions")
}

func (ev *epEvents) waitConnected(t testing.TB) []byte {
	t.Helper()
	select {
	case d := <-ev.connected:
		return d
	case f := <-ev.failed:
		t.Fatalf("connection failed: %v (data %q)", f.err, f.data)
	case <-ev.shutdown:
		t.Fatalf("connection shut down instead of connecting")
	case <-time.After(waitTime):
		t.Fatalf("no Connected event")
	}
	return nil
}

func (ev *epEvents) waitFailed(t testing.TB) failure {
	t.Helper()
	select {
	case f := <-ev.failed:
		return f
	case <-ev.connected:
		t.Fatalf("Connected, want Failed")
	case <-ev.shutdown:
		t.Fatalf("Shutdown, want Failed")
	case <-time.After(waitTime):
		t.Fatalf("no Failed event")
	}
	return failure{}
}

func (ev *epEvents) waitShutdown(t testing.TB) {
	t.Helper()
	select {
	case <-ev.shutdown:
	case f := <-ev.failed:
		t.Fatalf("Failed (%v), want Shutdown", f.err)
	case <-time.After(waitTime):
		t.Fatalf("no Shutdown event")
	}
}

// pepEvents records a passive endpoint's events.
type pepEvents struct {
	reqs   chan core.ConnReq
	failed chan error
}

func newPEPEvents() *pepEvents {
	return &pepEvents{reqs: make(chan core.ConnReq, 64), failed: make(chan error, 4)}
}

func (ev *pepEvents) ConnReq(r core.ConnReq) { ev.reqs <- r }
func (ev *pepEvents) Failed(err error)       { ev.failed <- err }

func (ev *pepEvents) waitReq(t testing.TB) core.ConnReq {
	t.Helper()
	select {
	case r := <-ev.reqs:
		return r
	case err := <-ev.failed:
		t.Fatalf("listener failed: %v", err)
	case <-time.After(waitTime):
		t.Fatalf("no connection request")
	}
	return nil
}

// done is one completion.
type done struct {
	op *core.Op
	c  core.Completion
}

// side is one endpoint and its events and completions.
type side struct {
	ep   core.Endpoint
	ev   *epEvents
	done chan done
}

// post posts op on s, reporting its completion on s.done.
func (s side) post(t testing.TB, op *core.Op) {
	t.Helper()
	if err := s.try(op); err != nil {
		t.Fatalf("Post(kind %d, %d bytes): %v", op.Kind, len(op.Buf), err)
	}
}

// try posts op on s, reporting its completion on s.done.
func (s side) try(op *core.Op) error {
	op.OnComplete(func(op *core.Op, c core.Completion) { s.done <- done{op, c} })
	return s.ep.Post(op)
}

func (s side) wait(t testing.TB) done {
	t.Helper()
	select {
	case d := <-s.done:
		return d
	case <-time.After(waitTime):
		t.Fatalf("no completion")
	}
	return done{}
}

func (s side) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case x := <-s.done:
		t.Fatalf("unexpected completion %+v", x.c)
	case <-time.After(d):
	}
}

// newSide makes an enabled endpoint of d with info (from req, if not nil).
func newSide(t testing.TB, d *domain, info *fi.Info, req core.ConnReq) side {
	return newSideOf(t, 0, d, info, req)
}

// newSideOf is newSide for an endpoint of owner.
func newSideOf(t testing.TB, owner uint32, d *domain, info *fi.Info, req core.ConnReq) side {
	t.Helper()
	s := side{ev: newEPEvents(), done: make(chan done, 1<<12)}
	s.ev.owner = owner
	e, err := d.NewEndpoint(info, req, s.ev)
	if err != nil {
		t.Fatalf("NewEndpoint: %v", err)
	}
	s.ep = e
	t.Cleanup(func() { e.Close() })
	if err := e.Enable(); err != nil {
		t.Fatalf("Enable: %v", err)
	}
	return s
}

// listen opens a listening passive endpoint of d.
func listen(t testing.TB, p *Provider, d *domain) (core.PassiveEndpoint, *pepEvents, fi.Addr) {
	t.Helper()
	pev := newPEPEvents()
	pep, err := d.NewPassiveEndpoint(infoOf(t, p, d.name, fi.EP_MSG), pev)
	if err != nil {
		t.Fatalf("NewPassiveEndpoint: %v", err)
	}
	t.Cleanup(func() { pep.Close() })
	if err := pep.Listen(fi.Addr{}); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	addr, err := pep.Name()
	if err != nil {
		t.Fatal(err)
	}
	return pep, pev, addr
}

// pair is two connected FI_EP_MSG endpoints.
type pair struct {
	cli, srv side
}

// connect connects an endpoint of da to a listener of db.
func connect(t testing.TB, p *Provider, da, db *domain) pair {
	t.Helper()
	_, pev, addr := listen(t, p, db)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(addr, nil); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	req := pev.waitReq(t)
	srv := newSide(t, db, req.Info(), req)
	if err := srv.ep.Accept(nil); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	cli.ev.waitConnected(t)
	srv.ev.waitConnected(t)
	return pair{cli, srv}
}

// regMem registers buf with d for access, deregistered at the end of the
// test.
func regMem(t testing.TB, d *domain, buf []byte, access fi.Caps) core.Memory {
	return regMemOf(t, 0, d, buf, access)
}

// regMemOf is regMem for owner.
func regMemOf(t testing.TB, owner uint32, d *domain, buf []byte, access fi.Caps) core.Memory {
	t.Helper()
	m, err := d.RegisterMemory(owner, buf, access, uint64(fi.KEY_NOTAVAIL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// sharedMem is n bytes of memory outside Go's heap, as the tree's memory
// regions are (shared mappings): a peer's RMA writes and reads it with no
// completion at the target, so the race detector must not watch it.
func sharedMem(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}
