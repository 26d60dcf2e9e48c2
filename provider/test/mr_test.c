/*
 * mr_test.c: memory registration over a mounted tree (FI_FABRICFS_ROOT):
 * a registered buffer keeps its contents and becomes the tree region's
 * memory (writes through mr/N/data appear in it and the reverse), the
 * tree region's attributes (len the page cover, base the buffer's offset
 * in its first page, access, requested key), a peer's RMA write and read
 * at addresses counted from the buffer, ffs_mr_lookup, fi_close
 * giving private memory back with the contents intact; registrations
 * that share pages, on the stack, or of memory that is not there; fork;
 * regv and regattr.
 */
#include "ffstest.h"

#include <dirent.h>
#include <sys/uio.h>
#include <sys/wait.h>

static size_t page;
/* The domain's key rule: with FI_MR_PROV_KEY (verbs) the key is the
 * provider's, not the requested one. */
static bool prov_key;

/* fill writes a pattern seeded by seed over n bytes. */
static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

/* maps_line finds the /proc/self/maps line of the mapping holding p. */
static bool maps_line(const void *p, char *line, size_t size)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	bool found = false;
	while (fgets(line, size, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* shared says whether p's page is a shared mapping ("rw-s"). */
static bool shared(const void *p)
{
	char line[512], perms[8];
	return maps_line(p, line, sizeof line) && sscanf(line, "%*s %7s", perms) == 1 && perms[3] == 's';
}

static const char *tree_dir(struct fid_mr *mr)
{
	return container_of(mr, struct ffs_mr, mr_fid)->obj.dir;
}

static uint64_t tree_num(struct fid_mr *mr, const char *name)
{
	char v[64];
	if (obj_read(tree_dir(mr), name, v, sizeof v) <= 0)
		return UINT64_MAX;
	return strtoull(v, NULL, 0);
}

/* basic: one registration of [buf+100, buf+100+5000) in three pages. */
static void basic(struct ffs_domain *dom)
{
	uint8_t *buf = aligned_alloc(page, 3 * page), want[3 * 4096 * 4];
	fill(buf, 3 * page, 1);
	memcpy(want, buf, 3 * page);
	struct fid_mr *mr;
	int ret = fi_mr_reg(&dom->domain_fid, buf + 100, 5000, FI_SEND | FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ, 0,
			    0x1234, 0, &mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	if (ret)
		return;
	CHECK(memcmp(buf, want, 3 * page) == 0, "registration changed the buffer's pages");
	CHECK(shared(buf + 100) && shared(buf + page), "the buffer's pages are not a shared mapping");
	CHECK(!shared(buf + 2 * page), "the page after the buffer's cover is shared");
	CHECK(fi_mr_key(mr) == tree_num(mr, "attr/key") && (prov_key || fi_mr_key(mr) == 0x1234),
	      "key %#llx, want the tree's, and the requested 0x1234 without FI_MR_PROV_KEY",
	      (unsigned long long)fi_mr_key(mr));
	CHECK(tree_num(mr, "attr/len") == 2 * page && tree_num(mr, "attr/base") == 100, "tree len %llu base %llu",
	      (unsigned long long)tree_num(mr, "attr/len"), (unsigned long long)tree_num(mr, "attr/base"));
	char v[256];
	CHECK(obj_read(tree_dir(mr), "status", v, sizeof v) > 0 && strstr(v, "registered len=") &&
		      !strstr(v, "unregistered"),
	      "status %s", v);
	CHECK(obj_read(tree_dir(mr), "attr/access", v, sizeof v) > 0 &&
		      strcmp(v, "[ FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE ]") == 0,
	      "access %s", v);

	/* The tree's data is the buffer: both ways. */
	char p[PATH_MAX];
	int fd = snprintf(p, sizeof p, "%s/data", tree_dir(mr)) < (int)sizeof p ? open(p, O_RDWR) : -1;
	CHECK(fd >= 0, "open data");
	CHECK(pwrite(fd, "written by the tree", 19, 108) == 19, "pwrite");
	CHECK(memcmp(buf + 108, "written by the tree", 19) == 0, "a write through mr/N/data is not in the buffer");
	memcpy(buf + 2000, "by the application", 18);
	char back[18];
	CHECK(pread(fd, back, 18, 2000) == 18 && memcmp(back, "by the application", 18) == 0,
	      "the application's write is not in mr/N/data");
	close(fd);
	memcpy(want + 108, "written by the tree", 19);
	memcpy(want + 2000, "by the application", 18);

	/* lookup: by desc and by address; offsets from the region's byte 0. */
	uint64_t desc = 0, off = 0;
	ret = ffs_mr_lookup(dom, fi_mr_desc(mr), buf + 150, 10, &desc, &off);
	CHECK(ret == 0 && desc == tree_num(mr, "attr/desc") && off == 150, "lookup by desc: %d desc %llu off %llu", ret,
	      (unsigned long long)desc, (unsigned long long)off);
	ret = ffs_mr_lookup(dom, NULL, buf + page, 100, &desc, &off);
	CHECK(ret == 0 && off == page, "lookup by address: %d off %llu", ret, (unsigned long long)off);
	CHECK(ffs_mr_lookup(dom, NULL, buf + 2 * page - 10, 20, &desc, &off) == -FI_ENOENT, "lookup past the cover");
	ret = ffs_mr_lookup(dom, (void *)buf, buf + 150, 10, &desc, &off);
	CHECK(ret == 0 && off == 150, "lookup with a desc not of the domain goes by address: %d", ret);

	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", tree_dir(mr));
	CHECK(fi_close(&mr->fid) == 0, "fi_close");
	CHECK(memcmp(buf, want, 3 * page) == 0, "fi_close changed the contents");
	CHECK(!shared(buf + 100) && !shared(buf + page), "after fi_close the pages are still shared");
	buf[100] = 'x'; /* private and writable */
	struct stat st;
	for (int i = 0; i < 100 && stat(dir, &st) == 0; i++)
		usleep(10000);
	CHECK(stat(dir, &st) != 0, "the tree region %s outlives fi_close", dir);
	free(buf);
}

/* connected_pair connects two tree endpoints of the domain (a connects
 * to a passive endpoint, b is the one it accepted), for peers' RMA. */
static bool connected_pair(struct ffs_domain *dom, struct ffs_obj *eq, struct ffs_obj *cq, struct ffs_obj *pep,
			   struct ffs_obj *a, struct ffs_obj *b)
{
	char addr[256], id[32], ev[4096];
	if (ffs_obj_clone(eq, dom->dir, "eq") || ffs_obj_clone(cq, dom->dir, "cq") || ffs_obj_clone(pep, dom->dir, "pep") ||
	    ffs_ctl(pep, "bind eq %u", eq->id) || ffs_ctl(pep, "listen 127.0.0.1:0") ||
	    obj_read(pep->dir, "local", addr, sizeof addr) <= 0)
		return false;
	if (ffs_obj_clone(a, dom->dir, "ep") || ffs_ctl(a, "bind eq %u", eq->id) ||
	    ffs_ctl(a, "bind cq %u send,recv", cq->id) || ffs_ctl(a, "enable") ||
	    ffs_ctl(a, "connect %s", addr))
		return false;
	if (obj_read(pep->dir, "listen", id, sizeof id) <= 0 || ffs_obj_adopt(b, dom->dir, "ep", atoi(id)) ||
	    ffs_ctl(b, "bind eq %u", eq->id) || ffs_ctl(b, "bind cq %u send,recv", cq->id) || ffs_ctl(b, "enable") ||
	    ffs_ctl(b, "accept"))
		return false;
	/* connreq, then both ends' connected, in any number of reads. */
	int connected = 0;
	for (int i = 0; i < 10 && connected < 2; i++) {
		if (obj_read(eq->dir, "events", ev, sizeof ev) < 0)
			return false;
		for (char *p = ev; (p = strstr(p, "connected ")); p++)
			connected++;
	}
	return connected == 2;
}

/* peer_rma: a peer's RMA write and read with the registration's key and
 * addresses counted from the buffer land in and come from the buffer. */
static void peer_rma(struct ffs_domain *dom)
{
	struct ffs_obj eq, cq, pep, a, b, src;
	if (!connected_pair(dom, &eq, &cq, &pep, &a, &b)) {
		CHECK(false, "connecting two tree endpoints");
		return;
	}
	int ret = ffs_obj_clone(&src, dom->dir, "mr");
	if (!ret)
		ret = ffs_set(&src, "attr/len", "4096");
	if (!ret)
		ret = ffs_ctl(&src, "reg");
	CHECK(ret == 0, "the peer's region: %d", ret);
	char p[PATH_MAX];
	int fd = snprintf(p, sizeof p, "%s/data", src.dir) < (int)sizeof p ? open(p, O_RDWR) : -1;
	CHECK(fd >= 0 && pwrite(fd, "payload!", 8, 0) == 8, "filling the peer's region");

	uint8_t *buf = aligned_alloc(page, 2 * page), want[2 * 4096];
	fill(buf, 2 * page, 3);
	memcpy(buf + 100 + 40, "secret!!", 8);
	struct fid_mr *mr;
	ret = fi_mr_reg(&dom->domain_fid, buf + 100, 1000, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0x77, 0, &mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	memcpy(want, buf, 2 * page);
	memcpy(want + 100 + 16, "payload!", 8);

	ret = ffs_ctl(&a, "write %u 0 8 16 %#llx", src.id, (unsigned long long)fi_mr_key(mr));
	CHECK(ret == 0, "the peer's write: %d", ret);
	for (int i = 0; i < 500 && memcmp(buf + 100 + 16, "payload!", 8) != 0; i++)
		usleep(10000);
	CHECK(memcmp(buf, want, 2 * page) == 0, "after the peer's write at address 16, the buffer is not as expected "
						"(bytes 116..124: %.8s)", buf + 116);
	ret = ffs_ctl(&a, "read %u 100 8 40 %#llx", src.id, (unsigned long long)fi_mr_key(mr));
	char got[8] = "";
	CHECK(ret == 0 && pread(fd, got, 8, 100) == 8 && memcmp(got, "secret!!", 8) == 0,
	      "the peer's read at address 40: %d, %.8s", ret, got);
	if (mr)
		fi_close(&mr->fid);
	CHECK(memcmp(buf, want, 2 * page) == 0, "fi_close changed the contents");
	close(fd);
	ffs_obj_close(&src);
	ffs_obj_close(&a);
	ffs_obj_close(&b);
	ffs_obj_close(&pep);
	ffs_obj_close(&cq);
	ffs_obj_close(&eq);
	free(buf);
}

/* mr_entries counts the tree regions in the domain's mr/ directory. */
static int mr_entries(struct ffs_domain *dom)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/mr", dom->dir) >= (int)sizeof p)
		return -1;
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.' && strcmp(e->d_name, "clone") != 0)
			n++;
	closedir(d);
	return n;
}

/* daemon_state is what the daemon holds for this user: its /limits
 * (objects, memory) and the domain's mr/ entries. */
static void daemon_state(struct ffs_domain *dom, char *buf, size_t size)
{
	char p[PATH_MAX], lim[512] = "";
	snprintf(p, sizeof p, "%s/limits", ffs_root());
	ffs_read_path(p, lim, sizeof lim);
	snprintf(buf, size, "%smr entries %d", lim, mr_entries(dom));
}

/* quiet_state is the daemon's state once the closes of earlier cases
 * have arrived (the tree closes an object when its ctl's release arrives,
 * after close returns): the same in five reads 20 ms apart, or the last
 * read after 4 s. A case's baseline, for settles. */
static void quiet_state(struct ffs_domain *dom, char *buf, size_t size)
{
	char prev[600] = "";
	for (int same = 0, i = 0; same < 5 && i < 200; i++) {
		daemon_state(dom, buf, size);
		same = strcmp(buf, prev) == 0 ? same + 1 : 0;
		snprintf(prev, sizeof prev, "%s", buf);
		usleep(20000);
	}
}

/* settles waits until the daemon's state is want (the tree closes an
 * object when its ctl's release arrives, after close returns). */
static bool settles(struct ffs_domain *dom, const char *want)
{
	char now[600];
	for (int i = 0; i < 200; i++) {
		daemon_state(dom, now, sizeof now);
		if (strcmp(now, want) == 0)
			return true;
		usleep(10000);
	}
	fprintf(stderr, "daemon state:\n%s\nwant:\n%s\n", now, want);
	return false;
}

/* A peer: a tree endpoint connected to another, and a region it writes
 * from. */
struct peer {
	struct ffs_obj eq, cq, pep, a, b, src;
	int fd; /* src's data */
};

static bool peer_open(struct ffs_domain *dom, struct peer *p)
{
	if (!connected_pair(dom, &p->eq, &p->cq, &p->pep, &p->a, &p->b) || ffs_obj_clone(&p->src, dom->dir, "mr") ||
	    ffs_set(&p->src, "attr/len", "4096") || ffs_ctl(&p->src, "reg"))
		return false;
	char path[PATH_MAX];
	p->fd = snprintf(path, sizeof path, "%s/data", p->src.dir) < (int)sizeof path ? open(path, O_RDWR) : -1;
	return p->fd >= 0;
}

static void peer_close(struct peer *p)
{
	close(p->fd);
	ffs_obj_close(&p->src);
	ffs_obj_close(&p->a);
	ffs_obj_close(&p->b);
	ffs_obj_close(&p->pep);
	ffs_obj_close(&p->cq);
	ffs_obj_close(&p->eq);
}

/* peer_write has the peer write text through mr's key at address addr
 * (an offset from the registered buffer: mr_mode without
 * FI_MR_VIRT_ADDR) and waits for it at at, the application's byte that
 * address names. */
static bool peer_write(struct peer *p, struct fid_mr *mr, size_t addr, const char *text, const uint8_t *at)
{
	size_t n = strlen(text);
	if (pwrite(p->fd, text, n, 0) != (ssize_t)n ||
	    ffs_ctl(&p->a, "write %u 0 %zu %zu %#llx", p->src.id, n, addr, (unsigned long long)fi_mr_key(mr)))
		return false;
	for (int i = 0; i < 500 && memcmp(at, text, n) != 0; i++)
		usleep(10000);
	return memcmp(at, text, n) == 0;
}

/*
 * shared_pages: registrations whose pages meet, each reached through its
 * own key (fi_mr(3): "Remote accesses to a memory region must provide the
 * key associated with the registration."). Two heap buffers x and y, side by side in
 * one allocation as malloc places them, share a page; x is registered
 * twice (x2); z spans x's pages, y's and one of its own. All four have
 * FI_REMOTE_WRITE, each its own key, and a peer's write through each key
 * lands in the application's bytes, also after the others close. They
 * close in registration order and, registered again, in reverse order;
 * either way the application's bytes survive, its pages are private
 * again, and the daemon's regions (mr/) and the user's /limits return to
 * where they were.
 */
static void shared_pages(struct ffs_domain *dom)
{
	struct peer p;
	if (!peer_open(dom, &p)) {
		CHECK(false, "connecting a peer");
		return;
	}
	char before[600];
	quiet_state(dom, before, sizeof before);
	uint8_t *block = aligned_alloc(page, 4 * page), want[4 * 4096];
	fill(block, 4 * page, 9);
	memcpy(want, block, 4 * page);
	uint8_t *x = block + 100, *y = x + page + 16, *z = block + 50;
	size_t zlen = 3 * page + 50;
	const struct {
		uint8_t *buf;
		size_t len;
	} regs[4] = {{x, page}, {y, page}, {x, page}, {z, zlen}};

	for (int round = 0; round < 2; round++) {
		struct fid_mr *mr[4] = {NULL};
		for (int i = 0; i < 4; i++) {
			int ret = fi_mr_reg(&dom->domain_fid, regs[i].buf, regs[i].len, FI_REMOTE_WRITE, 0,
					    0x500 + 8 * round + i, 0, &mr[i], NULL);
			CHECK(ret == 0, "round %d, registration %d: %d", round, i, ret);
			if (ret) {
				while (i-- > 0)
					fi_close(&mr[i]->fid);
				goto out;
			}
		}
		CHECK(memcmp(block, want, 4 * page) == 0, "registering changed the bytes");
		for (int i = 0; i < 4; i++) {
			CHECK(shared(block + i * page), "page %d is not the tree's", i);
			for (int j = 0; j < i; j++)
				CHECK(fi_mr_key(mr[i]) != fi_mr_key(mr[j]), "registrations %d and %d have one key", i, j);
		}
		/* Each key: a write across the end of its buffer's first page
		 * (x's meets y's bytes; x2's the same; z's its last page, its
		 * own). */
		for (int i = 0; i < 4; i++) {
			char text[32];
			snprintf(text, sizeof text, "<round %d key %d>", round, i);
			size_t addr = i == 3 ? zlen - strlen(text) : page - 8;
			CHECK(peer_write(&p, mr[i], addr, text, regs[i].buf + addr), "write through key %d", i);
			memcpy(want + (regs[i].buf + addr - block), text, strlen(text));
		}
		CHECK(memcmp(block, want, 4 * page) == 0, "the writes changed bytes they do not name");

		/* Close in order (round 0) or in reverse (round 1); the
		 * registrations left still reach the bytes. */
		for (int k = 0; k < 4; k++) {
			int i = round == 0 ? k : 3 - k;
			CHECK(fi_close(&mr[i]->fid) == 0, "fi_close %d", i);
			mr[i] = NULL;
			for (int j = 0; j < 4; j++) {
				if (!mr[j])
					continue;
				char text[32];
				snprintf(text, sizeof text, "(%d after %d)", j, i);
				CHECK(peer_write(&p, mr[j], 20, text, regs[j].buf + 20), "write through key %d after %d closed",
				      j, i);
				memcpy(want + (regs[j].buf + 20 - block), text, strlen(text));
			}
			CHECK(memcmp(block, want, 4 * page) == 0, "round %d: after closing %d the bytes are not as written",
			      round, i);
		}
		/* z's last page is its alone: private once z is gone. */
		for (int i = 0; i < 4; i++)
			CHECK(!shared(block + i * page), "round %d: page %d is still shared", round, i);
		block[4 * page - 1] = 'w'; /* private and writable */
		want[4 * page - 1] = 'w';
		CHECK(settles(dom, before), "round %d: the daemon's regions or the user's limits did not return", round);
	}
out:
	peer_close(&p);
	free(block);
}

/* overlap: registrations that share pages, local and remote, on the
 * ffs_mr_lookup side; and pages another tree domain's registration
 * holds, which stay local only (a window is onto a region of its own
 * domain). */
static void overlap(struct ffs_domain *dom, struct ffs_domain *other)
{
	uint8_t *buf = aligned_alloc(page, 4 * page), want[4 * 4096 * 4];
	fill(buf, 4 * page, 2);
	memcpy(want, buf, 4 * page);
	struct fid_mr *a = NULL, *b = NULL, *c = NULL;
	int ret = fi_mr_reg(&dom->domain_fid, buf, 2 * page, FI_REMOTE_WRITE, 0, 1, 0, &a, NULL);
	CHECK(ret == 0, "first: %d", ret);
	if (ret)
		return;
	/* Inside a's pages, local: a region of its own, a window onto a's. */
	ret = fi_mr_reg(&dom->domain_fid, buf + 10, 100, FI_SEND, 0, 2, 0, &b, NULL);
	CHECK(ret == 0 && fi_mr_key(b) == tree_num(b, "attr/key"), "inside, local: %d", ret);
	if (ret)
		return;
	uint64_t desc, off;
	CHECK(ffs_mr_lookup(dom, fi_mr_desc(b), buf + 10, 100, &desc, &off) == 0 && desc == tree_num(b, "attr/desc") &&
		      off == 10,
	      "lookup by b's desc");
	/* Its data is a's: reading it from the tree is not how. */
	char v[64];
	CHECK(obj_read(tree_dir(b), "data", v, sizeof v) < 0, "a region of windows gives a data file");
	/* Across a's end, remote: a's second page and two of its own. */
	ret = fi_mr_reg(&dom->domain_fid, buf + page + 5, 2 * page, FI_REMOTE_READ, 0, 3, 0, &c, NULL);
	CHECK(ret == 0 && shared(buf + 2 * page) && shared(buf + 3 * page), "across the end, remote: %d", ret);
	if (other) {
		struct fid_mr *d;
		CHECK(fi_mr_reg(&other->domain_fid, buf, page, FI_REMOTE_READ, 0, 4, 0, &d, NULL) == -FI_EBUSY,
		      "another domain, remote");
		ret = fi_mr_reg(&other->domain_fid, buf, page, FI_RECV, 0, 4, 0, &d, NULL);
		CHECK(ret == 0 && fi_mr_key(d) == FI_KEY_NOTAVAIL, "another domain, local: %d", ret);
		if (ret == 0)
			fi_close(&d->fid);
	}
	CHECK(memcmp(buf, want, 4 * page) == 0, "overlapping registrations changed the contents");
	CHECK(fi_close(&a->fid) == 0, "close a");
	/* b and c hold a's pages still. */
	CHECK(shared(buf) && shared(buf + page), "a's pages after a's close");
	CHECK(fi_close(&b->fid) == 0, "close b");
	CHECK(!shared(buf) && shared(buf + page), "after b's close, only c's pages are the tree's");
	CHECK(ffs_mr_lookup(dom, NULL, buf + 10, 100, &desc, &off) == -FI_ENOENT, "lookup of a's bytes after a and b");
	CHECK(fi_close(&c->fid) == 0, "close c");
	CHECK(!shared(buf + page) && !shared(buf + 2 * page), "after c's close");
	CHECK(memcmp(buf, want, 4 * page) == 0, "closing changed the contents");
	free(buf);
}

/* unmappable: the calling thread's stack, and memory that is not there. */
static void unmappable(struct ffs_domain *dom)
{
	char stack[256];
	memset(stack, 's', sizeof stack);
	struct fid_mr *mr;
	int ret = fi_mr_reg(&dom->domain_fid, stack, sizeof stack, FI_SEND, 0, 10, 0, &mr, NULL);
	CHECK(ret == 0 && !shared(stack), "stack, local: %d", ret);
	uint64_t desc, off;
	if (ret == 0) {
		CHECK(ffs_mr_lookup(dom, fi_mr_desc(mr), stack, 10, &desc, &off) == -FI_ENOENT, "lookup on the stack");
		fi_close(&mr->fid);
	}
	CHECK(fi_mr_reg(&dom->domain_fid, stack, sizeof stack, FI_REMOTE_WRITE, 0, 10, 0, &mr, NULL) == -FI_EOPNOTSUPP,
	      "stack, remote");
	for (size_t i = 0; i < sizeof stack; i++)
		CHECK(stack[i] == 's', "stack byte %zu changed", i);

	uint8_t *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ret = fi_mr_reg(&dom->domain_fid, none, page, FI_RECV, 0, 11, 0, &mr, NULL);
	CHECK(ret == 0, "PROT_NONE, local: %d", ret);
	if (ret == 0)
		fi_close(&mr->fid);
	CHECK(fi_mr_reg(&dom->domain_fid, none, page, FI_REMOTE_READ, 0, 11, 0, &mr, NULL) == -FI_EOPNOTSUPP,
	      "PROT_NONE, remote");
	munmap(none, page);
}

/* forked: a child made by fork gets private copies of registered pages;
 * its writes do not reach the parent's buffer. */
static void forked(struct ffs_domain *dom)
{
	uint8_t *buf = aligned_alloc(page, page);
	memset(buf, 'p', page);
	struct fid_mr *mr;
	int ret = fi_mr_reg(&dom->domain_fid, buf + 10, 100, FI_REMOTE_WRITE, 0, 30, 0, &mr, NULL);
	CHECK(ret == 0 && shared(buf), "fi_mr_reg: %d", ret);
	if (ret)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		bool private = !shared(buf) && buf[0] == 'p';
		memset(buf, 'c', page);
		_exit(private ? 0 : 1);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "in the child the pages are not a private copy");
	bool same = true;
	for (size_t i = 0; i < page; i++)
		same = same && buf[i] == 'p';
	CHECK(same && shared(buf), "the child's writes reached the parent's buffer, or its pages are no longer the region");
	fi_close(&mr->fid);
	free(buf);
}

/* calls: regv, regattr, bad arguments, a key in use. */
static void calls(struct ffs_domain *dom)
{
	uint8_t *buf = aligned_alloc(page, 2 * page);
	memset(buf, 7, 2 * page);
	struct fid_mr *mr, *x;
	struct iovec iov[2] = {{buf, page}, {buf + page, page}};
	CHECK(fi_mr_regv(&dom->domain_fid, iov, 2, FI_SEND, 0, 20, 0, &mr, NULL) == -FI_EINVAL, "regv of 2");
	int ret = fi_mr_regv(&dom->domain_fid, iov, 1, FI_SEND, 0, 20, 0, &mr, NULL);
	CHECK(ret == 0 && (prov_key || fi_mr_key(mr) == 20), "regv of 1: %d", ret);
	/* The key is the region's in the domain: a second asks in vain. */
	if (!prov_key)
		CHECK(fi_mr_reg(&dom->domain_fid, buf + page, page, FI_SEND, 0, 20, 0, &x, NULL) == -FI_ENOKEY,
		      "a requested key in use");
	if (ret == 0)
		fi_close(&mr->fid);
	struct fi_mr_attr attr = {.mr_iov = iov, .iov_count = 1, .access = 0, .requested_key = 21, .context = buf,
				  .iface = FI_HMEM_SYSTEM};
	ret = fi_mr_regattr(&dom->domain_fid, &attr, 0, &mr);
	CHECK(ret == 0 && mr->fid.context == buf, "regattr: %d", ret);
	if (ret == 0) {
		char v[128];
		/* Access 0: the tree's default, the owner's own operations. */
		CHECK(obj_read(tree_dir(mr), "attr/access", v, sizeof v) > 0 &&
			      strcmp(v, "[ FI_READ, FI_WRITE, FI_RECV, FI_SEND ]") == 0,
		      "access 0 gave %s", v);
		/* fi_mr_bind takes counters (msgtest checks one), nothing else. */
		CHECK(fi_mr_bind(mr, &dom->domain_fid.fid, FI_REMOTE_WRITE) == -FI_EINVAL, "fi_mr_bind of a domain");
		CHECK(fi_mr_enable(mr) == 0, "fi_mr_enable");
		fi_close(&mr->fid);
	}
	attr.iface = FI_HMEM_CUDA;
	CHECK(fi_mr_regattr(&dom->domain_fid, &attr, 0, &mr) == -FI_EOPNOTSUPP, "regattr of CUDA memory");
	CHECK(fi_mr_reg(&dom->domain_fid, buf, 0, FI_SEND, 0, 22, 0, &mr, NULL) == -FI_EINVAL, "length 0");
	CHECK(fi_mr_reg(&dom->domain_fid, (void *)(UINTPTR_MAX - 10), 100, FI_SEND, 0, 22, 0, &mr, NULL) == -FI_EINVAL,
	      "a range past the address space");
	free(buf);
}

/* mr_test [PROV DOMAIN [FI_MR_PROV_KEY]]: the tree domain to register in,
 * tcp/lo by default. */
/*
 * closed_in_use: fi_close of a registration whose tree region a work
 * request in flight names ends the region at once. fi_mr(3): "When
 * closing the MR, there must be no opened endpoints or counters
 * associated with the MR" is about fi_mr_bind, and fi_cntr(3): "When
 * closing the counter, there must be no opened endpoints, transmit
 * contexts, receive contexts or memory regions associated with the
 * counter": so once the registration is closed, fi_close of the counter
 * bound to it returns 0 (not -FI_EBUSY), its key can be registered again,
 * and its tree region leaves mr/; its memory goes back to /limits when the
 * receive ends (its endpoint closes).
 */
static void closed_in_use(struct ffs_domain *dom)
{
	char start[600];
	quiet_state(dom, start, sizeof start);
	struct ffs_obj eq, cq, pep, a, b;
	if (!connected_pair(dom, &eq, &cq, &pep, &a, &b)) {
		CHECK(false, "connecting two tree endpoints");
		return;
	}
	int entries = mr_entries(dom);
	uint8_t *buf = aligned_alloc(page, page);
	memset(buf, 0, page);
	struct fid_mr *mr = NULL;
	int ret = fi_mr_reg(&dom->domain_fid, buf, page, FI_RECV | FI_REMOTE_WRITE, 0, 0x99, 0, &mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *cntr = NULL;
	ret = ffs_cntr_open(&dom->domain_fid, &attr, &cntr, NULL);
	CHECK(ret == 0, "fi_cntr_open: %d", ret);
	if (!mr || !cntr)
		return;
	ret = fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE);
	CHECK(ret == 0, "fi_mr_bind of the counter: %d", ret);

	/* A receive naming the tree region, posted on a's rx ring. */
	struct fabricfs_ring rx;
	ret = ffs_ring_map(&a, "rx", &rx);
	CHECK(ret == 0, "mapping a's rx ring: %d", ret);
	if (ret)
		return;
	struct fabricfs_wr wr = {.op = FABRICFS_OP_RECV, .context = 1, .desc = tree_num(mr, "attr/desc"), .len = 64};
	CHECK(fabricfs_post(&rx, &wr) == 0, "posting a receive");
	char status[256] = "";
	for (int i = 0; i < 500 && !strstr(status, "ops=1"); i++) {
		usleep(10000);
		obj_read(a.dir, "status", status, sizeof status);
	}
	CHECK(strstr(status, "ops=1"), "the receive is not in flight: %s", status);

	ret = fi_close(&mr->fid);
	CHECK(ret == 0, "fi_close(mr) with a receive in flight: %d", ret);
	ret = fi_close(&cntr->fid);
	CHECK(ret == 0, "fi_close(cntr) bound to the closed registration: %d (%s)", ret, fi_strerror(-ret));
	int n = -1;
	for (int i = 0; i < 200 && (n = mr_entries(dom)) != entries; i++)
		usleep(10000);
	CHECK(n == entries, "mr/ has %d entries after fi_close, want %d", n, entries);
	if (!prov_key) {
		struct fid_mr *again = NULL;
		ret = fi_mr_reg(&dom->domain_fid, buf, page, FI_RECV | FI_REMOTE_WRITE, 0, 0x99, 0, &again, NULL);
		CHECK(ret == 0, "fi_mr_reg of the closed registration's key 0x99: %d", ret);
		if (again)
			fi_close(&again->fid);
	}
	ffs_ring_unmap(&rx);
	ffs_obj_close(&a);
	ffs_obj_close(&b);
	ffs_obj_close(&pep);
	ffs_obj_close(&cq);
	ffs_obj_close(&eq);
	CHECK(settles(dom, start), "the daemon's memory and objects after the receive ended");
	free(buf);
}

int main(int argc, char **argv)
{
	page = sysconf(_SC_PAGESIZE);
	if (page != 4096) {
		fprintf(stderr, "this test assumes 4096-byte pages\n");
		return 2;
	}
	struct ffs_domain *dom = argc > 2 ? test_domain(argv[1], argv[2]) : test_domain("tcp", "lo");
	prov_key = argc > 3 && strcmp(argv[3], "FI_MR_PROV_KEY") == 0;
	if (prov_key)
		dom->info->domain_attr->mr_mode |= FI_MR_PROV_KEY;
	dom->domain_fid.mr = &ffs_mr_ops;
	basic(dom);
	peer_rma(dom);
	shared_pages(dom);
	/* Another domain of the tree: tcp/lo beside verbs, verbs beside tcp. */
	struct ffs_domain *other = argc > 2 ? test_domain("tcp", "lo") : test_domain("verbs", "rxe_127_0_0_1");
	other->domain_fid.mr = &ffs_mr_ops;
	overlap(dom, other);
	unmappable(dom);
	forked(dom);
	calls(dom);
	closed_in_use(dom);
	CHECK(dom->mrs == NULL, "registrations left in the domain's list");
	return done("mr");
}
