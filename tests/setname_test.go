package tests

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSetName: `setname ADDR` is fi_setname (fi_cm(3): "The fi_setname call
// may be used to modify or assign the address of the local endpoint. It is
// conceptually similar to the socket bind operation."): two FI_EP_RDM
// endpoints enabled after it listen on the addresses they were given, as a
// libfabric application's fi_info src_addr makes them, and exchange
// messages both ways (each dials the other from its address with a port of
// the kernel's, its own port being its listener's). "If an address cannot
// be assigned, or the endpoint address cannot be modified, an appropriate
// fabric error number is returned": another host's address, and any
// setname after enable.
func TestSetName(t *testing.T) {
	d := mount(t)
	dom := d.path("tcp", "lo")
	mkobj(t, dom, "cq", "s")
	eps := map[string]string{}
	for _, name := range []string{"a", "b"} {
		mkobj(t, dom, "av", name)
		ep := mkobj(t, dom, "ep", name)
		eps[name] = ep
		d.mustCtl(t, "FI_EP_RDM", "tcp", "lo", "ep", name, "attr", "type")
		if err := ctl(ep+"/ctl", "setname 192.0.2.77:1"); !errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Errorf("setname of another host's address: %v, want EADDRNOTAVAIL", err)
		}
		port := freeTCPPort(t)
		ctlOK(t, ep, fmt.Sprintf("setname 127.0.0.1:%d", port))
		ctlOK(t, ep, "bind av "+name)
		ctlOK(t, ep, "bind cq s send,recv")
		ctlOK(t, ep, "enable")
		want := fmt.Sprintf("local=fi_sockaddr_in://127.0.0.1:%d ", port)
		if st := fileText(t, ep, "status"); !strings.Contains(st, want) {
			t.Errorf("ep %s status after setname and enable = %q, want %q in it", name, st, want)
		}
		if err := ctl(ep+"/ctl", "setname 127.0.0.1:0"); !errors.Is(err, syscall.EBADFD) {
			t.Errorf("setname after enable: %v, want EBADFD", err)
		}
	}
	ctlOK(t, filepath.Join(dom, "av", "a"), "insert "+fileText(t, eps["b"], "local"))
	ctlOK(t, filepath.Join(dom, "av", "b"), "insert "+fileText(t, eps["a"], "local"))
	for _, x := range [][2]string{{"a", "b"}, {"b", "a"}} {
		from, to := eps[x[0]], eps[x[1]]
		ctlOK(t, from, "dest 0")
		msg := "from " + x[0]
		if err := os.WriteFile(filepath.Join(from, "data"), []byte(msg), 0); err != nil {
			t.Fatalf("send %s: %v (err: %s)", x[0], err, fileText(t, from, "err"))
		}
		if got := fileText(t, to, "data"); got != msg {
			t.Errorf("ep %s received %q, want %q", x[1], got, msg)
		}
	}
}

// freeTCPPort is a TCP port of 127.0.0.1 that nothing uses now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
