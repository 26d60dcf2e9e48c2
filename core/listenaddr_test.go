package core

import (
	"context"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// oneAddr is a provider whose one domain, eth0, has the address ip.
type oneAddr struct {
	Provider
	ip netip.Addr
}

func (p oneAddr) Infos() []*fi.Info {
	a := fi.SockAddr(netip.AddrPortFrom(p.ip, 0))
	return []*fi.Info{{SrcAddr: &a, DomainAttr: &fi.DomainAttr{Name: "eth0"}}}
}

// A listener's address has its domain's zone, not the one the caller
// wrote: fe80::1%eth1 in the domain of eth0 is eth0's fe80::1.
func TestListenAddrZone(t *testing.T) {
	d := &Domain{Prov: oneAddr{ip: netip.MustParseAddr("fe80::1%eth0")}, Name: "eth0"}
	for _, in := range []string{"[fe80::1%eth1]:5000", "[fe80::1]:5000", "[fe80::1%eth0]:5000"} {
		a := fi.SockAddr(netip.MustParseAddrPort(in))
		got, err := d.listenAddr(context.Background(), 1000, a)
		if err != nil {
			t.Errorf("listen %s: %v", in, err)
			continue
		}
		if z := got.IP.Addr().Zone(); z != "eth0" || got.IP.Port() != 5000 {
			t.Errorf("listen %s took %v (zone %q), want fe80::1%%eth0:5000", in, got.IP, z)
		}
	}
}
