#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A plain TCP program for tests/vm/preload_test.sh: nothing in it knows
about SDP (only the report reads SOL_SDP options, when the socket has them).

  preload_probe.py echo-client ADDR PORT BYTES [BIND]
      connects, sends BYTES of a pattern, half-closes, reads the echo back
      and checks it; prints "proto P transport T reason R bytes N ok".
  preload_probe.py epoll-server ADDR PORT CONNS THREADS
      an echo server: one thread accepts, THREADS workers each run an
      edge-triggered epoll over the connections handed to them, reading and
      writing until EAGAIN; exits after CONNS connections have closed.
"""
import os
import select
import socket
import sys
import threading
import time

SOL_SDP = 1025
SDP_TRANSPORT = 84
SDP_FALLBACK_REASON = 85


def pattern(n):
    block = bytes((i * 7 + 3) & 0xFF for i in range(4096))
    return (block * (n // len(block) + 1))[:n]


def report(sock):
    proto = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL)
    try:
        transport = sock.getsockopt(SOL_SDP, SDP_TRANSPORT)
        reason = sock.getsockopt(SOL_SDP, SDP_FALLBACK_REASON)
    except OSError:
        transport, reason = "-", "-"
    return f"proto {proto} transport {transport} reason {reason}"


def echo_client(addr, port, nbytes, bind=None):
    data = pattern(nbytes)
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET,
                       socket.SOCK_STREAM) as c:
        c.settimeout(60)
        if bind:
            c.bind((bind, 0))
        c.connect((addr, port))
        got = bytearray()

        def reader():
            while True:
                b = c.recv(1 << 16)
                if not b:
                    return
                got.extend(b)

        t = threading.Thread(target=reader)
        t.start()
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        t.join()
        ok = bytes(got) == data
        print(f"{report(c)} bytes {len(got)} {'ok' if ok else 'MISMATCH'}", flush=True)
        return 0 if ok else 1


def epoll_server(addr, port, conns, threads):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    print("listening", flush=True)
    workers = []
    errors = []
    done = threading.Semaphore(0)
    # Everything within a deadline: a client that never connects or never
    # finishes fails the run instead of hanging it.
    deadline = time.monotonic() + 240
    ls.settimeout(120)

    class Worker(threading.Thread):
        def __init__(self):
            super().__init__(daemon=True)
            self.ep = select.epoll()
            self.socks = {}
            self.pending = {}

        def add(self, s):
            s.setblocking(False)
            self.socks[s.fileno()] = s
            self.pending[s.fileno()] = b""
            self.ep.register(s.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)

        def close(self, fd, error=None):
            # Forget the descriptor before closing it: once closed, the
            # main thread may accept a connection that gets the same
            # number and add() it here, and popping after that would
            # drop the new connection's entry.
            self.ep.unregister(fd)
            s = self.socks.pop(fd)
            self.pending.pop(fd)
            s.close()
            if error:
                errors.append(error)
            done.release()

        def run(self):
            while True:
                for fd, _ in self.ep.poll(1.0):
                    s = self.socks.get(fd)
                    if s is None:
                        continue
                    try:
                        self.serve(fd, s)
                    except OSError as e:
                        self.close(fd, f"connection {fd}: {e}")

        def serve(self, fd, s):
            eof = False
            # Edge triggered: drain until EAGAIN, or the event is lost.
            while True:
                try:
                    b = s.recv(1 << 16)
                except BlockingIOError:
                    break
                if not b:
                    eof = True
                    break
                self.pending[fd] += b
            while self.pending[fd]:
                try:
                    n = s.send(self.pending[fd])
                except BlockingIOError:
                    break
                self.pending[fd] = self.pending[fd][n:]
            if eof and not self.pending[fd]:
                self.close(fd)
            elif eof:
                # Flush what is left, blocking: the peer reads it all.
                s.settimeout(60)
                s.sendall(self.pending[fd])
                self.pending[fd] = b""
                self.close(fd)

    for _ in range(threads):
        w = Worker()
        w.start()
        workers.append(w)
    for i in range(conns):
        try:
            s, _ = ls.accept()
        except socket.timeout:
            print(f"epoll-server: only {i} of {conns} clients connected", flush=True)
            return 1
        workers[i % threads].add(s)
    for i in range(conns):
        if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
            print(f"epoll-server: {conns - i} connections did not finish", flush=True)
            return 1
    if errors:
        print(f"epoll-server: {len(errors)} connections failed: {errors}", flush=True)
        return 1
    print(f"epoll-server: {conns} connections echoed by {threads} threads", flush=True)
    return 0


def main():
    mode = sys.argv[1]
    if mode == "echo-client":
        return echo_client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                           sys.argv[5] if len(sys.argv) > 5 else None)
    if mode == "epoll-server":
        return epoll_server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
