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
	if len(reg.Mem) != Size(8) || reg.Path != "" {
		t.Errorf("len %d path %q", len(reg.Mem), reg.Path)
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
	if cl.Path != "" || len(cl.Mem) != Size(8) {
		t.Errorf("client region: path %q len %d", cl.Path, len(cl.Mem))
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

func TestNewFile(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	old := syscall.Umask(0o077) // NewFile's mode does not depend on the umask
	defer syscall.Umask(old)
	const nobody = 65534
	reg, err := NewFile(dir, "cq-1", Size(4), nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cq-1")
	if reg.Path != path || len(reg.Mem) != Size(4) {
		t.Errorf("path %q len %d", reg.Path, len(reg.Mem))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || st.Uid != nobody || st.Gid != nobody || fi.Size() != int64(Size(4)) {
		t.Errorf("file: mode %v uid %d gid %d size %d; want 0600 %d:%d %d", fi.Mode(), st.Uid, st.Gid, fi.Size(), nobody, nobody, Size(4))
	}
	if _, err := Init(reg.Mem, TypeCompletion, 4, FeatFutex); err != nil {
		t.Fatal(err)
	}

	// The client maps it through a symbolic link, as the ring file of the
	// symlink mode is.
	link := filepath.Join(dir, "data")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	cl, err := MapFile(link)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(cl.Mem)
	if err != nil || r.Type() != TypeCompletion {
		t.Fatalf("Open through the link: %v", err)
	}
	reg.Mem[HeaderSize] = 7
	if r.Entry(0)[0] != 7 {
		t.Error("the client does not see the daemon's write")
	}
	cl.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the client's Close touched the file: %v", err)
	}

	if _, err := NewFile(dir, "cq-1", Size(4), -1, -1); !errors.Is(err, os.ErrExist) {
		t.Errorf("NewFile over an existing file: %v", err)
	}
	if _, err := NewFile(dir, "data", Size(4), -1, -1); err == nil {
		t.Errorf("NewFile over a symbolic link succeeded")
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if _, err := NewFile(dir, name, Size(4), -1, -1); err == nil {
			t.Errorf("NewFile(%q) succeeded", name)
		}
	}
	if err := reg.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the file: %v", err)
	}
	// A failed NewFile leaves nothing behind.
	if _, err := NewFile(dir, "bad", -1, -1, -1); err == nil {
		t.Error("NewFile of -1 bytes succeeded")
	}
	if _, err := NewFile(dir, "big", 1<<62, -1, -1); err == nil {
		t.Error("NewFile of 2^62 bytes succeeded")
	}
	if _, err := os.Lstat(filepath.Join(dir, "big")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed NewFile left its file: %v", err)
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
