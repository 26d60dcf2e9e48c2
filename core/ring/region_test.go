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

// DropFile: the region keeps no descriptor, yet Dup gives a descriptor of
// the same memory (bytes written in the mapping read through it, bytes
// written through it seen in the mapping), also for a size that is not a
// whole number of pages, and ErrClosed once the region is closed.
func TestDropFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("/proc/self/map_files takes CAP_SYS_ADMIN")
	}
	for _, size := range []int{Size(8), 100} {
		reg, err := NewMemfd("ring-drop-test", size)
		if err != nil {
			t.Fatal(err)
		}
		before := countFDs(t)
		if err := reg.DropFile(); err != nil {
			t.Fatal(err)
		}
		if reg.File != nil || countFDs(t) != before-1 {
			t.Errorf("size %d: after DropFile the region has File %v, %d descriptors (had %d)", size, reg.File, countFDs(t), before)
		}
		reg.Mem[size-1] = 0x5a
		f, err := reg.Dup()
		if err != nil {
			t.Fatalf("size %d: Dup after DropFile: %v", size, err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, int64(size-1)); err != nil || b[0] != 0x5a {
			t.Errorf("size %d: read through Dup: %x, %v; want the mapping's 5a", size, b, err)
		}
		if _, err := f.WriteAt([]byte{0xa5}, 0); err != nil || reg.Mem[0] != 0xa5 {
			t.Errorf("size %d: a write through Dup (%v) is not in the mapping: %x", size, err, reg.Mem[0])
		}
		if st, err := f.Stat(); err != nil || st.Size() != int64(size) {
			t.Errorf("size %d: Dup's file: %v, %v", size, st, err)
		}
		f.Close()
		if err := reg.Close(); err != nil {
			t.Error(err)
		}
		if _, err := reg.Dup(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("size %d: Dup after Close: %v, want os.ErrClosed", size, err)
		}
	}
}

// countFDs is the number of descriptors this process holds.
func countFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestMapPieces: pieces of two memfds mapped side by side are their pages,
// both ways, also after the memfds' own regions close; pieces that are not
// whole pages, or lie outside their file, are refused.
func TestMapPieces(t *testing.T) {
	page := os.Getpagesize()
	a, err := NewMemfd("ring-pieces-a", 2*page)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMemfd("ring-pieces-b", page)
	if err != nil {
		t.Fatal(err)
	}
	copy(a.Mem[page:], "a's second page")
	copy(b.Mem, "b's page")
	r, err := MapPieces([]Piece{{From: a, Off: page, Len: page}, {From: b, Off: 0, Len: page}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Mem) != 2*page || string(r.Mem[:15]) != "a's second page" || string(r.Mem[page:page+8]) != "b's page" {
		t.Fatalf("the mapping of the pieces holds %q and %q", r.Mem[:15], r.Mem[page:page+8])
	}
	copy(r.Mem[page+100:], "through the pieces")
	if string(b.Mem[100:118]) != "through the pieces" {
		t.Errorf("a write through the pieces is not in b: %q", b.Mem[100:118])
	}
	a.Close()
	b.Close()
	if string(r.Mem[:15]) != "a's second page" || string(r.Mem[page:page+8]) != "b's page" {
		t.Errorf("after their regions closed the pieces hold %q and %q", r.Mem[:15], r.Mem[page:page+8])
	}
	c, err := NewMemfd("ring-pieces-c", page)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range [][]Piece{
		nil,
		{{From: c, Off: 1, Len: page}},
		{{From: c, Off: 0, Len: page - 1}},
		{{From: c, Off: page, Len: page}},
		{{From: nil, Off: 0, Len: page}},
	} {
		if r, err := MapPieces(p); err == nil {
			r.Close()
			t.Errorf("MapPieces(%+v) succeeded", p)
		}
	}
}
