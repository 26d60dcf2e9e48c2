package rxm

import (
	"log/slog"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/trace"
)

// tracef logs a line about the RDM endpoint (package core/trace): its
// connections to peers come and go without the model seeing them.
// Callers test trace.On first.
func (e *endpoint) tracef(c trace.Cat, format string, a ...any) {
	trace.Printf(c, core.OwnerOf(e.ev), core.TracePathOf(e.ev), format, a...)
}

// log logs msg about the RDM endpoint in the daemon's log, at level info
// (its connections to peers made and lost).
func (e *endpoint) log(msg string, args ...any) {
	slog.Info(msg, append([]any{"object", core.TracePathOf(e.ev), "uid", core.OwnerOf(e.ev)}, args...)...)
}

// errText says why a connection ended: err, or a shutdown when nil.
func errText(err error) string {
	if err == nil {
		return "shut down"
	}
	return err.Error()
}

// TracePath is core.Traced's: the RDM endpoint's, so that the lines of
// the connections' endpoints (tcp's, verbs's) name it.
func (ev connEvents) TracePath() string { return core.TracePathOf(ev.EndpointEvents) }

// TracePath is core.Traced's: the RDM endpoint's.
func (ev pepEvents) TracePath() string { return core.TracePathOf(ev.e.ev) }
