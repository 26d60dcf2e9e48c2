/*
 * cntr.c: counters (fi_cntr_open and the fi_cntr_* calls) over the
 * tree's cntr objects: the daemon counts the completions of the
 * endpoints bound to a counter; the value and errors files are read for
 * fi_cntr_read and fi_cntr_readerr, and ctl commands do the rest.
 */
#include "ffs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* read_count reads a counter file (its value is decimal, one line). */
static uint64_t read_count(struct ffs_cntr *c, int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0) {
		/* fi_cntr_read has no way to fail: log why it reads 0. */
		ffs_warn("%s: reading a count: %s", c->obj.dir, n < 0 ? strerror(errno) : "empty");
		return 0;
	}
	buf[n] = 0;
	return strtoull(buf, NULL, 10);
}

/* read_then_progress reads a count, then finishes what the daemon
 * completed: the daemon puts a completion in its ring before it counts
 * it, so every completion the count includes is finished (received bytes
 * copied out) when the application sees the count. */
static uint64_t read_then_progress(struct ffs_cntr *c, int fd)
{
	uint64_t v = read_count(c, fd);
	ffs_domain_progress(c->dom);
	return v;
}

static uint64_t cntr_read(struct fid_cntr *fid)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	return read_then_progress(c, c->value_fd);
}

static uint64_t cntr_readerr(struct fid_cntr *fid)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	return read_then_progress(c, c->errors_fd);
}

void ffs_cntr_counts(struct ffs_cntr *c, uint64_t *value, uint64_t *errors)
{
	*value = read_count(c, c->value_fd);
	*errors = read_count(c, c->errors_fd);
}

static int cntr_add(struct fid_cntr *fid, uint64_t value)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	int ret = ffs_ctl(&c->obj, "add %llu", (unsigned long long)value);
	if (!ret && __atomic_load_n(&c->wait.polls, __ATOMIC_RELAXED))
		ffs_cntr_polled(c);
	return ret;
}

static int cntr_set(struct fid_cntr *fid, uint64_t value)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	int ret = ffs_ctl(&c->obj, "set %llu", (unsigned long long)value);
	if (!ret && __atomic_load_n(&c->wait.polls, __ATOMIC_RELAXED))
		ffs_cntr_polled(c);
	return ret;
}

static int cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	return ffs_ctl(&c->obj, "adderr %llu", (unsigned long long)value);
}

static int cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	return ffs_ctl(&c->obj, "seterr %llu", (unsigned long long)value);
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* cntr_wait is fi_cntr_wait: timeout in milliseconds, negative for none.
 * The tree's `wait N MS` blocks in the daemon; a signal interrupting it
 * restarts it with the time left. */
static int cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid);
	int64_t deadline = timeout > 0 ? now_ms() + timeout : 0;
	int ret;
	for (;;) {
		if (timeout == 0) {
			/* The tree's wait without a limit would block: poll. */
			ret = read_count(c, c->value_fd) >= threshold ? 0 : -FI_ETIMEDOUT;
		} else if (timeout < 0) {
			ret = ffs_ctl(&c->waiter, "wait %llu", (unsigned long long)threshold);
		} else {
			int64_t left = deadline - now_ms();
			ret = left > 0 ? ffs_ctl(&c->waiter, "wait %llu %lld", (unsigned long long)threshold, (long long)left)
				       : -FI_ETIMEDOUT;
		}
		if (ret != -FI_EINTR)
			break;
	}
	if (ret == 0)
		ffs_domain_progress(c->dom);
	return ret;
}

static struct fi_ops_cntr cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = cntr_read,
	.readerr = cntr_readerr,
	.add = cntr_add,
	.set = cntr_set,
	.wait = cntr_wait,
	.adderr = cntr_adderr,
	.seterr = cntr_seterr,
};

static int cntr_close(struct fid *fid)
{
	struct ffs_cntr *c = container_of(fid, struct ffs_cntr, cntr_fid.fid);
	/* fi_cntr(3): "there must be no opened endpoints ... associated with
	 * the counter", else -FI_EBUSY. The status line counts bindings. An
	 * endpoint fi_close closed leaves the tree a moment later (the daemon
	 * unbinds its counters after its directory goes): wait up to a second
	 * for that. */
	for (int ms = 0;; ms++) {
		char status[256];
		const char *b = NULL;
		if (ffs_get(&c->obj, "status", status, sizeof status) > 0)
			b = strstr(status, " bound=");
		if (!b || strtoul(b + 7, NULL, 10) == 0)
			break;
		if (ms == 1000)
			return -FI_EBUSY;
		usleep(1000);
	}
	int ret = ffs_wait_fini(&c->wait);
	if (ret)
		return ret;
	close(c->value_fd);
	close(c->errors_fd);
	ffs_obj_close(&c->waiter);
	ffs_obj_close(&c->obj);
	ffs_domain_hold(c->dom, -1);
	free(c);
	return 0;
}

static int cntr_control(struct fid *fid, int command, void *arg)
{
	return ffs_wait_control(&container_of(fid, struct ffs_cntr, cntr_fid.fid)->wait, command, arg);
}

/* cntr_ready is the counter's readiness for wait.c: its value or error
 * count changed since fi_trywait (or fi_wait) last looked. */
static bool cntr_ready(struct ffs_wait *w, bool trying)
{
	struct ffs_cntr *c = container_of(w, struct ffs_cntr, wait);
	uint64_t v, e;
	ffs_cntr_counts(c, &v, &e);
	bool changed = v != c->tried_value || e != c->tried_errors;
	if (trying) {
		c->tried_value = v;
		c->tried_errors = e;
	}
	return changed;
}

static struct fi_ops cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cntr_close,
	.bind = ffs_no_bind,
	.control = cntr_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

/* open_file opens the counter's file name for reading. */
static int open_file(struct ffs_cntr *c, const char *name)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", c->obj.dir, name) >= (int)sizeof p) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(p, O_RDONLY | O_CLOEXEC);
}

struct ffs_wait *ffs_cntr_wait(struct fid *fid)
{
	return fid->fclass == FI_CLASS_CNTR && fid->ops == &cntr_fi_ops
		       ? &container_of(fid, struct ffs_cntr, cntr_fid.fid)->wait
		       : NULL;
}

int ffs_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **out, void *context)
{
	if (!domain || !out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	if (attr) {
		if (attr->flags)
			return -FI_EINVAL; /* "reserved for future use, and must be set to 0" */
		if (attr->events != FI_CNTR_EVENTS_COMP)
			return -FI_ENOSYS;
	}
	struct ffs_cntr *c = calloc(1, sizeof *c);
	if (!c)
		return -FI_ENOMEM;
	c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	c->cntr_fid.fid.context = context;
	c->cntr_fid.fid.ops = &cntr_fi_ops;
	c->cntr_fid.ops = &cntr_ops;
	c->dom = dom;
	c->value_fd = c->errors_fd = -1;
	c->waiter.ctl = -1;
	int ret = ffs_obj_clone(&c->obj, dom->dir, "cntr");
	if (ret) {
		free(c);
		return ret;
	}
	c->value_fd = open_file(c, "value");
	c->errors_fd = open_file(c, "errors");
	if (c->value_fd < 0 || c->errors_fd < 0)
		ret = -ffs_fi_errno(errno);
	else if (!(ret = ffs_obj_adopt(&c->waiter, dom->dir, "cntr", c->obj.id)) &&
		 (ret = ffs_wait_init(&c->wait, attr ? attr->wait_obj : FI_WAIT_NONE, attr ? attr->wait_set : NULL,
				      cntr_ready, NULL)))
		ffs_obj_close(&c->waiter);
	if (ret) {
		if (c->value_fd >= 0)
			close(c->value_fd);
		if (c->errors_fd >= 0)
			close(c->errors_fd);
		ffs_obj_close(&c->obj);
		free(c);
		return ret;
	}
	ffs_domain_hold(dom, 1);
	*out = &c->cntr_fid;
	return 0;
}
