package core_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

// The buckets are libfabric's monitor hook's, upper bounds inclusive.
func TestSizeBuckets(t *testing.T) {
	for _, c := range []struct {
		n      uint64
		bucket string
	}{
		{0, "0_64"}, {64, "0_64"}, {65, "64_512"}, {512, "64_512"}, {513, "512_1k"}, {1024, "512_1k"},
		{1025, "1k_4k"}, {4096, "1k_4k"}, {4097, "4k_64k"}, {65536, "4k_64k"}, {65537, "64k_256k"},
		{262144, "64k_256k"}, {262145, "256k_1m"}, {1 << 20, "256k_1m"}, {1<<20 + 1, "1m_4m"},
		{4 << 20, "1m_4m"}, {4<<20 + 1, "4m_up"}, {1 << 63, "4m_up"},
	} {
		if got := core.SizeBucketNames[core.SizeBucket(c.n)]; got != c.bucket {
			t.Errorf("size %d is in %s, want %s", c.n, got, c.bucket)
		}
	}
	for i := 0; i < core.NumSizeBuckets-1; i++ {
		if b := core.SizeBound(i); core.SizeBucket(b) != i || core.SizeBucket(b+1) != i+1 {
			t.Errorf("bound %d of bucket %d", b, i)
		}
	}
}

// statsOf reads an object's stats text into a map, checking that each
// line is "name value" and that the JSON form has the same pairs.
func statsOf(t *testing.T, s core.Stats) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSuffix(s.Text(), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("stats line %q", l)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("stats line %q: %v", l, err)
		}
		m[f[0]] = v
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]uint64
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("stats JSON %s: %v", b, err)
	}
	if len(j) != len(m) {
		t.Errorf("JSON has %d keys, text %d lines", len(j), len(m))
	}
	for k, v := range m {
		if j[k] != v {
			t.Errorf("JSON %s=%d, text %d", k, j[k], v)
		}
	}
	return m
}

// wantStats checks the counts named in want and that every other count
// of the ops in moved is 0.
func wantStats(t *testing.T, what string, got map[string]uint64, want map[string]uint64) {
	t.Helper()
	for k, v := range got {
		if w := want[k]; v != w && !strings.HasPrefix(k, "tcp_") {
			t.Errorf("%s: %s = %d, want %d", what, k, v, w)
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: no %s", what, k)
		}
	}
}

func TestEndpointStats(t *testing.T) {
	d := lo(t)
	a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
	ctx := context.Background()
	epA, epB := a.Impl.(*core.EP), b.Impl.(*core.EP)
	sizes := []int{1, 64, 65, 4096, 70000}
	for _, n := range sizes {
		sent := make(chan error, 1)
		go func() { sent <- epA.WriteData(ctx, make([]byte, n)) }()
		if got, err := epB.ReadData(ctx, make([]byte, n), 0); err != nil || got != n {
			t.Fatalf("read of %d: %d, %v", n, got, err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	total := uint64(1 + 64 + 65 + 4096 + 70000)
	wantStats(t, "sender", statsOf(t, a.Stats()), map[string]uint64{
		"send_ops": 5, "send_bytes": total, "send_size_0_64": 2, "send_size_64_512": 1, "send_size_1k_4k": 1, "send_size_64k_256k": 1,
	})
	wantStats(t, "receiver", statsOf(t, b.Stats()), map[string]uint64{
		"recv_ops": 5, "recv_bytes": total, "recv_size_0_64": 2, "recv_size_64_512": 1, "recv_size_1k_4k": 1, "recv_size_64k_256k": 1,
	})
	sums := statsOf(t, d.Stats())
	if sums["cq_entries"] != 10 || sums["send_ops"] != 5 || sums["recv_bytes"] != total {
		t.Errorf("domain sums: cq_entries %d send_ops %d recv_bytes %d", sums["cq_entries"], sums["send_ops"], sums["recv_bytes"])
	}
	if _, err := cq.Read(ctx, 4, false); err != nil {
		t.Fatal(err)
	}
	cqo, _ := d.Lookup(core.KindCQ, "c")
	if c := statsOf(t, cqo.Stats()); c["cq_entries"] != 10 || c["cq_reads"] != 4 || c["cq_errors"] != 0 {
		t.Errorf("cq stats %v", c)
	}
	// A closed endpoint's counts stay in the domain's.
	run(t, a, "shutdown")
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if s := statsOf(t, d.Stats()); s["send_ops"] != 5 || s["send_size_64k_256k"] != 1 {
		t.Errorf("after the sender closed: send_ops %d", s["send_ops"])
	}
}

func TestKindStats(t *testing.T) {
	d := lo(t)
	av := create(t, d, core.KindAV, "v")
	run(t, av, "insert 127.0.0.1:1 127.0.0.1:2")
	run(t, av, "remove 0")
	cntr := create(t, d, core.KindCntr, "n")
	run(t, cntr, "add 3")
	run(t, cntr, "set 1")
	run(t, cntr, "adderr 1")
	mr := create(t, d, core.KindMR, "m")
	if err := mr.Attrs()[0].Set("4096"); err != nil {
		t.Fatal(err)
	}
	run(t, mr, "reg")
	wantStats(t, "av", statsOf(t, av.Stats()), map[string]uint64{"av_inserts": 2, "av_removes": 1, "av_lookups": 0})
	wantStats(t, "cntr", statsOf(t, cntr.Stats()), map[string]uint64{"cntr_adds": 2, "cntr_sets": 1})
	wantStats(t, "mr", statsOf(t, mr.Stats()), map[string]uint64{"mr_registrations": 1, "mr_bytes": 4096})
}
