/*
 * stubs.c: weak stand-ins for the entry points prov.c hands out and other
 * files of the provider implement (domain.c, pep.c, eq.c), so that
 * prov.c, info.c and tree.c link into a provider on their own: enough for
 * fi_getinfo and fi_fabric. A build with the real files uses theirs.
 */
#include "../ffs.h"

__attribute__((weak)) int ffs_domain_open(struct fid_fabric *fabric, struct fi_info *info,
					  struct fid_domain **domain, void *context)
{
	return -FI_ENOSYS;
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
