package manpage

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/internal/settings"
)

const root = "../.."

// The committed files are what the generator makes from the flags and
// docs/tree.md now.
func TestGeneratedFilesFresh(t *testing.T) {
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run go generate ./internal/manpage and commit it", name, err)
		}
	}
}

// run runs a command for at most a minute and returns its output.
func run(t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// groff formats every page without a warning (-ww: all of them), and so
// does mandoc's linter where it is installed.
func TestPagesRender(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed (apt-get install groff-base)")
	}
	for _, page := range []string{DaemonPage, TreePage} {
		path := filepath.Join(root, page)
		if _, stderr, err := run(t, "groff", "-man", "-ww", "-z", path); err != nil || stderr != "" {
			t.Errorf("groff -man -ww -z %s: %v: %s", page, err, stderr)
		}
		out, _, err := run(t, "groff", "-man", "-Tutf8", path)
		if err != nil || !strings.Contains(out, "fabricfs - ") {
			t.Errorf("groff -man -Tutf8 %s: %v: %.200q", page, err, out)
		}
		if _, err := exec.LookPath("mandoc"); err == nil {
			if stdout, stderr, err := run(t, "mandoc", "-Tlint", "-Wwarning", path); err != nil {
				t.Errorf("mandoc -Tlint %s: %v: %s%s", page, err, stdout, stderr)
			}
		}
	}
}

// fabricfs(8) has every flag, its argument and its default; fabricfs(5)
// has every path of docs/tree.md's tables.
func TestPagesContent(t *testing.T) {
	fs := flag.NewFlagSet("fabricfs", flag.ContinueOnError)
	settings.Register(fs)
	page := string(Daemon(fs))
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		arg, _ := flag.UnquoteUsage(f)
		want := ".TP\n\\fB\\-" + code(f.Name) + "\\fR"
		if arg != "" {
			want += " \\fI" + arg + "\\fR"
		}
		if !strings.Contains(page, want+"\n") {
			t.Errorf("fabricfs(8) has no %q", want)
		}
	})
	if n < 20 || strings.Count(page, ".TP\n\\fB\\-") != n {
		t.Errorf("fabricfs(8) lists %d flags, the flag set has %d", strings.Count(page, ".TP\n\\fB\\-"), n)
	}
	for _, want := range []string{"Default: 4791.", "Default: 10s.", "Default: true as root, else false."} {
		if !strings.Contains(page, want) {
			t.Errorf("fabricfs(8) has no %q", want)
		}
	}

	md, err := os.ReadFile(filepath.Join(root, treeDoc))
	if err != nil {
		t.Fatal(err)
	}
	tree := string(Tree(md))
	rows := 0
	for _, l := range strings.Split(string(md), "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		rows++
		path := splitRow(l)[0]
		if want := ".TP\n" + inline(path); !strings.Contains(tree, want) {
			t.Errorf("fabricfs(5) has no entry %q", want)
		}
	}
	if rows < 100 {
		t.Errorf("docs/tree.md has %d rows of paths", rows)
	}
}

func TestRoff(t *testing.T) {
	for _, c := range []struct{ md, want string }{
		{"plain text", ".PP\nplain text\n"},
		{"a `-x` b **c**", ".PP\na \\fB\\-x\\fR b \\fBc\\fR\n"},
		{"`.x` is no request", ".PP\n\\fB.x\\fR is no request\n"},
		{". at the start", ".PP\n\\&. at the start\n"},
		{"back\\slash and \u00e9", ".PP\nback\\eslash and \\[u00E9]\n"},
		{"## Root\n\n### Sub", ".SH ROOT\n.SS Sub\n"},
		{"- one\n  more\n- two", ".IP \\(bu 2\none\nmore\n.IP \\(bu 2\ntwo\n"},
		{"| path | mode | meaning |\n|---|---|---|\n| `/a` | RO | x \\| y |\n| `/b` |  | z |",
			".TP\n\\fB/a\\fR (RO)\nx | y\n.TP\n\\fB/b\\fR\nz\n"},
		{"first\nsecond\n\nthird", ".PP\nfirst\nsecond\n.PP\nthird\n"},
	} {
		if got := roff(c.md); got != c.want {
			t.Errorf("roff(%q) = %q, want %q", c.md, got, c.want)
		}
	}
}
