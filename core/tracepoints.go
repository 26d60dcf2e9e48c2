package core

// What the model tells the trace log (package core/trace, the tree's
// /log) and the daemon's log (log/slog). Every trace point tests
// trace.On where it stands, so that while nobody reads its category it
// costs one atomic load: the functions here format, and are called only
// when someone reads. The daemon's log hears of connections made and
// lost (info) and objects made and closed (debug), never of data.

import (
	"context"
	"log/slog"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// tracef logs a line of category c about o: its path in the tree
// and owner.
func (o *Object) tracef(c trace.Cat, format string, a ...any) {
	trace.Printf(c, o.Owner, o.tracePath(), format, a...)
}

// log logs msg about o in the daemon's log at level, with its path and
// owner.
func (o *Object) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if slog.Default().Enabled(ctx, level) {
		slog.Log(ctx, level, msg, append([]any{"object", o.tracePath(), "uid", o.Owner}, args...)...)
	}
}

// tracePath is o's path in the tree, as trace lines name it: tcp/lo/ep/3.
func (o *Object) tracePath() string { return o.Dom.Prov.Name() + "/" + o.Dom.Name + "/" + o.Path() }

// Traced is implemented by the events core gives providers (endpoint and
// passive endpoint events): TracePath names their object in trace lines,
// as Owned's Owner names its owner.
type Traced interface {
	TracePath() string
}

// TracePathOf is the path ev names (Traced), or "" when it names none.
// A provider's trace lines (core/trace) give it with OwnerOf(ev).
func TracePathOf(ev any) string {
	if t, ok := ev.(Traced); ok {
		return t.TracePath()
	}
	return ""
}

func (ev epEvents) TracePath() string  { return ev.e.obj.tracePath() }
func (ev pepEvents) TracePath() string { return ev.p.obj.tracePath() }

// opCat is the category of an operation: data (sends and receives) or
// rma (reads, writes, atomics).
func opCat(k OpKind) trace.Cat {
	if k <= OpTRecv {
		return trace.Data
	}
	return trace.RMA
}

// opTraceNames name the operations in trace lines, after their libfabric
// calls.
var opTraceNames = [...]string{
	OpSend: "send", OpRecv: "recv", OpTSend: "tsend", OpTRecv: "trecv",
	OpWrite: "write", OpRead: "read",
	OpAtomic: "atomic", OpFetchAtomic: "fetch_atomic", OpCompareAtomic: "compare_atomic",
}

func opTraceName(k OpKind) string {
	if int(k) < len(opTraceNames) {
		return opTraceNames[k]
	}
	return "op"
}

// tracePost logs an operation the endpoint posts: its kind, its length
// (a receive's: the buffer's) and, on a connectionless endpoint, its peer.
func (e *EP) tracePost(op *Op) {
	c := opCat(op.Kind)
	if !trace.On(c) {
		return
	}
	to := ""
	if op.Peer != (fi.Addr{}) {
		to = " peer " + op.Peer.String()
	}
	if op.Buf == nil && op.Kind.IsRecv() {
		e.obj.tracef(c, "%s posted, a buffer of the message's size%s", opTraceName(op.Kind), to)
		return
	}
	e.obj.tracef(c, "%s posted %d bytes%s", opTraceName(op.Kind), len(op.Buf), to)
}

// traceDone logs the completion of an operation the endpoint posted.
func (e *EP) traceDone(op *Op, c Completion) {
	cat := opCat(op.Kind)
	if !trace.On(cat) {
		return
	}
	if c.Err != 0 {
		e.obj.tracef(cat, "%s failed: %s (%s)", opTraceName(op.Kind), c.Err.Name(), c.Err)
		return
	}
	e.obj.tracef(cat, "%s completed %d bytes", opTraceName(op.Kind), c.Len)
}

// traceCtl logs the commands that change an object's bindings and state
// (bind, enable, reg) in the object category.
func (o *Object) traceCtl(verb string, args []string) {
	if strings.HasPrefix(verb, "bind") || verb == "enable" || verb == "reg" {
		o.tracef(trace.Object, "%s", strings.TrimSpace(verb+" "+strings.Join(args, " ")))
	}
}
