// Package fabricfs is the Go client of a mounted fabricfs tree: the file
// protocol of docs/tree.md and the ring fast path of docs/abi.md, for Go
// programs. It is one of the clients under clients/ (clients/c/fabricfs.h
// for C, clients/python/fabricfs.py for Python), and the one that drives the
// rings with the daemon's own implementation of the layout.
//
// Objects are made through clone files and live while their clone file is
// open, that is until Close (or the program's exit):
//
//	t, err := fabricfs.Open("/fabric")
//	d := t.Domain("tcp", "lo")
//	eq, err := d.NewEQ()
//	cqa, err := d.NewCQ(0)
//	cqb, err := d.NewCQ(0)
//	a, b, pep, err := d.Connect(eq, cqa, cqb)
//	mr, err := d.NewMR(4096, "FI_SEND,FI_RECV")
//	err = a.PostSend(mr, 0, 4096, 1, 0)
//	err = cqa.Wait(time.Second)
//	for _, c := range cqa.Poll(16) { ... }
//
// The rings are mapped and driven with package core/ring, the one Go
// implementation of the layout. An EP's rings take one producer and a CQ's
// ring one consumer: use each from one goroutine at a time.
package fabricfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fabricfs/fabricfs/core/ring"
)

// Tree is a mounted fabricfs.
type Tree struct{ Dir string }

// Open checks that mountpoint is a fabricfs tree of the ring ABI's version.
func Open(mountpoint string) (*Tree, error) {
	b, err := os.ReadFile(filepath.Join(mountpoint, "abi_version"))
	if err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(string(b)); v != strconv.Itoa(ring.Version) {
		return nil, fmt.Errorf("%s: abi_version %s, want %d", mountpoint, v, ring.Version)
	}
	return &Tree{Dir: mountpoint}, nil
}

// GetInfo runs one fi_getinfo(3) query through the tree's getinfo file:
// query is in fi_info(1)'s options ("-p tcp -t FI_EP_MSG -d lo -c FI_MSG")
// and the answer is the matching entries in fi_info -v's text. When the
// query is bad or nothing matches, the error carries the tree's sentence
// and wraps the write's errno (syscall.EINVAL, syscall.ENODATA).
func (t *Tree) GetInfo(query string) (string, error) {
	f, err := os.OpenFile(filepath.Join(t.Dir, "getinfo"), os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, werr := f.Write([]byte(query + "\n"))
	b, rerr := io.ReadAll(f) // the answer, or after a failed write the error sentence
	if werr != nil {
		var errno syscall.Errno
		if errors.As(werr, &errno) {
			werr = errno // the sentence says what is wrong; the file name adds nothing
		}
		return "", fmt.Errorf("%s (%w)", strings.TrimSpace(string(b)), werr)
	}
	if rerr != nil {
		return "", fmt.Errorf("getinfo %q: reading the answer: %w", query, rerr)
	}
	return string(b), nil
}

// Domain is one provider's domain, such as tcp/lo.
type Domain struct{ Dir string }

// Domain returns the domain prov/name; it is not checked until used.
func (t *Tree) Domain(prov, name string) *Domain {
	return &Domain{Dir: filepath.Join(t.Dir, prov, name)}
}

// Object is one object of a domain, KIND/ID.
type Object struct {
	Dir      string // the object's directory
	kind, id string
	clone    *os.File       // keeps a clone object alive; nil for others
	regions  []*ring.Region // mapped files, unmapped by Close
}

func (d *Domain) clone(kind string) (Object, error) {
	f, err := os.OpenFile(filepath.Join(d.Dir, kind, "clone"), os.O_RDWR, 0)
	if err != nil {
		return Object{}, err
	}
	b := make([]byte, 64)
	n, err := f.Read(b)
	if err != nil {
		f.Close()
		return Object{}, fmt.Errorf("%s: reading the id: %w", f.Name(), err)
	}
	id := strings.TrimSpace(string(b[:n]))
	return Object{Dir: filepath.Join(d.Dir, kind, id), kind: kind, id: id, clone: f}, nil
}

// ID is the object's id in its kind directory.
func (o *Object) ID() string { return o.id }

// Name is KIND/ID, as events name objects.
func (o *Object) Name() string { return o.kind + "/" + o.id }

// Err is the text of the object's err file: its last failure.
func (o *Object) Err() string {
	b, err := os.ReadFile(filepath.Join(o.Dir, "err"))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

// Ctl writes one command to the object's ctl file; an error carries the
// object's err text.
func (o *Object) Ctl(cmd string) error { return o.write("ctl", cmd) }

// Attr reads attr/name, without the newline.
func (o *Object) Attr(name string) (string, error) { return o.read("attr/" + name) }

// SetAttr writes attr/name.
func (o *Object) SetAttr(name, value string) error { return o.write("attr/"+name, value) }

func (o *Object) write(name, s string) error {
	f, err := os.OpenFile(filepath.Join(o.Dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write([]byte(s + "\n")); err != nil {
		return fmt.Errorf("%s: %q: %w (err: %s)", f.Name(), s, err, o.Err())
	}
	return nil
}

// read reads one of the object's files with a single read, so that a queue
// file (listen) gives one item.
func (o *Object) read(name string) (string, error) {
	f, err := os.Open(filepath.Join(o.Dir, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w (err: %s)", f.Name(), err, o.Err())
	}
	return strings.TrimSpace(string(b[:n])), nil
}

// mapFile maps one of the object's files (ring.MapFile) until Close. It
// closes the file once mapped, as the C provider does: the mapping holds
// the memory, and an open file would hold a descriptor in the daemon
// (passthrough) for as long as the object lives.
func (o *Object) mapFile(name string) (*ring.Region, error) {
	reg, err := ring.MapFile(filepath.Join(o.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("%w (err: %s)", err, o.Err())
	}
	reg.File.Close()
	reg.File = nil
	o.regions = append(o.regions, reg)
	return reg, nil
}

func (o *Object) mapRing(name string) (*ring.Ring, error) {
	reg, err := o.mapFile(name)
	if err != nil {
		return nil, err
	}
	r, err := ring.Open(reg.Mem)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", o.Dir, name, err)
	}
	return r, nil
}

// Close unmaps the object's files and closes its clone file, which ends a
// clone object. Its rings and memory must not be used afterwards.
func (o *Object) Close() error {
	for _, r := range o.regions {
		r.Close()
	}
	o.regions = nil
	if o.clone == nil {
		return nil
	}
	err := o.clone.Close()
	o.clone = nil
	return err
}

// EQ is an event queue.
type EQ struct{ Object }

// NewEQ makes an event queue.
func (d *Domain) NewEQ() (*EQ, error) {
	o, err := d.clone("eq")
	if err != nil {
		return nil, err
	}
	return &EQ{o}, nil
}

// Events blocks until an event is pending and returns those that are.
func (q *EQ) Events() ([]string, error) {
	f, err := os.Open(filepath.Join(q.Dir, "events"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ev []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ev = append(ev, sc.Text())
	}
	return ev, sc.Err()
}

// WaitConnected reads events until each of eps has had "connected"; any
// other event for one of them is an error.
func (q *EQ) WaitConnected(timeout time.Duration, eps ...*EP) error {
	want := map[string]bool{}
	for _, ep := range eps {
		want["fid="+ep.Name()] = true
	}
	for deadline := time.Now().Add(timeout); len(want) > 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no connected event after %v for %v", q.Name(), timeout, want)
		}
		ev, err := q.Events()
		if err != nil {
			return err
		}
		for _, e := range ev {
			if f := strings.Fields(e); len(f) >= 2 && want[f[1]] {
				if f[0] != "connected" {
					return fmt.Errorf("%s: %s", q.Name(), e)
				}
				delete(want, f[1])
			}
		}
	}
	return nil
}

// CQ is a completion queue, served through its ring.
type CQ struct {
	Object
	r *ring.Ring
}

// NewCQ makes a completion queue of size entries (0: the default) and maps
// its ring, cq/N/data; its completions then arrive there.
func (d *Domain) NewCQ(size int) (*CQ, error) {
	o, err := d.clone("cq")
	if err != nil {
		return nil, err
	}
	q := &CQ{Object: o}
	if size > 0 {
		err = q.SetAttr("size", strconv.Itoa(size))
	}
	if err == nil {
		q.r, err = q.mapRing("data")
	}
	if err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

// Ring is the completion ring.
func (q *CQ) Ring() *ring.Ring { return q.r }

// Poll takes up to max completions from the ring, in a slice of its own
// (nil when the ring is empty); Read fills the caller's array instead.
func (q *CQ) Poll(max int) []ring.CQE {
	n := min(max, int(q.r.Len()))
	if n <= 0 {
		return nil
	}
	out := make([]ring.CQE, n)
	return out[:q.Read(out)]
}

// Read takes up to len(dst) completions from the ring into dst, as
// fi_cq_read into the caller's array, and returns how many: a loop that
// polls with one dst allocates nothing.
func (q *CQ) Read(dst []ring.CQE) int {
	n := 0
	h, t := q.r.Peek()
	for ; h != t && n < len(dst); h++ {
		dst[n], _ = ring.DecodeCQE(q.r.Entry(h)) // a non-zero reserved byte still decodes
		n++
	}
	q.r.Release(h)
	return n
}

// Wait returns once the ring holds a completion: it spins briefly, then
// sleeps on the ring's wake word (ring.Ring.Sleep). It fails with
// ring.ErrTimeout after timeout (<= 0: none), or when the CQ is dead.
func (q *CQ) Wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for spins := 0; q.r.Len() == 0; spins++ {
		if q.r.Flags()&ring.Dead != 0 {
			return fmt.Errorf("%s: ring is dead (err: %s)", q.Name(), q.Err())
		}
		if spins < 1000 {
			continue
		}
		left := time.Until(deadline)
		if timeout <= 0 {
			left = 0
		} else if left <= 0 {
			return ring.ErrTimeout
		}
		if err := q.r.Sleep(nil, left); err != nil && !errors.Is(err, ring.ErrTimeout) {
			return err
		}
	}
	return nil
}

// PEP is a passive endpoint.
type PEP struct{ Object }

// NewPEP makes a passive endpoint.
func (d *Domain) NewPEP() (*PEP, error) {
	o, err := d.clone("pep")
	if err != nil {
		return nil, err
	}
	return &PEP{o}, nil
}

// Listen binds eq, listens on addr (such as 127.0.0.1:0) and returns the
// local address with the chosen port.
func (p *PEP) Listen(eq *EQ, addr string) (string, error) {
	if err := p.Ctl("bind eq " + eq.id); err != nil {
		return "", err
	}
	if err := p.Ctl("listen " + addr); err != nil {
		return "", err
	}
	return p.read("local")
}

// Request blocks until a connection request arrives and returns the
// endpoint made for it, which takes Setup and then "accept [DATA]" or
// "reject [DATA]". It lives as long as the pep: its Close only unmaps.
func (p *PEP) Request() (*EP, error) {
	id, err := p.read("listen")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(filepath.Dir(filepath.Dir(p.Dir)), "ep", id)
	return &EP{Object: Object{Dir: dir, kind: "ep", id: id}}, nil
}

// EP is an active endpoint with its work rings.
type EP struct {
	Object
	tx, rx *ring.Ring
}

// NewEP makes an endpoint.
func (d *Domain) NewEP() (*EP, error) {
	o, err := d.clone("ep")
	if err != nil {
		return nil, err
	}
	return &EP{Object: o}, nil
}

// Setup binds eq and cq (send and receive) and enables the endpoint.
func (e *EP) Setup(eq *EQ, cq *CQ) error {
	for _, c := range []string{"bind eq " + eq.id, "bind cq " + cq.id + " send,recv", "enable"} {
		if err := e.Ctl(c); err != nil {
			return err
		}
	}
	return nil
}

// Tx maps ep/N/tx on first use (the endpoint must be enabled).
func (e *EP) Tx() (*ring.Ring, error) { return e.ring(&e.tx, "tx") }

// Rx maps ep/N/rx on first use.
func (e *EP) Rx() (*ring.Ring, error) { return e.ring(&e.rx, "rx") }

func (e *EP) ring(r **ring.Ring, name string) (*ring.Ring, error) {
	var err error
	if *r == nil {
		*r, err = e.mapRing(name)
	}
	return *r, err
}

// PostSend sends bytes [off, off+n) of mr; context comes back as the
// completion's op_context. A full tx ring is an error wrapping
// syscall.EAGAIN: take completions and retry.
func (e *EP) PostSend(mr *MR, off, n, context, flags uint64) error {
	return e.Post(mr, ring.WR{Op: ring.OpSend, Flags: flags, Context: context, Offset: off, Len: n})
}

// PostRecv receives the next message into [off, off+n) of mr; EAGAIN as
// PostSend.
func (e *EP) PostRecv(mr *MR, off, n, context, flags uint64) error {
	return e.Post(mr, ring.WR{Op: ring.OpRecv, Flags: flags, Context: context, Offset: off, Len: n})
}

// Post publishes any work request, for the fields PostSend and PostRecv
// leave zero (Addr of a connectionless endpoint, Tag and Ignore of tagged
// operations, Data): receives (ring.OpRecv, ring.OpTRecv) go on the rx
// ring, every other op on tx. w.Desc is set to mr's descriptor. EAGAIN as
// PostSend.
func (e *EP) Post(mr *MR, w ring.WR) error {
	get := e.Tx
	if w.Op == ring.OpRecv || w.Op == ring.OpTRecv {
		get = e.Rx
	}
	r, err := get()
	if err != nil {
		return err
	}
	if r.Flags()&ring.Dead != 0 {
		return fmt.Errorf("%s: ring is dead (err: %s)", e.Name(), e.Err())
	}
	b, ok := r.Reserve()
	if !ok {
		return fmt.Errorf("%s: ring full: %w", e.Name(), syscall.EAGAIN)
	}
	w.Desc = mr.desc
	w.Encode(b)
	r.Publish(1)
	return nil
}

// MR is a registered memory region, mapped.
type MR struct {
	Object
	mem  []byte
	desc uint64
}

// NewMR makes a region of length bytes with access flags (such as
// "FI_SEND,FI_RECV"), registers it and maps mr/N/data.
func (d *Domain) NewMR(length int, access string) (*MR, error) {
	o, err := d.clone("mr")
	if err != nil {
		return nil, err
	}
	m := &MR{Object: o}
	if err := m.register(length, access); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *MR) register(length int, access string) error {
	if err := m.SetAttr("len", strconv.Itoa(length)); err != nil {
		return err
	}
	if err := m.SetAttr("access", access); err != nil {
		return err
	}
	if err := m.Ctl("reg"); err != nil {
		return err
	}
	s, err := m.Attr("desc")
	if err != nil {
		return err
	}
	if m.desc, err = strconv.ParseUint(s, 0, 64); err != nil {
		return fmt.Errorf("%s/attr/desc: %w", m.Dir, err)
	}
	reg, err := m.mapFile("data")
	if err != nil {
		return err
	}
	m.mem = reg.Mem
	return nil
}

// Mem is the region's memory, shared with the daemon.
func (m *MR) Mem() []byte { return m.mem }

// Desc is the region's descriptor for work requests (attr/desc).
func (m *MR) Desc() uint64 { return m.desc }

// AV is an address vector.
type AV struct{ Object }

// NewAV makes an address vector.
func (d *Domain) NewAV() (*AV, error) {
	o, err := d.clone("av")
	if err != nil {
		return nil, err
	}
	return &AV{o}, nil
}

// Insert inserts addr (host:port or FI_ADDR_STR) and returns its fi_addr,
// read back from av/N/addrs: the last entry, as insert appends.
func (a *AV) Insert(addr string) (uint64, error) {
	if err := a.Ctl("insert " + addr); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(a.Dir, "addrs"))
	if err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		return 0, fmt.Errorf("%s/addrs: bad line %q", a.Dir, lines[len(lines)-1])
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// NewRDM makes an FI_EP_RDM endpoint (attr/type), sets its attributes
// attrs (name, value, name, value...), binds av and cq (send and receive)
// and enables it; Local then gives its address.
func (d *Domain) NewRDM(av *AV, cq *CQ, attrs ...string) (*EP, error) {
	if len(attrs)%2 != 0 {
		return nil, fmt.Errorf("NewRDM: attribute %q without a value", attrs[len(attrs)-1])
	}
	e, err := d.NewEP()
	if err != nil {
		return nil, err
	}
	err = e.SetAttr("type", "FI_EP_RDM")
	for i := 0; i < len(attrs) && err == nil; i += 2 {
		err = e.SetAttr(attrs[i], attrs[i+1])
	}
	for _, c := range []string{"bind av " + av.id, "bind cq " + cq.id + " send,recv", "enable"} {
		if err == nil {
			err = e.Ctl(c)
		}
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Local is the endpoint's address (fi_getname), in FI_ADDR_STR form.
func (e *EP) Local() (string, error) { return e.read("local") }

// Connect makes a connected pair of endpoints: a new pep listens on
// 127.0.0.1:0, a (bound to cqA) connects to it, the request is accepted as
// b (bound to cqB), and both "connected" events arrive on eq. b lives as
// long as the pep: close a and the pep when done.
func (d *Domain) Connect(eq *EQ, cqA, cqB *CQ) (a, b *EP, pep *PEP, err error) {
	return d.ConnectWith(eq, func(e *EP) error { return e.Setup(eq, cqA) }, func(e *EP) error { return e.Setup(eq, cqB) })
}

// ConnectWith is Connect with the endpoints' bindings and enable left to
// setupA and setupB (Setup does the usual ones); eq is the pep's.
func (d *Domain) ConnectWith(eq *EQ, setupA, setupB func(*EP) error) (a, b *EP, pep *PEP, err error) {
	if pep, err = d.NewPEP(); err != nil {
		return nil, nil, nil, err
	}
	if a, err = d.NewEP(); err != nil {
		pep.Close()
		return nil, nil, nil, err
	}
	if b, err = connect(pep, a, eq, setupA, setupB); err != nil {
		a.Close()
		pep.Close()
		return nil, nil, nil, err
	}
	return a, b, pep, nil
}

func connect(pep *PEP, a *EP, eq *EQ, setupA, setupB func(*EP) error) (*EP, error) {
	local, err := pep.Listen(eq, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := setupA(a); err != nil {
		return nil, err
	}
	if err := a.Ctl("connect " + local); err != nil {
		return nil, err
	}
	b, err := pep.Request()
	if err != nil {
		return nil, err
	}
	if err := setupB(b); err != nil {
		return nil, err
	}
	if err := b.Ctl("accept"); err != nil {
		return nil, err
	}
	return b, eq.WaitConnected(10*time.Second, a, b)
}

// Cntr is a counter.
type Cntr struct{ Object }

// NewCntr makes a counter.
func (d *Domain) NewCntr() (*Cntr, error) {
	o, err := d.clone("cntr")
	if err != nil {
		return nil, err
	}
	return &Cntr{o}, nil
}

// Read returns the counter's value and error count (fi_cntr_read,
// fi_cntr_readerr).
func (c *Cntr) Read() (value, errs uint64, err error) {
	for _, f := range []struct {
		name string
		v    *uint64
	}{{"value", &value}, {"errors", &errs}} {
		s, err := c.read(f.name)
		if err != nil {
			return 0, 0, err
		}
		if *f.v, err = strconv.ParseUint(s, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s/%s: %w", c.Dir, f.name, err)
		}
	}
	return value, errs, nil
}

// Wait blocks until the value reaches threshold (fi_cntr_wait). It fails
// wrapping syscall.ETIMEDOUT after timeout (<= 0: none), and
// syscall.ENOMSG if the error count changes meanwhile.
func (c *Cntr) Wait(threshold uint64, timeout time.Duration) error {
	cmd := fmt.Sprintf("wait %d", threshold)
	if timeout > 0 {
		cmd += fmt.Sprintf(" %d", max(timeout.Milliseconds(), 1))
	}
	return c.Ctl(cmd)
}
