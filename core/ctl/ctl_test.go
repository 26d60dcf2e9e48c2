package ctl

import (
	"math/big"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var tokenizeTests = []struct {
	in   string
	want []string
	err  string
}{
	{"bind cq 3 send\n", []string{"bind", "cq", "3", "send"}, ""},
	{"  enable  ", []string{"enable"}, ""},
	{"connect 127.0.0.1:7 'hello world'", []string{"connect", "127.0.0.1:7", "hello world"}, ""},
	{"accept 'it''s'", []string{"accept", "it's"}, ""},
	{"accept ''", []string{"accept", ""}, ""},
	{"a'b c'd", []string{"ab cd"}, ""},
	{"", nil, ""},
	{"accept 'open", nil, "unterminated quote"},
	{"a\nb", nil, "one line"},
}

func TestTokenize(t *testing.T) {
	for _, tt := range tokenizeTests {
		got, err := Tokenize(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Tokenize(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tokenize(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"x", "", "a b", "it's", "'", "tab\there"} {
		got, err := Tokenize(Quote(s))
		if err != nil || len(got) != 1 || got[0] != s {
			t.Errorf("Tokenize(Quote(%q)) = %q, %v", s, got, err)
		}
	}
}

var table = []Cmd{
	{Verb: "bind cq", Args: "ID FLAGS", Min: 2, Max: 2},
	{Verb: "bind eq", Args: "ID", Min: 1, Max: 1},
	{Verb: "enable", Min: 0, Max: 0},
	{Verb: "insert", Args: "ADDR...", Min: 1, Max: -1},
}

var lookupTests = []struct {
	words []string
	verb  string
	args  []string
	err   string
}{
	{[]string{"bind", "cq", "3", "send"}, "bind cq", []string{"3", "send"}, ""},
	{[]string{"BIND", "EQ", "1"}, "bind eq", []string{"1"}, ""},
	{[]string{"bind", "cq", "3"}, "", nil, "wrong number of arguments; usage: bind cq ID FLAGS"},
	{[]string{"enable", "now"}, "", nil, "usage: enable"},
	{[]string{"insert", "a", "b", "c"}, "insert", []string{"a", "b", "c"}, ""},
	{[]string{"bind", "mr", "1"}, "", nil, "unknown command; usage: bind cq ID FLAGS | bind eq ID"},
	{[]string{"bind"}, "", nil, "wrong number of arguments; usage: bind cq ID FLAGS | bind eq ID"},
	{[]string{"frob"}, "", nil, "unknown command; commands: bind, enable, insert"},
	{nil, "", nil, "empty"},
}

func TestLookup(t *testing.T) {
	for _, tt := range lookupTests {
		c, args, err := Lookup(table, tt.words)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Lookup(%q) error = %v, want %q", tt.words, err, tt.err)
			}
			continue
		}
		if err != nil || c.Verb != tt.verb || !reflect.DeepEqual(args, tt.args) {
			t.Errorf("Lookup(%q) = %v %q %v, want %q %q", tt.words, c, args, err, tt.verb, tt.args)
		}
	}
}

var uintTests = []struct {
	in   string
	want uint64
	ok   bool
}{
	{"0", 0, true}, {"42", 42, true}, {"0x2a", 42, true}, {"0X2A", 42, true}, {"0x10", 16, true},
	{"010", 10, true}, {"00", 0, true}, {"0x0", 0, true}, {"18446744073709551615", 1<<64 - 1, true},
	{"0xffffffffffffffff", 1<<64 - 1, true},
	{"-1", 0, false}, {"+1", 0, false}, {"0x+1", 0, false}, {"0x-1", 0, false}, {"0o7", 0, false},
	{"0b1", 0, false}, {"0O7", 0, false}, {"0B1", 0, false}, {"1_000", 0, false}, {"0x_1", 0, false},
	{"x", 0, false}, {"", 0, false}, {"0x", 0, false}, {"0X", 0, false}, {" 1", 0, false}, {"1 ", 0, false},
	{"18446744073709551616", 0, false}, {"99999999999999999999", 0, false}, {"0x10000000000000000", 0, false},
}

func TestUint(t *testing.T) {
	for _, tt := range uintTests {
		got, err := Uint(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Uint(%q) = %d, %v, want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// uintGrammar is the grammar Uint promises, written another way.
var uintGrammar = regexp.MustCompile(`^([0-9]+|0[xX][0-9a-fA-F]+)$`)

// FuzzUint checks Uint against the grammar: it accepts exactly the texts
// the grammar describes whose value fits 64 bits, and reads them back as
// the decimal or hex digits they are.
func FuzzUint(f *testing.F) {
	for _, tt := range uintTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Uint(s)
		if !uintGrammar.MatchString(s) {
			if err == nil {
				t.Fatalf("Uint(%q) = %d, want an error", s, v)
			}
			return
		}
		digits, base := s, 10
		if len(s) > 1 && (s[1] == 'x' || s[1] == 'X') {
			digits, base = s[2:], 16
		}
		n, ok := new(big.Int).SetString(digits, base)
		if !ok {
			t.Fatalf("big.Int does not read %q", s)
		}
		if !n.IsUint64() {
			if err == nil {
				t.Fatalf("Uint(%q) = %d, want an error for a value over 64 bits", s, v)
			}
			return
		}
		if err != nil || v != n.Uint64() {
			t.Fatalf("Uint(%q) = %d, %v, want %d", s, v, err, n.Uint64())
		}
	})
}

func FuzzTokenize(f *testing.F) {
	for _, tt := range tokenizeTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := Tokenize(line)
		if err != nil {
			return
		}
		// Re-quoting the words must give the same words back.
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = Quote(w)
		}
		again, err := Tokenize(strings.Join(q, " "))
		if err != nil || !reflect.DeepEqual(again, words) && len(words) > 0 {
			t.Fatalf("round trip of %q: %q -> %q, %v", line, words, again, err)
		}
		Lookup(table, words)
	})
}
