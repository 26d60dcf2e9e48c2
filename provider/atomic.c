/*
 * atomic.c: atomic operations (fi_atomic(3)) and fi_query_atomic.
 *
 * An atomic is a work request of the endpoint's tx ring (docs/abi.md,
 * ops 7 ATOMIC, 8 FETCH_ATOMIC, 9 COMPARE_ATOMIC) that ep.c posts like
 * an RMA write: the operand (and a compare atomic's compare values) go to
 * the daemon in place when they lie in a registered region, else staged;
 * a fetch or compare atomic's result lands in place, or staged and copied
 * to the application's buffer before its completion is reported.
 *
 * Which operations a domain's endpoints take, and how many elements at
 * once, is the tree's answer (read once per domain: see answers below);
 * the valid calls and fi_query_atomic give it, and an operation it does
 * not allow fails when posted, as fi_atomic(3) says: -FI_EOPNOTSUPP, or
 * -FI_EMSGSIZE for more elements than the count.
 */
#include "ffs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The kinds of atomic operation, each with its valid call and flags of
 * fi_query_atomic. */
enum kind { BASE, FETCH, COMPARE, NKIND };

#define NTYPE (FI_EP_RDM + 1) /* endpoint types by enum fi_ep_type: MSG, DGRAM, RDM */
#define NOP FI_ATOMIC_OP_LAST
#define NDT (FI_UINT128 + 1)

/* A domain's answers: for each endpoint type, kind, op and datatype the
 * most elements one operation carries (0: not supported), and each
 * datatype's size; any says which endpoint types take atomics at all.
 * err is the domain's error when the tree has no answers for it. */
struct ffs_atomics {
	int err;
	bool any[NTYPE];
	uint32_t count[NTYPE][NKIND][NOP][NDT];
	uint8_t size[NDT];
};

static const char *const kind_names[NKIND] = {"atomic", "fetch_atomic", "compare_atomic"};

/* name_index finds the value below n whose fi_tostr name (of type) is s,
 * with or without its FI_ prefix, in any case: -1 for none. */
static int name_index(const char *s, enum fi_type type, int from, int n)
{
	for (int i = from; i < n; i++) {
		char buf[64];
		const char *name = fi_tostr_r(buf, sizeof buf, &i, type);
		if (name && (!strcasecmp(s, name) || (!strncasecmp(name, "FI_", 3) && !strcasecmp(s, name + 3))))
			return i;
	}
	return -1;
}

/* parse reads one line of the query_atomic file into a: false if it names
 * something this provider does not know (a later libfabric's datatype)
 * or is not such a line. */
static bool parse(const char *line, struct ffs_atomics *a)
{
	char t[32], k[32], op[32], dt[32];
	unsigned long long count, size;
	char extra;
	if (sscanf(line, "%31s %31s %31s %31s %llu %llu %c", t, k, op, dt, &count, &size, &extra) != 6)
		return false;
	int ti = name_index(t, FI_TYPE_EP_TYPE, FI_EP_MSG, NTYPE), oi = name_index(op, FI_TYPE_ATOMIC_OP, 0, NOP),
	    di = name_index(dt, FI_TYPE_ATOMIC_TYPE, 0, NDT), ki = -1;
	for (int i = 0; i < NKIND; i++)
		if (!strcasecmp(k, kind_names[i]))
			ki = i;
	if (ti < 0 || ki < 0 || oi < 0 || di < 0 || count == 0 || size == 0 || size > UINT8_MAX)
		return false;
	a->any[ti] = true;
	a->count[ti][ki][oi][di] = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
	a->size[di] = (uint8_t)size;
	return true;
}

/*
 * answers reads the tree's fi_query_atomic answers for the domain: its
 * query_atomic file (docs/tree.md) has one line per operation the
 * domain's endpoints take, "EP_TYPE KIND OP DATATYPE COUNT SIZE"
 * ("FI_EP_RDM fetch_atomic FI_SUM FI_UINT64 1 8"). A tree without the
 * file offers no atomics: -FI_ENOSYS, as libfabric's providers without
 * atomics answer.
 */
static int answers(struct ffs_domain *dom, struct ffs_atomics *a)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/query_atomic", dom->dir) >= (int)sizeof path)
		return -FI_EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -FI_ENOSYS : -ffs_fi_errno(errno);
	char *text;
	ssize_t n = ffs_read_all(fd, &text, 1 << 20);
	close(fd);
	if (n < 0)
		return (int)n;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!parse(line, a))
			ffs_debug("%s: line not used: %s", path, line);
	free(text);
	return 0;
}

/* atomics_of gives the domain's answers, reading them on first use; a
 * failure to read them other than their absence is not kept. */
static int atomics_of(struct ffs_domain *dom, struct ffs_atomics **out)
{
	pthread_mutex_lock(&dom->lock);
	int ret = 0;
	struct ffs_atomics *a = dom->atomics;
	if (!a) {
		if (!(a = calloc(1, sizeof *a)))
			ret = -FI_ENOMEM;
		else if ((a->err = answers(dom, a)) && a->err != -FI_ENOSYS) {
			ret = a->err;
			free(a);
			a = NULL;
		} else {
			dom->atomics = a;
		}
	}
	pthread_mutex_unlock(&dom->lock);
	*out = a;
	return ret ? ret : a->err;
}

void ffs_atomics_free(struct ffs_domain *dom)
{
	free(dom->atomics);
	dom->atomics = NULL;
}

/* valid answers for endpoints of type in dom: 0 with the count and the
 * datatype's size, or the error of fi_atomic(3)'s valid calls. */
static int valid(struct ffs_domain *dom, enum fi_ep_type type, enum kind k, enum fi_datatype dt, enum fi_op op,
		 size_t *count, size_t *size)
{
	struct ffs_atomics *a;
	int ret = atomics_of(dom, &a);
	if (ret)
		return ret;
	if ((unsigned)type >= NTYPE || !a->any[type])
		return -FI_ENOSYS;
	if ((unsigned)dt >= NDT || (unsigned)op >= NOP || !a->count[type][k][op][dt])
		return -FI_EOPNOTSUPP;
	if (count)
		*count = a->count[type][k][op][dt];
	if (size)
		*size = a->size[dt];
	return 0;
}

int ffs_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
		     struct fi_atomic_attr *attr, uint64_t flags)
{
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	if (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED))
		return -FI_EBADFLAGS;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EBADFLAGS; /* "may not both be set" */
	/* Atomics to tagged receive buffers: the tree has none. */
	if (flags & FI_TAGGED)
		return -FI_EOPNOTSUPP;
	enum kind k = (flags & FI_FETCH_ATOMIC) ? FETCH : (flags & FI_COMPARE_ATOMIC) ? COMPARE : BASE;
	/* The domain's endpoints are of the type of the info it was opened
	 * with; an endpoint of no type is FI_EP_MSG (ep.c). */
	enum fi_ep_type type = dom->info->ep_attr ? dom->info->ep_attr->type : FI_EP_UNSPEC;
	if (type == FI_EP_UNSPEC)
		type = FI_EP_MSG;
	if (!attr)
		return -FI_EINVAL;
	return valid(dom, type, k, datatype, op, &attr->count, &attr->size);
}

/* ---- the operations ---- */

static int ep_valid(struct fid_ep *ep, enum kind k, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	enum fi_ep_type type;
	uint64_t flags;
	struct ffs_domain *dom = ffs_ep_attrs(ep, &type, &flags);
	if (!count)
		return -FI_EINVAL;
	return valid(dom, type, k, dt, op, count, NULL);
}

static int writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	return ep_valid(ep, BASE, dt, op, count);
}

static int readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	return ep_valid(ep, FETCH, dt, op, count);
}

static int compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	return ep_valid(ep, COMPARE, dt, op, count);
}

/*
 * An atomic as the libfabric calls give it: one local segment each for
 * the operand, compare values and result (the ring takes one buffer of
 * each; a call with more is -FI_EINVAL), one remote one. The operand's
 * segment gives the element count, or the result's for FI_ATOMIC_READ,
 * whose operand "is ignored and may be NULL"; every other segment must
 * have as many elements.
 */
struct call {
	enum kind kind;
	const struct fi_msg_atomic *msg;
	const struct fi_ioc *comparev;
	void **compare_desc;
	size_t compare_count;
	struct fi_ioc *resultv;
	void **result_desc;
	size_t result_count;
	uint64_t flags;
	bool inject;
};

static const uint8_t ring_op[NKIND] = {FABRICFS_OP_ATOMIC, FABRICFS_OP_FETCH_ATOMIC, FABRICFS_OP_COMPARE_ATOMIC};

static ssize_t post_atomic(struct fid_ep *ep, const struct call *c)
{
	const struct fi_msg_atomic *m = c->msg;
	if (!m || !m->rma_iov || m->rma_iov_count != 1)
		return -FI_EINVAL;
	/* fi_atomic(3) lists no remote CQ data for atomics. */
	if (c->flags & FI_REMOTE_CQ_DATA)
		return -FI_EINVAL;
	bool no_operand = c->kind == FETCH && m->op == FI_ATOMIC_READ;
	if (c->kind != BASE && (c->result_count != 1 || !c->resultv))
		return -FI_EINVAL;
	if (c->kind == COMPARE && (c->compare_count != 1 || !c->comparev))
		return -FI_EINVAL;
	if (!no_operand && (m->iov_count != 1 || !m->msg_iov))
		return -FI_EINVAL;
	size_t count = no_operand ? c->resultv[0].count : m->msg_iov[0].count;
	if ((c->kind != BASE && c->resultv[0].count != count) ||
	    (c->kind == COMPARE && c->comparev[0].count != count) || m->rma_iov[0].count != count || count == 0)
		return -FI_EINVAL;
	if ((!no_operand && !m->msg_iov[0].addr) || (c->kind != BASE && !c->resultv[0].addr) ||
	    (c->kind == COMPARE && !c->comparev[0].addr))
		return -FI_EINVAL;
	enum fi_ep_type type;
	uint64_t op_flags;
	struct ffs_domain *dom = ffs_ep_attrs(ep, &type, &op_flags);
	size_t max, size;
	int ret = valid(dom, type, c->kind, m->datatype, m->op, &max, &size);
	if (ret)
		return ret;
	if (count > max)
		return -FI_EMSGSIZE;
	struct iovec iov = {no_operand ? NULL : m->msg_iov[0].addr, count * size};
	void *desc = !no_operand && m->desc ? m->desc[0] : NULL;
	struct ffs_op o = {
		.op = ring_op[c->kind],
		.iov = &iov,
		.desc = &desc,
		.count = 1,
		.addr = m->addr,
		.rma_addr = m->rma_iov[0].addr,
		.rma_key = m->rma_iov[0].key,
		.context = m->context,
		.flags = c->flags,
		.inject = c->inject,
		.datatype = (uint8_t)m->datatype,
		.atomic_op = (uint8_t)m->op,
	};
	if (c->kind != BASE) {
		o.result = c->resultv[0].addr;
		o.result_desc = c->result_desc ? c->result_desc[0] : NULL;
	}
	if (c->kind == COMPARE) {
		o.compare = c->comparev[0].addr;
		o.compare_desc = c->compare_desc ? c->compare_desc[0] : NULL;
	}
	return ffs_ep_post(ep, &o);
}

/* tx_flags are the endpoint's transmit op flags, for the calls without
 * flags of their own. */
static uint64_t tx_flags(struct fid_ep *ep)
{
	enum fi_ep_type type;
	uint64_t flags;
	ffs_ep_attrs(ep, &type, &flags);
	return flags;
}

/* Base atomics. */

static ssize_t atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags)
{
	return post_atomic(ep, &(struct call){.kind = BASE, .msg = msg, .flags = flags});
}

static ssize_t atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count, fi_addr_t dest,
			     uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_rma_ioc rma = {addr, count == 1 && iov ? iov[0].count : 0, key};
	struct fi_msg_atomic msg = {.msg_iov = iov, .desc = desc, .iov_count = count, .addr = dest, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op, .context = context};
	return post_atomic(ep, &(struct call){.kind = BASE, .msg = &msg, .flags = tx_flags(ep)});
}

static ssize_t atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc, fi_addr_t dest,
			    uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count};
	return atomic_writev(ep, &ioc, &desc, 1, dest, addr, key, dt, op, context);
}

/* fi_inject_atomic: the operand copied before it returns, no completion
 * (fi_atomic(3): "as if the FI_INJECT transfer flag were set, and
 * FI_COMPLETION were not"). */
static ssize_t atomic_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest, uint64_t addr,
			     uint64_t key, enum fi_datatype dt, enum fi_op op)
{
	struct fi_ioc ioc = {(void *)buf, count};
	struct fi_rma_ioc rma = {addr, count, key};
	struct fi_msg_atomic msg = {.msg_iov = &ioc, .iov_count = 1, .addr = dest, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op};
	return post_atomic(ep, &(struct call){.kind = BASE, .msg = &msg, .inject = true});
}

/* Fetch atomics. */

static ssize_t atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, struct fi_ioc *resultv,
				   void **result_desc, size_t result_count, uint64_t flags)
{
	return post_atomic(ep, &(struct call){.kind = FETCH, .msg = msg, .resultv = resultv,
					      .result_desc = result_desc, .result_count = result_count,
					      .flags = flags});
}

static ssize_t atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
				 struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest,
				 uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_rma_ioc rma = {addr, result_count == 1 && resultv ? resultv[0].count : 0, key};
	struct fi_msg_atomic msg = {.msg_iov = iov, .desc = desc, .iov_count = count, .addr = dest, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op, .context = context};
	return post_atomic(ep, &(struct call){.kind = FETCH, .msg = &msg, .resultv = resultv,
					      .result_desc = result_desc, .result_count = result_count,
					      .flags = tx_flags(ep)});
}

static ssize_t atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
				enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count}, res = {result, count};
	return atomic_readwritev(ep, &ioc, &desc, 1, &res, &result_desc, 1, dest, addr, key, dt, op, context);
}

/* Compare atomics. */

static ssize_t atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, const struct fi_ioc *comparev,
				   void **compare_desc, size_t compare_count, struct fi_ioc *resultv,
				   void **result_desc, size_t result_count, uint64_t flags)
{
	return post_atomic(ep, &(struct call){.kind = COMPARE, .msg = msg, .comparev = comparev,
					      .compare_desc = compare_desc, .compare_count = compare_count,
					      .resultv = resultv, .result_desc = result_desc,
					      .result_count = result_count, .flags = flags});
}

static ssize_t atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
				 const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
				 struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest,
				 uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_rma_ioc rma = {addr, count == 1 && iov ? iov[0].count : 0, key};
	struct fi_msg_atomic msg = {.msg_iov = iov, .desc = desc, .iov_count = count, .addr = dest, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = dt, .op = op, .context = context};
	return post_atomic(ep, &(struct call){.kind = COMPARE, .msg = &msg, .comparev = comparev,
					      .compare_desc = compare_desc, .compare_count = compare_count,
					      .resultv = resultv, .result_desc = result_desc,
					      .result_count = result_count, .flags = tx_flags(ep)});
}

static ssize_t atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc, const void *compare,
				void *compare_desc, void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
				uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count}, cmp = {(void *)compare, count}, res = {result, count};
	return atomic_compwritev(ep, &ioc, &desc, 1, &cmp, &compare_desc, 1, &res, &result_desc, 1, dest, addr, key,
				 dt, op, context);
}

struct fi_ops_atomic ffs_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = atomic_write,
	.writev = atomic_writev,
	.writemsg = atomic_writemsg,
	.inject = atomic_inject,
	.readwrite = atomic_readwrite,
	.readwritev = atomic_readwritev,
	.readwritemsg = atomic_readwritemsg,
	.compwrite = atomic_compwrite,
	.compwritev = atomic_compwritev,
	.compwritemsg = atomic_compwritemsg,
	.writevalid = writevalid,
	.readwritevalid = readwritevalid,
	.compwritevalid = compwritevalid,
};
