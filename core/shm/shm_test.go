package shm

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/ring"
)

// TestHolderSocket: a holder cannot send on its socket, so it cannot queue
// descriptors for the daemon to receive or close; the daemon's messages
// and descriptors reach it.
func TestHolderSocket(t *testing.T) {
	c, theirs, err := holderSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer theirs.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := unix.Sendmsg(int(theirs.Fd()), []byte{'x'}, unix.UnixRights(int(w.Fd())), nil, unix.MSG_DONTWAIT); !errors.Is(err, unix.EPIPE) {
		t.Errorf("the holder's send: %v, want EPIPE", err)
	}
	if _, _, err := c.WriteMsgUnix([]byte{'h'}, unix.UnixRights(int(w.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 4), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(theirs.Fd()), buf, oob, unix.MSG_DONTWAIT)
	fds := receivedFds(oob[:oobn])
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err != nil || n != 1 || buf[0] != 'h' || len(fds) != 1 {
		t.Errorf("the holder received %q with %d bytes of rights: %v", buf[:n], oobn, err)
	}
}

// TestServeHolder runs the holder's side in this process: it keeps a
// passed descriptor and answers its number on the pipe, closes it when
// dropped, ignores drops of descriptors it was not given, and returns when
// the daemon's end closes.
func TestServeHolder(t *testing.T) {
	c, theirs, err := holderSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	answers, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer answers.Close()
	served := make(chan error, 1)
	go func() { served <- ServeHolder(theirs, w) }()
	reg, err := ring.NewMemfd("holder-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, _, err := c.WriteMsgUnix([]byte{'h'}, unix.UnixRights(int(reg.File.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	answers.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(answers, b[:]); err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[:]))
	if a, b := fdIdentity(n), fdIdentity(int(reg.File.Fd())); a != b {
		t.Fatalf("descriptor %d is %v, not the memfd %v", n, a, b)
	}
	for _, fd := range []int{int(theirs.Fd()), n} { // not given, then given
		if _, err := c.Write(binary.LittleEndian.AppendUint32([]byte{'d'}, uint32(fd))); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := <-served; err != nil {
		t.Errorf("ServeHolder: %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0); err == nil && fdIdentity(n) == fdIdentity(int(reg.File.Fd())) {
		t.Errorf("the dropped descriptor %d is still the memfd", n)
	}
	if _, err := unix.FcntlInt(theirs.Fd(), unix.F_GETFD, 0); err != nil {
		t.Errorf("ServeHolder closed a descriptor it was not given: %v", err)
	}
}

// fdIdentity is the device and inode descriptor fd refers to.
func fdIdentity(fd int) [2]uint64 {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return [2]uint64{}
	}
	return [2]uint64{st.Dev, st.Ino}
}

// openFDs counts this process's descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A holder whose descriptors the Allocator's CheckConn refuses (they are
// in the daemon's reserve) does not start, and leaves no descriptor open.
func TestHolderCheckConn(t *testing.T) {
	refused := errors.New("in the reserve")
	var checked []string
	h := &holder{checkConn: func(uid uint32, c syscall.Conn, what string) error {
		checked = append(checked, what)
		return refused
	}}
	before := openFDs(t)
	if err := h.start([]string{"/bin/true"}, ugid{1000, 1000}); !errors.Is(err, refused) {
		t.Fatalf("start: %v, want the check's error", err)
	}
	if len(checked) == 0 || !strings.Contains(checked[0], "uid 1000") {
		t.Errorf("checked %q, want the holder of uid 1000", checked)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after the refused start, %d before", after, before)
	}
}

// Alloc in MapPassthrough keeps no descriptor of the memfd (fs opens it
// again, Region.Dup), as root; in MapSymlink it keeps it, since the links
// name it.
func TestAllocDescriptors(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("passthrough is root's")
	}
	for mode, keeps := range map[string]bool{MapPassthrough: false, MapSymlink: true} {
		s, err := New(mode)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Alloc("shm-alloc-test", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if (r.File != nil) != keeps {
			t.Errorf("%s: the region keeps its descriptor: %v, want %v", mode, r.File != nil, keeps)
		}
		f, err := r.Dup()
		if err != nil {
			t.Errorf("%s: Dup: %v", mode, err)
		} else {
			f.Close()
		}
		r.Close()
		s.Close()
	}
}
