/*
 * getinfo_test: fi_getinfo through the fabricfs provider, which sends the
 * hints whole to the tree's getinfo: tx/rx modes, mr_mode and the legacy
 * modes, attributes that take the hint's value, enumerations, orders, a second
 * address, Open MPI's mtl/ofi hints, and what prov.c does itself: fabric
 * names, opened fabrics and domains. Run by tests/provider_info_test.go with FI_PROVIDER_PATH at the
 * provider and FI_FABRICFS_ROOT at a mounted tree whose domains include
 * tcp/lo and verbs/rxe_127_0_0_1. Exits 1 on the first failed check.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#define FAIL(...)                                        \
	do {                                             \
		fprintf(stderr, "getinfo_test: " __VA_ARGS__); \
		fputc('\n', stderr);                     \
		exit(1);                                 \
	} while (0)

static int checks;

#define CHECK(cond, ...)             \
	do {                         \
		checks++;            \
		if (!(cond))         \
			FAIL(__VA_ARGS__); \
	} while (0)

/* hints_new gives hints for this provider as fi_info(1) makes them: every
 * mode and mr_mode bit, so only what a case sets restricts. */
static struct fi_info *hints_new(void)
{
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup("fabricfs");
	h->mode = ~0ULL;
	h->domain_attr->mode = ~0ULL;
	h->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
	return h;
}

static int get(uint32_t version, const char *node, const char *service, uint64_t flags, struct fi_info *h,
	       struct fi_info **out)
{
	*out = NULL;
	return fi_getinfo(version, node, service, flags, h, out);
}

static int count(const struct fi_info *i)
{
	int n = 0;
	for (; i; i = i->next)
		n++;
	return n;
}

static const struct fi_info *find(const struct fi_info *i, const char *domain, enum fi_ep_type type)
{
	for (; i; i = i->next)
		if (!strcmp(i->domain_attr->name, domain) && i->ep_attr->type == type)
			return i;
	return NULL;
}

static struct sockaddr_in *sin_new(const char *ip, int port)
{
	struct sockaddr_in *s = calloc(1, sizeof *s);
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
	return s;
}

static int port_of(const void *addr)
{
	return addr ? ntohs(((const struct sockaddr_in *)addr)->sin_port) : -1;
}

#define V FI_VERSION(1, 17)

int main(void)
{
	struct fi_info *h, *all, *out;
	int ret;

	/* Every entry is this provider's, named PROV/NAME. */
	h = hints_new();
	ret = get(V, NULL, NULL, 0, h, &all);
	CHECK(!ret, "no hints: %s", fi_strerror(-ret));
	for (const struct fi_info *i = all; i; i = i->next) {
		CHECK(!strcmp(i->fabric_attr->prov_name, "fabricfs"), "prov_name %s", i->fabric_attr->prov_name);
		CHECK(!strncmp(i->domain_attr->name, "tcp/", 4) || !strncmp(i->domain_attr->name, "verbs/", 6) ||
			      !strcmp(i->domain_attr->name, "shm/shm"),
		      "domain %s", i->domain_attr->name);
		CHECK(strchr(i->fabric_attr->name, '/'), "fabric %s", i->fabric_attr->name);
	}
	const struct fi_info *vmsg = find(all, "verbs/rxe_127_0_0_1", FI_EP_MSG);
	CHECK(vmsg && find(all, "tcp/lo", FI_EP_MSG), "no verbs/rxe_127_0_0_1 or tcp/lo MSG entry");
	CHECK(vmsg->rx_attr->mode & FI_RX_CQ_DATA, "verbs MSG without FI_RX_CQ_DATA: the mode cases mean nothing");
	/* Without hints, verbs reports the bits it prefers: FI_MR_VIRT_ADDR too,
	 * as libfabric's verbs. */
	CHECK(vmsg->domain_attr->mr_mode == (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY),
	      "verbs mr_mode %#x", vmsg->domain_attr->mr_mode);
	int n = count(all);

	/* Modes: FI_RX_CQ_DATA "only applies to data transfers that set
	 * FI_REMOTE_CQ_DATA" (fi_getinfo(3)), so without it verbs MSG stays,
	 * without the mode and with cq_data_size 0, as libfabric's verbs
	 * answers; asking for CQ data as well, verbs MSG goes; an rx mode of
	 * its own brings it back (tx/rx mode 0 means the fi_info mode). */
	h->mode = 0;
	ret = get(V, NULL, NULL, 0, h, &out);
	const struct fi_info *kept = find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG);
	CHECK(!ret && kept && find(out, "tcp/lo", FI_EP_MSG), "mode 0: verbs MSG or tcp dropped (%d)", ret);
	CHECK(!(kept->mode & FI_RX_CQ_DATA) && !(kept->rx_attr->mode & FI_RX_CQ_DATA) &&
		      kept->domain_attr->cq_data_size == 0,
	      "mode 0: verbs MSG kept with mode %#llx rx mode %#llx cq_data_size %zu", (unsigned long long)kept->mode,
	      (unsigned long long)kept->rx_attr->mode, kept->domain_attr->cq_data_size);
	fi_freeinfo(out);
	h->domain_attr->cq_data_size = 4;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && !find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG) && find(out, "tcp/lo", FI_EP_MSG),
	      "mode 0 and cq_data_size 4: verbs MSG kept or tcp dropped (%d)", ret);
	fi_freeinfo(out);
	h->rx_attr->mode = FI_RX_CQ_DATA;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG), "rx mode FI_RX_CQ_DATA: no verbs MSG (%d)", ret);
	fi_freeinfo(out);
	fi_freeinfo(h);

	/* mr_mode: an entry needing bits the application lacks goes. */
	h = hints_new();
	h->caps = FI_MSG | FI_RMA;
	h->domain_attr->mr_mode = FI_MR_LOCAL;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && !find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG) && find(out, "tcp/lo", FI_EP_MSG),
	      "mr_mode FI_MR_LOCAL: verbs kept or tcp dropped (%d)", ret);
	fi_freeinfo(out);
	/* ... unless caps were a wildcard: then the RMA target caps go. */
	h->caps = 0;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED;
	h->ep_attr->type = FI_EP_MSG;
	ret = get(V, NULL, NULL, 0, h, &out);
	const struct fi_info *e = find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG);
	CHECK(!ret && e && !(e->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)) &&
		      !(e->rx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)) &&
		      e->domain_attr->mr_mode == (FI_MR_LOCAL | FI_MR_ALLOCATED),
	      "mr_mode without FI_MR_PROV_KEY, caps 0: want verbs MSG without remote access (%d)", ret);
	fi_freeinfo(out);
	fi_freeinfo(h);

	/* API 1.4: the legacy modes, FI_MR_LOCAL as FI_LOCAL_MR. */
	h = hints_new();
	h->domain_attr->mr_mode = FI_MR_UNSPEC;
	ret = get(FI_VERSION(1, 4), NULL, NULL, 0, h, &out);
	e = find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG);
	CHECK(!ret && e && e->domain_attr->mr_mode == FI_MR_BASIC && (e->mode & FI_LOCAL_MR), "1.4: verbs MSG %s",
	      e ? "not FI_MR_BASIC with FI_LOCAL_MR" : "missing");
	e = find(out, "tcp/lo", FI_EP_MSG);
	CHECK(e && e->domain_attr->mr_mode == FI_MR_SCALABLE, "1.4: tcp MSG not FI_MR_SCALABLE");
	fi_freeinfo(out);
	h->domain_attr->mr_mode = FI_MR_SCALABLE;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && !find(out, "verbs/rxe_127_0_0_1", FI_EP_MSG) && find(out, "tcp/lo", FI_EP_MSG),
	      "FI_MR_SCALABLE: verbs kept or tcp dropped (%d)", ret);
	fi_freeinfo(out);
	/* Invalid hints: the provider's -FI_EINVAL, which libfabric reports
	 * as -FI_ENODATA (no provider answered). */
	h->domain_attr->mr_mode = FI_MR_BASIC | FI_MR_LOCAL;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "FI_MR_BASIC with another bit: %d", ret);
	fi_freeinfo(h);

	/* Sizes: at most the entry's, and the output takes the hint. */
	h = hints_new();
	h->domain_attr->name = strdup("tcp/lo");
	h->ep_attr->type = FI_EP_MSG;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret, "tcp/lo MSG: %d", ret);
	size_t size = out->tx_attr->size;
	fi_freeinfo(out);
	h->tx_attr->size = size - 1;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_TABLE;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && out->tx_attr->size == size - 1 && out->domain_attr->threading == FI_THREAD_DOMAIN &&
		      out->domain_attr->av_type == FI_AV_TABLE,
	      "tx size %zu, FI_THREAD_DOMAIN, FI_AV_TABLE not taken (%d)", size - 1, ret);
	fi_freeinfo(out);
	h->tx_attr->size = size + 1;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "tx size %zu > %zu: %d", size + 1, size, ret);
	h->tx_attr->size = 0;
	h->domain_attr->threading = 99;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "threading 99: %d", ret);
	fi_freeinfo(h);

	/* Open MPI 4.1's mtl/ofi asks (API 1.5) for tagged FI_EP_RDM with
	 * default op_flags FI_COMPLETION, FI_THREAD_DOMAIN, FI_AV_MAP, mr_mode
	 * 0 and 4 bytes of CQ data (with FI_PROVIDER=fabricfs: prov_name). */
	h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup("fabricfs");
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->tx_attr->op_flags = h->rx_attr->op_flags = FI_COMPLETION;
	h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->cq_data_size = 4;
	ret = get(FI_VERSION(1, 5), NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "Open MPI's mtl/ofi hints: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(e->ep_attr->type == FI_EP_RDM && (e->caps & FI_TAGGED) && e->tx_attr->op_flags == FI_COMPLETION &&
			      e->rx_attr->op_flags == FI_COMPLETION && e->domain_attr->threading == FI_THREAD_DOMAIN &&
			      e->domain_attr->av_type == FI_AV_MAP && e->domain_attr->mr_mode == 0,
		      "Open MPI's mtl/ofi hints gave %s not as asked", e->domain_attr->name);
	fi_freeinfo(out);
	fi_freeinfo(h);

	/* Caps and op_flags fi_tostr has no name for: none is the tree's but
	 * FI_AV_USER_ID (domaintest.c), which goes to the tree as an option. */
	h = hints_new();
	h->caps = FI_MSG | FI_PEER;
	CHECK(get(V, NULL, NULL, 0, h, &out) == -FI_ENODATA, "caps FI_PEER matched");
	h->caps = FI_MSG | FI_AV_USER_ID;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "caps FI_AV_USER_ID: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(e->ep_attr->type == FI_EP_RDM && (e->caps & FI_AV_USER_ID), "caps FI_AV_USER_ID gave %s type %d",
		      e->domain_attr->name, e->ep_attr->type);
	fi_freeinfo(out);
	h->caps = 0;
	h->tx_attr->op_flags = FI_COMMIT_COMPLETE;
	CHECK(get(V, NULL, NULL, 0, h, &out) == -FI_ENODATA, "tx op_flags FI_COMMIT_COMPLETE matched");
	fi_freeinfo(h);

	/* Orders. msg_order flags are the FI_ORDER_* of fi_endpoint(3)'s
	 * "msg_order - Message Ordering"; FI_ORDER_DATA is a comp_order bit
	 * ("comp_order - Completion Ordering ... FI_ORDER_DATA When set, this
	 * bit indicates that received data is written into memory in
	 * order"), which fi_tostr does not print in msg_order, and which no
	 * entry's msg_order has: asked for there, it matches nothing, as an
	 * order bit the entry lacks would (fabtests' getinfo_msg_ordering). */
	h = hints_new();
	h->tx_attr->msg_order = FI_ORDER_SAS;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "tx msg_order FI_ORDER_SAS: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(e->tx_attr->msg_order & FI_ORDER_SAS, "tx msg_order FI_ORDER_SAS gave %s without it",
		      e->domain_attr->name);
	fi_freeinfo(out);
	h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_DATA;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "tx msg_order FI_ORDER_DATA: %d, %s", ret, out ? out->domain_attr->name : "");
	h->tx_attr->msg_order = 0;
	h->rx_attr->msg_order = FI_ORDER_DATA;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "rx msg_order FI_ORDER_DATA: %d", ret);
	h->rx_attr->msg_order = 0;
	/* comp_order: "the returned ordering is stricter than that specified
	 * by the application". fi_tostr names FI_ORDER_STRICT only with all
	 * of its bits: one of them asks for an FI_ORDER_STRICT entry (the
	 * MSG ones), not for any (the RDM ones are FI_ORDER_NONE). */
	h->tx_attr->comp_order = FI_ORDER_SAS;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "tx comp_order FI_ORDER_SAS: %d", ret);
	for (e = out; e; e = e->next)
		CHECK((e->tx_attr->comp_order & FI_ORDER_SAS) && e->ep_attr->type != FI_EP_RDM,
		      "tx comp_order FI_ORDER_SAS gave %s type %d comp_order %#llx", e->domain_attr->name,
		      e->ep_attr->type, (unsigned long long)e->tx_attr->comp_order);
	fi_freeinfo(out);
	h->tx_attr->comp_order = 0;
	h->rx_attr->comp_order = FI_ORDER_RAR;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "rx comp_order FI_ORDER_RAR: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(e->rx_attr->comp_order & FI_ORDER_RAR, "rx comp_order FI_ORDER_RAR gave %s comp_order %#llx",
		      e->domain_attr->name, (unsigned long long)e->rx_attr->comp_order);
	fi_freeinfo(out);
	h->rx_attr->comp_order = 1ULL << 20; /* no order flag */
	CHECK(get(V, NULL, NULL, 0, h, &out) == -FI_ENODATA, "rx comp_order bit 20 matched");
	h->rx_attr->comp_order = 0;
	/* Domain caps fi_tostr has no name for, as caps above. */
	h->domain_attr->caps = FI_LOCAL_COMM | FI_AV_USER_ID;
	CHECK(get(V, NULL, NULL, 0, h, &out) == -FI_ENODATA, "domain caps FI_AV_USER_ID matched");
	fi_freeinfo(h);

	/* ep_attr protocol. */
	h = hints_new();
	h->ep_attr->protocol = FI_PROTO_IB_UD;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret, "FI_PROTO_IB_UD: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(e->ep_attr->type == FI_EP_DGRAM && e->ep_attr->protocol == FI_PROTO_IB_UD, "FI_PROTO_IB_UD: %s",
		      e->domain_attr->name);
	fi_freeinfo(out);
	fi_freeinfo(h);

	/* Names: "PROV/NAME"; a bare tree name is not one of ours. */
	h = hints_new();
	h->domain_attr->name = strdup("lo");
	CHECK(get(V, NULL, NULL, 0, h, &out) == -FI_ENODATA, "domain lo matched");
	free(h->domain_attr->name);
	h->domain_attr->name = NULL;
	h->fabric_attr->name = strdup("tcp/127.0.0.1/32");
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0, "fabric tcp/127.0.0.1/32: %d", ret);
	for (e = out; e; e = e->next)
		CHECK(!strcmp(e->domain_attr->name, "tcp/lo"), "fabric tcp/127.0.0.1/32 gave %s", e->domain_attr->name);
	fi_freeinfo(out);
	fi_freeinfo(h);

	/* Addresses: a hints address the query does not carry. */
	h = hints_new();
	h->addr_format = FI_SOCKADDR_IN;
	h->ep_attr->type = FI_EP_MSG;
	h->dest_addr = sin_new("127.0.0.1", 7000);
	h->dest_addrlen = sizeof(struct sockaddr_in);
	ret = get(V, "127.0.0.1", "9228", FI_SOURCE, h, &out);
	e = find(out, "tcp/lo", FI_EP_MSG);
	CHECK(!ret && e && port_of(e->src_addr) == 9228 && port_of(e->dest_addr) == 7000,
	      "FI_SOURCE 127.0.0.1:9228 and dest_addr :7000: %d, ports %d %d", ret, e ? port_of(e->src_addr) : -1,
	      e ? port_of(e->dest_addr) : -1);
	fi_freeinfo(out);
	free(h->dest_addr);
	h->dest_addr = NULL;
	h->dest_addrlen = 0;
	h->src_addr = sin_new("127.0.0.1", 5000);
	h->src_addrlen = sizeof(struct sockaddr_in);
	ret = get(V, "127.0.0.1", "6000", 0, h, &out);
	e = find(out, "tcp/lo", FI_EP_MSG);
	CHECK(!ret && e && port_of(e->src_addr) == 5000 && port_of(e->dest_addr) == 6000,
	      "node 127.0.0.1:6000 and src_addr :5000: %d", ret);
	fi_freeinfo(out);
	/* Without node and service, the hints addresses alone. */
	ret = get(V, NULL, NULL, 0, h, &out);
	e = find(out, "tcp/lo", FI_EP_MSG);
	CHECK(!ret && e && port_of(e->src_addr) == 5000 && !e->dest_addr, "src_addr :5000 alone: %d", ret);
	fi_freeinfo(out);
	h->dest_addr = sin_new("127.0.0.1", 7100);
	h->dest_addrlen = sizeof(struct sockaddr_in);
	ret = get(V, NULL, NULL, 0, h, &out);
	e = find(out, "tcp/lo", FI_EP_MSG);
	CHECK(!ret && e && port_of(e->src_addr) == 5000 && port_of(e->dest_addr) == 7100,
	      "src_addr :5000 and dest_addr :7100: %d", ret);
	fi_freeinfo(out);
	free(h->src_addr);
	h->src_addr = sin_new("192.0.2.77", 5000); /* no domain has it */
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(ret == -FI_ENODATA, "src_addr 192.0.2.77 and dest_addr: %d", ret);
	free(h->dest_addr);
	h->dest_addr = NULL;
	h->dest_addrlen = 0;
	ret = get(V, "127.0.0.1", "6000", 0, h, &out);
	CHECK(ret == -FI_ENODATA, "src_addr 192.0.2.77: %d", ret);
	fi_freeinfo(h);

	/* The fabric: opened by name, and restricting fi_getinfo. */
	const struct fi_info *lo = find(all, "tcp/lo", FI_EP_MSG);
	struct fid_fabric *fab;
	ret = fi_fabric(lo->fabric_attr, &fab, NULL);
	CHECK(!ret, "fi_fabric %s: %d", lo->fabric_attr->name, ret);
	h = hints_new();
	h->fabric_attr->fabric = fab;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0 && count(out) < n, "opened fabric: %d, %d entries", ret, count(out));
	for (e = out; e; e = e->next)
		CHECK(!strcmp(e->fabric_attr->name, lo->fabric_attr->name), "opened fabric gave %s", e->fabric_attr->name);
	fi_freeinfo(out);
	h->fabric_attr->fabric = NULL;
	fi_freeinfo(h);

	/* An opened domain: "On input to fi_getinfo, a user may set this to
	 * an opened domain instance to restrict output to the given domain"
	 * (fi_domain(3)). */
	struct fid_domain *dom;
	ret = fi_domain(fab, (struct fi_info *)lo, &dom, NULL);
	CHECK(!ret, "fi_domain tcp/lo: %d", ret);
	h = hints_new();
	h->domain_attr->domain = dom;
	ret = get(V, NULL, NULL, 0, h, &out);
	CHECK(!ret && count(out) > 0 && count(out) < n, "opened domain: %d, %d entries", ret, count(out));
	for (e = out; e; e = e->next)
		CHECK(!strcmp(e->domain_attr->name, "tcp/lo"), "opened domain tcp/lo gave %s", e->domain_attr->name);
	fi_freeinfo(out);
	h->domain_attr->domain = NULL;
	fi_freeinfo(h);
	CHECK(!fi_close(&dom->fid), "fi_close of the domain");
	CHECK(!fi_close(&fab->fid), "fi_close of the fabric");
	struct fi_fabric_attr bad = *lo->fabric_attr;
	bad.name = "nope/1";
	CHECK(fi_fabric(&bad, &fab, NULL) == -FI_ENODATA, "fi_fabric nope/1 opened");

	fi_freeinfo(all);
	printf("getinfo_test: %d checks passed over %d entries\n", checks, n);
	return 0;
}
