package core

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/internal/testcpu"
)

// TestGroupsByCPU: the engine puts endpoints without a CPU (attr/engine_cpu
// -1) into a shared group on the engine's CPUs and each placed endpoint
// into the group of its CPU, pinned there; a group never mixes the two or
// two CPUs, even when CPU 0 is the one placed (a group's zero value is not
// a placement); removing the last endpoint of a group ends it.
func TestGroupsByCPU(t *testing.T) {
	allowed, cpus := testcpu.Two(t)
	e := &engine{logf: t.Logf, allowed: &allowed}
	mk := func() *epRings {
		rs := &epRings{}
		for _, q := range []**workQueue{&rs.tx, &rs.rx} {
			mem, err := unix.Mmap(-1, 0, ring.Size(8), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Fatal(err)
			}
			// Unmapped after the groups stop: remove waits for the
			// worker's pass, and cleanups run last in, first out.
			t.Cleanup(func() { unix.Munmap(mem) })
			r, err := ring.Init(mem, ring.TypeWork, 8, ring.FeatFutex)
			if err != nil {
				t.Fatal(err)
			}
			*q = &workQueue{rs: rs, r: r}
		}
		return rs
	}
	placeOf := map[*epRings]int{}
	add := func(cpu int) *epRings {
		rs := mk()
		e.add(rs.tx, rs.rx, cpu)
		placeOf[rs] = cpu
		t.Cleanup(func() {
			if _, ok := placeOf[rs]; ok { // not removed by the test
				e.remove(rs)
			}
		})
		return rs
	}
	shared1, shared2 := add(-1), add(-1)
	a1, a2 := add(cpus[0]), add(cpus[0])
	b := add(cpus[1])
	if shared1.tx.g != shared2.tx.g || a1.tx.g != a2.tx.g {
		t.Error("endpoints of the same placement are in different groups")
	}
	if shared1.tx.g == a1.tx.g || shared1.tx.g == b.tx.g || a1.tx.g == b.tx.g {
		t.Error("endpoints of different placements share a group")
	}
	for rs, cpu := range placeOf {
		g := rs.tx.g
		if rs.rx.g != g {
			t.Errorf("endpoint placed on %d: its tx and rx queues are in different groups", cpu)
		}
		switch {
		case cpu < 0 && (g.placed || g.cpus != nil):
			t.Errorf("shared group: placed %v, CPUs %v; want a shared group on any CPU", g.placed, g.cpus)
		case cpu >= 0 && (!g.placed || g.cpu != cpu || g.cpus == nil || g.cpus.Count() != 1 || !g.cpus.IsSet(cpu)):
			t.Errorf("group of CPU %d: placed %v, cpu %d, CPUs %v", cpu, g.placed, g.cpu, g.cpus)
		}
	}
	if len(e.groups) != 3 {
		t.Errorf("%d groups for three placements", len(e.groups))
	}
	e.remove(b)
	delete(placeOf, b)
	if len(e.groups) != 2 {
		t.Errorf("%d groups after the only endpoint of CPU %d's left; want 2", len(e.groups), cpus[1])
	}
}
