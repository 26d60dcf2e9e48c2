package tests

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Interoperation with real libfabric: tests/pingpong (ffpingpong) drives
// fabricfs through the mounted tree and speaks fi_pingpong's control
// protocol; Debian's fi_pingpong (libfabric-bin, 1.17) is the other side,
// as server and as client, checking every byte (-c) as ffpingpong does.

const (
	ppLimit   = 60 * time.Second // one process's time limit
	ppTimeout = "20s"            // ffpingpong's -timeout
)

// fiEnv keeps real fi_pingpong on 127.0.0.1: without FI_TCP_IFACE its
// server advertises the first interface's address even with -d lo
// (docs/bench.md).
var fiEnv = []string{"FI_TCP_IFACE=lo"}

var (
	ffOnce sync.Once
	ffBin  string
	ffErr  error
)

// ffpingpong builds tests/pingpong once, next to the daemon TestMain built
// (with -race when the tests run with it).
func ffpingpong(t *testing.T) string {
	t.Helper()
	ffOnce.Do(func() {
		ffBin = filepath.Join(filepath.Dir(daemonBin), "ffpingpong")
		args := []string{"build", "-o", ffBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "./pingpong")...).CombinedOutput()
		if err != nil {
			ffErr = fmt.Errorf("building tests/pingpong: %v\n%s", err, out)
		}
	})
	if ffErr != nil {
		t.Fatal(ffErr)
	}
	return ffBin
}

// freePort returns a TCP port that was free on loopback a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// proc is a process a test started; a cleanup kills it, by its PID, if it
// still runs when the test ends.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out, err bytes.Buffer // read them only after done
	done     chan struct{}
	code     int // exit status; -1 when killed by a signal
}

func startProc(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: filepath.Base(name), cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running.Store(p, nil)
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		running.Delete(p)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit status, killing the process after limit.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Errorf("%s did not finish in %v; killing it", p.name, limit)
		t.Logf("where it waits:\n%s", stacks(p.cmd.Process.Pid))
		running.Range(func(k, _ any) bool {
			if q := k.(*proc); q != p {
				t.Logf("where %s %s waits meanwhile:\n%s", q.name, strings.Join(q.cmd.Args[1:], " "), stacks(q.cmd.Process.Pid))
			}
			return true
		})
		t.Logf("FUSE requests the kernel holds:\n%s", fuseWaiting())
		dumpDaemons()
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.code
}

func (p *proc) String() string {
	return fmt.Sprintf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", p.name, strings.Join(p.cmd.Args[1:], " "), p.code, &p.out, &p.err)
}

// fiClient runs real fi_pingpong as a client, again while the server is
// not listening yet ("failed to connect"), as scripts/bench.sh does.
func fiClient(t *testing.T, args ...string) *proc {
	t.Helper()
	return fiClientEnv(t, fiEnv, args...)
}

// fiClientEnv is fiClient with the environment env.
func fiClientEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	for try := 0; ; try++ {
		p := startProc(t, env, "fi_pingpong", args...)
		if p.wait(t, ppLimit) == 0 || !strings.Contains(p.err.String(), "failed to connect") || try == 200 {
			return p
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// ppCase is one interop run: the size, the iterations, and the table cells
// it must print (worked out by hand from util/pingpong.c's size_str: units
// of 1024, one decimal below 10 units).
type ppCase struct {
	size, iters  int
	bytes, total string
}

var ppCases = []ppCase{
	{1000, 100, "1000", "195k"},   // 100 x 1000 x 2 = 200000 bytes = 195.3 KiB
	{100000, 100, "97k", "19m"},   // 100000 B = 97.7 KiB; 2e7 B = 19.07 MiB
	{100, 100, "100", "19k"},      // below inject_size (128): injected; 20000 B = 19.5 KiB
	{0, 100, "0", "0"},            // empty messages
	{131072, 100, "128k", "25m"},  // a power of two: 2^17; 100 x 2^18 B = 25 MiB
	{6000000, 10, "5.7m", "114m"}, // beyond fi_pingpong's default buffer: 5.72 MiB; 1.2e8 B = 114.4 MiB
}

// TestPingpongInterop runs real fi_pingpong -p tcp -e msg -c against
// ffpingpong -c on a fresh mount, each being server and client, and checks
// both tables.
func TestPingpongInterop(t *testing.T) {
	needCmd(t, "fi_pingpong")
	bin := ffpingpong(t)
	d := mount(t)
	for _, c := range ppCases[:2] {
		size := strconv.Itoa(c.size)
		t.Run("fabricfs-server/"+size, func(t *testing.T) {
			port := freePort(t)
			ff := startProc(t, nil, bin, "-mnt", d.mnt, "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-B", port, "-timeout", ppTimeout)
			fi := fiClient(t, "-p", "tcp", "-e", "msg", "-d", "lo", "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-P", port, "127.0.0.1")
			ff.wait(t, ppLimit)
			checkPingpong(t, c, fi, ff)
		})
		t.Run("fabricfs-client/"+size, func(t *testing.T) {
			port := freePort(t)
			fi := startProc(t, fiEnv, "fi_pingpong", "-p", "tcp", "-e", "msg", "-d", "lo", "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-B", port)
			ff := startProc(t, nil, bin, "-mnt", d.mnt, "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-P", port, "-timeout", ppTimeout, "127.0.0.1")
			ff.wait(t, ppLimit)
			fi.wait(t, ppLimit)
			checkPingpong(t, c, fi, ff)
		})
	}
}

// rdmCases are the FI_EP_RDM interop sizes: below the inject size (64,
// fi_inject), an eager message, the eager limit (16384), and above it the
// read rendezvous: fi_pingpong's own rendezvous size, and a few MiB.
var rdmCases = []ppCase{
	{10, 100, "10", "1.9k"},      // 2000 B = 1.95 KiB
	{1000, 100, "1000", "195k"},  // 200000 B = 195.3 KiB
	{16384, 100, "16k", "3.1m"},  // 3276800 B = 3.125 MiB
	{100000, 100, "97k", "19m"},  // 100000 B = 97.7 KiB; 2e7 B = 19.07 MiB
	{3000000, 10, "2.8m", "57m"}, // 3e6 B = 2.86 MiB; 6e7 B = 57.2 MiB
}

// TestPingpongRDMInterop runs real fi_pingpong -p tcp -e rdm -c (libfabric
// 1.17's tcp;ofi_rxm), untagged and tagged (-m tagged), against
// ffpingpong -e rdm -c on a fresh mount, each being server and client.
// Both sides exchange names over the control connection and insert them in
// their AVs; the client's first send makes the one rxm connection.
func TestPingpongRDMInterop(t *testing.T) {
	needCmd(t, "fi_pingpong")
	bin := ffpingpong(t)
	d := mount(t)
	for _, mode := range []string{"msg", "tagged"} {
		for _, c := range rdmCases {
			size, iters := strconv.Itoa(c.size), strconv.Itoa(c.iters)
			common := []string{"-e", "rdm", "-m", mode, "-S", size, "-I", iters, "-c"}
			t.Run(mode+"/fabricfs-server/"+size, func(t *testing.T) {
				port := freePort(t)
				ff := startProc(t, nil, bin, append([]string{"-mnt", d.mnt, "-B", port, "-timeout", ppTimeout}, common...)...)
				fi := fiClient(t, append(append([]string{"-p", "tcp", "-d", "lo", "-P", port}, common...), "127.0.0.1")...)
				ff.wait(t, ppLimit)
				checkPingpong(t, c, fi, ff)
			})
			t.Run(mode+"/fabricfs-client/"+size, func(t *testing.T) {
				port := freePort(t)
				fi := startProc(t, fiEnv, "fi_pingpong", append([]string{"-p", "tcp", "-d", "lo", "-B", port}, common...)...)
				ff := startProc(t, nil, bin, append(append([]string{"-mnt", d.mnt, "-P", port, "-timeout", ppTimeout}, common...), "127.0.0.1")...)
				ff.wait(t, ppLimit)
				fi.wait(t, ppLimit)
				checkPingpong(t, c, fi, ff)
			})
		}
	}
}

// checkPingpong wants both processes to have succeeded and printed one
// line of the table for c.
func checkPingpong(t *testing.T, c ppCase, ps ...*proc) {
	t.Helper()
	for _, p := range ps {
		if p.code != 0 {
			t.Errorf("%v", p)
			continue
		}
		if err := checkTable(p.out.String(), c); err != nil {
			t.Errorf("%s: %v\n%v", p.name, err, p)
			continue
		}
		t.Logf("%s: %s", p.name, strings.TrimSpace(p.out.String()[strings.LastIndex(strings.TrimSuffix(p.out.String(), "\n"), "\n")+1:]))
	}
}

// checkTable parses fi_pingpong's table (util/pingpong.c show_perf): the
// header, then one line for the size: bytes, #sent, #ack ("=N": all
// acknowledged), total, time ("0.01s"), MB/sec, usec/xfer, Mxfers/sec.
func checkTable(out string, c ppCase) error {
	iters := c.iters
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := []string{"bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"}
	if len(lines) != 2 || !equalFields(strings.Fields(lines[0]), header) {
		return fmt.Errorf("want the header and one line, got %q", out)
	}
	f := strings.Fields(lines[1])
	want := []string{c.bytes, strconv.Itoa(iters), "=" + strconv.Itoa(iters), c.total}
	if len(f) != 8 || !equalFields(f[:4], want) {
		return fmt.Errorf("line %q: want it to start with %q", lines[1], want)
	}
	secs, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "s"), 64)
	if err != nil || !strings.HasSuffix(f[4], "s") || secs < 0 || secs > ppLimit.Seconds() {
		return fmt.Errorf("line %q: bad time %q", lines[1], f[4])
	}
	usec, err := strconv.ParseFloat(f[6], 64)
	if err != nil || usec <= 0 || usec*float64(2*iters)/1e6 > secs+0.01 {
		return fmt.Errorf("line %q: usec/xfer %q disagrees with the time", lines[1], f[6])
	}
	for _, v := range f[5:] {
		if x, err := strconv.ParseFloat(v, 64); err != nil || x < 0 {
			return fmt.Errorf("line %q: %q is not a rate", lines[1], v)
		}
	}
	return nil
}

func equalFields(a, b []string) bool {
	return strings.Join(a, " ") == strings.Join(b, " ")
}

// TestPingpongSizes runs the other sizes, fabricfs being the server: an
// injected size, empty messages, a power of two, and one larger than
// fi_pingpong's default buffer (-S takes any size).
func TestPingpongSizes(t *testing.T) {
	needCmd(t, "fi_pingpong")
	bin := ffpingpong(t)
	d := mount(t)
	for _, c := range ppCases[2:] {
		size := strconv.Itoa(c.size)
		t.Run(size, func(t *testing.T) {
			port := freePort(t)
			ff := startProc(t, nil, bin, "-mnt", d.mnt, "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-B", port, "-timeout", ppTimeout)
			fi := fiClient(t, "-p", "tcp", "-e", "msg", "-d", "lo", "-S", size, "-I", strconv.Itoa(c.iters), "-c", "-P", port, "127.0.0.1")
			ff.wait(t, ppLimit)
			checkPingpong(t, c, fi, ff)
		})
	}
}

// TestPingpongDataCheck shows that -c checks something on both sides: a
// side that sends without -c sends zeros, which the checking side refuses.
func TestPingpongDataCheck(t *testing.T) {
	needCmd(t, "fi_pingpong")
	bin := ffpingpong(t)
	d := mount(t)
	t.Run("fabricfs-checks", func(t *testing.T) {
		port := freePort(t)
		fi := startProc(t, fiEnv, "fi_pingpong", "-p", "tcp", "-e", "msg", "-d", "lo", "-S", "1000", "-I", "10", "-B", port)
		ff := startProc(t, nil, bin, "-mnt", d.mnt, "-S", "1000", "-I", "10", "-c", "-P", port, "-timeout", ppTimeout, "127.0.0.1")
		if ff.wait(t, ppLimit) == 0 || !strings.Contains(ff.err.String(), "data check: message 0 of 1000 bytes differs at byte 0") {
			t.Errorf("want ffpingpong -c to refuse the first message:\n%v", ff)
		}
		fi.wait(t, ppLimit)
	})
	t.Run("fi_pingpong-checks", func(t *testing.T) {
		port := freePort(t)
		ff := startProc(t, nil, bin, "-mnt", d.mnt, "-S", "1000", "-I", "10", "-B", port, "-timeout", ppTimeout)
		fi := fiClient(t, "-p", "tcp", "-e", "msg", "-d", "lo", "-S", "1000", "-I", "10", "-c", "-P", port, "127.0.0.1")
		if fi.code == 0 || !strings.Contains(fi.out.String(), "Error at iteration=1 size=1000 byte=0") {
			t.Errorf("want fi_pingpong -c to refuse the first message:\n%v", fi)
		}
		if ff.wait(t, ppLimit) == 0 {
			t.Errorf("ffpingpong succeeded although its peer failed:\n%v", ff)
		}
	})
}

// TestPingpongUnsupported checks the clear refusals of what fabricfs or
// ffpingpong do not offer yet.
func TestPingpongUnsupported(t *testing.T) {
	bin := ffpingpong(t)
	d := mount(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-e", "dgram"}, "ffpingpong does not implement FI_EP_DGRAM yet"},
		{[]string{"-e", "xyz"}, "unknown endpoint type"},
		{[]string{"-m", "tagged"}, "tcp/lo offers no FI_EP_MSG endpoint with FI_TAGGED"},
		{[]string{"-d", "nosuch"}, `no provider supports domain "nosuch"`},
		{[]string{"-S", "1k"}, `-S: bad size "1k"`},
		{[]string{"-P", "0", "127.0.0.1"}, "-B and -P take a port number"},
	} {
		p := startProc(t, nil, bin, append([]string{"-mnt", d.mnt}, c.args...)...)
		if p.wait(t, ppLimit) == 0 || !strings.Contains(p.err.String(), c.want) {
			t.Errorf("want a failure saying %q:\n%v", c.want, p)
		}
	}
}

// TestPingpongBadControl plays a misbehaving fi_pingpong on the control
// connection: ffpingpong must fail with a clear error, never panic or hang.
func TestPingpongBadControl(t *testing.T) {
	bin := ffpingpong(t)
	d := mount(t)
	name := func(n, format uint32, addr []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		return append(binary.NativeEndian.AppendUint32(b, format), addr...)
	}
	sin := make([]byte, 16) // 127.0.0.1:1
	binary.NativeEndian.PutUint16(sin, syscall.AF_INET)
	copy(sin[2:], []byte{0, 1, 127, 0, 0, 1})
	for _, c := range []struct {
		name string
		send []byte
		want string
	}{
		{"huge-length", name(0xffffffff, 2, nil), "bad address length 4294967295"},
		{"zero-length", name(0, 2, nil), "bad address length 0"},
		{"addr-str", name(16, 9, sin), "format FI_ADDR_STR (9) is not supported"},
		{"short-sockaddr", name(8, 2, sin[:8]), "FI_SOCKADDR_IN of 8 bytes"},
		{"wrong-family", name(16, 3, sin), "FI_SOCKADDR_IN6 with family 2"},
		{"cut-short", name(16, 2, sin[:5]), "the peer closed the control connection"},
	} {
		t.Run("client/"+c.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			p := startProc(t, nil, bin, "-mnt", d.mnt, "-S", "64", "-P", port, "-timeout", "5s", "127.0.0.1")
			conn, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			conn.Write(c.send)
			conn.Close()
			if p.wait(t, ppLimit) == 0 || !strings.Contains(p.err.String(), c.want) || strings.Contains(p.err.String(), "panic") {
				t.Errorf("want a failure saying %q:\n%v", c.want, p)
			}
		})
	}
	t.Run("server/bad-sync", func(t *testing.T) { badSync(t, d, bin) })
}

// badSync connects to an ffpingpong server like fi_pingpong, through
// fabricfs, to the address the server advertises, then sends a wrong sync.
func badSync(t *testing.T, d *daemon, bin string) {
	port := freePort(t)
	p := startProc(t, nil, bin, "-mnt", d.mnt, "-S", "64", "-B", port, "-timeout", "5s")
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("%v\n%v", err, p)
	}
	defer conn.Close()
	hdr := make([]byte, 8+16)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, hdr); err != nil {
		t.Fatalf("reading the server's name: %v", err)
	}
	if n, f, fam := binary.BigEndian.Uint32(hdr), binary.NativeEndian.Uint32(hdr[4:]), binary.NativeEndian.Uint16(hdr[8:]); n != 16 || f != 2 || fam != syscall.AF_INET || !bytes.Equal(hdr[12:16], []byte{127, 0, 0, 1}) {
		t.Fatalf("the server's name is %x: want length 16, FI_SOCKADDR_IN, a sockaddr_in of 127.0.0.1", hdr)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", binary.BigEndian.Uint16(hdr[10:]))

	tr := d.tree(t)
	dom := tr.Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	if err != nil {
		t.Fatal(err)
	}
	defer eq.Close()
	cq, err := dom.NewCQ(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	ep, err := dom.NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if err := ep.Setup(eq, cq); err != nil {
		t.Fatal(err)
	}
	if err := ep.Ctl("connect " + addr); err != nil {
		t.Fatal(err)
	}
	if err := eq.WaitConnected(10*time.Second, ep); err != nil {
		t.Fatalf("connecting to the advertised %s: %v\n%v", addr, err, p)
	}
	conn.Write([]byte("x\x00"))
	if p.wait(t, ppLimit) == 0 || !strings.Contains(p.err.String(), `bad sync: got "x\x00", want "q\x00"`) {
		t.Errorf("want a failure about the sync:\n%v", p)
	}
}
