// SPDX-License-Identifier: GPL-2.0
/*
 * The close path, in one file: how a connection ends and what the socket
 * reports on the way.
 *
 *   orderly   shutdown(SHUT_WR) or close() queue our DisConn (the FIN);
 *             its completion is its ACK; the peer's DisConn is its FIN;
 *             with both through, the RDMA CM disconnect ends the
 *             connection (sdp_maybe_disconnect()).
 *   reset     SO_LINGER 0, unread data at close, a protocol or QP error,
 *             a dead peer: AbortConn if a credit allows, then the CM
 *             disconnect (sdp_abort(), sdp_set_error()).
 *   orphan    close() returns at once; an orphan finishes its teardown in
 *             the background, bounded by net.sdp.fin_timeout_ms
 *             (sdp_fin_timeout_work()); the destroy work frees what is
 *             left (sdp_destroy_work(), sdp_destroy_resources()).
 *
 * Every closing change of the TCP state goes through sdp_close_event(), whose
 * table is the core's (sdp_core_close_state(), core/close.cpp).  The
 * socket lock is held for all of it except the work items, which take it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "sdp.h"

/* ---- the TCP state ---------------------------------------------------------- */

/* The core's state numbers are TCP's (sdp_core.h). */
#define SDP_SAME_TCP_STATE(s) BUILD_BUG_ON((int)SDP_TCP_##s != (int)TCP_##s)

/*
 * Move the socket's TCP state for a close event; true if it changed.  A
 * connection that ends in order (not by SDP_CLOSE_RESET) is done: reads
 * return 0 once the data is consumed (SOCK_DONE, before the state, which
 * poll() reads without the lock).  The caller wakes the waiters.
 */
bool sdp_close_event(struct sock *sk, unsigned int ev)
{
	int old = sk->sk_state;
	int new = (int)sdp_core_close_state(old, ev);

	SDP_SAME_TCP_STATE(ESTABLISHED);
	SDP_SAME_TCP_STATE(SYN_SENT);
	SDP_SAME_TCP_STATE(SYN_RECV);
	SDP_SAME_TCP_STATE(FIN_WAIT1);
	SDP_SAME_TCP_STATE(FIN_WAIT2);
	SDP_SAME_TCP_STATE(TIME_WAIT);
	SDP_SAME_TCP_STATE(CLOSE);
	SDP_SAME_TCP_STATE(CLOSE_WAIT);
	SDP_SAME_TCP_STATE(LAST_ACK);
	SDP_SAME_TCP_STATE(LISTEN);
	SDP_SAME_TCP_STATE(CLOSING);
	sock_owned_by_me(sk);

	if (new == old)
		return false;
	if (new == TCP_CLOSE && ev != SDP_CLOSE_RESET)
		sock_set_flag(sk, SOCK_DONE);
	sdp_set_state(sk, new);
	return true;
}

/* ---- reset ------------------------------------------------------------------ */

/*
 * The -errno for a core error (-enum sdp_core_err), as TCP reports the same
 * event.  A peer that breaks the protocol gets its connection reset, which
 * its user sees as a refusal while connecting (a TCP RST answering the SYN)
 * and as a reset after; a call the connection's state no longer allows
 * means it is closing or dead (EPIPE); a message too long for the peer's
 * buffers is EMSGSIZE; an output buffer too small, ENOBUFS.
 */
int sdp_core_errno(const struct sock *sk, int core_err)
{
	switch (core_err < 0 ? -core_err : core_err) {
	case SDP_CORE_OK:
		return 0;
	case SDP_CORE_EMALFORMED:
	case SDP_CORE_EVERSION:
	case SDP_CORE_EPROTO:
	case SDP_CORE_ESEQUENCE:
		return sk->sk_state == TCP_SYN_SENT ? -ECONNREFUSED : -ECONNRESET;
	case SDP_CORE_ETOOBIG:
		return -EMSGSIZE;
	case SDP_CORE_ENOROOM:
		return -ENOBUFS;
	default: /* SDP_CORE_ESTATE */
		return -EPIPE;
	}
}

/* A connection error: report it to the socket like TCP does. */
void sdp_set_error(struct sock *sk, int err)
{
	sock_owned_by_me(sk);

	sdp_fb_disarm(sk);
	WRITE_ONCE(sk->sk_err, err);
	if (sk->sk_state != TCP_CLOSE && sk->sk_state != TCP_LISTEN &&
	    sk->sk_state != TCP_SYN_SENT)
		sock_set_flag(sk, SOCK_DONE);
	sdp_close_event(sk, SDP_CLOSE_RESET);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	sk_error_report(sk);
	sk->sk_state_change(sk);
	sdp_zc_wake(sk); /* zero-copy waits that ignore signals too */
}

/*
 * Reset the connection (SO_LINGER 0, unread data at close, protocol error):
 * AbortConn if a credit allows, then the CM disconnect.  The peer sees
 * ECONNRESET either way.
 */
void sdp_abort(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (sdp_established(sk) && ssk->res_ready && !ssk->qp_error &&
	    !(sdp_core_state(&ssk->core) & SDP_CS_ABORTED) &&
	    sdp_send_control(sk, SDP_MID_ABORT_CONN) == 0) {
		ssk->abort_pending = true; /* disconnect when it completes */
	} else if (ssk->established_once) {
		sdp_disconnect(ssk);
	}
	/* An offer of the peer is void: a reset connection reads no more. */
	WRITE_ONCE(ssk->rsa_avail, 0);
	sock_set_flag(sk, SOCK_DONE);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	sdp_close_event(sk, SDP_CLOSE_RESET);
	sk->sk_state_change(sk);
}

/*
 * The listener closes: connections waiting in its queue are reset.  Called
 * with the listener locked; children are torn down from the work queue so
 * no two socket locks nest.
 */
void sdp_abort_children(struct sock *listener)
{
	struct sdp_sock *lssk = sdp_sk(listener), *child, *tmp;

	sock_owned_by_me(listener);

	list_for_each_entry_safe(child, tmp, &lssk->accept_queue, accept_node) {
		list_del_init(&child->accept_node);
		sk_acceptq_removed(listener);
		/* The destroy work resets it and drops its listener
		 * reference and its own (never accepted) reference.
		 */
		sdp_schedule_destroy(&child->sk);
	}
}

/* ---- shutdown and close ------------------------------------------------------ */

/* Our DisConn goes after every byte queued (TCP's FIN). */
void sdp_shutdown_send(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	sdp_core_shutdown_send(&ssk->core);
	sdp_close_event(sk, SDP_CLOSE_SHUTDOWN_SEND);
	sdp_push(sk, SDP_TXO_PUSH);
}

int sdp_shutdown(struct socket *sock, int how)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int err = 0;

	if (sdp_fallen_back(sk))
		return sdp_fb_shutdown(sock, how);

	/* SHUT_RD (0) .. SHUT_RDWR (2) become RCV_SHUTDOWN/SEND_SHUTDOWN bits. */
	how++;
	if ((how & ~SHUTDOWN_MASK) || !how)
		return -EINVAL;

	lock_sock(sk);
	if (sock->state == SS_CONNECTING) {
		if ((1 << sk->sk_state) & (TCPF_SYN_SENT | TCPF_SYN_RECV | TCPF_CLOSE))
			sock->state = SS_DISCONNECTING;
		else
			sock->state = SS_CONNECTED;
	}
	switch (sk->sk_state) {
	case TCP_CLOSE:
		err = -ENOTCONN;
		/* TCP still records the request on a closed socket. */
		WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | how);
		break;
	case TCP_LISTEN:
		if (!(how & RCV_SHUTDOWN))
			break;
		fallthrough;
	case TCP_SYN_SENT:
		/* Like tcp_disconnect: the socket goes back to CLOSE. */
		WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | how);
		if (sk->sk_state == TCP_LISTEN) {
			sdp_close_event(sk, SDP_CLOSE_RESET);
			sdp_abort_children(sk);
		} else {
			sdp_set_error(sk, ECONNRESET);
			WRITE_ONCE(sk->sk_err, 0);
		}
		break;
	default:
		WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | how);
		if (how & SEND_SHUTDOWN) {
			/* After the bytes of a send still in flight. */
			if (ssk->zc_async)
				ssk->zc_async_fin = true;
			else
				sdp_shutdown_send(sk);
		}
		break;
	}
	sk->sk_state_change(sk);
	release_sock(sk);
	return err;
}

static void sdp_orphan_close(struct sock *sk, bool *destroy_now)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool unread = ssk->rcv_nxt != ssk->copied_seq || ssk->rsa_avail;
	bool linger0 = sock_flag(sk, SOCK_LINGER) && !sk->sk_lingertime;

	/*
	 * Both sides have sent or queued their DisConn, but ours, or the data
	 * queued before it, may still wait for credits or for the peer's
	 * acknowledgement: until sdp_maybe_disconnect() ends the connection,
	 * the QP must live on (destroying it now would drop those bytes, and
	 * the peer would see a reset), as TCP's orphan delivers its queue and
	 * FIN after close().
	 */
	bool finishing = ssk->established_once && ssk->res_ready && ssk->cm_id &&
			 !ssk->qp_error && !ssk->disconnect_sent && !sk->sk_err;

	sock_owned_by_me(sk);
	*destroy_now = false;
	switch (sk->sk_state) {
	case TCP_LISTEN:
		sdp_close_event(sk, SDP_CLOSE_RESET);
		sdp_abort_children(sk);
		*destroy_now = true;
		return;
	case TCP_ESTABLISHED:
	case TCP_CLOSE_WAIT:
	case TCP_FIN_WAIT1:
	case TCP_FIN_WAIT2:
		break;
	case TCP_CLOSING:
	case TCP_LAST_ACK:
	case TCP_TIME_WAIT:
	case TCP_CLOSE:
		if (finishing)
			break;
		fallthrough;
	default:
		/* Connecting or closed: nothing to tell the peer. */
		sdp_close_event(sk, SDP_CLOSE_RESET);
		*destroy_now = true;
		return;
	}

	/* Like TCP: unread data or SO_LINGER 0 resets the connection. */
	if (unread || linger0 || ssk->qp_error) {
		sdp_abort(sk);
		*destroy_now = true;
		return;
	}
	/*
	 * A send still in flight (asynchronous zero copy) owns the stream:
	 * its work closes when it is done, as TCP's orphan sends its queue
	 * before the FIN.  Bounded by fin_timeout all the same.
	 */
	if (ssk->zc_async) {
		ssk->zc_async_close = true;
	} else {
		sdp_shutdown_send(sk);
		ssk->orphan_teardown = true;
	}
	/* The teardown finishes in the background (sdp_maybe_disconnect); a
	 * peer that never answers is given fin_timeout.
	 */
	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &ssk->fin_work,
				msecs_to_jiffies(sysctl_sdp_fin_timeout_ms)))
		sock_put(sk);
}

/*
 * The asynchronous send that close() left in flight is done (its work,
 * socket lock held): the close goes on.  Returns whether the resources
 * are to be destroyed now (after the lock is released).
 */
bool sdp_zc_async_closed(struct sock *sk)
{
	bool destroy_now;

	sock_owned_by_me(sk);

	sdp_orphan_close(sk, &destroy_now);
	return destroy_now;
}

int sdp_release(struct socket *sock)
{
	struct sock *sk = sock->sk;
	bool destroy_now;
	long timeo;

	if (!sk)
		return 0;

	/* No call runs on the socket any more: TCP's goes first. */
	sdp_fb_release(sk);
	lock_sock(sk);
	sdp_set_keepalive(sk, 0);
	sdp_orphan_close(sk, &destroy_now);
	/* SO_LINGER with a timeout: wait for the teardown to finish. */
	if (!destroy_now && sock_flag(sk, SOCK_LINGER) && sk->sk_lingertime) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);

		timeo = sk->sk_lingertime;
		add_wait_queue(sk_sleep(sk), &wait);
		while (timeo && !signal_pending(current) &&
		       !sk_wait_event(sk, &timeo,
				      sk->sk_state == TCP_CLOSE ||
				      sk->sk_state == TCP_FIN_WAIT2 ||
				      sk->sk_state == TCP_TIME_WAIT, &wait))
			;
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, -1);
	sock_orphan(sk);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	release_sock(sk);

	if (destroy_now)
		sdp_destroy_resources(sk);
	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

/* ---- the end of the connection ---------------------------------------------- */

/*
 * Both DisConns are through (ours completed, the peer's arrived), or our
 * AbortConn completed: end the RDMA connection.
 */
void sdp_maybe_disconnect(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	unsigned int cs = sdp_core_state(&ssk->core);
	bool ours_done = (cs & SDP_CS_DISCONN_SENT) &&
			 ssk->ctl.done == ssk->ctl.post;

	sock_owned_by_me(sk);

	if (ssk->disconnect_sent || !ssk->cm_id)
		return;
	if (ssk->abort_pending && ssk->ctl.done == ssk->ctl.post) {
		sdp_disconnect(ssk);
		return;
	}
	if (!(ours_done && (cs & SDP_CS_DISCONN_RCVD)))
		return;
	sdp_disconnect(ssk);
	sdp_close_event(sk, SDP_CLOSE_FINISHED);
	sk->sk_state_change(sk);
}

/*
 * The last step for a socket nobody will use again: a connection that is
 * not closed yet is reset, then its RDMA resources go (outside the socket
 * lock: destroying the CM id waits for a running event handler, which
 * takes it).
 */
static void sdp_end_and_destroy(struct sock *sk)
{
	lock_sock(sk);
	if (sk->sk_state != TCP_CLOSE)
		sdp_abort(sk);
	release_sock(sk);
	sdp_destroy_resources(sk);
}

/* A closed socket whose peer never finished the teardown. */
void sdp_fin_timeout_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, fin_work);
	struct sock *sk = &ssk->sk;

	sdp_end_and_destroy(sk);
	sock_put(sk);
}

void sdp_schedule_destroy(struct sock *sk)
{
	sock_hold(sk);
	if (!queue_work(sdp_wq, &sdp_sk(sk)->destroy_work))
		sock_put(sk);
}

void sdp_destroy_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock, destroy_work);
	struct sock *sk = &ssk->sk;

	sdp_end_and_destroy(sk);
	/* A connection never accepted: nobody else holds it. */
	if (sdp_child_unlink(sk))
		sock_put(sk);
	sock_put(sk);
}
