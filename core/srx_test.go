package core_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// sharedPair is the setup of the shared receive context tests: n
// connections from client endpoints a[i] to server endpoints b[i] of
// domain d, every b[i] bound to shared receive context "s" and to a receive
// CQ of its own, cqs[i] ("c0", "c1", ...); the clients send through the data
// file. rx is the context's ring as a client sees it, over registered
// region mr (4 KiB), whose bytes are mem.
type sharedPair struct {
	a, b []*core.Object
	cqs  []*core.CQ
	srx  *core.Object
	rx   *ring.Ring
	mr   *core.Object
	mem  []byte
}

func newSharedPair(t *testing.T, d *core.Domain, n int) *sharedPair {
	t.Helper()
	eq := create(t, d, core.KindEQ, "e").Impl.(*core.EQ)
	create(t, d, core.KindCQ, "tx")
	p := &sharedPair{srx: create(t, d, core.KindSRX, "s")}
	pep := create(t, d, core.KindPEP, "l")
	run(t, pep, "bind eq e")
	run(t, pep, "listen 127.0.0.1:0")
	addr, err := pep.Impl.(*core.PEP).Name()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		c := create(t, d, core.KindCQ, "c"+string(rune('0'+i)))
		p.cqs = append(p.cqs, c.Impl.(*core.CQ))
		a := create(t, d, core.KindEP, "a"+string(rune('0'+i)))
		for _, cmd := range []string{"bind eq e", "bind cq tx send,recv", "enable", "connect " + addr.String()} {
			run(t, a, cmd)
		}
		b, err := pep.Impl.(*core.PEP).Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"bind eq e", "bind cq tx send", "bind cq " + c.ID + " recv", "bind srx s", "enable", "accept"} {
			run(t, b, cmd)
		}
		p.a, p.b = append(p.a, a), append(p.b, b)
	}
	events(t, eq, 3*n) // connreq, and connected on both sides
	p.mr = create(t, d, core.KindMR, "m")
	setAttr(t, p.mr, "len", "4096")
	run(t, p.mr, "reg")
	reg, err := p.mr.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	p.mem = reg.Mem
	rreg, err := p.srx.Impl.(*core.SRX).Ring()
	if err != nil {
		t.Fatal(err)
	}
	if p.rx, err = ring.Open(rreg.Mem); err != nil {
		t.Fatal(err)
	}
	return p
}

// post publishes a receive of 64 bytes at off of the region on the
// context's ring.
func (p *sharedPair) post(t *testing.T, context, off uint64) {
	t.Helper()
	slot, ok := p.rx.Reserve()
	if !ok {
		t.Fatal("srx ring full")
	}
	(&ring.WR{Op: ring.OpRecv, Flags: uint64(fi.COMPLETION), Context: context, Desc: p.mr.Serial, Offset: off,
		Len: 64, Addr: fi.ADDR_UNSPEC}).Encode(slot)
	p.rx.Publish(1)
}

// await waits until the context's status line has want.
func (p *sharedPair) await(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.srx.Status().String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("status %q, want %q", p.srx.Status().String(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// send sends msg from client i.
func (p *sharedPair) send(t *testing.T, i int, msg string) {
	t.Helper()
	if err := p.a[i].Impl.(*core.EP).WriteData(context.Background(), []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// next waits for the next completion on cq.
func next(t *testing.T, cq *core.CQ) core.CQEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	es, err := cq.Read(ctx, 1, true)
	if err != nil || len(es) != 1 {
		t.Fatalf("cq read: %v, %v", es, err)
	}
	return es[0]
}

// pending takes the completions cq holds and counts them.
func pending(cq *core.CQ) int {
	es, _ := cq.Read(context.Background(), 100, false)
	return len(es)
}

func setAttr(t *testing.T, o *core.Object, name, v string) {
	t.Helper()
	for _, a := range o.Attrs() {
		if a.Name == name {
			if err := a.Set(v); err != nil {
				t.Fatalf("%s attr/%s = %s: %v", o, name, v, err)
			}
			return
		}
	}
	t.Fatalf("%s has no attr/%s", o, name)
}

// TestSharedReceiveContext: fi_endpoint(3), "Users post receive buffers
// directly to a shared receive context, with the buffers usable by any
// endpoint bound to the shared receive context. [...] Completed receive
// operations are posted to the CQs bound to the endpoint."
func TestSharedReceiveContext(t *testing.T) {
	d := lo(t)
	p := newSharedPair(t, d, 2)
	// Two receives posted once, on the context; a message to the second
	// endpoint takes the first, a message to the first the second.
	p.post(t, 11, 0)
	p.post(t, 12, 512)
	p.send(t, 1, "to b1")
	c := next(t, p.cqs[1])
	if c.Context != 11 || c.Err != 0 || c.Len != 5 || c.Buf != 0 || c.Flags != fi.CQFlags(fi.MSG|fi.RECV) {
		t.Errorf("b1's completion %+v, want context 11, 5 bytes at 0", c)
	}
	if got := string(p.mem[:5]); got != "to b1" {
		t.Errorf("receive 11 holds %q", got)
	}
	p.send(t, 0, "to b0")
	c = next(t, p.cqs[0])
	if c.Context != 12 || c.Err != 0 || c.Len != 5 || c.Buf != 512 {
		t.Errorf("b0's completion %+v, want context 12, 5 bytes at 512", c)
	}
	if got := string(p.mem[512:517]); got != "to b0" {
		t.Errorf("receive 12 holds %q", got)
	}
	// A message that comes before any receive waits in the context; a
	// longer one than the receive is truncated.
	p.send(t, 1, "early "+strings.Repeat("x", 100))
	p.await(t, "held=1")
	p.post(t, 13, 1024)
	c = next(t, p.cqs[1])
	if c.Context != 13 || c.Err != fi.ETRUNC || c.Len != 64 || c.OLen != 42 {
		t.Errorf("held message's completion %+v, want context 13 truncated to 64 bytes, 42 over", c)
	}
	if got := string(p.mem[1024:1030]); got != "early " {
		t.Errorf("receive 13 holds %q", got)
	}
	if n := pending(p.cqs[0]) + pending(p.cqs[1]); n != 0 {
		t.Errorf("%d completions more than the three receives", n)
	}
}

// TestSharedContextBinds: "CQs, counters, AV, and shared contexts must be
// bound to endpoints before they are enabled", and an endpoint bound to a
// shared receive context takes its receives from it only.
func TestSharedContextBinds(t *testing.T) {
	d := lo(t)
	p := newSharedPair(t, d, 1)
	create(t, d, core.KindSTX, "t")
	create(t, d, core.KindSRX, "s2")
	b := p.b[0]
	for _, cmd := range []string{"bind srx s2", "bind stx t"} {
		wantCode(t, cmd+" after enable", b.Ctl(context.Background(), 0, cmd), fi.EOPBADSTATE)
	}
	// Its own receives: the data file and its rx ring refuse them.
	_, err := b.Impl.(*core.EP).ReadData(context.Background(), make([]byte, 8), 0)
	wantCode(t, "data file read", err, fi.EOPNOTSUPP)
	_, rx := ringsOf(t, b)
	slot, _ := rx.Reserve()
	(&ring.WR{Op: ring.OpRecv, Context: 5, Desc: p.mr.Serial, Len: 8, Addr: fi.ADDR_UNSPEC}).Encode(slot)
	rx.Publish(1)
	if c := next(t, p.cqs[0]); c.Context != 5 || c.Err != fi.EOPNOTSUPP {
		t.Errorf("receive on the endpoint's own ring: %+v, want FI_EOPNOTSUPP", c)
	}
	// An enabled context's attributes are fixed.
	for _, a := range p.srx.Attrs() {
		if a.Name == "size" {
			wantCode(t, "attr/size after enable", a.Set("64"), fi.EOPBADSTATE)
		}
	}
	// An endpoint takes one shared context of each kind.
	e := create(t, d, core.KindEP, "x")
	run(t, e, "bind stx t")
	run(t, e, "bind srx s2")
	wantCode(t, "a second bind srx", e.Ctl(context.Background(), 0, "bind srx s"), fi.EINVAL)
	wantCode(t, "a second bind stx", e.Ctl(context.Background(), 0, "bind stx t"), fi.EINVAL)
	links := map[string]string{}
	for _, l := range e.Impl.(core.Linker).Links() {
		links[l.Name] = l.Target.Path()
	}
	if links["srx"] != "srx/s2" || links["stx"] != "stx/t" {
		t.Errorf("links %v, want srx -> srx/s2, stx -> stx/t", links)
	}
}

// TestSharedContextClose: a bound context cannot be closed ("removing a
// bound object fails with EBUSY", fi_close(3)); once its endpoints are
// closed it can, and its posted receives are "silently dropped".
// fi_cancel of a posted receive completes it with FI_ECANCELED.
func TestSharedContextClose(t *testing.T) {
	d := lo(t)
	p := newSharedPair(t, d, 1)
	stx := create(t, d, core.KindSTX, "t")
	e := create(t, d, core.KindEP, "x")
	run(t, e, "bind stx t")
	p.post(t, 21, 0)
	p.post(t, 22, 64)
	p.await(t, "posted=2") // cancel finds receives the context has taken
	run(t, p.srx, "cancel 21")
	if c := next(t, p.cqs[0]); c.Context != 21 || c.Err != fi.ECANCELED {
		t.Errorf("cancelled receive: %+v, want FI_ECANCELED", c)
	}
	wantCode(t, "cancel of no receive", p.srx.Ctl(context.Background(), 0, "cancel 21"), fi.ENOENT)
	wantCode(t, "rmdir of a bound srx", p.srx.Remove(), fi.EBUSY)
	wantCode(t, "rmdir of a bound stx", stx.Remove(), fi.EBUSY)
	for _, o := range []*core.Object{p.b[0], e} {
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.srx.Remove(); err != nil {
		t.Errorf("rmdir of the srx after its endpoints: %v", err)
	}
	if err := stx.Remove(); err != nil {
		t.Errorf("rmdir of the stx after its endpoint: %v", err)
	}
	if n := pending(p.cqs[0]); n != 0 {
		t.Errorf("%d completions after close; the posted receive is dropped silently", n)
	}
}

// TestSharedReceiveContextTagged: FI_EP_RDM endpoints (rxm over tcp) take
// tagged receives from one context: "the buffers usable by any endpoint
// bound to the shared receive context", each message matched with the
// oldest receive that takes it, by tag under the receive's ignore bits,
// and a message that none takes waits for a later one.
func TestSharedReceiveContextTagged(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	_, d := fabricOf(t, rxm.Wrap(p))
	av := create(t, d, core.KindAV, "v").Impl.(*core.AV)
	create(t, d, core.KindCQ, "tx")
	srx := create(t, d, core.KindSRX, "s")
	var cqs []*core.CQ
	var addrs []fi.Addr
	for _, e := range []string{"a", "b", "x"} {
		ep := create(t, d, core.KindEP, e)
		setAttr(t, ep, "type", "FI_EP_RDM")
		run(t, ep, "bind av v")
		if e == "x" {
			run(t, ep, "bind cq tx send,recv")
		} else {
			cqs = append(cqs, create(t, d, core.KindCQ, "c"+e).Impl.(*core.CQ))
			for _, cmd := range []string{"bind cq tx send", "bind cq c" + e + " recv", "bind srx s"} {
				run(t, ep, cmd)
			}
		}
		run(t, ep, "enable")
		a, err := ep.Impl.(*core.EP).Name()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	if _, err := av.Insert(addrs[:2]); err != nil { // a is fi_addr 0, b 1
		t.Fatal(err)
	}
	mr := create(t, d, core.KindMR, "m")
	setAttr(t, mr, "len", "4096")
	run(t, mr, "reg")
	reg, _ := mr.Impl.(*core.MR).Region()
	rreg, err := srx.Impl.(*core.SRX).Ring()
	if err != nil {
		t.Fatal(err)
	}
	rx, err := ring.Open(rreg.Mem)
	if err != nil {
		t.Fatal(err)
	}
	p2 := &sharedPair{srx: srx, rx: rx, mr: mr, mem: reg.Mem}
	post := func(context uint64, op uint8, tag, ignore uint64) {
		slot, ok := rx.Reserve()
		if !ok {
			t.Fatal("srx ring full")
		}
		(&ring.WR{Op: op, Flags: uint64(fi.COMPLETION), Context: context, Desc: mr.Serial, Offset: context * 64,
			Len: 64, Tag: tag, Ignore: ignore, Addr: fi.ADDR_UNSPEC}).Encode(slot)
		rx.Publish(1)
	}
	xo, _ := d.Lookup(core.KindEP, "x")
	x := xo.Impl.(*core.EP)
	send := func(dest uint64, tag uint64, msg string) {
		t.Helper()
		run(t, xo, "dest "+strconv.FormatUint(dest, 10))
		if tag == 0 {
			x.ClearTag()
		} else if err := x.SetTag(tag, 0); err != nil {
			t.Fatal(err)
		}
		if err := x.WriteData(context.Background(), []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	post(1, ring.OpTRecv, 0x100, 0xff)
	post(2, ring.OpTRecv, 0x200, 0)
	post(3, ring.OpRecv, 0, 0)
	p2.await(t, "posted=3")
	send(1, 0x201, "to b, 0x201") // no receive takes it
	p2.await(t, "held=1")
	send(0, 0x1ab, "to a, 0x1ab") // receive 1, under its ignore bits
	if c := next(t, cqs[0]); c.Context != 1 || c.Tag != 0x1ab || c.Flags != fi.CQFlags(fi.TAGGED|fi.RECV) || string(reg.Mem[64:64+c.Len]) != "to a, 0x1ab" {
		t.Errorf("a's completion %+v, %q; want receive 1 with tag 0x1ab", c, reg.Mem[64:64+c.Len])
	}
	send(1, 0, "to b") // the untagged receive
	if c := next(t, cqs[1]); c.Context != 3 || c.Flags != fi.CQFlags(fi.MSG|fi.RECV) || string(reg.Mem[192:192+c.Len]) != "to b" {
		t.Errorf("b's completion %+v; want receive 3", c)
	}
	post(4, ring.OpTRecv, 0x201, 0) // takes the held message
	if c := next(t, cqs[1]); c.Context != 4 || c.Tag != 0x201 || string(reg.Mem[256:256+c.Len]) != "to b, 0x201" {
		t.Errorf("b's completion %+v; want receive 4 with the held message", c)
	}
	p2.await(t, "posted=1 held=0") // receive 2 is still there
}

// TestSharedDataReadEndsWithContext: a read of srx/N/data blocked for a
// message fails with FI_ENOENT when the context is removed, rather than
// block for ever; an interrupted one takes its receive back (FI_EINTR).
func TestSharedDataReadEndsWithContext(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindSRX, "s")
	s := o.Impl.(*core.SRX)
	_, err := s.ReadData(context.Background(), make([]byte, 8), 0)
	wantCode(t, "read before enable", err, fi.EOPBADSTATE)
	run(t, o, "enable")
	p := &sharedPair{srx: o}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.ReadData(ctx, make([]byte, 8), 0); done <- err }()
	p.await(t, "posted=1")
	cancel()
	wantCode(t, "interrupted read", <-done, fi.EINTR)
	p.await(t, "posted=0")
	go func() { _, err := s.ReadData(context.Background(), make([]byte, 8), 0); done <- err }()
	p.await(t, "posted=1")
	if err := o.Remove(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		wantCode(t, "read when the context closed", err, fi.ENOENT)
	case <-time.After(10 * time.Second):
		t.Fatal("a read of data still blocks after the context closed")
	}
}
