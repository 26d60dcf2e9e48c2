/*
 * streamtest: the loop of fabtests' fi_msg_bw over the fabricfs provider,
 * with a smaller window, both sides in one process, on an FI_EP_MSG endpoint of the traffic
 * class those programs ask for (FI_TC_BULK_DATA): the server posts a
 * window of receives, the client sends the window's messages and waits
 * for a short answer, which the server sends once every message is in.
 * The window's last message goes out after the others' completions, so
 * that the daemon writes it to its socket alone, as a later engine pass
 * does. A socket with Nagle's algorithm on held that last write until the
 * peer ACKed the one before, which the peer's kernel delays 40 ms while
 * its side has nothing to send (a window then takes 40 ms or more). It
 * checks that at most half the windows take 30 ms or more, and every
 * message's bytes.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric streamtest [DOMAIN]
 *
 * DOMAIN defaults to tcp/lo. Prints "ok ..." lines and "PASS", exits 0;
 * on a failure "FAIL: ..." and exits 1. tests/provider_test.go runs it.
 */
#include "fitest.h"

/* A window's bytes stay below one segment of the loopback (its MTU is
 * 64 KiB): a receiver that got more than a full segment ACKs at once. */
#define WINDOW 8
#define WINDOWS 40
#define MSG 4096

static struct fid_eq *eq;

struct side {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
};

static struct side cli, srv;

/* progress is POST's: the sends' completions are reaped by wait_cq. */
static void progress(void) {}

/* wait_cq reads n entries of cq within 5 s. */
static void wait_cq(struct fid_cq *cq, int n, const char *what)
{
	double deadline = now() + 5;
	struct fi_cq_entry e[WINDOW];
	while (n > 0) {
		ssize_t got = fi_cq_read(cq, e, n < WINDOW ? (size_t)n : WINDOW);
		if (got > 0) {
			n -= (int)got;
			continue;
		}
		if (got != -FI_EAGAIN) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fail("%s: fi_cq_read: %zd (%s), err %d", what, got, fi_strerror((int)-got), err.err);
		}
		if (now() > deadline)
			fail("%s: %d completions missing after 5 s", what, n);
	}
}

static void open_side(struct fid_domain *domain, struct fi_info *info, struct side *s)
{
	struct fi_cq_attr attr = {.size = 2 * WINDOW, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	CHECK(fi_cq_open(domain, &attr, &s->txcq, NULL));
	CHECK(fi_cq_open(domain, &attr, &s->rxcq, NULL));
	CHECK(fi_endpoint(domain, info, &s->ep, NULL));
	CHECK(fi_ep_bind(s->ep, &eq->fid, 0));
	CHECK(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV));
	CHECK(fi_enable(s->ep));
}

/* event reads the next EQ event within 5 s and checks its type. */
static void event(uint32_t want, struct fi_eq_cm_entry *e)
{
	uint32_t ev;
	ssize_t n = fi_eq_sread(eq, &ev, e, sizeof *e, 5000, 0);
	if (n < 0 || ev != want)
		fail("want event %u, got %zd (event %u)", want, n, ev);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->tx_attr->tclass = FI_TC_BULK_DATA; /* fi_msg_bw's */
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(argc > 1 ? argv[1] : "tcp/lo");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (info->tx_attr->tclass != FI_TC_BULK_DATA)
		fail("the info's tclass is %#x, want FI_TC_BULK_DATA", info->tx_attr->tclass);
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	struct fi_eq_attr eqa = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_eq_open(fabric, &eqa, &eq, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fid_pep *pep;
	CHECK(fi_passive_ep(fabric, info, &pep, NULL));
	CHECK(fi_pep_bind(pep, &eq->fid, 0));
	CHECK(fi_listen(pep));
	char addr[128];
	size_t alen = sizeof addr;
	CHECK(fi_getname(&pep->fid, addr, &alen));

	open_side(domain, info, &cli);
	CHECK(fi_connect(cli.ep, addr, NULL, 0));
	struct fi_eq_cm_entry cm;
	event(FI_CONNREQ, &cm);
	open_side(domain, cm.info, &srv);
	fi_freeinfo(cm.info);
	CHECK(fi_accept(srv.ep, NULL, 0));
	event(FI_CONNECTED, &cm);
	event(FI_CONNECTED, &cm);

	static uint8_t tx[WINDOW][MSG], rx[WINDOW][MSG];
	uint8_t ans[4];
	int slow = 0;
	double slowest = 0, start = now();
	for (int w = 0; w < WINDOWS; w++) {
		double t0 = now();
		for (int i = 0; i < WINDOW; i++) {
			memset(tx[i], w * WINDOW + i, MSG);
			POST(fi_recv(srv.ep, rx[i], MSG, NULL, 0, NULL));
		}
		POST(fi_recv(cli.ep, ans, sizeof ans, NULL, 0, NULL));
		for (int i = 0; i < WINDOW - 1; i++)
			POST(fi_send(cli.ep, tx[i], MSG, NULL, 0, NULL));
		wait_cq(cli.txcq, WINDOW - 1, "the window's sends");
		POST(fi_send(cli.ep, tx[WINDOW - 1], MSG, NULL, 0, NULL));
		wait_cq(srv.rxcq, WINDOW, "the window's receives");
		POST(fi_send(srv.ep, "ack", 4, NULL, 0, NULL));
		wait_cq(cli.rxcq, 1, "the answer");
		wait_cq(cli.txcq, 1, "the last send");
		wait_cq(srv.txcq, 1, "the answer's send");
		double took = now() - t0;
		if (took >= 0.030)
			slow++;
		if (took > slowest)
			slowest = took;
		for (int i = 0; i < WINDOW; i++)
			for (int j = 0; j < MSG; j++)
				if (rx[i][j] != (uint8_t)(w * WINDOW + i))
					fail("window %d message %d byte %d is %#x", w, i, j, rx[i][j]);
	}
	printf("ok %d windows of %d messages of %d bytes in %.3f s, slowest %.1f ms, %d of 30 ms or more\n", WINDOWS,
	       WINDOW, MSG, now() - start, slowest * 1e3, slow);
	/* A busy machine delays a window now and then; the stall delayed
	 * nearly every one. */
	if (slow > WINDOWS / 2)
		fail("%d of %d windows took 30 ms or more", slow, WINDOWS);

	CHECK(fi_close(&cli.ep->fid));
	CHECK(fi_close(&srv.ep->fid));
	CHECK(fi_close(&cli.txcq->fid));
	CHECK(fi_close(&cli.rxcq->fid));
	CHECK(fi_close(&srv.txcq->fid));
	CHECK(fi_close(&srv.rxcq->fid));
	CHECK(fi_close(&pep->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&eq->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS\n");
	return 0;
}
