package rxm

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestInfos checks the entries Wrap adds: one FI_EP_RDM entry per FI_EP_MSG
// entry, after them, with rxm's values and only implemented capabilities.
func TestInfos(t *testing.T) {
	p, _ := testDomain(t)
	var msg, rdm int
	for _, in := range p.Infos() {
		switch in.EPAttr.Type {
		case fi.EP_MSG:
			if rdm > 0 {
				t.Errorf("an FI_EP_MSG entry after an FI_EP_RDM one")
			}
			msg++
		case fi.EP_RDM:
			rdm++
			if in.FabricAttr.ProvName != "tcp;ofi_rxm" || in.EPAttr.Protocol != fi.PROTO_RXM || in.TxAttr.InjectSize != 64 ||
				in.EPAttr.MaxMsgSize != math.MaxUint64 || in.DomainAttr.CQDataSize != 8 || in.EPAttr.MemTagFormat != MemTagFormat {
				t.Errorf("RDM entry: prov_name %q protocol %v inject_size %d max_msg_size %d mem_tag_format %#x",
					in.FabricAttr.ProvName, in.EPAttr.Protocol, in.TxAttr.InjectSize, in.EPAttr.MaxMsgSize, in.EPAttr.MemTagFormat)
			}
			// fi_domain(3) FI_SHARED_AV: "Indicates that the domain supports
			// the ability to share address vectors among multiple processes
			// using the named address vector feature."
			if in.Caps&fi.SHARED_AV == 0 || in.DomainAttr.Caps&fi.SHARED_AV == 0 {
				t.Errorf("RDM entry without FI_SHARED_AV: caps %v, domain caps %v", in.Caps, in.DomainAttr.Caps)
			}
			all := fi.MSG | fi.TAGGED | fi.DIRECTED_RECV | fi.SOURCE | fi.MULTI_RECV | fi.RMA | fi.ATOMIC | fi.READ | fi.WRITE |
				fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
			// FI_ATOMIC in the entry and both directions, as real
			// tcp;ofi_rxm lists it (fi_info -c FI_ATOMIC).
			tx, rx := fi.RMA|fi.ATOMIC|fi.READ|fi.WRITE, fi.RMA|fi.ATOMIC|fi.REMOTE_READ|fi.REMOTE_WRITE|fi.RMA_EVENT
			if in.Caps&all != all || in.TxAttr.RMAIovLimit != 4 || in.TxAttr.IovLimit != 4 || in.RxAttr.IovLimit != 4 || in.TxAttr.Caps&tx != tx || in.RxAttr.Caps&rx != rx {
				t.Errorf("RDM caps %v, tx %v, rx %v, rma_iov_limit %d, iov_limit %d and %d (rxm's RXM_IOV_LIMIT is 4)",
					in.Caps, in.TxAttr.Caps, in.RxAttr.Caps, in.TxAttr.RMAIovLimit, in.TxAttr.IovLimit, in.RxAttr.IovLimit)
			}
		}
	}
	if msg == 0 || msg != rdm {
		t.Errorf("%d FI_EP_MSG entries and %d FI_EP_RDM ones, want as many", msg, rdm)
	}
	if p.Name() != "tcp" {
		t.Errorf("name %q", p.Name())
	}
}

// TestDataProgress: an RDM entry says rxm's data_progress,
// FI_PROGRESS_MANUAL, and still serves a hint asking FI_PROGRESS_AUTO,
// answering FI_PROGRESS_AUTO, as libfabric 1.17's rxm does
// (rxm_alter_info); an FI_EP_MSG entry stays FI_PROGRESS_AUTO.
func TestDataProgress(t *testing.T) {
	p, _ := testDomain(t)
	for _, in := range p.Infos() {
		want := fi.PROGRESS_AUTO
		if in.EPAttr.Type == fi.EP_RDM {
			want = fi.PROGRESS_MANUAL
		}
		if in.DomainAttr.DataProgress != want || in.DomainAttr.ControlProgress != fi.PROGRESS_AUTO {
			t.Errorf("%v entry: data_progress %v, control_progress %v, want %v and FI_PROGRESS_AUTO",
				in.EPAttr.Type, in.DomainAttr.DataProgress, in.DomainAttr.ControlProgress, want)
		}
	}
	// fi_domain(3) FI_PROGRESS_MANUAL: "When manual progress is set, the
	// provider will attempt to advance an asynchronous operation forward
	// when the application attempts to wait on or read an event queue,
	// completion queue, or counter where the completed operation will be
	// reported." FI_PROGRESS_AUTO: "the provider will make forward
	// progress on an asynchronous operation without further intervention
	// by the application."
	for _, dp := range []fi.Progress{fi.PROGRESS_UNSPEC, fi.PROGRESS_MANUAL, fi.PROGRESS_AUTO} {
		hints := &fi.Info{EPAttr: &fi.EPAttr{Type: fi.EP_RDM}, DomainAttr: &fi.DomainAttr{DataProgress: dp}}
		got, err := fi.GetInfo(context.Background(), fi.MakeVersion(1, 17), "", "", 0, hints, p.Infos())
		if err != nil || len(got) == 0 {
			t.Fatalf("hint data_progress %v: %d entries, %v", dp, len(got), err)
		}
		want := dp
		if dp == fi.PROGRESS_UNSPEC {
			want = fi.PROGRESS_MANUAL
		}
		for _, in := range got {
			if in.DomainAttr.DataProgress != want {
				t.Errorf("hint data_progress %v: an entry says %v, want %v", dp, in.DomainAttr.DataProgress, want)
			}
		}
	}
}

// TestMessagesBothWays sends untagged and tagged messages both ways, with
// remote CQ data and inject, and checks data, flags, tags and FI_SOURCE.
func TestMessagesBothWays(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	for i, dir := range []struct{ from, to *rdm }{{a, b}, {b, a}, {a, b}} {
		m1, m2 := pattern(i, 1000), pattern(i+1, EagerLimit)
		r1 := dir.to.recv(t, core.OpRecv, 2000, 0, 0)
		r2 := dir.to.recv(t, core.OpTRecv, EagerLimit, 1234, 0)
		s1 := dir.from.send(t, core.OpSend, dir.to.addr, m1, 0)
		s2 := dir.from.send(t, core.OpTSend, dir.to.addr, m2, 1234)
		for _, s := range []*core.Op{s1, s2} {
			if c := dir.from.waitFor(t, s); c.Err != 0 || c.Len != uint64(len(s.Buf)) || c.Flags != s.Kind.CQFlags() {
				t.Fatalf("send completion %+v", c)
			}
		}
		wantRecv(t, r1, dir.to.waitFor(t, r1), m1, 0, dir.from.addr)
		wantRecv(t, r2, dir.to.waitFor(t, r2), m2, 1234, dir.from.addr)
	}
	// Remote CQ data and inject, both kinds.
	for _, kind := range []core.OpKind{core.OpSend, core.OpTSend} {
		r := b.recv(t, kind+1, 100, 7, 0)
		s := a.op(kind, []byte("injected"))
		s.Peer, s.Tag, s.Data = b.addr, 7, 0xfeedbeef
		s.Flags = fi.INJECT | fi.OpFlags(fi.REMOTE_CQ_DATA)
		if err := a.ep.Post(s); err != nil {
			t.Fatal(err)
		}
		c := b.waitFor(t, r)
		if c.Err != 0 || string(r.Buf[:c.Len]) != "injected" || c.Data != 0xfeedbeef || c.Flags != r.Kind.CQFlags()|fi.CQFlags(fi.REMOTE_CQ_DATA) {
			t.Fatalf("%v: completion %+v %q", kind, c, r.Buf[:c.Len])
		}
	}
	if a.liveConns() != 1 || b.liveConns() != 1 {
		t.Errorf("connections: %d and %d, want one each", a.liveConns(), b.liveConns())
	}
}

// TestLimits checks the inject size, truncation, a receive without a
// buffer and a send without a destination.
func TestLimits(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	inj := a.op(core.OpSend, make([]byte, InjectSize+1))
	inj.Peer, inj.Flags = b.addr, fi.INJECT
	if err := a.ep.Post(inj); core.Code(err) != fi.EINVAL {
		t.Errorf("inject of %d bytes: %v, want EINVAL", InjectSize+1, err)
	}
	if err := a.ep.Post(a.op(core.OpSend, []byte("x"))); core.Code(err) != fi.EINVAL {
		t.Errorf("send without destination: %v, want EINVAL", err)
	}
	short := b.recv(t, core.OpRecv, 10, 0, 0)
	a.send(t, core.OpSend, b.addr, pattern(1, 25), 0)
	if c := b.waitFor(t, short); c.Err != fi.ETRUNC || c.Len != 10 || c.OLen != 15 || string(short.Buf) != string(pattern(1, 25)[:10]) {
		t.Errorf("truncated receive: %+v", c)
	}
	dyn := b.op(core.OpRecv, nil)
	if err := b.ep.Post(dyn); err != nil {
		t.Fatal(err)
	}
	a.send(t, core.OpSend, b.addr, pattern(2, 3000), 0)
	wantRecv(t, dyn, b.waitFor(t, dyn), pattern(2, 3000), 0, a.addr)
	empty := b.recv(t, core.OpRecv, 10, 0, 0)
	a.send(t, core.OpSend, b.addr, nil, 0)
	wantRecv(t, empty, b.waitFor(t, empty), nil, 0, a.addr)
}

// TestMatching checks tag matching under ignore bits, the separation of
// untagged and tagged queues, posting order, and unexpected messages
// taken by later receives in arrival order.
func TestMatching(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	r1 := b.recv(t, core.OpTRecv, 64, 0x100, 0xff) // any of 0x100..0x1ff
	r2 := b.recv(t, core.OpTRecv, 64, 0x200, 0)    // exactly 0x200
	r3 := b.recv(t, core.OpTRecv, 64, 0x1ab, 0)    // exactly 0x1ab, but r1 comes first
	msgs := []struct {
		tagged bool
		tag    uint64
		body   string
	}{
		{true, 0x205, "unexpected 0x205"},
		{false, 0, "untagged"},
		{true, 0x1ab, "to r1"},
		{true, 0x200, "to r2"},
		{true, 0x1ab, "to r3"},
		{true, 0x205, "second 0x205"},
	}
	for _, m := range msgs {
		kind := core.OpSend
		if m.tagged {
			kind = core.OpTSend
		}
		a.send(t, kind, b.addr, []byte(m.body), m.tag)
	}
	for _, want := range []struct {
		op   *core.Op
		body string
		tag  uint64
	}{{r1, "to r1", 0x1ab}, {r2, "to r2", 0x200}, {r3, "to r3", 0x1ab}} {
		wantRecv(t, want.op, b.waitFor(t, want.op), []byte(want.body), want.tag, a.addr)
	}
	b.none(t)
	// The unexpected ones, in arrival order: a wildcard takes the first 0x205.
	r4 := b.recv(t, core.OpTRecv, 64, 0, ^uint64(0))
	wantRecv(t, r4, b.waitFor(t, r4), []byte("unexpected 0x205"), 0x205, a.addr)
	r5 := b.recv(t, core.OpRecv, 64, 0, 0)
	wantRecv(t, r5, b.waitFor(t, r5), []byte("untagged"), 0, a.addr)
	r6 := b.recv(t, core.OpTRecv, 64, 0x205, 0)
	wantRecv(t, r6, b.waitFor(t, r6), []byte("second 0x205"), 0x205, a.addr)
	b.none(t)
}

// TestUnexpectedQueue sends many more messages than a connection has
// receive buffers before any receive is posted: the sends complete (the
// connection does not stall), and later receives get every message in
// order.
func TestUnexpectedQueue(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	const n = 20 * bufsPerConn
	var sends []*core.Op
	for i := range n {
		sends = append(sends, a.send(t, core.OpTSend, b.addr, pattern(i, 100+i*37%4000), uint64(i)))
	}
	for _, s := range sends {
		if c := a.waitFor(t, s); c.Err != 0 {
			t.Fatalf("send: %+v", c)
		}
	}
	deadline := time.Now().Add(waitTime)
	for {
		b.ep.mu.Lock()
		got := len(b.ep.rx.unexp[1])
		b.ep.mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unexpected messages, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		r := b.recv(t, core.OpTRecv, 4096, 0, ^uint64(0))
		wantRecv(t, r, b.waitFor(t, r), pattern(i, 100+i*37%4000), uint64(i), a.addr)
	}
	b.ep.mu.Lock()
	left := b.ep.rx.bytes
	b.ep.mu.Unlock()
	if left != 0 {
		t.Errorf("%d unexpected bytes left", left)
	}
}

// TestDirectedRecv: a receive naming a source takes only that source's
// messages; FI_SOURCE names each sender.
func TestDirectedRecv(t *testing.T) {
	p, d := testDomain(t)
	a, b, c := newRDM(t, p, d), newRDM(t, p, d), newRDM(t, p, d)
	fromB := c.op(core.OpRecv, make([]byte, 64))
	fromB.Peer = b.addr
	if err := c.ep.Post(fromB); err != nil {
		t.Fatal(err)
	}
	sa := a.send(t, core.OpSend, c.addr, []byte("from a"), 0)
	a.waitFor(t, sa)
	time.Sleep(20 * time.Millisecond) // a's message arrives first
	b.send(t, core.OpSend, c.addr, []byte("from b"), 0)
	wantRecv(t, fromB, c.waitFor(t, fromB), []byte("from b"), 0, b.addr)
	anyone := c.recv(t, core.OpRecv, 64, 0, 0)
	wantRecv(t, anyone, c.waitFor(t, anyone), []byte("from a"), 0, a.addr)

	// Without FI_DIRECTED_RECV the source of a receive is ignored.
	info := loInfo(t, p)
	info.Caps &^= fi.DIRECTED_RECV
	e := newRDMWith(t, d, info)
	notA := e.op(core.OpRecv, make([]byte, 64))
	notA.Peer = b.addr
	if err := e.ep.Post(notA); err != nil {
		t.Fatal(err)
	}
	a.send(t, core.OpSend, e.addr, []byte("from a"), 0)
	wantRecv(t, notA, e.waitFor(t, notA), []byte("from a"), 0, a.addr)
}

// TestSimultaneousConnect has pairs of endpoints send to each other at the
// same instant, each the first contact: both messages arrive, and each
// pair ends with one connection each side, as libfabric settles crossing
// requests.
func TestSimultaneousConnect(t *testing.T) {
	p, d := testDomain(t)
	for round := range 20 {
		a, b := newRDM(t, p, d), newRDM(t, p, d)
		ra := a.recv(t, core.OpRecv, 64, 0, 0)
		rb := b.recv(t, core.OpRecv, 64, 0, 0)
		var start, wg sync.WaitGroup
		start.Add(1)
		for _, s := range []struct{ from, to *rdm }{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				op := s.from.op(core.OpSend, []byte("hello from "+s.from.addr.String()))
				op.Peer = s.to.addr
				if err := s.from.ep.Post(op); err != nil {
					t.Error(err)
				}
			}()
		}
		start.Done()
		wg.Wait()
		wantRecv(t, ra, a.waitFor(t, ra), []byte("hello from "+b.addr.String()), 0, b.addr)
		wantRecv(t, rb, b.waitFor(t, rb), []byte("hello from "+a.addr.String()), 0, a.addr)
		deadline := time.Now().Add(waitTime)
		for a.liveConns() != 1 || b.liveConns() != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d and %d connections, want one each", round, a.liveConns(), b.liveConns())
			}
			time.Sleep(time.Millisecond)
		}
		// The surviving connection carries both directions.
		for _, s := range []struct{ from, to *rdm }{{a, b}, {b, a}} {
			r := s.to.recv(t, core.OpRecv, 64, 0, 0)
			s.from.send(t, core.OpSend, s.to.addr, []byte("again"), 0)
			wantRecv(t, r, s.to.waitFor(t, r), []byte("again"), 0, s.from.addr)
		}
		if len(a.ev.errors()) > 0 || len(b.ev.errors()) > 0 {
			t.Errorf("round %d: async errors %v %v", round, a.ev.errors(), b.ev.errors())
		}
		a.ep.Close()
		b.ep.Close()
	}
}

// TestSelf sends to the endpoint's own address, eagerly and by rendezvous.
func TestSelf(t *testing.T) {
	p, d := testDomain(t)
	a := newRDM(t, p, d)
	r := a.recv(t, core.OpTRecv, 64, 5, 0)
	a.send(t, core.OpTSend, a.addr, []byte("me"), 5)
	wantRecv(t, r, a.waitFor(t, r), []byte("me"), 5, a.addr)
	// A rendezvous to ourselves: the request goes out on our connection,
	// the reads come back on it from the accepted one.
	big := pattern(3, 300000)
	r = a.recv(t, core.OpTRecv, len(big), 6, 0)
	s := a.send(t, core.OpTSend, a.addr, big, 6)
	for range 2 { // in either order: each completes on the other's answer
		switch res := a.wait(t); res.op {
		case r:
			wantRecv(t, r, res.c, big, 6, a.addr)
		case s:
			if res.c.Err != 0 {
				t.Fatalf("send: %+v", res.c)
			}
		}
	}
	noRndvLeft(t, a)
}

// TestThousandInOrder streams 1000 messages of mixed sizes each way at
// once, with a window of receives, and checks each arrives once, in order.
func TestThousandInOrder(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	const n, window = 1000, 64
	size := func(i int) int { return []int{0, 1, 63, 64, 65, 1000, 4096, 9000, EagerLimit}[i%9] }
	streamBothWays(t, a, b, n, window, EagerLimit, size, true)
}

// TestClose: closing an endpoint cancels its receives and queued sends,
// and a peer's connection to it ends; the peer connects anew to a new
// endpoint.
func TestClose(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	r := b.recv(t, core.OpRecv, 64, 0, 0)
	s := a.send(t, core.OpSend, b.addr, []byte("one"), 0)
	a.waitFor(t, s)
	wantRecv(t, r, b.waitFor(t, r), []byte("one"), 0, a.addr)
	pending := b.recv(t, core.OpRecv, 64, 0, 0)
	b.ep.Close()
	if c := b.waitFor(t, pending); c.Err != fi.ECANCELED {
		t.Errorf("receive after close: %+v", c)
	}
	deadline := time.Now().Add(waitTime)
	for a.liveConns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections left to a closed peer", a.liveConns())
		}
		time.Sleep(time.Millisecond)
	}
	if errs := a.ev.errors(); len(errs) > 0 && !strings.Contains(errs[0].Error(), "connection to") {
		t.Errorf("async errors: %v", errs)
	}
	// A send to a closed endpoint's address fails: nobody listens.
	gone := a.send(t, core.OpSend, b.addr, []byte("two"), 0)
	if c := a.waitFor(t, gone); c.Err == 0 {
		t.Errorf("send to a closed endpoint: %+v", c)
	}
	c := newRDM(t, p, d)
	rc := c.recv(t, core.OpRecv, 64, 0, 0)
	a.send(t, core.OpSend, c.addr, []byte("three"), 0)
	wantRecv(t, rc, c.waitFor(t, rc), []byte("three"), 0, a.addr)
}

// TestUnexpectedLimit: beyond the endpoint's limit of unexpected bytes its
// connections stop being read (TCP holds the sender back) instead of the
// daemon keeping whatever peers send; receives posted later get every
// message, in order.
func TestUnexpectedLimit(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	b.ep.mu.Lock()
	b.ep.rx.limit = 10 * 1000
	b.ep.mu.Unlock()
	const n, size = 200, 1000
	for i := range n {
		a.send(t, core.OpSend, b.addr, pattern(i, size), 0)
	}
	time.Sleep(300 * time.Millisecond)
	b.ep.mu.Lock()
	kept := len(b.ep.rx.unexp[0])
	b.ep.mu.Unlock()
	// Past the limit, only the buffers still posted can fill.
	if most := 10 + 1 + bufsPerConn; kept == 0 || kept > most {
		t.Fatalf("%d unexpected messages kept, want 1..%d", kept, most)
	}
	for i := range n {
		r := b.recv(t, core.OpRecv, size, 0, 0)
		wantRecv(t, r, b.waitFor(t, r), pattern(i, size), 0, a.addr)
	}
}

// TestCloseDuringPeerShutdown closes an endpoint while it is taking down
// a connection its peer shut: many rendezvous sends wait on that
// connection, so their failed completions keep the shutdown busy while
// Close runs. Every connection's endpoint must be closed when Close
// returns (the domain then has none open).
func TestCloseDuringPeerShutdown(t *testing.T) {
	p, _ := testDomain(t)
	for round := range 10 {
		d, err := p.OpenDomain("lo")
		if err != nil {
			t.Fatal(err)
		}
		a, b := newRDM(t, p, d), newRDM(t, p, d)
		const n = 500
		for i := range n {
			a.send(t, core.OpSend, b.addr, pattern(i, EagerLimit+1), 0)
		}
		waitUnexpected(t, b, false)
		bClosed := make(chan error, 1)
		go func() { bClosed <- b.ep.Close() }()
		deadline := time.Now().Add(waitTime)
		for a.liveConns() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the peer's shutdown did not arrive", round)
			}
			runtime.Gosched()
		}
		if err := a.ep.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-bClosed; err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("round %d: closing the domain after both endpoints: %v", round, err)
		}
		for range n {
			if r := a.wait(t); r.c.Err == 0 {
				t.Fatalf("round %d: a send to a closed peer completed %+v", round, r.c)
			}
		}
	}
}

// TestRDMDomainAttrsAreRxm compares the FI_EP_RDM entries' domain
// attributes with those libfabric's tcp;ofi_rxm reports on this host
// (`fi_info -v -p 'tcp;ofi_rxm'`): rxm's, not the MSG entry's, except
// where fabricfs differs on purpose (see the map).
func TestRDMDomainAttrsAreRxm(t *testing.T) {
	out, err := exec.Command("fi_info", "-v", "-p", "tcp;ofi_rxm", "-d", "lo").Output()
	if err != nil {
		t.Skipf("fi_info (libfabric-bin) not usable: %v", err)
	}
	tp, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var rdm *fi.Info
	for _, in := range Wrap(tp).Infos() {
		if in.EPAttr.Type == fi.EP_RDM && in.DomainAttr.Name == "lo" {
			rdm = in
			break
		}
	}
	if rdm == nil {
		t.Fatal("no FI_EP_RDM entry on lo")
	}
	var b strings.Builder
	if err := fi.WriteInfos(&b, []*fi.Info{rdm}); err != nil {
		t.Fatal(err)
	}
	// On purpose: the daemon progresses RDM endpoints itself (AUTO is
	// true, and serves hints asking MANUAL); its CQs and endpoints are
	// the tree's, as are its counters (cntr_cnt as cq_cnt, where rxm says
	// 0); shared receive and transmit contexts and scalable endpoints'
	// contexts, which are core's, work on RDM endpoints; named AVs are
	// shared between processes (caps FI_SHARED_AV).
	differ := map[string]bool{"data_progress": true, "cq_cnt": true, "ep_cnt": true, "max_ep_srx_ctx": true,
		"max_ep_stx_ctx": true, "cntr_cnt": true, "caps": true, "tx_ctx_cnt": true, "rx_ctx_cnt": true,
		"max_ep_tx_ctx": true, "max_ep_rx_ctx": true}
	domain := func(text string) map[string]string {
		m := map[string]string{}
		in := false
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			switch {
			case l == "fi_domain_attr:":
				in = len(m) == 0 // the first entry's only
			case strings.HasSuffix(l, ":") && !strings.Contains(l, " "):
				in = false
			case in:
				k, v, _ := strings.Cut(l, ":")
				m[k] = strings.TrimSpace(v)
			}
		}
		return m
	}
	theirs, ours := domain(string(out)), domain(b.String())
	if len(theirs) == 0 {
		t.Fatalf("no fi_domain_attr in fi_info's output:\n%s", out)
	}
	for k, v := range theirs {
		if k == "domain" || k == "name" || differ[k] {
			continue
		}
		if ours[k] != v {
			t.Errorf("domain attribute %s: libfabric's rxm %q, ours %q", k, v, ours[k])
		}
	}
}

// TestMoreWaitsForFlush: on a connected peer, sends posted with FI_MORE
// (fi_msg(3): "the user has additional requests that will immediately be
// posted after the current call returns") wait for Flush, or for a send
// without it to the same peer, and then arrive in order.
func TestMoreWaitsForFlush(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	// Connect first: sends to a peer still connecting wait for the
	// connection, FI_MORE or not.
	r0 := b.recv(t, core.OpRecv, 64, 0, 0)
	a.waitFor(t, a.send(t, core.OpSend, b.addr, []byte("hello"), 0))
	b.waitFor(t, r0)

	const n = 8
	var recvs []*core.Op
	for range n + 3 {
		recvs = append(recvs, b.recv(t, core.OpRecv, 64, 0, 0))
	}
	sendMore := func(i int, flags fi.OpFlags) {
		s := a.op(core.OpSend, []byte(fmt.Sprintf("message %d", i)))
		s.Peer, s.Flags = b.addr, flags
		if err := a.ep.Post(s); err != nil {
			t.Fatal(err)
		}
	}
	check := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if c := a.wait(t).c; c.Err != 0 {
				t.Fatalf("send completion %+v", c)
			}
		}
		for i := from; i < to; i++ {
			wantRecv(t, recvs[i], b.waitFor(t, recvs[i]), []byte(fmt.Sprintf("message %d", i)), 0, a.addr)
		}
	}
	for i := range n {
		sendMore(i, fi.MORE)
	}
	a.none(t)
	a.ep.Flush()
	check(0, n)

	sendMore(n, fi.MORE)
	sendMore(n+1, fi.MORE)
	a.none(t)
	sendMore(n+2, 0)
	check(n, n+3)
}
