/*
 * fabricfs.h: the fabricfs ring ABI (docs/abi.md, abi_version 1) for C.
 *
 * The layout of a ring file (header fields, the four shared words, work
 * requests and completions), every constant of the ABI, and the few
 * operations a client needs: validating a mapped header, publishing a work
 * request, taking completions, and sleeping and waking on a ring's futex
 * word. Libc only; the atomics are GCC/Clang __atomic builtins on plain
 * uint32_t words, and the futex calls are syscall(SYS_futex, ...) on the
 * shared (not _PRIVATE) operations, since the words live in pages shared
 * with the daemon.
 *
 * core/ring is the daemon's implementation of the same layout; a test
 * (core/ring/clients_test.go) compiles this header and checks every offset,
 * size and constant in it against core/ring and core/fi.
 *
 * A ring has one producer and one consumer: post to a work ring from one
 * thread at a time, reap a completion ring from one thread at a time.
 */
#ifndef FABRICFS_H
#define FABRICFS_H

/* syscall(2) and O_CLOEXEC: include this header first, or define
 * _GNU_SOURCE yourself. */
#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The ring file (docs/abi.md "Ring layout"). */
#define FABRICFS_ABI_VERSION 1             /* abi_version, and /abi_version */
#define FABRICFS_RING_MAGIC 0x47524646u    /* the bytes "FFRG" */
#define FABRICFS_RING_WORK 1               /* ring_type: the application produces */
#define FABRICFS_RING_COMPLETION 2         /* ring_type: the daemon produces */
#define FABRICFS_ENTRY_SIZE 128            /* entry_size */
#define FABRICFS_HEADER_SIZE 4096          /* the header page; entry 0 follows it */
#define FABRICFS_MAX_ENTRIES (1u << 20)    /* the largest entry_count the daemon makes */

/* Where the daemon puts the four words; read them from the header anyway. */
#define FABRICFS_HEAD_OFF 64
#define FABRICFS_TAIL_OFF 128
#define FABRICFS_FLAGS_OFF 192
#define FABRICFS_WAKE_OFF 256

/* The flags word. */
#define FABRICFS_RING_NEED_WAKEUP 1u /* the consumer sleeps or is about to */
#define FABRICFS_RING_OVERFLOW 2u    /* the daemon holds completions that did not fit */
#define FABRICFS_RING_DEAD 4u        /* the object is closed; nobody serves the ring */

/* The header's features. */
#define FABRICFS_FEAT_FUTEX 1ull     /* the wake word works with futexes */
#define FABRICFS_FEAT_WAIT_FILE 2ull /* cq/N/wait exists */
#define FABRICFS_FEAT_IOV 4ull       /* work requests take the segment-array form */

/*
 * The segment-array form (docs/abi.md, "Scatter-gather"): a work request
 * with a non-zero iov_count or rma_iov_count names, with desc, offset and
 * len, an array of iov_count struct fabricfs_iov then rma_iov_count struct
 * fabricfs_rma_iov, at most FABRICFS_IOV_LIMIT of each.
 */
#define FABRICFS_IOV_LIMIT 4
#define FABRICFS_SEG_SIZE 24

/*
 * Work request operations (op). The atomics need an endpoint with FI_ATOMIC
 * and an operation its domain's query_atomic file lists (docs/abi.md).
 */
#define FABRICFS_OP_SEND 1
#define FABRICFS_OP_RECV 2
#define FABRICFS_OP_TSEND 3
#define FABRICFS_OP_TRECV 4
#define FABRICFS_OP_WRITE 5
#define FABRICFS_OP_READ 6
#define FABRICFS_OP_ATOMIC 7
#define FABRICFS_OP_FETCH_ATOMIC 8
#define FABRICFS_OP_COMPARE_ATOMIC 9

/*
 * libfabric's values of the flags and error codes the ABI carries, under
 * libfabric's names (defined only where <rdma/fabric.h> did not define them).
 */
#ifndef FI_MSG
#define FI_MSG (1ull << 1)
#endif
#ifndef FI_RMA
#define FI_RMA (1ull << 2)
#endif
#ifndef FI_TAGGED
#define FI_TAGGED (1ull << 3)
#endif
#ifndef FI_ATOMIC
#define FI_ATOMIC (1ull << 4)
#endif
#ifndef FI_READ
#define FI_READ (1ull << 8)
#endif
#ifndef FI_WRITE
#define FI_WRITE (1ull << 9)
#endif
#ifndef FI_RECV
#define FI_RECV (1ull << 10)
#endif
#ifndef FI_SEND
#define FI_SEND (1ull << 11)
#endif
#ifndef FI_REMOTE_READ
#define FI_REMOTE_READ (1ull << 12)
#endif
#ifndef FI_REMOTE_WRITE
#define FI_REMOTE_WRITE (1ull << 13)
#endif
#ifndef FI_MULTI_RECV
#define FI_MULTI_RECV (1ull << 16)
#endif
#ifndef FI_REMOTE_CQ_DATA
#define FI_REMOTE_CQ_DATA (1ull << 17)
#endif
#ifndef FI_COMPLETION
#define FI_COMPLETION (1ull << 24)
#endif
#ifndef FI_INJECT
#define FI_INJECT (1ull << 25)
#endif
#ifndef FI_TRANSMIT_COMPLETE
#define FI_TRANSMIT_COMPLETE (1ull << 27)
#endif
#ifndef FI_DELIVERY_COMPLETE
#define FI_DELIVERY_COMPLETE (1ull << 28)
#endif
#ifndef FI_ADDR_UNSPEC
#define FI_ADDR_UNSPEC ((uint64_t)-1)
#endif
#ifndef FI_ADDR_NOTAVAIL
#define FI_ADDR_NOTAVAIL ((uint64_t)-1)
#endif
#ifndef FI_EIO
#define FI_EIO 5
#endif
#ifndef FI_EACCES
#define FI_EACCES 13
#endif
#ifndef FI_EINVAL
#define FI_EINVAL 22
#endif
#ifndef FI_ENOSYS
#define FI_ENOSYS 38
#endif
#ifndef FI_EMSGSIZE
#define FI_EMSGSIZE 90
#endif
#ifndef FI_EOPNOTSUPP
#define FI_EOPNOTSUPP 95
#endif
#ifndef FI_ENOTCONN
#define FI_ENOTCONN 107
#endif
#ifndef FI_ECANCELED
#define FI_ECANCELED 125
#endif
#ifndef FI_ETRUNC
#define FI_ETRUNC 265
#endif
#ifndef FI_ENOAV
#define FI_ENOAV 267
#endif
#ifndef FI_EOVERRUN
#define FI_EOVERRUN 268
#endif

/* The first 64 bytes of a ring file. */
struct fabricfs_ring_header {
	uint32_t magic;
	uint16_t abi_version;
	uint16_t ring_type;
	uint32_t entry_size;
	uint32_t entry_count;
	uint32_t mask;
	uint32_t head_off;
	uint32_t tail_off;
	uint32_t flags_off;
	uint32_t wake_off;
	uint32_t entries_off;
	uint64_t features;
	uint8_t reserved[16];
};

/*
 * A work request, the entry of ep/N/tx and ep/N/rx. Reserved bytes zero. A
 * non-zero iov_count or rma_iov_count makes it the segment-array form.
 */
struct fabricfs_wr {
	uint8_t op;
	uint8_t iov_count;
	uint8_t rma_iov_count;
	uint8_t reserved1[5];
	uint64_t flags;
	uint64_t context;
	uint64_t desc;
	uint64_t offset;
	uint64_t len;
	uint64_t addr;
	uint64_t data;
	uint64_t tag;
	uint64_t ignore;
	uint64_t rma_addr;
	uint64_t rma_key;
	uint64_t result_desc;
	uint64_t result_offset;
	uint64_t compare_offset;
	uint8_t datatype;
	uint8_t atomic_op;
	uint8_t reserved2[6];
};

/* A completion, the entry of cq/N/data. err_data: with err
 * -FI_EADDRNOTAVAIL (FI_SOURCE_ERR) the sender's address, a struct
 * sockaddr_in or sockaddr_in6 by its family; zero otherwise. A buffered
 * receive's report (docs/abi.md) has its claim key in op_context, the
 * offset of its bytes in the endpoint's buffered file in buf, and the
 * endpoint's attr/desc in desc. */
struct fabricfs_cqe {
	uint64_t op_context;
	uint64_t flags;
	uint64_t len;
	uint64_t buf;
	uint64_t data;
	uint64_t tag;
	uint64_t src_addr;
	int32_t err;
	int32_t prov_errno;
	uint64_t olen;
	uint64_t desc;
	uint8_t err_data[32];
	uint8_t reserved[16];
};

/* A local segment: len bytes at offset of the region whose desc is desc. */
struct fabricfs_iov {
	uint64_t desc;
	uint64_t offset;
	uint64_t len;
};

/* A remote segment: len bytes at addr of the peer's region whose key is key. */
struct fabricfs_rma_iov {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};

_Static_assert(sizeof(struct fabricfs_iov) == FABRICFS_SEG_SIZE, "fabricfs_iov");
_Static_assert(sizeof(struct fabricfs_rma_iov) == FABRICFS_SEG_SIZE, "fabricfs_rma_iov");
_Static_assert(sizeof(struct fabricfs_ring_header) == 64, "fabricfs_ring_header");
_Static_assert(sizeof(struct fabricfs_wr) == FABRICFS_ENTRY_SIZE, "fabricfs_wr");
_Static_assert(sizeof(struct fabricfs_cqe) == FABRICFS_ENTRY_SIZE, "fabricfs_cqe");

/* A mapped ring, as fabricfs_ring_open validated it. */
struct fabricfs_ring {
	uint8_t *mem;
	size_t size;
	uint16_t type;
	uint32_t count, mask;
	uint64_t features;
	uint32_t *head, *tail, *flags, *wake;
	uint8_t *entries;
};

/* The orderings of docs/abi.md "Ordering rules". */
static inline uint32_t fabricfs_load_acquire(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint32_t fabricfs_load_relaxed(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void fabricfs_store_release(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline void fabricfs_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* fabricfs_futex_wake wakes every waiter on the word w, in any process. */
static inline long fabricfs_futex_wake(uint32_t *w)
{
	return syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* fabricfs_futex_wait sleeps while *w == val, until a wake, a signal or the
 * timeout (NULL: none). -1 with errno EAGAIN, EINTR or ETIMEDOUT means
 * "look again". */
static inline long fabricfs_futex_wait(uint32_t *w, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, w, FUTEX_WAIT, val, timeout, NULL, 0);
}

/* fabricfs_ring_open checks the header of a mapped ring file of size bytes
 * and fills r. It returns NULL, or the name of the first field that breaks
 * docs/abi.md ("magic", "entry_count", "head_off"...). */
static inline const char *fabricfs_ring_open(struct fabricfs_ring *r, void *mem, size_t size)
{
	struct fabricfs_ring_header h;
	if (size < sizeof h || (uintptr_t)mem % 4)
		return "length";
	memcpy(&h, mem, sizeof h);
	if (h.magic != FABRICFS_RING_MAGIC)
		return "magic";
	if (h.abi_version != FABRICFS_ABI_VERSION)
		return "abi_version";
	if (h.ring_type != FABRICFS_RING_WORK && h.ring_type != FABRICFS_RING_COMPLETION)
		return "ring_type";
	if (h.entry_size != FABRICFS_ENTRY_SIZE)
		return "entry_size";
	if (h.entry_count == 0 || (h.entry_count & (h.entry_count - 1)))
		return "entry_count";
	if (h.mask != h.entry_count - 1)
		return "mask";
	for (size_t i = 0; i < sizeof h.reserved; i++)
		if (h.reserved[i])
			return "reserved";
	if (h.entries_off < 5 * 64 || h.entries_off % 64)
		return "entries_off";
	const uint32_t off[4] = {h.head_off, h.tail_off, h.flags_off, h.wake_off};
	static const char *const name[4] = {"head_off", "tail_off", "flags_off", "wake_off"};
	for (int i = 0; i < 4; i++) {
		if (off[i] % 4 || off[i] < 64 || (uint64_t)off[i] + 4 > h.entries_off)
			return name[i];
		for (int j = 0; j < i; j++)
			if (off[j] / 64 == off[i] / 64)
				return name[i];
	}
	if ((uint64_t)h.entries_off + (uint64_t)h.entry_count * FABRICFS_ENTRY_SIZE > size)
		return "length";
	uint8_t *m = mem;
	r->mem = m;
	r->size = size;
	r->type = h.ring_type;
	r->count = h.entry_count;
	r->mask = h.mask;
	r->features = h.features;
	r->head = (uint32_t *)(m + h.head_off);
	r->tail = (uint32_t *)(m + h.tail_off);
	r->flags = (uint32_t *)(m + h.flags_off);
	r->wake = (uint32_t *)(m + h.wake_off);
	r->entries = m + h.entries_off;
	return NULL;
}

/* fabricfs_entry is entry i (a free-running index) of r. */
static inline void *fabricfs_entry(const struct fabricfs_ring *r, uint32_t i)
{
	return r->entries + (size_t)(i & r->mask) * FABRICFS_ENTRY_SIZE;
}

/* fabricfs_wake wakes r's consumer: wake += 1, then FUTEX_WAKE. */
static inline void fabricfs_wake(struct fabricfs_ring *r)
{
	__atomic_fetch_add(r->wake, 1, __ATOMIC_SEQ_CST);
	fabricfs_futex_wake(r->wake);
}

/* fabricfs_post publishes one work request on the work ring r and wakes
 * the daemon if it sleeps. It returns 0, or -1 when the ring is full (the
 * daemon frees entries as it takes them: retry later). */
static inline int fabricfs_post(struct fabricfs_ring *r, const struct fabricfs_wr *wr)
{
	uint32_t t = fabricfs_load_relaxed(r->tail); /* only we write it */
	uint32_t h = fabricfs_load_acquire(r->head);
	if (t - h >= r->count)
		return -1;
	memcpy(fabricfs_entry(r, t), wr, sizeof *wr);
	fabricfs_store_release(r->tail, t + 1);
	fabricfs_fence(); /* pairs with the sleeper's: we see its flag, or it sees our tail */
	if (fabricfs_load_relaxed(r->flags) & FABRICFS_RING_NEED_WAKEUP)
		fabricfs_wake(r);
	return 0;
}

/* fabricfs_reap takes one completion from the completion ring r into *c.
 * It returns 1, or 0 when the ring is empty. */
static inline int fabricfs_reap(struct fabricfs_ring *r, struct fabricfs_cqe *c)
{
	uint32_t h = fabricfs_load_relaxed(r->head); /* only we write it */
	if (fabricfs_load_acquire(r->tail) == h)
		return 0;
	memcpy(c, fabricfs_entry(r, h), sizeof *c);
	fabricfs_store_release(r->head, h + 1);
	return 1;
}

/* fabricfs_sleep is the consumer's sleep on r: it returns once the ring is
 * not empty, or after a wake-up, a signal or the timeout (NULL: none).
 * Check the ring (and RING_DEAD) again afterwards. It returns 0, or -1
 * with errno for a futex failure other than EAGAIN, EINTR and ETIMEDOUT. */
static inline int fabricfs_sleep(struct fabricfs_ring *r, const struct timespec *timeout)
{
	int ret = 0;
	uint32_t h = fabricfs_load_relaxed(r->head);
	uint32_t w = __atomic_load_n(r->wake, __ATOMIC_SEQ_CST);
	__atomic_fetch_or(r->flags, FABRICFS_RING_NEED_WAKEUP, __ATOMIC_SEQ_CST);
	fabricfs_fence();
	if (fabricfs_load_acquire(r->tail) == h && fabricfs_futex_wait(r->wake, w, timeout) < 0 &&
	    errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
		ret = -1;
	int e = errno;
	__atomic_fetch_and(r->flags, ~FABRICFS_RING_NEED_WAKEUP, __ATOMIC_SEQ_CST);
	errno = e;
	return ret;
}

/* fabricfs_map opens path read-write and maps all of it shared (a ring
 * file, or mr/N/data). It returns the mapping and its size, or NULL with
 * errno. The mapping outlives the descriptor, which it closes. */
static inline void *fabricfs_map(const char *path, size_t *size)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *m = NULL;
	if (fstat(fd, &st) < 0)
		; /* errno says why */
	else if (st.st_size <= 0)
		errno = EINVAL;
	else if ((m = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		m = NULL;
	else
		*size = st.st_size;
	int e = errno;
	close(fd);
	errno = e;
	return m;
}

#endif /* FABRICFS_H */
