package tcp

import (
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// TestBulkDataNoAckStall streams the way fabtests' fi_msg_bw does, on an
// endpoint of FI_TC_BULK_DATA (the class fi_msg_bw, fi_rdm_tagged_bw and
// fi_rma_bw ask for): the client writes two messages, each in a writev of
// its own (as two engine passes do), and waits for a short answer, which
// the server sends once both arrived. With Nagle's algorithm on the socket,
// the second write waits for the ACK of the first, which the server's
// kernel delays (40 ms on Linux) while it has nothing to send: each round
// took ~40 ms, and fi_msg_bw -p fabricfs ran at a hundredth of its rate.
func TestBulkDataNoAckStall(t *testing.T) {
	d, info := loDomain()
	info = info.Clone()
	info.TxAttr.TClass = fi.TC_BULK_DATA
	p := connectOn(t, d, info)
	const rounds, size = 40, 4096
	msg := make([]byte, size)
	var slow []time.Duration
	for i := range rounds {
		a, b := make([]byte, size), make([]byte, size)
		post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: a})
		post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: b})
		ans := make([]byte, 4)
		post(t, p.cli.ep, &core.Op{Kind: core.OpRecv, Buf: ans})
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: msg})
		start := time.Now()
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: msg})
		for range 2 {
			if c := waitDone(t, p.srv.done).c; c.Err != 0 || c.Len != size {
				t.Fatalf("round %d: receive %+v", i, c)
			}
		}
		if took := time.Since(start); took >= 30*time.Millisecond {
			slow = append(slow, took)
		}
		post(t, p.srv.ep, &core.Op{Kind: core.OpSend, Buf: []byte("ack!")})
		for range 3 { // the client's two sends and the answer
			if c := waitDone(t, p.cli.done).c; c.Err != 0 {
				t.Fatalf("round %d: client completion %+v", i, c)
			}
		}
		waitDone(t, p.srv.done) // the answer's send
	}
	// A busy machine may delay a round now and then; the stall delayed
	// nearly every one.
	if len(slow) > rounds/4 {
		t.Errorf("%d of %d rounds took 30 ms or more for the second message (%v)", len(slow), rounds, slow)
	}
}
