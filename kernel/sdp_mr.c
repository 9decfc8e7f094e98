// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration for zero copy: the pages of a transfer and the keys
 * the peer uses to reach them.  sdp_zcopy.c decides when a transfer
 * registers, posts and waits; this file does the registration itself:
 *
 *   collect   user pages: pin_user_pages_fast(FOLL_LONGTERM), charged to
 *             RLIMIT_MEMLOCK in mm->pinned_vm as ib_umem_get() does;
 *             kernel kvec/bvec: their pages (never a stack)
 *   register  DMA-map, ib_map_mr_sg() into the socket's fast-registration
 *             MR, a fresh key, a random iova (never a kernel address)
 *   invalidate  the LOCAL_INV work request that ends the key's life
 *   release   unmap, unpin (dirtying what the device wrote), uncharge
 *   orphan    pages a stuck QP may still reach stay until teardown
 *
 * The pool: each socket has two registrations (struct sdp_zc_map, tx and
 * rx), and net.sdp.zcopy_async_offers - 1 more for asynchronous sends in
 * flight together, in a struct sdp_zc_block allocated with the socket's
 * first (most sockets never make one).  Their page and scatterlist
 * arrays are allocated once and kept across connections (freed if a
 * connection wants fewer); one MR each per connection, allocated by the
 * connection's first transfer large enough for zero copy (sdp_mr_ready():
 * most connections never make one, and an MR for 2 MiB chunks costs about
 * 28 KiB of kernel memory with its arrays), freed by sdp_mr_claim and
 * sdp_mr_teardown at teardown; the data path allocates nothing else.
 * Locking: socket lock for the maps (sock_owned_by_me), res_lock for
 * teardown's unmapping (see sdp_mr_release()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/random.h>
#include <linux/sizes.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>

#include "sdp.h"

/* ---- setup and teardown ---------------------------------------------------- */

static void sdp_mr_free_map(struct sdp_zc_map *map)
{
	kvfree(map->pages);
	kvfree(map->sgl);
	map->pages = NULL;
	map->sgl = NULL;
	map->max_pages = 0;
}

/*
 * The registrations of a new connection: page and scatterlist arrays (the
 * socket's, kept across connections) and one MR each (the connection's).
 * A device without fast registration, or no memory, leaves zero copy off
 * for the connection: that is not an error.
 */
static int sdp_mr_alloc(struct sock *sk, struct ib_device *dev,
			struct ib_pd *pd)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	u32 pages = DIV_ROUND_UP((u32)sysctl_sdp_zcopy_chunk, PAGE_SIZE) + 1;
	u32 nmaps = 1 + clamp(READ_ONCE(sysctl_sdp_zcopy_async_offers), 1,
			      SDP_ZC_ASYNC_MAX);
	u32 i;

	sock_owned_by_me(sk);

	ssk->zc_max_pages = 0;
	ssk->zc_nmaps = 0;
	ssk->zc_async_max = 0;
	pages = min_t(u32, pages, dev->attrs.max_fast_reg_page_list_len);
	if (pages < 2)
		return 0;
	if (!ssk->zcb) {
		struct mem_cgroup *old_memcg;

		if (!sdp_charge_begin(sk, sizeof(*ssk->zcb), &old_memcg))
			return 0;
		ssk->zcb = kzalloc(sizeof(*ssk->zcb), SDP_GFP_CONN);
		sdp_charge_end(old_memcg);
		if (!ssk->zcb)
			return 0;
	}
	/* Arrays of registrations this connection does not use: freed. */
	for (i = nmaps; i < SDP_ZC_MAPS; i++)
		sdp_mr_free_map(&ssk->zcb->map[i]);
	for (i = 0; i < nmaps; i++) {
		struct sdp_zc_map *map = &ssk->zcb->map[i];
		struct mem_cgroup *old_memcg;
		struct ib_mr *mr;

		if (map->max_pages != pages) {
			kvfree(map->pages);
			kvfree(map->sgl);
			map->pages = NULL;
			map->sgl = NULL;
			map->max_pages = pages;
			/* Charged as the rings are (sdp_memcg.c). */
			if (!sdp_charge_begin(sk, (u64)pages * (sizeof(*map->pages) +
								sizeof(*map->sgl)),
					      &old_memcg))
				goto off;
			map->pages = kvcalloc(pages, sizeof(*map->pages),
					      SDP_GFP_CONN);
			map->sgl = kvcalloc(pages, sizeof(*map->sgl),
					    SDP_GFP_CONN);
			sdp_charge_end(old_memcg);
			if (!map->pages || !map->sgl)
				goto off;
		}
		map->which = i;
		mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, pages);
		if (IS_ERR(mr))
			goto off;
		ssk->zc_mr[i] = mr;
	}
	ssk->zc_max_pages = pages;
	ssk->zc_nmaps = nmaps;
	ssk->zc_async_max = nmaps - 1;
	sdp_core_set_src_limit(&ssk->core, ssk->zc_async_max);
	return 0;
off:
	for (i = 0; i < SDP_ZC_MAPS; i++) {
		if (ssk->zc_mr[i])
			ib_dereg_mr(ssk->zc_mr[i]);
		ssk->zc_mr[i] = NULL;
	}
	sdp_mr_free_maps(sk);
	return 0;
}

/*
 * Whether the connection can make zero-copy transfers: its registrations
 * are allocated the first time this is asked (socket lock, process
 * context).  A failure leaves zero copy off for the connection, as on a
 * device without fast registration.
 */
bool sdp_mr_ready(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (!ssk->zc_mr_tried && ssk->res_ready && ssk->pd) {
		ssk->zc_mr_tried = true;
		if (sdp_cq_zc_room(ssk))
			sdp_mr_alloc(sk, ssk->pd->device, ssk->pd);
	}
	return ssk->zc_max_pages != 0;
}

void sdp_mr_free_maps(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int i;

	for (i = 0; ssk->zcb && i < SDP_ZC_MAPS; i++)
		sdp_mr_free_map(&ssk->zcb->map[i]);
}

/* The socket goes (its destructor): its zero-copy state with it. */
void sdp_mr_destroy(struct sock *sk)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sdp_mr_free_maps(sk);
	kfree(ssk->zcb);
	ssk->zcb = NULL;
}

/*
 * Teardown takes the MRs, and the DMA mappings of transfers in progress,
 * with the other RDMA resources (socket lock held): from now on the
 * transfer's own cleanup leaves the mapping alone and waits for
 * sdp_mr_teardown() before it unpins.
 */
void sdp_mr_claim(struct sock *sk, struct sdp_res *res)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	int i;

	sock_owned_by_me(sk);

	for (i = 0; i < SDP_ZC_MAPS; i++) {
		res->zc_mr[i] = ssk->zc_mr[i];
		ssk->zc_mr[i] = NULL;
		res->zc_unmap[i] = NULL;
		memset(&res->zc_orphan[i], 0, sizeof(res->zc_orphan[i]));
		if (!ssk->zcb)
			continue;
		if (ssk->zcb->map[i].mapped) {
			res->zc_unmap[i] = &ssk->zcb->map[i];
			ssk->zcb->map[i].mapped = false;
		}
		ssk->zcb->map[i].wr_out = 0; /* the QP goes with its requests */
		res->zc_orphan[i] = ssk->zcb->orphan[i];
		memset(&ssk->zcb->orphan[i], 0, sizeof(ssk->zcb->orphan[i]));
	}
	ssk->zc_max_pages = 0;
	ssk->zc_nmaps = 0;
	sdp_zc_wake_waits(sk);
}

static void sdp_mr_orphan_free(struct ib_device *dev, struct sdp_zc_orphan *o);

/* After the QP is gone (no more DMA): unmap, then free the MRs. */
void sdp_mr_teardown(struct ib_device *dev, struct sdp_res *res)
{
	int i;

	for (i = 0; i < SDP_ZC_MAPS; i++) {
		struct sdp_zc_map *map = res->zc_unmap[i];

		if (map && dev)
			ib_dma_unmap_sg(dev, map->sgl, map->npages, map->dir);
		sdp_mr_orphan_free(dev, &res->zc_orphan[i]);
		if (res->zc_mr[i])
			ib_dereg_mr(res->zc_mr[i]);
		res->zc_mr[i] = NULL;
		res->zc_unmap[i] = NULL;
	}
}

/* ---- pages ------------------------------------------------------------------- */

/*
 * Pinned user pages count against RLIMIT_MEMLOCK, as ib_umem_get() does,
 * in the pinning process's mm, which the map keeps (the work that ends an
 * asynchronous send gives the pages back without one).
 */
static int sdp_mr_charge(struct sdp_zc_map *map, u32 npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;
	s64 pinned;

	if (!mm)
		return -ENOMEM;
	pinned = atomic64_add_return(npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	map->mm = mm;
	return 0;
}

static void sdp_mr_uncharge(struct sdp_zc_map *map, u32 npages)
{
	struct mm_struct *mm = map->mm;

	if (!mm)
		return;
	atomic64_sub(npages, &mm->pinned_vm);
	map->mm = NULL;
	mmdrop(mm);
}

/*
 * The page of a kernel virtual address (kmalloc'd or vmalloc'd).  Not a
 * stack: with VMAP_STACK it looks vmalloc'd, but DMA to a stack is not
 * allowed (and the frame may be gone before the device is).
 */
static struct page *sdp_mr_kaddr_page(const void *p)
{
	if (object_is_on_stack(p))
		return NULL;
	if (is_vmalloc_addr(p))
		return vmalloc_to_page(p);
	if (virt_addr_valid(p))
		return virt_to_page(p);
	return NULL;
}

/*
 * Pages of a virtually contiguous range: user (pinned and charged) or
 * kernel.  Returns the bytes covered (at most max_len, bounded by the
 * registration size) or a negative errno with its fallback counter.
 */
static int sdp_mr_collect_virt(struct sdp_sock *ssk, struct sdp_zc_map *map,
			       unsigned long addr, size_t len, bool user,
			       bool write)
{
	unsigned long off = offset_in_page(addr);
	u32 n = DIV_ROUND_UP(off + len, PAGE_SIZE);
	size_t left;
	u32 i;

	if (n > map->max_pages) {
		n = map->max_pages;
		len = (size_t)n * PAGE_SIZE - off;
	}
	if (user) {
		int pinned;

		if (sdp_mr_charge(map, n)) {
			SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_MEMLOCK, fallback_memlock);
			return -ENOMEM;
		}
		/* The peer decides how long the pin lasts: a long-term pin,
		 * which moves the pages out of CMA and ZONE_MOVABLE first
		 * and refuses fsdax and file mappings that need writeback.
		 */
		pinned = pin_user_pages_fast(addr & PAGE_MASK, n,
					     FOLL_LONGTERM |
					     (write ? FOLL_WRITE : 0),
					     map->pages);
		if (pinned != (int)n) {
			if (pinned > 0)
				unpin_user_pages(map->pages, pinned);
			sdp_mr_uncharge(map, n);
			SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_PIN, fallback_pin);
			return -EFAULT;
		}
		map->user = true;
	} else {
		for (i = 0; i < n; i++) {
			map->pages[i] = sdp_mr_kaddr_page((void *)((addr & PAGE_MASK) +
								i * PAGE_SIZE));
			if (!map->pages[i]) {
				SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_PIN, fallback_pin);
				return -EFAULT;
			}
		}
	}
	sg_init_table(map->sgl, n);
	left = len;
	for (i = 0; i < n; i++) {
		size_t l = min_t(size_t, PAGE_SIZE - off, left);

		sg_set_page(&map->sgl[i], map->pages[i], l, off);
		left -= l;
		off = 0;
	}
	map->npages = n;
	map->len = len;
	return len;
}

/*
 * Pages of a bvec iterator from its current position, as long as they form
 * one registration (only the first piece may start inside a page, only the
 * last may end inside one).
 */
static int sdp_mr_collect_bvec(struct sdp_sock *ssk, struct sdp_zc_map *map,
			       const struct iov_iter *iter, size_t max_len)
{
	const struct bio_vec *bv = iter->bvec;
	size_t skip = iter->iov_offset, len = 0;
	u32 n = 0;

	max_len = min(max_len, iov_iter_count(iter));
	sg_init_table(map->sgl, map->max_pages);
	while (len < max_len && n < map->max_pages) {
		size_t pos = bv->bv_offset + skip;
		size_t rem = bv->bv_len - skip;

		while (rem && len < max_len && n < map->max_pages) {
			size_t po = pos % PAGE_SIZE;
			size_t l = min3(PAGE_SIZE - po, rem, max_len - len);

			if (n && (po || map->sgl[n - 1].offset +
					map->sgl[n - 1].length != PAGE_SIZE))
				goto out;
			sg_set_page(&map->sgl[n++],
				    nth_page(bv->bv_page, pos / PAGE_SIZE), l, po);
			pos += l;
			rem -= l;
			len += l;
		}
		bv++;
		skip = 0;
	}
out:
	if (!n)
		return -EFAULT;
	sg_mark_end(&map->sgl[n - 1]);
	map->npages = n;
	map->len = len;
	return len;
}

/* Pages for up to max_len bytes at the iterator's position (not advanced). */
int sdp_mr_collect(struct sdp_sock *ssk, struct sdp_zc_map *map,
			  const struct iov_iter *iter, size_t max_len,
			  bool write)
{
	size_t seg;

	sock_owned_by_me(&ssk->sk);

	map->npages = 0;
	map->len = 0;
	map->user = false;
	map->dir = write ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	if (iter_is_ubuf(iter)) {
		seg = iov_iter_count(iter);
		return sdp_mr_collect_virt(ssk, map,
					   (unsigned long)iter->ubuf + iter->iov_offset,
					   min(seg, max_len), true, write);
	}
	if (iter_is_iovec(iter)) {
		const struct iovec *iov = sdp_iter_iov(iter);

		seg = min(iov->iov_len - iter->iov_offset, iov_iter_count(iter));
		return sdp_mr_collect_virt(ssk, map,
					   (unsigned long)iov->iov_base + iter->iov_offset,
					   min(seg, max_len), true, write);
	}
	if (iov_iter_is_kvec(iter)) {
		const struct kvec *kv = iter->kvec;

		seg = min(kv->iov_len - iter->iov_offset, iov_iter_count(iter));
		return sdp_mr_collect_virt(ssk, map,
					   (unsigned long)kv->iov_base + iter->iov_offset,
					   min(seg, max_len), false, write);
	}
	if (iov_iter_is_bvec(iter))
		return sdp_mr_collect_bvec(ssk, map, iter, max_len);
	SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_PIN, fallback_pin);
	return -EOPNOTSUPP;
}

/*
 * Give the pages back.  A registered transfer (`registered`) whose mapping
 * is gone was taken over by teardown (the connection died on the way):
 * wait for teardown to have unmapped, since until then the QP may exist
 * and the device may still touch the pages.  Socket lock held; dropped for
 * that wait.
 */
void sdp_mr_release(struct sock *sk, struct sdp_zc_map *map,
			   bool registered)
{
	struct sdp_sock *ssk = sdp_sk(sk);

	sock_owned_by_me(sk);

	if (map->mapped) {
		ib_dma_unmap_sg(ssk->pd->device, map->sgl, map->npages,
				map->dir);
		map->mapped = false;
	} else if (registered) {
		release_sock(sk);
		mutex_lock(&ssk->res_lock);
		mutex_unlock(&ssk->res_lock);
		lock_sock(sk);
	}
	if (map->user) {
		if (map->dir == DMA_FROM_DEVICE)
			unpin_user_pages_dirty_lock(map->pages, map->npages, true);
		else
			unpin_user_pages(map->pages, map->npages);
		sdp_mr_uncharge(map, map->npages);
		map->user = false;
	}
	map->npages = 0;
	map->len = 0;
}

/* ---- registration and work requests ------------------------------------------ */

/*
 * The address the peer uses for a registration.  ib_map_mr_sg() sets the
 * MR's iova to the DMA address of the first byte: a bus or physical
 * address, and on Soft-RoCE a direct-map kernel pointer, neither of which
 * the peer may learn.  A fast-registration MR may start at any iova; only
 * the offset within the first page must stay.  The base is random, below
 * 2^46, so that iova + length never wraps.
 */
u64 sdp_mr_iova(u64 dma_iova, u64 random)
{
	return ((random & GENMASK_ULL(45, 0)) & PAGE_MASK) |
	       SZ_4G | offset_in_page(dma_iova);
}

/*
 * DMA-map the pages and prepare the REG_MR with a fresh key; the caller
 * sets reg->access.  On failure nothing stays mapped.
 */
int sdp_mr_register(struct sock *sk, struct sdp_zc_map *map,
			   struct ib_reg_wr *reg)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct ib_mr *mr = ssk->zc_mr[map->which];
	int nents, n;

	sock_owned_by_me(sk);

	nents = ib_dma_map_sg(ssk->pd->device, map->sgl, map->npages,
			      map->dir);
	if (nents <= 0)
		goto fail;
	map->mapped = true;
	map->reg_posted = false;
	map->inv_done = false;
	map->wc_status = IB_WC_SUCCESS;
	/* Testing the fallback (net.sdp.zcopy_fail_reg): after the mapping,
	 * so the whole unwinding runs.
	 */
	if (READ_ONCE(sysctl_sdp_zcopy_fail_reg))
		goto fail;
	n = ib_map_mr_sg(mr, map->sgl, nents, NULL, PAGE_SIZE);
	if (n != nents)
		goto fail;
	mr->iova = sdp_mr_iova(mr->iova, get_random_u64());
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	memset(reg, 0, sizeof(*reg));
	reg->wr.opcode = IB_WR_REG_MR;
	reg->wr.wr_id = SDP_WR_ID(SDP_WR_ZC, SDP_ZC_WR_REG | map->which);
	reg->mr = mr;
	reg->key = mr->rkey;
	return 0;
fail:
	if (map->mapped) {
		ib_dma_unmap_sg(ssk->pd->device, map->sgl, map->npages,
				map->dir);
		map->mapped = false;
	}
	SDP_INC(sk, SDP_CNT_ZC_REG_FAILURES);
	SDP_INC_SK(ssk, SDP_CNT_ZC_FALLBACK_REG, fallback_reg);
	return -EIO;
}

void sdp_mr_inv_wr(struct sdp_sock *ssk, struct sdp_zc_map *map,
			  struct ib_send_wr *inv)
{
	memset(inv, 0, sizeof(*inv));
	inv->opcode = IB_WR_LOCAL_INV;
	inv->wr_id = SDP_WR_ID(SDP_WR_ZC, SDP_ZC_WR_INV | map->which);
	/* After the RDMA Read that precedes it has placed its data. */
	inv->send_flags = IB_SEND_SIGNALED | IB_SEND_FENCE;
	inv->ex.invalidate_rkey = ssk->zc_mr[map->which]->rkey;
}

/* ---- pages a stuck QP may still reach ------------------------------------ */

/*
 * Keep the pages of a transfer whose QP is not known to be stopped until
 * teardown has destroyed the QP: the device may still write to them, so
 * they must not go back to the application or the allocator.  The
 * registration arrays go with them; zero copy stays off for what is left
 * of the connection (it is being reset anyway).
 */
void sdp_mr_orphan(struct sock *sk, struct sdp_zc_map *map)
{
	struct sdp_sock *ssk = sdp_sk(sk);
	struct sdp_zc_orphan *o = &ssk->zcb->orphan[map->which];

	sock_owned_by_me(sk);

	if (o->pages) {
		/* One per side per connection: the QP is dead after it. */
		pr_warn_ratelimited("zero copy: leaking pages of a stuck QP\n");
	} else {
		o->pages = map->pages;
		o->sgl = map->sgl;
		o->npages = map->npages;
		o->dir = map->dir;
		o->mapped = map->mapped;
		o->user = map->user;
		if (map->user)
			sdp_mr_uncharge(map, map->npages);
	}
	map->pages = NULL;
	map->sgl = NULL;
	map->max_pages = 0;
	map->mapped = false;
	map->user = false;
	map->npages = 0;
	map->len = 0;
	ssk->zc_max_pages = 0;
}

/* Give orphaned pages back; the QP that could reach them is destroyed. */
static void sdp_mr_orphan_free(struct ib_device *dev, struct sdp_zc_orphan *o)
{
	if (!o->pages)
		return;
	if (o->mapped && dev)
		ib_dma_unmap_sg(dev, o->sgl, o->npages, o->dir);
	if (o->user) {
		if (o->dir == DMA_FROM_DEVICE)
			unpin_user_pages_dirty_lock(o->pages, o->npages, true);
		else
			unpin_user_pages(o->pages, o->npages);
	}
	kvfree(o->pages);
	kvfree(o->sgl);
	memset(o, 0, sizeof(*o));
}
