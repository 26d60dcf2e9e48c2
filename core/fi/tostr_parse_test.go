package fi

import (
	"os/exec"
	"strings"
	"testing"
)

// infoRoundTrip parses text and requires the result to print as text.
func infoRoundTrip(t *testing.T, what, text string) {
	t.Helper()
	info, err := ParseInfo(text)
	if err != nil {
		t.Errorf("%s: ParseInfo: %v\n%s", what, err, text)
		return
	}
	if got := info.String(); got != text {
		t.Errorf("%s: ParseInfo then String: %s\ngot:\n%s\nwant:\n%s", what, diff(got, text), got, text)
	}
}

// TestParseInfoRoundTrip: every entry the tests' providers offer, and the
// odd values String reaches that fi_tostr's text can carry, print the same
// after ParseInfo.
func TestParseInfoRoundTrip(t *testing.T) {
	for _, e := range testOffered() {
		infoRoundTrip(t, "offered entry "+e.DomainAttr.Name+" "+e.EPAttr.Type.String(), e.String())
	}
	odd := oddInfos()
	for _, i := range []int{0, 1, 4} { // {}, lo, str
		infoRoundTrip(t, "odd info", odd[i].String())
	}
	// An FI_ADDR_STR address of another provider is kept as its text.
	shm := odd[4].Clone()
	shm.SrcAddr = &Addr{Format: ADDR_STR, Str: "fi_shm://10530"}
	shm.DestAddr = &Addr{Format: ADDR_STR, Str: "fi_shm://10530"}
	infoRoundTrip(t, "shm", shm.String())
	if in, err := ParseInfo(shm.String()); err != nil || in.SrcAddr.Len() != 15 || in.SrcAddr.Str != "fi_shm://10530" {
		t.Errorf("ParseInfo(shm) src_addr = %+v, %v; want fi_shm://10530 of 15 bytes", in, err)
	}
	// What fi_tostr's text cannot carry: unknown enumerations print
	// "Unknown", a format it does not print leaves the address out.
	for _, i := range []int{2, 3, 5} {
		if _, err := ParseInfo(odd[i].String()); err == nil {
			t.Errorf("ParseInfo(odd info %d) succeeded; its text has a value that does not read:\n%s", i, odd[i])
		}
	}
}

// TestParseInfoFiInfo: every entry the real `fi_info -v` prints (all of
// libfabric's providers on this machine) prints the same after ParseInfo.
func TestParseInfoFiInfo(t *testing.T) {
	path, err := exec.LookPath("fi_info")
	needTool(t, err == nil, "fi_info not found (install libfabric-bin): cannot read libfabric's output")
	out, err := exec.Command(path, "-v").Output()
	if err != nil {
		t.Fatalf("fi_info -v: %v", err)
	}
	n := 0
	for _, block := range strings.Split(string(out), "---\n") {
		if block == "" {
			continue
		}
		infoRoundTrip(t, "fi_info -v entry", block)
		n++
	}
	if n < 2 {
		t.Fatalf("fi_info -v printed %d entries", n)
	}
	t.Logf("%d entries of fi_info -v round-trip", n)
}

// TestParseInfoPartial: a block may leave fields and structs out; they are
// zero, as in a struct from fi_allocinfo.
func TestParseInfoPartial(t *testing.T) {
	in, err := ParseInfo(`fi_info:
	caps: FI_MSG|FI_TAGGED
	fi_tx_attr:
		op_flags: [ FI_COMPLETION ]
		size: 64
	fi_domain_attr:
		threading: FI_THREAD_DOMAIN
		name: lo
	fi_fabric_attr: (null)
	src_addr: fi_sockaddr_in://127.0.0.1:7000
	addr_format: FI_SOCKADDR_IN
`)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case in.Caps != MSG|TAGGED || in.Mode != 0 || in.RxAttr != nil || in.EPAttr != nil || in.FabricAttr != nil:
		t.Errorf("top level: %+v", in)
	case in.TxAttr == nil || in.TxAttr.OpFlags != COMPLETION || in.TxAttr.Size != 64 || in.TxAttr.Caps != 0:
		t.Errorf("tx_attr: %+v", in.TxAttr)
	case in.DomainAttr == nil || in.DomainAttr.Threading != THREAD_DOMAIN || in.DomainAttr.Name != "lo" || in.DomainAttr.MRMode != 0:
		t.Errorf("domain_attr: %+v", in.DomainAttr)
	case in.SrcAddr == nil || in.SrcAddr.String() != "fi_sockaddr_in://127.0.0.1:7000" || in.DestAddr != nil:
		t.Errorf("addresses: %v %v", in.SrcAddr, in.DestAddr)
	}
}

var parseInfoErrors = []struct{ in, err string }{
	{"", `start with "fi_info:"`},
	{"caps: [ FI_MSG ]\n", `start with "fi_info:"`},
	{"fi_info:\ncaps: [ FI_MSG ]\n", "indented"},
	{"fi_info:\n    caps: [ FI_BOGUS ]\n", "caps: unknown capability"},
	{"fi_info:\n    color: red\n", "unknown field color"},
	{"fi_info:\n    caps: [ FI_MSG ]\n    caps: [ FI_RMA ]\n", "caps given twice"},
	{"fi_info:\n    fi_tx_attr:\n        size: 1\n        size: 2\n", "fi_tx_attr.size given twice"},
	{"fi_info:\n    fi_tx_attr:\n        size: -1\n", "fi_tx_attr.size"},
	{"fi_info:\n    fi_tx_attr:\n        threading: FI_THREAD_SAFE\n", "unknown field fi_tx_attr.threading"},
	{"fi_info:\n    fi_tx_attr: (null)\n        size: 1\n", "not within a struct"},
	{"fi_info:\n    fi_tx_attr:\n        size: 1\n          iov_limit: 1\n", "indented unlike"},
	{"fi_info:\n    fi_tx_attr: yes\n", "want nothing"},
	{"fi_info:\n    no colon\n", "key: value"},
	{"fi_info:\n    nic:\n", "only (nil)"},
	{"fi_info:\n    fi_ep_attr:\n        type: Unknown\n", "fi_ep_attr.type"},
	{"fi_info:\n    fi_ep_attr:\n        type: 7\n", `prints as "Unknown"`},
	{"fi_info:\n    caps: 0x1000000000000000\n", `prints as "[  ]"`},
	{"fi_info:\n    fi_ep_attr:\n        mem_tag_format: 12\n", "0x hex"},
	{"fi_info:\n    fi_domain_attr:\n        domain: 0x\n", "0x hex"},
	{"fi_info:\n    handle: 0xzz\n", "handle"},
	{"fi_info:\n    fi_fabric_attr:\n        api_version: 1\n", "MAJOR.MINOR"},
	{"fi_info:\n    addr_format: FI_SOCKADDR_IN\n    src_addr: nowhere\n", "src_addr"},
	{"fi_info:\n    addr_format: FI_ADDR_PSMX2\n    src_addr: 0x1\n", "prints no address"},
	{"fi_info:\n    src_addr: fi_sockaddr_in://127.0.0.1:0\n", "prints no address"},
	{"fi_info:\n    addr_format: FI_ADDR_STR\n    src_addr: shm\n", "PROTO://ADDRESS"},
	{"fi_info:\n    addr_format: FI_SOCKADDR_IN\n    src_addrlen: 28\n    src_addr: fi_sockaddr_in://127.0.0.1:0\n", "src_addrlen 28"},
	{"fi_info:\n    dest_addrlen: 16\n    dest_addr: (null)\n", "dest_addrlen 16 without"},
	{"fi_info:\n" + strings.Repeat(" ", MaxInfoText), "bytes"},
}

func TestParseInfoErrors(t *testing.T) {
	for _, tt := range parseInfoErrors {
		if in, err := ParseInfo(tt.in); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseInfo(%.60q) = %v, %v; want an error with %q", tt.in, in, err, tt.err)
		}
	}
}

// FuzzParseInfo: ParseInfo never panics, and what it reads prints as text
// that reads back to the same text.
func FuzzParseInfo(f *testing.F) {
	for _, tt := range parseInfoErrors {
		if len(tt.in) < 4096 {
			f.Add(tt.in)
		}
	}
	for _, e := range testOffered() {
		f.Add(e.String())
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := ParseInfo(s)
		if err != nil {
			return
		}
		text := in.String()
		again, err := ParseInfo(text)
		if err != nil {
			t.Fatalf("ParseInfo(%q) read, its String %q does not: %v", s, text, err)
		}
		if got := again.String(); got != text {
			t.Fatalf("String, ParseInfo, String: %s", diff(got, text))
		}
	})
}
