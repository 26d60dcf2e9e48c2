package fi

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// jsonFromText builds, from fi_tostr's text of one fi_info, the JSON
// MarshalJSON must write: the same fields in the same order, a struct's
// "fi_X:" header as key X, "(null)" and "(nil)" as null, a flag set as the
// array of its names, a number (decimal or 0x hex) as a number, anything
// else as a string.
func jsonFromText(t *testing.T, text string) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var b bytes.Buffer
	depth := 0
	first := true
	for i, l := range lines {
		ind := (len(l) - len(strings.TrimLeft(l, " "))) / 4
		for ; depth > ind; depth-- {
			b.WriteByte('}')
			first = false
		}
		key, val, _ := strings.Cut(strings.TrimSpace(l), ":")
		val = strings.TrimPrefix(val, " ")
		if i > 0 {
			if !first {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(strings.TrimPrefix(key, "fi_"))
			b.Write(k)
			b.WriteByte(':')
		}
		first = false
		switch {
		case val == "" && strings.HasSuffix(l, ":"):
			b.WriteByte('{')
			depth++
			first = true
			continue
		case val == "(null)" || val == "(nil)":
			b.WriteString("null")
		case strings.HasPrefix(val, "[") && strings.HasSuffix(val, "]"):
			names := []string{}
			for _, n := range strings.Split(strings.Trim(val, "[ ]"), ", ") {
				if n != "" {
					names = append(names, n)
				}
			}
			v, _ := json.Marshal(names)
			b.Write(v)
		default:
			if n, err := strconv.ParseUint(val, 0, 64); err == nil {
				b.WriteString(strconv.FormatUint(n, 10))
			} else {
				v, _ := json.Marshal(val)
				b.Write(v)
			}
		}
	}
	for ; depth > 0; depth-- {
		b.WriteByte('}')
	}
	return b.String()
}

// TestInfoJSON: an fi_info's JSON has every field fi_tostr prints, by
// fi_info's field names, in the same order, with the same values.
func TestInfoJSON(t *testing.T) {
	for i, in := range oddInfos() {
		got, err := json.Marshal(in)
		if err != nil || !json.Valid(got) {
			t.Fatalf("info %d: %s (%v)", i, got, err)
		}
		if want := jsonFromText(t, in.String()); string(got) != want {
			t.Errorf("info %d:\n got %s\nwant %s", i, got, want)
		}
	}
	var nilInfo *Info
	if got, err := json.Marshal(nilInfo); err != nil || string(got) != "null" {
		t.Errorf("nil info: %s (%v)", got, err)
	}
}

// TestQueryJSON: -j (--json) answers every form in JSON, with what the
// text form says.
func TestQueryJSON(t *testing.T) {
	fakeNet(t)
	ask := func(s string) string {
		t.Helper()
		out, err := GetInfoText(context.Background(), s, testOffered())
		if err != nil {
			t.Fatalf("GetInfoText(%q): %v", s, err)
		}
		return out
	}
	var infos []json.RawMessage
	verbose := ask("-p tcp -d lo")
	if err := json.Unmarshal([]byte(ask("-j -p tcp -d lo")), &infos); err != nil || len(infos) != strings.Count(verbose, "---\n") {
		t.Fatalf("-j: %d entries (%v), text %d", len(infos), err, strings.Count(verbose, "---\n"))
	}
	for i, block := range strings.Split(verbose, "---\n")[1:] {
		if want := jsonFromText(t, block); string(infos[i]) != want {
			t.Errorf("-j entry %d:\n got %s\nwant %s", i, infos[i], want)
		}
	}
	for _, c := range []struct{ q, want string }{
		{"fi_info -p tcp -d lo -t FI_EP_MSG --json",
			`[{"provider":"tcp","fabric":"127.0.0.0/8","domain":"lo","version":"117.0","type":"FI_EP_MSG","protocol":"FI_PROTO_SOCK_TCP"}]` + "\n"},
		{"-l -j", `[{"provider":"tcp","version":"117.0"},{"provider":"ofi_rxm","version":"117.1"},{"provider":"verbs","version":"117.0"}]` + "\n"},
		{"fi_info -e -j", "[]\n"},
		{"fi_info -j -p nosuch", ""},
	} {
		got, err := GetInfoText(context.Background(), c.q, testOffered())
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", c.q, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q = %q (%v), want %q", c.q, got, err, c.want)
		}
	}
}

// TestQueryFormPrecedence: the forms' options combine as in fi_info
// (util/info.c): -e before -v before -l, and -l asks FI_PROV_ATTR_ONLY
// whatever the form.
func TestQueryFormPrecedence(t *testing.T) {
	fakeNet(t)
	ask := func(s string) string {
		t.Helper()
		out, err := GetInfoText(context.Background(), s, testOffered())
		if err != nil {
			t.Fatalf("GetInfoText(%q): %v", s, err)
		}
		return out
	}
	env := ask("-e")
	if got := ask("fi_info -l -e -v"); got != env {
		t.Errorf("-l -e -v = %q, want -e's %q", got, env)
	}
	attrOnly := ask("--flags FI_PROV_ATTR_ONLY")
	if got := ask("fi_info -l -v"); got != attrOnly || !strings.HasPrefix(got, "---\nfi_info:\n") {
		t.Errorf("-l -v = %q, want the verbose form of FI_PROV_ATTR_ONLY entries %q", got, attrOnly)
	}
	if got := ask("fi_info -l"); !strings.HasPrefix(got, "tcp:\n    version: ") {
		t.Errorf("fi_info -l = %q", got)
	}
}
