/*
 * relay: the three-party shape of fabricfs's ring ping-pong with nothing
 * else in it, as a floor for scripts/bench.sh (docs/bench.md, "The
 * three-party floor").
 *
 * Two client processes, A and B, ping-pong SIZE-byte messages through a
 * relay process, as two ringpong processes do through the fabricfs daemon:
 * a client posts by bumping a counter in shared memory and waits for its
 * completion counter, polling it and calling sched_yield between polls; the
 * relay polls both posting counters and both ends of one loopback TCP
 * connection in one thread, without blocking, writes a posted message into
 * the sender's socket, reads the receiver's socket and bumps the
 * receiver's completion counter when a whole message is in, and calls
 * sched_yield after a pass that found nothing to do. The relay's data are
 * its own buffers: one copy in, one copy out, as on fabricfs's tcp path.
 * There are no work-request or completion entries, no provider, no Go:
 * the difference between this and fi_pingpong is what the shape itself
 * costs on the machine, and the difference between fabricfs and this is
 * what fabricfs adds to the shape.
 *
 * usage: relay -S SIZE [-I ITERS] [-w WARMUP]
 * prints one line: {"bytes":...,"iters":...,"usec_per_xfer":...,"mb_per_sec":...}
 * where usec_per_xfer is half a round trip, as fi_pingpong's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A client's slot: what it posted and what completed, a cache line each. */
struct slot {
	_Alignas(64) atomic_ulong posted;
	_Alignas(64) atomic_ulong done;
};

static void die(const char *what)
{
	fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* await polls c until it reaches v, yielding between polls. */
static void await(atomic_ulong *c, unsigned long v)
{
	while (atomic_load_explicit(c, memory_order_acquire) < v)
		sched_yield();
}

static void post(struct slot *s, unsigned long v)
{
	atomic_store_explicit(&s->posted, v, memory_order_release);
}

int main(int argc, char **argv)
{
	long size = 0, iters = 10000, warmup = 100;
	int opt;
	while ((opt = getopt(argc, argv, "S:I:w:")) != -1) {
		switch (opt) {
		case 'S': size = atol(optarg); break;
		case 'I': iters = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		default: goto usage;
		}
	}
	if (size < 1 || iters < 1 || warmup < 0 || optind != argc) {
	usage:
		fprintf(stderr, "usage: relay -S SIZE [-I ITERS] [-w WARMUP]\n");
		return 2;
	}
	long total = warmup + iters;

	struct slot *sl = mmap(NULL, 2 * sizeof(struct slot), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sl == MAP_FAILED)
		die("mmap");

	/* One loopback connection: A's side and B's side. */
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (void *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (void *)&a, &al) < 0)
		die("listen");
	int sock[2];
	sock[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (sock[0] < 0 || connect(sock[0], (void *)&a, sizeof a) < 0)
		die("connect");
	if ((sock[1] = accept(l, NULL, NULL)) < 0)
		die("accept");
	close(l);
	int one = 1;
	for (int i = 0; i < 2; i++) {
		if (setsockopt(sock[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
		    fcntl(sock[i], F_SETFL, O_NONBLOCK) < 0)
			die("socket options");
	}

	/* The clients end with the relay, however it ends: they spin. */
	pid_t relay = getpid(), kids[2];
	int pipefd[2];
	if (pipe(pipefd) < 0)
		die("pipe");
	if ((kids[1] = fork()) == 0) { /* B: answers every message */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != relay)
			_exit(1);
		for (long i = 1; i <= total; i++) {
			await(&sl[1].done, i);
			post(&sl[1], i);
		}
		_exit(0);
	}
	if ((kids[0] = fork()) == 0) { /* A: sends, waits for the answer, times it */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != relay)
			_exit(1);
		double t0 = now();
		for (long i = 1; i <= total; i++) {
			if (i == warmup + 1)
				t0 = now();
			post(&sl[0], i);
			await(&sl[0].done, i);
		}
		double t = now() - t0;
		char line[256];
		int n = snprintf(line, sizeof line,
				 "{\"bytes\":%ld,\"iters\":%ld,\"usec_per_xfer\":%.2f,\"mb_per_sec\":%.2f}\n",
				 size, iters, t / iters / 2 * 1e6, 2.0 * size * iters / t / 1e6);
		if (write(pipefd[1], line, n) != n)
			_exit(1);
		_exit(0);
	}
	if (kids[0] < 0 || kids[1] < 0)
		die("fork");
	close(pipefd[1]);

	/* The relay. Client d's messages go out on sock[d] and arrive on
	 * sock[1-d]; completing one bumps the other client's done. */
	char *out = malloc(size), *in = malloc(1 << 20);
	if (!out || !in)
		die("malloc");
	/* Real bytes: untouched memory would be the shared zero page, one
	 * page always in cache, and make every write cheaper than a real
	 * sender's. */
	memset(out, 0x5a, size);
	memset(in, 0, 1 << 20);
	unsigned long taken[2] = {0, 0}, done[2] = {0, 0};
	long left[2] = {0, 0}, got[2] = {0, 0};
	while (done[0] < (unsigned long)total || done[1] < (unsigned long)total) {
		int busy = 0;
		for (int d = 0; d < 2; d++) {
			if (left[d] == 0 && atomic_load_explicit(&sl[d].posted, memory_order_acquire) > taken[d]) {
				taken[d]++;
				left[d] = size;
				busy = 1;
			}
			if (left[d] > 0) {
				ssize_t k = write(sock[d], out + (size - left[d]), left[d]);
				if (k > 0) {
					left[d] -= k;
					busy = 1;
				} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
					die("write");
				}
			}
		}
		for (int d = 0; d < 2; d++) {
			long want = size - got[d];
			ssize_t k = read(sock[1 - d], in, want < (1 << 20) ? want : (1 << 20));
			if (k > 0) {
				busy = 1;
				if ((got[d] += k) == size) {
					got[d] = 0;
					atomic_store_explicit(&sl[1 - d].done, ++done[1 - d], memory_order_release);
				}
			} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
				die("read");
			}
		}
		if (!busy)
			sched_yield();
	}
	char line[256];
	ssize_t n = read(pipefd[0], line, sizeof line - 1);
	for (int i = 0; i < 2; i++)
		waitpid(kids[i], NULL, 0);
	if (n <= 0) {
		fprintf(stderr, "relay: client A reported nothing\n");
		return 1;
	}
	fwrite(line, 1, n, stdout);
	return 0;
}
