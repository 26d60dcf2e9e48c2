package tcp

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// SockoptOps is the name of a connected endpoint's socket options set,
// ep/ID/ops/tcp_sockopt_v1/ (core.OpsOpener): TCP_NODELAY, SO_SNDBUF and
// SO_RCVBUF of its socket, read with getsockopt and written with
// setsockopt, each file named after its option.
const SockoptOps = "tcp_sockopt_v1"

// Socket buffer sizes an application may ask for: the kernel's own
// minimum and the size the daemon's sockets get at most (the kernel caps
// a request at net.core.[rw]mem_max, and reports twice what it keeps).
const (
	minSockBuf = 4096
	maxSockBuf = 16 << 20
)

// sockopts are the options of tcp_sockopt_v1: level, option, and the
// values a write may give.
var sockopts = []struct {
	name       string
	level, opt int
	min, max   int
}{
	{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 0, 1},
	{"SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, minSockBuf, maxSockBuf},
	{"SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, minSockBuf, maxSockBuf},
}

// Ops is core.OpsOpener: the socket options set. A value reads empty
// while the endpoint has no socket (before it connected, after it
// closed), where a write fails with FI_EOPBADSTATE.
func (e *endpoint) Ops() []core.OpsSet {
	vals := make([]core.Attr, len(sockopts))
	for i, o := range sockopts {
		vals[i] = core.Attr{
			Name: o.name,
			Get: func() string {
				e.mu.Lock() // keeps fd open
				defer e.mu.Unlock()
				if e.fd < 0 {
					return ""
				}
				v, err := unix.GetsockoptInt(e.fd, o.level, o.opt)
				if err != nil {
					return ""
				}
				return strconv.Itoa(v)
			},
			Set: func(s string) error {
				v, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || v < o.min || v > o.max {
					return core.Errorf(fi.EINVAL, "tcp: %s takes an integer from %d to %d, not %q", o.name, o.min, o.max, strings.TrimSpace(s))
				}
				e.mu.Lock()
				defer e.mu.Unlock()
				if e.fd < 0 {
					return core.Errorf(fi.EOPBADSTATE, "tcp: %s: the endpoint has no socket", o.name)
				}
				if err := unix.SetsockoptInt(e.fd, o.level, o.opt, v); err != nil {
					return core.Errorf(fi.EIO, "tcp: %s %d: %v", o.name, v, err)
				}
				return nil
			},
		}
	}
	return []core.OpsSet{{Name: SockoptOps, Values: vals}}
}

var _ core.OpsOpener = (*endpoint)(nil)
