// SPDX-License-Identifier: GPL-2.0
/*
 * Ring buffers larger than a page, made of order-0 pages.
 *
 * A connection's first buffers are small (net.sdp.buf_size_initial, a
 * page or less by default) and kmalloc()ed; the device reaches them by
 * their DMA address with the PD's local_dma_lkey.  Buffers that grow
 * (sdp_grow_work(): the peer's ChRcvBuf, our segments growing, a lagging
 * reader's extra receive buffers) are 64 KiB by default: as one
 * allocation that is an order-4 page block, which a fragmented machine
 * often does not have.  Here they are vmalloc()ed instead (page-sized
 * allocations, one virtually contiguous range for the CPU's copies), and
 * the device reaches them through a fast-registration MR of their own,
 * local access only, so that a work request still has one SGE: the MR's
 * iova and lkey (sdp_buf_sge_addr(), sdp_buf_lkey()).
 *
 * Registration is a REG_MR work request, so it is done by the grow work
 * (process context, socket lock held), never on the data path:
 *  - a buffer is posted (receive) or filled (send) only once its REG_MR
 *    has completed (the receive queue is not ordered with the send
 *    queue): until then the buffer it replaces stays (sdp_buf_swap());
 *  - REG_MRs go on an idle send queue only, every earlier send work
 *    request completed: Soft-RoCE re-executes a REG_MR a retransmission
 *    rewinds over (see sdp_zc_wait_sq_idle()), and an idle queue leaves
 *    zero copy's room (SDP_ZC_WRS), which they borrow, and the send
 *    side's CQ entries free;
 *  - the work holds the socket lock from the wait for the idle queue to
 *    the last completion and polls the CQ itself; sdp_push() posts nothing
 *    meanwhile (reg_hold), so the queue drains within a round trip, and
 *    sends what waited when the work is done.  No idle queue within
 *    SDP_REG_IDLE_MS: the growth is refused, as without memory.
 * Without memory, an MR or an idle queue, the buffers stay as they are
 * (a refused growth, counted); a send that finds no registered buffer of
 * the segment size takes a page (sdp_tx_buf_ready()).  A buffer's MR is
 * deregistered when the buffer is freed, which happens only while no
 * work request refers to it (after the QP is destroyed at teardown).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/overflow.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "sdp.h"

/* An idle send queue takes a round trip; a peer that needs longer is slow. */
#define SDP_REG_IDLE_MS 1000
/* A REG_MR is a local operation: much longer means a broken QP. */
#define SDP_REG_DONE_MS 5000

struct sdp_bigbuf {
	struct ib_mr *mr;
	u32 npages;
	int nents; /* DMA-mapped scatterlist entries */
	enum dma_data_direction dir;
	bool registered; /* its REG_MR completed */
	struct scatterlist sgl[];
};

bool sdp_bigbuf_registered(const struct sdp_bigbuf *big)
{
	return big->registered;
}

void sdp_bigbuf_free(struct ib_device *dev, void *data,
		     struct sdp_bigbuf *big, enum dma_data_direction dir)
{
	if (!big) {
		vfree(data);
		return;
	}
	if (big->mr)
		ib_dereg_mr(big->mr);
	if (big->nents)
		ib_dma_unmap_sg(dev, big->sgl, big->npages, dir);
	vfree(data);
	kfree(big);
}

/*
 * A buffer of `size` bytes (more than a page) in order-0 pages, DMA-mapped
 * and mapped into an MR of the connection's PD, not registered yet.
 * Charged to the memory cgroup the caller made active (sdp_memcg.c).
 */
int sdp_bigbuf_alloc(struct sdp_sock *ssk, u32 size,
		     enum dma_data_direction dir, void **datap,
		     struct sdp_bigbuf **bigp)
{
	struct ib_device *dev = ssk->pd->device;
	u32 npages = DIV_ROUND_UP(size, PAGE_SIZE);
	struct sdp_bigbuf *big;
	void *data;
	u32 i;
	int n;

	sock_owned_by_me(&ssk->sk);

	*datap = NULL;
	*bigp = NULL;
	if (npages > dev->attrs.max_fast_reg_page_list_len)
		return -EINVAL;
	if (sdp_fault_post(SDP_FAULT_RING_MR))
		return -ENOMEM;
	big = kzalloc(struct_size(big, sgl, npages), SDP_GFP_CONN);
	if (!big)
		return -ENOMEM;
	data = __vmalloc((unsigned long)npages << PAGE_SHIFT, SDP_GFP_CONN);
	if (!data) {
		kfree(big);
		return -ENOMEM;
	}
	big->npages = npages;
	big->dir = dir;
	sg_init_table(big->sgl, npages);
	for (i = 0; i < npages; i++)
		sg_set_page(&big->sgl[i], vmalloc_to_page(data + i * PAGE_SIZE),
			    PAGE_SIZE, 0);
	n = ib_dma_map_sg(dev, big->sgl, npages, dir);
	if (n <= 0)
		goto fail;
	big->nents = n;
	big->mr = ib_alloc_mr(ssk->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(big->mr)) {
		big->mr = NULL;
		goto fail;
	}
	if (ib_map_mr_sg(big->mr, big->sgl, n, NULL, PAGE_SIZE) != n)
		goto fail;
	*datap = data;
	*bigp = big;
	return 0;
fail:
	sdp_bigbuf_free(dev, data, big, dir);
	return -ENOMEM;
}

/* ---- the device's view of a ring buffer ------------------------------------ */

u64 sdp_buf_sge_addr(const struct sdp_buf *b)
{
	return sdp_buf_big(b->data) ? b->big->mr->iova : b->dma;
}

u32 sdp_buf_lkey(const struct sdp_sock *ssk, const struct sdp_buf *b)
{
	return sdp_buf_big(b->data) ? b->big->mr->lkey :
				      ssk->pd->local_dma_lkey;
}

/*
 * A large buffer's pages have a second, vmalloc() mapping: a cache that
 * aliases (not x86's) needs it flushed before the device reads and
 * invalidated before the CPU reads what the device wrote.
 */
void sdp_buf_sync_for_cpu(struct ib_device *dev, const struct sdp_buf *b,
			  u32 len, enum dma_data_direction dir)
{
	if (!sdp_buf_big(b->data)) {
		ib_dma_sync_single_for_cpu(dev, b->dma, len, dir);
		return;
	}
	if (!ib_uses_virt_dma(dev))
		dma_sync_sg_for_cpu(dev->dma_device, b->big->sgl,
				    b->big->npages, dir);
	if (dir == DMA_FROM_DEVICE)
		invalidate_kernel_vmap_range(b->data, len);
}

void sdp_buf_sync_for_device(struct ib_device *dev, const struct sdp_buf *b,
			     u32 len, enum dma_data_direction dir)
{
	if (!sdp_buf_big(b->data)) {
		ib_dma_sync_single_for_device(dev, b->dma, len, dir);
		return;
	}
	if (dir == DMA_TO_DEVICE)
		flush_kernel_vmap_range(b->data, len);
	if (!ib_uses_virt_dma(dev))
		dma_sync_sg_for_device(dev->dma_device, b->big->sgl,
				       b->big->npages, dir);
}

/* ---- registration ------------------------------------------------------------ */

/* A REG_MR completed (the socket lock is held: the grow work polls). */
void sdp_reg_complete(struct sock *sk, struct ib_wc *wc)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (ssk->reg_out)
		ssk->reg_out--;
}

static bool sdp_reg_dead(const struct sdp_sock *ssk)
{
	return !ssk->res_ready || ssk->qp_error;
}

/*
 * Poll the CQ until the send queue is idle (want_idle) or the REG_MRs
 * completed; false if the connection failed or the time ran out.
 */
static bool sdp_reg_poll(struct sock *sk, bool want_idle, unsigned int ms)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	unsigned long end = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		sdp_process_completions(sk, false);
		if (sdp_reg_dead(ssk))
			return false;
		if (want_idle ? sdp_sq_idle(ssk) : !ssk->reg_out)
			return true;
		if (time_after(jiffies, end))
			return false;
		usleep_range(20, 200);
	}
}

/*
 * Post the REG_MRs of up to SDP_REG_BATCH buffers on an idle send queue
 * and wait for them.  0: registered; -EAGAIN: nothing was posted (no
 * idle queue in time), the buffers may be freed; -EPIPE: the connection
 * failed, and a REG_MR may still be queued: the buffers stay where
 * teardown frees them, after the QP.
 */
static int sdp_reg_batch(struct sock *sk, struct sdp_bigbuf **bufs, u32 n)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 i;

	if (!sdp_reg_poll(sk, true, SDP_REG_IDLE_MS))
		return sdp_reg_dead(ssk) ? -EPIPE : -EAGAIN;
	for (i = 0; i < n; i++) {
		struct ib_reg_wr reg = {
			.wr = {
				.wr_id = SDP_WR_ID(SDP_WR_REG, i),
				.opcode = IB_WR_REG_MR,
				.send_flags = IB_SEND_SIGNALED,
			},
			.mr = bufs[i]->mr,
			.key = bufs[i]->mr->rkey,
			/* Local only: no key of it ever goes to the peer. */
			.access = bufs[i]->dir == DMA_FROM_DEVICE ?
					  IB_ACCESS_LOCAL_WRITE : 0,
		};
		int err = sdp_qp_post_send(ssk, &reg.wr, SDP_FAULT_RDMA);

		if (err) {
			pr_warn_ratelimited("ring buffer registration failed: %d\n",
					    err);
			sdp_qp_failed(sk);
			return -EPIPE;
		}
		ssk->reg_out++;
	}
	if (!sdp_reg_poll(sk, false, SDP_REG_DONE_MS)) {
		if (!sdp_reg_dead(ssk)) {
			pr_warn_ratelimited("ring buffer registration did not complete\n");
			sdp_qp_failed(sk);
		}
		return -EPIPE;
	}
	for (i = 0; i < n; i++)
		bufs[i]->registered = true;
	SDP_ADD(sk, SDP_CNT_RING_MR_REGS, n);
	return 0;
}

/*
 * Register n (at most SDP_REG_BATCH) large buffers; see sdp_reg_batch()
 * for the result.  Data and control messages that wait meanwhile go
 * before it returns.
 */
int sdp_bigbufs_register(struct sock *sk, struct sdp_bigbuf **bufs, u32 n)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int err;

	sock_owned_by_me(sk);

	if (!n)
		return 0;
	if (WARN_ON_ONCE(n > SDP_REG_BATCH || ssk->reg_hold))
		return -EAGAIN;
	ssk->reg_hold = true;
	sdp_cq_claim(sk);
	err = sdp_reg_batch(sk, bufs, n);
	ssk->reg_hold = false;
	sdp_cq_unclaim(sk); /* it handles what came and pushes what waited */
	if (err == -EAGAIN)
		SDP_INC(sk, SDP_CNT_RING_MR_REFUSED);
	return err;
}

/*
 * Register the large replacements (next) of ring r's entries that are not
 * registered yet, a batch at a time.
 */
int sdp_ring_register_next(struct sock *sk, struct sdp_ring *r)
{
	struct sdp_bigbuf *bufs[SDP_REG_BATCH];
	u32 i, n = 0;
	int err;

	sock_owned_by_me(sk);

	for (i = 0; i < r->count; i++) {
		struct sdp_buf *b = sdp_ring_entry(r, i);

		if (!b->next || !sdp_buf_big(b->next) || b->next_big->registered)
			continue;
		bufs[n++] = b->next_big;
		if (n < SDP_REG_BATCH)
			continue;
		err = sdp_bigbufs_register(sk, bufs, n);
		if (err)
			return err;
		n = 0;
	}
	return sdp_bigbufs_register(sk, bufs, n);
}
