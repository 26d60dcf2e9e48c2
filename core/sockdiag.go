package core

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sizes and values of the kernel's sock_diag interface for inet sockets
// (linux/inet_diag.h, linux/netlink.h).
const (
	nlmsgHdrLen      = 16         // struct nlmsghdr
	inetDiagReqLen   = 56         // struct inet_diag_req_v2
	inetDiagReqIDOff = 8          // its id (struct inet_diag_sockid)
	inetDiagMsgLen   = 72         // struct inet_diag_msg
	inetDiagMsgIDOff = 4          // its id
	inetDiagUIDOff   = 64         // its idiag_uid
	inetDiagNoCookie = ^uint32(0) // INET_DIAG_NOCOOKIE, each half
)

// NoUID is the uid of a peer whose socket is not on this host ((uid_t)-1).
const NoUID = ^uint32(0)

// ownedSockets maps the cookie (SO_COOKIE) of each socket the daemon made
// for an endpoint to the endpoint's owner: the kernel says such a socket
// is the daemon's.
var ownedSockets = struct {
	sync.Mutex
	m map[uint64]uint32
}{m: map[uint64]uint32{}}

// OwnSocket records that the socket behind rc belongs to uid owner, for
// HostOf; DisownSocket(cookie) forgets it when the socket is closed.
func OwnSocket(rc syscall.RawConn, owner uint32) (cookie uint64, err error) {
	cerr := rc.Control(func(fd uintptr) {
		cookie, err = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	})
	if err = errors.Join(cerr, err); err != nil {
		return 0, err
	}
	ownedSockets.Lock()
	ownedSockets.m[cookie] = owner
	ownedSockets.Unlock()
	return cookie, nil
}

// DisownSocket forgets the socket OwnSocket returned cookie for.
func DisownSocket(cookie uint64) {
	ownedSockets.Lock()
	delete(ownedSockets.m, cookie)
	ownedSockets.Unlock()
}

// socketOwner is the uid a TCP socket of this host with local address
// local and remote address remote (zero: a listener) belongs to: the owner
// of the daemon's endpoint that made it, or the uid the kernel reports.
func socketOwner(local, remote netip.AddrPort) (uint32, error) {
	uid, cookie, err := diagLookup(local, remote)
	if err != nil {
		return NoUID, err
	}
	ownedSockets.Lock()
	owner, ok := ownedSockets.m[cookie]
	ownedSockets.Unlock()
	if ok {
		return owner, nil
	}
	return uid, nil
}

// diagLookup asks the kernel (NETLINK_SOCK_DIAG) for the TCP socket with
// that local and remote address, and returns its uid and cookie.
func diagLookup(local, remote netip.AddrPort) (uid uint32, cookie uint64, err error) {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(s)
	if err := unix.Sendto(s, diagRequest(local, remote), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(s, buf, 0)
	if err != nil {
		return 0, 0, err
	}
	return parseDiagReply(buf[:n])
}

// diagRequest is the netlink message asking for the one TCP socket with
// local address local and remote address remote.
func diagRequest(local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	r := b[nlmsgHdrLen:]
	r[0] = unix.AF_INET6
	if local.Addr().Unmap().Is4() {
		r[0] = unix.AF_INET
	}
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[inetDiagReqIDOff:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putDiagAddr(id[4:20], local.Addr(), r[0])
	putDiagAddr(id[20:36], remote.Addr(), r[0])
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)
	return b
}

// putDiagAddr writes a as sock_diag spells an address of family fam.
func putDiagAddr(b []byte, a netip.Addr, fam byte) {
	if !a.IsValid() {
		return
	}
	if fam == unix.AF_INET {
		v := a.Unmap().As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// parseDiagReply reads the uid and cookie of the socket in the kernel's
// answer to diagRequest, or the error it reports.
func parseDiagReply(b []byte) (uid uint32, cookie uint64, err error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return 0, 0, errors.New("sock_diag: short answer")
	}
	n := ne.Uint32(b[0:])
	if n < nlmsgHdrLen || uint64(n) > uint64(len(b)) {
		return 0, 0, errors.New("sock_diag: bad message length")
	}
	body := b[nlmsgHdrLen:n]
	switch ne.Uint16(b[4:]) {
	case unix.NLMSG_ERROR:
		if len(body) < 4 {
			return 0, 0, errors.New("sock_diag: short error")
		}
		if e := int32(ne.Uint32(body)); e < 0 {
			return 0, 0, syscall.Errno(-e)
		}
		return 0, 0, errors.New("sock_diag: no socket in the answer")
	case unix.SOCK_DIAG_BY_FAMILY:
		if len(body) < inetDiagMsgLen {
			return 0, 0, errors.New("sock_diag: short socket message")
		}
		id := body[inetDiagMsgIDOff:]
		cookie = uint64(ne.Uint32(id[40:])) | uint64(ne.Uint32(id[44:]))<<32
		return ne.Uint32(body[inetDiagUIDOff:]), cookie, nil
	}
	return 0, 0, errors.New("sock_diag: unexpected message type")
}
