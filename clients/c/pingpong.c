/*
 * pingpong: a fabricfs ring client, of docs/abi.md through fabricfs.h and
 * of docs/tree.md.
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
 * futex protocol of docs/abi.md: spin briefly, then sleep on the CQ ring
 * (fabricfs_sleep).
 *
 * Prints "ok ITERATIONS SIZE USEC_PER_ROUNDTRIP" and exits 0, or says what
 * went wrong (with the object's err file) and exits 1.
 *
 *	gcc -O2 -Wall -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include "fabricfs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* A mapped ring and the path it came from, for messages. */
struct ring {
	char path[PATH_MAX];
	struct fabricfs_ring r;
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

/* mapfile maps DOM/OBJ/FILE (fabricfs_map), saying its path in path. */
static uint8_t *mapfile(const char *obj, const char *file, size_t *size, char *path)
{
	snprintf(path, PATH_MAX, "%s/%s/%s", dom, obj, file);
	uint8_t *m = fabricfs_map(path, size);
	if (!m)
		fail("map %s: %s (err: %s)", path, strerror(errno), objerr(obj));
	return m;
}

static void ring_map(struct ring *r, const char *obj, const char *file, int type)
{
	size_t size = 0;
	uint8_t *m = mapfile(obj, file, &size, r->path);
	const char *bad = fabricfs_ring_open(&r->r, m, size);
	if (bad)
		fail("%s: bad header field %s", r->path, bad);
	if (r->r.type != type)
		fail("%s: ring_type %u, want %d", r->path, r->r.type, type);
	if (!(r->r.features & FABRICFS_FEAT_FUTEX))
		fail("%s: no FEAT_FUTEX (features %#llx)", r->path, (unsigned long long)r->r.features);
}

static void post_wait(struct ring *r, const struct fabricfs_wr *e, const char *obj)
{
	double deadline = now() + 10;
	while (fabricfs_post(&r->r, e) < 0) {
		/* Full: the daemon frees entries as it takes them (back-pressure). */
		if (fabricfs_load_relaxed(r->r.flags) & FABRICFS_RING_DEAD)
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
	struct fabricfs_cqe last_recv;
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
	struct fabricfs_cqe c;
	int n = 0;
	for (; fabricfs_reap(&s->cqr.r, &c); n++) {
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
	return n;
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
		if (fabricfs_load_relaxed(s->cqr.r.flags) & FABRICFS_RING_DEAD)
			fail("%s: CQ ring is dead (err: %s)", s->name, objerr(s->cq));
		if (++spins < 2000)
			continue;
		if (now() > deadline)
			fail("%s: no %s completion after 10s (ep err: %s; cq err: %s)", s->name,
			     what, objerr(s->ep), objerr(s->cq));
		struct timespec ts = {0, 100000000};
		if (fabricfs_sleep(&s->cqr.r, &ts) < 0)
			fail("%s: FUTEX_WAIT: %s", s->cqr.path, strerror(errno));
	}
}

static struct fabricfs_wr mkwr(int op, uint64_t ctx, uint64_t desc, uint64_t off, uint64_t len)
{
	struct fabricfs_wr e;
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
	if (strtol(ver, NULL, 10) != FABRICFS_ABI_VERSION)
		fail("%s is %s; this client speaks abi_version %d", buf, ver, FABRICFS_ABI_VERSION);
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

	ring_map(&a.tx, a.ep, "tx", FABRICFS_RING_WORK);
	ring_map(&a.rx, a.ep, "rx", FABRICFS_RING_WORK);
	ring_map(&b.tx, b.ep, "tx", FABRICFS_RING_WORK);
	ring_map(&b.rx, b.ep, "rx", FABRICFS_RING_WORK);
	ring_map(&a.cqr, a.cq, "data", FABRICFS_RING_COMPLETION);
	ring_map(&b.cqr, b.cq, "data", FABRICFS_RING_COMPLETION);

	struct fabricfs_wr e;
	/* B's first receive is posted before A sends anything. */
	e = mkwr(FABRICFS_OP_RECV, CTX_RECV | 0, b.desc, 0, size);
	post_wait(&b.rx, &e, b.ep);

	double t0 = now();
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t seq = i & 0xffffffffull;
		/* A: receive buffer for the pong, then the ping. */
		e = mkwr(FABRICFS_OP_RECV, CTX_RECV | seq, a.desc, size, size);
		post_wait(&a.rx, &e, a.ep);
		fill(a.mem, size, i);
		e = mkwr(FABRICFS_OP_SEND, CTX_SEND | seq, a.desc, 0, size);
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
			e = mkwr(FABRICFS_OP_RECV, CTX_RECV | ((i + 1) & 0xffffffffull), b.desc,
				 ((i + 1) % 2) * size, size);
			post_wait(&b.rx, &e, b.ep);
		}
		e = mkwr(FABRICFS_OP_SEND, CTX_SEND | seq, b.desc, slot, size);
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
