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
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "api.go", nil, parser.ParseComments)
	must(t, err)
	// api.go alone: the object types it names (CQ, SRQ, AH) are in
	// other files, and those errors do not matter to constant values.
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) {}}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	conf.Check("ibv", fset, []*ast.File{f}, info)
	want := map[string]string{} // C name -> Go value
	goName := map[string]string{}
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
			want[c] = info.Defs[vs.Names[0]].(*types.Const).Val().ExactString()
			goName[c] = vs.Names[0].Name
		}
	}
	if len(want) < 60 {
		t.Fatalf("only %d constants name a libibverbs constant", len(want))
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
