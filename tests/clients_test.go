package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/ring"
)

// The ring clients of docs/abi.md under clients/: c/pingpong.c and
// c/dial.c (through c/fabricfs.h), python/pingpong.py (through
// python/fabricfs.py) and package go/fabricfs, each run through the rings
// in both ways the daemon serves ring files.

const (
	pingIters = 1000
	pingSize  = 4096
)

// pingOK is the one line a client prints on success.
var pingOK = regexp.MustCompile(fmt.Sprintf(`^ok %d %d [0-9]+(\.[0-9]+)?\n$`, pingIters, pingSize))

// forEachMapping runs f on a fresh mount in each mapping mode: the default
// (FUSE passthrough as root) and -mapping=symlink, after checking that an
// object's attr/mapping and its ring file say which.
func forEachMapping(t *testing.T, f func(t *testing.T, d *daemon)) {
	def := "passthrough"
	if os.Geteuid() != 0 {
		def = "symlink" // passthrough needs root
	}
	modes := []struct {
		name, want string
		flags      []string
	}{
		{"default", def, nil},
		{"symlink", "symlink", []string{"-mapping=symlink"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			d := mountWith(t, m.flags...)
			checkMapping(t, d, m.want)
			f(t, d)
		})
	}
}

// checkMapping makes a CQ and checks attr/mapping and what cq/N/data is.
func checkMapping(t *testing.T, d *daemon, want string) {
	t.Helper()
	tr := d.tree(t)
	cq, err := tr.Domain("tcp", "lo").NewCQ(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	got, err := cq.Attr("mapping")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s/attr/mapping = %q, want %q", cq.Dir, got, want)
	}
	fi, err := os.Lstat(filepath.Join(cq.Dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if isLink := fi.Mode()&os.ModeSymlink != 0; isLink != (want == "symlink") {
		t.Fatalf("%s/data has mode %v with mapping %s", cq.Dir, fi.Mode(), want)
	}
}

// runPingClient runs a client program against d, as attr says (nil: as
// the test's user), and checks its ok line.
func runPingClient(t *testing.T, d *daemon, attr *syscall.SysProcAttr, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append(args, d.mnt, fmt.Sprint(pingIters), fmt.Sprint(pingSize))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil || !pingOK.Match(out) {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s", out)
}

// buildC compiles ../clients/c/NAME.c into dir, with every warning an
// error, and returns the program's path.
func buildC(t *testing.T, dir, name string) string {
	t.Helper()
	needCmd(t, "gcc")
	bin := filepath.Join(dir, name)
	src := filepath.Join("..", "clients", "c", name+".c")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	return bin
}

func TestCClient(t *testing.T) {
	needFUSE(t)
	bin := buildC(t, t.TempDir(), "pingpong")
	forEachMapping(t, func(t *testing.T, d *daemon) { runPingClient(t, d, nil, bin) })
}

// TestCClientAsOtherUser runs the C ping-pong as nobody against a root
// daemon in the symlink mode: every ring and region it maps is a
// descriptor of nobody's holder process.
func TestCClientAsOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "pingpong")
	openUp(t, dir)
	d := mountWith(t, "-mapping=symlink")
	openUp(t, filepath.Dir(d.mnt))
	runPingClient(t, d, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}, bin)
}

func TestPythonClient(t *testing.T) {
	needFUSE(t)
	needCmd(t, "python3")
	forEachMapping(t, func(t *testing.T, d *daemon) {
		runPingClient(t, d, nil, "python3", filepath.Join("..", "clients", "python", "pingpong.py"))
	})
}

// TestCDial runs clients/c/dial.c against an FI_EP_RDM endpoint made with
// the Go client, which receives its message through its rx ring: the
// bytes, the length and the completions on both sides must match.
func TestCDial(t *testing.T) {
	needFUSE(t)
	bin := buildC(t, t.TempDir(), "dial")
	forEachMapping(t, func(t *testing.T, d *daemon) {
		dom := d.tree(t).Domain("tcp", "lo")
		av, err := dom.NewAV()
		if err != nil {
			t.Fatal(err)
		}
		defer av.Close()
		cq, err := dom.NewCQ(0)
		if err != nil {
			t.Fatal(err)
		}
		defer cq.Close()
		ep, err := dom.NewRDM(av, cq)
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		mr, err := dom.NewMR(64, "FI_SEND,FI_RECV")
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Close()
		const any = 1<<64 - 1 // FI_ADDR_UNSPEC
		if err := ep.Post(mr, ring.WR{Op: ring.OpRecv, Context: 7, Len: 64, Addr: any}); err != nil {
			t.Fatal(err)
		}
		local, err := ep.Local()
		if err != nil {
			t.Fatal(err)
		}
		const msg = "hello from dial.c"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, filepath.Join(d.mnt, "tcp", "lo"), local, msg).CombinedOutput()
		if err != nil || string(out) != fmt.Sprintf("sent %d bytes\n", len(msg)) {
			t.Fatalf("dial %s: %v\n%s", local, err, out)
		}
		if err := cq.Wait(10 * time.Second); err != nil {
			t.Fatalf("no receive completion: %v (ep err: %s)", err, ep.Err())
		}
		cs := cq.Poll(4)
		if len(cs) != 1 || cs[0].Err != 0 || cs[0].Context != 7 || cs[0].Len != uint64(len(msg)) || cs[0].Flags&(1<<10) == 0 {
			t.Fatalf("completions %+v, want one receive of %d bytes with context 7", cs, len(msg))
		}
		if got := string(mr.Mem()[:len(msg)]); got != msg {
			t.Fatalf("received %q, want %q", got, msg)
		}
	})
}

func TestGoClient(t *testing.T) {
	needFUSE(t)
	forEachMapping(t, func(t *testing.T, d *daemon) {
		usec, err := goPingPong(d.mnt, pingIters, pingSize)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ok %d %d %.1f", pingIters, pingSize, usec)
	})
}

// pingSide is one endpoint of the Go ping-pong with what its CQ delivered.
type pingSide struct {
	name         string
	ep           *fabricfs.EP
	cq           *fabricfs.CQ
	mr           *fabricfs.MR
	sends, recvs uint64 // completions seen, in order
	lastBuf      uint64 // buf of the last receive completion
}

const ctxPingSend, ctxPingRecv = 1 << 32, 2 << 32

// reap takes the completions there are, checking each.
func (s *pingSide) reap(size uint64) error {
	for _, c := range s.cq.Poll(64) {
		if c.Err != 0 {
			return fmt.Errorf("%s: error completion %+v (ep err: %s)", s.name, c, s.ep.Err())
		}
		switch c.Context &^ 0xffffffff {
		case ctxPingSend:
			if c.Flags&(1<<11) == 0 || c.Context != ctxPingSend|s.sends&0xffffffff {
				return fmt.Errorf("%s: send completion %+v, want #%d", s.name, c, s.sends)
			}
			s.sends++
		case ctxPingRecv:
			if c.Flags&(1<<10) == 0 || c.Context != ctxPingRecv|s.recvs&0xffffffff || c.Len != size {
				return fmt.Errorf("%s: recv completion %+v, want #%d of %d bytes", s.name, c, s.recvs, size)
			}
			s.recvs++
			s.lastBuf = c.Buf
		default:
			return fmt.Errorf("%s: completion %+v with an unknown context", s.name, c)
		}
	}
	return nil
}

// await reaps until *n reaches want.
func (s *pingSide) await(n *uint64, want, size uint64) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := s.reap(size); err != nil {
			return err
		}
		if *n >= want {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s: %d of %d completions after 10s (ep err: %s)", s.name, *n, want, s.ep.Err())
		}
		if err := s.cq.Wait(left); err != nil && !errors.Is(err, ring.ErrTimeout) {
			return err
		}
	}
}

func fillPing(b []byte, i uint64) {
	for j := range b {
		b[j] = byte(uint64(j)*31 + uint64(j>>8) + i*101 + 1)
	}
}

func checkPing(who string, b []byte, i uint64) error {
	for j := range b {
		if want := byte(uint64(j)*31 + uint64(j>>8) + i*101 + 1); b[j] != want {
			return fmt.Errorf("%s: iteration %d byte %d is %#x, want %#x", who, i, j, b[j], want)
		}
	}
	return nil
}

// goPingPong is pingpong.c with package fabricfs: A sends iters messages of
// size bytes, B checks and echoes each, A checks it. It returns the
// microseconds per round trip.
func goPingPong(mnt string, iters, size uint64) (float64, error) {
	tr, err := fabricfs.Open(mnt)
	if err != nil {
		return 0, err
	}
	d := tr.Domain("tcp", "lo")
	eq, err := d.NewEQ()
	if err != nil {
		return 0, err
	}
	defer eq.Close()
	a, b := &pingSide{name: "A"}, &pingSide{name: "B"}
	for _, s := range []*pingSide{a, b} {
		if s.cq, err = d.NewCQ(0); err != nil {
			return 0, err
		}
		defer s.cq.Close()
	}
	var pep *fabricfs.PEP
	if a.ep, b.ep, pep, err = d.Connect(eq, a.cq, b.cq); err != nil {
		return 0, err
	}
	defer pep.Close()
	defer a.ep.Close()
	// Two size-byte slots per pingSide: A sends from slot 0 and receives into
	// slot 1; B receives into slot i%2 and echoes from it.
	for _, s := range []*pingSide{a, b} {
		if s.mr, err = d.NewMR(int(2*size), "FI_SEND,FI_RECV"); err != nil {
			return 0, err
		}
		defer s.mr.Close()
	}
	am, bm := a.mr.Mem(), b.mr.Mem()
	if err := b.ep.PostRecv(b.mr, 0, size, ctxPingRecv|0, 0); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := uint64(0); i < iters; i++ {
		seq := i & 0xffffffff
		if err := a.ep.PostRecv(a.mr, size, size, ctxPingRecv|seq, 0); err != nil {
			return 0, err
		}
		fillPing(am[:size], i)
		if err := a.ep.PostSend(a.mr, 0, size, ctxPingSend|seq, 0); err != nil {
			return 0, err
		}

		slot := i % 2 * size
		if err := b.await(&b.recvs, i+1, size); err != nil {
			return 0, err
		}
		if b.lastBuf != slot {
			return 0, fmt.Errorf("B: receive completion buf %d, want %d", b.lastBuf, slot)
		}
		if err := checkPing("B", bm[slot:slot+size], i); err != nil {
			return 0, err
		}
		if i+1 < iters {
			if err := b.await(&b.sends, i, size); err != nil { // send i-1 used the other slot
				return 0, err
			}
			if err := b.ep.PostRecv(b.mr, (i+1)%2*size, size, ctxPingRecv|(i+1)&0xffffffff, 0); err != nil {
				return 0, err
			}
		}
		if err := b.ep.PostSend(b.mr, slot, size, ctxPingSend|seq, 0); err != nil {
			return 0, err
		}

		if err := a.await(&a.sends, i+1, size); err != nil {
			return 0, err
		}
		if err := a.await(&a.recvs, i+1, size); err != nil {
			return 0, err
		}
		if a.lastBuf != size {
			return 0, fmt.Errorf("A: receive completion buf %d, want %d", a.lastBuf, size)
		}
		if err := checkPing("A", am[size:2*size], i); err != nil {
			return 0, err
		}
	}
	usec := float64(time.Since(start).Microseconds()) / float64(iters)
	if err := b.await(&b.sends, iters, size); err != nil {
		return 0, err
	}
	// Back-pressure: receives that nothing matches fill the endpoint's queue,
	// then the ring, and then PostRecv says EAGAIN.
	for n := 0; ; n++ {
		err := a.ep.PostRecv(a.mr, size, size, ctxPingRecv|(iters+uint64(n))&0xffffffff, 0)
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if err != nil {
			return 0, err
		}
		if n > 1<<18 {
			return 0, fmt.Errorf("A: %d receives posted and the rx ring is still not full", n)
		}
		if n%64 == 63 {
			time.Sleep(time.Millisecond) // let the daemon take what it will
		}
	}
	return usec, nil
}
