/*
 * septest: checks the fabricfs provider's scalable endpoints (fi_endpoint(3),
 * "SCALABLE ENDPOINTS") through the libfabric API, FI_EP_RDM: fi_getinfo
 * answers hints asking for 4 transmit and 4 receive contexts with
 * FI_NAMED_RX_CTX; fi_scalable_ep with those counts, bound to an AV with
 * rx_ctx_bits 2 (fi_scalable_ep_bind); 4 fi_tx_context and 4 fi_rx_context,
 * each bound to a CQ of its own; transmit context i sends to receive
 * context 3-i of the endpoint itself, named with fi_rx_addr, and each
 * receive context's CQ reports the message sent to it; the refused calls;
 * closing, contexts first. Then fi_ep_alias: an alias with FI_COMPLETION
 * of an endpoint whose transmit binding is selective reports its sends on
 * the endpoint's CQ, the endpoint's own sends none. Then fi_tx_size_left,
 * fi_rx_size_left and fi_control's FI_BACKLOG.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric septest [DOMAIN]
 *
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

#define N 4
#define BITS 2

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dom = argc > 1 ? argv[1] : "tcp/lo";
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_NAMED_RX_CTX;
	hints->ep_attr->tx_ctx_cnt = N;
	hints->ep_attr->rx_ctx_cnt = N;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(dom);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (!(info->caps & FI_NAMED_RX_CTX) || info->ep_attr->tx_ctx_cnt != N || info->ep_attr->rx_ctx_cnt != N ||
	    info->domain_attr->max_ep_tx_ctx < N || info->domain_attr->max_ep_rx_ctx < N)
		fail("entry for %d contexts: caps %#llx tx_ctx_cnt %zu rx_ctx_cnt %zu max_ep_tx_ctx %zu max_ep_rx_ctx %zu", N,
		     (unsigned long long)info->caps, info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt,
		     info->domain_attr->max_ep_tx_ctx, info->domain_attr->max_ep_rx_ctx);
	printf("ok getinfo\n");

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *sep, *tx[N], *rx[N];
	struct fid_cq *txcq[N], *rxcq[N];
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .rx_ctx_bits = BITS};
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	CHECK(fi_scalable_ep(domain, info, &sep, NULL));
	CHECK(fi_scalable_ep_bind(sep, &av->fid, 0));
	struct fi_cq_attr cqa = {.size = 16, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	for (int i = 0; i < N; i++) {
		CHECK(fi_tx_context(sep, i, NULL, &tx[i], NULL));
		CHECK(fi_rx_context(sep, i, NULL, &rx[i], NULL));
		if (tx[i]->fid.fclass != FI_CLASS_TX_CTX || rx[i]->fid.fclass != FI_CLASS_RX_CTX)
			fail("context %d: classes %zu and %zu", i, tx[i]->fid.fclass, rx[i]->fid.fclass);
		CHECK(fi_cq_open(domain, &cqa, &txcq[i], NULL));
		CHECK(fi_cq_open(domain, &cqa, &rxcq[i], NULL));
		CHECK(fi_ep_bind(tx[i], &txcq[i]->fid, FI_TRANSMIT));
		CHECK(fi_ep_bind(rx[i], &rxcq[i]->fid, FI_RECV));
		CHECK(fi_enable(tx[i]));
		CHECK(fi_enable(rx[i]));
	}
	struct fid_ep *extra;
	ssize_t ret = fi_tx_context(sep, N, NULL, &extra, NULL);
	if (ret != -FI_EINVAL)
		fail("fi_tx_context %d of %d: %zd, want -FI_EINVAL", N, N, ret);
	if ((ret = fi_rx_context(sep, 0, NULL, &extra, NULL)) != -FI_EBUSY)
		fail("fi_rx_context 0 twice: %zd, want -FI_EBUSY", ret);
	CHECK(fi_enable(sep));
	printf("ok %d transmit and %d receive contexts\n", N, N);

	char name[128];
	size_t len = sizeof name;
	fi_addr_t self;
	CHECK(fi_getname(&sep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1)
		fail("fi_av_insert");

	/* "Receive contexts of a scalable endpoint may be addressed by the
	 * sender using fi_rx_addr": receive context j's buffer gets transmit
	 * context 3-j's message. */
	char buf[N][16], msg[N][16];
	int rctx[N], sctx[N];
	for (int j = 0; j < N; j++) {
		memset(buf[j], 0, sizeof buf[j]);
		CHECK(fi_recv(rx[j], buf[j], sizeof buf[j], NULL, FI_ADDR_UNSPEC, &rctx[j]));
	}
	if ((ret = fi_send(rx[0], "x", 2, NULL, self, &sctx[0])) != -FI_EOPNOTSUPP)
		fail("fi_send on a receive context: %zd, want -FI_EOPNOTSUPP", ret);
	if ((ret = fi_recv(tx[0], buf[0], sizeof buf[0], NULL, FI_ADDR_UNSPEC, &rctx[0])) != -FI_EOPNOTSUPP)
		fail("fi_recv on a transmit context: %zd, want -FI_EOPNOTSUPP", ret);
	for (int i = 0; i < N; i++) {
		snprintf(msg[i], sizeof msg[i], "from %d", i);
		CHECK(fi_send(tx[i], msg[i], strlen(msg[i]) + 1, NULL, fi_rx_addr(self, N - 1 - i, BITS), &sctx[i]));
	}
	struct fi_cq_tagged_entry e_;
	for (int i = 0; i < N; i++) {
		cq_take(txcq[i], &e_, NULL, "send");
		if (e_.op_context != &sctx[i] || !(e_.flags & FI_SEND))
			fail("transmit context %d: completion context %p flags %#llx", i, e_.op_context,
			     (unsigned long long)e_.flags);
	}
	for (int j = 0; j < N; j++) {
		cq_take(rxcq[j], &e_, NULL, "receive");
		if (e_.op_context != &rctx[j] || !(e_.flags & FI_RECV) || strcmp(buf[j], msg[N - 1 - j]))
			fail("receive context %d: completion context %p (want %p), bytes '%s' (want '%s')", j, e_.op_context,
			     &rctx[j], buf[j], msg[N - 1 - j]);
	}
	printf("ok each receive context gets the message fi_rx_addr sent it\n");

	/* fi_tx_size_left and fi_rx_size_left on the contexts: every entry
	 * of their rings is free again. Called through the ops table, which
	 * is what the deprecated inline functions do, without -Werror's
	 * deprecation. */
	ssize_t txl = tx[0]->ops->tx_size_left(tx[0]), rxl = rx[0]->ops->rx_size_left(rx[0]);
	if (txl < (ssize_t)info->tx_attr->size || rxl < (ssize_t)info->rx_attr->size)
		fail("size left: tx %zd (tx_size %zu), rx %zd (rx_size %zu)", txl, info->tx_attr->size, rxl,
		     info->rx_attr->size);
	printf("ok fi_tx_size_left, fi_rx_size_left\n");

	for (int i = 0; i < N; i++) {
		CHECK(fi_close(&tx[i]->fid));
		CHECK(fi_close(&rx[i]->fid));
		CHECK(fi_close(&txcq[i]->fid));
		CHECK(fi_close(&rxcq[i]->fid));
	}
	CHECK(fi_close(&sep->fid));
	CHECK(fi_close(&av->fid));

	/* "An alias EP differs from its parent endpoint only by its default
	 * data transfer flags. For example, an alias EP may be configured to
	 * use a different completion mode." */
	struct fi_info *ainfo = fi_dupinfo(info);
	ainfo->ep_attr->tx_ctx_cnt = ainfo->ep_attr->rx_ctx_cnt = 1;
	ainfo->tx_attr->op_flags = 0;
	struct fi_av_attr plain = {.type = FI_AV_TABLE};
	struct fid_ep *e, *al;
	struct fid_cq *cq;
	CHECK(fi_av_open(domain, &plain, &av, NULL));
	CHECK(fi_cq_open(domain, &cqa, &cq, NULL));
	CHECK(fi_endpoint(domain, ainfo, &e, NULL));
	CHECK(fi_ep_bind(e, &av->fid, 0));
	CHECK(fi_ep_bind(e, &cq->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION));
	CHECK(fi_ep_bind(e, &cq->fid, FI_RECV));
	if ((ret = fi_ep_alias(e, &al, FI_TRANSMIT | FI_COMPLETION)) != -FI_EOPBADSTATE)
		fail("fi_ep_alias before enable: %zd, want -FI_EOPBADSTATE", ret);
	CHECK(fi_enable(e));
	if ((ret = fi_ep_alias(e, &al, FI_TRANSMIT | FI_RECV)) != -FI_EINVAL)
		fail("fi_ep_alias with FI_TRANSMIT|FI_RECV: %zd, want -FI_EINVAL", ret);
	CHECK(fi_ep_alias(e, &al, FI_TRANSMIT | FI_COMPLETION));
	len = sizeof name;
	CHECK(fi_getname(&e->fid, name, &len));
	if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1)
		fail("fi_av_insert");
	CHECK(fi_recv(e, buf[0], sizeof buf[0], NULL, FI_ADDR_UNSPEC, &rctx[0]));
	CHECK(fi_recv(e, buf[1], sizeof buf[1], NULL, FI_ADDR_UNSPEC, &rctx[1]));
	CHECK(fi_send(e, "parent", 7, NULL, self, &sctx[0]));
	CHECK(fi_send(al, "alias", 6, NULL, self, &sctx[1]));
	int recvs = 0, sends = 0;
	for (int i = 0; i < 3; i++) {
		cq_take(cq, &e_, NULL, "alias test");
		if (e_.flags & FI_RECV)
			recvs++;
		else if (e_.op_context == &sctx[1])
			sends++;
		else
			fail("completion context %p flags %#llx: the parent's send reported", e_.op_context,
			     (unsigned long long)e_.flags);
	}
	usleep(100000);
	if (recvs != 2 || sends != 1 || fi_cq_read(cq, &e_, 1) != -FI_EAGAIN)
		fail("alias test: %d receives, %d sends, or more entries", recvs, sends);
	CHECK(fi_close(&al->fid));
	CHECK(fi_close(&e->fid));
	CHECK(fi_close(&cq->fid));
	CHECK(fi_close(&av->fid));
	fi_freeinfo(ainfo);
	printf("ok fi_ep_alias\n");

	/* fi_control FI_BACKLOG on a passive endpoint (FI_EP_MSG). */
	struct fi_info *mhints = fi_dupinfo(hints), *minfo;
	mhints->ep_attr->type = FI_EP_MSG;
	mhints->caps = FI_MSG;
	mhints->ep_attr->tx_ctx_cnt = mhints->ep_attr->rx_ctx_cnt = 0;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, mhints, &minfo));
	struct fid_pep *pep;
	CHECK(fi_passive_ep(fabric, minfo, &pep, NULL));
	int backlog = 8;
	CHECK(fi_control(&pep->fid, FI_BACKLOG, &backlog));
	backlog = 0;
	if ((ret = fi_control(&pep->fid, FI_BACKLOG, &backlog)) != -FI_EINVAL)
		fail("FI_BACKLOG 0: %zd, want -FI_EINVAL", ret);
	CHECK(fi_close(&pep->fid));
	fi_freeinfo(minfo);
	fi_freeinfo(mhints);
	printf("ok fi_control FI_BACKLOG\n");
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("ok close\nPASS\n");
	return 0;
}
