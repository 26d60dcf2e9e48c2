package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
)

// The documented shapes of the JSON views (docs/tree.md, "JSON views"),
// decoded strictly: a key the shape lacks fails the test.

type jsonTxAttr struct {
	Caps        []string `json:"caps"`
	Mode        []string `json:"mode"`
	OpFlags     []string `json:"op_flags"`
	MsgOrder    []string `json:"msg_order"`
	CompOrder   []string `json:"comp_order"`
	InjectSize  uint64   `json:"inject_size"`
	Size        uint64   `json:"size"`
	IovLimit    uint64   `json:"iov_limit"`
	RMAIovLimit uint64   `json:"rma_iov_limit"`
	TClass      uint64   `json:"tclass"`
}

type jsonRxAttr struct {
	Caps              []string `json:"caps"`
	Mode              []string `json:"mode"`
	OpFlags           []string `json:"op_flags"`
	MsgOrder          []string `json:"msg_order"`
	CompOrder         []string `json:"comp_order"`
	TotalBufferedRecv uint64   `json:"total_buffered_recv"`
	Size              uint64   `json:"size"`
	IovLimit          uint64   `json:"iov_limit"`
}

type jsonEPAttr struct {
	Type            string `json:"type"`
	Protocol        string `json:"protocol"`
	ProtocolVersion uint64 `json:"protocol_version"`
	MaxMsgSize      uint64 `json:"max_msg_size"`
	MsgPrefixSize   uint64 `json:"msg_prefix_size"`
	MaxOrderRAWSize uint64 `json:"max_order_raw_size"`
	MaxOrderWARSize uint64 `json:"max_order_war_size"`
	MaxOrderWAWSize uint64 `json:"max_order_waw_size"`
	MemTagFormat    uint64 `json:"mem_tag_format"`
	TxCtxCnt        any    `json:"tx_ctx_cnt"` // a number, or "FI_SHARED_CONTEXT"
	RxCtxCnt        any    `json:"rx_ctx_cnt"`
	AuthKeySize     uint64 `json:"auth_key_size"`
}

type jsonDomainAttr struct {
	Domain          uint64   `json:"domain"`
	Name            *string  `json:"name"`
	Threading       string   `json:"threading"`
	ControlProgress string   `json:"control_progress"`
	DataProgress    string   `json:"data_progress"`
	ResourceMgmt    string   `json:"resource_mgmt"`
	AVType          string   `json:"av_type"`
	MRMode          []string `json:"mr_mode"`
	MRKeySize       uint64   `json:"mr_key_size"`
	CQDataSize      uint64   `json:"cq_data_size"`
	CQCnt           uint64   `json:"cq_cnt"`
	EPCnt           uint64   `json:"ep_cnt"`
	TxCtxCnt        uint64   `json:"tx_ctx_cnt"`
	RxCtxCnt        uint64   `json:"rx_ctx_cnt"`
	MaxEPTxCtx      uint64   `json:"max_ep_tx_ctx"`
	MaxEPRxCtx      uint64   `json:"max_ep_rx_ctx"`
	MaxEPStxCtx     uint64   `json:"max_ep_stx_ctx"`
	MaxEPSrxCtx     uint64   `json:"max_ep_srx_ctx"`
	CntrCnt         uint64   `json:"cntr_cnt"`
	MRIovLimit      uint64   `json:"mr_iov_limit"`
	Caps            []string `json:"caps"`
	Mode            []string `json:"mode"`
	AuthKeySize     uint64   `json:"auth_key_size"`
	MaxErrData      uint64   `json:"max_err_data"`
	MRCnt           uint64   `json:"mr_cnt"`
	TClass          uint64   `json:"tclass"`
}

type jsonFabricAttr struct {
	Name        *string `json:"name"`
	ProvName    *string `json:"prov_name"`
	ProvVersion string  `json:"prov_version"`
	APIVersion  string  `json:"api_version"`
}

type jsonInfo struct {
	Caps        []string        `json:"caps"`
	Mode        []string        `json:"mode"`
	AddrFormat  string          `json:"addr_format"`
	SrcAddrLen  uint64          `json:"src_addrlen"`
	DestAddrLen uint64          `json:"dest_addrlen"`
	SrcAddr     *string         `json:"src_addr"`
	DestAddr    *string         `json:"dest_addr"`
	Handle      *uint64         `json:"handle"`
	TxAttr      *jsonTxAttr     `json:"tx_attr"`
	RxAttr      *jsonRxAttr     `json:"rx_attr"`
	EPAttr      *jsonEPAttr     `json:"ep_attr"`
	DomainAttr  *jsonDomainAttr `json:"domain_attr"`
	FabricAttr  *jsonFabricAttr `json:"fabric_attr"`
	NIC         *struct{}       `json:"nic"`
}

// jsonCQE is a line of cq/N/events.json.
type jsonCQE struct {
	OpContext uint64   `json:"op_context"`
	Flags     []string `json:"flags"`
	Len       uint64   `json:"len"`
	Buf       uint64   `json:"buf"`
	Data      uint64   `json:"data"`
	Tag       uint64   `json:"tag"`
	Src       *uint64  `json:"src"`
	Err       *string  `json:"err"`
	ProvErrno int      `json:"prov_errno"`
	OLen      uint64   `json:"olen"`
	ErrData   *string  `json:"err_data"`
}

// jsonEQEvent is a line of eq/N/events.json.
type jsonEQEvent struct {
	Event     string  `json:"event"`
	FID       string  `json:"fid"`
	EP        *string `json:"ep"`
	Err       *string `json:"err"`
	ProvErrno int     `json:"prov_errno"`
	Data      *string `json:"data"`
}

// statusKeys are the keys of each kind's status.json, in order.
var statusKeys = map[string][]string{
	"ep":   {"kind", "id", "type", "state", "cq", "eq", "av", "cntr", "ops", "local", "remote", "tag", "src", "cqdata", "rxbuf"},
	"pep":  {"kind", "id", "state", "eq", "local", "pending"},
	"cq":   {"kind", "id", "size", "queued", "overflow", "total", "overruns", "bound"},
	"eq":   {"kind", "id", "queued", "lost"},
	"av":   {"kind", "id", "type", "count"},
	"mr":   {"kind", "id", "state", "len", "access"},
	"cntr": {"kind", "id", "value", "errors", "bound"},
	"stx":  {"kind", "id", "eps"},
	"srx":  {"kind", "id", "state", "eps", "posted", "held"},
}

// strictDecode decodes one JSON document b into v, refusing keys v does
// not have and anything after the document.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more after the JSON value (%v)", err)
	}
	return nil
}

// objectKeys are the keys of the JSON object b, in order.
func objectKeys(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object (%v, %v)", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// TestJSONViews (issue 23, Done-when 2): in a live tree with objects of
// every kind in a tcp and a verbs domain, connections made and messages
// sent, every `.json` file parses strictly into its documented shape and
// tells the same facts as its text sibling; the queue files' JSON Lines
// are consumed as the text files are.
func TestJSONViews(t *testing.T) {
	d := mount(t)
	tcp, verbs := d.path("tcp", "lo"), d.path("verbs", verbsDevice)
	for _, dom := range []string{tcp, verbs} {
		// Endpoints last: cleanups run in reverse, and they must go before
		// what they are bound to.
		kinds := treeKinds(t, dom)
		slices.SortStableFunc(kinds, func(a, b string) int { return min(strings.Count("ep pep", a), 1) - min(strings.Count("ep pep", b), 1) })
		for _, k := range kinds {
			mkobj(t, dom, k, "j")
		}
		ctlOK(t, filepath.Join(dom, "pep", "j"), "bind eq j")
		ctlOK(t, filepath.Join(dom, "cntr", "j"), "add 7")
		must(t, os.WriteFile(filepath.Join(dom, "mr", "j", "attr", "len"), []byte("4096"), 0))
		ctlOK(t, filepath.Join(dom, "mr", "j"), "reg")
		ctlOK(t, filepath.Join(dom, "ep", "j"), "bind cq j send,recv")
		ctlOK(t, filepath.Join(dom, "ep", "j"), "bind cntr j send")
		ctlOK(t, filepath.Join(dom, "ep", "j"), "bind eq j")
		ctl(filepath.Join(dom, "ep", "j", "ctl"), "bind cq nosuch send") // leaves an err line
	}
	ctlOK(t, filepath.Join(tcp, "av", "j"), "insert 127.0.0.1:7 127.0.0.1:9")

	// Traffic: a connected pair on tcp, an RDM pair on verbs.
	m1, m2 := msgPair(t, tcp, tcp, "m", "fi_sockaddr_in://127.0.0.1")
	exchange(t, m1, m2, []byte("hello"))
	mkobj(t, verbs, "cq", "r")
	av := mkobj(t, verbs, "av", "r")
	var rdm []string
	for _, n := range []string{"r1", "r2"} {
		ep := mkobj(t, verbs, "ep", n)
		must(t, os.WriteFile(filepath.Join(ep, "attr", "type"), []byte("FI_EP_RDM\n"), 0))
		for _, c := range []string{"bind cq r send,recv", "bind av r", "enable"} {
			ctlOK(t, ep, c)
		}
		ctlOK(t, av, "insert "+fileText(t, ep, "local"))
		rdm = append(rdm, ep)
	}
	r1, r2 := rdm[0], rdm[1]
	ctlOK(t, r1, "dest 1")
	exchange(t, r1, r2, []byte("over verbs"))
	ctlOK(t, r1, "tag 0x5")

	// Every .json file but the queues: strict parse, same facts.
	walked := 0
	err := filepath.WalkDir(d.mnt, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, d.mnt)
		if p := strings.Split(rel, "/"); e.IsDir() && len(p) == 3 && path != tcp && path != verbs && p[2] != "info" {
			return fs.SkipDir // other domains have the same shape
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			return nil
		}
		switch e.Name() {
		case "events.json", "listen.json":
			return nil // queues, below
		}
		walked++
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if !json.Valid(b) || !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Errorf("%s is not one line of JSON: %q", rel, b)
			return nil
		}
		checkJSONView(t, path, rel, b)
		return nil
	})
	must(t, err)
	if walked < 2*9*3 {
		t.Errorf("walked %d JSON files, want at least status, err and attr of 9 kinds in 2 domains", walked)
	}

	checkQueueJSON(t, m1, m2, r1, r2, tcp)
	checkGetinfoJSON(t, d)
}

// checkJSONView checks one JSON file b at path against its shape and its
// text sibling.
func checkJSONView(t *testing.T, path, rel string, b []byte) {
	t.Helper()
	dir, name := filepath.Dir(path), filepath.Base(path)
	text := func(file string) string {
		t.Helper()
		tb, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("%s's text sibling: %v", rel, err)
		}
		return strings.TrimSuffix(string(tb), "\n")
	}
	fail := func(err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v: %s", rel, err, b)
		}
	}
	switch {
	case name == "status.json":
		kind := filepath.Base(filepath.Dir(dir))
		keys, err := objectKeys(b)
		fail(err)
		if !slices.Equal(keys, statusKeys[kind]) {
			t.Errorf("%s has keys %v, want %v", rel, keys, statusKeys[kind])
		}
		var st map[string]any
		fail(json.Unmarshal(b, &st))
		line := text("status")
		// The line's key=value words say what the JSON says.
		for _, w := range strings.Fields(line) {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			jv, has := st[k]
			if !has {
				t.Errorf("%s: the line's %s is not in the JSON", rel, k)
				continue
			}
			switch x := jv.(type) {
			case float64:
				if n, err := strconv.ParseUint(v, 0, 64); err != nil || float64(n) != x {
					t.Errorf("%s: %s is %v, the line says %s", rel, k, x, v)
				}
			case string:
				if x != v {
					t.Errorf("%s: %s is %q, the line says %s", rel, k, x, v)
				}
			case nil:
				if v != "-" {
					t.Errorf("%s: %s is null, the line says %s", rel, k, v)
				}
			}
		}
		if st["kind"] != kind || st["id"] != filepath.Base(dir) || !strings.HasPrefix(line, kind+" "+filepath.Base(dir)+" ") {
			t.Errorf("%s: kind %v id %v, line %q", rel, st["kind"], st["id"], line)
		}
	case name == "err.json":
		var e core.ErrInfo
		fail(strictDecode(b, &e))
		line := text("err")
		switch {
		case line == "" && e.Err != nil:
			t.Errorf("%s: err is empty, the JSON has %q", rel, *e.Err)
		case line != "" && (e.Err == nil || *e.Err != line || e.Op == nil || e.Reason == nil || e.Code == nil ||
			*e.Op+": "+*e.Reason != line):
			t.Errorf("%s does not tell err's %q", rel, line)
		}
		if strings.HasSuffix(dir, "/ep/j") && (e.Code == nil || *e.Code != "FI_ENOENT" || e.Op == nil || *e.Op != "bind cq nosuch send") {
			t.Errorf("%s: the failed bind is not there", rel)
		}
	case name == "attr.json":
		attrDir := filepath.Join(dir, "attr")
		keys, err := objectKeys(b)
		fail(err)
		es, err := os.ReadDir(attrDir)
		fail(err)
		files := map[string]bool{}
		for _, e := range es {
			files[e.Name()] = true
		}
		var vals map[string]any
		fail(json.Unmarshal(b, &vals))
		if len(keys) != len(files) {
			t.Errorf("%s has %d attributes, attr/ %d", rel, len(keys), len(files))
		}
		for _, k := range keys {
			if !files[k] {
				t.Errorf("%s: %s is no file of attr/", rel, k)
				continue
			}
			at, err := os.ReadFile(filepath.Join(attrDir, k))
			fail(err)
			checkAttrValue(t, rel+" "+k, strings.TrimSpace(string(at)), vals[k])
		}
	case name == "info.json":
		var infos []jsonInfo
		if strings.Contains(rel, "/ep/") {
			var one jsonInfo
			fail(strictDecode(b, &one))
			infos = []jsonInfo{one}
		} else {
			fail(strictDecode(b, &infos))
		}
		blocks := strings.Count(text("info"), "fi_info:")
		if len(infos) != blocks || blocks == 0 {
			t.Errorf("%s has %d entries, info %d", rel, len(infos), blocks)
		}
		for _, in := range infos {
			if in.FabricAttr == nil || in.DomainAttr == nil || in.EPAttr == nil || in.TxAttr == nil || in.RxAttr == nil ||
				in.FabricAttr.ProvName == nil || in.DomainAttr.Name == nil || !strings.HasPrefix(in.EPAttr.Type, "FI_EP_") {
				t.Errorf("%s: an entry lacks its attributes: %+v", rel, in)
				break
			}
			if !strings.Contains(text("info"), "        name: "+*in.DomainAttr.Name+"\n") {
				t.Errorf("%s: domain %s is not in info", rel, *in.DomainAttr.Name)
			}
		}
	case name == "local.json" || name == "remote.json":
		var a struct {
			Addr *string `json:"addr"`
		}
		fail(strictDecode(b, &a))
		line := text(strings.TrimSuffix(name, ".json"))
		if (a.Addr == nil) != (line == "") || (a.Addr != nil && *a.Addr != line) {
			t.Errorf("%s: %v, the text says %q", rel, a.Addr, line)
		}
	case name == "addrs.json":
		var es []core.AVEntry
		fail(strictDecode(b, &es))
		var lines []string
		for _, e := range es {
			line := fmt.Sprintf("%d %s", e.FIAddr, e.Addr)
			if e.UserID != nil {
				line += fmt.Sprintf(" user_id=%d", *e.UserID)
			}
			lines = append(lines, line)
		}
		if got := strings.Join(lines, "\n"); got != text("addrs") {
			t.Errorf("%s says %q, addrs %q", rel, got, text("addrs"))
		}
		if strings.HasSuffix(dir, "tcp/lo/av/j") && len(es) != 2 {
			t.Errorf("%s has %d entries, want the 2 inserted", rel, len(es))
		}
	case name == "stats.json" || strings.HasSuffix(name, ".stats.json"):
		// The text's names, in order, with values the JSON may see
		// moved on (live objects): compare the names.
		var m map[string]uint64
		fail(strictDecode(b, &m))
		var names []string
		for _, l := range strings.Split(text(strings.TrimSuffix(name, ".json")), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				names = append(names, f[0])
			}
		}
		for _, k := range names {
			if _, ok := m[k]; !ok {
				t.Errorf("%s has no %s, which the text has", rel, k)
			}
		}
		if len(m) != len(names) {
			t.Errorf("%s has %d names, the text %d", rel, len(m), len(names))
		}
	case name == "resources.json":
		var hs []core.HeldJSON
		fail(strictDecode(b, &hs))
		if lines := strings.Split(text("resources"), "\n"); len(hs) != len(lines) {
			t.Errorf("%s has %d objects, resources %d lines", rel, len(hs), len(lines))
		}
		for _, h := range hs {
			if h.Path == "" || h.State == "" {
				t.Errorf("%s: %+v", rel, h)
			}
		}
	case name == "version.json":
		var v core.Versions
		fail(strictDecode(b, &v))
		if strings.TrimSuffix(v.String(), "\n") != text("version") {
			t.Errorf("%s says %q, version %q", rel, v.String(), text("version"))
		}
	case name == "limits.json" || filepath.Base(dir) == "users":
		var uses map[string]core.Use
		fail(strictDecode(b, &uses))
		textFile := strings.TrimSuffix(name, ".json")
		var lines []string
		for r := core.Resource(0); r < core.NumResources; r++ {
			u, ok := uses[r.String()]
			if !ok {
				t.Errorf("%s has no %s", rel, r)
			}
			lines = append(lines, fmt.Sprintf("%s %d %d", r, u.Held, u.Limit))
		}
		if len(uses) != int(core.NumResources) {
			t.Errorf("%s has %d resources, want %d", rel, len(uses), core.NumResources)
		}
		// What the user holds may change between the reads; the names
		// and limits may not.
		if tl := strings.Split(text(textFile), "\n"); len(tl) != len(lines) {
			t.Errorf("%s: %q, the text says %q", rel, lines, tl)
		}
	case name == "query_atomic.json":
		var as []core.AtomicAnswer
		fail(strictDecode(b, &as))
		var lines []string
		for _, a := range as {
			lines = append(lines, strings.TrimSuffix(a.String(), "\n"))
		}
		if got := strings.Join(lines, "\n"); got != text("query_atomic") {
			t.Errorf("%s says\n%s\nquery_atomic says\n%s", rel, got, text("query_atomic"))
		}
	default:
		t.Errorf("%s is no documented JSON view", rel)
	}
}

// checkAttrValue checks an attribute's JSON value v against its file's
// text, by the rules of docs/tree.md's attr.json: "-" null, true and
// false booleans, a flag set an array of its names, a number a number,
// anything else the text as a string.
func checkAttrValue(t *testing.T, what, text string, v any) {
	t.Helper()
	var want any = text
	if n, err := strconv.ParseUint(text, 0, 64); err == nil {
		want = float64(n)
	}
	switch {
	case text == "-":
		want = nil
	case text == "-1":
		want = float64(-1)
	case text == "true" || text == "false":
		want = text == "true"
	case strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]"):
		names := []any{}
		for _, n := range strings.Split(strings.Trim(text, "[ ]"), ", ") {
			if n != "" {
				names = append(names, n)
			}
		}
		want = names
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("%s: JSON %#v, the file says %q", what, v, text)
	}
}

// readJSONLines reads a queue's .json file with O_NONBLOCK and decodes
// each line into a new T, strictly.
func readJSONLines[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := readNonblock(path)
	must(t, err)
	var out []T
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var v T
		if err := strictDecode([]byte(l), &v); err != nil {
			t.Errorf("%s: line %q: %v", path, l, err)
		}
		out = append(out, v)
	}
	return out
}

// checkQueueJSON: events.json of CQs and EQs and listen.json are consumed
// as their text siblings are, one JSON object a line, and a blocked read
// of one wakes for a completion.
func checkQueueJSON(t *testing.T, m1, m2, r1, r2, tcp string) {
	t.Helper()
	// The receive's completion of "over verbs" on the verbs pair's CQ,
	// consumed by the JSON file: the text file then has nothing.
	rcq := filepath.Join(filepath.Dir(filepath.Dir(r2)), "cq", "r")
	es := readJSONLines[jsonCQE](t, filepath.Join(rcq, "events.json"))
	var recv *jsonCQE
	for i := range es {
		if slices.Contains(es[i].Flags, "FI_RECV") {
			recv = &es[i]
		}
	}
	if recv == nil || recv.Len != uint64(len("over verbs")) || !slices.Contains(recv.Flags, "FI_MSG") || recv.Err != nil {
		t.Errorf("verbs CQ events.json: %+v, want the receive of 10 bytes", es)
	}
	if rest, _ := readNonblock(filepath.Join(rcq, "events")); len(rest) != 0 {
		t.Errorf("events after events.json consumed them: %q", rest)
	}

	// A blocked read of events.json wakes with the completion of a send.
	scq := filepath.Join(filepath.Dir(filepath.Dir(m1)), "cq", "m")
	readNonblock(filepath.Join(scq, "events")) // drain
	got := make(chan []byte, 1)
	go func() {
		b, err := readOnce(filepath.Join(scq, "events.json"))
		if err != nil {
			b = []byte(err.Error())
		}
		got <- b
	}()
	time.Sleep(100 * time.Millisecond)
	go os.ReadFile(filepath.Join(m2, "data")) // the peer's receive
	must(t, os.WriteFile(filepath.Join(m1, "data"), []byte("twelve bytes"), 0))
	select {
	case b := <-got:
		var e jsonCQE
		if err := strictDecode(bytes.SplitN(b, []byte("\n"), 2)[0], &e); err != nil || !slices.Contains(e.Flags, "FI_SEND") || e.Len != 12 {
			t.Errorf("blocked events.json read %q (%v), want the send of 12 bytes", b, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a blocked read of events.json did not wake for a completion")
	}

	// EQ: shutdown reaches both sides' EQs, read through events.json.
	ctlOK(t, m1, "shutdown")
	for _, c := range []struct{ eq, ep string }{
		{filepath.Join(filepath.Dir(filepath.Dir(m1)), "eq", "m"), "ep/m"},
		{filepath.Join(filepath.Dir(filepath.Dir(m2)), "eq", "m-l"), "ep/" + filepath.Base(m2)},
	} {
		var evs []jsonEQEvent
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			evs = append(evs, readJSONLines[jsonEQEvent](t, filepath.Join(c.eq, "events.json"))...)
			if slices.ContainsFunc(evs, func(e jsonEQEvent) bool { return e.Event == "shutdown" }) || time.Now().After(deadline) {
				break
			}
		}
		if !slices.ContainsFunc(evs, func(e jsonEQEvent) bool { return e.Event == "shutdown" && e.FID == c.ep && e.Err == nil }) {
			t.Errorf("%s events.json: %+v, want shutdown of %s", c.eq, evs, c.ep)
		}
	}

	// listen.json: a new request to the pep, as {"ep": ID}.
	pep := filepath.Join(tcp, "pep", "m-l")
	mkobj(t, tcp, "eq", "c")
	mkobj(t, tcp, "cq", "c")
	c := mkobj(t, tcp, "ep", "c")
	for _, cmd := range []string{"bind eq c", "bind cq c send,recv", "connect " + fileText(t, pep, "local") + " hi"} {
		ctlOK(t, c, cmd)
	}
	lb, err := readOnce(filepath.Join(pep, "listen.json"))
	must(t, err)
	var l struct {
		EP string `json:"ep"`
	}
	if err := strictDecode(lb, &l); err != nil || l.EP == "" {
		t.Fatalf("listen.json: %q (%v)", lb, err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(tcp, "ep", l.EP)) })
	if st := fileText(t, filepath.Join(tcp, "ep", l.EP), "status"); !strings.Contains(st, " connreq ") {
		t.Errorf("the endpoint listen.json named: %q", st)
	}
	evs := readJSONLines[jsonEQEvent](t, filepath.Join(tcp, "eq", "m-l", "events.json"))
	if !slices.ContainsFunc(evs, func(e jsonEQEvent) bool {
		return e.Event == "connreq" && e.FID == "pep/m-l" && e.EP != nil && *e.EP == l.EP && e.Data != nil && *e.Data == "hi"
	}) {
		t.Errorf("listener's events.json: %+v, want connreq of ep %s with data hi", evs, l.EP)
	}
}

// readOnce is one read(2) of a file at offset 0: a queue file's blocking
// read.
func readOnce(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 1<<16)
	n, err := syscall.Read(int(f.Fd()), b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

// checkGetinfoJSON: getinfo's -j answers every form in JSON with the
// entries the text answer has.
func checkGetinfoJSON(t *testing.T, d *daemon) {
	t.Helper()
	ask := func(q string) []byte {
		t.Helper()
		f, err := os.OpenFile(d.path("getinfo"), os.O_RDWR, 0)
		must(t, err)
		defer f.Close()
		if _, err := f.WriteString(q); err != nil {
			t.Fatalf("getinfo %q: %v", q, err)
		}
		b, err := io.ReadAll(f)
		must(t, err)
		return b
	}
	verbose := ask("-p tcp -d lo")
	var infos []jsonInfo
	if err := strictDecode(ask("-p tcp -d lo -j"), &infos); err != nil || len(infos) == 0 || len(infos) != bytes.Count(verbose, []byte("---\n")) {
		t.Errorf("getinfo -j: %d entries (%v), text %d", len(infos), err, bytes.Count(verbose, []byte("---\n")))
	}
	for _, in := range infos {
		if in.DomainAttr == nil || in.DomainAttr.Name == nil || *in.DomainAttr.Name != "lo" {
			t.Errorf("getinfo -d lo -j answered another domain: %+v", in.DomainAttr)
		}
	}
	type summary struct {
		Provider, Fabric, Domain, Version, Type, Protocol *string
	}
	var sums []summary
	summaryText := string(ask("fi_info -p tcp -d lo"))
	if err := strictDecode(ask("fi_info --json -p tcp -d lo"), &sums); err != nil || len(sums) != strings.Count(summaryText, "provider: ") {
		t.Errorf("fi_info --json: %d entries (%v), text:\n%s", len(sums), err, summaryText)
	}
	for _, s := range sums {
		if s.Type == nil || !strings.Contains(summaryText, "    type: "+*s.Type+"\n") {
			t.Errorf("summary entry %+v is not in the text", s)
		}
	}
	var provs []struct{ Provider, Version string }
	if err := strictDecode(ask("-l -j"), &provs); err != nil || !slices.ContainsFunc(provs, func(p struct{ Provider, Version string }) bool { return p.Provider == "tcp" }) {
		t.Errorf("getinfo -l -j: %+v (%v)", provs, err)
	}
}
