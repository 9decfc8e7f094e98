#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""IPPROTO_SDP from an unmodified Python program.

socket.socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SDP) with Python's
own address handling (tuples, as for TCP): the data must arrive intact and
be carried by RDMA (the socket's SDP counters and the rxe devices' packet
counters), or by TCP after a fallback.  Runs as root in the test VM after
scripts/vm/rxe-setup.sh with sdp.ko loaded (tests/vm/tier-socket.sh).
"""
import glob
import hashlib
import os
import socket
import struct
import threading
import time
import unittest

from sdp_uapi import uapi_constants

C = uapi_constants()
with open("/sys/module/sdp/parameters/ipproto", encoding="ascii") as _f:
    IPPROTO_SDP = int(_f.read())
ADDR4_A, ADDR4_B = "10.77.0.1", "10.77.0.2"
ADDR6_A, ADDR6_B = "fd77::1", "fd77::2"
PAYLOAD = 4 << 20  # large enough for zero copy at the default threshold


def rxe_packets():
    """Packets all rxe devices have sent, or None without the counters."""
    files = glob.glob("/sys/class/infiniband/rxe*/ports/*/hw_counters/sent_pkts")
    if not files:
        return None
    total = 0
    for path in files:
        with open(path, encoding="ascii") as f:
            total += int(f.read())
    return total


def sdp_stats(sock):
    """tx_bytes, rx_bytes, tx_bcopy, rx_bcopy, zc_tx, zc_rx of SDP_STATS."""
    raw = sock.getsockopt(C["SOL_SDP"], C["SDP_STATS"], 256)
    return struct.unpack_from("6Q", raw)


def transport(sock):
    return (sock.getsockopt(C["SOL_SDP"], C["SDP_TRANSPORT"]),
            sock.getsockopt(C["SOL_SDP"], C["SDP_FALLBACK_REASON"]))


class Sink(threading.Thread):
    """Accepts one connection, reads it to EOF, answers the SHA-256."""

    def __init__(self, listener):
        super().__init__(daemon=True)
        self.listener = listener
        self.conn = None
        self.received = 0
        self.identity = None
        self.stats = None
        self.error = None

    def run(self):
        try:
            conn, _ = self.listener.accept()
            self.conn = conn
            self.identity = (conn.family,
                             conn.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN),
                             conn.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL))
            digest = hashlib.sha256()
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                self.received += len(chunk)
            if conn.proto == IPPROTO_SDP:
                self.stats = sdp_stats(conn)
            conn.sendall(digest.digest())
            conn.close()
        except OSError as e:  # reported by the test, not lost in a thread
            self.error = e


def send_and_verify(test, client, sink):
    """Sends PAYLOAD bytes in uneven pieces; the peer's digest must match."""
    data = os.urandom(PAYLOAD)
    digest = hashlib.sha256(data).digest()
    sizes = [1, 1000, 65536, 300000, 1 << 20]
    off, i = 0, 0
    while off < len(data):
        n = sizes[i % len(sizes)]
        client.sendall(data[off:off + n])
        off += n
        i += 1
    client.shutdown(socket.SHUT_WR)
    answer = b""
    while len(answer) < len(digest):
        chunk = client.recv(64)
        if not chunk:
            break
        answer += chunk
    sink.join(30)
    test.assertIsNone(sink.error)
    test.assertEqual(sink.received, PAYLOAD)
    test.assertEqual(answer, digest, "the bytes changed on the way")


class IpprotoSdp(unittest.TestCase):

    def test_socket_identity(self):
        for family in (socket.AF_INET, socket.AF_INET6):
            with self.subTest(family=family):
                with socket.socket(family, socket.SOCK_STREAM, IPPROTO_SDP) as s:
                    self.assertEqual(s.family, family)
                    self.assertEqual(s.proto, IPPROTO_SDP)
                    self.assertEqual(s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN), family)
                    self.assertEqual(s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL),
                                     IPPROTO_SDP)
                    self.assertEqual(s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE),
                                     socket.SOCK_STREAM)

    def transfer_over_sdp(self, family, listen_addr, connect_addr):
        before = rxe_packets()
        self.assertIsNotNone(before, "no rxe packet counters in sysfs")
        with socket.socket(family, socket.SOCK_STREAM, IPPROTO_SDP) as ls:
            ls.bind((listen_addr, 0))
            ls.listen(1)
            port = ls.getsockname()[1]
            sink = Sink(ls)
            sink.start()
            with socket.socket(family, socket.SOCK_STREAM, IPPROTO_SDP) as c:
                c.settimeout(30)
                c.connect((connect_addr, port))
                # Blocking again: Python's timeouts make sends
                # non-blocking, and zero copy serves blocking sends.
                c.settimeout(None)
                self.assertEqual(transport(c), (C["SDP_TRANSPORT_SDP"], C["SDP_FB_NONE"]))
                self.assertEqual(c.getpeername()[:2], (connect_addr, port))
                send_and_verify(self, c, sink)
                client = sdp_stats(c)
        self.assertEqual(sink.identity, (family, family, IPPROTO_SDP))
        self.assertEqual(client[0], PAYLOAD, "the client's SDP counters did not carry the bytes")
        self.assertEqual(sink.stats[1], PAYLOAD, "the server's SDP counters")
        self.assertGreater(client[4] + sink.stats[5], 0, "no byte went by zero copy")
        sent = rxe_packets() - before
        # At most 4 KiB of payload per RoCE packet: fewer packets mean the
        # bytes went some other way.
        self.assertGreaterEqual(sent, PAYLOAD // 4096,
                                f"rxe sent only {sent} packets for {PAYLOAD} bytes")

    def test_ipv4_over_rdma(self):
        self.transfer_over_sdp(socket.AF_INET, ADDR4_A, ADDR4_A)

    def test_ipv6_over_rdma(self):
        self.transfer_over_sdp(socket.AF_INET6, ADDR6_A, ADDR6_A)

    def test_ipv6_socket_reaches_ipv4_by_mapped_address(self):
        self.transfer_over_sdp(socket.AF_INET6, "::", "::ffff:" + ADDR4_A)

    def test_fallback_to_a_plain_tcp_server(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
            ls.bind((ADDR4_A, 0))
            ls.listen(1)
            port = ls.getsockname()[1]
            sink = Sink(ls)
            sink.start()
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SDP) as c:
                # No option set: falling back is what sdp.ko does by default
                # (net.sdp.fallback=1, as the tier leaves it for this test).
                self.assertEqual(c.getsockopt(C["SOL_SDP"], C["SDP_TRANSPORT_POLICY"]),
                                 C["SDP_POLICY_FALLBACK"])
                c.settimeout(30)
                start = time.monotonic()
                c.connect((ADDR4_A, port))
                took = time.monotonic() - start
                self.assertEqual(transport(c), (C["SDP_TRANSPORT_TCP"], C["SDP_FB_REJECTED"]))
                self.assertEqual(c.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL),
                                 IPPROTO_SDP)
                send_and_verify(self, c, sink)
        self.assertEqual(sink.identity, (socket.AF_INET, socket.AF_INET, socket.IPPROTO_TCP))
        self.assertLess(took, 1.0, "fallback after a refusal took too long")
        print(f"\nfallback to TCP after REJ in {took * 1000:.0f} ms", flush=True)

    def test_sdp_only_refusal_is_tcps_error(self):
        # No SDP listener on the port: SDP only says what TCP says.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SDP) as c:
            c.setsockopt(C["SOL_SDP"], C["SDP_TRANSPORT_POLICY"], C["SDP_POLICY_SDP"])
            with self.assertRaises(ConnectionRefusedError):
                c.connect((ADDR4_A, 9))


if __name__ == "__main__":
    unittest.main(verbosity=2)
