package fi

import (
	"fmt"
	"reflect"
	"strings"
)

var getinfoTests = []getinfoCase{
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
	{
		name: "rx cq data mode without remote cq data",
		quote: "FI_RX_CQ_DATA: This mode bit only applies to data transfers that set FI_REMOTE_CQ_DATA. " +
			"fi_domain(3) cq_data_size: This field indicates the number of bytes that the provider supports for remote CQ data.",
		offered: offeredRxCQData,
		hints:   &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "verbs"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:    []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string {
			return expect("rx mode", in.RxAttr.Mode, Mode(0)) +
				expect("cq_data_size", in.DomainAttr.CQDataSize, uint64(0))
		}),
	},
	{
		name:    "rx cq data mode offered",
		quote:   "FI_RX_CQ_DATA: When set, a data transfer that carries remote CQ data will consume a receive buffer at the target.",
		offered: offeredRxCQData,
		hints: &Info{Mode: CONTEXT, RxAttr: &RxAttr{Mode: RX_CQ_DATA}, FabricAttr: &FabricAttr{ProvName: "verbs"},
			EPAttr: &EPAttr{Type: EP_MSG}},
		want: []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string {
			return expect("rx mode", in.RxAttr.Mode, RX_CQ_DATA) + expect("cq_data_size", in.DomainAttr.CQDataSize, uint64(4))
		}),
	},
	{
		name:    "rx cq data mode needed for cq data",
		quote:   "Mode bits that are set to zero indicate the application does not support any modes.",
		offered: offeredRxCQData,
		hints: &Info{Mode: CONTEXT, FabricAttr: &FabricAttr{ProvName: "verbs"}, EPAttr: &EPAttr{Type: EP_MSG},
			DomainAttr: &DomainAttr{CQDataSize: 4}},
		err: ENODATA, errText: "rx_attr.mode FI_RX_CQ_DATA",
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
}

// offeredRxCQData is testOffered with verbs's FI_EP_MSG entry requiring
// FI_RX_CQ_DATA in rx_attr.mode, as libfabric's verbs reports it.
func offeredRxCQData() []*Info {
	o := testOffered()
	for _, in := range o {
		if id(in) == "verbs rxe0 msg" {
			in.RxAttr.Mode |= RX_CQ_DATA
		}
	}
	return o
}
