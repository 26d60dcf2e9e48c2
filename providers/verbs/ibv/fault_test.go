package ibv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// faultScale is the volume of TestFaults: the numbers, or a
// tenth and less under the race detector (every path is still taken).
type faultScale struct {
	messages   int // sends, with and without immediate data
	writeMiB   int // MiB of RDMA writes, 1 MiB each
	readMiB    int // MiB of RDMA reads, 1 MiB each
	atomics    int // fetch-and-adds of 1 on one counter
	msgTimeout time.Duration
}

func scale() faultScale {
	if raceEnabled {
		return faultScale{messages: 10000, writeMiB: 32, readMiB: 32, atomics: 2000, msgTimeout: 5 * time.Minute}
	}
	return faultScale{messages: 100000, writeMiB: 512, readMiB: 512, atomics: 20000, msgTimeout: 2 * time.Minute}
}

// Buffer layout of TestFaults, on both devices.
const (
	fSlots    = 1024                 // send and receive slots
	fSlotSize = 8 << 10              // bytes per slot: up to 2 packets at MTU 4096
	fBulk     = fSlots * fSlotSize   // bulk region: 16 MiB of 1 MiB slots
	fBulkMiB  = 16                   // 1 MiB slots in the bulk region
	fResults  = fBulk + fBulkMiB<<20 // atomic results, 8 bytes each
	fCounter  = fResults + 1<<20     // the atomic counter (on b)
	fBufSize  = fCounter + 4096
)

// TestFaults is the fault-injection test of issue 5, verbatim: "drop,
// duplicate, reorder, corrupt at 5% each, moves 100,000 messages and 1
// GiB of RDMA writes and reads between two devices with every byte
// checked: nothing lost, duplicated or reordered, no atomic executed
// twice; RNR and retry-exceeded paths each produce the documented
// error." The devices are on 127.0.0.1 and 127.0.0.2, each dropping,
// duplicating, reordering and corrupting 5% of the datagrams it sends.
func TestFaults(t *testing.T) {
	sc := scale()
	fault := &Fault{Drop: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.05, Seed: 5}
	a, b := rcPair(t, rcConfig{mtu: MTU4096, minRNR: 1, rdAtomic: 16,
		sendWR: fSlots, recvWR: fSlots, cqSize: 1 << 16, bufSize: fBufSize, fault: fault})
	start := time.Now()
	phase := func(name string) {
		t.Logf("%s done after %v; a: %+v", name, time.Since(start).Round(time.Millisecond), a.dev.Stats())
	}

	faultMessages(t, a, b, sc)
	phase("messages")
	faultWrites(t, a, b, sc)
	phase("writes")
	faultReads(t, a, b, sc)
	phase("reads")
	faultAtomics(t, a, b, sc)
	phase("atomics")
	faultRNR(t, a, b)
	phase("RNR")

	// Retry exceeded: the peer's device closes; the timeouts run out.
	must(t, b.dev.Close())
	must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.sge(0, 100)}}))
	if wc := a.scq.wait(t, 1, time.Minute)[0]; wc.Status != WCRetryExcErr {
		t.Errorf("send to a closed device: %+v, want IBV_WC_RETRY_EXC_ERR", wc)
	}
	phase("retry exceeded")
	sa, sb := a.dev.Stats(), b.dev.Stats()
	t.Logf("a (127.0.0.1): %+v", sa)
	t.Logf("b (127.0.0.2): %+v", sb)
	for _, s := range []Stats{sa, sb} {
		if s.FaultDropped == 0 || s.FaultDuplicated == 0 || s.FaultReordered == 0 || s.FaultCorrupted == 0 || s.BadICRC == 0 {
			t.Errorf("a fault kind never happened: %+v", s)
		}
	}
	if sa.Retransmits == 0 || sb.Duplicates == 0 || sb.NAKsSent == 0 {
		t.Errorf("no retransmits, duplicates or NAKs: %+v, %+v", sa, sb)
	}
}

// msgSize is the size of message seq: 8 bytes of sequence number and a
// pattern, from 8 bytes to two packets.
func msgSize(seq int) int { return 8 + int(uint32(seq)*2654435761%(fSlotSize-7)) }

// putMsg writes message seq into b.
func putMsg(b []byte, seq int) {
	binary.LittleEndian.PutUint64(b, uint64(seq))
	fill(b[8:], seq)
}

// faultMessages sends sc.messages messages from a to b, each with its
// sequence number and a pattern of its own, every tenth with immediate
// data, while b checks every received message: in order, once, every
// byte.
func faultMessages(t *testing.T, a, b *end, sc faultScale) {
	var wg sync.WaitGroup
	errs := make(chan string, 1)
	fail := func(s string) {
		select {
		case errs <- s:
		default:
		}
	}
	wg.Add(1)
	go func() { // the receiver
		defer wg.Done()
		post := func(slot int) bool {
			err := b.qp.PostRecv(&RecvWR{WRID: uint64(slot), SGList: []SGE{b.sge(slot*fSlotSize, fSlotSize)}})
			if err != nil {
				fail(err.Error())
			}
			return err == nil
		}
		for slot := range fSlots {
			if !post(slot) {
				return
			}
		}
		want := make([]byte, fSlotSize)
		wc := make([]WC, 64)
		deadline := time.Now().Add(sc.msgTimeout)
		for seq := 0; seq < sc.messages; {
			n := b.rcq.Poll(wc)
			if n == 0 {
				select {
				case <-b.rcq.wake:
				case <-time.After(time.Until(deadline)):
					fail("receiver: timed out")
					return
				}
				continue
			}
			for _, c := range wc[:n] {
				slot := seq % fSlots
				size := msgSize(seq)
				got := b.buf[slot*fSlotSize : slot*fSlotSize+size]
				putMsg(want[:size], seq)
				imm := seq%10 == 0
				if c.Status != WCSuccess || c.WRID != uint64(slot) || c.ByteLen != uint32(size) ||
					(c.Flags&WCWithImm != 0) != imm || (imm && c.Imm != uint32(seq)) || !bytes.Equal(got, want[:size]) {
					fail(fmt.Sprintf("receive of message %d: %+v, or wrong bytes", seq, c))
					return
				}
				if seq+fSlots < sc.messages && !post(slot) {
					return
				}
				seq++
			}
		}
	}()
	// The sender: at most fSlots-64 sends outstanding, every 32nd
	// signaled; a slot is rewritten only after its send completed.
	done := 0 // messages whose send completed
	wc := make([]WC, 64)
	for seq := 0; seq < sc.messages; seq++ {
		for seq-done >= fSlots-64 {
			n := a.scq.Poll(wc)
			for _, c := range wc[:n] {
				if c.Status != WCSuccess {
					t.Fatalf("send %d: %+v", c.WRID, c)
				}
				done = int(c.WRID) + 1
			}
			if n == 0 {
				select {
				case <-a.scq.wake:
				case s := <-errs:
					t.Fatal(s)
				case <-time.After(sc.msgTimeout):
					t.Fatalf("sender: no completion in %v; %+v", sc.msgTimeout, a.dev.Stats())
				}
			}
		}
		slot := seq % fSlots
		size := msgSize(seq)
		putMsg(a.buf[slot*fSlotSize:slot*fSlotSize+size], seq)
		wr := SendWR{WRID: uint64(seq), Opcode: WRSend, SGList: []SGE{a.sge(slot*fSlotSize, size)}}
		if seq%10 == 0 {
			wr.Opcode, wr.Imm = WRSendWithImm, uint32(seq)
		}
		if seq%32 == 31 || seq == sc.messages-1 {
			wr.Flags = SendSignaled
		}
		must(t, a.qp.PostSend(&wr))
		if seq%10000 == 9999 {
			t.Logf("%d messages posted", seq+1)
		}
	}
	wg.Wait()
	select {
	case s := <-errs:
		t.Fatal(s)
	default:
	}
	for done < sc.messages {
		c := a.scq.wait(t, 1, sc.msgTimeout)[0]
		if c.Status != WCSuccess {
			t.Fatalf("send %d: %+v", c.WRID, c)
		}
		done = int(c.WRID) + 1
	}
	b.rcq.empty(t) // nothing received twice
}

// faultWrites writes sc.writeMiB MiB from a's bulk region to b's, 1 MiB
// per write, 16 at a time, each from a different offset of a random
// source; after each 16 it checks b's bulk region byte for byte.
func faultWrites(t *testing.T, a, b *end, sc faultScale) {
	src := a.buf[fBulk : fBulk+fBulkMiB<<20]
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	offset := func(j int) int { return j * 4099 % (fBulkMiB<<20 - 1<<20) }
	for j := 0; j < sc.writeMiB; j += fBulkMiB {
		for k := range fBulkMiB {
			must(t, a.qp.PostSend(&SendWR{WRID: uint64(j + k), Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGList: []SGE{a.sge(fBulk+offset(j+k), 1<<20)}, RemoteAddr: b.mr.IOVA + fBulk + uint64(k)<<20, RKey: b.mr.RKey}))
		}
		for k, c := range a.scq.wait(t, fBulkMiB, time.Minute) {
			if c.Status != WCSuccess || c.WRID != uint64(j+k) {
				t.Fatalf("write %d: %+v", j+k, c)
			}
		}
		b.sync()
		for k := range fBulkMiB {
			if !bytes.Equal(b.buf[fBulk+k<<20:fBulk+(k+1)<<20], src[offset(j+k):offset(j+k)+1<<20]) {
				t.Fatalf("write %d: bytes differ", j+k)
			}
		}
		b.sync()
		if (j+fBulkMiB)%128 == 0 {
			t.Logf("%d MiB written", j+fBulkMiB)
		}
	}
}

// faultReads reads sc.readMiB MiB from b's bulk region (what the last
// writes left there) into a 1 MiB buffer poisoned before each read, 8
// reads at a time, and checks every byte.
func faultReads(t *testing.T, a, b *end, sc faultScale) {
	b.sync()
	remote := append([]byte(nil), b.buf[fBulk:fBulk+fBulkMiB<<20]...)
	b.sync()
	dst := fResults - 8<<20 // a's upper half of the bulk region
	for j := 0; j < sc.readMiB; j += 8 {
		for k := range 8 {
			slot := a.buf[dst+k<<20 : dst+(k+1)<<20]
			for i := range slot {
				slot[i] = 0xee
			}
			from := (j + k) * 7 % fBulkMiB
			must(t, a.qp.PostSend(&SendWR{WRID: uint64(j + k), Opcode: WRRDMARead, Flags: SendSignaled,
				SGList: []SGE{a.sge(dst+k<<20, 1<<20)}, RemoteAddr: b.mr.IOVA + fBulk + uint64(from)<<20, RKey: b.mr.RKey}))
		}
		for k, c := range a.scq.wait(t, 8, time.Minute) {
			from := (j + k) * 7 % fBulkMiB
			if c.Status != WCSuccess || c.WRID != uint64(j+k) || c.ByteLen != 1<<20 ||
				!bytes.Equal(a.buf[dst+k<<20:dst+(k+1)<<20], remote[from<<20:(from+1)<<20]) {
				t.Fatalf("read %d: %+v, or bytes differ", j+k, c)
			}
		}
		if (j+8)%128 == 0 {
			t.Logf("%d MiB read", j+8)
		}
	}
}

// faultAtomics adds 1 to one counter sc.atomics times: the counter ends
// at sc.atomics and the original values returned are distinct, so no
// atomic ran twice.
func faultAtomics(t *testing.T, a, b *end, sc faultScale) {
	b.sync()
	binary.NativeEndian.PutUint64(b.buf[fCounter:], 0)
	b.sync()
	const batch = 512
	seen := make([]bool, sc.atomics)
	for j := 0; j < sc.atomics; j += batch {
		n := min(batch, sc.atomics-j)
		for k := range n {
			must(t, a.qp.PostSend(&SendWR{WRID: uint64(j + k), Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled,
				SGList: []SGE{a.sge(fResults+8*k, 8)}, RemoteAddr: b.mr.IOVA + fCounter, RKey: b.mr.RKey, CompareAdd: 1}))
		}
		for k, c := range a.scq.wait(t, n, time.Minute) {
			if c.Status != WCSuccess || c.WRID != uint64(j+k) {
				t.Fatalf("atomic %d: %+v", j+k, c)
			}
			v := binary.NativeEndian.Uint64(a.buf[fResults+8*k:])
			if v >= uint64(sc.atomics) || seen[v] {
				t.Fatalf("atomic %d returned %d: out of range or returned before", j+k, v)
			}
			seen[v] = true
		}
	}
	must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.sge(fResults, 8)},
		RemoteAddr: b.mr.IOVA + fCounter, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	if v := binary.NativeEndian.Uint64(a.buf[fResults:]); v != uint64(sc.atomics) {
		t.Fatalf("counter %d after %d fetch-and-adds of 1", v, sc.atomics)
	}
}

// faultRNR connects a second pair of QPs over the same faulty devices,
// with rnr_retry 3, and sends to a QP that has no receive: the send
// completes with IBV_WC_RNR_RETRY_EXC_ERR.
func faultRNR(t *testing.T, a, b *end) {
	qp := func(e *end) *end {
		qp, err := e.pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: e.scq.CQ, RecvCQ: e.rcq.CQ, SigAll: true,
			Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		c := *e
		c.qp = qp
		return &c
	}
	a2, b2 := qp(a), qp(b)
	connect(t, a2, b2, rcConfig{mtu: MTU4096, rnr: 3, minRNR: 1})
	must(t, a2.qp.PostSend(&SendWR{WRID: 7, Opcode: WRSend, SGList: []SGE{a.sge(0, 100)}}))
	if wc := a.scq.wait(t, 1, time.Minute)[0]; wc.Status != WCRNRRetryExcErr || wc.QPNum != a2.qp.QPNum() {
		t.Errorf("send to a QP without receives: %+v, want IBV_WC_RNR_RETRY_EXC_ERR", wc)
	}
}
