/*
 * info_test: checks ffs_info_read (provider/info.c) against libfabric's own
 * printer. Every fi_info real libfabric returns on this machine
 * (fi_getinfo without hints: tcp, udp, shm, sockets, rxm, ...) is printed
 * with fi_tostr, parsed back, and printed again: the two texts must be
 * identical. Then malformed text (every truncation of an entry, unknown
 * names, numbers too big for their fields, garbage, random corruption)
 * must be refused without a crash, and the names rewrite and domain
 * directory of ffs.h's "Names" are checked.
 *
 * Built and run by tests/provider_info_test.go:
 *	cc -I clients/c provider/test/info_test.c provider/info.c
 *	   provider/tree.c -lfabric
 * It prints "info_test: N entries round-tripped, ..." and exits 0, or
 * prints the first difference and exits 1.
 */
#include "../ffs.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tree.c logs through the provider; this program is not one, so it
 * defines the structure itself (a provider without entry points). */
struct fi_provider ffs_prov = { .name = FFS_PROV_NAME };

#define FAIL(...)                                     \
	do {                                          \
		fprintf(stderr, "info_test: " __VA_ARGS__); \
		fputc('\n', stderr);                  \
		exit(1);                              \
	} while (0)

/* entry_text prints one fi_info (not its successors) as "---\n" + fi_tostr. */
static char *entry_text(struct fi_info *info)
{
	struct fi_info *next = info->next;
	info->next = NULL;
	const char *s = fi_tostr(info, FI_TYPE_INFO);
	info->next = next;
	char *out = malloc(strlen(s) + 5);
	if (!out)
		FAIL("out of memory");
	sprintf(out, "---\n%s", s);
	return out;
}

/* same compares two texts line by line; on a difference it prints both
 * lines and fails. */
static void same(const char *what, const char *a, const char *b)
{
	int n = 1;
	while (*a || *b) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
		if (la != lb || memcmp(a, b, la))
			FAIL("%s: line %d differs:\n  libfabric: %.*s\n  parsed:    %.*s", what, n, (int)la, a, (int)lb, b);
		a += la + (a[la] == '\n');
		b += lb + (b[lb] == '\n');
		n++;
	}
}

static bool same_addr(const void *a, const void *b, size_t len)
{
	if (!a || !b)
		return a == b;
	const struct sockaddr *sa = a;
	if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = a, *y = b;
		return y->sin6_family == AF_INET6 && x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) &&
		       !memcmp(x + 1, y + 1, len - sizeof *x);
	}
	return !memcmp(a, b, len);
}

static int roundtrip(void)
{
	struct fi_info *all;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &all);
	if (ret)
		FAIL("fi_getinfo: %s", fi_strerror(-ret));
	int n = 0;
	for (struct fi_info *i = all; i; i = i->next, n++) {
		char *text = entry_text(i);
		struct fi_info *parsed;
		ret = ffs_info_read(text, &parsed);
		if (ret)
			FAIL("entry %d (%s): ffs_info_read: %s\n%s", n, i->fabric_attr->prov_name, fi_strerror(-ret), text);
		if (parsed->next)
			FAIL("entry %d: one entry parsed as several", n);
		char *again = entry_text(parsed);
		char what[256];
		snprintf(what, sizeof what, "entry %d (%s, %s)", n, i->fabric_attr->prov_name, i->domain_attr->name);
		same(what, text, again);
		/* The addresses are bytes libfabric's own providers made: they
		 * must come back as the same bytes, not just the same text
		 * (but for an IPv6 scope and flow label, which the text form
		 * does not carry). */
		if (!same_addr(i->src_addr, parsed->src_addr, i->src_addrlen))
			FAIL("%s: src_addr bytes differ", what);
		if (!same_addr(i->dest_addr, parsed->dest_addr, i->dest_addrlen))
			FAIL("%s: dest_addr bytes differ", what);
		free(again);
		free(text);
		fi_freeinfo(parsed);
	}
	/* All entries in one text, as the tree's /info prints them. */
	size_t cap = 1, len = 0;
	char *joined = calloc(1, cap);
	for (struct fi_info *i = all; i; i = i->next) {
		char *t = entry_text(i);
		size_t tl = strlen(t);
		joined = realloc(joined, cap = len + tl + 1);
		if (!joined)
			FAIL("out of memory");
		memcpy(joined + len, t, tl + 1);
		len += tl;
		free(t);
	}
	struct fi_info *list;
	if ((ret = ffs_info_read(joined, &list)))
		FAIL("all entries at once: %s", fi_strerror(-ret));
	int m = 0;
	for (struct fi_info *i = list; i; i = i->next)
		m++;
	if (m != n)
		FAIL("all entries at once: %d parsed, %d printed", m, n);
	fi_freeinfo(list);
	free(joined);
	fi_freeinfo(all);
	return n;
}

/* refused requires text to be rejected with -FI_EINVAL. */
static void refused(const char *why, const char *text)
{
	struct fi_info *list = (struct fi_info *)1;
	int ret = ffs_info_read(text, &list);
	if (ret != -FI_EINVAL || list != NULL)
		FAIL("%s: accepted (ret %d)", why, ret);
}

/* replaced returns text with the first occurrence of from replaced. */
static char *replaced(const char *text, const char *from, const char *to)
{
	const char *p = strstr(text, from);
	if (!p)
		FAIL("sample lacks %s", from);
	char *out = malloc(strlen(text) + strlen(to) + 1);
	sprintf(out, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
	return out;
}

static const char sample[] =
	"---\n"
	"fi_info:\n"
	"    caps: [ FI_MSG, FI_RMA, FI_TAGGED, FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE ]\n"
	"    mode: [ FI_CONTEXT ]\n"
	"    addr_format: FI_SOCKADDR_IN6\n"
	"    src_addrlen: 28\n"
	"    dest_addrlen: 28\n"
	"    src_addr: fi_sockaddr_in6://[fe80::fc:ff:fe00:1]:0\n"
	"    dest_addr: fi_sockaddr_in6://[::1]:9228\n"
	"    handle: (nil)\n"
	"    fi_tx_attr:\n"
	"        caps: [ FI_MSG, FI_RMA, FI_READ, FI_WRITE, FI_SEND ]\n"
	"        mode: [  ]\n"
	"        op_flags: [ FI_COMPLETION, FI_DELIVERY_COMPLETE ]\n"
	"        msg_order: [ FI_ORDER_RAR, FI_ORDER_SAS ]\n"
	"        comp_order: [ FI_ORDER_STRICT, FI_ORDER_DATA ]\n"
	"        inject_size: 128\n"
	"        size: 256\n"
	"        iov_limit: 1\n"
	"        rma_iov_limit: 1\n"
	"        tclass: 0x0\n"
	"    fi_rx_attr:\n"
	"        caps: [ FI_MSG, FI_RMA, FI_RECV, FI_REMOTE_READ, FI_REMOTE_WRITE ]\n"
	"        mode: [  ]\n"
	"        op_flags: [  ]\n"
	"        msg_order: [  ]\n"
	"        comp_order: [ FI_ORDER_NONE ]\n"
	"        total_buffered_recv: 0\n"
	"        size: 256\n"
	"        iov_limit: 1\n"
	"    fi_ep_attr:\n"
	"        type: FI_EP_RDM\n"
	"        protocol: FI_PROTO_RXM\n"
	"        protocol_version: 1\n"
	"        max_msg_size: 18446744073709551615\n"
	"        msg_prefix_size: 0\n"
	"        max_order_raw_size: 18446744073709551615\n"
	"        max_order_war_size: 0\n"
	"        max_order_waw_size: 18446744073709551615\n"
	"        mem_tag_format: 0xaaaaaaaaaaaaaaaa\n"
	"        tx_ctx_cnt: 1\n"
	"        rx_ctx_cnt: FI_SHARED_CONTEXT\n"
	"        auth_key_size: 0\n"
	"    fi_domain_attr:\n"
	"        domain: 0x0\n"
	"        name: lo\n"
	"        threading: FI_THREAD_SAFE\n"
	"        control_progress: FI_PROGRESS_AUTO\n"
	"        data_progress: FI_PROGRESS_MANUAL\n"
	"        resource_mgmt: FI_RM_ENABLED\n"
	"        av_type: FI_AV_UNSPEC\n"
	"        mr_mode: [ FI_MR_LOCAL, FI_MR_PROV_KEY ]\n"
	"        mr_key_size: 8\n"
	"        cq_data_size: 8\n"
	"        cq_cnt: 256\n"
	"        ep_cnt: 8192\n"
	"        tx_ctx_cnt: 8192\n"
	"        rx_ctx_cnt: 8192\n"
	"        max_ep_tx_ctx: 1\n"
	"        max_ep_rx_ctx: 1\n"
	"        max_ep_stx_ctx: 0\n"
	"        max_ep_srx_ctx: 0\n"
	"        cntr_cnt: 0\n"
	"        mr_iov_limit: 1\n"
	"        caps: [ FI_LOCAL_COMM, FI_REMOTE_COMM ]\n"
	"        mode: [  ]\n"
	"        auth_key_size: 0\n"
	"        max_err_data: 0\n"
	"        mr_cnt: 0\n"
	"        tclass: 0x0\n"
	"    fi_fabric_attr:\n"
	"        name: 127.0.0.1/32\n"
	"        prov_name: tcp;ofi_rxm\n"
	"        prov_version: 1.0\n"
	"        api_version: 1.17\n"
	"    nic: (nil)\n";

static void malformed(void)
{
	struct fi_info *list;
	int ret = ffs_info_read(sample, &list);
	if (ret)
		FAIL("sample: %s", fi_strerror(-ret));
	char *again = entry_text(list);
	same("sample", sample, again);
	free(again);
	fi_freeinfo(list);

	/* Every truncation after a line, or before its newline, but the
	 * whole entry (with or without its last newline). */
	size_t len = strlen(sample);
	for (size_t i = 0; i + 2 < len; i++) {
		if (sample[i] != '\n' && sample[i + 1] != '\n')
			continue;
		char *cut = strndup(sample, i + 1);
		char why[64];
		snprintf(why, sizeof why, "truncated at byte %zu", i + 1);
		refused(why, cut);
		free(cut);
	}

	static const char *const bad[][2] = {
		{ "FI_TAGGED", "FI_TAGGET" },                               /* unknown flag */
		{ "FI_MSG, FI_RMA", "FI_MSG FI_RMA" },                      /* no comma */
		{ "[ FI_CONTEXT ]", "FI_CONTEXT" },                         /* no brackets */
		{ "FI_EP_RDM", "FI_EP_RDMA" },                              /* unknown enum */
		{ "FI_THREAD_SAFE", "" },                                   /* empty */
		{ "max_msg_size: 18446744073709551615", "max_msg_size: 18446744073709551616" },
		{ "inject_size: 128", "inject_size: 99999999999999999999999999" },
		{ "inject_size: 128", "inject_size: -1" },
		{ "inject_size: 128", "inject_size: 12x" },
		{ "tclass: 0x0", "tclass: 0x100000000" },                   /* > uint32 */
		{ "tclass: 0x0", "tclass: 0" },                             /* not hex */
		{ "protocol_version: 1", "protocol_version: 4294967296" },
		{ "prov_version: 1.0", "prov_version: 1" },
		{ "prov_version: 1.0", "prov_version: 70000.0" },
		{ "domain: 0x0", "domain: 0x1234" },                        /* a pointer */
		{ "handle: (nil)", "handle: 0x1234" },
		{ "nic: (nil)", "nic: 0x1234" },
		{ "src_addrlen: 28", "src_addrlen: 8" },                    /* too short */
		{ "src_addrlen: 28", "src_addrlen: 99999999" },             /* absurd */
		{ "[fe80::fc:ff:fe00:1]:0", "[fe80::fc:ff:fe00:1]:65536" },
		{ "[fe80::fc:ff:fe00:1]:0", "[fe80::fc:ff:fe00:1]" },
		{ "[fe80::fc:ff:fe00:1]:0", "[fe80::zz]:0" },
		{ "fi_sockaddr_in6://[fe80", "fi_sockaddr_in://[fe80" },    /* wrong family */
		{ "fi_sockaddr_in6://[::1]", "fi_sockaddr_xx://[::1]" },
		{ "fi_info:\n", "fi_inf:\n" },
		{ "    fi_tx_attr:\n", "    fi_tx_attr: (null)\n" },
		{ "    fi_rx_attr:\n", "    fi_tx_attr:\n" },               /* twice */
		{ "        size: 256\n        iov_limit: 1\n        rma", "        size: 256\n        size: 1\n        rma" },
		{ "        tclass: 0x0\n    fi_rx", "       tclass: 0x0\n    fi_rx" }, /* indent */
		{ "    handle: (nil)\n", "        handle: (nil)\n" },
		{ "    mode: [ FI_CONTEXT ]\n", "    mode: [ FI_CONTEXT ]\n    colour: blue\n" },
		{ "---\n", "--\n" },
		{ "---\n", "garbage\n---\n" },
		{ "name: lo", "name:lo" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *t = replaced(sample, bad[i][0], bad[i][1]);
		char why[160];
		snprintf(why, sizeof why, "%s -> %s", bad[i][0], bad[i][1]);
		refused(why, t);
		free(t);
	}
	refused("empty", "");
	refused("only ---", "---\n");
	refused("garbage", "\x01\x02 fi_info: [[[ ]]] \xff\n:::\n");

	/* Random corruption: any result but a crash (or a leak under ASan). */
	srand(19);
	for (int round = 0; round < 20000; round++) {
		char *t = strdup(sample);
		for (int k = 1 + rand() % 4; k > 0; k--) {
			size_t at = rand() % len;
			static const char pick[] = " :[],\n-0x9FI_abc/";
			t[at] = rand() % 3 ? pick[rand() % (sizeof pick - 1)] : (char)(rand() % 256);
			if (!t[at])
				t[at] = '?';
		}
		if (rand() % 5 == 0)
			t[rand() % len] = 0;
		if (ffs_info_read(t, &list) == 0)
			fi_freeinfo(list);
		free(t);
	}
}

/* names checks ffs_info_name and ffs_info_domain_dir. */
static void names(void)
{
	struct fi_info *list;
	if (ffs_info_parse(sample, &list))
		FAIL("ffs_info_parse of the sample failed");
	if (strcmp(list->domain_attr->name, "tcp/lo") || strcmp(list->fabric_attr->name, "tcp/127.0.0.1/32") ||
	    strcmp(list->fabric_attr->prov_name, "fabricfs") || list->fabric_attr->prov_version != FFS_PROV_VERSION)
		FAIL("names: got domain %s fabric %s prov %s", list->domain_attr->name, list->fabric_attr->name,
		     list->fabric_attr->prov_name);
	setenv("FI_FABRICFS_ROOT", "/mnt/x", 1);
	char dir[PATH_MAX];
	if (ffs_info_domain_dir(list, dir, sizeof dir) || strcmp(dir, "/mnt/x/tcp/lo"))
		FAIL("domain dir: %s", dir);
	static const char *const baddir[] = { "lo", "tcp/", "/lo", "tcp/lo/x", "tcp/..", "../lo", "./lo", "tcp/." };
	for (size_t i = 0; i < sizeof baddir / sizeof baddir[0]; i++) {
		free(list->domain_attr->name);
		list->domain_attr->name = strdup(baddir[i]);
		if (ffs_info_domain_dir(list, dir, sizeof dir) != -FI_EINVAL)
			FAIL("domain dir of %s accepted", baddir[i]);
	}
	if (ffs_info_domain_dir(list, dir, 4) != -FI_EINVAL)
		FAIL("domain dir: short buffer accepted");
	fi_freeinfo(list);

	static const char *const badname[][2] = {
		{ "name: lo", "name: l/o" },
		{ "name: lo", "name: .." },
		{ "prov_name: tcp;ofi_rxm", "prov_name: ;ofi_rxm" },
		{ "prov_name: tcp;ofi_rxm", "prov_name: (null)" },
		{ "name: 127.0.0.1/32", "name: (null)" },
	};
	for (size_t i = 0; i < sizeof badname / sizeof badname[0]; i++) {
		char *t = replaced(sample, badname[i][0], badname[i][1]);
		list = (struct fi_info *)1;
		if (ffs_info_parse(t, &list) != -FI_EINVAL || list)
			FAIL("names: %s accepted", badname[i][1]);
		free(t);
	}
}

int main(void)
{
	int n = roundtrip();
	malformed();
	names();
	printf("info_test: %d entries round-tripped, malformed input refused, names checked\n", n);
	return 0;
}
