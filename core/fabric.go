package core

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/shm"
)

// Fabric is the root of the model: the providers, their domains, and the
// per-user limits. It is what the tree at /fabric shows.
type Fabric struct {
	provs []Provider

	// rescanMu serialises Rescan; domains changes only under it and mu.
	rescanMu   sync.Mutex
	lastRescan time.Time            // when the last Rescan looked; under rescanMu
	domains    map[string][]*Domain // by provider name, in the provider's order; under mu

	// Logf logs daemon-side failures; nil logs with log/slog, at level
	// warn.
	Logf func(format string, a ...any)
	// Gone, if set, is called with each object once it died and was
	// closed, whatever ended it (rmdir, its last file closed, its
	// domain's end); set it before creating objects.
	Gone func(*Object)
	// Shm allocates shared memory for rings and regions. New sets it up
	// for passthrough as root and for symlinks otherwise; replace it
	// before creating objects to choose.
	Shm *shm.Allocator

	eng engine

	mu      sync.Mutex
	acct    accounts // what each uid holds (limits.go); under mu
	closing bool
}

// New opens every domain of every provider.
func New(provs ...Provider) (*Fabric, error) {
	f := &Fabric{provs: provs, domains: map[string][]*Domain{}, acct: accounts{limits: DefaultLimits, held: map[uint32]*Holding{}}}
	f.eng.logf = f.logf
	f.eng.allowed = new(unix.CPUSet)
	if err := unix.SchedGetaffinity(0, f.eng.allowed); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	mem, err := shm.New(shm.DefaultMapping())
	if err != nil {
		return nil, err
	}
	mem.CheckConn = CheckConn
	f.Shm = mem
	for _, p := range provs {
		if err := f.openDomains(p); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// openDomains opens every domain p's entries name that is not open yet,
// and adds it after p's open ones.
func (f *Fabric) openDomains(p Provider) error {
	for _, in := range p.Infos() {
		name := in.DomainAttr.Name
		if _, ok := f.Domain(p.Name(), name); ok {
			continue
		}
		pd, err := p.OpenDomain(name)
		if err != nil {
			return WithOp("fi_domain "+p.Name()+"/"+name, err)
		}
		d := &Domain{Prov: p, Name: name, prov: pd, fab: f, bySerial: map[uint64]*Object{}, atomicTypes: map[fi.EPType]bool{}}
		for k := range d.objs {
			d.objs[k] = map[string]*Object{}
		}
		for _, t := range atomicEPTypes {
			d.atomicTypes[t] = d.answersAtomics(t)
		}
		f.mu.Lock()
		f.domains[p.Name()] = append(f.domains[p.Name()], d)
		f.mu.Unlock()
		slog.Info("domain found", "domain", d.String())
	}
	return nil
}

// RescanInterval is the least time between two looks at the host's
// interfaces: Rescan does nothing if the last one looked less than that
// ago, so a user asking again and again (a loop over a name that does not
// exist) costs the daemon one netlink dump a second at most.
const RescanInterval = time.Second

// Rescan has every provider that follows the host's interfaces (Rescanner)
// look at them again, and opens the domains of the entries they added,
// beside the open ones, which it leaves alone. The tree calls it when a
// provider's directory is listed, a name in it is not found, or an info or
// getinfo file is read: an interface that appeared since the daemon
// started is a domain from then on. Domains are never removed: the domain
// of an interface that went away stays, with its entries, and its
// endpoints fail as their sockets do (docs/deploy.md). It looks at most
// once a RescanInterval: an interface shows up to that long after it came
// up.
func (f *Fabric) Rescan() {
	f.rescanMu.Lock()
	defer f.rescanMu.Unlock()
	if !f.lastRescan.IsZero() && time.Since(f.lastRescan) < RescanInterval {
		return
	}
	f.lastRescan = time.Now()
	f.mu.Lock()
	closing := f.closing
	f.mu.Unlock()
	if closing {
		return
	}
	for _, p := range f.provs {
		r, ok := p.(Rescanner)
		if !ok {
			continue
		}
		if err := r.Rescan(); err != nil {
			f.logf("rescan %s: %v", p.Name(), err)
			continue
		}
		if err := f.openDomains(p); err != nil {
			f.logf("rescan: %v", err)
		}
	}
}

// SetEngineCPUs runs the ring engine's threads only on the CPUs of set
// (sched_setaffinity), as fabricfs -engine-cpus does: the threads of the
// groups started afterwards, so call it before any endpoint is enabled.
// Each CPU must be one this process may run on.
func (f *Fabric) SetEngineCPUs(set unix.CPUSet) error {
	if set.Count() == 0 {
		return errors.New("no CPU for the engine")
	}
	for c := 0; c < 8*int(unsafe.Sizeof(set)); c++ {
		if set.IsSet(c) && !f.eng.mayRunOn(c) {
			return fmt.Errorf("CPU %d is not one this process may run on", c)
		}
	}
	f.eng.mu.Lock()
	f.eng.cpus = &set
	f.eng.mu.Unlock()
	return nil
}

// SetShm replaces the shared-memory allocator (before any object exists).
func (f *Fabric) SetShm(s *shm.Allocator) {
	f.Shm.Close()
	s.CheckConn = CheckConn
	f.Shm = s
}

// alloc makes size bytes of the fabric's shared memory for object o; name
// tells its use ("tx", "rx", "cq", "mr"). It is the one place shared
// memory is made: the bytes are charged to o's owner as MemoryBytes, and
// given back when the region closes. It fails with EMFILE or ENFILE when
// no descriptor is left for the memory (or only the daemon's reserve:
// CheckFD), else with ENOMEM.
func (f *Fabric) alloc(o *Object, name string, size int) (*ring.Region, error) {
	if err := f.takeMemory(o, name, size); err != nil {
		return nil, err
	}
	return f.allocTaken(o, name, size)
}

// takeMemory charges size bytes of shared memory for o's name to o's
// owner, as alloc does, for allocTaken to use later.
func (f *Fabric) takeMemory(o *Object, name string, size int) error {
	if err := f.Take(o.Owner, MemoryBytes, int64(size)); err != nil {
		return Errorf(Code(err), "%d bytes of shared memory for %s %s: %w", size, o, name, err)
	}
	return nil
}

// allocTaken is alloc of memory takeMemory charged already: the region
// gives the charge back when it closes, and so does a failure.
func (f *Fabric) allocTaken(o *Object, name string, size int) (*ring.Region, error) {
	label := fmt.Sprintf("fabricfs-%s-%s-%s-%d", o.Dom.Name, o.Kind, name, o.Serial)
	r, err := f.Shm.Alloc(label, size)
	if err != nil {
		f.Give(o.Owner, MemoryBytes, int64(size))
		code := Code(err)
		if code != fi.EMFILE && code != fi.Errno(unix.ENFILE) {
			code = fi.ENOMEM
		}
		return nil, Errorf(code, "shared memory for %s %s: %v", o, name, err)
	}
	r.OnClose(func() { f.Give(o.Owner, MemoryBytes, int64(size)) })
	if r.File == nil { // it keeps no descriptor (shm.Allocator.Alloc)
		return r, nil
	}
	if err := CheckFD(o.Owner, int(r.File.Fd()), fmt.Sprintf("shared memory for %s %s", o, name)); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Providers returns the providers in registration order.
func (f *Fabric) Providers() []Provider { return f.provs }

// Domains returns the domains of provider prov.
func (f *Fabric) Domains(prov string) []*Domain {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.domains[prov][:len(f.domains[prov]):len(f.domains[prov])]
}

// Domain finds one domain.
func (f *Fabric) Domain(prov, name string) (*Domain, bool) {
	for _, d := range f.Domains(prov) {
		if d.Name == name {
			return d, true
		}
	}
	return nil, false
}

// Infos returns every fi_info entry of every provider, best first, as
// the tree offers them (ProviderInfos).
func (f *Fabric) Infos() []*fi.Info {
	var out []*fi.Info
	for _, p := range f.provs {
		out = append(out, f.ProviderInfos(p)...)
	}
	return out
}

// ProviderInfos returns provider p's entries, best first, as the tree
// offers them: FI_ATOMIC only where the entry's domain takes atomics on
// its endpoint type (Domain.offer).
func (f *Fabric) ProviderInfos(p Provider) []*fi.Info {
	doms := f.Domains(p.Name())
	var out []*fi.Info
	for _, in := range p.Infos() {
		var d *Domain
		for _, x := range doms {
			if in.DomainAttr != nil && x.Name == in.DomainAttr.Name {
				d = x
				break
			}
		}
		out = append(out, d.offer(in))
	}
	return out
}

// Close closes every object and domain. Blocked readers return.
func (f *Fabric) Close() {
	f.rescanMu.Lock() // no domain opens from now on
	defer f.rescanMu.Unlock()
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	for _, p := range f.provs {
		for _, d := range f.Domains(p.Name()) {
			d.closeObjects()
			if err := d.prov.Close(); err != nil {
				f.logf("close domain %s: %v", d, err)
			}
		}
	}
	if err := f.Shm.Close(); err != nil {
		f.logf("close shared memory: %v", err)
	}
}

// closeObjects forcibly releases every object of the domain: endpoints
// first, so that the queues they are bound to can go.
func (d *Domain) closeObjects() {
	for _, k := range []Kind{KindEP, KindPEP, KindMR, KindAV, KindCntr, KindCQ, KindEQ} {
		d.mu.Lock()
		var dead []*Object
		for _, o := range d.objs[k] {
			if !o.dead {
				d.forgetLocked(o)
				dead = append(dead, o)
			}
		}
		d.mu.Unlock()
		d.closeAll(dead)
	}
}

func (f *Fabric) logf(format string, a ...any) {
	if f.Logf != nil {
		f.Logf(format, a...)
		return
	}
	slog.Warn(fmt.Sprintf(format, a...))
}
