/*
 * av.c: address vectors (fi_av_open and the fi_av_* calls) over the
 * tree's av objects. Addresses are the domain's sockaddrs (FI_SOCKADDR_IN
 * or FI_SOCKADDR_IN6); the tree takes them as text (`insert ADDR...`) and
 * lists them with their fi_addr in `addrs`.
 *
 * The tree gives each inserted address the next fi_addr, counting from 0
 * in insertion order and never reusing a removed one (FI_AV_TABLE order;
 * an FI_AV_MAP AV gets the same numbers, which are opaque to the
 * application). The AV is this process's own object (made through its
 * clone file), so the provider knows the next fi_addr without reading
 * `addrs` back: it is the number of addresses inserted so far.
 */
#include "ffs.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The most addresses one insert takes: the tree's bound on an AV
 * (core.MaxAVEntries). */
#define FFS_AV_MAX (1 << 16)

/* The longest address text: "[" IPv6 "]:" port. */
#define ADDR_TEXT (INET6_ADDRSTRLEN + 16)

/* addr_size is the size of one address of the AV's format. */
static size_t addr_size(const struct ffs_av *av)
{
	return av->addr_format == FI_SOCKADDR_IN6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* addr_text writes sa as the tree's ADDR ("1.2.3.4:5", "[::1]:5"); it
 * returns false if sa is not of the AV's format. */
static bool addr_text(const struct ffs_av *av, const void *sa, char *out, size_t size)
{
	char ip[INET6_ADDRSTRLEN];
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
 * (FI_ADDR_NOTAVAIL for failures) and, with errs, each one's status. It
 * returns the number inserted. Under av->lock. */
static int insert_texts(struct ffs_av *av, char (*texts)[ADDR_TEXT], const bool *valid, size_t n,
			fi_addr_t *fi_addr, int *errs)
{
	int inserted = 0;
	/* One command per batch that fits ffs_ctl's line; a batch the tree
	 * refuses fails as a whole (the tree inserts all or nothing). */
	size_t i = 0;
	while (i < n) {
		char cmd[3072] = "insert";
		size_t len = strlen(cmd), first = i, count = 0;
		for (; i < n && len + 1 + ADDR_TEXT < sizeof cmd; i++) {
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

static int av_insert(struct fid_av *fid, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct ffs_av *av = container_of(fid, struct ffs_av, av_fid);
	if (flags & ~(FI_MORE | FI_SYNC_ERR))
		return -FI_EBADFLAGS;
	if ((count && !addr) || count > FFS_AV_MAX)
		return -FI_EINVAL;
	int *errs = flags & FI_SYNC_ERR ? context : NULL;
	char (*texts)[ADDR_TEXT] = calloc(count ? count : 1, sizeof *texts);
	bool *valid = calloc(count ? count : 1, sizeof *valid);
	if (!texts || !valid) {
		free(texts);
		free(valid);
		return -FI_ENOMEM;
	}
	for (size_t i = 0; i < count; i++)
		valid[i] = addr_text(av, (const char *)addr + i * addr_size(av), texts[i], sizeof texts[i]);
	pthread_mutex_lock(&av->lock);
	int ret = insert_texts(av, texts, valid, count, fi_addr, errs);
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
	if (!node || !service)
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
	if (!node || !service || nodecnt == 0 || svccnt == 0 || nodecnt > FFS_AV_MAX / svccnt)
		return -FI_EINVAL;
	char *end;
	unsigned long port = strtoul(service, &end, 10);
	if (*end || end == service || port + svccnt - 1 > 65535)
		return -FI_EINVAL;
	struct sockaddr_storage ss = {0};
	int ret = resolve(av, node, service, AI_NUMERICHOST, &ss);
	if (ret)
		return ret;
	size_t size = addr_size(av), n = nodecnt * svccnt;
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
	int ret = 0;
	pthread_mutex_lock(&av->lock);
	for (size_t i = 0; i < count; i++) {
		int r = ffs_ctl(&av->obj, "remove %llu", (unsigned long long)fi_addr[i]);
		if (!ret)
			ret = r;
	}
	pthread_mutex_unlock(&av->lock);
	return ret;
}

/* parse_entry turns the tree's address text (fi_sockaddr_in://1.2.3.4:5,
 * fi_sockaddr_in6://[::1]:5) into a sockaddr; it returns its size, or 0. */
static size_t parse_entry(const char *text, struct sockaddr_storage *ss)
{
	const char *p;
	char ip[INET6_ADDRSTRLEN];
	unsigned port;
	memset(ss, 0, sizeof *ss);
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
 * fi_sockaddr_in://1.2.3.4:5 or fi_sockaddr_in6://[::1]:5. */
static const char *av_straddr(struct fid_av *fid, const void *addr, char *buf, size_t *len)
{
	const struct sockaddr *sa = addr;
	char ip[INET6_ADDRSTRLEN] = "";
	int n;
	if (sa && sa->sa_family == AF_INET) {
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
	pthread_mutex_destroy(&av->lock);
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

int ffs_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	if (!domain || !attr || !out)
		return -FI_EINVAL;
	struct ffs_domain *dom = container_of(domain, struct ffs_domain, domain_fid);
	/* Asynchronous inserts (FI_EVENT) and shared, named AVs (name,
	 * FI_READ) are not offered. */
	if (attr->flags & (FI_EVENT | FI_READ) || attr->name)
		return -FI_ENOSYS;
	enum fi_av_type type = attr->type;
	if (type == FI_AV_UNSPEC)
		type = dom->info->domain_attr->av_type;
	if (type == FI_AV_UNSPEC)
		type = FI_AV_TABLE;
	if (type != FI_AV_MAP && type != FI_AV_TABLE)
		return -FI_EINVAL;
	uint32_t format = dom->info->addr_format;
	if (format != FI_SOCKADDR_IN && format != FI_SOCKADDR_IN6)
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
	int ret = ffs_obj_clone(&av->obj, dom->dir, "av");
	if (!ret) {
		ret = ffs_set(&av->obj, "attr/type", "%s", type == FI_AV_MAP ? "FI_AV_MAP" : "FI_AV_TABLE");
		/* fi_rx_addr's bits: the tree masks them off and sends to the
		 * receive context they name. */
		if (!ret && attr->rx_ctx_bits)
			ret = ffs_set(&av->obj, "attr/rx_ctx_bits", "%d", attr->rx_ctx_bits);
		if (ret)
			ffs_obj_close(&av->obj);
	}
	if (ret) {
		free(av);
		return ret;
	}
	pthread_mutex_init(&av->lock, NULL);
	attr->type = type;
	*out = &av->av_fid;
	return 0;
}
