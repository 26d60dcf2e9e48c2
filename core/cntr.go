package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Cntr is a counter (fi_cntr_open): a value and an error count that
// operations bump, and that readers can wait on.
type Cntr struct {
	obj *Object

	mu     sync.Mutex
	value  uint64
	errs   uint64
	signal chan struct{} // closed and replaced on every change
	closed bool
	bound  int
}

func newCntr(o *Object) (Impl, error) { return &Cntr{obj: o, signal: make(chan struct{})}, nil }

func (c *Cntr) changedLocked() {
	close(c.signal)
	c.signal = make(chan struct{})
}

// Value is fi_cntr_read.
func (c *Cntr) Value() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value
}

// Errors is fi_cntr_readerr.
func (c *Cntr) Errors() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs
}

// Add is fi_cntr_add.
func (c *Cntr) Add(n uint64) { c.update(func() { c.value += n }) }

// Set is fi_cntr_set.
func (c *Cntr) Set(n uint64) { c.update(func() { c.value = n }) }

// AddErr is fi_cntr_adderr.
func (c *Cntr) AddErr(n uint64) { c.update(func() { c.errs += n }) }

// SetErr is fi_cntr_seterr.
func (c *Cntr) SetErr(n uint64) { c.update(func() { c.errs = n }) }

func (c *Cntr) update(f func()) {
	c.mu.Lock()
	f()
	c.changedLocked()
	c.mu.Unlock()
}

// Wait is fi_cntr_wait: it returns when the value reaches threshold, with
// fi.ETIMEDOUT after timeout (0: no limit), with fi.EAVAIL when the error
// count changes while waiting, or when ctx ends.
func (c *Cntr) Wait(ctx context.Context, threshold uint64, timeout time.Duration) error {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	c.mu.Lock()
	errs := c.errs
	for c.value < threshold {
		if c.closed {
			c.mu.Unlock()
			return Errorf(fi.ESHUTDOWN, "%s closed", c.obj)
		}
		if c.errs != errs {
			c.mu.Unlock()
			return Errorf(fi.EAVAIL, "%s error count rose to %d", c.obj, c.errs)
		}
		sig := c.signal
		c.mu.Unlock()
		select {
		case <-sig:
		case <-expire:
			return Errorf(fi.ETIMEDOUT, "%s is %d after %v, waiting for %d", c.obj, c.Value(), timeout, threshold)
		case <-ctx.Done():
			return Errorf(fi.EINTR, "interrupted")
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}

func (c *Cntr) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("value=%d errors=%d bound=%d", c.value, c.errs, c.bound)
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
	c.changedLocked()
	c.mu.Unlock()
	return nil
}

// ParseUint parses a decimal or 0x hex count for a file write.
func ParseUint(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, Errorf(fi.EINVAL, "bad number %q", s)
	}
	return v, nil
}
