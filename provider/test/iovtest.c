/*
 * iovtest: checks the fabricfs provider's scatter-gather (fi_msg(3),
 * fi_rma(3): iov_limit and rma_iov_limit 4) between two processes of
 * FI_EP_RDM endpoints, through the libfabric API alone. The program forks:
 * the child is the target, the parent the initiator.
 *
 * - fi_sendv of 4 segments into an fi_recvv of 4 other segments, once with
 *   every segment registered (zero copy: the segment-array form) and once
 *   with none (staged as one buffer); the target checks the bytes it got.
 * - fi_writemsg of 4 local segments into 4 remote segments of the
 *   target's region, then fi_readmsg of 4 remote segments (cut
 *   differently) back into 4 other local segments; the initiator checks
 *   what it read and the target what was written.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric iovtest [DOMAIN [tcp-target|tcp-initiator]]
 *
 * With tcp-target or tcp-initiator that side is libfabric's own tcp
 * (tcp;ofi_rxm) on lo, and the calls' errors are not checked.
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define NSEG 4
#define PAGE 4096
#define REGION (4 * PAGE)
#define TOTAL 1000 /* bytes of every operation */

/* The segments' lengths, and where the segments lie in a buffer: apart,
 * so that a byte put in a gap shows. */
static const size_t seglen[NSEG] = {100, 1, 600, 299};
static const size_t segoff[NSEG] = {0, 200, 300, 1000};
/* The remote segments of the write and of the read, in the target's
 * region: the same bytes, cut differently. */
static const size_t woff[NSEG] = {4096, 4106, 4400, 5000}, wlen[NSEG] = {10, 90, 500, 400};
static const size_t roff[NSEG] = {4096, 4101, 4400, 5000}, rlen[NSEG] = {5, 95, 500, 400};


static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *txcq, *rxcq;
static struct fid_ep *ep;

/* progress reads nothing from the CQs: libfabric's rxm progresses its
 * endpoints in fi_cq_read (FI_PROGRESS_MANUAL), the tree in the daemon. */
static void progress(void)
{
	fi_cq_read(txcq, NULL, 0);
	fi_cq_read(rxcq, NULL, 0);
}

/* cq_ok waits 5 s for a successful completion of context ctx on cq. */
static void cq_ok(struct fid_cq *cq, void *ctx, struct fi_cq_data_entry *e, const char *what)
{
	cq_take(cq, e, NULL, what);
	if (e->op_context != ctx)
		fail("%s: completion for context %p, want %p", what, e->op_context, ctx);
}

/* open_all opens an FI_EP_RDM endpoint of domain dom of provider prov
 * with 4 segments each way, its CQs and AV, and enables it. */
static void open_all(const char *prov, const char *dom)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->tx_attr->iov_limit = NSEG;
	hints->tx_attr->rma_iov_limit = NSEG;
	hints->rx_attr->iov_limit = NSEG;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->domain_attr->name = strdup(dom);
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret)
		fail("fi_getinfo of an FI_EP_RDM entry of %s in %s with iov_limit and rma_iov_limit %d: %d (%s)", prov,
		     dom, NSEG, ret, fi_strerror(-ret));
	fi_freeinfo(hints);
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	struct fi_cq_attr ca = {.size = 64, .format = FI_CQ_FORMAT_DATA};
	CHECK(fi_cq_open(domain, &ca, &txcq, NULL));
	CHECK(fi_cq_open(domain, &ca, &rxcq, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
	CHECK(fi_enable(ep));
}

static void close_all(void)
{
	CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&txcq->fid));
	CHECK(fi_close(&rxcq->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
}

/* segments points iov at the NSEG segments of buf. */
static void segments(uint8_t *buf, struct iovec *iov)
{
	for (int i = 0; i < NSEG; i++)
		iov[i] = (struct iovec){buf + segoff[i], seglen[i]};
}

/* fill_segs puts message seed (pattern) into the segments and 0xee in
 * the gaps. */
static void fill_segs(uint8_t *buf, unsigned seed)
{
	memset(buf, 0xee, PAGE);
	for (size_t i = 0, at = 0; i < NSEG; i++)
		for (size_t j = 0; j < seglen[i]; j++, at++)
			buf[segoff[i] + j] = pattern(seed, at);
}

/* check fails unless the segments of buf hold message seed and the gaps
 * their 0xee. */
static void check(const uint8_t *buf, unsigned seed, const char *what)
{
	uint8_t want[PAGE];
	fill_segs(want, seed);
	for (size_t i = 0; i < PAGE; i++)
		if (buf[i] != want[i])
			fail("%s: byte %zu is %#x, want %#x", what, i, buf[i], want[i]);
}

/* The pipes' bytes: the initiator tells the target to check the write. */
#define WRITTEN 'w'

/* target receives the two messages into 4 segments each and checks them,
 * then progresses its endpoint (for libfabric's rxm) while the initiator
 * writes and reads its region, and checks the write when told. */
static void target(const char *prov, const char *dom, int to_parent, int from_parent)
{
	open_all(prov, dom);
	uint8_t *region = aligned_alloc(PAGE, REGION), *plain = malloc(PAGE);
	if (!region || !plain)
		fail("target: malloc");
	memset(region, 0, REGION);
	struct fid_mr *mr;
	CHECK(fi_mr_reg(domain, region, REGION, FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x7171, 0, &mr, NULL));
	uint64_t key = fi_mr_key(mr), base = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)region : 0;
	char name[128];
	size_t len = sizeof name;
	CHECK(fi_getname(&ep->fid, name, &len));
	if (write(to_parent, &key, sizeof key) != sizeof key || write(to_parent, &base, sizeof base) != sizeof base ||
	    write(to_parent, &len, sizeof len) != sizeof len || write(to_parent, name, len) != (ssize_t)len)
		fail("target: write to the pipe");
	fi_addr_t parent;
	if (read(from_parent, &len, sizeof len) != sizeof len || len > sizeof name ||
	    read(from_parent, name, len) != (ssize_t)len)
		fail("target: read from the pipe");
	if (fi_av_insert(av, name, 1, &parent, 0, NULL) != 1)
		fail("target: fi_av_insert");

	/* Receives posted before the initiator is told to send. */
	struct iovec reg_iov[NSEG], plain_iov[NSEG];
	memset(region, 0xee, PAGE);
	memset(plain, 0xee, PAGE);
	segments(region, reg_iov);
	segments(plain, plain_iov);
	void *desc[NSEG] = {fi_mr_desc(mr), fi_mr_desc(mr), fi_mr_desc(mr), fi_mr_desc(mr)};
	void *nodesc[NSEG] = {0};
	struct fi_context c1, c2;
	POST(fi_recvv(ep, reg_iov, desc, NSEG, parent, &c1));
	struct fi_msg m = {.msg_iov = plain_iov, .desc = nodesc, .iov_count = NSEG, .addr = parent, .context = &c2};
	POST(fi_recvmsg(ep, &m, FI_COMPLETION));
	if (write(to_parent, "r", 1) != 1)
		fail("target: write to the pipe");
	struct fi_cq_data_entry e;
	cq_ok(rxcq, &c1, &e, "target: fi_recvv into 4 registered segments");
	if (e.len != TOTAL)
		fail("target: fi_recvv completed with len %zu, want %d", e.len, TOTAL);
	check(region, 1, "target: fi_recvv into 4 registered segments");
	cq_ok(rxcq, &c2, &e, "target: fi_recvmsg into 4 unregistered segments");
	if (e.len != TOTAL)
		fail("target: fi_recvmsg completed with len %zu, want %d", e.len, TOTAL);
	check(plain, 2, "target: fi_recvmsg into 4 unregistered segments");

	struct pollfd pfd = {.fd = from_parent, .events = POLLIN};
	for (double deadline = now() + 60;;) {
		progress();
		if (poll(&pfd, 1, 1) == 1) {
			char b;
			ssize_t n = read(from_parent, &b, 1);
			if (n == 0)
				break; /* the initiator is done */
			if (n != 1 || b != WRITTEN)
				fail("target: read from the pipe");
			/* The write's 4 remote segments hold message 3 in order. */
			for (size_t i = 0, at = 0; i < NSEG; i++)
				for (size_t j = 0; j < wlen[i]; j++, at++)
					if (region[woff[i] + j] != pattern(3, at))
						fail("target: fi_writemsg: byte %zu of remote segment %zu is %#x, want %#x",
						     j, i, region[woff[i] + j], pattern(3, at));
			if (write(to_parent, "k", 1) != 1)
				fail("target: write to the pipe");
		}
		if (now() > deadline)
			fail("target: the pipe from the initiator still open after 60 s");
	}
	CHECK(fi_close(&mr->fid));
	close_all();
	free(region);
	free(plain);
	exit(0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dom = argc > 1 ? argv[1] : "tcp/lo";
	const char *tprov = "fabricfs", *tdom = dom, *iprov = "fabricfs", *idom = dom;
	if (argc > 2 && !strcmp(argv[2], "tcp-target")) {
		tprov = "tcp";
		tdom = "lo";
	} else if (argc > 2 && !strcmp(argv[2], "tcp-initiator")) {
		iprov = "tcp";
		idom = "lo";
	} else if (argc > 2) {
		fail("unknown argument %s: tcp-target or tcp-initiator", argv[2]);
	}
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		fail("pipe");
	pid_t child = fork(); /* before either touches libfabric */
	if (child < 0)
		fail("fork");
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(up[0]);
		close(down[1]);
		target(tprov, tdom, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	open_all(iprov, idom);
	if (info->tx_attr->iov_limit < NSEG || info->tx_attr->rma_iov_limit < NSEG || info->rx_attr->iov_limit < NSEG)
		fail("iov_limit %zu, rma_iov_limit %zu, rx iov_limit %zu: want %d", info->tx_attr->iov_limit,
		     info->tx_attr->rma_iov_limit, info->rx_attr->iov_limit, NSEG);
	printf("ok fi_getinfo: iov_limit %zu, rma_iov_limit %zu, rx iov_limit %zu\n", info->tx_attr->iov_limit,
	       info->tx_attr->rma_iov_limit, info->rx_attr->iov_limit);
	uint64_t key, raddr;
	char name[128];
	size_t len;
	if (read(up[0], &key, sizeof key) != sizeof key || read(up[0], &raddr, sizeof raddr) != sizeof raddr ||
	    read(up[0], &len, sizeof len) != sizeof len || len > sizeof name || read(up[0], name, len) != (ssize_t)len)
		fail("the target did not start");
	fi_addr_t peer;
	if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
		fail("fi_av_insert");
	len = sizeof name;
	CHECK(fi_getname(&ep->fid, name, &len));
	if (write(down[1], &len, sizeof len) != sizeof len || write(down[1], name, len) != (ssize_t)len)
		fail("write to the pipe");
	char b;
	if (read(up[0], &b, 1) != 1)
		fail("the target did not post its receives");

	uint8_t *local = aligned_alloc(PAGE, 2 * PAGE), *plain = malloc(PAGE);
	if (!local || !plain)
		fail("malloc");
	struct fid_mr *mr;
	CHECK(fi_mr_reg(domain, local, 2 * PAGE, FI_SEND | FI_READ | FI_WRITE, 0, 0x8181, 0, &mr, NULL));
	void *desc[NSEG] = {fi_mr_desc(mr), fi_mr_desc(mr), fi_mr_desc(mr), fi_mr_desc(mr)};
	void *nodesc[NSEG] = {0};
	struct iovec iov[NSEG], piov[NSEG];
	struct fi_context ctx;
	struct fi_cq_data_entry e;

	fill_segs(local, 1);
	segments(local, iov);
	POST(fi_sendv(ep, iov, desc, NSEG, peer, &ctx));
	cq_ok(txcq, &ctx, &e, "fi_sendv of 4 registered segments");
	fill_segs(plain, 2);
	segments(plain, piov);
	struct fi_msg m = {.msg_iov = piov, .desc = nodesc, .iov_count = NSEG, .addr = peer, .context = &ctx};
	POST(fi_sendmsg(ep, &m, FI_COMPLETION));
	cq_ok(txcq, &ctx, &e, "fi_sendmsg of 4 unregistered segments");
	printf("ok fi_sendv and fi_sendmsg of 4 segments (registered, unregistered) into fi_recvv and "
	       "fi_recvmsg of 4 (registered, unregistered)\n");

	/* fi_writemsg: 4 local segments into 4 remote ones. */
	fill_segs(local, 3);
	struct fi_rma_iov rma[NSEG];
	for (int i = 0; i < NSEG; i++)
		rma[i] = (struct fi_rma_iov){raddr + woff[i], wlen[i], key};
	struct fi_msg_rma w = {.msg_iov = iov, .desc = desc, .iov_count = NSEG, .addr = peer, .rma_iov = rma,
			       .rma_iov_count = NSEG, .context = &ctx};
	POST(fi_writemsg(ep, &w, FI_COMPLETION | FI_DELIVERY_COMPLETE));
	cq_ok(txcq, &ctx, &e, "fi_writemsg of 4 segments into 4");
	if (write(down[1], (char[]){WRITTEN}, 1) != 1 || read(up[0], &b, 1) != 1 || b != 'k')
		fail("the target did not check the write");
	printf("ok fi_writemsg of 4 local segments into 4 remote segments\n");

	/* fi_readmsg: the same bytes, cut differently, into 4 other local
	 * segments, unregistered then registered. */
	for (int i = 0; i < NSEG; i++)
		rma[i] = (struct fi_rma_iov){raddr + roff[i], rlen[i], key};
	for (int reg = 0; reg < 2; reg++) {
		uint8_t *into = reg ? local + PAGE : plain;
		memset(into, 0xee, PAGE);
		segments(into, piov);
		struct fi_msg_rma r = {.msg_iov = piov, .desc = reg ? desc : nodesc, .iov_count = NSEG, .addr = peer,
				       .rma_iov = rma, .rma_iov_count = NSEG, .context = &ctx};
		POST(fi_readmsg(ep, &r, FI_COMPLETION));
		cq_ok(txcq, &ctx, &e, "fi_readmsg of 4 segments into 4");
		check(into, 3, reg ? "fi_readmsg into registered segments" : "fi_readmsg into unregistered segments");
	}
	printf("ok fi_readmsg of 4 remote segments into 4 local segments (unregistered, registered)\n");

	/* More remote segments than rma_iov_limit, or fewer bytes than the
	 * local ones, are the caller's error. */
	if (strcmp(iprov, "fabricfs"))
		goto done;
	struct fi_rma_iov many[NSEG + 1];
	for (int i = 0; i <= NSEG; i++)
		many[i] = (struct fi_rma_iov){raddr + 4096, 1, key};
	struct fi_msg_rma bad = {.msg_iov = iov, .desc = desc, .iov_count = 1, .addr = peer, .rma_iov = many,
				 .rma_iov_count = NSEG + 1, .context = &ctx};
	ssize_t ret = fi_writemsg(ep, &bad, 0);
	if (ret != -FI_EINVAL)
		fail("fi_writemsg with %d remote segments: %zd, want -FI_EINVAL", NSEG + 1, ret);
	bad.rma_iov_count = 2; /* 2 bytes for the local segment's 100 */
	if ((ret = fi_writemsg(ep, &bad, 0)) != -FI_EINVAL)
		fail("fi_writemsg with remote segments shorter than the local: %zd, want -FI_EINVAL", ret);
	printf("ok fi_writemsg beyond rma_iov_limit or with unequal lengths: -FI_EINVAL\n");
done:

	close(down[1]);
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the target process ended with status %#x", status);
	CHECK(fi_close(&mr->fid));
	close_all();
	free(local);
	free(plain);
	printf("PASS\n");
	return 0;
}
