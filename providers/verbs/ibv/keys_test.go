package ibv

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKeyGuessing: a peer of a victim's QP (an RC connection the victim
// accepted) guesses the rkey of the victim's region, 100,000 times: first
// every key next to one it knows (a region another user registered on the
// same device just after the victim's), then random keys. It never
// reaches the region: each guess is NAKed with a remote access error,
// which puts the victim's QP in error (the connection is gone, and the
// next guess needs a new one), and no byte of the region is read or
// written.
func TestKeyGuessing(t *testing.T) {
	const guesses = 100_000
	a, v := rcPair(t, rcConfig{bufSize: 4096, skipConnect: true})
	fill(v.buf, 3)
	want := bytes.Clone(v.buf)
	// Another user's region on the victim's device, registered after the
	// victim's: the attacker knows its key.
	otherPD, err := v.dev.AllocPD()
	must(t, err)
	other, err := otherPD.RegMR(make([]byte, 64), 0, AccessLocalWrite|AccessRemoteRead|AccessRemoteWrite)
	must(t, err)
	t.Cleanup(func() { other.Dereg() })

	var keys []uint32
	for d := uint32(0); d < 8; d++ { // the indexes below the known one, every low byte
		for low := uint32(0); low < 256; low++ {
			keys = append(keys, (other.RKey>>8-d)<<8|low)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for len(keys) < guesses {
		keys = append(keys, r.Uint32())
	}

	c := rcConfig{}
	c.defaults()
	start := time.Now()
	hits := 0
	for i, key := range keys {
		// Each connection starts at new PSNs, as a new connection
		// would: a late packet of the last one is out of its window.
		c.sqpsn = [2]uint32{uint32(i*64) & 0xffffff, uint32(i*64+32) & 0xffffff}
		connect(t, a, v, c)
		wr := SendWR{WRID: uint64(i), Opcode: WRRDMARead, SGList: []SGE{a.sge(0, 64)}, RKey: key, Flags: SendSignaled}
		if i%2 == 1 {
			wr.Opcode = WRRDMAWrite
		}
		must(t, a.qp.PostSend(&wr))
		wc := a.scq.wait(t, 1, 10*time.Second)[0]
		if wc.Status == WCSuccess {
			hits++
			t.Errorf("guess %d: key %#x reached the victim's region (its key %#x, the known one %#x)", i, key, v.mr.RKey, other.RKey)
			if hits == 3 {
				t.FailNow()
			}
		} else if wc.Status != WCRemAccessErr {
			t.Fatalf("guess %d: status %d, want IBV_WC_REM_ACCESS_ERR (%d)", i, wc.Status, WCRemAccessErr)
		} else {
			waitState(t, v.qp, QPSErr)
		}
		for _, e := range []*end{a, v} {
			must(t, e.qp.Modify(&QPAttr{State: QPSReset}, QPState_))
		}
		for _, e := range []*end{a, v} { // the victim's receive CQ has no entries: no receives
			var wcs [8]WC
			for e.scq.Poll(wcs[:]) > 0 {
			}
		}
	}
	t.Logf("%d guesses in %v", len(keys), time.Since(start))
	v.sync()
	if !bytes.Equal(v.buf, want) {
		t.Errorf("the victim's region changed")
	}
	if bytes.Contains(a.buf, want[:64]) {
		t.Errorf("the attacker's buffer holds the victim's bytes")
	}
}
