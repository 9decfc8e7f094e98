// SPDX-License-Identifier: GPL-2.0
/*
 * Transmit path.  sendmsg() copies user bytes straight into registered send
 * buffers (segments of at most the peer's receive size); the core decides
 * when a queued segment may go (credits, Nagle, cork) and stamps its header.
 * A send buffer returns to the free part of its ring only when its SEND
 * completes.  Control messages (DisConn, AbortConn, credit updates,
 * keepalive probes) use their own small ring so that data waiting for
 * credits never blocks them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/uio.h>

#include "sdp.h"
#include "sdp_wire.h"

/*
 * The SGE address of a send from buffer b.  With IB_SEND_INLINE the
 * provider copies the payload into the WQE with the CPU, so it needs the
 * buffer's kernel virtual address (as SMC passes for its inline sends);
 * otherwise the HCA reads it by DMA.  Soft-RoCE cannot tell the two apart
 * (its DMA address is the virtual address): sdp_selftest_glue() checks the
 * choice with a DMA address that differs.
 */
u64 sdp_send_sge_addr(const struct sdp_buf *b, bool inl)
{
	return inl ? (u64)(uintptr_t)b->data : sdp_buf_sge_addr(b);
}

/*
 * Watch a send that never completes.  A peer grants credits only for
 * receive buffers it has posted, so an honest peer never makes our SENDs
 * wait for a buffer; one that lies in its bufs does, and how often our QP
 * retries (RNR) is the peer's choice in its CM message, up to for ever.
 * Data, DisConn, AbortConn and invalidations would all queue behind it.
 * So when sends are outstanding and none completed for
 * net.sdp.tx_stall_ms, the connection is reset with ETIMEDOUT (transport
 * retries exceeded, as TCP reports).  The bound counts from the last
 * completion (tx_progress_at), not from when the watch was armed, so a
 * link down for longer ends a connection with sends outstanding, one down
 * for less never does.
 *
 * With nothing outstanding but a sender waiting for the peer (data queued
 * for credits, or our SrcAvail not yet read), the watch probes the peer
 * as TCP's persist timer does a zero window: a keepalive probe
 * (a zero-length RDMA Write its HCA must acknowledge) every tx_stall_ms,
 * itself watched.  Without it a sender whose peer reset the connection
 * while the link was down, and whose CM disconnect was lost with it,
 * would wait for ever.  Socket lock held.
 */
static int sdp_keepalive_probe(struct sock *sk);

/* Work requests the watch waits for: sends, control messages, a probe. */
static u32 sdp_tx_outstanding(const struct sdp_sock *ssk)
{
	return (ssk->tx.post - ssk->tx.done) +
	       (ssk->ctl.post - ssk->ctl.done) + ssk->ka_probe_out;
}

static void sdp_tx_watch_queue(struct sock *sk, unsigned long delay)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	ssk->tx_watch_armed = true;
	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &ssk->tx_watch_work, delay))
		sock_put(sk);
}

static void sdp_tx_watch_arm(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (ssk->tx_watch_armed)
		return;
	sdp_tx_watch_queue(sk, msecs_to_jiffies(READ_ONCE(sysctl_sdp_tx_stall_ms)));
}

void sdp_tx_watch_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, tx_watch_work);
	struct sock *sk = &ssk->sk;
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	unsigned long deadline;
	u32 outstanding;

	lock_sock(sk);
	ssk->tx_watch_armed = false;
	if (!ssk->res_ready || ssk->qp_error)
		goto out;
	outstanding = sdp_tx_outstanding(ssk);
	if (!outstanding) {
		/* The probe arms the watch again. */
		if ((ssk->tx.tail != ssk->tx.post || ssk->zc_credit_wait ||
		     sdp_zc_src_offered(ssk)) &&
		    !sdp_keepalive_probe(sk))
			SDP_INC(sk, SDP_CNT_PERSIST_PROBES);
		goto out;
	}
	deadline = ssk->tx_progress_at +
		   msecs_to_jiffies(READ_ONCE(sysctl_sdp_tx_stall_ms));
	if (time_before(jiffies, deadline)) {
		/* progress since: watch the rest from the last completion */
		sdp_tx_watch_queue(sk, deadline - jiffies);
		goto out;
	}
	pr_warn_ratelimited("a send did not complete in %d ms (the peer takes no messages); resetting the connection\n",
			    READ_ONCE(sysctl_sdp_tx_stall_ms));
	SDP_INC(sk, SDP_CNT_ERR_TIMEOUT);
	/* Stop the retries: the stuck work requests flush. */
	ib_modify_qp(ssk->qp, &attr, IB_QP_STATE);
	ssk->qp_error = true;
	sdp_set_error(sk, ETIMEDOUT);
	sdp_disconnect(ssk);
out:
	release_sock(sk);
	sock_put(sk);
}

/* Post buffer n of ring r (len bytes), behind the work requests `before`. */
static int sdp_post_send(struct sdp_sock *ssk, struct sdp_ring *r,
			 enum sdp_wr_ring ring, u32 n, u32 len,
			 struct ib_send_wr *before)
{
	struct sdp_buf *b = sdp_ring_buf(r, n);
	bool inl = len <= ssk->max_inline;
	struct ib_sge sge = {
		.addr = sdp_send_sge_addr(b, inl),
		.length = len,
		.lkey = sdp_buf_lkey(ssk, b),
	};
	struct ib_send_wr wr = {
		.wr_id = SDP_WR_ID(ring, n),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	bool idle;
	int err;

	sock_owned_by_me(&ssk->sk);

	if (inl) {
		/* The provider memcpy()s inline data from sge.addr. */
		if (WARN_ON_ONCE(!virt_addr_valid(b->data) &&
				 !sdp_buf_big(b->data)))
			return -EFAULT;
		wr.send_flags |= IB_SEND_INLINE;
		SDP_INC(&ssk->sk, SDP_CNT_TX_INLINE);
	} else {
		sdp_buf_sync_for_device(ssk->pd->device, b, len,
					DMA_TO_DEVICE);
	}
	if (before) {
		struct ib_send_wr *last = before;

		while (last->next)
			last = last->next;
		last->next = &wr;
	}
	idle = !sdp_tx_outstanding(ssk);
	err = sdp_qp_post_send(ssk, before ?: &wr, SDP_FAULT_SEND);
	if (err) {
		pr_warn_ratelimited("ib_post_send failed: %d\n", err);
		return err;
	}
	WRITE_ONCE(ssk->tx_msgs, ssk->tx_msgs + 1);
	if (idle)
		ssk->tx_progress_at = jiffies; /* the watch counts from here */
	sdp_tx_watch_arm(&ssk->sk);
	return 0;
}

/*
 * Post the control-ring buffer at ctl->post, whose len header bytes (message
 * mid) the core just built, behind the work requests `before` (the REG_MR
 * a SrcAvail or SinkAvail advertises).  The caller checked the ring has room.
 */
int sdp_post_ctl(struct sock *sk, struct ib_send_wr *before, u8 mid, u32 len)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_ring *ctl = &ssk->ctl;
	struct sdp_buf *b = sdp_ring_buf(ctl, ctl->post);

	sock_owned_by_me(sk);

	b->mid = mid;
	b->end = len;
	if (sdp_post_send(ssk, ctl, SDP_WR_CTL, ctl->post, len, before)) {
		sdp_qp_failed(sk);
		return -EIO;
	}
	ctl->post++;
	/* Zero copy moves stream bytes too: the stream is not idle. */
	if (mid == SDP_MID_SRC_AVAIL || mid == SDP_MID_RDMA_WR_COMPL)
		ssk->tx_data_at = jiffies;
	SDP_INC_TX_MID(sk, mid);
	return 0;
}

/* A control message went: its statistics, and DisConn's step of the close. */
static void sdp_control_sent(struct sock *sk, unsigned int mid)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (mid == SDP_MID_SEND_SM)
		ssk->stats.send_sm_sent++;
	if (mid == SDP_MID_SRC_AVAIL_CANCEL || mid == SDP_MID_SINK_AVAIL_CANCEL)
		ssk->stats.cancels_sent++;
	/* From LAST_ACK the connection is done for the user (close.cpp). */
	if (mid == SDP_MID_DISCONN &&
	    sdp_close_event(sk, SDP_CLOSE_DISCONN_POSTED))
		sk->sk_state_change(sk);
	if (mid == SDP_MID_DATA)
		SDP_INC(sk, SDP_CNT_CREDIT_UPDATES);
}

int sdp_send_control(struct sock *sk, unsigned int mid)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_ring *ctl = &ssk->ctl;
	struct sdp_buf *b;
	int len;

	sock_owned_by_me(sk);

	if (!ssk->res_ready || ssk->qp_error)
		return -ENOTCONN;
	if (ctl->post - ctl->done >= ctl->count)
		return -EAGAIN;
	b = sdp_ring_buf(ctl, ctl->post);
	len = sdp_core_tx_build(&ssk->core, b->data, mid, 0, 0);
	if (len < 0)
		return -EAGAIN;
	if (sdp_post_ctl(sk, NULL, (u8)mid, len))
		return -EIO;
	sdp_control_sent(sk, mid);
	return 0;
}

static unsigned int sdp_tx_opts(struct sdp_sock *ssk)
{
	return (ssk->nodelay ? SDP_TXO_NODELAY : 0) |
	       (ssk->cork ? SDP_TXO_CORK : 0);
}

/* The rings as sdp_core_tx_next() sees them. */
static void sdp_tx_ring_facts(struct sdp_sock *ssk, unsigned int opts,
			      struct sdp_core_tx_ring *ring)
{
	struct sdp_ring *tx = &ssk->tx;
	struct sdp_ring *ctl = &ssk->ctl;

	*ring = (struct sdp_core_tx_ring){ .opts = opts };
	if (tx->post != tx->tail) {
		struct sdp_buf *b = sdp_ring_buf(tx, tx->post);

		ring->seg_bytes = b->end - SDP_BSDH_SIZE;
		ring->segs_queued = tx->tail - tx->post;
		ring->seg_urgent = b->urgent;
		ring->seg_full = b->end >= b->size;
		ring->seg_hdr = b->data;
	}
	if (ctl->post - ctl->done < ctl->count) {
		ring->ctl_hdr = sdp_ring_buf(ctl, ctl->post)->data;
		ring->ctl_size = SDP_CTL_BUF_SIZE;
	}
}

/*
 * Post what the core says goes next - queued segments, control messages
 * (several can be due at once: a zero-copy completion, then SendSM) -
 * until it says nothing more can go now.
 */
void sdp_push(struct sock *sk, unsigned int extra_opts)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_ring *tx = &ssk->tx;
	unsigned int opts = sdp_tx_opts(ssk) | extra_opts;
	struct sdp_core_tx_action act;

	sock_owned_by_me(sk);

	if (!ssk->res_ready || ssk->qp_error || !ssk->established_once)
		return;
	/* The grow work waits for an idle send queue (sdp_ringmr.c). */
	if (ssk->reg_hold)
		return;
	for (;;) {
		struct sdp_core_tx_ring ring;
		struct sdp_buf *b;

		sdp_tx_ring_facts(ssk, opts, &ring);
		if (sdp_core_tx_next(&ssk->core, &ring, &act))
			return;
		if (act.kind == SDP_TXN_CONTROL) {
			if (sdp_post_ctl(sk, NULL, (u8)act.mid, act.hdr_len))
				return;
			sdp_control_sent(sk, act.mid);
			/* A request to shrink: smaller segments from now on. */
			if (act.mid == SDP_MID_CH_RCV_BUF)
				sdp_seg_max_changed(sk);
			continue;
		}
		if (act.kind != SDP_TXN_DATA)
			break;
		b = sdp_ring_buf(tx, tx->post);
		b->mid = SDP_MID_DATA;
		if (sdp_post_send(ssk, tx, SDP_WR_TX, tx->post, b->end, NULL)) {
			sdp_qp_failed(sk);
			return;
		}
		tx->post++;
		ssk->tx_data_at = jiffies;
		SDP_INC_TX_MID(sk, SDP_MID_DATA);
		SDP_ADD(sk, SDP_CNT_TX_BYTES, ring.seg_bytes);
	}
	if (act.data == SDP_TX_HOLD) {
		SDP_INC(sk, SDP_CNT_NAGLE_HOLDS);
	} else if (act.data == SDP_TX_NO_CREDIT) {
		SDP_INC(sk, SDP_CNT_CREDIT_STALLS);
		sdp_tx_watch_arm(sk); /* it probes a silent peer */
	}
}

void sdp_tx_complete(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	bool ctl = SDP_WR_RING(wc->wr_id) == SDP_WR_CTL;
	struct sdp_ring *r = ctl ? &ssk->ctl : &ssk->tx;
	struct sdp_buf *b;

	sock_owned_by_me(sk);

	if ((u32)wc->wr_id != r->done) {
		pr_warn_ratelimited("send completion out of order\n");
		sdp_qp_failed(sk);
		return;
	}
	b = sdp_ring_buf(r, r->done);
	r->done++;
	ssk->tx_progress_at = jiffies;
	sdp_zc_sq_progress(sk);
	sdp_core_tx_done(&ssk->core, b->mid);
	if (wc->status == IB_WC_SUCCESS) {
		/* The peer's HCA acknowledged: it is alive. */
		ssk->keepalive_probes = 0;
		ssk->last_rx_jiffies = jiffies;
	}
	if (!ctl) {
		WRITE_ONCE(ssk->snd_acked,
			   ssk->snd_acked + b->end - SDP_BSDH_SIZE);
		/* Like tcp_check_space(): wake writers only if one found the
		 * ring full, so edge-triggered epoll sees no spurious edges.
		 */
		if (sk->sk_socket &&
		    test_bit(SOCK_NOSPACE, &sk->sk_socket->flags)) {
			clear_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
			sdp_write_space(sk);
		}
		return;
	}
	if (b->mid == SDP_MID_DISCONN &&
	    sdp_close_event(sk, SDP_CLOSE_DISCONN_DONE))
		sk->sk_state_change(sk);
	sdp_maybe_disconnect(sk);
}

/* ---- sendmsg -------------------------------------------------------------- */

/* Payload bytes a segment in send buffer b may carry. */
u32 sdp_tx_seg_cap(const struct sdp_sock *ssk, const struct sdp_buf *b)
{
	return min_t(u32, ssk->seg_max, b->size - SDP_BSDH_SIZE);
}

/*
 * Memory for the free send buffer b before it is filled: the replacement
 * the grow work made (sdp_buf_swap()), or a buffer of tx_size if b has
 * none yet, or one larger than tx_size from before the stream idled.
 * Charged like the rings (sdp_memcg.c).  A buffer larger than a page needs
 * a registration, which the data path does not do (sdp_ringmr.c): b takes
 * a page for now (smaller segments) and the grow work registers its
 * replacement.  So does b if tx_size bytes are not there, and a larger
 * buffer b already has is kept; with no memory at all, -ENOMEM, and the
 * send waits for memory (sdp_tx_wait_memory()).
 */
static int sdp_tx_buf_ready(struct sdp_sock *ssk, struct sdp_buf *b)
{
	struct ib_device *dev = ssk->pd->device;
	struct sdp_buf fresh = {};
	struct mem_cgroup *old_memcg;
	u32 size = ssk->tx_size;
	int err;

	sock_owned_by_me(&ssk->sk);

	sdp_buf_swap(dev, b, DMA_TO_DEVICE);
	if (b->data && b->size <= size)
		return 0;
	/*
	 * A smaller buffer for b's larger one gives memory back: it asks for
	 * no room.  A new one larger than a page is a page for now; its
	 * replacement, if the memory cgroup has room for it and its reserve,
	 * comes from the grow work.
	 */
	if (size > PAGE_SIZE) {
		if (b->data)
			return 0;
		if (sdp_memcg_room(&ssk->sk, size) && !ssk->tx_grow_failed) {
			ssk->tx_big_wanted = true;
			sdp_grow_queue(&ssk->sk);
		}
		size = PAGE_SIZE;
		SDP_INC(&ssk->sk, SDP_CNT_TX_PAGE_SEGS);
	}
	if (!sdp_charge_begin(&ssk->sk, b->data ? 0 : size, &old_memcg))
		return -ENOMEM;
	err = sdp_fault_post(SDP_FAULT_ALLOC);
	if (!err)
		err = sdp_buf_alloc(dev, &fresh, size, DMA_TO_DEVICE);
	sdp_charge_end(old_memcg);
	if (err) {
		sdp_buf_release(dev, fresh.data, fresh.dma, fresh.size,
				DMA_TO_DEVICE);
		return b->data ? 0 : -ENOMEM;
	}
	sdp_buf_release(dev, b->data, b->dma, b->size, DMA_TO_DEVICE);
	b->data = fresh.data;
	b->dma = fresh.dma;
	b->size = fresh.size;
	sdp_idle_watch(&ssk->sk);
	return 0;
}

/*
 * The queued segment new bytes can join, or a fresh one; NULL if the ring
 * is full, ERR_PTR(-ENOMEM) if a fresh one has no memory.
 */
static struct sdp_buf *sdp_tx_segment(struct sdp_sock *ssk)
{
	struct sdp_ring *tx = &ssk->tx;
	struct sdp_buf *b;
	int err;

	sock_owned_by_me(&ssk->sk);

	if (tx->tail != tx->post) {
		b = sdp_ring_buf(tx, tx->tail - 1);
		if (!b->urgent && b->end - SDP_BSDH_SIZE < sdp_tx_seg_cap(ssk, b))
			return b;
	}
	if (tx->tail - tx->done >= tx->count)
		return NULL;
	b = sdp_ring_buf(tx, tx->tail);
	err = sdp_tx_buf_ready(ssk, b);
	if (err)
		return ERR_PTR(err);
	b->end = SDP_BSDH_SIZE;
	b->urgent = 0;
	tx->tail++;
	return b;
}

/*
 * No memory for a send buffer.  As TCP's send does when an allocation
 * fails (sk_stream_wait_memory()), a send that may block waits a little,
 * on wq, and tries again for as long as it may block; one that may not gets
 * EAGAIN.  0: try again.
 */
#define SDP_TX_MEM_WAIT (HZ / 50)

static int sdp_tx_wait_memory(struct sock *sk, wait_queue_head_t *wq,
			      long *timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sdp_sock *ssk = sdp_sk(sk);
	long pause;

	sock_owned_by_me(sk);

	if (!*timeo)
		return -EAGAIN;
	if (signal_pending(current))
		return sock_intr_errno(*timeo);
	pause = min_t(long, *timeo, SDP_TX_MEM_WAIT);
	if (*timeo != MAX_SCHEDULE_TIMEOUT)
		*timeo -= pause;
	add_wait_queue(wq, &wait);
	sk_wait_event(sk, &pause,
		      READ_ONCE(sk->sk_err) || READ_ONCE(ssk->qp_error) ||
		      (READ_ONCE(sk->sk_shutdown) & SEND_SHUTDOWN), &wait);
	remove_wait_queue(wq, &wait);
	return 0;
}

static bool sdp_tx_room(struct sdp_sock *ssk)
{
	return ssk->tx.tail - ssk->tx.done < ssk->tx.count;
}

static int sdp_wait_connected(struct sock *sk, long *timeo)
{
	sock_owned_by_me(sk);

	DEFINE_WAIT_FUNC(wait, woken_wake_function);

	while ((1 << sk->sk_state) & (TCPF_SYN_SENT | TCPF_SYN_RECV)) {
		if (sk->sk_err)
			return sock_error(sk);
		if (!*timeo)
			return -EAGAIN;
		if (signal_pending(current))
			return sock_intr_errno(*timeo);
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, timeo,
			      !((1 << sk->sk_state) &
				(TCPF_SYN_SENT | TCPF_SYN_RECV)), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	return 0;
}

/*
 * Queue len bytes of sgl, from byte skip on, as Data: the rest of an offer
 * the peer stopped reading after its send() had returned (the pages are
 * still pinned).  For the asynchronous send that owns the stream
 * (tx_busy), from its work: waits for ring room as long as the connection
 * lives, as TCP's queue drains after send() returned.  The bytes were
 * counted in snd_queued when the send returned.
 */
int sdp_tx_copy_sg(struct sock *sk, struct scatterlist *sgl,
		   unsigned int nents, size_t skip, size_t len)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	long timeo = MAX_SCHEDULE_TIMEOUT;

	sock_owned_by_me(sk);
	WARN_ON_ONCE(!ssk->tx_busy);

	while (len) {
		struct sdp_buf *b;
		size_t n;

		if (sk->sk_err || ssk->qp_error || !ssk->res_ready)
			return -EPIPE;
		b = sdp_tx_segment(ssk);
		if (IS_ERR(b)) {
			/* The bytes are promised: the send returned. */
			int err = sdp_tx_wait_memory(sk, sdp_zc_waitq(sk),
						     &timeo);

			if (err)
				return err;
			continue;
		}
		if (!b) {
			DEFINE_WAIT_FUNC(wait, woken_wake_function);
			wait_queue_head_t *wq = sdp_zc_waitq(sk);
			long slice = sdp_zc_wait_slice(sk, timeo);

			sdp_push(sk, 0);
			add_wait_queue(wq, &wait);
			sk_wait_event(sk, &slice,
				      sdp_tx_room(ssk) || READ_ONCE(sk->sk_err) ||
				      READ_ONCE(ssk->qp_error), &wait);
			remove_wait_queue(wq, &wait);
			continue;
		}
		n = min_t(size_t, len,
			  sdp_tx_seg_cap(ssk, b) - (b->end - SDP_BSDH_SIZE));
		if (sg_pcopy_to_buffer(sgl, nents, (u8 *)b->data + b->end, n,
				       skip) != n) {
			if (b->end == SDP_BSDH_SIZE)
				ssk->tx.tail--;
			return -EFAULT;
		}
		b->end += n;
		skip += n;
		len -= n;
		SDP_ADD(sk, SDP_CNT_CPU_COPY_BYTES, n);
		ssk->stats.tx_bcopy_bytes += n;
		ssk->stats.tx_bytes += n;
		if (b->end - SDP_BSDH_SIZE >= sdp_tx_seg_cap(ssk, b))
			sdp_push(sk, 0);
	}
	sdp_push(sk, 0);
	return 0;
}

/* The zero-copy send ended by a signal or SO_SNDTIMEO, not a failure. */
static bool sdp_zc_send_interrupted(int err)
{
	return err == -EINTR || err == -ERESTARTSYS || err == -EAGAIN;
}

int sdp_sendmsg(struct socket *sock, struct msghdr *msg, size_t size)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	int flags = msg->msg_flags;
	size_t copied = 0, bcopy_budget = 0;
	struct sdp_zc_async_req async = {};
	struct sk_buff *notify = NULL;
	bool bcopied = false;	/* this call copied bytes (ZEROCOPY_COPIED) */
	bool async_ok, hold_ok;
	int intr_err = 0;	/* a signal or SO_SNDTIMEO ended an offer */
	bool zcopy;
	int thresh;
	long timeo;
	int err = 0;

	if (sdp_fallen_back(sk))
		return sdp_fb_sendmsg(sock, msg, size);

	lock_sock(sk);
	timeo = sock_sndtimeo(sk, flags & MSG_DONTWAIT);
	/*
	 * Zero copy for large blocking sends, and for sends that learn of
	 * their buffer's release asynchronously (MSG_ZEROCOPY, io_uring's
	 * SEND_ZC), which need not wait for the peer; urgent data goes by
	 * bcopy.
	 */
	thresh = sdp_zc_thresh(ssk);
	async_ok = READ_ONCE(sysctl_sdp_zcopy_async) &&
		   (msg->msg_ubuf || sdp_zc_notify_wanted(sk, msg, size));
	zcopy = (timeo || async_ok) && !(flags & MSG_OOB) && thresh > 0 &&
		size >= thresh;
	/*
	 * A blocking send may keep several offers in flight (held), from
	 * user or kernel memory: it waits for them before it returns.
	 */
	hold_ok = zcopy && !async_ok && timeo;
	if (!((1 << sk->sk_state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		err = sdp_wait_connected(sk, &timeo);
		if (!err && sdp_fallen_back(sk)) {
			/* The connect went over TCP meanwhile: TCP sends. */
			release_sock(sk);
			return sdp_fb_sendmsg(sock, msg, size);
		}
		if (err)
			goto do_error;
		if (!((1 << sk->sk_state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
			err = -EPIPE;
			goto do_error;
		}
	}
	/* MSG_ZEROCOPY: its notification is allocated up front (TCP's
	 * ENOBUFS) and queued as this call returns having sent something.
	 */
	if (sdp_zc_notify_wanted(sk, msg, size)) {
		notify = sdp_zc_notify_alloc(sk);
		if (!notify) {
			err = -ENOBUFS;
			goto do_error;
		}
	}

	while (msg_data_left(msg) || ssk->zc_held_req == &async) {
		enum sdp_zc_next next;
		struct sdp_buf *b;
		bool zc_now;
		size_t n;

		if (sk->sk_err || (sk->sk_shutdown & SEND_SHUTDOWN) ||
		    ssk->qp_error) {
			err = -EPIPE;
			goto do_error;
		}
		zc_now = zcopy && !bcopy_budget && msg_data_left(msg) >= thresh &&
			 sdp_mr_ready(sk);
		if (zc_now || ssk->zc_held_req == &async) {
			async.ubuf = msg->msg_ubuf;
			async.bcopied = bcopied;
			async.hold = hold_ok &&
				     (async.hold ||
				      sdp_zc_may_hold(sk, msg_data_left(msg)));
			/* Held offers end before anything but another. */
			next = zc_now ? sdp_zc_send(sk, msg, &timeo, &copied,
						    &err,
						    async_ok || async.hold ?
						    &async : NULL) :
					SDP_ZC_NEXT_ZCOPY;
			if (next != SDP_ZC_NEXT_ASYNC &&
			    ssk->zc_held_req == &async) {
				bool stopped;
				int herr;

				herr = sdp_zc_held_settle(sk, msg, &timeo,
							  &copied, &stopped,
							  next == SDP_ZC_NEXT_ERROR);
				if (stopped)
					zcopy = false;
				if (herr && next != SDP_ZC_NEXT_ERROR) {
					next = SDP_ZC_NEXT_ERROR;
					err = herr;
				}
			}
			switch (next) {
			case SDP_ZC_NEXT_ASYNC:
				/* In flight: the send's notification goes
				 * with its last offer as it returns.
				 */
				continue;
			case SDP_ZC_NEXT_ZCOPY:
				continue;
			case SDP_ZC_NEXT_BCOPY_REST:
				zcopy = false;
				continue;
			case SDP_ZC_NEXT_BCOPY_CHUNK:
				bcopy_budget = READ_ONCE(sysctl_sdp_zcopy_chunk);
				continue;
			case SDP_ZC_NEXT_AGAIN:
				goto do_error;
			default:
				break;
			}
			/*
			 * A signal or SO_SNDTIMEO before the peer read any of
			 * the offer.  TCP's send would have buffered bytes
			 * before it slept and returned their count; so the
			 * ring takes what fits now, without waiting.  Else a
			 * blocking send under a stream of signals (SA_RESTART)
			 * would start over with a new offer each time and never
			 * get a byte through.
			 */
			if (copied || !sdp_zc_send_interrupted(err) ||
			    fatal_signal_pending(current))
				goto do_error;
			intr_err = err;
			err = 0;
			timeo = 0;
			zcopy = false;
			continue;
		}
		b = sdp_tx_held(ssk) ? NULL : sdp_tx_segment(ssk);
		if (IS_ERR(b)) {
			err = sdp_tx_wait_memory(sk, sk_sleep(sk), &timeo);
			if (err)
				goto do_error;
			continue;
		}
		if (!b) {
			DEFINE_WAIT_FUNC(wait, woken_wake_function);

			/* Ring full: get queued segments moving, then wait
			 * for a send completion to free a buffer.  Or a zero-
			 * copy send of another thread owns the stream now, or
			 * a zero-copy call waits for an idle send queue
			 * (sdp_tx_held()).
			 */
			sdp_push(sk, 0);
			set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
			if (!timeo) {
				err = -EAGAIN;
				goto do_error;
			}
			if (signal_pending(current)) {
				err = sock_intr_errno(timeo);
				goto do_error;
			}
			add_wait_queue(sk_sleep(sk), &wait);
			sdp_cq_claim(sk);
			sk_wait_event(sk, &timeo,
				      (sdp_tx_room(ssk) && !sdp_tx_held(ssk)) ||
				      READ_ONCE(sk->sk_err) ||
				      (READ_ONCE(sk->sk_shutdown) & SEND_SHUTDOWN) ||
				      READ_ONCE(ssk->qp_error), &wait);
			remove_wait_queue(sk_sleep(sk), &wait);
			sdp_cq_unclaim(sk);
			continue;
		}
		n = min_t(size_t, msg_data_left(msg),
			  sdp_tx_seg_cap(ssk, b) - (b->end - SDP_BSDH_SIZE));
		if (copy_from_iter((u8 *)b->data + b->end, n, &msg->msg_iter) != n) {
			/* A fresh segment left empty goes back to the ring. */
			if (b->end == SDP_BSDH_SIZE)
				ssk->tx.tail--;
			err = -EFAULT;
			goto do_error;
		}
		b->end += n;
		copied += n;
		bcopy_budget -= min(bcopy_budget, n);
		SDP_ADD(sk, SDP_CNT_CPU_COPY_BYTES, n);
		ssk->stats.tx_bcopy_bytes += n;
		ssk->stats.tx_bytes += n;
		bcopied = true;
		WRITE_ONCE(ssk->snd_queued, ssk->snd_queued + n);
		if ((flags & MSG_OOB) && !msg_data_left(msg))
			b->urgent = 1;
		if (b->end - SDP_BSDH_SIZE >= sdp_tx_seg_cap(ssk, b))
			sdp_push(sk, 0);
	}
	/* A send completion that comes during the post (Soft-RoCE before
	 * 6.4 runs the transfer in it) is handled here, not by the work.
	 */
	sdp_cq_claim(sk);
	sdp_push(sk, (flags & MSG_MORE) ? SDP_TXO_CORK : 0);
	sdp_cq_unclaim(sk);
	if (notify)
		sdp_zc_notify_send(sk, notify, bcopied, &async);
	release_sock(sk);
	return copied;

do_error:
	if (ssk->zc_held_req == &async) {
		bool stopped;

		/* The connection failed: what the sink read was sent. */
		sdp_zc_held_settle(sk, msg, &timeo, &copied, &stopped, true);
	}
	if (copied) {
		sdp_push(sk, (flags & MSG_MORE) ? SDP_TXO_CORK : 0);
		if (notify)
			sdp_zc_notify_send(sk, notify, bcopied, &async);
		release_sock(sk);
		return copied;
	}
	kfree_skb(notify);
	if (intr_err && err == -EAGAIN)
		err = intr_err;	/* the ring had no room either */
	if (err == -EPIPE)
		err = sock_error(sk) ?: -EPIPE;
	if (err == -EPIPE && !(flags & MSG_NOSIGNAL))
		send_sig(SIGPIPE, current, 0);
	release_sock(sk);
	return err;
}

/* ---- delayed acknowledgement ------------------------------------------- */

/*
 * A partial Data message arrived: its sender may hold further small writes
 * until we acknowledge it (Nagle, see the core's tx_verdict).  Our own
 * traffic or a reader waiting for more acknowledges it sooner; this timer
 * bounds the wait for a reader that does neither (epoll, a busy
 * application), as TCP's delayed ACK does.  The core says when and for how
 * long (ack_delay_ms, sdp_core_set_timers()).
 */
void sdp_arm_ack_timer(struct sock *sk, unsigned int ms)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	/* Seen by a work that starts after this, queued or pending. */
	WRITE_ONCE(ssk->ack_owed_at, ssk->tx_msgs);
	smp_mb__before_atomic(); /* the mark before the pending bit's RMW */
	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &ssk->ack_work, msecs_to_jiffies(ms)))
		sock_put(sk); /* already pending */
}

void sdp_ack_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, ack_work);
	struct sock *sk = &ssk->sk;

	/*
	 * A message went out since the acknowledgement became owed: it
	 * carried it.  In a request/response exchange that is the rule, and
	 * the timer, armed once per delay, would otherwise take the lock
	 * from a busy-polling reader each time.  An acknowledgement that
	 * became owed again after that message moved ack_owed_at first
	 * (sdp_arm_ack_timer(), before its queue_delayed_work(), which
	 * requeues a work that already started).
	 */
	if (READ_ONCE(ssk->tx_msgs) != READ_ONCE(ssk->ack_owed_at)) {
		sock_put(sk);
		return;
	}
	lock_sock(sk);
	if (ssk->res_ready && !ssk->qp_error) {
		sdp_core_ack_request(&ssk->core);
		sdp_push(sk, 0);
	}
	release_sock(sk);
	sock_put(sk);
}

/* ---- keepalive ---------------------------------------------------------- */

/*
 * SO_KEEPALIVE: after keepidle seconds without traffic, send a probe every
 * keepintvl seconds.  The probe is a zero-length RDMA Write: it needs no
 * credit and no receive buffer of the peer (a zero-length RDMA operation
 * checks no key, IBA C9-88), and only the peer's HCA answers it, so a
 * live peer that grants no credits (a reader that stopped reading) keeps
 * its connection, as TCP's window probes do.  A peer that is gone does not
 * acknowledge: the RC transport's retries run out (RETRY_EXC_ERR, reported
 * as ETIMEDOUT), the send-progress watch finds the probe unanswered for
 * tx_stall_ms (Soft-RoCE retries for ever), or keepcnt probes go by
 * without an acknowledgment; each ends the connection with ETIMEDOUT as
 * TCP does.  The watch sends the same probe while data waits for credits.
 */
static int sdp_keepalive_probe(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = SDP_WR_ID(SDP_WR_KA, 0),
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
		},
	};
	bool idle;
	int err;

	sock_owned_by_me(sk);

	if (ssk->ka_probe_out)
		return -EBUSY;
	idle = !sdp_tx_outstanding(ssk);
	err = sdp_qp_post_send(ssk, &wr.wr, SDP_FAULT_RDMA);
	if (err) {
		sdp_qp_failed(sk);
		return err;
	}
	ssk->ka_probe_out = true;
	if (idle)
		ssk->tx_progress_at = jiffies;
	sdp_tx_watch_arm(sk);
	return 0;
}

void sdp_keepalive_complete(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->ka_probe_out = false;
	ssk->tx_progress_at = jiffies;
	sdp_zc_sq_progress(sk);
	if (wc->status == IB_WC_SUCCESS) {
		/* The peer's HCA acknowledged: it is alive. */
		ssk->keepalive_probes = 0;
		ssk->last_rx_jiffies = jiffies;
	}
}

void sdp_reset_keepalive(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	sock_hold(sk);
	if (mod_delayed_work(sdp_wq, &ssk->keepalive_work,
			     (unsigned long)ssk->keepidle * HZ))
		sock_put(sk); /* it was pending and held a reference */
}

void sdp_keepalive_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, keepalive_work);
	struct sock *sk = &ssk->sk;
	unsigned long idle, next;

	lock_sock(sk);
	if (!sock_flag(sk, SOCK_KEEPOPEN) || !sdp_established(sk) ||
	    ssk->qp_error || !ssk->res_ready)
		goto out;
	idle = jiffies - ssk->last_rx_jiffies;
	if (idle < (unsigned long)ssk->keepidle * HZ && !ssk->keepalive_probes) {
		next = (unsigned long)ssk->keepidle * HZ - idle;
	} else if (ssk->keepalive_probes >= ssk->keepcnt) {
		SDP_INC(sk, SDP_CNT_ERR_TIMEOUT);
		sdp_set_error(sk, ETIMEDOUT);
		sdp_disconnect(ssk);
		goto out;
	} else {
		/* The last probe still unanswered counts as one more. */
		if (sdp_keepalive_probe(sk) == 0)
			SDP_INC(sk, SDP_CNT_KEEPALIVE_PROBES);
		ssk->keepalive_probes++;
		next = (unsigned long)ssk->keepintvl * HZ;
	}
	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &ssk->keepalive_work, next))
		sock_put(sk);
out:
	release_sock(sk);
	sock_put(sk);
}
