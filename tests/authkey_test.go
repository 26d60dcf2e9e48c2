package tests

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestAuthKeyShell: authorization keys through the tree. fi_domain(3):
// "The default authorization key to associate with endpoint and memory
// registrations created within the domain" is each user's own in the
// domain's attr/auth_key, which no other user sees; fi_endpoint(3): "Only
// peer endpoints that are programmed to use the same authorization key may
// communicate": endpoints that took the domain's key talk through their
// rings, and FI_EP_RDM endpoints with different keys do not (the send
// completes with FI_ECONNREFUSED). A key longer than 64 bytes is EINVAL,
// and err says why.
func TestAuthKeyShell(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	d := mount(t)
	openUp(t, filepath.Dir(d.mnt))
	D := d.path("tcp", "lo")
	if err := os.WriteFile(filepath.Join(D, "attr", "auth_key"), []byte("job-1\n"), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(D, "attr", "auth_key")); err != nil || string(b) != "job-1\n" {
		t.Errorf("root's domain auth_key reads %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(D, "attr.json")); !strings.Contains(string(b), `"auth_key":"job-1"`) {
		t.Errorf("root's attr.json: %s", b)
	}
	if err := os.Mkdir(filepath.Join(D, "ep", "keyed"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(D, "ep", "keyed", "attr", "auth_key"), []byte("hex:00ff"), 0); err != nil {
		t.Fatal(err)
	}
	// Another user sees no key of root's: the domain's file shows its
	// own (none, then what it writes), root's objects' not at all.
	out, err := asUser(nobody, `
set -u
test -z "$(cat $D/attr/auth_key)" || exit 10
grep -q job-1 $D/attr.json && exit 11
cat $D/ep/keyed/attr/auth_key 2>/dev/null && exit 12
echo mine > $D/attr/auth_key || exit 13
cat $D/attr/auth_key $D/attr/auth_key_size
exit 0`, "D="+D)
	if err != nil || out != "mine\n4\n" {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(D, "attr", "auth_key")); string(b) != "job-1\n" {
		t.Errorf("after nobody's write, root's key reads %q", b)
	}
	long := strings.Repeat("k", 65)
	if err := ctl(filepath.Join(D, "ep", "keyed", "attr", "auth_key"), long); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a 65-byte key: %v, want EINVAL", err)
	}
	if b, _ := os.ReadFile(filepath.Join(D, "ep", "keyed", "err")); !strings.Contains(string(b), "at most 64") || strings.Contains(string(b), "kkk") {
		t.Errorf("err after a 65-byte key: %q, want the reason without the key", b)
	}

	// Rings: a connected pair that took the domain's key talks.
	dom := d.tree(t).Domain("tcp", "lo")
	a, b, cq := connectedPair(t, dom)
	for _, e := range []*fabricfs.EP{a, b} {
		if k, _ := e.Attr("auth_key"); strings.TrimSpace(k) != "job-1" {
			t.Errorf("%s's auth_key %q, want the domain's job-1", e.Name(), k)
		}
	}
	mr, err := dom.NewMR(4096, "FI_SEND,FI_RECV")
	must(t, err)
	defer mr.Close()
	must(t, b.PostRecv(mr, 1024, 64, 1, 0))
	must(t, a.PostSend(mr, 0, 64, 2, 0))
	if cs := pollN(t, cq, 2); cs[0].Err != 0 || cs[1].Err != 0 {
		t.Errorf("send and receive with the same key: %+v", cs)
	}

	// FI_EP_RDM with different keys: the send fails.
	av, err := dom.NewAV()
	must(t, err)
	defer av.Close()
	x, err := dom.NewRDM(av, cq, "auth_key", "job-2")
	must(t, err)
	defer x.Close()
	y, err := dom.NewRDM(av, cq, "auth_key", "job-3")
	must(t, err)
	defer y.Close()
	yAddr, err := y.Local()
	must(t, err)
	to, err := av.Insert(yAddr)
	must(t, err)
	must(t, y.Post(mr, ring.WR{Op: ring.OpRecv, Context: 3, Len: 64}))
	must(t, x.Post(mr, ring.WR{Op: ring.OpSend, Context: 4, Len: 8, Addr: to}))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range cq.Poll(4) {
			if c.Context == 3 {
				t.Fatalf("a message crossed keys: %+v", c)
			}
			if c.Context == 4 {
				if c.Err != -int32(syscall.ECONNREFUSED) {
					t.Errorf("send to a peer with another key: %+v, want -FI_ECONNREFUSED", c)
				}
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no completion of the send to a peer with another key")
}
