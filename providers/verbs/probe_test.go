package verbs

import (
	"net/netip"
	"testing"
	"time"
)

// TestProbers: bad keys are charged to a bucket of (peer, port,
// direction) that holds probeBurst of them: connections are refused only
// once they are spent, then for probeRefill per bad key; another port,
// peer or direction is not refused; the record holds at most maxProbers
// buckets.
func TestProbers(t *testing.T) {
	var p probers
	peer := netip.MustParseAddr("192.0.2.1")
	k := probed{peer, 7, false}
	now := time.Now()
	for i := 1; i < probeBurst; i++ {
		p.strike(k, now)
		if _, refused := p.refused(k, now); refused {
			t.Fatalf("refused after %d bad keys at once; the burst is %d", i, probeBurst)
		}
	}
	p.strike(k, now)
	until, refused := p.refused(k, now)
	if !refused || until.Sub(now) != probeRefill {
		t.Fatalf("after %d bad keys at once: refused %v until %v, want for %v", probeBurst, refused, until.Sub(now), probeRefill)
	}
	// sustained: one more bad key each refill, and refused in between
	for i := 0; i < 20; i++ {
		now = now.Add(probeRefill)
		if _, refused := p.refused(k, now); refused {
			t.Fatalf("refill %d: still refused", i)
		}
		p.strike(k, now)
		if _, refused := p.refused(k, now.Add(probeRefill*9/10)); !refused {
			t.Fatalf("refill %d: a second bad key within the refill", i)
		}
	}
	if _, refused := p.refused(probed{peer, 8, false}, now); refused {
		t.Error("another port of the device is refused")
	}
	if _, refused := p.refused(probed{peer, 7, true}, now); refused {
		t.Error("connections to the peer's port 7 are refused")
	}
	if _, refused := p.refused(probed{netip.MustParseAddr("192.0.2.2"), 7, false}, now); refused {
		t.Error("another peer is refused")
	}
	if _, refused := p.refused(probed{netip.MustParseAddr("::ffff:192.0.2.1"), 7, false}, now); !refused {
		t.Error("the peer's IPv4-mapped address is not refused")
	}
	for i := range maxProbers + 10 {
		p.strike(probed{peer, uint16(100 + i), false}, now)
	}
	if len(p.m) > maxProbers {
		t.Errorf("%d buckets remembered, at most %d", len(p.m), maxProbers)
	}
	if _, refused := p.refused(k, now); !refused {
		t.Error("the spent bucket was forgotten before the full ones")
	}
}
