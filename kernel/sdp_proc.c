// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/net/sdp (the sockets of this network namespace, netstat style),
 * /proc/net/sdpinfo (their buffers and zero-copy transfers) and
 * /proc/net/sdpstats (the namespace's counters, one "name value" per line).
 * Formats: Documentation/socket-api.md.  No kernel addresses are printed.
 */
#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/tcp.h>
#include <net/tcp_states.h>

#include "sdp.h"
#include "sdp_wire.h"

/* What SDP keeps per network namespace (net_generic()). */
struct sdp_net {
	struct sdp_stats __percpu *stats;
};

static unsigned int sdp_net_id __read_mostly;

struct sdp_stats __percpu *sdp_net_stats(const struct net *net)
{
	return ((struct sdp_net *)net_generic(net, sdp_net_id))->stats;
}

static LIST_HEAD(sdp_sock_list);
static DEFINE_SPINLOCK(sdp_sock_list_lock);

void sdp_sock_list_add(struct sock *sk)
{
	spin_lock_bh(&sdp_sock_list_lock);
	list_add_tail(&sdp_sk(sk)->list_node, &sdp_sock_list);
	spin_unlock_bh(&sdp_sock_list_lock);
}

void sdp_sock_list_del(struct sock *sk)
{
	spin_lock_bh(&sdp_sock_list_lock);
	list_del(&sdp_sk(sk)->list_node);
	spin_unlock_bh(&sdp_sock_list_lock);
}

/* The TCP sock /proc/net/sdp shows for sk (NULL: none, before its release). */
void sdp_sock_list_set_tcp(struct sock *sk, struct sock *tsk)
{
	spin_lock_bh(&sdp_sock_list_lock);
	sdp_sk(sk)->proc_tcp = tsk;
	spin_unlock_bh(&sdp_sock_list_lock);
}

static const char *const sdp_fb_reason_names[] = {
	[SDP_FB_NONE] = "none",		[SDP_FB_POLICY] = "policy",
	[SDP_FB_NO_ROUTE] = "no_route", [SDP_FB_REJECTED] = "rejected",
	[SDP_FB_BUSY] = "busy",		[SDP_FB_TIMEOUT] = "timeout",
	[SDP_FB_RESOURCES] = "resources", [SDP_FB_PEER_TCP] = "peer_tcp",
};

static const char *const sdp_state_names[] = {
	[TCP_ESTABLISHED] = "ESTABLISHED", [TCP_SYN_SENT] = "SYN_SENT",
	[TCP_SYN_RECV] = "SYN_RECV",	   [TCP_FIN_WAIT1] = "FIN_WAIT1",
	[TCP_FIN_WAIT2] = "FIN_WAIT2",	   [TCP_TIME_WAIT] = "TIME_WAIT",
	[TCP_CLOSE] = "CLOSE",		   [TCP_CLOSE_WAIT] = "CLOSE_WAIT",
	[TCP_LAST_ACK] = "LAST_ACK",	   [TCP_LISTEN] = "LISTEN",
	[TCP_CLOSING] = "CLOSING",
};

static int sdp_fmt_addr(char *buf, size_t len, const union sdp_addr *a)
{
	if (a->sa.sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)a;

		return scnprintf(buf, len, "[%pI6c]:%u", &s6->sin6_addr,
				 ntohs(s6->sin6_port));
	}
	if (a->sa.sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)a;

		return scnprintf(buf, len, "%pI4:%u", &s4->sin_addr,
				 ntohs(s4->sin_port));
	}
	return scnprintf(buf, len, "0.0.0.0:0");
}

static const char *sdp_state_name(int state)
{
	return state >= 0 && state < ARRAY_SIZE(sdp_state_names) &&
		       sdp_state_names[state] ?
		       sdp_state_names[state] : "UNKNOWN";
}

/* The addresses of a TCP sock, read without its lock (as inet_diag). */
static void sdp_tcp_addrs(const struct sock *tsk, union sdp_addr *l,
			  union sdp_addr *r)
{
	const struct inet_sock *inet = inet_sk(tsk);

	memset(l, 0, sizeof(*l));
	memset(r, 0, sizeof(*r));
#if IS_ENABLED(CONFIG_IPV6)
	if (tsk->sk_family == AF_INET6) {
		struct sockaddr_in6 *l6 = (void *)l, *r6 = (void *)r;

		l6->sin6_family = AF_INET6;
		l6->sin6_addr = tsk->sk_v6_rcv_saddr;
		l6->sin6_port = READ_ONCE(inet->inet_sport);
		r6->sin6_family = AF_INET6;
		r6->sin6_addr = tsk->sk_v6_daddr;
		r6->sin6_port = READ_ONCE(inet->inet_dport);
		return;
	}
#endif
	((struct sockaddr_in *)l)->sin_family = AF_INET;
	((struct sockaddr_in *)l)->sin_addr.s_addr = READ_ONCE(inet->inet_rcv_saddr);
	((struct sockaddr_in *)l)->sin_port = READ_ONCE(inet->inet_sport);
	((struct sockaddr_in *)r)->sin_family = AF_INET;
	((struct sockaddr_in *)r)->sin_addr.s_addr = READ_ONCE(inet->inet_daddr);
	((struct sockaddr_in *)r)->sin_port = READ_ONCE(inet->inet_dport);
}

/*
 * A socket that went over TCP: the TCP connection's addresses, state and
 * queues (as /proc/net/tcp counts them), the SDP socket's owner and inode,
 * no SDP flow control, and the transport with the fallback reason.
 */
static void sdp_show_fallen_back(struct seq_file *seq, int sl,
				 struct sdp_sock *ssk, struct sock *tsk)
{
	const struct tcp_sock *tp = tcp_sk(tsk);
	union sdp_addr l, r;
	char local[64], remote[64];
	u8 reason = READ_ONCE(ssk->fallback_reason);
	int state = READ_ONCE(tsk->sk_state);
	int rx_queue;

	sdp_tcp_addrs(tsk, &l, &r);
	sdp_fmt_addr(local, sizeof(local), &l);
	sdp_fmt_addr(remote, sizeof(remote), &r);
	rx_queue = max_t(int, READ_ONCE(tp->rcv_nxt) - READ_ONCE(tp->copied_seq), 0);
	seq_printf(seq, "%3d: %-45s %-45s %-11s %-8u %-8d %-5u %-8lu 0 0 0 0 0 0 tcp:%s\n",
		   sl, local, remote, sdp_state_name(state),
		   READ_ONCE(tp->write_seq) - READ_ONCE(tp->snd_una), rx_queue,
		   from_kuid_munged(seq_user_ns(seq), sock_i_uid(&ssk->sk)),
		   sock_i_ino(&ssk->sk),
		   reason < ARRAY_SIZE(sdp_fb_reason_names) ?
			   sdp_fb_reason_names[reason] : "unknown");
}

static int sdp_sockets_show(struct seq_file *seq, void *v)
{
	struct net *net = seq_file_single_net(seq);
	struct sdp_sock *ssk;
	char local[64], remote[64];
	int sl = 0;

	seq_printf(seq, "%4s %-45s %-45s %-11s %-8s %-8s %-5s %-8s %s\n", "sl",
		   "local_address", "remote_address", "st", "tx_queue",
		   "rx_queue", "uid", "inode",
		   "credits rx_posted rx_unread tx_queued tx_posted ctl_posted transport");
	spin_lock_bh(&sdp_sock_list_lock);
	list_for_each_entry(ssk, &sdp_sock_list, list_node) {
		struct sock *sk = &ssk->sk;
		int state = READ_ONCE(sk->sk_state);
		bool connected;

		if (!net_eq(sock_net(sk), net))
			continue;
		if (ssk->proc_tcp) {
			sdp_show_fallen_back(seq, sl++, ssk, ssk->proc_tcp);
			continue;
		}
		/* A half-open child the listener evicted is being reset (its
		 * destroy work is queued): no longer in the handshake, as
		 * TCP drops the request at once.
		 */
		if (state == TCP_SYN_RECV && READ_ONCE(ssk->evicted))
			state = TCP_CLOSE;
		connected = state != TCP_LISTEN && state != TCP_CLOSE;
		sdp_fmt_addr(local, sizeof(local), &ssk->local);
		if (connected || state == TCP_CLOSE)
			sdp_fmt_addr(remote, sizeof(remote), &ssk->remote);
		else
			strscpy(remote, ssk->local.sa.sa_family == AF_INET6 ?
				"[::]:0" : "0.0.0.0:0", sizeof(remote));
		seq_printf(seq, "%3d: %-45s %-45s %-11s %-8llu %-8llu %-5u %-8lu %u %u %u %u %u %u %s\n",
			   sl++, local, remote, sdp_state_name(state),
			   READ_ONCE(ssk->snd_queued) - READ_ONCE(ssk->snd_acked),
			   READ_ONCE(ssk->rcv_nxt) - READ_ONCE(ssk->copied_seq),
			   from_kuid_munged(seq_user_ns(seq), sock_i_uid(sk)),
			   sock_i_ino(sk),
			   /* Flow-control snapshot, read without the socket
			    * lock: for diagnosis, may be a moment stale.
			    */
			   sdp_core_tx_credits(&ssk->core),
			   READ_ONCE(ssk->rx.post) - READ_ONCE(ssk->rx.done),
			   READ_ONCE(ssk->rx.tail) - READ_ONCE(ssk->rx.read),
			   READ_ONCE(ssk->tx.tail) - READ_ONCE(ssk->tx.post),
			   READ_ONCE(ssk->tx.post) - READ_ONCE(ssk->tx.done),
			   READ_ONCE(ssk->ctl.post) - READ_ONCE(ssk->ctl.done),
			   /* A listener that takes TCP clients too. */
			   !READ_ONCE(ssk->tcp_listening) ? "sdp" :
			   READ_ONCE(ssk->policy) == SDP_POLICY_TCP ? "tcp" :
			   "sdp+tcp");
	}
	spin_unlock_bh(&sdp_sock_list_lock);
	return 0;
}

static const char *const sdp_zc_state_names[] = {
	[SDP_ZC_IDLE] = "-",		  [SDP_ZC_ACTIVE] = "active",
	[SDP_ZC_CANCELLING] = "cancelling", [SDP_ZC_DONE] = "done",
};

static const char *sdp_zc_state_name(unsigned int state)
{
	return state < ARRAY_SIZE(sdp_zc_state_names) ?
		       sdp_zc_state_names[state] : "unknown";
}

/*
 * /proc/net/sdpinfo: per SDP socket (those of /proc/net/sdp that did not go
 * over TCP, in its order, by inode), its buffers and zero-copy transfers,
 * as `ss -i` adds to `ss -t`.  Read without the socket lock, as the
 * flow-control snapshot of /proc/net/sdp: for diagnosis, may be a moment
 * stale.  Format: Documentation/socket-api.md.
 */
static int sdp_info_show(struct seq_file *seq, void *v)
{
	struct net *net = seq_file_single_net(seq);
	struct sdp_sock *ssk;

	seq_puts(seq,
		 "inode rx_bufs rx_base rx_size rx_trim tx_bufs tx_size seg_max src src_offers src_len src_acked rsa_offers rsa_left rsa_reading sink sink_count sink_written peer_sinks peer_adverts\n");
	spin_lock_bh(&sdp_sock_list_lock);
	list_for_each_entry(ssk, &sdp_sock_list, list_node) {
		struct sdp_core_zc_status zs;

		if (!net_eq(sock_net(&ssk->sk), net) || ssk->proc_tcp)
			continue;
		sdp_core_zc_query(&ssk->core, &zs);
		seq_printf(seq, "%lu %u %u %u %u %u %u %u %s %u %u %u %u %u %u %s %u %u %u %u\n",
			   sock_i_ino(&ssk->sk),
			   READ_ONCE(ssk->rx.count) - READ_ONCE(ssk->rx.empty),
			   READ_ONCE(ssk->rx_base), READ_ONCE(ssk->rx_size),
			   READ_ONCE(ssk->rx_trim) ? 1 : 0,
			   READ_ONCE(ssk->tx.count), READ_ONCE(ssk->tx_size),
			   READ_ONCE(ssk->seg_max),
			   sdp_zc_state_name(zs.src_state), zs.src_offers,
			   zs.src_len, zs.src_acked, zs.rsa_offers, zs.rsa_left,
			   zs.rsa_reading ? 1 : 0, sdp_zc_state_name(zs.adv_state),
			   zs.adv_count, zs.adv_written, zs.psink_count,
			   zs.peer_max_adverts);
	}
	spin_unlock_bh(&sdp_sock_list_lock);
	return 0;
}

static const char *const sdp_counter_names[SDP_CNT_MAX] = {
	[SDP_CNT_TX_BYTES] = "tx_bytes",
	[SDP_CNT_RX_BYTES] = "rx_bytes",
	[SDP_CNT_TX_INLINE] = "tx_inline",
	[SDP_CNT_CREDIT_UPDATES] = "credit_updates",
	[SDP_CNT_CREDIT_STALLS] = "credit_stalls",
	[SDP_CNT_NAGLE_HOLDS] = "nagle_holds",
	[SDP_CNT_CONN_ESTABLISHED] = "conn_established",
	[SDP_CNT_CONN_ACCEPTED] = "conn_accepted",
	[SDP_CNT_CONN_BY_DATA] = "conn_established_by_data",
	[SDP_CNT_CONN_COMM_EST] = "conn_rtu_late_told",
	[SDP_CNT_CONN_REJ_AFTER_RTU] = "conn_rej_after_rtu",
	[SDP_CNT_ERR_REFUSED] = "conn_err_refused",
	[SDP_CNT_ERR_UNREACHABLE] = "conn_err_unreachable",
	[SDP_CNT_ERR_TIMEOUT] = "conn_err_timeout",
	[SDP_CNT_ERR_RESET] = "conn_err_reset",
	[SDP_CNT_ERR_BACKLOG] = "conn_err_backlog",
	[SDP_CNT_ERR_DEVICE_REMOVED] = "conn_err_device_removed",
	[SDP_CNT_ERR_PROTOCOL] = "conn_err_protocol",
	[SDP_CNT_ERR_TRANSPORT] = "conn_err_transport",
	[SDP_CNT_ERR_RESOURCES] = "conn_err_resources",
	[SDP_CNT_HALF_OPEN_EVICTED] = "conn_half_open_evicted",
	[SDP_CNT_FALLBACK_POLICY] = "conn_fallback_policy",
	[SDP_CNT_FALLBACK_NO_ROUTE] = "conn_fallback_no_route",
	[SDP_CNT_FALLBACK_REJECTED] = "conn_fallback_rejected",
	[SDP_CNT_FALLBACK_BUSY] = "conn_fallback_busy",
	[SDP_CNT_FALLBACK_TIMEOUT] = "conn_fallback_timeout",
	[SDP_CNT_FALLBACK_RESOURCES] = "conn_fallback_resources",
	[SDP_CNT_FALLBACK_PEER_TCP] = "conn_fallback_peer_tcp",
	[SDP_CNT_KEEPALIVE_PROBES] = "keepalive_probes",
	[SDP_CNT_PERSIST_PROBES] = "persist_probes",
	[SDP_CNT_CPU_COPY_BYTES] = "cpu_copy_bytes",
	[SDP_CNT_ZC_TX_BYTES] = "zcopy_tx_bytes",
	[SDP_CNT_ZC_RX_BYTES] = "zcopy_rx_bytes",
	[SDP_CNT_ZC_TX_SEGS] = "zcopy_tx_segs",
	[SDP_CNT_ZC_RX_SEGS] = "zcopy_rx_segs",
	[SDP_CNT_ZC_RDMA_READS] = "zcopy_rdma_reads",
	[SDP_CNT_ZC_RDMA_WRITES] = "zcopy_rdma_writes",
	[SDP_CNT_ZC_CANCELS] = "zcopy_cancels",
	[SDP_CNT_ZC_FALLBACK_SEND_SM] = "zcopy_fallback_send_sm",
	[SDP_CNT_ZC_FALLBACK_MEMLOCK] = "zcopy_fallback_memlock",
	[SDP_CNT_ZC_FALLBACK_PIN] = "zcopy_fallback_pin",
	[SDP_CNT_ZC_FALLBACK_REG] = "zcopy_fallback_reg",
	[SDP_CNT_ZC_FALLBACK_PEEK] = "zcopy_fallback_peek",
	[SDP_CNT_ZC_FALLBACK_NO_READER] = "zcopy_fallback_no_reader",
	[SDP_CNT_ZC_FALLBACK_SMALL_READS] = "zcopy_fallback_small_reads",
	[SDP_CNT_ZC_REG_FAILURES] = "zcopy_reg_failures",
	[SDP_CNT_ZC_TIMEOUTS] = "zcopy_timeouts",
	[SDP_CNT_ZC_ASYNC_SENDS] = "zcopy_async_sends",
	[SDP_CNT_ZC_ASYNC_JOINED] = "zcopy_async_joined",
	[SDP_CNT_ZC_HELD_OFFERS] = "zcopy_held_offers",
	[SDP_CNT_ZC_HELD_JOINED] = "zcopy_held_joined",
	[SDP_CNT_ZC_SQ_BUSY_AGAIN] = "zcopy_sq_busy_again",
	[SDP_CNT_ZC_CREDIT_AGAIN] = "zcopy_credit_again",
	[SDP_CNT_RX_GROWN] = "rx_buffers_grown",
	[SDP_CNT_RX_GROW_REFUSED] = "rx_buffers_grow_refused",
	[SDP_CNT_CQ_GROWN] = "cq_grown",
	[SDP_CNT_CQ_GROW_REFUSED] = "cq_grow_refused",
	[SDP_CNT_RING_MR_REGS] = "ring_mr_registered",
	[SDP_CNT_RING_MR_REFUSED] = "ring_mr_refused",
	[SDP_CNT_TX_PAGE_SEGS] = "tx_page_buffers",
	[SDP_CNT_RX_BUFS_ADDED] = "rx_buffers_added",
	[SDP_CNT_RX_SHRUNK] = "rx_buffers_shrunk",
	[SDP_CNT_RX_BUFS_REMOVED] = "rx_buffers_removed",
	[SDP_CNT_TX_SHRUNK] = "tx_buffers_shrunk",
};

/* Message names as sdpstat knows them (tx_<name>, rx_<name>). */
static const struct {
	u8 mid;
	const char *name;
} sdp_mid_names[] = {
	{ SDP_MID_HELLO, "hello" },
	{ SDP_MID_HELLO_ACK, "hello_ack" },
	{ SDP_MID_DISCONN, "disconn" },
	{ SDP_MID_ABORT_CONN, "abort_conn" },
	{ SDP_MID_SEND_SM, "send_sm" },
	{ SDP_MID_RDMA_WR_COMPL, "rdma_wr_compl" },
	{ SDP_MID_RDMA_RD_COMPL, "rdma_rd_compl" },
	{ SDP_MID_SRC_AVAIL_CANCEL, "src_avail_cancel" },
	{ SDP_MID_SINK_AVAIL_CANCEL, "sink_avail_cancel" },
	{ SDP_MID_SINK_CANCEL_ACK, "sink_cancel_ack" },
	{ SDP_MID_CH_RCV_BUF, "ch_rcv_buf" },
	{ SDP_MID_CH_RCV_BUF_ACK, "ch_rcv_buf_ack" },
	{ SDP_MID_SINK_AVAIL, "sink_avail" },
	{ SDP_MID_SRC_AVAIL, "src_avail" },
	{ SDP_MID_DATA, "data" },
};

static u64 sdp_sum(struct sdp_stats __percpu *stats, size_t offset)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *(u64 *)((char *)per_cpu_ptr(stats, cpu) + offset);
	return sum;
}

static int sdp_stats_show(struct seq_file *seq, void *v)
{
	struct sdp_stats __percpu *stats = sdp_net_stats(seq_file_single_net(seq));
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sdp_mid_names); i++)
		seq_printf(seq, "tx_%s %llu\n", sdp_mid_names[i].name,
			   sdp_sum(stats, offsetof(struct sdp_stats,
					    tx_mid[sdp_mid_names[i].mid])));
	for (i = 0; i < ARRAY_SIZE(sdp_mid_names); i++)
		seq_printf(seq, "rx_%s %llu\n", sdp_mid_names[i].name,
			   sdp_sum(stats, offsetof(struct sdp_stats,
					    rx_mid[sdp_mid_names[i].mid])));
	for (i = 0; i < SDP_CNT_MAX; i++)
		seq_printf(seq, "%s %llu\n", sdp_counter_names[i],
			   sdp_sum(stats, offsetof(struct sdp_stats, cnt[i])));
	return 0;
}

static int __net_init sdp_net_init(struct net *net)
{
	struct sdp_net *sn = net_generic(net, sdp_net_id);

	sn->stats = alloc_percpu(struct sdp_stats);
	if (!sn->stats)
		return -ENOMEM;
	if (!proc_create_net_single("sdp", 0444, net->proc_net,
				    sdp_sockets_show, NULL))
		goto out_stats;
	if (!proc_create_net_single("sdpstats", 0444, net->proc_net,
				    sdp_stats_show, NULL))
		goto out_sockets;
	if (!proc_create_net_single("sdpinfo", 0444, net->proc_net,
				    sdp_info_show, NULL))
		goto out_stats_file;
	return 0;

out_stats_file:
	remove_proc_entry("sdpstats", net->proc_net);
out_sockets:
	remove_proc_entry("sdp", net->proc_net);
out_stats:
	free_percpu(sn->stats);
	return -ENOMEM;
}

/* The namespace's last socket is gone: nothing counts here any more. */
static void __net_exit sdp_net_exit(struct net *net)
{
	struct sdp_net *sn = net_generic(net, sdp_net_id);

	remove_proc_entry("sdpinfo", net->proc_net);
	remove_proc_entry("sdpstats", net->proc_net);
	remove_proc_entry("sdp", net->proc_net);
	free_percpu(sn->stats);
}

static struct pernet_operations sdp_net_ops = {
	.init = sdp_net_init,
	.exit = sdp_net_exit,
	.id = &sdp_net_id,
	.size = sizeof(struct sdp_net),
};

int sdp_proc_init(void)
{
	return register_pernet_subsys(&sdp_net_ops);
}

void sdp_proc_exit(void)
{
	unregister_pernet_subsys(&sdp_net_ops);
}
