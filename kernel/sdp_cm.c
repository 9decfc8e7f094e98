// SPDX-License-Identifier: GPL-2.0
/*
 * Connection management over the kernel RDMA CM: address and route
 * resolution, the Hello (REQ private data) / HelloAck (REP private data)
 * exchange, the listener's accept queue and backlog, disconnects, and the
 * CM errors mapped to the errno TCP would give.
 *
 * CM ids live in the IB port space with IP addressing (the SDP port space
 * is gone from the kernel CM; see Documentation/wire-protocol.md) and in the
 * socket's network namespace.
 *
 * The RDMA CM calls the event handler from its own workers, shared by every
 * RDMA CM user of the host (NFS/RDMA, nvme-rdma, iSER).  The handler never
 * sleeps on the socket lock there, which user threads hold across page
 * faults that a user can stall (FUSE, userfaultfd): it records the event
 * and sdp_cm_work() handles it under the socket lock on sdp_wq, in order.
 * The one exception is CONNECT_REQUEST, whose answer (accept or reject) the
 * CM needs from the handler: it takes only the listener's lock, which user
 * threads hold for short sections that do not fault (listen, accept, close),
 * and the lock of a child nobody else knows yet.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <net/ipv6.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>

#include "sdp.h"
#include "sdp_wire.h"

/*
 * Transport retries: 7, as SMC-R and RDS ask.  Soft-RoCE takes 7 for
 * "retry for ever" (rxe_comp.c never decrements it), so there a vanished
 * peer is found by the send-progress watch (net.sdp.tx_stall_ms) and by
 * keepalive, not by the transport; 6 would be finite everywhere, but rxe
 * counts its sequence-error NAKs against it, and 5% loss then reset
 * connections.  RNR retries are finite (7 would mean for ever): a peer
 * that grants credits it has no buffers for gets our sends retried a few
 * times, then the connection fails (RNR_RETRY_EXC) instead of wedging the
 * send queue and every AbortConn, DisConn and invalidation behind it.
 */
#define SDP_CM_RETRY 7
#define SDP_RNR_RETRY 6

/*
 * RDMA Reads in flight on the connection, each way: as many as the offers
 * a sink reads at once (sdp_zc_recv_offer(): one per queued SrcAvail, up
 * to SDP_CORE_MAX_ADVERTS), within what the device allows.  The passive
 * side also stays within what the REQ asked for: the peer's initiator
 * depth bounds our responder resources and its responder resources our
 * initiator depth.  With one read in flight the reads of several offers
 * would go one round trip after another.
 */
static void sdp_cm_rd_atomic(const struct rdma_cm_id *id,
			     struct rdma_conn_param *param,
			     const struct rdma_conn_param *req)
{
	const struct ib_device_attr *attrs = &id->device->attrs;
	u32 resp = min_t(u32, SDP_CORE_MAX_ADVERTS, attrs->max_qp_rd_atom);
	u32 init = min_t(u32, SDP_CORE_MAX_ADVERTS,
			 attrs->max_qp_init_rd_atom);

	if (req) {
		resp = min_t(u32, resp, req->initiator_depth);
		init = min_t(u32, init, req->responder_resources);
	}
	param->responder_resources = resp;
	param->initiator_depth = init;
}

/*
 * The QP's local ACK timeout (net.sdp.ack_timeout, 4.096 us * 2^n; 0 keeps
 * the CM's).  For RoCE the CM derives it from a fixed packet lifetime
 * (2^19 units, about 2 s), so every lost packet at the tail of a burst
 * cost 2 s and a few in a row exhausted the waits of zero copy.  15
 * (134 ms) is SMC-R's: a link silent for 8 timeouts (about 1.1 s) ends the
 * connection.  Both ends set it for their own QP.
 */
static void sdp_set_ack_timeout(struct rdma_cm_id *id)
{
	int t = READ_ONCE(sysctl_sdp_ack_timeout);

	if (t && rdma_set_ack_timeout(id, t))
		pr_debug("cannot set the ACK timeout %d\n", t);
}

struct rdma_cm_id *sdp_cm_create_id(struct sock *sk)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(sock_net(sk), sdp_cm_handler, sk, RDMA_PS_IB,
			    IB_QPT_RC);
	if (!IS_ERR(id))
		sock_hold(sk); /* the id's reference, dropped when it dies */
	return id;
}

/*
 * Private data of the REJ of a listener that had no resources (memory, its
 * cgroup's limit, net.sdp.max_conns) for the connection: the connecting
 * side reports ENOBUFS, not ECONNREFUSED (there is a listener).
 */
static const u8 sdp_rej_nobufs[8] = { 'S', 'D', 'P', 'R', 0, 0, 0, ENOBUFS };

/* Map a CM failure to what TCP reports for the same situation (-errno). */
static int sdp_cm_errno(struct sock *sk, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		/*
		 * A REJ after our RTU: the peer dropped its end before the RTU
		 * reached it (a listener closed with the connection pending;
		 * its CM rejects from REP_SENT).  Our connect had completed:
		 * TCP would see that as a reset.
		 */
		if (sdp_sk(sk)->established_once) {
			SDP_INC(sk, SDP_CNT_CONN_REJ_AFTER_RTU);
			SDP_INC(sk, SDP_CNT_ERR_RESET);
			return -ECONNRESET;
		}
		SDP_INC(sk, SDP_CNT_ERR_REFUSED);
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (ev->status == -ETIMEDOUT) {
			SDP_INC(sk, SDP_CNT_ERR_TIMEOUT);
			return -ETIMEDOUT;
		}
		SDP_INC(sk, SDP_CNT_ERR_UNREACHABLE);
		if (ev->status == -EHOSTUNREACH)
			return -EHOSTUNREACH;
		return -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (ev->status == -ETIMEDOUT) {
			SDP_INC(sk, SDP_CNT_ERR_TIMEOUT);
			return -ETIMEDOUT;
		}
		SDP_INC(sk, SDP_CNT_ERR_UNREACHABLE);
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		SDP_INC(sk, SDP_CNT_ERR_DEVICE_REMOVED);
		return -ECONNRESET;
	default:
		SDP_INC(sk, SDP_CNT_ERR_RESET);
		return -ECONNRESET;
	}
}

/* How a failed connect attempt ended, for sdp_core_fallback_reason(). */
static int sdp_cm_end(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return SDP_CORE_CE_REJECTED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status == -ETIMEDOUT ? SDP_CORE_CE_NO_ANSWER :
						  SDP_CORE_CE_NO_ROUTE;
	case RDMA_CM_EVENT_UNREACHABLE:
		return SDP_CORE_CE_NO_ANSWER;
	default:
		return SDP_CORE_CE_LOST;
	}
}

/*
 * Take the CM id away from the socket and free the RDMA resources bound to
 * its device.  Returns whether this call did it (false: somebody else
 * already owns the teardown).  The caller then destroys the id and drops
 * the references: sdp_cm_put_detached().
 */
static bool sdp_cm_detach_res(struct sock *sk, struct rdma_cm_id *id)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_res res;

	sock_not_owned_by_me(sk);

	mutex_lock(&ssk->res_lock);
	lock_sock(sk);
	if (ssk->cm_id != id) {
		release_sock(sk);
		mutex_unlock(&ssk->res_lock);
		return false;
	}
	ssk->cm_id = NULL;
	ssk->cm_gone = true;
	sdp_claim_rdma(sk, &res);
	release_sock(sk);
	sdp_free_rdma(sk, id, &res);
	mutex_unlock(&ssk->res_lock);
	return true;
}

/*
 * The id is destroyed (or about to be, by the CM, in the handler): drop its
 * reference, and a connection that died before accept() has nobody else
 * to free it.  `deferred` from the CM's handler (see sdp_sock_put_deferred()).
 */
static void sdp_cm_put_detached(struct sock *sk, bool deferred)
{
	struct sock *parent = sdp_child_unlink(sk);
	int puts = parent ? 2 : 1;

	while (puts--) {
		if (deferred)
			sdp_sock_put_deferred(sk);
		else
			sock_put(sk);
	}
}

/*
 * An id whose connection attempt or connection ended: it and the socket's
 * RDMA resources go, unless teardown took them already.  cm_ev_mutex
 * held; not the socket lock.
 */
static void sdp_cm_drop_id(struct sock *sk, struct rdma_cm_id *id)
{
	lockdep_assert_held(&sdp_sk(sk)->cm_ev_mutex);

	if (sdp_cm_detach_res(sk, id)) {
		rdma_destroy_id(id);
		sdp_cm_purge(sk, id);
		sdp_cm_put_detached(sk, false);
	}
}

/* In the CM's handler: returns 1 for the CM to destroy the id. */
static int sdp_cm_detach(struct sock *sk, struct rdma_cm_id *id)
{
	if (!sdp_cm_detach_res(sk, id))
		return 0;
	sdp_cm_put_detached(sk, true);
	return 1;
}

static void sdp_set_addrs(struct sock *sk, struct rdma_cm_id *id)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sockaddr *dst = (struct sockaddr *)&id->route.addr.dst_addr;
	sa_family_t fam = ssk->local.sa.sa_family;

	sock_owned_by_me(sk);

	sdp_update_local(sk);
	if (dst->sa_family == AF_INET && fam == AF_INET6) {
		struct sockaddr_in6 *r6 = (struct sockaddr_in6 *)&ssk->remote;
		struct sockaddr_in *d4 = (struct sockaddr_in *)dst;

		memset(r6, 0, sizeof(*r6));
		r6->sin6_family = AF_INET6;
		r6->sin6_port = d4->sin_port;
		ipv6_addr_set_v4mapped(d4->sin_addr.s_addr, &r6->sin6_addr);
	} else if (dst->sa_family == AF_INET6) {
		struct sockaddr_in6 *d6 = (struct sockaddr_in6 *)dst;

		memcpy(&ssk->remote, dst, sizeof(struct sockaddr_in6));
		/* A connection to a link-local peer is bound to its interface,
		 * as TCP's accepted sockets are (getsockname's scope id).
		 */
		if (!sk->sk_bound_dev_if &&
		    __ipv6_addr_needs_scope_id(__ipv6_addr_type(&d6->sin6_addr)))
			sk->sk_bound_dev_if = id->route.addr.dev_addr.bound_dev_if;
	} else {
		memcpy(&ssk->remote, dst, sizeof(struct sockaddr_in));
	}
}

static u16 sdp_local_port(struct rdma_cm_id *id)
{
	struct sockaddr *src = (struct sockaddr *)&id->route.addr.src_addr;

	if (src->sa_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)src)->sin6_port);
	return ntohs(((struct sockaddr_in *)src)->sin_port);
}

/*
 * Active side: route known, create the QP and send the Hello in the REQ.
 * Socket lock held; dropped around rdma_connect(), which takes the id's
 * handler_mutex: the CM calls sdp_cm_handler() with that mutex held, and
 * for a CONNECT_REQUEST the handler takes socket locks (a listener's and a
 * new child's), so no socket lock may be held while waiting for it.  The
 * id stays ours meanwhile: sdp_cm_work() holds cm_ev_mutex, without which
 * teardown does not destroy the id (sdp_destroy_resources()).
 */
static int sdp_cm_route_resolved(struct sock *sk, struct rdma_cm_id *id)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct rdma_conn_param param = {};
	u8 hello[SDP_CM_REQ_PRIVATE_DATA] = {};
	int len, err;

	sock_owned_by_me(sk);

	sdp_conn_init(sk);
	err = sdp_create_resources(sk, id);
	if (err)
		return err;
	len = sdp_core_build_hello(&ssk->core, hello, sizeof(hello),
				   sdp_local_port(id),
				   id->route.addr.src_addr.ss_family == AF_INET6);
	if (len < 0)
		return sdp_core_errno(sk, len);
	SDP_INC_TX_MID(sk, SDP_MID_HELLO);
	param.private_data = hello;
	param.private_data_len = len;
	sdp_cm_rd_atomic(id, &param, NULL);
	param.retry_count = SDP_CM_RETRY;
	param.rnr_retry_count = SDP_RNR_RETRY;
	sdp_set_ack_timeout(id);
	release_sock(sk);
	err = rdma_connect(id, &param);
	lock_sock(sk);
	return err;
}

static void sdp_connected(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	sdp_fb_disarm(sk);
	if (ssk->tcp) {
		/* SDP carries the connection: the spare TCP socket goes. */
		sock_release(ssk->tcp);
		ssk->tcp = NULL;
	}
	ssk->established_once = true;
	sdp_seg_max_changed(sk);
	ssk->last_rx_jiffies = jiffies;
	sdp_set_state(sk, TCP_ESTABLISHED);
	if (sock_flag(sk, SOCK_KEEPOPEN))
		sdp_reset_keepalive(sk);
	sdp_wake_pair(sk);
}

/* Active side: the REP arrived with the HelloAck. */
static int sdp_cm_established_active(struct sock *sk, struct rdma_cm_event *ev)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	sock_owned_by_me(sk);

	err = sdp_core_on_hello_ack(&ssk->core, ev->param.conn.private_data,
				    ev->param.conn.private_data_len);
	if (err) {
		pr_warn_ratelimited("bad HelloAck from peer: %s\n",
				    sdp_core_err_name(err));
		SDP_INC(sk, SDP_CNT_ERR_PROTOCOL);
		return sdp_core_errno(sk, err);
	}
	SDP_INC_RX_MID(sk, SDP_MID_HELLO_ACK);
	SDP_INC(sk, SDP_CNT_CONN_ESTABLISHED);
	sdp_set_addrs(sk, ssk->cm_id);
	sdp_connected(sk);
	return 0;
}

/* Passive side: the RTU arrived; hand the connection to accept(). */
static void sdp_cm_established_passive(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sock *parent = ssk->parent;
	bool queued = false;

	sock_owned_by_me(sk);

	/*
	 * Reset before it was established (its peer's first message was an
	 * error): accept() still returns it, closed, as TCP returns a child
	 * reset after its handshake.
	 */
	if (sk->sk_state == TCP_SYN_RECV)
		sdp_connected(sk);
	else
		ssk->established_once = true;
	release_sock(sk);

	lock_sock(parent);
	if (!ssk->evicted) {
		sdp_sk(parent)->pending--;
		list_del_init(&ssk->half_open_node);
	}
	if (parent->sk_state == TCP_LISTEN && !ssk->evicted) {
		list_add_tail(&ssk->accept_node, &sdp_sk(parent)->accept_queue);
		sk_acceptq_added(parent);
		queued = true;
		SDP_INC(sk, SDP_CNT_CONN_ACCEPTED);
		parent->sk_data_ready(parent);
	}
	release_sock(parent);

	lock_sock(sk);
	if (!queued) {
		/* The listener went away meanwhile: reset the connection. */
		sdp_abort(sk);
		sdp_schedule_destroy(sk);
	}
}

static void sdp_cm_disconnected(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	unsigned int cs;

	sock_owned_by_me(sk);

	/* What the peer sent before it disconnected comes first. */
	while (!sdp_poll_cq(sk, true))
		;
	/*
	 * A child that heard from its peer is established, even when the
	 * peer's DREQ made the CM drop the ESTABLISHED of a lost RTU: it goes
	 * to accept() before it takes the disconnect, as its own ESTABLISHED
	 * (queued behind this event) would have done.
	 */
	if (ssk->est_by_data_queued && !ssk->established_once &&
	    READ_ONCE(ssk->parent)) {
		SDP_INC(sk, SDP_CNT_CONN_BY_DATA);
		sdp_cm_established_passive(sk);
	}
	/* Answer the peer's DREQ (a DREP), or it waits for its timeout. */
	sdp_disconnect(ssk);
	cs = sdp_core_state(&ssk->core);
	ssk->qp_error = true;
	if (sk->sk_state == TCP_CLOSE)
		goto out;
	if (!(cs & SDP_CS_DISCONN_RCVD) && !(cs & SDP_CS_ABORTED) &&
	    !sock_flag(sk, SOCK_DEAD)) {
		/* The peer vanished without DisConn: a reset. */
		SDP_INC(sk, SDP_CNT_ERR_RESET);
		sdp_set_error(sk, ECONNRESET);
		goto out;
	}
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	sdp_close_event(sk, SDP_CLOSE_FINISHED);
	sk->sk_state_change(sk);
out:
	if (sock_flag(sk, SOCK_DEAD))
		sdp_schedule_destroy(sk);
}

/*
 * The listener is full of connections that never finished their handshake
 * (a flood of REQs without RTU, as a SYN flood): reset the oldest so that
 * a new one, maybe legitimate, gets its place.  Listener locked.
 */
static bool sdp_evict_half_open(struct sock *parent)
{
	struct sdp_sock *pssk = sdp_sk(parent), *old;

	sock_owned_by_me(parent);

	old = list_first_entry_or_null(&pssk->half_open, struct sdp_sock,
				       half_open_node);
	if (!old)
		return false;
	list_del_init(&old->half_open_node);
	WRITE_ONCE(old->evicted, true);
	pssk->pending--;
	SDP_INC(parent, SDP_CNT_HALF_OPEN_EVICTED);
	/* Its destroy work resets it and drops the references. */
	sdp_schedule_destroy(&old->sk);
	return true;
}

/*
 * Room for one more connection on the listener, as TCP's accept queue and
 * SYN queue give: at most backlog + 1 connections wait for accept(), and
 * the connections still in their handshake are bounded by the backlog and
 * net.sdp.max_half_open, the oldest giving way to a new one.
 */
static bool sdp_listener_admit(struct sock *parent)
{
	struct sdp_sock *pssk = sdp_sk(parent);
	int half_open_max = READ_ONCE(sysctl_sdp_max_half_open);
	/* What TCP holds or may take, on a listener that takes both. */
	u32 tcp_queued = sdp_fb_backlog(parent);

	sock_owned_by_me(parent);

	if (sk_acceptq_is_full(parent) ||
	    (tcp_queued && READ_ONCE(parent->sk_ack_backlog) + tcp_queued >
				   READ_ONCE(parent->sk_max_ack_backlog)))
		return false;
	while (READ_ONCE(parent->sk_ack_backlog) + pssk->pending + tcp_queued >
		       READ_ONCE(parent->sk_max_ack_backlog) ||
	       pssk->pending >= half_open_max) {
		if (!sdp_evict_half_open(parent))
			return false;
	}
	pssk->pending++;
	sdp_fb_share_backlog(parent);
	return true;
}

/*
 * Passive side: a Hello arrived on a listener.  Runs in the CM's context
 * with the listener's lock (held by user threads only for short, non-
 * faulting sections: listen, accept, close) and a new child nobody else
 * knows yet.  The Hello is checked before anything is allocated for it.
 */
static int sdp_cm_conn_request(struct sock *parent, struct rdma_cm_id *id,
			       struct rdma_cm_event *ev)
{
	struct sdp_sock *pssk = sdp_sk(parent), *ssk;
	struct rdma_conn_param param = {};
	u8 ack[SDP_HELLO_ACK_SIZE];
	struct sock *sk;
	int len, err;

	lock_sock(parent);
	if (parent->sk_state != TCP_LISTEN) {
		release_sock(parent);
		return -ECONNREFUSED; /* the CM rejects and destroys the id */
	}
	if (!sdp_listener_admit(parent)) {
		release_sock(parent);
		SDP_INC(parent, SDP_CNT_ERR_BACKLOG);
		return -ECONNREFUSED;
	}
	release_sock(parent);

	sk = sdp_sk_clone(parent);
	if (!sk)
		goto undo_pending;
	ssk = sdp_sk(sk);
	sock_hold(parent); /* until accept() or the child's death */
	ssk->parent = parent;
	sock_hold(sk); /* the id's reference */
	id->context = sk;

	lock_sock(sk);
	ssk->cm_id = id;
	sdp_set_addrs(sk, id);
	sdp_set_state(sk, TCP_SYN_RECV);
	sdp_conn_init(sk);
	err = sdp_core_on_hello(&ssk->core, ev->param.conn.private_data,
				ev->param.conn.private_data_len);
	if (err) {
		pr_warn_ratelimited("bad Hello from peer: %s\n",
				    sdp_core_err_name(err));
		SDP_INC(sk, SDP_CNT_ERR_PROTOCOL);
		goto fail;
	}
	SDP_INC_RX_MID(sk, SDP_MID_HELLO);
	err = sdp_create_resources(sk, id);
	if (err) {
		rdma_reject(id, sdp_rej_nobufs, sizeof(sdp_rej_nobufs),
			    IB_CM_REJ_CONSUMER_DEFINED);
		goto fail;
	}
	len = sdp_core_build_hello_ack(&ssk->core, ack, sizeof(ack));
	if (len < 0)
		goto fail;
	param.private_data = ack;
	param.private_data_len = len;
	sdp_cm_rd_atomic(id, &param, &ev->param.conn);
	param.retry_count = SDP_CM_RETRY;
	param.rnr_retry_count = SDP_RNR_RETRY;
	sdp_set_ack_timeout(id);
	err = rdma_accept(id, &param);
	if (err)
		goto fail;
	SDP_INC_TX_MID(sk, SDP_MID_HELLO_ACK);
	release_sock(sk);

	/* Oldest first, for sdp_evict_half_open(); not if it died already. */
	lock_sock(parent);
	if (READ_ONCE(ssk->parent) && !ssk->evicted && !ssk->established_once)
		list_add_tail(&ssk->half_open_node, &pssk->half_open);
	release_sock(parent);
	return 0;

fail:
	release_sock(sk);
	/* Returning non-zero makes the CM reject and destroy the id. */
	sdp_cm_detach(sk, id);
	return -ECONNREFUSED;

undo_pending:
	lock_sock(parent);
	pssk->pending--;
	release_sock(parent);
	return -ENOMEM;
}

/* One event, under the socket lock (sdp_cm_work()). */
static void sdp_cm_process(struct sock *sk, const struct sdp_cm_ev *e)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct rdma_cm_id *id = e->id;
	struct rdma_cm_event ev = {
		.event = e->event,
		.status = e->status,
	};
	int end = SDP_CORE_CE_LOST; /* how the attempt ended, for fallback */
	int err = 0;

	lock_sock(sk);
	/*
	 * Detached (the socket is tearing this id down), or purged (NULL: the
	 * id was destroyed; a socket without an id has a NULL cm_id too).
	 */
	if (!id || ssk->cm_id != id) {
		release_sock(sk);
		return;
	}
	/*
	 * A child is established once: by the CM's RTU or by its first
	 * receive (sdp_cm_established_by_data()), whichever came first.
	 */
	if (ev.event == RDMA_CM_EVENT_ESTABLISHED && !e->by_data)
		ssk->cm_est_seen = true;
	if (ev.event == RDMA_CM_EVENT_ESTABLISHED && ssk->established_once) {
		release_sock(sk);
		return;
	}
	/*
	 * The user gave the attempt up meanwhile (shutdown() in SYN_SENT put
	 * the socket back to CLOSE, as tcp_disconnect() does): the connection
	 * must not complete behind its back.  The id goes, without an error
	 * for the socket; a peer already connected sees a reset.
	 */
	if (!ssk->parent && sk->sk_state != TCP_SYN_SENT &&
	    (ev.event == RDMA_CM_EVENT_ADDR_RESOLVED ||
	     ev.event == RDMA_CM_EVENT_ROUTE_RESOLVED ||
	     ev.event == RDMA_CM_EVENT_ESTABLISHED)) {
		release_sock(sk);
		goto drop_id;
	}
	switch (ev.event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, sysctl_sdp_connect_timeout_ms);
		if (err)
			err = ENETUNREACH;
		end = SDP_CORE_CE_NO_ROUTE;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = sdp_cm_route_resolved(sk, id);
		if (err)
			err = err == -ENOMEM ? ENOBUFS : ENETUNREACH;
		end = err == ENOBUFS ? SDP_CORE_CE_RESOURCES :
				       SDP_CORE_CE_NO_ROUTE;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ssk->parent) {
			if (e->by_data)
				SDP_INC(sk, SDP_CNT_CONN_BY_DATA);
			sdp_cm_established_passive(sk);
		} else {
			ev.param.conn.private_data = ssk->cm_hello_ack;
			ev.param.conn.private_data_len = ssk->cm_hello_ack_len;
			err = -sdp_cm_established_active(sk, &ev);
			end = SDP_CORE_CE_NOT_SDP;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		sdp_cm_disconnected(sk);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (e->rej_nobufs) {
			SDP_INC(sk, SDP_CNT_ERR_RESOURCES);
			err = ENOBUFS;
			end = SDP_CORE_CE_BUSY;
			break;
		}
		fallthrough;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = -sdp_cm_errno(sk, &ev);
		end = sdp_cm_end(&ev);
		break;
	default:
		break;
	}
	if (!err) {
		release_sock(sk);
		return;
	}
	/*
	 * A connect SDP cannot carry may go on over TCP (sdp_fallback.c).
	 * Short of memory, the attempt's resources go first: TCP charges its
	 * first buffers with __GFP_NOFAIL, which at a memory cgroup's limit
	 * still held by the partial rings would wake its OOM killer.
	 */
	if (end == SDP_CORE_CE_RESOURCES && !ssk->parent &&
	    sk->sk_state == TCP_SYN_SENT && sdp_fb_wanted(sk, end)) {
		release_sock(sk);
		sdp_cm_drop_id(sk, id);
		lock_sock(sk);
		if (sk->sk_state == TCP_SYN_SENT && !sdp_fb_try(sk, end))
			sdp_set_error(sk, err);
		release_sock(sk);
		return;
	}
	if (!ssk->parent && sk->sk_state == TCP_SYN_SENT &&
	    sdp_fb_try(sk, end)) {
		release_sock(sk);
		goto drop_id;
	}

	/* Fatal for this connection: report and free the RDMA side. */
	sdp_set_error(sk, err);
	release_sock(sk);
drop_id:
	sdp_cm_drop_id(sk, id);
}

/*
 * The socket went over TCP while its SDP attempt was under way (the
 * fallback timer): the attempt's id and resources go, as after a failure;
 * a REP that comes later finds no id.  cm_ev_mutex held, as in
 * sdp_cm_work(); not the socket lock.
 */
void sdp_cm_abandon(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct rdma_cm_id *id;

	lockdep_assert_held(&ssk->cm_ev_mutex);

	lock_sock(sk);
	id = ssk->cm_id;
	release_sock(sk);
	if (id)
		sdp_cm_drop_id(sk, id);
}

/*
 * The peer's answer to the current attempt (its REP, as ESTABLISHED, or
 * a REJ) is in the FIFO, not yet handled: sdp_cm_work() waits for
 * cm_ev_mutex.  The fallback timer must not abandon such an attempt: once
 * the CM has sent its RTU the peer holds an established connection (its
 * server may have accepted it), and tearing the attempt down would reset
 * a connection the client then never uses.  Socket lock held (cm_id).
 */
bool sdp_cm_answer_queued(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool queued = false;
	u32 n;

	sock_owned_by_me(sk);

	if (!ssk->cm_id)
		return false;
	spin_lock_bh(&ssk->cm_ev_lock);
	for (n = ssk->cm_ev_head; n != ssk->cm_ev_tail; n++) {
		const struct sdp_cm_ev *e = &ssk->cm_ev[n % SDP_CM_EVENTS];

		if (e->id == ssk->cm_id &&
		    (e->event == RDMA_CM_EVENT_ESTABLISHED ||
		     e->event == RDMA_CM_EVENT_REJECTED))
			queued = true;
	}
	spin_unlock_bh(&ssk->cm_ev_lock);
	return queued;
}

static bool sdp_cm_pop(struct sdp_sock *ssk, struct sdp_cm_ev *e)
{
	bool got = false;

	lockdep_assert_held(&ssk->cm_ev_mutex);

	spin_lock_bh(&ssk->cm_ev_lock);
	if (ssk->cm_ev_head != ssk->cm_ev_tail) {
		*e = ssk->cm_ev[ssk->cm_ev_head % SDP_CM_EVENTS];
		ssk->cm_ev_head++;
		got = true;
	}
	spin_unlock_bh(&ssk->cm_ev_lock);
	return got;
}

/* The socket's CM events, in the order the CM reported them. */
void sdp_cm_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock, cm_work);
	struct sock *sk = &ssk->sk;
	struct sdp_cm_ev e;
	bool got;

	/*
	 * cm_ev_mutex: an id's events are handled or purged, never both.
	 * Taken per event, so that the fallback timer's work, which takes
	 * it too, can run between two.
	 */
	do {
		sdp_fault_fallback_race(ssk);
		mutex_lock(&ssk->cm_ev_mutex);
		got = sdp_cm_pop(ssk, &e);
		if (got)
			sdp_cm_process(sk, &e);
		mutex_unlock(&ssk->cm_ev_mutex);
	} while (got);
	sock_put(sk); /* the reference of the queued work */
}

/*
 * Forget the events of an id that rdma_destroy_id() destroyed (no more
 * come after it): a new id at the same address must not get them.
 * cm_ev_mutex held (sdp_cm_work(), sdp_destroy_resources()).
 */
static void __sdp_cm_purge(struct sdp_sock *ssk, struct rdma_cm_id *id)
{
	u32 n;

	lockdep_assert_held(&ssk->cm_ev_mutex);

	spin_lock_bh(&ssk->cm_ev_lock);
	for (n = ssk->cm_ev_head; n != ssk->cm_ev_tail; n++) {
		struct sdp_cm_ev *e = &ssk->cm_ev[n % SDP_CM_EVENTS];

		if (e->id == id)
			e->id = NULL; /* sdp_cm_process() skips it */
	}
	spin_unlock_bh(&ssk->cm_ev_lock);
}

void sdp_cm_purge(struct sock *sk, struct rdma_cm_id *id)
{
	__sdp_cm_purge(sdp_sk(sk), id);
}

/*
 * Record an event for sdp_cm_work() and queue it.  From the CM's handler,
 * and from the CQ poll (sdp_cm_established_by_data()): no sleeping.
 */
static void sdp_cm_queue(struct sdp_sock *ssk, struct rdma_cm_id *id,
			 const struct rdma_cm_event *ev, bool by_data)
{
	struct sdp_cm_ev *e;
	bool overflow = false;

	spin_lock_bh(&ssk->cm_ev_lock);
	if (ssk->cm_ev_tail - ssk->cm_ev_head >= SDP_CM_EVENTS) {
		overflow = true;
	} else {
		e = &ssk->cm_ev[ssk->cm_ev_tail % SDP_CM_EVENTS];
		e->id = id;
		e->event = ev->event;
		e->status = clamp_t(int, ev->status, S16_MIN, S16_MAX);
		e->by_data = by_data;
		e->rej_nobufs = ev->event == RDMA_CM_EVENT_REJECTED &&
				ev->param.conn.private_data &&
				ev->param.conn.private_data_len >=
					sizeof(sdp_rej_nobufs) &&
				!memcmp(ev->param.conn.private_data,
					sdp_rej_nobufs, sizeof(sdp_rej_nobufs));
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED && !by_data) {
			/* The HelloAck: only valid during this call. */
			ssk->cm_hello_ack_len =
				min_t(u32, ev->param.conn.private_data_len,
				      sizeof(ssk->cm_hello_ack));
			if (ev->param.conn.private_data)
				memcpy(ssk->cm_hello_ack,
				       ev->param.conn.private_data,
				       ssk->cm_hello_ack_len);
			else
				ssk->cm_hello_ack_len = 0;
		}
		ssk->cm_ev_tail++;
	}
	spin_unlock_bh(&ssk->cm_ev_lock);
	/* An id has a handful of events in its life: cannot happen. */
	if (WARN_ON_ONCE(overflow))
		return;
	sock_hold(&ssk->sk);
	if (!queue_work(sdp_wq, &ssk->cm_work))
		sock_put(&ssk->sk);
}

int sdp_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct sock *sk = id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return sdp_cm_conn_request(sk, id, ev);
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		break;
	default:
		/* TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing to do. */
		return 0;
	}
	sdp_cm_queue(sdp_sk(sk), id, ev, false);
	return 0;
}

/*
 * A child still in SYN_RECV received its peer's first message: the peer
 * sends only once it has our REP and sent its RTU, so the connection is
 * up, whatever became of the RTU (lost, or still on its way; finding F16).
 * The child does not wait for the CM's ESTABLISHED: if the first message
 * is an AbortConn, our DREQ makes the CM drop an ESTABLISHED it queued,
 * and the child would never reach accept() (TCP queues a child whose
 * handshake completed, reset or not).  So the child queues its own
 * ESTABLISHED, handled in order with the CM's events; whichever comes
 * first establishes it.  Socket lock held (CQ poll).
 *
 * The CM must learn it too, or it re-sends the REP and finally times the
 * connection out.  Hardware raises COMM_EST for this, which the QP event
 * handler passes on; Soft-RoCE raises nothing, so sdp_comm_est_work()
 * tells the CM if its RTU has not come SDP_COMM_EST_DELAY_MS later (well
 * before the CM's first REP retry, seconds).  Not at once: on 6.12, with
 * the RTU arriving a moment later, that left Soft-RoCE's GSI QP in the
 * error state now and then, and no CM exchange with the host worked after
 * it; an RTU that is merely late never needs it.
 */
#define SDP_COMM_EST_DELAY_MS 1000

void sdp_cm_established_by_data(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct rdma_cm_event ev = { .event = RDMA_CM_EVENT_ESTABLISHED };

	sock_owned_by_me(sk);

	if (ssk->est_by_data_queued || !ssk->cm_id || !READ_ONCE(ssk->parent))
		return;
	ssk->est_by_data_queued = true;
	sdp_cm_queue(ssk, ssk->cm_id, &ev, true);
	if (!ssk->cm_est_seen) {
		sock_hold(sk);
		if (!queue_delayed_work(sdp_wq, &ssk->comm_est_work,
					msecs_to_jiffies(SDP_COMM_EST_DELAY_MS)))
			sock_put(sk);
	}
}

void sdp_comm_est_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, comm_est_work);
	struct sock *sk = &ssk->sk;

	lock_sock(sk);
	/*
	 * The id cannot go while the socket lock is held (sdp_cm_detach_res()).
	 * The CM acts on it only in REP_SENT: harmless after our own DREQ.
	 */
	if (ssk->cm_id && !ssk->cm_est_seen) {
		SDP_INC(sk, SDP_CNT_CONN_COMM_EST);
		rdma_notify(ssk->cm_id, IB_EVENT_COMM_EST);
	}
	release_sock(sk);
	sock_put(sk);
}

/*
 * A child's link to its listener ends: accept() took it (parent cleared
 * there), or it died first.  Returns the listener if this call cut the
 * link, with the listener's reference dropped.
 */
struct sock *sdp_child_unlink(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sock *parent;

	parent = xchg(&ssk->parent, NULL);
	if (!parent)
		return NULL;

	lock_sock(parent);
	if (!list_empty(&ssk->accept_node)) {
		list_del_init(&ssk->accept_node);
		sk_acceptq_removed(parent);
	} else if (!ssk->established_once && !ssk->evicted) {
		sdp_sk(parent)->pending--;
		list_del_init(&ssk->half_open_node);
	}
	release_sock(parent);
	sock_put(parent);
	return parent;
}

