/*
 * srx.c: shared contexts (fi_endpoint(3), "SHARED CONTEXTS"). A shared
 * transmit context is a tree stx (stx/N): "operations are posted directly
 * to the endpoint", so it holds no queue here either; endpoints bind it
 * (ep.c, fi_ep_bind) and send through their own tx rings, as the tree
 * does. A shared receive context is an endpoint of ep.c of the tree kind
 * srx (ffs_srx_open), since it posts, stages and completes receives as an
 * endpoint does.
 */
#include "ffs.h"

#include <stdlib.h>

static int stx_close(struct fid *fid)
{
	struct ffs_stx *stx = container_of(fid, struct ffs_stx, stx_fid.fid);
	/* The tree refuses to close a context bound to an endpoint (its
	 * endpoints hold it): closing the clone file ends it once they are
	 * closed. */
	ffs_obj_close(&stx->obj);
	ffs_domain_hold(stx->dom, -1);
	free(stx);
	return 0;
}

static struct fi_ops stx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = stx_close,
	.bind = ffs_no_bind,
	.control = ffs_no_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static int stx_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return -FI_ENOPROTOOPT;
}

static struct fi_ops_ep stx_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ffs_no_cancel,
	.getopt = stx_getopt,
	.setopt = ffs_no_setopt,
	.tx_ctx = ffs_no_tx_ctx,
	.rx_ctx = ffs_no_rx_ctx,
	.rx_size_left = ffs_no_size_left,
	.tx_size_left = ffs_no_size_left,
};

int ffs_stx_open(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **out, void *context)
{
	if (!out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	struct ffs_stx *stx = calloc(1, sizeof *stx);
	if (!stx)
		return -FI_ENOMEM;
	int ret = ffs_obj_clone(&stx->obj, dom->dir, "stx");
	if (!ret && attr && attr->size)
		ret = ffs_set(&stx->obj, "attr/size", "%zu", attr->size);
	if (ret) {
		ffs_obj_close(&stx->obj);
		free(stx);
		return ret;
	}
	stx->dom = dom;
	stx->stx_fid.fid.fclass = FI_CLASS_STX_CTX;
	stx->stx_fid.fid.context = context;
	stx->stx_fid.fid.ops = &stx_fi_ops;
	stx->stx_fid.ops = &stx_ops;
	ffs_domain_hold(dom, 1);
	*out = &stx->stx_fid;
	return 0;
}
