package core

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Error is the structured error of core and the providers: what was
// attempted, the libfabric error code, and why. It reads as one sentence:
//
//	bind cq 9 send: no such cq in domain lo
//
// fs turns Code into an errno and shows the sentence in the object's err file.
type Error struct {
	Op   string   // the command or operation, as the user wrote it; may be empty
	Code fi.Errno // libfabric's error code
	Msg  string   // why, in words
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Msg
	}
	return e.Op + ": " + e.Msg
}

// Unwrap lets errors.Is(err, fi.ENOENT) match.
func (e *Error) Unwrap() error { return e.Code }

// Errorf returns an *Error with code and a formatted reason.
func Errorf(code fi.Errno, format string, a ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// WithOp returns err as an *Error whose Op is op, keeping its code.
func WithOp(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e.Op == "" {
		return &Error{Op: op, Code: e.Code, Msg: e.Msg}
	}
	return &Error{Op: op, Code: Code(err), Msg: err.Error()}
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
