// SPDX-License-Identifier: GPL-2.0
/*
 * The SDP socket family: socket creation and release, proto_ops.
 *
 * Every socket holds a reference on this module (taken by the socket layer
 * for the family and by sk_alloc() for the proto), so the module cannot be
 * unloaded while any SDP socket exists.
 */
#include <linux/in.h>
#include <linux/module.h>
#include <linux/net.h>
#include <net/sock.h>

#include "sdp.h"

static struct proto sdp_proto = {
	.name = "SDP",
	.owner = THIS_MODULE,
	.obj_size = sizeof(struct sdp_sock),
};

static int sdp_release(struct socket *sock)
{
	struct sock *sk = sock->sk;

	if (!sk)
		return 0;

	lock_sock(sk);
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, -1);
	sock_orphan(sk);
	sk->sk_shutdown = SHUTDOWN_MASK;
	release_sock(sk);

	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

/*
 * Operations not listed fail the way a protocol without them does
 * (sock_no_*: -EOPNOTSUPP); the data path fills them in.  Not const:
 * .family is the `family` module parameter, set before registration.
 */
static struct proto_ops sdp_proto_ops = {
	.owner = THIS_MODULE,
	.release = sdp_release,
	.bind = sock_no_bind,
	.connect = sock_no_connect,
	.socketpair = sock_no_socketpair,
	.accept = sock_no_accept,
	.getname = sock_no_getname,
	.ioctl = sock_no_ioctl,
	.listen = sock_no_listen,
	.shutdown = sock_no_shutdown,
	.sendmsg = sock_no_sendmsg,
	.recvmsg = sock_no_recvmsg,
	.mmap = sock_no_mmap,
};

/*
 * Errors are those inet_create() gives on AF_INET when TCP is its only
 * protocol: a protocol number out of range is -EINVAL, any type but
 * SOCK_STREAM is -ESOCKTNOSUPPORT, a stream protocol other than TCP is
 * -EPROTONOSUPPORT.  (The real AF_INET says -EPROTONOSUPPORT for, e.g.,
 * SOCK_DGRAM + IPPROTO_TCP because it has UDP; SDP has no datagram type.)
 */
static int sdp_create(struct net *net, struct socket *sock, int protocol,
		      int kern)
{
	struct sock *sk;

	if (protocol < 0 || protocol >= IPPROTO_MAX)
		return -EINVAL;
	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol != IPPROTO_IP && protocol != IPPROTO_TCP)
		return -EPROTONOSUPPORT;

	sk = sk_alloc(net, sdp_family, GFP_KERNEL, &sdp_proto, kern);
	if (!sk)
		return -ENOBUFS;

	sock->state = SS_UNCONNECTED;
	sock->ops = &sdp_proto_ops;
	sock_init_data(sock, sk);
	sk->sk_protocol = IPPROTO_TCP;
	/* Counted per namespace in the "sockets" column of /proc/net/protocols. */
	sock_prot_inuse_add(net, &sdp_proto, 1);
	return 0;
}

static struct net_proto_family sdp_family_ops = {
	.create = sdp_create,
	.owner = THIS_MODULE,
};

int sdp_socket_register(int family)
{
	int err;

	err = proto_register(&sdp_proto, 1);
	if (err)
		return err;

	sdp_proto_ops.family = family;
	sdp_family_ops.family = family;
	err = sock_register(&sdp_family_ops);
	if (err)
		proto_unregister(&sdp_proto);
	return err;
}

void sdp_socket_unregister(void)
{
	sock_unregister(sdp_family_ops.family);
	proto_unregister(&sdp_proto);
}
