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
#                                      `make check-debug` needs (the 6.1
#                                      source package and the kernel build's
#                                      tools; scripts/debug-kernel.sh)
#
# Kernels: the module is built and VM-tested against every installed Debian
# kernel with headers.  Two series are installed: 6.1 and 6.12 (both are
# bookworm kernels; 6.12 comes through bookworm-security), two generations
# of the socket, RDMA and Kbuild APIs.  SDP_KERNEL_612=0 skips 6.12.
set -euo pipefail

# Host build and host tests.
pkgs_build=(
	build-essential g++ gcc make cmake ninja-build pkg-config
	clang libclang-rt-14-dev clang-format clang-tidy
	libgtest-dev libgmock-dev googletest libbenchmark-dev
	sparse pahole git python3 xz-utils
)
# Module tooling (the kernels themselves are handled below).
pkgs_kernel=(kmod)
# VM test bed: qemu (TCG), an initramfs made of busybox, Soft-RoCE userspace,
# tshark (scripts/vm/wire-check.py decodes the pair tier's link capture).
pkgs_vm=(
	qemu-system-x86 qemu-utils busybox-static cpio iproute2 procps
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	libibverbs-dev librdmacm-dev perftest
	tshark
)
# Userspace library and benchmarks.
pkgs_user=(liburing-dev iperf3 gnuplot-nox)
# Optional (--debug): building the KASAN/lockdep/kmemleak kernel from
# Debian's source (scripts/debug-kernel.sh).
pkgs_debug=(linux-source-6.1 flex bison bc libelf-dev libssl-dev patch)

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
missing_series=()
for s in "${kernel_series[@]}"; do
	read -r regex glob <<<"$s"
	series_present "$glob" || missing_series+=("$s")
done

if [ $check = 1 ]; then
	if [ ${#missing[@]} -gt 0 ] || [ ${#missing_series[@]} -gt 0 ]; then
		echo "missing packages: ${missing[*]:-none}; kernels: ${#missing_series[@]} series"
		exit 1
	fi
	exit 0
fi
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_series[@]} -eq 0 ]; then
	echo "install-deps: all packages present"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Package lists may never have been fetched on a fresh machine.
if ! apt-cache show cmake >/dev/null 2>&1 || [ ${#missing_series[@]} -gt 0 ]; then
	as_root apt-get update -q
fi

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
as_root env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}" "${kernel_pkgs[@]}"
echo "install-deps: done"
