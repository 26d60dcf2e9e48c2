package core

import (
	"context"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
)

// queue is a FIFO that readers can block on: the one mechanism behind CQ and
// EQ events and a passive endpoint's accepted connections.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	head   int
	signal chan struct{} // closed and replaced when items arrive or the queue closes
	closed bool
}

func newQueue[T any]() *queue[T] { return &queue[T]{signal: make(chan struct{})} }

// push appends v and wakes readers. It returns false once the queue is closed.
func (q *queue[T]) push(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.items = append(q.items, v)
	q.wakeLocked()
	return true
}

func (q *queue[T]) wakeLocked() {
	close(q.signal)
	q.signal = make(chan struct{})
}

// wake wakes blocked readers without adding anything (fi_cq_signal).
func (q *queue[T]) wake() {
	q.mu.Lock()
	q.wakeLocked()
	q.mu.Unlock()
}

// len is the number of queued items.
func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// pop removes up to max items. With block it waits until at least one is
// there, ctx is done (fi.EINTR... as fi.ECANCELED) or the queue closes
// (fi.ESHUTDOWN); without, an empty queue gives fi.EAGAIN. A wake without
// items returns no items and no error.
func (q *queue[T]) pop(ctx context.Context, max int, block bool) ([]T, error) {
	q.mu.Lock()
	for len(q.items) == q.head {
		if q.closed {
			q.mu.Unlock()
			return nil, Errorf(fi.ESHUTDOWN, "closed")
		}
		if !block {
			q.mu.Unlock()
			return nil, Errorf(fi.EAGAIN, "nothing to read")
		}
		sig := q.signal
		q.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return nil, Errorf(fi.EINTR, "interrupted")
		}
		q.mu.Lock()
		if len(q.items) == q.head && !q.closed {
			q.mu.Unlock()
			return nil, nil // woken by wake
		}
	}
	n := min(max, len(q.items)-q.head)
	out := make([]T, n)
	copy(out, q.items[q.head:q.head+n])
	var zero T
	for i := q.head; i < q.head+n; i++ {
		q.items[i] = zero
	}
	q.head += n
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	q.mu.Unlock()
	return out, nil
}

// ready reports whether a pop would not block now (items, or closed), and
// gives a channel closed when that may change: poll(2) on the queue's file.
func (q *queue[T]) ready() (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) > q.head || q.closed, q.signal
}

// close wakes every reader; later pushes are refused.
func (q *queue[T]) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.wakeLocked()
	}
}

// readerLock serialises the readers of a data file, whose reads block
// while they hold it. A poll must not wait for it: tryLock takes it if it
// is free, and otherwise gives a channel closed once the reader holding it
// lets go (then the file's readiness may have changed).
type readerLock struct {
	mu   sync.Mutex
	sig  sync.Mutex    // orders tryLock's look with unlock's signal
	free chan struct{} // made by a failed tryLock; closed by the next unlock
}

func (l *readerLock) lock() { l.mu.Lock() }

// unlock lets go, then closes the channel a failed tryLock handed out: a
// tryLock that failed before the release gets the channel closed here; one
// that comes after finds the lock free or held by the next reader, whose
// unlock closes the channel.
func (l *readerLock) unlock() {
	l.mu.Unlock()
	l.sig.Lock()
	if l.free != nil {
		close(l.free)
		l.free = nil
	}
	l.sig.Unlock()
}

func (l *readerLock) tryLock() (bool, <-chan struct{}) {
	l.sig.Lock()
	defer l.sig.Unlock()
	if l.mu.TryLock() {
		return true, nil
	}
	if l.free == nil {
		l.free = make(chan struct{})
	}
	return false, l.free
}
