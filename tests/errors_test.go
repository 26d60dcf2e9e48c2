package tests

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core"
)

// The errno and err contract (docs/tree.md, "Errors"): a failed write,
// read or open of an object's file fails with an errno and leaves one
// sentence in the object's err file, "OP: why", where OP is the command
// written to ctl, or the file's name and what was written to it
// ("attr/tx_size 0", "value x"), or "read events", "write data",
// "open attr/caps". The sentence names OP once.

// checkSentence checks that the err file of the object at dir holds one
// sentence about op, and that no part of it is said twice in a row
// ("x: x: ..."); it returns the sentence.
func checkSentence(t *testing.T, d *daemon, dir []string, op string) string {
	t.Helper()
	msg := strings.TrimSpace(d.read(t, append(dir, "err")...))
	why, ok := strings.CutPrefix(msg, op+": ")
	switch {
	case !ok:
		t.Errorf("%s: err %q does not begin with %q", filepath.Join(dir...), msg, op+": ")
	case strings.TrimSpace(why) == "":
		t.Errorf("%s: err %q says nothing after %q", filepath.Join(dir...), msg, op)
	case strings.HasPrefix(why, op+":"):
		t.Errorf("%s: err %q names %q twice", filepath.Join(dir...), msg, op)
	}
	if p := doubled(msg); p != "" {
		t.Errorf("%s: err %q says %q twice", filepath.Join(dir...), msg, p)
	}
	if strings.Count(msg, "\n") > 0 {
		t.Errorf("%s: err %q is more than one line", filepath.Join(dir...), msg)
	}
	return msg
}

// doubled returns a prefix a sentence repeats ("fi_getinfo" of
// "fi_getinfo: fi_getinfo: no match"), or "".
func doubled(msg string) string {
	parts := strings.Split(msg, ": ")
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] || strings.HasPrefix(parts[i], parts[i-1]+":") {
			return parts[i-1]
		}
	}
	return ""
}

// writeFile writes s and a newline to the file at p, as echo does.
func writeFile(p, s string) error { return ctl(p, s) }

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) bool {
	t.Helper()
	var errno syscall.Errno
	if !errors.As(err, &errno) || errno != want {
		t.Errorf("%s = %v, want %v", what, err, want)
		return false
	}
	return true
}

// badAttrValue is written to every writable attribute: no attribute takes
// it (not a number, flag, type or format).
const badAttrValue = "no-such-value"

// TestErrEveryWritableFile writes a bad value to every writable file of
// the tree: every ctl verb of every kind (the cases of ctlErrorTests, which
// TestCtlErrors checks cover core's command table), every writable attribute
// of every kind (found by walking attr/), every other writable file of an
// object (found by walking the object's directory: cntr value and errors,
// ep data), and getinfo. Each must fail with its errno and leave one
// sentence, with one prefix, in err. A writable file the walk finds and
// the test does not know fails the test, so a new one gets a case here.
func TestErrEveryWritableFile(t *testing.T) {
	d := mount(t)
	dom := []string{"tcp", "lo"}
	for k := core.Kind(0); k < core.NumKinds; k++ {
		// x for the commands and files, fresh w for the attributes: a
		// registered mr, or a cq whose ring exists, takes none.
		must(t, os.Mkdir(d.path(append(dom, k.String(), "x")...), 0o700))
		must(t, os.Mkdir(d.path(append(dom, k.String(), "w")...), 0o700))
	}
	must(t, os.Mkdir(d.path(append(dom, "cq", "c")...), 0o700))
	for _, w := range [][2]string{{"attr/len", "64"}, {"ctl", "reg"}} { // for write and read
		d.mustCtl(t, w[1], append(dom, "mr", "x", w[0])...)
	}
	obj := func(k core.Kind, name string) []string { return append(append([]string{}, dom...), k.String(), name) }

	// ctl: every verb.
	for _, tt := range ctlErrorTests {
		dir := obj(tt.kind, "x")
		err := ctl(d.path(append(dir, "ctl")...), tt.cmd)
		if wantErrno(t, tt.kind.String()+": "+tt.cmd, err, tt.want) {
			checkSentence(t, d, dir, tt.cmd)
		}
	}

	// Every writable attribute of every kind. The walk stats attr/ only:
	// a stat of a cq's data file makes its ring, which freezes the cq.
	attrs := 0
	for k := core.Kind(0); k < core.NumKinds; k++ {
		dir := obj(k, "w")
		for _, name := range writable(t, d.path(append(dir, "attr")...)) {
			p := d.path(append(dir, "attr", name)...)
			attrs++
			bad, op := badAttrValue, "attr/"+name+" "+badAttrValue
			if name == "auth_key" {
				// Any text is a key; one of 65 bytes is too long, and
				// err does not echo a key.
				bad, op = strings.Repeat("k", 65), "attr/auth_key"
			}
			if wantErrno(t, p, writeFile(p, bad), syscall.EINVAL) {
				checkSentence(t, d, dir, op)
			}
		}
	}
	if attrs < 10 {
		t.Errorf("the walk found %d writable attributes", attrs)
	}

	// The other writable files of every kind's object.
	for k := core.Kind(0); k < core.NumKinds; k++ {
		dir := obj(k, "x")
		for _, name := range writable(t, d.path(dir...)) {
			p := d.path(append(dir, name)...)
			var op string
			want := syscall.EINVAL
			switch {
			case name == "ctl":
				continue // above
			case strings.HasPrefix(name, "attr/"):
				continue // above
			case k == core.KindCntr && (name == "value" || name == "errors"):
				op = name + " 1_000"
				if !wantErrno(t, p, writeFile(p, "1_000"), want) {
					continue
				}
			case k == core.KindEP && name == "data":
				op, want = "write data", syscall.EBADFD // not enabled
				if !wantErrno(t, p, writeFile(p, "hello"), want) {
					continue
				}
			case k == core.KindEP && name == "info":
				op = "info hello" // not an fi_info block
				if !wantErrno(t, p, writeFile(p, "hello"), want) {
					continue
				}
			case ((k == core.KindEP || k == core.KindSRX) && (name == "tx" || name == "rx")) || ((k == core.KindCQ || k == core.KindMR) && name == "data") ||
				(k == core.KindEP && name == "buffered"):
				continue // shared memory: a write is a store into the pages, not a value
			default:
				t.Errorf("writable file %s has no bad-write case in this test", p)
				continue
			}
			checkSentence(t, d, dir, op)
		}
	}

	// A read-only file refuses to open for writing, root included.
	for _, name := range []string{"attr/protocol", "status", "err"} {
		dir := obj(core.KindEP, "w")
		err := writeFile(d.path(append(dir, name)...), "1")
		if wantErrno(t, "writing read-only "+name+" as root", err, syscall.EACCES) {
			checkSentence(t, d, dir, "open "+name)
		}
	}

	// getinfo has no err file: its errno, and its answer is the sentence.
	for _, tt := range []struct {
		query string
		want  syscall.Errno
	}{
		{"--no-such-option", syscall.EINVAL},
		{"-p no-such-provider", syscall.ENODATA},
	} {
		f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
		must(t, err)
		_, err = f.Write([]byte(tt.query + "\n"))
		if wantErrno(t, "getinfo "+tt.query, err, tt.want) {
			b, err := io.ReadAll(f)
			msg := strings.TrimSpace(string(b))
			switch {
			case err != nil:
				t.Errorf("getinfo %s: read: %v", tt.query, err)
			case msg == "" || strings.Contains(msg, "\n"):
				t.Errorf("getinfo %s: read %q, want one sentence", tt.query, msg)
			case doubled(msg) != "":
				t.Errorf("getinfo %s: read %q says %q twice", tt.query, msg, doubled(msg))
			}
		}
		f.Close()
	}
}

// writable lists the regular files under dir and its subdirectories (one
// level: attr/) that have a write permission bit.
func writable(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	var walk func(sub string)
	walk = func(sub string) {
		es, err := os.ReadDir(filepath.Join(dir, sub))
		must(t, err)
		for _, e := range es {
			name := filepath.Join(sub, e.Name())
			switch {
			case e.IsDir() && sub == "":
				walk(name)
			case e.Type().IsRegular():
				fi, err := e.Info()
				must(t, err)
				if fi.Mode().Perm()&0o222 != 0 {
					out = append(out, name)
				}
			}
		}
	}
	walk("")
	return out
}

// TestNumberGrammar checks that a number means the same in every file
// that takes one (docs/tree.md, "Numbers"): decimal, or 0x hex; a leading
// zero is not octal; anything else is EINVAL and changes nothing.
func TestNumberGrammar(t *testing.T) {
	d := mount(t)
	dom := []string{"tcp", "lo"}
	for _, k := range []string{"ep", "cq", "cntr"} {
		must(t, os.Mkdir(d.path(append(dom, k, "x")...), 0o700))
	}
	p := func(f ...string) string { return d.path(append(append([]string{}, dom...), f...)...) }
	// Each place a number goes: how to write text there, and the file that
	// reads the number back in decimal.
	places := []struct {
		name  string
		write func(s string) error
		read  string
	}{
		{"cntr ctl set", func(s string) error { return ctl(p("cntr", "x", "ctl"), "set "+s) }, p("cntr", "x", "value")},
		{"cntr ctl seterr", func(s string) error { return ctl(p("cntr", "x", "ctl"), "seterr "+s) }, p("cntr", "x", "errors")},
		{"cntr value", func(s string) error { return writeFile(p("cntr", "x", "value"), s) }, p("cntr", "x", "value")},
		{"cntr errors", func(s string) error { return writeFile(p("cntr", "x", "errors"), s) }, p("cntr", "x", "errors")},
		{"ep attr/tx_size", func(s string) error { return writeFile(p("ep", "x", "attr", "tx_size"), s) }, p("ep", "x", "attr", "tx_size")},
		{"ep attr/rx_size", func(s string) error { return writeFile(p("ep", "x", "attr", "rx_size"), s) }, p("ep", "x", "attr", "rx_size")},
		{"cq attr/size", func(s string) error { return writeFile(p("cq", "x", "attr", "size"), s) }, p("cq", "x", "attr", "size")},
	}
	readNum := func(t *testing.T, path string) uint64 {
		t.Helper()
		b, err := os.ReadFile(path)
		must(t, err)
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		must(t, err)
		return v
	}
	for _, pl := range places {
		for _, tt := range []struct {
			text string
			want uint64
		}{
			{"10", 10}, {"010", 10}, {"0x10", 16}, {"0X10", 16}, {"7", 7}, {"0x0a", 10},
		} {
			if err := pl.write(tt.text); err != nil {
				t.Errorf("%s %q: %v", pl.name, tt.text, err)
				continue
			}
			if got := readNum(t, pl.read); got != tt.want {
				t.Errorf("%s %q reads back %d, want %d", pl.name, tt.text, got, tt.want)
			}
		}
		before := readNum(t, pl.read)
		for _, bad := range []string{"0b1", "0o7", "1_000", "+1", "-1", "", "0x", "99999999999999999999", "0x10000000000000000", "1e3", "ten"} {
			err := pl.write(bad)
			wantErrno(t, pl.name+" "+strconv.Quote(bad), err, syscall.EINVAL)
			if got := readNum(t, pl.read); got != before {
				t.Errorf("%s %q changed the value to %d", pl.name, bad, got)
			}
		}
	}
}
