package core

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// Endpoint states, as shown in status.
const (
	stateIdle       = "idle"       // created, attributes still writable
	stateEnabled    = "enabled"    // fi_enable done
	stateConnecting = "connecting" // fi_connect or fi_accept sent, waiting for FI_CONNECTED
	stateConnected  = "connected"
	stateShutdown   = "shutdown" // fi_shutdown, or the peer shut down
	stateRejected   = "rejected"
	stateError      = "error"
	stateClosed     = "closed"
)

// EP is an active endpoint (fi_endpoint): its fi_info, bindings and state,
// over a provider's Endpoint.
type EP struct {
	obj *Object

	mu    sync.Mutex
	info  *fi.Info
	prov  Endpoint // made at enable, or when rejecting a request
	req   ConnReq  // the connection request it was made from, if any
	state string
	txcq  *CQ
	rxcq  *CQ
	txSel bool // FI_SELECTIVE_COMPLETION on the transmit binding
	rxSel bool
	eq    *EQ
	av    *AV
	srx   *SRX              // the shared receive context it takes receives from, if any
	stx   *STX              // its shared transmit context, if any
	cntrs [numClasses]*Cntr // bound counters, by class
	opts  map[string]uint64
	// cancelOnClose is attr/cancel_on_close: the operations outstanding
	// at close complete with FI_ECANCELED on the bound CQs and counters,
	// where fi_close(3) drops them silently.
	cancelOnClose bool
	// engineCPU is attr/engine_cpu: the CPU whose engine group serves the
	// rings (a group of the endpoints placed there, pinned to it); -1: a
	// shared group, on the engine's CPUs.
	engineCPU int
	inflight  opList // posted and not finally completed
	txBusy    int    // transmits among them: an FI_FENCE request waits for 0
	// cancelling counts the Cancel calls under way: see opPool.
	cancelling atomic.Int32
	rings      *epRings      // after enable
	buffered   *bufferedArea // FI_BUFFERED_RECV: where reports show bytes (epbuffered.go); after enable
	ringMu     sync.Mutex    // serialises the engine's consume with closing the rings

	dataMu     readerLock // serialises readers of the data file
	pending    []byte     // the rest of a message a data-file read did not take
	pendingErr error      // the error a read returns once pending is taken: a truncation
	held       *heldRecv  // a receive an interrupted read or a poll left posted, for the next read
	dest       uint64     // FI_EP_RDM, FI_EP_DGRAM: the fi_addr data-file writes go to (ctl dest); ADDR_UNSPEC: none
	shell      dataParams // how the data file sends and receives (ctl tag, src, cqdata, rxbuf)

	// scalable is attr/scalable (fi_scalable_ep): the endpoint moves no
	// data itself; ctxs are its transmit and receive contexts by
	// direction (ctxTx, ctxRx) and index, nil where none (sep.go).
	scalable bool
	ctxs     [2][]*EP
	// sep is the scalable endpoint the endpoint is a context of, if it is
	// one: its ctxDir context number ctxIdx.
	sep    *EP
	ctxDir int
	ctxIdx int
	// parent is the endpoint the endpoint is an alias of (fi_ep_alias),
	// if it is one.
	parent *EP

	// ops are its stats (stats.go): atomic, counted without mu, in an
	// allocation of their own, so that their cache lines hold no field
	// of the endpoint that other threads use.
	ops       *opCounters
	provStats []Count // the provider endpoint's last counts, kept at Close
	// authKey is the authorization key the provider endpoint was made
	// with, set before it exists: the key peers' operations arriving on
	// it have (Region).
	authKey []byte
}

func newEP(o *Object) (Impl, error) {
	info := bestInfo(o.Dom, fi.EP_MSG)
	if info == nil {
		info = bestInfo(o.Dom, fi.EP_UNSPEC) // a domain without FI_EP_MSG (verbs's -dgram)
	}
	if info == nil {
		return nil, Errorf(fi.ENODATA, "domain %s offers no endpoint", o.Dom.Name)
	}
	return &EP{obj: o, info: info, state: stateIdle, opts: map[string]uint64{}, engineCPU: -1,
		dest: uint64(fi.ADDR_UNSPEC), shell: defaultDataParams, ops: new(opCounters)}, nil
}

// bestInfo returns a copy of the domain's first entry of type t, or of its
// first entry when t is fi.EP_UNSPEC or none has that type, with the
// domain's traffic class (domainTClass) and without FI_BUFFERED_RECV: an
// endpoint has buffered receives only when its fi_info asks for them
// (ep/N/info), as fi_getinfo gives the mode only to hints that have it.
func bestInfo(d *Domain, t fi.EPType) *fi.Info {
	infos := d.Infos()
	var best *fi.Info
	for _, in := range infos {
		if in.EPAttr != nil && in.EPAttr.Type == t {
			best = in.Clone()
			break
		}
	}
	if best == nil && len(infos) > 0 && t == fi.EP_UNSPEC {
		best = infos[0].Clone()
	}
	if best != nil {
		best.Mode &^= fi.BUFFERED_RECV
		domainTClass(best)
		// FI_SOURCE_ERR and FI_AV_USER_ID change what completions say:
		// an endpoint has them when it asks (attr/caps), as fi_getinfo
		// returns them.
		best.Caps &^= fi.SOURCE_ERR | fi.AV_USER_ID
		if best.RxAttr != nil {
			best.RxAttr.Caps &^= fi.SOURCE_ERR
		}
	}
	return best
}

// domainTClass gives in, an endpoint's fi_info without a traffic class,
// its domain's: "If tclass is unset or set to FI_TC_UNSPEC, the endpoint
// will use the default traffic class associated with the domain."
// (fi_endpoint(3)).
func domainTClass(in *fi.Info) {
	if in.TxAttr != nil && in.TxAttr.TClass == fi.TC_UNSPEC && in.DomainAttr != nil {
		in.TxAttr.TClass = in.DomainAttr.TClass
	}
}

// Info returns a copy of the endpoint's fi_info.
func (e *EP) Info() *fi.Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info.Clone()
}

// BindCQ is fi_ep_bind of a CQ with flags fi.SEND, fi.RECV and
// fi.SELECTIVE_COMPLETION: "FI_SELECTIVE_COMPLETION ... only operations
// that specify the FI_COMPLETION flag ... will generate a completion".
func (e *EP) BindCQ(cq *CQ, send, recv, selective bool) error {
	if !send && !recv {
		return Errorf(fi.EINVAL, "bind cq needs send, recv or both")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if (send && e.txcq != nil) || (recv && e.rxcq != nil) {
		return Errorf(fi.EINVAL, "a cq is already bound for %s", map[bool]string{true: "send", false: "recv"}[send && e.txcq != nil])
	}
	if send {
		if err := cq.bind(); err != nil {
			return err
		}
		e.txcq, e.txSel = cq, selective
	}
	if recv {
		if err := cq.bind(); err != nil {
			return err
		}
		e.rxcq, e.rxSel = cq, selective
	}
	return nil
}

// BindEQ is fi_ep_bind of an event queue.
func (e *EP) BindEQ(eq *EQ) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.eq != nil {
		return Errorf(fi.EINVAL, "an eq is already bound")
	}
	if err := eq.obj.hold(); err != nil {
		return err
	}
	e.eq = eq
	return nil
}

// BindAV is fi_ep_bind of an address vector.
func (e *EP) BindAV(av *AV) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	if e.av != nil {
		return Errorf(fi.EINVAL, "an av is already bound")
	}
	if err := av.obj.hold(); err != nil {
		return err
	}
	e.av = av
	return nil
}

// SetName is fi_setname before enable: the endpoint's source address
// (fi_cm(3): "The fi_setname call may be used to modify or assign the
// address of the local endpoint. It is conceptually similar to the socket
// bind operation."), the fi_info src_addr its provider takes when enabled:
// an FI_EP_RDM or FI_EP_DGRAM endpoint listens on it, an FI_EP_MSG
// endpoint connects from it. It must be an address the caller may listen
// on in the domain (listenAddr: the domain's address, a privileged port
// only for those who may bind it).
func (e *EP) SetName(ctx context.Context, uid uint32, a fi.Addr) error {
	a, err := e.obj.Dom.listenAddr(ctx, uid, a)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("setname"); err != nil {
		return err
	}
	e.info.SrcAddr = &a
	return nil
}

// liveLocked fails for a closed endpoint.
func (e *EP) liveLocked() error {
	if e.state == stateClosed {
		return gone(e.obj)
	}
	return nil
}

func (e *EP) idleLocked(what string) error {
	if e.state == stateClosed {
		return gone(e.obj)
	}
	if e.state != stateIdle {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; %s must come before enable", stateText(e.state), what)
	}
	return nil
}

// setStateLocked moves the endpoint to state s, unless it is closed: a
// provider's event that arrives while Close runs does not bring it back.
func (e *EP) setStateLocked(s string) {
	if e.state != stateClosed {
		e.state = s
	}
}

// connectionlessLocked reports whether the endpoint is connectionless
// (FI_EP_RDM, FI_EP_DGRAM): it sends to addresses of its AV and has no
// connection of its own.
func (e *EP) connectionlessLocked() bool {
	t := e.info.EPAttr.Type
	return t == fi.EP_RDM || t == fi.EP_DGRAM
}

// setType is a write of attr/type before enable: the endpoint takes the
// domain's best fi_info of that type, replacing every attribute (so write
// the type first, then the others).
func (e *EP) setType(in *fi.Info, s string) error {
	t, err := fi.Parse[fi.EPType](s)
	if err != nil {
		return Errorf(fi.EINVAL, "%w", err)
	}
	if e.req != nil {
		return Errorf(fi.EINVAL, "an endpoint made from a connection request is FI_EP_MSG")
	}
	best := bestInfo(e.obj.Dom, t)
	if best == nil || t == fi.EP_UNSPEC {
		return Errorf(fi.ENODATA, "domain %s offers no %v endpoint", e.obj.Dom.Name, t)
	}
	keepAuthKey(best, in)
	*in = *best
	e.shell = defaultDataParams // they depend on the capabilities
	return nil
}

// Enable is fi_enable. A connection-oriented endpoint needs an EQ, a
// connectionless one an AV (FI_ENOEQ, FI_ENOAV); both a CQ for each
// direction their capabilities use (FI_ENOCQ). The rings are allocated
// before the provider endpoint is enabled, so that an enable the memory
// quota refuses leaves nothing enabled and can be retried. A shared
// receive context bound to the endpoint is enabled with it, and gets
// core's receives on it (SRX) once it is.
//
// An endpoint is enabled once: one that was disabled, by a shutdown or a
// critical error, is not re-enabled ("The ability to transition back into
// an enabled state is provider specific"; neither provider can), and
// fi_enable then fails with FI_EOPBADSTATE.
func (e *EP) Enable() error {
	e.mu.Lock()
	var srx *SRX
	err := gone(e.obj)
	switch {
	case e.state == stateClosed:
	case e.state != stateIdle:
		err = Errorf(fi.EOPBADSTATE, "endpoint is %s; it was enabled already and is not enabled again", stateText(e.state))
	default:
		srx, err = e.enableIdleLocked()
	}
	e.mu.Unlock()
	e.attach(srx)
	return err
}

// attach gives the shared receive context an endpoint's enable returned
// the endpoint's receives, without e.mu held.
func (e *EP) attach(srx *SRX) {
	if srx != nil {
		srx.attach(e)
	}
}

// enableIdleLocked enables the idle endpoint, after checking its
// bindings, and returns its shared receive context, if any, for attach.
func (e *EP) enableIdleLocked() (*SRX, error) {
	if e.scalable || e.sep != nil {
		if err := e.enableScalableLocked(); err != nil {
			return nil, err
		}
		e.state = stateEnabled
		return nil, nil
	}
	if e.info.EPAttr.Type == fi.EP_MSG && e.eq == nil {
		return nil, Errorf(fi.ENOEQ, "no eq bound; write 'bind eq ID' first")
	}
	if e.connectionlessLocked() && e.av == nil {
		return nil, Errorf(fi.ENOAV, "no av bound; write 'bind av ID' first")
	}
	caps := e.info.Caps
	if caps&(fi.MSG|fi.TAGGED) != 0 && caps&fi.RECV != 0 && e.rxcq == nil {
		return nil, Errorf(fi.ENOCQ, "no cq bound for recv; write 'bind cq ID recv' first")
	}
	if caps&(fi.MSG|fi.TAGGED) != 0 && caps&fi.SEND != 0 && e.txcq == nil {
		return nil, Errorf(fi.ENOCQ, "no cq bound for send; write 'bind cq ID send' first")
	}
	if e.srx != nil {
		e.srx.mu.Lock()
		err := e.srx.enableLocked()
		e.srx.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	if err := e.obj.charge(); err != nil { // an endpoint made from a request
		return nil, err
	}
	if err := e.enableLocked(); err != nil {
		e.obj.uncharge()
		return nil, err
	}
	e.state = stateEnabled
	return e.srx, nil
}

// enableLocked makes the rings first (the memory quota may refuse them),
// then enables the provider endpoint, then hands the rings to the engine.
func (e *EP) enableLocked() error {
	rs, err := e.newRingsLocked()
	if err != nil {
		return err
	}
	var b *bufferedArea // kept from an earlier enable, if any
	if e.info.Mode&fi.BUFFERED_RECV != 0 && e.buffered == nil {
		if b, err = newBufferedArea(e.obj, e.optLocked("buffered_limit")); err != nil {
			rs.free(e.obj.Dom.fab, e.obj.Owner)
			return err
		}
	}
	if err = e.makeProvLocked(); err == nil {
		err = e.prov.Enable()
	}
	if err != nil {
		rs.free(e.obj.Dom.fab, e.obj.Owner)
		if b != nil {
			b.close()
		}
		return err
	}
	if b != nil {
		e.buffered = b // the provider's reports wait for e.mu, held until then
	}
	e.startRingsLocked(rs)
	return nil
}

func (e *EP) makeProvLocked() error {
	if e.prov != nil {
		return nil
	}
	if e.req == nil {
		if err := e.obj.Dom.defaultAuthKey(e.obj.Owner, e.info); err != nil {
			return err
		}
	}
	e.authKey = e.info.EPAttr.AuthKey
	p, err := e.obj.Dom.prov.NewEndpoint(e.info, e.req, epEvents{e})
	if err != nil {
		return err
	}
	if o, ok := p.(Options); ok {
		for name, value := range e.opts {
			if err := o.SetOpt(name, value); err != nil {
				p.Close()
				return err
			}
		}
	}
	e.prov = p
	return nil
}

// Connect is fi_connect; FI_CONNECTED or an error event follows on the EQ.
func (e *EP) Connect(addr fi.Addr, data []byte) error {
	srx, err := e.connect(addr, data)
	e.attach(srx)
	return err
}

func (e *EP) connect(addr fi.Addr, data []byte) (srx *SRX, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.connectionlessLocked() {
		return nil, Errorf(fi.EOPBADSTATE, "connect is for FI_EP_MSG endpoints; a connectionless endpoint sends to the addresses of its av")
	}
	if e.req != nil {
		return nil, Errorf(fi.EOPBADSTATE, "endpoint was made from a connection request; accept or reject it")
	}
	if srx, err = e.implicitEnableLocked(); err != nil {
		return srx, err
	}
	if e.state != stateEnabled {
		return srx, Errorf(fi.EOPBADSTATE, "endpoint is %s; connect needs an endpoint not connected yet", stateText(e.state))
	}
	if err := e.prov.Connect(addr, data); err != nil {
		return srx, err
	}
	e.state = stateConnecting
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "connect %s", addr)
	}
	return srx, nil
}

// implicitEnableLocked enables an idle endpoint for connect and accept:
// "Calling connect or accept on an endpoint will implicitly enable an
// endpoint if it has not already been enabled."
func (e *EP) implicitEnableLocked() (*SRX, error) {
	if e.state != stateIdle {
		return nil, nil
	}
	return e.enableIdleLocked()
}

// Accept is fi_accept on an endpoint made from a connection request.
func (e *EP) Accept(data []byte) error {
	srx, err := e.accept(data)
	e.attach(srx)
	return err
}

func (e *EP) accept(data []byte) (srx *SRX, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.req == nil {
		return nil, Errorf(fi.EOPBADSTATE, "endpoint was not made from a connection request; read a pep's listen file for one")
	}
	if srx, err = e.implicitEnableLocked(); err != nil {
		return srx, err
	}
	if e.state != stateEnabled {
		return srx, Errorf(fi.EOPBADSTATE, "endpoint is %s; only a pending request can be accepted", stateText(e.state))
	}
	if err := e.prov.Accept(data); err != nil {
		return srx, err
	}
	e.state = stateConnecting
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "accept")
	}
	return srx, nil
}

// Reject is fi_reject of the connection request the endpoint was made from.
func (e *EP) Reject(data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.req == nil {
		return Errorf(fi.EOPBADSTATE, "endpoint was not made from a connection request")
	}
	if e.state != stateIdle && e.state != stateEnabled {
		return Errorf(fi.EOPBADSTATE, "endpoint is %s; only a pending request can be rejected", stateText(e.state))
	}
	if err := e.makeProvLocked(); err != nil {
		return err
	}
	if err := e.prov.Reject(data); err != nil {
		return err
	}
	e.state = stateRejected
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "reject")
	}
	return nil
}

// Shutdown is fi_shutdown.
//
// The provider is called without e.mu held: it may complete operations
// before Shutdown returns (verbs flushes the posted ones as its QP goes to
// the error state), and their completions take e.mu.
func (e *EP) Shutdown() error {
	e.mu.Lock()
	if e.connectionlessLocked() {
		e.mu.Unlock()
		return Errorf(fi.EOPBADSTATE, "shutdown is for FI_EP_MSG endpoints; a connectionless endpoint has no connection of its own")
	}
	if st := e.state; st != stateConnected && st != stateConnecting {
		e.mu.Unlock()
		return Errorf(fi.ENOTCONN, "endpoint is %s, not connected", stateText(st))
	}
	prov := e.prov
	e.mu.Unlock()
	if err := prov.Shutdown(); err != nil {
		return err
	}
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "shutdown")
	}
	e.mu.Lock()
	if e.state == stateConnected || e.state == stateConnecting {
		e.state = stateShutdown
	}
	e.mu.Unlock()
	return nil
}

// SetOpt is fi_setopt at level FI_OPT_ENDPOINT.
func (e *EP) SetOpt(name string, value uint64) error {
	n := optName(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := FindOption(e.optionsLocked(), n)
	switch {
	case !ok:
		return Errorf(fi.ENOPROTOOPT, "%s endpoints of %s have no option %q", e.info.EPAttr.Type, e.obj.Dom.Name, name)
	case o.Max == 0:
		return Errorf(fi.ENOPROTOOPT, "option %s is read-only (fi_getopt only)", n)
	case o.BeforeEnable && e.state != stateIdle:
		return Errorf(fi.EOPBADSTATE, "option %s is set before enable; the endpoint is %s", n, stateText(e.state))
	case value == math.MaxUint64:
		value = o.Max // "SIZE_MAX will set the threshold to the maximum supported by the provider"
	case value > o.Max:
		return Errorf(fi.EMSGSIZE, "option %s: %d is more than the provider supports (%d)", n, value, o.Max)
	}
	// FI_OPT_BUFFERED_MIN is at most FI_OPT_BUFFERED_LIMIT: the smallest
	// buffered message reported cannot exceed the largest.
	if lo, hi := e.optLocked("buffered_min"), e.optLocked("buffered_limit"); n == "buffered_min" && value > hi ||
		n == "buffered_limit" && value < lo {
		return Errorf(fi.EINVAL, "option %s %d: buffered_min (%d) must not exceed buffered_limit (%d)", n, value, lo, hi)
	}
	if o, ok := e.prov.(Options); ok {
		if err := o.SetOpt(n, value); err != nil {
			return err
		}
	}
	e.opts[n] = value
	return nil
}

// optName is an option's name as Option has it: "FI_OPT_CM_DATA_SIZE" and
// "cm_data_size" are "cm_data_size".
func optName(s string) string {
	return strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "FI_OPT_"))
}

// optionsLocked lists the endpoint's options for its type now.
func (e *EP) optionsLocked() []Option {
	if d, ok := e.obj.Dom.prov.(EndpointOptions); ok {
		return d.EndpointOptions(e.info.EPAttr.Type, false)
	}
	return nil
}

// optLocked is fi_getopt of option n: its value as set, else the
// provider's, else 0 for an option the endpoint does not have.
func (e *EP) optLocked(n string) uint64 {
	if v, ok := e.opts[n]; ok {
		return v
	}
	o, _ := FindOption(e.optionsLocked(), n)
	return o.Value
}

// optAttrs are the attr/opt_NAME files of an endpoint's (or passive
// endpoint's) options called names: each one's value, or "-" where the
// endpoint does not have it (fi_getopt fails with FI_ENOPROTOOPT).
func optAttrs(mu *sync.Mutex, get func(n string) (uint64, bool), names ...string) []Attr {
	var attrs []Attr
	for _, n := range names {
		attrs = append(attrs, Attr{Name: "opt_" + n, Get: func() string {
			mu.Lock()
			defer mu.Unlock()
			if v, ok := get(n); ok {
				return strconv.FormatUint(v, 10)
			}
			return "-"
		}})
	}
	return attrs
}

// Name is fi_getname.
func (e *EP) Name() (fi.Addr, error) {
	e.mu.Lock()
	p := e.prov
	e.mu.Unlock()
	if p == nil {
		return fi.Addr{}, Errorf(fi.EOPBADSTATE, "endpoint has no address before enable")
	}
	return p.Name()
}

// Peer is fi_getpeer.
func (e *EP) Peer() (fi.Addr, error) {
	e.mu.Lock()
	p := e.prov
	e.mu.Unlock()
	if p == nil {
		return fi.Addr{}, Errorf(fi.ENOTCONN, "endpoint is not connected")
	}
	return p.Peer()
}

// addrText is an address for a status, "" (shown "-") when there is none.
func addrText(a fi.Addr, err error) string {
	if err != nil {
		return ""
	}
	return a.String()
}

// Status is `ep/N/status`: "TYPE STATE cq=TX/RX eq=ID av=ID cntr=... ops=N
// local=ADDR remote=ADDR", then the data file's parameters that are set.
func (e *EP) Status() Record {
	local, remote := addrText(e.Name()), addrText(e.Peer())
	e.mu.Lock()
	defer e.mu.Unlock()
	typ := strings.ToLower(strings.TrimPrefix(e.info.EPAttr.Type.String(), "FI_EP_"))
	state := e.state
	if e.req != nil && state == stateIdle {
		state = "connreq"
	}
	if e.connectionlessLocked() && e.dest != uint64(fi.ADDR_UNSPEC) {
		remote = fmt.Sprintf("fi_addr:%d", e.dest)
	}
	r := Record{
		bare("type", typ),
		bare("state", state),
		{Key: "cq", JSON: Record{orDash("send", objRef(e.txcq)), orDash("recv", objRef(e.rxcq))}, Text: objID(e.txcq) + "/" + objID(e.rxcq)},
		orDash("eq", objRef(e.eq)),
		orDash("av", objRef(e.av)),
		e.cntrFieldLocked(),
		num("ops", e.inflight.n),
		orDash("local", local),
		orDash("remote", remote),
	}
	return append(r, e.shell.fields()...)
}

// objID is the id of a bound object, or "-".
func objID(x interface{ object() *Object }) string {
	if id := objRef(x); id != "" {
		return id
	}
	return "-"
}

// objRef is the id of a bound object, or "".
func objRef(x interface{ object() *Object }) string {
	if o := x.object(); o != nil {
		return o.ID
	}
	return ""
}

func (c *CQ) object() *Object {
	if c == nil {
		return nil
	}
	return c.obj
}

func (e *EQ) object() *Object {
	if e == nil {
		return nil
	}
	return e.obj
}

func (a *AV) object() *Object {
	if a == nil {
		return nil
	}
	return a.obj
}

// Links shows the bindings: txcq, rxcq, eq, av, cntr_send, cntr_recv...
func (e *EP) Links() []Link {
	e.mu.Lock()
	defer e.mu.Unlock()
	var l []Link
	if e.txcq != nil {
		l = append(l, Link{"txcq", e.txcq.obj})
	}
	if e.rxcq != nil {
		l = append(l, Link{"rxcq", e.rxcq.obj})
	}
	if e.eq != nil {
		l = append(l, Link{"eq", e.eq.obj})
	}
	if e.av != nil {
		l = append(l, Link{"av", e.av.obj})
	}
	if e.srx != nil {
		l = append(l, Link{"srx", e.srx.obj})
	}
	if e.stx != nil {
		l = append(l, Link{"stx", e.stx.obj})
	}
	if e.sep != nil {
		l = append(l, Link{"sep", e.sep.obj})
	}
	if e.parent != nil {
		l = append(l, Link{"alias", e.parent.obj})
	}
	for i, c := range e.cntrs {
		if c != nil {
			l = append(l, Link{"cntr_" + classes[i].name, c.obj})
		}
	}
	return l
}

func (e *EP) Attrs() []Attr {
	attrs := infoAttrs(&e.mu, func() *fi.Info { return e.info }, func() error { return e.idleLocked("setting attributes") })
	for i := range attrs {
		switch attrs[i].Name {
		case "type":
			attrs[i] = guarded(&e.mu, "type", func() error { return e.idleLocked("setting the type") },
				func() string { return e.info.EPAttr.Type.String() }, func(s string) error { return e.setType(e.info, s) })
		case "tx_ctx_cnt":
			attrs[i].Set = guarded(&e.mu, "", func() error { return e.idleLocked("setting tx_ctx_cnt") }, nil,
				func(s string) error { return e.setCtxCnt(ctxTx, s) }).Set
		case "rx_ctx_cnt":
			attrs[i].Set = guarded(&e.mu, "", func() error { return e.idleLocked("setting rx_ctx_cnt") }, nil,
				func(s string) error { return e.setCtxCnt(ctxRx, s) }).Set
		case "tx_op_flags", "rx_op_flags":
			// fi_control FI_SETOPSFLAG: "Used to change the data
			// transfer operation flags associated with an endpoint",
			// enabled or not; they are the defaults of the data file
			// and the ctl verbs (a ring's requests carry their own).
			set := infoFieldSet(attrs[i].Name)
			attrs[i].Set = guarded(&e.mu, "", func() error { return e.liveLocked() }, nil,
				func(s string) error { return set(e.info, s) }).Set
		case "auth_key":
			// An endpoint made from a connection request has the key its
			// passive endpoint took the request with.
			attrs[i].Set = guarded(&e.mu, "", func() error {
				if e.req != nil {
					return Errorf(fi.EINVAL, "an endpoint made from a connection request has its passive endpoint's authorization key")
				}
				return e.idleLocked("setting auth_key")
			}, nil, func(s string) error { return setEPAuthKey(e.info, s) }).Set
		case "addr_format":
			attrs[i] = e.choosableAttr(Attr{Name: "addr_format", Get: e.addrFormat})
		default:
			attrs[i] = e.choosableAttr(attrs[i])
		}
	}
	attrs = append(attrs, Attr{Name: "mapping", Get: func() string { return e.obj.Dom.fab.Shm.Mode }},
		Attr{Name: "desc", Get: func() string { return fmt.Sprintf("%#x", e.obj.Serial) }},
		guarded(&e.mu, "cancel_on_close", func() error { return nil },
			func() string { return strconv.FormatBool(e.cancelOnClose) }, func(s string) error {
				v, err := strconv.ParseBool(strings.TrimSpace(s))
				if err != nil {
					return Errorf(fi.EINVAL, "bad cancel_on_close %q: want true or false", strings.TrimSpace(s))
				}
				e.cancelOnClose = v
				return nil
			}),
		guarded(&e.mu, "scalable", func() error { return e.idleLocked("setting scalable") },
			func() string { return strconv.FormatBool(e.scalable) }, e.setScalable),
		guarded(&e.mu, "context", nil, e.ctxAttrLocked, nil),
		Attr{Name: "tx_size_left", Get: func() string { return e.sizeLeft(false) }},
		Attr{Name: "rx_size_left", Get: func() string { return e.sizeLeft(true) }},
		guarded(&e.mu, "engine_cpu", func() error { return e.idleLocked("setting engine_cpu") },
			func() string { return strconv.Itoa(e.engineCPU) }, e.setEngineCPU))
	return append(attrs, optAttrs(&e.mu, func(n string) (uint64, bool) {
		if _, ok := FindOption(e.optionsLocked(), n); !ok {
			return 0, false
		}
		return e.optLocked(n), true
	}, "min_multi_recv", "cm_data_size", "buffered_min", "buffered_limit")...)
}

// setEngineCPU is a write of attr/engine_cpu before enable: -1, or a CPU
// this process may run on. Called with e.mu held.
func (e *EP) setEngineCPU(s string) error {
	s = strings.TrimSpace(s)
	if s == "-1" {
		e.engineCPU = -1
		return nil
	}
	v, err := ParseUint(s)
	if err != nil || v > 1<<20 {
		return Errorf(fi.EINVAL, "bad engine_cpu %q: want -1 or a CPU number", s)
	}
	cpu := int(v)
	if !e.obj.Dom.fab.eng.mayRunOn(cpu) {
		return Errorf(fi.EINVAL, "CPU %d is not one this daemon may run on", cpu)
	}
	e.engineCPU = cpu
	return nil
}

// Close is fi_close. It first marks the endpoint closed, so that nothing
// (an enable, a bind, a connect) acquires anything from then on; then the
// engine stops serving the rings, the provider endpoint closes
// (completing what was outstanding) or, for a connection request nobody
// accepted or rejected, the request is rejected; then the endpoint forgets
// the memory regions its requests named (each operation holds the memory
// it uses until it completes) and its bindings are released.
func (e *EP) Close() error {
	e.mu.Lock()
	e.state = stateClosed
	p, req, rs := e.prov, e.req, e.rings
	e.mu.Unlock()
	e.stopRings(rs)
	var err error
	switch {
	case e.sep != nil || e.parent != nil:
		// The provider endpoint is the scalable endpoint's or the
		// parent's: operations under way may outlive this call, each
		// holding the memory of its regions until it completes.
		e.closeShared(p)
	case p != nil:
		e.keepProvStats(p)
		err = p.Close()
	case req != nil:
		rejectRequest(e.obj.Dom, req)
	}
	e.releaseRegions(rs)
	e.mu.Lock()
	if e.buffered != nil {
		e.buffered.close() // the provider endpoint reports no more
	}
	txcq, rxcq, eq, av, srx, stx, cntrs := e.txcq, e.rxcq, e.eq, e.av, e.srx, e.stx, e.cntrs
	e.txcq, e.rxcq, e.eq, e.av, e.srx, e.stx, e.cntrs = nil, nil, nil, nil, nil, nil, [numClasses]*Cntr{}
	e.mu.Unlock()
	if srx != nil {
		srx.detach(e)
	}
	if stx != nil {
		stx.unbind()
	}
	for _, c := range cntrs {
		if c != nil {
			c.unbind()
		}
	}
	if txcq != nil {
		txcq.unbind()
	}
	if rxcq != nil {
		rxcq.unbind()
	}
	if eq != nil {
		eq.obj.drop()
	}
	if av != nil {
		av.obj.drop()
	}
	return err
}

// epEvents turns the provider's connection events into state changes and
// EQ entries.
type epEvents struct{ e *EP }

func (ev epEvents) Connected(data []byte) {
	e := ev.e
	e.mu.Lock()
	e.setStateLocked(stateConnected)
	eq := e.eq
	e.mu.Unlock()
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "connected")
	}
	e.obj.log(slog.LevelInfo, "connected")
	if eq != nil {
		eq.post(EQEvent{Event: fi.CONNECTED, FID: e.obj.Path(), Data: data})
	}
}

func (ev epEvents) Shutdown() {
	e := ev.e
	e.mu.Lock()
	e.setStateLocked(stateShutdown)
	eq := e.eq
	e.mu.Unlock()
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "connection shut down")
	}
	e.obj.log(slog.LevelInfo, "connection shut down")
	if eq != nil {
		eq.post(EQEvent{Event: fi.SHUTDOWN, FID: e.obj.Path()})
	}
}

func (ev epEvents) Failed(err error, data []byte) {
	e := ev.e
	e.mu.Lock()
	e.setStateLocked(stateError)
	eq := e.eq
	e.mu.Unlock()
	if trace.On(trace.CM) {
		e.obj.tracef(trace.CM, "connection lost: %v", err)
	}
	e.obj.log(slog.LevelInfo, "connection lost", "why", err.Error())
	e.obj.SetErr(WithOp("connection", err))
	if eq != nil {
		eq.post(EQEvent{FID: e.obj.Path(), Err: Code(err), ProvErrno: provErrno(err), Data: data})
	}
}

// Owner is core.Owned's: the uid that made the endpoint.
func (ev epEvents) Owner() uint32 { return ev.e.obj.Owner }

// Owner is core.Owned's: the passive endpoint's owner.
func (ev pepEvents) Owner() uint32 { return ev.p.obj.Owner }

// AsyncError is core.AsyncErrors': an error of the provider that leaves the
// endpoint usable goes to its err file.
func (ev epEvents) AsyncError(err error) {
	ev.e.obj.SetErr(WithOp("provider", err))
}
