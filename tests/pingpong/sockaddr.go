package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/fabricfs/fabricfs/core/fi"
)

// addrFormat is fi_info.addr_format as it travels on the control
// connection.
type addrFormat = fi.AddrFormat

// rawAddr is an endpoint name as fi_getname returns it and fi_pingpong
// sends it: its address format and its bytes.
type rawAddr struct {
	format addrFormat
	bytes  []byte
}

// Sizes of the C socket addresses (Linux).
const (
	sizeofSockaddrIn  = 16 // struct sockaddr_in
	sizeofSockaddrIn6 = 28 // struct sockaddr_in6
)

// encodeSockaddr lays ap out as the struct sockaddr_in (FI_SOCKADDR_IN) or
// sockaddr_in6 (FI_SOCKADDR_IN6) a libfabric tcp endpoint's fi_getname
// gives: the family in native order, the port and address in network order.
func encodeSockaddr(ap netip.AddrPort) rawAddr {
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		b := make([]byte, sizeofSockaddrIn)
		binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ip.As4()
		copy(b[4:8], a4[:]) // sin_zero stays zero
		return rawAddr{format: fi.SOCKADDR_IN, bytes: b}
	}
	b := make([]byte, sizeofSockaddrIn6)
	binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a16 := ip.As16() // sin6_flowinfo (b[4:8]) is zero
	copy(b[8:24], a16[:])
	// sin6_scope_id (b[24:28]): libfabric's FI_ADDR_STR leaves zones out, so do we.
	return rawAddr{format: fi.SOCKADDR_IN6, bytes: b}
}

// decodeSockaddr reads a name received from the peer. It takes the socket
// formats a tcp endpoint uses, checking the length and family.
func decodeSockaddr(a rawAddr) (netip.AddrPort, error) {
	b := a.bytes
	family := -1
	if len(b) >= 2 {
		family = int(binary.NativeEndian.Uint16(b))
	}
	want := map[addrFormat]int{fi.SOCKADDR_IN: syscall.AF_INET, fi.SOCKADDR_IN6: syscall.AF_INET6}[a.format]
	switch {
	case a.format != fi.SOCKADDR && a.format != fi.SOCKADDR_IN && a.format != fi.SOCKADDR_IN6:
		return netip.AddrPort{}, fmt.Errorf("peer address: format %v (%d) is not supported: want FI_SOCKADDR_IN or FI_SOCKADDR_IN6", a.format, uint32(a.format))
	case want != 0 && family != want:
		return netip.AddrPort{}, fmt.Errorf("peer address: %v with family %d: want %d", a.format, family, want)
	case family == syscall.AF_INET && len(b) == sizeofSockaddrIn:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), nil
	case family == syscall.AF_INET6 && len(b) == sizeofSockaddrIn6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:])), nil
	}
	return netip.AddrPort{}, fmt.Errorf("peer address: %v of %d bytes (%x) is not a struct sockaddr_in (%d bytes) or sockaddr_in6 (%d bytes)",
		a.format, len(b), b, sizeofSockaddrIn, sizeofSockaddrIn6)
}
