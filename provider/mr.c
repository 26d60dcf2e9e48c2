/*
 * mr.c: memory regions (fi_mr_reg, fi_mr_regv, fi_mr_regattr, fi_close)
 * and the lookup the data path uses to name a buffer by a tree region.
 *
 * A registration makes the application's buffer the daemon's memory: the
 * pages covering [buf, buf+len) are replaced by a shared mapping of a tree
 * region's data (docs/provider.md "Memory registration"), their contents
 * copied in first, so the application's own buffer is what work requests
 * name (zero copy both ways) and what peers' RMA reads and writes. The
 * tree region's attr/base is buf's offset in its first page, so peers'
 * addresses count from buf: from 0 (offsets), or with FI_MR_VIRT_ADDR in
 * the domain's mr_mode from buf's address (attr/iova). fi_close puts
 * private memory with the same contents back.
 *
 * A page can be one mapping only, so registrations share pages through
 * the tree: the pages of a registration that no live registration covers
 * yet get tree memory of their own (a "piece", a region of the tree made
 * for them and mapped over them), and the registration's tree region is
 * made of windows (`window MRID OFFSET LEN`) onto the regions that hold
 * its pages now: those pieces and the live registrations that cover the
 * rest. Each registration has its own key, access, counters and lifetime;
 * every one of them reaches the same bytes, the application's. fi_close
 * puts private memory back over the pages no other live registration
 * covers. A registration that cannot be mapped (the calling thread's
 * stack, an address range without memory, pages another domain of the
 * tree has registered) is local-only (its operations copy through the
 * data path's buffers, or use the mapping that holds the bytes when they
 * were posted without a desc), and asking it for remote access fails
 * rather than give peers a key to memory that is not the application's.
 */
#include "ffs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* The access flags a tree region takes (docs/tree.md, mr attr/access). */
static const struct {
	uint64_t flag;
	const char *name;
} access_names[] = {
	{FI_SEND, "FI_SEND"},
	{FI_RECV, "FI_RECV"},
	{FI_READ, "FI_READ"},
	{FI_WRITE, "FI_WRITE"},
	{FI_REMOTE_READ, "FI_REMOTE_READ"},
	{FI_REMOTE_WRITE, "FI_REMOTE_WRITE"},
};

#define REMOTE_ACCESS (FI_REMOTE_READ | FI_REMOTE_WRITE)

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? (size_t)p : 4096;
}

/* page_is_zero says whether the page at p holds only zero bytes. */
static bool page_is_zero(const uint8_t *p, size_t page)
{
	static const uint8_t zero[256];
	for (size_t i = 0; i < page; i += sizeof zero)
		if (memcmp(p + i, zero, sizeof zero) != 0)
			return false;
	return true;
}

/* copy_own copies n bytes (whole pages) of this process's memory from src
 * to dst, leaving alone the pages of dst whose source is all zero (dst is
 * new shared memory, zero already: a page never written stays unallocated
 * in the daemon, so registering a large untouched buffer costs no memory).
 * It fails (false) instead of faulting where src has no readable memory:
 * an application may register addresses it has not mapped (fi_mr(3)). */
static bool copy_own(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t buf[64 * 1024];
	size_t chunk = sizeof buf / page * page;
	for (size_t off = 0; off < n;) {
		size_t want = n - off < chunk ? n - off : chunk;
		struct iovec local = {buf, want}, remote = {(void *)(src + off), want};
		ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0 || (size_t)got % page != 0)
			return false;
		for (size_t i = 0; i < (size_t)got; i += page)
			if (!page_is_zero(buf + i, page))
				memcpy(dst + off + i, buf + i, page);
		off += got;
	}
	return true;
}

/* on_own_stack says whether [p, p+n) meets the calling thread's stack:
 * the frames of this call live there, and their writes between the copy
 * and the replacement of the pages would be lost. */
static bool on_own_stack(const uint8_t *p, size_t n)
{
	pthread_attr_t a;
	void *lo;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return true; /* unknown: assume the worst */
	int ret = pthread_attr_getstack(&a, &lo, &size);
	pthread_attr_destroy(&a);
	if (ret != 0)
		return true;
	const uint8_t *s = lo;
	return p < s + size && s < p + n;
}

/*
 * The process's mapped regions, of every domain: a page is one mapping
 * whatever domain registered it. pages_lock is held across a whole
 * registration or unregistration (tree calls included), so that two
 * cannot take or give back the same page at once; it is never held while
 * a domain's lock is taken, so the data path's ffs_mr_lookup (under
 * dom->lock) never waits for the tree.
 */
static pthread_mutex_t pages_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ffs_mr *mapped; /* linked by next_mapped, under pages_lock */

/*
 * fork: a child would share the mapped pages with its parent, heap
 * neighbours of registered buffers included, and each would see the
 * other's writes. So the child replaces them at once with private copies
 * (as fork gives of any private memory), and its registrations become
 * local only: fabric(7), "data buffers that have been registered with a
 * fabric domain may not be available in a child process". pages_lock is
 * held across fork, so the list is whole in the child.
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&pages_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&pages_lock);
}

static int unmap_pages(uint8_t *pages, size_t len);

static void fork_child(void)
{
	/* Pages two regions hold get private memory twice: the second copy
	 * is of the first, the same bytes. If no private memory can be had,
	 * the pages stay shared. */
	for (struct ffs_mr *m = mapped; m; m = m->next_mapped)
		unmap_pages(m->map, m->map_len);
	for (struct ffs_mr *m = mapped; m; m = m->next_mapped)
		m->map = NULL;
	mapped = NULL;
	pthread_mutex_unlock(&pages_lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_init(void)
{
	if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
		ffs_warn("pthread_atfork: a child made by fork will share registered pages with its parent");
}

/*
 * A run of a registration's pages: [at, at+len), held by the mapping of
 * live registration src from its byte src_off, or by none (src NULL: the
 * run gets a piece of its own, piece).
 */
struct run {
	uint8_t *at;
	size_t len;
	struct ffs_mr *src;
	size_t src_off;
	struct ffs_obj piece;
};

/* same_tree_domain says whether two domains are one domain of the tree:
 * a window is onto a region of the same tree domain. */
static bool same_tree_domain(const struct ffs_domain *a, const struct ffs_domain *b)
{
	return a == b || strcmp(a->dir, b->dir) == 0;
}

/* coverer is a mapped region holding the page at p, of dom's tree domain
 * if there is one, else of another (*foreign set), else NULL. Under
 * pages_lock. */
static struct ffs_mr *coverer(const struct ffs_domain *dom, const uint8_t *p, bool *foreign)
{
	struct ffs_mr *other = NULL;
	*foreign = false;
	for (struct ffs_mr *m = mapped; m; m = m->next_mapped)
		if (p >= m->map && p < m->map + m->map_len) {
			if (!dom || same_tree_domain(m->dom, dom))
				return m;
			other = m;
		}
	*foreign = other != NULL;
	return NULL;
}

/* uncovered_end is where a run of pages from p that no mapped region
 * holds ends: the first mapped region's start after p, or end. Under
 * pages_lock. */
static uint8_t *uncovered_end(const uint8_t *p, uint8_t *end)
{
	for (struct ffs_mr *m = mapped; m; m = m->next_mapped)
		if (m->map > p && m->map < end)
			end = m->map;
	return end;
}

/* plan splits [start, end) into runs: held by a mapped region of dom's
 * tree domain, or by none. It returns the number of runs (*out malloc'd),
 * 0 when a page is held by another domain's region only, or -FI_ENOMEM.
 * Under pages_lock. */
static ssize_t plan(const struct ffs_domain *dom, uint8_t *start, uint8_t *end, struct run **out)
{
	struct run *runs = NULL;
	size_t n = 0, cap = 0;
	for (uint8_t *p = start; p < end;) {
		bool foreign;
		struct ffs_mr *src = coverer(dom, p, &foreign);
		if (foreign) {
			free(runs);
			return 0;
		}
		uint8_t *to = src ? (src->map + src->map_len < end ? src->map + src->map_len : end) : uncovered_end(p, end);
		if (n == cap) {
			cap = cap ? 2 * cap : 4;
			struct run *more = realloc(runs, cap * sizeof *runs);
			if (!more) {
				free(runs);
				return -FI_ENOMEM;
			}
			runs = more;
		}
		runs[n++] = (struct run){.at = p, .len = to - p, .src = src, .src_off = src ? p - src->map : 0,
					 .piece = {.ctl = -1}};
		p = to;
	}
	*out = runs;
	return n;
}

/* mr_mode_has says whether the domain's mr_mode has bit, FI_MR_BASIC
 * meaning FI_MR_VIRT_ADDR, FI_MR_ALLOCATED and FI_MR_PROV_KEY (fi_mr(3)). */
static bool mr_mode_has(const struct ffs_domain *dom, int bit)
{
	int mode = dom->info->domain_attr->mr_mode;
	if (mode == FI_MR_BASIC)
		mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	return mode & bit;
}

/* tree_register makes and registers the tree region for mr (map_len
 * bytes, base, access, key), filling obj, tree_desc and mr_fid.key: made
 * of windows onto the runs' regions, or with no runs memory of its own. */
static int tree_register(struct ffs_mr *mr, uint64_t access, uint64_t requested_key, const uint8_t *auth_key,
			 size_t auth_key_size, const struct run *runs, size_t nruns)
{
	struct ffs_domain *dom = mr->dom;
	int ret = ffs_obj_clone(&mr->obj, dom->dir, "mr");
	if (ret)
		return ret;
	char names[160] = "";
	size_t used = 0;
	for (size_t i = 0; i < sizeof access_names / sizeof access_names[0]; i++)
		if (access & access_names[i].flag)
			used += snprintf(names + used, sizeof names - used, "%s%s", used ? "," : "", access_names[i].name);
	ret = ffs_set(&mr->obj, "attr/len", "%zu", mr->map_len);
	if (!ret)
		ret = ffs_set(&mr->obj, "attr/base", "%zu", mr->base);
	/* Access 0 keeps the tree's default: the owner's own operations. */
	if (!ret && used)
		ret = ffs_set(&mr->obj, "attr/access", "%s", names);
	/* With FI_MR_PROV_KEY the requested key is ignored (fi_mr(3)). */
	if (!ret && !mr_mode_has(dom, FI_MR_PROV_KEY))
		ret = ffs_set(&mr->obj, "attr/requested_key", "%#llx", (unsigned long long)requested_key);
	/* FI_MR_VIRT_ADDR: "Registered memory regions are referenced by peers
	 * using the virtual address of the registered memory region, rather
	 * than a 0-based offset" (fi_domain(3)): the buffer's address names
	 * its first byte, attr/base. */
	if (!ret && mr_mode_has(dom, FI_MR_VIRT_ADDR))
		ret = ffs_set(&mr->obj, "attr/iova", "%#llx", (unsigned long long)(uintptr_t)mr->addr);
	/* fi_mr(3): "Only peer endpoints that are programmed to use the same
	 * authorization key may access the memory region." */
	if (!ret)
		ret = ffs_auth_key(&mr->obj, dom->info->domain_attr, auth_key, auth_key_size);
	for (size_t i = 0; i < nruns && !ret; i++)
		ret = ffs_ctl(&mr->obj, "window %u %zu %zu", runs[i].src ? runs[i].src->obj.id : runs[i].piece.id,
			      runs[i].src_off, runs[i].len);
	if (!ret)
		ret = ffs_ctl(&mr->obj, "reg");
	uint64_t key = 0;
	if (!ret)
		ret = ffs_get_u64(&mr->obj, "attr/key", &key);
	if (!ret)
		ret = ffs_get_u64(&mr->obj, "attr/desc", &mr->tree_desc);
	if (ret) {
		ffs_obj_close(&mr->obj);
		return ret;
	}
	mr->mr_fid.key = key;
	return 0;
}

/* map_pages replaces the application's pages (len bytes at pages) by the
 * tree region obj's data, their contents copied in. It returns false, the
 * pages untouched, if they could not be read or replaced. */
static bool map_pages(const struct ffs_obj *obj, uint8_t *pages, size_t len)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/data", obj->dir) >= (int)sizeof path)
		return false;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	void *tmp = MAP_FAILED;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size == len)
		tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (tmp == MAP_FAILED)
		return false;
	/* Copy, then move the shared mapping over the pages in one call, so
	 * the pages are never absent. */
	if (!copy_own(tmp, pages, len) || mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, pages) == MAP_FAILED) {
		munmap(tmp, len);
		return false;
	}
	return true;
}

/* unmap_pages puts private memory with the same contents back over len
 * bytes of pages at pages. */
static int unmap_pages(uint8_t *pages, size_t len)
{
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp == MAP_FAILED)
		return -FI_ENOMEM;
	/* Pages still zero stay untouched in the new private memory. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < len; i += page)
		if (!page_is_zero(pages + i, page))
			memcpy((uint8_t *)tmp + i, pages + i, page);
	if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, pages) == MAP_FAILED) {
		int err = errno;
		munmap(tmp, len);
		return -ffs_fi_errno(err);
	}
	return 0;
}

/* unmap_uncovered puts private memory back over the pages of [start,
 * start+len) that no mapped region holds. Under pages_lock. It goes on
 * past a failure (the pages it leaves stay a shared mapping whose file
 * the mapping keeps: the application's bytes either way) and returns the
 * first. */
static int unmap_uncovered(uint8_t *start, size_t len)
{
	int ret = 0;
	uint8_t *end = start + len;
	for (uint8_t *p = start; p < end;) {
		bool foreign;
		struct ffs_mr *m = coverer(NULL, p, &foreign);
		uint8_t *to = m ? (m->map + m->map_len < end ? m->map + m->map_len : end) : uncovered_end(p, end);
		if (!m) {
			int err = unmap_pages(p, to - p);
			if (!ret)
				ret = err;
		}
		p = to;
	}
	return ret;
}

/* map_runs gives the runs no region holds pieces of their own: a tree
 * region of their length (the owner's own access) mapped over their
 * pages. It returns 0; or, every run's pages as they were, the tree's
 * error, or 1 if pages could not be mapped. */
static int map_runs(struct ffs_domain *dom, struct run *runs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct run *r = &runs[i];
		if (r->src)
			continue;
		int ret = ffs_obj_clone(&r->piece, dom->dir, "mr");
		if (!ret)
			ret = ffs_set(&r->piece, "attr/len", "%zu", r->len);
		if (!ret)
			ret = ffs_ctl(&r->piece, "reg");
		if (!ret && !map_pages(&r->piece, r->at, r->len))
			ret = 1;
		if (ret) {
			ffs_obj_close(&r->piece);
			for (size_t j = 0; j < i; j++)
				if (!runs[j].src) {
					unmap_pages(runs[j].at, runs[j].len);
					ffs_obj_close(&runs[j].piece);
				}
			return ret;
		}
	}
	return 0;
}

/* link puts mr in its domain's list; unlink takes it out. */
static void link_mr(struct ffs_mr *mr)
{
	pthread_mutex_lock(&mr->dom->lock);
	mr->next = mr->dom->mrs;
	mr->dom->mrs = mr;
	pthread_mutex_unlock(&mr->dom->lock);
}

static void unlink_mr(struct ffs_mr *mr)
{
	pthread_mutex_lock(&mr->dom->lock);
	for (struct ffs_mr **p = &mr->dom->mrs; *p; p = &(*p)->next)
		if (*p == mr) {
			*p = mr->next;
			break;
		}
	pthread_mutex_unlock(&mr->dom->lock);
}

static int mr_close(struct fid *fid)
{
	struct ffs_mr *mr = container_of(fid, struct ffs_mr, mr_fid.fid);
	/* Out of the lookups first, so no new work request names the tree
	 * region while its pages go back. */
	unlink_mr(mr);
	if (mr->map) {
		pthread_mutex_lock(&pages_lock);
		for (struct ffs_mr **p = &mapped; *p; p = &(*p)->next_mapped)
			if (*p == mr) {
				*p = mr->next_mapped;
				break;
			}
		/* Pages other registrations hold stay theirs. */
		int ret = unmap_uncovered(mr->map, mr->map_len);
		pthread_mutex_unlock(&pages_lock);
		if (ret)
			ffs_warn("%s: putting private memory back: %s; the pages stay shared", mr->obj.dir,
				 fi_strerror(-ret));
	}
	ffs_obj_close(&mr->obj);
	free(mr);
	return 0;
}

static int mr_control(struct fid *fid, int command, void *arg)
{
	/* A region is enabled once registered (fi_mr_enable), bound
	 * counters or not: the domain has neither FI_MR_RMA_EVENT nor
	 * FI_MR_MMU_NOTIFY (fi_mr_refresh). */
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

/* mr_bind is fi_mr_bind of a counter, for FI_REMOTE_WRITE, FI_REMOTE_READ
 * or both: the tree counts peers' writes or reads that reach the region
 * on it (docs/tree.md, the mr's `bind cntr`). A local-only region is
 * reached by no peer, so its binding has nothing to count. Endpoint
 * bindings (FI_MR_ENDPOINT) are not in the domains' mr_mode. */
static int mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ffs_mr *mr = container_of(fid, struct ffs_mr, mr_fid.fid);
	if (!bfid || !ffs_cntr_wait(bfid))
		return -FI_EINVAL;
	if (!flags || (flags & ~(FI_REMOTE_READ | FI_REMOTE_WRITE)))
		return -FI_EBADFLAGS;
	struct ffs_cntr *c = container_of(bfid, struct ffs_cntr, cntr_fid.fid);
	if (c->dom != mr->dom)
		return -FI_EINVAL;
	if (!mr->map)
		return 0;
	return ffs_ctl(&mr->obj, "bind cntr %u %s%s%s", c->obj.id, flags & FI_REMOTE_READ ? "remote_read" : "",
		       flags == (FI_REMOTE_READ | FI_REMOTE_WRITE) ? "," : "",
		       flags & FI_REMOTE_WRITE ? "remote_write" : "");
}

static struct fi_ops mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = mr_bind,
	.control = mr_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

/* share makes mr's pages (map_len bytes from addr's page) the tree's and
 * registers them: with memory of its own if no live registration holds
 * any of them, else as windows onto the regions that hold them and pieces
 * for the rest. It leaves mr local only (map NULL, returning 0) when its
 * pages cannot be shared: on the calling thread's stack, without readable
 * memory, or held by another tree domain's registration (*foreign). Under
 * pages_lock. */
static int share(struct ffs_mr *mr, uint64_t access, uint64_t requested_key, const uint8_t *auth_key,
		 size_t auth_key_size, bool *foreign)
{
	uint8_t *pages = (uint8_t *)mr->addr - mr->base;
	if (on_own_stack(pages, mr->map_len))
		return 0;
	struct run *runs;
	ssize_t n = plan(mr->dom, pages, pages + mr->map_len, &runs);
	if (n <= 0) {
		*foreign = n == 0;
		return n;
	}
	int ret = 0;
	if (n == 1 && !runs[0].src) {
		/* No page is held yet: memory of its own, mapped over them. */
		ret = tree_register(mr, access, requested_key, auth_key, auth_key_size, NULL, 0);
		if (!ret && !map_pages(&mr->obj, pages, mr->map_len)) {
			ffs_obj_close(&mr->obj);
			mr->mr_fid.key = FI_KEY_NOTAVAIL;
		} else if (!ret) {
			mr->map = pages;
		}
	} else if ((ret = map_runs(mr->dom, runs, n)) == 1) {
		ret = 0; /* local only */
	} else if (!ret) {
		ret = tree_register(mr, access, requested_key, auth_key, auth_key_size, runs, n);
		/* The registration holds the pieces' memory now, or failed. */
		for (ssize_t i = 0; i < n; i++)
			if (!runs[i].src) {
				if (ret)
					unmap_pages(runs[i].at, runs[i].len);
				ffs_obj_close(&runs[i].piece);
			}
		if (!ret)
			mr->map = pages;
	}
	free(runs);
	if (mr->map) {
		mr->next_mapped = mapped;
		mapped = mr;
	}
	return ret;
}

/* reg registers [buf, buf+len) of the domain fid, with an authorization
 * key (auth_key_size 0: the domain's). */
static int reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t requested_key,
	       const uint8_t *auth_key, size_t auth_key_size, void *context, struct fid_mr **out)
{
	if (fid->fclass != FI_CLASS_DOMAIN || !out || len == 0 || !buf)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(fid, struct ffs_domain, domain_fid.fid);
	uintptr_t first = (uintptr_t)buf, page = page_size();
	if (first + len < first || first + len > UINTPTR_MAX - page)
		return -FI_EINVAL;
	uintptr_t start = first & ~(page - 1), end = (first + len + page - 1) & ~(page - 1);

	struct ffs_mr *mr = calloc(1, sizeof *mr);
	if (!mr)
		return -FI_ENOMEM;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = context;
	mr->mr_fid.fid.ops = &mr_fi_ops;
	mr->mr_fid.mem_desc = mr;
	mr->mr_fid.key = FI_KEY_NOTAVAIL;
	mr->dom = dom;
	mr->obj.ctl = -1;
	mr->addr = buf;
	mr->len = len;
	mr->map_len = end - start;
	mr->base = first - start;

	pthread_once(&fork_once, fork_init);
	pthread_mutex_lock(&pages_lock);
	bool foreign = false;
	int ret = share(mr, access, requested_key, auth_key, auth_key_size, &foreign);
	pthread_mutex_unlock(&pages_lock);
	if (!ret && !mr->map && (access & REMOTE_ACCESS)) {
		ffs_warn("fi_mr_reg of %zu bytes at %p: its pages are another domain's registration's, or cannot be "
			 "shared with the daemon; peers cannot reach it", len, buf);
		ret = foreign ? -FI_EBUSY : -FI_EOPNOTSUPP;
	}
	if (ret) {
		free(mr);
		return ret;
	}
	link_mr(mr);
	pthread_mutex_lock(&dom->lock);
	struct ffs_eq *eq = dom->reg_mr_events ? dom->eq : NULL;
	pthread_mutex_unlock(&dom->lock);
	if (eq && (ret = ffs_eq_mr_complete(eq, &mr->mr_fid))) {
		/* No event, no registration: the application would wait for it. */
		fi_close(&mr->mr_fid.fid);
		return ret;
	}
	*out = &mr->mr_fid;
	return 0;
}

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		  uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	return reg(fid, buf, len, access, requested_key, NULL, 0, context, mr);
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access, uint64_t offset,
		   uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	/* The domain's mr_iov_limit is 1. */
	if (count != 1 || !iov)
		return -FI_EINVAL;
	return reg(fid, iov[0].iov_base, iov[0].iov_len, access, requested_key, NULL, 0, context, mr);
}

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	if (!attr || attr->iov_count != 1 || !attr->mr_iov)
		return -FI_EINVAL;
	if (attr->iface != FI_HMEM_SYSTEM)
		return -FI_EOPNOTSUPP;
	return reg(fid, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access, attr->requested_key,
		   attr->auth_key, attr->auth_key_size, attr->context, mr);
}

struct fi_ops_mr ffs_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

/* holds says whether mr's mapping holds [p, p+len). */
static bool holds(const struct ffs_mr *mr, const uint8_t *p, size_t len)
{
	return mr->map && p >= mr->map && len <= mr->map_len && (size_t)(p - mr->map) <= mr->map_len - len;
}

int ffs_mr_lookup(struct ffs_domain *dom, void *desc, const void *buf, size_t len, uint64_t *tree_desc,
		  uint64_t *tree_off)
{
	const uint8_t *p = buf;
	struct ffs_mr *found = NULL, *by_addr = NULL;
	pthread_mutex_lock(&dom->lock);
	/* desc is the application's: it counts only if it is a region of
	 * this domain, and then alone. A local-only region's bytes go
	 * through copies even if another registration maps them now, since
	 * that one may close while the operation runs. Without a desc of
	 * the domain, the bytes' mapping, if any, is used. */
	for (struct ffs_mr *m = dom->mrs; m && !found; m = m->next) {
		if (desc && (void *)m == desc)
			found = m;
		else if (!by_addr && holds(m, p, len))
			by_addr = m;
	}
	if (!found)
		found = by_addr;
	int ret = -FI_ENOENT;
	if (found && holds(found, p, len)) {
		*tree_desc = found->tree_desc;
		*tree_off = p - found->map;
		ret = 0;
	}
	pthread_mutex_unlock(&dom->lock);
	return ret;
}
