/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Userspace API of the SDP (Sockets Direct Protocol) socket family.
 *
 *   int fd = socket(AF_INET_SDP, SOCK_STREAM, 0);
 *
 * The family number is the historical AF_INET_SDP (27, which the kernel
 * headers now call AF_IB but for which no socket family is registered).
 * sdp.ko can register another number with its `family` module parameter;
 * programs that must follow it read /sys/module/sdp/parameters/family.
 * Both IPv4 and IPv6 peers are addressed through this one family, with
 * struct sockaddr_in or struct sockaddr_in6.
 */
#ifndef _UAPI_SDP_H
#define _UAPI_SDP_H

#define AF_INET_SDP 27
#define PF_INET_SDP AF_INET_SDP

/* Where the loaded module publishes the family number it registered. */
#define SDP_FAMILY_SYSFS_PATH "/sys/module/sdp/parameters/family"

#endif /* _UAPI_SDP_H */
