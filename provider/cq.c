/*
 * cq.c: completion queues. A CQ is a tree CQ (cq/N, a clone object) whose
 * completion ring the provider maps. Reaping (ffs_cq_reap, for every CQ of
 * the domain in ffs_domain_progress) takes the ring's entries, lets the
 * endpoint finish each one (ffs_ep_complete: copy received bytes out of
 * its staging region, free the request) and queues what the application
 * is to see; fi_cq_read returns from that queue in the CQ's format.
 */
#include "ffs.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest a blocked fi_cq_sread sleeps before it looks again, so that a
 * dead ring or a missed wake-up cannot hold it forever. */
#define SLEEP_SLICE_MS 100

static size_t entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

/* put writes e at dst in format f. */
static void put(enum fi_cq_format f, void *dst, const struct ffs_cq_entry *e)
{
	struct fi_cq_tagged_entry t = {
		.op_context = e->op_context,
		.flags = e->flags,
		.len = e->len,
		.buf = e->buf,
		.data = e->data,
		.tag = e->tag,
	};
	/* The four formats are prefixes of the tagged one. */
	memcpy(dst, &t, entry_size(f));
}

void ffs_cq_reap(struct ffs_cq *cq)
{
	struct fabricfs_cqe c;
	while (cq->qlen < cq->qcap && fabricfs_reap(&cq->ring, &c)) {
		struct ffs_cq_entry *e = &cq->q[(cq->qhead + cq->qlen) % cq->qcap];
		if (!ffs_ep_complete(cq->dom, &c, e))
			continue;
		if (cq->hidden)
			ffs_debug("%s: hidden CQ drops a completion (err %d)", cq->obj.dir, e->err);
		else
			cq->qlen++;
	}
}

/* cq_read takes up to count entries of the queue, after reaping the domain. */
static ssize_t cq_read(struct ffs_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	if (!buf && count)
		return -FI_EINVAL;
	ffs_domain_progress(cq->dom);
	pthread_mutex_lock(&cq->lock);
	ssize_t n = 0;
	size_t es = entry_size(cq->format);
	while ((size_t)n < count && cq->qlen > 0) {
		struct ffs_cq_entry *e = &cq->q[cq->qhead];
		if (e->err)
			break;
		put(cq->format, (uint8_t *)buf + n * es, e);
		if (src)
			src[n] = e->src_addr;
		cq->qhead = (cq->qhead + 1) % cq->qcap;
		cq->qlen--;
		n++;
	}
	if (n == 0)
		n = cq->qlen > 0 ? -FI_EAVAIL : -FI_EAGAIN;
	pthread_mutex_unlock(&cq->lock);
	if (n == -FI_EAGAIN) {
		/* Applications poll fi_cq_read in a loop; the daemon's engine
		 * needs a CPU to make progress, and where they outnumber the
		 * CPUs a spin without yielding starves it (docs/abi.md,
		 * "Wake-ups"). */
		sched_yield();
	}
	return n;
}

static ssize_t cq_fi_read(struct fid_cq *fid, void *buf, size_t count)
{
	return cq_read(container_of(fid, struct ffs_cq, cq_fid), buf, count, NULL);
}

static ssize_t cq_fi_readfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src_addr)
{
	return cq_read(container_of(fid, struct ffs_cq, cq_fid), buf, count, src_addr);
}

static ssize_t cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct ffs_cq *cq = container_of(fid, struct ffs_cq, cq_fid);
	if (!buf)
		return -FI_EINVAL;
	ffs_domain_progress(cq->dom);
	pthread_mutex_lock(&cq->lock);
	if (cq->qlen == 0 || !cq->q[cq->qhead].err) {
		pthread_mutex_unlock(&cq->lock);
		return -FI_EAGAIN;
	}
	cq->err = cq->q[cq->qhead];
	cq->qhead = (cq->qhead + 1) % cq->qcap;
	cq->qlen--;
	const struct ffs_cq_entry *e = &cq->err;
	size_t elen = e->addrlen ? e->addrlen - 1 : strlen(e->errline);
	void *user_data = buf->err_data;
	size_t user_size = buf->err_data_size;
	buf->op_context = e->op_context;
	buf->flags = e->flags;
	buf->len = e->len;
	buf->buf = e->buf;
	buf->data = e->data;
	buf->tag = e->tag;
	buf->olen = e->olen;
	buf->err = -e->err;
	buf->prov_errno = e->prov_errno;
	/* err_data is the endpoint's err line (ep.c), or for -FI_EADDRNOTAVAIL
	 * the sender's address (elen + 1 bytes of it): into the caller's
	 * buffer when it gave one (fi_cq(3), API 1.5), else ours, valid until
	 * the next read. Without one, a caller's buffer is not written. */
	if (!elen) {
		if (!user_size)
			buf->err_data = NULL;
		buf->err_data_size = 0;
	} else if (user_data && user_size) {
		size_t n = elen + 1 < user_size ? elen + 1 : user_size;
		memcpy(user_data, e->errline, n);
		buf->err_data_size = n;
	} else {
		buf->err_data = cq->err.errline;
		buf->err_data_size = elen + 1;
	}
	pthread_mutex_unlock(&cq->lock);
	return 1;
}

static ssize_t cq_sread(struct ffs_cq *cq, void *buf, size_t count, fi_addr_t *src, int timeout)
{
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		ssize_t n = cq_read(cq, buf, count, src);
		if (n != -FI_EAGAIN)
			return n;
		if (__atomic_load_n(cq->ring.flags, __ATOMIC_RELAXED) & FABRICFS_RING_DEAD)
			return -FI_EIO;
		long left = SLEEP_SLICE_MS;
		if (timeout >= 0) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
			if (spent >= timeout)
				return -FI_EAGAIN;
			if (timeout - spent < left)
				left = timeout - spent;
		}
		struct timespec ts = {left / 1000, (left % 1000) * 1000000};
		/* The provider's queue is empty here; entries can only come
		 * through the ring, so sleeping on it misses nothing. */
		pthread_mutex_lock(&cq->lock);
		bool empty = cq->qlen == 0, signaled = cq->signaled;
		cq->signaled = 0;
		pthread_mutex_unlock(&cq->lock);
		if (signaled)
			return -FI_EAGAIN; /* fi_cq_signal: the wait ends, with nothing */
		if (empty && fabricfs_sleep(&cq->ring, &ts) < 0)
			return -ffs_fi_errno(errno);
	}
}

static ssize_t cq_fi_sread(struct fid_cq *fid, void *buf, size_t count, const void *cond, int timeout)
{
	return cq_sread(container_of(fid, struct ffs_cq, cq_fid), buf, count, NULL, timeout);
}

static ssize_t cq_fi_sreadfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src_addr, const void *cond,
			       int timeout)
{
	return cq_sread(container_of(fid, struct ffs_cq, cq_fid), buf, count, src_addr, timeout);
}

static int cq_signal(struct fid_cq *fid)
{
	struct ffs_cq *cq = container_of(fid, struct ffs_cq, cq_fid);
	pthread_mutex_lock(&cq->lock);
	cq->signaled = 1;
	pthread_mutex_unlock(&cq->lock);
	fabricfs_wake(&cq->ring);
	ffs_wait_signal(&cq->wait);
	return 0;
}

static __thread char strerror_buf[512];

static const char *cq_strerror(struct fid_cq *fid, int prov_errno, const void *err_data, char *buf, size_t len)
{
	if (!buf || !len) {
		buf = strerror_buf;
		len = sizeof strerror_buf;
	}
	/* err_data, as fi_cq_readerr gave it, is the endpoint's err line
	 * (ep.c), when there is one. */
	const char *line = err_data ? err_data : "";
	/* -FI_EADDRNOTAVAIL's err_data is a struct sockaddr, not text: its
	 * first byte (the family's low byte) is a control character. */
	if ((unsigned char)line[0] < 0x20)
		line = "";
	if (prov_errno)
		snprintf(buf, len, "provider error %d (%s)%s%s", prov_errno, strerror(abs(prov_errno)),
			 *line ? ": " : "", line);
	else
		snprintf(buf, len, "%s", *line ? line : "no provider error (the entry's err says it)");
	return buf;
}

void ffs_cq_free(struct ffs_cq *cq)
{
	struct ffs_domain *dom = cq->dom;
	pthread_mutex_lock(&dom->cq_lock);
	for (struct ffs_cq **p = &dom->cqs; *p; p = &(*p)->next)
		if (*p == cq) {
			*p = cq->next;
			break;
		}
	pthread_mutex_unlock(&dom->cq_lock);
	ffs_ring_unmap(&cq->ring);
	ffs_obj_close(&cq->obj);
	pthread_mutex_destroy(&cq->lock);
	free(cq->q);
	free(cq);
}

static int cq_close(struct fid *fid)
{
	struct ffs_cq *cq = container_of(fid, struct ffs_cq, cq_fid.fid);
	if (__atomic_load_n(&cq->bound, __ATOMIC_SEQ_CST))
		return -FI_EBUSY;
	int ret = ffs_wait_fini(&cq->wait);
	if (ret)
		return ret;
	ffs_cq_free(cq);
	return 0;
}

static int cq_control(struct fid *fid, int command, void *arg)
{
	return ffs_wait_control(&container_of(fid, struct ffs_cq, cq_fid.fid)->wait, command, arg);
}

/* cq_ready is the CQ's readiness for wait.c: entries to read, after
 * reaping the domain. */
static bool cq_ready(struct ffs_wait *w, bool trying)
{
	struct ffs_cq *cq = container_of(w, struct ffs_cq, wait);
	ffs_domain_progress(cq->dom);
	pthread_mutex_lock(&cq->lock);
	bool r = cq->qlen > 0;
	pthread_mutex_unlock(&cq->lock);
	return r;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = ffs_no_bind,
	.control = cq_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_fi_read,
	.readfrom = cq_fi_readfrom,
	.readerr = cq_readerr,
	.sread = cq_fi_sread,
	.sreadfrom = cq_fi_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

int ffs_cq_make(struct ffs_domain *dom, struct fi_cq_attr *attr, bool hidden, struct ffs_cq **out)
{
	enum fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
	if (attr) {
		if (attr->format != FI_CQ_FORMAT_UNSPEC)
			format = attr->format;
		if (!entry_size(format))
			return -FI_ENOSYS;
		if (attr->flags & FI_AFFINITY)
			return -FI_ENOSYS;
	}
	struct ffs_cq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return -FI_ENOMEM;
	cq->dom = dom;
	cq->format = format;
	cq->hidden = hidden;
	int ret = ffs_obj_clone(&cq->obj, dom->dir, "cq");
	if (ret) {
		free(cq);
		return ret;
	}
	if (attr && attr->size && (ret = ffs_set(&cq->obj, "attr/size", "%zu", attr->size)))
		goto fail;
	if ((ret = ffs_ring_map(&cq->obj, "data", &cq->ring)))
		goto fail;
	cq->qcap = cq->ring.count;
	cq->q = calloc(cq->qcap, sizeof *cq->q);
	if (!cq->q) {
		ret = -FI_ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&cq->lock, NULL);
	if ((ret = ffs_wait_init(&cq->wait, attr ? attr->wait_obj : FI_WAIT_NONE, attr ? attr->wait_set : NULL,
				 cq_ready, &cq->ring))) {
		pthread_mutex_destroy(&cq->lock);
		free(cq->q);
		goto fail;
	}
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.ops = &cq_fi_ops;
	cq->cq_fid.ops = &cq_ops;
	pthread_mutex_lock(&dom->cq_lock);
	cq->next = dom->cqs;
	dom->cqs = cq;
	pthread_mutex_unlock(&dom->cq_lock);
	*out = cq;
	return 0;
fail:
	ffs_ring_unmap(&cq->ring);
	ffs_obj_close(&cq->obj);
	free(cq);
	return ret;
}

struct ffs_wait *ffs_cq_wait(struct fid *fid)
{
	return fid->fclass == FI_CLASS_CQ && fid->ops == &cq_fi_ops ? &container_of(fid, struct ffs_cq, cq_fid.fid)->wait
								       : NULL;
}

int ffs_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid, void *context)
{
	if (!attr || !cq_fid)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	struct ffs_cq *cq;
	int ret = ffs_cq_make(dom, attr, false, &cq);
	if (ret)
		return ret;
	cq->cq_fid.fid.context = context;
	*cq_fid = &cq->cq_fid;
	return 0;
}
