/*
 * eq.c: event queues. libfabric's EQ belongs to the fabric, the tree's to
 * a domain: the provider's EQ makes a tree EQ (eq/N, a clone object) in a
 * domain the first time an endpoint or passive endpoint of that domain
 * binds it, and reads the events of all of them. An event line of the tree
 * (docs/tree.md, eq/N/events) names the object it is about (fid=ep/ID);
 * the EQ keeps which libfabric fid each bound KIND/ID is.
 */
#include "ffs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tree EQs per EQ: one per domain an application binds to it. */
#define MAX_TREES 16
/* The longest an fi_eq_sread sleeps between two looks at the tree. */
#define MAX_BACKOFF_US 1000

struct eq_tree {
	char domdir[PATH_MAX];
	struct ffs_obj obj;
	int fd;  /* eq/N/events, O_NONBLOCK */
	int bfd; /* eq/N/events, blocking (fi_eq_sread without a timeout), or -1 */
};

struct eq_bind {
	int tree;
	char kind[4]; /* ep, pep */
	unsigned id;
	fid_t fid;
	struct eq_bind *next;
};

struct eq_event {
	uint32_t event;
	bool error;
	fid_t fid;
	struct fi_info *info; /* FI_CONNREQ: given to the application */
	uint64_t data;        /* fi_eq_write's entry data */
	int err, prov_errno;
	size_t len; /* of buf */
	uint8_t buf[FFS_CM_DATA_SIZE + sizeof(struct fi_eq_entry)];
	struct eq_event *next;
};

struct ffs_eq {
	struct fid_eq eq_fid;
	struct ffs_fabric *fab;
	pthread_mutex_t lock;
	struct eq_tree trees[MAX_TREES];
	int ntree;
	struct eq_bind *binds;
	struct eq_event *head, *tail;
	size_t nev, max;
	struct eq_event *lasterr; /* readerr's event: its err_data lives until the next read */
	struct ffs_wait wait;
	int domains; /* domains bound to it (fi_domain_bind), atomic */
};

/* ---- the tree's event lines ---- */

static const struct {
	const char *name;
	int code;
} errnames[] = {
#define E(x) {"FI_" #x, FI_##x}
	E(EPERM), E(ENOENT), E(EINTR), E(EIO), E(E2BIG), E(EBADF), E(EAGAIN), E(ENOMEM), E(EACCES),
	E(EFAULT), E(EBUSY), E(ENODEV), E(EINVAL), E(EMFILE), E(ENOSPC), E(ENOSYS), E(ENOMSG),
	E(ENODATA), E(EOVERFLOW), E(EMSGSIZE), E(ENOPROTOOPT), E(EOPNOTSUPP), E(EADDRINUSE),
	E(EADDRNOTAVAIL), E(ENETDOWN), E(ENETUNREACH), E(ECONNABORTED), E(ECONNRESET), E(ENOBUFS),
	E(EISCONN), E(ENOTCONN), E(ESHUTDOWN), E(ETIMEDOUT), E(ECONNREFUSED), E(EHOSTDOWN),
	E(EHOSTUNREACH), E(EALREADY), E(EINPROGRESS), E(EREMOTEIO), E(ECANCELED), E(EKEYREJECTED),
	E(EOTHER), E(ETOOSMALL), E(EOPBADSTATE), E(EAVAIL), E(EBADFLAGS), E(ENOEQ), E(EDOMAIN),
	E(ENOCQ), E(ECRC), E(ETRUNC), E(ENOKEY), E(ENOAV), E(EOVERRUN), E(ENORX),
#undef E
};

static int errcode(const char *name)
{
	for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
		if (!strcmp(errnames[i].name, name))
			return errnames[i].code;
	return FI_EOTHER; /* an errno libfabric has no name for */
}

/* next_word takes the next blank-separated word of *s into w (quotes as in
 * ctl: '...' with '' for a quote). It returns false at the end. */
static bool next_word(const char **s, char *w, size_t size)
{
	const char *p = *s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return false;
	size_t n = 0;
	bool quoted = false;
	for (; *p && (quoted || (*p != ' ' && *p != '\t')); p++) {
		if (*p == '\'') {
			if (quoted && p[1] == '\'') {
				p++;
			} else {
				quoted = !quoted;
				continue;
			}
		}
		if (n + 1 < size)
			w[n++] = *p;
	}
	w[n] = 0;
	*s = p;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* decode_data turns a DATA word into bytes; it returns their number. */
static size_t decode_data(const char *w, uint8_t *out, size_t size)
{
	size_t n = 0;
	if (!strncmp(w, "hex:", 4)) {
		for (const char *p = w + 4; p[0] && p[1] && n < size; p += 2) {
			int hi = hexval(p[0]), lo = hexval(p[1]);
			if (hi < 0 || lo < 0)
				break;
			out[n++] = (uint8_t)(hi << 4 | lo);
		}
		return n;
	}
	n = strlen(w);
	if (n > size)
		n = size;
	memcpy(out, w, n);
	return n;
}

static fid_t bound_fid(struct ffs_eq *eq, int tree, const char *kind, unsigned id)
{
	for (struct eq_bind *b = eq->binds; b; b = b->next)
		if (b->tree == tree && b->id == id && !strcmp(b->kind, kind))
			return b->fid;
	return NULL;
}

static void push(struct ffs_eq *eq, struct eq_event *ev)
{
	ev->next = NULL;
	if (eq->tail)
		eq->tail->next = ev;
	else
		eq->head = ev;
	eq->tail = ev;
	eq->nev++;
}

static void free_event(struct eq_event *ev)
{
	if (ev && ev->info)
		fi_freeinfo(ev->info);
	free(ev);
}

/* connreq_info makes the info of an FI_CONNREQ event: the passive
 * endpoint's, with a handle naming the endpoint the tree made. */
static struct fi_info *connreq_info(fid_t pep_fid, const char *domdir, unsigned ep_id)
{
	const struct fi_info *pi = pep_fid ? ffs_pep_info(pep_fid) : NULL;
	if (!pi)
		return NULL;
	struct fi_info *info = fi_dupinfo(pi);
	struct ffs_connreq *cr = calloc(1, sizeof *cr);
	if (!info || !cr) {
		fi_freeinfo(info);
		free(cr);
		return NULL;
	}
	cr->fid.fclass = FI_CLASS_CONNREQ;
	snprintf(cr->domdir, sizeof cr->domdir, "%s", domdir);
	cr->ep_id = ep_id;
	info->handle = &cr->fid;
	return info;
}

/* parse_line queues the event of one line of tree EQ t. */
static void parse_line(struct ffs_eq *eq, int t, const char *line)
{
	char w[1100], kind[8] = "";
	const char *p = line;
	if (!next_word(&p, w, sizeof w))
		return;
	struct eq_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return;
	if (!strcmp(w, "connreq"))
		ev->event = FI_CONNREQ;
	else if (!strcmp(w, "connected"))
		ev->event = FI_CONNECTED;
	else if (!strcmp(w, "shutdown"))
		ev->event = FI_SHUTDOWN;
	else if (!strcmp(w, "error"))
		ev->error = true;
	else {
		ffs_warn("%s: unknown event: %s", eq->trees[t].obj.dir, line);
		free(ev);
		return;
	}
	unsigned id = 0, ep_id = 0;
	bool have_ep = false;
	uint8_t data[FFS_CM_DATA_SIZE];
	size_t dlen = 0;
	while (next_word(&p, w, sizeof w)) {
		char *v = strchr(w, '=');
		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(w, "fid")) {
			char *slash = strchr(v, '/');
			if (slash && (size_t)(slash - v) < sizeof kind) {
				memcpy(kind, v, slash - v);
				kind[slash - v] = 0;
				id = (unsigned)strtoul(slash + 1, NULL, 10);
			}
		} else if (!strcmp(w, "ep")) {
			ep_id = (unsigned)strtoul(v, NULL, 10);
			have_ep = true;
		} else if (!strcmp(w, "err")) {
			ev->err = errcode(v);
		} else if (!strcmp(w, "prov_errno")) {
			ev->prov_errno = (int)strtol(v, NULL, 10);
		} else if (!strcmp(w, "data")) {
			dlen = decode_data(v, data, sizeof data);
		}
	}
	ev->fid = bound_fid(eq, t, kind, id);
	if (!ev->fid) {
		/* An object this process does not hold (closed meanwhile). */
		ffs_debug("%s: event for unknown %s/%u: %s", eq->trees[t].obj.dir, kind, id, line);
		free(ev);
		return;
	}
	if (ev->error) {
		/* err_data of an error is its private data (a reject's). */
		memcpy(ev->buf, data, dlen);
		ev->len = dlen;
	} else {
		if (ev->event == FI_CONNREQ) {
			if (!have_ep || !(ev->info = connreq_info(ev->fid, eq->trees[t].domdir, ep_id))) {
				ffs_warn("%s: cannot take connection request: %s", eq->trees[t].obj.dir, line);
				free(ev);
				return;
			}
		}
		memcpy(ev->buf, data, dlen);
		ev->len = dlen;
	}
	push(eq, ev);
}

/* parse_text queues the events of the lines in text. Under eq->lock. */
static void parse_text(struct ffs_eq *eq, int t, char *text)
{
	char *line = text, *nl;
	while ((nl = strchr(line, '\n')) != NULL) {
		*nl = 0;
		parse_line(eq, t, line);
		line = nl + 1;
	}
	if (*line)
		parse_line(eq, t, line);
}

static __thread char text[65536];

/* fill reads what tree EQ t holds, without blocking, into the queue. It
 * returns 0, or -FI_EAGAIN when nothing was there. Under eq->lock. */
static int fill(struct ffs_eq *eq, int t)
{
	ssize_t n = pread(eq->trees[t].fd, text, sizeof text - 1, 0);
	if (n < 0)
		return errno == EAGAIN ? -FI_EAGAIN : -ffs_fi_errno(errno);
	if (n == 0)
		return -FI_EAGAIN;
	text[n] = 0;
	parse_text(eq, t, text);
	return 0;
}

/* block waits, without eq->lock, for the events of the EQ's only tree EQ
 * (a read at offset 0 of its events file blocks until one is pending) and
 * queues them. It returns false when it cannot (no tree EQ yet, or
 * several: the caller polls). */
static bool block(struct ffs_eq *eq)
{
	pthread_mutex_lock(&eq->lock);
	int fd = -1;
	if (eq->ntree == 1 && !eq->head) {
		struct eq_tree *tr = &eq->trees[0];
		if (tr->bfd < 0) {
			char p[PATH_MAX + 16];
			snprintf(p, sizeof p, "%s/events", tr->obj.dir);
			tr->bfd = open(p, O_RDONLY | O_CLOEXEC);
		}
		fd = tr->bfd;
	}
	pthread_mutex_unlock(&eq->lock);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, text, sizeof text - 1, 0);
	if (n <= 0)
		return n < 0 && errno == EINTR; /* a signal: look again; else poll */
	text[n] = 0;
	pthread_mutex_lock(&eq->lock);
	parse_text(eq, 0, text);
	pthread_mutex_unlock(&eq->lock);
	return true;
}

/* ---- binding ---- */

int ffs_eq_bind(struct ffs_eq *eq, const char *domdir, const char *kind, unsigned id, fid_t fid, unsigned *tree_id)
{
	struct eq_bind *b = calloc(1, sizeof *b);
	if (!b)
		return -FI_ENOMEM;
	pthread_mutex_lock(&eq->lock);
	int t;
	for (t = 0; t < eq->ntree; t++)
		if (!strcmp(eq->trees[t].domdir, domdir))
			break;
	int ret = 0;
	if (t == eq->ntree) {
		struct eq_tree *tr = &eq->trees[t];
		if (t == MAX_TREES) {
			ret = -FI_ENOSPC;
			goto out;
		}
		snprintf(tr->domdir, sizeof tr->domdir, "%s", domdir);
		if ((ret = ffs_obj_clone(&tr->obj, domdir, "eq")))
			goto out;
		char p[PATH_MAX + 16];
		snprintf(p, sizeof p, "%s/events", tr->obj.dir);
		tr->fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		tr->bfd = -1;
		if (tr->fd < 0) {
			ret = -ffs_fi_errno(errno);
			ffs_obj_close(&tr->obj);
			goto out;
		}
		eq->ntree++;
	}
	b->tree = t;
	snprintf(b->kind, sizeof b->kind, "%s", kind);
	b->id = id;
	b->fid = fid;
	b->next = eq->binds;
	eq->binds = b;
	*tree_id = eq->trees[t].obj.id;
out:
	pthread_mutex_unlock(&eq->lock);
	if (ret)
		free(b);
	return ret;
}

void ffs_eq_unbind(struct ffs_eq *eq, fid_t fid)
{
	pthread_mutex_lock(&eq->lock);
	for (struct eq_bind **p = &eq->binds; *p;) {
		if ((*p)->fid == fid) {
			struct eq_bind *b = *p;
			*p = b->next;
			free(b);
		} else {
			p = &(*p)->next;
		}
	}
	/* Events queued for it go: the application closed what they are about. */
	for (struct eq_event **p = &eq->head; *p;) {
		if ((*p)->fid == fid) {
			struct eq_event *ev = *p;
			*p = ev->next;
			eq->nev--;
			free_event(ev);
		} else {
			p = &(*p)->next;
		}
	}
	eq->tail = NULL;
	for (struct eq_event *ev = eq->head; ev; ev = ev->next)
		eq->tail = ev;
	pthread_mutex_unlock(&eq->lock);
}

/* ---- reading ---- */

static ssize_t eq_read(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	struct ffs_eq *eq = container_of(fid, struct ffs_eq, eq_fid);
	pthread_mutex_lock(&eq->lock);
	if (!eq->head)
		for (int t = 0; t < eq->ntree; t++)
			fill(eq, t);
	struct eq_event *ev = eq->head;
	ssize_t ret;
	if (!ev) {
		ret = -FI_EAGAIN;
		goto out;
	}
	if (ev->error) {
		ret = -FI_EAVAIL;
		goto out;
	}
	bool cm = ev->event == FI_CONNREQ || ev->event == FI_CONNECTED || ev->event == FI_SHUTDOWN;
	if (cm) {
		size_t need = sizeof(struct fi_eq_cm_entry);
		if (!buf || len < need) {
			ret = -FI_ETOOSMALL;
			goto out;
		}
		struct fi_eq_cm_entry *e = buf;
		e->fid = ev->fid;
		e->info = (flags & FI_PEEK) ? NULL : ev->info;
		size_t room = len - need, n = ev->len < room ? ev->len : room;
		memcpy(e->data, ev->buf, n);
		ret = need + n;
	} else {
		/* fi_eq_write's events: the entry as written. */
		if (!buf || len < ev->len) {
			ret = -FI_ETOOSMALL;
			goto out;
		}
		memcpy(buf, ev->buf, ev->len);
		ret = ev->len;
	}
	if (event)
		*event = ev->event;
	if (!(flags & FI_PEEK)) {
		ev->info = NULL; /* the application's now: fi_freeinfo(3) */
		eq->head = ev->next;
		if (!eq->head)
			eq->tail = NULL;
		eq->nev--;
		free_event(ev);
	}
out:
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

static ssize_t eq_readerr(struct fid_eq *fid, struct fi_eq_err_entry *buf, uint64_t flags)
{
	struct ffs_eq *eq = container_of(fid, struct ffs_eq, eq_fid);
	if (!buf)
		return -FI_EINVAL;
	pthread_mutex_lock(&eq->lock);
	if (!eq->head)
		for (int t = 0; t < eq->ntree; t++)
			fill(eq, t);
	struct eq_event *ev = eq->head;
	ssize_t ret = -FI_EAGAIN;
	if (ev && ev->error) {
		void *user = buf->err_data;
		size_t user_size = buf->err_data_size;
		buf->fid = ev->fid;
		buf->context = ev->fid ? ev->fid->context : NULL;
		buf->data = 0;
		buf->err = ev->err;
		buf->prov_errno = ev->prov_errno;
		if (user && user_size) {
			size_t n = ev->len < user_size ? ev->len : user_size;
			memcpy(user, ev->buf, n);
			buf->err_data_size = n;
		} else {
			buf->err_data = ev->len ? ev->buf : NULL;
			buf->err_data_size = ev->len;
		}
		ret = sizeof *buf;
		if (!(flags & FI_PEEK)) {
			eq->head = ev->next;
			if (!eq->head)
				eq->tail = NULL;
			eq->nev--;
			free_event(eq->lasterr);
			eq->lasterr = ev; /* its err_data stays valid until the next readerr */
		}
	}
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

static ssize_t eq_write(struct fid_eq *fid, uint32_t event, const void *buf, size_t len, uint64_t flags)
{
	struct ffs_eq *eq = container_of(fid, struct ffs_eq, eq_fid);
	if (len > sizeof ((struct eq_event *)0)->buf || (len && !buf))
		return -FI_EINVAL;
	struct eq_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return -FI_ENOMEM;
	ev->event = event;
	memcpy(ev->buf, buf, len);
	ev->len = len;
	pthread_mutex_lock(&eq->lock);
	ssize_t ret = len;
	if (eq->max && eq->nev >= eq->max) {
		free(ev);
		ret = -FI_EAGAIN;
	} else {
		push(eq, ev);
	}
	pthread_mutex_unlock(&eq->lock);
	if (ret >= 0)
		ffs_wait_signal(&eq->wait);
	return ret;
}

static ssize_t eq_sread(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags)
{
	/* Without a timeout, an EQ used in one domain blocks in a read of its
	 * tree EQ's events. Otherwise, as the tree's events files have no poll
	 * yet (issue 21): non-blocking reads with a backoff that grows to
	 * MAX_BACKOFF_US. */
	struct ffs_eq *eq = container_of(fid, struct ffs_eq, eq_fid);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	long backoff = 10;
	for (;;) {
		ssize_t ret = eq_read(fid, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		if (timeout < 0 && block(eq))
			continue;
		if (timeout >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
			if (ms >= timeout)
				return -FI_EAGAIN;
		}
		usleep(backoff);
		if (backoff < MAX_BACKOFF_US)
			backoff *= 2;
		if (backoff > MAX_BACKOFF_US)
			backoff = MAX_BACKOFF_US;
	}
}

static const char *eq_strerror(struct fid_eq *fid, int prov_errno, const void *err_data, char *buf, size_t len)
{
	static __thread char own[512];
	if (!buf || !len) {
		buf = own;
		len = sizeof own;
	}
	if (prov_errno)
		snprintf(buf, len, "provider error %d (%s)", prov_errno, strerror(abs(prov_errno)));
	else
		snprintf(buf, len, "%s", fi_strerror(FI_EOTHER));
	return buf;
}

static int eq_close(struct fid *fid)
{
	struct ffs_eq *eq = container_of(fid, struct ffs_eq, eq_fid.fid);
	pthread_mutex_lock(&eq->lock);
	bool busy = eq->binds != NULL || __atomic_load_n(&eq->domains, __ATOMIC_SEQ_CST) > 0;
	pthread_mutex_unlock(&eq->lock);
	if (busy)
		return -FI_EBUSY;
	int ret = ffs_wait_fini(&eq->wait);
	if (ret)
		return ret;
	for (int t = 0; t < eq->ntree; t++) {
		close(eq->trees[t].fd);
		if (eq->trees[t].bfd >= 0)
			close(eq->trees[t].bfd);
		ffs_obj_close(&eq->trees[t].obj);
	}
	while (eq->head) {
		struct eq_event *ev = eq->head;
		eq->head = ev->next;
		free_event(ev);
	}
	free_event(eq->lasterr);
	pthread_mutex_destroy(&eq->lock);
	free(eq);
	return 0;
}

static int eq_control(struct fid *fid, int command, void *arg)
{
	return ffs_wait_control(&container_of(fid, struct ffs_eq, eq_fid.fid)->wait, command, arg);
}

/* eq_ready is the EQ's readiness for wait.c: an event queued, after a
 * look at its tree EQs. */
static bool eq_ready(struct ffs_wait *w, bool trying)
{
	struct ffs_eq *eq = container_of(w, struct ffs_eq, wait);
	pthread_mutex_lock(&eq->lock);
	if (!eq->head)
		for (int t = 0; t < eq->ntree; t++)
			fill(eq, t);
	bool r = eq->head != NULL;
	pthread_mutex_unlock(&eq->lock);
	return r;
}

static struct fi_ops eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = eq_close,
	.bind = ffs_no_bind,
	.control = eq_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_eq eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = eq_read,
	.readerr = eq_readerr,
	.write = eq_write,
	.sread = eq_sread,
	.strerror = eq_strerror,
};

struct ffs_eq *ffs_eq_of(struct fid *fid)
{
	return fid && fid->fclass == FI_CLASS_EQ && fid->ops == &eq_fi_ops ? container_of(fid, struct ffs_eq, eq_fid.fid)
									   : NULL;
}

void ffs_eq_hold(struct ffs_eq *eq, int delta)
{
	__atomic_fetch_add(&eq->domains, delta, __ATOMIC_SEQ_CST);
}

int ffs_eq_mr_complete(struct ffs_eq *eq, struct fid_mr *mr)
{
	/* fi_eq(3): FI_MR_COMPLETE's entry is a struct fi_eq_entry whose fid
	 * is the region and context the registration's. */
	struct fi_eq_entry e = {.fid = &mr->fid, .context = mr->fid.context};
	ssize_t n = eq_write(&eq->eq_fid, FI_MR_COMPLETE, &e, sizeof e, 0);
	return n < 0 ? (int)n : 0;
}

struct ffs_wait *ffs_eq_wait(struct fid *fid)
{
	return fid->fclass == FI_CLASS_EQ && fid->ops == &eq_fi_ops ? &container_of(fid, struct ffs_eq, eq_fid.fid)->wait
								       : NULL;
}

int ffs_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **out, void *context)
{
	if (!attr || !out)
		return -FI_EINVAL;
	struct ffs_eq *eq = calloc(1, sizeof *eq);
	if (!eq)
		return -FI_ENOMEM;
	int ret = ffs_wait_init(&eq->wait, attr->wait_obj, attr->wait_set, eq_ready, NULL);
	if (ret) {
		free(eq);
		return ret;
	}
	eq->fab = fabric ? container_of(fabric, struct ffs_fabric, fabric_fid) : NULL;
	eq->max = attr->size;
	pthread_mutex_init(&eq->lock, NULL);
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &eq_fi_ops;
	eq->eq_fid.ops = &eq_ops;
	*out = &eq->eq_fid;
	return 0;
}
