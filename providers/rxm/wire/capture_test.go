package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The files in testdata are real libfabric 1.17 "tcp;ofi_rxm" traffic
// (scripts/rxm_vectors.sh): one line per message,
//
//	<conn> <c>s|s>c> <cm|msg> <hex> [# <n> bytes]
//
// each the bytes of one tcp CM message or one tcp data message (header and
// payload; payloads of long messages are cut, with their length noted).
// TestCaptures decodes every rxm structure in them, re-encodes it byte for
// byte, and checks the facts of docs/rxm.md that the bytes show.

type captured struct {
	file, dir, kind string
	conn            int
	b               []byte
	cut             bool // the payload was cut
}

func readCaptures(t testing.TB) []captured {
	t.Helper()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	var out []captured
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			line := s.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			cut := strings.Contains(line, "#")
			line, _, _ = strings.Cut(line, "#")
			w := strings.Fields(line)
			if len(w) != 4 {
				t.Fatalf("%s: bad line %q", name, line)
			}
			conn, err := strconv.Atoi(w[0])
			b, err2 := hex.DecodeString(w[3])
			if err != nil || err2 != nil {
				t.Fatalf("%s: bad line %q", name, line)
			}
			out = append(out, captured{file: filepath.Base(name), conn: conn, dir: w[1], kind: w[2], b: b, cut: cut})
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return out
}

// tcp framing, enough to find the rxm bytes (providers/tcp/wire has the
// real codec).
const (
	tcpCMHeader    = 32
	tcpConnReq     = 0
	tcpConnResp    = 1
	tcpReject      = 6
	tcpOpMsg       = 0
	tcpFlagTagged  = 0x80
	tcpFlagCQData  = 0x1
	tcpFlagDC      = 0x4 // delivery complete: the receiver ACKs
	tcpOpDataAck   = 2
	tcpBaseHdrSize = 16
)

func TestCaptures(t *testing.T) {
	seen := map[string]int{}
	for _, m := range readCaptures(t) {
		where := m.file + " conn " + strconv.Itoa(m.conn) + " " + m.dir
		switch m.kind {
		case "cm":
			checkCM(t, where, m.b, seen)
		case "msg":
			checkMsg(t, where, m, seen)
		default:
			t.Errorf("%s: unparsed bytes %x", where, m.b)
		}
	}
	// Every kind of message docs/rxm.md describes from captures is there.
	for _, k := range []string{
		"connect", "accept", "reject connection refused", "reject already connected",
		"eager msg", "eager msg cq data", "eager tagged", "bare tagged", "bare tagged cq data",
		"rndv_req msg", "rndv_req tagged", "rndv_req cq data", "rndv_rd_done",
		"seg first", "seg middle", "seg last",
		"atomic", "atomic_fetch", "atomic_compare", "atomic_resp", "atomic_resp error",
		"tcp read request", "tcp read response", "tcp write", "delivery complete", "tcp ack",
	} {
		if seen[k] == 0 {
			t.Errorf("no %q in testdata", k)
		}
	}
	t.Logf("decoded: %v", seen)
}

func checkCM(t *testing.T, where string, b []byte, seen map[string]int) {
	if len(b) < tcpCMHeader || b[0] != 3 {
		t.Errorf("%s: bad tcp CM message %x", where, b)
		return
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	data := b[tcpCMHeader:]
	if n != len(data) {
		t.Errorf("%s: CM says %d bytes of private data, %d follow", where, n, len(data))
		return
	}
	var out []byte
	var err error
	switch b[1] {
	case tcpConnReq:
		var c Connect
		if c, err = DecodeConnect(data); err == nil {
			seen["connect"]++
			if c.FlowCtrl != FlowCtrlPeerOff || c.RxSize != RxSize || c.ConnID.PID() == 0 {
				t.Errorf("%s: unexpected connect data %+v", where, c)
			}
			out, err = c.Encode()
		}
	case tcpConnResp:
		var a Accept
		if a, err = DecodeAccept(data); err == nil {
			seen["accept"]++
			if a.FlowCtrl != FlowCtrlPeerOff || a.RxSize != RxSize || a.ConnID.PID() == 0 {
				t.Errorf("%s: unexpected accept data %+v", where, a)
			}
			out, err = a.Encode()
		}
	case tcpReject:
		var r Reject
		if r, err = DecodeReject(data); err == nil {
			seen["reject "+r.Reason.String()]++
			out, err = r.Encode()
		}
		// A reject's byte-order probe is 0.
		if binary.LittleEndian.Uint64(b[24:]) != 0 {
			t.Errorf("%s: reject with conn_data %x", where, b[24:32])
		}
	default:
		t.Errorf("%s: CM type %d", where, b[1])
		return
	}
	if err != nil {
		// A connect from a peer with another eager limit is what
		// probe_reject.txt is about.
		if b[1] == tcpConnReq && strings.HasPrefix(where, "probe_reject") {
			seen["connect"]++
			return
		}
		t.Errorf("%s: %v (%x)", where, err, data)
		return
	}
	if !bytes.Equal(out, data) {
		t.Errorf("%s: private data %x re-encodes as %x", where, data, out)
	}
}

func checkMsg(t *testing.T, where string, m captured, seen map[string]int) {
	b := m.b
	if len(b) < tcpBaseHdrSize || b[0] != 3 {
		t.Errorf("%s: bad tcp message %x", where, b)
		return
	}
	op, flags, opData, hdrSize := b[1], binary.LittleEndian.Uint16(b[2:]), b[4], int(b[6])
	size := binary.LittleEndian.Uint64(b[8:])
	if !m.cut && uint64(len(b)) != size {
		t.Errorf("%s: tcp size %d, %d bytes captured", where, size, len(b))
		return
	}
	if b[7] != 0 {
		t.Errorf("%s: tcp id %d (release builds send 0)", where, b[7])
	}
	switch {
	case op == 2:
		seen["tcp read request"]++
		return
	case op == 3:
		seen["tcp read response"]++
		return
	case op == 4:
		seen["tcp write"]++
		return
	case op != tcpOpMsg:
		t.Errorf("%s: tcp op %d", where, op)
		return
	case opData == tcpOpDataAck:
		// Only when the sender asked for FI_TRANSMIT_COMPLETE in its
		// hints (probe_transmit_complete.txt).
		if size != tcpBaseHdrSize || hdrSize != tcpBaseHdrSize {
			t.Errorf("%s: bad tcp ACK %x", where, b)
		}
		seen["tcp ack"]++
		return
	case flags&tcpFlagTagged != 0:
		// Tagged eager: no rxm header; the tag (and CQ data) are in
		// the tcp header.
		want := 24
		if flags&tcpFlagCQData != 0 {
			want = 32
			seen["bare tagged cq data"]++
		}
		if hdrSize != want || size-uint64(hdrSize) > EagerLimit {
			t.Errorf("%s: bare tagged message with hdr_size %d, size %d", where, hdrSize, size)
		}
		seen["bare tagged"]++
		return
	}
	if flags&tcpFlagDC != 0 {
		seen["delivery complete"]++
		flags &^= tcpFlagDC
	}
	if flags != 0 || hdrSize != tcpBaseHdrSize {
		t.Errorf("%s: rxm message in a tcp header with flags %#x, hdr_size %d", where, flags, hdrSize)
		return
	}
	payload := b[hdrSize:]
	var h Header
	if err := h.Decode(payload); err != nil {
		t.Errorf("%s: %v (%x)", where, err, payload[:min(len(payload), HeaderSize)])
		return
	}
	if out, err := AppendHeader(nil, &h); err != nil || !bytes.Equal(out, payload[:HeaderSize]) {
		t.Errorf("%s: header %x re-encodes as %x, %v", where, payload[:HeaderSize], out, err)
	}
	n, err := h.BodyLen(size - uint64(hdrSize))
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if h.Type == CtrlSeg {
		seen["seg "+[...]string{"none", "first", "middle", "last"}[h.SegType()]]++
		if h.SegNo > 0 && h.SegType() == SegFirst || h.SegNo == 0 && h.SegType() != SegFirst {
			t.Errorf("%s: segment %d of type %d", where, h.SegNo, h.SegType())
		}
	}
	if m.cut {
		return
	}
	body := payload[HeaderSize:]
	if uint64(len(body)) != n {
		t.Errorf("%s: BodyLen %d, %d bytes", where, n, len(body))
	}
	switch h.Type {
	case CtrlEager:
		seen["eager "+h.Op.String()]++
		if h.Flags&FlagRemoteCQData != 0 {
			seen["eager msg cq data"]++
		}
	case CtrlSeg: // counted above
	case CtrlRndvReq:
		seen["rndv_req "+h.Op.String()]++
		if h.Flags&FlagRemoteCQData != 0 {
			seen["rndv_req cq data"]++
		}
		var r RndvHeader
		if err := r.Decode(body); err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		if err := r.CheckSize(h.Size); err != nil {
			t.Errorf("%s: %v", where, err)
		}
		if out, err := AppendRndvHeader(nil, &r); err != nil || !bytes.Equal(out, body) {
			t.Errorf("%s: rendezvous header %x re-encodes as %x, %v", where, body, out, err)
		}
		// Offsets into tcp regions, keys from rxm's counter.
		if r.Iov[0].Addr != 0 || r.Iov[0].Key&KeyProvSpecific == 0 {
			t.Errorf("%s: rendezvous iov %+v", where, r.Iov[0])
		}
	case CtrlRndvRdDone:
		seen["rndv_rd_done"]++
	case CtrlAtomic:
		seen[h.Op.String()]++
		a, err := DecodeAtomicRequest(&h, body)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		out, err := a.AppendBody(nil, h.Op)
		if err != nil || !bytes.Equal(out, body) {
			t.Errorf("%s: atomic body %x re-encodes as %x, %v", where, body, out, err)
		}
	case CtrlAtomicResp:
		seen["atomic_resp"]++
		r, err := DecodeAtomicResponse(&h, body)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		if r.Status != 0 {
			seen["atomic_resp error"]++
		}
		dt, _, _ := h.AtomicFields()
		out, err := r.AppendBody(nil, h.Op, dt)
		if err != nil || !bytes.Equal(out, body) {
			t.Errorf("%s: atomic response %x re-encodes as %x, %v", where, body, out, err)
		}
	default:
		t.Errorf("%s: unexpected %s message", where, h.Type)
	}
}

// TestSARCapture checks the segments of testdata/pingpong_sar_tagged_40000
// add up: 16384 + 16384 + 7232 bytes of one 40000-byte message, one msg_id.
func TestSARCapture(t *testing.T) {
	var total uint64
	var segs int
	for _, m := range readCaptures(t) {
		if m.file != "pingpong_sar_tagged_40000.txt" || m.dir != "c>s" || m.kind != "msg" {
			continue
		}
		var h Header
		if err := h.Decode(m.b[tcpBaseHdrSize:]); err != nil {
			t.Fatal(err)
		}
		if h.Type != CtrlSeg {
			continue
		}
		if h.SegNo != uint32(segs) || h.Size != 40000 || h.MsgID != 0 {
			t.Errorf("segment %d: %+v", segs, h)
		}
		segs++
		total += uint64(h.SegSize)
	}
	if segs != 3 || total != 40000 {
		t.Errorf("%d segments of %d bytes, want 3 of 40000", segs, total)
	}
}
