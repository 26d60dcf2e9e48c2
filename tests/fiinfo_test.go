package tests

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// entries splits `fi_info -v` text into its entries.
func entries(text string) []string {
	var out []string
	for _, e := range strings.Split(text, "---\n") {
		if strings.TrimSpace(e) != "" {
			out = append(out, e)
		}
	}
	return out
}

// pick returns the first entry containing every one of the lines.
func pick(t *testing.T, es []string, lines ...string) string {
	t.Helper()
next:
	for _, e := range es {
		for _, l := range lines {
			if !strings.Contains(e, l+"\n") {
				continue next
			}
		}
		return e
	}
	t.Fatalf("no entry with %q among %d", lines, len(es))
	return ""
}

var keyRE = regexp.MustCompile(`^(\s*[a-z_0-9]+):`)

// layout is the sequence of indented keys of an entry: its sections and
// fields in order, without values.
func layout(entry string) []string {
	var keys []string
	for _, l := range strings.Split(entry, "\n") {
		if m := keyRE.FindStringSubmatch(l); m != nil {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// TestInfoMatchesRealFiInfo compares our tcp MSG entry for lo (IPv4) with
// the one the real fi_info prints (Debian's libfabric-bin): same sections,
// same keys, same order; and the values that describe the same thing
// (provider, endpoint type, protocol, address format, domain) are equal.
func TestInfoMatchesRealFiInfo(t *testing.T) {
	needCmd(t, "fi_info")
	out, err := exec.Command("fi_info", "-v", "-p", "tcp", "-t", "FI_EP_MSG").Output()
	if err != nil {
		t.Fatalf("fi_info: %v", err)
	}
	want := []string{"    addr_format: FI_SOCKADDR_IN", "        name: lo"}
	real := pick(t, entries(string(out)), want...)

	d := mount(t)
	ours := pick(t, entries(d.read(t, "tcp", "lo", "info")), want...)

	rl, ol := layout(real), layout(ours)
	if strings.Join(rl, "\n") != strings.Join(ol, "\n") {
		t.Errorf("layout differs\nreal fi_info:\n%s\n\nfabricfs:\n%s", real, ours)
	}
	for _, l := range []string{
		"        type: FI_EP_MSG",
		"        protocol: FI_PROTO_SOCK_TCP",
		"        prov_name: tcp",
		"    src_addr: fi_sockaddr_in://127.0.0.1:0",
		"        threading: FI_THREAD_SAFE",
		"        api_version: 1.17",
	} {
		if !strings.Contains(real, l+"\n") || !strings.Contains(ours, l+"\n") {
			t.Errorf("line %q: in real fi_info %v, in fabricfs %v", l, strings.Contains(real, l+"\n"), strings.Contains(ours, l+"\n"))
		}
	}
	// The fabric name is written the same way.
	rf := regexp.MustCompile(`fi_fabric_attr:\n\s+name: (\S+)`)
	if a, b := rf.FindStringSubmatch(real), rf.FindStringSubmatch(ours); a == nil || b == nil || a[1] != b[1] {
		t.Errorf("fabric name: real %q, fabricfs %q", a, b)
	}
}

// TestRDMInfoMatchesRealFiInfo compares our FI_EP_RDM entry for lo (IPv4)
// with real `fi_info -v -p tcp -t FI_EP_RDM` (libfabric's tcp;ofi_rxm):
// same layout, and the same values where fabricfs behaves the same way.
// Capabilities: every one real fi_info lists (messages, tagged, RMA,
// FI_MULTI_RECV) is ours too, in caps and in tx and rx caps; ours add
// FI_SOURCE, FI_DIRECTED_RECV and FI_RMA_EVENT (peers' RMA reaches the
// counters), and leave out what is not implemented. iov_limit and
// rma_iov_limit are rxm's 4, data_progress rxm's FI_PROGRESS_MANUAL.
func TestRDMInfoMatchesRealFiInfo(t *testing.T) {
	needCmd(t, "fi_info")
	out, err := exec.Command("fi_info", "-v", "-p", "tcp", "-t", "FI_EP_RDM").Output()
	if err != nil {
		t.Fatalf("fi_info: %v", err)
	}
	want := []string{"    addr_format: FI_SOCKADDR_IN", "        name: lo"}
	real := pick(t, entries(string(out)), want...)
	d := mount(t)
	ours := pick(t, entries(d.read(t, "tcp", "lo", "info")), append(want, "        type: FI_EP_RDM")...)
	if rl, ol := layout(real), layout(ours); strings.Join(rl, "\n") != strings.Join(ol, "\n") {
		t.Errorf("layout differs\nreal fi_info:\n%s\n\nfabricfs:\n%s", real, ours)
	}
	for _, l := range []string{
		"        type: FI_EP_RDM",
		"        protocol: FI_PROTO_RXM",
		"        protocol_version: 1",
		"        prov_name: tcp;ofi_rxm",
		"        inject_size: 64",
		"        size: 2048",
		"        comp_order: [ FI_ORDER_NONE ]",
		"        mem_tag_format: 0xaaaaaaaaaaaaaaaa",
		// rxm's data progress (fi_domain(3) FI_PROGRESS_MANUAL: "the
		// provider will attempt to advance an asynchronous operation
		// forward when the application attempts to wait on or read an
		// event queue, completion queue, or counter").
		"        control_progress: FI_PROGRESS_AUTO",
		"        data_progress: FI_PROGRESS_MANUAL",
		"    src_addr: fi_sockaddr_in://127.0.0.1:0",
		"        api_version: 1.17",
	} {
		if !strings.Contains(real, l+"\n") || !strings.Contains(ours, l+"\n") {
			t.Errorf("line %q: in real fi_info %v, in fabricfs %v", l, strings.Contains(real, l+"\n"), strings.Contains(ours, l+"\n"))
		}
	}
	rc, oc := capLines(real), capLines(ours)
	if len(rc) < 3 || len(oc) < 3 {
		t.Fatalf("caps lines: %d in real fi_info, %d in fabricfs, want caps, tx caps, rx caps first", len(rc), len(oc))
	}
	for i, what := range []string{"caps", "tx caps", "rx caps"} {
		for c := range rc[i] {
			if !oc[i][c] {
				t.Errorf("%s: real fi_info has %s, fabricfs does not", what, c)
			}
		}
	}
	for _, c := range []string{"FI_RMA", "FI_READ", "FI_WRITE", "FI_REMOTE_READ", "FI_REMOTE_WRITE", "FI_RMA_EVENT"} {
		if !oc[0][c] {
			t.Errorf("caps: fabricfs lacks %s", c)
		}
	}
	for _, l := range []string{"        iov_limit: 4\n", "        rma_iov_limit: 4\n"} {
		if !strings.Contains(real, l) || !strings.Contains(ours, l) {
			t.Errorf("line %q: in real fi_info %v, in fabricfs %v", l, strings.Contains(real, l), strings.Contains(ours, l))
		}
	}
}

var capsRE = regexp.MustCompile(`(?m)^\s*caps: \[(.*)\]$`)

// capLines are the caps lines of an entry (caps, tx caps, rx caps), each
// as a set of names.
func capLines(entry string) []map[string]bool {
	var out []map[string]bool
	for _, m := range capsRE.FindAllStringSubmatch(entry, -1) {
		set := map[string]bool{}
		for _, c := range strings.Split(m[1], ",") {
			if c = strings.TrimSpace(c); c != "" {
				set[c] = true
			}
		}
		out = append(out, set)
	}
	return out
}

// TestGetinfoFile: a query written to /getinfo is answered in fi_info -v
// text; a failed one fails the write with its errno and leaves its sentence,
// prefixed "fi_getinfo: " once, as the text read.
func TestGetinfoFile(t *testing.T) {
	d := mount(t)
	for _, tt := range []struct {
		query string
		errno syscall.Errno
		text  string
	}{
		{"-p tcp -t FI_EP_MSG -d lo", 0, "    prov_name: tcp\n"},
		{"-p", syscall.EINVAL, "fi_getinfo: option -p needs a value\n"},
		{"-t FI_EP_BOGUS", syscall.EINVAL, "fi_getinfo: -t FI_EP_BOGUS: "},
		{"-p nosuch", syscall.ENODATA, "fi_getinfo: no provider supports "},
		{"--version 9.0", syscall.ENOSYS, "fi_getinfo: API version 9.0 "},
	} {
		f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(tt.query)
		var errno syscall.Errno
		if (tt.errno == 0) != (err == nil) || err != nil && (!errors.As(err, &errno) || errno != tt.errno) {
			t.Errorf("write %q: %v, want errno %v", tt.query, err, tt.errno)
		}
		b, err := io.ReadAll(f)
		f.Close()
		got := string(b)
		if err != nil || !strings.Contains(got, tt.text) || tt.errno != 0 && (!strings.HasPrefix(got, tt.text) || strings.Count(got, "fi_getinfo:") != 1) {
			t.Errorf("after %q getinfo reads %q, %v; want %q", tt.query, got, err, tt.text)
		}
	}
}

// ask writes query to a new open of /getinfo and returns what it reads.
func ask(t *testing.T, d *daemon, query string) (string, error) {
	t.Helper()
	f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, werr := f.WriteString(query)
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), werr
}

// TestGetinfoFileHints: every entry the tree offers reads back from its
// fi_info text unchanged (fi.ParseInfo), and, written to /getinfo as the
// query's hints block, finds itself: fi_getinfo(3), "When provided as
// hints, requested values of struct fi_tx_ctx_attr should be set. On
// output, the actual transmit context attributes that can be provided will
// be returned. Output values will be greater than or equal to the
// requested input values."
func TestGetinfoFileHints(t *testing.T) {
	d := mount(t)
	all, err := os.ReadFile(d.path("info"))
	if err != nil {
		t.Fatal(err)
	}
	es := entries(string(all))
	if len(es) == 0 {
		t.Fatal("no entries in /info")
	}
	domain := regexp.MustCompile(`(?m)^        name: (.*)$`)
	for _, e := range es {
		in, err := fi.ParseInfo(e)
		if err != nil {
			t.Errorf("ParseInfo of an entry of /info: %v\n%s", err, e)
			continue
		}
		if got := in.String(); got != e {
			t.Errorf("entry of /info after ParseInfo prints differently:\n%s\nwant:\n%s", got, e)
		}
		out, err := ask(t, d, e)
		if err != nil {
			t.Errorf("the entry as hints: %v: %s\n%s", err, out, e)
			continue
		}
		found := false
		for _, o := range entries(out) {
			found = found || domain.FindString(o) == domain.FindString(e) && in.EPAttr != nil &&
				strings.Contains(o, "        type: "+in.EPAttr.Type.String()+"\n")
		}
		if !found {
			t.Errorf("the entry as hints did not find itself:\n%s\nanswer:\n%s", e, out)
		}
	}
	// The options and the block combine; both setting a hint is EINVAL.
	out, err := ask(t, d, "-p tcp -d lo\nfi_info:\n    fi_ep_attr:\n        type: FI_EP_MSG\n")
	if err != nil || len(entries(out)) == 0 {
		t.Errorf("-p tcp -d lo with a block asking FI_EP_MSG: %v\n%s", err, out)
	}
	for _, o := range entries(out) {
		if !strings.Contains(o, "        name: lo\n") || !strings.Contains(o, "        type: FI_EP_MSG\n") ||
			!strings.Contains(o, "        prov_name: tcp\n") {
			t.Errorf("-p tcp -d lo with a block asking FI_EP_MSG gave:\n%s", o)
		}
	}
	if _, err := ask(t, d, "-t FI_EP_RDM\nfi_info:\n    fi_ep_attr:\n        type: FI_EP_MSG\n"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("-t and the block both setting the type: %v, want EINVAL", err)
	}
}

// TestGetinfoFileForms: fi_info's flag-style options and its summary form
// print as the real fi_info prints them.
func TestGetinfoFileForms(t *testing.T) {
	needCmd(t, "fi_info")
	d := mount(t)
	keys := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
			k, _, _ := strings.Cut(l, ":")
			out = append(out, k)
		}
		return out
	}
	real, err := exec.Command("fi_info", "-p", "tcp", "-t", "FI_EP_MSG").Output()
	if err != nil {
		t.Fatalf("fi_info -p tcp -t FI_EP_MSG: %v", err)
	}
	ours, err := ask(t, d, "fi_info -p tcp -t FI_EP_MSG")
	if err != nil {
		t.Fatalf("fi_info -p tcp -t FI_EP_MSG: %v: %s", err, ours)
	}
	if r, o := keys(string(real))[:6], keys(ours)[:6]; strings.Join(r, ",") != strings.Join(o, ",") {
		t.Errorf("summary form: keys %q, the real fi_info's %q", o, r)
	}
	if !strings.Contains(ours, "provider: tcp\n") || !strings.Contains(ours, "    type: FI_EP_MSG\n") {
		t.Errorf("summary form:\n%s", ours)
	}
	if v, err := ask(t, d, "fi_info -v -p tcp -t FI_EP_MSG"); err != nil || !strings.HasPrefix(v, "---\nfi_info:\n") {
		t.Errorf("fi_info -v: %v\n%s", err, v)
	}
	list, err := ask(t, d, "-l")
	if err != nil || !regexp.MustCompile(`^(?:[a-z_;]+:\n    version: \d+\.\d+\n)+$`).MatchString(list) ||
		!strings.Contains(list, "tcp:\n") {
		t.Errorf("-l: %v\n%s", err, list)
	}
	if env, err := ask(t, d, "-e"); err != nil || !strings.HasPrefix(env, "# ") {
		t.Errorf("-e: %v\n%s", err, env)
	}
}
