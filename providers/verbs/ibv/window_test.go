package ibv

import (
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// TestWindowHalfPSNSpace: a read of 2^31 bytes at MTU 256 uses 2^23 PSNs,
// half the PSN space. While it is unanswered the requester is 2^23 PSNs
// ahead of the oldest unacknowledged one, a distance the signed 24-bit
// difference reads as -2^23: the window must count it as full, not
// empty, or the next message's PSNs would make the read's responses look
// like late ones. The state of such a read is set up directly (the test
// cannot register 4 GiB).
func TestWindowHalfPSNSpace(t *testing.T) {
	a, b := rcPair(t, rcConfig{mtu: MTU256, noTimeout: true})
	a.qp.mu.Lock()
	a.qp.req.psn = roce.PSNAdd(a.qp.comp.psn, 1<<23)
	a.qp.req.maxPSN = a.qp.req.psn
	a.qp.mu.Unlock()
	sent := a.dev.Stats().TxPackets
	b.postRecv(t, 1, 0, 10)
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}))
	time.Sleep(10 * time.Millisecond)
	if n := a.dev.Stats().TxPackets - sent; n != 0 {
		t.Errorf("%d packets sent with 2^23 PSNs unacknowledged, want 0", n)
	}
}
