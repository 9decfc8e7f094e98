#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stage the DKMS source tree of sdp.ko: DIR/sdp-VERSION with dkms.conf,
# kernel/ (without build output), include/ and scripts/check-freestanding.sh;
# what /usr/src/sdp-VERSION holds once installed (make install-dkms, the
# sdp-dkms package).  Prints the directory.
#
#   dkms-source.sh DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
dest=$1/sdp-$version
rm -rf "$dest"
mkdir -p "$dest/scripts"
cd "$top"
# The module builds in per-kernel mirrors (build/kmod), so kernel/ holds
# sources only; no git needed (a Debian source package has none).
find kernel include -type f ! -name '*.o' ! -name '*.ko' ! -name '.*.cmd' -print0 |
	xargs -0 cp --parents -t "$dest"
cp dkms.conf "$dest/"
cp scripts/check-freestanding.sh "$dest/scripts/"
echo "$dest"
