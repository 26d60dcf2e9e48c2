package ring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. All are the shared forms (no FUTEX_PRIVATE_FLAG,
// no FUTEX2_PRIVATE): the words live in pages shared between processes.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE

	futex2Size32 = 2 // FUTEX_32 (FUTEX2_SIZE_U32) in struct futex_waitv's flags

	// MaxWaitv is the most words FutexWaitv takes (the kernel's
	// FUTEX_WAITV_MAX).
	MaxWaitv = 128
)

// ErrTimeout is returned by FutexWait, FutexWaitv and Ring.Sleep when the
// timeout passed before a wake-up.
var ErrTimeout = errors.New("ring: futex wait timed out")

// FutexWake wakes every waiter on the word at addr (FUTEX_WAKE, INT_MAX
// waiters, shared). It does not change the word: change it first, so that a
// waiter about to wait sees the change.
func FutexWake(addr *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, 1<<31-1, 0, 0, 0)
	if e != 0 {
		return os.NewSyscallError("futex_wake", e)
	}
	return nil
}

// FutexWait sleeps while the word at addr holds val (FUTEX_WAIT, shared),
// until a FutexWake on it, a signal, or timeout (timeout <= 0 waits without
// a limit). It returns nil after a wake-up, when the word did not hold val
// (EAGAIN) and after an interruption (EINTR): all three mean "look again".
// It returns ErrTimeout when the time ran out, and a *os.SyscallError for
// anything else (a bad address).
func FutexWait(addr *uint32, val uint32, timeout time.Duration) error {
	var ts *unix.Timespec
	if timeout > 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR:
		return nil
	case unix.ETIMEDOUT:
		return ErrTimeout
	}
	return os.NewSyscallError("futex_wait", e)
}

// Waitv is the kernel's struct futex_waitv: one word of a futex_waitv(2)
// call, or of io_uring's IORING_OP_FUTEX_WAITV (package core/sleeper).
type Waitv struct {
	Val      uint64
	Uaddr    uint64
	Flags    uint32
	reserved uint32
}

// FillWaitv sets ws[i] to the wait on the shared 32-bit word addrs[i]
// while it holds vals[i], for every i of addrs: 1 to MaxWaitv words, as
// many values, and room for them in ws.
func FillWaitv(ws []Waitv, addrs []*uint32, vals []uint32) error {
	if len(addrs) == 0 || len(addrs) > MaxWaitv {
		return fmt.Errorf("ring: futex_waitv on %d words: want 1 to %d", len(addrs), MaxWaitv)
	}
	if len(vals) != len(addrs) || len(ws) < len(addrs) {
		return fmt.Errorf("ring: futex_waitv: %d words, %d values, room for %d", len(addrs), len(vals), len(ws))
	}
	for i, p := range addrs {
		ws[i] = Waitv{Val: uint64(vals[i]), Uaddr: uint64(uintptr(unsafe.Pointer(p))), Flags: futex2Size32}
	}
	return nil
}

// FutexWaitv sleeps on several words at once (futex_waitv(2), Linux >= 5.16):
// until one of addrs[i] is woken by a FutexWake, as long as every addrs[i]
// holds vals[i] when it starts. The words are 32-bit (FUTEX_32) and shared;
// at most MaxWaitv of them, len(vals) == len(addrs). timeout <= 0 waits
// without a limit; otherwise it is measured on CLOCK_MONOTONIC.
//
// It returns the index of a woken word; or -1 and nil when a word did not
// hold its value (EAGAIN) or the wait was interrupted (EINTR), meaning "look
// again"; or -1 and ErrTimeout when the time ran out; or -1 and an error for
// bad arguments.
//
// The words must stay where they are for the duration of the call: in a
// mapping, or in Go heap memory (a word that another goroutine or process
// wakes always is).
func FutexWaitv(addrs []*uint32, vals []uint32, timeout time.Duration) (int, error) {
	var ts *unix.Timespec
	if timeout > 0 {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
			return -1, os.NewSyscallError("clock_gettime", err)
		}
		t := unix.NsecToTimespec(now.Nano() + int64(timeout)) // futex_waitv takes an absolute time
		ts = &t
	}
	var ws [MaxWaitv]Waitv
	// No call between taking the addresses and the system call but
	// FillWaitv, which may grow the stack only on entry, before it takes
	// them (Syscall6 is nosplit), so even a word on the stack could not
	// move in between.
	if err := FillWaitv(ws[:], addrs, vals); err != nil {
		return -1, err
	}
	r, _, e := unix.Syscall6(unix.SYS_FUTEX_WAITV, uintptr(unsafe.Pointer(&ws[0])), uintptr(len(addrs)), 0,
		uintptr(unsafe.Pointer(ts)), unix.CLOCK_MONOTONIC, 0)
	runtime.KeepAlive(addrs)
	switch e {
	case 0:
		return int(r), nil
	case unix.EAGAIN, unix.EINTR:
		return -1, nil
	case unix.ETIMEDOUT:
		return -1, ErrTimeout
	}
	return -1, os.NewSyscallError("futex_waitv", e)
}
