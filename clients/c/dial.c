/*
 * dial: send one message to a fabricfs or libfabric FI_EP_RDM endpoint
 * through the rings, the smallest complete client of fabricfs.h.
 *
 *	dial DOMAIN ADDRESS [MESSAGE]
 *
 * DOMAIN is a domain directory of a mounted tree (/fabric/tcp/lo). dial
 * opens the clone files of an AV, a CQ, an endpoint and a memory region,
 * reading each new object's id; sets them up through their ctl and attr
 * files; inserts ADDRESS into the AV (fi_addr 0); maps the endpoint's tx
 * ring, the CQ's ring and the region; posts one SEND and reaps its
 * completion. It prints "sent N bytes" or what failed, and exits 0 or 1.
 * Objects live while their clone files are open: here, until exit.
 *
 *	gcc -O2 -Wall -o dial dial.c
 */
#include "fabricfs.h"

#include <stdio.h>
#include <stdlib.h>

static const char *dom;

static void fail(const char *what, const char *why)
{
	printf("dial: %s: %s\n", what, why ? why : strerror(errno));
	exit(1);
}

/* get reads DOM/OBJ/FILE into buf, without its newline. */
static void get(const char *obj, const char *file, char *buf, size_t size)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s/%s", dom, obj, file);
	int fd = open(p, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);
	if (n < 0)
		fail(p, NULL);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	close(fd);
}

/* put writes s to DOM/OBJ/FILE, as a shell's echo would; a failure says
 * the object's err file. */
static void put(const char *obj, const char *file, const char *s)
{
	char p[512], line[512];
	snprintf(p, sizeof p, "%s/%s/%s", dom, obj, file);
	int n = snprintf(line, sizeof line, "%s\n", s), fd = open(p, O_WRONLY);
	if (fd < 0 || write(fd, line, n) != n) {
		get(obj, "err", line, sizeof line);
		fail(s, line);
	}
	close(fd);
}

/* clone makes a KIND object; obj gets "KIND/ID". The descriptor stays open. */
static void clone(const char *kind, char *obj)
{
	char p[512], id[32];
	snprintf(p, sizeof p, "%s/%s/clone", dom, kind);
	int fd = open(p, O_RDWR);
	ssize_t n = fd < 0 ? -1 : read(fd, id, sizeof id - 1);
	if (n <= 0)
		fail(p, NULL);
	id[n] = 0;
	id[strcspn(id, "\n")] = 0;
	sprintf(obj, "%s/%s", kind, id);
}

static void *map(const char *obj, const char *file, size_t *size)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s/%s", dom, obj, file);
	void *m = fabricfs_map(p, size);
	if (!m)
		fail(p, NULL);
	return m;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: dial DOMAIN ADDRESS [MESSAGE]\n");
		return 2;
	}
	dom = argv[1];
	const char *msg = argc > 3 ? argv[3] : "hello";
	char av[64], cq[64], ep[64], mr[64], cmd[512], buf[64];
	clone("av", av), clone("cq", cq), clone("ep", ep), clone("mr", mr);
	put(ep, "attr/type", "FI_EP_RDM");
	snprintf(cmd, sizeof cmd, "bind av %s", strchr(av, '/') + 1), put(ep, "ctl", cmd);
	snprintf(cmd, sizeof cmd, "bind cq %s send,recv", strchr(cq, '/') + 1), put(ep, "ctl", cmd);
	put(ep, "ctl", "enable");
	snprintf(cmd, sizeof cmd, "insert %s", argv[2]), put(av, "ctl", cmd); /* fi_addr 0 */
	snprintf(buf, sizeof buf, "%zu", strlen(msg)), put(mr, "attr/len", buf);
	put(mr, "ctl", "reg");
	get(mr, "attr/desc", buf, sizeof buf);

	struct fabricfs_ring tx, cqr;
	size_t txn = 0, cqn = 0, memn = 0;
	void *txm = map(ep, "tx", &txn), *cqm = map(cq, "data", &cqn), *mem = map(mr, "data", &memn);
	const char *bad = fabricfs_ring_open(&tx, txm, txn);
	if (bad || (bad = fabricfs_ring_open(&cqr, cqm, cqn)))
		fail("ring header", bad);
	memcpy(mem, msg, strlen(msg));

	struct fabricfs_wr wr = {.op = FABRICFS_OP_SEND, .context = 1, .desc = strtoull(buf, NULL, 0),
				 .len = strlen(msg), .addr = 0};
	while (fabricfs_post(&tx, &wr) < 0)
		usleep(100); /* full: the daemon takes entries as it can */
	struct fabricfs_cqe c;
	struct timespec second = {1, 0};
	while (!fabricfs_reap(&cqr, &c)) {
		if (fabricfs_load_relaxed(cqr.flags) & FABRICFS_RING_DEAD)
			fail(cq, "ring is dead");
		fabricfs_sleep(&cqr, &second);
	}
	if (c.err) {
		get(ep, "err", cmd, sizeof cmd);
		fail("send", cmd);
	}
	printf("sent %llu bytes\n", (unsigned long long)c.len);
	return 0;
}
