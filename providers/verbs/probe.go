package verbs

import (
	"net/netip"
	"sync"
	"time"
)

// Peers that present bad keys. A memory key is 32 random bits, and a
// request with a wrong one puts the responder's QP in error, ending the
// connection, as RC does; so a peer guessing keys needs a connection per
// guess. The device also remembers, for each of its service ports, each
// peer device (by IP) whose request on a connection of that port it
// refused with a remote access error, and the connection manager rejects
// that peer's connection requests to that port (REJ, reason
// IB_CM_REJ_NO_RESOURCES) for a while: probePenalty after the first bad
// key, twice as long after each further one, up to probeMaxPenalty. The
// strikes are forgotten probeForget after the last penalty ended. An
// application that presents a bad key by mistake loses its connection
// and waits probePenalty to reconnect; a prober is held to one guess per
// probeMaxPenalty, a 32-bit key space to decades per region. The other
// ports of the device (other users' listeners) still take the peer's
// connections.
const (
	probePenalty    = 100 * time.Millisecond
	probeMaxPenalty = 10 * time.Second
	probeForget     = 10 * time.Minute
)

// maxProbers bounds the (peer, port) pairs a device remembers; past it,
// the one whose penalty ends first is forgotten.
const maxProbers = 4096

// probers is a device's record of peers that presented bad keys, by the
// peer's IP and the service port of the connection.
type probers struct {
	mu sync.Mutex
	m  map[probed]*prober
}

type probed struct {
	peer netip.Addr
	port uint16
}

type prober struct {
	strikes int
	until   time.Time // connection requests are refused until then
}

// badKey is the device's RemoteAccessError: the peer of the RC QP qpn
// presented a bad key.
func (d *device) badKey(peer netip.Addr, qpn uint32) {
	port, _ := d.ports.Load(qpn)
	p, _ := port.(uint16)
	d.probers.strike(peer, p)
}

// strike records a bad key from peer on a connection of port.
func (p *probers) strike(peer netip.Addr, port uint16) {
	k := probed{peer.Unmap(), port}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[probed]*prober{}
	}
	pr := p.m[k]
	if pr != nil && now.Sub(pr.until) > probeForget {
		pr = nil
	}
	if pr == nil {
		if len(p.m) >= maxProbers {
			p.evictLocked(now)
		}
		pr = &prober{}
		p.m[k] = pr
	}
	pr.strikes++
	penalty := probeMaxPenalty
	if pr.strikes < 32 {
		penalty = min(probePenalty<<(pr.strikes-1), probeMaxPenalty)
	}
	pr.until = now.Add(penalty)
}

// evictLocked forgets the peers whose strikes are forgotten, or if none
// is, the one whose penalty ended first.
func (p *probers) evictLocked(now time.Time) {
	var first *probed
	for k, pr := range p.m {
		if now.Sub(pr.until) > probeForget {
			delete(p.m, k)
		} else if first == nil || pr.until.Before(p.m[*first].until) {
			first = &k
		}
	}
	if len(p.m) >= maxProbers && first != nil {
		delete(p.m, *first)
	}
}

// refused reports whether connection requests from peer to port are
// refused now, and until when.
func (p *probers) refused(peer netip.Addr, port uint16) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.m[probed{peer.Unmap(), port}]
	if pr == nil || !time.Now().Before(pr.until) {
		return time.Time{}, false
	}
	return pr.until, true
}
