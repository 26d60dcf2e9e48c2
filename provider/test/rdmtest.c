/*
 * rdmtest: checks the fabricfs provider's connectionless endpoints
 * (FI_EP_RDM, FI_EP_DGRAM), several in one process through the libfabric
 * API: messages with their sender (fi_cq_readfrom) and bytes; for FI_EP_RDM
 * also tagged matching, a directed receive, FI_MULTI_RECV, a counter that
 * counts a staged receive with its bytes in place, an endpoint whose
 * receives have no CQ (the provider's hidden one), fi_cq_sread, selective
 * completion, FI_PEEK, FI_CLAIM and FI_DISCARD, RMA write, read and
 * writedata to a peer's registered region, FI_SOURCE_ERR (source_err),
 * and threads sharing an endpoint and its CQ (FI_THREAD_SAFE).
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric rdmtest [DOMAIN [rdm|dgram]]
 *
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

#include <pthread.h>

static struct fi_info *info;
static struct fid_domain *domain;
static struct fid_av *av;
static bool rdm;

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq; /* transmit and receive, unless noted */
	fi_addr_t addr;
};

/* trecv_flags posts fi_trecvmsg of tag with flags into buf and waits for
 * its completion: 0, or the error's positive code (FI_ENOMSG). */
static int trecv_flags(struct node *n, uint64_t tag, uint64_t flags, void *ctx, void *buf, size_t len,
		       struct fi_cq_tagged_entry *e)
{
	struct iovec iov = {buf, len};
	struct fi_msg_tagged msg = {.msg_iov = &iov, .iov_count = buf ? 1 : 0, .addr = FI_ADDR_UNSPEC, .tag = tag,
				    .context = ctx};
	CHECK(fi_trecvmsg(n->ep, &msg, flags));
	double deadline = now() + 5;
	for (;;) {
		ssize_t got = fi_cq_read(n->cq, e, 1);
		if (got == 1)
			return 0;
		if (got == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			CHECK(fi_cq_readerr(n->cq, &err, 0) != 1);
			if (err.op_context != ctx)
				fail("trecvmsg flags %#llx: error for context %p", (unsigned long long)flags, err.op_context);
			return err.err;
		}
		if (got != -FI_EAGAIN)
			fail("trecvmsg flags %#llx: fi_cq_read %zd", (unsigned long long)flags, got);
		if (now() > deadline)
			fail("trecvmsg flags %#llx: no completion after 5 s", (unsigned long long)flags);
	}
}

/* open_node makes an endpoint bound to the AV, with one CQ for both
 * directions (flags FI_TRANSMIT | FI_RECV, maybe FI_SELECTIVE_COMPLETION)
 * or only some, and a counter for receives if cntr is given. */
static void open_node(struct node *n, uint64_t cq_flags, struct fid_cntr *cntr)
{
	/* Sized for every operation the endpoint may have outstanding. */
	struct fi_cq_attr attr = {.size = info->tx_attr->size + info->rx_attr->size, .format = FI_CQ_FORMAT_TAGGED,
				  .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &n->cq, NULL));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &av->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, cq_flags));
	if (cntr)
		CHECK(fi_ep_bind(n->ep, &cntr->fid, FI_RECV));
	CHECK(fi_enable(n->ep));
	char name[128];
	size_t len = sizeof name;
	CHECK(fi_getname(&n->ep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &n->addr, 0, NULL) != 1)
		fail("fi_av_insert");
}

static void close_node(struct node *n)
{
	CHECK(fi_close(&n->ep->fid));
	CHECK(fi_close(&n->cq->fid));
}

/* message sends len bytes from a to b and checks them and the sender. */
static void message(struct node *a, struct node *b, size_t len, size_t seed)
{
	uint8_t *tx = malloc(len + 1), *rx = calloc(1, len + 1);
	if (!tx || !rx)
		fail("malloc");
	fill(tx, len, seed);
	int rctx, sctx;
	CHECK(fi_recv(b->ep, rx, len, NULL, FI_ADDR_UNSPEC, &rctx));
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	/* A datagram that comes before its receive reached the device is
	 * dropped (FI_EP_DGRAM is unreliable): send it again. */
	for (int try = 0;; try++) {
		CHECK(fi_send(a->ep, tx, len, NULL, b->addr, &sctx));
		cq_take(a->cq, &e, NULL, "send");
		if (e.op_context != &sctx || !(e.flags & FI_SEND))
			fail("send completion: context %p flags %#llx", e.op_context, (unsigned long long)e.flags);
		if (cq_poll(b->cq, &e, &src, now() + (rdm ? 5 : 0.3), "recv"))
			break;
		if (rdm || try == 20)
			fail("recv: no completion");
	}
	if (e.op_context != &rctx || e.len != len || !(e.flags & FI_RECV))
		fail("recv completion: context %p len %zu", e.op_context, e.len);
	if (rdm && src != a->addr)
		fail("recv completion from fi_addr %llu, want %llu", (unsigned long long)src,
		     (unsigned long long)a->addr);
	check_bytes(rx, len, seed, "received");
	free(tx);
	free(rx);
	printf("ok %zu bytes\n", len);
}

/* source_err: an endpoint opened with FI_SOURCE | FI_SOURCE_ERR and an
 * AV of its own, empty, gets a's message as an error completion: "if the
 * source address cannot be converted into a valid fi_addr_t value,
 * fi_cq_readfrom will return -FI_EAVAIL, even if the data were received
 * successfully. The completion will then be reported through
 * fi_cq_readerr with error code -FI_EADDRNOTAVAIL." (fi_cq(3)), the bytes
 * in the buffer and err_data the source address, which "may be passed
 * directly into an fi_av_insert call"; a's next message then comes from
 * the fi_addr that insert gave. */
static void source_err(struct node *a, const char *dom)
{
	struct fi_info *hints = fi_allocinfo(), *si;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_SOURCE | FI_SOURCE_ERR;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(dom);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &si));
	if (!(si->caps & FI_SOURCE_ERR))
		fail("fi_getinfo with FI_SOURCE_ERR: caps %#llx", (unsigned long long)si->caps);
	struct fid_av *xav;
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &xav, NULL));
	struct node x;
	struct fi_cq_attr attr = {.size = 64, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &x.cq, NULL));
	CHECK(fi_endpoint(domain, si, &x.ep, NULL));
	CHECK(fi_ep_bind(x.ep, &xav->fid, 0));
	CHECK(fi_ep_bind(x.ep, &x.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(x.ep));
	char name[128];
	size_t len = sizeof name;
	CHECK(fi_getname(&x.ep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &x.addr, 0, NULL) != 1)
		fail("fi_av_insert");

	char msg[16] = "stranger", rx[16] = "";
	int rctx, sctx;
	CHECK(fi_recv(x.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &rctx));
	CHECK(fi_send(a->ep, msg, sizeof msg, NULL, x.addr, &sctx));
	struct fi_cq_tagged_entry e;
	cq_take(a->cq, &e, NULL, "send to x");
	ssize_t n;
	fi_addr_t src = 0;
	for (double deadline = now() + 5; (n = fi_cq_readfrom(x.cq, &e, 1, &src)) == -FI_EAGAIN;)
		if (now() > deadline)
			fail("source_err: no completion");
	if (n != -FI_EAVAIL)
		fail("fi_cq_readfrom of a message from outside the AV: %zd, want -FI_EAVAIL", n);
	struct fi_cq_err_entry err = {0};
	if (fi_cq_readerr(x.cq, &err, 0) != 1 || err.err != FI_EADDRNOTAVAIL || err.op_context != &rctx ||
	    err.len != sizeof msg || strcmp(rx, "stranger") || !(err.flags & FI_RECV))
		fail("readerr: err %d context %p len %zu '%s'", err.err, err.op_context, err.len, rx);
	char aname[128];
	size_t alen = sizeof aname;
	CHECK(fi_getname(&a->ep->fid, aname, &alen));
	if (err.err_data_size != alen || memcmp(err.err_data, aname, alen))
		fail("err_data is not the sender's address");
	fi_addr_t fa;
	if (fi_av_insert(xav, err.err_data, 1, &fa, 0, NULL) != 1)
		fail("fi_av_insert of err_data");
	CHECK(fi_recv(x.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &rctx));
	CHECK(fi_send(a->ep, msg, sizeof msg, NULL, x.addr, &sctx));
	cq_take(a->cq, &e, NULL, "send to x");
	cq_take(x.cq, &e, &src, "recv at x");
	if (e.op_context != &rctx || src != fa)
		fail("recv once inserted: context %p src %llu, want %llu", e.op_context, (unsigned long long)src,
		     (unsigned long long)fa);
	CHECK(fi_close(&x.ep->fid));
	CHECK(fi_close(&x.cq->fid));
	CHECK(fi_close(&xav->fid));
	fi_freeinfo(si);
	fi_freeinfo(hints);
	printf("ok FI_SOURCE_ERR\n");
}

/* Threads: two senders share endpoint a and its CQ, each sending
 * THREAD_MSGS messages to b, whose receiver checks every one (a header of
 * the sender and its sequence number, and a pattern of them). */
#define THREAD_MSGS 2000
#define THREAD_LEN 300

struct sender {
	struct node *a, *b;
	int id;
	int done; /* send completions this thread reaped */
};

static int total_sent; /* send completions reaped by both, under its lock */
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;

static void reap_sends(struct node *a, struct sender *s)
{
	struct fi_cq_tagged_entry e[8];
	ssize_t n = fi_cq_read(a->cq, e, 8);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		if (fi_cq_readerr(a->cq, &err, 0) == 1)
			fail("thread %d: error completion %d (%s)", s->id, err.err,
			     fi_cq_strerror(a->cq, err.prov_errno, err.err_data, NULL, 0));
		/* The other thread took it. */
	}
	if (n > 0) {
		pthread_mutex_lock(&sent_lock);
		total_sent += (int)n;
		pthread_mutex_unlock(&sent_lock);
	}
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	uint8_t buf[THREAD_LEN];
	for (int i = 0; i < THREAD_MSGS; i++) {
		buf[0] = (uint8_t)s->id;
		memcpy(buf + 1, &i, sizeof i);
		fill(buf + 8, THREAD_LEN - 8, (size_t)(s->id * THREAD_MSGS + i));
		ssize_t ret;
		double deadline = now() + 10;
		while ((ret = fi_send(s->a->ep, buf, sizeof buf, NULL, s->b->addr, NULL)) == -FI_EAGAIN) {
			reap_sends(s->a, s);
			if (now() > deadline)
				fail("thread %d: -FI_EAGAIN for 10 s", s->id);
		}
		if (ret)
			fail("thread %d: fi_send: %zd", s->id, ret);
		reap_sends(s->a, s);
	}
	return NULL;
}

static void threads(struct node *a, struct node *b)
{
	static uint8_t rx[64][THREAD_LEN];
	for (int i = 0; i < 64; i++)
		CHECK(fi_recv(b->ep, rx[i], THREAD_LEN, NULL, FI_ADDR_UNSPEC, rx[i]));
	struct sender s[2] = {{a, b, 1, 0}, {a, b, 2, 0}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, sender_main, &s[i]))
			fail("pthread_create");
	int next[3] = {0, 0, 0}, got = 0;
	double deadline = now() + 30;
	while (got < 2 * THREAD_MSGS) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(b->cq, &e, 1);
		if (n == -FI_EAGAIN) {
			if (now() > deadline)
				fail("threads: %d of %d messages after 30 s", got, 2 * THREAD_MSGS);
			continue;
		}
		if (n != 1)
			fail("threads: receiver's fi_cq_read: %zd", n);
		uint8_t *m = e.op_context;
		int id = m[0], seq;
		memcpy(&seq, m + 1, sizeof seq);
		if (id < 1 || id > 2 || seq != next[id] || e.len != THREAD_LEN)
			fail("threads: message from %d seq %d len %zu, want seq %d", id, seq, e.len, id >= 1 && id <= 2 ? next[id] : -1);
		check_bytes(m + 8, THREAD_LEN - 8, (size_t)(id * THREAD_MSGS + seq), "threads");
		next[id]++;
		got++;
		CHECK(fi_recv(b->ep, m, THREAD_LEN, NULL, FI_ADDR_UNSPEC, m));
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	while (total_sent < 2 * THREAD_MSGS) {
		reap_sends(a, &s[0]);
		if (now() > deadline)
			fail("threads: %d send completions", total_sent);
	}
	/* The receives still posted go with the endpoint. */
	printf("ok two threads sharing an endpoint and its CQ: %d messages in order\n", got);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dom = argc > 1 ? argv[1] : "tcp/lo";
	rdm = argc < 3 || !strcmp(argv[2], "rdm");
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_DGRAM;
	hints->caps = FI_MSG | (rdm ? FI_TAGGED | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_RMA : 0);
	hints->mode = FI_RX_CQ_DATA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(dom);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fabric;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));

	struct node a, b, c;
	open_node(&a, FI_TRANSMIT | FI_RECV, NULL);
	open_node(&b, FI_TRANSMIT | FI_RECV, NULL);
	open_node(&c, FI_TRANSMIT | FI_RECV, NULL);

	size_t max = info->ep_attr->max_msg_size;
	size_t sizes[] = {1, 4000, 100000, (5 << 20) + 1};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		if (sizes[i] <= max)
			message(&a, &b, sizes[i], i);
	if (!rdm)
		goto done;

	/* Tagged: a receive takes the message whose tag matches under its
	 * ignore bits, the other waits for its own receive. */
	{
		uint64_t t1 = 0x12ab, t2 = 0x5500;
		char m1[8] = "first", m2[8] = "second", r1[8] = "", r2[8] = "";
		int c1, c2, s1, s2;
		CHECK(fi_tsend(a.ep, m1, sizeof m1, NULL, b.addr, t1, &s1));
		CHECK(fi_tsend(a.ep, m2, sizeof m2, NULL, b.addr, t2, &s2));
		CHECK(fi_trecv(b.ep, r2, sizeof r2, NULL, FI_ADDR_UNSPEC, 0x5500, 0, &c2));
		struct fi_cq_tagged_entry e;
		cq_take(b.cq, &e, NULL, "trecv");
		if (e.op_context != &c2 || e.tag != t2 || strcmp(r2, "second") || !(e.flags & FI_TAGGED))
			fail("trecv of tag %#llx got context %p tag %#llx '%s'", (unsigned long long)t2, e.op_context,
			     (unsigned long long)e.tag, r2);
		CHECK(fi_trecv(b.ep, r1, sizeof r1, NULL, FI_ADDR_UNSPEC, 0x1200, 0xff, &c1));
		cq_take(b.cq, &e, NULL, "trecv ignore");
		if (e.op_context != &c1 || e.tag != t1 || strcmp(r1, "first"))
			fail("trecv with ignore bits got tag %#llx '%s'", (unsigned long long)e.tag, r1);
		cq_take(a.cq, &e, NULL, "tsend");
		cq_take(a.cq, &e, NULL, "tsend");
		printf("ok tagged matching\n");
	}
	source_err(&a, dom);

	/* fi_trecvmsg with FI_PEEK, FI_CLAIM and FI_DISCARD (fi_tagged(3)):
	 * the tree's unexpected messages, seen and taken through it. */
	{
		char m[3][8] = {"peek", "claim", "discard"}, r[8] = "";
		int s[3];
		struct fi_context ctx;
		for (int i = 0; i < 3; i++)
			CHECK(fi_tsend(a.ep, m[i], sizeof m[i], NULL, b.addr, 0x700 + i, &s[i]));
		struct fi_cq_tagged_entry e;
		/* FI_PEEK until the first message is there; FI_ENOMSG before. */
		int err;
		for (double deadline = now() + 5; (err = trecv_flags(&b, 0x700, FI_PEEK, &ctx, NULL, 0, &e)) == FI_ENOMSG;)
			if (now() > deadline)
				fail("FI_PEEK: no message after 5 s");
		if (err || e.op_context != &ctx || e.len != sizeof m[0] || e.tag != 0x700 || !(e.flags & FI_TAGGED))
			fail("FI_PEEK: err %d context %p len %zu tag %#llx", err, e.op_context, e.len,
			     (unsigned long long)e.tag);
		if ((err = trecv_flags(&b, 0xbad, FI_PEEK, &ctx, NULL, 0, &e)) != FI_ENOMSG)
			fail("FI_PEEK of tag 0xbad: %d, want FI_ENOMSG", err);
		if ((err = trecv_flags(&b, 0x700, 0, &ctx, r, sizeof r, &e)) || strcmp(r, "peek"))
			fail("receive after FI_PEEK: %d '%s'", err, r);
		/* FI_PEEK | FI_CLAIM, then FI_CLAIM with the same context. */
		for (double deadline = now() + 5;
		     (err = trecv_flags(&b, 0x701, FI_PEEK | FI_CLAIM, &ctx, NULL, 0, &e)) == FI_ENOMSG;)
			if (now() > deadline)
				fail("FI_PEEK | FI_CLAIM: no message after 5 s");
		if (err || e.len != sizeof m[1] || e.tag != 0x701)
			fail("FI_PEEK | FI_CLAIM: err %d len %zu tag %#llx", err, e.len, (unsigned long long)e.tag);
		if ((err = trecv_flags(&b, 0x701, FI_CLAIM, &ctx, r, sizeof r, &e)) || strcmp(r, "claim") ||
		    e.tag != 0x701)
			fail("FI_CLAIM: %d '%s' tag %#llx", err, r, (unsigned long long)e.tag);
		/* FI_PEEK | FI_DISCARD: gone after. */
		for (double deadline = now() + 5;
		     (err = trecv_flags(&b, 0x702, FI_PEEK | FI_DISCARD, &ctx, NULL, 0, &e)) == FI_ENOMSG;)
			if (now() > deadline)
				fail("FI_PEEK | FI_DISCARD: no message after 5 s");
		if (err || e.tag != 0x702)
			fail("FI_PEEK | FI_DISCARD: err %d tag %#llx", err, (unsigned long long)e.tag);
		if ((err = trecv_flags(&b, 0x702, FI_PEEK, &ctx, NULL, 0, &e)) != FI_ENOMSG)
			fail("FI_PEEK after FI_DISCARD: %d, want FI_ENOMSG", err);
		for (int i = 0; i < 3; i++)
			cq_take(a.cq, &e, NULL, "tsend");
		printf("ok FI_PEEK, FI_CLAIM, FI_DISCARD\n");
	}

	/* Directed receive: from c only, though a's message came first. */
	{
		char ma[8] = "from a", mc[8] = "from c", r[8] = "", r2[8] = "";
		int rc, rany, sa, sc;
		CHECK(fi_recv(b.ep, r, sizeof r, NULL, c.addr, &rc));
		CHECK(fi_send(a.ep, ma, sizeof ma, NULL, b.addr, &sa));
		struct fi_cq_tagged_entry e;
		cq_take(a.cq, &e, NULL, "send from a");
		CHECK(fi_send(c.ep, mc, sizeof mc, NULL, b.addr, &sc));
		fi_addr_t src;
		cq_take(b.cq, &e, &src, "directed recv");
		if (e.op_context != &rc || strcmp(r, "from c") || src != c.addr)
			fail("directed receive got '%s' from %llu", r, (unsigned long long)src);
		CHECK(fi_recv(b.ep, r2, sizeof r2, NULL, FI_ADDR_UNSPEC, &rany));
		cq_take(b.cq, &e, &src, "recv any");
		if (e.op_context != &rany || strcmp(r2, "from a") || src != a.addr)
			fail("receive from anyone got '%s' from %llu", r2, (unsigned long long)src);
		cq_take(c.cq, &e, NULL, "send from c");
		printf("ok directed receive\n");
	}

	/* FI_MULTI_RECV: one 8 KiB buffer takes 1000-byte messages until
	 * fewer than FI_OPT_MIN_MULTI_RECV (1024) bytes are left: the eighth
	 * message's entry releases it. */
	{
		size_t min = 1024, got_len = sizeof min;
		CHECK(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
		CHECK(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &got_len));
		if (min != 1024)
			fail("FI_OPT_MIN_MULTI_RECV reads %zu", min);
		static uint8_t buf[8192], tx[8][1000];
		struct iovec iov = {buf, sizeof buf};
		int mctx;
		struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &mctx};
		CHECK(fi_recvmsg(b.ep, &msg, FI_MULTI_RECV));
		struct fi_cq_tagged_entry e;
		for (int i = 0; i < 8; i++) {
			int sctx;
			fill(tx[i], sizeof tx[i], 50 + i);
			CHECK(fi_send(a.ep, tx[i], sizeof tx[i], NULL, b.addr, &sctx));
			cq_take(a.cq, &e, NULL, "send to multi-recv");
			cq_take(b.cq, &e, NULL, "multi-recv");
			if (e.op_context != &mctx || e.len != sizeof tx[i] || !e.buf || (uint8_t *)e.buf < buf ||
			    (uint8_t *)e.buf + e.len > buf + sizeof buf)
				fail("multi-recv message %d: context %p len %zu buf %p", i, e.op_context, e.len, e.buf);
			check_bytes(e.buf, e.len, 50 + i, "multi-recv");
			bool last = e.flags & FI_MULTI_RECV;
			if (last != (i == 7))
				fail("multi-recv message %d: FI_MULTI_RECV %s", i, last ? "early" : "missing");
		}
		printf("ok FI_MULTI_RECV\n");
	}

	/* A counter: once it counts a receive into a staged buffer, the bytes
	 * are there, though nobody read the CQ. And an endpoint with no CQ for
	 * its receives (the provider binds a hidden one). */
	{
		struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
		struct fid_cntr *cntr;
		CHECK(fi_cntr_open(domain, &ca, &cntr, NULL));
		struct node d;
		open_node(&d, FI_TRANSMIT, cntr);
		static uint8_t tx[3000], rx[3000];
		fill(tx, sizeof tx, 77);
		CHECK(fi_recv(d.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		int sctx;
		CHECK(fi_send(a.ep, tx, sizeof tx, NULL, d.addr, &sctx));
		CHECK(fi_cntr_wait(cntr, 1, 5000));
		check_bytes(rx, sizeof rx, 77, "counted");
		struct fi_cq_tagged_entry e;
		cq_take(a.cq, &e, NULL, "send to counted");
		close_node(&d);
		CHECK(fi_close(&cntr->fid));
		printf("ok counter sees the bytes; hidden receive CQ\n");
	}

	/* fi_cq_sread: a timeout on an empty CQ, then an entry. */
	{
		struct fi_cq_tagged_entry e;
		double t0 = now();
		ssize_t n = fi_cq_sread(b.cq, &e, 1, NULL, 200);
		double dt = now() - t0;
		if (n != -FI_EAGAIN || dt < 0.15 || dt > 2)
			fail("fi_cq_sread on an empty CQ: %zd after %.3f s", n, dt);
		CHECK(fi_cq_signal(b.cq));
		t0 = now();
		n = fi_cq_sread(b.cq, &e, 1, NULL, 5000);
		dt = now() - t0;
		if (n != -FI_EAGAIN || dt > 1)
			fail("fi_cq_sread after fi_cq_signal: %zd after %.3f s", n, dt);
		char m[4] = "hi", r[4];
		int rctx, sctx;
		CHECK(fi_recv(b.ep, r, sizeof r, NULL, FI_ADDR_UNSPEC, &rctx));
		CHECK(fi_send(a.ep, m, sizeof m, NULL, b.addr, &sctx));
		n = fi_cq_sread(b.cq, &e, 1, NULL, 5000);
		if (n != 1 || e.op_context != &rctx || strcmp(r, "hi"))
			fail("fi_cq_sread: %zd", n);
		cq_take(a.cq, &e, NULL, "send");
		printf("ok fi_cq_sread, fi_cq_signal\n");
	}

	/* Selective completion: only operations with FI_COMPLETION make an
	 * entry. */
	{
		struct node s;
		open_node(&s, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION, NULL);
		char m[4] = "no", m2[4] = "yes", r[4], r2[4];
		int rctx, r2ctx, sctx, s2ctx;
		CHECK(fi_recv(b.ep, r, sizeof r, NULL, FI_ADDR_UNSPEC, &rctx));
		CHECK(fi_recv(b.ep, r2, sizeof r2, NULL, FI_ADDR_UNSPEC, &r2ctx));
		CHECK(fi_send(s.ep, m, sizeof m, NULL, b.addr, &sctx));
		struct iovec iov = {m2, sizeof m2};
		struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = b.addr, .context = &s2ctx};
		CHECK(fi_sendmsg(s.ep, &msg, FI_COMPLETION));
		struct fi_cq_tagged_entry e;
		cq_take(b.cq, &e, NULL, "recv");
		cq_take(b.cq, &e, NULL, "recv");
		cq_take(s.cq, &e, NULL, "selective send");
		if (e.op_context != &s2ctx)
			fail("selective: the entry is for context %p, want the FI_COMPLETION send's", e.op_context);
		if (fi_cq_read(s.cq, &e, 1) != -FI_EAGAIN)
			fail("selective: a second entry");
		close_node(&s);
		printf("ok selective completion\n");
	}

	/* RMA to b's registered region from a's staged buffers; remote
	 * addresses count from the registered buffer. */
	{
		size_t len = 20000, off = 300;
		uint8_t *region = aligned_alloc(4096, 65536), *tx = malloc(len), *rx = malloc(len);
		if (!region || !tx || !rx)
			fail("malloc");
		memset(region, 0, 65536);
		struct fid_mr *mr;
		CHECK(fi_mr_reg(domain, region, 65536, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0x77, 0, &mr, NULL));
		uint64_t key = fi_mr_key(mr);
		fill(tx, len, 88);
		struct iovec iov = {tx, len};
		struct fi_rma_iov rma = {off, len, key};
		int wctx, rctx, dctx;
		struct fi_msg_rma msg = {.msg_iov = &iov, .iov_count = 1, .addr = b.addr, .rma_iov = &rma,
					 .rma_iov_count = 1, .context = &wctx};
		CHECK(fi_writemsg(a.ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION));
		struct fi_cq_tagged_entry e;
		cq_take(a.cq, &e, NULL, "fi_writemsg");
		if (e.op_context != &wctx || !(e.flags & FI_WRITE))
			fail("fi_writemsg: completion context %p flags %#llx", e.op_context, (unsigned long long)e.flags);
		check_bytes(region + off, len, 88, "written");
		CHECK(fi_read(a.ep, rx, len, NULL, b.addr, off, key, &rctx));
		cq_take(a.cq, &e, NULL, "fi_read");
		if (e.op_context != &rctx || !(e.flags & FI_READ))
			fail("fi_read: completion context %p", e.op_context);
		check_bytes(rx, len, 88, "read");
		uint8_t spare[16];
		int sctx;
		if (info->rx_attr->mode & FI_RX_CQ_DATA)
			CHECK(fi_recv(b.ep, spare, sizeof spare, NULL, FI_ADDR_UNSPEC, &sctx));
		CHECK(fi_writedata(a.ep, tx, 16, NULL, 0x99, b.addr, 0, key, &dctx));
		cq_take(a.cq, &e, NULL, "fi_writedata");
		cq_take(b.cq, &e, NULL, "fi_writedata target");
		if (!(e.flags & FI_REMOTE_CQ_DATA) || e.data != 0x99)
			fail("fi_writedata: target entry flags %#llx data %#llx", (unsigned long long)e.flags,
			     (unsigned long long)e.data);
		CHECK(fi_close(&mr->fid));
		free(region);
		free(tx);
		free(rx);
		printf("ok RMA write, read, writedata\n");
	}

	threads(&a, &b);

done:
	if (fi_close(&domain->fid) != -FI_EBUSY)
		fail("fi_close of a domain with endpoints open did not give -FI_EBUSY");
	close_node(&a);
	close_node(&b);
	close_node(&c);
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS\n");
	return 0;
}
