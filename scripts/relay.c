/*
 * relay: the shape of fabricfs's ring ping-pong with nothing else in it, as
 * a floor for scripts/bench.sh (docs/bench.md, "The three-party floor" and
 * "The floor of every shape").
 *
 * Two client processes, A and B, ping-pong SIZE-byte messages through
 * relays, as two ringpong processes do through the fabricfs daemon: a
 * client posts by bumping a counter in shared memory and waits for its
 * completion counter. A relay polls the posting counters and the sockets of
 * the ends it serves without blocking: it writes a posted message into the
 * poster's end of one loopback TCP connection, reads the messages arriving
 * on that end and bumps the client's completion counter when a whole one is
 * in, and calls sched_yield after a pass that found nothing to do. The
 * relay's data are its own buffers: one copy in, one copy out, as on
 * fabricfs's tcp path. There are no work-request or completion entries, no
 * provider, no Go: the difference between this and fi_pingpong is what the
 * shape itself costs on the machine, and the difference between fabricfs
 * and this is what fabricfs adds to the shape.
 *
 * The shapes:
 *   -m single  one relay process serves both ends (fabricfs's engine: one
 *              thread for a group of endpoints); the default
 *   -m split   one relay process per end, so that the copy into one end's
 *              socket and the copy out of the other's can run at once
 *   -p         pinned, on the first two CPUs the process may use (say 0
 *              and 1): single puts the relay on the first and both clients
 *              on the second; split puts A and its relay on the first, B
 *              and its relay on the second
 *   -z         the clients wait by sleeping on a futex that the relay wakes
 *              (docs/abi.md's NEED_WAKEUP protocol in small) instead of
 *              polling with sched_yield between polls
 *
 * usage: relay -S SIZE [-I ITERS] [-w WARMUP] [-m single|split] [-p] [-z]
 * prints one line: {"bytes":...,"iters":...,"usec_per_xfer":...,"mb_per_sec":...}
 * where usec_per_xfer is half a round trip, as fi_pingpong's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A client's slot: what it posted and what completed, a cache line each,
 * and with -z the futex word its relay bumps and whether it sleeps. */
struct slot {
	_Alignas(64) atomic_ulong posted;
	_Alignas(64) atomic_ulong done;
	_Alignas(64) atomic_uint wake;
	atomic_uint sleeping;
};

/* One end of the connection as a relay sees it: client d's slot and
 * socket, what it took of the client's posts and what it is writing and
 * reading. */
struct end {
	struct slot *slot;
	int fd;
	unsigned long taken, done;
	long left, got;
};

static int sleepers; /* -z */
static pid_t parent;  /* the first relay; the other processes are its children */
static int cpu[2];    /* -p: the first two CPUs this process may use */
static pid_t kids[3]; /* the parent's children */
static int nkids;

/* on_child ends the parent when a child has ended other than by exit(0),
 * a signal included: it would otherwise poll for its peer for ever. It
 * looks without reaping (WNOWAIT), so the final waitpid still reaps. */
static void on_child(int sig)
{
	(void)sig;
	for (int i = 0; i < nkids; i++) {
		siginfo_t info = {0};
		if (kids[i] > 0 && waitid(P_PID, kids[i], &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == kids[i] &&
		    (info.si_code != CLD_EXITED || info.si_status != 0)) {
			static const char msg[] = "relay: a child process failed\n";
			if (write(2, msg, sizeof msg - 1) < 0) {
			}
			_exit(1);
		}
	}
}

/* die ends the run: a child takes the parent down with it (and the
 * other children with the parent: PR_SET_PDEATHSIG), since nothing else
 * would tell the processes still polling that their peer is gone. */
static void die(const char *what)
{
	fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
	if (getpid() != parent)
		kill(parent, SIGKILL);
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* pin keeps the calling process on cpu[which]. */
static void pin(int which)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu[which], &set);
	if (sched_setaffinity(0, sizeof set, &set) < 0)
		die("sched_setaffinity");
}

/* child forks a process that dies with the parent, pinned to cpu[which]
 * if pinned, and keeps only the pipe's write end for client A (the
 * reporter); it returns 0 in the child, as fork does. */
static pid_t child(int pinned, int which, int pipefd[2], int reporter)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		die("prctl");
	if (getppid() != parent)
		_exit(1); /* the parent is gone already */
	close(pipefd[0]);
	if (!reporter)
		close(pipefd[1]);
	if (pinned)
		pin(which);
	return 0;
}

/* await waits until s's completion counter reaches v: polling it with
 * sched_yield between polls, or with -z asleep on s->wake. A sleeper says
 * so before its last look at the counter; the relay bumps wake after the
 * counter and wakes it if it says so, so no completion is missed. */
static void await(struct slot *s, unsigned long v)
{
	while (atomic_load(&s->done) < v) {
		if (!sleepers) {
			sched_yield();
			continue;
		}
		unsigned w = atomic_load(&s->wake);
		atomic_store(&s->sleeping, 1);
		if (atomic_load(&s->done) < v)
			syscall(SYS_futex, &s->wake, FUTEX_WAIT, w, NULL, NULL, 0);
		atomic_store(&s->sleeping, 0);
	}
}

static void complete(struct slot *s, unsigned long v)
{
	atomic_store(&s->done, v);
	if (sleepers) {
		atomic_fetch_add(&s->wake, 1);
		if (atomic_load(&s->sleeping))
			syscall(SYS_futex, &s->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
}

/* relay serves the n ends in e until each has delivered total messages to
 * its client and written all its client posted. out holds the bytes sent,
 * in takes the bytes received (size each). */
static void relay(struct end *e, int n, long size, unsigned long total, char *out, char *in)
{
	for (;;) {
		int busy = 0, live = 0;
		for (int i = 0; i < n; i++) {
			struct end *x = &e[i];
			if (x->left == 0 && atomic_load_explicit(&x->slot->posted, memory_order_acquire) > x->taken) {
				x->taken++;
				x->left = size;
				busy = 1;
			}
			if (x->left > 0) {
				ssize_t k = write(x->fd, out + (size - x->left), x->left);
				if (k > 0) {
					x->left -= k;
					busy = 1;
				} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
					die("write");
				}
			}
		}
		for (int i = 0; i < n; i++) {
			struct end *x = &e[i];
			if (x->done < total) {
				ssize_t k = read(x->fd, in + x->got, size - x->got);
				if (k > 0) {
					busy = 1;
					if ((x->got += k) == size) {
						x->got = 0;
						complete(x->slot, ++x->done);
					}
				} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
					die("read");
				}
			}
			live |= x->done < total || x->taken < total || x->left > 0;
		}
		if (!live)
			return;
		if (!busy)
			sched_yield();
	}
}

int main(int argc, char **argv)
{
	parent = getpid(); /* before anything can die(): see there */
	long size = 0, iters = 10000, warmup = 100;
	int opt, split = 0, pinned = 0;
	while ((opt = getopt(argc, argv, "S:I:w:m:pz")) != -1) {
		switch (opt) {
		case 'S': size = atol(optarg); break;
		case 'I': iters = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		case 'm':
			if (strcmp(optarg, "split") == 0)
				split = 1;
			else if (strcmp(optarg, "single") != 0)
				goto usage;
			break;
		case 'p': pinned = 1; break;
		case 'z': sleepers = 1; break;
		default: goto usage;
		}
	}
	if (size < 1 || iters < 1 || warmup < 0 || optind != argc) {
	usage:
		fprintf(stderr, "usage: relay -S SIZE [-I ITERS] [-w WARMUP] [-m single|split] [-p] [-z]\n");
		return 2;
	}
	if (pinned) {
		cpu_set_t allowed;
		int n = 0;
		if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
			die("sched_getaffinity");
		for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &allowed))
				cpu[n++] = c;
		if (n < 2) {
			fprintf(stderr, "relay: -p needs two CPUs\n");
			return 2;
		}
	}
	unsigned long total = warmup + iters;

	struct slot *sl = mmap(NULL, 2 * sizeof(struct slot), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sl == MAP_FAILED)
		die("mmap");

	/* One loopback connection: A's end and B's end. */
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

	/* Real bytes: untouched memory would be the shared zero page, one
	 * page always in cache, and make every write cheaper than a real
	 * sender's. */
	char *out = malloc(size), *in = malloc(size);
	if (!out || !in)
		die("malloc");
	memset(out, 0x5a, size);
	memset(in, 0, size);
	struct end ends[2] = {{.slot = &sl[0], .fd = sock[0]}, {.slot = &sl[1], .fd = sock[1]}};

	/* This process is the relay of both ends (single) or of A's (split);
	 * the others end with it, however it ends: they spin. */
	int pipefd[2];
	if (pipe(pipefd) < 0)
		die("pipe");
	struct sigaction sa = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		die("sigaction");
	if ((kids[nkids++] = child(pinned, 1, pipefd, 0)) == 0) { /* B: answers every message */
		for (unsigned long i = 1; i <= total; i++) {
			await(&sl[1], i);
			atomic_store_explicit(&sl[1].posted, i, memory_order_release);
		}
		_exit(0);
	}
	if ((kids[nkids++] = child(pinned, split ? 0 : 1, pipefd, 1)) == 0) { /* A: sends, waits for the answer, times it */
		double t0 = now();
		for (unsigned long i = 1; i <= total; i++) {
			if (i == (unsigned long)warmup + 1)
				t0 = now();
			atomic_store_explicit(&sl[0].posted, i, memory_order_release);
			await(&sl[0], i);
		}
		double t = now() - t0;
		char line[256];
		int n = snprintf(line, sizeof line,
				 "{\"bytes\":%ld,\"iters\":%ld,\"usec_per_xfer\":%.2f,\"mb_per_sec\":%.2f}\n",
				 size, iters, t / iters / 2 * 1e6, 2.0 * size * iters / t / 1e6);
		if (write(pipefd[1], line, n) != n)
			die("write to the relay");
		_exit(0);
	}
	if (split && (kids[nkids++] = child(pinned, 1, pipefd, 0)) == 0) { /* B's relay */
		relay(&ends[1], 1, size, total, out, in);
		_exit(0);
	}
	for (int i = 0; i < nkids; i++)
		if (kids[i] < 0)
			die("fork");
	on_child(0); /* one that failed before its pid was stored */
	close(pipefd[1]);
	if (pinned)
		pin(0);
	relay(ends, split ? 1 : 2, size, total, out, in);

	char line[256];
	ssize_t n = read(pipefd[0], line, sizeof line - 1);
	int failed = 0;
	for (int i = 0; i < nkids; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	if (n <= 0 || failed) {
		fprintf(stderr, "relay: client A reported nothing, or a process failed\n");
		return 1;
	}
	fwrite(line, 1, n, stdout);
	return 0;
}
