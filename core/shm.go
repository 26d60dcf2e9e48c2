package core

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// Mapping modes: how a client reaches the shared memory of a ring or region.
const (
	// MapPassthrough serves the file itself with FUSE passthrough to a
	// daemon-owned memfd (root, Linux >= 6.9).
	MapPassthrough = "passthrough"
	// MapSymlink makes the file a symbolic link to a file in a private
	// tmpfs directory per uid.
	MapSymlink = "symlink"
)

// Shm allocates the shared memory behind ring files and memory regions.
type Shm struct {
	// Mode is MapPassthrough or MapSymlink.
	Mode string
	// Dir is the tmpfs directory under which MapSymlink files live, one
	// 0700 subdirectory per uid. fabricfs creates and removes it.
	Dir string

	mu   sync.Mutex
	uids map[uint32]bool
}

// NewShm prepares shared memory in mode; with MapSymlink it makes a private
// directory under base (a tmpfs; "" means /dev/shm, or the temporary
// directory where there is no /dev/shm).
func NewShm(mode, base string) (*Shm, error) {
	s := &Shm{Mode: mode, uids: map[uint32]bool{}}
	if base == "" {
		base = shmBase()
	}
	switch mode {
	case MapPassthrough:
	case MapSymlink:
		dir, err := os.MkdirTemp(base, "fabricfs.")
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(dir, 0o711); err != nil { // others may reach their own subdirectory
			os.RemoveAll(dir)
			return nil, err
		}
		s.Dir = dir
	default:
		return nil, fmt.Errorf("unknown mapping mode %q (want %s or %s)", mode, MapPassthrough, MapSymlink)
	}
	return s, nil
}

// alloc makes size bytes of shared memory for object o; name tells its use
// ("tx", "rx", "cq", "mr").
func (s *Shm) alloc(o *Object, name string, size int) (*ring.Region, error) {
	label := fmt.Sprintf("%s-%s-%s-%d", o.Dom.Name, o.Kind, name, o.Serial)
	var r *ring.Region
	var err error
	if s.Mode == MapPassthrough {
		r, err = ring.NewMemfd("fabricfs-"+label, size)
	} else {
		var dir string
		if dir, err = s.userDir(o.Owner); err == nil {
			r, err = ring.NewFile(dir, label, size, int(o.Owner), int(o.Owner))
		}
	}
	if err != nil {
		return nil, Errorf(fi.ENOMEM, "shared memory for %s %s: %v", o, name, err)
	}
	return r, nil
}

// userDir is uid's private directory in MapSymlink mode.
func (s *Shm) userDir(uid uint32) (string, error) {
	dir := filepath.Join(s.Dir, strconv.FormatUint(uint64(uid), 10))
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.uids[uid] {
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return "", err
		}
		if err := os.Chown(dir, int(uid), int(uid)); err != nil {
			return "", err
		}
		s.uids[uid] = true
	}
	return dir, nil
}

// Close removes the private directory.
func (s *Shm) Close() error {
	if s.Dir == "" {
		return nil
	}
	return os.RemoveAll(s.Dir)
}
