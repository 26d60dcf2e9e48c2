/*
 * interop: a libfabric 1.17 tcp FI_EP_MSG peer for fabricfs's interop test.
 *
 *   interop client HOST PORT   connect with private data, exchange one message each way
 *   interop server             listen on 127.0.0.1, print "port N", accept, exchange, wait for FI_SHUTDOWN
 *   interop rejected HOST PORT connect with "may I?" and expect FI_ECONNREFUSED with the data "no thanks"
 *   interop rejecter           listen as server does, reject the first request (which must carry
 *                              "hello from Go") with the data "go away"
 *   interop rma                listen as server does; expose 4096 bytes under key 0xC0DE for the
 *                              peer's writes and reads; once the peer says "go done", check its
 *                              write, then fi_writedata, fi_writemsg with FI_DELIVERY_COMPLETE
 *                              and fi_read against the peer's key 0x60, and fi_senddata "bye"
 *
 * Both sides send with FI_DELIVERY_COMPLETE, so each also checks that the
 * other ACKs. Exit status 0 means every check passed.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                          \
	do {                                                                 \
		int r_ = (int)(call);                                        \
		if (r_ < 0) {                                                \
			fprintf(stderr, "interop: %s: %s\n", #call,          \
				fi_strerror(-r_));                           \
			exit(2);                                             \
		}                                                            \
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "interop: %s\n", what);
	exit(3);
}

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;
static struct fid_cq *cq;
static struct fid_ep *ep;
static struct fid_pep *pep;

/* wait_cm waits for event want and returns its private data. */
static size_t wait_cm(uint32_t want, struct fi_info **info, char *data)
{
	struct {
		struct fi_eq_cm_entry e;
		char data[256];
	} buf;
	uint32_t event;
	ssize_t n = fi_eq_sread(eq, &event, &buf, sizeof buf, 10000, 0);
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {0};
		fi_eq_readerr(eq, &err, 0);
		fprintf(stderr, "interop: eq error: %s\n", fi_strerror(err.err));
		exit(3);
	}
	if (n < 0) {
		fprintf(stderr, "interop: fi_eq_sread: %s\n", fi_strerror((int)-n));
		exit(3);
	}
	if (event != want) {
		fprintf(stderr, "interop: event %u, want %u\n", event, want);
		exit(3);
	}
	size_t len = (size_t)n - sizeof buf.e;
	if (data)
		memcpy(data, buf.data, len);
	if (info)
		*info = buf.e.info;
	return len;
}

/* next_cq reads the next completion into c, waiting until deadline; an
 * error completion or a timeout (when, in die's words) ends the program. */
static void next_cq(struct fi_cq_data_entry *c, time_t deadline, const char *when)
{
	for (;;) {
		ssize_t n = fi_cq_read(cq, c, 1);
		if (n == -FI_EAGAIN) {
			if (time(NULL) > deadline)
				die(when);
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "interop: cq error: %s\n", fi_strerror(err.err));
			exit(3);
		}
		CHECK(n);
		return;
	}
}

/* wait_cq reads completions until both the send and the receive are done. */
static void wait_cq(struct fi_cq_data_entry *recv)
{
	int sent = 0, received = 0;
	time_t deadline = time(NULL) + 10;
	while (!sent || !received) {
		struct fi_cq_data_entry c;
		next_cq(&c, deadline, sent ? "no receive completion" : "no send completion (no ACK?)");
		if (c.flags & FI_SEND)
			sent = 1;
		if (c.flags & FI_RECV) {
			received = 1;
			*recv = c;
		}
	}
}

static struct fi_info *hints(void)
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG | FI_RMA;
	h->fabric_attr->prov_name = strdup("tcp");
	return h;
}

static void open_ep(struct fi_info *info)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .size = 16, .wait_obj = FI_WAIT_NONE};
	CHECK(fi_domain(fabric, info, &domain, NULL));
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &eq->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_SEND | FI_RECV));
	CHECK(fi_enable(ep));
}

static void send_dc(const char *text, uint64_t data)
{
	static char sbuf[64];
	struct iovec iov = {.iov_base = sbuf, .iov_len = strlen(text)};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .data = data};
	strcpy(sbuf, text);
	CHECK(fi_sendmsg(ep, &msg, FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_COMPLETION));
}

static void check_recv(struct fi_cq_data_entry *c, const char *buf, const char *want, uint64_t data)
{
	if (c->len != strlen(want) || memcmp(buf, want, c->len) != 0) {
		fprintf(stderr, "interop: received %.*s, want %s\n", (int)c->len, buf, want);
		exit(3);
	}
	if (!(c->flags & FI_REMOTE_CQ_DATA) || c->data != data) {
		fprintf(stderr, "interop: cq data %#llx flags %#llx, want %#llx\n",
			(unsigned long long)c->data, (unsigned long long)c->flags, (unsigned long long)data);
		exit(3);
	}
}

/* listen_print listens on 127.0.0.1 with a free port and prints "port N". */
static void listen_print(void)
{
	struct fi_info *info;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct sockaddr_in addr;
	size_t addrlen = sizeof addr;

	CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints(), &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	CHECK(fi_passive_ep(fabric, info, &pep, NULL));
	CHECK(fi_pep_bind(pep, &eq->fid, 0));
	CHECK(fi_listen(pep));
	CHECK(fi_getname(&pep->fid, &addr, &addrlen));
	printf("port %d\n", ntohs(addr.sin_port));
	fflush(stdout);
}

static int client(const char *host, const char *port)
{
	struct fi_info *info;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	static char rbuf[64], data[256];
	struct fi_cq_data_entry c;

	CHECK(fi_getinfo(FI_VERSION(1, 17), host, port, 0, hints(), &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	open_ep(info);
	CHECK(fi_recv(ep, rbuf, sizeof rbuf, NULL, 0, NULL));
	CHECK(fi_connect(ep, info->dest_addr, "hello from C", 12));
	size_t n = wait_cm(FI_CONNECTED, NULL, data);
	if (n != 13 || memcmp(data, "hello from Go", 13) != 0)
		die("wrong accept data");
	send_dc("ping from C", 0x1234);
	wait_cq(&c);
	check_recv(&c, rbuf, "pong from Go", 0x5678);
	CHECK(fi_shutdown(ep, 0));
	puts("ok");
	return 0;
}

static int server(void)
{
	struct fi_info *req;
	static char rbuf[64], data[256];
	struct fi_cq_data_entry c;

	listen_print();

	size_t n = wait_cm(FI_CONNREQ, &req, data);
	if (n != 13 || memcmp(data, "hello from Go", 13) != 0)
		die("wrong connreq data");
	open_ep(req);
	CHECK(fi_recv(ep, rbuf, sizeof rbuf, NULL, 0, NULL));
	CHECK(fi_accept(ep, "hello from C", 12));
	wait_cm(FI_CONNECTED, NULL, NULL);
	send_dc("pong from C", 0x9abc);
	wait_cq(&c);
	check_recv(&c, rbuf, "ping from Go", 0x5678);
	/* The Go side shuts down; progress the CQ so the EOF is seen. */
	for (time_t deadline = time(NULL) + 10;;) {
		uint32_t event;
		struct fi_eq_cm_entry e;
		struct fi_cq_data_entry x;
		fi_cq_read(cq, &x, 1);
		ssize_t r = fi_eq_read(eq, &event, &e, sizeof e, 0);
		if (r >= 0 && event == FI_SHUTDOWN)
			break;
		if (r >= 0 || (r != -FI_EAGAIN)) {
			fprintf(stderr, "interop: waiting for FI_SHUTDOWN: %zd event %u\n", r, event);
			exit(3);
		}
		if (time(NULL) > deadline)
			die("no FI_SHUTDOWN");
		usleep(1000);
	}
	puts("ok");
	return 0;
}

/* wait_tx reads completions until n transmit operations are done. */
static void wait_tx(int n)
{
	time_t deadline = time(NULL) + 10;
	for (; n > 0; n--) {
		struct fi_cq_data_entry c;
		next_cq(&c, deadline, "rma: transmit operations did not complete");
	}
}

static int rma(void)
{
	struct fi_info *req;
	static char rbuf[64], target[4096], wbuf[64], dcbuf[8], rdbuf[8];
	struct fid_mr *mr;
	struct fi_cq_data_entry c;

	for (int i = 0; i < (int)sizeof target; i++)
		target[i] = 'a' + i % 26;
	listen_print();
	wait_cm(FI_CONNREQ, &req, NULL);
	open_ep(req);
	CHECK(fi_mr_reg(domain, target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0xC0DE, 0, &mr, NULL));
	CHECK(fi_recv(ep, rbuf, sizeof rbuf, NULL, 0, NULL));
	CHECK(fi_accept(ep, NULL, 0));
	wait_cm(FI_CONNECTED, NULL, NULL);

	/* The peer writes and reads our memory, then says so. */
	for (time_t deadline = time(NULL) + 10;;) {
		ssize_t r = fi_cq_read(cq, &c, 1);
		if (r == 1 && (c.flags & FI_RECV))
			break;
		if (r != -FI_EAGAIN && r != 1) {
			fprintf(stderr, "interop: rma: waiting for \"go done\": %zd\n", r);
			exit(3);
		}
		if (time(NULL) > deadline)
			die("rma: no \"go done\" message");
	}
	if (c.len != 7 || memcmp(rbuf, "go done", 7) != 0)
		die("rma: wrong message from the peer");
	if (memcmp(target + 100, "written by Go", 13) != 0)
		die("rma: the peer's write is not in our memory");
	if (target[99] != 'a' + 99 % 26 || target[113] != 'a' + 113 % 26)
		die("rma: the peer's write spilled over");

	/* Now we write and read the peer's memory. */
	strcpy(wbuf, "from C");
	CHECK(fi_writedata(ep, wbuf, 6, NULL, 0x77, 0, 8, 0x60, NULL));
	strcpy(dcbuf, "dc");
	struct iovec iov = {.iov_base = dcbuf, .iov_len = 2};
	struct fi_rma_iov riov = {.addr = 32, .len = 2, .key = 0x60};
	struct fi_msg_rma wmsg = {.msg_iov = &iov, .iov_count = 1, .rma_iov = &riov, .rma_iov_count = 1};
	CHECK(fi_writemsg(ep, &wmsg, FI_DELIVERY_COMPLETE | FI_COMPLETION));
	CHECK(fi_read(ep, rdbuf, 8, NULL, 0, 0, 0x60, NULL));
	static char bye[] = "bye";
	CHECK(fi_senddata(ep, bye, 3, NULL, 0x42, 0, NULL));
	wait_tx(4);
	if (memcmp(rdbuf, "GOREGION", 8) != 0)
		die("rma: read the wrong bytes from the peer");
	/* The Go side shuts down once it has checked everything. */
	for (time_t deadline = time(NULL) + 10;;) {
		uint32_t event;
		struct fi_eq_cm_entry e;
		struct fi_cq_data_entry x;
		fi_cq_read(cq, &x, 1);
		ssize_t r = fi_eq_read(eq, &event, &e, sizeof e, 0);
		if (r >= 0 && event == FI_SHUTDOWN)
			break;
		if (time(NULL) > deadline)
			die("rma: no FI_SHUTDOWN");
		usleep(1000);
	}
	fi_close(&mr->fid);
	puts("ok");
	return 0;
}

/* rejected connects and expects a reject with private data want (""
 * for none: a listener that refuses the request itself). */
static int rejected(const char *host, const char *port, const char *want)
{
	struct fi_info *info;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_cm_entry e;
	uint32_t event;
	char data[64];

	CHECK(fi_getinfo(FI_VERSION(1, 17), host, port, 0, hints(), &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	open_ep(info);
	CHECK(fi_connect(ep, info->dest_addr, "may I?", 6));
	ssize_t n = fi_eq_sread(eq, &event, &e, sizeof e, 10000, 0);
	if (n != -FI_EAVAIL) {
		fprintf(stderr, "interop: rejected: fi_eq_sread = %zd (event %u), want -FI_EAVAIL\n", n, event);
		exit(3);
	}
	struct fi_eq_err_entry err = {.err_data = data, .err_data_size = sizeof data};
	CHECK(fi_eq_readerr(eq, &err, 0));
	if (err.err != FI_ECONNREFUSED)
		die("rejected: the error is not FI_ECONNREFUSED");
	if (err.err_data_size != strlen(want) || memcmp(data, want, strlen(want)) != 0) {
		fprintf(stderr, "interop: rejected: reject data %.*s (%zu bytes)\n", (int)err.err_data_size, data, err.err_data_size);
		exit(3);
	}
	puts("ok");
	return 0;
}

static int rejecter(void)
{
	struct fi_info *req;
	char data[256];

	listen_print();
	size_t n = wait_cm(FI_CONNREQ, &req, data);
	if (n != 13 || memcmp(data, "hello from Go", 13) != 0)
		die("rejecter: wrong connreq data");
	CHECK(fi_reject(pep, req->handle, "go away", 7));
	puts("ok");
	return 0;
}

int main(int argc, char **argv)
{
	alarm(30);
	if (argc == 4 && strcmp(argv[1], "client") == 0)
		return client(argv[2], argv[3]);
	if (argc == 2 && strcmp(argv[1], "server") == 0)
		return server();
	if (argc == 2 && strcmp(argv[1], "rma") == 0)
		return rma();
	if (argc == 4 && strcmp(argv[1], "rejected") == 0)
		return rejected(argv[2], argv[3], "no thanks");
	if (argc == 4 && strcmp(argv[1], "refused") == 0)
		return rejected(argv[2], argv[3], "");
	if (argc == 2 && strcmp(argv[1], "rejecter") == 0)
		return rejecter();
	fprintf(stderr, "usage: interop client HOST PORT | interop server | interop rma | interop rejected HOST PORT | interop refused HOST PORT | interop rejecter\n");
	return 1;
}
