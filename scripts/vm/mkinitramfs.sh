#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest initramfs for one kernel: busybox plus the virtio and 9p
# modules needed to mount the host root, and scripts/vm/init.
#
#   mkinitramfs.sh KVER OUTPUT.cpio.gz
#
# The modules are copied uncompressed (busybox insmod cannot load .ko.xz).
set -euo pipefail
kver=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,newroot,lib/modules}
cp /bin/busybox "$stage/bin/busybox"
cp "$here/init" "$stage/init"
chmod 0755 "$stage/init"

# modprobe --show-depends prints the insmod lines in load order (one module
# per call: further names would be taken as module parameters).  A module
# built into the kernel (the debug kernel of `make check-debug` has all of
# these built in) comes as "builtin NAME": nothing to copy.
for m in virtio_pci 9pnet_virtio 9p; do
	modprobe -S "$kver" --show-depends "$m"
done | awk '$1 == "insmod" { print $2 }' | awk '!seen[$0]++' > "$stage/modules.list.src"
: > "$stage/modules.list"
while read -r src; do
	name=$(basename "$src")
	name=${name%.xz}
	name=${name%.zst}
	case "$src" in
	*.xz) xz -dc "$src" > "$stage/lib/modules/$name" ;;
	*.zst) zstd -qdc "$src" > "$stage/lib/modules/$name" ;;
	*) cp "$src" "$stage/lib/modules/$name" ;;
	esac
	echo "$name" >> "$stage/modules.list"
done < "$stage/modules.list.src"
rm "$stage/modules.list.src"

mkdir -p "$(dirname "$out")"
(cd "$stage" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
