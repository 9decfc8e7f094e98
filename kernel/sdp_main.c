// SPDX-License-Identifier: GPL-2.0
/*
 * sdp.ko: Sockets Direct Protocol over RDMA.
 *
 * Module entry points: parameter validation, the protocol core's
 * self-check, socket family registration.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/net.h>
#include <linux/socket.h>

#include "sdp.h"
#include "sdp_core.h"
#include "uapi/sdp.h"

int sdp_family = AF_INET_SDP;
module_param_named(family, sdp_family, int, 0444);
MODULE_PARM_DESC(family,
		 "socket family number to register (default 27, AF_INET_SDP)");

static int __init sdp_init(void)
{
	const char *failed;
	int check, err;

	if (sdp_family <= AF_UNSPEC || sdp_family >= NPROTO) {
		pr_err("family=%d is out of range: use 1..%d\n", sdp_family,
		       NPROTO - 1);
		return -EINVAL;
	}

	check = sdp_core_selftest(&failed);
	if (check) {
		pr_err("protocol core self-check %d failed: %s\n", check,
		       failed);
		return -ENOEXEC;
	}

	err = sdp_socket_register(sdp_family);
	if (err == -EEXIST) {
		pr_err("family %d is already registered by another protocol; load with family=N\n",
		       sdp_family);
		return err;
	}
	if (err) {
		pr_err("registering family %d failed: %d\n", sdp_family, err);
		return err;
	}
	pr_info("registered socket family %d\n", sdp_family);
	return 0;
}

static void __exit sdp_exit(void)
{
	sdp_socket_unregister();
}

module_init(sdp_init);
module_exit(sdp_exit);

MODULE_DESCRIPTION("Sockets Direct Protocol: zero-copy stream sockets over RDMA");
MODULE_LICENSE("GPL");
MODULE_ALIAS_NETPROTO(AF_INET_SDP);
