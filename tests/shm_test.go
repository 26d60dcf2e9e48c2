package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSharedMemoryKeepsItsSize: nobody can change the size of a ring or a
// memory region, in either mapping mode, so the daemon's own mapping never
// loses pages under it (a SIGBUS would end the daemon for every user). A
// client still reads and writes the bytes, and after the attempts the
// daemon still serves and the CQ still reaches its ring.
func TestSharedMemoryKeepsItsSize(t *testing.T) {
	forEachMapping(t, func(t *testing.T, d *daemon) {
		D := d.path("tcp", "lo")
		out, err := shell(`
set -eu
mkdir $D/cq/c $D/mr/m
echo 4096 > $D/mr/m/attr/len
echo reg > $D/mr/m/ctl
for f in cq/c/data mr/m/data; do
	size=$(stat -L -c %s $D/$f)
	truncate -s 0 $D/$f 2>/dev/null && { echo "$f: shrunk"; exit 1; }
	truncate -s 1G $D/$f 2>/dev/null && { echo "$f: grown"; exit 1; }
	{ printf x > $D/$f; } 2>/dev/null && { echo "$f: truncated by >"; exit 1; }
	[ "$(stat -L -c %s $D/$f)" = "$size" ] || { echo "$f: size changed"; exit 1; }
done
printf 'kept' 1<> $D/mr/m/data
head -c 4 $D/mr/m/data; echo
cat $D/cq/c/status`, "D="+D)
		if err != nil || !strings.HasPrefix(out, "kept\ncq c ") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
}

// TestSymlinkMappingForOtherUsers: in the symlink mode a root daemon gives
// another user's ring files as descriptors of a holder process running as
// that user. The user maps them; the size is fixed; a third user cannot
// open them; rmdir takes the descriptor back; the holder ends with the
// daemon.
func TestSymlinkMappingForOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	d := mountWith(t, "-mapping=symlink")
	openUp(t, filepath.Dir(d.mnt))
	D := d.path("tcp", "lo")
	out, err := asUser(nobody, `
set -eu
mkdir $D/cq/theirs
readlink $D/cq/theirs/data
od -An -c -N4 $D/cq/theirs/data | tr -d ' '
truncate -s 0 $D/cq/theirs/data 2>/dev/null && echo shrunk
exit 0`, "D="+D)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	target, magic := lines[0], lines[1]
	var pid, fd int
	if _, err := fmt.Sscanf(target, "/proc/%d/fd/%d", &pid, &fd); err != nil {
		t.Fatalf("link target %q: %v", target, err)
	}
	if pid == d.cmd.Process.Pid {
		t.Errorf("nobody's link names the daemon's descriptor %s", target)
	}
	if st, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil || st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Errorf("holder %d: %v, not running as nobody", pid, err)
	}
	if magic == "" || strings.Contains(magic, "\\0\\0\\0\\0") {
		t.Errorf("nobody read %q as the ring's first bytes", magic)
	}
	// Of the daemon's open files the holder has nobody's memfds and
	// nothing else (its user may take any descriptor it has): not
	// /dev/fuse. kcmp(KCMP_FILE) says whether two descriptors are one
	// open file.
	daemon := openFiles(t, d.cmd.Process.Pid)
	for hfd, what := range openFiles(t, pid) {
		for dfd := range daemon {
			a, _ := strconv.Atoi(hfd)
			b, _ := strconv.Atoi(dfd)
			const kcmpFile = 0
			r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(d.cmd.Process.Pid), kcmpFile, uintptr(a), uintptr(b), 0)
			if errno != 0 && errno != unix.EBADF { // EBADF: closed since the listing
				t.Fatalf("kcmp: %v", errno)
			}
			if errno == 0 && r == 0 && !strings.HasPrefix(what, "/memfd:fabricfs-") {
				t.Errorf("the holder's descriptor %s is the daemon's %s: %s", hfd, dfd, what)
			}
		}
	}
	// Another user may not open nobody's ring, even knowing the path.
	if out, err := asUser(nobody-1, "cat "+target+" >/dev/null"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("uid %d opening %s: %v, want EACCES\n%s", nobody-1, target, err, out)
	}
	// Root sees the daemon's own descriptor.
	if got, err := os.Readlink(filepath.Join(D, "cq", "theirs", "data")); err != nil || !strings.HasPrefix(got, "/proc/"+strconv.Itoa(d.cmd.Process.Pid)+"/") {
		t.Errorf("root's link: %q, %v", got, err)
	}
	if err := os.Remove(filepath.Join(D, "cq", "theirs")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the holder to close the removed CQ's descriptor", func() bool {
		_, err := os.Lstat(target)
		return os.IsNotExist(err)
	})

	// nobody stops the holder: a read of a link that needs it fails
	// after a while, without holding up root's rmdir of nobody's other
	// CQ meanwhile; the next read starts a new holder.
	if out, err := asUser(nobody, "mkdir $D/cq/a $D/cq/b && readlink $D/cq/a/data", "D="+D); err != nil || !strings.HasPrefix(out, fmt.Sprintf("/proc/%d/fd/", pid)) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	rl := exec.Command("readlink", filepath.Join(D, "cq", "b", "data"))
	rl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := rl.Start(); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() { stuck <- rl.Wait() }()
	waitFor(t, "the readlink to wait in readlink(2)", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", rl.Process.Pid))
		f := strings.Fields(string(b))
		return len(f) > 0 && (f[0] == strconv.Itoa(unix.SYS_READLINK) || f[0] == strconv.Itoa(unix.SYS_READLINKAT))
	})
	// The daemon has passed cq/b's memfd to the stopped holder when a
	// message waits on the holder's socket (its descriptor 0).
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	waitFor(t, "the daemon's message to the stopped holder", func() bool {
		n, err := unix.IoctlGetInt(sock, unix.SIOCINQ)
		return err == nil && n > 0
	})
	if err := os.Remove(filepath.Join(D, "cq", "a")); err != nil {
		t.Fatal(err)
	}
	// The holder is given 5 seconds: the readlink goes on waiting well
	// after the rmdir is done.
	select {
	case err := <-stuck:
		t.Fatalf("the readlink returned (%v) at about the time the rmdir did: the rmdir waited for the stopped holder", err)
	case <-time.After(time.Second):
	}
	if err := <-stuck; err == nil {
		t.Error("a readlink served by a stopped holder succeeded")
	}
	out, err = asUser(nobody, "readlink $D/cq/b/data", "D="+D)
	var pid2 int
	if _, serr := fmt.Sscanf(out, "/proc/%d/fd/", &pid2); err != nil || serr != nil || pid2 == pid {
		t.Fatalf("as nobody after the stopped holder: %v\n%s", err, out)
	}
	waitFor(t, "the stopped holder to be killed", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	})

	d.stop(t)
	waitFor(t, "the holder to exit with the daemon", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid2))
		return os.IsNotExist(err)
	})
}

// openFiles maps the descriptors of process pid to what they are.
func openFiles(t *testing.T, pid int) map[string]string {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range es {
		m[e.Name()], _ = os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
	}
	return m
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
