// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection for tests: work-request posts that fail, as a broken
 * device or a full queue would make them fail, and send-buffer allocations
 * that fail, as they do under memory pressure.  Soft-RoCE never fails a
 * post, and Debian's kernels have neither CONFIG_FAULT_INJECTION nor
 * function error injection, so sdp.ko carries its own hook: two root-only
 * module parameters, off by default, one atomic read per post when off.
 *
 *   fail_post_kinds  which posts may fail: a mask of 1 (data and control
 *                    SENDs), 2 (receives), 4 (zero-copy registrations,
 *                    reads, writes and invalidations, keepalive probes),
 *                    8 (send buffers allocated on first use: -ENOMEM),
 *                    16 (CQ resizes), 32 (receive-buffer growths), 64
 *                    (ring buffers larger than a page: -ENOMEM)
 *   fail_posts       how many of the next such posts fail with -EIO,
 *                    counted down as they do (reads 0 once spent)
 *
 * tests/vm/fault_test.cpp (FailedPost) drives it.  A third, fallback_race,
 * makes a connect's fallback timer expire while the CM's answer waits.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/moduleparam.h>

#include "sdp.h"

static atomic_t sdp_fail_posts = ATOMIC_INIT(0);
static unsigned int sdp_fail_post_kinds = SDP_FAULT_SEND | SDP_FAULT_RECV |
					  SDP_FAULT_RDMA;

static int sdp_fail_posts_set(const char *val, const struct kernel_param *kp)
{
	int n, err;

	err = kstrtoint(val, 0, &n);
	if (err)
		return err;
	if (n < 0)
		return -EINVAL;
	atomic_set(&sdp_fail_posts, n);
	return 0;
}

static int sdp_fail_posts_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&sdp_fail_posts));
}

static const struct kernel_param_ops sdp_fail_posts_ops = {
	.set = sdp_fail_posts_set,
	.get = sdp_fail_posts_get,
};

module_param_cb(fail_posts, &sdp_fail_posts_ops, NULL, 0600);
MODULE_PARM_DESC(fail_posts,
		 "test hook: fail the next N posts (-EIO) or allocations (-ENOMEM) of fail_post_kinds");
module_param_named(fail_post_kinds, sdp_fail_post_kinds, uint, 0600);
MODULE_PARM_DESC(fail_post_kinds,
		 "test hook: what fail_posts applies to: 1 sends, 2 receives, 4 zero copy and probes, 8 send-buffer allocations, 16 completion queue resizes, 32 receive-buffer growths, 64 ring buffers larger than a page");

int sdp_fault_post(enum sdp_fault_kind kind)
{
	if (likely(!atomic_read(&sdp_fail_posts)))
		return 0;
	if (!(READ_ONCE(sdp_fail_post_kinds) & kind))
		return 0;
	if (atomic_dec_if_positive(&sdp_fail_posts) < 0)
		return 0;
	pr_info("injected %s failure (kind %d)\n",
		kind >= SDP_FAULT_ALLOC ? "allocation" : "post", kind);
	return kind >= SDP_FAULT_ALLOC ? -ENOMEM : -EIO;
}

/*
 * fallback_race (bool): the fallback timer of a connecting socket expires
 * at the moment the peer's answer waits in the socket's CM event FIFO,
 * before sdp_cm_work() handles it: the race of a loaded machine (the
 * answer in time, its work scheduled after the timer's), made certain.
 * From sdp_cm_work(), before it takes cm_ev_mutex (the timer's work takes
 * it too).
 */
static bool sdp_fallback_race;
module_param_named(fallback_race, sdp_fallback_race, bool, 0600);
MODULE_PARM_DESC(fallback_race,
		 "test hook: expire a connect's fallback timer when the CM's answer is queued");

void sdp_fault_fallback_race(struct sdp_sock *ssk)
{
	struct sock *sk = &ssk->sk;
	bool fired = false;

	if (likely(!READ_ONCE(sdp_fallback_race)))
		return;
	lock_sock(sk);
	fired = ssk->fallback_armed && sdp_cm_answer_queued(sk) &&
		cancel_delayed_work(&ssk->fallback_work);
	release_sock(sk);
	if (fired) {
		pr_info("fallback timer expired with the CM's answer queued\n");
		/*
		 * The timer's work, run here rather than queued and flushed:
		 * a work of sdp_wq (WQ_MEM_RECLAIM) must not wait for another.
		 * It drops the socket reference the cancelled work held.
		 */
		sdp_fb_work(&ssk->fallback_work.work);
	}
}
