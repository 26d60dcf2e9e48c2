package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalUnmountsWithFilesOpen stops the daemon with SIGINT while a clone
// object is held open and a reader is blocked on its events: the daemon must
// exit, the blocked read must return, and the mount must be gone.
func TestSignalUnmountsWithFilesOpen(t *testing.T) {
	d := mount(t)
	held, _ := openClone(t, d, "eq")
	defer held.Close()
	events, err := os.Open(d.path("tcp", "lo", "eq", "0", "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	readDone := make(chan error, 1)
	go func() {
		_, err := events.Read(make([]byte, 100))
		readDone <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the read block in the daemon

	d.stopWith(t, syscall.SIGINT)
	select {
	case err := <-readDone:
		if err == nil {
			t.Error("blocked read returned no error after the daemon stopped")
		}
	case <-time.After(5 * time.Second):
		t.Error("blocked read did not return after the daemon stopped")
	}
	if isMounted(d.mnt) {
		t.Errorf("%s still mounted", d.mnt)
	}
}

// asUser runs a shell command as uid/gid and returns its combined output.
func asUser(uid uint32, script string, env ...string) (string, error) {
	return runShell(&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}, script, env...)
}

// shell runs a shell command as the test's own user.
func shell(script string, env ...string) (string, error) { return runShell(nil, script, env...) }

func runShell(attr *syscall.SysProcAttr, script string, env ...string) (string, error) {
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = attr
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const nobody = 65534

// openUp makes dir and its parents up to / traversable by other users, so
// a test process running as nobody can reach a mount under t.TempDir().
func openUp(t *testing.T, dir string) {
	for p := dir; p != "/" && p != "."; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil && !errors.Is(err, os.ErrPermission) {
			st, _ := os.Stat(p)
			if st != nil && st.Mode().Perm()&0o005 == 0o005 {
				continue
			}
			t.Logf("chmod %s: %v", p, err)
		}
	}
}

// TestOtherUsers checks the security model: objects belong to their
// creator (others get EACCES), every user can make objects, and the
// provider and domain files are world-readable.
func TestOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	d := mount(t)
	openUp(t, filepath.Dir(d.mnt))
	D := d.path("tcp", "lo")
	if err := os.Mkdir(filepath.Join(D, "ep", "mine"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := asUser(nobody, `
set -u
cat $D/attr/mr_key_size || exit 10
cat $D/info >/dev/null || exit 11
cat $D/ep/mine/status 2>/dev/null && exit 12
echo enable 2>/dev/null > $D/ep/mine/ctl && exit 13
rmdir $D/ep/mine 2>/dev/null && exit 14
mkdir $D/cq/theirs || exit 15
echo bind cq theirs send > $D/cq/theirs/ctl 2>/dev/null
cat $D/cq/theirs/status || exit 16
exit 0`, "D="+D)
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "8\n") || !strings.Contains(out, "cq theirs size=") {
		t.Errorf("as nobody, output:\n%s", out)
	}
	st, err := os.Stat(filepath.Join(D, "cq", "theirs"))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != nobody || st.Mode().Perm() != 0o700 {
		t.Errorf("cq made by nobody: uid %d mode %v", s.Uid, st.Mode())
	}
	// Root's bind to nobody's cq works (root may use everything); nobody's
	// objects are counted and freed like anyone's.
	if err := os.Remove(filepath.Join(D, "cq", "theirs")); err != nil {
		t.Errorf("root rmdir of nobody's cq: %v", err)
	}
}

// TestMountAsOrdinaryUser runs the daemon as nobody: it mounts through
// fusermount3 without allow_other, serves that user, and unmounts on
// SIGTERM.
func TestMountAsOrdinaryUser(t *testing.T) {
	needFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the daemon as another user")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3 (scripts/deps.sh installs fuse3)")
	}
	if st, err := os.Stat("/dev/fuse"); err != nil || st.Mode().Perm()&0o006 != 0o006 {
		t.Skip("/dev/fuse is not open to other users on this machine (mode 0600), so no ordinary user can mount FUSE here")
	}
	base := t.TempDir()
	mnt := filepath.Join(base, "fabric")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(mnt, nobody, nobody)
	openUp(t, base)
	openUp(t, filepath.Dir(daemonBin))
	cmd := exec.Command(daemonBin, "-allow-other=false", mnt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if isMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !isMounted(mnt) {
		if time.Now().After(deadline) {
			t.Fatalf("no mount as nobody; log:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The daemon's mapping mode is symlink (it is not root): the ring
	// file links to the daemon's own descriptor, which its user opens.
	out, err := asUser(nobody, `cat $M/abi_version && mkdir $M/tcp/lo/eq/e && cat $M/tcp/lo/eq/e/status &&
mkdir $M/tcp/lo/cq/c && cat $M/tcp/lo/cq/c/attr/mapping && readlink $M/tcp/lo/cq/c/data && od -An -tx1 -N4 $M/tcp/lo/cq/c/data`, "M="+mnt)
	link := fmt.Sprintf("/proc/%d/fd/", cmd.Process.Pid)
	if err != nil || !strings.HasPrefix(out, "1\neq e ") || !strings.Contains(out, "\nsymlink\n"+link) || strings.Contains(out, " 00 00 00 00") {
		t.Errorf("as nobody on nobody's mount: %v\n%s", err, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon exit: %v\n%s", err, log.String())
	}
	if isMounted(mnt) {
		t.Errorf("%s still mounted after SIGTERM", mnt)
	}
}

// TestRestartAfterKill: a daemon killed with SIGKILL leaves a stale mount
// (ENOTCONN); a new daemon on the same directory detaches it, says so in
// its log, and serves.
func TestRestartAfterKill(t *testing.T) {
	d := mount(t)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	if _, err := os.Stat(d.mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the killed daemon's mount: %v, want ENOTCONN", err)
	}
	t.Cleanup(func() {
		if isMounted(d.mnt) {
			syscall.Unmount(d.mnt, syscall.MNT_DETACH)
		}
	})
	d2 := mountAt(t, d.mnt, daemonArgv(t))
	if got := d2.read(t, "abi_version"); got == "" {
		t.Error("the new daemon serves an empty abi_version")
	}
	if !strings.Contains(d2.logText(), "is a stale fabricfs mount whose daemon is gone (killed?): detaching it") {
		t.Errorf("the new daemon's log does not say it detached the stale mount:\n%s", d2.logText())
	}
}

// TestStackDumpOnSIGUSR1: fabricfs(8) "SIGUSR1: write the stack of every
// goroutine to the log (at warn level) and go on serving". The tests' own
// hang reports depend on it (stacks_test.go).
func TestStackDumpOnSIGUSR1(t *testing.T) {
	d := mount(t)
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	// The main goroutine waits in main.run for a signal or the unmount.
	for !strings.Contains(d.logText(), "level=WARN msg=\"SIGUSR1: the stacks of every goroutine follow") ||
		!strings.Contains(d.logText(), "goroutine 1 [") || !strings.Contains(d.logText(), "main.run(") {
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine stacks in the log 10 s after SIGUSR1:\n%s", d.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.ReadFile(d.path("version")); err != nil {
		t.Fatalf("the tree after SIGUSR1: %v", err)
	}
}
