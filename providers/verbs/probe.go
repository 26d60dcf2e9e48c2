package verbs

import (
	"net/netip"
	"sync"
	"time"
)

// Peers that present bad keys. A memory key is 32 random bits, and a
// request with a wrong one puts the responder's QP in error, ending the
// connection, as RC does; so a peer guessing keys needs a connection per
// guess. The device also remembers each peer device (by IP) whose
// request it refused with a remote access error, and the connection
// manager rejects that peer's connection requests (REJ, reason
// IB_CM_REJ_NO_RESOURCES) for a while: probePenalty after the first
// bad key, twice as long after each further one, up to probeMaxPenalty.
// A peer forgets its strikes after probeForget without a bad key. An
// application that presents a bad key by mistake loses its connection
// and waits at most probePenalty to reconnect; a prober is held to one
// guess per probeMaxPenalty, a 32-bit key space to decades per region.
var (
	probePenalty    = 100 * time.Millisecond
	probeMaxPenalty = 10 * time.Second
	probeForget     = 10 * time.Minute
)

// maxProbers bounds the peers a device remembers; past it, the one whose
// penalty ended first is forgotten.
const maxProbers = 4096

// probers is a device's record of peers that presented bad keys.
type probers struct {
	mu sync.Mutex
	m  map[netip.Addr]*prober
}

type prober struct {
	strikes int
	until   time.Time // connection requests are refused until then
}

// strike records a bad key from peer.
func (p *probers) strike(peer netip.Addr) {
	peer = peer.Unmap()
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[netip.Addr]*prober{}
	}
	pr := p.m[peer]
	if pr != nil && now.Sub(pr.until) > probeForget {
		pr = nil
	}
	if pr == nil {
		if len(p.m) >= maxProbers {
			p.evictLocked(now)
		}
		pr = &prober{}
		p.m[peer] = pr
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
	var first netip.Addr
	for a, pr := range p.m {
		if now.Sub(pr.until) > probeForget {
			delete(p.m, a)
		} else if !first.IsValid() || pr.until.Before(p.m[first].until) {
			first = a
		}
	}
	if len(p.m) >= maxProbers {
		delete(p.m, first)
	}
}

// refused reports whether connection requests from peer are refused now,
// and until when.
func (p *probers) refused(peer netip.Addr) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.m[peer.Unmap()]
	if pr == nil || !time.Now().Before(pr.until) {
		return time.Time{}, false
	}
	return pr.until, true
}
