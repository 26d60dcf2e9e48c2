package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDataWriteNotSplit: one write to ep/N/data is one message. A write
// larger than 1 MiB less a page (which FUSE would hand the daemon in
// pieces: at most 1 MiB, and at most 256 pages of the writer's buffer)
// fails with EMSGSIZE and sends nothing, from an aligned buffer or not;
// one of that size from an unaligned buffer, which spans the most pages,
// arrives whole; the next message the peer receives is the next write.
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
python3 - $D/ep/a/data <<'PY'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
m = mmap.mmap(-1, 4 << 20)
lim = (1 << 20) - mmap.PAGESIZE
for n in (lim + 1, lim + 2, 2 << 20):
    try:
        os.write(fd, memoryview(m)[1:1 + n])
        print("unaligned write of", n, "succeeded")
    except OSError as e:
        print("unaligned", n, e.strerror)
m[1:1 + lim] = b"x" * lim
print("unaligned write of", os.write(fd, memoryview(m)[1:1 + lim]))
PY
T=$(mktemp); cat $D/ep/$b/data > $T
echo "got1: $(tr -d x < $T | wc -c) $(wc -c < $T)"; rm -f $T
echo small > $D/ep/a/data
echo "got: $(cat $D/ep/$b/data | head -c 20 | od -An -c | tr -d " ")"
`)
	cmd.Env = append(cmd.Environ(), "M="+d.mnt)
	cmd.WaitDelay = 5 * time.Second // a reader left blocked must not hold the output open
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "big write succeeded") || !strings.Contains(out, "Message too long") {
		t.Errorf("a 3 MiB write to data, want EMSGSIZE:\n%s", out)
	}
	lim := 1<<20 - os.Getpagesize()
	if !strings.Contains(out, fmt.Sprintf("err: write data: a message through data is at most %d bytes", lim)) {
		t.Errorf("err after the 3 MiB write:\n%s", out)
	}
	for _, n := range []int{lim + 1, lim + 2, 2 << 20} {
		if !strings.Contains(out, fmt.Sprintf("unaligned %d Message too long", n)) {
			t.Errorf("an unaligned write of %d bytes, want EMSGSIZE:\n%s", n, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("unaligned write of %d\n", lim)) {
		t.Errorf("an unaligned write of %d bytes, want it taken:\n%s", lim, out)
	}
	// The first message read is the whole unaligned write, all x; the
	// second read is the next message, not a rest of the first.
	if !strings.Contains(out, fmt.Sprintf("got1: 0 %d\n", lim)) {
		t.Errorf("the peer's message after the unaligned write:\n%s", out)
	}
	if !strings.Contains(out, "got: small\n") {
		t.Errorf("the peer's next message, want the small one:\n%s", out)
	}
}
