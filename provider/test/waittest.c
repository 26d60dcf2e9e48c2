/*
 * waittest: checks the fabricfs provider's wait objects through the
 * libfabric API with FI_EP_RDM endpoints in one process: a CQ's
 * FI_WAIT_FD descriptor under epoll (quiet while the CQ is empty, readable
 * once a completion comes, and after fi_cq_signal), fi_trywait's rules
 * (0 on nothing, -FI_EAGAIN with something to read, -FI_EINVAL without a
 * descriptor), a counter's and an EQ's descriptors, a poll set over two CQs
 * and a counter, and a wait set (fi_wait).
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric waittest [DOMAIN]
 *
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_test.go
 * runs it.
 */
#include "fitest.h"

#include <poll.h>
#include <sys/epoll.h>

#define WANT(call, want)                                                                                               \
	do {                                                                                                           \
		long ret_ = (long)(call);                                                                              \
		if (ret_ != (long)(want))                                                                              \
			fail("%s:%d: %s: %ld, want %s (%ld)", __FILE__, __LINE__, #call, ret_, #want, (long)(want));   \
	} while (0)

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr;
};

/* open_node makes an endpoint with one CQ of wait object wait (in set for
 * FI_WAIT_SET) for both directions, and a counter of its receives if cntr
 * is given. */
static void open_node(struct node *n, enum fi_wait_obj wait, struct fid_wait *set, struct fid_cntr *cntr)
{
	struct fi_cq_attr attr = {.size = info->tx_attr->size + info->rx_attr->size, .format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = wait, .wait_set = set};
	CHECK(fi_cq_open(domain, &attr, &n->cq, n));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &av->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
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

static char rbuf[16], sbuf[16] = "hello";

/* post_message posts a receive on b and a send from a to it. */
static void post_message(struct node *a, struct node *b)
{
	CHECK(fi_recv(b->ep, rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, b));
	CHECK(fi_send(a->ep, sbuf, sizeof sbuf, NULL, b->addr, a));
}

/* take reads the one entry cq must hold now. */
static void take(struct fid_cq *cq, const char *what)
{
	struct fi_cq_entry e;
	ssize_t n = fi_cq_read(cq, &e, 1);
	if (n != 1)
		fail("%s: fi_cq_read: %zd", what, n);
}

/* drain_cq reads cq until it has given want entries (within 5 s). */
static void drain_cq(struct fid_cq *cq, int want, const char *what)
{
	struct fi_cq_entry e;
	for (int i = 0; i < 5000 && want > 0; i++) {
		ssize_t n = fi_cq_sread(cq, &e, 1, NULL, 1);
		if (n == 1)
			want--;
		else if (n != -FI_EAGAIN)
			fail("%s: fi_cq_sread: %zd", what, n);
	}
	if (want)
		fail("%s: %d entries missing after 5 s", what, want);
}

static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, ms);
	if (n < 0)
		fail("poll: %s", strerror(errno));
	return n;
}

/* A CQ's descriptor under epoll, and fi_trywait's rules. */
static void cq_fd(void)
{
	struct node a, b;
	open_node(&a, FI_WAIT_FD, NULL, NULL);
	open_node(&b, FI_WAIT_FD, NULL, NULL);
	int fd = -1;
	enum fi_wait_obj obj = FI_WAIT_NONE;
	CHECK(fi_control(&b.cq->fid, FI_GETWAIT, &fd));
	CHECK(fi_control(&b.cq->fid, FI_GETWAITOBJ, &obj));
	if (fd < 0 || obj != FI_WAIT_FD)
		fail("FI_GETWAIT gave fd %d, FI_GETWAITOBJ %d", fd, obj);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &b};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		fail("epoll: %s", strerror(errno));
	struct fid *fids[] = {&b.cq->fid};

	WANT(fi_trywait(fabric, fids, 1), 0);
	WANT(epoll_wait(ep, &ev, 1, 200), 0);
	printf("ok an empty CQ's descriptor stays quiet\n");

	post_message(&a, &b);
	WANT(epoll_wait(ep, &ev, 1, 5000), 1);
	if (ev.data.ptr != &b)
		fail("epoll gave another event");
	WANT(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
	take(b.cq, "recv after epoll");
	if (strcmp(rbuf, sbuf))
		fail("received '%s'", rbuf);
	WANT(fi_trywait(fabric, fids, 1), 0);
	WANT(epoll_wait(ep, &ev, 1, 100), 0);
	printf("ok epoll wakes on a completion; fi_trywait -FI_EAGAIN, then 0\n");

	CHECK(fi_cq_signal(b.cq));
	WANT(epoll_wait(ep, &ev, 1, 1000), 1);
	printf("ok fi_cq_signal makes the descriptor readable\n");

	/* Objects without a descriptor cannot be waited on natively. */
	struct node c;
	open_node(&c, FI_WAIT_UNSPEC, NULL, NULL);
	WANT(fi_control(&c.cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	struct fid *cf[] = {&c.cq->fid};
	WANT(fi_trywait(fabric, cf, 1), -FI_EINVAL);
	printf("ok FI_WAIT_UNSPEC: no descriptor, fi_trywait -FI_EINVAL\n");

	drain_cq(a.cq, 1, "send");
	close(ep);
	close_node(&c);
	close_node(&a);
	close_node(&b);
}

/* A counter's and an EQ's descriptors. */
static void cntr_eq_fd(void)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD};
	struct fid_cntr *cntr;
	CHECK(fi_cntr_open(domain, &ca, &cntr, NULL));
	int fd;
	CHECK(fi_control(&cntr->fid, FI_GETWAIT, &fd));
	struct fid *fids[] = {&cntr->fid};
	WANT(fi_trywait(fabric, fids, 1), 0);
	WANT(readable(fd, 100), 0);
	CHECK(fi_cntr_add(cntr, 3));
	WANT(readable(fd, 2000), 1);
	WANT(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
	WANT(fi_cntr_read(cntr), 3);
	WANT(fi_trywait(fabric, fids, 1), 0);
	WANT(readable(fd, 100), 0);
	CHECK(fi_cntr_adderr(cntr, 1));
	WANT(readable(fd, 2000), 1);
	CHECK(fi_close(&cntr->fid));
	printf("ok a counter's descriptor wakes on a change of its value or errors\n");

	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_FD};
	struct fid_eq *eq;
	CHECK(fi_eq_open(fabric, &ea, &eq, NULL));
	CHECK(fi_control(&eq->fid, FI_GETWAIT, &fd));
	struct fid *ef[] = {&eq->fid};
	WANT(fi_trywait(fabric, ef, 1), 0);
	WANT(readable(fd, 100), 0);
	struct fi_eq_entry entry = {.context = eq, .data = 7};
	WANT(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0), sizeof entry);
	WANT(readable(fd, 1000), 1);
	WANT(fi_trywait(fabric, ef, 1), -FI_EAGAIN);
	uint32_t event;
	WANT(fi_eq_read(eq, &event, &entry, sizeof entry, 0), sizeof entry);
	WANT(fi_trywait(fabric, ef, 1), 0);
	WANT(readable(fd, 100), 0);
	CHECK(fi_close(&eq->fid));
	printf("ok an EQ's descriptor wakes on an event\n");
}

/* A poll set over two CQs and a counter. */
static void poll_set(void)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *cntr;
	int cntr_ctx;
	CHECK(fi_cntr_open(domain, &ca, &cntr, &cntr_ctx));
	struct node a, b;
	open_node(&a, FI_WAIT_NONE, NULL, NULL);
	open_node(&b, FI_WAIT_NONE, NULL, cntr);
	struct fi_poll_attr pa = {0};
	struct fid_poll *ps;
	CHECK(fi_poll_open(domain, &pa, &ps));
	CHECK(fi_poll_add(ps, &a.cq->fid, 0));
	CHECK(fi_poll_add(ps, &b.cq->fid, 0));
	CHECK(fi_poll_add(ps, &cntr->fid, 0));
	void *ctx[8];
	WANT(fi_poll(ps, ctx, 8), 0);

	post_message(&a, &b);
	bool sa = false, sb = false, sc = false;
	for (int i = 0; i < 5000 && !(sa && sb && sc); i++) {
		int n = fi_poll(ps, ctx, 8);
		if (n < 0)
			fail("fi_poll: %d", n);
		for (int j = 0; j < n; j++) {
			if (ctx[j] == &a)
				sa = true;
			else if (ctx[j] == &b)
				sb = true;
			else if (ctx[j] == &cntr_ctx)
				sc = true;
			else
				fail("fi_poll gave context %p", ctx[j]);
		}
		if (n == 0) {
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
		}
	}
	if (!(sa && sb && sc))
		fail("fi_poll: send CQ %d, receive CQ %d, counter %d", sa, sb, sc);
	take(a.cq, "send");
	take(b.cq, "recv");
	/* Empty CQs, and a counter that did not change since the last fi_poll. */
	WANT(fi_poll(ps, ctx, 8), 0);
	printf("ok fi_poll reports two CQs and a counter, then nothing\n");

	/* A CQ in a poll set does not close. */
	CHECK(fi_close(&a.ep->fid));
	WANT(fi_close(&a.cq->fid), -FI_EBUSY);
	CHECK(fi_poll_del(ps, &a.cq->fid, 0));
	WANT(fi_poll_del(ps, &a.cq->fid, 0), -FI_ENOENT);
	CHECK(fi_close(&a.cq->fid));
	CHECK(fi_poll_del(ps, &b.cq->fid, 0));
	CHECK(fi_poll_del(ps, &cntr->fid, 0));
	CHECK(fi_close(&ps->fid));
	close_node(&b);
	CHECK(fi_close(&cntr->fid));
	printf("ok fi_poll_del\n");
}

/* A wait set holding a CQ. */
static void wait_set(void)
{
	struct fi_wait_attr wa = {.wait_obj = FI_WAIT_FD};
	struct fid_wait *set;
	CHECK(fi_wait_open(fabric, &wa, &set));
	struct node a, b;
	open_node(&a, FI_WAIT_NONE, NULL, NULL);
	open_node(&b, FI_WAIT_SET, set, NULL);
	WANT(fi_wait(set, 100), -FI_ETIMEDOUT);
	WANT(fi_close(&set->fid), -FI_EBUSY);
	post_message(&a, &b);
	WANT(fi_wait(set, 5000), 0);
	take(b.cq, "recv in a wait set");
	int fd;
	CHECK(fi_control(&set->fid, FI_GETWAIT, &fd));
	struct fid *fids[] = {&set->fid};
	WANT(fi_trywait(fabric, fids, 1), 0);
	WANT(readable(fd, 100), 0);
	drain_cq(a.cq, 1, "send");
	close_node(&a);
	close_node(&b);
	CHECK(fi_close(&set->fid));
	printf("ok fi_wait on a wait set\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(argc > 1 ? argv[1] : "tcp/lo");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));

	cq_fd();
	cntr_eq_fd();
	poll_set();
	wait_set();

	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS\n");
	return 0;
}
