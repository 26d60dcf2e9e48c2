// Package shm allocates the shared memory behind fabricfs's ring files and
// memory regions, and hands it to clients in one of two mapping modes.
//
// Every region is a sealed memfd (ring.NewMemfd). In MapPassthrough mode
// fs serves the file itself through FUSE passthrough to that memfd. In
// MapSymlink mode the file is a symbolic link to /proc/PID/fd/N, which the
// kernel lets a client open only when it may inspect process PID: the
// daemon itself for root and the daemon's own user, and for anyone else a
// holder process running as that user and group.
//
// A holder is the fabricfs binary run with HolderArg: ServeHolder keeps
// the descriptors the daemon passes it over a unix socket (SCM_RIGHTS) and
// answers their numbers on a pipe. The daemon side (Allocator.Link)
// starts one per user and group on first need, with every other
// descriptor of the daemon made close-on-exec, and reaps and kills it
// through its pidfd, never waiting for it while holding a lock.
//
// The package sits under core: core's Fabric owns an Allocator and
// allocates from it (rings, CQs, registered memory); fs asks it for link
// targets; cmd/fabricfs chooses the mode and runs holders.
package shm
