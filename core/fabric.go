package core

import (
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/shm"
)

// Fabric is the root of the model: the providers, their domains, and the
// per-user limits. It is what the tree at /fabric shows.
type Fabric struct {
	provs   []Provider
	domains map[string][]*Domain // by provider name, in the provider's order

	// Logf logs daemon-side events; nil logs with the log package.
	Logf func(format string, a ...any)
	// Shm allocates shared memory for rings and regions. New sets it up
	// for passthrough as root and for symlinks otherwise; replace it
	// before creating objects to choose.
	Shm *shm.Allocator

	eng engine

	mu      sync.Mutex
	acct    accounts // what each uid holds (limits.go)
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
	f.Shm = mem
	for _, p := range provs {
		seen := map[string]bool{}
		for _, in := range p.Infos() {
			name := in.DomainAttr.Name
			if seen[name] {
				continue
			}
			seen[name] = true
			pd, err := p.OpenDomain(name)
			if err != nil {
				f.Close()
				return nil, WithOp("fi_domain "+p.Name()+"/"+name, err)
			}
			d := &Domain{Prov: p, Name: name, prov: pd, fab: f, bySerial: map[uint64]*Object{}}
			for k := range d.objs {
				d.objs[k] = map[string]*Object{}
			}
			f.domains[p.Name()] = append(f.domains[p.Name()], d)
		}
	}
	return f, nil
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
	f.Shm = s
}

// alloc makes size bytes of the fabric's shared memory for object o; name
// tells its use ("tx", "rx", "cq", "mr"). It is the one place shared
// memory is made: the bytes are charged to o's owner as MemoryBytes, and
// given back when the region closes.
func (f *Fabric) alloc(o *Object, name string, size int) (*ring.Region, error) {
	if err := f.Take(o.Owner, MemoryBytes, int64(size)); err != nil {
		return nil, Errorf(Code(err), "%d bytes of shared memory for %s %s: %w", size, o, name, err)
	}
	label := fmt.Sprintf("fabricfs-%s-%s-%s-%d", o.Dom.Name, o.Kind, name, o.Serial)
	r, err := f.Shm.Alloc(label, size)
	if err != nil {
		f.Give(o.Owner, MemoryBytes, int64(size))
		return nil, Errorf(fi.ENOMEM, "shared memory for %s %s: %v", o, name, err)
	}
	r.OnClose(func() { f.Give(o.Owner, MemoryBytes, int64(size)) })
	return r, nil
}

// Providers returns the providers in registration order.
func (f *Fabric) Providers() []Provider { return f.provs }

// Domains returns the domains of provider prov.
func (f *Fabric) Domains(prov string) []*Domain { return f.domains[prov] }

// Domain finds one domain.
func (f *Fabric) Domain(prov, name string) (*Domain, bool) {
	for _, d := range f.domains[prov] {
		if d.Name == name {
			return d, true
		}
	}
	return nil, false
}

// Infos returns every fi_info entry of every provider, best first.
func (f *Fabric) Infos() []*fi.Info {
	var out []*fi.Info
	for _, p := range f.provs {
		out = append(out, p.Infos()...)
	}
	return out
}

// Close closes every object and domain. Blocked readers return.
func (f *Fabric) Close() {
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	for _, p := range f.provs {
		for _, d := range f.domains[p.Name()] {
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
	log.Printf(format, a...)
}
