package verbs

import (
	"net/netip"
	"sync"
	"time"
)

// Peers that present bad keys. A memory key is 32 random bits, and a
// request with a wrong one puts the responder's QP in error, ending the
// connection, as RC does; so a peer guessing keys needs a connection per
// guess. The device charges each bad key to a token bucket of the peer's
// IP and the service port the connection was made to: for a connection
// the device accepted, its own listener's port (the connection manager
// then refuses the peer's requests to that port, REJ with reason
// IB_CM_REJ_NO_RESOURCES); for one it made, the peer's listener's port
// (the device's endpoints then get FI_ECONNREFUSED connecting to it: a
// prober acting as the server is held as well). A bucket holds
// probeBurst bad keys and refills one each probeRefill; while it holds
// less than one, connections are refused. An application that presents
// a bad key by mistake loses only that connection; a prober is held to
// one guess per probeRefill, a 32-bit key space to a century per region.
//
// Nothing in a connection request tells the users of one host apart: the
// source port and QP number are new for each connection. So a prober's
// sustained guesses refuse the other clients at its IP (other users of
// its host) at that port too, until its bucket refills; the other ports
// of the device still take their connections.
const (
	probeBurst  = 8
	probeRefill = time.Second
)

// maxProbers bounds the buckets a device keeps; past it, the fullest is
// forgotten (a full bucket is as good as none).
const maxProbers = 4096

// probers is a device's record of peers that presented bad keys: a
// bucket for each (peer IP, service port, direction).
type probers struct {
	mu sync.Mutex
	m  map[probed]*bucket
}

// probed names a bucket: the peer's IP, and the service port the
// connections went to, the device's own (out false) or the peer's (out
// true: connections the device made).
type probed struct {
	peer netip.Addr
	port uint16
	out  bool
}

// bucket is the bad keys a probed may still present: tokens, as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// level is b's tokens at now.
func (b *bucket) level(now time.Time) float64 {
	return min(probeBurst, b.tokens+float64(now.Sub(b.at))/float64(probeRefill))
}

// qpPort is what the device records for a connected RC QP: the service
// port its connection went to, and whether the device made it (then the
// port is the peer's).
type qpPort struct {
	port uint16
	out  bool
}

// badKey is the device's RemoteAccessError: the peer of the RC QP qpn
// presented a bad key.
func (d *device) badKey(peer netip.Addr, qpn uint32) {
	v, _ := d.ports.Load(qpn)
	if q, ok := v.(qpPort); ok {
		d.probers.strike(probed{peer, q.port, q.out}, time.Now())
	}
}

// strike charges a bad key to k at now.
func (p *probers) strike(k probed, now time.Time) {
	k.peer = k.peer.Unmap()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[probed]*bucket{}
	}
	b := p.m[k]
	if b == nil {
		if len(p.m) >= maxProbers {
			p.evictLocked(now)
		}
		b = &bucket{tokens: probeBurst, at: now}
		p.m[k] = b
	}
	b.tokens, b.at = max(b.level(now)-1, 0), now
}

// evictLocked forgets the full buckets, or if none is, the fullest.
func (p *probers) evictLocked(now time.Time) {
	var fullest probed
	most := -1.0
	for k, b := range p.m {
		if l := b.level(now); l >= probeBurst {
			delete(p.m, k)
		} else if l > most {
			fullest, most = k, l
		}
	}
	if len(p.m) >= maxProbers {
		delete(p.m, fullest)
	}
}

// refused reports whether connections of k are refused at now, and until
// when.
func (p *probers) refused(k probed, now time.Time) (time.Time, bool) {
	k.peer = k.peer.Unmap()
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.m[k]
	if b == nil {
		return time.Time{}, false
	}
	l := b.level(now)
	if l >= 1 {
		return time.Time{}, false
	}
	return now.Add(time.Duration((1 - l) * float64(probeRefill))), true
}
