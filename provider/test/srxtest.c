/*
 * srxtest: checks the fabricfs provider's shared contexts (fi_endpoint(3),
 * "SHARED CONTEXTS") through the libfabric API, with FI_EP_RDM endpoints:
 * fi_getinfo answers hints that ask for FI_SHARED_CONTEXT, and only those;
 * two endpoints a and b bound to one fi_srx_context and one
 * fi_stx_context take receives posted once on the receive context, each
 * completing on the CQ of the endpoint its message came to; tagged
 * receives on the context; their own receive calls and the context's send
 * calls fail; fi_cancel on the context; closing in the page's order.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric srxtest [DOMAIN]
 *
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

static struct fi_info *info;
static struct fid_domain *domain;
static struct fid_av *av;

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr;
};

/* cq_wait reads one entry of cq within 5 s into e: 0, or the positive
 * error of an error entry (e then has its context and flags). */
static int cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e, const char *what)
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
			memset(e, 0, sizeof *e);
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

/* open_node makes an endpoint with a CQ of its own, bound to the AV and,
 * if given, to the shared contexts. */
static void open_node(struct node *n, struct fid_ep *srx, struct fid_stx *stx)
{
	struct fi_cq_attr attr = {.size = 64, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &n->cq, NULL));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &av->fid, 0));
	if (stx)
		CHECK(fi_ep_bind(n->ep, &stx->fid, 0));
	if (srx)
		CHECK(fi_ep_bind(n->ep, &srx->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(n->ep));
	char name[128];
	size_t len = sizeof name;
	CHECK(fi_getname(&n->ep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &n->addr, 0, NULL) != 1)
		fail("fi_av_insert");
}

/* sent waits for the send completion of x. */
static void sent(struct node *x, void *ctx)
{
	struct fi_cq_tagged_entry e;
	if (cq_wait(x->cq, &e, "send") || e.op_context != ctx)
		fail("send completion: context %p, want %p", e.op_context, ctx);
}

/* received waits for a receive completion on n's CQ with context ctx and
 * checks the bytes that came into buf. */
static void received(struct node *n, void *ctx, const char *buf, const char *want, const char *what)
{
	struct fi_cq_tagged_entry e;
	int err = cq_wait(n->cq, &e, what);
	if (err || e.op_context != ctx || !(e.flags & FI_RECV) || e.len != strlen(want) + 1 || strcmp(buf, want))
		fail("%s: completion err %d context %p (want %p) len %zu, bytes '%s' (want '%s')", what, err, e.op_context,
		     ctx, e.len, buf, want);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dom = argc > 1 ? argv[1] : "tcp/lo";
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(dom);

	/* "If the count is set to the value FI_SHARED_CONTEXT, the endpoint
	 * will be configured to use a shared [...] context": only then. */
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (info->ep_attr->tx_ctx_cnt == FI_SHARED_CONTEXT || info->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT)
		fail("an entry for hints without FI_SHARED_CONTEXT has it");
	fi_freeinfo(info);
	hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT || info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT ||
	    !info->domain_attr->max_ep_stx_ctx || !info->domain_attr->max_ep_srx_ctx)
		fail("entry for FI_SHARED_CONTEXT: tx_ctx_cnt %zu rx_ctx_cnt %zu max_ep_stx_ctx %zu max_ep_srx_ctx %zu",
		     info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt, info->domain_attr->max_ep_stx_ctx,
		     info->domain_attr->max_ep_srx_ctx);
	printf("ok getinfo\n");

	struct fid_fabric *fabric;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	struct fid_ep *srx;
	struct fid_stx *stx;
	CHECK(fi_srx_context(domain, info->rx_attr, &srx, NULL));
	CHECK(fi_stx_context(domain, info->tx_attr, &stx, NULL));
	struct node a, b, x;
	open_node(&a, srx, stx);
	open_node(&b, srx, stx);
	open_node(&x, NULL, NULL);

	/* "Users post receive buffers directly to a shared receive context":
	 * not to its endpoints; and a receive context does not send. */
	char r[4][16] = {""};
	int c[4], s[4];
	ssize_t ret = fi_recv(a.ep, r[0], sizeof r[0], NULL, FI_ADDR_UNSPEC, &c[0]);
	if (ret != -FI_EOPNOTSUPP)
		fail("fi_recv on an endpoint bound to a receive context: %zd, want -FI_EOPNOTSUPP", ret);
	if ((ret = fi_send(srx, "x", 2, NULL, a.addr, &s[0])) != -FI_ENOSYS)
		fail("fi_send on a receive context: %zd, want -FI_ENOSYS", ret);
	printf("ok receives on the context only\n");

	/* "the buffers usable by any endpoint bound to the shared receive
	 * context [...] Completed receive operations are posted to the CQs
	 * bound to the endpoint." */
	CHECK(fi_recv(srx, r[0], sizeof r[0], NULL, FI_ADDR_UNSPEC, &c[0]));
	CHECK(fi_recv(srx, r[1], sizeof r[1], NULL, FI_ADDR_UNSPEC, &c[1]));
	CHECK(fi_send(x.ep, "to b", 5, NULL, b.addr, &s[0]));
	sent(&x, &s[0]);
	received(&b, &c[0], r[0], "to b", "b's message");
	CHECK(fi_send(x.ep, "to a", 5, NULL, a.addr, &s[1]));
	sent(&x, &s[1]);
	received(&a, &c[1], r[1], "to a", "a's message");
	printf("ok a receive posted once takes whichever endpoint's message\n");

	CHECK(fi_trecv(srx, r[2], sizeof r[2], NULL, FI_ADDR_UNSPEC, 0x7700, 0xff, &c[2]));
	CHECK(fi_tsend(x.ep, "tagged", 7, NULL, a.addr, 0x7712, &s[2]));
	sent(&x, &s[2]);
	received(&a, &c[2], r[2], "tagged", "tagged message");
	printf("ok tagged receive on the context\n");

	/* fi_cancel: the receive completes with FI_ECANCELED, on the CQ of
	 * the first endpoint bound (the context has none of its own). */
	CHECK(fi_recv(srx, r[3], sizeof r[3], NULL, FI_ADDR_UNSPEC, &c[3]));
	CHECK(fi_cancel(&srx->fid, &c[3]));
	struct fi_cq_tagged_entry e;
	int err = cq_wait(a.cq, &e, "cancel");
	if (err != FI_ECANCELED || e.op_context != &c[3])
		fail("cancelled receive: err %d context %p, want FI_ECANCELED %p", err, e.op_context, &c[3]);
	printf("ok fi_cancel on the context\n");

	/* Endpoints first: they hold the contexts. */
	if ((ret = fi_close(&srx->fid)) != -FI_EBUSY)
		fail("fi_close of a receive context bound to endpoints: %zd, want -FI_EBUSY", ret);
	struct node *nodes[] = {&a, &b, &x};
	for (int i = 0; i < 3; i++)
		CHECK(fi_close(&nodes[i]->ep->fid));
	CHECK(fi_close(&srx->fid));
	CHECK(fi_close(&stx->fid));
	for (int i = 0; i < 3; i++)
		CHECK(fi_close(&nodes[i]->cq->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("ok close\nPASS\n");
	return 0;
}
