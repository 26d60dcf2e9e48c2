package fi

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// diff describes the first line where got and want differ.
func diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	return "no difference"
}

// loMsgInfo is the fi_info the tcp provider of libfabric 1.17 offers for
// FI_EP_MSG over IPv4 on the loopback interface, as `fi_info -v -p tcp`
// describes it.
func loMsgInfo() *Info {
	src := mustParseAddr("fi_sockaddr_in://127.0.0.1:0")
	order := ORDER_RAR | ORDER_RAW | ORDER_RAS | ORDER_WAW | ORDER_WAS | ORDER_SAW | ORDER_SAS |
		ORDER_RMA_RAR | ORDER_RMA_RAW | ORDER_RMA_WAW | ORDER_ATOMIC_RAR | ORDER_ATOMIC_RAW | ORDER_ATOMIC_WAW
	return &Info{
		Caps: MSG | RMA | READ | WRITE | RECV | SEND | REMOTE_READ | REMOTE_WRITE | RMA_PMEM |
			LOCAL_COMM | RMA_EVENT,
		AddrFormat: SOCKADDR_IN,
		SrcAddr:    &src,
		TxAttr: &TxAttr{
			Caps:        MSG | RMA | READ | WRITE | SEND | RMA_PMEM,
			MsgOrder:    order,
			CompOrder:   ORDER_STRICT,
			InjectSize:  128,
			Size:        256,
			IovLimit:    4,
			RMAIovLimit: 4,
		},
		RxAttr: &RxAttr{
			Caps:      MSG | RMA | RECV | REMOTE_READ | REMOTE_WRITE | RMA_PMEM | RMA_EVENT,
			MsgOrder:  order,
			CompOrder: ORDER_STRICT,
			Size:      256,
			IovLimit:  4,
		},
		EPAttr: &EPAttr{
			Type:            EP_MSG,
			Protocol:        PROTO_SOCK_TCP,
			MaxMsgSize:      math.MaxUint64,
			MaxOrderRAWSize: math.MaxUint64,
			MaxOrderWAWSize: math.MaxUint64,
			TxCtxCnt:        1,
			RxCtxCnt:        1,
		},
		DomainAttr: &DomainAttr{
			Name:            "lo",
			Threading:       THREAD_SAFE,
			ControlProgress: PROGRESS_AUTO,
			DataProgress:    PROGRESS_AUTO,
			ResourceMgmt:    RM_ENABLED,
			MRKeySize:       8,
			CQDataSize:      8,
			CQCnt:           256,
			EPCnt:           8192,
			TxCtxCnt:        8192,
			RxCtxCnt:        8192,
			MaxEPTxCtx:      1,
			MaxEPRxCtx:      1,
			MaxEPSrxCtx:     8192,
			MRIovLimit:      1,
			Caps:            LOCAL_COMM | REMOTE_COMM,
		},
		FabricAttr: &FabricAttr{
			Name:        "127.0.0.1/32",
			ProvName:    "tcp",
			ProvVersion: MakeVersion(117, 0),
			APIVersion:  MakeVersion(1, 17),
		},
	}
}

func mustParseAddr(s string) Addr {
	a, err := ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// TestInfoMatchesFiInfo renders loMsgInfo and compares it with the entry
// the real `fi_info -v -p tcp` prints for it.
func TestInfoMatchesFiInfo(t *testing.T) {
	path, err := exec.LookPath("fi_info")
	needTool(t, err == nil, "fi_info not found (install libfabric-bin): cannot compare with libfabric's output")
	out, err := exec.Command(path, "-v", "-p", "tcp").Output()
	if err != nil {
		t.Fatalf("fi_info -v -p tcp: %v", err)
	}
	var entry string
	for _, block := range strings.Split(string(out), "---\n") {
		if strings.Contains(block, "\n    addr_format: FI_SOCKADDR_IN\n") &&
			strings.Contains(block, "\n        type: FI_EP_MSG\n") &&
			strings.Contains(block, "\n        name: lo\n") {
			entry = block
		}
	}
	needTool(t, entry != "", "fi_info -v -p tcp printed no FI_EP_MSG entry for lo over IPv4")
	if got := loMsgInfo().String(); got != entry {
		t.Errorf("(*Info).String() differs from fi_info's entry: %s\ngot:\n%s\nfi_info:\n%s", diff(got, entry), got, entry)
	}

	var b bytes.Buffer
	if err := WriteInfos(&b, []*Info{loMsgInfo(), loMsgInfo()}); err != nil {
		t.Fatal(err)
	}
	if want := "---\n" + entry + "---\n" + entry; b.String() != want {
		t.Errorf("WriteInfos: %s", diff(b.String(), want))
	}
}

var formatInfoTests = []struct {
	v    fmt.Stringer
	want string
}{
	{&Info{}, `fi_info:
    caps: [  ]
    mode: [  ]
    addr_format: FI_FORMAT_UNSPEC
    src_addrlen: 0
    dest_addrlen: 0
    src_addr: (null)
    dest_addr: (null)
    handle: (nil)
    fi_tx_attr: (null)
    fi_rx_attr: (null)
    fi_ep_attr: (null)
    fi_domain_attr: (null)
    fi_fabric_attr: (null)
    nic: (nil)
`},
	{&Info{Handle: 0x7fff272d6c00, AddrFormat: SOCKADDR,
		SrcAddr:    &Addr{Format: SOCKADDR_IN, IP: ap("10.1.2.3:7000")},
		DestAddr:   &Addr{Format: SOCKADDR_IN6, IP: ap("[fe80::1%2]:80")},
		FabricAttr: &FabricAttr{ProvVersion: MakeVersion(2, 3), APIVersion: 0x12345678},
	}, `fi_info:
    caps: [  ]
    mode: [  ]
    addr_format: FI_SOCKADDR
    src_addrlen: 16
    dest_addrlen: 28
    src_addr: fi_sockaddr_in://10.1.2.3:7000
    dest_addr: fi_sockaddr_in6://[fe80::1]:80
    handle: 0x7fff272d6c00
    fi_tx_attr: (null)
    fi_rx_attr: (null)
    fi_ep_attr: (null)
    fi_domain_attr: (null)
    fi_fabric_attr:
        name: (null)
        prov_name: (null)
        prov_version: 2.3
        api_version: 4660.22136
    nic: (nil)
`},
	{&Info{AddrFormat: FORMAT_UNSPEC, SrcAddr: &Addr{Format: SOCKADDR_IN, IP: ap("10.1.2.3:7000")}}, `fi_info:
    caps: [  ]
    mode: [  ]
    addr_format: FI_FORMAT_UNSPEC
    src_addrlen: 16
    dest_addrlen: 0
    src_addr: 
    dest_addr: (null)
    handle: (nil)
    fi_tx_attr: (null)
    fi_rx_attr: (null)
    fi_ep_attr: (null)
    fi_domain_attr: (null)
    fi_fabric_attr: (null)
    nic: (nil)
`},
	{&TxAttr{CompOrder: ORDER_STRICT | ORDER_DATA, InjectSize: math.MaxUint64, TClass: 0x1ab}, `fi_tx_attr:
    caps: [  ]
    mode: [  ]
    op_flags: [  ]
    msg_order: [  ]
    comp_order: [ FI_ORDER_STRICT, FI_ORDER_DATA ]
    inject_size: 18446744073709551615
    size: 0
    iov_limit: 0
    rma_iov_limit: 0
    tclass: 0x1ab
`},
	{&RxAttr{MsgOrder: ORDER_RAR}, `fi_rx_attr:
    caps: [  ]
    mode: [  ]
    op_flags: [  ]
    msg_order: [ FI_ORDER_RAR ]
    comp_order: [ FI_ORDER_NONE ]
    total_buffered_recv: 0
    size: 0
    iov_limit: 0
`},
	{&EPAttr{MemTagFormat: 0x1234, AuthKeySize: 3, AuthKey: []byte{1, 2, 3}}, `fi_ep_attr:
    type: FI_EP_UNSPEC
    protocol: FI_PROTO_UNSPEC
    protocol_version: 0
    max_msg_size: 0
    msg_prefix_size: 0
    max_order_raw_size: 0
    max_order_war_size: 0
    max_order_waw_size: 0
    mem_tag_format: 0x0000000000001234
    tx_ctx_cnt: 0
    rx_ctx_cnt: 0
    auth_key_size: 3
`},
	{&DomainAttr{Domain: 0x1234, MRMode: MR_LOCAL | MR_VIRT_ADDR, TClass: MakeDSCP(5)}, `fi_domain_attr:
    domain: 0x1234
    name: (null)
    threading: FI_THREAD_UNSPEC
    control_progress: FI_PROGRESS_UNSPEC
    data_progress: FI_PROGRESS_UNSPEC
    resource_mgmt: FI_RM_UNSPEC
    av_type: FI_AV_UNSPEC
    mr_mode: [ FI_MR_LOCAL, FI_MR_VIRT_ADDR ]
    mr_key_size: 0
    cq_data_size: 0
    cq_cnt: 0
    ep_cnt: 0
    tx_ctx_cnt: 0
    rx_ctx_cnt: 0
    max_ep_tx_ctx: 0
    max_ep_rx_ctx: 0
    max_ep_stx_ctx: 0
    max_ep_srx_ctx: 0
    cntr_cnt: 0
    mr_iov_limit: 0
    caps: [  ]
    mode: [  ]
    auth_key_size: 0
    max_err_data: 0
    mr_cnt: 0
    tclass: 0x105
`},
	{&FabricAttr{Name: "fab", ProvName: "prov", ProvVersion: MakeVersion(117, 0), APIVersion: MakeVersion(1, 17)}, `fi_fabric_attr:
    name: fab
    prov_name: prov
    prov_version: 117.0
    api_version: 1.17
`},
	{(*TxAttr)(nil), "fi_tx_attr: (null)\n"},
}

func TestFormatInfo(t *testing.T) {
	for _, tt := range formatInfoTests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T.String(): %s\ngot:\n%s", tt.v, diff(got, tt.want), got)
		}
	}
	if got, want := (*Info)(nil).String(), (&Info{}).String(); got != want {
		t.Errorf("(*Info)(nil).String() = %q, want %q", got, want)
	}
}

// oddInfos are fi_info values chosen to reach every formatting rule:
// unnamed bits, unknown enumerations, absent attributes and every address
// format fi_tostr formats.
func oddInfos() []*Info {
	lo := loMsgInfo()
	full := lo.Clone()
	full.Caps |= AV_USER_ID | HMEM | 1
	full.Mode = CONTEXT | 1<<3
	full.AddrFormat = SOCKADDR
	full.DestAddr = &Addr{Format: SOCKADDR_IN6, IP: ap("[fd00::2]:7000")}
	full.TxAttr.OpFlags = COMPLETION | DELIVERY_COMPLETE | COMMIT_COMPLETE | OpFlags(SEND)
	full.TxAttr.CompOrder = ORDER_STRICT | ORDER_DATA
	full.TxAttr.TClass = TC_BULK_DATA
	full.RxAttr.CompOrder = ORDER_DATA | 1
	full.RxAttr.TotalBufferedRecv = 1 << 20
	full.EPAttr.Type = 9
	full.EPAttr.Protocol = Protocol(PROV_SPECIFIC | 3)
	full.EPAttr.ProtocolVersion = 2
	full.EPAttr.MemTagFormat = 0xaaaaaaaaaaaaaaaa
	full.EPAttr.TxCtxCnt = SHARED_CONTEXT
	full.EPAttr.RxCtxCnt = SHARED_CONTEXT
	full.DomainAttr.TxCtxCnt = SHARED_CONTEXT // a count: no name here
	full.EPAttr.AuthKey, full.EPAttr.AuthKeySize = []byte{1, 2, 3}, 3
	d := full.DomainAttr
	d.Domain, d.Threading, d.ControlProgress, d.DataProgress = 0x1234, THREAD_DOMAIN, PROGRESS_MANUAL, 7
	d.ResourceMgmt, d.AVType, d.MRMode = 7, AV_TABLE, MR_LOCAL|MR_ENDPOINT|1<<20
	d.Mode, d.TClass, d.MaxErrData, d.MRCnt = RX_CQ_DATA, MakeDSCP(46), 64, 1000
	d.AuthKey, d.AuthKeySize = []byte{9}, 1
	full.FabricAttr.Fabric = 0x5678
	full.FabricAttr.APIVersion = 0x12345678

	in6 := lo.Clone()
	in6.AddrFormat = SOCKADDR_IN6
	in6.SrcAddr = &Addr{Format: SOCKADDR_IN6, IP: ap("[fe80::fc:ff:fe00:1%2]:0")}
	in6.DestAddr = &Addr{Format: SOCKADDR_IN6, IP: ap("[::1]:65535")}
	in6.DomainAttr.Threading, in6.DomainAttr.AVType = 99, 99

	str := lo.Clone()
	str.AddrFormat = ADDR_STR
	str.SrcAddr.Format = ADDR_STR
	str.TxAttr, str.EPAttr = nil, nil
	str.FabricAttr.Name, str.FabricAttr.ProvName = "", ""

	unspec := lo.Clone()
	unspec.AddrFormat = FORMAT_UNSPEC
	unspec.RxAttr, unspec.DomainAttr = nil, nil

	return []*Info{{}, lo, full, in6, str, unspec}
}

// cInfo writes C statements that build info as a struct fi_info named v.
func cInfo(b *strings.Builder, info *Info) {
	u := func(v any) string { return fmt.Sprintf("%dULL", v) }
	cstr := func(s string) string {
		if s == "" {
			return "NULL"
		}
		return strconv.Quote(s)
	}
	key := func(k []byte) string {
		if k == nil {
			return "NULL"
		}
		var bs []string
		for _, c := range k {
			bs = append(bs, strconv.Itoa(int(c)))
		}
		return "(uint8_t[]){" + strings.Join(bs, ", ") + "}"
	}
	addr := func(a *Addr) string {
		switch {
		case a == nil:
			return "NULL"
		case info.AddrFormat == ADDR_STR:
			return "strdup(" + strconv.Quote(a.String()) + ")"
		}
		return fmt.Sprintf("mkaddr(%q, %d)", a.IP.Addr().WithZone(""), a.IP.Port())
	}
	fmt.Fprintf(b, "\tmemset(&v, 0, sizeof v);\n")
	fmt.Fprintf(b, "\tv.caps = %s; v.mode = %s; v.addr_format = %d;\n", u(info.Caps), u(info.Mode), info.AddrFormat)
	fmt.Fprintf(b, "\tv.src_addrlen = %d; v.src_addr = %s;\n", infoAddrLen(info.SrcAddr), addr(info.SrcAddr))
	fmt.Fprintf(b, "\tv.dest_addrlen = %d; v.dest_addr = %s;\n", infoAddrLen(info.DestAddr), addr(info.DestAddr))
	if a := info.TxAttr; a != nil {
		fmt.Fprintf(b, "\tv.tx_attr = &(struct fi_tx_attr){%s, %s, %s, %s, %s, %s, %s, %s, %s, %d};\n",
			u(a.Caps), u(a.Mode), u(a.OpFlags), u(a.MsgOrder), u(a.CompOrder),
			u(a.InjectSize), u(a.Size), u(a.IovLimit), u(a.RMAIovLimit), a.TClass)
	}
	if a := info.RxAttr; a != nil {
		fmt.Fprintf(b, "\tv.rx_attr = &(struct fi_rx_attr){%s, %s, %s, %s, %s, %s, %s, %s};\n",
			u(a.Caps), u(a.Mode), u(a.OpFlags), u(a.MsgOrder), u(a.CompOrder),
			u(a.TotalBufferedRecv), u(a.Size), u(a.IovLimit))
	}
	if a := info.EPAttr; a != nil {
		fmt.Fprintf(b, "\tv.ep_attr = &(struct fi_ep_attr){%d, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s};\n",
			a.Type, a.Protocol, a.ProtocolVersion, u(a.MaxMsgSize), u(a.MsgPrefixSize),
			u(a.MaxOrderRAWSize), u(a.MaxOrderWARSize), u(a.MaxOrderWAWSize), u(a.MemTagFormat),
			u(a.TxCtxCnt), u(a.RxCtxCnt), u(a.AuthKeySize), key(a.AuthKey))
	}
	if a := info.DomainAttr; a != nil {
		fmt.Fprintf(b, "\tv.domain_attr = &(struct fi_domain_attr){(void *)%s, %s, %d, %d, %d, %d, %d, %d, "+
			"%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %d};\n",
			u(a.Domain), cstr(a.Name), a.Threading, a.ControlProgress, a.DataProgress, a.ResourceMgmt,
			a.AVType, a.MRMode, u(a.MRKeySize), u(a.CQDataSize), u(a.CQCnt), u(a.EPCnt),
			u(a.TxCtxCnt), u(a.RxCtxCnt), u(a.MaxEPTxCtx), u(a.MaxEPRxCtx), u(a.MaxEPStxCtx),
			u(a.MaxEPSrxCtx), u(a.CntrCnt), u(a.MRIovLimit), u(a.Caps), u(a.Mode), key(a.AuthKey),
			u(a.AuthKeySize), u(a.MaxErrData), u(a.MRCnt), a.TClass)
	}
	if a := info.FabricAttr; a != nil {
		fmt.Fprintf(b, "\tv.fabric_attr = &(struct fi_fabric_attr){(void *)%s, %s, %s, %d, %d};\n",
			u(a.Fabric), cstr(a.Name), cstr(a.ProvName), a.ProvVersion, a.APIVersion)
	}
}

// TestInfoMatchesFiTostr renders oddInfos, and each of their attribute
// structs alone, with libfabric's fi_tostr and compares.
func TestInfoMatchesFiTostr(t *testing.T) {
	const sep = "=====\n"
	var b strings.Builder
	var want []string
	b.WriteString(cHeaders + `#include <stdlib.h>
static void *mkaddr(const char *ip, unsigned port) {
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s = calloc(1, sizeof *s);
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &s->sin6_addr);
		return s;
	}
	struct sockaddr_in *s = calloc(1, sizeof *s);
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
	return s;
}
int main(void) {
	struct fi_info v;
`)
	show := func(c, ftype, s string) {
		fmt.Fprintf(&b, "\tprintf(\"%s%%s\", fi_tostr(%s, %s));\n", strings.ReplaceAll(sep, "\n", `\n`), c, ftype)
		want = append(want, s)
	}
	for _, info := range oddInfos() {
		cInfo(&b, info)
		show("&v", "FI_TYPE_INFO", info.String())
		if info.TxAttr != nil {
			show("v.tx_attr", "FI_TYPE_TX_ATTR", info.TxAttr.String())
		}
		if info.RxAttr != nil {
			show("v.rx_attr", "FI_TYPE_RX_ATTR", info.RxAttr.String())
		}
		if info.EPAttr != nil {
			show("v.ep_attr", "FI_TYPE_EP_ATTR", info.EPAttr.String())
		}
		if info.DomainAttr != nil {
			show("v.domain_attr", "FI_TYPE_DOMAIN_ATTR", info.DomainAttr.String())
		}
		if info.FabricAttr != nil {
			show("v.fabric_attr", "FI_TYPE_FABRIC_ATTR", info.FabricAttr.String())
		}
	}
	b.WriteString("\treturn 0;\n}\n")
	got := strings.Split(strings.TrimPrefix(runC(t, b.String(), "fabric"), sep), sep)
	if len(got) != len(want) {
		t.Fatalf("fi_tostr printed %d blocks, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("block %d: String() differs from fi_tostr: %s\nString():\n%s\nfi_tostr:\n%s",
				i, diff(want[i], got[i]), want[i], got[i])
		}
	}
}

func TestClone(t *testing.T) {
	for _, info := range oddInfos() {
		c := info.Clone()
		if !reflect.DeepEqual(c, info) {
			t.Fatalf("Clone() = %+v, want %+v", c, info)
		}
		if c.SrcAddr != nil && c.SrcAddr == info.SrcAddr ||
			c.TxAttr != nil && c.TxAttr == info.TxAttr ||
			c.RxAttr != nil && c.RxAttr == info.RxAttr ||
			c.EPAttr != nil && c.EPAttr == info.EPAttr ||
			c.DomainAttr != nil && c.DomainAttr == info.DomainAttr ||
			c.FabricAttr != nil && c.FabricAttr == info.FabricAttr {
			t.Fatalf("Clone() shares a pointer with the original")
		}
		if k := c.EPAttr; k != nil && len(k.AuthKey) > 0 {
			k.AuthKey[0]++
			if bytes.Equal(k.AuthKey, info.EPAttr.AuthKey) {
				t.Fatalf("Clone() shares EPAttr.AuthKey")
			}
		}
		if k := c.DomainAttr; k != nil && len(k.AuthKey) > 0 {
			k.AuthKey[0]++
			if bytes.Equal(k.AuthKey, info.DomainAttr.AuthKey) {
				t.Fatalf("Clone() shares DomainAttr.AuthKey")
			}
		}
	}
	if (*Info)(nil).Clone() != nil {
		t.Errorf("(*Info)(nil).Clone() != nil")
	}
}

func TestCloneInfos(t *testing.T) {
	infos := oddInfos()
	c := CloneInfos(infos)
	if !reflect.DeepEqual(c, infos) {
		t.Fatalf("CloneInfos() = %+v, want %+v", c, infos)
	}
	for i := range c {
		if c[i] == infos[i] {
			t.Fatalf("CloneInfos()[%d] is the original entry", i)
		}
	}
	if got := CloneInfos(nil); len(got) != 0 {
		t.Errorf("CloneInfos(nil) = %v, want empty", got)
	}
}
