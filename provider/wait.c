/*
 * wait.c: wait objects. The tree has no pollable files yet (go-fuse does
 * not do FUSE poll: issue 21), so the descriptors an application blocks
 * on are the provider's: an eventfd per CQ, counter or EQ opened with
 * FI_WAIT_FD, one per wait set. fi_trywait arms an object that has nothing
 * to read; one thread per process (the waiter, started by the first arm)
 * watches the armed objects and makes the descriptor of each readable once
 * it has something, then disarms it.
 *
 * The waiter sleeps with FUTEX_WAITV on the completion rings' wake words
 * of the armed CQs (the daemon wakes them: RING_NEED_WAKEUP, docs/abi.md)
 * and on a word of its own that arming wakes. Counters and EQs have no
 * ring: while one is armed the waiter looks at them every POLL_MS (a read
 * of the counter's value and errors, a non-blocking read of the EQ's
 * events). Poll sets (fi_poll) need no thread: they look when asked.
 */
#include "ffs.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How often the waiter looks at armed counters and EQs. */
#define POLL_MS 1
/* The longest the waiter sleeps on rings before it looks again, so that a
 * wake-up lost to another sleeper on the same ring clearing
 * RING_NEED_WAKEUP (fi_cq_sread) delays a descriptor at most this long. */
#define SLICE_MS 100

/* The waiter's state. lock orders before every object's locks. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ffs_wait *waits; /* every object with a descriptor */
static pid_t running;          /* the process that started the waiter thread: a
				* child made by fork has none until it arms */
static pthread_t waiter_thread; /* valid while running is this process */
static bool stopping;          /* ffs_wait_stop asks the waiter to end */
static uint32_t kick;          /* futex word: arming adds 1 and wakes the waiter */

struct ffs_waitset {
	struct fid_wait wait_fid;
	int fd;
	struct ffs_wait *members; /* under lock */
};

static struct fi_ops waitset_fi_ops;

/* ---- descriptors ---- */

void ffs_wait_signal(struct ffs_wait *w)
{
	uint64_t one = 1;
	if (w->fd >= 0 && write(w->fd, &one, sizeof one) < 0 && errno != EAGAIN)
		ffs_warn("signaling a wait descriptor: %s", strerror(errno));
}

/* drain makes fd unreadable again (it is non-blocking). */
static void drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) > 0)
		;
}

/* ---- the waiter thread ---- */

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* look signals and disarms every armed object that has something to read.
 * Before each CQ's look it takes its ring's wake word and asks the daemon
 * for wake-ups, so that a completion after the look ends the sleep on
 * that word; wv gets those words and the kick word. It returns how many
 * words, and sets *polled when a counter or EQ stays armed. Under lock. */
static unsigned look(struct futex_waitv *wv, unsigned max, bool *polled)
{
	unsigned n = 0;
	*polled = false;
	wv[n++] = (struct futex_waitv){
		.val = __atomic_load_n(&kick, __ATOMIC_SEQ_CST),
		.uaddr = (uintptr_t)&kick,
		.flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
	};
	for (struct ffs_wait *w = waits; w; w = w->next) {
		if (!w->armed)
			continue;
		struct fabricfs_ring *r = w->ring;
		uint32_t val = 0;
		if (r) {
			val = __atomic_load_n(r->wake, __ATOMIC_SEQ_CST);
			__atomic_fetch_or(r->flags, FABRICFS_RING_NEED_WAKEUP, __ATOMIC_SEQ_CST);
			fabricfs_fence();
		}
		if (w->ready(w, false)) {
			w->armed = false;
			if (r)
				__atomic_fetch_and(r->flags, ~FABRICFS_RING_NEED_WAKEUP, __ATOMIC_SEQ_CST);
			ffs_wait_signal(w);
		} else if (r && n < max) {
			wv[n++] = (struct futex_waitv){.val = val, .uaddr = (uintptr_t)r->wake, .flags = FUTEX_32};
		} else {
			*polled = true; /* no ring, or more rings than FUTEX_WAITV takes */
		}
	}
	return n;
}

static void *waiter(void *arg)
{
	struct futex_waitv wv[FUTEX_WAITV_MAX];
	pthread_mutex_lock(&lock);
	while (!stopping) {
		bool polled;
		unsigned n = look(wv, FUTEX_WAITV_MAX, &polled);
		pthread_mutex_unlock(&lock);
		int64_t deadline = now_ns() + (int64_t)(polled ? POLL_MS : SLICE_MS) * 1000000;
		struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
		/* A CQ closed meanwhile leaves a word of unmapped memory here:
		 * the call fails (EFAULT) or sleeps to the deadline, harmless. */
		if (syscall(SYS_futex_waitv, wv, n, 0, &ts, CLOCK_MONOTONIC) < 0 && errno == ENOSYS) {
			/* A kernel before 5.16: look every POLL_MS. */
			struct timespec p = {0, POLL_MS * 1000000};
			nanosleep(&p, NULL);
		}
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* wake_waiter makes the waiter look again. Under lock. */
static void wake_waiter(void)
{
	__atomic_fetch_add(&kick, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ffs_wait_stop(void)
{
	pthread_mutex_lock(&lock);
	bool mine = running == getpid();
	if (mine) {
		stopping = true;
		wake_waiter();
	}
	pthread_mutex_unlock(&lock);
	if (!mine)
		return;
	pthread_join(waiter_thread, NULL);
	pthread_mutex_lock(&lock);
	running = 0;
	stopping = false;
	pthread_mutex_unlock(&lock);
}

/* arm arms w (nothing to read yet) and makes sure the waiter runs and
 * looks. Under lock. */
static int arm(struct ffs_wait *w)
{
	if (running != getpid()) {
		/* The waiter blocks every signal (it inherits the mask), so
		 * that the application's signals go to its own threads. It is
		 * joinable: ffs_wait_stop ends it before libfabric unloads
		 * the provider, whose code it runs. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		int e = pthread_create(&waiter_thread, NULL, waiter, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (e)
			return -FI_ENOMEM;
		running = getpid();
	}
	w->armed = true;
	wake_waiter();
	return 0;
}

/* ---- objects ---- */

int ffs_wait_init(struct ffs_wait *w, enum fi_wait_obj obj, struct fid_wait *set,
		  bool (*ready)(struct ffs_wait *, bool), struct fabricfs_ring *ring)
{
	*w = (struct ffs_wait){.obj = obj, .fd = -1, .ready = ready, .ring = ring};
	switch (obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
		/* fi_cq_sread, fi_eq_sread and fi_cntr_wait sleep in the
		 * calling thread (docs/provider.md "Waiting"). */
		return 0;
	case FI_WAIT_FD:
		w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->fd < 0)
			return -ffs_fi_errno(errno);
		w->own_fd = true;
		break;
	case FI_WAIT_SET:
		if (!set || set->fid.ops != &waitset_fi_ops)
			return -FI_EINVAL;
		w->set = container_of(set, struct ffs_waitset, wait_fid);
		w->fd = w->set->fd;
		break;
	default:
		return -FI_ENOSYS;
	}
	pthread_mutex_lock(&lock);
	w->next = waits;
	waits = w;
	if (w->set) {
		w->set_next = w->set->members;
		w->set->members = w;
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

int ffs_wait_fini(struct ffs_wait *w)
{
	pthread_mutex_lock(&lock);
	if (w->polls) {
		pthread_mutex_unlock(&lock);
		return -FI_EBUSY;
	}
	for (struct ffs_wait **p = &waits; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	if (w->set)
		for (struct ffs_wait **p = &w->set->members; *p; p = &(*p)->set_next)
			if (*p == w) {
				*p = w->set_next;
				break;
			}
	pthread_mutex_unlock(&lock);
	if (w->own_fd)
		close(w->fd);
	w->fd = -1;
	return 0;
}

int ffs_wait_control(struct ffs_wait *w, int command, void *arg)
{
	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		if (w->fd < 0)
			return -FI_ENODATA; /* FI_WAIT_NONE, FI_WAIT_UNSPEC: no descriptor */
		*(int *)arg = w->fd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = w->obj;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* try is fi_trywait of one object: -FI_EAGAIN when it has something to
 * read, else it is armed (0). Under lock. */
static int try(struct ffs_wait *w)
{
	if (w->ready(w, true))
		return -FI_EAGAIN;
	return arm(w);
}

/* set_try is fi_trywait of a wait set: its descriptor is drained, then
 * every member is tried. Under lock. */
static int set_try(struct ffs_waitset *s)
{
	drain(s->fd);
	int ret = 0;
	for (struct ffs_wait *w = s->members; w && !ret; w = w->set_next)
		ret = try(w);
	return ret;
}

int ffs_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	if (count < 0 || (count && !fids))
		return -FI_EINVAL;
	int ret = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < count && !ret; i++) {
		struct fid *f = fids[i];
		struct ffs_wait *w = NULL;
		if (f && f->ops == &waitset_fi_ops) {
			ret = set_try(container_of(f, struct ffs_waitset, wait_fid.fid));
			continue;
		}
		if (f && !(w = ffs_cq_wait(f)) && !(w = ffs_cntr_wait(f)))
			w = ffs_eq_wait(f);
		if (!w || w->fd < 0) {
			/* Not ours, or without a descriptor to block on. */
			ret = -FI_EINVAL;
			continue;
		}
		if (w->set) {
			ret = set_try(w->set);
			continue;
		}
		drain(w->fd);
		ret = try(w);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/* ---- wait sets ---- */

static int waitset_wait(struct fid_wait *fid, int timeout)
{
	struct ffs_waitset *s = container_of(fid, struct ffs_waitset, wait_fid);
	int64_t deadline = timeout >= 0 ? now_ns() + (int64_t)timeout * 1000000 : 0;
	for (;;) {
		pthread_mutex_lock(&lock);
		int ret = set_try(s);
		pthread_mutex_unlock(&lock);
		if (ret == -FI_EAGAIN)
			return 0; /* a member has something */
		if (ret)
			return ret;
		int ms = -1;
		if (timeout >= 0) {
			int64_t left = deadline - now_ns();
			if (left <= 0)
				return -FI_ETIMEDOUT;
			ms = (int)((left + 999999) / 1000000);
		}
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			return -ffs_fi_errno(errno);
	}
}

static int waitset_close(struct fid *fid)
{
	struct ffs_waitset *s = container_of(fid, struct ffs_waitset, wait_fid.fid);
	pthread_mutex_lock(&lock);
	bool busy = s->members != NULL;
	pthread_mutex_unlock(&lock);
	if (busy)
		return -FI_EBUSY; /* fi_poll(3): no bound resources at close */
	close(s->fd);
	free(s);
	return 0;
}

static int waitset_control(struct fid *fid, int command, void *arg)
{
	struct ffs_waitset *s = container_of(fid, struct ffs_waitset, wait_fid.fid);
	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		*(int *)arg = s->fd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = FI_WAIT_FD;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static struct fi_ops waitset_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = waitset_close,
	.bind = ffs_no_bind,
	.control = waitset_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_wait waitset_ops = {
	.size = sizeof(struct fi_ops_wait),
	.wait = waitset_wait,
};

int ffs_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr, struct fid_wait **out)
{
	if (!attr || !out)
		return -FI_EINVAL;
	if (attr->flags)
		return -FI_EINVAL; /* "reserved and must be set to 0" */
	if (attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_FD)
		return -FI_ENOSYS;
	struct ffs_waitset *s = calloc(1, sizeof *s);
	if (!s)
		return -FI_ENOMEM;
	s->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->fd < 0) {
		int ret = -ffs_fi_errno(errno);
		free(s);
		return ret;
	}
	s->wait_fid.fid.fclass = FI_CLASS_WAIT;
	s->wait_fid.fid.ops = &waitset_fi_ops;
	s->wait_fid.ops = &waitset_ops;
	*out = &s->wait_fid;
	return 0;
}

/* ---- poll sets ---- */

struct poll_member {
	struct fid *fid;
	struct ffs_wait *w;
	struct ffs_cntr *cntr; /* or NULL: a CQ */
};

struct ffs_pollset {
	struct fid_poll poll_fid;
	struct ffs_domain *dom;
	pthread_mutex_t plock;
	struct poll_member *m;
	int n, cap;
};

void ffs_cntr_polled(struct ffs_cntr *c)
{
	uint64_t v, e;
	ffs_cntr_counts(c, &v, &e);
	pthread_mutex_lock(&lock);
	c->polled_value = v;
	c->polled_errors = e;
	pthread_mutex_unlock(&lock);
}

static int pollset_poll(struct fid_poll *fid, void **context, int count)
{
	struct ffs_pollset *ps = container_of(fid, struct ffs_pollset, poll_fid);
	if (count < 0 || (count && !context))
		return -FI_EINVAL;
	int n = 0;
	pthread_mutex_lock(&ps->plock);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ps->n && n < count; i++) {
		struct poll_member *m = &ps->m[i];
		bool ev;
		if (m->cntr) {
			/* fi_poll(3): a counter whose value or error count
			 * changed since the last fi_poll, fi_cntr_set or
			 * fi_cntr_add. */
			struct ffs_cntr *c = m->cntr;
			uint64_t v, e;
			ffs_cntr_counts(c, &v, &e);
			ev = v != c->polled_value || e != c->polled_errors;
			c->polled_value = v;
			c->polled_errors = e;
		} else {
			ev = m->w->ready(m->w, false);
		}
		if (ev)
			context[n++] = m->fid->context;
	}
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&ps->plock);
	/* After the counts, as fi_cntr_read: what they count is finished. */
	ffs_domain_progress(ps->dom);
	return n;
}

static int pollset_add(struct fid_poll *fid, struct fid *event_fid, uint64_t flags)
{
	struct ffs_pollset *ps = container_of(fid, struct ffs_pollset, poll_fid);
	if (!event_fid)
		return -FI_EINVAL;
	struct poll_member m = {.fid = event_fid};
	struct ffs_wait *cq = ffs_cq_wait(event_fid), *cn = ffs_cntr_wait(event_fid);
	if (cq)
		m.w = cq;
	else if (cn) {
		m.w = cn;
		m.cntr = container_of(event_fid, struct ffs_cntr, cntr_fid.fid);
	} else
		return -FI_EINVAL; /* CQs and counters of this provider only */
	pthread_mutex_lock(&ps->plock);
	int ret = 0;
	if (ps->n == ps->cap) {
		int cap = ps->cap ? 2 * ps->cap : 8;
		struct poll_member *nm = realloc(ps->m, cap * sizeof *nm);
		if (!nm) {
			ret = -FI_ENOMEM;
			goto out;
		}
		ps->m = nm;
		ps->cap = cap;
	}
	ps->m[ps->n++] = m;
	pthread_mutex_lock(&lock);
	__atomic_add_fetch(&m.w->polls, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
out:
	pthread_mutex_unlock(&ps->plock);
	return ret;
}

static int pollset_del(struct fid_poll *fid, struct fid *event_fid, uint64_t flags)
{
	struct ffs_pollset *ps = container_of(fid, struct ffs_pollset, poll_fid);
	int ret = -FI_ENOENT;
	pthread_mutex_lock(&ps->plock);
	for (int i = 0; i < ps->n; i++)
		if (ps->m[i].fid == event_fid) {
			pthread_mutex_lock(&lock);
			__atomic_sub_fetch(&ps->m[i].w->polls, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&lock);
			ps->m[i] = ps->m[--ps->n];
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&ps->plock);
	return ret;
}

static int pollset_close(struct fid *fid)
{
	struct ffs_pollset *ps = container_of(fid, struct ffs_pollset, poll_fid.fid);
	/* Members still in the set are let go: they may be closed next. */
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ps->n; i++)
		__atomic_sub_fetch(&ps->m[i].w->polls, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
	pthread_mutex_destroy(&ps->plock);
	ffs_domain_hold(ps->dom, -1);
	free(ps->m);
	free(ps);
	return 0;
}

static struct fi_ops pollset_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = pollset_close,
	.bind = ffs_no_bind,
	.control = ffs_no_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_poll pollset_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = pollset_poll,
	.poll_add = pollset_add,
	.poll_del = pollset_del,
};

int ffs_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr, struct fid_poll **out)
{
	if (!domain || !out)
		return -FI_EINVAL;
	if (attr && attr->flags)
		return -FI_EINVAL; /* "reserved and must be set to 0" */
	struct ffs_pollset *ps = calloc(1, sizeof *ps);
	if (!ps)
		return -FI_ENOMEM;
	ps->dom = container_of(domain, struct ffs_domain, domain_fid);
	pthread_mutex_init(&ps->plock, NULL);
	ps->poll_fid.fid.fclass = FI_CLASS_POLL;
	ps->poll_fid.fid.ops = &pollset_fi_ops;
	ps->poll_fid.ops = &pollset_ops;
	ffs_domain_hold(ps->dom, 1);
	*out = &ps->poll_fid;
	return 0;
}
