package tests

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core/ring"
)

// TestRmdirMappedEndpoint: rmdir of an endpoint whose tx ring is mapped
// closes it: the directory is gone at once, the mapping stays readable
// memory and shows RING_DEAD.
func TestRmdirMappedEndpoint(t *testing.T) {
	d := mount(t)
	for _, dir := range []string{"eq/e", "cq/c", "ep/x"} {
		if err := os.Mkdir(d.path("tcp", "lo", dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable"} {
		d.mustCtl(t, c, "tcp", "lo", "ep", "x", "ctl")
	}
	m, err := ring.MapFile(d.path("tcp", "lo", "ep", "x", "tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Remove(d.path("tcp", "lo", "ep", "x")); err != nil {
		t.Fatalf("rmdir of the mapped endpoint: %v", err)
	}
	if _, err := os.Stat(d.path("tcp", "lo", "ep", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the removed endpoint: %v, want ENOENT", err)
	}
	r, err := ring.Open(m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Flags()&ring.Dead == 0 {
		t.Errorf("the mapped tx ring's flags are %#x after rmdir, want RING_DEAD", r.Flags())
	}
}

// TestRingsBeforeEnable: tx and rx are listed from an endpoint's creation,
// as docs/tree.md says, and open only once it is enabled: before, EBADFD
// and err says why.
func TestRingsBeforeEnable(t *testing.T) {
	d := mount(t)
	if err := os.Mkdir(d.path("tcp", "lo", "ep", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(d.path("tcp", "lo", "ep", "x"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if l := " " + strings.Join(names, " ") + " "; !strings.Contains(l, " tx ") || !strings.Contains(l, " rx ") {
		t.Errorf("ep x lists %v, want tx and rx", names)
	}
	_, err = os.OpenFile(d.path("tcp", "lo", "ep", "x", "tx"), os.O_RDWR, 0)
	if !errors.Is(err, syscall.EBADFD) {
		t.Errorf("open tx before enable: %v, want EBADFD", err)
	}
	if got := d.read(t, "tcp", "lo", "ep", "x", "err"); !strings.HasPrefix(got, "open tx: endpoint is idle") {
		t.Errorf("err = %q", got)
	}
}
