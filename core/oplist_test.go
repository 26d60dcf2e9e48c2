package core

import (
	"slices"
	"testing"
)

// TestOpList: an endpoint's posted operations, linked through the Ops,
// in any order of removal; removing an Op that is not listed, or listed
// by another endpoint, changes nothing, and adding a listed Op again
// makes no loop.
func TestOpList(t *testing.T) {
	var l opList
	ops := make([]*Op, 4)
	for i := range ops {
		ops[i] = &Op{Context: uint64(i)}
		l.add(ops[i])
	}
	listed := func() []uint64 {
		var cs []uint64
		for op := l.head; op != nil; op = op.next {
			cs = append(cs, op.Context)
		}
		return cs
	}
	check := func(want ...uint64) {
		t.Helper()
		if got := listed(); !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	check(3, 2, 1, 0)
	l.remove(ops[1]) // in the middle
	check(3, 2, 0)
	l.remove(ops[3]) // the head
	check(2, 0)
	l.remove(ops[1]) // not listed any more
	l.remove(&Op{Context: 9})
	check(2, 0)
	l.remove(ops[0]) // the tail
	l.remove(ops[2])
	check()
	l.add(ops[1])
	l.add(ops[1]) // listed already: no loop
	check(1)

	// An Op listed by another endpoint is not this list's to remove.
	var other opList
	other.add(ops[2])
	l.add(ops[3])
	l.remove(ops[2])
	check(3, 1)
	if other.head != ops[2] {
		t.Fatal("removing another list's Op changed that list")
	}
}
