package roce

import (
	"testing"
	"time"
)

func TestPSNAdd(t *testing.T) {
	for _, tt := range []struct {
		psn  uint32
		n    int
		want uint32
	}{
		{0, 1, 1},
		{0xffffff, 1, 0},
		{0xfffffe, 5, 3},
		{0, -1, 0xffffff},
		{5, -10, 0xfffffb},
		{0x123456, 1 << 24, 0x123456},
		{0x123456, -(1 << 24), 0x123456},
	} {
		if got := PSNAdd(tt.psn, tt.n); got != tt.want {
			t.Errorf("PSNAdd(%#x, %d) = %#x, want %#x", tt.psn, tt.n, got, tt.want)
		}
	}
}

func TestPSNCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b uint32
		diff int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xffffff, 1}, // wrapped: 0 follows 0xffffff
		{0xffffff, 0, -1},
		{0x7fffff, 0, 0x7fffff},
		{0x800000, 0, -0x800000}, // half the space away counts as before
		{0x100, 0xffff00, 0x200},
	} {
		if got := PSNDiff(tt.a, tt.b); got != tt.diff {
			t.Errorf("PSNDiff(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.diff)
		}
		want := 0
		if tt.diff < 0 {
			want = -1
		} else if tt.diff > 0 {
			want = 1
		}
		if got := PSNCompare(tt.a, tt.b); got != want {
			t.Errorf("PSNCompare(%#x, %#x) = %d, want %d", tt.a, tt.b, got, want)
		}
	}
}

func TestRNRTimer(t *testing.T) {
	for _, tt := range []struct {
		code uint8
		want time.Duration
	}{
		{0, 655360 * time.Microsecond},
		{1, 10 * time.Microsecond},
		{2, 20 * time.Microsecond},
		{5, 60 * time.Microsecond},
		{12, 640 * time.Microsecond}, // rc_pingpong's min_rnr_timer
		{14, 1280 * time.Microsecond},
		{20, 10240 * time.Microsecond},
		{31, 491520 * time.Microsecond},
	} {
		if got, ok := RNRTimer(tt.code); got != tt.want || !ok {
			t.Errorf("RNRTimer(%d) = %v, %v; want %v", tt.code, got, ok, tt.want)
		}
	}
	// Codes 1..31 wait longer each step; 0 is the longest.
	for c := uint8(2); c < 32; c++ {
		a, _ := RNRTimer(c - 1)
		b, _ := RNRTimer(c)
		if b <= a {
			t.Errorf("RNRTimer(%d) = %v, not above RNRTimer(%d) = %v", c, b, c-1, a)
		}
	}
	if d, ok := RNRTimer(32); ok {
		t.Errorf("RNRTimer(32) = %v, true", d)
	}
}

func TestRetransmitTimeout(t *testing.T) {
	for _, tt := range []struct {
		timeout uint8
		want    time.Duration
	}{
		{0, 0},
		{1, 8192 * time.Nanosecond},
		{14, 67108864 * time.Nanosecond}, // rc_pingpong's default: 4.096 us * 16384
		{31, 4096 << 31 * time.Nanosecond},
	} {
		if got, ok := RetransmitTimeout(tt.timeout); got != tt.want || !ok {
			t.Errorf("RetransmitTimeout(%d) = %v, %v; want %v", tt.timeout, got, ok, tt.want)
		}
	}
	if d, ok := RetransmitTimeout(32); ok {
		t.Errorf("RetransmitTimeout(32) = %v, true", d)
	}
}

func TestSyndrome(t *testing.T) {
	for _, tt := range []struct {
		s     Syndrome
		kind  Syndrome
		value uint8
		valid bool
		str   string
	}{
		{AckSyndrome(0), AETHAck, 0, true, "ACK credits=0"},
		{AckSyndrome(30), AETHAck, 30, true, "ACK credits=30"},
		{AETHAckUnlimited, AETHAck, 31, true, "ACK credits=unlimited"},
		{RNRNAKSyndrome(12), AETHRNRNAK, 12, true, "RNR NAK timer=12"},
		{AETHNAKPSNSeqError, AETHNAK, 0, true, "NAK PSN sequence error"},
		{AETHNAKInvalidReq, AETHNAK, 1, true, "NAK invalid request"},
		{AETHNAKRemAccErr, AETHNAK, 2, true, "NAK remote access error"},
		{AETHNAKRemOpErr, AETHNAK, 3, true, "NAK remote operational error"},
		{AETHNAKInvRDReq, AETHNAK, 4, true, "NAK invalid RD request"},
		{0x65, AETHNAK, 5, false, "syndrome(0x65)"},
		{0x40, AETHRsvd, 0, false, "syndrome(0x40)"},
		{0x80, 0x80, 0, false, "syndrome(0x80)"},
		{0xe0, 0xe0, 0, false, "syndrome(0xe0)"},
	} {
		if tt.s.Kind() != tt.kind || tt.s.Value() != tt.value || tt.s.Valid() != tt.valid || tt.s.String() != tt.str {
			t.Errorf("Syndrome(%#x): kind %#x value %d valid %v %q; want %#x %d %v %q", uint8(tt.s),
				uint8(tt.s.Kind()), tt.s.Value(), tt.s.Valid(), tt.s.String(), uint8(tt.kind), tt.value, tt.valid, tt.str)
		}
	}
	if s := AckSyndrome(0xff); s != AETHAckUnlimited {
		t.Errorf("AckSyndrome(0xff) = %#x, want the value masked to 5 bits", uint8(s))
	}
}
