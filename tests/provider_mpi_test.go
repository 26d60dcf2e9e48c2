package tests

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMPIOverProvider runs a 2-rank Open MPI program (tests/testdata/
// mpicheck.c: a ping-pong of 1 B to 1 MiB that checks every byte, and an
// allreduce) with Open MPI's mtl/ofi over the fabricfs provider
// (FI_PROVIDER=fabricfs), so every message goes through the tree.
func TestMPIOverProvider(t *testing.T) {
	needCmd(t, "mpicc")
	needCmd(t, "mpirun")
	d := mount(t)
	bin := filepath.Join(t.TempDir(), "mpicheck")
	if out, err := exec.Command("mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/mpicheck.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := fiCommand(t, d, ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "fabricfs",
		"-x", "FI_PROVIDER=fabricfs", "-x", "FI_PROVIDER_PATH", "-x", "FI_FABRICFS_ROOT", bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for _, want := range []string{"rank 0: ok (allreduce 3)", "rank 1: ok (allreduce 3)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("mpirun output lacks %q:\n%s", want, out)
		}
	}
}
