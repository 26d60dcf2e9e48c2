package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestRmdirOpenFilesFail: the files of an object that were open when it
// was removed fail with ENOENT from then on: a command to the old ctl
// (`exec 3>mr/m/ctl; rmdir mr/m; echo reg >&3`) and an attribute write
// register nothing, and the user's memory_bytes stays 0.
func TestRmdirOpenFilesFail(t *testing.T) {
	d := mount(t)
	if err := os.Mkdir(d.path("tcp", "lo", "mr", "m"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(t, "4096", "tcp", "lo", "mr", "m", "attr", "len")
	c, err := os.OpenFile(d.path("tcp", "lo", "mr", "m", "ctl"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := os.OpenFile(d.path("tcp", "lo", "mr", "m", "attr", "len"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Remove(d.path("tcp", "lo", "mr", "m")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("reg\n")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("reg on the ctl of a removed region: %v, want ENOENT", err)
	}
	if _, err := a.Write([]byte("8192\n")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("attr/len of a removed region: %v, want ENOENT", err)
	}
	if got := d.read(t, "limits"); !strings.Contains(got, "\nmemory_bytes 0 ") {
		t.Errorf("/limits after reg on a removed region:\n%s", got)
	}
}

// TestRmdirMappedRegionRace: opening, reading and mapping a region's data
// file while the region is removed is safe (run with -race: the daemon is
// built with it and a race fails its exit): each open either works or
// fails with ENOENT.
func TestRmdirMappedRegionRace(t *testing.T) {
	d := mount(t)
	for i := range 50 {
		dir := d.path("tcp", "lo", "mr", fmt.Sprint("m", i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		d.mustCtl(t, "4096", "tcp", "lo", "mr", fmt.Sprint("m", i), "attr", "len")
		d.mustCtl(t, "reg", "tcp", "lo", "mr", fmt.Sprint("m", i), "ctl")
		done := make(chan error, 1)
		go func() {
			for {
				m, err := ring.MapFile(filepath.Join(dir, "data"))
				if err != nil {
					if errors.Is(err, syscall.ENOENT) {
						err = nil
					}
					done <- err
					return
				}
				_ = m.Mem[0]
				m.File.ReadAt(make([]byte, 64), 0)
				m.Close()
			}
		}()
		time.Sleep(time.Millisecond)
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("round %d: open of data while the region was removed: %v", i, err)
		}
	}
}
