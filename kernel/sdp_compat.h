/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences between the kernels sdp.ko builds for (Debian's
 * 6.1 and 6.12), in one place: every version test is here, as a named
 * feature the glue tests with #ifdef.  `make checkpatch` checks this file
 * without LINUX_VERSION_CODE's warnings, which an out-of-tree module that
 * spans several kernels cannot avoid; the other files have no version test.
 */
#ifndef SDP_COMPAT_H
#define SDP_COMPAT_H

#include <linux/version.h>

/* struct proto gained ipv6_pinfo_offset for inet6_sk() (6.7). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
#define SDP_HAVE_IPV6_PINFO_OFFSET 1
#endif

/* proto_ops.accept takes a struct proto_accept_arg (6.10). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define SDP_HAVE_PROTO_ACCEPT_ARG 1
#endif

/* register_sysctl() takes the table's size, no empty sentinel (6.6). */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 6, 0)
#define SDP_SYSCTL_NEEDS_SENTINEL 1
#endif

/* iov_iter's iovec array is read through iter_iov() (6.4). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define sdp_iter_iov(i) iter_iov(i)
#else
#define sdp_iter_iov(i) ((i)->iov)
#endif

/*
 * Soft-RoCE before 6.4 calls the completion handler from a tasklet that
 * destroying the CQ does not wait for (fixed by 78b26a335310): sdp_qp.c
 * gives it time to run first.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 4, 0)
#define SDP_RXE_NEEDS_SETTLE 1
#endif

/* net.core.optmem_max is per network namespace from 6.9 on. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 9, 0)
#define sdp_optmem_max(sk) READ_ONCE(sock_net(sk)->core.sysctl_optmem_max)
#else
#define sdp_optmem_max(sk) READ_ONCE(sysctl_optmem_max)
#endif

/* struct ubuf_info's callback moved into struct ubuf_info_ops (6.10). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define sdp_ubuf_complete(uarg, zerocopy) \
	((uarg)->ops->complete(NULL, (uarg), (zerocopy)))
#else
#define sdp_ubuf_complete(uarg, zerocopy) \
	((uarg)->callback(NULL, (uarg), (zerocopy)))
#endif

#endif /* SDP_COMPAT_H */
