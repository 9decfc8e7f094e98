#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest PID 1 after switch_root into the (read-only) host root.  Runs the
# tier script the host wrote to the results share, under a watchdog, then
# saves its exit code and dmesg there and powers the guest off.  PID 1 must
# never exit (that panics the kernel), so every path ends in power-off.
results=/run/sdp-results
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8

mount -t devpts -o mode=0620,ptmxmode=0666 devpts /dev/pts 2>/dev/null ||
	{ mkdir -p /dev/pts && mount -t devpts devpts /dev/pts; }
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null
ip link set lo up

# Exported: the tier script reads the SDP_PAIR_* settings of run-pair.sh.
set -a
# shellcheck source=/dev/null
. "$results/guest.env"
set +a
hostname "${SDP_VM_HOSTNAME:-sdp-vm}"
cd "$SDP_TOP" || echo "stage2: no $SDP_TOP" > /dev/console

echo "sdp-vm: running tier on $(uname -r)" > /dev/console
# The guest watchdog: a hung test is killed, the run still reports.
timeout -k 5 "$SDP_GUEST_TIMEOUT" bash "$results/cmd.sh" > "$results/guest.log" 2>&1
rc=$?
[ $rc = 124 ] || [ $rc = 137 ] && echo "sdp-vm: tier timed out after ${SDP_GUEST_TIMEOUT}s" >> "$results/guest.log"

dmesg > "$results/dmesg.txt"
echo "$rc" > "$results/exit-code"
echo "sdp-vm: exit code $rc" > /dev/console
sync
umount "$results" 2>/dev/null
# Power-off takes the host root (9p) away under this script: a `sleep`
# then fails to run and bash fails to read its next line, exits, and PID 1
# exiting panics the kernel.  So the last step is one compound command,
# parsed whole before it runs, of builtins only: it waits with read -t on
# a FIFO (on tmpfs, made while the root is there) that nobody writes.
mkfifo /dev/shm/sdp-idle
{
	exec 8<> /dev/shm/sdp-idle
	echo o > /proc/sysrq-trigger
	read -r -t 10 _ <&8
	echo b > /proc/sysrq-trigger
	while :; do read -r -t 1000 _ <&8; done
}
