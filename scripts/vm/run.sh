#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot a Debian kernel under qemu with the host root mounted read-only over
# 9p, run one guest script (a test tier), and return its exit code.
#
#   run.sh [-k KVER] [-o RESULTS_DIR] [-t TIMEOUT_S] [-m MEM_MB] [-c CPUS] SCRIPT [ARGS...]
#
# SCRIPT is any executable the guest can reach (relative paths are taken
# from the repository root), run as root.
# RESULTS_DIR receives console.log (serial console), guest.log (the script's
# output), dmesg.txt and exit-code.  The run fails if the script fails, if
# the guest never reports (hang, panic: the host timeout kills qemu), or if
# the kernel log shows a BUG/WARNING/Oops/lockup/hung task/refcount or list
# corruption report (check-dmesg.sh).
#
# Environment for scripts that drive several guests (run-pair.sh):
#   SDP_VM_NET        qemu network arguments replacing `-nic none`
#   SDP_VM_RW_SHARE   a host directory mounted read-write at the same path
#   SDP_VM_GUEST_ENV  extra KEY=VALUE lines for the guest's environment
#   SDP_VM_HOSTNAME   the guest's host name (default sdp-vm)
#
# Acceleration: TCG unless SDP_VM_ACCEL=kvm, or SDP_VM_ACCEL=auto and a probe
# boot under KVM succeeded (nested KVM hangs on some hosts, so it is probed,
# never assumed; the verdict is cached in build/vm/accel).
#
# SDP_VM_QEMU: the qemu-system-x86_64 to run (default: the one on PATH, 8.1
# or newer; run.sh warns about an older one under TCG).
#
# SDP_VM_APPEND: more kernel command-line arguments, after the defaults (a
# later sysctl.* argument overrides an earlier one).  `make check-debug`
# uses it for the debug kernel's slower pace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

kver=${KVER:-}
results=
timeout_s=600
mem=1024
cpus=2
while getopts k:o:t:m:c: opt; do
	case $opt in
	k) kver=$OPTARG ;;
	o) results=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	m) mem=$OPTARG ;;
	c) cpus=$OPTARG ;;
	*) sed -n '4,10p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "run.sh: no guest script" >&2; exit 2; }
[ -n "$kver" ] || kver=$("$top/scripts/kver.sh")
[ -n "$kver" ] || { echo "run.sh: no kernel with headers installed (make deps)" >&2; exit 2; }
[ -f "/boot/vmlinuz-$kver" ] || { echo "run.sh: /boot/vmlinuz-$kver missing" >&2; exit 2; }
results=$(realpath -m "${results:-$top/build/vm/results/$kver}")

vmdir=$top/build/vm
initrd=$vmdir/initramfs-$kver.cpio.gz
if [ ! -f "$initrd" ] || [ "$here/init" -nt "$initrd" ] || [ "$here/mkinitramfs.sh" -nt "$initrd" ]; then
	"$here/mkinitramfs.sh" "$kver" "$initrd"
fi

# The repository and the build directory are shared with the guest on their
# own as well as through the host root: the guest mounts tmpfs on /tmp,
# /run and /var/tmp, which would hide a checkout or build living there.
shares=("$top")
build_dir=$(realpath -m "${SDP_BUILD:-$top/build}")
case $build_dir/ in
"$top"/*) ;;
*) shares+=("$build_dir") ;;
esac

# One qemu boot.  $1: results dir, $2: host-side timeout, $3: accel.
boot() {
	local dir=$1 limit=$2 accel=$3 cpu=max i
	local share_args=()
	[ "$accel" = kvm ] && cpu=host
	: > "$dir/shares"
	for i in "${!shares[@]}"; do
		share_args+=(-virtfs "local,path=${shares[$i]},mount_tag=share$i,security_model=none,readonly=on,multidevs=remap")
		echo "share$i ${shares[$i]} ro" >> "$dir/shares"
	done
	if [ -n "${SDP_VM_RW_SHARE:-}" ]; then
		share_args+=(-virtfs "local,path=$SDP_VM_RW_SHARE,mount_tag=sharerw,security_model=none,multidevs=remap")
		echo "sharerw $SDP_VM_RW_SHARE rw" >> "$dir/shares"
	fi
	local net_args=(-nic none)
	# shellcheck disable=SC2206 # qemu arguments, split on white space
	[ -n "${SDP_VM_NET:-}" ] && net_args=($SDP_VM_NET)
	timeout -k 5 "$limit" "${SDP_VM_QEMU:-qemu-system-x86_64}" \
		-accel "$accel" -cpu "$cpu" -m "$mem" -smp "$cpus" \
		-kernel "/boot/vmlinuz-$kver" -initrd "$initrd" \
		-append "console=ttyS0 loglevel=5 panic=-1 oops=panic sysctl.kernel.hung_task_timeout_secs=30${SDP_VM_APPEND:+ $SDP_VM_APPEND}" \
		-display none -monitor none -serial "file:$dir/console.log" \
		-no-reboot "${net_args[@]}" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$dir,mount_tag=results,security_model=none,multidevs=remap" \
		"${share_args[@]}" \
		> "$dir/qemu.log" 2>&1
}

# Prepare a results dir for SCRIPT ARGS.
prepare() {
	local dir=$1 timeout=$2
	shift 2
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "$here/guest-stage2.sh" > "$dir/stage2"
	{
		printf 'SDP_TOP=%q\n' "$top"
		printf 'SDP_KVER=%q\n' "$kver"
		printf 'SDP_GUEST_TIMEOUT=%q\n' "$timeout"
		printf 'SDP_RESULTS=%q\n' /run/sdp-results
		printf 'SDP_VM_HOSTNAME=%q\n' "${SDP_VM_HOSTNAME:-sdp-vm}"
		[ -z "${SDP_VM_GUEST_ENV:-}" ] || printf '%s\n' "$SDP_VM_GUEST_ENV"
	} > "$dir/guest.env"
	printf 'exec' > "$dir/cmd.sh"
	printf ' %q' "$@" >> "$dir/cmd.sh"
	echo >> "$dir/cmd.sh"
}

pick_accel() {
	local want=${SDP_VM_ACCEL:-auto} cache=$vmdir/accel
	case $want in
	tcg | kvm) echo "$want"; return ;;
	esac
	if [ ! -w /dev/kvm ]; then echo tcg; return; fi
	if [ ! -f "$cache" ]; then
		local probe=$vmdir/kvm-probe
		prepare "$probe" 10 true
		if boot "$probe" 20 kvm && [ "$(cat "$probe/exit-code" 2>/dev/null)" = 0 ]; then
			echo kvm > "$cache"
		else
			echo tcg > "$cache"
		fi
	fi
	cat "$cache"
}

accel=$(pick_accel)
# TCG before qemu 8.1 crashes 6.12 guests at random (Documentation/testing.md).
qemu_version=$("${SDP_VM_QEMU:-qemu-system-x86_64}" --version | sed -n '1s/^QEMU emulator version \([0-9]*\.[0-9]*\).*/\1/p')
if [ "$accel" = tcg ] && [ -n "$qemu_version" ] &&
	[ "$(printf '%s\n' "$qemu_version" 8.1 | sort -V | head -n 1)" != 8.1 ]; then
	echo "run.sh: warning: qemu $qemu_version: TCG before 8.1 crashes guests at random; scripts/install-deps.sh installs a newer one" >&2
fi
prepare "$results" "$timeout_s" "$@"
start=$(date +%s)
echo "run.sh: booting $kver ($accel) for: $*"
boot "$results" $((timeout_s + 120)) "$accel" || true
# A guest that died while booting, before the tier started (no module of
# ours loaded, nothing tested), is a test-bed failure, not a result: TCG
# has been seen to crash Debian's 6.12 early in boot once in a few dozen
# boots.  Keep its console and boot once more.
if [ ! -f "$results/exit-code" ] && ! grep -q 'sdp-vm: running tier' "$results/console.log" 2>/dev/null; then
	echo "run.sh: the guest died before the tier started; console kept in console-boot1.log, booting again" >&2
	mv "$results/console.log" "$results/console-boot1.log"
	boot "$results" $((timeout_s + 120)) "$accel" || true
fi
elapsed=$(( $(date +%s) - start ))

status=0
if [ -f "$results/exit-code" ]; then
	rc=$(cat "$results/exit-code")
else
	rc=none
	echo "run.sh: the guest did not report an exit code (hang or panic); console tail:" >&2
	tail -n 40 "$results/console.log" >&2 || true
	if [ -s "$results/qemu.log" ]; then
		echo "run.sh: qemu said:" >&2
		tail -n 10 "$results/qemu.log" >&2
	fi
	status=1
fi
cat "$results/guest.log" 2>/dev/null || true
if [ "$rc" != none ] && [ "$rc" != 0 ]; then
	echo "run.sh: guest script failed with exit code $rc" >&2
	status=1
fi
if ! "$here/check-dmesg.sh" "$results/dmesg.txt" "$results/console.log"; then
	status=1
fi
echo "run.sh: $kver: guest exit $rc, ${elapsed}s wall, results in $results"
exit $status
