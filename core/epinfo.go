package core

// An endpoint's fi_info as the application chooses it (fi_endpoint(3):
// "The properties and behavior of the endpoint are defined based on the
// provided struct fi_info"): the ep/N/info file takes a whole entry, the
// attr/ files the fields an application may narrow.

import (
	"context"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// InfoText is the endpoint's fi_info as fi_tostr prints it.
func (e *EP) InfoText() string {
	return e.Info().String()
}

// SetInfo makes the idle endpoint the one fi_endpoint(info) would make
// for the fi_info block text (fi_tostr's form, as getinfo answers it):
// the first entry of the endpoint's domain that fi_getinfo with the block
// as hints returns, with the block's choices (capabilities, sizes, op
// flags...) applied as fi_getinfo applies them. A block no entry of the
// domain matches is ENODATA, saying why.
func (e *EP) SetInfo(text string) error {
	h, err := fi.ParseInfo(strings.TrimSpace(text))
	if err != nil {
		return Errorf(fi.EINVAL, "%v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("setting info"); err != nil {
		return err
	}
	if e.req != nil && h.EPAttr != nil && h.EPAttr.Type != fi.EP_UNSPEC && h.EPAttr.Type != fi.EP_MSG {
		return Errorf(fi.EINVAL, "an endpoint made from a connection request is FI_EP_MSG")
	}
	in, err := e.chooseLocked(h)
	if err != nil {
		return err
	}
	keepAuthKey(in, e.info) // the block carries its size, not its bytes
	e.info = in
	e.shell = defaultDataParams // they depend on the capabilities
	return nil
}

// chooseLocked is fi_getinfo with hints h over the domain's entries:
// the first match.
func (e *EP) chooseLocked(h *fi.Info) (*fi.Info, error) {
	if h.DomainAttr != nil {
		// The entry's domain is this endpoint's: names in the block are
		// the ones getinfo printed for it, or left out. Its traffic
		// class is the domain's now (attr/tclass may have changed).
		h.DomainAttr.Name, h.DomainAttr.TClass = "", fi.TC_UNSPEC
	}
	if h.FabricAttr != nil {
		h.FabricAttr.Name, h.FabricAttr.ProvName = "", ""
	}
	h.SrcAddr, h.DestAddr, h.Handle = nil, nil, 0
	out, err := fi.GetInfo(context.Background(), fi.APIVersion, "", "", 0, h, e.obj.Dom.Infos())
	if err != nil {
		return nil, Errorf(Code(err), "%v", err)
	}
	return out[0], nil
}

// narrowLocked sets one field the application may choose before enable:
// change applied to the endpoint's fi_info as hints must still match an
// entry the domain offers, by fi_getinfo's rules (capabilities and orders
// a subset, sizes at most the offered ones); the endpoint takes
// fi_getinfo's answer, with change applied again if asIs.
func (e *EP) narrowLocked(name string, change func(*fi.Info), asIs bool) error {
	h := e.info.Clone()
	change(h)
	in, err := e.chooseLocked(h)
	if err != nil {
		return Errorf(fi.EINVAL, "%s: %v", name, err)
	}
	if asIs {
		change(in)
	}
	keepAuthKey(in, e.info)
	domainTClass(in)
	e.info = in
	e.shell = defaultDataParams // they depend on the capabilities
	return nil
}

// choosable are the attr/ files of an endpoint an application may write
// before enable to narrow its fi_info (narrowLocked): capabilities (send-
// or receive-only among them), orders, the tag format and the inject size,
// and the address format. Each gives the change to the fi_info as hints
// and whether the endpoint takes the written value as is (true), or
// fi_getinfo's answer to it (false: capabilities, with the secondary ones
// that come with them, and the transmit and receive capabilities derived
// from them).
var choosable = map[string]func(s string) (func(*fi.Info), bool, error){
	"caps": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.Caps](s)
		return func(in *fi.Info) {
			// Zero side caps: fi_getinfo derives them from caps.
			in.Caps, in.TxAttr.Caps, in.RxAttr.Caps = v, 0, 0
		}, false, err
	},
	"tx_caps": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.Caps](s)
		return func(in *fi.Info) { in.TxAttr.Caps = v }, false, err
	},
	"rx_caps": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.Caps](s)
		return func(in *fi.Info) { in.RxAttr.Caps = v }, false, err
	},
	"tx_msg_order": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.MsgOrder](s)
		return func(in *fi.Info) { in.TxAttr.MsgOrder = v }, true, err
	},
	"rx_msg_order": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.MsgOrder](s)
		return func(in *fi.Info) { in.RxAttr.MsgOrder = v }, true, err
	},
	"tx_comp_order": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.CompOrder](s)
		return func(in *fi.Info) { in.TxAttr.CompOrder = v }, true, err
	},
	"rx_comp_order": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.CompOrder](s)
		return func(in *fi.Info) { in.RxAttr.CompOrder = v }, true, err
	},
	"mem_tag_format": func(s string) (func(*fi.Info), bool, error) {
		v, err := ParseUint(s)
		return func(in *fi.Info) { in.EPAttr.MemTagFormat = v }, true, err
	},
	"tx_inject_size": func(s string) (func(*fi.Info), bool, error) {
		v, err := ParseUint(s)
		return func(in *fi.Info) { in.TxAttr.InjectSize = v }, true, err
	},
	"tx_tclass": func(s string) (func(*fi.Info), bool, error) {
		v, err := parseTClass(s)
		return func(in *fi.Info) { in.TxAttr.TClass = v }, true, err
	},
	"addr_format": func(s string) (func(*fi.Info), bool, error) {
		v, err := fi.Parse[fi.AddrFormat](s)
		return func(in *fi.Info) { in.AddrFormat = v }, true, err
	},
}

// choosableAttr is the attr/ file of field name, writable before enable
// through narrowLocked.
func (e *EP) choosableAttr(a Attr) Attr {
	parse, ok := choosable[a.Name]
	if !ok {
		return a
	}
	a.Set = func(s string) error {
		change, asIs, err := parse(strings.TrimSpace(s))
		if err != nil {
			return Errorf(fi.EINVAL, "bad %s %q: %v", a.Name, strings.TrimSpace(s), err)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := e.idleLocked("setting " + a.Name); err != nil {
			return err
		}
		return e.narrowLocked(a.Name, change, asIs)
	}
	return a
}

// addrFormat is attr/addr_format: the fi_info's, or FI_SOCKADDR_IN6 once
// the endpoint's address in use is an IPv6 one (its fi_getname).
func (e *EP) addrFormat() string {
	e.mu.Lock()
	f, p := e.info.AddrFormat, e.prov
	e.mu.Unlock()
	if f == fi.SOCKADDR_IN && p != nil {
		if a, err := p.Name(); err == nil && a.IP.Addr().IsValid() && !a.IP.Addr().Unmap().Is4() {
			f = fi.SOCKADDR_IN6
		}
	}
	return f.String()
}

// parseTClass reads a traffic class: a name (FI_TC_LOW_LATENCY, or
// without FI_TC_) or a number (0x12e: fi_tc_dscp_set(46)).
func parseTClass(s string) (fi.TClass, error) {
	if v, err := fi.Parse[fi.TClass](s); err == nil {
		return v, nil
	}
	v, err := ParseUint(s)
	if err != nil || v > 0xffffffff {
		return 0, Errorf(fi.EINVAL, "%q is not a traffic class (a FI_TC_ name or a number)", s)
	}
	return fi.TClass(v), nil
}
