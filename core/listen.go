package core

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
)

// capNetBindService is CAP_NET_BIND_SERVICE's number (linux/capability.h):
// the capability to bind ports below ip_unprivileged_port_start.
const capNetBindService = 10

// callerPID is the context key of the process behind a request.
type callerPID struct{}

// WithCaller returns ctx carrying the id of the thread whose request ctx
// serves (the FUSE request's pid), so that core can check what that
// process may do (MayBindPort).
func WithCaller(ctx context.Context, pid uint32) context.Context {
	return context.WithValue(ctx, callerPID{}, pid)
}

// listenAddr checks and completes an address a listener of domain d is to
// take for uid (fi_listen): the rules a process's bind(2) has, with the
// domain in place of the host.
//
//   - The IP must be one of the domain's addresses, or any loopback address
//     in a loopback domain (lo has all of 127.0.0.0/8); anything else is
//     FI_EADDRNOTAVAIL, as bind(2) of an address the host does not have.
//     The address taken has the domain's zone, whatever zone the caller
//     wrote.
//   - The unspecified address (0.0.0.0, ::) and no address mean the
//     domain's address of that family (the first family without an IP),
//     never every address of the host.
//   - A port below the kernel's ip_unprivileged_port_start (1024 unless
//     changed) needs what bind(2) needs: uid 0 or CAP_NET_BIND_SERVICE
//     (MayBindPort); else FI_EACCES.
//   - A name (fi_shm://NAME, fi_ns://NAME: fi.Addr.IsName) is an address
//     of a domain whose entries are named (FI_ADDR_STR without an IP,
//     the shm provider's), taken as it is: its provider refuses, when
//     the endpoint is enabled, a name another endpoint has.
//
// Listeners a provider opens by itself (an RDM endpoint's, at enable) take
// the domain's address and a free port, which these rules allow.
func (d *Domain) listenAddr(ctx context.Context, uid uint32, a fi.Addr) (fi.Addr, error) {
	if a.IsName() {
		for _, in := range d.Infos() {
			if in.Named() {
				return a, nil
			}
		}
		return fi.Addr{}, Errorf(fi.EADDRNOTAVAIL, "%s is a name; the endpoints of domain %s are not named", a.Str, d.Name)
	}
	var own []netip.Addr
	loopback := false
	for _, in := range d.Infos() {
		if in.SrcAddr != nil && in.SrcAddr.IP.Addr().IsValid() {
			ip := in.SrcAddr.IP.Addr().Unmap()
			own = append(own, ip)
			loopback = loopback || ip.IsLoopback()
		}
	}
	ip, port := a.IP.Addr().Unmap(), a.IP.Port()
	switch {
	case !ip.IsValid() || ip.IsUnspecified():
		found := false
		for _, o := range own {
			if !ip.IsValid() || o.Is4() == ip.Is4() {
				ip, found = o, true
				break
			}
		}
		if !found {
			return fi.Addr{}, Errorf(fi.EADDRNOTAVAIL, "domain %s has no address of that family to listen on", d.Name)
		}
	case ownAddr(own, &ip):
	case loopback && ip.IsLoopback():
		ip = ip.WithZone("")
	default:
		return fi.Addr{}, Errorf(fi.EADDRNOTAVAIL, "%v is not an address of domain %s; a listener takes an address of its own domain", ip, d.Name)
	}
	if port != 0 && int(port) < unprivilegedPortStart() && !MayBindPort(ctx, uid) {
		return fi.Addr{}, Errorf(fi.EACCES, "port %d is privileged (below %d): uid %d lacks CAP_NET_BIND_SERVICE", port, unprivilegedPortStart(), uid)
	}
	return fi.SockAddr(netip.AddrPortFrom(ip, port)), nil
}

// ownAddr reports whether *ip, zone aside, is one of own, and if so sets
// it to that address with the domain's zone: the caller's zone names no
// interface of the domain.
func ownAddr(own []netip.Addr, ip *netip.Addr) bool {
	for _, o := range own {
		if o.WithZone("") == ip.WithZone("") {
			*ip = o
			return true
		}
	}
	return false
}

// unprivilegedPortStart is the host's first port a process needs no
// privilege to bind (net.ipv4.ip_unprivileged_port_start, which IPv6
// obeys too); 1024 if it cannot be read.
func unprivilegedPortStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1024
	}
	return n
}

// MayBindPort reports whether the caller of ctx, user uid, may bind a
// privileged port: a caller (WithCaller) whose effective capabilities hold
// CAP_NET_BIND_SERVICE in the daemon's own user namespace, root included
// (bind(2) asks for the capability, not the uid: a root process that
// dropped it is refused); with no caller process (the daemon's own
// requests), uid 0 only. A process in another user namespace is refused:
// its capabilities are over that namespace only, not the daemon's
// network.
//
// The caller is blocked in its request while this runs, but a caller
// killed mid-request frees its pid, which another process may take. So
// /proc/PID is opened once, as a directory, and both files are read
// through it: they are one process's, or their reads fail. The process
// must still be alive after the reads (a directory of a process that
// ended answers no more lookups) and its uid must be uid.
func MayBindPort(ctx context.Context, uid uint32) bool {
	pid, ok := ctx.Value(callerPID{}).(uint32)
	if !ok || pid == 0 {
		return uid == 0
	}
	dir, err := unix.Open("/proc/"+strconv.FormatUint(uint64(pid), 10), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	theirs, err1 := readlinkat(dir, "ns/user")
	ours, err2 := os.Readlink("/proc/self/ns/user")
	if err1 != nil || err2 != nil || theirs != ours {
		return false
	}
	status, err := readFileAt(dir, "status")
	if err != nil {
		return false
	}
	if _, err := readlinkat(dir, "ns/user"); err != nil { // it ended meanwhile
		return false
	}
	var uidOK bool
	var capEff uint64
	for _, l := range bytes.Split(status, []byte("\n")) {
		name, val, _ := strings.Cut(string(l), ":")
		f := strings.Fields(val)
		switch name {
		case "Uid": // real, effective, saved, filesystem: FUSE's uid is the last
			uidOK = len(f) == 4 && f[3] == strconv.FormatUint(uint64(uid), 10)
		case "CapEff":
			if len(f) == 1 {
				capEff, _ = strconv.ParseUint(f[0], 16, 64)
			}
		}
	}
	return uidOK && capEff&(1<<capNetBindService) != 0
}

// readlinkat is readlinkat(2) of name in the directory dir.
func readlinkat(dir int, name string) (string, error) {
	b := make([]byte, 256)
	n, err := unix.Readlinkat(dir, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// readFileAt reads the file name of the directory dir: at most 64 KiB,
// more than a /proc/PID/status holds.
func readFileAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
