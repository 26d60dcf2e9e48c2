/*
 * pep.c: passive endpoints. A passive endpoint is a tree pep (pep/N, a
 * clone object) in the domain its info names. Connection requests come as
 * FI_CONNREQ events of its EQ (eq.c) whose info's handle names the
 * endpoint the tree made for the request; fi_endpoint adopts that
 * endpoint (ep.c), fi_reject rejects it here.
 */
#include "ffs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct ffs_pep {
	struct fid_pep pep_fid;
	struct fi_info *info;
	char domdir[PATH_MAX];
	struct ffs_obj obj;
	pthread_mutex_t lock;
	struct ffs_eq *eq;
	char listen_addr[128]; /* fi_setname's, or the info's src_addr, as ADDR */
	struct sockaddr_storage name; /* the same as a sockaddr (namelen 0: none) */
	size_t namelen;
};

const struct fi_info *ffs_pep_info(fid_t fid)
{
	if (!fid || fid->fclass != FI_CLASS_PEP)
		return NULL;
	return container_of(fid, struct ffs_pep, pep_fid.fid)->info;
}

static int pep_close(struct fid *fid)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	if (pep->eq)
		ffs_eq_unbind(pep->eq, &pep->pep_fid.fid);
	ffs_obj_close(&pep->obj);
	fi_freeinfo(pep->info);
	pthread_mutex_destroy(&pep->lock);
	free(pep);
	return 0;
}

static int pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	if (!bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	struct ffs_eq *eq = (struct ffs_eq *)container_of(bfid, struct fid_eq, fid);
	pthread_mutex_lock(&pep->lock);
	int ret = -FI_EINVAL;
	if (!pep->eq) {
		unsigned tid;
		ret = ffs_eq_bind(eq, pep->domdir, "pep", pep->obj.id, fid, &tid);
		if (!ret && (ret = ffs_ctl(&pep->obj, "bind eq %u", tid)))
			ffs_eq_unbind(eq, fid);
		if (!ret)
			pep->eq = eq;
	}
	pthread_mutex_unlock(&pep->lock);
	return ret;
}

static int pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	int ret = ffs_name_get(&pep->obj, "local", addr, addrlen);
	if (ret != -FI_EOPBADSTATE)
		return ret;
	/* Not listening yet: the address fi_setname gave, if it has a port. */
	pthread_mutex_lock(&pep->lock);
	size_t need = pep->namelen, room = *addrlen;
	if (need && ffs_sockaddr_port(&pep->name)) {
		*addrlen = need;
		ret = addr && room >= need ? 0 : -FI_ETOOSMALL;
		if (!ret)
			memcpy(addr, &pep->name, need);
	}
	pthread_mutex_unlock(&pep->lock);
	return ret;
}

const char *ffs_pep_name(fid_t fid)
{
	if (!fid || fid->fclass != FI_CLASS_PEP)
		return NULL;
	return container_of(fid, struct ffs_pep, pep_fid.fid)->listen_addr;
}

/* set_name keeps an address for listen (and fi_getname before it). Under
 * pep->lock, or before the pep is shared. */
static int set_name(struct ffs_pep *pep, const void *addr, size_t addrlen)
{
	int ret = ffs_addr_format(addr, addrlen, pep->listen_addr, sizeof pep->listen_addr);
	if (ret)
		return ret;
	pep->namelen = addrlen < sizeof pep->name ? addrlen : sizeof pep->name;
	memcpy(&pep->name, addr, pep->namelen);
	return 0;
}

static int pep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	pthread_mutex_lock(&pep->lock);
	int ret = set_name(pep, addr, addrlen);
	pthread_mutex_unlock(&pep->lock);
	return ret;
}

static int pep_listen(struct fid_pep *fid)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid);
	pthread_mutex_lock(&pep->lock);
	int ret = pep->listen_addr[0] ? ffs_ctl(&pep->obj, "listen %s", pep->listen_addr) : ffs_ctl(&pep->obj, "listen");
	pthread_mutex_unlock(&pep->lock);
	return ret;
}

static int pep_reject(struct fid_pep *fid, fid_t handle, const void *param, size_t paramlen)
{
	if (!handle || handle->fclass != FI_CLASS_CONNREQ)
		return -FI_EINVAL;
	struct ffs_connreq *cr = container_of(handle, struct ffs_connreq, fid);
	char data[2 * 256 + 8];
	int ret = ffs_hex_data(param, paramlen, data, sizeof data);
	if (ret)
		return ret;
	struct ffs_obj ep;
	if ((ret = ffs_obj_adopt(&ep, cr->domdir, "ep", cr->ep_id)))
		return ret;
	ret = data[0] ? ffs_ctl(&ep, "reject %s", data) : ffs_ctl(&ep, "reject");
	ffs_obj_close(&ep);
	if (!cr->adopted)
		free(cr);
	return ret;
}

static int pep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	return ffs_getopt(&pep->obj, level, optname, optval, optlen);
}

int ffs_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return -FI_ENOSYS;
}

int ffs_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int ffs_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int ffs_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

int ffs_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context)
{
	return -FI_ENOSYS;
}

int ffs_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

int ffs_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

ssize_t ffs_no_cancel(fid_t fid, void *context)
{
	return -FI_ENOSYS;
}

int ffs_no_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

int ffs_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **ep, void *context)
{
	return -FI_ENOSYS;
}

int ffs_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **ep, void *context)
{
	return -FI_ENOSYS;
}

ssize_t ffs_no_size_left(struct fid_ep *ep)
{
	return -FI_ENOSYS;
}

/* pep_control is fi_control's FI_BACKLOG, "the connection request backlog
 * for listening endpoints": the tree's attr/backlog. */
static int pep_control(struct fid *fid, int command, void *arg)
{
	struct ffs_pep *pep = container_of(fid, struct ffs_pep, pep_fid.fid);
	if (command != FI_BACKLOG)
		return -FI_ENOSYS;
	if (!arg || *(int *)arg < 1)
		return -FI_EINVAL;
	return ffs_set(&pep->obj, "attr/backlog", "%d", *(int *)arg);
}

static struct fi_ops pep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = pep_close,
	.bind = pep_bind,
	.control = pep_control,
	.ops_open = ffs_no_ops_open,
	.tostr = ffs_no_tostr,
	.ops_set = ffs_no_ops_set,
};

static struct fi_ops_cm pep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = pep_setname,
	.getname = pep_getname,
	.getpeer = ffs_no_getpeer,
	.connect = ffs_no_connect,
	.listen = pep_listen,
	.accept = ffs_no_accept,
	.reject = pep_reject,
	.shutdown = ffs_no_shutdown,
	.join = ffs_no_join,
};

static struct fi_ops_ep pep_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ffs_no_cancel,
	.getopt = pep_getopt,
	.setopt = ffs_no_setopt,
	.tx_ctx = ffs_no_tx_ctx,
	.rx_ctx = ffs_no_rx_ctx,
	.rx_size_left = ffs_no_size_left,
	.tx_size_left = ffs_no_size_left,
};

int ffs_pep_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **out, void *context)
{
	if (!info || !out)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_MSG && info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	struct ffs_pep *pep = calloc(1, sizeof *pep);
	if (!pep)
		return -FI_ENOMEM;
	int ret = ffs_info_domain_dir(info, pep->domdir, sizeof pep->domdir);
	if (ret)
		goto fail;
	if (info->src_addr && info->src_addrlen && (ret = set_name(pep, info->src_addr, info->src_addrlen)))
		goto fail;
	if (!(pep->info = fi_dupinfo(info))) {
		ret = -FI_ENOMEM;
		goto fail;
	}
	if ((ret = ffs_obj_clone(&pep->obj, pep->domdir, "pep"))) {
		fi_freeinfo(pep->info);
		goto fail;
	}
	if (info->ep_attr && (ret = ffs_auth_key(&pep->obj, info->domain_attr, info->ep_attr->auth_key,
						 info->ep_attr->auth_key_size))) {
		ffs_obj_close(&pep->obj);
		fi_freeinfo(pep->info);
		goto fail;
	}
	pthread_mutex_init(&pep->lock, NULL);
	pep->pep_fid.fid.fclass = FI_CLASS_PEP;
	pep->pep_fid.fid.context = context;
	pep->pep_fid.fid.ops = &pep_fi_ops;
	pep->pep_fid.ops = &pep_ep_ops;
	pep->pep_fid.cm = &pep_cm_ops;
	*out = &pep->pep_fid;
	return 0;
fail:
	free(pep);
	return ret;
}
