package core

import "net/netip"

// HostOf is the host a peer's address belongs to, for the limits per
// remote host: its IPv4 address, or the /64 of its IPv6 address (what one
// host is given to choose from).
func HostOf(a netip.AddrPort) netip.Addr {
	ip := a.Addr().Unmap()
	if ip.Is4() {
		return ip
	}
	pfx, _ := ip.Prefix(64)
	return pfx.Addr()
}
