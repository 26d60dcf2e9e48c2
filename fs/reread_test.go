package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// TestRereadAtZero: a generated file kept open gives its current text to
// every read at offset 0 (a counter's value after add), and a read at a
// later offset continues the text the read at 0 rendered.
func TestRereadAtZero(t *testing.T) {
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
	dir := filepath.Join(mnt, "tcp", "lo", "cntr", "c")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	f, err := os.Open(filepath.Join(dir, "value"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(off int64) string {
		t.Helper()
		b := make([]byte, 32)
		n, err := f.ReadAt(b, off)
		if n == 0 && err != nil {
			return ""
		}
		return string(b[:n])
	}
	if got := read(0); got != "0\n" {
		t.Fatalf("value = %q, want 0", got)
	}
	for _, add := range []string{"add 5", "add 1000"} {
		if err := os.WriteFile(filepath.Join(dir, "ctl"), []byte(add), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(0); got != "1005\n" {
		t.Errorf("value read again at 0 = %q, want 1005", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "ctl"), []byte("set 7"), 0); err != nil {
		t.Fatal(err)
	}
	if got := read(2); got != "05\n" {
		t.Errorf("value at offset 2 = %q, want the rest of the text read at 0, 05", got)
	}
}
