/*
 * ep.c: active endpoints. An endpoint is a tree ep (ep/N): a clone object,
 * or, for a connection request, the endpoint the tree made, adopted. Data
 * operations become work requests on its tx and rx rings (docs/abi.md).
 *
 * Application buffers are not daemon memory. A buffer inside a registered
 * region (ffs_mr_lookup) goes to the daemon as it is (zero copy); any
 * other goes through one of the endpoint's two staging regions (tree mrs
 * of STAGE_SIZE, one for sends, one for receives): a send copies in before
 * posting, a receive's bytes are copied out when its completion is reaped,
 * before the application sees it. A message larger than a staging region
 * gets a temporary region of its own (a few per endpoint, reused). Every
 * work request but an inject asks for a completion (FI_COMPLETION, the
 * tree CQs being bound `selective`), because the provider has its part to
 * do at the end of each; whether the application sees the entry is the
 * request's own flag. A work request's context is the provider's request
 * record, mapped back in ffs_ep_complete. Atomics (atomic.c) are posted
 * here too: the operand and compare values go out like a send's bytes,
 * in one region; a fetch's result comes back like a read's.
 *
 * A shared receive context (fi_srx_context, srx.c) is an ffs_ep too, of
 * the tree kind srx: its receives go on the context's rx ring (srx/N/rx)
 * with its own staging and request records, and complete on the CQ of the
 * endpoint the message arrived at, where ffs_ep_complete maps them back to
 * the context's records as any request. It has no tx ring: its send and
 * RMA calls fail. An endpoint bound to one posts no receives of its own.
 */
#include "ffs.h"

#include <arpa/inet.h>
#include <sched.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define STAGE_SIZE (4u << 20)
#define CHUNK 256 /* the staging allocator's unit */
#define NCHUNK (STAGE_SIZE / CHUNK)
#define MAX_TEMP 4          /* temporary regions per endpoint */
#define TEMP_ROUND (1u << 20) /* their sizes are multiples of this */
#define MAX_IOV 16          /* iovecs a request may have; beyond the tree's iov_limit (4) they are staged */
/* How long fi_close of an endpoint waits for the daemon to close it and
 * give back the requests it held (cancelled). */
#define CLOSE_DRAIN_MS 2000

/* A region of the provider's own: a tree mr mapped whole. */
struct region {
	struct ffs_obj obj;
	uint8_t *map;
	size_t len;
	uint64_t desc;
};

struct stage {
	struct region r;
	uint64_t used[NCHUNK / 64]; /* a bit per CHUNK */
	size_t hint;                /* where the next search starts */
};

struct temp {
	struct region r;
	bool busy;
};

enum where { IN_APP, IN_STAGE, IN_TEMP };

struct ffs_req {
	struct ffs_ep *ep;
	void *context; /* the application's */
	bool in_use, incoming, report, multi; /* incoming: bytes arrive in the buffer */
	enum where where;
	struct iovec iov[MAX_IOV]; /* the application's buffer */
	size_t iov_count;
	uint64_t off; /* the buffer's offset in its tree region */
	size_t len;
	struct stage *st; /* IN_STAGE: chunks [chunk, chunk+nchunk) of st */
	size_t chunk, nchunk;
	struct temp *tmp; /* IN_TEMP */
	struct fabricfs_ring *ring; /* the ring it went on, at index idx */
	uint32_t idx;
	/* A request in the segment-array form: its array, in chunks
	 * [schunk, schunk+snchunk) of stx, kept until its completion. */
	bool segs;
	size_t schunk, snchunk;
	/* A fetch or compare atomic whose result buffer is staged: its
	 * len bytes come back in chunks [rchunk, rchunk+rnchunk) of srx and
	 * are copied to result at completion. NULL otherwise. */
	void *result;
	size_t rchunk, rnchunk;
	struct ffs_req *next_free;
};

/* The reports of buffered receives the tree has unclaimed at once per
 * endpoint (core.BufferedSlots, docs/abi.md). */
#define FFS_BUFFERED_SLOTS 64

/* A buffered receive's report as the application has it (buffered
 * receives, below): its struct fi_recv_context and the tree's claim key. */
struct ffs_brecv {
	struct fi_recv_context rc;
	uint64_t key;
	bool in_use;
};

/* An inject's staging, freed once the daemon took the request. */
struct inject {
	uint32_t idx; /* its tx ring index */
	size_t chunk, nchunk;
};

struct ffs_ep {
	struct fid_ep ep_fid;
	struct ffs_domain *dom;
	struct fi_info *info;
	struct ffs_obj obj;
	struct ffs_connreq *connreq; /* adopted from it; rmdir closes the endpoint */
	pthread_mutex_t lock;
	enum fi_ep_type type;
	uint64_t caps, tx_op_flags, rx_op_flags;
	struct ffs_cq *txcq, *rxcq, *hidden;
	bool tx_sel, rx_sel, hidden_bound;
	struct ffs_eq *eq;
	bool is_srx;            /* a shared receive context, not an endpoint */
	bool is_alias;          /* fi_ep_alias's: the tree enabled it as it made it */
	int srx_bound;          /* is_srx: endpoints bound to it (atomic); fi_close is -FI_EBUSY until 0 */
	struct ffs_ep *srx_ctx; /* the shared receive context bound, if any */
	bool enabled, closing;
	struct fabricfs_ring tx, rx;
	struct stage stx, srx;
	struct temp temps[MAX_TEMP];
	struct ffs_req *reqs, *free;
	size_t nreq, outstanding;
	size_t out[2]; /* outstanding on tx, on rx */
	struct inject *inj; /* a circular queue of tx.count */
	size_t inj_head, inj_len;
	size_t inject_size, max_msg_size;
	/* FI_BUFFERED_RECV (buffered receives, below): the endpoint's
	 * attr/desc, its buffered file mapped (blen bytes, slots of bslot),
	 * and a record per report the tree may have unclaimed at once. */
	bool buffered;
	uint64_t bdesc;
	uint8_t *bmap;
	size_t blen, bslot;
	struct ffs_brecv brecv[FFS_BUFFERED_SLOTS];
};

/* ---- addresses and private data ---- */

int ffs_name_get(struct ffs_obj *o, const char *file, void *addr, size_t *addrlen)
{
	char text[256];
	ssize_t n = ffs_get(o, file, text, sizeof text);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -FI_EOPBADSTATE;
	size_t name = ffs_name_len(text, sizeof text);
	if (name) {
		/* The shm domain's names are FI_ADDR_STR: the string is the
		 * address, its NUL included. */
		size_t room = *addrlen;
		*addrlen = name;
		if (!addr || room < name)
			return -FI_ETOOSMALL;
		memcpy(addr, text, name);
		return 0;
	}
	void *sa;
	int ret = ffs_addr_parse(FI_SOCKADDR, text, sizeof(struct sockaddr_in6), &sa);
	if (ret)
		return ret;
	size_t need = ((struct sockaddr *)sa)->sa_family == AF_INET ? sizeof(struct sockaddr_in)
								      : sizeof(struct sockaddr_in6);
	size_t room = *addrlen;
	*addrlen = need;
	if (addr && room >= need)
		memcpy(addr, sa, need);
	else
		ret = -FI_ETOOSMALL;
	free(sa);
	return ret;
}

unsigned ffs_sockaddr_port(const void *addr)
{
	sa_family_t family;
	memcpy(&family, addr, sizeof family);
	if (family == AF_INET)
		return ntohs(((const struct sockaddr_in *)addr)->sin_port);
	if (family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
	return 0;
}

size_t ffs_sockaddr_len(const void *addr, size_t room)
{
	sa_family_t family;
	if (room < sizeof family)
		return 0;
	memcpy(&family, addr, sizeof family);
	size_t n = family == AF_INET ? sizeof(struct sockaddr_in) : family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
	return n <= room ? n : 0;
}

int ffs_addr_format(const void *addr, size_t addrlen, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];
	size_t name = ffs_name_len(addr, addrlen);
	if (name) {
		if (name > size)
			return -FI_EINVAL;
		memcpy(buf, addr, name);
		return 0;
	}
	if (!addr || addrlen < sizeof(sa_family_t))
		return -FI_EINVAL;
	sa_family_t family;
	memcpy(&family, addr, sizeof family);
	int n;
	if (family == AF_INET && addrlen >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in sa;
		memcpy(&sa, addr, sizeof sa);
		inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
		n = snprintf(buf, size, "%s:%u", host, ntohs(sa.sin_port));
	} else if (family == AF_INET6 && addrlen >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 sa;
		memcpy(&sa, addr, sizeof sa);
		inet_ntop(AF_INET6, &sa.sin6_addr, host, sizeof host);
		n = snprintf(buf, size, "[%s]:%u", host, ntohs(sa.sin6_port));
	} else {
		return -FI_EINVAL;
	}
	return n < 0 || (size_t)n >= size ? -FI_EINVAL : 0;
}

int ffs_hex_data(const void *data, size_t len, char *buf, size_t size)
{
	if (len > FFS_CM_DATA_SIZE || (len && !data) || size < 5 + 2 * len)
		return -FI_EINVAL;
	if (!len) {
		buf[0] = 0;
		return 0;
	}
	static const char digits[] = "0123456789abcdef";
	const uint8_t *d = data;
	memcpy(buf, "hex:", 4);
	for (size_t i = 0; i < len; i++) {
		buf[4 + 2 * i] = digits[d[i] >> 4];
		buf[5 + 2 * i] = digits[d[i] & 15];
	}
	buf[4 + 2 * len] = 0;
	return 0;
}

int ffs_auth_key(struct ffs_obj *o, const struct fi_domain_attr *dom, const uint8_t *key, size_t size)
{
	if (!size && dom) {
		key = dom->auth_key;
		size = dom->auth_key_size;
	}
	if (!size)
		return 0;
	if (!key || size > FFS_AUTH_KEY_SIZE)
		return -FI_EINVAL;
	char word[5 + 2 * FFS_AUTH_KEY_SIZE];
	int ret = ffs_hex_data(key, size, word, sizeof word);
	return ret ? ret : ffs_set(o, "attr/auth_key", "%s", word);
}

/* ---- regions and the staging allocator ---- */

static int region_make(struct ffs_domain *dom, size_t len, struct region *r)
{
	int ret = ffs_obj_clone(&r->obj, dom->dir, "mr");
	if (ret)
		return ret;
	if ((ret = ffs_set(&r->obj, "attr/len", "%zu", len)) || (ret = ffs_ctl(&r->obj, "reg")) ||
	    (ret = ffs_get_u64(&r->obj, "attr/desc", &r->desc)))
		goto fail;
	r->map = ffs_map(&r->obj, "data", &r->len);
	if (!r->map) {
		ret = -ffs_fi_errno(errno);
		goto fail;
	}
	if (r->len < len) {
		ret = -FI_EIO;
		munmap(r->map, r->len);
		r->map = NULL;
		goto fail;
	}
	return 0;
fail:
	ffs_obj_close(&r->obj);
	return ret;
}

/* region_free frees a region region_make made (and nothing else: a
 * zeroed region's ctl 0 is no descriptor of its own). */
static void region_free(struct region *r)
{
	if (!r->map)
		return;
	munmap(r->map, r->len);
	r->map = NULL;
	ffs_obj_close(&r->obj);
}

static bool chunk_used(const struct stage *s, size_t i)
{
	return s->used[i / 64] >> (i % 64) & 1;
}

static void mark(struct stage *s, size_t from, size_t n, bool used)
{
	for (size_t i = from; i < from + n; i++) {
		if (used)
			s->used[i / 64] |= 1ull << (i % 64);
		else
			s->used[i / 64] &= ~(1ull << (i % 64));
	}
}

/* find_run finds n free chunks in a row within [from, to). */
static long find_run(const struct stage *s, size_t from, size_t to, size_t n)
{
	size_t run = 0;
	for (size_t i = from; i < to; i++) {
		if (i % 64 == 0 && i + 64 <= to && s->used[i / 64] == ~0ull) {
			run = 0;
			i += 63;
			continue;
		}
		if (chunk_used(s, i))
			run = 0;
		else if (++run == n)
			return (long)(i + 1 - n);
	}
	return -1;
}

/* stage_alloc takes room for len bytes: the first chunk, or -1 when full. */
static long stage_alloc(struct stage *s, size_t len, size_t *nchunk)
{
	size_t n = len ? (len + CHUNK - 1) / CHUNK : 1;
	long c = find_run(s, s->hint, NCHUNK, n);
	if (c < 0)
		c = find_run(s, 0, NCHUNK, n);
	if (c < 0)
		return -1;
	mark(s, c, n, true);
	s->hint = (c + n) % NCHUNK;
	*nchunk = n;
	return c;
}

/* get_temp gives a free temporary region of at least len bytes. */
static struct temp *get_temp(struct ffs_ep *ep, size_t len, int *err)
{
	struct temp *spare = NULL;
	for (int i = 0; i < MAX_TEMP; i++) {
		struct temp *t = &ep->temps[i];
		if (t->busy)
			continue;
		if (t->r.map && t->r.len >= len) {
			t->busy = true;
			return t;
		}
		if (!spare || !t->r.map)
			spare = t;
	}
	if (!spare) {
		*err = -FI_EAGAIN; /* all busy: the application reaps and retries */
		return NULL;
	}
	region_free(&spare->r);
	size_t size = (len + TEMP_ROUND - 1) / TEMP_ROUND * TEMP_ROUND;
	if ((*err = region_make(ep->dom, size, &spare->r)))
		return NULL;
	spare->busy = true;
	return spare;
}

static void gather(const struct iovec *iov, size_t count, uint8_t *dst)
{
	for (size_t i = 0; i < count; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

/* scatter copies len bytes of src into the iovecs from byte off on. */
static void scatter(const struct iovec *iov, size_t count, size_t off, const uint8_t *src, size_t len)
{
	for (size_t i = 0; i < count && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy((uint8_t *)iov[i].iov_base + off, src, n);
		src += n;
		len -= n;
		off = 0;
	}
}

/* region_of is the mapping a request's buffer is in (NULL: the application's). */
static uint8_t *region_of(const struct ffs_req *r)
{
	switch (r->where) {
	case IN_STAGE:
		return r->st->r.map;
	case IN_TEMP:
		return r->tmp->r.map;
	default:
		return NULL;
	}
}

/* release frees what a request held and the request. Under ep->lock. */
static void release(struct ffs_ep *ep, struct ffs_req *r)
{
	if (r->where == IN_STAGE)
		mark(r->st, r->chunk, r->nchunk, false);
	else if (r->where == IN_TEMP)
		r->tmp->busy = false;
	if (r->result)
		mark(&ep->srx, r->rchunk, r->rnchunk, false);
	if (r->segs)
		mark(&ep->stx, r->schunk, r->snchunk, false);
	r->result = NULL;
	r->segs = false;
	r->in_use = false;
	r->next_free = ep->free;
	ep->free = r;
	ep->outstanding--;
	ep->out[r->ring == &ep->rx]--;
}

/* reclaim_injects frees the staging of injects the daemon has taken. */
static void reclaim_injects(struct ffs_ep *ep)
{
	uint32_t head = fabricfs_load_acquire(ep->tx.head);
	while (ep->inj_len) {
		struct inject *in = &ep->inj[ep->inj_head];
		if ((int32_t)(head - in->idx) <= 0)
			break;
		mark(&ep->stx, in->chunk, in->nchunk, false);
		ep->inj_head = (ep->inj_head + 1) % ep->tx.count;
		ep->inj_len--;
	}
}

/* ---- buffered receives ---- */

/*
 * FI_BUFFERED_RECV (fi_msg(3), "Buffered Receives") on FI_EP_RDM: the tree
 * reports every message at once on the receive CQ, with a claim key as
 * op_context, the endpoint's attr/desc as desc and the message's first
 * bytes at buf in the endpoint's buffered file (docs/abi.md). The report
 * the application reads has a struct fi_recv_context of the endpoint's as
 * op_context ("the CQ entry op_context will point to a struct
 * fi_recv_context. ... The `ep' field will point to the receiving endpoint
 * or Rx context, and `context' will be NULL"), a record holding the key,
 * and buf pointing into the mapped file. A receive with FI_CLAIM or
 * FI_DISCARD whose context is that structure goes to the tree with the key
 * and completes with the context the application put there. The tree has
 * at most FFS_BUFFERED_SLOTS reports unclaimed at once per endpoint, so a
 * record each is enough; a record is free again once its claim or discard
 * is posted ("Once a buffered receive has been claimed or discarded, the
 * original CQ entry `buf' or struct fi_recv_context data may no longer be
 * accessed by the application").
 */

/* buffered_report turns c, if it is a report of an endpoint of dom with
 * FI_BUFFERED_RECV (its desc is one's), into the application's entry e;
 * *show: the application gets it (not for a closing endpoint). False: c
 * is no report. */
static bool buffered_report(struct ffs_domain *dom, const struct fabricfs_cqe *c, struct ffs_cq_entry *e, bool *show)
{
	if (!c->desc || !__atomic_load_n(&dom->nbeps, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&dom->bep_lock);
	size_t i = 0;
	while (i < dom->nbeps && dom->beps[i].desc != c->desc)
		i++;
	if (i == dom->nbeps) {
		pthread_mutex_unlock(&dom->bep_lock);
		return false;
	}
	struct ffs_ep *ep = dom->beps[i].ep;
	*show = false;
	if (ep) {
		pthread_mutex_lock(&ep->lock);
		struct ffs_brecv *b = NULL;
		for (size_t k = 0; k < FFS_BUFFERED_SLOTS && !b; k++)
			if (!ep->brecv[k].in_use)
				b = &ep->brecv[k];
		if (!b)
			ffs_warn("%s: a buffered report while %d are unclaimed; dropped", ep->obj.dir, FFS_BUFFERED_SLOTS);
		else if (!ep->closing) {
			b->in_use = true;
			b->key = c->op_context;
			b->rc.ep = &ep->ep_fid;
			b->rc.context = NULL;
			e->op_context = &b->rc;
			if (ep->bmap && c->buf <= ep->blen && ep->bslot <= ep->blen - c->buf)
				e->buf = ep->bmap + c->buf;
			*show = true;
		}
		pthread_mutex_unlock(&ep->lock);
	}
	pthread_mutex_unlock(&dom->bep_lock);
	return true;
}

/* buffered_add notes ep, an endpoint with FI_BUFFERED_RECV not yet shared,
 * in its domain's list, by its attr/desc. */
static int buffered_add(struct ffs_ep *ep)
{
	int ret = ffs_get_u64(&ep->obj, "attr/desc", &ep->bdesc);
	if (ret)
		return ret;
	struct ffs_domain *dom = ep->dom;
	pthread_mutex_lock(&dom->bep_lock);
	if (dom->nbeps == dom->capbeps) {
		size_t cap = dom->capbeps ? 2 * dom->capbeps : 8;
		struct ffs_bep *b = realloc(dom->beps, cap * sizeof *b);
		if (!b) {
			pthread_mutex_unlock(&dom->bep_lock);
			return -FI_ENOMEM;
		}
		dom->beps = b;
		dom->capbeps = cap;
	}
	dom->beps[dom->nbeps] = (struct ffs_bep){.desc = ep->bdesc, .ep = ep};
	__atomic_store_n(&dom->nbeps, dom->nbeps + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&dom->bep_lock);
	ep->buffered = true;
	return 0;
}

/* buffered_forget leaves ep's desc in the list without it: its reports
 * still in a ring are dropped from now on. */
static void buffered_forget(struct ffs_ep *ep)
{
	struct ffs_domain *dom = ep->dom;
	pthread_mutex_lock(&dom->bep_lock);
	for (size_t i = 0; i < dom->nbeps; i++)
		if (dom->beps[i].ep == ep)
			dom->beps[i].ep = NULL;
	pthread_mutex_unlock(&dom->bep_lock);
}

/* buffered_map maps the endpoint's buffered file after enable (under its
 * lock): slots of FI_OPT_BUFFERED_LIMIT bytes, none with a limit of 0. */
static int buffered_map(struct ffs_ep *ep)
{
	uint64_t limit;
	int ret = ffs_get_u64(&ep->obj, "attr/opt_buffered_limit", &limit);
	if (ret)
		return ret;
	ep->bslot = limit;
	if (!limit)
		return 0;
	size_t size;
	void *m = ffs_map(&ep->obj, "buffered", &size);
	if (!m)
		return -ffs_fi_errno(errno);
	ep->bmap = m;
	ep->blen = size;
	return 0;
}

static ssize_t post(struct ffs_ep *ep, const struct ffs_op *o);

/* post_claim posts o, a receive with FI_CLAIM or FI_DISCARD (without
 * FI_PEEK) on an endpoint with FI_BUFFERED_RECV: its context is the
 * struct fi_recv_context of a report ("The struct fi_recv_context returned
 * as part of the notification must be provided as the receive operation's
 * context"), whose key goes to the tree; the receive completes with the
 * structure's context ("The `context' of the associated CQ entry will be
 * set to the `context' value passed in through the fi_recv_context
 * structure"). A discard's buffers are ignored ("When the FI_DISCARD flag
 * is set for a receive operation, the receive input buffer(s) and length
 * parameters are ignored"). */
static ssize_t post_claim(struct ffs_ep *ep, struct ffs_op *o)
{
	struct fi_recv_context *rc = o->context;
	struct ffs_brecv *b = NULL;
	pthread_mutex_lock(&ep->lock);
	for (size_t k = 0; k < FFS_BUFFERED_SLOTS && !b; k++)
		if (ep->brecv[k].in_use && &ep->brecv[k].rc == rc)
			b = &ep->brecv[k];
	if (b) {
		o->rma_key = b->key;
		o->context = rc->context;
	}
	pthread_mutex_unlock(&ep->lock);
	if (!b)
		return -FI_EINVAL; /* no report's structure, or claimed already */
	if (o->flags & FI_DISCARD)
		o->count = 0;
	ssize_t ret = post(ep, o);
	if (!ret) {
		pthread_mutex_lock(&ep->lock);
		b->in_use = false;
		pthread_mutex_unlock(&ep->lock);
	}
	return ret;
}

/* claims says whether a receive with flags on ep takes a buffered
 * message (post_claim). */
static bool claims(const struct ffs_ep *ep, uint64_t flags)
{
	return ep->buffered && (flags & (FI_CLAIM | FI_DISCARD)) && !(flags & FI_PEEK);
}

/* ---- completions ---- */

bool ffs_ep_complete(struct ffs_domain *dom, const struct fabricfs_cqe *c, struct ffs_cq_entry *e)
{
	memset(e, 0, offsetof(struct ffs_cq_entry, errline) + 1);
	e->flags = c->flags;
	e->len = c->len;
	e->data = c->data;
	e->tag = c->tag;
	e->src_addr = c->src_addr;
	e->err = c->err;
	e->prov_errno = c->prov_errno;
	e->olen = c->olen;
	bool report_shown;
	if (buffered_report(dom, c, e, &report_shown))
		return report_shown;
	struct ffs_req *r = (struct ffs_req *)(uintptr_t)c->op_context;
	if (!r) {
		/* No request of ours: an inject's error, a peer's write with
		 * remote CQ data, an overrun. */
		return c->err != 0 || (c->flags & FI_REMOTE_CQ_DATA);
	}
	struct ffs_ep *ep = r->ep;
	pthread_mutex_lock(&ep->lock);
	e->op_context = r->context;
	bool show = !ep->closing && (r->report || c->err);
	if (r->incoming && (c->flags & (FI_RECV | FI_READ))) {
		/* Where this message lies in the request's buffer: a multi-recv
		 * buffer takes several, each at its own place. */
		uint64_t rel = c->buf >= r->off ? c->buf - r->off : 0;
		size_t n = c->len;
		if (rel > r->len)
			rel = r->len;
		if (n > r->len - rel)
			n = r->len - rel;
		uint8_t *m = region_of(r);
		if (m && !ep->closing && n)
			scatter(r->iov, r->iov_count, rel, m + c->buf, n);
		if (r->iov_count > 0 && rel < r->iov[0].iov_len)
			e->buf = (uint8_t *)r->iov[0].iov_base + rel;
	}
	/* A staged atomic result: the target's values from before the
	 * operation, in the application's buffer before it sees the entry
	 * (fi_atomic(3): "Any results returned to the initiator as part of an
	 * atomic operation will be available prior to a completion event"). */
	if (r->result && !c->err && !ep->closing)
		memcpy(r->result, ep->srx.r.map + r->rchunk * CHUNK, r->len);
	/* err_data: the tree's sentence (the endpoint's err, which keeps the
	 * last) for a failure it explains; none for a cancelled or truncated
	 * operation, as libfabric's providers give none: an application may
	 * pass fi_cq_readerr an entry whose err_data it never set. */
	if (c->err == -FI_EADDRNOTAVAIL) {
		/* FI_SOURCE_ERR: the message arrived; err_data is its sender's
		 * address (docs/abi.md), for fi_av_insert. */
		e->addrlen = ffs_sockaddr_len(c->err_data, sizeof c->err_data);
		memcpy(e->errline, c->err_data, e->addrlen);
	} else if (c->err && c->err != -FI_ECANCELED && c->err != -FI_ETRUNC && !ep->closing)
		ffs_get(&ep->obj, "err", e->errline, sizeof e->errline);
	bool last = !r->multi || (c->flags & FI_MULTI_RECV) || (c->err && c->err != -FI_EADDRNOTAVAIL);
	if (last)
		release(ep, r);
	pthread_mutex_unlock(&ep->lock);
	return show;
}

/* ---- posting ---- */

/* post is every data operation. */
static ssize_t post(struct ffs_ep *ep, const struct ffs_op *o)
{
	bool on_rx = o->op == FABRICFS_OP_RECV || o->op == FABRICFS_OP_TRECV;
	/* Bytes that arrive into the buffer: copied out of staging at the end. */
	bool incoming = on_rx || o->op == FABRICFS_OP_READ;
	if (ep->is_srx && !on_rx)
		return -FI_ENOSYS; /* a receive context only receives */
	if (on_rx && ep->srx_ctx)
		return -FI_EOPNOTSUPP; /* receives go to the shared context (fi_endpoint(3)) */
	/* A scalable endpoint's transmit context only sends, its receive
	 * context only receives (sep.c). */
	if (on_rx ? ep->ep_fid.fid.fclass == FI_CLASS_TX_CTX : ep->ep_fid.fid.fclass == FI_CLASS_RX_CTX)
		return -FI_EOPNOTSUPP;
	/* Atomics: a fetch or compare atomic's result comes back like a
	 * read's bytes; the compare values go in the operand's region (a
	 * work request has one desc for both); FI_ATOMIC_READ has no operand,
	 * and the work request names the result's bytes for it. */
	bool atomic = o->op >= FABRICFS_OP_ATOMIC;
	bool fetch = o->op == FABRICFS_OP_FETCH_ATOMIC || o->op == FABRICFS_OP_COMPARE_ATOMIC;
	bool compare = o->op == FABRICFS_OP_COMPARE_ATOMIC;
	bool no_operand = o->op == FABRICFS_OP_FETCH_ATOMIC && o->atomic_op == FI_ATOMIC_READ;
	if (o->count > MAX_IOV || (o->count && !o->iov) || (atomic && o->count != 1))
		return -FI_EINVAL;
	size_t len = 0;
	for (size_t i = 0; i < o->count; i++) {
		if (o->iov[i].iov_len > SIZE_MAX - TEMP_ROUND - len)
			return -FI_EMSGSIZE; /* no region could hold it */
		len += o->iov[i].iov_len;
	}
	if (len > ep->max_msg_size)
		return -FI_EMSGSIZE;
	/* Several remote segments: as many bytes as the local ones, in the
	 * segment-array form (docs/abi.md, "Scatter-gather"). */
	if (o->rma_count > FABRICFS_IOV_LIMIT || (o->rma_count && !o->rma_iov) || (o->rma_count > 1 && o->inject))
		return -FI_EINVAL;
	if (o->rma_count > 1) {
		size_t rlen = 0;
		for (size_t i = 0; i < o->rma_count; i++) {
			if (o->rma_iov[i].len > len - rlen)
				return -FI_EINVAL;
			rlen += o->rma_iov[i].len;
		}
		if (rlen != len)
			return -FI_EINVAL;
		if (!(ep->tx.features & FABRICFS_FEAT_IOV))
			return -FI_EOPNOTSUPP; /* a daemon without the form */
	}
	if (o->inject && len > ep->inject_size)
		return -FI_EINVAL;
	if ((o->flags & FI_MULTI_RECV) && !on_rx)
		return -FI_EINVAL;
	/* An atomic's staged bytes (operand and compare values, or result)
	 * take one staging region each, never a temporary one. */
	size_t stage_len = compare ? 2 * len : len;
	if (atomic && stage_len > STAGE_SIZE)
		return -FI_EMSGSIZE;
	/* Zero copy when the bytes are in a registered region (and the
	 * application may reuse them at once only if it asked to inject). */
	uint64_t tdesc = 0, toff = 0, coff = 0, rdesc = 0, roff = 0;
	bool zc = !o->inject && !(o->flags & FI_INJECT) && o->count == 1 && !no_operand &&
		  ffs_mr_lookup(ep->dom, o->desc ? o->desc[0] : NULL, o->iov[0].iov_base, len, &tdesc, &toff) == 0;
	if (zc && compare) {
		uint64_t cdesc;
		zc = ffs_mr_lookup(ep->dom, o->compare_desc, o->compare, len, &cdesc, &coff) == 0 && cdesc == tdesc;
	}
	bool result_zc = fetch && ffs_mr_lookup(ep->dom, o->result_desc, o->result, len, &rdesc, &roff) == 0;
	/* Several local segments, each in a registered region: zero copy
	 * too, named by the segment array; else they are staged as one. */
	struct fabricfs_iov seg[FABRICFS_IOV_LIMIT];
	size_t nseg = 0;
	bool zcv = !o->inject && !(o->flags & (FI_INJECT | FI_MULTI_RECV)) && !atomic && o->count > 1 &&
		   o->count <= FABRICFS_IOV_LIMIT && ((on_rx ? ep->rx.features : ep->tx.features) & FABRICFS_FEAT_IOV);
	for (size_t i = 0; zcv && i < o->count; i++) {
		zcv = ffs_mr_lookup(ep->dom, o->desc ? o->desc[i] : NULL, o->iov[i].iov_base, o->iov[i].iov_len,
				    &seg[i].desc, &seg[i].offset) == 0;
		seg[i].len = o->iov[i].iov_len;
	}
	if (zcv)
		nseg = o->count;
	bool use_segs = zcv || o->rma_count > 1;

	struct fabricfs_wr wr;
	memset(&wr, 0, sizeof wr);
	wr.op = o->op;
	wr.len = len;
	wr.flags = o->flags & (FI_REMOTE_CQ_DATA | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MULTI_RECV |
			       FI_PEEK | FI_CLAIM | FI_DISCARD | FI_FENCE);
	wr.data = o->data;
	wr.tag = o->tag;
	wr.ignore = o->ignore;
	wr.rma_addr = o->rma_addr;
	wr.rma_key = o->rma_key;
	wr.datatype = o->datatype;
	wr.atomic_op = o->atomic_op;
	/* An fi_addr of the application's AV is the tree AV's (av.c). A
	 * receive names a source only with FI_DIRECTED_RECV in the caps the
	 * application asked for: the tree's FI_EP_RDM has it by default. */
	if (ep->type != FI_EP_MSG)
		wr.addr = !on_rx || (ep->caps & FI_DIRECTED_RECV) ? o->addr : FI_ADDR_UNSPEC;

	pthread_mutex_lock(&ep->lock);
	ssize_t ret = 0;
	struct fabricfs_ring *ring = on_rx ? &ep->rx : &ep->tx;
	if (!ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (!on_rx)
		reclaim_injects(ep);
	if (fabricfs_load_relaxed(ring->tail) - fabricfs_load_acquire(ring->head) >= ring->count) {
		ret = -FI_EAGAIN;
		goto out;
	}
	if (o->inject) {
		size_t nchunk;
		long c = ep->inj_len < ep->tx.count ? stage_alloc(&ep->stx, len, &nchunk) : -1;
		if (c < 0) {
			ret = -FI_EAGAIN;
			goto out;
		}
		gather(o->iov, o->count, ep->stx.r.map + (size_t)c * CHUNK);
		wr.desc = ep->stx.r.desc;
		wr.offset = (uint64_t)c * CHUNK;
		wr.flags |= FI_INJECT;
		uint32_t idx = fabricfs_load_relaxed(ep->tx.tail);
		fabricfs_post(&ep->tx, &wr);
		struct inject *in = &ep->inj[(ep->inj_head + ep->inj_len) % ep->tx.count];
		in->idx = idx;
		in->chunk = (size_t)c;
		in->nchunk = nchunk;
		ep->inj_len++;
		goto out;
	}
	struct ffs_req *r = ep->free;
	if (!r || ep->out[on_rx] >= ring->count) {
		ret = -FI_EAGAIN;
		goto out;
	}
	r->context = o->context;
	r->incoming = incoming;
	r->multi = o->flags & FI_MULTI_RECV;
	r->report = !(on_rx ? ep->rx_sel : ep->tx_sel) || (o->flags & FI_COMPLETION);
	memcpy(r->iov, o->iov, o->count * sizeof *o->iov);
	r->iov_count = o->count;
	r->len = len;
	if (use_segs) {
		/* The array is read when the daemon takes the request; it is
		 * kept until the completion, which is simpler and as cheap. */
		size_t n = (nseg ? nseg : 1) + (o->rma_count > 1 ? o->rma_count : 0);
		long c = stage_alloc(&ep->stx, n * FABRICFS_SEG_SIZE, &r->snchunk);
		if (c < 0) {
			ret = -FI_EAGAIN;
			goto out;
		}
		r->segs = true;
		r->schunk = (size_t)c;
	}
	if (fetch && !result_zc) {
		long c = stage_alloc(&ep->srx, len, &r->rnchunk);
		if (c < 0) {
			ret = -FI_EAGAIN;
			goto unstage;
		}
		r->result = o->result;
		r->rchunk = (size_t)c;
		rdesc = ep->srx.r.desc;
		roff = (uint64_t)c * CHUNK;
	}
	wr.result_desc = rdesc;
	wr.result_offset = roff;
	if (zc) {
		r->where = IN_APP;
		r->off = toff;
		wr.desc = tdesc;
		wr.compare_offset = coff;
	} else if (zcv) {
		r->where = IN_APP;
		r->off = seg[0].offset; /* the completion's buf is the first segment's */
	} else if (no_operand) {
		r->where = IN_APP;
		r->off = roff;
		wr.desc = rdesc;
	} else {
		struct stage *st = incoming ? &ep->srx : &ep->stx;
		long c = -1;
		if (stage_len <= st->r.len && (c = stage_alloc(st, stage_len, &r->nchunk)) >= 0) {
			r->where = IN_STAGE;
			r->st = st;
			r->chunk = (size_t)c;
			r->off = (uint64_t)c * CHUNK;
			wr.desc = st->r.desc;
		} else if (stage_len > st->r.len) {
			int err;
			if (!(r->tmp = get_temp(ep, len, &err))) {
				ret = err;
				goto unstage;
			}
			r->where = IN_TEMP;
			r->off = 0;
			wr.desc = r->tmp->r.desc;
		} else {
			ret = -FI_EAGAIN; /* staging full until completions free it */
			goto unstage;
		}
		if (!incoming)
			gather(o->iov, o->count, region_of(r) + r->off);
		if (compare) {
			memcpy(region_of(r) + r->off + len, o->compare, len);
			wr.compare_offset = r->off + len;
		}
	}
	wr.offset = r->off;
	if (use_segs) {
		/* The request names its segment array: the local segments (the
		 * staged bytes as one, if not zero copy), then the remote ones. */
		if (!nseg) {
			seg[0] = (struct fabricfs_iov){.desc = wr.desc, .offset = r->off, .len = len};
			nseg = 1;
		}
		uint8_t *a = ep->stx.r.map + r->schunk * CHUNK;
		memcpy(a, seg, nseg * sizeof *seg);
		size_t nrma = o->rma_count > 1 ? o->rma_count : 0;
		for (size_t i = 0; i < nrma; i++) {
			struct fabricfs_rma_iov ri = {.addr = o->rma_iov[i].addr, .len = o->rma_iov[i].len,
						      .key = o->rma_iov[i].key};
			memcpy(a + (nseg + i) * FABRICFS_SEG_SIZE, &ri, sizeof ri);
		}
		wr.iov_count = (uint8_t)nseg;
		wr.rma_iov_count = (uint8_t)nrma;
		wr.desc = ep->stx.r.desc;
		wr.offset = r->schunk * CHUNK;
		wr.len = (nseg + nrma) * FABRICFS_SEG_SIZE;
	}
	wr.context = (uint64_t)(uintptr_t)r;
	wr.flags |= FI_COMPLETION;
	ep->free = r->next_free;
	r->in_use = true;
	ep->outstanding++;
	ep->out[on_rx]++;
	r->ring = ring;
	r->idx = fabricfs_load_relaxed(ring->tail);
	fabricfs_post(ring, &wr); /* room was checked above, under the lock */
	goto out;
unstage:
	if (r->result)
		mark(&ep->srx, r->rchunk, r->rnchunk, false);
	if (r->segs)
		mark(&ep->stx, r->schunk, r->snchunk, false);
	r->result = NULL;
	r->segs = false;
out:
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

ssize_t ffs_ep_post(struct fid_ep *fid, const struct ffs_op *o)
{
	return post(container_of(fid, struct ffs_ep, ep_fid), o);
}

struct ffs_domain *ffs_ep_attrs(struct fid_ep *fid, enum fi_ep_type *type, uint64_t *tx_op_flags)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid);
	*type = ep->type;
	*tx_op_flags = ep->tx_op_flags;
	return ep->dom;
}

static struct ffs_ep *ep_of(struct fid_ep *fid)
{
	return container_of(fid, struct ffs_ep, ep_fid);
}

/* Messages. */

static ssize_t ep_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_RECV, .iov = &iov, .desc = &desc, .count = 1, .addr = src,
					 .context = context, .flags = ep->rx_op_flags});
}

static ssize_t ep_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_RECV, .iov = iov, .desc = desc, .count = count, .addr = src,
					 .context = context, .flags = ep->rx_op_flags});
}

static ssize_t ep_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	struct ffs_ep *ep = ep_of(fid);
	struct ffs_op o = {.op = FABRICFS_OP_RECV, .iov = msg->msg_iov, .desc = msg->desc, .count = msg->iov_count,
			   .addr = msg->addr, .context = msg->context, .flags = flags};
	return claims(ep, flags) ? post_claim(ep, &o) : post(ep, &o);
}

static ssize_t ep_send(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .context = context, .flags = ep->tx_op_flags});
}

static ssize_t ep_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = iov, .desc = desc, .count = count, .addr = dest,
					 .context = context, .flags = ep->tx_op_flags});
}

static ssize_t ep_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = msg->msg_iov, .desc = msg->desc,
						 .count = msg->iov_count, .addr = msg->addr, .data = msg->data,
						 .context = msg->context, .flags = flags});
}

static ssize_t ep_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = &iov, .count = 1, .addr = dest,
						 .inject = true});
}

static ssize_t ep_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
			   void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .data = data, .context = context,
					 .flags = ep->tx_op_flags | FI_REMOTE_CQ_DATA});
}

static ssize_t ep_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_SEND, .iov = &iov, .count = 1, .addr = dest,
						 .data = data, .flags = FI_REMOTE_CQ_DATA, .inject = true});
}

/* Tagged messages. */

static ssize_t ep_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
			uint64_t ignore, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_TRECV, .iov = &iov, .desc = &desc, .count = 1, .addr = src,
					 .tag = tag, .ignore = ignore, .context = context, .flags = ep->rx_op_flags});
}

static ssize_t ep_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			 uint64_t tag, uint64_t ignore, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_TRECV, .iov = iov, .desc = desc, .count = count, .addr = src,
					 .tag = tag, .ignore = ignore, .context = context, .flags = ep->rx_op_flags});
}

/* FI_PEEK, FI_CLAIM and FI_DISCARD go to the tree, which keeps the
 * unexpected messages (docs/abi.md, "Work request"). A claim is the
 * tree's, under a key: the application's context, the same for the
 * FI_PEEK | FI_CLAIM and the FI_CLAIM that takes the message
 * (fi_tagged(3)). */
static ssize_t ep_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct ffs_ep *ep = ep_of(fid);
	struct ffs_op o = {.op = FABRICFS_OP_TRECV, .iov = msg->msg_iov, .desc = msg->desc, .count = msg->iov_count,
			   .addr = msg->addr, .tag = msg->tag, .ignore = msg->ignore, .context = msg->context,
			   .flags = flags};
	if (claims(ep, flags))
		return post_claim(ep, &o);
	if ((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM)))
		return -FI_EINVAL;
	if (flags & FI_CLAIM)
		o.rma_key = (uint64_t)(uintptr_t)msg->context;
	return post(ep, &o);
}

static ssize_t ep_tsend(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
			void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .tag = tag, .context = context, .flags = ep->tx_op_flags});
}

static ssize_t ep_tsendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			 uint64_t tag, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = iov, .desc = desc, .count = count,
					 .addr = dest, .tag = tag, .context = context, .flags = ep->tx_op_flags});
}

static ssize_t ep_tsendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg, uint64_t flags)
{
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = msg->msg_iov, .desc = msg->desc,
						 .count = msg->iov_count, .addr = msg->addr, .tag = msg->tag,
						 .data = msg->data, .context = msg->context, .flags = flags});
}

static ssize_t ep_tinject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = &iov, .count = 1, .addr = dest,
						 .tag = tag, .inject = true});
}

static ssize_t ep_tsenddata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dest, uint64_t tag, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .tag = tag, .data = data, .context = context,
					 .flags = ep->tx_op_flags | FI_REMOTE_CQ_DATA});
}

static ssize_t ep_tinjectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			      uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_TSEND, .iov = &iov, .count = 1, .addr = dest,
						 .tag = tag, .data = data, .flags = FI_REMOTE_CQ_DATA, .inject = true});
}

/* RMA: the remote address (an offset into the peer's region, or its
 * virtual address with FI_MR_VIRT_ADDR: the peer's region knows which)
 * and key go into the work request as they are. */

static ssize_t ep_read(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr,
		       uint64_t key, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_READ, .iov = &iov, .desc = &desc, .count = 1, .addr = src,
					 .rma_addr = addr, .rma_key = key, .context = context,
					 .flags = ep->tx_op_flags});
}

static ssize_t ep_readv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			uint64_t addr, uint64_t key, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_READ, .iov = iov, .desc = desc, .count = count, .addr = src,
					 .rma_addr = addr, .rma_key = key, .context = context,
					 .flags = ep->tx_op_flags});
}

/* rma_msg posts an fi_msg_rma: up to rma_iov_limit remote ranges. */
static ssize_t rma_msg(struct fid_ep *fid, uint8_t op, const struct fi_msg_rma *msg, uint64_t flags)
{
	if (!msg || msg->rma_iov_count < 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return post(ep_of(fid), &(struct ffs_op){.op = op, .iov = msg->msg_iov, .desc = msg->desc,
						 .count = msg->iov_count, .addr = msg->addr,
						 .rma_addr = msg->rma_iov[0].addr, .rma_key = msg->rma_iov[0].key,
						 .rma_iov = msg->rma_iov, .rma_count = msg->rma_iov_count,
						 .data = msg->data, .context = msg->context, .flags = flags});
}

static ssize_t ep_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags)
{
	return rma_msg(fid, FABRICFS_OP_READ, msg, flags);
}

static ssize_t ep_write(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr,
			uint64_t key, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_WRITE, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .rma_addr = addr, .rma_key = key, .context = context,
					 .flags = ep->tx_op_flags});
}

static ssize_t ep_writev(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			 uint64_t addr, uint64_t key, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_WRITE, .iov = iov, .desc = desc, .count = count,
					 .addr = dest, .rma_addr = addr, .rma_key = key, .context = context,
					 .flags = ep->tx_op_flags});
}

static ssize_t ep_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags)
{
	return rma_msg(fid, FABRICFS_OP_WRITE, msg, flags);
}

static ssize_t ep_inject_write(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest, uint64_t addr,
			       uint64_t key)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_WRITE, .iov = &iov, .count = 1, .addr = dest,
						 .rma_addr = addr, .rma_key = key, .inject = true});
}

static ssize_t ep_writedata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct ffs_ep *ep = ep_of(fid);
	struct iovec iov = {(void *)buf, len};
	return post(ep, &(struct ffs_op){.op = FABRICFS_OP_WRITE, .iov = &iov, .desc = &desc, .count = 1, .addr = dest,
					 .rma_addr = addr, .rma_key = key, .data = data, .context = context,
					 .flags = ep->tx_op_flags | FI_REMOTE_CQ_DATA});
}

static ssize_t ep_inject_writedata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
				   uint64_t addr, uint64_t key)
{
	struct iovec iov = {(void *)buf, len};
	return post(ep_of(fid), &(struct ffs_op){.op = FABRICFS_OP_WRITE, .iov = &iov, .count = 1, .addr = dest,
						 .rma_addr = addr, .rma_key = key, .data = data,
						 .flags = FI_REMOTE_CQ_DATA, .inject = true});
}

/* ---- control ---- */

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	pthread_mutex_lock(&ep->lock);
	struct ffs_req *r = NULL;
	for (size_t i = 0; i < ep->nreq && !r; i++)
		if (ep->reqs[i].in_use && ep->reqs[i].context == context)
			r = &ep->reqs[i];
	struct fabricfs_ring *ring = r ? r->ring : NULL;
	uint32_t idx = r ? r->idx : 0;
	pthread_mutex_unlock(&ep->lock);
	/* Nothing pending with this context (it completed, or never was):
	 * its completion, if any, is on the CQ, and fi_cancel has nothing to
	 * do, which is not an error. */
	if (!r)
		return 0;
	/* The tree cancels what it took: wait (briefly; it takes requests as
	 * they come) until the ring's head has passed the request. */
	for (int i = 0; i < 100000 && (int32_t)(fabricfs_load_acquire(ring->head) - idx) <= 0; i++)
		sched_yield();
	/* By our context, the request record: the tree cancels it if it has
	 * not started, and succeeds as well if it completed meanwhile or
	 * cannot be cancelled (a receive verbs posted). */
	return ffs_ctl(&ep->obj, "cancel 0x%llx", (unsigned long long)(uintptr_t)r);
}

/* opt_name is the tree's name of an endpoint option (attr/opt_NAME, ctl
 * setopt NAME), or NULL for one the tree does not know. */
static const char *opt_name(int optname)
{
	switch (optname) {
	case FI_OPT_MIN_MULTI_RECV:
		return "min_multi_recv";
	case FI_OPT_CM_DATA_SIZE:
		return "cm_data_size";
	case FI_OPT_BUFFERED_MIN:
		return "buffered_min";
	case FI_OPT_BUFFERED_LIMIT:
		return "buffered_limit";
	}
	return NULL;
}

int ffs_getopt(struct ffs_obj *o, int level, int optname, void *optval, size_t *optlen)
{
	const char *name = opt_name(optname);
	if (level != FI_OPT_ENDPOINT || !name)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t))
		return -FI_ETOOSMALL;
	/* attr/opt_NAME holds the value the provider uses now (the default
	 * until set), or "-" where this endpoint has no such option. */
	char file[64], buf[64];
	snprintf(file, sizeof file, "attr/opt_%s", name);
	ssize_t n = ffs_get(o, file, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	if (buf[0] == '-')
		return -FI_ENOPROTOOPT;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (end == buf || errno)
		return -FI_EIO;
	*(size_t *)optval = (size_t)v;
	*optlen = sizeof(size_t);
	return 0;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	return ffs_getopt(&ep->obj, level, optname, optval, optlen);
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	const char *name = opt_name(optname);
	if (level != FI_OPT_ENDPOINT || !name)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	int ret = ffs_ctl(&ep->obj, "setopt %s %zu", name, *(const size_t *)optval);
	/* The tree refuses a threshold past the provider's with EMSGSIZE,
	 * which is FI_EMSGSIZE here ("it will fail the fi_setopt() call with
	 * FI_EMSGSIZE"), not a truncation. */
	return ret == -FI_ETRUNC ? -FI_EMSGSIZE : ret;
}

static ssize_t ep_tx_size_left(struct fid_ep *fid)
{
	struct ffs_ep *ep = ep_of(fid);
	pthread_mutex_lock(&ep->lock);
	ssize_t n = ep->enabled ? (ssize_t)(ep->tx.count - (fabricfs_load_relaxed(ep->tx.tail) -
							     fabricfs_load_acquire(ep->tx.head)))
				: -FI_EOPBADSTATE;
	pthread_mutex_unlock(&ep->lock);
	return n;
}

static ssize_t ep_rx_size_left(struct fid_ep *fid)
{
	struct ffs_ep *ep = ep_of(fid);
	pthread_mutex_lock(&ep->lock);
	ssize_t n = ep->enabled ? (ssize_t)(ep->rx.count - (fabricfs_load_relaxed(ep->rx.tail) -
							     fabricfs_load_acquire(ep->rx.head)))
				: -FI_EOPBADSTATE;
	pthread_mutex_unlock(&ep->lock);
	return n;
}

/* ---- binding and enabling ---- */

static const char *dirs(uint64_t flags, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s", (flags & FI_TRANSMIT) ? "send" : "",
		 (flags & FI_TRANSMIT) && (flags & FI_RECV) ? "," : "", (flags & FI_RECV) ? "recv" : "");
	return buf;
}

static int bind_cq(struct ffs_ep *ep, struct ffs_cq *cq, uint64_t flags)
{
	if (!(flags & (FI_TRANSMIT | FI_RECV)) || (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)))
		return -FI_EBADFLAGS;
	if (((flags & FI_TRANSMIT) && ep->txcq) || ((flags & FI_RECV) && ep->rxcq))
		return -FI_EINVAL;
	char d[16];
	int ret = ffs_ctl(&ep->obj, "bind cq %u %s,selective", cq->obj.id, dirs(flags, d, sizeof d));
	if (ret)
		return ret;
	bool sel = flags & FI_SELECTIVE_COMPLETION;
	if (flags & FI_TRANSMIT) {
		ep->txcq = cq;
		ep->tx_sel = sel;
	}
	if (flags & FI_RECV) {
		ep->rxcq = cq;
		ep->rx_sel = sel;
	}
	__atomic_fetch_add(&cq->bound, ((flags & FI_TRANSMIT) != 0) + ((flags & FI_RECV) != 0), __ATOMIC_SEQ_CST);
	return 0;
}

static int bind_cntr(struct ffs_ep *ep, struct ffs_cntr *cntr, uint64_t flags)
{
	static const struct {
		uint64_t flag;
		const char *word;
	} words[] = {
		{FI_SEND, "send"}, {FI_RECV, "recv"}, {FI_READ, "read"}, {FI_WRITE, "write"},
		{FI_REMOTE_READ, "remote_read"}, {FI_REMOTE_WRITE, "remote_write"},
	};
	char list[128] = "";
	size_t n = 0;
	uint64_t known = 0;
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		known |= words[i].flag;
		if (flags & words[i].flag)
			n += snprintf(list + n, sizeof list - n, "%s%s", n ? "," : "", words[i].word);
	}
	if (!n || (flags & ~known))
		return -FI_EBADFLAGS;
	return ffs_ctl(&ep->obj, "bind cntr %u %s", cntr->obj.id, list);
}

/* bind_eq binds eq to the endpoint: its tree EQ in the endpoint's domain
 * takes the endpoint's events. Under ep->lock. */
static int bind_eq(struct ffs_ep *ep, struct ffs_eq *eq)
{
	unsigned tid;
	if (ep->eq)
		return -FI_EINVAL;
	int ret = ffs_eq_bind(eq, ep->dom->dir, "ep", ep->obj.id, &ep->ep_fid.fid, &tid);
	if (ret)
		return ret;
	if ((ret = ffs_ctl(&ep->obj, "bind eq %u", tid)))
		ffs_eq_unbind(eq, &ep->ep_fid.fid);
	else
		ep->eq = eq;
	return ret;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	if (!bfid)
		return -FI_EINVAL;
	pthread_mutex_lock(&ep->lock);
	int ret;
	if (ep->enabled && bfid->fclass != FI_CLASS_CNTR) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		ret = bind_cq(ep, container_of(bfid, struct ffs_cq, cq_fid.fid), flags);
		break;
	case FI_CLASS_EQ:
		ret = bind_eq(ep, (struct ffs_eq *)container_of(bfid, struct fid_eq, fid));
		break;
	case FI_CLASS_AV: {
		/* By the AV's directory name: its id, or the name of a named AV. */
		const char *dir = container_of(bfid, struct ffs_av, av_fid.fid)->obj.dir;
		ret = ffs_ctl(&ep->obj, "bind av %s", strrchr(dir, '/') + 1);
		break;
	}
	case FI_CLASS_SRX_CTX: {
		struct ffs_ep *srx = container_of(bfid, struct ffs_ep, ep_fid.fid);
		if (ep->is_srx || !srx->is_srx || srx->dom != ep->dom || ep->srx_ctx)
			ret = -FI_EINVAL;
		else if (!(ret = ffs_ctl(&ep->obj, "bind srx %u", srx->obj.id))) {
			ep->srx_ctx = srx;
			__atomic_fetch_add(&srx->srx_bound, 1, __ATOMIC_SEQ_CST);
		}
		break;
	}
	case FI_CLASS_STX_CTX:
		ret = ffs_ctl(&ep->obj, "bind stx %u", container_of(bfid, struct ffs_stx, stx_fid.fid)->obj.id);
		break;
	case FI_CLASS_CNTR:
		ret = bind_cntr(ep, container_of(bfid, struct ffs_cntr, cntr_fid.fid), flags);
		break;
	default:
		ret = -FI_ENOSYS;
	}
out:
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

static int enable(struct ffs_ep *ep)
{
	if (ep->enabled)
		return 0;
	int ret;
	/* fi_domain(3): "An event queue bound to a domain will be the default
	 * EQ associated with asynchronous control events that occur on the
	 * domain or active endpoints allocated on a domain." */
	struct ffs_eq *deq = __atomic_load_n(&ep->dom->eq, __ATOMIC_ACQUIRE); /* not dom->lock: it goes before ep->lock */
	if (deq && !ep->eq && !ep->is_srx && !ep->is_alias && (ret = bind_eq(ep, deq)))
		return ret;
	/* The tree wants a CQ for each direction; the application may bind
	 * none for one it does not use. A shared receive context has none. */
	uint64_t missing = (ep->txcq ? 0 : FI_TRANSMIT) | (ep->rxcq ? 0 : FI_RECV);
	if (missing && !ep->hidden_bound && !ep->is_srx && !ep->is_alias) {
		char d[16];
		if (!ep->hidden)
			return -FI_EOTHER; /* make_hidden runs first */
		if ((ret = ffs_ctl(&ep->obj, "bind cq %u %s,selective", ep->hidden->obj.id, dirs(missing, d, sizeof d))))
			return ret;
		ep->hidden_bound = true;
	}
	if (!ep->is_srx && !ep->stx.r.map && (ret = region_make(ep->dom, STAGE_SIZE, &ep->stx.r)))
		return ret;
	if (!ep->srx_ctx && !ep->srx.r.map && (ret = region_make(ep->dom, STAGE_SIZE, &ep->srx.r)))
		return ret;
	if (!ep->is_alias && (ret = ffs_ctl(&ep->obj, "enable")))
		return ret;
	if ((!ep->is_srx && (ret = ffs_ring_map(&ep->obj, "tx", &ep->tx))) ||
	    (ret = ffs_ring_map(&ep->obj, "rx", &ep->rx)))
		return ret;
	if (ep->buffered && !ep->bslot && (ret = buffered_map(ep)))
		return ret;
	uint64_t v;
	if (!ep->is_srx) {
		if ((ret = ffs_get_u64(&ep->obj, "attr/tx_inject_size", &v)))
			return ret;
		ep->inject_size = v;
		if ((ret = ffs_get_u64(&ep->obj, "attr/max_msg_size", &v)))
			return ret;
		ep->max_msg_size = v;
	}
	if (ep->srx_ctx) {
		/* Whether the context's receives are reported unasked: as the
		 * receive CQ bindings of its endpoints are selective or not. */
		pthread_mutex_lock(&ep->srx_ctx->lock);
		ep->srx_ctx->rx_sel = ep->rx_sel;
		pthread_mutex_unlock(&ep->srx_ctx->lock);
	}
	/* Operations outstanding per direction: at most the ring's entries
	 * (attr/tx_size and rx_size rounded up), libfabric's tx_attr->size and
	 * rx_attr->size, so that a CQ sized for them never overruns. */
	ep->nreq = (size_t)ep->tx.count + ep->rx.count;
	ep->reqs = calloc(ep->nreq, sizeof *ep->reqs);
	ep->inj = ep->tx.count ? calloc(ep->tx.count, sizeof *ep->inj) : NULL;
	if (!ep->reqs || (ep->tx.count && !ep->inj))
		return -FI_ENOMEM;
	for (size_t i = 0; i < ep->nreq; i++) {
		ep->reqs[i].ep = ep;
		ep->reqs[i].next_free = ep->free;
		ep->free = &ep->reqs[i];
	}
	ep->enabled = true;
	return 0;
}

/* make_hidden makes the hidden CQ enable binds, if the endpoint will need
 * one, before enable takes the endpoint's lock: ffs_cq_make takes
 * dom->cq_lock, which ranks above it. */
static int make_hidden(struct ffs_ep *ep)
{
	pthread_mutex_lock(&ep->lock);
	bool need = !ep->enabled && !ep->hidden && (!ep->txcq || !ep->rxcq);
	pthread_mutex_unlock(&ep->lock);
	if (!need)
		return 0;
	struct ffs_cq *cq;
	int ret = ffs_cq_make(ep->dom, NULL, true, &cq);
	if (ret)
		return ret;
	pthread_mutex_lock(&ep->lock);
	if (!ep->hidden) {
		ep->hidden = cq;
		cq = NULL;
	}
	pthread_mutex_unlock(&ep->lock);
	if (cq)
		ffs_cq_free(cq); /* another thread made one meanwhile */
	return 0;
}

static void init_fid(struct ffs_ep *ep, size_t fclass, void *context);

/* alias_open is fi_ep_alias (fi_control FI_ALIAS) of the enabled endpoint
 * ep: a tree endpoint made its alias (`alias ID FLAGS`), which posts on
 * ep's tree endpoint through rings of its own and completes on ep's CQs;
 * "An alias EP differs from its parent endpoint only by its default data
 * transfer flags". Called with ep->lock held. */
static int alias_open(struct ffs_ep *ep, struct fi_alias *a)
{
	bool tx = a->flags & FI_TRANSMIT, rx = a->flags & FI_RECV;
	if (!a->fid || tx == rx)
		return -FI_EINVAL; /* "must include FI_TRANSMIT or FI_RECV (not both)" */
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	struct ffs_ep *al = calloc(1, sizeof *al);
	if (!al)
		return -FI_ENOMEM;
	al->dom = ep->dom;
	al->obj.ctl = -1;
	al->is_alias = true;
	al->type = ep->type;
	al->caps = ep->caps;
	al->tx_op_flags = tx ? a->flags & ~FI_TRANSMIT : ep->tx_op_flags;
	al->rx_op_flags = rx ? a->flags & ~FI_RECV : ep->rx_op_flags;
	al->txcq = ep->txcq;
	al->rxcq = ep->rxcq;
	al->tx_sel = ep->tx_sel;
	al->rx_sel = ep->rx_sel;
	int ret = -FI_ENOMEM;
	if (!(al->info = fi_dupinfo(ep->info)) || (ret = ffs_obj_clone(&al->obj, ep->dom->dir, "ep")) ||
	    (ret = ffs_ctl(&al->obj, "alias %u 0x%llx", ep->obj.id, (unsigned long long)a->flags)) ||
	    (ret = ffs_set(&al->obj, "attr/cancel_on_close", "true")) || (ret = enable(al))) {
		ffs_ring_unmap(&al->tx);
		ffs_ring_unmap(&al->rx);
		ffs_obj_close(&al->obj);
		region_free(&al->stx.r);
		region_free(&al->srx.r);
		free(al->reqs);
		free(al->inj);
		fi_freeinfo(al->info);
		free(al);
		return ret;
	}
	struct ffs_cq *cqs[2] = {al->txcq, al->rxcq};
	for (int i = 0; i < 2; i++)
		if (cqs[i])
			__atomic_fetch_add(&cqs[i]->bound, 1, __ATOMIC_SEQ_CST);
	init_fid(al, FI_CLASS_EP, ep->ep_fid.fid.context);
	*a->fid = &al->ep_fid.fid;
	return 0;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	int ret = command == FI_ENABLE ? make_hidden(ep) : 0;
	if (ret)
		return ret;
	pthread_mutex_lock(&ep->lock);
	switch (command) {
	case FI_ENABLE:
		ret = enable(ep);
		break;
	case FI_ALIAS:
		ret = arg ? alias_open(ep, arg) : -FI_EINVAL;
		break;
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG: {
		uint64_t *flags = arg;
		if (!flags) {
			ret = -FI_EINVAL;
			break;
		}
		uint64_t *target = (*flags & FI_TRANSMIT) ? &ep->tx_op_flags : (*flags & FI_RECV) ? &ep->rx_op_flags : NULL;
		if (!target || ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))) {
			ret = -FI_EINVAL;
			break;
		}
		if (command == FI_GETOPSFLAG)
			*flags = *target;
		else
			*target = *flags & ~(FI_TRANSMIT | FI_RECV);
		break;
	}
	default:
		ret = -FI_ENOSYS;
	}
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

/* ---- connection management ---- */

static int ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	char a[128];
	int ret = ffs_addr_format(addr, addrlen, a, sizeof a);
	return ret ? ret : ffs_ctl(&container_of(fid, struct ffs_ep, ep_fid.fid)->obj, "setname %s", a);
}

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return ffs_name_get(&container_of(fid, struct ffs_ep, ep_fid.fid)->obj, "local", addr, addrlen);
}

static int ep_getpeer(struct fid_ep *fid, void *addr, size_t *addrlen)
{
	int ret = ffs_name_get(&ep_of(fid)->obj, "remote", addr, addrlen);
	return ret == -FI_EOPBADSTATE ? -FI_ENOTCONN : ret;
}

static int ep_connect(struct fid_ep *fid, const void *addr, const void *param, size_t paramlen)
{
	struct ffs_ep *ep = ep_of(fid);
	char a[128], data[2 * FFS_CM_DATA_SIZE + 8];
	int ret = ffs_addr_format(addr, sizeof(struct sockaddr_in6), a, sizeof a);
	if (ret && addr) {
		/* An IPv4 address is shorter than the room given above. */
		ret = ffs_addr_format(addr, sizeof(struct sockaddr_in), a, sizeof a);
	}
	if (ret || (ret = ffs_hex_data(param, paramlen, data, sizeof data)) || (ret = make_hidden(ep)))
		return ret;
	pthread_mutex_lock(&ep->lock);
	ret = enable(ep);
	if (!ret)
		ret = data[0] ? ffs_ctl(&ep->obj, "connect %s %s", a, data) : ffs_ctl(&ep->obj, "connect %s", a);
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

static int ep_accept(struct fid_ep *fid, const void *param, size_t paramlen)
{
	struct ffs_ep *ep = ep_of(fid);
	char data[2 * FFS_CM_DATA_SIZE + 8];
	int ret = ffs_hex_data(param, paramlen, data, sizeof data);
	if (ret || (ret = make_hidden(ep)))
		return ret;
	pthread_mutex_lock(&ep->lock);
	ret = enable(ep);
	if (!ret)
		ret = data[0] ? ffs_ctl(&ep->obj, "accept %s", data) : ffs_ctl(&ep->obj, "accept");
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

static int ep_shutdown(struct fid_ep *fid, uint64_t flags)
{
	return ffs_ctl(&ep_of(fid)->obj, "shutdown");
}

/* ---- closing ---- */

static void free_ep(struct ffs_ep *ep)
{
	if (ep->hidden)
		ffs_cq_free(ep->hidden);
	if (ep->bmap)
		munmap(ep->bmap, ep->blen);
	free(ep->reqs);
	free(ep->inj);
	free(ep->connreq);
	fi_freeinfo(ep->info);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

static int ep_close(struct fid *fid)
{
	struct ffs_ep *ep = container_of(fid, struct ffs_ep, ep_fid.fid);
	if (ep->is_srx && __atomic_load_n(&ep->srx_bound, __ATOMIC_SEQ_CST) > 0)
		return -FI_EBUSY; /* its endpoints first: they use it */
	if (ep->eq)
		ffs_eq_unbind(ep->eq, fid);
	pthread_mutex_lock(&ep->lock);
	ep->closing = true;
	/* Closing the tree endpoint cancels what it holds (FI_ECANCELED
	 * completions); staged bytes are no longer copied out. */
	ffs_ring_unmap(&ep->tx);
	ffs_ring_unmap(&ep->rx);
	if (ep->connreq) {
		/* The passive endpoint pins an endpoint it made: only rmdir
		 * closes it before the passive endpoint closes. */
		if (rmdir(ep->obj.dir) < 0)
			ffs_debug("rmdir %s: %s", ep->obj.dir, strerror(errno));
	}
	ffs_obj_close(&ep->obj);
	region_free(&ep->stx.r);
	region_free(&ep->srx.r);
	for (int i = 0; i < MAX_TEMP; i++)
		region_free(&ep->temps[i].r);
	pthread_mutex_unlock(&ep->lock);
	/* Reap until the daemon gave back every request (their records must
	 * outlive them) and the endpoint has left the tree: the daemon closes
	 * it when it handles the last release, after close(2) and munmap(2)
	 * return, and the application may next close what was bound to it
	 * (an AV, a counter), which the tree refuses while it is bound. */
	size_t left;
	bool there = true;
	for (int ms = 0;; ms++) {
		ffs_domain_progress(ep->dom);
		pthread_mutex_lock(&ep->lock);
		left = ep->outstanding;
		pthread_mutex_unlock(&ep->lock);
		if (there)
			there = access(ep->obj.dir, F_OK) == 0 || errno != ENOENT;
		/* A shared receive context's receives that no message took are
		 * dropped with it, silently (fi_endpoint(3)): once it has left
		 * the tree, no endpoint is bound to complete them. */
		if (((left == 0 || ep->is_srx) && !there) || ms == CLOSE_DRAIN_MS)
			break;
		usleep(1000);
	}
	if (ep->is_srx && !there) {
		ffs_domain_progress(ep->dom); /* what it completed before it left */
		left = 0;
	}
	if (ep->buffered)
		buffered_forget(ep);
	struct ffs_cq *cqs[2] = {ep->txcq, ep->rxcq};
	for (int i = 0; i < 2; i++)
		if (cqs[i])
			__atomic_fetch_sub(&cqs[i]->bound, 1, __ATOMIC_SEQ_CST);
	if (ep->srx_ctx)
		__atomic_fetch_sub(&ep->srx_ctx->srx_bound, 1, __ATOMIC_SEQ_CST);
	ffs_domain_hold(ep->dom, -1);
	if (left) {
		/* The records stay (with the hidden CQ) for completions that
		 * may still come; the domain frees the hidden CQ. */
		ffs_warn("%s: closed with %zu requests the daemon did not give back", ep->obj.dir, left);
		return 0;
	}
	free_ep(ep);
	return 0;
}

/* ---- operation tables ---- */

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = ffs_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

const char *ffs_ep_dir(struct fid *fid)
{
	return fid && fid->ops == &ep_fi_ops ? ((struct ffs_ep *)fid)->obj.dir : NULL;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ffs_no_tx_ctx,
	.rx_ctx = ffs_no_rx_ctx,
	.rx_size_left = ep_rx_size_left,
	.tx_size_left = ep_tx_size_left,
};

static struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ep_setname,
	.getname = ep_getname,
	.getpeer = ep_getpeer,
	.connect = ep_connect,
	.listen = ffs_no_listen,
	.accept = ep_accept,
	.reject = ffs_no_reject,
	.shutdown = ep_shutdown,
	.join = ffs_no_join,
};

static struct fi_ops_msg ep_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ep_recv,
	.recvv = ep_recvv,
	.recvmsg = ep_recvmsg,
	.send = ep_send,
	.sendv = ep_sendv,
	.sendmsg = ep_sendmsg,
	.inject = ep_inject,
	.senddata = ep_senddata,
	.injectdata = ep_injectdata,
};

static struct fi_ops_rma ep_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ep_read,
	.readv = ep_readv,
	.readmsg = ep_readmsg,
	.write = ep_write,
	.writev = ep_writev,
	.writemsg = ep_writemsg,
	.inject = ep_inject_write,
	.writedata = ep_writedata,
	.injectdata = ep_inject_writedata,
};

static struct fi_ops_tagged ep_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ep_trecv,
	.recvv = ep_trecvv,
	.recvmsg = ep_trecvmsg,
	.send = ep_tsend,
	.sendv = ep_tsendv,
	.sendmsg = ep_tsendmsg,
	.inject = ep_tinject,
	.senddata = ep_tsenddata,
	.injectdata = ep_tinjectdata,
};

/* init_fid makes ep, whose tree object is open, an endpoint of class
 * fclass for the application. */
static void init_fid(struct ffs_ep *ep, size_t fclass, void *context)
{
	pthread_mutex_init(&ep->lock, NULL);
	ep->ep_fid.fid.fclass = fclass;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &ep_fi_ops;
	ep->ep_fid.ops = &ep_ops;
	ep->ep_fid.cm = &ep_cm_ops;
	ep->ep_fid.msg = &ep_msg_ops;
	ep->ep_fid.tagged = &ep_tagged_ops;
	ep->ep_fid.rma = &ep_rma_ops;
	ep->ep_fid.atomic = &ffs_atomic_ops;
	ffs_domain_hold(ep->dom, 1);
}

int ffs_user_id_caps(struct ffs_obj *o, const struct fi_info *info)
{
	if (!(info->caps & FI_AV_USER_ID))
		return 0;
	int ret = ffs_set(o, "attr/caps", "0x%llx", (unsigned long long)info->caps);
	if (!ret && info->tx_attr && info->tx_attr->caps)
		ret = ffs_set(o, "attr/tx_caps", "0x%llx", (unsigned long long)info->tx_attr->caps);
	if (!ret && info->rx_attr && info->rx_attr->caps)
		ret = ffs_set(o, "attr/rx_caps", "0x%llx", (unsigned long long)info->rx_attr->caps);
	return ret;
}

int ffs_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out, void *context)
{
	if (!info || !out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	char buf[8192]; /* the fi_info block */
	struct ffs_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->obj.ctl = -1;
	ep->type = info->ep_attr ? info->ep_attr->type : FI_EP_MSG;
	if (ep->type == FI_EP_UNSPEC)
		ep->type = FI_EP_MSG;
	ep->caps = info->caps;
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	int ret;
	if (!(ep->info = fi_dupinfo(info))) {
		ret = -FI_ENOMEM;
		goto fail;
	}
	if (info->handle && info->handle->fclass != FI_CLASS_PEP) {
		if (info->handle->fclass != FI_CLASS_CONNREQ) {
			ret = -FI_EINVAL;
			goto fail;
		}
		struct ffs_connreq *cr = container_of(info->handle, struct ffs_connreq, fid);
		if (strcmp(cr->domdir, dom->dir) || cr->adopted) {
			ret = -FI_EINVAL;
			goto fail;
		}
		if ((ret = ffs_obj_adopt(&ep->obj, dom->dir, "ep", cr->ep_id)))
			goto fail;
		cr->adopted = true;
		ep->connreq = cr;
	} else {
		if ((ret = ffs_obj_clone(&ep->obj, dom->dir, "ep")))
			goto fail;
		/* The endpoint is the one the application's fi_info describes:
		 * the tree takes the whole entry (ep/N/info) and narrows to it,
		 * FI_BUFFERED_RECV included (buffered receives, above); its caps
		 * without FI_AV_USER_ID, which the block cannot name
		 * (ffs_user_id_caps puts it back). */
		struct fi_info asked = *info;
		asked.caps &= ~FI_AV_USER_ID;
		if ((ret = ffs_info_block(&asked, buf, sizeof buf)) || (ret = ffs_write(&ep->obj, "info", buf)))
			goto fail;
		if ((info->mode & FI_BUFFERED_RECV) && ep->type == FI_EP_RDM && (ret = buffered_add(ep)))
			goto fail;
		if ((ret = ffs_user_id_caps(&ep->obj, info)))
			goto fail;
		/* The block carries the key's size, not its bytes. */
		if (info->ep_attr &&
		    (ret = ffs_auth_key(&ep->obj, dom->info->domain_attr, info->ep_attr->auth_key, info->ep_attr->auth_key_size)))
			goto fail;
		/* The source address (`setname`): a passive endpoint's given as
		 * the handle (its address goes to the new endpoint, as
		 * libfabric's tcp hands over the socket), or the info's
		 * src_addr when it names a port (port 0 is the tree's choice
		 * anyway) or is the name fi_getinfo made of a node and service
		 * in the shm domain (fi_ns://NODE:SERVICE, with FI_SOURCE),
		 * which the endpoint takes, as libfabric's shm does. An
		 * fi_shm://NAME src_addr is not passed: libfabric's shm makes
		 * each endpoint a name of its own under it (NAME:UID:N), and
		 * the tree does as much (fi_shm://fabricfs.N); fi_setname
		 * takes a name as it is. An FI_EP_RDM endpoint listens there,
		 * an FI_EP_MSG one connects from there. */
		char a[128] = "";
		if (info->handle)
			snprintf(a, sizeof a, "%s", ffs_pep_name(info->handle));
		else if (info->src_addr && info->src_addrlen >= sizeof(sa_family_t) &&
			 ((ffs_name_len(info->src_addr, info->src_addrlen) && !strncmp(info->src_addr, "fi_ns://", 8)) ||
			  ffs_sockaddr_port(info->src_addr)) &&
			 (ret = ffs_addr_format(info->src_addr, info->src_addrlen, a, sizeof a)))
			goto fail;
		if (a[0] && (ret = ffs_ctl(&ep->obj, "setname %s", a)))
			goto fail;
	}
	/* The requests the daemon holds at close come back as FI_ECANCELED
	 * completions (the tree drops them otherwise), so that their records
	 * are reclaimed; none reaches the application (ep_close). */
	if ((ret = ffs_set(&ep->obj, "attr/cancel_on_close", "true")))
		goto fail;
	init_fid(ep, FI_CLASS_EP, context);
	*out = &ep->ep_fid;
	return 0;
fail:
	if (ep->buffered)
		buffered_forget(ep);
	ffs_obj_close(&ep->obj);
	fi_freeinfo(ep->info);
	free(ep);
	return ret;
}

/* ffs_srx_open is fi_srx_context: a tree srx with the attributes of attr
 * (its size; the caps and op_flags are the provider's to apply), enabled
 * at once, as libfabric's contexts take receives as soon as they exist. */
int ffs_srx_open(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **out, void *context)
{
	if (!out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	struct ffs_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->obj.ctl = -1;
	ep->is_srx = true;
	/* Its receives name a source with FI_DIRECTED_RECV only, as those of
	 * a connectionless endpoint. */
	ep->type = FI_EP_RDM;
	ep->caps = attr ? attr->caps : 0;
	ep->rx_op_flags = attr ? attr->op_flags : 0;
	ep->max_msg_size = dom->info->ep_attr ? dom->info->ep_attr->max_msg_size : SIZE_MAX;
	int ret;
	if (!(ep->info = fi_dupinfo(dom->info))) {
		free(ep);
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&ep->lock, NULL);
	if ((ret = ffs_obj_clone(&ep->obj, dom->dir, "srx")) ||
	    (attr && attr->size && (ret = ffs_set(&ep->obj, "attr/size", "%zu", attr->size))) || (ret = enable(ep))) {
		ffs_ring_unmap(&ep->rx);
		ffs_obj_close(&ep->obj);
		region_free(&ep->srx.r);
		free_ep(ep);
		return ret;
	}
	ep->ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &ep_fi_ops;
	ep->ep_fid.ops = &ep_ops;
	ep->ep_fid.cm = &ep_cm_ops;
	ep->ep_fid.msg = &ep_msg_ops;
	ep->ep_fid.tagged = &ep_tagged_ops;
	ep->ep_fid.rma = &ep_rma_ops;
	ep->ep_fid.atomic = &ffs_atomic_ops; /* post() refuses them: a receive context only receives */
	ffs_domain_hold(dom, 1);
	*out = &ep->ep_fid;
	return 0;
}

/* ffs_ctx_open is fi_tx_context (rx false) and fi_rx_context of the
 * scalable endpoint of sep.c whose tree endpoint is sep_id: a tree endpoint
 * made that context (`context SEP tx|rx INDEX`), which takes the scalable
 * endpoint's fi_info (info: its type, caps and op flags here), then
 * binds, enables and moves data as any endpoint of this file. */
int ffs_ctx_open(struct ffs_domain *dom, const struct fi_info *info, unsigned sep_id, bool rx, int index,
		 uint64_t caps, uint64_t op_flags, size_t size, struct fid_ep **out, void *context)
{
	if (!out || index < 0)
		return -FI_EINVAL;
	struct ffs_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->obj.ctl = -1;
	ep->type = info->ep_attr ? info->ep_attr->type : FI_EP_RDM;
	ep->caps = caps;
	if (rx)
		ep->rx_op_flags = op_flags;
	else
		ep->tx_op_flags = op_flags;
	int ret = -FI_ENOMEM;
	if (!(ep->info = fi_dupinfo(info)) || (ret = ffs_obj_clone(&ep->obj, dom->dir, "ep")) ||
	    (ret = ffs_ctl(&ep->obj, "context %u %s %d", sep_id, rx ? "rx" : "tx", index)) ||
	    (size && (ret = ffs_set(&ep->obj, rx ? "attr/rx_size" : "attr/tx_size", "%zu", size))) ||
	    (ret = ffs_set(&ep->obj, "attr/cancel_on_close", "true"))) {
		ffs_obj_close(&ep->obj);
		fi_freeinfo(ep->info);
		free(ep);
		return ret;
	}
	init_fid(ep, rx ? FI_CLASS_RX_CTX : FI_CLASS_TX_CTX, context);
	*out = &ep->ep_fid;
	return 0;
}
