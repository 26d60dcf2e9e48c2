package core_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// exhaustFDs lowers RLIMIT_NOFILE and opens descriptors until none is
// left; cleanup closes them and restores the limit.
func exhaustFDs(t *testing.T) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	})
	probe, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(probe.Fd()) + 64
	probe.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
}

// A shared-memory allocation that fails for want of a descriptor says
// EMFILE, not ENOMEM.
func TestOutOfDescriptorsIsEMFILE(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindCQ, "")
	exhaustFDs(t)
	_, err := o.Impl.(*core.CQ).Region()
	if core.Code(err) != fi.EMFILE {
		t.Fatalf("CQ ring without descriptors: %v (code %v), want EMFILE", err, core.Code(err))
	}
}
