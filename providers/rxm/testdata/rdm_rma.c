/*
 * rdm_rma: a real libfabric FI_EP_RDM endpoint (tcp;ofi_rxm) doing RMA
 * with a fabricfs RDM endpoint, for providers/rxm/interop_test.go.
 *
 *   rdm_rma GOPORT GOKEY
 *
 * The fabricfs endpoint listens on 127.0.0.1:GOPORT and exposes a region
 * with key GOKEY (addresses are offsets) holding pattern 6 at 4000..5000.
 * This program:
 *   1. prints "port P key K base B": its endpoint's port, and its region's
 *      key and base (0 with offsets, else the virtual address); the region
 *      holds pattern 3 at 8000..9000;
 *   2. does on the fabricfs region: fi_write (pattern 1, 1000 bytes at 0),
 *      fi_writedata (pattern 2, 500 bytes at 2000, data 0x7777), a
 *      delivery-complete fi_writemsg (pattern 4, 300 bytes at 3000),
 *      fi_inject_write (pattern 5, 32 bytes at 3500), fi_read (1000 bytes
 *      at 4000: pattern 6), and prints "c2go ok";
 *   3. polls its CQ until fabricfs's fi_writedata arrives (data 0x8888):
 *      fabricfs writes pattern 7 (1000 bytes at 0), reads 8000..9000,
 *      writes pattern 9 (100 bytes at 2000) delivery-complete, then
 *      writedata pattern 8 (200 bytes at 1000); checks them and prints
 *      "go2c ok";
 *   4. exits when stdin closes.
 * Errors go to stderr with exit status 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define CHECK(x)                                                         \
	do {                                                             \
		ssize_t r_ = (x);                                        \
		if (r_) {                                                \
			fprintf(stderr, "rdm_rma: line %d: %s: %s\n",    \
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

enum { REGION = 16384, LOCAL = 16384, TOTAL = REGION + LOCAL };

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_mr *mr;
static fi_addr_t peer;
static unsigned char *buf;
static uint64_t base;

static void fail(const char *what)
{
	fprintf(stderr, "rdm_rma: %s\n", what);
	exit(1);
}

/* The same bytes as pattern(seed, n) in the Go tests. */
static void pattern(unsigned char *p, int seed, int n)
{
	int k;

	for (k = 0; k < n; k++)
		p[k] = (unsigned char) (seed * 31 + k * 7 + (k >> 8));
}

static int is_pattern(const unsigned char *p, int seed, int n)
{
	unsigned char want[1024];

	pattern(want, seed, n);
	return memcmp(p, want, n) == 0;
}

static void progress(void)
{
	struct fi_cq_data_entry e;

	(void) fi_cq_read(cq, &e, 0);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads the next completion, within 10 seconds; an error entry fails. */
static void next(struct fi_cq_data_entry *e, const char *what)
{
	struct fi_cq_err_entry err;
	double end = now() + 10;
	ssize_t r;

	for (;;) {
		r = fi_cq_read(cq, e, 1);
		if (r == 1)
			return;
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "rdm_rma: %s: error %d (%s)\n", what,
				err.err, fi_strerror(err.err));
			exit(1);
		}
		if (r != -FI_EAGAIN) {
			fprintf(stderr, "rdm_rma: %s: fi_cq_read: %s\n", what,
				fi_strerror((int) -r));
			exit(1);
		}
		if (now() > end) {
			fprintf(stderr, "rdm_rma: %s: no completion\n", what);
			exit(1);
		}
	}
}

/* Waits for the completion of the operation with context ctx. */
static void wait_op(void *ctx, uint64_t flags, const char *what)
{
	struct fi_cq_data_entry e;

	next(&e, what);
	if (e.op_context != ctx || (e.flags & flags) != flags) {
		fprintf(stderr, "rdm_rma: %s: completion flags %#" PRIx64
			" context %p\n", what, e.flags, e.op_context);
		exit(1);
	}
}

static void setup(int goport)
{
	struct fi_info *hints, *info;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct sockaddr_in sin = { .sin_family = AF_INET };

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
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

	buf = calloc(1, TOTAL);
	if (!buf)
		fail("out of memory");
	CHECK(fi_mr_reg(domain, buf, TOTAL,
			FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, 0xc0ffee, 0, &mr, NULL));
	if (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
		base = (uintptr_t) buf;

	sin.sin_port = htons(goport);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fi_av_insert(av, &sin, 1, &peer, 0, NULL) != 1)
		fail("fi_av_insert failed");
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	struct fi_context ctx[8];
	struct fi_cq_data_entry e;
	struct sockaddr_in me;
	size_t len = sizeof me;
	unsigned char *src, *dst;
	uint64_t key;
	struct iovec iov;
	struct fi_rma_iov rma;
	struct fi_msg_rma msg;
	void *desc;
	char line[64];

	if (argc != 3)
		fail("usage: rdm_rma GOPORT GOKEY");
	key = strtoull(argv[2], NULL, 0);
	setup(atoi(argv[1]));
	desc = fi_mr_desc(mr);
	src = buf + REGION;
	dst = buf + REGION + 8192;

	CHECK(fi_getname(&ep->fid, &me, &len));
	pattern(buf + 8000, 3, 1000);
	printf("port %d key %" PRIu64 " base %" PRIu64 "\n", ntohs(me.sin_port),
	       fi_mr_key(mr), base);
	fflush(stdout);

	pattern(src, 1, 1000);
	POST(fi_write(ep, src, 1000, desc, peer, 0, key, &ctx[0]));
	wait_op(&ctx[0], FI_RMA | FI_WRITE, "write");

	pattern(src, 2, 500);
	POST(fi_writedata(ep, src, 500, desc, 0x7777, peer, 2000, key,
			  &ctx[1]));
	wait_op(&ctx[1], FI_RMA | FI_WRITE, "writedata");

	pattern(src, 4, 300);
	iov.iov_base = src;
	iov.iov_len = 300;
	rma.addr = 3000;
	rma.len = 300;
	rma.key = key;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.desc = &desc;
	msg.iov_count = 1;
	msg.addr = peer;
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	msg.context = &ctx[2];
	POST(fi_writemsg(ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION));
	wait_op(&ctx[2], FI_RMA | FI_WRITE, "delivery-complete write");

	pattern(src, 5, 32);
	POST(fi_inject_write(ep, src, 32, peer, 3500, key));

	POST(fi_read(ep, dst, 1000, desc, peer, 4000, key, &ctx[3]));
	wait_op(&ctx[3], FI_RMA | FI_READ, "read");
	if (!is_pattern(dst, 6, 1000))
		fail("read: the bytes differ");
	printf("c2go ok\n");
	fflush(stdout);

	next(&e, "remote writedata");
	if (e.flags != (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA) &&
	    e.flags != (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) {
		fprintf(stderr, "rdm_rma: remote writedata: flags %#" PRIx64
			"\n", e.flags);
		exit(1);
	}
	if (e.data != 0x8888)
		fail("remote writedata: wrong data");
	if (!is_pattern(buf, 7, 1000))
		fail("fabricfs's write: the bytes differ");
	if (!is_pattern(buf + 2000, 9, 100))
		fail("fabricfs's delivery-complete write: the bytes differ");
	if (!is_pattern(buf + 1000, 8, 200))
		fail("fabricfs's writedata: the bytes differ");
	printf("go2c ok %#" PRIx64 "\n", e.flags);
	fflush(stdout);

	while (fgets(line, sizeof line, stdin))
		;
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	return 0;
}
