package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryLimitInTree: a user's shared memory counts against
// -limit-memory; /limits shows the caller's holding and limits and
// /users/UID root the user's; a region over the limit fails with ENOSPC
// and err names the user, the resource and the limit; a huge bad write
// leaves a bounded err.
func TestMemoryLimitInTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	d := mountWith(t, "-limit-memory", "1048576")
	openUp(t, filepath.Dir(d.mnt))
	D := d.path("tcp", "lo")
	out, err := asUser(nobody, `
set -u
cat $M/limits
mkdir $D/mr/small $D/mr/big || exit 10
echo 524288 > $D/mr/small/attr/len && echo reg > $D/mr/small/ctl || exit 11
echo 1048576 > $D/mr/big/attr/len || exit 12
echo reg > $D/mr/big/ctl 2>/dev/null && exit 13
echo "reg: $(cat $D/mr/big/err)"
head -c 3000000 /dev/zero | tr '\0' x > $D/mr/big/ctl 2>/dev/null && exit 14
echo "bad: $(wc -c < $D/mr/big/err)"
cat $M/limits
exit 0`, "D="+D, "M="+d.mnt)
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{
		"objects 0 4096\nmemory_bytes 0 1048576\nconnections 0 4096\n",
		"reg: reg: 1048576 bytes of shared memory for mr big mr: uid 65534 holds 524288 of memory_bytes, the limit is 1048576\n",
		"objects 2 4096\nmemory_bytes 524288 1048576\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("as nobody, output lacks %q:\n%s", want, out)
		}
	}
	var n int
	if i := strings.Index(out, "bad: "); i < 0 {
		t.Errorf("no err size after the 3 MB bad write:\n%s", out)
	} else if fmt.Sscan(out[i+5:], &n); n < 256 || n > 1025 {
		t.Errorf("after a 3 MB bad write err has %d bytes, want the echo of 256 and at most 1024 with the newline", n)
	}
	if got := d.read(t, "users", "65534"); got != "objects 2 4096\nmemory_bytes 524288 1048576\nconnections 0 4096\n" {
		t.Errorf("/users/65534 = %q", got)
	}
	if got := d.read(t, "limits"); !strings.Contains(got, "memory_bytes 0 0\n") {
		t.Errorf("root's /limits = %q, want no limit", got)
	}
}

// TestListenRules: through the tree, a user without CAP_NET_BIND_SERVICE
// cannot make the root daemon listen on a privileged port, in tcp or verbs
// (EACCES, and err says why); the same user with the capability (ambient,
// through setpriv) can; an address of another interface is refused in lo
// (EADDRNOTAVAIL) and 0.0.0.0 in lo listens on lo's 127.0.0.1 only.
func TestListenRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	needCmd(t, "setpriv")
	d := mount(t)
	openUp(t, filepath.Dir(d.mnt))
	script := `
set -u
for dom in tcp/lo verbs/` + verbsDevice + `; do
	D=$M/$dom
	mkdir $D/eq/e$$ $D/pep/p$$ || exit 10
	echo bind eq e$$ > $D/pep/p$$/ctl || exit 11
	echo listen $ADDR > $D/pep/p$$/ctl 2>/dev/null && echo "$dom ok $(cat $D/pep/p$$/local)" || echo "$dom refused: $(cat $D/pep/p$$/err)"
	rmdir $D/pep/p$$ $D/eq/e$$
done`
	port := 1023
	for ; port > 900; port-- { // a port free on lo, for tcp
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			l.Close()
			break
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out, err := asUser(nobody, script, "M="+d.mnt, "ADDR="+addr)
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, dom := range []string{"tcp/lo", "verbs/" + verbsDevice} {
		want := fmt.Sprintf("%s refused: listen %s: port %d is privileged (below 1024): uid 65534 lacks CAP_NET_BIND_SERVICE\n", dom, addr, port)
		if !strings.Contains(out, want) {
			t.Errorf("as nobody, want %q in:\n%s", want, out)
		}
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "M="+d.mnt, "ADDR="+addr)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody with CAP_NET_BIND_SERVICE: %v\n%s", err, b)
	}
	for _, dom := range []string{"tcp/lo", "verbs/" + verbsDevice} {
		if want := fmt.Sprintf("%s ok fi_sockaddr_in://%s\n", dom, addr); !strings.Contains(string(b), want) {
			t.Errorf("as nobody with CAP_NET_BIND_SERVICE, want %q in:\n%s", want, b)
		}
	}
	out, err = asUser(nobody, `
set -u
D=$M/tcp/lo
mkdir $D/eq/e $D/pep/any $D/pep/far || exit 10
echo bind eq e > $D/pep/any/ctl && echo bind eq e > $D/pep/far/ctl || exit 11
echo listen 0.0.0.0:0 > $D/pep/any/ctl || exit 12
cat $D/pep/any/local
echo listen 192.0.2.2:5000 > $D/pep/far/ctl 2>/dev/null && exit 13
cat $D/pep/far/err`, "M="+d.mnt)
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "fi_sockaddr_in://127.0.0.1:") || !strings.Contains(out, "listen 192.0.2.2:5000: 192.0.2.2 is not an address of domain lo") {
		t.Errorf("as nobody, 0.0.0.0 and another interface's address in lo:\n%s", out)
	}
}
