package atomic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// supportedTable is what fi_query_atomic answers on libfabric 1.17.0's
// tcp;ofi_rxm (Debian's build), for each kind and op: the datatypes it
// takes (0..10 are INT8..FLOAT_COMPLEX). Recorded with a program calling
// fi_query_atomic for every pair; providers/rxm's interop test checks
// Supported against the live library as well.
var supportedTable = map[Kind]map[fi.AtomicOp][]fi.AtomicType{
	Write: {
		fi.MIN: upTo(fi.DOUBLE), fi.MAX: upTo(fi.DOUBLE),
		fi.SUM: upTo(fi.FLOAT_COMPLEX), fi.PROD: upTo(fi.FLOAT_COMPLEX),
		fi.LOR: upTo(fi.FLOAT_COMPLEX), fi.LAND: upTo(fi.FLOAT_COMPLEX),
		fi.BOR: upTo(fi.UINT64), fi.BAND: upTo(fi.UINT64),
		fi.LXOR: upTo(fi.FLOAT_COMPLEX), fi.BXOR: upTo(fi.UINT64),
		fi.ATOMIC_WRITE: upTo(fi.FLOAT_COMPLEX),
	},
	Fetch: {
		fi.MIN: upTo(fi.DOUBLE), fi.MAX: upTo(fi.DOUBLE),
		fi.SUM: upTo(fi.FLOAT_COMPLEX), fi.PROD: upTo(fi.FLOAT_COMPLEX),
		fi.LOR: upTo(fi.FLOAT_COMPLEX), fi.LAND: upTo(fi.FLOAT_COMPLEX),
		fi.BOR: upTo(fi.UINT64), fi.BAND: upTo(fi.UINT64),
		fi.LXOR: upTo(fi.FLOAT_COMPLEX), fi.BXOR: upTo(fi.UINT64),
		fi.ATOMIC_READ: upTo(fi.FLOAT_COMPLEX), fi.ATOMIC_WRITE: upTo(fi.FLOAT_COMPLEX),
	},
	Compare: {
		fi.CSWAP: upTo(fi.FLOAT_COMPLEX), fi.CSWAP_NE: upTo(fi.FLOAT_COMPLEX),
		fi.CSWAP_LE: upTo(fi.DOUBLE), fi.CSWAP_LT: upTo(fi.DOUBLE),
		fi.CSWAP_GE: upTo(fi.DOUBLE), fi.CSWAP_GT: upTo(fi.DOUBLE),
		fi.MSWAP: upTo(fi.UINT64),
	},
}

func upTo(last fi.AtomicType) []fi.AtomicType {
	var s []fi.AtomicType
	for dt := fi.INT8; dt <= last; dt++ {
		s = append(s, dt)
	}
	return s
}

// TestSupported checks the table, which follows fi_atomic(3): "The
// following list of atomic operations are usable with base atomic
// operations: FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_LOR, FI_LAND, FI_BOR,
// FI_BAND, FI_LXOR, FI_BXOR, and FI_ATOMIC_WRITE." ("... with fetch
// atomic operations: ... FI_ATOMIC_READ, and FI_ATOMIC_WRITE"; "The
// compare atomic functions support: FI_CSWAP, FI_CSWAP_NE, FI_CSWAP_LE,
// FI_CSWAP_LT, FI_CSWAP_GE, FI_CSWAP_GT, and FI_MSWAP.")
func TestSupported(t *testing.T) {
	for _, k := range []Kind{Write, Fetch, Compare} {
		for op := fi.MIN; op <= fi.ATOMIC_OP_LAST; op++ {
			for dt := fi.INT8; dt <= fi.UINT128+1; dt++ {
				want := slices.Contains(supportedTable[k][op], dt)
				if got := Supported(k, dt, op); got != want {
					t.Errorf("Supported(%v, %v, %v) = %v, want %v", k, dt, op, got, want)
				}
			}
		}
	}
}

// Values each element takes in TestApplyEveryPair: every combination of
// target, operand and compare is one element of the arrays.
var (
	intValues     = []uint64{0, 1, 2, 5, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0x7fffffff, 0x80000000, math.MaxUint64, math.MaxUint64 - 4}
	realValues    = []float64{0, math.Copysign(0, -1), 1, -1, 1.5, -2.25, 1e30, math.Inf(1), math.Inf(-1), math.NaN()}
	complexValues = []complex64{0, 1, complex(0, -1), complex(1.5, 2), complex(-3, 0.25), complex(0, float32(math.Copysign(0, -1)))}
)

// TestApplyEveryPair applies every op to every datatype, of each kind,
// against a reference written with Go's own typed arithmetic: an
// unsupported pair fails with FI_EOPNOTSUPP ("The requested atomic
// operation is not supported on this endpoint.") and leaves the target;
// a supported one gives each element its new value and the result "the
// initial value that was stored at the target" (fi_atomic(3)).
func TestApplyEveryPair(t *testing.T) {
	for _, k := range []Kind{Write, Fetch, Compare} {
		for op := fi.MIN; op < fi.ATOMIC_OP_LAST; op++ {
			for dt := fi.INT8; dt <= fi.UINT128; dt++ {
				size := Size(dt)
				if !Supported(k, dt, op) {
					target := bytes.Repeat([]byte{7}, size)
					operand := make([]byte, size)
					var compare []byte
					if k == Compare {
						compare = make([]byte, size)
					}
					err := Apply(k, dt, op, target, operand, compare, make([]byte, size))
					if !errors.Is(err, fi.EOPNOTSUPP) || !bytes.Equal(target, bytes.Repeat([]byte{7}, size)) {
						t.Errorf("%v %v %v: %v, target %x; want FI_EOPNOTSUPP and the target unchanged", k, op, dt, err, target)
					}
					continue
				}
				checkPair(t, k, dt, op)
			}
		}
	}
}

// checkPair applies op to arrays holding every combination of values.
func checkPair(t *testing.T, k Kind, dt fi.AtomicType, op fi.AtomicOp) {
	t.Helper()
	var vals [][]byte
	switch dt {
	case fi.FLOAT, fi.DOUBLE:
		for _, v := range realValues {
			vals = append(vals, encodeReal(dt, v))
		}
	case fi.FLOAT_COMPLEX:
		for _, v := range complexValues {
			vals = append(vals, binary.LittleEndian.AppendUint64(nil, uint64(math.Float32bits(real(v)))|uint64(math.Float32bits(imag(v)))<<32))
		}
	default:
		for _, v := range intValues {
			vals = append(vals, binary.LittleEndian.AppendUint64(nil, v)[:Size(dt)])
		}
	}
	var target, operand, compare, want []byte
	for _, d := range vals {
		for _, s := range vals {
			cs := [][]byte{nil}
			if k == Compare {
				cs = vals
			}
			for _, c := range cs {
				target = append(target, d...)
				operand = append(operand, s...)
				compare = append(compare, c...)
				want = append(want, reference(dt, op, d, s, c)...)
			}
		}
	}
	old := slices.Clone(target)
	if op == fi.ATOMIC_READ {
		operand = nil
	}
	result := make([]byte, len(target))
	if err := Apply(k, dt, op, target, operand, compare, result); err != nil {
		t.Fatalf("%v %v %v: %v", k, op, dt, err)
	}
	if !bytes.Equal(result, old) {
		t.Errorf("%v %v %v: the result is not the target's values before", k, op, dt)
	}
	size := Size(dt)
	for i := 0; i < len(target); i += size {
		if !bytes.Equal(target[i:i+size], want[i:i+size]) {
			e := i / size
			t.Errorf("%v %v %v: element %d (target %x, operand %x, compare %x): got %x, want %x",
				k, op, dt, e, old[i:i+size], operand[min(i, len(operand)):min(i+size, len(operand))],
				compare[min(i, len(compare)):min(i+size, len(compare))], target[i:i+size], want[i:i+size])
			return
		}
	}
}

func encodeReal(dt fi.AtomicType, v float64) []byte {
	if dt == fi.FLOAT {
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v)))
	}
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
}

// reference is the new value of target element d after op with operand
// s and compare c, computed with Go's typed arithmetic.
func reference(dt fi.AtomicType, op fi.AtomicOp, d, s, c []byte) []byte {
	switch op {
	case fi.ATOMIC_READ:
		return d
	case fi.ATOMIC_WRITE:
		return s
	case fi.CSWAP:
		if bytes.Equal(d, c) {
			return s
		}
		return d
	}
	switch dt {
	case fi.INT8:
		return refInt[int8](op, d, s, c)
	case fi.UINT8:
		return refInt[uint8](op, d, s, c)
	case fi.INT16:
		return refInt[int16](op, d, s, c)
	case fi.UINT16:
		return refInt[uint16](op, d, s, c)
	case fi.INT32:
		return refInt[int32](op, d, s, c)
	case fi.UINT32:
		return refInt[uint32](op, d, s, c)
	case fi.INT64:
		return refInt[int64](op, d, s, c)
	case fi.UINT64:
		return refInt[uint64](op, d, s, c)
	case fi.FLOAT:
		return refNum[float32](op, d, s, c)
	case fi.DOUBLE:
		return refNum[float64](op, d, s, c)
	case fi.FLOAT_COMPLEX:
		return refComplex(op, d, s, c)
	}
	panic("no reference for " + dt.String())
}

type intType interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type number interface{ intType | float32 | float64 }

func decode[T any](b []byte) T {
	var v T
	if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
		panic(err)
	}
	return v
}

func encode[T any](v T) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

func boolNum[T number](b bool) T {
	if b {
		return 1
	}
	return 0
}

// refNum handles the ops that integers and reals share.
func refNum[T number](op fi.AtomicOp, db, sb, cb []byte) []byte {
	d, s := decode[T](db), decode[T](sb)
	var c T
	if cb != nil {
		c = decode[T](cb)
	}
	keep, take := db, sb
	switch op {
	case fi.MIN:
		if s < d {
			return take
		}
		return keep
	case fi.MAX:
		if s > d {
			return take
		}
		return keep
	case fi.SUM:
		return encode(d + s)
	case fi.PROD:
		return encode(d * s)
	case fi.LOR:
		return encode(boolNum[T](d != 0 || s != 0))
	case fi.LAND:
		return encode(boolNum[T](d != 0 && s != 0))
	case fi.LXOR:
		return encode(boolNum[T]((d != 0 && s == 0) || (d == 0 && s != 0)))
	case fi.CSWAP_NE:
		if c != d {
			return take
		}
	case fi.CSWAP_LE:
		if c <= d {
			return take
		}
	case fi.CSWAP_LT:
		if c < d {
			return take
		}
	case fi.CSWAP_GE:
		if c >= d {
			return take
		}
	case fi.CSWAP_GT:
		if c > d {
			return take
		}
	}
	return keep
}

// refInt adds the bitwise ops to refNum.
func refInt[T intType](op fi.AtomicOp, db, sb, cb []byte) []byte {
	d, s := decode[T](db), decode[T](sb)
	switch op {
	case fi.BOR:
		return encode(d | s)
	case fi.BAND:
		return encode(d & s)
	case fi.BXOR:
		return encode(d ^ s)
	case fi.MSWAP:
		c := decode[T](cb)
		return encode((s & c) | (d &^ c))
	}
	return refNum[T](op, db, sb, cb)
}

// refComplex uses Go's complex64 (the values multiply exactly).
func refComplex(op fi.AtomicOp, db, sb, cb []byte) []byte {
	d, s := decode[complex64](db), decode[complex64](sb)
	truthy := func(v complex64) bool { return v != 0 }
	switch op {
	case fi.SUM:
		return encode(d + s)
	case fi.PROD:
		return encode(d * s)
	case fi.LOR:
		return encode(complex(boolNum[float32](truthy(d) || truthy(s)), 0))
	case fi.LAND:
		return encode(complex(boolNum[float32](truthy(d) && truthy(s)), 0))
	case fi.LXOR:
		return encode(complex(boolNum[float32](truthy(d) != truthy(s)), 0))
	case fi.CSWAP_NE:
		if decode[complex64](cb) != d {
			return sb
		}
	}
	return db
}

// TestComplexProduct checks FLOAT_COMPLEX products against what gcc
// computes for float complex on x86-64 (the values printed by a C program
// multiplying them), including C99 Annex G's infinite products.
func TestComplexProduct(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		a, b, c, d float32
		re, im     uint32 // bits of the product, 0 for any NaN
	}{
		{1.5, -2, 0.1, 3, 0x40c4cccd, 0x4089999a},
		{inf, nan, 1, 0, 0x7f800000, 0},
		{inf, inf, 0, 1, 0xff800000, 0x7f800000},
		{1e30, 1e30, 1e30, -1e30, 0x7f800000, 0},
		{nan, 1, 1, 1, 0, 0},
		{inf, 0, nan, nan, 0, 0},
	} {
		target := encode([2]float32{c.a, c.b})
		operand := encode([2]float32{c.c, c.d})
		if err := Apply(Write, fi.FLOAT_COMPLEX, fi.PROD, target, operand, nil, nil); err != nil {
			t.Fatal(err)
		}
		got := decode[[2]uint32](target)
		for i, want := range []uint32{c.re, c.im} {
			isNaN := math.IsNaN(float64(math.Float32frombits(got[i])))
			if want == 0 && !isNaN || want != 0 && got[i] != want {
				t.Errorf("(%v%+vi)*(%v%+vi): part %d is %#x, want %#x (0: NaN)", c.a, c.b, c.c, c.d, i, got[i], want)
			}
		}
	}
}

// TestCSWAPComparesBytes: libfabric's FI_CSWAP is the compiler's
// compare-and-swap, so 0.0 and -0.0 differ and a NaN matches itself,
// while FI_CSWAP_NE compares values.
func TestCSWAPComparesBytes(t *testing.T) {
	zero, negZero, nan := encodeReal(fi.DOUBLE, 0), encodeReal(fi.DOUBLE, math.Copysign(0, -1)), encodeReal(fi.DOUBLE, math.NaN())
	one := encodeReal(fi.DOUBLE, 1)
	for _, c := range []struct {
		op              fi.AtomicOp
		target, compare []byte
		swapped         bool
	}{
		{fi.CSWAP, zero, negZero, false},
		{fi.CSWAP, nan, nan, true},
		{fi.CSWAP, zero, zero, true},
		{fi.CSWAP_NE, zero, negZero, false},
		{fi.CSWAP_NE, nan, nan, true},
	} {
		target := slices.Clone(c.target)
		if err := Apply(Compare, fi.DOUBLE, c.op, target, one, c.compare, nil); err != nil {
			t.Fatal(err)
		}
		if swapped := bytes.Equal(target, one); swapped != c.swapped {
			t.Errorf("%v of %x with compare %x: swapped %v, want %v", c.op, c.target, c.compare, swapped, c.swapped)
		}
	}
}

// TestApplyLengths: lengths that do not fit the kind, op and datatype
// are refused with FI_EINVAL and leave the target.
func TestApplyLengths(t *testing.T) {
	eight := make([]byte, 8)
	for _, c := range []struct {
		k                                Kind
		op                               fi.AtomicOp
		target, operand, compare, result []byte
	}{
		{Write, fi.SUM, make([]byte, 7), make([]byte, 7), nil, nil},
		{Write, fi.SUM, eight, make([]byte, 4), nil, nil},
		{Fetch, fi.ATOMIC_READ, eight, eight, nil, eight},
		{Fetch, fi.SUM, eight, eight, nil, make([]byte, 16)},
		{Compare, fi.CSWAP, eight, eight, nil, eight},
		{Write, fi.SUM, eight, eight, eight, nil},
	} {
		target := bytes.Repeat([]byte{9}, len(c.target))
		err := Apply(c.k, fi.UINT32, c.op, target, c.operand, c.compare, c.result)
		if !errors.Is(err, fi.EINVAL) || !bytes.Equal(target, bytes.Repeat([]byte{9}, len(c.target))) {
			t.Errorf("%v %v with %d/%d/%d/%d bytes: %v; want FI_EINVAL", c.k, c.op, len(c.target), len(c.operand), len(c.compare), len(c.result), err)
		}
	}
}

// FuzzApply: any kind, op, datatype and bytes: no panic; an error leaves
// the target; otherwise the result holds the values from before, Fetch
// leaves the same target as Write, and FI_ATOMIC_READ changes nothing.
func FuzzApply(f *testing.F) {
	f.Add(uint8(0), uint8(fi.SUM), uint8(fi.INT32), []byte("12345678abcdefgh"))
	f.Add(uint8(2), uint8(fi.CSWAP), uint8(fi.FLOAT_COMPLEX), []byte("0123456789abcdefghijklmnopqrstuv"))
	f.Add(uint8(1), uint8(fi.ATOMIC_READ), uint8(fi.DOUBLE), []byte("01234567"))
	f.Fuzz(func(t *testing.T, kb, opb, dtb uint8, data []byte) {
		k, op, dt := Kind(kb%4), fi.AtomicOp(opb%24), fi.AtomicType(dtb%20)
		size := max(Size(dt), 1)
		n := len(data) / 3 / size * size
		target, operand, compare := slices.Clone(data[:n]), data[n:2*n], data[2*n:3*n]
		if op == fi.ATOMIC_READ {
			operand = nil
		}
		if k != Compare {
			compare = nil
		}
		old := slices.Clone(target)
		result := make([]byte, n)
		if err := Apply(k, dt, op, target, operand, compare, result); err != nil {
			if !bytes.Equal(target, old) {
				t.Fatalf("%v %v %v failed (%v) and changed the target", k, op, dt, err)
			}
			return
		}
		if !bytes.Equal(result, old) {
			t.Fatalf("%v %v %v: the result is not the old target", k, op, dt)
		}
		if op == fi.ATOMIC_READ && !bytes.Equal(target, old) {
			t.Fatalf("FI_ATOMIC_READ changed the target")
		}
		if k == Fetch && op != fi.ATOMIC_READ {
			again := slices.Clone(old)
			if err := Apply(Write, dt, op, again, operand, nil, nil); err != nil {
				t.Fatalf("%v %v: fetch works, write fails: %v", op, dt, err)
			}
			if !bytes.Equal(again, target) {
				t.Fatalf("%v %v: fetch and write leave different targets", op, dt)
			}
		}
	})
}
