package tests

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// providerFiles are the files of the provider ffs.h lists besides tree.c,
// prov.c and info.c. Where one is missing (a branch that has only some of
// them), the provider is built with provider/test/stubs.c, whose weak
// stand-ins let fi_getinfo and fi_fabric work.
var providerFiles = []string{"domain.c", "ep.c", "pep.c", "eq.c", "cq.c", "av.c", "mr.c", "cntr.c", "wait.c", "atomic.c"}

// buildProvider builds bin/libfabricfs-fi.so with scripts/provider.sh and
// returns the directory for FI_PROVIDER_PATH.
func buildProvider(t *testing.T) string {
	t.Helper()
	needCmd(t, "cc")
	var args []string
	for _, f := range providerFiles {
		if _, err := os.Stat(filepath.Join("../provider", f)); err != nil {
			args = []string{"provider/test/stubs.c"}
			break
		}
	}
	if out, err := exec.Command("../scripts/provider.sh", args...).CombinedOutput(); err != nil {
		t.Fatalf("scripts/provider.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	dir, err := filepath.Abs("../bin")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildProviderC compiles a test program of provider/test with the provider's
// warnings as errors; extra sources (provider files) follow the program.
func buildProviderC(t *testing.T, name string, sources ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"-std=gnu11", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
		"-Wno-missing-field-initializers", "-I", "../clients/c", "-o", bin, "../provider/test/" + name + ".c"}
	for _, s := range sources {
		args = append(args, "../provider/"+s)
	}
	if out, err := exec.Command("cc", append(args, "-lfabric")...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", name, err, out)
	}
	return bin
}

// TestProviderInfoParse runs provider/test/info_test.c: every fi_info
// libfabric itself returns here survives fi_tostr text -> ffs_info_read ->
// fi_tostr unchanged, and malformed text is refused.
func TestProviderInfoParse(t *testing.T) {
	needCmd(t, "fi_info") // libfabric's providers to take the entries from
	bin := buildProviderC(t, "info_test", "info.c", "tree.c")
	cmd := exec.Command(bin)
	// The entries of libfabric's own providers, not of a fabricfs
	// provider someone's environment points at.
	cmd.Env = append(os.Environ(), "FI_PROVIDER_PATH=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("info_test: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`info_test: (\d+) entries round-tripped`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("info_test checked no entries:\n%s", out)
	}
	t.Logf("%s", out)
}

// treeAnswer writes a query to the tree's getinfo file and reads the
// answer.
func treeAnswer(t *testing.T, d *daemon, query string) string {
	t.Helper()
	f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(query); err != nil {
		t.Fatalf("getinfo %q: %v", query, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var provNameRE = regexp.MustCompile(`(?m)^        prov_name: ([^;\n]+).*$`)

// asProvider rewrites a tree entry as the provider reports it (ffs.h,
// "Names"): domain and fabric names prefixed "PROV/", prov_name fabricfs,
// prov_version the provider's (1.0); and mr_mode with FI_MR_PROV_KEY,
// which the provider adds when the hints' mr_mode has it, as fi_info's
// hints do (every bit but FI_MR_BASIC and FI_MR_SCALABLE).
func asProvider(t *testing.T, entry string) string {
	t.Helper()
	m := provNameRE.FindStringSubmatch(entry)
	if m == nil {
		t.Fatalf("entry without prov_name:\n%s", entry)
	}
	lines := strings.Split(entry, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "        name: "):
			lines[i] = "        name: " + m[1] + "/" + strings.TrimPrefix(l, "        name: ")
		case strings.HasPrefix(l, "        prov_name: "):
			lines[i] = "        prov_name: fabricfs"
		case strings.HasPrefix(l, "        prov_version: "):
			lines[i] = "        prov_version: 1.0"
		case strings.HasPrefix(l, "        mr_mode: "):
			m, err := fi.Parse[fi.MRMode](strings.TrimPrefix(l, "        mr_mode: "))
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			lines[i] = "        mr_mode: " + (m | fi.MR_PROV_KEY).String()
		}
	}
	return strings.Join(lines, "\n")
}

// sameEntries requires the provider's entries to be the tree's, in order,
// renamed; skip drops lines from both sides before comparing.
func sameEntries(t *testing.T, what string, ours, tree []string, skip *regexp.Regexp) {
	t.Helper()
	if len(ours) != len(tree) || len(ours) == 0 {
		t.Fatalf("%s: fi_info -p fabricfs gives %d entries, the tree %d", what, len(ours), len(tree))
	}
	drop := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if skip == nil || !skip.MatchString(l) {
				out = append(out, l)
			}
		}
		return out
	}
	for i := range ours {
		a, b := drop(ours[i]), drop(asProvider(t, tree[i]))
		for j := 0; j < len(a) || j < len(b); j++ {
			var la, lb string
			if j < len(a) {
				la = a[j]
			}
			if j < len(b) {
				lb = b[j]
			}
			if la != lb {
				t.Fatalf("%s: entry %d line %d:\n  fi_info: %q\n  tree:    %q", what, i, j, la, lb)
			}
		}
	}
}

// TestProviderInfo runs libfabric's fi_info over the provider and a
// mounted tree: every entry of the tree is listed with its full attributes,
// only the names rewritten, and hints select what the tree's getinfo
// selects for the same query. Then provider/test/getinfo_test.c checks the
// hints the provider applies itself.
func TestProviderInfo(t *testing.T) {
	needCmd(t, "fi_info")
	lib := buildProvider(t)
	d := mount(t)
	env := append(os.Environ(), "FI_PROVIDER_PATH="+lib, "FI_FABRICFS_ROOT="+d.mnt)
	fiInfo := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("fi_info", append([]string{"-p", "fabricfs"}, args...)...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fi_info -p fabricfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// The list: every domain directory of the tree, and no other provider
	// (no ofi_rxm layered over fabricfs).
	list := fiInfo()
	for _, prov := range []string{"tcp", "verbs", "shm"} {
		des, err := os.ReadDir(d.path(prov))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if de.IsDir() && !strings.Contains(list, "domain: "+prov+"/"+de.Name()+"\n") {
				t.Errorf("fi_info -p fabricfs does not list domain %s/%s:\n%s", prov, de.Name(), list)
			}
		}
	}
	if n, m := strings.Count(list, "provider: "), strings.Count(list, "provider: fabricfs\n"); n != m {
		t.Errorf("%d of %d entries are not provider fabricfs:\n%s", n-m, n, list)
	}

	// FI_FABRICFS_DOMAIN keeps every fi_getinfo to the domains it names;
	// one the tree lacks leaves nothing, and the debug line says why.
	for _, names := range []string{"tcp/lo", "shm/shm,tcp/lo", "tcp/none"} {
		cmd := exec.Command("fi_info", "-p", "fabricfs")
		cmd.Env = append(env, "FI_FABRICFS_DOMAIN="+names)
		if names == "tcp/none" {
			cmd.Env = append(cmd.Env, "FI_LOG_LEVEL=debug")
		}
		out, err := cmd.CombinedOutput()
		if names == "tcp/none" {
			if want := "in FI_FABRICFS_DOMAIN: tcp/none"; err == nil || !strings.Contains(string(out), want) {
				t.Errorf("FI_FABRICFS_DOMAIN=%s: %v, want a failure and %q:\n%s", names, err, want, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("FI_FABRICFS_DOMAIN=%s fi_info -p fabricfs: %v\n%s", names, err, out)
		}
		seen := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^\s+domain: (\S+)$`).FindAllStringSubmatch(string(out), -1) {
			seen[m[1]] = true
		}
		want := strings.Split(names, ",")
		if len(seen) != len(want) {
			t.Errorf("FI_FABRICFS_DOMAIN=%s: fi_info lists domains %v", names, seen)
		}
		for _, w := range want {
			if !seen[w] {
				t.Errorf("FI_FABRICFS_DOMAIN=%s: fi_info lists domains %v, not %s", names, seen, w)
			}
		}
	}

	// A reason to find nothing without asking the tree is a debug line:
	// here a domain name without its provider.
	cmd := exec.Command("fi_info", "-p", "fabricfs", "-d", verbsDevice)
	cmd.Env = append(env, "FI_LOG_LEVEL=debug")
	out, err := cmd.CombinedOutput()
	if want := "fi_getinfo: no entry: hints domain_attr->name is not PROV/DOMAIN of one provider: " + verbsDevice; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("fi_info -p fabricfs -d %s: %v, want a failure and the debug line %q:\n%s", verbsDevice, err, want, out)
	}

	// -v: the tree's entries, attribute for attribute. fi_info's hints
	// (every mode, every mr_mode but FI_MR_BASIC/SCALABLE) are the tree
	// query's defaults; /info has the same entries before getinfo
	// narrows each one's mr_mode to the caps it reports.
	all := entries(fiInfo("-v"))
	sameEntries(t, "-v", all, entries(treeAnswer(t, d, "--version 1.17")), nil)
	sameEntries(t, "-v against /info", all, entries(d.read(t, "info")), regexp.MustCompile(`^\s+mr_mode: `))

	for _, c := range []struct{ args, query string }{
		{"-t FI_EP_RDM", "-t FI_EP_RDM"},
		{"-d tcp/lo", "-p tcp -d lo"},
		{"-c FI_TAGGED", "-c FI_TAGGED"},
		{"-f verbs/IB-0x0 -t FI_EP_DGRAM", "-p verbs -f IB-0x0 -t FI_EP_DGRAM"},
		{"-n 127.0.0.1 -P 9228 -t FI_EP_MSG", "-n 127.0.0.1 -P 9228 -t FI_EP_MSG"},
	} {
		ours := entries(fiInfo(append(strings.Fields(c.args), "-v")...))
		sameEntries(t, c.args, ours, entries(treeAnswer(t, d, "--version 1.17 "+c.query)), nil)
		if len(ours) >= len(all) {
			t.Errorf("%s: %d entries of %d: the hint selected nothing", c.args, len(ours), len(all))
		}
	}

	cmd = exec.Command(buildProviderC(t, "getinfo_test"))
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("getinfo_test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
