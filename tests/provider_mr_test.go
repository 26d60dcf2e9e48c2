package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The C test programs of the provider's memory regions, counters and
// address vectors (provider/test/{mr,cntr,av}_test.c), each built from
// provider/tree.c, the file it tests and itself, and run against a
// mounted tree (mr_test in each mapping mode, since the provider maps
// mr/N/data over the application's pages, through FUSE passthrough or the
// symlink to the daemon's memfd, and on verbs too).

// buildProviderTest compiles provider/test/NAME_test.c with tree.c,
// wait.c (the wait objects every object kind may have), provider/NAME.c,
// provider/EXTRA.c for each of extra, and provider/test/stubs.c (weak
// stand-ins for the other files) into dir, with every warning an error.
func buildProviderTest(t *testing.T, dir, name string, extra ...string) string {
	t.Helper()
	needCmd(t, "gcc")
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		t.Skip("libfabric's headers are not installed (libfabric-dev)")
	}
	bin := filepath.Join(dir, name+"_test")
	args := []string{"-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
		"-Wno-missing-field-initializers", "-I", "../clients/c", "-o", bin,
		"../provider/test/" + name + "_test.c", "../provider/tree.c", "../provider/wait.c", "../provider/" + name + ".c",
		"../provider/test/stubs.c"}
	for _, x := range extra {
		args = append(args, "../provider/"+x+".c")
	}
	args = append(args, "-lfabric", "-lpthread")
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, out)
	}
	return bin
}

// runProviderTest runs a test program with args against d's tree; it
// prints "ok NAME" when every check held.
func runProviderTest(t *testing.T, d *daemon, bin, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "FI_FABRICFS_ROOT="+d.mnt)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "ok "+name+"\n" {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestProviderMR runs mr_test (with cntr.c) in each mapping mode on tcp/lo and on the
// verbs domain, whose keys are the device's (FI_MR_PROV_KEY) and whose
// device reaches a region from its attr/base.
func TestProviderMR(t *testing.T) {
	needFUSE(t)
	bin := buildProviderTest(t, t.TempDir(), "mr", "cntr") // cntr: fi_close of a counter bound to a closed registration
	forEachMapping(t, func(t *testing.T, d *daemon) {
		runProviderTest(t, d, bin, "mr")
		runProviderTest(t, d, bin, "mr", "verbs", verbsDevice, "FI_MR_PROV_KEY")
	})
}

func TestProviderCntrAV(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	cntr, av := buildProviderTest(t, dir, "cntr"), buildProviderTest(t, dir, "av")
	d := mount(t)
	t.Run("cntr", func(t *testing.T) { runProviderTest(t, d, cntr, "cntr") })
	t.Run("av", func(t *testing.T) { runProviderTest(t, d, av, "av") })
}
