package fi

import (
	"net/netip"
	"testing"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

var parseAddrTests = []struct {
	in   string
	want Addr
	err  string // the error, or "" for none
}{
	{"127.0.0.1:7000", Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7000")}, ""},
	{"[::1]:7000", Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:7000")}, ""},
	{"0.0.0.0:0", Addr{Format: SOCKADDR_IN, IP: ap("0.0.0.0:0")}, ""},
	{"10.0.0.1:65535", Addr{Format: SOCKADDR_IN, IP: ap("10.0.0.1:65535")}, ""},
	{"[fe80::1%eth0]:80", Addr{Format: SOCKADDR_IN6, IP: ap("[fe80::1%eth0]:80")}, ""},
	{"[::ffff:1.2.3.4]:80", Addr{Format: SOCKADDR_IN6, IP: ap("[::ffff:1.2.3.4]:80")}, ""},
	{"fi_sockaddr_in://127.0.0.1:7000", Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7000")}, ""},
	{"FI_SOCKADDR_IN://127.0.0.1:7000", Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7000")}, ""},
	{"fi_sockaddr_in6://[::1]:7000", Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:7000")}, ""},
	{"fi_sockaddr_in6://[fe80::fc:ff:fe00:1]:0", Addr{Format: SOCKADDR_IN6, IP: ap("[fe80::fc:ff:fe00:1]:0")}, ""},
	{"fi_sockaddr://192.0.2.2:1", Addr{Format: SOCKADDR_IN, IP: ap("192.0.2.2:1")}, ""},
	{"fi_sockaddr://[fd00::2]:1", Addr{Format: SOCKADDR_IN6, IP: ap("[fd00::2]:1")}, ""},
	{"fi_shm://24482", Addr{Format: ADDR_STR, Str: "fi_shm://24482"}, ""},
	{"FI_SHM://fabricfs.7", Addr{Format: ADDR_STR, Str: "fi_shm://fabricfs.7"}, ""},
	{"fi_shm://", Addr{}, `address "fi_shm://": an fi_shm:// name has 1 to 255 characters`},
	{"fi_shm://a b", Addr{}, `address "fi_shm://a b": an fi_shm:// name has only the characters [A-Za-z0-9._-]`},
	{"fi_shm://../x/", Addr{}, `address "fi_shm://../x/": an fi_shm:// name has only the characters [A-Za-z0-9._-]`},
	{"fi_shm://a:1", Addr{}, `address "fi_shm://a:1": an fi_shm:// name has only the characters [A-Za-z0-9._-]`},
	// The names libfabric's shm makes of a node and service (smr_resolve_addr).
	{"fi_ns://127.0.0.1:9228", Addr{Format: ADDR_STR, Str: "fi_ns://127.0.0.1:9228"}, ""},
	{"FI_NS://9228", Addr{Format: ADDR_STR, Str: "fi_ns://9228"}, ""},
	{"fi_ns://[fe80::1%lo]:9228", Addr{Format: ADDR_STR, Str: "fi_ns://[fe80::1%lo]:9228"}, ""},
	{"fi_ns://", Addr{}, `address "fi_ns://": an fi_ns:// name has 1 to 255 characters`},
	{"fi_ns://a/b:1", Addr{}, `address "fi_ns://a/b:1": an fi_ns:// name has only the characters [A-Za-z0-9._:[]%-]`},

	{"", Addr{}, `address "": missing port`},
	{"127.0.0.1", Addr{}, `address "127.0.0.1": missing port`},
	{"127.0.0.1:", Addr{}, `address "127.0.0.1:": missing port`},
	{":7000", Addr{}, `address ":7000": missing host`},
	{"localhost:7000", Addr{}, `address "localhost:7000": host "localhost" is not a numeric IP address (names are resolved elsewhere)`},
	{"::1:7000", Addr{}, `address "::1:7000": an IPv6 address needs brackets: [addr]:port`},
	{"[::1:7000", Addr{}, `address "[::1:7000": missing ']'`},
	{"[127.0.0.1]:7000", Addr{}, `address "[127.0.0.1]:7000": brackets are for IPv6 addresses only`},
	{"127.0.0.1:65536", Addr{}, `address "127.0.0.1:65536": bad port "65536": want a number from 0 to 65535`},
	{"127.0.0.1:http", Addr{}, `address "127.0.0.1:http": bad port "http": want a number from 0 to 65535`},
	{"127.0.0.1:+80", Addr{}, `address "127.0.0.1:+80": bad port "+80": want a number from 0 to 65535`},
	{"127.0.0.1:-1", Addr{}, `address "127.0.0.1:-1": bad port "-1": want a number from 0 to 65535`},
	{"1.2.3:80", Addr{}, `address "1.2.3:80": host "1.2.3" is not a numeric IP address (names are resolved elsewhere)`},
	{"fi_sockaddr_in://[::1]:7000", Addr{}, `address "fi_sockaddr_in://[::1]:7000": fi_sockaddr_in:// needs an IPv4 address`},
	{"fi_sockaddr_in6://127.0.0.1:7000", Addr{}, `address "fi_sockaddr_in6://127.0.0.1:7000": fi_sockaddr_in6:// needs an IPv6 address in brackets`},
	{"fi_addr_psmx://1234", Addr{}, `address "fi_addr_psmx://1234": unsupported format "fi_addr_psmx://"; use host:port, [v6]:port, fi_sockaddr_in://, fi_sockaddr_in6://, fi_sockaddr://, fi_shm:// or fi_ns://`},
	{"tcp://127.0.0.1:80", Addr{}, `address "tcp://127.0.0.1:80": unsupported format "tcp://"; use host:port, [v6]:port, fi_sockaddr_in://, fi_sockaddr_in6://, fi_sockaddr://, fi_shm:// or fi_ns://`},
	{" 127.0.0.1:80", Addr{}, `address " 127.0.0.1:80": host " 127.0.0.1" is not a numeric IP address (names are resolved elsewhere)`},
}

func TestParseAddr(t *testing.T) {
	for _, tt := range parseAddrTests {
		got, err := ParseAddr(tt.in)
		errs := ""
		if err != nil {
			errs = err.Error()
		}
		if got != tt.want || errs != tt.err {
			t.Errorf("ParseAddr(%q) = %v, %q, want %v, %q", tt.in, got, errs, tt.want, tt.err)
		}
	}
}

// TestIsName: the shm provider's names are FI_ADDR_STR fi_shm:// and
// fi_ns:// strings; a socket address, or another FI_ADDR_STR string, is not.
func TestIsName(t *testing.T) {
	for _, tt := range []struct {
		a    Addr
		want bool
	}{
		{Addr{Format: ADDR_STR, Str: "fi_shm://fabricfs.1"}, true},
		{Addr{Format: ADDR_STR, Str: "fi_ns://127.0.0.1:9228"}, true},
		{Addr{Format: FORMAT_UNSPEC, Str: "fi_shm://x"}, false},
		{Addr{Format: ADDR_STR, Str: "fi_sockaddr_in://127.0.0.1:1"}, false},
		{Addr{Format: ADDR_STR, IP: ap("127.0.0.1:1")}, false},
		{Addr{}, false},
	} {
		if got := tt.a.IsName(); got != tt.want {
			t.Errorf("%#v.IsName() = %v, want %v", tt.a, got, tt.want)
		}
	}
}

var addrStringTests = []struct {
	a    Addr
	str  string
	len_ int
}{
	{Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7000")}, "fi_sockaddr_in://127.0.0.1:7000", 16},
	{Addr{Format: ADDR_STR, Str: "fi_shm://fabricfs.7"}, "fi_shm://fabricfs.7", 20},
	{Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:7000")}, "fi_sockaddr_in6://[::1]:7000", 28},
	{Addr{Format: SOCKADDR_IN6, IP: ap("[fe80::1%eth0]:80")}, "fi_sockaddr_in6://[fe80::1]:80", 28}, // no zone, like libfabric
	{Addr{Format: SOCKADDR_IN6, IP: ap("[::ffff:1.2.3.4]:80")}, "fi_sockaddr_in6://[::ffff:1.2.3.4]:80", 28},
	{Addr{Format: SOCKADDR_IN, IP: ap("[::ffff:1.2.3.4]:80")}, "fi_sockaddr_in://1.2.3.4:80", 16},
	{Addr{Format: SOCKADDR, IP: ap("192.0.2.2:0")}, "fi_sockaddr_in://192.0.2.2:0", 16},
	{Addr{Format: SOCKADDR, IP: ap("[fd00::2]:0")}, "fi_sockaddr_in6://[fd00::2]:0", 28},
	{Addr{Format: FORMAT_UNSPEC, IP: ap("10.0.0.1:5")}, "fi_sockaddr_in://10.0.0.1:5", 16},
	{Addr{Format: ADDR_STR, IP: ap("10.0.0.1:5")}, "fi_sockaddr_in://10.0.0.1:5", 28},
	{Addr{}, "", 0},
	{Addr{Format: SOCKADDR_IN}, "", 0},
}

func TestAddrString(t *testing.T) {
	for _, tt := range addrStringTests {
		if got := tt.a.String(); got != tt.str {
			t.Errorf("%#v.String() = %q, want %q", tt.a, got, tt.str)
		}
		if got := tt.a.Len(); got != tt.len_ {
			t.Errorf("%#v.Len() = %d, want %d", tt.a, got, tt.len_)
		}
	}
}

// FuzzParseAddr checks that ParseAddr never panics and that what it accepts
// prints as an address it reads back the same (less the IPv6 zone, which
// libfabric's text form does not carry).
func FuzzParseAddr(f *testing.F) {
	for _, tt := range parseAddrTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddr(s)
		if err != nil {
			return
		}
		if n := a.Len(); n != 16 && n != 28 && (a.Format != ADDR_STR || n != len(a.Str)+1) {
			t.Fatalf("ParseAddr(%q).Len() = %d", s, n)
		}
		b, err := ParseAddr(a.String())
		want := a
		want.IP = netip.AddrPortFrom(a.IP.Addr().WithZone(""), a.IP.Port())
		if err != nil || b != want {
			t.Fatalf("ParseAddr(%q) = %v, %v, want %v (from ParseAddr(%q))", a.String(), b, err, want, s)
		}
	})
}

func TestSockAddr(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Addr
	}{
		{"127.0.0.1:7", Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7")}},
		{"[::ffff:10.0.0.1]:8", Addr{Format: SOCKADDR_IN, IP: ap("10.0.0.1:8")}},
		{"[::1]:9", Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:9")}},
	} {
		if got := SockAddr(ap(tt.in)); got != tt.want {
			t.Errorf("SockAddr(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestPutSockaddr: an address as the C struct sockaddr_in / sockaddr_in6
// (the err_data of an FI_EADDRNOTAVAIL completion) and back.
func TestPutSockaddr(t *testing.T) {
	for _, tt := range []struct {
		a    Addr
		want []byte // family (little-endian hosts), port, address
	}{
		{Addr{Format: SOCKADDR_IN, IP: ap("127.0.0.1:7000")}, []byte{2, 0, 0x1b, 0x58, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:9")}, []byte{10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
	} {
		b := make([]byte, 32)
		for i := range b {
			b[i] = 0xee
		}
		n := tt.a.PutSockaddr(b)
		if n != len(tt.want) || string(b[:n]) != string(tt.want) {
			t.Errorf("PutSockaddr(%v) = %d, % x; want % x", tt.a, n, b[:n], tt.want)
		}
		if got, ok := SockaddrAddr(b); !ok || got != tt.a {
			t.Errorf("SockaddrAddr(% x) = %v, %v; want %v", b[:n], got, ok, tt.a)
		}
	}
	if n := (Addr{}).PutSockaddr(make([]byte, 32)); n != 0 {
		t.Errorf("an address without an IP wrote %d bytes", n)
	}
	if n := (Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:9")}).PutSockaddr(make([]byte, 20)); n != 0 {
		t.Errorf("a sockaddr_in6 into 20 bytes wrote %d", n)
	}
	if _, ok := SockaddrAddr(make([]byte, 32)); ok {
		t.Error("zeros read as an address")
	}
}
