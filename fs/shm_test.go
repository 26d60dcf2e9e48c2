package fs

import (
	"context"
	"syscall"
	"testing"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/shm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestShmHandleRemoved: an open region file (mr/N/data) whose region is
// removed while it is read, written and handed to the kernel stays safe
// (run with -race): the handle has its own descriptor of the memory, and
// reads and writes after the rmdir fail with ENOENT.
func TestShmHandleRemoved(t *testing.T) {
	p, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fab, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	if fab.Shm.Mode != shm.MapPassthrough {
		t.Skipf("mapping is %s, not passthrough", fab.Shm.Mode)
	}
	d, _ := fab.Domain("tcp", "lo")
	o, err := d.Create(core.KindMR, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range o.Attrs() {
		if a.Name == "len" {
			if err := a.Set("4096"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := o.Ctl(context.Background(), 0, "reg"); err != nil {
		t.Fatal(err)
	}
	tr := &tree{fab: fab, inos: map[string]uint64{}, next: 2}
	f := tr.shmEntry(o, "data", slotData, o.Impl.(*core.MR).Region).node().(*file)
	fh, _, errno := f.Open(context.Background(), syscall.O_RDWR)
	if errno != 0 {
		t.Fatalf("open data: %v", errno)
	}
	h := fh.(interface {
		fusefs.FileReader
		fusefs.FileWriter
		fusefs.FilePassthroughFder
		fusefs.FileReleaser
	})
	removed := make(chan error)
	go func() { removed <- o.Remove() }()
	buf := make([]byte, 64)
	for gone := false; !gone; {
		select {
		case err := <-removed:
			if err != nil {
				t.Fatal(err)
			}
			gone = true
		default:
		}
		h.PassthroughFd()
		h.Read(context.Background(), buf, 0)
		h.Write(context.Background(), buf, 0)
	}
	if _, errno := h.Read(context.Background(), buf, 0); errno != syscall.ENOENT {
		t.Errorf("read of a removed region's data: %v, want ENOENT", errno)
	}
	if _, errno := h.Write(context.Background(), buf, 0); errno != syscall.ENOENT {
		t.Errorf("write of a removed region's data: %v, want ENOENT", errno)
	}
	h.Release(context.Background())
}
