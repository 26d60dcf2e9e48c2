// Package ibv is fabricfs's software RDMA device: the objects and semantics
// of libibverbs (device, protection domain, memory region, completion
// queue, queue pair, shared receive queue, address handle) implemented in
// Go over real RoCEv2 packets (package roce) in UDP datagrams. It is what
// the verbs provider (package verbs) drives, in place of a NIC.
//
// Names, numeric values and semantics are libibverbs' (infiniband/verbs.h):
// WCStatus 5 is IBV_WC_WR_FLUSH_ERR here as there. Where the Go API differs
// from the C one (a CQ notifies through a callback instead of a completion
// channel; an address handle names a UDP address instead of a GID and a
// port), the comment says so. Errors wrap the errno libibverbs returns
// (errors.Is(err, syscall.EINVAL)).
//
// docs/ibv.md describes the device: its objects and their limits, the QP
// state machine, the RC reliability machinery (go-back-N, NAKs, RNR, the
// timeout and a tail-loss probe), UD and the GRH area, fault injection,
// what is not implemented, and the tests.
//
// # Concurrency
//
// Every method is safe for concurrent use. PostSend transmits on the
// caller's goroutine; each device has one receive goroutine that runs the
// responder and completer of the QP a packet is for, and each RC QP a
// timer. Locks are per QP. Steady-state traffic allocates nothing.
package ibv

import (
	"net/netip"
	"strconv"
)

// DeviceConfig says where a device sends and receives.
type DeviceConfig struct {
	// Addr is the IP address the device's UDP socket binds; its GID is the
	// address as IPv6 (IPv4-mapped for IPv4), as RoCEv2 GIDs are.
	Addr netip.Addr
	// Port is the UDP port the device receives on; 0 means roce.Port
	// (4791). Several devices may share an address on different ports.
	Port int
	// Name is the device's name (ibv_get_device_name); "" picks
	// "rxe_<address>" style names, see OpenDevice.
	Name string
	// Fault, if not nil, makes the device's transmit path drop, duplicate,
	// reorder and corrupt datagrams, for tests.
	Fault *Fault
	// RemoteAccessError, if not nil, is called with the peer's address
	// and the QP's number each time a responder NAKs a request with a
	// remote access error (a key that names no region of the QP's PD, a
	// range outside the region, an access the region does not allow),
	// after which the responder's QP is in error. It is called with the
	// QP's lock held: it must not call the device.
	RemoteAccessError func(peer netip.Addr, qpn uint32)
}

// Fault is a fault-injection plan for a device's transmit path. Each
// probability is in [0, 1] and applies to every datagram independently.
type Fault struct {
	Drop, Duplicate, Reorder, Corrupt float64
	Seed                              int64 // the random source's seed
}

// DeviceAttr is the part of ibv_device_attr and ibv_port_attr a provider
// reports.
type DeviceAttr struct {
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int // max_qp_rd_atom: outstanding RDMA reads and atomics as responder
	MaxQPInitRdAtom int // max_qp_init_rd_atom: as requester
	MaxSRQ          int
	MaxSRQWR        int
	MaxInlineData   int
	ActiveMTU       MTU
	AtomicCap       int // IBV_ATOMIC_HCA (1): atomics are atomic among this device's QPs
}

// Stats are a device's reliability counters.
type Stats struct {
	TxPackets, RxPackets uint64
	Retransmits          uint64 // packets sent again by go-back-N or a timeout
	Timeouts             uint64 // retransmit timer expirations
	Probes               uint64 // tail-loss probes: resends after a few round trips without progress
	NAKsSent, NAKsRcvd   uint64 // PSN sequence error NAKs
	RNRSent, RNRRcvd     uint64 // RNR NAKs
	Duplicates           uint64 // duplicate requests a responder saw
	BadICRC              uint64 // datagrams dropped for their ICRC
	Dropped              uint64 // other malformed or unroutable datagrams dropped

	// What DeviceConfig.Fault did to the datagrams the device sent.
	FaultDropped, FaultDuplicated, FaultReordered, FaultCorrupted uint64
}

// Access is enum ibv_access_flags.
type Access uint32

const (
	AccessLocalWrite   Access = 1 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 2 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 4 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 8 // IBV_ACCESS_REMOTE_ATOMIC
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	Imm       uint32 // host order here (the C struct has it in network order)
	Flags     WCFlags
	QPNum     uint32         // the local QP
	SrcQP     uint32         // UD: the sender's QPN
	Src       netip.AddrPort // UD: the sender's device address (what the GRH names)
}

// WCStatus is enum ibv_wc_status.
type WCStatus uint32

const (
	WCSuccess          WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr        WCStatus = 1  // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr       WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr      WCStatus = 3  // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr       WCStatus = 4  // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr       WCStatus = 5  // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr        WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr       WCStatus = 7  // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr     WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr     WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr     WCStatus = 10 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr         WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr      WCStatus = 12 // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr   WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr    WCStatus = 14 // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRdReqErr   WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr      WCStatus = 16 // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr       WCStatus = 17 // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr   WCStatus = 18 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr         WCStatus = 19 // IBV_WC_FATAL_ERR
	WCRespTimeoutErr   WCStatus = 20 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr       WCStatus = 21 // IBV_WC_GENERAL_ERR
	WCTMErr            WCStatus = 22 // IBV_WC_TM_ERR
	WCTMRndvIncomplete WCStatus = 23 // IBV_WC_TM_RNDV_INCOMPLETE
)

var wcStatusNames = [...]string{
	WCSuccess:          "IBV_WC_SUCCESS",
	WCLocLenErr:        "IBV_WC_LOC_LEN_ERR",
	WCLocQPOpErr:       "IBV_WC_LOC_QP_OP_ERR",
	WCLocEECOpErr:      "IBV_WC_LOC_EEC_OP_ERR",
	WCLocProtErr:       "IBV_WC_LOC_PROT_ERR",
	WCWRFlushErr:       "IBV_WC_WR_FLUSH_ERR",
	WCMWBindErr:        "IBV_WC_MW_BIND_ERR",
	WCBadRespErr:       "IBV_WC_BAD_RESP_ERR",
	WCLocAccessErr:     "IBV_WC_LOC_ACCESS_ERR",
	WCRemInvReqErr:     "IBV_WC_REM_INV_REQ_ERR",
	WCRemAccessErr:     "IBV_WC_REM_ACCESS_ERR",
	WCRemOpErr:         "IBV_WC_REM_OP_ERR",
	WCRetryExcErr:      "IBV_WC_RETRY_EXC_ERR",
	WCRNRRetryExcErr:   "IBV_WC_RNR_RETRY_EXC_ERR",
	WCLocRDDViolErr:    "IBV_WC_LOC_RDD_VIOL_ERR",
	WCRemInvRdReqErr:   "IBV_WC_REM_INV_RD_REQ_ERR",
	WCRemAbortErr:      "IBV_WC_REM_ABORT_ERR",
	WCInvEECNErr:       "IBV_WC_INV_EECN_ERR",
	WCInvEECStateErr:   "IBV_WC_INV_EEC_STATE_ERR",
	WCFatalErr:         "IBV_WC_FATAL_ERR",
	WCRespTimeoutErr:   "IBV_WC_RESP_TIMEOUT_ERR",
	WCGeneralErr:       "IBV_WC_GENERAL_ERR",
	WCTMErr:            "IBV_WC_TM_ERR",
	WCTMRndvIncomplete: "IBV_WC_TM_RNDV_INCOMPLETE",
}

// String is the status's name in verbs.h ("IBV_WC_REM_ACCESS_ERR"), or
// its number for a status verbs.h does not have.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "ibv_wc_status " + strconv.FormatUint(uint64(s), 10)
}

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode uint32

const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

// WCFlags is enum ibv_wc_flags.
type WCFlags uint32

const (
	WCGRH     WCFlags = 1 // IBV_WC_GRH: a UD receive buffer starts with the 40-byte GRH area
	WCWithImm WCFlags = 2 // IBV_WC_WITH_IMM
)

// MTU is enum ibv_mtu.
type MTU uint8

const (
	MTU256  MTU = 1 // IBV_MTU_256
	MTU512  MTU = 2 // IBV_MTU_512
	MTU1024 MTU = 3 // IBV_MTU_1024
	MTU2048 MTU = 4 // IBV_MTU_2048
	MTU4096 MTU = 5 // IBV_MTU_4096
)

// Bytes is the MTU in bytes, 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// QPType is enum ibv_qp_type (and ib_qp_type for GSI).
type QPType uint8

const (
	QPTGSI QPType = 1 // IB_QPT_GSI: QP1, one per device, UD with Q_Key 0x80010000; for connection managers
	QPTRC  QPType = 2 // IBV_QPT_RC
	QPTUD  QPType = 4 // IBV_QPT_UD
)

// QPState is enum ibv_qp_state.
type QPState uint8

const (
	QPSReset QPState = 0 // IBV_QPS_RESET
	QPSInit  QPState = 1 // IBV_QPS_INIT
	QPSRTR   QPState = 2 // IBV_QPS_RTR
	QPSRTS   QPState = 3 // IBV_QPS_RTS
	QPSSQD   QPState = 4 // IBV_QPS_SQD
	QPSSQE   QPState = 5 // IBV_QPS_SQE
	QPSErr   QPState = 6 // IBV_QPS_ERR
)

// QPCap is struct ibv_qp_cap.
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QPInitAttr is struct ibv_qp_init_attr.
type QPInitAttr struct {
	Type           QPType
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ // receives come from the SRQ; MaxRecvWR is ignored
	Cap            QPCap
	SigAll         bool // every send work request completes, IBV_SEND_SIGNALED or not
	// Executed, if not nil, is called for each request of the peer that
	// an RC responder executed on the QP's memory and that makes no
	// completion there: an RDMA write without immediate (at its last
	// packet), an RDMA read, or an atomic, with the remote access it took
	// (AccessRemoteWrite, AccessRemoteRead, AccessRemoteAtomic), its
	// length in bytes (8 for an atomic) and the rkey it named. Once per
	// request, in order, never for a duplicate; after the QP's lock is
	// released, on the device's receive goroutine. An extension of
	// ibverbs, which has no such event.
	Executed func(access Access, n, rkey uint32)
	// TraceUID and TracePath name whom the QP's lines in the trace log
	// (package core/trace: packets, retransmits) are about: the owner of
	// the endpoint and its path in the tree. An extension of ibverbs.
	TraceUID  uint32
	TracePath string
	// AuthKey is the authorization key of the endpoint the QP serves
	// (fi_endpoint(3) auth_key; "": none): peers reach regions with a
	// key only through a QP with the same (RegMRAuth). An extension of
	// ibverbs.
	AuthKey string
}

// AHAttr names a destination: the Go equivalent of ibv_ah_attr with a
// GRH, where the GID is Dest's address and Dest's port the peer device's
// UDP port.
type AHAttr struct {
	Dest netip.AddrPort
	// TrafficClass is the GRH's traffic_class (ibv_global_route). RoCEv2
	// carries it in the IP header in place of the GRH: it is the byte of
	// DSCP and ECN (IPv4 type of service, IPv6 traffic class) of every
	// packet sent with the address, ACKs and read responses of an RC QP
	// included. 0 sends with the device socket's own (the system's).
	TrafficClass uint8
}

// QPAttr is struct ibv_qp_attr, the fields fabricfs's device implements.
type QPAttr struct {
	State           QPState
	PKeyIndex       uint16
	PortNum         uint8 // 1
	QKey            uint32
	AccessFlags     Access // remote access the QP allows (with the MR's)
	PathMTU         MTU
	DestQPNum       uint32
	RQPSN           uint32
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	AH              AHAttr // ah_attr: the RC peer
	SQPSN           uint32
	Timeout         uint8 // local ACK timeout: 4.096 us * 2^Timeout, 0 = infinite
	RetryCnt        uint8 // 0..7
	RNRRetry        uint8 // 0..7, 7 = infinite
	MaxRdAtomic     uint8
}

// QPAttrMask is enum ibv_qp_attr_mask.
type QPAttrMask uint32

const (
	QPState_          QPAttrMask = 1 << 0  // IBV_QP_STATE
	QPAccessFlags     QPAttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	QPPKeyIndex       QPAttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	QPPort            QPAttrMask = 1 << 5  // IBV_QP_PORT
	QPQKey            QPAttrMask = 1 << 6  // IBV_QP_QKEY
	QPAV              QPAttrMask = 1 << 7  // IBV_QP_AV
	QPPathMTU         QPAttrMask = 1 << 8  // IBV_QP_PATH_MTU
	QPTimeout         QPAttrMask = 1 << 9  // IBV_QP_TIMEOUT
	QPRetryCnt        QPAttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	QPRNRRetry        QPAttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	QPRQPSN           QPAttrMask = 1 << 12 // IBV_QP_RQ_PSN
	QPMaxQPRdAtomic   QPAttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	QPMinRNRTimer     QPAttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	QPSQPSN           QPAttrMask = 1 << 16 // IBV_QP_SQ_PSN
	QPMaxDestRdAtomic QPAttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	QPDestQPN         QPAttrMask = 1 << 20 // IBV_QP_DEST_QPN
)

// SGE is struct ibv_sge.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is enum ibv_wr_opcode.
type WROpcode uint32

const (
	WRRDMAWrite         WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm       WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead          WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
)

// SendFlags is enum ibv_send_flags.
type SendFlags uint32

const (
	SendFence     SendFlags = 1 // IBV_SEND_FENCE
	SendSignaled  SendFlags = 2 // IBV_SEND_SIGNALED
	SendSolicited SendFlags = 4 // IBV_SEND_SOLICITED
	SendInline    SendFlags = 8 // IBV_SEND_INLINE
)

// SendWR is struct ibv_send_wr, one work request (no next pointer: post
// one at a time).
type SendWR struct {
	WRID       uint64
	SGList     []SGE
	Opcode     WROpcode
	Flags      SendFlags
	Imm        uint32 // host order
	RemoteAddr uint64 // RDMA and atomic
	RKey       uint32
	CompareAdd uint64 // atomic: the compare value (CMP_AND_SWP) or the addend
	Swap       uint64
	AH         *AH    // UD
	RemoteQPN  uint32 // UD
	RemoteQKey uint32 // UD
}

// RecvWR is struct ibv_recv_wr.
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}
