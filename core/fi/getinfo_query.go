package fi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fabricfs/fabricfs/core/ctl"
)

// Query is one fi_getinfo call written as text, as the getinfo file takes
// it: fi_info(1)'s options, then optionally the hints themselves as an
// fi_info block. `fi_info -p tcp -t FI_EP_MSG` becomes
//
//	echo -p tcp -t FI_EP_MSG > getinfo
//
// Options: -p/--provider, -t/--ep_type, -c/--caps, -m/--mode,
// -a/--addr_format, -d/--domain, -f/--fabric, -n/--node, -P/--port,
// -s/--src_addr (node as the source: FI_SOURCE), and fabricfs's
// --flags (fi_getinfo flags such as FI_NUMERICHOST|FI_PROV_ATTR_ONLY) and
// --version MAJOR.MINOR. Long options take their value after '=' or as the
// next word. As with fi_info (util/info.c), the mode and the domain's mode
// default to every bit set, and mr_mode to every bit but FI_MR_BASIC and
// FI_MR_SCALABLE (FI_MR_UNSPEC for --version before 1.5, which knows only
// the legacy modes): the query accepts what providers ask of applications,
// such as verbs's FI_MR_LOCAL and FI_RX_CQ_DATA.
//
// The hints block starts at a line "fi_info:" and runs to the end of the
// text: struct fi_info as fi_tostr(FI_TYPE_INFO) prints it (ParseInfo).
// It is the hints struct itself, with fi_getinfo(3)'s meaning for every
// field and no defaults: a field or struct left out is zero, as in a
// struct from fi_allocinfo (mode 0: the application supports no mode).
// With a block, the options give version, node, service and flags; an
// option that sets a hint the block sets too is EINVAL.
//
// The answer's form (Form): `fi_info -v` text by default. The flag-style
// options of fi_info ask for the others: -l/--list lists the providers,
// -e/--env the environment variables the tree reads, and a query whose
// first word is "fi_info" (a whole fi_info command line) answers as
// fi_info does, the summary form unless -v/--verbose is given.
// fabricfs's -j/--json (no option of fi_info's) answers any form in JSON
// instead: one array, of the entries' fi_info objects (Info.MarshalJSON)
// in the verbose form, of {"provider", "fabric", "domain", "version",
// "type", "protocol"} in the summary form, of {"provider", "version"} in
// the list form, and empty for -e.
type Query struct {
	Version Version
	Node    string
	Service string
	Flags   uint64
	Hints   *Info
	Form    Form
	JSON    bool
}

// Form is how the answer to a Query prints.
type Form int

const (
	FormVerbose Form = iota // `fi_info -v`: each entry after a "---" line (WriteInfos)
	FormSummary             // `fi_info`: provider, fabric, domain, version, type, protocol
	FormList                // `fi_info -l`: each provider and its version
	FormEnv                 // `fi_info -e`: the environment variables read
)

// GetInfoText answers the query text s (ParseQuery) over offered: the
// getinfo file's whole question and its answer's text in the query's
// Form. A malformed text fails with EINVAL, its sentence prefixed
// "fi_getinfo: " as GetInfo's own errors are.
func GetInfoText(ctx context.Context, s string, offered []*Info) (string, error) {
	q, err := ParseQuery(s)
	if err != nil {
		return "", err
	}
	if q.Form == FormEnv {
		// fi_info -e prints "# NAME: type" and a description per variable.
		if q.JSON {
			return "[]\n", nil
		}
		// What libfabric's FI_TCP_IFACE, FI_TCP_PORT_LOW_RANGE and
		// FI_TCP_PORT_HIGH_RANGE set, the daemon's flags set.
		return "# The tree reads no environment variables: the daemon's flags (fabricfs(8)) set\n" +
			"# what FI_TCP_IFACE, FI_TCP_PORT_LOW_RANGE and FI_TCP_PORT_HIGH_RANGE set for libfabric.\n", nil
	}
	infos, err := GetInfo(ctx, q.Version, q.Node, q.Service, q.Flags, q.Hints, offered)
	if err != nil {
		return "", err
	}
	if q.Form == FormVerbose || q.Flags&uint64(PROV_ATTR_ONLY) != 0 && q.Form != FormList {
		if q.JSON {
			return jsonAnswer(infos), nil
		}
		var b strings.Builder
		err = WriteInfos(&b, infos)
		return b.String(), err
	}
	var rows []summary
	for _, in := range infos {
		fab, dom, ep := in.FabricAttr, in.DomainAttr, in.EPAttr
		if fab != nil && q.Form == FormList {
			rows = append(rows, summary{{"provider", fab.ProvName}, {"version", fab.ProvVersion.String()}})
			continue
		}
		if fab == nil || dom == nil || ep == nil {
			continue // GetInfo's entries always have them
		}
		rows = append(rows, summary{{"provider", fab.ProvName}, {"fabric", fab.Name}, {"domain", dom.Name},
			{"version", fab.ProvVersion.String()}, {"type", ep.Type.String()}, {"protocol", ep.Protocol.String()}})
	}
	if q.JSON {
		objs := make([]json.RawMessage, len(rows))
		for i, r := range rows {
			objs[i] = r.object()
		}
		return jsonAnswer(objs), nil
	}
	var b strings.Builder
	for _, r := range rows {
		r.write(&b, q.Form == FormList)
	}
	return b.String(), nil
}

// summary is an entry as fi_info's summary form (print_short_info) or
// list form (print_providers) shows it: fields by name, in order, strings
// as the C structs hold them ("" for NULL).
type summary [][2]string

// write prints the entry as fi_info does: "provider: NAME" and the other
// fields indented, or in the list form "NAME:" and its version.
func (r summary) write(b *strings.Builder, list bool) {
	for i, f := range r {
		switch {
		case i == 0 && list:
			fmt.Fprintf(b, "%s:\n", cString(f[1]))
		case i == 0:
			fmt.Fprintf(b, "%s: %s\n", f[0], cString(f[1]))
		default:
			fmt.Fprintf(b, "    %s: %s\n", f[0], cString(f[1]))
		}
	}
}

// object is the entry as a JSON object: its fields in order, as strings,
// NULL as null.
func (r summary) object() json.RawMessage {
	var j jsonSink
	j.open("", false)
	for _, f := range r {
		putCStr(&j, f[0], f[1])
	}
	j.close()
	return j.Bytes()
}

// jsonAnswer is v as one line of JSON.
func jsonAnswer(v any) string { return string(jsonValue(v)) + "\n" }

// queryOptions lists the options for messages.
const queryOptions = "-p -t -c -m -a -d -f -n -P -s --flags --version -l -v -e -j"

// ParseQuery parses a query's text.
func ParseQuery(s string) (*Query, error) {
	opts, block := s, ""
	if i := blockStart(s); i >= 0 {
		opts, block = s[:i], s[i:]
	}
	var words []string
	for _, l := range strings.Split(opts, "\n") {
		w, err := ctl.Tokenize(l)
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "%v", err)
		}
		words = append(words, w...)
	}
	q := &Query{Version: APIVersion}
	command := len(words) > 0 && words[0] == "fi_info"
	if command {
		words = words[1:]
	}
	verbose, list, env := false, false, false
	// The hints the options set, applied once the block is read.
	var set []func(h *Info) error
	hint := func(opt, field string, isSet func(h *Info) bool, apply func(h *Info)) {
		set = append(set, func(h *Info) error {
			if block != "" && isSet(h) {
				return getinfoErrorf(EINVAL, "%s and the hints block both set %s", opt, field)
			}
			apply(h)
			return nil
		})
	}
	for i := 0; i < len(words); i++ {
		opt, val, hasVal := strings.Cut(words[i], "=")
		if !strings.HasPrefix(opt, "--") {
			hasVal = false
			opt, val = words[i], ""
		}
		switch opt {
		case "-l", "--list":
			list = true
			continue
		case "-v", "--verbose":
			verbose = true
			continue
		case "-e", "--env":
			env = true
			continue
		case "-j", "--json":
			q.JSON = true
			continue
		}
		if !hasVal {
			if i+1 >= len(words) {
				return nil, getinfoErrorf(EINVAL, "option %s needs a value", opt)
			}
			i++
			val = words[i]
		}
		var err error
		switch opt {
		case "-p", "--provider":
			hint(opt, "fabric_attr.prov_name", func(h *Info) bool { return fabricAttr(h).ProvName != "" },
				func(h *Info) { h.FabricAttr.ProvName = val })
		case "-t", "--ep_type":
			var t EPType
			t, err = Parse[EPType](val)
			hint(opt, "ep_attr.type", func(h *Info) bool { return epAttr(h).Type != EP_UNSPEC },
				func(h *Info) { h.EPAttr.Type = t })
		case "-c", "--caps":
			var c Caps
			c, err = Parse[Caps](val)
			hint(opt, "caps", func(h *Info) bool { return h.Caps != 0 }, func(h *Info) { h.Caps = c })
		case "-m", "--mode":
			var m Mode
			m, err = Parse[Mode](val)
			hint(opt, "mode", func(h *Info) bool { return h.Mode != 0 }, func(h *Info) { h.Mode = m })
		case "-a", "--addr_format":
			var f AddrFormat
			f, err = Parse[AddrFormat](val)
			hint(opt, "addr_format", func(h *Info) bool { return h.AddrFormat != FORMAT_UNSPEC },
				func(h *Info) { h.AddrFormat = f })
		case "-d", "--domain":
			hint(opt, "domain_attr.name", func(h *Info) bool { return domainAttr(h).Name != "" },
				func(h *Info) { h.DomainAttr.Name = val })
		case "-f", "--fabric":
			hint(opt, "fabric_attr.name", func(h *Info) bool { return fabricAttr(h).Name != "" },
				func(h *Info) { h.FabricAttr.Name = val })
		case "-n", "--node":
			q.Node = val
		case "-P", "--port":
			q.Service = val
		case "-s", "--src_addr":
			q.Node = val
			q.Flags |= uint64(SOURCE)
		case "--flags":
			var f Caps
			f, err = Parse[Caps](val)
			q.Flags |= uint64(f)
		case "--version":
			var maj, min uint32
			if _, e := fmt.Sscanf(val, "%d.%d", &maj, &min); e != nil {
				err = fmt.Errorf("want MAJOR.MINOR")
			}
			q.Version = MakeVersion(maj, min)
		default:
			return nil, getinfoErrorf(EINVAL, "unknown option %q; options: %s", opt, queryOptions)
		}
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "%s %s: %v", opt, val, err)
		}
	}

	// fi_info's precedence (util/info.c, run): -e, then -v, then -l; -l
	// asks for FI_PROV_ATTR_ONLY whatever form prints the answer.
	if list {
		q.Flags |= uint64(PROV_ATTR_ONLY)
	}
	switch {
	case env:
		q.Form = FormEnv
	case verbose:
		q.Form = FormVerbose
	case list:
		q.Form = FormList
	case command:
		q.Form = FormSummary
	}
	if block != "" {
		h, err := ParseInfo(block)
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "hints block: %v", err)
		}
		q.Hints = h
	} else {
		mr := ^(MR_BASIC | MR_SCALABLE)
		if q.Version < MakeVersion(1, 5) {
			mr = MR_UNSPEC
		}
		q.Hints = &Info{Mode: ^Mode(0), DomainAttr: &DomainAttr{Mode: ^Mode(0), MRMode: mr}}
	}
	h := q.Hints
	if block == "" {
		h.TxAttr, h.RxAttr, h.EPAttr, h.FabricAttr = &TxAttr{}, &RxAttr{}, &EPAttr{}, &FabricAttr{}
	}
	for _, apply := range set {
		if err := apply(h); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// blockStart returns the offset of the line "fi_info:" that starts the
// hints block, or -1.
func blockStart(s string) int {
	for off := 0; off < len(s); {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			end = len(s) - off
		}
		if strings.TrimSpace(s[off:off+end]) == "fi_info:" {
			return off
		}
		off += end + 1
	}
	return -1
}

// fabricAttr, epAttr and domainAttr return the hints' struct, made for an
// option when the block has none: all zero, as fi_allocinfo makes it.
func fabricAttr(h *Info) *FabricAttr {
	if h.FabricAttr == nil {
		h.FabricAttr = &FabricAttr{}
	}
	return h.FabricAttr
}

func epAttr(h *Info) *EPAttr {
	if h.EPAttr == nil {
		h.EPAttr = &EPAttr{}
	}
	return h.EPAttr
}

func domainAttr(h *Info) *DomainAttr {
	if h.DomainAttr == nil {
		h.DomainAttr = &DomainAttr{}
	}
	return h.DomainAttr
}
