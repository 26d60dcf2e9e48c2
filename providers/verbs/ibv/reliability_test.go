package ibv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// TestRNRRetryExceeded: with no receive ever posted, a send is RNR NAKed
// rnr_retry+1 times and completes with IBV_WC_RNR_RETRY_EXC_ERR.
func TestRNRRetryExceeded(t *testing.T) {
	for _, rnr := range []uint8{0, 3} {
		a, b := rcPair(t, rcConfig{rnr: rnr, minRNR: 1, retry: 7, exactRetries: true})
		must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, SGList: []SGE{a.sge(0, 100)}}))
		must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRSend, SGList: []SGE{a.sge(0, 100)}}))
		got := a.scq.wait(t, 2, 10*time.Second)
		if got[0].WRID != 1 || got[0].Status != WCRNRRetryExcErr || got[1].Status != WCWRFlushErr {
			t.Errorf("rnr_retry %d: completions %+v", rnr, got)
		}
		if s := a.dev.Stats(); s.RNRRcvd != uint64(rnr)+1 {
			t.Errorf("rnr_retry %d: %d RNR NAKs received, want %d", rnr, s.RNRRcvd, rnr+1)
		}
		// A probe may resend the send while an RNR NAK is on its way:
		// the responder may NAK more often than the requester counts.
		if s := b.dev.Stats(); s.RNRSent < uint64(rnr)+1 {
			t.Errorf("rnr_retry %d: %d RNR NAKs sent, want %d or more", rnr, s.RNRSent, rnr+1)
		}
		waitState(t, a.qp, QPSErr)
	}
}

// TestRNRLateReceive: a receive posted while the requester waits after
// RNR NAKs gets the message; rnr_retry 7 waits as long as it takes.
// A write with immediate needs a receive too.
func TestRNRLateReceive(t *testing.T) {
	for _, rnr := range []uint8{3, 7} {
		a, b := rcPair(t, rcConfig{rnr: rnr, minRNR: 14, sigAll: true}) // 1.28 ms waits
		copy(a.buf, "late")
		must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, SGList: []SGE{a.sge(0, 4)}}))
		must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRRDMAWriteWithImm, Imm: 9, SGList: []SGE{a.sge(0, 4)}, RemoteAddr: 100, RKey: b.mr.RKey}))
		deadline := time.Now().Add(10 * time.Second)
		for a.dev.Stats().RNRRcvd == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		// rnr_retry 7 waits past 7 RNR NAKs: the receive is posted
		// after the eighth, however long a busy machine takes to send it.
		for rnr == 7 && a.dev.Stats().RNRRcvd < 8 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		b.postRecv(t, 1, 0, 10)
		if wc := b.rcq.waitOne(t, WCSuccess, WCRecv); wc.ByteLen != 4 || string(b.buf[:4]) != "late" {
			t.Errorf("rnr_retry %d: receive %+v, bytes %q", rnr, wc, b.buf[:4])
		}
		b.postRecv(t, 2, 0, 0)
		if wc := b.rcq.waitOne(t, WCSuccess, WCRecvRDMAWithImm); wc.Imm != 9 {
			t.Errorf("rnr_retry %d: receive %+v", rnr, wc)
		}
		a.scq.wait(t, 2, 10*time.Second)
		if s := a.dev.Stats(); s.RNRRcvd < 1 || (rnr == 7 && s.RNRRcvd < 8) {
			t.Errorf("rnr_retry %d: %d RNR NAKs", rnr, s.RNRRcvd)
		}
	}
}

// TestRetryExceeded: with the peer's device closed nothing answers; the
// requester resends at each timeout and after retry_cnt retries completes
// with IBV_WC_RETRY_EXC_ERR.
func TestRetryExceeded(t *testing.T) {
	a, b := rcPair(t, rcConfig{timeout: 8, retry: 3}) // 1 ms
	must(t, b.dev.Close())
	start := time.Now()
	must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 5000)}, RKey: b.mr.RKey}))
	must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRRDMARead, SGList: []SGE{a.sge(0, 8)}, RKey: b.mr.RKey}))
	got := a.scq.wait(t, 2, 10*time.Second)
	if got[0].WRID != 1 || got[0].Status != WCRetryExcErr || got[1].Status != WCWRFlushErr {
		t.Errorf("completions %+v", got)
	}
	s := a.dev.Stats()
	if s.Timeouts != 4 || s.Retransmits == 0 {
		t.Errorf("%d timeouts (want 4), %d retransmits", s.Timeouts, s.Retransmits)
	}
	if d := time.Since(start); d < 4*time.Millisecond {
		t.Errorf("gave up after %v, before 4 timeouts of 1 ms", d)
	}
}

// TestDuplicates: every datagram both ways is sent twice. The responder
// sees each request twice and executes it once: one receive per send,
// atomics applied once, reads answered again from saved state.
func TestDuplicates(t *testing.T) {
	a, b := rcPair(t, rcConfig{mtu: MTU1024, sigAll: true, minRNR: 1,
		fault: &Fault{Duplicate: 1}})
	const n = 50
	for i := range n {
		b.postRecv(t, uint64(i), i*100, 100)
	}
	binary.NativeEndian.PutUint64(b.buf[1<<19:], 0)
	b.sync()
	// Every send's bytes are in place before the first post: the writes
	// below read 3000 bytes from each send's slot, which covers the slots
	// after it, and a buffer may not change under a posted work request.
	for i := range n {
		binary.LittleEndian.PutUint32(a.buf[i*100:], uint32(i))
	}
	for i := range n {
		must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRSend, SGList: []SGE{a.sge(i*100, 100)}}))
		must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(1<<18+8*i, 8)},
			RemoteAddr: 1 << 19, RKey: b.mr.RKey, CompareAdd: 1}))
		must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, SGList: []SGE{a.sge(i*100, 3000)},
			RemoteAddr: 1<<17 + uint64(i)*3000, RKey: b.mr.RKey}))
	}
	a.scq.wait(t, 3*n, 20*time.Second)
	for i, wc := range b.rcq.wait(t, n, 10*time.Second) {
		if wc.WRID != uint64(i) || binary.LittleEndian.Uint32(b.buf[i*100:]) != uint32(i) {
			t.Fatalf("receive %d: %+v", i, wc)
		}
	}
	b.rcq.empty(t)
	seen := map[uint64]bool{}
	for i := range n {
		v := binary.NativeEndian.Uint64(a.buf[1<<18+8*i:])
		if seen[v] || v >= n {
			t.Errorf("fetch and add %d returned %d (seen: %v)", i, v, seen[v])
		}
		seen[v] = true
	}
	// The counter, read back: n.
	must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMARead, SGList: []SGE{a.sge(0, 8)}, RemoteAddr: 1 << 19, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	if v := binary.NativeEndian.Uint64(a.buf); v != n {
		t.Errorf("counter %d, want %d", v, n)
	}
	if s := b.dev.Stats(); s.Duplicates < n {
		t.Errorf("responder saw %d duplicates", s.Duplicates)
	}
	t.Logf("requester %+v", a.dev.Stats())
	t.Logf("responder %+v", b.dev.Stats())
}

// TestLossy moves sends, writes and reads over links that drop,
// reorder or corrupt datagrams, and checks every byte and the order.
func TestLossy(t *testing.T) {
	for _, f := range []Fault{
		{Drop: 0.2, Seed: 1},
		{Reorder: 0.3, Seed: 2},
		{Corrupt: 0.2, Seed: 3},
		{Drop: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.05, Seed: 4},
	} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			a, b := rcPair(t, rcConfig{mtu: MTU1024, minRNR: 1, fault: &f})
			const n, size = 200, 5000
			for i := range n {
				b.postRecv(t, uint64(i), i*size, size)
			}
			for i := range n {
				fill(a.buf[i*size:(i+1)*size], i)
				flags := SendFlags(0)
				if i%10 == 9 {
					flags = SendSignaled
				}
				must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRSend, Flags: flags, SGList: []SGE{a.sge(i*size, size)}}))
			}
			for i, wc := range b.rcq.wait(t, n, 30*time.Second) {
				if wc.WRID != uint64(i) || wc.Status != WCSuccess || wc.ByteLen != size {
					t.Fatalf("receive %d: %+v", i, wc)
				}
			}
			if !bytes.Equal(b.buf[:n*size], a.buf[:n*size]) {
				t.Fatal("received bytes differ")
			}
			for i, wc := range a.scq.wait(t, n/10, 10*time.Second) {
				if wc.WRID != uint64(i*10+9) || wc.Status != WCSuccess {
					t.Fatalf("send completion %d: %+v", i, wc)
				}
			}
			// Reads back into a's buffer, after clearing it.
			clear(a.buf[:n*size])
			for i := range n {
				must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled,
					SGList: []SGE{a.sge(i*size, size)}, RemoteAddr: uint64(i * size), RKey: b.mr.RKey}))
			}
			for i, wc := range a.scq.wait(t, n, 30*time.Second) {
				if wc.WRID != uint64(i) || wc.Status != WCSuccess {
					t.Fatalf("read completion %d: %+v", i, wc)
				}
			}
			b.sync()
			if !bytes.Equal(b.buf[:n*size], a.buf[:n*size]) {
				t.Fatal("read bytes differ")
			}
			sa, sb := a.dev.Stats(), b.dev.Stats()
			t.Logf("a %+v", sa)
			t.Logf("b %+v", sb)
			if f.Corrupt > 0 && sa.BadICRC+sb.BadICRC == 0 {
				t.Error("corrupted datagrams, and no ICRC errors counted")
			}
			if sa.Retransmits == 0 {
				t.Error("no retransmits")
			}
		})
	}
}
