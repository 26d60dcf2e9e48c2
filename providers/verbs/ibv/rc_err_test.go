package ibv

import (
	"syscall"
	"testing"
	"time"
)

// qpState returns the QP's state.
func qpState(qp *QP) QPState {
	at, _ := qp.Query()
	return at.State
}

// waitState waits until the QP is in state s.
func waitState(t testing.TB, qp *QP, s QPState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for qpState(qp) != s {
		if time.Now().After(deadline) {
			t.Fatalf("QP %#x in state %d, want %d", qp.QPNum(), qpState(qp), s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRCRemoteErrors: each remote error NAKs the request; the requester
// completes it with the matching status, flushes what follows in order,
// and both QPs end in ERR.
func TestRCRemoteErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mrAccess Access // the target region's access
		qpAccess Access // the target QP's access flags
		wr       func(a, b *end) SendWR
		status   WCStatus
		recv     WCStatus // the target's receive completion, if one is consumed
	}{
		{name: "write with a bad rkey", status: WCRemAccessErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey ^ 0x80}
			}},
		{name: "write past the region", status: WCRemAccessErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 100)}, RemoteAddr: uint64(len(b.buf) - 99), RKey: b.mr.RKey}
			}},
		{name: "write to a read-only region", mrAccess: AccessLocalWrite | AccessRemoteRead, status: WCRemAccessErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey}
			}},
		{name: "read of a write-only region", mrAccess: AccessLocalWrite | AccessRemoteWrite, status: WCRemAccessErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMARead, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey}
			}},
		{name: "atomic on a region without atomic access", mrAccess: AccessLocalWrite | AccessRemoteWrite, status: WCRemAccessErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(0, 8)}, RKey: b.mr.RKey}
			}},
		{name: "read from a QP without remote read", qpAccess: AccessLocalWrite | AccessRemoteWrite, status: WCRemInvReqErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMARead, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey}
			}},
		{name: "write to a QP without remote write", qpAccess: AccessLocalWrite | AccessRemoteRead, status: WCRemInvReqErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 100)}, RKey: b.mr.RKey}
			}},
		{name: "send longer than the receive", status: WCRemInvReqErr, recv: WCLocLenErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 5000)}}
			}},
		{name: "send to a receive with a bad lkey", status: WCRemOpErr, recv: WCLocProtErr,
			wr: func(a, b *end) SendWR {
				return SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := rcPair(t, rcConfig{mrAccess: tt.mrAccess, skipConnect: true})
			c := rcConfig{}
			c.defaults()
			connect(t, a, b, c)
			if tt.qpAccess != 0 {
				must(t, b.qp.Modify(&QPAttr{AccessFlags: tt.qpAccess}, QPAccessFlags))
			}
			if tt.recv == WCLocProtErr {
				must(t, b.qp.PostRecv(&RecvWR{WRID: 1, SGList: []SGE{{Addr: 0, Length: 100, LKey: 0xbad00}}}))
			} else {
				b.postRecv(t, 1, 0, 4000)
			}
			b.postRecv(t, 2, 0, 4000)
			wr := tt.wr(a, b)
			wr.WRID = 100
			must(t, a.qp.PostSend(&wr))
			must(t, a.qp.PostSend(&SendWR{WRID: 101, Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}))
			must(t, a.qp.PostSend(&SendWR{WRID: 102, Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 10)}, RKey: b.mr.RKey}))
			got := a.scq.wait(t, 3, 10*time.Second)
			if got[0].WRID != 100 || got[0].Status != tt.status || got[1].WRID != 101 || got[1].Status != WCWRFlushErr ||
				got[2].WRID != 102 || got[2].Status != WCWRFlushErr {
				t.Errorf("requester completions %+v, want %d then two flushes", got, tt.status)
			}
			waitState(t, a.qp, QPSErr)
			waitState(t, b.qp, QPSErr)
			// The target: the receive the message used (if any) with
			// its error, the others flushed.
			want := []WC{{WRID: 1, Status: WCWRFlushErr}, {WRID: 2, Status: WCWRFlushErr}}
			if tt.recv != 0 {
				want[0].Status = tt.recv
			}
			for i, wc := range b.rcq.wait(t, 2, 10*time.Second) {
				if wc.WRID != want[i].WRID || wc.Status != want[i].Status {
					t.Errorf("target receive completion %d: %+v, want %+v", i, wc, want[i])
				}
			}
			// Posts to a QP in ERR complete at once, flushed.
			must(t, a.qp.PostSend(&SendWR{WRID: 103, Opcode: WRSend}))
			if wc := a.scq.waitOne(t, WCWRFlushErr, 0); wc.WRID != 103 {
				t.Errorf("post after the error: %+v", wc)
			}
			must(t, b.qp.PostRecv(&RecvWR{WRID: 3}))
			if wc := b.rcq.waitOne(t, WCWRFlushErr, 0); wc.WRID != 3 {
				t.Errorf("receive after the error: %+v", wc)
			}
		})
	}
}

// TestRCLocalErrors: a local buffer that is not a registered region of
// the QP's PD (or lacks local write where the device writes it)
// completes the request with IBV_WC_LOC_PROT_ERR once the requests
// before it completed.
func TestRCLocalErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		wr   func(a, b *end, ro, other *MR) SendWR
	}{
		{"bad lkey", func(a, b *end, ro, other *MR) SendWR {
			return SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 10), {LKey: 0x7700, Length: 1}}}
		}},
		{"past the region", func(a, b *end, ro, other *MR) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(len(a.buf)-5, 10)}, RKey: b.mr.RKey}
		}},
		{"read into a read-only region", func(a, b *end, ro, other *MR) SendWR {
			return SendWR{Opcode: WRRDMARead, SGList: []SGE{{Addr: ro.IOVA, Length: 8, LKey: ro.LKey}}, RKey: b.mr.RKey}
		}},
		{"region of another PD", func(a, b *end, ro, other *MR) SendWR {
			return SendWR{Opcode: WRSend, SGList: []SGE{{Addr: other.IOVA, Length: 8, LKey: other.LKey}}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := rcPair(t, rcConfig{sigAll: true})
			ro, err := a.pd.RegMR(make([]byte, 64), 0x5000, 0)
			must(t, err)
			pd2, err := a.dev.AllocPD()
			must(t, err)
			other, err := pd2.RegMR(make([]byte, 64), 0, AccessLocalWrite)
			must(t, err)
			for range 3 {
				b.postRecv(t, 0, 0, 100)
			}
			must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}))
			wr := tt.wr(a, b, ro, other)
			wr.WRID = 2
			must(t, a.qp.PostSend(&wr))
			must(t, a.qp.PostSend(&SendWR{WRID: 3, Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}}))
			got := a.scq.wait(t, 3, 10*time.Second)
			if got[0].WRID != 1 || got[0].Status != WCSuccess || got[1].WRID != 2 || got[1].Status != WCLocProtErr ||
				got[2].WRID != 3 || got[2].Status != WCWRFlushErr {
				t.Errorf("completions %+v", got)
			}
			waitState(t, a.qp, QPSErr)
		})
	}
}

// TestRCPostChecks: malformed send work requests fail at once; a full
// send queue is ENOMEM.
func TestRCPostChecks(t *testing.T) {
	a, b := rcPair(t, rcConfig{sendWR: 2, sges: 2, minRNR: 1})
	for _, tt := range []struct {
		name string
		wr   SendWR
	}{
		{"opcode 7", SendWR{Opcode: 7}},
		{"3 SGEs", SendWR{Opcode: WRSend, SGList: make([]SGE, 3)}},
		{"unknown flag", SendWR{Opcode: WRSend, Flags: 16}},
		{"atomic of 4 bytes", SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(0, 4)}, RKey: b.mr.RKey}},
		{"misaligned atomic", SendWR{Opcode: WRAtomicCmpAndSwp, SGList: []SGE{a.sge(0, 8)}, RemoteAddr: 4, RKey: b.mr.RKey}},
		{"atomic with 2 SGEs", SendWR{Opcode: WRAtomicCmpAndSwp, SGList: []SGE{a.sge(0, 4), a.sge(4, 4)}, RKey: b.mr.RKey}},
		{"2 GiB and 1", SendWR{Opcode: WRSend, SGList: []SGE{{Length: 1 << 31}, {Length: 1}}}},
	} {
		mustErrno(t, a.qp.PostSend(&tt.wr), syscall.EINVAL, tt.name)
	}
	mustErrno(t, a.qp.PostSend(nil), syscall.EINVAL, "nil work request")
	// No receive at b: the sends wait (RNR) and the queue fills.
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend}))
	must(t, a.qp.PostSend(&SendWR{Opcode: WRSend}))
	mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRSend}), syscall.ENOMEM, "full send queue")
	must(t, b.qp.PostRecv(&RecvWR{}))
	must(t, b.qp.PostRecv(&RecvWR{}))
	b.rcq.wait(t, 2, 10*time.Second)
}
