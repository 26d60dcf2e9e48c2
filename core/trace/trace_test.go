package trace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

var parseTests = []struct {
	cur  Cat
	msg  string
	want Cat
	err  bool
}{
	{0, "set cm", CM, false},
	{CM, "set data rma\n", CM | Data | RMA, false},
	{CM | Data, "clear cm", Data, false},
	{CM | Data, "only error object", Error | Object, false},
	{0, "set all", All, false},
	{All, "clear all", 0, false},
	{Data, "  only   packet  retransmit ", Packet | Retransmit, false},
	{Data, "", Data, true},
	{Data, "set", Data, true},
	{Data, "set cm bogus", Data, true},
	{Data, "add cm", Data, true},
	{Data, "SET cm", Data, true},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		got, err := Parse(tt.cur, tt.msg)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("Parse(%v, %q) = %v, %v; want %v, error %v", tt.cur, tt.msg, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, fi.EINVAL) {
			t.Errorf("Parse(%v, %q): error %v is not FI_EINVAL", tt.cur, tt.msg, err)
		}
	}
}

func TestCatNames(t *testing.T) {
	for i := 0; i < numCats; i++ {
		c := Cat(1 << i)
		if got, ok := ParseCat(c.String()); !ok || got != c {
			t.Errorf("ParseCat(%q) = %v, %v; want %v", c.String(), got, ok, c)
		}
	}
	if got := (CM | Error).String(); got != "cm error" {
		t.Errorf("(CM|Error).String() = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(uint32(tt.cur), tt.msg)
	}
	f.Fuzz(func(t *testing.T, cur uint32, msg string) {
		got, err := Parse(Cat(cur), msg)
		if err != nil && got != Cat(cur) {
			t.Fatalf("Parse(%#x, %q) failed (%v) and changed the categories to %#x", cur, msg, err, got)
		}
		if err == nil && got&^(All|Cat(cur)) != 0 {
			t.Fatalf("Parse(%#x, %q) = %#x: a category that does not exist", cur, msg, got)
		}
	})
}

// reset forgets what the users chose, at the end of a test.
func reset(t *testing.T) {
	t.Cleanup(func() {
		log.mu.Lock()
		clear(log.cats)
		updateLocked()
		log.mu.Unlock()
	})
}

func open(t *testing.T, uid uint32) *Reader {
	t.Helper()
	r, err := Open(uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func ctl(t *testing.T, uid uint32, msg string) {
	t.Helper()
	if err := Ctl(uid, msg); err != nil {
		t.Fatalf("Ctl(%d, %q): %v", uid, msg, err)
	}
}

// readAll takes what a reader has without waiting.
func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	got, err := r.Read(context.Background(), 1<<20, false)
	if err != nil && !errors.Is(err, fi.EAGAIN) {
		t.Fatal(err)
	}
	return got
}

// text is the what-happened part of each line.
func text(lines []string) []string {
	var out []string
	for _, l := range lines {
		f := strings.SplitN(l, " ", 5)
		if len(f) == 5 {
			out = append(out, f[1]+" "+f[2]+" "+f[3]+" "+f[4])
		} else {
			out = append(out, l)
		}
	}
	return out
}

func TestOnOnlyWhileOpen(t *testing.T) {
	reset(t)
	ctl(t, 1000, "set cm")
	if On(CM) {
		t.Fatal("On(CM) with no reader open")
	}
	r := open(t, 1000)
	if !On(CM) || On(Data) {
		t.Fatalf("with a reader of cm open: On(CM) = %v, On(Data) = %v", On(CM), On(Data))
	}
	ctl(t, 1000, "clear cm")
	if On(CM) {
		t.Fatal("On(CM) after clear cm")
	}
	ctl(t, 1000, "set cm")
	r.Close()
	if On(CM) {
		t.Fatal("On(CM) after the reader closed")
	}
}

func TestLines(t *testing.T) {
	reset(t)
	ctl(t, 1000, "only cm data")
	ctl(t, 0, "set all")
	u := open(t, 1000)
	v := open(t, 1001)
	root := open(t, 0)
	Printf(CM, 1000, "tcp/lo/ep/3", "connect %s", "127.0.0.1:7000")
	Printf(Data, 1000, "tcp/lo/ep/3", "send %d bytes", 64)
	Printf(RMA, 1000, "tcp/lo/ep/3", "write %d bytes", 8)
	Printf(CM, 1001, "tcp/lo/ep/4", "listen")
	Printf(Packet, NoUID, "", "rc_send_only psn 1 qpn 17")

	want := []string{"cm tcp/lo/ep/3 1000 connect 127.0.0.1:7000", "data tcp/lo/ep/3 1000 send 64 bytes"}
	if got := text(readAll(t, u)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("uid 1000 read %q, want %q", got, want)
	}
	if got := readAll(t, v); len(got) != 0 {
		t.Errorf("uid 1001, who chose nothing, read %q", got)
	}
	want = []string{
		"cm tcp/lo/ep/3 1000 connect 127.0.0.1:7000",
		"data tcp/lo/ep/3 1000 send 64 bytes",
		"rma tcp/lo/ep/3 1000 write 8 bytes",
		"cm tcp/lo/ep/4 1001 listen",
		"packet - - rc_send_only psn 1 qpn 17",
	}
	if got := text(readAll(t, root)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("root read %q, want %q", got, want)
	}
	line := readAllAfter(t, u, func() { Printf(CM, 1000, "p", "x") })
	if _, err := time.Parse("2006-01-02T15:04:05.000000Z", strings.Fields(line)[0]); err != nil {
		t.Errorf("line %q: timestamp: %v", line, err)
	}
}

func readAllAfter(t *testing.T, r *Reader, f func()) string {
	t.Helper()
	f()
	got := readAll(t, r)
	if len(got) != 1 {
		t.Fatalf("read %q, want one line", got)
	}
	return got[0]
}

func TestLongLineCut(t *testing.T) {
	reset(t)
	ctl(t, 0, "set error")
	r := open(t, 0)
	line := readAllAfter(t, r, func() { Printf(Error, 0, "p", "%s\nsecond line", strings.Repeat("é", MaxLine)) })
	if len(line) > MaxLine || !strings.HasSuffix(line, "...") || strings.Contains(line, "\n") {
		t.Errorf("a long line came out as %d bytes: %.40q...%q", len(line), line, line[max(0, len(line)-10):])
	}
}

func TestSlowReaderLosesOldest(t *testing.T) {
	reset(t)
	ctl(t, 1000, "set data")
	r := open(t, 1000)
	const n = 5000
	for i := 0; i < n; i++ {
		Printf(Data, 1000, "tcp/lo/ep/0", "send %d", i)
	}
	r.mu.Lock()
	held := r.bytes
	r.mu.Unlock()
	if held > ReaderBytes {
		t.Fatalf("the reader holds %d bytes, more than ReaderBytes %d", held, ReaderBytes)
	}
	got := readAll(t, r)
	if len(got) < 2 || !strings.HasPrefix(got[0], "... ") || !strings.HasSuffix(got[0], " lines lost") {
		t.Fatalf("first line %q, want '... N lines lost'", got[:min(len(got), 1)])
	}
	var lost int
	fmt.Sscanf(got[0], "... %d lines lost", &lost)
	if lost+len(got)-1 != n {
		t.Errorf("%d lost + %d read != %d written", lost, len(got)-1, n)
	}
	if last := got[len(got)-1]; !strings.HasSuffix(last, fmt.Sprintf("send %d", n-1)) {
		t.Errorf("last line %q, want the newest", last)
	}
	if got := readAll(t, r); len(got) != 0 {
		t.Errorf("a second read got %q", got)
	}
}

func TestReadBlocks(t *testing.T) {
	reset(t)
	ctl(t, 1000, "set cm")
	r := open(t, 1000)
	if _, err := r.Read(context.Background(), 10, false); !errors.Is(err, fi.EAGAIN) {
		t.Fatalf("non-blocking read of an empty log: %v, want FI_EAGAIN", err)
	}
	if ready, ch := r.Ready(); ready || ch == nil {
		t.Fatal("empty reader ready")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		Printf(CM, 1000, "x", "connected")
	}()
	got, err := r.Read(context.Background(), 10, true)
	if err != nil || len(got) != 1 || !strings.HasSuffix(got[0], "connected") {
		t.Fatalf("blocking read: %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.Read(ctx, 10, true); !errors.Is(err, fi.EINTR) {
		t.Fatalf("interrupted read: %v, want FI_EINTR", err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		r.Close()
	}()
	if got, err := r.Read(context.Background(), 10, true); err != nil || len(got) != 0 {
		t.Fatalf("read of a closed reader: %q, %v; want end of file", got, err)
	}
}

func TestMaxReaders(t *testing.T) {
	for i := 0; i < MaxReaders; i++ {
		open(t, 1234)
	}
	if r, err := Open(1234); !errors.Is(err, fi.ENOSPC) {
		if r != nil {
			r.Close()
		}
		t.Fatalf("reader %d of one user: %v, want FI_ENOSPC", MaxReaders+1, err)
	}
	open(t, 1235) // another user still may
}

var sink int

// BenchmarkNone is a loop with no trace point, BenchmarkClosed the same
// loop with one whose category nobody reads: the difference is the cost
// of a trace point while /log is closed (one atomic load), and it must
// allocate nothing.
func BenchmarkNone(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink += i
	}
}

func BenchmarkClosed(b *testing.B) {
	b.ReportAllocs()
	path := "tcp/lo/ep/3"
	for i := 0; i < b.N; i++ {
		sink += i
		if On(Data) {
			Printf(Data, 1000, path, "send %d bytes", i)
		}
	}
}

func TestClosedAllocatesNothing(t *testing.T) {
	path := "tcp/lo/ep/3"
	n := testing.AllocsPerRun(1000, func() {
		if On(Data) {
			Printf(Data, 1000, path, "send %d bytes", sink)
		}
	})
	if n != 0 {
		t.Errorf("a closed trace point allocates %v times", n)
	}
}
