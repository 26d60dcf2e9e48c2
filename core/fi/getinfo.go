package fi

// This file implements fi_getinfo(3). Each rule quotes the man-page
// sentence it follows (fi_getinfo(3), or fi_domain(3), fi_endpoint(3),
// fi_fabric(3), fi_mr(3) where named); getinfo_test.go has a case quoting
// each.

import (
	"context"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// GetInfo implements fi_getinfo(3) over the entries the providers offer
// (offered: complete entries, best-performing first; each has SrcAddr set to
// its domain's address with port 0 and DestAddr nil). It returns deep copies
// of the entries that match, in the offered order, as the application gets
// them: fabric_attr.api_version is version, and attributes the hints ask for
// are filled in.
//
// The rules, in the order an entry is checked:
//
//   - Names: fabric_attr.prov_name (core provider first, "tcp;ofi_rxm";
//     "tcp" also matches utility providers over tcp), fabric and domain
//     names, opened fabric and domain, prov_version and api_version.
//   - ep_attr.type, unless FI_EP_UNSPEC.
//   - Capabilities: zero hints caps return the entry's caps; otherwise the
//     entry must offer the requested ones, modifiers limiting their primary
//     capability (none means all), and gets the requested caps plus the
//     secondary ones that cost nothing (not FI_SOURCE, FI_SOURCE_ERR).
//     tx_attr and rx_attr caps default to the applicable info caps.
//   - Modes: with hints, an entry needing a mode bit the application did not
//     set is left out (zero supports none); tx/rx mode 0 means the info
//     mode. mr_mode bits are modes of their own (fi_mr(3)), with FI_MR_BASIC,
//     FI_MR_SCALABLE and FI_LOCAL_MR for API before 1.5.
//   - Addresses: node/service (FI_SOURCE: the source, else the
//     destination), hints src_addr and dest_addr; an entry matches if its
//     domain's address can be the source (its IP or the wildcard; for a
//     destination alone, the address the route to it leaves from) and its
//     family fits addr_format.
//   - Other attributes: sizes are minimums, enumerations must agree unless
//     UNSPEC (a thread-safe, auto-progress, resource-managed domain serves
//     less demanding requests), flag sets must be offered.
//
// Errors are Errno values wrapped with a sentence, so errors.Is(err,
// fi.ENODATA) works: ENODATA when nothing matches (the sentence names what
// the closest entry lacks: "fi_getinfo: no provider supports FI_TAGGED on
// FI_EP_MSG"), EBADFLAGS for flags or capability bits that are not valid,
// EINVAL for malformed input, ENOSYS for a version newer than this
// implementation (1.17) or older than 1.0.
//
// Node names are resolved with the Go resolver (not with FI_NUMERICHOST).
// GetInfo may be called from many goroutines at once; it never modifies
// hints or offered.
func GetInfo(version Version, node, service string, flags uint64, hints *Info, offered []*Info) ([]*Info, error) {
	if version > apiVersion || version.Major() < 1 {
		return nil, getinfoErrorf(ENOSYS, "API version %v is not implemented (1.0 to %v are)", version, apiVersion)
	}
	if bad := flags &^ getinfoFlags; bad != 0 {
		return nil, getinfoErrorf(EBADFLAGS, "flags %#x are not fi_getinfo flags (FI_SOURCE, FI_NUMERICHOST, FI_PROV_ATTR_ONLY are)", bad)
	}
	if flags&uint64(PROV_ATTR_ONLY) != 0 {
		return provAttrOnly(offered)
	}
	q, err := newQuery(version, node, service, flags, hints)
	if err != nil {
		return nil, err
	}
	var out []*Info
	var closest *getinfoMiss
	for _, e := range offered {
		if e == nil {
			continue
		}
		info, miss := q.match(e)
		if info != nil {
			out = append(out, info)
		} else if closest == nil || miss.stage > closest.stage {
			closest = miss
		}
	}
	if len(out) == 0 {
		if closest == nil {
			return nil, getinfoErrorf(ENODATA, "no provider offers any fabric")
		}
		return nil, getinfoErrorf(ENODATA, "no provider supports %s", closest.what)
	}
	return out, nil
}

// apiVersion is the newest API version GetInfo implements.
const apiVersion = Version(MAJOR_VERSION<<16 | MINOR_VERSION)

// getinfoFlags are the flags fi_getinfo(3) lists under FLAGS.
const getinfoFlags = uint64(SOURCE | NUMERICHOST | PROV_ATTR_ONLY)

// getinfoError is an Errno with the sentence that explains it:
// "fi_getinfo: no provider supports FI_TAGGED on FI_EP_MSG".
type getinfoError struct {
	code Errno
	msg  string
}

func (e *getinfoError) Error() string { return "fi_getinfo: " + e.msg }
func (e *getinfoError) Unwrap() error { return e.code }

func getinfoErrorf(code Errno, format string, a ...any) error {
	return &getinfoError{code, fmt.Sprintf(format, a...)}
}

// flagText prints a flag set for a message, "FI_MSG|FI_TAGGED" rather than
// fi_tostr's "[ FI_MSG, FI_TAGGED ]"; a set without names prints in hex.
func flagText[T interface {
	~uint64 | ~uint32
	String() string
}](x T) string {
	names := func(x T) []string {
		return strings.Fields(strings.NewReplacer("[", "", "]", "", ",", "").Replace(x.String()))
	}
	var out []string
	for _, n := range names(x) {
		if !slices.Contains(names(0), n) { // FI_ORDER_NONE among set bits
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("%#x", uint64(x))
	}
	return strings.Join(out, "|")
}

// A getinfoMiss says why one offered entry did not match. When no entry
// matches, the miss of the entry that got furthest (highest stage, first in
// offered order) becomes the error: that is the provider the application
// most probably meant.
type getinfoMiss struct {
	stage int    // how far the entry got; see the stage* constants
	what  string // what it lacks: "FI_TAGGED on FI_EP_MSG"
}

const (
	stageIdentity = iota // provider, fabric and domain names
	stageEPType
	stageCaps
	stageMode
	stageAddr
	stageAttr
)

// Capability groups of fi_getinfo(3) "CAPABILITIES".
const (
	// "Primary capabilities: FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC,
	// FI_MULTICAST, FI_NAMED_RX_CTX, FI_DIRECTED_RECV, FI_VARIABLE_MSG,
	// FI_HMEM, FI_COLLECTIVE, FI_XPU". FI_XPU has no value in 1.17's headers.
	capPrimary = MSG | RMA | TAGGED | ATOMIC | MULTICAST | NAMED_RX_CTX |
		DIRECTED_RECV | VARIABLE_MSG | HMEM | COLLECTIVE
	// "Primary modifiers: FI_READ, FI_WRITE, FI_RECV, FI_SEND,
	// FI_REMOTE_READ, FI_REMOTE_WRITE"
	capMsgDir = SEND | RECV
	capRMADir = READ | WRITE | REMOTE_READ | REMOTE_WRITE
	// "Secondary capabilities: FI_MULTI_RECV, FI_SOURCE, FI_RMA_EVENT,
	// FI_SHARED_AV, FI_TRIGGER, FI_FENCE, FI_LOCAL_COMM, FI_REMOTE_COMM,
	// FI_SOURCE_ERR, FI_RMA_PMEM."
	capSecondary = MULTI_RECV | SOURCE | RMA_EVENT | SHARED_AV | TRIGGER |
		FENCE | LOCAL_COMM | REMOTE_COMM | SOURCE_ERR | RMA_PMEM
	// Capabilities in no group: FI_AV_USER_ID changes what completions
	// carry, FI_PEER is for peer providers; bits 60-63 are provider
	// specific ("60 - 63 provider specific", fabric.h).
	capOther = AV_USER_ID | Caps(PEER) | 0xf<<60
	capAll   = capPrimary | capMsgDir | capRMADir | capSecondary | capOther
	// Secondary capabilities that are reported only when requested, because
	// the man page says they cost performance ("may adversely affect
	// performance": FI_SOURCE, FI_SOURCE_ERR) or because they change
	// behaviour (capOther).
	capCostly = SOURCE | SOURCE_ERR | capOther
	// Capabilities that "apply to the transmit attributes" and "apply to the
	// receive attributes" (fi_endpoint(3)).
	capTx = MSG | RMA | TAGGED | ATOMIC | READ | WRITE | SEND | HMEM | TRIGGER |
		FENCE | MULTICAST | RMA_PMEM | NAMED_RX_CTX | COLLECTIVE
	capRx = MSG | RMA | TAGGED | ATOMIC | REMOTE_READ | REMOTE_WRITE | RECV |
		HMEM | TRIGGER | RMA_PMEM | DIRECTED_RECV | VARIABLE_MSG | MULTI_RECV |
		SOURCE | RMA_EVENT | SOURCE_ERR | COLLECTIVE
)

// mrBasicMap is what FI_MR_BASIC stands for: "The behavior of basic
// registration is equivalent to requiring the following mr_mode bits:
// FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, and FI_MR_PROV_KEY." (fi_mr(3))
const mrBasicMap = MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY

// mrRMATarget are the mr_mode bits that only concern memory that peers
// access: keys, addressing, raw keys and RMA events.
const mrRMATarget = MR_RAW | MR_VIRT_ADDR | MR_PROV_KEY | MR_RMA_EVENT

// impliedCaps adds the modifiers a primary capability implies: "If no
// modifiers are specified for an applicable capability, all relevant
// modifiers are assumed." The groups are FI_MSG and FI_TAGGED with FI_SEND
// and FI_RECV, and FI_RMA and FI_ATOMIC with FI_READ, FI_WRITE,
// FI_REMOTE_READ and FI_REMOTE_WRITE.
func impliedCaps(c Caps) Caps {
	if c&(MSG|TAGGED) != 0 && c&capMsgDir == 0 {
		c |= capMsgDir
	}
	if c&(RMA|ATOMIC) != 0 && c&capRMADir == 0 {
		c |= capRMADir
	}
	return c
}

// txCaps keeps the capabilities of c that apply to a transmit context.
// A primary capability whose modifiers exclude sending (FI_MSG|FI_RECV) does
// not apply to it.
func txCaps(c Caps) Caps {
	t := c & capTx
	if c&capMsgDir != 0 && c&SEND == 0 {
		t &^= MSG | TAGGED | MULTICAST
	}
	if c&capRMADir != 0 && c&(READ|WRITE) == 0 {
		t &^= RMA | ATOMIC
	}
	return t
}

// rxCaps keeps the capabilities of c that apply to a receive context.
func rxCaps(c Caps) Caps {
	r := c & capRx
	if c&capMsgDir != 0 && c&RECV == 0 {
		r &^= MSG | TAGGED | DIRECTED_RECV | VARIABLE_MSG | MULTI_RECV
	}
	if c&capRMADir != 0 && c&(REMOTE_READ|REMOTE_WRITE) == 0 {
		r &^= RMA | ATOMIC | RMA_EVENT
	}
	return r
}

// usableSecondary returns the secondary capabilities of free that make
// sense with caps: FI_RMA_EVENT "requires that FI_REMOTE_READ and/or
// FI_REMOTE_WRITE be enabled on the endpoint", FI_RMA_PMEM "requires that
// FI_RMA be set".
func usableSecondary(caps, free Caps) Caps {
	if caps&(REMOTE_READ|REMOTE_WRITE) == 0 || caps&(RMA|ATOMIC) == 0 {
		free &^= RMA_EVENT
	}
	if caps&RMA == 0 {
		free &^= RMA_PMEM
	}
	return free
}

// rmaTarget reports whether caps (with modifiers made explicit) let peers
// access the endpoint's memory.
func rmaTarget(c Caps) bool {
	return c&(RMA|ATOMIC) != 0 && c&(REMOTE_READ|REMOTE_WRITE) != 0
}

// checkCaps returns an error if c (the caps of hints, tx_attr or rx_attr)
// breaks a rule of the CAPABILITIES section: "FI_EBADFLAGS: The specified
// endpoint or domain capability or operation flags are invalid."
func checkCaps(field string, c Caps) error {
	bad := func(format string, a ...any) error {
		return getinfoErrorf(EBADFLAGS, "%s: "+format, append([]any{field}, a...)...)
	}
	if x := c &^ capAll; x != 0 {
		return bad("%#x are not capabilities", uint64(x))
	}
	full := impliedCaps(c)
	switch {
	case c&(READ|WRITE|REMOTE_READ|REMOTE_WRITE) != 0 && c&(RMA|ATOMIC) == 0:
		// FI_READ: "This flag requires that FI_RMA and/or FI_ATOMIC be set."
		return bad("%s requires FI_RMA or FI_ATOMIC", flagText(c&capRMADir))
	case c&RMA_EVENT != 0 && full&(REMOTE_READ|REMOTE_WRITE) == 0:
		return bad("FI_RMA_EVENT requires FI_REMOTE_READ or FI_REMOTE_WRITE")
	case c&SOURCE_ERR != 0 && c&SOURCE == 0:
		return bad("FI_SOURCE_ERR must be paired with FI_SOURCE")
	case c&MULTICAST != 0 && c&MSG == 0:
		return bad("FI_MULTICAST must be paired with FI_MSG")
	case c&VARIABLE_MSG != 0 && c&(MSG|TAGGED) == 0:
		return bad("FI_VARIABLE_MSG requires FI_MSG or FI_TAGGED")
	case c&RMA_PMEM != 0 && c&RMA == 0:
		return bad("FI_RMA_PMEM requires FI_RMA")
	}
	return nil
}

// A getinfoQuery is one call of GetInfo, its hints checked and its node
// and service resolved.
type getinfoQuery struct {
	version Version
	h       *Info // hints; an empty Info when the application gave none
	noHints bool
	// mrMode is the mr_mode the application supports; mrAny when it said
	// nothing (no hints or no domain_attr).
	mrMode MRMode
	mrAny  bool
	// legacyMR: API before 1.5, or mr_mode FI_MR_BASIC or FI_MR_SCALABLE;
	// then FI_LOCAL_MR (mode) stands for FI_MR_LOCAL (mr_mode).
	legacyMR bool

	src, dst *addrChoice // requested source and destination, nil if none
	routes   map[netip.Addr]netip.Addr
}

// An addrChoice is a requested address: the candidate IPs (a name may
// resolve to several, of both families) and a port. Each entry takes the
// first IP of its own family.
type addrChoice struct {
	ips  []netip.Addr
	port uint16
	desc string // as the application wrote it, for messages
}

func (c *addrChoice) pick(v4, v6 bool) (netip.Addr, bool) {
	for _, ip := range c.ips {
		if ip.Is4() && v4 || ip.Is6() && v6 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func newQuery(version Version, node, service string, flags uint64, hints *Info) (*getinfoQuery, error) {
	q := &getinfoQuery{version: version, h: hints, mrAny: true}
	if hints == nil {
		q.h, q.noHints = &Info{}, true
	}
	h := q.h
	q.legacyMR = version < MakeVersion(1, 5)

	if err := checkCaps("caps", h.Caps); err != nil {
		return nil, err
	}
	hintTx, hintRx := sideHints(h)
	for _, side := range []struct {
		name     string
		caps     Caps
		applies  Caps
		restrict func(Caps) Caps
	}{
		{"tx_attr.caps", hintTx.caps, capTx, txCaps},
		{"rx_attr.caps", hintRx.caps, capRx, rxCaps},
	} {
		if side.caps == 0 {
			continue
		}
		// Capabilities that do not apply to the context ("The following
		// capabilities apply to the transmit attributes: ...") are
		// ignored, as libfabric ignores receive capabilities in tx_attr.
		if x := side.caps &^ capAll; x != 0 {
			return nil, getinfoErrorf(EBADFLAGS, "%s: %#x are not capabilities", side.name, uint64(x))
		}
		if err := checkCaps(side.name, side.caps&side.applies); err != nil {
			return nil, err
		}
		// "The capabilities must be a subset of those requested of the
		// associated endpoint."
		if h.Caps != 0 {
			if x := side.restrict(impliedCaps(side.caps)) &^ impliedCaps(h.Caps); x != 0 {
				return nil, getinfoErrorf(EBADFLAGS, "%s %s are not among the requested caps", side.name, flagText(x))
			}
		}
	}

	if d := h.DomainAttr; d != nil {
		if d.Threading > THREAD_ENDPOINT {
			return nil, getinfoErrorf(EINVAL, "domain_attr.threading %d is not a threading model", d.Threading)
		}
		if d.ControlProgress > PROGRESS_MANUAL || d.DataProgress > PROGRESS_MANUAL {
			return nil, getinfoErrorf(EINVAL, "domain_attr progress %d/%d is not a progress model", d.ControlProgress, d.DataProgress)
		}
		if d.ResourceMgmt > RM_ENABLED {
			return nil, getinfoErrorf(EINVAL, "domain_attr.resource_mgmt %d is not a resource management model", d.ResourceMgmt)
		}
		if d.AVType > AV_TABLE {
			return nil, getinfoErrorf(EINVAL, "domain_attr.av_type %d is not an AV type", d.AVType)
		}
		q.mrMode, q.mrAny = d.MRMode, false
		switch m := d.MRMode; {
		case m&(MR_BASIC|MR_SCALABLE) != 0 && m != MR_BASIC && m != MR_SCALABLE:
			// "This flag may not be used in conjunction with other mr_mode bits."
			return nil, getinfoErrorf(EINVAL, "domain_attr.mr_mode %s: FI_MR_BASIC and FI_MR_SCALABLE must be set alone", flagText(m))
		case q.legacyMR && m&^(MR_BASIC|MR_SCALABLE) != 0:
			return nil, getinfoErrorf(EINVAL, "domain_attr.mr_mode %s: API %v knows only FI_MR_UNSPEC, FI_MR_BASIC and FI_MR_SCALABLE",
				flagText(m), version)
		case m == MR_BASIC || m == MR_SCALABLE:
			q.legacyMR = true
		}
		if version >= MakeVersion(1, 5) && d.AuthKey != nil && uint64(len(d.AuthKey)) != d.AuthKeySize {
			return nil, getinfoErrorf(EINVAL, "domain_attr.auth_key has %d bytes, auth_key_size says %d", len(d.AuthKey), d.AuthKeySize)
		}
	}
	if ep := h.EPAttr; ep != nil {
		if ep.Type > EP_SOCK_DGRAM {
			return nil, getinfoErrorf(EINVAL, "ep_attr.type %d is not an endpoint type", ep.Type)
		}
		if version >= MakeVersion(1, 5) && ep.AuthKey != nil && uint64(len(ep.AuthKey)) != ep.AuthKeySize {
			return nil, getinfoErrorf(EINVAL, "ep_attr.auth_key has %d bytes, auth_key_size says %d", len(ep.AuthKey), ep.AuthKeySize)
		}
	}
	if err := q.resolve(node, service, flags); err != nil {
		return nil, err
	}
	return q, nil
}

// sideHint is what hints ask of tx_attr or rx_attr: caps and mode, zero
// when the attribute is absent.
type sideHint struct {
	caps Caps
	mode Mode
}

func sideHints(h *Info) (tx, rx sideHint) {
	if h.TxAttr != nil {
		tx = sideHint{h.TxAttr.Caps, h.TxAttr.Mode}
	}
	if h.RxAttr != nil {
		rx = sideHint{h.RxAttr.Caps, h.RxAttr.Mode}
	}
	return tx, rx
}

// resolve sets q.src and q.dst from node, service, flags and the hints'
// addresses:
//
//   - FI_SOURCE: "the node and service parameters specify the local source
//     address"; hints->src_addr "will be ignored in hints if FI_SOURCE flag
//     is set", hints->dest_addr is used.
//   - otherwise node and service give the destination; hints->dest_addr
//     "will be ignored in hints unless the node and service parameters are
//     NULL", hints->src_addr is used.
func (q *getinfoQuery) resolve(node, service string, flags uint64) error {
	h := q.h
	source := flags&uint64(SOURCE) != 0
	if source && node == "" && service == "" {
		return getinfoErrorf(EINVAL, "FI_SOURCE needs a node or a service")
	}
	hintAddr := func(field string, a *Addr) (*addrChoice, error) {
		if a == nil {
			return nil, nil
		}
		ip := a.IP.Addr()
		switch {
		case !ip.IsValid():
			return nil, getinfoErrorf(EINVAL, "hints %s has no IP address", field)
		case a.Format == SOCKADDR_IN && !ip.Is4(), a.Format == SOCKADDR_IN6 && !ip.Is6():
			return nil, getinfoErrorf(EINVAL, "hints %s %v does not have format %v", field, a.IP, a.Format)
		case a.Format != SOCKADDR_IN && a.Format != SOCKADDR_IN6 && a.Format != SOCKADDR &&
			a.Format != ADDR_STR && a.Format != FORMAT_UNSPEC:
			return nil, getinfoErrorf(EINVAL, "hints %s has format %v; only IP addresses are supported", field, a.Format)
		}
		return &addrChoice{ips: []netip.Addr{ip}, port: a.IP.Port(), desc: a.IP.String()}, nil
	}
	var err error
	if source {
		if q.src, err = q.nodeAddr(node, service, flags); err != nil {
			return err
		}
		q.dst, err = hintAddr("dest_addr", h.DestAddr)
		return err
	}
	if node != "" || service != "" {
		if q.dst, err = q.nodeAddr(node, service, flags); err != nil {
			return err
		}
	} else if q.dst, err = hintAddr("dest_addr", h.DestAddr); err != nil {
		return err
	}
	q.src, err = hintAddr("src_addr", h.SrcAddr)
	return err
}

// nodeAddr resolves node and service: an FI_ADDR_STR string
// ("fi_sockaddr_in://127.0.0.1:7000"), a numeric address, or (without
// FI_NUMERICHOST) a name the Go resolver looks up. An empty node is the
// wildcard address for a source, the loopback address for a destination,
// as getaddrinfo(3) gives them.
func (q *getinfoQuery) nodeAddr(node, service string, flags uint64) (*addrChoice, error) {
	if strings.Contains(node, "://") {
		// "Applications may also pass in an FI_ADDR_STR formatted address
		// ... as the node parameter. In such cases, the service parameter
		// must be NULL."
		if service != "" {
			return nil, getinfoErrorf(EINVAL, "node %q is an FI_ADDR_STR address: service %q must be empty", node, service)
		}
		a, err := ParseAddr(node)
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "node %q: %v", node, err)
		}
		return &addrChoice{ips: []netip.Addr{a.IP.Addr()}, port: a.IP.Port(), desc: node}, nil
	}
	c := &addrChoice{desc: node}
	if service != "" {
		p, err := servicePort(service)
		if err != nil {
			return nil, err
		}
		c.port = p
		c.desc = net.JoinHostPort(node, service)
	}
	switch {
	case node == "" && flags&uint64(SOURCE) != 0:
		c.ips = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	case node == "":
		c.ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	default:
		if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(node, "["), "]")); err == nil {
			c.ips = []netip.Addr{ip}
			break
		}
		if flags&uint64(NUMERICHOST) != 0 {
			// "FI_NUMERICHOST: Indicates that the node parameter is a
			// numeric string representation of a fabric address"
			return nil, getinfoErrorf(EINVAL, "node %q is not a numeric address (FI_NUMERICHOST)", node)
		}
		ips, err := getinfoLookupHost(node)
		if err != nil || len(ips) == 0 {
			return nil, getinfoErrorf(ENODATA, "cannot resolve node %q: %v", node, err)
		}
		for _, ip := range ips {
			c.ips = append(c.ips, ip.Unmap())
		}
	}
	return c, nil
}

// servicePort turns a service into a port: a number, or a name such as
// "http" looked up like getaddrinfo(3) does.
func servicePort(service string) (uint16, error) {
	if strings.Trim(service, "0123456789") == "" {
		p, err := strconv.ParseUint(service, 10, 16)
		if err != nil {
			return 0, getinfoErrorf(EINVAL, "service %q is not a port number", service)
		}
		return uint16(p), nil
	}
	p, err := getinfoLookupPort(service)
	if err != nil || p < 0 || p > 65535 {
		return 0, getinfoErrorf(ENODATA, "unknown service %q", service)
	}
	return uint16(p), nil
}

// Name, service and route look-ups; tests replace them.
var (
	getinfoLookupHost = func(host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	}
	getinfoLookupPort = func(service string) (int, error) {
		return net.DefaultResolver.LookupPort(context.Background(), "tcp", service)
	}
	// getinfoRoute returns the local address the kernel would send from
	// to reach dst, as a connected UDP socket shows it (no packet is sent).
	getinfoRoute = func(dst netip.Addr) (netip.Addr, bool) {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		if err != nil {
			return netip.Addr{}, false
		}
		defer c.Close()
		la, ok := c.LocalAddr().(*net.UDPAddr)
		if !ok {
			return netip.Addr{}, false
		}
		ip := la.AddrPort().Addr()
		if dst.Is4() {
			ip = ip.Unmap()
		}
		return ip, true
	}
)

// route is getinfoRoute, remembered for the query.
func (q *getinfoQuery) route(dst netip.Addr) (netip.Addr, bool) {
	if src, ok := q.routes[dst]; ok {
		return src, src.IsValid()
	}
	src, ok := getinfoRoute(dst)
	if !ok {
		src = netip.Addr{}
	}
	if q.routes == nil {
		q.routes = map[netip.Addr]netip.Addr{}
	}
	q.routes[dst] = src
	return src, ok
}

// provAttrOnly answers FI_PROV_ATTR_ONLY: "All providers will return exactly
// one fi_info struct ... The returned fi_info struct will contain default
// values for all members, with the exception of fabric_attr. The fabric_attr
// member will have the prov_name and prov_version values filled in."
// A layered name such as "tcp;ofi_rxm" names two providers, tcp and ofi_rxm;
// "the version would always refer to that of the utility provider"
// (fi_fabric(3)), so each provider's version is taken from an entry it tops.
func provAttrOnly(offered []*Info) ([]*Info, error) {
	var out []*Info
	seen := map[string]*Info{}
	for _, e := range offered {
		if e == nil || e.FabricAttr == nil {
			continue
		}
		names := splitProvName(e.FabricAttr.ProvName)
		for i, name := range names {
			key := strings.ToLower(name)
			info := seen[key]
			if info == nil {
				info = &Info{TxAttr: &TxAttr{}, RxAttr: &RxAttr{}, EPAttr: &EPAttr{}, DomainAttr: &DomainAttr{},
					FabricAttr: &FabricAttr{ProvName: name}}
				seen[key] = info
				out = append(out, info)
			}
			if i == len(names)-1 && info.FabricAttr.ProvVersion == 0 {
				info.FabricAttr.ProvVersion = e.FabricAttr.ProvVersion
			}
		}
	}
	if len(out) == 0 {
		return nil, getinfoErrorf(ENODATA, "no provider is available")
	}
	return out, nil
}

// splitProvName splits a prov_name at ";", dropping empty components.
func splitProvName(s string) []string {
	var names []string
	for _, n := range strings.Split(s, ";") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// isUtilProv reports whether name is a utility provider ("ofi_rxm").
func isUtilProv(name string) bool { return strings.HasPrefix(strings.ToLower(name), "ofi_") }

// provNameMatches reports whether an entry's prov_name (its layering, core
// provider first: "tcp;ofi_rxm") satisfies the hint's. fi_fabric(3): "To
// request an utility provider layered over a specific core provider, both
// the provider names have to be specified using ";" as delimiter. e.g.
// "ofi_rxm;verbs" or "verbs;ofi_rxm"". So, as in libfabric:
//
//   - a core provider alone ("tcp") matches that provider and every utility
//     provider layered over it ("tcp;ofi_rxm");
//   - a utility provider alone ("ofi_rxm") matches it over any core provider;
//   - two or more names match exactly that layering; with two names the
//     order does not matter;
//   - trailing "^name" components exclude entries that use that provider.
//
// Names compare without regard to case.
func provNameMatches(hint, entry string) bool {
	want := splitProvName(hint)
	have := splitProvName(entry)
	for len(want) > 0 && strings.HasPrefix(want[len(want)-1], "^") {
		excl := want[len(want)-1][1:]
		for _, n := range have {
			if strings.EqualFold(n, excl) {
				return false
			}
		}
		want = want[:len(want)-1]
	}
	switch {
	case len(want) == 0:
		return true
	case len(have) == 0:
		return false
	case len(want) == 1 && isUtilProv(want[0]):
		return strings.EqualFold(want[0], have[len(have)-1])
	case len(want) == 1:
		return strings.EqualFold(want[0], have[0])
	case len(want) == 2 && len(have) == 2 && isUtilProv(want[0]) && !isUtilProv(want[1]):
		want = []string{want[1], want[0]}
	}
	if len(want) != len(have) {
		return false
	}
	for i := range want {
		if !strings.EqualFold(want[i], have[i]) {
			return false
		}
	}
	return true
}

// Rankings for enumerations where one value serves another: "All providers
// are required to support FI_THREAD_SAFE" and a thread-safe provider serves
// an application that serializes more; automatic progress serves an
// application that drives progress itself; a provider that protects its
// resources serves an application that gave up that protection. A lower
// rank serves every higher one.
var (
	threadRank = map[Threading]int{THREAD_SAFE: 1, THREAD_FID: 2, THREAD_ENDPOINT: 3,
		THREAD_COMPLETION: 4, THREAD_DOMAIN: 5}
	progressRank = map[Progress]int{PROGRESS_AUTO: 1, PROGRESS_MANUAL: 2}
	rmRank       = map[ResourceMgmt]int{RM_ENABLED: 1, RM_DISABLED: 2}
)

// serves reports whether an entry offering have satisfies a hint asking
// want, given a rank: UNSPEC (zero) hints are wildcards, an UNSPEC entry
// accepts whatever is asked.
func serves[T comparable](rank map[T]int, want, have T) bool {
	var unspec T
	if want == unspec || have == unspec || want == have {
		return true
	}
	return rank[have] != 0 && rank[have] <= rank[want]
}

// attrCheck collects the first requirement an entry fails.
type attrCheck struct{ what string }

func (c *attrCheck) failf(format string, a ...any) {
	if c.what == "" {
		c.what = fmt.Sprintf(format, a...)
	}
}

// atLeast: "Output values will be greater than or equal to the requested
// input values."
func (c *attrCheck) atLeast(name string, want, have uint64) {
	if want > have {
		c.failf("%s >= %d (offered: %d)", name, want, have)
	}
}

// subset: every requested bit must be offered; missing is want &^ have.
func subset[T interface {
	~uint64
	String() string
}](c *attrCheck, name string, want, have T) {
	if x := want &^ have; x != 0 {
		c.failf("%s %s", name, flagText(x))
	}
}

// An entryMatch is one offered entry being matched: out starts as a
// complete deep copy of the entry and becomes what the application gets.
type entryMatch struct {
	q    *getinfoQuery
	e    *Info
	out  *Info
	have Caps   // the entry's caps, modifiers made explicit
	need MRMode // the mr_mode bits the entry requires for the output caps
}

// match checks one offered entry against the query and returns the entry as
// the application gets it, or why it does not match. The stages run in
// order; the first that fails says why, and how far the entry got.
func (q *getinfoQuery) match(e *Info) (*Info, *getinfoMiss) {
	out := e.Clone()
	if out.TxAttr == nil {
		out.TxAttr = &TxAttr{}
	}
	if out.RxAttr == nil {
		out.RxAttr = &RxAttr{}
	}
	if out.EPAttr == nil {
		out.EPAttr = &EPAttr{}
	}
	if out.DomainAttr == nil {
		out.DomainAttr = &DomainAttr{}
	}
	if out.FabricAttr == nil {
		out.FabricAttr = &FabricAttr{}
	}
	m := &entryMatch{q: q, e: e, out: out, have: impliedCaps(e.Caps)}
	for stage, check := range []func() string{
		stageIdentity: m.identity,
		stageEPType:   m.epType,
		stageCaps:     m.caps,
		stageMode:     m.modes,
		stageAddr:     m.addrs,
		stageAttr:     m.attrs,
	} {
		if what := check(); what != "" {
			if stage >= stageCaps {
				what += " on " + out.EPAttr.Type.String()
			}
			return nil, &getinfoMiss{stage, what}
		}
	}
	// "If hints->handle is set to struct fid_pep, the hints->handle will
	// be copied to info->handle on output from fi_getinfo."
	if h := q.h.Handle; h != 0 {
		out.Handle = h
	}
	// api_version: "The interface version requested by the application.
	// This value corresponds to the version parameter passed into
	// fi_getinfo(3)." (fi_fabric(3))
	out.FabricAttr.APIVersion = q.version
	return out, nil
}

// identity: which provider, fabric and domain.
func (m *entryMatch) identity() string {
	q, fab, dom := m.q, m.out.FabricAttr, m.out.DomainAttr
	// An entry whose provider implements an older API than requested
	// cannot serve the call (its fabric_attr.api_version, when set, is the
	// newest API it implements).
	if v := fab.APIVersion; v != 0 && v < q.version {
		return fmt.Sprintf("API version %v (%s implements %v)", q.version, fab.ProvName, v)
	}
	if hf := q.h.FabricAttr; hf != nil {
		offers := fab.APIVersion
		if offers == 0 {
			offers = apiVersion
		}
		switch {
		case hf.ProvName != "" && !provNameMatches(hf.ProvName, fab.ProvName):
			return fmt.Sprintf("prov_name %q", hf.ProvName)
		case hf.Name != "" && hf.Name != fab.Name:
			return fmt.Sprintf("fabric %q", hf.Name)
		case hf.Fabric != 0 && hf.Fabric != fab.Fabric:
			// "a user may set this to an opened fabric instance to
			// restrict output to the given fabric"
			return fmt.Sprintf("opened fabric %#x", hf.Fabric)
		case hf.ProvVersion > fab.ProvVersion:
			return fmt.Sprintf("prov_version >= %v", hf.ProvVersion)
		case hf.APIVersion > offers:
			return fmt.Sprintf("api_version %v", hf.APIVersion)
		}
	}
	if hd := q.h.DomainAttr; hd != nil {
		switch {
		case hd.Name != "" && hd.Name != dom.Name:
			return fmt.Sprintf("domain %q", hd.Name)
		case hd.Domain != 0 && hd.Domain != dom.Domain:
			// "a user may set this to an opened domain instance to
			// restrict output to the given domain"
			return fmt.Sprintf("opened domain %#x", hd.Domain)
		}
	}
	return ""
}

// epType: the endpoint type, FI_EP_UNSPEC on either side matching any.
func (m *entryMatch) epType() string {
	he, ep := m.q.h.EPAttr, m.out.EPAttr
	if he == nil || he.Type == EP_UNSPEC {
		return ""
	}
	if ep.Type != EP_UNSPEC && ep.Type != he.Type {
		return he.Type.String()
	}
	ep.Type = he.Type
	return ""
}

// caps: fi_info, tx_attr, rx_attr and domain_attr capabilities, and the
// mr_mode bits they need.
func (m *entryMatch) caps() string {
	h, out := m.q.h, m.out
	// "If capabilities in the hint parameter are set to 0, the underlying
	// provider will return the set of capabilities which are supported."
	// Otherwise the requested primary capabilities and their modifiers,
	// the requested secondary capabilities, and the secondary capabilities
	// that cost nothing.
	if x := impliedCaps(h.Caps) &^ m.have; x != 0 {
		return flagText(x)
	}
	caps := m.e.Caps
	if h.Caps != 0 {
		caps = impliedCaps(h.Caps)
		caps |= usableSecondary(caps, m.e.Caps&capSecondary&^capCostly)
	}

	// Memory registration (fi_mr(3)): "If a provider requires the behavior
	// defined for an mr_mode bit, it will leave the bit set on output to
	// fi_getinfo. Otherwise, the provider can clear the bit."
	q, prov := m.q, out.DomainAttr.MRMode
	m.need = mrNeed(prov, impliedCaps(caps))
	if !q.mrAny && !q.legacyMR && m.need&^q.mrMode != 0 && h.Caps == 0 {
		// Caps were a wildcard: give up the capabilities whose
		// registration modes the application does not support rather
		// than the whole entry ("A zeroed hint value results in providers
		// either returning a default value or a value that works best").
		less := impliedCaps(caps)
		if m.need&mrRMATarget&^q.mrMode != 0 {
			less &^= REMOTE_READ | REMOTE_WRITE | RMA_EVENT
		}
		if m.need&MR_HMEM&^q.mrMode != 0 {
			less &^= HMEM
		}
		if m.need&MR_COLLECTIVE&^q.mrMode != 0 {
			less &^= COLLECTIVE
		}
		if n := mrNeed(prov, less); n&^q.mrMode == 0 {
			caps, m.need = less, n
		}
	}
	out.Caps = caps

	// tx_attr and rx_attr: "If the caps field is 0 on input to
	// fi_getinfo(3), the applicable capability bits from the fi_info
	// structure will be used."
	hintTx, hintRx := sideHints(h)
	for _, s := range []struct {
		name     string
		hint     Caps
		caps     *Caps // the entry's, then the output
		restrict func(Caps) Caps
	}{
		{"tx_attr.caps", hintTx.caps, &out.TxAttr.Caps, txCaps},
		{"rx_attr.caps", hintRx.caps, &out.RxAttr.Caps, rxCaps},
	} {
		offered := m.have // an entry without tx/rx caps offers its own caps
		if *s.caps != 0 {
			offered = impliedCaps(*s.caps)
		}
		want := s.restrict(impliedCaps(caps))
		if s.hint != 0 {
			hint := s.restrict(impliedCaps(s.hint))
			if x := hint &^ want; x != 0 {
				return fmt.Sprintf("%s %s beyond caps %s", s.name, flagText(x), flagText(caps))
			}
			if x := hint &^ offered; x != 0 {
				return fmt.Sprintf("%s %s", s.name, flagText(x))
			}
			want = hint
		}
		*s.caps = want & offered
	}
	if hd := h.DomainAttr; hd != nil {
		if x := hd.Caps &^ out.DomainAttr.Caps; x != 0 {
			return fmt.Sprintf("domain_attr.caps %s", flagText(x))
		}
	}
	return ""
}

// modes: "On input to fi_getinfo, applications set the mode bits that they
// support. ... Mode bits that are set to zero indicate the application does
// not support any modes." and "If a NULL hints structure is provided, then
// the provider's supported set of modes will be returned". Then mr_mode.
func (m *entryMatch) modes() string {
	q, h, out := m.q, m.q.h, m.out
	tx, rx, dom := out.TxAttr, out.RxAttr, out.DomainAttr
	// FI_LOCAL_MR "is ignored if the application version is 1.5 or later
	// and the domain mr_mode is set to anything other than FI_MR_BASIC or
	// FI_MR_SCALABLE"; otherwise it is how the application agrees to
	// register local buffers (FI_MR_LOCAL).
	if !q.legacyMR {
		out.Mode &^= LOCAL_MR
		tx.Mode &^= LOCAL_MR
		rx.Mode &^= LOCAL_MR
	} else if m.need&MR_LOCAL != 0 {
		out.Mode |= LOCAL_MR
	}
	if !q.noHints {
		// tx_attr and rx_attr mode: "A mode value of 0 will be ignored on
		// input to fi_getinfo(3), with the mode value of the fi_info
		// structure used instead."
		hintTx, hintRx := sideHints(h)
		txApp, rxApp, domApp := h.Mode, h.Mode, dom.Mode
		if hintTx.mode != 0 {
			txApp = hintTx.mode
		}
		if hintRx.mode != 0 {
			rxApp = hintRx.mode
		}
		if h.DomainAttr != nil {
			domApp = h.DomainAttr.Mode
		}
		for _, s := range []struct {
			name      string
			need, app Mode
		}{
			{"mode", out.Mode, h.Mode},
			{"tx_attr.mode", tx.Mode, txApp},
			{"rx_attr.mode", rx.Mode, rxApp},
			{"domain_attr.mode", dom.Mode, domApp},
		} {
			if x := s.need &^ s.app; x != 0 {
				return fmt.Sprintf("applications without %s %s", s.name, flagText(x))
			}
		}
	}
	mr, ok := q.mrOutput(dom.MRMode, m.need)
	if !ok {
		return fmt.Sprintf("domain_attr.mr_mode %s (%s required)", flagText(q.mrMode), flagText(m.need))
	}
	dom.MRMode = mr
	return ""
}

// attrs: the remaining attributes of every struct.
func (m *entryMatch) attrs() string {
	q, h, out := m.q, m.q.h, m.out
	var c attrCheck
	if hd := h.DomainAttr; hd != nil {
		q.domainAttr(&c, hd, out.DomainAttr)
	}
	if he := h.EPAttr; he != nil {
		q.epAttr(&c, he, out.EPAttr, out.DomainAttr, impliedCaps(out.Caps))
	}
	if ht := h.TxAttr; ht != nil {
		txAttr(&c, ht, out.TxAttr)
	}
	if hr := h.RxAttr; hr != nil {
		rxAttr(&c, hr, out.RxAttr)
	}
	return c.what
}

// mrNeed returns the mr_mode bits an entry requires of an application that
// uses the capabilities caps (modifiers explicit). The provider's bits are
// in API 1.5 form; FI_MR_BASIC and FI_MR_SCALABLE in an entry say which
// legacy modes it can also serve and are not requirements. Bits that concern
// no memory the application will register are cleared: FI_MR_HMEM without
// FI_HMEM, FI_MR_COLLECTIVE without FI_COLLECTIVE, the bits about remote
// access when no peer may access the endpoint's memory, and everything when
// nothing needs registering at all.
func mrNeed(prov MRMode, caps Caps) MRMode {
	need := prov &^ (MR_BASIC | MR_SCALABLE)
	if caps&HMEM == 0 {
		need &^= MR_HMEM
	}
	if caps&COLLECTIVE == 0 {
		need &^= MR_COLLECTIVE
	}
	if !rmaTarget(caps) {
		need &^= mrRMATarget
		if need&(MR_LOCAL|MR_HMEM|MR_COLLECTIVE) == 0 {
			need = 0
		}
	}
	return need
}

// mrOutput checks the application's mr_mode against an entry's and returns
// the entry's mr_mode as the application gets it.
//
// API 1.5 and later, mr_mode other than FI_MR_BASIC/FI_MR_SCALABLE: "By
// setting an mr_mode bit, the application has agreed to adjust its behavior
// as indicated." (fi_mr(3)); the bits the entry needs must all be set, and
// a zero mr_mode supports none ("If no mr_mode bits are set, the default
// behaviors describe below are followed"; FI_MR_SCALABLE "For library
// versions 1.5 and later, this is the default if no mr_mode bits are set").
//
// FI_MR_BASIC: "setting mr_mode equal to FI_MR_BASIC forces basic
// registration if the provider supports it"; basic registration "is
// equivalent to requiring the following mr_mode bits: FI_MR_VIRT_ADDR,
// FI_MR_ALLOCATED, and FI_MR_PROV_KEY" with FI_LOCAL_MR for FI_MR_LOCAL.
// FI_MR_SCALABLE: no bits but FI_MR_LOCAL (as FI_LOCAL_MR). API before 1.5
// with mr_mode 0: "FI_MR_BASIC or FI_MR_SCALABLE are requested and
// supported", scalable preferred. FI_LOCAL_MR itself is checked with the
// other mode bits.
func (q *getinfoQuery) mrOutput(prov, need MRMode) (MRMode, bool) {
	if !q.legacyMR {
		if !q.mrAny && need&^q.mrMode != 0 {
			return 0, false
		}
		return need, true
	}
	scalable := prov&MR_SCALABLE != 0 || need&^MR_LOCAL == 0
	basic := prov&MR_BASIC != 0 || need&^(MR_LOCAL|mrBasicMap) == 0
	switch {
	case q.mrMode == MR_BASIC && basic:
		return MR_BASIC, true
	case q.mrMode == MR_SCALABLE && scalable:
		return MR_SCALABLE, true
	case q.mrMode == MR_UNSPEC && scalable:
		return MR_SCALABLE, true
	case q.mrMode == MR_UNSPEC && basic:
		return MR_BASIC, true
	}
	return 0, false
}

// addrs checks the entry's address family and its domain's address
// against the requested format and addresses, and sets the output's
// addr_format, src_addr and dest_addr.
func (m *entryMatch) addrs() string {
	q, h, e, out := m.q, m.q.h, m.e, m.out
	v4, v6 := false, false
	var domIP netip.Addr
	if e.SrcAddr != nil && e.SrcAddr.IP.Addr().IsValid() {
		domIP = e.SrcAddr.IP.Addr()
		v4, v6 = domIP.Is4(), domIP.Is6()
	} else {
		switch e.AddrFormat {
		case SOCKADDR_IN:
			v4 = true
		case SOCKADDR_IN6:
			v6 = true
		case SOCKADDR, FORMAT_UNSPEC:
			v4, v6 = true, true
		}
	}
	// addr_format: "If specified, indicates the format of addresses
	// referenced by the fabric interfaces and data structures." The socket
	// formats must agree with the domain's address family; FI_SOCKADDR
	// takes either family; FI_ADDR_STR has a string form for every IP
	// address ("fi_sockaddr_in://10.31.6.12:7471").
	switch f := h.AddrFormat; f {
	case FORMAT_UNSPEC:
	case SOCKADDR, ADDR_STR:
		if !v4 && !v6 {
			return fmt.Sprintf("addr_format %v", f)
		}
	case SOCKADDR_IN:
		if v6 = false; !v4 {
			return fmt.Sprintf("addr_format %v", f)
		}
		out.AddrFormat = f
	case SOCKADDR_IN6:
		if v4 = false; !v6 {
			return fmt.Sprintf("addr_format %v", f)
		}
		out.AddrFormat = f
	default:
		if e.AddrFormat != f {
			return fmt.Sprintf("addr_format %v", f)
		}
		v4, v6 = false, false
	}
	addr := func(ip netip.Addr, port uint16) *Addr {
		f := SOCKADDR_IN
		if ip.Is6() {
			f = SOCKADDR_IN6
		}
		out.AddrFormat = f
		return &Addr{Format: f, IP: netip.AddrPortFrom(ip, port)}
	}
	sameIP := func(a, b netip.Addr) bool { return a.WithZone("") == b.WithZone("") }

	if q.src != nil {
		// An entry can only be the source if the address is its domain's
		// or the wildcard address.
		ip, ok := q.src.pick(v4, v6)
		if !ok {
			return fmt.Sprintf("source address %s of this family", q.src.desc)
		}
		if domIP.IsValid() && !ip.IsUnspecified() && !domIP.IsUnspecified() && !sameIP(ip, domIP) {
			return fmt.Sprintf("source address %s", q.src.desc)
		}
		out.SrcAddr = addr(ip, q.src.port)
	} else if domIP.IsValid() {
		out.SrcAddr = addr(domIP, 0)
	}
	if q.dst != nil {
		ip, ok := q.dst.pick(v4, v6)
		if !ok {
			return fmt.Sprintf("destination %s of this family", q.dst.desc)
		}
		// Without a requested source, the entry's domain must be the one
		// the destination is reached from (where the route is known).
		if q.src == nil && domIP.IsValid() && !domIP.IsUnspecified() {
			if rs, ok := q.route(ip); ok && !sameIP(rs, domIP) {
				return fmt.Sprintf("destination %s (reached from %v)", q.dst.desc, rs)
			}
		}
		out.DestAddr = addr(ip, q.dst.port)
	}
	if h.AddrFormat == ADDR_STR {
		// The addresses are then strings (their length is the string's,
		// as libfabric's src_addrlen is); each keeps its IP.
		out.AddrFormat = ADDR_STR
		for _, a := range []*Addr{out.SrcAddr, out.DestAddr} {
			if a != nil {
				a.Format = ADDR_STR
			}
		}
	}
	return ""
}

func (q *getinfoQuery) domainAttr(c *attrCheck, h, d *DomainAttr) {
	// "FI_THREAD_UNSPEC ... When specified, providers will return a
	// threading model that allows for the greatest level of parallelism."
	// Otherwise the requested model is returned when the domain serves it.
	if !serves(threadRank, h.Threading, d.Threading) {
		c.failf("domain_attr.threading %v", h.Threading)
	} else if h.Threading != THREAD_UNSPEC {
		d.Threading = h.Threading
	}
	if !serves(progressRank, h.ControlProgress, d.ControlProgress) {
		c.failf("domain_attr.control_progress %v", h.ControlProgress)
	} else if h.ControlProgress != PROGRESS_UNSPEC {
		d.ControlProgress = h.ControlProgress
	}
	if !serves(progressRank, h.DataProgress, d.DataProgress) {
		c.failf("domain_attr.data_progress %v", h.DataProgress)
	} else if h.DataProgress != PROGRESS_UNSPEC {
		d.DataProgress = h.DataProgress
	}
	if !serves(rmRank, h.ResourceMgmt, d.ResourceMgmt) {
		c.failf("domain_attr.resource_mgmt %v", h.ResourceMgmt)
	} else if h.ResourceMgmt != RM_UNSPEC {
		d.ResourceMgmt = h.ResourceMgmt
	}
	// "The value FI_AV_UNSPEC may be used to indicate that the provider can
	// support either address vector format."
	if h.AVType != AV_UNSPEC && d.AVType != AV_UNSPEC && h.AVType != d.AVType {
		c.failf("domain_attr.av_type %v", h.AVType)
	} else if h.AVType != AV_UNSPEC {
		d.AVType = h.AVType
	}
	c.atLeast("domain_attr.mr_key_size", h.MRKeySize, d.MRKeySize)
	c.atLeast("domain_attr.cq_data_size", h.CQDataSize, d.CQDataSize)
	c.atLeast("domain_attr.cq_cnt", h.CQCnt, d.CQCnt)
	c.atLeast("domain_attr.ep_cnt", h.EPCnt, d.EPCnt)
	c.atLeast("domain_attr.tx_ctx_cnt", h.TxCtxCnt, d.TxCtxCnt)
	c.atLeast("domain_attr.rx_ctx_cnt", h.RxCtxCnt, d.RxCtxCnt)
	c.atLeast("domain_attr.max_ep_tx_ctx", h.MaxEPTxCtx, d.MaxEPTxCtx)
	c.atLeast("domain_attr.max_ep_rx_ctx", h.MaxEPRxCtx, d.MaxEPRxCtx)
	c.atLeast("domain_attr.max_ep_stx_ctx", h.MaxEPStxCtx, d.MaxEPStxCtx)
	c.atLeast("domain_attr.max_ep_srx_ctx", h.MaxEPSrxCtx, d.MaxEPSrxCtx)
	c.atLeast("domain_attr.cntr_cnt", h.CntrCnt, d.CntrCnt)
	c.atLeast("domain_attr.mr_iov_limit", h.MRIovLimit, d.MRIovLimit)
	c.atLeast("domain_attr.max_err_data", h.MaxErrData, d.MaxErrData)
	c.atLeast("domain_attr.mr_cnt", h.MRCnt, d.MRCnt)
	// auth_key: "This field is ignored unless the fabric is opened with API
	// version 1.5 or greater." A key must have the domain's key size.
	if q.version >= MakeVersion(1, 5) && h.AuthKeySize != 0 {
		if h.AuthKeySize != d.AuthKeySize {
			c.failf("domain_attr.auth_key_size %d (offered: %d)", h.AuthKeySize, d.AuthKeySize)
		} else if h.AuthKey != nil {
			d.AuthKey = slices.Clone(h.AuthKey)
		}
	}
	tclass(c, "domain_attr.tclass", h.TClass, &d.TClass)
}

// tclass: an entry's class of 0 (FI_TC_UNSPEC) takes any requested class;
// otherwise the classes must be the same. The output carries the request.
func tclass(c *attrCheck, name string, want TClass, have *TClass) {
	switch {
	case want == TC_UNSPEC:
	case *have != TC_UNSPEC && *have != want:
		c.failf("%s %v", name, want)
	default:
		*have = want
	}
}

func (q *getinfoQuery) epAttr(c *attrCheck, h, ep *EPAttr, d *DomainAttr, caps Caps) {
	if h.Protocol != PROTO_UNSPEC && h.Protocol != ep.Protocol {
		c.failf("ep_attr.protocol %v", h.Protocol)
	}
	c.atLeast("ep_attr.protocol_version", uint64(h.ProtocolVersion), uint64(ep.ProtocolVersion))
	c.atLeast("ep_attr.max_msg_size", h.MaxMsgSize, ep.MaxMsgSize)
	// msg_prefix_size is what the provider needs in front of each buffer
	// (with FI_MSG_PREFIX). A hint says how much the application provides,
	// so the entry must need no more.
	if h.MsgPrefixSize != 0 && ep.MsgPrefixSize > h.MsgPrefixSize {
		c.failf("ep_attr.msg_prefix_size %d (required: %d)", h.MsgPrefixSize, ep.MsgPrefixSize)
	}
	// "The maximum ordered size specifies the delivery order of transport
	// data into target memory for RMA and atomic operations": only checked
	// when the endpoint does RMA or atomics.
	if caps&(RMA|ATOMIC) != 0 {
		c.atLeast("ep_attr.max_order_raw_size", h.MaxOrderRAWSize, ep.MaxOrderRAWSize)
		c.atLeast("ep_attr.max_order_war_size", h.MaxOrderWARSize, ep.MaxOrderWARSize)
		c.atLeast("ep_attr.max_order_waw_size", h.MaxOrderWAWSize, ep.MaxOrderWAWSize)
	}
	// mem_tag_format: "A provider must return a tag format that supports
	// the requested number of fields, with each field being at least the
	// size requested, or fail the request." The entry's tag bits must cover
	// the requested ones; the output is the requested format.
	if caps&TAGGED != 0 && h.MemTagFormat != 0 {
		// "The mem_tag_format optionally begins with a series of bits set
		// to 0, to signify bits which are ignored by the provider."
		if bits.Len64(h.MemTagFormat) > bits.Len64(ep.MemTagFormat) {
			c.failf("ep_attr.mem_tag_format %#x (offered: %#x)", h.MemTagFormat, ep.MemTagFormat)
		} else {
			ep.MemTagFormat = h.MemTagFormat
		}
	}
	// tx_ctx_cnt, rx_ctx_cnt: bounded by the domain's max_ep_tx_ctx and
	// max_ep_rx_ctx; FI_SHARED_CONTEXT asks for a shared context:
	// "Providers that do not support shared transmit contexts will fail the
	// request."
	ctx := func(name string, want uint64, have *uint64, limit, sharedLimit uint64) {
		limit = max(limit, 1) // "If not specified (0), 1 context will be assigned"
		switch {
		case want == SHARED_CONTEXT && sharedLimit == 0:
			c.failf("ep_attr.%s FI_SHARED_CONTEXT", name)
		case want == 0 && *have == SHARED_CONTEXT:
			c.failf("ep_attr.%s 0 (a shared context is required)", name)
		case want != SHARED_CONTEXT && want > limit:
			c.failf("ep_attr.%s %d (at most %d)", name, want, limit)
		case want != 0:
			*have = want
		}
	}
	ctx("tx_ctx_cnt", h.TxCtxCnt, &ep.TxCtxCnt, d.MaxEPTxCtx, d.MaxEPStxCtx)
	ctx("rx_ctx_cnt", h.RxCtxCnt, &ep.RxCtxCnt, d.MaxEPRxCtx, d.MaxEPSrxCtx)
	if q.version >= MakeVersion(1, 5) && h.AuthKeySize != 0 {
		if h.AuthKeySize != ep.AuthKeySize {
			c.failf("ep_attr.auth_key_size %d (offered: %d)", h.AuthKeySize, ep.AuthKeySize)
		} else if h.AuthKey != nil {
			ep.AuthKey = slices.Clone(h.AuthKey)
		}
	}
}

// txAttr checks and fills the transmit attributes other than caps and mode.
// Sizes that configure the endpoint (size, iov_limit, inject_size,
// rma_iov_limit) take the requested value; op_flags are the requested
// default flags, which the entry's (the flags it supports) must include.
func txAttr(c *attrCheck, h, t *TxAttr) {
	subset(c, "tx_attr.op_flags", h.OpFlags, t.OpFlags)
	subset(c, "tx_attr.msg_order", h.MsgOrder, t.MsgOrder)
	// comp_order: "Providers should return the completion order that they
	// actually provide, with the constraint that the returned ordering is
	// stricter than that specified by the application."
	subset(c, "tx_attr.comp_order", h.CompOrder, t.CompOrder)
	c.atLeast("tx_attr.inject_size", h.InjectSize, t.InjectSize)
	c.atLeast("tx_attr.size", h.Size, t.Size)
	c.atLeast("tx_attr.iov_limit", h.IovLimit, t.IovLimit)
	c.atLeast("tx_attr.rma_iov_limit", h.RMAIovLimit, t.RMAIovLimit)
	tclass(c, "tx_attr.tclass", h.TClass, &t.TClass)
	t.OpFlags = h.OpFlags
	setIf(&t.InjectSize, h.InjectSize)
	setIf(&t.Size, h.Size)
	setIf(&t.IovLimit, h.IovLimit)
	setIf(&t.RMAIovLimit, h.RMAIovLimit)
}

// rxAttr is txAttr for the receive attributes. total_buffered_recv "is a
// hint to the provider ... The provider may adjust or ignore this value":
// it never fails a match, and the output is the request capped at the
// entry's value.
func rxAttr(c *attrCheck, h, r *RxAttr) {
	subset(c, "rx_attr.op_flags", h.OpFlags, r.OpFlags)
	subset(c, "rx_attr.msg_order", h.MsgOrder, r.MsgOrder)
	subset(c, "rx_attr.comp_order", h.CompOrder, r.CompOrder)
	c.atLeast("rx_attr.size", h.Size, r.Size)
	c.atLeast("rx_attr.iov_limit", h.IovLimit, r.IovLimit)
	r.OpFlags = h.OpFlags
	setIf(&r.Size, h.Size)
	setIf(&r.IovLimit, h.IovLimit)
	if h.TotalBufferedRecv != 0 && h.TotalBufferedRecv < r.TotalBufferedRecv {
		r.TotalBufferedRecv = h.TotalBufferedRecv
	}
}

func setIf(have *uint64, want uint64) {
	if want != 0 {
		*have = want
	}
}
