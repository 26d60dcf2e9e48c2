package ibv

import "github.com/fabricfs/fabricfs/core/trace"

// tracef logs a line about qp in the trace log (package core/trace), for
// whom its QPInitAttr names. Callers test trace.On first: packets are the
// data path.
func (qp *QP) tracef(c trace.Cat, format string, a ...any) {
	trace.Printf(c, qp.init.TraceUID, qp.init.TracePath, format, a...)
}
