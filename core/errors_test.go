package core_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// TestErrorKeepsItsCause checks that an Error is a sentence with one
// prefix whose code and cause both stay reachable.
func TestErrorKeepsItsCause(t *testing.T) {
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err := core.WithOp("connection", core.Errorf(fi.ECONNREFUSED, "peer refused: %w", cause))
	if got, want := err.Error(), "connection: peer refused: dial tcp: connection refused"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if core.Code(err) != fi.ECONNREFUSED || !errors.Is(err, fi.ECONNREFUSED) {
		t.Errorf("code of %v = %v", err, core.Code(err))
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(%v, ECONNREFUSED) is false: the cause is lost", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op != cause {
		t.Errorf("errors.As finds %v, want the cause", op)
	}
	if errors.Is(err, fi.EINVAL) {
		t.Errorf("errors.Is(%v, FI_EINVAL) is true", err)
	}

	// An op given twice is named once; another op wraps.
	if got := core.WithOp("connection", err).Error(); got != err.Error() {
		t.Errorf("WithOp twice = %q", got)
	}
	outer := core.WithOp("read data", err)
	if got, want := outer.Error(), "read data: "+err.Error(); got != want {
		t.Errorf("WithOp of another op = %q, want %q", got, want)
	}
	if core.Code(outer) != fi.ECONNREFUSED {
		t.Errorf("code through two ops = %v", core.Code(outer))
	}

	// A plain error gets the code of what it wraps.
	plain := core.WithOp("open tx", &net.OpError{Op: "read", Err: syscall.EPIPE})
	if core.Code(plain) != fi.Errno(syscall.EPIPE) || !errors.Is(plain, syscall.EPIPE) {
		t.Errorf("WithOp of a plain error: code %v", core.Code(plain))
	}
}
