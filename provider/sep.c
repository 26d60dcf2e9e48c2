/*
 * sep.c: scalable endpoints (fi_endpoint(3), "SCALABLE ENDPOINTS").
 * fi_scalable_ep makes a tree endpoint with attr/scalable true and the
 * info's tx_ctx_cnt and rx_ctx_cnt; it binds an AV (fi_scalable_ep_bind),
 * is enabled, and has an address, but moves no data: its contexts do.
 * fi_tx_context and fi_rx_context make endpoints of ep.c that are its
 * contexts in the tree (ffs_ctx_open), each with its own rings and CQ
 * bindings, posting on the scalable endpoint's one tree provider endpoint.
 * A receive context is named by the high rx_ctx_bits of an fi_addr
 * (fi_rx_addr), which the tree's AV resolves (av.c sets them).
 */
#include "ffs.h"

#include <stdlib.h>
#include <sys/socket.h>

struct ffs_sep {
	struct fid_ep ep_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
	struct fi_info *info; /* what its contexts take: type, caps, attributes */
};

static struct ffs_sep *sep_of(struct fid *fid)
{
	return container_of(fid, struct ffs_sep, ep_fid.fid);
}

static int sep_close(struct fid *fid)
{
	struct ffs_sep *sep = sep_of(fid);
	/* The tree holds the endpoint while contexts of it are open: it goes
	 * when the last closes. */
	ffs_obj_close(&sep->obj);
	ffs_domain_hold(sep->dom, -1);
	fi_freeinfo(sep->info);
	free(sep);
	return 0;
}

/* sep_bind is fi_scalable_ep_bind: "Scalable endpoints may be bound to
 * address vectors [...]"; CQs and counters are bound to its contexts. */
static int sep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	if (!bfid)
		return -FI_EINVAL;
	if (bfid->fclass != FI_CLASS_AV)
		return -FI_ENOSYS;
	return ffs_ctl(&sep_of(fid)->obj, "bind av %u", container_of(bfid, struct ffs_av, av_fid.fid)->obj.id);
}

static int sep_control(struct fid *fid, int command, void *arg)
{
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	return ffs_ctl(&sep_of(fid)->obj, "enable");
}

static int sep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return ffs_name_get(&sep_of(fid)->obj, "local", addr, addrlen);
}

static int sep_setname(fid_t fid, void *addr, size_t addrlen)
{
	char a[128];
	int ret = ffs_addr_format(addr, addrlen, a, sizeof a);
	return ret ? ret : ffs_ctl(&sep_of(fid)->obj, "setname %s", a);
}

static int sep_tx_ctx(struct fid_ep *fid, int index, struct fi_tx_attr *attr, struct fid_ep **out, void *context)
{
	struct ffs_sep *sep = sep_of(&fid->fid);
	const struct fi_tx_attr *a = attr ? attr : sep->info->tx_attr;
	uint64_t caps = ((a && a->caps ? a->caps : sep->info->caps) & ~FI_RECV) | FI_SEND;
	return ffs_ctx_open(sep->dom, sep->info, sep->obj.id, false, index, caps, a ? a->op_flags : 0,
			    attr ? attr->size : 0, out, context);
}

static int sep_rx_ctx(struct fid_ep *fid, int index, struct fi_rx_attr *attr, struct fid_ep **out, void *context)
{
	struct ffs_sep *sep = sep_of(&fid->fid);
	const struct fi_rx_attr *a = attr ? attr : sep->info->rx_attr;
	uint64_t caps = ((a && a->caps ? a->caps : sep->info->caps) & ~FI_SEND) | FI_RECV;
	return ffs_ctx_open(sep->dom, sep->info, sep->obj.id, true, index, caps, a ? a->op_flags : 0,
			    attr ? attr->size : 0, out, context);
}

static struct fi_ops sep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = sep_close,
	.bind = sep_bind,
	.control = sep_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static int sep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return -FI_ENOPROTOOPT;
}

static struct fi_ops_ep sep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ffs_no_cancel,
	.getopt = sep_getopt,
	.setopt = ffs_no_setopt,
	.tx_ctx = sep_tx_ctx,
	.rx_ctx = sep_rx_ctx,
	.rx_size_left = ffs_no_size_left,
	.tx_size_left = ffs_no_size_left,
};

static struct fi_ops_cm sep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = sep_setname,
	.getname = sep_getname,
	.getpeer = ffs_no_getpeer,
	.connect = ffs_no_connect,
	.listen = ffs_no_listen,
	.accept = ffs_no_accept,
	.reject = ffs_no_reject,
	.shutdown = ffs_no_shutdown,
	.join = ffs_no_join,
};

/* ctx_cnt is a context count of the info: 0 asks for the default, 1. */
static size_t ctx_cnt(size_t n)
{
	return n ? n : 1;
}

int ffs_sep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out, void *context)
{
	if (!info || !out)
		return -FI_EINVAL;
	enum fi_ep_type type = info->ep_attr ? info->ep_attr->type : FI_EP_UNSPEC;
	if (type != FI_EP_RDM && type != FI_EP_DGRAM)
		return -FI_ENOSYS; /* the tree's scalable endpoints are connectionless */
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	struct ffs_sep *sep = calloc(1, sizeof *sep);
	if (!sep)
		return -FI_ENOMEM;
	sep->dom = dom;
	sep->obj.ctl = -1;
	int ret = -FI_ENOMEM;
	if (!(sep->info = fi_dupinfo(info)) || (ret = ffs_obj_clone(&sep->obj, dom->dir, "ep")) ||
	    (ret = ffs_set(&sep->obj, "attr/type", "%s", type == FI_EP_RDM ? "FI_EP_RDM" : "FI_EP_DGRAM")) ||
	    (ret = ffs_set(&sep->obj, "attr/scalable", "true")) || (ret = ffs_user_id_caps(&sep->obj, info)) ||
	    (ret = ffs_set(&sep->obj, "attr/tx_ctx_cnt", "%zu", ctx_cnt(info->ep_attr->tx_ctx_cnt))) ||
	    (ret = ffs_set(&sep->obj, "attr/rx_ctx_cnt", "%zu", ctx_cnt(info->ep_attr->rx_ctx_cnt))) ||
	    (info->tx_attr && info->tx_attr->size &&
	     (ret = ffs_set(&sep->obj, "attr/tx_size", "%zu", info->tx_attr->size))) ||
	    (info->rx_attr && info->rx_attr->size &&
	     (ret = ffs_set(&sep->obj, "attr/rx_size", "%zu", info->rx_attr->size))) ||
	    /* The source address, where it names a port, as ep.c's. */
	    (info->src_addr && info->src_addrlen >= sizeof(sa_family_t) && ffs_sockaddr_port(info->src_addr) &&
	     (ret = sep_setname(&sep->ep_fid.fid, info->src_addr, info->src_addrlen)))) {
		ffs_obj_close(&sep->obj);
		fi_freeinfo(sep->info);
		free(sep);
		return ret;
	}
	sep->ep_fid.fid.fclass = FI_CLASS_SEP;
	sep->ep_fid.fid.context = context;
	sep->ep_fid.fid.ops = &sep_fi_ops;
	sep->ep_fid.ops = &sep_ops;
	sep->ep_fid.cm = &sep_cm_ops;
	/* No data operation tables, as a passive endpoint has none: "the
	 * scalable endpoint itself" moves no data; its contexts do. */
	ffs_domain_hold(dom, 1);
	*out = &sep->ep_fid;
	return 0;
}
