package fi

import (
	"context"
	"fmt"
	"strings"

	"github.com/fabricfs/fabricfs/core/ctl"
)

// Query is one fi_getinfo call written as text, as the getinfo file takes
// it. The text is fi_info(1)'s own options, so `fi_info -p tcp -t FI_EP_MSG`
// becomes
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
// FI_MR_SCALABLE: the query accepts what providers ask of applications,
// such as verbs's FI_MR_LOCAL and FI_RX_CQ_DATA.
type Query struct {
	Version Version
	Node    string
	Service string
	Flags   uint64
	Hints   *Info
}

// GetInfoText is GetInfo of the query text s (ParseQuery) over offered:
// the getinfo file's whole question. A malformed text fails with EINVAL,
// its sentence prefixed "fi_getinfo: " as GetInfo's own errors are.
func GetInfoText(ctx context.Context, s string, offered []*Info) ([]*Info, error) {
	q, err := ParseQuery(s)
	if err != nil {
		return nil, err
	}
	return GetInfo(ctx, q.Version, q.Node, q.Service, q.Flags, q.Hints, offered)
}

// ParseQuery parses a query's text.
func ParseQuery(s string) (*Query, error) {
	var words []string
	for _, l := range strings.Split(s, "\n") {
		w, err := ctl.Tokenize(l)
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "%v", err)
		}
		words = append(words, w...)
	}
	q := &Query{Version: APIVersion, Hints: &Info{
		Mode:       ^Mode(0),
		TxAttr:     &TxAttr{},
		RxAttr:     &RxAttr{},
		EPAttr:     &EPAttr{},
		DomainAttr: &DomainAttr{Mode: ^Mode(0), MRMode: ^(MR_BASIC | MR_SCALABLE)},
		FabricAttr: &FabricAttr{},
	}}
	h := q.Hints
	for i := 0; i < len(words); i++ {
		opt, val, hasVal := strings.Cut(words[i], "=")
		if !strings.HasPrefix(opt, "--") {
			hasVal = false
			opt, val = words[i], ""
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
			h.FabricAttr.ProvName = val
		case "-t", "--ep_type":
			h.EPAttr.Type, err = Parse[EPType](val)
		case "-c", "--caps":
			h.Caps, err = Parse[Caps](val)
		case "-m", "--mode":
			h.Mode, err = Parse[Mode](val)
		case "-a", "--addr_format":
			h.AddrFormat, err = Parse[AddrFormat](val)
		case "-d", "--domain":
			h.DomainAttr.Name = val
		case "-f", "--fabric":
			h.FabricAttr.Name = val
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
			return nil, getinfoErrorf(EINVAL, "unknown option %q; options: -p -t -c -m -a -d -f -n -P -s --flags --version", opt)
		}
		if err != nil {
			return nil, getinfoErrorf(EINVAL, "%s %s: %v", opt, val, err)
		}
	}
	return q, nil
}
