package fs

import (
	"syscall"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// fail is the one path of a failed operation on a file of an object: the
// sentence "op: why" becomes the object's err text and the error's code
// the errno the caller gets. Files outside objects (obj nil) have no err
// file; they get the errno alone.
func fail(obj *core.Object, op string, err error) syscall.Errno {
	err = core.WithOp(op, err)
	if obj != nil {
		obj.SetErr(err)
	}
	return errno(err)
}

// errno is the one place where errors become errnos. Codes below 256 are
// Linux errno values already (fi_errno(3)); libfabric's own codes map to
// the nearest errno, and the sentence in the object's err file says the rest.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
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
