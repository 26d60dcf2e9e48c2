package tcp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

const waitTime = provtest.WaitTime

// done is one completion.
type done struct {
	op *core.Op
	c  core.Completion
}

// completions makes e report completions on a channel with room for n.
// Completions may be delivered inside Post, on the test's own goroutine,
// and must not block: n must cover every completion the test may leave
// unread.
func completions(e core.Endpoint, n int) chan done {
	ch := make(chan done, n)
	e.(*endpoint).complete = func(op *core.Op, c core.Completion) { ch <- done{op, c} }
	return ch
}

func waitDone(t testing.TB, ch chan done) done {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(waitTime):
		t.Fatalf("no completion")
	}
	return done{}
}

func noDone(t testing.TB, ch chan done, d time.Duration) {
	t.Helper()
	select {
	case x := <-ch:
		t.Fatalf("unexpected completion %+v of %+v", x.c, x.op)
	case <-time.After(d):
	}
}

// loDomain is the lo domain and its IPv4 fi_info.
func loDomain() (*domain, *fi.Info) {
	p := newProvider(sortAddrs(nil))
	return &domain{name: "lo"}, p.Infos()[0]
}

// side is one end of a connection.
type side struct {
	ep   *endpoint
	ev   *provtest.EPEvents
	done chan done
}

// pair is two connected endpoints, their passive endpoint still listening.
type pair struct {
	d        *domain
	info     *fi.Info
	pep      core.PassiveEndpoint
	pev      *provtest.PEPEvents
	cli, srv side
}

// listen opens a passive endpoint on 127.0.0.1, port 0.
func listen(t testing.TB, d *domain, info *fi.Info) (core.PassiveEndpoint, *provtest.PEPEvents) {
	t.Helper()
	pev := provtest.NewPEPEvents()
	pep, err := d.NewPassiveEndpoint(info, pev)
	if err != nil {
		t.Fatalf("NewPassiveEndpoint: %v", err)
	}
	if err := pep.Listen(fi.Addr{}); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	return pep, pev
}

// dial makes an endpoint and connects it to addr.
func dial(t testing.TB, d *domain, info *fi.Info, addr fi.Addr, data []byte) side {
	t.Helper()
	ev := provtest.NewEPEvents()
	e, err := d.NewEndpoint(info, nil, ev)
	if err != nil {
		t.Fatalf("NewEndpoint: %v", err)
	}
	s := side{ep: e.(*endpoint), ev: ev, done: completions(e, 1<<14)}
	if err := e.Enable(); err != nil {
		t.Fatalf("Enable: %v", err)
	}
	if err := e.Connect(addr, data); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return s
}

// accept takes the next request and accepts it with data.
func accept(t testing.TB, d *domain, pev *provtest.PEPEvents, data []byte) (side, core.ConnReq) {
	t.Helper()
	req := pev.WaitReq(t)
	ev := provtest.NewEPEvents()
	e, err := d.NewEndpoint(req.Info(), req, ev)
	if err != nil {
		t.Fatalf("NewEndpoint(req): %v", err)
	}
	s := side{ep: e.(*endpoint), ev: ev, done: completions(e, 1<<14)}
	if err := e.Enable(); err != nil {
		t.Fatalf("Enable: %v", err)
	}
	if err := e.Accept(data); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	return s, req
}

// connect makes a connected pair over lo, closed at the end of the test.
func connect(t testing.TB) *pair {
	t.Helper()
	d, info := loDomain()
	return connectOn(t, d, info)
}

// connectOn makes a connected pair in domain d from info, closed at the
// end of the test.
func connectOn(t testing.TB, d *domain, info *fi.Info) *pair {
	t.Helper()
	p := &pair{d: d, info: info}
	p.pep, p.pev = listen(t, d, info)
	addr, _ := p.pep.Name()
	p.cli = dial(t, d, info, addr, nil)
	p.srv, _ = accept(t, d, p.pev, nil)
	p.cli.ev.WaitConnected(t)
	p.srv.ev.WaitConnected(t)
	t.Cleanup(func() {
		p.cli.ep.Close()
		p.srv.ep.Close()
		p.pep.Close()
	})
	return p
}

func post(t testing.TB, e core.Endpoint, op *core.Op) {
	t.Helper()
	if err := e.Post(op); err != nil {
		t.Fatalf("Post(%+v): %v", op, err)
	}
}

func addrOf(s string) fi.Addr { return fi.SockAddr(netip.MustParseAddrPort(s)) }
