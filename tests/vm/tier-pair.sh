#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two-guest tier: runs in both guests of scripts/vm/run-pair.sh (roles a and
# b), so that every RDMA packet crosses a link.
#
#   tier-pair.sh BUILD_DIR [PHASE...]
#
# Phases (default: all, in this order): wire, conformance, integrity, netem,
# fallback, faults.
# faults ends with guest b killed, so it must come last; b publishes its
# status at the end of each phase and a fails with it, so that b's checks
# decide the tier although b's exit status is lost to the kill.
#
# On a kernel with kmemleak and lockdep (the debug kernel, `make
# pair-check-debug`), each guest that reaches the end checks that lockdep
# is still on and that kmemleak reports nothing allocated since sdp.ko was
# loaded (kmemleak.txt in its results); KASAN and lockdep reports fail the
# run through the console check of scripts/vm/run.sh.
set -euo pipefail
build=$1
shift
phases=${*:-wire conformance integrity netem fallback faults}
kver=$(uname -r)
io=$build/host/sdp_pair_io
# shellcheck source=scripts/vm/pair-lib.sh
. scripts/vm/pair-lib.sh

status=0
peer_failed="" # the first phase in which b failed
# The counters go with the results: what the phases did, which errors.
trap 'pair_end "$status"; cat /proc/net/sdpstats > "$SDP_RESULTS/sdpstats.txt" 2>/dev/null || true' EXIT
fail() { echo "[  FAILED  ] $*" >&2; status=1; }
pass() { echo "[  PASSED  ] $*"; }

# After the first phase that failed on either side, both guests record
# their RDMA state for the post-mortem: the CM ids and QPs the RDMA core
# holds, sdp's sockets, its counters that are not zero, the kernel's last
# sdp and rxe messages, and the kernel stacks of blocked (D) tasks.
diagnosed=0
pair_diag() {
	local p
	[ $diagnosed = 0 ] || return 0
	diagnosed=1
	{
		echo "--- $PAIR_ME: RDMA state after a failed phase"
		timeout 10 rdma res show cm_id
		timeout 10 rdma res show qp
		timeout 10 rdma statistic show link
		cat /proc/net/sdp
		awk '$NF != 0' /proc/net/sdpstats | tr -s ' ' | paste -sd ' '
		dmesg | grep -E 'sdp|rxe' | tail -n 20
		for p in /proc/[0-9]*; do
			[ "$(awk '{ print $3 }' "$p/stat" 2>/dev/null)" = D ] || continue
			echo "blocked: $(cat "$p/comm") (${p#/proc/})"
			cat "$p/stack"
		done
	} 2>&1 | sed 's/^/diag: /' >&2 || true
}

kml=/sys/kernel/debug/kmemleak
lockdep_on() {
	[ "$(awk '/debug_locks:/ { print $2 }' /proc/lockdep_stats 2>/dev/null)" = 1 ]
}
# Two scans a few seconds apart: what stays unreferenced (kmemleak's advice).
kmemleak_scan() { echo scan > "$kml" && sleep 5 && echo scan > "$kml"; }

pair_net_up
# The FOLL_PIN counts before sdp.ko: phases that check pins count from here.
pins_start=$(pair_pins)
pair_log "pins before sdp.ko: $pins_start (acquired, released)"
if [ -w "$kml" ]; then
	# The kernel's own leaks from boot and the test bed's setup are not
	# sdp's: the baseline is cleared before sdp.ko loads.
	kmemleak_scan
	echo clear > "$kml"
	lockdep_on || fail "lockdep is off before the tier"
fi
# SDP only unless a test asks for the fallback (--policy): with the default
# sdp.ko ships with, a broken SDP path would pass these tests over TCP.
# The phases that reload sdp.ko load it with the same parameters.
sdp_params="fallback=0"
modprobe -d "$build/modroot-$kver" sdp $sdp_params
# PAIR_SYSCTL="name=value ...": settings for both guests (debugging a run).
for kv in ${PAIR_SYSCTL:-}; do sysctl -qw "$kv"; done
# PAIR_DYNDBG="module sdp;file rxe_qp.c": those debug messages in dmesg.
IFS=';' read -ra dd <<< "${PAIR_DYNDBG:-}"
for m in "${dd[@]}"; do echo "$m +p" > /sys/kernel/debug/dynamic_debug/control; done
pair_sync up 120
pair_log "up: $(ip -br addr show eth0 | tr -s ' ')"

for phase in $phases; do
	pair_log "phase $phase, pins so far: $(pair_pins)"
	# shellcheck source=tests/vm/pair/wire.sh
	. "tests/vm/pair/$phase.sh" || fail "phase $phase"
	[ "$phase" = faults ] && break # b is dead
	pair_sync "end-$phase" 900 || { fail "phase $phase: no rendezvous"; break; }
	pair_put "status-$phase" "$status"
	peer_status=$(pair_get "status-$phase" 60) || peer_status=unknown
	[ "$status$peer_status" = 00 ] || pair_diag
	# a's verdict is the tier's: b's failures count there too, since b's
	# own exit status is lost when the faults phase kills it.
	# Reported once, at the first phase b failed in.
	if [ "$PAIR_ME" = a ] && [ "$peer_status" != 0 ] && [ -z "$peer_failed" ]; then
		peer_failed=$phase
		fail "phase $phase: b failed checks of its own (status $peer_status; b's log)"
	fi
done
if [ -w "$kml" ]; then
	lockdep_on || fail "lockdep switched itself off (a report or a taint; see dmesg)"
	# Deferred frees (RCU, work queues) settle first.
	sleep 10
	kmemleak_scan
	cat "$kml" > "$SDP_RESULTS/kmemleak.txt"
	leaks=$(grep -c '^unreferenced object' "$SDP_RESULTS/kmemleak.txt" || true)
	if [ "$leaks" != 0 ]; then
		fail "kmemleak: $leaks unreferenced objects after the tier (kmemleak.txt):"
		head -n 60 "$SDP_RESULTS/kmemleak.txt" >&2
	else
		pass "kmemleak: no leak on $PAIR_ME after the tier"
	fi
fi
exit $status
