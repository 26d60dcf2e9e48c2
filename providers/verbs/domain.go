package verbs

import (
	"sync"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// GRHSize is the room a UD receive buffer starts with, for the global
// route header (IBV_WC_GRH).
const GRHSize = 40

// domain is an opened domain of a device, for FI_EP_MSG endpoints (RC)
// or, for the "-dgram" domain, FI_EP_DGRAM ones (UD). Each user of the
// domain has a protection domain of its own (owned): the device lets a
// peer reach memory only through QPs of the memory's protection domain,
// so a peer of one user's endpoint never reaches another user's memory,
// whatever key it names (core.MemoryRegistrar).
type domain struct {
	dev    *device
	name   string
	dgram  bool
	maxMsg int // the longest message an endpoint sends or receives

	eps core.EPCount // endpoints and passive endpoints open

	mu     sync.Mutex
	owners map[uint32]*owned
}

// owned is the protection domain of one user of a domain, and its discard
// region (mem.go).
type owned struct {
	d       *domain
	pd      *ibv.PD
	discard *mapping // where the bytes of too-long messages (and UD GRHs) go
}

var (
	_ core.ProviderDomain  = (*domain)(nil)
	_ core.MemoryRegistrar = (*domain)(nil)
)

func newDomain(dev *device, name string, dgram bool) (*domain, error) {
	d := &domain{dev: dev, name: name, dgram: dgram, maxMsg: int(maxMsgSize(dev.attr)), owners: map[uint32]*owned{}}
	if dgram {
		d.maxMsg = dev.attr.ActiveMTU.Bytes()
	}
	return d, nil
}

// owner is the protection domain of uid, made on first use.
func (d *domain) owner(uid uint32) (*owned, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.owners[uid]; o != nil {
		return o, nil
	}
	pd, err := d.dev.dev.AllocPD()
	if err != nil {
		return nil, ibvError("allocating a protection domain", err)
	}
	o := &owned{d: d, pd: pd}
	if o.discard, err = o.newMapping(GRHSize + d.maxMsg); err != nil {
		pd.Dealloc()
		return nil, err
	}
	d.owners[uid] = o
	return o, nil
}

// NewEndpoint makes an FI_EP_MSG endpoint (from req, to accept or reject
// it) in a device's domain, or an FI_EP_DGRAM one in its -dgram domain.
// EndpointOptions is core.EndpointOptions: FI_EP_MSG endpoints and
// passive endpoints have FI_OPT_CM_DATA_SIZE, the private data the
// connection manager carries; FI_EP_DGRAM endpoints have no options.
func (d *domain) EndpointOptions(t fi.EPType, passive bool) []core.Option {
	if t != fi.EP_MSG {
		return nil
	}
	return []core.Option{{Name: "cm_data_size", Value: MaxPrivateData}}
}

func (d *domain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	if err := d.checkInfo(info); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, core.Errorf(fi.EINVAL, "verbs: endpoint without event handler")
	}
	txSize, rxSize, err := d.queueSizes(info)
	if err != nil {
		return nil, err
	}
	var cr *connReq
	if req != nil {
		var ok bool
		if cr, ok = req.(*connReq); !ok || cr.pep.d.dev != d.dev || d.dgram {
			return nil, core.Errorf(fi.EINVAL, "verbs: connection request of another device or provider")
		}
	}
	o, err := d.owner(core.OwnerOf(ev))
	if err != nil {
		return nil, err
	}
	if err := d.hold(); err != nil {
		return nil, err
	}
	if d.dgram {
		return newUDEndpoint(o, info.Clone(), txSize, rxSize, ev), nil
	}
	e := newRCEndpoint(o, info.Clone(), txSize, rxSize, ev)
	if cr != nil {
		c, err := cr.take()
		if err != nil {
			d.release()
			return nil, err
		}
		e.adopt(c)
	}
	return e, nil
}

// NewPassiveEndpoint makes a passive endpoint of a device's domain.
func (d *domain) NewPassiveEndpoint(info *fi.Info, ev core.PassiveEvents) (core.PassiveEndpoint, error) {
	if d.dgram {
		return nil, core.Errorf(fi.EOPNOTSUPP, "verbs: FI_EP_DGRAM has no passive endpoints")
	}
	if err := d.checkInfo(info); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, core.Errorf(fi.EINVAL, "verbs: passive endpoint without event handler")
	}
	if err := d.hold(); err != nil {
		return nil, err
	}
	return newPassiveEndpoint(d, info.Clone(), ev), nil
}

// Close releases the domain's protection domains. Every endpoint and
// memory region must have been closed.
func (d *domain) Close() error {
	if n := d.eps.Open(); n > 0 {
		return core.Errorf(fi.EBUSY, "verbs: domain %s has %d endpoints open", d.name, n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	for uid, o := range d.owners {
		o.discard.close()
		if e := o.pd.Dealloc(); e != nil && err == nil {
			err = ibvError("closing domain "+d.name, e)
		}
		delete(d.owners, uid)
	}
	return err
}

func (d *domain) hold() error {
	if max := d.dev.attr.MaxQP; !d.eps.Hold(max) {
		return core.Errorf(fi.ENOSPC, "verbs: domain %s has its %d endpoints (ep_cnt)", d.name, max)
	}
	return nil
}

func (d *domain) release() { d.eps.Release() }

// checkInfo accepts the fi_info of an endpoint of the domain's type asking
// only for what the provider implements.
func (d *domain) checkInfo(info *fi.Info) error {
	want, caps := fi.EP_MSG, fi.Caps(msgCaps|layerCaps)
	if d.dgram {
		want, caps = fi.EP_DGRAM, dgramCaps
	}
	switch {
	case info == nil || info.EPAttr == nil:
		return core.Errorf(fi.EINVAL, "verbs: endpoint without fi_info or ep_attr")
	case info.EPAttr.Type != want:
		return core.Errorf(fi.EOPNOTSUPP, "verbs: domain %s makes %v endpoints, not %v", d.name, want, info.EPAttr.Type)
	case info.Caps&^caps != 0:
		return core.Errorf(fi.EOPNOTSUPP, "verbs: capabilities %v not supported", info.Caps&^caps)
	}
	return nil
}

// queueSizes returns the endpoint's tx and rx sizes, the defaults for
// zero, at most what the device's queue pairs take.
func (d *domain) queueSizes(info *fi.Info) (tx, rx int, err error) {
	tx, rx = DefaultTxSize, DefaultRxSize
	if info.TxAttr != nil && info.TxAttr.Size != 0 {
		tx = int(min(info.TxAttr.Size, 1<<31))
	}
	if info.RxAttr != nil && info.RxAttr.Size != 0 {
		rx = int(min(info.RxAttr.Size, 1<<31))
	}
	a := d.dev.attr
	if tx > a.MaxQPWR || rx > a.MaxQPWR || tx+rx > a.MaxCQE {
		return 0, 0, core.Errorf(fi.EINVAL, "verbs: tx_size %d, rx_size %d: at most %d each, %d together", tx, rx, a.MaxQPWR, a.MaxCQE)
	}
	return tx, rx, nil
}
