package fs

import (
	"context"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// queryHandle keeps one open query file's question: /getinfo's, a
// domain's query_atomic's. It is a stream, like Plan 9's /net/cs: each
// write replaces the question and rewinds; reads return its answer from
// where the last read stopped, whatever the file offset (which the write
// has moved), then end of file. Before any write the answer is the
// file's answer to no question (every entry, every atomic operation);
// after a failed write it is the error sentence.
type queryHandle struct {
	ask func(ctx context.Context, q string) (string, error)
	mu  sync.Mutex
	out []byte // the answer still to be read
}

var (
	_ = (fusefs.FileReader)((*queryHandle)(nil))
	_ = (fusefs.FileWriter)((*queryHandle)(nil))
)

// openQuery opens a query file: first answers no question, ask each
// written one.
func openQuery(first func(ctx context.Context) (string, error), ask func(ctx context.Context, q string) (string, error)) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
		h := &queryHandle{ask: ask}
		h.answer(first(ctx))
		return h, nil
	}
}

// openGetinfo opens /getinfo: fi_getinfo(3) as a file. Before any write
// it answers fi_getinfo without hints; a write asks the query written,
// fi_info(1)'s options and an optional hints block (fi.Query), in one
// call to core/fi.
func (t *tree) openGetinfo(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	t.fab.Rescan() // the answers to this open's queries include interfaces that came up since
	return openQuery(func(ctx context.Context) (string, error) {
		infos, err := fi.GetInfo(ctx, fi.APIVersion, "", "", 0, nil, t.fab.Infos())
		return infoText(infos), err
	}, func(ctx context.Context, q string) (string, error) {
		return fi.GetInfoText(ctx, q, t.fab.Infos())
	})(ctx, flags)
}

// openQueryAtomic opens a domain's query_atomic: fi_query_atomic as a
// file (core.Domain.QueryAtomicText, QueryAtomicAsk).
func openQueryAtomic(d *core.Domain) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return openQuery(func(context.Context) (string, error) { return d.QueryAtomicText(), nil },
		func(_ context.Context, q string) (string, error) {
			a, err := d.QueryAtomicAsk(q)
			return a.String(), err
		})
}

// openQueryAtomicJSON opens query_atomic.json, query_atomic's JSON view,
// asked as query_atomic is: an array of every operation the domain
// takes, and a question's answer as one object.
func openQueryAtomicJSON(d *core.Domain) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return openQuery(func(context.Context) (string, error) { return jsonText(d.QueryAtomics()), nil },
		func(_ context.Context, q string) (string, error) {
			a, err := d.QueryAtomicAsk(q)
			return jsonText(a), err
		})
}

// Write asks the question written.
func (h *queryHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.answer(h.ask(ctx, string(data))); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

// answer keeps the answer's text for the reads that follow, or the
// error's sentence ("fi_getinfo: ...", "fi_query_atomic: ...").
func (h *queryHandle) answer(text string, err error) error {
	if err != nil {
		h.out = []byte(line(err.Error()))
		return err
	}
	h.out = []byte(text)
	return nil
}

func (h *queryHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(dest, h.out)
	h.out = h.out[n:]
	return fuse.ReadResultData(dest[:n]), 0
}
