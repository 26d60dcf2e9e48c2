/*
 * info.c: fi_info text to struct fi_info.
 *
 * The tree answers fi_getinfo queries (and prints its /info files) in the
 * form fi_tostr(FI_TYPE_INFO) gives, each entry after a "---" line, as
 * `fi_info -v` prints them. ffs_info_read turns that text back into
 * fi_info structs, every field of fi_info and of its attribute structs;
 * ffs_info_name then renames an entry as this provider reports it
 * (ffs.h, "Names"). The parser is strict: every field must be present
 * once, every flag and enumeration name must be libfabric's, numbers must
 * fit their fields; anything else is -FI_EINVAL, so an answer the
 * provider does not understand is never half used.
 */
#include "ffs.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a well-formed answer can hold. */
#define MAX_ENTRIES 4096
#define MAX_ADDRLEN 4096
#define MAX_STRING 1024

struct name {
	const char *s;
	uint64_t v;
};

#define N(x) { #x, (uint64_t)(x) }

/* Flag sets, by the names fi_tostr prints for each. */
static const struct name caps_names[] = {
	N(FI_MSG), N(FI_RMA), N(FI_TAGGED), N(FI_ATOMIC), N(FI_MULTICAST),
	N(FI_COLLECTIVE), N(FI_READ), N(FI_WRITE), N(FI_RECV), N(FI_SEND),
	N(FI_REMOTE_READ), N(FI_REMOTE_WRITE), N(FI_MULTI_RECV),
	N(FI_REMOTE_CQ_DATA), N(FI_TRIGGER), N(FI_FENCE), N(FI_VARIABLE_MSG),
	N(FI_RMA_PMEM), N(FI_SOURCE_ERR), N(FI_LOCAL_COMM), N(FI_REMOTE_COMM),
	N(FI_SHARED_AV), N(FI_RMA_EVENT), N(FI_SOURCE), N(FI_NAMED_RX_CTX),
	N(FI_DIRECTED_RECV), N(FI_HMEM), { NULL, 0 },
};

static const struct name mode_names[] = {
	N(FI_CONTEXT), N(FI_MSG_PREFIX), N(FI_ASYNC_IOV), N(FI_RX_CQ_DATA),
	N(FI_LOCAL_MR), N(FI_NOTIFY_FLAGS_ONLY), N(FI_RESTRICTED_COMP),
	N(FI_CONTEXT2), N(FI_BUFFERED_RECV), { NULL, 0 },
};

static const struct name op_flags_names[] = {
	N(FI_MULTICAST), N(FI_MULTI_RECV), N(FI_REMOTE_CQ_DATA), N(FI_MORE),
	N(FI_PEEK), N(FI_TRIGGER), N(FI_FENCE), N(FI_COMPLETION), N(FI_INJECT),
	N(FI_INJECT_COMPLETE), N(FI_TRANSMIT_COMPLETE), N(FI_DELIVERY_COMPLETE),
	N(FI_MATCH_COMPLETE), N(FI_AFFINITY), N(FI_CLAIM), N(FI_DISCARD),
	{ NULL, 0 },
};

static const struct name msg_order_names[] = {
	N(FI_ORDER_RAR), N(FI_ORDER_RAW), N(FI_ORDER_RAS), N(FI_ORDER_WAR),
	N(FI_ORDER_WAW), N(FI_ORDER_WAS), N(FI_ORDER_SAR), N(FI_ORDER_SAW),
	N(FI_ORDER_SAS), N(FI_ORDER_RMA_RAR), N(FI_ORDER_RMA_RAW),
	N(FI_ORDER_RMA_WAR), N(FI_ORDER_RMA_WAW), N(FI_ORDER_ATOMIC_RAR),
	N(FI_ORDER_ATOMIC_RAW), N(FI_ORDER_ATOMIC_WAR), N(FI_ORDER_ATOMIC_WAW),
	{ NULL, 0 },
};

/* comp_order prints FI_ORDER_NONE or FI_ORDER_STRICT (all of its bits),
 * then FI_ORDER_DATA. */
static const struct name comp_order_names[] = {
	N(FI_ORDER_NONE), N(FI_ORDER_STRICT), N(FI_ORDER_DATA), { NULL, 0 },
};

static const struct name mr_mode_names[] = {
	N(FI_MR_BASIC), N(FI_MR_SCALABLE), N(FI_MR_LOCAL), N(FI_MR_RAW),
	N(FI_MR_VIRT_ADDR), N(FI_MR_ALLOCATED), N(FI_MR_PROV_KEY),
	N(FI_MR_MMU_NOTIFY), N(FI_MR_RMA_EVENT), N(FI_MR_ENDPOINT),
	N(FI_MR_HMEM), N(FI_MR_COLLECTIVE), { NULL, 0 },
};

/* Enumerations. */
static const struct name addr_format_names[] = {
	N(FI_FORMAT_UNSPEC), N(FI_SOCKADDR), N(FI_SOCKADDR_IN),
	N(FI_SOCKADDR_IN6), N(FI_SOCKADDR_IB), N(FI_ADDR_PSMX), N(FI_ADDR_PSMX2),
	N(FI_ADDR_GNI), N(FI_ADDR_BGQ), N(FI_ADDR_MLX), N(FI_ADDR_STR),
	N(FI_ADDR_IB_UD), N(FI_ADDR_EFA), N(FI_ADDR_PSMX3), N(FI_ADDR_OPX),
	N(FI_ADDR_CXI), { NULL, 0 },
};

static const struct name ep_type_names[] = {
	N(FI_EP_UNSPEC), N(FI_EP_MSG), N(FI_EP_DGRAM), N(FI_EP_RDM),
	N(FI_EP_SOCK_STREAM), N(FI_EP_SOCK_DGRAM), { NULL, 0 },
};

static const struct name protocol_names[] = {
	N(FI_PROTO_UNSPEC), N(FI_PROTO_RDMA_CM_IB_RC), N(FI_PROTO_IWARP),
	N(FI_PROTO_IB_UD), N(FI_PROTO_PSMX), N(FI_PROTO_PSMX2), N(FI_PROTO_UDP),
	N(FI_PROTO_SOCK_TCP), N(FI_PROTO_IB_RDM), N(FI_PROTO_IWARP_RDM),
	N(FI_PROTO_GNI), N(FI_PROTO_RXM), N(FI_PROTO_RXD), N(FI_PROTO_MLX),
	N(FI_PROTO_NETWORKDIRECT), N(FI_PROTO_SHM), N(FI_PROTO_RSTREAM),
	N(FI_PROTO_RDMA_CM_IB_XRC), N(FI_PROTO_EFA), N(FI_PROTO_PSMX3),
	N(FI_PROTO_RXM_TCP), N(FI_PROTO_OPX), N(FI_PROTO_CXI), N(FI_PROTO_XNET),
	{ NULL, 0 },
};

static const struct name threading_names[] = {
	N(FI_THREAD_UNSPEC), N(FI_THREAD_SAFE), N(FI_THREAD_FID),
	N(FI_THREAD_DOMAIN), N(FI_THREAD_COMPLETION), N(FI_THREAD_ENDPOINT),
	{ NULL, 0 },
};

static const struct name progress_names[] = {
	N(FI_PROGRESS_UNSPEC), N(FI_PROGRESS_AUTO), N(FI_PROGRESS_MANUAL),
	{ NULL, 0 },
};

static const struct name rm_names[] = {
	N(FI_RM_UNSPEC), N(FI_RM_DISABLED), N(FI_RM_ENABLED), { NULL, 0 },
};

static const struct name av_type_names[] = {
	N(FI_AV_UNSPEC), N(FI_AV_MAP), N(FI_AV_TABLE), { NULL, 0 },
};

/* How a field's value is written. */
enum kind {
	K_SECTION, /* "fi_tx_attr:": the following lines are that struct's */
	K_DEC,     /* decimal number */
	K_HEX,     /* 0x hex number */
	K_ZERO,    /* a pointer fi_tostr prints as 0x%x: only 0 is accepted */
	K_NIL,     /* a fid pointer: only "(nil)" is accepted */
	K_CTX,     /* decimal or FI_SHARED_CONTEXT */
	K_FLAGS,   /* "[ A, B ]" from the table */
	K_ENUM,    /* one name from the table */
	K_STR,     /* a string, "(null)" for NULL */
	K_VERSION, /* MAJOR.MINOR */
	K_ADDR,    /* an address in fi_tostr's form; converted at the end */
};

enum section { S_INFO, S_TX, S_RX, S_EP, S_DOMAIN, S_FABRIC, S_COUNT };

struct field {
	const char *key;
	enum kind kind;
	size_t off, size; /* in the section's struct */
	const struct name *names;
	enum section section; /* K_SECTION: which */
};

#define F(type, member, kind, names) \
	{ #member, kind, offsetof(type, member), sizeof(((type *)0)->member), names, 0 }
#define SEC(key, s) { key, K_SECTION, 0, 0, NULL, s }
#define ADDR(member) { #member, K_ADDR, 0, 0, NULL, 0 }

/* Each struct's fields, in the order fi_tostr prints them. */
static const struct field info_fields[] = {
	F(struct fi_info, caps, K_FLAGS, caps_names),
	F(struct fi_info, mode, K_FLAGS, mode_names),
	F(struct fi_info, addr_format, K_ENUM, addr_format_names),
	F(struct fi_info, src_addrlen, K_DEC, NULL),
	F(struct fi_info, dest_addrlen, K_DEC, NULL),
	ADDR(src_addr),
	ADDR(dest_addr),
	F(struct fi_info, handle, K_NIL, NULL),
	SEC("fi_tx_attr", S_TX),
	SEC("fi_rx_attr", S_RX),
	SEC("fi_ep_attr", S_EP),
	SEC("fi_domain_attr", S_DOMAIN),
	SEC("fi_fabric_attr", S_FABRIC),
	F(struct fi_info, nic, K_NIL, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field tx_fields[] = {
	F(struct fi_tx_attr, caps, K_FLAGS, caps_names),
	F(struct fi_tx_attr, mode, K_FLAGS, mode_names),
	F(struct fi_tx_attr, op_flags, K_FLAGS, op_flags_names),
	F(struct fi_tx_attr, msg_order, K_FLAGS, msg_order_names),
	F(struct fi_tx_attr, comp_order, K_FLAGS, comp_order_names),
	F(struct fi_tx_attr, inject_size, K_DEC, NULL),
	F(struct fi_tx_attr, size, K_DEC, NULL),
	F(struct fi_tx_attr, iov_limit, K_DEC, NULL),
	F(struct fi_tx_attr, rma_iov_limit, K_DEC, NULL),
	F(struct fi_tx_attr, tclass, K_HEX, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field rx_fields[] = {
	F(struct fi_rx_attr, caps, K_FLAGS, caps_names),
	F(struct fi_rx_attr, mode, K_FLAGS, mode_names),
	F(struct fi_rx_attr, op_flags, K_FLAGS, op_flags_names),
	F(struct fi_rx_attr, msg_order, K_FLAGS, msg_order_names),
	F(struct fi_rx_attr, comp_order, K_FLAGS, comp_order_names),
	F(struct fi_rx_attr, total_buffered_recv, K_DEC, NULL),
	F(struct fi_rx_attr, size, K_DEC, NULL),
	F(struct fi_rx_attr, iov_limit, K_DEC, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field ep_fields[] = {
	F(struct fi_ep_attr, type, K_ENUM, ep_type_names),
	F(struct fi_ep_attr, protocol, K_ENUM, protocol_names),
	F(struct fi_ep_attr, protocol_version, K_DEC, NULL),
	F(struct fi_ep_attr, max_msg_size, K_DEC, NULL),
	F(struct fi_ep_attr, msg_prefix_size, K_DEC, NULL),
	F(struct fi_ep_attr, max_order_raw_size, K_DEC, NULL),
	F(struct fi_ep_attr, max_order_war_size, K_DEC, NULL),
	F(struct fi_ep_attr, max_order_waw_size, K_DEC, NULL),
	F(struct fi_ep_attr, mem_tag_format, K_HEX, NULL),
	F(struct fi_ep_attr, tx_ctx_cnt, K_CTX, NULL),
	F(struct fi_ep_attr, rx_ctx_cnt, K_CTX, NULL),
	F(struct fi_ep_attr, auth_key_size, K_DEC, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field domain_fields[] = {
	F(struct fi_domain_attr, domain, K_ZERO, NULL),
	F(struct fi_domain_attr, name, K_STR, NULL),
	F(struct fi_domain_attr, threading, K_ENUM, threading_names),
	F(struct fi_domain_attr, control_progress, K_ENUM, progress_names),
	F(struct fi_domain_attr, data_progress, K_ENUM, progress_names),
	F(struct fi_domain_attr, resource_mgmt, K_ENUM, rm_names),
	F(struct fi_domain_attr, av_type, K_ENUM, av_type_names),
	F(struct fi_domain_attr, mr_mode, K_FLAGS, mr_mode_names),
	F(struct fi_domain_attr, mr_key_size, K_DEC, NULL),
	F(struct fi_domain_attr, cq_data_size, K_DEC, NULL),
	F(struct fi_domain_attr, cq_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, ep_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, tx_ctx_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, rx_ctx_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, max_ep_tx_ctx, K_DEC, NULL),
	F(struct fi_domain_attr, max_ep_rx_ctx, K_DEC, NULL),
	F(struct fi_domain_attr, max_ep_stx_ctx, K_DEC, NULL),
	F(struct fi_domain_attr, max_ep_srx_ctx, K_DEC, NULL),
	F(struct fi_domain_attr, cntr_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, mr_iov_limit, K_DEC, NULL),
	F(struct fi_domain_attr, caps, K_FLAGS, caps_names),
	F(struct fi_domain_attr, mode, K_FLAGS, mode_names),
	F(struct fi_domain_attr, auth_key_size, K_DEC, NULL),
	F(struct fi_domain_attr, max_err_data, K_DEC, NULL),
	F(struct fi_domain_attr, mr_cnt, K_DEC, NULL),
	F(struct fi_domain_attr, tclass, K_HEX, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field fabric_fields[] = {
	F(struct fi_fabric_attr, name, K_STR, NULL),
	F(struct fi_fabric_attr, prov_name, K_STR, NULL),
	F(struct fi_fabric_attr, prov_version, K_VERSION, NULL),
	F(struct fi_fabric_attr, api_version, K_VERSION, NULL),
	{ NULL, 0, 0, 0, NULL, 0 },
};

static const struct field *const section_fields[S_COUNT] = {
	info_fields, tx_fields, rx_fields, ep_fields, domain_fields, fabric_fields,
};

/* The parse of one entry. */
struct entry {
	struct fi_info *info;
	enum section section;      /* whose fields the indented lines are */
	uint32_t seen[S_COUNT];    /* fields given, a bit per table index */
	char *addr[2];             /* src_addr, dest_addr as printed */
};

static void *section_base(struct fi_info *info, enum section s)
{
	switch (s) {
	case S_INFO:
		return info;
	case S_TX:
		return info->tx_attr;
	case S_RX:
		return info->rx_attr;
	case S_EP:
		return info->ep_attr;
	case S_DOMAIN:
		return info->domain_attr;
	case S_FABRIC:
		return info->fabric_attr;
	default:
		return NULL;
	}
}

/* store writes v into a field of size bytes (every numeric field of
 * fi_info is 4 or 8), if it fits. */
static int store(void *p, size_t size, uint64_t v)
{
	switch (size) {
	case 4:
		if (v > UINT32_MAX)
			return -FI_EINVAL;
		*(uint32_t *)p = (uint32_t)v;
		return 0;
	case 8:
		*(uint64_t *)p = v;
		return 0;
	default:
		return -FI_EINVAL;
	}
}

/* number parses a whole unsigned number in base (10 or 16, the latter
 * with its 0x). */
static int number(const char *s, int base, uint64_t *v)
{
	if (base == 16) {
		if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
			return -FI_EINVAL;
		s += 2;
	}
	if (!isxdigit((unsigned char)*s) || (base == 10 && !isdigit((unsigned char)*s)))
		return -FI_EINVAL;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, base);
	if (errno || *end)
		return -FI_EINVAL;
	*v = x;
	return 0;
}

static int lookup(const struct name *t, const char *s, size_t len, uint64_t *v)
{
	for (; t->s; t++) {
		if (strlen(t->s) == len && !memcmp(t->s, s, len)) {
			*v = t->v;
			return 0;
		}
	}
	return -FI_EINVAL;
}

/* flags parses "[ A, B ]" (fi_tostr's flag list; "[  ]" is none). */
static int flags(const struct name *t, const char *s, uint64_t *v)
{
	size_t n = strlen(s);
	if (n < 2 || s[0] != '[' || s[n - 1] != ']')
		return -FI_EINVAL;
	*v = 0;
	const char *p = s + 1, *end = s + n - 1;
	for (;;) {
		while (p < end && *p == ' ')
			p++;
		if (p == end)
			return 0;
		const char *w = p;
		while (p < end && *p != ',' && *p != ' ')
			p++;
		uint64_t bit;
		if (lookup(t, w, p - w, &bit))
			return -FI_EINVAL;
		*v |= bit;
		while (p < end && *p == ' ')
			p++;
		if (p < end) {
			if (*p != ',')
				return -FI_EINVAL;
			p++;
		}
	}
}

/* version parses MAJOR.MINOR. */
static int version(const char *s, uint64_t *v)
{
	unsigned maj, min;
	int n = -1;
	if (sscanf(s, "%5u.%5u%n", &maj, &min, &n) != 2 || n < 0 || s[n] || maj > 0xffff || min > 0xffff)
		return -FI_EINVAL;
	*v = FI_VERSION(maj, min);
	return 0;
}

static int set_field(struct entry *e, const struct field *f, const char *val)
{
	void *p = (char *)section_base(e->info, e->section) + f->off;
	uint64_t v = 0;
	int ret;
	switch (f->kind) {
	case K_DEC:
		ret = number(val, 10, &v);
		break;
	case K_HEX:
		ret = number(val, 16, &v);
		break;
	case K_ZERO:
		ret = strcmp(val, "0x0") ? -FI_EINVAL : 0;
		break;
	case K_NIL:
		ret = strcmp(val, "(nil)") ? -FI_EINVAL : 0;
		break;
	case K_CTX:
		if (!strcmp(val, "FI_SHARED_CONTEXT")) {
			v = FI_SHARED_CONTEXT;
			ret = 0;
		} else {
			ret = number(val, 10, &v);
		}
		break;
	case K_FLAGS:
		ret = flags(f->names, val, &v);
		break;
	case K_ENUM:
		ret = lookup(f->names, val, strlen(val), &v);
		break;
	case K_VERSION:
		ret = version(val, &v);
		break;
	case K_STR:
		if (!strcmp(val, "(null)"))
			return 0;
		if (strlen(val) > MAX_STRING)
			return -FI_EINVAL;
		if (!(*(char **)p = strdup(val)))
			return -FI_ENOMEM;
		return 0;
	case K_ADDR: {
		int i = !strcmp(f->key, "dest_addr");
		if (strlen(val) > MAX_STRING)
			return -FI_EINVAL;
		if (!(e->addr[i] = strdup(val)))
			return -FI_ENOMEM;
		return 0;
	}
	default:
		return -FI_EINVAL;
	}
	if (ret || f->kind == K_ZERO || f->kind == K_NIL)
		return ret;
	return store(p, f->size, v);
}

/* port parses ":PORT" to the end of s. */
static int port(const char *s, uint16_t *v)
{
	uint64_t x;
	if (*s != ':' || number(s + 1, 10, &x) || x > UINT16_MAX)
		return -FI_EINVAL;
	*v = htons((uint16_t)x);
	return 0;
}

/* sockaddr_of parses fi_sockaddr_in://IP:PORT or fi_sockaddr_in6://[IP]:PORT
 * into buf (len bytes, zeroed, at least the sockaddr's size). */
static int sockaddr_of(const char *s, void *buf, size_t len)
{
	static const char in[] = "fi_sockaddr_in://", in6[] = "fi_sockaddr_in6://";
	char ip[INET6_ADDRSTRLEN];
	if (!strncmp(s, in, sizeof in - 1)) {
		struct sockaddr_in *sin = buf;
		s += sizeof in - 1;
		const char *colon = strchr(s, ':');
		if (len < sizeof *sin || !colon || (size_t)(colon - s) >= sizeof ip)
			return -FI_EINVAL;
		memcpy(ip, s, colon - s);
		ip[colon - s] = 0;
		sin->sin_family = AF_INET;
		if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
			return -FI_EINVAL;
		return port(colon, &sin->sin_port);
	}
	if (!strncmp(s, in6, sizeof in6 - 1)) {
		struct sockaddr_in6 *sin6 = buf;
		s += sizeof in6 - 1;
		const char *close = strchr(s, ']');
		if (len < sizeof *sin6 || *s != '[' || !close || (size_t)(close - s - 1) >= sizeof ip)
			return -FI_EINVAL;
		memcpy(ip, s + 1, close - s - 1);
		ip[close - s - 1] = 0;
		sin6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) != 1)
			return -FI_EINVAL;
		return port(close + 1, &sin6->sin6_port);
	}
	return -FI_EINVAL;
}

int ffs_addr_parse(uint32_t format, const char *s, size_t len, void **out)
{
	*out = NULL;
	if (!strcmp(s, "(null)"))
		return 0;
	if (len == 0 || len > MAX_ADDRLEN)
		return -FI_EINVAL;
	void *buf = calloc(1, len);
	if (!buf)
		return -FI_ENOMEM;
	int ret;
	switch (format) {
	case FI_SOCKADDR:
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR_IN6:
		ret = sockaddr_of(s, buf, len);
		if (!ret && ((format == FI_SOCKADDR_IN && ((struct sockaddr *)buf)->sa_family != AF_INET) ||
			     (format == FI_SOCKADDR_IN6 && ((struct sockaddr *)buf)->sa_family != AF_INET6)))
			ret = -FI_EINVAL;
		break;
	case FI_ADDR_STR:
		/* The string with its NUL, as the printed length counts it. */
		ret = strlen(s) < len ? 0 : -FI_EINVAL;
		if (!ret)
			memcpy(buf, s, strlen(s));
		break;
	default:
		/* Addresses of other formats are the providers' own bytes;
		 * the tree has none of them. */
		ret = -FI_EINVAL;
	}
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	return 0;
}

/* finish checks that the entry had all its fields and converts its
 * addresses. */
static int finish(struct entry *e)
{
	for (int s = 0; s < S_COUNT; s++) {
		int n = 0;
		while (section_fields[s][n].key)
			n++;
		if (e->seen[s] != (1u << n) - 1) /* n < 32: the largest struct has 26 */
			return -FI_EINVAL;
	}
	struct fi_info *info = e->info;
	int ret = ffs_addr_parse(info->addr_format, e->addr[0], info->src_addrlen, &info->src_addr);
	if (!ret)
		ret = ffs_addr_parse(info->addr_format, e->addr[1], info->dest_addrlen, &info->dest_addr);
	return ret;
}

static void entry_reset(struct entry *e)
{
	free(e->addr[0]);
	free(e->addr[1]);
	memset(e, 0, sizeof *e);
}

/* line parses one line of an entry: "    key: value" (indent 4, fi_info's
 * fields and the attribute struct headers) or "        key: value"
 * (indent 8, the current attribute struct's fields). */
static int line(struct entry *e, char *l)
{
	size_t indent = strspn(l, " ");
	char *key = l + indent;
	char *colon = strchr(key, ':');
	if (!colon || (indent != 4 && indent != 8))
		return -FI_EINVAL;
	*colon = 0;
	char *val = colon + 1;
	if (*val == ' ')
		val++;
	else if (*val)
		return -FI_EINVAL;
	if (indent == 4)
		e->section = S_INFO; /* a field of fi_info ends an attribute struct */
	else if (e->section == S_INFO)
		return -FI_EINVAL;
	const struct field *t = section_fields[e->section];
	uint32_t *seen = &e->seen[e->section];
	for (int i = 0; t[i].key; i++) {
		if (strcmp(t[i].key, key))
			continue;
		if (*seen & (1u << i))
			return -FI_EINVAL;
		*seen |= 1u << i;
		if (t[i].kind != K_SECTION)
			return set_field(e, &t[i], val);
		if (*val) /* "fi_tx_attr: (null)" */
			return -FI_EINVAL;
		e->section = t[i].section;
		return 0;
	}
	return -FI_EINVAL;
}

int ffs_info_read(const char *text, struct fi_info **list)
{
	*list = NULL;
	struct fi_info **tail = list;
	struct entry e = { 0 };
	int entries = 0, ret = 0;
	bool in_entry = false, header = false;
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *l = strndup(p, n);
		if (!l) {
			ret = -FI_ENOMEM;
			break;
		}
		p += n + (nl != NULL);
		if (!strcmp(l, "---")) {
			if (in_entry && (ret = finish(&e)))
				goto bad;
			if (++entries > MAX_ENTRIES) {
				ret = -FI_EINVAL;
				goto bad;
			}
			entry_reset(&e);
			if (!(e.info = fi_allocinfo())) {
				ret = -FI_ENOMEM;
				goto bad;
			}
			*tail = e.info;
			tail = &e.info->next;
			in_entry = true;
			header = true;
		} else if (!in_entry) {
			ret = -FI_EINVAL;
		} else if (header) {
			ret = strcmp(l, "fi_info:") ? -FI_EINVAL : 0;
			header = false;
		} else if (*l) {
			ret = line(&e, l);
		}
	bad:
		free(l);
		if (ret)
			break;
	}
	if (!ret && in_entry && !header)
		ret = finish(&e);
	else if (!ret)
		ret = -FI_EINVAL; /* no entry, or one cut after its "---" */
	entry_reset(&e);
	if (ret) {
		fi_freeinfo(*list);
		*list = NULL;
	}
	return ret;
}

/* prefixed replaces *s with "prov/" *s. */
static int prefixed(char **s, const char *prov, size_t provlen)
{
	size_t n = strlen(*s);
	char *p = malloc(provlen + 1 + n + 1);
	if (!p)
		return -FI_ENOMEM;
	memcpy(p, prov, provlen);
	p[provlen] = '/';
	memcpy(p + provlen + 1, *s, n + 1);
	free(*s);
	*s = p;
	return 0;
}

int ffs_info_name(struct fi_info *list)
{
	for (struct fi_info *i = list; i; i = i->next) {
		struct fi_fabric_attr *fab = i->fabric_attr;
		struct fi_domain_attr *dom = i->domain_attr;
		/* The tree's provider is the core of a layered name:
		 * "tcp;ofi_rxm" is the tree's tcp directory. */
		if (!fab->prov_name || !fab->name || !dom->name || !*dom->name || strchr(dom->name, '/'))
			return -FI_EINVAL;
		size_t n = strcspn(fab->prov_name, ";");
		if (n == 0 || memchr(fab->prov_name, '/', n) || !strcmp(dom->name, ".") || !strcmp(dom->name, ".."))
			return -FI_EINVAL;
		int ret = prefixed(&dom->name, fab->prov_name, n);
		if (!ret)
			ret = prefixed(&fab->name, fab->prov_name, n);
		if (ret)
			return ret;
		char *name = strdup(FFS_PROV_NAME);
		if (!name)
			return -FI_ENOMEM;
		free(fab->prov_name);
		fab->prov_name = name;
		fab->prov_version = FFS_PROV_VERSION;
	}
	return 0;
}

int ffs_info_parse(const char *text, struct fi_info **list)
{
	int ret = ffs_info_read(text, list);
	if (!ret && (ret = ffs_info_name(*list))) {
		fi_freeinfo(*list);
		*list = NULL;
	}
	return ret;
}

int ffs_info_domain_dir(const struct fi_info *info, char *dir, size_t size)
{
	const char *name = info && info->domain_attr ? info->domain_attr->name : NULL;
	if (!name)
		return -FI_EINVAL;
	const char *slash = strchr(name, '/');
	/* PROV/DOM: one slash, neither part empty nor a dot name. */
	if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/') ||
	    !strcmp(slash + 1, ".") || !strcmp(slash + 1, "..") ||
	    (slash - name == 1 && name[0] == '.') || (slash - name == 2 && !strncmp(name, "..", 2)))
		return -FI_EINVAL;
	if (snprintf(dir, size, "%s/%s", ffs_root(), name) >= (int)size)
		return -FI_EINVAL;
	return 0;
}
