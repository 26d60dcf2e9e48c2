package ibv

import (
	"testing"
)

// next waits for one completion (without a timer, which would allocate)
// and fails t unless it succeeded.
func (w *waitCQ) next(t testing.TB) {
	var wc [1]WC
	for w.Poll(wc[:]) == 0 {
		<-w.wake
	}
	if wc[0].Status != WCSuccess {
		t.Fatalf("completion %+v", wc[0])
	}
}

// pingPong sends size bytes from a to b and back, each with a receive
// posted first.
func pingPong(t testing.TB, a, b *end, size int) {
	b.postRecv(t, 1, 0, size)
	a.postRecv(t, 1, 0, size)
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, size)}}))
	b.rcq.next(t)
	must(t, b.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{b.sge(0, size)}}))
	a.rcq.next(t)
}

// BenchmarkPingPong measures the round trip of a 64-byte send and its
// answer between two devices: half of it is the latency.
func BenchmarkPingPong(b *testing.B) {
	x, y := rcPair(b, rcConfig{mtu: MTU4096})
	pingPong(b, x, y, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pingPong(b, x, y, 64)
	}
}

// BenchmarkWrite measures RDMA write bandwidth with 1 MiB writes, 8 in
// flight.
func BenchmarkWrite(b *testing.B) {
	x, y := rcPair(b, rcConfig{mtu: MTU4096, bufSize: 8 << 20, sigAll: true})
	const size, depth = 1 << 20, 8
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i >= depth {
			x.scq.next(b)
		}
		must(b, x.qp.PostSend(&SendWR{Opcode: WRRDMAWrite, SGList: []SGE{x.sge(i%depth*size, size)},
			RemoteAddr: uint64(i % depth * size), RKey: y.mr.RKey}))
	}
	for range min(b.N, depth) {
		x.scq.next(b)
	}
}

// TestSteadyStateAllocs: once running, moving messages allocates
// nothing: not per packet, not per message (a ping-pong of 4 packets
// with its ACKs and completions, and a 64 KiB write of 16 packets).
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, b := rcPair(t, rcConfig{mtu: MTU4096, sigAll: true})
	for range 100 {
		pingPong(t, a, b, 64)
	}
	if n := testing.AllocsPerRun(1000, func() { pingPong(t, a, b, 64) }); n > 0 {
		t.Errorf("%v allocations per ping-pong", n)
	}
	write := func() {
		must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 64<<10)}, RKey: b.mr.RKey}))
		a.scq.next(t)
	}
	if n := testing.AllocsPerRun(200, write); n > 0 {
		t.Errorf("%v allocations per 64 KiB write", n)
	}
}
