package settings

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
)

// parse parses args with a config file of text (none when text is "").
func parse(t *testing.T, text string, args ...string) (*Settings, error) {
	t.Helper()
	fs := flag.NewFlagSet("fabricfs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := Register(fs)
	if text != "" {
		path := filepath.Join(t.TempDir(), "fabricfs.conf")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"-config", path}, args...)
	}
	return s, Parse(fs, s, args)
}

// The file sets what the command line does not; the command line wins.
func TestFileAndFlags(t *testing.T) {
	s, err := parse(t, "# a comment\n\ntcp-iface = eth1, eth2\n  roce-port=5000  \ntcp-keepalive = false\nlimit-memory = 0x1000\ntcp-connect-timeout = 1m30s\n",
		"-tcp-iface", "eth3", "/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if s.TCPIface != "eth3" || s.RocePort != 5000 || s.TCPKeepAlive || s.Limits[core.MemoryBytes] != 0x1000 || s.TCPConnectTimeout != 90*time.Second {
		t.Errorf("settings %+v", s)
	}
	if s.Limits[core.Objects] != core.DefaultLimits[core.Objects] || s.TCPHandshakeTimeout != 10*time.Second || s.TCPKeepCnt != 9 {
		t.Errorf("defaults lost: %+v", s)
	}
	tc, err := s.TCP()
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Ifaces) != 1 || tc.Ifaces[0] != "eth3" || !tc.NoKeepAlive || tc.ConnectTimeout != 90*time.Second {
		t.Errorf("tcp.Config %+v", tc)
	}
	s, err = parse(t, "tcp-iface = eth1, eth2\n")
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := s.TCP(); err != nil || strings.Join(tc.Ifaces, " ") != "eth1 eth2" {
		t.Errorf("tcp-iface eth1, eth2: %+v, %v", tc.Ifaces, err)
	}
}

// Every error in the file names the file and the line.
func TestFileErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"debug = true\nno-such-key = 1\n", ":2: unknown key \"no-such-key\""},
		{"tcp-iface\n", ":1: \"tcp-iface\" is not `key = value`"},
		{"debug = true\n\ndebug = false\n", ":3: debug is set already on line 1"},
		{"roce-port = 70000\n", ":1: roce-port: 70000 is not in 1 to 65535"},
		{"roce-port = 0\n", ":1: roce-port: 0 is not in 1 to 65535"},
		{"limit-objects = -1\n", ":1: limit-objects: -1 is not in 0 to"},
		{"tcp-keepalive-cnt = 128\n", ":1: tcp-keepalive-cnt: 128 is not in 1 to 127"},
		{"tcp-keepalive-idle = 500ms\n", ":1: tcp-keepalive-idle: 500ms is not in 1s to 9h6m7s"},
		{"tcp-keepalive-intvl = 0\n", ":1: tcp-keepalive-intvl: 0s is not in 1s to"},
		{"tcp-handshake-timeout = 0s\n", ":1: tcp-handshake-timeout: 0s is not in 1ms to 1h0m0s"},
		{"tcp-connect-timeout = -1s\n", ":1: tcp-connect-timeout: -1s is not in 0s to 24h0m0s"},
		{"tcp-connect-timeout = soon\n", ":1: tcp-connect-timeout: not a duration"},
		{"tcp-port-low = x\n", ":1: tcp-port-low: not an integer"},
		{"debug = maybe\n", ":1: debug: "},
		{"config = /etc/other.conf\n", ":1: unknown key \"config\""},
		{"version = true\n", ":1: unknown key \"version\""},
	} {
		_, err := parse(t, c.text)
		if err == nil || !strings.Contains(err.Error(), "fabricfs.conf"+c.want) {
			t.Errorf("%q: %v, want ...fabricfs.conf%s", c.text, err, c.want)
		}
	}
	if _, err := parse(t, "", "-config", filepath.Join(t.TempDir(), "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("a missing config file: %v", err)
	}
}

// Settings that are each valid but do not go together are refused by
// flag name.
func TestTCPErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tcp-port-low", "6000", "-tcp-port-high", "5000"}, "-tcp-port-low 6000 is above -tcp-port-high 5000"},
		{[]string{"-tcp-port-low", "6000"}, "-tcp-port-low 6000 needs -tcp-port-high"},
		{[]string{"-tcp-iface", " , "}, "names no interface"},
	} {
		s, err := parse(t, "", c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TCP(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	s, err := parse(t, "", "-tcp-port-low", "6000", "-tcp-port-high", "6000")
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := s.TCP(); err != nil || tc.PortLow != 6000 || tc.PortHigh != 6000 {
		t.Errorf("a one-port range: %+v, %v", tc, err)
	}
}

// deploy/fabricfs.conf, uncommented, is a valid config file that sets
// every key to its default (but those whose default depends on the host).
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile("../../deploy/fabricfs.conf")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var text strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		if key, value, ok := strings.Cut(strings.TrimPrefix(l, "#"), " = "); ok && strings.HasPrefix(l, "#") && !strings.Contains(key, " ") {
			keys = append(keys, key)
			if value != "" {
				text.WriteString(key + " = " + value + "\n")
			}
		}
	}
	fs := flag.NewFlagSet("fabricfs", flag.ContinueOnError)
	Register(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !cmdlineOnly[f.Name] {
			n++
		}
	})
	if len(keys) != n {
		t.Errorf("deploy/fabricfs.conf has %d keys %v, the flags %d", len(keys), keys, n)
	}
	s, err := parse(t, text.String())
	if err != nil {
		t.Fatal(err)
	}
	def, _ := parse(t, "")
	s.Config = ""
	if *s != *def {
		t.Errorf("the example's values are not the defaults:\n%+v\n%+v", s, def)
	}
}

func TestCPUs(t *testing.T) {
	s := &Settings{EngineCPUs: "0,2-3"}
	set, err := s.CPUs()
	if err != nil || set.Count() != 3 || !set.IsSet(0) || !set.IsSet(2) || !set.IsSet(3) {
		t.Errorf("0,2-3: %v, %v", set, err)
	}
	for _, bad := range []string{"x", "3-2", "1-", "99999", "-1"} {
		s.EngineCPUs = bad
		if _, err := s.CPUs(); err == nil || !strings.Contains(err.Error(), "-engine-cpus") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if set, err := (&Settings{}).CPUs(); set != nil || err != nil {
		t.Errorf("no -engine-cpus: %v, %v", set, err)
	}
}

func TestVerbs(t *testing.T) {
	for _, c := range []struct {
		addrs string
		n     int // devices; -1: the host's (Addrs nil)
	}{{"", -1}, {"none", 0}, {"127.0.0.2, ::1", 2}} {
		vc, err := (&Settings{VerbsAddrs: c.addrs, RocePort: 4791}).Verbs()
		if err != nil || vc.Port != 4791 || (c.n < 0) != (vc.Addrs == nil) || c.n >= 0 && len(vc.Addrs) != c.n {
			t.Errorf("%q: %+v, %v", c.addrs, vc, err)
		}
	}
	if _, err := (&Settings{VerbsAddrs: "127.0.0.300"}).Verbs(); err == nil || !strings.Contains(err.Error(), "-verbs-addrs") {
		t.Errorf("a bad address: %v", err)
	}
}
