package core

import (
	"fmt"
	"net/netip"
)

// HostKey is what the limits per remote host count under: the host a
// peer's address belongs to and, for a peer on this host, the user whose
// socket it is (NoUID for a peer elsewhere), so that one local user
// cannot use up another's share.
type HostKey struct {
	Host netip.Addr
	UID  uint32
}

// HostOf is the HostKey of the peer at remote of a connection whose end
// here is local (local zero: remote is a listener this side connects to).
// The host is remote's IPv4 address, or the /64 of its IPv6 address (what
// one host is given to choose from). The user is the owner of the peer's
// socket, if it is on this host: for a socket the daemon made for an
// endpoint (OwnSocket) the endpoint's owner, else the uid the kernel
// reports (sock_diag); a peer elsewhere is NoUID, capped as a whole.
func HostOf(local, remote netip.AddrPort) HostKey {
	ip := remote.Addr().Unmap()
	k := HostKey{Host: ip, UID: NoUID}
	if !ip.Is4() {
		pfx, _ := ip.Prefix(64)
		k.Host = pfx.Addr()
	}
	if uid, err := socketOwner(remote, local); err == nil {
		k.UID = uid
	}
	return k
}

// String is "host H", or "host H, uid U" for a peer on this host.
func (k HostKey) String() string {
	if k.UID == NoUID {
		return fmt.Sprintf("host %v", k.Host)
	}
	return fmt.Sprintf("host %v, uid %d", k.Host, k.UID)
}
