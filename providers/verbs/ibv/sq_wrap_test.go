package ibv

import (
	"testing"
	"time"
)

// TestSendQueueIndexWrap: the send queue's free-running indices wrap
// around 2^32 after that many posts. A queue whose size does not divide
// 2^32 (3 here) must still give each queued request its own slot: the
// requests posted at indices 2^32-2, 2^32-1 and 0 are all queued at once
// (in SQD) and must complete in order, each with its own WRID and bytes.
func TestSendQueueIndexWrap(t *testing.T) {
	c := rcConfig{sendWR: 3, sigAll: true, skipConnect: true}
	a, b := rcPair(t, c)
	const start = ^uint32(0) - 1 // 2^32-2
	a.qp.mu.Lock()
	a.qp.sq.head, a.qp.sq.tail = start, start
	a.qp.mu.Unlock()
	connect(t, a, b, c)
	must(t, a.qp.Modify(&QPAttr{State: QPSSQD}, QPState_))
	for i := range 3 {
		a.buf[i] = byte(10 + i)
		b.postRecv(t, uint64(i), i, 1)
		must(t, a.qp.PostSend(&SendWR{WRID: uint64(100 + i), Opcode: WRSend, SGList: []SGE{a.sge(i, 1)}}))
	}
	must(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPState_))
	for i, wc := range a.scq.wait(t, 3, 10*time.Second) {
		if wc.Status != WCSuccess || wc.WRID != uint64(100+i) {
			t.Errorf("send completion %d: %+v, want WRID %d", i, wc, 100+i)
		}
	}
	for i, wc := range b.rcq.wait(t, 3, 10*time.Second) {
		if wc.Status != WCSuccess || b.buf[i] != byte(10+i) {
			t.Errorf("receive %d: %+v, byte %d, want %d", i, wc, b.buf[i], 10+i)
		}
	}
}
