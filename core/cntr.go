package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Cntr is a counter (fi_cntr_open): a value and an error count that
// operations bump, and that readers can wait on.
//
// Updates are on the data path (every completion of a bound endpoint), so
// they are an atomic add and, only while a goroutine is in Wait, a wake-up.
// Wait registers in waiters before it reads the counts, and an update
// changes a count before it reads waiters; Go's atomics being sequentially
// consistent, a waiter either sees the new count or is woken.
type Cntr struct {
	obj *Object

	value   atomic.Uint64
	errs    atomic.Uint64
	waiters atomic.Int32 // goroutines in Wait
	bound   atomic.Int32 // endpoint bindings, one per bind flag

	// stats: completions counted, and the application's adds and sets
	successes, failures, adds, sets atomic.Uint64

	mu     sync.Mutex
	signal chan struct{} // closed and replaced to wake the waiters
	closed bool
}

func newCntr(o *Object) (Impl, error) { return &Cntr{obj: o, signal: make(chan struct{})}, nil }

// Value is fi_cntr_read.
func (c *Cntr) Value() uint64 { return c.value.Load() }

// Errors is fi_cntr_readerr.
func (c *Cntr) Errors() uint64 { return c.errs.Load() }

// Add is fi_cntr_add.
func (c *Cntr) Add(n uint64) {
	c.adds.Add(1)
	c.value.Add(n)
	c.changed()
}

// Set is fi_cntr_set.
func (c *Cntr) Set(n uint64) {
	c.sets.Add(1)
	c.value.Store(n)
	c.changed()
}

// AddErr is fi_cntr_adderr.
func (c *Cntr) AddErr(n uint64) {
	c.adds.Add(1)
	c.errs.Add(n)
	c.changed()
}

// SetErr is fi_cntr_seterr.
func (c *Cntr) SetErr(n uint64) {
	c.sets.Add(1)
	c.errs.Store(n)
	c.changed()
}

// completed counts one completion of a bound endpoint's operation: in the
// value, or in the error count if it failed.
func (c *Cntr) completed(failed bool) {
	if failed {
		c.failures.Add(1)
		c.errs.Add(1)
	} else {
		c.successes.Add(1)
		c.value.Add(1)
	}
	c.changed()
}

// changed wakes the goroutines in Wait, if there are any.
func (c *Cntr) changed() {
	if c.waiters.Load() == 0 {
		return
	}
	c.mu.Lock()
	c.wakeLocked()
	c.mu.Unlock()
}

func (c *Cntr) wakeLocked() {
	close(c.signal)
	c.signal = make(chan struct{})
}

// Wait is fi_cntr_wait: it returns when the value reaches threshold, with
// fi.ETIMEDOUT after timeout (0: no limit), with fi.EAVAIL when the error
// count changes while waiting ("Any change in a counter's error value will
// unblock any thread inside fi_cntr_wait"), or when ctx ends.
func (c *Cntr) Wait(ctx context.Context, threshold uint64, timeout time.Duration) error {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	c.waiters.Add(1)
	defer c.waiters.Add(-1)
	errs := c.errs.Load()
	for {
		c.mu.Lock()
		sig, closed := c.signal, c.closed
		c.mu.Unlock()
		switch {
		case c.value.Load() >= threshold:
			return nil
		case closed:
			return Errorf(fi.ESHUTDOWN, "%s closed", c.obj)
		case c.errs.Load() != errs:
			return Errorf(fi.EAVAIL, "%s error count rose to %d", c.obj, c.errs.Load())
		}
		select {
		case <-sig:
		case <-expire:
			return Errorf(fi.ETIMEDOUT, "%s is %d after %v, waiting for %d", c.obj, c.Value(), timeout, threshold)
		case <-ctx.Done():
			return Errorf(fi.EINTR, "interrupted")
		}
	}
}

// bind records a binding of an endpoint for one flag; the counter cannot
// be removed until unbind.
func (c *Cntr) bind() error {
	if err := c.obj.hold(); err != nil {
		return err
	}
	c.bound.Add(1)
	return nil
}

func (c *Cntr) unbind() {
	c.bound.Add(-1)
	c.obj.drop()
}

func (c *Cntr) Status() Record {
	return Record{num("value", c.Value()), num("errors", c.Errors()), num("bound", c.bound.Load())}
}

func (c *Cntr) Attrs() []Attr {
	return []Attr{
		{Name: "events", Get: func() string { return fi.CNTR_EVENTS_COMP.String() }},
		{Name: "wait_obj", Get: func() string { return fi.WAIT_UNSPEC.String() }},
		{Name: "flags", Get: func() string { return "0" }},
	}
}

func (c *Cntr) Close() error {
	c.mu.Lock()
	c.closed = true
	c.wakeLocked()
	c.mu.Unlock()
	return nil
}
