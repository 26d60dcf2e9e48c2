package fi

// This file and the other getinfo*.go implement fi_getinfo(3): here
// GetInfo, its errors and the checking of hints; getinfo_caps.go the
// capability rules, getinfo_resolve.go node, service and routes,
// getinfo_match.go the matching of an entry, getinfo_attrs.go of its
// attributes, getinfo_query.go the query as text (fi_info's options). Each
// rule quotes the man-page sentence it follows (fi_getinfo(3), or
// fi_domain(3), fi_endpoint(3), fi_fabric(3), fi_mr(3) where named); the
// case tables of getinfo_cases_test.go, getinfo_addr_test.go and
// getinfo_attrs_test.go have a case quoting each.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
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
// Node names are resolved with the Go resolver (not with FI_NUMERICHOST),
// which gives up when ctx ends.
// GetInfo may be called from many goroutines at once; it never modifies
// hints or offered.
func GetInfo(ctx context.Context, version Version, node, service string, flags uint64, hints *Info, offered []*Info) ([]*Info, error) {
	if version > APIVersion || version.Major() < 1 {
		return nil, getinfoErrorf(ENOSYS, "API version %v is not implemented (1.0 to %v are)", version, APIVersion)
	}
	if bad := flags &^ getinfoFlags; bad != 0 {
		return nil, getinfoErrorf(EBADFLAGS, "flags %#x are not fi_getinfo flags (FI_SOURCE, FI_NUMERICHOST, FI_PROV_ATTR_ONLY are)", bad)
	}
	if flags&uint64(PROV_ATTR_ONLY) != 0 {
		return provAttrOnly(offered)
	}
	q, err := newQuery(ctx, version, node, service, flags, hints)
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

func newQuery(ctx context.Context, version Version, node, service string, flags uint64, hints *Info) (*getinfoQuery, error) {
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
	if err := q.resolve(ctx, node, service, flags); err != nil {
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
