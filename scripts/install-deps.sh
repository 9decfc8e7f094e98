#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install every Debian package the sdp build, tests and benchmarks need.
# Idempotent: what is installed is not touched, and apt does not run at all
# when nothing is missing.  Runs as root (or through sudo when available).
#
#   scripts/install-deps.sh            install what is missing
#   scripts/install-deps.sh --check    exit 1, listing it, if anything is missing
#   ... --debug                        also what the debug kernel of
#                                      `make check-debug` needs (the kernel
#                                      build's tools; scripts/debug-kernel.sh)
#
# Kernels: the module is built and VM-tested against every installed Debian
# kernel with headers.  Two series are installed: 6.1 and 6.12 (both are
# bookworm kernels; 6.12 comes through bookworm-security), two generations
# of the socket, RDMA and Kbuild APIs.  SDP_KERNEL_612=0 skips 6.12.
set -euo pipefail

# Host build and host tests; linux-source-6.1 for checkpatch.pl and the
# kernel's MSG_ZEROCOPY selftest (tests/vm/preload_test.sh).
pkgs_build=(
	build-essential g++ gcc make cmake ninja-build pkg-config
	clang libclang-rt-14-dev clang-format clang-tidy
	libgtest-dev libgmock-dev googletest libbenchmark-dev
	sparse pahole git python3 xz-utils curl patch
	linux-source-6.1
)
# Module tooling (the kernels themselves are handled below); dkms for the
# DKMS build that make install-check runs, debhelper and dh-dkms for the
# Debian packages (make deb).
pkgs_kernel=(kmod dkms debhelper dh-dkms)
# VM test bed: qemu (TCG), an initramfs made of busybox, Soft-RoCE userspace,
# tshark (scripts/vm/wire-check.py decodes the pair tier's link capture).
pkgs_vm=(
	qemu-system-x86 qemu-utils busybox-static cpio iproute2 procps
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	libibverbs-dev librdmacm-dev perftest
	tshark
)
# Userspace library and benchmarks.
# socat and sockperf: real programs the preload tests run (tests/vm/preload_test.sh).
pkgs_user=(liburing-dev iperf3 gnuplot-nox socat sockperf)
# Source tarballs from Debian's archive, pinned by checksum: liburing's own
# zero-copy send test (test/send-zerocopy.c of liburing-dev's version, built
# by CMake; tests/vm/uring_zc_test.sh).  "path url sha256" each.
srcs=(
	"/usr/src/liburing_2.3.orig.tar.gz
	http://deb.debian.org/debian/pool/main/libu/liburing/liburing_2.3.orig.tar.gz
	2eac26f880125d83f75ba8641fde5d88226dd352d3cee95d45a9128758a8f1be"
)
# Optional (--debug): building the KASAN/lockdep/kmemleak kernel from
# Debian's source (scripts/debug-kernel.sh).
pkgs_debug=(flex bison bc libelf-dev libssl-dev patch)

check=0
debug=0
for arg in "$@"; do
	case $arg in
	--check) check=1 ;;
	--debug) debug=1 ;;
	*) echo "install-deps: unknown option $arg" >&2; exit 2 ;;
	esac
done
[ $debug = 1 ] || pkgs_debug=()

# qemu: at least 8.1.  Earlier TCG translates a guest code page without
# locking it against a concurrent invalidation (fixed upstream by "accel/tcg:
# Always lock pages before translation"); bookworm's 7.2 lacks the fix, and
# its 6.12 guests died of double faults and spurious debug traps in about
# half of the pair tier's runs, with exception frames holding garbage
# (Documentation/testing.md).  bookworm-backports carries a fixed qemu.
qemu_min=1:8.1
backports_list=/etc/apt/sources.list.d/sdp-bookworm-backports.list

qemu_too_old() {
	local v
	v=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null) || return 1
	[ -n "$v" ] && dpkg --compare-versions "$v" lt "$qemu_min"
}

# Kernel series: "name-regex-of-the-image-package  /lib/modules glob".
kernel_series=('^linux-image-6\.1\.0-[0-9]+-amd64$ 6.1.0-*-amd64')
[ "${SDP_KERNEL_612:-1}" = 1 ] &&
	kernel_series+=('^linux-image-6\.12\.[0-9]+\+deb12-amd64$ 6.12.*+deb12-amd64')

as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		echo "install-deps: need root to run: $*" >&2
		exit 1
	fi
}

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || echo "$p"
	done
}

# A series is present when some kernel of it has an image and headers.
series_present() {
	local glob=$1 d k
	for d in /lib/modules/$glob/; do
		k=$(basename "$d")
		[ -f "/boot/vmlinuz-$k" ] && [ -f "/lib/modules/$k/build/Makefile" ] && return 0
	done
	return 1
}

mapfile -t missing < <(missing_pkgs "${pkgs_build[@]}" "${pkgs_kernel[@]}" "${pkgs_vm[@]}" "${pkgs_user[@]}" "${pkgs_debug[@]}")
missing_srcs=()
for s in "${srcs[@]}"; do
	read -r path url sum <<<"$(echo $s)"
	echo "$sum  $path" | sha256sum --quiet -c - >/dev/null 2>&1 || missing_srcs+=("$s")
done
missing_series=()
for s in "${kernel_series[@]}"; do
	read -r regex glob <<<"$s"
	series_present "$glob" || missing_series+=("$s")
done

# A qemu that is installed but older than qemu_min counts as missing; it
# comes from bookworm-backports (below), as does one not installed at all.
qemu_backports=0
if qemu_too_old || [[ " ${missing[*]} " == *" qemu-system-x86 "* ]]; then
	qemu_backports=1
	qemu_too_old && missing+=(qemu-system-x86)
fi

if [ $check = 1 ]; then
	if [ ${#missing[@]} -gt 0 ] || [ ${#missing_series[@]} -gt 0 ] ||
		[ ${#missing_srcs[@]} -gt 0 ]; then
		echo "missing packages: ${missing[*]:-none}; kernels: ${#missing_series[@]} series; sources: ${#missing_srcs[@]}"
		exit 1
	fi
	exit 0
fi
# fetch_src "PATH URL SHA256": download to PATH, keep it only if the checksum
# matches.
fetch_src() {
	local path url sum tmp
	read -r path url sum <<<"$(echo $1)"
	tmp=$(mktemp)
	if ! curl -fsSL --retry 3 -o "$tmp" "$url" && ! wget -q -O "$tmp" "$url"; then
		rm -f "$tmp"
		echo "install-deps: cannot download $url" >&2
		exit 1
	fi
	if ! echo "$sum  $tmp" | sha256sum --quiet -c - >/dev/null 2>&1; then
		rm -f "$tmp"
		echo "install-deps: $url does not match sha256 $sum" >&2
		exit 1
	fi
	as_root install -D -m 0644 "$tmp" "$path"
	rm -f "$tmp"
	echo "install-deps: $path"
}
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_series[@]} -eq 0 ]; then
	for s in "${missing_srcs[@]}"; do fetch_src "$s"; done
	echo "install-deps: all packages present"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Package lists may never have been fetched on a fresh machine.
update=0
if ! apt-cache show cmake >/dev/null 2>&1 || [ ${#missing_series[@]} -gt 0 ]; then
	update=1
fi
if [ $qemu_backports = 1 ] && ! grep -qs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/*; then
	echo "deb http://deb.debian.org/debian bookworm-backports main" |
		as_root tee "$backports_list" >/dev/null
	update=1
fi
[ $update = 0 ] || as_root apt-get update -q

# Kernels by exact (versioned) package name, so installing one series never
# moves the linux-image-amd64 metapackage away from the other.
kernel_pkgs=()
for s in "${missing_series[@]}"; do
	read -r regex glob <<<"$s"
	image=$(apt-cache search --names-only "$regex" | awk '{print $1}' | sort -V | tail -n 1)
	if [ -z "$image" ]; then
		echo "install-deps: no kernel package matches $regex" >&2
		exit 1
	fi
	kernel_pkgs+=("$image" "${image/linux-image-/linux-headers-}")
done

echo "install-deps: installing ${missing[*]} ${kernel_pkgs[*]}"
# Passed explicitly: sudo resets the environment.  wireshark-common (for
# tshark) asks whether non-root users may capture; unattended, the default
# (no) is taken.
apt_pkgs=()
for p in "${missing[@]}" "${kernel_pkgs[@]}"; do
	[ $qemu_backports = 1 ] && [ "$p" = qemu-system-x86 ] && continue
	apt_pkgs+=("$p")
done
[ ${#apt_pkgs[@]} = 0 ] ||
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${apt_pkgs[@]}"
if [ $qemu_backports = 1 ]; then
	# Backports is pinned low by default: ask for it by name.  Its
	# qemu-system-x86 pulls matching qemu-system-common/-data and seabios.
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86
	if qemu_too_old; then
		echo "install-deps: qemu-system-x86 is still older than $qemu_min" >&2
		exit 1
	fi
fi
for s in "${missing_srcs[@]}"; do fetch_src "$s"; done
echo "install-deps: done"
