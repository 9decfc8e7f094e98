#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test modules (tests/kmod: sdp_kecho.ko) for one kernel.
#
#   build-test-module.sh KVER [extra Kbuild make args, e.g. C=1 CHECK=sparse]
#
# As scripts/build-module.sh does for sdp.ko, each kernel gets its own
# symlink mirror of tests/kmod (BUILD_DIR/kmod-tests/KVER), so the source
# tree stays clean and kernels build side by side.  Output goes under
# $SDP_BUILD (default: build/ in the repository); the VM tier loads
# BUILD_DIR/kmod-tests/KVER/sdp_kecho.ko with finit_module.
set -euo pipefail
kver=$1
shift
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${SDP_BUILD:-$top/build}")

kdir=/lib/modules/$kver/build
[ -f "$kdir/Makefile" ] || { echo "build-test-module: no headers for $kver in $kdir" >&2; exit 1; }

mirror=$build/kmod-tests/$kver
mkdir -p "$mirror"
# Refresh the mirror: new files get links, removed ones lose theirs.
find "$mirror" -type l ! -exec test -e {} \; -delete
cp -rsf "$top/tests/kmod/." "$mirror/"
# The hand-build Makefile would shadow nothing (Kbuild wins), but keep the
# mirror to what Kbuild reads.
rm -f "$mirror/Makefile"

make -C "$kdir" M="$mirror" SDP_TOP="$top" "$@" modules
echo "build-test-module: $mirror/sdp_kecho.ko"
