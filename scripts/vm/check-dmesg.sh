#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fail (exit 1, printing the offending lines) if a kernel log shows a bug:
# BUG, WARNING, Oops, lockups, hung tasks, RCU stalls, refcount or list
# corruption, sanitizer reports, panics, or any call trace.
#
#   check-dmesg.sh LOG...
set -u
pattern='BUG:|WARNING:|Oops|general protection fault|kernel BUG at|soft lockup|hard LOCKUP|rcu: INFO: .* stall|rcu_.*detected stall|blocked for more than [0-9]+ seconds|refcount_t:|list_add corruption|list_del corruption|UBSAN:|KASAN:|KFENCE:|unreferenced object|Kernel panic|Call Trace:|stack-protector:|stack guard page'
status=0
for log in "$@"; do
	[ -f "$log" ] || continue
	hits=$(grep -E -n "$pattern" "$log" | head -n 40)
	if [ -n "$hits" ]; then
		echo "check-dmesg: kernel problems in $log:" >&2
		echo "$hits" >&2
		status=1
	fi
done
exit $status
