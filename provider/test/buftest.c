/*
 * buftest: checks the fabricfs provider's buffered receives (fi_msg(3),
 * "Buffered Receives") on FI_EP_RDM through the libfabric API: an entry
 * with FI_BUFFERED_RECV in its mode, a receiver whose FI_OPT_BUFFERED_LIMIT
 * is 64 bytes, reports of a short and a long message (the report's
 * struct fi_recv_context, len, flags and the bytes at buf), the long one
 * claimed into the application's buffer and the short one discarded, with
 * their completions, and a second claim of a claimed report refused.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric buftest [DOMAIN]
 *
 * DOMAIN is the info's domain name (default tcp/lo). Prints one "ok NAME"
 * line per check and "PASS" at the end, and exits 0; on a failure it
 * prints "FAIL: ..." and exits 1. tests/provider_test.go runs it.
 */
#include "fitest.h"

#define LIMIT 64
#define SHORT 40
#define LONG 500

static struct fid_domain *domain;
static struct fid_av *av;

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr;
};

/* open_node makes an endpoint of info bound to the AV and a CQ of its
 * own; limit, if not 0, is its FI_OPT_BUFFERED_LIMIT, set before enable
 * ("Any adjustments must be made prior to enabling the endpoint"). */
static void open_node(struct node *n, struct fi_info *info, size_t limit)
{
	struct fi_cq_attr attr = {.size = 64, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &n->cq, NULL));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &av->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	if (limit)
		CHECK(fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &limit, sizeof limit));
	CHECK(fi_enable(n->ep));
	char name[128];
	size_t len = sizeof name;
	CHECK(fi_getname(&n->ep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &n->addr, 0, NULL) != 1)
		fail("fi_av_insert");
}

/* report reads the report of a message of len bytes (seed) on b: "the CQ
 * entry op_context will point to a struct fi_recv_context. ... The `ep'
 * field will point to the receiving endpoint or Rx context, and `context'
 * will be NULL. The CQ entry's `buf' will point to a provider managed
 * buffer where the start of the received message is located, and `len'
 * will be set to the total size of the message." "If the sent message is
 * larger than the buffered amount, the CQ entry `flags' will have the
 * FI_MORE bit set." */
static struct fi_recv_context *report(struct node *b, size_t len, size_t seed)
{
	struct fi_cq_tagged_entry e;
	cq_take(b->cq, &e, NULL, "report");
	struct fi_recv_context *rc = e.op_context;
	if (!rc || rc->ep != b->ep || rc->context)
		fail("report of %zu bytes: op_context %p is not a struct fi_recv_context of the endpoint", len, e.op_context);
	if (e.len != len || !(e.flags & FI_RECV) || !(e.flags & FI_MSG))
		fail("report of %zu bytes: len %zu, flags %#llx", len, e.len, (unsigned long long)e.flags);
	size_t shown = len < LIMIT ? len : LIMIT;
	if (!!(e.flags & FI_MORE) != (len > LIMIT))
		fail("report of %zu bytes with limit %d: flags %#llx, FI_MORE wrong", len, LIMIT,
		     (unsigned long long)e.flags);
	if (!e.buf)
		fail("report of %zu bytes: no buf", len);
	check_bytes(e.buf, shown, seed, "the report's buf");
	return rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct fi_info *hints = fi_allocinfo(), *info, *plain;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(argc > 1 ? argv[1] : "tcp/lo");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &plain));
	if (plain->mode & FI_BUFFERED_RECV)
		fail("hints without FI_BUFFERED_RECV got an entry with it");
	/* fi_getinfo(3): "Applications that can handle message processing
	 * from network allocated data buffers can set this mode bit". */
	hints->mode = FI_BUFFERED_RECV;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (!(info->mode & FI_BUFFERED_RECV))
		fail("hints with FI_BUFFERED_RECV: mode %#llx", (unsigned long long)info->mode);
	printf("ok getinfo mode\n");

	struct fid_fabric *fabric;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	struct node a, b;
	open_node(&a, plain, 0);
	open_node(&b, info, LIMIT);
	size_t limit = 0, optlen = sizeof limit;
	CHECK(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &limit, &optlen));
	if (limit != LIMIT)
		fail("FI_OPT_BUFFERED_LIMIT reads %zu after setting %d", limit, LIMIT);

	uint8_t tx[LONG];
	int sctx;
	struct fi_cq_tagged_entry e;
	for (size_t i = 0; i < LONG; i++)
		tx[i] = pattern(1, i);
	CHECK(fi_send(a.ep, tx, SHORT, NULL, b.addr, &sctx));
	cq_take(a.cq, &e, NULL, "send");
	for (size_t i = 0; i < LONG; i++)
		tx[i] = pattern(2, i);
	CHECK(fi_send(a.ep, tx, LONG, NULL, b.addr, &sctx));
	cq_take(a.cq, &e, NULL, "send");
	struct fi_recv_context *rshort = report(&b, SHORT, 1);
	struct fi_recv_context *rlong = report(&b, LONG, 2);
	printf("ok reports\n");

	/* "To claim a message, an application must post a receive operation
	 * with the FI_CLAIM flag set. The struct fi_recv_context returned as
	 * part of the notification must be provided as the receive
	 * operation's context. ... When the claim operation completes, a
	 * standard receive completion entry will be generated on the
	 * completion queue. The `context' of the associated CQ entry will be
	 * set to the `context' value passed in through the fi_recv_context
	 * structure, and the CQ entry flags will have the FI_CLAIM bit set." */
	uint8_t rx[LONG + 16] = {0};
	int claim_ctx;
	rlong->context = &claim_ctx;
	struct iovec iov = {rx, sizeof rx};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = rlong};
	CHECK(fi_recvmsg(b.ep, &msg, FI_CLAIM));
	cq_take(b.cq, &e, NULL, "claim");
	if (e.op_context != &claim_ctx || e.len != LONG || !(e.flags & FI_CLAIM) || !(e.flags & FI_RECV))
		fail("claim completion: context %p (want %p), len %zu, flags %#llx", e.op_context, (void *)&claim_ctx,
		     e.len, (unsigned long long)e.flags);
	check_bytes(rx, LONG, 2, "claimed");
	printf("ok claim\n");

	/* "To discard a message, an application must post a receive operation
	 * with the FI_DISCARD flag set. ... When the FI_DISCARD flag is set
	 * for a receive operation, the receive input buffer(s) and length
	 * parameters are ignored." */
	int discard_ctx;
	rshort->context = &discard_ctx;
	struct fi_msg dmsg = {.addr = FI_ADDR_UNSPEC, .context = rshort};
	CHECK(fi_recvmsg(b.ep, &dmsg, FI_DISCARD));
	cq_take(b.cq, &e, NULL, "discard");
	if (e.op_context != &discard_ctx || e.len != 0)
		fail("discard completion: context %p (want %p), len %zu", e.op_context, (void *)&discard_ctx, e.len);
	printf("ok discard\n");

	/* "Once a buffered receive has been claimed or discarded, the original
	 * CQ entry `buf' or struct fi_recv_context data may no longer be
	 * accessed by the application": the provider takes it no more. */
	if (fi_recvmsg(b.ep, &msg, FI_CLAIM) != -FI_EINVAL)
		fail("a second claim of a claimed report: want -FI_EINVAL");
	printf("ok claimed once\n");

	CHECK(fi_close(&a.ep->fid));
	CHECK(fi_close(&b.ep->fid));
	CHECK(fi_close(&a.cq->fid));
	CHECK(fi_close(&b.cq->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(plain);
	fi_freeinfo(hints);
	printf("PASS\n");
	return 0;
}
