package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// regProvider is the tcp provider whose domains also register memory
// (core.MemoryRegistrar), recording what core asks of them, and whose
// endpoints record the operations posted to them.
type regProvider struct {
	core.Provider
	mu       sync.Mutex
	next     uint64
	regs     map[*regMem]bool // live registrations
	posted   []*core.Op
	owners   []uint32 // of the endpoints made, in order
	badKeys  bool     // every registration gets key 1
	noCancel bool     // endpoints cannot cancel, as verbs's
	holdSend bool     // sends are kept in held, not passed on
	held     []*core.Op
}

type regDomain struct {
	core.ProviderDomain
	p *regProvider
}

type regMem struct {
	p      *regProvider
	key    uint64
	buf    []byte
	access fi.Caps
	owner  uint32
}

type regEP struct {
	core.Endpoint
	p *regProvider
}

func (p *regProvider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.Provider.OpenDomain(name)
	if err != nil {
		return nil, err
	}
	return regDomain{d, p}, nil
}

func (d regDomain) RegisterMemory(owner uint32, buf []byte, iova uint64, access fi.Caps, requestedKey uint64, _ []byte) (core.Memory, error) {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	m := &regMem{p: p, key: 0x1000 + p.next, buf: buf, access: access, owner: owner}
	if p.badKeys {
		m.key = 1
	}
	p.regs[m] = true
	return m, nil
}

func (d regDomain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	e, err := d.ProviderDomain.NewEndpoint(info, req, ev)
	if err != nil {
		return nil, err
	}
	d.p.mu.Lock()
	d.p.owners = append(d.p.owners, core.OwnerOf(ev))
	d.p.mu.Unlock()
	return regEP{e, d.p}, nil
}

func (e regEP) Post(op *core.Op) error {
	e.p.mu.Lock()
	e.p.posted = append(e.p.posted, op)
	hold := e.p.holdSend && op.Kind == core.OpSend
	if hold {
		e.p.held = append(e.p.held, op)
	}
	e.p.mu.Unlock()
	if hold {
		return nil
	}
	return e.Endpoint.Post(op)
}

func (e regEP) Cancel(op *core.Op) bool {
	if e.p.noCancel {
		return false
	}
	return e.Endpoint.Cancel(op)
}

func (m *regMem) Key() uint64 { return m.key }

func (m *regMem) Close() error {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if !m.p.regs[m] {
		return fmt.Errorf("key %#x deregistered twice", m.key)
	}
	delete(m.p.regs, m)
	return nil
}

func (p *regProvider) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.regs)
}

// regDomainOf opens a fabric over regProvider and returns its lo domain.
func regDomainOf(t *testing.T) (*core.Domain, *regProvider) {
	t.Helper()
	tp, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	p := &regProvider{Provider: tp, regs: map[*regMem]bool{}}
	return loOf(t, p), p
}

// regMR makes and registers a memory region of n bytes for uid 0 with the
// requested key (if not empty) and access (if not empty).
func regMR(t *testing.T, d *core.Domain, name string, n int, key, access string) (*core.Object, error) {
	return regMRAs(t, d, 0, name, n, key, access)
}

// regMRAs is regMR for uid.
func regMRAs(t *testing.T, d *core.Domain, uid uint32, name string, n int, key, access string) (*core.Object, error) {
	t.Helper()
	o, err := d.Create(core.KindMR, name, uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range o.Impl.Attrs() {
		v := map[string]string{"len": fmt.Sprint(n), "requested_key": key, "access": access}[a.Name]
		if v != "" {
			if err := a.Set(v); err != nil {
				t.Fatalf("%s = %s: %v", a.Name, v, err)
			}
		}
	}
	return o, o.Ctl(context.Background(), uid, "reg")
}

// TestMemoryRegistrar: on a domain that registers memory, a region's
// shared memory is registered with the provider at reg, with the region's
// access; its key is the provider's (a requested key does not change it,
// FI_MR_PROV_KEY); closing the region deregisters it; a provider key
// already in the domain's index is refused (FI_ENOKEY) and the new
// registration undone.
func TestMemoryRegistrar(t *testing.T) {
	d, p := regDomainOf(t)
	a, err := regMR(t, d, "a", 8192, "0x77", "FI_RECV,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	key := a.Impl.(*core.MR).Key()
	var m *regMem
	p.mu.Lock()
	for r := range p.regs {
		if r.key == key {
			m = r
		}
	}
	p.mu.Unlock()
	if m == nil {
		t.Fatalf("region key %#x is not a provider registration (live: %d)", key, p.live())
	}
	shm, err := a.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.buf) != 8192 || &m.buf[0] != &shm.Mem[0] {
		t.Errorf("registered %d bytes, not the region's shared memory", len(m.buf))
	}
	if m.access != fi.RECV|fi.REMOTE_WRITE {
		t.Errorf("registered with access %v, want [FI_RECV, FI_REMOTE_WRITE]", m.access)
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if n := p.live(); n != 0 {
		t.Errorf("%d registrations left after the region closed", n)
	}

	// The owner is the region's: a registrar keeps owners apart.
	if _, err := regMRAs(t, d, 1000, "u", 4096, "", ""); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	var owners []uint32
	for r := range p.regs {
		owners = append(owners, r.owner)
	}
	p.mu.Unlock()
	if len(owners) != 1 || owners[0] != 1000 {
		t.Errorf("registrations for owners %v, want [1000]", owners)
	}
	p.badKeys = true
	if _, err := regMR(t, d, "b", 4096, "", ""); err != nil {
		t.Fatal(err)
	}
	_, err = regMR(t, d, "c", 4096, "", "")
	wantCode(t, "reg with a provider key in use", err, fi.ENOKEY)
	if n := p.live(); n != 2 {
		t.Errorf("%d registrations live, want uid 1000's and the first with key 1", n)
	}
}

// TestOpsCarryRegistration: an RMA operation of the ctl verb write carries
// the registration of its region and its offset in it (Op.Mem, Op.MemOff);
// a write to the data file, whose buffer is core's, carries none.
func TestOpsCarryRegistration(t *testing.T) {
	d, p := regDomainOf(t)
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	// Peers may write it: a write the target refused would end the
	// connection, and the send after it could find it gone.
	mr, err := regMR(t, d, "m", 4096, "", "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Ctl(ctx, 0, fmt.Sprintf("write m 100 16 0 %#x", mr.Impl.(*core.MR).Key())); err != nil {
		t.Fatal(err)
	}
	if err := a.Impl.(*core.EP).WriteData(ctx, []byte("plain")); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var write, send *core.Op
	for _, op := range p.posted {
		switch op.Kind {
		case core.OpWrite:
			write = op
		case core.OpSend:
			send = op
		}
	}
	if write == nil || send == nil {
		t.Fatalf("posted %d operations, want a write and a send", len(p.posted))
	}
	if m, ok := write.Mem.(*regMem); !ok || m.key != mr.Impl.(*core.MR).Key() || write.MemOff != 100 {
		t.Errorf("write: Mem %v MemOff %d, want the region's registration and 100", write.Mem, write.MemOff)
	}
	if send.Mem != nil {
		t.Errorf("a data-file send carries registration %v", send.Mem)
	}
}

// TestInterruptedReadKeepsReceive: a read of the data file interrupted
// while its receive cannot be cancelled returns EINTR at once, and the
// next read takes the message that receive gets.
func TestInterruptedReadKeepsReceive(t *testing.T) {
	d, p := regDomainOf(t)
	p.noCancel = true
	a, b, _, _, _ := pair(t, d, "bind cq c send,recv")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	epB := b.Impl.(*core.EP)
	if _, err := epB.ReadData(ctx, make([]byte, 64), 0); !errors.Is(err, fi.EINTR) {
		t.Fatalf("interrupted read = %v, want FI_EINTR", err)
	}
	if err := a.Impl.(*core.EP).WriteData(context.Background(), []byte("later")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := epB.ReadData(context.Background(), buf, 0)
	if err != nil || string(buf[:n]) != "later" {
		t.Errorf("next read = %q, %v; want later", buf[:n], err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	recvs := 0
	for _, op := range p.posted {
		if op.Kind == core.OpRecv {
			recvs++
		}
	}
	if recvs != 1 {
		t.Errorf("%d receives posted, want the one the interrupted read left", recvs)
	}
}

// TestEndpointOwner: the events core gives a provider's endpoint name its
// owner (core.Owned), for a registrar's separation of owners.
func TestEndpointOwner(t *testing.T) {
	d, p := regDomainOf(t)
	objs := map[core.Kind]*core.Object{}
	for _, k := range []core.Kind{core.KindEQ, core.KindCQ, core.KindEP} {
		o, err := d.Create(k, "o"+k.String(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		objs[k] = o
	}
	for _, c := range []string{"bind eq oeq", "bind cq ocq send,recv", "enable"} {
		if err := objs[core.KindEP].Ctl(context.Background(), 1000, c); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.owners) != 1 || p.owners[0] != 1000 {
		t.Errorf("endpoints made for owners %v, want [1000]", p.owners)
	}
}

// TestInterruptedWriteSucceeds: a write to the data file interrupted
// after the provider took its send succeeds, so that the writer does not
// send it again; the send's completion still reaches the CQ.
func TestInterruptedWriteSucceeds(t *testing.T) {
	d, p := regDomainOf(t)
	a, _, _, _, cq := pair(t, d, "bind cq c send,recv")
	p.mu.Lock()
	p.holdSend = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.Impl.(*core.EP).WriteData(ctx, []byte("once")); err != nil {
		t.Fatalf("interrupted write = %v, want success", err)
	}
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if len(held) != 1 {
		t.Fatalf("%d sends held, want 1", len(held))
	}
	held[0].Complete(core.Completion{Flags: held[0].Kind.CQFlags(), Len: 4})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	es, err := cq.Read(rctx, 1, true)
	if err != nil || len(es) != 1 || es[0].Len != 4 {
		t.Errorf("CQ after the send completed: %v, %v", es, err)
	}
}

// TestRegistrationFromBase: a region with attr/base B registers its bytes
// from B on with a registrar (whose addresses count from the registered
// buffer's first byte, so peers' addresses count from B); a local
// operation at offset O >= B carries the registration and O-B, one that
// starts below B carries none (the provider registers it on its own).
func TestRegistrationFromBase(t *testing.T) {
	d, p := regDomainOf(t)
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	o, err := d.Create(core.KindMR, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The writes below reach the peer, which is in this domain too: m must
	// take them, or the peer ends the connection, as a bad access does,
	// and the next write fails.
	setAttrs(t, o, map[string]string{"len": "8192", "base": "300", "access": "FI_SEND|FI_RECV|FI_READ|FI_WRITE|FI_REMOTE_READ|FI_REMOTE_WRITE"})
	run(t, o, "reg")
	shm, err := o.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	var m *regMem
	for r := range p.regs {
		m = r
	}
	p.mu.Unlock()
	if m == nil || len(m.buf) != 8192-300 || &m.buf[0] != &shm.Mem[300] {
		t.Fatalf("registration %+v, want the region's bytes from 300", m)
	}
	ctx := context.Background()
	key := o.Impl.(*core.MR).Key()
	for _, c := range []struct {
		off     uint64
		mem     bool
		wantOff uint64
	}{{1000, true, 700}, {300, true, 0}, {100, false, 0}} {
		if err := a.Ctl(ctx, 0, fmt.Sprintf("write m %d 16 0 %#x", c.off, key)); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		op := p.posted[len(p.posted)-1]
		p.mu.Unlock()
		if got := op.Mem != nil; got != c.mem || op.MemOff != c.wantOff {
			t.Errorf("write from offset %d: Mem %v MemOff %d, want registration %v and %d", c.off, op.Mem, op.MemOff, c.mem, c.wantOff)
		}
	}
}
