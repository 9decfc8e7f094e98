#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# VM tier "debug": the whole socket tier (tests/vm/tier-socket.sh) on the
# debug kernel of `make check-debug` (KASAN, lockdep, kmemleak, debug
# objects; scripts/debug-kernel.sh), then a kmemleak scan that must find
# nothing.  Runs inside the guest (scripts/vm/run.sh).
#
#   tier-debug.sh BUILD_DIR
#
# KASAN, lockdep and debug-objects reports land in the kernel log, which
# run.sh checks (scripts/vm/check-dmesg.sh).  This script makes sure the
# checkers are on before the tier and still on after it (lockdep switches
# itself off after its first report or a taint that makes it unreliable),
# and checks kmemleak: leaks that exist before sdp.ko is first loaded are
# the kernel's own, recorded in kmemleak-boot.txt and cleared; every report
# after the tier fails the run (kmemleak.txt in the results).
set -uo pipefail
build=$1
results=${SDP_RESULTS:-/run/sdp-results}
kml=/sys/kernel/debug/kmemleak
status=0

fail() {
	echo "[  FAILED  ] tier-debug: $*" >&2
	status=1
}

lockdep_on() {
	[ "$(awk '/debug_locks:/ { print $2 }' /proc/lockdep_stats 2>/dev/null)" = 1 ]
}

# kmemleak's advice: objects referenced only from CPU registers or in flight
# between lists can look unreferenced for one scan; a second scan a few
# seconds later reports only what stays unreferenced.
kmemleak_scan() {
	echo scan > "$kml" && sleep 5 && echo scan > "$kml"
}

# Count the reports in a kmemleak dump ("unreferenced object 0x...").
kmemleak_count() {
	grep -c '^unreferenced object' "$1"
}

echo "tier-debug: $(uname -r); $(grep -o 'kmemleak=[a-z]*\|hung_task_timeout_secs=[0-9]*\|kasan[._a-z]*\|no5lvl' /proc/cmdline | tr '\n' ' ')"
for opt in KASAN PROVE_LOCKING DEBUG_KMEMLEAK DEBUG_OBJECTS DEBUG_ATOMIC_SLEEP; do
	if ! grep -qx "CONFIG_$opt=y" "/boot/config-$(uname -r)"; then
		fail "the kernel lacks CONFIG_$opt"
	fi
done
[ -w "$kml" ] || fail "no $kml (kmemleak off, or debugfs not mounted)"
lockdep_on || fail "lockdep is off before the tier: $(grep debug_locks /proc/lockdep_stats 2>&1)"
[ $status = 0 ] || exit 1

# The kernel's own leaks, from boot and the test bed's setup: before sdp.ko
# was ever loaded, so none of them is sdp's.  Kept for the record.
if grep -q '^sdp ' /proc/modules; then
	fail "sdp.ko is loaded before the tier: the baseline would hide its leaks"
	exit 1
fi
start=$(date +%s)
kmemleak_scan
cat "$kml" > "$results/kmemleak-boot.txt"
echo "tier-debug: kmemleak before the tier: $(kmemleak_count "$results/kmemleak-boot.txt") reports (the kernel's own: kmemleak-boot.txt), $(( $(date +%s) - start ))s to scan"
echo clear > "$kml"

# The conformance suite's watchdogs detect hangs (30 s, 120 s for the
# integrity runs); KASAN and lockdep under TCG make every call several
# times slower, and the slowest scenario (integ.large_writes_small_reads,
# 16 s on Debian's 6.1) then outlasts its watchdog.  Hangs still fail.
export SDP_CONFORMANCE_ARGS=${SDP_CONFORMANCE_ARGS:---timeout 900}
# Likewise the VM tests' eventually() waits (tests/vm/socket_util.h): the
# half-open children of RogueFlood.HalfOpenFloodIsBounded were still going
# after its 30 s here, with lockdep on (the peer destroys 200 CM ids first).
export SDP_VM_WAIT_SCALE=${SDP_VM_WAIT_SCALE:-4}
# The scale stage's 5,000 pairs would take most of an hour here.
export SDP_SCALE_PAIRS=${SDP_SCALE_PAIRS:-500}
start=$(date +%s)
bash tests/vm/tier-socket.sh "$build" || status=1
echo "tier-debug: tier-socket.sh exit $status after $(( $(date +%s) - start ))s"

lockdep_on || fail "lockdep switched itself off during the tier (a report or a taint; see dmesg)"

# The tier's gate unloaded sdp.ko; whatever it allocated and never freed is
# unreferenced now.  Deferred frees (RCU, work queues) settle first.
sleep 10
kmemleak_scan
cat "$kml" > "$results/kmemleak.txt"
leaks=$(kmemleak_count "$results/kmemleak.txt")
if [ "$leaks" != 0 ]; then
	fail "kmemleak: $leaks unreferenced objects after the tier (kmemleak.txt):"
	head -n 60 "$results/kmemleak.txt" >&2
else
	echo "[  PASSED  ] tier-debug: kmemleak found no leak after the tier"
fi
exit $status
