// Command ffpingpong is libfabric's fi_pingpong (util/pingpong.c, libfabric
// 1.17) on the fabricfs side: it speaks fi_pingpong's out-of-band control
// protocol over TCP, so that either side can be the real fi_pingpong, and
// moves the data through a mounted fabricfs tree only: ctl files, the
// endpoint's work rings, a CQ ring and a memory region (package clients/go/fabricfs).
//
//	ffpingpong [-mnt DIR] [options]            server: waits for a client
//	ffpingpong [-mnt DIR] [options] HOST       client: connects to HOST's server
//
// The options are fi_pingpong's where they make sense (-p, -d, -e, -m, -I,
// -S, -c, -B, -P, -v; see usage), plus -mnt and -timeout. As with
// fi_pingpong, both sides must be given the same -e, -m, -I and -S.
//
// The protocol (docs/interop.md has the whole sequence): the server listens
// on control port -B (47592), the client connects from -B (any port) to
// HOST:-P (47592). For FI_EP_MSG the server sends its passive endpoint's
// address (u32 length, big-endian; u32 address format, native; the raw
// struct sockaddr), the client connects its endpoint to it; for each size
// the two sync ("q\0", "a\0"), ping-pong -I times (the client sends first),
// and exchange the count of messages received (10 bytes of decimal ASCII,
// answered "cnt ok\0"); at the end each side sends "fin\0" with
// FI_TRANSMIT_COMPLETE and waits for the peer's.
//
// Each side prints fi_pingpong's table: one line per size with bytes,
// iterations, acknowledged messages, total bytes, time, MB/sec (10^6 bytes
// per second, both directions), usec/xfer (half a round trip) and
// Mxfers/sec.
//
// Deviations from fi_pingpong, all on errors or in its favour: the server's
// control socket listens on the address it advertises (the domain's, so
// 127.0.0.1 for -d lo) rather than on every interface; the client retries
// a refused control connection until -timeout; every completion and
// control read fails after -timeout instead of waiting forever; bad bytes
// from the peer, a received length other than the size sent, and a wrong
// "fin" are errors; -S also takes a comma-separated list (for two
// ffpingpongs: fi_pingpong takes one size or "all").
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// options are the command line.
type options struct {
	mnt      string
	prov     string // -p
	domain   string // -d
	epType   string // -e: msg or rdm
	mode     string // -m: msg or tagged
	iters    int    // -I
	sizes    sizeSpec
	check    bool   // -c
	srcPort  uint16 // -B
	dstPort  uint16 // -P
	host     string // the server to connect to; "" for the server
	timeout  time.Duration
	verbose  bool // -v
	sizesArg string
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2) // the usage is out
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ffpingpong: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "ffpingpong: %v\n", err)
		os.Exit(1)
	}
}

// parseArgs reads the flags and the optional server address. Flags may come
// after the address too, as fi_pingpong's getopt allows.
func parseArgs(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("ffpingpong", flag.ContinueOnError)
	fs.StringVar(&o.mnt, "mnt", "/fabric", "the fabricfs mount point")
	fs.StringVar(&o.prov, "p", "tcp", "provider (a directory of the tree)")
	fs.StringVar(&o.domain, "d", "lo", "domain (a directory of the provider)")
	fs.StringVar(&o.epType, "e", "msg", "endpoint type: msg|rdm")
	fs.StringVar(&o.mode, "m", "msg", "transmit mode: msg|tagged")
	fs.IntVar(&o.iters, "I", 10, "iterations per size")
	fs.StringVar(&o.sizesArg, "S", "", "transfer size, 'all', or a comma-separated list (default 64,256,1024,4096,65536,1048576)")
	fs.BoolVar(&o.check, "c", false, "check the data of every message (fi_pingpong's pattern)")
	srcPort := fs.Uint("B", 0, fmt.Sprintf("source control port (server: %d, client: any)", defaultCtrlPort))
	dstPort := fs.Uint("P", defaultCtrlPort, "destination control port (client)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "fail when a completion, an event or a control message takes longer than this")
	fs.BoolVar(&o.verbose, "v", false, "trace the protocol on stderr")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ffpingpong [options]        start a server\n       ffpingpong [options] HOST   connect to HOST's server\n\n")
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) > 1 {
		return nil, fmt.Errorf("one server address at most, got %q", pos)
	}
	if len(pos) == 1 {
		o.host = pos[0]
	}
	if *srcPort > 65535 || *dstPort > 65535 || *dstPort == 0 {
		return nil, errors.New("-B and -P take a port number (1-65535; -B 0: the default)")
	}
	o.srcPort, o.dstPort = uint16(*srcPort), uint16(*dstPort)
	if o.host == "" && o.srcPort == 0 {
		o.srcPort = defaultCtrlPort
	}
	if o.iters < 0 {
		return nil, errors.New("-I must not be negative")
	}
	if o.timeout <= 0 {
		return nil, errors.New("-timeout must be positive")
	}
	var err error
	o.sizes, err = parseSizes(o.sizesArg)
	return o, err
}

// sizeSpec is what -S asked for.
type sizeSpec struct {
	kind  int   // sizesDefault, sizesAll, sizesOne or sizesList
	sizes []int // the sizes of sizesOne and sizesList
}

const (
	sizesDefault = iota // no -S: fi_pingpong's default list
	sizesAll            // -S all
	sizesOne            // -S N
	sizesList           // -S N,M,...: ffpingpong only
)

func parseSizes(s string) (sizeSpec, error) {
	switch {
	case s == "":
		return sizeSpec{kind: sizesDefault}, nil
	case strings.EqualFold(s, "all"):
		return sizeSpec{kind: sizesAll}, nil
	}
	var sp sizeSpec
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 31)
		if err != nil {
			return sizeSpec{}, fmt.Errorf("-S: bad size %q: want a number of bytes below 2^31, a list of them, or 'all'", f)
		}
		sp.sizes = append(sp.sizes, int(n))
	}
	sp.kind = sizesOne
	if len(sp.sizes) > 1 {
		sp.kind = sizesList
	}
	return sp, nil
}

// debugf traces the protocol with -v.
func (o *options) debugf(format string, args ...any) {
	if o.verbose {
		fmt.Fprintf(os.Stderr, "ffpingpong: "+format+"\n", args...)
	}
}
