// Package atomic computes libfabric's atomic operations (fi_atomic(3)) on
// memory, for the providers that carry them in software: the target side
// of an fi_atomic, fi_fetch_atomic or fi_compare_atomic applies the
// operation here to the bytes of the target buffer and hands the values
// from before it back to the initiator.
//
// Elements are in the host's byte order, little-endian, with the sizes
// libfabric gives them on x86-64 and arm64 Linux (Size). Which operations
// go with which datatypes (Supported) is the table of libfabric 1.17's
// rxm as Debian builds it, with the compiler's memory-model atomics
// (HAVE_BUILTIN_MM_ATOMICS; prov/util/src/util_atomic.c): every integer
// type, FLOAT and DOUBLE, and FLOAT_COMPLEX for the operations without an
// order; no DOUBLE_COMPLEX, LONG_DOUBLE or LONG_DOUBLE_COMPLEX (that build
// has no handlers for them, so a libfabric peer never sends them), and no
// 128-bit integers (rxm refuses them). `fi_query_atomic` on real
// tcp;ofi_rxm gives the same table; providers/rxm's interop test compares.
//
// The arithmetic is C's on the same types, as libfabric's handlers do it:
// integers wrap; FLOAT and DOUBLE are IEEE single and double; the logical
// operations give 1 or 0; FLOAT_COMPLEX multiplies as C99's Annex G says
// (infinities survive a NaN part). FI_CSWAP is libfabric's
// compare-and-swap primitive, which compares the bytes (so -0.0 does not
// equal 0.0, and a NaN equals the same NaN); FI_CSWAP_NE and the ordered
// compares compare values. FI_MIN and FI_MAX replace the
// target by the operand only when the operand is smaller (larger), so a
// NaN on either side leaves the target as it was.
//
// Apply serialises every operation of the process with one lock, so that
// atomics on the same memory from any endpoint of the daemon do not
// interleave. fi_atomic(3) asks less: "Atomicity is only guaranteed for
// each data type operation, not across the entire array." Memory the
// application itself writes through its mapping is not ordered with them.
package atomic

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
)

// Kind is which of the three atomic calls an operation comes from.
type Kind uint8

const (
	Write   Kind = iota // fi_atomic: the target combined with the operand
	Fetch               // fi_fetch_atomic: as Write, and the values before it returned
	Compare             // fi_compare_atomic: the operand written where the compare holds; the values before returned
)

func (k Kind) String() string {
	switch k {
	case Write:
		return "fi_atomic"
	case Fetch:
		return "fi_fetch_atomic"
	case Compare:
		return "fi_compare_atomic"
	}
	return fmt.Sprintf("atomic kind %d", uint8(k))
}

// Size returns the size in bytes of one element of datatype dt
// (ofi_datatype_size on x86-64 and arm64 Linux), or 0 for a value that is
// not a point-to-point datatype.
func Size(dt fi.AtomicType) int {
	switch dt {
	case fi.INT8, fi.UINT8:
		return 1
	case fi.INT16, fi.UINT16:
		return 2
	case fi.INT32, fi.UINT32, fi.FLOAT:
		return 4
	case fi.INT64, fi.UINT64, fi.DOUBLE, fi.FLOAT_COMPLEX:
		return 8
	case fi.DOUBLE_COMPLEX, fi.LONG_DOUBLE, fi.INT128, fi.UINT128:
		return 16
	case fi.LONG_DOUBLE_COMPLEX:
		return 32
	}
	return 0
}

// class is what a datatype's elements are, for the table.
type class uint8

const (
	noClass      class = iota
	classInt           // INT8 .. UINT64
	classReal          // FLOAT, DOUBLE
	classComplex       // FLOAT_COMPLEX
)

func classOf(dt fi.AtomicType) class {
	switch {
	case dt <= fi.UINT64:
		return classInt
	case dt == fi.FLOAT || dt == fi.DOUBLE:
		return classReal
	case dt == fi.FLOAT_COMPLEX:
		return classComplex
	}
	return noClass
}

// Supported reports whether an operation of kind k with op on datatype dt
// is one libfabric's rxm takes (ofi_atomic_valid and rxm_ep_query_atomic):
// FI_ATOMIC_READ only fetches, the swaps only compare, and the other ops
// go with Write and Fetch; the order-based ops (MIN, MAX, CSWAP_LE..GT)
// take integers and reals, the bitwise ones (BOR, BAND, BXOR, MSWAP)
// integers only, the rest also FLOAT_COMPLEX.
func Supported(k Kind, dt fi.AtomicType, op fi.AtomicOp) bool {
	c := classOf(dt)
	if c == noClass || k > Compare {
		return false
	}
	switch op {
	case fi.MIN, fi.MAX:
		return k != Compare && c != classComplex
	case fi.SUM, fi.PROD, fi.LOR, fi.LAND, fi.LXOR, fi.ATOMIC_WRITE:
		return k != Compare
	case fi.BOR, fi.BAND, fi.BXOR:
		return k != Compare && c == classInt
	case fi.ATOMIC_READ:
		return k == Fetch
	case fi.CSWAP, fi.CSWAP_NE:
		return k == Compare
	case fi.CSWAP_LE, fi.CSWAP_LT, fi.CSWAP_GE, fi.CSWAP_GT:
		return k == Compare && c != classComplex
	case fi.MSWAP:
		return k == Compare && c == classInt
	}
	return false
}

// mu serialises Apply across the process.
var mu sync.Mutex

// Apply performs an operation of kind k with op on the elements of
// datatype dt in target, with the operand's elements (none for
// FI_ATOMIC_READ) and, for Compare, the compare's, element by element; it
// copies target's values from before the operation into result, unless
// result is nil. operand, compare and result must each be empty or as long
// as target, as the kind and op call for, and target a whole number of
// elements. An operation Supported does not take fails with
// fi.EOPNOTSUPP and bad lengths with fi.EINVAL; neither touches target.
func Apply(k Kind, dt fi.AtomicType, op fi.AtomicOp, target, operand, compare, result []byte) error {
	if !Supported(k, dt, op) {
		return fmt.Errorf("atomic: %v with %v on %v is not supported: %w", k, op, dt, fi.EOPNOTSUPP)
	}
	size, n := Size(dt), len(target)
	wantOperand, wantCompare := n, 0
	if op == fi.ATOMIC_READ {
		wantOperand = 0
	}
	if k == Compare {
		wantCompare = n
	}
	switch {
	case n%size != 0:
		return fmt.Errorf("atomic: a target of %d bytes for %d-byte %v elements: %w", n, size, dt, fi.EINVAL)
	case len(operand) != wantOperand || len(compare) != wantCompare:
		return fmt.Errorf("atomic: %d operand and %d compare bytes for a %d-byte target, want %d and %d: %w",
			len(operand), len(compare), n, wantOperand, wantCompare, fi.EINVAL)
	case result != nil && len(result) != n:
		return fmt.Errorf("atomic: a result of %d bytes for a %d-byte target: %w", len(result), n, fi.EINVAL)
	}
	mu.Lock()
	defer mu.Unlock()
	if result != nil {
		copy(result, target)
	}
	for off := 0; off < n; off += size {
		var s, c []byte
		if wantOperand > 0 {
			s = operand[off : off+size]
		}
		if wantCompare > 0 {
			c = compare[off : off+size]
		}
		apply(dt, op, target[off:off+size], s, c)
	}
	return nil
}

// apply performs op on one element t with operand s and compare c.
func apply(dt fi.AtomicType, op fi.AtomicOp, t, s, c []byte) {
	switch op {
	case fi.ATOMIC_READ:
		return
	case fi.ATOMIC_WRITE:
		copy(t, s)
		return
	case fi.CSWAP:
		// libfabric's FI_CSWAP is the compiler's compare-and-swap,
		// which compares the bytes.
		if bytes.Equal(t, c) {
			copy(t, s)
		}
		return
	}
	switch dt {
	case fi.FLOAT:
		d, v, m := f32(t), f32(s), float32(0)
		if c != nil {
			m = f32(c)
		}
		if isCond(op) {
			if realCond(op, d, v, m) {
				copy(t, s)
			}
			return
		}
		binary.LittleEndian.PutUint32(t, math.Float32bits(realValue(op, d, v)))
	case fi.DOUBLE:
		d, v, m := f64(t), f64(s), float64(0)
		if c != nil {
			m = f64(c)
		}
		if isCond(op) {
			if realCond(op, d, v, m) {
				copy(t, s)
			}
			return
		}
		binary.LittleEndian.PutUint64(t, math.Float64bits(realValue(op, d, v)))
	case fi.FLOAT_COMPLEX:
		applyComplex(op, t, s, c)
	default:
		applyInt(op, t, s, c, dt == fi.INT8 || dt == fi.INT16 || dt == fi.INT32 || dt == fi.INT64)
	}
}

// isCond reports whether op writes the operand where a condition holds,
// rather than computing a new value.
func isCond(op fi.AtomicOp) bool {
	switch op {
	case fi.MIN, fi.MAX, fi.CSWAP_NE, fi.CSWAP_LE, fi.CSWAP_LT, fi.CSWAP_GE, fi.CSWAP_GT:
		return true
	}
	return false
}

func f32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
func f64(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }

type float interface{ float32 | float64 }

// truth is C's value of a logical expression in type F.
func truth[F float](b bool) F {
	if b {
		return 1
	}
	return 0
}

// realCond says whether the operand s replaces the target d: MIN when
// d > s, MAX when d < s, the compares when compare c holds against d.
func realCond[F float](op fi.AtomicOp, d, s, c F) bool {
	switch op {
	case fi.MIN:
		return d > s
	case fi.MAX:
		return d < s
	case fi.CSWAP_NE:
		return c != d
	case fi.CSWAP_LE:
		return c <= d
	case fi.CSWAP_LT:
		return c < d
	case fi.CSWAP_GE:
		return c >= d
	case fi.CSWAP_GT:
		return c > d
	}
	return false
}

// realValue is the target's new value after op with operand s.
func realValue[F float](op fi.AtomicOp, d, s F) F {
	switch op {
	case fi.SUM:
		return d + s
	case fi.PROD:
		return d * s
	case fi.LOR:
		return truth[F](d != 0 || s != 0)
	case fi.LAND:
		return truth[F](d != 0 && s != 0)
	case fi.LXOR:
		return truth[F]((d != 0) != (s != 0))
	}
	return d
}

// applyInt performs op on an integer element of len(t) bytes. Sums and
// products wrap, the same in the low bits for signed and unsigned types;
// the orders compare as the type's signedness says.
func applyInt(op fi.AtomicOp, t, s, c []byte, signed bool) {
	w := len(t)
	d, v, m := leUint(t), leUint(s), leUint(c)
	less := func(a, b uint64) bool { // a < b in the element's type
		if signed {
			sh := uint(64 - 8*w)
			return int64(a<<sh)>>sh < int64(b<<sh)>>sh
		}
		return a < b
	}
	bit := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	r := d
	switch op {
	case fi.MIN:
		if less(v, d) {
			r = v
		}
	case fi.MAX:
		if less(d, v) {
			r = v
		}
	case fi.SUM:
		r = d + v
	case fi.PROD:
		r = d * v
	case fi.LOR:
		r = bit(d != 0 || v != 0)
	case fi.LAND:
		r = bit(d != 0 && v != 0)
	case fi.BOR:
		r = d | v
	case fi.BAND:
		r = d & v
	case fi.LXOR:
		r = bit((d != 0) != (v != 0))
	case fi.BXOR:
		r = d ^ v
	case fi.CSWAP_NE:
		if m != d {
			r = v
		}
	case fi.CSWAP_LE:
		if !less(d, m) {
			r = v
		}
	case fi.CSWAP_LT:
		if less(m, d) {
			r = v
		}
	case fi.CSWAP_GE:
		if !less(m, d) {
			r = v
		}
	case fi.CSWAP_GT:
		if less(d, m) {
			r = v
		}
	case fi.MSWAP:
		r = v&m | d&^m
	}
	putLE(t, r)
}

// leUint reads a little-endian unsigned integer of len(b) <= 8 bytes.
func leUint(b []byte) uint64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return u
}

// putLE writes the low len(b) bytes of u, little-endian.
func putLE(b []byte, u uint64) {
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
}

// applyComplex performs op on a FLOAT_COMPLEX element: real part, then
// imaginary part, each a float.
func applyComplex(op fi.AtomicOp, t, s, c []byte) {
	dr, di := f32(t), f32(t[4:])
	sr, si := f32(s), f32(s[4:])
	var r, i float32
	switch op {
	case fi.CSWAP_NE:
		if cr, ci := f32(c), f32(c[4:]); cr != dr || ci != di {
			copy(t, s)
		}
		return
	case fi.SUM:
		r, i = dr+sr, di+si
	case fi.PROD:
		r, i = mulComplex(dr, di, sr, si)
	case fi.LOR, fi.LAND, fi.LXOR:
		// A complex value is true when either part is not zero; the
		// result is 1 + 0i or 0.
		dt, st := dr != 0 || di != 0, sr != 0 || si != 0
		r = truth[float32](op == fi.LOR && (dt || st) || op == fi.LAND && dt && st || op == fi.LXOR && dt != st)
	default:
		return
	}
	binary.LittleEndian.PutUint32(t, math.Float32bits(r))
	binary.LittleEndian.PutUint32(t[4:], math.Float32bits(i))
}

// mulComplex is (a+bi)(c+di) in float, as C99 Annex G (G.5.1) defines
// the product: the schoolbook formula, and where both its parts are NaN
// although a factor or a partial product is infinite, the product is
// recomputed with the infinities as +-1 and the NaNs as +-0, scaled by
// infinity. Each product is rounded to float on its own (no fused
// multiply-add), as gcc computes it on x86-64.
func mulComplex(a, b, c, d float32) (float32, float32) {
	ac, bd, ad, bc := float32(a*c), float32(b*d), float32(a*d), float32(b*c)
	x, y := ac-bd, ad+bc
	if !isNaN(x) || !isNaN(y) {
		return x, y
	}
	again := false
	box := func(v float32) float32 { // an infinity as +-1, anything else as +-0
		if isInf(v) {
			return copysign(1, v)
		}
		return copysign(0, v)
	}
	unNaN := func(v float32) float32 {
		if isNaN(v) {
			return copysign(0, v)
		}
		return v
	}
	if isInf(a) || isInf(b) {
		a, b = box(a), box(b)
		c, d = unNaN(c), unNaN(d)
		again = true
	}
	if isInf(c) || isInf(d) {
		c, d = box(c), box(d)
		a, b = unNaN(a), unNaN(b)
		again = true
	}
	if !again && (isInf(ac) || isInf(bd) || isInf(ad) || isInf(bc)) {
		a, b, c, d = unNaN(a), unNaN(b), unNaN(c), unNaN(d)
		again = true
	}
	if again {
		inf := float32(math.Inf(1))
		x = inf * (float32(a*c) - float32(b*d))
		y = inf * (float32(a*d) + float32(b*c))
	}
	return x, y
}

func isNaN(v float32) bool { return v != v }
func isInf(v float32) bool { return v > math.MaxFloat32 || v < -math.MaxFloat32 }

// copysign is m with the sign bit of sign (also of a NaN).
func copysign(m, sign float32) float32 {
	const signBit = 1 << 31
	return math.Float32frombits(math.Float32bits(m)&^signBit | math.Float32bits(sign)&signBit)
}
