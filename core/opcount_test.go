package core

import "testing"

// BenchmarkOpCount is what counting adds to every completion (stats.go):
// an endpoint's counts of one operation, from two goroutines at once as
// a send's and a receive's completions may be.
func BenchmarkOpCount(b *testing.B) {
	var c opCounters
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for n := uint64(0); pb.Next(); n++ {
			c.count(int(OpSend), n&4095, false)
		}
	})
	if s := c.snapshot()[OpSend]; s.Ops != uint64(b.N) {
		b.Fatalf("counted %d of %d", s.Ops, b.N)
	}
}
