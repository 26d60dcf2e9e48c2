package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The libfabric provider (provider/, docs/provider.md) is built once per
// test binary by scripts/provider.sh into the repository's bin/.
var (
	providerOnce sync.Once
	providerDir  string
	providerOut  []byte
	providerErr  error
)

// buildProvider builds bin/libfabricfs-fi.so and returns the directory
// that holds it, for FI_PROVIDER_PATH.
func buildProvider(t *testing.T) string {
	t.Helper()
	needCmd(t, "gcc")
	providerOnce.Do(func() {
		providerOut, providerErr = exec.Command("../scripts/provider.sh").CombinedOutput()
		providerDir, _ = filepath.Abs("../bin")
	})
	if providerErr != nil {
		t.Fatalf("scripts/provider.sh: %v\n%s", providerErr, providerOut)
	}
	return providerDir
}

// fiEnv is the environment of a libfabric program that uses d's tree
// through the provider.
func (d *daemon) fiEnv(t *testing.T) []string {
	return append(os.Environ(), "FI_PROVIDER_PATH="+buildProvider(t), "FI_FABRICFS_ROOT="+d.mnt)
}

// fiCommand is a libfabric program on d's tree, in its own process group
// (so a timeout ends it and its children, and nothing else), ended when
// ctx is done.
func (d *daemon) fiCommand(t *testing.T, ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	needCmd(t, name)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = d.fiEnv(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
