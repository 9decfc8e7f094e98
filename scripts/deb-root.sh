#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages of BUILD_DIR/deb with dpkg -i into a copy of
# this machine's root, as into a chroot, and keep what the installation
# changed for the guests' package test (tests/vm/deb_test.sh).
#
#   deb-root.sh BUILD_DIR
#
# The guests boot this machine's root over 9p, so the copy is the root they
# run.  sdp-dkms's postinst, run in a chroot (its running kernel is not one
# of /lib/modules), has DKMS build and install sdp.ko for every kernel with
# headers: natively here, in a minute or two, where each guest under TCG
# took ten to fifteen.  What dpkg and DKMS wrote lands in
# BUILD_DIR/deb-root/changes.tar, what they removed from the root in
# BUILD_DIR/deb-root/removed (one path per line); the guest applies both to
# an overlay of its root and loads and uses what was installed.  dpkg -r
# then runs here, in the same copy, and must take it all away.
set -euo pipefail
build=$(realpath "$1")
out=$build/deb-root
debs=()
for d in "$build"/deb/*.deb; do
	case $d in *-dbgsym_*) ;; *) [ -f "$d" ] && debs+=("$d") ;; esac
done
if [ ${#debs[@]} -lt 4 ]; then
	echo "deb-root: no packages in $build/deb (make deb)" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p "$out"

# The overlay's upper layer is a tmpfs: overlayfs refuses an upper directory
# inside its lower layer, which is /.  The mounts live in a private mount
# namespace and go with it.
unshare -m --propagation private bash -s "$out" "${debs[@]}" << 'NS'
set -euo pipefail
out=$1
shift
t=$(mktemp -d /tmp/deb-root.XXXXXX)
trap 'cd /; umount -l "$t"; rmdir "$t"' EXIT
mount -t tmpfs -o size=4g tmpfs "$t"
mkdir -p "$t/upper" "$t/work" "$t/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$t/root"
r=$t/root
for m in proc sys dev dev/pts; do mount --bind "/$m" "$r/$m"; done
mount -t tmpfs tmpfs "$r/tmp"
mount -t tmpfs tmpfs "$r/run"
mkdir -p "$r/var/tmp/sdp-debs"
cp "$@" "$r/var/tmp/sdp-debs/"
in_root_debs=()
for d in "$@"; do in_root_debs+=("/var/tmp/sdp-debs/${d##*/}"); done
# As an administrator's shell would: none of the caller's environment.
start=$(date +%s)
if ! env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
	chroot "$r" dpkg -i "${in_root_debs[@]}" > "$out/dpkg-install.log" 2>&1; then
	tail -40 "$out/dpkg-install.log" >&2
	echo "deb-root: dpkg -i failed (log: $out/dpkg-install.log)" >&2
	exit 1
fi
echo "deb-root: dpkg -i in $(($(date +%s) - start)) s; DKMS built sdp.ko for" \
	"$(find "$r/var/lib/dkms/sdp" -path '*/module/sdp.ko*' | awk -F/ '{ print $(NF - 3) }' | sort | paste -sd ' ')"
rm -rf "$r/var/tmp/sdp-debs"
cd "$t/upper"
# A character device 0/0 in the upper layer is a whiteout: a file of the
# root that dpkg removed.  An opaque directory ("y") that the root has too
# was removed and made again; its old contents would need hiding as well.
# dpkg -i does not do that, and the copy refuses to be wrong if it ever does.
find . -type c -printf '%P\n' > "$out/removed"
if ! python3 -c 'import os, sys
for d, _, _ in os.walk("."):
    try:
        v = os.getxattr(d, "trusted.overlay.opaque", follow_symlinks=False)
    except OSError:
        continue
    if v == b"y" and os.path.lexists("/" + d):
        sys.exit("deb-root: dpkg replaced the directory /" + d)'; then
	exit 1
fi
# The DKMS build directories hold objects; of them the copy keeps make.log.
find . -mindepth 1 ! -type c -printf '%P\n' |
	grep -Ev '^var/lib/dkms/sdp/[^/]+/build/.' > "$t/files"
find var/lib/dkms/sdp -path '*/build/make.log' >> "$t/files"
tar -C . --no-recursion -cf "$out/changes.tar" -T "$t/files"
cd /
# dpkg -r, here too (the guests load and unload the module; removing the
# packages is files and depmod for each kernel, minutes under TCG): it
# must take sdp.ko away from every kernel and leave DKMS nothing.
if ! env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
	chroot "$r" dpkg -r sdp-dkms libsdp libsdp-dev sdp-tools > "$out/dpkg-remove.log" 2>&1; then
	tail -40 "$out/dpkg-remove.log" >&2
	echo "deb-root: dpkg -r failed (log: $out/dpkg-remove.log)" >&2
	exit 1
fi
left=$(find "$r"/lib/modules/*/updates -name 'sdp.ko*' 2> /dev/null || true)
if [ -n "$left" ] || [ -n "$(chroot "$r" dkms status -m sdp 2> /dev/null)" ]; then
	echo "deb-root: dpkg -r left sdp.ko or DKMS state behind: $left" >&2
	exit 1
fi
echo "deb-root: dpkg -r removed sdp.ko from every kernel"
for m in run tmp dev/pts dev sys proc; do umount "$r/$m"; done
umount "$r"
NS
echo "deb-root: $(tar -tf "$out/changes.tar" | wc -l) files, $(wc -l < "$out/removed") removed," \
	"$(du -h "$out/changes.tar" | cut -f1) in $out"
