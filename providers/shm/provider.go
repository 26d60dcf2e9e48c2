package shm

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Attribute values of the fi_info entry. Where fabricfs behaves as
// libfabric 1.17's shm provider does, they are what `fi_info -v -p shm`
// prints.
const (
	ProvName   = "shm" // prov_name, the fabric's and the domain's name
	DomainName = "shm"
	InjectSize = 4096 // tx_attr.inject_size, shm's
	CQDataSize = 8
	MRKeySize  = 8
	// DefaultTxSize and DefaultRxSize are tx_attr.size and rx_attr.size,
	// shm's; MaxQueueSize bounds what an application may ask.
	DefaultTxSize = 1024
	DefaultRxSize = 1024
	MaxQueueSize  = 1 << 16
	IovLimit      = 4 // iov_limit, rma_iov_limit: core gathers and scatters (core/iov.go)
	EPCnt         = 8192
	CQCnt         = 1024
	MemTagFormat  = 0xaaaaaaaaaaaaaaaa
	// EagerLimit is the largest unexpected message copied aside, so that
	// its send completes at once; a longer one stays in the sender's
	// buffer until a receive takes it (and is copied once, then).
	EagerLimit = 16384
	// UnexpectedLimit bounds the bytes of unexpected messages an
	// endpoint keeps copied aside; beyond it they too stay at the sender.
	UnexpectedLimit = 16 << 20
	// MaxDynamicRecv bounds the buffer made for a receive without one.
	MaxDynamicRecv = 64 << 20
)

// provVersion is fabric_attr.prov_version: libfabric's FI_VERSION(117, 0),
// as its shm reports.
const provVersion = 117<<16 | 0

// Capabilities. Every operation is placed in the order it is posted
// (package doc), so each ordering of sends, reads, writes and atomics
// holds.
const (
	txCaps = fi.MSG | fi.TAGGED | fi.SEND | fi.RMA | fi.ATOMIC | fi.READ | fi.WRITE | fi.FENCE
	rxCaps = fi.MSG | fi.TAGGED | fi.RECV | fi.SOURCE | fi.DIRECTED_RECV | fi.MULTI_RECV | fi.RMA | fi.ATOMIC |
		fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
	epCaps  = txCaps | rxCaps | fi.SHARED_AV | fi.LOCAL_COMM
	orderly = fi.ORDER_RAR | fi.ORDER_RAW | fi.ORDER_RAS | fi.ORDER_WAR | fi.ORDER_WAW | fi.ORDER_WAS |
		fi.ORDER_SAR | fi.ORDER_SAW | fi.ORDER_SAS | fi.ORDER_RMA_RAR | fi.ORDER_RMA_RAW | fi.ORDER_RMA_WAR | fi.ORDER_RMA_WAW |
		fi.ORDER_ATOMIC_RAR | fi.ORDER_ATOMIC_RAW | fi.ORDER_ATOMIC_WAR | fi.ORDER_ATOMIC_WAW
)

// Provider is the shm provider: one domain, and the table of its enabled
// endpoints by name.
type Provider struct {
	mu   sync.RWMutex
	eps  map[string]*endpoint // enabled endpoints by address (fi_shm://...)
	next atomic.Uint64        // the number in the next endpoint's name
	open core.EPCount
}

var _ core.Provider = (*Provider)(nil)

// stem is the entry's src_addr, fi_shm://fabricfs: an endpoint opened
// with it as its src_addr is named by the tree, fi_shm://fabricfs.N
// (endpointName).
const stem = fi.ShmScheme + "fabricfs"

// New returns the shm provider.
func New() *Provider { return &Provider{eps: map[string]*endpoint{}} }

// Name is "shm".
func (p *Provider) Name() string { return ProvName }

// Infos returns the one FI_EP_RDM entry.
func (p *Provider) Infos() []*fi.Info { return []*fi.Info{info()} }

func info() *fi.Info {
	return &fi.Info{
		Caps:       epCaps,
		AddrFormat: fi.ADDR_STR,
		// The domain's address: the stem of its endpoints' names, as
		// libfabric's shm gives fi_shm://PID as an entry's source. The
		// tree names each endpoint (ep/N/local).
		SrcAddr: &fi.Addr{Format: fi.ADDR_STR, Str: stem},
		TxAttr: &fi.TxAttr{
			Caps:        txCaps,
			MsgOrder:    orderly,
			CompOrder:   fi.ORDER_NONE,
			InjectSize:  InjectSize,
			Size:        DefaultTxSize,
			IovLimit:    IovLimit,
			RMAIovLimit: IovLimit,
		},
		RxAttr: &fi.RxAttr{
			Caps:      rxCaps,
			MsgOrder:  orderly,
			CompOrder: fi.ORDER_NONE,
			Size:      DefaultRxSize,
			IovLimit:  IovLimit,
		},
		EPAttr: &fi.EPAttr{
			Type:            fi.EP_RDM,
			Protocol:        fi.PROTO_SHM,
			ProtocolVersion: 1,
			MaxMsgSize:      math.MaxUint64,
			MaxOrderRAWSize: math.MaxUint64,
			MaxOrderWARSize: math.MaxUint64,
			MaxOrderWAWSize: math.MaxUint64,
			MemTagFormat:    MemTagFormat,
			TxCtxCnt:        1,
			RxCtxCnt:        1,
		},
		DomainAttr: &fi.DomainAttr{
			Name:            DomainName,
			Threading:       fi.THREAD_SAFE,
			ControlProgress: fi.PROGRESS_AUTO,
			DataProgress:    fi.PROGRESS_AUTO,
			ResourceMgmt:    fi.RM_ENABLED,
			AVType:          fi.AV_UNSPEC,
			MRKeySize:       MRKeySize,
			CQDataSize:      CQDataSize,
			CQCnt:           CQCnt,
			EPCnt:           EPCnt,
			TxCtxCnt:        EPCnt,
			RxCtxCnt:        EPCnt,
			MaxEPTxCtx:      1,
			MaxEPRxCtx:      1,
			MRIovLimit:      1,
			Caps:            fi.SHARED_AV | fi.LOCAL_COMM,
		},
		FabricAttr: &fi.FabricAttr{
			Name:        ProvName,
			ProvName:    ProvName,
			ProvVersion: provVersion,
			APIVersion:  fi.APIVersion,
		},
	}
}

// OpenDomain opens the domain "shm".
func (p *Provider) OpenDomain(name string) (core.ProviderDomain, error) {
	if name != DomainName {
		return nil, core.Errorf(fi.ENODEV, "shm: no domain %q; the one domain is %q", name, DomainName)
	}
	return &domain{prov: p}, nil
}

// domain is the opened domain.
type domain struct{ prov *Provider }

// NewEndpoint makes an FI_EP_RDM endpoint, named after its src_addr
// (endpointName).
func (d *domain) NewEndpoint(in *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	switch {
	case in == nil || in.EPAttr == nil:
		return nil, core.Errorf(fi.EINVAL, "shm: endpoint without fi_info or ep_attr")
	case in.EPAttr.Type != fi.EP_RDM:
		return nil, core.Errorf(fi.EOPNOTSUPP, "shm: endpoint type %v not supported; FI_EP_RDM is", in.EPAttr.Type)
	case req != nil:
		return nil, core.Errorf(fi.EINVAL, "shm: an FI_EP_RDM endpoint is not made from a connection request")
	case ev == nil:
		return nil, core.Errorf(fi.EINVAL, "shm: endpoint without event handler")
	case in.Caps&^(epCaps|fi.REMOTE_COMM) != 0:
		return nil, core.Errorf(fi.EOPNOTSUPP, "shm: capabilities %v not supported", in.Caps&^epCaps)
	}
	rx := DefaultRxSize
	if in.RxAttr != nil && in.RxAttr.Size != 0 {
		rx = int(min(in.RxAttr.Size, MaxQueueSize+1))
	}
	if rx > MaxQueueSize {
		return nil, core.Errorf(fi.EINVAL, "shm: rx_size %d: at most %d", rx, MaxQueueSize)
	}
	inject := InjectSize
	if in.TxAttr != nil && in.TxAttr.InjectSize < InjectSize {
		inject = int(in.TxAttr.InjectSize)
	}
	name, err := d.prov.endpointName(in.SrcAddr)
	if err != nil {
		return nil, err
	}
	if !d.prov.open.Hold(EPCnt) {
		return nil, core.Errorf(fi.ENOSPC, "shm: domain %s has its %d endpoints (ep_cnt)", DomainName, EPCnt)
	}
	return &endpoint{prov: d.prov, ev: ev, name: name, rxSize: rx, inject: inject, caps: in.Caps, key: slices.Clone(in.EPAttr.AuthKey),
		multi: map[*core.Op]*multiRecv{}, minMulti: DefaultMinMultiRecv}, nil
}

// endpointName is the name of an endpoint whose src_addr is src: src
// itself when it is a name (fi_shm://NAME, fi_ns://NODE:SERVICE) the
// application chose, or the tree's next fi_shm://fabricfs.N when src is
// the entry's stem or none. The tree's names are its own: src may not be
// one of them (FI_EADDRNOTAVAIL). Enable checks that no other endpoint
// has the name.
func (p *Provider) endpointName(src *fi.Addr) (fi.Addr, error) {
	switch {
	case src == nil || src.Str == stem:
		return fi.Addr{Format: fi.ADDR_STR, Str: stem + "." + strconv.FormatUint(p.next.Add(1), 10)}, nil
	case !src.IsName():
		return fi.Addr{}, core.Errorf(fi.EADDRNOTAVAIL, "shm: src_addr %v is not a name (fi_shm://NAME or fi_ns://NAME)", src)
	case strings.HasPrefix(src.Str, stem+"."):
		return fi.Addr{}, core.Errorf(fi.EADDRNOTAVAIL, "shm: src_addr %s: names %s.N are the tree's", src.Str, stem)
	}
	return *src, nil
}

// NewPassiveEndpoint fails: FI_EP_RDM has no passive endpoints.
func (d *domain) NewPassiveEndpoint(*fi.Info, core.PassiveEvents) (core.PassiveEndpoint, error) {
	return nil, core.Errorf(fi.EOPNOTSUPP, "shm: FI_EP_RDM has no passive endpoints")
}

// Close releases the domain once its endpoints are closed.
func (d *domain) Close() error {
	if n := d.prov.open.Open(); n > 0 {
		return core.Errorf(fi.EBUSY, "shm: domain %s has %d endpoints open", DomainName, n)
	}
	return nil
}

// lookup is the enabled endpoint called a, or nil.
func (p *Provider) lookup(a fi.Addr) *endpoint {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.eps[a.Str]
}
