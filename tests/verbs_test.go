package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The verbs provider through the tree, beyond the conformance suite:
// two daemons as two hosts of one RoCE fabric, and FI_EP_DGRAM.

// TestVerbsTwoDaemons: two daemons with devices on 127.0.0.2 and
// 127.0.0.3 and one RoCE port are two hosts: an FI_EP_MSG endpoint of
// one connects to a listener of the other, with private data, and
// messages go both ways through the data files.
func TestVerbsTwoDaemons(t *testing.T) {
	port := strconv.Itoa(freeUDPPort(t))
	d1 := mountWith(t, "-verbs-addrs", "127.0.0.2", "-roce-port", port)
	d2 := mountWith(t, "-verbs-addrs", "127.0.0.3", "-roce-port", port)
	dom1, dom2 := d1.path("verbs", "rxe_127_0_0_2"), d2.path("verbs", "rxe_127_0_0_3")

	eq2 := mkobj(t, dom2, "eq", "e")
	mkobj(t, dom2, "cq", "c")
	pep := mkobj(t, dom2, "pep", "l")
	ctlOK(t, pep, "bind eq e")
	ctlOK(t, pep, "listen")
	addr := fileText(t, pep, "local")
	if !strings.HasPrefix(addr, "fi_sockaddr_in://127.0.0.3:") {
		t.Fatalf("listener address %q", addr)
	}

	eq1 := mkobj(t, dom1, "eq", "e")
	mkobj(t, dom1, "cq", "c")
	ep1 := mkobj(t, dom1, "ep", "a")
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable", "connect " + addr + " hello"} {
		ctlOK(t, ep1, c)
	}
	id := fileText(t, pep, "listen")
	ep2 := filepath.Join(dom2, "ep", id)
	t.Cleanup(func() { os.Remove(ep2) })
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable", "accept welcome"} {
		ctlOK(t, ep2, c)
	}
	if ev := fileText(t, eq1, "events"); !strings.Contains(ev, "connected fid=ep/a data=welcome") {
		t.Errorf("events of the connecting daemon: %q", ev)
	}
	if ev := fileText(t, eq2, "events"); !strings.Contains(ev, "data=hello") {
		t.Errorf("events of the listening daemon: %q", ev)
	}
	if local := fileText(t, ep1, "local"); fileText(t, ep2, "remote") != local {
		t.Errorf("the accepted endpoint's peer is not %s", local)
	}
	for _, m := range []struct{ from, to, msg string }{{ep1, ep2, "over the fabric"}, {ep2, ep1, "and back"}} {
		got := make(chan string, 1)
		go func() {
			b, _ := os.ReadFile(filepath.Join(m.to, "data"))
			got <- string(b)
		}()
		must(t, os.WriteFile(filepath.Join(m.from, "data"), []byte(m.msg), 0))
		if g := <-got; g != m.msg {
			t.Errorf("received %q, want %q", g, m.msg)
		}
	}
	ctlOK(t, ep1, "shutdown")
	if ev := fileText(t, eq2, "events"); !strings.Contains(ev, "shutdown fid=ep/"+id) {
		t.Errorf("events after the peer's shutdown: %q", ev)
	}
}

// TestVerbsDgram: FI_EP_DGRAM endpoints of the -dgram domain, addressed
// through their AVs by their names, exchange datagrams through the data
// files.
func TestVerbsDgram(t *testing.T) {
	d := mount(t)
	dom := d.path("verbs", verbsDevice+"-dgram")
	mkobj(t, dom, "cq", "c")
	av := mkobj(t, dom, "av", "v")
	var eps []string
	for _, name := range []string{"a", "b"} {
		ep := mkobj(t, dom, "ep", name)
		if typ := fileText(t, ep, "attr/type"); typ != "FI_EP_DGRAM" {
			t.Fatalf("an endpoint of %s is %s", dom, typ)
		}
		for _, c := range []string{"bind cq c send,recv", "bind av v", "enable"} {
			ctlOK(t, ep, c)
		}
		eps = append(eps, ep)
	}
	ctlOK(t, av, "insert "+fileText(t, eps[1], "local"))
	ctlOK(t, eps[0], "dest 0")
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(filepath.Join(eps[1], "data"))
		got <- string(b)
	}()
	// A datagram that comes before the read has posted its receive is
	// dropped, as UD drops it: send until one arrives.
	for deadline := time.Now().Add(10 * time.Second); ; {
		must(t, os.WriteFile(filepath.Join(eps[0], "data"), []byte("a datagram"), 0))
		select {
		case g := <-got:
			if g != "a datagram" {
				t.Errorf("received %q", g)
			}
		case <-time.After(20 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("no datagram arrived")
		}
		break
	}
	if err := ctl(filepath.Join(eps[0], "ctl"), "connect "+fileText(t, eps[1], "local")); err == nil {
		t.Error("connect on an FI_EP_DGRAM endpoint succeeded")
	}
}
