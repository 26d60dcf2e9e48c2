package fi

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Sizes of the C socket addresses the socket formats stand for.
const (
	sizeofSockaddrIn  = 16 // struct sockaddr_in
	sizeofSockaddrIn6 = 28 // struct sockaddr_in6
)

// is4 reports whether a prints as IPv4: an IPv4 address, or with Format
// SOCKADDR_IN an IPv4-mapped IPv6 one.
func (a Addr) is4() bool {
	ip := a.IP.Addr()
	return ip.Is4() || a.Format == SOCKADDR_IN && ip.Is4In6()
}

// String prints a in libfabric's FI_ADDR_STR form, as fi_tostr prints
// src_addr and dest_addr: fi_sockaddr_in://127.0.0.1:7000 or
// fi_sockaddr_in6://[::1]:7000. The IP's family decides the form, whatever
// the Format. Like libfabric it leaves out an IPv6 zone (sin6_scope_id).
// An Addr without an IP prints as its Str.
func (a Addr) String() string {
	ip := a.IP.Addr()
	if !ip.IsValid() {
		return a.Str
	}
	port := strconv.FormatUint(uint64(a.IP.Port()), 10)
	if a.is4() {
		return "fi_sockaddr_in://" + ip.Unmap().String() + ":" + port
	}
	return "fi_sockaddr_in6://[" + ip.WithZone("").String() + "]:" + port
}

// Len is the length libfabric gives the address (src_addrlen,
// dest_addrlen): sizeof(struct sockaddr_in), 16, or sizeof(struct
// sockaddr_in6), 28, by the IP's family; with Format ADDR_STR, the length
// of String with its terminating NUL. An Addr with neither IP nor Str has
// length 0.
func (a Addr) Len() int {
	switch {
	case !a.IP.Addr().IsValid() && a.Str == "":
		return 0
	case a.Format == ADDR_STR || !a.IP.Addr().IsValid():
		return len(a.String()) + 1
	case a.is4():
		return sizeofSockaddrIn
	}
	return sizeofSockaddrIn6
}

// ResolveAddr reads an ADDR argument of the ctl verbs connect, listen and
// insert: any form ParseAddr reads, or host:port with a host name, which
// the Go resolver looks up until ctx (the request) ends. A name takes its
// first address.
func ResolveAddr(ctx context.Context, s string) (Addr, error) {
	if a, err := ParseAddr(s); err == nil {
		return a, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Addr{}, fmt.Errorf("bad address %q: want host:port, [v6]:port or fi_sockaddr_in://IP:PORT", s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return Addr{}, fmt.Errorf("bad port in address %q", s)
	}
	ips, err := lookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return Addr{}, fmt.Errorf("cannot resolve %q", host)
	}
	ip := ips[0].Unmap()
	f := SOCKADDR_IN
	if ip.Is6() {
		f = SOCKADDR_IN6
	}
	return Addr{Format: f, IP: netip.AddrPortFrom(ip, uint16(p))}, nil
}

// ParseAddr reads an address in any of the forms fabricfs accepts:
//
//	127.0.0.1:7000   [::1]:7000
//	fi_sockaddr_in://127.0.0.1:7000   fi_sockaddr_in6://[::1]:7000
//	fi_sockaddr://127.0.0.1:7000      fi_sockaddr://[::1]:7000
//
// Hosts must be numeric (ResolveAddr resolves names); the port is
// required, in decimal. An IPv6 address may carry a zone ("[fe80::1%eth0]:7").
// The result's Format is SOCKADDR_IN or SOCKADDR_IN6, by the address's
// family. The shm provider's endpoints are named instead, in the forms of
// libfabric's shm provider, fi_shm://NAME (ShmScheme) and
// fi_ns://NODE:SERVICE (NsScheme): that is an Addr of Format ADDR_STR
// with the whole string as Str (IsName).
func ParseAddr(s string) (Addr, error) {
	rest, want := s, FORMAT_UNSPEC
	if scheme, r, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "fi_shm":
			return parseName(s, ShmScheme, r, "")
		case "fi_ns":
			return parseName(s, NsScheme, r, ":[]%")
		case "fi_sockaddr_in":
			want = SOCKADDR_IN
		case "fi_sockaddr_in6":
			want = SOCKADDR_IN6
		case "fi_sockaddr":
			want = SOCKADDR
		default:
			return Addr{}, fmt.Errorf("address %q: unsupported format %q; use host:port, [v6]:port, fi_sockaddr_in://, fi_sockaddr_in6://, fi_sockaddr://, fi_shm:// or fi_ns://", s, scheme+"://")
		}
		rest = r
	}
	host, port, err := splitHostPort(rest)
	if err != nil {
		return Addr{}, fmt.Errorf("address %q: %v", s, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return Addr{}, fmt.Errorf("address %q: host %q is not a numeric IP address (names are resolved elsewhere)", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || port[0] == '+' {
		return Addr{}, fmt.Errorf("address %q: bad port %q: want a number from 0 to 65535", s, port)
	}
	f := SOCKADDR_IN6
	if ip.Is4() {
		f = SOCKADDR_IN
	}
	switch {
	case want == SOCKADDR_IN && f != SOCKADDR_IN:
		return Addr{}, fmt.Errorf("address %q: fi_sockaddr_in:// needs an IPv4 address", s)
	case want == SOCKADDR_IN6 && f != SOCKADDR_IN6:
		return Addr{}, fmt.Errorf("address %q: fi_sockaddr_in6:// needs an IPv6 address in brackets", s)
	}
	return Addr{Format: f, IP: netip.AddrPortFrom(ip, uint16(p))}, nil
}

// ShmScheme begins the FI_ADDR_STR address of an endpoint of the shm
// provider, as libfabric's shm writes its names ("fi_shm://24482").
const ShmScheme = "fi_shm://"

// NsScheme begins the name libfabric's shm makes of a node and service
// (fi_ns://NODE:SERVICE, fi_ns://SERVICE): fi_getinfo gives it as the
// shm entry's dest_addr, and with FI_SOURCE as its src_addr, which an
// endpoint opened from that entry takes as its name.
const NsScheme = "fi_ns://"

// MaxShmName is the longest NAME of an fi_shm:// or fi_ns:// address:
// libfabric's shm keeps names in 256 bytes with their NUL (SMR_NAME_MAX).
const MaxShmName = 255

// IsName reports whether a is the name of an endpoint of the shm
// provider: FI_ADDR_STR, fi_shm://NAME or fi_ns://NAME.
func (a Addr) IsName() bool {
	return a.Format == ADDR_STR && !a.IP.Addr().IsValid() &&
		(strings.HasPrefix(a.Str, ShmScheme) || strings.HasPrefix(a.Str, NsScheme))
}

// parseName reads the NAME of scheme+NAME: 1 to MaxShmName letters,
// digits, '.', '_', '-' or one of extra (fi_ns:// names hold a node and
// a service: "fi_ns://127.0.0.1:9228", "fi_ns://[::1]:9228").
func parseName(s, scheme, name, extra string) (Addr, error) {
	if name == "" || len(name) > MaxShmName {
		return Addr{}, fmt.Errorf("address %q: an %s name has 1 to %d characters", s, scheme, MaxShmName)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' ||
			strings.IndexByte(extra, c) >= 0) {
			return Addr{}, fmt.Errorf("address %q: an %s name has only the characters [A-Za-z0-9._%s-]", s, scheme, extra)
		}
	}
	return Addr{Format: ADDR_STR, Str: scheme + name}, nil
}

// splitHostPort splits host:port or [host]:port, the brackets being
// required for IPv6.
func splitHostPort(s string) (host, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", fmt.Errorf("missing port")
	}
	host, port = s[:i], s[i+1:]
	if port == "" {
		return "", "", fmt.Errorf("missing port")
	}
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return "", "", fmt.Errorf("missing ']'")
		}
		host = host[1 : len(host)-1]
		if !strings.Contains(host, ":") {
			return "", "", fmt.Errorf("brackets are for IPv6 addresses only")
		}
		return host, port, nil
	}
	if strings.ContainsAny(host, ":[]") {
		return "", "", fmt.Errorf("an IPv6 address needs brackets: [addr]:port")
	}
	if host == "" {
		return "", "", fmt.Errorf("missing host")
	}
	return host, port, nil
}

// SockAddr is ap as a socket address of its family: SOCKADDR_IN for IPv4
// (also IPv4-mapped IPv6, which it unmaps), else SOCKADDR_IN6.
func SockAddr(ap netip.AddrPort) Addr {
	ip := ap.Addr().Unmap()
	f := SOCKADDR_IN6
	if ip.Is4() {
		f = SOCKADDR_IN
	}
	return Addr{Format: f, IP: netip.AddrPortFrom(ip, ap.Port())}
}

// Address families of struct sockaddr (Linux's values).
const (
	afInet  = 2  // AF_INET
	afInet6 = 10 // AF_INET6
)

// PutSockaddr writes a's IP address as the C struct it stands for: a
// struct sockaddr_in (16 bytes) for an IPv4 address, else a struct
// sockaddr_in6 (28), the family in host order and the port in network
// order as in C, the rest zero. It returns the length, 0 if a has no IP
// address or b is too short.
func (a Addr) PutSockaddr(b []byte) int {
	ip := a.IP.Addr()
	n := sizeofSockaddrIn6
	if a.is4() {
		n = sizeofSockaddrIn
	}
	if !ip.IsValid() || len(b) < n {
		return 0
	}
	clear(b[:n])
	b[2], b[3] = byte(a.IP.Port()>>8), byte(a.IP.Port())
	if n == sizeofSockaddrIn {
		binary.NativeEndian.PutUint16(b, afInet)
		v4 := ip.Unmap().As4()
		copy(b[4:8], v4[:])
	} else {
		binary.NativeEndian.PutUint16(b, afInet6)
		v6 := ip.As16()
		copy(b[8:24], v6[:])
	}
	return n
}

// SockaddrAddr reads a struct sockaddr_in or sockaddr_in6 (PutSockaddr's
// forms) from b; false if b holds neither.
func SockaddrAddr(b []byte) (Addr, bool) {
	if len(b) < sizeofSockaddrIn {
		return Addr{}, false
	}
	port := uint16(b[2])<<8 | uint16(b[3])
	switch binary.NativeEndian.Uint16(b) {
	case afInet:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return Addr{Format: SOCKADDR_IN, IP: netip.AddrPortFrom(ip, port)}, true
	case afInet6:
		if len(b) < sizeofSockaddrIn6 {
			return Addr{}, false
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		return Addr{Format: SOCKADDR_IN6, IP: netip.AddrPortFrom(ip, port)}, true
	}
	return Addr{}, false
}
