/*
 * ffstest.h: what the provider's C test programs share. Each program is
 * built from tree.c, wait.c, the files it tests and itself
 * (tests/provider_test.go builds and runs them against a mounted tree,
 * FI_FABRICFS_ROOT), so the parts of the provider the program does not
 * link are stubbed here: the provider struct and, as weak fallbacks,
 * domain.c's progress and its fi_ops entries for what an object does not
 * have, and the wait parts of the object kinds it does not link.
 */
#ifndef FFSTEST_H
#define FFSTEST_H

#include "../ffs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fi_provider ffs_prov = {.name = FFS_PROV_NAME};

/* progress_calls counts ffs_domain_progress calls (the fallback's). */
static int progress_calls;

__attribute__((weak)) void ffs_domain_progress(struct ffs_domain *dom)
{
	progress_calls++;
}

/* domain.c's fi_ops entries for what an object does not have. */
__attribute__((weak)) int ffs_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
					  void *context)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_no_tostr(const struct fid *fid, char *buf, size_t len)
{
	return -FI_ENOSYS;
}

__attribute__((weak)) int ffs_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops,
					 void *context)
{
	return -FI_ENOSYS;
}

/* The wait parts of the objects a program does not link (wait.c asks
 * every fid): none. */
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

static int failures;

/* CHECK reports a failed condition and goes on. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

/* test_domain is a domain of the tree's provider prov (tcp) and domain
 * name (lo), as domain.c would open it: mr_mode without FI_MR_PROV_KEY,
 * FI_SOCKADDR_IN addresses. */
static struct ffs_domain *test_domain(const char *prov, const char *name)
{
	struct ffs_domain *dom = calloc(1, sizeof *dom);
	if (!dom || !(dom->info = fi_allocinfo())) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	snprintf(dom->dir, sizeof dom->dir, "%s/%s/%s", ffs_root(), prov, name);
	snprintf(dom->prov, sizeof dom->prov, "%s", prov);
	dom->info->addr_format = FI_SOCKADDR_IN;
	dom->info->domain_attr->av_type = FI_AV_UNSPEC;
	pthread_mutex_init(&dom->lock, NULL);
	return dom;
}

/* obj_read reads file name (relative to the tree object dir) into buf
 * (unused by the tests of objects that have no tree files). */
__attribute__((unused)) static ssize_t obj_read(const char *dir, const char *name, char *buf, size_t size)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p)
		return -FI_EINVAL;
	return ffs_read_path(p, buf, size);
}

/* done prints the verdict the Go test reads and gives the exit status. */
static int done(const char *name)
{
	if (failures) {
		fprintf(stderr, "%s: %d failures\n", name, failures);
		return 1;
	}
	printf("ok %s\n", name);
	return 0;
}

#endif /* FFSTEST_H */
