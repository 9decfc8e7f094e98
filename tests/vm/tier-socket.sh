#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# VM tier "socket": runs inside the guest (scripts/vm/run.sh).  One boot runs
# every test of the tier.
#
#   tier-socket.sh BUILD_DIR
#
# BUILD_DIR holds host-built test binaries (host/) and the module built for
# the running kernel (kmod/$KVER, modroot-$KVER).
set -euo pipefail
build=$1
kver=$(uname -r)

export SDP_MODULE=$build/kmod/$kver/sdp.ko
export SDP_MODROOT=$build/modroot-$kver
[ -f "$SDP_MODULE" ] || { echo "tier-socket: $SDP_MODULE not built" >&2; exit 1; }

# sdp.ko needs the RDMA core and CM; the tests load it with finit_module,
# which does not resolve dependencies.
modprobe rdma_cm

# Pinned user pages (FOLL_PIN) not released yet, after each stage: the
# gate fails on any left at the end, and these lines say which stage
# left them (a stage's own transfers may still be ending: a later line
# at 0 clears it).
pins_after() {
	echo 1 > /proc/sys/vm/stat_refresh 2>/dev/null || true
	awk -v s="$1" '/^nr_foll_pin_acquired /{a=$2} /^nr_foll_pin_released /{r=$2}
		END { print "tier-socket: pinned pages after " s ": " a - r }' /proc/vmstat
}

status=0
"$build/host/sdp_vm_socket_tests" --gtest_color=no || status=1
pins_after "sdp_vm_socket_tests"

# Soft-RoCE test bed for the RDMA tiers: both devices must come up and an
# RDMA CM connection must carry data (rping).
if scripts/vm/rxe-setup.sh; then
	# The server may not listen yet when the client first tries (REJECTED):
	# retry the client for a while; both ends are bounded by timeouts.
	timeout 60 rping -s -a 10.77.0.1 -C 2 > /tmp/rping-server.log 2>&1 &
	server=$!
	ok=0
	for _ in $(seq 20); do
		if timeout 20 rping -c -a 10.77.0.1 -C 2 -v; then
			ok=1
			break
		fi
		sleep 1
	done
	if [ $ok = 1 ] && wait "$server"; then
		echo "[  PASSED  ] soft-RoCE: rxe0/rxe1 ACTIVE, rping over RDMA CM"
	else
		echo "[  FAILED  ] soft-RoCE: rping failed" >&2
		cat /tmp/rping-server.log >&2
		status=1
	fi
else
	echo "[  FAILED  ] soft-RoCE: rxe-setup failed" >&2
	exit 1
fi

# SDP over Soft-RoCE: /proc, counters, coalescing, device and module
# lifecycle, zero copy, then the TCP-differential conformance suite: with
# the default zero-copy threshold (64 KiB), lowered to 4 KiB so that most
# scenarios' transfers go by RDMA Read/Write, and with zero copy off.
# The tests of SDP itself run with SDP only as the default policy
# (fallback=0): with the shipped default a broken SDP path would pass them
# over TCP.  Those that reload sdp.ko load it back with the same parameters.
# Under tier-debug.sh (SDP_VM_WAIT_SCALE > 1: KASAN and lockdep under TCG)
# one CM exchange can outlast the 500 ms a connect allowed to fall back
# waits for it, and such clients go over TCP (SDP_FB_TIMEOUT) where the
# tests expect SDP.  The bound grows with the tests' other waits; it is set
# before each stage that may fall back, as a test may have reloaded sdp.ko.
fallback_wait() {
	local scale=${SDP_VM_WAIT_SCALE:-1}
	[ "$scale" -gt 1 ] || return 0
	echo $((500 * scale)) > /proc/sys/net/sdp/fallback_ms
}

grep -q '^sdp ' /proc/modules || insmod "$SDP_MODULE" fallback=0
fallback_wait
"$build/host/sdp_vm_rdma_tests" --gtest_color=no || status=1
pins_after "sdp_vm_rdma_tests"
# Scale: 10,000 idle SDP sockets (5,000 pairs, both ends in this guest)
# opened one after another, then data both ways on 100 of them picked at
# random (sdp-connrate fails unless every connect, accept and check
# succeeds); then every socket must be gone once the program exits.  The
# TCP run before it is the reference the figures compare with.
scale_pairs=${SDP_SCALE_PAIRS:-5000}
scale() { # FAMILY PORT
	(ulimit -Hn 65536 && ulimit -n 65536 &&
		timeout -k 5 900 "$build/host/userlib/bench/sdp-connrate" --family "$1" \
			--addr 10.77.0.1 --port "$2" --count "$scale_pairs" --verify 100)
}
if scale inet 7450 && scale sdp 7451; then
	left=0
	for _ in $(seq 240); do
		left=$(($(wc -l < /proc/net/sdp) - 1))
		[ "$left" = 0 ] && break
		sleep 1
	done
	if [ "$left" = 0 ]; then
		echo "[  PASSED  ] scale: $scale_pairs SDP pairs connected, carried checked data and were freed"
	else
		echo "[  FAILED  ] scale: $left SDP sockets still listed 240 s after the program exited" >&2
		status=1
	fi
else
	echo "[  FAILED  ] scale: sdp-connrate with $scale_pairs pairs" >&2
	status=1
fi
# Fallback to TCP on the same socket, and IPPROTO_SDP from an unmodified
# Python program over RDMA and after a fallback: with the default policy
# sdp.ko ships with (net.sdp.fallback=1).
echo 1 > /proc/sys/net/sdp/fallback
fallback_wait
"$build/host/sdp_vm_fallback_tests" --gtest_color=no || status=1
pins_after "sdp_vm_fallback_tests"
python3 tests/vm/ipproto_test.py || status=1
pins_after "ipproto_test.py"
# libsdp.so under unmodified programs: iperf3, sockperf, socat, a forking
# and an edge-triggered epoll server, fallback both ways, a tcp rule.
bash tests/vm/preload_test.sh "$build" || status=1
pins_after "preload_test.sh"
echo 0 > /proc/sys/net/sdp/fallback
"$build/host/sdp_vm_zcopy_tests" --gtest_color=no || status=1
pins_after "sdp_vm_zcopy_tests"
# In-kernel consumers: tests/kmod/sdp_kecho.ko (scripts/build-module.sh).
SDP_KECHO_MODULE=$build/kmod-tests/$kver/sdp_kecho.ko \
	"$build/host/sdp_vm_kconsumer_tests" --gtest_color=no || status=1
	pins_after "sdp_vm_kconsumer_tests"
# A userspace SDP peer on libibverbs that breaks the zero-copy rules.
modprobe -a rdma_ucm ib_uverbs
"$build/host/sdp_vm_rogue_tests" --gtest_color=no || status=1
pins_after "sdp_vm_rogue_tests"
# Process faults during zero copy (SIGKILL, fork, munmap/MADV_DONTNEED of
# the buffer) and a userfaultfd-stalled fault that must not stall the RDMA
# CM for other connections.
"$build/host/sdp_vm_fault_tests" --gtest_color=no || status=1
pins_after "sdp_vm_fault_tests"
# make check shares the passes after the first among the guests of the
# kernels it tests (SDP_CONFORMANCE_SHARE=I/N: this is the I-th of N; from
# the Makefile through scripts/vm/each-kernel.sh), round robin, so that
# each runs once in every make check; the first, at the defaults, runs on
# every kernel.  The code that differs between kernels (ubuf_info, the
# IPPROTO_SDP hooks, the fallback to TCP) has tests of its own in every
# guest above.  Unset (make check CONFORMANCE=all, check-debug):
# every pass here.
share=${SDP_CONFORMANCE_SHARE:-1/1}
share_i=${share%/*} share_n=${share#*/}
shared=0
# conformance_here WHAT: whether this guest runs the next shared pass; if
# not, which guest does.
conformance_here() {
	local at=$((shared % share_n + 1))
	shared=$((shared + 1))
	[ "$at" = "$share_i" ] && return 0
	echo "tier-socket: conformance $1: in the guest of kernel $at of $share_n (SDP_CONFORMANCE_SHARE=$share)"
	return 1
}
if [ "${SDP_CONFORMANCE-1}" = 1 ]; then
	fallback_wait
	echo "tier-socket: conformance with net.sdp.zcopy_thresh=65536"
	"$build/host/tests/vm/conformance/sdp_conformance" --families inet,sdp \
		${SDP_CONFORMANCE_ARGS:-} || status=1
		pins_after "conformance, zcopy_thresh 65536"
	# Most transfers by RDMA Read/Write, then zero copy off.
	for thresh in 4096 0; do
		conformance_here "with net.sdp.zcopy_thresh=$thresh" || continue
		echo "tier-socket: conformance with net.sdp.zcopy_thresh=$thresh"
		echo "$thresh" > /proc/sys/net/sdp/zcopy_thresh
		"$build/host/tests/vm/conformance/sdp_conformance" --families inet,sdp \
			${SDP_CONFORMANCE_ARGS:-} || status=1
			pins_after "conformance, zcopy_thresh $thresh"
	done
	echo 65536 > /proc/sys/net/sdp/zcopy_thresh
	# The same as a program written for TCP's MSG_ZEROCOPY runs it:
	# SO_ZEROCOPY on, MSG_ZEROCOPY on every send, the notifications
	# drained and checked (tests/vm/conformance/zerocopy.cpp), with the
	# threshold low enough that most sends are zero copy.
	if conformance_here "with MSG_ZEROCOPY"; then
		echo "tier-socket: conformance with MSG_ZEROCOPY, net.sdp.zcopy_thresh=4096"
		echo 4096 > /proc/sys/net/sdp/zcopy_thresh
		"$build/host/tests/vm/conformance/sdp_conformance" --families inet,sdp --zerocopy \
			${SDP_CONFORMANCE_ARGS:-} || status=1
			pins_after "conformance, MSG_ZEROCOPY"
		echo 65536 > /proc/sys/net/sdp/zcopy_thresh
	fi
	# IPPROTO_SDP sockets, addressed as TCP's, then mixed with TCP (SDP
	# clients that fall back against TCP listeners, TCP clients of SDP
	# listeners that take TCP too): the same traces as TCP.
	for fam in ipproto sdp-tcp tcp-sdp; do
		conformance_here "TCP against $fam" || continue
		echo "tier-socket: conformance, TCP against $fam"
		"$build/host/tests/vm/conformance/sdp_conformance" --families inet,$fam \
			${SDP_CONFORMANCE_ARGS:-} || status=1
			pins_after "conformance, TCP against $fam"
	done
	# SDP on both ends with the fallback policy as the default
	# (net.sdp.fallback=1): listeners take TCP too, refusals fall back.
	if conformance_here "with net.sdp.fallback=1"; then
		echo "tier-socket: conformance with net.sdp.fallback=1"
		echo 1 > /proc/sys/net/sdp/fallback
		fallback_wait
		"$build/host/tests/vm/conformance/sdp_conformance" --families inet,sdp \
			${SDP_CONFORMANCE_ARGS:-} || status=1
			pins_after "conformance, net.sdp.fallback=1"
		echo 0 > /proc/sys/net/sdp/fallback
	fi
else
	# A skipped suite is not a passed one: say so, and fail unless the
	# skip is asked for explicitly.
	echo "################################################################" >&2
	echo "## tier-socket: CONFORMANCE SKIPPED (SDP_CONFORMANCE=${SDP_CONFORMANCE})" >&2
	echo "## the TCP-differential suite did not run on $kver" >&2
	if [ "${SDP_ALLOW_SKIP-0}" = 1 ]; then
		echo "## SDP_ALLOW_SKIP=1: the tier may still pass" >&2
	else
		echo "## set SDP_ALLOW_SKIP=1 as well to allow it; the tier FAILS" >&2
		echo "[  FAILED  ] conformance skipped" >&2
		status=1
	fi
	echo "################################################################" >&2
fi

# Lifecycle, after every other test: keepalive sequences must free their
# sockets (F2), IPv6 names as TCP's (F8), memory-cgroup charging (F5).
"$build/host/sdp_vm_lifecycle_tests" --gtest_color=no --gtest_filter='-Gate.*' || status=1
pins_after "sdp_vm_lifecycle_tests"
# The lifecycle gate, last: once every test above has closed its sockets, no
# SDP socket may be left (within net.sdp.fin_timeout_ms), pinned user pages
# are back in balance, the SDP slab cache is empty and sdp.ko unloads
# (sdp_kecho first, if loaded).
"$build/host/sdp_vm_lifecycle_tests" --gtest_color=no --gtest_filter='Gate.*' || status=1
# The Debian packages (make deb), once sdp.ko is gone: dpkg -i in an overlay
# of the root, DKMS builds sdp.ko, modprobe, a transfer, dpkg -r.
bash tests/vm/deb_test.sh "$build" || status=1
exit $status
