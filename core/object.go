package core

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// Kind is the kind of a domain object; its String is the directory name.
type Kind int

const (
	KindEP   Kind = iota // active endpoint
	KindPEP              // passive endpoint
	KindCQ               // completion queue
	KindEQ               // event queue
	KindAV               // address vector
	KindMR               // memory region
	KindCntr             // counter
	KindSTX              // shared transmit context (fi_stx_context)
	KindSRX              // shared receive context (fi_srx_context)
	NumKinds
)

var kindNames = [NumKinds]string{"ep", "pep", "cq", "eq", "av", "mr", "cntr", "stx", "srx"}

func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return "kind" + strconv.Itoa(int(k))
	}
	return kindNames[k]
}

// ParseKind returns the kind named s ("ep", "cq"...).
func ParseKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Impl is the kind-specific part of an object: *EP, *PEP, *CQ, *EQ, *AV, *MR,
// *Cntr, *STX or *SRX.
type Impl interface {
	// Status is the object's summary after its kind and id: the status
	// file's line and status.json's fields.
	Status() Record
	// Attrs lists the object's attributes, each one file in attr/.
	Attrs() []Attr
	// Close releases the object. It is called once, when the last reference
	// is gone, without any lock held.
	Close() error
}

// Link is a binding shown in the tree: ep/0/txcq -> cq 3.
type Link struct {
	Name   string
	Target *Object
}

// Linker is implemented by objects that hold bindings to other objects.
type Linker interface {
	Links() []Link
}

// Attr is one attribute of an object or domain: one value, one file.
type Attr struct {
	Name string
	Get  func() string
	// Set changes the value; nil for read-only attributes. It returns an
	// error, for example when the object is already enabled.
	Set func(string) error
	// PerUser says that each user sees and sets a value of their own (a
	// domain's auth_key), so that every user may write it.
	PerUser bool
}

// Object is one object of a domain: a directory in the tree.
//
// An object lives while anything references it: each open file of it, a
// pin (made by mkdir, or by the passive endpoint that accepted it), and each
// object bound to it. When the count drops to zero it is closed and leaves
// its domain. Remove (rmdir) closes it at once, open files or not, and
// fails with fi.EBUSY while another object is bound to this one, as
// fi_close(3) does.
type Object struct {
	Kind   Kind
	ID     string // directory name: a number for clone objects, else the mkdir name
	Serial uint64 // unique for the life of the daemon; fs derives inode numbers from it
	Owner  uint32 // uid of the creator
	Pid    uint32 // the process that made it (mkdir, clone; an accepted endpoint: its pep's); 0 if unknown
	Dom    *Domain
	Impl   Impl

	// guarded by Dom.mu
	opens    int
	pinned   bool
	boundBy  int
	dead     bool
	children []*Object // objects this one pins (endpoints accepted by a pep)
	// uncharged: an endpoint made from a connection request, not yet
	// counted in its owner's Objects (charge).
	uncharged bool

	errMu   sync.Mutex
	lastErr string
	lastOp  string   // the operation lastErr names, "" if it names none
	errCode fi.Errno // lastErr's libfabric code
}

var serial atomic.Uint64

// Path is the object's name within its domain: "ep/3".
func (o *Object) Path() string { return o.Kind.String() + "/" + o.ID }

func (o *Object) String() string { return o.Kind.String() + " " + o.ID }

// Status is the object's status, kind and id first: its String is the
// status file's line, "ep 0 msg connected ...".
func (o *Object) Status() Record {
	return append(Record{bare("kind", o.Kind.String()), bare("id", o.ID)}, o.Impl.Status()...)
}

// Err is the text of the last failed command or asynchronous error.
func (o *Object) Err() string {
	o.errMu.Lock()
	defer o.errMu.Unlock()
	return o.lastErr
}

// MaxErrLen bounds what an object's err keeps: a longer sentence (one
// that quotes a huge write) is cut to its first MaxErrLen-3 bytes and "...".
const MaxErrLen = 1024

// SetErr records err as the object's last error, at most MaxErrLen bytes
// of it; nil clears nothing.
func (o *Object) SetErr(err error) {
	if err == nil {
		return
	}
	s := Abbrev(err.Error(), MaxErrLen)
	if trace.On(trace.Error) {
		o.tracef(trace.Error, "err %s", s)
	}
	var op string
	if e, ok := err.(*Error); ok && strings.HasPrefix(s, e.Op+": ") {
		op = e.Op
	}
	o.errMu.Lock()
	o.lastErr, o.lastOp, o.errCode = s, op, Code(err)
	o.errMu.Unlock()
}

// ErrInfo is an object's last error as err.json shows it; every field is
// null before the first error.
type ErrInfo struct {
	Err    *string `json:"err"`    // the err file's line, "OP: reason"
	Op     *string `json:"op"`     // OP, the operation that failed
	Reason *string `json:"reason"` // the line after "OP: "
	Code   *string `json:"code"`   // the libfabric error code's name, FI_EINVAL
}

// ErrInfo is the object's last error, as Err has it, in parts.
func (o *Object) ErrInfo() ErrInfo {
	o.errMu.Lock()
	defer o.errMu.Unlock()
	if o.lastErr == "" {
		return ErrInfo{}
	}
	s, op, code := o.lastErr, o.lastOp, o.errCode.Name()
	reason := strings.TrimPrefix(s, op+": ")
	info := ErrInfo{Err: &s, Reason: &reason}
	if op != "" {
		info.Op = &op
	}
	if code != "" {
		info.Code = &code
	}
	return info
}

// Abbrev returns s if it has at most n bytes (n > 3), else its first
// bytes, cut at a character boundary, and "...", n bytes at most.
func Abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Open takes a reference for an open file. It fails with fi.ENOENT once the
// object is gone.
func (o *Object) Open() error {
	d := o.Dom
	d.mu.Lock()
	defer d.mu.Unlock()
	if o.dead {
		return gone(o)
	}
	o.opens++
	return nil
}

// Release drops the reference of an open file.
func (o *Object) Release() {
	d := o.Dom
	d.mu.Lock()
	o.opens--
	dead := d.reapLocked(o)
	d.mu.Unlock()
	d.closeAll(dead)
}

// Remove closes the object (rmdir), also while its files are open: it
// leaves the domain, its rings get RING_DEAD and are no longer served
// (mappings of them stay memory), and its open files fail from then on
// with fi.ENOENT (Ctl, attribute writes; fs checks Alive for the others);
// its Close refuses whatever would acquire something anew.
// It fails with fi.EBUSY while another object is bound to it or when it
// has no pin (a clone object, which lives while its files are open).
func (o *Object) Remove() error {
	d := o.Dom
	d.mu.Lock()
	switch {
	case o.dead:
		d.mu.Unlock()
		return gone(o)
	case o.boundBy > 0:
		n := o.boundBy
		d.mu.Unlock()
		return Errorf(fi.EBUSY, "%s is bound to %d other object(s); close or unbind them first", o, n)
	case !o.pinned:
		d.mu.Unlock()
		return Errorf(fi.EBUSY, "%s lives while its files are open; close them instead", o)
	}
	o.pinned = false
	dead := d.killLocked(o)
	d.mu.Unlock()
	d.closeAll(dead)
	return nil
}

// gone is the error of a use of o after it was closed: fi.ENOENT, as a
// removed file's.
func gone(o *Object) error { return Errorf(fi.ENOENT, "%s is gone", o) }

// Attrs are the object's attributes; setting one fails with fi.ENOENT once
// the object is gone.
func (o *Object) Attrs() []Attr {
	attrs := o.Impl.Attrs()
	for i := range attrs {
		if set := attrs[i].Set; set != nil {
			attrs[i].Set = func(s string) error {
				if !o.Alive() {
					return gone(o)
				}
				return set(s)
			}
		}
	}
	return attrs
}

// Alive reports whether the object is still in its domain.
func (o *Object) Alive() bool {
	o.Dom.mu.Lock()
	defer o.Dom.mu.Unlock()
	return !o.dead
}

// hold records that another object is bound to o.
func (o *Object) hold() error {
	d := o.Dom
	d.mu.Lock()
	defer d.mu.Unlock()
	if o.dead {
		return gone(o)
	}
	o.boundBy++
	return nil
}

// drop undoes hold.
func (o *Object) drop() {
	d := o.Dom
	d.mu.Lock()
	o.boundBy--
	dead := d.reapLocked(o)
	d.mu.Unlock()
	d.closeAll(dead)
}

// adoptIfAlive pins child for as long as o lives; it returns false if o is
// already gone.
func (o *Object) adoptIfAlive(child *Object) bool {
	d := o.Dom
	d.mu.Lock()
	defer d.mu.Unlock()
	if o.dead {
		return false
	}
	child.pinned = true
	o.children = append(o.children, child)
	return true
}

// reapLocked marks o dead if nothing references it and returns the objects
// that died (o, and the children it pinned that nothing else holds).
func (d *Domain) reapLocked(o *Object) []*Object {
	if o.dead || o.opens > 0 || o.pinned || o.boundBy > 0 {
		return nil
	}
	return d.killLocked(o)
}

// killLocked marks o dead, whatever references it, and returns the objects
// that died (o, and the children it pinned that nothing else holds).
func (d *Domain) killLocked(o *Object) []*Object {
	d.forgetLocked(o)
	dead := []*Object{o}
	for _, c := range o.children {
		if c.pinned && !c.dead {
			c.pinned = false
			dead = append(dead, d.reapLocked(c)...)
		}
	}
	o.children = nil
	return dead
}

// forgetLocked marks o dead and takes it out of the domain's tables.
func (d *Domain) forgetLocked(o *Object) {
	o.dead = true
	delete(d.objs[o.Kind], o.ID)
	delete(d.bySerial, o.Serial)
	if d.stats.closing == nil {
		d.stats.closing = map[*Object]bool{}
	}
	d.stats.closing[o] = true // until closeAll retires it
	o.giveObject()
}

// giveObject gives back the owner's charge for o, if it was charged.
func (o *Object) giveObject() {
	if !o.uncharged {
		o.Dom.fab.Give(o.Owner, Objects, 1)
	}
}

// charge counts o, made uncharged, in its owner's Objects, or fails with
// FI_ENOSPC past the owner's limit; uncharge undoes it.
func (o *Object) charge() error {
	d := o.Dom
	d.mu.Lock()
	defer d.mu.Unlock()
	if !o.uncharged || o.dead {
		return nil
	}
	if err := d.fab.Take(o.Owner, Objects, 1); err != nil {
		return err
	}
	o.uncharged = false
	return nil
}

func (o *Object) uncharge() {
	d := o.Dom
	d.mu.Lock()
	defer d.mu.Unlock()
	if !o.uncharged && !o.dead {
		d.fab.Give(o.Owner, Objects, 1)
		o.uncharged = true
	}
}

// closeAll closes objects that died, outside the domain lock.
func (d *Domain) closeAll(dead []*Object) {
	for _, o := range dead {
		if err := o.Impl.Close(); err != nil {
			d.fab.logf("close %s/%s: %v", d.Name, o.Path(), err)
		}
		if trace.On(trace.Object) {
			o.tracef(trace.Object, "closed")
		}
		o.log(slog.LevelInfo, "object closed")
		if d.fab.Gone != nil {
			d.fab.Gone(o)
		}
		d.retire(o)
	}
}

// Domain is one domain of a provider (fi_domain): its attributes and the
// objects created in it.
type Domain struct {
	Prov Provider
	Name string
	prov ProviderDomain
	fab  *Fabric

	mu       sync.Mutex
	objs     [NumKinds]map[string]*Object
	next     [NumKinds]uint64
	bySerial map[uint64]*Object
	mrKeys   map[uint64]*Object // registered memory regions by key
	authKeys map[uint32][]byte  // each user's default authorization key (authkey.go)
	stats    domainStats        // the counts of closed objects (stats.go)
	mrCntrs  atomic.Int64       // counters bound to its regions (MR.BindCntr)

	// atomicTypes are the endpoint types the provider domain takes
	// atomics on (answersAtomics), found when the domain opened.
	atomicTypes map[fi.EPType]bool

	// tclass is domain_attr.tclass, root's choice in attr/tclass: the
	// default traffic class of the endpoints made after (bestInfo).
	tclass atomic.Uint32
}

// lookupSerial finds a live object of kind k by its serial (an MR's desc).
func (d *Domain) lookupSerial(k Kind, serial uint64) (*Object, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.bySerial[serial]
	if !ok || o.Kind != k {
		return nil, false
	}
	return o, true
}

// Infos returns the fi_info entries of this domain, best first, as the
// tree offers them (offer).
func (d *Domain) Infos() []*fi.Info {
	var out []*fi.Info
	for _, in := range d.Prov.Infos() {
		if in.DomainAttr != nil && in.DomainAttr.Name == d.Name {
			out = append(out, d.offer(in))
		}
	}
	return out
}

// Lookup finds the object of kind k called id.
func (d *Domain) Lookup(k Kind, id string) (*Object, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[k][id]
	return o, ok
}

// List returns the objects of kind k, clone ids in numeric order first.
func (d *Domain) List(k Kind) []*Object {
	d.mu.Lock()
	out := make([]*Object, 0, len(d.objs[k]))
	for _, o := range d.objs[k] {
		out = append(out, o)
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Serial < out[j].Serial })
	return out
}

// Create makes a new object of kind k owned by uid. With name "" it gets the
// next number and lives while its files are open (clone); with a name it is
// pinned until Remove (mkdir).
func (d *Domain) Create(k Kind, name string, uid uint32) (*Object, error) {
	return d.create(k, name, uid, 0, true)
}

// CreateBy is Create for the process pid (Object.Pid).
func (d *Domain) CreateBy(k Kind, name string, uid, pid uint32) (*Object, error) {
	return d.create(k, name, uid, pid, true)
}

// create is Create; an object made with charged false is not counted in
// uid's Objects until charge.
func (d *Domain) create(k Kind, name string, uid, pid uint32, charged bool) (*Object, error) {
	if k < 0 || k >= NumKinds {
		return nil, Errorf(fi.EINVAL, "no object kind %d", k)
	}
	if name != "" {
		if err := checkName(name); err != nil {
			return nil, err
		}
	}
	if charged {
		if err := d.fab.Take(uid, Objects, 1); err != nil {
			return nil, err
		}
	}
	o := &Object{Kind: k, Owner: uid, Pid: pid, Dom: d, Serial: serial.Add(1), uncharged: !charged}
	impl, err := newImpl[k](o)
	if err != nil {
		o.giveObject()
		return nil, err
	}
	o.Impl = impl
	d.mu.Lock()
	if name == "" {
		name = strconv.FormatUint(d.next[k], 10)
		d.next[k]++
		o.opens = 1 // the creator's open file
	} else {
		if _, dup := d.objs[k][name]; dup {
			d.mu.Unlock()
			o.giveObject()
			impl.Close()
			return nil, Errorf(fi.EEXIST, "%s %s already exists", k, name)
		}
		o.pinned = true
	}
	o.ID = name
	d.objs[k][name] = o
	d.bySerial[o.Serial] = o
	d.mu.Unlock()
	if trace.On(trace.Object) {
		o.tracef(trace.Object, "made")
	}
	o.log(slog.LevelInfo, "object made")
	return o, nil
}

// newImpl builds the kind-specific part of a new object.
var newImpl [NumKinds]func(*Object) (Impl, error)

func init() {
	newImpl = [NumKinds]func(*Object) (Impl, error){
		KindEP:   newEP,
		KindPEP:  newPEP,
		KindCQ:   newCQ,
		KindEQ:   newEQ,
		KindAV:   newAV,
		KindMR:   newMR,
		KindCntr: newCntr,
		KindSTX:  newSTX,
		KindSRX:  newSRX,
	}
}

// checkName validates a mkdir name: letters, digits, '.', '_', '-', not all
// digits (those are clone ids), at most 64 bytes.
func checkName(name string) error {
	if len(name) > 64 {
		return Errorf(fi.EINVAL, "name %q is longer than 64 bytes", name)
	}
	digits := true
	for _, c := range name {
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '_', c == '-':
			digits = false
		default:
			return Errorf(fi.EINVAL, "name %q: use letters, digits, '.', '_' and '-'", name)
		}
	}
	if digits {
		return Errorf(fi.EINVAL, "name %q: all-digit names are reserved for clone objects", name)
	}
	if name == "clone" || name[0] == '.' {
		return Errorf(fi.EINVAL, "name %q is reserved", name)
	}
	return nil
}

// Resolve finds the object of kind k named id for uid: the one ownership
// check of the tree. Only the object's owner and root may use it.
func (d *Domain) Resolve(k Kind, id string, uid uint32) (*Object, error) {
	o, ok := d.Lookup(k, id)
	if !ok {
		return nil, Errorf(fi.ENOENT, "no such %s in domain %s", k, d.Name)
	}
	if uid != 0 && o.Owner != uid {
		return nil, Errorf(fi.EACCES, "%s belongs to another user", o)
	}
	return o, nil
}

// Attrs are the domain's fabric and domain attributes (fi_domain(3)), from
// its best fi_info entry, as the user uid sees them: auth_key and
// auth_key_size are uid's default authorization key (authkey.go), which
// uid may write.
func (d *Domain) Attrs(uid uint32) []Attr {
	infos := d.Infos()
	if len(infos) == 0 {
		return nil
	}
	attrs := domainAttrs(d, infos[0])
	for i, a := range attrs {
		if a.Name == "auth_key_size" {
			attrs[i].Get = func() string { return strconv.Itoa(len(d.AuthKey(uid))) }
			attrs = slices.Insert(attrs, i+1, Attr{Name: "auth_key", Get: func() string { return d.AuthKeyText(uid) },
				Set: func(s string) error { return d.SetAuthKey(uid, s) }, PerUser: true})
			break
		}
	}
	return attrs
}

// setTClass is a write of attr/tclass: the domain's default traffic
// class, "the default traffic class that will be associated any endpoints
// created within the domain" (fi_domain(3)). Endpoints made before keep
// theirs.
func (d *Domain) setTClass(s string) error {
	v, err := parseTClass(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	d.tclass.Store(uint32(v))
	return nil
}

func (d *Domain) String() string { return fmt.Sprintf("%s/%s", d.Prov.Name(), d.Name) }
