package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// A user's connections are refused past the user's limit, with a sentence
// naming the user, the resource and the limit; root's still work, and a
// closed connection gives its charge back.
func TestConnectionLimit(t *testing.T) {
	f, d := loFabric(t)
	f.SetLimit(core.Connections, 2)
	ctx := context.Background()
	ctl := func(o *core.Object, uid uint32, cmd string) error { return o.Ctl(ctx, uid, cmd) }
	mk := func(k core.Kind, name string, uid uint32) *core.Object {
		t.Helper()
		o, err := d.Create(k, name, uid)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	mk(core.KindEQ, "e", 0)
	mk(core.KindCQ, "c", 0)
	pep := mk(core.KindPEP, "l", 0)
	for _, c := range []string{"bind eq e", "listen 127.0.0.1:0"} {
		if err := ctl(pep, 0, c); err != nil {
			t.Fatal(err)
		}
	}
	addr, err := pep.Impl.(*core.PEP).Name()
	if err != nil {
		t.Fatal(err)
	}
	mk(core.KindEQ, "ue", 1000)
	mk(core.KindCQ, "uc", 1000)
	connect := func(name string, uid uint32, eq string) (*core.Object, error) {
		ep := mk(core.KindEP, name, uid)
		cq := map[string]string{"e": "c", "ue": "uc"}[eq]
		for _, c := range []string{"bind eq " + eq, "bind cq " + cq + " send,recv", "enable"} {
			if err := ctl(ep, uid, c); err != nil {
				t.Fatal(err)
			}
		}
		return ep, ctl(ep, uid, "connect "+addr.String())
	}
	u0, err := connect("u0", 1000, "ue")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect("u1", 1000, "ue"); err != nil {
		t.Fatal(err)
	}
	_, err = connect("u2", 1000, "ue")
	wantCode(t, "uid 1000's third connection", err, fi.ENOSPC)
	if err == nil || !strings.Contains(err.Error(), "uid 1000 holds 2 of connections, the limit is 2") {
		t.Errorf("error %q does not say whose limit", err)
	}
	for i := range 3 {
		if _, err := connect("r"+string(rune('0'+i)), 0, "e"); err != nil {
			t.Errorf("root's connection %d: %v", i, err)
		}
	}
	if got := f.LimitsText(1000); !strings.Contains(got, "connections 2 2\n") {
		t.Errorf("limits of uid 1000:\n%s", got)
	}
	if err := u0.Remove(); err != nil {
		t.Fatal(err)
	}
	if h := f.Held(1000)[core.Connections]; h != 1 {
		t.Errorf("uid 1000 holds %d connections after closing one, want 1", h)
	}
	if _, err := connect("u3", 1000, "ue"); err != nil {
		t.Errorf("a connection after one closed: %v", err)
	}
}

// Requests that peers make at a user's listener are not charged to the
// user: neither their connections nor the endpoints made for them, until
// the user enables one (takes the request). Then both are, within the
// user's limits.
func TestRequestsAreNotCharged(t *testing.T) {
	f, d := loFabric(t)
	ctx := context.Background()
	const uid = 1000
	mk := func(k core.Kind, uid uint32) *core.Object {
		t.Helper()
		o, err := d.Create(k, "", uid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(o.Release)
		return o
	}
	run := func(o *core.Object, uid uint32, cmds ...string) error {
		for _, c := range cmds {
			if err := o.Ctl(ctx, uid, c); err != nil {
				return err
			}
		}
		return nil
	}
	ueq, ucq, pep := mk(core.KindEQ, uid), mk(core.KindCQ, uid), mk(core.KindPEP, uid)
	if err := run(pep, uid, "bind eq "+ueq.ID, "listen 127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr, _ := pep.Impl.(*core.PEP).Name()
	before := f.Held(uid)
	f.SetLimit(core.Objects, before[core.Objects]+2)
	f.SetLimit(core.Connections, before[core.Connections]+1)

	reqs := make([]*core.Object, 0, 3)
	eq, cq := mk(core.KindEQ, 0), mk(core.KindCQ, 0)
	for range 3 { // root's endpoints stand for the peers
		ep := mk(core.KindEP, 0)
		if err := run(ep, 0, "bind eq "+eq.ID, "bind cq "+cq.ID+" send,recv", "enable", "connect "+addr.String()); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := pep.Impl.(*core.PEP).Next(wctx)
		cancel()
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		reqs = append(reqs, r)
	}
	if got := f.Held(uid); got != before {
		t.Fatalf("with 3 requests waiting uid %d holds %v, want %v as before them", uid, got, before)
	}
	mk(core.KindMR, uid) // the user's own mkdir still works

	take := func(r *core.Object) error {
		return run(r, uid, "bind eq "+ueq.ID, "bind cq "+ucq.ID+" send,recv", "enable")
	}
	if err := take(reqs[0]); err != nil {
		t.Fatalf("enable of a request's endpoint within the limits: %v", err)
	}
	got := f.Held(uid)
	if got[core.Objects] != before[core.Objects]+2 || got[core.Connections] != before[core.Connections]+1 {
		t.Fatalf("after enabling a request's endpoint uid %d holds %v, want one more object and connection than %v (and the mr)", uid, got, before)
	}
	wantCode(t, "enable of a request's endpoint past the objects limit", take(reqs[1]), fi.ENOSPC)
	if got := f.Held(uid)[core.Objects]; got != before[core.Objects]+2 {
		t.Errorf("a refused enable left uid %d with %d objects, want %d", uid, got, before[core.Objects]+2)
	}
	if err := reqs[0].Remove(); err != nil {
		t.Fatal(err)
	}
	if got := f.Held(uid); got[core.Objects] != before[core.Objects]+1 || got[core.Connections] != before[core.Connections] {
		t.Errorf("after removing the accepted endpoint uid %d holds %v", uid, got)
	}
}
