package core_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/shm"
)

// openFDs is the number of descriptors this process holds.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// An endpoint's rings are charged at enable and made at the first open of
// either (EP.Ring), both at once, in that charge; their size is known
// before; an endpoint whose rings were never opened gives its charge back
// at close, as one whose rings were does; over the memory limit enable
// fails.
func TestRingsMadeOnFirstOpen(t *testing.T) {
	f, d := loFabric(t)
	create(t, d, core.KindEQ, "e")
	create(t, d, core.KindCQ, "c")
	held := func() int64 { return f.Held(0)[core.MemoryBytes] }
	// The rings' memfds stay open in the symlink mode, whose links name
	// them; in passthrough the rings keep none (shm.Allocator.Alloc).
	memfds := 0
	if f.Shm.Mode == shm.MapSymlink {
		memfds = 2
	}
	for _, open := range []bool{false, true} {
		o := create(t, d, core.KindEP, "a")
		ep := o.Impl.(*core.EP)
		for _, c := range []string{"bind eq e", "bind cq c send,recv"} {
			run(t, o, c)
		}
		before := held() // the CQ's ring is made at its first bind
		if _, err := ep.RingSize("tx"); !errors.Is(err, fi.EOPBADSTATE) {
			t.Errorf("ring size before enable: %v, want FI_EOPBADSTATE", err)
		}
		fds := openFDs(t)
		run(t, o, "enable")
		tx, err := ep.RingSize("tx")
		if err != nil {
			t.Fatal(err)
		}
		rx, err := ep.RingSize("rx")
		if err != nil {
			t.Fatal(err)
		}
		if got := held() - before; got != int64(tx+rx) {
			t.Errorf("enabled: %d bytes charged, want the rings' %d + %d", got, tx, rx)
		}
		if n := openFDs(t) - fds; n != 0 {
			t.Errorf("enable made %d descriptors, want none before the rings are opened", n)
		}
		if open {
			reg, err := ep.Ring("rx")
			if err != nil {
				t.Fatal(err)
			}
			if uint64(reg.Len()) != rx {
				t.Errorf("rx ring of %d bytes, RingSize said %d", reg.Len(), rx)
			}
			if n := openFDs(t) - fds; n != memfds {
				t.Errorf("opening rx made %d descriptors, want %d (%s)", n, memfds, f.Shm.Mode)
			}
			if _, err := ep.Ring("tx"); err != nil {
				t.Fatal(err)
			}
			if n := openFDs(t) - fds; n != memfds {
				t.Errorf("opening tx after rx: %d descriptors, want the same %d", n, memfds)
			}
			if got := held() - before; got != int64(tx+rx) {
				t.Errorf("rings made: %d bytes charged, want %d, as at enable", got, tx+rx)
			}
			if err := ep.Kick(); err != nil {
				t.Errorf("kick: %v", err)
			}
		} else if err := ep.Kick(); err != nil {
			t.Errorf("kick with no ring made: %v, want nothing to do", err)
		}
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
		if got := held() - before; got != 0 {
			t.Errorf("rings opened %v: %d bytes still charged after close", open, got)
		}
		if n := openFDs(t) - fds; n != 0 {
			t.Errorf("rings opened %v: %d descriptors left after close", open, n)
		}
	}

	// Over the limit, enable fails and charges nothing.
	const uid = 1000
	var objs []*core.Object
	for _, k := range []core.Kind{core.KindEQ, core.KindCQ, core.KindEP} {
		o, err := d.Create(k, "", uid)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	ep := objs[2]
	for _, c := range []string{"bind eq " + objs[0].ID, "bind cq " + objs[1].ID + " send,recv"} {
		if err := ep.Ctl(context.Background(), uid, c); err != nil {
			t.Fatal(err)
		}
	}
	f.SetLimit(core.MemoryBytes, f.Held(uid)[core.MemoryBytes]+4096) // the CQ's ring and a page
	err := ep.Ctl(context.Background(), uid, "enable")
	wantCode(t, "enable over the memory limit", err, fi.ENOSPC)
	if got, want := f.Held(uid)[core.MemoryBytes], f.Limits()[core.MemoryBytes]-4096; got != want {
		t.Errorf("after the refused enable uid %d holds %d memory bytes, want the CQ's %d", uid, got, want)
	}
	for _, o := range objs {
		o.Release()
	}
}
