package fs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/ctl"
	"github.com/fabricfs/fabricfs/core/fi"
)

// Query is one fi_getinfo call read from the getinfo file. Its text is
// fi_info(1)'s own options, so `fi_info -p tcp -t FI_EP_MSG` becomes
//
//	echo -p tcp -t FI_EP_MSG > getinfo
//
// Options: -p/--provider, -t/--ep_type, -c/--caps, -m/--mode,
// -a/--addr_format, -d/--domain, -f/--fabric, -n/--node, -P/--port,
// -s/--src_addr (node as the source: FI_SOURCE), and fabricfs's
// --flags (fi_getinfo flags such as FI_NUMERICHOST|FI_PROV_ATTR_ONLY) and
// --version MAJOR.MINOR. Long options take their value after '=' or as the
// next word. As with fi_info (util/info.c), the mode and the domain's mode
// default to every bit set, and mr_mode to every bit but FI_MR_BASIC and
// FI_MR_SCALABLE: the query accepts what providers ask of applications,
// such as verbs's FI_MR_LOCAL and FI_RX_CQ_DATA.
type Query struct {
	Version fi.Version
	Node    string
	Service string
	Flags   uint64
	Hints   *fi.Info
}

// ParseQuery parses the text written to the getinfo file.
func ParseQuery(s string) (*Query, error) {
	var words []string
	for _, l := range strings.Split(s, "\n") {
		w, err := ctl.Tokenize(l)
		if err != nil {
			return nil, err
		}
		words = append(words, w...)
	}
	q := &Query{Version: core.APIVersion, Hints: &fi.Info{
		Mode:       ^fi.Mode(0),
		TxAttr:     &fi.TxAttr{},
		RxAttr:     &fi.RxAttr{},
		EPAttr:     &fi.EPAttr{},
		DomainAttr: &fi.DomainAttr{Mode: ^fi.Mode(0), MRMode: ^(fi.MR_BASIC | fi.MR_SCALABLE)},
		FabricAttr: &fi.FabricAttr{},
	}}
	h := q.Hints
	for i := 0; i < len(words); i++ {
		opt, val, hasVal := strings.Cut(words[i], "=")
		if !strings.HasPrefix(opt, "--") {
			hasVal = false
			opt, val = words[i], ""
		}
		if !hasVal {
			if i+1 >= len(words) {
				return nil, fmt.Errorf("option %s needs a value", opt)
			}
			i++
			val = words[i]
		}
		var err error
		switch opt {
		case "-p", "--provider":
			h.FabricAttr.ProvName = val
		case "-t", "--ep_type":
			h.EPAttr.Type, err = fi.Parse[fi.EPType](val)
		case "-c", "--caps":
			h.Caps, err = fi.Parse[fi.Caps](val)
		case "-m", "--mode":
			h.Mode, err = fi.Parse[fi.Mode](val)
		case "-a", "--addr_format":
			h.AddrFormat, err = fi.Parse[fi.AddrFormat](val)
		case "-d", "--domain":
			h.DomainAttr.Name = val
		case "-f", "--fabric":
			h.FabricAttr.Name = val
		case "-n", "--node":
			q.Node = val
		case "-P", "--port":
			q.Service = val
		case "-s", "--src_addr":
			q.Node = val
			q.Flags |= uint64(fi.SOURCE)
		case "--flags":
			var f fi.Caps
			f, err = fi.Parse[fi.Caps](val)
			q.Flags |= uint64(f)
		case "--version":
			var maj, min uint32
			if _, e := fmt.Sscanf(val, "%d.%d", &maj, &min); e != nil {
				err = fmt.Errorf("want MAJOR.MINOR")
			}
			q.Version = fi.MakeVersion(maj, min)
		default:
			return nil, fmt.Errorf("unknown option %q; options: -p -t -c -m -a -d -f -n -P -s --flags --version", opt)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", opt, val, err)
		}
	}
	return q, nil
}

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
	h.run(&Query{Version: core.APIVersion})
	return h, nil
}

func (h *getinfoHandle) run(q *Query) error {
	infos, err := h.t.fab.GetInfo(q.Version, q.Node, q.Service, q.Flags, q.Hints)
	if err != nil {
		h.out = []byte(line(core.WithOp("fi_getinfo", err).Error()))
		return err
	}
	h.out = []byte(infoText(infos))
	return nil
}

func (h *getinfoHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q, err := ParseQuery(string(data))
	if err != nil {
		h.out = []byte(line("getinfo: " + err.Error()))
		return 0, syscall.EINVAL
	}
	if err := h.run(q); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

func (h *getinfoHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(dest, h.out)
	h.out = h.out[n:]
	return fuse.ReadResultData(dest[:n]), 0
}
