package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
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

func TestCQOverrun(t *testing.T) {
	c := &CQ{obj: &Object{Kind: KindCQ, ID: "0"}, q: newQueue[CQEntry](), size: 1}
	for i := 0; i < CQOverflowFactor+3; i++ {
		c.post(CQEntry{Context: uint64(i)})
	}
	es, err := c.Read(context.Background(), 100, false)
	if err != nil || len(es) != 1 || es[0].Err != fi.EOVERRUN || es[0].OLen != 3 {
		t.Fatalf("first read = %v, %v; want one FI_EOVERRUN entry counting 3", es, err)
	}
	es, _ = c.Read(context.Background(), 100, false)
	if len(es) != CQOverflowFactor || es[0].Context != 0 {
		t.Fatalf("kept %d entries, want %d in order", len(es), CQOverflowFactor)
	}
}
