/*
 * rxm_probe: drives libfabric 1.17's "tcp;ofi_rxm" through the operations
 * fi_pingpong does not use, so that scripts/rxm_capture.sh can record them
 * (remote CQ data, tagged rendezvous, RMA and atomics over RDM, a
 * simultaneous connect, a rejected connect). Build:
 *
 *   gcc -O1 -o /tmp/rxm_probe scripts/rxm_probe.c -lfabric
 *
 * Both sides bind 127.0.0.1:MYPORT and address the peer as
 * 127.0.0.1:PEERPORT, so no out-of-band exchange is needed.
 *
 *   rxm_probe data  a|b MYPORT PEERPORT   a sends, b receives, then RMA/atomics
 *   rxm_probe simul a|b MYPORT PEERPORT T both send at wall-clock T (ms)
 *   rxm_probe one   a|b MYPORT PEERPORT   a sends one message to b
 *
 * RXM_PROBE_TRANSMIT_COMPLETE=1 asks for FI_TRANSMIT_COMPLETE in the tx
 * op_flags hints.
 *
 * Completions are printed on stderr: flags, length, data, tag.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define CHECK(x)                                                          \
	do {                                                              \
		ssize_t r_ = (x);                                         \
		if (r_) {                                                 \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__,       \
				__LINE__, #x, fi_strerror((int) -r_));    \
			exit(1);                                          \
		}                                                         \
	} while (0)

/* Retries an operation that may return -FI_EAGAIN while rxm connects. */
#define POST(x)                                                           \
	do {                                                              \
		ssize_t r_;                                               \
		while ((r_ = (x)) == -FI_EAGAIN)                          \
			progress();                                       \
		CHECK(r_);                                                \
	} while (0)

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_mr *mr;
static fi_addr_t peer;
static char *buf;
static uint64_t mr_mode;
enum { BUFSZ = 1 << 20 };

static void progress(void)
{
	struct fi_cq_tagged_entry e;
	/* Reading an empty CQ drives rxm's manual progress. */
	(void) fi_cq_read(cq, &e, 0);
}

/* Waits for n completions and prints them. */
static void wait_cq(int n, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	ssize_t r;

	while (n > 0) {
		r = fi_cq_read(cq, &e, 1);
		if (r == -FI_EAGAIN)
			continue;
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "%s: error %d (%s) flags %#" PRIx64 "\n",
				what, err.err, fi_strerror(err.err), err.flags);
			n--;
			continue;
		}
		if (r < 0) {
			fprintf(stderr, "%s: fi_cq_read: %s\n", what,
				fi_strerror((int) -r));
			exit(1);
		}
		fprintf(stderr, "%s: flags %#" PRIx64 " len %zu data %#" PRIx64
			" tag %#" PRIx64 "\n", what, e.flags, e.len, e.data,
			e.tag);
		n--;
	}
}

static void setup(int myport, int peerport)
{
	struct fi_info *hints, *info;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char port[16];

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
	/* RXM_PROBE_TRANSMIT_COMPLETE=1: FI_TRANSMIT_COMPLETE by default. */
	if (getenv("RXM_PROBE_TRANSMIT_COMPLETE"))
		hints->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
	snprintf(port, sizeof port, "%d", myport);
	CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, FI_SOURCE,
			 hints, &info));
	mr_mode = info->domain_attr->mr_mode;
	fprintf(stderr, "provider %s, mr_mode %#" PRIx64 ", inject %zu\n",
		info->fabric_attr->prov_name, mr_mode,
		info->tx_attr->inject_size);

	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));

	buf = calloc(1, BUFSZ);
	CHECK(fi_mr_reg(domain, buf, BUFSZ,
			FI_SEND | FI_RECV | FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));

	sin.sin_port = htons(peerport);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fi_av_insert(av, &sin, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		exit(1);
	}
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

static void *desc(void) { return fi_mr_desc(mr); }

/* Prints whatever else arrives on the CQ within ms milliseconds. */
static void drain(int ms, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	ssize_t r;
	int i;

	for (i = 0; i < ms; i++) {
		r = fi_cq_read(cq, &e, 1);
		if (r == 1) {
			fprintf(stderr, "%s: flags %#" PRIx64 "\n", what, e.flags);
		} else if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "%s: error %d (%s) context %p\n", what,
				err.err, fi_strerror(err.err), err.op_context);
		} else {
			usleep(1000);
		}
	}
}

/* a sends every kind of message to b; b answers with its MR's key and
 * base address; a then does RMA and atomics on b's memory. */
static void run_data(int a)
{
	struct fi_context ctx[16];
	uint64_t key, base, *u;
	int i;

	if (a) {
		memset(buf, 'a', 20000);
		POST(fi_senddata(ep, buf, 100, desc(), 0x1111, peer, &ctx[0]));
		wait_cq(1, "senddata");
		POST(fi_tsenddata(ep, buf, 100, desc(), 0x2222, peer, 0x22,
				  &ctx[1]));
		wait_cq(1, "tsenddata");
		POST(fi_tinjectdata(ep, buf, 8, 0x3333, peer, 0x33));
		POST(fi_injectdata(ep, buf, 8, 0x4444, peer));
		POST(fi_tsenddata(ep, buf, 20000, desc(), 0x5555, peer, 0x55,
				  &ctx[2]));
		wait_cq(1, "tsenddata rndv");
		POST(fi_senddata(ep, buf, 20000, desc(), 0x6666, peer,
				 &ctx[3]));
		wait_cq(1, "senddata rndv");

		POST(fi_recv(ep, buf + 65536, 64, desc(), peer, &ctx[4]));
		wait_cq(1, "recv key");
		memcpy(&key, buf + 65536, 8);
		memcpy(&base, buf + 65536 + 8, 8);
		fprintf(stderr, "peer key %#" PRIx64 " base %#" PRIx64 "\n",
			key, base);

		memset(buf, 'w', 64);
		POST(fi_write(ep, buf, 64, desc(), peer, base + 256, key,
			      &ctx[5]));
		wait_cq(1, "write");
		POST(fi_writedata(ep, buf, 32, desc(), 0x7777, peer,
				  base + 512, key, &ctx[6]));
		wait_cq(1, "writedata");
		POST(fi_read(ep, buf + 4096, 64, desc(), peer, base + 256, key,
			     &ctx[7]));
		wait_cq(1, "read");

		u = (uint64_t *) (buf + 8192);
		u[0] = 5;  /* operand */
		u[1] = 0;  /* result */
		u[2] = 12; /* compare */
		POST(fi_atomic(ep, &u[0], 1, desc(), peer, base + 1024, key,
			       FI_UINT64, FI_SUM, &ctx[8]));
		wait_cq(1, "atomic sum");
		POST(fi_fetch_atomic(ep, &u[0], 1, desc(), &u[1], desc(),
				     peer, base + 1024, key, FI_UINT64, FI_SUM,
				     &ctx[9]));
		wait_cq(1, "fetch sum");
		fprintf(stderr, "fetched %" PRIu64 "\n", u[1]);
		u[0] = 99;
		POST(fi_compare_atomic(ep, &u[0], 1, desc(), &u[2], desc(),
				       &u[1], desc(), peer, base + 1024, key,
				       FI_UINT64, FI_CSWAP, &ctx[10]));
		wait_cq(1, "compare swap");
		fprintf(stderr, "swapped out %" PRIu64 "\n", u[1]);
		/* A bad key: the target answers with an error status. */
		POST(fi_atomic(ep, &u[0], 1, desc(), peer, base + 1024,
			       key + 1000, FI_UINT64, FI_SUM, &ctx[11]));
		wait_cq(1, "atomic bad key");
		/* rxm also reports the bad status as an error without context
		 * on the tx and rx CQ (rxm_cq_write_error_all). */
		drain(100, "extra");

		POST(fi_send(ep, "done", 5, desc(), peer, &ctx[12]));
		wait_cq(1, "send done");
		return;
	}

	POST(fi_recv(ep, buf, 200, desc(), FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_trecv(ep, buf + 256, 200, desc(), FI_ADDR_UNSPEC, 0x22, 0,
		      &ctx[1]));
	POST(fi_trecv(ep, buf + 512, 200, desc(), FI_ADDR_UNSPEC, 0x33, 0,
		      &ctx[2]));
	POST(fi_recv(ep, buf + 768, 200, desc(), FI_ADDR_UNSPEC, &ctx[3]));
	POST(fi_trecv(ep, buf + 32768, 20000, desc(), FI_ADDR_UNSPEC, 0x55,
		      0, &ctx[4]));
	POST(fi_recv(ep, buf + 65536, 20000, desc(), FI_ADDR_UNSPEC,
		     &ctx[5]));
	wait_cq(6, "b recv");

	key = fi_mr_key(mr);
	base = (mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t) (uintptr_t) buf : 0;
	u = (uint64_t *) (buf + 1024);
	u[0] = 7;
	POST(fi_recv(ep, buf + 131072, 64, desc(), FI_ADDR_UNSPEC, &ctx[6]));
	memcpy(buf + 4096, &key, 8);
	memcpy(buf + 4096 + 8, &base, 8);
	POST(fi_send(ep, buf + 4096, 16, desc(), peer, &ctx[7]));
	/* send completion, the writedata's remote CQ data, "done" */
	wait_cq(3, "b tail");
	fprintf(stderr, "target now %" PRIu64 "\n", u[0]);
	for (i = 0; i < 100; i++) { /* let the last ACKs go out */
		progress();
		usleep(1000);
	}
}

static void run_simul(int a, long long at)
{
	struct fi_context ctx[4];
	struct timespec ts;
	long long now;

	POST(fi_recv(ep, buf + 4096, 64, desc(), FI_ADDR_UNSPEC, &ctx[0]));
	do {
		clock_gettime(CLOCK_REALTIME, &ts);
		now = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	} while (now < at);
	strcpy(buf, a ? "from a" : "from b");
	POST(fi_send(ep, buf, 7, desc(), peer, &ctx[1]));
	wait_cq(2, a ? "a" : "b");
	for (now = 0; now < 300; now++) { /* let the peer finish */
		progress();
		usleep(1000);
	}
}

static void run_one(int a)
{
	struct fi_context ctx[2];
	int i;

	if (a) {
		strcpy(buf, "one");
		/* Keep trying for a while: a rejected connect retries. */
		for (i = 0; i < 200; i++) {
			ssize_t r = fi_send(ep, buf, 4, desc(), peer, &ctx[0]);
			if (r == 0) {
				wait_cq(1, "a send");
				return;
			}
			if (r != -FI_EAGAIN)
				CHECK(r);
			progress();
			usleep(1000);
		}
		fprintf(stderr, "a: gave up\n");
		return;
	}
	POST(fi_recv(ep, buf, 64, desc(), FI_ADDR_UNSPEC, &ctx[0]));
	for (i = 0; i < 3000; i++) {
		struct fi_cq_tagged_entry e;
		if (fi_cq_read(cq, &e, 1) == 1) {
			fprintf(stderr, "b: got %s\n", buf);
			return;
		}
		usleep(1000);
	}
	fprintf(stderr, "b: nothing\n");
}

int main(int argc, char **argv)
{
	int a;

	if (argc < 5) {
		fprintf(stderr, "usage: rxm_probe data|simul|one a|b MYPORT "
				"PEERPORT [T]\n");
		return 2;
	}
	a = !strcmp(argv[2], "a");
	setup(atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(argv[1], "data"))
		run_data(a);
	else if (!strcmp(argv[1], "simul") && argc > 5)
		run_simul(a, atoll(argv[5]));
	else
		run_one(a);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	return 0;
}
