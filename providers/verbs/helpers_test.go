package verbs

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

const waitTime = provtest.WaitTime

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

// done is one completion.
type done struct {
	op *core.Op
	c  core.Completion
}

// side is one endpoint and its events and completions.
type side struct {
	ep   core.Endpoint
	ev   *provtest.EPEvents
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
	s := side{ev: provtest.NewEPEvents(), done: make(chan done, 1<<12)}
	s.ev.OwnerUID = owner
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
func listen(t testing.TB, p *Provider, d *domain) (core.PassiveEndpoint, *provtest.PEPEvents, fi.Addr) {
	t.Helper()
	pev := provtest.NewPEPEvents()
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

// request connects an endpoint of da, with no data, to a new listener of
// db, and returns it and the listener's request.
func request(t testing.TB, p *Provider, da, db *domain) (side, core.ConnReq) {
	t.Helper()
	_, pev, addr := listen(t, p, db)
	cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
	if err := cli.ep.Connect(addr, nil); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return cli, pev.WaitReq(t)
}

// connect connects an endpoint of da to a listener of db.
func connect(t testing.TB, p *Provider, da, db *domain) pair {
	t.Helper()
	return connectAs(t, 0, p, da, db)
}

// connectAs is connect with the accepting endpoint of owner.
func connectAs(t testing.TB, owner uint32, p *Provider, da, db *domain) pair {
	t.Helper()
	cli, req := request(t, p, da, db)
	srv := newSideOf(t, owner, db, req.Info(), req)
	if err := srv.ep.Accept(nil); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	cli.ev.WaitConnected(t)
	srv.ev.WaitConnected(t)
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
	m, err := d.RegisterMemory(owner, buf, 0, access, uint64(fi.KEY_NOTAVAIL), nil)
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
