package core

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Error is the structured error of core and the providers: what was
// attempted, the libfabric error code, and the cause. It reads as one
// sentence:
//
//	bind cq 9 send: no such cq in domain lo
//
// fs turns Code into an errno and shows the sentence in the object's err
// file. Err is kept, as net.OpError keeps its Err, so errors.Is and
// errors.As see through an Error to its cause; errors.Is(err, fi.ENOENT)
// also matches the Error's own Code.
type Error struct {
	Op   string   // the command or operation, as the user wrote it; may be empty
	Code fi.Errno // libfabric's error code
	Err  error    // the cause, in words
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Err.Error()
	}
	return e.Op + ": " + e.Err.Error()
}

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the Error's code: errors.Is(err, fi.ENOENT).
func (e *Error) Is(target error) bool {
	c, ok := target.(fi.Errno)
	return ok && c == e.Code
}

// Errorf returns an *Error with code and a reason formatted as fmt.Errorf
// does (so %w keeps a cause).
func Errorf(code fi.Errno, format string, a ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, a...)}
}

// WithOp returns err as an *Error whose Op is op, keeping its code and its
// cause. The sentence names op once: an err that already begins with op
// (or op is empty) is returned as it is.
func WithOp(op string, err error) error {
	if err == nil || op == "" || strings.HasPrefix(err.Error(), op+": ") {
		return err
	}
	if e, ok := err.(*Error); ok && e.Op == "" {
		return &Error{Op: op, Code: e.Code, Err: e.Err}
	}
	return &Error{Op: op, Code: Code(err), Err: err}
}

// Code returns the libfabric error code carried by err: the Code of an
// *Error, an fi.Errno, a syscall errno, or fi.EOTHER.
func Code(err error) fi.Errno {
	// The common cases first, without errors.As, whose targets escape:
	// Code is on the data path (every posted work request).
	switch v := err.(type) {
	case nil:
		return fi.EOTHER
	case *Error:
		return v.Code
	case fi.Errno:
		return v
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var fe fi.Errno
	if errors.As(err, &fe) {
		return fe
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return fi.Errno(se)
	}
	return fi.EOTHER
}

// stateText is how an endpoint state (as status shows it) reads in a
// sentence: "endpoint is in the error state".
func stateText(state string) string {
	switch state {
	case stateError:
		return "in the error state"
	case stateShutdown:
		return "shut down"
	}
	return state
}
