// Package trace is fabricfs's trace log, the lines the tree's /log file
// shows, in the manner of Plan 9's /net/log: core and the providers call
// Printf where something worth following happens (a connection, a send,
// a packet, an error), and each reader of /log gets the lines of the
// categories its user chose with a ctl message (Ctl: set, clear, only).
//
// # Cost
//
// A trace point is
//
//	if trace.On(trace.Data) {
//		trace.Printf(trace.Data, uid, path, "send %d bytes", n)
//	}
//
// While no reader wants the category, that is one atomic load and a
// branch: the arguments are neither boxed nor formatted, nothing is
// allocated (BenchmarkClosed). On reports a category as wanted exactly
// while some user who chose it has /log open.
//
// # Who sees what
//
// Every line names the uid of the object it is about. A reader sees the
// lines of its own uid's objects; root's readers see every line, those
// of no user's object (NoUID: the daemon's own, a packet no endpoint
// took) included. Categories are chosen per user: a user's ctl messages
// set the categories of that user's readers, and no one else's.
//
// # Memory
//
// Each reader has its own buffer of at most ReaderBytes of lines, and
// sees every line from its Open on; a reader that falls behind loses the
// oldest lines, and its next read begins with "... N lines lost". A line
// is at most MaxLine bytes, and a user may have at most MaxReaders
// readers open.
package trace

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Cat is a set of categories of trace lines.
type Cat uint32

// The categories.
const (
	CM         Cat = 1 << iota // connections: listen, connect, accept, reject, shutdown, connection lost
	Data                       // sends and receives, posted and completed, with sizes
	RMA                        // reads, writes and atomics, posted and completed
	Packet                     // verbs packets, one line each: opcode, PSN, QPN (very chatty)
	Retransmit                 // verbs retransmits, timeouts, NAKs, RNR; rxm reconnects
	Error                      // every error that goes to an object's err, a CQ or an EQ
	Object                     // objects made, bound, enabled, closed
	numCats        = iota
	All        Cat = 1<<numCats - 1
)

var catNames = [numCats]string{"cm", "data", "rma", "packet", "retransmit", "error", "object"}

// String names the categories of c, separated by blanks.
func (c Cat) String() string {
	var names []string
	for i, n := range catNames {
		if c&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, " ")
}

// NoUID is the uid of a line about no user's object: only root's
// readers see it.
const NoUID = ^uint32(0)

// Limits of the log.
const (
	// ReaderBytes bounds the lines waiting for one reader.
	ReaderBytes = 64 << 10
	// MaxLine bounds one line; a longer one is cut and ends in "...".
	MaxLine = 512
	// MaxReaders is the most readers one user may have open.
	MaxReaders = 16
)

// on is the union of the categories of the users who have a reader open.
var on atomic.Uint32

// On reports whether some reader wants lines of a category of c. A trace
// point calls Printf only when it does.
func On(c Cat) bool { return Cat(on.Load())&c != 0 }

// log is the readers and what each user chose.
var log struct {
	mu      sync.Mutex
	cats    map[uint32]Cat // by uid; a user without an entry chose nothing
	readers map[*Reader]struct{}
	nread   map[uint32]int // open readers by uid
}

func init() {
	log.cats = map[uint32]Cat{}
	log.readers = map[*Reader]struct{}{}
	log.nread = map[uint32]int{}
}

// updateLocked recomputes on from the users with readers open.
func updateLocked() {
	var c Cat
	for uid, n := range log.nread {
		if n > 0 {
			c |= log.cats[uid]
		}
	}
	on.Store(uint32(c))
}

// Printf logs a line of category c (one category) about the object at
// path ("tcp/lo/ep/3"; "" for none) owned by uid, if a reader wants it.
func Printf(c Cat, uid uint32, path string, format string, a ...any) {
	if !On(c) {
		return
	}
	if path == "" {
		path = "-"
	}
	u := "-"
	if uid != NoUID {
		u = strconv.FormatUint(uint64(uid), 10)
	}
	line := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") + " " + c.String() + " " + path + " " + u + " " + fmt.Sprintf(format, a...)
	line = strings.ReplaceAll(line, "\n", " ")
	if len(line) > MaxLine {
		cut := MaxLine - 3
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "..."
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for r := range log.readers {
		if log.cats[r.uid]&c != 0 && (r.uid == 0 || r.uid == uid) {
			r.put(line)
		}
	}
}

// Reader is one open /log: the lines for it since Open.
type Reader struct {
	uid uint32

	mu     sync.Mutex
	lines  []string // oldest first
	bytes  int      // in lines, newlines counted
	lost   uint64   // lines dropped since the last read
	wake   chan struct{}
	closed bool
}

// Open adds a reader for uid. It fails with FI_ENOSPC when uid has
// MaxReaders open already.
func Open(uid uint32) (*Reader, error) {
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.nread[uid] >= MaxReaders {
		return nil, fmt.Errorf("uid %d has %d readers of the log open, the most one user may: %w", uid, MaxReaders, fi.ENOSPC)
	}
	r := &Reader{uid: uid, wake: make(chan struct{})}
	log.readers[r] = struct{}{}
	log.nread[uid]++
	updateLocked()
	return r, nil
}

// Close removes the reader; a Read blocked on it returns.
func (r *Reader) Close() {
	log.mu.Lock()
	if _, ok := log.readers[r]; ok {
		delete(log.readers, r)
		if log.nread[r.uid]--; log.nread[r.uid] == 0 {
			delete(log.nread, r.uid)
		}
		updateLocked()
	}
	log.mu.Unlock()
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.wake)
	}
	r.lines = nil
	r.mu.Unlock()
}

// put appends a line, dropping the oldest ones past ReaderBytes.
func (r *Reader) put(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.lines = append(r.lines, line)
	r.bytes += len(line) + 1
	drop := 0
	for r.bytes > ReaderBytes {
		r.bytes -= len(r.lines[drop]) + 1
		r.lines[drop] = ""
		drop++
	}
	if drop > 0 {
		r.lines = r.lines[drop:]
		r.lost += uint64(drop)
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// Read takes up to want lines (at least one), oldest first, without their
// newlines; a first line "... N lines lost" says that N lines were
// dropped before them. With nothing there it waits if block, until a
// line comes, the reader is closed (end of file: no lines, no error) or
// ctx ends; else it fails with FI_EAGAIN.
func (r *Reader) Read(ctx context.Context, want int, block bool) ([]string, error) {
	want = max(want, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.lines) == 0 && r.lost == 0 {
		if r.closed {
			return nil, nil
		}
		if !block {
			return nil, fi.EAGAIN
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			r.mu.Lock()
			return nil, fi.EINTR
		}
		r.mu.Lock()
	}
	var out []string
	if r.lost > 0 {
		out = append(out, "... "+strconv.FormatUint(r.lost, 10)+" lines lost")
		r.lost = 0
	}
	n := min(len(r.lines), want-len(out))
	for _, l := range r.lines[:n] {
		out = append(out, l)
		r.bytes -= len(l) + 1
	}
	clear(r.lines[:n])
	r.lines = r.lines[n:]
	if len(r.lines) == 0 {
		r.lines = nil // let the array go
	}
	return out, nil
}

// Ready reports whether a Read would not block, and if it would, gives a
// channel closed when that may change (for poll).
func (r *Reader) Ready() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) > 0 || r.lost > 0 || r.closed {
		return true, nil
	}
	return false, r.wake
}

// Cats returns the categories uid chose.
func Cats(uid uint32) Cat {
	log.mu.Lock()
	defer log.mu.Unlock()
	return log.cats[uid]
}

// Ctl runs a ctl message of uid, which chooses the categories of uid's
// readers:
//
//	set CAT...    add the categories
//	clear CAT...  remove them
//	only CAT...   exactly these
//
// CAT is a category's name or all. A bad message fails with FI_EINVAL
// and changes nothing.
func Ctl(uid uint32, msg string) error {
	log.mu.Lock()
	defer log.mu.Unlock()
	c, err := Parse(log.cats[uid], msg)
	if err != nil {
		return err
	}
	if c == 0 {
		delete(log.cats, uid)
	} else {
		log.cats[uid] = c
	}
	updateLocked()
	return nil
}

// Parse applies the ctl message msg to the categories cur (see Ctl).
func Parse(cur Cat, msg string) (Cat, error) {
	words := strings.Fields(msg)
	if len(words) == 0 {
		return cur, fmt.Errorf("empty ctl message; use set, clear or only and categories (%s, all): %w", All, fi.EINVAL)
	}
	if len(words) == 1 {
		return cur, fmt.Errorf("%s: name the categories (%s, all): %w", abbrev(words[0]), All, fi.EINVAL)
	}
	var c Cat
	for _, w := range words[1:] {
		x, ok := ParseCat(w)
		if !ok {
			return cur, fmt.Errorf("%s: no category %q; categories: %s, all: %w", abbrev(words[0]), abbrev(w), All, fi.EINVAL)
		}
		c |= x
	}
	switch words[0] {
	case "set":
		return cur | c, nil
	case "clear":
		return cur &^ c, nil
	case "only":
		return c, nil
	}
	return cur, fmt.Errorf("unknown ctl message %q; use set, clear or only: %w", abbrev(words[0]), fi.EINVAL)
}

// ParseCat reads a category's name, or all.
func ParseCat(s string) (Cat, bool) {
	if s == "all" {
		return All, true
	}
	for i, n := range catNames {
		if n == s {
			return 1 << i, true
		}
	}
	return 0, false
}

// abbrev bounds a word an error echoes.
func abbrev(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
