// SPDX-License-Identifier: GPL-2.0
/*
 * Receive path.  The receive ring's buffers are posted to the QP; a
 * completion hands a message to the core, which validates it and says what
 * it is.  Data stays in its ring buffer until recvmsg() copies it out; then
 * the buffer is posted again.  So the buffers the peer may fill (its
 * credits) are exactly the ones the reader has freed: flow control is the
 * ring itself.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/clock.h>
#include <linux/signal.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "sdp.h"
#include "sdp_wire.h"

u32 sdp_rx_posted(struct sdp_sock *ssk)
{
	return ssk->rx.post - ssk->rx.done;
}

int sdp_rx_ring_init(struct sdp_ring *rx)
{
	u32 i;

	if (rx->cap > U16_MAX + 1)
		return -EINVAL;
	/* A page each at most but for large rings (ring_max 4096: 8 KiB). */
	rx->posted = kvcalloc(rx->cap, sizeof(*rx->posted), SDP_GFP_CONN);
	rx->unread = kvcalloc(rx->cap, sizeof(*rx->unread), SDP_GFP_CONN);
	rx->free = kvcalloc(rx->cap, sizeof(*rx->free), SDP_GFP_CONN);
	if (!rx->posted || !rx->unread || !rx->free)
		return -ENOMEM;
	for (i = 0; i < rx->count; i++)
		rx->free[i] = i;
	rx->nfree = rx->count;
	return 0;
}

void sdp_rx_ring_fini(struct sdp_ring *rx)
{
	kvfree(rx->posted);
	kvfree(rx->unread);
	kvfree(rx->free);
	rx->posted = NULL;
	rx->unread = NULL;
	rx->free = NULL;
	rx->nfree = 0;
}

static struct sdp_buf *sdp_rx_unread(struct sdp_ring *rx, u32 n)
{
	return sdp_ring_entry(rx, rx->unread[n % rx->cap]);
}

/*
 * The send buffer size the peer's buffers call for, if ours differ: larger
 * when they grew (unless that failed before), smaller when our idle stream
 * shrank them.
 */
static u32 sdp_tx_grow_want(struct sdp_sock *ssk)
{
	u32 want = min(ssk->seg_max + SDP_BSDH_SIZE, ssk->buf_size);

	if (want == ssk->tx_size || (want > ssk->tx_size && ssk->tx_grow_failed))
		return 0;
	return want;
}

void sdp_grow_queue(struct sock *sk)
{
	sock_hold(sk);
	if (!queue_work(sdp_wq, &sdp_sk(sk)->grow_work))
		sock_put(sk);
}

/*
 * Receive buffers that grow.  A connection starts with receive buffers of
 * net.sdp.buf_size_initial bytes.  The peer's ChRcvBuf asks for larger
 * ones (it streams, and its send buffers are larger): sdp_rx_grow_work()
 * allocates a larger buffer for every ring buffer smaller than the size
 * asked (b->next), and from then on a buffer is swapped for its larger one
 * before it is posted again.  The receive queue completes in posting
 * order, so once every buffer posted and not yet consumed has the new
 * size, every message the peer sends after our answer lands in one of
 * those or in a later one: the answer (ChRcvBufAck) is due then
 * (sdp_rx_grow_check()).  Without the memory the answer carries the
 * current size, a refusal the peer lives with.
 *
 * The same goes the other way when the peer's stream went idle and it asks
 * for its first size again: smaller buffers replace the large ones as
 * they come back, and the peer's credit updates consume the large buffers
 * still posted (sdp_core_tx_idle()); the answer goes once none is posted.
 */
static void sdp_rx_grow_check(struct sdp_sock *ssk)
{
	struct sdp_ring *rx = &ssk->rx;
	u32 n;

	sock_owned_by_me(&ssk->sk);

	if (!ssk->rx_grow_to || ssk->rx_size != ssk->rx_grow_to)
		return;
	for (n = rx->done; n != rx->post; n++) {
		if (sdp_ring_entry(rx, rx->posted[n % rx->cap])->size !=
		    ssk->rx_grow_to)
			return;
	}
	sdp_core_rx_resized(&ssk->core, ssk->rx_grow_to);
	ssk->rx_grow_to = 0;
}

/*
 * More receive buffers for a reader that lags, given back once it caught
 * up or the peer's stream idled: how many is the core's decision
 * (sdp_core_rx_free_buffer(), sdp_core_rx_more_wanted()); the work item
 * adds them (sdp_rx_add()), sdp_post_recvs() gives them back.
 */
static u32 sdp_rx_live(const struct sdp_ring *rx)
{
	return rx->count - rx->empty;
}

/* The ring as the core's decisions see it. */
static void sdp_rx_ring_state(struct sdp_sock *ssk, struct sdp_core_rx_ring *st)
{
	struct sdp_ring *rx = &ssk->rx;

	sock_owned_by_me(&ssk->sk);

	*st = (struct sdp_core_rx_ring){
		.live = sdp_rx_live(rx),
		.posted = sdp_rx_posted(ssk),
		.free = rx->nfree,
		.base = ssk->rx_base,
		.cap = rx->cap,
		/* Beyond the CQ's room only if it may still grow. */
		.limit = ssk->cq_grow_refused ?
				 min(rx->cap, ssk->rx_cq_room) : rx->cap,
		.unread = ssk->rcv_nxt - ssk->copied_seq,
		.unread_max = ssk->rx_unread_max,
		.trim = ssk->rx_trim,
	};
}

static bool sdp_rx_more_wanted(struct sdp_sock *ssk)
{
	struct sdp_core_rx_ring st;

	sdp_rx_ring_state(ssk, &st);
	return sdp_core_rx_more_wanted(&st);
}

/* A free buffer given back instead of posted again; true if it was. */
static bool sdp_rx_trim(struct sdp_sock *ssk, struct sdp_buf *b)
{
	struct sdp_ring *rx = &ssk->rx;
	struct ib_device *dev = ssk->pd->device;
	struct sdp_core_rx_ring st;

	/* The grow work registers replacements it holds (sdp_ringmr.c). */
	if (ssk->reg_hold)
		return false;
	sdp_rx_ring_state(ssk, &st);
	switch (sdp_core_rx_free_buffer(&st)) {
	case SDP_RX_FREE_GIVE_BACK:
		break;
	case SDP_RX_FREE_AT_BASE:
		ssk->rx_trim = false;
		/* The work item takes the CQ back to its first size. */
		if (ssk->cq->cqe > ssk->cq_base)
			sdp_grow_queue(&ssk->sk);
		return false;
	default:
		return false;
	}
	sdp_buf_release(dev, b->next, b->next_dma, b->next_size,
			DMA_FROM_DEVICE);
	sdp_buf_release(dev, b->data, b->dma, b->size, DMA_FROM_DEVICE);
	memset(b, 0, sizeof(*b));
	rx->empty++;
	SDP_INC(&ssk->sk, SDP_CNT_RX_BUFS_REMOVED);
	return true;
}

/* An entry of bufs for a new buffer: a given-back one first. */
static struct sdp_buf *sdp_rx_slot(struct sdp_ring *rx)
{
	u32 i;

	if (!rx->empty)
		return sdp_ring_entry(rx, rx->count);
	for (i = 0; i < rx->count; i++) {
		if (!sdp_ring_entry(rx, i)->data)
			return sdp_ring_entry(rx, i);
	}
	return NULL; /* not reached: empty counts such entries */
}

static void sdp_rx_more_check(struct sock *sk)
{
	if (sdp_rx_more_wanted(sdp_sk(sk)))
		sdp_grow_queue(sk);
}

/* Add receive buffers (from sdp_grow_work()); false: no memory for one. */
static bool sdp_rx_add(struct sdp_sock *ssk)
{
	struct sdp_ring *rx = &ssk->rx;
	struct ib_device *dev = ssk->pd->device;
	bool big = ssk->rx_size > PAGE_SIZE;
	struct sdp_bigbuf *regs[SDP_REG_BATCH];
	struct sdp_core_rx_ring st;
	struct mem_cgroup *old_memcg;
	u16 added[SDP_REG_BATCH];
	u64 bytes = 0;
	u32 i, add, n = 0;
	bool ok = true;

	sock_owned_by_me(&ssk->sk);

	for (i = 0; i < rx->count; i++)
		bytes += max(sdp_ring_entry(rx, i)->size,
			     sdp_ring_entry(rx, i)->next_size);
	sdp_rx_ring_state(ssk, &st);
	add = sdp_core_rx_add_count(&st);
	/* Each posted buffer needs room for its completion. */
	if (!sdp_cq_make_room(ssk, sdp_rx_live(rx) + add))
		add = min(add, ssk->rx_cq_room - min(ssk->rx_cq_room,
						     sdp_rx_live(rx)));
	if (!add)
		return true;
	if (!sdp_charge_begin(&ssk->sk, (u64)add * ssk->rx_size, &old_memcg))
		return false;
	/* The entries past the first buffers, on the first addition: more
	 * than a page of them for a large SO_RCVBUF, then vmalloc()ed.
	 */
	if (!rx->more && rx->cap > rx->first) {
		rx->more = kvcalloc(rx->cap - rx->first, sizeof(*rx->more),
				    SDP_GFP_CONN);
		if (!rx->more) {
			sdp_charge_end(old_memcg);
			return false;
		}
	}
	/* Buffers larger than a page: a batch of registrations at a time. */
	if (big)
		add = min_t(u32, add, SDP_REG_BATCH);
	for (i = 0; i < add; i++) {
		struct sdp_buf *b = sdp_rx_slot(rx);
		int err;

		if (!b || bytes + ssk->rx_size > 2 * ssk->rx_unread_max)
			break;
		if (big) {
			err = sdp_bigbuf_alloc(ssk, ssk->rx_size,
					       DMA_FROM_DEVICE, &b->data,
					       &b->big);
			b->size = err ? 0 : ssk->rx_size;
			regs[n] = b->big;
		} else {
			err = sdp_buf_alloc(dev, b, ssk->rx_size,
					    DMA_FROM_DEVICE);
		}
		if (err) {
			sdp_buf_release(dev, b->data, b->dma, b->size,
					DMA_FROM_DEVICE);
			memset(b, 0, sizeof(*b));
			ok = false;
			break;
		}
		bytes += b->size;
		if (big) {
			added[n++] = sdp_ring_index(rx, b);
		} else {
			rx->free[rx->nfree++] = sdp_ring_index(rx, b);
			SDP_INC(&ssk->sk, SDP_CNT_RX_BUFS_ADDED);
		}
		/* sdp_rx_slot() took a given-back entry if there was one. */
		if (rx->empty)
			rx->empty--;
		else
			rx->count++;
	}
	sdp_charge_end(old_memcg);
	if (big && n) {
		int err = sdp_bigbufs_register(&ssk->sk, regs, n);

		/* A REG_MR may still be queued: teardown frees them. */
		if (err == -EPIPE)
			return false;
		if (err) {
			/* Given back: sdp_rx_slot() takes them first. */
			for (i = 0; i < n; i++) {
				struct sdp_buf *b = sdp_ring_entry(rx, added[i]);

				sdp_buf_release(dev, b->data, b->dma, b->size,
						DMA_FROM_DEVICE);
				memset(b, 0, sizeof(*b));
				rx->empty++;
			}
			return false;
		}
	}
	for (i = 0; i < n; i++) {
		rx->free[rx->nfree++] = added[i];
		SDP_INC(&ssk->sk, SDP_CNT_RX_BUFS_ADDED);
	}
	return ok;
}

/* Post every free receive buffer. */
int sdp_post_recvs(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_ring *rx = &ssk->rx;
	struct ib_device *dev = ssk->pd->device;

	sock_owned_by_me(sk);

	/* A reset connection takes nothing more from the peer. */
	if (sdp_core_state(&ssk->core) & (SDP_CS_ABORTED | SDP_CS_RX_FAILED))
		return 0;
	while (rx->nfree) {
		struct sdp_buf *b = sdp_ring_entry(rx, rx->free[rx->nfree - 1]);
		struct ib_sge sge = {};
		struct ib_recv_wr wr = {
			.wr_id = SDP_WR_ID(SDP_WR_RX, rx->post),
			.sg_list = &sge,
			.num_sge = 1,
		};
		int err;

		if (sdp_rx_trim(ssk, b)) {
			rx->nfree--;
			continue;
		}
		sdp_buf_swap(dev, b, DMA_FROM_DEVICE);
		sge.addr = sdp_buf_sge_addr(b);
		sge.length = b->size;
		sge.lkey = sdp_buf_lkey(ssk, b);
		sdp_buf_sync_for_device(dev, b, b->size, DMA_FROM_DEVICE);
		b->off = 0;
		b->end = 0;
		err = sdp_fault_post(SDP_FAULT_RECV) ?:
		      ib_post_recv(ssk->qp, &wr, NULL);
		if (err) {
			pr_warn_ratelimited("ib_post_recv failed: %d\n", err);
			return err;
		}
		rx->nfree--;
		rx->posted[rx->post % rx->cap] = sdp_ring_index(rx, b);
		rx->post++;
		sdp_core_rx_posted(&ssk->core, sdp_rx_posted(ssk));
	}
	sdp_rx_grow_check(ssk);
	return 0;
}

/* Free the buffers at the head of the unread FIFO that were read out. */
static void sdp_rx_release_read(struct sdp_sock *ssk)
{
	struct sdp_ring *rx = &ssk->rx;

	sock_owned_by_me(&ssk->sk);

	while (rx->read != rx->tail) {
		struct sdp_buf *b = sdp_rx_unread(rx, rx->read);

		if (b->off != b->end)
			break;
		rx->free[rx->nfree++] = sdp_ring_index(rx, b);
		rx->read++;
	}
}

static void sdp_rx_urgent(struct sock *sk, struct sdp_buf *b, u32 inband)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->urg_byte = ((u8 *)b->data)[b->end - 1];
	/* Position of the urgent byte in the in-band stream; out of line it
	 * is taken out of the stream, as TCP does without SO_OOBINLINE.
	 */
	ssk->urg_seq = ssk->rcv_nxt + inband - 1;
	if (!sock_flag(sk, SOCK_URGINLINE))
		b->end--;
	WRITE_ONCE(ssk->urg_state, SDP_URG_VALID);
	sk_send_sigurg(sk);
}

/*
 * A small message joins the unread data of the previous one when it fits:
 * its buffer is re-posted at once instead of waiting for the reader.
 * Credits count messages, not bytes; without this, a peer writing small
 * pieces to a reader that does not read yet would run out of credits after
 * a handful of bytes where TCP's byte window still has room.  Returns the
 * buffer now holding the message's payload at its end.
 */
static struct sdp_buf *sdp_rx_coalesce(struct sdp_sock *ssk, struct sdp_buf *b)
{
	struct sdp_ring *rx = &ssk->rx;
	u32 len = b->end - b->off;
	struct sdp_buf *prev;

	sock_owned_by_me(&ssk->sk);

	if (len > ssk->rx_size / 8 || rx->read == rx->tail)
		return b;
	/* The newest unread data buffer. */
	prev = sdp_rx_unread(rx, rx->tail - 1);
	if (prev->off == prev->end || prev->end + len > prev->size)
		return b;
	memcpy((u8 *)prev->data + prev->end, (u8 *)b->data + b->off, len);
	SDP_ADD(&ssk->sk, SDP_CNT_CPU_COPY_BYTES, len);
	prev->end += len;
	b->off = b->end; /* empty: freed and re-posted by the caller */
	return prev;
}

/*
 * The peer's ChRcvBuf: grow or shrink in a work item, or answer with what
 * we have.
 */
static void sdp_rx_grow(struct sock *sk, u32 asked)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->rx_grow_to = clamp_t(u32, asked, SDP_MIN_BUF_SIZE, ssk->buf_size);
	if (ssk->rx_grow_to == ssk->rx_size)
		return;
	if (ssk->rx_grow_to < ssk->rx_size) {
		/* The peer idles: the added buffers go too. */
		ssk->rx_trim = true;
		sdp_grow_queue(sk);
		return;
	}
	ssk->rx_trim = false;
	/* Buffers added for a backlog of small messages would all grow:
	 * keep the ring within the memory sdp_rx_add() allows.  The added
	 * ones go back as they come free, as when the peer idles, so that
	 * the peer's next request (after its next idle spell) fits; without
	 * that a ring that took a backlog in small buffers would keep them,
	 * and its small size, for as long as the connection lives.
	 */
	if ((u64)sdp_rx_live(&ssk->rx) * ssk->rx_grow_to > 2 * ssk->rx_unread_max) {
		ssk->rx_grow_to = ssk->rx_size;
		ssk->rx_trim = sdp_rx_live(&ssk->rx) > ssk->rx_base;
		SDP_INC(sk, SDP_CNT_RX_GROW_REFUSED);
		return;
	}
	sdp_grow_queue(sk);
}

void sdp_rx_complete(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_ring *rx = &ssk->rx;
	struct sdp_buf *b;
	struct sdp_core_rx msg;
	int err;

	sock_owned_by_me(sk);

	if ((u32)wc->wr_id != rx->done) {
		pr_warn_ratelimited("receive completion out of order\n");
		sdp_qp_failed(sk);
		return;
	}
	b = sdp_ring_entry(rx, rx->posted[rx->done % rx->cap]);
	rx->done++;
	sdp_core_rx_posted(&ssk->core, sdp_rx_posted(ssk));
	b->off = 0;
	b->end = 0;
	if (wc->status != IB_WC_SUCCESS)
		goto consumed;
	/* The peer's first message can overtake the CM's RTU. */
	if (sk->sk_state == TCP_SYN_RECV)
		sdp_cm_established_by_data(sk);
	/*
	 * A reset connection (a protocol error, an AbortConn either way)
	 * delivers nothing more: what the peer sends after it is dropped.
	 */
	if (sdp_core_state(&ssk->core) & (SDP_CS_ABORTED | SDP_CS_RX_FAILED))
		goto consumed;
	/*
	 * Only a plain SEND carries an SDP message.  RDMA Write with
	 * immediate consumes a receive buffer without filling it (its bytes
	 * would be stale ring contents), Send with Invalidate would let the
	 * peer invalidate our zero-copy keys: both are protocol errors.
	 */
	if (wc->opcode != IB_WC_RECV ||
	    (wc->wc_flags & (IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE))) {
		pr_warn_ratelimited("protocol error from peer: receive opcode %d flags 0x%x; resetting the connection\n",
				    wc->opcode, wc->wc_flags);
		sdp_core_rx_fail(&ssk->core);
		SDP_INC(sk, SDP_CNT_ERR_PROTOCOL);
		sdp_abort(sk);
		sdp_set_error(sk, -sdp_core_errno(sk, -SDP_CORE_EPROTO));
		goto consumed;
	}

	sdp_buf_sync_for_cpu(ssk->pd->device, b, wc->byte_len,
			     DMA_FROM_DEVICE);
	/* The sysctls in force for the timers this message may start. */
	sdp_core_set_timers(&ssk->core, READ_ONCE(sysctl_sdp_ack_delay_ms),
			    READ_ONCE(sysctl_sdp_zcopy_sink_wait_ms));
	err = sdp_core_on_recv(&ssk->core, b->data, wc->byte_len, &msg);
	if (err) {
		struct sdp_core_zc_status zs;

		sdp_core_zc_query(&ssk->core, &zs);
		pr_warn_ratelimited("protocol error from peer: %s (message 0x%02x; zero copy: src %u %u/%u%s, offer %u, sink %u); resetting the connection\n",
				    sdp_core_err_name(err), msg.mid,
				    zs.src_state, zs.src_acked, zs.src_len,
				    zs.src_sink_stopped ? " stopped" : "",
				    zs.rsa_left, zs.adv_state);
		SDP_INC(sk, SDP_CNT_ERR_PROTOCOL);
		sdp_abort(sk);
		sdp_set_error(sk, -sdp_core_errno(sk, err));
		goto consumed;
	}
	SDP_INC_RX_MID(sk, msg.mid);
	ssk->last_rx_jiffies = jiffies;
	ssk->keepalive_probes = 0;

	switch (msg.kind) {
	case SDP_RX_DATA:
		if (!msg.payload_len)
			break; /* a credit update */
		if (sock_flag(sk, SOCK_DEAD)) {
			/* Data for a closed socket: TCP answers with a reset. */
			sdp_abort(sk);
			break;
		}
		b->off = msg.payload_off;
		b->end = msg.payload_off + msg.payload_len;
		{
			struct sdp_buf *holder = sdp_rx_coalesce(ssk, b);
			u32 inband = msg.payload_len;

			if (msg.urgent) {
				sdp_rx_urgent(sk, holder, msg.payload_len);
				if (!sock_flag(sk, SOCK_URGINLINE))
					inband--;
			}
			WRITE_ONCE(ssk->rcv_nxt, ssk->rcv_nxt + inband);
		}
		SDP_ADD(sk, SDP_CNT_RX_BYTES, msg.payload_len);
		if (msg.ack_timer_ms)
			sdp_arm_ack_timer(sk, msg.ack_timer_ms);
		sk->sk_data_ready(sk);
		break;
	case SDP_RX_DISCONN:
		WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | RCV_SHUTDOWN);
		sdp_close_event(sk, SDP_CLOSE_PEER_DISCONN);
		/* One edge for edge-triggered epoll (sdp_wake_pair()). */
		local_bh_disable();
		sk->sk_state_change(sk);
		sk->sk_data_ready(sk);
		local_bh_enable();
		sdp_maybe_disconnect(sk);
		break;
	case SDP_RX_ZCOPY:
		if (msg.mid == SDP_MID_SRC_AVAIL && sock_flag(sk, SOCK_DEAD)) {
			/* Stream bytes for a closed socket, as Data above. */
			sdp_abort(sk);
			break;
		}
		sdp_zc_rx_event(sk, &msg);
		break;
	case SDP_RX_RESIZE:
		if (msg.mid == SDP_MID_CH_RCV_BUF)
			sdp_rx_grow(sk, msg.resize_bytes);
		else
			sdp_seg_max_changed(sk);
		break;
	case SDP_RX_ABORT:
		SDP_INC(sk, SDP_CNT_ERR_RESET);
		sdp_set_error(sk, sk->sk_state == TCP_CLOSE_WAIT ? EPIPE :
						   ECONNRESET);
		sdp_disconnect(ssk);
		break;
	}
	/* A zero-copy send may wait for the credits this message brought. */
	if (ssk->tx_busy || ssk->zc_credit_wait)
		sdp_zc_wake_waits(sk);
	sdp_zc_credit_progress(sk);
consumed:
	if (b->off == b->end) {
		/* Nothing for the reader: the buffer is free again now. */
		rx->free[rx->nfree++] = sdp_ring_index(rx, b);
	} else {
		rx->unread[rx->tail % rx->cap] = sdp_ring_index(rx, b);
		rx->tail++;
		sdp_rx_more_check(sk);
	}
}

/* ---- recvmsg -------------------------------------------------------------- */

static int sdp_recv_urg(struct sock *sk, struct msghdr *msg, int flags)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (sock_flag(sk, SOCK_URGINLINE) || ssk->urg_state == SDP_URG_NONE ||
	    ssk->urg_state == SDP_URG_READ)
		return -EINVAL;
	if (ssk->urg_state == SDP_URG_VALID) {
		if (!(flags & MSG_PEEK))
			WRITE_ONCE(ssk->urg_state, SDP_URG_READ);
		msg->msg_flags |= MSG_OOB;
		if (msg_data_left(msg)) {
			if (copy_to_iter(&ssk->urg_byte, 1, &msg->msg_iter) != 1)
				return -EFAULT;
			return 1;
		}
		msg->msg_flags |= MSG_TRUNC;
		return 0;
	}
	return -EAGAIN;
}

/*
 * The buffer holding the unread in-band byte `skip` bytes after the oldest
 * one, and that byte's offset from the buffer's read position; NULL if it
 * has not arrived.
 */
static struct sdp_buf *sdp_rx_find(struct sdp_sock *ssk, u64 skip, u32 *off)
{
	u32 n;

	sock_owned_by_me(&ssk->sk);

	for (n = ssk->rx.read; n != ssk->rx.tail; n++) {
		struct sdp_buf *b = sdp_rx_unread(&ssk->rx, n);
		u32 avail = b->end - b->off;

		if (skip < avail) {
			*off = (u32)skip;
			return b;
		}
		skip -= avail;
	}
	return NULL;
}

/*
 * Readers blocked in recvmsg: while there is one, a SrcAvail arriving is
 * not the send/send deadlock (the core answers that with SendSM).
 */
static void sdp_rx_waiting(struct sdp_sock *ssk, int delta)
{
	sock_owned_by_me(&ssk->sk);

	ssk->readers_waiting += delta;
	sdp_core_set_reader_waiting(&ssk->core, ssk->readers_waiting > 0);
}

/* Tell the peer about re-posted buffers when the core says it is time. */
static void sdp_rx_refill(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!ssk->res_ready || ssk->qp_error)
		return;
	/* A failed post: the QP is broken, as in sdp_process_completions(). */
	if (sdp_post_recvs(sk)) {
		sdp_qp_failed(sk);
		return;
	}
	sdp_push(sk, 0);
}

static void sdp_buf_drop_next(struct ib_device *dev, struct sdp_buf *b,
			      enum dma_data_direction dir)
{
	sdp_buf_release(dev, b->next, b->next_dma, b->next_size, dir);
	b->next = NULL;
	b->next_dma = 0;
	b->next_size = 0;
}

/*
 * A buffer of `size` bytes for every buffer of ring r of another size
 * (b->next, swapped in when the buffer is free), charged like the rings
 * (sdp_memcg.c); smaller ones (`shrink`) give memory back once swapped
 * in, so they do not ask for the memory cgroup's reserve.  A replacement
 * of another size that was still waiting goes.  All or nothing: false if
 * the memory is not there, and the ring is as it was but for those.
 */
static bool sdp_ring_grow_alloc(struct sdp_sock *ssk, struct sdp_ring *r,
				u32 size, bool shrink,
				enum dma_data_direction dir)
{
	struct ib_device *dev = ssk->pd->device;
	struct mem_cgroup *old_memcg;
	bool ok = true;
	u32 i;

	sock_owned_by_me(&ssk->sk);

	if (!sdp_charge_begin(&ssk->sk, shrink ? 0 : (u64)r->count * size,
			      &old_memcg))
		return false;
	for (i = 0; i < r->count && ok; i++) {
		struct sdp_buf *b = sdp_ring_entry(r, i);
		void *data;
		u64 dma;

		if (b->next && b->next_size != size)
			sdp_buf_drop_next(dev, b, dir);
		/* A given-back receive entry, or a send entry not used since
		 * the ring was new or idle, has no buffer to replace.
		 */
		if (!b->data || b->size == size || b->next)
			continue;
		if (size > PAGE_SIZE) {
			struct sdp_bigbuf *big;

			if (sdp_bigbuf_alloc(ssk, size, dir, &data, &big)) {
				ok = false;
				break;
			}
			b->next = data;
			b->next_big = big;
			b->next_size = size;
			continue;
		}
		data = kmalloc(size, SDP_GFP_CONN);
		if (!data) {
			ok = false;
			break;
		}
		dma = ib_dma_map_single(dev, data, size, dir);
		if (ib_dma_mapping_error(dev, dma)) {
			kfree(data);
			ok = false;
			break;
		}
		b->next = data;
		b->next_dma = dma;
		b->next_size = size;
	}
	sdp_charge_end(old_memcg);
	if (ok) {
		int err = sdp_ring_register_next(&ssk->sk, r);

		if (!err)
			return true;
		/* A REG_MR may still be queued: teardown frees them. */
		if (err == -EPIPE)
			return false;
	}
	for (i = 0; i < r->count; i++)
		sdp_buf_drop_next(dev, sdp_ring_entry(r, i), dir);
	return false;
}

/*
 * The stream idled: the free send buffers go, and the next segments get
 * buffers of the connection's current size when they need them
 * (sdp_tx_buf_ready()).  An idle writer holds no send buffer.
 */
static void sdp_tx_release_free(struct sdp_sock *ssk)
{
	struct ib_device *dev = ssk->pd->device;
	struct sdp_ring *tx = &ssk->tx;
	u32 n;

	sock_owned_by_me(&ssk->sk);

	for (n = tx->tail; n != tx->done + tx->count; n++) {
		struct sdp_buf *b = sdp_ring_buf(tx, n);

		sdp_buf_drop_next(dev, b, DMA_TO_DEVICE);
		sdp_buf_release(dev, b->data, b->dma, b->size, DMA_TO_DEVICE);
		b->data = NULL;
		b->dma = 0;
		b->size = 0;
	}
}

/*
 * Buffers that shrink when the stream goes idle.  Once our segments grew
 * (the peer's buffers took larger ones), or a send took a new send buffer
 * (sdp_idle_watch()), the idle work looks again net.sdp.buf_idle_ms after
 * the stream last moved bytes (a Data segment, or a zero-copy transfer's
 * SrcAvail or RdmaWrCompl): with nothing queued or in flight on the send
 * ring, the core asks the peer to go back to its first size
 * (sdp_core_tx_idle()), and our send buffers follow the smaller segments
 * (sdp_seg_max_changed()): they are released.  Segments that never grew
 * have nothing to ask for, and the free send buffers go at once.  A later
 * stream grows the one and allocates the other again.
 */
static void sdp_idle_arm(struct sock *sk, unsigned long delay)
{
	sock_owned_by_me(sk);

	sock_hold(sk);
	if (!queue_delayed_work(sdp_wq, &sdp_sk(sk)->idle_work, delay))
		sock_put(sk); /* already pending */
}

void sdp_idle_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(to_delayed_work(work),
					    struct sdp_sock, idle_work);
	struct sock *sk = &ssk->sk;
	unsigned int ms = READ_ONCE(sysctl_sdp_buf_idle_ms);
	unsigned long idle_at;

	lock_sock(sk);
	if (!ssk->res_ready || ssk->qp_error || !ms)
		goto out;
	idle_at = ssk->tx_data_at + msecs_to_jiffies(ms);
	if (time_before(jiffies, idle_at)) {
		sdp_idle_arm(sk, idle_at - jiffies);
		goto out;
	}
	/* Segments queued or not yet completed: look again later. */
	if (ssk->tx.tail != ssk->tx.done) {
		sdp_idle_arm(sk, msecs_to_jiffies(ms));
		goto out;
	}
	if (sdp_core_tx_idle(&ssk->core))
		sdp_push(sk, 0);
	else
		sdp_tx_release_free(ssk);
out:
	release_sock(sk);
	sock_put(sk);
}

/* A send took a new send buffer: an idle writer gives it back. */
void sdp_idle_watch(struct sock *sk)
{
	unsigned int ms = READ_ONCE(sysctl_sdp_buf_idle_ms);

	if (ms && !delayed_work_pending(&sdp_sk(sk)->idle_work))
		sdp_idle_arm(sk, msecs_to_jiffies(ms));
}

/*
 * Swap every free send buffer for its replacement now: an idle stream
 * takes no slot for a fresh segment, where the swap happens otherwise
 * (sdp_tx_segment()), and would keep both.  Entries [done, tail) are in
 * flight or queued; the rest are free.
 */
static void sdp_tx_swap_free(struct sdp_sock *ssk)
{
	struct sdp_ring *tx = &ssk->tx;
	u32 n;

	sock_owned_by_me(&ssk->sk);

	for (n = tx->tail; n != tx->done + tx->count; n++)
		sdp_buf_swap(ssk->pd->device, sdp_ring_buf(tx, n),
			     DMA_TO_DEVICE);
}

/*
 * The core's seg_max changed (the connection was established, the peer's
 * buffers grew, or our request to shrink them went): send buffers follow
 * in the work item, and grown segments start the idle watch.
 */
void sdp_seg_max_changed(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 old = ssk->seg_max;
	unsigned int idle_ms = READ_ONCE(sysctl_sdp_buf_idle_ms);

	sock_owned_by_me(sk);

	ssk->seg_max = sdp_core_seg_max(&ssk->core);
	if (sdp_tx_grow_want(ssk))
		sdp_grow_queue(sk);
	if (old && ssk->seg_max > old && idle_ms)
		sdp_idle_arm(sk, msecs_to_jiffies(idle_ms));
}

/*
 * Ring buffers of another size, outside the data path: receive buffers the
 * peer asked for (sdp_rx_grow()), send buffers its buffers take
 * (sdp_seg_max_changed()), larger for a stream, smaller once it idled.
 * Each buffer is swapped for its replacement when it is free: before it is
 * posted again (receive) or filled again (send).  Send buffers do not
 * shrink that way: an idle writer's free ones go (sdp_tx_release_free()).
 */
void sdp_grow_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock, grow_work);
	struct sock *sk = &ssk->sk;
	u32 want;

	lock_sock(sk);
	if (!ssk->res_ready || ssk->qp_error)
		goto out;
	if (ssk->rx_grow_to && ssk->rx_grow_to != ssk->rx_size) {
		/* The peer may ask again while registrations wait for it. */
		u32 to = ssk->rx_grow_to;
		bool ok = to < ssk->rx_size ||
			  !sdp_fault_post(SDP_FAULT_RX_GROW);

		if (ok && sdp_ring_grow_alloc(ssk, &ssk->rx, to,
					      to < ssk->rx_size,
					      DMA_FROM_DEVICE)) {
			SDP_INC(sk, to > ssk->rx_size ?
				SDP_CNT_RX_GROWN : SDP_CNT_RX_SHRUNK);
			ssk->rx_size = to;
		} else {
			if (ssk->rx_grow_to == to)
				ssk->rx_grow_to = ssk->rx_size;
			SDP_INC(sk, SDP_CNT_RX_GROW_REFUSED);
		}
		sdp_rx_refill(sk);
	}
	/* The reader lags: more buffers, unless the memory is not there. */
	if (sdp_rx_more_wanted(ssk)) {
		if (!sdp_rx_add(ssk))
			SDP_INC(sk, SDP_CNT_RX_GROW_REFUSED);
		sdp_rx_refill(sk);
	}
	/* A registration (sdp_ringmr.c) found the connection failed. */
	if (!ssk->res_ready || ssk->qp_error)
		goto out;
	sdp_cq_shrink(ssk, sdp_rx_live(&ssk->rx));
	want = sdp_tx_grow_want(ssk);
	if (want > ssk->tx_size) {
		ssk->tx_big_wanted = false;
		if (sdp_ring_grow_alloc(ssk, &ssk->tx, want, false,
					DMA_TO_DEVICE)) {
			ssk->tx_size = want;
			sdp_tx_swap_free(ssk);
		} else {
			ssk->tx_grow_failed = true;
		}
	} else if (ssk->tx_big_wanted && !want) {
		/* Sends took pages for want of registered buffers. */
		ssk->tx_big_wanted = false;
		if (ssk->tx_size > PAGE_SIZE && !ssk->tx_grow_failed) {
			if (sdp_ring_grow_alloc(ssk, &ssk->tx, ssk->tx_size,
						false, DMA_TO_DEVICE))
				sdp_tx_swap_free(ssk);
			else
				ssk->tx_grow_failed = true;
		}
	} else if (want) {
		SDP_INC(sk, SDP_CNT_TX_SHRUNK);
		ssk->tx_grow_failed = false;
		ssk->tx_size = want;
		sdp_tx_release_free(ssk);
	}
out:
	release_sock(sk);
	sock_put(sk);
}

/*
 * Before sleeping, poll the completion queue for a while (net.sdp.
 * recv_poll_us, as OFED SDP's recv_poll): a message that arrives meanwhile
 * is handled here, without the interrupt -> work item -> wake-up round
 * trip that dominates small-message latency.  Returns true if there is
 * something new to look at.  The socket lock is dropped between polls so
 * other threads on the socket, and the completion work, get in.
 */
static bool sdp_rx_busy_poll(struct sock *sk, u64 seq)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	unsigned int poll_us = READ_ONCE(sysctl_sdp_recv_poll_us);
	bool found = false;
	u64 end;

	sock_owned_by_me(sk);

	if (!poll_us || !ssk->res_ready || !sdp_established(sk))
		return false;
	end = local_clock() + (u64)poll_us * NSEC_PER_USEC;
	sdp_cq_claim(sk);
	for (;;) {
		sdp_process_completions(sk, false);
		if (ssk->rcv_nxt != seq || sk->sk_err || ssk->rsa_avail ||
		    (sk->sk_shutdown & RCV_SHUTDOWN) || !ssk->res_ready ||
		    ssk->urg_state == SDP_URG_VALID) {
			found = true;
			break;
		}
		if (local_clock() >= end || signal_pending(current))
			break;
		release_sock(sk);
		if (need_resched())
			schedule();
		else
			cpu_relax();
		lock_sock(sk);
	}
	/* Completions that came while the handler left them to us are
	 * picked up here, and the CQ is armed again.
	 */
	sdp_cq_unclaim(sk);
	return found || ssk->rcv_nxt != seq;
}

int sdp_recvmsg(struct socket *sock, struct msghdr *msg, size_t len, int flags)
{
	struct sock *sk = sock->sk;
	struct sdp_sock *ssk = sdp_sk(sk);
	bool peek = flags & MSG_PEEK;
	u32 cursor_off = 0;
	u64 seq, peek_seq;
	size_t copied = 0;
	int target, err = 0, thresh;
	long timeo;

	if (sdp_fallen_back(sk))
		return sdp_fb_recvmsg(sock, msg, len, flags);

	if (flags & MSG_ERRQUEUE)
		return sdp_recv_error(sk, msg, len);

	lock_sock(sk);
	if (sk->sk_state == TCP_LISTEN) {
		err = -ENOTCONN;
		goto out;
	}
	if (flags & MSG_OOB) {
		err = sdp_recv_urg(sk, msg, flags);
		goto out;
	}
	timeo = sock_rcvtimeo(sk, flags & MSG_DONTWAIT);
	target = sock_rcvlowat(sk, flags & MSG_WAITALL, len);
	peek_seq = ssk->copied_seq;
	thresh = sdp_zc_thresh(ssk);

	/* A do-while, as TCP's: a zero-length read still waits or fails. */
	do {
		struct sdp_buf *b = NULL;
		u32 avail, n;

		seq = peek ? peek_seq : ssk->copied_seq;
		if (ssk->urg_state != SDP_URG_NONE && ssk->urg_seq == seq) {
			/* Stop at the urgent mark, like TCP: it starts a new
			 * read.
			 */
			if (copied)
				break;
			/* A read starting at the mark steps over the urgent
			 * byte's place (taken out of line): it is history.
			 */
			if (!peek && !sock_flag(sk, SOCK_URGINLINE))
				WRITE_ONCE(ssk->urg_state, SDP_URG_NONE);
		}

		/* The next byte to read: `skip` bytes past the oldest unread
		 * one (a peek reads ahead without consuming).
		 */
		b = sdp_rx_find(ssk, seq - ssk->copied_seq, &cursor_off);
		if (b && len) {
			avail = b->end - b->off - cursor_off;
			n = min_t(size_t, avail, len - copied);
			if (ssk->urg_state != SDP_URG_NONE && seq < ssk->urg_seq)
				n = min_t(u64, n, ssk->urg_seq - seq);
			/* MSG_TRUNC: TCP's discard, the bytes are consumed
			 * (or peeked) without a copy or a buffer.
			 */
			if (!(flags & MSG_TRUNC)) {
				if (copy_to_iter((u8 *)b->data + b->off +
						 cursor_off, n,
						 &msg->msg_iter) != n) {
					err = -EFAULT;
					break;
				}
				SDP_ADD(sk, SDP_CNT_CPU_COPY_BYTES, n);
			}
			copied += n;
			if (peek) {
				peek_seq += n;
			} else {
				b->off += n;
				WRITE_ONCE(ssk->copied_seq, ssk->copied_seq + n);
				ssk->stats.rx_bcopy_bytes += n;
				ssk->stats.rx_bytes += n;
				sdp_rx_release_read(ssk);
			}
			/* Past the mark: the urgent byte is history. */
			if (ssk->urg_state != SDP_URG_NONE &&
			    ssk->copied_seq > ssk->urg_seq)
				WRITE_ONCE(ssk->urg_state, SDP_URG_NONE);
			continue;
		}
		if (b) /* len == 0 with data waiting */
			break;
		/* Next in the stream: bytes the peer offers for RDMA Read. */
		if (ssk->rsa_avail && len > copied) {
			int r = 0;

			if (timeo && !peek)
				r = sdp_zc_recv_sq_wait(sk);
			if (r > 0)
				continue; /* the lock was dropped: start over */
			if (!r)
				r = sdp_zc_recv_offer(sk, msg, len, flags,
						      &copied);

			if (r > 0)
				continue;
			if (r < 0) {
				/* -EPIPE: the connection failed; its error
				 * may have been reported already (SO_ERROR,
				 * another call), then this read ends as
				 * TCP's does after a reset: with what it has.
				 * Bytes already copied go first and the error
				 * stays for the next call: taking it now would
				 * turn the reset into an EOF.
				 */
				if (!copied) {
					err = sock_error(sk);
					if (!err && r != -EPIPE)
						err = r;
				}
				break;
			}
			/* Given up for bcopy (MSG_PEEK, no registration):
			 * the source sends the bytes now.  A blocking call
			 * waits for them; a non-blocking one never sleeps,
			 * whatever the peer offers (EAGAIN, as TCP says
			 * before the bytes are in), nor for the idle send
			 * queue a read of the offer needs on rxe.
			 */
		}

		if (copied >= target)
			break;
		if (copied) {
			if (sk->sk_err || sk->sk_state == TCP_CLOSE ||
			    (sk->sk_shutdown & RCV_SHUTDOWN) || !timeo ||
			    signal_pending(current))
				break;
		} else {
			if (sock_flag(sk, SOCK_DONE) &&
			    !(sk->sk_err))
				break;
			if (sk->sk_err) {
				err = sock_error(sk);
				break;
			}
			if (sk->sk_shutdown & RCV_SHUTDOWN)
				break;
			if (sk->sk_state == TCP_CLOSE) {
				err = -ENOTCONN;
				break;
			}
			if (!timeo) {
				err = -EAGAIN;
				break;
			}
			if (signal_pending(current)) {
				err = sock_intr_errno(timeo);
				break;
			}
		}
		/* Give the peer the buffers freed so far before sleeping, and
		 * the acknowledgement a Nagle-holding writer waits for.
		 */
		if (ssk->res_ready)
			sdp_core_ack_request(&ssk->core);
		sdp_rx_refill(sk);
		sdp_rx_waiting(ssk, 1);
		if (sdp_rx_busy_poll(sk, peek ? peek_seq : ssk->copied_seq)) {
			sdp_rx_waiting(ssk, -1);
			continue;
		}
		/* Nothing came: a large buffer is offered to the sender. */
		if (!peek && !(flags & MSG_TRUNC) && thresh > 0 &&
		    len - copied >= (size_t)thresh && ssk->res_ready) {
			int r = sdp_zc_recv_advertise(sk, msg, len, target,
						      &timeo, &copied);

			if (r) {
				sdp_rx_waiting(ssk, -1);
				if (r > 0)
					continue;
				if (!copied) { /* as for an offer above */
					err = sock_error(sk);
					if (!err && r != -EPIPE)
						err = r;
				}
				break;
			}
		}
		{
			DEFINE_WAIT_FUNC(wait, woken_wake_function);

			/* On the queue before the claim: a completion
			 * after the claim finds this reader to wake.
			 */
			add_wait_queue(sk_sleep(sk), &wait);
			sdp_cq_claim(sk);
			sk_wait_event(sk, &timeo,
				      READ_ONCE(ssk->rcv_nxt) !=
					      (peek ? peek_seq : ssk->copied_seq) ||
				      READ_ONCE(ssk->rsa_avail) ||
				      READ_ONCE(sk->sk_err) ||
				      (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) ||
				      READ_ONCE(sk->sk_state) == TCP_CLOSE ||
				      (ssk->urg_state == SDP_URG_VALID && !copied),
				      &wait);
			remove_wait_queue(sk_sleep(sk), &wait);
			sdp_cq_unclaim(sk);
		}
		sdp_rx_waiting(ssk, -1);
	} while (copied < len);
	if (!peek && copied)
		sdp_rx_refill(sk);
out:
	release_sock(sk);
	return copied ? (int)copied : err;
}
