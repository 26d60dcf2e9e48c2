package tests

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
)

// opsRow is a row of docs/tree.md's table of operation sets:
// | `SET/VALUE` | where | RO or RW | meaning |
var opsRow = regexp.MustCompile("^\\| `([a-z0-9_]+)/([A-Za-z0-9_]+)` \\| [^|]+ \\| (RO|RW) \\|")

// opsDocs are the documented values of each set, with their modes.
func opsDocs(t *testing.T) map[string]map[string]string {
	b, err := os.ReadFile("../docs/tree.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := opsRow.FindStringSubmatch(l); m != nil {
			if docs[m[1]] == nil {
				docs[m[1]] = map[string]string{}
			}
			docs[m[1]][m[2]] = m[3]
		}
	}
	return docs
}

// checkOps checks that the ops/ directory dir has exactly the sets
// named, each with the files docs/tree.md lists and their modes.
func checkOps(t *testing.T, dir string, sets ...string) {
	t.Helper()
	docs := opsDocs(t)
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, sets) {
		t.Fatalf("%s lists %v, want %v", dir, got, sets)
	}
	for _, s := range sets {
		files, err := os.ReadDir(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, f := range files {
			info, err := f.Info()
			if err != nil {
				t.Fatal(err)
			}
			seen[f.Name()] = "RO"
			if info.Mode().Perm()&0o222 != 0 {
				seen[f.Name()] = "RW"
			}
		}
		if len(seen) == 0 || !maps(seen, docs[s]) {
			t.Errorf("%s/%s has %v, docs/tree.md says %v", dir, s, seen, docs[s])
		}
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestOpsTCP: fi_open_ops, "used to open provider specific interfaces.
// Provider interfaces may be used to access low-level resources and
// operations that are specific to the opened resource domain."
// (fi_domain(3)), has its place in the tree as ops/: a tcp domain has no
// set (libfabric's tcp has none either); a tcp endpoint has none before
// enable and tcp_sockopt_v1 once connected, whose files are its socket's
// options: TCP_NODELAY reads 1 (the provider's default) and takes 0,
// SO_SNDBUF takes 65536 and reads what the kernel keeps (twice that),
// and values out of their bounds are refused.
func TestOpsTCP(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	checkOps(t, filepath.Join(dom.Dir, "ops"))
	idle, err := dom.NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	checkOps(t, filepath.Join(idle.Dir, "ops"))

	a, b, _ := connectedPair(t, dom)
	ops := filepath.Join(a.Dir, "ops")
	checkOps(t, ops, "tcp_sockopt_v1")
	set := filepath.Join(ops, "tcp_sockopt_v1")
	write := func(name, v string) error { return os.WriteFile(filepath.Join(set, name), []byte(v+"\n"), 0) }
	if got := readTrim(t, filepath.Join(set, "TCP_NODELAY")); got != "1" {
		t.Errorf("TCP_NODELAY reads %q, want 1", got)
	}
	if err := write("TCP_NODELAY", "0"); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(set, "TCP_NODELAY")); got != "0" {
		t.Errorf("TCP_NODELAY reads %q after writing 0", got)
	}
	if err := write("SO_SNDBUF", "65536"); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(set, "SO_SNDBUF")); got != strconv.Itoa(2*65536) {
		t.Errorf("SO_SNDBUF reads %q after writing 65536, want what Linux keeps: %d", got, 2*65536)
	}
	for _, bad := range [][2]string{{"TCP_NODELAY", "2"}, {"SO_RCVBUF", "100"}, {"SO_RCVBUF", "1073741824"}, {"SO_SNDBUF", "lots"}} {
		if err := write(bad[0], bad[1]); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("writing %s %s: %v, want EINVAL", bad[0], bad[1], err)
		}
	}
	// The other end's socket is its own.
	if got := readTrim(t, filepath.Join(b.Dir, "ops", "tcp_sockopt_v1", "TCP_NODELAY")); got != "1" {
		t.Errorf("b's TCP_NODELAY reads %q, want 1", got)
	}
}

// TestOpsVerbs: a verbs domain's ops/verbs_device_v1 says the device's
// GID, RoCE port and MTU and has its counters, and a connected verbs
// endpoint's ops/verbs_qp_v1 its queue pair: in RTS, aimed at the peer's
// QP ("Provider interfaces may be used to access low-level resources and
// operations that are specific to the opened resource domain.",
// fi_domain(3)).
func TestOpsVerbs(t *testing.T) {
	port := freeUDPPort(t)
	d := mountWith(t, "-roce-port", strconv.Itoa(port))
	dom := d.tree(t).Domain("verbs", verbsDevice)
	ops := filepath.Join(dom.Dir, "ops")
	checkOps(t, ops, "verbs_device_v1")
	dev := filepath.Join(ops, "verbs_device_v1")
	for name, want := range map[string]string{"gid": "0000:0000:0000:0000:0000:ffff:7f00:0001", "udp_port": strconv.Itoa(port)} {
		if got := readTrim(t, filepath.Join(dev, name)); got != want {
			t.Errorf("verbs_device_v1/%s reads %q, want %q", name, got, want)
		}
	}
	if mtu := readTrim(t, filepath.Join(dev, "active_mtu")); !slices.Contains([]string{"256", "512", "1024", "2048", "4096"}, mtu) {
		t.Errorf("active_mtu reads %q", mtu)
	}
	a, b, _ := connectedPair(t, dom)
	qp := func(e *fabricfs.EP, name string) string {
		return readTrim(t, filepath.Join(e.Dir, "ops", "verbs_qp_v1", name))
	}
	checkOps(t, filepath.Join(a.Dir, "ops"), "verbs_qp_v1")
	if qp(a, "qp_state") != "IBV_QPS_RTS" || qp(b, "qp_state") != "IBV_QPS_RTS" {
		t.Errorf("qp_state: %s and %s, want IBV_QPS_RTS", qp(a, "qp_state"), qp(b, "qp_state"))
	}
	if qp(a, "dest_qp_num") != qp(b, "qp_num") || qp(b, "dest_qp_num") != qp(a, "qp_num") || qp(a, "qp_num") == qp(b, "qp_num") {
		t.Errorf("a: qp %s to %s; b: qp %s to %s", qp(a, "qp_num"), qp(a, "dest_qp_num"), qp(b, "qp_num"), qp(b, "dest_qp_num"))
	}
	// The counters are the device's: the connection sent packets, and
	// ports/1/hw_counters says the same once the device is quiet.
	sent, err := strconv.ParseUint(readTrim(t, filepath.Join(dev, "sent_pkts")), 10, 64)
	if err != nil || sent == 0 {
		t.Errorf("sent_pkts: %d, %v", sent, err)
	}
	if port := readTrim(t, filepath.Join(dom.Dir, "ports", "1", "hw_counters", "sent_pkts")); port != strconv.FormatUint(sent, 10) {
		t.Errorf("ports/1/hw_counters/sent_pkts %s, ops/verbs_device_v1/sent_pkts %d", port, sent)
	}
}
