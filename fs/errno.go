package fs

import (
	"errors"
	"syscall"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// errno is the one place where errors become errnos. Codes below 256 are
// Linux errno values already (fi_errno(3)); libfabric's own codes map to
// the nearest errno, and the sentence in the object's err file says the rest.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) && !isCoreError(err) {
		return se
	}
	code := core.Code(err)
	switch code {
	case fi.EOPBADSTATE, fi.ENOEQ, fi.ENOCQ, fi.ENOAV:
		return syscall.EBADFD
	case fi.ETRUNC:
		return syscall.EMSGSIZE
	case fi.EAVAIL:
		return syscall.ENOMSG
	case fi.EBADFLAGS:
		return syscall.EINVAL
	case fi.EOVERRUN:
		return syscall.EOVERFLOW
	case fi.ENOKEY:
		return syscall.ENOKEY
	case fi.ECRC:
		return syscall.EBADMSG
	case fi.ENORX:
		return syscall.EAGAIN
	}
	if code > 0 && code < 256 {
		return syscall.Errno(code)
	}
	return syscall.EIO
}

func isCoreError(err error) bool {
	var e *core.Error
	return errors.As(err, &e)
}
