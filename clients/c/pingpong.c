/*
 * pingpong: a fabricfs ring client written from docs/abi.md and docs/tree.md.
 *
 *	pingpong MOUNTPOINT [ITERATIONS] [SIZE]
 *
 * In domain tcp/lo it makes, through clone files kept open, an EQ, a CQ per
 * endpoint, a passive endpoint and endpoint A; it connects A to the passive
 * endpoint, accepts the request as endpoint B, registers a memory region per
 * side and maps both endpoints' tx/rx rings and both CQ rings. Then A sends
 * ITERATIONS messages of SIZE bytes (default 1000 x 4096) with a pattern
 * that depends on the iteration; B checks every byte and sends the message
 * back from where it landed; A checks every byte again. It waits with the
 * futex protocol of docs/abi.md: spin briefly, then set RING_NEED_WAKEUP and
 * FUTEX_WAIT on the ring's wake word.
 *
 * Prints "ok ITERATIONS SIZE USEC_PER_ROUNDTRIP" and exits 0, or says what
 * went wrong (with the object's err file) and exits 1.
 *
 *	gcc -O2 -Wall -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* docs/abi.md: ring header, flags, features. */
#define RING_MAGIC 0x47524646u
#define RING_ABI_VERSION 1
#define RING_WORK 1
#define RING_COMPLETION 2
#define RING_ENTRY_SIZE 128
#define RING_NEED_WAKEUP (1u << 0)
#define RING_OVERFLOW (1u << 1)
#define RING_DEAD (1u << 2)
#define FEAT_FUTEX (1ull << 0)

/* Work request ops and libfabric flags (docs/abi.md). */
#define OP_SEND 1
#define OP_RECV 2
#define FI_MSG (1ull << 1)
#define FI_RECV (1ull << 10)
#define FI_SEND (1ull << 11)

struct wr { /* 128 bytes */
	uint8_t op;
	uint8_t reserved1[7];
	uint64_t flags, context, desc, offset, len, addr, data, tag, ignore;
	uint64_t rma_addr, rma_key, result_desc, result_offset, compare_offset;
	uint8_t datatype, atomic_op;
	uint8_t reserved2[6];
};
_Static_assert(sizeof(struct wr) == 128, "wr size");
_Static_assert(offsetof(struct wr, flags) == 8, "wr flags");
_Static_assert(offsetof(struct wr, compare_offset) == 112, "wr compare_offset");
_Static_assert(offsetof(struct wr, datatype) == 120, "wr datatype");

struct cqe { /* 128 bytes */
	uint64_t op_context, flags, len, buf, data, tag, src_addr;
	int32_t err, prov_errno;
	uint64_t olen, desc;
	uint8_t reserved[48];
};
_Static_assert(sizeof(struct cqe) == 128, "cqe size");
_Static_assert(offsetof(struct cqe, err) == 56, "cqe err");
_Static_assert(offsetof(struct cqe, olen) == 64, "cqe olen");
_Static_assert(offsetof(struct cqe, desc) == 72, "cqe desc");

/* Header fields, at their offsets in the first page. */
struct ring_header {
	uint32_t magic;
	uint16_t abi_version, ring_type;
	uint32_t entry_size, entry_count, mask;
	uint32_t head_off, tail_off, flags_off, wake_off, entries_off;
	uint64_t features;
	uint8_t reserved[16];
};
_Static_assert(offsetof(struct ring_header, features) == 40, "header features");

struct ring {
	char path[PATH_MAX];
	uint8_t *mem;
	size_t size;
	uint32_t count, mask, entry_size;
	uint64_t features;
	_Atomic uint32_t *head, *tail, *flags, *wake;
	uint8_t *entries;
};

static char dom[1024];  /* MOUNTPOINT/tcp/lo */
static char errbuf[PATH_MAX + 256];

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stdout, "pingpong: ");
	vfprintf(stdout, fmt, ap);
	fprintf(stdout, "\n");
	va_end(ap);
	fflush(stdout);
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* readfile reads a small file into buf (NUL-terminated, trailing blanks
 * removed); returns -1 with errno on failure. */
static int readfile(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	int e = errno;
	close(fd);
	if (r < 0) {
		errno = e;
		return -1;
	}
	while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
		r--;
	buf[r] = 0;
	return 0;
}

/* objerr returns the text of KIND/ID/err. */
static const char *objerr(const char *obj)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s/err", dom, obj);
	if (readfile(p, errbuf, sizeof errbuf) < 0)
		snprintf(errbuf, sizeof errbuf, "(cannot read %s: %s)", p, strerror(errno));
	return errbuf;
}

/* writefile writes s to DOM/OBJ/FILE in one write; on failure it exits,
 * quoting the object's err file. */
static void writefile(const char *obj, const char *file, const char *s)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s/%s", dom, obj, file);
	int fd = open(p, O_WRONLY);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	size_t n = strlen(s);
	ssize_t r = write(fd, s, n);
	int e = errno;
	close(fd);
	if (r != (ssize_t)n)
		fail("write '%.*s' to %s: %s (err: %s)", (int)(n - 1), s, p,
		     r < 0 ? strerror(e) : "short write", objerr(obj));
}

static void ctl(const char *obj, const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd - 1, fmt, ap);
	va_end(ap);
	strcat(cmd, "\n");
	writefile(obj, "ctl", cmd);
}

static void readattr(const char *obj, const char *file, char *buf, size_t n)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s/%s", dom, obj, file);
	if (readfile(p, buf, n) < 0)
		fail("read %s: %s (err: %s)", p, strerror(errno), objerr(obj));
}

/* clone opens KIND/clone, reads the new object's id into obj ("KIND/ID")
 * and returns the fd, which keeps the object alive. */
static int clone(const char *kind, char *obj, size_t n)
{
	char p[PATH_MAX], id[32];
	snprintf(p, sizeof p, "%s/%s/clone", dom, kind);
	int fd = open(p, O_RDWR);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	ssize_t r = read(fd, id, sizeof id - 1);
	if (r <= 0)
		fail("read %s: %s", p, r < 0 ? strerror(errno) : "no id");
	while (r > 0 && (id[r - 1] == '\n' || id[r - 1] == ' '))
		r--;
	id[r] = 0;
	snprintf(obj, n, "%s/%s", kind, id);
	return fd;
}

/* id returns the ID of "KIND/ID". */
static const char *id(const char *obj)
{
	return strchr(obj, '/') + 1;
}

/* mapfile opens DOM/OBJ/FILE read-write and maps all of it shared. */
static uint8_t *mapfile(const char *obj, const char *file, size_t *size, char *path)
{
	snprintf(path, PATH_MAX, "%s/%s/%s", dom, obj, file);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		fail("open %s: %s (err: %s)", path, strerror(errno), objerr(obj));
	struct stat st;
	if (fstat(fd, &st) < 0)
		fail("fstat %s: %s", path, strerror(errno));
	if (st.st_size <= 0)
		fail("%s: size %lld", path, (long long)st.st_size);
	void *m = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap %s: %s", path, strerror(errno));
	close(fd); /* the mapping stays */
	*size = st.st_size;
	return m;
}

static void ring_map(struct ring *r, const char *obj, const char *file, int type)
{
	r->mem = mapfile(obj, file, &r->size, r->path);
	if (r->size < 4096)
		fail("%s: %zu bytes, less than a header page", r->path, r->size);
	struct ring_header h;
	memcpy(&h, r->mem, sizeof h);
	if (h.magic != RING_MAGIC)
		fail("%s: magic %#x, want %#x", r->path, h.magic, RING_MAGIC);
	if (h.abi_version != RING_ABI_VERSION)
		fail("%s: abi_version %u, want %u", r->path, h.abi_version, RING_ABI_VERSION);
	if (h.ring_type != type)
		fail("%s: ring_type %u, want %d", r->path, h.ring_type, type);
	if (h.entry_size != RING_ENTRY_SIZE)
		fail("%s: entry_size %u, want %d", r->path, h.entry_size, RING_ENTRY_SIZE);
	if (h.entry_count == 0 || (h.entry_count & (h.entry_count - 1)) || h.mask != h.entry_count - 1)
		fail("%s: entry_count %u mask %u", r->path, h.entry_count, h.mask);
	uint32_t offs[4] = {h.head_off, h.tail_off, h.flags_off, h.wake_off};
	for (int i = 0; i < 4; i++)
		if (offs[i] % 4 || offs[i] + 4 > 4096)
			fail("%s: bad word offset %u", r->path, offs[i]);
	if ((uint64_t)h.entries_off + (uint64_t)h.entry_count * h.entry_size > r->size)
		fail("%s: %u entries at %u do not fit in %zu bytes", r->path, h.entry_count,
		     h.entries_off, r->size);
	if (!(h.features & FEAT_FUTEX))
		fail("%s: no FEAT_FUTEX (features %#llx)", r->path, (unsigned long long)h.features);
	r->count = h.entry_count;
	r->mask = h.mask;
	r->entry_size = h.entry_size;
	r->features = h.features;
	r->head = (_Atomic uint32_t *)(r->mem + h.head_off);
	r->tail = (_Atomic uint32_t *)(r->mem + h.tail_off);
	r->flags = (_Atomic uint32_t *)(r->mem + h.flags_off);
	r->wake = (_Atomic uint32_t *)(r->mem + h.wake_off);
	r->entries = r->mem + h.entries_off;
}

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	/* Shared futexes (no FUTEX_PRIVATE_FLAG): the page is shared with the daemon. */
	return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* post publishes one work request (docs/abi.md "Producer"); returns -1
 * when the ring is full. */
static int post(struct ring *r, const struct wr *e)
{
	uint32_t t = atomic_load_explicit(r->tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(r->head, memory_order_acquire);
	if (t - h == r->count)
		return -1;
	memcpy(r->entries + (size_t)(t & r->mask) * r->entry_size, e, sizeof *e);
	atomic_store_explicit(r->tail, t + 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(r->flags, memory_order_relaxed) & RING_NEED_WAKEUP) {
		atomic_fetch_add(r->wake, 1);
		futex(r->wake, FUTEX_WAKE, INT_MAX, NULL);
	}
	return 0;
}

static void post_wait(struct ring *r, const struct wr *e, const char *obj)
{
	double deadline = now() + 10;
	while (post(r, e) < 0) {
		/* Full: the daemon frees entries as it takes them (back-pressure). */
		if (atomic_load_explicit(r->flags, memory_order_relaxed) & RING_DEAD)
			fail("%s: ring is dead (err: %s)", r->path, objerr(obj));
		if (now() > deadline)
			fail("%s: ring full for 10s (err: %s)", r->path, objerr(obj));
		usleep(10);
	}
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		fail("%s: not a number: '%s'", what, s);
	return v;
}

/* One side: its endpoint, CQ, memory region and rings. */
struct side {
	const char *name;
	char ep[96], cq[96], mr[96];
	int epfd, cqfd, mrfd;  /* clone fds (-1 when the object came from listen) */
	struct ring tx, rx, cqr;
	uint8_t *mem;
	size_t memlen;
	char mempath[PATH_MAX];
	uint64_t desc;
	size_t size;                     /* bytes per message */
	uint64_t sends_done, recvs_done; /* completions seen, in order */
	struct cqe last_recv;
};

static void setup_mr(struct side *s, size_t len)
{
	char buf[256];
	s->mrfd = clone("mr", s->mr, sizeof s->mr);
	snprintf(buf, sizeof buf, "%zu\n", len);
	writefile(s->mr, "attr/len", buf);
	writefile(s->mr, "attr/access", "FI_SEND,FI_RECV\n");
	ctl(s->mr, "reg");
	readattr(s->mr, "attr/desc", buf, sizeof buf);
	s->desc = parse_u64(buf, "attr/desc");
	s->mem = mapfile(s->mr, "data", &s->memlen, s->mempath);
	if (s->memlen < len)
		fail("%s: %zu bytes, want %zu", s->mempath, s->memlen, len);
}

/* Event queue text: wait until both endpoints are connected. Each round
 * opens the events file afresh: the read at offset 0 blocks until an event
 * is pending, later reads return the rest and then end of file. */
static void wait_connected(const char *eq, const char *a, const char *b)
{
	char want_a[128], want_b[128], path[PATH_MAX];
	snprintf(want_a, sizeof want_a, "connected fid=%s", a);
	snprintf(want_b, sizeof want_b, "connected fid=%s", b);
	snprintf(path, sizeof path, "%s/%s/events", dom, eq);
	int got_a = 0, got_b = 0;
	static char text[65536];
	size_t n = 0;
	double deadline = now() + 10;
	while (!(got_a && got_b)) {
		if (now() > deadline)
			fail("%s: no connected events after 10s (have: %.*s)", eq, (int)n, text);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			fail("open %s: %s", path, strerror(errno));
		for (;;) {
			if (n == sizeof text - 1)
				n = 0;
			ssize_t r = read(fd, text + n, sizeof text - 1 - n);
			if (r < 0)
				fail("read %s: %s (err: %s)", path, strerror(errno), objerr(eq));
			if (r == 0)
				break;
			n += r;
		}
		close(fd);
		text[n] = 0;
		/* Whole lines only; a partial one waits for the next round. */
		char *line = text, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = 0;
			size_t la = strlen(want_a), lb = strlen(want_b);
			if (!strncmp(line, want_a, la) && (line[la] == 0 || line[la] == ' '))
				got_a = 1;
			if (!strncmp(line, want_b, lb) && (line[lb] == 0 || line[lb] == ' '))
				got_b = 1;
			if (!strncmp(line, "error ", 6) || !strncmp(line, "shutdown ", 9))
				fail("%s: unexpected event: %s", eq, line);
			line = nl + 1;
		}
		n = strlen(line);
		memmove(text, line, n + 1);
	}
}

static inline uint8_t pattern(uint64_t i, size_t j)
{
	return (uint8_t)(j * 31 + (j >> 8) + i * 101 + 1);
}

static void fill(uint8_t *p, size_t n, uint64_t i)
{
	for (size_t j = 0; j < n; j++)
		p[j] = pattern(i, j);
}

static void check(const struct side *s, const uint8_t *p, size_t n, uint64_t i)
{
	for (size_t j = 0; j < n; j++)
		if (p[j] != pattern(i, j))
			fail("%s: iteration %llu byte %zu is %#x, want %#x", s->name,
			     (unsigned long long)i, j, p[j], pattern(i, j));
}

#define CTX_SEND (1ull << 32)
#define CTX_RECV (2ull << 32)

/* reap takes the completions in s's CQ ring; returns how many. */
static int reap(struct side *s)
{
	struct ring *r = &s->cqr;
	uint32_t h = atomic_load_explicit(r->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(r->tail, memory_order_acquire);
	int n = 0;
	for (; h != t; h++, n++) {
		struct cqe c;
		memcpy(&c, r->entries + (size_t)(h & r->mask) * r->entry_size, sizeof c);
		if (c.err != 0)
			fail("%s: error completion: op_context=%#llx flags=%#llx err=%d prov_errno=%d "
			     "olen=%llu (ep err: %s)", s->name, (unsigned long long)c.op_context,
			     (unsigned long long)c.flags, c.err, c.prov_errno,
			     (unsigned long long)c.olen, objerr(s->ep));
		uint64_t kind = c.op_context & ~0xffffffffull, seq = c.op_context & 0xffffffffull;
		if (kind == CTX_SEND) {
			if (!(c.flags & FI_SEND) || seq != (s->sends_done & 0xffffffffull))
				fail("%s: send completion op_context=%#llx flags=%#llx, want seq %llu",
				     s->name, (unsigned long long)c.op_context,
				     (unsigned long long)c.flags, (unsigned long long)s->sends_done);
			s->sends_done++;
		} else if (kind == CTX_RECV) {
			if (!(c.flags & FI_RECV) || seq != (s->recvs_done & 0xffffffffull))
				fail("%s: recv completion op_context=%#llx flags=%#llx, want seq %llu",
				     s->name, (unsigned long long)c.op_context,
				     (unsigned long long)c.flags, (unsigned long long)s->recvs_done);
			if (c.len != s->size)
				fail("%s: recv completion len %llu, want %zu", s->name,
				     (unsigned long long)c.len, s->size);
			s->recvs_done++;
			s->last_recv = c;
		} else {
			fail("%s: completion with unknown op_context %#llx", s->name,
			     (unsigned long long)c.op_context);
		}
	}
	atomic_store_explicit(r->head, h, memory_order_release);
	return n;
}

/* cq_sleep sleeps on the CQ ring until its tail moves past head or the
 * timeout passes (docs/abi.md "Consumer: sleep"). */
static void cq_sleep(struct side *s, long usec)
{
	struct ring *r = &s->cqr;
	uint32_t h = atomic_load_explicit(r->head, memory_order_relaxed);
	uint32_t w = atomic_load(r->wake);
	atomic_fetch_or(r->flags, RING_NEED_WAKEUP);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(r->tail, memory_order_acquire) == h) {
		struct timespec ts = {usec / 1000000, (usec % 1000000) * 1000};
		if (futex(r->wake, FUTEX_WAIT, w, &ts) < 0 && errno != EAGAIN &&
		    errno != ETIMEDOUT && errno != EINTR)
			fail("%s: FUTEX_WAIT: %s", r->path, strerror(errno));
	}
	atomic_fetch_and(r->flags, ~RING_NEED_WAKEUP);
}

/* await reaps s's CQ until *done >= want: it polls 2000 times (a few
 * microseconds), then sleeps on the ring between polls. */
static void await(struct side *s, const uint64_t *done, uint64_t want, const char *what)
{
	double start = now(), deadline = start + 10;
	int spins = 0;
	while (*done < want) {
		if (reap(s) > 0)
			continue;
		uint32_t f = atomic_load_explicit(s->cqr.flags, memory_order_relaxed);
		if (f & RING_DEAD)
			fail("%s: CQ ring is dead (err: %s)", s->name, objerr(s->cq));
		if (++spins < 2000)
			continue;
		if (now() > deadline)
			fail("%s: no %s completion after 10s (ep err: %s; cq err: %s)", s->name,
			     what, objerr(s->ep), objerr(s->cq));
		cq_sleep(s, 100000);
	}
}

static struct wr mkwr(int op, uint64_t ctx, uint64_t desc, uint64_t off, uint64_t len)
{
	struct wr e;
	memset(&e, 0, sizeof e);
	e.op = op;
	e.context = ctx;
	e.desc = desc;
	e.offset = off;
	e.len = len;
	return e;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: pingpong MOUNTPOINT [ITERATIONS] [SIZE]\n");
		return 2;
	}
	uint64_t iters = argc > 2 ? parse_u64(argv[2], "ITERATIONS") : 1000;
	size_t size = argc > 3 ? parse_u64(argv[3], "SIZE") : 4096;
	if (size == 0)
		fail("SIZE must be at least 1");
	setvbuf(stdout, NULL, _IOLBF, 0);

	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s/abi_version", argv[1]);
	char ver[64];
	if (readfile(buf, ver, sizeof ver) < 0)
		fail("read %s: %s", buf, strerror(errno));
	if (strcmp(ver, "1") != 0)
		fail("%s is %s; this client speaks abi_version 1", buf, ver);
	if (strlen(argv[1]) > sizeof dom - 16)
		fail("mount point path too long");
	snprintf(dom, sizeof dom, "%s/tcp/lo", argv[1]);

	struct side a = {.name = "A", .size = size}, b = {.name = "B", .size = size};
	char eq[96], pep[96];
	int eqfd = clone("eq", eq, sizeof eq);
	a.cqfd = clone("cq", a.cq, sizeof a.cq);
	b.cqfd = clone("cq", b.cq, sizeof b.cq);
	int pepfd = clone("pep", pep, sizeof pep);
	a.epfd = clone("ep", a.ep, sizeof a.ep);
	b.epfd = -1;

	/* Passive endpoint listening on a free port. */
	ctl(pep, "bind eq %s", id(eq));
	ctl(pep, "listen 127.0.0.1:0");
	char local[256];
	readattr(pep, "local", local, sizeof local);
	if (!local[0])
		fail("%s/local is empty after listen", pep);

	/* A connects; the request comes out of the pep's listen file as B. */
	ctl(a.ep, "bind eq %s", id(eq));
	ctl(a.ep, "bind cq %s send,recv", id(a.cq));
	ctl(a.ep, "enable");
	ctl(a.ep, "connect %s pingpong", local);
	char bid[32];
	readattr(pep, "listen", bid, sizeof bid);
	snprintf(b.ep, sizeof b.ep, "ep/%s", bid);
	ctl(b.ep, "bind eq %s", id(eq));
	ctl(b.ep, "bind cq %s send,recv", id(b.cq));
	ctl(b.ep, "enable");
	ctl(b.ep, "accept");
	wait_connected(eq, a.ep, b.ep);

	/* A region per side: two SIZE-byte slots each. A sends from slot 0 and
	 * receives into slot 1; B receives into slot i%2 and echoes from it. */
	setup_mr(&a, 2 * size);
	setup_mr(&b, 2 * size);

	ring_map(&a.tx, a.ep, "tx", RING_WORK);
	ring_map(&a.rx, a.ep, "rx", RING_WORK);
	ring_map(&b.tx, b.ep, "tx", RING_WORK);
	ring_map(&b.rx, b.ep, "rx", RING_WORK);
	ring_map(&a.cqr, a.cq, "data", RING_COMPLETION);
	ring_map(&b.cqr, b.cq, "data", RING_COMPLETION);

	struct wr e;
	/* B's first receive is posted before A sends anything. */
	e = mkwr(OP_RECV, CTX_RECV | 0, b.desc, 0, size);
	post_wait(&b.rx, &e, b.ep);

	double t0 = now();
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t seq = i & 0xffffffffull;
		/* A: receive buffer for the pong, then the ping. */
		e = mkwr(OP_RECV, CTX_RECV | seq, a.desc, size, size);
		post_wait(&a.rx, &e, a.ep);
		fill(a.mem, size, i);
		e = mkwr(OP_SEND, CTX_SEND | seq, a.desc, 0, size);
		post_wait(&a.tx, &e, a.ep);

		/* B: the ping lands in slot i%2. */
		uint64_t slot = (i % 2) * size;
		await(&b, &b.recvs_done, i + 1, "recv");
		if (b.last_recv.buf != slot)
			fail("B: recv completion buf %llu, want %llu",
			     (unsigned long long)b.last_recv.buf, (unsigned long long)slot);
		check(&b, b.mem + slot, size, i);
		if (i + 1 < iters) {
			/* The other slot was last echoed by send i-1: wait for it. */
			await(&b, &b.sends_done, i, "send");
			e = mkwr(OP_RECV, CTX_RECV | ((i + 1) & 0xffffffffull), b.desc,
				 ((i + 1) % 2) * size, size);
			post_wait(&b.rx, &e, b.ep);
		}
		e = mkwr(OP_SEND, CTX_SEND | seq, b.desc, slot, size);
		post_wait(&b.tx, &e, b.ep);

		/* A: its send done (slot 0 reusable) and the pong checked. */
		await(&a, &a.sends_done, i + 1, "send");
		await(&a, &a.recvs_done, i + 1, "recv");
		if (a.last_recv.buf != size)
			fail("A: recv completion buf %llu, want %zu",
			     (unsigned long long)a.last_recv.buf, size);
		check(&a, a.mem + size, size, i);
	}
	double t1 = now();
	await(&b, &b.sends_done, iters, "send");

	printf("ok %llu %zu %.1f\n", (unsigned long long)iters, size,
	       iters ? (t1 - t0) * 1e6 / iters : 0.0);
	close(a.epfd);
	close(pepfd);
	close(a.mrfd);
	close(b.mrfd);
	close(a.cqfd);
	close(b.cqfd);
	close(eqfd);
	return 0;
}
