package fi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// The offered entries of the tests: what a host with a loopback interface
// (127.0.0.1), an Ethernet interface eth0 (10.0.0.5) with a soft-RoCE device
// rxe0 on it, and an IPv6-only interface v6 (fd00::5) would offer, best
// first. Each call returns fresh copies.
func testOffered() []*Info {
	const tcpCaps = MSG | RMA | SEND | RECV | READ | WRITE | REMOTE_READ | REMOTE_WRITE |
		LOCAL_COMM | REMOTE_COMM
	const rdmCaps = tcpCaps | TAGGED | DIRECTED_RECV | MULTI_RECV | SOURCE | RMA_EVENT
	const verbsCaps = MSG | RMA | ATOMIC | SEND | RECV | READ | WRITE | REMOTE_READ | REMOTE_WRITE |
		LOCAL_COMM | REMOTE_COMM
	const txOps = COMPLETION | INJECT | INJECT_COMPLETE | TRANSMIT_COMPLETE | DELIVERY_COMPLETE
	tcp := func(prov, fabric, domain, ip string, typ EPType, caps Caps) *Info {
		a := netip.MustParseAddr(ip)
		f := SOCKADDR_IN
		if a.Is6() {
			f = SOCKADDR_IN6
		}
		in := &Info{
			Caps: caps, AddrFormat: f,
			SrcAddr: &Addr{Format: f, IP: netip.AddrPortFrom(a, 0)},
			TxAttr: &TxAttr{Caps: txCaps(caps), OpFlags: txOps, MsgOrder: ORDER_SAS | ORDER_RAR | ORDER_WAW,
				CompOrder: ORDER_STRICT, InjectSize: 128, Size: 1024, IovLimit: 4, RMAIovLimit: 4},
			RxAttr: &RxAttr{Caps: rxCaps(caps), OpFlags: COMPLETION, MsgOrder: ORDER_SAS | ORDER_RAR | ORDER_WAW,
				CompOrder: ORDER_STRICT, TotalBufferedRecv: 65536, Size: 1024, IovLimit: 4},
			EPAttr: &EPAttr{Type: typ, Protocol: PROTO_SOCK_TCP, MaxMsgSize: 1 << 31,
				MaxOrderRAWSize: 1 << 31, MaxOrderWARSize: 1 << 31, MaxOrderWAWSize: 1 << 31, TxCtxCnt: 1, RxCtxCnt: 1},
			DomainAttr: &DomainAttr{Name: domain, Threading: THREAD_SAFE, ControlProgress: PROGRESS_AUTO,
				DataProgress: PROGRESS_AUTO, ResourceMgmt: RM_ENABLED, AVType: AV_UNSPEC, MRKeySize: 8,
				CQDataSize: 8, CQCnt: 256, EPCnt: 8192, TxCtxCnt: 256, RxCtxCnt: 256, MaxEPTxCtx: 1,
				MaxEPRxCtx: 1, MaxEPSrxCtx: 128, CntrCnt: 256, MRIovLimit: 1, Caps: LOCAL_COMM | REMOTE_COMM,
				MRCnt: 65536},
			FabricAttr: &FabricAttr{Name: fabric, ProvName: prov, ProvVersion: MakeVersion(117, 0)},
		}
		if typ == EP_RDM {
			in.EPAttr.Protocol = PROTO_RXM_TCP
			in.EPAttr.MemTagFormat = 0xaaaaaaaaaaaaaaaa
			in.FabricAttr.ProvVersion = MakeVersion(117, 1)
		}
		return in
	}
	verbs := func(prov, domain string, typ EPType, caps Caps, mode Mode) *Info {
		in := tcp(prov, "IB-0xfe80000000000000", domain, "10.0.0.5", typ, caps)
		in.Mode = mode
		in.TxAttr.Mode, in.RxAttr.Mode = mode, mode
		in.TxAttr.OpFlags = COMPLETION | INJECT
		in.TxAttr.InjectSize, in.TxAttr.Size, in.RxAttr.Size = 64, 384, 384
		in.EPAttr.Protocol, in.EPAttr.MaxMsgSize = PROTO_RDMA_CM_IB_RC, 1<<30
		in.DomainAttr.MRMode = MR_LOCAL | mrBasicMap | MR_BASIC
		in.DomainAttr.CQDataSize = 4
		in.DomainAttr.Threading = THREAD_FID
		in.DomainAttr.MaxEPSrxCtx = 0
		in.FabricAttr.ProvVersion = MakeVersion(117, 0)
		switch typ {
		case EP_RDM:
			in.EPAttr.Protocol = PROTO_RXM
			in.EPAttr.MemTagFormat = 0xffffffff
			in.FabricAttr.ProvVersion = MakeVersion(117, 1)
		case EP_DGRAM:
			in.EPAttr.Protocol, in.EPAttr.MsgPrefixSize, in.EPAttr.MaxMsgSize = PROTO_IB_UD, 40, 4096
			in.DomainAttr.Threading = THREAD_DOMAIN
			in.DomainAttr.DataProgress = PROGRESS_MANUAL
			in.DomainAttr.AVType = AV_MAP
			in.DomainAttr.Mode = RESTRICTED_COMP
		}
		return in
	}
	return []*Info{
		tcp("tcp", "127.0.0.0/8", "lo", "127.0.0.1", EP_MSG, tcpCaps),
		tcp("tcp;ofi_rxm", "127.0.0.0/8", "lo", "127.0.0.1", EP_RDM, rdmCaps),
		tcp("tcp", "10.0.0.0/24", "eth0", "10.0.0.5", EP_MSG, tcpCaps),
		tcp("tcp;ofi_rxm", "10.0.0.0/24", "eth0", "10.0.0.5", EP_RDM, rdmCaps),
		tcp("tcp", "fd00::/64", "v6", "fd00::5", EP_MSG, tcpCaps),
		verbs("verbs", "rxe0", EP_MSG, verbsCaps, 0),
		verbs("verbs;ofi_rxm", "rxe0", EP_RDM, tcpCaps|TAGGED|MULTI_RECV|SOURCE, CONTEXT),
		verbs("verbs", "rxe0-dgram", EP_DGRAM, MSG|SEND|RECV|LOCAL_COMM|REMOTE_COMM, MSG_PREFIX),
	}
}

// id names an entry in the tables: "tcp lo msg", "verbs;ofi_rxm rxe0 rdm".
func id(in *Info) string {
	return fmt.Sprintf("%s %s %s", in.FabricAttr.ProvName, in.DomainAttr.Name,
		strings.ToLower(strings.TrimPrefix(in.EPAttr.Type.String(), "FI_EP_")))
}

func ids(infos []*Info) []string {
	var s []string
	for _, in := range infos {
		s = append(s, id(in))
	}
	return s
}

var (
	allIDs = []string{"tcp lo msg", "tcp;ofi_rxm lo rdm", "tcp eth0 msg", "tcp;ofi_rxm eth0 rdm", "tcp v6 msg",
		"verbs rxe0 msg", "verbs;ofi_rxm rxe0 rdm", "verbs rxe0-dgram dgram"}
	// modeless: the entries an application that supports no modes gets.
	modeless = []string{"tcp lo msg", "tcp;ofi_rxm lo rdm", "tcp eth0 msg", "tcp;ofi_rxm eth0 rdm", "tcp v6 msg",
		"verbs rxe0 msg"}
	tcpIDs = []string{"tcp lo msg", "tcp;ofi_rxm lo rdm", "tcp eth0 msg", "tcp;ofi_rxm eth0 rdm", "tcp v6 msg"}
	loIDs  = []string{"tcp lo msg", "tcp;ofi_rxm lo rdm"}
	ethIDs = []string{"tcp eth0 msg", "tcp;ofi_rxm eth0 rdm", "verbs rxe0 msg"}
	// ethAll: every entry on 10.0.0.5, whatever its modes.
	ethAll = append(slices.Clone(ethIDs), "verbs;ofi_rxm rxe0 rdm", "verbs rxe0-dgram dgram")
)

// fakeNet replaces name, service and route look-ups with a fixed world:
// localhost is 127.0.0.1 and ::1, node7 is 10.0.0.7, v6host is fd00::7;
// loopback destinations are reached from 127.0.0.1 (::1), everything else
// IPv4 from eth0's 10.0.0.5, IPv6 from fd00::5. It counts look-ups.
func fakeNet(t testing.TB) *int {
	lookups := new(int)
	host, port, route := lookupHost, lookupPort, getinfoRoute
	t.Cleanup(func() { lookupHost, lookupPort, getinfoRoute = host, port, route })
	lookupHost = func(_ context.Context, h string) ([]netip.Addr, error) {
		*lookups++
		switch h {
		case "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
		case "node7":
			return []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.7")}, nil
		case "v6host":
			return []netip.Addr{netip.MustParseAddr("fd00::7")}, nil
		}
		return nil, fmt.Errorf("lookup %s: no such host", h)
	}
	lookupPort = func(_ context.Context, s string) (int, error) {
		if s == "http" {
			return 80, nil
		}
		return 0, fmt.Errorf("unknown port %s", s)
	}
	getinfoRoute = func(dst netip.Addr) (netip.Addr, bool) {
		switch {
		case dst.IsLoopback() && dst.Is4():
			return netip.MustParseAddr("127.0.0.1"), true
		case dst.IsLoopback():
			return netip.IPv6Loopback(), true
		case dst.Is4():
			return netip.MustParseAddr("10.0.0.5"), true
		}
		return netip.MustParseAddr("fd00::5"), true
	}
	return lookups
}

func addr(s string) *Addr {
	a, err := ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return &a
}

// Checks on the output of a case.
type infoCheck func(out []*Info) string

// each checks f on every returned entry: f returns what is wrong, or "".
func each(f func(in *Info) string) infoCheck {
	return func(out []*Info) string {
		for _, in := range out {
			if s := f(in); s != "" {
				return id(in) + ": " + s
			}
		}
		return ""
	}
}

func expect[T comparable](name string, got, want T) string {
	if got != want {
		return fmt.Sprintf("%s = %v, want %v", name, got, want)
	}
	return ""
}

func expectAddr(name string, got *Addr, want string) string {
	if got == nil {
		if want == "" {
			return ""
		}
		return fmt.Sprintf("%s = nil, want %s", name, want)
	}
	return expect(name, got.String(), want)
}

var v1_17 = MakeVersion(1, 17)

// A getinfoCase is one call of GetInfo and what it must return. Each case
// quotes the sentence of the man pages it checks (fi_getinfo(3) unless
// another page is named). The cases are in getinfo_cases_test.go (names,
// version, modes, capabilities, flags), getinfo_addr_test.go (node and
// service) and getinfo_attrs_test.go (attributes).
type getinfoCase struct {
	name          string
	quote         string
	version       Version // 0: 1.17
	node, service string
	flags         uint64
	hints         *Info
	offered       func() []*Info // nil: testOffered
	err           Errno          // 0: success
	errText       string         // the error contains this
	want          []string       // ids of the returned entries, in order
	check         infoCheck
}

func TestGetInfo(t *testing.T) {
	fakeNet(t)
	for _, tt := range slices.Concat(getinfoTests, getinfoAddrTests, getinfoAttrTests) {
		t.Run(tt.name, func(t *testing.T) {
			if tt.quote == "" {
				t.Fatal("case quotes no man-page sentence")
			}
			version := tt.version
			if version == 0 {
				version = v1_17
			}
			offered := testOffered()
			if tt.offered != nil {
				offered = tt.offered()
			}
			call := fmt.Sprintf("%v, %q, %q, %#x, %s", version, tt.node, tt.service, tt.flags, tt.name)
			out, err := GetInfo(context.Background(), version, tt.node, tt.service, tt.flags, tt.hints, offered)
			if tt.err != 0 {
				if !errors.Is(err, tt.err) || !strings.Contains(fmt.Sprint(err), tt.errText) {
					t.Fatalf("GetInfo(%s) = %v, %v, want %v error containing %q\n(%s)", call, ids(out), err,
						tt.err.Name(), tt.errText, tt.quote)
				}
				if out != nil {
					t.Errorf("GetInfo(%s) returned %v with error %v", call, ids(out), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetInfo(%s) = %v, want %v\n(%s)", call, err, tt.want, tt.quote)
			}
			if tt.want != nil && !slices.Equal(ids(out), tt.want) {
				t.Fatalf("GetInfo(%s) = %v, want %v\n(%s)", call, ids(out), tt.want, tt.quote)
			}
			if tt.check != nil {
				if s := tt.check(out); s != "" {
					t.Errorf("GetInfo(%s): %s\n(%s)", call, s, tt.quote)
				}
			}
		})
	}
}

// TestGetInfoCopies: GetInfo "returns deep copies" and leaves its inputs
// alone.
func TestGetInfoCopies(t *testing.T) {
	fakeNet(t)
	offered := testOffered()
	hints := &Info{Mode: CONTEXT | MSG_PREFIX, Caps: MSG, EPAttr: &EPAttr{AuthKey: nil}, DomainAttr: &DomainAttr{Name: "lo"}}
	before := fmt.Sprint(offered, hints)
	out, err := GetInfo(context.Background(), v1_17, "127.0.0.1", "7000", 0, hints, offered)
	if err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(offered, hints); after != before {
		t.Errorf("GetInfo modified its inputs:\n%s\n%s", before, after)
	}
	for _, in := range out {
		in.TxAttr.Size = 1
		in.DomainAttr.Name = "changed"
		in.SrcAddr.IP = netip.AddrPort{}
		in.FabricAttr.ProvName = "changed"
	}
	if after := fmt.Sprint(offered, hints); after != before {
		t.Errorf("GetInfo's output shares memory with its input")
	}
}

// TestGetInfoRealNet uses the Go resolver and the kernel's routes for
// loopback addresses, which every host has.
func TestGetInfoRealNet(t *testing.T) {
	for _, node := range []string{"127.0.0.1", "localhost"} {
		out, err := GetInfo(context.Background(), v1_17, node, "7000", 0, &Info{FabricAttr: &FabricAttr{ProvName: "tcp"}}, testOffered())
		if err != nil {
			if node == "localhost" && errors.Is(err, ENODATA) {
				t.Skipf("GetInfo(%q): %v (no resolver for localhost here)", node, err)
			}
			t.Fatalf("GetInfo(%q) = %v", node, err)
		}
		if got := ids(out); !slices.Equal(got, loIDs) {
			t.Errorf("GetInfo(%q) = %v, want %v", node, got, loIDs)
		}
	}
}

// TestGetInfoNumericNoLookup: FI_NUMERICHOST "will suppress any lengthy name
// resolution protocol".
func TestGetInfoNumericNoLookup(t *testing.T) {
	lookups := fakeNet(t)
	for _, node := range []string{"localhost", "10.0.0.7", "fi_sockaddr_in://127.0.0.1:1"} {
		GetInfo(context.Background(), v1_17, node, "", uint64(NUMERICHOST), nil, testOffered())
	}
	if *lookups != 0 {
		t.Errorf("GetInfo with FI_NUMERICHOST looked up %d names", *lookups)
	}
}

// TestGetInfoErrors: errors are Errno values with a sentence, usable with
// errors.Is and errors.As.
func TestGetInfoErrors(t *testing.T) {
	_, err := GetInfo(context.Background(), v1_17, "", "", 0, &Info{Caps: TAGGED, EPAttr: &EPAttr{Type: EP_MSG}}, testOffered())
	var code Errno
	if !errors.As(err, &code) || code != ENODATA {
		t.Fatalf("errors.As(%v) = %v, want FI_ENODATA", err, code)
	}
	if want := "fi_getinfo: no provider supports FI_TAGGED on FI_EP_MSG"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}
