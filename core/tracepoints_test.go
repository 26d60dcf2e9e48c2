package core_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/trace"
)

// TestTraceRMAAndErrors: with rma and error chosen, an RMA read shows as
// posted and completed with its length, a read with a bad key as failed,
// with its CQ error entry; nothing of the other categories comes.
func TestTraceRMAAndErrors(t *testing.T) {
	r, err := trace.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		trace.Ctl(0, "clear all")
	})
	if err := trace.Ctl(0, "only rma error"); err != nil {
		t.Fatal(err)
	}
	d := lo(t)
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	reg := func(name, access string) *core.MR {
		o := create(t, d, core.KindMR, name)
		for _, at := range o.Impl.Attrs() {
			switch at.Name {
			case "len":
				at.Set("64")
			case "access":
				at.Set(access)
			}
		}
		run(t, o, "reg")
		return o.Impl.(*core.MR)
	}
	reg("x", "FI_READ,FI_WRITE")
	y := reg("y", "FI_REMOTE_READ")
	run(t, a, fmt.Sprintf("read x 0 8 0 %#x", y.Key()))
	if err := a.Ctl(context.Background(), 0, fmt.Sprintf("read x 0 8 0 %#x", y.Key()+1)); err == nil {
		t.Fatal("a read with a bad key succeeded")
	}
	want := []string{
		`^\S+ rma tcp/lo/ep/a 0 read posted 8 bytes$`,
		`^\S+ rma tcp/lo/ep/a 0 read completed 8 bytes$`,
		`^\S+ rma tcp/lo/ep/a 0 read failed: FI_E\w+ \(.+\)$`,
		`^\S+ error tcp/lo/cq/c 0 error entry .*err=`,
	}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lines, _ := r.Read(context.Background(), 1000, false)
		got = append(got, lines...)
		missing := ""
		for _, w := range want {
			if !anyMatch(got, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace line matching %q in:\n%s", missing, strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if f := strings.Fields(l); len(f) < 2 || (f[1] != "rma" && f[1] != "error") {
			t.Errorf("line %q of a category not chosen", l)
		}
	}
}

func anyMatch(lines []string, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
