package tests

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

// The conformance scenarios (see conformance_test.go). Each checks the
// completions both endpoints see, and the bytes that arrived.

var (
	cqSend    = fi.CQFlags(fi.MSG | fi.SEND)
	cqRecv    = fi.CQFlags(fi.MSG | fi.RECV)
	cqTSend   = fi.CQFlags(fi.TAGGED | fi.SEND)
	cqTRecv   = fi.CQFlags(fi.TAGGED | fi.RECV)
	cqWrite   = fi.CQFlags(fi.RMA | fi.WRITE)
	cqRead    = fi.CQFlags(fi.RMA | fi.READ)
	cqRemoteW = fi.CQFlags(fi.REMOTE_WRITE | fi.REMOTE_CQ_DATA)
)

// pattern is n bytes of test content, different for each seed.
func pattern(n, seed int) []byte { return bytes.Clone(msgPattern[seed%251:][:n]) }

// wantCQE checks a completion's flags, length and error.
func wantCQE(t *testing.T, what string, c confCQE, flags fi.CQFlags, n int, err fi.Errno) {
	t.Helper()
	if c.Flags != flags || c.Len != uint64(n) || c.Err != err {
		t.Errorf("%s: completion %v, want flags %v len %d err %v", what, c, flags, n, err.Name())
	}
}

// wantRecv checks a successful receive's completion and bytes.
func wantRecv(t *testing.T, c confCQE, flags fi.CQFlags, msg []byte) {
	t.Helper()
	wantCQE(t, "receive", c, flags, len(msg), 0)
	if !bytes.Equal(c.Payload, msg) {
		t.Errorf("received %d bytes %.16q..., want %.16q...", len(c.Payload), c.Payload, msg)
	}
}

// transfer sends msg from a to b through a receive b posted before, and
// checks both completions.
func transfer(t *testing.T, a, b *confNode, msg []byte) {
	t.Helper()
	b.io.recv(t, len(msg), confRecv{})
	a.io.send(t, msg, confSend{})
	wantCQE(t, "send", a.io.poll(t, 1)[0], cqSend, len(msg), 0)
	wantRecv(t, b.io.poll(t, 1)[0], cqRecv, msg)
}

// cqEvent waits for the next line of the CQ's events file.
func cqEvent(t *testing.T, cq string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := readNonblock(filepath.Join(cq, "events"))
		must(t, err)
		if len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no completion after 10s", cq)
		}
	}
}

var confScenarios = []confScenario{
	{name: "send_recv", caps: fi.MSG | fi.SEND | fi.RECV, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{})
		for i, n := range []int{1, 100, 9000} {
			transfer(t, a, b, pattern(n, i))
			transfer(t, b, a, pattern(n, i+7))
		}
	}},
	// fi_endpoint(3), "SHARED CONTEXTS": "Users post receive buffers
	// directly to a shared receive context, with the buffers usable by any
	// endpoint bound to the shared receive context. [...] Completed
	// receive operations are posted to the CQs bound to the endpoint."
	// Two pairs: the senders share a transmit context ("operations are
	// posted directly to the endpoint"), the receivers a receive context,
	// whose receives are posted through its data file (for both
	// implementations: the Go client has no shared contexts); each
	// receiver's CQ reports the receive its message took.
	{name: "shared_contexts", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		srx, stx := x.impl.obj(t, x, "srx"), x.impl.obj(t, x, "stx")
		a, b, _ := x.confPair(t, confCfg{a: confSide{stx: stx}, b: confSide{srx: srx}})
		c, d, _ := x.confPair(t, confCfg{a: confSide{stx: stx}, b: confSide{srx: srx}})
		for i, p := range []struct{ from, to *confNode }{{c, d}, {a, b}, {c, d}} {
			msg := pattern(100+i, i)
			got := make(chan []byte, 1)
			go func() {
				b, err := os.ReadFile(filepath.Join(srx, "data"))
				if err != nil {
					t.Errorf("read of %s/data: %v", srx, err)
				}
				got <- b
			}()
			p.from.io.send(t, msg, confSend{})
			wantCQE(t, "send", p.from.io.poll(t, 1)[0], cqSend, len(msg), 0)
			if ev := cqEvent(t, p.to.cq); !strings.Contains(ev, "flags=FI_RECV|FI_MSG len="+strconv.Itoa(len(msg))) {
				t.Errorf("%s's CQ: %q, want the receive of %d bytes", p.to.name, ev, len(msg))
			}
			if r := <-got; !bytes.Equal(r, msg) {
				t.Errorf("message %d: the context's receive got %d bytes %.16q..., want %.16q...", i, len(r), r, msg)
			}
		}
		for _, n := range []*confNode{a, b, c, d} {
			if !n.io.quiet(t, 10*time.Millisecond) {
				t.Errorf("%s: completions beyond the receives", n.name)
			}
		}
	}},
	// A scalable endpoint with 4 transmit and 4 receive contexts, each on
	// a CQ of its own; transmit context i sends to receive context 3-i of
	// the same endpoint, named with fi_rx_addr (the AV's rx_ctx_bits 2),
	// and each receive context gets the message sent to it.
	{name: "scalable_endpoint", caps: fi.MSG | fi.NAMED_RX_CTX, run: func(t *testing.T, x *confEnv) {
		const n, bits = 4, 2
		av := x.impl.obj(t, x, "av")
		must(t, ctl(filepath.Join(av, "attr", "rx_ctx_bits"), strconv.Itoa(bits)))
		sep := x.impl.obj(t, x, "ep")
		for _, a := range [][2]string{{"type", x.run.typ}, {"scalable", "true"}, {"tx_ctx_cnt", "4"}, {"rx_ctx_cnt", "4"}} {
			must(t, ctl(filepath.Join(sep, "attr", a[0]), a[1]))
		}
		ctlOK(t, sep, "bind av "+filepath.Base(av))
		var tx, rx []*confNode
		for i := range n {
			for _, dir := range []string{"tx", "rx"} {
				// The CQ and region first: cleanups run last first, and
				// the endpoint must go before its CQ can.
				c := &confNode{cq: x.impl.obj(t, x, "cq"), mr: x.impl.obj(t, x, "mr"), av: av}
				c.ep = x.impl.obj(t, x, "ep")
				c.name = "ep/" + filepath.Base(c.ep)
				ctlOK(t, c.ep, "context "+filepath.Base(sep)+" "+dir+" "+strconv.Itoa(i))
				if dir == "tx" {
					ctlOK(t, c.ep, "bind cq "+filepath.Base(c.cq)+" send")
					c.peer = uint64(n-1-i) << (64 - bits) // fi_rx_addr(0, 3-i, 2)
					tx = append(tx, c)
				} else {
					ctlOK(t, c.ep, "bind cq "+filepath.Base(c.cq)+" recv")
					rx = append(rx, c)
				}
				ctlOK(t, c.ep, "enable")
			}
		}
		ctlOK(t, sep, "enable")
		ctlOK(t, av, "insert "+fileText(t, sep, "local")) // fi_addr 0
		for _, c := range append(tx, rx...) {
			c.io = x.impl.io(t, x, c)
		}
		msgs := make([][]byte, n)
		for j, c := range rx {
			c.io.recv(t, 200, confRecv{})
			msgs[n-1-j] = pattern(100+j, j)
		}
		for i, c := range tx {
			c.io.send(t, msgs[i], confSend{})
			wantCQE(t, "send", c.io.poll(t, 1)[0], cqSend, len(msgs[i]), 0)
		}
		for j, c := range rx {
			wantRecv(t, c.io.poll(t, 1)[0], cqRecv, msgs[n-1-j])
		}
		for _, c := range append(tx, rx...) {
			if !c.io.quiet(t, 10*time.Millisecond) {
				t.Errorf("%s: completions beyond its own", c.name)
			}
		}
	}},
	// An alias of a, whose send binding is selective and whose sends
	// carry no FI_COMPLETION, made with FI_TRANSMIT|FI_COMPLETION: its
	// sends go through a's provider endpoint and report on a's CQ, a's
	// own report nothing ("An alias EP differs from its parent endpoint
	// only by its default data transfer flags").
	{name: "alias", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{a: confSide{selective: true}})
		al := &confNode{cq: a.cq, mr: x.impl.obj(t, x, "mr"), av: a.av, peer: a.peer}
		al.ep = x.impl.obj(t, x, "ep")
		al.name = "ep/" + filepath.Base(al.ep)
		ctlOK(t, al.ep, "alias "+filepath.Base(a.ep)+" FI_TRANSMIT|FI_COMPLETION")
		al.io = x.impl.io(t, x, al)
		for i, from := range []*confNode{a, al} {
			msg := pattern(64, 20+i)
			b.io.recv(t, 64, confRecv{})
			from.io.send(t, msg, confSend{})
			wantRecv(t, b.io.poll(t, 1)[0], cqRecv, msg)
		}
		wantCQE(t, "the alias's send", al.io.poll(t, 1)[0], cqSend, 64, 0)
		if !a.io.quiet(t, 10*time.Millisecond) {
			t.Errorf("%s: a completion of its own send, which asked for none", a.name)
		}
	}},
	// fi_endpoint(3) auth_key: "Only peer endpoints that are programmed to
	// use the same authorization key may communicate." The same key
	// talks; another key does not: the listener refuses the request
	// itself (FI_EP_MSG), or the send fails (FI_EP_RDM).
	{name: "auth_key", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		same := confCfg{a: confSide{authKey: "job-1"}, pepKey: "job-1"}
		if !x.run.msg() {
			same.b.authKey = "job-1"
		}
		a, b, _ := x.confPair(t, same)
		transfer(t, a, b, pattern(64, 30))
		transfer(t, b, a, pattern(64, 31))
		if x.run.msg() {
			_, _, ev := x.confPair(t, confCfg{a: confSide{authKey: "job-2"}, pepKey: "job-1", refused: true})
			if slices.ContainsFunc(ev, func(l string) bool { return strings.HasPrefix(l, "connreq ") }) {
				t.Errorf("events %q: a request with another key reached the listener's application", ev)
			}
			return
		}
		c, _, _ := x.confPair(t, confCfg{a: confSide{authKey: "job-2"}, b: confSide{authKey: "job-3"}})
		if err := c.io.sendFails(t, pattern(64, 32)); err != fi.ECONNREFUSED {
			t.Errorf("send to a peer with another key: %v, want FI_ECONNREFUSED", err.Name())
		}
	}},
	// fi_av(3): "Address vectors may be shared across multiple processes
	// which access the same named domain on the same node. The name field
	// allows the underlying provider to identify a shared AV." A named AV
	// is av/NAME, made with mkdir (for both implementations: the Go
	// client's AVs are clone objects); a's endpoint binds it by its name,
	// a second process (a shell) inserts b's address into it, and a sends
	// to the fi_addr that process got.
	{name: "shared_av", caps: fi.MSG | fi.SHARED_AV, run: func(t *testing.T, x *confEnv) {
		av := mkobj(t, x.dom, "av", "confshared")
		a, b, _ := x.confPair(t, confCfg{a: confSide{av: av}})
		transfer(t, a, b, pattern(100, 25))
		transfer(t, b, a, pattern(200, 26))
	}},
	// fi_domain(3): "Binding an event queue to a domain with the FI_REG_MR
	// flag indicates that the provider should perform all memory
	// registration operations asynchronously, with the completion
	// reported through the event queue." Here per region (mr bind eq,
	// through the files for both implementations: the Go client
	// registers synchronously): reg returns, the EQ reports mr_complete,
	// and then the region takes a's RMA write.
	{name: "mr_async", caps: fi.RMA | fi.WRITE | fi.REMOTE_WRITE, run: func(t *testing.T, x *confEnv) {
		eq := x.impl.obj(t, x, "eq") // first: removed after the region bound to it
		a, _, _ := x.confPair(t, confCfg{})
		mr := mkobj(t, x.dom, "mr", "confasync")
		must(t, ctl(filepath.Join(mr, "attr", "len"), "8192"))
		must(t, ctl(filepath.Join(mr, "attr", "access"), confMRAccess))
		ctlOK(t, mr, "bind eq "+filepath.Base(eq))
		ctlOK(t, mr, "reg")
		if ev := x.events(t, eq, "mr_complete fid=mr/confasync"); len(ev) != 1 {
			t.Errorf("events %q, want the registration's only", ev)
		}
		data := pattern(3000, 24)
		a.io.fill(t, confRMAOff, data)
		a.io.rma(t, true, confRMAOff, 3000, 4000, x.num(t, mr, "attr/key"), nil)
		wantCQE(t, "write", a.io.poll(t, 1)[0], cqWrite, 3000, 0)
		// The write completes once sent (transmit complete), not
		// necessarily placed: the bytes may come a moment later.
		for deadline := time.Now().Add(10 * time.Second); !bytes.Equal(x.regionBytes(t, mr, 4000, 3000), data); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the asynchronously registered region does not hold the written bytes")
			}
		}
	}},
	// fi_endpoint(3), "Traffic Class (tclass)": "Traffic classes can be a
	// differentiated services code point (DSCP) value, one of the
	// following defined labels, or a provider-specific definition." a
	// takes a label and b a DSCP value (fi_tc_dscp_set(10)) before
	// enable; both read back after and carry messages. A class that is
	// neither is refused (EINVAL), and so is a change after enable (EBADFD:
	// FI_EOPBADSTATE). Their DSCP on the wire: TestTrafficClass.
	{name: "tclass", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{a: confSide{tclass: "FI_TC_LOW_LATENCY"}, b: confSide{tclass: "0x10a"}})
		for _, c := range []struct {
			n    *confNode
			want string
		}{{a, "0x201"}, {b, "0x10a"}} {
			if got := fileText(t, c.n.ep, "attr/tx_tclass"); got != c.want {
				t.Errorf("%s: attr/tx_tclass %q after enable, want %q", c.n.name, got, c.want)
			}
		}
		transfer(t, a, b, pattern(300, 27))
		transfer(t, b, a, pattern(300, 28))
		err := ctl(filepath.Join(a.ep, "attr", "tx_tclass"), "FI_TC_BULK_DATA")
		wantErrno(t, "tx_tclass after enable", err, syscall.EBADFD)
		if got := fileText(t, a.ep, "attr/tx_tclass"); got != "0x201" {
			t.Errorf("%s: attr/tx_tclass %q after the refused change, want 0x201", a.name, got)
		}
		idle := x.impl.obj(t, x, "ep")
		err = ctl(filepath.Join(idle, "attr", "tx_tclass"), "FI_TC_FASTEST")
		wantErrno(t, "tx_tclass FI_TC_FASTEST", err, syscall.EINVAL)
	}},
	{name: "remote_cq_data", caps: fi.MSG, cqData: true, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{})
		msg, data := pattern(64, 1), uint64(0xfeedf00d)
		b.io.recv(t, 64, confRecv{})
		a.io.send(t, msg, confSend{data: &data})
		wantCQE(t, "send", a.io.poll(t, 1)[0], cqSend, 64, 0)
		c := b.io.poll(t, 1)[0]
		wantRecv(t, c, cqRecv|fi.CQFlags(fi.REMOTE_CQ_DATA), msg)
		if c.Data != data {
			t.Errorf("remote CQ data %#x, want %#x", c.Data, data)
		}
		transfer(t, a, b, pattern(32, 2)) // the next send carries none
	}},
	{name: "inject", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{a: confSide{txFlags: "FI_INJECT"}})
		size := int(x.num(t, a.ep, "attr/tx_inject_size"))
		transfer(t, a, b, pattern(size, 3))
		transfer(t, a, b, pattern(1, 4))
		if err := a.io.sendFails(t, pattern(size+1, 5)); err != fi.EINVAL {
			t.Errorf("inject of inject_size+1 = %d bytes failed with %v, want FI_EINVAL", size+1, err.Name())
		}
		transfer(t, a, b, pattern(8, 6)) // the endpoint still works
	}},
	{name: "truncated_receive", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{})
		msg := pattern(100, 8)
		b.io.recv(t, 10, confRecv{})
		a.io.send(t, msg, confSend{})
		wantCQE(t, "send", a.io.poll(t, 1)[0], cqSend, 100, 0)
		c := b.io.poll(t, 1)[0]
		wantCQE(t, "truncated receive", c, cqRecv, 10, fi.ETRUNC)
		if c.OLen != 90 {
			t.Errorf("olen %d, want 90", c.OLen)
		}
		if !bytes.Equal(c.Payload, msg[:10]) {
			t.Errorf("the truncated buffer holds %q, want %q", c.Payload, msg[:10])
		}
		transfer(t, a, b, pattern(50, 9)) // the next message arrives whole
	}},
	{name: "selective_completion", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		// Both send bindings are selective; a's sends ask for a
		// completion (FI_COMPLETION), b's do not: b's send makes no
		// entry, but its counter counts it.
		a, b, _ := x.confPair(t, confCfg{
			a: confSide{selective: true, txFlags: "FI_COMPLETION", cntr: "send"},
			b: confSide{selective: true, cntr: "send"}})
		transfer(t, a, b, pattern(40, 10))
		msg := pattern(41, 11)
		a.io.recv(t, 41, confRecv{})
		b.io.send(t, msg, confSend{})
		wantRecv(t, a.io.poll(t, 1)[0], cqRecv, msg)
		b.counts(t, 1, 0)
		if !b.io.quiet(t, 50*time.Millisecond) {
			t.Error("a send without FI_COMPLETION under a selective binding made an entry")
		}
		a.counts(t, 1, 0)
	}},
	{name: "cancel", caps: fi.MSG, cancels: true, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{b: confSide{cntr: "recv"}})
		ctx := b.io.recv(t, 64, confRecv{})
		x.cancel(t, b, ctx)
		wantCQE(t, "cancelled receive", b.io.poll(t, 1)[0], cqRecv, 0, fi.ECANCELED)
		b.counts(t, 0, 1)
		transfer(t, a, b, pattern(64, 12)) // the message goes to the next receive
		b.counts(t, 1, 1)
	}},
	{name: "delivery_complete", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		// Sent before and after the target posts its receive, a
		// delivery-complete send completes, once the target has the
		// message (tcp FI_EP_MSG: once it is placed in the receive; rxm,
		// as libfabric's: once buffered), which the receive then holds.
		a, b, _ := x.confPair(t, confCfg{a: confSide{txFlags: "FI_DELIVERY_COMPLETE"}})
		msg := pattern(200, 13)
		a.io.send(t, msg, confSend{})
		b.io.recv(t, 200, confRecv{})
		wantCQE(t, "send", a.io.poll(t, 1)[0], cqSend, 200, 0)
		wantRecv(t, b.io.poll(t, 1)[0], cqRecv, msg)
		transfer(t, a, b, pattern(3000, 14))
	}},
	{name: "counters", caps: fi.MSG, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{a: confSide{cntr: "send"}, b: confSide{cntr: "recv"}})
		for i := range 3 {
			transfer(t, a, b, pattern(10+i, i))
		}
		a.counts(t, 3, 0)
		b.counts(t, 3, 0)
		transfer(t, b, a, pattern(5, 5)) // b's sends and a's receives are not bound
		a.counts(t, 3, 0)
		b.counts(t, 3, 0)
	}},
	{name: "connect_accept_data", msgOnly: true, run: func(t *testing.T, x *confEnv) {
		a, b, ev := x.confPair(t, confCfg{connData: "hello", acceptData: "welcome"})
		for _, want := range []string{"connreq fid=pep/", "connected fid=" + a.name + " data=welcome", "connected fid=" + b.name} {
			if !slices.ContainsFunc(ev, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("events %q lack %q", ev, want)
			}
		}
		if !slices.ContainsFunc(ev, func(l string) bool {
			return strings.HasPrefix(l, "connreq ") && strings.HasSuffix(l, " ep="+b.name[3:]+" data=hello")
		}) {
			t.Errorf("events %q lack the request for %s with data=hello", ev, b.name)
		}
		transfer(t, a, b, pattern(20, 14))
	}},
	{name: "reject_data", msgOnly: true, run: func(t *testing.T, x *confEnv) {
		a, _, ev := x.confPair(t, confCfg{reject: "go-away"})
		want := "error fid=" + a.name + " err=FI_ECONNREFUSED"
		if !slices.ContainsFunc(ev, func(l string) bool { return strings.HasPrefix(l, want) && strings.HasSuffix(l, " data=go-away") }) {
			t.Errorf("events %q lack %q ... data=go-away", ev, want)
		}
	}},
	{name: "shutdown", msgOnly: true, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{})
		transfer(t, a, b, pattern(20, 15))
		ctlOK(t, a.ep, "shutdown")
		x.events(t, a.eq, "shutdown fid="+a.name, "shutdown fid="+b.name)
	}},
	{name: "shutdown_posted", msgOnly: true, run: func(t *testing.T, x *confEnv) {
		// Shutdown with a receive still posted returns: verbs flushes the
		// receive inside it, which once deadlocked on the endpoint.
		a, b, _ := x.confPair(t, confCfg{})
		transfer(t, a, b, pattern(20, 15))
		a.io.recv(t, 64, confRecv{})
		ctlOK(t, a.ep, "shutdown")
		x.events(t, a.eq, "shutdown fid="+a.name, "shutdown fid="+b.name)
	}},
	{name: "tagged", caps: fi.TAGGED, cancels: true, run: func(t *testing.T, x *confEnv) {
		// A posted receive for another tag leaves the message alone; a
		// receive posted after it arrived, whose tag matches under its
		// ignore mask, takes it. One receive at a time, as the shell's
		// reads of data come.
		a, b, _ := x.confPair(t, confCfg{})
		other := b.io.recv(t, 64, confRecv{tagged: true, tag: 0x5000})
		msg := pattern(64, 16)
		a.io.send(t, msg, confSend{tagged: true, tag: 0x1234})
		wantCQE(t, "tagged send", a.io.poll(t, 1)[0], cqTSend, 64, 0)
		if !b.io.quiet(t, 50*time.Millisecond) {
			t.Error("a receive for tag 0x5000 completed with a message tagged 0x1234")
		}
		x.cancel(t, b, other)
		wantCQE(t, "unmatched tagged receive", b.io.poll(t, 1)[0], cqTRecv, 0, fi.ECANCELED)
		b.io.recv(t, 64, confRecv{tagged: true, tag: 0x1200, ignore: 0xff}) // matches 0x12xx
		c := b.io.poll(t, 1)[0]
		wantRecv(t, c, cqTRecv, msg)
		if c.Tag != 0x1234 {
			t.Errorf("tag %#x, want 0x1234", c.Tag)
		}
		transfer(t, a, b, pattern(20, 17)) // untagged again
	}},
	{name: "directed_recv", caps: fi.DIRECTED_RECV, cancels: true, run: func(t *testing.T, x *confEnv) {
		// A receive only from b itself (an address that never sends to
		// b here) leaves a's message alone; one only from a takes it.
		a, b, _ := x.confPair(t, confCfg{})
		self := x.insert(t, b, b)
		first := b.io.recv(t, 64, confRecv{from: &self})
		msg := pattern(64, 17)
		a.io.send(t, msg, confSend{})
		wantCQE(t, "send", a.io.poll(t, 1)[0], cqSend, 64, 0)
		if !b.io.quiet(t, 50*time.Millisecond) {
			t.Error("a receive from b's own address completed with a's message")
		}
		x.cancel(t, b, first)
		wantCQE(t, "receive from another address", b.io.poll(t, 1)[0], cqRecv, 0, fi.ECANCELED)
		b.io.recv(t, 64, confRecv{from: &b.peer})
		wantRecv(t, b.io.poll(t, 1)[0], cqRecv, msg)
		transfer(t, a, b, pattern(30, 18)) // from anyone again
	}},
	{name: "source", caps: fi.SOURCE, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{})
		b.io.recv(t, 32, confRecv{})
		a.io.send(t, pattern(32, 18), confSend{})
		a.io.poll(t, 1)
		if c := b.io.poll(t, 1)[0]; c.Src != b.peer {
			t.Errorf("receive from a: src %#x, want a's fi_addr in b's AV %d", c.Src, b.peer)
		}
	}},
	{name: "multi_recv", caps: fi.MULTI_RECV,
		run: func(t *testing.T, x *confEnv) {
			// One 1024-byte receive with FI_MULTI_RECV and min_multi_recv 64:
			// messages are packed into it, one after the other, while at least
			// 64 bytes would be left. 3 x 300 leave 124; 100 more would leave
			// 24, so that message takes the rest, and its completion, with
			// FI_MULTI_RECV, releases the buffer.
			a, b, _ := x.confPair(t, confCfg{})
			ctlOK(t, b.ep, "setopt min_multi_recv 64")
			b.io.recv(t, 1024, confRecv{multi: true})
			var msgs [][]byte
			for i, n := range []int{300, 300, 300, 100} {
				msgs = append(msgs, pattern(n, 30+i))
				a.io.send(t, msgs[i], confSend{})
			}
			for i, c := range a.io.poll(t, len(msgs)) {
				wantCQE(t, "send", c, cqSend, len(msgs[i]), 0)
			}
			off := uint64(0)
			for i, c := range b.io.poll(t, len(msgs)) {
				flags := cqRecv
				if i == len(msgs)-1 {
					flags |= fi.CQFlags(fi.MULTI_RECV)
				}
				wantRecv(t, c, flags, msgs[i])
				if c.Off != off {
					t.Errorf("message %d at offset %d of the buffer, want %d", i, c.Off, off)
				}
				off += uint64(len(msgs[i]))
			}
			transfer(t, a, b, pattern(50, 40)) // the released buffer takes no more
		}},
	{name: "rma_write", caps: fi.RMA | fi.WRITE | fi.REMOTE_WRITE, run: func(t *testing.T, x *confEnv) {
		// The target counts the write if it has FI_RMA_EVENT.
		a, b, _ := x.confPair(t, confCfg{a: confSide{cntr: "write"}, b: x.rmaEvents("remote_write")})
		data := pattern(3000, 19)
		a.io.fill(t, confRMAOff, data)
		a.io.rma(t, true, confRMAOff, 3000, 100, x.num(t, b.mr, "attr/key"), nil)
		wantCQE(t, "write", a.io.poll(t, 1)[0], cqWrite, 3000, 0)
		if b.cntr != "" {
			b.counts(t, 1, 0)
		}
		a.counts(t, 1, 0)
		if got := b.io.mem(t, 100, 3000); !bytes.Equal(got, data) {
			t.Error("the target region does not hold the written bytes")
		}
		if !b.io.quiet(t, 20*time.Millisecond) {
			t.Error("a write without remote CQ data made an entry at the target")
		}
	}},
	{name: "mr_cntr", caps: fi.RMA | fi.RMA_EVENT | fi.WRITE | fi.READ | fi.REMOTE_WRITE | fi.REMOTE_READ, run: func(t *testing.T, x *confEnv) {
		// fi_mr(3): "The fi_mr_bind function associates a memory region
		// with a counter"; with FI_REMOTE_WRITE it "Generates an event
		// whenever a remote RMA write or atomic operation modifies the
		// memory region", with FI_REMOTE_READ "whenever a remote RMA read
		// or atomic operation accesses the memory region". The region
		// is registered already: binding after reg counts from then on.
		// The counters first: removed after the region that holds them.
		writes := &confNode{name: "the region's writes", cntr: x.impl.obj(t, x, "cntr")}
		reads := &confNode{name: "the region's reads", cntr: x.impl.obj(t, x, "cntr")}
		a, b, _ := x.confPair(t, confCfg{})
		ctlOK(t, b.mr, "bind cntr "+filepath.Base(writes.cntr)+" remote_write")
		ctlOK(t, b.mr, "bind cntr "+filepath.Base(reads.cntr)+" FI_REMOTE_READ")
		err := ctl(filepath.Join(b.mr, "ctl"), "bind cntr "+filepath.Base(writes.cntr)+" remote_read")
		wantErrno(t, "a second counter for the region's remote reads", err, syscall.EINVAL)
		key := x.num(t, b.mr, "attr/key")
		data := pattern(1000, 23)
		a.io.fill(t, confRMAOff, data)
		a.io.rma(t, true, confRMAOff, 1000, 100, key, nil)
		wantCQE(t, "write", a.io.poll(t, 1)[0], cqWrite, 1000, 0)
		writes.counts(t, 1, 0)
		a.io.rma(t, false, confRMAOff, 1000, 100, key, nil)
		wantCQE(t, "read", a.io.poll(t, 1)[0], cqRead, 1000, 0)
		reads.counts(t, 1, 0)
		writes.counts(t, 1, 0) // the read counted as a read only
		if got := b.io.mem(t, 100, 1000); !bytes.Equal(got, data) {
			t.Error("the target region does not hold the written bytes")
		}
	}},
	{name: "atomic", caps: fi.ATOMIC | fi.WRITE | fi.READ | fi.REMOTE_WRITE | fi.REMOTE_READ, run: func(t *testing.T, x *confEnv) {
		// "The atomic operations ... perform the operation on the target
		// buffer" (fi_atomic(3)); the fetch and compare kinds return "the
		// initial value of the remote buffer" in the result. 64-bit
		// unsigned integers and FI_SUM, FI_CSWAP and FI_ATOMIC_WRITE: what
		// every provider with atomics takes (verbs FI_EP_MSG: the RC
		// atomics).
		a, b, _ := x.confPair(t, confCfg{})
		key, le := x.num(t, b.mr, "attr/key"), binary.LittleEndian.AppendUint64
		value := func(n *confNode, off int) uint64 { return binary.LittleEndian.Uint64(n.io.mem(t, off, 8)) }
		const op, cmp, res = confRMAOff, confRMAOff + 8, confRMAOff + 64
		b.io.fill(t, confRMAOff, le(nil, 1000))
		steps := []struct {
			kind, op         string
			operand, compare uint64
			flags            fi.CQFlags
			result, target   uint64 // the result (fetch, compare) and the target's value after
		}{
			{"fetch_atomic", "FI_SUM", 7, 0, fi.CQFlags(fi.ATOMIC | fi.READ), 1000, 1007},
			{"compare_atomic", "FI_CSWAP", 42, 1007, fi.CQFlags(fi.ATOMIC | fi.READ), 1007, 42},
			{"compare_atomic", "FI_CSWAP", 5, 1, fi.CQFlags(fi.ATOMIC | fi.READ), 42, 42}, // no match: no swap
			{"atomic", "FI_ATOMIC_WRITE", 99, 0, fi.CQFlags(fi.ATOMIC | fi.WRITE), 0, 99},
		}
		for _, s := range steps {
			a.io.fill(t, op, le(le(nil, s.operand), s.compare))
			a.io.fill(t, res, le(nil, 0xdead))
			a.io.atomic(t, s.kind, s.op, "FI_UINT64", op, cmp, res, 8, confRMAOff, key)
			what := s.kind + " " + s.op
			if c := a.io.poll(t, 1)[0]; c.Flags != s.flags || c.Err != 0 {
				t.Errorf("%s: completion %v, want flags %v", what, c, s.flags)
			}
			if s.kind != "atomic" {
				if got := value(a, res); got != s.result {
					t.Errorf("%s: result %d, want %d", what, got, s.result)
				}
			}
			if got := value(b, confRMAOff); got != s.target {
				t.Errorf("%s: target %d, want %d", what, got, s.target)
			}
		}
	}},
	{name: "rma_writedata", caps: fi.RMA | fi.WRITE | fi.REMOTE_WRITE, cqData: true, run: func(t *testing.T, x *confEnv) {
		// With FI_RX_CQ_DATA (verbs FI_EP_MSG) the remote CQ data takes
		// a posted receive, and its entry is that receive's. libfabric's
		// verbs adds FI_RMA to the flags, its tcp does not: either is
		// right. Either way it is a remote write, which the target's
		// counter bound for remote_write counts (fi_endpoint(3):
		// "FI_REMOTE_WRITE Increments the specified counter whenever an
		// RMA write or base atomic operation is initiated from a remote
		// endpoint that targets the given endpoint").
		a, b, _ := x.confPair(t, confCfg{b: x.rmaEvents("remote_write")})
		if x.rxCQData {
			b.io.recv(t, 8, confRecv{})
		}
		data, imm := pattern(500, 20), uint64(0xabcdef)
		a.io.fill(t, confRMAOff+8, data)
		a.io.rma(t, true, confRMAOff+8, 500, 4000, x.num(t, b.mr, "attr/key"), &imm)
		wantCQE(t, "writedata", a.io.poll(t, 1)[0], cqWrite, 500, 0)
		c := b.io.poll(t, 1)[0]
		c.Flags &^= fi.CQFlags(fi.RMA)
		wantCQE(t, "remote write", c, cqRemoteW, 500, 0)
		if c.Data != imm {
			t.Errorf("remote CQ data %#x, want %#x", c.Data, imm)
		}
		if got := b.io.mem(t, 4000, 500); !bytes.Equal(got, data) {
			t.Error("the target region does not hold the written bytes")
		}
		if b.cntr != "" {
			b.counts(t, 1, 0)
		}
	}},
	{name: "rma_read", caps: fi.RMA | fi.READ | fi.REMOTE_READ, run: func(t *testing.T, x *confEnv) {
		a, b, _ := x.confPair(t, confCfg{a: confSide{cntr: "read"}, b: x.rmaEvents("remote_read")})
		data := pattern(5000, 21)
		b.io.fill(t, 2000, data)
		a.io.rma(t, false, confRMAOff, 5000, 2000, x.num(t, b.mr, "attr/key"), nil)
		wantCQE(t, "read", a.io.poll(t, 1)[0], cqRead, 5000, 0)
		if got := a.io.mem(t, confRMAOff, 5000); !bytes.Equal(got, data) {
			t.Error("the local region does not hold the bytes read")
		}
		a.counts(t, 1, 0)
		if b.cntr != "" {
			b.counts(t, 1, 0)
		}
	}},
}

// rmaEvents is the target side of an RMA scenario: with a counter bound
// for class (remote_write, remote_read) when the endpoint has
// FI_RMA_EVENT, without one otherwise.
func (x *confEnv) rmaEvents(class string) confSide {
	if x.caps&fi.RMA_EVENT == 0 {
		return confSide{}
	}
	return confSide{cntr: class}
}

// num reads a numeric file of an object.
func (x *confEnv) num(t *testing.T, dir, name string) uint64 {
	t.Helper()
	return x.numField(t, fileText(t, dir, name))
}

// numField parses a number in decimal or 0x hex.
func (x *confEnv) numField(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	must(t, err)
	return v
}
