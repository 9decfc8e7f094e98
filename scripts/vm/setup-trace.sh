#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest script: where the time of a connection's setup goes, SDP next to
# the raw RDMA CM (sdp-connrate --family rdmacm: rdma_create_ep and
# rdma_connect with a one-entry QP).  A report, not a test.
#
#   scripts/vm/run.sh -k KVER scripts/vm/setup-trace.sh BUILD_DIR [COUNT]
#
# COUNT connections (default 50) are opened one after another, both ends in
# this guest, with the RDMA CM's tracepoints on (rdma_cma: address and
# route resolved, REQ sent and received, REP sent, established) and, for
# SDP, function_graph timing of its connect() and of the calls that build a
# connection's resources.  scripts/bench/setup_trace.py turns each trace
# into stages with their mean and median over the connections; the raw
# traces stay in the results directory.
set -euo pipefail
build=$1
count=${2:-50}
kver=$(uname -r)
out=${SDP_RESULTS:-/tmp}
connrate=$build/host/userlib/bench/sdp-connrate

modprobe -a rdma_cm rdma_ucm ib_uverbs
scripts/vm/rxe-setup.sh > /dev/null
modprobe -d "$build/modroot-$kver" sdp fallback=0

t=/sys/kernel/tracing
[ -e $t/trace ] || mount -t tracefs tracefs $t
# What SDP calls to set a connection up, where the kernel has them as
# functions (some are inlined or static and absent; a missing one is left
# out of the filter).
funcs="sdp_connect sdp_accept sdp_cm_route_resolved sdp_cm_conn_request
sdp_create_resources __ib_alloc_pd __ib_create_cq ib_create_cq
rdma_create_qp sdp_mr_alloc sdp_rx_ring_init sdp_post_recvs rdma_connect
rdma_accept rdma_resolve_addr rdma_resolve_route sdp_cm_work kmalloc_large
kmalloc_order kmalloc_order_trace __kmalloc_large_node sdp_ring_alloc"
trace_run() { # NAME PORT FAMILY
	local name=$1 port=$2 fam=$3 f
	echo 0 > $t/tracing_on
	echo nop > $t/current_tracer
	echo > $t/trace
	echo 32768 > $t/buffer_size_kb
	echo > $t/set_ftrace_filter
	for f in $funcs; do
		echo "$f" >> $t/set_ftrace_filter 2> /dev/null || true
	done
	echo function_graph > $t/current_tracer
	echo 1 > $t/options/funcgraph-abstime
	echo 1 > $t/options/funcgraph-proc
	echo 1 > $t/options/funcgraph-tail
	echo 1 > $t/events/rdma_cma/enable
	echo 1 > $t/tracing_on
	"$connrate" --family "$fam" --addr 10.77.0.1 --port "$port" --count "$count" \
		--verify 0 --csv > "$out/connrate-$name.csv" 2>&1 || true
	echo 0 > $t/tracing_on
	cp $t/trace "$out/setup-trace-$name.txt"
	echo 0 > $t/events/rdma_cma/enable
	echo nop > $t/current_tracer
	echo "== $name: $(grep "^$fam," "$out/connrate-$name.csv" | tail -n 1)"
	python3 scripts/bench/setup_trace.py "$out/setup-trace-$name.txt"
}
trace_run rdmacm 18631 rdmacm
trace_run sdp 18633 sdp
