#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two-guest tier: runs in both guests of scripts/vm/run-pair.sh (roles a and
# b), so that every RDMA packet crosses a link.
#
#   tier-pair.sh BUILD_DIR [PHASE...]
#
# Phases (default: all, in this order): wire, conformance, integrity, netem,
# faults.
# faults ends with guest b killed, so it must come last.
set -euo pipefail
build=$1
shift
phases=${*:-wire conformance integrity netem faults}
kver=$(uname -r)
io=$build/host/sdp_pair_io
# shellcheck source=scripts/vm/pair-lib.sh
. scripts/vm/pair-lib.sh

status=0
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

pair_net_up
modprobe -d "$build/modroot-$kver" sdp
# PAIR_SYSCTL="name=value ...": settings for both guests (debugging a run).
for kv in ${PAIR_SYSCTL:-}; do sysctl -qw "$kv"; done
# PAIR_DYNDBG="module sdp;file rxe_qp.c": those debug messages in dmesg.
IFS=';' read -ra dd <<< "${PAIR_DYNDBG:-}"
for m in "${dd[@]}"; do echo "$m +p" > /sys/kernel/debug/dynamic_debug/control; done
pair_sync up 120
pair_log "up: $(ip -br addr show eth0 | tr -s ' ')"

for phase in $phases; do
	pair_log "phase $phase"
	# shellcheck source=tests/vm/pair/wire.sh
	. "tests/vm/pair/$phase.sh" || fail "phase $phase"
	[ "$phase" = faults ] && break # b is dead
	pair_sync "end-$phase" 900 || { fail "phase $phase: no rendezvous"; break; }
	pair_put "status-$phase" "$status"
	peer_status=$(pair_get "status-$phase" 60) || peer_status=1
	[ "$status$peer_status" = 00 ] || pair_diag
done
exit $status
