// SPDX-License-Identifier: GPL-2.0
/*
 * Per-connection RDMA resources: protection domain, completion queue, RC
 * queue pair and the three registered rings (receive, data send, control
 * send), created once at connection setup and freed at teardown.  The rings'
 * buffers are DMA-mapped once and used with the PD's local DMA key: the data
 * path never registers memory.  Receive and control buffers exist from the
 * start (the peer's credits are posted receives); a data send buffer is
 * allocated when a send first needs it (sdp_tx_buf_ready()), so a
 * connection that never writes holds none, and an idle writer gives its
 * buffers back (sdp_grow_work()).
 *
 * Completions: the CQ's handler (interrupt context) only schedules
 * sdp_cq_work, which polls the CQ under the socket lock and hands each
 * completion to the receive or transmit path.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/slab.h>

#include "sdp.h"
#include "sdp_wire.h"

/*
 * Connections holding RDMA resources, host-wide.  Kernel ULP objects are
 * not charged to the rdma cgroup: net.sdp.max_conns bounds the QPs, CQs
 * and MRs that SDP takes from devices shared with NFS/RDMA, nvme-rdma and
 * other users.
 */
atomic_t sdp_conns = ATOMIC_INIT(0);

#define SDP_CQ_BATCH 16
#define SDP_CQ_BUDGET 256
#define SDP_CQ_DEFERRED 0 /* bit of sdp_sock.cq_deferred */

static u32 sdp_ring_count(int sockbuf, u32 buf_size)
{
	u32 n = (u32)max(sockbuf, 0) / buf_size;

	return clamp_t(u32, n, sysctl_sdp_ring_min, sysctl_sdp_ring_max);
}

/*
 * The receive ring's room for buffers a lagging reader adds, fitted to the
 * receive queue.  Providers size work queues in powers of two, Soft-RoCE
 * with a slot of its own (max_wr + 1): room for 32 buffers and the drain
 * marker takes a queue of 64 entries, room for 30 one of 32, a page less
 * of queue per socket.  Never below the ring's first buffers, nor below
 * 7/8 of the room asked for.
 */
static u32 sdp_rx_room_fit(u32 count, u32 cap)
{
	u32 fit = rounddown_pow_of_two(cap + 2) - 2;

	if (fit < count || fit < cap - cap / 8)
		return cap;
	return fit;
}

/*
 * A ring buffer's memory, unmapped and freed (NULL: nothing).  dma is what
 * struct sdp_buf's union holds: a large buffer's descriptor (sdp_ringmr.c)
 * if data is one.
 */
void sdp_buf_release(struct ib_device *dev, void *data, u64 dma, u32 size,
		     enum dma_data_direction dir)
{
	if (!data)
		return;
	if (sdp_buf_big(data)) {
		sdp_bigbuf_free(dev, data,
				(struct sdp_bigbuf *)(uintptr_t)dma, dir);
		return;
	}
	if (dma)
		ib_dma_unmap_single(dev, dma, size, dir);
	kfree(data);
}

/*
 * A free ring buffer swapped for its replacement of another size
 * (sdp_grow_work()), if it has one that is ready: a large one once
 * registered.
 */
void sdp_buf_swap(struct ib_device *dev, struct sdp_buf *b,
		  enum dma_data_direction dir)
{
	if (!b->next)
		return;
	if (sdp_buf_big(b->next) && !sdp_bigbuf_registered(b->next_big))
		return;
	sdp_buf_release(dev, b->data, b->dma, b->size, dir);
	b->data = b->next;
	b->dma = b->next_dma;
	b->size = b->next_size;
	b->next = NULL;
	b->next_dma = 0;
	b->next_size = 0;
}

static void sdp_ring_free(struct ib_device *dev, struct sdp_ring *r,
			  enum dma_data_direction dir)
{
	u32 i;

	if (!r->bufs)
		return;
	for (i = 0; i < (r->more ? r->cap : r->first); i++) {
		struct sdp_buf *b = sdp_ring_entry(r, i);

		sdp_buf_release(dev, b->next, b->next_dma, b->next_size, dir);
		sdp_buf_release(dev, b->data, b->dma, b->size, dir);
	}
	kvfree(r->more);
	kfree(r->bufs);
	memset(r, 0, sizeof(*r));
}

/* Bytes of a ring's buffers and of their waiting replacements. */
u64 sdp_ring_bytes(const struct sdp_ring *r)
{
	u64 bytes = 0;
	u32 i;

	for (i = 0; r->bufs && i < r->count; i++) {
		const struct sdp_buf *b = sdp_ring_entry(r, i);

		bytes += b->size + b->next_size;
	}
	return bytes;
}

/* Map a new ring buffer of `size` bytes into b (empty before). */
int sdp_buf_alloc(struct ib_device *dev, struct sdp_buf *b, u32 size,
		  enum dma_data_direction dir)
{
	b->data = kmalloc(size, SDP_GFP_CONN);
	if (!b->data)
		return -ENOMEM;
	b->size = size;
	b->dma = ib_dma_map_single(dev, b->data, size, dir);
	if (ib_dma_mapping_error(dev, b->dma)) {
		b->dma = 0;
		return -ENOMEM;
	}
	return 0;
}

/*
 * A ring of count entries, with room for cap (>= count) of them, the first
 * `alloc` (<= count) with a buffer of `size` bytes.  Entries past count are
 * allocated when the receive ring grows into them (sdp_rx_add()).
 */
static int sdp_ring_alloc(struct ib_device *dev, struct sdp_ring *r, u32 count,
			  u32 cap, u32 alloc, u32 size,
			  enum dma_data_direction dir)
{
	u32 i;
	int err;

	memset(r, 0, sizeof(*r));
	r->bufs = kcalloc(count, sizeof(*r->bufs), SDP_GFP_CONN);
	if (!r->bufs)
		return -ENOMEM;
	r->cap = cap;
	r->count = count;
	r->first = count;
	for (i = 0; i < alloc; i++) {
		err = sdp_buf_alloc(dev, &r->bufs[i], size, dir);
		if (err)
			return err;
	}
	return 0;
}

/*
 * A thread that claimed the CQ (sdp_cq_claim()) handles the completion: it
 * is woken if it sleeps (recvmsg, a send waiting for ring space), which
 * saves the completion work's context switch and its wake-up of that same
 * thread.  Sleepers that claimed nothing re-check their conditions and
 * wait again; the claimer's processing wakes them for what it finds.
 *
 * The wake-up changes no readiness, and its key says so to poll, select
 * and epoll (sdp_zc_wake_waits()): with EPOLLIN an edge-triggered epoll
 * reported input that waited unread once more per completion, which TCP
 * never does.
 */
static void sdp_cq_wake_claimers(struct sock *sk)
{
	sdp_zc_wake_waits(sk);
}

static void sdp_cq_comp_handler(struct ib_cq *cq, void *ctx)
{
	struct sock *sk = ctx;

	if (!atomic_read(&sdp_sk(sk)->cq_claims)) {
		queue_work(sdp_wq, &sdp_sk(sk)->cq_work);
		return;
	}
	sdp_cq_wake_claimers(sk);
}

/*
 * The caller, in a socket call with the lock held, polls the CQ itself
 * before it leaves the call (sdp_cq_unclaim()), also across a wait with
 * the lock dropped; completions meanwhile wake it rather than queue the
 * completion work.
 */
void sdp_cq_claim(struct sock *sk)
{
	sock_owned_by_me(sk);
	atomic_inc(&sdp_sk(sk)->cq_claims);
}

/*
 * Give the claim back and handle what came, arming the CQ.  The barrier
 * orders the count's store before the poll's loads: a handler that still
 * saw the claim (and queued nothing) ran before this point, so the poll
 * finds its completion; one that runs after it queues the work.
 */
void sdp_cq_unclaim(struct sock *sk)
{
	sock_owned_by_me(sk);
	atomic_dec(&sdp_sk(sk)->cq_claims);
	smp_mb__after_atomic(); /* the claim's end before the CQ poll */
	sdp_process_completions(sk, true);
}

/*
 * Every send-queue post (SENDs, RDMA, registrations, invalidations), with
 * the test hook's injected failures first.  Softirqs are off around the
 * post: Soft-RoCE before Linux 6.4 hands a kernel QP's new work requests
 * to a tasklet, and a tasklet scheduled from process context wakes
 * ksoftirqd, a context switch per post before the packet even leaves.
 * With softirqs off the tasklet runs at local_bh_enable(), in the caller,
 * as rxe runs a user-space QP's sends.  Posting is legal in atomic context
 * for every provider; on hardware it is a doorbell either way.
 */
int sdp_qp_post_send(struct sdp_sock *ssk, const struct ib_send_wr *wr,
		     enum sdp_fault_kind kind)
{
	int err = sdp_fault_post(kind);

	if (err)
		return err;
	local_bh_disable();
	err = ib_post_send(ssk->qp, wr, NULL);
	local_bh_enable();
	return err;
}

static void sdp_cq_event_handler(struct ib_event *ev, void *ctx)
{
	pr_warn_ratelimited("CQ event %s\n", ib_event_msg(ev->event));
}

/*
 * QP events come in atomic context.  COMM_EST: the peer's first SEND
 * arrived before the CM saw the RTU (lost, or still on its way); tell the
 * CM, which then establishes the connection instead of timing it out.
 * The CM id outlives the QP (the QP is destroyed first).
 */
static void sdp_qp_event_handler(struct ib_event *ev, void *ctx)
{
	struct sdp_sock *ssk = sdp_sk(ctx);
	struct rdma_cm_id *id = READ_ONCE(ssk->cm_id);

	switch (ev->event) {
	case IB_EVENT_COMM_EST:
		if (id)
			rdma_notify(id, IB_EVENT_COMM_EST);
		break;
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
		/* The QP is in the error state: its work requests flush and
		 * the flush completions reset the connection.
		 */
		pr_debug("QP event %s\n", ib_event_msg(ev->event));
		break;
	default:
		pr_debug("QP event %s\n", ib_event_msg(ev->event));
		break;
	}
}

/* A new connection's protocol state, before its Hello goes or is checked. */
void sdp_conn_init(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->buf_size = (u32)READ_ONCE(sysctl_sdp_buf_size);
	/* Receive buffers start small and grow when the peer streams (0 or
	 * too small: as large as the send buffers from the start).
	 */
	ssk->rx_size = (u32)READ_ONCE(sysctl_sdp_buf_size_initial);
	if (ssk->rx_size < SDP_MIN_BUF_SIZE || ssk->rx_size > ssk->buf_size)
		ssk->rx_size = ssk->buf_size;
	ssk->rx_grow_to = 0;
	/* Send buffers alike: they grow once the peer takes larger segments. */
	ssk->tx_size = ssk->rx_size;
	ssk->tx_grow_failed = false;
	ssk->tx_big_wanted = false;
	sdp_core_conn_init(&ssk->core, ssk->rx_size, ssk->buf_size);
	sdp_core_set_timers(&ssk->core, READ_ONCE(sysctl_sdp_ack_delay_ms),
			    READ_ONCE(sysctl_sdp_zcopy_sink_wait_ms));
}

/*
 * Bytes of a new connection's rings: the receive buffers and the control
 * ring (send buffers come later, sdp_tx_buf_ready()).
 */
static u64 sdp_rings_bytes(const struct sdp_sock *ssk, u32 rx_count)
{
	return (u64)rx_count * ssk->rx_size + SDP_CTL_RING * SDP_CTL_BUF_SIZE;
}

/*
 * The rings: receive buffers posted from the start, send buffers on first
 * use, the control ring.  Charged to the socket's memory cgroup
 * (sdp_memcg.c); false if they would not leave it the reserve.
 */
static int sdp_rings_alloc(struct sock *sk, struct ib_device *dev,
			   u32 rx_count, u32 rx_cap, u32 tx_count)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct mem_cgroup *old_memcg;
	int err;

	if (!sdp_charge_begin(sk, sdp_rings_bytes(ssk, rx_count), &old_memcg))
		return -ENOMEM;
	err = sdp_ring_alloc(dev, &ssk->rx, rx_count, rx_cap, rx_count,
			     ssk->rx_size, DMA_FROM_DEVICE);
	if (!err)
		err = sdp_rx_ring_init(&ssk->rx);
	if (!err) /* buffers on first use */
		err = sdp_ring_alloc(dev, &ssk->tx, tx_count, tx_count, 0,
				     ssk->tx_size, DMA_TO_DEVICE);
	if (!err)
		err = sdp_ring_alloc(dev, &ssk->ctl, SDP_CTL_RING, SDP_CTL_RING,
				     SDP_CTL_RING, SDP_CTL_BUF_SIZE,
				     DMA_TO_DEVICE);
	sdp_charge_end(old_memcg);
	return err;
}

/*
 * The connection's RDMA resources (after sdp_conn_init()), in the CM's
 * worker.  A failed allocation is an error for the connection (ENOBUFS),
 * never a warning; so is a memory cgroup that would not keep its reserve
 * after the rings, which is asked before anything is created.
 */
int sdp_create_resources(struct sock *sk, struct rdma_cm_id *id)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr qpa = {};
	struct ib_cq_init_attr cqa = {};
	u32 rx_count, rx_cap, tx_count;
	int err;

	sock_owned_by_me(sk);

	if (ssk->res_ready)
		return -EINVAL;
	if (!ssk->conn_counted) {
		if (atomic_inc_return(&sdp_conns) > READ_ONCE(sysctl_sdp_max_conns)) {
			atomic_dec(&sdp_conns);
			SDP_INC(sk, SDP_CNT_ERR_RESOURCES);
			return -ENOMEM; /* ENOBUFS for connect() */
		}
		ssk->conn_counted = true;
	}

	rx_count = sdp_ring_count(sk->sk_rcvbuf, ssk->buf_size);
	tx_count = sdp_ring_count(sk->sk_sndbuf, ssk->buf_size);
	/*
	 * Small receive buffers hold less: while the reader lags, the ring
	 * adds buffers (sdp_rx_add_work()) until as many unread bytes wait
	 * as full-size buffers would hold.  The receive queue has room for
	 * about that many small ones from the start (sdp_rx_room_fit()).
	 */
	rx_cap = sdp_rx_room_fit(rx_count,
				 max(rx_count, sdp_ring_count(sk->sk_rcvbuf,
							      ssk->rx_size)));
	ssk->rx_unread_max = (u64)rx_count * ssk->buf_size;
	ssk->rx_base = rx_count;
	ssk->rx_trim = false;
	if (!sdp_memcg_room(sk, sdp_rings_bytes(ssk, rx_count))) {
		err = -ENOMEM;
		goto fail;
	}

	ssk->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(ssk->pd)) {
		err = PTR_ERR(ssk->pd);
		ssk->pd = NULL;
		goto fail;
	}
	/*
	 * The CQ has room for every completion that can be outstanding: each
	 * send work request (data, control, zero copy, the keepalive probe),
	 * the drain marker, a spare, and each posted receive buffer.  For the
	 * receive ring's first buffers only, and without zero copy's work
	 * requests, on a device that can resize it: a ring that adds buffers
	 * for a lagging reader grows it first (sdp_cq_make_room()), so does
	 * the first zero-copy transfer (sdp_cq_zc_room()), and an idle socket
	 * keeps the small one.
	 */
	ssk->cq_zc = !dev->ops.resize_cq;
	ssk->cq_fixed = tx_count + SDP_CTL_RING + 3 +
			(ssk->cq_zc ? SDP_ZC_WRS : 0);
	cqa.cqe = ssk->cq_fixed + (dev->ops.resize_cq ? rx_count : rx_cap);
	cqa.comp_vector = 0;
	ssk->cq = ib_create_cq(dev, sdp_cq_comp_handler, sdp_cq_event_handler,
			       sk, &cqa);
	if (IS_ERR(ssk->cq)) {
		err = PTR_ERR(ssk->cq);
		ssk->cq = NULL;
		goto fail;
	}
	/* The device may have made it larger (Soft-RoCE: a power of two). */
	ssk->cq_base = ssk->cq->cqe;
	ssk->rx_cq_room = ssk->cq->cqe - ssk->cq_fixed;
	ssk->cq_grow_refused = false;

	qpa.event_handler = sdp_qp_event_handler;
	qpa.qp_context = sk;
	qpa.send_cq = ssk->cq;
	qpa.recv_cq = ssk->cq;
	/* + 1: the keepalive probe */
	qpa.cap.max_send_wr = tx_count + SDP_CTL_RING + SDP_ZC_WRS + 1;
	qpa.cap.max_recv_wr = rx_cap + 1; /* + the drain marker */
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	/*
	 * Inline sends save a DMA read of the buffer per small message on an
	 * HCA.  A software provider (Soft-RoCE, siw) copies the bytes either
	 * way, and inline room only makes each send queue entry larger: none.
	 */
	qpa.cap.max_inline_data = ib_uses_virt_dma(dev) ? 0 :
				  READ_ONCE(sysctl_sdp_inline_thresh);
	qpa.sq_sig_type = IB_SIGNAL_ALL_WR;
	qpa.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, ssk->pd, &qpa);
	if (err && qpa.cap.max_inline_data) {
		/* The device has no (or less) inline room: go without. */
		qpa.cap.max_inline_data = 0;
		err = rdma_create_qp(id, ssk->pd, &qpa);
	}
	if (err)
		goto fail;
	ssk->qp = id->qp;
	ssk->max_inline = qpa.cap.max_inline_data;
	/* See sdp_zc_wait_sq_idle(). */
	ssk->reg_idle_sq = id->device->ops.driver_id == RDMA_DRIVER_RXE;
	/* Zero-copy registrations: on first use (sdp_mr_ready()). */
	ssk->zc_mr_tried = false;
	ssk->zc_max_pages = 0;
	ssk->zc_nmaps = 0;
	ssk->zc_async_max = 0;

	err = sdp_rings_alloc(sk, dev, rx_count, rx_cap, tx_count);
	if (err)
		goto fail;

	ssk->res_ready = true;
	ssk->qp_error = false;
	err = sdp_post_recvs(sk);
	if (err)
		goto fail;
	ib_req_notify_cq(ssk->cq, IB_CQ_NEXT_COMP);
	return 0;

fail:
	SDP_INC(sk, SDP_CNT_ERR_RESOURCES);
	ssk->res_ready = false;
	/* sdp_free_rdma() frees the rest when the id goes away. */
	return err;
}

/*
 * Room in the CQ for rx_want receive completions, before the receive ring
 * adds buffers (sdp_rx_add()): the CQ is resized once, to the ring's cap.
 * False if it has not that room: the device cannot resize, or the memory
 * is not there (the ring then stays within the room it has, as a ring
 * whose buffers cannot be allocated does).  Socket lock held, process
 * context.
 */
bool sdp_cq_make_room(struct sdp_sock *ssk, u32 rx_want)
{
	int err;

	sock_owned_by_me(&ssk->sk);

	if (rx_want <= ssk->rx_cq_room)
		return true;
	if (ssk->cq_grow_refused)
		return false;
	err = sdp_fault_post(SDP_FAULT_CQ) ?:
	      ib_resize_cq(ssk->cq, ssk->cq_fixed + ssk->rx.cap);
	if (err) {
		ssk->cq_grow_refused = true;
		SDP_INC(&ssk->sk, SDP_CNT_CQ_GROW_REFUSED);
		return false;
	}
	SDP_INC(&ssk->sk, SDP_CNT_CQ_GROWN);
	ssk->rx_cq_room = ssk->cq->cqe - ssk->cq_fixed;
	return rx_want <= ssk->rx_cq_room;
}

/*
 * Room in the CQ for zero copy's work requests (SDP_ZC_WRS), before the
 * connection's first zero-copy transfer (sdp_mr_ready()): most
 * connections never make one, and on Soft-RoCE the room doubles an idle
 * socket's CQ.  False if the CQ cannot grow: zero copy stays off for the
 * connection, as without memory for its registrations.  Socket lock held,
 * process context.
 */
bool sdp_cq_zc_room(struct sdp_sock *ssk)
{
	u32 cqe;

	sock_owned_by_me(&ssk->sk);

	if (ssk->cq_zc)
		return true;
	cqe = ssk->cq->cqe;
	if (sdp_fault_post(SDP_FAULT_CQ) ||
	    ib_resize_cq(ssk->cq, cqe + SDP_ZC_WRS)) {
		SDP_INC(&ssk->sk, SDP_CNT_CQ_GROW_REFUSED);
		return false;
	}
	SDP_INC(&ssk->sk, SDP_CNT_CQ_GROWN);
	ssk->cq_zc = true;
	ssk->cq_fixed += SDP_ZC_WRS;
	ssk->rx_cq_room = ssk->cq->cqe - ssk->cq_fixed;
	/* Sized for the first buffers: now with the new room, as made. */
	ssk->cq_base = cqe == ssk->cq_base ? ssk->cq->cqe :
					     ssk->cq_base + SDP_ZC_WRS;
	return true;
}

/*
 * The CQ back to its first size once the receive ring is back to its
 * first number of buffers (the stream idled, sdp_rx_trim()): then no more
 * completions can be outstanding than it had room for when new.  If the
 * device says no, the CQ stays as large and the ring may use the room.
 * Socket lock held, process context.
 */
void sdp_cq_shrink(struct sdp_sock *ssk, u32 rx_live)
{
	sock_owned_by_me(&ssk->sk);

	if (ssk->cq->cqe <= ssk->cq_base || rx_live > ssk->rx_base)
		return;
	if (ib_resize_cq(ssk->cq, ssk->cq_base))
		return;
	ssk->cq_base = ssk->cq->cqe; /* as the device made it */
	ssk->rx_cq_room = ssk->cq->cqe - ssk->cq_fixed;
	ssk->cq_grow_refused = false;
}

/*
 * Soft-RoCE may finish a destroyed QP's cleanup a little later (it waits
 * for packets in flight), and until then its CQ counts as in use: retry
 * for up to two seconds.  A CQ that still cannot go keeps a reference on
 * the socket forever, so its handler never sees freed memory.
 */
static void sdp_destroy_cq(struct sock *sk, struct ib_cq *cq)
{
	int i, err = 0;

	for (i = 0; i < 100; i++) {
		err = ib_destroy_cq_user(cq, NULL);
		if (!err)
			return;
		msleep(20);
	}
	pr_err("destroying a completion queue failed (%d); leaking it\n", err);
	sock_hold(sk);
}

/*
 * Soft-RoCE before Linux 6.4 calls the completion handler from a tasklet
 * that destroying the CQ does not wait for; the flushes of a destroyed QP
 * can leave one scheduled, and freeing the CQ under it trips a tasklet
 * WARNING (fixed upstream by 78b26a335310, "RDMA/rxe: Remove tasklet call
 * from rxe_cq.c").  Give it time to run first.
 */
static void sdp_rxe_settle(struct ib_device *dev)
{
#ifdef SDP_RXE_NEEDS_SETTLE
	if (dev && dev->ops.driver_id == RDMA_DRIVER_RXE)
		msleep(20);
#endif
}

/*
 * Take the RDMA resources away from the socket: under the socket lock, so
 * from here on every socket call sees res_ready false and no QP, CQ or
 * rings, while sdp_free_rdma() frees them without the lock.  A new
 * connection attempt on the same socket may then build new resources at
 * the same time without the two ever sharing a field.
 */
void sdp_claim_rdma(struct sock *sk, struct sdp_res *res)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);
	lockdep_assert_held(&ssk->res_lock);

	res->pd = ssk->pd;
	res->cq = ssk->cq;
	res->qp = ssk->qp;
	res->rx = ssk->rx;
	res->tx = ssk->tx;
	res->ctl = ssk->ctl;
	ssk->pd = NULL;
	ssk->cq = NULL;
	ssk->qp = NULL;
	memset(&ssk->rx, 0, sizeof(ssk->rx));
	memset(&ssk->tx, 0, sizeof(ssk->tx));
	memset(&ssk->ctl, 0, sizeof(ssk->ctl));
	sdp_mr_claim(sk, res);
	ssk->ka_probe_out = false; /* the QP goes with it */
	ssk->reg_out = 0;
	WRITE_ONCE(ssk->zc_credit_wanted, false);
	ssk->drain_posted = false;
	ssk->rq_drained = false;
	res->counted = ssk->conn_counted;
	ssk->conn_counted = false;
	if (ssk->res_ready) {
		WRITE_ONCE(ssk->res_ready, false);
		WRITE_ONCE(ssk->qp_error, true);
		/* Unread data went with the receive ring. */
		WRITE_ONCE(ssk->rcv_nxt, ssk->copied_seq);
		WRITE_ONCE(ssk->snd_acked, ssk->snd_queued);
	}
}

/*
 * Free resources sdp_claim_rdma() took.  Called without the socket lock
 * (the completion work takes it) and with res_lock held.
 */
void sdp_free_rdma(struct sock *sk, struct rdma_cm_id *id, struct sdp_res *res)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_device *dev = id->device;

	lockdep_assert_held(&ssk->res_lock);
	/* It waits for cq_work, which takes the socket lock. */
	sock_not_owned_by_me(sk);

	if (res->qp) {
		/* After this the HCA touches none of the ring buffers. */
		rdma_destroy_qp(id);
		sdp_rxe_settle(dev);
	}
	cancel_work_sync(&ssk->cq_work);
	if (res->cq)
		sdp_destroy_cq(sk, res->cq);
	cancel_work_sync(&ssk->cq_work);
	/* The work is the socket's: a newer connection may need it. */
	if (READ_ONCE(ssk->res_ready))
		queue_work(sdp_wq, &ssk->cq_work);
	/* No QP, no DMA: zero-copy mappings and MRs can go. */
	sdp_mr_teardown(dev, res);
	if (dev) {
		sdp_rx_ring_fini(&res->rx);
		sdp_ring_free(dev, &res->rx, DMA_FROM_DEVICE);
		sdp_ring_free(dev, &res->tx, DMA_TO_DEVICE);
		sdp_ring_free(dev, &res->ctl, DMA_TO_DEVICE);
	}
	if (res->pd)
		ib_dealloc_pd(res->pd);
	if (res->counted)
		atomic_dec(&sdp_conns);
}

/*
 * Final teardown of a socket's RDMA side, from close() or the work queue:
 * detach the CM id, free the resources, destroy the id (which waits for a
 * running event handler, so no socket lock may be held here).  All of it
 * under cm_ev_mutex: sdp_cm_work() may be using the id with the socket
 * lock dropped (rdma_connect()), and the id's queued events go with it.
 */
void sdp_destroy_resources(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct rdma_cm_id *id;
	struct sdp_res res;

	if (cancel_delayed_work(&ssk->fin_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->keepalive_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->ack_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->idle_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->zc_grace_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->tx_watch_work))
		sock_put(sk);
	if (cancel_delayed_work(&ssk->comm_est_work))
		sock_put(sk);

	mutex_lock(&ssk->cm_ev_mutex);
	mutex_lock(&ssk->res_lock);
	lock_sock(sk);
	id = ssk->cm_id;
	ssk->cm_id = NULL;
	sdp_claim_rdma(sk, &res);
	release_sock(sk);
	if (id)
		sdp_free_rdma(sk, id, &res);
	mutex_unlock(&ssk->res_lock);
	if (id) {
		rdma_destroy_id(id);
		sdp_cm_purge(sk, id);
	}
	mutex_unlock(&ssk->cm_ev_mutex);
	if (id)
		sock_put(sk); /* the id's reference */
	ssk->bound = false;
}

/*
 * Drop a reference from a context that returns through module code after
 * it, the RDMA CM's event handler: the last sock_put() frees the socket
 * and its module reference, after which rmmod could free the code still
 * running.  sdp_wq is flushed before the module goes.
 */
void sdp_sock_put_deferred(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	atomic_inc(&ssk->deferred_puts);
	queue_work(sdp_wq, &ssk->put_work);
}

void sdp_put_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock, put_work);
	int n = atomic_xchg(&ssk->deferred_puts, 0);

	/* The last put may free ssk, work item included: touch nothing after. */
	while (n--)
		sock_put(&ssk->sk);
}

/*
 * Something that cannot happen on a working QP did (a post failed, a
 * completion came out of order): the QP is unusable, so the connection is
 * reset, and everybody waiting hears of it.  Socket lock held.
 */
void sdp_qp_failed(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->qp_error = true;
	if (!sk->sk_err && sk->sk_state != TCP_CLOSE) {
		SDP_INC(sk, SDP_CNT_ERR_TRANSPORT);
		sdp_set_error(sk, ECONNRESET); /* wakes everybody */
	}
	sdp_disconnect(ssk);
	sdp_zc_wake_waits(sk);
}

/*
 * After the QP went to the error state: a receive whose flush completion
 * comes after every receive before it, once the responder has stopped
 * (ib_drain_rq()'s marker; posting it also makes Soft-RoCE flush).
 */
int sdp_post_drain_recv(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_recv_wr wr = { .wr_id = SDP_WR_ID(SDP_WR_DRAIN, 0) };
	int err;

	sock_owned_by_me(sk);

	if (ssk->drain_posted)
		return 0;
	err = ib_post_recv(ssk->qp, &wr, NULL);
	if (err)
		return err;
	ssk->drain_posted = true;
	return 0;
}

static void sdp_wc_error(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	ssk->qp_error = true;
	if (wc->status == IB_WC_WR_FLUSH_ERR) {
		unsigned int cs = sdp_core_state(&ssk->core);

		/* The QP went down.  After a disconnect (ours, or the peer's
		 * after its DisConn or AbortConn) the CM event says why.
		 * Otherwise the peer broke the connection without a word, e.g.
		 * by an RDMA access outside what we offered, which puts our QP
		 * in the error state and may never be followed by a CM event:
		 * a reset, as the CM would report a vanished peer.
		 */
		if (!ssk->disconnect_sent && !sk->sk_err && sdp_established(sk) &&
		    !(cs & (SDP_CS_DISCONN_RCVD | SDP_CS_ABORTED))) {
			SDP_INC(sk, SDP_CNT_ERR_TRANSPORT);
			sdp_set_error(sk, ECONNRESET);
			sdp_disconnect(ssk);
		}
		return;
	}
	pr_debug("completion error %s\n", ib_wc_status_msg(wc->status));
	if (sk->sk_state == TCP_CLOSE)
		return;
	if (wc->status == IB_WC_RETRY_EXC_ERR ||
	    wc->status == IB_WC_RNR_RETRY_EXC_ERR) {
		SDP_INC(sk, SDP_CNT_ERR_TIMEOUT);
		sdp_set_error(sk, ETIMEDOUT);
	} else {
		SDP_INC(sk, SDP_CNT_ERR_TRANSPORT);
		sdp_set_error(sk, ECONNRESET);
	}
	sdp_disconnect(ssk);
}

/*
 * Handle every completion waiting in the CQ.  Called with the socket lock
 * held, from the completion work and before a CM event that depends on what
 * the peer sent last (a DisConn may sit in the CQ when DISCONNECTED comes).
 * Returns false if the budget ran out with completions left.
 */
bool sdp_poll_cq(struct sock *sk, bool arm)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_wc wc[SDP_CQ_BATCH];
	int n, i, total = 0;

	sock_owned_by_me(sk);

	if (!ssk->res_ready)
		return true;
	/* A deferred work is for completions this poll finds. */
	if (arm)
		clear_bit(SDP_CQ_DEFERRED, &ssk->cq_deferred);
	for (;;) {
		n = ib_poll_cq(ssk->cq, SDP_CQ_BATCH, wc);
		if (n <= 0) {
			if (arm && ib_req_notify_cq(ssk->cq, IB_CQ_NEXT_COMP |
						    IB_CQ_REPORT_MISSED_EVENTS) > 0)
				continue;
			break;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].status != IB_WC_SUCCESS)
				sdp_wc_error(sk, &wc[i]);
			switch (SDP_WR_RING(wc[i].wr_id)) {
			case SDP_WR_RX:
				sdp_rx_complete(sk, &wc[i]);
				break;
			case SDP_WR_TX:
			case SDP_WR_CTL:
				sdp_tx_complete(sk, &wc[i]);
				break;
			case SDP_WR_ZC:
				sdp_zc_complete(sk, &wc[i]);
				break;
			case SDP_WR_KA:
				sdp_keepalive_complete(sk, &wc[i]);
				break;
			case SDP_WR_REG:
				sdp_reg_complete(sk, &wc[i]);
				break;
			case SDP_WR_DRAIN:
				ssk->rq_drained = true;
				sdp_zc_wake_waits(sk);
				break;
			}
		}
		total += n;
		if (total >= SDP_CQ_BUDGET)
			return false;
	}
	return true;
}

/*
 * Handle the completions there are and what follows from them: re-post
 * receive buffers, send what became sendable, end the connection once both
 * DisConns are through.  Socket lock held.
 */
void sdp_process_completions(struct sock *sk, bool arm)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!ssk->res_ready)
		return;
	/* Out of budget: let the user side in, come back for the rest. */
	if (!sdp_poll_cq(sk, arm))
		queue_work(sdp_wq, &ssk->cq_work);
	if (ssk->res_ready && !ssk->qp_error) {
		if (sdp_post_recvs(sk))
			sdp_qp_failed(sk);
		else
			sdp_push(sk, 0);
	}
	sdp_maybe_disconnect(sk);
}

void sdp_cq_work(struct work_struct *work)
{
	struct sdp_sock *ssk = container_of(work, struct sdp_sock, cq_work);
	struct sock *sk = &ssk->sk;

	/*
	 * A thread claimed the CQ since the handler queued this work: it
	 * polls and arms the CQ before it leaves its socket call
	 * (sdp_cq_unclaim()), so it handles what came, once woken if it
	 * sleeps (it went on the wait queue before it claimed), as the
	 * handler would have woken it.  Waiting for its lock instead would
	 * make it wait for ours in turn: a busy-polling reader drops the
	 * lock between polls.  The barrier pairs with the one in
	 * sdp_cq_unclaim(): this read and the completion that queued the
	 * work are ordered as the handler's are.
	 */
	smp_mb();
	if (atomic_read(&ssk->cq_claims)) {
		sdp_cq_wake_claimers(sk);
		return;
	}
	/*
	 * A thread in a socket call owns the socket: it gets the work as it
	 * releases the lock (sdp_release_cb()) instead of waiting for ours
	 * after it.  On Soft-RoCE before Linux 6.4 most works come from a
	 * handler that ran after the thread took the completion itself.
	 */
	spin_lock_bh(&sk->sk_lock.slock);
	if (sock_owned_by_user(sk)) {
		set_bit(SDP_CQ_DEFERRED, &ssk->cq_deferred);
		spin_unlock_bh(&sk->sk_lock.slock);
		return;
	}
	spin_unlock_bh(&sk->sk_lock.slock);
	lock_sock(sk);
	sdp_process_completions(sk, true);
	release_sock(sk);
}

/*
 * release_sock() calls this with the socket's spinlock held, still the
 * owner.  A completion work that found the socket owned: a claimer polls
 * and arms the CQ before it leaves its call (woken if it is about to
 * sleep), which clears the bit; else the work goes again, to find the
 * socket free.  The clear is before the poll (sdp_poll_cq()): a work that
 * sets the bit after it is seen here.  Without resources there is no CQ,
 * and the work is queued only while sdp_free_rdma() has yet to cancel it.
 */
void sdp_release_cb(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	if (!test_bit(SDP_CQ_DEFERRED, &ssk->cq_deferred))
		return;
	if (!ssk->res_ready) {
		clear_bit(SDP_CQ_DEFERRED, &ssk->cq_deferred);
		return;
	}
	if (atomic_read(&ssk->cq_claims)) {
		sdp_cq_wake_claimers(sk);
		return;
	}
	if (test_and_clear_bit(SDP_CQ_DEFERRED, &ssk->cq_deferred))
		queue_work(sdp_wq, &ssk->cq_work);
}
