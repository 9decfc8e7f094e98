#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install every Debian package the sdp build, tests and benchmarks need.
# Idempotent: packages already installed are not touched, and apt is not run
# at all when nothing is missing.  Runs as root (or through sudo when it is
# available).
#
#   scripts/install-deps.sh            # install what is missing
#   scripts/install-deps.sh --check    # exit 1 (and list them) if anything is missing
#
# Environment:
#   SDP_BACKPORTS_KERNEL=1   also install the bookworm-backports kernel (6.12)
#                            image and headers, a second target for the module.
set -euo pipefail

# Host build and host tests.
pkgs_build=(
	build-essential g++ gcc make cmake ninja-build pkg-config
	clang libclang-rt-14-dev clang-format clang-tidy
	libgtest-dev libgmock-dev googletest libbenchmark-dev
	sparse git
)
# Kernel image + headers for the module build and the VM; the module tools.
pkgs_kernel=(linux-image-amd64 linux-headers-amd64 kmod)
# VM test bed: qemu (TCG), an initramfs made of busybox, Soft-RoCE userspace.
pkgs_vm=(
	qemu-system-x86 qemu-utils busybox-static cpio iproute2 procps
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	libibverbs-dev librdmacm-dev perftest
)
# Userspace library and benchmarks.
pkgs_user=(liburing-dev iperf3)

all=("${pkgs_build[@]}" "${pkgs_kernel[@]}" "${pkgs_vm[@]}" "${pkgs_user[@]}")

backports_list=/etc/apt/sources.list.d/sdp-bookworm-backports.sources

want_backports() { [ "${SDP_BACKPORTS_KERNEL:-0}" = 1 ]; }

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || echo "$p"
	done
}

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

add_backports() {
	[ -f "$backports_list" ] && return 0
	# Same mirror and keyring as the bookworm entry already configured.
	as_root tee "$backports_list" >/dev/null <<-EOF
		Types: deb
		URIs: http://deb.debian.org/debian
		Suites: bookworm-backports
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	need_update=1
}

need_update=0
want_backports && add_backports

mapfile -t missing < <(missing_pkgs "${all[@]}")

# The backports kernel has a versioned name; find the newest one apt offers.
backports_pkgs=()
if want_backports; then
	if ! ls /lib/modules/6.12.*-amd64/build/Makefile >/dev/null 2>&1; then
		backports_pkgs=(-t bookworm-backports linux-image-amd64 linux-headers-amd64)
	fi
fi

if [ "${1:-}" = --check ]; then
	if [ ${#missing[@]} -gt 0 ] || [ ${#backports_pkgs[@]} -gt 0 ]; then
		echo "missing: ${missing[*]} ${backports_pkgs[*]}"
		exit 1
	fi
	exit 0
fi

if [ ${#missing[@]} -eq 0 ] && [ ${#backports_pkgs[@]} -eq 0 ]; then
	echo "install-deps: all packages present"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Package lists may never have been fetched on a fresh machine.
if [ "$need_update" = 1 ] || [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] ||
	! apt-cache show "${missing[0]:-cmake}" >/dev/null 2>&1; then
	as_root apt-get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [ ${#backports_pkgs[@]} -gt 0 ]; then
	echo "install-deps: installing the bookworm-backports kernel"
	as_root apt-get install -y -q --no-install-recommends "${backports_pkgs[@]}"
fi
echo "install-deps: done"
