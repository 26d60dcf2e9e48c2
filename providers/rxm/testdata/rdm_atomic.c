/*
 * rdm_atomic: a real libfabric FI_EP_RDM endpoint (tcp;ofi_rxm) doing
 * atomics with a fabricfs RDM endpoint, for providers/rxm/interop_test.go.
 *
 *   rdm_atomic GOPORT GOKEY
 *
 * The fabricfs endpoint listens on 127.0.0.1:GOPORT and exposes a region
 * of 16384 bytes with key GOKEY (addresses are offsets) holding pattern
 * 11. "Every pair" below is every (call, op, datatype) that
 * fi_query_atomic accepts on this libfabric, in the order call (fi_atomic,
 * fi_fetch_atomic, fi_compare_atomic), op, datatype; pair i works on 3
 * elements at offset 32 * i, with operand pattern 100 + i and compare
 * values pattern 200 + i whose middle element is the target's (so that
 * the swaps happen there). This program:
 *   1. prints "query CALL OP DATATYPE RET COUNT SIZE" for every call, op
 *      and datatype (fi_query_atomic's answers), then "query end";
 *   2. prints "port P key K base B": its endpoint's port, and its region's
 *      key and base (0 with offsets, else the virtual address); its region
 *      holds pattern 12;
 *   3. does every pair on the fabricfs region, checking each result (the
 *      region's pattern 11), then reads the region back with fi_read and
 *      checks it against the values C computes for the operations, and
 *      prints "c2go ok N" (N pairs);
 *   4. does an fi_atomic with a key fabricfs does not have, expects
 *      -FI_EACCES, and prints "c2go eacces ok";
 *   5. progresses its endpoint while fabricfs does every pair on its
 *      region, until the line "check" on stdin; then checks its region
 *      against the values C computes and prints "go2c ok N";
 *   6. progresses (fabricfs's own bad key) until stdin closes, and exits.
 * Errors go to stderr with exit status 1.
 *
 * The values C computes are C's arithmetic on the element types, which is
 * what libfabric's handlers do; step 5 checks them against libfabric's own
 * target, step 3 fabricfs's against them. FI_CSWAP compares bytes, as
 * libfabric's compare-and-swap does.
 */
#define PROG "rdm_atomic"
#include "peer.h"

#include <complex.h>
#include <poll.h>
#include <unistd.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

enum { REGION = 16384, LOCAL = 16384, TOTAL = REGION + LOCAL, ELEMS = 3, SLOT = 32 };
enum { CALLS = 3, OPS = FI_MSWAP + 1, TYPES = FI_UINT128 + 1 };

static struct fid_mr *mr;
static unsigned char *buf;
static void *desc;
static uint64_t base;
static int supported[CALLS][OPS][TYPES];
static unsigned char gomem[REGION]; /* the fabricfs region before step 3 */

/* C's arithmetic, by element type: the operations each type takes. */
#define COMMON_OPS(T)                                                    \
	case FI_SUM: *d = *d + *s; return 0;                             \
	case FI_PROD: *d = *d * *s; return 0;                            \
	case FI_LOR: *d = *d || *s; return 0;                            \
	case FI_LAND: *d = *d && *s; return 0;                           \
	case FI_LXOR: *d = (*d && !*s) || (!*d && *s); return 0;         \
	case FI_CSWAP_NE: if (*c != *d) *d = *s; return 0;
#define ORDER_OPS(T)                                                     \
	case FI_MIN: if (*d > *s) *d = *s; return 0;                     \
	case FI_MAX: if (*d < *s) *d = *s; return 0;                     \
	case FI_CSWAP_LE: if (*c <= *d) *d = *s; return 0;               \
	case FI_CSWAP_LT: if (*c < *d) *d = *s; return 0;                \
	case FI_CSWAP_GE: if (*c >= *d) *d = *s; return 0;               \
	case FI_CSWAP_GT: if (*c > *d) *d = *s; return 0;
#define BIT_OPS(T)                                                       \
	case FI_BOR: *d |= *s; return 0;                                 \
	case FI_BAND: *d &= *s; return 0;                                \
	case FI_BXOR: *d ^= *s; return 0;                                \
	case FI_MSWAP: *d = (*s & *c) | (*d & ~*c); return 0;

#define INT_REF(T)                                                       \
	static int ref_##T(int op, T *d, const T *s, const T *c)         \
	{                                                                \
		switch (op) {                                            \
		COMMON_OPS(T) ORDER_OPS(T) BIT_OPS(T)                    \
		}                                                        \
		return -1;                                               \
	}
#define REAL_REF(T)                                                      \
	static int ref_##T(int op, T *d, const T *s, const T *c)         \
	{                                                                \
		switch (op) {                                            \
		COMMON_OPS(T) ORDER_OPS(T)                               \
		}                                                        \
		return -1;                                               \
	}

typedef float complex cfloat;
INT_REF(int8_t) INT_REF(uint8_t) INT_REF(int16_t) INT_REF(uint16_t)
INT_REF(int32_t) INT_REF(uint32_t) INT_REF(int64_t) INT_REF(uint64_t)
REAL_REF(float) REAL_REF(double)

static int ref_cfloat(int op, cfloat *d, const cfloat *s, const cfloat *c)
{
	switch (op) {
	COMMON_OPS(cfloat)
	}
	return -1;
}

static size_t type_size(int dt)
{
	static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8};

	return dt < (int) (sizeof sizes / sizeof sizes[0]) ? sizes[dt] : 0;
}

/*
 * Applies op to one element d of datatype dt with operand s and compare
 * c, as C computes it; the elements are copied to aligned variables.
 */
static void reference(int op, int dt, unsigned char *d,
		      const unsigned char *s, const unsigned char *c)
{
	union { int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32;
		uint32_t u32; int64_t i64; uint64_t u64; float f; double g;
		cfloat z; } vd, vs, vc;
	size_t n = type_size(dt);
	int r = -1;

	if (op == FI_ATOMIC_READ)
		return;
	if (op == FI_ATOMIC_WRITE) {
		memcpy(d, s, n);
		return;
	}
	if (op == FI_CSWAP) {
		if (!memcmp(d, c, n))
			memcpy(d, s, n);
		return;
	}
	memset(&vd, 0, sizeof vd);
	memset(&vs, 0, sizeof vs);
	memset(&vc, 0, sizeof vc);
	memcpy(&vd, d, n);
	memcpy(&vs, s, n);
	if (c)
		memcpy(&vc, c, n);
	switch (dt) {
	case FI_INT8: r = ref_int8_t(op, &vd.i8, &vs.i8, &vc.i8); break;
	case FI_UINT8: r = ref_uint8_t(op, &vd.u8, &vs.u8, &vc.u8); break;
	case FI_INT16: r = ref_int16_t(op, &vd.i16, &vs.i16, &vc.i16); break;
	case FI_UINT16: r = ref_uint16_t(op, &vd.u16, &vs.u16, &vc.u16); break;
	case FI_INT32: r = ref_int32_t(op, &vd.i32, &vs.i32, &vc.i32); break;
	case FI_UINT32: r = ref_uint32_t(op, &vd.u32, &vs.u32, &vc.u32); break;
	case FI_INT64: r = ref_int64_t(op, &vd.i64, &vs.i64, &vc.i64); break;
	case FI_UINT64: r = ref_uint64_t(op, &vd.u64, &vs.u64, &vc.u64); break;
	case FI_FLOAT: r = ref_float(op, &vd.f, &vs.f, &vc.f); break;
	case FI_DOUBLE: r = ref_double(op, &vd.g, &vs.g, &vc.g); break;
	case FI_FLOAT_COMPLEX: r = ref_cfloat(op, &vd.z, &vs.z, &vc.z); break;
	}
	if (r) {
		fprintf(stderr, "rdm_atomic: no reference for op %d on datatype"
			" %d\n", op, dt);
		exit(1);
	}
	/* Only MIN/MAX and the swaps keep the target's bytes untouched when
	 * they do nothing; a NaN stays the same NaN either way. */
	memcpy(d, &vd, n);
}

/* The operand and compare values of pair i over target t (n bytes). */
static void operands(int i, const unsigned char *t, size_t size,
		     unsigned char *operand, unsigned char *compare)
{
	size_t n = ELEMS * size;

	pattern(operand, 100 + i, (int) n);
	pattern(compare, 200 + i, (int) n);
	memcpy(compare + size, t + size, size);
}

/* What pair (call, op, dt) i makes of target t (before: old). */
static void expect(int call, int op, int dt, int i, unsigned char *t)
{
	unsigned char old[SLOT], operand[SLOT], compare[SLOT];
	size_t size = type_size(dt), k;

	memcpy(old, t, ELEMS * size);
	operands(i, old, size, operand, compare);
	for (k = 0; k < ELEMS; k++)
		reference(op, dt, t + k * size, operand + k * size,
			  call == 2 ? compare + k * size : NULL);
}

static void setup(int goport)
{
	uint64_t mr_mode = open_peer(goport, FI_MSG | FI_RMA | FI_ATOMIC,
				     FI_MR_LOCAL | FI_MR_ALLOCATED |
				     FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);

	buf = calloc(1, TOTAL);
	if (!buf)
		fail("out of memory");
	CHECK(fi_mr_reg(domain, buf, TOTAL,
			FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, 0xc0ffee, 0, &mr, NULL));
	desc = fi_mr_desc(mr);
	if (mr_mode & FI_MR_VIRT_ADDR)
		base = (uintptr_t) buf;
}

/* Step 1: fi_query_atomic for everything, into supported. */
static void query(void)
{
	static const uint64_t flags[CALLS] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};
	struct fi_atomic_attr attr;
	int call, op, dt, r;

	for (call = 0; call < CALLS; call++)
		for (op = 0; op < OPS; op++)
			for (dt = 0; dt < TYPES; dt++) {
				memset(&attr, 0, sizeof attr);
				r = fi_query_atomic(domain, dt, op, &attr,
						    flags[call]);
				supported[call][op][dt] = r == 0;
				printf("query %d %d %d %d %zu %zu\n", call, op,
				       dt, r, attr.count, attr.size);
			}
	printf("query end\n");
	fflush(stdout);
}

/* Step 3: every pair on the fabricfs region. */
static int c2go(uint64_t key)
{
	static const uint64_t cq_flags[CALLS] = {FI_ATOMIC | FI_WRITE,
		FI_ATOMIC | FI_READ, FI_ATOMIC | FI_READ};
	unsigned char *src = buf + REGION, *cmp = src + 4096;
	unsigned char *res = src + 8192, *initial;
	struct fi_context ctx;
	int call, op, dt, i = 0;
	size_t size, n;

	pattern(gomem, 11, REGION);
	for (call = 0; call < CALLS; call++)
		for (op = 0; op < OPS; op++)
			for (dt = 0; dt < TYPES; dt++) {
				if (!supported[call][op][dt])
					continue;
				size = type_size(dt);
				n = ELEMS * size;
				if (i * SLOT + SLOT > REGION)
					fail("too many pairs for the region");
				initial = gomem + i * SLOT;
				operands(i, initial, size, src, cmp);
				memset(res, 0, n);
				switch (call) {
				case 0:
					POST(fi_atomic(ep, src, ELEMS, desc,
						       peer, i * SLOT, key, dt,
						       op, &ctx));
					break;
				case 1:
					POST(fi_fetch_atomic(ep,
						op == FI_ATOMIC_READ ? NULL : src,
						ELEMS, desc, res, desc, peer,
						i * SLOT, key, dt, op, &ctx));
					break;
				default:
					POST(fi_compare_atomic(ep, src, ELEMS,
						desc, cmp, desc, res, desc,
						peer, i * SLOT, key, dt, op,
						&ctx));
				}
				if (wait_op(&ctx, cq_flags[call], NULL, "atomic")) {
					fprintf(stderr, "rdm_atomic: call %d op"
						" %d datatype %d failed\n",
						call, op, dt);
					exit(1);
				}
				if (call && memcmp(res, initial, n)) {
					fprintf(stderr, "rdm_atomic: call %d op"
						" %d datatype %d: wrong result\n",
						call, op, dt);
					exit(1);
				}
				i++;
			}

	/* Read the region back and compare with C's values. */
	POST(fi_read(ep, src, REGION, desc, peer, 0, key, &ctx));
	if (wait_op(&ctx, FI_RMA | FI_READ, NULL, "read back"))
		fail("read back failed");
	i = 0;
	for (call = 0; call < CALLS; call++)
		for (op = 0; op < OPS; op++)
			for (dt = 0; dt < TYPES; dt++) {
				if (!supported[call][op][dt])
					continue;
				expect(call, op, dt, i, gomem + i * SLOT);
				if (memcmp(src + i * SLOT, gomem + i * SLOT,
					   ELEMS * type_size(dt))) {
					fprintf(stderr, "rdm_atomic: call %d op"
						" %d datatype %d: the fabricfs"
						" target differs\n", call, op,
						dt);
					exit(1);
				}
				i++;
			}
	return i;
}

/* Whether a line is ready on stdin. */
static int stdin_ready(void)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

int main(int argc, char **argv)
{
	struct fi_context ctx;
	struct sockaddr_in me;
	size_t len = sizeof me;
	uint64_t key, one = 1;
	char line[64];
	int call, op, dt, i, n, r;

	if (argc != 3)
		fail("usage: rdm_atomic GOPORT GOKEY");
	key = strtoull(argv[2], NULL, 0);
	setup(atoi(argv[1]));
	query();

	CHECK(fi_getname(&ep->fid, &me, &len));
	pattern(buf, 12, REGION);
	printf("port %d key %" PRIu64 " base %" PRIu64 "\n", ntohs(me.sin_port),
	       fi_mr_key(mr), base);
	fflush(stdout);

	n = c2go(key);
	printf("c2go ok %d\n", n);
	fflush(stdout);

	memcpy(buf + REGION, &one, sizeof one);
	POST(fi_atomic(ep, buf + REGION, 1, desc, peer, 0, key + 0x1000,
		       FI_UINT64, FI_SUM, &ctx));
	r = wait_op(&ctx, FI_ATOMIC | FI_WRITE, NULL, "bad key");
	if (r != FI_EACCES) {
		fprintf(stderr, "rdm_atomic: bad key: error %d, want "
			"FI_EACCES\n", r);
		exit(1);
	}
	printf("c2go eacces ok\n");
	fflush(stdout);

	while (!stdin_ready())
		progress();
	if (!fgets(line, sizeof line, stdin) || strcmp(line, "check\n"))
		fail("expected \"check\" on stdin");
	i = 0;
	{
		unsigned char want[REGION];

		pattern(want, 12, REGION);
		for (call = 0; call < CALLS; call++)
			for (op = 0; op < OPS; op++)
				for (dt = 0; dt < TYPES; dt++) {
					if (!supported[call][op][dt])
						continue;
					expect(call, op, dt, i,
					       want + i * SLOT);
					if (memcmp(want + i * SLOT,
						   buf + i * SLOT,
						   ELEMS * type_size(dt))) {
						fprintf(stderr, "rdm_atomic: "
							"fabricfs's call %d op"
							" %d datatype %d: our"
							" target differs\n",
							call, op, dt);
						exit(1);
					}
					i++;
				}
	}
	printf("go2c ok %d\n", i);
	fflush(stdout);

	for (;;) {
		while (!stdin_ready())
			progress();
		if (!fgets(line, sizeof line, stdin))
			break;
	}
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	return 0;
}
