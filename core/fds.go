package core

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
)

// FDReserve is how many file descriptors, of the RLIMIT_NOFILE the daemon
// may have, stay for its own use. Descriptors that peers make it open
// (accepted connections) never get them, nor those it makes for a user
// other than root (CheckFD): sockets, shared memory, epoll sets, a
// holder's socket and pipe.
var FDReserve = 512

// CheckFD is the one check of a descriptor fd the daemon has just made for
// uid: when uid is not root and fd is one of the last FDReserve
// (InReserve), it returns an FI_EMFILE error naming what (the caller
// closes the descriptor and fails with it), so that users cannot take the
// descriptors the daemon keeps for itself.
func CheckFD(uid uint32, fd int, what string) error {
	if uid == 0 || !InReserve(fd) {
		return nil
	}
	return Errorf(fi.EMFILE, "%s: the daemon's last %d file descriptors are kept for its own use", what, FDReserve)
}

// CheckConn is CheckFD of the descriptor of c (a socket, a pipe).
func CheckConn(uid uint32, c syscall.Conn, what string) error {
	return CheckFD(uid, ConnFD(c), what)
}

// ConnFD is the descriptor of c, or -1. Unlike os.File.Fd it leaves the
// descriptor non-blocking.
func ConnFD(c syscall.Conn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(s uintptr) { fd = int(s) })
	return fd
}

// InReserve reports whether descriptor fd, just made, is one of the last
// FDReserve the daemon may have. Descriptors are made lowest first, so a
// socket whose number is below the reserve never takes a descriptor in
// it: the provider closes a socket for which InReserve is true, and the
// reserve stays free for the daemon whatever peers and users do.
func InReserve(fd int) bool {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return false
	}
	return uint64(fd)+uint64(FDReserve) >= lim.Cur
}

// RaiseFDLimit raises the soft RLIMIT_NOFILE to the hard one, so that the
// daemon may hold as many descriptors as the system lets it. It returns
// the limit in force.
func RaiseFDLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}
