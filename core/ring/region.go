package ring

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region is shared memory: a file mapped MAP_SHARED and read-write, so that
// every process that maps the same file sees the same pages.
type Region struct {
	File *os.File // the backing file, open read-write; nil after DropFile
	Mem  []byte   // the whole file, mapped

	onClose []func()
	mu      sync.Mutex // serialises Close with Dup and Len
}

// NewMemfd makes size bytes of anonymous shared memory: memfd_create(name),
// ftruncate, seal, mmap. The seals (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL)
// fix the size for good: whoever else opens the memfd may write its bytes
// but cannot truncate it, so the daemon's mapping can never lose its pages
// under it (which would be a SIGBUS, fatal to a Go program). The daemon
// serves the memfd with FUSE passthrough or at a /proc/PID/fd/N path.
func NewMemfd(name string, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ring: memfd %q of %d bytes", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, os.NewSyscallError("fcntl F_ADD_SEALS", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Region{File: f, Mem: mem}, nil
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

// A Piece is Len bytes of a Region's file from byte Off, both whole pages.
type Piece struct {
	From     *Region
	Off, Len int
}

// MapPieces maps the pieces one after the other into one range of memory:
// the region's Mem is that range, byte for byte the pieces' pages (shared:
// writes through either mapping are seen by the other). It maps the files,
// so the pieces' regions may close afterwards without taking the pages
// from it. The region has no file of its own: Dup, DropFile and callers
// that need File are not for it.
func MapPieces(pieces []Piece) (*Region, error) {
	page := os.Getpagesize()
	total := 0
	for _, p := range pieces {
		if p.From == nil || p.Off < 0 || p.Len <= 0 || p.Off%page != 0 || p.Len%page != 0 || total+p.Len < total {
			return nil, fmt.Errorf("ring: piece [%d, %d+%d) is not whole pages", p.Off, p.Off, p.Len)
		}
		total += p.Len
	}
	if total == 0 {
		return nil, fmt.Errorf("ring: no pieces to map")
	}
	// Reserve the range, then map each piece over its part of it: Close
	// unmaps the whole range, pieces included, in one call.
	mem, err := unix.Mmap(-1, 0, total, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	at := 0
	for _, p := range pieces {
		if err := mapPiece(p, unsafe.Pointer(&mem[at])); err != nil {
			unix.Munmap(mem)
			return nil, err
		}
		at += p.Len
	}
	return &Region{Mem: mem}, nil
}

// mapPiece maps p's pages at addr, over what is there.
func mapPiece(p Piece, addr unsafe.Pointer) error {
	f, err := p.From.Dup()
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < int64(p.Off)+int64(p.Len) {
		return fmt.Errorf("ring: piece [%d, %d+%d) is outside its file", p.Off, p.Off, p.Len)
	}
	_, err = unix.MmapPtr(int(f.Fd()), int64(p.Off), addr, uintptr(p.Len), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		return os.NewSyscallError("mmap", err)
	}
	return nil
}

// OnClose has Close call f first, while the memory and the file are still
// there; functions run in the order they were added. Not safe to call
// concurrently with Close.
func (r *Region) OnClose(f func()) { r.onClose = append(r.onClose, f) }

// Close runs the OnClose functions, unmaps the memory and closes the file.
// Rings over the memory must not be used afterwards. Close may be called
// again; it then does nothing.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.onClose {
		f()
	}
	r.onClose = nil
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
	return errors.Join(errs...)
}

// Dup returns a new descriptor of the region's file, open until its
// caller closes it, whatever happens to the region; it fails with
// os.ErrClosed once the region is closed. After DropFile it opens the file
// again through the region's own mapping. Dup may be called concurrently
// with Close.
func (r *Region) Dup() (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.Mem == nil:
		return nil, os.ErrClosed
	case r.File == nil:
		return r.reopen()
	}
	fd, err := unix.FcntlInt(r.File.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fd), r.File.Name()), nil
}

// DropFile closes the region's descriptor, keeping the memory: the
// mapping holds the file, and Dup opens it again from the mapping
// (/proc/self/map_files, which takes CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE). So a region costs its process no descriptor
// while nobody opens it. It keeps the descriptor, and reports why, where
// the file cannot be opened that way.
func (r *Region) DropFile() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.File == nil || r.Mem == nil {
		return nil
	}
	f, err := r.reopen()
	if err != nil {
		return err
	}
	f.Close()
	err = r.File.Close()
	r.File = nil
	return err
}

// reopen opens the file of the region's mapping, read-write. Called with
// r.mu held, on a mapped region.
func (r *Region) reopen() (*os.File, error) {
	start := uintptr(unsafe.Pointer(&r.Mem[0]))
	page := uintptr(os.Getpagesize())
	end := (start + uintptr(len(r.Mem)) + page - 1) &^ (page - 1)
	path := fmt.Sprintf("/proc/self/map_files/%x-%x", start, end)
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Len is the size of the memory, 0 once the region is closed. Len may be
// called concurrently with Close.
func (r *Region) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.Mem)
}
