package ibv

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
	"golang.org/x/sys/unix"
)

// Device is an opened software RDMA device (ibv_open_device): one UDP
// socket and the objects created on it. Its methods are safe for
// concurrent use.
type Device struct {
	name string
	addr netip.AddrPort // what the socket is bound to; the GID's address
	mtu  MTU            // the active MTU: activeMTU of addr
	conn *net.UDPConn
	raw  syscall.RawConn // conn's, for its receive queue (queued)
	tx   transmitter
	done chan struct{} // closed when the receive goroutine has returned

	remoteAccessError func(peer netip.Addr, qpn uint32) // DeviceConfig.RemoteAccessError

	stats counters

	mu      sync.Mutex // guards the fields below
	closed  bool
	nobj    objCounts
	nextQPN uint32
	gsi     *QP

	qpMu sync.RWMutex // guards qps; the receive path reads it per packet
	qps  map[uint32]*QP

	// mrMu guards mrs and the bytes of every region: the device reads and
	// writes region memory holding it for reading, so Dereg, which takes
	// it for writing, returns only once no packet is using the region.
	mrMu sync.RWMutex
	mrs  map[uint32]*MR // by key (lkey = rkey); 0 is never a key

	atomicMu sync.Mutex // makes atomics atomic among the device's QPs
}

// objCounts counts a device's objects, for the limits of DeviceAttr.
type objCounts struct{ pd, cq, qp, srq, mr int }

// The device's limits (DeviceAttr). They are rxe's where rxe has one
// (rxe_param.h), except the CQ size.
var deviceAttr = DeviceAttr{
	MaxMRSize:       1 << 40,
	MaxQP:           1 << 16,
	MaxQPWR:         1 << 14,
	MaxSGE:          32,
	MaxCQ:           1 << 14,
	MaxCQE:          1 << 20,
	MaxMR:           1 << 18,
	MaxPD:           1 << 15,
	MaxQPRdAtom:     128,
	MaxQPInitRdAtom: 128,
	MaxSRQ:          1 << 14,
	MaxSRQWR:        1 << 14,
	MaxInlineData:   400,
	ActiveMTU:       MTU4096,
	AtomicCap:       1,
}

// Well-known values of the GSI QP (QP1), as the IB specification fixes
// them.
const (
	GSIQPN  = 1          // QP1's number
	GSIQKey = 0x80010000 // the Q_Key of every GSI QP
)

// socketBuffer is the size asked for the socket's send and receive
// buffers: a window of 128 4 KiB packets, both ways, with room to spare.
const socketBuffer = 4 << 20

// OpenDevice opens a device bound to cfg.Addr and cfg.Port. cfg.Addr must
// be a unicast address of this host (not 0.0.0.0 or ::: the device's GID
// and every packet's ICRC name it). The name is cfg.Name, or "rxe_" and
// the address ("rxe_127.0.0.2"), with "_" and the port appended when the
// port is not 4791 ("rxe_127.0.0.2_5000").
func OpenDevice(cfg DeviceConfig) (*Device, error) {
	a := cfg.Addr.Unmap()
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
		return nil, errorf(syscall.EINVAL, "open device: address %v is not a unicast address", cfg.Addr)
	}
	port := cfg.Port
	if port == 0 {
		port = roce.Port
	}
	if port < 0 || port > 0xffff {
		return nil, errorf(syscall.EINVAL, "open device: port %d", cfg.Port)
	}
	if f := cfg.Fault; f != nil {
		for _, p := range []float64{f.Drop, f.Duplicate, f.Reorder, f.Corrupt} {
			if !(p >= 0 && p <= 1) {
				return nil, errorf(syscall.EINVAL, "open device: fault probability %v", p)
			}
		}
	}
	conn, err := listen(netip.AddrPortFrom(a, uint16(port)))
	if err != nil {
		return nil, fmt.Errorf("ibv: open device %v port %d: %w", a, port, err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ibv: open device %v port %d: %w", a, port, err)
	}
	d := &Device{
		mtu:               activeMTU(a),
		raw:               raw,
		name:              cfg.Name,
		remoteAccessError: cfg.RemoteAccessError,
		addr:              netip.AddrPortFrom(a, uint16(port)),
		conn:              conn,
		done:              make(chan struct{}),
		nextQPN:           firstQPN,
		qps:               map[uint32]*QP{},
		mrs:               map[uint32]*MR{},
	}
	if d.name == "" {
		d.name = "rxe_" + a.String()
		if port != roce.Port {
			d.name += fmt.Sprintf("_%d", port)
		}
	}
	d.tx.init(d, cfg.Fault)
	go d.receive()
	return d, nil
}

// listen opens the device's socket: unconnected UDP, with path MTU
// discovery "do" so that IPv4 datagrams leave with DF set and
// identification 0 (the ICRC covers both), and for IPv6 accepting the zero
// UDP checksum rxe sends (UDP_NO_CHECK6_RX).
func listen(ap netip.AddrPort) (*net.UDPConn, error) {
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			s := int(fd)
			if network == "udp4" {
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			} else {
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
				if serr == nil {
					serr = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1)
				}
			}
			// Bigger buffers than the default keep a window of packets
			// from overflowing the receiver. As root the limits of
			// net.core.[rw]mem_max do not apply; otherwise the kernel
			// caps the request.
			for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
				if unix.SetsockoptInt(s, unix.SOL_SOCKET, o[0], socketBuffer) != nil {
					unix.SetsockoptInt(s, unix.SOL_SOCKET, o[1], socketBuffer)
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// GID is the device's port 1 GID index 0.
func (d *Device) GID() [16]byte { return d.addr.Addr().As16() }

// Addr is the UDP address the device receives on.
func (d *Device) Addr() netip.AddrPort { return d.addr }

// Attr is ibv_query_device with the port attributes that matter here.
func (d *Device) Attr() DeviceAttr {
	at := deviceAttr
	at.ActiveMTU = d.mtu
	return at
}

// headerRoom is what a RoCEv2 packet adds to its payload at most, as rxe
// reserves it (RXE_MAX_HDR_LENGTH): IP, UDP, BTH, the largest extended
// headers and the ICRC.
const headerRoom = 80

// activeMTU is the device's active MTU, as rxe derives it from its network
// device's: the largest IB MTU whose packets, headers included, fit the
// MTU of the interface that has address a, or else of the first whose
// network holds it (127.0.0.2 is lo's); datagrams leave with DF set, so a
// larger packet would never arrive. 4096 when no interface holds a.
func activeMTU(a netip.Addr) MTU {
	ifs, err := net.Interfaces()
	if err != nil {
		return deviceAttr.ActiveMTU
	}
	holder := -1
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			ipn, ok := ad.(*net.IPNet)
			if !ok {
				continue
			}
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == a {
				return mtuFor(ifi.MTU)
			}
			if holder < 0 && ipn.Contains(a.AsSlice()) {
				holder = ifi.MTU
			}
		}
	}
	if holder < 0 {
		return deviceAttr.ActiveMTU
	}
	return mtuFor(holder)
}

// mtuFor is the largest IB MTU whose packets fit an interface MTU of
// ifMTU bytes, at least 256.
func mtuFor(ifMTU int) MTU {
	for m := deviceAttr.ActiveMTU; m > MTU256; m-- {
		if m.Bytes()+headerRoom <= ifMTU {
			return m
		}
	}
	return MTU256
}

// Stats counts what the device's reliability machinery did, for tests
// and the bench: retransmitted packets, NAKs and RNR NAKs sent and
// received, duplicates seen, datagrams dropped for a bad ICRC.
func (d *Device) Stats() Stats { return d.stats.snapshot() }

// Close destroys every object of the device and closes its socket. Work
// requests still queued are discarded without completions; posting to its
// QPs, modifying them and creating objects fail afterwards (EINVAL); Poll
// still returns what the CQs hold.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errorf(syscall.EINVAL, "close %s: closed already", d.name)
	}
	d.closed = true
	d.mu.Unlock()
	err := d.conn.Close()
	<-d.done
	d.qpMu.Lock()
	qps := make([]*QP, 0, len(d.qps))
	for _, qp := range d.qps {
		qps = append(qps, qp)
	}
	clear(d.qps)
	d.qpMu.Unlock()
	for _, qp := range qps {
		qp.shutdown()
	}
	d.mrMu.Lock()
	for _, mr := range d.mrs {
		mr.dead = true
	}
	clear(d.mrs)
	d.mrMu.Unlock()
	return err
}

// NumQPs is the number of the device's QPs not yet destroyed, QP1
// included.
func (d *Device) NumQPs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nobj.qp
}

// NumCQs is the number of the device's CQs not yet destroyed.
func (d *Device) NumCQs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nobj.cq
}

// isClosed reports whether Close was called.
func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// lookupQP returns the QP numbered qpn, or nil.
func (d *Device) lookupQP(qpn uint32) *QP {
	d.qpMu.RLock()
	qp := d.qps[qpn]
	d.qpMu.RUnlock()
	return qp
}

// firstQPN is the first number given to a QP other than QP1; rxe starts
// its pool at 16 as well, leaving the low numbers to special QPs.
const firstQPN = 0x11

// allocQPN picks the number of a new QP: the next unused one after the
// last given, so that a destroyed QP's number is not reused at once and
// its late packets find no QP. d.mu is held.
func (d *Device) allocQPN() uint32 {
	d.qpMu.RLock()
	defer d.qpMu.RUnlock()
	for {
		n := d.nextQPN
		d.nextQPN++
		if d.nextQPN > roce.QPNMask {
			d.nextQPN = firstQPN
		}
		if _, used := d.qps[n]; !used {
			return n
		}
	}
}

// counters are the device's Stats, updated atomically.
type counters struct {
	txPackets, rxPackets, retransmits, timeouts atomic.Uint64
	probes                                      atomic.Uint64
	naksSent, naksRcvd, rnrSent, rnrRcvd        atomic.Uint64
	duplicates, badICRC, dropped                atomic.Uint64
	faultDrop, faultDup, faultReorder, faultBad atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		TxPackets: c.txPackets.Load(), RxPackets: c.rxPackets.Load(),
		Retransmits: c.retransmits.Load(), Timeouts: c.timeouts.Load(), Probes: c.probes.Load(),
		NAKsSent: c.naksSent.Load(), NAKsRcvd: c.naksRcvd.Load(),
		RNRSent: c.rnrSent.Load(), RNRRcvd: c.rnrRcvd.Load(),
		Duplicates: c.duplicates.Load(), BadICRC: c.badICRC.Load(), Dropped: c.dropped.Load(),
		FaultDropped: c.faultDrop.Load(), FaultDuplicated: c.faultDup.Load(),
		FaultReordered: c.faultReorder.Load(), FaultCorrupted: c.faultBad.Load(),
	}
}

// errorf returns an error reading "ibv: <message>: <errno text>" that
// errors.Is matches with errno, the value libibverbs would return.
func errorf(errno syscall.Errno, format string, a ...any) error {
	return fmt.Errorf("ibv: "+format+": %w", append(a, errno)...)
}
