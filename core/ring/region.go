package ring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Region is shared memory: a file mapped MAP_SHARED and read-write, so that
// every process that maps the same file sees the same pages.
type Region struct {
	File *os.File // the backing file, open read-write
	Mem  []byte   // the whole file, mapped
	// Path is the file that Close removes: set by NewFile only ("" for a
	// memfd, and for MapFile, whose file belongs to someone else).
	Path string
}

// NewMemfd makes size bytes of anonymous shared memory: memfd_create(name,
// MFD_CLOEXEC), ftruncate, mmap. The daemon serves it with FUSE passthrough,
// or hands the descriptor to a child process.
func NewMemfd(name string, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ring: memfd %q of %d bytes", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	return mapNew(f, size, "")
}

// NewFile makes size bytes of shared memory as the file dir/name, for when
// FUSE passthrough is not available and a ring file is a symbolic link to
// it: dir should be a tmpfs (such as a private directory under /dev/shm).
// The file is created exclusively (it must not exist; symbolic links are not
// followed) with mode 0600 and owned by uid:gid (-1 leaves one unchanged;
// changing them needs privilege), then sized and mapped. Close removes it.
func NewFile(dir, name string, size int, uid, gid int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ring: file %q of %d bytes", name, size)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("ring: bad file name %q", name)
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Region, error) {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil { // whatever the umask
		return fail(err)
	}
	if err := f.Chown(uid, gid); err != nil {
		return fail(err)
	}
	r, err := mapNew(f, size, path)
	if err != nil {
		os.Remove(path)
	}
	return r, err
}

// mapNew sizes f and maps it; on failure it closes f.
func mapNew(f *os.File, size int, path string) (*Region, error) {
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Region{File: f, Mem: mem, Path: path}, nil
}

// MapFile maps an existing file, the client's side: open read-write
// (following symbolic links), take its size from fstat, mmap it shared. It
// works on ring and region files served with FUSE passthrough, on the
// symbolic links of the other mode, and on any shared-memory file.
func MapFile(path string) (*Region, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := fi.Size()
	if size <= 0 || size != int64(int(size)) {
		f.Close()
		return nil, fmt.Errorf("ring: %s: cannot map %d bytes", path, size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return &Region{File: f, Mem: mem}, nil
}

// Close unmaps the memory, closes the file and removes Path if set. Rings
// over the memory must not be used afterwards. Close may be called again;
// it then does nothing.
func (r *Region) Close() error {
	var errs []error
	if r.Mem != nil {
		if err := unix.Munmap(r.Mem); err != nil {
			errs = append(errs, os.NewSyscallError("munmap", err))
		}
		r.Mem = nil
	}
	if r.File != nil {
		if err := r.File.Close(); err != nil {
			errs = append(errs, err)
		}
		r.File = nil
	}
	if r.Path != "" {
		if err := os.Remove(r.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		r.Path = ""
	}
	return errors.Join(errs...)
}
