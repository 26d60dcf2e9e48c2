package verbs

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// TestKeyGuessing: user 1000 guesses the key of root's region, 100,000
// times, each guess an RDMA read or write on a new connection to a QP of
// root's protection domain (what a connection to root's endpoint is):
// first every key next to one it knows (its own region, registered on
// the same device after root's), then random keys. No guess reaches the
// region: each is NAKed with a remote access error, which puts root's QP
// in error (the connection is gone), and no byte of the region is read
// or written. The guesses go to the device directly, not through the
// connection manager, which would refuse the guesser's connections after
// its first bad key (TestRDMKeyProbing): this measures the key space.
func TestKeyGuessing(t *testing.T) {
	const guesses = 100_000
	_, da, db := twoDevices(t, nil)
	target := sharedMem(t, 4096)
	copy(target, pattern(4096, 3))
	want := bytes.Clone(target)
	regMemOf(t, 0, db, target, fi.REMOTE_READ|fi.REMOTE_WRITE)
	known := uint32(regMemOf(t, 1000, db, make([]byte, 64), fi.REMOTE_READ|fi.REMOTE_WRITE).Key())

	var keys []uint32
	for d := uint32(0); d < 8; d++ { // rxe's index<<8 | 8 random bits: the indexes below the known one
		for low := uint32(0); low < 256; low++ {
			keys = append(keys, (known>>8-d)<<8|low)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for len(keys) < guesses {
		keys = append(keys, r.Uint32())
	}

	root, err := db.owner(0)
	if err != nil {
		t.Fatal(err)
	}
	guesser, err := da.owner(1000)
	if err != nil {
		t.Fatal(err)
	}
	type end struct {
		qp   *ibv.QP
		cq   *ibv.CQ
		wake chan struct{}
		dev  *device
	}
	mk := func(o *owned) end {
		e := end{wake: make(chan struct{}, 1), dev: o.d.dev}
		if e.cq, err = o.d.dev.dev.CreateCQ(16, func() {
			select {
			case e.wake <- struct{}{}:
			default:
			}
		}); err != nil {
			t.Fatal(err)
		}
		if e.qp, err = o.pd.CreateQP(ibv.QPInitAttr{Type: ibv.QPTRC, SendCQ: e.cq, RecvCQ: e.cq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			e.qp.Destroy()
			e.cq.Destroy()
		})
		return e
	}
	v, a := mk(root), mk(guesser)
	buf := sharedMem(t, 64)
	mr, err := guesser.pd.RegMR(buf, 0, ibv.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ends := [2]end{a, v}
	start := time.Now()
	for i, key := range keys {
		// Each connection starts at new PSNs, as a new one would: a late
		// packet of the last one is out of its window.
		psn := [2]uint32{uint32(i*64) & 0xffffff, uint32(i*64+32) & 0xffffff}
		for _, e := range ends {
			must(e.qp.Modify(&ibv.QPAttr{State: ibv.QPSInit, PortNum: 1, AccessFlags: rcAccess}, ibv.QPState_|ibv.QPPKeyIndex|ibv.QPPort|ibv.QPAccessFlags))
		}
		for j, e := range ends {
			peer := ends[1-j]
			must(e.qp.Modify(&ibv.QPAttr{State: ibv.QPSRTR, AH: ibv.AHAttr{Dest: e.dev.peer(peer.dev.ip)}, PathMTU: ibv.MTU1024,
				DestQPNum: peer.qp.QPNum(), RQPSN: psn[1-j], MaxDestRdAtomic: 1, MinRNRTimer: rcMinRNRTimer}, rtrMask))
			must(e.qp.Modify(&ibv.QPAttr{State: ibv.QPSRTS, SQPSN: psn[j], Timeout: rcTimeout, RetryCnt: rcRetryCount,
				RNRRetry: rcRNRRetry, MaxRdAtomic: 1}, ibv.QPState_|ibv.QPSQPSN|ibv.QPTimeout|ibv.QPRetryCnt|ibv.QPRNRRetry|ibv.QPMaxQPRdAtomic))
		}
		wr := ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMARead, SGList: []ibv.SGE{{Addr: mr.IOVA, Length: 64, LKey: mr.LKey}},
			RKey: key, Flags: ibv.SendSignaled}
		if i%2 == 1 {
			wr.Opcode = ibv.WRRDMAWrite
		}
		must(a.qp.PostSend(&wr))
		var wc [1]ibv.WC
		deadline := time.After(10 * time.Second)
		for a.cq.Poll(wc[:]) == 0 {
			select {
			case <-a.wake:
			case <-deadline:
				t.Fatalf("guess %d: no completion", i)
			}
		}
		switch wc[0].Status {
		case ibv.WCSuccess:
			t.Fatalf("guess %d: key %#x reached root's region (the known key %#x)", i, key, known)
		case ibv.WCRemAccessErr:
		default:
			t.Fatalf("guess %d: status %v, want IBV_WC_REM_ACCESS_ERR", i, wc[0].Status)
		}
		for at, _ := v.qp.Query(); at.State != ibv.QPSErr; at, _ = v.qp.Query() {
			select {
			case <-deadline:
				t.Fatalf("guess %d: root's QP in state %v, want ERR", i, at.State)
			default:
				time.Sleep(10 * time.Microsecond)
			}
		}
		for _, e := range ends {
			must(e.qp.Modify(&ibv.QPAttr{State: ibv.QPSReset}, ibv.QPState_))
			for e.cq.Poll(wc[:]) > 0 {
			}
		}
	}
	t.Logf("%d guesses in %v", len(keys), time.Since(start))
	v.qp.Query() // orders the device's accesses to the region before ours
	if !bytes.Equal(target, want) {
		t.Error("root's region changed")
	}
	if bytes.Contains(buf, want[:64]) {
		t.Error("the guesser's buffer holds root's bytes")
	}
}
