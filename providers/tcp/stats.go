package tcp

import (
	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
)

// tcpInfoCounts are the facts of a connected socket an endpoint's stats
// show, from getsockopt TCP_INFO (struct tcp_info, linux/tcp.h), each
// named after its tcpi_ field.
var tcpInfoCounts = []struct {
	name, help string
	gauge      bool
	get        func(*unix.TCPInfo) uint64
}{
	{"tcp_total_retrans", "segments the socket retransmitted (tcpi_total_retrans)", false, func(i *unix.TCPInfo) uint64 { return uint64(i.Total_retrans) }},
	{"tcp_bytes_retrans", "bytes the socket retransmitted (tcpi_bytes_retrans)", false, func(i *unix.TCPInfo) uint64 { return i.Bytes_retrans }},
	{"tcp_segs_out", "segments sent (tcpi_segs_out)", false, func(i *unix.TCPInfo) uint64 { return uint64(i.Segs_out) }},
	{"tcp_segs_in", "segments received (tcpi_segs_in)", false, func(i *unix.TCPInfo) uint64 { return uint64(i.Segs_in) }},
	{"tcp_bytes_sent", "bytes sent, retransmissions included (tcpi_bytes_sent)", false, func(i *unix.TCPInfo) uint64 { return i.Bytes_sent }},
	{"tcp_bytes_received", "bytes received (tcpi_bytes_received)", false, func(i *unix.TCPInfo) uint64 { return i.Bytes_received }},
	{"tcp_retransmits", "retransmissions of the segment now timing out (tcpi_retransmits)", true, func(i *unix.TCPInfo) uint64 { return uint64(i.Retransmits) }},
	{"tcp_lost", "segments now thought lost (tcpi_lost)", true, func(i *unix.TCPInfo) uint64 { return uint64(i.Lost) }},
	{"tcp_rtt_us", "smoothed round-trip time in microseconds (tcpi_rtt)", true, func(i *unix.TCPInfo) uint64 { return uint64(i.Rtt) }},
	{"tcp_rttvar_us", "round-trip time variation in microseconds (tcpi_rttvar)", true, func(i *unix.TCPInfo) uint64 { return uint64(i.Rttvar) }},
	{"tcp_snd_cwnd", "congestion window in segments (tcpi_snd_cwnd)", true, func(i *unix.TCPInfo) uint64 { return uint64(i.Snd_cwnd) }},
}

// Stats is core.EndpointStats: the socket's TCP_INFO while connected,
// its last one once closed, nothing before it connected.
func (e *endpoint) Stats() []core.Count {
	e.mu.Lock() // keeps fd open
	info := e.lastInfo
	if e.fd >= 0 {
		info = tcpInfo(e.fd)
	}
	e.mu.Unlock()
	if info == nil {
		return nil
	}
	out := make([]core.Count, len(tcpInfoCounts))
	for i, c := range tcpInfoCounts {
		out[i] = core.Count{Name: c.name, Value: c.get(info), Gauge: c.gauge, Help: c.help}
	}
	return out
}

// tcpInfo is the TCP_INFO of socket fd, or nil.
func tcpInfo(fd int) *unix.TCPInfo {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return nil
	}
	return info
}

var _ core.EndpointStats = (*endpoint)(nil)
