package core

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

func TestQueue(t *testing.T) {
	q := newQueue[int]()
	for i := 0; i < 5; i++ {
		q.push(i)
	}
	got, err := q.pop(context.Background(), 3, false)
	if err != nil || len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("pop 3 = %v, %v", got, err)
	}
	got, _ = q.pop(context.Background(), 10, false)
	if len(got) != 2 || got[1] != 4 {
		t.Fatalf("pop rest = %v", got)
	}
	if _, err := q.pop(context.Background(), 1, false); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("empty non-blocking pop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := q.pop(ctx, 1, true); !errors.Is(err, fi.EINTR) {
		t.Errorf("cancelled blocking pop: %v", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); q.push(7) }()
	if got, err := q.pop(context.Background(), 1, true); err != nil || got[0] != 7 {
		t.Errorf("blocking pop = %v, %v", got, err)
	}
	go func() { time.Sleep(10 * time.Millisecond); q.close() }()
	if _, err := q.pop(context.Background(), 1, true); !errors.Is(err, fi.ESHUTDOWN) {
		t.Errorf("pop on closed queue: %v", err)
	}
	if q.push(1) {
		t.Error("push after close accepted")
	}
}

// testCQ is a CQ of size entries outside any fabric, closed when the test
// ends.
func testCQ(t *testing.T, size uint64) *CQ {
	shm, err := NewShm(MapSymlink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shm.Close() })
	d := &Domain{Name: "test", fab: &Fabric{Shm: shm}}
	impl, _ := newCQ(&Object{Kind: KindCQ, ID: "0", Dom: d, Serial: 1})
	c := impl.(*CQ)
	c.size = size
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCQOverflowAndOverrun(t *testing.T) {
	c := testCQ(t, 1)
	// The ring holds 1; 16 more wait behind it; 3 more are overruns.
	for i := 0; i < 1+CQOverflowFactor+3; i++ {
		c.post(CQEntry{Context: uint64(i)})
	}
	if c.r.Flags()&ring.Overflow == 0 {
		t.Error("RING_OVERFLOW not set while completions wait")
	}
	var got []CQEntry
	for len(got) < 1+CQOverflowFactor+1 {
		es, err := c.Read(context.Background(), 100, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, es...)
	}
	for i := 0; i <= CQOverflowFactor; i++ {
		if got[i].Context != uint64(i) || got[i].Err != 0 {
			t.Fatalf("entry %d = %v, want context %d in order", i, got[i], i)
		}
	}
	if last := got[len(got)-1]; last.Err != fi.EOVERRUN || last.OLen != 3 {
		t.Errorf("last entry %v, want FI_EOVERRUN counting 3", last)
	}
	if c.r.Flags()&ring.Overflow != 0 {
		t.Error("RING_OVERFLOW still set after draining")
	}
}

// TestCQOverflowMax: a large CQ whose application does not read holds at
// most CQOverflowMax completions beyond its ring, not 16 times its size.
func TestCQOverflowMax(t *testing.T) {
	c := testCQ(t, 8192) // 16 times that is more than CQOverflowMax
	for i := 0; i < 8192+CQOverflowMax+5; i++ {
		c.post(CQEntry{Context: uint64(i)})
	}
	c.mu.Lock()
	held, overruns := len(c.overflow), c.overruns
	c.mu.Unlock()
	if held != CQOverflowMax || overruns != 5 {
		t.Errorf("held %d completions and counted %d overruns; want %d and 5", held, overruns, CQOverflowMax)
	}
}

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
