package fi

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// needTool skips t with reason when ok is false, unless the environment
// variable CI is set: there the reference tools must be installed and the
// test fails instead.
func needTool(t *testing.T, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this is an error)", reason)
	}
	t.Skip(reason)
}

// needC skips t (see needTool) unless gcc, the libfabric headers and the
// libraries libs are installed, and returns gcc's path.
func needC(t *testing.T, libs ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	needTool(t, err == nil, "gcc not found: cannot check against libfabric's C headers")
	_, err = os.Stat("/usr/include/rdma/fabric.h")
	needTool(t, err == nil, "libfabric headers not found in /usr/include/rdma (install libfabric-dev)")
	for _, lib := range libs {
		_, err := exec.Command(gcc, "-l"+lib, "-shared", "-o", os.DevNull).CombinedOutput()
		needTool(t, err == nil, "library lib"+lib+" not found (install libfabric-dev)")
	}
	return gcc
}

// runC compiles the C program src with gcc against the libfabric headers
// (and the libraries libs) and returns what it prints.
func runC(t *testing.T, src string, libs ...string) string {
	t.Helper()
	gcc := needC(t, libs...)
	dir := t.TempDir()
	c := filepath.Join(dir, "check.c")
	bin := filepath.Join(dir, "check")
	if err := os.WriteFile(c, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-Wno-deprecated-declarations", "-o", bin, c}
	for _, lib := range libs {
		args = append(args, "-l"+lib)
	}
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("running the C check: %v", err)
	}
	return string(out)
}

const cHeaders = `#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
`

// cName maps the Go names whose C name is not "FI_" + name.
var cName = map[string]string{
	"EEXIST": "EEXIST", // commented out in fi_errno.h: the system's value
}

// constFiles hold the constants that TestConstantsMatchHeaders checks;
// the other files of the package are for the types they use.
var constFiles = []string{"consts.go", "errno.go"}

// declaredConstants type-checks constFiles (with info.go) and returns every
// exported constant they declare, by name, as the C program prints it.
func declaredConstants(t *testing.T) map[string]string {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append([]string{"info.go"}, constFiles...) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("fi", fset, files, nil)
	if err != nil {
		t.Fatalf("type-checking %v: %v", constFiles, err)
	}
	consts := map[string]string{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || !c.Exported() {
			continue
		}
		file := filepath.Base(fset.Position(c.Pos()).Filename)
		if file == "info.go" {
			continue
		}
		consts[name] = c.Val().ExactString()
	}
	return consts
}

// TestConstantsMatchHeaders compares every constant of consts.go and
// errno.go with the C headers' value.
func TestConstantsMatchHeaders(t *testing.T) {
	needC(t)
	consts := declaredConstants(t)
	if len(consts) < 300 {
		t.Fatalf("found only %d constants; is the type-check missing files?", len(consts))
	}
	var b strings.Builder
	b.WriteString(cHeaders + "int main(void) {\n")
	for name := range consts {
		c := cName[name]
		if c == "" {
			c = "FI_" + name
		}
		fmt.Fprintf(&b, "\tprintf(\"%s %%llu\\n\", (unsigned long long)(%s));\n", name, c)
	}
	b.WriteString("\treturn 0;\n}\n")
	out := runC(t, b.String())
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, cval, _ := strings.Cut(line, " ")
		if consts[name] != cval {
			t.Errorf("%s = %s, want %s (the C header's value)", name, consts[name], cval)
		}
		n++
	}
	if n != len(consts) {
		t.Errorf("the C program printed %d constants, want %d", n, len(consts))
	}
}

func TestDSCP(t *testing.T) {
	for _, d := range []uint8{0, 1, 46, 63, 255} {
		tc := MakeDSCP(d)
		if got, ok := tc.DSCP(); !ok || got != d {
			t.Errorf("MakeDSCP(%d).DSCP() = %d, %v, want %d, true", d, got, ok, d)
		}
	}
	for _, tc := range []TClass{TC_UNSPEC, TC_BULK_DATA, TC_LABEL, TC_NETWORK_CTRL} {
		if got, ok := tc.DSCP(); ok {
			t.Errorf("%v.DSCP() = %d, true, want false", tc, got)
		}
	}
	if s := strconv.Quote(MakeDSCP(5).String()); s != `"0x105"` {
		t.Errorf("MakeDSCP(5).String() = %s, want \"0x105\"", s)
	}
}
