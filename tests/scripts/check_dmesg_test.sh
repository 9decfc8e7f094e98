#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/vm/check-dmesg.sh must pass a clean boot log and fail on each kind
# of kernel report it promises to catch (otherwise a VM tier could pass with
# a WARNING in its log).
set -u
check=$(dirname "$0")/../../scripts/vm/check-dmesg.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

clean='[    0.000000] Linux version 6.1.0-56-amd64
[    7.846377] sdp: loading out-of-tree module taints kernel.
[    7.846380] sdp: module verification failed: signature and/or required key missing - tainting kernel
[    7.847859] sdp: registered socket family 27
[   17.767296] infiniband rxe0: set active
[    0.000000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar
[    0.100000] kmemleak: Kernel memory leak detector initialized (mem pool available: 15794)
[ 1900.000000] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)'
printf '%s\n' "$clean" > "$work/clean.log"
if ! "$check" "$work/clean.log" 2>/dev/null; then
	echo "FAIL: clean log rejected"
	failures=$((failures + 1))
fi

reports=(
	'[   12.1] WARNING: CPU: 0 PID: 1 at net/core/sock.c:123 sk_free+0x1/0x2'
	'[   12.1] BUG: kernel NULL pointer dereference, address: 0000000000000008'
	'[   12.1] Oops: 0002 [#1] PREEMPT SMP NOPTI'
	'[   12.1] general protection fault, probably for non-canonical address'
	'[   12.1] kernel BUG at net/sdp/sdp_socket.c:42!'
	'[   12.1] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [sdp:123]'
	'[   12.1] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1'
	'[   12.1] rcu: INFO: rcu_preempt self-detected stall on CPU'
	'[   12.1] INFO: task sdp_vm_socket_t:99 blocked for more than 30 seconds.'
	'[   12.1] refcount_t: underflow; use-after-free.'
	'[   12.1] list_add corruption. prev->next should be next'
	'[   12.1] list_del corruption, ffff8880 ->next is LIST_POISON1'
	'[   12.1] UBSAN: shift-out-of-bounds in net/sdp/core.c:1:2'
	'[   12.1] Kernel panic - not syncing: Attempted to kill init!'
	'[   12.1] Call Trace:'
	'[   12.1] WARNING: possible circular locking dependency detected'
	'[   12.1] possible circular locking dependency detected'
	'[   12.1] WARNING: possible recursive locking detected'
	'[   12.1] WARNING: inconsistent lock state'
	'[   12.1] WARNING: possible irq lock inversion dependency detected'
	'[   12.1] WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected'
	'[   12.1] suspicious RCU usage'
	'[   12.1] sleeping function called from invalid context at kernel/locking/mutex.c:580'
	'[   12.1] WARNING: bad unlock balance detected!'
	'[   12.1] WARNING: held lock freed!'
	'[   12.1] WARNING: lock held when returning to user space!'
	'[   12.1] DEBUG_LOCKS_WARN_ON(1)'
	'[   12.1] Disabling lock debugging due to kernel taint'
	'[   12.1] ODEBUG: free active (active state 0) object type: timer_list hint: x'
	'[   12.1] ODEBUG: Out of memory. ODEBUG disabled'
	'[   12.1] ODEBUG: object 00000000 is on stack 00000000, but NOT annotated.'
	'[   12.1] kmemleak: Memory pool empty, consider increasing CONFIG_DEBUG_KMEMLEAK_MEM_POOL_SIZE'
	'[   12.1] kmemleak: Kernel memory leak detector disabled'
	'[   12.1] KASAN: slab-use-after-free in sdp_rx_complete+0x1/0x2'
)
for report in "${reports[@]}"; do
	{ printf '%s\n' "$clean"; printf '%s\n' "$report"; } > "$work/bad.log"
	if "$check" "$work/bad.log" 2>/dev/null; then
		echo "FAIL: not caught: $report"
		failures=$((failures + 1))
	fi
done

# A missing log (guest never wrote dmesg.txt) is not evidence of a clean run
# by itself; run.sh fails that case on the missing exit code.  Several logs:
# one bad one fails the lot.
{ printf '%s\n' "$clean"; echo '[ 1.0] WARNING: at x'; } > "$work/bad2.log"
if "$check" "$work/clean.log" "$work/bad2.log" 2>/dev/null; then
	echo "FAIL: a bad second log passed"
	failures=$((failures + 1))
fi

# PID 1's panic after the power-off (the 9p root is gone) is the test
# bed's; a problem before the power-off, or another one after it, is not.
poweroff_panic=(
	'[   60.49] sysrq: Power Off'
	'[   60.51] reboot: Power down'
	'[   60.51] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000007'
	'[   60.51] Call Trace:'
	'[   60.51]  panic+0x118/0x2f4'
)
{ printf '%s\n' "$clean"; printf '%s\n' "${poweroff_panic[@]}"; } > "$work/poweroff.log"
if ! "$check" "$work/poweroff.log" 2>/dev/null; then
	echo "FAIL: PID 1's panic after the power-off was reported"
	failures=$((failures + 1))
fi
# The panic may come before "reboot: Power down" is printed.
{ printf '%s\n' "$clean"; printf '%s\n' "${poweroff_panic[0]}" "${poweroff_panic[@]:2}"; } > "$work/poweroff-early.log"
if ! "$check" "$work/poweroff-early.log" 2>/dev/null; then
	echo "FAIL: PID 1's panic right after the power-off request was reported"
	failures=$((failures + 1))
fi
{ printf '%s\n' "$clean"; echo '[ 50.0] WARNING: at x'; printf '%s\n' "${poweroff_panic[@]}"; } > "$work/poweroff-bad.log"
if "$check" "$work/poweroff-bad.log" 2>/dev/null; then
	echo "FAIL: a warning before the power-off passed"
	failures=$((failures + 1))
fi
{ printf '%s\n' "$clean"; printf '%s\n' '[ 60.5] reboot: Power down' \
	'[ 60.5] Kernel panic - not syncing: Fatal exception'; } > "$work/poweroff-other.log"
if "$check" "$work/poweroff-other.log" 2>/dev/null; then
	echo "FAIL: another panic after the power-off passed"
	failures=$((failures + 1))
fi

echo "check-dmesg: ${#reports[@]} reports + clean log, $failures failures"
[ "$failures" = 0 ]
