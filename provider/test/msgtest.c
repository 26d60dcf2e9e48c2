/*
 * msgtest: checks what fi_pingpong does not of the fabricfs provider's
 * FI_EP_MSG endpoints, both sides in one process, through the libfabric
 * API: connection with private data both ways, messages of several sizes
 * (staged, larger than a staging region, scattered over iovecs) with their
 * bytes checked, the four CQ formats, inject, remote CQ data, selective
 * completion, a truncated receive's error entry, fi_cancel, RMA write and
 * read (staged) and write with remote CQ data, zero-copy messages between
 * registered buffers, an atomic the domain does not take, the shutdown
 * event, a reject with private data, authorization keys (a listener
 * refuses another key), fi_domain_bind (FI_REG_MR's FI_MR_COMPLETE
 * events, the domain's EQ as its endpoints' default), fi_open_ops and
 * fi_set_ops (check_ops), a counter bound to a memory region, and an
 * endpoint opened from an fi_info whose handle is a passive endpoint.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric msgtest [DOMAIN]
 *
 * DOMAIN is the info's domain name (default tcp/lo). Prints one "ok NAME"
 * line per check and "PASS" at the end, and exits 0; on a failure it
 * prints "FAIL: ..." and exits 1. tests/provider_test.go runs it.
 */
#include "fitest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../fi_ext_fabricfs.h"

/* The longest key the tree takes (docs/tree.md, attr/auth_key). */
#define FFS_TEST_AUTH_KEY_MAX 64


static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;

/* A connected side: its endpoint and CQs (tx and rx separate, so that
 * their formats differ). */
struct side {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
};

/* eq_wait reads the next event within 5 s: its type, and entry. */
static ssize_t eq_wait(uint32_t *event, struct fi_eq_cm_entry *entry, size_t len)
{
	ssize_t n = fi_eq_sread(eq, event, entry, len, 5000, 0);
	if (n == -FI_EAVAIL)
		return n;
	if (n < 0)
		fail("fi_eq_sread: %zd (%s)", n, fi_strerror((int)-n));
	return n;
}

/* cq_wait reads one entry of cq in its format into buf within 5 s; an
 * error entry goes into *err and makes it return -FI_EAVAIL. */
static ssize_t cq_wait(struct fid_cq *cq, void *buf, struct fi_cq_err_entry *err)
{
	double deadline = now() + 5;
	for (;;) {
		ssize_t n = fi_cq_read(cq, buf, 1);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			memset(err, 0, sizeof *err);
			if (fi_cq_readerr(cq, err, 0) != 1)
				fail("fi_cq_readerr after -FI_EAVAIL");
			return n;
		}
		if (n != -FI_EAGAIN)
			fail("fi_cq_read: %zd (%s)", n, fi_strerror((int)-n));
		if (now() > deadline)
			fail("no completion after 5 s");
	}
}

/* cq_none checks that cq stays empty for 100 ms. */
static void cq_none(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry e;
	double deadline = now() + 0.1;
	while (now() < deadline) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n != -FI_EAGAIN)
			fail("%s: fi_cq_read gave %zd, want nothing", what, n);
	}
}

static void open_side(struct side *s, enum fi_cq_format txf, enum fi_cq_format rxf)
{
	struct fi_cq_attr attr = {.size = 64, .format = txf, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &s->txcq, NULL));
	attr.format = rxf;
	CHECK(fi_cq_open(domain, &attr, &s->rxcq, NULL));
}

static void bind_side(struct side *s)
{
	CHECK(fi_ep_bind(s->ep, &eq->fid, 0));
	CHECK(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV));
	CHECK(fi_enable(s->ep));
}

static void close_side(struct side *s)
{
	CHECK(fi_close(&s->ep->fid));
	CHECK(fi_close(&s->txcq->fid));
	CHECK(fi_close(&s->rxcq->fid));
}

/* free_port is a TCP port of at's address no socket holds now. */
static uint16_t free_port(const struct sockaddr_in *at)
{
	struct sockaddr_in a = *at;
	socklen_t len = sizeof a;
	a.sin_port = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len))
		fail("a free port: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

/* connect_pair connects a client endpoint to the passive endpoint with
 * private data both ways and checks the events. */
static void connect_pair(struct fid_pep *pep, struct side *cli, struct side *srv)
{
	char addr[128];
	size_t alen = sizeof addr;
	CHECK(fi_getname(&pep->fid, addr, &alen));
	open_side(cli, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG);
	open_side(srv, FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED);
	CHECK(fi_endpoint(domain, info, &cli->ep, NULL));
	bind_side(cli);
	CHECK(fi_connect(cli->ep, addr, "hello", 5));

	uint32_t event;
	struct {
		struct fi_eq_cm_entry e;
		char data[64];
	} cm;
	/* Without a timeout: the blocking read of the tree EQ. */
	ssize_t n = fi_eq_sread(eq, &event, &cm.e, sizeof cm, -1, 0);
	if (n < 0 || event != FI_CONNREQ || cm.e.fid != &pep->fid || !cm.e.info || !cm.e.info->handle)
		fail("want FI_CONNREQ for the pep, got %zd event %u", n, event);
	if ((size_t)n != sizeof cm.e + 5 || memcmp(cm.e.data, "hello", 5))
		fail("connreq private data: %zd bytes", n - (ssize_t)sizeof cm.e);
	CHECK(fi_endpoint(domain, cm.e.info, &srv->ep, NULL));
	fi_freeinfo(cm.e.info);
	bind_side(srv);
	CHECK(fi_accept(srv->ep, "welcome", 7));
	bool got_cli = false, got_srv = false;
	while (!got_cli || !got_srv) {
		n = eq_wait(&event, &cm.e, sizeof cm);
		if (n < 0 || event != FI_CONNECTED)
			fail("want FI_CONNECTED, got %zd event %u", n, event);
		if (cm.e.fid == &cli->ep->fid) {
			if ((size_t)n != sizeof cm.e + 7 || memcmp(cm.e.data, "welcome", 7))
				fail("accept private data: %zd bytes", n - (ssize_t)sizeof cm.e);
			got_cli = true;
		} else if (cm.e.fid == &srv->ep->fid) {
			got_srv = true;
		} else {
			fail("FI_CONNECTED for an unknown fid");
		}
	}
	printf("ok connect with private data\n");

	/* Names: the client's peer is where it connected; the server's peer
	 * is the client. */
	char cname[128], cpeer[128], speer[128];
	size_t cl = sizeof cname, cpl = sizeof cpeer, spl = sizeof speer;
	CHECK(fi_getname(&cli->ep->fid, cname, &cl));
	CHECK(fi_getpeer(cli->ep, cpeer, &cpl));
	CHECK(fi_getpeer(srv->ep, speer, &spl));
	if (cpl != alen || memcmp(cpeer, addr, alen))
		fail("fi_getpeer of the client is not the passive endpoint's name");
	if (spl != cl || memcmp(speer, cname, cl))
		fail("fi_getpeer of the server is not the client's name");
	size_t small = 4;
	if (fi_getname(&cli->ep->fid, cname, &small) != -FI_ETOOSMALL || small != cl)
		fail("fi_getname into 4 bytes did not give -FI_ETOOSMALL and the size");
	printf("ok getname, getpeer\n");
}

/* check_ops: fi_open_ops, "used to open provider specific interfaces"
 * (fi_domain(3)), opens the sets the tree has in ops/ (fi_ext_fabricfs.h)
 * and answers -FI_ENOSYS for other names; fi_set_ops: "If the override is
 * unknown or not supported, the provider will return -FI_ENOSYS." A verbs
 * domain has verbs_device_v1 and its endpoints verbs_qp_v1 (the QP in
 * RTS, aimed at the peer's); a tcp domain has no set and its endpoints
 * tcp_sockopt_v1, whose TCP_NODELAY reads 1 and takes 0. */
static void check_ops(struct side *cli, struct side *srv, bool verbs)
{
	struct fi_fabricfs_ops *ops = NULL;
	char buf[64];
	int hook;
	if (fi_open_ops(&domain->fid, "no_such_ops_v1", 0, (void **)&ops, NULL) != -FI_ENOSYS ||
	    fi_open_ops(&cli->ep->fid, "../attr", 0, (void **)&ops, NULL) != -FI_ENOSYS)
		fail("fi_open_ops of unknown names did not answer -FI_ENOSYS");
	if (fi_set_ops(&domain->fid, FI_SET_OPS_HMEM_OVERRIDE, 0, &hook, NULL) != -FI_ENOSYS)
		fail("fi_set_ops(FI_SET_OPS_HMEM_OVERRIDE) did not answer -FI_ENOSYS");
	if (verbs) {
		CHECK(fi_open_ops(&domain->fid, "verbs_device_v1", 0, (void **)&ops, NULL));
		if (!ops || ops->size != sizeof *ops)
			fail("verbs_device_v1: no ops");
		if (ops->get(&domain->fid, "verbs_device_v1", "gid", buf, sizeof buf) != 39 ||
		    strcmp(buf, "0000:0000:0000:0000:0000:ffff:7f00:0001"))
			fail("verbs_device_v1 gid: %s", buf);
		if (ops->get(&domain->fid, "verbs_device_v1", "no_such_value", buf, sizeof buf) != -FI_ENOENT)
			fail("a value the set has not is not -FI_ENOENT");
		if (ops->set(&domain->fid, "verbs_device_v1", "gid", "::1") != -FI_EACCES)
			fail("writing a read-only value did not fail with -FI_EACCES");
		CHECK(fi_open_ops(&cli->ep->fid, "verbs_qp_v1", 0, (void **)&ops, NULL));
		char cqpn[16], sqpn[16], cdest[16];
		if (ops->get(&cli->ep->fid, "verbs_qp_v1", "qp_state", buf, sizeof buf) < 0 || strcmp(buf, "IBV_QPS_RTS"))
			fail("verbs_qp_v1 qp_state: %s", buf);
		if (ops->get(&cli->ep->fid, "verbs_qp_v1", "qp_num", cqpn, sizeof cqpn) <= 0 ||
		    ops->get(&cli->ep->fid, "verbs_qp_v1", "dest_qp_num", cdest, sizeof cdest) <= 0 ||
		    ops->get(&srv->ep->fid, "verbs_qp_v1", "qp_num", sqpn, sizeof sqpn) <= 0 || strcmp(cdest, sqpn) ||
		    !strcmp(cqpn, sqpn))
			fail("verbs_qp_v1: client qp %s to %s, server qp %s", cqpn, cdest, sqpn);
	} else {
		if (fi_open_ops(&domain->fid, "tcp_sockopt_v1", 0, (void **)&ops, NULL) != -FI_ENOSYS)
			fail("a tcp domain opened tcp_sockopt_v1");
		CHECK(fi_open_ops(&cli->ep->fid, "tcp_sockopt_v1", 0, (void **)&ops, NULL));
		if (ops->get(&cli->ep->fid, "tcp_sockopt_v1", "TCP_NODELAY", buf, sizeof buf) != 1 || strcmp(buf, "1"))
			fail("tcp_sockopt_v1 TCP_NODELAY: %s", buf);
		CHECK(ops->set(&cli->ep->fid, "tcp_sockopt_v1", "TCP_NODELAY", "0"));
		if (ops->get(&cli->ep->fid, "tcp_sockopt_v1", "TCP_NODELAY", buf, sizeof buf) != 1 || strcmp(buf, "0"))
			fail("tcp_sockopt_v1 TCP_NODELAY after writing 0: %s", buf);
		if (ops->set(&cli->ep->fid, "tcp_sockopt_v1", "TCP_NODELAY", "7") != -FI_EINVAL)
			fail("TCP_NODELAY took 7");
		CHECK(ops->set(&cli->ep->fid, "tcp_sockopt_v1", "TCP_NODELAY", "1"));
	}
	printf("ok fi_open_ops, fi_set_ops\n");
}

/* transfer sends len bytes (in niov pieces) from cli to srv and checks
 * them, the completions and the formats. */
static void transfer(struct side *cli, struct side *srv, size_t len, size_t niov, size_t seed)
{
	uint8_t *tx = malloc(len + 1), *rx = malloc(len + 1);
	if (!tx || !rx)
		fail("malloc %zu", len);
	fill(tx, len, seed);
	memset(rx, 0, len);
	struct iovec txv[4], rxv[4];
	size_t piece = len / niov;
	for (size_t i = 0; i < niov; i++) {
		size_t l = i + 1 < niov ? piece : len - piece * (niov - 1);
		txv[i] = (struct iovec){tx + i * piece, l};
		rxv[i] = (struct iovec){rx + i * piece, l};
	}
	int rctx, sctx;
	if (niov == 1) {
		CHECK(fi_recv(srv->ep, rx, len, NULL, 0, &rctx));
		CHECK(fi_send(cli->ep, tx, len, NULL, 0, &sctx));
	} else {
		CHECK(fi_recvv(srv->ep, rxv, NULL, niov, 0, &rctx));
		CHECK(fi_sendv(cli->ep, txv, NULL, niov, 0, &sctx));
	}
	struct fi_cq_err_entry err;
	struct fi_cq_entry se;
	if (cq_wait(cli->txcq, &se, &err) != 1 || se.op_context != &sctx)
		fail("send completion of %zu bytes: err %d, context %p", len, err.err, se.op_context);
	struct fi_cq_tagged_entry re;
	if (cq_wait(srv->rxcq, &re, &err) != 1)
		fail("recv of %zu bytes: error %d (%s)", len, err.err,
		     fi_cq_strerror(srv->rxcq, err.prov_errno, err.err_data, NULL, 0));
	if (re.op_context != &rctx || re.len != len || !(re.flags & FI_RECV) || !(re.flags & FI_MSG) || re.buf != rx)
		fail("recv completion of %zu bytes: context %p len %zu flags %#llx buf %p", len, re.op_context,
		     re.len, (unsigned long long)re.flags, re.buf);
	check_bytes(rx, len, seed, "received");
	printf("ok %zu bytes in %zu iovecs\n", len, niov);
	free(tx);
	free(rx);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	/* It handles a write with remote CQ data taking a receive, and takes
	 * verbs' memory registration modes (verbs); the provider copies
	 * unregistered buffers through its own regions, so FI_MR_LOCAL does
	 * not bind it, and the test posts most buffers without a desc. */
	hints->mode = FI_RX_CQ_DATA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(argc > 1 ? argv[1] : "tcp/lo");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	struct fi_eq_attr eqa = {.size = 64, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_eq_open(fabric, &eqa, &eq, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fid_pep *pep;
	CHECK(fi_passive_ep(fabric, info, &pep, NULL));
	CHECK(fi_pep_bind(pep, &eq->fid, 0));
	CHECK(fi_listen(pep));

	struct side cli, srv;
	connect_pair(pep, &cli, &srv);
	check_ops(&cli, &srv, !strncmp(info->domain_attr->name, "verbs/", 6));

	/* Sizes: a byte, a page, 1 MiB, one larger than a staging region
	 * (4 MiB: a temporary region), and scattered over iovecs. */
	size_t sizes[] = {1, 4096, 1 << 20, (5 << 20) + 3};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		transfer(&cli, &srv, sizes[i], 1, i);
	transfer(&cli, &srv, 10000, 3, 7);

	/* Inject: no send completion; the bytes may be reused at once. */
	{
		uint8_t buf[64], rx[64];
		int rctx;
		CHECK(fi_recv(srv.ep, rx, sizeof rx, NULL, 0, &rctx));
		fill(buf, sizeof buf, 21);
		CHECK(fi_inject(cli.ep, buf, sizeof buf, 0));
		memset(buf, 0, sizeof buf);
		struct fi_cq_tagged_entry re;
		struct fi_cq_err_entry err;
		if (cq_wait(srv.rxcq, &re, &err) != 1 || re.len != sizeof rx)
			fail("inject: recv completion");
		check_bytes(rx, sizeof rx, 21, "injected");
		cq_none(cli.txcq, "inject");
		printf("ok inject\n");
	}

	/* Remote CQ data, in the receiver's DATA-format... TAGGED entry. */
	{
		uint8_t buf[16] = "data", rx[16];
		int rctx, sctx;
		CHECK(fi_recv(srv.ep, rx, sizeof rx, NULL, 0, &rctx));
		CHECK(fi_senddata(cli.ep, buf, sizeof buf, NULL, 0xfeed, 0, &sctx));
		struct fi_cq_tagged_entry re;
		struct fi_cq_err_entry err;
		struct fi_cq_entry se;
		if (cq_wait(srv.rxcq, &re, &err) != 1 || !(re.flags & FI_REMOTE_CQ_DATA) || re.data != 0xfeed)
			fail("senddata: flags %#llx data %#llx", (unsigned long long)re.flags,
			     (unsigned long long)re.data);
		if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &sctx)
			fail("senddata: send completion");
		printf("ok remote CQ data\n");
	}

	/* A truncated receive: an error entry with FI_ETRUNC, olen the bytes
	 * lost, and the start of the message in the buffer. */
	{
		uint8_t tx[100], rx[10];
		int rctx, sctx;
		fill(tx, sizeof tx, 3);
		CHECK(fi_recv(srv.ep, rx, sizeof rx, NULL, 0, &rctx));
		CHECK(fi_send(cli.ep, tx, sizeof tx, NULL, 0, &sctx));
		struct fi_cq_tagged_entry re;
		struct fi_cq_err_entry err;
		if (cq_wait(srv.rxcq, &re, &err) != -FI_EAVAIL)
			fail("truncated receive completed without error");
		if (err.err != FI_ETRUNC || err.olen != 90 || err.op_context != &rctx || err.len != 10)
			fail("truncated receive: err %d olen %zu len %zu", err.err, err.olen, err.len);
		check_bytes(rx, sizeof rx, 3, "truncated");
		const char *s = fi_cq_strerror(srv.rxcq, err.prov_errno, err.err_data, NULL, 0);
		if (!s || !*s)
			fail("fi_cq_strerror gave nothing");
		if (err.err_data_size)
			fail("a truncated receive's entry has %zu bytes of err_data", err.err_data_size);
		struct fi_cq_entry se;
		if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &sctx)
			fail("truncated: send completion");
		printf("ok truncated receive (%s)\n", s);
	}

	/* fi_cancel of a posted receive: FI_ECANCELED with its context. */
	{
		uint8_t rx[32];
		int rctx;
		CHECK(fi_recv(srv.ep, rx, sizeof rx, NULL, 0, &rctx));
		CHECK(fi_cancel(&srv.ep->fid, &rctx));
		struct fi_cq_tagged_entry re;
		struct fi_cq_err_entry err;
		if (!strncmp(info->domain_attr->name, "verbs/", 6)) {
			/* A receive verbs posted cannot be taken back: fi_cancel
			 * succeeds with nothing to do, and the receive stays. */
			int sctx;
			struct fi_cq_entry se;
			CHECK(fi_send(cli.ep, "x", 1, NULL, 0, &sctx));
			if (cq_wait(srv.rxcq, &re, &err) != 1 || re.op_context != &rctx || cq_wait(cli.txcq, &se, &err) != 1)
				fail("the receive cancel left did not complete");
			printf("ok cancel (verbs cannot cancel a posted receive: it completes)\n");
		} else {
			if (cq_wait(srv.rxcq, &re, &err) != -FI_EAVAIL || err.err != FI_ECANCELED || err.op_context != &rctx)
				fail("cancel: want FI_ECANCELED for the receive, got err %d", err.err);
			printf("ok cancel\n");
		}
		/* Nothing is pending with this context now: not an error. */
		if (fi_cancel(&srv.ep->fid, &rctx) != 0)
			fail("cancel of nothing posted failed");
	}

	/* RMA into a registered region of the server, from and to the
	 * client's unregistered (staged) buffers; remote addresses count from
	 * the registered buffer. */
	{
		size_t len = 10000, off = 100;
		uint8_t *region = aligned_alloc(4096, 65536), *tx = malloc(len), *rx = malloc(len);
		if (!region || !tx || !rx)
			fail("malloc");
		memset(region, 0, 65536);
		struct fid_mr *mr;
		CHECK(fi_mr_reg(domain, region, 65536, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &mr, NULL));
		uint64_t key = fi_mr_key(mr);
		/* fi_mr(3): fi_mr_bind "associates a memory region with a
		 * counter"; FI_REMOTE_WRITE "Generates an event whenever a remote
		 * RMA write or atomic operation modifies the memory region". */
		struct fid_cntr *writes;
		struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
		CHECK(fi_cntr_open(domain, &ca, &writes, NULL));
		CHECK(fi_mr_bind(mr, &writes->fid, FI_REMOTE_WRITE));
		if (fi_mr_bind(mr, &writes->fid, FI_SEND) != -FI_EBADFLAGS)
			fail("fi_mr_bind with FI_SEND: want -FI_EBADFLAGS");
		fill(tx, len, 31);
		struct iovec iov = {tx, len};
		struct fi_rma_iov rma = {off, len, key};
		int wctx, rctx, dctx;
		struct fi_msg_rma msg = {.msg_iov = &iov, .iov_count = 1, .rma_iov = &rma, .rma_iov_count = 1,
					 .context = &wctx};
		CHECK(fi_writemsg(cli.ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION));
		struct fi_cq_entry se;
		struct fi_cq_err_entry err;
		if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &wctx)
			fail("fi_writemsg: completion err %d", err.err);
		check_bytes(region + off, len, 31, "written");
		if (fi_cntr_read(writes) != 1)
			fail("the region's counter after a write: %llu, want 1", (unsigned long long)fi_cntr_read(writes));
		CHECK(fi_read(cli.ep, rx, len, NULL, 0, off, key, &rctx));
		if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &rctx)
			fail("fi_read: completion err %d", err.err);
		check_bytes(rx, len, 31, "read");
		if (fi_cntr_read(writes) != 1)
			fail("the region's write counter after a read: %llu, want 1", (unsigned long long)fi_cntr_read(writes));
		uint8_t spare[16];
		int sctx;
		if (info->rx_attr->mode & FI_RX_CQ_DATA)
			CHECK(fi_recv(srv.ep, spare, sizeof spare, NULL, 0, &sctx));
		CHECK(fi_writedata(cli.ep, tx, 16, NULL, 0x77, 0, 0, key, &dctx));
		struct fi_cq_tagged_entry re;
		if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &dctx)
			fail("fi_writedata: completion err %d", err.err);
		if (cq_wait(srv.rxcq, &re, &err) != 1 || !(re.flags & FI_REMOTE_CQ_DATA) || re.data != 0x77)
			fail("fi_writedata: target entry flags %#llx data %#llx", (unsigned long long)re.flags,
			     (unsigned long long)re.data);
		if (fi_close(&writes->fid) != -FI_EBUSY)
			fail("fi_close of a counter bound to a region: want -FI_EBUSY");
		CHECK(fi_close(&mr->fid));
		CHECK(fi_close(&writes->fid));
		free(region);
		free(tx);
		free(rx);
		printf("ok RMA write, read, writedata; a counter bound to the region counts the write\n");
	}

	/* Zero copy: both buffers registered, named by their descs. */
	{
		size_t len = 1 << 20;
		uint8_t *tx = aligned_alloc(4096, len), *rx = aligned_alloc(4096, len);
		if (!tx || !rx)
			fail("malloc");
		struct fid_mr *tmr, *rmr;
		CHECK(fi_mr_reg(domain, tx, len, FI_SEND, 0, 1, 0, &tmr, NULL));
		CHECK(fi_mr_reg(domain, rx, len, FI_RECV, 0, 2, 0, &rmr, NULL)); /* keys unique in the domain */
		for (int round = 0; round < 3; round++) {
			fill(tx, len, 40 + round);
			int rctx, sctx;
			CHECK(fi_recv(srv.ep, rx, len, fi_mr_desc(rmr), 0, &rctx));
			CHECK(fi_send(cli.ep, tx, len, fi_mr_desc(tmr), 0, &sctx));
			struct fi_cq_entry se;
			struct fi_cq_tagged_entry re;
			struct fi_cq_err_entry err;
			if (cq_wait(cli.txcq, &se, &err) != 1 || se.op_context != &sctx)
				fail("zero copy: send completion err %d", err.err);
			if (cq_wait(srv.rxcq, &re, &err) != 1 || re.len != len || re.buf != rx)
				fail("zero copy: recv completion err %d", err.err);
			check_bytes(rx, len, 40 + round, "zero copy");
		}
		CHECK(fi_close(&tmr->fid));
		CHECK(fi_close(&rmr->fid));
		free(tx);
		free(rx);
		printf("ok zero-copy messages\n");
	}

	/* An atomic the domain's FI_EP_MSG does not take fails before it is
	 * posted: tcp's takes none (-FI_ENOSYS, as libfabric's providers
	 * without atomics), verbs' no base FI_SUM (-FI_EOPNOTSUPP: "The
	 * requested atomic operation is not supported on this endpoint.").
	 * atomictest checks the ones they take. */
	{
		uint64_t v = 1;
		int want = strncmp(info->domain_attr->name, "tcp/", 4) ? -FI_EOPNOTSUPP : -FI_ENOSYS;
		ssize_t ret = fi_atomic(cli.ep, &v, 1, NULL, 0, 0, 0, FI_UINT64, FI_SUM, NULL);
		if (ret != want)
			fail("fi_atomic FI_SUM FI_UINT64: %zd, want %d", ret, want);
		printf("ok an atomic the domain does not take: %s\n", fi_strerror(-want));
	}

	/* Shutdown: both sides get FI_SHUTDOWN. */
	{
		CHECK(fi_shutdown(cli.ep, 0));
		bool got_cli = false, got_srv = false;
		while (!got_cli || !got_srv) {
			uint32_t event;
			struct fi_eq_cm_entry e;
			ssize_t n = eq_wait(&event, &e, sizeof e);
			if (n < 0 || event != FI_SHUTDOWN)
				fail("want FI_SHUTDOWN, got %zd event %u", n, event);
			got_cli |= e.fid == &cli.ep->fid;
			got_srv |= e.fid == &srv.ep->fid;
		}
		printf("ok shutdown\n");
	}
	close_side(&cli);
	close_side(&srv);

	/* Reject with private data: the client's EQ has an error entry with
	 * FI_ECONNREFUSED and the data. */
	{
		char addr[128];
		size_t alen = sizeof addr;
		CHECK(fi_getname(&pep->fid, addr, &alen));
		struct side c2;
		open_side(&c2, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, info, &c2.ep, NULL));
		bind_side(&c2);
		CHECK(fi_connect(c2.ep, addr, NULL, 0));
		uint32_t event;
		struct fi_eq_cm_entry e;
		if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNREQ)
			fail("reject: want FI_CONNREQ");
		CHECK(fi_reject(pep, e.info->handle, "go away", 7));
		fi_freeinfo(e.info);
		if (eq_wait(&event, &e, sizeof e) != -FI_EAVAIL)
			fail("reject: want an error event");
		struct fi_eq_err_entry ee = {0};
		if (fi_eq_readerr(eq, &ee, 0) != sizeof ee)
			fail("fi_eq_readerr");
		if (ee.fid != &c2.ep->fid || ee.err != FI_ECONNREFUSED || ee.err_data_size != 7 ||
		    memcmp(ee.err_data, "go away", 7))
			fail("reject: err %d, %zu bytes of data", ee.err, ee.err_data_size);
		close_side(&c2);
		printf("ok reject with private data\n");
	}

	/* Authorization keys (fi_endpoint(3)): "Only peer endpoints that are
	 * programmed to use the same authorization key may communicate." A
	 * listener with key job-A never sees a request with job-B, whose
	 * connect fails with FI_ECONNREFUSED; one with job-A connects. */
	{
		/* fi_getinfo answers a key hint with entries that carry it
		 * (auth_key_size: "The length of the authorization key in
		 * bytes"). */
		struct fi_info *h = fi_dupinfo(info), *ki, *kb = fi_dupinfo(info);
		if (!h || !kb || !(h->ep_attr->auth_key = malloc(5)) || !(kb->ep_attr->auth_key = malloc(5)))
			fail("out of memory");
		memcpy(h->ep_attr->auth_key, "job-A", 5);
		memcpy(kb->ep_attr->auth_key, "job-B", 5);
		h->ep_attr->auth_key_size = kb->ep_attr->auth_key_size = 5;
		CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &ki));
		if (ki->ep_attr->auth_key_size != 5 || !ki->ep_attr->auth_key || memcmp(ki->ep_attr->auth_key, "job-A", 5))
			fail("fi_getinfo with a key hint: auth_key_size %zu", ki->ep_attr->auth_key_size);
		h->ep_attr->auth_key_size = FFS_TEST_AUTH_KEY_MAX + 1;
		free(h->ep_attr->auth_key);
		if (!(h->ep_attr->auth_key = calloc(1, h->ep_attr->auth_key_size)))
			fail("out of memory");
		struct fi_info *none = NULL;
		if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &none) != -FI_ENODATA)
			fail("fi_getinfo with a 65-byte key: want -FI_ENODATA");
		fi_freeinfo(h);
		struct fid_pep *kpep;
		CHECK(fi_passive_ep(fabric, ki, &kpep, NULL));
		CHECK(fi_pep_bind(kpep, &eq->fid, 0));
		CHECK(fi_listen(kpep));
		char addr[128];
		size_t alen = sizeof addr;
		CHECK(fi_getname(&kpep->fid, addr, &alen));
		struct side other, same, acc;
		open_side(&other, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, kb, &other.ep, NULL));
		bind_side(&other);
		CHECK(fi_connect(other.ep, addr, NULL, 0));
		uint32_t event;
		struct fi_eq_cm_entry e;
		if (eq_wait(&event, &e, sizeof e) != -FI_EAVAIL)
			fail("another key: want an error event, got event %u", event);
		struct fi_eq_err_entry ee = {0};
		if (fi_eq_readerr(eq, &ee, 0) != sizeof ee || ee.fid != &other.ep->fid || ee.err != FI_ECONNREFUSED)
			fail("another key: err %d, want FI_ECONNREFUSED on the connecting endpoint", ee.err);
		close_side(&other);
		open_side(&same, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, ki, &same.ep, NULL));
		bind_side(&same);
		CHECK(fi_connect(same.ep, addr, NULL, 0));
		if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNREQ || e.fid != &kpep->fid)
			fail("the same key: want FI_CONNREQ on the keyed listener, got event %u", event);
		open_side(&acc, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, e.info, &acc.ep, NULL));
		fi_freeinfo(e.info);
		bind_side(&acc);
		CHECK(fi_accept(acc.ep, NULL, 0));
		for (int i = 0; i < 2; i++)
			if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNECTED)
				fail("the same key: want FI_CONNECTED, got event %u", event);
		CHECK(fi_shutdown(same.ep, 0));
		for (int i = 0; i < 2; i++)
			if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_SHUTDOWN)
				fail("the same key: want FI_SHUTDOWN, got event %u", event);
		close_side(&same);
		close_side(&acc);
		CHECK(fi_close(&kpep->fid));
		fi_freeinfo(ki);
		fi_freeinfo(kb);
		printf("ok authorization keys\n");
	}

	/* fi_info.handle: "If hints->handle is set to struct fid_pep, the
	 * hints->handle will be copied to info->handle on output from
	 * fi_getinfo" (fi_getinfo(3)); "An active endpoint may acquire the
	 * properties of a passive endpoint by setting the fi_info handle field
	 * to the passive endpoint fabric descriptor. This is useful for
	 * applications that need to reserve the fabric address of an endpoint
	 * prior to knowing if the endpoint will be used on the active or
	 * passive side of a connection" (fi_endpoint(3)): the endpoint made
	 * from such an fi_info has the passive endpoint's address, which the
	 * peer that accepts it sees, and the passive endpoint is closed after
	 * ("The user is expected to close the passive endpoint after opening
	 * the active endpoint"). */
	{
		struct sockaddr_in reserved;
		size_t rlen = sizeof reserved;
		CHECK(fi_getname(&pep->fid, &reserved, &rlen));
		if (rlen != sizeof reserved || reserved.sin_family != AF_INET)
			fail("the passive endpoint's name is not a sockaddr_in (%zu bytes)", rlen);
		reserved.sin_port = htons(free_port(&reserved));
		struct fid_pep *hpep;
		CHECK(fi_passive_ep(fabric, info, &hpep, NULL));
		CHECK(fi_setname(&hpep->fid, &reserved, sizeof reserved));
		struct fi_info *h = fi_dupinfo(info), *hi;
		if (!h)
			fail("out of memory");
		h->handle = &hpep->fid;
		CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &hi));
		if (hi->handle != &hpep->fid)
			fail("fi_getinfo with a passive endpoint as hints->handle: info->handle %p, want %p",
			     (void *)hi->handle, (void *)&hpep->fid);
		struct side c, s;
		open_side(&c, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, hi, &c.ep, NULL));
		CHECK(fi_close(&hpep->fid));
		bind_side(&c);
		char addr[128];
		size_t alen = sizeof addr;
		CHECK(fi_getname(&pep->fid, addr, &alen));
		CHECK(fi_connect(c.ep, addr, NULL, 0));
		uint32_t event;
		struct fi_eq_cm_entry e;
		if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNREQ)
			fail("handle: want FI_CONNREQ");
		open_side(&s, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, e.info, &s.ep, NULL));
		fi_freeinfo(e.info);
		bind_side(&s);
		CHECK(fi_accept(s.ep, NULL, 0));
		for (int i = 0; i < 2; i++)
			if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNECTED)
				fail("handle: want FI_CONNECTED, got event %u", event);
		struct sockaddr_in name, peer;
		size_t nl = sizeof name, pl = sizeof peer;
		CHECK(fi_getname(&c.ep->fid, &name, &nl));
		CHECK(fi_getpeer(s.ep, &peer, &pl));
		if (nl != sizeof name || name.sin_port != reserved.sin_port)
			fail("the endpoint made from the handle has port %u, want the passive endpoint's %u",
			     ntohs(name.sin_port), ntohs(reserved.sin_port));
		if (pl != sizeof peer || peer.sin_port != reserved.sin_port)
			fail("the accepting side sees port %u, want the passive endpoint's %u", ntohs(peer.sin_port),
			     ntohs(reserved.sin_port));
		close_side(&c);
		close_side(&s);
		fi_freeinfo(hi);
		fi_freeinfo(h);
		printf("ok fi_endpoint from a passive endpoint's handle\n");
	}

	/* fi_domain_bind (fi_domain(3)): "Binding an event queue to a domain
	 * with the FI_REG_MR flag indicates that the provider should perform
	 * all memory registration operations asynchronously, with the
	 * completion reported through the event queue", and "An event queue
	 * bound to a domain will be the default EQ associated with
	 * asynchronous control events that occur on the domain or active
	 * endpoints allocated on a domain. This includes CM events." */
	{
		struct fid_domain *d2, *d3;
		CHECK(fi_domain(fabric, info, &d2, NULL));
		CHECK(fi_domain(fabric, info, &d3, NULL));
		if (fi_domain_bind(d3, &eq->fid, FI_SEND) != -FI_EBADFLAGS)
			fail("fi_domain_bind with FI_SEND: want -FI_EBADFLAGS");
		CHECK(fi_domain_bind(d2, &eq->fid, FI_REG_MR));
		if (fi_domain_bind(d2, &eq->fid, 0) != -FI_EINVAL)
			fail("a second fi_domain_bind: want -FI_EINVAL");
		static uint8_t buf[8192];
		struct fid_mr *mr;
		int mctx;
		CHECK(fi_mr_reg(d2, buf, sizeof buf, FI_SEND | FI_RECV, 0, 0, 0, &mr, &mctx));
		uint32_t event;
		struct fi_eq_entry ent;
		ssize_t n = fi_eq_sread(eq, &event, &ent, sizeof ent, 5000, 0);
		if (n != sizeof ent || event != FI_MR_COMPLETE || ent.fid != &mr->fid || ent.context != &mctx)
			fail("FI_REG_MR: got %zd event %u, want FI_MR_COMPLETE for the region", n, event);
		CHECK(fi_close(&mr->fid));
		CHECK(fi_mr_reg(d3, buf, sizeof buf, FI_SEND | FI_RECV, 0, 0, 0, &mr, &mctx));
		if ((n = fi_eq_read(eq, &event, &ent, sizeof ent, 0)) != -FI_EAGAIN)
			fail("a registration of a domain without FI_REG_MR made event %u (%zd)", event, n);
		CHECK(fi_close(&mr->fid));
		printf("ok fi_domain_bind FI_REG_MR\n");

		/* An endpoint of d2 bound to no EQ reports its connection there. */
		char addr[128];
		size_t alen = sizeof addr;
		CHECK(fi_getname(&pep->fid, addr, &alen));
		struct side c, s;
		struct fi_cq_attr cqa = {.size = 64, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC};
		CHECK(fi_cq_open(d2, &cqa, &c.txcq, NULL));
		CHECK(fi_cq_open(d2, &cqa, &c.rxcq, NULL));
		CHECK(fi_endpoint(d2, info, &c.ep, NULL));
		CHECK(fi_ep_bind(c.ep, &c.txcq->fid, FI_TRANSMIT));
		CHECK(fi_ep_bind(c.ep, &c.rxcq->fid, FI_RECV));
		CHECK(fi_enable(c.ep));
		CHECK(fi_connect(c.ep, addr, NULL, 0));
		struct fi_eq_cm_entry e;
		if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNREQ)
			fail("default EQ: want FI_CONNREQ");
		open_side(&s, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_CONTEXT);
		CHECK(fi_endpoint(domain, e.info, &s.ep, NULL));
		fi_freeinfo(e.info);
		bind_side(&s);
		CHECK(fi_accept(s.ep, NULL, 0));
		bool got_c = false, got_s = false;
		while (!got_c || !got_s) {
			if (eq_wait(&event, &e, sizeof e) < 0 || event != FI_CONNECTED)
				fail("default EQ: want FI_CONNECTED, got event %u", event);
			got_c |= e.fid == &c.ep->fid;
			got_s |= e.fid == &s.ep->fid;
		}
		if (fi_close(&eq->fid) != -FI_EBUSY)
			fail("fi_close of an EQ bound to a domain: want -FI_EBUSY");
		close_side(&c);
		close_side(&s);
		CHECK(fi_close(&d2->fid));
		CHECK(fi_close(&d3->fid));
		printf("ok fi_domain_bind default EQ\n");
	}

	CHECK(fi_close(&pep->fid));
	CHECK(fi_close(&eq->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS\n");
	return 0;
}
