package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// Mapping modes: how a client reaches the shared memory of a ring or region.
const (
	// MapPassthrough serves the file itself with FUSE passthrough to a
	// daemon-owned memfd (root, Linux >= 6.9).
	MapPassthrough = "passthrough"
	// MapSymlink makes the file a symbolic link to /proc/PID/fd/N, the
	// memfd as a descriptor of a process the caller may open it from: the
	// daemon's own, or a holder (see ServeHolder) running as the caller.
	MapSymlink = "symlink"
)

// DefaultMapping is MapPassthrough where FUSE passthrough works (root, and
// Linux 6.9 or later), else MapSymlink.
func DefaultMapping() string {
	var u unix.Utsname
	if os.Geteuid() != 0 || unix.Uname(&u) != nil {
		return MapSymlink
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	if major > 6 || major == 6 && minor >= 9 {
		return MapPassthrough
	}
	return MapSymlink
}

// HolderArg is the argument that makes the fabricfs binary run
// ServeHolder instead of the daemon.
const HolderArg = "shm-holder"

// holderTimeout bounds one exchange with a holder; one that does not answer
// in time is killed.
const holderTimeout = 5 * time.Second

// An Allocator allocates the shared memory behind ring files and memory regions:
// every region is a sealed memfd (ring.NewMemfd), whose size nobody can
// change.
//
// In MapSymlink mode a client opens /proc/PID/fd/N, which the kernel allows
// only when it may inspect process PID: the daemon itself for root and for
// the daemon's own user and group; for anyone else a holder process
// running as that user and group, started on first need, to which the
// daemon passes the memfds that user opens. A holder keeps nothing but
// those descriptors and exits when the daemon closes its socket.
type Allocator struct {
	// Mode is MapPassthrough or MapSymlink.
	Mode string
	// HolderCommand runs a holder: a program that calls ServeHolder on
	// its standard input. Without one (or when the daemon may not change
	// user), every MapSymlink link names the daemon's own descriptor.
	HolderCommand []string
	// CheckConn, if set, checks each descriptor the daemon keeps of a
	// holder of uid (its socket, pipe and pidfd) as it is made: an error
	// closes them and fails the start (core.CheckConn: the daemon's
	// reserve of descriptors).
	CheckConn func(uid uint32, c syscall.Conn, what string) error

	mu      sync.Mutex
	held    map[*ring.Region]map[*holder]int // region -> holder -> descriptor number there
	holders map[ugid]*holder
	closed  bool
}

// ugid is a user and group a holder runs as.
type ugid struct{ uid, gid uint32 }

// New prepares shared memory in mode.
func New(mode string) (*Allocator, error) {
	if mode != MapPassthrough && mode != MapSymlink {
		return nil, fmt.Errorf("unknown mapping mode %q (want %s or %s)", mode, MapPassthrough, MapSymlink)
	}
	return &Allocator{Mode: mode, held: map[*ring.Region]map[*holder]int{}, holders: map[ugid]*holder{}}, nil
}

// Alloc makes size bytes of shared memory, a memfd named label. In
// MapPassthrough mode the region keeps no descriptor of it
// (ring.Region.DropFile): its mapping holds the memfd, each open of the
// file reopens it for the kernel to pass through, and the kernel's
// mapping of it holds it after; so rings and regions do not use up the
// daemon's descriptors. Where that reopening is not allowed the region
// keeps its descriptor.
func (s *Allocator) Alloc(label string, size int) (*ring.Region, error) {
	r, err := ring.NewMemfd(label, size)
	if err != nil {
		return nil, err
	}
	if s.Mode == MapPassthrough {
		r.DropFile()
	}
	if s.Mode == MapSymlink {
		s.mu.Lock()
		s.held[r] = map[*holder]int{}
		s.mu.Unlock()
		r.OnClose(func() { s.release(r) })
	}
	return r, nil
}

// release takes r's descriptors back from the holders. It does not wait
// for them: a holder that does not answer (its user stopped it) holds up
// only its own user's links, not whoever closes r.
func (s *Allocator) release(r *ring.Region) {
	s.mu.Lock()
	hs := s.held[r]
	delete(s.held, r)
	s.mu.Unlock()
	for h, n := range hs {
		go h.drop(n)
	}
}

// Link is the target of a MapSymlink link to r for a caller running as
// uid and gid: a /proc/PID/fd/N path that caller may open.
func (s *Allocator) Link(r *ring.Region, uid, gid uint32) (string, error) {
	s.mu.Lock()
	hs, ok := s.held[r]
	if !ok || s.closed {
		s.mu.Unlock()
		return "", errorf(fi.ENOENT, "shared memory is closed")
	}
	if uid == 0 || os.Geteuid() != 0 || len(s.HolderCommand) == 0 {
		s.mu.Unlock()
		return procFd(os.Getpid(), int(r.File.Fd())), nil
	}
	k := ugid{uid, gid}
	h := s.holders[k]
	if h == nil || h.dead() {
		if h != nil { // its descriptors went with it
			for _, hs := range s.held {
				delete(hs, h)
			}
		}
		h = &holder{checkConn: s.CheckConn}
		s.holders[k] = h
	}
	n, ok := hs[h]
	if ok {
		s.mu.Unlock()
		return h.path(n), nil
	}
	// Pass a duplicate: release may close r's own descriptor meanwhile.
	dup, err := unix.FcntlInt(r.File.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	s.mu.Unlock()
	if err != nil {
		return "", errorf(fi.EMFILE, "shared memory: %v", err)
	}
	n, err = h.hold(s.HolderCommand, k, dup)
	unix.Close(dup)
	if err != nil {
		return "", errorf(fi.EIO, "holder for uid %d gid %d: %v", uid, gid, err)
	}
	s.mu.Lock()
	hs, open := s.held[r]
	m, twice := hs[h]
	if open && !twice && !h.dead() {
		hs[h] = n
	}
	s.mu.Unlock()
	switch {
	case !open:
		h.drop(n)
		return "", errorf(fi.ENOENT, "shared memory is closed")
	case h.dead(): // its path would name a process that is gone
		return "", errorf(fi.EIO, "the holder for uid %d gid %d exited", uid, gid)
	case twice: // a concurrent Link passed it first
		h.drop(n)
		n = m
	}
	return h.path(n), nil
}

// Close stops the holders, without waiting for them; their descriptors
// close with them. Link fails from then on.
func (s *Allocator) Close() error {
	s.mu.Lock()
	hs := s.holders
	s.holders, s.closed = map[ugid]*holder{}, true
	s.mu.Unlock()
	for _, h := range hs {
		h.stop()
	}
	return nil
}

// codeError is a sentence with the libfabric code it stands for: errors.As
// finds the fi.Errno, so core.Code reads it and fs answers its errno.
type codeError struct {
	code fi.Errno
	msg  string
}

func (e *codeError) Error() string { return e.msg }
func (e *codeError) Unwrap() error { return e.code }

func errorf(code fi.Errno, format string, a ...any) error {
	return &codeError{code, fmt.Sprintf(format, a...)}
}

// A holder is one holder process as the daemon sees it. Nothing waits for
// the process while holding a lock: it may be stuck in a request to this
// very daemon (its user can make it do anything), which may be waiting
// for the lock. Its user can also make it send anything, so it cannot
// send on the socket at all (holderSocket), and its answers come through
// a pipe, which carries no descriptors.
type holder struct {
	mu      sync.Mutex // one exchange at a time
	pid     int        // set by start, under mu
	answers *os.File   // the pipe's read end; used under mu
	conn    atomic.Pointer[net.UnixConn]
	pidfd   atomic.Pointer[os.File] // the process, for reap and stop
	stopped atomic.Bool             // stop was called (reap calls it too), or start failed

	checkConn func(uid uint32, c syscall.Conn, what string) error // the Allocator's CheckConn
}

// check is checkConn of c, a descriptor the daemon keeps of the holder
// of k.
func (h *holder) check(k ugid, c syscall.Conn) error {
	if h.checkConn == nil {
		return nil
	}
	return h.checkConn(k.uid, c, fmt.Sprintf("shared-memory holder of uid %d", k.uid))
}

// procFd is where descriptor fd of process pid is opened.
func procFd(pid, fd int) string { return fmt.Sprintf("/proc/%d/fd/%d", pid, fd) }

// path is where descriptor n of the holder is opened.
func (h *holder) path(n int) string { return procFd(h.pid, n) }

// dead reports whether the holder is no use any more: a new one takes its
// place.
func (h *holder) dead() bool { return h.stopped.Load() }

// holderSocket makes the socket pair of a holder: the daemon's end, which
// only sends, and the holder's, which only receives. The daemon's end is
// shut for reading, so a send from the holder fails (EPIPE) rather than
// queue descriptors that the daemon would have to close, possibly with a
// blocking last close, when it reads or closes.
func holderSocket() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "holder"), os.NewFile(uintptr(fds[1]), "holder")
	defer mine.Close()
	if err := unix.Shutdown(fds[0], unix.SHUT_RD); err != nil {
		theirs.Close()
		return nil, nil, os.NewSyscallError("shutdown", err)
	}
	c, err := net.FileConn(mine)
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return c.(*net.UnixConn), theirs, nil
}

// start runs the holder as k: its standard input is the socket it
// receives descriptors on, its standard output the pipe it answers on,
// its standard error /dev/null. Every other descriptor of the daemon is
// made close-on-exec first (some are not: go-fuse opens /dev/fuse without
// O_CLOEXEC), so the holder has nothing of the daemon's but those two:
// its user may take any descriptor it has (pidfd_getfd). Called with h.mu
// held.
func (h *holder) start(argv []string, k ugid) error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return os.NewSyscallError("close_range CLOSE_RANGE_CLOEXEC (Linux >= 5.11)", err)
	}
	c, theirs, err := holderSocket()
	if err != nil {
		return err
	}
	defer theirs.Close()
	answers, w, err := os.Pipe()
	if err != nil {
		c.Close()
		return err
	}
	defer w.Close()
	for _, x := range []syscall.Conn{c, answers} {
		if err := h.check(k, x); err != nil {
			c.Close()
			answers.Close()
			return err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Env, cmd.Dir = theirs, w, []string{}, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: k.uid, Gid: k.gid, Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		c.Close()
		answers.Close()
		return err
	}
	// The process is a child not yet waited for, so its pid names it
	// until it is reaped, by reap only; from here on it is known by the
	// pidfd, which no reused pid can be mistaken for.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, unix.O_NONBLOCK) // PIDFD_NONBLOCK
	if err != nil {
		cmd.Process.Kill()
		go cmd.Wait()
		c.Close()
		answers.Close()
		return os.NewSyscallError("pidfd_open", err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	if err := h.check(k, f); err != nil {
		cmd.Process.Kill()
		go cmd.Wait()
		f.Close()
		c.Close()
		answers.Close()
		return err
	}
	h.pid, h.answers = cmd.Process.Pid, answers
	cmd.Process.Release()
	h.conn.Store(c)
	h.pidfd.Store(f)
	go h.reap(f)
	if h.stopped.Load() { // Allocator.Close came in between
		h.stop()
	}
	return nil
}

// reap waits for the holder to exit, reaps it and closes what the daemon
// kept of it. It waits in Go's poller, on the holder's pidfd, rather than
// in waitid(2): a blocked waitid would keep an OS thread for as long as
// the holder lives (and its user can keep it from being reaped at all, by
// tracing it).
func (h *holder) reap(f *os.File) {
	reaped := func(fd uintptr, options int) bool {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|options, nil)
			if err != unix.EINTR {
				return err != nil || info.Signo != 0 // reaped, or nothing to wait for
			}
		}
	}
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return reaped(fd, unix.WNOHANG) })
	}
	if err != nil { // not in the poller after all: wait in this thread
		reaped(f.Fd(), 0)
	}
	h.stop()
	h.mu.Lock() // a hold under way is done with answers
	h.answers.Close()
	h.mu.Unlock()
	f.Close()
}

// hold passes descriptor fd to the holder (starting it if need be) and
// returns the number it has there.
func (h *holder) hold(argv []string, k ugid, fd int) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead() {
		return 0, errors.New("the holder has exited")
	}
	c := h.conn.Load()
	if c == nil {
		if err := h.start(argv, k); err != nil {
			h.stopped.Store(true)
			return 0, err
		}
		c = h.conn.Load()
	}
	deadline := time.Now().Add(holderTimeout)
	c.SetWriteDeadline(deadline)
	if _, _, err := c.WriteMsgUnix([]byte{'h'}, unix.UnixRights(fd), nil); err != nil {
		h.stop()
		return 0, err
	}
	var b [4]byte
	h.answers.SetReadDeadline(deadline)
	_, err := io.ReadFull(h.answers, b[:])
	n := int(int32(binary.LittleEndian.Uint32(b[:])))
	if err == nil && n < 3 {
		err = fmt.Errorf("answer names descriptor %d", n)
	}
	if err != nil {
		h.stop()
		return 0, err
	}
	return n, nil
}

// drop has the holder close descriptor n.
func (h *holder) drop(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conn.Load()
	if c == nil || h.dead() {
		return
	}
	msg := binary.LittleEndian.AppendUint32([]byte{'d'}, uint32(n))
	c.SetWriteDeadline(time.Now().Add(holderTimeout))
	if _, err := c.Write(msg); err != nil {
		h.stop()
	}
}

// stop ends the holder: closes its socket and kills it through its pidfd,
// without waiting (reap reaps it, and closes the answers pipe).
func (h *holder) stop() {
	h.stopped.Store(true)
	if c := h.conn.Load(); c != nil {
		c.Close()
	}
	if f := h.pidfd.Load(); f != nil {
		if rc, err := f.SyscallConn(); err == nil { // fails once reap closed it
			rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
		}
	}
}

// ServeHolder is a holder process's whole work: keep every descriptor the
// daemon passes on the socket in ('h' with one descriptor) and answer its
// number (4 bytes little-endian) on out, until the daemon drops it ('d'
// and the number); return when the daemon closes the socket. It never
// closes a descriptor it was not given.
func ServeHolder(in, out *os.File) error {
	c, err := net.FileConn(in)
	if err != nil {
		return err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("standard input is not a unix socket")
	}
	held := map[int]bool{}
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
		if n == 0 || errors.Is(err, net.ErrClosed) {
			return nil // the daemon is gone
		}
		if err != nil {
			return err
		}
		fds := receivedFds(oob[:oobn])
		switch {
		case buf[0] == 'h' && n == 1 && len(fds) == 1:
			held[fds[0]] = true
			if _, err := out.Write(binary.LittleEndian.AppendUint32(nil, uint32(fds[0]))); err != nil {
				return err
			}
			fds = nil
		case buf[0] == 'd' && n == 5:
			if fd := int(binary.LittleEndian.Uint32(buf[1:5])); held[fd] {
				unix.Close(fd)
				delete(held, fd)
			}
		default:
			return fmt.Errorf("bad message from the daemon: % x", buf[:n])
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// receivedFds are the descriptors of SCM_RIGHTS messages in oob.
func receivedFds(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}
