package ibv

import (
	"net"
	"net/netip"
	"testing"
)

// TestActiveMTU: a device's active MTU is the largest IB MTU whose packets
// fit its interface's MTU: 4096 on loopback (65536), and on an interface of
// 1500 bytes, such as a veth pair's, 1024 (the namespace test in tests/
// sends over one); an address of lo's network that lo does not list
// (127.0.0.2) is lo's.
func TestActiveMTU(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo:", err)
	}
	if want := mtuFor(lo.MTU); want != MTU4096 {
		t.Errorf("lo's MTU %d gives %v, want MTU4096", lo.MTU, want)
	}
	if got := activeMTU(netip.MustParseAddr("127.0.0.1")); got != MTU4096 {
		t.Errorf("active MTU on lo (MTU %d): %v, want MTU4096", lo.MTU, got)
	}
	if got := activeMTU(netip.MustParseAddr("127.0.0.2")); got != MTU4096 {
		t.Errorf("active MTU of 127.0.0.2: %v, want lo's, MTU4096", got)
	}
	for _, c := range []struct {
		ifMTU int
		want  MTU
	}{{1500, MTU1024}, {9000, MTU4096}, {4176, MTU4096}, {4175, MTU2048}, {576, MTU256}} {
		if got := mtuFor(c.ifMTU); got != c.want {
			t.Errorf("interface MTU %d: %v, want %v", c.ifMTU, got, c.want)
		}
	}
}
