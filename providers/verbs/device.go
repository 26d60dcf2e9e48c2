package verbs

import (
	"net/netip"

	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// device is one opened ibv device and its connection manager, shared by
// the device's two domains.
type device struct {
	name string
	ip   netip.Addr
	port uint16 // the RoCE UDP port of the fabric
	dev  *ibv.Device
	attr ibv.DeviceAttr
	cm   *agent
	// probers are the peers whose requests presented bad keys, whose
	// connection requests cm refuses for a while (probe.go).
	probers *probers
}

// openDevice opens the device of address ip and starts its connection
// manager.
func openDevice(ip netip.Addr, port int, fault *ibv.Fault) (*device, error) {
	name := DeviceName(ip)
	pr := &probers{}
	dev, err := ibv.OpenDevice(ibv.DeviceConfig{Addr: ip, Port: port, Name: name, Fault: fault, RemoteAccessError: pr.strike})
	if err != nil {
		return nil, ibvError("opening device "+name, err)
	}
	d := &device{name: name, ip: ip, port: uint16(port), dev: dev, attr: dev.Attr(), probers: pr}
	if d.cm, err = newAgent(d); err != nil {
		dev.Close()
		return nil, err
	}
	return d, nil
}

// addr is the device's address with a service port: an endpoint's name.
func (d *device) addr(port uint16) netip.AddrPort { return netip.AddrPortFrom(d.ip, port) }

// peer is the UDP address of the device with IP ip: every device of the
// fabric receives on the same port.
func (d *device) peer(ip netip.Addr) netip.AddrPort {
	return netip.AddrPortFrom(ip.Unmap().WithZone(""), d.port)
}

func (d *device) close() {
	d.cm.close()
	d.dev.Close()
}
