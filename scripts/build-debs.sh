#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the Debian packages (sdp-dkms, sdp-tools, libsdp, libsdp-dev) with
# dpkg-buildpackage from a copy of the tree's tracked files, so that the
# packages come from what is committed and the outputs stay out of the
# source tree.
#
#   build-debs.sh OUT_DIR      (the .debs land in OUT_DIR)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "$1")
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
src=$out/sdp-$version
rm -rf "$out"
mkdir -p "$src"
cd "$top"
git ls-files -z | xargs -0 cp --parents -t "$src"
cd "$src"
if ! dpkg-buildpackage -us -uc -b > "$out/build.log" 2>&1; then
	tail -30 "$out/build.log" >&2
	echo "build-debs: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
rm -rf "$src"
ls "$out"/*.deb
