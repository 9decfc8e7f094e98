#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Drive sdp_pinbench.ko (tests/kmod/sdp_pinbench.c) from user space.

    pinbench.py SIZE...

For each size, writes a page-aligned, touched anonymous buffer of that
many bytes to /sys/kernel/debug/sdp_pinbench/run, which times pinning and
DMA-mapping it sdp.ko's way and ib_umem_get()'s, and prints the module's
answer: "bytes sdp_ns umem_ns umem_nents".
"""
import mmap
import os
import sys

RUN = "/sys/kernel/debug/sdp_pinbench/run"


def main():
    for arg in sys.argv[1:]:
        size = int(arg)
        buf = mmap.mmap(-1, size)
        buf.write(b"\x5a" * size)
        fd = os.open(RUN, os.O_RDWR)
        try:
            if os.write(fd, buf) != size:
                sys.exit(f"pinbench: short write of {size} bytes")
            os.lseek(fd, 0, os.SEEK_SET)
            print(os.read(fd, 128).decode().strip())
        finally:
            os.close(fd)
            buf.close()


if __name__ == "__main__":
    main()
