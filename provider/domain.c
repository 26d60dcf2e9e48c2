/*
 * domain.c: fi_domain. A domain is a directory of the tree (ROOT/PROV/DOM,
 * named by the info's domain name); it is no tree object of its own, so
 * opening one makes nothing in the daemon. It holds the list of its CQs,
 * which ffs_domain_progress reaps, and counts its other objects, so that
 * fi_close refuses while any is open. The process's open domains are in a
 * list of their own, oldest first, for fi_getinfo's domain_attr->domain.
 */
#include "ffs.h"

#include <stdlib.h>
#include <string.h>

/* The open domains, in the order they were opened (next_open). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ffs_domain *open_domains;

struct fid_domain *ffs_domain_opened(const char *name)
{
	struct fid_domain *d = NULL;
	pthread_mutex_lock(&open_lock);
	for (struct ffs_domain *dom = open_domains; dom && !d && name; dom = dom->next_open)
		if (!strcmp(dom->info->domain_attr->name, name))
			d = &dom->domain_fid;
	pthread_mutex_unlock(&open_lock);
	return d;
}

void ffs_domain_hold(struct ffs_domain *dom, int delta)
{
	__atomic_add_fetch(&dom->objs, delta, __ATOMIC_SEQ_CST);
}

int ffs_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

int ffs_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

int ffs_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}

int ffs_no_tostr(const struct fid *fid, char *buf, size_t len)
{
	return -FI_ENOSYS;
}

int ffs_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	return -FI_ENOSYS;
}

static int no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			       struct fi_collective_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int no_endpoint2(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, uint64_t flags,
			void *context)
{
	return -FI_ENOSYS;
}

/* domain_bind is fi_domain_bind: the EQ becomes the default EQ of the
 * domain's endpoints (bound at fi_enable to those bound to none, as
 * libfabric's util endpoints take their domain's at creation), and with
 * FI_REG_MR each registration reports FI_MR_COMPLETE there (mr.c). The
 * registration itself stays synchronous, as in libfabric's verbs: "the
 * completion reported through the event queue" (fi_domain(3)) follows it. */
static int domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ffs_domain *dom = container_of(fid, struct ffs_domain, domain_fid.fid);
	struct ffs_eq *eq = ffs_eq_of(bfid);
	if (!eq)
		return -FI_EINVAL;
	if (flags & ~FI_REG_MR)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&dom->lock);
	int ret = 0;
	if (dom->eq) {
		ret = -FI_EINVAL; /* one EQ per domain, as libfabric's */
	} else {
		ffs_eq_hold(eq, 1);
		dom->reg_mr_events = flags & FI_REG_MR;
		__atomic_store_n(&dom->eq, eq, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dom->lock);
	return ret;
}

static int domain_close(struct fid *fid)
{
	struct ffs_domain *dom = container_of(fid, struct ffs_domain, domain_fid.fid);
	pthread_mutex_lock(&dom->cq_lock);
	bool busy = __atomic_load_n(&dom->objs, __ATOMIC_SEQ_CST) > 0;
	for (struct ffs_cq *cq = dom->cqs; cq; cq = cq->next)
		busy = busy || !cq->hidden;
	pthread_mutex_unlock(&dom->cq_lock);
	pthread_mutex_lock(&dom->lock);
	busy = busy || dom->mrs != NULL;
	pthread_mutex_unlock(&dom->lock);
	if (busy)
		return -FI_EBUSY;
	pthread_mutex_lock(&open_lock);
	struct ffs_domain **p = &open_domains;
	while (*p && *p != dom)
		p = &(*p)->next_open;
	if (*p)
		*p = dom->next_open;
	pthread_mutex_unlock(&open_lock);
	/* Hidden CQs left are those of endpoints closed while the daemon held
	 * their requests (ep.c): nothing reaps them any more. */
	while (dom->cqs)
		ffs_cq_free(dom->cqs);
	ffs_atomics_free(dom);
	if (dom->eq)
		ffs_eq_hold(dom->eq, -1);
	pthread_mutex_destroy(&dom->lock);
	pthread_mutex_destroy(&dom->cq_lock);
	pthread_mutex_destroy(&dom->bep_lock);
	free(dom->beps);
	fi_freeinfo(dom->info);
	free(dom);
	return 0;
}

static struct fi_ops domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = domain_close,
	.bind = domain_bind,
	.control = ffs_no_control,
	.ops_open = ffs_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = ffs_av_open,
	.cq_open = ffs_cq_open,
	.endpoint = ffs_ep_open,
	.scalable_ep = ffs_sep_open,
	.cntr_open = ffs_cntr_open,
	.poll_open = ffs_poll_open,
	.stx_ctx = ffs_stx_open,
	.srx_ctx = ffs_srx_open,
	.query_atomic = ffs_query_atomic,
	.query_collective = no_query_collective,
	.endpoint2 = no_endpoint2,
};

struct ffs_domain *ffs_domain_of(struct fid_domain *d)
{
	return d && d->fid.ops == &domain_fi_ops ? (struct ffs_domain *)d : NULL;
}

int ffs_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context)
{
	if (!info || !info->domain_attr || !domain)
		return -FI_EINVAL;
	struct ffs_domain *dom = calloc(1, sizeof *dom);
	if (!dom)
		return -FI_ENOMEM;
	int ret = ffs_info_domain_dir(info, dom->dir, sizeof dom->dir);
	if (ret)
		goto fail;
	/* The tree's provider is the directory under the root. */
	const char *p = dom->dir + strlen(ffs_root());
	while (*p == '/')
		p++;
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= sizeof dom->prov) {
		ret = -FI_EINVAL;
		goto fail;
	}
	memcpy(dom->prov, p, n);
	dom->info = fi_dupinfo(info);
	if (!dom->info) {
		ret = -FI_ENOMEM;
		goto fail;
	}
	dom->fab = fabric ? container_of(fabric, struct ffs_fabric, fabric_fid) : NULL;
	pthread_mutex_init(&dom->lock, NULL);
	pthread_mutex_init(&dom->cq_lock, NULL);
	pthread_mutex_init(&dom->bep_lock, NULL);
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &domain_fi_ops;
	dom->domain_fid.ops = &domain_ops;
	dom->domain_fid.mr = &ffs_mr_ops;
	pthread_mutex_lock(&open_lock);
	struct ffs_domain **last = &open_domains;
	while (*last)
		last = &(*last)->next_open;
	*last = dom;
	pthread_mutex_unlock(&open_lock);
	*domain = &dom->domain_fid;
	return 0;
fail:
	free(dom);
	return ret;
}

void ffs_domain_progress(struct ffs_domain *dom)
{
	pthread_mutex_lock(&dom->cq_lock);
	for (struct ffs_cq *cq = dom->cqs; cq; cq = cq->next) {
		pthread_mutex_lock(&cq->lock);
		ffs_cq_reap(cq);
		pthread_mutex_unlock(&cq->lock);
	}
	pthread_mutex_unlock(&dom->cq_lock);
}
