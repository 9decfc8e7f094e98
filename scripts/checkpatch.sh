#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# checkpatch.pl over the kernel C: sdp.ko's glue (kernel/*.c, kernel/*.h),
# the test module (tests/kmod) and the headers the kernel includes.  Any
# warning fails (make checkpatch, part of make check).
#
#   checkpatch.sh [FILE...]
#
# checkpatch.pl comes from $CHECKPATCH, else from Debian's linux-source-6.1
# tarball (extracted once into $SDP_BUILD/checkpatch: the script, its
# spelling list and its list of structs that should be const).
#
# Two files are checked without one warning each, for a reason that holds
# for the whole file:
#   kernel/sdp_compat.h  LINUX_VERSION_CODE, CONSTANT_COMPARISON: the
#                        version tests of an out-of-tree module that builds
#                        for several kernels, all of them in this file
#   kernel/sdp_socket.c  CONST_STRUCT: its proto_ops carry the `family`
#                        module parameter, set in the module's init
#                        (__ro_after_init)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${SDP_BUILD:-$top/build}")
cd "$top"

cp=${CHECKPATCH:-}
if [ -z "$cp" ]; then
	cache=$build/checkpatch
	cp=$cache/linux-source-6.1/scripts/checkpatch.pl
	if [ ! -f "$cp" ]; then
		tarball=/usr/src/linux-source-6.1.tar.xz
		[ -f "$tarball" ] || { echo "checkpatch: no $tarball (apt-get install linux-source-6.1) and no CHECKPATCH" >&2; exit 1; }
		mkdir -p "$cache"
		tar -xJf "$tarball" -C "$cache" --wildcards \
			'linux-source-6.1/scripts/checkpatch.pl' \
			'linux-source-6.1/scripts/spelling.txt' \
			'linux-source-6.1/scripts/const_structs.checkpatch'
	fi
fi

if [ $# -eq 0 ]; then
	set -- kernel/*.c kernel/*.h tests/kmod/*.c include/sdp_wire.h include/uapi/sdp.h
fi

rc=0
for f in "$@"; do
	ignore=
	case $f in
	kernel/sdp_compat.h) ignore=--ignore=LINUX_VERSION_CODE,CONSTANT_COMPARISON ;;
	kernel/sdp_socket.c) ignore=--ignore=CONST_STRUCT ;;
	esac
	# Exit status 0 only without errors and warnings.
	perl "$cp" --no-tree --terse --show-types $ignore -f "$f" >&2 || rc=1
done
[ $rc -eq 0 ] && echo "checkpatch: $# files clean"
exit $rc
