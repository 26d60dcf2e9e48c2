package tests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docs/seeds.md is the seed-conformance table: one row per item of the four
// man pages the project was made from (../shared/seeds, outside the
// repository: they are libfabric's text). The tests here keep it honest
// against the pages, the repository's tests and its own summary.

// seedPages maps each seed file to the heading of its part of docs/seeds.md.
var seedPages = []struct{ file, page string }{
	{"003_1fed54abfe05125c.txt", "fi_getinfo(3)"},
	{"000_08935698d58778d6.txt", "fi_domain(3), libfabric 1.17"},
	{"002_b2904bafa27fcbde.txt", "fi_domain(3), 2017 edition"},
	{"004_37d6661af8276809.txt", "fi_endpoint(3)"},
}

// seedStatuses are the words of the status column, in the summary's order.
var seedStatuses = []string{"yes", "partial", "no", "n/a"}

// seedRow is one row of docs/seeds.md.
type seedRow struct {
	line                 int
	page, section, item  string
	status, reach, notes string
	tests                []string
}

func (r seedRow) String() string {
	return fmt.Sprintf("docs/seeds.md:%d (%s, %s, %s)", r.line, r.page, r.section, r.item)
}

// seedCounts are the rows of each page by status.
type seedCounts map[string]map[string]int

// readSeedsDoc parses docs/seeds.md: its summary table (before the first
// page heading) and the rows of the tables under each "## PAGE" and
// "### SECTION" heading. Every row has five cells: item, status, reached
// by, tests, notes.
func readSeedsDoc(t *testing.T) (rows []seedRow, summary seedCounts) {
	t.Helper()
	b, err := os.ReadFile("../docs/seeds.md")
	if err != nil {
		t.Fatal(err)
	}
	summary = seedCounts{}
	var page, section string
	for i, l := range strings.Split(string(b), "\n") {
		n := i + 1
		switch {
		case strings.HasPrefix(l, "## "):
			page, section = strings.TrimPrefix(l, "## "), ""
			if !slices.ContainsFunc(seedPages, func(p struct{ file, page string }) bool { return p.page == page }) {
				page = "" // a section of prose, not a page
			}
			continue
		case strings.HasPrefix(l, "### "):
			section = strings.TrimPrefix(l, "### ")
			continue
		case !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "|---"):
			continue
		}
		cells := strings.Split(l, "|")
		cells = cells[1 : len(cells)-1]
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] == "page" || cells[0] == "item" { // a header
			continue
		}
		if page == "" {
			if section == "" && len(cells) == 2+len(seedStatuses) {
				summary[cells[0]] = map[string]int{}
				for k, s := range append(slices.Clone(seedStatuses), "total") {
					v, err := strconv.Atoi(cells[1+k])
					if err != nil {
						t.Errorf("docs/seeds.md:%d: summary count %q: %v", n, cells[1+k], err)
					}
					summary[cells[0]][s] = v
				}
			}
			continue
		}
		if len(cells) != 5 {
			t.Errorf("docs/seeds.md:%d: %d cells, want 5 (item, status, reached by, tests, notes; no | inside a cell): %s", n, len(cells), l)
			continue
		}
		r := seedRow{line: n, page: page, section: section, item: cells[0], status: cells[1],
			reach: cells[2], notes: cells[4]}
		if cells[3] != "-" {
			r.tests = strings.Fields(cells[3])
		}
		rows = append(rows, r)
	}
	return rows, summary
}

// TestSeedsTable checks each row of docs/seeds.md: a known page and a
// section, one item, a status word, a reason where the status needs one,
// tests for a "yes", and every test it names defined in the repository. It
// checks the summary at the top against the rows, and logs it.
func TestSeedsTable(t *testing.T) {
	rows, summary := readSeedsDoc(t)
	if len(rows) == 0 {
		t.Fatal("docs/seeds.md has no rows")
	}
	defined := repoTests(t)
	itemRE := regexp.MustCompile("^`[^`]+`$")
	seen := map[string]seedRow{}
	counts := seedCounts{}
	for _, r := range rows {
		if r.section == "" {
			t.Errorf("%v: a row outside any ### section", r)
		}
		if !itemRE.MatchString(r.item) {
			t.Errorf("%v: item must be one code span", r)
		}
		key := r.page + "\x00" + r.section + "\x00" + r.item
		if prev, dup := seen[key]; dup {
			t.Errorf("%v: the same item as line %d", r, prev.line)
		}
		seen[key] = r
		switch r.status {
		case "yes":
			if len(r.tests) == 0 {
				t.Errorf("%v: yes names no test", r)
			}
		case "partial", "n/a":
			if r.notes == "" {
				t.Errorf("%v: %s says nothing in notes (what differs, or why it does not apply)", r, r.status)
			}
		case "no":
		default:
			t.Errorf("%v: status %q is not one of %v", r, r.status, seedStatuses)
		}
		if r.status != "n/a" && r.reach == "" {
			t.Errorf("%v: empty reached-by cell (- when unreachable)", r)
		}
		for _, name := range r.tests {
			fn, _, _ := strings.Cut(name, "/")
			if !defined[fn] {
				t.Errorf("%v: test %s: no func %s( in the repository's *_test.go files", r, name, fn)
			}
		}
		if counts[r.page] == nil {
			counts[r.page] = map[string]int{}
		}
		counts[r.page][r.status]++
		counts[r.page]["total"]++
	}
	counts["all"] = map[string]int{}
	for _, p := range seedPages {
		for s, n := range counts[p.page] {
			counts["all"][s] += n
		}
	}
	for _, p := range append(slices.Clone(seedPages), struct{ file, page string }{"", "all"}) {
		var line []string
		for _, s := range append(slices.Clone(seedStatuses), "total") {
			line = append(line, fmt.Sprintf("%s %d", s, counts[p.page][s]))
			if got := summary[p.page][s]; got != counts[p.page][s] {
				t.Errorf("docs/seeds.md summary: %s %s is %d, the rows say %d", p.page, s, got, counts[p.page][s])
			}
		}
		t.Logf("%-30s %s", p.page, strings.Join(line, ", "))
	}
	if len(summary) != len(seedPages)+1 {
		t.Errorf("docs/seeds.md summary has %d lines, want one per page and all", len(summary))
	}
}

// repoTests are the names of the test functions of the repository.
func repoTests(t *testing.T) map[string]bool {
	t.Helper()
	funcRE := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != ".." && strings.HasPrefix(e.Name(), ".") {
			return fs.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// seedsDir is where the seed pages are: $FABRICFS_SEEDS, or ../shared/seeds
// beside the repository.
func seedsDir() string {
	if d := os.Getenv("FABRICFS_SEEDS"); d != "" {
		return d
	}
	return "../../shared/seeds"
}

// Definitions in a page as man(1) renders it: a term at the indent of
// seven spaces whose text follows on the next line, indented further (or
// on the same line when the term is short); a bullet's term; and in a
// roff source, pandoc's definition-list term.
var (
	manTermRE   = regexp.MustCompile(`^ {7}(?:\*\*)?-?(FI_[A-Z0-9_]+)(?:$|[ *])`)
	manBodyRE   = regexp.MustCompile(`^ {14}\S`)
	manShortRE  = regexp.MustCompile(`^ {7}(FI_[A-Z0-9_]{1,3}) \S`)
	manBulletRE = regexp.MustCompile(`^ {14}• (FI_[A-Z0-9_]+):`)
	roffTermRE  = regexp.MustCompile(`\.PP \\f\[I\](FI_[A-Z0-9_]+)\\f\[\] :`)
	callRE      = regexp.MustCompile(`\b(fi_[a-z0-9_]+)\(`)
)

// seedItems extracts what a page defines: the fi_* calls of its SYNOPSIS
// and the FI_* names it defines as terms.
func seedItems(text string) (calls, names []string) {
	add := func(list *[]string, s string) {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	if strings.HasPrefix(text, `.\"`) { // roff source, on one line
		_, syn, _ := strings.Cut(text, ".SH SYNOPSIS")
		syn, _, _ = strings.Cut(syn, ".SH ")
		for _, m := range callRE.FindAllStringSubmatch(syn, -1) {
			add(&calls, m[1])
		}
		for _, m := range roffTermRE.FindAllStringSubmatch(text, -1) {
			add(&names, m[1])
		}
		return calls, names
	}
	lines := strings.Split(text, "\n")
	inSynopsis := false
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case "SYNOPSIS":
			inSynopsis = true
			continue
		case "ARGUMENTS":
			inSynopsis = false
		}
		if inSynopsis {
			for _, m := range callRE.FindAllStringSubmatch(l, -1) {
				add(&calls, m[1])
			}
			continue
		}
		if m := manTermRE.FindStringSubmatch(l); m != nil && i+1 < len(lines) && manBodyRE.MatchString(lines[i+1]) {
			add(&names, m[1])
		} else if m := manShortRE.FindStringSubmatch(l); m != nil {
			add(&names, m[1])
		} else if m := manBulletRE.FindStringSubmatch(l); m != nil {
			add(&names, m[1])
		}
	}
	return calls, names
}

// TestSeedsCoverPages checks that docs/seeds.md has a row, under the
// page's heading, for every call of each page's SYNOPSIS and every FI_*
// name the page defines. The pages are not in the repository: without
// them the test skips (fails under CI).
func TestSeedsCoverPages(t *testing.T) {
	rows, _ := readSeedsDoc(t)
	items := map[string]map[string]bool{}
	for _, r := range rows {
		if items[r.page] == nil {
			items[r.page] = map[string]bool{}
		}
		items[r.page][strings.Trim(r.item, "`")] = true
	}
	dir := seedsDir()
	for _, p := range seedPages {
		b, err := os.ReadFile(filepath.Join(dir, p.file))
		if err != nil {
			reason := fmt.Sprintf("seed page %s: %v (set FABRICFS_SEEDS to the seeds directory)", p.page, err)
			if os.Getenv("CI") != "" {
				t.Fatal(reason)
			}
			t.Skip(reason)
		}
		calls, names := seedItems(string(b))
		if len(calls) == 0 || len(names) == 0 {
			t.Errorf("%s: extracted %d calls and %d names: the page's layout is not understood", p.page, len(calls), len(names))
		}
		missing := 0
		for _, it := range slices.Concat(calls, names) {
			if !items[p.page][it] {
				t.Errorf("%s defines %s; docs/seeds.md has no row for it under ## %s", p.page, it, p.page)
				missing++
			}
		}
		t.Logf("%s: %d calls and %d names extracted, %d without a row", p.page, len(calls), len(names), missing)
	}
}
