package tcp

import (
	"fmt"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

// BenchmarkPingPong measures a round trip: one side sends, the other
// receives and sends back (compare fi_pingpong -p tcp -e msg, whose
// "usec/xfer" is half a round trip).
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{64, 4096, 65536, 524288} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			p := connect(b)
			buf := make([]byte, size)
			rcli, rsrv := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(b, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: rsrv})
				post(b, p.cli.ep, &core.Op{Kind: core.OpRecv, Buf: rcli})
				post(b, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: buf})
				<-p.cli.done // send
				<-p.srv.done // receive
				post(b, p.srv.ep, &core.Op{Kind: core.OpSend, Buf: buf})
				<-p.srv.done
				<-p.cli.done
			}
		})
	}
}

// BenchmarkStream measures one-way throughput with up to 64 sends and
// receives outstanding.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{64, 65536, 524288} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			p := connect(b)
			const depth = 64
			send := make([]core.Op, depth)
			recv := make([]core.Op, depth)
			for i := range send {
				send[i] = core.Op{Kind: core.OpSend, Buf: make([]byte, size)}
				recv[i] = core.Op{Kind: core.OpRecv, Buf: make([]byte, size)}
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				for i := 0; i < b.N; i++ {
					if i >= depth {
						<-p.srv.done
					}
					op := &recv[i%depth]
					op.Buf = op.Buf[:cap(op.Buf)]
					if err := p.srv.ep.Post(op); err != nil {
						panic(err)
					}
				}
			}()
			for i := 0; i < b.N; i++ {
				if i >= depth {
					<-p.cli.done
				}
				if err := p.cli.ep.Post(&send[i%depth]); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < min(b.N, depth); i++ {
				<-p.cli.done
				<-p.srv.done
			}
		})
	}
}
