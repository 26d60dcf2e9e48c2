package verbs

import (
	"net/netip"
	"testing"
	"time"
)

// TestProbers: a peer's bad keys refuse its connections to that port for
// probePenalty, doubling with each strike up to probeMaxPenalty; another
// port or peer is not refused; the record holds at most maxProbers pairs.
func TestProbers(t *testing.T) {
	var p probers
	peer := netip.MustParseAddr("192.0.2.1")
	var last time.Duration
	for i := range 12 {
		p.strike(peer, 7)
		until, refused := p.refused(peer, 7)
		left := time.Until(until)
		want := min(probePenalty<<i, probeMaxPenalty)
		if !refused || left > want || left < want-time.Second {
			t.Fatalf("strike %d: refused %v for %v, want %v", i+1, refused, left, want)
		}
		if left < last-time.Second {
			t.Fatalf("strike %d: penalty %v after %v", i+1, left, last)
		}
		last = left
	}
	if _, refused := p.refused(peer, 8); refused {
		t.Error("another port of the device is refused")
	}
	if _, refused := p.refused(netip.MustParseAddr("192.0.2.2"), 7); refused {
		t.Error("another peer is refused")
	}
	if _, refused := p.refused(netip.MustParseAddr("::ffff:192.0.2.1"), 7); !refused {
		t.Error("the peer's IPv4-mapped address is not refused")
	}
	for i := range maxProbers + 10 {
		p.strike(peer, uint16(100+i))
	}
	if len(p.m) > maxProbers {
		t.Errorf("%d pairs remembered, at most %d", len(p.m), maxProbers)
	}
}
