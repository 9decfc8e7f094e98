// SPDX-License-Identifier: GPL-2.0
/*
 * Tunables under /proc/sys/net/sdp.  They apply to connections set up after
 * the change; live connections keep the rings they were built with.
 */
#include <linux/moduleparam.h>
#include <linux/sysctl.h>

#include "sdp.h"
#include "sdp_wire.h"

int sysctl_sdp_buf_size = 65536;
int sysctl_sdp_buf_size_initial = 2048;
int sysctl_sdp_buf_idle_ms = 2000;
int sysctl_sdp_ring_min = 8;
int sysctl_sdp_ring_max = 256;
int sysctl_sdp_inline_thresh = 256;
int sysctl_sdp_fin_timeout_ms = 30000;
int sysctl_sdp_connect_timeout_ms = 5000;
int sysctl_sdp_recv_poll_us = 100;
int sysctl_sdp_ack_delay_ms = SDP_CORE_ACK_DELAY_MS;
int sysctl_sdp_zcopy_thresh = 65536;
int sysctl_sdp_zcopy_chunk = 2 << 20;
int sysctl_sdp_zcopy_cancel_ms = 5000;
int sysctl_sdp_zcopy_fail_reg;
int sysctl_sdp_zcopy_async = 1;
int sysctl_sdp_zcopy_async_offers = SDP_ZC_ASYNC_MAX;
int sysctl_sdp_zcopy_pipeline = 1;
int sysctl_sdp_zcopy_sink_wait_ms = SDP_CORE_ZC_GRACE_MS;
int sysctl_sdp_max_half_open = 32;
int sysctl_sdp_max_conns = 65536;
int sysctl_sdp_memcg_reserve_kb = 1024;
int sysctl_sdp_tx_stall_ms = 15000;
int sysctl_sdp_ack_timeout = 15;
/*
 * New sockets may fall back to TCP (Documentation/fallback.md).  Also a
 * module parameter: sdp.ko is loaded on demand, usually after
 * systemd-sysctl has applied sysctl.d, so "options sdp fallback=0" in
 * modprobe.d is how a host makes SDP-only its default from the first socket.
 */
int sysctl_sdp_fallback = 1;
module_param_named(fallback, sysctl_sdp_fallback, bint, 0444);
MODULE_PARM_DESC(fallback,
		 "initial net.sdp.fallback: 1 new sockets fall back to TCP (default), 0 SDP only");
int sysctl_sdp_fallback_ms = 500;

static int sdp_buf_min = SDP_MIN_BUF_SIZE;
static int sdp_buf_max = 262144;
static int sdp_ring_lo = 4; /* two credits are kept for control messages */
static int sdp_ring_hi = 4096;
static int sdp_zero;
static int sdp_inline_max = 1024;
static int sdp_ms_min = 100;
static int sdp_ms_max = 600000;
static int sdp_poll_max = 100000;
static int sdp_one = 1;
static int sdp_async_offers_max = SDP_ZC_ASYNC_MAX;
static int sdp_ack_delay_max = 500;
static int sdp_int_max = INT_MAX;
static int sdp_chunk_min = 4096;
static int sdp_chunk_max = SDP_ZC_MAX_LEN;
/* Uninterruptible waits stay well below the hung-task warning (120 s). */
static int sdp_cancel_ms_max = 60000;
static int sdp_half_open_max = 65535;
static int sdp_ack_timeout_max = 31;

static struct ctl_table sdp_sysctl_table[] = {
	{
		.procname = "buf_size",
		.data = &sysctl_sdp_buf_size,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_buf_min,
		.extra2 = &sdp_buf_max,
	},
	{
		.procname = "buf_size_initial",
		.data = &sysctl_sdp_buf_size_initial,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_buf_max,
	},
	{
		.procname = "buf_idle_ms",
		.data = &sysctl_sdp_buf_idle_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_cancel_ms_max,
	},
	{
		.procname = "ring_min",
		.data = &sysctl_sdp_ring_min,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ring_lo,
		.extra2 = &sdp_ring_hi,
	},
	{
		.procname = "ring_max",
		.data = &sysctl_sdp_ring_max,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ring_lo,
		.extra2 = &sdp_ring_hi,
	},
	{
		.procname = "inline_thresh",
		.data = &sysctl_sdp_inline_thresh,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_inline_max,
	},
	{
		.procname = "fin_timeout_ms",
		.data = &sysctl_sdp_fin_timeout_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ms_min,
		.extra2 = &sdp_ms_max,
	},
	{
		.procname = "connect_timeout_ms",
		.data = &sysctl_sdp_connect_timeout_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ms_min,
		.extra2 = &sdp_ms_max,
	},
	{
		.procname = "recv_poll_us",
		.data = &sysctl_sdp_recv_poll_us,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_poll_max,
	},
	{
		.procname = "ack_delay_ms",
		.data = &sysctl_sdp_ack_delay_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_one,
		.extra2 = &sdp_ack_delay_max,
	},
	{
		.procname = "zcopy_thresh",
		.data = &sysctl_sdp_zcopy_thresh,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_int_max,
	},
	{
		.procname = "zcopy_chunk",
		.data = &sysctl_sdp_zcopy_chunk,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_chunk_min,
		.extra2 = &sdp_chunk_max,
	},
	{
		.procname = "zcopy_cancel_ms",
		.data = &sysctl_sdp_zcopy_cancel_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ms_min,
		.extra2 = &sdp_cancel_ms_max,
	},
	{
		.procname = "zcopy_sink_wait_ms",
		.data = &sysctl_sdp_zcopy_sink_wait_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_one,
		.extra2 = &sdp_ms_max,
	},
	{
		/* A send that does not complete for this long resets. */
		.procname = "tx_stall_ms",
		.data = &sysctl_sdp_tx_stall_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_ms_min,
		.extra2 = &sdp_ms_max,
	},
	{
		/* The QP's local ACK timeout, 4.096 us * 2^n (0: the CM's). */
		.procname = "ack_timeout",
		.data = &sysctl_sdp_ack_timeout,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_ack_timeout_max,
	},
	{
		/* New sockets' SDP_TRANSPORT_POLICY: 0 SDP only, 1 SDP
		 * else TCP (Documentation/fallback.md).
		 */
		.procname = "fallback",
		.data = &sysctl_sdp_fallback,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_one,
	},
	{
		/* No REP this long after connect(): TCP (0: the CM decides). */
		.procname = "fallback_ms",
		.data = &sysctl_sdp_fallback_ms,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_ms_max,
	},
	{
		/* Connections with RDMA resources (a QP each), host-wide. */
		.procname = "max_conns",
		.data = &sysctl_sdp_max_conns,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_one,
		.extra2 = &sdp_int_max,
	},
	{
		/*
		 * KiB of a memory cgroup's limit that SDP's buffers leave to
		 * the program (sdp_memcg.c).
		 */
		.procname = "memcg_reserve_kb",
		.data = &sysctl_sdp_memcg_reserve_kb,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_int_max,
	},
	{
		/* Connections a listener holds between the REQ and the RTU. */
		.procname = "max_half_open",
		.data = &sysctl_sdp_max_half_open,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_one,
		.extra2 = &sdp_half_open_max,
	},
	{
		.procname = "zcopy_fail_reg",
		.data = &sysctl_sdp_zcopy_fail_reg,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_one,
	},
	{
		.procname = "zcopy_async",
		.data = &sysctl_sdp_zcopy_async,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_one,
	},
	{
		.procname = "zcopy_async_offers",
		.data = &sysctl_sdp_zcopy_async_offers,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_one,
		.extra2 = &sdp_async_offers_max,
	},
	{
		.procname = "zcopy_pipeline",
		.data = &sysctl_sdp_zcopy_pipeline,
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = proc_dointvec_minmax,
		.extra1 = &sdp_zero,
		.extra2 = &sdp_one,
	},
#ifdef SDP_SYSCTL_NEEDS_SENTINEL
	{}
#endif
};

static struct ctl_table_header *sdp_sysctl_header;

int sdp_sysctl_init(void)
{
	sdp_sysctl_header = register_sysctl("net/sdp", sdp_sysctl_table);
	return sdp_sysctl_header ? 0 : -ENOMEM;
}

void sdp_sysctl_exit(void)
{
	unregister_sysctl_table(sdp_sysctl_header);
}
