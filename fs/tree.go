package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	pathpkg "path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// Options configure a mount.
type Options struct {
	// AllowOther lets every user use the tree (needs root or
	// user_allow_other in /etc/fuse.conf).
	AllowOther bool
	// Debug logs every FUSE request.
	Debug bool
	// Poll makes the blocking files waitable (poll.go; go-fuse's
	// EnablePoll). The process serving the tree must then not open its
	// files through package os: Go's runtime would register them with its
	// epoll, which polls them while holding a P, and the answers need a P
	// too. The daemon never does; tests that mount the tree in-process
	// leave Poll off.
	Poll bool
}

// maxWrite is the largest write the kernel hands the daemon at once
// (FUSE's max_write); a longer write(2) arrives as several.
const maxWrite = 1 << 20

// pageSize is the kernel's page size, in which FUSE counts the pages of a
// request (max_pages, maxWrite/pageSize here).
var pageSize = os.Getpagesize()

// maxDataMsg is the largest message one write to ep/N/data sends: one
// page less than maxWrite (dataHandle.Write says why).
var maxDataMsg = maxWrite - pageSize

// Mount serves fab at dir until the returned server is unmounted.
func Mount(fab *core.Fabric, dir string, o Options) (*fuse.Server, error) {
	t := &tree{fab: fab, inos: map[string]uint64{}, next: 2}
	zero := time.Duration(0)
	opts := &fusefs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:    o.AllowOther,
			Options:       []string{"default_permissions"},
			FsName:        "fabricfs",
			Name:          "fabricfs",
			MaxWrite:      maxWrite,
			EnablePoll:    o.Poll,
			DirectMount:   syscall.Geteuid() == 0,
			Debug:         o.Debug,
			DisableXAttrs: true,
			// Read replies are bytes in memory (ReadResultData): with
			// splice on, go-fuse would set up a pipe for each and then
			// fall back to writev anyway.
			DisableSplice: true,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		RootStableAttr:  &fusefs.StableAttr{Ino: 1, Mode: syscall.S_IFDIR},
	}
	root := t.root()
	fab.Gone = func(o *core.Object) { go forget(root, o) }
	return fusefs.Mount(dir, root, opts)
}

// forget has the kernel drop its entries of a dead object's directory and
// of the files under it: else the kernel keeps them (and the nodes, which
// hold the object) until memory runs short, since no one looks the names
// up again when the object came from a clone file. The files' entries go
// too, as one still in use (the file whose release ended the object) would
// stay cached after its last use. It runs on a goroutine of its own, as
// the kernel may hold the directory's lock while it waits for the request
// during which the object died (rmdir).
func forget(root *dir, o *core.Object) {
	n := &root.Inode
	for _, name := range []string{o.Dom.Prov.Name(), o.Dom.Name, o.Kind.String()} {
		if n = n.GetChild(name); n == nil {
			return
		}
	}
	dropEntry(n, o.ID)
}

// dropEntry has the kernel drop its entry of name in parent, and first
// those under it, if it has them.
func dropEntry(parent *fusefs.Inode, name string) {
	n := parent.GetChild(name)
	if n == nil {
		return
	}
	for child := range n.Children() {
		dropEntry(n, child)
	}
	parent.NotifyEntry(name)
}

// tree builds the nodes of one mount.
type tree struct {
	fab *core.Fabric

	mu   sync.Mutex
	inos map[string]uint64 // inode numbers of the fixed part of the tree, by path
	next uint64
}

// ino returns the inode number of a fixed path.
func (t *tree) ino(path string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.inos[path]
	if !ok {
		n = t.next
		t.next++
		t.inos[path] = n
	}
	return n
}

// Inode numbers of objects are derived from the object's serial, like the
// QIDs of Plan 9's devip: objBase + serial<<12 + slot.
const (
	objBase  = 1 << 40
	slotAttr = 1 << 11 // attribute files start here; links at 1<<10
	slotLink = 1 << 10
	// slotJSON: the JSON view F.json of an object's file F is in F's slot
	// plus slotJSON.
	slotJSON = 1 << 9
)

func objIno(o *core.Object, slot int) uint64 { return objBase + o.Serial<<12 + uint64(slot) }

var (
	dirRO  = meta{mode: syscall.S_IFDIR | 0o555}
	fileRO = meta{mode: syscall.S_IFREG | 0o444}
)

func (t *tree) dirEntry(path, name string, m meta, d func() *dir) entry {
	return entry{name: name, ino: t.ino(path), meta: m, node: func() fusefs.InodeEmbedder { return d() }}
}

// fileEntry makes the entry of a file; a file of an object has its path
// in the object's directory ("attr/tx_size"), the entry its last element.
func fileEntry(path string, ino uint64, m meta, obj *core.Object, open func(context.Context, uint32) (fusefs.FileHandle, error)) entry {
	return entry{name: pathpkg.Base(path), ino: ino, meta: m, node: func() fusefs.InodeEmbedder {
		return &file{meta: m, obj: obj, name: path, open: open}
	}}
}

func (t *tree) root() *dir {
	return &dir{meta: dirRO, entries: func() []entry {
		es := []entry{
			fileEntry("abi_version", t.ino("/abi_version"), fileRO, nil, rendered(func() string { return fmt.Sprintf("%d\n", ring.Version) }, nil)),
			fileEntry("version", t.ino("/version"), fileRO, nil, rendered(func() string { return core.DaemonVersions().String() }, nil)),
			t.jsonEntry("/version", fileRO, func() any { return core.DaemonVersions() }),
			fileEntry("info", t.ino("/info"), fileRO, nil, rendered(func() string { t.fab.Rescan(); return infoText(t.fab.Infos()) }, nil)),
			t.jsonEntry("/info", fileRO, func() any { t.fab.Rescan(); return t.fab.Infos() }),
			fileEntry("getinfo", t.ino("/getinfo"), meta{mode: syscall.S_IFREG | 0o666}, nil, t.openGetinfo),
			fileEntry("limits", t.ino("/limits"), fileRO, nil, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				return &textHandle{text: []byte(t.fab.LimitsText(callerUID(ctx)))}, nil
			}),
			fileEntry("limits.json", t.ino("/limits.json"), fileRO, nil, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				return &textHandle{text: []byte(jsonText(t.fab.Uses(callerUID(ctx))))}, nil
			}),
			t.dirEntry("/users", "users", meta{mode: syscall.S_IFDIR | 0o500}, t.usersDir),
		}
		// the trace log (log.go)
		es = append(es, fileEntry("log", t.ino("/log"), meta{mode: syscall.S_IFREG | 0o666}, nil, openLog))
		for _, p := range t.fab.Providers() {
			p := p
			es = append(es, t.dirEntry("/"+p.Name(), p.Name(), dirRO, func() *dir { return t.providerDir(p) }))
		}
		es = append(es, t.rootStatsEntries()...)
		return es
	}}
}

// usersDir lists what each user holds, a file per uid that holds
// anything, readable by root and that user.
func (t *tree) usersDir() *dir {
	return &dir{meta: meta{mode: syscall.S_IFDIR | 0o500}, entries: func() []entry {
		var es []entry
		for _, uid := range t.fab.Users() {
			uid := uid
			name := strconv.FormatUint(uint64(uid), 10)
			m := meta{mode: syscall.S_IFREG | 0o400, uid: uid}
			es = append(es, fileEntry(name, t.ino("/users/"+name), m, nil, rendered(func() string { return t.fab.LimitsText(uid) }, nil)),
				t.jsonEntry("/users/"+name, m, func() any { return t.fab.Uses(uid) }))
		}
		for _, uid := range t.fab.Users() {
			es = append(es, t.userStatsEntries(uid)...)
		}
		return es
	}}
}

// infoText renders entries as `fi_info -v` does: "---" then fi_tostr's text.
func infoText(infos []*fi.Info) string {
	var b strings.Builder
	for _, in := range infos {
		b.WriteString("---\n")
		b.WriteString(in.String())
	}
	return b.String()
}

func (t *tree) providerDir(p core.Provider) *dir {
	base := "/" + p.Name()
	return &dir{meta: dirRO, rescan: t.fab.Rescan, entries: func() []entry {
		es := []entry{
			fileEntry("info", t.ino(base+"/info"), fileRO, nil, rendered(func() string { t.fab.Rescan(); return infoText(t.fab.ProviderInfos(p)) }, nil)),
			t.jsonEntry(base+"/info", fileRO, func() any { t.fab.Rescan(); return t.fab.ProviderInfos(p) }),
		}
		for _, d := range t.fab.Domains(p.Name()) {
			d := d
			es = append(es, t.dirEntry(base+"/"+d.Name, d.Name, dirRO, func() *dir { return t.domainDir(d, base+"/"+d.Name) }))
		}
		es = append(es, t.statsFiles(base+"/stats", func() core.Stats { return t.fab.ProviderStats(p.Name()) })...)
		return es
	}}
}

func (t *tree) domainDir(d *core.Domain, base string) *dir {
	return &dir{meta: dirRO, entries: func() []entry {
		es := []entry{
			fileEntry("info", t.ino(base+"/info"), fileRO, nil, rendered(func() string { return infoText(d.Infos()) }, nil)),
			t.jsonEntry(base+"/info", fileRO, func() any { return d.Infos() }),
			fileEntry("query_atomic", t.ino(base+"/query_atomic"), meta{mode: syscall.S_IFREG | 0o666}, nil, openQueryAtomic(d)),
			fileEntry("query_atomic.json", t.ino(base+"/query_atomic.json"), meta{mode: syscall.S_IFREG | 0o666}, nil, openQueryAtomicJSON(d)),
			t.dirEntry(base+"/attr", "attr", dirRO, func() *dir {
				return &dir{meta: dirRO, entries: func() []entry { return t.domainAttrEntries(d, base+"/attr") }}
			}),
			fileEntry("attr.json", t.ino(base+"/attr.json"), fileRO, nil, func(ctx context.Context, _ uint32) (fusefs.FileHandle, error) {
				uid := callerUID(ctx)
				return &textHandle{render: func() string { return jsonText(core.AttrsRecord(d.Attrs(uid))) }}, nil
			}),
		}
		es = append(es, t.domainStatsEntries(d, base)...)
		es = append(es, t.domainOpsEntry(d, base))
		for k := core.Kind(0); k < core.NumKinds; k++ {
			k := k
			es = append(es, t.dirEntry(base+"/"+k.String(), k.String(), meta{mode: syscall.S_IFDIR | 0o1777}, func() *dir { return t.kindDir(d, k, base+"/"+k.String()) }))
		}
		return es
	}}
}

// attrEntries makes one file per attribute. Attributes of an object (obj
// set) are owned by it; domain attributes (base set) are world-readable,
// and root's to write where writable (attr/tclass).
func (t *tree) attrEntries(obj *core.Object, attrs []core.Attr, base string) []entry {
	es := make([]entry, len(attrs))
	for i, a := range attrs {
		a := a
		m, ino, path := fileRO, uint64(0), a.Name
		if obj != nil {
			path = "attr/" + a.Name
			m, ino = meta{mode: syscall.S_IFREG | 0o400, uid: obj.Owner}, objIno(obj, slotAttr+i)
			if a.Set != nil {
				m.mode = syscall.S_IFREG | 0o600
			}
		} else {
			ino = t.ino(base + "/" + a.Name)
			if a.Set != nil {
				m.mode = syscall.S_IFREG | 0o644
			}
		}
		var set func(context.Context, []byte) error
		if a.Set != nil {
			set = func(ctx context.Context, data []byte) error { return a.Set(string(data)) }
		}
		es[i] = fileEntry(path, ino, m, obj, rendered(func() string { return line(a.Get()) }, set))
	}
	return es
}

// domainAttrEntries are the files of a domain's attr/: each shows what
// the user who opens it sees (core.Domain.Attrs: the auth_key files are
// that user's own, and writable by everyone for themselves); the other
// writable ones (tclass) are root's to write.
func (t *tree) domainAttrEntries(d *core.Domain, base string) []entry {
	attrs := d.Attrs(0)
	es := make([]entry, len(attrs))
	for i, a := range attrs {
		name, m := a.Name, fileRO
		switch {
		case a.PerUser:
			m = meta{mode: syscall.S_IFREG | 0o666}
		case a.Set != nil:
			m = meta{mode: syscall.S_IFREG | 0o644}
		}
		es[i] = fileEntry(name, t.ino(base+"/"+name), m, nil, func(ctx context.Context, _ uint32) (fusefs.FileHandle, error) {
			uid := callerUID(ctx)
			for _, a := range d.Attrs(uid) {
				if a.Name != name {
					continue
				}
				h := &textHandle{render: func() string { return line(a.Get()) }}
				if a.Set != nil {
					h.write = func(_ context.Context, data []byte) error { return a.Set(string(data)) }
				}
				return h, nil
			}
			return nil, core.Errorf(fi.ENOENT, "no attribute %s", name)
		})
	}
	return es
}

func (t *tree) kindDir(d *core.Domain, k core.Kind, base string) *dir {
	objEntry := func(o *core.Object) entry {
		return entry{name: o.ID, ino: objIno(o, 0), meta: meta{mode: syscall.S_IFDIR | 0o700, uid: o.Owner},
			node: func() fusefs.InodeEmbedder { return t.objectDir(o) }}
	}
	clone := fileEntry("clone", t.ino(base+"/clone"), meta{mode: syscall.S_IFREG | 0o666}, nil,
		func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
			uid := callerUID(ctx)
			o, err := d.CreateBy(k, "", uid, callerPid(ctx))
			if err != nil {
				return nil, err
			}
			return &textHandle{ref: ref{obj: o, name: "clone"}, text: []byte(o.ID + "\n"), write: ctlWriter(o, uid), ctl: true}, nil
		})
	return &dir{
		meta: meta{mode: syscall.S_IFDIR | 0o1777},
		entries: func() []entry {
			es := []entry{clone}
			for _, o := range d.List(k) {
				es = append(es, objEntry(o))
			}
			return es
		},
		lookup: func(name string) (entry, bool) {
			if name == clone.name {
				return clone, true
			}
			o, ok := d.Lookup(k, name)
			if !ok {
				return entry{}, false
			}
			return objEntry(o), true
		},
		mkdir: func(ctx context.Context, uid uint32, name string) (entry, error) {
			o, err := d.CreateBy(k, name, uid, callerPid(ctx))
			if err != nil {
				return entry{}, err
			}
			return objEntry(o), nil
		},
		rmdir: func(ctx context.Context, uid uint32, name string) error {
			o, err := d.Resolve(k, name, uid)
			if err != nil {
				return err
			}
			return o.Remove()
		},
	}
}

func ctlWriter(o *core.Object, uid uint32) func(context.Context, []byte) error {
	return func(ctx context.Context, data []byte) error {
		if c, ok := fuse.FromContext(ctx); ok {
			ctx = core.WithCaller(ctx, c.Pid)
		}
		return o.Ctl(ctx, uid, string(data))
	}
}

// Slots of the files of an object directory, for inode numbers.
const (
	slotCtl = 1 + iota
	slotStatus
	slotErr
	slotAttrDir
	slotLocal
	slotRemote
	slotData
	slotListen
	slotEvents
	slotAddrs
	slotValue
	slotErrors
	slotTx
	slotRx
	slotWait
	slotInfo
	slotBuffered
)

func (t *tree) objectDir(o *core.Object) *dir {
	rw := meta{mode: syscall.S_IFREG | 0o600, uid: o.Owner}
	ro := meta{mode: syscall.S_IFREG | 0o400, uid: o.Owner}
	f := func(name string, slot int, m meta, open func(context.Context, uint32) (fusefs.FileHandle, error)) entry {
		return fileEntry(name, objIno(o, slot), m, o, open)
	}
	// j is the JSON view NAME.json of the file NAME in slot (docs/tree.md,
	// "Conventions"): value marshalled at each read at offset 0.
	j := func(name string, slot int, value func() any) entry {
		return f(name+".json", slot+slotJSON, ro, rendered(func() string { return jsonText(value()) }, nil))
	}
	return &dir{meta: meta{mode: syscall.S_IFDIR | 0o700, uid: o.Owner}, entries: func() []entry {
		if !o.Alive() {
			return nil
		}
		es := []entry{
			f("ctl", slotCtl, rw, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				return &textHandle{text: []byte(o.ID + "\n"), write: ctlWriter(o, callerUID(ctx)), ctl: true}, nil
			}),
			f("status", slotStatus, ro, rendered(func() string { return line(o.Status().String()) }, nil)),
			j("status", slotStatus, func() any { return o.Status() }),
			f("err", slotErr, ro, rendered(func() string { return line(o.Err()) }, nil)),
			j("err", slotErr, func() any { return o.ErrInfo() }),
			{name: "attr", ino: objIno(o, slotAttrDir), meta: meta{mode: syscall.S_IFDIR | 0o700, uid: o.Owner}, node: func() fusefs.InodeEmbedder {
				return &dir{meta: meta{mode: syscall.S_IFDIR | 0o700, uid: o.Owner}, entries: func() []entry { return t.attrEntries(o, o.Attrs(), "") }}
			}},
			j("attr", slotAttrDir, func() any { return core.AttrsRecord(o.Attrs()) }),
		}
		es = append(es, t.kindFiles(o, f, j, rw, ro)...)
		if l, ok := o.Impl.(core.Linker); ok {
			for i, ln := range l.Links() {
				target := "../../" + ln.Target.Path()
				es = append(es, entry{name: ln.Name, ino: objIno(o, slotLink+i), meta: meta{mode: syscall.S_IFLNK | 0o777, uid: o.Owner},
					node: func() fusefs.InodeEmbedder {
						return &link{meta: meta{mode: syscall.S_IFLNK | 0o777, uid: o.Owner}, target: target}
					}})
			}
		}
		es = append(es, statsEntries(o, f, j, ro)...)
		return es
	}}
}

type fileMaker func(name string, slot int, m meta, open func(context.Context, uint32) (fusefs.FileHandle, error)) entry

// jsonMaker makes the JSON view of an object's file (objectDir's j).
type jsonMaker func(name string, slot int, value func() any) entry

// kindFiles are the files only some kinds have (DESIGN.md, "Kind-specific files").
func (t *tree) kindFiles(o *core.Object, f fileMaker, j jsonMaker, rw, ro meta) []entry {
	addr := func(get func() (fi.Addr, error)) func() string {
		return func() string {
			a, err := get()
			if err != nil {
				return ""
			}
			return a.String() + "\n"
		}
	}
	// addrJSON is local.json and remote.json: {"addr": ADDRESS or null}.
	addrJSON := func(get func() (fi.Addr, error)) func() any {
		return func() any {
			a, err := get()
			if err != nil {
				return map[string]any{"addr": nil}
			}
			return map[string]any{"addr": a.String()}
		}
	}
	switch impl := o.Impl.(type) {
	case *core.EP:
		return []entry{
			f("local", slotLocal, ro, rendered(addr(impl.Name), nil)),
			j("local", slotLocal, addrJSON(impl.Name)),
			f("remote", slotRemote, ro, rendered(addr(impl.Peer), nil)),
			j("remote", slotRemote, addrJSON(impl.Peer)),
			f("info", slotInfo, rw, rendered(impl.InfoText, func(ctx context.Context, data []byte) error {
				return impl.SetInfo(string(data))
			})),
			j("info", slotInfo, func() any { return impl.Info() }),
			f("data", slotData, rw, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				return newDataHandle(impl, true), nil
			}),
			t.ringEntry(o, "tx", slotTx, func() (*ring.Region, error) { return impl.Ring("tx") }, func() (uint64, error) { return impl.RingSize("tx") }),
			t.ringEntry(o, "rx", slotRx, func() (*ring.Region, error) { return impl.Ring("rx") }, func() (uint64, error) { return impl.RingSize("rx") }),
			t.shmEntry(o, "buffered", slotBuffered, impl.Buffered),
			epOpsEntry(o, impl),
		}
	case *core.SRX:
		return []entry{
			f("data", slotData, ro, func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				return newDataHandle(impl, false), nil
			}),
			t.shmEntry(o, "rx", slotRx, impl.Ring),
		}
	case *core.PEP:
		// listen and listen.json: the id of the endpoint made for each
		// request, as a line or as {"ep": ID}.
		listen := func(form func(id string) string) func(context.Context, uint32) (fusefs.FileHandle, error) {
			return queue(func(ctx context.Context, max int, block bool) ([]string, error) {
				if !block {
					if ready, _ := impl.Ready(); !ready {
						return nil, core.Errorf(fi.EAGAIN, "no pending request")
					}
				}
				ep, err := impl.Next(ctx)
				if err != nil {
					return nil, err
				}
				return []string{form(ep.ID)}, nil
			}, impl.Ready)
		}
		return []entry{
			f("local", slotLocal, ro, rendered(addr(impl.Name), nil)),
			j("local", slotLocal, addrJSON(impl.Name)),
			f("listen", slotListen, ro, listen(func(id string) string { return id })),
			f("listen.json", slotListen+slotJSON, ro, listen(func(id string) string { return jsonLine(map[string]string{"ep": id}) })),
		}
	case *core.CQ:
		return append(eventFiles(f, ro, impl.Read, impl.Ready),
			f("wait", slotWait, ro, watch(func(ctx context.Context, max int, block bool) ([]string, error) {
				n, err := impl.Wait(ctx, block)
				if err != nil || n == 0 {
					return nil, err
				}
				return []string{strconv.FormatUint(uint64(n), 10)}, nil
			}, impl.Ready)),
			t.shmEntry(o, "data", slotData, impl.Region),
		)
	case *core.EQ:
		return eventFiles(f, ro, impl.Read, impl.Ready)
	case *core.AV:
		return []entry{
			f("addrs", slotAddrs, ro, rendered(impl.Addrs, nil)),
			j("addrs", slotAddrs, func() any { return impl.Entries() }),
		}
	case *core.MR:
		return []entry{t.shmEntry(o, "data", slotData, impl.Region)}
	case *core.Cntr:
		setter := func(set func(uint64)) func(context.Context, []byte) error {
			return func(ctx context.Context, data []byte) error {
				v, err := core.ParseUint(strings.TrimSpace(string(data)))
				if err != nil {
					return err
				}
				set(v)
				return nil
			}
		}
		return []entry{
			f("value", slotValue, rw, rendered(func() string { return strconv.FormatUint(impl.Value(), 10) + "\n" }, setter(impl.Set))),
			f("errors", slotErrors, rw, rendered(func() string { return strconv.FormatUint(impl.Errors(), 10) + "\n" }, setter(impl.SetErr))),
		}
	}
	return nil
}

// eventFiles are a CQ's or EQ's events queue and its JSON Lines view,
// both consuming what read pops.
func eventFiles[T fmt.Stringer](f fileMaker, ro meta, read func(context.Context, int, bool) ([]T, error), ready func() (bool, <-chan struct{})) []entry {
	as := func(render func([]T) []string) func(context.Context, int, bool) ([]string, error) {
		return func(ctx context.Context, max int, block bool) ([]string, error) {
			es, err := read(ctx, max, block)
			return render(es), err
		}
	}
	return []entry{
		f("events", slotEvents, ro, queue(as(lines[T]), ready)),
		f("events.json", slotEvents+slotJSON, ro, queue(as(jsonLines[T]), ready)),
	}
}

func lines[T fmt.Stringer](es []T) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

// jsonLines is lines for a queue's `.json` file: each entry as one line
// of JSON (JSON Lines).
func jsonLines[T any](es []T) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = jsonLine(e)
	}
	return out
}

// jsonLine is v as one line of JSON, without the newline. A value the
// tree makes always marshals; were one to fail, the line is a JSON string
// saying why rather than text that is not JSON.
func jsonLine(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal("cannot encode: " + err.Error())
	}
	return string(b)
}

// jsonText is a `.json` file's text: v as one line of JSON.
func jsonText(v any) string { return jsonLine(v) + "\n" }

// jsonEntry makes PATH.json, the JSON view of the file (or attr directory)
// at the fixed path PATH (docs/tree.md, "Conventions"): value marshalled
// at each read at offset 0.
func (t *tree) jsonEntry(path string, m meta, value func() any) entry {
	return fileEntry(pathpkg.Base(path)+".json", t.ino(path+".json"), m, nil, rendered(func() string { return jsonText(value()) }, nil))
}
