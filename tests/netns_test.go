package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
)

// Two hosts for real: two network namespaces joined by a veth pair, one
// daemon in each, on its own interface.
//
// The addresses are TEST-NET-1 (192.0.2.0/24) and, for the interface added
// later, TEST-NET-2 (198.51.100.0/24): documentation ranges (RFC 5737)
// that no real network routes, so that nothing the test sends could reach
// a host outside the namespaces it made, whatever the machine's own
// routes. The daemons run under nsenter --net, which enters only the
// network namespace: `ip netns exec` also makes a mount namespace, whose
// FUSE mounts the test (in the host's) would not see.

const (
	nsAddrA  = "192.0.2.1"
	nsAddrB  = "192.0.2.2"
	nsIfA    = "ffveth-a" // the veth end in namespace a: its tcp domain
	nsIfB    = "ffveth-b"
	nsVerbsA = "rxe_192_0_2_1"
	nsVerbsB = "rxe_192_0_2_2"
	nsWait   = 60 * time.Second // the longest any step of these tests waits
)

// needNetns skips a test that cannot make network namespaces (not root),
// with the reason, or fails it under CI; as root it installs ip and
// nsenter if they are missing (needCmd).
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("cannot make network namespaces: not root")
		}
		t.Skip("cannot make network namespaces: not root (they need CAP_SYS_ADMIN)")
	}
	needCmd(t, "ip")
	needCmd(t, "nsenter")
}

// runIP runs ip with args, bounded in time, failing the test on error.
func runIP(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newNetns makes a network namespace named ffns-PID-suffix, its loopback
// up, and deletes it in cleanup, even when the test fails; registered
// before the daemons in it, the cleanup runs after theirs.
func newNetns(t *testing.T, suffix string) string {
	t.Helper()
	removeOrphanNetns(t)
	name := fmt.Sprintf("ffns-%d-%s", os.Getpid(), suffix)
	runIP(t, "netns", "add", name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	runIP(t, "-n", name, "link", "set", "lo", "up")
	return name
}

// removeOrphanNetns deletes the namespaces of test processes that are
// gone: one killed by a signal (a stopped CI run) ran no cleanup.
func removeOrphanNetns(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var pid int
		var rest string
		if n, _ := fmt.Sscanf(strings.ReplaceAll(f[0], "-", " "), "ffns %d %s", &pid, &rest); n != 2 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue // its process lives: its own cleanup removes it
		}
		if out, err := exec.Command("ip", "netns", "del", f[0]).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s (left by process %d): %v: %s", f[0], pid, err, out)
		}
	}
}

// vethPair joins namespaces a and b with a veth pair, ifA in a with
// address addrA/24, ifB in b with addrB/24, both up.
func vethPair(t *testing.T, a, ifA, addrA, b, ifB, addrB string) {
	t.Helper()
	runIP(t, "link", "add", ifA, "netns", a, "type", "veth", "peer", "name", ifB, "netns", b)
	runIP(t, "-n", a, "addr", "add", addrA+"/24", "dev", ifA)
	runIP(t, "-n", b, "addr", "add", addrB+"/24", "dev", ifB)
	runIP(t, "-n", a, "link", "set", ifA, "up")
	runIP(t, "-n", b, "link", "set", ifB, "up")
	waitCarrier(t, a, ifA)
	waitCarrier(t, b, ifB)
}

// waitCarrier waits until interface ifc of namespace ns has its carrier
// (LOWER_UP): a veth end gets it a moment after both ends are up, and
// until then it is not running and takes no traffic.
func waitCarrier(t *testing.T, ns, ifc string) {
	t.Helper()
	for deadline := time.Now().Add(nsWait); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-o", "link", "show", "dev", ifc).CombinedOutput()
		cancel()
		if err == nil && strings.Contains(string(out), "LOWER_UP") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s has no carrier after %v: %s", ifc, ns, nsWait, out)
		}
	}
}

// nsenter is the command line that runs argv in namespace ns's network
// only.
func nsenter(ns string, argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + ns}, argv...)
}

// mountInNetns starts a daemon in namespace ns with the default providers:
// tcp and verbs over that namespace's interfaces, RoCE on port 4791, which
// is the namespace's own.
func mountInNetns(t *testing.T, ns string, flags ...string) *daemon {
	t.Helper()
	return mountArgv(t, nsenter(ns, append([]string{daemonBin}, flags...)...))
}

// twoHosts makes namespaces a and b joined by a veth pair and a daemon in
// each.
func twoHosts(t *testing.T) (a, b string, da, db *daemon) {
	t.Helper()
	return twoHostsWith(t)
}

// twoHostsWith is twoHosts with flags for daemon a.
func twoHostsWith(t *testing.T, flagsA ...string) (a, b string, da, db *daemon) {
	t.Helper()
	needNetns(t)
	needFUSE(t)
	a, b = newNetns(t, "a"), newNetns(t, "b")
	vethPair(t, a, nsIfA, nsAddrA, b, nsIfB, nsAddrB)
	return a, b, mountInNetns(t, a, flagsA...), mountInNetns(t, b)
}

// dirNames lists a directory's subdirectories.
// waitListed lists dir until it has the directory name, for at most
// three rescan intervals; it returns the last listing and whether it did.
func waitListed(t *testing.T, dir, name string) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(3 * core.RescanInterval)
	for {
		names := strings.Join(dirNames(t, dir), " ")
		if strings.Contains(" "+names+" ", " "+name+" ") {
			return names, true
		}
		if time.Now().After(deadline) {
			return names, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range es {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// fiInfoDomains is the set of domain names `fi_info -p prov` prints in
// namespace ns: how libfabric names the domains there.
func fiInfoDomains(t *testing.T, ns, prov string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "fi_info", "-p", prov).CombinedOutput()
	if err != nil {
		t.Fatalf("fi_info -p %s in %s: %v: %s", prov, ns, err, out)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "domain: "); ok {
			seen[name] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestNetnsDomains: each daemon's tcp domains are the interfaces of its
// namespace, named as libfabric's fi_info names them there, and its verbs
// devices are those of the namespace's addresses.
func TestNetnsDomains(t *testing.T) {
	a, _, da, db := twoHosts(t)
	needCmd(t, "fi_info")
	got := dirNames(t, da.path("tcp"))
	sort.Strings(got)
	if want := fiInfoDomains(t, a, "tcp"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tcp domains in %s: %v; fi_info -p tcp there: %v", a, got, want)
	}
	for _, c := range []struct {
		d    *daemon
		want []string
	}{{da, []string{"tcp/" + nsIfA, "verbs/" + nsVerbsA, "verbs/" + nsVerbsA + "-dgram"}}, {db, []string{"tcp/" + nsIfB, "verbs/" + nsVerbsB}}} {
		for _, w := range c.want {
			if _, err := os.Stat(c.d.path(w)); err != nil {
				t.Errorf("%s: %v", w, err)
			}
		}
	}
	if _, err := os.Stat(da.path("tcp", nsIfB)); err == nil {
		t.Errorf("daemon a shows b's interface %s", nsIfB)
	}
}

// msgPair connects an FI_EP_MSG endpoint of domain dir from (named n) to a
// listener of domain dir to (its objects named n-l), checking the
// listener's address starts with prefix, and returns the two endpoints'
// directories. The domains may be the same.
func msgPair(t *testing.T, from, to, n, prefix string) (ep1, ep2 string) {
	t.Helper()
	l := n + "-l"
	mkobj(t, to, "eq", l)
	mkobj(t, to, "cq", l)
	pep := mkobj(t, to, "pep", l)
	ctlOK(t, pep, "bind eq "+l)
	ctlOK(t, pep, "listen")
	addr := fileText(t, pep, "local")
	if !strings.HasPrefix(addr, prefix) {
		t.Fatalf("listener address %q, want %s...", addr, prefix)
	}
	eq1 := mkobj(t, from, "eq", n)
	mkobj(t, from, "cq", n)
	ep1 = mkobj(t, from, "ep", n)
	for _, c := range []string{"bind eq " + n, "bind cq " + n + " send,recv", "enable", "connect " + addr} {
		ctlOK(t, ep1, c)
	}
	id := fileText(t, pep, "listen")
	ep2 = filepath.Join(to, "ep", id)
	t.Cleanup(func() { os.Remove(ep2) })
	for _, c := range []string{"bind eq " + l, "bind cq " + l + " send,recv", "enable", "accept"} {
		ctlOK(t, ep2, c)
	}
	if ev := fileText(t, eq1, "events"); !strings.Contains(ev, "connected fid=ep/"+n) {
		t.Fatalf("events of the connecting side: %q", ev)
	}
	return ep1, ep2
}

// rdmPair makes an FI_EP_RDM endpoint in each of domains d1 and d2 (named
// n), each with the other's address at fi_addr 0 of its AV as its data
// file's destination, and returns their directories.
func rdmPair(t *testing.T, d1, d2, n string) (ep1, ep2 string) {
	t.Helper()
	var eps []string
	for _, dom := range []string{d1, d2} {
		mkobj(t, dom, "cq", n)
		mkobj(t, dom, "av", n)
		ep := mkobj(t, dom, "ep", n)
		must(t, os.WriteFile(filepath.Join(ep, "attr", "type"), []byte("FI_EP_RDM\n"), 0))
		for _, c := range []string{"bind cq " + n + " send,recv", "bind av " + n, "enable"} {
			ctlOK(t, ep, c)
		}
		eps = append(eps, ep)
	}
	for i, ep := range eps {
		other := eps[1-i]
		ctlOK(t, filepath.Join(filepath.Dir(filepath.Dir(ep)), "av", n), "insert "+fileText(t, other, "local"))
		ctlOK(t, ep, "dest 0")
	}
	return eps[0], eps[1]
}

// exchange sends msg from ep from to ep to through their data files and
// checks it arrives, waiting at most nsWait.
func exchange(t *testing.T, from, to string, msg []byte) {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		b, err := os.ReadFile(filepath.Join(to, "data"))
		if err != nil {
			b = []byte("read error: " + err.Error())
		}
		got <- b
	}()
	time.Sleep(50 * time.Millisecond) // let the read post its receive
	if err := os.WriteFile(filepath.Join(from, "data"), msg, 0); err != nil {
		e, _ := os.ReadFile(filepath.Join(from, "err"))
		t.Fatalf("write %s/data: %v (err: %s)", from, err, bytes.TrimSpace(e))
	}
	select {
	case g := <-got:
		if !bytes.Equal(g, msg) {
			t.Fatalf("%s received %d bytes (%.40q), want %d (%.40q)", to, len(g), g, len(msg), msg)
		}
	case <-time.After(nsWait):
		t.Fatalf("%s received nothing in %v", to, nsWait)
	}
}

// TestNetnsTwoHosts runs tcp MSG, tcp RDM, verbs MSG and verbs RDM between
// the daemons of two namespaces, over the veth pair, through the trees.
func TestNetnsTwoHosts(t *testing.T) {
	_, _, da, db := twoHosts(t)
	// The largest message the data file takes (docs/tree.md): rendezvous for RDM.
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)[:1<<20-os.Getpagesize()]
	for _, c := range []struct {
		name, domA, domB string
		rdm              bool
	}{
		{"tcp-msg", da.path("tcp", nsIfA), db.path("tcp", nsIfB), false},
		{"tcp-rdm", da.path("tcp", nsIfA), db.path("tcp", nsIfB), true},
		{"verbs-msg", da.path("verbs", nsVerbsA), db.path("verbs", nsVerbsB), false},
		{"verbs-rdm", da.path("verbs", nsVerbsA), db.path("verbs", nsVerbsB), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ea, eb string
			if c.rdm {
				ea, eb = rdmPair(t, c.domA, c.domB, "r")
			} else {
				ea, eb = msgPair(t, c.domA, c.domB, "m", "fi_sockaddr_in://"+nsAddrB+":")
				if fileText(t, eb, "remote") != fileText(t, ea, "local") {
					t.Errorf("b's peer %s is not a's %s", fileText(t, eb, "remote"), fileText(t, ea, "local"))
				}
			}
			for _, e := range []struct{ ep, addr string }{{ea, nsAddrA}, {eb, nsAddrB}} {
				if l := fileText(t, e.ep, "local"); !strings.HasPrefix(l, "fi_sockaddr_in://"+e.addr+":") {
					t.Errorf("%s: address %s is not on %s", e.ep, l, e.addr)
				}
			}
			exchange(t, ea, eb, []byte("a to b over the veth"))
			exchange(t, eb, ea, []byte("and back"))
			exchange(t, ea, eb, big)
		})
	}
}

// TestNetnsPingpong runs real fi_pingpong (libfabric's tcp provider) in
// one namespace against ffpingpong through the tree of the daemon of the
// other, FI_EP_MSG and FI_EP_RDM, over the veth pair, each side being the
// server once.
func TestNetnsPingpong(t *testing.T) {
	a, b, _, db := twoHosts(t)
	needCmd(t, "fi_pingpong")
	bin := ffpingpong(t)
	c := ppCases[0]
	fiEnvA := []string{"FI_TCP_IFACE=" + nsIfA}
	for _, ep := range []string{"msg", "rdm"} {
		common := []string{"-e", ep, "-S", strconv.Itoa(c.size), "-I", strconv.Itoa(c.iters), "-c"}
		fiArgs := append(nsenter(a, "fi_pingpong", "-p", "tcp", "-d", nsIfA), common...)
		ffArgs := append(nsenter(b, bin, "-mnt", db.mnt, "-p", "tcp", "-d", nsIfB, "-timeout", ppTimeout), common...)
		t.Run(ep+"/fi_pingpong-server", func(t *testing.T) {
			fi := startProc(t, fiEnvA, fiArgs[0], fiArgs[1:]...)
			ff := startProc(t, nil, ffArgs[0], append(ffArgs[1:], nsAddrA)...)
			fi.name, ff.name = "fi_pingpong in "+a, "ffpingpong in "+b
			ff.wait(t, ppLimit)
			fi.wait(t, ppLimit)
			checkPingpong(t, c, fi, ff)
		})
		t.Run(ep+"/fabricfs-server", func(t *testing.T) {
			ff := startProc(t, nil, ffArgs[0], ffArgs[1:]...)
			ff.name = "ffpingpong in " + b
			// fi_pingpong does not retry a refused control connection:
			// run it again until the server listens.
			var fi *proc
			for try := 0; ; try++ {
				fi = startProc(t, fiEnvA, fiArgs[0], append(fiArgs[1:], nsAddrB)...)
				fi.name = "fi_pingpong in " + a
				if fi.wait(t, ppLimit) == 0 || !strings.Contains(fi.err.String(), "failed to connect") || try == 200 {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			ff.wait(t, ppLimit)
			checkPingpong(t, c, fi, ff)
		})
	}
}

// TestNetnsHotplug: a veth pair added after the daemons started becomes a
// tcp domain and a verbs device in each, listed by the provider
// directories and /info, offered by getinfo, without a restart and
// without disturbing the objects of the domains already open; tcp MSG and
// verbs RDM then work over it. Daemon a runs with -tcp-iface naming its
// first interface and the new one: a second pair added with it, which the
// filter does not name, becomes no tcp domain there (daemon b, without a
// filter, has it). When the pair is deleted its domains stay, with their
// objects and entries (docs/deploy.md), a listen in them fails with an
// error, and the other domains work on.
func TestNetnsHotplug(t *testing.T) {
	const ifA, ifB, addrA, addrB = "ffhot-a", "ffhot-b", "198.51.100.1", "198.51.100.2"
	const offA, offB, offAddrA, offAddrB = "ffoff-a", "ffoff-b", "203.0.113.1", "203.0.113.2" // TEST-NET-3
	a, b, da, db := twoHostsWith(t, "-tcp-iface", nsIfA+","+ifA)
	old := mkobj(t, da.path("tcp", nsIfA), "eq", "before")
	verbsA, verbsB := "rxe_198_51_100_1", "rxe_198_51_100_2"
	if _, err := os.Stat(da.path("tcp", ifA)); err == nil {
		t.Fatalf("tcp/%s exists before the interface", ifA)
	}
	vethPair(t, a, offA, offAddrA, b, offB, offAddrB)
	vethPair(t, a, ifA, addrA, b, ifB, addrB)

	// Listing the provider directories finds the new domains, within a
	// rescan interval (core.RescanInterval, 1 s: the stat above looked).
	for _, c := range []struct {
		d          *daemon
		tcp, verbs string
	}{{da, ifA, verbsA}, {db, ifB, verbsB}} {
		if names, ok := waitListed(t, c.d.path("tcp"), c.tcp); !ok {
			t.Errorf("tcp lists %s, not %s", names, c.tcp)
		}
		if names, ok := waitListed(t, c.d.path("verbs"), c.verbs); !ok {
			t.Errorf("verbs lists %s, not %s", names, c.verbs)
		}
	}
	for _, want := range []string{"name: " + ifA + "\n", "name: " + verbsA + "\n", "name: 198.51.100.0/24\n"} {
		if info := da.read(t, "info"); !strings.Contains(info, want) {
			t.Errorf("/info has no %q", want)
		}
	}
	// The pair outside a's filter: b lists it; a, having looked again
	// since (the listings above), does not, nor offers it in /info.
	if names, ok := waitListed(t, db.path("tcp"), offB); !ok {
		t.Errorf("daemon b (no filter): tcp lists %s, not %s", names, offB)
	}
	if names := strings.Join(dirNames(t, da.path("tcp")), " "); strings.Contains(" "+names+" ", " "+offA+" ") {
		t.Errorf("-tcp-iface %s,%s: tcp lists %s", nsIfA, ifA, names)
	}
	if _, err := os.Stat(da.path("tcp", offA)); err == nil {
		t.Errorf("-tcp-iface %s,%s: tcp/%s exists", nsIfA, ifA, offA)
	}
	if info := da.read(t, "info"); strings.Contains(info, "name: "+offA+"\n") {
		t.Errorf("-tcp-iface %s,%s: /info offers %s", nsIfA, ifA, offA)
	}
	f, err := os.OpenFile(da.path("getinfo"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	_, err = f.Write([]byte("-p tcp -d " + ifA + "\n"))
	must(t, err)
	var ans bytes.Buffer
	_, err = ans.ReadFrom(f)
	must(t, err)
	if !strings.Contains(ans.String(), "name: "+ifA+"\n") {
		t.Errorf("getinfo -d %s answered %.200q", ifA, ans.String())
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("the eq made before the interface: %v", err)
	}

	ea, eb := msgPair(t, da.path("tcp", ifA), db.path("tcp", ifB), "m", "fi_sockaddr_in://"+addrB+":")
	exchange(t, ea, eb, []byte("over the new interface"))
	ra, rb := rdmPair(t, da.path("verbs", verbsA), db.path("verbs", verbsB), "r")
	exchange(t, ra, rb, bytes.Repeat([]byte("v"), 100000))
	exchange(t, rb, ra, []byte("back over verbs"))

	runIP(t, "-n", a, "link", "del", ifA) // and its peer
	kept := mkobj(t, da.path("tcp", ifA), "eq", "after")
	if names := strings.Join(dirNames(t, da.path("tcp")), " "); !strings.Contains(" "+names+" ", " "+ifA+" ") {
		t.Errorf("tcp lists %s after %s went: its domain should stay", names, ifA)
	}
	if info := da.read(t, "info"); !strings.Contains(info, "name: "+ifA+"\n") {
		t.Errorf("/info lost %s's entries", ifA)
	}
	for _, o := range []string{filepath.Join(da.path("tcp", ifA), "ep", "m"), kept} {
		if _, err := os.Stat(o); err != nil {
			t.Errorf("after the interface went: %v", err)
		}
	}
	pep := mkobj(t, da.path("tcp", ifA), "pep", "gone")
	ctlOK(t, pep, "bind eq after")
	if err := ctl(filepath.Join(pep, "ctl"), "listen"); err == nil {
		t.Errorf("listen on %s's address after it went succeeded: %s", ifA, fileText(t, pep, "local"))
	} else {
		t.Logf("listen after the interface went: %v (err: %s)", err, fileText(t, pep, "err"))
	}
	oa, ob := msgPair(t, da.path("tcp", nsIfA), db.path("tcp", nsIfB), "o", "fi_sockaddr_in://"+nsAddrB+":")
	exchange(t, oa, ob, []byte("the first interface still works"))
}

// TestNetnsLinkDown takes daemon a's link down in the middle of a stream
// of tcp messages and of a verbs send, and brings it back. The tcp
// connection outlives the outage, as TCP does: every message arrives, in
// order, once the link is back. The verbs send fails with an error once
// its retries are spent (retry_cnt 7 of 67 ms), as a reliable-connected
// QP fails, and a new connection works after the outage. Meanwhile daemon
// a serves its own namespace: a loopback session works. Every wait is
// bounded.
func TestNetnsLinkDown(t *testing.T) {
	a, _, da, db := twoHosts(t)
	ta, tb := msgPair(t, da.path("tcp", nsIfA), db.path("tcp", nsIfB), "t", "fi_sockaddr_in://"+nsAddrB+":")
	va, _ := msgPair(t, da.path("verbs", nsVerbsA), db.path("verbs", nsVerbsB), "v", "fi_sockaddr_in://"+nsAddrB+":")
	la, lb := msgPair(t, da.path("tcp", "lo"), da.path("tcp", "lo"), "l", "fi_sockaddr_in://127.0.0.1:")

	const n, size = 48, 64 << 10
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i%26)}, size) }
	got := make(chan error, n)
	go func() { // the reader: one message per read of the data file
		for i := 0; i < n; i++ {
			b, err := os.ReadFile(filepath.Join(tb, "data"))
			if err == nil && !bytes.Equal(b, msg(i)) {
				err = fmt.Errorf("message %d: %d bytes starting %.8q", i, len(b), b)
			}
			got <- err
			if err != nil {
				return
			}
		}
	}()
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := os.WriteFile(filepath.Join(ta, "data"), msg(i), 0); err != nil {
				sent <- fmt.Errorf("message %d: %v", i, err)
				return
			}
		}
		sent <- nil
	}()
	recv := func(what string) {
		t.Helper()
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("tcp reader %s: %v", what, err)
			}
		case <-time.After(nsWait):
			t.Fatalf("tcp reader %s: nothing in %v", what, nsWait)
		}
	}
	for i := 0; i < 4; i++ {
		recv("before the outage")
	}

	runIP(t, "-n", a, "link", "set", nsIfA, "down")
	down := time.Now()
	upDone := false
	up := func() {
		if !upDone {
			upDone = true
			runIP(t, "-n", a, "link", "set", nsIfA, "up")
			waitCarrier(t, a, nsIfA)
		}
	}
	t.Cleanup(up)

	// The verbs send fails, within a bounded time.
	verr := make(chan error, 1)
	go func() { verr <- os.WriteFile(filepath.Join(va, "data"), []byte("into the void"), 0) }()
	select {
	case err := <-verr:
		if err == nil {
			t.Error("a verbs send with the link down succeeded")
		} else {
			t.Logf("verbs send with the link down after %v: %v (err: %s)", time.Since(down).Round(time.Millisecond), err, fileText(t, va, "err"))
		}
	case <-time.After(nsWait):
		t.Fatalf("the verbs send with the link down did not end in %v", nsWait)
	}
	// The daemon serves its own namespace.
	exchange(t, la, lb, []byte("loopback during the outage"))
	exchange(t, lb, la, []byte("and back"))
	time.Sleep(time.Until(down.Add(3 * time.Second)))
	up()

	for i := 4; i < n; i++ {
		recv("after the outage")
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Errorf("tcp writer: %v", err)
		}
	case <-time.After(nsWait):
		t.Fatalf("tcp writer did not finish in %v", nsWait)
	}
	t.Logf("%d tcp messages of %d bytes arrived across an outage of %v", n, size, 3*time.Second)
	va2, vb2 := msgPair(t, da.path("verbs", nsVerbsA), db.path("verbs", nsVerbsB), "v2", "fi_sockaddr_in://"+nsAddrB+":")
	exchange(t, va2, vb2, []byte("verbs again after the outage"))
}
