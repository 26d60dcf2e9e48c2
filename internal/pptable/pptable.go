// Package pptable prints fi_pingpong's result table, as fabtests'
// util/pingpong.c prints it (show_perf, with size_str and cnt_str): a
// header, then one line per message size. Both of fabricfs's ping-pong
// programs print it, tests/pingpong (ffpingpong) and scripts/ringpong, so
// that their output reads, and parses, like real fi_pingpong's.
//
//	bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
//	64      10k     =10k     1.2m        0.15s      8.52       7.51       0.13
//
// Each iteration is two transfers (a round trip): MB/sec counts the bytes
// of both directions in 10^6 bytes per second, usec/xfer is half a round
// trip and Mxfers/sec its inverse.
package pptable

import (
	"fmt"
	"io"
	"math"
	"time"
)

// Table writes the table to W, its header before the first row.
type Table struct {
	W      io.Writer
	header bool
}

// Header is the table's header line, without the newline.
const Header = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"

// Row writes the line of one size: sent iterations of size bytes each way
// that took elapsed, of which the peer acknowledged acked (#ack is "=N"
// when all were, else "-N" or "+N", the surplus or shortfall). A size with
// no iterations prints nothing, as show_perf. The arithmetic is C's: whole
// microseconds, usec/xfer a float.
func (t *Table) Row(size, sent int, acked int64, elapsed time.Duration) {
	if sent == 0 {
		return
	}
	if !t.header {
		fmt.Fprintln(t.W, Header)
		t.header = true
	}
	us := elapsed.Microseconds()
	bytes := uint64(sent) * uint64(size) * 2
	ack := "=" + CntStr(uint64(acked))
	switch {
	case int64(sent) < acked:
		ack = "-" + CntStr(uint64(acked-int64(sent)))
	case int64(sent) > acked:
		ack = "+" + CntStr(uint64(int64(sent)-acked))
	}
	usecPerXfer := float32(us) / float32(sent) / 2 // a float in C too
	fmt.Fprintf(t.W, "%-8s%-8s%-9s%-8s%8.2fs%s%s%s\n", SizeStr(uint64(size)), CntStr(uint64(sent)), ack, SizeStr(bytes),
		float64(us)/1e6, cFloat(10, float64(bytes)/float64(us)), cFloat(11, float64(usecPerXfer)), cFloat(11, 1/float64(usecPerXfer)))
}

// cFloat formats v as C's printf("%W.2f"), which writes infinities and
// NaNs as inf and nan (after a run too short for the clock).
func cFloat(width int, v float64) string {
	switch {
	case math.IsInf(v, 1):
		return fmt.Sprintf("%*s", width, "inf")
	case math.IsInf(v, -1):
		return fmt.Sprintf("%*s", width, "-inf")
	case math.IsNaN(v):
		return fmt.Sprintf("%*s", width, "nan")
	}
	return fmt.Sprintf("%*.2f", width, v)
}

// SizeStr is size_str: bytes with a k, m or g suffix (powers of 1024) and
// one decimal below 10 of the unit: 1000, 97k, 1.5m.
func SizeStr(n uint64) string {
	base, mag := uint64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if n/base < 10 {
		if frac := n % base * 10 / base; frac != 0 {
			return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
		}
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// CntStr is cnt_str: a count with a k, m or b suffix (powers of 1000).
func CntStr(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return fmt.Sprintf("%d", n)
}
