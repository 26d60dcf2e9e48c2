/*
 * tree.c: the files of a mounted fabricfs tree, as the provider uses them.
 * docs/tree.md is the reference for every file named here.
 */
#include "ffs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/providers/fi_log.h>

const char *ffs_root(void)
{
	const char *r = getenv("FI_FABRICFS_ROOT");
	return r && *r ? r : "/fabric";
}

int ffs_fi_errno(int err)
{
	switch (err) {
	case EBADFD:
		return FI_EOPBADSTATE;
	case EMSGSIZE:
		return FI_ETRUNC;
	case ENOMSG:
		return FI_EAVAIL;
	case EOVERFLOW:
		return FI_EOVERRUN;
	case EBADMSG:
		return FI_ECRC;
	case ENOKEY:
		return FI_ENOKEY;
	case 0:
		return FI_EOTHER;
	default:
		return err;
	}
}

static void vlog(enum fi_log_level level, const char *fmt, va_list ap)
{
	if (!fi_log_enabled(&ffs_prov, level, FI_LOG_CORE))
		return;
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	fi_log(&ffs_prov, level, FI_LOG_CORE, __func__, __LINE__, "%s\n", line);
}

void ffs_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(FI_LOG_WARN, fmt, ap);
	va_end(ap);
}

void ffs_debug(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(FI_LOG_DEBUG, fmt, ap);
	va_end(ap);
}

/* open_at opens dir/name. */
static int open_at(const char *dir, const char *name, int flags)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(p, flags | O_CLOEXEC);
}

/* read_id reads the decimal id an open clone or ctl file gives. */
static int read_id(int fd, unsigned *id)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return n < 0 ? -ffs_fi_errno(errno) : -FI_EIO;
	buf[n] = 0;
	char *end;
	unsigned long v = strtoul(buf, &end, 10);
	if (end == buf || v > UINT_MAX)
		return -FI_EIO;
	*id = (unsigned)v;
	return 0;
}

int ffs_obj_clone(struct ffs_obj *o, const char *domdir, const char *kind)
{
	char kdir[PATH_MAX];
	if (snprintf(kdir, sizeof kdir, "%s/%s", domdir, kind) >= (int)sizeof kdir)
		return -FI_EINVAL;
	o->ctl = open_at(kdir, "clone", O_RDWR);
	if (o->ctl < 0)
		return -ffs_fi_errno(errno);
	int ret = read_id(o->ctl, &o->id);
	if (ret == 0 && snprintf(o->dir, sizeof o->dir, "%s/%u", kdir, o->id) >= (int)sizeof o->dir)
		ret = -FI_EINVAL;
	if (ret) {
		close(o->ctl);
		o->ctl = -1;
	}
	return ret;
}

int ffs_obj_adopt(struct ffs_obj *o, const char *domdir, const char *kind, unsigned id)
{
	if (snprintf(o->dir, sizeof o->dir, "%s/%s/%u", domdir, kind, id) >= (int)sizeof o->dir)
		return -FI_EINVAL;
	o->id = id;
	o->ctl = open_at(o->dir, "ctl", O_RDWR);
	return o->ctl < 0 ? -ffs_fi_errno(errno) : 0;
}

void ffs_obj_close(struct ffs_obj *o)
{
	if (o->ctl >= 0)
		close(o->ctl);
	o->ctl = -1;
}

/* failed reads the object's err line after a failed operation and logs it. */
static void failed(struct ffs_obj *o, const char *what, int err)
{
	char line[1100];
	if (ffs_get(o, "err", line, sizeof line) < 0)
		line[0] = 0;
	ffs_debug("%s: %s: %s (%s)", o->dir, what, line, strerror(err));
}

int ffs_ctl(struct ffs_obj *o, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof cmd)
		return -FI_EINVAL;
	if (write(o->ctl, cmd, n) == n)
		return 0;
	int err = errno;
	failed(o, cmd, err);
	return -ffs_fi_errno(err);
}

int ffs_set(struct ffs_obj *o, const char *name, const char *fmt, ...)
{
	char val[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(val, sizeof val, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof val)
		return -FI_EINVAL;
	return ffs_write(o, name, val);
}

int ffs_write(struct ffs_obj *o, const char *name, const char *text)
{
	int fd = open_at(o->dir, name, O_WRONLY);
	if (fd < 0)
		return -ffs_fi_errno(errno);
	int ret = 0;
	ssize_t n = (ssize_t)strlen(text);
	if (write(fd, text, n) != n) {
		int err = errno;
		failed(o, name, err);
		ret = -ffs_fi_errno(err);
	}
	close(fd);
	return ret;
}

ssize_t ffs_read_path(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ffs_fi_errno(errno);
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -ffs_fi_errno(err);
	buf[n] = 0;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	return n;
}

ssize_t ffs_get(struct ffs_obj *o, const char *name, char *buf, size_t size)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", o->dir, name) >= (int)sizeof p)
		return -FI_EINVAL;
	return ffs_read_path(p, buf, size);
}

int ffs_get_u64(struct ffs_obj *o, const char *name, uint64_t *v)
{
	char buf[64];
	ssize_t n = ffs_get(o, name, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, 0);
	if (end == buf || errno)
		return -FI_EIO;
	*v = x;
	return 0;
}

ssize_t ffs_read_all(int fd, char **out, size_t max)
{
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -FI_ENOMEM;
	for (;;) {
		if (len + 1 == cap) {
			if (cap > max) {
				free(buf);
				return -FI_ETOOSMALL;
			}
			char *b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return -FI_ENOMEM;
			}
			buf = b;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int err = errno;
			free(buf);
			return -ffs_fi_errno(err);
		}
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = 0;
	*out = buf;
	return len;
}

void *ffs_map(struct ffs_obj *o, const char *name, size_t *size)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", o->dir, name) >= (int)sizeof p) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return fabricfs_map(p, size);
}

int ffs_ring_map(struct ffs_obj *o, const char *name, struct fabricfs_ring *r)
{
	size_t size;
	void *m = ffs_map(o, name, &size);
	if (!m)
		return -ffs_fi_errno(errno);
	const char *why = fabricfs_ring_open(r, m, size);
	if (why) {
		ffs_warn("%s/%s: %s", o->dir, name, why);
		munmap(m, size);
		return -FI_EIO;
	}
	return 0;
}

void ffs_ring_unmap(struct fabricfs_ring *r)
{
	if (r->mem)
		munmap(r->mem, r->size);
	r->mem = NULL;
}

/* ffs_name_len (ffs.h) is here, beside the tree's I/O, so that every
 * part of the provider links with it (av.c alone in its unit test). */
size_t ffs_name_len(const void *addr, size_t room)
{
	if (!addr)
		return 0;
	size_t n = strnlen(addr, room);
	const char *s = addr;
	if (n == room || (strncmp(s, "fi_shm://", 9) && strncmp(s, "fi_ns://", 8)) || strpbrk(s, " \t\r\n"))
		return 0;
	return n + 1;
}
