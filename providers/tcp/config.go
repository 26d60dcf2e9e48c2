package tcp

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Config is the provider's settings: what libfabric 1.17's tcp provider
// reads from FI_TCP_IFACE, FI_TCP_PORT_LOW_RANGE and
// FI_TCP_PORT_HIGH_RANGE, and the timeouts and keepalive of its
// connections. The zero Config is the defaults: every interface, the
// kernel's ephemeral ports, HandshakeTimeout and ConnReqTimeout, and
// keepalive as Go sets it (on; 15 s idle, 15 s between probes, 9 probes).
// The provider never reads the environment: the daemon's flags fill this.
type Config struct {
	// Ifaces are the names of the interfaces whose addresses become
	// domains, now and when they come up later; empty, every interface.
	// "lo" is always a domain, as libfabric always adds it.
	Ifaces []string
	// PortLow and PortHigh (inclusive) are the ports a passive endpoint
	// listening on port 0 picks from, at random and then in turn, failing
	// with EADDRNOTAVAIL when all are taken, as libfabric's
	// tcpx_bind_to_port_range does. PortHigh 0: the kernel picks from its
	// ephemeral range. Active endpoints bind as before (the kernel's
	// ephemeral port), as libfabric's do.
	PortLow, PortHigh uint16
	// ConnectTimeout bounds a connect's TCP handshake (SYN to
	// established); 0: the kernel's retries (net.ipv4.tcp_syn_retries),
	// as libfabric. The peer's accept or reject may take any time after.
	ConnectTimeout time.Duration
	// HandshakeTimeout and ConnReqTimeout replace the constants of those
	// names when not 0.
	HandshakeTimeout, ConnReqTimeout time.Duration
	// NoKeepAlive leaves SO_KEEPALIVE off on every connection, as
	// libfabric's tcp provider does; otherwise KeepAlive's Idle
	// (TCP_KEEPIDLE), Interval (TCP_KEEPINTVL) and Count (TCP_KEEPCNT)
	// apply, 0 meaning Go's default. KeepAlive.Enable is ignored.
	NoKeepAlive bool
	KeepAlive   net.KeepAliveConfig
}

// check reports a Config the provider cannot use, wrapping fi.EINVAL.
func (c Config) check() error {
	switch {
	case c.PortHigh != 0 && c.PortLow > c.PortHigh:
		return core.Errorf(fi.EINVAL, "tcp: port range %d-%d: low above high", c.PortLow, c.PortHigh)
	case c.PortHigh == 0 && c.PortLow != 0:
		return core.Errorf(fi.EINVAL, "tcp: port range %d-0: no high port", c.PortLow)
	case c.ConnectTimeout < 0 || c.HandshakeTimeout < 0 || c.ConnReqTimeout < 0:
		return core.Errorf(fi.EINVAL, "tcp: negative timeout")
	case !c.NoKeepAlive && (c.KeepAlive.Idle < 0 || c.KeepAlive.Interval < 0 || c.KeepAlive.Count < 0):
		return core.Errorf(fi.EINVAL, "tcp: negative keepalive setting")
	}
	for _, name := range c.Ifaces {
		if name == "" {
			return core.Errorf(fi.EINVAL, "tcp: empty interface name")
		}
	}
	return nil
}

// serves reports whether interface name's addresses become domains.
func (c Config) serves(name string) bool {
	return len(c.Ifaces) == 0 || slices.Contains(c.Ifaces, name)
}

func (c Config) handshakeTimeout() time.Duration {
	if c.HandshakeTimeout > 0 {
		return c.HandshakeTimeout
	}
	return handshakeTimeout
}

func (c Config) connReqTimeout() time.Duration {
	if c.ConnReqTimeout > 0 {
		return c.ConnReqTimeout
	}
	return connReqTimeout
}

// keepAlive is the keepalive of net.Dialer and net.ListenConfig: their
// KeepAlive field (negative: off) and KeepAliveConfig.
func (c Config) keepAlive() (time.Duration, net.KeepAliveConfig) {
	if c.NoKeepAlive {
		return -1, net.KeepAliveConfig{}
	}
	ka := c.KeepAlive
	ka.Enable = true
	return 0, ka
}

// dialer is the net.Dialer of a connect from laddr.
func (c Config) dialer(laddr *net.TCPAddr, control func(network, address string, rc syscall.RawConn) error) net.Dialer {
	period, ka := c.keepAlive()
	return net.Dialer{LocalAddr: laddr, Timeout: c.ConnectTimeout, KeepAlive: period, KeepAliveConfig: ka, Control: control}
}

// listen listens on ta; on port 0 with a port range, on a port of the
// range.
func (c Config) listen(ta *net.TCPAddr) (*net.TCPListener, error) {
	period, ka := c.keepAlive()
	lc := net.ListenConfig{KeepAlive: period, KeepAliveConfig: ka}
	if ta.Port != 0 || c.PortHigh == 0 {
		ln, err := lc.Listen(context.Background(), "tcp", ta.String())
		if err != nil {
			return nil, err
		}
		return ln.(*net.TCPListener), nil
	}
	n := int(c.PortHigh) - int(c.PortLow) + 1
	first := rand.IntN(n)
	for i := range n {
		a := *ta
		a.Port = int(c.PortLow) + (first+i)%n
		ln, err := lc.Listen(context.Background(), "tcp", a.String())
		if err == nil {
			return ln.(*net.TCPListener), nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, core.Errorf(fi.EADDRNOTAVAIL, "tcp: listen on %v: every port of %d-%d is in use", ta.IP, c.PortLow, c.PortHigh)
}
