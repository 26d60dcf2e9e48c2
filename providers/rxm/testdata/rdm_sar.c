/*
 * rdm_sar: a real libfabric FI_EP_RDM endpoint (tcp;ofi_rxm) with its
 * dynamic receive buffers off, sending segmented (SAR) messages to a
 * fabricfs RDM endpoint, for providers/rxm/interop_test.go.
 *
 *   rdm_sar GOPORT
 *
 * FI_OFI_RXM_ENABLE_DYN_RBUF=0 is set before libfabric starts: rxm then
 * sends messages of 16385..131072 bytes (its SAR limit, 8 x 16384) as
 * segments, above that by rendezvous. The fabricfs endpoint listens on
 * 127.0.0.1:GOPORT. This program:
 *   1. prints "port P key 0 base 0": its endpoint's port (no region);
 *   2. for each size of 16385, 65536, 131072, untagged then tagged, without
 *      then with remote CQ data (0xda7a0000 + i), sends message i (from 1,
 *      pattern i; tag 0x100 + i when tagged) and waits for its completion:
 *      segmented messages complete when written, so they complete with no
 *      receive posted on the other side. It prints "sent N";
 *   3. waits for a line on stdin (fabricfs has checked them and posted
 *      receives), sends message N+1 of 131073 bytes untagged and N+2
 *      tagged (tag 0x100 + N + 2), rendezvous both, and waits for them;
 *   4. receives fabricfs's answer, the untagged message "ack N+2", and
 *      prints "ok", then exits when stdin closes.
 * Errors go to stderr with exit status 1.
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
#include <rdma/fi_tagged.h>

#define CHECK(x)                                                         \
	do {                                                             \
		ssize_t r_ = (x);                                        \
		if (r_) {                                                \
			fprintf(stderr, "rdm_sar: line %d: %s: %s\n",    \
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

enum { MAXMSG = 131073 };

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static fi_addr_t peer;

static void fail(const char *what)
{
	fprintf(stderr, "rdm_sar: %s\n", what);
	exit(1);
}

/* The same bytes as pattern(seed, n) in the Go tests. */
static void pattern(unsigned char *p, int seed, int n)
{
	int k;

	for (k = 0; k < n; k++)
		p[k] = (unsigned char) (seed * 31 + k * 7 + (k >> 8));
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

/* Waits, at most 10 seconds, for the completion of the operation with
 * context ctx; an error entry, or another operation's, fails. */
static void wait_op(void *ctx, uint64_t flags, struct fi_cq_data_entry *e,
		    const char *what)
{
	struct fi_cq_err_entry err;
	double end = now() + 10;
	ssize_t r;

	for (;;) {
		r = fi_cq_read(cq, e, 1);
		if (r == 1)
			break;
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "rdm_sar: %s: error %d (%s)\n", what,
				err.err, fi_strerror(err.err));
			exit(1);
		}
		if (r != -FI_EAGAIN) {
			fprintf(stderr, "rdm_sar: %s: fi_cq_read: %s\n", what,
				fi_strerror((int) -r));
			exit(1);
		}
		if (now() > end) {
			fprintf(stderr, "rdm_sar: %s: no completion\n", what);
			exit(1);
		}
	}
	if (e->op_context != ctx || (e->flags & flags) != flags) {
		fprintf(stderr, "rdm_sar: %s: completion flags %#" PRIx64
			" context %p\n", what, e->flags, e->op_context);
		exit(1);
	}
}

static void setup(int goport)
{
	struct fi_info *hints, *info;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct sockaddr_in sin = { .sin_family = AF_INET };

	/* Before libfabric reads its parameters: segmentation is on only
	 * without dynamic receive buffers. */
	if (setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 1))
		fail("setenv failed");
	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_VIRT_ADDR;
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
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

/* Sends message i of n bytes and waits for its completion. */
static void send_msg(unsigned char *buf, int i, int n, int tagged, int data)
{
	struct fi_context ctx;
	struct fi_cq_data_entry e;
	uint64_t tag = 0x100 + i, cq_data = 0xda7a0000u + i;

	pattern(buf, i, n);
	if (tagged && data)
		POST(fi_tsenddata(ep, buf, n, NULL, cq_data, peer, tag, &ctx));
	else if (tagged)
		POST(fi_tsend(ep, buf, n, NULL, peer, tag, &ctx));
	else if (data)
		POST(fi_senddata(ep, buf, n, NULL, cq_data, peer, &ctx));
	else
		POST(fi_send(ep, buf, n, NULL, peer, &ctx));
	wait_op(&ctx, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), &e, "send");
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 16385, 65536, 131072 };
	struct fi_context ctx;
	struct fi_cq_data_entry e;
	struct sockaddr_in me;
	size_t len = sizeof me;
	unsigned char *buf;
	char line[64], want[64];
	int i = 0, s, tagged, data;

	if (argc != 2)
		fail("usage: rdm_sar GOPORT");
	setup(atoi(argv[1]));
	buf = malloc(MAXMSG);
	if (!buf)
		fail("out of memory");
	CHECK(fi_getname(&ep->fid, &me, &len));
	printf("port %d key 0 base 0\n", ntohs(me.sin_port));
	fflush(stdout);

	for (s = 0; s < 3; s++)
		for (tagged = 0; tagged < 2; tagged++)
			for (data = 0; data < 2; data++)
				send_msg(buf, ++i, sizes[s], tagged, data);
	printf("sent %d\n", i);
	fflush(stdout);

	if (!fgets(line, sizeof line, stdin))
		fail("stdin closed before the rendezvous");
	send_msg(buf, ++i, MAXMSG, 0, 0);
	send_msg(buf, ++i, MAXMSG, 1, 0);

	memset(buf, 0, 64);
	POST(fi_recv(ep, buf, 64, NULL, FI_ADDR_UNSPEC, &ctx));
	wait_op(&ctx, FI_RECV | FI_MSG, &e, "ack");
	snprintf(want, sizeof want, "ack %d", i);
	if (e.len != strlen(want) || memcmp(buf, want, e.len) != 0)
		fail("the ack differs");
	printf("ok\n");
	fflush(stdout);

	while (fgets(line, sizeof line, stdin))
		;
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	free(buf);
	return 0;
}
