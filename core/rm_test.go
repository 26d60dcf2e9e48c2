package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestResourceManagementCQ is fi_domain(3)'s resource management table
// for a CQ: "Tx CQ / Rx CQ ... When RM is enabled, providers may use
// different mechanisms to prevent CQ overruns. This includes failing
// (returning -FI_EAGAIN) the posting of operations that could result in
// CQ overruns". B's receive CQ has one entry and holds 16 more behind it
// (room for 17); B posts 20 receives through its rx ring and A sends 20
// messages. With FI_RM_ENABLED the engine takes 17 receives and holds the
// other 3 in the ring until reading the CQ makes room: all 20 complete,
// none is lost. With FI_RM_DISABLED all 20 are taken and the CQ loses 3
// (FI_EOVERRUN, olen 3). The shell's receive is refused with FI_EAGAIN
// while the CQ has no room.
func TestResourceManagementCQ(t *testing.T) {
	const room = 1 + core.CQOverflowFactor // the ring's one entry and those behind it
	const n = room + 3
	for _, rm := range []fi.ResourceMgmt{fi.RM_ENABLED, fi.RM_DISABLED} {
		t.Run(rm.String(), func(t *testing.T) {
			p, err := tcp.New(tcp.Config{})
			if err != nil {
				t.Fatal(err)
			}
			_, d := fabricOf(t, rxm.Wrap(p))
			av := create(t, d, core.KindAV, "v").Impl.(*core.AV)
			rxcq := create(t, d, core.KindCQ, "r")
			setAttr(t, rxcq, "size", "1")
			create(t, d, core.KindCQ, "s")
			a := create(t, d, core.KindEP, "a")
			b := create(t, d, core.KindEP, "b")
			block := "fi_info:\n    caps: [ FI_MSG, FI_MULTI_RECV ]\n    fi_ep_attr:\n        type: FI_EP_RDM\n    fi_domain_attr:\n        resource_mgmt: " + rm.String() + "\n"
			for _, ep := range []*core.Object{a, b} {
				if err := ep.Impl.(*core.EP).SetInfo(block); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []string{"bind av v", "bind cq s send,recv", "enable"} {
				run(t, a, c)
			}
			for _, c := range []string{"bind av v", "bind cq s send", "bind cq r recv", "enable"} {
				run(t, b, c)
			}
			var addrs []fi.Addr
			for _, ep := range []*core.Object{a, b} {
				if got := ep.Impl.(*core.EP).Info().DomainAttr.ResourceMgmt; got != rm {
					t.Fatalf("%s info resource_mgmt = %v, want %v", ep, got, rm)
				}
				addr, err := ep.Impl.(*core.EP).Name()
				if err != nil {
					t.Fatal(err)
				}
				addrs = append(addrs, addr)
			}
			if _, err := av.Insert(addrs); err != nil { // a is fi_addr 0, b 1
				t.Fatal(err)
			}
			mr, err := regMR(t, d, "m", 8192, "", "FI_SEND,FI_RECV")
			if err != nil {
				t.Fatal(err)
			}
			_, brx := ringsOf(t, b)
			atx, _ := ringsOf(t, a)
			cq := rxcq.Impl.(*core.CQ)
			publish := func(r *ring.Ring, w ring.WR) {
				w.Desc, w.Len = mr.Serial, 16
				slot, ok := r.Reserve()
				if !ok {
					t.Fatal("work ring full")
				}
				w.Encode(slot)
				r.Publish(1)
			}
			for i := range uint64(n) {
				publish(brx, ring.WR{Op: ring.OpRecv, Context: 100 + i, Offset: 16 * i, Addr: uint64(fi.ADDR_UNSPEC)})
			}
			taken := uint32(n)
			if rm == fi.RM_ENABLED {
				taken = room
			}
			eventually(t, "B's receives taken", func() bool { return brx.Entries()-brx.Free() == n-taken })
			for i := range uint64(n) {
				publish(atx, ring.WR{Op: ring.OpSend, Context: 200 + i, Offset: 4096 + 16*i, Addr: 1})
			}
			eventually(t, "the completions of the taken receives", func() bool {
				return strings.Contains(cq.Status().String(), " total="+strconv.Itoa(int(taken))+" ")
			})
			time.Sleep(20 * time.Millisecond) // nothing more comes while no one reads
			if rm == fi.RM_ENABLED {
				if brx.Entries()-brx.Free() != n-room {
					t.Errorf("%d receives left in the ring, want %d held while the CQ is full", brx.Entries()-brx.Free(), n-room)
				}
				// The shell is refused at once.
				if err := b.Ctl(context.Background(), 0, "multi_recv m 6144 1024 9"); !errors.Is(err, fi.EAGAIN) {
					t.Errorf("a shell receive on the full CQ: %v, want FI_EAGAIN (no room)", err)
				}
			}
			want := n // the held receives go in as reading makes room
			if rm == fi.RM_DISABLED {
				want = room + 1 // and FI_EOVERRUN
			}
			var got []core.CQEntry
			for deadline := time.Now().Add(10 * time.Second); len(got) < want && time.Now().Before(deadline); {
				es, err := cq.Read(context.Background(), 1, false) // one at a time: room comes slowly
				if err == nil {
					got = append(got, es...)
				}
				time.Sleep(time.Millisecond)
			}
			if rm == fi.RM_ENABLED {
				if len(got) != want {
					t.Fatalf("%d completions, want %d", len(got), want)
				}
				for i, e := range got {
					if e.Err != 0 || e.Context != 100+uint64(i) {
						t.Errorf("completion %d = %v, want receive %d in order, no error", i, e, 100+i)
					}
				}
				return
			}
			if len(got) != want {
				t.Fatalf("%d entries, want %d completions and FI_EOVERRUN", len(got), room)
			}
			if last := got[room]; last.Err != fi.EOVERRUN || last.OLen != n-room {
				t.Errorf("last entry %v, want FI_EOVERRUN counting %d lost", last, n-room)
			}
		})
	}
}

// eventually waits up to 10 s for cond, polling; it fails the test
// saying what did not happen.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
