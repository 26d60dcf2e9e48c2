/*
 * fitest.h: what the provider's libfabric test programs share (msgtest,
 * rdmtest, waittest: programs that use only libfabric's API, with
 * FI_PROVIDER_PATH pointing at the provider): the headers, fail, now,
 * the test data (pattern, fill, check_bytes), cq_poll and cq_take, POST (with the program's progress) and CHECK, which fails the program with the call, its code and
 * fi_strerror's text when a call does not return 0.
 */
#ifndef FITEST_H
#define FITEST_H

#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* fail prints "FAIL: " and the message, and exits 1. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	exit(1);
}

/* now is the monotonic clock in seconds, for deadlines. */
static inline double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* pattern is byte i of test data number seed: fill writes it, check_bytes
 * fails the program where p differs from it. */
static inline uint8_t pattern(size_t seed, size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9) + seed * 13 + 1);
}

static inline void fill(uint8_t *p, size_t n, size_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(seed, i);
}

static inline void check_bytes(const uint8_t *p, size_t n, size_t seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(seed, i))
			fail("%s: byte %zu is %#x, want %#x", what, i, p[i], pattern(seed, i));
}

/* cq_poll reads one entry of cq's format into e, and its source into src
 * (fi_cq_readfrom) if src is not NULL, until now() passes deadline: false
 * if none came. An error entry fails the program with fi_cq_strerror's
 * text. */
static inline bool cq_poll(struct fid_cq *cq, void *e, fi_addr_t *src, double deadline, const char *what)
{
	for (;;) {
		ssize_t n = src ? fi_cq_readfrom(cq, e, 1, src) : fi_cq_read(cq, e, 1);
		if (n == 1)
			return true;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fail("%s: error completion %d (%s)", what, err.err,
			     fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));
		}
		if (n != -FI_EAGAIN)
			fail("%s: fi_cq_read: %zd", what, n);
		if (now() > deadline)
			return false;
	}
}

/* cq_take is cq_poll that fails the program when no entry comes within
 * 5 s. */
static inline void cq_take(struct fid_cq *cq, void *e, fi_addr_t *src, const char *what)
{
	if (!cq_poll(cq, e, src, now() + 5, what))
		fail("%s: no completion after 5 s", what);
}

#define CHECK(call)                                                                                                    \
	do {                                                                                                           \
		int ret_ = (int)(call);                                                                                \
		if (ret_)                                                                                              \
			fail("%s:%d: %s: %d (%s)", __FILE__, __LINE__, #call, ret_, fi_strerror(-ret_));               \
	} while (0)

/* POST posts, again while the call is -FI_EAGAIN ("the application must
 * progress the endpoint", fi_msg(3)) for up to 5 s, calling the program's
 * progress(), and fails on any other error. */
#define POST(call)                                                                                                     \
	do {                                                                                                           \
		ssize_t ret_;                                                                                          \
		for (double end_ = now() + 5; (ret_ = (call)) == -FI_EAGAIN && now() < end_;)                         \
			progress();                                                                                    \
		if (ret_)                                                                                              \
			fail("%s:%d: %s: %zd (%s)", __FILE__, __LINE__, #call, ret_, fi_strerror((int)-ret_));         \
	} while (0)

#endif /* FITEST_H */
