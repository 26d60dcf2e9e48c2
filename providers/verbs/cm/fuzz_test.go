package cm

import (
	"reflect"
	"testing"
)

// FuzzDecode: no input makes Decode panic, and what it accepts encodes
// back to a MAD that decodes to the same message.
func FuzzDecode(f *testing.F) {
	for _, m := range roundTrips {
		var b [MADSize]byte
		if err := m.Encode(b[:]); err != nil {
			f.Fatal(err)
		}
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		var out [MADSize]byte
		if err := m.Encode(out[:]); err != nil {
			t.Fatalf("Decode accepted %+v, which Encode refuses: %v", m, err)
		}
		m2, err := Decode(out[:])
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decoded %+v, %v; want %+v", m2, err, m)
		}
	})
}
