package cm

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

var roundTrips = []Msg{
	{Type: REQ, TransactionID: 7, LocalCommID: 0x11223344, ServiceID: ServiceID(PortSpaceTCP, 7001), QPN: 0x123456, PSN: 0xabcdef,
		ResponderResources: 16, InitiatorDepth: 16, PathMTU: 3, RetryCount: 7, RNRRetryCount: 7, SrcPort: 40000, PrivateData: []byte("hello")},
	{Type: REP, TransactionID: 7, LocalCommID: 5, RemoteCommID: 0x11223344, QPN: 18, PSN: 1, ResponderResources: 4, InitiatorDepth: 2,
		PathMTU: 5, RNRRetryCount: 6, PrivateData: bytes.Repeat([]byte{0xee}, MaxPrivateData)},
	{Type: RTU, LocalCommID: 1, RemoteCommID: 2},
	{Type: REJ, LocalCommID: 0, RemoteCommID: 9, Reason: RejConsumer, PrivateData: []byte("go-away")},
	{Type: DREQ, LocalCommID: 3, RemoteCommID: 4, QPN: roce.QPNMask},
	{Type: DREP, LocalCommID: 4, RemoteCommID: 3},
	{Type: SIDRREQ, RequestID: 77, ServiceID: ServiceID(PortSpaceUDP, 9)},
	{Type: SIDRREP, RequestID: 77, Status: SIDRValid, QPN: 0x42, QKey: 0x12345678},
	// Authorization keys: the requester's in REQ, the listener's in REP.
	{Type: REQ, TransactionID: 8, LocalCommID: 1, ServiceID: ServiceID(PortSpaceTCP, 1), PathMTU: 1,
		PrivateData: bytes.Repeat([]byte{0xdd}, MaxPrivateData), AuthKey: bytes.Repeat([]byte{0xaa}, MaxAuthKey)},
	{Type: REP, TransactionID: 8, LocalCommID: 2, RemoteCommID: 1, PathMTU: 1, AuthKey: []byte("job-1")},
}

// TestAuthKeyLayout pins where REQ's authorization key is (docs/verbs.md:
// body offset 96, a length byte and the bytes).
func TestAuthKeyLayout(t *testing.T) {
	var b [MADSize]byte
	if err := roundTrips[9].Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	if got := b[HeaderSize+96 : HeaderSize+96+6]; !bytes.Equal(got, []byte("\x05job-1")) {
		t.Errorf("REP's key at 96: % x", got)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range roundTrips {
		var b [MADSize]byte
		if err := m.Encode(b[:]); err != nil {
			t.Fatalf("Encode(%v): %v", m.Type, err)
		}
		if b[0] != 1 || b[1] != 0x07 || b[2] != 2 || b[3] != 3 || binary.BigEndian.Uint16(b[16:]) != uint16(m.Type) {
			t.Errorf("%v: MAD header % x", m.Type, b[:24])
		}
		got, err := Decode(b[:])
		if err != nil {
			t.Fatalf("Decode(%v): %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("Decode(Encode(%+v)) = %+v", m, got)
		}
	}
}

// TestLayout pins the REQ's bytes that docs/verbs.md lists.
func TestLayout(t *testing.T) {
	var b [MADSize]byte
	if err := roundTrips[0].Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	p := b[HeaderSize:]
	want := []struct {
		off  int
		data []byte
	}{
		{0, []byte{0x11, 0x22, 0x33, 0x44}},
		{8, []byte{0, 0, 0, 0, 0x01, 0x06, 0x1b, 0x59}},
		{16, []byte{0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef}},
		{24, []byte{16, 16, 3, 7, 7, 0, 0x9c, 0x40, 5, 'h', 'e', 'l', 'l', 'o', 0}},
	}
	for _, w := range want {
		if got := p[w.off : w.off+len(w.data)]; !bytes.Equal(got, w.data) {
			t.Errorf("REQ body at %d: % x, want % x", w.off, got, w.data)
		}
	}
	if binary.BigEndian.Uint64(b[8:]) != 7 {
		t.Errorf("transaction ID % x", b[8:16])
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := func(m Msg) []byte {
		var b [MADSize]byte
		if err := m.Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		return b[:]
	}
	req := valid(roundTrips[0])
	set := func(b []byte, off int, v ...byte) []byte {
		c := bytes.Clone(b)
		copy(c[off:], v)
		return c
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", req[:255], "256-byte"},
		{"long", append(bytes.Clone(req), 0), "256-byte"},
		{"base version", set(req, 0, 2), "not a CM MAD"},
		{"class", set(req, 1, 0x04), "not a CM MAD"},
		{"class version", set(req, 2, 1), "not a CM MAD"},
		{"method", set(req, 3, 0x81), "not a CM MAD"},
		{"unknown attribute", set(req, 16, 0, 0x11), "unknown message"},
		{"private data length", set(req, HeaderSize+32, MaxPrivateData+1), "private data"},
		{"QPN", set(req, HeaderSize+16, 1), "24 bits"},
		{"PSN", set(req, HeaderSize+20, 1), "24 bits"},
		{"MTU 0", set(req, HeaderSize+26, 0), "path MTU"},
		{"MTU 6", set(req, HeaderSize+26, 6), "path MTU"},
		{"retry", set(req, HeaderSize+27, 8), "retry count"},
		{"comm ID 0", set(req, HeaderSize, 0, 0, 0, 0), "communication ID 0"},
		{"RTU comm ID 0", set(valid(roundTrips[2]), HeaderSize+4, 0, 0, 0, 0), "communication ID 0"},
		{"SIDR status", set(valid(roundTrips[7]), HeaderSize+4, 2), "status"},
		{"key length", set(req, HeaderSize+96, MaxAuthKey+1), "private data or key"},
	}
	for _, c := range cases {
		_, err := Decode(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode = %v, want an error about %q", c.name, err, c.want)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	var b [MADSize]byte
	bad := []Msg{
		{Type: REQ, LocalCommID: 1, PathMTU: 3, PrivateData: make([]byte, MaxPrivateData+1)},
		{Type: REQ, LocalCommID: 1, PathMTU: 9},
		{Type: REP, LocalCommID: 1, RemoteCommID: 2, PathMTU: 3, QPN: 1 << 24},
		{Type: REP, LocalCommID: 1, RemoteCommID: 2, PathMTU: 0},
		{Type: 0x99},
		{Type: REQ, LocalCommID: 1, PathMTU: 3, AuthKey: make([]byte, MaxAuthKey+1)},
		{Type: REJ, AuthKey: []byte("k")},
	}
	for _, m := range bad {
		if err := m.Encode(b[:]); err == nil {
			t.Errorf("Encode(%+v) succeeded", m)
		}
	}
	if err := roundTrips[2].Encode(b[:100]); err != ErrSize {
		t.Errorf("Encode into 100 bytes = %v, want ErrSize", err)
	}
}

func TestServiceID(t *testing.T) {
	id := ServiceID(PortSpaceTCP, 7001)
	if id != 0x01061b59 {
		t.Errorf("ServiceID = %#x", id)
	}
	if p, ok := ServicePort(id, PortSpaceTCP); !ok || p != 7001 {
		t.Errorf("ServicePort = %d, %v", p, ok)
	}
	if _, ok := ServicePort(id, PortSpaceUDP); ok {
		t.Error("a TCP-space service ID is a UDP-space one")
	}
	if _, ok := ServicePort(1<<40|id, PortSpaceTCP); ok {
		t.Error("a service ID with high bits is in the TCP space")
	}
}
