package fi

// Matching one offered entry against the query: names, endpoint type,
// capabilities and modes.

import (
	"fmt"
	"strings"
)

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
	pref MRMode // the bits it reports if the application supports them (mrPreferred)
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
			offers = APIVersion
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
	m.need, m.pref = mrModes(prov, impliedCaps(caps))
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
		if n, p := mrModes(prov, less); n&^q.mrMode == 0 {
			caps, m.need, m.pref = less, n, p
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
		if m.noCQData(rxApp) {
			out.Mode &^= RX_CQ_DATA
			rx.Mode &^= RX_CQ_DATA
			dom.CQDataSize = 0
		}
		// FI_BUFFERED_RECV is the application's choice: "Applications
		// that can handle message processing from network allocated data
		// buffers can set this mode bit to avoid copies" (fi_getinfo(3)).
		// An entry offering it serves an application without it with
		// receives into the application's buffers, as libfabric's rxm
		// keeps the bit only when the hints have it.
		if h.Mode&BUFFERED_RECV == 0 {
			out.Mode &^= BUFFERED_RECV
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
	mr, ok := q.mrOutput(dom.MRMode, m.need, m.pref)
	if !ok {
		return fmt.Sprintf("domain_attr.mr_mode %s (%s required)", flagText(q.mrMode), flagText(m.need))
	}
	dom.MRMode = mr
	return ""
}

// noCQData says whether the entry is matched without remote CQ data:
// FI_RX_CQ_DATA "only applies to data transfers that set
// FI_REMOTE_CQ_DATA" (fi_getinfo(3)), and an entry whose cq_data_size is 0
// has none ("This field indicates the number of bytes that the provider
// supports for remote CQ data", fi_domain(3)). So an application that
// neither offers the mode (in mode or rx_attr.mode: rxApp) nor asks for
// remote CQ data (domain_attr.cq_data_size) gets an entry that requires
// the mode without it and with cq_data_size 0, as libfabric 1.17's verbs
// answers such hints (vrb_check_rx_attr).
func (m *entryMatch) noCQData(rxApp Mode) bool {
	h, out := m.q.h, m.out
	return (out.Mode|out.RxAttr.Mode)&RX_CQ_DATA != 0 && (h.Mode|rxApp)&RX_CQ_DATA == 0 &&
		(h.DomainAttr == nil || h.DomainAttr.CQDataSize == 0)
}

// attrs: the remaining attributes of every struct.
func (m *entryMatch) attrs() string {
	q, h, out := m.q, m.q.h, m.out
	var c attrCheck
	if hd := h.DomainAttr; hd != nil {
		q.domainAttr(&c, hd, out.DomainAttr, out.AutoProgress)
	}
	if he := h.EPAttr; he != nil {
		q.epAttr(&c, he, out.EPAttr, out.DomainAttr, impliedCaps(out.Caps))
	}
	m.authKeys(&c)
	if ht := h.TxAttr; ht != nil {
		txAttr(&c, ht, out.TxAttr)
	}
	if hr := h.RxAttr; hr != nil {
		rxAttr(&c, hr, out.RxAttr)
	}
	return c.what
}
