// Package cbuild compiles the C programs that tests run against libfabric
// (the interop peers in providers/*/testdata).
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
	missing := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("interop test needs gcc and libfabric-dev (CI is set): "+format, a...)
		}
		t.Skipf("interop test skipped: "+format, a...)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		missing("no gcc: %v", err)
	}
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		missing("no libfabric headers (install libfabric-dev): %v", err)
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	if out, err := exec.Command(gcc, "-O1", "-Wall", "-o", bin, src, "-lfabric").CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return bin
}
