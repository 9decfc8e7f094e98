// SPDX-License-Identifier: GPL-2.0
/*
 * The SDP socket family: socket creation and release, and the proto_ops that
 * are not the data path (bind, listen, accept, connect, names, poll, ioctl,
 * shutdown, socket options).  Behaviour and errno follow TCP.
 *
 * Every socket holds a reference on this module (taken by the socket layer
 * for the family and by sk_alloc() for the proto), so the module cannot be
 * unloaded while any SDP socket exists.
 */
#include <linux/capability.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <net/ipv6.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <net/addrconf.h>
#include <net/inet_common.h>
#include <net/protocol.h>
#include <net/ip.h>
#include <net/route.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tcp_states.h>
#include <asm/ioctls.h>

#include "sdp.h"

#define SDP_KEEPIDLE_DEFAULT 7200 /* seconds, as tcp_keepalive_time */
#define SDP_KEEPINTVL_DEFAULT 75
#define SDP_KEEPCNT_DEFAULT 9

static int sdp_inet_init(struct sock *sk);
static void sdp_inet_destroy(struct sock *sk);
static void sdp_unhash(struct sock *sk);

/*
 * AF_INET_SDP sockets of either address family and IPPROTO_SDP sockets of
 * AF_INET.  .init, .destroy and .unhash serve only inet_create(), which
 * calls the first and, when it fails after it, sk_common_release().
 */
struct proto sdp_proto = {
	.name = "SDP",
	.owner = THIS_MODULE,
	.obj_size = sizeof(struct sdp_sock),
	.keepalive = sdp_set_keepalive,
	.release_cb = sdp_release_cb,
	.init = sdp_inet_init,
	.destroy = sdp_inet_destroy,
	.unhash = sdp_unhash,
};

#if IS_ENABLED(CONFIG_IPV6)
/* IPPROTO_SDP sockets of AF_INET6 (inet6_create()). */
static struct proto sdp6_proto = {
	.name = "SDPv6",
	.owner = THIS_MODULE,
	.obj_size = sizeof(struct sdp6_sock),
#ifdef SDP_HAVE_IPV6_PINFO_OFFSET
	.ipv6_pinfo_offset = offsetof(struct sdp6_sock, inet6),
#endif
	.keepalive = sdp_set_keepalive,
	.release_cb = sdp_release_cb,
	.init = sdp_inet_init,
	.destroy = sdp_inet_destroy,
	.unhash = sdp_unhash,
};

/* A new or cloned AF_INET6 sock points at its own ipv6_pinfo. */
static void sdp_sk_set_pinet6(struct sock *sk)
{
	if (sk->sk_prot_creator == &sdp6_proto)
		inet_sk(sk)->pinet6 = &((struct sdp6_sock *)sk)->inet6;
}
#else
static void sdp_sk_set_pinet6(struct sock *sk)
{
}
#endif

void sdp_write_space(struct sock *sk)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_sync_poll(&wq->wait, EPOLLOUT |
						EPOLLWRNORM | EPOLLWRBAND);
	if (wq && wq->fasync_list && !(sk->sk_shutdown & SEND_SHUTDOWN))
		sock_wake_async(wq, SOCK_WAKE_SPACE, POLL_OUT);
	rcu_read_unlock();
	/* The work of an asynchronous send may wait for ring room. */
	if (wq_has_sleeper(&sdp_sk(sk)->zc_async_wait))
		wake_up_all(&sdp_sk(sk)->zc_async_wait);
}

/*
 * A change of state that is also a change of room (connected, or over
 * TCP now): sk_state_change(), then the writers.  TCP gives its two
 * wake-ups for one change (tcp_fin() and tcp_data_ready() for a FIN) from
 * softirq; here they come from process context, where a waiter woken by
 * the first could preempt us before the second and take the event, and
 * the second would then be another edge for edge-triggered epoll where
 * TCP gives one.  With bottom halves off (preemption off) between them, a
 * waiter on this CPU runs after both.  The DisConn's pair is in
 * sdp_rx_complete().
 */
void sdp_wake_pair(struct sock *sk)
{
	local_bh_disable();
	sk->sk_state_change(sk);
	sdp_write_space(sk);
	local_bh_enable();
}

static void sdp_sk_destruct(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	/* A clone that failed inside sk_clone_lock() is a copy of its
	 * listener that owns nothing.
	 */
	if (ssk->self != sk)
		return;
	WARN_ON_ONCE(ssk->res_ready || ssk->cm_id);
	/* MSG_ZEROCOPY notifications never read (inet_sock_destruct()). */
	skb_queue_purge(&sk->sk_error_queue);
	sdp_mr_destroy(sk);
	sdp_sock_list_del(sk);
}

/* The SDP part of a new sock, after struct sock. */
static void sdp_sk_init_priv(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	/* Not the inet_sock: inet_create() has set it up already. */
	memset((char *)ssk + offsetof(struct sdp_sock, core), 0,
	       sizeof(*ssk) - offsetof(struct sdp_sock, core));
	ssk->self = sk;
	INIT_LIST_HEAD(&ssk->accept_queue);
	INIT_LIST_HEAD(&ssk->accept_node);
	INIT_LIST_HEAD(&ssk->half_open);
	INIT_LIST_HEAD(&ssk->half_open_node);
	INIT_WORK(&ssk->cq_work, sdp_cq_work);
	INIT_WORK(&ssk->destroy_work, sdp_destroy_work);
	INIT_WORK(&ssk->put_work, sdp_put_work);
	INIT_WORK(&ssk->cm_work, sdp_cm_work);
	INIT_WORK(&ssk->grow_work, sdp_grow_work);
	mutex_init(&ssk->cm_ev_mutex);
	spin_lock_init(&ssk->cm_ev_lock);
	INIT_DELAYED_WORK(&ssk->fin_work, sdp_fin_timeout_work);
	INIT_DELAYED_WORK(&ssk->keepalive_work, sdp_keepalive_work);
	INIT_DELAYED_WORK(&ssk->ack_work, sdp_ack_work);
	INIT_DELAYED_WORK(&ssk->idle_work, sdp_idle_work);
	INIT_DELAYED_WORK(&ssk->zc_grace_work, sdp_zc_grace_work);
	INIT_WORK(&ssk->zc_async_work, sdp_zc_async_work);
	init_waitqueue_head(&ssk->zc_async_wait);
	INIT_DELAYED_WORK(&ssk->tx_watch_work, sdp_tx_watch_work);
	INIT_DELAYED_WORK(&ssk->comm_est_work, sdp_comm_est_work);
	INIT_DELAYED_WORK(&ssk->fallback_work, sdp_fb_work);
	mutex_init(&ssk->res_lock);
	ssk->keepidle = SDP_KEEPIDLE_DEFAULT;
	ssk->keepintvl = SDP_KEEPINTVL_DEFAULT;
	ssk->keepcnt = SDP_KEEPCNT_DEFAULT;
	ssk->zcopy_thresh = -1;
	ssk->policy = READ_ONCE(sysctl_sdp_fallback) ? SDP_POLICY_FALLBACK :
						       SDP_POLICY_SDP;
}

#ifdef CONFIG_DEBUG_LOCK_ALLOC
static struct lock_class_key sdp_inet_slock_keys[2];
static struct lock_class_key sdp_inet_sk_keys[2];

/*
 * The socket lock of an IPPROTO_SDP sock has its own lockdep class:
 * sock_init_data() gives it AF_INET's (or AF_INET6's), the class of the
 * TCP socket a fallback nests under it, and lockdep would take that
 * nesting for recursion.  Before the lock is first used.
 */
static void sdp_sk_set_lock_class(struct sock *sk)
{
	int v6 = sk->sk_family == AF_INET6;

	if (sk->sk_family != AF_INET && sk->sk_family != AF_INET6)
		return;
	sock_lock_init_class_and_name(sk,
				      v6 ? "slock-AF_INET6-SDP" : "slock-AF_INET-SDP",
				      &sdp_inet_slock_keys[v6],
				      v6 ? "sk_lock-AF_INET6-SDP" : "sk_lock-AF_INET-SDP",
				      &sdp_inet_sk_keys[v6]);
}
#else
static void sdp_sk_set_lock_class(struct sock *sk)
{
}
#endif

/*
 * A new SDP sock: for socket() of AF_INET_SDP (like NULL), or one of the
 * same family and protocol as the sock like (a listener's TCP client).
 */
struct sock *sdp_sk_alloc(struct net *net, const struct sock *like, int kern)
{
	struct sock *sk;

	if (like)
		sk = sk_alloc(net, like->sk_family, GFP_KERNEL,
			      like->sk_prot_creator, kern);
	else
		sk = sk_alloc(net, sdp_family, GFP_KERNEL, &sdp_proto, kern);
	if (!sk)
		return NULL;
	sdp_sk_init_priv(sk);
	sk->sk_protocol = like ? like->sk_protocol : IPPROTO_TCP;
	sdp_sk_set_pinet6(sk);
	sdp_sk_set_lock_class(sk);
	sk->sk_state = TCP_CLOSE;
	sdp_sock_list_add(sk);
	return sk;
}

/*
 * The struct socket's flags of every SDP socket (created, accepted):
 * - SOCK_CUSTOM_SOCKOPT (6.12 on): socket-level options go to
 *   sdp_setsockopt(), which takes SO_ZEROCOPY (sock_setsockopt() refuses
 *   it for protocols other than TCP and UDP) and gives sock_setsockopt()
 *   the rest;
 * - SOCK_SUPPORT_ZC: io_uring's SEND_ZC and SENDMSG_ZC are allowed.  They
 *   pass their own completion (msg_ubuf), which io_uring signals once its
 *   send returns and drops its reference: sdp_sendmsg() returns after the
 *   bytes are copied or read by the peer, so the buffer is free by then.
 */
void sdp_sock_init_flags(struct socket *sock)
{
#ifdef SOCK_CUSTOM_SOCKOPT
	set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
#endif
	set_bit(SOCK_SUPPORT_ZC, &sock->flags);
}

void sdp_sk_init_data(struct socket *sock, struct sock *sk)
{
	sock_init_data(sock, sk);
	sdp_sock_init_flags(sock);
	/* After sock_init_data(), which installs the default destructor. */
	sk->sk_destruct = sdp_sk_destruct;
	sk->sk_write_space = sdp_write_space;
	sk->sk_sndbuf = READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_wmem[1]);
	sk->sk_rcvbuf = READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_rmem[1]);
}

/*
 * socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SDP): inet_create() or
 * inet6_create() has allocated the sock, run sock_init_data() and set up
 * the inet part (family, protocol, and for AF_INET6 pinet6 and
 * sk_ipv6only from net.ipv6.bindv6only); the SDP part is done here.
 */
static int sdp_inet_init(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sdp_sk_set_lock_class(sk);
	sdp_sk_init_priv(sk);
	ssk->v6only = sk->sk_ipv6only;
	sk->sk_state = TCP_CLOSE;
	/* inet_create() ran sock_init_data(); a kernel socket has sk_socket
	 * too (sock_create_kern()).
	 */
	if (sk->sk_socket)
		sdp_sock_init_flags(sk->sk_socket);
	sk->sk_destruct = sdp_sk_destruct;
	sk->sk_write_space = sdp_write_space;
	sk->sk_sndbuf = READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_wmem[1]);
	sk->sk_rcvbuf = READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_rmem[1]);
	sdp_sock_list_add(sk);
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, 1);
	return 0;
}

/* A socket inet_create() gave up after sdp_inet_init() (cgroup BPF). */
static void sdp_inet_destroy(struct sock *sk)
{
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, -1);
}

/* SDP ports live in the RDMA CM, not in an inet hash table. */
static void sdp_unhash(struct sock *sk)
{
}

/* ---- addresses ------------------------------------------------------------ */

/*
 * Validate a user address the way inet/inet6 bind and connect do, and copy
 * the len bytes the caller gave into a zeroed *out.  An IPv6 address may
 * come without its scope id (RFC 2133 length, 24 bytes): the rest of the
 * caller's buffer is not the user's, so it must not be read (inet6 ignores
 * the scope id then, and reports 0 for it).
 */
static int sdp_check_addr(const struct sock *sk, const struct sockaddr *addr,
			  int len, union sdp_addr *out, bool bind)
{
	size_t n;

	if (len < (int)sizeof(sa_family_t))
		return -EINVAL;
	/* An IPPROTO_SDP socket takes its own family's addresses, as
	 * inet_bind(), inet6_bind() and tcp_v4/v6_connect() do; AF_INET's
	 * bind() also takes AF_UNSPEC with INADDR_ANY, as AF_INET.
	 */
	if (sk->sk_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)addr;

		if (len < (int)sizeof(struct sockaddr_in))
			return -EINVAL;
		if (s4->sin_family != AF_INET &&
		    (!bind || s4->sin_family != AF_UNSPEC ||
		     s4->sin_addr.s_addr != htonl(INADDR_ANY)))
			return -EAFNOSUPPORT;
		memset(out, 0, sizeof(*out));
		memcpy(out, addr, sizeof(struct sockaddr_in));
		out->sa.sa_family = AF_INET;
		return 0;
	}
	if (sk->sk_family == AF_INET6 && addr->sa_family != AF_INET6)
		return len < SIN6_LEN_RFC2133 ? -EINVAL : -EAFNOSUPPORT;
	switch (addr->sa_family) {
	case AF_INET:
		if (len < (int)sizeof(struct sockaddr_in))
			return -EINVAL;
		n = sizeof(struct sockaddr_in);
		break;
	case AF_INET6:
		if (len < SIN6_LEN_RFC2133)
			return -EINVAL;
		n = min_t(size_t, len, sizeof(struct sockaddr_in6));
		break;
	default:
		return -EAFNOSUPPORT;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, addr, n);
	return 0;
}

/*
 * As inet6's bind and connect: a link-local (scoped) address needs an
 * interface, the scope id given (with the full sockaddr_in6) or the
 * device the socket is bound to; connect() may not contradict the bound
 * device.  The address then carries that scope for the RDMA CM.  Socket
 * lock held.
 */
static int sdp_addr_scope(struct sock *sk, union sdp_addr *a,
			  bool connect)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)a;

	sock_owned_by_me(sk);

	if (a->sa.sa_family != AF_INET6 ||
	    !__ipv6_addr_needs_scope_id(__ipv6_addr_type(&s6->sin6_addr)))
		return 0;
	if (s6->sin6_scope_id) {
		if (connect && sk->sk_bound_dev_if &&
		    sk->sk_bound_dev_if != (int)s6->sin6_scope_id)
			return -EINVAL;
		sk->sk_bound_dev_if = s6->sin6_scope_id;
	}
	if (!sk->sk_bound_dev_if)
		return -EINVAL;
	s6->sin6_scope_id = sk->sk_bound_dev_if;
	return 0;
}

/* A v4-mapped IPv6 address becomes the IPv4 address it maps. */
static void sdp_canon_addr(union sdp_addr *dst,
			   const struct sockaddr *src)
{
	memset(dst, 0, sizeof(*dst));
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)src;

		if (ipv6_addr_v4mapped(&s6->sin6_addr)) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)dst;

			s4->sin_family = AF_INET;
			s4->sin_port = s6->sin6_port;
			s4->sin_addr.s_addr = s6->sin6_addr.s6_addr32[3];
			return;
		}
		memcpy(dst, s6, sizeof(*s6));
		return;
	}
	memcpy(dst, src, sizeof(struct sockaddr_in));
}

static __be16 sdp_addr_port(const union sdp_addr *a)
{
	return a->sa.sa_family == AF_INET6 ?
		       ((const struct sockaddr_in6 *)a)->sin6_port :
		       ((const struct sockaddr_in *)a)->sin_port;
}

/* Record what the CM bound us to: the address getsockname() reports. */
void sdp_update_local(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sockaddr *src;
	bool v6 = ssk->local.sa.sa_family == AF_INET6;

	sock_owned_by_me(sk);

	if (!ssk->cm_id)
		return;
	src = (struct sockaddr *)&ssk->cm_id->route.addr.src_addr;
	if (src->sa_family == AF_INET && v6) {
		/* Keep the socket's own family: AF_INET6 reports v4-mapped. */
		struct sockaddr_in6 *l6 = (struct sockaddr_in6 *)&ssk->local;
		struct sockaddr_in *s4 = (struct sockaddr_in *)src;

		if (!ipv6_addr_any(&l6->sin6_addr) ||
		    s4->sin_addr.s_addr != htonl(INADDR_ANY))
			ipv6_addr_set_v4mapped(s4->sin_addr.s_addr,
					       &l6->sin6_addr);
		l6->sin6_port = s4->sin_port;
		return;
	}
	if (src->sa_family == AF_INET6)
		memcpy(&ssk->local, src, sizeof(struct sockaddr_in6));
	else if (src->sa_family == AF_INET)
		memcpy(&ssk->local, src, sizeof(struct sockaddr_in));
}

/* Whether addr is one of this namespace's own addresses (or a wildcard). */
static bool sdp_addr_is_local(struct net *net, const union sdp_addr *a)
{
	if (a->sa.sa_family == AF_INET6) {
		const struct in6_addr *ip = &((const struct sockaddr_in6 *)a)->sin6_addr;

		return ipv6_addr_any(ip) || ipv6_chk_addr(net, ip, NULL, 0);
	}
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY) ||
	       inet_addr_type(net, ((const struct sockaddr_in *)a)->sin_addr.s_addr) ==
		       RTN_LOCAL;
}

/*
 * The CM says EADDRNOTAVAIL both for an address that is not ours and for a
 * port conflict involving a wildcard address; TCP says EADDRINUSE for the
 * latter.  An address that is ours but has no RDMA device is
 * EADDRNOTAVAIL: SDP cannot use it.
 */
static int sdp_bind_errno(struct net *net, const union sdp_addr *a,
			  int err)
{
	switch (err) {
	case -EADDRNOTAVAIL:
		return sdp_addr_is_local(net, a) ? -EADDRINUSE : -EADDRNOTAVAIL;
	case -ENODEV:
	case -EINVAL:
		return -EADDRNOTAVAIL;
	default:
		return err;
	}
}

static int sdp_do_bind(struct sock *sk, const struct sockaddr *addr)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	union sdp_addr canon;
	int err;

	sock_owned_by_me(sk);

	if (!ssk->cm_id) {
		ssk->cm_id = sdp_cm_create_id(sk);
		if (IS_ERR(ssk->cm_id)) {
			err = PTR_ERR(ssk->cm_id);
			ssk->cm_id = NULL;
			return err;
		}
	}
	sdp_canon_addr(&canon, addr);
	if (sk->sk_reuse)
		rdma_set_reuseaddr(ssk->cm_id, 1);
	if (canon.sa.sa_family == AF_INET6)
		rdma_set_afonly(ssk->cm_id, ssk->v6only);
	err = rdma_bind_addr(ssk->cm_id, (struct sockaddr *)&canon);
	if (err)
		return sdp_bind_errno(sock_net(sk), &canon, err);
	ssk->bound = true;
	memcpy(&ssk->local, addr, addr->sa_family == AF_INET6 ?
	       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	sdp_update_local(sk);
	return 0;
}

/*
 * bind() of a socket whose policy may need TCP: the address and port in
 * TCP's space first, then the same in SDP's (Documentation/fallback.md).
 * An ephemeral port TCP chose may be taken in SDP's space: another.  An
 * address SDP has no RDMA device for is TCP's only: connect() then goes
 * over TCP at once.  Socket lock held.
 */
static int sdp_bind_both(struct sock *sk, const union sdp_addr *addr)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool ephemeral = !sdp_addr_port(addr);
	union sdp_addr a;
	int tries, err;

	sock_owned_by_me(sk);

	for (tries = 0;; tries++) {
		a = *addr;
		err = sdp_fb_bind_first(sk, &a);
		if (err) {
			sdp_fb_unbind(sk);
			return err;
		}
		err = sdp_do_bind(sk, (struct sockaddr *)&a);
		if (!err)
			return 0;
		if (err == -EADDRNOTAVAIL) {
			/* TCP took the address: no RDMA device behind it. */
			ssk->tcp_only_addr = true;
			memcpy(&ssk->local, &a, sizeof(a));
			return 0;
		}
		sdp_fb_unbind(sk);
		if (!ephemeral || err != -EADDRINUSE || tries >= 3)
			return err;
	}
}

static int sdp_bind(struct socket *sock, struct sockaddr *uaddr, int len)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	union sdp_addr addr;
	int err;

	if (sdp_fallen_back(sk)) /* connected or connecting, as TCP says */
		return -EINVAL;

	err = sdp_check_addr(sk, uaddr, len, &addr, true);
	if (err)
		return err;
	if (ntohs(sdp_addr_port(&addr)) &&
	    inet_port_requires_bind_service(sock_net(sk),
					    ntohs(sdp_addr_port(&addr))) &&
	    !ns_capable(sock_net(sk)->user_ns, CAP_NET_BIND_SERVICE))
		return -EACCES;

	lock_sock(sk);
	err = -EINVAL;
	if (sk->sk_state != TCP_CLOSE || ssk->bound || ssk->tcp_only_addr)
		goto out;
	err = sdp_addr_scope(sk, &addr, false);
	if (err)
		goto out;
	if (ssk->policy != SDP_POLICY_SDP)
		err = sdp_bind_both(sk, &addr);
	else
		err = sdp_do_bind(sk, (struct sockaddr *)&addr);
out:
	release_sock(sk);
	return err;
}

static int sdp_autobind(struct sock *sk, int family)
{
	union sdp_addr any;

	/* A union's initializer need not clear the bytes past its member. */
	memset(&any, 0, sizeof(any));
	any.sa.sa_family = family;
	return sdp_do_bind(sk, (struct sockaddr *)&any);
}

static int sdp_getname(struct socket *sock, struct sockaddr *uaddr, int peer)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	union sdp_addr *a = peer ? &ssk->remote : &ssk->local;
	int len;

	if (sdp_fallen_back(sk))
		return sdp_fb_getname(sock, uaddr, peer);

	lock_sock(sk);
	/* The state as of the completions already delivered. */
	sdp_process_completions(sk, true);
	/*
	 * As inet_getname(): getpeername() (peer 1) needs a connection;
	 * accept() (peer 2) gets the address of a child reset in the queue
	 * too, which the caller then reads the reset from (not ECONNABORTED).
	 */
	if (peer == 1 && (!sdp_addr_port(&ssk->remote) ||
			  ((1 << sk->sk_state) & (TCPF_CLOSE | TCPF_SYN_SENT)))) {
		release_sock(sk);
		return -ENOTCONN;
	}
	if (a->sa.sa_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)uaddr;

		len = sizeof(struct sockaddr_in6);
		memcpy(uaddr, a, len);
		/* As inet6_getname(): the scope only for a scoped address. */
		s6->sin6_flowinfo = 0;
		s6->sin6_scope_id = ipv6_iface_scope_id(&s6->sin6_addr,
							sk->sk_bound_dev_if);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)uaddr;

		len = sizeof(struct sockaddr_in);
		memcpy(uaddr, a, len);
		s4->sin_family = AF_INET;
	}
	release_sock(sk);
	return len;
}

/* ---- listen / accept -------------------------------------------------------- */

static int sdp_listen(struct socket *sock, int backlog)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	if (sdp_fallen_back(sk))
		return -EINVAL;

	lock_sock(sk);
	err = -EINVAL;
	if (sock->state != SS_UNCONNECTED)
		goto out;
	backlog = clamp(backlog, 0, (int)READ_ONCE(sock_net(sk)->core.sysctl_somaxconn));
	if (sk->sk_state == TCP_LISTEN) {
		WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
		err = sdp_fb_listen(sk, backlog);
		goto out;
	}
	if (sk->sk_state != TCP_CLOSE)
		goto out;
	if (ssk->policy == SDP_POLICY_TCP) {
		/* Listens over TCP only: accept() takes its clients. */
		err = sdp_fb_listen(sk, backlog);
		if (err)
			goto out;
		err = kernel_getsockname(ssk->tcp, (struct sockaddr *)&ssk->local);
		if (err < 0) {
			sdp_fb_unlisten(sk);
			goto out;
		}
		err = 0;
		sdp_fb_listening(sk);
		WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
		sdp_set_state(sk, TCP_LISTEN);
		goto out;
	}
	err = -EADDRNOTAVAIL; /* SDP has no device for the bound address */
	if (ssk->tcp_only_addr)
		goto out;
	if (!ssk->bound) {
		/* As TCP: an AF_INET6 socket listens on [::]. */
		err = sdp_autobind(sk, sk->sk_family == AF_INET6 ? AF_INET6 :
								  AF_INET);
		if (err)
			goto out;
	}
	/* Its address and port in TCP's space too, if the policy says so. */
	sdp_update_local(sk);
	err = sdp_fb_listen(sk, backlog);
	if (err)
		goto out;
	err = rdma_listen(ssk->cm_id, backlog + 1);
	if (err) {
		sdp_fb_unlisten(sk);
		goto out;
	}
	sdp_fb_listening(sk);
	sdp_update_local(sk);
	WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
	sdp_set_state(sk, TCP_LISTEN);
out:
	release_sock(sk);
	return err;
}

/*
 * Take the oldest established connection off the queue.  The child's link
 * to the listener is claimed with xchg: a child whose connection dies at the
 * same moment is claimed by sdp_child_unlink() instead and skipped here.
 */
static struct sock *sdp_accept_dequeue(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk), *child;

	sock_owned_by_me(sk);

	while ((child = list_first_entry_or_null(&ssk->accept_queue,
						 struct sdp_sock, accept_node))) {
		list_del_init(&child->accept_node);
		sk_acceptq_removed(sk);
		sdp_fb_share_backlog(sk);
		if (xchg(&child->parent, NULL))
			return &child->sk;
	}
	return NULL;
}

static int sdp_do_accept(struct socket *sock, struct socket *newsock,
			 int flags, bool kern)
{
	struct sock *sk = sock->sk, *child = NULL;
	struct sdp_sock *ssk = sdp_sk(sk);
	long timeo;
	int err = 0;

	if (sdp_fallen_back(sk))
		return -EINVAL;

	lock_sock(sk);
	timeo = sock_rcvtimeo(sk, flags & O_NONBLOCK);
	for (;;) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);

		if (sk->sk_state != TCP_LISTEN) {
			err = -EINVAL;
			goto out;
		}
		child = sdp_accept_dequeue(sk);
		if (child)
			break;
		/* A plain TCP client of a listener that takes them. */
		err = sdp_fb_accept(sk, newsock, kern);
		if (err != -EAGAIN)
			goto out;
		err = 0;
		if (!timeo) {
			err = -EAGAIN;
			goto out;
		}
		if (signal_pending(current)) {
			err = sock_intr_errno(timeo);
			goto out;
		}
		add_wait_queue_exclusive(sk_sleep(sk), &wait);
		sk_wait_event(sk, &timeo,
			      !list_empty(&ssk->accept_queue) ||
			      sdp_fb_accept_ready(sk) ||
			      sk->sk_state != TCP_LISTEN, &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	release_sock(sk);

	lock_sock(child);
	sock_prot_inuse_add(sock_net(child), child->sk_prot, 1);
	sock_graft(child, newsock);
	sdp_sock_init_flags(newsock);
	newsock->state = SS_CONNECTED;
	release_sock(child);
	sock_put(sk); /* the child's reference on its listener */
	return 0;
out:
	release_sock(sk);
	return err;
}

#ifdef SDP_HAVE_PROTO_ACCEPT_ARG
static int sdp_accept(struct socket *sock, struct socket *newsock,
		      struct proto_accept_arg *arg)
{
	return sdp_do_accept(sock, newsock, arg->flags, arg->kern);
}
#else
static int sdp_accept(struct socket *sock, struct socket *newsock, int flags,
		      bool kern)
{
	return sdp_do_accept(sock, newsock, flags, kern);
}
#endif

/* ---- connect -------------------------------------------------------------- */

static int sdp_connect(struct socket *sock, struct sockaddr *raddr, int len,
		       int flags)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	union sdp_addr dst, addr;
	struct sockaddr *uaddr = (struct sockaddr *)&addr;
	long timeo;
	int err;

	if (sdp_fallen_back(sk))
		return sdp_fb_connect(sock, raddr, len, flags);
	if (len >= (int)sizeof(sa_family_t) && raddr->sa_family == AF_UNSPEC) {
		lock_sock(sk);
		err = 0;
		if (sdp_established(sk)) {
			sdp_abort(sk);
			sock->state = SS_UNCONNECTED;
		}
		release_sock(sk);
		return err;
	}
	err = sdp_check_addr(sk, raddr, len, &addr, false);
	if (err)
		return err;

	lock_sock(sk);
	switch (sock->state) {
	case SS_CONNECTED:
		err = -EISCONN;
		goto out;
	case SS_CONNECTING:
		/* As inet_stream_connect: settle below (0 once connected,
		 * the error once failed, else -EALREADY).
		 */
		err = -EALREADY;
		break;
	default:
		if (sk->sk_state != TCP_CLOSE) {
			err = -EISCONN;
			goto out;
		}
		err = sdp_addr_scope(sk, &addr, true);
		if (err)
			goto out;
		if (ssk->res_ready || (ssk->cm_id && !ssk->bound)) {
			/* A failed attempt left resources: start afresh. */
			release_sock(sk);
			sdp_destroy_resources(sk);
			lock_sock(sk);
		}
		if (ssk->policy != SDP_POLICY_SDP) {
			/* The TCP socket a fallback needs, made here, in
			 * the caller's context (sdp_fallback.c).
			 */
			err = sdp_fb_prepare(sk, uaddr->sa_family);
			if (err)
				goto out;
		}
		memcpy(&ssk->remote, uaddr, uaddr->sa_family == AF_INET6 ?
		       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
		if (sdp_fb_try(sk, SDP_CORE_CE_START))
			goto fell_back;
		if (ssk->tcp_only_addr) {
			/* Bound where SDP cannot go (sdp_bind_both()). */
			if (sdp_fb_try(sk, SDP_CORE_CE_NO_ROUTE))
				goto fell_back;
			err = -EADDRNOTAVAIL;
			goto out;
		}
		if (!ssk->cm_id) {
			ssk->cm_id = sdp_cm_create_id(sk);
			if (IS_ERR(ssk->cm_id)) {
				err = PTR_ERR(ssk->cm_id);
				ssk->cm_id = NULL;
				goto out;
			}
			if (ssk->local.sa.sa_family == AF_UNSPEC)
				ssk->local.sa.sa_family = uaddr->sa_family;
		}
		sdp_canon_addr(&dst, uaddr);
		WRITE_ONCE(sk->sk_err, 0);
		WRITE_ONCE(sk->sk_shutdown, 0);
		sock_reset_flag(sk, SOCK_DONE);
		sdp_set_state(sk, TCP_SYN_SENT);
		err = rdma_resolve_addr(ssk->cm_id, NULL, (struct sockaddr *)&dst,
					sysctl_sdp_connect_timeout_ms);
		if (err) {
			sdp_close_event(sk, SDP_CLOSE_RESET);
			err = err == -ENODEV || err == -EADDRNOTAVAIL ?
				      -ENETUNREACH : err;
			if (err == -ENETUNREACH &&
			    sdp_fb_try(sk, SDP_CORE_CE_NO_ROUTE))
				goto fell_back;
			goto out;
		}
		sock->state = SS_CONNECTING;
		sdp_fb_arm(sk);
		err = -EINPROGRESS;
		break;
	}

	timeo = sock_sndtimeo(sk, flags & O_NONBLOCK);
	if (sk->sk_state == TCP_SYN_SENT) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);

		if (!timeo)
			goto out; /* -EINPROGRESS or -EALREADY */
		add_wait_queue(sk_sleep(sk), &wait);
		while (sk->sk_state == TCP_SYN_SENT) {
			if (!timeo || signal_pending(current))
				break;
			sk_wait_event(sk, &timeo, sk->sk_state != TCP_SYN_SENT,
				      &wait);
		}
		remove_wait_queue(sk_sleep(sk), &wait);
		if (sk->sk_state == TCP_SYN_SENT) {
			err = signal_pending(current) ? sock_intr_errno(timeo) :
							-EINPROGRESS;
			goto out;
		}
	}
fell_back:
	if (sdp_fallen_back(sk)) {
		/* TCP's connect, under way or to start: wait for it. */
		release_sock(sk);
		return sdp_fb_connect(sock, raddr, len, flags);
	}
	if (sk->sk_state == TCP_CLOSE) {
		err = sock_error(sk) ?: -ECONNABORTED;
		sock->state = SS_UNCONNECTED;
		/* Like tcp_disconnect() after a failed connect: a fresh socket. */
		WRITE_ONCE(sk->sk_shutdown, 0);
		sock_reset_flag(sk, SOCK_DONE);
		goto out;
	}
	sock->state = SS_CONNECTED;
	err = 0;
out:
	release_sock(sk);
	return err;
}

/* ---- poll ------------------------------------------------------------------- */

/*
 * A send would queue bytes now: what sdp_sendmsg() checks before it takes
 * a segment.  Not while a zero-copy transfer owns the stream or a
 * registration waits for an idle send queue (sdp_tx_held()): a
 * non-blocking send gets EAGAIN then, so EPOLLOUT would make an event loop
 * spin.  Each ends with sdp_zc_wake(), which wakes every poller.
 */
static bool sdp_writable(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (!READ_ONCE(ssk->res_ready))
		return true;
	/* An asynchronous zero-copy send joins the offers in flight. */
	if (READ_ONCE(ssk->tx_busy) && sdp_zc_async_joinable(ssk) &&
	    !READ_ONCE(ssk->sq_idle_waiters) && !READ_ONCE(ssk->zc_sq_wanted) &&
	    !READ_ONCE(ssk->zc_credit_wanted))
		return true;
	if (sdp_tx_held(ssk))
		return false;
	return READ_ONCE(ssk->tx.tail) - READ_ONCE(ssk->tx.done) < ssk->tx.count;
}

static __poll_t sdp_poll(struct file *file, struct socket *sock,
			 struct poll_table_struct *wait)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int state = READ_ONCE(sk->sk_state);
	u8 shutdown;
	__poll_t mask = 0;

	if (sdp_fallen_back(sk))
		return sdp_fb_poll(file, sock, wait);

	sock_poll_wait(file, sock, wait);

	if (state == TCP_LISTEN)
		return list_empty_careful(&ssk->accept_queue) &&
		       !sdp_fb_accept_ready(sk) ? 0 : EPOLLIN | EPOLLRDNORM;

	shutdown = READ_ONCE(sk->sk_shutdown);
	if (shutdown == SHUTDOWN_MASK || state == TCP_CLOSE)
		mask |= EPOLLHUP;
	if (shutdown & RCV_SHUTDOWN)
		mask |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;

	if (state != TCP_SYN_SENT && state != TCP_SYN_RECV) {
		u64 avail = READ_ONCE(ssk->rcv_nxt) - READ_ONCE(ssk->copied_seq);
		int target = sock_rcvlowat(sk, 0, INT_MAX);

		/* An offer a receive cannot take yet (zc_rx_sq_wanted). */
		if (!READ_ONCE(ssk->zc_rx_sq_wanted))
			avail += READ_ONCE(ssk->rsa_avail);

		if (avail >= (u64)target)
			mask |= EPOLLIN | EPOLLRDNORM;
		if (!(shutdown & SEND_SHUTDOWN)) {
			if (sdp_writable(sk)) {
				mask |= EPOLLOUT | EPOLLWRNORM;
			} else {
				sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
				set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
				/*
				 * NOSPACE before the second look at the ring,
				 * as tcp_poll(): a completion that frees a slot
				 * after that look sees the bit and wakes us.
				 */
				smp_mb__after_atomic();
				if (sdp_writable(sk))
					mask |= EPOLLOUT | EPOLLWRNORM;
			}
		} else {
			mask |= EPOLLOUT | EPOLLWRNORM;
		}
		if (READ_ONCE(ssk->urg_state) == SDP_URG_VALID)
			mask |= EPOLLPRI;
	}
	/* sk_err after the state read above, paired as in tcp_poll(). */
	smp_rmb();
	if (READ_ONCE(sk->sk_err) ||
	    !skb_queue_empty_lockless(&sk->sk_error_queue))
		mask |= EPOLLERR;
	return mask;
}

/* ---- ioctl ------------------------------------------------------------------ */

static int sdp_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int answ;

	if (sdp_fallen_back(sk))
		return sdp_fb_ioctl(sock, cmd, arg);

	switch (cmd) {
	case SIOCINQ:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		lock_sock(sk);
		/* As tcp_inq(): up to the urgent mark while one is ahead. */
		if (!sock_flag(sk, SOCK_URGINLINE) &&
		    ssk->urg_state != SDP_URG_NONE &&
		    ssk->urg_seq >= ssk->copied_seq)
			answ = (int)(ssk->urg_seq - ssk->copied_seq);
		else
			answ = (int)min_t(u64, ssk->rcv_nxt - ssk->copied_seq +
					  ssk->rsa_avail, INT_MAX);
		release_sock(sk);
		break;
	case SIOCATMARK:
		lock_sock(sk);
		answ = ssk->urg_state != SDP_URG_NONE &&
		       ssk->urg_seq == ssk->copied_seq;
		release_sock(sk);
		break;
	case SIOCOUTQ:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		lock_sock(sk);
		answ = (int)min_t(u64, ssk->snd_queued - ssk->snd_acked, INT_MAX);
		release_sock(sk);
		break;
	default:
		return -ENOIOCTLCMD;
	}
	return put_user(answ, (int __user *)arg);
}

/* ---- options ---------------------------------------------------------------- */

void sdp_set_keepalive(struct sock *sk, int on)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (on && sdp_established(sk))
		sdp_reset_keepalive(sk);
	else if (!on && cancel_delayed_work(&ssk->keepalive_work))
		sock_put(sk); /* the reference the pending work held */
}

/*
 * SDP_TRANSPORT_POLICY: before connect() only (a socket connecting or
 * connected has chosen); TCP only is for connect(), not yet for listen().
 */
static int sdp_set_policy(struct socket *sock, sockptr_t optval,
			  unsigned int optlen)
{
	struct sock *sk = sock->sk;
	int val, err = 0;

	if (optlen < sizeof(int))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;
	if (val != SDP_POLICY_SDP && val != SDP_POLICY_FALLBACK &&
	    val != SDP_POLICY_TCP)
		return -EINVAL;
	lock_sock(sk);
	if (sdp_fallen_back(sk) || sock->state != SS_UNCONNECTED ||
	    sk->sk_state != TCP_CLOSE)
		err = -EISCONN;
	else
		WRITE_ONCE(sdp_sk(sk)->policy, val);
	release_sock(sk);
	return err;
}

/* SDP_TRANSPORT: what carries the connection now. */
static int sdp_transport(struct sock *sk)
{
	if (sdp_fallen_back(sk))
		return SDP_TRANSPORT_TCP;
	if (sdp_established(sk) || READ_ONCE(sdp_sk(sk)->established_once))
		return SDP_TRANSPORT_SDP;
	return SDP_TRANSPORT_NONE;
}

static int sdp_setsockopt(struct socket *sock, int level, int optname,
			  sockptr_t optval, unsigned int optlen)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int val, err = 0;

	if (level == SOL_SDP && optname == SDP_TRANSPORT_POLICY)
		return sdp_set_policy(sock, optval, optlen);
	if ((level == SOL_SOCKET && optname == SO_ZEROCOPY) ||
	    (level == SOL_SDP && optname == SDP_ZEROCOPY))
		return sdp_set_zerocopy(sock, optval, optlen);
	if (sdp_fallen_back(sk) && level != SOL_SDP)
		return sdp_fb_setsockopt(sock, level, optname, optval, optlen);
	/* SOCK_CUSTOM_SOCKOPT (sdp_sock_init_flags()): the socket level. */
	if (level == SOL_SOCKET)
		return sock_setsockopt(sock, level, optname, optval, optlen);
	if (level == SOL_IPV6 && optname == IPV6_V6ONLY) {
		if (optlen < sizeof(int))
			return -EINVAL;
		if (copy_from_sockptr(&val, optval, sizeof(val)))
			return -EFAULT;
		lock_sock(sk);
		if (ssk->bound || sk->sk_state != TCP_CLOSE)
			err = -EINVAL;
		else
			ssk->v6only = !!val;
		sk->sk_ipv6only = ssk->v6only;
		release_sock(sk);
		return err;
	}
	if (level != SOL_TCP && level != SOL_SDP)
		return -ENOPROTOOPT;
	if (level == SOL_SDP && optname != SDP_ZCOPY_THRESH)
		return -ENOPROTOOPT;
	if (optlen < sizeof(int))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;

	lock_sock(sk);
	switch (optname) {
	case SDP_ZCOPY_THRESH:
		if (val < 0)
			err = -EINVAL;
		else
			WRITE_ONCE(ssk->zcopy_thresh, val);
		break;
	case TCP_NODELAY:
		ssk->nodelay = !!val;
		if (val)
			sdp_push(sk, SDP_TXO_PUSH);
		break;
	case TCP_CORK:
		ssk->cork = !!val;
		if (!val)
			sdp_push(sk, SDP_TXO_PUSH);
		break;
	case TCP_KEEPIDLE:
		if (val < 1 || val > MAX_TCP_KEEPIDLE) {
			err = -EINVAL;
			break;
		}
		ssk->keepidle = val;
		if (sock_flag(sk, SOCK_KEEPOPEN))
			sdp_set_keepalive(sk, 1);
		break;
	case TCP_KEEPINTVL:
		if (val < 1 || val > MAX_TCP_KEEPINTVL)
			err = -EINVAL;
		else
			ssk->keepintvl = val;
		break;
	case TCP_KEEPCNT:
		if (val < 1 || val > MAX_TCP_KEEPCNT)
			err = -EINVAL;
		else
			ssk->keepcnt = val;
		break;
	default:
		err = -ENOPROTOOPT;
		break;
	}
	release_sock(sk);
	return err;
}

/* One getsockopt value of an SDP socket that is not over TCP. */
static int sdp_sockopt_value(struct sock *sk, int level, int optname, int *val)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (level == SOL_IPV6 && optname == IPV6_V6ONLY) {
		*val = ssk->v6only;
		return 0;
	}
	if (level == SOL_SDP) {
		switch (optname) {
		case SDP_TRANSPORT_POLICY:
			*val = READ_ONCE(ssk->policy);
			return 0;
		case SDP_TRANSPORT:
			*val = sdp_transport(sk);
			return 0;
		case SDP_FALLBACK_REASON:
			*val = READ_ONCE(ssk->fallback_reason);
			return 0;
		case SDP_ZCOPY_THRESH:
			*val = sdp_zc_thresh(ssk);
			return 0;
		case SDP_ZEROCOPY:
			*val = sock_flag(sk, SOCK_ZEROCOPY);
			return 0;
		default:
			return -ENOPROTOOPT;
		}
	}
	if (level != SOL_TCP)
		return -EOPNOTSUPP;
	switch (optname) {
	case SDP_ZCOPY_THRESH:	/* OFED's level for it */
		*val = sdp_zc_thresh(ssk);
		break;
	case TCP_NODELAY:
		*val = ssk->nodelay;
		break;
	case TCP_CORK:
		*val = ssk->cork;
		break;
	case TCP_KEEPIDLE:
		*val = ssk->keepidle;
		break;
	case TCP_KEEPINTVL:
		*val = ssk->keepintvl;
		break;
	case TCP_KEEPCNT:
		*val = ssk->keepcnt;
		break;
	case TCP_MAXSEG:
		*val = ssk->seg_max ? ssk->seg_max : 536;
		break;
	default:
		return -ENOPROTOOPT;
	}
	return 0;
}

static int sdp_getsockopt(struct socket *sock, int level, int optname,
			  char __user *optval, int __user *optlen)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int val, len, err;

	if (get_user(len, optlen))
		return -EFAULT;
	if (len < 0)
		return -EINVAL;
	if ((level == SOL_TCP || level == SOL_SDP) && optname == SDP_STATS) {
		struct sdp_sock_stats st;

		lock_sock(sk);
		st = ssk->stats;
		st.rx_ring_bytes = sdp_ring_bytes(&ssk->rx);
		st.tx_ring_bytes = sdp_ring_bytes(&ssk->tx);
		st.cq_entries = ssk->res_ready && ssk->cq ? ssk->cq->cqe : 0;
		release_sock(sk);
		len = min_t(unsigned int, len, sizeof(st));
		if (put_user(len, optlen) || copy_to_user(optval, &st, len))
			return -EFAULT;
		return 0;
	}
	if (sdp_fallen_back(sk) && level != SOL_SDP)
		return sdp_fb_getsockopt(sock, level, optname, optval, optlen);
	err = sdp_sockopt_value(sk, level, optname, &val);
	if (err)
		return err;
	len = min_t(unsigned int, len, sizeof(int));
	if (put_user(len, optlen))
		return -EFAULT;
	if (copy_to_user(optval, &val, len))
		return -EFAULT;
	return 0;
}

/*
 * Not const: .family is the `family` module parameter, set at registration
 * in the module's init; read-only from then on.
 */
static struct proto_ops sdp_proto_ops __ro_after_init = {
	.owner = THIS_MODULE,
	.release = sdp_release,
	.bind = sdp_bind,
	.connect = sdp_connect,
	.socketpair = sock_no_socketpair,
	.accept = sdp_accept,
	.getname = sdp_getname,
	.poll = sdp_poll,
	.ioctl = sdp_ioctl,
	.listen = sdp_listen,
	.shutdown = sdp_shutdown,
	.setsockopt = sdp_setsockopt,
	.getsockopt = sdp_getsockopt,
	.sendmsg = sdp_sendmsg,
	.recvmsg = sdp_recvmsg,
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

	sk = sdp_sk_alloc(net, NULL, kern);
	if (!sk)
		return -ENOBUFS;

	sock->state = SS_UNCONNECTED;
	sock->ops = &sdp_proto_ops;
	sdp_sk_init_data(sock, sk);
	/* Counted per namespace in the "sockets" column of /proc/net/protocols. */
	sock_prot_inuse_add(net, &sdp_proto, 1);
	return 0;
}

/*
 * A connection a listener accepted: a socket without a struct socket yet.
 * Cloned from the listener with sk_clone_lock() as TCP's children are, so
 * it has the listener's LSM label (security_sk_clone()), cgroup (net_cls,
 * net_prio, cgroup-BPF), socket filter and options although it is created
 * in the CM's worker; and the listener's memory cgroup, which its rings
 * are charged to.
 */
struct sock *sdp_sk_clone(struct sock *parent)
{
	struct sdp_sock *pssk = sdp_sk(parent), *ssk;
	bool inet = parent->sk_family == AF_INET ||
		    parent->sk_family == AF_INET6;
	struct sock *sk;

	/*
	 * sk_clone_lock() gives the clone its family's lock class and takes
	 * its spinlock.  For AF_INET/AF_INET6 (IPPROTO_SDP) that is TCP's
	 * class, which TCP takes in softirq: taken here with softirqs on, it
	 * would be an inconsistent lock state.  So with softirqs off, as
	 * TCP clones, and atomic; SDP's own class comes right after.
	 */
	if (inet)
		local_bh_disable();
	sk = sk_clone_lock(parent, inet ? GFP_ATOMIC : GFP_KERNEL);
	if (sk) {
		/* Two references for TCP's hash table and its caller; a
		 * child has one owner (the listener's queue, then accept()).
		 */
		__sock_put(sk);
		__acquire(&sk->sk_lock.slock); /* sk_clone_lock() took it */
		bh_unlock_sock(sk);
	}
	if (inet)
		local_bh_enable();
	if (!sk)
		return NULL;
	sdp_sk_set_lock_class(sk);
	ssk = sdp_sk(sk);
	sdp_sk_init_priv(sk);
	/* The copy points at the listener's ipv6_pinfo; the pointers in it
	 * are NULL (SDP sets no IPv6 socket option that allocates).
	 */
	sdp_sk_set_pinet6(sk);
	sk->sk_state = TCP_CLOSE;
	sk->sk_ack_backlog = 0;
	sk->sk_flags &= ~BIT(SOCK_DONE);
#ifdef CONFIG_MEMCG
	if (!sk->sk_memcg && parent->sk_memcg) {
		css_get(&parent->sk_memcg->css);
		sk->sk_memcg = parent->sk_memcg;
	}
#endif
	ssk->nodelay = pssk->nodelay;
	ssk->cork = pssk->cork;
	ssk->keepidle = pssk->keepidle;
	ssk->keepintvl = pssk->keepintvl;
	ssk->keepcnt = pssk->keepcnt;
	ssk->zcopy_thresh = pssk->zcopy_thresh;
	ssk->v6only = pssk->v6only;
	ssk->local.sa.sa_family = pssk->local.sa.sa_family;
	sdp_sock_list_add(sk);
	return sk;
}

static struct net_proto_family sdp_family_ops = {
	.create = sdp_create,
	.owner = THIS_MODULE,
};

/* IPPROTO_SDP: the same operations under AF_INET's and AF_INET6's name. */
static struct proto_ops sdp_inet_ops __ro_after_init;
static struct inet_protosw sdp_inet_protosw = {
	.type = SOCK_STREAM,
	.prot = &sdp_proto,
	.ops = &sdp_inet_ops,
};

#if IS_ENABLED(CONFIG_IPV6)
static struct proto_ops sdp_inet6_ops __ro_after_init;
static struct inet_protosw sdp_inet6_protosw = {
	.type = SOCK_STREAM,
	.prot = &sdp6_proto,
	.ops = &sdp_inet6_ops,
};
#endif

/*
 * inet_register_protosw() cannot fail: it ignores (with a message) a
 * number a permanent protocol holds, and shadows one a module registered.
 * sdp_main.c refuses the numbers the kernel uses; whether socket() now
 * makes an SDP socket is checked here by making one.
 */
static int sdp_inet_check(int family, int ipproto, struct proto *prot)
{
	struct socket *sock;
	bool ours;
	int err;

	err = sock_create_kern(&init_net, family, SOCK_STREAM, ipproto, &sock);
	if (err)
		return err;
	ours = sock->sk->sk_prot_creator == prot;
	sock_release(sock);
	return ours ? 0 : -EEXIST;
}

static int sdp_inet_register(int ipproto)
{
	int err;

	sdp_inet_ops = sdp_proto_ops;
	sdp_inet_ops.family = PF_INET;
	sdp_inet_protosw.protocol = ipproto;
#if IS_ENABLED(CONFIG_IPV6)
	sdp_inet6_ops = sdp_proto_ops;
	sdp_inet6_ops.family = PF_INET6;
	sdp_inet6_protosw.protocol = ipproto;
	/* First, as it says -EPERM for a permanent protocol's number. */
	err = inet6_register_protosw(&sdp_inet6_protosw);
	if (err)
		return err == -EPERM ? -EEXIST : err;
#endif
	inet_register_protosw(&sdp_inet_protosw);
	err = sdp_inet_check(PF_INET, ipproto, &sdp_proto);
	if (err == -EEXIST) {
		/* Not added: entries go after the permanent ones only. */
#if IS_ENABLED(CONFIG_IPV6)
		inet6_unregister_protosw(&sdp_inet6_protosw);
#endif
		return err;
	}
#if IS_ENABLED(CONFIG_IPV6)
	if (!err)
		err = sdp_inet_check(PF_INET6, ipproto, &sdp6_proto);
#endif
	if (err) {
		inet_unregister_protosw(&sdp_inet_protosw);
#if IS_ENABLED(CONFIG_IPV6)
		inet6_unregister_protosw(&sdp_inet6_protosw);
#endif
	}
	return err;
}

static void sdp_inet_unregister(void)
{
	inet_unregister_protosw(&sdp_inet_protosw);
#if IS_ENABLED(CONFIG_IPV6)
	inet6_unregister_protosw(&sdp_inet6_protosw);
#endif
}

/*
 * The family (-EEXIST: taken), then IPPROTO_SDP unless ipproto is 0
 * (-EADDRINUSE: the number is taken).
 */
int sdp_socket_register(int family, int ipproto)
{
	int err;

#if IS_ENABLED(CONFIG_IPV6)
	BUILD_BUG_ON(offsetof(struct sdp6_sock, inet6) +
		     sizeof(struct ipv6_pinfo) != sizeof(struct sdp6_sock));
#endif
	err = proto_register(&sdp_proto, 1);
	if (err)
		return err;
#if IS_ENABLED(CONFIG_IPV6)
	err = proto_register(&sdp6_proto, 1);
	if (err)
		goto out_proto;
#endif
	sdp_proto_ops.family = family;
	sdp_family_ops.family = family;
	err = sock_register(&sdp_family_ops);
	if (err)
		goto out_proto6;
	if (ipproto) {
		err = sdp_inet_register(ipproto);
		if (err) {
			sock_unregister(family);
			if (err == -EEXIST)
				err = -EADDRINUSE;
			goto out_proto6;
		}
	}
	return 0;

out_proto6:
#if IS_ENABLED(CONFIG_IPV6)
	proto_unregister(&sdp6_proto);
out_proto:
#endif
	proto_unregister(&sdp_proto);
	return err;
}

void sdp_socket_unregister(void)
{
	if (sdp_ipproto)
		sdp_inet_unregister();
	sock_unregister(sdp_family_ops.family);
#if IS_ENABLED(CONFIG_IPV6)
	proto_unregister(&sdp6_proto);
#endif
	proto_unregister(&sdp_proto);
}
