package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestRemovedObjectRefusesCommands: after rmdir, commands on a file that
// was open before (`exec 3>mr/m/ctl; rmdir mr/m; echo reg >&3`) fail with
// FI_ENOENT and acquire nothing: no memory is charged, no key claimed;
// the same holds when the object's own methods are called after it closed.
func TestRemovedObjectRefusesCommands(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	f, d := fabricOf(t, p)
	const uid = 1000
	m, err := d.Create(core.KindMR, "m", uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Impl.Attrs() {
		if a.Name == "len" {
			if err := a.Set("8192"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Open(); err != nil { // the open ctl file
		t.Fatal(err)
	}
	if err := m.Remove(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "reg after rmdir", m.Ctl(context.Background(), uid, "reg"), fi.ENOENT)
	wantCode(t, "MR.Register after close", m.Impl.(*core.MR).Register(), fi.ENOENT)
	if h := f.Held(uid)[core.MemoryBytes]; h != 0 {
		t.Errorf("after reg on a removed region uid %d holds %d memory bytes, want 0", uid, h)
	}
	m.Release()

	ep, err := d.Create(core.KindEP, "x", uid)
	if err != nil {
		t.Fatal(err)
	}
	eq, _ := d.Create(core.KindEQ, "e", uid)
	cq, _ := d.Create(core.KindCQ, "c", uid)
	for _, c := range []string{"bind eq e", "bind cq c send,recv"} {
		if err := ep.Ctl(context.Background(), uid, c); err != nil {
			t.Fatal(err)
		}
	}
	held := f.Held(uid)[core.MemoryBytes]
	if err := ep.Open(); err != nil {
		t.Fatal(err)
	}
	if err := ep.Remove(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "enable after rmdir", ep.Ctl(context.Background(), uid, "enable"), fi.ENOENT)
	wantCode(t, "EP.Enable after close", ep.Impl.(*core.EP).Enable(), fi.ENOENT)
	_, err = ep.Impl.(*core.EP).Ring("tx")
	wantCode(t, "EP.Ring after close", err, fi.ENOENT)
	_, err = m.Impl.(*core.MR).Region()
	wantCode(t, "MR.Region after close", err, fi.ENOENT)
	if h := f.Held(uid)[core.MemoryBytes]; h != held {
		t.Errorf("after enable on a removed endpoint uid %d holds %d memory bytes, want %d", uid, h, held)
	}
	ep.Release()
	_, _ = eq, cq
}

// TestCloseRacesEnable: an endpoint closed while it is being enabled
// leaves nothing behind: whichever comes first, the memory of its rings
// and the connection of its listener (rxm) are given back.
func TestCloseRacesEnable(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	f, d := fabricOf(t, rxm.Wrap(p))
	const uid = 1000
	for _, k := range []core.Kind{core.KindAV, core.KindCQ} {
		if _, err := d.Create(k, "x", uid); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		ep := boundRDM(t, d, fmt.Sprint("e", i), uid)
		before := f.Held(uid)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ep.Impl.(*core.EP).Enable() }()
		go func() { defer wg.Done(); ep.Remove() }()
		wg.Wait()
		after := f.Held(uid)
		if after[core.MemoryBytes] != before[core.MemoryBytes] || after[core.Connections] != before[core.Connections] {
			t.Fatalf("round %d: after enable and close raced uid %d holds %v, before %v", i, uid, after, before)
		}
	}
}

// TestRemoveConnReq: removing the endpoint made from a connection request
// before accept or reject rejects the request: the client sees
// FI_ECONNREFUSED promptly and the passive endpoint's owner gets back
// what the request held.
func TestRemoveConnReq(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	f, d := fabricOf(t, p)
	const owner = 1000
	ctx := context.Background()
	mk := func(k core.Kind, name string, uid uint32, cmds ...string) *core.Object {
		t.Helper()
		o, err := d.Create(k, name, uid)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if err := o.Ctl(ctx, uid, c); err != nil {
				t.Fatalf("%s: %s: %v", o, c, err)
			}
		}
		return o
	}
	mk(core.KindEQ, "le", owner)
	pep := mk(core.KindPEP, "l", owner, "bind eq le", "listen 127.0.0.1:0")
	addr, err := pep.Impl.(*core.PEP).Name()
	if err != nil {
		t.Fatal(err)
	}
	listening := f.Held(owner)[core.Connections]
	eq := mk(core.KindEQ, "e", 0)
	mk(core.KindCQ, "c", 0)
	mk(core.KindEP, "a", 0, "bind eq e", "bind cq c send,recv", "enable", "connect "+addr.String())
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := pep.Impl.(*core.PEP).Next(tctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Remove(); err != nil {
		t.Fatal(err)
	}
	got := events(t, eq.Impl.(*core.EQ), 1)
	if want := "error fid=ep/a err=FI_ECONNREFUSED"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("client's EQ after the request's endpoint was removed: %q, want %q...", got, want)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Held(owner)[core.Connections] != listening && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h := f.Held(owner)[core.Connections]; h != listening {
		t.Errorf("uid %d holds %d connections after the request was removed, want %d (the listener's)", owner, h, listening)
	}
}

// TestEnableFailsOnRingQuota: an enable whose rings are refused by the
// memory quota leaves the endpoint idle with nothing enabled under it (no
// listener of rxm charged), and enable works once memory is free.
func TestEnableFailsOnRingQuota(t *testing.T) {
	p, _ := tcp.New(tcp.Config{})
	f, d := fabricOf(t, rxm.Wrap(p))
	const uid = 1000
	ctx := context.Background()
	for _, k := range []core.Kind{core.KindAV, core.KindCQ} {
		if _, err := d.Create(k, "x", uid); err != nil {
			t.Fatal(err)
		}
	}
	ep := boundRDM(t, d, "e", uid)
	held := f.Held(uid)
	f.SetLimit(core.MemoryBytes, held[core.MemoryBytes]+4096)
	wantCode(t, "enable over the memory quota", ep.Ctl(ctx, uid, "enable"), fi.ENOSPC)
	if h := f.Held(uid); h[core.Connections] != held[core.Connections] || h[core.MemoryBytes] != held[core.MemoryBytes] {
		t.Errorf("after the refused enable uid %d holds %v, before %v", uid, h, held)
	}
	f.SetLimit(core.MemoryBytes, core.DefaultLimits[core.MemoryBytes])
	if err := ep.Ctl(ctx, uid, "enable"); err != nil {
		t.Errorf("enable once memory is free: %v", err)
	}
}

// boundRDM makes an FI_EP_RDM endpoint called name of uid, bound to av x
// and cq x, not yet enabled.
func boundRDM(t *testing.T, d *core.Domain, name string, uid uint32) *core.Object {
	t.Helper()
	ep, err := d.Create(core.KindEP, name, uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ep.Impl.Attrs() {
		if a.Name == "type" {
			if err := a.Set("FI_EP_RDM"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []string{"bind av x", "bind cq x send,recv"} {
		if err := ep.Ctl(context.Background(), uid, c); err != nil {
			t.Fatal(err)
		}
	}
	return ep
}
