package ring

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blockedIn reports whether a thread of process pid (0: this one) is blocked
// in system call nr with first argument addr (0: any) and second argument
// op (-1: any), from /proc/PID/task/TID/syscall.
func blockedIn(pid int, nr uintptr, addr uintptr, op int64) bool {
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	files, _ := filepath.Glob("/proc/" + proc + "/task/*/syscall")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fs := strings.Fields(string(b)) // "202 0xADDR 0xOP ..." or "running"
		if len(fs) < 3 || fs[0] != strconv.FormatUint(uint64(nr), 10) {
			continue
		}
		a, _ := strconv.ParseUint(strings.TrimPrefix(fs[1], "0x"), 16, 64)
		o, _ := strconv.ParseUint(strings.TrimPrefix(fs[2], "0x"), 16, 64)
		if (addr == 0 || uintptr(a) == addr) && (op < 0 || int64(o) == op) {
			return true
		}
	}
	return false
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func TestFutexWait(t *testing.T) {
	word := new(uint32)
	start := time.Now()
	if err := FutexWait(word, 0, 20*time.Millisecond); err != ErrTimeout {
		t.Errorf("FutexWait timeout = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("timed out after %v", d)
	}
	if err := FutexWait(word, 1, time.Hour); err != nil { // the word is 0: EAGAIN
		t.Errorf("FutexWait on a changed word = %v", err)
	}
	if err := FutexWake(word); err != nil {
		t.Errorf("FutexWake with no waiter: %v", err)
	}
	if err := FutexWait(nil, 0, time.Millisecond); err == nil || err == ErrTimeout {
		t.Errorf("FutexWait(nil) = %v", err)
	}

	done := make(chan error)
	go func() { done <- FutexWait(word, 0, 0) }()
	waitUntil(t, "the waiter sleeps", 10*time.Second, func() bool {
		return blockedIn(0, unix.SYS_FUTEX, uintptrOf(word), futexWait)
	})
	atomic.AddUint32(word, 1)
	FutexWake(word)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("woken FutexWait = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FutexWake did not wake the waiter")
	}
}

func TestFutexWaitvSecondOfThree(t *testing.T) {
	words := make([]uint32, 3)
	addrs := []*uint32{&words[0], &words[1], &words[2]}
	var done atomic.Bool
	go func() {
		// Wake until woken: a wake before the wait starts is lost, and the
		// value does not change, so the waiter cannot return EAGAIN.
		for !done.Load() {
			time.Sleep(2 * time.Millisecond)
			FutexWake(&words[1])
		}
	}()
	i, err := FutexWaitv(addrs, []uint32{0, 0, 0}, 10*time.Second)
	done.Store(true)
	if i != 1 || err != nil {
		t.Fatalf("FutexWaitv = %d, %v; want 1, nil", i, err)
	}
}

// TestFutexWaitvRings is the daemon's sleep: three work rings in shared
// memory, NeedWakeup on each, one futex_waitv on their wake words; a
// producer publishing into the second wakes it.
func TestFutexWaitvRings(t *testing.T) {
	var rings []*Ring
	var addrs []*uint32
	var vals []uint32
	for i := range 3 {
		reg, err := NewMemfd(fmt.Sprint("waitv-", i), Size(4))
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		r, err := Init(reg.Mem, TypeWork, 4, FeatFutex)
		if err != nil {
			t.Fatal(err)
		}
		rings = append(rings, r)
		addrs = append(addrs, r.WakeWord())
		vals = append(vals, atomic.LoadUint32(r.WakeWord()))
		r.SetFlags(NeedWakeup)
	}
	type result struct {
		i   int
		err error
	}
	done := make(chan result)
	go func() {
		for _, r := range rings {
			if r.Len() != 0 {
				done <- result{-2, nil}
				return
			}
		}
		i, err := FutexWaitv(addrs, vals, 10*time.Second)
		done <- result{i, err}
	}()
	waitUntil(t, "the waiter sleeps in futex_waitv", 10*time.Second, func() bool {
		return blockedIn(0, unix.SYS_FUTEX_WAITV, 0, 3) // second argument: 3 words
	})
	e, _ := rings[1].Reserve()
	(&WR{Op: OpSend, Context: 42}).Encode(e)
	rings[1].Publish(1)
	res := <-done
	if res.i != 1 || res.err != nil {
		t.Fatalf("FutexWaitv = %d, %v; want 1, nil", res.i, res.err)
	}
	if w, _ := DecodeWR(rings[1].Entry(0)); w.Context != 42 || rings[1].Len() != 1 {
		t.Errorf("entry %+v", w)
	}
}

func TestFutexWaitvErrors(t *testing.T) {
	words := make([]uint32, MaxWaitv+1)
	addrs := make([]*uint32, len(words))
	for i := range words {
		addrs[i] = &words[i]
	}
	vals := make([]uint32, len(words))

	start := time.Now()
	if i, err := FutexWaitv(addrs[:3], vals[:3], 20*time.Millisecond); i != -1 || err != ErrTimeout {
		t.Errorf("timeout: %d, %v", i, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("timed out after %v", d)
	}
	if i, err := FutexWaitv(addrs[:MaxWaitv], vals[:MaxWaitv], time.Millisecond); i != -1 || err != ErrTimeout {
		t.Errorf("%d words: %d, %v", MaxWaitv, i, err)
	}
	words[2] = 7 // EAGAIN: look again
	if i, err := FutexWaitv(addrs[:3], vals[:3], time.Hour); i != -1 || err != nil {
		t.Errorf("changed word: %d, %v", i, err)
	}
	for _, c := range []struct {
		name  string
		addrs []*uint32
		vals  []uint32
	}{
		{"no words", nil, nil},
		{"too many", addrs, vals},
		{"lengths differ", addrs[:3], vals[:2]},
		{"nil word", []*uint32{addrs[0], nil}, vals[:2]},
	} {
		if i, err := FutexWaitv(c.addrs, c.vals, time.Millisecond); i != -1 || err == nil || err == ErrTimeout {
			t.Errorf("%s: %d, %v", c.name, i, err)
		}
	}
}
