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

// TestDuplicateAtomicAfterWrap: an atomic executed at a PSN that an older
// saved atomic used 2^24 PSNs before replaces it: a duplicate of the new
// one gets the new one's original value, not the stale one's.
func TestDuplicateAtomicAfterWrap(t *testing.T) {
	a, b := rcPair(t, rcConfig{sqpsn: [2]uint32{0x100, 0x200}, rdAtomic: 4})
	fetchAdd := roce.Packet{BTH: roce.BTH{Opcode: roce.RCFetchAdd, PSN: 0x100, AckReq: true},
		AtomicETH: roce.AtomicETH{VA: 0, RKey: b.mr.RKey, SwapAdd: 1}}
	inject(t, b, a, fetchAdd) // returns 0, saved
	// 2^24 PSNs later (sends and writes, which save nothing), the
	// expected PSN is 0x100 again.
	b.qp.mu.Lock()
	b.qp.resp.epsn = 0x100
	b.qp.mu.Unlock()
	inject(t, b, a, fetchAdd) // returns 1, saved
	b.qp.mu.Lock()
	res := b.qp.findRes(0x100, true)
	b.qp.mu.Unlock()
	if res == nil || res.orig != 1 {
		t.Fatalf("saved atomic at PSN 0x100: %+v, want the original value 1", res)
	}
}

// TestSQDKeepsSavedAtomics: changing max_dest_rd_atomic in SQD keeps the
// reads and atomics the responder saved (the newest ones, as many as fit):
// their duplicates, which the peer may still send, get the saved answer.
func TestSQDKeepsSavedAtomics(t *testing.T) {
	a, b := rcPair(t, rcConfig{sqpsn: [2]uint32{0x100, 0x200}, rdAtomic: 4, sigAll: true})
	for i := range 3 {
		must(t, a.qp.PostSend(&SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(8*i, 8)}, RKey: b.mr.RKey, CompareAdd: 1}))
		a.scq.waitOne(t, WCSuccess, WCFetchAdd)
	}
	must(t, b.qp.Modify(&QPAttr{State: QPSSQD}, QPState_))
	must(t, b.qp.Modify(&QPAttr{State: QPSSQD, MaxDestRdAtomic: 2}, QPState_|QPMaxDestRdAtomic))
	b.qp.mu.Lock()
	defer b.qp.mu.Unlock()
	for i, want := range []bool{false, true, true} {
		res := b.qp.findRes(0x100+uint32(i), true)
		if (res != nil) != want || res != nil && res.orig != uint64(i) {
			t.Errorf("atomic %d: saved %+v, want saved %v with original value %d", i, res, want, i)
		}
	}
}
