package core

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/internal/testcpu"
)

// TestUnlockedKeepsThePin: a pinned worker is on a pinned thread whenever
// it holds its thread, whichever thread it comes back on from an unlocked
// pass through the Go scheduler, and no other thread of the process is
// left pinned: not one it left, not one the runtime started during the
// pass. Two groups share the CPU, as groups do past 127 queues. In each
// pass goroutines that block in system calls take the idle threads, so the
// runtime starts new ones, and the worker often comes back on another
// thread.
func TestUnlockedKeepsThePin(t *testing.T) {
	allowed, cpus := testcpu.Two(t)
	var one unix.CPUSet
	one.Set(cpus[0])
	var (
		sleepers sync.WaitGroup
		workers  sync.WaitGroup // running
		looped   sync.WaitGroup // done with their passes, holding their threads
		mu       sync.Mutex
		moves    int
		failures []string
		tids     = map[int]bool{} // the workers' threads at the end
	)
	release := make(chan struct{})
	// However the test ends, the workers let go of their pinned threads.
	t.Cleanup(func() {
		close(release)
		workers.Wait()
	})
	worker := func() {
		defer workers.Done()
		runtime.LockOSThread() // never unlocked at the end: the thread ends with the goroutine
		g := &group{e: &engine{logf: t.Logf}, cpus: &one, allowed: &allowed}
		g.pin()
		for i := range 300 {
			tid := unix.Gettid()
			g.unlocked(func() {
				for range 2 {
					sleepers.Add(1)
					go func() {
						defer sleepers.Done()
						unix.Nanosleep(&unix.Timespec{Nsec: 200_000}, nil)
					}()
				}
				runtime.Gosched()
			})
			var now unix.CPUSet
			err := unix.SchedGetaffinity(0, &now)
			mu.Lock()
			if unix.Gettid() != tid {
				moves++
			}
			if err != nil || now != one {
				failures = append(failures, fmt.Sprintf("after %d passes the worker's thread may run on %v (%v)", i+1, testcpu.List(&now), err))
			}
			mu.Unlock()
		}
		mu.Lock()
		tids[unix.Gettid()] = true
		mu.Unlock()
		looped.Done()
		<-release                        // hold the pinned thread while the test looks at the others
		g.setCPUs(&allowed, "unpinning") // as a group that ends does: its thread may be the main one, which outlives it
	}
	workers.Add(2)
	looped.Add(2)
	go worker()
	go worker()
	looped.Wait()
	sleepers.Wait()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		tid, _ := strconv.Atoi(ent.Name())
		var set unix.CPUSet
		if tids[tid] || unix.SchedGetaffinity(tid, &set) != nil {
			continue // a worker's, or ended
		}
		if set != allowed {
			t.Errorf("thread %d, not a worker's, may run on %v; want the process's CPUs, %v", tid, testcpu.List(&set), testcpu.List(&allowed))
		}
	}
	for _, f := range failures[:min(len(failures), 5)] {
		t.Error(f)
	}
	t.Logf("the workers came back on another thread %d times in 600 passes", moves)
}
