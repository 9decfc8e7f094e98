// SPDX-License-Identifier: GPL-2.0
/*
 * A connection's buffers and the memory cgroup that pays for them.
 *
 * The rings, the send buffers that come on first use, the receive buffers
 * added for a lagging reader and the zero-copy page lists are charged to
 * the socket's memory cgroup (the one of the process that created the
 * socket, or of the listener for an accepted connection), like TCP's
 * socket memory.  They are allocated with SDP_GFP_CONN, whose
 * __GFP_NORETRY makes a charge at the limit fail instead of waking the
 * cgroup's OOM killer: the connection gets ENOBUFS, a send waits for
 * memory.
 *
 * That alone would let SDP take a cgroup to its very limit, since a
 * connection's buffers are many times a TCP socket's: the program's next
 * allocation of its own, an accept()'s inode or a page fault, would then
 * find nothing and the OOM killer would end the program that was told
 * ENOBUFS a moment before.  So SDP also leaves room: its buffers are
 * allocated only while the cgroup and every ancestor with a limit keep
 * net.sdp.memcg_reserve_kb free after them (sdp_memcg_room()).
 *
 * Only SDP's own allocations run in the cgroup's charge scope
 * (sdp_charge_begin()): the RDMA provider's objects for the QP and CQ are
 * allocated without __GFP_NORETRY (Soft-RoCE even creates a UDP socket
 * per QP), so charged to the cgroup at its limit they too would call its
 * OOM killer.  They stay uncharged, bounded by net.sdp.max_conns.
 */
#include <linux/memcontrol.h>
#include <linux/page_counter.h>
#include <linux/sched/mm.h>

#include "sdp.h"

/*
 * Whether `bytes` more fit under the limit of sk's memory cgroup and of
 * each ancestor, with the reserve left over.  A socket outside any cgroup
 * (kernel sockets, the root) always has room.  The usage read includes
 * the charges cgroups cache per CPU, so the answer errs on the side of
 * room for the program.
 */
bool sdp_memcg_room(const struct sock *sk, u64 bytes)
{
	unsigned long want = DIV_ROUND_UP(bytes, PAGE_SIZE) +
			     DIV_ROUND_UP((u64)READ_ONCE(sysctl_sdp_memcg_reserve_kb) *
					  1024, PAGE_SIZE);
	struct mem_cgroup *memcg;

	if (mem_cgroup_disabled())
		return true;
	for (memcg = sk->sk_memcg; memcg; memcg = parent_mem_cgroup(memcg)) {
		unsigned long max = READ_ONCE(memcg->memory.max);
		unsigned long used = page_counter_read(&memcg->memory);

		if (used >= max || max - used < want)
			return false;
	}
	return true;
}

/*
 * Enter sk's memory cgroup for SDP's own allocations of about `bytes`,
 * if they fit (sdp_memcg_room()); false, and nothing entered, if not.
 * 0 bytes: allocations that replace larger buffers (a ring that shrinks),
 * which give memory back and ask for no room.  Leave with
 * sdp_charge_end(*old).
 */
bool sdp_charge_begin(const struct sock *sk, u64 bytes,
		      struct mem_cgroup **old)
{
	if (bytes && !sdp_memcg_room(sk, bytes))
		return false;
	*old = set_active_memcg(sk->sk_memcg);
	return true;
}

void sdp_charge_end(struct mem_cgroup *old)
{
	set_active_memcg(old);
}
