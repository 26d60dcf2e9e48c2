package fi

// The constants below carry the values of libfabric 1.17's headers
// (rdma/fabric.h, fi_domain.h, fi_endpoint.h, fi_eq.h, fi_errno.h,
// fi_atomic.h); TestConstantsMatchHeaders checks every one against the C
// headers. Names drop the "FI_" prefix. libfabric shares one 64-bit flag
// space among capabilities, operation flags and call flags; a bit that is a
// capability is a Caps constant even where it is also an operation flag
// (fi.MSG, fi.RECV, fi.REMOTE_CQ_DATA...). Convert where an OpFlags is
// wanted:
//
//	op.Flags = fi.OpFlags(fi.REMOTE_CQ_DATA) | fi.COMPLETION
//	c.Flags = fi.OpFlags(fi.MSG | fi.RECV)

// More types with libfabric names, beside those of info.go.
type (
	CQFlags      uint64 // FI_TYPE_CQ_EVENT_FLAGS: fi_cq_*_entry.flags; the bits are Caps and OpFlags constants
	CntrEvents   uint32 // enum fi_cntr_events: fi_cntr_attr.events
	HMEMIface    uint32 // FI_TYPE_HMEM_IFACE: enum fi_hmem_iface, fi_mr_attr.iface
	AtomicType   uint32 // FI_TYPE_ATOMIC_TYPE: enum fi_datatype
	AtomicOp     uint32 // FI_TYPE_ATOMIC_OP: enum fi_op
	CollectiveOp uint32 // FI_TYPE_COLLECTIVE_OP: enum fi_collective_op
	OptLevel     uint32 // fi_setopt/fi_getopt level: OPT_ENDPOINT
	Opt          uint32 // fi_setopt/fi_getopt option name at level OPT_ENDPOINT: OPT_*
	HMEMP2P      uint32 // value of option OPT_FI_HMEM_P2P: HMEM_P2P_*
)

// Version of the libfabric API these values come from.
const (
	MAJOR_VERSION    uint32 = 1
	MINOR_VERSION    uint32 = 17
	REVISION_VERSION uint32 = 0
)

// Size limits of fabric.h.
const (
	PATH_MAX    int = 256
	NAME_MAX    int = 64
	VERSION_MAX int = 64
)

// PROV_SPECIFIC marks provider-specific values of enumerations, such as a
// provider's own Protocol or AddrFormat.
const PROV_SPECIFIC uint32 = 1 << 31

// Capabilities (fi_getinfo(3) "CAPABILITIES"). Several are also operation,
// completion or call flags with the same meaning.
const (
	MSG            Caps = 1 << 1  // send and receive messages
	RMA            Caps = 1 << 2  // RMA read and write
	TAGGED         Caps = 1 << 3  // tagged messages
	ATOMIC         Caps = 1 << 4  // atomic operations
	ATOMICS             = ATOMIC  // older spelling of ATOMIC
	MULTICAST      Caps = 1 << 5  // multicast data transfers
	COLLECTIVE     Caps = 1 << 6  // collective operations
	READ           Caps = 1 << 8  // initiate reads (RMA, atomics); MR access: local read
	WRITE          Caps = 1 << 9  // initiate writes; MR access: local write
	RECV           Caps = 1 << 10 // receive; bind and completion flag for the receive side
	SEND           Caps = 1 << 11 // send; bind and completion flag for the transmit side
	TRANSMIT            = SEND    // alias of SEND used by fi_ep_bind
	REMOTE_READ    Caps = 1 << 12 // be the target of reads; MR access
	REMOTE_WRITE   Caps = 1 << 13 // be the target of writes; MR access
	MULTI_RECV     Caps = 1 << 16 // one receive buffer holds many messages
	REMOTE_CQ_DATA Caps = 1 << 17 // remote CQ data; as an op flag: the send carries data
	TRIGGER        Caps = 1 << 20 // triggered operations
	FENCE          Caps = 1 << 21 // fenced operations
	AV_USER_ID     Caps = 1 << 41 // user-chosen fi_addr values in AVs (fi_tostr has no name for it)
	HMEM           Caps = 1 << 47 // heterogeneous (device) memory
	VARIABLE_MSG   Caps = 1 << 48 // messages of variable size, received as they arrive
	RMA_PMEM       Caps = 1 << 49 // RMA to persistent memory
	SOURCE_ERR     Caps = 1 << 50 // report the source address of failed receives
	LOCAL_COMM     Caps = 1 << 51 // talk to endpoints on the same node
	REMOTE_COMM    Caps = 1 << 52 // talk to endpoints on other nodes
	SHARED_AV      Caps = 1 << 53 // AVs shared between processes
	PROV_ATTR_ONLY Caps = 1 << 54 // fi_getinfo flag: return provider attributes only
	NUMERICHOST    Caps = 1 << 55 // fi_getinfo flag: node is a numeric address
	RMA_EVENT      Caps = 1 << 56 // RMA target events (counters, CQ entries)
	SOURCE         Caps = 1 << 57 // report source addresses; fi_getinfo flag: node/service are the source
	NAMED_RX_CTX   Caps = 1 << 58 // address a specific receive context
	DIRECTED_RECV  Caps = 1 << 59 // receives from a given source address only
)

// Operation flags: tx_attr.op_flags, rx_attr.op_flags, the flags of
// fi_*msg calls and fi_cq_*_entry, and the flags arguments of calls such as
// fi_ep_bind, fi_av_insert and fi_mr_reg. The operation-specific bits (58
// and 59 especially) mean different things to different calls.
const (
	MORE                 OpFlags = 1 << 18 // more operations follow soon
	PEEK                 OpFlags = 1 << 19 // look for a matching message without taking it
	PRIORITY             OpFlags = 1 << 22 // (reserved by libfabric)
	COMPLETION           OpFlags = 1 << 24 // write a completion entry
	EVENT                        = COMPLETION
	INJECT               OpFlags = 1 << 25 // buffer is reusable when the call returns
	INJECT_COMPLETE      OpFlags = 1 << 26 // complete once the buffer is reusable
	TRANSMIT_COMPLETE    OpFlags = 1 << 27 // complete once the transfer left for the peer
	DELIVERY_COMPLETE    OpFlags = 1 << 28 // complete once data reached the target
	AFFINITY             OpFlags = 1 << 29 // fi_cntr: wait-object affinity hint
	COMMIT_COMPLETE      OpFlags = 1 << 30 // complete once data is persistent (fi_tostr has no name for it)
	MATCH_COMPLETE       OpFlags = 1 << 31 // complete once the target matched the message
	PEER_TRANSFER        OpFlags = 1 << 36 // peer provider transfer
	PEER                 OpFlags = 1 << 43 // peer provider object
	XPU_TRIGGER          OpFlags = 1 << 44 // triggered by a device
	HMEM_HOST_ALLOC      OpFlags = 1 << 45 // fi_mr: host memory allocated by a device API
	HMEM_DEVICE_ONLY     OpFlags = 1 << 46 // fi_mr: memory only the device may touch
	DISCARD              OpFlags = 1 << 58 // drop a claimed or peeked message
	CLAIM                OpFlags = 1 << 59 // claim a peeked message
	SELECTIVE_COMPLETION OpFlags = 1 << 59 // fi_ep_bind: completions only for operations with COMPLETION
	REG_MR               OpFlags = 1 << 59 // fi_domain_bind
	SYMMETRIC            OpFlags = 1 << 59 // fi_av_insert*: all peers insert in the same order
	SYNC_ERR             OpFlags = 1 << 58 // fi_av_insert: report errors per entry, synchronously
	UNIVERSE             OpFlags = 1 << 57 // fi_av_set: every address of the AV
	COMPARE_ATOMIC       OpFlags = 1 << 59 // fi_query_atomic: a compare atomic
	FETCH_ATOMIC         OpFlags = 1 << 58 // fi_query_atomic: a fetch atomic
	BARRIER_SET          OpFlags = 1 << 40 // fi_av_set flags: collectives the set supports
	BROADCAST_SET        OpFlags = 1 << 41
	ALLTOALL_SET         OpFlags = 1 << 42
	ALLREDUCE_SET        OpFlags = 1 << 43
	ALLGATHER_SET        OpFlags = 1 << 44
	REDUCE_SCATTER_SET   OpFlags = 1 << 45
	REDUCE_SET           OpFlags = 1 << 46
	SCATTER_SET          OpFlags = 1 << 47
	GATHER_SET           OpFlags = 1 << 48
)

// Mode bits: what a provider asks of the application (fi_getinfo(3) "MODE").
const (
	CONTEXT           Mode = 1 << 59 // op contexts point to a struct fi_context
	MSG_PREFIX        Mode = 1 << 58 // buffers start with msg_prefix_size bytes of provider space
	ASYNC_IOV         Mode = 1 << 57 // iovec arrays must stay valid until completion
	RX_CQ_DATA        Mode = 1 << 56 // remote CQ data consumes a receive buffer
	LOCAL_MR          Mode = 1 << 55 // local buffers must be registered (old form of MR_LOCAL)
	NOTIFY_FLAGS_ONLY Mode = 1 << 54 // counters and CQs only report flags
	RESTRICTED_COMP   Mode = 1 << 53 // CQs and counters serve only endpoints
	CONTEXT2          Mode = 1 << 52 // op contexts point to a struct fi_context2
	BUFFERED_RECV     Mode = 1 << 51 // provider buffers unexpected messages (peer API)
)

// Message ordering (fi_endpoint(3) "Ordering"): msg_order bits. "R", "W"
// and "S" are reads, writes and sends; RAW is read after write.
const (
	ORDER_RAR        MsgOrder = 1 << 0
	ORDER_RAW        MsgOrder = 1 << 1
	ORDER_RAS        MsgOrder = 1 << 2
	ORDER_WAR        MsgOrder = 1 << 3
	ORDER_WAW        MsgOrder = 1 << 4
	ORDER_WAS        MsgOrder = 1 << 5
	ORDER_SAR        MsgOrder = 1 << 6
	ORDER_SAW        MsgOrder = 1 << 7
	ORDER_SAS        MsgOrder = 1 << 8
	ORDER_RMA_RAR    MsgOrder = 1 << 32
	ORDER_RMA_RAW    MsgOrder = 1 << 33
	ORDER_RMA_WAR    MsgOrder = 1 << 34
	ORDER_RMA_WAW    MsgOrder = 1 << 35
	ORDER_ATOMIC_RAR MsgOrder = 1 << 36
	ORDER_ATOMIC_RAW MsgOrder = 1 << 37
	ORDER_ATOMIC_WAR MsgOrder = 1 << 38
	ORDER_ATOMIC_WAW MsgOrder = 1 << 39
)

// Completion ordering: comp_order. ORDER_NONE is also the empty msg_order.
const (
	ORDER_NONE   CompOrder = 0
	ORDER_STRICT CompOrder = 0x1ff   // completions in the order operations were posted
	ORDER_DATA   CompOrder = 1 << 16 // data is placed in order
)

// Memory registration modes: domain_attr.mr_mode (fi_mr(3)).
const (
	MR_UNSPEC     MRMode = 0
	MR_BASIC      MRMode = 1 // old mode: VIRT_ADDR|ALLOCATED|PROV_KEY
	MR_SCALABLE   MRMode = 2 // old mode: offsets and user keys
	MR_LOCAL      MRMode = 1 << 2
	MR_RAW        MRMode = 1 << 3
	MR_VIRT_ADDR  MRMode = 1 << 4
	MR_ALLOCATED  MRMode = 1 << 5
	MR_PROV_KEY   MRMode = 1 << 6
	MR_MMU_NOTIFY MRMode = 1 << 7
	MR_RMA_EVENT  MRMode = 1 << 8
	MR_ENDPOINT   MRMode = 1 << 9
	MR_HMEM       MRMode = 1 << 10
	MR_COLLECTIVE MRMode = 1 << 11
)

// Endpoint types: ep_attr.type.
const (
	EP_UNSPEC EPType = iota
	EP_MSG
	EP_DGRAM
	EP_RDM
	EP_SOCK_STREAM
	EP_SOCK_DGRAM
)

// Endpoint protocols: ep_attr.protocol.
const (
	PROTO_UNSPEC Protocol = iota
	PROTO_RDMA_CM_IB_RC
	PROTO_IWARP
	PROTO_IB_UD
	PROTO_PSMX
	PROTO_UDP
	PROTO_SOCK_TCP
	PROTO_MXM // deprecated; fi_tostr prints it as "Unknown"
	PROTO_IWARP_RDM
	PROTO_IB_RDM
	PROTO_GNI
	PROTO_RXM
	PROTO_RXD
	PROTO_MLX
	PROTO_NETWORKDIRECT
	PROTO_PSMX2
	PROTO_SHM
	PROTO_MRAIL // fi_tostr prints it as "Unknown"
	PROTO_RSTREAM
	PROTO_RDMA_CM_IB_XRC
	PROTO_EFA
	PROTO_PSMX3
	PROTO_RXM_TCP
	PROTO_OPX
	PROTO_CXI
	PROTO_XNET
)

// Address formats: fi_info.addr_format, fi_av_attr.
const (
	FORMAT_UNSPEC AddrFormat = iota
	SOCKADDR                 // struct sockaddr, either family
	SOCKADDR_IN              // struct sockaddr_in
	SOCKADDR_IN6             // struct sockaddr_in6
	SOCKADDR_IB
	ADDR_PSMX
	ADDR_GNI
	ADDR_BGQ
	ADDR_MLX
	ADDR_STR // a string such as "fi_sockaddr_in://127.0.0.1:7000"
	ADDR_PSMX2
	ADDR_IB_UD
	ADDR_EFA
	ADDR_PSMX3
	ADDR_OPX
	ADDR_CXI
)

// Special fi_addr_t and key values.
const (
	ADDR_UNSPEC    uint64 = 1<<64 - 1 // no address: receive from anyone
	ADDR_NOTAVAIL  uint64 = 1<<64 - 1 // the source address is not known
	KEY_NOTAVAIL   uint64 = 1<<64 - 1 // no MR key
	SHARED_CONTEXT uint64 = 1<<64 - 1 // ep_attr.tx_ctx_cnt/rx_ctx_cnt: use a shared context (SIZE_MAX)
)

// AV types: domain_attr.av_type, fi_av_attr.type.
const (
	AV_UNSPEC AVType = iota
	AV_MAP
	AV_TABLE
)

// Progress models: domain_attr.control_progress and data_progress.
const (
	PROGRESS_UNSPEC Progress = iota
	PROGRESS_AUTO
	PROGRESS_MANUAL
)

// Threading models: domain_attr.threading.
const (
	THREAD_UNSPEC Threading = iota
	THREAD_SAFE
	THREAD_FID
	THREAD_DOMAIN
	THREAD_COMPLETION
	THREAD_ENDPOINT
)

// Resource management: domain_attr.resource_mgmt.
const (
	RM_UNSPEC ResourceMgmt = iota
	RM_DISABLED
	RM_ENABLED
)

// Traffic classes: tx_attr.tclass, domain_attr.tclass. A DSCP value is
// TC_DSCP|dscp (see MakeDSCP).
const (
	TC_UNSPEC           TClass = 0
	TC_DSCP             TClass = 0x100
	TC_LABEL            TClass = 0x200
	TC_BEST_EFFORT             = TC_LABEL
	TC_LOW_LATENCY      TClass = 0x201
	TC_DEDICATED_ACCESS TClass = 0x202
	TC_BULK_DATA        TClass = 0x203
	TC_SCAVENGER        TClass = 0x204
	TC_NETWORK_CTRL     TClass = 0x205
)

// Wait objects: fi_eq_attr, fi_cq_attr, fi_cntr_attr .wait_obj.
const (
	WAIT_NONE WaitObj = iota
	WAIT_UNSPEC
	WAIT_SET
	WAIT_FD
	WAIT_MUTEX_COND
	WAIT_YIELD
	WAIT_POLLFD
)

// EQ events (fi_eq(3)).
const (
	NOTIFY EQEvent = iota
	CONNREQ
	CONNECTED
	SHUTDOWN
	MR_COMPLETE
	AV_COMPLETE
	JOIN_COMPLETE
)

// CQ entry formats: fi_cq_attr.format.
const (
	CQ_FORMAT_UNSPEC CQFormat = iota
	CQ_FORMAT_CONTEXT
	CQ_FORMAT_MSG
	CQ_FORMAT_DATA
	CQ_FORMAT_TAGGED
)

// CQ wait conditions: fi_cq_attr.wait_cond.
const (
	CQ_COND_NONE      CQWaitCond = iota
	CQ_COND_THRESHOLD            // fi_cq_sread's cond points to a size_t threshold
)

// Counter events: fi_cntr_attr.events.
const CNTR_EVENTS_COMP CntrEvents = 0

// Memory interfaces: fi_mr_attr.iface.
const (
	HMEM_SYSTEM HMEMIface = iota
	HMEM_CUDA
	HMEM_ROCR
	HMEM_ZE
	HMEM_NEURON
	HMEM_SYNAPSEAI
)

// Endpoint options (fi_endpoint(3) fi_setopt).
const OPT_ENDPOINT OptLevel = 0

// Option names at level OPT_ENDPOINT.
const (
	OPT_MIN_MULTI_RECV Opt = iota // size_t
	OPT_CM_DATA_SIZE              // size_t
	OPT_BUFFERED_MIN              // size_t
	OPT_BUFFERED_LIMIT            // size_t
	OPT_SEND_BUF_SIZE             // size_t
	OPT_RECV_BUF_SIZE             // size_t
	OPT_TX_SIZE                   // size_t
	OPT_RX_SIZE                   // size_t
	OPT_FI_HMEM_P2P               // int: one of HMEM_P2P_*
	OPT_XPU_TRIGGER               // struct fi_trigger_xpu
)

// Values of option OPT_FI_HMEM_P2P.
const (
	HMEM_P2P_ENABLED HMEMP2P = iota
	HMEM_P2P_REQUIRED
	HMEM_P2P_PREFERRED
	HMEM_P2P_DISABLED
)

// COLLECTIVE_OFFSET is the first value of collective-only datatypes and ops.
const COLLECTIVE_OFFSET uint32 = 256

// Atomic datatypes (fi_atomic(3), fi_query_atomic in fi_domain(3)).
const (
	INT8 AtomicType = iota
	UINT8
	INT16
	UINT16
	INT32
	UINT32
	INT64
	UINT64
	FLOAT
	DOUBLE
	FLOAT_COMPLEX
	DOUBLE_COMPLEX
	LONG_DOUBLE
	LONG_DOUBLE_COMPLEX
	DATATYPE_LAST // end of the original list; equals INT128
)

// Later atomic datatypes.
const (
	INT128  AtomicType = DATATYPE_LAST
	UINT128 AtomicType = DATATYPE_LAST + 1
	VOID    AtomicType = 256 // collectives without data
)

// Atomic operations.
const (
	MIN AtomicOp = iota
	MAX
	SUM
	PROD
	LOR
	LAND
	BOR
	BAND
	LXOR
	BXOR
	ATOMIC_READ
	ATOMIC_WRITE
	CSWAP
	CSWAP_NE
	CSWAP_LE
	CSWAP_LT
	CSWAP_GE
	CSWAP_GT
	MSWAP
	ATOMIC_OP_LAST // end of the point-to-point operations
)

// NOOP is the collective operation without data.
const NOOP AtomicOp = 256

// Collective operations (fi_query_collective in fi_domain(3)).
const (
	BARRIER CollectiveOp = iota
	BROADCAST
	ALLTOALL
	ALLREDUCE
	ALLGATHER
	REDUCE_SCATTER
	REDUCE
	SCATTER
	GATHER
)

// IPDSCP is the DSCP an IP packet of traffic class t carries: a DSCP
// class's own value, and for the FI_TC_* labels the code points RFC 4594
// recommends for such traffic (best effort CS0, low latency EF, dedicated
// access AF41, bulk data AF11, scavenger CS1, network control CS6); false
// for FI_TC_UNSPEC and values that are neither, which leave the packets
// as the system sends them.
func (t TClass) IPDSCP() (uint8, bool) {
	if d, ok := t.DSCP(); ok {
		return d & 0x3f, true
	}
	switch t {
	case TC_BEST_EFFORT:
		return 0, true
	case TC_LOW_LATENCY:
		return 46, true
	case TC_DEDICATED_ACCESS:
		return 34, true
	case TC_BULK_DATA:
		return 10, true
	case TC_SCAVENGER:
		return 8, true
	case TC_NETWORK_CTRL:
		return 48, true
	}
	return 0, false
}

// MakeDSCP is fi_tc_dscp_set: the traffic class for a DSCP value.
func MakeDSCP(dscp uint8) TClass { return TClass(dscp) | TC_DSCP }

// DSCP is fi_tc_dscp_get: the DSCP value of t, and whether t is one.
func (t TClass) DSCP() (uint8, bool) {
	if t&TC_DSCP == 0 {
		return 0, false
	}
	return uint8(t), true
}
