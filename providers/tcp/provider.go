package tcp

import (
	"math"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// Limits and attribute values. Where fabricfs behaves as libfabric 1.17's
// tcp provider does, the values are those `fi_info -v -p tcp -t FI_EP_MSG`
// prints.
const (
	ProvName      = "tcp"
	InjectSize    = 128   // tx_attr.inject_size: FI_INJECT payloads are copied
	DefaultTxSize = 256   // tx_attr.size: outstanding sends per endpoint
	DefaultRxSize = 256   // rx_attr.size: posted receives per endpoint
	MaxQueueSize  = 65536 // largest tx or rx size an application may choose
	IovLimit      = 4     // tx/rx and rma iov_limit: core gathers and scatters segments (core/iov.go)
	CQDataSize    = 8     // domain_attr.cq_data_size
	MRKeySize     = 8     // domain_attr.mr_key_size
	CQCnt         = 256   // domain_attr.cq_cnt
	// CntrCnt is domain_attr.cntr_cnt, "the optimal number of completion
	// counters": the tree's counters cost what its CQs do, so as many;
	// libfabric's tcp, whose counters are its util layer's, says 0.
	CntrCnt       = CQCnt
	EPCnt         = 8192 // domain_attr.ep_cnt: endpoints, active and passive, per domain
	MaxHandshakes = 1024 // connections a passive endpoint reads connreqs from at once
	// MaxListenerConns bounds the connections a passive endpoint's
	// listener accepted that are open: handshakes, requests, and the
	// endpoints made from them. Past it, new connections are closed.
	MaxListenerConns = 4096
	// MaxHostConns bounds the open connections of MaxListenerConns that
	// come from one remote host (an IPv4 address, an IPv6 /64), or from
	// one user of this host (core.HostOf): one host or user cannot take
	// every slot of a listener.
	MaxHostConns = 256
	// MaxDynamicRecv bounds the buffer the provider allocates for a receive
	// posted without one. A larger message fails that receive and closes
	// the connection, so that no peer can make the daemon allocate at will.
	MaxDynamicRecv = 64 << 20
)

var provVersion = fi.MakeVersion(1, 0)

// Capabilities implemented now. The domain capabilities are libfabric's;
// the loopback entries drop FI_REMOTE_COMM, as libfabric's do. FI_FENCE
// is core's (EP.fenced), for every provider. FI_RMA_PMEM, which
// libfabric's tcp offers, is not: every region of the tree is memory the
// daemon makes, never persistent memory (docs/seeds.md).
const (
	epCaps = fi.MSG | fi.RMA | fi.READ | fi.WRITE | fi.RECV | fi.SEND | fi.REMOTE_READ | fi.REMOTE_WRITE |
		fi.RMA_EVENT | fi.FENCE
	domainCaps = fi.LOCAL_COMM | fi.REMOTE_COMM
	txCaps     = fi.MSG | fi.RMA | fi.READ | fi.WRITE | fi.SEND | fi.FENCE
	rxCaps     = fi.MSG | fi.RMA | fi.RECV | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
	// layerCaps may be asked of an endpoint by a provider layered on this
	// one, but are not offered by getinfo: FI_TAGGED makes the endpoint
	// take rxm's tagged messages (OpMsg with the tagged flag) into its
	// receives, reporting their tags, as libfabric's tcp does for rxm.
	layerCaps = fi.TAGGED
	// msgOrder is libfabric's TCPX_MSG_ORDER. One TCP stream carries every
	// operation of a connection and the receiver handles them in stream
	// order, so the guarantees hold for every operation fabricfs implements.
	msgOrder = fi.ORDER_RAR | fi.ORDER_RMA_RAR | fi.ORDER_ATOMIC_RAR |
		fi.ORDER_RAW | fi.ORDER_RMA_RAW | fi.ORDER_ATOMIC_RAW |
		fi.ORDER_RAS |
		fi.ORDER_WAW | fi.ORDER_RMA_WAW | fi.ORDER_ATOMIC_WAW |
		fi.ORDER_WAS | fi.ORDER_SAW | fi.ORDER_SAS
)

// Provider is the tcp provider: one domain per network interface with an
// IP address, plus "lo".
type Provider struct {
	cfg   Config
	mu    sync.Mutex
	infos []*fi.Info // best first, then those Rescan added; under mu
}

var (
	_ core.Provider  = (*Provider)(nil)
	_ core.Rescanner = (*Provider)(nil)
)

// New returns the tcp provider with settings cfg for the host's
// interfaces (those cfg.Ifaces names) as they are now; Rescan adds those
// that come up later.
func New(cfg Config) (*Provider, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	addrs, err := hostAddrs(cfg)
	if err != nil {
		return nil, core.Errorf(fi.ENODEV, "tcp: listing network interfaces: %v", err)
	}
	p := newProvider(addrs)
	p.cfg = cfg
	return p, nil
}

func newProvider(addrs []ifAddr) *Provider {
	p := &Provider{}
	for _, a := range addrs {
		p.infos = append(p.infos, msgInfo(a))
	}
	return p
}

// Name is "tcp".
func (p *Provider) Name() string { return ProvName }

// Infos returns a copy of every fi_info entry: those of the interfaces at
// start in fi_info's order, then those Rescan added.
func (p *Provider) Infos() []*fi.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fi.CloneInfos(p.infos)
}

// Rescan adds the entries of the interface addresses that are up and
// running now and have none yet (core.Rescanner), in fi_info's order among
// themselves. Entries of addresses that went away stay.
func (p *Provider) Rescan() error {
	addrs, err := hostAddrs(p.cfg)
	if err != nil {
		return core.Errorf(fi.ENODEV, "tcp: listing network interfaces: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		if !p.hasLocked(a) {
			p.infos = append(p.infos, msgInfo(a))
		}
	}
	return nil
}

// hasLocked reports whether an entry offers address a of its interface.
func (p *Provider) hasLocked(a ifAddr) bool {
	for _, in := range p.infos {
		if in.DomainAttr.Name == a.ifName && in.SrcAddr != nil && in.SrcAddr.IP.Addr() == a.ip {
			return true
		}
	}
	return false
}

// OpenDomain opens the domain of interface name.
func (p *Provider) OpenDomain(name string) (core.ProviderDomain, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.infos {
		if in.DomainAttr.Name == name {
			return &domain{name: name, cfg: p.cfg}, nil
		}
	}
	return nil, core.Errorf(fi.ENODEV, "tcp: no domain %q", name)
}

// msgInfo is the FI_EP_MSG fi_info entry of one interface address.
func msgInfo(a ifAddr) *fi.Info {
	caps := epCaps | domainCaps
	if a.loopback {
		caps = epCaps | fi.LOCAL_COMM
	}
	src := fi.SockAddr(netip.AddrPortFrom(a.ip, 0))
	return &fi.Info{
		Caps:       caps,
		AddrFormat: src.Format,
		SrcAddr:    &src,
		TxAttr: &fi.TxAttr{
			Caps:       txCaps,
			MsgOrder:   msgOrder,
			CompOrder:  fi.ORDER_STRICT,
			InjectSize: InjectSize,
			Size:       DefaultTxSize,
			IovLimit:   IovLimit,
			// core posts one operation per remote segment; writes from
			// peers may name up to wire.MaxRMAIov.
			RMAIovLimit: IovLimit,
		},
		RxAttr: &fi.RxAttr{
			Caps:      rxCaps,
			MsgOrder:  msgOrder,
			CompOrder: fi.ORDER_STRICT,
			Size:      DefaultRxSize,
			IovLimit:  IovLimit,
		},
		EPAttr: &fi.EPAttr{
			Type:            fi.EP_MSG,
			Protocol:        fi.PROTO_SOCK_TCP,
			MaxMsgSize:      math.MaxUint64,
			MaxOrderRAWSize: math.MaxUint64,
			MaxOrderWAWSize: math.MaxUint64,
			TxCtxCnt:        1,
			RxCtxCnt:        1,
		},
		DomainAttr: &fi.DomainAttr{
			Name:            a.ifName,
			Threading:       fi.THREAD_SAFE,
			ControlProgress: fi.PROGRESS_AUTO,
			DataProgress:    fi.PROGRESS_AUTO,
			ResourceMgmt:    fi.RM_ENABLED,
			AVType:          fi.AV_UNSPEC,
			MRKeySize:       MRKeySize,
			CQDataSize:      CQDataSize,
			CQCnt:           CQCnt,
			CntrCnt:         CntrCnt,
			EPCnt:           EPCnt,
			TxCtxCnt:        EPCnt,
			RxCtxCnt:        EPCnt,
			MaxEPTxCtx:      1,
			MaxEPRxCtx:      1,
			MaxEPStxCtx:     min(core.SharedCtxEPs, EPCnt),
			MaxEPSrxCtx:     min(core.SharedCtxEPs, EPCnt),
			MRIovLimit:      1,
			Caps:            domainCaps,
		},
		FabricAttr: &fi.FabricAttr{
			Name:        a.network,
			ProvName:    ProvName,
			ProvVersion: provVersion,
			APIVersion:  fi.APIVersion,
		},
	}
}

// ifAddr is one usable address of an interface: an entry of libfabric's
// ofi_get_list_of_addr (src/common.c).
type ifAddr struct {
	ifName   string
	ip       netip.Addr
	network  string // fabric name: "192.0.2.0/24", "127.0.0.1/32"
	speed    uint64 // Mb/s, as libfabric's ofi_ifaddr_get_speed
	loopback bool
}

// hostAddrs lists the addresses libfabric 1.17 would offer, in its order:
//
//   - interfaces that are up and running, not loopback, with IPv4 or IPv6
//     addresses; the fabric name is the address masked with its netmask,
//     "/", and the netmask's bit count (ofi_set_netmask_str);
//   - sorted by link speed (fastest first), then IPv4 before IPv6; within
//     that, each address is inserted before the first one that differs, so
//     equal ones come out in the reverse of the kernel's order
//     (slist_insert_before_first_match with ofi_compare_addr_entry);
//   - then, always, "lo" with 127.0.0.1 on fabric "127.0.0.1/32" and ::1 on
//     "::1/128" (ofi_insert_loopback_addr), whatever lo's real netmask.
//
// Only interfaces cfg serves count (cfg.Ifaces, FI_TCP_IFACE). libfabric
// drops a filter that names no interface present; fabricfs keeps it, so
// that the interface becomes a domain when it comes (Rescan).
func hostAddrs(cfg Config) ([]ifAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	// getifaddrs lists IPv4 addresses of every interface before IPv6 ones.
	var v4, v6 []ifAddr
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning == 0 || ifi.Flags&net.FlagLoopback != 0 || !cfg.serves(ifi.Name) {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		speed := linkSpeed(ifi.Name)
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ia, ok := netAddr(ifi.Name, ipn, speed)
			if !ok {
				continue
			}
			if ia.ip.Is4() {
				v4 = append(v4, ia)
			} else {
				v6 = append(v6, ia)
			}
		}
	}
	return sortAddrs(append(v4, v6...)), nil
}

// netAddr makes the entry of address ipn of interface name.
func netAddr(name string, ipn *net.IPNet, speed uint64) (ifAddr, bool) {
	ip, ok := netip.AddrFromSlice(ipn.IP)
	if !ok {
		return ifAddr{}, false
	}
	ip = ip.Unmap()
	mask := ipn.Mask
	if ip.Is4() && len(mask) == net.IPv6len {
		mask = mask[12:]
	}
	if (ip.Is4() && len(mask) != net.IPv4len) || (ip.Is6() && len(mask) != net.IPv6len) {
		return ifAddr{}, false
	}
	// Mask byte by byte and count the mask's bits, as ofi_mask_addr does.
	raw := ip.AsSlice()
	ones := 0
	for i := range raw {
		raw[i] &= mask[i]
		ones += bits.OnesCount8(mask[i])
	}
	masked, _ := netip.AddrFromSlice(raw)
	return ifAddr{
		ifName:  name,
		ip:      ip,
		network: masked.String() + "/" + strconv.Itoa(ones),
		speed:   speed,
	}, true
}

// sortAddrs orders addrs (in getifaddrs order) as libfabric does and
// appends the loopback entries.
func sortAddrs(addrs []ifAddr) []ifAddr {
	var out []ifAddr
	for _, a := range addrs {
		i := 0
		for i < len(out) && !insertBefore(a, out[i]) {
			i++
		}
		out = append(out[:i], append([]ifAddr{a}, out[i:]...)...)
	}
	return append(out,
		ifAddr{ifName: "lo", ip: netip.MustParseAddr("127.0.0.1"), network: "127.0.0.1/32", loopback: true},
		ifAddr{ifName: "lo", ip: netip.IPv6Loopback(), network: "::1/128", loopback: true})
}

// insertBefore is ofi_compare_addr_entry: whether a goes before cur.
func insertBefore(a, cur ifAddr) bool {
	if a.speed != cur.speed {
		return a.speed > cur.speed
	}
	if a.ip.Is4() != cur.ip.Is4() {
		return a.ip.Is4() // AF_INET < AF_INET6
	}
	return a.ip != cur.ip // memcmp != 0, either sign
}

// linkSpeed is ofi_ifaddr_get_speed: the link speed in Mb/s from ethtool
// (here its sysfs view), 100 when the driver does not know it, 0 when the
// interface has none.
func linkSpeed(name string) uint64 {
	b, err := os.ReadFile("/sys/class/net/" + name + "/speed")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	switch {
	case err != nil:
		return 0
	case v <= 0 || v == math.MaxUint32:
		return 100 // SPEED_UNKNOWN
	}
	return uint64(v)
}

// domain is one opened domain: an interface.
type domain struct {
	name string       // interface name; the zone of its link-local addresses
	cfg  Config       // the provider's
	eps  core.EPCount // endpoints and passive endpoints open
}

var _ core.ProviderDomain = (*domain)(nil)

// NewEndpoint creates an FI_EP_MSG endpoint; with req, the endpoint that
// will accept or reject that connection request.
func (d *domain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	if err := checkInfo(info); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, core.Errorf(fi.EINVAL, "tcp: endpoint without event handler")
	}
	txSize, rxSize, err := queueSizes(info)
	if err != nil {
		return nil, err
	}
	var cr *connReq
	if req != nil {
		var ok bool
		if cr, ok = req.(*connReq); !ok {
			return nil, core.Errorf(fi.EINVAL, "tcp: connection request of another provider")
		}
	}
	if err := d.hold(); err != nil {
		return nil, err
	}
	e := newEndpoint(d, info.Clone(), txSize, rxSize, ev)
	if cr != nil {
		conn, err := cr.take()
		if err != nil {
			d.release()
			return nil, err
		}
		if err := core.Take(ev, core.Connections, 1); err != nil {
			// Over the owner's limit: the request is refused.
			reject, _ := wire.AppendCM(nil, wire.CMReject, nil, nil)
			rejectConn(conn, reject, d.cfg.handshakeTimeout())
			cr.pep.dropped(conn)
			d.release()
			return nil, err
		}
		e.conn, e.fromReq, e.lst, e.charged = conn, true, cr.pep, true
		// The listener took the request with its key; the answer carries it.
		e.info.EPAttr.AuthKey = cr.info.EPAttr.AuthKey
	}
	return e, nil
}

// NewPassiveEndpoint creates a passive endpoint.
func (d *domain) NewPassiveEndpoint(info *fi.Info, ev core.PassiveEvents) (core.PassiveEndpoint, error) {
	if err := checkInfo(info); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, core.Errorf(fi.EINVAL, "tcp: passive endpoint without event handler")
	}
	if _, _, err := queueSizes(info); err != nil {
		return nil, err
	}
	if err := d.hold(); err != nil {
		return nil, err
	}
	return newPassiveEndpoint(d, info.Clone(), ev), nil
}

// Close releases the domain. Every endpoint must have been closed.
// EndpointOptions is core.EndpointOptions: an endpoint's and a passive
// endpoint's FI_OPT_CM_DATA_SIZE, the private data a connection message
// carries (TCPX_MAX_CM_DATA_SIZE).
func (d *domain) EndpointOptions(t fi.EPType, passive bool) []core.Option {
	if t != fi.EP_MSG {
		return nil
	}
	return []core.Option{{Name: "cm_data_size", Value: wire.MaxCMData}}
}

func (d *domain) Close() error {
	if n := d.eps.Open(); n > 0 {
		return core.Errorf(fi.EBUSY, "tcp: domain %s has %d endpoints open", d.name, n)
	}
	return nil
}

func (d *domain) hold() error {
	if !d.eps.Hold(EPCnt) {
		return core.Errorf(fi.ENOSPC, "tcp: domain %s has its %d endpoints (ep_cnt)", d.name, EPCnt)
	}
	return nil
}

func (d *domain) release() { d.eps.Release() }

// checkInfo accepts the fi_info of an FI_EP_MSG endpoint asking only for
// what the provider implements.
func checkInfo(info *fi.Info) error {
	switch {
	case info == nil || info.EPAttr == nil:
		return core.Errorf(fi.EINVAL, "tcp: endpoint without fi_info or ep_attr")
	case info.EPAttr.Type != fi.EP_MSG:
		return core.Errorf(fi.EOPNOTSUPP, "tcp: endpoint type %v not supported; FI_EP_MSG is", info.EPAttr.Type)
	case info.Caps&^(epCaps|domainCaps|layerCaps) != 0:
		return core.Errorf(fi.EOPNOTSUPP, "tcp: capabilities %v not supported", info.Caps&^(epCaps|domainCaps|layerCaps))
	}
	return nil
}

// queueSizes returns the endpoint's tx and rx sizes, defaults for zero.
func queueSizes(info *fi.Info) (tx, rx int, err error) {
	tx, rx = DefaultTxSize, DefaultRxSize
	if info.TxAttr != nil && info.TxAttr.Size != 0 {
		tx = int(min(info.TxAttr.Size, MaxQueueSize+1))
	}
	if info.RxAttr != nil && info.RxAttr.Size != 0 {
		rx = int(min(info.RxAttr.Size, MaxQueueSize+1))
	}
	if tx > MaxQueueSize || rx > MaxQueueSize {
		return 0, 0, core.Errorf(fi.EINVAL, "tcp: tx_size %d, rx_size %d: at most %d", tx, rx, MaxQueueSize)
	}
	return tx, rx, nil
}

// sockAddr turns a socket's address into an fi.Addr.
func sockAddr(a net.Addr) fi.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return fi.SockAddr(t.AddrPort())
	}
	return fi.Addr{}
}

// tcpAddr turns a into a socket address. A link-local IPv6 address without
// a zone gets the domain's interface.
func (d *domain) tcpAddr(a fi.Addr) (*net.TCPAddr, error) {
	ip := a.IP.Addr()
	switch {
	case !ip.IsValid():
		return nil, core.Errorf(fi.EINVAL, "tcp: no address")
	case a.Format == fi.SOCKADDR_IN && !ip.Unmap().Is4():
		return nil, core.Errorf(fi.EINVAL, "tcp: %v is not an IPv4 address", ip)
	case a.Format != fi.SOCKADDR_IN && a.Format != fi.SOCKADDR_IN6 && a.Format != fi.SOCKADDR && a.Format != fi.FORMAT_UNSPEC:
		return nil, core.Errorf(fi.EINVAL, "tcp: address format %v not supported", a.Format)
	}
	if ip.Is6() && ip.Zone() == "" && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		ip = ip.WithZone(d.name)
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, a.IP.Port())), nil
}
