package ring

import "unsafe"

// unsafeBytes views w's memory as bytes (8-byte aligned, like a mapping).
func unsafeBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)
}

// uintptrOf is the address of a byte slice's first byte or of a word.
func uintptrOf(x any) uintptr {
	switch v := x.(type) {
	case []byte:
		return uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	case *uint32:
		return uintptr(unsafe.Pointer(v))
	}
	panic("uintptrOf")
}
