package fi

// fi_getinfo(3)'s node, service and hints addresses, resolved to the
// requested source and destination.

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// An addrChoice is a requested address: the candidate IPs (a name may
// resolve to several, of both families) and a port. Each entry takes the
// first IP of its own family.
type addrChoice struct {
	ips  []netip.Addr
	port uint16
	desc string // as the application wrote it, for messages
	// name is a hints address or FI_ADDR_STR node that is a name, not an
	// IP address (fi_shm://NAME, fi_ns://NAME; Addr.IsName): only an
	// entry with named endpoints takes it.
	name *Addr
	// nsName is the name a node and service make for an entry with
	// named endpoints, as libfabric's shm makes it (smr_resolve_addr):
	// fi_ns://NODE:SERVICE, fi_ns://SERVICE, or fi_shm://NODE.
	nsName string
}

func (c *addrChoice) pick(v4, v6 bool) (netip.Addr, bool) {
	for _, ip := range c.ips {
		if ip.Is4() && v4 || ip.Is6() && v6 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// resolve sets q.src and q.dst from node, service, flags and the hints'
// addresses:
//
//   - FI_SOURCE: "the node and service parameters specify the local source
//     address"; hints->src_addr "will be ignored in hints if FI_SOURCE flag
//     is set", hints->dest_addr is used.
//   - otherwise node and service give the destination; hints->dest_addr
//     "will be ignored in hints unless the node and service parameters are
//     NULL", hints->src_addr is used.
func (q *getinfoQuery) resolve(ctx context.Context, node, service string, flags uint64) error {
	h := q.h
	source := flags&uint64(SOURCE) != 0
	if source && node == "" && service == "" {
		return getinfoErrorf(EINVAL, "FI_SOURCE needs a node or a service")
	}
	hintAddr := func(field string, a *Addr) (*addrChoice, error) {
		if a == nil {
			return nil, nil
		}
		ip := a.IP.Addr()
		switch {
		case a.IsName():
			n := *a
			return &addrChoice{name: &n, desc: a.Str}, nil
		case !ip.IsValid():
			return nil, getinfoErrorf(EINVAL, "hints %s has no IP address", field)
		case a.Format == SOCKADDR_IN && !ip.Is4(), a.Format == SOCKADDR_IN6 && !ip.Is6():
			return nil, getinfoErrorf(EINVAL, "hints %s %v does not have format %v", field, a.IP, a.Format)
		case a.Format != SOCKADDR_IN && a.Format != SOCKADDR_IN6 && a.Format != SOCKADDR &&
			a.Format != ADDR_STR && a.Format != FORMAT_UNSPEC:
			return nil, getinfoErrorf(EINVAL, "hints %s has format %v; only IP addresses are supported", field, a.Format)
		}
		return &addrChoice{ips: []netip.Addr{ip}, port: a.IP.Port(), desc: a.IP.String()}, nil
	}
	var err error
	if source {
		if q.src, err = q.nodeAddr(ctx, node, service, flags); err != nil {
			return err
		}
		q.dst, err = hintAddr("dest_addr", h.DestAddr)
		return err
	}
	if node != "" || service != "" {
		if q.dst, err = q.nodeAddr(ctx, node, service, flags); err != nil {
			return err
		}
	} else if q.dst, err = hintAddr("dest_addr", h.DestAddr); err != nil {
		return err
	}
	q.src, err = hintAddr("src_addr", h.SrcAddr)
	return err
}

// nodeAddr resolves node and service: an FI_ADDR_STR string
// ("fi_sockaddr_in://127.0.0.1:7000"), a numeric address, or (without
// FI_NUMERICHOST) a name the Go resolver looks up. An empty node is the
// wildcard address for a source, the loopback address for a destination,
// as getaddrinfo(3) gives them.
func (q *getinfoQuery) nodeAddr(ctx context.Context, node, service string, flags uint64) (*addrChoice, error) {
	if strings.Contains(node, "://") {
		// "Applications may also pass in an FI_ADDR_STR formatted address
		// ... as the node parameter. In such cases, the service parameter
		// must be NULL."
		if service != "" {
			return nil, getinfoErrorf(EINVAL, "node %q is an FI_ADDR_STR address: service %q must be empty", node, service)
		}
		a, err := ParseAddr(node)
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "node %q: %v", node, err)
		}
		if a.IsName() {
			return &addrChoice{name: &a, desc: node}, nil
		}
		return &addrChoice{ips: []netip.Addr{a.IP.Addr()}, port: a.IP.Port(), desc: node}, nil
	}
	c := &addrChoice{desc: node, nsName: ShmScheme + node}
	if service != "" {
		p, err := servicePort(ctx, service)
		if err != nil {
			return nil, err
		}
		c.port = p
		c.desc = net.JoinHostPort(node, service)
		c.nsName = NsScheme + service
		if node != "" {
			c.nsName = NsScheme + node + ":" + service
		}
	}
	switch {
	case node == "" && flags&uint64(SOURCE) != 0:
		c.ips = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	case node == "":
		c.ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	default:
		if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(node, "["), "]")); err == nil {
			c.ips = []netip.Addr{ip}
			break
		}
		if flags&uint64(NUMERICHOST) != 0 {
			// "FI_NUMERICHOST: Indicates that the node parameter is a
			// numeric string representation of a fabric address"
			return nil, getinfoErrorf(EINVAL, "node %q is not a numeric address (FI_NUMERICHOST)", node)
		}
		ips, err := lookupHost(ctx, node)
		if err != nil || len(ips) == 0 {
			return nil, getinfoErrorf(ENODATA, "cannot resolve node %q: %v", node, err)
		}
		for _, ip := range ips {
			c.ips = append(c.ips, ip.Unmap())
		}
	}
	return c, nil
}

// servicePort turns a service into a port: a number, or a name such as
// "http" looked up like getaddrinfo(3) does.
func servicePort(ctx context.Context, service string) (uint16, error) {
	if strings.Trim(service, "0123456789") == "" {
		p, err := strconv.ParseUint(service, 10, 16)
		if err != nil {
			return 0, getinfoErrorf(EINVAL, "service %q is not a port number", service)
		}
		return uint16(p), nil
	}
	p, err := lookupPort(ctx, service)
	if err != nil || p < 0 || p > 65535 {
		return 0, getinfoErrorf(ENODATA, "unknown service %q", service)
	}
	return uint16(p), nil
}

// Name, service and route look-ups; tests replace them. Names and
// services go to the Go resolver, which gives up when ctx ends: the request
// of a shell command that is interrupted.
var (
	lookupHost = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	lookupPort = func(ctx context.Context, service string) (int, error) {
		return net.DefaultResolver.LookupPort(ctx, "tcp", service)
	}
	// getinfoRoute returns the local address the kernel would send from
	// to reach dst, as a connected UDP socket shows it (no packet is sent).
	getinfoRoute = func(dst netip.Addr) (netip.Addr, bool) {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		if err != nil {
			return netip.Addr{}, false
		}
		defer c.Close()
		la, ok := c.LocalAddr().(*net.UDPAddr)
		if !ok {
			return netip.Addr{}, false
		}
		ip := la.AddrPort().Addr()
		if dst.Is4() {
			ip = ip.Unmap()
		}
		return ip, true
	}
)

// route is getinfoRoute, remembered for the query.
func (q *getinfoQuery) route(dst netip.Addr) (netip.Addr, bool) {
	if src, ok := q.routes[dst]; ok {
		return src, src.IsValid()
	}
	src, ok := getinfoRoute(dst)
	if !ok {
		src = netip.Addr{}
	}
	if q.routes == nil {
		q.routes = map[netip.Addr]netip.Addr{}
	}
	q.routes[dst] = src
	return src, ok
}
