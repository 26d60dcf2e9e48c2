package fs

// The statistics files: each object's stats, the sums of a domain, a
// provider and the daemon, a user's, /resources, a verbs domain's device
// counters (ports/1/), and /metrics in Prometheus's text format.
// docs/observability.md describes them.

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
)

// slotStats is the inode slot of an object's stats file, apart from the
// slots of tree.go.
const slotStats = 40

// statsEntries are the stats file of an object of a kind that counts and
// its JSON view, or none.
func statsEntries(o *core.Object, f fileMaker, j jsonMaker, ro meta) []entry {
	if !core.HasStats(o.Kind) {
		return nil
	}
	return []entry{
		f("stats", slotStats, ro, rendered(func() string { return o.Stats().Text() }, nil)),
		j("stats", slotStats, func() any { return o.Stats() }),
	}
}

// statsFiles are a world-readable stats file of sums at path and its JSON
// view.
func (t *tree) statsFiles(path string, get func() core.Stats) []entry {
	return []entry{
		fileEntry("stats", t.ino(path), fileRO, nil, rendered(func() string { return get().Text() }, nil)),
		t.jsonEntry(path, fileRO, func() any { return get() }),
	}
}

// rootStatsEntries are the root's stats, metrics and resources files.
func (t *tree) rootStatsEntries() []entry {
	return append(t.statsFiles("/stats", t.fab.Stats),
		fileEntry("metrics", t.ino("/metrics"), fileRO, nil, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
			return &textHandle{text: []byte(metricsText(t.fab, callerUID(ctx)))}, nil
		}),
		fileEntry("resources", t.ino("/resources"), fileRO, nil, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
			var b strings.Builder
			for _, r := range t.fab.Resources(callerUID(ctx)) {
				b.WriteString(r.String())
				b.WriteByte('\n')
			}
			return &textHandle{text: []byte(b.String())}, nil
		}),
		fileEntry("resources.json", t.ino("/resources.json"), fileRO, nil, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
			hs := []core.HeldJSON{}
			for _, r := range t.fab.Resources(callerUID(ctx)) {
				hs = append(hs, r.JSON())
			}
			return &textHandle{text: []byte(jsonText(hs))}, nil
		}),
	)
}

// userStatsEntries are /users/UID.stats, the sums of what uid made, and
// its JSON view, readable by root and uid.
func (t *tree) userStatsEntries(uid uint32) []entry {
	name := strconv.FormatUint(uint64(uid), 10)
	m := meta{mode: syscall.S_IFREG | 0o400, uid: uid}
	return []entry{
		fileEntry(name+".stats", t.ino("/users/"+name+".stats"), m, nil,
			rendered(func() string { return t.fab.UserStats(uid).Text() }, nil)),
		t.jsonEntry("/users/"+name+".stats", m, func() any { return t.fab.UserStats(uid) }),
	}
}

// domainStatsEntries are a domain's stats file and, for a domain whose device
// counts (verbs), ports/1/hw_counters/ and ports/1/counters/ as Linux's
// rdma sysfs has them: one value per file.
func (t *tree) domainStatsEntries(d *core.Domain, base string) []entry {
	es := t.statsFiles(base+"/stats", d.Stats)
	if len(d.DeviceCounters()) == 0 {
		return es
	}
	counter := func(sub, name string) func() string {
		return func() string {
			for _, c := range d.DeviceCounters() {
				if c.Dir == sub && c.Name == name {
					return strconv.FormatUint(c.Value, 10) + "\n"
				}
			}
			return ""
		}
	}
	counters := func(sub, path string) *dir {
		return &dir{meta: dirRO, entries: func() []entry {
			var es []entry
			for _, c := range d.DeviceCounters() {
				if c.Dir == sub {
					es = append(es, fileEntry(c.Name, t.ino(path+"/"+c.Name), fileRO, nil, rendered(counter(sub, c.Name), nil)))
				}
			}
			return es
		}}
	}
	port := base + "/ports/1"
	return append(es, t.dirEntry(base+"/ports", "ports", dirRO, func() *dir {
		return &dir{meta: dirRO, entries: func() []entry {
			return []entry{t.dirEntry(port, "1", dirRO, func() *dir {
				return &dir{meta: dirRO, entries: func() []entry {
					return []entry{
						t.dirEntry(port+"/hw_counters", "hw_counters", dirRO, func() *dir { return counters("hw_counters", port+"/hw_counters") }),
						t.dirEntry(port+"/counters", "counters", dirRO, func() *dir { return counters("counters", port+"/counters") }),
					}
				}}
			})}
		}}
	}))
}

// metricsText is /metrics for uid: in Prometheus's text exposition format
// (version 0.0.4, which node_exporter's textfile collector reads), a
// series per live object uid may see (root: all) and per domain.
func metricsText(fab *core.Fabric, uid uint32) string {
	var m metrics
	for _, p := range fab.Providers() {
		for _, d := range fab.Domains(p.Name()) {
			dl := `provider="` + escapeLabel(p.Name()) + `",domain="` + escapeLabel(d.Name) + `"`
			m.stats("fabricfs_domain_", dl, d.Stats(), true)
			for k := core.Kind(0); k < core.NumKinds; k++ {
				if !core.HasStats(k) {
					continue
				}
				for _, o := range d.List(k) {
					if uid != 0 && o.Owner != uid {
						continue
					}
					ol := dl + `,kind="` + k.String() + `",id="` + escapeLabel(o.ID) + `",uid="` + strconv.FormatUint(uint64(o.Owner), 10) + `"`
					m.stats("fabricfs_", ol, o.Stats(), false)
				}
			}
		}
	}
	return m.text()
}

// metrics gathers samples into families, each written once with its
// HELP and TYPE lines.
type metrics struct {
	fams   []*family
	byName map[string]*family
}

type family struct {
	name, typ, help string
	samples         strings.Builder
}

// sample adds one sample of family name (the family's, or with a suffix
// such as _bucket) with labels.
func (m *metrics) sample(fam, typ, help, name, labels string, v uint64) {
	f := m.byName[fam]
	if f == nil {
		if m.byName == nil {
			m.byName = map[string]*family{}
		}
		f = &family{name: fam, typ: typ, help: help}
		m.byName[fam] = f
		m.fams = append(m.fams, f)
	}
	f.samples.WriteString(name + "{" + labels + "} " + strconv.FormatUint(v, 10) + "\n")
}

// stats adds the samples of s: per operation kind (label op) the
// operations, bytes and errors as counters and the sizes as a histogram,
// and each count as a counter (NAME_total) or a gauge. An object's
// operations that never ran are left out (all: none is).
func (m *metrics) stats(prefix, labels string, s core.Stats, all bool) {
	for _, o := range s.Ops {
		if o.Ops == 0 && !all {
			continue
		}
		l := labels + `,op="` + o.Op + `"`
		m.sample(prefix+"ops_total", "counter", "Operations completed, failed ones included, by kind (op).", prefix+"ops_total", l, o.Ops)
		m.sample(prefix+"bytes_total", "counter", "Bytes of the operations completed without error, by kind (op).", prefix+"bytes_total", l, o.Bytes)
		m.sample(prefix+"errors_total", "counter", "Operations completed with an error, by kind (op).", prefix+"errors_total", l, o.Errors)
		h := prefix + "op_size_bytes"
		help := "Sizes of the operations completed without error, in libfabric's monitor hook's buckets, by kind (op)."
		var n uint64
		for i, v := range o.Size {
			n += v
			le := "+Inf"
			if i < core.NumSizeBuckets-1 {
				le = strconv.FormatUint(core.SizeBound(i), 10)
			}
			m.sample(h, "histogram", help, h+"_bucket", l+`,le="`+le+`"`, n)
		}
		m.sample(h, "histogram", help, h+"_sum", l, o.Bytes)
		m.sample(h, "histogram", help, h+"_count", l, n)
	}
	for _, c := range s.Counts {
		if c.Gauge {
			m.sample(prefix+c.Name, "gauge", c.Help, prefix+c.Name, labels, c.Value)
		} else {
			m.sample(prefix+c.Name+"_total", "counter", c.Help, prefix+c.Name+"_total", labels, c.Value)
		}
	}
}

func (m *metrics) text() string {
	var b strings.Builder
	fams := append([]*family(nil), m.fams...)
	sort.SliceStable(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	for _, f := range fams {
		b.WriteString("# HELP " + f.name + " " + f.help + "\n")
		b.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
		b.WriteString(f.samples.String())
	}
	return b.String()
}

// escapeLabel escapes a label value as the text format wants: \, " and
// newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// callerPid is the process behind a request, 0 if none.
func callerPid(ctx context.Context) uint32 {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Pid
	}
	return 0
}
