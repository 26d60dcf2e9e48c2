package verbs

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// ProvName is fabric_attr.prov_name.
const ProvName = "verbs"

// Config says which devices the provider opens.
type Config struct {
	// Addrs are the devices' addresses, one device each. Nil means the
	// host's interface addresses (up, IPv4 and IPv6 but link-local ones);
	// then a device that cannot be opened (its port is taken) is left out
	// and logged, where a listed address that fails fails New.
	Addrs []netip.Addr
	// Port is the RoCE UDP port every device of the fabric receives on;
	// 0 means 4791 (roce.Port). Devices address each other by IP and
	// this port, so all the devices of one fabric must use the same.
	Port int
	// Logf reports devices left out; nil logs with log/slog, at level
	// warn.
	Logf func(format string, a ...any)

	fault *ibv.Fault // the devices' transmit faults, for tests
}

// Provider is the verbs provider: one domain per device for FI_EP_MSG
// (and, through rxm.Wrap, FI_EP_RDM), named like the device, and one
// "<device>-dgram" domain per device for FI_EP_DGRAM, as libfabric's
// verbs provider names them.
type Provider struct {
	cfg Config // with Port and Logf set

	mu     sync.Mutex
	devs   []*device           // under mu
	infos  []*fi.Info          // under mu
	tried  map[netip.Addr]bool // every address a device was opened for or failed on; under mu
	closed bool                // under mu
}

var (
	_ core.Provider  = (*Provider)(nil)
	_ core.Rescanner = (*Provider)(nil)
)

// New opens the devices of cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(format string, a ...any) { slog.Warn(fmt.Sprintf(format, a...)) }
	}
	if cfg.Port == 0 {
		cfg.Port = roce.Port
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, core.Errorf(fi.EINVAL, "verbs: RoCE port %d is not a UDP port", cfg.Port)
	}
	p := &Provider{cfg: cfg, tried: map[netip.Addr]bool{}}
	if cfg.Addrs == nil {
		if err := p.Rescan(); err != nil {
			return nil, err
		}
		return p, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range cfg.Addrs {
		if err := p.openLocked(a); err != nil {
			p.closeLocked()
			return nil, err
		}
	}
	return p, nil
}

// Rescan opens a device for each address of the host's interfaces that has
// none yet (core.Rescanner), when the devices are the host's (Config.Addrs
// nil); a device that cannot be opened is logged and not tried again. A
// device whose address went away stays.
func (p *Provider) Rescan() error {
	if p.cfg.Addrs != nil {
		return nil
	}
	addrs, err := hostAddrs()
	if err != nil {
		return core.Errorf(fi.ENODEV, "verbs: listing network interfaces: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		if err := p.openLocked(a); err != nil {
			p.cfg.Logf("verbs: no device for %v: %v", a, err)
		}
	}
	return nil
}

// openLocked opens the device of address a unless one was opened or tried
// for it before, and adds its entries.
func (p *Provider) openLocked(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if p.tried[a] || p.closed {
		return nil
	}
	p.tried[a] = true
	d, err := openDevice(a, p.cfg.Port, p.cfg.fault)
	if err != nil {
		return err
	}
	p.devs = append(p.devs, d)
	p.infos = append(p.infos, msgInfo(d), dgramInfo(d))
	return nil
}

// Name is "verbs".
func (p *Provider) Name() string { return ProvName }

// Infos returns a copy of every fi_info entry: per device, FI_EP_MSG,
// then FI_EP_DGRAM, as libfabric's verbs provider lists them.
func (p *Provider) Infos() []*fi.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fi.CloneInfos(p.infos)
}

// OpenDomain opens the domain called name: a device's, or its "-dgram"
// one.
func (p *Provider) OpenDomain(name string) (core.ProviderDomain, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.devs {
		switch name {
		case d.name:
			return newDomain(d, name, false)
		case d.name + dgramSuffix:
			return newDomain(d, name, true)
		}
	}
	return nil, core.Errorf(fi.ENODEV, "verbs: no domain %q", name)
}

// Close closes every device: their connection managers stop and their
// sockets close. Domains must be closed first.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	return nil
}

func (p *Provider) closeLocked() {
	if p.closed {
		return
	}
	p.closed = true
	for _, d := range p.devs {
		d.close()
	}
}

// Device returns the ibv device of a domain name, for tests and the bench
// (its Stats).
func (p *Provider) Device(name string) (*ibv.Device, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.devs {
		if name == d.name || name == d.name+dgramSuffix {
			return d.dev, true
		}
	}
	return nil, false
}

// DeviceName is the name fabricfs gives the device of address a:
// "rxe_" and the address with '.' and ':' as '_' ("rxe_127_0_0_1"),
// after Linux's soft-RoCE devices.
func DeviceName(a netip.Addr) string {
	return "rxe_" + strings.NewReplacer(".", "_", ":", "_").Replace(a.Unmap().WithZone("").String())
}

// hostAddrs lists the addresses of the host's interfaces that are up,
// loopback included, IPv4 ones first; link-local IPv6 addresses, which
// need a zone, are left out.
func hostAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var v4, v6 []netip.Addr
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			switch {
			case ip.Is4():
				v4 = append(v4, ip)
			case !ip.IsLinkLocalUnicast():
				v6 = append(v6, ip)
			}
		}
	}
	return append(v4, v6...), nil
}

// ibvError wraps an error of the device with its libfabric code: the
// errno it carries (ENOMEM, a full queue, is fi.EAGAIN), else fi.EIO.
func ibvError(what string, err error) error {
	code := core.Code(err)
	switch code {
	case fi.EOTHER:
		code = fi.EIO
	case fi.ENOMEM:
		code = fi.EAGAIN
	}
	return core.Errorf(code, "verbs: %s: %v", what, err)
}

// fmtAddr prints a device address for messages.
func fmtAddr(a netip.Addr, port uint16) string { return fmt.Sprint(netip.AddrPortFrom(a, port)) }
