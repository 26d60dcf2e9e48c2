package verbs

import (
	"net/netip"
	"sync"

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
	// probers are the buckets of the peers whose requests presented bad
	// keys, by the service port of their connections: cm refuses their
	// connections to that port for a while; ports maps the QPN of each
	// connected RC endpoint to that port (a qpPort), to find it
	// (probe.go).
	probers probers
	ports   sync.Map
}

// openDevice opens the device of address ip and starts its connection
// manager.
func openDevice(ip netip.Addr, port int, fault *ibv.Fault) (*device, error) {
	name := DeviceName(ip)
	d := &device{name: name, ip: ip, port: uint16(port)}
	dev, err := ibv.OpenDevice(ibv.DeviceConfig{Addr: ip, Port: port, Name: name, Fault: fault, RemoteAccessError: d.badKey})
	if err != nil {
		return nil, ibvError("opening device "+name, err)
	}
	d.dev, d.attr = dev, dev.Attr()
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
