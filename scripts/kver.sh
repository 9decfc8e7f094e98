#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Print the installed Debian kernels that the module can be built and tested
# against: an image in /boot and matching headers.  Newest first.  The debug
# kernel of `make check-debug` (release *-sdpdebug, scripts/debug-kernel.sh)
# is not one of them: it is only tested on request.
#
#   kver.sh          the newest one (the default KVER)
#   kver.sh --all    all of them, one per line
set -eu
list() {
	for d in /lib/modules/*/; do
		k=$(basename "$d")
		case $k in *-sdpdebug) continue ;; esac
		[ -f "/boot/vmlinuz-$k" ] && [ -f "/lib/modules/$k/build/Makefile" ] && echo "$k"
	done | sort -rV
}
if [ "${1:-}" = --all ]; then
	list
else
	list | head -n 1
fi
