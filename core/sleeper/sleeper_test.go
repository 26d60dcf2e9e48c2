package sleeper

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/ring"
)

// start is New, skipping the test where the kernel has no io_uring futex
// operations (the engine then waits with futex_waitv).
func start(t *testing.T) *Sleeper {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Skipf("no io_uring futex wait here: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// wake bumps and wakes the word w, as a producer does.
func wake(w *uint32) {
	atomic.AddUint32(w, 1)
	ring.FutexWake(w)
}

// "until one of the words addrs[i] is woken": Wait returns the index of
// the word woken, and not before.
func TestWaitWoken(t *testing.T) {
	s := start(t)
	words := make([]uint32, 3)
	addrs := []*uint32{&words[0], &words[1], &words[2]}
	got := make(chan int, 1)
	go func() {
		i, err := s.Wait(addrs, []uint32{0, 0, 0}, 0)
		if err != nil {
			t.Error(err)
		}
		got <- i
	}()
	select {
	case i := <-got:
		t.Fatalf("Wait returned %d before a wake-up", i)
	case <-time.After(50 * time.Millisecond):
	}
	wake(&words[2])
	select {
	case i := <-got:
		if i != 2 {
			t.Errorf("Wait returned %d, want 2 (the word woken)", i)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the wake-up")
	}
}

// "as long as every addrs[i] holds vals[i]": a word that does not makes
// Wait return at once, -1 and nil (look again).
func TestWaitValueChanged(t *testing.T) {
	s := start(t)
	var a, b uint32 = 0, 7
	i, err := s.Wait([]*uint32{&a, &b}, []uint32{0, 6}, 0)
	if i != -1 || err != nil {
		t.Errorf("Wait on a word that moved: %d, %v; want -1, nil", i, err)
	}
}

// The timeout: ring.ErrTimeout after it, with the request cancelled (a
// later wake-up of the word finds no waiter left to complete).
func TestWaitTimeout(t *testing.T) {
	s := start(t)
	var w uint32
	t0 := time.Now()
	i, err := s.Wait([]*uint32{&w}, []uint32{0}, 20*time.Millisecond)
	if i != -1 || err != ring.ErrTimeout {
		t.Fatalf("Wait: %d, %v; want -1, ErrTimeout", i, err)
	}
	if d := time.Since(t0); d < 20*time.Millisecond {
		t.Errorf("timed out after %v, before 20ms", d)
	}
	// The sleeper still works after a cancel.
	go func() { time.Sleep(10 * time.Millisecond); wake(&w) }()
	if i, err := s.Wait([]*uint32{&w}, []uint32{atomic.LoadUint32(&w)}, 5*time.Second); err != nil || i != 0 {
		t.Errorf("Wait after a timeout: %d, %v; want 0, nil", i, err)
	}
}

// Bad arguments are refused, as futex_waitv(2) refuses them.
func TestWaitBadArguments(t *testing.T) {
	s := start(t)
	words := make([]uint32, ring.MaxWaitv+1)
	addrs := make([]*uint32, len(words))
	for i := range words {
		addrs[i] = &words[i]
	}
	vals := make([]uint32, len(words))
	if _, err := s.Wait(addrs, vals, 0); err == nil {
		t.Errorf("Wait on %d words: no error", len(words))
	}
	if _, err := s.Wait(nil, nil, 0); err == nil {
		t.Error("Wait on no word: no error")
	}
	if _, err := s.Wait(addrs[:2], vals[:1], 0); err == nil {
		t.Error("Wait on 2 words with 1 value: no error")
	}
}

// threads is the number of threads of this process.
func threads(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// The point of the sleeper: 1,000 goroutines waiting at once hold no
// thread each (futex_waitv would hold 1,000), and each is woken by its
// own word.
func TestManyWaitersFewThreads(t *testing.T) {
	s := start(t)
	const n = 1000 // more than the SQ's 256 entries and the CQ's 512
	before := threads(t)
	words := make([]uint32, n)
	done := make(chan int, n)
	for i := range n {
		go func() {
			j, err := s.Wait([]*uint32{&words[i]}, []uint32{0}, 0)
			if err != nil || j != 0 {
				t.Errorf("waiter %d: %d, %v", i, j, err)
			}
			done <- i
		}()
	}
	// Wait until all are submitted: the sleeper's live map holds them.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if len(done) > 0 {
			t.Fatalf("waiter %d returned before its wake-up", <-done)
		}
		if s.Waiting() == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waits submitted after 10s", s.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if d := threads(t) - before; d > 8 {
		t.Errorf("%d goroutines waiting took %d more threads, want a handful", n, d)
	}
	for i := range n {
		wake(&words[i])
	}
	seen := make([]bool, n)
	for range n {
		select {
		case i := <-done:
			seen[i] = true
		case <-time.After(10 * time.Second):
			t.Fatal("not every waiter woke")
		}
	}
	runtime.KeepAlive(words)
}

// Close makes every Wait under way, and every later one, return an
// error.
func TestClose(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Skipf("no io_uring futex wait here: %v", err)
	}
	var w uint32
	got := make(chan error, 1)
	go func() {
		_, err := s.Wait([]*uint32{&w}, []uint32{0}, 0)
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-got:
		if err != ErrClosed {
			t.Errorf("Wait under way at Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Wait under way")
	}
	if _, err := s.Wait([]*uint32{&w}, []uint32{0}, 0); err != ErrClosed {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
}

// benchmarkPingPong passes a token between two goroutines, each asleep in
// wait on its own word until the other wakes it: an op is two wake-ups.
func benchmarkPingPong(b *testing.B, wait func(w *uint32, v uint32)) {
	var words [2]uint32
	done := make(chan struct{})
	go func() {
		for i := 0; i < b.N; i++ {
			wait(&words[1], uint32(i))
			wake(&words[0])
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wake(&words[1])
		wait(&words[0], uint32(i))
	}
	<-done
}

// BenchmarkWakeSleeper is a wake-up through the sleeper (its thread's
// hand-off, then the Go scheduler's), as a sleeping engine group's; an op
// is two.
func BenchmarkWakeSleeper(b *testing.B) {
	s, err := New()
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	benchmarkPingPong(b, func(w *uint32, v uint32) {
		for atomic.LoadUint32(w) == v {
			s.Wait([]*uint32{w}, []uint32{v}, 0)
		}
	})
}

// BenchmarkWakeFutexWaitv is the same through futex_waitv(2) in the
// waiting goroutine's own locked thread, as an engine group waits where
// the kernel has no io_uring futex wait.
func BenchmarkWakeFutexWaitv(b *testing.B) {
	benchmarkPingPong(b, func(w *uint32, v uint32) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for atomic.LoadUint32(w) == v {
			ring.FutexWaitv([]*uint32{w}, []uint32{v}, 0)
		}
	})
}
