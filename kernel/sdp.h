/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sdp.ko internal declarations shared by the C glue files.
 *
 * The glue talks to kernel APIs only; protocol decisions live in the C++
 * core (core/), reached through core/sdp_core.h.
 */
#ifndef SDP_KERNEL_SDP_H
#define SDP_KERNEL_SDP_H

#include <net/sock.h>

/* Socket family registered at load (module parameter `family`). */
extern int sdp_family;

struct sdp_sock {
	struct sock sk; /* must stay first: sk_alloc() allocates an sdp_sock */
};

static inline struct sdp_sock *sdp_sk(const struct sock *sk)
{
	return (struct sdp_sock *)sk;
}

/* sdp_socket.c */
int sdp_socket_register(int family);
void sdp_socket_unregister(void);

#endif /* SDP_KERNEL_SDP_H */
