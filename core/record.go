package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Record is a line of facts, such as an object's status or a queue's
// event, as named fields in order. String renders the text line the tree
// has always shown ("size=1024 queued=0 ..."); MarshalJSON renders the
// `.json` view: an object with the same fields, under the same snake_case
// keys, in the same order. The two come from the same fields, so they
// cannot disagree.
type Record []Field

// Field is one fact of a Record.
type Field struct {
	Key  string // snake_case: the JSON key, and "key=" in the line unless Bare
	JSON any    // the JSON value: a number, string, bool, []string, nil...
	Text string // the line's form of the value
	Bare bool   // the line shows Text alone ("ep 3 msg connected")
	Hide bool   // the line leaves the field out (an option not set); JSON keeps it
}

// String is the record's text line: its shown fields, separated by blanks.
func (r Record) String() string {
	var b strings.Builder
	for _, f := range r {
		if f.Hide {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if !f.Bare {
			b.WriteString(f.Key)
			b.WriteByte('=')
		}
		b.WriteString(f.Text)
	}
	return b.String()
}

// MarshalJSON writes the record as one JSON object, its keys in order.
func (r Record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.JSON)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Field makers for the common forms.

// word is a text value, the same in the line and in JSON.
func word(key, v string) Field { return Field{Key: key, JSON: v, Text: v} }

// bare is word shown without its key in the line.
func bare(key, v string) Field { return Field{Key: key, JSON: v, Text: v, Bare: true} }

// num is a number, decimal in the line.
func num[T ~int | ~int32 | ~int64 | ~uint32 | ~uint64](key string, v T) Field {
	return Field{Key: key, JSON: v, Text: fmt.Sprint(v)}
}

// hexNum is a number, written %#x in the line.
func hexNum(key string, v uint64) Field {
	return Field{Key: key, JSON: v, Text: "0x" + strconv.FormatUint(v, 16)}
}

// orDash is a text value that may be missing: "-" in the line, null in JSON.
func orDash(key, v string) Field {
	if v == "" {
		return Field{Key: key, Text: "-"}
	}
	return word(key, v)
}

// flagField is a flag set given as fi_tostr prints it ("[ FI_MSG, FI_SEND ]"):
// FlagText's one word in the line, an array of the names in JSON.
func flagField(key, tostr string) Field {
	return Field{Key: key, JSON: fi.FlagNames(tostr), Text: FlagText(tostr)}
}

// AttrsRecord is attr.json of an object or domain: each attribute by its
// name, in the order of attr/, with its value as its file shows it, typed
// by the file's format: "-" (no value) is null, "true" and "false" are
// booleans, a flag set "[ FI_MSG, FI_SEND ]" is an array of its names, a
// number (decimal, 0x hex, or -1) is a JSON number, anything else (an
// enumeration's name, an address, a version "1.17") a string.
func AttrsRecord(attrs []Attr) Record {
	r := make(Record, len(attrs))
	for i, a := range attrs {
		v := strings.TrimSpace(a.Get())
		r[i] = Field{Key: a.Name, JSON: attrJSON(v), Text: v}
	}
	return r
}

// attrJSON is an attribute's value typed as AttrsRecord says.
func attrJSON(v string) any {
	switch {
	case v == "-":
		return nil
	case v == "true" || v == "false":
		return v == "true"
	case strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]"):
		return fi.FlagNames(v)
	case v == "-1":
		return -1
	}
	if n, err := ParseUint(v); err == nil {
		return n
	}
	return v
}
