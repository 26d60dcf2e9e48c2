package core

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/ctl"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
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

// Record is the event's facts: in eq/N/events the line
// "connreq fid=pep/0 ep=4 data=hello" or "error fid=ep/1 err=FI_ECONNREFUSED
// prov_errno=111"; in events.json the same keys, every one present (null
// when the line leaves it out), data as DataWord gives it.
func (e EQEvent) Record() Record {
	event := "error"
	if e.Err == 0 {
		event = strings.ToLower(strings.TrimPrefix(e.Event.String(), "FI_"))
	}
	ep := Field{Key: "ep", Text: e.EP, Hide: e.EP == ""}
	if e.EP != "" {
		ep.JSON = e.EP
	}
	errName := Field{Key: "err", Text: e.Err.Name(), Hide: e.Err == 0}
	if e.Err != 0 {
		errName.JSON = e.Err.Name()
	}
	data := Field{Key: "data", Text: DataText(e.Data), Hide: len(e.Data) == 0}
	if len(e.Data) > 0 {
		data.JSON = DataWord(e.Data)
	}
	provErrno := num("prov_errno", e.ProvErrno)
	provErrno.Hide = e.Err == 0
	return Record{bare("event", event), word("fid", e.FID), ep, errName, provErrno, data}
}

// String is the event's line in eq/N/events.
func (e EQEvent) String() string { return e.Record().String() }

// MarshalJSON is the event's line in eq/N/events.json.
func (e EQEvent) MarshalJSON() ([]byte, error) { return e.Record().MarshalJSON() }

// DataText writes private data as one ctl word: DataWord, quoted if
// needed. ParseData reads it back.
func DataText(b []byte) string { return ctl.Quote(DataWord(b)) }

// DataWord is private data as text: the text itself when it is printable,
// else "hex:" and its bytes in hex (also for printable text that begins
// with "hex:"). ParseData reads it back.
func DataWord(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "hex:" + hex.EncodeToString(b)
		}
	}
	if strings.HasPrefix(string(b), "hex:") {
		return "hex:" + hex.EncodeToString(b)
	}
	return string(b)
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
	if ev.Err != 0 && trace.On(trace.Error) {
		e.obj.tracef(trace.Error, "error event %s", ev)
	}
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

func (e *EQ) Status() Record {
	e.q.mu.Lock()
	lost := e.lost
	e.q.mu.Unlock()
	return Record{num("queued", e.q.len()), num("lost", lost)}
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
