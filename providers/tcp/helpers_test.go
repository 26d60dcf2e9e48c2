package tcp

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

const waitTime = 10 * time.Second

// epEvents records an endpoint's connection events.
type epEvents struct {
	connected chan []byte
	shutdown  chan struct{}
	failed    chan failure

	mu      sync.Mutex
	n       int // events so far
	regions map[uint64]testRegion
	remote  chan core.Completion
}

type failure struct {
	err  error
	data []byte
}

func newEPEvents() *epEvents {
	return &epEvents{connected: make(chan []byte, 4), shutdown: make(chan struct{}, 4), failed: make(chan failure, 4),
		regions: map[uint64]testRegion{}, remote: make(chan core.Completion, 1<<10)}
}

// testRegion is memory a test exposes to peers' RMA under a key.
type testRegion struct {
	buf    []byte
	access fi.Caps
}

// expose lets peers reach buf under key with access.
func (ev *epEvents) expose(key uint64, buf []byte, access fi.Caps) {
	ev.mu.Lock()
	ev.regions[key] = testRegion{buf, access}
	ev.mu.Unlock()
}

func (ev *epEvents) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	ev.mu.Lock()
	r, ok := ev.regions[key]
	ev.mu.Unlock()
	switch {
	case !ok:
		return nil, nil, core.Errorf(fi.EINVAL, "no key %#x", key)
	case r.access&access != access:
		return nil, nil, core.Errorf(fi.EACCES, "key %#x: no %v", key, access)
	case addr > uint64(len(r.buf)) || n > uint64(len(r.buf))-addr:
		return nil, nil, core.Errorf(fi.EINVAL, "key %#x: [%d, +%d) out of range", key, addr, n)
	}
	return r.buf[addr : addr+n], func() {}, nil
}

func (ev *epEvents) Remote(c core.Completion) { ev.remote <- c }

func (ev *epEvents) count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.n
}

func (ev *epEvents) inc() {
	ev.mu.Lock()
	ev.n++
	ev.mu.Unlock()
}

func (ev *epEvents) Connected(data []byte)      { ev.inc(); ev.connected <- data }
func (ev *epEvents) Shutdown()                  { ev.inc(); ev.shutdown <- struct{}{} }
func (ev *epEvents) Failed(err error, d []byte) { ev.inc(); ev.failed <- failure{err, d} }

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

// waitShutdownOrFailed waits for the end of the connection, either way.
func (ev *epEvents) waitShutdownOrFailed(t testing.TB) {
	t.Helper()
	select {
	case <-ev.shutdown:
	case <-ev.failed:
	case <-time.After(waitTime):
		t.Fatalf("no Shutdown or Failed event")
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
	ev   *epEvents
	done chan done
}

// pair is two connected endpoints, their passive endpoint still listening.
type pair struct {
	d        *domain
	info     *fi.Info
	pep      core.PassiveEndpoint
	pev      *pepEvents
	cli, srv side
}

// listen opens a passive endpoint on 127.0.0.1, port 0.
func listen(t testing.TB, d *domain, info *fi.Info) (core.PassiveEndpoint, *pepEvents) {
	t.Helper()
	pev := newPEPEvents()
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
	ev := newEPEvents()
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
func accept(t testing.TB, d *domain, pev *pepEvents, data []byte) (side, core.ConnReq) {
	t.Helper()
	req := pev.waitReq(t)
	ev := newEPEvents()
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
	p := &pair{d: d, info: info}
	p.pep, p.pev = listen(t, d, info)
	addr, _ := p.pep.Name()
	p.cli = dial(t, d, info, addr, nil)
	p.srv, _ = accept(t, d, p.pev, nil)
	p.cli.ev.waitConnected(t)
	p.srv.ev.waitConnected(t)
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

func addrOf(s string) fi.Addr { return fiAddr(netip.MustParseAddrPort(s)) }
