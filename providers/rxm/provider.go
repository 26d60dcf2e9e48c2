package rxm

import (
	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
	"math"
	"net/netip"
)

// Attribute values of the FI_EP_RDM entries. Where fabricfs behaves as
// libfabric 1.17's rxm over tcp does, they are what `fi_info -v -p tcp -t
// FI_EP_RDM` prints.
const (
	UtilName        = "ofi_rxm"       // the utility provider's name: prov_name is "tcp;ofi_rxm", "verbs;ofi_rxm"
	EagerLimit      = wire.EagerLimit // the largest message sent eagerly; larger ones go by rendezvous
	CQDataSize      = 8               // domain_attr.cq_data_size of rxm itself: its header carries 8 bytes
	InjectSize      = 64              // tx_attr.inject_size over tcp: tcp's 128 minus the 64-byte rxm header
	DefaultTxSize   = 2048            // tx_attr.size
	DefaultRxSize   = 2048            // rx_attr.size
	ProtocolVersion = 1               // ep_attr.protocol_version of FI_PROTO_RXM
	MemTagFormat    = 0xaaaaaaaaaaaaaaaa
	// IovLimit is tx/rx iov_limit and rma_iov_limit: rxm's RXM_IOV_LIMIT
	// (core gathers and scatters the segments, core/iov.go).
	IovLimit = 4
	// DefaultMinMultiRecv is FI_OPT_MIN_MULTI_RECV until set: rxm's
	// buffer size.
	DefaultMinMultiRecv = EagerLimit
)

// Capabilities implemented. FI_SOURCE and FI_DIRECTED_RECV are secondary
// and primary receive modifiers; fi_getinfo returns FI_SOURCE only when asked,
// and FI_SOURCE_ERR (core reports a message from a sender outside the AV
// as an error completion) and FI_AV_USER_ID (core reports the user id an
// address was inserted with as its sender) too.
// RMA goes straight to the peer's tcp connection (rma.go); peers' RMA on
// the endpoint's memory reaches its counters (FI_RMA_EVENT, which
// libfabric's rxm does not offer). Atomics are rxm's messages (atomic.go),
// over any MSG provider.
const (
	// FI_SHARED_AV: an AV made with a name (av/NAME) is one object of the
	// tree, which endpoints of other processes bind by that name. FI_FENCE
	// is core's (EP.fenced).
	rdmCaps = fi.MSG | fi.TAGGED | fi.SEND | fi.RECV | fi.SOURCE | fi.SOURCE_ERR | fi.AV_USER_ID | fi.DIRECTED_RECV | fi.MULTI_RECV | fi.NAMED_RX_CTX |
		fi.RMA | fi.ATOMIC | fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT | fi.SHARED_AV | fi.FENCE
	txCaps = fi.MSG | fi.TAGGED | fi.SEND | fi.RMA | fi.ATOMIC | fi.READ | fi.WRITE | fi.NAMED_RX_CTX | fi.FENCE
	rxCaps = fi.MSG | fi.TAGGED | fi.RECV | fi.SOURCE | fi.SOURCE_ERR | fi.DIRECTED_RECV | fi.MULTI_RECV |
		fi.RMA | fi.ATOMIC | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
)

// provider layers FI_EP_RDM over a provider of FI_EP_MSG endpoints.
type provider struct {
	inner core.Provider
}

var _ core.Provider = (*provider)(nil)

// Wrap returns p with FI_EP_RDM added: the same name and domains, p's
// fi_info entries followed by one FI_EP_RDM entry per FI_EP_MSG entry of
// p, and endpoints of that type made by this package over p's MSG
// endpoints. Everything else goes to p.
func Wrap(p core.Provider) core.Provider { return &provider{inner: p} }

// Name is the wrapped provider's name: the tree shows the RDM endpoints in
// its domains, as libfabric shows "tcp;ofi_rxm" under -p tcp.
func (p *provider) Name() string { return p.inner.Name() }

// Rescan passes the wrapped provider's Rescan on (core.Rescanner): the
// FI_EP_RDM entries follow its FI_EP_MSG ones.
func (p *provider) Rescan() error {
	if r, ok := p.inner.(core.Rescanner); ok {
		return r.Rescan()
	}
	return nil
}

// Infos returns p's entries, then the FI_EP_RDM ones.
func (p *provider) Infos() []*fi.Info {
	infos := p.inner.Infos()
	out := infos
	for _, in := range infos {
		if in.EPAttr != nil && in.EPAttr.Type == fi.EP_MSG {
			out = append(out, rdmInfo(in))
		}
	}
	return out
}

// rdmInfo is the FI_EP_RDM entry layered over the FI_EP_MSG entry msg.
// As libfabric's rxm_info_to_rxm builds it, the memory registration
// attributes (mr_mode, mr_key_size), cq_data_size (at most rxm's 8), the
// ordering and max_msg_size are msg's, and so is the mode, but for
// FI_RX_CQ_DATA, which rxm handles itself; the contexts and data_progress
// are rxm's. FI_RMA_EVENT is offered when
// msg has it: peers' RMA reaches rxm only through the MSG endpoint's
// events.
func rdmInfo(msg *fi.Info) *fi.Info {
	in := msg.Clone()
	noEvent := fi.Caps(0)
	if msg.Caps&fi.RMA_EVENT == 0 {
		noEvent = fi.RMA_EVENT
	}
	in.Caps = rdmCaps&^noEvent | msg.Caps&(fi.LOCAL_COMM|fi.REMOTE_COMM)
	// FI_BUFFERED_RECV: offered, and kept by fi_getinfo only for hints
	// that have it (buffered.go).
	in.Mode = msg.Mode&^fi.RX_CQ_DATA | fi.BUFFERED_RECV
	in.DomainAttr.CQDataSize = min(msg.DomainAttr.CQDataSize, CQDataSize)
	inject := uint64(InjectSize)
	var unordered fi.MsgOrder
	if msg.DomainAttr.MRMode&fi.MR_LOCAL != 0 {
		// Sends are copied into rxm's buffers anyway, which saves the
		// application registering them: libfabric's rxm reports its
		// eager size then.
		inject = EagerLimit
		// Received messages land in rxm's buffers too, and reach the
		// application's when rxm copies them, while the device places
		// peers' RMA itself at once: a read or write behind a send can
		// reach the receive buffer before the message does, so reads
		// and writes are not ordered after sends (core's TestMsgOrder).
		unordered = fi.ORDER_RAS | fi.ORDER_WAS
	}
	in.TxAttr = &fi.TxAttr{
		TClass:      msg.TxAttr.TClass, // the traffic classes its connections can carry
		Caps:        txCaps,
		MsgOrder:    msg.TxAttr.MsgOrder &^ unordered,
		CompOrder:   fi.ORDER_NONE,
		InjectSize:  inject,
		Size:        DefaultTxSize,
		IovLimit:    IovLimit,
		RMAIovLimit: IovLimit,
	}
	in.RxAttr = &fi.RxAttr{
		Caps:      rxCaps &^ noEvent,
		MsgOrder:  msg.RxAttr.MsgOrder &^ unordered,
		CompOrder: fi.ORDER_NONE,
		Size:      DefaultRxSize,
		IovLimit:  IovLimit,
	}
	in.EPAttr = &fi.EPAttr{
		Type:            fi.EP_RDM,
		Protocol:        fi.PROTO_RXM,
		ProtocolVersion: ProtocolVersion,
		MaxMsgSize:      msg.EPAttr.MaxMsgSize,
		MaxOrderRAWSize: msg.EPAttr.MaxOrderRAWSize,
		MaxOrderWARSize: msg.EPAttr.MaxOrderWARSize,
		MaxOrderWAWSize: msg.EPAttr.MaxOrderWAWSize,
		MemTagFormat:    MemTagFormat,
		TxCtxCnt:        1,
		RxCtxCnt:        1,
	}
	// The domain shares AVs between processes (named AVs: FI_SHARED_AV).
	// Scalable endpoints are core's (core/sep.go) over one rxm endpoint
	// whose receive contexts rx_index names: ScalableCtxs of each, per
	// endpoint and per domain. libfabric 1.17's rxm has 1.
	in.DomainAttr.Caps |= fi.SHARED_AV
	// data_progress is rxm's: FI_PROGRESS_MANUAL unless the hints ask for
	// FI_PROGRESS_AUTO (rxm then progresses in a thread of its own). The
	// daemon progresses every operation, so both are true; MANUAL tells
	// a portable application what libfabric's rxm needs of it: "the
	// provider will attempt to advance an asynchronous operation forward
	// when the application attempts to wait on or read an event queue,
	// completion queue, or counter" (fi_domain(3)).
	in.DomainAttr.DataProgress, in.AutoProgress = fi.PROGRESS_MANUAL, true
	in.DomainAttr.TxCtxCnt, in.DomainAttr.RxCtxCnt = core.ScalableCtxs, core.ScalableCtxs
	in.DomainAttr.MaxEPTxCtx, in.DomainAttr.MaxEPRxCtx = core.ScalableCtxs, core.ScalableCtxs
	in.FabricAttr.ProvName = msg.FabricAttr.ProvName + ";" + UtilName
	return in
}

// OpenDomain opens p's domain and wraps it. A domain of p that registers
// memory (core.MemoryRegistrar) stays one: its memory regions are the
// wrapped provider's, for RDM endpoints as for MSG ones.
func (p *provider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.inner.OpenDomain(name)
	if err != nil {
		return nil, err
	}
	dom := &domain{prov: p, inner: d, name: name}
	if r, ok := d.(core.MemoryRegistrar); ok {
		dom.reg = r
		return regDomain{dom}, nil
	}
	return dom, nil
}

// domain is an opened domain of the wrapped provider.
type domain struct {
	prov  *provider
	inner core.ProviderDomain
	reg   core.MemoryRegistrar // inner, if it registers memory
	name  string
}

// regDomain is a domain whose wrapped domain registers memory.
type regDomain struct{ *domain }

var _ core.MemoryRegistrar = regDomain{}

// RegisterMemory registers buf with the wrapped domain, as libfabric's rxm
// passes fi_mr_reg to its msg domain.
func (d regDomain) RegisterMemory(owner uint32, buf []byte, iova uint64, access fi.Caps, requestedKey uint64, authKey []byte) (core.Memory, error) {
	return d.reg.RegisterMemory(owner, buf, iova, access, requestedKey, authKey)
}

// NewEndpoint makes FI_EP_RDM endpoints here and passes every other type
// to the wrapped provider.
func (d *domain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	if info == nil || info.EPAttr == nil || info.EPAttr.Type != fi.EP_RDM {
		return d.inner.NewEndpoint(info, req, ev)
	}
	if req != nil {
		return nil, core.Errorf(fi.EINVAL, "rxm: an FI_EP_RDM endpoint is not made from a connection request")
	}
	return newEndpoint(d, info, ev)
}

// NewPassiveEndpoint is the wrapped provider's: FI_EP_RDM has none.
func (d *domain) NewPassiveEndpoint(info *fi.Info, ev core.PassiveEvents) (core.PassiveEndpoint, error) {
	if info != nil && info.EPAttr != nil && info.EPAttr.Type == fi.EP_RDM {
		return nil, core.Errorf(fi.EOPNOTSUPP, "rxm: FI_EP_RDM has no passive endpoints")
	}
	return d.inner.NewPassiveEndpoint(info, ev)
}

// Close closes the wrapped domain.
// EndpointOptions is core.EndpointOptions: an FI_EP_RDM endpoint's are
// rxm's, FI_OPT_MIN_MULTI_RECV and the thresholds of FI_BUFFERED_RECV
// (buffered_min 0 and buffered_limit one rxm buffer, as rxm sets them for
// a tcp connection, whose inject size is too small for its default
// buffered_min; neither above an eager message, the most of a message
// the endpoint holds when it reports it); the other types' are the
// wrapped domain's.
func (d *domain) EndpointOptions(t fi.EPType, passive bool) []core.Option {
	if t == fi.EP_RDM {
		if passive {
			return nil
		}
		return []core.Option{
			{Name: "min_multi_recv", Value: DefaultMinMultiRecv, Max: math.MaxUint64},
			{Name: "buffered_min", Value: 0, Max: EagerLimit, BeforeEnable: true},
			{Name: "buffered_limit", Value: EagerLimit, Max: EagerLimit, BeforeEnable: true},
		}
	}
	if o, ok := d.inner.(core.EndpointOptions); ok {
		return o.EndpointOptions(t, passive)
	}
	return nil
}

func (d *domain) Close() error { return d.inner.Close() }

// DeviceCounters is core.DeviceCounters: the wrapped domain's device's
// counters, none if it has none.
func (d *domain) DeviceCounters() []core.DeviceCounter {
	if dc, ok := d.inner.(core.DeviceCounters); ok {
		return dc.DeviceCounters()
	}
	return nil
}

// Ops is core.OpsOpener: the wrapped domain's provider-specific
// operation sets, none if it has none.
func (d *domain) Ops() []core.OpsSet {
	if o, ok := d.inner.(core.OpsOpener); ok {
		return o.Ops()
	}
	return nil
}

// msgInfo is the fi_info of the MSG endpoints under an RDM endpoint of
// rdm: the wrapped provider's FI_EP_MSG entry of the same domain and
// address, asking for FI_TAGGED (the tcp provider then takes rxm's bare
// tagged messages), with the RDM endpoint's source IP address and queues
// large enough for all its sends. The port stays 0: the connections it
// dials bind the address only (the RDM endpoint's port is its listener's,
// given to Listen from the RDM fi_info).
func (d *domain) msgInfo(rdm *fi.Info) (*fi.Info, error) {
	var best *fi.Info
	for _, in := range d.prov.inner.Infos() {
		if in.EPAttr == nil || in.EPAttr.Type != fi.EP_MSG || in.DomainAttr.Name != d.name || in.AddrFormat != rdm.AddrFormat {
			continue
		}
		if best == nil || (in.SrcAddr != nil && rdm.SrcAddr != nil && in.SrcAddr.IP.Addr() == rdm.SrcAddr.IP.Addr()) {
			best = in
		}
	}
	if best == nil {
		return nil, core.Errorf(fi.ENODATA, "rxm: domain %s has no FI_EP_MSG endpoint for %v", d.name, rdm.AddrFormat)
	}
	in := best.Clone()
	in.Caps |= fi.TAGGED
	if rdm.SrcAddr != nil {
		src := *rdm.SrcAddr
		src.IP = netip.AddrPortFrom(src.IP.Addr(), 0)
		in.SrcAddr = &src
	}
	in.TxAttr.Size = rdm.TxAttr.Size + ctrlSends + replySends
	in.TxAttr.TClass = rdm.TxAttr.TClass // the connections carry the endpoint's traffic class
	// ... and its authorization key: the MSG provider's connection
	// requests carry it, and its listener refuses peers with another.
	in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = rdm.EPAttr.AuthKey, rdm.EPAttr.AuthKeySize
	in.RxAttr.Size = bufsPerConn
	return in, nil
}
