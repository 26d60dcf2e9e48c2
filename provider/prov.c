/*
 * prov.c: the provider's entry point, fi_getinfo and the fabric.
 *
 * fi_getinfo asks the tree: the arguments and the hints its getinfo file
 * understands (fi_info(1)'s options, docs/tree.md) become one query, the
 * answer's entries are parsed (info.c), and the hints the query cannot
 * carry are applied here with the tree's own rules (core/fi/getinfo*.go,
 * after fi_getinfo(3)), so an application's hints behave as they do in the
 * tree. docs/provider.md, "fi_getinfo", lists which hint goes where.
 */
#include "ffs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest getinfo answer read: a few KiB per entry. */
#define MAX_ANSWER (16u << 20)

/*
 * libfabric's utility providers (ofi_rxm, ofi_rxd, ofi_mrail) look for
 * core providers to layer over with this flag of fi_getinfo (libfabric
 * 1.17 include/ofi.h, OFI_CORE_PROV_ONLY, internal to libfabric). The tree
 * already offers its own layered entries (prov_name "tcp;ofi_rxm"); an
 * rxm in the application over fabricfs's FI_EP_MSG would stack a second
 * one, so this provider is not offered to them (as libfabric itself does
 * for sockets and shm).
 */
#define OFI_CORE_PROV_ONLY (1ULL << 59)

static int ffs_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);

/* The fabric's operations (below): an opened fabric of this provider is
 * known by them. */
static struct fi_ops fabric_fi_ops;

static void ffs_cleanup(void)
{
}

struct fi_provider ffs_prov = {
	.version = FFS_PROV_VERSION,
	.fi_version = FFS_API_VERSION,
	.name = FFS_PROV_NAME,
	.getinfo = ffs_getinfo,
	.fabric = ffs_fabric_open,
	.cleanup = ffs_cleanup,
};

FI_EXT_INI
{
	return &ffs_prov;
}

/* ---- capabilities and memory registration modes (getinfo_caps.go) ---- */

#define MSG_DIR (FI_SEND | FI_RECV)
#define RMA_DIR (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
/* The capabilities that apply to a transmit and a receive context
 * (fi_endpoint(3)). */
#define TX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_HMEM | \
		 FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM | FI_NAMED_RX_CTX | FI_COLLECTIVE)
#define RX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV | \
		 FI_HMEM | FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_MULTI_RECV | \
		 FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR | FI_COLLECTIVE)
/* FI_MR_BASIC stands for these (fi_mr(3)); these concern only memory
 * that peers access. */
#define MR_BASIC_MAP (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)
#define MR_RMA_TARGET (FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_RMA_EVENT)

/* implied adds the modifiers a primary capability implies when none is
 * given ("all relevant modifiers are assumed"). */
static uint64_t implied(uint64_t c)
{
	if ((c & (FI_MSG | FI_TAGGED)) && !(c & MSG_DIR))
		c |= MSG_DIR;
	if ((c & (FI_RMA | FI_ATOMIC)) && !(c & RMA_DIR))
		c |= RMA_DIR;
	return c;
}

/* tx_caps and rx_caps keep the capabilities of c (modifiers explicit) that
 * apply to a transmit or receive context. */
static uint64_t tx_caps(uint64_t c)
{
	uint64_t t = c & TX_CAPS;
	if ((c & MSG_DIR) && !(c & FI_SEND))
		t &= ~(uint64_t)(FI_MSG | FI_TAGGED | FI_MULTICAST);
	if ((c & RMA_DIR) && !(c & (FI_READ | FI_WRITE)))
		t &= ~(uint64_t)(FI_RMA | FI_ATOMIC);
	return t;
}

static uint64_t rx_caps(uint64_t c)
{
	uint64_t r = c & RX_CAPS;
	if ((c & MSG_DIR) && !(c & FI_RECV))
		r &= ~(uint64_t)(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_MULTI_RECV);
	if ((c & RMA_DIR) && !(c & (FI_REMOTE_READ | FI_REMOTE_WRITE)))
		r &= ~(uint64_t)(FI_RMA | FI_ATOMIC | FI_RMA_EVENT);
	return r;
}

/* mr_need is the part of mr_mode bits mode that an application using caps
 * (modifiers explicit) must follow: bits about memory it never registers
 * are dropped. */
static int mr_need(int mode, uint64_t caps)
{
	int need = mode & ~(FI_MR_BASIC | FI_MR_SCALABLE);
	if (!(caps & FI_HMEM))
		need &= ~FI_MR_HMEM;
	if (!(caps & FI_COLLECTIVE))
		need &= ~FI_MR_COLLECTIVE;
	if (!((caps & (FI_RMA | FI_ATOMIC)) && (caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)))) {
		need &= ~MR_RMA_TARGET;
		if (!(need & (FI_MR_LOCAL | FI_MR_HMEM | FI_MR_COLLECTIVE)))
			need = 0;
	}
	return need;
}

/* ---- addresses ---- */

/* An IP address and port from hints, or of an entry. */
struct ip {
	int family; /* AF_INET, AF_INET6 */
	uint8_t addr[16];
	uint16_t port; /* host order */
};

static bool ip_unspecified(const struct ip *a)
{
	static const uint8_t zero[16];
	return !memcmp(a->addr, zero, a->family == AF_INET ? 4 : 16);
}

/* ip_of reads an address of format (len bytes): a sockaddr, or the string
 * of FI_ADDR_STR. Other formats have no IP: -FI_EINVAL. */
static int ip_of(uint32_t format, const void *addr, size_t len, struct ip *a)
{
	void *parsed = NULL;
	const struct sockaddr *sa = addr;
	if (format == FI_ADDR_STR) {
		if (!memchr(addr, 0, len))
			return -FI_EINVAL;
		int ret = ffs_addr_parse(FI_SOCKADDR, addr, sizeof(struct sockaddr_in6), &parsed);
		if (ret)
			return ret;
		sa = parsed;
		len = sizeof(struct sockaddr_in6);
	} else if (format != FI_SOCKADDR && format != FI_SOCKADDR_IN && format != FI_SOCKADDR_IN6 &&
		   format != FI_FORMAT_UNSPEC) {
		return -FI_EINVAL;
	}
	int ret = 0;
	memset(a, 0, sizeof *a);
	if (len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET && format != FI_SOCKADDR_IN6) {
		const struct sockaddr_in *sin = (const void *)sa;
		a->family = AF_INET;
		memcpy(a->addr, &sin->sin_addr, 4);
		a->port = ntohs(sin->sin_port);
	} else if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6 && format != FI_SOCKADDR_IN) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;
		a->family = AF_INET6;
		memcpy(a->addr, &sin6->sin6_addr, 16);
		a->port = ntohs(sin6->sin6_port);
	} else {
		ret = -FI_EINVAL;
	}
	free(parsed);
	return ret;
}

/* ip_text prints the address part. */
static void ip_text(const struct ip *a, char *buf, size_t size)
{
	if (!inet_ntop(a->family, a->addr, buf, size))
		buf[0] = 0;
}

/* set_addr replaces *addr (of an entry with addr_format *format) by a:
 * a sockaddr of a's family, or its string when the entry's addresses are
 * strings. */
static int set_addr(uint32_t *format, void **addr, size_t *len, const struct ip *a)
{
	void *p;
	size_t n;
	if (*format == FI_ADDR_STR) {
		char ip[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 32];
		ip_text(a, ip, sizeof ip);
		snprintf(s, sizeof s, a->family == AF_INET ? "fi_sockaddr_in://%s:%u" : "fi_sockaddr_in6://[%s]:%u", ip,
			 a->port);
		if (!(p = strdup(s)))
			return -FI_ENOMEM;
		n = strlen(s) + 1;
	} else if (a->family == AF_INET) {
		struct sockaddr_in *sin = calloc(1, n = sizeof *sin);
		if (!(p = sin))
			return -FI_ENOMEM;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a->addr, 4);
		sin->sin_port = htons(a->port);
		*format = FI_SOCKADDR_IN;
	} else {
		struct sockaddr_in6 *sin6 = calloc(1, n = sizeof *sin6);
		if (!(p = sin6))
			return -FI_ENOMEM;
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, a->addr, 16);
		sin6->sin6_port = htons(a->port);
		*format = FI_SOCKADDR_IN6;
	}
	free(*addr);
	*addr = p;
	*len = n;
	return 0;
}

/* ---- the query ---- */

struct query {
	char text[4096];
	size_t len;
	bool bad; /* a value the query cannot carry, or too long */
};

/* add appends "opt 'value'" (the tree's quoting: '' is a quote). */
static void add(struct query *q, const char *opt, const char *val)
{
	char buf[1024];
	size_t n = 0;
	if (val) {
		buf[n++] = '\'';
		for (const char *p = val; *p && n + 3 < sizeof buf; p++) {
			if (*p == '\n' || *p == '\r')
				q->bad = true;
			if (*p == '\'')
				buf[n++] = '\'';
			buf[n++] = *p;
		}
		buf[n++] = '\'';
		if (n + 1 >= sizeof buf)
			q->bad = true;
	}
	buf[n] = 0;
	int m = snprintf(q->text + q->len, sizeof q->text - q->len, "%s%s %s", q->len ? " " : "", opt, buf);
	if (m < 0 || (size_t)m >= sizeof q->text - q->len)
		q->bad = true;
	else
		q->len += m;
}

static void addf(struct query *q, const char *opt, const char *fmt, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof buf, fmt, (unsigned long long)v);
	add(q, opt, buf);
}

/* name_prov splits a "PROV/NAME" hint: the tree's provider (checked
 * against *prov, set by an earlier name) and its own name. */
static bool name_prov(const char *name, char *prov, size_t size, const char **rest)
{
	const char *slash = strchr(name, '/');
	if (!slash || slash == name || (size_t)(slash - name) >= size)
		return false;
	if (*prov && (strlen(prov) != (size_t)(slash - name) || strncmp(prov, name, slash - name)))
		return false;
	memcpy(prov, name, slash - name);
	prov[slash - name] = 0;
	*rest = slash + 1;
	return true;
}

/* ---- the hints the query does not carry ---- */

/* The request, as the filters need it. */
struct request {
	uint32_t version;
	const struct fi_info *h; /* NULL: no hints */
	bool legacy_mr;          /* API before 1.5, or mr_mode FI_MR_BASIC/SCALABLE */
	int mr_mode;             /* the application's, when h->domain_attr */
	struct ip src, dst;      /* an address applied here, family 0 if none */
};

/* Rankings where one value serves another (getinfo_match.go): a lower
 * rank serves every higher one; 0 is UNSPEC. */
static int thread_rank(int t)
{
	switch (t) {
	case FI_THREAD_SAFE:
		return 1;
	case FI_THREAD_FID:
		return 2;
	case FI_THREAD_ENDPOINT:
		return 3;
	case FI_THREAD_COMPLETION:
		return 4;
	case FI_THREAD_DOMAIN:
		return 5;
	default:
		return 0;
	}
}

static int progress_rank(int p)
{
	return p == FI_PROGRESS_AUTO ? 1 : p == FI_PROGRESS_MANUAL ? 2 : 0;
}

static int rm_rank(int r)
{
	return r == FI_RM_ENABLED ? 1 : r == FI_RM_DISABLED ? 2 : 0;
}

/* serves: a zero hint takes anything, an UNSPEC entry accepts what is
 * asked, else the entry must rank at or below the hint; the output then
 * carries the hint. */
static bool serves(int (*rank)(int), int want, int *have)
{
	if (!want)
		return true;
	if (*have && *have != want && (!rank(*have) || rank(*have) > rank(want)))
		return false;
	*have = want;
	return true;
}

#define AT_LEAST(want, have) ((want) <= (have))

static bool tclass_ok(uint32_t want, uint32_t *have)
{
	if (want == FI_TC_UNSPEC)
		return true;
	if (*have != FI_TC_UNSPEC && *have != want)
		return false;
	*have = want;
	return true;
}

static int bits_len(uint64_t x)
{
	return x ? 64 - __builtin_clzll(x) : 0;
}

/* caps_mr applies tx_attr/rx_attr caps and mr_mode (getinfo_match.go caps
 * and modes); the tree applied fi_info caps and mode. */
static bool caps_mr(const struct request *r, struct fi_info *e)
{
	const struct fi_info *h = r->h;
	struct fi_domain_attr *d = e->domain_attr;
	int need = d->mr_mode;
	if (!r->legacy_mr && h && h->domain_attr && (need & ~r->mr_mode)) {
		if (h->caps)
			return false;
		/* Caps were a wildcard: give up the capabilities whose modes
		 * the application does not support rather than the entry. */
		uint64_t less = implied(e->caps);
		if (need & MR_RMA_TARGET & ~r->mr_mode)
			less &= ~(uint64_t)(FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT);
		if (need & FI_MR_HMEM & ~r->mr_mode)
			less &= ~(uint64_t)FI_HMEM;
		if (need & FI_MR_COLLECTIVE & ~r->mr_mode)
			less &= ~(uint64_t)FI_COLLECTIVE;
		int n = mr_need(need, less);
		if (n & ~r->mr_mode)
			return false;
		e->caps = less;
		e->tx_attr->caps &= tx_caps(less);
		e->rx_attr->caps &= rx_caps(less);
		d->mr_mode = need = n;
	}
	if (r->legacy_mr) {
		/* The legacy mode the entry's needs fit, scalable preferred
		 * when the application takes either (FI_MR_UNSPEC). */
		int app = h && h->domain_attr ? r->mr_mode : FI_MR_UNSPEC;
		bool scalable = !(need & ~FI_MR_LOCAL);
		bool basic = !(need & ~(FI_MR_LOCAL | MR_BASIC_MAP));
		if (scalable && app != FI_MR_BASIC)
			d->mr_mode = FI_MR_SCALABLE;
		else if (basic && app != FI_MR_SCALABLE)
			d->mr_mode = FI_MR_BASIC;
		else
			return false;
		/* FI_LOCAL_MR is how a legacy application agrees to FI_MR_LOCAL. */
		if (need & FI_MR_LOCAL)
			e->mode |= FI_LOCAL_MR;
	}
	if (!h)
		return true;

	/* tx_attr and rx_attr caps: those requested, if the entry's side
	 * offers them. */
	uint64_t ht = h->tx_attr ? h->tx_attr->caps : 0, hr = h->rx_attr ? h->rx_attr->caps : 0;
	if (ht) {
		uint64_t want = tx_caps(implied(ht));
		if (want & ~e->tx_attr->caps)
			return false;
		e->tx_attr->caps = want;
	}
	if (hr) {
		uint64_t want = rx_caps(implied(hr));
		if (want & ~e->rx_attr->caps)
			return false;
		e->rx_attr->caps = want;
	}
	if (h->domain_attr && (h->domain_attr->caps & ~d->caps))
		return false;

	/* Modes: an entry needing a bit the application did not set is
	 * left out; tx/rx mode 0 means the fi_info mode. */
	uint64_t txm = h->tx_attr && h->tx_attr->mode ? h->tx_attr->mode : h->mode;
	uint64_t rxm = h->rx_attr && h->rx_attr->mode ? h->rx_attr->mode : h->mode;
	if ((e->mode & ~h->mode) || (e->tx_attr->mode & ~txm) || (e->rx_attr->mode & ~rxm))
		return false;
	if (h->domain_attr && (d->mode & ~h->domain_attr->mode))
		return false;
	return true;
}

/* attrs applies the attribute hints (getinfo_attrs.go domainAttr, epAttr,
 * txAttr, rxAttr). */
static bool attrs(const struct request *r, struct fi_info *e)
{
	const struct fi_info *h = r->h;
	struct fi_domain_attr *d = e->domain_attr;
	struct fi_ep_attr *ep = e->ep_attr;
	struct fi_tx_attr *tx = e->tx_attr;
	struct fi_rx_attr *rx = e->rx_attr;
	bool v15 = r->version >= FI_VERSION(1, 5);

	if (h->fabric_attr) {
		const struct fi_fabric_attr *hf = h->fabric_attr;
		if (hf->prov_version > FFS_PROV_VERSION || hf->api_version > FFS_API_VERSION)
			return false;
	}
	if (h->domain_attr) {
		const struct fi_domain_attr *hd = h->domain_attr;
		int t = d->threading, cp = d->control_progress, dp = d->data_progress, rm = d->resource_mgmt;
		if (!serves(thread_rank, hd->threading, &t) || !serves(progress_rank, hd->control_progress, &cp) ||
		    !serves(progress_rank, hd->data_progress, &dp) || !serves(rm_rank, hd->resource_mgmt, &rm))
			return false;
		d->threading = t;
		d->control_progress = cp;
		d->data_progress = dp;
		d->resource_mgmt = rm;
		if (hd->av_type != FI_AV_UNSPEC) {
			if (d->av_type != FI_AV_UNSPEC && d->av_type != hd->av_type)
				return false;
			d->av_type = hd->av_type;
		}
		if (!AT_LEAST(hd->mr_key_size, d->mr_key_size) || !AT_LEAST(hd->cq_data_size, d->cq_data_size) ||
		    !AT_LEAST(hd->cq_cnt, d->cq_cnt) || !AT_LEAST(hd->ep_cnt, d->ep_cnt) ||
		    !AT_LEAST(hd->tx_ctx_cnt, d->tx_ctx_cnt) || !AT_LEAST(hd->rx_ctx_cnt, d->rx_ctx_cnt) ||
		    !AT_LEAST(hd->max_ep_tx_ctx, d->max_ep_tx_ctx) || !AT_LEAST(hd->max_ep_rx_ctx, d->max_ep_rx_ctx) ||
		    !AT_LEAST(hd->max_ep_stx_ctx, d->max_ep_stx_ctx) ||
		    !AT_LEAST(hd->max_ep_srx_ctx, d->max_ep_srx_ctx) || !AT_LEAST(hd->cntr_cnt, d->cntr_cnt) ||
		    !AT_LEAST(hd->mr_iov_limit, d->mr_iov_limit) || !AT_LEAST(hd->max_err_data, d->max_err_data) ||
		    !AT_LEAST(hd->mr_cnt, d->mr_cnt))
			return false;
		/* No entry of the tree takes an authorization key. */
		if (v15 && hd->auth_key_size && hd->auth_key_size != d->auth_key_size)
			return false;
		if (!tclass_ok(hd->tclass, &d->tclass))
			return false;
	}
	if (h->ep_attr) {
		const struct fi_ep_attr *he = h->ep_attr;
		uint64_t caps = implied(e->caps);
		if (he->protocol != FI_PROTO_UNSPEC && he->protocol != ep->protocol)
			return false;
		if (!AT_LEAST(he->protocol_version, ep->protocol_version) || !AT_LEAST(he->max_msg_size, ep->max_msg_size))
			return false;
		/* The hint is the prefix space the application provides. */
		if (he->msg_prefix_size && ep->msg_prefix_size > he->msg_prefix_size)
			return false;
		if ((caps & (FI_RMA | FI_ATOMIC)) &&
		    (!AT_LEAST(he->max_order_raw_size, ep->max_order_raw_size) ||
		     !AT_LEAST(he->max_order_war_size, ep->max_order_war_size) ||
		     !AT_LEAST(he->max_order_waw_size, ep->max_order_waw_size)))
			return false;
		if ((caps & FI_TAGGED) && he->mem_tag_format) {
			if (bits_len(he->mem_tag_format) > bits_len(ep->mem_tag_format))
				return false;
			ep->mem_tag_format = he->mem_tag_format;
		}
		/* Context counts: at most the domain's per-endpoint maximum (1 if
		 * 0); FI_SHARED_CONTEXT needs shared contexts. */
		const size_t want[2] = { he->tx_ctx_cnt, he->rx_ctx_cnt };
		size_t *have[2] = { &ep->tx_ctx_cnt, &ep->rx_ctx_cnt };
		const size_t limit[2] = { d->max_ep_tx_ctx, d->max_ep_rx_ctx };
		const size_t shared[2] = { d->max_ep_stx_ctx, d->max_ep_srx_ctx };
		for (int i = 0; i < 2; i++) {
			if (want[i] == FI_SHARED_CONTEXT ? !shared[i] :
			    want[i] == 0 ? *have[i] == FI_SHARED_CONTEXT :
					   want[i] > (limit[i] ? limit[i] : 1))
				return false;
			if (want[i])
				*have[i] = want[i];
		}
		if (v15 && he->auth_key_size && he->auth_key_size != ep->auth_key_size)
			return false;
	}
	if (h->tx_attr) {
		const struct fi_tx_attr *ht = h->tx_attr;
		if ((ht->op_flags & ~tx->op_flags) || (ht->msg_order & ~tx->msg_order) ||
		    (ht->comp_order & ~tx->comp_order) || !AT_LEAST(ht->inject_size, tx->inject_size) ||
		    !AT_LEAST(ht->size, tx->size) || !AT_LEAST(ht->iov_limit, tx->iov_limit) ||
		    !AT_LEAST(ht->rma_iov_limit, tx->rma_iov_limit) || !tclass_ok(ht->tclass, &tx->tclass))
			return false;
		/* Sizes that configure the endpoint take the requested value;
		 * op_flags are the requested default flags. */
		tx->op_flags = ht->op_flags;
		if (ht->inject_size)
			tx->inject_size = ht->inject_size;
		if (ht->size)
			tx->size = ht->size;
		if (ht->iov_limit)
			tx->iov_limit = ht->iov_limit;
		if (ht->rma_iov_limit)
			tx->rma_iov_limit = ht->rma_iov_limit;
	}
	if (h->rx_attr) {
		const struct fi_rx_attr *hr = h->rx_attr;
		if ((hr->op_flags & ~rx->op_flags) || (hr->msg_order & ~rx->msg_order) ||
		    (hr->comp_order & ~rx->comp_order) || !AT_LEAST(hr->size, rx->size) ||
		    !AT_LEAST(hr->iov_limit, rx->iov_limit))
			return false;
		rx->op_flags = hr->op_flags;
		if (hr->size)
			rx->size = hr->size;
		if (hr->iov_limit)
			rx->iov_limit = hr->iov_limit;
		/* total_buffered_recv is a hint the provider may lower. */
		if (hr->total_buffered_recv && hr->total_buffered_recv < rx->total_buffered_recv)
			rx->total_buffered_recv = hr->total_buffered_recv;
	}
	return true;
}

/* addrs applies the hints address the query did not carry (getinfo_attrs.go
 * addrs): the entry's family must fit, a source must be the entry's own
 * address or a wildcard on either side. */
static int addrs(const struct request *r, struct fi_info *e, bool *keep)
{
	*keep = true;
	if (!r->src.family && !r->dst.family)
		return 0;
	struct ip mine;
	bool have = e->src_addr && !ip_of(e->addr_format, e->src_addr, e->src_addrlen, &mine);
	bool v4 = have ? mine.family == AF_INET : e->addr_format != FI_SOCKADDR_IN6;
	bool v6 = have ? mine.family == AF_INET6 : e->addr_format != FI_SOCKADDR_IN;
	const struct ip *a = r->src.family ? &r->src : &r->dst;
	if (!(a->family == AF_INET ? v4 : v6)) {
		*keep = false;
		return 0;
	}
	if (a == &r->src) {
		if (have && !ip_unspecified(a) && !ip_unspecified(&mine) && memcmp(a->addr, mine.addr, 16)) {
			*keep = false;
			return 0;
		}
		return set_addr(&e->addr_format, &e->src_addr, &e->src_addrlen, a);
	}
	return set_addr(&e->addr_format, &e->dest_addr, &e->dest_addrlen, a);
}

/* hints_ip reads a hints address (src_addr or dest_addr); a is left
 * zero without one. */
static int hints_ip(const struct fi_info *h, const void *addr, size_t len, struct ip *a)
{
	return addr ? ip_of(h->addr_format, addr, len, a) : 0;
}

/* request_init checks the hints the tree would refuse (-FI_EINVAL, as the
 * tree's GetInfo) and fills r. */
static int request_init(struct request *r, uint32_t version, const struct fi_info *h)
{
	memset(r, 0, sizeof *r);
	r->version = version;
	r->h = h;
	r->legacy_mr = version < FI_VERSION(1, 5);
	if (!h)
		return 0;
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;
		int m = d->mr_mode;
		if (d->threading > FI_THREAD_ENDPOINT || d->control_progress > FI_PROGRESS_MANUAL ||
		    d->data_progress > FI_PROGRESS_MANUAL || d->resource_mgmt > FI_RM_ENABLED ||
		    d->av_type > FI_AV_TABLE)
			return -FI_EINVAL;
		/* FI_MR_BASIC and FI_MR_SCALABLE stand alone; before 1.5 they
		 * are the only modes. */
		if ((m & (FI_MR_BASIC | FI_MR_SCALABLE)) && m != FI_MR_BASIC && m != FI_MR_SCALABLE)
			return -FI_EINVAL;
		if (r->legacy_mr && (m & ~(FI_MR_BASIC | FI_MR_SCALABLE)))
			return -FI_EINVAL;
		if (m == FI_MR_BASIC || m == FI_MR_SCALABLE)
			r->legacy_mr = true;
		r->mr_mode = m;
	}
	return 0;
}

/* ---- fi_getinfo ---- */

/* prov_attr_only answers FI_PROV_ATTR_ONLY: one entry of defaults, which
 * libfabric names after this provider. */
static int prov_attr_only(struct fi_info **info)
{
	struct fi_info *i = fi_allocinfo();
	if (!i)
		return -FI_ENOMEM;
	i->fabric_attr->prov_version = FFS_PROV_VERSION;
	*info = i;
	return 0;
}

/* ask writes the query to ROOT/getinfo and reads the answer. */
static int ask(const char *query, char **answer)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/getinfo", ffs_root()) >= (int)sizeof path)
		return -FI_ENODATA;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ffs_warn("%s: %s (no fabricfs tree mounted there? FI_FABRICFS_ROOT names its root)", path,
			 strerror(errno));
		return -FI_ENODATA;
	}
	int ret = 0;
	size_t n = strlen(query);
	if (write(fd, query, n) != (ssize_t)n) {
		int err = errno;
		ret = -ffs_fi_errno(err);
		/* The text read after a failed query is the reason. */
		char why[512] = "";
		ssize_t m = pread(fd, why, sizeof why - 1, 0);
		why[m > 0 ? m : 0] = 0;
		why[strcspn(why, "\n")] = 0;
		if (err == ENODATA)
			ffs_debug("getinfo %s: %s", query, why);
		else
			ffs_warn("getinfo %s: %s (%s)", query, why, strerror(err));
	} else {
		ssize_t m = lseek(fd, 0, SEEK_SET) < 0 ? -ffs_fi_errno(errno) : ffs_read_all(fd, answer, MAX_ANSWER);
		if (m < 0)
			ret = (int)m;
	}
	close(fd);
	return ret;
}

static int ffs_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info)
{
	*info = NULL;
	if (flags & OFI_CORE_PROV_ONLY)
		return -FI_ENODATA;
	if (flags & FI_PROV_ATTR_ONLY)
		return prov_attr_only(info);
	struct request r;
	int ret = request_init(&r, version, hints);
	if (ret)
		return ret;

	struct query q = { .len = 0 };
	/* The tree's query takes the post-1.5 mr_mode rules only; the
	 * legacy ones are applied here. */
	uint32_t v = version < FI_VERSION(1, 5) ? FI_VERSION(1, 5) : version;
	char buf[32];
	snprintf(buf, sizeof buf, "%u.%u", FI_MAJOR(v), FI_MINOR(v));
	add(&q, "--version", buf);
	/* The fi_getinfo flags the tree knows; libfabric passes internal
	 * ones of its own too. */
	uint64_t f = flags & (FI_SOURCE | FI_NUMERICHOST);
	if (!node && !service)
		f &= ~FI_SOURCE; /* nothing for it to qualify */

	/* node and service go to the tree. The hints addresses they leave
	 * in force (src_addr "will be ignored in hints if FI_SOURCE flag is
	 * set", dest_addr "unless the node and service parameters are NULL")
	 * go too while the query has room (one node), or are applied here. */
	struct ip src = { 0 }, dst = { 0 };
	bool use_src = hints && !(f & FI_SOURCE), use_dst = hints && ((f & FI_SOURCE) || (!node && !service));
	if ((use_src && (ret = hints_ip(hints, hints->src_addr, hints->src_addrlen, &src))) ||
	    (use_dst && (ret = hints_ip(hints, hints->dest_addr, hints->dest_addrlen, &dst))))
		return ret;
	if (node || service) {
		if (node)
			add(&q, "-n", node);
		if (service)
			add(&q, "-P", service);
		r.src = src;
		r.dst = dst;
	} else if (dst.family || src.family) {
		const struct ip *a = dst.family ? &dst : &src;
		char ip[INET6_ADDRSTRLEN];
		ip_text(a, ip, sizeof ip);
		add(&q, "-n", ip);
		addf(&q, "-P", "%llu", a->port);
		if (dst.family)
			r.src = src;
		else
			f |= FI_SOURCE;
	}
	if (f)
		addf(&q, "--flags", "0x%llx", f);

	if (hints) {
		/* The tree checks tx/rx modes against this one; tx/rx mode
		 * hints of their own are checked here, as is the fi_info mode
		 * itself then. */
		uint64_t mode = hints->mode | (hints->tx_attr ? hints->tx_attr->mode : 0) |
				(hints->rx_attr ? hints->rx_attr->mode : 0);
		addf(&q, "-m", "0x%llx", mode);
		if (hints->caps)
			addf(&q, "-c", "0x%llx", hints->caps);
		if (hints->addr_format)
			addf(&q, "-a", "%llu", hints->addr_format);
		if (hints->ep_attr && hints->ep_attr->type)
			addf(&q, "-t", "%llu", hints->ep_attr->type);
		/* Names are "PROV/NAME": the tree's provider and its own name.
		 * hints prov_name is not passed: libfabric's "fabricfs" (or a
		 * layering over it) is not a provider of the tree. */
		char prov[64] = "";
		const char *name;
		if (hints->domain_attr && hints->domain_attr->name && *hints->domain_attr->name) {
			if (!name_prov(hints->domain_attr->name, prov, sizeof prov, &name))
				return -FI_ENODATA;
			add(&q, "-d", name);
		}
		if (hints->fabric_attr && hints->fabric_attr->name && *hints->fabric_attr->name) {
			if (!name_prov(hints->fabric_attr->name, prov, sizeof prov, &name))
				return -FI_ENODATA;
			add(&q, "-f", name);
		}
		if (*prov)
			add(&q, "-p", prov);
	}
	if (q.bad)
		return -FI_ENODATA;

	char *answer = NULL;
	if ((ret = ask(q.text, &answer)))
		return ret;
	struct fi_info *list;
	ret = ffs_info_parse(answer, &list);
	if (ret) {
		ffs_warn("getinfo %s: the tree's answer does not parse (%s)", q.text, fi_strerror(-ret));
		free(answer);
		return ret;
	}
	free(answer);

	/* Filter and adjust; a restriction to an opened fabric of this
	 * provider is one to its name. */
	const struct fid_fabric *hfab = hints && hints->fabric_attr ? hints->fabric_attr->fabric : NULL;
	struct fi_info **tail = info;
	for (struct fi_info *e = list, *next; e; e = next) {
		next = e->next;
		e->next = NULL;
		bool keep = caps_mr(&r, e) && (!hints || attrs(&r, e));
		if (keep && hfab) {
			const struct ffs_fabric *fab = (const void *)hfab;
			keep = hfab->fid.ops == &fabric_fi_ops && !strcmp(fab->name, e->fabric_attr->name);
		}
		if (keep && (ret = addrs(&r, e, &keep))) {
			fi_freeinfo(e);
			fi_freeinfo(next);
			break;
		}
		if (!keep) {
			fi_freeinfo(e);
			continue;
		}
		/* "If hints->handle is set to struct fid_pep, the
		 * hints->handle will be copied to info->handle". */
		if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP)
			e->handle = hints->handle;
		/* libfabric names the provider of each entry (prov_name NULL). */
		free(e->fabric_attr->prov_name);
		e->fabric_attr->prov_name = NULL;
		*tail = e;
		tail = &e->next;
	}
	if (ret) {
		fi_freeinfo(*info);
		*info = NULL;
		return ret;
	}
	return *info ? 0 : -FI_ENODATA;
}

/* ---- the fabric ---- */

static int fabric_close(struct fid *fid)
{
	struct ffs_fabric *fab = (struct ffs_fabric *)fid;
	free(fab);
	return 0;
}

static int no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr, struct fid_wait **waitset)
{
	return -FI_ENOSYS;
}

static int no_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	return -FI_ENOSYS;
}

static int no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

static int no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fabric_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
};

static struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = ffs_domain_open,
	.passive_ep = ffs_pep_open,
	.eq_open = ffs_eq_open,
	.wait_open = no_wait_open,
	.trywait = no_trywait,
};

int ffs_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	/* A fabric of this provider is named "PROV/NAME" after a provider
	 * directory of the tree. */
	if (!attr || !attr->name)
		return -FI_EINVAL;
	char prov[64] = "", dir[PATH_MAX];
	const char *rest;
	struct stat st;
	if (!name_prov(attr->name, prov, sizeof prov, &rest) || !*rest || !strcmp(prov, ".") || !strcmp(prov, "..") ||
	    snprintf(dir, sizeof dir, "%s/%s", ffs_root(), prov) >= (int)sizeof dir || stat(dir, &st) ||
	    !S_ISDIR(st.st_mode))
		return -FI_ENODATA;
	struct ffs_fabric *fab = calloc(1, sizeof *fab);
	if (!fab)
		return -FI_ENOMEM;
	if (snprintf(fab->name, sizeof fab->name, "%s", attr->name) >= (int)sizeof fab->name) {
		free(fab);
		return -FI_EINVAL;
	}
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &fabric_fi_ops;
	fab->fabric_fid.ops = &fabric_ops;
	*fabric = &fab->fabric_fid;
	return 0;
}
