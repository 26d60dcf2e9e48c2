package pptable

import (
	"strings"
	"testing"
	"time"
)

func TestSizeStr(t *testing.T) {
	for in, want := range map[uint64]string{0: "0", 1000: "1000", 1024: "1k", 1536: "1.5k", 100000: "97k", 6291456: "6m", 1 << 30: "1g"} {
		if got := SizeStr(in); got != want {
			t.Errorf("SizeStr(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCntStr(t *testing.T) {
	for in, want := range map[uint64]string{999: "999", 1000: "1k", 10000: "10k", 2500000: "2m", 3e9: "3b"} {
		if got := CntStr(in); got != want {
			t.Errorf("CntStr(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestRows checks whole lines: fi_pingpong's columns and widths, the #ack
// forms, no line without iterations, and C's inf.
func TestRows(t *testing.T) {
	var b strings.Builder
	tab := Table{W: &b}
	tab.Row(64, 10000, 10000, 150200*time.Microsecond)
	tab.Row(1<<20, 1000, 1000, 377320*time.Microsecond)
	tab.Row(1, 10, 12, time.Millisecond)
	tab.Row(1, 10, 7, time.Millisecond)
	tab.Row(1, 0, 0, time.Millisecond) // nothing: no iterations
	tab.Row(4, 10, 10, 0)              // too fast for the clock: C prints inf
	want := Header + "\n" +
		"64      10k     =10k     1.2m        0.15s      8.52       7.51       0.13\n" +
		"1m      1k      =1k      1.9g        0.38s   5558.02     188.66       0.01\n" +
		"1       10      -2       20          0.00s      0.02      50.00       0.02\n" +
		"1       10      +3       20          0.00s      0.02      50.00       0.02\n" +
		"4       10      =10      80          0.00s       inf       0.00        inf\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
