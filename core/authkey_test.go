package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// keySetups are the domains authorization keys are tested on: tcp and
// verbs, FI_EP_MSG and FI_EP_RDM (rxm over each).
var keySetups = []struct {
	name string
	rdm  bool
	dom  func(t *testing.T) *core.Domain
}{
	{"tcp MSG", false, func(t *testing.T) *core.Domain { return lo(t) }},
	{"verbs MSG", false, verbsDomain},
	{"tcp RDM", true, func(t *testing.T) *core.Domain {
		p, err := tcp.New(tcp.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, d := fabricOf(t, rxm.Wrap(p))
		return d
	}},
	{"verbs RDM", true, func(t *testing.T) *core.Domain { return verbsDomainOf(t, rxm.Wrap(verbsProvider(t))) }},
}

// keyedMSG connects endpoint a with key ka to a passive endpoint with key
// kb ("" for none) and sends "ping" from a to the accepted endpoint b. It
// returns a (and b when they connected) and the connect's outcome: nil, or
// the error event a got. The passive endpoint must never see a request
// with another key.
func keyedMSG(t *testing.T, d *core.Domain, ka, kb string) (a, b *core.Object, err error) {
	t.Helper()
	eq := create(t, d, core.KindEQ, "e").Impl.(*core.EQ)
	create(t, d, core.KindCQ, "c")
	pep := create(t, d, core.KindPEP, "l")
	setAttr(t, pep, "auth_key", kb)
	run(t, pep, "bind eq e")
	run(t, pep, "listen 127.0.0.1:0")
	addr, lerr := pep.Impl.(*core.PEP).Name()
	if lerr != nil {
		t.Fatal(lerr)
	}
	a = create(t, d, core.KindEP, "a")
	setAttr(t, a, "auth_key", ka)
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable", "connect " + addr.String()} {
		run(t, a, c)
	}
	if ka != kb {
		ev := events(t, eq, 1)
		if !strings.HasPrefix(ev, "error fid=ep/a err=FI_ECONNREFUSED") {
			t.Fatalf("connect with key %q to a listener with key %q: EQ has %q, want FI_ECONNREFUSED", ka, kb, ev)
		}
		// The listener rejected the request itself: none reached the
		// application.
		time.Sleep(50 * time.Millisecond)
		if es, _ := eq.Read(context.Background(), 10, false); len(es) != 0 {
			t.Errorf("after a refused key, the EQ has %v", es)
		}
		return a, nil, errors.New(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err = pep.Impl.(*core.PEP).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "accept"} {
		run(t, b, c)
	}
	events(t, eq, 3) // connreq, connected twice
	if got := keyAttr(t, b, "auth_key"); got != kb {
		t.Errorf("the accepted endpoint's auth_key is %q, want its passive endpoint's %q", got, kb)
	}
	ping(t, a, b)
	return a, b, nil
}

// keyedRDM makes FI_EP_RDM endpoints a (key ka) and b (key kb) that know
// each other (a is fi_addr 0, b 1), and sends "ping" from a to b: the
// send's error, or nil when b got it.
func keyedRDM(t *testing.T, d *core.Domain, ka, kb string) (a, b *core.Object, err error) {
	t.Helper()
	av := create(t, d, core.KindAV, "v").Impl.(*core.AV)
	create(t, d, core.KindCQ, "c")
	var addrs []fi.Addr
	var eps []*core.Object
	for i, k := range []string{ka, kb} {
		ep := create(t, d, core.KindEP, string(rune('a'+i)))
		setAttr(t, ep, "type", "FI_EP_RDM")
		setAttr(t, ep, "auth_key", k)
		for _, c := range []string{"bind av v", "bind cq c send,recv", "enable"} {
			run(t, ep, c)
		}
		n, err := ep.Impl.(*core.EP).Name()
		if err != nil {
			t.Fatal(err)
		}
		addrs, eps = append(addrs, n), append(eps, ep)
	}
	if _, err := av.Insert(addrs); err != nil {
		t.Fatal(err)
	}
	a, b = eps[0], eps[1]
	run(t, a, "dest 1")
	run(t, b, "dest 0")
	if ka != kb {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return a, b, a.Impl.(*core.EP).WriteData(ctx, []byte("ping"))
	}
	ping(t, a, b)
	return a, b, nil
}

// keyAttr is an attribute's value without its newline.
func keyAttr(t *testing.T, o *core.Object, name string) string {
	return strings.TrimSpace(attr(t, o, name))
}

// ping sends "ping" from a through its data file and reads it at b.
func ping(t *testing.T, a, b *core.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The receive first: verbs places a message only in a posted buffer.
	buf := make([]byte, 16)
	got := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = b.Impl.(*core.EP).ReadData(ctx, buf, 0)
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := a.Impl.(*core.EP).WriteData(ctx, []byte("ping")); err != nil {
		t.Fatalf("send with the same key: %v", err)
	}
	if err := <-got; err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("receive with the same key: %q, %v", buf[:n], err)
	}
}

// TestAuthKeys: fi_endpoint(3) auth_key, "An authorization key is used to
// limit communication between endpoints. Only peer endpoints that are
// programmed to use the same authorization key may communicate." On every
// provider and type: the same key talks; different keys, and a key
// against none (either way), do not.
func TestAuthKeys(t *testing.T) {
	for _, s := range keySetups {
		t.Run(s.name, func(t *testing.T) {
			talk := keyedMSG
			if s.rdm {
				talk = keyedRDM
			}
			for _, c := range []struct{ ka, kb string }{
				{"job-1", "job-1"}, {"hex:00ff00ff", "hex:00ff00ff"}, {"", ""},
				{"job-1", "job-2"}, {"job-1", ""}, {"", "job-1"}, {"job-1", "job-12"},
			} {
				_, _, err := talk(t, s.dom(t), c.ka, c.kb)
				switch {
				case c.ka == c.kb && err != nil:
					t.Errorf("keys %q and %q: %v, want them to talk", c.ka, c.kb, err)
				case c.ka != c.kb && err == nil:
					t.Errorf("keys %q and %q talked", c.ka, c.kb)
				case c.ka != c.kb && s.rdm && !errors.Is(err, fi.ECONNREFUSED):
					t.Errorf("keys %q and %q: the send failed with %v, want FI_ECONNREFUSED", c.ka, c.kb, err)
				}
			}
		})
	}
}

// TestAuthKeyRegion: fi_mr(3) auth_key, "Only peer endpoints that are
// programmed to use the same authorization key may access the memory
// region." A region with the endpoints' key is read; one with another
// key is not; one without a key takes any of its owner's endpoints.
func TestAuthKeyRegion(t *testing.T) {
	for _, s := range keySetups {
		t.Run(s.name, func(t *testing.T) {
			for _, c := range []struct {
				mrKey string
				ok    bool
			}{{"job-1", true}, {"", true}, {"job-2", false}} {
				d := s.dom(t)
				talk := keyedMSG
				if s.rdm {
					talk = keyedRDM
				}
				a, _, err := talk(t, d, "job-1", "job-1")
				if err != nil {
					t.Fatal(err)
				}
				x, err := regMR(t, d, "x", 64, "", "")
				if err != nil {
					t.Fatal(err)
				}
				y, err := d.Create(core.KindMR, "y", 0)
				if err != nil {
					t.Fatal(err)
				}
				setAttr(t, y, "len", "64")
				setAttr(t, y, "access", "FI_REMOTE_READ")
				setAttr(t, y, "auth_key", c.mrKey)
				run(t, y, "reg")
				if got := keyAttr(t, y, "auth_key_size"); got != fmt.Sprint(len(c.mrKey)) {
					t.Errorf("auth_key_size %s, want %d", got, len(c.mrKey))
				}
				reg, _ := y.Impl.(*core.MR).Region()
				copy(reg.Mem[8:], "secret!!")
				xr, _ := x.Impl.(*core.MR).Region()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = a.Ctl(ctx, 0, fmt.Sprintf("read x 16 8 8 %#x", y.Impl.(*core.MR).Key()))
				cancel()
				got := string(xr.Mem[16:24])
				if c.ok && (err != nil || got != "secret!!") {
					t.Errorf("read of a region with key %q by endpoints with key job-1: %v, %q", c.mrKey, err, got)
				}
				if !c.ok && (err == nil || got == "secret!!") {
					t.Errorf("read of a region with key %q by endpoints with key job-1: %v, %q; want an error", c.mrKey, err, got)
				}
			}
		})
	}
}

// TestAuthKeyDefaults: fi_domain(3) auth_key, "The default authorization
// key to associate with endpoint and memory registrations created within
// the domain"; fi_endpoint(3), "The domain authorization key will be used
// if auth_key_size is set to 0." Each user's default is their own.
func TestAuthKeyDefaults(t *testing.T) {
	d := lo(t)
	if err := d.SetAuthKey(1000, "job-7"); err != nil {
		t.Fatal(err)
	}
	if got, other := d.AuthKeyText(1000), d.AuthKeyText(1001); got != "job-7" || other != "" {
		t.Errorf("uid 1000's default key %q, uid 1001's %q; want job-7 and none", got, other)
	}
	mk := func(k core.Kind, name string, uid uint32) *core.Object {
		o, err := d.Create(k, name, uid)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	mk(core.KindEQ, "e", 1000)
	pep := mk(core.KindPEP, "l", 1000)
	run(t, pep, "bind eq e")
	if err := pep.Ctl(context.Background(), 1000, "listen 127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if got := keyAttr(t, pep, "auth_key"); got != "job-7" {
		t.Errorf("listening passive endpoint's auth_key %q, want the domain's job-7", got)
	}
	mk(core.KindEQ, "f", 1000)
	mk(core.KindCQ, "c", 1000)
	a := mk(core.KindEP, "a", 1000)
	setAttr(t, a, "auth_key", "mine")
	b := mk(core.KindEP, "b", 1000)
	for _, o := range []*core.Object{a, b} {
		for _, c := range []string{"bind eq f", "bind cq c send,recv", "enable"} {
			run(t, o, c)
		}
	}
	if ka, kb := keyAttr(t, a, "auth_key"), keyAttr(t, b, "auth_key"); ka != "mine" || kb != "job-7" {
		t.Errorf("enabled endpoints' keys %q (set) and %q (none set), want mine and job-7", ka, kb)
	}
	if got := keyAttr(t, b, "auth_key_size"); got != "5" {
		t.Errorf("auth_key_size %s, want 5", got)
	}
	m, err := regMRAs(t, d, 1000, "m", 64, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keyAttr(t, m, "auth_key"); got != "job-7" {
		t.Errorf("registered region's auth_key %q, want the domain's job-7", got)
	}
	// Root's objects take root's default: none.
	r := create(t, d, core.KindEP, "r")
	run(t, r, "bind eq e")
	if got := keyAttr(t, r, "auth_key"); got != "" {
		t.Errorf("root's endpoint has key %q", got)
	}
	if err := d.SetAuthKey(1000, ""); err != nil || d.AuthKeyText(1000) != "" {
		t.Errorf("clearing the default: %v, left %q", err, d.AuthKeyText(1000))
	}
}

// TestAuthKeyLimits: keys of at most 64 bytes; a key only before enable;
// an endpoint made from a request keeps its passive endpoint's; a datagram
// endpoint takes none.
func TestAuthKeyLimits(t *testing.T) {
	d := lo(t)
	ep := create(t, d, core.KindEP, "a")
	set := trySet
	long := strings.Repeat("k", fi.MaxAuthKeySize+1)
	wantCode(t, "a 65-byte endpoint key", set(ep, "auth_key", long), fi.EINVAL)
	wantCode(t, "a 65-byte domain key", d.SetAuthKey(0, long), fi.EINVAL)
	wantCode(t, "a bad hex key", set(ep, "auth_key", "hex:0g"), fi.EINVAL)
	if err := set(ep, "auth_key", strings.Repeat("k", fi.MaxAuthKeySize)); err != nil {
		t.Errorf("a 64-byte key: %v", err)
	}
	if got := keyAttr(t, ep, "auth_key_size"); got != "64" {
		t.Errorf("auth_key_size %s, want 64", got)
	}
	m := create(t, d, core.KindMR, "m")
	wantCode(t, "a 65-byte region key", set(m, "auth_key", long), fi.EINVAL)

	a, b, err := keyedMSG(t, lo(t), "job-1", "job-1")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a key after enable", set(a, "auth_key", "job-2"), fi.EOPBADSTATE)
	wantCode(t, "a key on a request's endpoint", set(b, "auth_key", "job-2"), fi.EINVAL)

	// An fi_info block keeps the key (it carries its size, not its
	// bytes).
	setAttr(t, ep, "auth_key", "job-3")
	if err := ep.Impl.(*core.EP).SetInfo("fi_info:\n    caps: [ FI_MSG ]\n"); err != nil {
		t.Fatal(err)
	}
	if got := keyAttr(t, ep, "auth_key"); got != "job-3" {
		t.Errorf("after an info block, auth_key %q, want job-3", got)
	}
}

// FuzzAuthKey writes arbitrary text to the attr/auth_key of an endpoint, a
// passive endpoint and a region, and as a user's domain default: a write
// is taken (a key of at most 64 bytes, which reads back as written) or
// refused with FI_EINVAL and a sentence; nothing panics.
func FuzzAuthKey(f *testing.F) {
	for _, s := range []string{"job-1", "hex:00ff", "hex:0g", "hex:", "", " ", strings.Repeat("k", 65), "hex:" + strings.Repeat("ab", 64), "a\x00b", "\n"} {
		f.Add(s)
	}
	d := lo(f)
	var objs []*core.Object
	for _, k := range []core.Kind{core.KindEP, core.KindPEP, core.KindMR} {
		o, err := d.Create(k, "fuzz", 0)
		if err != nil {
			f.Fatal(err)
		}
		objs = append(objs, o)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(what string, err error, read func() string) {
			if err != nil {
				if !errors.Is(err, fi.EINVAL) || err.Error() == "" {
					t.Fatalf("%s %q: %v, want FI_EINVAL with a sentence", what, s, err)
				}
				return
			}
			v := read()
			k, perr := core.ParseData(v)
			if v != "" && (perr != nil || len(k) > fi.MaxAuthKeySize) {
				t.Fatalf("%s %q reads back %q (%v)", what, s, v, perr)
			}
		}
		for _, o := range objs {
			check(o.String(), trySet(o, "auth_key", s), func() string { return strings.TrimSpace(attr(t, o, "auth_key")) })
		}
		check("domain", d.SetAuthKey(7, s), func() string { return d.AuthKeyText(7) })
	})
}

// TestAuthKeyDatagram: a datagram endpoint has no connection to carry a
// key: fi_getinfo offers none for FI_EP_DGRAM, its attr/auth_key takes
// none, and with a domain key (which would leave it unprotected) its
// enable fails.
func TestAuthKeyDatagram(t *testing.T) {
	f, err := core.New(verbsProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, ok := f.Domain("verbs", "rxe_127_0_0_1-dgram")
	if !ok {
		t.Fatal("no verbs/rxe_127_0_0_1-dgram domain")
	}
	ep := create(t, d, core.KindEP, "u")
	wantCode(t, "a key on a datagram endpoint", trySet(ep, "auth_key", "job-1"), fi.EINVAL)
	if err := d.SetAuthKey(0, "job-1"); err != nil {
		t.Fatal(err)
	}
	create(t, d, core.KindAV, "v")
	create(t, d, core.KindCQ, "c")
	run(t, ep, "bind av v")
	run(t, ep, "bind cq c send,recv")
	wantCode(t, "enable of a datagram endpoint under a domain key", ep.Ctl(context.Background(), 0, "enable"), fi.EINVAL)
}
