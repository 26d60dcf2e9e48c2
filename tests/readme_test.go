package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README runs as written. Its shell blocks are of three kinds, by the
// fence's info string:
//
//   - ```sh: commands to run. A line starting with "$ " is a command (one
//     line; the shell's, comments included); the lines up to the next
//     command are its output, stdout and stderr together. In the output,
//     "..." matches any text within a line, and a line of its own "..."
//     matches any lines, none included. A command must exit 0 unless the
//     block shows output for it: a failure shown on purpose, whose message
//     must then match.
//   - ```sh daemon: a daemon to start, "$ ... bin/fabricfs FLAGS MOUNTPOINT":
//     the test starts the fabricfs it built with FLAGS, on the RoCE port of
//     the README's /fabric, on a mount of its own that stands for MOUNTPOINT.
//   - ```sh notest: shown, not run (the setup commands).
//
// A "$ " line anywhere else (outside a fenced block, in a block of another
// kind) fails the test. The commands of every ```sh block run in order in one
// sh, as a reader types them into one shell, from a directory that looks
// like the repository's root (its top-level entries linked), with /fabric
// and the daemons' mount points standing for the test's own mounts.

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	kind  string // the fence's info string: "sh", "sh daemon", "sh notest" or another language
	line  int    // of the opening fence, 1-based
	steps []readmeStep
}

// readmeStep is one command of a block and the output the README shows.
type readmeStep struct {
	cmd  string
	want []string
	line int
}

// shellKinds are the kinds of block that may hold commands.
var shellKinds = map[string]bool{"sh": true, "sh daemon": true, "sh notest": true}

// parseReadme reads the fenced blocks of a README. A "$ " line outside a
// block (an indented block too) or in a block of another kind is refused:
// it would show a command that no test runs, unsaid.
func parseReadme(text string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	for i, l := range strings.Split(text, "\n") {
		n := i + 1
		command := strings.HasPrefix(l, "$ ")
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			blocks = append(blocks, readmeBlock{kind: strings.TrimPrefix(l, "```"), line: n})
			cur = &blocks[len(blocks)-1]
		case cur == nil && strings.HasPrefix(strings.TrimLeft(l, " \t"), "$ "):
			return nil, fmt.Errorf("README.md:%d: a command outside a block: fence it with ```sh", n)
		case cur == nil:
		case l == "```":
			cur = nil
		case command && !shellKinds[cur.kind]:
			return nil, fmt.Errorf("README.md:%d: a command in a block of kind %q: want sh, sh daemon or sh notest", n, cur.kind)
		case command:
			cur.steps = append(cur.steps, readmeStep{cmd: strings.TrimPrefix(l, "$ "), line: n})
		case cur.kind != "sh" && cur.kind != "sh daemon":
		case len(cur.steps) == 0:
			return nil, fmt.Errorf("README.md:%d: output before the block's first command", n)
		default:
			s := &cur.steps[len(cur.steps)-1]
			s.want = append(s.want, l)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: block not closed", cur.line)
	}
	return blocks, nil
}

// outputMatches reports whether the lines got are the lines want, "..."
// standing for any text within a line or, alone, for any lines.
func outputMatches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for k := 0; k <= len(got); k++ {
			if outputMatches(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	parts := strings.Split(want[0], "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	if !regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got[0]) {
		return false
	}
	return outputMatches(want[1:], got[1:])
}

// mountPoints are the mount points the README names: /fabric and those of
// its daemon blocks.
var mountPoints = regexp.MustCompile(`/fabric[0-9]*\b`)

// readmeDaemon parses a daemon block's command: the daemon's flags and the
// mount point it names.
func readmeDaemon(cmd string) (flags []string, mnt string, err error) {
	if i := strings.Index(cmd, " #"); i >= 0 {
		cmd = cmd[:i]
	}
	for _, part := range strings.Split(cmd, ";") {
		f := strings.Fields(part)
		if len(f) < 2 || f[0] != "bin/fabricfs" {
			continue
		}
		mnt = f[len(f)-1]
		if mountPoints.FindString(mnt) != mnt {
			return nil, "", fmt.Errorf("mount point %q: want /fabric followed by digits", mnt)
		}
		return f[1 : len(f)-1], mnt, nil
	}
	return nil, "", fmt.Errorf("no bin/fabricfs command in %q", cmd)
}

// TestREADMEOutputMatching: the matcher of expected output takes what it
// should and refuses the rest.
func TestREADMEOutputMatching(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"8", "8", true},
		{"8", "9", false},
		{"8", "", false},
		{"", "8", false},
		{"fi_sockaddr_in://127.0.0.1:...", "fi_sockaddr_in://127.0.0.1:40023", true},
		{"fi_sockaddr_in://127.0.0.1:...", "fi_sockaddr_in://127.0.0.2:40023", false},
		{"ok 10 64 ...", "ok 10 64 3.5", true},
		{"ok 10 64 ...", "ok 10 65 3.5", false},
		{"a.b", "axb", false},
		{"---\nfi_info:\n...", "---\nfi_info:\n    caps: x\n    mode: y", true},
		{"---\n...\nend", "---\nend", true},
		{"---\n...\nend", "---\nx\nend\ny", false},
	} {
		want, got := strings.Split(c.want, "\n"), strings.Split(c.got, "\n")
		if c.want == "" {
			want = nil
		}
		if c.got == "" {
			got = nil
		}
		if ok := outputMatches(want, got); ok != c.ok {
			t.Errorf("want %q, got %q: matched %v", c.want, c.got, ok)
		}
	}
	if _, err := parseReadme("    $ cat x\n"); err == nil {
		t.Error("an indented command was accepted")
	}
	if _, err := parseReadme("```bash\n$ cat x\n```\n"); err == nil {
		t.Error("a command in a block of another kind was accepted")
	}
	if b, err := parseReadme("```c\nint x;\n```\n```sh notest\nscripts/run.sh\n```\n"); err != nil || len(b) != 2 || len(b[1].steps) != 0 {
		t.Errorf("a C block and a notest block: %+v, %v", b, err)
	}
	if _, err := parseReadme("```sh\n8\n$ cat x\n```\n"); err == nil {
		t.Error("output before a command was accepted")
	}
	flags, mnt, err := readmeDaemon("mkdir -p /fabric2; bin/fabricfs -verbs-addrs 127.0.0.2 /fabric2  # Ctrl-C")
	if err != nil || mnt != "/fabric2" || strings.Join(flags, " ") != "-verbs-addrs 127.0.0.2" {
		t.Errorf("daemon flags %q, mount point %q, %v", flags, mnt, err)
	}
}

// TestREADME runs every ```sh block of README.md in order in one shell on a
// fresh mount, with the daemons its daemon blocks start, and checks each
// command's output and exit status.
func TestREADME(t *testing.T) {
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseReadme(string(text))
	if err != nil {
		t.Fatal(err)
	}
	needCmd(t, "gcc")
	needCmd(t, "python3")
	port := strconv.Itoa(freeUDPPort(t))
	mounts := map[string]string{"/fabric": mountWith(t, "-roce-port", port).mnt}
	for _, b := range blocks {
		if b.kind != "sh daemon" {
			continue
		}
		for _, s := range b.steps {
			flags, mnt, err := readmeDaemon(s.cmd)
			if err != nil {
				t.Fatalf("README.md:%d: %v", s.line, err)
			}
			if _, dup := mounts[mnt]; dup {
				t.Fatalf("README.md:%d: %s is mounted twice", s.line, mnt)
			}
			mounts[mnt] = mountWith(t, append(flags, "-roce-port", port)...).mnt
		}
	}
	local := func(s string) string {
		return mountPoints.ReplaceAllStringFunc(s, func(m string) string {
			if p, ok := mounts[m]; ok {
				return p
			}
			return m
		})
	}
	sh := startReadmeShell(t)
	ran := 0
	for _, b := range blocks {
		if b.kind != "sh" {
			continue
		}
		for _, s := range b.steps {
			out, status, err := sh.run(local(s.cmd), time.Minute)
			if err != nil {
				t.Fatalf("README.md:%d: %s: %v", s.line, s.cmd, err)
			}
			t.Logf("README.md:%d: $ %s\n%s", s.line, s.cmd, strings.TrimSuffix(out, "\n"))
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if out == "" {
				got = nil
			}
			want := make([]string, len(s.want))
			for i, w := range s.want {
				want[i] = local(w)
			}
			if !outputMatches(want, got) {
				t.Fatalf("README.md:%d: %s\nprinted:\n%s\nthe README shows:\n%s", s.line, s.cmd, out, strings.Join(want, "\n"))
			}
			if status != 0 && len(s.want) == 0 {
				t.Fatalf("README.md:%d: %s: exit status %d, and the README shows no failure", s.line, s.cmd, status)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("README.md has no command to run")
	}
	t.Logf("ran %d commands of README.md", ran)
}

// readmeShell is one sh reading commands from a pipe, as a reader's shell
// reads them from a terminal.
type readmeShell struct {
	cmd  *exec.Cmd
	in   *os.File
	done *bufio.Scanner
	dir  string // where each command's output and status go
	n    int
}

// startReadmeShell starts sh in a directory that looks like the
// repository's root, and registers a cleanup that ends it and whatever it
// left running (its process group), before the daemons stop.
func startReadmeShell(t *testing.T) *readmeShell {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	s := &readmeShell{dir: t.TempDir()}
	s.cmd = exec.Command("sh")
	s.cmd.Dir = work
	// The Python client's imports would leave bytecode in the repository.
	s.cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, outW
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	s.in, s.done = inW, bufio.NewScanner(outR)
	t.Cleanup(func() {
		s.in.Close()
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.cmd.Wait()
		outR.Close()
	})
	return s
}

// run runs one command in the shell and returns what it printed and its
// exit status; an error if it did not end within timeout.
func (s *readmeShell) run(cmd string, timeout time.Duration) (string, int, error) {
	s.n++
	out := filepath.Join(s.dir, strconv.Itoa(s.n))
	// The group runs in the shell itself, so variables, exec and cd carry
	// over to the next command; stdin is not the script.
	fmt.Fprintf(s.in, "{ %s\n} </dev/null >%s 2>&1; echo \"done %d $?\"\n", cmd, out, s.n)
	line := make(chan string, 1)
	go func() {
		if s.done.Scan() {
			line <- s.done.Text()
		}
		close(line)
	}()
	var l string
	select {
	case got, ok := <-line:
		if !ok {
			return "", 0, fmt.Errorf("the shell exited")
		}
		l = got
	case <-time.After(timeout):
		return "", 0, fmt.Errorf("did not end in %v", timeout)
	}
	var n, status int
	if _, err := fmt.Sscanf(l, "done %d %d", &n, &status); err != nil || n != s.n {
		return "", 0, fmt.Errorf("the shell printed %q", l)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return "", 0, err
	}
	return string(b), status, nil
}
