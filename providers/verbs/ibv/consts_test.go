package ibv

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
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/internal/cbuild"
)

// verbsName is the libibverbs name a constant's comment starts with.
var verbsName = regexp.MustCompile(`^IBV_[A-Z0-9_]+`)

// TestVerbsConstants compares every constant of api.go whose comment
// names a libibverbs constant ("WCWRFlushErr WCStatus = 5 //
// IBV_WC_WR_FLUSH_ERR") with that constant's value in
// infiniband/verbs.h, compiled into a C program.
func TestVerbsConstants(t *testing.T) {
	want := map[string]string{} // C name -> Go value
	goName := map[string]string{}
	for _, c := range apiConstants(t) {
		want[c.c], goName[c.c] = c.val, c.name
	}
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n")
	for c := range want {
		fmt.Fprintf(&src, "\tprintf(\"%s %%llu\\n\", (unsigned long long)(%s));\n", c, c)
	}
	src.WriteString("\treturn 0;\n}\n")
	file := filepath.Join(t.TempDir(), "consts.c")
	must(t, os.WriteFile(file, []byte(src.String()), 0o600))
	out, err := exec.Command(cbuild.Verbs(t, file)).Output()
	must(t, err)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		c, v, _ := strings.Cut(line, " ")
		if want[c] != v {
			t.Errorf("%s = %s, want %s (%s in verbs.h)", goName[c], want[c], v, c)
		}
		n++
	}
	if n != len(want) {
		t.Errorf("the C program printed %d constants of %d", n, len(want))
	}
}

// apiConst is a constant of api.go whose comment names a libibverbs
// constant.
type apiConst struct {
	name, typ, c string // Go name, Go type, libibverbs name
	val          string // exact value
}

func apiConstants(t *testing.T) []apiConst {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "api.go", nil, parser.ParseComments)
	must(t, err)
	// api.go alone: the object types it names (CQ, SRQ, AH) are in
	// other files, and those errors do not matter to constant values.
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) {}}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	conf.Check("ibv", fset, []*ast.File{f}, info)
	var out []apiConst
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if vs.Comment == nil {
				continue
			}
			c := verbsName.FindString(strings.TrimSpace(vs.Comment.Text()))
			if c == "" {
				continue
			}
			k := info.Defs[vs.Names[0]].(*types.Const)
			out = append(out, apiConst{name: vs.Names[0].Name, typ: k.Type().String(), c: c, val: k.Val().ExactString()})
		}
	}
	return out
}

// TestWCStatusNames checks that every completion status prints as the
// name verbs.h gives it, and one verbs.h does not have as its number.
func TestWCStatusNames(t *testing.T) {
	n := 0
	for _, c := range apiConstants(t) {
		if !strings.HasSuffix(c.typ, ".WCStatus") {
			continue
		}
		v, err := strconv.ParseUint(c.val, 10, 32)
		must(t, err)
		if got := WCStatus(v).String(); got != c.c {
			t.Errorf("%s.String() = %q, want %q", c.name, got, c.c)
		}
		n++
	}
	if n != len(wcStatusNames) {
		t.Errorf("%d WCStatus constants for %d names", n, len(wcStatusNames))
	}
	if got := WCStatus(99).String(); got != "ibv_wc_status 99" {
		t.Errorf("WCStatus(99) = %q", got)
	}
}
