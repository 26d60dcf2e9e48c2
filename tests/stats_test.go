package tests

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The statistics files of a live tree (docs/observability.md): traffic of
// known sizes through tcp MSG, tcp RDM and verbs moves exactly the counts
// and histogram buckets it should, and /metrics parses as Prometheus text
// with the same values.

// statSizes are message sizes at and around the histogram's bounds, and
// the bucket of each.
var statSizes = []struct {
	n      int
	bucket string
}{
	{1, "0_64"}, {64, "0_64"}, {65, "64_512"}, {600, "512_1k"}, {5000, "4k_64k"}, {70000, "64k_256k"}, {300000, "256k_1m"},
}

// readStats reads the stats file at path: one "NAME VALUE" per line.
func readStats(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("%s: line %q", path, l)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: line %q: %v", path, l, err)
		}
		if _, dup := m[f[0]]; dup {
			t.Fatalf("%s: %s twice", path, f[0])
		}
		m[f[0]] = v
	}
	// Its JSON view (stats.json) says the same: the same names, and the
	// same values but for the live socket's (tcp_), read again.
	jb, err := os.ReadFile(path + ".json")
	must(t, err)
	var j map[string]uint64
	dec := json.NewDecoder(bytes.NewReader(jb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("%s.json: %v: %s", path, err, jb)
	}
	if len(j) != len(m) {
		t.Errorf("%s.json has %d names, the text %d", path, len(j), len(m))
	}
	for k, v := range m {
		if jv, ok := j[k]; !ok || (jv != v && !strings.HasPrefix(k, "tcp_")) {
			t.Errorf("%s.json: %s is %d (present %v), the text says %d", path, k, jv, ok, v)
		}
	}
	return m
}

// wantMoved checks that every count of after moved from before by want's
// value (0 where want has none); the provider's counts (tcp_, rxm_) are
// left to the caller.
func wantMoved(t *testing.T, what string, before, after, want map[string]uint64) {
	t.Helper()
	for k, v := range after {
		if strings.HasPrefix(k, "tcp_") || strings.HasPrefix(k, "rxm_") {
			continue
		}
		if d := v - before[k]; d != want[k] {
			t.Errorf("%s: %s moved by %d, want %d", what, k, d, want[k])
		}
	}
	for k := range want {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: no %s", what, k)
		}
	}
}

// opsWant is what sending (op "send") or receiving ("recv") statSizes
// moves.
func opsWant(op string) map[string]uint64 {
	w := map[string]uint64{op + "_ops": uint64(len(statSizes))}
	for _, s := range statSizes {
		w[op+"_bytes"] += uint64(s.n)
		w[op+"_size_"+s.bucket]++
	}
	return w
}

// merge returns the union of maps, values of the same key added.
func merge(ms ...map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// sendSizes sends each of statSizes from endpoint dir a to b through the
// data files.
func sendSizes(t *testing.T, a, b string) {
	t.Helper()
	for _, s := range statSizes {
		got := make(chan int, 1)
		go func() {
			m, _ := os.ReadFile(filepath.Join(b, "data"))
			got <- len(m)
		}()
		must(t, os.WriteFile(filepath.Join(a, "data"), make([]byte, s.n), 0))
		select {
		case n := <-got:
			if n != s.n {
				t.Fatalf("sent %d bytes, received %d", s.n, n)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message of %d bytes not received", s.n)
		}
	}
}

// statsPair connects endpoint a of dom to one a pep of dom accepts, each
// with a CQ of its own, and returns the endpoints' directories.
func statsPair(t *testing.T, dom string) (a, b string) {
	t.Helper()
	mkobj(t, dom, "eq", "e")
	mkobj(t, dom, "cq", "ca")
	mkobj(t, dom, "cq", "cb")
	pep := mkobj(t, dom, "pep", "l")
	ctlOK(t, pep, "bind eq e")
	ctlOK(t, pep, "listen")
	a = mkobj(t, dom, "ep", "a")
	for _, c := range []string{"bind eq e", "bind cq ca send,recv", "enable", "connect " + fileText(t, pep, "local")} {
		ctlOK(t, a, c)
	}
	b = filepath.Join(dom, "ep", fileText(t, pep, "listen"))
	t.Cleanup(func() { os.Remove(b) })
	for _, c := range []string{"bind eq e", "bind cq cb send,recv", "enable", "accept"} {
		ctlOK(t, b, c)
	}
	// Both sides connected: the EQ has connreq and two connected.
	ev := ""
	for deadline := time.Now().Add(10 * time.Second); strings.Count(ev, "connected") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("EQ events %q", ev)
		}
		e, err := os.ReadFile(filepath.Join(dom, "eq", "e", "events"))
		must(t, err)
		ev += string(e)
	}
	return a, b
}

// TestStatsMSG: sizes through a tcp and a verbs FI_EP_MSG pair move
// the endpoints', CQs', EQ's, pep's and domain's counts, and nothing else.
func TestStatsMSG(t *testing.T) {
	d := mount(t)
	for _, dom := range []string{d.path("tcp", "lo"), d.path("verbs", "rxe_127_0_0_1")} {
		t.Run(filepath.Base(dom), func(t *testing.T) {
			domBefore := readStats(t, filepath.Join(dom, "stats"))
			a, b := statsPair(t, dom)
			beforeA, beforeB := readStats(t, filepath.Join(a, "stats")), readStats(t, filepath.Join(b, "stats"))
			sendSizes(t, a, b)
			afterA := readStats(t, filepath.Join(a, "stats"))
			wantMoved(t, "sender", beforeA, afterA, opsWant("send"))
			wantMoved(t, "receiver", beforeB, readStats(t, filepath.Join(b, "stats")), opsWant("recv"))
			n := uint64(len(statSizes))
			wantMoved(t, "sender's cq", nil, readStats(t, filepath.Join(dom, "cq", "ca", "stats")), map[string]uint64{"cq_entries": n})
			wantMoved(t, "receiver's cq", nil, readStats(t, filepath.Join(dom, "cq", "cb", "stats")), map[string]uint64{"cq_entries": n})
			wantMoved(t, "eq", nil, readStats(t, filepath.Join(dom, "eq", "e", "stats")), map[string]uint64{"eq_events": 3})
			wantMoved(t, "pep", nil, readStats(t, filepath.Join(dom, "pep", "l", "stats")), map[string]uint64{"pep_requests": 1})
			wantMoved(t, "domain", domBefore, readStats(t, filepath.Join(dom, "stats")), merge(opsWant("send"), opsWant("recv"),
				map[string]uint64{"cq_entries": 2 * n, "eq_events": 3, "pep_requests": 1}))
			if strings.Contains(dom, "tcp") {
				var total uint64
				for _, s := range statSizes {
					total += uint64(s.n)
				}
				if afterA["tcp_bytes_sent"] < total || afterA["tcp_segs_out"] == 0 {
					t.Errorf("sender's TCP_INFO: %d bytes sent in %d segments, want at least %d bytes", afterA["tcp_bytes_sent"], afterA["tcp_segs_out"], total)
				}
				if _, ok := afterA["tcp_rtt_us"]; !ok {
					t.Errorf("sender's stats have no tcp_rtt_us")
				}
			} else if c := fileText(t, dom, "ports/1/hw_counters/sent_pkts"); c == "0" {
				t.Errorf("verbs device sent no packets")
			}
		})
	}
}

// TestStatsRDM: sizes through two tcp FI_EP_RDM endpoints count as on
// MSG, the AV lookups of the sends too, and the endpoint sums its
// connection's TCP_INFO.
func TestStatsRDM(t *testing.T) {
	d := mount(t)
	dom := d.path("tcp", "lo")
	domBefore := readStats(t, filepath.Join(dom, "stats"))
	mkobj(t, dom, "cq", "c")
	var eps [2]string
	for i, n := range []string{"a", "b"} {
		mkobj(t, dom, "av", "v"+n)
		eps[i] = filepath.Join(dom, "ep", n)
		must(t, os.Mkdir(eps[i], 0o700))
		t.Cleanup(func() { os.Remove(eps[i]) }) // the test removes a itself
		must(t, os.WriteFile(filepath.Join(eps[i], "attr", "type"), []byte("FI_EP_RDM"), 0))
		for _, c := range []string{"bind cq c send,recv", "bind av v" + n, "enable"} {
			ctlOK(t, eps[i], c)
		}
	}
	for i, n := range []string{"a", "b"} {
		ctlOK(t, filepath.Join(dom, "av", "v"+n), "insert "+fileText(t, eps[1-i], "local"))
		ctlOK(t, eps[i], "dest 0")
	}
	sendSizes(t, eps[0], eps[1])
	a, b := readStats(t, filepath.Join(eps[0], "stats")), readStats(t, filepath.Join(eps[1], "stats"))
	wantMoved(t, "sender", nil, a, opsWant("send"))
	wantMoved(t, "receiver", nil, b, opsWant("recv"))
	if a["rxm_connections"] != 1 || a["tcp_segs_out"] == 0 {
		t.Errorf("sender: %d connections, %d segments out", a["rxm_connections"], a["tcp_segs_out"])
	}
	av := readStats(t, filepath.Join(dom, "av", "va", "stats"))
	if av["av_inserts"] != 1 || av["av_lookups"] < uint64(len(statSizes)) {
		t.Errorf("av va: %d inserts, %d lookups", av["av_inserts"], av["av_lookups"])
	}
	n := uint64(len(statSizes))
	wantMoved(t, "cq", nil, readStats(t, filepath.Join(dom, "cq", "c", "stats")), map[string]uint64{"cq_entries": 2 * n})
	after := readStats(t, filepath.Join(dom, "stats"))
	if after["send_ops"]-domBefore["send_ops"] != n || after["recv_bytes"]-domBefore["recv_bytes"] != opsWant("recv")["recv_bytes"] {
		t.Errorf("domain: send_ops moved by %d, recv_bytes by %d", after["send_ops"]-domBefore["send_ops"], after["recv_bytes"]-domBefore["recv_bytes"])
	}
	// The sums keep a closed endpoint's counts.
	must(t, os.Remove(eps[0]))
	if s := readStats(t, filepath.Join(dom, "stats")); s["send_ops"] != after["send_ops"] {
		t.Errorf("domain send_ops %d after the sender closed, %d before", s["send_ops"], after["send_ops"])
	}
	if s := readStats(t, d.path("users", "0.stats")); s["send_ops"] < n {
		t.Errorf("root's send_ops %d", s["send_ops"])
	}
}

// TestMetrics: /metrics parses as Prometheus text, and has the
// endpoints' and the domain's counts of the traffic.
func TestMetrics(t *testing.T) {
	d := mount(t)
	dom := d.path("tcp", "lo")
	a, b := statsPair(t, dom)
	sendSizes(t, a, b)
	f, err := os.Open(d.path("metrics"))
	must(t, err)
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	// find is the value of the sample of family name with labels.
	find := func(name string, labels map[string]string) *dto.Metric {
		t.Helper()
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no family %s", name)
		}
	next:
		for _, m := range fam.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
		t.Fatalf("no %s%v", name, labels)
		return nil
	}
	n := float64(len(statSizes))
	sender := map[string]string{"provider": "tcp", "domain": "lo", "kind": "ep", "id": "a", "uid": "0", "op": "send"}
	if v := find("fabricfs_ops_total", sender).GetCounter().GetValue(); v != n {
		t.Errorf("sender's ops: %v, want %v", v, n)
	}
	h := find("fabricfs_op_size_bytes", sender).GetHistogram()
	want := map[float64]uint64{64: 2, 512: 3, 1024: 4, 4096: 4, 65536: 5, 262144: 6, 1 << 20: 7, 4 << 20: 7, math.Inf(1): 7}
	for _, bk := range h.GetBucket() {
		if bk.GetCumulativeCount() != want[bk.GetUpperBound()] {
			t.Errorf("bucket le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want[bk.GetUpperBound()])
		}
	}
	var total float64
	for _, s := range statSizes {
		total += float64(s.n)
	}
	if h.GetSampleCount() != uint64(n) || h.GetSampleSum() != total {
		t.Errorf("histogram count %d sum %v, want %v and %v", h.GetSampleCount(), h.GetSampleSum(), n, total)
	}
	if v := find("fabricfs_domain_bytes_total", map[string]string{"provider": "tcp", "domain": "lo", "op": "recv"}).GetCounter().GetValue(); v != total {
		t.Errorf("domain's recv bytes %v, want %v", v, total)
	}
	if v := find("fabricfs_cq_entries_total", map[string]string{"kind": "cq", "id": "cb"}).GetCounter().GetValue(); v != n {
		t.Errorf("receiver's cq entries %v, want %v", v, n)
	}
	if fams["fabricfs_tcp_rtt_us"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("tcp_rtt_us is not a gauge")
	}
	// /resources lists the endpoints with their counts.
	res := d.read(t, "resources")
	if !strings.Contains(res, " tcp/lo/ep/a connected 7 ") {
		t.Errorf("/resources:\n%s", res)
	}
	// Another user sees the domain's sums, and its own objects only: an
	// object it makes, none of root's.
	openUp(t, filepath.Dir(d.mnt))
	out, err := asUser(nobody, "mkdir "+dom+"/cq/mine && cat "+d.path("metrics")+" && echo === && cat "+d.path("resources")+"; rmdir "+dom+"/cq/mine")
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	m, r, _ := strings.Cut(out, "===\n")
	if !strings.Contains(m, `fabricfs_domain_ops_total{provider="tcp",domain="lo",op="send"} 7`) ||
		!strings.Contains(m, `id="mine",uid="65534"`) || strings.Contains(m, `uid="0"`) {
		t.Errorf("nobody's /metrics:\n%s", m)
	}
	// One line: UID PID PATH STATE and no counts, for a CQ.
	if f := strings.Fields(r); strings.Count(r, "\n") != 1 || len(f) != 7 || f[0] != "65534" || f[1] == "0" ||
		f[2] != "tcp/lo/cq/mine" || f[3] != "open" || f[4] != "-" {
		t.Errorf("nobody's /resources: %q", r)
	}
}
