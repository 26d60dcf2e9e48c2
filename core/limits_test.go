package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/shm"
)

// A failed write of megabytes leaves an err of at most core.MaxErrLen
// bytes, ending in "..." where it was cut.
func TestErrIsBounded(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindEP, "big")
	huge := strings.Repeat("x", 3<<20)
	o.SetErr(core.Errorf(fi.EINVAL, "bad command %q", huge))
	got := o.Err()
	if len(got) > core.MaxErrLen {
		t.Fatalf("err keeps %d bytes, want at most %d", len(got), core.MaxErrLen)
	}
	if !strings.HasPrefix(got, "bad command \"xxx") || !strings.HasSuffix(got, "...") {
		t.Errorf("err = %.40q...%q, want the sentence's start and \"...\"", got, got[max(0, len(got)-10):])
	}
	o.SetErr(errors.New("short"))
	if o.Err() != "short" {
		t.Errorf("short err = %q", o.Err())
	}
}

// Shared memory (regions and rings) is charged to its owner as
// MemoryBytes: over the limit, reg fails with FI_ENOSPC and a sentence
// naming the user, the resource and the limit; closing gives it back.
func TestMemoryQuota(t *testing.T) {
	f, d := loFabric(t)
	const uid = 1000
	f.SetLimit(core.MemoryBytes, 1<<20)

	small, err := regMRAs(t, d, uid, "small", 512<<10, "", "")
	if err != nil {
		t.Fatalf("reg of 512 KiB under a 1 MiB limit: %v", err)
	}
	if got := f.Held(uid)[core.MemoryBytes]; got != 512<<10 {
		t.Errorf("uid %d holds %d memory bytes, want %d", uid, got, 512<<10)
	}
	big, err := regMRAs(t, d, uid, "big", 768<<10, "", "")
	wantCode(t, "reg over the limit", err, fi.ENOSPC)
	if s := fmt.Sprint(err); !strings.Contains(s, "uid 1000") || !strings.Contains(s, "memory_bytes") || !strings.Contains(s, "1048576") {
		t.Errorf("err = %q, want the user, the resource and the limit", s)
	}
	if got := f.Held(uid)[core.MemoryBytes]; got != 512<<10 {
		t.Errorf("after the refused reg uid %d holds %d memory bytes, want %d", uid, got, 512<<10)
	}
	// root is counted, never limited
	if _, err := regMRAs(t, d, 0, "root", 2<<20, "", ""); err != nil {
		t.Errorf("root's reg over the limit: %v", err)
	}
	for _, o := range []*core.Object{small, big} {
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Held(uid)[core.MemoryBytes]; got != 0 {
		t.Errorf("after closing its regions uid %d holds %d memory bytes", uid, got)
	}
	if !strings.Contains(f.LimitsText(uid), "\nmemory_bytes 0 1048576\n") {
		t.Errorf("LimitsText = %q", f.LimitsText(uid))
	}
}

// A descriptor the daemon makes for a user other than root never takes
// one of its last FDReserve: shared memory that lands there is closed and
// the reg fails with EMFILE, its bytes given back; root's still works.
// (In the symlink mode: in passthrough a region keeps no descriptor.)
func TestFDReserveSharedMemory(t *testing.T) {
	f, d := loFabric(t)
	mem, err := shm.New(shm.MapSymlink)
	if err != nil {
		t.Fatal(err)
	}
	f.SetShm(mem)
	defer func(n int) { core.FDReserve = n }(core.FDReserve)
	core.FDReserve = 1 << 30 // every descriptor is in the reserve
	_, err = regMRAs(t, d, 1000, "user", 4096, "", "")
	wantCode(t, "uid 1000's reg in the reserve", err, fi.EMFILE)
	if s := fmt.Sprint(err); !strings.Contains(s, "kept for its own use") {
		t.Errorf("err = %q, want it to say the descriptors are the daemon's", s)
	}
	if got := f.Held(1000)[core.MemoryBytes]; got != 0 {
		t.Errorf("after the refused reg uid 1000 holds %d memory bytes", got)
	}
	if _, err := regMRAs(t, d, 0, "root", 4096, "", ""); err != nil {
		t.Errorf("root's reg in the reserve: %v", err)
	}
}
