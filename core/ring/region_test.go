package ring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestMemfd(t *testing.T) {
	reg, err := NewMemfd("ring-memfd-test", Size(8))
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Mem) != Size(8) {
		t.Errorf("len %d", len(reg.Mem))
	}
	if uintptrOf(reg.Mem)%4096 != 0 {
		t.Errorf("mapping not page-aligned")
	}
	if fi, err := reg.File.Stat(); err != nil || fi.Size() != int64(Size(8)) {
		t.Errorf("stat: %v, %v", fi, err)
	}
	if _, err := Init(reg.Mem, TypeWork, 8, FeatFutex); err != nil {
		t.Fatal(err)
	}
	// Another mapping of the same file, as a client's: the same pages.
	cl, err := MapFile(fmt.Sprintf("/proc/self/fd/%d", reg.File.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(cl.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Mem) != Size(8) {
		t.Errorf("client region: len %d", len(cl.Mem))
	}
	reg.Mem[Size(8)-1] = 0x5a
	if cl.Mem[Size(8)-1] != 0x5a || r.Entry(7)[127] != 0x5a {
		t.Errorf("the client does not see the daemon's write")
	}
	if err := cl.Close(); err != nil {
		t.Error(err)
	}
	if err := reg.Close(); err != nil {
		t.Error(err)
	}
	if err := reg.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := NewMemfd("zero", 0); err == nil {
		t.Error("NewMemfd of 0 bytes succeeded")
	}
}

// TestMemfdSealed: whoever opens the memfd, even read-write, cannot change
// its size, so the daemon's mapping never loses pages (a SIGBUS); bytes
// written through the other file reach the daemon's mapping.
func TestMemfdSealed(t *testing.T) {
	reg, err := NewMemfd("ring-sealed-test", Size(4))
	if err != nil {
		t.Fatal(err)
	}
	closed := 0
	reg.OnClose(func() {
		if reg.Mem == nil || reg.File == nil {
			t.Error("OnClose function ran after the memory was unmapped")
		}
		closed++
	})
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", reg.File.Fd()), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int64{0, int64(Size(4)) - 1, int64(Size(4)) + 4096} {
		if err := f.Truncate(size); !errors.Is(err, syscall.EPERM) {
			t.Errorf("truncate to %d: %v, want EPERM", size, err)
		}
	}
	if _, err := f.WriteAt([]byte{9}, int64(Size(4))); !errors.Is(err, syscall.EPERM) {
		t.Errorf("write past the end: %v, want EPERM", err)
	}
	if _, err := f.WriteAt([]byte{7}, HeaderSize); err != nil {
		t.Fatal(err)
	}
	if reg.Mem[HeaderSize] != 7 {
		t.Error("the daemon's mapping does not see the write")
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(Size(4)) {
		t.Errorf("size after the attempts: %v, %v", fi.Size(), err)
	}
	if err := reg.Close(); err != nil {
		t.Error(err)
	}
	reg.Close()
	if closed != 1 {
		t.Errorf("OnClose function ran %d times, want 1", closed)
	}
}

func TestMapFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{empty, dir, filepath.Join(dir, "missing")} {
		if r, err := MapFile(p); err == nil {
			r.Close()
			t.Errorf("MapFile(%s) succeeded", p)
		}
	}
}
