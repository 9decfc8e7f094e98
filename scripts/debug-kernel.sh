#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once) and install the debug kernel of `make check-debug`: Debian's
# 6.1 source (linux-source-6.1) configured from x86_64_defconfig +
# kvm_guest.config + scripts/debug-kernel.config (KASAN, lockdep,
# kmemleak, debug objects; everything else the VM tier needs, little more).
# scripts/debug-kernel-patches/*.patch are applied first: fixes for bugs
# of the test bed itself (Soft-RoCE) that the checkers report, each
# explained in its header.
#
#   debug-kernel.sh              build if needed, install, print the release
#   debug-kernel.sh --release    print the release it would install, no build
#   debug-kernel.sh --uninstall  remove it from /boot and /lib/modules (the
#                                cache stays: installing again takes seconds)
#
# The build tree is cached outside the repository, in
# $SDP_DEBUG_KERNEL_CACHE (default /var/cache/sdp-debug-kernel)/HASH, HASH
# covering the config fragment, the patches, the source package version and
# the recipe number below: a complete cache entry is reused, never rebuilt.  Installing puts the
# image and System.map in /boot and the modules in /lib/modules/RELEASE,
# whose build link points at the cached tree, so scripts/build-module.sh
# and scripts/vm/run.sh work with
# KVER=RELEASE as for a Debian kernel.  scripts/kver.sh leaves it out (its
# release ends in -sdpdebug), so `make check` never tests it; a checkout
# whose kver.sh predates that would, while it is installed (--uninstall).
#
# The build runs `nice -n 10 make -j$SDP_DEBUG_KERNEL_JOBS` (default: the
# number of CPUs); on 2 cores it takes about 20 minutes
# (Documentation/testing.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fragment=$top/scripts/debug-kernel.config
patches=("$top"/scripts/debug-kernel-patches/*.patch)
[ -e "${patches[0]}" ] || patches=()
cache_root=${SDP_DEBUG_KERNEL_CACHE:-/var/cache/sdp-debug-kernel}
jobs=${SDP_DEBUG_KERNEL_JOBS:-$(nproc)}
pkg=linux-source-6.1
tarball=/usr/src/$pkg.tar.xz

as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		echo "debug-kernel: need root to run: $*" >&2
		exit 1
	fi
}

localversion=$(sed -n 's/^CONFIG_LOCALVERSION="\(.*\)"$/\1/p' "$fragment")

if [ "${1:-}" = --uninstall ]; then
	for rel in $(cat "$cache_root"/*/complete 2>/dev/null | sort -u); do
		case $rel in *"$localversion") ;; *) continue ;; esac
		echo "debug-kernel: uninstalling $rel"
		as_root rm -rf "/lib/modules/$rel"
		as_root rm -f "/boot/vmlinuz-$rel" "/boot/System.map-$rel" "/boot/config-$rel"
	done
	exit 0
fi

# The source and the kernel's build tools (flex, bison, ...): Debian's
# packages, installed on demand (optional dependencies, see
# scripts/install-deps.sh --debug).  linux-source-6.1 alone may already be
# there: `make deps` installs it for the API examples.
if ! "$top/scripts/install-deps.sh" --debug --check >/dev/null 2>&1 ||
	! dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' ||
	[ ! -f "$tarball" ]; then
	"$top/scripts/install-deps.sh" --debug
fi
srcver=$(dpkg-query -W -f='${Version}' "$pkg")

# Bump when the build or install steps below change what is built.
recipe=1
hash=$( { echo "$pkg $srcver recipe $recipe"; cat "$fragment" "${patches[@]}"; } | sha256sum | cut -c1-16)
cache=$cache_root/$hash
tree=$cache/$pkg

release_of() { make -s -C "$1" kernelrelease; }

if [ "${1:-}" = --release ]; then
	if [ -f "$cache/complete" ]; then
		cat "$cache/complete"
	else
		# SUBLEVEL etc. from the tarball's top Makefile.
		tar -xJOf "$tarball" "$pkg/Makefile" |
			awk -F' = ' '/^VERSION =/{v=$2} /^PATCHLEVEL =/{p=$2} /^SUBLEVEL =/{s=$2}
				END {printf "%s.%s.%s", v, p, s}'
		echo "$localversion"
	fi
	exit 0
fi

# Every =y/=m/=value line of the fragment must hold in the final .config and
# every "is not set" line must stay unset: a dependency that silently
# dropped an option (lockdep, KASAN, ...) would make the run meaningless.
check_config() {
	local cfg=$1 bad=0 line sym
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			if ! grep -qxF -- "$line" "$cfg"; then
				echo "debug-kernel: wanted $line, got: $(grep -E "^(# )?${line%%=*}[= ]" "$cfg" || echo 'absent')" >&2
				bad=1
			fi
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			if grep -qE "^$sym=" "$cfg"; then
				echo "debug-kernel: wanted $sym unset, got: $(grep -E "^$sym=" "$cfg")" >&2
				bad=1
			fi
			;;
		esac
	done < "$fragment"
	return $bad
}

build() {
	local start end
	start=$(date +%s)
	echo "debug-kernel: building $pkg $srcver in $cache (nice -n 10 make -j$jobs)"
	as_root mkdir -p "$cache_root"
	as_root rm -rf "$cache"
	as_root mkdir -p "$cache"
	as_root chown "$(id -u):$(id -g)" "$cache"
	tar -C "$cache" -xJf "$tarball"
	for p in "${patches[@]}"; do
		echo "debug-kernel: applying $(basename "$p")"
		patch -d "$tree" -p1 --forward --quiet < "$p"
	done
	cp "$fragment" "$cache/debug-kernel.config"
	(
		cd "$tree"
		make -s x86_64_defconfig
		scripts/kconfig/merge_config.sh -m .config kernel/configs/kvm_guest.config \
			"$cache/debug-kernel.config" > "$cache/merge.log"
		make -s olddefconfig
	)
	check_config "$tree/.config" || { echo "debug-kernel: configuration check failed" >&2; exit 1; }
	nice -n 10 make -C "$tree" -j"$jobs" bzImage modules
	release_of "$tree" > "$cache/release"
	end=$(date +%s)
	echo "$((end - start))" > "$cache/build-seconds"
	echo "debug-kernel: built $(cat "$cache/release") in $(( (end - start) / 60 )) min"
	release_of "$tree" > "$cache/complete"
}

install_kernel() {
	local rel=$1 mods=/lib/modules/$1
	# Re-install when the image differs (a rebuilt cache entry).
	if cmp -s "$tree/arch/x86/boot/bzImage" "/boot/vmlinuz-$rel" &&
		[ "$(readlink "$mods/build")" = "$tree" ] && [ -f "$mods/modules.dep" ]; then
		return
	fi
	echo "debug-kernel: installing $rel (/boot, $mods)"
	as_root rm -rf "$mods"
	as_root make -s -C "$tree" modules_install INSTALL_MOD_STRIP=1 DEPMOD=/sbin/depmod
	as_root install -m 0644 "$tree/arch/x86/boot/bzImage" "/boot/vmlinuz-$rel"
	as_root install -m 0644 "$tree/System.map" "/boot/System.map-$rel"
	as_root install -m 0644 "$tree/.config" "/boot/config-$rel"
	as_root ln -sfn "$tree" "$mods/build"
	as_root ln -sfn "$tree" "$mods/source"
	as_root depmod -F "/boot/System.map-$rel" "$rel"
}

[ -f "$cache/complete" ] || build
rel=$(cat "$cache/complete")
install_kernel "$rel"
# Older cache entries (another fragment or source version) are dead weight:
# several GB each.  Only directories this script made are removed.
for d in "$cache_root"/*/; do
	d=${d%/}
	[ "$d" != "$cache" ] && [ -f "$d/debug-kernel.config" ] && as_root rm -rf "$d"
done
echo "$rel"
