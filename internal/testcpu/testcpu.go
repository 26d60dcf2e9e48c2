// Package testcpu finds CPUs for the tests that pin threads to them.
package testcpu

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Two returns the CPUs the calling thread may run on and the first two of
// them, or skips t.
func Two(t testing.TB) (unix.CPUSet, []int) {
	t.Helper()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpus := List(&allowed)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs to tell a pinned thread from the others")
	}
	return allowed, cpus[:2]
}

// List returns the CPUs in s, in increasing order.
func List(s *unix.CPUSet) []int {
	var l []int
	for c := 0; c < 1024; c++ {
		if s.IsSet(c) {
			l = append(l, c)
		}
	}
	return l
}
