package fi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

var errnoTests = []struct {
	e          Errno
	name, text string
}{
	{SUCCESS, "FI_SUCCESS", "Success"},
	{ENOENT, "FI_ENOENT", "No such file or directory"},
	{EAGAIN, "FI_EAGAIN", "Resource temporarily unavailable"},
	{EWOULDBLOCK, "FI_EAGAIN", "Resource temporarily unavailable"},
	{ENODATA, "FI_ENODATA", "No data available"},
	{EEXIST, "FI_EEXIST", "File exists"},
	{ECANCELED, "FI_ECANCELED", "Operation canceled"},
	{EOTHER, "FI_EOTHER", "Unspecified error"},
	{ETRUNC, "FI_ETRUNC", "Truncation error"},
	{ENORX, "FI_ENORX", "Receiver not ready, no receive buffers available"},
	{-ETRUNC, "", "Truncation error"}, // fi_strerror ignores the sign
	{Errno(syscall.EPIPE), "", "Broken pipe"},
	{Errno(255), "", "Unknown error 255"},
	{Errno(270), "", "Unspecified error"},
	{Errno(100000), "", "Unspecified error"},
}

func TestErrno(t *testing.T) {
	for _, tt := range errnoTests {
		if got := tt.e.Error(); got != tt.text {
			t.Errorf("Errno(%d).Error() = %q, want %q", int(tt.e), got, tt.text)
		}
		if got := tt.e.Name(); got != tt.name {
			t.Errorf("Errno(%d).Name() = %q, want %q", int(tt.e), got, tt.name)
		}
	}
}

func TestErrnoIs(t *testing.T) {
	wrapped := fmt.Errorf("bind cq 9: %w", ENOENT)
	for _, tt := range []struct {
		err, target error
		want        bool
	}{
		{wrapped, ENOENT, true},
		{wrapped, syscall.ENOENT, true},
		{wrapped, fs.ErrNotExist, true},
		{EEXIST, fs.ErrExist, true},
		{EACCES, os.ErrPermission, true},
		{EAGAIN, syscall.EWOULDBLOCK, true},
		{wrapped, syscall.EEXIST, false},
		{ETRUNC, syscall.Errno(ETRUNC), false}, // no errno stands for libfabric's own codes
		{SUCCESS, syscall.Errno(0), false},
	} {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tt.err, tt.target, got, tt.want)
		}
	}
}

// TestErrnoMatchesFiStrerror compares Error with libfabric's fi_strerror
// for every code from -300 to 300, and checks that every named code is a
// libfabric (or, for EEXIST, Linux) value.
func TestErrnoMatchesFiStrerror(t *testing.T) {
	out := runC(t, cHeaders+`int main(void) {
	for (int i = -300; i <= 300; i++)
		printf("%d %s\n", i, fi_strerror(i));
	return 0;
}
`, "fabric")
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		num, want, _ := strings.Cut(line, " ")
		i, _ := strconv.Atoi(num)
		if got := Errno(i).Error(); got != want {
			t.Errorf("Errno(%d).Error() = %q, fi_strerror says %q", i, got, want)
		}
		n++
	}
	if n != 601 {
		t.Errorf("compared %d codes, want 601", n)
	}
}
