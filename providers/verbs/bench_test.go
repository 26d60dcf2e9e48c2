package verbs

import (
	"strconv"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

// BenchmarkPingPong measures a round trip of n-byte messages between two
// devices over RC, with registered buffers (Op.Mem).
func BenchmarkPingPong(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(strconv.Itoa(n)+"B", func(b *testing.B) {
			p, da, db := twoDevices(b, nil)
			pr := connect(b, p, da, db)
			ma, mb := make([]byte, 2*n), make([]byte, 2*n)
			ra, rb := regMem(b, da, ma, 0), regMem(b, db, mb, 0)
			op := func(k core.OpKind, buf []byte, m core.Memory, off uint64) *core.Op {
				return &core.Op{Kind: k, Buf: buf, Mem: m, MemOff: off}
			}
			b.SetBytes(int64(2 * n))
			b.ResetTimer()
			for range b.N {
				pr.srv.post(b, op(core.OpRecv, mb[:n], rb, 0))
				pr.cli.post(b, op(core.OpRecv, ma[n:], ra, uint64(n)))
				pr.cli.post(b, op(core.OpSend, ma[:n], ra, 0))
				pr.srv.wait(b)
				pr.srv.post(b, op(core.OpSend, mb[n:], rb, uint64(n)))
				for range 2 {
					pr.cli.wait(b)
				}
				pr.srv.wait(b)
			}
		})
	}
}

// BenchmarkStream measures one-way throughput of 64 KiB messages, 16 in
// flight, from unregistered buffers (registered per operation).
func BenchmarkStream(b *testing.B) {
	const n, window = 64 << 10, 16
	p, da, db := twoDevices(b, nil)
	pr := connect(b, p, da, db)
	msg := make([]byte, n)
	b.SetBytes(n)
	b.ResetTimer()
	inflight := 0
	for i := 0; i < b.N; i++ {
		pr.srv.post(b, &core.Op{Kind: core.OpRecv, Buf: make([]byte, n)})
		pr.cli.post(b, &core.Op{Kind: core.OpSend, Buf: msg})
		inflight++
		for inflight >= window || (i == b.N-1 && inflight > 0) {
			pr.cli.wait(b)
			pr.srv.wait(b)
			inflight--
		}
	}
}
