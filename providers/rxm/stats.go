package rxm

import (
	"slices"

	"github.com/fabricfs/fabricfs/core"
)

// Stats is core.EndpointStats: the counts of the endpoints of its
// connections (tcp's TCP_INFO facts), summed over them: a count adds up
// over every connection the endpoint had, closed ones included; a gauge
// (a round-trip time) is the largest of the open connections'. And
// rxm_connections, how many are open.
func (e *endpoint) Stats() []core.Count {
	e.mu.Lock()
	var open []core.Endpoint
	for c := range e.conns {
		if c.tcp != nil && !c.dead {
			open = append(open, c.tcp)
		}
	}
	out := slices.Clone(e.closedStats)
	e.mu.Unlock()
	for _, t := range open {
		if s, ok := t.(core.EndpointStats); ok {
			out = core.SumCounts(out, s.Stats(), true)
		}
	}
	return append(out, core.Count{Name: "rxm_connections", Value: uint64(len(open)), Gauge: true,
		Help: "connections the RDM endpoint has open"})
}

// closeInner closes t, the endpoint of a connection, keeping its counts
// in closedStats.
func (e *endpoint) closeInner(t core.Endpoint) {
	if s, ok := t.(core.EndpointStats); ok {
		c := s.Stats()
		e.mu.Lock()
		e.closedStats = core.SumCounts(e.closedStats, c, false)
		e.mu.Unlock()
	}
	t.Close()
}

var _ core.EndpointStats = (*endpoint)(nil)
