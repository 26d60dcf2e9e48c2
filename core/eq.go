package core

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/ctl"
	"github.com/fabricfs/fabricfs/core/fi"
)

// MaxEQEvents bounds an EQ; further events are counted as lost.
const MaxEQEvents = 4096

// EQEvent is one event queue entry: fi_eq_cm_entry / fi_eq_err_entry.
type EQEvent struct {
	Event     fi.EQEvent // fi.CONNREQ, fi.CONNECTED, fi.SHUTDOWN...; 0 for an error
	FID       string     // the object the event is about: "ep/3", "pep/0"
	EP        string     // with fi.CONNREQ: the id of the endpoint made for the request
	Data      []byte     // private data, or an error's data
	Err       fi.Errno
	ProvErrno int
}

// String is the event's line in eq/N/events, e.g.
// "connreq fid=pep/0 ep=4 data=hello" or "error fid=ep/1 err=FI_ECONNREFUSED prov_errno=111".
func (e EQEvent) String() string {
	var b strings.Builder
	if e.Err != 0 {
		b.WriteString("error")
	} else {
		b.WriteString(strings.ToLower(strings.TrimPrefix(e.Event.String(), "FI_")))
	}
	fmt.Fprintf(&b, " fid=%s", e.FID)
	if e.EP != "" {
		fmt.Fprintf(&b, " ep=%s", e.EP)
	}
	if e.Err != 0 {
		fmt.Fprintf(&b, " err=%s prov_errno=%d", e.Err.Name(), e.ProvErrno)
	}
	if len(e.Data) > 0 {
		fmt.Fprintf(&b, " data=%s", DataText(e.Data))
	}
	return b.String()
}

// DataText writes private data as one ctl word: the text itself (quoted if
// needed) when it is printable, else "hex:" and its bytes in hex. ParseData
// reads both back.
func DataText(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "hex:" + hex.EncodeToString(b)
		}
	}
	if strings.HasPrefix(string(b), "hex:") {
		return "hex:" + hex.EncodeToString(b)
	}
	return ctl.Quote(string(b))
}

// ParseData reads a DATA argument: text, or "hex:" followed by hex digits.
func ParseData(s string) ([]byte, error) {
	if h, ok := strings.CutPrefix(s, "hex:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, Errorf(fi.EINVAL, "bad hex data %q", s)
		}
		return b, nil
	}
	return []byte(s), nil
}

// EQ is an event queue (fi_eq_open).
type EQ struct {
	obj  *Object
	q    *queue[EQEvent]
	lost uint64 // under q.mu

	events, errs atomic.Uint64 // events queued, error events among them (stats)
}

func newEQ(o *Object) (Impl, error) { return &EQ{obj: o, q: newQueue[EQEvent]()}, nil }

func (e *EQ) post(ev EQEvent) {
	if e.q.len() >= MaxEQEvents {
		e.q.mu.Lock()
		e.lost++
		e.q.mu.Unlock()
		return
	}
	e.q.push(ev)
	e.events.Add(1)
	if ev.Err != 0 {
		e.errs.Add(1)
	}
}

// Read consumes up to max events; with block it waits for at least one.
func (e *EQ) Read(ctx context.Context, max int, block bool) ([]EQEvent, error) {
	return e.q.pop(ctx, max, block)
}

// Ready is poll(2) on eq/N/events (queue.ready).
func (e *EQ) Ready() (bool, <-chan struct{}) { return e.q.ready() }

func (e *EQ) Status() string {
	e.q.mu.Lock()
	lost := e.lost
	e.q.mu.Unlock()
	return fmt.Sprintf("queued=%d lost=%d", e.q.len(), lost)
}

func (e *EQ) Attrs() []Attr {
	return []Attr{
		{Name: "size", Get: func() string { return fmt.Sprint(MaxEQEvents) }},
		{Name: "wait_obj", Get: func() string { return fi.WAIT_UNSPEC.String() }},
		{Name: "signaling_vector", Get: func() string { return "0" }},
		{Name: "flags", Get: func() string { return "0" }},
	}
}

func (e *EQ) Close() error {
	e.q.close()
	return nil
}
