package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The fabricfs libfabric provider (provider/, docs/provider.md) judged by
// real libfabric programs: Debian's fi_pingpong (libfabric-bin, 1.17) with
// -p fabricfs on both sides, and against libfabric's own tcp provider in
// both roles; provider/test/msgtest, rdmtest and waittest for what
// fi_pingpong does not reach.

// provEnv points libfabric at the provider and the provider at d's tree;
// FI_TCP_IFACE keeps libfabric's tcp on loopback (fiEnv).
func provEnv(t *testing.T, d *daemon) []string {
	return append([]string{"FI_PROVIDER_PATH=" + buildProvider(t), "FI_FABRICFS_ROOT=" + d.mnt}, fiEnv...)
}

// ppSide is one fi_pingpong: its provider arguments. fabricfs takes the
// tree's tcp/lo, or another domain of the tree as fabricfs:PROV/DOMAIN.
func ppSide(prov string) []string {
	if dom, ok := strings.CutPrefix(prov, "fabricfs:"); ok {
		return []string{"-p", "fabricfs", "-d", dom}
	}
	if prov == "fabricfs" {
		return []string{"-p", "fabricfs", "-d", "tcp/lo"}
	}
	return []string{"-p", prov, "-d", "lo"}
}

// runPingpong runs fi_pingpong server and client with the given providers
// and arguments and checks both tables: every size ran all iterations,
// both sides ran the same sizes, and want are among them.
func runPingpong(t *testing.T, d *daemon, server, client string, args []string, iters int, want ...string) {
	t.Helper()
	env := provEnv(t, d)
	port := freePort(t)
	args = append(args, "-c", "-I", strconv.Itoa(iters))
	srv := startProc(t, env, "fi_pingpong", append(append(ppSide(server), "-B", port), args...)...)
	cli := fiClientEnv(t, env, append(append(append(ppSide(client), "-P", port), args...), "127.0.0.1")...)
	srv.wait(t, ppLimit)
	var sizes [2][]string
	for i, p := range []*proc{srv, cli} {
		if p.code != 0 {
			t.Fatalf("%v", p)
		}
		s, err := tableSizes(p.out.String(), iters)
		if err != nil {
			t.Fatalf("%s: %v\n%v", p.name, err, p)
		}
		sizes[i] = s
	}
	if strings.Join(sizes[0], " ") != strings.Join(sizes[1], " ") {
		t.Errorf("server ran sizes %v, client %v", sizes[0], sizes[1])
	}
	for _, w := range want {
		if !strings.Contains(" "+strings.Join(sizes[0], " ")+" ", " "+w+" ") {
			t.Errorf("size %s did not run: %v", w, sizes[0])
		}
	}
	t.Logf("%s server, %s client: sizes %v", server, client, sizes[0])
}

// tableSizes reads fi_pingpong's table (checkTable has the columns) of
// one or more sizes, each of which must show iters sent and acknowledged;
// it returns the sizes in order.
func tableSizes(out string, iters int) ([]string, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := []string{"bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"}
	if len(lines) < 2 || !equalFields(strings.Fields(lines[0]), header) {
		return nil, fmt.Errorf("want the header and a line per size, got %q", out)
	}
	var sizes []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 8 || f[1] != strconv.Itoa(iters) || f[2] != "="+strconv.Itoa(iters) {
			return nil, fmt.Errorf("line %q: want %d sent and =%d acknowledged", l, iters, iters)
		}
		sizes = append(sizes, f[0])
	}
	return sizes, nil
}

// TestProviderPingpong runs fi_pingpong -p fabricfs on both sides, every
// size of -S all (0 B to 6 MiB: staged, and beyond a staging region) with
// -c, for FI_EP_MSG, FI_EP_RDM and tagged FI_EP_RDM.
func TestProviderPingpong(t *testing.T) {
	needCmd(t, "fi_pingpong")
	d := mount(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"msg", []string{"-e", "msg"}},
		{"rdm", []string{"-e", "rdm"}},
		{"rdm-tagged", []string{"-e", "rdm", "-m", "tagged"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runPingpong(t, d, "fabricfs", "fabricfs", append(c.args, "-S", "all"), 10, "1", "1m")
		})
	}
}

// TestProviderPingpongVerbs runs fi_pingpong -p fabricfs on both sides in
// the tree's verbs domains: FI_EP_MSG and FI_EP_DGRAM, whose entries
// fi_pingpong gets without FI_RX_CQ_DATA (it offers no mode and asks for
// no remote CQ data), and FI_EP_RDM untagged and tagged.
func TestProviderPingpongVerbs(t *testing.T) {
	needCmd(t, "fi_pingpong")
	d := mount(t)
	msg := "fabricfs:verbs/" + verbsDevice
	for _, c := range []struct {
		name, dom string
		args      []string
		largest   string // the largest size that must run
	}{
		{"msg", msg, []string{"-e", "msg"}, "1m"},
		// A datagram is at most the device's MTU, 4096 on lo.
		{"dgram", msg + "-dgram", []string{"-e", "dgram"}, "4k"},
		{"rdm", msg, []string{"-e", "rdm"}, "1m"},
		{"rdm-tagged", msg, []string{"-e", "rdm", "-m", "tagged"}, "1m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runPingpong(t, d, c.dom, c.dom, c.args, 10, "64", c.largest)
		})
	}
}

// TestProviderPingpongTCP runs fi_pingpong -p fabricfs against libfabric's
// own fi_pingpong -p tcp (tcp;ofi_rxm for FI_EP_RDM), msg, rdm and rdm
// tagged, each side as server once, sizes 0 B to 6 MiB with -c.
func TestProviderPingpongTCP(t *testing.T) {
	needCmd(t, "fi_pingpong")
	d := mount(t)
	for _, ep := range [][]string{{"-e", "msg"}, {"-e", "rdm"}, {"-e", "rdm", "-m", "tagged"}} {
		for _, roles := range [][2]string{{"fabricfs", "tcp"}, {"tcp", "fabricfs"}} {
			t.Run(strings.Join(ep[1:], "-")+"/"+roles[0]+"-server", func(t *testing.T) {
				runPingpong(t, d, roles[0], roles[1], append(ep, "-S", "all"), 10, "1", "1m")
			})
		}
	}
}

// runProviderC builds provider/test/NAME.c and runs it once per argument
// list in runs (the first argument a domain of d's tree; the arguments
// name the subtest); each run must exit 0 and end with PASS.
func runProviderC(t *testing.T, name string, runs ...[]string) {
	d := mount(t)
	bin := buildProviderC(t, name)
	for _, args := range runs {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			p := startProc(t, provEnv(t, d), bin, args...)
			if code := p.wait(t, ppLimit); code != 0 || !strings.HasSuffix(p.out.String(), "PASS\n") {
				t.Fatalf("%v", p)
			}
			t.Logf("%s", p.out.String())
		})
	}
}

// TestProviderMsg runs provider/test/msgtest.c in the tree's tcp and verbs
// domains: connection with private data, sizes and iovecs, CQ formats,
// inject, remote CQ data, a truncated receive, fi_cancel, RMA, zero copy,
// shutdown, reject with private data, authorization keys (fi_endpoint(3):
// "Only peer endpoints that are programmed to use the same authorization
// key may communicate": a listener with another key refuses the connect),
// fi_domain_bind (FI_REG_MR, the default EQ).
func TestProviderMsg(t *testing.T) {
	runProviderC(t, "msgtest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}

// TestProviderRDM runs provider/test/rdmtest.c: FI_EP_RDM in the tree's tcp
// and verbs domains (messages with their sender, tagged matching, a
// directed receive, FI_MULTI_RECV, a counter and a hidden CQ, fi_cq_sread,
// selective completion) and FI_EP_DGRAM in the verbs -dgram domain
// (messages).
func TestProviderRDM(t *testing.T) {
	runProviderC(t, "rdmtest", []string{"tcp/lo", "rdm"}, []string{"verbs/" + verbsDevice, "rdm"},
		[]string{"verbs/" + verbsDevice + "-dgram", "dgram"})
}

// TestProviderBufferedRecv runs provider/test/buftest.c in the tree's tcp
// and verbs domains: FI_BUFFERED_RECV through the libfabric provider
// (fi_msg(3), "Buffered Receives"): reports whose op_context is a struct
// fi_recv_context of the endpoint and whose buf holds the message's first
// FI_OPT_BUFFERED_LIMIT bytes, FI_MORE for a longer message, a claim into
// the application's buffer completing with the context put in the
// structure and FI_CLAIM, a discard, and a report claimed only once.
func TestProviderBufferedRecv(t *testing.T) {
	runProviderC(t, "buftest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}

// TestProviderSharedContexts runs provider/test/srxtest.c in the tree's
// tcp and verbs domains: fi_srx_context and fi_stx_context shared by two
// FI_EP_RDM endpoints, receives posted once on the receive context and
// completed on the CQ of the endpoint each message came to.
func TestProviderSharedContexts(t *testing.T) {
	runProviderC(t, "srxtest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}

// TestProviderScalableEndpoints runs provider/test/septest.c in the tree's
// tcp and verbs domains: fi_scalable_ep with 4 fi_tx_context and 4
// fi_rx_context, each on a CQ of its own, receive contexts named by
// fi_rx_addr.
func TestProviderScalableEndpoints(t *testing.T) {
	runProviderC(t, "septest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}

// TestProviderExitWhileWaiting runs provider/test/exittest.c 30 times: a
// program that returns from main while the provider's waiter thread
// watches its counter must exit 0 each time (libfabric unloads the
// provider at exit: the provider's cleanup ends the thread first). Before
// that cleanup about one run in six died of SIGSEGV.
func TestProviderExitWhileWaiting(t *testing.T) {
	d := mount(t)
	bin := buildProviderC(t, "exittest")
	for i := 0; i < 30; i++ {
		p := startProc(t, provEnv(t, d), bin, "tcp/lo")
		if code := p.wait(t, ppLimit); code != 0 || p.out.String() != "PASS\n" {
			t.Fatalf("run %d: %v", i, p)
		}
	}
}

// TestProviderWait runs provider/test/waittest.c in the tree's tcp and
// verbs domains: a CQ's FI_WAIT_FD descriptor under epoll, fi_trywait, a
// counter's and an EQ's descriptors, a poll set over two CQs and a
// counter, a wait set.
func TestProviderWait(t *testing.T) {
	runProviderC(t, "waittest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}

// TestProviderStream runs provider/test/streamtest.c in the tree's tcp
// domain: windows of messages on an FI_EP_MSG endpoint of FI_TC_BULK_DATA,
// fi_msg_bw's loop, whose windows must not wait for the peer's delayed
// ACK (40 ms) as they did while that class turned Nagle's algorithm on.
func TestProviderStream(t *testing.T) {
	runProviderC(t, "streamtest", []string{"tcp/lo"})
}
