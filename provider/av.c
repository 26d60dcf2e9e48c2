/*
 * av.c: address vectors (fi_av_open and the fi_av_* calls) over the
 * tree's av objects. Addresses are the domain's sockaddrs (FI_SOCKADDR_IN
 * or FI_SOCKADDR_IN6), or in the shm domain names (FI_ADDR_STR,
 * "fi_shm://NAME" or "fi_ns://NODE:SERVICE", each NUL-terminated and packed one after the other in
 * an insert's array, as libfabric's shm takes them); the tree takes them
 * as text (`insert ADDR...`) and lists them with their fi_addr in `addrs`.
 *
 * The tree gives each inserted address the next fi_addr, counting from 0
 * in insertion order and never reusing a removed one (FI_AV_TABLE order;
 * an FI_AV_MAP AV gets the same numbers, which are opaque to the
 * application). An unnamed AV is this process's own object (made through
 * its clone file), so the provider knows the next fi_addr without reading
 * `addrs` back: it is the number of addresses inserted so far.
 *
 * With FI_AV_USER_ID an insert's fi_addr array is input too: each
 * address's user id, which the tree keeps with the entry (`insert_id`);
 * the array then gets the fi_addrs as without it, and completions of an
 * endpoint with the capability give the user id as the sender.
 *
 * A named AV (fi_av_attr.name, FI_SHARED_AV) is the tree's av/NAME,
 * made with mkdir by the first process that opens the name without
 * FI_READ and removed when that process closes it; others open it by name
 * (FI_READ: read-only, and it must exist), bind it and send to its
 * fi_addrs, which the daemon resolves. map_addr returns the fi_addrs of
 * the entries it had at open, in order, as fi_addr_t values. Inserts into
 * a named AV read the next fi_addr from `addrs` first, since another
 * process may have inserted; two processes inserting at the same moment
 * may be told wrong fi_addrs, so one process should fill a shared AV.
 */
#include "ffs.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most addresses one insert takes: the tree's bound on an AV
 * (core.MaxAVEntries). */
#define FFS_AV_MAX (1 << 16)

/* The longest address text: a name of the shm domain (fi_shm://NAME,
 * fi_ns://NODE:SERVICE) of up to 109 characters, or "[" IPv6 "]:" port.
 * Longer names are refused (FI_EINVAL). */
#define ADDR_TEXT (INET6_ADDRSTRLEN + 64)

/* sock_size is the size of one sockaddr of an AV of a socket format. */
static size_t sock_size(const struct ffs_av *av)
{
	return av->addr_format == FI_SOCKADDR_IN6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* addr_size is the size of one address of the AV's format at a: an
 * FI_ADDR_STR string's length with its NUL, 0 if it has none within
 * ADDR_TEXT bytes (the array's later addresses cannot be found then). */
static size_t addr_size(const struct ffs_av *av, const void *a)
{
	if (av->addr_format == FI_ADDR_STR) {
		size_t n = strnlen(a, ADDR_TEXT);
		return n < ADDR_TEXT ? n + 1 : 0;
	}
	return sock_size(av);
}

/* addr_text writes sa as the tree's ADDR ("1.2.3.4:5", "[::1]:5",
 * a name of the shm domain, which the tree checks); it returns false if sa is not
 * of the AV's format. */
static bool addr_text(const struct ffs_av *av, const void *sa, char *out, size_t size)
{
	char ip[INET6_ADDRSTRLEN];
	if (av->addr_format == FI_ADDR_STR) {
		size_t n = ffs_name_len(sa, ADDR_TEXT);
		if (!n || n > size)
			return false;
		memcpy(out, sa, n);
		return true;
	}
	if (av->addr_format == FI_SOCKADDR_IN) {
		const struct sockaddr_in *s = sa;
		if (s->sin_family != AF_INET || !inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip))
			return false;
		snprintf(out, size, "%s:%u", ip, ntohs(s->sin_port));
		return true;
	}
	const struct sockaddr_in6 *s = sa;
	if (s->sin6_family != AF_INET6 || !inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip))
		return false;
	snprintf(out, size, "[%s]:%u", ip, ntohs(s->sin6_port));
	return true;
}

/* insert_texts inserts n addresses given as text, writing their fi_addrs
 * (FI_ADDR_NOTAVAIL for failures) and, with errs, each one's status. With
 * user_ids (FI_AV_USER_ID) fi_addr holds each address's user id on input,
 * which the tree records (`insert_id USERID ADDR`, one address a command)
 * and reports in place of the fi_addr as the sender of its messages. It
 * returns the number inserted. Under av->lock. */
static int insert_texts(struct ffs_av *av, char (*texts)[ADDR_TEXT], const bool *valid, size_t n,
			fi_addr_t *fi_addr, bool user_ids, int *errs)
{
	int inserted = 0;
	/* One command per batch that fits ffs_ctl's line; a batch the tree
	 * refuses fails as a whole (the tree inserts all or nothing). */
	size_t i = 0;
	while (i < n) {
		char cmd[3072] = "insert";
		size_t len = strlen(cmd), first = i, count = 0;
		if (user_ids) {
			/* The id is read before the fi_addr is written over it. */
			if (valid[i])
				snprintf(cmd, sizeof cmd, "insert_id %llu %s", (unsigned long long)fi_addr[i], texts[i]);
			count = valid[i];
			i++;
		}
		for (; !user_ids && i < n && len + 1 + ADDR_TEXT < sizeof cmd; i++) {
			if (!valid[i])
				continue;
			len += snprintf(cmd + len, sizeof cmd - len, " %s", texts[i]);
			count++;
		}
		int ret = count ? ffs_ctl(&av->obj, "%s", cmd) : 0;
		for (size_t j = first; j < i; j++) {
			int err = !valid[j] ? -FI_EINVAL : ret;
			if (fi_addr)
				fi_addr[j] = err ? FI_ADDR_NOTAVAIL : av->next++;
			else if (!err)
				av->next++;
			if (errs)
				errs[j] = -err;
			if (!err)
				inserted++;
		}
	}
	return inserted;
}

/* read_addrs reads the AV's `addrs` ("FIADDR ADDR" lines) and gives
 * each entry's fi_addr to each (a NULL each only counts); it returns how
 * many, or a negative error. */
static int read_addrs(struct ffs_av *av, void (*each)(struct ffs_av *, size_t, fi_addr_t))
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/addrs", av->obj.dir) >= (int)sizeof path)
		return -FI_EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ffs_fi_errno(errno);
	char *text;
	ssize_t n = ffs_read_all(fd, &text, (size_t)FFS_AV_MAX * (ADDR_TEXT + 24));
	close(fd);
	if (n < 0)
		return (int)n;
	size_t count = 0;
	for (char *line = text, *end; *line; line = end) {
		end = strchr(line, '\n');
		end = end ? end + 1 : line + strlen(line);
		char *stop;
		unsigned long long a = strtoull(line, &stop, 10);
		if (stop == line)
			continue;
		if (each)
			each(av, count, a);
		av->next = a + 1;
		count++;
	}
	free(text);
	return (int)count;
}

/* sync_next sets av->next from the tree, for a named AV another process
 * may have inserted into. Under av->lock. */
static int sync_next(struct ffs_av *av)
{
	int n = read_addrs(av, NULL);
	return n < 0 ? n : 0;
}

static int av_insert(struct fid_av *fid, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (flags & ~(FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID))
		return -FI_EBADFLAGS;
	/* FI_AV_USER_ID: "the caller must specify an fi_addr_t identifier
	 * value to associate with each address" (fi_av(3)), in fi_addr. */
	if ((count && !addr) || count > FFS_AV_MAX || (count && (flags & FI_AV_USER_ID) && !fi_addr))
		return -FI_EINVAL;
	int *errs = flags & FI_SYNC_ERR ? context : NULL;
	char (*texts)[ADDR_TEXT] = calloc(count ? count : 1, sizeof *texts);
	bool *valid = calloc(count ? count : 1, sizeof *valid);
	if (!texts || !valid) {
		free(texts);
		free(valid);
		return -FI_ENOMEM;
	}
	const char *a = addr;
	for (size_t i = 0; i < count; i++) {
		size_t size = addr_size(av, a);
		if (!size)
			break; /* the rest cannot be found: invalid */
		valid[i] = addr_text(av, a, texts[i], sizeof texts[i]);
		a += size;
	}
	pthread_mutex_lock(&av->lock);
	int ret = av->readonly ? -FI_EACCES : av->named ? sync_next(av) : 0;
	if (!ret)
		ret = insert_texts(av, texts, valid, count, fi_addr, flags & FI_AV_USER_ID, errs);
	pthread_mutex_unlock(&av->lock);
	free(texts);
	free(valid);
	return ret;
}

/* resolve fills ss with node and service in the AV's family; flags are
 * getaddrinfo's (AI_NUMERICHOST). */
static int resolve(const struct ffs_av *av, const char *node, const char *service, int flags,
		   struct sockaddr_storage *ss)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = flags}, *res;
	hints.ai_family = av->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
	if (getaddrinfo(node, service, &hints, &res) != 0)
		return -FI_EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen < sizeof *ss ? res->ai_addrlen : sizeof *ss);
	freeaddrinfo(res);
	return 0;
}

static int av_insertsvc(struct fid_av *fid, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (!node || !service || av->addr_format == FI_ADDR_STR)
		return -FI_EINVAL;
	struct sockaddr_storage ss = {0};
	int ret = resolve(av, node, service, 0, &ss);
	if (ret)
		return ret;
	return av_insert(fid, &ss, 1, fi_addr, flags, context);
}

/* av_insertsym inserts nodecnt numeric addresses from node, each with
 * svccnt ports from service (fi_av(3)): "10.1.1.1", 2, "5000", 2 gives
 * 10.1.1.1:5000, 10.1.1.1:5001, 10.1.1.2:5000, 10.1.1.2:5001. Host names
 * (with numeric suffixes, "host10") are not taken: -FI_EINVAL. */
static int av_insertsym(struct fid_av *fid, const char *node, size_t nodecnt, const char *service, size_t svccnt,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (!node || !service || nodecnt == 0 || svccnt == 0 || nodecnt > FFS_AV_MAX / svccnt ||
	    av->addr_format == FI_ADDR_STR)
		return -FI_EINVAL;
	char *end;
	unsigned long port = strtoul(service, &end, 10);
	if (*end || end == service || port + svccnt - 1 > 65535)
		return -FI_EINVAL;
	struct sockaddr_storage ss = {0};
	int ret = resolve(av, node, service, AI_NUMERICHOST, &ss);
	if (ret)
		return ret;
	size_t size = sock_size(av), n = nodecnt * svccnt;
	uint8_t *addrs = calloc(n, size);
	if (!addrs)
		return -FI_ENOMEM;
	for (size_t i = 0; i < nodecnt; i++) {
		for (size_t j = 0; j < svccnt; j++) {
			void *a = addrs + (i * svccnt + j) * size;
			memcpy(a, &ss, size);
			if (av->addr_format == FI_SOCKADDR_IN) {
				struct sockaddr_in *s = a;
				s->sin_addr.s_addr = htonl(ntohl(s->sin_addr.s_addr) + (uint32_t)i);
				s->sin_port = htons((uint16_t)(port + j));
			} else {
				struct sockaddr_in6 *s = a;
				/* Add i to the address's low 32 bits, big-endian. */
				uint32_t low;
				memcpy(&low, &s->sin6_addr.s6_addr[12], 4);
				low = htonl(ntohl(low) + (uint32_t)i);
				memcpy(&s->sin6_addr.s6_addr[12], &low, 4);
				s->sin6_port = htons((uint16_t)(port + j));
			}
		}
	}
	ret = av_insert(fid, addrs, n, fi_addr, flags, context);
	free(addrs);
	return ret;
}

static int av_remove(struct fid_av *fid, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (flags)
		return -FI_EBADFLAGS; /* "reserved for future use and must be 0" */
	if (count && !fi_addr)
		return -FI_EINVAL;
	int ret = av->readonly ? -FI_EACCES : 0;
	pthread_mutex_lock(&av->lock);
	for (size_t i = 0; i < count && !av->readonly; i++) {
		int r = ffs_ctl(&av->obj, "remove %llu", (unsigned long long)fi_addr[i]);
		if (!ret)
			ret = r;
	}
	pthread_mutex_unlock(&av->lock);
	return ret;
}

/* parse_entry turns the tree's address text (fi_sockaddr_in://1.2.3.4:5,
 * fi_sockaddr_in6://[::1]:5, a name of the shm domain) into a sockaddr or the
 * FI_ADDR_STR string with its NUL; it returns its size, or 0. */
static size_t parse_entry(const char *text, struct sockaddr_storage *ss)
{
	const char *p;
	char ip[INET6_ADDRSTRLEN];
	unsigned port;
	memset(ss, 0, sizeof *ss);
	size_t n = ffs_name_len(text, sizeof *ss);
	if (n) {
		memcpy(ss, text, n);
		return n;
	}
	if ((p = strstr(text, "fi_sockaddr_in6://[")) == text) {
		p += strlen("fi_sockaddr_in6://[");
		const char *close = strchr(p, ']');
		if (!close || (size_t)(close - p) >= sizeof ip || sscanf(close, "]:%u", &port) != 1 || port > 65535)
			return 0;
		memcpy(ip, p, close - p);
		ip[close - p] = 0;
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		if (inet_pton(AF_INET6, ip, &s->sin6_addr) != 1)
			return 0;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		return sizeof *s;
	}
	if ((p = strstr(text, "fi_sockaddr_in://")) == text) {
		p += strlen("fi_sockaddr_in://");
		const char *colon = strrchr(p, ':');
		if (!colon || (size_t)(colon - p) >= sizeof ip || sscanf(colon, ":%u", &port) != 1 || port > 65535)
			return 0;
		memcpy(ip, p, colon - p);
		ip[colon - p] = 0;
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		if (inet_pton(AF_INET, ip, &s->sin_addr) != 1)
			return 0;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		return sizeof *s;
	}
	return 0;
}

/* av_lookup finds fi_addr in the tree's `addrs` ("FIADDR ADDRESS" lines). */
static int av_lookup(struct fid_av *fid, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (!addrlen || (*addrlen && !addr))
		return -FI_EINVAL;
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/addrs", av->obj.dir) >= (int)sizeof path)
		return -FI_EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ffs_fi_errno(errno);
	char *text;
	ssize_t n = ffs_read_all(fd, &text, 8 << 20);
	close(fd);
	if (n < 0)
		return (int)n;
	int ret = -FI_ENOENT;
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *rest;
		unsigned long long id = strtoull(line, &rest, 10);
		if (rest == line || *rest != ' ' || id != fi_addr)
			continue;
		/* The address, without the " user_id=ID" of an entry inserted
		 * with FI_AV_USER_ID. */
		rest[1 + strcspn(rest + 1, " ")] = 0;
		struct sockaddr_storage ss;
		size_t size = parse_entry(rest + 1, &ss);
		if (!size) {
			ret = -FI_EIO;
			break;
		}
		memcpy(addr, &ss, size < *addrlen ? size : *addrlen);
		*addrlen = size;
		ret = 0;
		break;
	}
	free(text);
	return ret;
}

/* av_straddr prints addr as libfabric's FI_ADDR_STR form:
 * fi_sockaddr_in://1.2.3.4:5 or fi_sockaddr_in6://[::1]:5; an FI_ADDR_STR
 * address is its own. */
static const char *av_straddr(struct fid_av *fid, const void *addr, char *buf, size_t *len)
{
	const struct sockaddr *sa = addr;
	char ip[INET6_ADDRSTRLEN] = "";
	int n;
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (addr && av->addr_format == FI_ADDR_STR) {
		n = snprintf(buf, *len, "%.*s", ADDR_TEXT, (const char *)addr);
	} else if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = addr;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
		n = snprintf(buf, *len, "fi_sockaddr_in://%s:%u", ip, ntohs(s->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = addr;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
		n = snprintf(buf, *len, "fi_sockaddr_in6://[%s]:%u", ip, ntohs(s->sin6_port));
	} else {
		n = snprintf(buf, *len, "%s", "");
	}
	*len = n < 0 ? 0 : (size_t)n + 1;
	return buf;
}

static int av_set(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **set, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set,
};

static int av_close(struct fid *fid)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid.fid);
	/* The daemon keeps the AV while an endpoint is bound to it. */
	ffs_obj_close(&av->obj);
	/* The process that made a named AV removes it: made with mkdir, it
	 * would outlive every process otherwise. EBUSY: an endpoint (of
	 * another process) is still bound; it goes with the daemon then. */
	if (av->created && rmdir(av->obj.dir) < 0)
		ffs_debug("rmdir %s: %s", av->obj.dir, strerror(errno));
	pthread_mutex_destroy(&av->lock);
	ffs_domain_hold(av->dom, -1);
	free(av->map);
	free(av);
	return 0;
}

/* No bind: only an AV opened with FI_EVENT takes an EQ, and none is. */
static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = ffs_no_bind,
	.control = ffs_no_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

/* set_map records entry i's fi_addr in the map map_addr returns. The map
 * has room for the entries counted just before; one inserted since is left
 * out. */
static void set_map(struct ffs_av *av, size_t i, fi_addr_t a)
{
	if (av->map && i < av->map_len)
		av->map[i] = a;
}

/* open_named opens the domain's AV called name (av/NAME), making it with
 * mkdir unless readonly: "If the name field is non-NULL and the AV is not
 * opened for read-only access, a named AV will be created, if it does not
 * already exist"; read-only, "the AV must exist" (-FI_ENOENT). */
static int open_named(struct ffs_av *av, struct ffs_domain *dom, const char *name, bool readonly)
{
	size_t len = strlen(name);
	if (len == 0 || len > 64 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len ||
	    strspn(name, "0123456789") == len || name[0] == '.' || !strcmp(name, "clone"))
		return -FI_EINVAL; /* not a name the tree takes for an object */
	if (snprintf(av->obj.dir, sizeof av->obj.dir, "%s/av/%s", dom->dir, name) >= (int)sizeof av->obj.dir)
		return -FI_EINVAL;
	if (!readonly) {
		if (mkdir(av->obj.dir, 0700) == 0)
			av->created = true;
		else if (errno != EEXIST)
			return -ffs_fi_errno(errno);
	}
	char ctl[PATH_MAX + 8];
	snprintf(ctl, sizeof ctl, "%s/ctl", av->obj.dir);
	av->obj.ctl = open(ctl, O_RDWR | O_CLOEXEC);
	if (av->obj.ctl < 0) {
		int err = errno;
		if (av->created)
			rmdir(av->obj.dir);
		return -ffs_fi_errno(err);
	}
	av->named = true;
	av->readonly = readonly;
	return 0;
}

/* close_named undoes open_named. */
static void close_named(struct ffs_av *av)
{
	ffs_obj_close(&av->obj);
	if (av->created)
		rmdir(av->obj.dir);
}

int ffs_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	if (!domain || !attr || !out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	/* Asynchronous inserts (FI_EVENT) are not offered. "An AV opened
	 * for read-only access must be named". */
	if (attr->flags & FI_EVENT)
		return -FI_ENOSYS;
	if (attr->flags & ~(FI_READ | FI_SYMMETRIC) || (attr->flags & FI_READ && !attr->name))
		return -FI_EINVAL;
	enum fi_av_type type = attr->type;
	if (type == FI_AV_UNSPEC)
		type = dom->info->domain_attr->av_type;
	if (type == FI_AV_UNSPEC)
		type = FI_AV_TABLE;
	if (type != FI_AV_MAP && type != FI_AV_TABLE)
		return -FI_EINVAL;
	uint32_t format = dom->info->addr_format;
	if (format != FI_SOCKADDR_IN && format != FI_SOCKADDR_IN6 && format != FI_ADDR_STR)
		return -FI_ENOSYS;

	struct ffs_av *av = calloc(1, sizeof *av);
	if (!av)
		return -FI_ENOMEM;
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &av_fi_ops;
	av->av_fid.ops = &av_ops;
	av->dom = dom;
	av->type = type;
	av->addr_format = format;
	int ret = attr->name ? open_named(av, dom, attr->name, attr->flags & FI_READ) : ffs_obj_clone(&av->obj, dom->dir, "av");
	if (!ret && !av->named) {
		ret = ffs_set(&av->obj, "attr/type", "%s", type == FI_AV_MAP ? "FI_AV_MAP" : "FI_AV_TABLE");
		/* fi_rx_addr's bits: the tree masks them off and sends to the
		 * receive context they name. */
		if (!ret && attr->rx_ctx_bits)
			ret = ffs_set(&av->obj, "attr/rx_ctx_bits", "%d", attr->rx_ctx_bits);
		if (ret)
			ffs_obj_close(&av->obj);
	}
	if (!ret && av->named) {
		/* "If name is non-NULL and map_addr is 0, then the map_addr used
		 * by the provider will be returned through the attribute
		 * structure": the fi_addrs of the entries, in order. */
		int n = read_addrs(av, NULL);
		if (n >= 0 && !(av->map = calloc(n ? n : 1, sizeof *av->map)))
			n = -FI_ENOMEM;
		av->map_len = n > 0 ? (size_t)n : 0;
		if (n >= 0)
			n = read_addrs(av, set_map);
		if (n < 0) {
			ret = n;
			close_named(av);
		} else if (!attr->map_addr) {
			attr->map_addr = av->map;
		}
	}
	if (ret) {
		free(av->map);
		free(av);
		return ret;
	}
	pthread_mutex_init(&av->lock, NULL);
	attr->type = type;
	ffs_domain_hold(dom, 1);
	*out = &av->av_fid;
	return 0;
}
