package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// docRow is `| `PATH` | MODE | ...` in docs/tree.md.
var docRow = regexp.MustCompile("^\\| `([^`]+)` \\| (RO|RW|dir|link) \\|")

// treeDocs reads the documented paths and their modes.
func treeDocs(t *testing.T) map[string]string {
	b, err := os.ReadFile("../docs/tree.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := docRow.FindStringSubmatch(l); m != nil {
			if _, dup := docs[m[1]]; dup {
				t.Errorf("docs/tree.md lists %s twice", m[1])
			}
			docs[m[1]] = m[2]
		}
	}
	return docs
}

// treeProviders are the providers of the mounted tree at mnt: the root's
// entries but the fixed ones docs/tree.md lists (/abi_version, /info,
// /getinfo). A provider added to cmd/fabricfs shows up here by itself.
func treeProviders(t *testing.T, mnt string, docs map[string]string) map[string]bool {
	es, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	provs := map[string]bool{}
	for _, e := range es {
		if _, fixed := docs["/"+e.Name()]; !fixed {
			provs[e.Name()] = true
		}
	}
	if !provs["tcp"] {
		t.Fatalf("the tree's root has no tcp among %v", es)
	}
	return provs
}

// treeKinds are the object kinds of the domain directory dom: its
// directories with a clone file (ep, pep, cq...). A kind added to core shows
// up here by itself.
func treeKinds(t *testing.T, dom string) []string {
	es, err := os.ReadDir(dom)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		if _, err := os.Lstat(filepath.Join(dom, e.Name(), "clone")); e.IsDir() && err == nil {
			kinds = append(kinds, e.Name())
		}
	}
	if !slices.Contains(kinds, "ep") || !slices.Contains(kinds, "pep") {
		t.Fatalf("%s has kinds %v, without ep and pep", dom, kinds)
	}
	return kinds
}

// generic turns a real path into the documented pattern, given the
// providers: /tcp/lo/ep/a/ctl -> /<prov>/<domain>/ep/<id>/ctl,
// /users/0 -> /users/<uid>, /users/0.json -> /users/<uid>.json.
func generic(rel string, provs map[string]bool) string {
	p := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	if len(p) == 2 && p[0] == "users" {
		_, ext, _ := strings.Cut(p[1], ".") // users/0.stats.json: <uid>.stats.json
		p[1] = "<uid>"
		if ext != "" {
			p[1] += "." + ext
		}
	}
	if len(p) >= 1 && provs[p[0]] {
		p[0] = "<prov>"
	}
	if len(p) >= 2 && p[0] == "<prov>" && p[1] != "info" && p[1] != "info.json" && p[1] != "stats" && p[1] != "stats.json" {
		p[1] = "<domain>"
	}
	if len(p) >= 4 && p[1] == "<domain>" && p[2] != "attr" && p[3] != "clone" {
		p[3] = "<id>"
	}
	return "/" + strings.Join(p, "/")
}

// TestTreeMatchesDocs builds one object of every kind, with bindings, and
// checks that every file in the tree is documented in docs/tree.md with the
// right mode, and that every documented file exists.
func TestTreeMatchesDocs(t *testing.T) {
	docs := treeDocs(t)
	d := mount(t)
	provs := treeProviders(t, d.mnt, docs)
	lo := func(e ...string) []string { return append([]string{"tcp", "lo"}, e...) }
	kinds := treeKinds(t, d.path(lo()...))
	for _, k := range kinds {
		if err := os.Mkdir(d.path(lo(k, "x")...), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	d.mustCtl(t, "bind eq x", lo("pep", "x", "ctl")...)
	d.mustCtl(t, "bind eq x", lo("ep", "x", "ctl")...)
	d.mustCtl(t, "bind eq x", lo("mr", "x", "ctl")...)
	d.mustCtl(t, "bind cq x send,recv", lo("ep", "x", "ctl")...)
	d.mustCtl(t, "bind av x", lo("ep", "x", "ctl")...)
	d.mustCtl(t, "bind cntr x send,recv,read,write,remote_read,remote_write", lo("ep", "x", "ctl")...)
	d.mustCtl(t, "bind srx x", lo("ep", "x", "ctl")...)
	d.mustCtl(t, "bind stx x", lo("ep", "x", "ctl")...)
	// A context of a scalable endpoint (the sep link) and an alias of an
	// enabled endpoint (the alias link).
	for _, e := range []string{"s", "c", "p", "al"} {
		if err := os.Mkdir(d.path(lo("ep", e)...), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ ep, cmd string }{{"s", "FI_EP_RDM"}, {"p", "FI_EP_RDM"}} {
		if err := os.WriteFile(d.path(lo("ep", c.ep, "attr", "type")...), []byte(c.cmd), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(d.path(lo("ep", "s", "attr", "scalable")...), []byte("true"), 0); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(t, "context s tx 0", lo("ep", "c", "ctl")...)
	for _, c := range []string{"bind av x", "bind cq x send,recv", "enable"} {
		d.mustCtl(t, c, lo("ep", "p", "ctl")...)
	}
	d.mustCtl(t, "alias p FI_TRANSMIT|FI_COMPLETION", lo("ep", "al", "ctl")...)

	seen := map[string]string{}
	err := filepath.WalkDir(d.mnt, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, d.mnt)
		if rel == "" {
			return nil
		}
		// Walk one domain (tcp's lo, where the objects are): every
		// domain of every provider has the same shape.
		if p := strings.Split(rel, "/"); len(p) >= 3 && provs[p[1]] && p[2] != "info" && !(p[1] == "tcp" && p[2] == "lo") &&
			!(len(p) >= 4 && p[3] == "ports") { // a verbs domain's ports/, which tcp's lo has not
			if e.IsDir() {
				seen[generic(rel, provs)] = "dir"
				if len(p) == 3 && p[1] == "verbs" {
					return nil
				}
				return fs.SkipDir
			}
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		mode := "RO"
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			mode = "link"
		case info.IsDir():
			mode = "dir"
		case info.Mode().Perm()&0o222 != 0:
			mode = "RW"
		}
		seen[generic(rel, provs)] = mode
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale []string
	for p, m := range seen {
		if dm, ok := docs[p]; !ok {
			missing = append(missing, p+" ("+m+")")
		} else if dm != m {
			t.Errorf("%s is %s in the tree, %s in docs/tree.md", p, m, dm)
		}
	}
	for p := range docs {
		if _, ok := seen[p]; !ok {
			stale = append(stale, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("in the tree but not in docs/tree.md:\n%s", strings.Join(missing, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("in docs/tree.md but not in the tree:\n%s", strings.Join(stale, "\n"))
	}
	for _, p := range [][]string{{"ep", "al"}, {"ep", "p"}, {"ep", "c"}, {"ep", "s"}, {"ep", "x"}, {"pep", "x"}, {"mr", "x"}} { // the binding ones first
		if err := os.Remove(d.path(lo(p...)...)); err != nil && err.(*os.PathError).Err != syscall.ENOENT {
			t.Errorf("rmdir %s: %v", p, err)
		}
	}
	for _, k := range kinds {
		if err := os.Remove(d.path(lo(k, "x")...)); err != nil && err.(*os.PathError).Err != syscall.ENOENT {
			t.Errorf("rmdir %s/x: %v", k, err)
		}
	}
}
