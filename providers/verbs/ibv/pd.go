package ibv

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
)

// PD is a protection domain (ibv_alloc_pd): regions, QPs, SRQs and
// address handles of one PD work together; a QP reaches only regions of
// its own PD, locally and remotely.
type PD struct {
	dev *Device

	mu    sync.Mutex
	users int // MRs, QPs, SRQs and AHs allocated on it
	dead  bool
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errorf(syscall.EINVAL, "alloc pd: device %s is closed", d.name)
	}
	if d.nobj.pd >= deviceAttr.MaxPD {
		return nil, errorf(syscall.ENOMEM, "alloc pd: %d PDs already", d.nobj.pd)
	}
	d.nobj.pd++
	return &PD{dev: d}, nil
}

// Dealloc frees the protection domain; it fails with EBUSY while objects
// use it.
func (pd *PD) Dealloc() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	switch {
	case pd.dead:
		return errorf(syscall.EINVAL, "dealloc pd: freed already")
	case pd.users > 0:
		return errorf(syscall.EBUSY, "dealloc pd: %d objects use it", pd.users)
	}
	pd.dead = true
	d := pd.dev
	d.mu.Lock()
	d.nobj.pd--
	d.mu.Unlock()
	return nil
}

// use counts one more object on the PD, unless it was freed or its
// device closed.
func (pd *PD) use(what string) error {
	if pd == nil {
		return errorf(syscall.EINVAL, "%s: no PD", what)
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead || pd.dev.isClosed() {
		return errorf(syscall.EINVAL, "%s: PD freed or device closed", what)
	}
	pd.users++
	return nil
}

// useCounted is use for an object the device also counts, in the count
// of its objects that count picks, at most max of them: ENOMEM when it has
// max already ("%d objs already"). The caller counts it down, under d.mu,
// when the object goes. count picks the count only once pd is known to be
// usable: a nil pd (TestNilPD) fails in use, before any field of it is
// touched.
func (pd *PD) useCounted(what string, count func(*objCounts) *int, max int, objs string) error {
	if err := pd.use(what); err != nil {
		return err
	}
	d := pd.dev
	d.mu.Lock()
	n := count(&d.nobj)
	full := *n >= max
	if !full {
		*n++
	}
	d.mu.Unlock()
	if full {
		pd.release()
		return errorf(syscall.ENOMEM, "%s: %d %s already", what, max, objs)
	}
	return nil
}

// release counts one object fewer on the PD.
func (pd *PD) release() {
	pd.mu.Lock()
	pd.users--
	pd.mu.Unlock()
}

// AH is an address handle (ibv_create_ah) for UD sends: the destination's
// device address.
type AH struct {
	pd     *PD
	dest   netip.AddrPort
	tclass uint8 // AHAttr.TrafficClass
	// dead is set by Destroy. An atomic, not a mutex: a mutex would make
	// every SendWR's contents escape to the heap through SendWR.AH.
	dead atomic.Bool
}

// CreateAH creates an address handle. a.Dest must be an address of the
// device's family (IPv4 or IPv6) with a port.
func (pd *PD) CreateAH(a AHAttr) (*AH, error) {
	if pd == nil {
		return nil, errorf(syscall.EINVAL, "create ah: no PD")
	}
	dest, err := pd.dev.checkDest(a.Dest)
	if err != nil {
		return nil, err
	}
	if err := pd.use("create ah"); err != nil {
		return nil, err
	}
	return &AH{pd: pd, dest: dest, tclass: a.TrafficClass}, nil
}

// checkDest checks that a peer's address can be reached from d's socket
// and returns it in the socket's form (IPv4 unmapped).
func (d *Device) checkDest(ap netip.AddrPort) (netip.AddrPort, error) {
	a := ap.Addr().Unmap()
	switch {
	case !a.IsValid() || a.IsUnspecified() || ap.Port() == 0:
		return netip.AddrPort{}, errorf(syscall.EINVAL, "destination %v: no address or port", ap)
	case a.Is4() != d.addr.Addr().Is4():
		return netip.AddrPort{}, errorf(syscall.EINVAL, "destination %v: not of device %s's address family", ap, d.name)
	}
	return netip.AddrPortFrom(a, ap.Port()), nil
}

// Destroy destroys the address handle.
func (ah *AH) Destroy() error {
	if !ah.dead.CompareAndSwap(false, true) {
		return errorf(syscall.EINVAL, "destroy ah: destroyed already")
	}
	ah.pd.release()
	return nil
}

// destination returns the address a UD send through ah goes to, and
// whether ah is usable by a QP of pd.
func (ah *AH) destination(pd *PD) (netip.AddrPort, bool) {
	return ah.dest, !ah.dead.Load() && ah.pd == pd
}
