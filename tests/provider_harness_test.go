package tests

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// fiCommand is a libfabric program on d's tree through the provider
// (provEnv), in its own process group, so that a timeout ends it and its
// children and nothing else; it is killed when ctx is done.
func fiCommand(t *testing.T, d *daemon, ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	needCmd(t, name)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), provEnv(t, d)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
