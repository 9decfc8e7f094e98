// SPDX-License-Identifier: GPL-2.0
/*
 * sdp_pinbench.ko: what preparing a user buffer for RDMA costs, two ways
 * (Documentation/zcopy.md, "Pinning: SDP's own or ib_umem_get()").
 *
 *   sdp    as sdp.ko does it (kernel/sdp_mr.c): charge mm->pinned_vm
 *          against RLIMIT_MEMLOCK, pin_user_pages_fast(FOLL_LONGTERM |
 *          FOLL_WRITE) into a page array allocated once, a scatterlist of
 *          single pages, ib_dma_map_sg(); then unmap, unpin (dirty),
 *          uncharge
 *   umem   ib_umem_get(IB_ACCESS_LOCAL_WRITE), which does the same
 *          (long-term pin, pinned_vm charge, DMA mapping with coalesced
 *          scatterlist entries) and allocates its umem, a page list and
 *          the scatterlist per call; then ib_umem_release()
 *
 * write() of a user buffer to /sys/kernel/debug/sdp_pinbench/run times
 * `iters` rounds of each on that buffer, alternating; read() returns
 * "bytes sdp_ns umem_ns umem_nents" (mean nanoseconds per prepare and
 * release).  The device is module parameter `dev` (default rxe0).
 */
#include <linux/debugfs.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

static char *dev = "rxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to map for");
static int iters = 100;
module_param(iters, int, 0644);
MODULE_PARM_DESC(iters, "rounds of each way per write()");

static struct dentry *pb_dir;
static DEFINE_MUTEX(pb_lock);	/* one run at a time; guards pb_result */
static char pb_result[128];

/* sdp.ko's way, once: 0 or -errno. */
static int pb_sdp_once(struct ib_device *ibdev, unsigned long addr,
		       size_t len, struct page **pages, struct scatterlist *sgl)
{
	unsigned long off = offset_in_page(addr);
	u32 n = DIV_ROUND_UP(off + len, PAGE_SIZE);
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	size_t left = len;
	int pinned, nents;
	u32 i;

	if (atomic64_add_return(n, &current->mm->pinned_vm) > limit &&
	    !capable(CAP_IPC_LOCK)) {
		atomic64_sub(n, &current->mm->pinned_vm);
		return -ENOMEM;
	}
	pinned = pin_user_pages_fast(addr & PAGE_MASK, n,
				     FOLL_LONGTERM | FOLL_WRITE, pages);
	if (pinned != (int)n) {
		if (pinned > 0)
			unpin_user_pages(pages, pinned);
		atomic64_sub(n, &current->mm->pinned_vm);
		return -EFAULT;
	}
	sg_init_table(sgl, n);
	for (i = 0; i < n; i++) {
		size_t l = min_t(size_t, PAGE_SIZE - off, left);

		sg_set_page(&sgl[i], pages[i], l, off);
		left -= l;
		off = 0;
	}
	nents = ib_dma_map_sg(ibdev, sgl, n, DMA_BIDIRECTIONAL);
	if (nents > 0)
		ib_dma_unmap_sg(ibdev, sgl, n, DMA_BIDIRECTIONAL);
	unpin_user_pages_dirty_lock(pages, n, true);
	atomic64_sub(n, &current->mm->pinned_vm);
	return nents > 0 ? 0 : -EIO;
}

/* ib_umem_get()'s way, once: the DMA entries it mapped, or -errno. */
static int pb_umem_once(struct ib_device *ibdev, unsigned long addr,
			size_t len)
{
	struct ib_umem *umem;
	int nents;

	umem = ib_umem_get(ibdev, addr, len, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	nents = umem->sgt_append.sgt.nents;
	ib_umem_release(umem);
	return nents;
}

static ssize_t pb_write(struct file *file, const char __user *ubuf,
			size_t len, loff_t *ppos)
{
	unsigned long addr = (unsigned long)ubuf;
	u32 n = DIV_ROUND_UP(offset_in_page(addr) + len, PAGE_SIZE);
	u64 t_sdp = 0, t_umem = 0, t0;
	struct scatterlist *sgl = NULL;
	struct page **pages = NULL;
	struct ib_device *ibdev;
	int i, err = 0, nents = 0;

	if (!len || len > SZ_16M || iters <= 0)
		return -EINVAL;
	ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);
	if (!ibdev)
		return -ENODEV;
	/* Allocated once, as sdp.ko's registration pool is. */
	pages = kvcalloc(n, sizeof(*pages), GFP_KERNEL);
	sgl = kvcalloc(n, sizeof(*sgl), GFP_KERNEL);
	if (!pages || !sgl) {
		err = -ENOMEM;
		goto out;
	}
	mutex_lock(&pb_lock);
	for (i = 0; i < iters && !err; i++) {
		t0 = ktime_get_ns();
		err = pb_sdp_once(ibdev, addr, len, pages, sgl);
		t_sdp += ktime_get_ns() - t0;
		if (err)
			break;
		t0 = ktime_get_ns();
		nents = pb_umem_once(ibdev, addr, len);
		t_umem += ktime_get_ns() - t0;
		if (nents < 0)
			err = nents;
		if (fatal_signal_pending(current))
			err = -EINTR;
		cond_resched();
	}
	if (!err)
		snprintf(pb_result, sizeof(pb_result), "%zu %llu %llu %d\n", len,
			 div_u64(t_sdp, iters), div_u64(t_umem, iters), nents);
	mutex_unlock(&pb_lock);
out:
	kvfree(sgl);
	kvfree(pages);
	ib_device_put(ibdev);
	return err ? err : len;
}

static ssize_t pb_read(struct file *file, char __user *ubuf, size_t len,
		       loff_t *ppos)
{
	ssize_t r;

	mutex_lock(&pb_lock);
	r = simple_read_from_buffer(ubuf, len, ppos, pb_result,
				    strlen(pb_result));
	mutex_unlock(&pb_lock);
	return r;
}

static const struct file_operations pb_fops = {
	.owner = THIS_MODULE,
	.write = pb_write,
	.read = pb_read,
	.llseek = default_llseek,
};

static int __init pb_init(void)
{
	pb_dir = debugfs_create_dir("sdp_pinbench", NULL);
	debugfs_create_file("run", 0600, pb_dir, NULL, &pb_fops);
	return 0;
}

static void __exit pb_exit(void)
{
	debugfs_remove_recursive(pb_dir);
}

module_init(pb_init);
module_exit(pb_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("sdp: cost of pinning and mapping a user buffer, sdp.ko's way and ib_umem_get()'s");
