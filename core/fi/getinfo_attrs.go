package fi

// Matching an entry's attributes against the hints: memory registration
// modes, addresses, domain, endpoint, transmit and receive attributes.

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
)

// mrNeed returns the mr_mode bits an entry requires of an application that
// uses the capabilities caps (modifiers explicit). The provider's bits are
// in API 1.5 form; FI_MR_BASIC and FI_MR_SCALABLE in an entry say which
// legacy modes it can also serve and are not requirements. Bits that concern
// no memory the application will register are cleared: FI_MR_HMEM without
// FI_HMEM, FI_MR_COLLECTIVE without FI_COLLECTIVE, the bits about remote
// access when no peer may access the endpoint's memory, and everything when
// nothing needs registering at all.
func mrNeed(prov MRMode, caps Caps) MRMode {
	need := prov &^ (MR_BASIC | MR_SCALABLE)
	if caps&HMEM == 0 {
		need &^= MR_HMEM
	}
	if caps&COLLECTIVE == 0 {
		need &^= MR_COLLECTIVE
	}
	if !rmaTarget(caps) {
		need &^= mrRMATarget
		if need&(MR_LOCAL|MR_HMEM|MR_COLLECTIVE) == 0 {
			need = 0
		}
	}
	return need
}

// mrPreferred are the mr_mode bits an entry may report but never requires:
// FI_MR_VIRT_ADDR, since every region of the tree can be addressed by
// offsets as well (its attr/iova left 0). fi_mr(3): "If a provider
// requires the behavior defined for an mr_mode bit, it will leave the bit
// set on output to fi_getinfo. Otherwise, the provider can clear the bit."
// An entry whose provider works that way (verbs) keeps the bit for an
// application that supports it, and clears it for one that does not.
const mrPreferred = MR_VIRT_ADDR

// mrModes splits mrNeed's bits into those the entry requires and those it
// prefers (mrPreferred).
func mrModes(prov MRMode, caps Caps) (need, pref MRMode) {
	all := mrNeed(prov, caps)
	return all &^ mrPreferred, all & mrPreferred
}

// mrOutput checks the application's mr_mode against an entry's and returns
// the entry's mr_mode as the application gets it: the bits it needs, and
// those it prefers (pref) that the application supports.
//
// API 1.5 and later, mr_mode other than FI_MR_BASIC/FI_MR_SCALABLE: "By
// setting an mr_mode bit, the application has agreed to adjust its behavior
// as indicated." (fi_mr(3)); the bits the entry needs must all be set, and
// a zero mr_mode supports none ("If no mr_mode bits are set, the default
// behaviors describe below are followed"; FI_MR_SCALABLE "For library
// versions 1.5 and later, this is the default if no mr_mode bits are set").
//
// FI_MR_BASIC: "setting mr_mode equal to FI_MR_BASIC forces basic
// registration if the provider supports it"; basic registration "is
// equivalent to requiring the following mr_mode bits: FI_MR_VIRT_ADDR,
// FI_MR_ALLOCATED, and FI_MR_PROV_KEY" with FI_LOCAL_MR for FI_MR_LOCAL.
// FI_MR_SCALABLE: no bits but FI_MR_LOCAL (as FI_LOCAL_MR). API before 1.5
// with mr_mode 0: "FI_MR_BASIC or FI_MR_SCALABLE are requested and
// supported", scalable preferred. FI_LOCAL_MR itself is checked with the
// other mode bits.
func (q *getinfoQuery) mrOutput(prov, need, pref MRMode) (MRMode, bool) {
	if !q.legacyMR {
		if !q.mrAny && need&^q.mrMode != 0 {
			return 0, false
		}
		if !q.mrAny {
			pref &= q.mrMode
		}
		return need | pref, true
	}
	scalable := prov&MR_SCALABLE != 0 || need&^MR_LOCAL == 0
	basic := prov&MR_BASIC != 0 || need&^(MR_LOCAL|mrBasicMap) == 0
	switch {
	case q.mrMode == MR_BASIC && basic:
		return MR_BASIC, true
	case q.mrMode == MR_SCALABLE && scalable:
		return MR_SCALABLE, true
	case q.mrMode == MR_UNSPEC && scalable:
		return MR_SCALABLE, true
	case q.mrMode == MR_UNSPEC && basic:
		return MR_BASIC, true
	}
	return 0, false
}

// addrs checks the entry's address family and its domain's address
// against the requested format and addresses, and sets the output's
// addr_format, src_addr and dest_addr.
func (m *entryMatch) addrs() string {
	q, h, e, out := m.q, m.q.h, m.e, m.out
	if e.Named() {
		// An entry whose endpoints are named (the shm provider's
		// fi_shm://NAME) takes FI_ADDR_STR only, and the names the
		// hints give as its addresses. A node and service become the
		// name libfabric's shm makes of them (smr_resolve_addr,
		// fi_ns://NODE:SERVICE): with FI_SOURCE the src_addr, which an
		// endpoint opened from the entry takes as its name.
		if h.AddrFormat != FORMAT_UNSPEC && h.AddrFormat != ADDR_STR {
			return fmt.Sprintf("addr_format %v", h.AddrFormat)
		}
		out.AddrFormat = ADDR_STR
		switch {
		case q.src != nil && q.src.name != nil:
			out.SrcAddr = q.src.name
		case q.src != nil && q.src.nsName != "":
			out.SrcAddr = &Addr{Format: ADDR_STR, Str: q.src.nsName}
		}
		switch {
		case q.dst != nil && q.dst.name != nil:
			out.DestAddr = q.dst.name
		case q.dst != nil && q.dst.nsName != "":
			// fi_getinfo(3): "the node and service parameters ...
			// will be used to provide the destination address"; the
			// name libfabric's shm makes of them, which a peer that
			// took that name would answer to.
			out.DestAddr = &Addr{Format: ADDR_STR, Str: q.dst.nsName}
		}
		return ""
	}
	v4, v6 := false, false
	var domIP netip.Addr
	if e.SrcAddr != nil && e.SrcAddr.IP.Addr().IsValid() {
		domIP = e.SrcAddr.IP.Addr()
		v4, v6 = domIP.Is4(), domIP.Is6()
	} else {
		switch e.AddrFormat {
		case SOCKADDR_IN:
			v4 = true
		case SOCKADDR_IN6:
			v6 = true
		case SOCKADDR, FORMAT_UNSPEC:
			v4, v6 = true, true
		}
	}
	// addr_format: "If specified, indicates the format of addresses
	// referenced by the fabric interfaces and data structures." The socket
	// formats must agree with the domain's address family; FI_SOCKADDR
	// takes either family; FI_ADDR_STR has a string form for every IP
	// address ("fi_sockaddr_in://10.31.6.12:7471").
	switch f := h.AddrFormat; f {
	case FORMAT_UNSPEC:
	case SOCKADDR, ADDR_STR:
		if !v4 && !v6 {
			return fmt.Sprintf("addr_format %v", f)
		}
	case SOCKADDR_IN:
		if v6 = false; !v4 {
			return fmt.Sprintf("addr_format %v", f)
		}
		out.AddrFormat = f
	case SOCKADDR_IN6:
		if v4 = false; !v6 {
			return fmt.Sprintf("addr_format %v", f)
		}
		out.AddrFormat = f
	default:
		if e.AddrFormat != f {
			return fmt.Sprintf("addr_format %v", f)
		}
		v4, v6 = false, false
	}
	addr := func(ip netip.Addr, port uint16) *Addr {
		f := SOCKADDR_IN
		if ip.Is6() {
			f = SOCKADDR_IN6
		}
		out.AddrFormat = f
		return &Addr{Format: f, IP: netip.AddrPortFrom(ip, port)}
	}
	sameIP := func(a, b netip.Addr) bool { return a.WithZone("") == b.WithZone("") }

	if q.src != nil {
		// An entry can only be the source if the address is its domain's
		// or the wildcard address.
		ip, ok := q.src.pick(v4, v6)
		if !ok {
			return fmt.Sprintf("source address %s of this family", q.src.desc)
		}
		if domIP.IsValid() && !ip.IsUnspecified() && !domIP.IsUnspecified() && !sameIP(ip, domIP) {
			return fmt.Sprintf("source address %s", q.src.desc)
		}
		out.SrcAddr = addr(ip, q.src.port)
	} else if domIP.IsValid() {
		out.SrcAddr = addr(domIP, 0)
	}
	if q.dst != nil {
		ip, ok := q.dst.pick(v4, v6)
		if !ok {
			return fmt.Sprintf("destination %s of this family", q.dst.desc)
		}
		// Without a requested source, the entry's domain must be the one
		// the destination is reached from (where the route is known).
		if q.src == nil && domIP.IsValid() && !domIP.IsUnspecified() {
			if rs, ok := q.route(ip); ok && !sameIP(rs, domIP) {
				return fmt.Sprintf("destination %s (reached from %v)", q.dst.desc, rs)
			}
		}
		out.DestAddr = addr(ip, q.dst.port)
	}
	if h.AddrFormat == ADDR_STR {
		// The addresses are then strings (their length is the string's,
		// as libfabric's src_addrlen is); each keeps its IP.
		out.AddrFormat = ADDR_STR
		for _, a := range []*Addr{out.SrcAddr, out.DestAddr} {
			if a != nil {
				a.Format = ADDR_STR
			}
		}
	}
	return ""
}

func (q *getinfoQuery) domainAttr(c *attrCheck, h, d *DomainAttr, autoProgress bool) {
	// "FI_THREAD_UNSPEC ... When specified, providers will return a
	// threading model that allows for the greatest level of parallelism."
	// Otherwise the requested model is returned when the domain serves it.
	if !serves(threadRank, h.Threading, d.Threading) {
		c.failf("domain_attr.threading %v", h.Threading)
	} else if h.Threading != THREAD_UNSPEC {
		d.Threading = h.Threading
	}
	if !serves(progressRank, h.ControlProgress, d.ControlProgress) {
		c.failf("domain_attr.control_progress %v", h.ControlProgress)
	} else if h.ControlProgress != PROGRESS_UNSPEC {
		d.ControlProgress = h.ControlProgress
	}
	// An entry with Info.AutoProgress says FI_PROGRESS_MANUAL unless
	// asked for FI_PROGRESS_AUTO, which it also serves.
	if !serves(progressRank, h.DataProgress, d.DataProgress) && !(h.DataProgress == PROGRESS_AUTO && autoProgress) {
		c.failf("domain_attr.data_progress %v", h.DataProgress)
	} else if h.DataProgress != PROGRESS_UNSPEC {
		d.DataProgress = h.DataProgress
	}
	if !serves(rmRank, h.ResourceMgmt, d.ResourceMgmt) {
		c.failf("domain_attr.resource_mgmt %v", h.ResourceMgmt)
	} else if h.ResourceMgmt != RM_UNSPEC {
		d.ResourceMgmt = h.ResourceMgmt
	}
	// "The value FI_AV_UNSPEC may be used to indicate that the provider can
	// support either address vector format."
	if h.AVType != AV_UNSPEC && d.AVType != AV_UNSPEC && h.AVType != d.AVType {
		c.failf("domain_attr.av_type %v", h.AVType)
	} else if h.AVType != AV_UNSPEC {
		d.AVType = h.AVType
	}
	c.atLeast("domain_attr.mr_key_size", h.MRKeySize, d.MRKeySize)
	c.atLeast("domain_attr.cq_data_size", h.CQDataSize, d.CQDataSize)
	c.atLeast("domain_attr.cq_cnt", h.CQCnt, d.CQCnt)
	c.atLeast("domain_attr.ep_cnt", h.EPCnt, d.EPCnt)
	c.atLeast("domain_attr.tx_ctx_cnt", h.TxCtxCnt, d.TxCtxCnt)
	c.atLeast("domain_attr.rx_ctx_cnt", h.RxCtxCnt, d.RxCtxCnt)
	c.atLeast("domain_attr.max_ep_tx_ctx", h.MaxEPTxCtx, d.MaxEPTxCtx)
	c.atLeast("domain_attr.max_ep_rx_ctx", h.MaxEPRxCtx, d.MaxEPRxCtx)
	c.atLeast("domain_attr.max_ep_stx_ctx", h.MaxEPStxCtx, d.MaxEPStxCtx)
	c.atLeast("domain_attr.max_ep_srx_ctx", h.MaxEPSrxCtx, d.MaxEPSrxCtx)
	c.atLeast("domain_attr.cntr_cnt", h.CntrCnt, d.CntrCnt)
	c.atLeast("domain_attr.mr_iov_limit", h.MRIovLimit, d.MRIovLimit)
	c.atLeast("domain_attr.max_err_data", h.MaxErrData, d.MaxErrData)
	c.atLeast("domain_attr.mr_cnt", h.MRCnt, d.MRCnt)
	tclass(c, "domain_attr.tclass", h.TClass, &d.TClass)
}

// tclass: an entry's class of 0 (FI_TC_UNSPEC) takes any requested class;
// otherwise the classes must be the same. The output carries the request.
func tclass(c *attrCheck, name string, want TClass, have *TClass) {
	switch {
	case want == TC_UNSPEC:
	case *have != TC_UNSPEC && *have != want:
		c.failf("%s %v", name, want)
	default:
		*have = want
	}
}

func (q *getinfoQuery) epAttr(c *attrCheck, h, ep *EPAttr, d *DomainAttr, caps Caps) {
	if h.Protocol != PROTO_UNSPEC && h.Protocol != ep.Protocol {
		c.failf("ep_attr.protocol %v", h.Protocol)
	}
	c.atLeast("ep_attr.protocol_version", uint64(h.ProtocolVersion), uint64(ep.ProtocolVersion))
	c.atLeast("ep_attr.max_msg_size", h.MaxMsgSize, ep.MaxMsgSize)
	// msg_prefix_size is what the provider needs in front of each buffer
	// (with FI_MSG_PREFIX). A hint says how much the application provides,
	// so the entry must need no more.
	if h.MsgPrefixSize != 0 && ep.MsgPrefixSize > h.MsgPrefixSize {
		c.failf("ep_attr.msg_prefix_size %d (required: %d)", h.MsgPrefixSize, ep.MsgPrefixSize)
	}
	// "The maximum ordered size specifies the delivery order of transport
	// data into target memory for RMA and atomic operations": only checked
	// when the endpoint does RMA or atomics.
	if caps&(RMA|ATOMIC) != 0 {
		c.atLeast("ep_attr.max_order_raw_size", h.MaxOrderRAWSize, ep.MaxOrderRAWSize)
		c.atLeast("ep_attr.max_order_war_size", h.MaxOrderWARSize, ep.MaxOrderWARSize)
		c.atLeast("ep_attr.max_order_waw_size", h.MaxOrderWAWSize, ep.MaxOrderWAWSize)
	}
	// mem_tag_format: "A provider must return a tag format that supports
	// the requested number of fields, with each field being at least the
	// size requested, or fail the request." The entry's tag bits must cover
	// the requested ones; the output is the requested format.
	if caps&TAGGED != 0 && h.MemTagFormat != 0 {
		// "The mem_tag_format optionally begins with a series of bits set
		// to 0, to signify bits which are ignored by the provider."
		if bits.Len64(h.MemTagFormat) > bits.Len64(ep.MemTagFormat) {
			c.failf("ep_attr.mem_tag_format %#x (offered: %#x)", h.MemTagFormat, ep.MemTagFormat)
		} else {
			ep.MemTagFormat = h.MemTagFormat
		}
	}
	// tx_ctx_cnt, rx_ctx_cnt: bounded by the domain's max_ep_tx_ctx and
	// max_ep_rx_ctx; FI_SHARED_CONTEXT asks for a shared context:
	// "Providers that do not support shared transmit contexts will fail the
	// request."
	ctx := func(name string, want uint64, have *uint64, limit, sharedLimit uint64) {
		limit = max(limit, 1) // "If not specified (0), 1 context will be assigned"
		switch {
		case want == SHARED_CONTEXT && sharedLimit == 0:
			c.failf("ep_attr.%s FI_SHARED_CONTEXT", name)
		case want == 0 && *have == SHARED_CONTEXT:
			c.failf("ep_attr.%s 0 (a shared context is required)", name)
		case want != SHARED_CONTEXT && want > limit:
			c.failf("ep_attr.%s %d (at most %d)", name, want, limit)
		case want != 0:
			*have = want
		}
	}
	ctx("tx_ctx_cnt", h.TxCtxCnt, &ep.TxCtxCnt, d.MaxEPTxCtx, d.MaxEPStxCtx)
	ctx("rx_ctx_cnt", h.RxCtxCnt, &ep.RxCtxCnt, d.MaxEPRxCtx, d.MaxEPSrxCtx)
}

// MaxAuthKeySize bounds an authorization key (fabricfs's choice): keys of
// 1 to 64 bytes, carried in the connection requests.
const MaxAuthKeySize = 64

// authKeys checks the hints' authorization keys, of the domain and the
// endpoint. Keys travel in connection requests: FI_EP_MSG and FI_EP_RDM
// endpoints (whose connections rxm makes) carry them.
func (m *entryMatch) authKeys(c *attrCheck) {
	q, h, out := m.q, m.q.h, m.out
	keys := out.EPAttr != nil && (out.EPAttr.Type == EP_MSG || out.EPAttr.Type == EP_RDM)
	if hd := h.DomainAttr; hd != nil {
		q.authKey(c, "domain_attr", hd.AuthKeySize, hd.AuthKey, &out.DomainAttr.AuthKeySize, &out.DomainAttr.AuthKey, keys)
	}
	if he := h.EPAttr; he != nil {
		q.authKey(c, "ep_attr", he.AuthKeySize, he.AuthKey, &out.EPAttr.AuthKeySize, &out.EPAttr.AuthKey, keys)
	}
}

// authKey checks a requested authorization key. "This field is ignored
// unless the fabric is opened with API version 1.5 or greater." An entry
// offering no key (size 0: "This field will be 0 if authorization keys
// are not available or used") takes a key of 1 to MaxAuthKeySize bytes
// where keys can be enforced (keys: the endpoints make connections, which
// carry the key; a datagram has none); an entry with a key size of its
// own takes keys of that size. The answer carries the requested key.
func (q *getinfoQuery) authKey(c *attrCheck, s string, hSize uint64, hKey []byte, size *uint64, key *[]byte, keys bool) {
	if q.version < MakeVersion(1, 5) || hSize == 0 {
		return
	}
	switch {
	case *size != 0 && hSize != *size:
		c.failf("%s.auth_key_size %d (offered: %d)", s, hSize, *size)
	case *size == 0 && (!keys || hSize > MaxAuthKeySize):
		c.failf("%s.auth_key_size %d (offered: keys of 1 to %d bytes on FI_EP_MSG and FI_EP_RDM)", s, hSize, MaxAuthKeySize)
	default:
		*size = hSize
		if hKey != nil {
			*key = slices.Clone(hKey)
		}
	}
}

// TxOpFlags are the transmit operation flags every endpoint of the tree
// honours, as default flags (tx_attr.op_flags) and per operation; libfabric
// 1.17's providers check a hint's op_flags against such a set, and report
// the requested ones. RxOpFlags are the receive side's; FI_MULTI_RECV only
// where the entry's receive caps have it.
const (
	TxOpFlags = COMPLETION | INJECT | INJECT_COMPLETE | TRANSMIT_COMPLETE | DELIVERY_COMPLETE
	RxOpFlags = COMPLETION
)

// txAttr checks and fills the transmit attributes other than caps and mode.
// Sizes that configure the endpoint (size, iov_limit, inject_size,
// rma_iov_limit) take the requested value; op_flags are the requested
// default flags, which must be flags the tree honours (TxOpFlags, or the
// entry's own).
func txAttr(c *attrCheck, h, t *TxAttr) {
	subset(c, "tx_attr.op_flags", h.OpFlags, t.OpFlags|TxOpFlags)
	subset(c, "tx_attr.msg_order", h.MsgOrder, t.MsgOrder)
	// comp_order: "Providers should return the completion order that they
	// actually provide, with the constraint that the returned ordering is
	// stricter than that specified by the application."
	subset(c, "tx_attr.comp_order", h.CompOrder, t.CompOrder)
	c.atLeast("tx_attr.inject_size", h.InjectSize, t.InjectSize)
	c.atLeast("tx_attr.size", h.Size, t.Size)
	c.atLeast("tx_attr.iov_limit", h.IovLimit, t.IovLimit)
	c.atLeast("tx_attr.rma_iov_limit", h.RMAIovLimit, t.RMAIovLimit)
	tclass(c, "tx_attr.tclass", h.TClass, &t.TClass)
	t.OpFlags = h.OpFlags
	setIf(&t.InjectSize, h.InjectSize)
	setIf(&t.Size, h.Size)
	setIf(&t.IovLimit, h.IovLimit)
	setIf(&t.RMAIovLimit, h.RMAIovLimit)
}

// rxAttr is txAttr for the receive attributes. total_buffered_recv "is a
// hint to the provider ... The provider may adjust or ignore this value":
// it never fails a match, and the output is the request capped at the
// entry's value.
func rxAttr(c *attrCheck, h, r *RxAttr) {
	honoured := r.OpFlags | RxOpFlags
	if r.Caps&MULTI_RECV != 0 {
		honoured |= OpFlags(MULTI_RECV)
	}
	subset(c, "rx_attr.op_flags", h.OpFlags, honoured)
	subset(c, "rx_attr.msg_order", h.MsgOrder, r.MsgOrder)
	subset(c, "rx_attr.comp_order", h.CompOrder, r.CompOrder)
	c.atLeast("rx_attr.size", h.Size, r.Size)
	c.atLeast("rx_attr.iov_limit", h.IovLimit, r.IovLimit)
	r.OpFlags = h.OpFlags
	setIf(&r.Size, h.Size)
	setIf(&r.IovLimit, h.IovLimit)
	if h.TotalBufferedRecv != 0 && h.TotalBufferedRecv < r.TotalBufferedRecv {
		r.TotalBufferedRecv = h.TotalBufferedRecv
	}
}

func setIf(have *uint64, want uint64) {
	if want != 0 {
		*have = want
	}
}
