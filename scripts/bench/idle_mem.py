#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where an idle SDP socket's memory goes (guest side of scripts/vm/idle-mem.sh).

Opens connected IPPROTO_SDP pairs, passes a byte each way on each, waits
past net.sdp.buf_idle_ms, and prints per socket the growth of each slab
cache (objects times object size, from /proc/slabinfo) and of each
vmalloc caller (pages less the guard page, from /proc/vmallocinfo), with
MemAvailable's fall for comparison.  Run it in a fresh guest: objects
freed by an earlier run stay in their caches and hide a later run's.
"""
import argparse
import os
import socket
import time


def protocol():
    with open("/sys/module/sdp/parameters/ipproto") as f:
        return int(f.read())


def slabs():
    caches = {}
    with open("/proc/slabinfo") as f:
        for line in f.readlines()[2:]:
            field = line.split()
            caches[field[0]] = int(field[2]) * int(field[3])
    return caches


def vmallocs():
    callers = {}
    with open("/proc/vmallocinfo") as f:
        for line in f:
            field = line.split()
            caller = field[2].split("+")[0]
            callers[caller] = callers.get(caller, 0) + int(field[1]) - 4096
    return callers


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def growth(before, after, sockets):
    return sorted(((after.get(k, 0) - before.get(k, 0)) / sockets / 1024, k)
                  for k in after)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--addr", default="10.77.0.1")
    ap.add_argument("--port", type=int, default=7466)
    ap.add_argument("--idle", type=float, default=4.0,
                    help="seconds idle before measuring (past buf_idle_ms)")
    args = ap.parse_args()
    proto = protocol()

    os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
    time.sleep(1)
    slab0, vm0, avail0 = slabs(), vmallocs(), mem_available()
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    lst.bind((args.addr, args.port))
    lst.listen(128)
    pairs = []
    for _ in range(args.pairs):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        c.connect((args.addr, args.port))
        s, _ = lst.accept()
        pairs.append((c, s))
    for c, s in pairs:
        c.sendall(b"x")
        assert s.recv(1) == b"x"
        s.sendall(b"y")
        assert c.recv(1) == b"y"
    time.sleep(args.idle)
    slab1, vm1, avail1 = slabs(), vmallocs(), mem_available()

    sockets = 2 * args.pairs
    slab = growth(slab0, slab1, sockets)
    vm = growth(vm0, vm1, sockets)
    total_slab = sum(x for x, _ in slab)
    total_vm = sum(x for x, _ in vm)
    print("idle SDP socket (%d pairs, %s): %.1f KiB (slab %.1f, vmalloc %.1f);"
          " MemAvailable fell %.1f KiB" % (
              args.pairs, os.uname().release, total_slab + total_vm, total_slab,
              total_vm, (avail0 - avail1) / sockets / 1024))
    for kib, name in reversed(slab):
        if abs(kib) >= 0.05:
            print("  slab    %-28s %6.2f" % (name, kib))
    for kib, name in reversed(vm):
        if abs(kib) >= 0.05:
            print("  vmalloc %-28s %6.2f" % (name, kib))
    for c, s in pairs:
        c.close()
        s.close()
    lst.close()


if __name__ == "__main__":
    main()
