// Command scale measures what a mounted fabricfs daemon costs at scale:
// it makes many enabled endpoints through the tree, as a shell user would
// (mkdir, attribute and ctl writes), then many addresses in one RDM
// endpoint's AV, and reports the daemon's memory, threads, descriptors and
// idle CPU after each step.
//
//	scale -mnt DIR -pid PID [-domains lo,...] [-msg N] [-rdm N] [-verbs N] [-mapped N] [-peers N] [-idle D] [-json FILE]
//
// DIR is the mount point of the daemon whose process id is PID (scripts/
// scale.sh mounts one). The steps, each measured when done:
//
//	baseline  an EQ, a CQ and an AV in each tcp domain of -domains, nothing enabled
//	msg       -msg tcp FI_EP_MSG endpoints, each bound to its domain's EQ and CQ and enabled
//	rdm       -rdm tcp FI_EP_RDM endpoints, bound to the AV and CQ and enabled
//
// (endpoint i of a step is in domain i mod the number of -domains: a tcp
// domain has at most 8192 endpoints, its ep_cnt),
//
//	verbs     -verbs verbs FI_EP_MSG endpoints in -verbs-domain, enabled
//	mapped    -mapped tcp FI_EP_MSG endpoints as above whose tx and rx
//	          rings this program maps and keeps mapped, as the C provider
//	          and clients/go/fabricfs do at enable
//	peers     one more RDM endpoint (in the first domain) whose own AV gets -peers addresses (all
//	          but -send of them ports nothing listens on), then one message
//	          sent to each of the -send real peers (RDM endpoints of their own)
//
// Each measurement reads /proc/PID: VmRSS, RssAnon and RssShmem of status,
// Pss of smaps_rollup, the threads (task) and descriptors (fd), and the
// CPU time (utime+stime of stat) used over -idle while nothing happens.
// It prints a table and the targets, judged (judge), and writes
// the figures as JSON to -json (keys in docs/bench.md, "Scale"), also when
// a step fails (with "error" set: the failure is a finding too), and then
// exits 1.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Step is the daemon's figures after one step.
type Step struct {
	Step       string  `json:"step"`
	Endpoints  int     `json:"endpoints"`    // enabled endpoints in the daemon
	Peers      int     `json:"peers"`        // AV entries of the peers step's endpoint
	Seconds    float64 `json:"seconds"`      // how long the step took
	RSSKiB     int64   `json:"rss_kib"`      // VmRSS
	AnonKiB    int64   `json:"anon_kib"`     // RssAnon: the Go heap and stacks
	ShmemKiB   int64   `json:"shmem_kib"`    // RssShmem: rings and regions (memfds)
	PSSKiB     int64   `json:"pss_kib"`      // Pss of smaps_rollup
	Threads    int     `json:"threads"`      // entries of /proc/PID/task
	FDs        int     `json:"fds"`          // entries of /proc/PID/fd
	IdleCPUPct float64 `json:"idle_cpu_pct"` // CPU used while idle, percent of one CPU
	// What each endpoint the step made added (0 for a step that made none).
	RSSPerNew float64 `json:"rss_bytes_per_new_endpoint"`
	FDsPerNew float64 `json:"fds_per_new_endpoint"`
}

// Report is the JSON the program writes.
type Report struct {
	PID         int      `json:"pid"`
	Domains     []string `json:"domains"`
	MSG         int      `json:"msg"`
	RDM         int      `json:"rdm"`
	Verbs       int      `json:"verbs"`
	Mapped      int      `json:"mapped"`
	Peers       int      `json:"peers"`
	Send        int      `json:"send"`
	IdleSeconds float64  `json:"idle_seconds"`
	Steps       []Step   `json:"steps"`
	// Per enabled endpoint without mapped rings: from the baseline to the
	// last of the steps msg, rdm and verbs.
	RSSPerEndpoint float64 `json:"rss_bytes_per_endpoint"`
	PSSPerEndpoint float64 `json:"pss_bytes_per_endpoint"`
	FDsPerEndpoint float64 `json:"fds_per_endpoint"`
	// Per AV entry of the peers step.
	RSSPerPeer float64 `json:"rss_bytes_per_peer"`
	// The targets (issue 24, Scale), judged on the step with the
	// most endpoints and on the peers step.
	Targets []Target `json:"targets"`
	Error   string   `json:"error,omitempty"` // the step that failed, and why
}

// Target is one of the targets and how the run fares against it.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"` // the value must be below it
	Met   bool    `json:"met"`
	Note  string  `json:"note,omitempty"` // why it is not judged, when it is not
}

// The targets: 10,000 enabled endpoints in one daemon with fewer than 64
// threads, under 256 MiB of RSS, descriptors that do not grow one for one
// with endpoints (here: under one per ten endpoints), idle; 10,000 RDM
// peers of one endpoint with memory that grows with traffic, not with
// peers (under 2 KiB of RSS and no descriptor per AV entry: a connection
// only to each peer sent to).
const (
	targetEndpoints = 10000
	targetThreads   = 64
	targetRSSKiB    = 256 << 10
	targetFDsPerEP  = 0.1
	targetIdleCPU   = 1.0
	targetPeers     = 10000
	targetPerPeer   = 2048
)

var (
	mnt      = flag.String("mnt", "", "mount point of the daemon")
	pid      = flag.Int("pid", 0, "process id of the daemon")
	domains  = flag.String("domains", "lo", "tcp domains the endpoints are spread over, comma-separated")
	nMSG     = flag.Int("msg", 1000, "tcp FI_EP_MSG endpoints")
	nRDM     = flag.Int("rdm", 1000, "tcp FI_EP_RDM endpoints")
	nVerbs   = flag.Int("verbs", 0, "verbs FI_EP_MSG endpoints")
	nMapped  = flag.Int("mapped", 0, "tcp FI_EP_MSG endpoints with their rings mapped")
	verbsDom = flag.String("verbs-domain", "rxe_127_0_0_1", "verbs domain of -verbs")
	nPeers   = flag.Int("peers", 10000, "AV entries of the peers step")
	nSend    = flag.Int("send", 4, "peers the peers step sends to")
	idle     = flag.Duration("idle", 10*time.Second, "idle time over which CPU is measured")
	jsonOut  = flag.String("json", "", "file the JSON report goes to")
)

func main() {
	flag.Parse()
	if *mnt == "" || *pid == 0 {
		fmt.Fprintln(os.Stderr, "usage: scale -mnt DIR -pid PID [flags]")
		os.Exit(2)
	}
	if *nSend > *nPeers {
		*nSend = *nPeers
	}
	rep := &Report{PID: *pid, Domains: strings.Split(*domains, ","), MSG: *nMSG, RDM: *nRDM, Verbs: *nVerbs, Mapped: *nMapped,
		Peers: *nPeers, Send: *nSend, IdleSeconds: idle.Seconds()}
	err := run(rep)
	if err != nil {
		rep.Error = err.Error()
	}
	perEndpoint(rep)
	judge(rep)
	printTable(rep)
	if *jsonOut != "" {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			fmt.Fprintln(os.Stderr, "scale:", jerr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// run runs the steps, appending each one's figures to rep.
func run(rep *Report) error {
	var doms []string
	for _, d := range rep.Domains {
		doms = append(doms, filepath.Join(*mnt, "tcp", d))
	}
	tcp := doms[0]
	total := 0
	step := func(name string, peers int, f func() error) error {
		t0 := time.Now()
		ferr := f()
		// A step that failed is measured too: how far it got, and at
		// what cost, is the finding.
		s, err := measure(name, total, peers, time.Since(t0))
		if err != nil {
			return err
		}
		if n := len(rep.Steps); n > 0 && s.Endpoints > rep.Steps[n-1].Endpoints {
			p, made := rep.Steps[n-1], float64(s.Endpoints-rep.Steps[n-1].Endpoints)
			s.RSSPerNew = float64(s.RSSKiB-p.RSSKiB) * 1024 / made
			s.FDsPerNew = float64(s.FDs-p.FDs) / made
		}
		rep.Steps = append(rep.Steps, s)
		if ferr != nil {
			return fmt.Errorf("%s: %w", name, ferr)
		}
		fmt.Fprintf(os.Stderr, "%s done in %.1fs\n", name, s.Seconds)
		return nil
	}
	if err := step("baseline", 0, func() error {
		for _, d := range doms {
			for _, p := range []string{"eq/e", "cq/c", "av/a"} {
				if err := os.Mkdir(filepath.Join(d, p), 0o700); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	made := func(kind string, n int, f func(i int) error) error {
		for i := 0; i < n; i++ {
			if err := f(i); err != nil {
				return fmt.Errorf("%s endpoint %d: %w", kind, i, err)
			}
			total++
		}
		return nil
	}
	if err := step("msg", 0, func() error {
		return made("msg", *nMSG, func(i int) error {
			return newEP(doms[i%len(doms)], fmt.Sprintf("m%d", i), "", "bind eq e", "bind cq c send,recv", "enable")
		})
	}); err != nil {
		return err
	}
	if err := step("rdm", 0, func() error {
		return made("rdm", *nRDM, func(i int) error {
			return newEP(doms[i%len(doms)], fmt.Sprintf("r%d", i), "FI_EP_RDM", "bind av a", "bind cq c send,recv", "enable")
		})
	}); err != nil {
		return err
	}
	if *nVerbs > 0 {
		vd := filepath.Join(*mnt, "verbs", *verbsDom)
		if err := step("verbs", 0, func() error {
			for _, p := range []string{"eq/e", "cq/c"} {
				if err := os.Mkdir(filepath.Join(vd, p), 0o700); err != nil {
					return err
				}
			}
			return made("verbs", *nVerbs, func(i int) error {
				return newEP(vd, fmt.Sprintf("v%d", i), "", "bind eq e", "bind cq c send,recv", "enable")
			})
		}); err != nil {
			return err
		}
	}
	if *nMapped > 0 {
		if err := step("mapped", 0, func() error {
			return made("mapped", *nMapped, func(i int) error {
				d := doms[i%len(doms)]
				name := fmt.Sprintf("x%d", i)
				if err := newEP(d, name, "", "bind eq e", "bind cq c send,recv", "enable"); err != nil {
					return err
				}
				for _, r := range []string{"tx", "rx"} {
					if err := mapRing(filepath.Join(d, "ep", name, r)); err != nil {
						return err
					}
				}
				return nil
			})
		}); err != nil {
			return err
		}
	}
	last := rep.Steps[len(rep.Steps)-1]
	if *nPeers > 0 {
		if err := step("peers", *nPeers, func() error { return peers(tcp, &total) }); err != nil {
			return err
		}
		p := rep.Steps[len(rep.Steps)-1]
		rep.RSSPerPeer = float64(p.RSSKiB-last.RSSKiB) * 1024 / float64(*nPeers)
	}
	return nil
}

// perEndpoint sets the figures per endpoint of rep: from the baseline to
// the last step that made endpoints without mapping their rings.
func perEndpoint(rep *Report) {
	var base, last *Step
	for i := range rep.Steps {
		switch s := &rep.Steps[i]; s.Step {
		case "baseline":
			base = s
		case "msg", "rdm", "verbs":
			last = s
		}
	}
	if base == nil || last == nil || last.Endpoints == 0 {
		return
	}
	n := float64(last.Endpoints)
	rep.RSSPerEndpoint = float64(last.RSSKiB-base.RSSKiB) * 1024 / n
	rep.PSSPerEndpoint = float64(last.PSSKiB-base.PSSKiB) * 1024 / n
	rep.FDsPerEndpoint = float64(last.FDs-base.FDs) / n
}

// judge sets the targets of rep: the endpoints' on the step with the most
// endpoints before the peers step, from the baseline; the peers' on the
// peers step. A target the run is too small for is not met, and says so.
func judge(rep *Report) {
	var base, most, peers, beforePeers *Step
	for i := range rep.Steps {
		s := &rep.Steps[i]
		switch s.Step {
		case "baseline":
			base = s
		case "peers":
			peers = s
		default:
			if most == nil || s.Endpoints > most.Endpoints {
				most = s
			}
		}
		if s.Step != "peers" {
			beforePeers = s
		}
	}
	add := func(name string, value, limit float64, small string) {
		t := Target{Name: name, Value: value, Limit: limit, Met: value < limit && small == "", Note: small}
		rep.Targets = append(rep.Targets, t)
	}
	if base != nil && most != nil {
		small := ""
		if most.Endpoints < targetEndpoints {
			small = fmt.Sprintf("%d endpoints, fewer than %d", most.Endpoints, targetEndpoints)
		}
		fds := 0.0
		if most.Endpoints > 0 {
			fds = float64(most.FDs-base.FDs) / float64(most.Endpoints)
		}
		add("threads", float64(most.Threads), targetThreads, small)
		add("rss_kib", float64(most.RSSKiB), targetRSSKiB, small)
		add("fds_per_endpoint", fds, targetFDsPerEP, small)
		add("idle_cpu_pct", most.IdleCPUPct, targetIdleCPU, small)
	}
	if peers != nil && beforePeers != nil {
		small := ""
		if peers.Peers < targetPeers {
			small = fmt.Sprintf("%d peers, fewer than %d", peers.Peers, targetPeers)
		}
		add("rss_bytes_per_peer", rep.RSSPerPeer, targetPerPeer, small)
		add("fds_per_peer", float64(peers.FDs-beforePeers.FDs)/float64(max(peers.Peers, 1)), targetFDsPerEP, small)
	}
}

// newEP makes the endpoint name in the domain directory dom, of type typ
// ("": the default, FI_EP_MSG), and writes cmds to its ctl.
func newEP(dom, name, typ string, cmds ...string) error {
	ep := filepath.Join(dom, "ep", name)
	if err := os.Mkdir(ep, 0o700); err != nil {
		return err
	}
	if typ != "" {
		if err := write(filepath.Join(ep, "attr", "type"), typ); err != nil {
			return err
		}
	}
	for _, c := range cmds {
		if err := write(filepath.Join(ep, "ctl"), c); err != nil {
			e, _ := os.ReadFile(filepath.Join(ep, "err"))
			return fmt.Errorf("%s: %w (%s)", c, err, strings.TrimSpace(string(e)))
		}
	}
	return nil
}

// mapRing maps the ring file path for good, as a program that drives the
// ring does; the mapping holds the endpoint (docs/abi.md).
func mapRing(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	return err
}

// write writes s to the file path in one write.
func write(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(s + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// peers is the peers step: an RDM endpoint "p" with its own AV "p" of
// -peers entries, the first -send of them RDM endpoints "s0".. that it
// sends one message each; the others are loopback ports nothing listens
// on, which it never sends to.
func peers(tcp string, total *int) error {
	if err := os.Mkdir(filepath.Join(tcp, "av", "p"), 0o700); err != nil {
		return err
	}
	if err := newEP(tcp, "p", "FI_EP_RDM", "bind av p", "bind cq c send,recv", "enable"); err != nil {
		return err
	}
	*total++
	var addrs []string
	for i := 0; i < *nSend; i++ {
		name := fmt.Sprintf("s%d", i)
		if err := newEP(tcp, name, "FI_EP_RDM", "bind av a", "bind cq c send,recv", "enable"); err != nil {
			return err
		}
		*total++
		b, err := os.ReadFile(filepath.Join(tcp, "ep", name, "local"))
		if err != nil {
			return err
		}
		addrs = append(addrs, strings.TrimSpace(string(b)))
	}
	// The rest: 127.1.X.Y:9, addresses of lo that nobody listens on.
	for i := len(addrs); i < *nPeers; i++ {
		addrs = append(addrs, fmt.Sprintf("127.1.%d.%d:9", i/250, 1+i%250))
	}
	const batch = 100 // addresses per insert
	for i := 0; i < len(addrs); i += batch {
		j := min(i+batch, len(addrs))
		if err := write(filepath.Join(tcp, "av", "p", "ctl"), "insert "+strings.Join(addrs[i:j], " ")); err != nil {
			return fmt.Errorf("insert %d..%d: %w", i, j, err)
		}
	}
	// Each receiver reads its data file (a posted receive) while p sends.
	got := make(chan error, *nSend)
	for i := 0; i < *nSend; i++ {
		go func(name string) {
			b, err := os.ReadFile(filepath.Join(tcp, "ep", name, "data"))
			if err == nil && string(b) != "hello "+name+"\n" {
				err = fmt.Errorf("%s received %q", name, b)
			}
			got <- err
		}(fmt.Sprintf("s%d", i))
	}
	for i := 0; i < *nSend; i++ {
		ctl := filepath.Join(tcp, "ep", "p", "ctl")
		if err := write(ctl, fmt.Sprintf("dest %d", i)); err != nil {
			return err
		}
		if err := write(filepath.Join(tcp, "ep", "p", "data"), fmt.Sprintf("hello s%d", i)); err != nil {
			return fmt.Errorf("send to s%d: %w", i, err)
		}
	}
	timeout := time.After(30 * time.Second)
	for i := 0; i < *nSend; i++ {
		select {
		case err := <-got:
			if err != nil {
				return err
			}
		case <-timeout:
			return fmt.Errorf("messages not received after 30s")
		}
	}
	return nil
}

// measure reads the daemon's figures, idle CPU over -idle included.
func measure(name string, endpoints, peers int, took time.Duration) (Step, error) {
	s := Step{Step: name, Endpoints: endpoints, Peers: peers, Seconds: took.Seconds()}
	proc := fmt.Sprintf("/proc/%d", *pid)
	time.Sleep(500 * time.Millisecond) // let the engine go to sleep
	c0, err := cpuTicks(proc)
	if err != nil {
		return s, err
	}
	t0 := time.Now()
	time.Sleep(*idle)
	c1, err := cpuTicks(proc)
	if err != nil {
		return s, err
	}
	s.IdleCPUPct = float64(c1-c0) / 100 / time.Since(t0).Seconds() * 100 // USER_HZ is 100
	st, err := fields(proc + "/status")
	if err != nil {
		return s, err
	}
	s.RSSKiB, s.AnonKiB, s.ShmemKiB = st["VmRSS"], st["RssAnon"], st["RssShmem"]
	sm, err := fields(proc + "/smaps_rollup")
	if err != nil {
		return s, err
	}
	s.PSSKiB = sm["Pss"]
	if s.Threads, err = count(proc + "/task"); err != nil {
		return s, err
	}
	if s.FDs, err = count(proc + "/fd"); err != nil {
		return s, err
	}
	return s, nil
}

// fields reads the "Name: N kB" lines of a /proc file.
func fields(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if w := strings.Fields(v); len(w) > 0 {
			if n, err := strconv.ParseInt(w[0], 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m, sc.Err()
}

// count is the number of entries of a directory.
func count(dir string) (int, error) {
	es, err := os.ReadDir(dir)
	return len(es), err
}

// cpuTicks is utime+stime of /proc/PID/stat, in clock ticks.
func cpuTicks(proc string) (int64, error) {
	b, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s/stat: no ')'", proc)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 14 {
		return 0, fmt.Errorf("%s/stat: %d fields", proc, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s/stat: bad utime or stime", proc)
	}
	return u + s, nil
}

func printTable(r *Report) {
	fmt.Printf("%-9s %9s %6s %8s %10s %10s %10s %10s %7s %6s %8s %8s %6s\n",
		"step", "endpoints", "peers", "seconds", "rss_kib", "anon_kib", "shmem_kib", "pss_kib", "threads", "fds", "idle_cpu", "B/new_ep", "fd/new")
	for _, s := range r.Steps {
		fmt.Printf("%-9s %9d %6d %8.1f %10d %10d %10d %10d %7d %6d %7.2f%% %8.0f %6.2f\n",
			s.Step, s.Endpoints, s.Peers, s.Seconds, s.RSSKiB, s.AnonKiB, s.ShmemKiB, s.PSSKiB, s.Threads, s.FDs, s.IdleCPUPct, s.RSSPerNew, s.FDsPerNew)
	}
	fmt.Printf("per endpoint (unmapped rings): %.0f bytes RSS, %.0f bytes PSS, %.3f fds; per peer: %.0f bytes RSS\n",
		r.RSSPerEndpoint, r.PSSPerEndpoint, r.FDsPerEndpoint, r.RSSPerPeer)
	for _, t := range r.Targets {
		verdict := "met"
		switch {
		case t.Note != "":
			verdict = "not judged (" + t.Note + ")"
		case !t.Met:
			verdict = "not met"
		}
		fmt.Printf("targets, scale: %s %.2f < %g: %s\n", t.Name, t.Value, t.Limit, verdict)
	}
	if r.Error != "" {
		fmt.Printf("failed: %s\n", r.Error)
	}
}
