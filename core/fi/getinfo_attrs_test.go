package fi

import "fmt"

var getinfoAttrTests = []getinfoCase{
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
		hints: &Info{DomainAttr: &DomainAttr{AuthKeySize: 8, AuthKey: []byte("01234567"), Name: "lo"}},
		want:  loIDs,
		check: each(func(in *Info) string {
			return expect("auth_key", fmt.Sprintf("%d %s", in.DomainAttr.AuthKeySize, in.DomainAttr.AuthKey), "8 01234567")
		}),
	},
	{
		name:  "auth key too long",
		quote: "fi_domain(3) Default authorization key length (auth_key_size): The length in bytes of the default authorization key for the domain.",
		hints: &Info{DomainAttr: &DomainAttr{AuthKeySize: MaxAuthKeySize + 1}},
		err:   ENODATA, errText: "domain_attr.auth_key_size 65 (offered: keys of 1 to 64 bytes",
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
		name:  "FI_MR_VIRT_ADDR is cleared, not required",
		quote: "fi_mr(3): If a provider requires the behavior defined for an mr_mode bit, it will leave the bit set on output to fi_getinfo. Otherwise, the provider can clear the bit.",
		hints: &Info{Caps: RMA | REMOTE_READ | REMOTE_WRITE, DomainAttr: &DomainAttr{MRMode: MR_LOCAL | MR_ALLOCATED | MR_PROV_KEY}, FabricAttr: &FabricAttr{ProvName: "verbs"}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"verbs rxe0 msg"},
		check: each(func(in *Info) string {
			return expect("mr_mode", in.DomainAttr.MRMode, MR_LOCAL|MR_ALLOCATED|MR_PROV_KEY) +
				expect("remote caps", in.Caps&(REMOTE_READ|REMOTE_WRITE), REMOTE_READ|REMOTE_WRITE)
		}),
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
		// The rdm entry's keys are 4 bytes; the msg entry's any size.
		want:  []string{"tcp lo msg", "tcp;ofi_rxm lo rdm"},
		check: each(func(in *Info) string { return expect("auth_key", string(in.EPAttr.AuthKey), "\x01\x02\x03\x04") }),
	},
	{
		name:  "ep auth key of another size",
		quote: "fi_endpoint(3) auth_key_size - Authorization Key Length: The length of the authorization key in bytes. This field will be 0 if authorization keys are not available or used.",
		hints: &Info{EPAttr: &EPAttr{AuthKeySize: 5, AuthKey: []byte{1, 2, 3, 4, 5}}},
		offered: func() []*Info {
			o := testOffered()[:2]
			o[1].EPAttr.AuthKeySize = 4
			return o
		},
		want: []string{"tcp lo msg"},
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
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: each(func(in *Info) string { return expect("op_flags", in.TxAttr.OpFlags, DELIVERY_COMPLETE) }),
	},
	{
		name:  "op_flags the tree honours",
		quote: "fi_endpoint(3) op_flags - Default transmit operation flags: Flags that control the operation of operations submitted against the context.",
		hints: &Info{TxAttr: &TxAttr{OpFlags: COMPLETION | INJECT_COMPLETE | TRANSMIT_COMPLETE}, RxAttr: &RxAttr{OpFlags: COMPLETION}, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg", "verbs rxe0 msg"},
		check: each(func(in *Info) string {
			return expect("op_flags", in.TxAttr.OpFlags, COMPLETION|INJECT_COMPLETE|TRANSMIT_COMPLETE) + expect("op_flags", in.RxAttr.OpFlags, COMPLETION)
		}),
	},
	{
		name:  "rx op_flags FI_MULTI_RECV needs the capability",
		quote: "fi_endpoint(3) FI_MULTI_RECV: Applies to posted receive operations. This flag allows the user to post a single buffer that will receive multiple incoming messages.",
		hints: &Info{RxAttr: &RxAttr{OpFlags: OpFlags(MULTI_RECV)}, EPAttr: &EPAttr{Type: EP_MSG}},
		err:   ENODATA, errText: "rx_attr.op_flags FI_MULTI_RECV",
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
