package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/fabricfs/fabricfs/core/fi"
)

// guarded makes an attribute whose value lives under mu. Set is allowed only
// while frozen returns nil; set may be nil for a read-only attribute.
func guarded(mu *sync.Mutex, name string, frozen func() error, get func() string, set func(string) error) Attr {
	a := Attr{Name: name, Get: func() string {
		mu.Lock()
		defer mu.Unlock()
		return get()
	}}
	if set != nil {
		a.Set = func(s string) error {
			mu.Lock()
			defer mu.Unlock()
			if err := frozen(); err != nil {
				return err
			}
			return set(strings.TrimSpace(s))
		}
	}
	return a
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
func hex64(v uint64) string {
	return fmt.Sprintf("0x%016x", v)
}

// infoField is one attribute of an endpoint's fi_info: how to read it, and
// for the ones an application may choose, how to set it.
type infoField struct {
	name string
	get  func(*fi.Info) string
	set  func(*fi.Info, string) error // nil: read-only
}

// MaxQueueSize bounds an endpoint's tx_size and rx_size.
const MaxQueueSize = 1 << 16

// setSize returns a setter for a queue size attribute.
func setSize(field func(*fi.Info) *uint64) func(*fi.Info, string) error {
	return func(in *fi.Info, s string) error {
		p := field(in)
		v, err := parseSize(s, 1, MaxQueueSize)
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
}

// setOpFlags returns a setter for tx_op_flags or, if rx, rx_op_flags.
// The flags must be ones the endpoint honours, as fi_getinfo checks an
// op_flags hint: transmit flags fi.TxOpFlags; receive flags fi.RxOpFlags,
// and FI_MULTI_RECV where the receive capabilities have it. Anything else
// (FI_MULTICAST, a capability bit, FI_COMMIT_COMPLETE without persistent
// memory) is EINVAL rather than kept and ignored.
func setOpFlags(field func(*fi.Info) *fi.OpFlags, rx bool) func(*fi.Info, string) error {
	return func(in *fi.Info, s string) error {
		v, err := fi.Parse[fi.OpFlags](s)
		if err != nil {
			return Errorf(fi.EINVAL, "%w", err)
		}
		ok := fi.TxOpFlags
		if rx {
			ok = fi.RxOpFlags
			if in.RxAttr.Caps&fi.MULTI_RECV != 0 {
				ok |= fi.OpFlags(fi.MULTI_RECV)
			}
		}
		if bad := v &^ ok; bad != 0 {
			return Errorf(fi.EINVAL, "op flags %#x are not flags this endpoint honours (%v)", uint64(bad), ok)
		}
		*field(in) = v
		return nil
	}
}

// infoFields are the attribute files of ep and pep: fi_info's own fields,
// fi_ep_attr's by their names, fi_tx_attr's and fi_rx_attr's prefixed tx_
// and rx_.
var infoFields = []infoField{
	{"caps", func(in *fi.Info) string { return in.Caps.String() }, nil},
	{"mode", func(in *fi.Info) string { return in.Mode.String() }, nil},
	{"addr_format", func(in *fi.Info) string { return in.AddrFormat.String() }, nil},
	{"type", func(in *fi.Info) string { return in.EPAttr.Type.String() }, nil},
	{"protocol", func(in *fi.Info) string { return in.EPAttr.Protocol.String() }, nil},
	{"protocol_version", func(in *fi.Info) string { return strconv.FormatUint(uint64(in.EPAttr.ProtocolVersion), 10) }, nil},
	{"max_msg_size", func(in *fi.Info) string { return u64(in.EPAttr.MaxMsgSize) }, nil},
	{"msg_prefix_size", func(in *fi.Info) string { return u64(in.EPAttr.MsgPrefixSize) }, nil},
	{"max_order_raw_size", func(in *fi.Info) string { return u64(in.EPAttr.MaxOrderRAWSize) }, nil},
	{"max_order_war_size", func(in *fi.Info) string { return u64(in.EPAttr.MaxOrderWARSize) }, nil},
	{"max_order_waw_size", func(in *fi.Info) string { return u64(in.EPAttr.MaxOrderWAWSize) }, nil},
	{"mem_tag_format", func(in *fi.Info) string { return hex64(in.EPAttr.MemTagFormat) }, nil},
	{"tx_ctx_cnt", func(in *fi.Info) string { return u64(in.EPAttr.TxCtxCnt) }, nil},
	{"rx_ctx_cnt", func(in *fi.Info) string { return u64(in.EPAttr.RxCtxCnt) }, nil},
	{"auth_key_size", func(in *fi.Info) string { return u64(in.EPAttr.AuthKeySize) }, nil},
	{"auth_key", func(in *fi.Info) string { return authKeyText(in.EPAttr.AuthKey) }, setEPAuthKey},
	{"tx_caps", func(in *fi.Info) string { return in.TxAttr.Caps.String() }, nil},
	{"tx_mode", func(in *fi.Info) string { return in.TxAttr.Mode.String() }, nil},
	{"tx_op_flags", func(in *fi.Info) string { return in.TxAttr.OpFlags.String() },
		setOpFlags(func(in *fi.Info) *fi.OpFlags { return &in.TxAttr.OpFlags }, false)},
	{"tx_msg_order", func(in *fi.Info) string { return in.TxAttr.MsgOrder.String() }, nil},
	{"tx_comp_order", func(in *fi.Info) string { return in.TxAttr.CompOrder.String() }, nil},
	{"tx_inject_size", func(in *fi.Info) string { return u64(in.TxAttr.InjectSize) }, nil},
	{"tx_size", func(in *fi.Info) string { return u64(in.TxAttr.Size) },
		setSize(func(in *fi.Info) *uint64 { return &in.TxAttr.Size })},
	{"tx_iov_limit", func(in *fi.Info) string { return u64(in.TxAttr.IovLimit) }, nil},
	{"tx_rma_iov_limit", func(in *fi.Info) string { return u64(in.TxAttr.RMAIovLimit) }, nil},
	{"tx_tclass", func(in *fi.Info) string { return in.TxAttr.TClass.String() }, nil},
	{"rx_caps", func(in *fi.Info) string { return in.RxAttr.Caps.String() }, nil},
	{"rx_mode", func(in *fi.Info) string { return in.RxAttr.Mode.String() }, nil},
	{"rx_op_flags", func(in *fi.Info) string { return in.RxAttr.OpFlags.String() },
		setOpFlags(func(in *fi.Info) *fi.OpFlags { return &in.RxAttr.OpFlags }, true)},
	{"rx_msg_order", func(in *fi.Info) string { return in.RxAttr.MsgOrder.String() }, nil},
	{"rx_comp_order", func(in *fi.Info) string { return in.RxAttr.CompOrder.String() }, nil},
	{"rx_total_buffered_recv", func(in *fi.Info) string { return u64(in.RxAttr.TotalBufferedRecv) }, nil},
	{"rx_size", func(in *fi.Info) string { return u64(in.RxAttr.Size) },
		setSize(func(in *fi.Info) *uint64 { return &in.RxAttr.Size })},
	{"rx_iov_limit", func(in *fi.Info) string { return u64(in.RxAttr.IovLimit) }, nil},
}

// infoFieldSet is the setter of the infoFields entry called name (nil if
// it is read-only).
func infoFieldSet(name string) func(*fi.Info, string) error {
	for _, f := range infoFields {
		if f.name == name {
			return f.set
		}
	}
	return nil
}

// infoAttrs makes the attribute files of an endpoint whose fi_info info()
// returns under mu; writable ones may be set while frozen returns nil.
func infoAttrs(mu *sync.Mutex, info func() *fi.Info, frozen func() error) []Attr {
	out := make([]Attr, 0, len(infoFields))
	for _, f := range infoFields {
		var set func(string) error
		if f.set != nil {
			set = func(s string) error { return f.set(info(), s) }
		}
		out = append(out, guarded(mu, f.name, frozen, func() string { return f.get(info()) }, set))
	}
	return out
}

// domainAttrs are the files of <prov>/<domain>/attr/: every field of
// fi_domain_attr by its name, and fi_fabric_attr's as fabric, prov_name,
// prov_version and api_version, from in, the best entry of domain dom;
// tclass is dom's own, which root may write (setTClass).
func domainAttrs(dom *Domain, in *fi.Info) []Attr {
	d, f := in.DomainAttr, in.FabricAttr
	ro := func(name, v string) Attr { return Attr{Name: name, Get: func() string { return v }} }
	return []Attr{
		ro("name", d.Name),
		ro("threading", d.Threading.String()),
		ro("control_progress", d.ControlProgress.String()),
		ro("data_progress", d.DataProgress.String()),
		ro("resource_mgmt", d.ResourceMgmt.String()),
		ro("av_type", d.AVType.String()),
		ro("mr_mode", d.MRMode.String()),
		ro("mr_key_size", u64(d.MRKeySize)),
		ro("cq_data_size", u64(d.CQDataSize)),
		ro("cq_cnt", u64(d.CQCnt)),
		ro("ep_cnt", u64(d.EPCnt)),
		ro("tx_ctx_cnt", u64(d.TxCtxCnt)),
		ro("rx_ctx_cnt", u64(d.RxCtxCnt)),
		ro("max_ep_tx_ctx", u64(d.MaxEPTxCtx)),
		ro("max_ep_rx_ctx", u64(d.MaxEPRxCtx)),
		ro("max_ep_stx_ctx", u64(d.MaxEPStxCtx)),
		ro("max_ep_srx_ctx", u64(d.MaxEPSrxCtx)),
		ro("cntr_cnt", u64(d.CntrCnt)),
		ro("mr_iov_limit", u64(d.MRIovLimit)),
		ro("caps", d.Caps.String()),
		ro("mode", d.Mode.String()),
		ro("auth_key_size", u64(d.AuthKeySize)),
		ro("max_err_data", u64(d.MaxErrData)),
		ro("mr_cnt", u64(d.MRCnt)),
		{Name: "tclass", Get: func() string { return fi.TClass(dom.tclass.Load()).String() }, Set: dom.setTClass},
		ro("fabric", f.Name),
		ro("prov_name", f.ProvName),
		ro("prov_version", f.ProvVersion.String()),
		ro("api_version", f.APIVersion.String()),
	}
}

// provErrno is the operating-system errno inside err, or 0.
func provErrno(err error) int {
	var se syscall.Errno
	if errors.As(err, &se) {
		return int(se)
	}
	return 0
}
