package fs

import (
	"context"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core/fi"
)

// getinfoHandle keeps one open file's query. It is a stream, like Plan 9's
// /net/cs: each write replaces the query and rewinds; reads return its
// answer from where the last read stopped, whatever the file offset (which
// the write has moved), then end of file. Before any write the answer is
// every entry; after a failed write it is the error sentence.
type getinfoHandle struct {
	t   *tree
	mu  sync.Mutex
	out []byte // the answer still to be read
}

var (
	_ = (fusefs.FileReader)((*getinfoHandle)(nil))
	_ = (fusefs.FileWriter)((*getinfoHandle)(nil))
)

func (t *tree) openGetinfo(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	h := &getinfoHandle{t: t}
	t.fab.Rescan() // the answers to this open's queries include interfaces that came up since
	infos, err := fi.GetInfo(ctx, fi.APIVersion, "", "", 0, nil, t.fab.Infos())
	if err == nil {
		h.answer(infoText(infos), nil)
	} else {
		h.answer("", err)
	}
	return h, nil
}

// Write asks the query written, fi_info(1)'s options and an optional hints
// block (fi.Query), in one call to core/fi.
func (h *getinfoHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.answer(fi.GetInfoText(ctx, string(data), h.t.fab.Infos())); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

// answer keeps the answer's text for the reads that follow, or the
// error's sentence, which reads "fi_getinfo: ...".
func (h *getinfoHandle) answer(text string, err error) error {
	if err != nil {
		h.out = []byte(line(err.Error()))
		return err
	}
	h.out = []byte(text)
	return nil
}

func (h *getinfoHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(dest, h.out)
	h.out = h.out[n:]
	return fuse.ReadResultData(dest[:n]), 0
}
