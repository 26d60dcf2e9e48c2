package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logReader is an open /log, read without blocking (O_NONBLOCK).
type logReader struct {
	fd   int
	rest string
}

func openLog(t *testing.T, d *daemon) *logReader {
	t.Helper()
	fd, err := syscall.Open(d.path("log"), syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return &logReader{fd: fd}
}

// lines returns the whole lines there are now.
func (r *logReader) lines(t *testing.T) []string {
	t.Helper()
	buf := make([]byte, 1<<20)
	var out []string
	for {
		n, err := syscall.Read(r.fd, buf)
		if errors.Is(err, syscall.EAGAIN) || (err == nil && n == 0) {
			return out
		}
		if err != nil {
			t.Fatalf("read log: %v", err)
		}
		text := r.rest + string(buf[:n])
		i := strings.LastIndexByte(text, '\n')
		r.rest = text[i+1:]
		if i >= 0 {
			out = append(out, strings.Split(text[:i], "\n")...)
		}
	}
}

// waitFor reads lines until each pattern of want has matched a line,
// or 10 s passed; it returns every line read.
func (r *logReader) waitFor(t *testing.T, want ...string) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = append(got, r.lines(t)...)
		missing := ""
		for _, w := range want {
			if !matchesAny(got, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("log: no line matching %q; read:\n%s", missing, strings.Join(got, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func logCtl(t *testing.T, d *daemon, msg string) {
	t.Helper()
	if err := os.WriteFile(d.path("log"), []byte(msg+"\n"), 0); err != nil {
		t.Fatalf("%s > log: %v", msg, err)
	}
}

// linePattern is the format of every trace line: TIME CATEGORY PATH UID WHAT.
var linePattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z (cm|data|rma|packet|retransmit|error|object) (\S+) (\d+|-) .+$`)

// TestLogConnectSend is issue 23's Done-when 3: categories set on /log, a
// connect and a send, and the expected lines, of those categories alone;
// clear stops them.
func TestLogConnectSend(t *testing.T) {
	d := mount(t)
	D := d.path("tcp", "lo")
	r := openLog(t, d)
	if got := r.lines(t); len(got) != 0 {
		t.Fatalf("a fresh log read %q before any category was set", got)
	}
	logCtl(t, d, "only cm data")
	b := session(t, D)
	got := r.waitFor(t,
		`^\S+ cm tcp/lo/pep/l 0 listen fi_sockaddr_in://127\.0\.0\.1:\d+$`,
		`^\S+ cm tcp/lo/ep/a 0 connect fi_sockaddr_in://127\.0\.0\.1:\d+$`,
		`^\S+ cm tcp/lo/pep/l 0 connection request from \S+: ep/`+b+`$`,
		`^\S+ cm tcp/lo/ep/`+b+` 0 accept$`,
		`^\S+ data tcp/lo/ep/a 0 send posted 6 bytes$`,
		`^\S+ data tcp/lo/ep/a 0 send completed 6 bytes$`,
		`^\S+ data tcp/lo/ep/`+b+` 0 recv completed 6 bytes$`,
		`^\S+ cm tcp/lo/ep/a 0 connected$`,
		`^\S+ cm tcp/lo/ep/`+b+` 0 connected$`,
	)
	for _, l := range got {
		m := linePattern.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %q is not TIME CATEGORY PATH UID WHAT", l)
		} else if m[1] != "cm" && m[1] != "data" {
			t.Errorf("line %q of category %s, which was not set", l, m[1])
		}
	}

	// clear stops them; the object category, set now, is all that comes
	// (lines stamped before the clear may still be waiting).
	cleared := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	logCtl(t, d, "clear cm data")
	logCtl(t, d, "set object")
	if out, err := shell(`set -e; echo again > $D/ep/a/data; cat $D/ep/$B/data >/dev/null; mkdir $D/cq/late`, "D="+D, "B="+b); err != nil {
		t.Fatalf("second send: %v\n%s", err, out)
	}
	got = r.waitFor(t, `^\S+ object tcp/lo/cq/late 0 made$`)
	for _, l := range got {
		if l > cleared && !strings.Contains(l, " object ") {
			t.Errorf("after clear cm data: line %q", l)
		}
	}
	if err := os.WriteFile(d.path("log"), []byte("set bogus\n"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("set bogus > log: %v, want EINVAL", err)
	}
	if out, err := shell(`rmdir $D/ep/a $D/ep/$B $D/pep/l $D/cq/c $D/cq/late $D/eq/ev $D/eq/ea`, "D="+D, "B="+b); err != nil {
		t.Errorf("rmdir: %v\n%s", err, out)
	}
}

// session connects endpoint a of domain D to endpoint b (returned),
// made by pep l, and sends "hello\n" from a to b, as README's session.
// It runs under timeout: a hung step fails the test, not the run.
func session(t *testing.T, D string) (b string) {
	t.Helper()
	out, err := shell(`exec timeout 30 sh -ec "$S"`, "D="+D, "S="+`
mkdir $D/eq/ev $D/eq/ea $D/cq/c $D/pep/l $D/ep/a
echo bind eq ev > $D/pep/l/ctl
echo listen 127.0.0.1:0 > $D/pep/l/ctl
for c in 'bind eq ea' 'bind cq c send,recv' enable "connect $(cat $D/pep/l/local) hi"; do echo $c > $D/ep/a/ctl; done
b=$(cat $D/pep/l/listen)
for c in 'bind eq ev' 'bind cq c send,recv' enable 'accept welcome'; do echo $c > $D/ep/$b/ctl; done
cat $D/eq/ev/events $D/eq/ea/events >/dev/null
cat $D/ep/$b/data >/dev/null &   # verbs: the send waits for a receive
echo hello > $D/ep/a/data
wait
echo $b`)
	if err != nil {
		t.Fatalf("session: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// TestLogVerbsPackets: the packet category shows each RoCE packet of a
// verbs connection with its opcode, PSN and QPN, about the endpoint.
func TestLogVerbsPackets(t *testing.T) {
	d := mount(t)
	r := openLog(t, d)
	logCtl(t, d, "only packet")
	session(t, d.path("verbs", verbsDevice))
	got := r.waitFor(t,
		`^\S+ packet verbs/`+verbsDevice+`/ep/a 0 qpn \d+ send RC_SEND_ONLY psn \d+ to qpn \d+, \d+ bytes$`,
		`^\S+ packet verbs/`+verbsDevice+`/ep/\d+ 0 qpn \d+ recv RC_SEND_ONLY psn \d+, \d+ bytes$`,
	)
	for _, l := range got {
		if m := linePattern.FindStringSubmatch(l); m == nil || m[1] != "packet" {
			t.Errorf("line %q: not a packet line", l)
		}
	}
}

func matchesAny(lines []string, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestLogSlowReader: a reader that reads nothing keeps at most 64 KiB of
// lines; its next read says how many older ones it lost, and the lost and
// the kept add up to what happened.
func TestLogSlowReader(t *testing.T) {
	d := mount(t)
	r := openLog(t, d)
	logCtl(t, d, "only object")
	const n = 800 // objects made and closed: 1600 lines of about 80 bytes
	if out, err := shell(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do exec 3<>$D/cq/clone; exec 3<&-; i=$((i+1)); done`, n), "D="+d.path("tcp", "lo")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for lost := 0; ; {
		got = append(got, r.lines(t)...)
		bytes := 0
		lost = 0
		for i, l := range got {
			if i == 0 {
				if _, err := fmt.Sscanf(l, "... %d lines lost", &lost); err == nil {
					continue
				}
			}
			bytes += len(l) + 1
		}
		if lost+len(got)-1 == 2*n {
			if lost == 0 {
				t.Fatalf("no line lost:\n%.300s", got)
			}
			if bytes > 64<<10 {
				t.Errorf("the reader got %d bytes of lines kept, more than 64 KiB", bytes)
			}
			if !strings.HasSuffix(got[len(got)-1], " closed") {
				t.Errorf("last line %q, want the newest, a close", got[len(got)-1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lost %d + kept %d lines != %d; first lines:\n%s", lost, len(got)-1, 2*n, strings.Join(got[:min(5, len(got))], "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLogOtherUser: a user's reader sees the lines of that user's objects
// only, in the categories that user chose; root's reader sees them too.
func TestLogOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	d := mount(t)
	openUp(t, filepath.Dir(d.mnt))
	D := d.path("tcp", "lo")
	root := openLog(t, d)
	logCtl(t, d, "only cm")
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := asUser(nobody, `
echo only cm > $M/log || exit 10
( sleep 1; mkdir $D/eq/ne $D/pep/np && echo bind eq ne > $D/pep/np/ctl && echo listen 127.0.0.1:0 > $D/pep/np/ctl ) &
timeout 3 cat $M/log
wait
rmdir $D/pep/np $D/eq/ne
exit 0`, "D="+D, "M="+d.mnt)
		done <- result{out, err}
	}()
	time.Sleep(500 * time.Millisecond) // the user's reader is open
	if out, err := shell(`set -e; mkdir $D/eq/re $D/pep/rp; echo bind eq re > $D/pep/rp/ctl; echo listen 127.0.0.1:0 > $D/pep/rp/ctl`, "D="+D); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("as nobody: %v\n%s", res.err, res.out)
	}
	if !matchesAny(strings.Split(res.out, "\n"), fmt.Sprintf(`^\S+ cm tcp/lo/pep/np %d listen fi_sockaddr_in://127\.0\.0\.1:\d+$`, nobody)) {
		t.Errorf("nobody's reader did not see its own listen:\n%s", res.out)
	}
	if strings.Contains(res.out, "pep/rp") {
		t.Errorf("nobody's reader saw root's object:\n%s", res.out)
	}
	// Root's reader sees both listens, in either order.
	theirs := fmt.Sprintf(`^\S+ cm tcp/lo/pep/np %d listen `, nobody)
	if got := root.waitFor(t, `^\S+ cm tcp/lo/pep/rp 0 listen `); !matchesAny(got, theirs) {
		root.waitFor(t, theirs)
	}
	if out, err := shell(`rmdir $D/pep/rp $D/eq/re`, "D="+D); err != nil {
		t.Errorf("rmdir: %v\n%s", err, out)
	}
}

// TestLogPoll: poll(2) on /log says POLLIN exactly when a read would
// return lines, and wakes when one comes.
func TestLogPoll(t *testing.T) {
	d := mount(t)
	r := openLog(t, d)
	logCtl(t, d, "only object")
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 100); err != nil || n != 0 {
		t.Fatalf("poll of an empty log: %d, %v (revents %#x); want a timeout", n, err, fds[0].Revents)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		os.Mkdir(d.path("tcp", "lo", "cq", "p"), 0o755)
	}()
	n, err := unix.Poll(fds, 10000)
	if err != nil || n != 1 || fds[0].Revents&unix.POLLIN == 0 {
		t.Fatalf("poll while an object is made: %d, %v (revents %#x); want POLLIN", n, err, fds[0].Revents)
	}
	if got := r.lines(t); !matchesAny(got, `^\S+ object tcp/lo/cq/p 0 made$`) {
		t.Errorf("after POLLIN, read %q", got)
	}
	os.Remove(d.path("tcp", "lo", "cq", "p"))
}
