// Package ctl is the one tokenizer and argument checker behind every ctl file
// of fabricfs, in the manner of Plan 9's parsecmd/lookupcmd.
//
// A control message is one line of words separated by blanks. A word may be
// quoted with single quotes as in rc(1): 'hello world' is one word, and a
// doubled quote inside quotes stands for one quote ('it”s'). A trailing
// newline is ignored, so `echo bind cq 3 send > ctl` works.
//
// A command table lists, per verb, its usage text and its minimum and maximum
// argument count; Lookup finds the entry and checks the count. Its errors
// say what is wrong and not which command: fs puts the command in front, so
// that the err file holds a complete sentence:
//
//	bind cq 3: wrong number of arguments; usage: bind cq ID FLAGS
//
// Uint is the one grammar of numbers of the tree, in ctl arguments and in
// every file that takes a number.
package ctl

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxLine is the longest control message accepted, in bytes.
const MaxLine = 8192

// Tokenize splits a control message into words.
func Tokenize(line string) ([]string, error) {
	if len(line) > MaxLine {
		return nil, fmt.Errorf("control message longer than %d bytes", MaxLine)
	}
	line = strings.TrimSuffix(line, "\n")
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			if i+1 < len(line) && line[i+1] == '\'' {
				cur.WriteByte('\'')
				i++
			} else {
				quoted = false
			}
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\n' || c == 0:
			return nil, fmt.Errorf("control message must be one line")
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Quote returns s as one word that Tokenize reads back unchanged: unquoted
// when it has no blank, quote or control character, else in single quotes.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n'\x00") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Cmd is one entry of a command table. Verb may be two words ("bind cq"):
// the longest matching verb wins.
type Cmd struct {
	Verb  string
	Args  string // usage of the arguments, e.g. "ID FLAGS"
	Min   int    // minimum number of arguments after the verb
	Max   int    // maximum; -1 for no limit
	Index int    // caller's index, returned by Lookup
}

// Usage is the command's usage line.
func (c *Cmd) Usage() string { return strings.TrimSpace(c.Verb + " " + c.Args) }

// Lookup finds the command for words in table and returns it with its
// arguments. Verbs match case-insensitively.
func Lookup(table []Cmd, words []string) (*Cmd, []string, error) {
	if len(words) == 0 {
		return nil, nil, fmt.Errorf("empty control message")
	}
	var best *Cmd
	bestLen := 0
	for i := range table {
		v := strings.Fields(table[i].Verb)
		if len(v) <= bestLen || len(v) > len(words) {
			continue
		}
		match := true
		for j := range v {
			if !strings.EqualFold(v[j], words[j]) {
				match = false
				break
			}
		}
		if match {
			best, bestLen = &table[i], len(v)
		}
	}
	if best == nil {
		return nil, nil, unknown(table, words)
	}
	args := words[bestLen:]
	if len(args) < best.Min || (best.Max >= 0 && len(args) > best.Max) {
		return nil, nil, fmt.Errorf("wrong number of arguments; usage: %s", best.Usage())
	}
	return best, args, nil
}

// unknown is the error for words that match no verb. When their first
// word starts verbs of two words ("bind" of "bind cq"), it lists their
// usages: too few words is a wrong number of arguments, else an unknown
// second word.
func unknown(table []Cmd, words []string) error {
	var usages []string
	for i := range table {
		if v := strings.Fields(table[i].Verb); len(v) > 1 && strings.EqualFold(v[0], words[0]) {
			usages = append(usages, table[i].Usage())
		}
	}
	switch {
	case len(usages) == 0:
		return fmt.Errorf("unknown command; commands: %s", verbs(table))
	case len(words) == 1:
		return fmt.Errorf("wrong number of arguments; usage: %s", strings.Join(usages, " | "))
	}
	return fmt.Errorf("unknown command; usage: %s", strings.Join(usages, " | "))
}

func verbs(table []Cmd) string {
	seen := map[string]bool{}
	var out []string
	for _, c := range table {
		v := strings.Fields(c.Verb)[0]
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

// Uint parses a number in the one grammar of every file of the tree:
// decimal digits, or 0x (or 0X) and hexadecimal digits. A leading zero
// does not mean octal ("010" is ten); signs, underscores and the 0b and
// 0o prefixes are not numbers here. The value must fit 64 bits.
func Uint(s string) (uint64, error) {
	digits, base := s, 10
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		digits, base = s[2:], 16
	}
	// With an explicit base, strconv takes digits only: no sign, prefix
	// or underscore.
	v, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q: want decimal or 0x hex digits, at most 64 bits", s)
	}
	return v, nil
}
