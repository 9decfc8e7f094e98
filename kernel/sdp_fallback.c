// SPDX-License-Identifier: GPL-2.0
/*
 * Fallback to TCP on the same socket (Documentation/fallback.md).
 *
 * A socket whose policy allows TCP owns a TCP socket from connect() on,
 * created in the caller's context (its credentials, namespace and memory
 * cgroup).  When the core says that the SDP attempt's end calls for TCP
 * (sdp_core_fallback_reason()), the SDP attempt is dropped and the TCP
 * socket connects to the same destination with the options the
 * application set; from then on every proto_op of the SDP socket forwards
 * to it, and the socket's struct file never changes.
 *
 * Waiters never move.  They sleep on the SDP socket's wait queue (a
 * blocked connect(), poll(), every epoll registration, level- or
 * edge-triggered); the TCP socket's callbacks run TCP's own and then wake
 * the SDP queue with the same poll mask, and poll() of the SDP socket
 * returns the TCP socket's mask.
 *
 * Locking: ssk->tcp, the policy and the reason change under the SDP
 * socket lock; use_tcp is set once, with release, after everything the
 * forwarding needs is in place, and is never cleared; the forwarded calls
 * read it with acquire and then use tcp without the SDP lock (TCP has its
 * own).  The callbacks find the SDP socket through the TCP socket's
 * sk_user_data, under its sk_callback_lock; sdp_fb_release() restores
 * TCP's callbacks under that lock before the SDP socket can go away.
 */
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/tcp.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "sdp.h"

static_assert(SDP_POLICY_SDP == SDP_CORE_POLICY_SDP);
static_assert(SDP_POLICY_FALLBACK == SDP_CORE_POLICY_FALLBACK);
static_assert(SDP_POLICY_TCP == SDP_CORE_POLICY_TCP);
static_assert(SDP_FB_POLICY == SDP_CORE_FB_POLICY);
static_assert(SDP_FB_NO_ROUTE == SDP_CORE_FB_NO_ROUTE);
static_assert(SDP_FB_REJECTED == SDP_CORE_FB_REJECTED);
static_assert(SDP_FB_BUSY == SDP_CORE_FB_BUSY);
static_assert(SDP_FB_TIMEOUT == SDP_CORE_FB_TIMEOUT);
static_assert(SDP_FB_RESOURCES == SDP_CORE_FB_RESOURCES);
static_assert(SDP_FB_PEER_TCP == SDP_CORE_FB_PEER_TCP);

/* ---- the TCP socket ------------------------------------------------------- */

/*
 * connect() with a policy that may need TCP: the TCP socket, in the
 * caller's context.  Socket lock held.
 */
int sdp_fb_prepare(struct sock *sk, int family)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *tcp;
	int err;

	sock_owned_by_me(sk);

	if (ssk->tcp && ssk->tcp->sk->sk_family == family)
		return 0;
	if (ssk->tcp) {
		/* An earlier attempt for the other family: never used. */
		sock_release(ssk->tcp);
		ssk->tcp = NULL;
	}
	/* Not a kernel socket: it holds the namespace as the user's does. */
	err = __sock_create(sock_net(sk), family, SOCK_STREAM, IPPROTO_TCP,
			    &tcp, 0);
	if (err)
		return err;
	ssk->tcp = tcp;
	return 0;
}

static void sdp_fb_copy_sol(struct sock *sk, struct sock *tsk);

/*
 * bind() with a policy that may need TCP: TCP's bind first, so that the
 * port is reserved in both spaces (a later fallback or TCP listen finds it
 * free) and bind() fails exactly as TCP's would.  *addr then carries TCP's
 * port, an ephemeral one if the caller gave 0, for SDP's bind.  Socket
 * lock held.
 */
int sdp_fb_bind_first(struct sock *sk, union sdp_addr *addr)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	union sdp_addr got;
	struct socket *tcp;
	int len, err;

	sock_owned_by_me(sk);

	err = sdp_fb_prepare(sk, addr->sa.sa_family);
	if (err)
		return err;
	tcp = ssk->tcp;
	sdp_fb_copy_sol(sk, tcp->sk);
	if (addr->sa.sa_family == AF_INET6 && ssk->v6only)
		tcp->sk->sk_ipv6only = 1;
	len = addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					    sizeof(struct sockaddr_in);
	err = kernel_bind(tcp, (struct sockaddr *)addr, len);
	if (err)
		return err;
	err = kernel_getsockname(tcp, (struct sockaddr *)&got);
	if (err < 0)
		return err;
	if (addr->sa.sa_family == AF_INET6)
		((struct sockaddr_in6 *)addr)->sin6_port =
			((struct sockaddr_in6 *)&got)->sin6_port;
	else
		((struct sockaddr_in *)addr)->sin_port =
			((struct sockaddr_in *)&got)->sin_port;
	return 0;
}

/* SDP did not bind where TCP did: TCP's reservation goes too. */
void sdp_fb_unbind(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (ssk->tcp) {
		sock_release(ssk->tcp);
		ssk->tcp = NULL;
	}
}

/* The socket-level options (SOL_SOCKET) of the SDP socket, onto TCP's. */
static void sdp_fb_copy_sol(struct sock *sk, struct sock *tsk)
{
	lock_sock(tsk);
	if (sk->sk_userlocks & SOCK_SNDBUF_LOCK)
		WRITE_ONCE(tsk->sk_sndbuf, READ_ONCE(sk->sk_sndbuf));
	if (sk->sk_userlocks & SOCK_RCVBUF_LOCK)
		WRITE_ONCE(tsk->sk_rcvbuf, READ_ONCE(sk->sk_rcvbuf));
	tsk->sk_userlocks |= sk->sk_userlocks &
			     (SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK);
	WRITE_ONCE(tsk->sk_rcvtimeo, READ_ONCE(sk->sk_rcvtimeo));
	WRITE_ONCE(tsk->sk_sndtimeo, READ_ONCE(sk->sk_sndtimeo));
	WRITE_ONCE(tsk->sk_rcvlowat, READ_ONCE(sk->sk_rcvlowat));
	WRITE_ONCE(tsk->sk_mark, READ_ONCE(sk->sk_mark));
	WRITE_ONCE(tsk->sk_priority, READ_ONCE(sk->sk_priority));
	tsk->sk_bound_dev_if = READ_ONCE(sk->sk_bound_dev_if);
	if (sock_flag(sk, SOCK_LINGER)) {
		sock_set_flag(tsk, SOCK_LINGER);
		WRITE_ONCE(tsk->sk_lingertime, READ_ONCE(sk->sk_lingertime));
	}
	if (sock_flag(sk, SOCK_URGINLINE))
		sock_set_flag(tsk, SOCK_URGINLINE);
	if (sk->sk_reuse)
		tsk->sk_reuse = SK_CAN_REUSE;
	/* SO_ZEROCOPY: TCP then queues the MSG_ZEROCOPY notifications. */
	sock_valbool_flag(tsk, SOCK_ZEROCOPY, sock_flag(sk, SOCK_ZEROCOPY));
	release_sock(tsk);
	/* Takes the TCP socket's lock itself. */
	if (sock_flag(sk, SOCK_KEEPOPEN) && !sock_flag(tsk, SOCK_KEEPOPEN))
		sock_set_keepalive(tsk);
}

/*
 * Kernels without SOCK_CUSTOM_SOCKOPT (6.1) give SOL_SOCKET options to the
 * SDP socket even once it forwards everything else: TCP gets them before
 * each forwarded call that uses them (timeouts, linger, keepalive).
 */
static void sdp_fb_follow_sol(struct sock *sk, struct socket *tcp)
{
#ifndef SOCK_CUSTOM_SOCKOPT
	sdp_fb_copy_sol(sk, tcp->sk);
#endif
}

/* What the application set on the SDP socket, onto the TCP socket. */
static void sdp_fb_copy_options(struct sock *sk, struct sock *tsk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sdp_fb_copy_sol(sk, tsk);
	/* These take the TCP socket's lock themselves. */
	tcp_sock_set_keepidle(tsk, ssk->keepidle);
	tcp_sock_set_keepintvl(tsk, ssk->keepintvl);
	tcp_sock_set_keepcnt(tsk, ssk->keepcnt);
	if (ssk->nodelay)
		tcp_sock_set_nodelay(tsk);
	if (ssk->cork)
		tcp_sock_set_cork(tsk, true);
}

/* ---- wakeups: TCP's callbacks wake the SDP socket's waiters --------------- */

struct sdp_fb_mark {
	wait_queue_entry_t entry;
	bool woken;
	void *key;
};

static int sdp_fb_mark_woken(wait_queue_entry_t *entry, unsigned int mode,
			     int sync, void *key)
{
	struct sdp_fb_mark *mark = container_of(entry, struct sdp_fb_mark,
						entry);

	mark->woken = true;
	mark->key = key;
	return 0;
}

static void sdp_fb_wake(struct sock *sk, void *key)
{
	__poll_t mask = key ? key_to_poll(key) : 0;
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq)) {
		if (key)
			wake_up_interruptible_poll(&wq->wait, mask);
		else
			wake_up_interruptible_all(&wq->wait);
	}
	rcu_read_unlock();
	if (!key || (mask & (EPOLLIN | EPOLLRDNORM)))
		sk_wake_async(sk, SOCK_WAKE_WAITD, POLL_IN);
	if (!key || (mask & (EPOLLOUT | EPOLLWRNORM)))
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
}

/*
 * TCP signals urgent data to its socket's file owner (sk_send_sigurg()),
 * and the TCP socket has no file: the SDP socket's owner gets SIGURG, once
 * per urgent pointer as from TCP.  From TCP's callbacks, tsk bh-locked.
 */
static void sdp_fb_sigurg(struct sock *sk, struct sock *tsk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	const struct tcp_sock *tp = tcp_sk(tsk);
	u32 seq = READ_ONCE(tp->urg_seq);

	if (tsk->sk_state == TCP_LISTEN || !READ_ONCE(tp->urg_data) ||
	    (ssk->fb_urg_sent && ssk->fb_urg_seq == seq))
		return;
	ssk->fb_urg_seq = seq;
	ssk->fb_urg_sent = true;
	sk_send_sigurg(sk);
}

/*
 * Run TCP's callback with a marker on TCP's wait queue, and wake the SDP
 * socket's queue with what TCP woke its own with.  The TCP socket's error
 * shows on the SDP socket too (SO_ERROR reads the SDP socket's).
 * tsk's sk_callback_lock held for reading.
 */
static void sdp_fb_forward(struct sock *sk, struct sock *tsk,
			   void (*callback)(struct sock *tsk))
{
	struct sdp_fb_mark mark = { .woken = false };
	struct socket_wq *wq;
	int err;

	/*
	 * Until the switch is complete, the SDP socket's waiters would see
	 * the SDP side: sdp_fb_use() takes TCP's error and wakes them once
	 * it is.  The barrier orders TCP's sk_err before the test, against
	 * sdp_fb_use()'s store of use_tcp before its read of sk_err.
	 */
	smp_mb();
	if (!sdp_fallen_back(sk) && !READ_ONCE(sdp_sk(sk)->tcp_listening)) {
		callback(tsk);
		return;
	}
	init_waitqueue_func_entry(&mark.entry, sdp_fb_mark_woken);
	rcu_read_lock();
	wq = rcu_dereference(tsk->sk_wq);
	if (!wq) {
		rcu_read_unlock();
		callback(tsk);
		return;
	}
	add_wait_queue(&wq->wait, &mark.entry);
	callback(tsk);
	remove_wait_queue(&wq->wait, &mark.entry);
	rcu_read_unlock();
	err = READ_ONCE(tsk->sk_err);
	if (err) {
		WRITE_ONCE(sdp_sk(sk)->fb_err_seen, err);
		WRITE_ONCE(sk->sk_err, err);
	}
	sdp_fb_sigurg(sk, tsk);
	if (mark.woken)
		sdp_fb_wake(sk, mark.key);
}

static struct sock *sdp_fb_owner(struct sock *tsk)
{
	return (struct sock *)((uintptr_t)tsk->sk_user_data &
			       ~SK_USER_DATA_NOCOPY);
}

#define SDP_FB_CALLBACK(name, saved)					\
static void sdp_fb_##name(struct sock *tsk)				\
{									\
	struct sock *sk;						\
									\
	read_lock_bh(&tsk->sk_callback_lock);				\
	sk = sdp_fb_owner(tsk);						\
	if (sk)								\
		sdp_fb_forward(sk, tsk, sdp_sk(sk)->saved);		\
	read_unlock_bh(&tsk->sk_callback_lock);				\
}

SDP_FB_CALLBACK(state_change, tcp_state_change)
SDP_FB_CALLBACK(data_ready, tcp_data_ready)
SDP_FB_CALLBACK(write_space, tcp_write_space)
SDP_FB_CALLBACK(error_report, tcp_error_report)

static void sdp_fb_install(struct sock *sk, struct sock *tsk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	write_lock_bh(&tsk->sk_callback_lock);
	tsk->sk_user_data = (void *)((uintptr_t)sk | SK_USER_DATA_NOCOPY);
	ssk->tcp_state_change = tsk->sk_state_change;
	ssk->tcp_data_ready = tsk->sk_data_ready;
	ssk->tcp_write_space = tsk->sk_write_space;
	ssk->tcp_error_report = tsk->sk_error_report;
	tsk->sk_state_change = sdp_fb_state_change;
	tsk->sk_data_ready = sdp_fb_data_ready;
	tsk->sk_write_space = sdp_fb_write_space;
	tsk->sk_error_report = sdp_fb_error_report;
	write_unlock_bh(&tsk->sk_callback_lock);
}

/*
 * TCP's own callbacks, saved in ssk when the forwarding was installed,
 * back on tsk, and no owner.  tsk's sk_callback_lock held for writing.
 */
static void sdp_fb_tcp_callbacks(const struct sdp_sock *ssk, struct sock *tsk)
{
	lockdep_assert_held_write(&tsk->sk_callback_lock);

	tsk->sk_state_change = ssk->tcp_state_change;
	tsk->sk_data_ready = ssk->tcp_data_ready;
	tsk->sk_write_space = ssk->tcp_write_space;
	tsk->sk_error_report = ssk->tcp_error_report;
	tsk->sk_user_data = NULL;
}

static void sdp_fb_restore(struct sock *sk, struct sock *tsk)
{
	write_lock_bh(&tsk->sk_callback_lock);
	if (sdp_fb_owner(tsk) == sk)
		sdp_fb_tcp_callbacks(sdp_sk(sk), tsk);
	write_unlock_bh(&tsk->sk_callback_lock);
}

/* ---- the switch ------------------------------------------------------------ */

static const u8 sdp_fb_counter[] = {
	[SDP_FB_POLICY] = SDP_CNT_FALLBACK_POLICY,
	[SDP_FB_NO_ROUTE] = SDP_CNT_FALLBACK_NO_ROUTE,
	[SDP_FB_REJECTED] = SDP_CNT_FALLBACK_REJECTED,
	[SDP_FB_BUSY] = SDP_CNT_FALLBACK_BUSY,
	[SDP_FB_TIMEOUT] = SDP_CNT_FALLBACK_TIMEOUT,
	[SDP_FB_RESOURCES] = SDP_CNT_FALLBACK_RESOURCES,
	[SDP_FB_PEER_TCP] = SDP_CNT_FALLBACK_PEER_TCP,
};

/*
 * From now on the socket is the TCP socket's: the SDP side is closed
 * (without an error), waiters are woken and find TCP.  Socket lock held.
 */
static void sdp_fb_use(struct sock *sk, int reason)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sock *tsk = ssk->tcp->sk;

	sock_owned_by_me(sk);

	sdp_fb_disarm(sk);
	if (sdp_fb_owner(tsk) != sk)
		sdp_fb_install(sk, tsk);
	WRITE_ONCE(ssk->fallback_reason, reason);
	SDP_INC(sk, sdp_fb_counter[reason]);
	sdp_close_event(sk, SDP_CLOSE_RESET);
	/* Publishes tcp, its callbacks and the state to the lockless
	 * readers of sdp_fallen_back().
	 */
	smp_store_release(&ssk->use_tcp, true);
	sdp_sock_list_set_tcp(sk, tsk);
	/* An error TCP had before its callbacks forwarded (see there). */
	smp_mb();
	if (READ_ONCE(tsk->sk_err)) {
		WRITE_ONCE(ssk->fb_err_seen, READ_ONCE(tsk->sk_err));
		WRITE_ONCE(sk->sk_err, READ_ONCE(tsk->sk_err));
	}
	sdp_wake_pair(sk);
}

/* Bind the TCP socket where the application bound the SDP one. */
static int sdp_fb_bind(struct sock *sk, struct socket *tcp)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int len;

	/* Not bound, or bound already by bind() (sdp_fb_bind_first()). */
	if (!ssk->bound || ssk->local.sa.sa_family != tcp->sk->sk_family ||
	    inet_sk(tcp->sk)->inet_num)
		return 0;
	len = ssk->local.sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						 sizeof(struct sockaddr_in);
	return kernel_bind(tcp, (struct sockaddr *)&ssk->local, len);
}

/*
 * connect() itself: the policy says TCP from the start, or SDP cannot even
 * start here.  The caller then forwards its connect() (sdp_fb_connect()),
 * or reports the error of the bind.  Socket lock held.
 */
static bool sdp_fb_now(struct sock *sk, int reason)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	err = sdp_fb_bind(sk, ssk->tcp);
	if (err) {
		sdp_set_error(sk, -err);
		return true;
	}
	sdp_fb_copy_options(sk, ssk->tcp->sk);
	sdp_fb_use(sk, reason);
	return true;
}

/* Whether an SDP attempt that ended so would go on over TCP.  Socket lock. */
bool sdp_fb_wanted(struct sock *sk, int end)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	return ssk->tcp && !sdp_fallen_back(sk) && !sock_flag(sk, SOCK_DEAD) &&
	       sk->sk_socket &&
	       sdp_core_fallback_reason(ssk->policy, end) != SDP_CORE_FB_NONE;
}

/*
 * The SDP attempt ended so (SDP_CORE_CE_*): go on over TCP if the core
 * says so.  From connect() (sdp_connect(): nothing was sent yet, the
 * caller forwards its own connect), from the CM's events and from the
 * fallback timer (the TCP connect starts here, non-blocking, and the
 * connect() waiting for SDP, or a later one, waits for TCP's).  Returns
 * whether the socket went over TCP, or reported TCP's own error for it;
 * false: the caller reports the SDP failure.  Socket lock held.
 */
bool sdp_fb_try(struct sock *sk, int end)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *tcp = ssk->tcp;
	int reason, len, err;

	sock_owned_by_me(sk);

	if (!sdp_fb_wanted(sk, end))
		return false;
	reason = sdp_core_fallback_reason(ssk->policy, end);
	/* From connect(), before or instead of any SDP attempt. */
	if (sk->sk_state == TCP_CLOSE)
		return sdp_fb_now(sk, reason);
	err = sdp_fb_bind(sk, tcp);
	if (!err) {
		sdp_fb_copy_options(sk, tcp->sk);
		len = ssk->remote.sa.sa_family == AF_INET6 ?
			      sizeof(struct sockaddr_in6) :
			      sizeof(struct sockaddr_in);
		/*
		 * The callbacks first: over loopback the answer (an RST)
		 * can come before kernel_connect() returns.
		 */
		sdp_fb_install(sk, tcp->sk);
		err = kernel_connect(tcp, (struct sockaddr *)&ssk->remote, len,
				     O_NONBLOCK);
		if (err == -EINPROGRESS)
			err = 0;
		if (err)
			sdp_fb_restore(sk, tcp->sk);
	}
	if (err) {
		/* What TCP said at once is the connect's result. */
		sdp_set_error(sk, -err);
		return true;
	}
	sdp_fb_use(sk, reason);
	return true;
}

/* ---- listeners: plain TCP clients too -------------------------------------- */

/*
 * listen() with SDP_POLICY_FALLBACK: the listener's address and port in
 * TCP's space too (libsdp's "use both server", SMC's listening clcsock),
 * so a port busy for TCP fails the listen() as it would over TCP.  Again
 * on a listening socket: the new backlog.  Socket lock held; ssk->local
 * is the SDP listener's address.
 */
int sdp_fb_listen(struct sock *sk, int backlog)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *tcp;
	int family, len, err;

	sock_owned_by_me(sk);

	if (ssk->policy == SDP_POLICY_SDP)
		return 0;
	if (ssk->tcp_listening) {
		err = kernel_listen(ssk->tcp, backlog);
		sdp_fb_share_backlog(sk);
		return err;
	}
	/* Unbound (TCP only): TCP's listen() picks the port. */
	family = ssk->local.sa.sa_family;
	if (family == AF_UNSPEC)
		family = sk->sk_family == AF_INET6 ? AF_INET6 : AF_INET;
	err = sdp_fb_prepare(sk, family);
	if (err)
		return err;
	tcp = ssk->tcp;
	sdp_fb_copy_sol(sk, tcp->sk);
	if (ssk->local.sa.sa_family == AF_INET6 && ssk->v6only)
		tcp->sk->sk_ipv6only = 1;
	len = ssk->local.sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						 sizeof(struct sockaddr_in);
	/* Bound by bind() already, or here to the SDP listener's address. */
	err = inet_sk(tcp->sk)->inet_num || ssk->local.sa.sa_family == AF_UNSPEC ?
		0 : kernel_bind(tcp, (struct sockaddr *)&ssk->local, len);
	if (!err) {
		sdp_fb_install(sk, tcp->sk);
		err = kernel_listen(tcp, backlog);
	}
	if (err)
		sdp_fb_unlisten(sk);
	return err;
}

/*
 * Both sides listen: from now on TCP's clients wake the listener's waiters
 * and accept() takes them; the TCP socket stays until the listener goes.
 * Socket lock held.
 */
void sdp_fb_listening(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (ssk->tcp) {
		WRITE_ONCE(ssk->tcp_listening, true);
		sdp_fb_share_backlog(sk);
	}
}

/* The SDP side could not listen after all (never listening).  Socket lock
 * held.
 */
void sdp_fb_unlisten(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *tcp = ssk->tcp;

	sock_owned_by_me(sk);

	if (!tcp)
		return;
	sdp_fb_restore(sk, tcp->sk);
	ssk->tcp = NULL;
	sock_release(tcp);
}

/*
 * A listener that takes both has one backlog, as a TCP listener: at most
 * backlog + 1 connections wait for accept() in both queues together.
 * TCP's listener may queue what SDP's queue and handshakes leave of the
 * backlog, and its own check always admits one more (the + 1); so SDP's
 * admission (sdp_listener_admit()) counts what TCP holds and that one.
 * With backlog 0 SDP keeps its one (SDP-only clients would find no room):
 * two may then wait, one of each.  Listener's socket lock held.
 */
u32 sdp_fb_backlog(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!READ_ONCE(ssk->tcp_listening) || !ssk->tcp)
		return 0;
	return READ_ONCE(ssk->tcp->sk->sk_ack_backlog) +
	       (READ_ONCE(sk->sk_max_ack_backlog) ? 1 : 0);
}

void sdp_fb_share_backlog(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 used, max;

	sock_owned_by_me(sk);

	if (!READ_ONCE(ssk->tcp_listening) || !ssk->tcp)
		return;
	used = READ_ONCE(sk->sk_ack_backlog) + ssk->pending;
	max = READ_ONCE(sk->sk_max_ack_backlog);
	WRITE_ONCE(ssk->tcp->sk->sk_max_ack_backlog, used < max ? max - used : 0);
}

/* A TCP client waits in the listener's TCP accept queue.  No lock. */
bool sdp_fb_accept_ready(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	/* tcp stays while tcp_listening: released with the listener. */
	return READ_ONCE(ssk->tcp_listening) &&
	       !reqsk_queue_empty(&inet_csk(ssk->tcp->sk)->icsk_accept_queue);
}

/*
 * accept(): a TCP client becomes a new SDP socket that went over TCP at
 * once, on newsock.  -EAGAIN when none waits (or the listener takes no
 * TCP clients).  The listener's socket lock held.
 */
int sdp_fb_accept(struct sock *sk, struct socket *newsock, bool kern)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *newtcp;
	struct sock *child;
	int err;

	sock_owned_by_me(sk);

	if (!ssk->tcp_listening)
		return -EAGAIN;
	err = kernel_accept(ssk->tcp, &newtcp, O_NONBLOCK);
	if (err)
		return err;
	/*
	 * The child is a clone of the TCP listener: it came with the
	 * listener's forwarding callbacks (and no sk_user_data, NOCOPY), so
	 * until now its events woke nobody.  TCP's own come back first; the
	 * child's socket then installs its forwarding over them.
	 */
	write_lock_bh(&newtcp->sk->sk_callback_lock);
	sdp_fb_tcp_callbacks(ssk, newtcp->sk);
	write_unlock_bh(&newtcp->sk->sk_callback_lock);
	child = sdp_sk_alloc(sock_net(sk), sk, kern);
	if (!child) {
		/* As TCP's accept() when it cannot allocate: the client's
		 * connection goes (reset), the caller sees the error.
		 */
		sock_release(newtcp);
		return -ENOMEM;
	}
	sdp_sk_init_data(newsock, child);
	sock_prot_inuse_add(sock_net(child), child->sk_prot, 1);
	/* Nobody else can reach the new socket yet: its lock nests under
	 * the listener's (see the contract in sdp.h).
	 */
	lock_sock_nested(child, SINGLE_DEPTH_NESTING);
	sdp_sk(child)->policy = ssk->policy;
	sdp_sk(child)->tcp = newtcp;
	/* A TCP-only listener's clients are TCP's by policy. */
	sdp_fb_use(child, ssk->policy == SDP_POLICY_TCP ? SDP_FB_POLICY :
							  SDP_FB_PEER_TCP);
	release_sock(child);
	newsock->state = SS_CONNECTED;
	return 0;
}

/* ---- the fallback timer: no answer from the peer's CM in time ------------- */

void sdp_fb_arm(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int ms = READ_ONCE(sysctl_sdp_fallback_ms);

	sock_owned_by_me(sk);

	if (ssk->policy != SDP_POLICY_FALLBACK || !ssk->tcp || !ms ||
	    ssk->fallback_armed)
		return;
	ssk->fallback_armed = true;
	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &ssk->fallback_work,
				msecs_to_jiffies(ms)))
		sock_put(sk);
}

void sdp_fb_disarm(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!ssk->fallback_armed)
		return;
	ssk->fallback_armed = false;
	if (cancel_delayed_work(&ssk->fallback_work))
		sock_put(sk); /* the reference the pending work held */
}

void sdp_fb_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, fallback_work);
	struct sock *sk = &ssk->sk;
	bool abandon = false;

	/* The order of sdp_cm_work(): the CM attempt is torn down here. */
	mutex_lock(&ssk->cm_ev_mutex);
	lock_sock(sk);
	if (ssk->fallback_armed) {
		ssk->fallback_armed = false;
		/* An answer that came in time is handled, late or not. */
		if (sk->sk_state == TCP_SYN_SENT && !sdp_cm_answer_queued(sk))
			abandon = sdp_fb_try(sk, SDP_CORE_CE_NO_ANSWER);
	}
	release_sock(sk);
	if (abandon)
		sdp_cm_abandon(sk);
	mutex_unlock(&ssk->cm_ev_mutex);
	sock_put(sk);
}

/* close(): the TCP socket goes with the SDP socket. */
void sdp_fb_release(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket *tcp;

	lock_sock(sk);
	sdp_fb_disarm(sk);
	tcp = ssk->tcp;
	ssk->tcp = NULL;
	WRITE_ONCE(ssk->tcp_listening, false);
	release_sock(sk);
	if (!tcp)
		return;
	sdp_sock_list_set_tcp(sk, NULL); /* before tcp goes */
	sdp_fb_restore(sk, tcp->sk);
	if (sdp_fallen_back(sk))
		sdp_fb_follow_sol(sk, tcp); /* SO_LINGER */
	sock_release(tcp);
}

/* ---- forwarded calls ------------------------------------------------------- */

static struct socket *sdp_fb_sock(struct socket *sock)
{
	return sdp_sk(sock->sk)->tcp;
}

/*
 * The error is TCP's; the SDP socket's sk_err is a copy because SO_ERROR
 * reads it there.  Before a forwarded call: an error SO_ERROR has taken
 * from the copy is gone from TCP too, as it would be from a TCP socket
 * (no later POLLERR, no error from recv()).  Lockless: poll() calls it.
 */
static void sdp_fb_pull_err(struct socket *sock)
{
	struct sdp_sock *ssk = sdp_sk(sock->sk);
	int seen = READ_ONCE(ssk->fb_err_seen);

	if (seen && !READ_ONCE(sock->sk->sk_err)) {
		cmpxchg(&ssk->tcp->sk->sk_err, seen, 0);
		WRITE_ONCE(ssk->fb_err_seen, 0);
	}
}

/* After a forwarded call that may take TCP's error: the copy follows. */
static void sdp_fb_sync_err(struct socket *sock)
{
	int err = READ_ONCE(sdp_fb_sock(sock)->sk->sk_err);

	WRITE_ONCE(sdp_sk(sock->sk)->fb_err_seen, err);
	WRITE_ONCE(sock->sk->sk_err, err);
}

int sdp_fb_connect(struct socket *sock, struct sockaddr *addr, int len,
		   int flags)
{
	struct socket *tcp = sdp_fb_sock(sock);
	int err;

	sdp_fb_follow_sol(sock->sk, tcp);
	sdp_fb_pull_err(sock);
	err = tcp->ops->connect(tcp, addr, len, flags);
	sdp_fb_sync_err(sock);
	sock->state = READ_ONCE(tcp->state);
	return err;
}

__poll_t sdp_fb_poll(struct file *file, struct socket *sock,
		     struct poll_table_struct *wait)
{
	struct socket *tcp = sdp_fb_sock(sock);

	/* Waiters sleep on the SDP socket's queue; TCP's mask. */
	sock_poll_wait(file, sock, wait);
	sdp_fb_pull_err(sock);
#ifndef SOCK_CUSTOM_SOCKOPT
	/* SO_RCVLOWAT set since the last call (tcp_poll() reads it). */
	WRITE_ONCE(tcp->sk->sk_rcvlowat, READ_ONCE(sock->sk->sk_rcvlowat));
#endif
	return tcp->ops->poll(file, tcp, NULL);
}

int sdp_fb_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	struct socket *tcp = sdp_fb_sock(sock);
	int ret;

	sdp_fb_follow_sol(sock->sk, tcp);
	sdp_fb_pull_err(sock);
	ret = tcp->ops->sendmsg(tcp, msg, len);

	sdp_fb_sync_err(sock);
	return ret;
}

int sdp_fb_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		   int flags)
{
	struct socket *tcp = sdp_fb_sock(sock);
	int ret;

	sdp_fb_follow_sol(sock->sk, tcp);
	sdp_fb_pull_err(sock);
	ret = tcp->ops->recvmsg(tcp, msg, len, flags);

	sdp_fb_sync_err(sock);
	return ret;
}

int sdp_fb_shutdown(struct socket *sock, int how)
{
	struct socket *tcp = sdp_fb_sock(sock);

	return tcp->ops->shutdown(tcp, how);
}

int sdp_fb_getname(struct socket *sock, struct sockaddr *addr, int peer)
{
	struct socket *tcp = sdp_fb_sock(sock);

	return tcp->ops->getname(tcp, addr, peer);
}

int sdp_fb_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	struct socket *tcp = sdp_fb_sock(sock);

	return tcp->ops->ioctl(tcp, cmd, arg);
}

/* SO_ZEROCOPY set on the SDP socket: TCP queues the notifications now. */
void sdp_fb_set_zerocopy(struct socket *sock, bool on)
{
	struct sock *tsk = sdp_fb_sock(sock)->sk;

	lock_sock(tsk);
	sock_valbool_flag(tsk, SOCK_ZEROCOPY, on);
	release_sock(tsk);
}

int sdp_fb_setsockopt(struct socket *sock, int level, int optname,
		      sockptr_t optval, unsigned int optlen)
{
	struct socket *tcp = sdp_fb_sock(sock);
	int err;

	if (level != SOL_SOCKET)
		return tcp->ops->setsockopt(tcp, level, optname, optval, optlen);
	err = sock_setsockopt(tcp, level, optname, optval, optlen);
	/* getsockopt() at SOL_SOCKET reads the SDP socket: the same there. */
	if (!err)
		sock_setsockopt(sock, level, optname, optval, optlen);
	return err;
}

int sdp_fb_getsockopt(struct socket *sock, int level, int optname,
		      char __user *optval, int __user *optlen)
{
	struct socket *tcp = sdp_fb_sock(sock);

	return tcp->ops->getsockopt(tcp, level, optname, optval, optlen);
}
