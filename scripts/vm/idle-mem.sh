#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest script: where an idle SDP socket's memory goes.  A report, not a
# test.
#
#   scripts/vm/run.sh -k KVER -m 2048 scripts/vm/idle-mem.sh BUILD_DIR [PAIRS]
#
# Opens PAIRS (default 300) connected IPPROTO_SDP pairs in this guest,
# passes a byte each way on each, lets them idle past net.sdp.buf_idle_ms,
# and prints the growth of every slab cache and vmalloc caller per socket
# (scripts/bench/idle_mem.py).
set -euo pipefail
build=$1
pairs=${2:-300}
kver=$(uname -r)

modprobe rdma_cm
scripts/vm/rxe-setup.sh > /dev/null
modprobe -d "$build/modroot-$kver" sdp fallback=0
ulimit -n 65536
python3 scripts/bench/idle_mem.py --pairs "$pairs" --addr "${SDP_RXE_ADDR0:-10.77.0.1}"
