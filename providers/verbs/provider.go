package verbs

import (
	"fmt"
	"log"
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
	// Logf reports devices left out; nil logs with the log package.
	Logf func(format string, a ...any)

	fault *ibv.Fault // the devices' transmit faults, for tests
}

// Provider is the verbs provider: one domain per device for FI_EP_MSG
// (and, through rxm.Wrap, FI_EP_RDM), named like the device, and one
// "<device>-dgram" domain per device for FI_EP_DGRAM, as libfabric's
// verbs provider names them.
type Provider struct {
	devs  []*device
	infos []*fi.Info

	closeOnce sync.Once
}

var _ core.Provider = (*Provider)(nil)

// New opens the devices of cfg.
func New(cfg Config) (*Provider, error) {
	logf := cfg.Logf
	if logf == nil {
		logf = log.Printf
	}
	port := cfg.Port
	if port == 0 {
		port = roce.Port
	}
	if port < 1 || port > 65535 {
		return nil, core.Errorf(fi.EINVAL, "verbs: RoCE port %d is not a UDP port", port)
	}
	addrs, explicit := cfg.Addrs, cfg.Addrs != nil
	if !explicit {
		var err error
		if addrs, err = hostAddrs(); err != nil {
			return nil, core.Errorf(fi.ENODEV, "verbs: listing network interfaces: %v", err)
		}
	}
	p := &Provider{}
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if seen[a] {
			continue
		}
		seen[a] = true
		d, err := openDevice(a, port, cfg.fault)
		if err != nil {
			if explicit {
				p.Close()
				return nil, err
			}
			logf("verbs: no device for %v: %v", a, err)
			continue
		}
		p.devs = append(p.devs, d)
		p.infos = append(p.infos, msgInfo(d), dgramInfo(d))
	}
	return p, nil
}

// Name is "verbs".
func (p *Provider) Name() string { return ProvName }

// Infos returns a copy of every fi_info entry: per device, FI_EP_MSG,
// then FI_EP_DGRAM, as libfabric's verbs provider lists them.
func (p *Provider) Infos() []*fi.Info {
	return fi.CloneInfos(p.infos)
}

// OpenDomain opens the domain called name: a device's, or its "-dgram"
// one.
func (p *Provider) OpenDomain(name string) (core.ProviderDomain, error) {
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
	p.closeOnce.Do(func() {
		for _, d := range p.devs {
			d.close()
		}
	})
	return nil
}

// Device returns the ibv device of a domain name, for tests and the bench
// (its Stats).
func (p *Provider) Device(name string) (*ibv.Device, bool) {
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
