package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// runDaemon runs the daemon binary bin with args, for at most a minute,
// and returns its output and exit status.
func runDaemon(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out), 0
}

// TestVersion: `fabricfs -version` prints the versions, /version shows
// the same, and the version is the one the build set with -ldflags -X, as
// scripts/run.sh sets it from git describe.
func TestVersion(t *testing.T) {
	out, code := runDaemon(t, daemonBin, "-version")
	want := fmt.Sprintf("\nabi_version %d\ngo_version %s\napi_version %v\n", ring.Version, runtime.Version(), fi.APIVersion)
	if first, rest, _ := strings.Cut(out, "\n"); code != 0 || len(first) <= len("version ") || !strings.HasPrefix(first, "version ") || "\n"+rest != want {
		t.Errorf("fabricfs -version: status %d, %q, want version VERSION%q", code, out, want)
	}
	d := mountWith(t, "-verbs-addrs", "none")
	if got := d.read(t, "version"); got != out {
		t.Errorf("/version %q, -version %q", got, out)
	}

	bin := filepath.Join(t.TempDir(), "fabricfs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "-ldflags", "-X github.com/fabricfs/fabricfs/core.version=v1.2.3-4-gabcdef", "../cmd/fabricfs")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	if out, _ := runDaemon(t, bin, "-version"); !strings.HasPrefix(out, "version v1.2.3-4-gabcdef\n") {
		t.Errorf("built with -X core.version: -version %q", out)
	}
}

// TestManPageFlags: fabricfs(8) lists every flag the daemon takes (its
// -help), wherever the flag is defined, and no other.
func TestManPageFlags(t *testing.T) {
	help, code := runDaemon(t, daemonBin, "-help")
	if code != 0 && code != 2 {
		t.Fatalf("fabricfs -help: status %d\n%s", code, help)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	page, err := os.ReadFile("../man/man8/fabricfs.8")
	must(t, err)
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\.TP\n\\fB\\-([a-z0-9\\-]+)\\fR`).FindAllStringSubmatch(string(page), -1) {
		listed = append(listed, strings.ReplaceAll(m[1], `\-`, "-"))
	}
	sort.Strings(flags)
	sort.Strings(listed)
	if len(flags) < 20 || strings.Join(flags, " ") != strings.Join(listed, " ") {
		t.Errorf("fabricfs -help has flags\n%v\nfabricfs(8) lists\n%v\n(run go generate ./internal/manpage; flags belong in internal/settings)", flags, listed)
	}
}

// TestConfigFile: a daemon started with -config takes the file's
// settings, with the command line's over them: the tcp interface filter
// (only lo then) and the listeners' port range. A bad file stops it with
// status 2 and FILE:LINE.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "fabricfs.conf")
	lo := 20000 + int(time.Now().UnixNano()%20000)
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf("# test\ntcp-iface = ffnosuchif0\ntcp-port-low = %d\ntcp-port-high = %d\nverbs-addrs = 127.0.0.9\n", lo, lo+9)), 0o644))
	d := mountWith(t, "-config", conf, "-verbs-addrs", "none")
	if got := strings.Join(dirNames(t, d.path("tcp")), " "); got != "lo" {
		t.Errorf("tcp-iface = ffnosuchif0: tcp lists %q, want lo alone", got)
	}
	if got := dirNames(t, d.path("verbs")); len(got) != 0 {
		t.Errorf("-verbs-addrs none over the file's: verbs lists %v", got)
	}
	dom := d.path("tcp", "lo")
	mkobj(t, dom, "eq", "e")
	pep := mkobj(t, dom, "pep", "l")
	ctlOK(t, pep, "bind eq e")
	ctlOK(t, pep, "listen")
	local := fileText(t, pep, "local")
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(local, "fi_sockaddr_in://"))
	if err != nil || int(ap.Port()) < lo || int(ap.Port()) > lo+9 {
		t.Errorf("listening on %q (%v), want a port of %d-%d", local, err, lo, lo+9)
	}

	// getinfo -e says the daemon's flags stand for libfabric's variables.
	f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.Write([]byte("-e\n"))
	must(t, err)
	env, err := io.ReadAll(f)
	f.Close()
	if err != nil || !strings.Contains(string(env), "reads no environment variables") || !strings.Contains(string(env), "FI_TCP_IFACE") {
		t.Errorf("getinfo -e: %v, %q", err, env)
	}

	must(t, os.WriteFile(conf, []byte("debug = true\ntcp-port-low = 99999\n"), 0o644))
	out, code := runDaemon(t, daemonBin, "-config", conf, filepath.Join(dir, "never"))
	if want := conf + ":2: tcp-port-low: 99999 is not in 0 to 65535"; code != 2 || !strings.Contains(out, want) {
		t.Errorf("a bad config file: status %d, %q; want 2 and %q", code, out, want)
	}
	out, code = runDaemon(t, daemonBin, "-tcp-port-low", strconv.Itoa(lo+1), "-tcp-port-high", strconv.Itoa(lo), filepath.Join(dir, "never"))
	if code != 2 || !strings.Contains(out, "-tcp-port-low") {
		t.Errorf("a reversed port range: status %d, %q", code, out)
	}
}
