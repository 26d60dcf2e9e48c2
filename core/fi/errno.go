package fi

import (
	"strconv"
	"syscall"
)

// Errno is a libfabric error code, FI_E* (fi_errno(3)), as a positive
// number; libfabric calls return it negated. Codes below ERRNO_OFFSET are
// Linux errno values, so fs turns one into the errno of a failed file
// operation with syscall.Errno(e). Codes from ERRNO_OFFSET up (EOTHER,
// ETRUNC, EAVAIL...) are libfabric's own and have no errno: fs must map
// them itself.
//
// Errno is an error; its text is fi_strerror's. errors.Is(fi.ENOENT,
// syscall.ENOENT) and errors.Is(fi.ENOENT, fs.ErrNotExist) hold.
type Errno int

// Error codes of fi_errno.h, in its order.
const (
	SUCCESS       Errno = 0
	EPERM         Errno = 1
	ENOENT        Errno = 2
	EINTR         Errno = 4
	EIO           Errno = 5
	E2BIG         Errno = 7
	EBADF         Errno = 9
	EAGAIN        Errno = 11
	ENOMEM        Errno = 12
	EACCES        Errno = 13
	EFAULT        Errno = 14
	EBUSY         Errno = 16
	EEXIST        Errno = 17 // commented out in fi_errno.h; fabricfs uses it for names that are taken
	ENODEV        Errno = 19
	EINVAL        Errno = 22
	EMFILE        Errno = 24
	ENOSPC        Errno = 28
	ENOSYS        Errno = 38
	EWOULDBLOCK         = EAGAIN
	ENOMSG        Errno = 42
	ENODATA       Errno = 61
	EOVERFLOW     Errno = 75
	EMSGSIZE      Errno = 90
	ENOPROTOOPT   Errno = 92
	EOPNOTSUPP    Errno = 95
	EADDRINUSE    Errno = 98
	EADDRNOTAVAIL Errno = 99
	ENETDOWN      Errno = 100
	ENETUNREACH   Errno = 101
	ECONNABORTED  Errno = 103
	ECONNRESET    Errno = 104
	ENOBUFS       Errno = 105
	EISCONN       Errno = 106
	ENOTCONN      Errno = 107
	ESHUTDOWN     Errno = 108
	ETIMEDOUT     Errno = 110
	ECONNREFUSED  Errno = 111
	EHOSTDOWN     Errno = 112
	EHOSTUNREACH  Errno = 113
	EALREADY      Errno = 114
	EINPROGRESS   Errno = 115
	EREMOTEIO     Errno = 121
	ECANCELED     Errno = 125
	EKEYREJECTED  Errno = 129

	ERRNO_OFFSET Errno = 256 // first libfabric-specific code

	EOTHER      Errno = 256 // unspecified error
	ETOOSMALL   Errno = 257 // provided buffer is too small
	EOPBADSTATE Errno = 258 // operation not permitted in current state
	EAVAIL      Errno = 259 // an error entry is available (fi_cq_readerr, fi_eq_readerr)
	EBADFLAGS   Errno = 260 // flags not supported
	ENOEQ       Errno = 261 // missing or unavailable event queue
	EDOMAIN     Errno = 262 // invalid resource domain
	ENOCQ       Errno = 263 // missing or unavailable completion queue
	ECRC        Errno = 264 // CRC error
	ETRUNC      Errno = 265 // truncation error: the receive buffer was too small
	ENOKEY      Errno = 266 // required key not available
	ENOAV       Errno = 267 // missing or unavailable address vector
	EOVERRUN    Errno = 268 // queue has been overrun
	ENORX       Errno = 269 // receiver not ready, no receive buffers available
)

// errnos gives each code its name and fi_strerror's text. Texts of codes
// below ERRNO_OFFSET are glibc's strerror, which fi_strerror returns.
var errnos = []struct {
	e          Errno
	name, text string
}{
	{SUCCESS, "SUCCESS", "Success"},
	{EPERM, "EPERM", "Operation not permitted"},
	{ENOENT, "ENOENT", "No such file or directory"},
	{EINTR, "EINTR", "Interrupted system call"},
	{EIO, "EIO", "Input/output error"},
	{E2BIG, "E2BIG", "Argument list too long"},
	{EBADF, "EBADF", "Bad file descriptor"},
	{EAGAIN, "EAGAIN", "Resource temporarily unavailable"},
	{ENOMEM, "ENOMEM", "Cannot allocate memory"},
	{EACCES, "EACCES", "Permission denied"},
	{EFAULT, "EFAULT", "Bad address"},
	{EBUSY, "EBUSY", "Device or resource busy"},
	{EEXIST, "EEXIST", "File exists"},
	{ENODEV, "ENODEV", "No such device"},
	{EINVAL, "EINVAL", "Invalid argument"},
	{EMFILE, "EMFILE", "Too many open files"},
	{ENOSPC, "ENOSPC", "No space left on device"},
	{ENOSYS, "ENOSYS", "Function not implemented"},
	{ENOMSG, "ENOMSG", "No message of desired type"},
	{ENODATA, "ENODATA", "No data available"},
	{EOVERFLOW, "EOVERFLOW", "Value too large for defined data type"},
	{EMSGSIZE, "EMSGSIZE", "Message too long"},
	{ENOPROTOOPT, "ENOPROTOOPT", "Protocol not available"},
	{EOPNOTSUPP, "EOPNOTSUPP", "Operation not supported"},
	{EADDRINUSE, "EADDRINUSE", "Address already in use"},
	{EADDRNOTAVAIL, "EADDRNOTAVAIL", "Cannot assign requested address"},
	{ENETDOWN, "ENETDOWN", "Network is down"},
	{ENETUNREACH, "ENETUNREACH", "Network is unreachable"},
	{ECONNABORTED, "ECONNABORTED", "Software caused connection abort"},
	{ECONNRESET, "ECONNRESET", "Connection reset by peer"},
	{ENOBUFS, "ENOBUFS", "No buffer space available"},
	{EISCONN, "EISCONN", "Transport endpoint is already connected"},
	{ENOTCONN, "ENOTCONN", "Transport endpoint is not connected"},
	{ESHUTDOWN, "ESHUTDOWN", "Cannot send after transport endpoint shutdown"},
	{ETIMEDOUT, "ETIMEDOUT", "Connection timed out"},
	{ECONNREFUSED, "ECONNREFUSED", "Connection refused"},
	{EHOSTDOWN, "EHOSTDOWN", "Host is down"},
	{EHOSTUNREACH, "EHOSTUNREACH", "No route to host"},
	{EALREADY, "EALREADY", "Operation already in progress"},
	{EINPROGRESS, "EINPROGRESS", "Operation now in progress"},
	{EREMOTEIO, "EREMOTEIO", "Remote I/O error"},
	{ECANCELED, "ECANCELED", "Operation canceled"},
	{EKEYREJECTED, "EKEYREJECTED", "Key was rejected by service"},
	{EOTHER, "EOTHER", "Unspecified error"},
	{ETOOSMALL, "ETOOSMALL", "Provided buffer is too small"},
	{EOPBADSTATE, "EOPBADSTATE", "Operation not permitted in current state"},
	{EAVAIL, "EAVAIL", "Error available"},
	{EBADFLAGS, "EBADFLAGS", "Flags not supported"},
	{ENOEQ, "ENOEQ", "Missing or unavailable event queue"},
	{EDOMAIN, "EDOMAIN", "Invalid resource domain"},
	{ENOCQ, "ENOCQ", "Missing or unavailable completion queue"},
	{ECRC, "ECRC", "CRC error"},
	{ETRUNC, "ETRUNC", "Truncation error"},
	{ENOKEY, "ENOKEY", "Required key not available"},
	{ENOAV, "ENOAV", "Missing or unavailable address vector"},
	{EOVERRUN, "EOVERRUN", "Queue has been overrun"},
	{ENORX, "ENORX", "Receiver not ready, no receive buffers available"},
}

func (e Errno) info() (name, text string, ok bool) {
	for _, x := range errnos {
		if x.e == e {
			return x.name, x.text, true
		}
	}
	return "", "", false
}

// Error returns fi_strerror's text: "No data available", "Truncation
// error". Like fi_strerror it ignores the sign. A code below ERRNO_OFFSET
// that libfabric does not name reads as the C library's strerror; a code
// from ERRNO_OFFSET up that it does not know reads "Unspecified error".
func (e Errno) Error() string {
	if e < 0 {
		e = -e
	}
	if _, text, ok := e.info(); ok {
		return text
	}
	if e >= ERRNO_OFFSET || e < 0 { // e < 0: -minInt
		return "Unspecified error"
	}
	if e == ehwpoison { // newer than Go's syscall table
		return "Memory page has hardware error"
	}
	// Go's texts are glibc's with the first letter lowered.
	s := syscall.Errno(e).Error()
	if s == "errno "+strconv.Itoa(int(e)) {
		return "Unknown error " + strconv.Itoa(int(e))
	}
	if s != "" && 'a' <= s[0] && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

const ehwpoison Errno = 133 // Linux EHWPOISON

// Name returns libfabric's name for e, such as "FI_ENODATA", or "" when
// libfabric has none (an errno such as EPIPE that reached fabricfs from the
// system).
func (e Errno) Name() string {
	if name, _, ok := e.info(); ok {
		return "FI_" + name
	}
	return ""
}

// Is makes errors.Is(e, target) true when target is the same Linux errno
// (syscall.ENOENT) or an error that errno stands for (fs.ErrNotExist).
func (e Errno) Is(target error) bool {
	if e <= 0 || e >= ERRNO_OFFSET {
		return false
	}
	se := syscall.Errno(e)
	return se == target || se.Is(target)
}
