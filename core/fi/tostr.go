package fi

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// This file prints fi_info and its attributes the way libfabric's
// fi_tostr(FI_TYPE_INFO) does, which is what `fi_info -v` shows: one
// "key: value" line per field, in the C structs' order, four spaces of
// indent per level, flag sets in brackets, NULL pointers as "(null)"
// (strings, addresses, attribute structs) or "(nil)" (handle, nic; the
// domain pointer prints "0x0"), an empty Go string as a NULL one. Some
// fields are not printed at all: fabric_attr.fabric, the auth_key bytes
// (only auth_key_size). ep_attr's tx_ctx_cnt and rx_ctx_cnt print
// SHARED_CONTEXT as "FI_SHARED_CONTEXT". Info has no nic: it is always
// "(nil)".

// String returns the text fi_tostr(info, FI_TYPE_INFO) returns: a block
// that starts with "fi_info:\n" and ends with "    nic: (nil)\n".
func (info *Info) String() string {
	var p infoPrinter
	p.info(info)
	return p.String()
}

// WriteTo writes info.String() to w.
func (info *Info) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, info.String())
	return int64(n), err
}

// WriteInfos writes infos as `fi_info -v` prints them: each block after a
// "---" line.
func WriteInfos(w io.Writer, infos []*Info) error {
	var p infoPrinter
	for _, info := range infos {
		p.WriteString("---\n")
		p.info(info)
	}
	_, err := io.WriteString(w, p.String())
	return err
}

// String returns fi_tostr(attr, FI_TYPE_TX_ATTR): "fi_tx_attr:\n    caps: ...".
func (attr *TxAttr) String() string { var p infoPrinter; p.tx("", attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_RX_ATTR).
func (attr *RxAttr) String() string { var p infoPrinter; p.rx("", attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_EP_ATTR).
func (attr *EPAttr) String() string { var p infoPrinter; p.ep("", attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_DOMAIN_ATTR).
func (attr *DomainAttr) String() string { var p infoPrinter; p.domain("", attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_FABRIC_ATTR).
func (attr *FabricAttr) String() string { var p infoPrinter; p.fabric("", attr); return p.String() }

type infoPrinter struct{ strings.Builder }

const tostrIndent = "    "

func (p *infoPrinter) kv(ind, key, value string) {
	p.WriteString(ind)
	p.WriteString(key)
	p.WriteString(": ")
	p.WriteString(value)
	p.WriteByte('\n')
}

func (p *infoPrinter) num(ind, key string, v uint64) { p.kv(ind, key, strconv.FormatUint(v, 10)) }

// ctxCnt prints ep_attr's tx_ctx_cnt and rx_ctx_cnt, which may hold
// SHARED_CONTEXT.
func (p *infoPrinter) ctxCnt(ind, key string, v uint64) {
	if v == SHARED_CONTEXT {
		p.kv(ind, key, "FI_SHARED_CONTEXT")
		return
	}
	p.num(ind, key, v)
}

func (p *infoPrinter) hex(ind, key string, v uint64) { p.kv(ind, key, "0x"+strconv.FormatUint(v, 16)) }

// head starts an attribute block; it reports false, having printed
// "(null)", when the block is absent.
func (p *infoPrinter) head(ind, key string, absent bool) bool {
	if absent {
		p.kv(ind, key, "(null)")
		return false
	}
	p.WriteString(ind + key + ":\n")
	return true
}

// cString prints a C string field; "" stands for NULL.
func cString(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// infoAddr prints src_addr or dest_addr. fi_tostr formats an address by the
// fi_info's addr_format and prints nothing for formats it cannot format.
// Within the formats it can, each Addr prints by its own family; that differs
// from fi_tostr only for an fi_info whose addresses contradict its
// addr_format, where fi_tostr misreads the bytes.
func infoAddr(format AddrFormat, a *Addr) string {
	switch {
	case a == nil:
		return "(null)"
	case format == SOCKADDR || format == SOCKADDR_IN || format == SOCKADDR_IN6 || format == ADDR_STR:
		return a.String()
	}
	return ""
}

func infoAddrLen(a *Addr) uint64 {
	if a == nil {
		return 0
	}
	return uint64(a.Len())
}

func (p *infoPrinter) info(info *Info) {
	if info == nil {
		info = &Info{}
	}
	const ind = tostrIndent
	p.WriteString("fi_info:\n")
	p.kv(ind, "caps", info.Caps.String())
	p.kv(ind, "mode", info.Mode.String())
	p.kv(ind, "addr_format", info.AddrFormat.String())
	p.num(ind, "src_addrlen", infoAddrLen(info.SrcAddr))
	p.num(ind, "dest_addrlen", infoAddrLen(info.DestAddr))
	p.kv(ind, "src_addr", infoAddr(info.AddrFormat, info.SrcAddr))
	p.kv(ind, "dest_addr", infoAddr(info.AddrFormat, info.DestAddr))
	if info.Handle == 0 {
		p.kv(ind, "handle", "(nil)")
	} else {
		p.hex(ind, "handle", info.Handle)
	}
	p.tx(ind, info.TxAttr)
	p.rx(ind, info.RxAttr)
	p.ep(ind, info.EPAttr)
	p.domain(ind, info.DomainAttr)
	p.fabric(ind, info.FabricAttr)
	p.kv(ind, "nic", "(nil)")
}

func (p *infoPrinter) tx(ind string, a *TxAttr) {
	if !p.head(ind, "fi_tx_attr", a == nil) {
		return
	}
	ind += tostrIndent
	p.kv(ind, "caps", a.Caps.String())
	p.kv(ind, "mode", a.Mode.String())
	p.kv(ind, "op_flags", a.OpFlags.String())
	p.kv(ind, "msg_order", a.MsgOrder.String())
	p.kv(ind, "comp_order", a.CompOrder.String())
	p.num(ind, "inject_size", a.InjectSize)
	p.num(ind, "size", a.Size)
	p.num(ind, "iov_limit", a.IovLimit)
	p.num(ind, "rma_iov_limit", a.RMAIovLimit)
	p.kv(ind, "tclass", a.TClass.String())
}

func (p *infoPrinter) rx(ind string, a *RxAttr) {
	if !p.head(ind, "fi_rx_attr", a == nil) {
		return
	}
	ind += tostrIndent
	p.kv(ind, "caps", a.Caps.String())
	p.kv(ind, "mode", a.Mode.String())
	p.kv(ind, "op_flags", a.OpFlags.String())
	p.kv(ind, "msg_order", a.MsgOrder.String())
	p.kv(ind, "comp_order", a.CompOrder.String())
	p.num(ind, "total_buffered_recv", a.TotalBufferedRecv)
	p.num(ind, "size", a.Size)
	p.num(ind, "iov_limit", a.IovLimit)
}

func (p *infoPrinter) ep(ind string, a *EPAttr) {
	if !p.head(ind, "fi_ep_attr", a == nil) {
		return
	}
	ind += tostrIndent
	p.kv(ind, "type", a.Type.String())
	p.kv(ind, "protocol", a.Protocol.String())
	p.num(ind, "protocol_version", uint64(a.ProtocolVersion))
	p.num(ind, "max_msg_size", a.MaxMsgSize)
	p.num(ind, "msg_prefix_size", a.MsgPrefixSize)
	p.num(ind, "max_order_raw_size", a.MaxOrderRAWSize)
	p.num(ind, "max_order_war_size", a.MaxOrderWARSize)
	p.num(ind, "max_order_waw_size", a.MaxOrderWAWSize)
	p.kv(ind, "mem_tag_format", fmt.Sprintf("0x%016x", a.MemTagFormat))
	p.ctxCnt(ind, "tx_ctx_cnt", a.TxCtxCnt)
	p.ctxCnt(ind, "rx_ctx_cnt", a.RxCtxCnt)
	p.num(ind, "auth_key_size", a.AuthKeySize)
}

func (p *infoPrinter) domain(ind string, a *DomainAttr) {
	if !p.head(ind, "fi_domain_attr", a == nil) {
		return
	}
	ind += tostrIndent
	p.hex(ind, "domain", a.Domain)
	p.kv(ind, "name", cString(a.Name))
	p.kv(ind, "threading", a.Threading.String())
	p.kv(ind, "control_progress", a.ControlProgress.String())
	p.kv(ind, "data_progress", a.DataProgress.String())
	p.kv(ind, "resource_mgmt", a.ResourceMgmt.String())
	p.kv(ind, "av_type", a.AVType.String())
	p.kv(ind, "mr_mode", a.MRMode.String())
	p.num(ind, "mr_key_size", a.MRKeySize)
	p.num(ind, "cq_data_size", a.CQDataSize)
	p.num(ind, "cq_cnt", a.CQCnt)
	p.num(ind, "ep_cnt", a.EPCnt)
	p.num(ind, "tx_ctx_cnt", a.TxCtxCnt)
	p.num(ind, "rx_ctx_cnt", a.RxCtxCnt)
	p.num(ind, "max_ep_tx_ctx", a.MaxEPTxCtx)
	p.num(ind, "max_ep_rx_ctx", a.MaxEPRxCtx)
	p.num(ind, "max_ep_stx_ctx", a.MaxEPStxCtx)
	p.num(ind, "max_ep_srx_ctx", a.MaxEPSrxCtx)
	p.num(ind, "cntr_cnt", a.CntrCnt)
	p.num(ind, "mr_iov_limit", a.MRIovLimit)
	p.kv(ind, "caps", a.Caps.String())
	p.kv(ind, "mode", a.Mode.String())
	p.num(ind, "auth_key_size", a.AuthKeySize)
	p.num(ind, "max_err_data", a.MaxErrData)
	p.num(ind, "mr_cnt", a.MRCnt)
	p.kv(ind, "tclass", a.TClass.String())
}

func (p *infoPrinter) fabric(ind string, a *FabricAttr) {
	if !p.head(ind, "fi_fabric_attr", a == nil) {
		return
	}
	ind += tostrIndent
	p.kv(ind, "name", cString(a.Name))
	p.kv(ind, "prov_name", cString(a.ProvName))
	p.kv(ind, "prov_version", a.ProvVersion.String())
	p.kv(ind, "api_version", a.APIVersion.String())
}

// Clone returns a deep copy of info: attribute structs, addresses and auth
// keys are copied, not shared. Clone of nil is nil.
func (info *Info) Clone() *Info {
	if info == nil {
		return nil
	}
	c := *info
	c.SrcAddr = clonePtr(info.SrcAddr)
	c.DestAddr = clonePtr(info.DestAddr)
	c.TxAttr = clonePtr(info.TxAttr)
	c.RxAttr = clonePtr(info.RxAttr)
	c.EPAttr = clonePtr(info.EPAttr)
	if c.EPAttr != nil {
		c.EPAttr.AuthKey = slices.Clone(c.EPAttr.AuthKey)
	}
	c.DomainAttr = clonePtr(info.DomainAttr)
	if c.DomainAttr != nil {
		c.DomainAttr.AuthKey = slices.Clone(c.DomainAttr.AuthKey)
	}
	c.FabricAttr = clonePtr(info.FabricAttr)
	return &c
}

// CloneInfos returns a deep copy (Clone) of every entry of infos.
func CloneInfos(infos []*Info) []*Info {
	out := make([]*Info, len(infos))
	for i, in := range infos {
		out[i] = in.Clone()
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
