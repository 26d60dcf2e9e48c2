package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSystemdUnit: deploy/fabricfs.service passes systemd-analyze verify
// without a word (an unknown key is only a warning there), its man pages
// found in man/; only ExecStart's binary is this test's build. It is a
// notify service whose stop signals the daemon alone, and it has no option
// that would give the daemon a mount namespace of its own, where its
// mount would be invisible to the host.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (scripts/deps.sh installs systemd)")
	}
	unit, err := os.ReadFile("../deploy/fabricfs.service")
	must(t, err)
	text := string(unit)
	for _, want := range []string{"\nType=notify\n", "\nNotifyAccess=main\n", "\nKillMode=mixed\n",
		"\nExecStart=/usr/local/sbin/fabricfs -config /etc/fabricfs.conf /fabric\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the unit has no %q", strings.TrimSpace(want))
		}
	}
	for _, opt := range []string{"PrivateTmp", "ProtectSystem", "ProtectHome", "PrivateDevices", "ProtectKernelTunables",
		"ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "ReadOnlyPaths",
		"InaccessiblePaths", "TemporaryFileSystem", "BindPaths", "PrivateMounts", "MountFlags", "DevicePolicy", "DeviceAllow"} {
		if strings.Contains(text, "\n"+opt+"=") {
			t.Errorf("the unit sets %s, which hides the mount or /dev/fuse", opt)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "fabricfs.service")
	must(t, os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/sbin/fabricfs", daemonBin)), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "systemd-analyze", "verify", path)
	man, err := filepath.Abs("../man")
	must(t, err)
	cmd.Env = append(os.Environ(), "MANPATH="+man, "SYSTEMD_LOG_COLOR=0")
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSdNotify starts the daemon as systemd starts a Type=notify service,
// NOTIFY_SOCKET naming a datagram socket the test listens on (a path, then
// an abstract name): READY=1 arrives once the tree is mounted and answers,
// and STOPPING=1 after SIGTERM, before the daemon unmounts and exits.
func TestSdNotify(t *testing.T) {
	needFUSE(t)
	for _, abstract := range []bool{false, true} {
		t.Run(fmt.Sprintf("abstract=%v", abstract), func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "notify")
			if abstract {
				name = fmt.Sprintf("@fabricfs-test-notify-%d", os.Getpid())
			}
			sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
			must(t, err)
			defer sock.Close()
			mnt := filepath.Join(dir, "fabric")
			must(t, os.Mkdir(mnt, 0o755))
			cmd := exec.Command(daemonBin, "-verbs-addrs", "none", mnt)
			cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+name)
			var log strings.Builder
			cmd.Stdout, cmd.Stderr = &log, &log
			must(t, cmd.Start())
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					cmd.Wait()
				}
				if isMounted(mnt) {
					syscall.Unmount(mnt, syscall.MNT_DETACH)
				}
				if t.Failed() {
					t.Logf("daemon log:\n%s", log.String())
				}
			}()
			recv := func(want string) {
				t.Helper()
				buf := make([]byte, 4096)
				sock.SetReadDeadline(time.Now().Add(30 * time.Second))
				n, err := sock.Read(buf)
				if err != nil {
					t.Fatalf("waiting for %s: %v", want, err)
				}
				if lines := strings.Split(string(buf[:n]), "\n"); lines[0] != want {
					t.Fatalf("notification %q, want %s first", buf[:n], want)
				}
			}
			recv("READY=1")
			if b, err := os.ReadFile(filepath.Join(mnt, "abi_version")); !isMounted(mnt) || err != nil || len(b) == 0 {
				t.Errorf("at READY=1 the tree does not answer: %v", err)
			}
			must(t, cmd.Process.Signal(syscall.SIGTERM))
			recv("STOPPING=1")
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("daemon exit: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the daemon did not exit after SIGTERM")
			}
			if isMounted(mnt) {
				t.Errorf("%s is still mounted after the daemon stopped", mnt)
			}
		})
	}
}
