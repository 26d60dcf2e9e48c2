package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/shm"
)

func TestQueue(t *testing.T) {
	q := newQueue[int]()
	for i := 0; i < 5; i++ {
		q.push(i)
	}
	got, err := q.pop(context.Background(), 3, false)
	if err != nil || len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("pop 3 = %v, %v", got, err)
	}
	got, _ = q.pop(context.Background(), 10, false)
	if len(got) != 2 || got[1] != 4 {
		t.Fatalf("pop rest = %v", got)
	}
	if _, err := q.pop(context.Background(), 1, false); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("empty non-blocking pop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := q.pop(ctx, 1, true); !errors.Is(err, fi.EINTR) {
		t.Errorf("cancelled blocking pop: %v", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); q.push(7) }()
	if got, err := q.pop(context.Background(), 1, true); err != nil || got[0] != 7 {
		t.Errorf("blocking pop = %v, %v", got, err)
	}
	go func() { time.Sleep(10 * time.Millisecond); q.close() }()
	if _, err := q.pop(context.Background(), 1, true); !errors.Is(err, fi.ESHUTDOWN) {
		t.Errorf("pop on closed queue: %v", err)
	}
	if q.push(1) {
		t.Error("push after close accepted")
	}
}

// testCQ is a CQ of size entries outside any fabric, closed when the test
// ends.
func testCQ(t *testing.T, size uint64) *CQ {
	mem, err := shm.New(shm.MapSymlink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	d := &Domain{Name: "test", fab: &Fabric{Shm: mem}}
	impl, _ := newCQ(&Object{Kind: KindCQ, ID: "0", Dom: d, Serial: 1})
	c := impl.(*CQ)
	c.size = size
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCQOverflowAndOverrun(t *testing.T) {
	c := testCQ(t, 1)
	// The ring holds 1; 16 more wait behind it; 3 more are overruns.
	for i := 0; i < 1+CQOverflowFactor+3; i++ {
		c.post(CQEntry{Context: uint64(i)})
	}
	if c.r.Flags()&ring.Overflow == 0 {
		t.Error("RING_OVERFLOW not set while completions wait")
	}
	var got []CQEntry
	for len(got) < 1+CQOverflowFactor+1 {
		es, err := c.Read(context.Background(), 100, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, es...)
	}
	for i := 0; i <= CQOverflowFactor; i++ {
		if got[i].Context != uint64(i) || got[i].Err != 0 {
			t.Fatalf("entry %d = %v, want context %d in order", i, got[i], i)
		}
	}
	if last := got[len(got)-1]; last.Err != fi.EOVERRUN || last.OLen != 3 {
		t.Errorf("last entry %v, want FI_EOVERRUN counting 3", last)
	}
	if c.r.Flags()&ring.Overflow != 0 {
		t.Error("RING_OVERFLOW still set after draining")
	}
	if st := c.Status().String(); !strings.Contains(st, " overruns=3 ") {
		t.Errorf("status after the FI_EOVERRUN entry = %q, want overruns=3 (completions lost)", st)
	}
}

// TestCQOverflowMax: a large CQ whose application does not read holds at
// most CQOverflowMax completions beyond its ring, not 16 times its size.
func TestCQOverflowMax(t *testing.T) {
	c := testCQ(t, 8192) // 16 times that is more than CQOverflowMax
	for i := 0; i < 8192+CQOverflowMax+5; i++ {
		c.post(CQEntry{Context: uint64(i)})
	}
	c.mu.Lock()
	held, overruns := len(c.overflow), c.overruns
	c.mu.Unlock()
	if held != CQOverflowMax || overruns != 5 {
		t.Errorf("held %d completions and counted %d overruns; want %d and 5", held, overruns, CQOverflowMax)
	}
}
