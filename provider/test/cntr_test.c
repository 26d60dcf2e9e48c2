/*
 * cntr_test.c: counters over a mounted tree (FI_FABRICFS_ROOT): read,
 * add, set and their error twins, wait with and without a timeout, the
 * wake-ups of a wait by another thread's add (value) or adderr
 * (-FI_EAVAIL), the attributes refused, an FI_WAIT_FD counter's
 * descriptor, and fi_close of a bound counter.
 */
#include "ffstest.h"

#include <time.h>

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct later {
	struct fid_cntr *c;
	bool err; /* adderr instead of add */
};

/* add_later adds 10 to the counter (or 1 to its errors) after 100 ms. */
static void *add_later(void *arg)
{
	struct later *l = arg;
	struct timespec d = {0, 100 * 1000 * 1000};
	nanosleep(&d, NULL);
	if (l->err)
		fi_cntr_adderr(l->c, 1);
	else
		fi_cntr_add(l->c, 10);
	return NULL;
}

int main(void)
{
	struct ffs_domain *dom = test_domain("tcp", "lo");
	struct fid_cntr *c;
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	int ret = ffs_cntr_open(&dom->domain_fid, &attr, &c, NULL);
	if (ret) {
		fprintf(stderr, "fi_cntr_open: %s\n", fi_strerror(-ret));
		return 1;
	}
	struct ffs_cntr *fc = container_of(c, struct ffs_cntr, cntr_fid);

	int calls = progress_calls;
	CHECK(fi_cntr_read(c) == 0, "new counter reads %llu", (unsigned long long)fi_cntr_read(c));
	CHECK(progress_calls > calls, "fi_cntr_read did not call ffs_domain_progress first");
	CHECK(fi_cntr_add(c, 5) == 0 && fi_cntr_read(c) == 5, "after add 5: %llu", (unsigned long long)fi_cntr_read(c));
	CHECK(fi_cntr_set(c, 2) == 0 && fi_cntr_read(c) == 2, "after set 2: %llu", (unsigned long long)fi_cntr_read(c));
	CHECK(fi_cntr_adderr(c, 3) == 0 && fi_cntr_readerr(c) == 3, "after adderr 3: %llu",
	      (unsigned long long)fi_cntr_readerr(c));
	CHECK(fi_cntr_seterr(c, 1) == 0 && fi_cntr_readerr(c) == 1, "after seterr 1: %llu",
	      (unsigned long long)fi_cntr_readerr(c));
	char v[64];
	CHECK(obj_read(fc->obj.dir, "value", v, sizeof v) > 0 && strcmp(v, "2") == 0, "tree's value %s, want 2", v);

	/* wait: reached, polled, timed out. */
	CHECK(fi_cntr_wait(c, 2, 1000) == 0, "wait for 2 of 2");
	CHECK(fi_cntr_wait(c, 2, -1) == 0, "wait for 2 of 2, no timeout");
	int64_t t0 = now_ms();
	ret = fi_cntr_wait(c, 3, 0);
	CHECK(ret == -FI_ETIMEDOUT && now_ms() - t0 < 100, "wait for 3 with timeout 0: %d after %lld ms", ret,
	      (long long)(now_ms() - t0));
	t0 = now_ms();
	ret = fi_cntr_wait(c, 3, 150);
	int64_t took = now_ms() - t0;
	CHECK(ret == -FI_ETIMEDOUT && took >= 150 && took < 2000, "wait for 3, 150 ms: %d after %lld ms", ret,
	      (long long)took);
	CHECK(fi_cntr_readerr(c) == 1, "a timeout changed the error count");

	/* Another thread's add ends a wait; its adderr ends it with
	 * -FI_EAVAIL. */
	pthread_t th;
	struct later l = {c, false};
	pthread_create(&th, NULL, add_later, &l);
	t0 = now_ms();
	ret = fi_cntr_wait(c, 12, 5000);
	pthread_join(th, NULL);
	CHECK(ret == 0 && fi_cntr_read(c) == 12, "wait for 12 while 10 are added: %d, value %llu", ret,
	      (unsigned long long)fi_cntr_read(c));
	l.err = true;
	pthread_create(&th, NULL, add_later, &l);
	ret = fi_cntr_wait(c, 100, -1);
	pthread_join(th, NULL);
	CHECK(ret == -FI_EAVAIL, "wait while the error count rises: %d, want -FI_EAVAIL", ret);

	/* Attributes. */
	struct fid_cntr *x;
	struct fi_cntr_attr bad = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_MUTEX_COND};
	CHECK(ffs_cntr_open(&dom->domain_fid, &bad, &x, NULL) == -FI_ENOSYS, "wait_obj FI_WAIT_MUTEX_COND");
	bad.wait_obj = FI_WAIT_SET; /* without a wait set */
	CHECK(ffs_cntr_open(&dom->domain_fid, &bad, &x, NULL) == -FI_EINVAL, "wait_obj FI_WAIT_SET, no set");
	bad.wait_obj = FI_WAIT_FD;
	ret = ffs_cntr_open(&dom->domain_fid, &bad, &x, NULL);
	CHECK(ret == 0, "wait_obj FI_WAIT_FD: %d", ret);
	if (ret == 0) {
		int fd = -1;
		CHECK(fi_control(&x->fid, FI_GETWAIT, &fd) == 0 && fd >= 0, "FI_GETWAIT: fd %d", fd);
		CHECK(fi_close(&x->fid) == 0, "closing it");
	}
	bad.wait_obj = FI_WAIT_NONE;
	bad.flags = 1;
	CHECK(ffs_cntr_open(&dom->domain_fid, &bad, &x, NULL) == -FI_EINVAL, "flags 1");
	bad.flags = 0;
	bad.events = (enum fi_cntr_events)1;
	CHECK(ffs_cntr_open(&dom->domain_fid, &bad, &x, NULL) == -FI_ENOSYS, "events 1");
	ret = ffs_cntr_open(&dom->domain_fid, NULL, &x, NULL);
	CHECK(ret == 0, "fi_cntr_open without attributes: %d", ret);
	if (ret == 0)
		CHECK(fi_close(&x->fid) == 0, "closing it");

	/* A counter bound to an endpoint cannot be closed (-FI_EBUSY). */
	struct ffs_obj ep;
	ret = ffs_obj_clone(&ep, dom->dir, "ep");
	CHECK(ret == 0, "ep clone: %d", ret);
	ret = ffs_ctl(&ep, "bind cntr %u send", fc->obj.id);
	CHECK(ret == 0, "bind cntr: %d", ret);
	CHECK(fi_close(&c->fid) == -FI_EBUSY, "closing a bound counter");
	ffs_obj_close(&ep);
	/* The endpoint closes in the daemon once its ctl is closed. */
	for (int i = 0; i < 100 && (ret = fi_close(&c->fid)) == -FI_EBUSY; i++) {
		struct timespec d = {0, 10 * 1000 * 1000};
		nanosleep(&d, NULL);
	}
	CHECK(ret == 0, "closing the counter once the endpoint is closed: %d", ret);
	return done("cntr");
}
