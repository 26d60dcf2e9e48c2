package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// A user's connections are refused past the user's limit, with a sentence
// naming the user, the resource and the limit; root's still work, and a
// closed connection gives its charge back.
func TestConnectionLimit(t *testing.T) {
	p, _ := tcp.New()
	f, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.SetLimit(core.Connections, 2)
	d, _ := f.Domain("tcp", "lo")
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
