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
		h, data, n, err := DecodeCM(b)
		if err != nil {
			return
		}
		if n != CMHeaderSize+len(data) || len(data) > MaxCMData || h.DataLen != len(data) {
			t.Fatalf("DecodeCM(%x) = %+v, %d bytes of data, n %d", b, h, len(data), n)
		}
		out, err := AppendCM(nil, h.Type, data)
		if err != nil {
			t.Fatalf("AppendCM(%v, %x) = %v", h.Type, data, err)
		}
		h2, data2, n2, err := DecodeCM(out)
		if err != nil || h2 != h || !bytes.Equal(data2, data) || n2 != n {
			t.Fatalf("DecodeCM(AppendCM(DecodeCM(%x))) = %+v, %x, %d, %v", b, h2, data2, n2, err)
		}
		// Fields fabricfs checks must survive; reserved ones are zeroed.
		if !bytes.Equal(out[:4], b[:4]) {
			t.Fatalf("re-encoded header starts %x, input %x", out[:4], b[:4])
		}
	})
}
