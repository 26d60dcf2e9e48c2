/*
 * ops.c: fi_open_ops on domains and endpoints (fi_ext_fabricfs.h). A set
 * is a directory ops/NAME of the object in the tree and a value a file in
 * it; the provider only checks that the set is there and reads and writes
 * its files, so that whatever the tree offers is reachable.
 */
#include "ffs.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ops_obj gives o the directory of fid (a domain or an endpoint of this
 * provider), the way ffs_get and ffs_write take it. */
static int ops_obj(struct fid *fid, struct ffs_obj *o)
{
	const char *dir = NULL;
	struct ffs_domain *dom = fid && fid->fclass == FI_CLASS_DOMAIN ? ffs_domain_of((struct fid_domain *)fid) : NULL;
	if (dom)
		dir = dom->dir;
	else if (fid && fid->fclass == FI_CLASS_EP)
		dir = ffs_ep_dir(fid);
	if (!dir)
		return -FI_ENOSYS;
	memset(o, 0, sizeof *o);
	o->ctl = -1;
	snprintf(o->dir, sizeof o->dir, "%s", dir);
	return 0;
}

/* file_name reports whether s can be one name of a path: not empty, not
 * "." or "..", no '/', at most 64 bytes (the tree's names are shorter). */
static bool file_name(const char *s)
{
	return s && s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && strlen(s) <= 64;
}

/* ops_path is "ops/NAME/VALUE" (VALUE NULL: "ops/NAME"). */
static int ops_path(char *p, size_t len, const char *name, const char *value)
{
	if (!file_name(name) || (value && !file_name(value)))
		return -FI_EINVAL;
	int n = value ? snprintf(p, len, "ops/%s/%s", name, value) : snprintf(p, len, "ops/%s", name);
	return n < 0 || (size_t)n >= len ? -FI_EINVAL : 0;
}

static ssize_t ops_get(struct fid *fid, const char *name, const char *value, char *buf, size_t len)
{
	struct ffs_obj o;
	char p[160];
	int ret = ops_obj(fid, &o);
	if (!ret)
		ret = ops_path(p, sizeof p, name, value);
	if (ret)
		return ret;
	if (!buf || len == 0)
		return -FI_EINVAL;
	return ffs_get(&o, p, buf, len);
}

static int ops_set(struct fid *fid, const char *name, const char *value, const char *text)
{
	struct ffs_obj o;
	char p[160];
	int ret = ops_obj(fid, &o);
	if (!ret)
		ret = ops_path(p, sizeof p, name, value);
	if (ret)
		return ret;
	if (!text)
		return -FI_EINVAL;
	return ffs_write(&o, p, text);
}

static struct fi_fabricfs_ops fabricfs_ops = {
	.size = sizeof(struct fi_fabricfs_ops),
	.get = ops_get,
	.set = ops_set,
};

int ffs_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	struct ffs_obj o;
	char p[160];
	struct stat st;
	if (!ops)
		return -FI_EINVAL;
	/* Unknown names are -FI_ENOSYS, as libfabric's providers answer. */
	if (ops_obj(fid, &o) || ops_path(p, sizeof p, name, NULL))
		return -FI_ENOSYS;
	char full[PATH_MAX + 160];
	snprintf(full, sizeof full, "%s/%s", o.dir, p);
	if (stat(full, &st) || !S_ISDIR(st.st_mode))
		return -FI_ENOSYS;
	*ops = &fabricfs_ops;
	return 0;
}
