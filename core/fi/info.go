package fi

import "net/netip"

// Flag-set and enumeration types. Each carries libfabric's numeric values and
// prints the way libfabric's fi_tostr prints the matching FI_TYPE_*.
type (
	Caps         uint64 // FI_TYPE_CAPS: fi_info.caps, tx_attr.caps, rx_attr.caps, domain_attr.caps
	Mode         uint64 // FI_TYPE_MODE
	OpFlags      uint64 // FI_TYPE_OP_FLAGS: tx_attr.op_flags, rx_attr.op_flags, per-operation flags
	MsgOrder     uint64 // FI_TYPE_MSG_ORDER
	CompOrder    uint64 // FI_TYPE_CAPS for comp_order (FI_ORDER_NONE, FI_ORDER_STRICT, FI_ORDER_DATA)
	MRMode       uint32 // FI_TYPE_MR_MODE: domain_attr.mr_mode bits
	EPType       uint32 // FI_TYPE_EP_TYPE: enum fi_ep_type
	Protocol     uint32 // FI_TYPE_PROTOCOL: FI_PROTO_*
	AddrFormat   uint32 // FI_TYPE_ADDR_FORMAT: FI_FORMAT_UNSPEC, FI_SOCKADDR_IN...
	Threading    uint32 // FI_TYPE_THREADING: enum fi_threading
	Progress     uint32 // FI_TYPE_PROGRESS: enum fi_progress
	ResourceMgmt uint32 // FI_TYPE_RESOURCE_MGMT: enum fi_resource_mgmt
	AVType       uint32 // FI_TYPE_AV_TYPE: enum fi_av_type
	WaitObj      uint32 // enum fi_wait_obj
	CQFormat     uint32 // FI_TYPE_CQ_FORMAT: enum fi_cq_format
	CQWaitCond   uint32 // enum fi_cq_wait_cond
	EQEvent      uint32 // FI_TYPE_EQ_EVENT: FI_NOTIFY, FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN...
	Version      uint32 // FI_VERSION(major, minor) = major<<16 | minor; prints "1.17"
	TClass       uint32 // FI_TCLASS_*; prints as hex "0x0"
)

// Addr is an endpoint address. The socket formats (SOCKADDR_IN, SOCKADDR_IN6)
// are what the tcp and verbs providers use; both print in libfabric's
// FI_ADDR_STR form, e.g. fi_sockaddr_in://127.0.0.1:7000. Str holds an
// FI_ADDR_STR address that names no IP address ("fi_shm://10530", another
// provider's), as ParseInfo reads it from an fi_info block; such an
// address is never an endpoint's.
type Addr struct {
	Format AddrFormat
	IP     netip.AddrPort
	Str    string
}

// Info is struct fi_info: one way of using one provider's domain, with every
// attribute the fi_getinfo(3) man page lists. Pointers are nil where libfabric
// leaves them NULL (in hints: "no requirement").
type Info struct {
	Caps       Caps
	Mode       Mode
	AddrFormat AddrFormat
	SrcAddr    *Addr
	DestAddr   *Addr
	Handle     uint64 // fid of a passive endpoint or connection request; printed as (nil) when 0
	TxAttr     *TxAttr
	RxAttr     *RxAttr
	EPAttr     *EPAttr
	DomainAttr *DomainAttr
	FabricAttr *FabricAttr
	// AutoProgress is not part of struct fi_info: an entry whose
	// domain_attr.data_progress says FI_PROGRESS_MANUAL, as libfabric's
	// provider of the same name says it, serves a hint asking
	// FI_PROGRESS_AUTO too (answering FI_PROGRESS_AUTO), since the daemon
	// progresses its operations. fi_info text does not show it.
	AutoProgress bool
}

// Named reports whether the entry's endpoints are named rather than
// addressed by IP, as the shm provider's (fi_shm://NAME, Addr.IsName):
// FI_ADDR_STR without an IP source address.
func (in *Info) Named() bool {
	return in.AddrFormat == ADDR_STR && (in.SrcAddr == nil || !in.SrcAddr.IP.Addr().IsValid())
}

// TxAttr is struct fi_tx_attr.
type TxAttr struct {
	Caps        Caps
	Mode        Mode
	OpFlags     OpFlags
	MsgOrder    MsgOrder
	CompOrder   CompOrder
	InjectSize  uint64
	Size        uint64
	IovLimit    uint64
	RMAIovLimit uint64
	TClass      TClass
}

// RxAttr is struct fi_rx_attr.
type RxAttr struct {
	Caps              Caps
	Mode              Mode
	OpFlags           OpFlags
	MsgOrder          MsgOrder
	CompOrder         CompOrder
	TotalBufferedRecv uint64
	Size              uint64
	IovLimit          uint64
}

// EPAttr is struct fi_ep_attr.
type EPAttr struct {
	Type            EPType
	Protocol        Protocol
	ProtocolVersion uint32
	MaxMsgSize      uint64
	MsgPrefixSize   uint64
	MaxOrderRAWSize uint64
	MaxOrderWARSize uint64
	MaxOrderWAWSize uint64
	MemTagFormat    uint64
	TxCtxCnt        uint64
	RxCtxCnt        uint64
	AuthKeySize     uint64
	AuthKey         []byte
}

// DomainAttr is struct fi_domain_attr (fi_domain(3)).
type DomainAttr struct {
	Domain          uint64 // fid of an opened domain; printed as 0x0 when 0
	Name            string
	Threading       Threading
	ControlProgress Progress
	DataProgress    Progress
	ResourceMgmt    ResourceMgmt
	AVType          AVType
	MRMode          MRMode
	MRKeySize       uint64
	CQDataSize      uint64
	CQCnt           uint64
	EPCnt           uint64
	TxCtxCnt        uint64
	RxCtxCnt        uint64
	MaxEPTxCtx      uint64
	MaxEPRxCtx      uint64
	MaxEPStxCtx     uint64
	MaxEPSrxCtx     uint64
	CntrCnt         uint64
	MRIovLimit      uint64
	Caps            Caps
	Mode            Mode
	AuthKey         []byte
	AuthKeySize     uint64
	MaxErrData      uint64
	MRCnt           uint64
	TClass          TClass
}

// FabricAttr is struct fi_fabric_attr.
type FabricAttr struct {
	Fabric      uint64 // fid of an opened fabric; 0 in getinfo output
	Name        string
	ProvName    string
	ProvVersion Version
	APIVersion  Version
}

// MakeVersion is FI_VERSION(major, minor).
func MakeVersion(major, minor uint32) Version { return Version(major<<16 | minor) }

// APIVersion is FI_VERSION(MAJOR_VERSION, MINOR_VERSION): the libfabric API
// version fabricfs implements, the newest GetInfo answers and the one the
// providers' entries carry as api_version.
const APIVersion = Version(MAJOR_VERSION<<16 | MINOR_VERSION)

// Major is FI_MAJOR(v).
func (v Version) Major() uint32 { return uint32(v) >> 16 }

// Minor is FI_MINOR(v).
func (v Version) Minor() uint32 { return uint32(v) & 0xffff }
