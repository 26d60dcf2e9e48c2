package core

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// listenBacklog is the most requests waiting for a reader of the listen
// file, and attr/backlog's default; beyond attr/backlog requests are
// still made into endpoints and reported on the EQ.
const listenBacklog = 1024

// PEP is a passive endpoint (fi_passive_ep): it listens, and turns each
// connection request into a new endpoint that the application accepts or
// rejects.
type PEP struct {
	obj      *Object
	accepted *queue[*Object] // endpoints made from requests, for listen readers

	mu    sync.Mutex
	info  *fi.Info
	prov  PassiveEndpoint
	eq    *EQ
	state string // idle, listening, error
	// backlog is attr/backlog, fi_control's FI_BACKLOG ("the connection
	// request backlog for listening endpoints"): at most this many
	// requests wait in the listen file.
	backlog int

	requests atomic.Uint64 // connection requests received (stats)
}

func newPEP(o *Object) (Impl, error) {
	info := bestInfo(o.Dom, fi.EP_MSG)
	if info == nil {
		return nil, Errorf(fi.ENODATA, "domain %s offers no FI_EP_MSG endpoint", o.Dom.Name)
	}
	return &PEP{obj: o, info: info, state: stateIdle, accepted: newQueue[*Object](), backlog: listenBacklog}, nil
}

// BindEQ is fi_pep_bind of an event queue.
func (p *PEP) BindEQ(eq *EQ) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eq != nil {
		return Errorf(fi.EINVAL, "an eq is already bound")
	}
	if p.state != stateIdle {
		return Errorf(fi.EOPBADSTATE, "passive endpoint is %s; bind before listen", stateText(p.state))
	}
	if err := eq.obj.hold(); err != nil {
		return err
	}
	p.eq = eq
	return nil
}

// Listen is fi_listen for uid, the caller of ctx, on addr, or on the
// domain's address with port 0 (a free port) when addr is nil; the
// address must be the domain's and a privileged port the caller's to
// bind (listenAddr).
func (p *PEP) Listen(ctx context.Context, uid uint32, addr *fi.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateIdle {
		return Errorf(fi.EOPBADSTATE, "passive endpoint is %s; it listens once", stateText(p.state))
	}
	if p.eq == nil {
		return Errorf(fi.ENOEQ, "no eq bound; write 'bind eq ID' first")
	}
	a := fi.Addr{}
	switch {
	case addr != nil:
		a = *addr
	case p.info.SrcAddr != nil:
		a = *p.info.SrcAddr
	default:
		return Errorf(fi.EINVAL, "no address to listen on; write 'listen ADDR'")
	}
	a, err := p.obj.Dom.listenAddr(ctx, uid, a)
	if err != nil {
		return err
	}
	if err := p.obj.Dom.defaultAuthKey(p.obj.Owner, p.info); err != nil {
		return err
	}
	prov, err := p.obj.Dom.prov.NewPassiveEndpoint(p.info, pepEvents{p})
	if err != nil {
		return err
	}
	if err := prov.Listen(a); err != nil {
		prov.Close()
		return err
	}
	p.prov, p.state = prov, "listening"
	if trace.On(trace.CM) {
		p.obj.tracef(trace.CM, "listen %s", a)
	}
	return nil
}

// Next waits for the next connection request that nobody has taken and
// returns the endpoint made from it: a read of the listen file.
func (p *PEP) Next(ctx context.Context) (*Object, error) {
	p.mu.Lock()
	listening := p.state == "listening"
	p.mu.Unlock()
	if !listening {
		return nil, Errorf(fi.EOPBADSTATE, "passive endpoint is not listening; write 'listen' first")
	}
	for {
		objs, err := p.accepted.pop(ctx, 1, true)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if ep := o.Impl.(*EP); o.Alive() && ep.untaken() {
				return o, nil
			}
		}
	}
}

// Ready is poll(2) on pep/N/listen: a connection request is pending (or
// the passive endpoint is not listening, so that a read fails at once).
func (p *PEP) Ready() (bool, <-chan struct{}) {
	p.mu.Lock()
	listening := p.state == "listening"
	p.mu.Unlock()
	if !listening {
		return true, nil
	}
	return p.accepted.ready()
}

// untaken reports whether nobody has enabled, accepted or rejected the
// endpoint made from a request.
func (e *EP) untaken() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state == stateIdle
}

// Name is fi_getname: the listening address.
func (p *PEP) Name() (fi.Addr, error) {
	p.mu.Lock()
	prov := p.prov
	p.mu.Unlock()
	if prov == nil {
		return fi.Addr{}, Errorf(fi.EOPBADSTATE, "passive endpoint is not listening")
	}
	return prov.Name()
}

func (p *PEP) Status() Record {
	local := addrText(p.Name())
	p.mu.Lock()
	defer p.mu.Unlock()
	return Record{bare("state", p.state), orDash("eq", objRef(p.eq)), orDash("local", local), num("pending", p.accepted.len())}
}

func (p *PEP) Attrs() []Attr {
	attrs := infoAttrs(&p.mu, func() *fi.Info { return p.info }, func() error {
		if p.state != stateIdle {
			return Errorf(fi.EOPBADSTATE, "passive endpoint is %s; set attributes before listen", stateText(p.state))
		}
		return nil
	})
	// A passive endpoint's one option is read-only: FI_OPT_CM_DATA_SIZE is
	// "the maximum size of the data that may be present as part of a
	// connection request event".
	attrs = append(attrs, optAttrs(&p.mu, func(n string) (uint64, bool) {
		d, ok := p.obj.Dom.prov.(EndpointOptions)
		if !ok {
			return 0, false
		}
		o, ok := FindOption(d.EndpointOptions(p.info.EPAttr.Type, true), n)
		return o.Value, ok
	}, "cm_data_size")...)
	return append(attrs, guarded(&p.mu, "backlog", func() error { return nil },
		func() string { return strconv.Itoa(p.backlog) }, func(s string) error {
			v, err := ParseUint(s)
			if err != nil || v < 1 || v > listenBacklog {
				return Errorf(fi.EINVAL, "bad backlog %q: want 1 to %d", s, listenBacklog)
			}
			p.backlog = int(v)
			return nil
		}))
}

// Links shows the bound EQ.
func (p *PEP) Links() []Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eq == nil {
		return nil
	}
	return []Link{{"eq", p.eq.obj}}
}

func (p *PEP) Close() error {
	p.mu.Lock()
	prov, eq := p.prov, p.eq
	p.prov, p.eq, p.state = nil, nil, stateClosed
	p.mu.Unlock()
	p.accepted.close()
	var err error
	if prov != nil {
		err = prov.Close()
	}
	if eq != nil {
		eq.obj.drop()
	}
	return err
}

type pepEvents struct{ p *PEP }

// ConnReq makes an endpoint for the request, pinned by the passive
// endpoint, reports FI_CONNREQ naming it, and queues it for the listen file.
// The endpoint is the passive endpoint's owner's, but a peer made it: it
// counts in the owner's Objects only from its enable (the user took the
// request), and the provider's connection from then too (NewEndpoint with
// the request). Until then the provider's bound on pending requests
// (MaxPendingReqs per passive endpoint) bounds these endpoints.
func (ev pepEvents) ConnReq(req ConnReq) {
	p := ev.p
	p.requests.Add(1)
	d := p.obj.Dom
	o, err := d.create(KindEP, "", p.obj.Owner, p.obj.Pid, false)
	if err == nil && !p.obj.adoptIfAlive(o) {
		o.Release()
		err = Errorf(fi.ESHUTDOWN, "%s is closed", p.obj)
	}
	if err != nil {
		p.obj.SetErr(WithOp("connection request", err))
		rejectRequest(d, req)
		return
	}
	ep := o.Impl.(*EP)
	p.mu.Lock()
	key := p.info.EPAttr.AuthKey // the provider took the request with it
	p.mu.Unlock()
	ep.mu.Lock()
	ep.req, ep.info = req, req.Info().Clone()
	ep.info.EPAttr.AuthKey, ep.info.EPAttr.AuthKeySize = key, uint64(len(key))
	ep.mu.Unlock()
	o.Release() // the pin alone holds it now
	if trace.On(trace.CM) {
		from := "an unknown address"
		if peer := req.Info().DestAddr; peer != nil {
			from = peer.String()
		}
		p.obj.tracef(trace.CM, "connection request from %s: ep/%s", from, o.ID)
	}
	p.mu.Lock()
	eq := p.eq
	p.mu.Unlock()
	if eq != nil {
		eq.post(EQEvent{Event: fi.CONNREQ, FID: p.obj.Path(), EP: o.ID, Data: req.Data()})
	}
	p.mu.Lock()
	backlog := p.backlog
	p.mu.Unlock()
	if p.accepted.len() < backlog {
		p.accepted.push(o)
	}
}

func (ev pepEvents) Failed(err error) {
	p := ev.p
	p.mu.Lock()
	p.state = stateError
	eq := p.eq
	p.mu.Unlock()
	if trace.On(trace.CM) {
		p.obj.tracef(trace.CM, "listener lost: %v", err)
	}
	p.obj.SetErr(WithOp("listen", err))
	if eq != nil {
		eq.post(EQEvent{FID: p.obj.Path(), Err: Code(err), ProvErrno: provErrno(err)})
	}
}

// rejectRequest refuses a request no endpoint object could be made for.
func rejectRequest(d *Domain, req ConnReq) {
	ep, err := d.prov.NewEndpoint(req.Info(), req, nopEvents{})
	if err != nil {
		return
	}
	ep.Reject(nil)
	ep.Close()
}

type nopEvents struct{}

func (nopEvents) Connected([]byte)     {}
func (nopEvents) Shutdown()            {}
func (nopEvents) Failed(error, []byte) {}
func (nopEvents) Remote(Completion)    {}
func (nopEvents) Region(uint64, uint64, uint64, fi.Caps) ([]byte, func(), error) {
	return nil, nil, Errorf(fi.EINVAL, "no memory on a rejected endpoint")
}
