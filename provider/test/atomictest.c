/*
 * atomictest: checks the fabricfs provider's atomics (fi_atomic(3))
 * between two processes of FI_EP_RDM (or FI_EP_MSG) endpoints, through
 * the libfabric API alone. The program forks: the child is the target, whose registered
 * region takes the atomics; the parent the initiator, which for every
 * operation and datatype fi_query_atomic says the domain takes, with its
 * buffers registered, unregistered and mixed (staged by the provider):
 * sets the target's values (a message the child applies), posts the
 * atomic, checks its completion and the values it fetched, and reads the
 * target's values back (a message the child answers from its memory) to
 * check them against its own arithmetic. Then fi_inject_atomic, the
 * counters, the errors a call returns at once, and a bad key's error
 * completion.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric atomictest [DOMAIN [rdm|msg [tcp-target|tcp-initiator]]]
 *
 * With msg the endpoints are FI_EP_MSG, the target's accepting the
 * initiator's connection. With tcp-target or tcp-initiator that side is
 * libfabric's own tcp (tcp;ofi_rxm) on lo (FI_TCP_IFACE=lo), and the
 * initiator checks only the operations and the bad key. With
 * ATOMICTEST_TARGET_ROOT (and ATOMICTEST_TARGET_DOMAIN) in the
 * environment the target uses that tree (and domain): another daemon, as
 * another host would be. Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

#include <complex.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

/* ---- arithmetic: what the target's values become ---- */

#define MAXN 4 /* elements per operation (fewer if the domain's count is less) */
#define MAXSIZE 32 /* the largest datatype: long double complex */

/* The elements: target, operand and compare values as small integers
 * (complex types: the real parts, and these imaginary parts), so that
 * every result is exact in every type. They cover both sides of every
 * comparison, and zero and non-zero operands of the logical operations. */
static const int tv[MAXN] = {5, -3, 0, 0}, ti[MAXN] = {1, 0, 2, 0};
static const int ov[MAXN] = {2, 0, -3, 0}, oi[MAXN] = {0, 4, -1, 0};
static const int cv[MAXN] = {5, 1, -1, 0}, ci[MAXN] = {1, 0, 0, 0};
#define GUARD 99 /* the value of the element after the operated ones */
#define SLOT ((MAXN + 1) * MAXSIZE) /* bytes of MAXN elements and the guard */

/* The operations fi_atomic(3) defines for an integer type. The sums and
 * products wrap, computed unsigned. */
#define REF_INT(NAME, T)                                                                                               \
	static bool ref_##NAME(enum fi_op op, T *t, const T *o, const T *c, size_t n)                                  \
	{                                                                                                              \
		for (size_t i = 0; i < n; i++) {                                                                       \
			T a = t[i], b = o[i];                                                                          \
			switch (op) {                                                                                  \
			case FI_MIN: t[i] = b < a ? b : a; break;                                                      \
			case FI_MAX: t[i] = b > a ? b : a; break;                                                      \
			case FI_SUM: t[i] = (T)((unsigned __int128)a + (unsigned __int128)b); break;                   \
			case FI_PROD: t[i] = (T)((unsigned __int128)a * (unsigned __int128)b); break;                  \
			case FI_LOR: t[i] = a || b; break;                                                             \
			case FI_LAND: t[i] = a && b; break;                                                            \
			case FI_BOR: t[i] = a | b; break;                                                              \
			case FI_BAND: t[i] = a & b; break;                                                             \
			case FI_LXOR: t[i] = (a && !b) || (!a && b); break;                                            \
			case FI_BXOR: t[i] = a ^ b; break;                                                             \
			case FI_ATOMIC_READ: break;                                                                    \
			case FI_ATOMIC_WRITE: t[i] = b; break;                                                         \
			case FI_CSWAP: t[i] = c[i] == a ? b : a; break;                                                \
			case FI_CSWAP_NE: t[i] = c[i] != a ? b : a; break;                                             \
			case FI_CSWAP_LE: t[i] = c[i] <= a ? b : a; break;                                             \
			case FI_CSWAP_LT: t[i] = c[i] < a ? b : a; break;                                              \
			case FI_CSWAP_GE: t[i] = c[i] >= a ? b : a; break;                                             \
			case FI_CSWAP_GT: t[i] = c[i] > a ? b : a; break;                                              \
			case FI_MSWAP: t[i] = (b & c[i]) | (a & ~c[i]); break;                                         \
			default: return false;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		return true;                                                                                           \
	}

/* A real floating-point type: no bitwise operations. */
#define REF_REAL(NAME, T)                                                                                              \
	static bool ref_##NAME(enum fi_op op, T *t, const T *o, const T *c, size_t n)                                  \
	{                                                                                                              \
		for (size_t i = 0; i < n; i++) {                                                                       \
			T a = t[i], b = o[i];                                                                          \
			switch (op) {                                                                                  \
			case FI_MIN: t[i] = b < a ? b : a; break;                                                      \
			case FI_MAX: t[i] = b > a ? b : a; break;                                                      \
			case FI_SUM: t[i] = a + b; break;                                                              \
			case FI_PROD: t[i] = a * b; break;                                                             \
			case FI_LOR: t[i] = a || b; break;                                                             \
			case FI_LAND: t[i] = a && b; break;                                                            \
			case FI_LXOR: t[i] = (a && !b) || (!a && b); break;                                            \
			case FI_ATOMIC_READ: break;                                                                    \
			case FI_ATOMIC_WRITE: t[i] = b; break;                                                         \
			case FI_CSWAP: t[i] = c[i] == a ? b : a; break;                                                \
			case FI_CSWAP_NE: t[i] = c[i] != a ? b : a; break;                                             \
			case FI_CSWAP_LE: t[i] = c[i] <= a ? b : a; break;                                             \
			case FI_CSWAP_LT: t[i] = c[i] < a ? b : a; break;                                              \
			case FI_CSWAP_GE: t[i] = c[i] >= a ? b : a; break;                                             \
			case FI_CSWAP_GT: t[i] = c[i] > a ? b : a; break;                                              \
			default: return false;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		return true;                                                                                           \
	}

/* A complex type: no order, so no minimum, maximum or ordered swaps. */
#define REF_COMPLEX(NAME, T)                                                                                           \
	static bool ref_##NAME(enum fi_op op, T *t, const T *o, const T *c, size_t n)                                  \
	{                                                                                                              \
		for (size_t i = 0; i < n; i++) {                                                                       \
			T a = t[i], b = o[i];                                                                          \
			switch (op) {                                                                                  \
			case FI_SUM: t[i] = a + b; break;                                                              \
			case FI_PROD: t[i] = a * b; break;                                                             \
			case FI_LOR: t[i] = a != 0 || b != 0; break;                                                   \
			case FI_LAND: t[i] = a != 0 && b != 0; break;                                                  \
			case FI_LXOR: t[i] = (a != 0) != (b != 0); break;                                              \
			case FI_ATOMIC_READ: break;                                                                    \
			case FI_ATOMIC_WRITE: t[i] = b; break;                                                         \
			case FI_CSWAP: t[i] = c[i] == a ? b : a; break;                                                \
			case FI_CSWAP_NE: t[i] = c[i] != a ? b : a; break;                                             \
			default: return false;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		return true;                                                                                           \
	}

/* The datatypes: enum, name for the functions, C type, kind. */
#define DATATYPES(X)                                                                                                   \
	X(FI_INT8, i8, int8_t, INT)                                                                                    \
	X(FI_UINT8, u8, uint8_t, INT)                                                                                  \
	X(FI_INT16, i16, int16_t, INT)                                                                                 \
	X(FI_UINT16, u16, uint16_t, INT)                                                                               \
	X(FI_INT32, i32, int32_t, INT)                                                                                 \
	X(FI_UINT32, u32, uint32_t, INT)                                                                               \
	X(FI_INT64, i64, int64_t, INT)                                                                                 \
	X(FI_UINT64, u64, uint64_t, INT)                                                                               \
	X(FI_FLOAT, f, float, REAL)                                                                                    \
	X(FI_DOUBLE, d, double, REAL)                                                                                  \
	X(FI_FLOAT_COMPLEX, fc, float complex, COMPLEX)                                                                \
	X(FI_DOUBLE_COMPLEX, dc, double complex, COMPLEX)                                                              \
	X(FI_LONG_DOUBLE, ld, long double, REAL)                                                                       \
	X(FI_LONG_DOUBLE_COMPLEX, ldc, long double complex, COMPLEX)                                                   \
	X(FI_INT128, i128, __int128, INT)                                                                              \
	X(FI_UINT128, u128, unsigned __int128, INT)

#define DEFINE_REF(DT, NAME, T, KIND) REF_##KIND(NAME, T)
DATATYPES(DEFINE_REF)

/* reference applies op to the n elements of target t: false when this
 * test defines no such operation on dt. */
static bool reference(enum fi_datatype dt, enum fi_op op, void *t, const void *o, const void *c, size_t n)
{
	switch (dt) {
#define CALL_REF(DT, NAME, T, KIND)                                                                                    \
	case DT:                                                                                                       \
		return ref_##NAME(op, t, o, c, n);
		DATATYPES(CALL_REF)
	default:
		return false;
	}
}

/* put sets element i of p to re + im i (im only for complex types). */
static void put(enum fi_datatype dt, void *p, size_t i, int re, int im)
{
	switch (dt) {
#define PUT_INT(T) ((T *)p)[i] = (T)re
#define PUT_REAL(T) ((T *)p)[i] = (T)re
#define PUT_COMPLEX(T) ((T *)p)[i] = (T)re + (T)im * I
#define CALL_PUT(DT, NAME, T, KIND)                                                                                    \
	case DT:                                                                                                       \
		PUT_##KIND(T);                                                                                         \
		break;
		DATATYPES(CALL_PUT)
	default:
		break;
	}
}

/* same compares element i of a and b by value (a long double's padding
 * bytes are no part of it). */
static bool same(enum fi_datatype dt, const void *a, const void *b, size_t i)
{
	switch (dt) {
#define CALL_SAME(DT, NAME, T, KIND)                                                                                   \
	case DT:                                                                                                       \
		return ((const T *)a)[i] == ((const T *)b)[i];
		DATATYPES(CALL_SAME)
	default:
		return false;
	}
}

static size_t dt_size(enum fi_datatype dt)
{
	switch (dt) {
#define CALL_SIZE(DT, NAME, T, KIND)                                                                                   \
	case DT:                                                                                                       \
		return sizeof(T);
		DATATYPES(CALL_SIZE)
	default:
		return 0;
	}
}

/* The names of an op and a datatype, each in a buffer of its own for the
 * statement (fi_tostr's buffer is one for all its calls). */
#define OP_NAME(op) fi_tostr_r((char[32]){0}, 32, &(op), FI_TYPE_ATOMIC_OP)
#define DT_NAME(dt) fi_tostr_r((char[32]){0}, 32, &(dt), FI_TYPE_ATOMIC_TYPE)

/* ---- the two processes ---- */

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_cq *txcq, *rxcq;

/* cq_wait reads one entry within 5 s; an error entry is its positive
 * code (with e its err entry's context), a success 0. */
static int cq_wait(struct fid_cq *cq, struct fi_cq_data_entry *e, const char *what)
{
	double deadline = now() + 5;
	for (;;) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(cq, &err, 0) != 1)
				fail("%s: fi_cq_readerr", what);
			e->op_context = err.op_context;
			e->flags = err.flags;
			return err.err;
		}
		if (n != -FI_EAGAIN)
			fail("%s: fi_cq_read: %zd", what, n);
		if (now() > deadline)
			fail("%s: no completion after 5 s", what);
	}
}

/* progress reads nothing from the CQs: libfabric's rxm progresses its
 * endpoints in fi_cq_read (FI_PROGRESS_MANUAL), the tree in the daemon. */
static void progress(void)
{
	fi_cq_read(txcq, NULL, 0);
	fi_cq_read(rxcq, NULL, 0);
}

/* cq_ok waits for a successful completion of context ctx. */
static void cq_ok(struct fid_cq *cq, void *ctx, struct fi_cq_data_entry *e, const char *what)
{
	int err = cq_wait(cq, e, what);
	if (err)
		fail("%s: error completion %d (%s)", what, err, fi_strerror(err));
	if (e->op_context != ctx)
		fail("%s: completion for context %p, want %p", what, e->op_context, ctx);
}

static bool msg; /* FI_EP_MSG: connected endpoints; else FI_EP_RDM */
static struct fid_eq *eq;

/* open_all opens what the endpoint needs of domain dom of provider prov
 * with FI_ATOMIC for its type: fabric, domain, CQs, and an AV (RDM) or an
 * EQ (MSG). */
static void open_all(const char *prov, const char *dom)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = msg ? FI_EP_MSG : FI_EP_RDM;
	hints->caps = FI_MSG | FI_ATOMIC;
	hints->mode = FI_RX_CQ_DATA | FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->domain_attr->name = strdup(dom);
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret)
		fail("fi_getinfo of an %s entry of %s with FI_ATOMIC in %s: %d (%s)", msg ? "FI_EP_MSG" : "FI_EP_RDM",
		     prov, dom, ret, fi_strerror(-ret));
	fi_freeinfo(hints);
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	if (msg) {
		struct fi_eq_attr eqa = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
		CHECK(fi_eq_open(fabric, &eqa, &eq, NULL));
	} else {
		struct fi_av_attr ava = {.type = FI_AV_TABLE};
		CHECK(fi_av_open(domain, &ava, &av, NULL));
	}
	struct fi_cq_attr ca = {.size = 64, .format = FI_CQ_FORMAT_DATA};
	CHECK(fi_cq_open(domain, &ca, &txcq, NULL));
	CHECK(fi_cq_open(domain, &ca, &rxcq, NULL));
}

/* open_ep opens the endpoint of fi_info i, bound to the AV or EQ and the
 * CQs. */
static void open_ep(struct fi_info *i)
{
	CHECK(fi_endpoint(domain, i, &ep, NULL));
	CHECK(fi_ep_bind(ep, msg ? &eq->fid : &av->fid, 0));
	CHECK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
}

/* eq_wait waits 5 s for an event of type want (MSG). */
static void eq_wait(uint32_t want, struct fi_eq_cm_entry *e, const char *who)
{
	uint32_t event;
	ssize_t n = fi_eq_sread(eq, &event, e, sizeof *e, 5000, 0);
	if (n < 0 || event != want)
		fail("%s: want event %u, got %zd event %u", who, want, n, event);
}

static void close_all(void)
{
	if (ep)
		CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&txcq->fid));
	CHECK(fi_close(&rxcq->fid));
	CHECK(fi_close(msg ? &eq->fid : &av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
}

/* The messages between the two: the initiator's command, the target's
 * answer. SET writes bytes at off of the target's region, GET answers its
 * len bytes at off, DONE ends the target. */
enum { SET = 1, GET, DONE };
struct cmd {
	uint32_t what, off, len;
	_Alignas(16) uint8_t bytes[SLOT]; /* elements of every type: aligned for the largest */
};

/* Registered buffers are whole pages of their own (docs/provider.md: a
 * registration takes its pages whole), the target's region 16 of them. */
/* The keys requested (domains without FI_MR_PROV_KEY take them; a
 * fabricfs domain is one for both processes): the target's 0x515N, the
 * initiator's 0x616N. */
#define PAGE 4096
#define REGION (16 * PAGE)
_Static_assert(sizeof(struct cmd) <= PAGE && 3 * SLOT <= PAGE, "a command or the local buffers exceed a page");
#define TARGET_OFF 128 /* where the atomics act in the target's region */

/* target serves commands until DONE, then waits for the initiator to
 * close the pipe (its last check, a bad key, needs a live target); its
 * region takes the atomics. An FI_EP_RDM target gives the initiator its
 * endpoint's name, an FI_EP_MSG one its passive endpoint's, and accepts
 * the connection. */
static void target(const char *prov, const char *dom, int to_parent, int from_parent)
{
	open_all(prov, dom);
	uint8_t *region = aligned_alloc(PAGE, REGION);
	if (!region)
		fail("target: malloc");
	memset(region, 0, REGION);
	struct fid_mr *mr;
	CHECK(fi_mr_reg(domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x5151, 0, &mr, NULL));
	/* Remote addresses: offsets into the region, or with FI_MR_VIRT_ADDR
	 * (libfabric's rxm) its virtual addresses. */
	uint64_t key = fi_mr_key(mr), base = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)region : 0;
	struct fid_pep *pep = NULL;
	char name[128];
	size_t len = sizeof name;
	if (msg) {
		CHECK(fi_passive_ep(fabric, info, &pep, NULL));
		CHECK(fi_pep_bind(pep, &eq->fid, 0));
		CHECK(fi_listen(pep));
		CHECK(fi_getname(&pep->fid, name, &len));
	} else {
		open_ep(info);
		CHECK(fi_enable(ep));
		CHECK(fi_getname(&ep->fid, name, &len));
	}
	if (write(to_parent, &key, sizeof key) != sizeof key || write(to_parent, &base, sizeof base) != sizeof base ||
	    write(to_parent, &len, sizeof len) != sizeof len || write(to_parent, name, len) != (ssize_t)len)
		fail("target: write to the pipe");
	fi_addr_t parent = FI_ADDR_UNSPEC;
	if (msg) {
		struct fi_eq_cm_entry e;
		eq_wait(FI_CONNREQ, &e, "target");
		open_ep(e.info);
		fi_freeinfo(e.info);
		CHECK(fi_accept(ep, NULL, 0));
		eq_wait(FI_CONNECTED, &e, "target");
	} else {
		if (read(from_parent, &len, sizeof len) != sizeof len || len > sizeof name ||
		    read(from_parent, name, len) != (ssize_t)len)
			fail("target: read from the pipe");
		if (fi_av_insert(av, name, 1, &parent, 0, NULL) != 1)
			fail("target: fi_av_insert");
	}
	struct cmd *c = aligned_alloc(PAGE, PAGE), *answer = aligned_alloc(PAGE, PAGE);
	struct fid_mr *cmr, *amr;
	if (!c || !answer)
		fail("target: malloc");
	CHECK(fi_mr_reg(domain, c, PAGE, FI_RECV, 0, 0x5152, 0, &cmr, NULL));
	CHECK(fi_mr_reg(domain, answer, PAGE, FI_SEND, 0, 0x5153, 0, &amr, NULL));
	for (;;) {
		struct fi_context rctx, sctx;
		struct fi_cq_data_entry e;
		POST(fi_recv(ep, c, sizeof *c, fi_mr_desc(cmr), parent, &rctx));
		for (double deadline = now() + 60; cq_wait(rxcq, &e, "target: command") == 0 && e.op_context != &rctx;)
			if (now() > deadline)
				fail("target: no command after 60 s");
		if (c->what != SET && c->what != GET && c->what != DONE)
			fail("target: command %u", c->what);
		if (c->what != DONE && (c->len > sizeof c->bytes || c->off > REGION - c->len))
			fail("target: command %u off %u len %u", c->what, c->off, c->len);
		*answer = (struct cmd){.what = c->what, .off = c->off, .len = c->len};
		if (c->what == SET)
			memcpy(region + c->off, c->bytes, c->len);
		else if (c->what == GET)
			memcpy(answer->bytes, region + c->off, c->len);
		POST(fi_send(ep, answer, sizeof *answer, fi_mr_desc(amr), parent, &sctx));
		cq_ok(txcq, &sctx, &e, "target: answer");
		if (c->what == DONE)
			break;
	}
	/* Progressing the endpoint meanwhile, for libfabric's rxm, whose
	 * answer to the bad key is this process's work. */
	struct pollfd pfd = {.fd = from_parent, .events = POLLIN};
	for (double deadline = now() + 60; poll(&pfd, 1, 1) == 0;) {
		progress();
		if (now() > deadline)
			fail("target: the pipe from the initiator still open after 60 s");
	}
	char byte;
	if (read(from_parent, &byte, 1) != 0)
		fail("target: the pipe from the initiator did not close");
	CHECK(fi_close(&cmr->fid));
	CHECK(fi_close(&amr->fid));
	CHECK(fi_close(&mr->fid));
	if (pep)
		CHECK(fi_close(&pep->fid));
	close_all();
	free(c);
	free(answer);
	free(region);
	exit(0);
}

/* The initiator's side of the conversation; raddr is the remote address
 * of the target's elements. */
static fi_addr_t peer;
static uint64_t key, raddr;
static struct cmd *cmd, *answer;
static struct fid_mr *cmd_mr, *answer_mr;

/* ask sends a command and waits for the target's answer. */
static void ask(uint32_t what, uint32_t off, const void *bytes, uint32_t len)
{
	struct fi_context sctx, rctx;
	struct fi_cq_data_entry e;
	cmd->what = what;
	cmd->off = off;
	cmd->len = len;
	if (what == SET)
		memcpy(cmd->bytes, bytes, len);
	POST(fi_recv(ep, answer, sizeof *answer, fi_mr_desc(answer_mr), peer, &rctx));
	POST(fi_send(ep, cmd, sizeof *cmd, fi_mr_desc(cmd_mr), peer, &sctx));
	cq_ok(txcq, &sctx, &e, "command");
	cq_ok(rxcq, &rctx, &e, "answer");
	if (answer->what != what || answer->off != off || answer->len != len)
		fail("answer %u off %u len %u to command %u off %u len %u", answer->what, answer->off, answer->len,
		     what, off, len);
}

enum kind { BASE, FETCH, COMPARE };
static const char *const kind_names[] = {"fi_atomic", "fi_fetch_atomic", "fi_compare_atomic"};
static const uint64_t kind_flags[] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};

/* How the buffers are given: all registered (operand and compare values
 * in one region, so every buffer goes to the daemon in place), none
 * registered (all staged), or mixed: the operand unregistered, the
 * compare values and result registered (operand and compare values
 * staged together, the result in place). */
enum mode { REGISTERED, UNREGISTERED, MIXED, NMODE };
static const char *const mode_names[] = {"registered", "unregistered", "mixed"};

/* Local buffers: in a registered region and in plain memory, each with
 * room for an operand, compare values and a result of MAXN+1 elements. */
static uint8_t *local_reg, *local_plain;
static struct fid_mr *local_mr;

static int ops_done[3]; /* successful atomics of each kind, for the counters */

static char *dump(const uint8_t *p, size_t n, char *buf)
{
	for (size_t i = 0; i < n; i++)
		sprintf(buf + 2 * i, "%02x", p[i]);
	return buf;
}

/* post posts an atomic of kind k, by the mode: the plain call for
 * REGISTERED, the iovec call for UNREGISTERED, the message call for
 * MIXED, so that every call of fi_atomic(3) runs every operation. */
static ssize_t post(enum kind k, enum fi_op op, enum fi_datatype dt, size_t n, enum mode m, void *ob, void *od,
		    void *cb, void *cd, void *rb, void *rd, void *ctx)
{
	/* FI_ATOMIC_READ: "the source buffer operand (e.g. fi_fetch_atomic
	 * buf parameter) is ignored and may be NULL". */
	if (k == FETCH && op == FI_ATOMIC_READ)
		ob = NULL;
	struct fi_ioc ioc = {ob, n}, cmp = {cb, n}, res = {rb, n};
	struct fi_rma_ioc rma = {raddr, n, key};
	struct fi_msg_atomic msg = {.msg_iov = &ioc, .desc = &od, .iov_count = 1, .addr = peer, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op, .context = ctx};
	switch (k * NMODE + m) {
	case BASE * NMODE + REGISTERED:
		return fi_atomic(ep, ob, n, od, peer, raddr, key, dt, op, ctx);
	case BASE * NMODE + UNREGISTERED:
		return fi_atomicv(ep, &ioc, &od, 1, peer, raddr, key, dt, op, ctx);
	case BASE * NMODE + MIXED:
		return fi_atomicmsg(ep, &msg, 0);
	case FETCH * NMODE + REGISTERED:
		return fi_fetch_atomic(ep, ob, n, od, rb, rd, peer, raddr, key, dt, op, ctx);
	case FETCH * NMODE + UNREGISTERED:
		return fi_fetch_atomicv(ep, &ioc, &od, 1, &res, &rd, 1, peer, raddr, key, dt, op, ctx);
	case FETCH * NMODE + MIXED:
		return fi_fetch_atomicmsg(ep, &msg, &res, &rd, 1, 0);
	case COMPARE * NMODE + REGISTERED:
		return fi_compare_atomic(ep, ob, n, od, cb, cd, rb, rd, peer, raddr, key, dt, op, ctx);
	case COMPARE * NMODE + UNREGISTERED:
		return fi_compare_atomicv(ep, &ioc, &od, 1, &cmp, &cd, 1, &res, &rd, 1, peer, raddr, key, dt, op,
					  ctx);
	default:
		return fi_compare_atomicmsg(ep, &msg, &cmp, &cd, 1, &res, &rd, 1, 0);
	}
}

/* one runs one atomic of kind k with op on n elements of dt and checks it. */
static void one(enum kind k, enum fi_op op, enum fi_datatype dt, size_t n, enum mode m)
{
	char name[128];
	snprintf(name, sizeof name, "%s %s %s x%zu %s", kind_names[k], OP_NAME(op),
		 DT_NAME(dt), n, mode_names[m]);
	size_t size = dt_size(dt);
	_Alignas(16) uint8_t t[SLOT], o[SLOT], c[SLOT], want[SLOT], guard[SLOT];
	memset(t, 0, sizeof t);
	memset(o, 0, sizeof o);
	memset(c, 0, sizeof c);
	for (size_t i = 0; i < n; i++) {
		put(dt, t, i, tv[i], ti[i]);
		put(dt, o, i, ov[i], oi[i]);
		put(dt, c, i, cv[i], ci[i]);
	}
	put(dt, t, n, GUARD, GUARD);
	memcpy(want, t, sizeof t);
	if (!reference(dt, op, want, o, c, n))
		fail("%s: fi_query_atomic says the domain takes it, which fi_atomic(3) does not define", name);
	memset(guard, 0xa5, sizeof guard);

	/* The buffers: operand at 0, compare values at SLOT, result at 2 SLOT. */
	uint8_t *ob = m == REGISTERED ? local_reg : local_plain;
	uint8_t *cb = (m == UNREGISTERED ? local_plain : local_reg) + SLOT;
	uint8_t *rb = (m == UNREGISTERED ? local_plain : local_reg) + 2 * SLOT;
	void *od = m == REGISTERED ? fi_mr_desc(local_mr) : NULL;
	void *cd = m == UNREGISTERED ? NULL : fi_mr_desc(local_mr), *rd = cd;
	memcpy(ob, o, SLOT);
	memcpy(cb, c, SLOT);
	memcpy(rb, guard, SLOT);

	ask(SET, TARGET_OFF, t, (uint32_t)((n + 1) * size));
	struct fi_context ctx;
	POST(post(k, op, dt, n, m, ob, od, cb, cd, rb, rd, &ctx));
	/* The operand and compare values are the provider's to read until
	 * the completion, the result its to write: nobody touches them. */
	struct fi_cq_data_entry e;
	cq_ok(txcq, &ctx, &e, name);
	uint64_t flags = FI_ATOMIC | (k == BASE ? FI_WRITE : FI_READ);
	if ((e.flags & (FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_RMA | FI_MSG)) != flags)
		fail("%s: completion flags %#llx, want FI_ATOMIC | %s", name, (unsigned long long)e.flags,
		     k == BASE ? "FI_WRITE" : "FI_READ");
	char b1[2 * SLOT + 1], b2[2 * SLOT + 1];
	/* "Any results returned to the initiator as part of an atomic
	 * operation will be available prior to a completion event being
	 * generated." */
	if (k != BASE) {
		for (size_t i = 0; i < n; i++)
			if (!same(dt, rb, t, i))
				fail("%s: result element %zu is %s, want the target's old %s", name, i,
				     dump(rb + i * size, size, b1), dump(t + i * size, size, b2));
		if (memcmp(rb + n * size, guard, size))
			fail("%s: the result buffer was written past its %zu elements", name, n);
	}
	/* "After processing a completion for the atomic, if the initiator
	 * submits a transfer between the same endpoints that generates a
	 * completion at the target, the results will be available prior to
	 * the subsequent transfer's event." */
	ask(GET, TARGET_OFF, NULL, (uint32_t)((n + 1) * size));
	for (size_t i = 0; i <= n; i++)
		if (!same(dt, answer->bytes, want, i))
			fail("%s: target element %zu is %s, want %s", name, i, dump(answer->bytes + i * size, size, b1),
			     dump(want + i * size, size, b2));
	ops_done[k]++;
}

/* every_op runs one for every operation and datatype the domain takes,
 * checking the valid calls agree with fi_query_atomic; it returns how
 * many pairs it ran. */
static int every_op(void)
{
	int pairs = 0;
	for (enum kind k = BASE; k <= COMPARE; k++) {
		for (enum fi_op op = FI_MIN; op < FI_ATOMIC_OP_LAST; op++) {
			for (enum fi_datatype dt = FI_INT8; dt <= FI_UINT128; dt++) {
				struct fi_atomic_attr attr = {0};
				int ret = fi_query_atomic(domain, dt, op, &attr, kind_flags[k]);
				size_t count = 0;
				int vret = k == BASE ? fi_atomicvalid(ep, dt, op, &count)
					   : k == FETCH ? fi_fetch_atomicvalid(ep, dt, op, &count)
							: fi_compare_atomicvalid(ep, dt, op, &count);
				if (vret != ret || (!ret && count != attr.count))
					fail("%s %s %s: valid call %d count %zu, fi_query_atomic %d count %zu",
					     kind_names[k], OP_NAME(op),
					     DT_NAME(dt), vret, count, ret, attr.count);
				if (ret == -FI_EOPNOTSUPP)
					continue;
				if (ret)
					fail("fi_query_atomic %s %s %s: %d (%s)", kind_names[k],
					     OP_NAME(op), DT_NAME(dt), ret,
					     fi_strerror(-ret));
				if (attr.size != dt_size(dt) || attr.count == 0)
					fail("fi_query_atomic %s %s %s: count %zu size %zu, want size %zu",
					     kind_names[k], OP_NAME(op),
					     DT_NAME(dt), attr.count, attr.size, dt_size(dt));
				size_t n = attr.count < MAXN ? attr.count : MAXN;
				for (enum mode m = REGISTERED; m < NMODE; m++)
					one(k, op, dt, n, m);
				pairs++;
			}
		}
	}
	return pairs;
}

/* first_base finds an operation and datatype fi_atomic takes, preferring
 * FI_SUM on FI_UINT64, with its count. */
static void first_base(enum fi_op *op, enum fi_datatype *dt, size_t *count)
{
	if (fi_atomicvalid(ep, FI_UINT64, FI_SUM, count) == 0) {
		*op = FI_SUM;
		*dt = FI_UINT64;
		return;
	}
	for (*op = FI_MIN; *op < FI_ATOMIC_OP_LAST; (*op)++)
		for (*dt = FI_INT8; *dt <= FI_UINT128; (*dt)++)
			if (fi_atomicvalid(ep, *dt, *op, count) == 0)
				return;
	fail("fi_atomicvalid: no operation");
}

/* counters checks the counters bound FI_WRITE and FI_READ: "FI_WRITE
 * Increments the specified counter whenever an RMA write or base atomic
 * operation initiated from the endpoint has completed successfully or in
 * error"; FI_READ "whenever an RMA read, atomic fetch, or atomic compare
 * operation" has (fi_cntr(3)). */
static void counters(struct fid_cntr *w, struct fid_cntr *r, int writes, int reads, int write_errs)
{
	uint64_t wv = fi_cntr_read(w), rv = fi_cntr_read(r), we = fi_cntr_readerr(w), re = fi_cntr_readerr(r);
	if (wv != (uint64_t)writes || rv != (uint64_t)reads || we != (uint64_t)write_errs || re != 0)
		fail("counters: FI_WRITE %llu (errors %llu), FI_READ %llu (errors %llu); want %d (%d), %d (0)",
		     (unsigned long long)wv, (unsigned long long)we, (unsigned long long)rv, (unsigned long long)re,
		     writes, write_errs, reads);
}

/* inject: fi_inject_atomic "behaves as if the FI_INJECT transfer flag
 * were set, and FI_COMPLETION were not. That is, the data buffer is
 * available for reuse immediately on returning from from
 * fi_inject_atomic, and no completion event will be generated". The
 * write counter still counts it. */
static void inject(struct fid_cntr *w)
{
	enum fi_op op;
	enum fi_datatype dt;
	size_t count;
	first_base(&op, &dt, &count);
	size_t n = count < MAXN ? count : MAXN, size = dt_size(dt);
	_Alignas(16) uint8_t t[SLOT] = {0}, o[SLOT] = {0}, want[SLOT], buf[SLOT];
	for (size_t i = 0; i < n; i++) {
		put(dt, t, i, tv[i], ti[i]);
		put(dt, o, i, ov[i], oi[i]);
	}
	put(dt, t, n, GUARD, GUARD);
	memcpy(want, t, sizeof t);
	reference(dt, op, want, o, NULL, n);
	ask(SET, TARGET_OFF, t, (uint32_t)((n + 1) * size));
	uint64_t before = fi_cntr_read(w);
	memcpy(buf, o, sizeof buf);
	POST(fi_inject_atomic(ep, buf, n, peer, raddr, key, dt, op));
	memset(buf, 0x5a, sizeof buf); /* the provider has its own copy */
	CHECK(fi_cntr_wait(w, before + 1, 5000));
	struct fi_cq_data_entry e;
	if (fi_cq_read(txcq, &e, 1) != -FI_EAGAIN)
		fail("fi_inject_atomic made a completion entry");
	ask(GET, TARGET_OFF, NULL, (uint32_t)((n + 1) * size));
	for (size_t i = 0; i <= n; i++)
		if (!same(dt, answer->bytes, want, i))
			fail("fi_inject_atomic %s %s: target element %zu wrong", OP_NAME(op),
			     DT_NAME(dt), i);
	printf("ok fi_inject_atomic %s %s: no completion, the buffer reusable at once, counted\n",
	       OP_NAME(op), DT_NAME(dt));
}

/* call_errors: what the calls refuse before posting. */
static void call_errors(void)
{
	enum fi_op op;
	enum fi_datatype dt;
	size_t count, size;
	first_base(&op, &dt, &count);
	size = dt_size(dt);
	uint8_t *buf = calloc(count + 2, size);
	if (!buf)
		fail("malloc");
	struct fi_context ctx;
	ssize_t ret;
	struct fi_atomic_attr attr;
	/* "The compare atomic functions support: FI_CSWAP, ..." only; the
	 * base ones do not. */
	if ((ret = fi_atomic(ep, buf, 1, NULL, peer, raddr, key, dt, FI_CSWAP, &ctx)) != -FI_EOPNOTSUPP)
		fail("fi_atomic FI_CSWAP: %zd, want -FI_EOPNOTSUPP", ret);
	/* "-FI_EMSGSIZE The number of atomic operations in a single request
	 * exceeds that supported by the underlying provider." */
	if ((ret = fi_atomic(ep, buf, count + 1, NULL, peer, raddr, key, dt, op, &ctx)) != -FI_EMSGSIZE)
		fail("fi_atomic of count %zu + 1 elements: %zd, want -FI_EMSGSIZE", count, ret);
	/* "This must be between 1 and the maximum" */
	if ((ret = fi_atomic(ep, buf, 0, NULL, peer, raddr, key, dt, op, &ctx)) != -FI_EINVAL)
		fail("fi_atomic of 0 elements: %zd, want -FI_EINVAL", ret);
	/* One local segment: the ring takes one buffer. */
	struct fi_ioc two[2] = {{buf, 1}, {buf + size, 1}};
	void *descs[2] = {NULL, NULL};
	if ((ret = fi_atomicv(ep, two, descs, 2, peer, raddr, key, dt, op, &ctx)) != -FI_EINVAL)
		fail("fi_atomicv of 2 segments: %zd, want -FI_EINVAL", ret);
	struct fi_rma_ioc rma = {raddr, 1, key};
	struct fi_msg_atomic msg = {.msg_iov = two, .desc = descs, .iov_count = 1, .addr = peer, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op, .context = &ctx};
	if ((ret = fi_atomicmsg(ep, &msg, FI_REMOTE_CQ_DATA)) != -FI_EINVAL)
		fail("fi_atomicmsg with FI_REMOTE_CQ_DATA: %zd, want -FI_EINVAL", ret);
	rma.count = 2;
	if ((ret = fi_atomicmsg(ep, &msg, 0)) != -FI_EINVAL)
		fail("fi_atomicmsg of 1 element to 2 remote ones: %zd, want -FI_EINVAL", ret);
	/* "The FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC bits may not both be
	 * set." */
	if ((ret = fi_query_atomic(domain, dt, op, &attr, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) != -FI_EBADFLAGS)
		fail("fi_query_atomic FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC: %zd, want -FI_EBADFLAGS", ret);
	/* "If the FI_TAGGED bit is set, the provider will indicate if it
	 * supports atomic operations to tagged receive buffers": not. */
	if ((ret = fi_query_atomic(domain, dt, op, &attr, FI_TAGGED)) != -FI_EOPNOTSUPP)
		fail("fi_query_atomic FI_TAGGED: %zd, want -FI_EOPNOTSUPP", ret);
	struct fi_cq_data_entry e;
	if (fi_cq_read(txcq, &e, 1) != -FI_EAGAIN)
		fail("a refused call made a completion entry");
	free(buf);
	printf("ok calls refused: an operation of another kind, too many or no elements, 2 segments, remote CQ data, "
	       "fi_query_atomic's flags\n");
}

/* bad_key: an atomic on a key the target has no region for completes
 * in error: -FI_EACCES on FI_EP_RDM, as libfabric's rxm reports it;
 * FI_EIO on verbs' FI_EP_MSG, as libfabric's verbs reports every failed
 * work completion but a flushed one (the device's remote access error). */
static void bad_key(void)
{
	enum fi_op op;
	enum fi_datatype dt;
	size_t count;
	first_base(&op, &dt, &count);
	_Alignas(16) uint8_t buf[MAXSIZE] = {0};
	struct fi_context ctx;
	POST(fi_atomic(ep, buf, 1, NULL, peer, raddr, key + 0x1000, dt, op, &ctx));
	struct fi_cq_data_entry e;
	int err = cq_wait(txcq, &e, "fi_atomic with a bad key"), want = msg ? FI_EIO : FI_EACCES;
	if (err != want || e.op_context != &ctx)
		fail("fi_atomic with a bad key: completion %d (%s) for context %p, want %s", err, fi_strerror(err),
		     e.op_context, msg ? "FI_EIO" : "FI_EACCES");
	printf("ok a bad key: an error completion, %s\n", msg ? "FI_EIO" : "FI_EACCES");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dom = argc > 1 ? argv[1] : "tcp/lo";
	msg = argc > 2 && !strcmp(argv[2], "msg");
	/* One side may be libfabric's own tcp (tcp;ofi_rxm) on lo. */
	const char *tprov = "fabricfs", *tdom = dom, *iprov = "fabricfs", *idom = dom;
	if (argc > 3 && !strcmp(argv[3], "tcp-target")) {
		tprov = "tcp";
		tdom = "lo";
	} else if (argc > 3 && !strcmp(argv[3], "tcp-initiator")) {
		iprov = "tcp";
		idom = "lo";
	} else if (argc > 3) {
		fail("unknown argument %s: tcp-target or tcp-initiator", argv[3]);
	}
	bool ours = !strcmp(iprov, "fabricfs"); /* the initiator is the provider under test */
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		fail("pipe");
	/* Two processes, forked before either touches libfabric. */
	pid_t child = fork();
	if (child < 0)
		fail("fork");
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(up[0]);
		close(down[1]);
		/* The target may be another daemon's tree: another host. */
		const char *root = getenv("ATOMICTEST_TARGET_ROOT"), *d = getenv("ATOMICTEST_TARGET_DOMAIN");
		if (root && setenv("FI_FABRICFS_ROOT", root, 1))
			fail("setenv");
		target(tprov, d ? d : tdom, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	open_all(iprov, idom);
	struct fi_cntr_attr cnta = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *wcntr, *rcntr;
	CHECK(fi_cntr_open(domain, &cnta, &wcntr, NULL));
	CHECK(fi_cntr_open(domain, &cnta, &rcntr, NULL));
	open_ep(info);
	CHECK(fi_ep_bind(ep, &wcntr->fid, FI_WRITE));
	CHECK(fi_ep_bind(ep, &rcntr->fid, FI_READ));
	char name[128];
	size_t len;
	if (read(up[0], &key, sizeof key) != sizeof key || read(up[0], &raddr, sizeof raddr) != sizeof raddr ||
	    read(up[0], &len, sizeof len) != sizeof len || len > sizeof name || read(up[0], name, len) != (ssize_t)len)
		fail("the target did not start");
	raddr += TARGET_OFF;
	if (msg) {
		CHECK(fi_connect(ep, name, NULL, 0));
		struct fi_eq_cm_entry e;
		eq_wait(FI_CONNECTED, &e, "initiator");
	} else {
		CHECK(fi_enable(ep));
		if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
			fail("fi_av_insert");
		len = sizeof name;
		CHECK(fi_getname(&ep->fid, name, &len));
		if (write(down[1], &len, sizeof len) != sizeof len || write(down[1], name, len) != (ssize_t)len)
			fail("write to the pipe");
	}
	cmd = aligned_alloc(PAGE, PAGE);
	answer = aligned_alloc(PAGE, PAGE);
	local_reg = aligned_alloc(PAGE, PAGE);
	local_plain = malloc(3 * SLOT);
	if (!cmd || !answer || !local_reg || !local_plain)
		fail("malloc");
	CHECK(fi_mr_reg(domain, cmd, PAGE, FI_SEND, 0, 0x6161, 0, &cmd_mr, NULL));
	CHECK(fi_mr_reg(domain, answer, PAGE, FI_RECV, 0, 0x6162, 0, &answer_mr, NULL));
	CHECK(fi_mr_reg(domain, local_reg, PAGE, FI_READ | FI_WRITE, 0, 0x6163, 0, &local_mr, NULL));

	int pairs = every_op();
	if (pairs == 0)
		fail("fi_query_atomic: the domain takes no atomic operation");
	printf("ok every operation and datatype fi_query_atomic allows (%d), %d modes: %d fi_atomic, %d "
	       "fi_fetch_atomic, %d fi_compare_atomic; results and target values checked\n",
	       pairs, NMODE, ops_done[BASE], ops_done[FETCH], ops_done[COMPARE]);

	/* What the provider under test does beyond the operations. */
	if (ours) {
		counters(wcntr, rcntr, ops_done[BASE], ops_done[FETCH] + ops_done[COMPARE], 0);
		inject(wcntr);
		call_errors();
	}
	/* Last, as a bad key may end a connection (verbs' RC: the QP goes to
	 * its error state). */
	ask(DONE, 0, NULL, 0);
	bad_key();
	if (ours) {
		counters(wcntr, rcntr, ops_done[BASE] + 1, ops_done[FETCH] + ops_done[COMPARE], 1);
		printf("ok counters: FI_WRITE counts base atomics (an error too), FI_READ fetch and compare atomics\n");
	}

	close(down[1]);
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the target process ended with status %#x", status);
	CHECK(fi_close(&cmd_mr->fid));
	CHECK(fi_close(&answer_mr->fid));
	CHECK(fi_close(&local_mr->fid));
	CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&wcntr->fid));
	CHECK(fi_close(&rcntr->fid));
	ep = NULL;
	close_all();
	printf("PASS\n");
	return 0;
}
