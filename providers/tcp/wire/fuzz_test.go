package wire

import (
	"bytes"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
)

// FuzzDecodeHeader checks that Decode never panics, and that whatever it
// accepts encodes back to the very same bytes.
func FuzzDecodeHeader(f *testing.F) {
	for _, tt := range headerTests {
		f.Add(testhex.Bytes(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		n, err := h.Decode(b)
		if err != nil {
			return
		}
		if n < BaseHeaderSize || n > MaxHeaderSize || n > len(b) || n != h.Size() {
			t.Fatalf("Decode(%x) = %d bytes, Size %d", b, n, h.Size())
		}
		out, err := AppendHeader(nil, &h)
		if err != nil {
			t.Fatalf("AppendHeader(Decode(%x) = %+v) = %v", b, h, err)
		}
		if !bytes.Equal(out, b[:n]) {
			t.Fatalf("Decode(%x) = %+v re-encodes as %x", b[:n], h, out)
		}
	})
}

// FuzzDecodeCM checks that DecodeCM never panics, and that what it accepts
// encodes back to a message that decodes the same.
func FuzzDecodeCM(f *testing.F) {
	for _, tt := range cmTests {
		f.Add(testhex.Bytes(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, key, n, err := DecodeCM(b)
		if err != nil {
			return
		}
		if n != CMHeaderSize+len(data)+len(key) || len(data) > MaxCMData || h.DataLen != len(data) ||
			len(key) > MaxAuthKey || h.KeyLen != len(key) {
			t.Fatalf("DecodeCM(%x) = %+v, %d bytes of data, %d of key, n %d", b, h, len(data), len(key), n)
		}
		out, err := AppendCM(nil, h.Type, data, key)
		if err != nil {
			t.Fatalf("AppendCM(%v, %x, %x) = %v", h.Type, data, key, err)
		}
		h2, data2, key2, n2, err := DecodeCM(out)
		if err != nil || h2 != h || !bytes.Equal(data2, data) || !bytes.Equal(key2, key) || n2 != n {
			t.Fatalf("DecodeCM(AppendCM(DecodeCM(%x))) = %+v, %x, %x, %d, %v", b, h2, data2, key2, n2, err)
		}
		// Fields fabricfs checks must survive; reserved ones are zeroed.
		if !bytes.Equal(out[:4], b[:4]) {
			t.Fatalf("re-encoded header starts %x, input %x", out[:4], b[:4])
		}
	})
}
