package tcp

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

func TestConfigCheck(t *testing.T) {
	for _, c := range []Config{
		{PortLow: 5000, PortHigh: 4000},
		{PortLow: 5000},
		{ConnectTimeout: -time.Second},
		{HandshakeTimeout: -time.Second},
		{ConnReqTimeout: -time.Second},
		{KeepAlive: net.KeepAliveConfig{Idle: -time.Second}},
		{KeepAlive: net.KeepAliveConfig{Count: -1}},
		{Ifaces: []string{""}},
	} {
		if _, err := New(c); core.Code(err) != fi.EINVAL {
			t.Errorf("New(%+v): %v, want EINVAL", c, err)
		}
	}
	if _, err := New(Config{PortLow: 5000, PortHigh: 5000, NoKeepAlive: true, KeepAlive: net.KeepAliveConfig{Count: -1}}); err != nil {
		t.Errorf("a one-port range, keepalive off: %v", err)
	}
}

// The interface filter gives the entries libfabric gives with
// FI_TCP_IFACE naming the same interface; one that names no interface
// leaves only lo (libfabric would drop the filter), and the interface's
// domain cannot be opened.
func TestConfigIfaces(t *testing.T) {
	all, err := hostAddrs(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) <= 2 {
		t.Skip("no interface but lo")
	}
	name := all[0].ifName
	p, err := New(Config{Ifaces: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range p.Infos() {
		if n := in.DomainAttr.Name; n != name && n != "lo" {
			t.Errorf("filter %s: domain %s", name, n)
		}
	}
	compareFiInfo(t, p, []string{"FI_TCP_IFACE=" + name})

	p, err = New(Config{Ifaces: []string{"ffnosuchif0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range p.Infos() {
		if n := in.DomainAttr.Name; n != "lo" {
			t.Errorf("filter ffnosuchif0: domain %s", n)
		}
	}
	if err := p.Rescan(); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Infos()); n != 2 {
		t.Errorf("after Rescan: %d entries, want lo's 2", n)
	}
	if _, err := p.OpenDomain(name); core.Code(err) != fi.ENODEV {
		t.Errorf("OpenDomain(%s) outside the filter: %v, want ENODEV", name, err)
	}
}

// freeRange finds n consecutive ports of 127.0.0.1 that nothing listens
// on, in the dynamic range above the kernel's usual ephemeral one.
func freeRange(t *testing.T, n int) uint16 {
	t.Helper()
	for range 100 {
		low := 61000 + rand.IntN(4000)
		free := true
		for p := low; p < low+n && free; p++ {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(p)).String())
			if err != nil {
				free = false
				continue
			}
			ln.Close()
		}
		if free {
			return uint16(low)
		}
	}
	t.Fatalf("no %d free consecutive ports", n)
	return 0
}

// Passive endpoints on port 0 listen on ports of the range, each a
// different one, and fail with EADDRNOTAVAIL once all are taken; a port
// asked for is used as asked, outside the range.
func TestConfigPortRange(t *testing.T) {
	const n = 3
	low := freeRange(t, n+1)
	d, info := loDomain()
	d.cfg = Config{PortLow: low, PortHigh: low + n - 1}
	seen := map[int]bool{}
	for range n {
		pep, _ := listen(t, d, info)
		defer pep.Close()
		a, err := pep.Name()
		if err != nil {
			t.Fatal(err)
		}
		port := int(a.IP.Port())
		if port < int(low) || port >= int(low)+n || seen[port] {
			t.Errorf("listening on port %d; range %d-%d, taken %v", port, low, low+n-1, seen)
		}
		seen[port] = true
	}
	pep, err := d.NewPassiveEndpoint(info, provtest.NewPEPEvents())
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	if err := pep.Listen(fi.Addr{}); core.Code(err) != fi.EADDRNOTAVAIL {
		t.Errorf("listen with the range used up: %v, want EADDRNOTAVAIL", err)
	}
	if err := pep.Listen(addrOf(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), low+n).String())); err != nil {
		t.Errorf("listen on port %d, outside the range: %v", low+n, err)
	}
}

// A connect whose SYN goes unanswered fails with ETIMEDOUT after
// ConnectTimeout. The listener's accept queue (backlog 0) is full, so the
// kernel drops further SYNs.
func TestConfigConnectTimeout(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := addrOf(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*unix.SockaddrInet4).Port)).String())
	filler, err := net.Dial("tcp", addr.IP.String()) // fills the queue
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()

	d, info := loDomain()
	d.cfg.ConnectTimeout = 300 * time.Millisecond
	start := time.Now()
	s := dial(t, d, info, addr, nil)
	defer s.ep.Close()
	f := s.ev.WaitFailed(t)
	if el := time.Since(start); core.Code(f.Err) != fi.ETIMEDOUT || el < d.cfg.ConnectTimeout || el > 10*d.cfg.ConnectTimeout {
		t.Errorf("connect failed after %v with %v, want ETIMEDOUT after %v", el, f.Err, d.cfg.ConnectTimeout)
	}
}

// ConnReqTimeout closes a connection that sends nothing, well before
// HandshakeTimeout.
func TestConfigConnReqTimeout(t *testing.T) {
	d, info := loDomain()
	d.cfg.ConnReqTimeout = 200 * time.Millisecond
	pep, _ := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	c := rawDial(t, addr)
	defer c.Close()
	start := time.Now()
	waitClosed(t, c)
	if el := time.Since(start); el > d.cfg.handshakeTimeout()/2 {
		t.Fatalf("silent connection closed after %v", el)
	}
}

// Both ends of a connection carry the keepalive settings, or none.
func TestConfigKeepAlive(t *testing.T) {
	sockopts := func(t *testing.T, e *endpoint) [4]int {
		t.Helper()
		e.mu.Lock()
		defer e.mu.Unlock()
		var v [4]int
		for i, o := range [][2]int{{unix.SOL_SOCKET, unix.SO_KEEPALIVE}, {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE}, {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, {unix.IPPROTO_TCP, unix.TCP_KEEPCNT}} {
			n, err := unix.GetsockoptInt(e.fd, o[0], o[1])
			if err != nil {
				t.Fatal(err)
			}
			v[i] = n
		}
		return v
	}
	for _, c := range []struct {
		cfg  Config
		want [4]int // SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT (the last three when on)
	}{
		{Config{}, [4]int{1, 15, 15, 9}},
		{Config{KeepAlive: net.KeepAliveConfig{Idle: 7 * time.Second, Interval: 3 * time.Second, Count: 4}}, [4]int{1, 7, 3, 4}},
		{Config{NoKeepAlive: true}, [4]int{0}},
	} {
		d, info := loDomain()
		d.cfg = c.cfg
		p := connectOn(t, d, info)
		for _, e := range []*endpoint{p.cli.ep, p.srv.ep} {
			got := sockopts(t, e)
			if got[0] == 0 {
				got = [4]int{}
			}
			if got != c.want {
				t.Errorf("%+v: keepalive, idle, interval, count %v, want %v", c.cfg, got, c.want)
			}
		}
	}
}
