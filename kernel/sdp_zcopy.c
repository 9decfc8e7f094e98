// SPDX-License-Identifier: GPL-2.0
/*
 * Zero copy: stream bytes move by RDMA between the applications' buffers.
 *
 *   source, SrcAvail:  pin + register the sender's buffer for remote read,
 *                      send SrcAvail; the sink RDMA-reads it into its own
 *                      registered buffer and answers RdmaRdCompl.
 *   sink, SinkAvail:   a receiver waiting with a large buffer registers it
 *                      for remote write and sends SinkAvail; a sender with
 *                      a large send RDMA-writes into it, then RdmaWrCompl.
 *
 * The protocol (what is due, what the peer may do, SendSM and the cancels)
 * is the core's (core/zcopy.cpp); this file owns the RDMA work requests
 * and the waiting, sdp_mr.c the registrations (pin, charge, map, REG_MR,
 * invalidate, release).  Each socket has two registrations
 * (struct sdp_zc_map): `tx` for its sending side, `rx` for its receiving
 * side, with a fast-registration MR each, allocated at connection setup.
 * A transfer's lifecycle never varies:
 *
 *   collect pages (user: pin_user_pages_fast, charged to RLIMIT_MEMLOCK;
 *   kernel kvec/bvec: their pages) -> DMA map -> REG_MR with a fresh key
 *   -> RDMA (the peer's or ours) -> LOCAL_INV (fenced, signalled) -> wait
 *   for it -> unmap -> unpin.
 *
 * So when send() or recv() returns, the key the peer knew is invalid and
 * the device touches the buffer no more.  If the connection dies on the
 * way, teardown (sdp_mr_claim, sdp_mr_teardown) unmaps after the QP is
 * destroyed, and the transfer unpins only after that (res_lock).
 *
 * Anything that keeps a transfer from being registered (memlock limit,
 * unpinnable memory, registration failure) sends the bytes by bcopy
 * instead: an error never reaches the application for it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/random.h>
#include <linux/sizes.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>

#include "sdp.h"
#include "sdp_wire.h"

int sdp_zc_thresh(const struct sdp_sock *ssk)
{
	int t = READ_ONCE(ssk->zcopy_thresh);

	return t >= 0 ? t : READ_ONCE(sysctl_sdp_zcopy_thresh);
}

/*
 * Wake the socket's wait queue with `key` (NULL: everybody), and the work
 * of an asynchronous send.
 */
static void sdp_zc_wake_key(struct sock *sk, void *key)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		__wake_up(&wq->wait, TASK_NORMAL, 0, key);
	rcu_read_unlock();
	if (wq_has_sleeper(&ssk->zc_async_wait))
		wake_up_all(&ssk->zc_async_wait);
}

/* Wake every waiter, the uninterruptible ones of this file included. */
void sdp_zc_wake(struct sock *sk)
{
	sdp_zc_wake_key(sk, NULL);
}

/*
 * The socket may have become writable (a transfer ended, a wait that held
 * sends back is over): the waits and the pollers of EPOLLOUT, keyed as
 * sdp_write_space() keys them, so that a poller of input only is not
 * woken (edge-triggered epoll would report input that waited unread once
 * more, which TCP does not).
 */
static void sdp_zc_wake_writers(struct sock *sk)
{
	sdp_zc_wake_key(sk, poll_to_key(EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND));
}

/*
 * Wake the threads asleep in socket calls (the zero-copy waits among them)
 * but not poll, select or epoll: for what changes no poll mask (the
 * teardown claimed the registrations, the receive queue drained, a
 * completion for the threads that claimed the CQ).  Their entries ignore
 * the key; poll's and epoll's skip a key outside the events they wait
 * for, and no socket reports EPOLLMSG.  An edge-triggered epoll of a reset
 * socket thus sees the reset once, as TCP's does.
 */
void sdp_zc_wake_waits(struct sock *sk)
{
	sdp_zc_wake_key(sk, poll_to_key(EPOLLMSG));
}

/*
 * Where a zero-copy wait sleeps: on the socket's wait queue, or for the
 * work of an asynchronous send on one of the sdp_sock (the struct socket
 * may be gone: close()).  Socket lock held.
 */
wait_queue_head_t *sdp_zc_waitq(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	return current == ssk->zc_async_task ? &ssk->zc_async_wait :
					       sk_sleep(sk);
}

/*
 * How long one sleep of a wait for timeo may last.  The work of an
 * asynchronous send looks again every 100 ms: a state change that only
 * wakes the socket's own wait queue (sk_state_change()) reaches it then.
 */
long sdp_zc_wait_slice(struct sock *sk, long timeo)
{
	if (current != sdp_sk(sk)->zc_async_task)
		return timeo;
	return min_t(long, timeo, HZ / 10);
}

/*
 * The send queue is idle: non-blocking calls that got EAGAIN for it may go
 * on (poll says so again).  Returns the readiness that may have come
 * (sdp_poll(): an offer a receive could not take, a send held back),
 * 0 if nobody waited for it.
 */
static __poll_t sdp_zc_sq_idle_reached(struct sdp_sock *ssk)
{
	__poll_t may = 0;

	if (!sdp_sq_idle(ssk))
		return 0;
	if (ssk->zc_rx_sq_wanted)
		may |= EPOLLIN | EPOLLRDNORM;
	if (ssk->sq_idle_waiters || ssk->zc_sq_wanted)
		may |= EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
	WRITE_ONCE(ssk->zc_sq_wanted, false);
	WRITE_ONCE(ssk->zc_rx_sq_wanted, false);
	return may;
}

/*
 * A send work request completed: wake a zero-copy call waiting for an
 * idle SQ, and the pollers of what it makes ready.
 */
void sdp_zc_sq_progress(struct sock *sk)
{
	__poll_t may = sdp_zc_sq_idle_reached(sdp_sk(sk));

	if (may)
		sdp_zc_wake_key(sk, poll_to_key(may));
	sdp_zc_credit_progress(sk);
}

/* Count the zero-copy work requests of a chain that went to the QP. */
static void sdp_zc_posted(struct sdp_sock *ssk, const struct ib_send_wr *wr)
{
	for (; wr; wr = wr->next)
		if (SDP_WR_RING(wr->wr_id) == SDP_WR_ZC)
			ssk->zcb->map[(u32)wr->wr_id & SDP_ZC_WR_MAP].wr_out++;
}

/* Post on a live QP, even of a connection being reset (invalidations). */
static int sdp_zc_post_any(struct sock *sk, struct ib_send_wr *first)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	sock_owned_by_me(sk);

	if (!ssk->res_ready || ssk->qp_error)
		return -EPIPE;
	err = sdp_qp_post_send(ssk, first, SDP_FAULT_RDMA);
	if (err) {
		pr_warn_ratelimited("zero-copy post failed: %d\n", err);
		sdp_qp_failed(sk);
		return err;
	}
	sdp_zc_posted(ssk, first);
	return 0;
}

/* Post the work requests of a transfer: never on a failed connection. */
static int sdp_zc_post(struct sock *sk, struct ib_send_wr *first)
{
	if (sk->sk_err)
		return -EPIPE;
	return sdp_zc_post_any(sk, first);
}

/* A zero-copy work request completed (socket lock held). */
void sdp_zc_complete(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 tag = (u32)wc->wr_id;
	struct sdp_zc_map *map;

	sock_owned_by_me(sk);

	if (WARN_ON_ONCE((tag & SDP_ZC_WR_MAP) >= SDP_ZC_MAPS))
		return;
	map = &ssk->zcb->map[tag & SDP_ZC_WR_MAP];

	if (map->wr_out)
		map->wr_out--;
	if (wc->status != IB_WC_SUCCESS && map->wc_status == IB_WC_SUCCESS)
		map->wc_status = wc->status;
	if ((tag & 0xf00) == SDP_ZC_WR_INV)
		map->inv_done = true;
	/* The call that waits for this work request, and the pollers of
	 * what an awaited idle SQ makes ready.
	 */
	sdp_zc_wake_key(sk, poll_to_key(sdp_zc_sq_idle_reached(ssk) ?:
					EPOLLMSG));
}

/*
 * No transfer can go on: the connection failed, or was reset (after the
 * reset is reported, sk_err is clear again but the reset stays).
 */
static bool sdp_zc_dead(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	return !READ_ONCE(ssk->res_ready) || READ_ONCE(ssk->qp_error) ||
	       READ_ONCE(sk->sk_err) ||
	       (sdp_core_state(&ssk->core) & (SDP_CS_ABORTED | SDP_CS_RX_FAILED));
}

/* The QP is gone or in the error state: it moves no more data. */
static bool sdp_zc_qp_down(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	return !READ_ONCE(ssk->res_ready) || READ_ONCE(ssk->qp_error);
}

/*
 * Wait, ignoring signals, at most net.sdp.zcopy_cancel_ms for `cond` or
 * `stop`.  For waits that must end before the buffer may be given back:
 * the invalidation, the peer's answer to a cancel.  Evaluates to whether
 * cond or stop became true in time.
 */
#define sdp_zc_wait_ms(sk, cond, stop, ms)				\
({									\
	DEFINE_WAIT_FUNC(__wait, woken_wake_function);			\
	long __t = msecs_to_jiffies(ms);				\
	wait_queue_head_t *__wq = sdp_zc_waitq(sk);			\
									\
	add_wait_queue(__wq, &__wait);					\
	while (!(cond) && !(stop) && __t) {				\
		release_sock(sk);					\
		__t = wait_woken(&__wait, TASK_UNINTERRUPTIBLE, __t);	\
		lock_sock(sk);						\
	}								\
	remove_wait_queue(__wq, &__wait);				\
	(cond) || (stop);						\
})
#define sdp_zc_wait_bounded(sk, cond, stop)				\
	sdp_zc_wait_ms(sk, cond, stop, READ_ONCE(sysctl_sdp_zcopy_cancel_ms))

/*
 * How long to wait for our own work requests (a registration, an RDMA
 * Read, an invalidation queued behind sends).  The transport bounds them:
 * its retries run out (an error completion) or the send-progress watch
 * (net.sdp.tx_stall_ms) resets a connection whose sends stop completing.
 * On a lossy link a retransmission costs a local ACK timeout each, so a
 * bound as short as a cancel's would reset connections that are merely
 * slow; this one only catches a device that never completes at all.
 * Uninterruptible waits stay below the hung-task warning.
 */
static unsigned int sdp_zc_own_wr_ms(void)
{
	return min(READ_ONCE(sysctl_sdp_tx_stall_ms) +
		   READ_ONCE(sysctl_sdp_zcopy_cancel_ms), 60000);
}


/* A connection being reset waits this long for its invalidation. */
#define SDP_ZC_RESET_INV_MS 200

/*
 * The peer did not answer in time, or the invalidation never completed:
 * the transfer cannot be ended cleanly, so the connection is.
 */
static void sdp_zc_give_up(struct sock *sk, const char *what)
{
	sock_owned_by_me(sk);

	pr_warn_ratelimited("zero copy: %s timed out; resetting the connection\n",
			    what);
	SDP_INC(sk, SDP_CNT_ZC_TIMEOUTS);
	sdp_abort(sk);
	sdp_set_error(sk, ECONNRESET);
}

/*
 * Soft-RoCE (rxe, in 6.1 and 6.12) re-executes a fast registration that
 * already ran when a retransmission rewinds its send queue to an earlier
 * work request (req_retry() resets the queue index; req_next_wqe() does not
 * skip local operations already done).  The MR is valid by then, so the
 * second REG_MR fails ("rxe_reg_fast_mr: mr->lkey = ... not free") and the
 * QP goes to the error state: any packet loss during zero copy reset the
 * connection.  On such a device a REG_MR is posted only once every earlier
 * send work request has completed, where no retransmission can rewind past
 * it.  While a call waits for that, sdp_sendmsg() queues no new Data (other
 * threads' sends would keep the queue busy for as long as they write, and
 * the wait would end the connection); the waits of several calls overlap.
 * Returns -EPIPE if the connection failed meanwhile.
 */
static int sdp_zc_wait_sq_idle(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool idle;

	if (!ssk->reg_idle_sq || sdp_sq_idle(ssk))
		return 0;
	ssk->sq_idle_waiters++;
	idle = sdp_zc_wait_ms(sk, sdp_sq_idle(ssk), sdp_zc_dead(sk),
			      sdp_zc_own_wr_ms());
	/* The last one lets the senders that held back go on. */
	if (!--ssk->sq_idle_waiters)
		sdp_zc_wake_writers(sk);
	if (sdp_zc_dead(sk))
		return -EPIPE;
	if (!idle) {
		sdp_zc_give_up(sk, "send queue");
		return -EPIPE;
	}
	return 0;
}

/*
 * Every work request that could touch the registration has completed: our
 * own (REG_MR, RDMA, LOCAL_INV) flush; for a registration the peer could
 * access (SrcAvail, SinkAvail), also the receive queue's drain marker,
 * whose flush comes after the responder stopped placing or reading data.
 */
static bool sdp_zc_drained(struct sock *sk, struct sdp_zc_map *map)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	return !map->mapped || !READ_ONCE(ssk->res_ready) ||
	       (!map->wr_out && (!map->remote || ssk->rq_drained));
}

/*
 * A registration whose key the peer may still use could not be
 * invalidated: put the QP in the error state, where it answers no RDMA at
 * all, and wait for its work requests to flush before the pages go back.
 * If the QP cannot be stopped or does not flush in time, the pages stay
 * with the connection until teardown destroys the QP.  The connection
 * ends with it.
 */
static void sdp_zc_kill_qp(struct sock *sk, struct sdp_zc_map *map, bool reset)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	bool stopped = true;

	sock_owned_by_me(sk);

	if (ssk->qp && ib_modify_qp(ssk->qp, &attr, IB_QP_STATE)) {
		pr_warn_ratelimited("zero copy: cannot stop the QP\n");
		stopped = false;
	}
	ssk->qp_error = true;
	if (reset && !sk->sk_err)
		sdp_set_error(sk, ECONNRESET);
	sdp_disconnect(ssk);
	if (stopped && map->remote)
		stopped = !sdp_post_drain_recv(sk);
	if (stopped && sdp_zc_wait_ms(sk, sdp_zc_drained(sk, map), false,
				      READ_ONCE(sysctl_sdp_zcopy_cancel_ms)))
		return;
	if (map->mapped)
		sdp_mr_orphan(sk, map);
}

/*
 * Invalidate the key and give the pages back.  Also on a connection that
 * failed or is being reset: as long as its QP exists the peer could still
 * use the key, so the invalidation, or stopping the QP, comes before the
 * pages go.  Returns whether the key was invalidated cleanly.
 */
static bool sdp_zc_finish(struct sock *sk, struct sdp_zc_map *map)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool ok = false;

	sock_owned_by_me(sk);

	if (!map->reg_posted) {
		/* The device never had the key. */
		sdp_mr_release(sk, map, true);
		return true;
	}
	/*
	 * A connection being reset (sk_err) may never complete another work
	 * request (its AbortConn can be stuck in RNR retries): it waits only
	 * briefly, then its QP is stopped rather than waited behind.
	 */
	if (map->mapped && !sdp_zc_qp_down(sk)) {
		struct ib_send_wr inv;
		unsigned int ms = sk->sk_err ? SDP_ZC_RESET_INV_MS :
				  sdp_zc_own_wr_ms();

		sdp_mr_inv_wr(ssk, map, &inv);
		if (!sdp_zc_post_any(sk, &inv) &&
		    sdp_zc_wait_ms(sk, map->inv_done, sdp_zc_qp_down(sk), ms))
			ok = map->inv_done && map->wc_status == IB_WC_SUCCESS;
	}
	/*
	 * Still ours (teardown did not take it) and not cleanly invalidated:
	 * make sure the QP is in the error state.  If it went there by itself
	 * (a flush, the disconnect of a connection that ended normally) that
	 * is no error of this transfer.
	 */
	if (!ok && map->mapped && ssk->res_ready) {
		if (!ssk->qp_error && !sk->sk_err)
			SDP_INC(sk, SDP_CNT_ZC_TIMEOUTS);
		sdp_zc_kill_qp(sk, map, !ssk->qp_error);
	}
	sdp_mr_release(sk, map, true);
	return ok;
}

/* ---- source side ---------------------------------------------------------------- */

static bool sdp_zc_src_ended(struct sdp_sock *ssk)
{
	return sdp_core_src_end(&ssk->core, NULL) != SDP_SRC_PENDING;
}

/*
 * Our SrcAvail is out, or its cancel unanswered: a sender waits for the
 * peer to read it or to answer.
 */
bool sdp_zc_src_offered(struct sdp_sock *ssk)
{
	sock_owned_by_me(&ssk->sk);

	return sdp_core_src_end(&ssk->core, NULL) == SDP_SRC_PENDING;
}

static bool sdp_zc_can_offer(struct sdp_sock *ssk)
{
	struct sdp_ring *ctl = &ssk->ctl;

	return sdp_core_may_offer(&ssk->core) &&
	       ctl->post - ctl->done < ctl->count;
}

/*
 * Credits came (a message from the peer) or a control buffer is free: a
 * non-blocking zero-copy send that got EAGAIN for want of them may go on.
 */
void sdp_zc_credit_progress(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!ssk->zc_credit_wanted ||
	    (!sdp_zc_can_offer(ssk) && !sdp_zc_dead(sk)))
		return;
	WRITE_ONCE(ssk->zc_credit_wanted, false);
	sdp_zc_wake_writers(sk);
}

static bool sdp_zc_wr_compl_posted(struct sdp_sock *ssk)
{
	return !sdp_core_wr_compl_pending(&ssk->core);
}

/*
 * An asynchronous send may add its offer to those of earlier asynchronous
 * sends in flight: room for one more (net.sdp.zcopy_async_offers, the
 * peer's max_adverts), none of them ended with bytes left for bcopy (those
 * come first), no shutdown or close waits for them, and the core agrees
 * (every offer still offered or read in full).  A blocking send's offers
 * are joined by its own next ones only, and it joins nobody else's: it
 * waits for its offers and takes back what the sink did not read, which
 * must be the last bytes offered.
 */
static bool sdp_zc_async_may_join(struct sdp_sock *ssk,
				  const struct sdp_zc_async_req *async)
{
	sock_owned_by_me(&ssk->sk);

	if (ssk->zc_held_req != (async && async->hold ? async : NULL))
		return false;
	return ssk->zc_async_n && ssk->zc_async_n < ssk->zc_async_max &&
	       !ssk->zc_async_stopped && !ssk->zc_async_fin &&
	       !ssk->zc_async_close && sdp_core_src_room(&ssk->core);
}

/* As sdp_zc_async_may_join() as far as a wait can tell without the lock. */
static bool sdp_zc_async_joinable_by(const struct sdp_sock *ssk,
				     const struct sdp_zc_async_req *async)
{
	u32 n = READ_ONCE(ssk->zc_async_n);

	if (READ_ONCE(ssk->zc_held_req) != (async->hold ? async : NULL))
		return false;
	return n && n < READ_ONCE(ssk->zc_async_room) &&
	       !READ_ONCE(ssk->zc_async_stopped);
}

/*
 * Wait (interruptibly, for the send timeout) until the transmit side may
 * start a zero-copy transfer: no other transfer, nothing queued ahead (the
 * offered bytes come after it).  With `join` (the send's request), also
 * until it may add its offer to those in flight (sdp_zc_async_may_join()).
 */
static int sdp_zc_wait_tx_ready(struct sock *sk, long *timeo,
				const struct sdp_zc_async_req *join)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	for (;;) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);

		if (sdp_zc_dead(sk) || (sk->sk_shutdown & SEND_SHUTDOWN))
			return -EPIPE;
		sdp_push(sk, SDP_TXO_PUSH);
		if (!ssk->tx_busy && ssk->tx.post == ssk->tx.tail)
			return 0;
		if (join && sdp_zc_async_may_join(ssk, join))
			return 0;
		/* Its offers ended: the stream is still the held send's. */
		if (join && ssk->zc_held_req == join && !ssk->zc_async_n)
			return 0;
		if (!*timeo)
			return -EAGAIN;
		if (signal_pending(current))
			return sock_intr_errno(*timeo);
		/* Credits come with messages that wake nobody else. */
		ssk->zc_credit_wait = true;
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, timeo,
			      sdp_zc_dead(sk) ||
			      (!READ_ONCE(ssk->tx_busy) &&
			       READ_ONCE(ssk->tx.post) == READ_ONCE(ssk->tx.tail)) ||
			      (join && sdp_zc_async_joinable_by(ssk, join)) ||
			      (join && READ_ONCE(ssk->zc_held_req) == join &&
			       !READ_ONCE(ssk->zc_async_n)),
			      &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
		ssk->zc_credit_wait = false;
	}
}

/* RDMA Write of map's bytes into the peer's SinkAvail (zc), then RdmaWrCompl. */
static int sdp_zc_write(struct sock *sk, struct sdp_zc_map *map,
			const struct sdp_core_zc *zc, struct ib_reg_wr *reg)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_mr *mr = ssk->zc_mr[map->which];
	struct ib_rdma_wr wr = {};
	struct ib_sge sge = {
		.addr = mr->iova,
		.length = zc->len,
		.lkey = mr->lkey,
	};

	sock_owned_by_me(sk);

	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.wr.wr_id = SDP_WR_ID(SDP_WR_ZC, SDP_ZC_WR_RDMA | map->which);
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = zc->vaddr;
	wr.rkey = zc->rkey;
	reg->wr.next = &wr.wr;
	map->reg_posted = true;
	if (sdp_zc_post(sk, &reg->wr))
		return -EPIPE;
	SDP_INC_SK(ssk, SDP_CNT_ZC_RDMA_WRITES, rdma_writes);
	/* The RdmaWrCompl the core now has due goes right behind. */
	sdp_push(sk, 0);
	if (!sdp_zc_wait_bounded(sk, sdp_zc_wr_compl_posted(ssk), sdp_zc_dead(sk))) {
		sdp_zc_give_up(sk, "RdmaWrCompl");
		return -EPIPE;
	}
	return sdp_zc_dead(sk) ? -EPIPE : 0;
}

/* Post the SrcAvail for map's bytes behind its registration. */
static int sdp_zc_offer_post(struct sock *sk, struct sdp_zc_map *map,
			     struct ib_reg_wr *reg, bool *too_big)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_mr *mr = ssk->zc_mr[map->which];
	struct sdp_core_zc zc = { .len = map->len, .rkey = mr->rkey,
				  .vaddr = mr->iova };
	struct sdp_buf *b = sdp_ring_buf(&ssk->ctl, ssk->ctl.post);
	int len;

	sock_owned_by_me(sk);

	len = sdp_core_tx_src_avail(&ssk->core, b->data, SDP_CTL_BUF_SIZE,
				    &zc);
	/* The peer's buffers are too small for the answers: no offer. */
	*too_big = len == -SDP_CORE_ETOOBIG;
	if (*too_big)
		return 0;
	if (len < 0)
		return sdp_core_errno(sk, len);
	map->reg_posted = true;
	if (sdp_post_ctl(sk, &reg->wr, SDP_MID_SRC_AVAIL, len))
		return -EPIPE;
	map->wr_out++; /* the REG_MR */
	ssk->stats.src_avail_sent++;
	return 0;
}

/*
 * Whether our offers ended: the one of a send that waits for each
 * (sdp_zc_offer_wait()), or all the held ones of a blocking send
 * (sdp_zc_held_settle()).
 */
static bool sdp_zc_offers_ended(struct sock *sk, bool held)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	return held ? !READ_ONCE(ssk->zc_held_n) : sdp_zc_src_ended(ssk);
}

/*
 * Take our offers back (SrcAvailCancel: one covers all), unless a cancel
 * is on its way already (a SendSM asked for it), and await the sink's
 * answer at most zcopy_cancel_ms, ignoring signals: a sink that does not
 * answer in that time loses the connection.
 */
static void sdp_zc_take_back(struct sock *sk, bool held)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (sdp_core_src_cancel(&ssk->core)) {
		SDP_INC(sk, SDP_CNT_ZC_CANCELS);
		sdp_push(sk, 0);
	}
	if (!sdp_zc_wait_bounded(sk, sdp_zc_offers_ended(sk, held),
				 sdp_zc_dead(sk)))
		sdp_zc_give_up(sk, "SrcAvailCancel");
}

/*
 * Wait until our SrcAvail ends: the sink read it all, or it sent SendSM,
 * the core cancelled the rest and the sink answered the cancel.  Waiting
 * for that answer is waiting for the peer to take our messages, as a TCP
 * sender waits for a window: for as long as the peer is alive (the send
 * watch probes it while nothing is outstanding), unless a signal or
 * SO_SNDTIMEO comes (never to the work of an asynchronous send).  A fixed
 * bound here reset live peers whose answer was merely late (under loss).
 */
static int sdp_zc_offer_wait(struct sock *sk, long *timeo)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	sock_owned_by_me(sk);

	for (;;) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);
		wait_queue_head_t *wq = sdp_zc_waitq(sk);
		long slice = sdp_zc_wait_slice(sk, *timeo);

		if (sdp_zc_src_ended(ssk) || sdp_zc_dead(sk))
			return 0;
		if (!*timeo || signal_pending(current))
			break;
		add_wait_queue(wq, &wait);
		sk_wait_event(sk, &slice,
			      sdp_zc_src_ended(ssk) || sdp_zc_dead(sk), &wait);
		remove_wait_queue(wq, &wait);
		if (*timeo != MAX_SCHEDULE_TIMEOUT)
			*timeo = slice;
	}
	/*
	 * A signal or the send timeout: take the offer back, unless a
	 * cancel is on its way already (a SendSM asked for it).  The sink
	 * answers with SendSM after reporting what it read; that much was
	 * sent.  That answer is awaited, ignoring further signals, at most
	 * zcopy_cancel_ms.
	 */
	err = *timeo ? sock_intr_errno(*timeo) : -EAGAIN;
	sdp_zc_take_back(sk, false);
	return err;
}

/* SrcAvail for map's bytes; wait until the sink read them or stopped. */
static int sdp_zc_offer(struct sock *sk, struct sdp_zc_map *map,
			struct ib_reg_wr *reg, long *timeo, bool *too_big)
{
	int err = sdp_zc_offer_post(sk, map, reg, too_big);

	if (err || *too_big)
		return err;
	return sdp_zc_offer_wait(sk, timeo);
}

/* Bytes the peer took by zero copy: the stream and the counters. */
static void sdp_zc_tx_account(struct sock *sk, u32 sent, bool queued)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (!sent)
		return;
	if (!queued)
		WRITE_ONCE(ssk->snd_queued, ssk->snd_queued + sent);
	WRITE_ONCE(ssk->snd_acked, ssk->snd_acked + sent);
	SDP_ADD(sk, SDP_CNT_ZC_TX_BYTES, sent);
	SDP_INC(sk, SDP_CNT_ZC_TX_SEGS);
	ssk->stats.zc_tx_bytes += sent;
	ssk->stats.tx_bytes += sent;
	ssk->stats.zc_tx_segs++;
}

/*
 * The SrcAvail of the next bytes of an asynchronous send is posted: the
 * send goes on (or returns) now, and sdp_zc_async_work() ends the offer,
 * after the offers queued before it.  The stream stays theirs (tx_busy)
 * until then.
 */
static void sdp_zc_async_start(struct sock *sk, struct msghdr *msg,
			       size_t *copied, struct sdp_zc_async_req *async,
			       struct sdp_zc_map *map)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_zc_async_slot *slot;
	struct sdp_core_zc_status st;
	u32 len = map->len;

	sock_owned_by_me(sk);

	slot = &ssk->zcb->slot[(ssk->zc_async_head + ssk->zc_async_n) %
			       SDP_ZC_ASYNC_MAX];
	slot->map = map;
	slot->copied = async->bcopied && !async->hold;
	slot->held = async->hold;
	if (async->hold) {
		WRITE_ONCE(ssk->zc_held_req, async);
		WRITE_ONCE(ssk->zc_held_n, ssk->zc_held_n + 1);
	}
	slot->notify = NULL; /* sdp_zc_notify_send(), if the send's last */
	slot->seq = ssk->zc_async_seq++;
	async->posted = true;
	async->last_seq = slot->seq;
	slot->ubuf = async->ubuf;
	if (async->ubuf)
		net_zcopy_get(async->ubuf);
	iov_iter_advance(&msg->msg_iter, len);
	*copied += len;
	WRITE_ONCE(ssk->snd_queued, ssk->snd_queued + len);
	SDP_INC(sk, async->hold ? SDP_CNT_ZC_HELD_OFFERS :
				  SDP_CNT_ZC_ASYNC_SENDS);
	/* How many may be in flight, for poll (sdp_zc_async_joinable()). */
	sdp_core_zc_query(&ssk->core, &st);
	WRITE_ONCE(ssk->zc_async_room,
		   min(ssk->zc_async_max, st.peer_max_adverts));
	WRITE_ONCE(ssk->zc_async_n, ssk->zc_async_n + 1);
	if (ssk->zc_async_n > 1) {
		SDP_INC(sk, async->hold ? SDP_CNT_ZC_HELD_JOINED :
					  SDP_CNT_ZC_ASYNC_JOINED);
		return; /* the work is at the earlier ones */
	}
	ssk->zc_async = true;
	WRITE_ONCE(ssk->zc_async_stopped, false);
	sock_hold(sk);
	queue_work(sdp_zc_wq, &ssk->zc_async_work);
}

/*
 * A registration for the next transfer: the transmit side's, or for an
 * offer joining asynchronous ones in flight, one none of them holds.
 */
static struct sdp_zc_map *sdp_zc_tx_map(struct sdp_sock *ssk)
{
	u32 i, k;

	if (!ssk->zc_async_n)
		return &ssk->zcb->map[SDP_ZC_TX];
	for (i = 0; i < ssk->zc_nmaps; i++) {
		struct sdp_zc_map *map = &ssk->zcb->map[i];
		bool held = false;

		if (i == SDP_ZC_RX || map->mapped || !map->pages)
			continue;
		for (k = 0; k < ssk->zc_async_n; k++)
			held |= ssk->zcb->slot[(ssk->zc_async_head + k) %
					       SDP_ZC_ASYNC_MAX].map == map;
		if (!held)
			return map;
	}
	return NULL;
}

/*
 * Send the next bytes of msg by zero copy: one registration, by RDMA Write
 * into the peer's SinkAvail if it advertised one, else by SrcAvail.
 * *copied and the iterator advance by what the peer took.  The result
 * says how sdp_sendmsg() goes on; with SDP_ZC_NEXT_ERROR, *err is the
 * error to return (signal, timeout, connection gone) after whatever was
 * sent.  With `async` (MSG_ZEROCOPY, io_uring SEND_ZC), each
 * registration's offer is left in flight (SDP_ZC_NEXT_ASYNC): a large
 * send keeps up to zcopy_async_offers of them outstanding, waiting only
 * for room.  A send that may not block takes zero copy only that way; when
 * no more may go, the rest of it ends as TCP's does when its buffer is
 * full (the count so far, or EAGAIN until an offer has ended).
 */
enum sdp_zc_next sdp_zc_send(struct sock *sk, struct msghdr *msg,
			     long *timeo, size_t *copied, int *err,
			     struct sdp_zc_async_req *async)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	size_t chunk = min_t(size_t, READ_ONCE(sysctl_sdp_zcopy_chunk),
			     SDP_ZC_MAX_LEN);
	enum sdp_zc_next next = SDP_ZC_NEXT_ZCOPY;
	struct sdp_zc_map *map;
	const struct sdp_zc_async_req *joiner = NULL;
	struct sdp_core_zc zc;
	struct ib_reg_wr reg;
	bool too_big = false;
	bool asked = false;
	bool use_sink;
	bool join;
	size_t want;
	u32 sent = 0;
	int end;

	sock_owned_by_me(sk);

	/*
	 * An asynchronous send may go while earlier offers are in flight,
	 * one offer per registration, each behind the last; any other waits
	 * until they ended.  `asked`: the send asked for zero copy
	 * (MSG_ZEROCOPY, SEND_ZC), and would rather wait for it.
	 */
	if (async && (async->hold || async->ubuf ||
		      user_backed_iter(&msg->msg_iter))) {
		joiner = async;
		asked = !async->hold;
	}
	*err = 0;
	for (;;) {
		*err = sdp_zc_wait_tx_ready(sk, timeo, joiner);
		/*
		 * Data queued ahead waits for credits: a send that may not
		 * block and asked for zero copy gets EAGAIN, and POLLOUT when
		 * credits come (sdp_zc_credit_progress()).  Copying its bytes
		 * behind the queued ones would leave the next send the same
		 * queue.
		 */
		if (*err == -EAGAIN && !*timeo && asked && !ssk->tx_busy) {
			WRITE_ONCE(ssk->zc_credit_wanted, true);
			SDP_INC(sk, SDP_CNT_ZC_CREDIT_AGAIN);
			return SDP_ZC_NEXT_AGAIN;
		}
		if (*err)
			return SDP_ZC_NEXT_ERROR;
		if (!ssk->reg_idle_sq || sdp_sq_idle(ssk))
			break;
		/*
		 * A send that may not block does not wait for the queue.  One
		 * that asked for zero copy (MSG_ZEROCOPY, SEND_ZC) gets EAGAIN,
		 * as TCP's does with a full buffer, and POLLOUT once the queue
		 * is idle (sdp_zc_sq_progress()).  Copied instead, its bytes
		 * would keep the queue busy for the next send, which would be
		 * copied too: a stream of them would never see zero copy.
		 */
		if (!*timeo) {
			if (!asked)
				return SDP_ZC_NEXT_BCOPY_REST;
			WRITE_ONCE(ssk->zc_sq_wanted, true);
			SDP_INC(sk, SDP_CNT_ZC_SQ_BUSY_AGAIN);
			*err = -EAGAIN;
			return SDP_ZC_NEXT_AGAIN;
		}
		/* The lock is dropped meanwhile: look at the ring again. */
		*err = sdp_zc_wait_sq_idle(sk);
		if (*err)
			return SDP_ZC_NEXT_ERROR;
	}
	if (!sdp_mr_ready(sk))
		return SDP_ZC_NEXT_BCOPY_REST;
	/*
	 * No credit for the SrcAvail (or the RdmaWrCompl): the receiver is
	 * behind.  This chunk goes by bcopy, where waiting for credits has
	 * its rules (the credit requests of the bcopy path); zero copy is
	 * tried again for the next.  A non-blocking send that asked for zero
	 * copy gets EAGAIN instead, and POLLOUT once a credit came, for the
	 * reason of the busy queue above: copied, it would take the credits
	 * the next one needs.
	 */
	if (!sdp_zc_can_offer(ssk)) {
		if (!*timeo && asked) {
			WRITE_ONCE(ssk->zc_credit_wanted, true);
			SDP_INC(sk, SDP_CNT_ZC_CREDIT_AGAIN);
			*err = -EAGAIN;
			return SDP_ZC_NEXT_AGAIN;
		}
		return SDP_ZC_NEXT_BCOPY_CHUNK;
	}
	/*
	 * A blocking send's offers ended with bytes the sink did not read:
	 * it takes them back before anything more goes (sdp_sendmsg()).
	 */
	if (ssk->zc_held_req && (ssk->zc_held_dropped || ssk->zc_held_stopped))
		return SDP_ZC_NEXT_BCOPY_REST;
	/* Joining asynchronous offers in flight: the stream is theirs. */
	join = ssk->zc_async_n != 0;
	map = sdp_zc_tx_map(ssk);
	if (!map)
		return SDP_ZC_NEXT_BCOPY_CHUNK; /* not seen: may_join said room */
	ssk->tx_busy = true;

	/*
	 * The peer's SinkAvail takes a send that returns when written, and
	 * its notification then; with asynchronous offers in flight that
	 * would come before theirs (the last one's key may still be being
	 * invalidated, the lock dropped).  A joining send offers instead,
	 * and its number is notified after theirs.
	 */
	use_sink = !join && sdp_core_sink_len(&ssk->core);
	want = min_t(size_t, msg_data_left(msg), chunk);
	if (use_sink)
		want = min_t(size_t, want, sdp_core_sink_len(&ssk->core));
	next = SDP_ZC_NEXT_BCOPY_REST; /* unless registered */
	if (sdp_mr_collect(ssk, map, &msg->msg_iter, want, false) < 0)
		goto out;
	if (sdp_mr_register(sk, map, &reg)) {
		sdp_mr_release(sk, map, false);
		goto out;
	}
	next = SDP_ZC_NEXT_ZCOPY;
	if (use_sink && sdp_core_sink_take(&ssk->core, map->len, &zc)) {
		/* Our key stays local: the peer gives us its buffer. */
		reg.access = 0;
		map->remote = false;
		*err = sdp_zc_write(sk, map, &zc, &reg);
		if (!*err)
			sent = zc.len;
	} else if (async && (map->user || async->ubuf || async->hold)) {
		reg.access = IB_ACCESS_REMOTE_READ;
		map->remote = true;
		*err = sdp_zc_offer_post(sk, map, &reg, &too_big);
		if (!*err && !too_big) {
			sdp_zc_async_start(sk, msg, copied, async, map);
			return SDP_ZC_NEXT_ASYNC; /* tx_busy stays the offer's */
		}
		if (too_big)
			next = SDP_ZC_NEXT_BCOPY_REST;
		if (join) {
			/* The offers in flight are the work's to end. */
			sdp_zc_finish(sk, map);
			if (*err)
				next = SDP_ZC_NEXT_ERROR;
			goto out;
		}
	} else if (join) {
		/*
		 * Not one offer for the rest after all (its pages did not fit
		 * one registration): no blocking offer among asynchronous
		 * ones; a chunk by bcopy, behind them.
		 */
		sdp_zc_finish(sk, map);
		next = SDP_ZC_NEXT_BCOPY_CHUNK;
		goto out;
	} else if (!*timeo) {
		/* No asynchronous offer (kernel memory), no waiting. */
		sdp_zc_finish(sk, map);
		next = SDP_ZC_NEXT_BCOPY_REST;
		goto out;
	} else {
		reg.access = IB_ACCESS_REMOTE_READ;
		map->remote = true;
		*err = sdp_zc_offer(sk, map, &reg, timeo, &too_big);
		end = sdp_core_src_end(&ssk->core, &sent);
		if (too_big) {
			next = SDP_ZC_NEXT_BCOPY_REST;
		} else if (!*err && end == SDP_SRC_STOPPED) {
			SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_SEND_SM, fallback_send_sm);
			next = SDP_ZC_NEXT_BCOPY_REST;
		}
	}
	if (*err)
		next = SDP_ZC_NEXT_ERROR;
	sdp_zc_finish(sk, map);
	sdp_core_src_release(&ssk->core);
	if (sent) {
		iov_iter_advance(&msg->msg_iter, sent);
		*copied += sent;
		sdp_zc_tx_account(sk, sent, false);
	}
	if (next != SDP_ZC_NEXT_ERROR && sdp_zc_dead(sk)) {
		next = SDP_ZC_NEXT_ERROR;
		*err = -EPIPE;
	}
out:
	/* Asynchronous offers in flight keep the stream theirs, and so
	 * does a blocking send that waits for its offers.
	 */
	if (!ssk->zc_async_n && !ssk->zc_held_req)
		ssk->tx_busy = false;
	sdp_zc_wake_writers(sk);
	return next;
}

/*
 * The notification of a MSG_ZEROCOPY send, as it returns: with its last
 * offer if that is still in flight (sdp_zc_async_work() queues it once
 * the offer ended, after those before it), else now (every byte of the
 * send was copied or read, and its keys are invalid).  The number is
 * taken here, so the sends of one thread are numbered in order.
 */
void sdp_zc_notify_send(struct sock *sk, struct sk_buff *notify, bool copied,
			const struct sdp_zc_async_req *async)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 behind = ssk->zc_async_seq - async->last_seq;

	sock_owned_by_me(sk);

	if (async->posted && behind <= ssk->zc_async_n) {
		struct sdp_zc_async_slot *slot =
			&ssk->zcb->slot[(ssk->zc_async_head + ssk->zc_async_n -
					 behind) % SDP_ZC_ASYNC_MAX];

		slot->notify = notify;
		slot->id = (u32)atomic_fetch_inc(&sk->sk_zckey);
		slot->copied |= copied;
		return;
	}
	sdp_zc_notify(sk, notify, copied || ssk->zc_async_copied);
	ssk->zc_async_copied = false;
}

/*
 * An offer of a blocking send ended (sdp_zc_async_work()): the bytes the
 * sink did not read leave the stream, and the send takes them back
 * (sdp_zc_held_settle()).  Offers end in stream order, and whatever ended
 * one early (SendSM, a cancel, the connection's end) ends every later one
 * unread: the bytes taken back are the last ones offered.
 */
static void sdp_zc_held_ended(struct sock *sk, struct sdp_zc_map *map,
			      u32 sent, int end)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 rest = map->len - min(sent, map->len);
	/* Read after an offer that was not: not the stream sent. */
	bool out_of_order = sent && ssk->zc_held_dropped;

	sock_owned_by_me(sk);

	if (end == SDP_SRC_STOPPED)
		ssk->zc_held_stopped = true;
	if (rest) {
		ssk->zc_held_dropped += rest;
		WRITE_ONCE(ssk->snd_queued, ssk->snd_queued - rest);
	}
	if (out_of_order)
		sdp_zc_give_up(sk, "offers read out of order");
}

/*
 * Whether a blocking send with `left` bytes to go keeps several offers in
 * flight (held: it waits for them before it returns): more than one
 * registration holds (net.sdp.zcopy_chunk, the device's page list),
 * net.sdp.zcopy_pipeline is on, there are registrations for more than
 * one, and the peer takes more than one.  Else it makes one offer at a
 * time and waits for each: one offer gains nothing from the work that
 * ends held ones.
 */
bool sdp_zc_may_hold(struct sock *sk, size_t left)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_core_zc_status st;
	size_t one;

	sock_owned_by_me(sk);

	one = min_t(size_t, READ_ONCE(sysctl_sdp_zcopy_chunk),
		    (size_t)(ssk->zc_max_pages - 1) * PAGE_SIZE);
	if (!READ_ONCE(sysctl_sdp_zcopy_pipeline) || ssk->zc_async_max < 2 ||
	    left <= one)
		return false;
	sdp_core_zc_query(&ssk->core, &st);
	return st.peer_max_adverts >= 2;
}

/*
 * A blocking send's offers in flight end before it returns, or before it
 * sends anything by bcopy: its buffer is the application's again once
 * the call returns, and bytes the sink did not read (a SendSM, MSG_PEEK,
 * nobody reading) are sent again by the send itself, in order.  It waits
 * as for one offer (sdp_zc_offer_wait()): as long as the peer is alive,
 * unless a signal or SO_SNDTIMEO comes, or `cancel` says not to.  Then
 * the offers are taken back (SrcAvailCancel), their answer awaited at
 * most zcopy_cancel_ms, and what the sink read by then was sent.
 * *copied and the message's iterator go back by the bytes not read;
 * *stopped says a SendSM stopped an offer (the rest goes by bcopy).
 * Returns 0, or the signal's or timeout's error.
 */
int sdp_zc_held_settle(struct sock *sk, struct msghdr *msg, long *timeo,
		       size_t *copied, bool *stopped, bool cancel)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 dropped;
	int err = 0;

	sock_owned_by_me(sk);

	while (ssk->zc_held_n) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);
		long slice = sdp_zc_wait_slice(sk, *timeo);

		if (cancel || sdp_zc_dead(sk))
			break;
		if (!*timeo || signal_pending(current)) {
			err = *timeo ? sock_intr_errno(*timeo) : -EAGAIN;
			break;
		}
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, &slice,
			      !READ_ONCE(ssk->zc_held_n) || sdp_zc_dead(sk),
			      &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
		if (*timeo != MAX_SCHEDULE_TIMEOUT)
			*timeo = slice;
	}
	if (ssk->zc_held_n && !sdp_zc_dead(sk))
		sdp_zc_take_back(sk, true);
	/*
	 * Ended, or the connection did: the work ends the offers at once
	 * then (its own waits are bounded).  Their count is known only
	 * once it has.
	 */
	while (ssk->zc_held_n)
		sdp_zc_wait_ms(sk, !ssk->zc_held_n, false, 1000);

	dropped = ssk->zc_held_dropped;
	*stopped = ssk->zc_held_stopped;
	ssk->zc_held_dropped = 0;
	ssk->zc_held_stopped = false;
	WRITE_ONCE(ssk->zc_held_req, NULL);
	if (dropped) {
		iov_iter_revert(&msg->msg_iter, dropped);
		*copied -= dropped;
	}
	if (!ssk->zc_async_n) {
		ssk->tx_busy = false;
		sdp_zc_wake_writers(sk);
	}
	return err;
}

/*
 * End the offers of asynchronous sends (sdp_zc_async_start()), oldest
 * first, in a work of their own: wait until the sink read the offer or
 * stopped; send by bcopy what it did not read (a SendSM: MSG_PEEK, small
 * reads, nobody reading), from the still pinned pages, ahead of any later
 * byte; invalidate the key and unpin; only then notify: the buffer is the
 * application's again.  A SendSM stops every offer in flight, so the ones
 * after it send all their bytes by bcopy, in order.  A shutdown(SHUT_WR)
 * or close() that came meanwhile goes on after the last.  Nothing
 * interrupts the waits but the connection's end, which the send watch
 * brings to a dead peer, and fin_timeout to a closed socket.
 */
void sdp_zc_async_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock,
					    zc_async_work);
	struct sock *sk = &ssk->sk;
	bool destroy = false;
	bool closing;

	lock_sock(sk);
	ssk->zc_async_task = current;
	while (ssk->zc_async_n) {
		struct sdp_zc_async_slot *slot =
			&ssk->zcb->slot[ssk->zc_async_head];
		struct sdp_zc_map *map = slot->map;
		long timeo = MAX_SCHEDULE_TIMEOUT;
		u32 sent = 0;
		int end;

		sdp_zc_offer_wait(sk, &timeo);
		end = sdp_core_src_end(&ssk->core, &sent);
		/*
		 * The core's oldest offer is this slot's: released once,
		 * before its rest is queued (the later offers' state shows
		 * then), or dropped if the connection died with it pending.
		 */
		if (end == SDP_SRC_PENDING)
			sdp_core_src_drop(&ssk->core);
		else
			sdp_core_src_release(&ssk->core);
		/* Bytes left for bcopy: no new offer until all ended. */
		if (end != SDP_SRC_READ)
			WRITE_ONCE(ssk->zc_async_stopped, true);
		if (end == SDP_SRC_STOPPED && !sdp_zc_dead(sk))
			SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_SEND_SM,
				   fallback_send_sm);
		if (slot->held) {
			/* The blocking send sends its rest itself. */
			sdp_zc_held_ended(sk, map, sent, end);
		} else if (end == SDP_SRC_STOPPED && !sdp_zc_dead(sk) &&
			   sent < map->len &&
			   !sdp_tx_copy_sg(sk, map->sgl, map->npages, sent,
					   map->len - sent)) {
			slot->copied = true;
		}
		sdp_zc_finish(sk, map);
		sdp_zc_tx_account(sk, sent, true);

		if (slot->notify) {
			sdp_zc_notify_id(sk, slot->notify, slot->id,
					 slot->copied || ssk->zc_async_copied);
			ssk->zc_async_copied = false;
		} else if (slot->copied && !slot->ubuf) {
			/* Not the send's last offer: its notification,
			 * with a later one or as it returns, says COPIED.
			 */
			ssk->zc_async_copied = true;
		}
		if (slot->ubuf)
			sdp_zc_ubuf_done(slot->ubuf, !slot->copied);
		if (slot->held)
			WRITE_ONCE(ssk->zc_held_n, ssk->zc_held_n - 1);
		memset(slot, 0, sizeof(*slot));
		ssk->zc_async_head = (ssk->zc_async_head + 1) %
				     SDP_ZC_ASYNC_MAX;
		WRITE_ONCE(ssk->zc_async_n, ssk->zc_async_n - 1);
		/* A send waiting to join, and pollers (EPOLLOUT). */
		sdp_zc_wake_writers(sk);
	}
	WRITE_ONCE(ssk->zc_async_stopped, false);
	ssk->zc_async = false;
	ssk->zc_async_task = NULL;
	/* A blocking send that waits for its offers keeps the stream. */
	ssk->tx_busy = ssk->zc_held_req != NULL;
	closing = ssk->zc_async_fin || ssk->zc_async_close;
	if (ssk->zc_async_fin) {
		ssk->zc_async_fin = false;
		sdp_shutdown_send(sk);
	}
	if (ssk->zc_async_close) {
		ssk->zc_async_close = false;
		destroy = sdp_zc_async_closed(sk);
	}
	/* Senders and pollers (POLLOUT) waited for the stream, and
	 * anybody for a shutdown or close that waited for it.
	 */
	if (closing)
		sdp_zc_wake(sk);
	else
		sdp_zc_wake_writers(sk);
	release_sock(sk);
	if (destroy)
		sdp_destroy_resources(sk);
	sock_put(sk);
}

/* ---- sink side ------------------------------------------------------------------- */

static void sdp_zc_rx_account(struct sock *sk, u32 n)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	WRITE_ONCE(ssk->rcv_nxt, ssk->rcv_nxt + n);
	WRITE_ONCE(ssk->copied_seq, ssk->copied_seq + n);
	SDP_ADD(sk, SDP_CNT_ZC_RX_BYTES, n);
	SDP_INC(sk, SDP_CNT_ZC_RX_SEGS);
	ssk->stats.zc_rx_bytes += n;
	ssk->stats.rx_bytes += n;
	ssk->stats.zc_rx_segs++;
}

/* The mirror of the offer's unread bytes, for lockless readers (poll). */
static void sdp_zc_sync_rsa(struct sdp_sock *ssk)
{
	WRITE_ONCE(ssk->rsa_avail, sdp_core_rsa_left(&ssk->core));
}

/*
 * The RDMA Reads of map's bytes, which the core has in progress
 * (sdp_core_rd_start()), one per offer they span (each offer has its own
 * key), chained between prev and next.  Returns how many.
 */
static u32 sdp_zc_read_wrs(struct sdp_sock *ssk, struct sdp_zc_map *map,
			   struct ib_rdma_wr *rd, struct ib_sge *sge,
			   struct ib_send_wr *prev, struct ib_send_wr *next)
{
	struct ib_mr *mr = ssk->zc_mr[map->which];
	struct sdp_core_zc piece;
	u32 at, i;

	BUILD_BUG_ON(2 * (SDP_ZC_MAPS - 1) + 2 + SDP_CORE_MAX_ADVERTS >
		     SDP_ZC_WRS);
	for (at = 0, i = 0; at < map->len && i < SDP_CORE_MAX_ADVERTS; i++) {
		if (!sdp_core_rsa_piece(&ssk->core, at, &piece))
			break;
		sge[i].addr = mr->iova + at;
		sge[i].length = min(piece.len, map->len - at);
		sge[i].lkey = mr->lkey;
		rd[i].wr.opcode = IB_WR_RDMA_READ;
		rd[i].wr.wr_id = SDP_WR_ID(SDP_WR_ZC,
					   SDP_ZC_WR_RDMA | map->which);
		rd[i].wr.sg_list = &sge[i];
		rd[i].wr.num_sge = 1;
		rd[i].remote_addr = piece.vaddr;
		rd[i].rkey = piece.rkey;
		prev->next = &rd[i].wr;
		prev = &rd[i].wr;
		at += sge[i].length;
	}
	prev->next = next;
	/* rd_start() took no more than the offers hold. */
	WARN_ON_ONCE(at != map->len);
	return i;
}

/*
 * The next unread bytes are the peer's SrcAvail: RDMA-read up to len -
 * *copied of them straight into the application's buffer, and on into the
 * offers queued behind it, all with one registration and their reads in
 * flight together, unless the core
 * says to give the offer up (SendSM: the source sends the bytes by bcopy):
 * MSG_PEEK, a reader of small pieces (sdp_core_rsa_next()), as does a
 * buffer that cannot be registered.  Small reads are limited because each
 * costs a registration, a round trip and an RdmaRdCompl: a header read
 * before its body is worth that, a stream read in small pieces is not (1 to
 * 100-byte reads of a 1 MiB offer took two minutes across a link, where
 * bcopy takes under a second).  Returns the bytes read (0 if none) or a
 * negative errno if the connection failed.
 */
int sdp_zc_recv_offer(struct sock *sk, struct msghdr *msg, size_t len,
		      int flags, size_t *copied)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_zc_map *map;
	struct sdp_core_zc offer;
	struct ib_send_wr inv;
	struct ib_rdma_wr rd[SDP_CORE_MAX_ADVERTS] = {};
	struct ib_sge sge[SDP_CORE_MAX_ADVERTS];
	struct ib_reg_wr reg;
	int thresh = sdp_zc_thresh(ssk);
	bool small = thresh > 0 && len - *copied < (size_t)thresh;
	size_t want;
	u32 reads;
	bool ok;

	sock_owned_by_me(sk);

	if (sdp_zc_dead(sk))
		return -EPIPE;
	if (ssk->rx_busy)
		return 0;
	/*
	 * A registration must wait for an idle send queue (rxe): a blocking
	 * reader waited in sdp_zc_recv_sq_wait(); a non-blocking one gets
	 * EAGAIN, and POLLIN once the queue is idle (poll leaves the offer
	 * out until then).  Giving the offer up instead would send every
	 * offer of a stream read by non-blocking calls (io_uring, event
	 * loops) by bcopy: the SendSM and the RdmaRdCompl keep the queue busy.
	 */
	if (ssk->reg_idle_sq && !(flags & (MSG_PEEK | MSG_TRUNC)) &&
	    sdp_core_rsa_left(&ssk->core) && sdp_mr_ready(sk) &&
	    !sdp_sq_idle(ssk)) {
		WRITE_ONCE(ssk->zc_rx_sq_wanted, true);
		SDP_INC(sk, SDP_CNT_ZC_SQ_BUSY_AGAIN);
		return 0;
	}
	/* A discard (MSG_TRUNC) has no buffer to read into either: given up
	 * as a peek is (counted with them), the bytes come by bcopy.
	 */
	switch (sdp_core_rsa_next(&ssk->core,
				  ((flags & (MSG_PEEK | MSG_TRUNC)) ?
				   SDP_RSA_PEEK : 0) |
				  (small ? SDP_RSA_SMALL : 0), &offer)) {
	case SDP_RSA_READ:
		break;
	case SDP_RSA_GIVE_UP_PEEK:
		SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_PEEK, fallback_peek);
		goto abandon;
	case SDP_RSA_GIVE_UP_SMALL:
		SDP_INC(sk, SDP_CNT_ZC_FALLBACK_SMALL_READS);
		goto abandon;
	default:
		return 0;
	}
	if (!sdp_mr_ready(sk))
		goto abandon;
	map = &ssk->zcb->map[SDP_ZC_RX];
	/* The first offer, and those behind it the buffer has room for. */
	want = min3((size_t)sdp_core_rsa_left(&ssk->core), len - *copied,
		    (size_t)READ_ONCE(sysctl_sdp_zcopy_chunk));
	if (sdp_mr_collect(ssk, map, &msg->msg_iter, want, true) < 0)
		goto abandon;
	if (sdp_mr_register(sk, map, &reg)) {
		sdp_mr_release(sk, map, false);
		goto abandon;
	}
	reg.access = IB_ACCESS_LOCAL_WRITE;
	map->remote = false;
	if (sdp_core_rd_start(&ssk->core, map->len)) {
		sdp_mr_release(sk, map, true);
		return 0;
	}
	ssk->rx_busy = true;
	sdp_mr_inv_wr(ssk, map, &inv);
	reads = sdp_zc_read_wrs(ssk, map, rd, sge, &reg.wr, &inv);
	ok = false;
	map->reg_posted = true;
	if (!sdp_zc_post(sk, &reg.wr)) {
		SDP_ADD(sk, SDP_CNT_ZC_RDMA_READS, reads);
		ssk->stats.rdma_reads += reads;
		if (!sdp_zc_wait_ms(sk, map->inv_done, sdp_zc_qp_down(sk),
				    sdp_zc_own_wr_ms()))
			sdp_zc_give_up(sk, "RDMA Read");
		ok = map->inv_done && map->wc_status == IB_WC_SUCCESS;
	}
	sdp_core_rd_done(&ssk->core, ok ? map->len : 0);
	want = map->len;
	/* The read and its invalidation did not both complete: stop the QP
	 * before the pages go (the read could still land).
	 */
	if (!ok && map->mapped && ssk->res_ready)
		sdp_zc_kill_qp(sk, map, !ssk->qp_error);
	sdp_mr_release(sk, map, true);
	ssk->rx_busy = false;
	sdp_zc_sync_rsa(ssk);
	if (ssk->res_ready && !ssk->qp_error)
		sdp_push(sk, 0); /* RdmaRdCompl */
	sdp_zc_wake_waits(sk); /* readers behind this one */
	if (!ok)
		return -EPIPE;
	iov_iter_advance(&msg->msg_iter, want);
	*copied += want;
	sdp_zc_rx_account(sk, want);
	return want;

abandon:
	sdp_core_rsa_abandon(&ssk->core);
	sdp_zc_sync_rsa(ssk);
	sdp_push(sk, 0); /* SendSM */
	return 0;
}

/*
 * Before a blocking read takes the peer's offer by RDMA Read on a device
 * whose registrations need an idle send queue (sdp_zc_wait_sq_idle()):
 * wait here, where the caller looks at the stream again afterwards.  While
 * the lock is dropped the offer may be given up (the grace timer's
 * SendSM) or cancelled and its bytes sent by bcopy, even followed by a new
 * offer: reading that one before those bytes would reorder the stream.
 * Returns 1 if it waited (the caller starts over), 0 if the read may go
 * on, or a negative errno.
 */
int sdp_zc_recv_sq_wait(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (!ssk->reg_idle_sq || sdp_sq_idle(ssk) || sdp_zc_dead(sk))
		return 0;
	return sdp_zc_wait_sq_idle(sk) ?: 1;
}

static bool sdp_zc_adv_ended(struct sdp_sock *ssk)
{
	return sdp_core_adv_end(&ssk->core, NULL) == SDP_ADV_ENDED;
}

/* The source wrote at least `need` bytes into our SinkAvails. */
static bool sdp_zc_adv_holds(struct sdp_sock *ssk, size_t need)
{
	u32 written;

	sdp_core_adv_end(&ssk->core, &written);
	return written && written >= need;
}

/*
 * Registrations for the pieces of an advertised buffer after the first:
 * those of asynchronous sends that none holds now.  They stay mapped
 * while the receive holds them, which keeps a sender from taking them
 * (sdp_zc_tx_map()); one that finds none free sends that chunk by bcopy.
 */
static u32 sdp_zc_rx_maps(struct sdp_sock *ssk, struct sdp_zc_map **maps,
			  u32 want)
{
	u32 n = 1, i, k;

	maps[0] = &ssk->zcb->map[SDP_ZC_RX];
	for (i = SDP_ZC_RX + 1; i < ssk->zc_nmaps && n < want; i++) {
		struct sdp_zc_map *map = &ssk->zcb->map[i];
		bool held = false;

		if (map->mapped || map->npages || !map->pages)
			continue;
		for (k = 0; k < ssk->zc_async_n; k++)
			held |= ssk->zcb->slot[(ssk->zc_async_head + k) %
					       SDP_ZC_ASYNC_MAX].map == map;
		if (!held)
			maps[n++] = map;
	}
	return n;
}

/*
 * A blocking receive of a large buffer is about to sleep with nothing to
 * read: advertise the buffer (SinkAvail) so that a sender can RDMA-write
 * into it.  A buffer larger than a registration (zcopy_chunk) goes out in
 * consecutive pieces, a SinkAvail each, all at once, so that the sender
 * writes into the next piece while our answer to the last is on its way;
 * up to the peer's max_adverts and the registrations free.  Waits like the
 * receive would (timeout, signals) for the writes or for the advertisement
 * to end otherwise (the sender sent bytes another way; the peer closed).
 * Once the writes hold `target` bytes, the pieces still unused are taken
 * back (one SinkAvailCancel), as a receive returns over TCP once it has
 * that much.  Returns the bytes written into the buffer, 0 if nothing was
 * advertised or written (the caller waits or reads normally), or a
 * negative errno (a signal or the timeout with nothing written).
 *
 * Receivers that keep getting their data by bcopy (small writers) stop
 * advertising for a while (sdp_core_adv_try()).
 */
int sdp_zc_recv_advertise(struct sock *sk, struct msghdr *msg, size_t len,
			  size_t target, long *timeo, size_t *copied)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_zc_map *maps[SDP_CORE_MAX_ADVERTS];
	struct ib_reg_wr reg[SDP_CORE_MAX_ADVERTS];
	u32 hdr[SDP_CORE_MAX_ADVERTS];
	size_t chunk, left, at, need;
	u32 n, built, i, written;
	bool trimmed = false;
	int err = 0;

	sock_owned_by_me(sk);

	/*
	 * Only user memory is advertised.  An RDMA Write gives the sink no
	 * completion, so nothing proves that the bytes an RdmaWrCompl claims
	 * were written: a lying peer would make recv() return the buffer's
	 * previous contents.  In a user buffer those are the application's
	 * own bytes; in kernel memory (splice's pipe pages, a kernel
	 * consumer's buffer) they may be anybody's.  Kernel memory receives by
	 * RDMA Read of the peer's SrcAvail, which completes only once the
	 * bytes have landed, or by bcopy.
	 */
	if (!user_backed_iter(&msg->msg_iter))
		return 0;
again:
	if (sdp_zc_dead(sk) || ssk->rx_busy || !*timeo ||
	    !sdp_zc_can_offer(ssk) || ssk->rcv_nxt != ssk->copied_seq ||
	    ssk->urg_state == SDP_URG_VALID || !sdp_mr_ready(sk))
		return 0;
	if (sdp_core_rsa_left(&ssk->core) ||
	    sdp_core_adv_end(&ssk->core, NULL) != SDP_ADV_NONE ||
	    !sdp_core_adv_try(&ssk->core))
		return 0;
	if (ssk->reg_idle_sq && !sdp_sq_idle(ssk)) {
		if (sdp_zc_wait_sq_idle(sk))
			return 0;
		goto again; /* the lock was dropped */
	}
	chunk = max(READ_ONCE(sysctl_sdp_zcopy_chunk), (int)PAGE_SIZE);
	left = min_t(size_t, len - *copied, SDP_ZC_MAX_LEN);
	need = target > *copied ? target - *copied : 1;
	n = min3((u32)DIV_ROUND_UP(left, chunk), sdp_core_adv_room(&ssk->core),
		 (u32)SDP_CORE_MAX_ADVERTS);
	if (!n)
		return 0;
	/* Two control buffers stay free for the answers and cancels. */
	n = min_t(u32, n, max_t(int, 1, (int)ssk->ctl.count - 2 -
				    (int)(ssk->ctl.post - ssk->ctl.done)));
	n = sdp_zc_rx_maps(ssk, maps, n);
	/*
	 * Register the pieces, each from where the one before ended (a
	 * piece may come out shorter than a chunk: the end of an iovec
	 * segment, the registration's pages).
	 */
	for (i = 0, at = 0; i < n && at < left; i++) {
		struct iov_iter it = msg->msg_iter;

		iov_iter_advance(&it, at);
		if (sdp_mr_collect(ssk, maps[i], &it, min(left - at, chunk),
				   true) < 0)
			break;
		if (!maps[i]->len || sdp_mr_register(sk, maps[i], &reg[i])) {
			sdp_mr_release(sk, maps[i], false);
			break;
		}
		reg[i].access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
		maps[i]->remote = true;
		at += maps[i]->len;
	}
	n = i;
	/* Build their SinkAvails: as many as the core takes now. */
	for (built = 0; built < n; built++) {
		struct ib_mr *mr = ssk->zc_mr[maps[built]->which];
		struct sdp_buf *b = sdp_ring_buf(&ssk->ctl,
						 ssk->ctl.post + built);
		struct sdp_core_zc zc = {
			.len = maps[built]->len,
			.rkey = mr->rkey,
			.vaddr = mr->iova,
		};
		int h = sdp_core_tx_sink_avail(&ssk->core, b->data,
					       SDP_CTL_BUF_SIZE, &zc);

		if (h < 0)
			break;
		hdr[built] = h;
	}
	for (i = built; i < n; i++)
		sdp_mr_release(sk, maps[i], true);
	if (!built)
		return 0;
	/*
	 * The registrations first, then the SinkAvails: a REG_MR behind a
	 * send the transport may still retransmit could be executed again.
	 */
	for (i = 0; i < built; i++) {
		reg[i].wr.next = i + 1 < built ? &reg[i + 1].wr : NULL;
		maps[i]->reg_posted = true;
	}
	ssk->rx_busy = true;
	for (i = 0; i < built; i++) {
		if (sdp_post_ctl(sk, i ? NULL : &reg[0].wr,
				 SDP_MID_SINK_AVAIL, hdr[i])) {
			err = -EPIPE;
			goto done;
		}
		if (!i) {
			u32 k;

			for (k = 0; k < built; k++)
				maps[k]->wr_out++; /* its REG_MR */
		}
		ssk->stats.sink_avail_sent++;
	}
	for (;;) {
		DEFINE_WAIT_FUNC(wait, woken_wake_function);

		if (sdp_zc_adv_ended(ssk) || sdp_zc_dead(sk))
			break;
		if (!trimmed && sdp_zc_adv_holds(ssk, need)) {
			/* Enough for this receive: the rest back. */
			trimmed = true;
			sdp_core_adv_cancel(&ssk->core);
			sdp_push(sk, 0);
			continue;
		}
		if (!*timeo || signal_pending(current) ||
		    (sk->sk_shutdown & RCV_SHUTDOWN)) {
			/* Take the buffer back; the source answers after
			 * finishing a write it started.  shutdown(SHUT_RD)
			 * ends the wait as it ends any receive's.
			 */
			if (!(sk->sk_shutdown & RCV_SHUTDOWN))
				err = *timeo ? sock_intr_errno(*timeo) : -EAGAIN;
			sdp_core_adv_cancel(&ssk->core);
			SDP_INC(sk, SDP_CNT_ZC_CANCELS);
			sdp_push(sk, 0);
			if (!sdp_zc_wait_bounded(sk, sdp_zc_adv_ended(ssk),
						 sdp_zc_dead(sk)))
				sdp_zc_give_up(sk, "SinkAvailCancel");
			break;
		}
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, timeo,
			      sdp_zc_adv_ended(ssk) || sdp_zc_dead(sk) ||
			      (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) ||
			      (!trimmed && sdp_zc_adv_holds(ssk, need)), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
done:
	for (i = 0; i < built; i++)
		sdp_zc_finish(sk, maps[i]);
	sdp_core_adv_end(&ssk->core, &written);
	sdp_core_adv_release(&ssk->core); /* a hit or a miss for adv_try */
	ssk->rx_busy = false;
	sdp_zc_wake_waits(sk); /* readers behind this one */
	if (written) {
		iov_iter_advance(&msg->msg_iter, written);
		*copied += written;
		sdp_zc_rx_account(sk, written);
		return written;
	}
	return err;
}

/*
 * The peer's offer waits for a reader at most net.sdp.zcopy_sink_wait_ms
 * without progress.  A sender blocks until its SrcAvail is read, where over
 * TCP its send would have returned once the bytes were buffered: a receiver
 * that does not read soon (it is busy, or it is the sender itself, later,
 * in a single-threaded program) gets the bytes by bcopy instead (SendSM),
 * and the sender's send returns as TCP's would.
 */
static void sdp_zc_grace_arm(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	unsigned int ms;

	sock_owned_by_me(sk);

	ms = sdp_core_rsa_grace_start(&ssk->core);
	sock_hold(sk);
	if (!mod_delayed_work(sdp_wq, &ssk->zc_grace_work, msecs_to_jiffies(ms)))
		return;
	sock_put(sk); /* it was pending and held a reference */
}

void sdp_zc_grace_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, zc_grace_work);
	struct sock *sk = &ssk->sk;

	lock_sock(sk);
	if (!ssk->res_ready || ssk->qp_error)
		goto out;
	switch (sdp_core_rsa_grace_end(&ssk->core, ssk->rx_busy)) {
	case SDP_GRACE_AGAIN:
		sdp_zc_grace_arm(sk);
		break;
	case SDP_GRACE_ABANDONED:
		SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_NO_READER, fallback_no_reader);
		sdp_zc_sync_rsa(ssk);
		sdp_push(sk, 0); /* SendSM */
		break;
	default:
		break;
	}
out:
	release_sock(sk);
	sock_put(sk);
}

/* A zero-copy message arrived (socket lock held, completion context). */
void sdp_zc_rx_event(struct sock *sk, const struct sdp_core_rx *msg)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	switch (msg->mid) {
	case SDP_MID_SRC_AVAIL: {
		u32 before = ssk->rsa_avail;

		sdp_zc_sync_rsa(ssk);
		if (ssk->rsa_avail == before)
			break; /* given up already: the source cancels it */
		/* The first offer starts the grace period; one behind
		 * others waits in it (the period watches any progress).
		 */
		if (!before)
			sdp_zc_grace_arm(sk);
		sk->sk_data_ready(sk);
		break;
	}
	case SDP_MID_SEND_SM: {
		struct sdp_core_zc_status st;

		ssk->stats.send_sm_rcvd++;
		/* It stopped our asynchronous offers: none joins them now
		 * (their rest comes first), and poll says so at once.
		 */
		sdp_core_zc_query(&ssk->core, &st);
		if (ssk->zc_async_n && st.src_offers &&
		    (st.src_state == SDP_ZC_CANCELLING ||
		     (st.src_state == SDP_ZC_DONE && st.src_acked < st.src_len)))
			WRITE_ONCE(ssk->zc_async_stopped, true);
		break;
	}
	case SDP_MID_SRC_AVAIL_CANCEL:
		sdp_zc_sync_rsa(ssk);
		break;
	default:
		break;
	}
	/* The calls that wait for the peer's answer; what the message
	 * takes from readiness (a cancelled offer, stopped asynchronous
	 * sends) needs no wake-up, what it adds (an offer) had its own.
	 */
	sdp_zc_wake_waits(sk);
}
