// Command fabricfs mounts the fabricfs tree: libfabric's object model as
// files.
//
//	fabricfs [-config FILE] [flags] MOUNTPOINT
//	fabricfs -version
//
// The flags, and the config file that sets the same keys, are package
// settings'; man/fabricfs.8 lists them all (generated from them) and
// man/fabricfs.5 the tree.
//
// It serves in the foreground until SIGINT or SIGTERM, then unmounts (lazily
// if files are still open), closes every object and exits. Started by
// systemd with Type=notify ($NOTIFY_SOCKET), it sends READY=1 once the
// tree is mounted and STOPPING=1 when a signal stops it
// (deploy/fabricfs.service). As root it mounts
// directly with allow_other, so every user can use the tree; as another user
// it mounts through fusermount3, and allow_other needs user_allow_other in
// /etc/fuse.conf (see -allow-other). A stale fabricfs mount on MOUNTPOINT,
// left by a daemon killed with SIGKILL, is detached first (with a log line);
// a stale mount of another file system is refused with the command that
// detaches it.
//
// Providers: tcp, over the host's interfaces (or those -tcp-iface names),
// and verbs, one software RDMA
// device per address of -verbs-addrs (the host's interface addresses by
// default; "none" for no device), all receiving RoCEv2 on UDP port
// -roce-port. Two daemons on one machine are two hosts of one fabric when
// they use different addresses (127.0.0.2, 127.0.0.3) and the same port.
// Interfaces that come up while it runs become domains too (verbs: without
// -verbs-addrs); docs/deploy.md runs one daemon per host.
//
// -engine-cpus (a list such as 0 or 2-3,6) keeps the ring engine's threads
// on those CPUs and lets its other threads run anywhere: with the
// applications kept off them (taskset), the engine has CPUs of its own,
// as a polling core does (docs/design.md, "The ring engine").
//
// The daemon logs (log/slog, text lines on standard error) from
// -log-level up: debug, info (the default: the mount, domains found,
// users' objects made and closed, connections made and lost), warn,
// error; docs/log.md.
//
// -limit-objects, -limit-memory and -limit-connections set what each user
// other than root may hold (core.DefaultLimits by default; 0: no limit);
// /limits shows them (docs/design.md, "Security model").
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/shm"
	"github.com/fabricfs/fabricfs/fs"
	"github.com/fabricfs/fabricfs/internal/settings"
	"github.com/fabricfs/fabricfs/providers/rxm"
	shmprov "github.com/fabricfs/fabricfs/providers/shm"
	"github.com/fabricfs/fabricfs/providers/tcp"
	"github.com/fabricfs/fabricfs/providers/verbs"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == shm.HolderArg {
		// A holder of shared memory for one user (shm.Allocator), started
		// by the daemon with a socket as standard input.
		if err := shm.ServeHolder(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		return
	}
	s := settings.Register(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: fabricfs [flags] MOUNTPOINT\n\nMounts libfabric's object model as a file tree; see fabricfs(8), fabricfs(5).\n\n")
		flag.PrintDefaults()
	}
	if err := settings.Parse(flag.CommandLine, s, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fabricfs:", err)
		os.Exit(2)
	}
	if s.Version {
		fmt.Print(core.DaemonVersions())
		return
	}
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := setLogLevel(s.LogLevel); err != nil {
		fmt.Fprintln(os.Stderr, "fabricfs: -log-level:", err)
		os.Exit(2)
	}
	tcfg, err := s.TCP()
	var vcfg verbs.Config
	if err == nil {
		vcfg, err = s.Verbs()
	}
	var cpus *unix.CPUSet
	if err == nil {
		cpus, err = s.CPUs()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fabricfs:", err)
		os.Exit(2)
	}
	if err := run(flag.Arg(0), s.Mapping, cpus, s.Limits, tcfg, vcfg, fs.Options{AllowOther: s.AllowOther, Debug: s.Debug, Poll: true}); err != nil {
		slog.Error(err.Error())
		os.Exit(1)
	}
}

func run(mnt, mapping string, engineCPUs *unix.CPUSet, limits core.Limits, tcfg tcp.Config, vcfg verbs.Config, opts fs.Options) error {
	// As many descriptors as the system allows; core.FDReserve of them
	// stay for the daemon's own use whatever users and peers open.
	if _, err := core.RaiseFDLimit(); err != nil {
		return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
	}
	tp, err := tcp.New(tcfg)
	if err != nil {
		return fmt.Errorf("tcp provider: %w", err)
	}
	vp, err := verbs.New(vcfg)
	if err != nil {
		return fmt.Errorf("verbs provider: %w", err)
	}
	defer vp.Close()
	// tcp and verbs, each with FI_EP_RDM as "tcp;ofi_rxm", "verbs;ofi_rxm";
	// shm between endpoints of this daemon
	fab, err := core.New(rxm.Wrap(tp), rxm.Wrap(vp), shmprov.New())
	if err != nil {
		return err
	}
	defer fab.Close()
	for r, n := range limits {
		fab.SetLimit(core.Resource(r), n)
	}
	if engineCPUs != nil {
		if err := fab.SetEngineCPUs(*engineCPUs); err != nil {
			return fmt.Errorf("-engine-cpus: %w", err)
		}
	}
	if mapping != fab.Shm.Mode {
		mem, err := shm.New(mapping)
		if err != nil {
			return err
		}
		fab.SetShm(mem)
	}
	fab.Shm.HolderCommand = []string{"/proc/self/exe", shm.HolderArg}
	if st, err := os.Stat("/proc/self/exe"); err == nil && mapping == shm.MapSymlink && os.Geteuid() == 0 && st.Mode().Perm()&0o005 != 0o005 {
		slog.Warn(fmt.Sprintf("this binary is not readable and executable by other users (mode %v): the kernel will not let them open their ring files through the holder processes of -mapping=symlink; make it 0755", st.Mode().Perm()))
	}
	if err := clearStale(mnt); err != nil {
		return err
	}
	// Signals are caught from before the mount is up: a SIGTERM that comes
	// as soon as the tree answers (a test's cleanup) still unmounts it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	dumpOnSignal()
	srv, err := fs.Mount(fab, mnt, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	slog.Info("mounted on "+mnt, "pid", os.Getpid())
	notify("READY=1\nSTATUS=mounted on " + mnt)

	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case s := <-sig:
		slog.Info(fmt.Sprintf("%v: unmounting %s", s, mnt))
		notify("STOPPING=1\nSTATUS=unmounting " + mnt)
		fab.Close() // ends blocked reads and closes every socket
		if err := srv.Unmount(); err != nil {
			// Files are still open: detach the mount now; the kernel drops
			// the connection when this process exits.
			slog.Warn(fmt.Sprintf("unmount: %v; detaching lazily", err))
			detach(mnt)
			return nil
		}
		<-done
	case <-done:
		slog.Info(mnt + " was unmounted")
	}
	return nil
}

// clearStale detaches a stale mount at mnt: one whose daemon is gone
// (killed with SIGKILL), which the kernel keeps and answers with ENOTCONN.
// A stale fabricfs mount (fuse.fabricfs in /proc/self/mountinfo) is
// detached with a log line; a stale mount of another file system is left
// alone, and the error says the command that detaches it.
func clearStale(mnt string) error {
	if _, err := os.Stat(mnt); !errors.Is(err, unix.ENOTCONN) {
		return nil
	}
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	fstype := mountType(abs)
	if fstype != "fuse.fabricfs" {
		return fmt.Errorf("%s is a stale mount (%s) whose server is gone: run 'umount -l %s' (or 'fusermount3 -u -z %s') and start again", mnt, fstype, abs, abs)
	}
	slog.Warn(abs + " is a stale fabricfs mount whose daemon is gone (killed?): detaching it")
	detach(abs)
	if _, err := os.Stat(mnt); err != nil {
		return fmt.Errorf("%s: stale fabricfs mount could not be detached (%v): run 'umount -l %s' and start again", mnt, err, abs)
	}
	return nil
}

// mountType is the file system type of the last mount at dir in
// /proc/self/mountinfo, or "" if none. Paths there escape space, tab,
// newline and backslash as octal.
func mountType(dir string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	typ := ""
	for _, l := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) > 4 && len(g) > 0 && unescape.Replace(f[4]) == dir {
			typ = g[0]
		}
	}
	return typ
}

// detach lazily unmounts mnt: directly as root, else through fusermount3.
func detach(mnt string) {
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err == nil {
		return
	}
	if out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput(); err != nil {
		slog.Warn(fmt.Sprintf("fusermount3 -u -z %s: %v: %s", mnt, err, out))
	}
}

// setLogLevel makes the daemon's log (log/slog, and the log package's,
// which go-fuse's -debug uses) text lines on standard error from level
// (debug, info, warn, error) up.
func setLogLevel(level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("%q is not debug, info, warn or error", level)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
	return nil
}
