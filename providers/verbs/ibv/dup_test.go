package ibv

import (
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// inject hands the responder of e a request from peer, as if it came
// over the network.
func inject(t *testing.T, e, peer *end, p roce.Packet) {
	t.Helper()
	p.PKey, p.DestQP = roce.DefaultPKey, e.qp.QPNum()
	buf := make([]byte, p.Size())
	n, err := p.Encode(buf, roce.Path{Src: peer.dev.Addr(), Dst: e.dev.Addr()})
	must(t, err)
	e.dev.input(buf[:n], peer.dev.Addr())
}

// TestDuplicateReadOutsideSaved: a duplicate read request that asks for
// bytes outside the read the responder saved is dropped, also when its
// address plus its length wraps around 2^64; the QP stays in RTS.
func TestDuplicateReadOutsideSaved(t *testing.T) {
	a, b := rcPair(t, rcConfig{sqpsn: [2]uint32{0x100, 0x200}})
	must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	for _, reth := range []roce.RETH{
		{VA: ^uint64(0) - 7, RKey: b.mr.RKey, DMALen: 16}, // wraps: ends at 8
		{VA: 50, RKey: b.mr.RKey, DMALen: 100},            // past the saved 100 bytes
	} {
		inject(t, b, a, roce.Packet{BTH: roce.BTH{Opcode: roce.RCRDMAReadRequest, PSN: 0x100, AckReq: true}, RETH: reth})
	}
	time.Sleep(20 * time.Millisecond)
	if s := qpState(b.qp); s != QPSRTS {
		t.Fatalf("responder in state %d after duplicate reads outside the saved one, want RTS", s)
	}
	b.postRecv(t, 1, 0, 10)
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.sge(0, 10)}}))
	a.scq.waitOne(t, WCSuccess, WCSend)
}
