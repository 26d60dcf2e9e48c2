package tests

import (
	"fmt"
	"os"
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
