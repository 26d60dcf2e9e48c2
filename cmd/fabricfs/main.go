// Command fabricfs mounts the fabricfs tree: libfabric's object model as
// files.
//
//	fabricfs [-debug] MOUNTPOINT
//
// It serves in the foreground until SIGINT or SIGTERM, then unmounts (lazily
// if files are still open), closes every object and exits. As root it mounts
// directly with allow_other, so every user can use the tree; as another user
// it mounts through fusermount3, and allow_other needs user_allow_other in
// /etc/fuse.conf (see -allow-other).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/fs"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("fabricfs: ")
	debug := flag.Bool("debug", false, "log every FUSE request")
	allowOther := flag.Bool("allow-other", os.Geteuid() == 0, "let every user use the tree (default as root)")
	mapping := flag.String("mapping", core.DefaultMapping(), "how clients reach shared memory: passthrough (FUSE passthrough; root, Linux >= 6.9) or symlink (links into a private tmpfs directory)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: fabricfs [flags] MOUNTPOINT\n\nMounts libfabric's object model as a file tree; see docs/tree.md.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *mapping, fs.Options{AllowOther: *allowOther, Debug: *debug}); err != nil {
		log.Fatal(err)
	}
}

func run(mnt, mapping string, opts fs.Options) error {
	tp, err := tcp.New()
	if err != nil {
		return fmt.Errorf("tcp provider: %w", err)
	}
	fab, err := core.New(rxm.Wrap(tp)) // tcp, with FI_EP_RDM as "tcp;ofi_rxm"
	if err != nil {
		return err
	}
	defer fab.Close()
	if mapping != fab.Shm.Mode {
		shm, err := core.NewShm(mapping, "")
		if err != nil {
			return err
		}
		fab.SetShm(shm)
	}
	srv, err := fs.Mount(fab, mnt, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	log.Printf("mounted on %s (pid %d)", mnt, os.Getpid())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case s := <-sig:
		log.Printf("%v: unmounting %s", s, mnt)
		fab.Close() // ends blocked reads and closes every socket
		if err := srv.Unmount(); err != nil {
			// Files are still open: detach the mount now; the kernel drops
			// the connection when this process exits.
			log.Printf("unmount: %v; detaching lazily", err)
			detach(mnt)
			return nil
		}
		<-done
	case <-done:
		log.Printf("%s was unmounted", mnt)
	}
	return nil
}

// detach lazily unmounts mnt: directly as root, else through fusermount3.
func detach(mnt string) {
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err == nil {
		return
	}
	if out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput(); err != nil {
		log.Printf("fusermount3 -u -z %s: %v: %s", mnt, err, out)
	}
}
