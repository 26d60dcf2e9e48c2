package fi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A getinfoCall is one random call: the property tests and the fuzz target
// build them from bytes.
type getinfoCall struct {
	version       Version
	node, service string
	flags         uint64
	hints         *Info
}

func (c getinfoCall) String() string {
	h := "nil"
	if c.hints != nil {
		h = c.hints.String()
	}
	return fmt.Sprintf("%v, %q, %q, %#x,\n%s", c.version, c.node, c.service, c.flags, h)
}

// byteSource reads values from fuzz input; past its end it reads zeros.
type byteSource struct{ b []byte }

func (s *byteSource) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	b := s.b[0]
	s.b = s.b[1:]
	return b
}

// pick returns one of vs, or zero, or (one time in 32) raw bits.
func pick[T ~uint64 | ~uint32](s *byteSource, vs ...T) T {
	b := s.byte()
	switch {
	case b&31 == 31:
		return T(s.u64())
	case b&3 == 0 || len(vs) == 0:
		return 0
	}
	return vs[int(b>>3)%len(vs)]
}

// someOf ORs up to three of vs, and (one time in 32) raw bits.
func someOf[T ~uint64 | ~uint32](s *byteSource, vs ...T) T {
	var x T
	for range s.byte() % 4 {
		x |= vs[int(s.byte())%len(vs)]
	}
	if s.byte()&31 == 31 {
		x |= T(s.u64())
	}
	return x
}

// capsFrom returns plausible caps mostly, random ones sometimes.
func capsFrom(s *byteSource) Caps {
	sets := []Caps{0, MSG, TAGGED, MSG | TAGGED, RMA, MSG | RMA, MSG | RMA | READ | WRITE, MSG | SEND, TAGGED | RECV,
		ATOMIC, MSG | SOURCE, TAGGED | DIRECTED_RECV | SOURCE, RMA | RMA_EVENT, MSG | MULTI_RECV, MSG | LOCAL_COMM,
		MSG | REMOTE_COMM, RMA | REMOTE_WRITE, TAGGED | SOURCE | SOURCE_ERR, MSG | HMEM, MSG | FENCE, MSG | SHARED_AV}
	if b := s.byte(); b < 192 {
		return sets[int(b)%len(sets)]
	}
	return someOf(s, allCapBits...)
}

// sideCapsFrom returns tx_attr or rx_attr caps: mostly 0, "the
// applicable capability bits from the fi_info structure".
func sideCapsFrom(s *byteSource) Caps {
	if s.byte()&3 != 0 {
		return 0
	}
	return capsFrom(s)
}

func sizeFrom(s *byteSource) uint64 {
	switch b := s.byte(); b & 3 {
	case 0:
		return 0
	case 1:
		return uint64(b >> 2)
	case 2:
		return 1 << (b >> 2 & 63)
	}
	return s.u64()
}

var (
	fuzzNodes    = []string{"", "127.0.0.1", "10.0.0.5", "10.0.0.9", "localhost", "node7", "v6host", "fd00::5", "[::1]", "::1", "no.such.host", "fi_sockaddr_in://127.0.0.1:7000", "fi_sockaddr_in6://[fd00::7]:1", "fi_sockaddr://bad", "0.0.0.0", "192.0.2.1"}
	fuzzServices = []string{"", "7000", "0", "http", "70000", "nosuch", "65535"}
	fuzzProvs    = []string{"", "tcp", "tcp;ofi_rxm", "ofi_rxm;verbs", "ofi_rxm", "verbs", "TCP", "udp", "tcp;^ofi_rxm", ";", "a;b;c"}
	fuzzDomains  = []string{"", "lo", "eth0", "rxe0", "v6", "rxe0-dgram", "eth9"}
	allCapBits   = []Caps{MSG, RMA, TAGGED, ATOMIC, MULTICAST, COLLECTIVE, READ, WRITE, RECV, SEND, REMOTE_READ,
		REMOTE_WRITE, MULTI_RECV, TRIGGER, FENCE, HMEM, VARIABLE_MSG, RMA_PMEM, SOURCE_ERR, LOCAL_COMM,
		REMOTE_COMM, SHARED_AV, RMA_EVENT, SOURCE, NAMED_RX_CTX, DIRECTED_RECV}
	allModeBits = []Mode{CONTEXT, MSG_PREFIX, ASYNC_IOV, RX_CQ_DATA, LOCAL_MR, NOTIFY_FLAGS_ONLY, RESTRICTED_COMP, CONTEXT2}
	allMRBits   = []MRMode{MR_LOCAL, MR_RAW, MR_VIRT_ADDR, MR_ALLOCATED, MR_PROV_KEY, MR_MMU_NOTIFY, MR_RMA_EVENT,
		MR_ENDPOINT, MR_HMEM, MR_COLLECTIVE}
)

func callFrom(b []byte) getinfoCall {
	s := &byteSource{b}
	// Each field is set one time in four, so that calls combine a few
	// requirements and often still match.
	maybe := func() bool { return s.byte() < 64 }
	str := func(vs []string) string {
		if !maybe() {
			return ""
		}
		return vs[int(s.byte())%len(vs)]
	}
	size := func() uint64 {
		if !maybe() {
			return 0
		}
		return sizeFrom(s)
	}
	c := getinfoCall{version: v1_17, node: str(fuzzNodes), service: str(fuzzServices)}
	switch b := s.byte(); {
	case b >= 254:
		c.version = []Version{MakeVersion(1, 18), MakeVersion(0, 1)}[b&1]
	case b >= 200:
		c.version = []Version{MakeVersion(1, 4), MakeVersion(1, 5)}[b&1]
	}
	switch b := s.byte(); {
	case b == 255:
		c.flags = s.u64()
	case b >= 250:
		c.flags = uint64(PROV_ATTR_ONLY)
	default:
		c.flags = uint64(b&1)*uint64(SOURCE) | uint64(b>>1&1)*uint64(NUMERICHOST)
	}
	if s.byte()&7 == 0 {
		return c
	}
	h := &Info{Caps: capsFrom(s), Mode: someOf(s, allModeBits...)}
	c.hints = h
	if maybe() {
		h.AddrFormat = pick(s, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6, ADDR_STR, SOCKADDR_IB)
	}
	if maybe() {
		h.SrcAddr = addr([]string{"10.0.0.5:7000", "127.0.0.1:0", "0.0.0.0:1", "[fd00::5]:2", "[::]:0", "192.0.2.1:1"}[s.byte()%6])
	}
	if maybe() {
		h.DestAddr = addr([]string{"10.0.0.9:7000", "127.0.0.1:7001", "[fd00::7]:3"}[s.byte()%3])
	}
	if maybe() {
		h.Handle = uint64(s.byte())
	}
	if maybe() {
		t := &TxAttr{Caps: sideCapsFrom(s)}
		if maybe() {
			t.Mode = someOf(s, allModeBits...)
		}
		if maybe() {
			t.OpFlags = someOf(s, COMPLETION, INJECT, DELIVERY_COMPLETE, TRANSMIT_COMPLETE)
		}
		if maybe() {
			t.MsgOrder = someOf(s, ORDER_SAS, ORDER_RAR, ORDER_WAW, ORDER_WAR)
		}
		t.CompOrder = pick(s, ORDER_STRICT, ORDER_DATA)
		t.InjectSize, t.Size, t.IovLimit, t.RMAIovLimit = size(), size(), size(), size()
		t.TClass = pick(s, TC_BULK_DATA, MakeDSCP(46))
		h.TxAttr = t
	}
	if maybe() {
		r := &RxAttr{Caps: sideCapsFrom(s)}
		if maybe() {
			r.Mode = someOf(s, allModeBits...)
		}
		if maybe() {
			r.OpFlags = someOf(s, COMPLETION, multiRecvOp)
		}
		if maybe() {
			r.MsgOrder = someOf(s, ORDER_SAS, ORDER_RAR)
		}
		r.CompOrder = pick(s, ORDER_STRICT, ORDER_DATA)
		r.TotalBufferedRecv, r.Size, r.IovLimit = size(), size(), size()
		h.RxAttr = r
	}
	if maybe() {
		ep := &EPAttr{Type: pick(s, EP_MSG, EP_RDM, EP_DGRAM, EP_SOCK_STREAM)}
		if maybe() {
			ep.Protocol = pick(s, PROTO_SOCK_TCP, PROTO_RXM_TCP, PROTO_RXM)
		}
		ep.ProtocolVersion = uint32(size())
		ep.MaxMsgSize, ep.MsgPrefixSize, ep.MemTagFormat = size(), size(), size()
		ep.MaxOrderRAWSize, ep.MaxOrderWARSize, ep.MaxOrderWAWSize = size(), size(), size()
		if maybe() {
			ep.TxCtxCnt = pick(s, 1, 2, SHARED_CONTEXT)
		}
		if maybe() {
			ep.RxCtxCnt = pick(s, 1, 2, SHARED_CONTEXT)
		}
		if maybe() {
			ep.AuthKeySize = uint64(s.byte() % 9)
			if maybe() {
				ep.AuthKey = make([]byte, s.byte()%9)
			}
		}
		h.EPAttr = ep
	}
	if maybe() {
		d := &DomainAttr{Name: str(fuzzDomains)}
		if maybe() {
			d.Threading = pick(s, THREAD_SAFE, THREAD_FID, THREAD_DOMAIN, THREAD_COMPLETION, THREAD_ENDPOINT)
		}
		if maybe() {
			d.ControlProgress, d.DataProgress = pick(s, PROGRESS_AUTO, PROGRESS_MANUAL), pick(s, PROGRESS_AUTO, PROGRESS_MANUAL)
		}
		if maybe() {
			d.ResourceMgmt, d.AVType = pick(s, RM_ENABLED, RM_DISABLED), pick(s, AV_MAP, AV_TABLE)
		}
		d.MRMode = pick(s, MR_BASIC, MR_SCALABLE, MR_LOCAL|mrBasicMap, MR_LOCAL|MR_ALLOCATED)
		if maybe() {
			d.MRMode |= someOf(s, allMRBits...)
		}
		d.MRKeySize, d.CQDataSize, d.CQCnt, d.EPCnt, d.MaxEPSrxCtx, d.CntrCnt = size(), size(), size(), size(), size(), size()
		if maybe() {
			d.Caps = someOf(s, LOCAL_COMM, REMOTE_COMM, SHARED_AV)
		}
		if maybe() {
			d.Mode = RESTRICTED_COMP
		}
		if maybe() {
			d.TClass = TC_LOW_LATENCY
		}
		if maybe() {
			d.AuthKeySize = uint64(s.byte() % 9)
		}
		if maybe() {
			d.Domain = uint64(s.byte())
		}
		h.DomainAttr = d
	}
	if maybe() {
		f := &FabricAttr{ProvName: str(fuzzProvs), Name: str([]string{"127.0.0.0/8", "10.0.0.0/24", "x"})}
		if maybe() {
			f.ProvVersion = pick(s, MakeVersion(117, 0), MakeVersion(117, 1), MakeVersion(118, 0))
		}
		if maybe() {
			f.APIVersion = pick(s, v1_17, MakeVersion(1, 5), MakeVersion(1, 18))
		}
		h.FabricAttr = f
	}
	return c
}

// multiRecvOp is FI_MULTI_RECV as a receive operation flag.
const multiRecvOp = OpFlags(MULTI_RECV)

// checkCall runs one call and checks the properties every answer has:
// no panic; an error is an Errno with a sentence and no entries; entries
// come in the offered order, complete, with api_version set; and asking
// again with an answer as the hints finds that same entry (what GetInfo
// returns is something it accepts).
func checkCall(t *testing.T, c getinfoCall) {
	t.Helper()
	offered := testOffered()
	out, err := GetInfo(context.Background(), c.version, c.node, c.service, c.flags, c.hints, offered)
	if err != nil {
		var code Errno
		if !errors.As(err, &code) || code == 0 || !strings.HasPrefix(err.Error(), "fi_getinfo: ") || out != nil {
			t.Fatalf("GetInfo(%v) = %v, %v: want nil and an Errno", c, ids(out), err)
		}
		return
	}
	if len(out) == 0 {
		t.Fatalf("GetInfo(%v) = no entries, no error", c)
	}
	if c.flags&uint64(PROV_ATTR_ONLY) != 0 {
		return
	}
	next := 0
	for _, in := range out {
		if in.TxAttr == nil || in.RxAttr == nil || in.EPAttr == nil || in.DomainAttr == nil || in.FabricAttr == nil {
			t.Fatalf("GetInfo(%v) returned an incomplete entry:\n%v", c, in)
		}
		if in.FabricAttr.APIVersion != c.version {
			t.Fatalf("GetInfo(%v): api_version %v, want %v", c, in.FabricAttr.APIVersion, c.version)
		}
		for next < len(offered) && id(offered[next]) != id(in) {
			next++
		}
		if next == len(offered) {
			t.Fatalf("GetInfo(%v) = %v: not in the offered order %v", c, ids(out), ids(offered))
		}
		next++
		again, err := GetInfo(context.Background(), c.version, "", "", 0, in, testOffered())
		if err != nil || !slices.Contains(ids(again), id(in)) {
			t.Fatalf("GetInfo(%v) returned\n%v\nbut with it as hints GetInfo = %v, %v", c, in, ids(again), err)
		}
	}
}

// TestGetInfoRandom checks the properties of checkCall on random calls.
func TestGetInfoRandom(t *testing.T) {
	fakeNet(t)
	r := rand.New(rand.NewPCG(1, 17))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	buf := make([]byte, 400)
	for range n {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		checkCall(t, callFrom(buf))
	}
}

// FuzzGetInfo: random hints never panic, and answers have the properties of
// checkCall. go test -fuzz=FuzzGetInfo ./core/fi/
func FuzzGetInfo(f *testing.F) {
	fakeNet(f)
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte("\x00\x04\x01\x00\x01\x02\x00\x00\x00\x00\x00\x00\x00\x07\x01\x01\x01"))
	f.Add(make([]byte, 64))
	for i := range 8 {
		b := make([]byte, 200)
		r := rand.New(rand.NewPCG(uint64(i), 3))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCall(t, callFrom(b)) })
}
