package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
)

// Every decoder has a fuzz target: it must never panic, and what it accepts
// must encode back to the same bytes (the CM decoders ignore padding, so
// for them the property is that the encoding decodes the same).

func FuzzConnect(f *testing.F) {
	for _, tt := range connectTests {
		f.Add(testhex.Bytes(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeConnect(b)
		if err != nil {
			return
		}
		out, err := c.Encode()
		if err != nil {
			t.Fatalf("Encode(DecodeConnect(%x) = %+v) = %v", b, c, err)
		}
		b2 := bytes.Clone(b)
		b2[7] = 0 // padding
		if !bytes.Equal(out, b2) {
			t.Fatalf("DecodeConnect(%x) = %+v re-encodes as %x", b, c, out)
		}
	})
}

func FuzzAccept(f *testing.F) {
	f.Add(testhex.Bytes(f, "00000000 ee7d0000 00100000 02 000000"))
	f.Add(testhex.Bytes(f, "02000000 01000000 03000000 00 010203"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAccept(b)
		if err != nil {
			return
		}
		out, err := a.Encode()
		if err != nil {
			t.Fatalf("Encode(DecodeAccept(%x) = %+v) = %v", b, a, err)
		}
		if !bytes.Equal(out[:13], b[:13]) || !bytes.Equal(out[13:], []byte{0, 0, 0}) {
			t.Fatalf("DecodeAccept(%x) = %+v re-encodes as %x", b, a, out)
		}
	})
}

func FuzzReject(f *testing.F) {
	f.Add([]byte{1, 1})
	f.Add([]byte{1, 2})
	f.Add([]byte{2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReject(b)
		if err != nil {
			return
		}
		out, err := r.Encode()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("DecodeReject(%x) = %+v re-encodes as %x, %v", b, r, out, err)
		}
	})
}

// FuzzHeader decodes a header and, when that succeeds, checks it against
// the tcp payload length in the first 8 bytes of n.
func FuzzHeader(f *testing.F) {
	for _, tt := range headerTests {
		f.Add(testhex.Bytes(f, tt.wire), uint64(HeaderSize+1000))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint64) {
		var h Header
		if err := h.Decode(b); err != nil {
			return
		}
		out, err := AppendHeader(nil, &h)
		if err != nil || !bytes.Equal(out, b[:HeaderSize]) {
			t.Fatalf("Decode(%x) = %+v re-encodes as %x, %v", b[:HeaderSize], h, out, err)
		}
		body, err := h.BodyLen(n)
		if err == nil && body != n-HeaderSize {
			t.Fatalf("%+v.BodyLen(%d) = %d", h, n, body)
		}
	})
}

func FuzzRndvHeader(f *testing.F) {
	for _, tt := range rndvTests {
		f.Add(testhex.Bytes(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r RndvHeader
		if err := r.Decode(b); err != nil {
			return
		}
		out, err := AppendRndvHeader(nil, &r)
		if err != nil || !bytes.Equal(out, b[:RndvHeaderSize]) {
			t.Fatalf("Decode(%x) = %+v re-encodes as %x, %v", b[:RndvHeaderSize], r, out, err)
		}
		if err := r.CheckSize(r.Total()); err != nil {
			t.Fatalf("CheckSize(Total()) = %v for %+v", err, r)
		}
	})
}

// atomicSeeds returns captured atomic messages (testdata/probe_data.txt):
// the rxm header and body of each request (type 4) or response (type 5).
func atomicSeeds(f *testing.F, typ CtrlType) [][]byte {
	var out [][]byte
	for _, m := range readCaptures(f) {
		if m.kind != "msg" || m.b[1] != tcpOpMsg || len(m.b) < tcpBaseHdrSize+HeaderSize {
			continue
		}
		p := m.b[tcpBaseHdrSize:]
		if p[0] == CtrlVersion && CtrlType(p[1]) == typ {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		f.Fatalf("no type %d messages in testdata", typ)
	}
	return out
}

// FuzzAtomicRequest takes a header (64 bytes) followed by a body.
func FuzzAtomicRequest(f *testing.F) {
	for _, b := range atomicSeeds(f, CtrlAtomic) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		if err := h.Decode(b); err != nil {
			return
		}
		body := b[HeaderSize:]
		r, err := DecodeAtomicRequest(&h, body)
		if err != nil {
			return
		}
		out, err := r.AppendBody(nil, h.Op)
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("DecodeAtomicRequest(%x) = %+v re-encodes as %x, %v", body, r, out, err)
		}
		h2 := r.Header(h.ConnID, h.MsgID, h.Op)
		if h2.Size != h.Size || h2.Tag != h.Tag || h2.Op != h.Op || h2.Type != CtrlAtomic {
			t.Fatalf("Header() = %+v for decoded %+v", h2, h)
		}
	})
}

// FuzzAtomicResponse takes a header (64 bytes) followed by a body.
func FuzzAtomicResponse(f *testing.F) {
	for _, b := range atomicSeeds(f, CtrlAtomicResp) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		if err := h.Decode(b); err != nil {
			return
		}
		body := b[HeaderSize:]
		r, err := DecodeAtomicResponse(&h, body)
		if err != nil {
			return
		}
		dt, _, _ := h.AtomicFields()
		out, err := r.AppendBody(nil, h.Op, dt)
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("DecodeAtomicResponse(%x) = %+v re-encodes as %x, %v", body, r, out, err)
		}
		if got := binary.BigEndian.Uint32(body[4:]); int(got) != len(r.Result) {
			t.Fatalf("result_len %d for %d bytes", got, len(r.Result))
		}
	})
}
