package core_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

// A connection from this host is keyed by the uid owning the peer's
// socket: the kernel's for a process's socket, the endpoint's owner for a
// socket the daemon made (OwnSocket); a listener is found by its address;
// a host elsewhere is NoUID.
func TestHostOf(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accept := func(c *net.TCPConn) core.HostKey {
		t.Helper()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		return core.HostOf(a.LocalAddr().(*net.TCPAddr).AddrPort(), a.RemoteAddr().(*net.TCPAddr).AddrPort())
	}
	host := netip.MustParseAddr("127.0.0.1")
	if k := accept(provtest.DialAs(t, 1000, "", ln.Addr().String())); k != (core.HostKey{Host: host, UID: 1000}) {
		t.Errorf("uid 1000's connection: key %v, want %v", k, core.HostKey{Host: host, UID: 1000})
	}
	if k := accept(provtest.DialAs(t, 0, "", ln.Addr().String())); k != (core.HostKey{Host: host, UID: 0}) {
		t.Errorf("root's connection: key %v, want %v", k, core.HostKey{Host: host, UID: 0})
	}
	c := provtest.DialAs(t, 0, "", ln.Addr().String())
	rc, _ := c.SyscallConn()
	cookie, err := core.OwnSocket(rc, 1001)
	if err != nil {
		t.Fatal(err)
	}
	defer core.DisownSocket(cookie)
	if k := accept(c); k != (core.HostKey{Host: host, UID: 1001}) {
		t.Errorf("the daemon's socket for uid 1001: key %v, want %v", k, core.HostKey{Host: host, UID: 1001})
	}
	lnAddr := ln.Addr().(*net.TCPAddr).AddrPort()
	if k := core.HostOf(netip.AddrPort{}, lnAddr); k != (core.HostKey{Host: host, UID: 0}) {
		t.Errorf("root's listener: key %v, want %v", k, core.HostKey{Host: host, UID: 0})
	}
	far := netip.MustParseAddrPort("192.0.2.1:5000")
	if k := core.HostOf(lnAddr, far); k != (core.HostKey{Host: far.Addr(), UID: core.NoUID}) {
		t.Errorf("a host elsewhere: key %v, want %v", k, core.HostKey{Host: far.Addr(), UID: core.NoUID})
	}
	v6 := core.HostOf(netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::1:2:3:4]:80"))
	if want := (core.HostKey{Host: netip.MustParseAddr("2001:db8::"), UID: core.NoUID}); v6 != want {
		t.Errorf("IPv6 host: key %v, want %v", v6, want)
	}
}
