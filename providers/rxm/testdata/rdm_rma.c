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
#define PROG "rdm_rma"
#include "peer.h"

#include <unistd.h>
#include <rdma/fi_rma.h>

enum { REGION = 16384, LOCAL = 16384, TOTAL = REGION + LOCAL };

static struct fid_mr *mr;
static unsigned char *buf;
static uint64_t base;

static int is_pattern(const unsigned char *p, int seed, int n)
{
	unsigned char want[1024];

	pattern(want, seed, n);
	return memcmp(p, want, n) == 0;
}

static void setup(int goport)
{
	uint64_t mr_mode = open_peer(goport, FI_MSG | FI_RMA,
				     FI_MR_LOCAL | FI_MR_ALLOCATED |
				     FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);

	buf = calloc(1, TOTAL);
	if (!buf)
		fail("out of memory");
	CHECK(fi_mr_reg(domain, buf, TOTAL,
			FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, 0xc0ffee, 0, &mr, NULL));
	if (mr_mode & FI_MR_VIRT_ADDR)
		base = (uintptr_t) buf;
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
	wait_ok(&ctx[0], FI_RMA | FI_WRITE, NULL, "write");

	pattern(src, 2, 500);
	POST(fi_writedata(ep, src, 500, desc, 0x7777, peer, 2000, key,
			  &ctx[1]));
	wait_ok(&ctx[1], FI_RMA | FI_WRITE, NULL, "writedata");

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
	wait_ok(&ctx[2], FI_RMA | FI_WRITE, NULL, "delivery-complete write");

	pattern(src, 5, 32);
	POST(fi_inject_write(ep, src, 32, peer, 3500, key));

	POST(fi_read(ep, dst, 1000, desc, peer, 4000, key, &ctx[3]));
	wait_ok(&ctx[3], FI_RMA | FI_READ, NULL, "read");
	if (!is_pattern(dst, 6, 1000))
		fail("read: the bytes differ");
	printf("c2go ok\n");
	fflush(stdout);

	wait_ok(NULL, FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, &e, "remote writedata");
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
