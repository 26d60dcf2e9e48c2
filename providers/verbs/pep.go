package verbs

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
)

// passiveEndpoint listens on an RC service port of its device: REQs for
// it become connection requests.
type passiveEndpoint struct {
	d    *domain
	info *fi.Info
	ev   core.PassiveEvents

	pending core.PendingReqs[*connReq]

	mu     sync.Mutex
	port   uint16 // 0 until listening
	closed bool
}

var _ core.PassiveEndpoint = (*passiveEndpoint)(nil)

func newPassiveEndpoint(d *domain, info *fi.Info, ev core.PassiveEvents) *passiveEndpoint {
	return &passiveEndpoint{d: d, info: info, ev: ev}
}

// Listen takes the service port of addr (0: a free one) on the device;
// addr's IP, if any, must be the device's.
func (p *passiveEndpoint) Listen(addr fi.Addr) error {
	if err := checkLocal(p.d.dev, addr); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return core.Errorf(fi.EOPBADSTATE, "verbs: listen: passive endpoint is closed")
	case p.port != 0:
		return core.Errorf(fi.EOPBADSTATE, "verbs: listen: already listening on port %d", p.port)
	}
	port, err := p.d.dev.cm.bindRC(addr.IP.Port(), p)
	if err != nil {
		return err
	}
	p.port = port
	return nil
}

// checkLocal accepts a local address of device d: its IP, the
// unspecified address, or none.
func checkLocal(d *device, a fi.Addr) error {
	ip := a.IP.Addr().Unmap().WithZone("")
	if ip.IsValid() && !ip.IsUnspecified() && ip != d.ip {
		return core.Errorf(fi.EADDRNOTAVAIL, "verbs: %v is not the address of device %s (%v)", ip, d.name, d.ip)
	}
	return nil
}

// Name is the device's address and the listening port.
func (p *passiveEndpoint) Name() (fi.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.port == 0 {
		return fi.Addr{}, core.Errorf(fi.EOPBADSTATE, "verbs: passive endpoint is not listening")
	}
	return fi.SockAddr(p.d.dev.addr(p.port)), nil
}

// request is the agent's REQ for the listener: it becomes a connection
// request, unless the listener is closed or has too many (false: the
// agent rejects it).
func (p *passiveEndpoint) request(c *cmConn) bool {
	info := p.info.Clone()
	dest := fi.SockAddr(netip.AddrPortFrom(c.peer, c.req.SrcPort))
	info.DestAddr = &dest
	r := &connReq{pep: p, c: c, info: info, data: c.req.PrivateData}
	if !p.pending.Add(r) {
		return false
	}
	p.ev.ConnReq(r)
	return true
}

// Close stops listening and rejects the requests nobody took.
func (p *passiveEndpoint) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	port := p.port
	p.mu.Unlock()
	a := p.d.dev.cm
	if port != 0 {
		a.unbindRC(port)
	}
	for _, r := range p.pending.Close() {
		a.reject(r.c, cm.RejConsumer, nil)
	}
	p.d.release()
	return nil
}

// connReq is a connection request waiting for an endpoint to accept or
// reject it.
type connReq struct {
	pep  *passiveEndpoint
	c    *cmConn
	info *fi.Info
	data []byte
}

var _ core.ConnReq = (*connReq)(nil)

// Info is the listener's fi_info with DestAddr the requester's address:
// its device's IP and its service port.
func (r *connReq) Info() *fi.Info { return r.info.Clone() }

// Data is the request's private data.
func (r *connReq) Data() []byte { return slices.Clone(r.data) }

// take hands the request to a new endpoint, once.
func (r *connReq) take() (*cmConn, error) {
	if !r.pep.pending.Take(r) {
		return nil, core.Errorf(fi.EINVAL, "verbs: connection request already taken, or its passive endpoint closed")
	}
	return r.c, nil
}
