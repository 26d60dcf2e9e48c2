package fi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
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
	host, port, route := getinfoLookupHost, getinfoLookupPort, getinfoRoute
	t.Cleanup(func() { getinfoLookupHost, getinfoLookupPort, getinfoRoute = host, port, route })
	getinfoLookupHost = func(h string) ([]netip.Addr, error) {
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
	getinfoLookupPort = func(s string) (int, error) {
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

// getinfoTests: each case quotes the sentence of the man pages it checks
// (fi_getinfo(3) unless another page is named).
var getinfoTests = []struct {
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
}{
	// Everything, and order.
	{
		name:  "no hints",
		quote: "If neither node, service or hints are provided, then fi_getinfo simply returns the list all available communication interfaces.",
		want:  allIDs,
		check: each(func(in *Info) string { return expect("api_version", in.FabricAttr.APIVersion, v1_17) }),
	},
	{
		name:  "order",
		quote: "Providers that return multiple endpoints to a single fi_getinfo call should return the endpoints that are highest performing first.",
		hints: &Info{Mode: CONTEXT | MSG_PREFIX},
		want:  allIDs,
	},
	{
		name:    "nothing offered",
		quote:   "If no matching fabric information is available, info will be set to NULL and the call will return -FI_ENODATA.",
		offered: func() []*Info { return nil },
		err:     ENODATA,
	},

	// Version.
	{
		name:    "newer version",
		quote:   "The FI_MAJOR_VERSION and FI_MINOR_VERSION enum values defined in fabric.h specify the latest version of the installed library.",
		version: MakeVersion(1, 18),
		err:     ENOSYS, errText: "1.18",
	},
	{
		name:    "version 0",
		quote:   "Applications should use the FI_VERSION(major, minor) macro to indicate the version",
		version: MakeVersion(0, 9),
		err:     ENOSYS,
	},
	{
		name:    "api_version",
		quote:   "fi_fabric(3) api_version: The interface version requested by the application. This value corresponds to the version parameter passed into fi_getinfo(3).",
		version: MakeVersion(1, 9),
		hints:   &Info{FabricAttr: &FabricAttr{ProvName: "tcp"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:    []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check:   each(func(in *Info) string { return expect("api_version", in.FabricAttr.APIVersion, MakeVersion(1, 9)) }),
	},
	{
		name:  "provider older than version",
		quote: "The version determines the format of all data structures used by any of the fabric interfaces.",
		offered: func() []*Info {
			o := testOffered()
			o[0].FabricAttr.APIVersion = MakeVersion(1, 10)
			return o[:1]
		},
		err: ENODATA, errText: "API version 1.17",
	},

	// Hints in general.
	{
		name:  "nonzero hint must be supported",
		quote: "As a general rule, specifying a non-zero value for input hints indicates that a provider must support the requested value or fail the operation with -FI_ENODATA.",
		hints: &Info{EPAttr: &EPAttr{Type: EP_SOCK_STREAM}},
		err:   ENODATA, errText: "no provider supports FI_EP_SOCK_STREAM",
	},
	{
		name:  "zero hints are wildcards",
		quote: "With the exception of mode bits, hints that are set to zero are treated as a wildcard.",
		hints: &Info{Mode: CONTEXT | MSG_PREFIX, TxAttr: &TxAttr{}, RxAttr: &RxAttr{}, EPAttr: &EPAttr{},
			FabricAttr: &FabricAttr{}},
		want: allIDs,
	},
	{
		name:  "ep type",
		quote: "fi_endpoint(3) type: If specified, indicates the type of fabric interface communication desired.",
		hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
	},
	{
		name:  "bad ep type",
		quote: "fi_endpoint(3) type: Supported types are: FI_EP_DGRAM, FI_EP_MSG, FI_EP_RDM, FI_EP_SOCK_DGRAM, FI_EP_SOCK_STREAM, FI_EP_UNSPEC",
		hints: &Info{EPAttr: &EPAttr{Type: 42}},
		err:   EINVAL,
	},

	// Modes.
	{
		name:  "zero mode supports none",
		quote: "Mode bits that are set to zero indicate the application does not support any modes.",
		hints: &Info{},
		want:  modeless,
	},
	{
		name:  "null hints return the modes",
		quote: "If a NULL hints structure is provided, then the provider's supported set of modes will be returned in the info structure(s).",
		hints: nil,
		want:  allIDs,
		check: func(out []*Info) string {
			return expect("verbs;ofi_rxm mode", out[6].Mode, CONTEXT) + expect("dgram mode", out[7].Mode, MSG_PREFIX)
		},
	},
	{
		name:  "mode filters",
		quote: "On input to fi_getinfo, applications set the mode bits that they support.",
		hints: &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm", "verbs;ofi_rxm rxe0 rdm"},
	},
	{
		name:  "unneeded modes cleared",
		quote: "On output, providers will clear mode bits that are not necessary to achieve high-performance.",
		hints: &Info{Mode: CONTEXT | CONTEXT2 | ASYNC_IOV, FabricAttr: &FabricAttr{ProvName: "ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm", "verbs;ofi_rxm rxe0 rdm"},
		check: func(out []*Info) string {
			return expect("tcp mode", out[0].Mode, 0) + expect("verbs mode", out[2].Mode, CONTEXT)
		},
	},
	{
		name:  "mode required",
		quote: "Mode bits that remain set indicate application requirements for using the fabric interfaces created using the returned fi_info.",
		hints: &Info{Mode: CONTEXT2, FabricAttr: &FabricAttr{ProvName: "verbs;ofi_rxm"}},
		err:   ENODATA, errText: "applications without mode FI_CONTEXT on FI_EP_RDM",
	},
	{
		name:  "tx mode 0 takes the info mode",
		quote: "fi_endpoint(3) tx_attr mode: A mode value of 0 will be ignored on input to fi_getinfo(3), with the mode value of the fi_info structure used instead.",
		hints: &Info{Mode: CONTEXT, TxAttr: &TxAttr{}, RxAttr: &RxAttr{}, FabricAttr: &FabricAttr{ProvName: "verbs;ofi_rxm"}},
		want:  []string{"verbs;ofi_rxm rxe0 rdm"},
		check: each(func(in *Info) string { return expect("tx mode", in.TxAttr.Mode, CONTEXT) }),
	},
	{
		name:  "tx mode of its own",
		quote: "fi_endpoint(3) tx_attr mode: The mode bits will be a subset of those associated with the endpoint.",
		hints: &Info{Mode: CONTEXT, TxAttr: &TxAttr{Mode: ASYNC_IOV}, FabricAttr: &FabricAttr{ProvName: "verbs;ofi_rxm"}},
		err:   ENODATA, errText: "tx_attr.mode FI_CONTEXT",
	},
	{
		name:  "rx mode",
		quote: "fi_endpoint(3) rx_attr mode: A mode value of 0 will be ignored on input to fi_getinfo(3), with the mode value of the fi_info structure used instead.",
		hints: &Info{Mode: CONTEXT, RxAttr: &RxAttr{Mode: CONTEXT2}, FabricAttr: &FabricAttr{ProvName: "verbs;ofi_rxm"}},
		err:   ENODATA, errText: "rx_attr.mode FI_CONTEXT",
	},
	{
		name: "domain mode",
		quote: "fi_domain(3) mode: The operational mode bit related to using the domain. FI_RESTRICTED_COMP: This bit " +
			"indicates that the domain limits completion queues and counters",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{Type: EP_DGRAM},
			DomainAttr: &DomainAttr{MRMode: MR_LOCAL | mrBasicMap}},
		err: ENODATA, errText: "domain_attr.mode FI_RESTRICTED_COMP",
	},
	{
		name:  "domain mode supported",
		quote: "fi_domain(3) mode: The operational mode bit related to using the domain.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{Type: EP_DGRAM},
			DomainAttr: &DomainAttr{MRMode: MR_LOCAL | mrBasicMap, Mode: RESTRICTED_COMP}},
		want: []string{"verbs rxe0-dgram dgram"},
	},

	// Capabilities.
	{
		name:  "zero caps return all",
		quote: "If capabilities in the hint parameter are set to 0, the underlying provider will return the set of capabilities which are supported.",
		hints: &Info{FabricAttr: &FabricAttr{ProvName: "tcp;ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
		check: each(func(in *Info) string { return expect("caps", in.Caps, testOffered()[1].Caps) }),
	},
	{
		name:  "primary caps only when requested",
		quote: "Primary capabilities must explicitly be requested by an application, and a provider must enable support for only those primary capabilities which were selected.",
		hints: &Info{Caps: MSG, FabricAttr: &FabricAttr{ProvName: "tcp"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: each(func(in *Info) string {
			return expect("caps", in.Caps, MSG|SEND|RECV|LOCAL_COMM|REMOTE_COMM) +
				expect("tx caps", in.TxAttr.Caps, MSG|SEND) + expect("rx caps", in.RxAttr.Caps, MSG|RECV)
		}),
	},
	{
		name:  "missing primary cap",
		quote: "Otherwise, providers will return data matching the specified set of capabilities.",
		hints: &Info{Caps: TAGGED, EPAttr: &EPAttr{Type: EP_MSG}},
		err:   ENODATA, errText: "fi_getinfo: no provider supports FI_TAGGED on FI_EP_MSG",
	},
	{
		name:  "atomic",
		quote: "FI_ATOMIC Specifies that the endpoint supports some set of atomic operations.",
		hints: &Info{Caps: ATOMIC},
		want:  []string{"verbs rxe0 msg"},
	},
	{
		name:  "modifiers limit",
		quote: "Primary modifiers are used to limit a primary capability, such as restricting an endpoint to being send-only.",
		hints: &Info{Caps: MSG | SEND, FabricAttr: &FabricAttr{ProvName: "tcp"}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string {
			return expect("caps&RECV", in.Caps&RECV, 0) + expect("tx caps", in.TxAttr.Caps, MSG|SEND) +
				expect("rx caps", in.RxAttr.Caps, 0)
		}),
	},
	{
		name:  "all modifiers assumed",
		quote: "If no modifiers are specified for an applicable capability, all relevant modifiers are assumed.",
		hints: &Info{Caps: MSG | RMA | READ, FabricAttr: &FabricAttr{ProvName: "tcp"}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string {
			return expect("caps", in.Caps&(capPrimary|capMsgDir|capRMADir), MSG|RMA|SEND|RECV|READ) +
				expect("tx caps", in.TxAttr.Caps, MSG|RMA|SEND|READ) + expect("rx caps", in.RxAttr.Caps&^capSecondary, MSG|RECV)
		}),
	},
	{
		name:  "FI_MSG implies send and receive",
		quote: "In the absence of any relevant flags, FI_MSG implies the ability to send and receive messages.",
		hints: &Info{Caps: MSG, EPAttr: &EPAttr{Type: EP_MSG}},
		offered: func() []*Info {
			o := testOffered()[:1]
			o[0].Caps &^= RECV
			return o
		},
		err: ENODATA, errText: "FI_RECV on FI_EP_MSG",
	},
	{
		name:  "free secondary caps reported",
		quote: "A provider may optionally report non-selected secondary capabilities if doing so would not compromise performance or security.",
		hints: &Info{Caps: TAGGED, FabricAttr: &FabricAttr{ProvName: "tcp;ofi_rxm"}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  []string{"tcp;ofi_rxm lo rdm"},
		check: each(func(in *Info) string {
			return expect("caps", in.Caps, TAGGED|SEND|RECV|MULTI_RECV|LOCAL_COMM|REMOTE_COMM)
		}),
	},
	{
		name:  "FI_SOURCE only when requested",
		quote: "FI_SOURCE: Note that returning source address information may require that the provider perform address translation and/or look-up based on data available in the underlying protocol in order to provide the requested data, which may adversely affect performance.",
		hints: &Info{Caps: TAGGED, FabricAttr: &FabricAttr{ProvName: "ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
		check: each(func(in *Info) string { return expect("caps&SOURCE", in.Caps&SOURCE, 0) }),
	},
	{
		name:  "secondary caps requested",
		quote: "Secondary capabilities may optionally be requested by an application. If requested, a provider must support the capability or fail the fi_getinfo request (FI_ENODATA).",
		hints: &Info{Caps: MSG | SOURCE},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
		check: each(func(in *Info) string {
			return expect("caps&SOURCE", in.Caps&SOURCE, SOURCE) + expect("rx caps&SOURCE", in.RxAttr.Caps&SOURCE, SOURCE)
		}),
	},
	{
		name:  "local and remote comm",
		quote: "If neither FI_LOCAL_COMM or FI_REMOTE_COMM are specified, then the provider will indicate support for the configuration that minimally affects performance.",
		hints: &Info{Caps: MSG | REMOTE_COMM, FabricAttr: &FabricAttr{ProvName: "tcp"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: each(func(in *Info) string { return expect("comm", in.Caps&(LOCAL_COMM|REMOTE_COMM), LOCAL_COMM|REMOTE_COMM) }),
	},
	{
		name:  "not a capability",
		quote: "FI_EBADFLAGS The specified endpoint or domain capability or operation flags are invalid.",
		hints: &Info{Caps: MSG | 1<<7},
		err:   EBADFLAGS, errText: "0x80 are not capabilities",
	},
	{
		name:  "FI_READ needs FI_RMA",
		quote: "FI_READ: This flag requires that FI_RMA and/or FI_ATOMIC be set.",
		hints: &Info{Caps: MSG | READ},
		err:   EBADFLAGS, errText: "FI_READ requires FI_RMA",
	},
	{
		name:  "FI_REMOTE_WRITE needs FI_RMA",
		quote: "FI_REMOTE_WRITE: This flag requires that FI_RMA and/or FI_ATOMIC be set.",
		hints: &Info{Caps: REMOTE_WRITE},
		err:   EBADFLAGS,
	},
	{
		name:  "FI_RMA_EVENT needs remote access",
		quote: "FI_RMA_EVENT: This flag requires that FI_REMOTE_READ and/or FI_REMOTE_WRITE be enabled on the endpoint.",
		hints: &Info{Caps: RMA | READ | RMA_EVENT},
		err:   EBADFLAGS, errText: "FI_RMA_EVENT",
	},
	{
		name:  "FI_RMA_EVENT with FI_RMA",
		quote: "FI_RMA_EVENT: This flag requires that FI_REMOTE_READ and/or FI_REMOTE_WRITE be enabled on the endpoint.",
		hints: &Info{Caps: RMA | RMA_EVENT, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  []string{"tcp;ofi_rxm lo rdm"},
	},
	{
		name:  "FI_SOURCE_ERR needs FI_SOURCE",
		quote: "FI_SOURCE_ERR: Must be paired with FI_SOURCE.",
		hints: &Info{Caps: TAGGED | SOURCE_ERR},
		err:   EBADFLAGS, errText: "FI_SOURCE_ERR",
	},
	{
		name:  "FI_MULTICAST needs FI_MSG",
		quote: "FI_MULTICAST: This capability must be paired with FI_MSG.",
		hints: &Info{Caps: TAGGED | MULTICAST},
		err:   EBADFLAGS, errText: "FI_MULTICAST",
	},
	{
		name:  "FI_VARIABLE_MSG needs a message cap",
		quote: "FI_VARIABLE_MSG: This flag requires that FI_MSG and/or FI_TAGGED be set.",
		hints: &Info{Caps: RMA | VARIABLE_MSG},
		err:   EBADFLAGS,
	},
	{
		name:  "FI_RMA_PMEM needs FI_RMA",
		quote: "FI_RMA_PMEM: This flag requires that FI_RMA be set.",
		hints: &Info{Caps: MSG | RMA_PMEM},
		err:   EBADFLAGS,
	},
	{
		name:  "tx caps from the info",
		quote: "fi_endpoint(3) tx_attr caps: If the caps field is 0 on input to fi_getinfo(3), the applicable capability bits from the fi_info structure will be used.",
		hints: &Info{Caps: MSG | RMA, TxAttr: &TxAttr{}, RxAttr: &RxAttr{}, DomainAttr: &DomainAttr{Name: "eth0"}},
		want:  []string{"tcp eth0 msg", "tcp;ofi_rxm eth0 rdm"},
		check: each(func(in *Info) string {
			return expect("tx caps", in.TxAttr.Caps, MSG|RMA|SEND|READ|WRITE) +
				expect("rx caps", in.RxAttr.Caps&^(MULTI_RECV|RMA_EVENT), MSG|RMA|RECV|REMOTE_READ|REMOTE_WRITE)
		}),
	},
	{
		name:  "rx caps restricted",
		quote: "fi_endpoint(3) rx_attr caps: Use of this field provides fine grained control over the receive capabilities associated with an endpoint.",
		hints: &Info{Caps: MSG | RMA, RxAttr: &RxAttr{Caps: MSG}, DomainAttr: &DomainAttr{Name: "eth0"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp eth0 msg"},
		check: each(func(in *Info) string {
			return expect("rx caps", in.RxAttr.Caps, MSG|RECV) + expect("tx caps", in.TxAttr.Caps, MSG|RMA|SEND|READ|WRITE)
		}),
	},
	{
		name:  "tx caps beyond the endpoint's",
		quote: "fi_endpoint(3) tx_attr caps: The capabilities must be a subset of those requested of the associated endpoint.",
		hints: &Info{Caps: MSG, TxAttr: &TxAttr{Caps: RMA}},
		err:   EBADFLAGS, errText: "tx_attr.caps",
	},
	{
		name:  "tx caps beyond the provider's",
		quote: "fi_endpoint(3) tx_attr caps: The requested capabilities of the context.",
		hints: &Info{TxAttr: &TxAttr{Caps: ATOMIC}},
		want:  []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string { return expect("tx caps", in.TxAttr.Caps, ATOMIC|READ|WRITE) }),
	},
	{
		name:  "domain caps",
		quote: "fi_domain(3) FI_SHARED_AV: Indicates that the domain supports the ability to share address vectors among multiple processes using the named address vector feature.",
		hints: &Info{DomainAttr: &DomainAttr{Caps: SHARED_AV}},
		err:   ENODATA, errText: "domain_attr.caps FI_SHARED_AV",
	},

	// Flags.
	{
		name:  "bad flags",
		quote: "The operation of the fi_getinfo call may be controlled through the use of input flags. Valid flags include the following. (FI_NUMERICHOST, FI_PROV_ATTR_ONLY, FI_SOURCE)",
		flags: uint64(MSG),
		err:   EBADFLAGS, errText: "0x2",
	},
	{
		name:  "provider attributes only",
		quote: "FI_PROV_ATTR_ONLY: The returned fi_info struct will contain default values for all members, with the exception of fabric_attr. The fabric_attr member will have the prov_name and prov_version values filled in.",
		flags: uint64(PROV_ATTR_ONLY),
		node:  "no.such.host", hints: &Info{Caps: ATOMIC},
		check: func(out []*Info) string {
			var got []string
			for _, in := range out {
				got = append(got, fmt.Sprintf("%s %v", in.FabricAttr.ProvName, in.FabricAttr.ProvVersion))
				c := *in
				c.FabricAttr = nil
				if !reflect.DeepEqual(&c, &Info{TxAttr: &TxAttr{}, RxAttr: &RxAttr{}, EPAttr: &EPAttr{}, DomainAttr: &DomainAttr{}}) {
					return fmt.Sprintf("%s has non-default members", in.FabricAttr.ProvName)
				}
			}
			return expect("providers", strings.Join(got, ", "), "tcp 117.0, ofi_rxm 117.1, verbs 117.0")
		},
	},
	{
		name:  "FI_SOURCE needs node or service",
		quote: "FI_SOURCE: If specified, either the node and/or service parameter must be non-NULL.",
		flags: uint64(SOURCE),
		err:   EINVAL,
	},

	// Node and service.
	{
		name:  "FI_SOURCE node and service",
		quote: "FI_SOURCE: Indicates that the node and service parameters specify the local source address to associate with an endpoint.",
		flags: uint64(SOURCE), node: "10.0.0.5", service: "7000",
		want: ethAll,
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:7000") + expectAddr("dest", in.DestAddr, "")
		}),
	},
	{
		name:  "FI_SOURCE service only",
		quote: "FI_SOURCE: This flag is often used with passive endpoints.",
		flags: uint64(SOURCE), service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}, FabricAttr: &FabricAttr{ProvName: "tcp"}},
		want: []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: func(out []*Info) string {
			return expectAddr("lo src", out[0].SrcAddr, "fi_sockaddr_in://0.0.0.0:7000") +
				expectAddr("v6 src", out[2].SrcAddr, "fi_sockaddr_in6://[::]:7000")
		},
	},
	{
		name:  "FI_SOURCE address of no domain",
		quote: "src_addr: On output a provider shall return an address that corresponds to the indicated fabric, domain, node, and/or service fields.",
		flags: uint64(SOURCE), node: "192.0.2.1",
		err: ENODATA, errText: "source address 192.0.2.1",
	},
	{
		name:  "node is the destination",
		quote: "If node is provided, fi_getinfo will attempt to resolve the fabric address to the given node.",
		node:  "127.0.0.1", service: "7000",
		want: loIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7000") +
				expectAddr("src", in.SrcAddr, "fi_sockaddr_in://127.0.0.1:0")
		}),
	},
	{
		name:  "remote node from eth0",
		quote: "dest_addr: If FI_SOURCE is not specified, on output a provider shall return an address the corresponds to the indicated node and/or service fields, relative to the fabric and domain.",
		node:  "192.0.2.1", service: "7000",
		want: ethAll,
	},
	{
		name:    "service only",
		quote:   "Service is usually associated with a transport address (such as a TCP port number).",
		service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		offered: func() []*Info {
			o := testOffered()
			six := o[4].Clone()
			six.DomainAttr.Name = "lo6"
			six.SrcAddr = addr("[::1]:0")
			return append(o, six)
		},
		want: []string{"tcp lo msg", "tcp lo6 msg"},
		check: func(out []*Info) string {
			return expectAddr("lo dest", out[0].DestAddr, "fi_sockaddr_in://127.0.0.1:7000") +
				expectAddr("lo6 dest", out[1].DestAddr, "fi_sockaddr_in6://[::1]:7000")
		},
	},
	{
		name:  "service by name",
		quote: "service: Optional, service name or port number of address.",
		node:  "127.0.0.1", service: "http", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg"},
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:80") }),
	},
	{
		name:  "unknown service",
		quote: "service: Optional, service name or port number of address.",
		node:  "127.0.0.1", service: "nosuchservice",
		err: ENODATA, errText: "nosuchservice",
	},
	{
		name:  "port out of range",
		quote: "Service is usually associated with a transport address (such as a TCP port number).",
		node:  "127.0.0.1", service: "70000",
		err: EINVAL,
	},
	{
		name:  "name resolution",
		quote: "Node is commonly used to provide a network address (such as an IP address) or hostname.",
		node:  "localhost", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		offered: func() []*Info {
			o := testOffered()
			o[4].SrcAddr = addr("[::1]:0")
			return o
		},
		want: []string{"tcp lo msg", "tcp v6 msg"},
		check: func(out []*Info) string {
			return expectAddr("dest", out[0].DestAddr, "fi_sockaddr_in://127.0.0.1:0") +
				expectAddr("v6 dest", out[1].DestAddr, "fi_sockaddr_in6://[::1]:0")
		},
	},
	{
		name:  "resolved IPv4-mapped",
		quote: "Node and service parameters may be mapped by providers to native fabric addresses.",
		node:  "node7", service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp eth0 msg", "verbs rxe0 msg"},
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://10.0.0.7:7000") }),
	},
	{
		name:  "no such host",
		quote: "FI_ENODATA Indicates that no providers could be found which support the requested fabric information.",
		node:  "no.such.host",
		err:   ENODATA, errText: "no.such.host",
	},
	{
		name:  "numeric host",
		quote: "FI_NUMERICHOST: Indicates that the node parameter is a numeric string representation of a fabric address, such as a dotted decimal IP address.",
		node:  "10.0.0.7", flags: uint64(NUMERICHOST), hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want: []string{"tcp eth0 msg", "verbs rxe0 msg"},
	},
	{
		name:  "numeric host required",
		quote: "FI_NUMERICHOST: Use of this flag will suppress any lengthy name resolution protocol.",
		node:  "localhost", flags: uint64(NUMERICHOST),
		err: EINVAL, errText: "not a numeric address",
	},
	{
		name:  "numeric IPv6 in brackets",
		quote: "FI_NUMERICHOST: Indicates that the node parameter is a numeric string representation of a fabric address",
		node:  "[fd00::5]", flags: uint64(NUMERICHOST | SOURCE),
		want:  []string{"tcp v6 msg"},
		check: each(func(in *Info) string { return expectAddr("src", in.SrcAddr, "fi_sockaddr_in6://[fd00::5]:0") }),
	},
	{
		name:  "FI_ADDR_STR node",
		quote: "Applications may also pass in an FI_ADDR_STR formatted address (see format details below) as the node parameter.",
		node:  "fi_sockaddr_in://127.0.0.1:7000",
		want:  loIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7000") + expect("format", in.AddrFormat, SOCKADDR_IN)
		}),
	},
	{
		name:  "FI_ADDR_STR node with service",
		quote: "In such cases, the service parameter must be NULL.",
		node:  "fi_sockaddr_in://127.0.0.1:7000", service: "7001",
		err: EINVAL,
	},
	{
		name:  "FI_ADDR_STR bad node",
		quote: "FI_ADDR_STR: address_format[://[node][:[service][/[field3]...][?[key=value][&k2=v2]...]]]",
		node:  "fi_addr_psmx2://1234",
		err:   EINVAL,
	},
	{
		name:  "FI_ADDR_STR format",
		quote: "FI_ADDR_STR Address is a formatted character string.",
		node:  "fi_sockaddr_in6://[fd00::7]:7000", hints: &Info{AddrFormat: ADDR_STR},
		want: []string{"tcp v6 msg"},
		check: each(func(in *Info) string {
			return expect("format", in.AddrFormat, ADDR_STR) + expectAddr("dest", in.DestAddr, "fi_sockaddr_in6://[fd00::7]:7000") +
				expect("dest format", in.DestAddr.Format, ADDR_STR) + expect("src format", in.SrcAddr.Format, ADDR_STR)
		}),
	},
	{
		name:  "IPv6 format",
		quote: "FI_SOCKADDR_IN6 Address is of type sockaddr_in6 (IPv6).",
		hints: &Info{AddrFormat: SOCKADDR_IN6},
		want:  []string{"tcp v6 msg"},
	},
	{
		name:  "IPv4 format",
		quote: "FI_SOCKADDR_IN Address is of type sockaddr_in (IPv4).",
		hints: &Info{AddrFormat: SOCKADDR_IN, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "verbs rxe0 msg"},
	},
	{
		name:  "IPv4 format, IPv6 node",
		quote: "addr_format: If specified, indicates the format of addresses referenced by the fabric interfaces and data structures.",
		hints: &Info{AddrFormat: SOCKADDR_IN}, node: "fd00::7",
		err: ENODATA, errText: "destination fd00::7",
	},
	{
		name:  "sockaddr format",
		quote: "FI_SOCKADDR Address is of type sockaddr. The specific socket address format will be determined at run time by interfaces examining the sa_family field.",
		hints: &Info{AddrFormat: SOCKADDR},
		want:  modeless,
	},
	{
		name:  "other formats",
		quote: "A provider may support one or more of the following addressing formats.",
		hints: &Info{AddrFormat: SOCKADDR_IB},
		err:   ENODATA, errText: "addr_format FI_SOCKADDR_IB",
	},
	{
		name:  "hints src_addr",
		quote: "src_addr - source address: If specified, indicates the source address.",
		hints: &Info{SrcAddr: addr("10.0.0.5:7000")},
		want:  ethIDs,
		check: each(func(in *Info) string { return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:7000") }),
	},
	{
		name:  "hints src_addr ignored with FI_SOURCE",
		quote: "src_addr: This field will be ignored in hints if FI_SOURCE flag is set.",
		flags: uint64(SOURCE), node: "127.0.0.1", hints: &Info{SrcAddr: addr("10.0.0.5:7000")},
		want: loIDs,
	},
	{
		name:  "hints dest_addr",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		hints: &Info{DestAddr: addr("10.0.0.9:7000")},
		want:  ethIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://10.0.0.9:7000") + expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:0")
		}),
	},
	{
		name:  "hints dest_addr ignored with node",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		node:  "127.0.0.1", hints: &Info{DestAddr: addr("10.0.0.9:7000")},
		want:  loIDs,
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:0") }),
	},
	{
		name:  "hints dest_addr with FI_SOURCE",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		flags: uint64(SOURCE), node: "127.0.0.1", service: "7000", hints: &Info{DestAddr: addr("127.0.0.1:7001")},
		want: loIDs,
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://127.0.0.1:7000") + expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7001")
		}),
	},
	{
		name:  "hints address without IP",
		quote: "src_addrlen: This value must be > 0 if src_addr is non-NULL.",
		hints: &Info{SrcAddr: &Addr{Format: SOCKADDR_IN}},
		err:   EINVAL,
	},

	// Fabric attributes.
	{
		name:  "core provider name",
		quote: "fi_fabric(3) prov_name - Provider Name: The name of the underlying fabric provider.",
		hints: &Info{FabricAttr: &FabricAttr{ProvName: "tcp"}},
		want:  tcpIDs,
	},
	{
		name:  "provider names ignore case",
		quote: "fi_fabric(3) prov_name - Provider Name: The name of the underlying fabric provider.",
		hints: &Info{FabricAttr: &FabricAttr{ProvName: "TCP;OFI_RXM"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
	},
	{
		name:  "layered provider",
		quote: "fi_fabric(3): To request an utility provider layered over a specific core provider, both the provider names have to be specified using \";\" as delimiter.",
		hints: &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "tcp;ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
	},
	{
		name:  "layered provider, utility first",
		quote: "fi_fabric(3): e.g. \"ofi_rxm;verbs\" or \"verbs;ofi_rxm\"",
		hints: &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "ofi_rxm;verbs"}},
		want:  []string{"verbs;ofi_rxm rxe0 rdm"},
	},
	{
		name:  "utility provider over any core",
		quote: "fi_fabric(3) prov_name - Provider Name: The name of the underlying fabric provider.",
		hints: &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "ofi_rxm"}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm", "verbs;ofi_rxm rxe0 rdm"},
	},
	{
		name:  "excluded provider",
		quote: "fi_fabric(3): Similarly, specifying \"FI_PROVIDER=^foo,bar\" will prevent any providers with the names \"foo\" or \"bar\" from being registered.",
		hints: &Info{FabricAttr: &FabricAttr{ProvName: "tcp;^ofi_rxm"}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
	},
	{
		name:  "unknown provider",
		quote: "Since the string formatted address does not contain any provider information, the prov_name field of the fabric attribute structure should be used to filter by provider if necessary.",
		hints: &Info{FabricAttr: &FabricAttr{ProvName: "udp"}},
		err:   ENODATA, errText: `no provider supports prov_name "udp"`,
	},
	{
		name:  "fabric name",
		quote: "fi_fabric(3) name: A fabric identifier.",
		hints: &Info{FabricAttr: &FabricAttr{Name: "127.0.0.0/8"}},
		want:  loIDs,
	},
	{
		name:  "prov_version",
		quote: "fi_fabric(3) prov_version - Provider Version: Version information for the fabric provider, in a major.minor format.",
		hints: &Info{FabricAttr: &FabricAttr{ProvVersion: MakeVersion(117, 1)}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
	},
	{
		name:  "api_version hint",
		quote: "fi_fabric(3) api_version: The interface version requested by the application.",
		hints: &Info{FabricAttr: &FabricAttr{APIVersion: MakeVersion(1, 18)}},
		err:   ENODATA, errText: "api_version 1.18",
	},
	{
		name:  "opened fabric",
		quote: "fi_fabric(3) fabric: On input to fi_getinfo, a user may set this to an opened fabric instance to restrict output to the given fabric.",
		hints: &Info{FabricAttr: &FabricAttr{Fabric: 0x77}},
		offered: func() []*Info {
			o := testOffered()
			o[2].FabricAttr.Fabric = 0x77
			return o
		},
		want: []string{"tcp eth0 msg"},
	},

	// Domain attributes.
	{
		name:  "domain name",
		quote: "fi_domain(3) Name: The name of the access domain.",
		hints: &Info{DomainAttr: &DomainAttr{Name: "eth0"}},
		want:  []string{"tcp eth0 msg", "tcp;ofi_rxm eth0 rdm"},
	},
	{
		name:  "no such domain",
		quote: "fi_domain(3) Name: The name of the access domain.",
		hints: &Info{DomainAttr: &DomainAttr{Name: "eth9"}},
		err:   ENODATA, errText: `domain "eth9"`,
	},
	{
		name:  "opened domain",
		quote: "fi_domain(3) domain: On input to fi_getinfo, a user may set this to an opened domain instance to restrict output to the given domain.",
		hints: &Info{DomainAttr: &DomainAttr{Domain: 0x42}},
		err:   ENODATA, errText: "opened domain 0x42",
	},
	{
		name:  "threading requested",
		quote: "fi_domain(3): Applications which can guarantee serialization in their access of provider allocated resources and interfaces enables a provider to eliminate lower-level locks.",
		hints: &Info{DomainAttr: &DomainAttr{Threading: THREAD_DOMAIN, Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("threading", in.DomainAttr.Threading, THREAD_DOMAIN) }),
	},
	{
		name:  "threading not served",
		quote: "fi_domain(3) FI_THREAD_SAFE: A thread safe serialization model allows a multi-threaded application to access any allocated resources through any interface without restriction.",
		hints: &Info{DomainAttr: &DomainAttr{Threading: THREAD_SAFE, MRMode: MR_LOCAL | mrBasicMap}},
		want:  tcpIDs,
	},
	{
		name:  "threading unspec",
		quote: "fi_domain(3) FI_THREAD_UNSPEC: When specified, providers will return a threading model that allows for the greatest level of parallelism.",
		hints: &Info{DomainAttr: &DomainAttr{Threading: THREAD_UNSPEC, MRMode: MR_LOCAL | mrBasicMap}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: func(out []*Info) string {
			return expect("tcp", out[0].DomainAttr.Threading, THREAD_SAFE) + expect("verbs", out[3].DomainAttr.Threading, THREAD_FID)
		},
	},
	{
		name:  "bad threading",
		quote: "fi_domain(3) Multi-threading Support (threading): The threading model specifies the level of serialization required of an application",
		hints: &Info{DomainAttr: &DomainAttr{Threading: 17}},
		err:   EINVAL,
	},
	{
		name:  "manual progress served by auto",
		quote: "fi_domain(3) FI_PROGRESS_MANUAL: This progress model indicates that the provider requires the use of an application thread to complete an asynchronous request.",
		hints: &Info{DomainAttr: &DomainAttr{ControlProgress: PROGRESS_MANUAL, DataProgress: PROGRESS_MANUAL, Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("data_progress", in.DomainAttr.DataProgress, PROGRESS_MANUAL) }),
	},
	{
		name:  "auto progress required",
		quote: "fi_domain(3) FI_PROGRESS_AUTO: This progress model indicates that the provider will make forward progress on an asynchronous operation without further intervention by the application.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{Type: EP_DGRAM},
			DomainAttr: &DomainAttr{DataProgress: PROGRESS_AUTO, MRMode: MR_LOCAL | mrBasicMap, Mode: RESTRICTED_COMP}},
		err: ENODATA, errText: "domain_attr.data_progress FI_PROGRESS_AUTO on FI_EP_DGRAM",
	},
	{
		name:  "resource management",
		quote: "fi_domain(3): It should be noted that even if resource management is disabled, the provider implementation and protocol may still provide some level of protection against overruns.",
		hints: &Info{DomainAttr: &DomainAttr{ResourceMgmt: RM_DISABLED, Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("resource_mgmt", in.DomainAttr.ResourceMgmt, RM_DISABLED) }),
	},
	{
		name:  "av type unspec entry",
		quote: "fi_domain(3): The value FI_AV_UNSPEC may be used to indicate that the provider can support either address vector format.",
		hints: &Info{DomainAttr: &DomainAttr{AVType: AV_TABLE, Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("av_type", in.DomainAttr.AVType, AV_TABLE) }),
	},
	{
		name:  "av type mismatch",
		quote: "fi_domain(3) FI_AV_MAP: Only address vectors of type AV map are requested or supported.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{Type: EP_DGRAM},
			DomainAttr: &DomainAttr{AVType: AV_TABLE, MRMode: MR_LOCAL | mrBasicMap, Mode: RESTRICTED_COMP}},
		err: ENODATA, errText: "domain_attr.av_type FI_AV_TABLE",
	},
	{
		name:  "domain sizes",
		quote: "Output values will be greater than or equal to requested input values. See fi_domain(3) for details.",
		hints: &Info{DomainAttr: &DomainAttr{CQDataSize: 8, MRKeySize: 8, CQCnt: 256, EPCnt: 100, MRIovLimit: 1,
			CntrCnt: 1, MRCnt: 1000, MaxEPTxCtx: 1, MaxEPRxCtx: 1, TxCtxCnt: 1, RxCtxCnt: 1, MRMode: MR_LOCAL | mrBasicMap}},
		want: tcpIDs,
		check: each(func(in *Info) string {
			return expect("cq_data_size", in.DomainAttr.CQDataSize, 8) + expect("ep_cnt", in.DomainAttr.EPCnt, 8192)
		}),
	},
	{
		name:  "domain size too big",
		quote: "domain_attr: On output, the actual domain attributes that can be provided will be returned. Output values will be greater than or equal to requested input values.",
		hints: &Info{DomainAttr: &DomainAttr{MaxEPSrxCtx: 129}},
		err:   ENODATA, errText: "domain_attr.max_ep_srx_ctx >= 129 (offered: 128)",
	},
	{
		name:  "auth key size",
		quote: "fi_domain(3) Default authorization key length (auth_key_size): The length in bytes of the default authorization key for the domain.",
		hints: &Info{DomainAttr: &DomainAttr{AuthKeySize: 8}},
		err:   ENODATA, errText: "domain_attr.auth_key_size 8",
	},
	{
		name:    "auth key before 1.5",
		quote:   "fi_domain(3) auth_key_size: This field is ignored unless the fabric is opened with API version 1.5 or greater.",
		version: MakeVersion(1, 4),
		hints:   &Info{DomainAttr: &DomainAttr{AuthKeySize: 8, Name: "lo"}},
		want:    loIDs,
	},
	{
		name:  "auth key of the wrong length",
		quote: "fi_domain(3) Default authorization key length (auth_key_size): The length in bytes of the default authorization key for the domain.",
		hints: &Info{DomainAttr: &DomainAttr{AuthKey: []byte{1, 2, 3}, AuthKeySize: 8}},
		err:   EINVAL,
	},
	{
		name:  "domain tclass",
		quote: "fi_domain(3) Traffic Class (tclass): This specifies the default traffic class that will be associated any endpoints created within the domain.",
		hints: &Info{DomainAttr: &DomainAttr{TClass: TC_BULK_DATA, Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("tclass", in.DomainAttr.TClass, TC_BULK_DATA) }),
	},

	// Memory registration modes.
	{
		name:  "mr_mode 0 supports no mr_mode bits",
		quote: "fi_mr(3): If no mr_mode bits are set, the default behaviors describe below are followed.",
		hints: &Info{DomainAttr: &DomainAttr{}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
	},
	{
		name:  "mr_mode bits agreed",
		quote: "fi_mr(3): By setting an mr_mode bit, the application has agreed to adjust its behavior as indicated.",
		hints: &Info{Caps: MSG, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | MR_ALLOCATED}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: func(out []*Info) string {
			return expect("tcp mr_mode", out[0].DomainAttr.MRMode, 0) +
				expect("verbs mr_mode", out[3].DomainAttr.MRMode, MR_LOCAL|MR_ALLOCATED)
		},
	},
	{
		name:  "mr_mode bits needed for RMA",
		quote: "fi_mr(3): If a provider requires the behavior defined for an mr_mode bit, it will leave the bit set on output to fi_getinfo.",
		hints: &Info{Caps: RMA, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | MR_ALLOCATED}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
	},
	{
		name:  "mr_mode bits cleared",
		quote: "fi_mr(3): A provider will clear an mr_mode bit if it is not needed.",
		hints: &Info{Caps: RMA, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | mrBasicMap | MR_ENDPOINT | MR_RAW}, FabricAttr: &FabricAttr{ProvName: "verbs"}},
		want:  []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string { return expect("mr_mode", in.DomainAttr.MRMode, MR_LOCAL|mrBasicMap) }),
	},
	{
		name:  "wildcard caps fitted to mr_mode",
		quote: "A zeroed hint value results in providers either returning a default value or a value that works best for their implementation.",
		hints: &Info{DomainAttr: &DomainAttr{MRMode: MR_LOCAL | MR_ALLOCATED}, FabricAttr: &FabricAttr{ProvName: "verbs"}},
		want:  []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string {
			return expect("remote caps", in.Caps&(REMOTE_READ|REMOTE_WRITE), 0) + expect("rma", in.Caps&(RMA|READ), RMA|READ) +
				expect("mr_mode", in.DomainAttr.MRMode, MR_LOCAL|MR_ALLOCATED)
		}),
	},
	{
		name:  "FI_MR_BASIC",
		quote: "fi_mr(3): Additionally, providers that support basic registration usually require the (deprecated) fi_info mode bit FI_LOCAL_MR, which was incorporated into the FI_MR_LOCAL mr_mode bit.",
		hints: &Info{Mode: LOCAL_MR, DomainAttr: &DomainAttr{MRMode: MR_BASIC}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: func(out []*Info) string {
			return expect("mr_mode", out[3].DomainAttr.MRMode, MR_BASIC) + expect("mode", out[3].Mode, LOCAL_MR) +
				expect("tcp mode", out[0].Mode, 0)
		},
	},
	{
		name:  "FI_MR_BASIC without FI_LOCAL_MR",
		quote: "fi_mr(3): Additionally, providers that support basic registration usually require the (deprecated) fi_info mode bit FI_LOCAL_MR",
		hints: &Info{DomainAttr: &DomainAttr{MRMode: MR_BASIC}, FabricAttr: &FabricAttr{ProvName: "verbs"}, EPAttr: &EPAttr{Type: EP_MSG}},
		err:   ENODATA, errText: "applications without mode FI_LOCAL_MR",
	},
	{
		name:  "FI_MR_BASIC alone",
		quote: "fi_mr(3): FI_MR_BASIC must be set alone and not paired with mr_mode bits.",
		hints: &Info{DomainAttr: &DomainAttr{MRMode: MR_BASIC | MR_LOCAL}},
		err:   EINVAL,
	},
	{
		name:  "FI_MR_SCALABLE",
		quote: "fi_domain(3) FI_MR_SCALABLE: Only scalable memory registration operations are requested or supported.",
		hints: &Info{Mode: LOCAL_MR, DomainAttr: &DomainAttr{MRMode: MR_SCALABLE}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: each(func(in *Info) string { return expect("mr_mode", in.DomainAttr.MRMode, MR_SCALABLE) }),
	},
	{
		name:    "mr_mode 0 before 1.5",
		quote:   "fi_domain(3) FI_MR_UNSPEC: Defined for compatibility – library versions 1.4 and earlier. Setting mr_mode to 0 indicates that FI_MR_BASIC or FI_MR_SCALABLE are requested and supported.",
		version: MakeVersion(1, 4),
		hints:   &Info{Mode: LOCAL_MR, DomainAttr: &DomainAttr{}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:    []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: func(out []*Info) string {
			return expect("tcp", out[0].DomainAttr.MRMode, MR_SCALABLE) + expect("verbs", out[3].DomainAttr.MRMode, MR_BASIC) +
				expect("verbs mode", out[3].Mode, LOCAL_MR)
		},
	},
	{
		name:    "mr_mode bits before 1.5",
		quote:   "fi_domain(3) FI_MR_BASIC: Defined for compatibility – library versions 1.4 and earlier.",
		version: MakeVersion(1, 4),
		hints:   &Info{DomainAttr: &DomainAttr{MRMode: MR_LOCAL}},
		err:     EINVAL,
	},
	{
		name:  "FI_LOCAL_MR ignored from 1.5",
		quote: "FI_LOCAL_MR: This flag is defined for compatibility and is ignored if the application version is 1.5 or later and the domain mr_mode is set to anything other than FI_MR_BASIC or FI_MR_SCALABLE.",
		hints: &Info{Mode: LOCAL_MR, DomainAttr: &DomainAttr{MRMode: mrBasicMap}, FabricAttr: &FabricAttr{ProvName: "verbs"}, EPAttr: &EPAttr{Type: EP_MSG}},
		err:   ENODATA, errText: "FI_MR_LOCAL",
	},

	// Endpoint attributes.
	{
		name:  "protocol",
		quote: "fi_endpoint(3) Protocol: Specifies the low-level end to end protocol employed by the provider.",
		hints: &Info{EPAttr: &EPAttr{Protocol: PROTO_RXM_TCP}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
	},
	{
		name:  "protocol version",
		quote: "fi_endpoint(3) protocol_version - Protocol Version: Identifies which version of the protocol is employed by the provider.",
		hints: &Info{EPAttr: &EPAttr{ProtocolVersion: 1}},
		err:   ENODATA, errText: "ep_attr.protocol_version >= 1",
	},
	{
		name:  "max_msg_size",
		quote: "ep_attr: Output values will be greater than or equal to requested input values.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{MaxMsgSize: 1 << 30}},
		want:  modeless,
		check: each(func(in *Info) string {
			if in.EPAttr.MaxMsgSize < 1<<30 {
				return "max_msg_size too small"
			}
			return ""
		}),
	},
	{
		name:  "msg_prefix_size",
		quote: "fi_endpoint(3) msg_prefix_size - Message Prefix Size: Specifies the size of any required message prefix buffer space.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{MsgPrefixSize: 32, Type: EP_DGRAM}, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | mrBasicMap, Mode: RESTRICTED_COMP}},
		err:   ENODATA, errText: "ep_attr.msg_prefix_size 32 (required: 40)",
	},
	{
		name:  "msg_prefix_size provided",
		quote: "FI_MSG_PREFIX: The size of space that must be provided is specified by the msg_prefix_size endpoint attribute.",
		hints: &Info{Mode: MSG_PREFIX, EPAttr: &EPAttr{MsgPrefixSize: 64, Type: EP_DGRAM}, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | mrBasicMap, Mode: RESTRICTED_COMP}},
		want:  []string{"verbs rxe0-dgram dgram"},
		check: each(func(in *Info) string { return expect("msg_prefix_size", in.EPAttr.MsgPrefixSize, 40) }),
	},
	{
		name:  "mem_tag_format",
		quote: "fi_endpoint(3) mem_tag_format: A provider must return a tag format that supports the requested number of fields, with each field being at least the size requested, or fail the request.",
		hints: &Info{Caps: TAGGED, Mode: CONTEXT, EPAttr: &EPAttr{MemTagFormat: 0xffff_ffff_ff}},
		want:  []string{"tcp;ofi_rxm lo rdm", "tcp;ofi_rxm eth0 rdm"},
		check: each(func(in *Info) string { return expect("mem_tag_format", in.EPAttr.MemTagFormat, 0xffff_ffff_ff) }),
	},
	{
		name:  "mem_tag_format without tags",
		quote: "fi_endpoint(3) mem_tag_format - Memory Tag Format: The memory tag format is a bit array used to convey the number of tagged bits supported by a provider.",
		hints: &Info{Caps: MSG, EPAttr: &EPAttr{MemTagFormat: 0x30ff, Type: EP_MSG}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  []string{"tcp lo msg"},
	},
	{
		name:  "max order size with RMA",
		quote: "fi_endpoint(3): The maximum ordered size specifies the delivery order of transport data into target memory for RMA and atomic operations.",
		hints: &Info{Caps: RMA, EPAttr: &EPAttr{MaxOrderWAWSize: 1 << 32}},
		err:   ENODATA, errText: "ep_attr.max_order_waw_size",
	},
	{
		name:  "max order size without RMA",
		quote: "fi_endpoint(3): The maximum ordered size specifies the delivery order of transport data into target memory for RMA and atomic operations.",
		hints: &Info{Caps: MSG, EPAttr: &EPAttr{MaxOrderWAWSize: 1 << 32}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
	},
	{
		name:  "tx_ctx_cnt",
		quote: "fi_endpoint(3) tx_ctx_cnt: If not specified (0), 1 context will be assigned if the endpoint supports outbound transfers.",
		hints: &Info{EPAttr: &EPAttr{TxCtxCnt: 2}},
		err:   ENODATA, errText: "ep_attr.tx_ctx_cnt 2 (at most 1)",
	},
	{
		name:  "shared tx context",
		quote: "fi_endpoint(3) tx_ctx_cnt: Providers that do not support shared transmit contexts will fail the request.",
		hints: &Info{EPAttr: &EPAttr{TxCtxCnt: SHARED_CONTEXT}},
		err:   ENODATA, errText: "FI_SHARED_CONTEXT",
	},
	{
		name:  "shared rx context",
		quote: "fi_endpoint(3) rx_ctx_cnt: If the count is set to the value FI_SHARED_CONTEXT, the endpoint will be configured to use a shared receive context, if supported by the provider.",
		hints: &Info{EPAttr: &EPAttr{RxCtxCnt: SHARED_CONTEXT}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("rx_ctx_cnt", in.EPAttr.RxCtxCnt, SHARED_CONTEXT) }),
	},
	{
		name:  "ep auth key",
		quote: "fi_endpoint(3) auth_key_size - Authorization Key Length: The length of the authorization key in bytes. This field will be 0 if authorization keys are not available or used.",
		hints: &Info{EPAttr: &EPAttr{AuthKeySize: 4, AuthKey: []byte{1, 2, 3, 4}}},
		offered: func() []*Info {
			o := testOffered()[:2]
			o[1].EPAttr.AuthKeySize = 4
			return o
		},
		want:  []string{"tcp;ofi_rxm lo rdm"},
		check: each(func(in *Info) string { return expect("auth_key", string(in.EPAttr.AuthKey), "\x01\x02\x03\x04") }),
	},

	// Transmit and receive attributes.
	{
		name:  "tx sizes",
		quote: "tx_attr: On output, the actual transmit context attributes that can be provided will be returned. Output values will be greater than or equal to the requested input values.",
		hints: &Info{TxAttr: &TxAttr{Size: 512, IovLimit: 2, InjectSize: 100, RMAIovLimit: 1}},
		want:  modeless[:5],
		check: each(func(in *Info) string {
			return expect("size", in.TxAttr.Size, 512) + expect("iov_limit", in.TxAttr.IovLimit, 2) +
				expect("inject_size", in.TxAttr.InjectSize, 100)
		}),
	},
	{
		name:  "tx size too big",
		quote: "tx_attr: Output values will be greater than or equal to the requested input values.",
		hints: &Info{TxAttr: &TxAttr{Size: 2048}},
		err:   ENODATA, errText: "tx_attr.size >= 2048 (offered: 1024) on FI_EP_MSG",
	},
	{
		name:  "rx sizes",
		quote: "rx_attr: Output values will be greater than or or equal to the requested input values.",
		hints: &Info{RxAttr: &RxAttr{Size: 1000, IovLimit: 5}},
		err:   ENODATA, errText: "rx_attr.iov_limit >= 5",
	},
	{
		name:  "tx op_flags",
		quote: "fi_endpoint(3) op_flags - Default transmit operation flags: Flags that control the operation of operations submitted against the context.",
		hints: &Info{TxAttr: &TxAttr{OpFlags: DELIVERY_COMPLETE}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: each(func(in *Info) string { return expect("op_flags", in.TxAttr.OpFlags, DELIVERY_COMPLETE) }),
	},
	{
		name:  "rx op_flags",
		quote: "fi_endpoint(3) op_flags - Default receive operation flags: Flags that control the operation of operations submitted against the context.",
		hints: &Info{RxAttr: &RxAttr{OpFlags: INJECT}},
		err:   ENODATA, errText: "rx_attr.op_flags FI_INJECT",
	},
	{
		name:  "msg_order",
		quote: "fi_endpoint(3) msg_order: Message order is determined using a set of ordering bits.",
		hints: &Info{TxAttr: &TxAttr{MsgOrder: ORDER_SAS | ORDER_WAR}},
		err:   ENODATA, errText: "tx_attr.msg_order FI_ORDER_WAR",
	},
	{
		name:  "comp_order",
		quote: "fi_endpoint(3) comp_order: Providers should return the completion order that they actually provide, with the constraint that the returned ordering is stricter than that specified by the application.",
		hints: &Info{RxAttr: &RxAttr{CompOrder: ORDER_DATA}},
		err:   ENODATA, errText: "rx_attr.comp_order FI_ORDER_DATA",
	},
	{
		name:  "tx tclass",
		quote: "fi_endpoint(3) Traffic Class (tclass): If tclass is unset or set to FI_TC_UNSPEC, the endpoint will use the default traffic class associated with the domain.",
		hints: &Info{TxAttr: &TxAttr{TClass: MakeDSCP(46)}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("tclass", in.TxAttr.TClass, MakeDSCP(46)) }),
	},
	{
		name:  "total_buffered_recv",
		quote: "fi_endpoint(3) total_buffered_recv: It is a hint to the provider of the total available space that may be needed to buffer messages that are received for which there is no matching receive operation. The provider may adjust or ignore this value.",
		hints: &Info{RxAttr: &RxAttr{TotalBufferedRecv: 1 << 20}, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("total_buffered_recv", in.RxAttr.TotalBufferedRecv, 65536) }),
	},

	// Handle.
	{
		name:  "handle",
		quote: "If hints->handle is set to struct fid_pep, the hints->handle will be copied to info->handle on output from fi_getinfo.",
		hints: &Info{Handle: 0x1234, DomainAttr: &DomainAttr{Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string { return expect("handle", in.Handle, 0x1234) }),
	},
}

func TestGetInfo(t *testing.T) {
	fakeNet(t)
	for _, tt := range getinfoTests {
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
			out, err := GetInfo(version, tt.node, tt.service, tt.flags, tt.hints, offered)
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
	out, err := GetInfo(v1_17, "127.0.0.1", "7000", 0, hints, offered)
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
		out, err := GetInfo(v1_17, node, "7000", 0, &Info{FabricAttr: &FabricAttr{ProvName: "tcp"}}, testOffered())
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
		GetInfo(v1_17, node, "", uint64(NUMERICHOST), nil, testOffered())
	}
	if *lookups != 0 {
		t.Errorf("GetInfo with FI_NUMERICHOST looked up %d names", *lookups)
	}
}

// TestGetInfoErrors: errors are Errno values with a sentence, usable with
// errors.Is and errors.As.
func TestGetInfoErrors(t *testing.T) {
	_, err := GetInfo(v1_17, "", "", 0, &Info{Caps: TAGGED, EPAttr: &EPAttr{Type: EP_MSG}}, testOffered())
	var code Errno
	if !errors.As(err, &code) || code != ENODATA {
		t.Fatalf("errors.As(%v) = %v, want FI_ENODATA", err, code)
	}
	if want := "fi_getinfo: no provider supports FI_TAGGED on FI_EP_MSG"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// A getinfoCall is one random call: the property tests and the fuzz target
// build them from bytes.
type getinfoCall struct {
	version       Version
	node, service string
	flags         uint64
	hints         *Info
}

func (c getinfoCall) String() string {
	h := "nil"
	if c.hints != nil {
		h = c.hints.String()
	}
	return fmt.Sprintf("%v, %q, %q, %#x,\n%s", c.version, c.node, c.service, c.flags, h)
}

// byteSource reads values from fuzz input; past its end it reads zeros.
type byteSource struct{ b []byte }

func (s *byteSource) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	b := s.b[0]
	s.b = s.b[1:]
	return b
}

// pick returns one of vs, or zero, or (one time in 32) raw bits.
func pick[T ~uint64 | ~uint32](s *byteSource, vs ...T) T {
	b := s.byte()
	switch {
	case b&31 == 31:
		return T(s.u64())
	case b&3 == 0 || len(vs) == 0:
		return 0
	}
	return vs[int(b>>3)%len(vs)]
}

// someOf ORs up to three of vs, and (one time in 32) raw bits.
func someOf[T ~uint64 | ~uint32](s *byteSource, vs ...T) T {
	var x T
	for range s.byte() % 4 {
		x |= vs[int(s.byte())%len(vs)]
	}
	if s.byte()&31 == 31 {
		x |= T(s.u64())
	}
	return x
}

// capsFrom returns plausible caps mostly, random ones sometimes.
func capsFrom(s *byteSource) Caps {
	sets := []Caps{0, MSG, TAGGED, MSG | TAGGED, RMA, MSG | RMA, MSG | RMA | READ | WRITE, MSG | SEND, TAGGED | RECV,
		ATOMIC, MSG | SOURCE, TAGGED | DIRECTED_RECV | SOURCE, RMA | RMA_EVENT, MSG | MULTI_RECV, MSG | LOCAL_COMM,
		MSG | REMOTE_COMM, RMA | REMOTE_WRITE, TAGGED | SOURCE | SOURCE_ERR, MSG | HMEM, MSG | FENCE, MSG | SHARED_AV}
	if b := s.byte(); b < 192 {
		return sets[int(b)%len(sets)]
	}
	return someOf(s, allCapBits...)
}

// sideCapsFrom returns tx_attr or rx_attr caps: mostly 0, "the
// applicable capability bits from the fi_info structure".
func sideCapsFrom(s *byteSource) Caps {
	if s.byte()&3 != 0 {
		return 0
	}
	return capsFrom(s)
}

func sizeFrom(s *byteSource) uint64 {
	switch b := s.byte(); b & 3 {
	case 0:
		return 0
	case 1:
		return uint64(b >> 2)
	case 2:
		return 1 << (b >> 2 & 63)
	}
	return s.u64()
}

var (
	fuzzNodes    = []string{"", "127.0.0.1", "10.0.0.5", "10.0.0.9", "localhost", "node7", "v6host", "fd00::5", "[::1]", "::1", "no.such.host", "fi_sockaddr_in://127.0.0.1:7000", "fi_sockaddr_in6://[fd00::7]:1", "fi_sockaddr://bad", "0.0.0.0", "192.0.2.1"}
	fuzzServices = []string{"", "7000", "0", "http", "70000", "nosuch", "65535"}
	fuzzProvs    = []string{"", "tcp", "tcp;ofi_rxm", "ofi_rxm;verbs", "ofi_rxm", "verbs", "TCP", "udp", "tcp;^ofi_rxm", ";", "a;b;c"}
	fuzzDomains  = []string{"", "lo", "eth0", "rxe0", "v6", "rxe0-dgram", "eth9"}
	allCapBits   = []Caps{MSG, RMA, TAGGED, ATOMIC, MULTICAST, COLLECTIVE, READ, WRITE, RECV, SEND, REMOTE_READ,
		REMOTE_WRITE, MULTI_RECV, TRIGGER, FENCE, HMEM, VARIABLE_MSG, RMA_PMEM, SOURCE_ERR, LOCAL_COMM,
		REMOTE_COMM, SHARED_AV, RMA_EVENT, SOURCE, NAMED_RX_CTX, DIRECTED_RECV}
	allModeBits = []Mode{CONTEXT, MSG_PREFIX, ASYNC_IOV, RX_CQ_DATA, LOCAL_MR, NOTIFY_FLAGS_ONLY, RESTRICTED_COMP, CONTEXT2}
	allMRBits   = []MRMode{MR_LOCAL, MR_RAW, MR_VIRT_ADDR, MR_ALLOCATED, MR_PROV_KEY, MR_MMU_NOTIFY, MR_RMA_EVENT,
		MR_ENDPOINT, MR_HMEM, MR_COLLECTIVE}
)

func callFrom(b []byte) getinfoCall {
	s := &byteSource{b}
	// Each field is set one time in four, so that calls combine a few
	// requirements and often still match.
	maybe := func() bool { return s.byte() < 64 }
	str := func(vs []string) string {
		if !maybe() {
			return ""
		}
		return vs[int(s.byte())%len(vs)]
	}
	size := func() uint64 {
		if !maybe() {
			return 0
		}
		return sizeFrom(s)
	}
	c := getinfoCall{version: v1_17, node: str(fuzzNodes), service: str(fuzzServices)}
	switch b := s.byte(); {
	case b >= 254:
		c.version = []Version{MakeVersion(1, 18), MakeVersion(0, 1)}[b&1]
	case b >= 200:
		c.version = []Version{MakeVersion(1, 4), MakeVersion(1, 5)}[b&1]
	}
	switch b := s.byte(); {
	case b == 255:
		c.flags = s.u64()
	case b >= 250:
		c.flags = uint64(PROV_ATTR_ONLY)
	default:
		c.flags = uint64(b&1)*uint64(SOURCE) | uint64(b>>1&1)*uint64(NUMERICHOST)
	}
	if s.byte()&7 == 0 {
		return c
	}
	h := &Info{Caps: capsFrom(s), Mode: someOf(s, allModeBits...)}
	c.hints = h
	if maybe() {
		h.AddrFormat = pick(s, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6, ADDR_STR, SOCKADDR_IB)
	}
	if maybe() {
		h.SrcAddr = addr([]string{"10.0.0.5:7000", "127.0.0.1:0", "0.0.0.0:1", "[fd00::5]:2", "[::]:0", "192.0.2.1:1"}[s.byte()%6])
	}
	if maybe() {
		h.DestAddr = addr([]string{"10.0.0.9:7000", "127.0.0.1:7001", "[fd00::7]:3"}[s.byte()%3])
	}
	if maybe() {
		h.Handle = uint64(s.byte())
	}
	if maybe() {
		t := &TxAttr{Caps: sideCapsFrom(s)}
		if maybe() {
			t.Mode = someOf(s, allModeBits...)
		}
		if maybe() {
			t.OpFlags = someOf(s, COMPLETION, INJECT, DELIVERY_COMPLETE, TRANSMIT_COMPLETE)
		}
		if maybe() {
			t.MsgOrder = someOf(s, ORDER_SAS, ORDER_RAR, ORDER_WAW, ORDER_WAR)
		}
		t.CompOrder = pick(s, ORDER_STRICT, ORDER_DATA)
		t.InjectSize, t.Size, t.IovLimit, t.RMAIovLimit = size(), size(), size(), size()
		t.TClass = pick(s, TC_BULK_DATA, MakeDSCP(46))
		h.TxAttr = t
	}
	if maybe() {
		r := &RxAttr{Caps: sideCapsFrom(s)}
		if maybe() {
			r.Mode = someOf(s, allModeBits...)
		}
		if maybe() {
			r.OpFlags = someOf(s, COMPLETION, multiRecvOp)
		}
		if maybe() {
			r.MsgOrder = someOf(s, ORDER_SAS, ORDER_RAR)
		}
		r.CompOrder = pick(s, ORDER_STRICT, ORDER_DATA)
		r.TotalBufferedRecv, r.Size, r.IovLimit = size(), size(), size()
		h.RxAttr = r
	}
	if maybe() {
		ep := &EPAttr{Type: pick(s, EP_MSG, EP_RDM, EP_DGRAM, EP_SOCK_STREAM)}
		if maybe() {
			ep.Protocol = pick(s, PROTO_SOCK_TCP, PROTO_RXM_TCP, PROTO_RXM)
		}
		ep.ProtocolVersion = uint32(size())
		ep.MaxMsgSize, ep.MsgPrefixSize, ep.MemTagFormat = size(), size(), size()
		ep.MaxOrderRAWSize, ep.MaxOrderWARSize, ep.MaxOrderWAWSize = size(), size(), size()
		if maybe() {
			ep.TxCtxCnt = pick(s, 1, 2, SHARED_CONTEXT)
		}
		if maybe() {
			ep.RxCtxCnt = pick(s, 1, 2, SHARED_CONTEXT)
		}
		if maybe() {
			ep.AuthKeySize = uint64(s.byte() % 9)
			if maybe() {
				ep.AuthKey = make([]byte, s.byte()%9)
			}
		}
		h.EPAttr = ep
	}
	if maybe() {
		d := &DomainAttr{Name: str(fuzzDomains)}
		if maybe() {
			d.Threading = pick(s, THREAD_SAFE, THREAD_FID, THREAD_DOMAIN, THREAD_COMPLETION, THREAD_ENDPOINT)
		}
		if maybe() {
			d.ControlProgress, d.DataProgress = pick(s, PROGRESS_AUTO, PROGRESS_MANUAL), pick(s, PROGRESS_AUTO, PROGRESS_MANUAL)
		}
		if maybe() {
			d.ResourceMgmt, d.AVType = pick(s, RM_ENABLED, RM_DISABLED), pick(s, AV_MAP, AV_TABLE)
		}
		d.MRMode = pick(s, MR_BASIC, MR_SCALABLE, MR_LOCAL|mrBasicMap, MR_LOCAL|MR_ALLOCATED)
		if maybe() {
			d.MRMode |= someOf(s, allMRBits...)
		}
		d.MRKeySize, d.CQDataSize, d.CQCnt, d.EPCnt, d.MaxEPSrxCtx, d.CntrCnt = size(), size(), size(), size(), size(), size()
		if maybe() {
			d.Caps = someOf(s, LOCAL_COMM, REMOTE_COMM, SHARED_AV)
		}
		if maybe() {
			d.Mode = RESTRICTED_COMP
		}
		if maybe() {
			d.TClass = TC_LOW_LATENCY
		}
		if maybe() {
			d.AuthKeySize = uint64(s.byte() % 9)
		}
		if maybe() {
			d.Domain = uint64(s.byte())
		}
		h.DomainAttr = d
	}
	if maybe() {
		f := &FabricAttr{ProvName: str(fuzzProvs), Name: str([]string{"127.0.0.0/8", "10.0.0.0/24", "x"})}
		if maybe() {
			f.ProvVersion = pick(s, MakeVersion(117, 0), MakeVersion(117, 1), MakeVersion(118, 0))
		}
		if maybe() {
			f.APIVersion = pick(s, v1_17, MakeVersion(1, 5), MakeVersion(1, 18))
		}
		h.FabricAttr = f
	}
	return c
}

// multiRecvOp is FI_MULTI_RECV as a receive operation flag.
const multiRecvOp = OpFlags(MULTI_RECV)

// checkCall runs one call and checks the properties every answer has:
// no panic; an error is an Errno with a sentence and no entries; entries
// come in the offered order, complete, with api_version set; and asking
// again with an answer as the hints finds that same entry (what GetInfo
// returns is something it accepts).
func checkCall(t *testing.T, c getinfoCall) {
	t.Helper()
	offered := testOffered()
	out, err := GetInfo(c.version, c.node, c.service, c.flags, c.hints, offered)
	if err != nil {
		var code Errno
		if !errors.As(err, &code) || code == 0 || !strings.HasPrefix(err.Error(), "fi_getinfo: ") || out != nil {
			t.Fatalf("GetInfo(%v) = %v, %v: want nil and an Errno", c, ids(out), err)
		}
		return
	}
	if len(out) == 0 {
		t.Fatalf("GetInfo(%v) = no entries, no error", c)
	}
	if c.flags&uint64(PROV_ATTR_ONLY) != 0 {
		return
	}
	next := 0
	for _, in := range out {
		if in.TxAttr == nil || in.RxAttr == nil || in.EPAttr == nil || in.DomainAttr == nil || in.FabricAttr == nil {
			t.Fatalf("GetInfo(%v) returned an incomplete entry:\n%v", c, in)
		}
		if in.FabricAttr.APIVersion != c.version {
			t.Fatalf("GetInfo(%v): api_version %v, want %v", c, in.FabricAttr.APIVersion, c.version)
		}
		for next < len(offered) && id(offered[next]) != id(in) {
			next++
		}
		if next == len(offered) {
			t.Fatalf("GetInfo(%v) = %v: not in the offered order %v", c, ids(out), ids(offered))
		}
		next++
		again, err := GetInfo(c.version, "", "", 0, in, testOffered())
		if err != nil || !slices.Contains(ids(again), id(in)) {
			t.Fatalf("GetInfo(%v) returned\n%v\nbut with it as hints GetInfo = %v, %v", c, in, ids(again), err)
		}
	}
}

// TestGetInfoRandom checks the properties of checkCall on random calls.
func TestGetInfoRandom(t *testing.T) {
	fakeNet(t)
	r := rand.New(rand.NewPCG(1, 17))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	buf := make([]byte, 400)
	for range n {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		checkCall(t, callFrom(buf))
	}
}

// FuzzGetInfo: random hints never panic, and answers have the properties of
// checkCall. go test -fuzz=FuzzGetInfo ./core/fi/
func FuzzGetInfo(f *testing.F) {
	fakeNet(f)
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte("\x00\x04\x01\x00\x01\x02\x00\x00\x00\x00\x00\x00\x00\x07\x01\x01\x01"))
	f.Add(make([]byte, 64))
	for i := range 8 {
		b := make([]byte, 200)
		r := rand.New(rand.NewPCG(uint64(i), 3))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCall(t, callFrom(b)) })
}
