package verbs

import (
	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// deviceCounters map the device's counts (ibv.Stats) to the files of a
// port's counters in Linux's rdma sysfs, /sys/class/infiniband/DEV/
// ports/1/: hw_counters/ by the names Linux's soft-RoCE driver (rxe)
// gives its counters, a timeout by mlx5's name (rxe has none),
// retransmits by a name of ours (neither has one), and counters/ by the
// InfiniBand port counters' names. Only what the device counts.
var deviceCounters = []struct {
	dir, name string
	get       func(*ibv.Stats) uint64
}{
	{"hw_counters", "sent_pkts", func(s *ibv.Stats) uint64 { return s.TxPackets }},
	{"hw_counters", "rcvd_pkts", func(s *ibv.Stats) uint64 { return s.RxPackets }},
	{"hw_counters", "duplicate_request", func(s *ibv.Stats) uint64 { return s.Duplicates }},
	{"hw_counters", "out_of_seq_request", func(s *ibv.Stats) uint64 { return s.NAKsSent }},
	{"hw_counters", "rcvd_seq_err", func(s *ibv.Stats) uint64 { return s.NAKsRcvd }},
	{"hw_counters", "rcvd_rnr_err", func(s *ibv.Stats) uint64 { return s.RNRRcvd }},
	{"hw_counters", "send_rnr_err", func(s *ibv.Stats) uint64 { return s.RNRSent }},
	{"hw_counters", "local_ack_timeout_err", func(s *ibv.Stats) uint64 { return s.Timeouts }},
	{"hw_counters", "retransmits", func(s *ibv.Stats) uint64 { return s.Retransmits }},
	{"counters", "port_xmit_packets", func(s *ibv.Stats) uint64 { return s.TxPackets }},
	{"counters", "port_rcv_packets", func(s *ibv.Stats) uint64 { return s.RxPackets }},
	{"counters", "port_rcv_errors", func(s *ibv.Stats) uint64 { return s.BadICRC + s.Dropped }},
}

// DeviceCounters is core.DeviceCounters: the counters of the domain's
// device (both domains of a device show the same).
func (d *domain) DeviceCounters() []core.DeviceCounter {
	s := d.dev.dev.Stats()
	out := make([]core.DeviceCounter, len(deviceCounters))
	for i, c := range deviceCounters {
		out[i] = core.DeviceCounter{Dir: c.dir, Name: c.name, Value: c.get(&s)}
	}
	return out
}

var _ core.DeviceCounters = (*domain)(nil)
