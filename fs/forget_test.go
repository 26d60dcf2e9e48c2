package fs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestDeadObjectForgotten mounts a tree, makes an event queue by opening
// eq/clone, looks up its directory's files (so the kernel holds entries of
// them) and closes the clone file: the object dies, and within a few
// seconds nothing references it any more, since the kernel was told to
// drop its entries and forgot their nodes.
func TestDeadObjectForgotten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	p, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fab, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	mnt := filepath.Join(t.TempDir(), "fabric")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Mount(fab, mnt, Options{})
	if err != nil {
		t.Skipf("mount: %v", err)
	}
	defer srv.Unmount()
	kind := filepath.Join(mnt, "tcp", "lo", "eq")
	f, err := os.OpenFile(filepath.Join(kind, "clone"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	n, err := f.Read(b)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b[:n]))
	for _, name := range []string{"ctl", "status", "err", "attr"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(kind, id, name), &st); err != nil {
			f.Close()
			t.Fatal(err)
		}
	}
	d, _ := fab.Domain("tcp", "lo")
	var obj weak.Pointer[core.Object]
	for _, o := range d.List(core.KindEQ) {
		if o.ID == id {
			obj = weak.Make(o)
		}
	}
	if obj.Value() == nil {
		f.Close()
		t.Fatalf("eq %s is not in the domain", id)
	}
	f.Close()
	for deadline := time.Now().Add(5 * time.Second); obj.Value() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("eq %s is still referenced 5 s after it died", id)
		}
		runtime.GC()
	}
}
