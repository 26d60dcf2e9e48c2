package core_test

import (
	"context"
	"fmt"
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

// rxAddr is fi_rx_addr (fi_endpoint(3)): "fi_addr_t fi_rx_addr(fi_addr_t
// fi_addr, int rx_index, int rx_ctx_bits)", the index in the high bits.
func rxAddr(fiAddr uint64, idx, bits int) uint64 {
	return uint64(idx)<<(64-bits) | fiAddr
}

// TestScalableEndpoint: a scalable endpoint (FI_EP_RDM over rxm, with
// FI_NAMED_RX_CTX) with 4 transmit and 4 receive contexts, each context
// bound to a CQ of its own. Every transmit context sends to a receive
// context named with fi_rx_addr ("Receive contexts of a scalable endpoint
// may be addressed by the sender using fi_rx_addr"): the message goes to
// that context only, a receive posted on another context does not take
// it, and the completions are on the CQs of the contexts that sent and
// received.
func TestScalableEndpoint(t *testing.T) {
	const n, bits = 4, 3
	p, _ := tcp.New(tcp.Config{})
	_, d := fabricOf(t, rxm.Wrap(p))
	avo := create(t, d, core.KindAV, "v")
	setAttr(t, avo, "rx_ctx_bits", strconv.Itoa(bits))
	sepo := create(t, d, core.KindEP, "s")
	setAttr(t, sepo, "type", "FI_EP_RDM")
	setAttr(t, sepo, "scalable", "true")
	setAttr(t, sepo, "tx_ctx_cnt", strconv.Itoa(n))
	setAttr(t, sepo, "rx_ctx_cnt", strconv.Itoa(n))
	run(t, sepo, "bind av v") // fi_scalable_ep_bind
	var txs, rxs []*core.Object
	var txcqs, rxcqs []*core.CQ
	for i := range n {
		for _, dir := range []string{"tx", "rx"} {
			name := fmt.Sprintf("%s%d", dir, i)
			cq := create(t, d, core.KindCQ, "c"+name).Impl.(*core.CQ)
			c := create(t, d, core.KindEP, name)
			run(t, c, fmt.Sprintf("context s %s %d", dir, i))
			if got := attr(t, c, "context"); got != fmt.Sprintf("%s %d", dir, i) {
				t.Errorf("%s attr/context = %q", name, got)
			}
			if dir == "tx" {
				run(t, c, "bind cq c"+name+" send")
				txs, txcqs = append(txs, c), append(txcqs, cq)
			} else {
				run(t, c, "bind cq c"+name+" recv")
				rxs, rxcqs = append(rxs, c), append(rxcqs, cq)
			}
			run(t, c, "enable") // before the scalable endpoint, as fabtests do
		}
	}
	run(t, sepo, "enable")
	sep := sepo.Impl.(*core.EP)
	self, err := sep.Name()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := avo.Impl.(*core.AV).Insert([]fi.Addr{self}); err != nil { // fi_addr 0
		t.Fatal(err)
	}
	mr := create(t, d, core.KindMR, "m")
	setAttr(t, mr, "len", "4096")
	run(t, mr, "reg")
	reg, _ := mr.Impl.(*core.MR).Region()
	post := func(c *core.Object, context uint64) {
		t.Helper()
		rreg, err := c.Impl.(*core.EP).Ring("rx")
		if err != nil {
			t.Fatal(err)
		}
		rx, err := ring.Open(rreg.Mem)
		if err != nil {
			t.Fatal(err)
		}
		slot, ok := rx.Reserve()
		if !ok {
			t.Fatal("rx ring full")
		}
		(&ring.WR{Op: ring.OpRecv, Flags: uint64(fi.COMPLETION), Context: context, Desc: mr.Serial, Offset: context * 64,
			Len: 64, Addr: fi.ADDR_UNSPEC}).Encode(slot)
		rx.Publish(1)
	}
	send := func(i, to int) {
		t.Helper()
		run(t, txs[i], "dest "+strconv.FormatUint(rxAddr(0, to, bits), 10))
		if err := txs[i].Impl.(*core.EP).WriteData(context.Background(), fmt.Appendf(nil, "from %d to %d", i, to)); err != nil {
			t.Fatal(err)
		}
	}
	// Receive context 0 has a receive; a message to context 2 passes it
	// by and waits for context 2's receive.
	post(rxs[0], 1)
	send(0, 2)
	if k := pending(rxcqs[0]); k != 0 {
		t.Fatalf("receive context 0 completed %d receives of a message sent to context 2", k)
	}
	post(rxs[2], 3)
	if c := next(t, rxcqs[2]); c.Context != 3 || string(reg.Mem[192:192+c.Len]) != "from 0 to 2" {
		t.Errorf("context 2's completion %+v, %q; want receive 3 with the message", c, reg.Mem[192:192+c.Len])
	}
	if c := next(t, txcqs[0]); c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
		t.Errorf("transmit context 0's completion %+v", c)
	}
	// Every transmit context i to receive context 3-i; context 0 still
	// has receive 1.
	for i := 1; i < n; i++ {
		post(rxs[i], uint64(10+i))
	}
	for i := range n {
		send(i, n-1-i)
	}
	for j := range n {
		c := next(t, rxcqs[j])
		want := fmt.Sprintf("from %d to %d", n-1-j, j)
		if got := string(reg.Mem[c.Buf : c.Buf+c.Len]); got != want {
			t.Errorf("receive context %d got %q (%+v), want %q", j, got, c, want)
		}
		if k := pending(rxcqs[j]); k != 0 {
			t.Errorf("receive context %d has %d more completions", j, k)
		}
	}
	for i := 1; i < n; i++ {
		if c := next(t, txcqs[i]); c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
			t.Errorf("transmit context %d's completion %+v", i, c)
		}
	}
}

// TestScalableEndpointRefusals: what fi_endpoint(3) and the tree refuse.
func TestScalableEndpointRefusals(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	_, d := fabricOf(t, rxm.Wrap(p))
	create(t, d, core.KindAV, "v")
	msg := create(t, d, core.KindEP, "m") // FI_EP_MSG
	wantCode(t, "scalable FI_EP_MSG", trySet(msg, "scalable", "true"), fi.EINVAL)
	plain := create(t, d, core.KindEP, "p")
	setAttr(t, plain, "type", "FI_EP_RDM")
	wantCode(t, "tx_ctx_cnt 2 of an endpoint not scalable", trySet(plain, "tx_ctx_cnt", "2"), fi.EINVAL)
	sepo := create(t, d, core.KindEP, "s")
	setAttr(t, sepo, "type", "FI_EP_RDM")
	setAttr(t, sepo, "scalable", "true")
	wantCode(t, "tx_ctx_cnt beyond max_ep_tx_ctx", trySet(sepo, "tx_ctx_cnt", strconv.Itoa(core.ScalableCtxs+1)), fi.EINVAL)
	setAttr(t, sepo, "tx_ctx_cnt", "2")
	wantCode(t, "context of an endpoint not scalable", plain.Ctl(context.Background(), 0, "context p tx 0"), fi.EINVAL)
	c := create(t, d, core.KindEP, "c")
	wantCode(t, "context index 2 of 2", c.Ctl(context.Background(), 0, "context s tx 2"), fi.EINVAL)
	run(t, c, "context s tx 0")
	c2 := create(t, d, core.KindEP, "c2")
	wantCode(t, "context tx 0 twice", c2.Ctl(context.Background(), 0, "context s tx 0"), fi.EBUSY)
	wantCode(t, "rx context 1 of 1", c2.Ctl(context.Background(), 0, "context s rx 1"), fi.EINVAL)
	create(t, d, core.KindCQ, "q")
	run(t, c, "bind cq q send")
	wantCode(t, "enable before the scalable endpoint has an av", c.Ctl(context.Background(), 0, "enable"), fi.ENOAV)
	run(t, sepo, "bind av v")
	run(t, c, "enable")
	run(t, sepo, "enable")
	buf := make([]byte, 8)
	_, err := sepo.Impl.(*core.EP).ReadData(context.Background(), buf, 0)
	wantCode(t, "a receive on a scalable endpoint", err, fi.EOPNOTSUPP)
	_, err = sepo.Impl.(*core.EP).Ring("tx")
	wantCode(t, "a scalable endpoint's ring", err, fi.EOPNOTSUPP)
	wantCode(t, "rmdir of a scalable endpoint with contexts", sepo.Remove(), fi.EBUSY)
	_, err = c.Impl.(*core.EP).ReadData(context.Background(), buf, 0)
	wantCode(t, "a receive on a transmit context", err, fi.EOPNOTSUPP)
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	run(t, c2, "context s tx 0") // the index is free again
}

func trySet(o *core.Object, name, v string) error {
	for _, a := range o.Attrs() {
		if a.Name == name {
			if a.Set == nil {
				return fmt.Errorf("attr/%s is read-only", name)
			}
			return a.Set(v)
		}
	}
	return fmt.Errorf("no attr/%s", name)
}

func attr(t *testing.T, o *core.Object, name string) string {
	t.Helper()
	for _, a := range o.Attrs() {
		if a.Name == name {
			return a.Get()
		}
	}
	t.Fatalf("%s has no attr/%s", o, name)
	return ""
}

// TestControlAttrs: the tree forms of fi_control and fi_tx_size_left /
// fi_rx_size_left. attr/tx_op_flags is writable after enable
// (FI_SETOPSFLAG: "Used to change the data transfer operation flags
// associated with an endpoint"); tx_size_left and rx_size_left are the
// free entries of the rings ("a lower bound on the number of transmit
// operations that may be posted [...] without that operation returning
// -FI_EAGAIN"), "-" before enable; a passive endpoint's attr/backlog is
// FI_BACKLOG.
func TestControlAttrs(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	_, d := fabricOf(t, rxm.Wrap(p))
	create(t, d, core.KindAV, "v")
	create(t, d, core.KindCQ, "q")
	ep := create(t, d, core.KindEP, "e")
	setAttr(t, ep, "type", "FI_EP_RDM")
	setAttr(t, ep, "tx_size", "64")
	setAttr(t, ep, "rx_size", "32")
	if got := attr(t, ep, "tx_size_left"); got != "-" {
		t.Errorf("tx_size_left before enable = %q, want -", got)
	}
	for _, c := range []string{"bind av v", "bind cq q send,recv", "enable"} {
		run(t, ep, c)
	}
	if tx, rx := attr(t, ep, "tx_size_left"), attr(t, ep, "rx_size_left"); tx != "64" || rx != "32" {
		t.Errorf("size_left after enable: tx %q rx %q, want 64 and 32", tx, rx)
	}
	setAttr(t, ep, "tx_op_flags", "FI_COMPLETION|FI_INJECT")
	if got := attr(t, ep, "tx_op_flags"); got != "[ FI_COMPLETION, FI_INJECT ]" {
		t.Errorf("tx_op_flags after FI_SETOPSFLAG = %q", got)
	}
	wantCode(t, "tx_size after enable", trySet(ep, "tx_size", "128"), fi.EOPBADSTATE)
	pep := create(t, d, core.KindPEP, "l")
	if got := attr(t, pep, "backlog"); got != "1024" {
		t.Errorf("backlog = %q, want 1024", got)
	}
	wantCode(t, "backlog 0", trySet(pep, "backlog", "0"), fi.EINVAL)
	setAttr(t, pep, "backlog", "8")
	if got := attr(t, pep, "backlog"); got != "8" {
		t.Errorf("backlog = %q, want 8", got)
	}
}

// TestAlias: fi_ep_alias. "An alias EP differs from its parent endpoint
// only by its default data transfer flags. For example, an alias EP may
// be configured to use a different completion mode": a's CQ binding is
// selective and its tx_op_flags lack FI_COMPLETION, so its sends make no
// entries; its alias made with FI_TRANSMIT|FI_COMPLETION sends through
// a's provider endpoint (the same address), and its sends make entries on
// a's CQ. The parent stays while the alias is open.
func TestAlias(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	_, d := fabricOf(t, rxm.Wrap(p))
	avo := create(t, d, core.KindAV, "v")
	q := create(t, d, core.KindCQ, "q").Impl.(*core.CQ)
	rq := create(t, d, core.KindCQ, "r").Impl.(*core.CQ)
	a := create(t, d, core.KindEP, "a")
	b := create(t, d, core.KindEP, "b")
	for _, x := range []struct {
		o   *core.Object
		cmd string
	}{{a, "bind cq q send,recv,selective"}, {b, "bind cq r send,recv"}} {
		setAttr(t, x.o, "type", "FI_EP_RDM")
		run(t, x.o, "bind av v")
		run(t, x.o, x.cmd)
	}
	al := create(t, d, core.KindEP, "al")
	wantCode(t, "alias of an idle endpoint", al.Ctl(context.Background(), 0, "alias a FI_TRANSMIT|FI_COMPLETION"), fi.EOPBADSTATE)
	run(t, a, "enable")
	run(t, b, "enable")
	wantCode(t, "alias with FI_TRANSMIT and FI_RECV", al.Ctl(context.Background(), 0, "alias a FI_TRANSMIT|FI_RECV"), fi.EINVAL)
	wantCode(t, "alias without a direction", al.Ctl(context.Background(), 0, "alias a FI_COMPLETION"), fi.EINVAL)
	run(t, al, "alias a FI_TRANSMIT|FI_COMPLETION")
	if got := attr(t, al, "tx_op_flags"); got != "[ FI_COMPLETION ]" {
		t.Errorf("alias tx_op_flags %q, want FI_COMPLETION", got)
	}
	aName, _ := a.Impl.(*core.EP).Name()
	alName, _ := al.Impl.(*core.EP).Name()
	bName, _ := b.Impl.(*core.EP).Name()
	if aName != alName {
		t.Errorf("alias address %v, parent's %v", alName, aName)
	}
	if _, err := avo.Impl.(*core.AV).Insert([]fi.Addr{bName}); err != nil {
		t.Fatal(err)
	}
	for i, o := range []*core.Object{a, al} {
		run(t, o, "dest 0")
		if err := o.Impl.(*core.EP).WriteData(context.Background(), []byte("x")); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		buf := make([]byte, 8)
		if n, err := b.Impl.(*core.EP).ReadData(context.Background(), buf, 0); err != nil || n != 1 {
			t.Fatalf("b's receive %d: %d, %v", i, n, err)
		}
		next(t, rq)
	}
	if c := next(t, q); c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
		t.Errorf("the alias's send completion %+v", c)
	}
	if n := pending(q); n != 0 {
		t.Errorf("%d more entries on a's CQ: the parent's send made one", n)
	}
	wantCode(t, "rmdir of an endpoint with an alias", a.Remove(), fi.EBUSY)
	if err := al.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestContextCloseCancels: closing a receive context with a receive
// posted cancels it on the shared provider endpoint ("Outstanding
// operations posted to the endpoint when fi_close is called will be
// discarded"), which lets go of the memory of its region, closed while
// the receive was posted; the scalable endpoint then goes too.
func TestContextCloseCancels(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	f, d := fabricOf(t, rxm.Wrap(p))
	create(t, d, core.KindAV, "v")
	create(t, d, core.KindCQ, "q")
	sep := create(t, d, core.KindEP, "s")
	setAttr(t, sep, "type", "FI_EP_RDM")
	setAttr(t, sep, "scalable", "true")
	run(t, sep, "bind av v")
	memory := func() int64 { return f.Held(0)[core.MemoryBytes] }
	c := create(t, d, core.KindEP, "c")
	for _, cmd := range []string{"context s rx 0", "bind cq q recv", "enable"} {
		run(t, c, cmd)
	}
	wantCode(t, "rx_ctx_cnt once the provider endpoint exists", trySet(sep, "rx_ctx_cnt", "1"), fi.EOPBADSTATE)
	before := memory()
	mr := create(t, d, core.KindMR, "m")
	setAttr(t, mr, "len", "4096")
	run(t, mr, "reg")
	rreg, err := c.Impl.(*core.EP).Ring("rx")
	if err != nil {
		t.Fatal(err)
	}
	rx, err := ring.Open(rreg.Mem)
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := rx.Reserve()
	(&ring.WR{Op: ring.OpRecv, Context: 1, Desc: mr.Serial, Len: 64, Addr: fi.ADDR_UNSPEC}).Encode(slot)
	rx.Publish(1)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(c.Status().String(), "ops=1"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the receive is not posted: %s", c.Status().String())
		}
	}
	if err := mr.Remove(); err != nil {
		t.Errorf("rmdir of a region a posted receive uses: %v", err)
	}
	if got := memory(); got != before+4096 {
		t.Errorf("with the receive posted the user holds %d bytes, want %d (the region's memory stays)", got, before+4096)
	}
	var rings int64 // given back with the context
	for _, name := range []string{"tx", "rx"} {
		n, err := c.Impl.(*core.EP).RingSize(name)
		if err != nil {
			t.Fatal(err)
		}
		rings += int64(n)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	// The cancelled receive lets go of the region: its memory goes too.
	for deadline := time.Now().Add(5 * time.Second); memory() != before-rings; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the context closed the user holds %d bytes, want %d", memory(), before-rings)
		}
	}
	if err := sep.Remove(); err != nil {
		t.Errorf("rmdir of the scalable endpoint after its context closed: %v", err)
	}
}
