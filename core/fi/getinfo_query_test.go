package fi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
)

var parseQueryTests = []struct {
	in    string
	check func(q *Query) bool
	err   string
}{
	{"", func(q *Query) bool {
		return q.Hints.Mode == ^Mode(0) && q.Node == "" && q.Hints.DomainAttr.Mode == ^Mode(0) &&
			q.Hints.DomainAttr.MRMode == ^(MR_BASIC|MR_SCALABLE)
	}, ""},
	{"-p tcp -t FI_EP_MSG", func(q *Query) bool {
		return q.Hints.FabricAttr.ProvName == "tcp" && q.Hints.EPAttr.Type == EP_MSG
	}, ""},
	{"--provider=tcp --ep_type FI_EP_RDM\n", func(q *Query) bool {
		return q.Hints.FabricAttr.ProvName == "tcp" && q.Hints.EPAttr.Type == EP_RDM
	}, ""},
	{"-c FI_MSG|FI_RMA -m 0 -a FI_SOCKADDR_IN6", func(q *Query) bool {
		return q.Hints.Caps == MSG|RMA && q.Hints.Mode == 0 && q.Hints.AddrFormat == SOCKADDR_IN6
	}, ""},
	{"-d lo -f 127.0.0.1/32 -n 127.0.0.1 -P 7000", func(q *Query) bool {
		return q.Hints.DomainAttr.Name == "lo" && q.Hints.FabricAttr.Name == "127.0.0.1/32" && q.Node == "127.0.0.1" && q.Service == "7000"
	}, ""},
	{"-s 127.0.0.1", func(q *Query) bool { return q.Node == "127.0.0.1" && q.Flags&uint64(SOURCE) != 0 }, ""},
	{"--flags FI_NUMERICHOST --version 1.5", func(q *Query) bool {
		return q.Flags == uint64(NUMERICHOST) && q.Version == MakeVersion(1, 5)
	}, ""},
	{"-p", nil, "needs a value"},
	{"-x y", nil, "unknown option"},
	{"-t FI_EP_BOGUS", nil, "-t FI_EP_BOGUS"},
	{"--version one", nil, "MAJOR.MINOR"},
	{"-p 'tcp", nil, "quote"},
}

func TestParseQuery(t *testing.T) {
	for _, tt := range parseQueryTests {
		q, err := ParseQuery(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseQuery(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !tt.check(q) {
			t.Errorf("ParseQuery(%q) = %+v, %v", tt.in, q, err)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, tt := range parseQueryTests {
		f.Add(tt.in)
	}
	f.Add("fi_info -v -l -e")
	f.Add("-p tcp --version 1.4\nfi_info:\n    caps: [ FI_MSG ]\n    fi_domain_attr:\n        mr_mode: [  ]\n")
	f.Add("-c FI_MSG\nfi_info:\n    caps: [ FI_MSG ]\n")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err == nil && q.Hints == nil {
			t.Fatal("nil hints without error")
		}
	})
}

// TestGetInfoTextErrors: every failed query, malformed or unanswerable,
// carries its code and reads with one "fi_getinfo: " prefix.
func TestGetInfoTextErrors(t *testing.T) {
	fakeNet(t)
	for _, tt := range []struct {
		in   string
		code Errno
		text string
	}{
		{"-p", EINVAL, "fi_getinfo: option -p needs a value"},
		{"-x y", EINVAL, "fi_getinfo: unknown option"},
		{"-p 'tcp", EINVAL, "fi_getinfo: "},
		{"-t FI_EP_BOGUS", EINVAL, "fi_getinfo: -t FI_EP_BOGUS"},
		{"-p nosuch", ENODATA, "fi_getinfo: no provider supports"},
		{"--version 9.0", ENOSYS, "fi_getinfo: API version 9.0"},
		{"--flags FI_MSG", EBADFLAGS, "fi_getinfo: flags"},
	} {
		out, err := GetInfoText(context.Background(), tt.in, testOffered())
		if !errors.Is(err, tt.code) || !strings.HasPrefix(fmt.Sprint(err), tt.text) || strings.Count(fmt.Sprint(err), "fi_getinfo:") != 1 {
			t.Errorf("GetInfoText(%q) = %q, %v; want %s error starting %q, prefixed once", tt.in, out, err, tt.code.Name(), tt.text)
		}
	}
	if out, err := GetInfoText(context.Background(), "-p tcp -t FI_EP_MSG -d lo", testOffered()); err != nil || strings.Count(out, "---\n") != 1 {
		t.Errorf("GetInfoText(tcp msg lo) = %q, %v; want one entry", out, err)
	}
}

// TestQueryBlock: a query's hints block is the hints struct itself.
func TestQueryBlock(t *testing.T) {
	fakeNet(t)
	ask := func(s string) (string, error) { return GetInfoText(context.Background(), s, testOffered()) }
	entries := func(s string) []*Info {
		t.Helper()
		out, err := ask(s)
		if err != nil {
			t.Fatalf("GetInfoText(%q): %v", s, err)
		}
		var infos []*Info
		for _, e := range strings.Split(out, "---\n")[1:] {
			in, err := ParseInfo(e)
			if err != nil {
				t.Fatalf("answer entry does not parse: %v", err)
			}
			infos = append(infos, in)
		}
		return infos
	}

	// Open MPI's mtl/ofi (4.1) hints, as fi_tostr printed them: "As a
	// general rule, specifying a non-zero value for input hints indicates
	// that a provider must support the requested value or fail the
	// operation with -FI_ENODATA." The tree's RDM entries support them all.
	ompi, err := os.ReadFile("testdata/ompi_mtl_ofi_hints.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := entries("--version 1.5\n" + string(ompi))
	if len(got) == 0 {
		t.Fatal("Open MPI's mtl/ofi hints match nothing")
	}
	for _, in := range got {
		if in.EPAttr.Type != EP_RDM || in.DomainAttr.Threading != THREAD_DOMAIN || in.DomainAttr.AVType != AV_MAP ||
			in.TxAttr.OpFlags != COMPLETION || in.RxAttr.OpFlags != COMPLETION || in.DomainAttr.MRMode != 0 {
			t.Errorf("Open MPI's hints gave an entry that is not what they ask:\n%v", in)
		}
	}

	// "Mode bits that are set to zero indicate the application does not
	// support any modes": a block without mode leaves out the verbs
	// entries that need one; the options' default (every mode) keeps them.
	if out, err := ask("fi_info:\n    fi_fabric_attr:\n        prov_name: verbs;ofi_rxm\n"); !errors.Is(err, ENODATA) {
		t.Errorf("a block without mode matched %q, %v; its entries need FI_CONTEXT", out, err)
	}
	if n := len(entries("-p 'verbs;ofi_rxm'")); n == 0 {
		t.Error("-p verbs;ofi_rxm alone matched nothing")
	}

	// "Output values will be greater than or equal to the requested input
	// values": a size beyond every entry's is ENODATA, one within is
	// granted.
	if _, err := ask("fi_info:\n    fi_tx_attr:\n        size: 999999999\n"); !errors.Is(err, ENODATA) {
		t.Errorf("tx_attr.size beyond every entry: %v, want ENODATA", err)
	}
	for _, in := range entries("-t FI_EP_MSG\nfi_info:\n    fi_tx_attr:\n        size: 16\n    fi_ep_attr:\n        max_msg_size: 1024\n") {
		if in.TxAttr.Size < 16 || in.EPAttr.MaxMsgSize < 1024 || in.EPAttr.Type != EP_MSG {
			t.Errorf("tx size 16, max_msg_size 1024 on FI_EP_MSG gave:\n%v", in)
		}
	}
	// FI_THREAD_UNSPEC "may be used on input hints to the fi_getinfo
	// call"; a model asked for is returned (fi_domain(3)).
	for _, in := range entries("fi_info:\n    mode: [ FI_CONTEXT, FI_MSG_PREFIX, FI_RX_CQ_DATA ]\n    fi_domain_attr:\n        threading: FI_THREAD_COMPLETION\n        mr_mode: [ FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY ]\n") {
		if in.DomainAttr.Threading != THREAD_COMPLETION {
			t.Errorf("threading FI_THREAD_COMPLETION gave %v", in.DomainAttr.Threading)
		}
	}

	// Options and the block combine; both setting one hint is EINVAL.
	if got := entries("-p tcp -d lo\nfi_info:\n    fi_ep_attr:\n        type: FI_EP_MSG\n"); len(got) != 1 || got[0].DomainAttr.Name != "lo" {
		t.Errorf("-p tcp -d lo with a block asking FI_EP_MSG = %v, want tcp lo MSG", ids(got))
	}
	for _, q := range []string{
		"-p tcp\nfi_info:\n    fi_fabric_attr:\n        prov_name: tcp\n",
		"-t FI_EP_RDM\nfi_info:\n    fi_ep_attr:\n        type: FI_EP_MSG\n",
		"-c FI_MSG\nfi_info:\n    caps: [ FI_MSG ]\n",
		"-d lo\nfi_info:\n    fi_domain_attr:\n        name: lo\n",
		"fi_info:\n    bogus: 1\n",
	} {
		if _, err := ask(q); !errors.Is(err, EINVAL) {
			t.Errorf("GetInfoText(%q) = %v, want EINVAL", q, err)
		}
	}
}

// TestQueryBlockRandom: for random hints that fi_tostr's text carries
// whole, the query with the hints as a block answers as GetInfo with the
// hints does.
func TestQueryBlockRandom(t *testing.T) {
	fakeNet(t)
	r := rand.New(rand.NewPCG(2, 19))
	buf := make([]byte, 400)
	compared := 0
	for range 3000 {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		c := callFrom(buf)
		if c.hints == nil || strings.ContainsAny(c.node+c.service, "'\n") {
			continue
		}
		if back, err := ParseInfo(c.hints.String()); err != nil || !reflect.DeepEqual(back, c.hints) {
			continue // a value the text does not carry: unnamed bits, auth_key bytes, ...
		}
		q := fmt.Sprintf("--version %v --flags %#x", c.version, c.flags)
		if c.node != "" {
			q += " -n '" + c.node + "'"
		}
		if c.service != "" {
			q += " -P '" + c.service + "'"
		}
		q += "\n" + c.hints.String()
		got, gotErr := GetInfoText(context.Background(), q, testOffered())
		infos, wantErr := GetInfo(context.Background(), c.version, c.node, c.service, c.flags, c.hints, testOffered())
		var want strings.Builder
		if wantErr == nil {
			WriteInfos(&want, infos)
		}
		if got != want.String() || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("query\n%s\nanswers %q, %v\nGetInfo answers %q, %v", q, got, gotErr, want.String(), wantErr)
		}
		compared++
	}
	if compared < 500 {
		t.Fatalf("only %d of 3000 random hints round-trip through the text", compared)
	}
}

// TestQueryForms: fi_info's flag-style options, and its summary form for a
// query written as an fi_info command line.
func TestQueryForms(t *testing.T) {
	fakeNet(t)
	ask := func(s string) string {
		t.Helper()
		out, err := GetInfoText(context.Background(), s, testOffered())
		if err != nil {
			t.Fatalf("GetInfoText(%q): %v", s, err)
		}
		return out
	}
	verbose := ask("-p tcp -d lo -t FI_EP_MSG")
	if !strings.HasPrefix(verbose, "---\nfi_info:\n") || ask("-v -p tcp -d lo -t FI_EP_MSG") != verbose ||
		ask("fi_info -v -p tcp -d lo -t FI_EP_MSG") != verbose {
		t.Errorf("-v, fi_info -v and no flag differ, or are not fi_info -v text:\n%s", verbose)
	}
	const summary = "provider: tcp\n    fabric: 127.0.0.0/8\n    domain: lo\n    version: 117.0\n    type: FI_EP_MSG\n    protocol: FI_PROTO_SOCK_TCP\n"
	if got := ask("fi_info -p tcp -d lo -t FI_EP_MSG"); got != summary {
		t.Errorf("fi_info summary = %q, want %q", got, summary)
	}
	if got := ask("-l"); got != "tcp:\n    version: 117.0\nofi_rxm:\n    version: 117.1\nverbs:\n    version: 117.0\n" {
		t.Errorf("-l = %q", got)
	}
	if got := ask("fi_info --env"); !strings.HasPrefix(got, "# ") {
		t.Errorf("-e = %q", got)
	}
	// --version before 1.5 knows FI_MR_BASIC and FI_MR_SCALABLE only.
	for _, in := range strings.Split(ask("--version 1.4 -p verbs -t FI_EP_MSG"), "---\n")[1:] {
		if !strings.Contains(in, "mr_mode: [ FI_MR_BASIC ]") || !strings.Contains(in, "FI_LOCAL_MR") {
			t.Errorf("--version 1.4 verbs entry: want FI_MR_BASIC and FI_LOCAL_MR:\n%s", in)
		}
	}
}
