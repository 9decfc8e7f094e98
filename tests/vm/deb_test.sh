#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian packages, installed as an administrator would (issue 16), in
# each single guest after the tier has unloaded sdp.ko.  dpkg -i ran on the
# host, into a copy of the root these guests boot (scripts/deb-root.sh, as
# into a chroot): sdp-dkms's postinst had DKMS build sdp.ko there for every
# kernel, natively rather than under TCG.  Here what that installation
# changed goes onto an overlay of the root (a tmpfs upper layer: the host's
# files are not touched); then DKMS's status for the running kernel,
# modprobe from the installed files, a transfer with the installed
# sdp-bench, libsdp.so and sdp_run moving a program's socket to SDP,
# sdpstat reading the counters and the sockets' details, and modprobe -r.
# dpkg -r ran on the host after the install, in the same copy (under TCG
# its depmod for each kernel takes minutes).
#
#   deb_test.sh BUILD_DIR
set -uo pipefail
build=$(realpath "$1")
kver=$(uname -r)
fails=0
pass() { echo "[       OK ] deb: $*"; }
fail() {
	echo "[  FAILED  ] deb: $*" >&2
	fails=$((fails + 1))
}

changes=$build/deb-root/changes.tar
if [ ! -f "$changes" ]; then
	echo "[  FAILED  ] deb: no $changes (make deb-root)" >&2
	exit 1
fi
if grep -q '^sdp ' /proc/modules; then
	echo "[  FAILED  ] deb: sdp.ko is still loaded" >&2
	exit 1
fi

ov=$(mktemp -d /tmp/deb-root.XXXXXX)
mount -t tmpfs -o size=1500m tmpfs "$ov"
mkdir -p "$ov/upper" "$ov/work" "$ov/root"
if ! mount -t overlay overlay -o "lowerdir=/,upperdir=$ov/upper,workdir=$ov/work" "$ov/root"; then
	echo "[  FAILED  ] deb: cannot mount an overlay of /" >&2
	exit 1
fi
r=$ov/root
cleanup() {
	chroot "$r" modprobe -r sdp 2> /dev/null
	for m in tmp run dev/pts dev sys proc; do umount "$r/$m" 2> /dev/null; done
	umount "$r" 2> /dev/null
	umount "$ov" 2> /dev/null
	rmdir "$ov" 2> /dev/null
}
trap cleanup EXIT
# The installation: the files dpkg removed go, those it wrote come.
while IFS= read -r f; do
	rm -f "${r:?}/$f"
done < "$build/deb-root/removed"
if tar -C "$r" -xpf "$changes"; then
	pass "dpkg -i on the host: $(tar -tf "$changes" | wc -l) files installed on this root"
else
	fail "cannot apply $changes"
fi
for m in proc sys dev dev/pts run tmp; do
	mount --bind "/$m" "$r/$m"
done
# As an administrator's shell would: none of the tier's environment.
in_root() {
	env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive chroot "$r" "$@"
}
in_root dpkg -s sdp-dkms libsdp libsdp-dev sdp-tools > /tmp/deb-status.log 2>&1
if [ "$(grep -c '^Status: install ok installed' /tmp/deb-status.log)" = 4 ]; then
	pass "dpkg: the four packages are installed"
else
	fail "dpkg -s: $(cat /tmp/deb-status.log)"
fi

ko=$(in_root find "/lib/modules/$kver/updates/dkms" -name 'sdp.ko*' 2> /dev/null | head -1)
status=$(in_root dkms status -m sdp -k "$kver" 2> /dev/null)
if [ -n "$ko" ] && grep -q "installed" <<< "$status"; then
	pass "DKMS built and installed $ko for $kver ($status)"
else
	fail "no sdp.ko from DKMS for $kver: $status
$(tail -30 "$r/var/lib/dkms/sdp/0.1.0/build/make.log" 2> /dev/null)"
fi
if in_root modprobe sdp && grep -q '^sdp ' /proc/modules; then
	pass "modprobe sdp from the installed files (ib_core, rdma_cm loaded first)"
else
	fail "modprobe sdp"
fi

# A transfer with the installed sdp-bench, verified, over SDP: SDP only
# (net.sdp.fallback 0), so a CM exchange slower than net.sdp.fallback_ms on
# a loaded host is not a connection over TCP that fails the count below.
fallback=$(cat /proc/sys/net/sdp/fallback 2> /dev/null || echo 1)
echo 0 > /proc/sys/net/sdp/fallback 2> /dev/null || true
before=$(awk '$1 == "rx_bytes" { print $2 }' /proc/net/sdpstats)
in_root /usr/bin/sdp-bench server --family sdp --addr 10.77.0.1 --port 18600 \
	--connections 1 --quiet > /tmp/deb-bench-s.log 2>&1 &
srv=$!
if in_root /usr/bin/sdp-bench client --family sdp --addr 10.77.0.1 --port 18600 \
	--bytes 16M --sizes 16k --verify > /tmp/deb-bench.log 2>&1; then
	pass "sdp-bench: $(grep -m1 -i 'MB/s' /tmp/deb-bench.log)"
else
	fail "sdp-bench: $(cat /tmp/deb-bench.log)"
fi
wait $srv
after=$(awk '$1 == "rx_bytes" { print $2 }' /proc/net/sdpstats)
[ $((after - before)) -ge $((16 << 20)) ] && pass "16 MiB received by SDP" ||
	fail "SDP received $((after - before)) bytes"
echo "$fallback" > /proc/sys/net/sdp/fallback 2> /dev/null || true

# libsdp.so through the installed sdp_run and /etc/libsdp.conf: a Python
# socket becomes an IPPROTO_SDP socket and carries its bytes over SDP.
cat > "$r/var/tmp/probe.py" << 'PY'
import socket, threading
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind(("10.77.0.1", 0))
ls.listen(1)
def serve():
    c, _ = ls.accept()
    while (b := c.recv(65536)):
        c.sendall(b)
    c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(ls.getsockname())
data = bytes(range(256)) * 4096
c.sendall(data)
c.shutdown(socket.SHUT_WR)
got = b""
while (b := c.recv(65536)):
    got += b
print(c.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL), c.getsockopt(1025, 84), got == data)
PY
out=$(in_root /usr/bin/sdp_run python3 /var/tmp/probe.py 2>&1)
[ "$out" = "257 1 True" ] && pass "sdp_run with the installed libsdp.so and /etc/libsdp.conf" ||
	fail "sdp_run: $out"
in_root /usr/sbin/sdpstat -c | grep -q conn_established && pass "sdpstat reads the counters" ||
	fail "sdpstat: $(in_root /usr/sbin/sdpstat -c 2>&1 | head -5)"
if in_root /usr/sbin/sdpstat -se > /tmp/deb-sdpstat.log 2>&1; then
	pass "sdpstat -e reads /proc/net/sdpinfo"
else
	fail "sdpstat -e: $(head -5 /tmp/deb-sdpstat.log)"
fi

# The module unloads: nothing uses it now.  (dpkg -r ran on the host, in
# the same copy of the root: scripts/deb-root.sh.)
if in_root modprobe -r sdp && ! grep -q '^sdp ' /proc/modules; then
	pass "modprobe -r sdp"
else
	fail "modprobe -r sdp: $(grep '^sdp ' /proc/modules)"
fi

if [ $fails = 0 ]; then
	echo "[  PASSED  ] deb: the packages install, build, load and carry data"
else
	echo "[  FAILED  ] deb: $fails check(s) failed" >&2
	exit 1
fi
