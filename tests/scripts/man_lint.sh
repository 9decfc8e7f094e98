#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# man --warnings on each page: any warning fails (ctest man_lint).
status=0
for page in "$@"; do
	out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 "$page" 2>&1 >/dev/null)
	if [ -n "$out" ]; then
		echo "$page: $out" >&2
		status=1
	else
		echo "ok: $page"
	fi
done
exit $status
