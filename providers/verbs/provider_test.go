package verbs

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// TestInfos: per device an FI_EP_MSG entry, then an FI_EP_DGRAM one in
// the "-dgram" domain, with libfabric verbs's attributes where fabricfs
// behaves alike (docs/verbs.md lists the differences).
func TestInfos(t *testing.T) {
	p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
	infos := p.Infos()
	want := []struct {
		dom string
		typ fi.EPType
		src string
	}{
		{"rxe_127_0_0_1", fi.EP_MSG, "127.0.0.1:0"},
		{"rxe_127_0_0_1-dgram", fi.EP_DGRAM, "127.0.0.1:0"},
		{"rxe_127_0_0_2", fi.EP_MSG, "127.0.0.2:0"},
		{"rxe_127_0_0_2-dgram", fi.EP_DGRAM, "127.0.0.2:0"},
	}
	if len(infos) != len(want) {
		t.Fatalf("%d entries, want %d", len(infos), len(want))
	}
	for i, w := range want {
		in := infos[i]
		if in.DomainAttr.Name != w.dom || in.EPAttr.Type != w.typ || in.SrcAddr == nil || in.SrcAddr.IP.String() != w.src {
			t.Errorf("entry %d: domain %s type %v src %v, want %s %v %s", i, in.DomainAttr.Name, in.EPAttr.Type, in.SrcAddr, w.dom, w.typ, w.src)
		}
		d := in.DomainAttr
		if d.MRMode != fi.MR_LOCAL|fi.MR_VIRT_ADDR|fi.MR_ALLOCATED|fi.MR_PROV_KEY || d.MRKeySize != 4 || d.CQDataSize != 4 || d.MaxErrData != 0 || d.MaxEPTxCtx != 1 || d.MaxEPRxCtx != 1 || d.CntrCnt != CQCnt ||
			d.Threading != fi.THREAD_SAFE || d.DataProgress != fi.PROGRESS_AUTO || d.ResourceMgmt != fi.RM_ENABLED {
			t.Errorf("%s: domain attributes %+v", w.dom, d)
		}
		if in.FabricAttr.ProvName != "verbs" || in.FabricAttr.Name != "IB-0x0" {
			t.Errorf("%s: prov_name %q fabric %q, want verbs and IB-0x0", w.dom, in.FabricAttr.ProvName, in.FabricAttr.Name)
		}
		if in.AddrFormat != fi.SOCKADDR_IN || in.RxAttr.Mode != fi.RX_CQ_DATA || in.TxAttr.OpFlags != 0 || in.TxAttr.InjectSize == 0 {
			t.Errorf("%s: addr_format %v rx mode %v tx op_flags %v inject_size %d", w.dom, in.AddrFormat, in.RxAttr.Mode, in.TxAttr.OpFlags, in.TxAttr.InjectSize)
		}
		switch w.typ {
		case fi.EP_MSG:
			if in.Caps != msgCaps || in.EPAttr.Protocol != fi.PROTO_RDMA_CM_IB_RC || in.EPAttr.MaxMsgSize != MaxMsgSize {
				t.Errorf("%s: caps %v protocol %v max_msg_size %d", w.dom, in.Caps, in.EPAttr.Protocol, in.EPAttr.MaxMsgSize)
			}
		case fi.EP_DGRAM:
			if in.Caps != dgramCaps || in.EPAttr.Protocol != fi.PROTO_IB_UD || in.EPAttr.MaxMsgSize != 4096 {
				t.Errorf("%s: caps %v protocol %v max_msg_size %d", w.dom, in.Caps, in.EPAttr.Protocol, in.EPAttr.MaxMsgSize)
			}
		}
	}
	if p.Name() != "verbs" {
		t.Errorf("name %q", p.Name())
	}
}

func TestOpenDomain(t *testing.T) {
	p := testProvider(t, nil, "127.0.0.1")
	for _, name := range []string{"rxe_127_0_0_1", "rxe_127_0_0_1-dgram"} {
		openDomain(t, p, name)
	}
	if _, err := p.OpenDomain("rxe_127_0_0_9"); !errors.Is(err, fi.ENODEV) {
		t.Errorf("OpenDomain of no device = %v, want FI_ENODEV", err)
	}
	if dev, ok := p.Device("rxe_127_0_0_1-dgram"); !ok || dev.Addr().Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Device(-dgram) = %v, %v", dev, ok)
	}
}

// TestNewFails: an address the host does not have fails New when it was
// asked for.
func TestNewFails(t *testing.T) {
	_, err := New(Config{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Port: 1})
	if err == nil {
		t.Fatal("New with an address the host lacks succeeded")
	}
	if _, err := New(Config{Port: 70000}); !errors.Is(err, fi.EINVAL) {
		t.Errorf("New with port 70000 = %v, want FI_EINVAL", err)
	}
}

func TestDeviceName(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1": "rxe_127_0_0_1", "::1": "rxe___1", "::ffff:10.1.2.3": "rxe_10_1_2_3"} {
		if got := DeviceName(netip.MustParseAddr(in)); got != want {
			t.Errorf("DeviceName(%s) = %q, want %q", in, got, want)
		}
	}
}
