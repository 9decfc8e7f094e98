// SPDX-License-Identifier: GPL-2.0
/*
 * sdp.ko: Sockets Direct Protocol over RDMA.
 *
 * Module entry points: parameter validation, the protocol core's
 * self-check, socket family registration.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/socket.h>

#include "sdp.h"
#include "sdp_core.h"
#include "uapi/sdp.h"

int sdp_family = AF_INET_SDP;
struct workqueue_struct *sdp_wq;
struct workqueue_struct *sdp_zc_wq;
module_param_named(family, sdp_family, int, 0444);
MODULE_PARM_DESC(family,
		 "socket family number to register (default 27, AF_INET_SDP)");

int sdp_ipproto = IPPROTO_SDP;
module_param_named(ipproto, sdp_ipproto, int, 0444);
MODULE_PARM_DESC(ipproto,
		 "protocol number of SDP in AF_INET and AF_INET6 (default 257, IPPROTO_SDP; 0: none)");

/*
 * Stream protocol numbers the kernel's AF_INET/AF_INET6 use (or may load):
 * registering one of them would take it over or be ignored.
 */
static bool __init sdp_ipproto_taken(int ipproto)
{
	switch (ipproto) {
	case IPPROTO_IP:
	case IPPROTO_TCP:
	case IPPROTO_SCTP:
	case IPPROTO_MPTCP:
	case 256: /* IPPROTO_SMC, Linux 6.11 */
		return true;
	default:
		return false;
	}
}

/*
 * Load-time checks of glue decisions that Soft-RoCE cannot catch, because
 * its DMA addresses are the kernel virtual addresses: an inline send takes
 * the virtual address, a DMA send the DMA address (review F1); the address
 * a peer learns for a registration is neither (review F13).
 */
static const char *__init sdp_selftest_glue(void)
{
	static u8 data[8];
	struct sdp_buf b = { .data = data, .dma = 0x12345000ULL };
	u64 iova;

	if (sdp_send_sge_addr(&b, true) != (u64)(uintptr_t)data)
		return "inline send without the buffer's virtual address";
	if (sdp_send_sge_addr(&b, false) != b.dma)
		return "DMA send without the buffer's DMA address";
	iova = sdp_mr_iova(0xffff888012345678ULL, ~0ULL);
	if (iova >> 47 || offset_in_page(iova) != 0x678)
		return "zero-copy address reveals the DMA address";
	iova = sdp_mr_iova(0x1000ULL + 0xabc, 0);
	if (!iova || offset_in_page(iova) != 0xabc ||
	    iova + SDP_ZC_MAX_LEN < iova)
		return "zero-copy address out of range";
	return NULL;
}

static int __init sdp_init(void)
{
	const char *failed;
	int check, err;

	if (sdp_family <= AF_UNSPEC || sdp_family >= NPROTO) {
		pr_err("family=%d is out of range: use 1..%d\n", sdp_family,
		       NPROTO - 1);
		return -EINVAL;
	}

	if (sdp_ipproto < 0 || sdp_ipproto >= IPPROTO_MAX ||
	    (sdp_ipproto && sdp_ipproto_taken(sdp_ipproto))) {
		pr_err("ipproto=%d is out of range or used by the kernel: use 0 (none) or a free number below %d, such as %d\n",
		       sdp_ipproto, IPPROTO_MAX, IPPROTO_SDP);
		return -EINVAL;
	}

	check = sdp_core_selftest(&failed);
	if (check) {
		pr_err("protocol core self-check %d failed: %s\n", check,
		       failed);
		return -ENOEXEC;
	}
	failed = sdp_selftest_glue();
	if (failed) {
		pr_err("glue self-check failed: %s\n", failed);
		return -ENOEXEC;
	}

	/* Completions, teardown and keepalive run here, in process context. */
	sdp_wq = alloc_workqueue("sdp", WQ_MEM_RECLAIM, 0);
	if (!sdp_wq)
		return -ENOMEM;
	/* Its works sleep as long as the peer takes: their own queue. */
	sdp_zc_wq = alloc_workqueue("sdp_zc", WQ_UNBOUND, 0);
	if (!sdp_zc_wq) {
		err = -ENOMEM;
		goto out_wq;
	}
	err = sdp_sysctl_init();
	if (err)
		goto out_wq;
	err = sdp_proc_init();
	if (err)
		goto out_sysctl;

	err = sdp_socket_register(sdp_family, sdp_ipproto);
	if (err == -EEXIST) {
		pr_err("family %d is already registered by another protocol; load with family=N\n",
		       sdp_family);
		goto out_proc;
	}
	if (err == -EADDRINUSE) {
		pr_err("protocol %d of AF_INET is already taken; load with ipproto=N (0: none)\n",
		       sdp_ipproto);
		goto out_proc;
	}
	if (err) {
		pr_err("registering family %d failed: %d\n", sdp_family, err);
		goto out_proc;
	}
	if (sdp_ipproto)
		pr_info("registered socket family %d and protocol %d of AF_INET and AF_INET6\n",
			sdp_family, sdp_ipproto);
	else
		pr_info("registered socket family %d\n", sdp_family);
	return 0;

out_proc:
	sdp_proc_exit();
out_sysctl:
	sdp_sysctl_exit();
out_wq:
	if (sdp_zc_wq)
		destroy_workqueue(sdp_zc_wq);
	destroy_workqueue(sdp_wq);
	return err;
}

static void __exit sdp_exit(void)
{
	sdp_socket_unregister();
	/* Sockets hold module references: none is left, nor any work. */
	destroy_workqueue(sdp_zc_wq);
	destroy_workqueue(sdp_wq);
	sdp_proc_exit();
	sdp_sysctl_exit();
}

module_init(sdp_init);
module_exit(sdp_exit);

MODULE_DESCRIPTION("Sockets Direct Protocol: zero-copy stream sockets over RDMA");
MODULE_LICENSE("GPL");
MODULE_ALIAS_NETPROTO(AF_INET_SDP);
/*
 * socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SDP) loads the module.
 * The type is a number: SOCK_STREAM is an enum, which __stringify() keeps
 * as its name.
 */
MODULE_ALIAS_NET_PF_PROTO_TYPE(PF_INET, IPPROTO_SDP, 1);
MODULE_ALIAS_NET_PF_PROTO_TYPE(PF_INET6, IPPROTO_SDP, 1);
