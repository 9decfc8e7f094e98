#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run a VM tier once per kernel and summarise what failed.
#
#   each-kernel.sh NAME "KVER..." LOGDIR CMD...
#
# CMD runs once per kernel, with every argument @K replaced by the kernel
# release, @I by the kernel's place in the list (from 1) and @N by the
# number of kernels; every kernel is tried even when one fails.  Each run's output
# goes to the terminal and to LOGDIR/NAME-KVER.log.  At the end, for each
# kernel that failed, the lines of its log that say what failed (test
# failures, guest exit, kernel splats): a long run's reader, and CI, which
# keeps only the head and the tail of the output, see them last.  A run
# that exits 75 (run-pair.sh: a guest died of a double fault, the emulator's
# signature) is run once more, and says so.
set -uo pipefail

[ $# -ge 4 ] || { sed -n '4,14p' "$0" >&2; exit 2; }
name=$1 kvers=$2 logdir=$3
shift 3

# One per word: scripts/kver.sh --all gives one per line.
read -r -d '' -a kernels <<< "$kvers"
if [ ${#kernels[@]} = 0 ]; then
	echo "$name: FAILED: no kernel to test (VM_KVERS, KVER and scripts/kver.sh --all are empty; make deps)"
	exit 1
fi
mkdir -p "$logdir"

# What a failure looks like in the tiers' output: gtest and the shell tiers
# ([  FAILED  ]), the conformance suite ([FAIL], CHECK FAILED, "  FAILED:"),
# run.sh/run-pair.sh verdicts, check-dmesg's kernel problems, and the
# stages after which user pages were still pinned (tier-socket.sh: they
# say which stage left pages the gate finds pinned).  sdp_pair_io's
# "FAILED after" ends runs whose connections fail on purpose: not a failure.
failure_lines() {
	grep -E '\[  FAILED  \]|^\[FAIL\]|CHECK FAILED|^  FAILED: |^run(-pair)?\.sh: .*(FAILED|did not|died|failed|not found)|^check-dmesg:|(BUG|WARNING|Oops|INFO: task|watchdog|page allocation failure)|^tier-socket: pinned pages after .*: -?[1-9]' "$1" |
		grep -v 'FAILED after' | head -n 40
}

failed=""
i=0
for k in "${kernels[@]}"; do
	i=$((i + 1))
	args=()
	for a in "$@"; do
		a=${a//@K/$k}
		a=${a//@I/$i}
		args+=("${a//@N/${#kernels[@]}}")
	done
	log="$logdir/$name-$k.log"
	"${args[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" = 75 ]; then
		# The run says the emulator, not the test, failed (run-pair.sh:
		# a guest's double fault): once more, said, the first log kept.
		mv "$log" "$logdir/$name-$k.first.log"
		echo "[ RETRY    ] $name on $k: a guest died of a double fault (log: $logdir/$name-$k.first.log); running the tier again"
		"${args[@]}" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
	fi
	[ "$rc" = 0 ] || failed="$failed $k"
done
if [ -n "$failed" ]; then
	for k in $failed; do
		echo "=== $name: what failed on $k (whole output: $logdir/$name-$k.log)"
		failure_lines "$logdir/$name-$k.log"
	done
	echo "$name: FAILED on:$failed"
	exit 1
fi
echo "$name: passed on: ${kernels[*]}"
