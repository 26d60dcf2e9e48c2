/*
 * av_test.c: address vectors over a mounted tree (FI_FABRICFS_ROOT):
 * inserts and the fi_addrs they give (checked against the tree's
 * `addrs`), per-address errors with FI_SYNC_ERR, lookup, straddr,
 * remove, insertsvc, insertsym, user ids (FI_AV_USER_ID), and the
 * attributes refused.
 */
#include "ffstest.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static struct sockaddr_in sin4(const char *ip, unsigned port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* has_line says whether the AV's addrs file has the line want. */
static bool has_line(struct ffs_av *av, const char *want)
{
	static char text[1 << 16];
	if (obj_read(av->obj.dir, "addrs", text, sizeof text) < 0)
		return false;
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		if (strcmp(l, want) == 0)
			return true;
	return false;
}

int main(void)
{
	struct ffs_domain *dom = test_domain("tcp", "lo");
	struct fi_av_attr attr = {.type = FI_AV_UNSPEC};
	struct fid_av *fav;
	int ret = ffs_av_open(&dom->domain_fid, &attr, &fav, NULL);
	if (ret) {
		fprintf(stderr, "fi_av_open: %s\n", fi_strerror(-ret));
		return 1;
	}
	struct ffs_av *av = container_of(fav, struct ffs_av, av_fid);
	char v[64];
	CHECK(attr.type == FI_AV_TABLE && obj_read(av->obj.dir, "attr/type", v, sizeof v) > 0 &&
		      strcmp(v, "FI_AV_TABLE") == 0,
	      "FI_AV_UNSPEC gave type %d, tree %s; want FI_AV_TABLE", attr.type, v);

	struct sockaddr_in a[3] = {sin4("127.0.0.1", 7000), sin4("10.0.0.1", 80), sin4("127.0.0.1", 7001)};
	fi_addr_t fa[3];
	ret = fi_av_insert(fav, a, 3, fa, 0, NULL);
	CHECK(ret == 3 && fa[0] == 0 && fa[1] == 1 && fa[2] == 2, "insert 3: %d, fi_addrs %llu %llu %llu", ret,
	      (unsigned long long)fa[0], (unsigned long long)fa[1], (unsigned long long)fa[2]);
	CHECK(has_line(av, "0 fi_sockaddr_in://127.0.0.1:7000") && has_line(av, "1 fi_sockaddr_in://10.0.0.1:80") &&
		      has_line(av, "2 fi_sockaddr_in://127.0.0.1:7001"),
	      "the tree's addrs do not list the three with their fi_addrs");

	/* A bad address among good ones: FI_SYNC_ERR reports each. */
	struct sockaddr_in b[3] = {sin4("192.168.1.1", 1), sin4("192.168.1.2", 2), sin4("192.168.1.3", 3)};
	b[1].sin_family = AF_INET6;
	int errs[3] = {-1, -1, -1};
	ret = fi_av_insert(fav, b, 3, fa, FI_SYNC_ERR, errs);
	CHECK(ret == 2 && fa[0] == 3 && fa[1] == FI_ADDR_NOTAVAIL && fa[2] == 4, "insert with a bad one: %d, %llu %llu %llu",
	      ret, (unsigned long long)fa[0], (unsigned long long)fa[1], (unsigned long long)fa[2]);
	CHECK(errs[0] == 0 && errs[1] == FI_EINVAL && errs[2] == 0, "FI_SYNC_ERR statuses %d %d %d", errs[0], errs[1],
	      errs[2]);
	CHECK(has_line(av, "4 fi_sockaddr_in://192.168.1.3:3"), "the tree's fi_addr 4 is not the third address");
	CHECK(fi_av_insert(fav, b, 1, fa, FI_EVENT, NULL) == -FI_EBADFLAGS, "insert with an unknown flag");

	/* lookup */
	struct sockaddr_in got;
	size_t len = sizeof got;
	ret = fi_av_lookup(fav, 1, &got, &len);
	CHECK(ret == 0 && len == sizeof got && got.sin_family == AF_INET && got.sin_addr.s_addr == a[1].sin_addr.s_addr &&
		      got.sin_port == a[1].sin_port,
	      "lookup 1: %d, len %zu", ret, len);
	char small[4];
	len = sizeof small;
	ret = fi_av_lookup(fav, 0, small, &len);
	CHECK(ret == 0 && len == sizeof(struct sockaddr_in), "lookup into 4 bytes: %d, len %zu (want the full size)",
	      ret, len);
	len = sizeof got;
	CHECK(fi_av_lookup(fav, 99, &got, &len) == -FI_ENOENT, "lookup of an fi_addr never given");

	/* straddr */
	char s[64];
	len = sizeof s;
	fi_av_straddr(fav, &a[0], s, &len);
	CHECK(strcmp(s, "fi_sockaddr_in://127.0.0.1:7000") == 0 && len == strlen(s) + 1, "straddr %s, len %zu", s, len);
	len = 10;
	fi_av_straddr(fav, &a[0], s, &len);
	CHECK(strlen(s) == 9 && len == strlen("fi_sockaddr_in://127.0.0.1:7000") + 1,
	      "straddr into 10 bytes: %s, len %zu", s, len);
	struct sockaddr_in6 six = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
	inet_pton(AF_INET6, "fe80::1", &six.sin6_addr);
	len = sizeof s;
	fi_av_straddr(fav, &six, s, &len);
	CHECK(strcmp(s, "fi_sockaddr_in6://[fe80::1]:9") == 0, "straddr of IPv6: %s", s);

	/* remove */
	fi_addr_t one = 1;
	CHECK(fi_av_remove(fav, &one, 1, 0) == 0, "remove 1");
	len = sizeof got;
	CHECK(fi_av_lookup(fav, 1, &got, &len) == -FI_ENOENT, "lookup of a removed fi_addr");
	CHECK(fi_av_remove(fav, &one, 1, 0) == -FI_ENOENT, "removing it again");
	CHECK(!has_line(av, "1 fi_sockaddr_in://10.0.0.1:80"), "the tree still lists fi_addr 1");

	/* insertsvc, insertsym: the next fi_addrs, after the removed one. */
	fi_addr_t f;
	ret = fi_av_insertsvc(fav, "127.0.0.1", "9000", &f, 0, NULL);
	CHECK(ret == 1 && f == 5 && has_line(av, "5 fi_sockaddr_in://127.0.0.1:9000"), "insertsvc: %d, fi_addr %llu", ret,
	      (unsigned long long)f);
	CHECK(fi_av_insertsvc(fav, "no such host.invalid", "1", &f, 0, NULL) == -FI_EINVAL, "insertsvc of a bad name");
	fi_addr_t sym[4];
	ret = fi_av_insertsym(fav, "10.1.1.1", 2, "5000", 2, sym, 0, NULL);
	CHECK(ret == 4 && sym[0] == 6 && sym[3] == 9, "insertsym: %d", ret);
	CHECK(fi_av_insertsym(fav, "localhost", 1, "5000", 1, sym, 0, NULL) == -FI_EINVAL, "insertsym of a host name");
	CHECK(has_line(av, "6 fi_sockaddr_in://10.1.1.1:5000") && has_line(av, "7 fi_sockaddr_in://10.1.1.1:5001") &&
		      has_line(av, "8 fi_sockaddr_in://10.1.1.2:5000") && has_line(av, "9 fi_sockaddr_in://10.1.1.2:5001"),
	      "insertsym's addresses are not fi_av(3)'s order");

	/* Many addresses: more than one command's worth. */
	enum { MANY = 300 };
	struct sockaddr_in *m = calloc(MANY, sizeof *m);
	fi_addr_t *mf = calloc(MANY, sizeof *mf);
	for (int i = 0; i < MANY; i++)
		m[i] = sin4("172.16.0.1", 1000 + i);
	ret = fi_av_insert(fav, m, MANY, mf, 0, NULL);
	CHECK(ret == MANY && mf[0] == 10 && mf[MANY - 1] == 10 + MANY - 1, "insert %d: %d", MANY, ret);
	snprintf(s, sizeof s, "%d fi_sockaddr_in://172.16.0.1:%d", 10 + MANY - 1, 1000 + MANY - 1);
	CHECK(has_line(av, s), "the tree has no line %s", s);
	free(m);
	free(mf);

	/* FI_AV_USER_ID: "User-specified fi_addr_t values are provided as
	 * part of address insertion (e.g. fi_av_insert) through the fi_addr
	 * parameter. The fi_addr parameter acts as input/output in this
	 * case." (fi_av(3)): each id goes to the tree with its address, the
	 * array gets the fi_addrs; a bad address fails alone; no array is
	 * -FI_EINVAL. */
	struct sockaddr_in u[3] = {sin4("127.0.0.2", 1), sin4("127.0.0.2", 2), sin4("127.0.0.2", 3)};
	u[1].sin_family = AF_INET6;
	fi_addr_t uf[3] = {0xabc0000000000123ULL, 7, 12379};
	ret = fi_av_insert(fav, u, 3, uf, FI_AV_USER_ID, NULL);
	CHECK(ret == 2 && uf[0] == 10 + MANY && uf[1] == FI_ADDR_NOTAVAIL && uf[2] == 11 + MANY,
	      "insert with FI_AV_USER_ID: %d, %llu %llu %llu", ret, (unsigned long long)uf[0], (unsigned long long)uf[1],
	      (unsigned long long)uf[2]);
	char line[128];
	snprintf(line, sizeof line, "%d fi_sockaddr_in://127.0.0.2:1 user_id=12375891776014123299", 10 + MANY);
	CHECK(has_line(av, line), "the tree has no line %s", line);
	snprintf(line, sizeof line, "%d fi_sockaddr_in://127.0.0.2:3 user_id=12379", 11 + MANY);
	CHECK(has_line(av, line), "the tree has no line %s", line);
	len = sizeof got;
	ret = fi_av_lookup(fav, 11 + MANY, &got, &len);
	CHECK(ret == 0 && len == sizeof got && ntohs(got.sin_port) == 3, "lookup of an entry with a user id: %d", ret);
	CHECK(fi_av_insert(fav, u, 1, NULL, FI_AV_USER_ID, NULL) == -FI_EINVAL, "FI_AV_USER_ID without ids");
	CHECK(fi_close(&fav->fid) == 0, "close");

	/* Attributes. */
	attr = (struct fi_av_attr){.type = FI_AV_MAP};
	ret = ffs_av_open(&dom->domain_fid, &attr, &fav, NULL);
	CHECK(ret == 0, "FI_AV_MAP: %d", ret);
	if (ret == 0) {
		av = container_of(fav, struct ffs_av, av_fid);
		CHECK(obj_read(av->obj.dir, "attr/type", v, sizeof v) > 0 && strcmp(v, "FI_AV_MAP") == 0, "tree type %s", v);
		fi_close(&fav->fid);
	}
	attr = (struct fi_av_attr){.type = FI_AV_TABLE, .flags = FI_EVENT};
	CHECK(ffs_av_open(&dom->domain_fid, &attr, &fav, NULL) == -FI_ENOSYS, "FI_EVENT");

	/* Named AVs (FI_SHARED_AV). "An AV opened for read-only access must be
	 * named (name attribute specified), and the AV must exist." */
	attr = (struct fi_av_attr){.type = FI_AV_TABLE, .flags = FI_READ};
	CHECK(ffs_av_open(&dom->domain_fid, &attr, &fav, NULL) == -FI_EINVAL, "FI_READ without a name");
	attr = (struct fi_av_attr){.type = FI_AV_TABLE, .name = "shared", .flags = FI_READ};
	CHECK(ffs_av_open(&dom->domain_fid, &attr, &fav, NULL) == -FI_ENOENT, "FI_READ of a name that does not exist");
	attr = (struct fi_av_attr){.type = FI_AV_TABLE, .name = "bad/name"};
	CHECK(ffs_av_open(&dom->domain_fid, &attr, &fav, NULL) == -FI_EINVAL, "a name the tree cannot take");
	/* "If the name field is non-NULL and the AV is not opened for
	 * read-only access, a named AV will be created, if it does not already
	 * exist." */
	attr = (struct fi_av_attr){.type = FI_AV_TABLE, .name = "shared"};
	CHECK(ffs_av_open(&dom->domain_fid, &attr, &fav, NULL) == 0, "a named AV");
	av = container_of(fav, struct ffs_av, av_fid);
	CHECK(strcmp(strrchr(av->obj.dir, '/'), "/shared") == 0, "the named AV is %s", av->obj.dir);
	struct sockaddr_in two[2] = {sin4("127.0.0.1", 7001), sin4("127.0.0.1", 7002)};
	fi_addr_t tf[2];
	CHECK(fi_av_insert(fav, two, 2, tf, 0, NULL) == 2 && tf[0] == 0 && tf[1] == 1, "insert into the named AV");
	/* Another opening, read-only: the same entries; "If name is non-NULL
	 * and map_addr is 0, then the map_addr used by the provider will be
	 * returned through the attribute structure." */
	struct fi_av_attr rattr = {.type = FI_AV_TABLE, .name = "shared", .flags = FI_READ};
	struct fid_av *rav;
	CHECK(ffs_av_open(&dom->domain_fid, &rattr, &rav, NULL) == 0, "FI_READ of the named AV");
	CHECK(rattr.map_addr && ((fi_addr_t *)rattr.map_addr)[0] == 0 && ((fi_addr_t *)rattr.map_addr)[1] == 1,
	      "map_addr: the fi_addrs of the entries");
	CHECK(fi_av_insert(rav, two, 1, tf, 0, NULL) == -FI_EACCES, "insert into a read-only AV");
	struct sockaddr_in looked;
	size_t glen = sizeof looked;
	CHECK(fi_av_lookup(rav, 1, &looked, &glen) == 0 && ntohs(looked.sin_port) == 7002, "lookup in the read-only AV");
	char named[PATH_MAX];
	snprintf(named, sizeof named, "%s", av->obj.dir);
	fi_close(&rav->fid);
	fi_close(&fav->fid);
	/* The process that made it removes it at close. */
	CHECK(access(named, F_OK) < 0 && errno == ENOENT, "the named AV outlived its maker");
	return done("av");
}
