package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// events is an endpoint's core.EndpointEvents: one region of memory under
// key regionKey, and the peers' RMA reports.
type events struct {
	mu     sync.Mutex
	mem    []byte
	remote []core.Completion
}

const regionKey = 0x5eed

func (ev *events) Connected([]byte)     {}
func (ev *events) Shutdown()            {}
func (ev *events) Failed(error, []byte) {}
func (ev *events) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	if key != regionKey {
		return nil, nil, core.Errorf(fi.EACCES, "no region with key %#x", key)
	}
	if addr > uint64(len(ev.mem)) || n > uint64(len(ev.mem))-addr {
		return nil, nil, core.Errorf(fi.EINVAL, "[%d, +%d) is outside the region", addr, n)
	}
	return ev.mem[addr : addr+n], func() {}, nil
}
func (ev *events) Remote(c core.Completion) {
	ev.mu.Lock()
	ev.remote = append(ev.remote, c)
	ev.mu.Unlock()
}

// ep is a test endpoint with its events.
type ep struct {
	*endpoint
	ev *events
}

func newEP(t *testing.T, d core.ProviderDomain) ep {
	t.Helper()
	return newEPOf(t, d, info(), 1<<16)
}

// newEPOf is an enabled endpoint of in whose events have mem bytes of
// memory, closed in cleanup.
func newEPOf(t *testing.T, d core.ProviderDomain, in *fi.Info, mem int) ep {
	t.Helper()
	ev := &events{mem: make([]byte, mem)}
	e, err := d.NewEndpoint(in, nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Enable(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return ep{e.(*endpoint), ev}
}

func domainOf(t *testing.T) core.ProviderDomain {
	t.Helper()
	d, err := New().OpenDomain(DomainName)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// result records an operation's completions.
type result struct {
	mu sync.Mutex
	cs []core.Completion
}

func (r *result) get() []core.Completion {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Completion(nil), r.cs...)
}

// op makes an operation whose completions go to its result.
func op(kind core.OpKind, buf []byte) (*core.Op, *result) {
	r := &result{}
	o := &core.Op{Kind: kind, Buf: buf}
	o.OnComplete(func(_ *core.Op, c core.Completion) {
		r.mu.Lock()
		r.cs = append(r.cs, c)
		r.mu.Unlock()
	})
	return o, r
}

func post(t *testing.T, e ep, o *core.Op) {
	t.Helper()
	if err := e.Post(o); err != nil {
		t.Fatalf("post: %v", err)
	}
}

// one returns the single completion of r, failing if there is not exactly one.
func one(t *testing.T, what string, r *result) core.Completion {
	t.Helper()
	cs := r.get()
	if len(cs) != 1 {
		t.Fatalf("%s: %d completions %+v, want 1", what, len(cs), cs)
	}
	return cs[0]
}

func none(t *testing.T, what string, r *result) {
	t.Helper()
	if cs := r.get(); len(cs) != 0 {
		t.Fatalf("%s: completed %+v, want still pending", what, cs)
	}
}

// A send that finds a posted receive lands in its buffer, with the
// sender's address (FI_SOURCE), the tag and the remote CQ data; both
// complete.
func TestSendFindsReceive(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	rbuf := make([]byte, 16)
	recv, rr := op(core.OpTRecv, rbuf)
	recv.Tag = 7
	post(t, b, recv)
	send, sr := op(core.OpTSend, []byte("hello"))
	send.Peer, send.Tag, send.Data, send.Flags = b.name, 7, 0xdada, fi.OpFlags(fi.REMOTE_CQ_DATA)
	post(t, a, send)
	c := one(t, "receive", rr)
	want := core.Completion{Flags: fi.CQFlags(fi.TAGGED | fi.RECV | fi.REMOTE_CQ_DATA), Len: 5, Data: 0xdada, Tag: 7, Src: a.name}
	if c != want || string(rbuf[:5]) != "hello" {
		t.Errorf("receive: %+v %q, want %+v \"hello\"", c, rbuf[:5], want)
	}
	if c := one(t, "send", sr); c.Err != 0 || c.Flags != fi.CQFlags(fi.TAGGED|fi.SEND) {
		t.Errorf("send: %+v", c)
	}
}

// fi_tagged(3): "The tag is compared against the tag of the received
// message, with ignore bits masked out." A message takes the first posted
// receive it matches; untagged receives never take tagged messages.
func TestTagMatching(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	untagged, ur := op(core.OpRecv, make([]byte, 8))
	post(t, b, untagged)
	other, or := op(core.OpTRecv, make([]byte, 8))
	other.Tag = 0x100
	post(t, b, other)
	masked, mr := op(core.OpTRecv, make([]byte, 8))
	masked.Tag, masked.Ignore = 0x200, 0xff
	post(t, b, masked)
	send, _ := op(core.OpTSend, []byte("x"))
	send.Peer, send.Tag = b.name, 0x2a5
	post(t, a, send)
	if c := one(t, "masked receive", mr); c.Tag != 0x2a5 || c.Err != 0 {
		t.Errorf("masked receive: %+v", c)
	}
	none(t, "untagged receive", ur)
	none(t, "receive of tag 0x100", or)
}

// An unexpected message: a short one is copied aside and its send
// completes at once; a long one (above EagerLimit) stays at the sender
// until a receive takes it, then both complete, in arrival order.
func TestUnexpected(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	short, shr := op(core.OpSend, []byte("short"))
	short.Peer = b.name
	post(t, a, short)
	one(t, "short send", shr)
	long := bytes.Repeat([]byte{0xab}, EagerLimit+1)
	big, br := op(core.OpSend, long)
	big.Peer = b.name
	post(t, a, big)
	none(t, "long send before a receive", br)

	r1, rr1 := op(core.OpRecv, make([]byte, 64))
	post(t, b, r1)
	if c := one(t, "first receive", rr1); c.Len != 5 || string(r1.Buf[:5]) != "short" {
		t.Errorf("first receive: %+v %q, want the short message", c, r1.Buf[:5])
	}
	none(t, "long send after the short one's receive", br)
	r2, rr2 := op(core.OpRecv, nil) // a receive without a buffer gets one of the message's size
	post(t, b, r2)
	if c := one(t, "second receive", rr2); c.Len != uint64(len(long)) || !bytes.Equal(r2.Buf, long) {
		t.Errorf("second receive: %+v, %d bytes", c, len(r2.Buf))
	}
	if c := one(t, "long send", br); c.Err != 0 {
		t.Errorf("long send: %+v", c)
	}
}

// fi_msg(3), FI_DIRECTED_RECV: a receive naming a source takes only that
// source's messages.
func TestDirectedRecv(t *testing.T) {
	d := domainOf(t)
	a, b, c := newEP(t, d), newEP(t, d), newEP(t, d)
	fromC, fr := op(core.OpRecv, make([]byte, 8))
	fromC.Peer = c.name
	post(t, b, fromC)
	send, _ := op(core.OpSend, []byte("a"))
	send.Peer = b.name
	post(t, a, send)
	none(t, "receive from c after a's send", fr)
	send2, _ := op(core.OpSend, []byte("c"))
	send2.Peer = b.name
	post(t, c, send2)
	if got := one(t, "receive from c", fr); got.Src != c.name || fromC.Buf[0] != 'c' {
		t.Errorf("receive from c: %+v %q", got, fromC.Buf[:1])
	}
	any, ar := op(core.OpRecv, make([]byte, 8))
	post(t, b, any)
	if got := one(t, "any receive", ar); got.Src != a.name {
		t.Errorf("any receive: %+v, want a's message", got)
	}
}

// fi_cq(3): FI_ETRUNC, "Truncation error: the message was longer than
// the posted buffer"; olen is the bytes that did not fit.
func TestTruncation(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	recv, rr := op(core.OpRecv, make([]byte, 3))
	post(t, b, recv)
	send, sr := op(core.OpSend, []byte("abcdefg"))
	send.Peer = b.name
	post(t, a, send)
	if c := one(t, "receive", rr); c.Err != fi.ETRUNC || c.Len != 3 || c.OLen != 4 || string(recv.Buf) != "abc" {
		t.Errorf("receive: %+v %q, want FI_ETRUNC, 3 placed, olen 4", c, recv.Buf)
	}
	if c := one(t, "send", sr); c.Err != 0 {
		t.Errorf("send: %+v", c)
	}
}

// fi_endpoint(3), fi_cancel: "Cancel removes a posted operation";
// it completes with FI_ECANCELED.
func TestCancel(t *testing.T) {
	d := domainOf(t)
	b := newEP(t, d)
	recv, rr := op(core.OpRecv, make([]byte, 8))
	post(t, b, recv)
	if !b.Cancel(recv) {
		t.Fatal("Cancel of a posted receive returned false")
	}
	if c := one(t, "cancelled receive", rr); c.Err != fi.ECANCELED {
		t.Errorf("cancelled receive: %+v", c)
	}
	if b.Cancel(recv) {
		t.Error("Cancel of a completed receive returned true")
	}
}

// A send to a name no enabled endpoint has completes with FI_EHOSTUNREACH.
func TestUnknownPeer(t *testing.T) {
	d := domainOf(t)
	a := newEP(t, d)
	for _, kind := range []core.OpKind{core.OpSend, core.OpWrite} {
		o, r := op(kind, []byte("x"))
		o.Peer = fi.Addr{Format: fi.ADDR_STR, Str: fi.ShmScheme + "nobody"}
		post(t, a, o)
		if c := one(t, fmt.Sprint("kind ", kind), r); c.Err != fi.EHOSTUNREACH {
			t.Errorf("kind %d: %+v, want FI_EHOSTUNREACH", kind, c)
		}
	}
}

// Close completes the receives with FI_ECANCELED, the sends held at the
// endpoint with FI_EHOSTUNREACH, and its own sends held elsewhere with
// FI_ECANCELED, before it returns; later sends to it are unreachable.
func TestClose(t *testing.T) {
	d := domainOf(t)
	a, b, c := newEP(t, d), newEP(t, d), newEP(t, d)
	long := make([]byte, EagerLimit+1)
	toB, tbr := op(core.OpSend, long)
	toB.Peer = b.name
	post(t, a, toB)
	toC, tcr := op(core.OpSend, long)
	toC.Peer = c.name
	post(t, a, toC)
	recv, rr := op(core.OpRecv, make([]byte, 8))
	post(t, b, recv)
	// b's receive took a's held send.
	one(t, "b's receive", rr)
	one(t, "a's send to b", tbr)

	recv2, rr2 := op(core.OpRecv, make([]byte, 8))
	post(t, b, recv2)
	held, hr := op(core.OpSend, long)
	held.Peer = c.name
	post(t, b, held)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := one(t, "a's send held at c", tcr); got.Err != fi.EHOSTUNREACH {
		t.Errorf("a's send held at c: %+v", got)
	}
	if got := one(t, "b's send held at c", hr); got.Err != fi.EHOSTUNREACH {
		t.Errorf("b's send held at c: %+v", got)
	}
	late, lr := op(core.OpSend, []byte("x"))
	late.Peer = c.name
	post(t, a, late)
	if got := one(t, "send after close", lr); got.Err != fi.EHOSTUNREACH {
		t.Errorf("send after close: %+v", got)
	}

	// b's own held send at a is withdrawn when b closes.
	mine, mr := op(core.OpSend, long)
	mine.Peer = a.name
	post(t, b, mine)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := one(t, "b's receive at close", rr2); got.Err != fi.ECANCELED {
		t.Errorf("b's receive at close: %+v", got)
	}
	if got := one(t, "b's send held at a", mr); got.Err != fi.ECANCELED {
		t.Errorf("b's send held at a: %+v", got)
	}
	if n := len(a.unexp[0]); n != 0 {
		t.Errorf("a keeps %d messages of the closed b", n)
	}
	if err := b.Post(recv2); fi.Errno(core.Code(err)) != fi.EOPBADSTATE {
		t.Errorf("post after close: %v, want FI_EOPBADSTATE", err)
	}
}

// RMA: a write and a read reach the target's region as its events resolve
// it, and are reported there (FI_RMA_EVENT), the write with its CQ data; a
// key the target does not have fails the operation with the target's
// error, and no byte moves.
func TestRMA(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	w, wr := op(core.OpWrite, []byte("written"))
	w.Peer, w.Key, w.Addr, w.Data, w.Flags = b.name, regionKey, 100, 9, fi.OpFlags(fi.REMOTE_CQ_DATA)
	post(t, a, w)
	if c := one(t, "write", wr); c.Err != 0 || string(b.ev.mem[100:107]) != "written" {
		t.Errorf("write: %+v, region %q", c, b.ev.mem[100:107])
	}
	copy(b.ev.mem[200:], "readme")
	rd, rr := op(core.OpRead, make([]byte, 6))
	rd.Peer, rd.Key, rd.Addr = b.name, regionKey, 200
	post(t, a, rd)
	if c := one(t, "read", rr); c.Err != 0 || string(rd.Buf) != "readme" {
		t.Errorf("read: %+v %q", c, rd.Buf)
	}
	want := []core.Completion{
		{Flags: fi.CQFlags(fi.RMA | fi.REMOTE_WRITE | fi.REMOTE_CQ_DATA), Len: 7, Data: 9, Key: regionKey},
		{Flags: fi.CQFlags(fi.RMA | fi.REMOTE_READ), Len: 6, Key: regionKey},
	}
	if fmt.Sprint(b.ev.remote) != fmt.Sprint(want) {
		t.Errorf("target's reports %+v, want %+v", b.ev.remote, want)
	}
	bad, br := op(core.OpWrite, []byte("no"))
	bad.Peer, bad.Key, bad.Addr = b.name, regionKey+1, 0
	post(t, a, bad)
	if c := one(t, "write with a bad key", br); c.Err != fi.EACCES || b.ev.mem[0] != 0 {
		t.Errorf("write with a bad key: %+v", c)
	}
	out, or := op(core.OpRead, make([]byte, 8))
	out.Peer, out.Key, out.Addr = b.name, regionKey, uint64(len(b.ev.mem))-4
	post(t, a, out)
	if c := one(t, "read past the region", or); c.Err != fi.EINVAL {
		t.Errorf("read past the region: %+v", c)
	}
}

// fi_tagged(3), FI_PEEK: "The peek operation ... will search the
// unexpected message queue for a message that matches the tag"; without
// one it completes with FI_ENOMSG; FI_DISCARD drops the message found.
func TestPeek(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	peek := func(flags fi.OpFlags) core.Completion {
		o, r := op(core.OpTRecv, nil)
		o.Tag, o.Flags = 5, flags
		post(t, b, o)
		return one(t, "peek", r)
	}
	if c := peek(fi.PEEK); c.Err != fi.ENOMSG {
		t.Errorf("peek of nothing: %+v", c)
	}
	send, _ := op(core.OpTSend, []byte("tagged"))
	send.Peer, send.Tag = b.name, 5
	post(t, a, send)
	if c := peek(fi.PEEK); c.Err != 0 || c.Len != 6 || c.Tag != 5 {
		t.Errorf("peek: %+v", c)
	}
	if c := peek(fi.PEEK | fi.DISCARD); c.Err != 0 || c.Len != 6 {
		t.Errorf("peek and discard: %+v", c)
	}
	if c := peek(fi.PEEK); c.Err != fi.ENOMSG {
		t.Errorf("peek after discard: %+v", c)
	}
}

// Limits: unexpected bytes stop at UnexpectedLimit (an injected send over
// it is refused with FI_EAGAIN, to be posted again; others wait at the
// sender), posted receives at rx_size.
func TestLimits(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	msg := make([]byte, EagerLimit)
	for i := 0; i < UnexpectedLimit/EagerLimit; i++ {
		s, r := op(core.OpSend, msg)
		s.Peer = b.name
		post(t, a, s)
		one(t, "eager send", r)
	}
	inj, _ := op(core.OpSend, []byte("x"))
	inj.Peer, inj.Flags = b.name, fi.INJECT
	if err := a.Post(inj); core.Code(err) != fi.EAGAIN {
		t.Errorf("inject over the unexpected limit: %v, want FI_EAGAIN", err)
	}
	// fi_msg(3) FI_INJECT: "This flag can only be used with messages
	// smaller than inject_size."; a read brings data back, so it cannot
	// be injected.
	big, _ := op(core.OpSend, make([]byte, InjectSize+1))
	big.Peer, big.Flags = b.name, fi.INJECT
	if err := a.Post(big); core.Code(err) != fi.EINVAL {
		t.Errorf("inject of inject_size+1 bytes: %v, want FI_EINVAL", err)
	}
	rd, _ := op(core.OpRead, make([]byte, 8))
	rd.Peer, rd.Key, rd.Flags = b.name, regionKey, fi.INJECT
	if err := a.Post(rd); core.Code(err) != fi.EINVAL {
		t.Errorf("injected read: %v, want FI_EINVAL", err)
	}
	over, or := op(core.OpSend, []byte("x"))
	over.Peer = b.name
	post(t, a, over)
	none(t, "send over the unexpected limit", or)

	c := newEP(t, d)
	for i := 0; i < DefaultRxSize; i++ {
		r, _ := op(core.OpRecv, make([]byte, 1))
		post(t, c, r)
	}
	r, _ := op(core.OpRecv, make([]byte, 1))
	if err := c.Post(r); core.Code(err) != fi.EAGAIN {
		t.Errorf("receive beyond rx_size: %v, want FI_EAGAIN", err)
	}
}

// Many senders at once: every message reaches exactly one receive, whole,
// and every operation completes once (run with -race).
func TestConcurrent(t *testing.T) {
	d := domainOf(t)
	b := newEP(t, d)
	const senders, each = 4, 200
	var got sync.Map
	var wg sync.WaitGroup
	recvs := make([]*result, 0, senders*each)
	for i := 0; i < senders*each/2; i++ { // half posted before, half after
		r, rr := op(core.OpRecv, make([]byte, EagerLimit+8))
		post(t, b, r)
		recvs = append(recvs, rr)
	}
	sends := make([]*result, 0, senders*each)
	var mu sync.Mutex
	for s := 0; s < senders; s++ {
		a := newEP(t, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				n := 8
				if i%7 == 0 {
					n = EagerLimit + 8 // held at b until a receive takes it
				}
				buf := make([]byte, n)
				copy(buf, fmt.Sprintf("%d.%d", s, i))
				o, r := op(core.OpSend, buf)
				o.Peer = b.name
				if err := a.Post(o); err != nil {
					t.Error(err)
				}
				mu.Lock()
				sends = append(sends, r)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < senders*each/2; i++ {
		r, rr := op(core.OpRecv, make([]byte, EagerLimit+8))
		o := r
		r.OnComplete(func(_ *core.Op, c core.Completion) {
			key := string(bytes.TrimRight(o.Buf[:8], "\x00"))
			if _, dup := got.LoadOrStore(key, true); dup {
				t.Errorf("message %s received twice", key)
			}
			rr.mu.Lock()
			rr.cs = append(rr.cs, c)
			rr.mu.Unlock()
		})
		post(t, b, r)
		recvs = append(recvs, rr)
	}
	wg.Wait()
	for i, r := range recvs {
		if n := len(r.get()); n != 1 {
			t.Errorf("receive %d: %d completions", i, n)
		}
	}
	for i, r := range sends {
		if n := len(r.get()); n != 1 {
			t.Errorf("send %d: %d completions", i, n)
		}
	}
}

// An endpoint whose src_addr is a name takes it (fi_getinfo(3): src_addr
// "corresponds to the indicated fabric, domain, node, and/or service
// fields"; with FI_SOURCE, fi_ns://NODE:SERVICE): a send to that name
// reaches it; a second endpoint of that name is refused at enable with
// FI_EADDRINUSE until the first is closed. The entry's stem leaves the
// naming to the tree, whose names no application may take.
func TestNames(t *testing.T) {
	d := domainOf(t)
	named := func(src string) (*endpoint, *events, error) {
		in, ev := info(), &events{mem: make([]byte, 64)}
		in.SrcAddr = &fi.Addr{Format: fi.ADDR_STR, Str: src}
		e, err := d.NewEndpoint(in, nil, ev)
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(func() { e.Close() })
		return e.(*endpoint), ev, nil
	}
	const ns = "fi_ns://127.0.0.1:9228"
	srv, _, err := named(ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Enable(); err != nil {
		t.Fatal(err)
	}
	if a, _ := srv.Name(); a.Str != ns {
		t.Errorf("name %q, want %q", a.Str, ns)
	}
	// The client inserts the name fi_getinfo gave it as dest_addr.
	a := newEP(t, d)
	peer, err := fi.ParseAddr(ns)
	if err != nil {
		t.Fatal(err)
	}
	rbuf := make([]byte, 8)
	recv, rr := op(core.OpRecv, rbuf)
	if err := srv.Post(recv); err != nil {
		t.Fatal(err)
	}
	send, sr := op(core.OpSend, []byte("ping"))
	send.Peer = peer
	post(t, a, send)
	if c := one(t, "receive", rr); c.Err != 0 || string(rbuf[:c.Len]) != "ping" || c.Src != a.name {
		t.Errorf("receive at %s: %+v %q", ns, c, rbuf)
	}
	if c := one(t, "send", sr); c.Err != 0 {
		t.Errorf("send to %s: %+v", ns, c)
	}

	twin, _, err := named(ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := twin.Enable(); core.Code(err) != fi.EADDRINUSE {
		t.Fatalf("second endpoint named %s: enable gave %v, want FI_EADDRINUSE", ns, err)
	}
	srv.Close()
	if err := twin.Enable(); err != nil {
		t.Fatalf("enable once the name is free: %v", err)
	}

	mine, _, err := named("fi_shm://mine")
	if err != nil || mine.name.Str != "fi_shm://mine" {
		t.Errorf("fi_shm://mine: %v, %v", mine, err)
	}
	tree, _, err := named(stem)
	if err != nil || !strings.HasPrefix(tree.name.Str, stem+".") {
		t.Errorf("the stem %s: %v, %v; want a name %s.N", stem, tree, err, stem)
	}
	if _, _, err := named(stem + ".99"); core.Code(err) != fi.EADDRNOTAVAIL {
		t.Errorf("a tree's name as src_addr: %v, want FI_EADDRNOTAVAIL", err)
	}
}

// Atomics are applied to the target's region by core/atomic and reported
// there: fi_atomic(3), "The results of the atomic operation are written
// into the target buffer"; a fetching one returns "the initial value of
// the target buffer"; a compare writes only where the compare holds. A
// bad key fails the operation and changes nothing.
func TestAtomics(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	le := func(vs ...uint64) []byte {
		out := make([]byte, 8*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint64(out[8*i:], v)
		}
		return out
	}
	copy(b.ev.mem[64:], le(10, 20))
	at := func(kind core.OpKind, aop fi.AtomicOp, operand, compare []byte, result int) (*core.Op, core.Completion) {
		t.Helper()
		o, r := op(kind, operand)
		o.Peer, o.Key, o.Addr, o.Datatype, o.AtomicOp, o.Compare = b.name, regionKey, 64, fi.UINT64, aop, compare
		if result > 0 {
			o.Result = make([]byte, result)
		}
		post(t, a, o)
		return o, one(t, "atomic", r)
	}
	if _, c := at(core.OpAtomic, fi.SUM, le(1, 2), nil, 0); c.Err != 0 || !bytes.Equal(b.ev.mem[64:80], le(11, 22)) {
		t.Errorf("FI_SUM: %+v, target %v", c, b.ev.mem[64:80])
	}
	o, c := at(core.OpFetchAtomic, fi.ATOMIC_READ, nil, nil, 16)
	if c.Err != 0 || !bytes.Equal(o.Result, le(11, 22)) {
		t.Errorf("FI_ATOMIC_READ: %+v, result %v", c, o.Result)
	}
	o, c = at(core.OpCompareAtomic, fi.CSWAP, le(7, 8), le(11, 0), 16)
	if c.Err != 0 || !bytes.Equal(o.Result, le(11, 22)) || !bytes.Equal(b.ev.mem[64:80], le(7, 22)) {
		t.Errorf("FI_CSWAP: %+v, result %v, target %v", c, o.Result, b.ev.mem[64:80])
	}
	want := []core.Completion{
		{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_WRITE), Len: 16, Key: regionKey},
		{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ), Len: 16, Key: regionKey},
		{Flags: fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ), Len: 16, Key: regionKey},
	}
	if fmt.Sprint(b.ev.remote) != fmt.Sprint(want) {
		t.Errorf("target's reports %+v, want %+v", b.ev.remote, want)
	}
	bad, br := op(core.OpAtomic, le(1))
	bad.Peer, bad.Key, bad.Addr, bad.Datatype, bad.AtomicOp = b.name, regionKey+1, 64, fi.UINT64, fi.SUM
	post(t, a, bad)
	if c := one(t, "atomic with a bad key", br); c.Err != fi.EACCES || !bytes.Equal(b.ev.mem[64:72], le(7)) {
		t.Errorf("atomic with a bad key: %+v", c)
	}

	// fi_query_atomic: libfabric's shm's counts, none for 128-bit types.
	q := d.(core.Atomics)
	if n, s, err := q.QueryAtomic(fi.EP_RDM, core.OpAtomic, fi.UINT64, fi.SUM); err != nil || n != AtomicSize/8 || s != 8 {
		t.Errorf("query FI_SUM FI_UINT64: %d %d %v", n, s, err)
	}
	if n, _, err := q.QueryAtomic(fi.EP_RDM, core.OpCompareAtomic, fi.UINT32, fi.CSWAP); err != nil || n != AtomicSize/2/4 {
		t.Errorf("query FI_CSWAP FI_UINT32: %d %v", n, err)
	}
	if _, _, err := q.QueryAtomic(fi.EP_RDM, core.OpAtomic, fi.UINT128, fi.SUM); core.Code(err) != fi.EOPNOTSUPP {
		t.Errorf("query FI_UINT128: %v, want FI_EOPNOTSUPP", err)
	}
}

// FI_MULTI_RECV (fi_msg(3): "the buffer will be used to receive multiple
// incoming messages"; it is released "when the available buffer space
// falls below the specified minimum (see FI_OPT_MIN_MULTI_RECV)"):
// messages fill the buffer one after the other, each completing with its
// place; the message after which fewer than min_multi_recv bytes would
// be left takes the rest and releases the buffer (FI_MULTI_RECV). Posted
// while messages wait, it takes them at once.
func TestMultiRecv(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	if err := b.SetOpt("min_multi_recv", 8); err != nil {
		t.Fatal(err)
	}
	send := func(s string) {
		t.Helper()
		o, r := op(core.OpSend, []byte(s))
		o.Peer = b.name
		post(t, a, o)
		if c := one(t, "send "+s, r); c.Err != 0 {
			t.Fatalf("send %q: %+v", s, c)
		}
	}
	buf := make([]byte, 20)
	mr, rr := op(core.OpRecv, buf)
	mr.Flags = fi.OpFlags(fi.MULTI_RECV)
	post(t, b, mr)
	send("aaaa")
	send("bbbbbb")
	send("cccccccc") // 8 bytes would leave 2 < 8: takes the rest and releases
	cs := rr.get()
	recv := fi.CQFlags(fi.MSG | fi.RECV)
	want := []core.Completion{
		{Flags: recv, Len: 4, Offset: 0, Src: a.name},
		{Flags: recv, Len: 6, Offset: 4, Src: a.name},
		{Flags: recv | fi.CQFlags(fi.MULTI_RECV), Len: 8, Offset: 10, Src: a.name},
	}
	if fmt.Sprint(cs) != fmt.Sprint(want) || string(buf[:18]) != "aaaabbbbbbcccccccc" {
		t.Errorf("completions %+v, buffer %q; want %+v", cs, buf, want)
	}

	// Posted after two messages: it takes both, and with 20-9 = 11 left
	// it stays; a third of 6 bytes leaves 5 < 8 and releases it.
	send("ddddd")
	send("eeee")
	buf2 := make([]byte, 20)
	mr2, rr2 := op(core.OpRecv, buf2)
	mr2.Flags = fi.OpFlags(fi.MULTI_RECV)
	post(t, b, mr2)
	if cs := rr2.get(); len(cs) != 2 || cs[1].Offset != 5 || cs[1].Len != 4 || cs[1].Flags&fi.CQFlags(fi.MULTI_RECV) != 0 {
		t.Fatalf("posted after two messages: %+v", cs)
	}
	send("ffffff")
	cs = rr2.get()
	if len(cs) != 3 || cs[2].Flags&fi.CQFlags(fi.MULTI_RECV) == 0 || cs[2].Offset != 9 || string(buf2[:15]) != "dddddeeeeffffff" {
		t.Errorf("posted after two messages, then one: %+v %q", cs, buf2)
	}

	// Cancelled, it releases its buffer.
	mr3, rr3 := op(core.OpRecv, make([]byte, 64))
	mr3.Flags = fi.OpFlags(fi.MULTI_RECV)
	post(t, b, mr3)
	if !b.Cancel(mr3) {
		t.Fatal("cancel of a posted multi-receive")
	}
	if c := one(t, "cancelled multi-receive", rr3); c.Err != fi.ECANCELED || c.Flags&fi.CQFlags(fi.MULTI_RECV) == 0 {
		t.Errorf("cancelled multi-receive: %+v, want FI_ECANCELED with FI_MULTI_RECV", c)
	}
	tagged, _ := op(core.OpTRecv, make([]byte, 64))
	tagged.Flags = fi.OpFlags(fi.MULTI_RECV)
	if err := b.Post(tagged); core.Code(err) != fi.EOPNOTSUPP {
		t.Errorf("tagged multi-receive: %v, want FI_EOPNOTSUPP", err)
	}
}

// Many senders fill one multi-receive at once: every byte of the buffer
// is given once, and the release is the last completion (run with -race).
func TestMultiRecvConcurrent(t *testing.T) {
	d := domainOf(t)
	b := newEP(t, d)
	const senders, each, size = 4, 50, 16
	buf := make([]byte, senders*each*size)
	mr, rr := op(core.OpRecv, buf)
	mr.Flags = fi.OpFlags(fi.MULTI_RECV)
	if err := b.SetOpt("min_multi_recv", size); err != nil {
		t.Fatal(err)
	}
	post(t, b, mr)
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		a := newEP(t, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				o, _ := op(core.OpSend, bytes.Repeat([]byte{byte('a' + s)}, size))
				o.Peer = b.name
				if err := a.Post(o); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cs := rr.get()
	if len(cs) != senders*each {
		t.Fatalf("%d completions, want %d", len(cs), senders*each)
	}
	seen := map[uint64]bool{}
	for i, c := range cs {
		last := c.Flags&fi.CQFlags(fi.MULTI_RECV) != 0
		if last != (i == len(cs)-1) || c.Len != size || c.Offset%size != 0 || seen[c.Offset] {
			t.Fatalf("completion %d: %+v", i, c)
		}
		seen[c.Offset] = true
		if p := buf[c.Offset : c.Offset+size]; !bytes.Equal(p, bytes.Repeat(p[:1], size)) {
			t.Fatalf("message at %d mixed: %q", c.Offset, p)
		}
	}
}

// fi_endpoint(3) auth_key: "Only peer endpoints that are programmed to use
// the same authorization key may communicate": a send, write or atomic to
// an endpoint with another key fails with FI_ECONNREFUSED, as an FI_EP_RDM
// peer over tcp refuses the connection; the same key talks.
func TestAuthKey(t *testing.T) {
	d := domainOf(t)
	keyed := func(key string) ep {
		in := info()
		in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = []byte(key), uint64(len(key))
		return newEPOf(t, d, in, 64)
	}
	a, b, c := keyed("job-1"), keyed("job-1"), keyed("job-2")
	for _, kind := range []core.OpKind{core.OpSend, core.OpWrite, core.OpAtomic} {
		o, r := op(kind, make([]byte, 8))
		o.Peer, o.Key, o.Datatype, o.AtomicOp = c.name, regionKey, fi.UINT64, fi.SUM
		post(t, a, o)
		if got := one(t, "to another key", r); got.Err != fi.ECONNREFUSED {
			t.Errorf("operation %d to an endpoint with another key: %+v, want FI_ECONNREFUSED", kind, got)
		}
	}
	recv, rr := op(core.OpRecv, make([]byte, 8))
	post(t, b, recv)
	send, _ := op(core.OpSend, []byte("same"))
	send.Peer = b.name
	post(t, a, send)
	if got := one(t, "same key", rr); got.Err != 0 || got.Len != 4 {
		t.Errorf("receive from the same key: %+v", got)
	}
}

// FI_OPT_MIN_MULTI_RECV is the one endpoint option (fi_endpoint(3):
// "Defines the minimum receive buffer space available when the receive
// buffer is released by the provider"), 4096 until set as libfabric's
// shm; there is no FI_OPT_CM_DATA_SIZE, as there are no connections, and
// a passive endpoint has none.
func TestShmEndpointOptions(t *testing.T) {
	o := domainOf(t).(core.EndpointOptions)
	got := o.EndpointOptions(fi.EP_RDM, false)
	if len(got) != 1 || got[0].Name != "min_multi_recv" || got[0].Value != 4096 {
		t.Errorf("FI_EP_RDM options %+v, want min_multi_recv 4096 alone", got)
	}
	if got := o.EndpointOptions(fi.EP_RDM, true); len(got) != 0 {
		t.Errorf("passive endpoint options %+v, want none", got)
	}
}

// fi_tagged(3) FI_CLAIM: with FI_PEEK, "the message is claimed by
// caller. Claimed messages can only be retrieved using a subsequent,
// paired receive operation with the FI_CLAIM flag set."; a claimed
// message is no longer unexpected (a peek does not find it), it is taken
// once and by its key only, and FI_CLAIM with FI_DISCARD drops it. A long send waiting at its target completes when claimed.
func TestClaim(t *testing.T) {
	d := domainOf(t)
	a, b := newEP(t, d), newEP(t, d)
	recv := func(flags fi.OpFlags, key uint64, buf []byte) core.Completion {
		t.Helper()
		o, r := op(core.OpTRecv, buf)
		o.Tag, o.Flags, o.Key = 5, flags, key
		post(t, b, o)
		return one(t, "receive", r)
	}
	long := bytes.Repeat([]byte("L"), EagerLimit+1) // waits at b, unexpected
	send, sr := op(core.OpTSend, long)
	send.Peer, send.Tag = b.name, 5
	post(t, a, send)
	none(t, "long unexpected send", sr)
	if c := recv(fi.PEEK|fi.CLAIM, 1, nil); c.Err != 0 || c.Len != uint64(len(long)) || c.Tag != 5 {
		t.Fatalf("peek and claim: %+v", c)
	}
	if c := one(t, "claimed send", sr); c.Err != 0 {
		t.Errorf("the claimed send completes: %+v", c)
	}
	if c := recv(fi.PEEK, 0, nil); c.Err != fi.ENOMSG {
		t.Errorf("peek after the claim: %+v, want FI_ENOMSG", c)
	}
	buf := make([]byte, len(long))
	if c := recv(fi.CLAIM, 2, buf); c.Err != fi.ENOMSG {
		t.Errorf("claim under another key: %+v, want FI_ENOMSG", c)
	}
	c := recv(fi.CLAIM, 1, buf)
	if c.Err != 0 || c.Len != uint64(len(long)) || c.Flags&fi.CQFlags(fi.CLAIM) == 0 || !bytes.Equal(buf, long) {
		t.Errorf("claim: %+v, want the message with FI_CLAIM", c)
	}
	if c := recv(fi.CLAIM, 1, buf); c.Err != fi.ENOMSG {
		t.Errorf("second claim: %+v, want FI_ENOMSG", c)
	}

	short, _ := op(core.OpTSend, []byte("short"))
	short.Peer, short.Tag = b.name, 5
	post(t, a, short)
	if c := recv(fi.PEEK|fi.CLAIM, 3, nil); c.Err != 0 {
		t.Fatalf("peek and claim: %+v", c)
	}
	if c := recv(fi.CLAIM|fi.DISCARD, 3, nil); c.Err != 0 || c.Len != 0 {
		t.Errorf("claim and discard: %+v, want no bytes", c)
	}
	if c := recv(fi.CLAIM, 3, buf); c.Err != fi.ENOMSG {
		t.Errorf("claim after discard: %+v, want FI_ENOMSG", c)
	}
}
