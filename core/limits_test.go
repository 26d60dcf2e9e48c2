package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
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
