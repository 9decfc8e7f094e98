#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build sdp.ko and the test modules (tests/kmod: sdp_kecho.ko, the
# in-kernel consumer the VM tier loads, and sdp_pinbench.ko, which make
# bench times pinning with) for one kernel, and stage sdp.ko in
# a module root the VM uses.  The one script every module build goes
# through: make module/modules/sparse/check-debug and tests/kmod/Makefile.
#
#   build-module.sh KVER [extra Kbuild make args, e.g. C=1 CHECK=sparse]
#
# Output goes under $SDP_BUILD (default: build/ in the repository).
# Kbuild builds external modules inside their source directory, so each
# kernel gets its own symlink mirror of kernel/ (BUILD_DIR/kmod/KVER) and of
# tests/kmod (BUILD_DIR/kmod-tests/KVER): the source tree stays clean and
# several kernels can be built side by side.
#
# The module is then installed into BUILD_DIR/modroot-KVER/lib/modules/KVER
# (kernel/ there links to the distro modules) and depmod indexes it, exactly
# what `make modules_install` + depmod do for a staging root.  The VM points
# the kernel's module loader at that root, so socket(AF_INET_SDP, ...) can
# autoload sdp.ko through its net-pf alias.
set -euo pipefail
kver=$1
shift
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${SDP_BUILD:-$top/build}")

kdir=/lib/modules/$kver/build
[ -f "$kdir/Makefile" ] || { echo "build-module: no headers for $kver in $kdir" >&2; exit 1; }

# mirror SRC DEST: a symlink copy of SRC, refreshed (new files get links,
# removed ones lose theirs).
mirror() {
	mkdir -p "$2"
	find "$2" -type l ! -exec test -e {} \; -delete
	cp -rsf "$1/." "$2/"
}

mirror=$build/kmod/$kver
mirror "$top/kernel" "$mirror"

# pahole cannot encode C++ DWARF into BTF (DW_TAG_reference_type), and a
# kernel with CONFIG_DEBUG_INFO_BTF_MODULES runs it on every module: leave
# the C++ compilation units out of the module's BTF (the C glue keeps its).
# Kernels without MODULE_PAHOLE_FLAGS (6.1) have no vmlinux in their
# headers and skip module BTF altogether.
make -C "$kdir" M="$mirror" SDP_TOP="$top" SDP_STRICT=1 \
	MODULE_PAHOLE_FLAGS="--lang_exclude=rust,c++,c++03,c++11,c++14" "$@" modules

modroot=$build/modroot-$kver
moddir=$modroot/lib/modules/$kver
mkdir -p "$moddir/extra"
ln -sfn "/lib/modules/$kver/kernel" "$moddir/kernel"
for f in modules.builtin modules.builtin.modinfo modules.order; do
	ln -sfn "/lib/modules/$kver/$f" "$moddir/$f"
done
if ! cmp -s "$mirror/sdp.ko" "$moddir/extra/sdp.ko"; then
	install -m 0644 "$mirror/sdp.ko" "$moddir/extra/sdp.ko"
	depmod -b "$modroot" -F "/boot/System.map-$kver" "$kver"
fi
echo "build-module: $mirror/sdp.ko (installed in $modroot)"

# The test module, with the same extra arguments (sparse included).  The
# hand-build Makefile stays out of the mirror: Kbuild reads Kbuild.
tmirror=$build/kmod-tests/$kver
mirror "$top/tests/kmod" "$tmirror"
rm -f "$tmirror/Makefile"
make -C "$kdir" M="$tmirror" SDP_TOP="$top" "$@" modules
echo "build-module: $tmirror/sdp_kecho.ko $tmirror/sdp_pinbench.ko"
