package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDataWriteNotSplit: a write of 1 MiB or more to ep/N/data (which
// FUSE would hand the daemon in 1 MiB pieces) fails with EMSGSIZE and
// sends nothing; the next message the peer receives is the next write.
func TestDataWriteNotSplit(t *testing.T) {
	d := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `
set -u
D=$M/tcp/lo
mkdir $D/eq/ev $D/cq/c $D/pep/l $D/ep/a
echo bind eq ev > $D/pep/l/ctl
echo listen 127.0.0.1:0 > $D/pep/l/ctl
port=$(cat $D/pep/l/local); port=${port##*:}
for c in "bind eq ev" "bind cq c send,recv" enable "connect 127.0.0.1:$port"; do echo $c > $D/ep/a/ctl; done
b=$(cat $D/pep/l/listen)
for c in "bind eq ev" "bind cq c send,recv" enable accept; do echo $c > $D/ep/$b/ctl; done
until grep -q connected $D/ep/a/status; do sleep 0.05; done
dd if=/dev/zero of=$D/ep/a/data bs=3145728 count=1 iflag=fullblock status=none && echo "big write succeeded"
echo "err: $(cat $D/ep/a/err)"
echo small > $D/ep/a/data
echo "got: $(cat $D/ep/$b/data | head -c 20 | od -An -c | tr -d " ")"
`)
	cmd.Env = append(cmd.Environ(), "M="+d.mnt)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "big write succeeded") || !strings.Contains(out, "Message too long") {
		t.Errorf("a 3 MiB write to data, want EMSGSIZE:\n%s", out)
	}
	if !strings.Contains(out, "err: write data: a message through data is at most 1048575 bytes") {
		t.Errorf("err after the 3 MiB write:\n%s", out)
	}
	if !strings.Contains(out, "got: small\n") {
		t.Errorf("the peer's next message, want the small one:\n%s", out)
	}
}
