package fi

import (
	"fmt"
	"strconv"
	"strings"
)

// This file reads back what tostr.go prints: the text of
// fi_tostr(FI_TYPE_INFO), so that an fi_info a program holds can travel as
// text (the getinfo file's hints block) and come back the same.

// MaxInfoText bounds the text ParseInfo reads: a printed fi_info is about
// 3 KiB.
const MaxInfoText = 64 << 10

// ParseInfo reads one fi_info block as String prints it (and libfabric's
// fi_tostr(FI_TYPE_INFO) and `fi_info -v` print it): a line "fi_info:",
// then "key: value" lines, an attribute struct as its head line
// ("fi_tx_attr:") followed by its fields indented deeper, or "fi_tx_attr:
// (null)". Every value is read as String prints it: flag sets in brackets
// (or any form Parse reads), enumerations by name, numbers, "(null)" for
// an empty string or a missing address, "(nil)" or "0x..." for handle.
//
// A field may be left out: it is then zero, as in a struct from
// fi_allocinfo, and so is an attribute struct that is not there at all.
// Fields may come in any order, each at most once; an unknown key, a value
// that does not read, a nic other than "(nil)", an address fi_tostr would
// not print (a format other than FI_SOCKADDR, FI_SOCKADDR_IN,
// FI_SOCKADDR_IN6 and FI_ADDR_STR), or an addrlen that is not the
// address's is EINVAL.
//
// A value fi_tostr cannot print (flag bits without a name, an enumeration
// it prints as "Unknown") is EINVAL too, so what ParseInfo reads prints as
// text that reads back the same. What fi_tostr leaves out cannot come
// back: auth_key bytes, fabric_attr.fabric; ParseInfo(info.String())
// prints as info does, but may differ from info in those.
func ParseInfo(s string) (*Info, error) {
	if len(s) > MaxInfoText {
		return nil, fmt.Errorf("fi_info text of %d bytes (at most %d)", len(s), MaxInfoText)
	}
	p := &infoParser{info: &Info{}}
	if err := p.parse(s); err != nil {
		return nil, fmt.Errorf("fi_info: %v", err)
	}
	return p.info, nil
}

// A fieldSet reads the fields of one struct: key to the function that
// stores its value.
type fieldSet map[string]func(v string) error

type infoParser struct {
	info *Info
	// Raw address lines, read once addr_format is known.
	srcAddr, destAddr       *string
	srcAddrLen, destAddrLen uint64
}

func (p *infoParser) parse(s string) error {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || strings.TrimSpace(lines[i]) != "fi_info:" {
		return fmt.Errorf(`the text must start with "fi_info:"`)
	}
	top := p.topFields()
	seen := map[string]bool{}
	topIndent := -1
	var inner fieldSet // the fields of the attribute struct being read
	var innerName string
	innerIndent := -1
	for i++; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			continue
		}
		body := strings.TrimLeft(l, " \t")
		ind := len(l) - len(body)
		key, val, ok := strings.Cut(body, ":")
		if !ok {
			return fmt.Errorf("line %d: want \"key: value\", got %q", i+1, l)
		}
		val = strings.TrimSpace(val)
		if topIndent < 0 {
			if ind == 0 {
				return fmt.Errorf("line %d: fields are indented under fi_info:", i+1)
			}
			topIndent = ind
		}
		var fields fieldSet
		var path string
		switch {
		case ind == topIndent:
			fields, path, inner, innerIndent = top, key, nil, -1
		case ind > topIndent && inner != nil:
			if innerIndent < 0 {
				innerIndent = ind
			}
			if ind != innerIndent {
				return fmt.Errorf("line %d: indented unlike the other fields of %s", i+1, innerName)
			}
			fields, path = inner, innerName+"."+key
		default:
			return fmt.Errorf("line %d: %q is not within a struct", i+1, l)
		}
		if seen[path] {
			return fmt.Errorf("line %d: %s given twice", i+1, path)
		}
		seen[path] = true
		if ind == topIndent {
			if head := p.attrHead(key); head != nil {
				switch val {
				case "(null)":
				case "":
					inner, innerName = head(), key
				default:
					return fmt.Errorf("line %d: %s: want nothing after ':' or (null), got %q", i+1, key, val)
				}
				continue
			}
		}
		set, ok := fields[key]
		if !ok {
			return fmt.Errorf("line %d: unknown field %s", i+1, path)
		}
		if err := set(val); err != nil {
			return fmt.Errorf("line %d: %s: %v", i+1, path, err)
		}
	}
	return p.addrs()
}

// attrHead returns, for the key of an attribute struct, the function that
// allocates it and returns its fields.
func (p *infoParser) attrHead(key string) func() fieldSet {
	in := p.info
	switch key {
	case "fi_tx_attr":
		return func() fieldSet { in.TxAttr = &TxAttr{}; return txFields(in.TxAttr) }
	case "fi_rx_attr":
		return func() fieldSet { in.RxAttr = &RxAttr{}; return rxFields(in.RxAttr) }
	case "fi_ep_attr":
		return func() fieldSet { in.EPAttr = &EPAttr{}; return epFields(in.EPAttr) }
	case "fi_domain_attr":
		return func() fieldSet { in.DomainAttr = &DomainAttr{}; return domainFields(in.DomainAttr) }
	case "fi_fabric_attr":
		return func() fieldSet { in.FabricAttr = &FabricAttr{}; return fabricFields(in.FabricAttr) }
	}
	return nil
}

func (p *infoParser) topFields() fieldSet {
	in := p.info
	return fieldSet{
		"caps":         named(&in.Caps),
		"mode":         named(&in.Mode),
		"addr_format":  named(&in.AddrFormat),
		"src_addrlen":  decimal(&p.srcAddrLen),
		"dest_addrlen": decimal(&p.destAddrLen),
		"src_addr":     func(v string) error { p.srcAddr = &v; return nil },
		"dest_addr":    func(v string) error { p.destAddr = &v; return nil },
		"handle":       pointer(&in.Handle),
		"nic": func(v string) error {
			if v != "(nil)" {
				return fmt.Errorf("only (nil): the tree's entries have no nic")
			}
			return nil
		},
	}
}

func txFields(a *TxAttr) fieldSet {
	return fieldSet{
		"caps":          named(&a.Caps),
		"mode":          named(&a.Mode),
		"op_flags":      named(&a.OpFlags),
		"msg_order":     named(&a.MsgOrder),
		"comp_order":    named(&a.CompOrder),
		"inject_size":   decimal(&a.InjectSize),
		"size":          decimal(&a.Size),
		"iov_limit":     decimal(&a.IovLimit),
		"rma_iov_limit": decimal(&a.RMAIovLimit),
		"tclass":        named(&a.TClass),
	}
}

func rxFields(a *RxAttr) fieldSet {
	return fieldSet{
		"caps":                named(&a.Caps),
		"mode":                named(&a.Mode),
		"op_flags":            named(&a.OpFlags),
		"msg_order":           named(&a.MsgOrder),
		"comp_order":          named(&a.CompOrder),
		"total_buffered_recv": decimal(&a.TotalBufferedRecv),
		"size":                decimal(&a.Size),
		"iov_limit":           decimal(&a.IovLimit),
	}
}

func epFields(a *EPAttr) fieldSet {
	return fieldSet{
		"type":               named(&a.Type),
		"protocol":           named(&a.Protocol),
		"protocol_version":   decimal32(&a.ProtocolVersion),
		"max_msg_size":       decimal(&a.MaxMsgSize),
		"msg_prefix_size":    decimal(&a.MsgPrefixSize),
		"max_order_raw_size": decimal(&a.MaxOrderRAWSize),
		"max_order_war_size": decimal(&a.MaxOrderWARSize),
		"max_order_waw_size": decimal(&a.MaxOrderWAWSize),
		"mem_tag_format":     hexValue(&a.MemTagFormat),
		"tx_ctx_cnt":         ctxCount(&a.TxCtxCnt),
		"rx_ctx_cnt":         ctxCount(&a.RxCtxCnt),
		"auth_key_size":      decimal(&a.AuthKeySize),
	}
}

func domainFields(a *DomainAttr) fieldSet {
	return fieldSet{
		"domain":           hexValue(&a.Domain),
		"name":             cStringValue(&a.Name),
		"threading":        named(&a.Threading),
		"control_progress": named(&a.ControlProgress),
		"data_progress":    named(&a.DataProgress),
		"resource_mgmt":    named(&a.ResourceMgmt),
		"av_type":          named(&a.AVType),
		"mr_mode":          named(&a.MRMode),
		"mr_key_size":      decimal(&a.MRKeySize),
		"cq_data_size":     decimal(&a.CQDataSize),
		"cq_cnt":           decimal(&a.CQCnt),
		"ep_cnt":           decimal(&a.EPCnt),
		"tx_ctx_cnt":       decimal(&a.TxCtxCnt),
		"rx_ctx_cnt":       decimal(&a.RxCtxCnt),
		"max_ep_tx_ctx":    decimal(&a.MaxEPTxCtx),
		"max_ep_rx_ctx":    decimal(&a.MaxEPRxCtx),
		"max_ep_stx_ctx":   decimal(&a.MaxEPStxCtx),
		"max_ep_srx_ctx":   decimal(&a.MaxEPSrxCtx),
		"cntr_cnt":         decimal(&a.CntrCnt),
		"mr_iov_limit":     decimal(&a.MRIovLimit),
		"caps":             named(&a.Caps),
		"mode":             named(&a.Mode),
		"auth_key_size":    decimal(&a.AuthKeySize),
		"max_err_data":     decimal(&a.MaxErrData),
		"mr_cnt":           decimal(&a.MRCnt),
		"tclass":           named(&a.TClass),
	}
}

func fabricFields(a *FabricAttr) fieldSet {
	return fieldSet{
		"name":         cStringValue(&a.Name),
		"prov_name":    cStringValue(&a.ProvName),
		"prov_version": version(&a.ProvVersion),
		"api_version":  version(&a.APIVersion),
	}
}

// named reads a flag set or enumeration: any form Parse reads, but only a
// value that prints as itself, since a value fi_tostr cannot print (an
// enumeration it prints as "Unknown", bits it has no name for) would not
// come back from the text.
func named[T Named](dst *T) func(string) error {
	return func(v string) error {
		x, err := Parse[T](v)
		if err != nil {
			return err
		}
		if s, ok := any(x).(fmt.Stringer); ok {
			if back, err := Parse[T](s.String()); err != nil || back != x {
				return fmt.Errorf("%q is %s, which fi_tostr prints as %q", v, hexOf(uint64(x)), s)
			}
		}
		*dst = x
		return nil
	}
}

func hexOf(x uint64) string { return "0x" + strconv.FormatUint(x, 16) }

func decimal(dst *uint64) func(string) error {
	return func(v string) (err error) { *dst, err = strconv.ParseUint(v, 10, 64); return err }
}

func decimal32(dst *uint32) func(string) error {
	return func(v string) error {
		x, err := strconv.ParseUint(v, 10, 32)
		*dst = uint32(x)
		return err
	}
}

// hexValue reads "0x..." (domain, mem_tag_format).
func hexValue(dst *uint64) func(string) error {
	return func(v string) error {
		h, ok := strings.CutPrefix(v, "0x")
		if !ok || h == "" {
			return fmt.Errorf("want a 0x hex number, got %q", v)
		}
		x, err := strconv.ParseUint(h, 16, 64)
		*dst = x
		return err
	}
}

// pointer reads handle: "(nil)" or a 0x hex number.
func pointer(dst *uint64) func(string) error {
	hex := hexValue(dst)
	return func(v string) error {
		if v == "(nil)" {
			*dst = 0
			return nil
		}
		return hex(v)
	}
}

// ctxCount reads ep_attr's tx_ctx_cnt and rx_ctx_cnt.
func ctxCount(dst *uint64) func(string) error {
	dec := decimal(dst)
	return func(v string) error {
		if v == "FI_SHARED_CONTEXT" {
			*dst = SHARED_CONTEXT
			return nil
		}
		return dec(v)
	}
}

func cStringValue(dst *string) func(string) error {
	return func(v string) error {
		if v != "(null)" {
			*dst = v
		}
		return nil
	}
}

func version(dst *Version) func(string) error {
	return func(v string) (err error) { *dst, err = ParseVersion(v); return err }
}

// addrs reads src_addr and dest_addr by the addr_format read.
func (p *infoParser) addrs() error {
	in := p.info
	for _, a := range []struct {
		name string
		text *string
		n    uint64
		dst  **Addr
	}{
		{"src_addr", p.srcAddr, p.srcAddrLen, &in.SrcAddr},
		{"dest_addr", p.destAddr, p.destAddrLen, &in.DestAddr},
	} {
		if a.text == nil || *a.text == "(null)" {
			if a.n != 0 {
				return fmt.Errorf("%slen %d without %s", a.name, a.n, a.name)
			}
			continue
		}
		addr, err := readInfoAddr(in.AddrFormat, *a.text)
		if err != nil {
			return fmt.Errorf("%s: %v", a.name, err)
		}
		// The length may be left out; given, it is the address's.
		if a.n != 0 && a.n != uint64(addr.Len()) {
			return fmt.Errorf("%slen %d: %s %q has %d bytes", a.name, a.n, a.name, *a.text, addr.Len())
		}
		*a.dst = &addr
	}
	return nil
}

// readInfoAddr reads an address as infoAddr prints it for format.
func readInfoAddr(format AddrFormat, s string) (Addr, error) {
	switch format {
	case SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6:
		return ParseAddr(s)
	case ADDR_STR:
		if a, err := ParseAddr(s); err == nil && strings.Contains(s, "://") && a.String() == s {
			a.Format = ADDR_STR
			return a, nil
		}
		if !strings.Contains(s, "://") {
			return Addr{}, fmt.Errorf("an FI_ADDR_STR address has the form PROTO://ADDRESS, got %q", s)
		}
		return Addr{Format: ADDR_STR, Str: s}, nil
	}
	return Addr{}, fmt.Errorf("fi_tostr prints no address of addr_format %v (it prints FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_ADDR_STR)", format)
}
