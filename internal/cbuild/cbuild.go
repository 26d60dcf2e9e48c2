// Package cbuild compiles the C programs that tests run against libfabric
// (the interop peers in providers/*/testdata) and libibverbs (constant
// checks).
package cbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Libfabric compiles the C file src with gcc against libfabric and returns
// the program's path in t's temporary directory. Without gcc or the
// libfabric headers (package libfabric-dev, which scripts/deps.sh installs)
// the test is skipped, or fails when CI is set; a file that does not
// compile always fails the test.
func Libfabric(t testing.TB, src string) string {
	t.Helper()
	return build(t, src, "/usr/include/rdma/fabric.h", "libfabric-dev", "-lfabric")
}

// Verbs compiles the C file src with gcc against libibverbs' headers
// (package libibverbs-dev, which scripts/deps.sh installs), without
// linking the library, and returns the program's path, as Libfabric does.
func Verbs(t testing.TB, src string) string {
	t.Helper()
	return build(t, src, "/usr/include/infiniband/verbs.h", "libibverbs-dev")
}

// build compiles src with gcc and libs, skipping t (failing it when CI is
// set) without gcc or header, which package pkg installs.
func build(t testing.TB, src, header, pkg string, libs ...string) string {
	t.Helper()
	missing := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("test needs gcc and "+pkg+" (CI is set): "+format, a...)
		}
		t.Skipf("test skipped: "+format, a...)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		missing("no gcc: %v", err)
	}
	if _, err := os.Stat(header); err != nil {
		missing("no %s (install %s): %v", header, pkg, err)
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-O1", "-Wall", "-o", bin, src}, libs...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return bin
}
