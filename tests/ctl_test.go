package tests

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

// ctlErrorTests are bad commands for every ctl verb, per kind, with the
// errno they must fail with. TestCtlErrors checks that every verb in the
// command table has at least one case here; TestErrEveryWritableFile runs
// them on objects called x (mr/x of 64 bytes, registered) beside a cq c.
var ctlErrorTests = []struct {
	kind core.Kind
	verb string
	cmd  string
	want syscall.Errno
}{
	{core.KindEP, "bind cq", "bind cq", syscall.EINVAL},
	{core.KindEP, "bind cq", "bind cq 99 send", syscall.ENOENT},
	{core.KindEP, "bind cq", "bind cq c bogus", syscall.EINVAL},
	{core.KindEP, "bind cntr", "bind cntr x", syscall.EINVAL},
	{core.KindEP, "bind cntr", "bind cntr 99 send", syscall.ENOENT},
	{core.KindEP, "bind cntr", "bind cntr x selective", syscall.EINVAL},
	{core.KindEP, "bind cntr", "bind cntr x recv,bogus", syscall.EINVAL},
	{core.KindEP, "bind eq", "bind eq", syscall.EINVAL},
	{core.KindEP, "bind eq", "bind eq nosuch", syscall.ENOENT},
	{core.KindEP, "bind av", "bind av x y", syscall.EINVAL},
	{core.KindEP, "bind av", "bind av 99", syscall.ENOENT},
	{core.KindEP, "bind srx", "bind srx", syscall.EINVAL},
	{core.KindEP, "bind srx", "bind srx 99", syscall.ENOENT},
	{core.KindEP, "bind stx", "bind stx x y", syscall.EINVAL},
	{core.KindEP, "bind stx", "bind stx 99", syscall.ENOENT},
	{core.KindEP, "context", "context x tx", syscall.EINVAL},
	{core.KindEP, "context", "context 99 tx 0", syscall.ENOENT},
	{core.KindEP, "context", "context x up 0", syscall.EINVAL},
	{core.KindEP, "context", "context x tx 0", syscall.EINVAL}, // not a context of itself
	{core.KindEP, "alias", "alias x", syscall.EINVAL},
	{core.KindEP, "alias", "alias 99 FI_TRANSMIT", syscall.ENOENT},
	{core.KindEP, "alias", "alias x FI_BOGUS", syscall.EINVAL},
	{core.KindEP, "enable", "enable now", syscall.EINVAL},
	{core.KindEP, "kick", "kick now", syscall.EINVAL},
	{core.KindEP, "connect", "connect", syscall.EINVAL},
	{core.KindEP, "connect", "connect not-an-address", syscall.EINVAL},
	{core.KindEP, "accept", "accept a b", syscall.EINVAL},
	{core.KindEP, "reject", "reject a b", syscall.EINVAL},
	{core.KindEP, "shutdown", "shutdown now", syscall.EINVAL},
	{core.KindEP, "cancel", "cancel", syscall.EINVAL},
	{core.KindEP, "cancel", "cancel zz", syscall.EINVAL},
	{core.KindEP, "setname", "setname", syscall.EINVAL},
	{core.KindEP, "setname", "setname not-an-address", syscall.EINVAL},
	{core.KindEP, "setname", "setname 192.0.2.77:1", syscall.EADDRNOTAVAIL}, // not an address of lo
	{core.KindEP, "dest", "dest", syscall.EINVAL},
	{core.KindEP, "dest", "dest x", syscall.EINVAL},
	{core.KindEP, "dest", "dest 0", syscall.EBADFD}, // an FI_EP_MSG endpoint
	{core.KindEP, "write", "write x 0 8 0", syscall.EINVAL},
	{core.KindEP, "write", "write x 0 8 0 1 2 3", syscall.EINVAL},
	{core.KindEP, "write", "write nosuch 0 8 0 1", syscall.ENOENT},
	{core.KindEP, "write", "write x 0 eight 0 1", syscall.EINVAL},
	{core.KindEP, "write", "write x 60 8 0 1", syscall.EINVAL},                 // past the end of mr/x's 64 bytes
	{core.KindEP, "write", "write x 0xffffffffffffffff 2 0 1", syscall.EINVAL}, // offset+len wraps
	{core.KindEP, "write", "write x 0 8 0 1 0xfeed", syscall.EBADFD},           // in bounds; the endpoint is not enabled
	{core.KindEP, "read", "read x 0 8 0", syscall.EINVAL},
	{core.KindEP, "read", "read 99 0 8 0 1", syscall.ENOENT},
	{core.KindEP, "read", "read x 0 8 0 1 2", syscall.EINVAL},
	{core.KindEP, "read", "read x 0 65 0 1", syscall.EINVAL},
	{core.KindEP, "read", "read x 56 8 0 1", syscall.EBADFD},
	{core.KindEP, "claim", "claim 1 x 0", syscall.EINVAL},
	{core.KindEP, "claim", "claim zz x 0 8", syscall.EINVAL},
	{core.KindEP, "claim", "claim 1 nosuch 0 8", syscall.ENOENT},
	{core.KindEP, "claim", "claim 1 x 0 8", syscall.EOPNOTSUPP}, // without FI_BUFFERED_RECV
	{core.KindEP, "discard", "discard", syscall.EINVAL},
	{core.KindEP, "discard", "discard zz", syscall.EINVAL},
	{core.KindEP, "discard", "discard 1", syscall.EOPNOTSUPP},
	{core.KindEP, "multi_recv", "multi_recv x 0", syscall.EINVAL},
	{core.KindEP, "multi_recv", "multi_recv nosuch 0 8", syscall.ENOENT},
	{core.KindEP, "multi_recv", "multi_recv x 0 eight", syscall.EINVAL},
	{core.KindEP, "multi_recv", "multi_recv x 0 8", syscall.EOPNOTSUPP}, // tcp FI_EP_MSG has no FI_MULTI_RECV
	{core.KindEP, "atomic", "atomic sum uint64 x 0 8 0", syscall.EINVAL},
	{core.KindEP, "atomic", "atomic bogus uint64 x 0 8 0 1", syscall.EINVAL},
	{core.KindEP, "atomic", "atomic sum uint64 nosuch 0 8 0 1", syscall.ENOENT},
	{core.KindEP, "atomic", "atomic sum uint64 x 0 8 0 1", syscall.EOPNOTSUPP}, // tcp FI_EP_MSG has no FI_ATOMIC
	{core.KindEP, "fetch_atomic", "fetch_atomic sum uint64 x 0 8 x 0 0", syscall.EINVAL},
	{core.KindEP, "fetch_atomic", "fetch_atomic sum uint64 x 0 8 99 0 0 1", syscall.ENOENT},
	{core.KindEP, "fetch_atomic", "fetch_atomic atomic_read uint64 - - 8 x 0 0 1", syscall.EOPNOTSUPP},
	{core.KindEP, "compare_atomic", "compare_atomic cswap uint64 x 0 8 8 x 16 0", syscall.EINVAL},
	{core.KindEP, "compare_atomic", "compare_atomic cswap float128 x 0 8 8 x 16 0 1", syscall.EINVAL},
	{core.KindEP, "compare_atomic", "compare_atomic cswap uint64 x 0 8 8 x 16 0 1", syscall.EOPNOTSUPP},
	{core.KindEP, "tag", "tag", syscall.EINVAL},
	{core.KindEP, "tag", "tag 1 2 3", syscall.EINVAL},
	{core.KindEP, "tag", "tag x", syscall.EINVAL},
	{core.KindEP, "tag", "tag off 1", syscall.EINVAL},
	{core.KindEP, "tag", "tag 0x1234 0xff", syscall.EOPNOTSUPP}, // FI_EP_MSG has no FI_TAGGED
	{core.KindEP, "src", "src", syscall.EINVAL},
	{core.KindEP, "src", "src 1 2", syscall.EINVAL},
	{core.KindEP, "src", "src anyone", syscall.EINVAL},
	{core.KindEP, "src", "src 0", syscall.EOPNOTSUPP}, // nor FI_DIRECTED_RECV
	{core.KindEP, "cqdata", "cqdata", syscall.EINVAL},
	{core.KindEP, "cqdata", "cqdata 1 2", syscall.EINVAL},
	{core.KindEP, "cqdata", "cqdata -1", syscall.EINVAL},
	{core.KindEP, "rxbuf", "rxbuf", syscall.EINVAL},
	{core.KindEP, "rxbuf", "rxbuf 0", syscall.EINVAL},
	{core.KindEP, "rxbuf", "rxbuf ten", syscall.EINVAL},
	{core.KindEP, "rxbuf", "rxbuf 0x4000001", syscall.EINVAL}, // above 64 MiB
	{core.KindEP, "setopt", "setopt min_multi_recv", syscall.EINVAL},
	{core.KindEP, "setopt", "setopt min_multi_recv x", syscall.EINVAL},
	{core.KindEP, "", "frobnicate", syscall.EINVAL},
	{core.KindEP, "", "bind", syscall.EINVAL},
	{core.KindEP, "", "bind mr x", syscall.EINVAL},
	{core.KindEP, "", "bind 'unterminated", syscall.EINVAL},
	{core.KindPEP, "bind eq", "bind eq", syscall.EINVAL},
	{core.KindPEP, "bind eq", "bind eq 99", syscall.ENOENT},
	{core.KindPEP, "listen", "listen a b", syscall.EINVAL},
	{core.KindPEP, "listen", "listen 300.1.1.1:0", syscall.EINVAL},
	{core.KindSRX, "enable", "enable now", syscall.EINVAL},
	{core.KindSRX, "kick", "kick now", syscall.EINVAL},
	{core.KindSRX, "cancel", "cancel", syscall.EINVAL},
	{core.KindSRX, "cancel", "cancel 7", syscall.ENOENT}, // it holds no receive
	{core.KindCQ, "signal", "signal now", syscall.EINVAL},
	{core.KindAV, "insert", "insert", syscall.EINVAL},
	{core.KindAV, "insert", "insert nonsense", syscall.EINVAL},
	{core.KindAV, "insert_id", "insert_id 7", syscall.EINVAL},
	{core.KindAV, "insert_id", "insert_id x 127.0.0.1:7000", syscall.EINVAL},
	{core.KindAV, "insert_id", "insert_id 7 nonsense", syscall.EINVAL},
	{core.KindAV, "remove", "remove", syscall.EINVAL},
	{core.KindAV, "remove", "remove 99", syscall.ENOENT},
	{core.KindMR, "reg", "reg now", syscall.EINVAL},
	{core.KindMR, "bind eq", "bind eq", syscall.EINVAL},
	{core.KindMR, "bind eq", "bind eq 99", syscall.ENOENT},
	{core.KindMR, "bind cntr", "bind cntr x", syscall.EINVAL},
	{core.KindMR, "bind cntr", "bind cntr 99 remote_write", syscall.ENOENT},
	{core.KindMR, "bind cntr", "bind cntr x send", syscall.EINVAL},
	{core.KindMR, "window", "window x", syscall.EINVAL},
	{core.KindMR, "window", "window 99 0 4096", syscall.ENOENT},
	{core.KindMR, "window", "window x 0 4096", syscall.EINVAL}, // onto itself
	{core.KindCntr, "add", "add", syscall.EINVAL},
	{core.KindCntr, "add", "add x", syscall.EINVAL},
	{core.KindCntr, "set", "set 1 2", syscall.EINVAL},
	{core.KindCntr, "adderr", "adderr", syscall.EINVAL},
	{core.KindCntr, "seterr", "seterr -1", syscall.EINVAL},
	{core.KindCntr, "wait", "wait", syscall.EINVAL},
	{core.KindCntr, "wait", "wait 1 soon", syscall.EINVAL},
}

func TestCtlErrors(t *testing.T) {
	// Every verb of the command table has a case.
	covered := map[string]bool{}
	for _, tt := range ctlErrorTests {
		covered[tt.kind.String()+" "+tt.verb] = true
	}
	for k := core.Kind(0); k < core.NumKinds; k++ {
		for _, u := range core.Usage(k) {
			verb := strings.Join(strings.FieldsFunc(u, func(r rune) bool { return r == ' ' })[:verbWords(u)], " ")
			if !covered[k.String()+" "+verb] {
				t.Errorf("no error case for %s verb %q", k, verb)
			}
		}
	}

	// TestErrEveryWritableFile runs the cases.
	d := mount(t)
	dom := []string{"tcp", "lo"}
	for _, k := range []string{"ep", "cq", "av", "cntr"} {
		if err := os.Mkdir(d.path(append(dom, k, "x")...), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(d.path(append(dom, "cq", "c")...), 0o700); err != nil {
		t.Fatal(err)
	}

	// Bound objects refuse rmdir with EBUSY, and can go once unbound.
	if err := os.Mkdir(d.path(append(dom, "eq", "e")...), 0o700); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(t, "bind cq c send", append(dom, "ep", "x", "ctl")...)
	d.mustCtl(t, "bind eq e", append(dom, "ep", "x", "ctl")...)
	d.mustCtl(t, "bind av x", append(dom, "ep", "x", "ctl")...)
	d.mustCtl(t, "bind cntr x send,recv", append(dom, "ep", "x", "ctl")...)
	if err := ctl(d.path(append(dom, "ep", "x", "ctl")...), "bind cntr x recv"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a second counter binding for recv = %v, want EINVAL", err)
	}
	for _, p := range [][]string{{"cq", "c"}, {"eq", "e"}, {"av", "x"}, {"cntr", "x"}} {
		err := os.Remove(d.path(append(dom, p...)...))
		if !errors.Is(err, syscall.EBUSY) {
			t.Errorf("rmdir bound %s = %v, want EBUSY", p, err)
		}
	}
	for link, want := range map[string]string{"txcq": "../../cq/c", "cntr_send": "../../cntr/x", "cntr_recv": "../../cntr/x"} {
		if target, err := os.Readlink(d.path(append(dom, "ep", "x", link)...)); err != nil || target != want {
			t.Errorf("ep/x/%s -> %q, %v; want %s", link, target, err, want)
		}
	}
	if err := os.Remove(d.path(append(dom, "ep", "x")...)); err != nil {
		t.Fatalf("rmdir ep/x: %v", err)
	}
	for _, p := range [][]string{{"cq", "c"}, {"eq", "e"}, {"av", "x"}} {
		if err := os.Remove(d.path(append(dom, p...)...)); err != nil {
			t.Errorf("rmdir %s after unbinding: %v", p, err)
		}
	}

	// The daemon keeps serving.
	if v := d.read(t, "abi_version"); strings.TrimSpace(v) != "1" {
		t.Errorf("abi_version = %q", v)
	}
	d.mustCtl(t, "add 5", append(dom, "cntr", "x", "ctl")...)
	if v := strings.TrimSpace(d.read(t, append(dom, "cntr", "x", "value")...)); v != "5" {
		t.Errorf("cntr value after add 5 = %q", v)
	}
}

// verbWords is how many words of a usage line are the verb: the words
// before the first argument placeholder (upper case or [...]).
func verbWords(usage string) int {
	n := 0
	for _, w := range strings.Fields(usage) {
		if strings.ToUpper(w) == w || strings.HasPrefix(w, "[") {
			break
		}
		n++
	}
	return n
}

// TestCtlDataVerbs checks the state rules of the data file's verbs tag,
// src, cqdata and rxbuf on an FI_EP_RDM endpoint, which has FI_TAGGED and
// FI_DIRECTED_RECV, and that status shows what is set; conformance_test
// checks what they do to messages.
func TestCtlDataVerbs(t *testing.T) {
	d := mount(t)
	ep := func(f ...string) []string { return append([]string{"tcp", "lo", "ep", "r"}, f...) }
	must(t, os.Mkdir(d.path(ep()...), 0o700))
	must(t, os.Mkdir(d.path("tcp", "lo", "av", "v"), 0o700))
	d.mustCtl(t, "FI_EP_RDM", ep("attr", "type")...)
	fails := func(cmd string, want syscall.Errno) {
		t.Helper()
		if err := ctl(d.path(ep("ctl")...), cmd); !errors.Is(err, want) {
			t.Errorf("%q = %v, want %v", cmd, err, want)
		} else if msg := d.read(t, ep("err")...); !strings.HasPrefix(msg, cmd+": ") {
			t.Errorf("%q: err file %q does not echo the command", cmd, msg)
		}
	}
	fails("src 0", syscall.EBADFD) // no av
	d.mustCtl(t, "bind av v", ep("ctl")...)
	fails("src 0", syscall.EINVAL) // no entry 0
	d.mustCtl(t, "insert 127.0.0.1:9", "tcp", "lo", "av", "v", "ctl")

	params := []string{"tag=", "src=", "cqdata=", "rxbuf="}
	for _, cmd := range []string{"tag 0x1234 0xff", "src 0", "cqdata 0xfeed", "rxbuf 10"} {
		d.mustCtl(t, cmd, ep("ctl")...)
	}
	if st := strings.TrimSpace(d.read(t, ep("status")...)); !strings.HasSuffix(st, " tag=0x1234/0xff src=fi_addr:0 cqdata=0xfeed rxbuf=10") {
		t.Errorf("status %q does not end with the data file's parameters", st)
	}
	for _, cmd := range []string{"tag off", "src ANY", "cqdata off", "rxbuf off"} {
		d.mustCtl(t, cmd, ep("ctl")...)
	}
	for _, p := range params {
		if st := d.read(t, ep("status")...); strings.Contains(st, p) {
			t.Errorf("status %q shows %s after it was turned off", st, p)
		}
	}
	d.mustCtl(t, "tag 7", ep("ctl")...)
	if st := d.read(t, ep("status")...); !strings.Contains(st, " tag=0x7/0x0") {
		t.Errorf("status %q lacks tag=0x7/0x0", st)
	}
	// attr/type replaces the endpoint's fi_info, and with it these.
	d.mustCtl(t, "FI_EP_MSG", ep("attr", "type")...)
	if st := d.read(t, ep("status")...); strings.Contains(st, "tag=") {
		t.Errorf("status %q of an FI_EP_MSG endpoint shows a tag", st)
	}
	fails("tag 7", syscall.EOPNOTSUPP)
	must(t, os.Remove(d.path(ep()...)))
	must(t, os.Remove(d.path("tcp", "lo", "av", "v")))
}
