package fs

import (
	"context"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// meta is what every node reports in getattr.
type meta struct {
	mode uint32 // type and permission bits
	uid  uint32
}

// mounted is when the tree was mounted: the time of every file.
var mounted = time.Now()

func (m *meta) fill(out *fuse.Attr) {
	out.SetTimes(&mounted, &mounted, &mounted)
	out.Mode = m.mode
	out.Owner = fuse.Owner{Uid: m.uid}
	out.Nlink = 1
	if m.mode&syscall.S_IFMT == syscall.S_IFDIR {
		out.Nlink = 2
	}
}

// entry is one name in a directory, with how to build its node.
type entry struct {
	name string
	ino  uint64
	meta meta
	node func() fusefs.InodeEmbedder
}

// dir is a directory whose entries are computed at every lookup and
// readdir, so the tree always shows the model as it is.
type dir struct {
	fusefs.Inode
	meta
	entries func() []entry
	// lookup, if set, finds one entry by name without listing them all:
	// a directory of thousands of objects is looked up in once per path
	// walk.
	lookup func(name string) (entry, bool)
	// rescan, if set, looks for entries that appeared outside the model
	// (core.Fabric.Rescan): at readdir, and at a lookup of a name not
	// found, which is then looked up again.
	rescan func()
	mkdir  func(ctx context.Context, uid uint32, name string) (entry, error) // nil: EPERM
	rmdir  func(ctx context.Context, uid uint32, name string) error
}

var (
	_ = (fusefs.NodeLookuper)((*dir)(nil))
	_ = (fusefs.NodeReaddirer)((*dir)(nil))
	_ = (fusefs.NodeGetattrer)((*dir)(nil))
	_ = (fusefs.NodeMkdirer)((*dir)(nil))
	_ = (fusefs.NodeRmdirer)((*dir)(nil))
)

func (d *dir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fill(&out.Attr)
	return 0
}

func (d *dir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	for try := 0; try < 2; try++ {
		if d.lookup != nil {
			if e, ok := d.lookup(name); ok {
				return d.child(ctx, e, out), 0
			}
		} else {
			for _, e := range d.entries() {
				if e.name == name {
					return d.child(ctx, e, out), 0
				}
			}
		}
		if d.rescan == nil {
			break
		}
		d.rescan()
	}
	return nil, syscall.ENOENT
}

func (d *dir) child(ctx context.Context, e entry, out *fuse.EntryOut) *fusefs.Inode {
	e.meta.fill(&out.Attr)
	out.Ino = e.ino
	return d.NewInode(ctx, e.node(), fusefs.StableAttr{Mode: e.meta.mode & syscall.S_IFMT, Ino: e.ino})
}

func (d *dir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	if d.rescan != nil {
		d.rescan()
	}
	es := d.entries()
	list := make([]fuse.DirEntry, len(es))
	for i, e := range es {
		list[i] = fuse.DirEntry{Name: e.name, Ino: e.ino, Mode: e.meta.mode}
	}
	return fusefs.NewListDirStream(list), 0
}

func (d *dir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if d.mkdir == nil {
		return nil, syscall.EPERM
	}
	e, err := d.mkdir(ctx, callerUID(ctx), name)
	if err != nil {
		return nil, errno(err)
	}
	return d.child(ctx, e, out), 0
}

func (d *dir) Rmdir(ctx context.Context, name string) syscall.Errno {
	if d.rmdir == nil {
		return syscall.EPERM
	}
	return errno(d.rmdir(ctx, callerUID(ctx), name))
}

// file is a file whose open makes a handle. If obj is set, each open file
// holds a reference on it, and name is the file's name in the object's
// directory, for the sentences in err.
type file struct {
	fusefs.Inode
	meta
	obj  *core.Object
	name string
	open func(ctx context.Context, flags uint32) (fusefs.FileHandle, error)
	size func() uint64 // nil: 0, as for generated files
}

var (
	_ = (fusefs.NodeOpener)((*file)(nil))
	_ = (fusefs.NodeGetattrer)((*file)(nil))
	_ = (fusefs.NodeSetattrer)((*file)(nil))
)

// Getattr fills the file's attributes; an open handle that knows better
// (a shared-memory file's, whose memory may outlive its object) has the
// last word.
func (f *file) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	if g, ok := fh.(fusefs.FileGetattrer); ok {
		return g.Getattr(ctx, out)
	}
	return 0
}

func (f *file) fillAttr(out *fuse.Attr) {
	f.fill(out)
	if f.size != nil {
		out.Size = f.size()
	}
}

// Setattr accepts and ignores truncation, so `echo 64 > attr/tx_size`
// works, except on shared memory (f.size set), whose size is fixed: as the
// sealed memfd behind it does in the symlink mode, it refuses a new size.
func (f *file) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && f.size != nil && sz != f.size() {
		return syscall.EPERM
	}
	f.fillAttr(&out.Attr)
	return 0
}

// Open refuses to open a file without write permission for writing, also
// to root (whom default_permissions lets through), with EACCES as sysfs
// does: such a file takes no writes.
func (f *file) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY && f.mode&0o222 == 0 {
		return nil, 0, fail(f.obj, "open "+f.name, core.Errorf(fi.EACCES, "the file is read-only"))
	}
	if f.obj != nil {
		if err := f.obj.Open(); err != nil {
			return nil, 0, errno(err)
		}
	}
	h, err := f.open(ctx, flags)
	if err != nil {
		if f.obj != nil {
			f.obj.Release()
		}
		return nil, 0, fail(f.obj, "open "+f.name, err)
	}
	if r, ok := h.(interface {
		setRef(*core.Object, string, *fusefs.Inode)
	}); ok && f.obj != nil {
		r.setRef(f.obj, f.name, &f.Inode)
	}
	if n, ok := h.(interface{ setNode(*fusefs.Inode) }); ok {
		n.setNode(&f.Inode) // a file of no object whose poll notifies its node (/log)
	}
	if _, ok := h.(fusefs.FilePassthroughFder); ok {
		return h, 0, 0 // the kernel serves it from the backing file
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// link is a symbolic link: a binding such as ep/0/txcq -> ../../cq/3.
type link struct {
	fusefs.Inode
	meta
	target string
	// resolve, if set, gives the target instead, for the reading caller.
	// Such a link's stat size is 0: stat must not do what resolving does
	// (shm.Allocator.Link may start a process).
	resolve func(ctx context.Context) (string, syscall.Errno)
}

var (
	_ = (fusefs.NodeReadlinker)((*link)(nil))
	_ = (fusefs.NodeGetattrer)((*link)(nil))
)

func (l *link) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if l.resolve != nil {
		s, errno := l.resolve(ctx)
		return []byte(s), errno
	}
	return []byte(l.target), 0
}

func (l *link) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.fill(&out.Attr)
	out.Size = uint64(len(l.target))
	return 0
}

func callerUID(ctx context.Context) uint32 {
	uid, _ := caller(ctx)
	return uid
}

// caller is the user and group of the process behind a request (root
// when there is none).
func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

func openFlagsNonblock(flags uint32) bool { return flags&syscall.O_NONBLOCK != 0 }
