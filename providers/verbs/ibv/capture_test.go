package ibv

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/internal/tshark"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// TestTsharkSession captures a short RC session between two devices on
// 127.0.0.1 and 127.0.0.2 (issue 5, Done-when 3): a send, a send with
// immediate, a write, a write with immediate, a read and an atomic, each
// with its ACK (the read's response, the atomic ACK), PSNs wrapping
// around 2^24 on the way. tshark must dissect every packet as InfiniBand
// with the expected opcode, destination QP and PSN, and the ACKs with an
// ACK syndrome; the IPv4 headers must have DF set and identification 0;
// and icrc.py (package internal/tshark: Python's zlib, not this
// project's ICRC code) must find every packet's ICRC right. The QPs have
// no timeout, so that no timer resends a packet and the capture holds
// exactly the session. It needs tshark, python3 and root; without them it
// is skipped, unless CI is set.
func TestTsharkSession(t *testing.T) {
	tshark.NeedCapture(t)
	devs := sessionDevices(t)
	// A UD QP on b first: b's RC QP has another number than a's.
	pd, err := devs[1].AllocPD()
	must(t, err)
	cq := newCQ(t, devs[1], 1)
	_, err = pd.CreateQP(QPInitAttr{Type: QPTUD, SendCQ: cq.CQ, RecvCQ: cq.CQ})
	must(t, err)
	c := rcConfig{mtu: MTU1024, noTimeout: true, sqpsn: [2]uint32{0xfffffe, 0x123456}, sigAll: true}
	a, b := rcEnds(t, devs, c)
	connect(t, a, b, c)
	port := int(a.dev.Addr().Port())

	b.postRecv(t, 1, 0, 64)
	b.postRecv(t, 2, 0, 64)
	b.postRecv(t, 3, 0, 64)
	copy(a.buf, "RoCEv2 session")
	ops := []struct {
		wr      SendWR
		opcode  roce.Opcode // the request's
		resp    roce.Opcode // the response's
		recvOp  WCOpcode    // the receive b completes, if any
		sendsOp WCOpcode
	}{
		{SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 14)}}, roce.RCSendOnly, roce.RCAcknowledge, WCRecv, WCSend},
		{SendWR{Opcode: WRSendWithImm, Imm: 0xabcdef01, SGList: []SGE{a.sge(0, 14)}}, roce.RCSendOnlyWithImmediate, roce.RCAcknowledge, WCRecv, WCSend},
		{SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.sge(0, 14)}, RemoteAddr: 1000, RKey: b.mr.RKey}, roce.RCRDMAWriteOnly, roce.RCAcknowledge, 0, WCRDMAWrite},
		{SendWR{Opcode: WRRDMAWriteWithImm, Imm: 7, SGList: []SGE{a.sge(0, 14)}, RemoteAddr: 2000, RKey: b.mr.RKey}, roce.RCRDMAWriteOnlyWithImmediate, roce.RCAcknowledge, WCRecvRDMAWithImm, WCRDMAWrite},
		{SendWR{Opcode: WRRDMARead, SGList: []SGE{a.sge(100, 14)}, RemoteAddr: 1000, RKey: b.mr.RKey}, roce.RCRDMAReadRequest, roce.RCRDMAReadResponseOnly, 0, WCRDMARead},
		{SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.sge(200, 8)}, RemoteAddr: 3000, RKey: b.mr.RKey, CompareAdd: 5}, roce.RCFetchAdd, roce.RCAtomicAcknowledge, 0, WCFetchAdd},
	}
	pcap := filepath.Join(t.TempDir(), "session.pcap")
	capture := tshark.Start(t, fmt.Sprintf("udp port %d and host %v and host %v", port, lo1, lo2), 2*len(ops), pcap)
	// One operation at a time, each after the last completed: the
	// capture's order is the session's.
	for i, op := range ops {
		op.wr.WRID = uint64(i)
		must(t, a.qp.PostSend(&op.wr))
		if wc := a.scq.waitOne(t, WCSuccess, op.sendsOp); wc.WRID != uint64(i) {
			t.Fatalf("completion %+v", wc)
		}
		if op.recvOp != 0 {
			b.rcq.waitOne(t, WCSuccess, op.recvOp)
		}
	}
	capture.Wait(t, 20*time.Second)
	if string(a.buf[100:114]) != "RoCEv2 session" || binary.NativeEndian.Uint64(a.buf[200:]) != 0 {
		t.Errorf("read %q, fetch-and-add returned %d", a.buf[100:114], binary.NativeEndian.Uint64(a.buf[200:]))
	}

	fields := []string{"frame.protocols", "ip.src", "ip.dst", "ip.flags.df", "ip.id", "udp.srcport", "udp.dstport",
		"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a", "infiniband.aeth.syndrome"}
	rows := tshark.Fields(t, pcap, port, fields...)
	icrcs := tshark.ICRC(t, "", "pcap", pcap)
	if len(rows) != 2*len(ops) || len(icrcs) != len(rows) {
		t.Fatalf("tshark read %d packets and icrc.py %d, %d were sent", len(rows), len(icrcs), 2*len(ops))
	}
	psn := c.sqpsn[0]
	for i, op := range ops {
		for j, want := range []struct {
			from, to *end
			opcode   roce.Opcode
		}{{a, b, op.opcode}, {b, a, op.resp}} {
			k := 2*i + j
			row := rows[k]
			name := fmt.Sprintf("packet %d (%v)", k, want.opcode)
			t.Logf("%s: %v", name, row)
			if p := row["frame.protocols"]; !strings.Contains(p, ":ip:udp:infiniband") {
				t.Errorf("%s: protocols %q, want ...:ip:udp:infiniband", name, p)
			}
			if row["ip.src"] != want.from.dev.Addr().Addr().String() || row["ip.dst"] != want.to.dev.Addr().Addr().String() ||
				row["udp.srcport"] != strconv.Itoa(port) || row["udp.dstport"] != strconv.Itoa(port) {
				t.Errorf("%s: %s:%s -> %s:%s", name, row["ip.src"], row["udp.srcport"], row["ip.dst"], row["udp.dstport"])
			}
			if (row["ip.flags.df"] != "1" && row["ip.flags.df"] != "True") || numeric(row["ip.id"]) != 0 {
				t.Errorf("%s: DF %q, identification %q; want DF set and identification 0", name, row["ip.flags.df"], row["ip.id"])
			}
			wantQP := want.to.qp.QPNum()
			if numeric(row["infiniband.bth.opcode"]) != uint64(want.opcode) || numeric(row["infiniband.bth.destqp"]) != uint64(wantQP) ||
				numeric(row["infiniband.bth.psn"]) != uint64(psn) {
				t.Errorf("%s: opcode %s destqp %s psn %s; want %#x, %#x, %#x", name, row["infiniband.bth.opcode"],
					row["infiniband.bth.destqp"], row["infiniband.bth.psn"], uint8(want.opcode), wantQP, psn)
			}
			if j == 0 && numeric(row["infiniband.bth.a"]) != 1 {
				t.Errorf("%s: A bit %q, want 1", name, row["infiniband.bth.a"])
			}
			if j == 1 && roce.Syndrome(numeric(row["infiniband.aeth.syndrome"])).Kind() != roce.AETHAck {
				t.Errorf("%s: AETH syndrome %q, want an ACK", name, row["infiniband.aeth.syndrome"])
			}
			if icrcs[k][0] != icrcs[k][1] {
				t.Errorf("%s: icrc.py computed ICRC %#08x, the packet carries %#08x", name, icrcs[k][0], icrcs[k][1])
			}
		}
		psn = roce.PSNAdd(psn, 1)
	}
}

// numeric parses a tshark number (decimal or 0x hex); a value that is not
// a number is 1<<63, equal to no expected value.
func numeric(s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 1 << 63
	}
	return v
}

// sessionDevices opens devices on 127.0.0.1 and 127.0.0.2 on port 4791,
// which tshark dissects as RoCEv2 by default, or another free port.
func sessionDevices(t *testing.T) []*Device {
	a, err := OpenDevice(DeviceConfig{Addr: lo1})
	if err == nil {
		b, err := OpenDevice(DeviceConfig{Addr: lo2})
		if err == nil {
			t.Cleanup(func() { a.Close(); b.Close() })
			return []*Device{a, b}
		}
		a.Close()
	}
	return openDevices(t, nil, lo1, lo2)
}

// TestTsharkTrafficClass: the traffic class of an address handle
// (ibv_global_route.traffic_class), which RoCEv2 carries in the IP header
// in place of the GRH, is on the wire in every packet sent with it, as a
// capture shows: an RC pair whose two sides have different classes (the
// requests of one, the ACK and the read response of the other each carry
// their sender's), and a UD datagram over IPv6. The ICRC, which masks
// the class, stays right (icrc.py). It needs tshark, python3 and root.
func TestTsharkTrafficClass(t *testing.T) {
	tshark.NeedCapture(t)
	t.Run("RC", func(t *testing.T) {
		devs := sessionDevices(t)
		c := rcConfig{noTimeout: true, sigAll: true, tclass: [2]uint8{46 << 2, 8<<2 | 1}}
		a, b := rcEnds(t, devs, c)
		connect(t, a, b, c)
		port := int(a.dev.Addr().Port())
		pcap := filepath.Join(t.TempDir(), "rc.pcap")
		capture := tshark.Start(t, fmt.Sprintf("udp port %d and host %v and host %v", port, lo1, lo2), 4, pcap)
		b.postRecv(t, 1, 0, 64)
		must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, SGList: []SGE{a.sge(0, 8)}}))
		a.scq.waitOne(t, WCSuccess, WCSend)
		b.rcq.waitOne(t, WCSuccess, WCRecv)
		must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRRDMARead, SGList: []SGE{a.sge(100, 8)}, RemoteAddr: 0, RKey: b.mr.RKey}))
		a.scq.waitOne(t, WCSuccess, WCRDMARead)
		capture.Wait(t, 20*time.Second)
		rows := tshark.Fields(t, pcap, port, "ip.src", "ip.dsfield.dscp", "ip.dsfield.ecn", "infiniband.bth.opcode")
		icrcs := tshark.ICRC(t, "", "pcap", pcap)
		want := map[string][2]string{lo1.String(): {"46", "0"}, lo2.String(): {"8", "1"}}
		if len(rows) != 4 || len(icrcs) != 4 {
			t.Fatalf("%d packets captured (%d ICRCs), want 4", len(rows), len(icrcs))
		}
		for i, r := range rows {
			w, ok := want[r["ip.src"]]
			if !ok || r["ip.dsfield.dscp"] != w[0] || r["ip.dsfield.ecn"] != w[1] {
				t.Errorf("packet %d (opcode %s) from %s: DSCP %s ECN %s, want %v", i, r["infiniband.bth.opcode"],
					r["ip.src"], r["ip.dsfield.dscp"], r["ip.dsfield.ecn"], w)
			}
			if icrcs[i][0] != icrcs[i][1] {
				t.Errorf("packet %d: icrc.py computed ICRC %#08x, the packet carries %#08x", i, icrcs[i][0], icrcs[i][1])
			}
		}
	})
	t.Run("UD/IPv6", func(t *testing.T) {
		devs := append(openDevices(t, nil, lo6), openDevices(t, nil, lo6)...)
		a := newUD(t, devs[0], QPTUD, 0x1234, false)
		b := newUD(t, devs[1], QPTUD, 0x1234, false)
		ah, err := a.pd.CreateAH(AHAttr{Dest: b.dev.Addr(), TrafficClass: 10 << 2})
		must(t, err)
		port := int(b.dev.Addr().Port())
		pcap := filepath.Join(t.TempDir(), "ud.pcap")
		capture := tshark.Start(t, fmt.Sprintf("udp dst port %d", port), 1, pcap)
		b.recv(t, 1, 0, 40+64)
		must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.sge(0, 64)},
			AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1234}))
		b.cq.waitOne(t, WCSuccess, WCRecv)
		capture.Wait(t, 20*time.Second)
		rows := tshark.Fields(t, pcap, port, "ipv6.tclass.dscp", "ipv6.tclass.ecn")
		icrcs := tshark.ICRC(t, "", "pcap", pcap)
		if len(rows) != 1 || rows[0]["ipv6.tclass.dscp"] != "10" || rows[0]["ipv6.tclass.ecn"] != "0" {
			t.Errorf("captured %v, want one datagram with DSCP 10 and ECN 0", rows)
		}
		if len(icrcs) != 1 || icrcs[0][0] != icrcs[0][1] {
			t.Errorf("icrc.py: %x", icrcs)
		}
	})
}
