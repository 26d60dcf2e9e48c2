package core_test

import (
	"fmt"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestRemoveClosesMappedObject: rmdir of an object whose files are open
// (a mapped ring) closes it: it leaves the domain, its rings get
// RING_DEAD, and the application's mapping stays readable memory; the
// open file's release afterwards does nothing more.
func TestRemoveClosesMappedObject(t *testing.T) {
	d := lo(t)
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	if err := a.Open(); err != nil { // the application's open ring file
		t.Fatal(err)
	}
	reg, err := a.Impl.(*core.EP).Ring("tx")
	if err != nil {
		t.Fatal(err)
	}
	f, err := reg.Dup()
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := ring.MapFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if err := a.Remove(); err != nil {
		t.Fatalf("rmdir of a mapped endpoint: %v", err)
	}
	if a.Alive() || present(d, core.KindEP, a.ID) {
		t.Errorf("after rmdir the endpoint is alive %v, listed %v", a.Alive(), present(d, core.KindEP, a.ID))
	}
	r, err := ring.Open(mapped.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Flags()&ring.Dead == 0 {
		t.Errorf("ring flags %#x after rmdir, want RING_DEAD", r.Flags())
	}
	a.Release()
}
