#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A connection still pending in a listener's queue when the listener closes.

    pending_reset.py listen tcp|sdp PORT
        listen on every address, never accept; print "listening" and sleep
        until killed: the process's end closes the listener
    pending_reset.py connect tcp|sdp ADDR PORT
        connect, print "connected", send 3 bytes, then report what the
        connection becomes once the listener is gone: the poll events
        once POLLHUP is among them (at most 60 s), two recv() and a
        send(), e.g. "poll IN|OUT|ERR|HUP recv ECONNRESET recv 0 send EPIPE"

Over TCP the closed listener resets the connections in its queue.  Over
SDP, in the pair tier's lost-RTU step, the passive side's connection was
established by the client's bytes, its CM still in REP_SENT without the
RTU, so destroying it sends a REJ to a client whose connect() returned:
that must read as the same reset.  SDP sockets are IPPROTO_SDP with SDP_TRANSPORT_POLICY SDP only
(no fallback to TCP); the client checks SDP_TRANSPORT after connect().
"""
import errno
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sdp_uapi import uapi_constants  # noqa: E402

C = uapi_constants()


def new_socket(kind):
    if kind == "tcp":
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with open("/sys/module/sdp/parameters/ipproto", encoding="ascii") as f:
        proto = int(f.read())
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    s.setsockopt(C["SOL_SDP"], C["SDP_TRANSPORT_POLICY"], C["SDP_POLICY_SDP"])
    return s


def call(fn):
    """The result of fn() as the trace shows it: a number or an errno name."""
    try:
        r = fn()
        return str(len(r)) if isinstance(r, bytes) else str(r)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def poll_text(mask):
    names = [("IN", select.POLLIN), ("PRI", select.POLLPRI),
             ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
             ("HUP", select.POLLHUP), ("RDHUP", select.POLLRDHUP)]
    return "|".join(n for n, bit in names if mask & bit) or "0"


def listen(kind, port):
    s = new_socket(kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(8)
    print("listening", flush=True)
    time.sleep(600)


def connect(kind, addr, port):
    s = new_socket(kind)
    s.settimeout(60)
    s.connect((addr, port))
    if kind == "sdp":
        transport = s.getsockopt(C["SOL_SDP"], C["SDP_TRANSPORT"])
        if transport != C["SDP_TRANSPORT_SDP"]:
            print(f"not over SDP: SDP_TRANSPORT {transport}", flush=True)
            return 1
    print("connected", flush=True)
    s.send(b"abc", socket.MSG_NOSIGNAL)
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLPRI | select.POLLOUT |
               select.POLLRDHUP)
    mask = 0
    deadline = time.monotonic() + 60
    while not mask & select.POLLHUP and time.monotonic() < deadline:
        ev = p.poll(200)
        mask = ev[0][1] if ev else 0
        if not mask & select.POLLHUP:
            time.sleep(0.05)
    res = ["poll", poll_text(mask)]
    res += ["recv", call(lambda: s.recv(1))]
    res += ["recv", call(lambda: s.recv(1))]
    res += ["send", call(lambda: s.send(b"x", socket.MSG_NOSIGNAL))]
    print(" ".join(res), flush=True)
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "listen" and argv[2] in ("tcp", "sdp"):
        return listen(argv[2], int(argv[3]))
    if len(argv) == 5 and argv[1] == "connect" and argv[2] in ("tcp", "sdp"):
        return connect(argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
