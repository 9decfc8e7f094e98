#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest script: how long an SDP connect() takes to succeed or fail against
# each kind of destination that Documentation/fallback.md distinguishes,
# next to TCP's.  A report, not a test: it prints one line per case.
#
#   scripts/vm/run.sh -k KVER scripts/vm/connect-times.sh BUILD_DIR
#
# Destinations, all in one guest:
#   sdp listener   10.77.0.1 (rxe0), an SDP listener on the port
#   no listener    10.77.0.1, nothing listens on the port (the CM rejects)
#   plain host     10.88.0.2 in the network namespace "plain": a veth whose
#                  near end carries rxe, whose far end has no RDMA; a TCP
#                  listener on the port (RoCE frames meet a closed UDP port)
#   no route       10.99.0.1, no route at all
set -euo pipefail
build=$1
kver=$(uname -r)

modprobe rdma_cm
scripts/vm/rxe-setup.sh >/dev/null
modprobe -d "$build/modroot-$kver" sdp
family=$(cat /sys/module/sdp/parameters/family)

ip netns add plain
ip link add vp0 type veth peer name vp1
ip link set vp1 netns plain
ip addr add 10.88.0.1/24 dev vp0
ip link set vp0 up
ip -n plain addr add 10.88.0.2/24 dev vp1
ip -n plain link set vp1 up
ip -n plain link set lo up
rdma link add rxep type rxe netdev vp0
for _ in $(seq 50); do
	rdma link show rxep/1 | grep -q 'state ACTIVE' && break
	sleep 0.1
done

ip netns exec plain python3 - <<'EOF' &
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.88.0.2", 5000))
s.listen(64)
while True:
    c, _ = s.accept()
    c.close()
EOF
plain_srv=$!
sleep 1

python3 - "$family" <<'EOF'
import ctypes, errno, os, socket, struct, sys, time

fam = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)

def sockaddr(ip, port):  # struct sockaddr_in: SDP takes inet addresses
    return (struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) +
            socket.inet_aton(ip) + bytes(8))

def sdp_socket():
    fd = libc.socket(fam, socket.SOCK_STREAM, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    return fd

def sdp_listen(ip, port):
    fd = sdp_socket()
    one = ctypes.c_int(1)
    libc.setsockopt(fd, socket.SOL_SOCKET, socket.SO_REUSEADDR, ctypes.byref(one), 4)
    a = sockaddr(ip, port)
    if libc.bind(fd, a, len(a)) or libc.listen(fd, 16):
        raise OSError(ctypes.get_errno(), "bind/listen")
    return fd

def timed(connect, runs=5):
    times, results = [], set()
    for _ in range(runs):
        t0 = time.monotonic()
        res = connect()
        times.append(time.monotonic() - t0)
        results.add(res)
    times.sort()
    return "%-14s median %8.1f ms (min %.1f, max %.1f)" % (
        "/".join(sorted(results)), 1000 * times[len(times) // 2],
        1000 * times[0], 1000 * times[-1])

def sdp_connect(ip, port):
    def f():
        fd = sdp_socket()
        a = sockaddr(ip, port)
        r = libc.connect(fd, a, len(a))
        e = ctypes.get_errno()
        os.close(fd)
        return "ok" if r == 0 else errno.errorcode.get(e, str(e))
    return f

def tcp_connect(ip, port):
    def f():
        s = socket.socket()
        s.settimeout(60)
        try:
            s.connect((ip, port))
            return "ok"
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "timeout"
        finally:
            s.close()
    return f

lfd = sdp_listen("10.77.0.1", 6000)
cases = [
    ("sdp listener", sdp_connect("10.77.0.1", 6000), 5),
    ("no listener", sdp_connect("10.77.0.1", 6001), 5),
    ("plain host", sdp_connect("10.88.0.2", 5000), 1),
    ("no route", sdp_connect("10.99.0.1", 5000), 3),
    ("tcp, plain host", tcp_connect("10.88.0.2", 5000), 5),
]
for name, f, runs in cases:
    print("connect-times: %-16s %s" % (name, timed(f, runs)), flush=True)
EOF
kill "$plain_srv" 2>/dev/null || true
