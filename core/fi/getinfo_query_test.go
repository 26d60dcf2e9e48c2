package fi

import (
	"context"
	"errors"
	"fmt"
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
			t.Errorf("GetInfoText(%q) = %v, %v; want %s error starting %q, prefixed once", tt.in, ids(out), err, tt.code.Name(), tt.text)
		}
	}
	if out, err := GetInfoText(context.Background(), "-p tcp -t FI_EP_MSG -d lo", testOffered()); err != nil || len(out) != 1 {
		t.Errorf("GetInfoText(tcp msg lo) = %v, %v; want one entry", ids(out), err)
	}
}
