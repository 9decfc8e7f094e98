#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make install into a staging root and use what it installed (make
# install-check, part of make check): the module with its dependencies and
# aliases, the tools, sdp_run finding libsdp.so, a C program built with
# pkg-config and a CMake project with find_package(sdp) against the
# installed header, the man pages; dkms builds the module for every kernel
# with headers from the DKMS source tree; then make uninstall leaves
# nothing but the administrator's /etc/libsdp.conf.
#
#   install_test.sh KVER
set -euo pipefail
kver=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
root=$(mktemp -d /tmp/sdp-install.XXXXXX)
trap 'rm -rf "$root"' EXIT
fails=0
pass() { echo "ok: install: $*"; }
fail() { echo "FAIL: install: $*" >&2; fails=$((fails + 1)); }

make -s -C "$top" install DESTDIR="$root" PREFIX=/usr KVER="$kver" > "$root.log" 2>&1 ||
	{ cat "$root.log" >&2; rm -f "$root.log"; echo "FAIL: make install" >&2; exit 1; }
rm -f "$root.log"

ko=$root/lib/modules/$kver/updates/sdp.ko
if [ -f "$ko" ] &&
	[ "$(modinfo -F depends "$ko" | tr , '\n' | sort | paste -sd,)" = "ib_core,rdma_cm" ] &&
	modinfo -F alias "$ko" | grep -qx 'net-pf-2-proto-257-type-1' &&
	modinfo -F alias "$ko" | grep -qx 'net-pf-27'; then
	pass "sdp.ko for $kver: depends on ib_core,rdma_cm, socket aliases"
else
	fail "sdp.ko: $(modinfo "$ko" 2>&1 | grep -E 'depends|alias' | tr '\n' ' ')"
fi

libdir=$(dirname "$(find "$root/usr/lib" -name libsdp.so | head -1)")
for f in usr/bin/sdp-bench usr/bin/sdp-decode usr/bin/sdp_run usr/sbin/sdpstat \
	usr/include/sdp/uapi/sdp.h usr/share/pkgconfig/sdp.pc \
	usr/share/cmake/sdp/sdpConfig.cmake usr/share/cmake/sdp/sdpConfigVersion.cmake \
	usr/share/man/man7/sdp.7 usr/share/man/man8/sdpstat.8 usr/share/man/man1/sdp-bench.1 \
	usr/share/man/man1/sdp_run.1 usr/share/man/man5/libsdp.conf.5 etc/libsdp.conf \
	usr/share/doc/sdp/examples/sdp-modprobe.conf usr/share/doc/sdp/examples/sdp-sysctl.conf; do
	[ -e "$root/$f" ] || fail "missing /$f"
done
[ -n "$libdir" ] && [ -f "$libdir/libsdp.so" ] && pass "libsdp.so in ${libdir#"$root"}" ||
	fail "no libsdp.so"

# The tools are built without sanitizers and run.
if nm -D "$root/usr/sbin/sdpstat" | grep -q __asan; then
	fail "sdpstat is built with ASan"
fi
# sdp-decode: 0 when every message decodes, 1 when one does not.
rc=0
echo 'ff 00' | "$root/usr/bin/sdp-decode" > /dev/null 2>&1 || rc=$?
if "$root/usr/sbin/sdpstat" --help > /dev/null && "$root/usr/bin/sdp-bench" --help > /dev/null &&
	[ $rc = 1 ]; then
	pass "tools run"
else
	fail "a tool did not run (sdp-decode: $rc)"
fi

# sdp_run finds the installed library next to it (../lib/<triplet>).
pre=$("$root/usr/bin/sdp_run" sh -c 'echo "$LD_PRELOAD"')
[ "$pre" = "$libdir/libsdp.so" ] && pass "sdp_run preloads ${pre#"$root"}" ||
	fail "sdp_run preloads '$pre'"
out=$(LIBSDP_CONFIG_FILE=$root/etc/libsdp.conf "$root/usr/bin/sdp_run" -d true 2>&1)
grep -q "rules from $root/etc/libsdp.conf" <<< "$out" &&
	pass "the installed libsdp.conf parses" || fail "libsdp.conf: $out"

# A C program against the installed header, through pkg-config.
cat > "$root/probe.c" <<'C'
#include <stdio.h>
#include "uapi/sdp.h"
int main(void) { printf("%d %d\n", IPPROTO_SDP, SOL_SDP); return 0; }
C
cflags=$(PKG_CONFIG_PATH=$root/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root \
	pkg-config --cflags sdp)
if cc $cflags -o "$root/probe" "$root/probe.c" && [ "$("$root/probe")" = "257 1025" ]; then
	pass "pkg-config --cflags sdp ($cflags)"
else
	fail "pkg-config: $cflags"
fi

# A CMake project with find_package(sdp).
mkdir -p "$root/proj"
cp "$root/probe.c" "$root/proj/"
cat > "$root/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(probe C)
find_package(sdp 0.1 REQUIRED)
add_executable(probe probe.c)
target_link_libraries(probe PRIVATE sdp::sdp)
CM
if cmake -S "$root/proj" -B "$root/proj/b" -DCMAKE_PREFIX_PATH="$root/usr" > "$root/cmake.log" 2>&1 &&
	cmake --build "$root/proj/b" >> "$root/cmake.log" 2>&1 &&
	[ "$("$root/proj/b/probe")" = "257 1025" ]; then
	pass "find_package(sdp) and sdp::sdp"
else
	fail "find_package(sdp): $(tail -5 "$root/cmake.log")"
fi

# DKMS: the source tree a package installs in /usr/src builds sdp.ko
# through dkms for every kernel with headers.
src=$("$top/scripts/dkms-source.sh" "$root/src")
mkdir -p "$root/dkms"
version=${src##*/sdp-}
for k in $("$top/scripts/kver.sh" --all); do
	# SDP_TOP in the environment (as in the VM guests) must not redirect
	# the build away from the DKMS tree.
	if SDP_TOP=/nonexistent dkms build -m sdp -v "$version" -k "$k" --sourcetree "$root/src" \
		--dkmstree "$root/dkms" > "$root/dkms-$k.log" 2>&1; then
		m=$(find "$root/dkms/sdp/$version/$k" -name 'sdp.ko*' | head -1)
		deps=$(modinfo -F depends "$m" 2>/dev/null | tr , '\n' | sort | paste -sd,)
		if [ -n "$m" ] && modinfo -F vermagic "$m" | grep -q "^$k " &&
			[ "$deps" = "ib_core,rdma_cm" ]; then
			pass "dkms build for $k: ${m##*/}"
		else
			fail "dkms build for $k: no module or a wrong one ($m)"
		fi
	else
		fail "dkms build for $k: $(tail -20 "$root/dkms-$k.log")"
	fi
done

# make uninstall: nothing left but directories and /etc/libsdp.conf.
make -s -C "$top" uninstall DESTDIR="$root" PREFIX=/usr KVER="$kver" > /dev/null
left=$(cd "$root" && find etc usr lib -type f 2>/dev/null | grep -v '^etc/libsdp.conf$' || true)
[ -z "$left" ] && pass "make uninstall removes what it installed, keeps /etc/libsdp.conf" ||
	fail "left after uninstall: $left"

[ $fails = 0 ] || { echo "install: $fails failure(s)" >&2; exit 1; }
echo "install: passed"
