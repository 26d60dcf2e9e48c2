package core

import (
	"golang.org/x/sys/unix"
)

// FDReserve is how many file descriptors, of the RLIMIT_NOFILE the daemon
// may have, stay for its own use: making shared memory, listening,
// starting a holder. Sockets that peers and users make it open (accepted
// connections, users' connects) do not get them.
var FDReserve = 512

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
