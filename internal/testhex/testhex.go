// Package testhex turns the hex dumps tests write wire bytes in ("03 00
// 0000 ...", spaces and newlines ignored) into bytes.
package testhex

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Bytes decodes s, failing t if it is not hex.
func Bytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
