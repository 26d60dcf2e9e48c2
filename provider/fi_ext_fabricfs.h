/*
 * fi_ext_fabricfs.h: the fabricfs provider's provider-specific operations,
 * for applications (fi_open_ops, fi_domain(3)).
 *
 * A domain or an endpoint of the provider offers the sets the tree has in
 * the object's ops/ directory (docs/tree.md, "Provider-specific
 * operations"): "verbs_device_v1" on a verbs domain, "tcp_sockopt_v1" on
 * a connected tcp FI_EP_MSG endpoint, "verbs_qp_v1" on a verbs FI_EP_MSG
 * or FI_EP_DGRAM endpoint once enabled. fi_open_ops(fid, NAME, 0, &ops,
 * NULL) with one of them gives a struct fi_fabricfs_ops; with any other
 * name, or on other objects, -FI_ENOSYS. The same struct serves every set:
 * its calls name the set again.
 *
 * docs/provider.md, "Provider-specific operations", says more.
 */
#ifndef FI_EXT_FABRICFS_H
#define FI_EXT_FABRICFS_H

#include <rdma/fabric.h>
#include <sys/types.h>

struct fi_fabricfs_ops {
	size_t size; /* sizeof(struct fi_fabricfs_ops) */
	/* get reads the value called value of the set called name (the file
	 * ops/NAME/VALUE) into buf as text, NUL-terminated, without the
	 * newline. It returns the text's length, or a negative FI_E* code:
	 * -FI_ENOENT for a value the set does not have, -FI_EINVAL for a name
	 * or value that is no file name or a buf of 0 bytes. */
	ssize_t (*get)(struct fid *fid, const char *name, const char *value, char *buf, size_t len);
	/* set writes text to the value (a writable one: tcp_sockopt_v1's).
	 * It returns 0 or a negative FI_E* code: -FI_EINVAL for a text the
	 * value does not take, -FI_EOPBADSTATE when the object cannot take it
	 * now (an endpoint without a socket), -FI_EACCES for a read-only
	 * value (for root too: the daemon refuses the write). */
	int (*set)(struct fid *fid, const char *name, const char *value, const char *text);
};

#endif
