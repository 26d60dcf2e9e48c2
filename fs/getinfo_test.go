package fs

import (
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

var parseQueryTests = []struct {
	in    string
	check func(q *Query) bool
	err   string
}{
	{"", func(q *Query) bool {
		return q.Hints.Mode == ^fi.Mode(0) && q.Node == "" && q.Hints.DomainAttr.Mode == ^fi.Mode(0) &&
			q.Hints.DomainAttr.MRMode == ^(fi.MR_BASIC|fi.MR_SCALABLE)
	}, ""},
	{"-p tcp -t FI_EP_MSG", func(q *Query) bool {
		return q.Hints.FabricAttr.ProvName == "tcp" && q.Hints.EPAttr.Type == fi.EP_MSG
	}, ""},
	{"--provider=tcp --ep_type FI_EP_RDM\n", func(q *Query) bool {
		return q.Hints.FabricAttr.ProvName == "tcp" && q.Hints.EPAttr.Type == fi.EP_RDM
	}, ""},
	{"-c FI_MSG|FI_RMA -m 0 -a FI_SOCKADDR_IN6", func(q *Query) bool {
		return q.Hints.Caps == fi.MSG|fi.RMA && q.Hints.Mode == 0 && q.Hints.AddrFormat == fi.SOCKADDR_IN6
	}, ""},
	{"-d lo -f 127.0.0.1/32 -n 127.0.0.1 -P 7000", func(q *Query) bool {
		return q.Hints.DomainAttr.Name == "lo" && q.Hints.FabricAttr.Name == "127.0.0.1/32" && q.Node == "127.0.0.1" && q.Service == "7000"
	}, ""},
	{"-s 127.0.0.1", func(q *Query) bool { return q.Node == "127.0.0.1" && q.Flags&uint64(fi.SOURCE) != 0 }, ""},
	{"--flags FI_NUMERICHOST --version 1.5", func(q *Query) bool {
		return q.Flags == uint64(fi.NUMERICHOST) && q.Version == fi.MakeVersion(1, 5)
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
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err == nil && q.Hints == nil {
			t.Fatal("nil hints without error")
		}
	})
}
