package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
)

// CQ limits.
const (
	DefaultCQSize = 1024
	MaxCQSize     = 1 << 20
	// CQOverflowFactor: a CQ holds completions beyond its size, up to this
	// many times its size, before it reports FI_EOVERRUN (fi_cq(3)).
	CQOverflowFactor = 16
)

// CQEntry is one completion: fi_cq_tagged_entry plus fi_cq_err_entry, with
// the source address of fi_cq_readfrom.
type CQEntry struct {
	Context   uint64
	Flags     fi.CQFlags
	Len       uint64
	Buf       uint64
	Data      uint64
	Tag       uint64
	Src       uint64 // fi_addr of the sender, or fi.ADDR_NOTAVAIL
	Err       fi.Errno
	ProvErrno int
	OLen      uint64
}

// String is the entry's line in cq/N/events.
func (e CQEntry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op_context=%#x flags=%s len=%d buf=%#x data=%#x tag=%#x", e.Context, FlagText(e.Flags.String()), e.Len, e.Buf, e.Data, e.Tag)
	if e.Src != uint64(fi.ADDR_NOTAVAIL) {
		fmt.Fprintf(&b, " src=%d", e.Src)
	}
	if e.Err != 0 {
		fmt.Fprintf(&b, " err=%s prov_errno=%d olen=%d", e.Err.Name(), e.ProvErrno, e.OLen)
	}
	return b.String()
}

// FlagText turns fi_tostr's "[ FI_MSG, FI_SEND ]" into the one-word form
// "FI_MSG|FI_SEND" used inside status and event lines ("0" when empty).
func FlagText(s string) string {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if s == "" {
		return "0"
	}
	return strings.ReplaceAll(s, ", ", "|")
}

// CQ is a completion queue (fi_cq_open).
type CQ struct {
	obj *Object
	q   *queue[CQEntry]

	mu       sync.Mutex
	size     uint64
	format   fi.CQFormat
	waitObj  fi.WaitObj
	bound    int // endpoints bound; attributes are frozen while > 0
	overruns uint64
	total    uint64
}

func newCQ(o *Object) (Impl, error) {
	return &CQ{obj: o, q: newQueue[CQEntry](), size: DefaultCQSize, format: fi.CQ_FORMAT_TAGGED, waitObj: fi.WAIT_UNSPEC}, nil
}

// post adds a completion. Beyond CQOverflowFactor times its size the CQ
// counts an overrun instead, and readers get one FI_EOVERRUN entry.
func (c *CQ) post(e CQEntry) {
	c.mu.Lock()
	if uint64(c.q.len()) >= c.size*CQOverflowFactor {
		c.overruns++
		c.mu.Unlock()
		return
	}
	c.total++
	c.mu.Unlock()
	c.q.push(e)
}

// Read consumes up to max completions, in order, error entries inline. With
// block it waits for at least one.
func (c *CQ) Read(ctx context.Context, max int, block bool) ([]CQEntry, error) {
	c.mu.Lock()
	if c.overruns > 0 {
		n := c.overruns
		c.overruns = 0
		c.mu.Unlock()
		return []CQEntry{{Err: fi.EOVERRUN, Src: uint64(fi.ADDR_NOTAVAIL), OLen: n}}, nil
	}
	c.mu.Unlock()
	return c.q.pop(ctx, max, block)
}

// Signal wakes blocked readers (fi_cq_signal).
func (c *CQ) Signal() { c.q.wake() }

func (c *CQ) bind() error {
	if err := c.obj.hold(); err != nil {
		return err
	}
	c.mu.Lock()
	c.bound++
	c.mu.Unlock()
	return nil
}

func (c *CQ) unbind() {
	c.mu.Lock()
	c.bound--
	c.mu.Unlock()
	c.obj.drop()
}

func (c *CQ) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("size=%d queued=%d total=%d overruns=%d bound=%d", c.size, c.q.len(), c.total, c.overruns, c.bound)
}

func (c *CQ) Attrs() []Attr {
	return []Attr{
		guarded(&c.mu, "size", c.frozen, func() string { return strconv.FormatUint(c.size, 10) }, func(s string) error {
			v, err := parseSize(s, 1, MaxCQSize)
			if err == nil {
				c.size = v
			}
			return err
		}),
		guarded(&c.mu, "format", c.frozen, func() string { return c.format.String() }, func(s string) error {
			v, err := fi.Parse[fi.CQFormat](s)
			if err != nil {
				return Errorf(fi.EINVAL, "%v", err)
			}
			c.format = v
			return nil
		}),
		{Name: "wait_obj", Get: func() string { return c.waitObj.String() }},
		{Name: "wait_cond", Get: func() string { return fi.CQ_COND_NONE.String() }},
		{Name: "signaling_vector", Get: func() string { return "0" }},
		{Name: "flags", Get: func() string { return "0" }},
	}
}

func (c *CQ) frozen() error {
	if c.bound > 0 {
		return Errorf(fi.EBUSY, "%s is bound; set its attributes before binding", c.obj)
	}
	return nil
}

func (c *CQ) Close() error {
	c.q.close()
	return nil
}

// parseSize parses a size attribute within [lo, hi].
func parseSize(s string, lo, hi uint64) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 0, 64)
	if err != nil || v < lo || v > hi {
		return 0, Errorf(fi.EINVAL, "bad size %q: want a number from %d to %d", strings.TrimSpace(s), lo, hi)
	}
	return v, nil
}
