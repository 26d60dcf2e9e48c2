package tests

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchMedian is one record of bench.json's medians.
type benchMedian struct {
	EP, Impl           string
	Bytes, Iters, Runs int
	Usec               float64 `json:"usec_per_xfer"`
	MBps               float64 `json:"mb_per_sec"`
	UsecP50            float64 `json:"usec_per_xfer_p50"`
	UsecP99            float64 `json:"usec_per_xfer_p99"`
	MBpsP50            float64 `json:"mb_per_sec_p50"`
	MBpsP99            float64 `json:"mb_per_sec_p99"`
}

// streamMedian is one record of bench.json's stream.medians.
type streamMedian struct {
	EP, Impl    string
	Bytes, Runs int
	MBps        float64 `json:"mb_per_sec"`
	Rate        float64 `json:"mmsg_per_sec"`
	RateP50     float64 `json:"mmsg_per_sec_p50"`
	RateP99     float64 `json:"mmsg_per_sec_p99"`
	CPU         float64 `json:"cpu_s_per_mmsg"`
}

// TestBenchOutputs runs scripts/bench.sh -q (its default passes, short)
// and reads every file it writes with a strict reader: bench.json with
// encoding/json, bench.yaml with a YAML parser (Debian's python3-yaml),
// bench.csv and bench-runs.csv with encoding/csv (every row as wide as
// the header), latency.png, bandwidth.png and stream.png with image/png;
// and checks that they agree with one another and with the run's
// configuration.
func TestBenchOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scripts/bench.sh -q: a few minutes")
	}
	needCmd(t, "fi_pingpong")
	needCmd(t, "gcc")
	dir := t.TempDir()
	// fi_pingpong's control port: one free now, not the default, which
	// another bench run may hold.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../scripts/bench.sh", "-q", "-P", fmt.Sprint(port), "-o", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/bench.sh -q: %v\n%s", err, tail(stderr.String(), 40))
	}

	// bench.json: strict JSON (encoding/json refuses NaN, trailing commas,
	// bad escapes) with the passes -q runs, 2 repeats of 64 B and 64 KiB.
	raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config struct {
			Repeats int
			Sizes   []int
		}
		Runs     []json.RawMessage
		Medians  []benchMedian
		Targets  map[string]json.RawMessage
		Load     struct{ Compared int }
		Loaded   *bool
		Provider struct {
			Runs    []json.RawMessage
			Medians []benchMedian
		}
		Stream struct {
			Window  int
			Runs    []json.RawMessage
			Medians []streamMedian
			Targets map[string]map[string]struct {
				Met *bool
			}
		}
		Local struct {
			Window  int
			Runs    []json.RawMessage
			Medians []streamMedian
			Targets map[string]map[string]json.RawMessage
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	if dec.More() {
		t.Fatal("bench.json: more than one JSON value")
	}
	if doc.Config.Repeats != 2 || fmt.Sprint(doc.Config.Sizes) != "[64 65536]" {
		t.Fatalf("bench.json config: %d repeats, sizes %v; want -q's 2 and [64 65536]", doc.Config.Repeats, doc.Config.Sizes)
	}
	if doc.Loaded == nil || doc.Load.Compared == 0 {
		t.Fatalf("bench.json: loaded %v after %d comparisons; want a verdict", doc.Loaded, doc.Load.Compared)
	}
	if _, ok := doc.Targets["msg"]; !ok {
		t.Fatalf("bench.json: no targets for msg: %v", doc.Targets)
	}
	want := map[string]bool{}
	for _, s := range []string{"msg libfabric", "msg fabricfs", "msg relay", "rdm libfabric", "rdm fabricfs"} {
		for _, size := range []int{64, 65536} {
			want[fmt.Sprintf("%s %d", s, size)] = true
		}
	}
	checkMedians(t, "medians", doc.Medians, want)
	want = map[string]bool{}
	for _, ep := range []string{"msg", "rdm", "rdm-tagged"} {
		for _, impl := range []string{"libfabric", "provider"} {
			for _, size := range []int{64, 65536} {
				want[fmt.Sprintf("%s %s %d", ep, impl, size)] = true
			}
		}
	}
	checkMedians(t, "provider.medians", doc.Provider.Medians, want)
	if n := len(doc.Runs); n != 2*len(doc.Medians) {
		t.Fatalf("bench.json: %d runs for %d medians of 2 repeats", n, len(doc.Medians))
	}
	checkStream(t, "stream", doc.Stream.Window, doc.Stream.Medians, len(doc.Stream.Runs),
		[]string{"msg", "rdm", "write", "read"}, []string{"libfabric", "fabricfs", "provider"})
	checkStream(t, "local", doc.Local.Window, doc.Local.Medians, len(doc.Local.Runs),
		[]string{"pingpong", "rdm", "write", "read"}, []string{"shm", "fabricfs", "tcp"})
	for _, kind := range []string{"rdm", "write", "read"} {
		targets := []string{"bandwidth_vs_shm", "bandwidth_vs_tcp"}
		if kind == "rdm" {
			targets = append(targets, "message_rate_64B_vs_shm")
		}
		for _, target := range targets {
			if _, ok := doc.Local.Targets[kind][target]; !ok {
				t.Fatalf("bench.json local.targets: %s has no %s verdict: %v", kind, target, doc.Local.Targets)
			}
		}
	}
	if _, ok := doc.Local.Targets["pingpong"]["latency_64B_usec"]; !ok {
		t.Fatalf("bench.json local.targets: no pingpong latency: %v", doc.Local.Targets)
	}
	for _, kind := range []string{"pingpong", "rdm", "write", "read"} {
		if !strings.Contains(stdout.String(), "targets, -e local "+kind+": ") {
			t.Fatalf("bench.sh printed no targets line for local %s:\n%s", kind, tail(stdout.String(), 20))
		}
	}
	for _, kind := range []string{"msg", "rdm", "write", "read"} {
		targets := []string{"bandwidth"}
		if kind == "msg" || kind == "rdm" {
			targets = append(targets, "message_rate_64B")
		}
		for _, target := range targets {
			if v, ok := doc.Stream.Targets[kind][target]; !ok || v.Met == nil {
				t.Fatalf("bench.json stream.targets: %s has no %s verdict: %v", kind, target, doc.Stream.Targets)
			}
		}
	}
	for _, kind := range []string{"msg", "rdm", "write", "read"} {
		if !strings.Contains(stdout.String(), "targets, -e stream "+kind+": ") {
			t.Fatalf("bench.sh printed no targets line for stream %s:\n%s", kind, tail(stdout.String(), 20))
		}
	}

	// bench.yaml: fabtests' -m format, one document per program and
	// endpoint type, one flow mapping per size.
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
		filepath.Join(dir, "bench.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("bench.yaml does not parse as YAML: %v\n%s", err, out)
	}
	var docs []map[string][]map[string]float64
	if err := json.Unmarshal(out, &docs); err != nil {
		t.Fatalf("bench.yaml: not documents of a program's sizes: %v\n%s", err, out)
	}
	if len(docs) != 5+6+12+12 {
		t.Fatalf("bench.yaml: %d documents; want 35 (msg: libfabric, fabricfs, relay; rdm: 2; provider: 6; stream and local: 4 kinds of 3)", len(docs))
	}
	for _, d := range docs {
		if len(d) != 1 {
			t.Fatalf("bench.yaml: a document with %d keys; want one, the command", len(d))
		}
		for prog, sizes := range d {
			if len(sizes) != 2 {
				t.Fatalf("bench.yaml: %q has %d sizes; want 2", prog, len(sizes))
			}
			for _, s := range sizes {
				for _, k := range []string{"xfer_size", "iterations", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"} {
					if _, ok := s[k]; !ok {
						t.Fatalf("bench.yaml: %q: %v has no %s", prog, s, k)
					}
				}
				// A ping-pong moves two transfers per iteration, a
				// bandwidth test one.
				xfers := 2.0
				if strings.Contains(prog, "_bw ") || strings.Contains(prog, "ringpong -bw ") {
					xfers = 1
				}
				if s["total"] != xfers*s["iterations"]*s["xfer_size"] || s["usec/xfer"] <= 0 {
					t.Fatalf("bench.yaml: %q: %v: total is not %v x iterations x xfer_size", prog, s, xfers)
				}
			}
		}
	}

	// The CSV files: every row as wide as the header (encoding/csv
	// checks), one row per median and per run.
	rows := readCSV(t, filepath.Join(dir, "bench.csv"), "pass,ep,impl,bytes,iters,runs,usec_per_xfer_mean,usec_per_xfer_p50,usec_per_xfer_p99,mb_per_sec_mean,mb_per_sec_p50,mb_per_sec_p99,cpu_s_per_mmsg_mean,cpu_s_per_mmsg_p50,cpu_s_per_mmsg_p99")
	if n := len(doc.Medians) + len(doc.Provider.Medians) + len(doc.Stream.Medians) + len(doc.Local.Medians); len(rows) != n {
		t.Fatalf("bench.csv: %d rows; want %d, one per median", len(rows), n)
	}
	checkCPUColumn(t, "bench.csv", rows, 13)
	rows = readCSV(t, filepath.Join(dir, "bench-runs.csv"), "pass,ep,impl,bytes,rep,order,iters,usec_per_xfer,mb_per_sec,cpu_s,msgs")
	if n := len(doc.Runs) + len(doc.Provider.Runs) + len(doc.Stream.Runs) + len(doc.Local.Runs); len(rows) != n {
		t.Fatalf("bench-runs.csv: %d rows; want %d, one per run", len(rows), n)
	}
	checkCPUColumn(t, "bench-runs.csv", rows, 9)

	// The plots: PNG files of a plot's size with more than a background.
	for _, name := range []string{"latency.png", "bandwidth.png", "stream.png", "local.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := img.Bounds()
		if b.Dx() < 400 || b.Dy() < 300 {
			t.Fatalf("%s: %dx%d; want a plot of at least 400x300", name, b.Dx(), b.Dy())
		}
		colours := map[[4]uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 4 {
			for x := b.Min.X; x < b.Max.X; x += 4 {
				r, g, bl, a := img.At(x, y).RGBA()
				colours[[4]uint32{r, g, bl, a}] = true
			}
		}
		if len(colours) < 4 {
			t.Fatalf("%s: %d colours; want lines on a background", name, len(colours))
		}
	}
	if !strings.Contains(stdout.String(), "load: ") && !strings.Contains(stdout.String(), "WARNING: the machine was loaded") {
		t.Fatalf("bench.sh printed no load verdict:\n%s", tail(stdout.String(), 20))
	}
}

// checkMedians checks that medians holds exactly the "ep impl bytes" of
// want, each over 2 runs, with p50 the median and p99 at least p50.
func checkMedians(t *testing.T, what string, medians []benchMedian, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for _, m := range medians {
		key := fmt.Sprintf("%s %s %d", m.EP, m.Impl, m.Bytes)
		got[key] = true
		if m.Runs != 2 || m.Usec <= 0 || m.MBps <= 0 {
			t.Fatalf("bench.json %s: %+v: want 2 runs and positive figures", what, m)
		}
		if m.UsecP50 != m.Usec || m.UsecP99 < m.UsecP50 || m.MBpsP99 < m.MBpsP50 {
			t.Fatalf("bench.json %s: %s: median %.2f, p50 %.2f, p99 %.2f us; MB/s p50 %.2f p99 %.2f: want p50 = median <= p99",
				what, key, m.Usec, m.UsecP50, m.UsecP99, m.MBpsP50, m.MBpsP99)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bench.json %s: %v; want %v", what, got, want)
	}
}

// checkStream checks the streaming pass's medians: each kind's three
// implementations at 64 B and 64 KiB over 2 runs, window 64, with a
// message rate, a bandwidth that is the rate times the size, and the
// CPU time of the run.
func checkStream(t *testing.T, pass string, window int, medians []streamMedian, runs int, kinds, impls []string) {
	t.Helper()
	if window != 64 {
		t.Fatalf("bench.json %s: window %d; want the default 64", pass, window)
	}
	want := map[string]bool{}
	for _, kind := range kinds {
		for _, impl := range impls {
			for _, size := range []int{64, 65536} {
				want[fmt.Sprintf("%s %s %d", kind, impl, size)] = true
			}
		}
	}
	got := map[string]bool{}
	for _, m := range medians {
		key := fmt.Sprintf("%s %s %d", m.EP, m.Impl, m.Bytes)
		got[key] = true
		if m.Runs != 2 || m.Rate <= 0 || m.MBps <= 0 || m.CPU <= 0 {
			t.Fatalf("bench.json %s.medians: %+v: want 2 runs, a rate, a bandwidth and CPU time", pass, m)
		}
		if m.RateP50 != m.Rate || m.RateP99 < m.RateP50 {
			t.Fatalf("bench.json %s.medians: %s: rate %v, p50 %v, p99 %v: want p50 = median <= p99", pass, key, m.Rate, m.RateP50, m.RateP99)
		}
		// MB/sec is the rate (Mmsg/s) times the size; both medians of
		// the same runs, so equal within the printed precision and the
		// median of two runs (a mean of each).
		if r := m.MBps / (m.Rate * float64(m.Bytes)); r < 0.9 || r > 1.1 {
			t.Fatalf("bench.json %s.medians: %s: %v MB/s is not %v Mmsg/s x %d B", pass, key, m.MBps, m.Rate, m.Bytes)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bench.json %s.medians: %v; want %v", pass, got, want)
	}
	if runs != 2*len(medians) {
		t.Fatalf("bench.json %s: %d runs for %d medians of 2 repeats", pass, runs, len(medians))
	}
}

// checkCPUColumn checks that the CSV rows of the passes stream and
// local, and only those, have a positive number in column col (the CPU
// figures).
func checkCPUColumn(t *testing.T, name string, rows [][]string, col int) {
	t.Helper()
	for _, r := range rows {
		var v float64
		_, err := fmt.Sscan(r[col], &v)
		rate := r[0] == "stream" || r[0] == "local"
		if rate && (err != nil || v <= 0) {
			t.Fatalf("%s: %v: no CPU time in column %d", name, r, col+1)
		}
		if !rate && r[col] != "" {
			t.Fatalf("%s: %v: a CPU time in a pass that does not measure it", name, r)
		}
	}
}

// readCSV reads path as CSV, checks its header, and returns the other rows.
func readCSV(t *testing.T, path, header string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != header {
		t.Fatalf("%s: header %v; want %s", filepath.Base(path), rows, header)
	}
	return rows[1:]
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
