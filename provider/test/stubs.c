/*
 * stubs.c: weak stand-ins for the entry points prov.c hands out and other
 * files of the provider implement (domain.c, pep.c, eq.c; av.c, mr.c,
 * cntr.c, atomic.c; ep.c's ffs_auth_key), so that a branch with only
 * some of the files links into a provider: prov.c, info.c and tree.c alone give fi_getinfo and
 * fi_fabric; with domain.c and the endpoint files, messages go through
 * staging (no registered regions), and AVs, counters and fi_query_atomic
 * are -FI_ENOSYS. A build with the real files uses theirs.
 */
#include "../ffs.h"

__attribute__((weak)) int ffs_domain_open(struct fid_fabric *fabric, struct fi_info *info,
					  struct fid_domain **domain, void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) struct ffs_domain *ffs_domain_of(struct fid_domain *d)
{
	return NULL;
}

__attribute__((weak)) struct fid_domain *ffs_domain_opened(const char *name)
{
	return NULL;
}

__attribute__((weak)) void ffs_domain_hold(struct ffs_domain *dom, int delta)
{
}

__attribute__((weak)) int ffs_pep_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
				       void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
				      void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
				      void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
					void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) struct fi_ops_mr ffs_mr_ops;

__attribute__((weak)) int ffs_mr_lookup(struct ffs_domain *dom, void *desc, const void *buf, size_t len,
					uint64_t *tree_desc, uint64_t *tree_off)
{
	return -FI_ENOENT;
}

/* wait.c asks each kind for its wait part: none without the kind's file. */
__attribute__((weak)) struct ffs_wait *ffs_cq_wait(struct fid *fid)
{
	return NULL;
}

__attribute__((weak)) struct ffs_wait *ffs_cntr_wait(struct fid *fid)
{
	return NULL;
}

__attribute__((weak)) struct ffs_wait *ffs_eq_wait(struct fid *fid)
{
	return NULL;
}

__attribute__((weak)) void ffs_cntr_counts(struct ffs_cntr *c, uint64_t *value, uint64_t *errors)
{
	*value = *errors = 0;
}

__attribute__((weak)) struct fi_ops_atomic ffs_atomic_ops;

__attribute__((weak)) int ffs_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
					   struct fi_atomic_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) void ffs_atomics_free(struct ffs_domain *dom)
{
}

__attribute__((weak)) int ffs_eq_mr_complete(struct ffs_eq *eq, struct fid_mr *mr)
{
	return -FI_ENOSYS;
}

/* Without ep.c, no authorization keys: a key asked for is -FI_ENOSYS. */
__attribute__((weak)) int ffs_auth_key(struct ffs_obj *o, const struct fi_domain_attr *dom, const uint8_t *key,
				       size_t size)
{
	return size || (dom && dom->auth_key_size) ? -FI_ENOSYS : 0;
}
