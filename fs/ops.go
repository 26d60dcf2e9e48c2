package fs

import (
	"context"
	"syscall"

	"github.com/fabricfs/fabricfs/core"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
)

// The ops/ directory of a domain or an endpoint: one directory per set of
// provider-specific operations (fi_open_ops(3)), named as the set is, with
// one file per value. The sets are asked for again at each lookup and
// each read, so that a file shows the value of the moment, and nothing
// once its set is gone (the endpoint closed).

// slotOps is the inode slot of an endpoint's ops/ directory; set i is
// at slotOps+1+i*opsStride and its value j just after it. Sets beyond
// maxOpsSets and values beyond opsStride-1 are not shown (none comes
// close: the providers offer one set of a few values).
const (
	slotOps    = 256
	opsStride  = 32
	maxOpsSets = (slotJSON - slotOps - 1) / opsStride
)

// opsNodes says how the nodes of one ops/ directory are numbered and
// owned.
type opsNodes struct {
	obj *core.Object // the endpoint, or nil for a domain's
	// ino numbers a node: set -1 is ops/ itself, value -1 a set's
	// directory.
	ino       func(set int, setName string, value int, valueName string) uint64
	dir       meta
	ro, rw    meta
	sets      func() []core.OpsSet
	pathOfSet func(name string) string // for the files' names in logs
}

func (n *opsNodes) opsDir() *dir {
	return &dir{meta: n.dir, entries: func() []entry {
		var es []entry
		for i, s := range n.sets() {
			if i >= maxOpsSets {
				break
			}
			name := s.Name
			es = append(es, entry{name: name, ino: n.ino(i, name, -1, ""), meta: n.dir, node: func() fusefs.InodeEmbedder { return n.setDir(i, name) }})
		}
		return es
	}}
}

// setDir is ops/NAME/, set i when it was listed.
func (n *opsNodes) setDir(i int, name string) *dir {
	return &dir{meta: n.dir, entries: func() []entry {
		s, ok := core.FindOps(n.sets(), name)
		if !ok {
			return nil
		}
		var es []entry
		for j, v := range s.Values {
			if j >= opsStride-1 {
				break
			}
			m, value := n.ro, v.Name
			var set func(context.Context, []byte) error
			if v.Set != nil {
				m = n.rw
				set = func(ctx context.Context, data []byte) error {
					a, ok := n.value(name, value)
					if !ok || a.Set == nil {
						return syscall.ENOENT
					}
					return a.Set(string(data))
				}
			}
			get := func() string {
				a, ok := n.value(name, value)
				if !ok {
					return ""
				}
				return line(a.Get())
			}
			es = append(es, fileEntry(n.pathOfSet(name)+"/"+value, n.ino(i, name, j, value), m, n.obj, rendered(get, set)))
		}
		return es
	}}
}

// value finds value of the set called name now.
func (n *opsNodes) value(name, value string) (core.Attr, bool) {
	s, ok := core.FindOps(n.sets(), name)
	if !ok {
		return core.Attr{}, false
	}
	for _, a := range s.Values {
		if a.Name == value {
			return a, true
		}
	}
	return core.Attr{}, false
}

// domainOpsEntry is a domain's ops/: its files are root's to write.
func (t *tree) domainOpsEntry(d *core.Domain, base string) entry {
	path := base + "/ops"
	n := &opsNodes{
		dir: dirRO, ro: fileRO, rw: meta{mode: syscall.S_IFREG | 0o644},
		sets:      d.Ops,
		pathOfSet: func(name string) string { return path + "/" + name },
	}
	n.ino = func(set int, setName string, value int, valueName string) uint64 {
		p := path
		if set >= 0 {
			p += "/" + setName
		}
		if value >= 0 {
			p += "/" + valueName
		}
		return t.ino(p)
	}
	return t.dirEntry(path, "ops", dirRO, n.opsDir)
}

// epOpsEntry is an endpoint's ops/, its owner's.
func epOpsEntry(o *core.Object, ep *core.EP) entry {
	n := &opsNodes{
		obj:       o,
		dir:       meta{mode: syscall.S_IFDIR | 0o700, uid: o.Owner},
		ro:        meta{mode: syscall.S_IFREG | 0o400, uid: o.Owner},
		rw:        meta{mode: syscall.S_IFREG | 0o600, uid: o.Owner},
		sets:      ep.Ops,
		pathOfSet: func(name string) string { return "ops/" + name },
	}
	n.ino = func(set int, _ string, value int, _ string) uint64 {
		if set < 0 {
			return objIno(o, slotOps)
		}
		return objIno(o, slotOps+1+set*opsStride+1+value)
	}
	return entry{name: "ops", ino: n.ino(-1, "", -1, ""), meta: n.dir, node: func() fusefs.InodeEmbedder { return n.opsDir() }}
}
