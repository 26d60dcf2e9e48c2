package fi

import (
	"bytes"
	"encoding/json"
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
// "(nil)". One walk of the structs (walkInfo) gives every field to a
// sink: infoPrinter prints this text, jsonSink the same fields as JSON
// (Info.MarshalJSON), so the two forms cannot list different fields.

// String returns the text fi_tostr(info, FI_TYPE_INFO) returns: a block
// that starts with "fi_info:\n" and ends with "    nic: (nil)\n".
func (info *Info) String() string {
	var p infoPrinter
	walkInfo(&p, info)
	return p.String()
}

// MarshalJSON writes info as one JSON object with fi_info's field names as
// keys, in the order fi_tostr prints them: the attribute structs as
// objects under their field names (tx_attr, rx_attr, ep_attr, domain_attr,
// fabric_attr), numbers as numbers, flag sets as arrays of their names,
// enumerations, versions and addresses as fi_tostr prints them, and NULL
// (a missing struct, address or string, handle and nic) as null.
func (info *Info) MarshalJSON() ([]byte, error) {
	var j jsonSink
	walkInfo(&j, info)
	return j.Bytes(), nil
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
		walkInfo(&p, info)
	}
	_, err := io.WriteString(w, p.String())
	return err
}

// String returns fi_tostr(attr, FI_TYPE_TX_ATTR): "fi_tx_attr:\n    caps: ...".
func (attr *TxAttr) String() string { var p infoPrinter; walkTx(&p, attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_RX_ATTR).
func (attr *RxAttr) String() string { var p infoPrinter; walkRx(&p, attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_EP_ATTR).
func (attr *EPAttr) String() string { var p infoPrinter; walkEP(&p, attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_DOMAIN_ATTR).
func (attr *DomainAttr) String() string { var p infoPrinter; walkDomain(&p, attr); return p.String() }

// String returns fi_tostr(attr, FI_TYPE_FABRIC_ATTR).
func (attr *FabricAttr) String() string { var p infoPrinter; walkFabric(&p, attr); return p.String() }

// infoSink takes fi_info's fields from walkInfo in fi_tostr's order:
// infoPrinter prints fi_tostr's text, jsonSink writes JSON.
type infoSink interface {
	// field is one field: text as fi_tostr prints it, v its JSON value.
	field(key, text string, v any)
	// open starts the struct in field key (fi_tostr's label is "fi_"+key);
	// it reports false, having written NULL, when the struct is absent.
	open(key string, absent bool) bool
	// close ends the struct open started.
	close()
}

// infoPrinter prints fi_tostr's text: "key: value" lines, four spaces of
// indent per level.
type infoPrinter struct {
	strings.Builder
	ind string
}

const tostrIndent = "    "

func (p *infoPrinter) field(key, text string, _ any) {
	p.WriteString(p.ind)
	p.WriteString(key)
	p.WriteString(": ")
	p.WriteString(text)
	p.WriteByte('\n')
}

func (p *infoPrinter) open(key string, absent bool) bool {
	if absent {
		p.field("fi_"+key, "(null)", nil)
		return false
	}
	p.WriteString(p.ind + "fi_" + key + ":\n")
	p.ind += tostrIndent
	return true
}

func (p *infoPrinter) close() { p.ind = p.ind[:len(p.ind)-len(tostrIndent)] }

// jsonSink writes one JSON object; a struct opened at the top is the
// object itself, deeper ones are objects under their keys.
type jsonSink struct {
	bytes.Buffer
	depth int
	first bool // nothing written yet in the current object
}

func (j *jsonSink) key(k string) {
	if !j.first {
		j.WriteByte(',')
	}
	j.first = false
	j.Write(jsonValue(k))
	j.WriteByte(':')
}

func (j *jsonSink) field(key, _ string, v any) {
	j.key(key)
	j.Write(jsonValue(v))
}

func (j *jsonSink) open(key string, absent bool) bool {
	if j.depth > 0 {
		j.key(key)
	}
	if absent {
		j.WriteString("null")
		return false
	}
	j.WriteByte('{')
	j.depth++
	j.first = true
	return true
}

func (j *jsonSink) close() {
	j.WriteByte('}')
	j.depth--
	j.first = false
}

// jsonValue marshals the values walkInfo gives: strings, numbers, string
// slices and nil, none of which encoding/json fails on.
func jsonValue(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// FlagNames turns a flag set as fi_tostr prints it, "[ FI_MSG, FI_SEND ]",
// into its names, the form flag sets take in JSON (empty when none).
func FlagNames(set string) []string {
	s := strings.TrimSpace(set)
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if s == "" {
		return []string{}
	}
	names := strings.Split(s, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	return names
}

// Field writers for walkInfo.

func putStr(s infoSink, key, v string)        { s.field(key, v, v) }
func putNum(s infoSink, key string, v uint64) { s.field(key, strconv.FormatUint(v, 10), v) }
func putHex(s infoSink, key string, v uint64) { s.field(key, "0x"+strconv.FormatUint(v, 16), v) }
func putFlags(s infoSink, key, set string)    { s.field(key, set, FlagNames(set)) }

// putCStr writes a C string field; "" stands for NULL.
func putCStr(s infoSink, key, v string) {
	if v == "" {
		s.field(key, "(null)", nil)
		return
	}
	putStr(s, key, v)
}

// putCtxCnt writes ep_attr's tx_ctx_cnt and rx_ctx_cnt, which may hold
// SHARED_CONTEXT.
func putCtxCnt(s infoSink, key string, v uint64) {
	if v == SHARED_CONTEXT {
		putStr(s, key, "FI_SHARED_CONTEXT")
		return
	}
	putNum(s, key, v)
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
func infoAddr(s infoSink, key string, format AddrFormat, a *Addr) {
	switch {
	case a == nil:
		s.field(key, "(null)", nil)
	case format == SOCKADDR || format == SOCKADDR_IN || format == SOCKADDR_IN6 || format == ADDR_STR:
		putStr(s, key, a.String())
	default:
		putStr(s, key, "")
	}
}

func infoAddrLen(a *Addr) uint64 {
	if a == nil {
		return 0
	}
	return uint64(a.Len())
}

// walkInfo gives s every field of info fi_tostr prints, in its order.
func walkInfo(s infoSink, info *Info) {
	if info == nil {
		info = &Info{}
	}
	s.open("info", false)
	putFlags(s, "caps", info.Caps.String())
	putFlags(s, "mode", info.Mode.String())
	putStr(s, "addr_format", info.AddrFormat.String())
	putNum(s, "src_addrlen", infoAddrLen(info.SrcAddr))
	putNum(s, "dest_addrlen", infoAddrLen(info.DestAddr))
	infoAddr(s, "src_addr", info.AddrFormat, info.SrcAddr)
	infoAddr(s, "dest_addr", info.AddrFormat, info.DestAddr)
	if info.Handle == 0 {
		s.field("handle", "(nil)", nil)
	} else {
		putHex(s, "handle", info.Handle)
	}
	walkTx(s, info.TxAttr)
	walkRx(s, info.RxAttr)
	walkEP(s, info.EPAttr)
	walkDomain(s, info.DomainAttr)
	walkFabric(s, info.FabricAttr)
	s.field("nic", "(nil)", nil)
	s.close()
}

func walkTx(s infoSink, a *TxAttr) {
	if !s.open("tx_attr", a == nil) {
		return
	}
	putFlags(s, "caps", a.Caps.String())
	putFlags(s, "mode", a.Mode.String())
	putFlags(s, "op_flags", a.OpFlags.String())
	putFlags(s, "msg_order", a.MsgOrder.String())
	putFlags(s, "comp_order", a.CompOrder.String())
	putNum(s, "inject_size", a.InjectSize)
	putNum(s, "size", a.Size)
	putNum(s, "iov_limit", a.IovLimit)
	putNum(s, "rma_iov_limit", a.RMAIovLimit)
	putHex(s, "tclass", uint64(a.TClass))
	s.close()
}

func walkRx(s infoSink, a *RxAttr) {
	if !s.open("rx_attr", a == nil) {
		return
	}
	putFlags(s, "caps", a.Caps.String())
	putFlags(s, "mode", a.Mode.String())
	putFlags(s, "op_flags", a.OpFlags.String())
	putFlags(s, "msg_order", a.MsgOrder.String())
	putFlags(s, "comp_order", a.CompOrder.String())
	putNum(s, "total_buffered_recv", a.TotalBufferedRecv)
	putNum(s, "size", a.Size)
	putNum(s, "iov_limit", a.IovLimit)
	s.close()
}

func walkEP(s infoSink, a *EPAttr) {
	if !s.open("ep_attr", a == nil) {
		return
	}
	putStr(s, "type", a.Type.String())
	putStr(s, "protocol", a.Protocol.String())
	putNum(s, "protocol_version", uint64(a.ProtocolVersion))
	putNum(s, "max_msg_size", a.MaxMsgSize)
	putNum(s, "msg_prefix_size", a.MsgPrefixSize)
	putNum(s, "max_order_raw_size", a.MaxOrderRAWSize)
	putNum(s, "max_order_war_size", a.MaxOrderWARSize)
	putNum(s, "max_order_waw_size", a.MaxOrderWAWSize)
	s.field("mem_tag_format", fmt.Sprintf("0x%016x", a.MemTagFormat), a.MemTagFormat)
	putCtxCnt(s, "tx_ctx_cnt", a.TxCtxCnt)
	putCtxCnt(s, "rx_ctx_cnt", a.RxCtxCnt)
	putNum(s, "auth_key_size", a.AuthKeySize)
	s.close()
}

func walkDomain(s infoSink, a *DomainAttr) {
	if !s.open("domain_attr", a == nil) {
		return
	}
	putHex(s, "domain", a.Domain)
	putCStr(s, "name", a.Name)
	putStr(s, "threading", a.Threading.String())
	putStr(s, "control_progress", a.ControlProgress.String())
	putStr(s, "data_progress", a.DataProgress.String())
	putStr(s, "resource_mgmt", a.ResourceMgmt.String())
	putStr(s, "av_type", a.AVType.String())
	putFlags(s, "mr_mode", a.MRMode.String())
	putNum(s, "mr_key_size", a.MRKeySize)
	putNum(s, "cq_data_size", a.CQDataSize)
	putNum(s, "cq_cnt", a.CQCnt)
	putNum(s, "ep_cnt", a.EPCnt)
	putNum(s, "tx_ctx_cnt", a.TxCtxCnt)
	putNum(s, "rx_ctx_cnt", a.RxCtxCnt)
	putNum(s, "max_ep_tx_ctx", a.MaxEPTxCtx)
	putNum(s, "max_ep_rx_ctx", a.MaxEPRxCtx)
	putNum(s, "max_ep_stx_ctx", a.MaxEPStxCtx)
	putNum(s, "max_ep_srx_ctx", a.MaxEPSrxCtx)
	putNum(s, "cntr_cnt", a.CntrCnt)
	putNum(s, "mr_iov_limit", a.MRIovLimit)
	putFlags(s, "caps", a.Caps.String())
	putFlags(s, "mode", a.Mode.String())
	putNum(s, "auth_key_size", a.AuthKeySize)
	putNum(s, "max_err_data", a.MaxErrData)
	putNum(s, "mr_cnt", a.MRCnt)
	putHex(s, "tclass", uint64(a.TClass))
	s.close()
}

func walkFabric(s infoSink, a *FabricAttr) {
	if !s.open("fabric_attr", a == nil) {
		return
	}
	putCStr(s, "name", a.Name)
	putCStr(s, "prov_name", a.ProvName)
	putStr(s, "prov_version", a.ProvVersion.String())
	putStr(s, "api_version", a.APIVersion.String())
	s.close()
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
