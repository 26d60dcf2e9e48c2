package rxm

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

const waitTime = provtest.WaitTime

// events are an RDM endpoint's events: it has no connection events of its
// own; asynchronous errors are recorded. A peer's RMA reaches the regions
// added with Expose (none at first: a key that is not a rendezvous key is
// then refused), and remote events are recorded. It belongs to owner
// (core.Owned).
type events struct {
	provtest.Regions
	owner   uint32
	mu      sync.Mutex
	errs    []error
	remotes []core.Completion
	bufs    chan buffered // buffered messages (core.BufferedEvents)
}

// buffered is a buffered message's report and the bytes it carries.
type buffered struct {
	c     core.Completion
	bytes []byte
}

func (ev *events) Buffered(c core.Completion, bytes []byte) { ev.bufs <- buffered{c, bytes} }

func (ev *events) Remote(c core.Completion) {
	ev.mu.Lock()
	ev.remotes = append(ev.remotes, c)
	ev.mu.Unlock()
}

func (ev *events) Owner() uint32 { return ev.owner }

func (ev *events) Connected([]byte)     {}
func (ev *events) Shutdown()            {}
func (ev *events) Failed(error, []byte) {}
func (ev *events) AsyncError(err error) {
	ev.mu.Lock()
	ev.errs = append(ev.errs, err)
	ev.mu.Unlock()
}

func (ev *events) errors() []error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]error(nil), ev.errs...)
}

// result is one completion.
type result struct {
	op *core.Op
	c  core.Completion
}

// rdm is one RDM endpoint under test, on the real tcp provider's lo.
type rdm struct {
	ep    *endpoint
	ev    *events
	addr  fi.Addr
	comps chan result
}

// testDomain opens tcp/lo wrapped by rxm.
func testDomain(t testing.TB) (core.Provider, core.ProviderDomain) {
	t.Helper()
	tp, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := Wrap(tp)
	d, err := p.OpenDomain("lo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the domain: %v", err)
		}
	})
	return p, d
}

// loInfo is the FI_EP_RDM entry of lo's IPv4 address, without
// FI_BUFFERED_RECV, as an application that does not ask for it gets it.
func loInfo(t testing.TB, p core.Provider) *fi.Info {
	t.Helper()
	for _, in := range p.Infos() {
		if in.EPAttr.Type == fi.EP_RDM && in.DomainAttr.Name == "lo" && in.AddrFormat == fi.SOCKADDR_IN {
			in = in.Clone()
			in.Mode &^= fi.BUFFERED_RECV
			return in
		}
	}
	t.Fatal("no FI_EP_RDM entry for lo")
	return nil
}

// newRDM makes and enables an RDM endpoint; it is closed at cleanup.
func newRDM(t testing.TB, p core.Provider, d core.ProviderDomain) *rdm {
	t.Helper()
	return newRDMWith(t, d, loInfo(t, p))
}

func newRDMWith(t testing.TB, d core.ProviderDomain, info *fi.Info) *rdm {
	t.Helper()
	return newRDMOf(t, d, info, 0)
}

// newRDMOf makes an enabled RDM endpoint of uid owner.
func newRDMOf(t testing.TB, d core.ProviderDomain, info *fi.Info, owner uint32) *rdm {
	t.Helper()
	ev := &events{owner: owner, bufs: make(chan buffered, 1<<10)}
	ep, err := d.NewEndpoint(info, nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	r := &rdm{ep: ep.(*endpoint), ev: ev, comps: make(chan result, 1<<14)}
	t.Cleanup(func() { r.ep.Close() })
	if err := ep.Enable(); err != nil {
		t.Fatal(err)
	}
	if r.addr, err = ep.Name(); err != nil {
		t.Fatal(err)
	}
	if r.addr.IP.Port() == 0 {
		t.Fatalf("endpoint name %v has no port", r.addr)
	}
	return r
}

// op makes an operation whose completion goes to r.comps.
func (r *rdm) op(kind core.OpKind, buf []byte) *core.Op {
	op := &core.Op{Kind: kind, Buf: buf}
	op.OnComplete(func(op *core.Op, c core.Completion) { r.comps <- result{op, c} })
	return op
}

// send posts a send of buf to dst.
func (r *rdm) send(t testing.TB, kind core.OpKind, dst fi.Addr, buf []byte, tag uint64) *core.Op {
	t.Helper()
	op := r.op(kind, buf)
	op.Peer, op.Tag = dst, tag
	if err := r.ep.Post(op); err != nil {
		t.Fatalf("send: %v", err)
	}
	return op
}

// recv posts a receive of n bytes.
func (r *rdm) recv(t testing.TB, kind core.OpKind, n int, tag, ignore uint64) *core.Op {
	t.Helper()
	op := r.op(kind, make([]byte, n))
	op.Tag, op.Ignore = tag, ignore
	if err := r.ep.Post(op); err != nil {
		t.Fatalf("recv: %v", err)
	}
	return op
}

// wait takes the next completion.
func (r *rdm) wait(t testing.TB) result {
	t.Helper()
	select {
	case res := <-r.comps:
		return res
	case <-time.After(waitTime):
		t.Fatalf("no completion after %v (async errors: %v)", waitTime, r.ev.errors())
	}
	return result{}
}

// waitFor takes completions until op's, which it returns; the others must
// be successful sends.
func (r *rdm) waitFor(t *testing.T, op *core.Op) core.Completion {
	t.Helper()
	for {
		res := r.wait(t)
		if res.op == op {
			return res.c
		}
		if res.op.Kind.IsRecv() || res.c.Err != 0 {
			t.Fatalf("unexpected completion %+v of a kind %d op while waiting", res.c, res.op.Kind)
		}
	}
}

// none checks that no completion arrives for a short while.
func (r *rdm) none(t *testing.T) {
	t.Helper()
	select {
	case res := <-r.comps:
		t.Fatalf("unexpected completion %+v (op kind %d, tag %#x)", res.c, res.op.Kind, res.op.Tag)
	case <-time.After(50 * time.Millisecond):
	}
}

// wantRecv checks a receive's completion: no error, the payload, flags,
// tag and source.
func wantRecv(t *testing.T, op *core.Op, c core.Completion, payload []byte, tag uint64, src fi.Addr) {
	t.Helper()
	want := op.Kind.CQFlags()
	switch {
	case c.Err != 0:
		t.Fatalf("receive failed: %v (olen %d)", c.Err, c.OLen)
	case c.Len != uint64(len(payload)) || !bytes.Equal(op.Buf[:c.Len], payload):
		t.Fatalf("received %d bytes %.40q, want %d bytes %.40q", c.Len, op.Buf[:min(c.Len, uint64(len(op.Buf)))], len(payload), payload)
	case c.Flags != want:
		t.Fatalf("flags %v, want %v", c.Flags, want)
	case op.Kind == core.OpTRecv && c.Tag != tag:
		t.Fatalf("tag %#x, want %#x", c.Tag, tag)
	case c.Src != src:
		t.Fatalf("source %v, want %v", c.Src, src)
	}
}

// liveConns counts the endpoint's connections that are not abandoned.
func (r *rdm) liveConns() int {
	r.ep.mu.Lock()
	defer r.ep.mu.Unlock()
	n := 0
	for c := range r.ep.conns {
		if !c.dead {
			n++
		}
	}
	return n
}

// pattern is message i of n bytes.
func pattern(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*31 + k*7 + k>>8)
	}
	return b
}

// streamBothWays sends n tagged messages (tag i, pattern(i, size(i))) each
// way between a and b at once, with at most window receives of bufLen
// bytes posted and window sends outstanding, and checks every send
// completes and every message arrives intact, exactly once; inOrder also
// requires arrival in sending order (otherwise the tag says which).
func streamBothWays(t *testing.T, a, b *rdm, n, window, bufLen int, size func(int) int, inOrder bool) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range []struct{ from, to *rdm }{{a, b}, {b, a}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var posted, got, sent int
			for got < n {
				for ; posted < n && posted-got < window; posted++ {
					op := s.to.op(core.OpTRecv, make([]byte, bufLen))
					op.Ignore = ^uint64(0)
					if err := s.to.ep.Post(op); err != nil {
						t.Error(err)
						return
					}
				}
				for ; sent < n && sent-got < window; sent++ {
					op := s.from.op(core.OpTSend, pattern(sent, size(sent)))
					op.Peer, op.Tag = s.to.addr, uint64(sent)
					if err := s.from.ep.Post(op); err != nil {
						t.Error(err)
						return
					}
				}
				select {
				case res := <-s.to.comps:
					if !res.op.Kind.IsRecv() {
						if res.c.Err != 0 {
							t.Errorf("send: %+v", res.c)
							return
						}
						continue // a send of the other direction
					}
					i := int(res.c.Tag)
					if res.c.Err != 0 || (inOrder && i != got) || string(res.op.Buf[:res.c.Len]) != string(pattern(i, size(i))) {
						t.Errorf("message %d (arrival %d): %+v, %d bytes", i, got, res.c, res.c.Len)
						return
					}
					got++
				case <-time.After(waitTime):
					t.Errorf("stuck at %d of %d messages", got, n)
					return
				}
			}
		}()
	}
	wg.Wait()
}
