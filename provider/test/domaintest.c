/*
 * domaintest: checks the fabricfs provider's domain-level behaviour
 * through the libfabric API:
 *
 *  - FI_AV_USER_ID (fi_getinfo(3), fi_av(3)): fi_getinfo offers it on
 *    FI_EP_RDM when asked, an insert with the flag takes each address's
 *    user id in fi_addr and returns the fi_addr as without it, and an
 *    endpoint (or a scalable endpoint's receive context) with the
 *    capability sees the user id as a message's source while one
 *    without sees the fi_addr;
 *  - fi_close of a domain (fi_domain(3)) with each kind of object open;
 *  - fi_domain_attr.domain (fi_domain(3)) on fi_getinfo's input and
 *    output.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric domaintest DOMAIN
 *
 * Prints one "ok NAME" line per check and "PASS" at the end, and exits 0;
 * on a failure it prints "FAIL: ..." and exits 1. tests/provider_domain_test.go
 * runs it.
 */
#include "fitest.h"

static const char *dom_name;

/* info_for asks fi_getinfo for entries of type with caps in the domain
 * named (NULL: every domain) or the opened one. */
static int info_for(enum fi_ep_type type, uint64_t caps, struct fid_domain *opened, const char *name,
		    struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		fail("fi_allocinfo");
	hints->ep_attr->type = type;
	hints->caps = caps;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->domain = opened;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = name ? strdup(name) : NULL;
	*out = NULL;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, out);
	hints->domain_attr->domain = NULL;
	fi_freeinfo(hints);
	return ret;
}

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr; /* in the AV */
};

static void open_node(struct fid_domain *domain, struct fi_info *info, struct fid_av *av, struct node *n)
{
	struct fi_cq_attr attr = {.size = 64, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &attr, &n->cq, NULL));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &av->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(n->ep));
}

static void close_node(struct node *n)
{
	CHECK(fi_close(&n->ep->fid));
	CHECK(fi_close(&n->cq->fid));
}

/* name_of gives the endpoint's address (fi_getname) into buf. */
static size_t name_of(struct node *n, char *buf, size_t size)
{
	CHECK(fi_getname(&n->ep->fid, buf, &size));
	return size;
}

/* cq_one reads one completion within 5 s and its source. */
static void cq_one(struct fid_cq *cq, struct fi_cq_tagged_entry *e, fi_addr_t *src, const char *what)
{
	for (double deadline = now() + 5;;) {
		ssize_t n = fi_cq_readfrom(cq, e, 1, src);
		if (n == 1)
			return;
		if (n != -FI_EAGAIN)
			fail("%s: fi_cq_readfrom: %zd", what, n);
		if (now() > deadline)
			fail("%s: no completion after 5 s", what);
	}
}

/* message sends from s to the fi_addr dest of r and returns the source
 * r's completion reports. */
static fi_addr_t message(struct node *s, struct node *r, fi_addr_t dest)
{
	char tx[16] = "hello", rx[16] = "";
	int sctx, rctx;
	CHECK(fi_recv(r->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &rctx));
	CHECK(fi_send(s->ep, tx, sizeof tx, NULL, dest, &sctx));
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	cq_one(s->cq, &e, NULL, "send");
	cq_one(r->cq, &e, &src, "recv");
	if (e.op_context != &rctx || strcmp(rx, "hello"))
		fail("recv: context %p '%s'", e.op_context, rx);
	return src;
}

/* user_id: FI_AV_USER_ID, "Requests that the provider support the
 * association of a user specified identifier with each address vector
 * (AV) address. User identifiers are returned with completion data in
 * place of the AV address." (fi_getinfo(3)); "When the FI_AV_USER_ID flag
 * is passed to any of the insert calls, the caller must specify an
 * fi_addr_t identifier value to associate with each address. ... Note
 * that the output from the AV insertion call is unchanged. The provider
 * will return an fi_addr_t value that maps to each address, and that
 * value must be used for all data transfer operations." (fi_av(3)). */
static void user_id(void)
{
	struct fi_info *with, *plain, *e;
	CHECK(info_for(FI_EP_RDM, FI_MSG | FI_AV_USER_ID, NULL, dom_name, &with));
	for (e = with; e; e = e->next)
		if (!(e->caps & FI_AV_USER_ID) || e->ep_attr->type != FI_EP_RDM)
			fail("fi_getinfo with FI_AV_USER_ID gave caps %#llx type %d", (unsigned long long)e->caps,
			     e->ep_attr->type);
	CHECK(info_for(FI_EP_RDM, FI_MSG, NULL, dom_name, &plain));
	if (plain->caps & FI_AV_USER_ID)
		fail("fi_getinfo without FI_AV_USER_ID gave it: caps %#llx", (unsigned long long)plain->caps);
	struct fi_info *msg;
	int ret = info_for(FI_EP_MSG, FI_MSG | FI_AV_USER_ID, NULL, dom_name, &msg);
	if (ret != -FI_ENODATA)
		fail("fi_getinfo FI_EP_MSG with FI_AV_USER_ID: %d, want -FI_ENODATA", ret);
	printf("ok fi_getinfo FI_AV_USER_ID\n");

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	CHECK(fi_fabric(with->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, with, &domain, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	/* a has the capability, b not; s sends to both. */
	struct node a, b, s;
	open_node(domain, with, av, &a);
	open_node(domain, plain, av, &b);
	open_node(domain, plain, av, &s);
	char name[128];
	size_t len = name_of(&a, name, sizeof name);
	if (fi_av_insert(av, name, 1, &a.addr, 0, NULL) != 1)
		fail("fi_av_insert a");
	len = name_of(&b, name, sizeof name);
	if (fi_av_insert(av, name, 1, &b.addr, 0, NULL) != 1)
		fail("fi_av_insert b");
	len = name_of(&s, name, sizeof name);
	if (fi_av_insert(av, name, 1, NULL, FI_AV_USER_ID, NULL) != -FI_EINVAL)
		fail("fi_av_insert with FI_AV_USER_ID and no ids did not fail with -FI_EINVAL");
	const fi_addr_t id = 0xabc0000000000123ULL;
	s.addr = id;
	if (fi_av_insert(av, name, 1, &s.addr, FI_AV_USER_ID, NULL) != 1)
		fail("fi_av_insert with FI_AV_USER_ID");
	if (s.addr != 2)
		fail("fi_av_insert with FI_AV_USER_ID gave fi_addr %#llx, want 2 (the output is unchanged)",
		     (unsigned long long)s.addr);
	char back[128];
	size_t blen = sizeof back;
	CHECK(fi_av_lookup(av, s.addr, back, &blen));
	if (blen != len || memcmp(back, name, len))
		fail("fi_av_lookup of the entry inserted with a user id is not its address");

	fi_addr_t src = message(&s, &a, a.addr);
	if (src != id)
		fail("a (FI_AV_USER_ID) sees the sender as %#llx, want the user id %#llx", (unsigned long long)src,
		     (unsigned long long)id);
	src = message(&s, &b, b.addr);
	if (src != s.addr)
		fail("b sees the sender as %#llx, want its fi_addr %llu", (unsigned long long)src,
		     (unsigned long long)s.addr);
	/* Sends name the fi_addr, not the id. */
	message(&a, &s, s.addr);
	printf("ok FI_AV_USER_ID\n");

	/* A receive context of a scalable endpoint made from the entry
	 * reports the user id too. */
	struct fid_ep *sep, *rx;
	struct fid_cq *rxcq;
	CHECK(fi_scalable_ep(domain, with, &sep, NULL));
	CHECK(fi_scalable_ep_bind(sep, &av->fid, 0));
	CHECK(fi_rx_context(sep, 0, NULL, &rx, NULL));
	struct fi_cq_attr cqa = {.size = 16, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	CHECK(fi_cq_open(domain, &cqa, &rxcq, NULL));
	CHECK(fi_ep_bind(rx, &rxcq->fid, FI_RECV));
	CHECK(fi_enable(rx));
	CHECK(fi_enable(sep));
	len = name_of(&(struct node){.ep = sep}, name, sizeof name);
	fi_addr_t sep_addr;
	if (fi_av_insert(av, name, 1, &sep_addr, 0, NULL) != 1)
		fail("fi_av_insert of the scalable endpoint");
	struct node ctx = {.ep = rx, .cq = rxcq};
	src = message(&s, &ctx, sep_addr);
	if (src != id)
		fail("a receive context of an FI_AV_USER_ID scalable endpoint sees the sender as %#llx, want %#llx",
		     (unsigned long long)src, (unsigned long long)id);
	CHECK(fi_close(&rx->fid));
	CHECK(fi_close(&rxcq->fid));
	CHECK(fi_close(&sep->fid));
	printf("ok FI_AV_USER_ID on a scalable endpoint\n");

	close_node(&a);
	close_node(&b);
	close_node(&s);
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(with);
	fi_freeinfo(plain);
}

/* busy_close: "All objects associated with the opened domain must be
 * released prior to calling fi_close, otherwise the call will return
 * -FI_EBUSY." (fi_domain(3)): with each kind of object open alone the
 * domain's fi_close fails so; once it is closed, the domain closes. */
static void busy_close(void)
{
	struct fi_info *info;
	CHECK(info_for(FI_EP_RDM, FI_MSG, NULL, dom_name, &info));
	struct fid_fabric *fabric;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	static char buf[4096] __attribute__((aligned(4096)));
	for (int kind = 0; kind < 10; kind++) {
		struct fid_domain *domain;
		CHECK(fi_domain(fabric, info, &domain, NULL));
		struct fid *obj = NULL;
		const char *what = "";
		struct fi_cq_attr cqa = {.size = 16, .format = FI_CQ_FORMAT_CONTEXT};
		struct fi_av_attr ava = {.type = FI_AV_TABLE};
		struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
		struct fi_poll_attr pa = {0};
		struct fi_tx_attr txa = *info->tx_attr;
		struct fi_rx_attr rxa = *info->rx_attr;
		struct fid_ep *ep;
		struct fid_cq *cq;
		struct fid_av *av;
		struct fid_cntr *cntr;
		struct fid_mr *mr;
		struct fid_stx *stx;
		struct fid_poll *ps;
		switch (kind) {
		case 0:
			what = "fi_endpoint";
			CHECK(fi_endpoint(domain, info, &ep, NULL));
			obj = &ep->fid;
			break;
		case 1:
			what = "fi_cq_open";
			CHECK(fi_cq_open(domain, &cqa, &cq, NULL));
			obj = &cq->fid;
			break;
		case 2:
			what = "fi_av_open";
			CHECK(fi_av_open(domain, &ava, &av, NULL));
			obj = &av->fid;
			break;
		case 3:
			what = "fi_cntr_open";
			CHECK(fi_cntr_open(domain, &ca, &cntr, NULL));
			obj = &cntr->fid;
			break;
		case 4:
			what = "fi_mr_reg";
			CHECK(fi_mr_reg(domain, buf, sizeof buf, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
			obj = &mr->fid;
			break;
		case 5:
			what = "fi_stx_context";
			CHECK(fi_stx_context(domain, &txa, &stx, NULL));
			obj = &stx->fid;
			break;
		case 6:
			what = "fi_srx_context";
			CHECK(fi_srx_context(domain, &rxa, &ep, NULL));
			obj = &ep->fid;
			break;
		case 7:
			what = "fi_scalable_ep";
			CHECK(fi_scalable_ep(domain, info, &ep, NULL));
			obj = &ep->fid;
			break;
		case 8:
			what = "fi_poll_open";
			CHECK(fi_poll_open(domain, &pa, &ps));
			obj = &ps->fid;
			break;
		case 9:
			what = "nothing";
			break;
		}
		if (obj) {
			int ret = fi_close(&domain->fid);
			if (ret != -FI_EBUSY)
				fail("fi_close of a domain with %s open: %d, want -FI_EBUSY", what, ret);
			CHECK(fi_close(obj));
		}
		CHECK(fi_close(&domain->fid));
		printf("ok fi_close of a domain after %s\n", what);
	}
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
}

/* opened: fi_domain_attr.domain, "On input to fi_getinfo, a user may set
 * this to an opened domain instance to restrict output to the given
 * domain. On output from fi_getinfo, if no domain was specified, but the
 * user has an opened instance of the named domain, this will reference
 * the first opened instance. If no instance has been opened, this field
 * will be NULL." (fi_domain(3)). */
static void opened(void)
{
	struct fi_info *info, *out, *e;
	CHECK(info_for(FI_EP_UNSPEC, 0, NULL, dom_name, &info));
	for (e = info; e; e = e->next)
		if (e->domain_attr->domain)
			fail("no domain open: an entry of %s references %p", e->domain_attr->name,
			     (void *)e->domain_attr->domain);
	struct fid_fabric *fabric;
	struct fid_domain *d1, *d2;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &d1, NULL));
	CHECK(fi_domain(fabric, info, &d2, NULL));
	/* Output: the first opened instance in the entries of its domain,
	 * NULL in the others'. */
	CHECK(info_for(FI_EP_UNSPEC, 0, NULL, NULL, &out));
	int others = 0;
	for (e = out; e; e = e->next) {
		bool ours = !strcmp(e->domain_attr->name, dom_name);
		others += !ours;
		if (e->domain_attr->domain != (ours ? d1 : NULL))
			fail("two instances of %s open: an entry of %s references %p, want %p", dom_name,
			     e->domain_attr->name, (void *)e->domain_attr->domain, ours ? (void *)d1 : NULL);
	}
	if (!others)
		fail("fi_getinfo gave no entry of another domain than %s", dom_name);
	fi_freeinfo(out);
	/* Input: the instance given restricts to its domain, and the entries
	 * name it. */
	CHECK(info_for(FI_EP_UNSPEC, 0, d2, NULL, &out));
	for (e = out; e; e = e->next)
		if (e->domain_attr->domain != d2 || strcmp(e->domain_attr->name, dom_name))
			fail("hints with the second instance: an entry of %s references %p, want %p",
			     e->domain_attr->name, (void *)e->domain_attr->domain, (void *)d2);
	fi_freeinfo(out);
	/* Once the first is closed the second is the first open. */
	CHECK(fi_close(&d1->fid));
	CHECK(info_for(FI_EP_UNSPEC, 0, NULL, dom_name, &out));
	for (e = out; e; e = e->next)
		if (e->domain_attr->domain != d2)
			fail("after closing the first: an entry references %p, want %p", (void *)e->domain_attr->domain,
			     (void *)d2);
	fi_freeinfo(out);
	CHECK(fi_close(&d2->fid));
	CHECK(info_for(FI_EP_UNSPEC, 0, NULL, dom_name, &out));
	for (e = out; e; e = e->next)
		if (e->domain_attr->domain)
			fail("every instance closed: an entry references %p", (void *)e->domain_attr->domain);
	fi_freeinfo(out);
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	printf("ok fi_domain_attr.domain\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	dom_name = argc > 1 ? argv[1] : "tcp/lo";
	user_id();
	busy_close();
	opened();
	printf("PASS\n");
	return 0;
}
