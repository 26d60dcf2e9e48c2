package core

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnlockedKeepsThePin: when a pinned worker comes back from an unlocked
// section on another thread, that thread is pinned to the engine's CPUs and
// the thread it left has the process's CPUs again. The move is the
// runtime's choice: the test blocks in the section until another goroutine
// readies it, which usually moves it, and tries until it moves.
func TestUnlockedKeepsThePin(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	if allowed.Count() < 2 {
		t.Skip("needs two CPUs to tell a pinned thread from the others")
	}
	var one unix.CPUSet
	for c := 0; one.Count() == 0; c++ {
		if allowed.IsSet(c) {
			one.Set(c)
		}
	}
	g := &group{e: &engine{logf: t.Logf}, cpus: &one, allowed: &allowed}
	type result struct {
		moved        bool
		left, now    unix.CPUSet
		leftErr, err error
	}
	res := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		g.pin()
		var r result
		for range 1000 {
			tid := unix.Gettid()
			g.unlocked(func() {
				ch := make(chan struct{})
				go func() {
					runtime.LockOSThread()
					close(ch)
				}()
				<-ch
			})
			if unix.Gettid() != tid {
				r.moved = true
				r.leftErr = unix.SchedGetaffinity(tid, &r.left)
				r.err = unix.SchedGetaffinity(0, &r.now)
				break
			}
		}
		res <- r
	}()
	r := <-res
	switch {
	case !r.moved:
		t.Skip("the runtime kept the goroutine on its thread 1000 times")
	case r.err != nil || r.now != one:
		t.Errorf("the thread the worker came back on may run on %v (%v); want only the engine's, %v", cpuList(&r.now), r.err, cpuList(&one))
	case r.leftErr == nil && r.left != allowed:
		t.Errorf("the thread the worker left may run on %v; want the process's CPUs, %v", cpuList(&r.left), cpuList(&allowed))
	}
}

func cpuList(s *unix.CPUSet) []int {
	var l []int
	for c := 0; c < 1024; c++ {
		if s.IsSet(c) {
			l = append(l, c)
		}
	}
	return l
}
