/*
 * exittest: a libfabric program that ends while the fabricfs provider's
 * waiter thread is watching one of its objects (a counter armed by
 * fi_trywait, which the waiter looks at every millisecond) and returns
 * from main without closing anything. At exit libfabric's fi_fini calls
 * the provider's cleanup and unloads the library; the program must still
 * exit 0, not die of the waiter running code that is no longer mapped.
 *
 *	FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=/fabric exittest [DOMAIN]
 *
 * Prints "PASS" and returns 0; tests/provider_test.go runs it many times,
 * as the fault it checks for shows in a fraction of the runs.
 */
#include "fitest.h"

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->fabric_attr->prov_name = strdup("fabricfs");
	hints->domain_attr->name = strdup(argc > 1 ? argv[1] : "tcp/lo");
	hints->ep_attr->type = FI_EP_RDM;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cntr *cntr;
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD};
	CHECK(fi_cntr_open(domain, &attr, &cntr, NULL));
	struct fid *fids[] = {&cntr->fid};
	CHECK(fi_trywait(fabric, fids, 1));
	printf("PASS\n");
	return 0;
}
