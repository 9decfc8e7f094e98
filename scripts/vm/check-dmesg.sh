#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fail (exit 1, printing the offending lines) if a kernel log shows a bug:
# BUG, WARNING, Oops, lockups, hung tasks, RCU stalls, refcount or list
# corruption, sanitizer reports, panics, or any call trace.  And the debug
# kernel's checkers (make check-debug): lockdep and RCU-lockdep reports,
# might_sleep() in atomic context, kmemleak's own failures, and lock
# debugging switched off by a taint, each matched by its own text too (most
# also start with BUG: or WARNING:, but a check that silently stopped
# checking must not pass).  Debug-objects reports start with "ODEBUG:",
# which BUG: matches.  kmemleak's leak reports are checked by
# tests/vm/tier-debug.sh, from /sys/kernel/debug/kmemleak.
#
#   check-dmesg.sh LOG...
set -u
pattern='BUG:|WARNING:|Oops|general protection fault|kernel BUG at|soft lockup|hard LOCKUP|rcu: INFO: .* stall|rcu_.*detected stall|blocked for more than [0-9]+ seconds|refcount_t:|list_add corruption|list_del corruption|UBSAN:|KASAN:|KFENCE:|unreferenced object|Kernel panic|Call Trace:|stack-protector:|stack guard page'
pattern="$pattern"'|possible circular locking dependency|possible recursive locking|inconsistent lock state|lock inversion|lock order detected|suspicious RCU usage|sleeping function called from invalid context|bad unlock balance|held lock freed|lock held when returning to user space|DEBUG_LOCKS_WARN_ON|Disabling lock debugging|kmemleak: .*(Memory pool empty|Cannot allocate|detector disabled|Failed to create)'
# The log up to PID 1's panic after the power-off, if there is one.  The
# power-off takes the host root (9p) away while the guest's PID 1, a bash
# script run from it, still waits (scripts/vm/guest-stage2.sh): a page of
# bash or its libraries that has to be read again then faults with SIGBUS,
# and PID 1 exiting panics the kernel, after "sysrq: Power Off" (the
# script's request, once the results are saved) and usually after
# "reboot: Power down" too, when nothing of the tests runs any more.
# Anything else after the power-off is still reported.
upto_poweroff_panic() {
	awk '/sysrq: Power Off|reboot: Power down/ { down = 1 }
	     down && /Kernel panic - not syncing: Attempted to kill init!/ { exit }
	     { print }' "$1"
}
status=0
for log in "$@"; do
	[ -f "$log" ] || continue
	hits=$(upto_poweroff_panic "$log" | grep -E -n "$pattern" | head -n 40)
	if [ -n "$hits" ]; then
		echo "check-dmesg: kernel problems in $log:" >&2
		echo "$hits" >&2
		status=1
	fi
done
exit $status
