package verbs

import (
	"fmt"
	"strconv"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// The provider-specific operation sets (core.OpsOpener) of verbs: the
// device's, in a domain's ops/, and an endpoint's queue pair's, in its
// ops/. Every value is read-only.
const (
	// DeviceOps is <domain>/ops/verbs_device_v1/: the device's GID (as
	// ibv_devinfo prints it), RoCE UDP port and active MTU, and its
	// hw_counters (as ports/1/hw_counters/ names them).
	DeviceOps = "verbs_device_v1"
	// QPOps is ep/ID/ops/verbs_qp_v1/: the endpoint's QP number, state
	// (IBV_QPS_*), the peer's QP number and the path MTU, as
	// ibv_query_qp answers.
	QPOps = "verbs_qp_v1"
)

// Ops is core.OpsOpener for a domain: the device set.
func (d *domain) Ops() []core.OpsSet {
	dev := d.dev
	value := func(name string, get func() string) core.Attr { return core.Attr{Name: name, Get: get} }
	vals := []core.Attr{
		value("gid", func() string { return formatGID(dev.dev.GID()) }),
		value("udp_port", func() string { return strconv.Itoa(int(dev.dev.Addr().Port())) }),
		value("active_mtu", func() string { return strconv.Itoa(dev.dev.Attr().ActiveMTU.Bytes()) }),
	}
	for _, c := range deviceCounters {
		if c.dir != "hw_counters" {
			continue
		}
		vals = append(vals, value(c.name, func() string {
			s := dev.dev.Stats()
			return strconv.FormatUint(c.get(&s), 10)
		}))
	}
	return []core.OpsSet{{Name: DeviceOps, Values: vals}}
}

// formatGID writes a GID as libibverbs' tools do: eight groups of four
// hex digits.
func formatGID(g [16]byte) string {
	s := ""
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s += ":"
		}
		s += fmt.Sprintf("%02x%02x", g[i], g[i+1])
	}
	return s
}

// qpStates are the names of ibv_qp_state.
var qpStates = [...]string{
	ibv.QPSReset: "IBV_QPS_RESET", ibv.QPSInit: "IBV_QPS_INIT", ibv.QPSRTR: "IBV_QPS_RTR", ibv.QPSRTS: "IBV_QPS_RTS",
	ibv.QPSSQD: "IBV_QPS_SQD", ibv.QPSSQE: "IBV_QPS_SQE", ibv.QPSErr: "IBV_QPS_ERR",
}

// Ops is core.OpsOpener for an endpoint: its QP's set. Values read empty
// once the QP is destroyed.
func (b *qpBase) Ops() []core.OpsSet {
	query := func(get func(qpn uint32, a *ibv.QPAttr) string) func() string {
		return func() string {
			b.mu.Lock()
			qp, dead := b.qp, b.dead
			b.mu.Unlock()
			if qp == nil || dead {
				return ""
			}
			a, _ := qp.Query()
			return get(qp.QPNum(), &a)
		}
	}
	return []core.OpsSet{{Name: QPOps, Values: []core.Attr{
		{Name: "qp_num", Get: query(func(qpn uint32, _ *ibv.QPAttr) string { return strconv.FormatUint(uint64(qpn), 10) })},
		{Name: "qp_state", Get: query(func(_ uint32, a *ibv.QPAttr) string {
			if int(a.State) < len(qpStates) {
				return qpStates[a.State]
			}
			return strconv.Itoa(int(a.State))
		})},
		{Name: "dest_qp_num", Get: query(func(_ uint32, a *ibv.QPAttr) string { return strconv.FormatUint(uint64(a.DestQPNum), 10) })},
		{Name: "path_mtu", Get: query(func(_ uint32, a *ibv.QPAttr) string { return strconv.Itoa(a.PathMTU.Bytes()) })},
	}}}
}

var (
	_ core.OpsOpener = (*domain)(nil)
	_ core.OpsOpener = (*rcEndpoint)(nil)
	_ core.OpsOpener = (*udEndpoint)(nil)
)
