/*
 * atomic_test.c: atomic.c alone, over a tree of its own making (a
 * directory with the query_atomic files of docs/tree.md, no daemon): the
 * answers of fi_query_atomic and the valid calls as the file gives them,
 * and the operation each atomic call hands to ep.c (a stand-in here that
 * records it), with the errors the calls return before posting.
 */
#include "ffstest.h"

#include <sys/stat.h>

/* ep.c's stand-ins: the endpoint's domain, type and op flags, and the
 * last operation posted, copied (its iovec lives on atomic.c's stack). */
static struct ffs_domain *ep_dom;
static enum fi_ep_type ep_type = FI_EP_RDM;
static const uint64_t ep_flags = FI_DELIVERY_COMPLETE;
static struct ffs_op posted;
static struct iovec posted_iov;
static void *posted_desc;
static int posts;

ssize_t ffs_ep_post(struct fid_ep *ep, const struct ffs_op *o)
{
	posted = *o;
	posted_iov = o->iov[0];
	posted_desc = o->desc ? o->desc[0] : NULL;
	posts++;
	return 0;
}

struct ffs_domain *ffs_ep_attrs(struct fid_ep *ep, enum fi_ep_type *type, uint64_t *tx_op_flags)
{
	*type = ep_type;
	*tx_op_flags = ep_flags;
	return ep_dom;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		fprintf(stderr, "writing %s failed\n", path);
		exit(2);
	}
}

/* query is fi_query_atomic on dom: its return, and count and size. */
static int query(struct ffs_domain *dom, enum fi_datatype dt, enum fi_op op, uint64_t flags, size_t *count,
		 size_t *size)
{
	struct fi_atomic_attr attr = {0};
	int ret = ffs_query_atomic(&dom->domain_fid, dt, op, &attr, flags);
	*count = attr.count;
	*size = attr.size;
	return ret;
}

static void queries(struct ffs_domain *lo, struct ffs_domain *none)
{
	size_t count, size;
	int ret = query(lo, FI_UINT64, FI_SUM, 0, &count, &size);
	CHECK(ret == 0 && count == 8 && size == 8, "atomic FI_SUM FI_UINT64: %d count %zu size %zu", ret, count, size);
	ret = query(lo, FI_UINT64, FI_SUM, FI_FETCH_ATOMIC, &count, &size);
	CHECK(ret == 0 && count == 8 && size == 8, "fetch FI_SUM FI_UINT64: %d count %zu size %zu", ret, count, size);
	ret = query(lo, FI_UINT64, FI_CSWAP, FI_COMPARE_ATOMIC, &count, &size);
	CHECK(ret == 0 && count == 4 && size == 8, "compare FI_CSWAP FI_UINT64: %d count %zu size %zu", ret, count,
	      size);
	/* Names without FI_ and in any case, as the tree accepts them. */
	ret = query(lo, FI_UINT8, FI_SUM, 0, &count, &size);
	CHECK(ret == 0 && count == 100 && size == 1, "a line in lower case: %d count %zu size %zu", ret, count, size);
	ret = query(lo, FI_LONG_DOUBLE, FI_ATOMIC_READ, FI_FETCH_ATOMIC, &count, &size);
	CHECK(ret == 0 && count == 2 && size == 16, "fetch FI_ATOMIC_READ FI_LONG_DOUBLE: %d count %zu size %zu", ret,
	      count, size);
	/* Pairs without a line: "-FI_EOPNOTSUPP The requested atomic
	 * operation is not supported on this endpoint." */
	CHECK(query(lo, FI_INT32, FI_MIN, FI_FETCH_ATOMIC, &count, &size) == -FI_EOPNOTSUPP,
	      "fetch FI_MIN FI_INT32 (only a base line)");
	CHECK(query(lo, FI_UINT64, FI_BXOR, 0, &count, &size) == -FI_EOPNOTSUPP, "FI_BXOR: no line");
	CHECK(query(lo, (enum fi_datatype)99, FI_SUM, 0, &count, &size) == -FI_EOPNOTSUPP, "datatype 99");
	CHECK(query(lo, FI_UINT64, (enum fi_op)99, 0, &count, &size) == -FI_EOPNOTSUPP, "op 99");
	/* "The FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC bits may not both be
	 * set." */
	CHECK(query(lo, FI_UINT64, FI_SUM, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC, &count, &size) == -FI_EBADFLAGS,
	      "FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC");
	CHECK(query(lo, FI_UINT64, FI_SUM, FI_MSG, &count, &size) == -FI_EBADFLAGS, "flag FI_MSG");
	/* "If the FI_TAGGED bit is set, the provider will indicate if it
	 * supports atomic operations to tagged receive buffers": it does not. */
	CHECK(query(lo, FI_UINT64, FI_SUM, FI_TAGGED, &count, &size) == -FI_EOPNOTSUPP, "FI_TAGGED");
	CHECK(ffs_query_atomic(&lo->domain_fid, FI_UINT64, FI_SUM, NULL, 0) == -FI_EINVAL, "attr NULL");
	/* The lines that name nothing known are not used. */
	CHECK(query(lo, FI_INT16, FI_SUM, 0, &count, &size) == -FI_EOPNOTSUPP, "a line with 7 words was used");
	/* A domain whose endpoints of its type take no atomics, and one
	 * without the file: as libfabric's providers without atomics. */
	lo->info->ep_attr->type = FI_EP_DGRAM;
	CHECK(query(lo, FI_UINT64, FI_SUM, 0, &count, &size) == -FI_ENOSYS, "FI_EP_DGRAM, no lines: want -FI_ENOSYS");
	lo->info->ep_attr->type = FI_EP_RDM;
	CHECK(query(none, FI_UINT64, FI_SUM, 0, &count, &size) == -FI_ENOSYS, "no query_atomic: want -FI_ENOSYS");
}

static void calls(void)
{
	struct fid_ep ep = {.atomic = &ffs_atomic_ops};
	uint64_t buf[16] = {0}, cmp[16] = {0}, res[16] = {0};
	int d1, d2, d3, ctx;
	size_t count;

	/* fi_atomic: the operand's bytes, the remote buffer, the endpoint's
	 * op flags. */
	int n = posts;
	ssize_t ret = fi_atomic(&ep, buf, 3, &d1, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == 0 && posts == n + 1, "fi_atomic: %zd", ret);
	CHECK(posted.op == FABRICFS_OP_ATOMIC && posted.count == 1 && posted_iov.iov_base == buf &&
		      posted_iov.iov_len == 24 && posted_desc == &d1,
	      "fi_atomic posted op %u, %zu iovecs, base %p len %zu desc %p", posted.op, posted.count,
	      posted_iov.iov_base, posted_iov.iov_len, posted_desc);
	CHECK(posted.addr == 7 && posted.rma_addr == 64 && posted.rma_key == 0x99 && posted.context == &ctx &&
		      posted.flags == ep_flags && !posted.inject,
	      "fi_atomic posted addr %llu rma %llu key %#llx flags %#llx", (unsigned long long)posted.addr,
	      (unsigned long long)posted.rma_addr, (unsigned long long)posted.rma_key,
	      (unsigned long long)posted.flags);
	CHECK(posted.datatype == FI_UINT64 && posted.atomic_op == FI_SUM && !posted.result && !posted.compare,
	      "fi_atomic posted datatype %u op %u", posted.datatype, posted.atomic_op);

	/* "This must be between 1 and the maximum returned through the
	 * relevant valid operation, inclusive." */
	n = posts;
	ret = fi_atomic(&ep, buf, 9, NULL, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EMSGSIZE, "fi_atomic of 9 elements (count 8): %zd, want -FI_EMSGSIZE", ret);
	ret = fi_atomic(&ep, buf, 0, NULL, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_atomic of no elements: %zd", ret);
	ret = fi_atomic(&ep, buf, 1, NULL, 7, 64, 0x99, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(ret == -FI_EOPNOTSUPP, "fi_atomic FI_CSWAP: %zd", ret);
	struct fi_ioc two[2] = {{buf, 1}, {buf + 1, 1}};
	void *descs[2] = {NULL, NULL};
	ret = fi_atomicv(&ep, two, descs, 2, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_atomicv of 2 segments: %zd", ret);
	struct fi_rma_ioc rma = {64, 1, 0x99};
	struct fi_msg_atomic msg = {.msg_iov = two, .desc = descs, .iov_count = 1, .addr = 7, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM, .context = &ctx};
	ret = fi_atomicmsg(&ep, &msg, FI_REMOTE_CQ_DATA);
	CHECK(ret == -FI_EINVAL, "fi_atomicmsg with FI_REMOTE_CQ_DATA: %zd", ret);
	msg.rma_iov_count = 2;
	ret = fi_atomicmsg(&ep, &msg, 0);
	CHECK(ret == -FI_EINVAL, "fi_atomicmsg with 2 remote segments: %zd", ret);
	msg.rma_iov_count = 1;
	rma.count = 2;
	ret = fi_atomicmsg(&ep, &msg, 0);
	CHECK(ret == -FI_EINVAL, "fi_atomicmsg of 1 element to 2 remote ones: %zd", ret);
	CHECK(posts == n, "a refused call posted");
	rma.count = 1;
	ret = fi_atomicmsg(&ep, &msg, FI_COMPLETION | FI_INJECT);
	CHECK(ret == 0 && posted.flags == (FI_COMPLETION | FI_INJECT) && posted_iov.iov_len == 8,
	      "fi_atomicmsg: %zd flags %#llx", ret, (unsigned long long)posted.flags);

	/* fi_inject_atomic: "as if the FI_INJECT transfer flag were set, and
	 * FI_COMPLETION were not". */
	ret = fi_inject_atomic(&ep, buf, 2, 7, 64, 0x99, FI_UINT64, FI_SUM);
	CHECK(ret == 0 && posted.inject && posted.flags == 0 && !posted.context && posted_iov.iov_len == 16,
	      "fi_inject_atomic: %zd inject %d flags %#llx", ret, posted.inject, (unsigned long long)posted.flags);

	/* Fetch: "For FI_ATOMIC_READ operations, the source buffer operand
	 * (e.g. fi_fetch_atomic buf parameter) is ignored and may be NULL."
	 * The result's count gives the elements. */
	ret = fi_fetch_atomic(&ep, NULL, 2, NULL, res, &d2, 7, 64, 0x99, FI_LONG_DOUBLE, FI_ATOMIC_READ, &ctx);
	CHECK(ret == 0 && posted.op == FABRICFS_OP_FETCH_ATOMIC && posted.result == res && posted.result_desc == &d2 &&
		      posted_iov.iov_base == NULL && posted_iov.iov_len == 32,
	      "fi_fetch_atomic FI_ATOMIC_READ: %zd op %u result %p len %zu", ret, posted.op, posted.result,
	      posted_iov.iov_len);
	struct fi_ioc resv = {res, 2};
	struct fi_msg_atomic rmsg = {.addr = 7, .rma_iov = &(struct fi_rma_ioc){64, 2, 0x99}, .rma_iov_count = 1,
				     .datatype = FI_LONG_DOUBLE, .op = FI_ATOMIC_READ, .context = &ctx};
	ret = fi_fetch_atomicmsg(&ep, &rmsg, &resv, NULL, 1, 0);
	CHECK(ret == 0 && posted_iov.iov_len == 32, "fi_fetch_atomicmsg FI_ATOMIC_READ without an operand: %zd", ret);
	ret = fi_fetch_atomic(&ep, buf, 2, &d1, res, &d2, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == 0 && posted_iov.iov_base == buf && posted_desc == &d1 && posted.result == res,
	      "fi_fetch_atomic FI_SUM: %zd", ret);
	struct fi_ioc ioc = {buf, 2}, short_res = {res, 1};
	ret = fi_fetch_atomicv(&ep, &ioc, descs, 1, &short_res, descs, 1, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_fetch_atomicv with a result of fewer elements: %zd", ret);

	/* Compare. */
	ret = fi_compare_atomic(&ep, buf, 4, &d1, cmp, &d3, res, &d2, 7, 64, 0x99, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(ret == 0 && posted.op == FABRICFS_OP_COMPARE_ATOMIC && posted.compare == cmp &&
		      posted.compare_desc == &d3 && posted.result == res && posted.result_desc == &d2 &&
		      posted_iov.iov_len == 32,
	      "fi_compare_atomic: %zd op %u", ret, posted.op);
	struct fi_ioc cmpv = {cmp, 3}, resv4 = {res, 4}, ioc4 = {buf, 4};
	ret = fi_compare_atomicv(&ep, &ioc4, descs, 1, &cmpv, descs, 1, &resv4, descs, 1, 7, 64, 0x99, FI_UINT64,
				 FI_CSWAP, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_compare_atomicv with compare values of fewer elements: %zd", ret);
	ret = fi_compare_atomic(&ep, buf, 5, NULL, cmp, NULL, res, NULL, 7, 64, 0x99, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(ret == -FI_EMSGSIZE, "fi_compare_atomic of 5 elements (count 4): %zd", ret);
	/* Buffers the operation needs, missing. */
	n = posts;
	ret = fi_compare_atomic(&ep, buf, 1, NULL, NULL, NULL, res, NULL, 7, 64, 0x99, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_compare_atomic without compare values: %zd", ret);
	ret = fi_compare_atomic(&ep, buf, 1, NULL, cmp, NULL, NULL, NULL, 7, 64, 0x99, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_compare_atomic without a result buffer: %zd", ret);
	ret = fi_fetch_atomic(&ep, NULL, 1, NULL, res, NULL, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_fetch_atomic FI_SUM without an operand: %zd", ret);
	ret = fi_atomic(&ep, NULL, 1, NULL, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EINVAL, "fi_atomic without an operand: %zd", ret);
	CHECK(posts == n, "a call without its buffers posted");

	/* The valid calls: the answers for the endpoint's type. */
	CHECK(fi_atomicvalid(&ep, FI_UINT64, FI_SUM, &count) == 0 && count == 8, "fi_atomicvalid: count %zu", count);
	CHECK(fi_fetch_atomicvalid(&ep, FI_INT32, FI_MIN, &count) == -FI_EOPNOTSUPP, "fi_fetch_atomicvalid FI_MIN");
	CHECK(fi_compare_atomicvalid(&ep, FI_UINT64, FI_CSWAP, &count) == 0 && count == 4,
	      "fi_compare_atomicvalid: count %zu", count);
	ep_type = FI_EP_MSG;
	CHECK(fi_atomicvalid(&ep, FI_UINT64, FI_SUM, &count) == 0 && count == 1, "FI_EP_MSG fi_atomicvalid: count %zu",
	      count);
	ret = fi_atomic(&ep, buf, 2, NULL, 7, 64, 0x99, FI_UINT64, FI_SUM, &ctx);
	CHECK(ret == -FI_EMSGSIZE, "FI_EP_MSG fi_atomic of 2 elements (count 1): %zd", ret);
	ep_type = FI_EP_RDM;
}

int main(void)
{
	char root[] = "/tmp/atomic_test.XXXXXX";
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 2;
	}
	setenv("FI_FABRICFS_ROOT", root, 1);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/tcp", root);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/tcp/lo", root);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/tcp/none", root);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/tcp/lo/query_atomic", root);
	write_file(p, "FI_EP_MSG atomic FI_SUM FI_UINT64 1 8\n"
		      "FI_EP_RDM atomic FI_MIN FI_INT32 16 4\n"
		      "FI_EP_RDM atomic FI_SUM FI_UINT64 8 8\n"
		      "FI_EP_RDM fetch_atomic FI_SUM FI_UINT64 8 8\n"
		      "FI_EP_RDM fetch_atomic FI_ATOMIC_READ FI_LONG_DOUBLE 2 16\n"
		      "FI_EP_RDM compare_atomic FI_CSWAP FI_UINT64 4 8\n"
		      "fi_ep_rdm ATOMIC sum uint8 100 1\n"
		      "FI_EP_RDM atomic FI_SUM FI_INT16 1 2 extra\n"
		      "FI_EP_RDM atomic FI_SUM FI_FUTURE_TYPE 1 1\n"
		      "not a line\n");
	struct ffs_domain *lo = test_domain("tcp", "lo"), *none = test_domain("tcp", "none");
	lo->info->ep_attr->type = FI_EP_RDM;
	ep_dom = lo;
	queries(lo, none);
	calls();
	/* The file is read once per domain. */
	unlink(p);
	size_t count, size;
	CHECK(query(lo, FI_UINT64, FI_SUM, 0, &count, &size) == 0 && count == 8, "the answers were not kept");
	snprintf(p, sizeof p, "%s/tcp/lo", root);
	rmdir(p);
	snprintf(p, sizeof p, "%s/tcp/none", root);
	rmdir(p);
	snprintf(p, sizeof p, "%s/tcp", root);
	rmdir(p);
	rmdir(root);
	ffs_atomics_free(lo);
	ffs_atomics_free(none);
	return done("atomic");
}
