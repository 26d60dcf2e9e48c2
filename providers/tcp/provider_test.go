package tcp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

func ipNet(t *testing.T, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func TestNetAddr(t *testing.T) {
	tests := []struct{ cidr, network string }{
		{"192.0.2.2/24", "192.0.2.0/24"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"172.16.5.4/32", "172.16.5.4/32"},
		{"fd00::2/64", "fd00::/64"},
		{"fe80::fc:ff:fe00:1/64", "fe80::/64"},
		{"2001:db8::1/128", "2001:db8::1/128"},
	}
	for _, tt := range tests {
		a, ok := netAddr("eth0", ipNet(t, tt.cidr), 0)
		if !ok || a.network != tt.network {
			t.Errorf("netAddr(%s) = %q, %v; want %q", tt.cidr, a.network, ok, tt.network)
		}
	}
}

// TestSortAddrs checks libfabric's order: faster links first, IPv4 before
// IPv6, equal ones in reverse getifaddrs order, then lo's two fixed entries.
func TestSortAddrs(t *testing.T) {
	in := []struct {
		name, cidr string
		speed      uint64
	}{ // getifaddrs order: IPv4 of every interface, then IPv6
		{"eth0", "192.0.2.2/24", 100},
		{"eth1", "198.51.100.7/24", 100},
		{"ib0", "10.0.0.5/8", 100000},
		{"eth0", "fd00::2/64", 100},
		{"eth0", "fe80::fc:ff:fe00:1/64", 100},
		{"ib0", "fe80::1/64", 100000},
	}
	var addrs []ifAddr
	for _, a := range in {
		ia, _ := netAddr(a.name, ipNet(t, a.cidr), a.speed)
		addrs = append(addrs, ia)
	}
	want := []string{
		"ib0 10.0.0.0/8", "ib0 fe80::/64",
		"eth1 198.51.100.0/24", "eth0 192.0.2.0/24",
		"eth0 fe80::/64", "eth0 fd00::/64",
		"lo 127.0.0.1/32", "lo ::1/128",
	}
	var got []string
	for _, in := range newProvider(sortAddrs(addrs)).Infos() {
		got = append(got, in.DomainAttr.Name+" "+in.FabricAttr.Name)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoopbackInfo(t *testing.T) {
	infos := newProvider(sortAddrs(nil)).Infos()
	if len(infos) != 2 {
		t.Fatalf("%d infos, want 2", len(infos))
	}
	in := infos[0]
	if in.Caps != epCaps|fi.LOCAL_COMM || in.DomainAttr.Caps != fi.LOCAL_COMM|fi.REMOTE_COMM {
		t.Errorf("lo caps %v, domain caps %v", in.Caps, in.DomainAttr.Caps)
	}
	if in.SrcAddr.String() != "fi_sockaddr_in://127.0.0.1:0" || infos[1].SrcAddr.String() != "fi_sockaddr_in6://[::1]:0" {
		t.Errorf("src addrs %v, %v", in.SrcAddr, infos[1].SrcAddr)
	}
	in.DomainAttr.Name = "changed"
	if newProvider(sortAddrs(nil)).Infos()[0].DomainAttr.Name != "lo" {
		t.Errorf("Infos returns shared entries")
	}
}

// TestInfosMatchFiInfo compares our entries with libfabric's own, as
// `fi_info -v -p tcp -t FI_EP_MSG` prints them on this host: same entries
// in the same order, same values except where fabricfs differs on purpose.
func TestInfosMatchFiInfo(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	compareFiInfo(t, p, nil)
}

// compareFiInfo compares p's entries with those `fi_info -v -p tcp -t
// FI_EP_MSG` prints with environment variables env added.
func compareFiInfo(t *testing.T, p *Provider, env []string) {
	t.Helper()
	cmd := exec.Command("fi_info", "-v", "-p", "tcp", "-t", "FI_EP_MSG")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("fi_info (libfabric-bin) not usable: %v", err)
	}
	var b strings.Builder
	if err := fi.WriteInfos(&b, p.Infos()); err != nil {
		t.Fatal(err)
	}
	// Values fabricfs reports differently, on purpose: capabilities it does
	// not implement yet, shared transmit contexts (core's, for every
	// provider), its own version.
	differ := map[string]bool{"caps": true,
		"max_ep_srx_ctx": true, "max_ep_stx_ctx": true, "prov_version": true, "cntr_cnt": true}
	theirs := strings.Split(strings.TrimSpace(string(out)), "\n")
	ours := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(theirs) != len(ours) {
		t.Fatalf("fi_info prints %d lines, we %d:\n%s", len(theirs), len(ours), b.String())
	}
	for i := range theirs {
		key, _, _ := strings.Cut(strings.TrimSpace(theirs[i]), ":")
		if theirs[i] != ours[i] && !differ[key] {
			t.Errorf("line %d: fi_info %q, we %q", i+1, theirs[i], ours[i])
		}
	}
}

func TestOpenDomain(t *testing.T) {
	p := newProvider(sortAddrs(nil))
	if p.Name() != "tcp" {
		t.Errorf("Name() = %q", p.Name())
	}
	if _, err := p.OpenDomain("nope"); !errors.Is(err, fi.ENODEV) {
		t.Errorf("OpenDomain(nope) = %v, want ENODEV", err)
	}
	d, err := p.OpenDomain("lo")
	if err != nil {
		t.Fatal(err)
	}
	info := p.Infos()[0]
	bad := info.Clone()
	bad.EPAttr.Type = fi.EP_RDM
	if _, err := d.NewEndpoint(bad, nil, provtest.NewEPEvents()); !errors.Is(err, fi.EOPNOTSUPP) {
		t.Errorf("RDM endpoint = %v, want EOPNOTSUPP", err)
	}
	bad = info.Clone()
	bad.Caps |= fi.ATOMIC
	if _, err := d.NewPassiveEndpoint(bad, provtest.NewPEPEvents()); !errors.Is(err, fi.EOPNOTSUPP) {
		t.Errorf("FI_ATOMIC passive endpoint = %v, want EOPNOTSUPP", err)
	}
	bad = info.Clone()
	bad.TxAttr.Size = MaxQueueSize + 1
	if _, err := d.NewEndpoint(bad, nil, provtest.NewEPEvents()); !errors.Is(err, fi.EINVAL) {
		t.Errorf("tx_size %d = %v, want EINVAL", bad.TxAttr.Size, err)
	}
	e, err := d.NewEndpoint(info, nil, provtest.NewEPEvents())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, fi.EBUSY) {
		t.Errorf("domain Close with an endpoint open = %v, want EBUSY", err)
	}
	if a, err := e.Name(); err != nil || a.IP != netip.MustParseAddrPort("127.0.0.1:0") {
		t.Errorf("Name before connect = %v, %v", a, err)
	}
	if _, err := e.Peer(); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("Peer before connect = %v, want ENOTCONN", err)
	}
	e.Close()
	if err := d.Close(); err != nil {
		t.Errorf("domain Close = %v", err)
	}
	var _ core.Provider = p
}

// TestIPv6 connects over ::1.
func TestIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
	p := newProvider(sortAddrs(nil))
	info := p.Infos()[1]
	d := &domain{name: "lo"}
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	if addr.Format != fi.SOCKADDR_IN6 {
		t.Errorf("pep address %v", addr)
	}
	cli := dial(t, d, info, addr, []byte("v6"))
	defer cli.ep.Close()
	srv, req := accept(t, d, pev, []byte("six"))
	defer srv.ep.Close()
	if got := cli.ev.WaitConnected(t); string(got) != "six" || string(req.Data()) != "v6" {
		t.Errorf("data %q, %q", got, req.Data())
	}
}
