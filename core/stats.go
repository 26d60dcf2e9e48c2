package core

// Statistics: what each object counts since it was made (its stats file),
// and the sums of a domain, a provider and the daemon, which keep the
// counts of closed objects so that they never go backwards.
// docs/observability.md describes what is counted where.

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/fi"
)

// NumSizeBuckets is the number of size buckets of a histogram: those of
// libfabric's monitor hook (prov/hook/monitor, enum mon_size_bucket).
const NumSizeBuckets = 9

// sizeBounds are the buckets' upper bounds, inclusive as in the monitor
// hook (a size of 64 is in 0_64, 65 in 64_512); the last bucket has none.
var sizeBounds = [NumSizeBuckets - 1]uint64{64, 512, 1 << 10, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}

// SizeBucketNames name the buckets in stats files, after MON_SIZE_*.
var SizeBucketNames = [NumSizeBuckets]string{"0_64", "64_512", "512_1k", "1k_4k", "4k_64k", "64k_256k", "256k_1m", "1m_4m", "4m_up"}

// SizeBucket is the bucket of a size of n bytes.
func SizeBucket(n uint64) int {
	for i, b := range sizeBounds {
		if n <= b {
			return i
		}
	}
	return NumSizeBuckets - 1
}

// SizeBound is bucket i's upper bound, inclusive; the last bucket's is
// +Inf (math.MaxUint64 here).
func SizeBound(i int) uint64 {
	if i < len(sizeBounds) {
		return sizeBounds[i]
	}
	return math.MaxUint64
}

// opKindNames name the operation kinds, as the ctl verbs and ring
// operations do.
var opKindNames = [...]string{
	OpSend: "send", OpRecv: "recv", OpTSend: "tsend", OpTRecv: "trecv", OpWrite: "write", OpRead: "read",
	OpAtomic: "atomic", OpFetchAtomic: "fetch_atomic", OpCompareAtomic: "compare_atomic",
}

// numOpKinds is the number of OpKinds.
const numOpKinds = len(opKindNames)

func (k OpKind) String() string {
	if int(k) < numOpKinds {
		return opKindNames[k]
	}
	return "op" + strconv.Itoa(int(k))
}

// An endpoint counts the operations it posts by kind, and after them the
// peers' operations on its memory: remote_read and remote_write (their
// counter classes' names).
const (
	statRemoteRead = numOpKinds + iota
	statRemoteWrite
	numOpStats
)

// opStatName is the name of the operations counted at index i.
func opStatName(i int) string {
	switch i {
	case statRemoteRead:
		return classes[classRemoteRead].name
	case statRemoteWrite:
		return classes[classRemoteWrite].name
	}
	return OpKind(i).String()
}

// OpStats are the counts of one kind of operation: completions, bytes
// and sizes of the successful ones, and the failed ones.
type OpStats struct {
	Op     string                 // its name: an OpKind's, remote_read or remote_write
	Ops    uint64                 // completions, failed ones included
	Bytes  uint64                 // bytes of the successful ones
	Errors uint64                 // completions with an error
	Size   [NumSizeBuckets]uint64 // sizes of the successful ones, by SizeBucket
}

// Count is one named count of a stats file.
type Count struct {
	Name  string
	Value uint64
	// Gauge marks a level (a round-trip time), not a count since the
	// object was made; sums leave gauges out.
	Gauge bool
	// Help says what is counted, for /metrics.
	Help string
}

// Stats is what a stats file shows: the operations of an endpoint (Ops,
// or nil) and the counts of the object's kind and its provider. Text and
// MarshalJSON show the same names.
type Stats struct {
	Ops    []OpStats
	Counts []Count
}

// each calls f with every name and value of s, in the order of the text.
func (s Stats) each(f func(name string, v uint64)) {
	for _, o := range s.Ops {
		f(o.Op+"_ops", o.Ops)
		f(o.Op+"_bytes", o.Bytes)
		f(o.Op+"_errors", o.Errors)
		for i, v := range o.Size {
			f(o.Op+"_size_"+SizeBucketNames[i], v)
		}
	}
	for _, c := range s.Counts {
		f(c.Name, c.Value)
	}
}

// Text is the stats file: one "name value" line each, a histogram as one
// line per bucket ("send_size_64_512 3").
func (s Stats) Text() string {
	var b strings.Builder
	s.each(func(name string, v uint64) {
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(v, 10))
		b.WriteByte('\n')
	})
	return b.String()
}

// MarshalJSON writes s as one object whose keys are the names of the text,
// in its order: {"send_ops":3,...}.
func (s Stats) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	s.each(func(name string, v uint64) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
		b = strconv.AppendUint(b, v, 10)
	})
	return append(b, '}'), nil
}

var _ json.Marshaler = Stats{}

// Add adds t's counts to s, name by name; gauges are left out.
func (s *Stats) Add(t Stats) {
	if len(t.Ops) > 0 && len(s.Ops) == 0 {
		s.Ops = zeroOps()
	}
	for _, o := range t.Ops {
		for i := range s.Ops {
			if s.Ops[i].Op == o.Op {
				p := &s.Ops[i]
				p.Ops += o.Ops
				p.Bytes += o.Bytes
				p.Errors += o.Errors
				for j, v := range o.Size {
					p.Size[j] += v
				}
			}
		}
	}
	s.Counts = SumCounts(s.Counts, t.Counts, false)
}

// SumCounts adds src's counts to dst's, name by name, and returns dst:
// counts add up; with gauges a gauge keeps the larger value (an RDM
// endpoint's round-trip time is its slowest connection's), without them
// src's gauges are left out.
func SumCounts(dst, src []Count, gauges bool) []Count {
next:
	for _, c := range src {
		if c.Gauge && !gauges {
			continue
		}
		for i := range dst {
			if d := &dst[i]; d.Name == c.Name {
				if c.Gauge {
					d.Value = max(d.Value, c.Value)
				} else {
					d.Value += c.Value
				}
				continue next
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// zeroOps is every operation's OpStats, zero.
func zeroOps() []OpStats {
	out := make([]OpStats, numOpStats)
	for i := range out {
		out[i].Op = opStatName(i)
	}
	return out
}

// opCounter counts one kind of operation: atomic adds, no lock and no
// allocation, as it runs for every completion. The completions are the
// sum of the buckets and the errors, not a count of their own: two adds
// per success, one per error.
type opCounter struct {
	bytes, errors atomic.Uint64
	size          [NumSizeBuckets]atomic.Uint64
}

// opCounters are an endpoint's counts by operation (numOpStats).
type opCounters [numOpStats]opCounter

// count counts one completion of the operations at index i, of n bytes.
func (c *opCounters) count(i int, n uint64, failed bool) {
	p := &c[i]
	if failed {
		p.errors.Add(1)
		return
	}
	p.bytes.Add(n)
	p.size[SizeBucket(n)].Add(1)
}

func (c *opCounters) snapshot() []OpStats {
	out := zeroOps()
	for i := range c {
		p, o := &c[i], &out[i]
		o.Bytes, o.Errors = p.bytes.Load(), p.errors.Load()
		o.Ops = o.Errors
		for j := range p.size {
			o.Size[j] = p.size[j].Load()
			o.Ops += o.Size[j]
		}
	}
	return out
}

// opSize is the size an operation's completion counts: the bytes placed
// for a receive, the bytes sent, written, read or combined otherwise.
func opSize(op *Op, c Completion) uint64 {
	switch {
	case op.Kind.IsRecv():
		return c.Len
	case len(op.Buf) == 0:
		return uint64(len(op.Result)) // a fetch of FI_ATOMIC_READ
	}
	return uint64(len(op.Buf))
}

// Counts of the kinds of objects, each with its help text. An object's
// stats show its kind's, in this order; the sums show all of them.
var kindCounts = [NumKinds][]struct{ name, help string }{
	KindPEP: {
		{"pep_requests", "connection requests the passive endpoint received"},
	},
	KindCQ: {
		{"cq_entries", "completions posted to the CQ, error entries included"},
		{"cq_errors", "error completions posted to the CQ"},
		{"cq_overruns", "completions lost behind a full CQ"},
		{"cq_reads", "completions read through the CQ's events file"},
	},
	KindEQ: {
		{"eq_events", "events queued on the EQ"},
		{"eq_errors", "error events queued on the EQ"},
		{"eq_lost", "events lost behind a full EQ"},
	},
	KindAV: {
		{"av_inserts", "addresses inserted"},
		{"av_removes", "addresses removed"},
		{"av_lookups", "lookups of an fi_addr (each operation to a peer of the AV)"},
	},
	KindMR: {
		{"mr_registrations", "registrations (reg)"},
		{"mr_bytes", "bytes registered"},
		{"mr_remote_accesses", "peers' operations on the region that core resolved"},
	},
	KindCntr: {
		{"cntr_successes", "completions counted in the value"},
		{"cntr_errors", "completions counted in the error value"},
		{"cntr_adds", "adds to the value or error value (ctl add, adderr, value file)"},
		{"cntr_sets", "sets of the value or error value (ctl set, seterr, value file)"},
	},
}

// kindStats makes the stats of an object of kind k from its counts'
// values, in kindCounts' order.
func kindStats(k Kind, values ...uint64) Stats {
	defs := kindCounts[k]
	s := Stats{Counts: make([]Count, len(defs))}
	for i, d := range defs {
		s.Counts[i] = Count{Name: d.name, Value: values[i], Help: d.help}
	}
	return s
}

// HasStats reports whether objects of kind k have a stats file.
func HasStats(k Kind) bool { return k == KindEP || len(kindCounts[k]) > 0 }

// statser is the Impl of a kind with stats.
type statser interface{ stats() Stats }

// Stats are the object's counts since it was made; for a kind without
// stats (HasStats), none.
func (o *Object) Stats() Stats {
	if s, ok := o.Impl.(statser); ok {
		return s.stats()
	}
	return Stats{}
}

// EndpointStats is an optional interface of a provider's Endpoint that
// counts things of its own (a tcp socket's retransmits and round-trip
// time): Stats returns them, their names prefixed by the provider's
// ("tcp_total_retrans"). It is called from any goroutine, not on the
// data path, and must not block.
type EndpointStats interface {
	Stats() []Count
}

// zeroSums is what a sum starts from, so that its names are there before
// anything counted: every operation and every kind's counts.
func zeroSums() Stats {
	s := Stats{Ops: zeroOps()}
	for k := range kindCounts {
		s.Add(kindStats(Kind(k), make([]uint64, len(kindCounts[k]))...))
	}
	return s
}

// domainStats are a domain's sums of the objects it closed, in all and
// by owner. An object that died is in closing (under the domain's mu)
// until its counts are in retired, so that a sum sees it in one place or
// the other.
type domainStats struct {
	mu      sync.Mutex // held while retiring, and while a sum reads retired and the objects
	retired Stats
	byUser  map[uint32]*Stats // one per user that closed an object of the domain
	closing map[*Object]bool
}

// retire adds the counts of an object that was closed to the domain's.
func (d *Domain) retire(o *Object) {
	s := o.Stats()
	d.stats.mu.Lock()
	d.stats.retired.Add(s)
	if d.stats.byUser == nil {
		d.stats.byUser = map[uint32]*Stats{}
	}
	u := d.stats.byUser[o.Owner]
	if u == nil {
		u = &Stats{}
		d.stats.byUser[o.Owner] = u
	}
	u.Add(s)
	d.mu.Lock()
	delete(d.stats.closing, o)
	d.mu.Unlock()
	d.stats.mu.Unlock()
}

// Stats are the sums of everything of the domain since it opened: its
// objects' counts and those of the objects it closed.
func (d *Domain) Stats() Stats { return d.sum(0, true) }

// UserStats are the sums of what uid made in the domain since it opened.
func (d *Domain) UserStats(uid uint32) Stats { return d.sum(uid, false) }

// sum adds up the counts of the domain's objects, live and closed: all
// of them, or uid's.
func (d *Domain) sum(uid uint32, all bool) Stats {
	mine := func(o *Object) bool { return all || o.Owner == uid }
	s := zeroSums()
	d.stats.mu.Lock()
	if all {
		s.Add(d.stats.retired)
	} else if u := d.stats.byUser[uid]; u != nil {
		s.Add(*u)
	}
	d.mu.Lock()
	var objs []*Object
	for _, o := range d.bySerial {
		if mine(o) {
			objs = append(objs, o)
		}
	}
	for o := range d.stats.closing {
		if mine(o) {
			objs = append(objs, o)
		}
	}
	d.mu.Unlock()
	d.stats.mu.Unlock()
	for _, o := range objs {
		s.Add(o.Stats())
	}
	return s
}

// ProviderStats are the sums of the domains of provider prov.
func (f *Fabric) ProviderStats(prov string) Stats {
	s := zeroSums()
	for _, d := range f.Domains(prov) {
		s.Add(d.Stats())
	}
	return s
}

// Stats are the sums of every domain of every provider.
func (f *Fabric) Stats() Stats {
	s := zeroSums()
	for _, p := range f.Providers() {
		s.Add(f.ProviderStats(p.Name()))
	}
	return s
}

// UserStats are the sums of what uid made in every domain.
func (f *Fabric) UserStats(uid uint32) Stats {
	s := zeroSums()
	for _, p := range f.Providers() {
		for _, d := range f.Domains(p.Name()) {
			s.Add(d.UserStats(uid))
		}
	}
	return s
}

// Held is one line of /resources: a live object, who made it and
// what it did, in the manner of `rdma resource show`.
type Held struct {
	Obj   *Object
	State string // an endpoint's or passive endpoint's state, registered or not for an MR, else "open"
	// Ops, Bytes and Errors add up an endpoint's operations of every
	// kind (Stats); 0 for other kinds.
	Ops, Bytes, Errors uint64
}

// String is the line: "UID PID PROVIDER/DOMAIN/KIND/ID STATE OPS BYTES
// ERRORS", with "-" for the counts of a kind without operations.
func (r Held) String() string {
	o := r.Obj
	counts := "- - -"
	if o.Kind == KindEP {
		counts = fmt.Sprintf("%d %d %d", r.Ops, r.Bytes, r.Errors)
	}
	return fmt.Sprintf("%d %d %s/%s %s %s", o.Owner, o.Pid, o.Dom, o.Path(), r.State, counts)
}

// HeldJSON is a line of /resources as resources.json has it: the counts
// null for a kind without operations.
type HeldJSON struct {
	UID    uint32  `json:"uid"`
	Pid    uint32  `json:"pid"`
	Path   string  `json:"path"` // PROVIDER/DOMAIN/KIND/ID
	State  string  `json:"state"`
	Ops    *uint64 `json:"ops"`
	Bytes  *uint64 `json:"bytes"`
	Errors *uint64 `json:"errors"`
}

// JSON is r as resources.json has it.
func (r Held) JSON() HeldJSON {
	o := r.Obj
	h := HeldJSON{UID: o.Owner, Pid: o.Pid, Path: o.Dom.String() + "/" + o.Path(), State: r.State}
	if o.Kind == KindEP {
		h.Ops, h.Bytes, h.Errors = &r.Ops, &r.Bytes, &r.Errors
	}
	return h
}

// Resources lists the live objects uid may see (root: all, another user:
// its own), by provider, domain, kind and age.
func (f *Fabric) Resources(uid uint32) []Held {
	var out []Held
	for _, p := range f.Providers() {
		for _, d := range f.Domains(p.Name()) {
			for k := Kind(0); k < NumKinds; k++ {
				for _, o := range d.List(k) {
					if uid == 0 || o.Owner == uid {
						out = append(out, resourceOf(o))
					}
				}
			}
		}
	}
	return out
}

func resourceOf(o *Object) Held {
	r := Held{Obj: o, State: "open"}
	switch impl := o.Impl.(type) {
	case *EP:
		impl.mu.Lock()
		r.State = impl.state
		impl.mu.Unlock()
		for _, s := range impl.ops.snapshot() {
			r.Ops, r.Bytes, r.Errors = r.Ops+s.Ops, r.Bytes+s.Bytes, r.Errors+s.Errors
		}
	case *PEP:
		impl.mu.Lock()
		r.State = impl.state
		impl.mu.Unlock()
	case *MR:
		if impl.Key() == uint64(fi.KEY_NOTAVAIL) {
			r.State = "unregistered"
		} else {
			r.State = "registered"
		}
	}
	return r
}

// DeviceCounters is an optional interface of a ProviderDomain whose
// device counts what it does (verbs): its counters, shown as Linux's rdma
// sysfs shows a port's, under the domain's ports/1/.
type DeviceCounters interface {
	DeviceCounters() []DeviceCounter
}

// DeviceCounter is one counter of a device: a file ports/1/DIR/NAME.
type DeviceCounter struct {
	Dir   string // "hw_counters" (the driver's) or "counters" (the port's, IB PMA names)
	Name  string // as Linux's drivers name them: sent_pkts, port_xmit_packets...
	Value uint64
}

// DeviceCounters are the counters of the domain's device, if its provider
// has them (DeviceCounters); nil if not.
func (d *Domain) DeviceCounters() []DeviceCounter {
	if dc, ok := d.prov.(DeviceCounters); ok {
		return dc.DeviceCounters()
	}
	return nil
}

// The stats of each kind.

// stats of an endpoint: its operations, and its provider endpoint's
// counts (EndpointStats), kept from before its Close once closed. A
// context of a scalable endpoint and an alias share their provider
// endpoint with it, which shows its counts.
func (e *EP) stats() Stats {
	s := Stats{Ops: e.ops.snapshot()}
	e.mu.Lock()
	prov, shared, kept := e.prov, e.sep != nil || e.parent != nil, e.provStats
	closed := e.state == stateClosed
	e.mu.Unlock()
	switch p, ok := prov.(EndpointStats); {
	case shared:
	case closed:
		s.Counts = kept
	case ok:
		s.Counts = p.Stats()
	}
	return s
}

// keepProvStats keeps the counts of the provider endpoint p before it
// closes, so that the endpoint's and its domain's never go backwards.
func (e *EP) keepProvStats(p Endpoint) {
	if ps, ok := p.(EndpointStats); ok {
		c := ps.Stats()
		e.mu.Lock()
		e.provStats = c
		e.mu.Unlock()
	}
}

func (p *PEP) stats() Stats { return kindStats(KindPEP, p.requests.Load()) }

func (c *CQ) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return kindStats(KindCQ, c.total, c.errs, c.lost, c.reads)
}

func (e *EQ) stats() Stats {
	e.q.mu.Lock()
	lost := e.lost
	e.q.mu.Unlock()
	return kindStats(KindEQ, e.events.Load(), e.errs.Load(), lost)
}

func (a *AV) stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return kindStats(KindAV, a.inserts, a.removes, a.lookups)
}

// mrStats are a memory region's counts.
type mrStats struct {
	registrations, bytes, remotes atomic.Uint64
}

// registered counts a registration of n bytes.
func (s *mrStats) registered(n uint64) {
	s.registrations.Add(1)
	s.bytes.Add(n)
}

func (m *MR) stats() Stats {
	return kindStats(KindMR, m.counts.registrations.Load(), m.counts.bytes.Load(), m.counts.remotes.Load())
}

func (c *Cntr) stats() Stats {
	return kindStats(KindCntr, c.successes.Load(), c.failures.Load(), c.adds.Load(), c.sets.Load())
}
