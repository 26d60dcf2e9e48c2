/*
 * rdm_sar: a real libfabric FI_EP_RDM endpoint (tcp;ofi_rxm) with its
 * dynamic receive buffers off, sending segmented (SAR) messages to a
 * fabricfs RDM endpoint, for providers/rxm/interop_test.go.
 *
 *   rdm_sar GOPORT
 *
 * FI_OFI_RXM_ENABLE_DYN_RBUF=0 is set before libfabric starts: rxm then
 * sends messages of 16385..131072 bytes (its SAR limit, 8 x 16384) as
 * segments, above that by rendezvous. The fabricfs endpoint listens on
 * 127.0.0.1:GOPORT. This program:
 *   1. prints "port P key 0 base 0": its endpoint's port (no region);
 *   2. for each size of 16385, 65536, 131072, untagged then tagged, without
 *      then with remote CQ data (0xda7a0000 + i), sends message i (from 1,
 *      pattern i; tag 0x100 + i when tagged) and waits for its completion:
 *      segmented messages complete when written, so they complete with no
 *      receive posted on the other side. It prints "sent N";
 *   3. waits for a line on stdin (fabricfs has checked them and posted
 *      receives), sends message N+1 of 131073 bytes untagged and N+2
 *      tagged (tag 0x100 + N + 2), rendezvous both, and waits for them;
 *   4. receives fabricfs's answer, the untagged message "ack N+2", and
 *      prints "ok", then exits when stdin closes.
 * Errors go to stderr with exit status 1.
 */
#define PROG "rdm_sar"
#include "peer.h"

#include <rdma/fi_tagged.h>

enum { MAXMSG = 131073 };


static void setup(int goport)
{
	/* Before libfabric reads its parameters: segmentation is on only
	 * without dynamic receive buffers. */
	if (setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 1))
		fail("setenv failed");
	open_peer(goport, FI_MSG | FI_TAGGED,
		  FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
}

/* Sends message i of n bytes and waits for its completion. */
static void send_msg(unsigned char *buf, int i, int n, int tagged, int data)
{
	struct fi_context ctx;
	struct fi_cq_data_entry e;
	uint64_t tag = 0x100 + i, cq_data = 0xda7a0000u + i;

	pattern(buf, i, n);
	if (tagged && data)
		POST(fi_tsenddata(ep, buf, n, NULL, cq_data, peer, tag, &ctx));
	else if (tagged)
		POST(fi_tsend(ep, buf, n, NULL, peer, tag, &ctx));
	else if (data)
		POST(fi_senddata(ep, buf, n, NULL, cq_data, peer, &ctx));
	else
		POST(fi_send(ep, buf, n, NULL, peer, &ctx));
	wait_ok(&ctx, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), &e, "send");
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 16385, 65536, 131072 };
	struct fi_context ctx;
	struct fi_cq_data_entry e;
	struct sockaddr_in me;
	size_t len = sizeof me;
	unsigned char *buf;
	char line[64], want[64];
	int i = 0, s, tagged, data;

	if (argc != 2)
		fail("usage: rdm_sar GOPORT");
	setup(atoi(argv[1]));
	buf = malloc(MAXMSG);
	if (!buf)
		fail("out of memory");
	CHECK(fi_getname(&ep->fid, &me, &len));
	printf("port %d key 0 base 0\n", ntohs(me.sin_port));
	fflush(stdout);

	for (s = 0; s < 3; s++)
		for (tagged = 0; tagged < 2; tagged++)
			for (data = 0; data < 2; data++)
				send_msg(buf, ++i, sizes[s], tagged, data);
	printf("sent %d\n", i);
	fflush(stdout);

	if (!fgets(line, sizeof line, stdin))
		fail("stdin closed before the rendezvous");
	send_msg(buf, ++i, MAXMSG, 0, 0);
	send_msg(buf, ++i, MAXMSG, 1, 0);

	memset(buf, 0, 64);
	POST(fi_recv(ep, buf, 64, NULL, FI_ADDR_UNSPEC, &ctx));
	wait_ok(&ctx, FI_RECV | FI_MSG, &e, "ack");
	snprintf(want, sizeof want, "ack %d", i);
	if (e.len != strlen(want) || memcmp(buf, want, e.len) != 0)
		fail("the ack differs");
	printf("ok\n");
	fflush(stdout);

	while (fgets(line, sizeof line, stdin))
		;
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	free(buf);
	return 0;
}
