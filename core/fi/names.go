package fi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fabricfs/fabricfs/core/ctl"
)

// Named is the set of types whose values have libfabric names: the flag
// sets (Caps, Mode, OpFlags, MsgOrder, CompOrder, MRMode, CQFlags) and the
// enumerations (EPType, Protocol, AddrFormat, ...), plus TClass and Errno.
// Parse reads them all and String (Errno: Name) prints them, both driven by
// one table of names per type.
type Named interface {
	~uint64 | ~uint32 | ~int
	names() *nameTable
}

// A fiName is one libfabric name of a value.
type fiName struct {
	s     string // without "FI_"
	v     uint64
	mask  uint64 // flag sets: the name is printed when x&mask == v; 0 means v
	alias bool   // Parse accepts it, String never prints it (fi_tostr does not)
}

// nameTable holds the names of one type, in the order fi_tostr prints them.
type nameTable struct {
	what         string // a value in words, for errors: "capability"
	flags        bool   // a flag set: String prints "[ FI_A, FI_B ]"
	provSpecific bool   // enumeration whose PROV_SPECIFIC values print "Provider specific"
	prefix       string // the names' common prefix, which Parse lets people leave out
	names        []fiName
}

// nm names one value; for a flag set, a name is printed when all its bits
// are set.
func nm[T ~uint64 | ~uint32](s string, v T) fiName { return fiName{s: s, v: uint64(v)} }

// aliasNames marks names as accepted by Parse only.
func aliasNames(ns ...[]fiName) []fiName {
	var out []fiName
	for _, l := range ns {
		for _, n := range l {
			n.alias = true
			out = append(out, n)
		}
	}
	return out
}

// enumNames names the values of an enumeration that count up from first.
func enumNames[T ~uint32](first T, ns ...string) []fiName {
	out := make([]fiName, len(ns))
	for i, s := range ns {
		out[i] = fiName{s: s, v: uint64(first) + uint64(i)}
	}
	return out
}

func joinNames(ns ...[]fiName) []fiName {
	var out []fiName
	for _, l := range ns {
		out = append(out, l...)
	}
	return out
}

// format prints x as fi_tostr does. Flag sets print every name whose bits
// are set, in the table's order, as "[ FI_A, FI_B ]" ("[  ]" for none);
// bits without a name are left out, as fi_tostr leaves them out.
// Enumerations print the name, or "Unknown" (or "Provider specific").
func (t *nameTable) format(x uint64) string {
	if !t.flags {
		for _, n := range t.names {
			if !n.alias && n.v == x {
				return "FI_" + n.s
			}
		}
		if t.provSpecific && x&uint64(PROV_SPECIFIC) != 0 {
			return "Provider specific"
		}
		return "Unknown"
	}
	var b strings.Builder
	b.WriteString("[ ")
	sep := ""
	for _, n := range t.names {
		m := n.mask
		if m == 0 {
			m = n.v
		}
		if !n.alias && x&m == n.v {
			b.WriteString(sep)
			b.WriteString("FI_")
			b.WriteString(n.s)
			sep = ", "
		}
	}
	b.WriteString(" ]")
	return b.String()
}

func (t *nameTable) lookup(s string) (uint64, bool) {
	if len(s) > 3 && strings.EqualFold(s[:3], "FI_") {
		s = s[3:]
	}
	for _, n := range t.names {
		if strings.EqualFold(n.s, s) {
			return n.v, true
		}
	}
	for _, n := range t.names {
		if len(n.s) == len(t.prefix)+len(s) && strings.EqualFold(n.s, t.prefix+s) {
			return n.v, true
		}
	}
	return 0, false
}

// value reads one name or number.
func (t *nameTable) value(tok string) (uint64, error) {
	if tok == "" {
		return 0, fmt.Errorf("missing %s", t.what)
	}
	if c := tok[0]; '0' <= c && c <= '9' {
		v, err := ctl.Uint(tok)
		if err != nil {
			return 0, fmt.Errorf("bad %s number %q", t.what, tok)
		}
		return v, nil
	}
	if v, ok := t.lookup(tok); ok {
		return v, nil
	}
	return 0, fmt.Errorf("unknown %s %q", t.what, tok)
}

// parse reads a value of the table's type; see Parse.
func (t *nameTable) parse(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if !t.flags {
		return t.value(s)
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	if s == "" {
		return 0, nil
	}
	var x uint64
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != ',' && s[i] != '|' {
			continue
		}
		tok := strings.TrimSpace(s[start:i])
		start = i + 1
		if tok == "" {
			return 0, fmt.Errorf("empty %s in %q", t.what, s)
		}
		v, err := t.value(tok)
		if err != nil {
			return 0, err
		}
		x |= v
	}
	return x, nil
}

// Parse reads a value of a Named type the way people and scripts write
// them. For a flag set: names joined by ',' or '|', with or without "FI_",
// in any case, optionally inside "[ ]" as String prints them; numbers in
// decimal or 0x hex may stand for bits; "" and "0" are the empty set:
//
//	Parse[Caps]("msg,rma")  Parse[Caps]("FI_MSG|FI_RMA")  Parse[Caps]("[ FI_MSG, FI_RMA ]")
//
// For an enumeration, one name or number: Parse[EPType]("FI_EP_RDM"). The
// prefix that all of a type's names share may be left out too:
// Parse[EPType]("rdm"), Parse[Progress]("auto"), Parse[MsgOrder]("rar,sas").
// Names that fi_tostr never prints are accepted too (Caps: AV_USER_ID;
// OpFlags: every capability and call flag, such as SEND and
// SELECTIVE_COMPLETION).
// Errors name the bad token: unknown capability "foo".
func Parse[T Named](s string) (T, error) {
	var zero T
	t := zero.names()
	v, err := t.parse(s)
	if err != nil {
		return 0, err
	}
	if x := T(v); x < 0 || uint64(x) != v {
		return 0, fmt.Errorf("%s %q out of range", t.what, s)
	}
	return T(v), nil
}

func formatNamed[T Named](x T) string { return x.names().format(uint64(x)) }

// String prints x as fi_tostr does, e.g. "[ FI_MSG, FI_RMA ]".
func (x Caps) String() string { return formatNamed(x) }

// String prints x as fi_tostr does, e.g. "[ FI_CONTEXT ]".
func (x Mode) String() string { return formatNamed(x) }

// String prints x as fi_tostr does, e.g. "[ FI_COMPLETION ]". fi_tostr
// prints only the bits of tx_attr/rx_attr.op_flags (no FI_SEND, no
// FI_COMMIT_COMPLETE).
func (x OpFlags) String() string { return formatNamed(x) }

// String prints x as fi_tostr does, e.g. "[ FI_ORDER_RAR, FI_ORDER_SAS ]".
func (x MsgOrder) String() string { return formatNamed(x) }

// String prints x as fi_tostr prints comp_order: "[ FI_ORDER_NONE ]" or
// "[ FI_ORDER_STRICT ]" (or neither, when only some of ORDER_STRICT's bits
// are set), then FI_ORDER_DATA.
func (x CompOrder) String() string { return formatNamed(x) }

// String prints x as fi_tostr does, e.g. "[ FI_MR_LOCAL, FI_MR_VIRT_ADDR ]".
func (x MRMode) String() string { return formatNamed(x) }

// String prints x as fi_tostr prints FI_TYPE_CQ_EVENT_FLAGS, e.g.
// "[ FI_RECV, FI_MSG ]".
func (x CQFlags) String() string { return formatNamed(x) }

// String prints "FI_EP_MSG".
func (x EPType) String() string { return formatNamed(x) }

// String prints "FI_PROTO_SOCK_TCP"; like fi_tostr it prints "Unknown" for
// PROTO_MXM and PROTO_MRAIL.
func (x Protocol) String() string { return formatNamed(x) }

// String prints "FI_SOCKADDR_IN".
func (x AddrFormat) String() string { return formatNamed(x) }

// String prints "FI_THREAD_SAFE".
func (x Threading) String() string { return formatNamed(x) }

// String prints "FI_PROGRESS_AUTO".
func (x Progress) String() string { return formatNamed(x) }

// String prints "FI_RM_ENABLED".
func (x ResourceMgmt) String() string { return formatNamed(x) }

// String prints "FI_AV_TABLE".
func (x AVType) String() string { return formatNamed(x) }

// String prints "FI_WAIT_FD" (fi_tostr has no FI_TYPE for wait objects).
func (x WaitObj) String() string { return formatNamed(x) }

// String prints "FI_CQ_FORMAT_TAGGED".
func (x CQFormat) String() string { return formatNamed(x) }

// String prints "FI_CQ_COND_NONE".
func (x CQWaitCond) String() string { return formatNamed(x) }

// String prints "FI_CONNREQ".
func (x EQEvent) String() string { return formatNamed(x) }

// String prints "FI_CNTR_EVENTS_COMP".
func (x CntrEvents) String() string { return formatNamed(x) }

// String prints "FI_HMEM_SYSTEM".
func (x HMEMIface) String() string { return formatNamed(x) }

// String prints "FI_UINT64".
func (x AtomicType) String() string { return formatNamed(x) }

// String prints "FI_SUM".
func (x AtomicOp) String() string { return formatNamed(x) }

// String prints "FI_BARRIER".
func (x CollectiveOp) String() string { return formatNamed(x) }

// String prints "FI_OPT_ENDPOINT".
func (x OptLevel) String() string { return formatNamed(x) }

// String prints "FI_OPT_CM_DATA_SIZE".
func (x Opt) String() string { return formatNamed(x) }

// String prints "FI_HMEM_P2P_ENABLED".
func (x HMEMP2P) String() string { return formatNamed(x) }

// String prints t in hex, "0x0", as fi_tostr prints tclass. Parse[TClass]
// also reads the TC_* names.
func (t TClass) String() string { return "0x" + strconv.FormatUint(uint64(t), 16) }

// String prints "1.17", as fi_tostr prints api_version.
func (v Version) String() string {
	return strconv.FormatUint(uint64(v.Major()), 10) + "." + strconv.FormatUint(uint64(v.Minor()), 10)
}

// ParseVersion reads "1.17" as MakeVersion(1, 17).
func ParseVersion(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.ParseUint(maj, 10, 16)
	b, err2 := strconv.ParseUint(min, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad version %q: want MAJOR.MINOR, such as 1.17", s)
	}
	return MakeVersion(uint32(a), uint32(b)), nil
}

func (Caps) names() *nameTable         { return &capsNames }
func (Mode) names() *nameTable         { return &modeNames }
func (OpFlags) names() *nameTable      { return &opFlagsNames }
func (MsgOrder) names() *nameTable     { return &msgOrderNames }
func (CompOrder) names() *nameTable    { return &compOrderNames }
func (MRMode) names() *nameTable       { return &mrModeNames }
func (CQFlags) names() *nameTable      { return &cqFlagsNames }
func (EPType) names() *nameTable       { return &epTypeNames }
func (Protocol) names() *nameTable     { return &protocolNames }
func (AddrFormat) names() *nameTable   { return &addrFormatNames }
func (Threading) names() *nameTable    { return &threadingNames }
func (Progress) names() *nameTable     { return &progressNames }
func (ResourceMgmt) names() *nameTable { return &resourceMgmtNames }
func (AVType) names() *nameTable       { return &avTypeNames }
func (WaitObj) names() *nameTable      { return &waitObjNames }
func (CQFormat) names() *nameTable     { return &cqFormatNames }
func (CQWaitCond) names() *nameTable   { return &cqWaitCondNames }
func (EQEvent) names() *nameTable      { return &eqEventNames }
func (CntrEvents) names() *nameTable   { return &cntrEventsNames }
func (HMEMIface) names() *nameTable    { return &hmemIfaceNames }
func (AtomicType) names() *nameTable   { return &atomicTypeNames }
func (AtomicOp) names() *nameTable     { return &atomicOpNames }
func (CollectiveOp) names() *nameTable { return &collectiveOpNames }
func (OptLevel) names() *nameTable     { return &optLevelNames }
func (Opt) names() *nameTable          { return &optNames }
func (HMEMP2P) names() *nameTable      { return &hmemP2PNames }
func (TClass) names() *nameTable       { return &tclassNames }
func (Errno) names() *nameTable        { return &errnoNames }

// The name tables. Printed names are in fi_tostr's order (which is not
// always bit order); aliases are the names fi_tostr does not print.
var (
	capsPrinted = []fiName{
		nm("MSG", MSG), nm("RMA", RMA), nm("TAGGED", TAGGED),
		nm("ATOMIC", ATOMIC), nm("MULTICAST", MULTICAST),
		nm("COLLECTIVE", COLLECTIVE), nm("READ", READ), nm("WRITE", WRITE),
		nm("RECV", RECV), nm("SEND", SEND), nm("REMOTE_READ", REMOTE_READ),
		nm("REMOTE_WRITE", REMOTE_WRITE), nm("MULTI_RECV", MULTI_RECV),
		nm("REMOTE_CQ_DATA", REMOTE_CQ_DATA), nm("TRIGGER", TRIGGER),
		nm("FENCE", FENCE), nm("VARIABLE_MSG", VARIABLE_MSG),
		nm("RMA_PMEM", RMA_PMEM), nm("SOURCE_ERR", SOURCE_ERR),
		nm("LOCAL_COMM", LOCAL_COMM), nm("REMOTE_COMM", REMOTE_COMM),
		nm("SHARED_AV", SHARED_AV), nm("RMA_EVENT", RMA_EVENT),
		nm("SOURCE", SOURCE), nm("NAMED_RX_CTX", NAMED_RX_CTX),
		nm("DIRECTED_RECV", DIRECTED_RECV), nm("HMEM", HMEM),
	}
	capsOnlyParsed = []fiName{
		nm("ATOMICS", ATOMICS), nm("TRANSMIT", TRANSMIT),
		nm("AV_USER_ID", AV_USER_ID), nm("PROV_ATTR_ONLY", PROV_ATTR_ONLY),
		nm("NUMERICHOST", NUMERICHOST),
	}
	capsNames = nameTable{what: "capability", flags: true,
		names: joinNames(capsPrinted, aliasNames(capsOnlyParsed))}

	opFlagsNames = nameTable{what: "operation flag", flags: true, names: joinNames(
		[]fiName{
			nm("MULTICAST", MULTICAST), nm("MULTI_RECV", MULTI_RECV),
			nm("REMOTE_CQ_DATA", REMOTE_CQ_DATA), nm("MORE", MORE),
			nm("PEEK", PEEK), nm("TRIGGER", TRIGGER), nm("FENCE", FENCE),
			nm("COMPLETION", COMPLETION), nm("INJECT", INJECT),
			nm("INJECT_COMPLETE", INJECT_COMPLETE),
			nm("TRANSMIT_COMPLETE", TRANSMIT_COMPLETE),
			nm("DELIVERY_COMPLETE", DELIVERY_COMPLETE),
			nm("MATCH_COMPLETE", MATCH_COMPLETE), nm("AFFINITY", AFFINITY),
			nm("CLAIM", CLAIM), nm("DISCARD", DISCARD),
		},
		aliasNames(capsPrinted, capsOnlyParsed, []fiName{
			nm("EVENT", EVENT), nm("PRIORITY", PRIORITY),
			nm("COMMIT_COMPLETE", COMMIT_COMPLETE),
			nm("SELECTIVE_COMPLETION", SELECTIVE_COMPLETION),
			nm("PEER_TRANSFER", PEER_TRANSFER), nm("PEER", PEER),
			nm("XPU_TRIGGER", XPU_TRIGGER), nm("HMEM_HOST_ALLOC", HMEM_HOST_ALLOC),
			nm("HMEM_DEVICE_ONLY", HMEM_DEVICE_ONLY), nm("REG_MR", REG_MR),
			nm("SYMMETRIC", SYMMETRIC), nm("SYNC_ERR", SYNC_ERR),
			nm("UNIVERSE", UNIVERSE), nm("FETCH_ATOMIC", FETCH_ATOMIC),
			nm("COMPARE_ATOMIC", COMPARE_ATOMIC), nm("BARRIER_SET", BARRIER_SET),
			nm("BROADCAST_SET", BROADCAST_SET), nm("ALLTOALL_SET", ALLTOALL_SET),
			nm("ALLREDUCE_SET", ALLREDUCE_SET), nm("ALLGATHER_SET", ALLGATHER_SET),
			nm("REDUCE_SCATTER_SET", REDUCE_SCATTER_SET),
			nm("REDUCE_SET", REDUCE_SET), nm("SCATTER_SET", SCATTER_SET),
			nm("GATHER_SET", GATHER_SET),
		}))}

	modeNames = nameTable{what: "mode", flags: true, names: []fiName{
		nm("CONTEXT", CONTEXT), nm("MSG_PREFIX", MSG_PREFIX),
		nm("ASYNC_IOV", ASYNC_IOV), nm("RX_CQ_DATA", RX_CQ_DATA),
		nm("LOCAL_MR", LOCAL_MR), nm("NOTIFY_FLAGS_ONLY", NOTIFY_FLAGS_ONLY),
		nm("RESTRICTED_COMP", RESTRICTED_COMP), nm("CONTEXT2", CONTEXT2),
		nm("BUFFERED_RECV", BUFFERED_RECV),
	}}

	msgOrderNames = nameTable{what: "message order", prefix: "ORDER_", flags: true, names: []fiName{
		nm("ORDER_RAR", ORDER_RAR), nm("ORDER_RAW", ORDER_RAW),
		nm("ORDER_RAS", ORDER_RAS), nm("ORDER_WAR", ORDER_WAR),
		nm("ORDER_WAW", ORDER_WAW), nm("ORDER_WAS", ORDER_WAS),
		nm("ORDER_SAR", ORDER_SAR), nm("ORDER_SAW", ORDER_SAW),
		nm("ORDER_SAS", ORDER_SAS), nm("ORDER_RMA_RAR", ORDER_RMA_RAR),
		nm("ORDER_RMA_RAW", ORDER_RMA_RAW), nm("ORDER_RMA_WAR", ORDER_RMA_WAR),
		nm("ORDER_RMA_WAW", ORDER_RMA_WAW), nm("ORDER_ATOMIC_RAR", ORDER_ATOMIC_RAR),
		nm("ORDER_ATOMIC_RAW", ORDER_ATOMIC_RAW),
		nm("ORDER_ATOMIC_WAR", ORDER_ATOMIC_WAR),
		nm("ORDER_ATOMIC_WAW", ORDER_ATOMIC_WAW),
		{s: "ORDER_NONE", alias: true},
	}}

	// comp_order prints NONE or STRICT by the value of all of STRICT's bits.
	compOrderNames = nameTable{what: "completion order", prefix: "ORDER_", flags: true, names: []fiName{
		{s: "ORDER_NONE", v: uint64(ORDER_NONE), mask: uint64(ORDER_STRICT)},
		nm("ORDER_STRICT", ORDER_STRICT),
		nm("ORDER_DATA", ORDER_DATA),
	}}

	mrModeNames = nameTable{what: "MR mode", prefix: "MR_", flags: true, names: []fiName{
		nm("MR_BASIC", MR_BASIC), nm("MR_SCALABLE", MR_SCALABLE),
		nm("MR_LOCAL", MR_LOCAL), nm("MR_RAW", MR_RAW),
		nm("MR_VIRT_ADDR", MR_VIRT_ADDR), nm("MR_ALLOCATED", MR_ALLOCATED),
		nm("MR_PROV_KEY", MR_PROV_KEY), nm("MR_MMU_NOTIFY", MR_MMU_NOTIFY),
		nm("MR_RMA_EVENT", MR_RMA_EVENT), nm("MR_ENDPOINT", MR_ENDPOINT),
		nm("MR_HMEM", MR_HMEM), nm("MR_COLLECTIVE", MR_COLLECTIVE),
		{s: "MR_UNSPEC", v: uint64(MR_UNSPEC), alias: true},
	}}

	cqFlagsNames = nameTable{what: "completion flag", flags: true, names: []fiName{
		nm("SEND", SEND), nm("RECV", RECV), nm("RMA", RMA), nm("ATOMIC", ATOMIC),
		nm("MSG", MSG), nm("TAGGED", TAGGED), nm("READ", READ), nm("WRITE", WRITE),
		nm("REMOTE_READ", REMOTE_READ), nm("REMOTE_WRITE", REMOTE_WRITE),
		nm("REMOTE_CQ_DATA", REMOTE_CQ_DATA), nm("MULTI_RECV", MULTI_RECV),
		nm("MORE", MORE), nm("CLAIM", CLAIM),
	}}

	epTypeNames = nameTable{what: "endpoint type", prefix: "EP_", names: enumNames(EP_UNSPEC,
		"EP_UNSPEC", "EP_MSG", "EP_DGRAM", "EP_RDM", "EP_SOCK_STREAM", "EP_SOCK_DGRAM")}

	protocolNames = nameTable{what: "protocol", prefix: "PROTO_", provSpecific: true, names: joinNames(
		enumNames(PROTO_UNSPEC, "PROTO_UNSPEC", "PROTO_RDMA_CM_IB_RC", "PROTO_IWARP",
			"PROTO_IB_UD", "PROTO_PSMX", "PROTO_UDP", "PROTO_SOCK_TCP"),
		aliasNames(enumNames(PROTO_MXM, "PROTO_MXM")),
		enumNames(PROTO_IWARP_RDM, "PROTO_IWARP_RDM", "PROTO_IB_RDM", "PROTO_GNI",
			"PROTO_RXM", "PROTO_RXD", "PROTO_MLX", "PROTO_NETWORKDIRECT",
			"PROTO_PSMX2", "PROTO_SHM"),
		aliasNames(enumNames(PROTO_MRAIL, "PROTO_MRAIL")),
		enumNames(PROTO_RSTREAM, "PROTO_RSTREAM", "PROTO_RDMA_CM_IB_XRC", "PROTO_EFA",
			"PROTO_PSMX3", "PROTO_RXM_TCP", "PROTO_OPX", "PROTO_CXI", "PROTO_XNET"))}

	addrFormatNames = nameTable{what: "address format", provSpecific: true, names: enumNames(FORMAT_UNSPEC,
		"FORMAT_UNSPEC", "SOCKADDR", "SOCKADDR_IN", "SOCKADDR_IN6", "SOCKADDR_IB",
		"ADDR_PSMX", "ADDR_GNI", "ADDR_BGQ", "ADDR_MLX", "ADDR_STR", "ADDR_PSMX2",
		"ADDR_IB_UD", "ADDR_EFA", "ADDR_PSMX3", "ADDR_OPX", "ADDR_CXI")}

	threadingNames = nameTable{what: "threading model", prefix: "THREAD_", names: enumNames(THREAD_UNSPEC,
		"THREAD_UNSPEC", "THREAD_SAFE", "THREAD_FID", "THREAD_DOMAIN",
		"THREAD_COMPLETION", "THREAD_ENDPOINT")}

	progressNames = nameTable{what: "progress model", prefix: "PROGRESS_", names: enumNames(PROGRESS_UNSPEC,
		"PROGRESS_UNSPEC", "PROGRESS_AUTO", "PROGRESS_MANUAL")}

	resourceMgmtNames = nameTable{what: "resource management", prefix: "RM_", names: enumNames(RM_UNSPEC,
		"RM_UNSPEC", "RM_DISABLED", "RM_ENABLED")}

	avTypeNames = nameTable{what: "AV type", prefix: "AV_", names: enumNames(AV_UNSPEC,
		"AV_UNSPEC", "AV_MAP", "AV_TABLE")}

	waitObjNames = nameTable{what: "wait object", prefix: "WAIT_", names: enumNames(WAIT_NONE,
		"WAIT_NONE", "WAIT_UNSPEC", "WAIT_SET", "WAIT_FD", "WAIT_MUTEX_COND",
		"WAIT_YIELD", "WAIT_POLLFD")}

	cqFormatNames = nameTable{what: "CQ format", prefix: "CQ_FORMAT_", names: enumNames(CQ_FORMAT_UNSPEC,
		"CQ_FORMAT_UNSPEC", "CQ_FORMAT_CONTEXT", "CQ_FORMAT_MSG", "CQ_FORMAT_DATA",
		"CQ_FORMAT_TAGGED")}

	cqWaitCondNames = nameTable{what: "CQ wait condition", prefix: "CQ_COND_", names: enumNames(CQ_COND_NONE,
		"CQ_COND_NONE", "CQ_COND_THRESHOLD")}

	eqEventNames = nameTable{what: "EQ event", names: enumNames(NOTIFY,
		"NOTIFY", "CONNREQ", "CONNECTED", "SHUTDOWN", "MR_COMPLETE", "AV_COMPLETE",
		"JOIN_COMPLETE")}

	cntrEventsNames = nameTable{what: "counter events", prefix: "CNTR_EVENTS_", names: enumNames(CNTR_EVENTS_COMP,
		"CNTR_EVENTS_COMP")}

	hmemIfaceNames = nameTable{what: "memory interface", prefix: "HMEM_", names: enumNames(HMEM_SYSTEM,
		"HMEM_SYSTEM", "HMEM_CUDA", "HMEM_ROCR", "HMEM_ZE", "HMEM_NEURON",
		"HMEM_SYNAPSEAI")}

	atomicTypeNames = nameTable{what: "atomic datatype", names: joinNames(
		enumNames(INT8, "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64",
			"UINT64", "FLOAT", "DOUBLE", "FLOAT_COMPLEX", "DOUBLE_COMPLEX",
			"LONG_DOUBLE", "LONG_DOUBLE_COMPLEX", "INT128", "UINT128"),
		aliasNames(enumNames(DATATYPE_LAST, "DATATYPE_LAST"), enumNames(VOID, "VOID")))}

	atomicOpNames = nameTable{what: "atomic operation", names: joinNames(
		enumNames(MIN, "MIN", "MAX", "SUM", "PROD", "LOR", "LAND", "BOR", "BAND",
			"LXOR", "BXOR", "ATOMIC_READ", "ATOMIC_WRITE", "CSWAP", "CSWAP_NE",
			"CSWAP_LE", "CSWAP_LT", "CSWAP_GE", "CSWAP_GT", "MSWAP"),
		aliasNames(enumNames(ATOMIC_OP_LAST, "ATOMIC_OP_LAST"), enumNames(NOOP, "NOOP")))}

	collectiveOpNames = nameTable{what: "collective operation", names: enumNames(BARRIER,
		"BARRIER", "BROADCAST", "ALLTOALL", "ALLREDUCE", "ALLGATHER",
		"REDUCE_SCATTER", "REDUCE", "SCATTER", "GATHER")}

	optLevelNames = nameTable{what: "option level", prefix: "OPT_", names: enumNames(OPT_ENDPOINT, "OPT_ENDPOINT")}

	optNames = nameTable{what: "endpoint option", prefix: "OPT_", names: enumNames(OPT_MIN_MULTI_RECV,
		"OPT_MIN_MULTI_RECV", "OPT_CM_DATA_SIZE", "OPT_BUFFERED_MIN",
		"OPT_BUFFERED_LIMIT", "OPT_SEND_BUF_SIZE", "OPT_RECV_BUF_SIZE",
		"OPT_TX_SIZE", "OPT_RX_SIZE", "OPT_FI_HMEM_P2P", "OPT_XPU_TRIGGER")}

	hmemP2PNames = nameTable{what: "HMEM P2P setting", prefix: "HMEM_P2P_", names: enumNames(HMEM_P2P_ENABLED,
		"HMEM_P2P_ENABLED", "HMEM_P2P_REQUIRED", "HMEM_P2P_PREFERRED",
		"HMEM_P2P_DISABLED")}

	tclassNames = nameTable{what: "traffic class", prefix: "TC_", names: joinNames(
		enumNames(TC_UNSPEC, "TC_UNSPEC"), enumNames(TC_DSCP, "TC_DSCP"),
		enumNames(TC_LABEL, "TC_LABEL", "TC_LOW_LATENCY", "TC_DEDICATED_ACCESS",
			"TC_BULK_DATA", "TC_SCAVENGER", "TC_NETWORK_CTRL"),
		enumNames(TC_BEST_EFFORT, "TC_BEST_EFFORT"))}

	errnoNames = nameTable{what: "error code", names: func() []fiName {
		ns := []fiName{{s: "EWOULDBLOCK", v: uint64(EWOULDBLOCK), alias: true}}
		for _, x := range errnos {
			ns = append(ns, fiName{s: x.name, v: uint64(x.e)})
		}
		return ns
	}()}
)
