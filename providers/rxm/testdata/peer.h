/*
 * peer.h: what the libfabric peers of providers/rxm's interop tests
 * (rdm_rma.c, rdm_atomic.c, rdm_sar.c) share: their tcp;ofi_rxm endpoint
 * on 127.0.0.1 with its CQ and AV and the fabricfs endpoint as its one
 * peer, failing with a message, the Go tests' byte pattern, and waiting
 * for an operation's completion. A program defines PROG, its name for
 * messages, before including it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define CHECK(x)                                                         \
	do {                                                             \
		ssize_t r_ = (x);                                        \
		if (r_) {                                                \
			fprintf(stderr, PROG ": line %d: %s: %s\n",      \
				__LINE__, #x, fi_strerror((int) -r_));   \
			exit(1);                                         \
		}                                                        \
	} while (0)

/* Retries while rxm answers -FI_EAGAIN (it connects meanwhile). */
#define POST(x)                                                          \
	do {                                                             \
		ssize_t r_;                                              \
		while ((r_ = (x)) == -FI_EAGAIN)                         \
			progress();                                      \
		CHECK(r_);                                               \
	} while (0)

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static fi_addr_t peer;

static inline void fail(const char *what)
{
	fprintf(stderr, PROG ": %s\n", what);
	exit(1);
}

/* The same bytes as pattern(seed, n) in the Go tests. */
static inline void pattern(unsigned char *p, int seed, int n)
{
	int k;

	for (k = 0; k < n; k++)
		p[k] = (unsigned char) (seed * 31 + k * 7 + (k >> 8));
}

/*
 * Drives the endpoint (rxm makes progress in fi_cq_read). Error entries
 * without a context are taken off the queue: after an atomic's error,
 * libfabric 1.17's rxm writes more of them (docs/rxm.md, 7.), and an
 * error left at the head of the queue would stop the progress.
 */
static inline void progress(void)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;

	if (fi_cq_read(cq, &e, 0) != -FI_EAVAIL)
		return;
	memset(&err, 0, sizeof err);
	fi_cq_readerr(cq, &err, 0);
	if (err.op_context) {
		fprintf(stderr, PROG ": error %d (%s) of an operation\n",
			err.err, fi_strerror(err.err));
		exit(1);
	}
}

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Waits for the completion of the operation with context ctx, within 10
 * seconds, into e (if not NULL): 0, or the error of its error entry. An
 * entry of another operation fails; error entries without a context are
 * skipped: after an atomic's error, libfabric 1.17's rxm writes more of
 * them (docs/rxm.md, 7.).
 */
static inline int wait_op(void *ctx, uint64_t flags, struct fi_cq_data_entry *e,
		   const char *what)
{
	struct fi_cq_data_entry got;
	struct fi_cq_err_entry err;
	double end = now() + 10;
	ssize_t r;

	for (;;) {
		r = fi_cq_read(cq, &got, 1);
		if (r == 1) {
			if (got.op_context != ctx || (got.flags & flags) != flags) {
				fprintf(stderr, PROG ": %s: completion flags %#"
					PRIx64 " context %p\n", what, got.flags,
					got.op_context);
				exit(1);
			}
			if (e)
				*e = got;
			return 0;
		}
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			fi_cq_readerr(cq, &err, 0);
			if (err.op_context == ctx)
				return err.err;
			if (err.op_context) {
				fprintf(stderr, PROG ": %s: error %d (%s) of "
					"another operation\n", what, err.err,
					fi_strerror(err.err));
				exit(1);
			}
			continue;
		}
		if (r != -FI_EAGAIN) {
			fprintf(stderr, PROG ": %s: fi_cq_read: %s\n", what,
				fi_strerror((int) -r));
			exit(1);
		}
		if (now() > end) {
			fprintf(stderr, PROG ": %s: no completion\n", what);
			exit(1);
		}
	}
}

/* wait_ok is wait_op, failing on an error entry. */
static inline void wait_ok(void *ctx, uint64_t flags, struct fi_cq_data_entry *e,
		    const char *what)
{
	int err = wait_op(ctx, flags, e, what);

	if (err) {
		fprintf(stderr, PROG ": %s: error %d (%s)\n", what, err,
			fi_strerror(err));
		exit(1);
	}
}

/*
 * Opens an FI_EP_RDM endpoint of tcp;ofi_rxm on 127.0.0.1 with caps and
 * mr_mode, its CQ (FI_CQ_FORMAT_DATA) and AV (FI_AV_MAP), and inserts the
 * fabricfs endpoint listening on 127.0.0.1:goport as peer. It returns the
 * domain's mr_mode.
 */
static inline uint64_t open_peer(int goport, uint64_t caps, uint64_t mr_mode)
{
	struct fi_info *hints, *info;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint64_t mode;

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->mr_mode = mr_mode;
	hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
	CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE,
			 hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));

	sin.sin_port = htons(goport);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fi_av_insert(av, &sin, 1, &peer, 0, NULL) != 1)
		fail("fi_av_insert failed");
	mode = info->domain_attr->mr_mode;
	fi_freeinfo(hints);
	fi_freeinfo(info);
	return mode;
}
