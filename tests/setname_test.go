package tests

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
)

// TestSetName: `setname ADDR` is fi_setname (fi_cm(3): "The fi_setname call
// may be used to modify or assign the address of the local endpoint. It is
// conceptually similar to the socket bind operation."): an FI_EP_RDM
// endpoint enabled after it listens on that address, as a libfabric
// application's fi_info src_addr makes it; "If an address cannot be
// assigned, or the endpoint address cannot be modified, an appropriate
// fabric error number is returned": another host's address, and any
// setname after enable.
func TestSetName(t *testing.T) {
	d := mount(t)
	dom := d.path("tcp", "lo")
	for _, kind := range []string{"av", "cq"} {
		mkobj(t, dom, kind, "s")
	}
	ep := mkobj(t, dom, "ep", "s")
	port := freeTCPPort(t)
	d.mustCtl(t, "FI_EP_RDM", "tcp", "lo", "ep", "s", "attr", "type")
	if err := ctl(ep+"/ctl", "setname 192.0.2.77:1"); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("setname of another host's address: %v, want EADDRNOTAVAIL", err)
	}
	ctlOK(t, ep, fmt.Sprintf("setname 127.0.0.1:%d", port))
	ctlOK(t, ep, "bind av s")
	ctlOK(t, ep, "bind cq s send,recv")
	ctlOK(t, ep, "enable")
	want := fmt.Sprintf("local=fi_sockaddr_in://127.0.0.1:%d ", port)
	if st := fileText(t, ep, "status"); !strings.Contains(st, want) {
		t.Errorf("status after setname and enable = %q, want %q in it", st, want)
	}
	if err := ctl(ep+"/ctl", "setname 127.0.0.1:0"); !errors.Is(err, syscall.EBADFD) {
		t.Errorf("setname after enable: %v, want EBADFD", err)
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
