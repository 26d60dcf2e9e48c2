package ibv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestRCOperations runs every RC operation at several path MTUs and with
// starting PSNs that wrap around 2^24 during the test.
func TestRCOperations(t *testing.T) {
	for _, tt := range []struct {
		mtu   MTU
		sqpsn [2]uint32
	}{
		{MTU256, [2]uint32{0, 0x800000}},
		{MTU1024, [2]uint32{0xfffff0, 0xfffffe}},
		{MTU4096, [2]uint32{0xffffff, 5}},
	} {
		t.Run(fmt.Sprintf("mtu%d", tt.mtu.Bytes()), func(t *testing.T) {
			a, b := rcPair(t, rcConfig{mtu: tt.mtu, sqpsn: tt.sqpsn, sigAll: true})
			testOperations(t, a, b, tt.mtu.Bytes())
			testOperations(t, b, a, tt.mtu.Bytes())
		})
	}
}

// testOperations has a run each operation on b and checks the bytes and
// the completions on both sides.
func testOperations(t *testing.T, a, b *end, mtu int) {
	t.Helper()
	const n = 10000 // several packets at any MTU
	src, dst := a.buf[:n], b.buf[:n]
	b.sync()
	clear(a.buf)
	clear(b.buf)
	b.sync()

	// SEND, several packets, gathered from 3 SGEs, scattered to 2.
	fill(src, 1)
	must(t, b.qp.PostRecv(&RecvWR{WRID: 10, SGList: []SGE{b.sge(0, 3000), b.sge(3000, n)}}))
	must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, SGList: []SGE{a.sge(0, 1), a.sge(1, 4999), a.sge(5000, 5000)}}))
	wc := b.rcq.waitOne(t, WCSuccess, WCRecv)
	if wc.WRID != 10 || wc.ByteLen != n || wc.Flags != 0 || wc.QPNum != b.qp.QPNum() {
		t.Errorf("send: receive completion %+v", wc)
	}
	if wc := a.scq.waitOne(t, WCSuccess, WCSend); wc.WRID != 1 || wc.QPNum != a.qp.QPNum() {
		t.Errorf("send: completion %+v", wc)
	}
	if !bytes.Equal(dst, src) {
		t.Error("send: bytes differ")
	}

	// SEND_WITH_IMM of 0 bytes and of one MTU exactly.
	for i, size := range []int{0, mtu} {
		b.postRecv(t, 11, 0, n)
		must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRSendWithImm, Imm: 0x01020304 + uint32(i), SGList: []SGE{a.sge(0, size)}}))
		wc = b.rcq.waitOne(t, WCSuccess, WCRecv)
		if wc.ByteLen != uint32(size) || wc.Flags != WCWithImm || wc.Imm != 0x01020304+uint32(i) {
			t.Errorf("send with imm of %d bytes: receive completion %+v", size, wc)
		}
		a.scq.waitOne(t, WCSuccess, WCSend)
	}

	// RDMA WRITE: no receive consumed, no completion at the target.
	fill(src, 2)
	must(t, a.qp.PostSend(&SendWR{WRID: 3, Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, n)}, RemoteAddr: b.mr.IOVA + 20000, RKey: b.mr.RKey}))
	if wc := a.scq.waitOne(t, WCSuccess, WCRDMAWrite); wc.WRID != 3 || wc.ByteLen != n {
		t.Errorf("write: completion %+v", wc)
	}
	b.rcq.empty(t)

	// RDMA WRITE_WITH_IMM: consumes a receive, which completes with the
	// write's length; its bytes are in place by then (the plain write's
	// too: it came first).
	b.postRecv(t, 12, 0, 0)
	must(t, a.qp.PostSend(&SendWR{WRID: 4, Opcode: WRRDMAWriteWithImm, Imm: 77, SGList: []SGE{a.sge(0, n)}, RemoteAddr: b.mr.IOVA + 40000, RKey: b.mr.RKey}))
	wc = b.rcq.waitOne(t, WCSuccess, WCRecvRDMAWithImm)
	if wc.WRID != 12 || wc.ByteLen != n || wc.Flags != WCWithImm || wc.Imm != 77 {
		t.Errorf("write with imm: receive completion %+v", wc)
	}
	a.scq.waitOne(t, WCSuccess, WCRDMAWrite)
	if !bytes.Equal(b.buf[20000:20000+n], src) || !bytes.Equal(b.buf[40000:40000+n], src) {
		t.Error("write: bytes differ")
	}

	// RDMA READ, several response packets, into 2 SGEs.
	fill(b.buf[60000:60000+n], 3)
	b.sync()
	must(t, a.qp.PostSend(&SendWR{WRID: 5, Opcode: WRRDMARead, SGList: []SGE{a.sge(100000, 7), a.sge(100007, n-7)}, RemoteAddr: b.mr.IOVA + 60000, RKey: b.mr.RKey}))
	if wc := a.scq.waitOne(t, WCSuccess, WCRDMARead); wc.ByteLen != n {
		t.Errorf("read: completion %+v", wc)
	}
	if !bytes.Equal(a.buf[100000:100000+n], b.buf[60000:60000+n]) {
		t.Error("read: bytes differ")
	}
	// A zero-length read and write.
	must(t, a.qp.PostSend(&SendWR{WRID: 6, Opcode: WRRDMARead}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	must(t, a.qp.PostSend(&SendWR{WRID: 7, Opcode: WRRDMAWrite}))
	a.scq.waitOne(t, WCSuccess, WCRDMAWrite)

	// Atomics return the original value in host order.
	binary.NativeEndian.PutUint64(b.buf[80000:], 1000)
	b.sync()
	must(t, a.qp.PostSend(&SendWR{WRID: 8, Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(0, 8)}, RemoteAddr: b.mr.IOVA + 80000, RKey: b.mr.RKey, CompareAdd: 5}))
	a.scq.waitOne(t, WCSuccess, WCFetchAdd)
	if v := binary.NativeEndian.Uint64(a.buf); v != 1000 {
		t.Errorf("fetch and add returned %d, want 1000", v)
	}
	for _, tt := range []struct{ compare, swap, orig uint64 }{{1, 2, 1005}, {1005, 7, 1005}, {7, 9, 7}} {
		must(t, a.qp.PostSend(&SendWR{WRID: 9, Opcode: WRAtomicCmpAndSwp, SGList: []SGE{a.sge(8, 8)}, RemoteAddr: b.mr.IOVA + 80000, RKey: b.mr.RKey, CompareAdd: tt.compare, Swap: tt.swap}))
		a.scq.waitOne(t, WCSuccess, WCCompSwap)
		if v := binary.NativeEndian.Uint64(a.buf[8:]); v != tt.orig {
			t.Errorf("compare %d swap %d returned %d, want %d", tt.compare, tt.swap, v, tt.orig)
		}
	}
	// Read the counter back: 9, after the last swap.
	must(t, a.qp.PostSend(&SendWR{WRID: 10, Opcode: WRRDMARead, SGList: []SGE{a.sge(16, 8)}, RemoteAddr: b.mr.IOVA + 80000, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	if v := binary.NativeEndian.Uint64(a.buf[16:]); v != 9 {
		t.Errorf("counter %d after the atomics, want 9", v)
	}
}

// TestRCPacketCounts checks segmentation at the path MTU: a message takes
// ceil(len/MTU) packets (not counting resends: a probe may resend on a
// busy machine).
func TestRCPacketCounts(t *testing.T) {
	for _, mtu := range []MTU{MTU256, MTU4096} {
		a, b := rcPair(t, rcConfig{mtu: mtu, sigAll: true})
		for _, n := range []int{0, 1, mtu.Bytes(), mtu.Bytes() + 1, 10 * mtu.Bytes()} {
			s := a.dev.Stats()
			before := s.TxPackets - s.Retransmits
			must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, n)}, RemoteAddr: 0, RKey: b.mr.RKey}))
			a.scq.waitOne(t, WCSuccess, WCRDMAWrite)
			want := max(1, (n+mtu.Bytes()-1)/mtu.Bytes())
			s = a.dev.Stats()
			if got := s.TxPackets - s.Retransmits - before; got != uint64(want) {
				t.Errorf("MTU %d: a %d-byte write took %d packets, want %d", mtu.Bytes(), n, got, want)
			}
		}
	}
}

func TestRCUnsignaled(t *testing.T) {
	a, b := rcPair(t, rcConfig{})
	for i := range 10 {
		b.postRecv(t, uint64(i), 0, 100)
		flags := SendFlags(0)
		if i == 9 {
			flags = SendSignaled
		}
		must(t, a.qp.PostSend(&SendWR{WRID: uint64(i), Opcode: WRSend, Flags: flags, SGList: []SGE{a.sge(0, 10)}}))
	}
	got := b.rcq.wait(t, 10, 10*time.Second)
	for i, wc := range got {
		if wc.WRID != uint64(i) || wc.Status != WCSuccess {
			t.Errorf("receive %d: %+v", i, wc)
		}
	}
	if wc := a.scq.waitOne(t, WCSuccess, WCSend); wc.WRID != 9 {
		t.Errorf("the one signaled send completed as %+v", wc)
	}
	a.scq.empty(t)
}

func TestRCInline(t *testing.T) {
	a, b := rcPair(t, rcConfig{inline: 64, sigAll: true})
	copy(a.buf, "first part|second part")
	b.postRecv(t, 1, 0, 100)
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, Flags: SendInline, SGList: []SGE{a.sge(0, 11), a.sge(11, 11)}}))
	copy(a.buf, "overwritten at once after the post")
	a.scq.waitOne(t, WCSuccess, WCSend)
	if wc := b.rcq.waitOne(t, WCSuccess, WCRecv); string(b.buf[:wc.ByteLen]) != "first part|second part" {
		t.Errorf("inline send delivered %q", b.buf[:wc.ByteLen])
	}
	must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMAWrite, Flags: SendInline, SGList: []SGE{a.sge(0, 11)}, RemoteAddr: 200, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMAWrite)
	mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRSend, Flags: SendInline, SGList: []SGE{a.sge(0, 65)}}), syscall.EINVAL, "inline over the limit")
	mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRSend, Flags: SendInline, SGList: []SGE{{LKey: 0x12345, Length: 4}}}), syscall.EINVAL, "inline from no region")
	mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRRDMARead, Flags: SendInline, SGList: []SGE{a.sge(0, 4)}}), syscall.EINVAL, "inline read")
	// The inline write's bytes, read back.
	must(t, a.qp.PostSend(&SendWR{Opcode: WRRDMARead, SGList: []SGE{a.sge(500, 11)}, RemoteAddr: 200, RKey: b.mr.RKey}))
	a.scq.waitOne(t, WCSuccess, WCRDMARead)
	if string(a.buf[500:511]) != "overwritten" {
		t.Errorf("inline write wrote %q", a.buf[500:511])
	}
}

// TestRCFence: a fenced write of the buffer a read fills goes only after
// the read completed, so it carries the read's bytes.
func TestRCFence(t *testing.T) {
	a, b := rcPair(t, rcConfig{mtu: MTU256, sigAll: true})
	const n = 64 << 10
	for round, fence := range []bool{true, true, true} {
		b.sync()
		fill(b.buf[:n], round+10)
		clear(a.buf[:n])
		b.sync()
		must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRRDMARead, SGList: []SGE{a.sge(0, n)}, RemoteAddr: 0, RKey: b.mr.RKey}))
		flags := SendFlags(0)
		if fence {
			flags = SendFence
		}
		must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRRDMAWrite, Flags: flags, SGList: []SGE{a.sge(0, n)}, RemoteAddr: n, RKey: b.mr.RKey}))
		must(t, a.qp.PostSend(&SendWR{WRID: 3, Opcode: WRRDMARead, SGList: []SGE{a.sge(n, n)}, RemoteAddr: n, RKey: b.mr.RKey}))
		got := a.scq.wait(t, 3, 10*time.Second)
		for i, wc := range got {
			if wc.WRID != uint64(i+1) || wc.Status != WCSuccess {
				t.Fatalf("completion %d: %+v", i, wc)
			}
		}
		if !bytes.Equal(a.buf[n:2*n], a.buf[:n]) || !bytes.Equal(a.buf[:n], b.buf[:n]) {
			t.Errorf("round %d: the fenced write did not carry the read's bytes", round)
		}
	}
}

// TestRCSRQ: two QPs of the receiving device take receives from one SRQ,
// in the order they were posted.
func TestRCSRQ(t *testing.T) {
	a, b := rcPair(t, rcConfig{srq: true, sigAll: true})
	c, d := rcPair(t, rcConfig{skipConnect: true, sigAll: true})
	// Reuse b's SRQ for a second QP on b's device, connected to c.
	srq := b.qp.init.SRQ
	qp2, err := b.pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: b.scq.CQ, RecvCQ: b.rcq.CQ, SRQ: srq, Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	must(t, err)
	d.qp = qp2
	d.dev, d.pd, d.mr, d.buf = b.dev, b.pd, b.mr, b.buf
	connect(t, c, d, rcConfig{})
	for i := range 4 {
		must(t, srq.PostRecv(&RecvWR{WRID: uint64(100 + i), SGList: []SGE{b.sge(i*100, 100)}}))
	}
	copy(a.buf, "from a")
	copy(c.buf, "from c")
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 6)}}))
	wc := b.rcq.waitOne(t, WCSuccess, WCRecv)
	must(t, c.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{c.sge(0, 6)}}))
	wc2 := b.rcq.waitOne(t, WCSuccess, WCRecv)
	if wc.WRID != 100 || wc.QPNum != b.qp.QPNum() || wc2.WRID != 101 || wc2.QPNum != qp2.QPNum() ||
		string(b.buf[:6]) != "from a" || string(b.buf[100:106]) != "from c" {
		t.Errorf("completions %+v %+v, bytes %q %q", wc, wc2, b.buf[:6], b.buf[100:106])
	}
}

// TestRCStateMachine checks the transitions and attribute masks
// ibv_modify_qp allows, and which states take work requests.
func TestRCStateMachine(t *testing.T) {
	a, b := rcPair(t, rcConfig{skipConnect: true})
	qp := a.qp
	state := func() QPState { at, _ := qp.Query(); return at.State }
	initMask := QPState_ | QPPKeyIndex | QPPort | QPAccessFlags
	rtr := QPAttr{State: QPSRTR, AH: AHAttr{Dest: b.dev.Addr()}, PathMTU: MTU1024, DestQPNum: b.qp.QPNum(), MaxDestRdAtomic: 1}
	rtrMask := QPState_ | QPAV | QPPathMTU | QPDestQPN | QPRQPSN | QPMaxDestRdAtomic | QPMinRNRTimer
	rts := QPAttr{State: QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	rtsMask := QPState_ | QPSQPSN | QPTimeout | QPRetryCnt | QPRNRRetry | QPMaxQPRdAtomic

	mustErrno(t, qp.PostRecv(&RecvWR{}), syscall.EINVAL, "PostRecv in RESET")
	mustErrno(t, qp.PostSend(&SendWR{Opcode: WRSend}), syscall.EINVAL, "PostSend in RESET")
	for _, tt := range []struct {
		name string
		a    QPAttr
		mask QPAttrMask
	}{
		{"RESET to RTR", rtr, rtrMask},
		{"RESET to RTS", rts, rtsMask},
		{"RESET to ERR", QPAttr{State: QPSErr}, QPState_},
		{"INIT without access flags", QPAttr{State: QPSInit, PortNum: 1}, QPState_ | QPPKeyIndex | QPPort},
		{"INIT with a Q_Key", QPAttr{State: QPSInit, PortNum: 1}, initMask | QPQKey},
		{"INIT on port 2", QPAttr{State: QPSInit, PortNum: 2}, initMask},
		{"INIT with P_Key index 1", QPAttr{State: QPSInit, PortNum: 1, PKeyIndex: 1}, initMask},
		{"unknown mask bit", QPAttr{State: QPSInit, PortNum: 1}, initMask | 1<<1},
		{"bad state", QPAttr{State: 9}, QPState_},
	} {
		if err := qp.Modify(&tt.a, tt.mask); err == nil {
			t.Errorf("%s: Modify worked", tt.name)
		}
		if s := state(); s != QPSReset {
			t.Fatalf("%s: state %d after a failed Modify", tt.name, s)
		}
	}
	must(t, qp.Modify(&QPAttr{State: QPSInit, PortNum: 1, AccessFlags: AccessRemoteWrite}, initMask))
	must(t, qp.Modify(&QPAttr{AccessFlags: AccessRemoteRead}, QPAccessFlags)) // INIT to INIT
	must(t, qp.PostRecv(&RecvWR{WRID: 2}))                                    // receives are taken from INIT on
	mustErrno(t, qp.PostSend(&SendWR{Opcode: WRSend}), syscall.EINVAL, "PostSend in INIT")
	for _, tt := range []struct {
		name string
		a    QPAttr
		mask QPAttrMask
	}{
		{"RTR without path MTU", rtr, rtrMask &^ QPPathMTU},
		{"RTR without destination", rtr, rtrMask &^ QPAV},
		{"RTR with SQ PSN", rtr, rtrMask | QPSQPSN},
		{"RTR with MTU 8192", QPAttr{State: QPSRTR, AH: rtr.AH, PathMTU: 6}, rtrMask},
		{"RTR with an IPv6 peer", QPAttr{State: QPSRTR, AH: AHAttr{Dest: netip.AddrPortFrom(lo6, 4791)}, PathMTU: MTU1024}, rtrMask},
		{"RTR with max_dest_rd_atomic 200", QPAttr{State: QPSRTR, AH: rtr.AH, PathMTU: MTU1024, MaxDestRdAtomic: 200}, rtrMask},
		{"INIT to RTS", rts, rtsMask},
	} {
		if err := qp.Modify(&tt.a, tt.mask); err == nil {
			t.Errorf("%s: Modify worked", tt.name)
		}
	}
	must(t, qp.Modify(&rtr, rtrMask))
	mustErrno(t, qp.PostSend(&SendWR{Opcode: WRSend}), syscall.EINVAL, "PostSend in RTR")
	if err := qp.Modify(&QPAttr{MinRNRTimer: 3}, QPMinRNRTimer); err == nil {
		t.Error("RTR to RTR worked")
	}
	for _, tt := range []struct {
		name string
		a    QPAttr
		mask QPAttrMask
	}{
		{"RTS without retry count", rts, rtsMask &^ QPRetryCnt},
		{"RTS with retry count 8", QPAttr{State: QPSRTS, RetryCnt: 8}, rtsMask},
		{"RTS with path MTU", rts, rtsMask | QPPathMTU},
		{"RTS with timeout 32", QPAttr{State: QPSRTS, Timeout: 32}, rtsMask},
	} {
		if err := qp.Modify(&tt.a, tt.mask); err == nil {
			t.Errorf("%s: Modify worked", tt.name)
		}
	}
	must(t, qp.Modify(&rts, rtsMask))
	must(t, qp.Modify(&QPAttr{MinRNRTimer: 3}, QPMinRNRTimer)) // RTS to RTS
	if err := qp.Modify(&QPAttr{PathMTU: MTU256}, QPPathMTU); err == nil {
		t.Error("RTS to RTS changed the path MTU")
	}
	at, init := qp.Query()
	if at.State != QPSRTS || at.MinRNRTimer != 3 || at.PathMTU != MTU1024 || at.DestQPNum != b.qp.QPNum() ||
		at.AccessFlags != AccessRemoteRead || at.RetryCnt != 7 || init.Type != QPTRC || init.SendCQ != a.scq.CQ {
		t.Errorf("Query() = %+v, %+v", at, init)
	}
	must(t, qp.Modify(&QPAttr{State: QPSSQD}, QPState_))
	must(t, qp.Modify(&QPAttr{State: QPSSQD, Timeout: 10}, QPState_|QPTimeout)) // SQD to SQD
	must(t, qp.Modify(&QPAttr{State: QPSRTS}, QPState_))
	// ERR flushes the posted receive; RESET empties; INIT again.
	must(t, qp.Modify(&QPAttr{State: QPSErr}, QPState_))
	if wc := a.rcq.waitOne(t, WCWRFlushErr, 0); wc.WRID != 2 {
		t.Errorf("flushed receive %+v", wc)
	}
	if err := qp.Modify(&QPAttr{State: QPSRTS}, QPState_); err == nil {
		t.Error("ERR to RTS worked")
	}
	must(t, qp.Modify(&QPAttr{State: QPSReset}, QPState_))
	must(t, qp.Modify(&QPAttr{State: QPSInit, PortNum: 1}, initMask))
}

// TestRCSQD: in SQD no new message starts; back in RTS the queued ones go.
func TestRCSQD(t *testing.T) {
	a, b := rcPair(t, rcConfig{sigAll: true})
	must(t, a.qp.Modify(&QPAttr{State: QPSSQD}, QPState_))
	b.postRecv(t, 1, 0, 10)
	must(t, a.qp.PostSend(&SendWR{WRID: 5, Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}))
	b.rcq.empty(t)
	must(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPState_))
	b.rcq.waitOne(t, WCSuccess, WCRecv)
	a.scq.waitOne(t, WCSuccess, WCSend)
}
