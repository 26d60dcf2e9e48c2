/*
 * prov.c: the provider's entry point, fi_getinfo and the fabric.
 *
 * fi_getinfo asks the tree: version, node, service and flags as options
 * of the getinfo file's query, the hints whole as its hints block
 * (fi_tostr's text, docs/tree.md), so the tree's own rules (core/fi,
 * after fi_getinfo(3)) apply every hint; the answer's entries are parsed
 * (info.c). Only what the tree cannot know is done here: this provider's
 * names and version, opened objects. docs/provider.md, "fi_getinfo".
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
	ffs_wait_stop();
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

/* ---- the query ---- */

/* nodata logs why fi_getinfo finds nothing without asking the tree
 * (FI_LOG_LEVEL=debug shows it) and returns -FI_ENODATA. */
static int nodata(const char *why, const char *what)
{
	ffs_debug("fi_getinfo: no entry: %s%s%s", why, what ? ": " : "", what ? what : "");
	return -FI_ENODATA;
}

/* A query: options, then the hints block. Bounded: fi_tostr's block is a
 * few KiB. */
struct query {
	char text[16384];
	size_t len;
	bool bad; /* a value the query cannot carry, or too long */
};

static void addf(struct query *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void addf(struct query *q, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(q->text + q->len, sizeof q->text - q->len, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)m >= sizeof q->text - q->len)
		q->bad = true;
	else
		q->len += m;
}

/* add appends "opt 'value'" (the tree's quoting: '' is a quote). */
static void add(struct query *q, const char *opt, const char *val)
{
	addf(q, "%s%s '", q->len ? " " : "", opt);
	for (const char *p = val; *p && !q->bad; p++) {
		if (*p == '\n' || *p == '\r')
			q->bad = true;
		addf(q, *p == '\'' ? "''" : "%c", *p);
	}
	addf(q, "'");
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

/* one_line: a name the block can carry (fi_tostr prints it on one line). */
static bool one_line(const char *s)
{
	return !s || !strpbrk(s, "\n\r");
}

/* lost returns the bits of x (of FI_TYPE_CAPS, FI_TYPE_OP_FLAGS or
 * FI_TYPE_MSG_ORDER) that fi_tostr prints no name for, which the block
 * cannot carry. */
static uint64_t lost(uint64_t x, enum fi_type type)
{
	uint64_t out = 0;
	for (int i = 0; i < 64; i++) {
		uint64_t bit = 1ULL << i;
		char buf[64];
		if ((x & bit) && fi_tostr_r(buf, sizeof buf, &bit, type) && !buf[0])
			out |= bit;
	}
	return out;
}

/* The comp_order bits fi_tostr names: FI_ORDER_STRICT (all of its bits
 * or none) and FI_ORDER_DATA. */
#define COMP_ORDER_NAMED (FI_ORDER_STRICT | FI_ORDER_DATA)

/* comp_order_named returns a comp_order hint as the block can carry it.
 * fi_tostr prints FI_ORDER_STRICT only when all of its bits are set, so
 * some of them alone would reach the tree as FI_ORDER_NONE, a weaker
 * request; every entry's comp_order is FI_ORDER_NONE or FI_ORDER_STRICT
 * (the answer is the same text), so an entry that has some of the bits
 * has them all: asking for FI_ORDER_STRICT selects the same entries. */
static uint64_t comp_order_named(uint64_t order)
{
	return order & FI_ORDER_STRICT ? order | FI_ORDER_STRICT : order;
}

/*
 * ffs_info_block writes an fi_info as the tree reads it in a hints block
 * (and in ep/N/info) into buf: fi_tostr of a copy that says what the tree
 * knows. What only this provider knows stays
 * out: the opened fabric, domain and passive endpoint (pointers of this
 * process), the nic, and the provider's own name and version (hints
 * prov_name is libfabric's "fabricfs" or a layering over it; the tree's
 * provider comes from the PROV/ of the names). Names lose their PROV/.
 * An address with addr_format FI_FORMAT_UNSPEC is marked FI_SOCKADDR,
 * which fi_tostr prints by its family: the tree then reads it, and
 * FI_SOCKADDR selects what FI_FORMAT_UNSPEC would among IP entries.
 * It returns -FI_ENODATA for names no entry of the tree has, and for
 * caps, op_flags and orders fi_tostr cannot name (FI_AV_USER_ID, which
 * callers take out of caps and give the tree another way, FI_PEER,
 * provider bits, FI_COMMIT_COMPLETE, FI_ORDER_DATA in msg_order): the
 * text would drop them, and every cap, op flag and order the tree offers
 * has a name. A comp_order with some of FI_ORDER_STRICT's bits is sent as
 * FI_ORDER_STRICT (comp_order_named).
 */
int ffs_info_block(const struct fi_info *hints, char *buf, size_t size)
{
	const struct fi_tx_attr *ht = hints->tx_attr;
	const struct fi_rx_attr *hr = hints->rx_attr;
	if (lost(hints->caps, FI_TYPE_CAPS) || (hints->domain_attr && lost(hints->domain_attr->caps, FI_TYPE_CAPS)) ||
	    (ht && (lost(ht->caps, FI_TYPE_CAPS) || lost(ht->op_flags, FI_TYPE_OP_FLAGS) ||
		    lost(ht->msg_order, FI_TYPE_MSG_ORDER) || (ht->comp_order & ~COMP_ORDER_NAMED))) ||
	    (hr && (lost(hr->caps, FI_TYPE_CAPS) || lost(hr->op_flags, FI_TYPE_OP_FLAGS) ||
		    lost(hr->msg_order, FI_TYPE_MSG_ORDER) || (hr->comp_order & ~COMP_ORDER_NAMED))))
		return nodata("hints caps, op_flags, msg_order or comp_order have bits fi_tostr has no name for, which no entry offers", NULL);
	struct fi_info h = *hints;
	struct fi_tx_attr t;
	struct fi_rx_attr r;
	if (ht) {
		t = *ht;
		t.comp_order = comp_order_named(t.comp_order);
		h.tx_attr = &t;
	}
	if (hr) {
		r = *hr;
		r.comp_order = comp_order_named(r.comp_order);
		h.rx_attr = &r;
	}
	struct fi_domain_attr d = { 0 };
	struct fi_fabric_attr f = { 0 };
	char prov[64] = "";
	const char *name;
	h.handle = NULL;
	h.nic = NULL;
	h.next = NULL;
	if (hints->domain_attr) {
		d = *hints->domain_attr;
		d.domain = NULL;
		h.domain_attr = &d;
		if (d.name && *d.name) {
			if (!name_prov(d.name, prov, sizeof prov, &name) || !one_line(name))
				return nodata("hints domain_attr->name is not PROV/DOMAIN of one provider", d.name);
			d.name = (char *)name;
		}
	}
	if (hints->fabric_attr) {
		f = *hints->fabric_attr;
		f.fabric = NULL;
		f.prov_version = 0;
		if (f.name && *f.name) {
			if (!name_prov(f.name, prov, sizeof prov, &name) || !one_line(name))
				return nodata("hints fabric_attr->name is not PROV/FABRIC of the domain's provider", f.name);
			f.name = (char *)name;
		}
	}
	f.prov_name = *prov ? prov : NULL;
	if (hints->fabric_attr || *prov)
		h.fabric_attr = &f;
	if (h.addr_format == FI_FORMAT_UNSPEC && (h.src_addr || h.dest_addr))
		h.addr_format = FI_SOCKADDR;
	/* An FI_ADDR_STR address is a string within its length; anything
	 * else (fabtests' -s gives a sockaddr, with length 0) names no
	 * endpoint of a named domain and is left out, as libfabric's shm
	 * makes names of what it is given. */
	if (h.addr_format == FI_ADDR_STR) {
		if (h.src_addr && (!h.src_addrlen || !memchr(h.src_addr, 0, h.src_addrlen)))
			h.src_addr = NULL, h.src_addrlen = 0;
		if (h.dest_addr && (!h.dest_addrlen || !memchr(h.dest_addr, 0, h.dest_addrlen)))
			h.dest_addr = NULL, h.dest_addrlen = 0;
	}
	if (!fi_tostr_r(buf, size, &h, FI_TYPE_INFO))
		return -FI_EINVAL;
	return 0;
}

/* add_hints appends the hints block (ffs_info_block) to the query.
 * FI_AV_USER_ID has no name in fi_tostr (1.17), so caps with it go as
 * the query's -c option, in hex, and the block's caps are left 0 (a hint
 * two ways is refused): the tree then answers only entries that have
 * it. */
static int add_hints(struct query *q, const struct fi_info *hints)
{
	char buf[8192];
	struct fi_info h = *hints;
	if (h.caps & FI_AV_USER_ID) {
		addf(q, " -c 0x%llx", (unsigned long long)h.caps);
		h.caps = 0;
	}
	int ret = ffs_info_block(&h, buf, sizeof buf);
	if (!ret)
		addf(q, "\n%s", buf);
	return ret;
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

/* listed says whether FI_FABRICFS_DOMAIN, a comma-separated list of
 * PROV/DOMAIN names, lists the domain name; unset or empty, it lists every
 * domain of the tree. */
static bool listed(const char *name)
{
	const char *l = getenv("FI_FABRICFS_DOMAIN");
	if (!l || !*l)
		return true;
	size_t n = strlen(name);
	for (;;) {
		size_t len = strcspn(l, ",");
		if (len == n && !strncmp(l, name, n))
			return true;
		if (!l[len])
			return false;
		l += len + 1;
	}
}

/* ask writes the query to ROOT/getinfo and reads the answer. */
static int ask(const char *query, char **answer)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/getinfo", ffs_root()) >= (int)sizeof path)
		return nodata("FI_FABRICFS_ROOT is too long", NULL);
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

/* copy_key gives an entry whose key has size bytes (the tree's answer)
 * the hints' key of that size: -FI_ENOMEM when it cannot. */
static int copy_key(uint8_t **dst, size_t size, const uint8_t *key, size_t key_size)
{
	if (!size || *dst || !key || key_size != size)
		return 0;
	if (!(*dst = malloc(size)))
		return -FI_ENOMEM;
	memcpy(*dst, key, size);
	return 0;
}

static int ffs_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info)
{
	*info = NULL;
	if (flags & OFI_CORE_PROV_ONLY)
		return nodata("a utility provider's request for core providers (the tree layers its own)", NULL);
	if (flags & FI_PROV_ATTR_ONLY)
		return prov_attr_only(info);
	/* The tree knows every hint but this provider's version and its
	 * opened objects: an opened domain "restrict[s] output to the given
	 * domain" (fi_domain(3)), which must be one of this provider's. */
	if (hints && hints->fabric_attr && hints->fabric_attr->prov_version > FFS_PROV_VERSION)
		return nodata("hints fabric_attr->prov_version is above this provider's 1.0", NULL);
	struct fid_domain *hdom = hints && hints->domain_attr ? hints->domain_attr->domain : NULL;
	const struct ffs_domain *dom = ffs_domain_of(hdom);
	if (hdom && !dom)
		return nodata("hints domain_attr->domain is not a domain of this provider", NULL);

	struct query q = { .len = 0 };
	addf(&q, "--version %u.%u", FI_MAJOR(version), FI_MINOR(version));
	/* The fi_getinfo flags the tree knows; libfabric passes internal
	 * ones of its own too. */
	uint64_t f = flags & (FI_SOURCE | FI_NUMERICHOST);
	if (!node && !service)
		f &= ~FI_SOURCE; /* nothing for it to qualify */
	if (f)
		addf(&q, " --flags 0x%llx", (unsigned long long)f);
	if (node)
		add(&q, "-n", node);
	if (service)
		add(&q, "-P", service);
	int ret = 0;
	if (hints && (ret = add_hints(&q, hints)))
		return ret;
	if (q.bad)
		return nodata("a node, service or hint the query cannot carry (a line break, or too long)", NULL);

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

	/* A restriction to an opened fabric or domain of this provider is
	 * one to its name; FI_FABRICFS_DOMAIN restricts to its names. */
	const struct fid_fabric *hfab = hints && hints->fabric_attr ? hints->fabric_attr->fabric : NULL;
	struct fi_info **tail = info;
	for (struct fi_info *e = list, *next; e; e = next) {
		next = e->next;
		e->next = NULL;
		if (hfab && (hfab->fid.ops != &fabric_fi_ops ||
			     strcmp(((const struct ffs_fabric *)hfab)->name, e->fabric_attr->name))) {
			fi_freeinfo(e);
			continue;
		}
		if ((dom && strcmp(dom->info->domain_attr->name, e->domain_attr->name)) ||
		    !listed(e->domain_attr->name)) {
			fi_freeinfo(e);
			continue;
		}
		/* An opened domain: "On output from fi_getinfo, if no domain
		 * was specified, but the user has an opened instance of the
		 * named domain, this will reference the first opened
		 * instance" (fi_domain(3)); one specified is the one. */
		e->domain_attr->domain = hdom ? hdom : ffs_domain_opened(e->domain_attr->name);
		/* FI_AV_USER_ID: asked for (add_hints), the tree answered
		 * only entries that have it, which its text cannot say. */
		if (hints && (hints->caps & FI_AV_USER_ID))
			e->caps |= FI_AV_USER_ID;
		/* "If hints->handle is set to struct fid_pep, the
		 * hints->handle will be copied to info->handle". */
		if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP)
			e->handle = hints->handle;
		/* Keys: a tree domain serves every process of the host, so keys
		 * two processes request (fabtests' 0xc0de on both sides) would
		 * collide there, where each would have a domain of its own with
		 * libfabric's tcp. An application that lets the provider choose
		 * keys (FI_MR_PROV_KEY in its hints' mr_mode, API 1.5 and later)
		 * gets them chosen: the tree makes each region a random key. */
		if (FI_VERSION_GE(version, FI_VERSION(1, 5)) && hints && hints->domain_attr &&
		    (hints->domain_attr->mr_mode & FI_MR_PROV_KEY))
			e->domain_attr->mr_mode |= FI_MR_PROV_KEY;
		/* libfabric names the provider of each entry (prov_name NULL). */
		free(e->fabric_attr->prov_name);
		e->fabric_attr->prov_name = NULL;
		/* Authorization keys: the tree's answer has the requested keys'
		 * sizes (fi_tostr prints no key bytes); each entry carries the
		 * hints' keys themselves, for the objects made from it. */
		if (FI_VERSION_GE(version, FI_VERSION(1, 5)) && hints &&
		    (copy_key(&e->ep_attr->auth_key, e->ep_attr->auth_key_size,
			      hints->ep_attr ? hints->ep_attr->auth_key : NULL,
			      hints->ep_attr ? hints->ep_attr->auth_key_size : 0) ||
		     copy_key(&e->domain_attr->auth_key, e->domain_attr->auth_key_size,
			      hints->domain_attr ? hints->domain_attr->auth_key : NULL,
			      hints->domain_attr ? hints->domain_attr->auth_key_size : 0))) {
			fi_freeinfo(e);
			fi_freeinfo(next);
			fi_freeinfo(*info);
			*info = NULL;
			return -FI_ENOMEM;
		}
		*tail = e;
		tail = &e->next;
	}
	if (!*info)
		return nodata("no entry of the tree is of the opened fabric or domain in the hints and in FI_FABRICFS_DOMAIN",
			      getenv("FI_FABRICFS_DOMAIN"));
	return 0;
}

/* ---- the fabric ---- */

static int fabric_close(struct fid *fid)
{
	struct ffs_fabric *fab = (struct ffs_fabric *)fid;
	free(fab);
	return 0;
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
	.wait_open = ffs_wait_open,
	.trywait = ffs_trywait,
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
