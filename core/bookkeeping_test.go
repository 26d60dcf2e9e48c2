package core_test

import (
	"slices"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

func TestEPCount(t *testing.T) {
	var c core.EPCount
	if !c.Hold(2) || !c.Hold(2) {
		t.Fatal("Hold refused below the limit")
	}
	if c.Hold(2) {
		t.Fatal("Hold counted past the limit")
	}
	c.Release()
	if n := c.Open(); n != 1 {
		t.Fatalf("Open = %d after two holds and a release, want 1", n)
	}
	if !c.Hold(2) {
		t.Fatal("Hold refused after a release")
	}
}

func TestPendingReqs(t *testing.T) {
	var p core.PendingReqs[int]
	for i := range core.MaxPendingReqs {
		if !p.Add(i) {
			t.Fatalf("Add(%d) refused below the limit", i)
		}
	}
	if p.Add(-1) {
		t.Fatal("Add past MaxPendingReqs held the request")
	}
	if !p.Take(7) || p.Take(7) {
		t.Fatal("a request is taken once, and only once")
	}
	if p.Take(-1) {
		t.Fatal("took a request that was never held")
	}
	rest := p.Close()
	slices.Sort(rest)
	if len(rest) != core.MaxPendingReqs-1 || rest[0] != 0 || slices.Contains(rest, 7) {
		t.Fatalf("Close returned %d requests (first %v), want all but the taken one", len(rest), rest[:min(3, len(rest))])
	}
	if p.Add(5000) || p.Take(3) {
		t.Fatal("after Close, Add holds nothing and nothing is left to take")
	}
}
