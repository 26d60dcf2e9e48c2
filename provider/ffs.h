/*
 * ffs.h: the fabricfs libfabric provider's internal interfaces.
 *
 * The provider (bin/libfabricfs-fi.so, loaded by libfabric 1.17 from
 * FI_PROVIDER_PATH) implements the libfabric API by driving a mounted
 * fabricfs tree (FI_FABRICFS_ROOT, default /fabric): every libfabric
 * object is a tree object opened through its kind's clone file, so the
 * daemon closes it when the program exits or dies; control calls are ctl
 * writes; data moves through the rings of clients/c/fabricfs.h.
 * docs/provider.md describes the design.
 *
 * Files:
 *	tree.c		files of the tree: clone, ctl, attributes, errors, maps
 *	prov.c		fi_prov_ini, fi_getinfo, the fabric
 *	info.c		fi_info text (the tree's getinfo answers) to struct fi_info
 *	domain.c	the domain and its operations
 *	ep.c		active endpoints: data operations over the rings
 *	srx.c		shared transmit and receive contexts
 *	pep.c		passive endpoints
 *	eq.c		event queues and connection management events
 *	cq.c		completion queues
 *	av.c		address vectors
 *	mr.c		memory regions
 *	cntr.c		counters
 *	wait.c		wait objects: FI_WAIT_FD, fi_trywait, wait sets, poll sets
 *	atomic.c	atomic operations (fi_atomic(3)) and fi_query_atomic
 *	ops.c		fi_open_ops: the sets of an object's ops/ directory
 *
 * fi_ext_fabricfs.h is the public part: the struct fi_open_ops gives.
 */
#ifndef FFS_H
#define FFS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "fabricfs.h"
#include "fi_ext_fabricfs.h"

#define FFS_PROV_NAME "fabricfs"
#define FFS_PROV_VERSION FI_VERSION(1, 0)
#define FFS_API_VERSION FI_VERSION(1, 17)

extern struct fi_provider ffs_prov;

/* ---- tree.c: the tree's files ---- */

/* ffs_root is the tree's mount point: FI_FABRICFS_ROOT, or /fabric. */
const char *ffs_root(void);

/*
 * A tree object this process opened. ctl is the open clone file (or the
 * ctl file of an object the process adopted): while it is open the object
 * lives, and commands are written to it. dir is the object's directory
 * (ROOT/PROV/DOMAIN/KIND/ID).
 */
struct ffs_obj {
	int ctl;
	unsigned id;
	char dir[PATH_MAX];
};

/* ffs_obj_clone makes a new object of kind ("ep", "cq", ...) in the domain
 * directory domdir by opening its clone file. */
int ffs_obj_clone(struct ffs_obj *o, const char *domdir, const char *kind);
/* ffs_obj_adopt opens the ctl of an existing object (an endpoint the tree
 * made for a connection request), which then lives while it is open. */
int ffs_obj_adopt(struct ffs_obj *o, const char *domdir, const char *kind, unsigned id);
/* ffs_obj_close closes the object's ctl; the daemon closes the object once
 * nothing else holds it (mappings of its files, bindings). */
void ffs_obj_close(struct ffs_obj *o);

/* ffs_ctl writes one command. It returns 0 or the negative FI_E* code of
 * the failure; the object's err line is logged (FI_LOG debug) and kept in
 * ffs_last_error for fi_strerror-style reporting. */
int ffs_ctl(struct ffs_obj *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ffs_set writes one value to the object's file name (relative to dir,
 * e.g. "attr/len"). */
int ffs_set(struct ffs_obj *o, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* ffs_write writes text to the object's file name in one write (a value
 * or block longer than ffs_set takes); failures as ffs_set's. */
int ffs_write(struct ffs_obj *o, const char *name, const char *text);
/* ffs_get reads the object's file name into buf (NUL-terminated, the
 * trailing newline removed); it returns the length or a negative FI_E*. */
ssize_t ffs_get(struct ffs_obj *o, const char *name, char *buf, size_t size);
/* ffs_get_u64 reads a number file (decimal or 0x hex). */
int ffs_get_u64(struct ffs_obj *o, const char *name, uint64_t *v);
/* ffs_read_path reads any file of the tree (absolute path) into buf as
 * ffs_get does, up to size-1 bytes. */
ssize_t ffs_read_path(const char *path, char *buf, size_t size);
/* ffs_read_all reads a whole file of unknown size (getinfo answers, info
 * files) into a malloc'd NUL-terminated string, at most max bytes. */
ssize_t ffs_read_all(int fd, char **out, size_t max);

/* ffs_map maps the object's file name (a ring, or mr data) shared, read
 * and write, as docs/abi.md says; *size gets its size. NULL on failure. */
void *ffs_map(struct ffs_obj *o, const char *name, size_t *size);
/* ffs_ring_map maps and checks a ring file of the object. */
int ffs_ring_map(struct ffs_obj *o, const char *name, struct fabricfs_ring *r);
void ffs_ring_unmap(struct fabricfs_ring *r);

/* ffs_fi_errno maps an errno from a tree file operation to the FI_E*
 * code it stands for (docs/tree.md "Errors", read backwards): EBADFD is
 * FI_EOPBADSTATE, EMSGSIZE FI_ETRUNC, ENOMSG FI_EAVAIL, EOVERFLOW
 * FI_EOVERRUN, EBADMSG FI_ECRC, ENOKEY FI_ENOKEY; other errnos are
 * libfabric's own codes.
 * It returns the positive code. */
int ffs_fi_errno(int err);

/* ffs_warn logs through libfabric's logging (FI_LOG_LEVEL=warn shows it). */
void ffs_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ffs_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- prov.c and info.c: fi_getinfo and the fabric ---- */

struct ffs_fabric {
	struct fid_fabric fabric_fid;
	char name[256]; /* the fabric name as the provider reports it */
};

/*
 * Names: an entry of the tree's provider PROV (tcp, verbs) in domain DOM
 * (lo, rxe_127_0_0_1) reports domain_attr->name "PROV/DOM" (the domain's
 * directory under the root) and fabric_attr->name "PROV/FABRIC" (the tree's
 * fabric name, 127.0.0.1/32), prov_name "fabricfs".
 */

/* ffs_info_parse turns text in fi_info -v form (the tree's getinfo answer:
 * entries after "---" lines, as fi_tostr(FI_TYPE_INFO) prints them) into a
 * list of fi_info (allocated with fi_allocinfo). Names are rewritten as
 * above. It returns 0 or a negative FI_E*. */
int ffs_info_parse(const char *text, struct fi_info **list);
/* ffs_info_parse is these two: ffs_info_read parses the text as it is
 * (the names the tree gives), ffs_info_name renames each entry of a list
 * as above. */
int ffs_info_read(const char *text, struct fi_info **list);
int ffs_info_name(struct fi_info *list);
/* ffs_addr_parse turns an address as fi_tostr prints it
 * (fi_sockaddr_in://IP:PORT, fi_sockaddr_in6://[IP]:PORT, the string of
 * FI_ADDR_STR; "(null)" is NULL) into a malloc'd address of format and
 * len bytes, len at least the format's size. */
int ffs_addr_parse(uint32_t format, const char *s, size_t len, void **out);

/* ffs_info_domain gives the tree domain directory of an fi_info of this
 * provider (ROOT/PROV/DOM) from its domain_attr->name. */
int ffs_info_domain_dir(const struct fi_info *info, char *dir, size_t size);

int ffs_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);

/* ---- domain.c ---- */

struct ffs_domain {
	struct fid_domain domain_fid;
	struct ffs_fabric *fab;
	char dir[PATH_MAX]; /* ROOT/PROV/DOM */
	char prov[32];      /* the tree's provider: tcp or verbs */
	struct fi_info *info; /* a copy of the fi_info it was opened with */
	pthread_mutex_t lock;
	struct ffs_mr *mrs; /* registered regions (mr.c), under lock */
	pthread_mutex_t cq_lock; /* the CQ list; taken before a CQ's lock */
	struct ffs_cq *cqs;      /* every CQ of the domain, hidden ones too */
	int objs; /* its objects open but CQs and regions, which the lists hold
		   * (atomic, ffs_domain_hold): fi_close is -FI_EBUSY until 0 */
	struct ffs_atomics *atomics; /* the tree's fi_query_atomic answers (atomic.c), read once, under lock */
	struct ffs_eq *eq;           /* fi_domain_bind's EQ: the default of its endpoints, or NULL */
	bool reg_mr_events;          /* bound with FI_REG_MR: each registration reports FI_MR_COMPLETE there */
	struct ffs_domain *next_open; /* in domain.c's list of the process's open domains */
	/* The endpoints with FI_BUFFERED_RECV by their attr/desc, which the
	 * tree's reports carry (ep.c, buffered receives): a closed one stays
	 * with ep NULL, so that a late report of it is dropped, never taken
	 * for a request. bep_lock ranks below a CQ's lock, above an
	 * endpoint's; nbeps is also read atomically. */
	pthread_mutex_t bep_lock;
	struct ffs_bep *beps;
	size_t nbeps, capbeps;
};

/* An endpoint with FI_BUFFERED_RECV, by the desc its reports carry. */
struct ffs_bep {
	uint64_t desc;
	struct ffs_ep *ep;
};

int ffs_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context);
/* ffs_domain_of returns d as a domain of this provider, or NULL when it is
 * another provider's (fi_getinfo's hints->domain_attr->domain). */
struct ffs_domain *ffs_domain_of(struct fid_domain *d);
/* ffs_domain_opened is the first domain of the process still open whose
 * domain_attr->name is name (fi_getinfo's output domain_attr->domain),
 * or NULL. */
struct fid_domain *ffs_domain_opened(const char *name);
/* ffs_domain_hold counts an object made in the domain (delta 1) or closed
 * (-1): endpoints and their contexts, AVs, counters, shared transmit
 * contexts, poll sets. "All objects associated with the opened domain must
 * be released prior to calling fi_close, otherwise the call will return
 * -FI_EBUSY" (fi_domain(3)); CQs and regions are in the domain's lists. */
void ffs_domain_hold(struct ffs_domain *dom, int delta);

/* The fi_ops entries an object does not have: -FI_ENOSYS. */
int ffs_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int ffs_no_control(struct fid *fid, int command, void *arg);
int ffs_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
int ffs_no_tostr(const struct fid *fid, char *buf, size_t len);
int ffs_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context);

/* ---- ops.c: fi_open_ops of domains and endpoints (fi_ext_fabricfs.h) ---- */

/* ffs_ops_open opens a set of the object's ops/ directory: the struct
 * fi_fabricfs_ops, or -FI_ENOSYS for a name the object has no set of. */
int ffs_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
/* ffs_ep_dir is the tree directory of fid if it is an endpoint of this
 * provider (ep.c), else NULL. */
const char *ffs_ep_dir(struct fid *fid);

/* Lock order: dom->cq_lock, then a CQ's lock, then dom->bep_lock (a
 * buffered receive's report), then an endpoint's lock, then an EQ's lock
 * (fi_ep_bind of an EQ). The data path calls
 * ffs_mr_lookup (dom->lock) before it takes the endpoint's lock. */

/* ffs_domain_progress finishes what the daemon completed for the domain's
 * endpoints: it reaps their completion rings and does the provider's part
 * of each completion (copying a received message out of the provider's
 * buffer into the application's), keeping the entries for fi_cq_read. A
 * counter (cntr.c) calls it after it reads (or waits for) the tree's
 * value: the daemon publishes a completion's CQ entry before it counts it
 * (docs/design.md, "Counters"), so every completion the value counts is
 * in a ring when this runs, and an application that sees a count sees the
 * bytes too. (Called before the read, a completion published and counted
 * in between would be counted with its bytes still in staging.) ep.c and
 * cq.c. */
void ffs_domain_progress(struct ffs_domain *dom);

/* ---- wait.c: wait objects ---- */

/*
 * The waitable part of a CQ, counter or EQ. With FI_WAIT_FD it has an
 * eventfd of its own, with FI_WAIT_SET the wait set's; one provider thread
 * per process (wait.c) makes that descriptor readable when an armed object
 * has something to read, and fi_trywait arms it. armed and the list links
 * are under wait.c's lock, polls is atomic, the rest is set at open.
 */
struct ffs_waitset;
struct ffs_wait {
	enum fi_wait_obj obj; /* as opened: FI_WAIT_NONE, UNSPEC, FD or SET */
	int fd;               /* the descriptor to make readable, or -1 */
	bool own_fd;          /* fd is this object's (FI_WAIT_FD) */
	struct ffs_waitset *set;
	/* ready says whether the object has something to read (taking its
	 * own locks; called under wait.c's lock). trying: the call is
	 * fi_trywait's or fi_wait's, which see a counter's change once. */
	bool (*ready)(struct ffs_wait *w, bool trying);
	struct fabricfs_ring *ring; /* a CQ's ring, whose futex the thread sleeps on; NULL: polled */
	bool armed;
	int polls; /* poll sets holding the object: fi_close is -FI_EBUSY while > 0 */
	struct ffs_wait *next;     /* in wait.c's list of armed-capable objects */
	struct ffs_wait *set_next; /* in its wait set */
};

/* ffs_wait_init gives an object opened with wait_obj (and wait_set for
 * FI_WAIT_SET) its wait part: -FI_ENOSYS for kinds the provider lacks
 * (FI_WAIT_MUTEX_COND, FI_WAIT_YIELD, FI_WAIT_POLLFD), -FI_EINVAL for a
 * wait set not of this provider. */
int ffs_wait_init(struct ffs_wait *w, enum fi_wait_obj obj, struct fid_wait *set,
		  bool (*ready)(struct ffs_wait *, bool), struct fabricfs_ring *ring);
/* ffs_wait_fini undoes it: -FI_EBUSY while a poll set holds the object. */
int ffs_wait_fini(struct ffs_wait *w);
/* ffs_wait_control is fi_control's FI_GETWAIT and FI_GETWAITOBJ. */
int ffs_wait_control(struct ffs_wait *w, int command, void *arg);
/* ffs_wait_signal makes the object's descriptor readable (fi_cq_signal,
 * fi_eq_write). */
void ffs_wait_signal(struct ffs_wait *w);
int ffs_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
int ffs_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr, struct fid_wait **waitset);
/* ffs_wait_stop ends this process's waiter thread, if it has one: at the
 * provider's cleanup, before libfabric unloads the library (fi_fini at
 * exit), which would otherwise leave the thread running unmapped code. */
void ffs_wait_stop(void);
int ffs_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr, struct fid_poll **pollset);
/* The wait part of a fid of this provider's CQs, counters and EQs; NULL
 * for anything else. */
struct ffs_wait *ffs_cq_wait(struct fid *fid);
struct ffs_wait *ffs_cntr_wait(struct fid *fid);
struct ffs_wait *ffs_eq_wait(struct fid *fid);

/* ---- ep.c, pep.c, eq.c, cq.c ---- */

/*
 * A completion queue: a tree CQ whose ring the provider reaps into a
 * queue of finished entries (received bytes copied out, the application's
 * context in op_context), which fi_cq_read returns. A hidden CQ is one the
 * provider made for an endpoint direction the application bound no CQ
 * for: the tree requires one; its entries are dropped.
 */
struct ffs_cq_entry {
	void *op_context;
	uint64_t flags, len, data, tag;
	void *buf;
	fi_addr_t src_addr;
	int err, prov_errno;
	uint64_t olen;
	/* An -FI_EADDRNOTAVAIL entry's err_data is the sender's address, a
	 * struct sockaddr of this many bytes in errline; 0: errline is text. */
	size_t addrlen;
	char errline[256]; /* an error entry's err_data: the endpoint's err line, or empty */
};

struct ffs_cq {
	struct fid_cq cq_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
	struct fabricfs_ring ring; /* cq/N/data */
	enum fi_cq_format format;
	bool hidden;
	pthread_mutex_t lock;
	struct ffs_cq_entry *q; /* finished entries, a circular queue of qcap */
	size_t qcap, qhead, qlen;
	struct ffs_cq_entry err; /* the last entry fi_cq_readerr returned: its errline is err_data */
	int signaled;
	struct ffs_wait wait;
	int bound; /* endpoint directions bound to it; atomic (no lock: binding
		    * holds the endpoint's lock, which ranks below) */
	struct ffs_cq *next; /* in dom->cqs */
};

/* ffs_cq_make makes a CQ in the domain (cq.c): attr NULL for a hidden one. */
int ffs_cq_make(struct ffs_domain *dom, struct fi_cq_attr *attr, bool hidden, struct ffs_cq **cq);
void ffs_cq_free(struct ffs_cq *cq);
/* ffs_cq_reap moves what cq's ring holds into its queue; under cq->lock. */
void ffs_cq_reap(struct ffs_cq *cq);

/* ffs_ep_complete does the endpoint's part of a completion of the tree
 * (ep.c): it maps the work request's context back to the provider's
 * request, copies received bytes out, frees what the request held, and
 * fills e with what the application sees; a buffered receive's report
 * of an endpoint of dom becomes its struct fi_recv_context. It returns
 * true when the application gets an entry. Called under the CQ's lock. */
bool ffs_ep_complete(struct ffs_domain *dom, const struct fabricfs_cqe *c, struct ffs_cq_entry *e);

/* ffs_eq_bind gives the id of the tree EQ of eq in the domain directory
 * domdir (making it on first use), and notes that the tree's events for
 * KIND/ID (kind "ep" or "pep") belong to fid. ffs_eq_unbind forgets it. */
struct ffs_eq;
int ffs_eq_bind(struct ffs_eq *eq, const char *domdir, const char *kind, unsigned id, fid_t fid, unsigned *tree_id);
void ffs_eq_unbind(struct ffs_eq *eq, fid_t fid);
/* ffs_eq_of returns fid as an EQ of this provider, or NULL. ffs_eq_hold
 * counts a domain bound to eq (delta 1) or no longer (-1): fi_close of the
 * EQ is -FI_EBUSY meanwhile. ffs_eq_mr_complete queues fi_domain_bind's
 * FI_REG_MR event for mr: -FI_EAGAIN when the EQ is full. */
struct ffs_eq *ffs_eq_of(struct fid *fid);
void ffs_eq_hold(struct ffs_eq *eq, int delta);
int ffs_eq_mr_complete(struct ffs_eq *eq, struct fid_mr *mr);

/* The fi_ops_cm and fi_ops_ep entries an endpoint lacks (pep.c). */
int ffs_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);
int ffs_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen);
int ffs_no_accept(struct fid_ep *ep, const void *param, size_t paramlen);
int ffs_no_shutdown(struct fid_ep *ep, uint64_t flags);
int ffs_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context);
int ffs_no_listen(struct fid_pep *pep);
int ffs_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen);
ssize_t ffs_no_cancel(fid_t fid, void *context);
int ffs_no_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen);
/* ffs_info_block writes info as the tree reads an fi_info block (the
 * hints of /getinfo, an endpoint's ep/N/info) into buf (prov.c); it fails
 * with -FI_ENODATA for what no tree entry can have. */
int ffs_info_block(const struct fi_info *info, char *buf, size_t size);
/* ffs_getopt is fi_getopt of an endpoint or passive endpoint o: its
 * attr/opt_NAME file, -FI_ENOPROTOOPT where o has no such option. */
int ffs_getopt(struct ffs_obj *o, int level, int optname, void *optval, size_t *optlen);
int ffs_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **ep, void *context);
int ffs_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **ep, void *context);
ssize_t ffs_no_size_left(struct fid_ep *ep);

/* The most private data a connection request, accept or reject carries
 * (FI_OPT_CM_DATA_SIZE). */
#define FFS_CM_DATA_SIZE 256

/* ffs_pep_info is the info a passive endpoint was opened with (pep.c);
 * ffs_pep_name its fi_setname (or src_addr) address as the tree's ADDR,
 * "" for none. */
const struct fi_info *ffs_pep_info(fid_t pep);
const char *ffs_pep_name(fid_t pep);

/* A connection request: the handle of an FI_CONNREQ event's info, the
 * endpoint the tree made for it (its domain directory and id). */
struct ffs_connreq {
	struct fid fid; /* FI_CLASS_CONNREQ */
	char domdir[PATH_MAX];
	unsigned ep_id;
	bool adopted; /* fi_endpoint made it an endpoint, which frees it */
};

/* Addresses (ep.c). ffs_name_get reads an address file of an object
 * (ep local or remote, pep local) into a sockaddr in addr, as fi_getname
 * does (*addrlen: its room in, its size out; -FI_ETOOSMALL with the size
 * needed); -FI_EOPBADSTATE when the file is empty. ffs_addr_format writes
 * a sockaddr as the tree's ADDR argument (IP:PORT, [IP]:PORT). */
int ffs_name_get(struct ffs_obj *o, const char *file, void *addr, size_t *addrlen);
/* ffs_sockaddr_port is the port of a sockaddr_in or sockaddr_in6, 0 for
 * none or another family. */
unsigned ffs_sockaddr_port(const void *addr);
/* ffs_sockaddr_len is the size of the sockaddr_in or sockaddr_in6 at addr
 * (room bytes there), 0 for another family or too little room. */
size_t ffs_sockaddr_len(const void *addr, size_t room);
/* ffs_name_len (tree.c) is the size, with its NUL, of the shm domain's
 * name at addr (FI_ADDR_STR "fi_shm://NAME" or "fi_ns://NODE:SERVICE", no
 * white space, NUL within room bytes), 0 if addr holds none.
 * ffs_addr_format writes such a name as it is. */
size_t ffs_name_len(const void *addr, size_t room);
int ffs_addr_format(const void *addr, size_t addrlen, char *buf, size_t size);
/* ffs_hex_data writes private data as the tree's DATA word (hex:...), or
 * an empty string when len is 0. ep.c. */
int ffs_hex_data(const void *data, size_t len, char *buf, size_t size);

/* Authorization keys (ep.c). ffs_auth_key writes the key an endpoint,
 * passive endpoint or region takes to its attr/auth_key: key when size is
 * not 0, else the domain attributes' ("The domain authorization key will
 * be used if auth_key_size is set to 0"); with neither, nothing, and the
 * tree's default stays (the user's key in the domain's attr/auth_key).
 * The tree takes keys of 1 to FFS_AUTH_KEY_SIZE bytes: -FI_EINVAL past. */
#define FFS_AUTH_KEY_SIZE 64
int ffs_auth_key(struct ffs_obj *o, const struct fi_domain_attr *dom, const uint8_t *key, size_t size);

/* ffs_user_id_caps gives the tree endpoint o, made from info,
 * FI_AV_USER_ID when info's caps have it (ep.c): the fi_info block cannot
 * name the bit (prov.c), so the caps go to attr/caps, which the tree
 * narrows the endpoint to, and the info's side caps after them (the tree
 * derives its own from the caps). 0 or a negative FI_E*. */
int ffs_user_id_caps(struct ffs_obj *o, const struct fi_info *info);

int ffs_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);

/* One data operation of an endpoint, as the libfabric calls give it. */
struct ffs_op {
	uint8_t op; /* FABRICFS_OP_* */
	const struct iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t addr; /* destination, or a receive's source */
	uint64_t tag, ignore, data, rma_addr, rma_key;
	/* RMA with several remote segments (fi_writemsg, fi_readmsg): the
	 * rma_count of them; 0 means the one of rma_addr and rma_key. */
	const struct fi_rma_iov *rma_iov;
	size_t rma_count;
	void *context;
	uint64_t flags; /* libfabric's op flags */
	bool inject;    /* fi_inject and kin: no completion, no context */
	/* Atomics (FABRICFS_OP_ATOMIC, FETCH_ATOMIC, COMPARE_ATOMIC): iov
	 * is the operand, one iovec (its base unused for FI_ATOMIC_READ);
	 * the compare values (COMPARE_ATOMIC) and the result buffer (FETCH
	 * and COMPARE) have as many bytes. */
	uint8_t datatype, atomic_op; /* enum fi_datatype, enum fi_op */
	const void *compare;
	void *compare_desc;
	void *result;
	void *result_desc;
};

/* ffs_ep_post posts an operation on an endpoint of this provider (ep.c):
 * its buffers go to the daemon in place when registered, else through
 * the endpoint's staging; an atomic's result comes back into the
 * application's buffer before its completion is reported. */
ssize_t ffs_ep_post(struct fid_ep *ep, const struct ffs_op *o);
/* ffs_ep_attrs gives what atomic.c needs of an endpoint: its domain, type
 * and transmit op flags (fi_control FI_SETOPSFLAG). */
struct ffs_domain *ffs_ep_attrs(struct fid_ep *ep, enum fi_ep_type *type, uint64_t *tx_op_flags);

/* Shared contexts. fi_srx_context makes an endpoint of ep.c of the tree
 * kind srx (ep.c); fi_stx_context a tree stx, which endpoints bind (srx.c). */
int ffs_srx_open(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context);
struct ffs_stx {
	struct fid_stx stx_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
};
int ffs_stx_open(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx, void *context);

/* Scalable endpoints (sep.c): fi_scalable_ep makes a tree endpoint with
 * attr/scalable true; fi_tx_context and fi_rx_context make endpoints of
 * ep.c that are its contexts (ffs_ctx_open). */
int ffs_sep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep, void *context);
int ffs_ctx_open(struct ffs_domain *dom, const struct fi_info *info, unsigned sep_id, bool rx, int index,
		 uint64_t caps, uint64_t op_flags, size_t size, struct fid_ep **ep, void *context);
int ffs_pep_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep, void *context);
int ffs_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq, void *context);
int ffs_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context);

/* ---- av.c ---- */

struct ffs_av {
	struct fid_av av_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
	enum fi_av_type type;
	uint32_t addr_format; /* of the domain's entries: FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_ADDR_STR (shm) */
	pthread_mutex_t lock;
	uint64_t next; /* the fi_addr the tree gives the next address inserted (av.c), under lock */
	/* A named AV (fi_av_attr.name): the tree's av/NAME, shared with the
	 * other processes that open the name; created says this process made
	 * it (and removes it at close), readonly that it was opened FI_READ;
	 * map is the fi_addr_t array map_addr points to. */
	bool named, created, readonly;
	fi_addr_t *map;
	size_t map_len;
};

int ffs_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context);

/* ---- mr.c ---- */

/*
 * A registered region. The application's pages [addr rounded down to a
 * page, addr+len rounded up) are replaced by a shared mapping of the tree
 * region's data (its previous contents copied in), so the application's
 * own buffer is the daemon's memory: peers' RMA lands in it and sends from
 * it need no copy. The tree region's attr/base is addr's offset in its
 * first page, so remote addresses are offsets from addr (mr_mode without
 * FI_MR_VIRT_ADDR). Registrations that share pages share the tree's
 * memory for them: a region whose pages another holds is made of windows
 * onto the regions holding them (mr.c).
 */
struct ffs_mr {
	struct fid_mr mr_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
	uint64_t tree_desc;  /* the tree's attr/desc: work requests name the region by it */
	const uint8_t *addr; /* the application's buffer */
	size_t len;
	uint8_t *map;       /* the mapping: the buffer's pages; NULL for a local-only region (mr.c) */
	size_t map_len;
	size_t base;        /* addr - map */
	struct ffs_mr *next; /* in the domain's list */
	struct ffs_mr *next_mapped; /* in mr.c's list of the process's mapped regions */
};

extern struct fi_ops_mr ffs_mr_ops;

/* The fi_ops entries an object does not have: -FI_ENOSYS (domain.c). */
int ffs_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int ffs_no_control(struct fid *fid, int command, void *arg);
int ffs_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
int ffs_no_tostr(const struct fid *fid, char *buf, size_t len);
int ffs_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context);

/* ---- ops.c: fi_open_ops of domains and endpoints (fi_ext_fabricfs.h) ---- */

/* ffs_ops_open opens a set of the object's ops/ directory: the struct
 * fi_fabricfs_ops, or -FI_ENOSYS for a name the object has no set of. */
int ffs_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
/* ffs_ep_dir is the tree directory of fid if it is an endpoint of this
 * provider (ep.c), else NULL. */
const char *ffs_ep_dir(struct fid *fid);

/*
 * ffs_mr_lookup finds a registered region holding [buf, buf+len), the
 * application's desc (fi_mr_desc, may be NULL) first: it gives the tree
 * desc and the offset of buf in the tree region, for a zero-copy work
 * request. It returns 0, or -FI_ENOENT when the bytes are in no region (the
 * caller then copies through its own buffers).
 */
int ffs_mr_lookup(struct ffs_domain *dom, void *desc, const void *buf, size_t len, uint64_t *tree_desc, uint64_t *tree_off);

/* ---- cntr.c ---- */

struct ffs_cntr {
	struct fid_cntr cntr_fid;
	struct ffs_domain *dom;
	struct ffs_obj obj;
	int value_fd, errors_fd; /* cntr/N/value and errors, kept open */
	/* The object's ctl file, for fi_cntr_wait alone: a write blocked in
	 * the daemon holds back other writes to the same file (the kernel
	 * serializes them), so add and set go through obj's clone file. */
	struct ffs_obj waiter;
	struct ffs_wait wait;
	/* The counts fi_trywait last saw, and fi_poll (or fi_cntr_add and
	 * fi_cntr_set) last saw: a change from them is an event. Under
	 * wait.c's lock. */
	uint64_t tried_value, tried_errors, polled_value, polled_errors;
};

/* ffs_cntr_counts reads the counter's value and errors. */
void ffs_cntr_counts(struct ffs_cntr *c, uint64_t *value, uint64_t *errors);
/* ffs_cntr_polled notes the counts as fi_poll's last (fi_cntr_add and
 * fi_cntr_set: fi_poll(3) reports changes since them). wait.c. */
void ffs_cntr_polled(struct ffs_cntr *c);

int ffs_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context);

/* ---- atomic.c ---- */

/* The endpoints' atomic operations (fi_atomic(3)). */
extern struct fi_ops_atomic ffs_atomic_ops;

/* ffs_query_atomic is the domain's fi_query_atomic: the tree's answer for
 * endpoints of the domain's type (its info's ep_attr->type). */
int ffs_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
		     struct fi_atomic_attr *attr, uint64_t flags);

/* ffs_atomics_free frees what ffs_query_atomic read for a domain. */
void ffs_atomics_free(struct ffs_domain *dom);

#endif /* FFS_H */
