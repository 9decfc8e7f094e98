#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Captures for tests/scripts/wire_check_test.sh: edited copies of a pcap,
and a synthetic one with the RDMA Write path (absent from the committed
capture).  Standard library only.

    mutate.py IN OUT EDIT...      copy IN to OUT with EDITs applied
    mutate.py synth OUT [KNOB=VALUE...]

EDITs (FRAME: a 1-based frame number of IN; edits never renumber):
  bsdh:FRAME:FIELD=VALUE   BSDH field (mid flags bufs len mseq ack) of the
                           SEND in FRAME (its First/Only packet)
  ext:FRAME:OFF=VALUE      32-bit word OFF bytes after that BSDH
  hello:FRAME:OFF=HEX      bytes OFF bytes into the SDP Hello (REQ) or
                           HelloAck (REP) of the CM message in FRAME
  aeth:FRAME=SYNDROME      the AETH syndrome of an ACK / Read Response
  drop:FRAME[-LAST]        leave FRAME (to LAST) out
  dup:FRAME@AFTER          a copy of FRAME after frame AFTER
  move:FRAME@AFTER         FRAME after frame AFTER instead of its place
  noicrc                   do not fix the ICRC of edited frames

Edited frames get a correct ICRC (RoCEv2's invariant CRC), so that only
the edited SDP field is wrong: tshark does not check the ICRC, but
wire-check.py does (a bad ICRC is a violation of its own).  The UDP
checksum of RoCEv2 is 0 (not used) and no length changes.

KNOBs of synth (see synth()): wrcompl wrrkey wrva rdcompl data_before_write
sink_twice rnr reorder pieces partial adverts.
"""

import struct
import sys
import zlib

# pcap ------------------------------------------------------------------


def read_pcap(path):
    with open(path, "rb") as fh:
        raw = fh.read()
    magic = raw[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    header = raw[:24]
    frames, off = [], 24
    while off + 16 <= len(raw):
        ts, tu, incl, orig = struct.unpack_from(endian + "IIII", raw, off)
        frames.append([ts, tu, bytearray(raw[off + 16:off + 16 + incl])])
        off += 16 + incl
    return header, endian, frames


def write_pcap(path, header, endian, frames):
    with open(path, "wb") as fh:
        fh.write(header)
        for ts, tu, data in frames:
            fh.write(struct.pack(endian + "IIII", ts, tu, len(data), len(data)))
            fh.write(data)


# RoCEv2 framing ----------------------------------------------------------

def l3_offsets(frame):
    """(ip offset, ip version, ip header length, udp payload offset)."""
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    if ethertype == 0x0800:
        ihl = (frame[14] & 15) * 4
        return 14, 4, ihl, 14 + ihl + 8
    return 14, 6, 40, 14 + 40 + 8


def fix_icrc(frame):
    ip, ver, ihl, _ = l3_offsets(frame)
    b = bytearray(frame[ip:])
    if ver == 4:
        b[1] = 0xFF
        b[8] = 0xFF
        b[10:12] = b"\xff\xff"
    else:
        b[0] |= 0x0F
        b[1:4] = b"\xff\xff\xff"
        b[7] = 0xFF
    b[ihl + 6:ihl + 8] = b"\xff\xff"
    b[ihl + 12] = 0xFF  # BTH resv8a
    crc = zlib.crc32(b"\xff" * 8 + bytes(b[:-4]))
    frame[-4:] = struct.pack("<I", crc)


# Bytes after the BTH that precede the payload, by opcode.
EXT_LEN = {6: 16, 10: 16, 11: 20, 12: 16, 13: 4, 15: 4, 16: 4, 17: 4,
           3: 4, 5: 4, 9: 4, 22: 4, 23: 4, 0x64: 8}


def ib_payload(frame):
    _, _, _, udp = l3_offsets(frame)
    return udp + 12 + EXT_LEN.get(frame[udp], 0)


BSDH_FIELDS = {"mid": (0, 1), "flags": (1, 1), "bufs": (2, 2), "len": (4, 4),
               "mseq": (8, 4), "ack": (12, 4)}


def put(frame, off, size, value):
    frame[off:off + size] = value.to_bytes(size, "big")


def edit(frames, spec):
    """Apply one EDIT in place; returns the frame edited (or None)."""
    kind, _, rest = spec.partition(":")
    if kind == "bsdh":
        num, _, assign = rest.partition(":")
        field, _, value = assign.partition("=")
        f = frames[int(num) - 1][2]
        off, size = BSDH_FIELDS[field]
        put(f, ib_payload(f) + off, size, int(value, 0))
        return f
    if kind == "ext":
        num, _, assign = rest.partition(":")
        off, _, value = assign.partition("=")
        f = frames[int(num) - 1][2]
        put(f, ib_payload(f) + 16 + int(off), 4, int(value, 0))
        return f
    if kind == "hello":
        num, _, assign = rest.partition(":")
        off, _, value = assign.partition("=")
        f = frames[int(num) - 1][2]
        mad = ib_payload(f)
        attr = struct.unpack_from(">H", f, mad + 16)[0]
        base = mad + 24 + (140 + 36 if attr == 0x10 else 36)
        data = bytes.fromhex(value)
        f[base + int(off):base + int(off) + len(data)] = data
        return f
    if kind == "aeth":
        num, _, value = rest.partition("=")
        f = frames[int(num) - 1][2]
        _, _, _, udp = l3_offsets(f)
        f[udp + 12] = int(value, 0)
        return f
    raise SystemExit("mutate.py: unknown edit %s" % spec)


def mutate(argv):
    src, dst, edits = argv[0], argv[1], argv[2:]
    header, endian, frames = read_pcap(src)
    fix = "noicrc" not in edits
    order = list(range(len(frames)))
    extra = []  # (after index, frame index) insertions
    for spec in edits:
        if spec == "noicrc":
            continue
        kind, _, rest = spec.partition(":")
        if kind == "drop":
            first, _, last = rest.partition("-")
            for n in range(int(first), int(last or first) + 1):
                order.remove(n - 1)
        elif kind in ("dup", "move"):
            what, _, after = rest.partition("@")
            if kind == "move":
                order.remove(int(what) - 1)
            extra.append((int(after) - 1, int(what) - 1))
        else:
            f = edit(frames, spec)
            if fix:
                fix_icrc(f)
    out = []
    for i in order:
        out.append(frames[i])
        for after, what in extra:
            if after == i:
                out.append([frames[i][0], frames[i][1], frames[what][2]])
    write_pcap(dst, header, endian, out)


# A synthetic connection ----------------------------------------------------

CLIENT, SERVER = "10.77.0.2", "10.77.0.1"
MAC = {CLIENT: b"\x52\x54\x00\x77\x00\x02", SERVER: b"\x52\x54\x00\x77\x00\x01"}
QPN = {CLIENT: 0x21, SERVER: 0x31}
START_PSN = {CLIENT: 0x000100, SERVER: 0xFFFFFE}  # the server's wraps
PORT, CLIENT_PORT, MTU = 7001, 40000, 1024


def ip4(a):
    return bytes(int(x) for x in a.split("."))


def roce_frame(src, dst, bth_and_rest):
    """Ethernet/IPv4/UDP around BTH..payload, pad and ICRC added."""
    udp_len = 8 + len(bth_and_rest) + 4
    iph = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0,
                                0x4000, 64, 17, 0, ip4(src), ip4(dst)))
    csum = sum(struct.unpack(">10H", bytes(iph)))
    csum = (csum & 0xFFFF) + (csum >> 16)
    csum = (csum & 0xFFFF) + (csum >> 16)
    iph[10:12] = struct.pack(">H", ~csum & 0xFFFF)
    udp = struct.pack(">HHHH", 49152, 4791, udp_len, 0)
    f = bytearray(MAC[dst] + MAC[src] + b"\x08\x00" + iph + udp +
                  bth_and_rest + b"\0\0\0\0")
    fix_icrc(f)
    return f


def bth(opcode, destqp, psn, payload_len=0):
    pad = -payload_len % 4
    return struct.pack(">BBHII", opcode, pad << 4, 0xFFFF, destqp,
                       0x80000000 | (psn & 0xFFFFFF)), pad


def packet(src, dst, opcode, psn, ext=b"", payload=b"", destqp=None):
    hdr, pad = bth(opcode, QPN[dst] if destqp is None else destqp, psn,
                   len(payload))
    return roce_frame(src, dst, hdr + ext + payload + b"\0" * pad)


def bsdh(mid, bufs, length, mseq, ack, flags=0):
    return struct.pack(">BBHIII", mid, flags, bufs, length, mseq, ack)


def cm_mad(src, dst, attr, data, psn):
    mad = struct.pack(">BBBBHHQHHI", 1, 7, 2, 3, 0, 0, 0x1234, attr, 0, 0)
    deth = struct.pack(">II", 0x80010000, 1)
    hdr, _ = bth(0x64, 1, psn)
    return roce_frame(src, dst, hdr + deth + mad + data.ljust(232, b"\0"))


def gid(a):
    return b"\0" * 10 + b"\xff\xff" + ip4(a)


def cm_exchange(max_adverts=1, ext_max_adverts=0):
    hello = bsdh(0x00, 8, 32, 0, 0) + struct.pack(
        ">BBBBIIHH", 0x22, 0x40, 0, max_adverts, 65536, 65536, CLIENT_PORT, 0)
    ipcm = struct.pack(">BBH", 0, 0x40, CLIENT_PORT) + b"\0" * 12 + \
        ip4(CLIENT) + b"\0" * 12 + ip4(SERVER)
    req = bytearray(232)
    struct.pack_into(">IIQ", req, 0, 0xC0FFEE, 0, 0x013F0000 | PORT)
    req[32:35] = QPN[CLIENT].to_bytes(3, "big")
    req[44:47] = START_PSN[SERVER].to_bytes(3, "big")  # as Linux's CM does
    req[50] = 3 << 4  # path MTU 1024
    req[56:72], req[72:88] = gid(CLIENT), gid(SERVER)
    req[140:140 + 36 + 32] = ipcm + hello
    ack = bsdh(0x01, 8, 24, 0, 0) + struct.pack(">BBBBI", 0x22, 0, 0, ext_max_adverts,
                                         65536)
    rep = bytearray(232)
    struct.pack_into(">II", rep, 0, 0xBEEF, 0xC0FFEE)
    rep[12:15] = QPN[SERVER].to_bytes(3, "big")
    rep[20:23] = START_PSN[CLIENT].to_bytes(3, "big")
    rep[36:36 + 24] = ack
    rtu = struct.pack(">II", 0xC0FFEE, 0xBEEF)
    return [cm_mad(CLIENT, SERVER, 0x10, bytes(req), 0),
            cm_mad(SERVER, CLIENT, 0x13, bytes(rep), 0),
            cm_mad(CLIENT, SERVER, 0x14, rtu, 1)]


class Side:
    def __init__(self, me, peer):
        self.me, self.peer = me, peer
        self.mseq = 0
        self.psn = START_PSN[me]
        self.other = None


def synth(argv):
    """A client writes 2048 bytes into the server's SinkAvail (RdmaWrCompl),
    then offers 3000 bytes that the server reads (RdmaRdCompl); both send
    DisConn.  The knobs break one rule each (or, reorder, none).  With
    pieces, the server advertises its buffer as two SinkAvails of one
    receive and the client fills the first (partial: half of it) and
    writes 2048 bytes into the second; adverts is the client's Hello
    max_adverts.  With offers=2 the client offers two SrcAvails at once
    (sink_adverts is the server's HelloAck ext_max_adverts) and the server
    reads both (order: the second first) and reports them with one
    RdmaRdCompl; sendsm: it reads the first, gives the second up (SendSM,
    the client's SrcAvailCancel, the SendSM answering it) and the client
    sends those bytes as Data (read_after: the server reads the second
    anyway); cross: the second offer crosses the server's SendSM and is
    read.  cancel: the client cancels its offer (SrcAvailCancel), the
    server answers (SendSM) and the client sends the bytes as Data (1),
    or sends them first (2), or the server never answers (3); after
    the server's SendSM, the client cancels and sends the bytes before
    the answer (4).
    sink_cancel: the server advertises again and cancels, the client
    answers (SinkCancelAck) (1); the server advertises before the answer
    (2); the client answers a cancel never sent (3)."""
    out, knobs = argv[0], dict(a.split("=") for a in argv[1:])
    k = {n: int(v, 0) for n, v in knobs.items()}
    c, s = Side(CLIENT, SERVER), Side(SERVER, CLIENT)
    c.other, s.other = s, c
    frames = cm_exchange(k.get("adverts", 1), k.get("sink_adverts", 0))

    def send(side, mid, ext=b"", payload=b"", ack=None):
        side.mseq += 1
        length = 16 + len(ext) + len(payload)
        msg = bsdh(mid, 8, length, side.mseq,
                   side.other.mseq if ack is None else ack) + ext + payload
        frames.append(packet(side.me, side.peer, 4, side.psn, payload=msg))
        side.psn += 1

    def write(side, va, rkey, data):
        chunks = [data[i:i + MTU] for i in range(0, len(data), MTU)]
        reth = struct.pack(">QII", va, rkey, len(data))
        for i, chunk in enumerate(chunks):
            op = 10 if len(chunks) == 1 else 6 if i == 0 else \
                8 if i == len(chunks) - 1 else 7
            frames.append(packet(side.me, side.peer, op, side.psn,
                                 reth if op in (6, 10) else b"", chunk))
            side.psn += 1

    def read(side, va, rkey, length):
        frames.append(packet(side.me, side.peer, 12, side.psn,
                             struct.pack(">QII", va, rkey, length)))
        n = -(-length // MTU)
        for i in range(n):
            op = 16 if n == 1 else 13 if i == 0 else 15 if i == n - 1 else 14
            aeth = struct.pack(">I", (0x1F << 24) | i) if op != 14 else b""
            chunk = b"\x5a" * min(MTU, length - i * MTU)
            frames.append(packet(side.peer, side.me, op, side.psn + i,
                                 aeth, chunk))
        side.psn += n

    def ack(side, syndrome=0x1F):
        frames.append(packet(side.me, side.peer, 17, side.other.psn - 1,
                             struct.pack(">I", syndrome << 24)))

    send(c, 0xFF, payload=b"hello, server" * 7)
    ack(s, 0x20 | 0x0E if k.get("rnr") else 0x1F)
    send(s, 0xFD, struct.pack(">IIQI", 4096, 0x1234, 0x10000, 0))
    if k.get("sink_twice") or k.get("pieces"):
        send(s, 0xFD, struct.pack(">IIQI", 4096, 0x1235, 0x20000, 0))
    if k.get("data_before_write"):
        send(c, 0xFF, payload=b"x" * 100)
    if k.get("pieces"):
        first = 2048 if k.get("partial") else 4096
        write(c, 0x10000, 0x1234, b"\xa5" * first)
        send(c, 0x05, struct.pack(">I", first))
    first_write = len(frames)
    if k.get("pieces"):
        write(c, 0x20000, 0x1235, b"\xa5" * 2048)
    else:
        write(c, k.get("wrva", 0x10000), k.get("wrrkey", 0x1234),
              b"\xa5" * 2048)
    send(c, 0x05, struct.pack(">I", k.get("wrcompl", 2048)))
    if k.get("reorder"):
        # The link reorders the write's two packets and repeats the first.
        frames[first_write], frames[first_write + 1] = \
            frames[first_write + 1], frames[first_write]
        frames.append(frames[first_write + 1])
    send(s, 0xFF)  # credit update
    sink_cancel = k.get("sink_cancel", 0)
    if sink_cancel:
        send(s, 0xFD, struct.pack(">IIQI", 4096, 0x1236, 0x50000, 0))
        if sink_cancel != 3:
            send(s, 0x09)  # SinkAvailCancel
        if sink_cancel == 2:
            send(s, 0xFD, struct.pack(">IIQI", 4096, 0x1237, 0x60000, 0))
        send(c, 0x0A)  # SinkCancelAck
    if k.get("cancel"):
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5678, 0x30000))
        if k["cancel"] == 4:
            send(s, 0x04)  # SendSM: gives the offer up
        send(c, 0x08)  # SrcAvailCancel
        if k["cancel"] == 4:
            send(c, 0xFF, payload=b"\x5a" * 3000)
        if k["cancel"] == 2:
            send(c, 0xFF, payload=b"\x5a" * 3000)
        send(s, 0xFF if k["cancel"] == 3 else 0x04)  # the answer, or not
        if k["cancel"] not in (2, 4):
            send(c, 0xFF, payload=b"\x5a" * 3000)
    elif k.get("offers", 1) == 1:
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5678, 0x30000))
        read(s, 0x30000, 0x5678, 3000)
        send(s, 0x06, struct.pack(">I", k.get("rdcompl", 3000)))
    elif k.get("cross"):
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5678, 0x30000))
        send(s, 0x04)  # SendSM: gives the first offer up
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5679, 0x40000),
             ack=s.mseq - 1)
        read(s, 0x40000, 0x5679, 3000)
    else:
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5678, 0x30000))
        send(c, 0xFE, struct.pack(">IIQ", 3000, 0x5679, 0x40000))
        if k.get("sendsm"):
            read(s, 0x30000, 0x5678, 3000)
            send(s, 0x06, struct.pack(">I", 3000))
            send(s, 0x04)  # SendSM: the second offer's bytes by bcopy
            send(c, 0x08)  # SrcAvailCancel
            send(s, 0x04)  # answers it
            if k.get("read_after"):
                read(s, 0x40000, 0x5679, 3000)
            send(c, 0xFF, payload=b"\x5a" * 3000)
        else:
            reads = [(0x30000, 0x5678), (0x40000, 0x5679)]
            for va, rkey in reads[::-1] if k.get("order") else reads:
                read(s, va, rkey, 3000)
            send(s, 0x06, struct.pack(">I", k.get("rdcompl", 6000)))
    send(c, 0x02)
    send(s, 0x02)
    write_pcap(out, struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 2048, 1),
               "<", [[1700000000, i, f] for i, f in enumerate(frames)])


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "synth":
        synth(sys.argv[2:])
    elif len(sys.argv) >= 3:
        mutate(sys.argv[1:])
    else:
        sys.exit(__doc__)
