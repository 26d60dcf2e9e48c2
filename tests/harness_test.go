// Package tests holds fabricfs's end-to-end tests: they build the daemon,
// mount the tree in a temporary directory and drive it from sh and Go
// through files only.
package tests

import (
	"bufio"
	"fmt"
	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemonBin is the fabricfs binary built once by TestMain.
var daemonBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fabricfs-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "fabricfs")
	args := []string{"build", "-o", daemonBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../cmd/fabricfs")...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building fabricfs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needFUSE skips a test that cannot mount here, or fails it under CI.
func needFUSE(t *testing.T) {
	t.Helper()
	reason := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = "no /dev/fuse"
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			reason = "not root and no fusermount3"
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot mount: %s", reason)
	}
	t.Skipf("cannot mount: %s", reason)
}

// needCmd makes sure a command from the project's dependencies is there:
// as root it runs scripts/deps.sh (apt-get) when the command is missing;
// otherwise the test skips, or fails under CI.
func needCmd(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("../scripts/deps.sh").CombinedOutput(); err != nil {
			t.Logf("scripts/deps.sh: %v\n%s", err, out)
		}
		if _, err := exec.LookPath(name); err == nil {
			return
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed and scripts/deps.sh could not install it", name)
	}
	t.Skipf("%s is not installed; run scripts/deps.sh", name)
}

// daemon is one running fabricfs.
type daemon struct {
	mnt string
	cmd *exec.Cmd

	mu  sync.Mutex
	log strings.Builder // what the daemon printed so far
}

// logText is what the daemon printed so far.
func (d *daemon) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// tree opens the daemon's tree with package clients/go/fabricfs.
func (d *daemon) tree(t testing.TB) *fabricfs.Tree {
	t.Helper()
	tr, err := fabricfs.Open(d.mnt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// mount starts fabricfs on a new directory under t.TempDir() and registers
// a cleanup that stops it and makes sure the mount is gone, even when the
// test fails.
func mount(t *testing.T) *daemon {
	t.Helper()
	return mountWith(t)
}

// mountWith is mount with extra daemon flags (such as -mapping=symlink),
// given before the mount point. The daemon has one verbs device,
// verbsDevice on 127.0.0.1, on a UDP port free when it starts, so that
// daemons of tests running at the same time do not share a fabric; a flag
// of the test's own overrides it.
func mountWith(t *testing.T, flags ...string) *daemon {
	t.Helper()
	return mountArgv(t, daemonArgv(t, flags...))
}

// daemonArgv is the command line mountWith runs, but the mount point.
func daemonArgv(t *testing.T, flags ...string) []string {
	args := []string{"-verbs-addrs", "127.0.0.1", "-roce-port", strconv.Itoa(freeUDPPort(t))}
	return append([]string{daemonBin}, append(args, flags...)...)
}

// mountArgv is mountWith with the whole command line but the mount point,
// which it appends; argv may start with a command that runs the daemon
// (nsenter).
func mountArgv(t *testing.T, argv []string) *daemon {
	t.Helper()
	needFUSE(t)
	mnt := filepath.Join(t.TempDir(), "fabric")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return mountAt(t, mnt, argv)
}

// mountAt is mountArgv on the directory mnt.
func mountAt(t *testing.T, mnt string, argv []string) *daemon {
	t.Helper()
	d := &daemon{mnt: mnt}
	d.cmd = exec.Command(argv[0], append(argv[1:], mnt)...)
	pr, pw, _ := os.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	logDone := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		close(logDone)
	}()
	live.Store(d, true)
	t.Cleanup(func() {
		live.Delete(d)
		d.stop(t)
		<-logDone
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logText())
		}
	})
	// Up means mounted, answering, and done mounting: the daemon logs
	// "mounted on" once go-fuse's mount has returned. go-fuse opens and
	// closes a file of the mount itself while mounting (its poll probe);
	// a daemon killed with that file open never exits (closing it waits
	// for the daemon's own answer), so a test that kills a daemon must not
	// start before that.
	deadline := time.Now().Add(20 * time.Second)
	for !isMounted(mnt) || !served(mnt) || !strings.Contains(d.logText(), "mounted on "+mnt) {
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			t.Fatalf("fabricfs did not mount %s", mnt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// verbsDevice is the verbs device mount gives a daemon: its domain's name.
const verbsDevice = "rxe_127_0_0_1"

// freeUDPPort is a UDP port of 127.0.0.1 that nothing uses now.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// stop sends SIGTERM to the daemon (by PID) and waits for it to exit and
// the mount to disappear; as a last resort it detaches the mount.
func (d *daemon) stop(t *testing.T) { d.stopWith(t, syscall.SIGTERM) }

// stopWith is stop with another signal.
func (d *daemon) stopWith(t *testing.T, sig os.Signal) {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(sig)
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("fabricfs exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("fabricfs did not exit after %v; killing it", sig)
		d.cmd.Process.Kill()
		<-exited
	}
	if isMounted(d.mnt) {
		t.Errorf("%s still mounted after fabricfs exited; detaching", d.mnt)
		syscall.Unmount(d.mnt, syscall.MNT_DETACH)
	}
}

// served reports whether the mount at dir answers (a stale one, whose
// daemon is gone, gives ENOTCONN).
func served(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// path joins elements under the mount point.
func (d *daemon) path(elem ...string) string {
	return filepath.Join(append([]string{d.mnt}, elem...)...)
}

// read returns a file's contents.
func (d *daemon) read(t *testing.T, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(d.path(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ctl writes one command to a file and returns the write's error.
func ctl(path, cmd string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte(cmd + "\n"))
	return err
}

// mustCtl is ctl that fails the test on error, showing the object's err.
func (d *daemon) mustCtl(t *testing.T, cmd string, elem ...string) {
	t.Helper()
	p := d.path(elem...)
	if err := ctl(p, cmd); err != nil {
		e, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "err"))
		t.Fatalf("%q > %s: %v (err: %s)", cmd, p, err, strings.TrimSpace(string(e)))
	}
}

// fdCount counts the open file descriptors of process pid.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// connectedPair makes an EQ, a CQ of 16 entries and a connected pair of
// FI_EP_MSG endpoints of dom on them, through the Go client; the test's
// cleanup closes them all.
func connectedPair(t *testing.T, dom *fabricfs.Domain) (a, b *fabricfs.EP, cq *fabricfs.CQ) {
	t.Helper()
	eq, err := dom.NewEQ()
	must(t, err)
	t.Cleanup(func() { eq.Close() })
	cq, err = dom.NewCQ(16)
	must(t, err)
	t.Cleanup(func() { cq.Close() })
	a, b, pep, err := dom.Connect(eq, cq, cq)
	must(t, err)
	t.Cleanup(func() {
		b.Close()
		a.Close()
		pep.Close()
	})
	return a, b, cq
}
