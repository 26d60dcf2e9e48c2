// Package settings is the fabricfs daemon's settings: its flags, the
// config file that sets the same keys, and what they become for core and
// the providers (tcp.Config, verbs.Config, core.Limits). The providers
// never read flags or the environment; the daemon hands them these.
//
// The config file (-config FILE) has one setting a line, `key = value`,
// the key a flag's name without its dash (`tcp-iface = eth0`); blank
// lines and lines starting with # are ignored. Flags given on the command
// line override the file. An unknown key, a key given twice or a bad value
// is an error naming FILE:LINE.
package settings

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/shm"
	"github.com/fabricfs/fabricfs/providers/tcp"
	"github.com/fabricfs/fabricfs/providers/verbs"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// Settings are the values of the daemon's flags.
type Settings struct {
	Config     string // -config: the config file
	Version    bool   // -version: print the versions and exit
	Debug      bool
	LogLevel   string // -log-level: debug, info, warn or error
	AllowOther bool
	Mapping    string
	VerbsAddrs string
	RocePort   int64
	EngineCPUs string
	Limits     core.Limits

	TCPIface                                                  string
	TCPPortLow, TCPPortHigh                                   int64
	TCPConnectTimeout, TCPHandshakeTimeout, TCPConnReqTimeout time.Duration
	TCPKeepAlive                                              bool
	TCPKeepIdle, TCPKeepIntvl                                 time.Duration
	TCPKeepCnt                                                int64
}

// HostDefaults are the flags whose default depends on the host or the
// user, and what it is: the manual page says this rather than the value
// on the machine that generated it.
var HostDefaults = map[string]string{
	"allow-other": "true as root, else false",
	"mapping":     "passthrough as root on Linux 6.9 or later, else symlink",
}

// Keys that only the command line takes: the file cannot name itself,
// and -version is an action.
var cmdlineOnly = map[string]bool{"config": true, "version": true}

// Register defines the daemon's flags on fs, bound to the Settings it
// returns, with their defaults.
func Register(fs *flag.FlagSet) *Settings {
	s := &Settings{}
	fs.StringVar(&s.Config, "config", "", "read settings from `FILE`: lines key = value, the keys these flags' names; flags given here override it")
	fs.BoolVar(&s.Version, "version", false, "print the versions (fabricfs, tree ABI, Go, libfabric API) and exit")
	fs.BoolVar(&s.Debug, "debug", false, "log every FUSE request")
	fs.StringVar(&s.LogLevel, "log-level", "info", "the least `level` of the daemon's log: debug, info, warn or error (docs/log.md)")
	fs.BoolVar(&s.AllowOther, "allow-other", os.Geteuid() == 0, "let every user use the tree; as another user than root, needs user_allow_other in /etc/fuse.conf")
	fs.StringVar(&s.Mapping, "mapping", shm.DefaultMapping(), "how clients reach shared memory, a `mode`: passthrough (FUSE passthrough; root, Linux >= 6.9) or symlink (links to /proc/PID/fd/N of the daemon or of a holder process running as the user)")
	fs.StringVar(&s.VerbsAddrs, "verbs-addrs", "", "comma-separated IP `addresses`, one verbs device each (default: the host's interface addresses; none: no device)")
	fs.Var(intIn(&s.RocePort, roce.Port, 1, math.MaxUint16), "roce-port", "the UDP `port` of every verbs device of the fabric (RoCEv2)")
	for r, usage := range [core.NumResources]string{
		core.Objects:     "the `number` of objects (directories) each user other than root may hold; 0: no limit",
		core.MemoryBytes: "the `bytes` of shared memory (memory regions and rings) each user other than root may hold; 0: no limit",
		core.Connections: "the `number` of connections and listeners each user other than root may hold; 0: no limit",
	} {
		r := core.Resource(r)
		fs.Var(intIn(&s.Limits[r], core.DefaultLimits[r], 0, math.MaxInt64), LimitFlag(r), usage)
	}
	fs.StringVar(&s.EngineCPUs, "engine-cpus", "", "`CPUs` the ring engine's threads run on, e.g. 0 or 2-3,6 (default: wherever the scheduler puts them)")

	// tcp: what libfabric's tcp provider reads from FI_TCP_* variables,
	// and its connections' timeouts and keepalive.
	fs.StringVar(&s.TCPIface, "tcp-iface", "", "comma-separated interface `names` whose addresses become tcp domains, now and when they come up later (FI_TCP_IFACE; default: every interface; lo always is one)")
	fs.Var(intIn(&s.TCPPortLow, 0, 0, math.MaxUint16), "tcp-port-low", "lowest `port` a tcp listener on port 0 picks (FI_TCP_PORT_LOW_RANGE)")
	fs.Var(intIn(&s.TCPPortHigh, 0, 0, math.MaxUint16), "tcp-port-high", "highest `port` a tcp listener on port 0 picks (FI_TCP_PORT_HIGH_RANGE; 0: the kernel's ephemeral ports)")
	fs.Var(durationIn(&s.TCPConnectTimeout, 0, 0, 24*time.Hour), "tcp-connect-timeout", "how long a tcp connect's TCP handshake may take, a `duration` (0: the kernel's SYN retries, as libfabric)")
	fs.Var(durationIn(&s.TCPHandshakeTimeout, tcp.HandshakeTimeout, time.Millisecond, time.Hour), "tcp-handshake-timeout", "how long a tcp listener waits for a new connection's request, and sending a CM message may take, a `duration`")
	fs.Var(durationIn(&s.TCPConnReqTimeout, tcp.ConnReqTimeout, time.Millisecond, time.Hour), "tcp-connreq-timeout", "how long a new connection to a tcp listener may stay silent, a `duration`")
	fs.BoolVar(&s.TCPKeepAlive, "tcp-keepalive", true, "TCP keepalive (SO_KEEPALIVE) on tcp connections (libfabric's tcp leaves it off)")
	// The kernel takes 1 to 32767 seconds and 1 to 127 probes.
	fs.Var(durationIn(&s.TCPKeepIdle, 15*time.Second, time.Second, 32767*time.Second), "tcp-keepalive-idle", "idle `duration` before the first keepalive probe (TCP_KEEPIDLE; whole seconds)")
	fs.Var(durationIn(&s.TCPKeepIntvl, 15*time.Second, time.Second, 32767*time.Second), "tcp-keepalive-intvl", "`duration` between keepalive probes (TCP_KEEPINTVL; whole seconds)")
	fs.Var(intIn(&s.TCPKeepCnt, 9, 1, 127), "tcp-keepalive-cnt", "the `number` of unanswered keepalive probes that end a connection (TCP_KEEPCNT)")
	return s
}

// LimitFlag is the name of the flag of resource r's limit: limit-objects,
// limit-memory, limit-connections.
func LimitFlag(r core.Resource) string {
	return "limit-" + strings.TrimSuffix(r.String(), "_bytes")
}

// Parse parses the command line args into fs (whose flags Register
// defined), then, with -config, the file for the flags args did not set.
func Parse(fs *flag.FlagSet, s *Settings, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Config == "" {
		return nil
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return LoadFile(fs, s.Config, given)
}

// LoadFile sets fs's flags from the config file at path, but for those
// in skip.
func LoadFile(fs *flag.FlagSet, path string, skip map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	seen := map[string]int{} // key: its line
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case !ok:
			return fmt.Errorf("%s:%d: %q is not `key = value`", path, n, line)
		case fs.Lookup(key) == nil || cmdlineOnly[key]:
			return fmt.Errorf("%s:%d: unknown key %q", path, n, key)
		case seen[key] != 0:
			return fmt.Errorf("%s:%d: %s is set already on line %d", path, n, key, seen[key])
		}
		seen[key] = n
		if skip[key] {
			continue
		}
		if err := fs.Set(key, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, n, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// TCP is the tcp provider's Config.
func (s *Settings) TCP() (tcp.Config, error) {
	c := tcp.Config{
		PortLow: uint16(s.TCPPortLow), PortHigh: uint16(s.TCPPortHigh),
		ConnectTimeout:   s.TCPConnectTimeout,
		HandshakeTimeout: s.TCPHandshakeTimeout, ConnReqTimeout: s.TCPConnReqTimeout,
		NoKeepAlive: !s.TCPKeepAlive,
		KeepAlive:   net.KeepAliveConfig{Idle: s.TCPKeepIdle, Interval: s.TCPKeepIntvl, Count: int(s.TCPKeepCnt)},
	}
	switch {
	case s.TCPPortHigh != 0 && s.TCPPortLow > s.TCPPortHigh:
		return c, fmt.Errorf("-tcp-port-low %d is above -tcp-port-high %d", s.TCPPortLow, s.TCPPortHigh)
	case s.TCPPortHigh == 0 && s.TCPPortLow != 0:
		return c, fmt.Errorf("-tcp-port-low %d needs -tcp-port-high", s.TCPPortLow)
	}
	for _, name := range strings.Split(s.TCPIface, ",") {
		if name = strings.TrimSpace(name); name != "" {
			c.Ifaces = append(c.Ifaces, name)
		}
	}
	if s.TCPIface != "" && len(c.Ifaces) == 0 {
		return c, fmt.Errorf("-tcp-iface %q names no interface", s.TCPIface)
	}
	return c, nil
}

// Verbs is the verbs provider's Config.
func (s *Settings) Verbs() (verbs.Config, error) {
	cfg := verbs.Config{Port: int(s.RocePort)}
	switch s.VerbsAddrs {
	case "":
		return cfg, nil
	case "none":
		cfg.Addrs = []netip.Addr{}
		return cfg, nil
	}
	for _, a := range strings.Split(s.VerbsAddrs, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil {
			return cfg, fmt.Errorf("-verbs-addrs: %v", err)
		}
		cfg.Addrs = append(cfg.Addrs, ip)
	}
	return cfg, nil
}

// CPUs is the set -engine-cpus names, nil when it is not given.
func (s *Settings) CPUs() (*unix.CPUSet, error) {
	if s.EngineCPUs == "" {
		return nil, nil
	}
	set, err := parseCPUList(s.EngineCPUs)
	if err != nil {
		return nil, fmt.Errorf("-engine-cpus: %v", err)
	}
	return set, nil
}

// parseCPUList reads a CPU list in the kernel's list format without
// strides (as taskset -c takes it): numbers and ranges N-M, separated by
// commas.
func parseCPUList(s string) (*unix.CPUSet, error) {
	set := new(unix.CPUSet)
	max := uint64(8 * unsafe.Sizeof(*set)) // the CPUs a set can name
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(item), "-")
		first, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CPU number or range", item)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 64); err != nil || last < first {
				return nil, fmt.Errorf("%q is not a CPU range", item)
			}
		}
		if last >= max {
			return nil, fmt.Errorf("CPU %d: CPUs are numbered below %d", last, max)
		}
		for c := first; c <= last; c++ {
			set.Set(int(c))
		}
	}
	return set, nil
}

// intValue is an integer flag that takes values from min to max.
type intValue struct {
	p        *int64
	min, max int64
}

func intIn(p *int64, def, min, max int64) *intValue {
	*p = def
	return &intValue{p, min, max}
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("%d is not in %d to %d", n, v.min, v.max)
	}
	*v.p = n
	return nil
}

// durationValue is a duration flag (time.ParseDuration's format) that
// takes values from min to max (0, when min is 0, meaning the system's).
type durationValue struct {
	p        *time.Duration
	min, max time.Duration
}

func durationIn(p *time.Duration, def, min, max time.Duration) *durationValue {
	*p = def
	return &durationValue{p, min, max}
}

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (such as 10s or 1m30s)")
	}
	if d < v.min || d > v.max {
		return fmt.Errorf("%v is not in %v to %v", d, v.min, v.max)
	}
	*v.p = d
	return nil
}
