package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// The conformance suite: scenarios written once against confIO, the data
// path of one endpoint, and run for every provider run (a provider, a
// domain and an endpoint type) through two implementations of it: "rings"
// (clients/go/fabricfs: mapped tx/rx and CQ rings, mapped MR memory) and "shell"
// (file reads and writes only: ep data and ctl, cq events, mr data; no
// mmap). Objects are made, bound and connected through their files, as
// both a program and a shell user do (the rings implementation with
// clients/go/fabricfs's clone objects, the shell one with mkdir); counters and EQ
// events are files for both. A scenario is skipped when the endpoint's
// attr/caps (or the domain's attr/cq_data_size) lacks what it needs, with
// the reason. Every scenario has a shell form.

// confRuns are the provider runs: one line per provider and endpoint type.
var confRuns = []confRun{
	{prov: "tcp", dom: "lo", typ: "FI_EP_MSG"},
	{prov: "tcp", dom: "lo", typ: "FI_EP_RDM"},
	{prov: "verbs", dom: verbsDevice, typ: "FI_EP_MSG", noCancel: "a receive posted to a QP cannot be taken back (libfabric's verbs: fi_no_cancel)"},
	{prov: "verbs", dom: verbsDevice, typ: "FI_EP_RDM"},
	{prov: "shm", dom: "shm", typ: "FI_EP_RDM"},
}

// confRun is a provider, a domain and an endpoint type; noCancel says why
// its posted receives cannot be cancelled, if they cannot.
type confRun struct{ prov, dom, typ, noCancel string }

func (r confRun) msg() bool { return r.typ == "FI_EP_MSG" }

// confScenario is one behaviour, checked the same way through both
// implementations.
type confScenario struct {
	name    string
	msgOnly bool    // connection management: FI_EP_MSG
	caps    fi.Caps // the endpoint capabilities it needs
	cqData  bool    // it needs remote CQ data (the domain's cq_data_size > 0)
	cancels bool    // it cancels a posted receive
	run     func(t *testing.T, x *confEnv)
}

// TestConformance runs every scenario for every run and implementation,
// with one mount per run, and checks after each scenario that it left no
// object behind.
func TestConformance(t *testing.T) {
	for _, run := range confRuns {
		t.Run(run.prov+"_"+run.dom+"_"+run.typ, func(t *testing.T) {
			d := mount(t)
			x := &confEnv{d: d, run: run, dom: d.path(run.prov, run.dom)}
			x.probe(t)
			for _, impl := range []confImpl{&ringsImpl{}, &shellImpl{}} {
				for _, s := range confScenarios {
					t.Run(impl.name()+"/"+s.name, func(t *testing.T) {
						if why := x.lacks(s); why != "" {
							t.Skip(why)
						}
						t.Cleanup(func() { x.checkEmpty(t) }) // after the scenario's own cleanups
						xi := *x
						xi.impl = impl
						s.run(t, &xi)
					})
				}
			}
		})
	}
}

// confEnv is a run's mounted domain, for one implementation.
type confEnv struct {
	d    *daemon
	run  confRun
	dom  string // the domain's directory
	caps fi.Caps
	data bool // cq_data_size > 0
	// rxCQData: the endpoint's rx_attr.mode has FI_RX_CQ_DATA, so remote
	// CQ data (of an RMA write too) takes a posted receive.
	rxCQData bool
	impl     confImpl
}

// probe reads the capabilities of an endpoint of the run's type.
func (x *confEnv) probe(t *testing.T) {
	ep := filepath.Join(x.dom, "ep", "probe")
	must(t, os.Mkdir(ep, 0o700))
	defer os.Remove(ep)
	must(t, ctl(filepath.Join(ep, "attr", "type"), x.run.typ))
	caps, err := fi.Parse[fi.Caps](fileText(t, ep, "attr/caps"))
	must(t, err)
	x.caps = caps
	x.data = fileText(t, x.dom, "attr/cq_data_size") != "0"
	mode, err := fi.Parse[fi.Mode](fileText(t, ep, "attr/rx_mode"))
	must(t, err)
	x.rxCQData = mode&fi.RX_CQ_DATA != 0
}

// lacks says why the run cannot have scenario s, or "".
func (x *confEnv) lacks(s confScenario) string {
	switch {
	case s.msgOnly && !x.run.msg():
		return "connection management is for FI_EP_MSG"
	case x.caps&s.caps != s.caps:
		return fmt.Sprintf("attr/caps %v lacks %v", x.caps, s.caps&^x.caps)
	case s.cqData && !x.data:
		return "attr/cq_data_size is 0"
	case s.cancels && x.run.noCancel != "":
		return "no cancel: " + x.run.noCancel
	}
	return ""
}

// checkEmpty fails if an object is left in the domain (a clone object
// goes once the kernel has released its files, which may take a moment).
func (x *confEnv) checkEmpty(t *testing.T) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left []string
		for _, k := range []string{"ep", "pep", "cq", "eq", "av", "mr", "cntr", "stx", "srx"} {
			es, err := os.ReadDir(filepath.Join(x.dom, k))
			must(t, err)
			for _, e := range es {
				if e.Name() != "clone" {
					left = append(left, k+"/"+e.Name())
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("objects left after the scenario: %v", left)
			return
		}
	}
}

// mkobj makes object kind/name in domain dir and returns its directory;
// the test's cleanup removes it (registered first: removed last), once
// the objects bound to it are gone (a clone object goes once the kernel
// has released its files, which may take a moment: EBUSY until then).
func mkobj(t *testing.T, dom, kind, name string) string {
	t.Helper()
	dir := filepath.Join(dom, kind, name)
	must(t, os.Mkdir(dir, 0o700))
	t.Cleanup(func() {
		err := os.Remove(dir)
		for deadline := time.Now().Add(5 * time.Second); errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			err = os.Remove(dir)
		}
		if err != nil {
			t.Errorf("rmdir %s: %v", dir, err)
		}
	})
	return dir
}

// fileText is the content of dir/name without surrounding space.
func fileText(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	must(t, err)
	return strings.TrimSpace(string(b))
}

// ctlOK writes a command to an object's ctl file, failing with its err.
func ctlOK(t *testing.T, dir, cmd string) {
	t.Helper()
	if err := ctl(filepath.Join(dir, "ctl"), cmd); err != nil {
		e, _ := os.ReadFile(filepath.Join(dir, "err"))
		t.Fatalf("%q > %s/ctl: %v (err: %s)", cmd, dir, err, strings.TrimSpace(string(e)))
	}
}

// confSide is how one endpoint of a pair is set up.
type confSide struct {
	txFlags   string // attr/tx_op_flags: the flags of the shell's sends; the rings' sends carry them too
	selective bool   // the send binding is selective
	cntr      string // bind cntr FLAGS, if not empty
	srx, stx  string // the directories of the shared contexts to bind, if not empty
	authKey   string // attr/auth_key, if not empty (FI_EP_MSG: the pep's is confCfg.pepKey)
	tclass    string // attr/tx_tclass, if not empty
	// av (FI_EP_RDM) is the directory of a named AV to bind in place of
	// one of its own; another process inserts the peer into it
	// (insertShared).
	av string
}

// confCfg sets up a pair; the data fields are FI_EP_MSG private data.
type confCfg struct {
	a, b                         confSide
	connData, acceptData, reject string // reject: refuse the request with this data instead of accepting
	pepKey                       string // FI_EP_MSG: the passive endpoint's attr/auth_key, if not empty
	refused                      bool   // FI_EP_MSG: the listener refuses the request itself (another key); a's connect fails
}

// confNode is one endpoint of a pair with its CQ (both directions), memory
// region, counter and, on FI_EP_RDM, AV.
type confNode struct {
	ep, cq, mr, cntr, av string // directories
	eq                   string // FI_EP_MSG: the pair's EQ
	name                 string // ep/ID, as events name it
	peer                 uint64 // FI_EP_RDM: the other endpoint's fi_addr in av; fi.ADDR_UNSPEC on FI_EP_MSG
	io                   confIO
}

// counts waits until the node's counter reads value and errs.
func (n *confNode) counts(t *testing.T, value, errs uint64) {
	t.Helper()
	var v, e string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		vb, err1 := os.ReadFile(filepath.Join(n.cntr, "value"))
		eb, err2 := os.ReadFile(filepath.Join(n.cntr, "errors"))
		must(t, errors.Join(err1, err2))
		v, e = strings.TrimSpace(string(vb)), strings.TrimSpace(string(eb))
		if v == strconv.FormatUint(value, 10) && e == strconv.FormatUint(errs, 10) {
			return
		}
	}
	t.Fatalf("%s: counter value %s errors %s, want %d and %d", n.name, v, e, value, errs)
}

// cancel is the ctl verb cancel of the one receive n posted, once the
// endpoint's status counts it among its operations (ops=1): the daemon
// may not have taken it from the ring, or the shell's read of data may not
// have posted it, yet, and cancelling nothing is no error.
func (x *confEnv) cancel(t *testing.T, n *confNode, context uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(fileText(t, n.ep, "status"), " ops=1 "); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the receive to cancel is not posted: %s", n.name, fileText(t, n.ep, "status"))
		}
	}
	if err := ctl(filepath.Join(n.ep, "ctl"), fmt.Sprintf("cancel %d", context)); err != nil {
		t.Fatalf("%s: cancel %d: %v (err: %s)", n.name, context, err, fileText(t, n.ep, "err"))
	}
}

// confPair makes two endpoints of the run's type set up by cfg, connected
// (FI_EP_MSG: a connects, b accepts) or each in the other's AV (FI_EP_RDM),
// and returns them with the EQ's connection events. With cfg.reject, b
// refuses the request, and the events end with a's error.
func (x *confEnv) confPair(t *testing.T, cfg confCfg) (a, b *confNode, events []string) {
	t.Helper()
	eq := x.impl.obj(t, x, "eq")
	node := func(s confSide) *confNode {
		n := &confNode{cq: x.impl.obj(t, x, "cq"), mr: x.impl.obj(t, x, "mr"), peer: fi.ADDR_UNSPEC}
		if s.cntr != "" {
			n.cntr = x.impl.obj(t, x, "cntr")
		}
		switch {
		case s.av != "":
			n.av = s.av
		case !x.run.msg():
			n.av = x.impl.obj(t, x, "av")
		}
		return n
	}
	setup := func(n *confNode, s confSide) {
		n.name = "ep/" + filepath.Base(n.ep)
		if !x.run.msg() {
			must(t, ctl(filepath.Join(n.ep, "attr", "type"), x.run.typ))
		}
		if s.txFlags != "" {
			must(t, ctl(filepath.Join(n.ep, "attr", "tx_op_flags"), s.txFlags))
		}
		if s.authKey != "" {
			must(t, ctl(filepath.Join(n.ep, "attr", "auth_key"), s.authKey))
		}
		if s.tclass != "" {
			must(t, ctl(filepath.Join(n.ep, "attr", "tx_tclass"), s.tclass))
		}
		cmds := []string{"bind cq " + filepath.Base(n.cq) + " send,recv"}
		if s.selective {
			cmds = []string{"bind cq " + filepath.Base(n.cq) + " send,selective", "bind cq " + filepath.Base(n.cq) + " recv"}
		}
		if x.run.msg() {
			cmds = append(cmds, "bind eq "+filepath.Base(eq))
		} else {
			cmds = append(cmds, "bind av "+filepath.Base(n.av))
		}
		if s.cntr != "" {
			cmds = append(cmds, "bind cntr "+filepath.Base(n.cntr)+" "+s.cntr)
		}
		for k, dir := range map[string]string{"srx": s.srx, "stx": s.stx} {
			if dir != "" {
				cmds = append(cmds, "bind "+k+" "+filepath.Base(dir))
			}
		}
		for _, c := range append(cmds, "enable") {
			ctlOK(t, n.ep, c)
		}
	}
	a, b = node(cfg.a), node(cfg.b)
	if !x.run.msg() {
		a.ep, b.ep = x.impl.obj(t, x, "ep"), x.impl.obj(t, x, "ep")
		setup(a, cfg.a)
		setup(b, cfg.b)
		insert := func(from, to *confNode, s confSide) uint64 {
			if s.av != "" {
				return x.insertShared(t, from, to)
			}
			return x.insert(t, from, to)
		}
		a.peer, b.peer = insert(a, b, cfg.a), insert(b, a, cfg.b)
		a.io, b.io = x.impl.io(t, x, a), x.impl.io(t, x, b)
		return a, b, nil
	}
	pep := x.impl.obj(t, x, "pep")
	ctlOK(t, pep, "bind eq "+filepath.Base(eq))
	if cfg.pepKey != "" {
		must(t, ctl(filepath.Join(pep, "attr", "auth_key"), cfg.pepKey))
	}
	ctlOK(t, pep, "listen 127.0.0.1:0")
	a.ep = x.impl.obj(t, x, "ep")
	setup(a, cfg.a)
	ctlOK(t, a.ep, strings.TrimSpace("connect "+fileText(t, pep, "local")+" "+cfg.connData))
	if cfg.refused {
		return a, nil, x.events(t, eq, "error fid="+a.name+" err=FI_ECONNREFUSED")
	}
	b.ep = x.impl.request(t, x, pep)
	b.name = "ep/" + filepath.Base(b.ep)
	if cfg.reject != "" {
		ctlOK(t, b.ep, "reject "+cfg.reject)
		return a, b, x.events(t, eq, "error fid="+a.name)
	}
	setup(b, cfg.b)
	ctlOK(t, b.ep, strings.TrimSpace("accept "+cfg.acceptData))
	events = x.events(t, eq, "connected fid="+a.name, "connected fid="+b.name)
	a.io, b.io = x.impl.io(t, x, a), x.impl.io(t, x, b)
	a.eq, b.eq = eq, eq
	return a, b, events
}

// insert puts to's address into from's AV and returns its fi_addr: the
// last line of addrs, as insert appends.
func (x *confEnv) insert(t *testing.T, from, to *confNode) uint64 {
	t.Helper()
	ctlOK(t, from.av, "insert "+fileText(t, to.ep, "local"))
	lines := strings.Split(fileText(t, from.av, "addrs"), "\n")
	return x.numField(t, strings.Fields(lines[len(lines)-1])[0])
}

// insertShared puts to's address into from's named AV from another
// process, a shell, and returns the fi_addr that process read from addrs;
// it checks that this process's addrs shows the same entry.
func (x *confEnv) insertShared(t *testing.T, from, to *confNode) uint64 {
	t.Helper()
	local := fileText(t, to.ep, "local")
	out, err := exec.Command("sh", "-c", `echo "insert $1" > "$2/ctl" && tail -n 1 "$2/addrs"`, "sh", local, from.av).CombinedOutput()
	if err != nil {
		t.Fatalf("the second process's insert into %s: %v: %s (err: %s)", from.av, err, out, fileText(t, from.av, "err"))
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[1] != local {
		t.Fatalf("the second process read the entry %q from %s/addrs, want FIADDR %s", out, from.av, local)
	}
	if lines := strings.Split(fileText(t, from.av, "addrs"), "\n"); !slices.Contains(lines, strings.Join(f, " ")) {
		t.Errorf("%s/addrs %q lacks the entry %q the second process inserted", from.av, lines, strings.Join(f, " "))
	}
	return x.numField(t, f[0])
}

// regionBytes is n bytes at off of the region mr (a directory), which the
// rings see by mapping its data file and the shell by reading it.
func (x *confEnv) regionBytes(t *testing.T, mr string, off, n int) []byte {
	t.Helper()
	if _, ok := x.impl.(*ringsImpl); ok {
		reg, err := ring.MapFile(filepath.Join(mr, "data"))
		must(t, err)
		defer reg.Close()
		return bytes.Clone(reg.Mem[off : off+n])
	}
	return readRegion(t, mr, off, n)
}

// readRegion reads n bytes at off of the region mr's data file.
func readRegion(t *testing.T, mr string, off, n int) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(mr, "data"))
	must(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, int64(off))
	must(t, err)
	return b
}

// events reads the EQ until a line starting with each of want has come,
// and returns every line read.
func (x *confEnv) events(t *testing.T, eq string, want ...string) []string {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		missing := slices.ContainsFunc(want, func(w string) bool {
			return !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, w) })
		})
		if !missing {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: events %q, want lines starting with %q", eq, got, want)
		}
		b, err := readNonblock(filepath.Join(eq, "events"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		got = append(got, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
}

// readNonblock reads a queue file with O_NONBLOCK: what is pending, or
// nothing. It uses the system calls directly: an os.File would wait for
// readiness where the file says EAGAIN.
func readNonblock(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 1<<16)
	n, err := syscall.Read(fd, b)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return nil, nil
	case err != nil:
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return b[:n], nil
}

// confCQE is a completion as both implementations see it.
type confCQE struct {
	Flags     fi.CQFlags
	Len, Data uint64
	Tag, Src  uint64
	Err       fi.Errno
	OLen      uint64
	Payload   []byte // the bytes a receive placed (successful or truncated)
	Off       uint64 // rings and FI_MULTI_RECV: where in its receive's buffer a receive's data starts (FI_MULTI_RECV: this message's place)
}

func (c confCQE) String() string {
	return fmt.Sprintf("{%v len=%d data=%#x tag=%#x src=%#x err=%v olen=%d}", c.Flags, c.Len, c.Data, c.Tag, c.Src, c.Err.Name(), c.OLen)
}

// confSend is how a message is sent.
type confSend struct {
	tagged bool
	tag    uint64
	data   *uint64 // remote CQ data
}

// confRecv is how a receive is posted.
type confRecv struct {
	tagged      bool
	tag, ignore uint64
	from        *uint64 // FI_DIRECTED_RECV: the only sender; nil: anyone
	multi       bool    // FI_MULTI_RECV: one buffer for many messages
}

// confIO is the data path of one endpoint, through rings or files. Sends
// carry the endpoint's txFlags; every operation's completion is taken
// with poll.
type confIO interface {
	send(t *testing.T, msg []byte, o confSend)
	// sendFails sends msg, which must fail, and returns its error: the
	// error completion (rings) or the write's errno (shell).
	sendFails(t *testing.T, msg []byte) fi.Errno
	// recv posts a receive of up to n bytes and returns its context.
	recv(t *testing.T, n int, o confRecv) uint64
	// poll waits for the next n completions of the endpoint's CQ.
	poll(t *testing.T, n int) []confCQE
	// quiet reports whether no completion arrives for d.
	quiet(t *testing.T, d time.Duration) bool
	// rma is an RMA write (with data: writedata) or read between the
	// node's region at off and the peer's region key at raddr.
	rma(t *testing.T, write bool, off, n, raddr, key uint64, data *uint64)
	// atomic is fi_atomic (kind "atomic"), fi_fetch_atomic or
	// fi_compare_atomic of op on n bytes of datatype dt: the operand at
	// off in the node's region, the compare values at cmp, the result
	// into res, on the peer's region key at raddr.
	atomic(t *testing.T, kind, op, dt string, off, cmp, res, n, raddr, key uint64)
	mem(t *testing.T, off, n int) []byte
	fill(t *testing.T, off int, b []byte)
}

// confImpl makes objects and gives endpoints their data path.
type confImpl interface {
	name() string
	// obj makes an object of kind (an MR registered with confMRLen bytes
	// and every access) and returns its directory; the test's cleanup
	// removes it.
	obj(t *testing.T, x *confEnv, kind string) string
	// request is the endpoint a connection request to pep became.
	request(t *testing.T, x *confEnv, pep string) string
	io(t *testing.T, x *confEnv, n *confNode) confIO
}

const confMRLen = 1 << 16

// confMRAccess is every scenario region's access: scenarios are RMA
// targets too, and a region allows peers only what it asks for.
const confMRAccess = "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE"

// Regions of the MR: messages sent from [0, 16K), received into [16K, 32K),
// RMA in [32K, 64K).
const (
	confSendOff = 0
	confRecvOff = 16 << 10
	confRMAOff  = 32 << 10
)

// ringsImpl drives endpoints through clients/go/fabricfs and the rings.
type ringsImpl struct {
	objs map[string]any
	seq  int // of the objects it makes with mkobj
}

func (*ringsImpl) name() string { return "rings" }

func (r *ringsImpl) obj(t *testing.T, x *confEnv, kind string) string {
	t.Helper()
	if kind == "srx" || kind == "stx" {
		// The Go client has none: the scenario uses their files.
		r.seq++
		return mkobj(t, x.dom, kind, fmt.Sprintf("conf%d", r.seq))
	}
	dom := x.d.tree(t).Domain(x.run.prov, x.run.dom)
	var o interface{ Close() error }
	var dir string
	switch kind {
	case "eq":
		q, err := dom.NewEQ()
		must(t, err)
		o, dir = q, q.Dir
	case "cq":
		q, err := dom.NewCQ(0)
		must(t, err)
		o, dir = q, q.Dir
	case "mr":
		m, err := dom.NewMR(confMRLen, confMRAccess)
		must(t, err)
		o, dir = m, m.Dir
	case "cntr":
		c, err := dom.NewCntr()
		must(t, err)
		o, dir = c, c.Dir
	case "av":
		a, err := dom.NewAV()
		must(t, err)
		o, dir = a, a.Dir
	case "ep":
		e, err := dom.NewEP()
		must(t, err)
		o, dir = e, e.Dir
	case "pep":
		p, err := dom.NewPEP()
		must(t, err)
		o, dir = p, p.Dir
	default:
		t.Fatalf("no kind %s", kind)
	}
	if r.objs == nil {
		r.objs = map[string]any{}
	}
	r.objs[dir] = o
	t.Cleanup(func() { o.Close(); delete(r.objs, dir) })
	return dir
}

func (r *ringsImpl) request(t *testing.T, x *confEnv, pep string) string {
	t.Helper()
	e, err := r.objs[pep].(*fabricfs.PEP).Request()
	must(t, err)
	r.objs[e.Dir] = e
	t.Cleanup(func() { e.Close(); delete(r.objs, e.Dir) }) // unmaps; the pep's close ends it
	return e.Dir
}

func (r *ringsImpl) io(t *testing.T, x *confEnv, n *confNode) confIO {
	t.Helper()
	var flags uint64
	if s := fileText(t, n.ep, "attr/tx_op_flags"); s != "[  ]" {
		f, err := fi.Parse[fi.OpFlags](s)
		must(t, err)
		flags = uint64(f)
	}
	return &ringsIO{n: n, ep: r.objs[n.ep].(*fabricfs.EP), cq: r.objs[n.cq].(*fabricfs.CQ), mr: r.objs[n.mr].(*fabricfs.MR), flags: flags}
}

type ringsIO struct {
	n     *confNode
	ep    *fabricfs.EP
	cq    *fabricfs.CQ
	mr    *fabricfs.MR
	flags uint64            // the endpoint's tx_op_flags, on every send
	next  uint64            // contexts
	slot  int               // rotating 1K slots of the send and receive areas
	recvs map[uint64]uint64 // a receive's context -> its buffer's offset in the region
}

func (r *ringsIO) post(t *testing.T, w ring.WR) {
	t.Helper()
	r.next++
	w.Context = r.next
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		err := r.ep.Post(r.mr, w)
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

func (r *ringsIO) area(base, n int) uint64 {
	if n > 1<<10 {
		return uint64(base) // large messages use the area's start
	}
	r.slot = (r.slot + 1) % 16
	return uint64(base + r.slot<<10)
}

func (r *ringsIO) send(t *testing.T, msg []byte, o confSend) {
	t.Helper()
	off := r.area(confSendOff, len(msg))
	copy(r.mr.Mem()[off:], msg)
	w := ring.WR{Op: ring.OpSend, Flags: r.flags, Offset: off, Len: uint64(len(msg)), Addr: r.n.peer}
	if o.tagged {
		w.Op, w.Tag = ring.OpTSend, o.tag
	}
	if o.data != nil {
		w.Flags, w.Data = w.Flags|uint64(fi.REMOTE_CQ_DATA), *o.data
	}
	r.post(t, w)
}

func (r *ringsIO) sendFails(t *testing.T, msg []byte) fi.Errno {
	t.Helper()
	r.send(t, msg, confSend{})
	c := r.poll(t, 1)[0]
	if c.Err == 0 {
		t.Fatalf("send of %d bytes completed: %v", len(msg), c)
	}
	return c.Err
}

func (r *ringsIO) recv(t *testing.T, n int, o confRecv) uint64 {
	t.Helper()
	w := ring.WR{Op: ring.OpRecv, Offset: r.area(confRecvOff, n), Len: uint64(n), Addr: fi.ADDR_UNSPEC}
	if o.tagged {
		w.Op, w.Tag, w.Ignore = ring.OpTRecv, o.tag, o.ignore
	}
	if o.from != nil {
		w.Addr = *o.from
	}
	if o.multi {
		w.Flags |= uint64(fi.MULTI_RECV)
	}
	r.post(t, w)
	if r.recvs == nil {
		r.recvs = map[uint64]uint64{}
	}
	r.recvs[r.next] = w.Offset
	if o.multi {
		r.posted(t)
	}
	return r.next
}

// posted waits until the daemon has taken every receive from the rx ring:
// it releases the ring's entries once it has posted them to the provider,
// so messages sent from now on find them posted (a multi-receive buffer
// that finds messages waiting takes them differently).
func (r *ringsIO) posted(t *testing.T) {
	t.Helper()
	rx, err := r.ep.Rx()
	must(t, err)
	for deadline := time.Now().Add(10 * time.Second); rx.Len() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the daemon did not take the receives from the rx ring", r.n.name)
		}
	}
}

func (r *ringsIO) poll(t *testing.T, n int) []confCQE {
	t.Helper()
	var out []confCQE
	for _, c := range pollN(t, r.cq, n) {
		e := confCQE{Flags: fi.CQFlags(c.Flags), Len: c.Len, Data: c.Data, Tag: c.Tag, Src: c.SrcAddr, Err: fi.Errno(-c.Err), OLen: c.OLen}
		if (e.Err == 0 || e.Err == fi.ETRUNC) && e.Flags&fi.CQFlags(fi.RECV) != 0 {
			e.Payload = bytes.Clone(r.mr.Mem()[c.Buf : c.Buf+c.Len])
			if base, ok := r.recvs[c.Context]; ok {
				e.Off = c.Buf - base
			}
		}
		out = append(out, e)
	}
	return out
}

func (r *ringsIO) quiet(t *testing.T, d time.Duration) bool {
	err := r.cq.Wait(d)
	if err != nil && !errors.Is(err, ring.ErrTimeout) {
		t.Fatal(err)
	}
	return err != nil
}

func (r *ringsIO) rma(t *testing.T, write bool, off, n, raddr, key uint64, data *uint64) {
	t.Helper()
	w := ring.WR{Op: ring.OpRead, Flags: r.flags, Offset: off, Len: n, RMAAddr: raddr, RMAKey: key, Addr: r.n.peer}
	if write {
		w.Op = ring.OpWrite
	}
	if data != nil {
		w.Flags, w.Data = w.Flags|uint64(fi.REMOTE_CQ_DATA), *data
	}
	r.post(t, w)
}

func (r *ringsIO) atomic(t *testing.T, kind, op, dt string, off, cmp, res, n, raddr, key uint64) {
	t.Helper()
	o, err := fi.Parse[fi.AtomicOp](op)
	must(t, err)
	d, err := fi.Parse[fi.AtomicType](dt)
	must(t, err)
	w := ring.WR{Op: map[string]uint8{"atomic": ring.OpAtomic, "fetch_atomic": ring.OpFetchAtomic, "compare_atomic": ring.OpCompareAtomic}[kind],
		Flags: r.flags, Offset: off, Len: n, RMAAddr: raddr, RMAKey: key, Addr: r.n.peer,
		ResultDesc: r.mr.Desc(), ResultOffset: res, CompareOffset: cmp, Datatype: uint8(d), AtomicOp: uint8(o)}
	r.post(t, w)
}

func (r *ringsIO) mem(t *testing.T, off, n int) []byte { return bytes.Clone(r.mr.Mem()[off : off+n]) }

func (r *ringsIO) fill(t *testing.T, off int, b []byte) { copy(r.mr.Mem()[off:], b) }

// shellImpl drives endpoints with file reads and writes only.
type shellImpl struct{ seq int }

func (*shellImpl) name() string { return "shell" }

func (s *shellImpl) obj(t *testing.T, x *confEnv, kind string) string {
	t.Helper()
	s.seq++
	dir := mkobj(t, x.dom, kind, fmt.Sprintf("conf%d", s.seq))
	if kind == "mr" {
		must(t, ctl(filepath.Join(dir, "attr", "len"), strconv.Itoa(confMRLen)))
		must(t, ctl(filepath.Join(dir, "attr", "access"), confMRAccess))
		ctlOK(t, dir, "reg")
	}
	return dir
}

func (s *shellImpl) request(t *testing.T, x *confEnv, pep string) string {
	t.Helper()
	id := fileText(t, pep, "listen")
	dir := filepath.Join(x.dom, "ep", id)
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("rmdir %s: %v", dir, err)
		}
	})
	return dir
}

func (s *shellImpl) io(t *testing.T, x *confEnv, n *confNode) confIO {
	t.Helper()
	if !x.run.msg() {
		ctlOK(t, n.ep, fmt.Sprintf("dest %d", n.peer))
	}
	sh := &shellIO{x: x, n: n, recvd: make(chan shellRecv, 16), sent: make(chan error, 64),
		params: map[string]string{"tag": "off", "src": "any", "cqdata": "off", "rxbuf": "off"}}
	t.Cleanup(func() { sh.close(t) }) // before the endpoint's rmdir
	return sh
}

// shellIO: a send is a write to ep data, in a goroutine (it returns when
// the send completes) taking its turn after the previous one; a receive
// is a read of ep data in a goroutine; their tag, remote CQ data, sender
// and receive size are set before with the ctl verbs tag, cqdata, src and
// rxbuf; completions are lines of cq events; memory is mr data read and
// written at offsets; RMA the ctl verbs write and read; a receive with
// FI_MULTI_RECV the ctl verb multi_recv into the memory region, whose
// messages are read from mr data where their completions say.
type shellIO struct {
	x        *confEnv
	n        *confNode
	lastSend chan struct{} // closed when the previous send's write returned
	sends    int           // sends whose result has not been taken from sent
	sent     chan error
	recvs    int // receives whose result has not been taken from recvd
	recvd    chan shellRecv
	params   map[string]string // the data file's parameters: verb -> argument last written
	multi    map[uint64]uint64 // a multi_recv buffer's context -> its offset in the region, until released
}

type shellRecv struct {
	b   []byte
	err error
}

// set writes the ctl verbs that give the data file's next operation the
// parameters p (verb -> argument), where they differ from those last
// written. They are the endpoint's, for sends and receives, so a change
// waits for the previous send's write, and cannot come while a read is
// outstanding (reads are served one at a time, each taking the parameters
// when it posts its receive).
func (s *shellIO) set(t *testing.T, p map[string]string) {
	t.Helper()
	for _, verb := range []string{"tag", "src", "cqdata", "rxbuf"} {
		arg, ok := p[verb]
		if !ok || s.params[verb] == arg {
			continue
		}
		if s.recvs > 0 {
			t.Fatalf("%s: %s %s while a read of data is outstanding", s.n.name, verb, arg)
		}
		if s.lastSend != nil {
			select {
			case <-s.lastSend:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: a write to data did not return", s.n.name)
			}
		}
		ctlOK(t, s.n.ep, verb+" "+arg)
		s.params[verb] = arg
	}
}

func (s *shellIO) send(t *testing.T, msg []byte, o confSend) {
	t.Helper()
	p := map[string]string{"tag": "off", "cqdata": "off"}
	if o.tagged {
		p["tag"] = fmt.Sprintf("%#x 0x0", o.tag)
	}
	if o.data != nil {
		p["cqdata"] = fmt.Sprintf("%#x", *o.data)
	}
	s.set(t, p)
	prev, done := s.lastSend, make(chan struct{})
	s.lastSend = done
	s.sends++
	go func() {
		if prev != nil {
			<-prev
		}
		err := os.WriteFile(filepath.Join(s.n.ep, "data"), msg, 0)
		close(done)
		s.sent <- err
	}()
}

func (s *shellIO) sendFails(t *testing.T, msg []byte) fi.Errno {
	t.Helper()
	s.waitSends(t)
	err := os.WriteFile(filepath.Join(s.n.ep, "data"), msg, 0)
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		t.Fatalf("write of %d bytes to data = %v, want an errno", len(msg), err)
	}
	return fi.Errno(errno)
}

// waitSends waits for every send's write and fails on any error.
func (s *shellIO) waitSends(t *testing.T) {
	t.Helper()
	for ; s.sends > 0; s.sends-- {
		select {
		case err := <-s.sent:
			if err != nil {
				t.Errorf("%s: a write to data failed: %v (err: %s)", s.n.name, err, fileText(t, s.n.ep, "err"))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a write to data did not return", s.n.name)
		}
	}
}

func (s *shellIO) recv(t *testing.T, n int, o confRecv) uint64 {
	t.Helper()
	p := map[string]string{"tag": "off", "src": "any", "rxbuf": strconv.Itoa(n)}
	if o.tagged {
		p["tag"] = fmt.Sprintf("%#x %#x", o.tag, o.ignore)
	}
	if o.from != nil {
		p["src"] = strconv.FormatUint(*o.from, 10)
	}
	if o.multi {
		// Contexts from 1: the data file's receives have op_context 0.
		ctx := uint64(len(s.multi) + 1)
		ctlOK(t, s.n.ep, fmt.Sprintf("multi_recv %s %d %d %d", filepath.Base(s.n.mr), confRecvOff, n, ctx))
		if s.multi == nil {
			s.multi = map[uint64]uint64{}
		}
		s.multi[ctx] = confRecvOff
		return ctx
	}
	s.set(t, p)
	s.recvs++
	go func() {
		b, err := os.ReadFile(filepath.Join(s.n.ep, "data"))
		s.recvd <- shellRecv{b, err}
	}()
	return 0 // the data file's receives have op_context 0
}

func (s *shellIO) poll(t *testing.T, n int) []confCQE {
	t.Helper()
	var out []confCQE
	for deadline := time.Now().Add(10 * time.Second); len(out) < n; {
		b, err := readNonblock(filepath.Join(s.n.cq, "events"))
		must(t, err)
		if len(b) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d completions after 10s: %v", s.n.name, len(out), n, out)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			out = append(out, s.parse(t, l))
		}
	}
	if len(out) > n {
		t.Fatalf("%s: %d completions, want %d: %v", s.n.name, len(out), n, out)
	}
	return out
}

// parse reads a line of cq events; a receive's line takes the bytes its
// read of data returned.
func (s *shellIO) parse(t *testing.T, line string) confCQE {
	t.Helper()
	e := confCQE{Src: fi.ADDR_NOTAVAIL}
	var ctx, buf uint64
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "op_context":
			ctx, err = strconv.ParseUint(v, 0, 64)
		case "buf":
			buf, err = strconv.ParseUint(v, 0, 64)
		case "flags":
			e.Flags, err = fi.Parse[fi.CQFlags](v)
		case "len":
			e.Len, err = strconv.ParseUint(v, 0, 64)
		case "data":
			e.Data, err = strconv.ParseUint(v, 0, 64)
		case "tag":
			e.Tag, err = strconv.ParseUint(v, 0, 64)
		case "src":
			e.Src, err = strconv.ParseUint(v, 0, 64)
		case "olen":
			e.OLen, err = strconv.ParseUint(v, 0, 64)
		case "err":
			for c := fi.Errno(1); c < 512 && e.Err == 0; c++ {
				if c.Name() == v {
					e.Err = c
				}
			}
			if e.Err == 0 {
				err = fmt.Errorf("unknown error name %q", v)
			}
		}
		if err != nil {
			t.Fatalf("%s: cq events line %q: %v", s.n.name, line, err)
		}
	}
	// A receive completes: a message, or with FI_RX_CQ_DATA the remote CQ
	// data of an RMA write (then the read of data returns no bytes).
	recv := e.Flags&fi.CQFlags(fi.RECV) != 0 && e.Flags&fi.CQFlags(fi.REMOTE_WRITE) == 0
	if s.x.rxCQData && e.Flags&fi.CQFlags(fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) == fi.CQFlags(fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) {
		recv = true
	}
	if base, ok := s.multi[ctx]; ok && recv {
		// A message in a multi_recv buffer, or its release.
		if e.Err == 0 || e.Err == fi.ETRUNC {
			e.Payload, e.Off = s.mem(t, int(buf), int(e.Len)), buf-base
		}
		if e.Flags&fi.CQFlags(fi.MULTI_RECV) != 0 {
			delete(s.multi, ctx)
		}
		return e
	}
	if recv {
		if s.recvs == 0 {
			t.Fatalf("%s: a receive completed that the shell did not post: %q", s.n.name, line)
		}
		s.recvs--
		select {
		case r := <-s.recvd:
			if (r.err == nil) != (e.Err == 0) || (e.Err == fi.ETRUNC && !errors.Is(r.err, syscall.EMSGSIZE)) {
				t.Fatalf("%s: read of data = %v, completion %q", s.n.name, r.err, line)
			}
			e.Payload = r.b
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the read of data did not return after its completion %q", s.n.name, line)
		}
	}
	return e
}

func (s *shellIO) quiet(t *testing.T, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := readNonblock(filepath.Join(s.n.cq, "events"))
		must(t, err)
		if len(b) > 0 {
			t.Logf("%s: unexpected completions: %s", s.n.name, b)
			return false
		}
	}
	return true
}

func (s *shellIO) rma(t *testing.T, write bool, off, n, raddr, key uint64, data *uint64) {
	t.Helper()
	cmd := fmt.Sprintf("read %s %d %d %d %#x", filepath.Base(s.n.mr), off, n, raddr, key)
	if write {
		cmd = "write" + strings.TrimPrefix(cmd, "read")
	}
	if data != nil {
		cmd += fmt.Sprintf(" %#x", *data)
	}
	ctlOK(t, s.n.ep, cmd)
}

func (s *shellIO) atomic(t *testing.T, kind, op, dt string, off, cmp, res, n, raddr, key uint64) {
	t.Helper()
	mr := filepath.Base(s.n.mr)
	cmd := fmt.Sprintf("%s %s %s %s %d %d", kind, op, dt, mr, off, n)
	switch kind {
	case "fetch_atomic":
		cmd += fmt.Sprintf(" %s %d", mr, res)
	case "compare_atomic":
		cmd += fmt.Sprintf(" %d %s %d", cmp, mr, res)
	}
	ctlOK(t, s.n.ep, cmd+fmt.Sprintf(" %d %#x", raddr, key))
}

func (s *shellIO) mem(t *testing.T, off, n int) []byte {
	t.Helper()
	return readRegion(t, s.n.mr, off, n)
}

func (s *shellIO) fill(t *testing.T, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(s.n.mr, "data"), os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, int64(off))
	must(t, err)
}

// close waits for the sends, and cancels receives still blocked in a read
// of data so that the endpoint can go.
func (s *shellIO) close(t *testing.T) {
	s.waitSends(t)
	for ; s.recvs > 0; s.recvs-- {
		ctl(filepath.Join(s.n.ep, "ctl"), "cancel 0")
		select {
		case <-s.recvd:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: a read of data did not end", s.n.name)
		}
	}
}
