#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the SDP traffic in a link capture against the wire protocol.

    wire-check.py CAPTURE [--report FILE] [--expect-zcopy]
                  [--expect-offers N]

CAPTURE is a pcap of an Ethernet link carrying SDP over RoCEv2 (UDP 4791),
as qemu's filter-dump writes it (scripts/vm/run-pair.sh, tests/vm/pair/
wire.sh).  tshark splits the capture into frames and decodes the
InfiniBand transport and CM headers; this script decodes every header
again from the raw UDP payload (BTH, RETH, AETH, CM MADs, SDP BSDH and
extra headers), requires both decoders to agree where tshark's decode is
trustworthy, and checks what tshark's SDP dissector cannot:

  cm         every connection: REQ carrying an SDP Hello (IB port space,
             IP CM header consistent with the IP header), REP carrying a
             HelloAck, RTU; versions, buffer counts and sizes, ports,
             addresses;
  transport  per QP and direction, packets ordered by PSN with repeats
             (retransmissions, duplicates) dropped and counted, never
             flagged; gaps, broken First/Middle/Last sequences, bad ICRCs,
             RNR NAKs (a SEND without a posted receive: credits broken)
             and NAKs for invalid or remote-access errors are violations;
  bsdh       every message (a SEND reassembled from its First/Middle/Last
             packets): known MID, BSDH len equal to the SEND's length,
             each MID's size, sane flags, at most the receiver's
             advertised receive size;
  sequence   mseq +1 per message per direction from 1 (Hello/HelloAck
             are 0), mseq_ack never ahead of what the peer had sent,
             never more messages than the peer's credits allowed, DisConn
             rules;
  zcopy      SrcAvail -> RDMA Read (rkey, address range, next unread byte)
             -> RdmaRdCompl (bytes read), SendSM; SinkAvail -> RDMA Write
             -> RdmaWrCompl (bytes written); at most the sink's
             max_adverts SrcAvails outstanding, read in order (one
             RdmaRdCompl may report several; a SendSM gives up all, and
             one that crossed it is never read), and one receive's
             SinkAvails at a time (the pieces of one buffer: the same
             mseq_ack, at most the source's max_adverts, written in
             order, each after the one before it was filled); nothing
             but control messages overtakes an outstanding SrcAvail;
             a SrcAvailCancel is answered with SendSM, and no stream
             bytes go before the answer; a SinkAvailCancel is answered
             with SinkCancelAck (unless the source sent DisConn), which
             answers nothing else, and no SinkAvail goes before it;
  malformed  every frame tshark marks Malformed is either explained by a
             known dissector quirk (below; the bytes are checked here) or
             is a violation;
  decoder    tshark's and this script's decodes of the same fields agree.

Exit status: 0 all checks passed, 1 a violation (listed), 2 usage or
tshark error.  --expect-zcopy also fails a capture in which no connection
moved a byte by RDMA Read or Write, --expect-offers N one in which no
connection had N SrcAvails outstanding at once.  --report FILE writes the summary and
every violation (stdout lists at most 20 per check).

Only python3 and tshark (Wireshark 4.0 was used to write this) are needed.

Known tshark quirks (Wireshark 4.0.17; frames from the sample capture of
tests/vm/pair/wire.sh, bytes are the UDP payload: BTH ... ICRC)
------------------------------------------------------------------------

Q1  RPC-over-RDMA's heuristic claims SDP SENDs and throws.
    Frame 20, RC Send Only, 98 bytes, "[Malformed Packet: RPCoRDMA]":
      04 00 ffff 00000011 80 6eb6a0              BTH (Send Only, PSN 0x6eb6a0)
      ff 00 0008 00000028 00000001 00000000      BSDH Data, len 40, mseq 1, ack 0
      50504453 01000000 00003000 00000000 9d308023 7d64f550   24 bytes payload
      e8b18cd0                                   ICRC (correct)
    The message is a sane 40-byte Data.  The infiniband.payload heuristics
    run rpcordma before infiniband_sdp.  packet_is_rpcordma() reads the
    word at offset 12 as the RPC-over-RDMA message type: it is the BSDH's
    mseq_ack, 0 in the first messages of a connection, i.e. RDMA_MSG.  It
    then walks the "read list" from offset 16: the non-zero word 50504453
    means "a chunk follows", the chunk takes 20 bytes, and the next list
    word at offset 40 is past the 40-byte payload: the exception is
    reported as Malformed (get_read_list_size() reads before it checks).
    Which SENDs reach that heuristic depends on the dissector's state from
    earlier frames: in the sample only frame 20 does, while connection 2's
    first SEND (frame 6467, the same 40-byte Data but for its payload) is
    claimed the same way once cut out with its CM exchange alone.
    `tshark --disable-heuristic rpcrdma_infiniband` decodes frame 20 as SDP
    Data, len 40.  Any frame of an SDP connection that tshark gives to
    rpcordma is ours, decoded here.
Q2  A 16-byte Data (a credit update without payload) is Malformed.
    Frame 81, RC Send Only, 74 bytes, "[Malformed Packet: Infiniband SDP]":
      04 00 ffff 00000011 80 6eb6a1
      ff 00 0007 00000010 00000002 00000004      BSDH Data, len 16, mseq 2, ack 4
      e6bab7ba
    The BSDH is sane and len 16 is the SEND's length.  The dissector adds
    the Data payload item with length -1 ("to the end") at offset 16,
    which throws when no byte is left: every payload-less Data is marked,
    and so is a retransmission of one (triaged as its original).
Q3  Packets without a BSDH are decoded as if they began with one.
    Frame 25, RC Send Middle, shows "(SDP ChRcvBuf)": its payload starts
      0b 04 aa 37 ab 9d 64 5a ...
    which is Data payload in the middle of the 52693-byte message begun
    in frame 24 (Send First, BSDH ff 00 0008 0000cdd5 ...).  RDMA Read
    Responses get the same treatment (frame 104, "SDP Unknown": user data
    read from the peer's buffer), and so would RDMA Writes.  Only Send
    First/Only carry a BSDH; mids, lengths and Malformed marks that tshark
    reports for other packets are ignored here (a Send Last or Read
    Response of exactly 16 bytes starting with ff would be Q2-Malformed).
Q4  The Hello in the CM REQ is not decoded as SDP.  Frame 17 (REQ, service
    id 0x00000000013f1b59: IB port space, port 7001): the IP CM header
    (36 bytes) takes the start of the private data and the rest is shown as
    "IP CM Consumer PrivateData" without calling the SDP heuristic:
      00000008 00000020 00000000 00000000 2240 00 01 00010000 00010000 a053 0000
    = BSDH Hello (bufs 8, len 32), v2.2, IPv4, max_adverts 1, desremrcvsz
    65536, localrcvsz 65536, local port 41043.  This script decodes it.
Q5  The all-zero private data of RTU, DREQ and DREP is shown as an "SDP
    Hello" of version 0.0, len 0 (frames 19, 6460, 6463): the heuristic
    claims every CM message of the conversation.  SDP puts nothing there;
    those frames are not SDP messages.
Q6  The HelloAck, RdmaRdCompl, RdmaWrCompl, SrcAvail and SinkAvail extra
    headers are shown as empty items (e.g. frame 18, "HelloAck Header"):
    their fields (actrcvsz, the completion's byte count, len/rkey/vaddr)
    are decoded here only.
"""

import argparse
import ipaddress
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter, defaultdict

ROCE_PORT = 4791
BSDH = 16
ZC_MAX_LEN = 64 << 20  # SDP_ZC_MAX_LEN: larger offers are refused by sdp.ko
MIN_RCV_SIZE = BSDH + 1  # a receive size must hold a BSDH and a byte

# --------------------------------------------------------------------------
# SDP message ids (include/sdp_wire.h).  size: the fixed length, or
# (minimum, None) for a variable one; 'cm' only in CM private data; None:
# defined by the specification but not spoken by sdp.ko (a peer running
# sdp.ko resets the connection on it).
MID_HELLO, MID_HELLO_ACK, MID_DISCONN, MID_ABORT = 0x00, 0x01, 0x02, 0x03
MID_SEND_SM, MID_WR_COMPL, MID_RD_COMPL = 0x04, 0x05, 0x06
MID_SRC_CANCEL, MID_SINK_CANCEL, MID_SINK_CANCEL_ACK = 0x08, 0x09, 0x0A
MID_SINK_AVAIL, MID_SRC_AVAIL, MID_DATA = 0xFD, 0xFE, 0xFF
MID_CH_RCV_BUF, MID_CH_RCV_BUF_ACK = 0x0B, 0x0C
CAP_RESIZE = 0x04  # Hello/HelloAck caps: answers ChRcvBuf
MIDS = {
    0x00: ("Hello", "cm"),
    0x01: ("HelloAck", "cm"),
    0x02: ("DisConn", 16),
    0x03: ("AbortConn", 16),
    0x04: ("SendSM", 16),
    0x05: ("RdmaWrCompl", 20),
    0x06: ("RdmaRdCompl", 20),
    0x07: ("ModeChange", None),
    0x08: ("SrcAvailCancel", 16),
    0x09: ("SinkAvailCancel", 16),
    0x0A: ("SinkCancelAck", 16),
    0x0B: ("ChRcvBuf", 20),  # to a peer with CAP_RESIZE only
    0x0C: ("ChRcvBufAck", 20),
    0x0D: ("SuspComm", None),
    0x0E: ("SuspCommAck", None),
    0xFD: ("SinkAvail", 36),
    0xFE: ("SrcAvail", (32, None)),
    0xFF: ("Data", (16, None)),
}
FLAG_OOB_PRES, FLAG_OOB_PEND, FLAG_REQ_PIPE = 0x01, 0x02, 0x04


def mid_name(mid):
    return MIDS.get(mid, ("Unknown(0x%02x)" % mid,))[0]


# --------------------------------------------------------------------------
# InfiniBand transport (IBTA vol. 1, ch. 9; RoCEv2 annex A17).
RC_OPS = {
    0: "Send First", 1: "Send Middle", 2: "Send Last", 3: "Send Last Imm",
    4: "Send Only", 5: "Send Only Imm", 6: "Write First", 7: "Write Middle",
    8: "Write Last", 9: "Write Last Imm", 10: "Write Only",
    11: "Write Only Imm", 12: "Read Request", 13: "Read Response First",
    14: "Read Response Middle", 15: "Read Response Last",
    16: "Read Response Only", 17: "Acknowledge", 18: "Atomic Acknowledge",
    19: "CmpSwap", 20: "FetchAdd", 22: "Send Last Inval",
    23: "Send Only Inval",
}
SEND_FIRST, SEND_MIDDLE = {0}, {1}
SEND_LAST = {2, 3, 22}
SEND_ONLY = {4, 5, 23}
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = {6}, {7}, {8, 9}, {10, 11}
READ_REQ = 12
READ_RESP = {13, 14, 15, 16}
ACK, ATOMIC_ACK = 17, 18
RESPONSES = READ_RESP | {ACK, ATOMIC_ACK}
UD_SEND_ONLY, UD_SEND_ONLY_IMM = 0x64, 0x65
CM_QP = 1
MAD_CLASS_CM = 0x07
CM_ATTRS = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU",
            0x15: "DREQ", 0x16: "DREP"}
# Extension headers after the BTH, by opcode.
RETH_OPS = {6, 10, 11, 12}
AETH_OPS = {13, 15, 16, 17, 18}
IMM_OPS = {3, 5, 9, 11}
IETH_OPS = {22, 23}


class Violations:
    """Violations by check, each with the frame that shows it."""

    def __init__(self):
        self.items = []

    def add(self, check, frame, text):
        self.items.append((check, frame, text))

    def by_check(self):
        out = defaultdict(list)
        for check, frame, text in self.items:
            out[check].append((frame, text))
        return out


V = Violations()


# --------------------------------------------------------------------------
# tshark

# Fields read for every RoCEv2 frame.  The raw UDP payload is what this
# script decodes; tshark's own fields are read only to cross-check it.
BASE_FIELDS = ["frame.number", "frame.protocols", "ip.src", "ip.dst",
               "ip.hdr_len", "ip.id", "ip.flags", "ip.frag_offset",
               "ipv6.src", "ipv6.dst", "udp.srcport", "udp.dstport",
               "udp.length", "udp.payload"]
CHECK_FIELDS = ["_ws.malformed", "infiniband.bth.opcode",
                "infiniband.bth.destqp", "infiniband.bth.psn",
                "infiniband.reth.va", "infiniband.reth.r_key",
                "infiniband.reth.dmalen", "infiniband.cm.req.serviceid",
                "infiniband.cm.req.localqpn", "infiniband.cm.rep.localqpn",
                "infiniband_sdp.bsdh.mid", "infiniband_sdp.bsdh.flags",
                "infiniband_sdp.bsdh.bufs", "infiniband_sdp.bsdh.len",
                "infiniband_sdp.bsdh.mseq", "infiniband_sdp.bsdh.mseqack"]


class Frame:
    __slots__ = ("num", "protocols", "ipv", "src", "dst", "sport", "dport",
                 "udp_len", "data", "ts", "malformed", "ip_hdr")


def tshark_fields(tshark, capture, fields):
    """Run tshark; fields this tshark does not know (it refuses to run with
    them) are dropped, unless the decode needs them."""
    while True:
        cmd = [tshark, "-n", "-r", capture, "-T", "fields",
               "-E", "separator=/t", "-E", "occurrence=f", "-E", "quote=n",
               # ICMP errors quote UDP headers: only real RoCEv2 datagrams.
               "-Y", "udp.dstport == %d && !icmp && !icmpv6" % ROCE_PORT]
        for f in fields:
            cmd += ["-e", f]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            return fields, proc.stdout
        bad = [f for f in fields if "\t" + f + "\n" in proc.stderr + "\n"]
        if not bad or set(bad) & set(BASE_FIELDS):
            sys.exit("wire-check: tshark failed: %s" % proc.stderr.strip())
        fields = [f for f in fields if f not in bad]


def run_tshark(capture):
    tshark = shutil.which("tshark")
    if not tshark:
        sys.exit("wire-check: tshark not found (apt-get install tshark)")
    fields, stdout = tshark_fields(tshark, capture, BASE_FIELDS + CHECK_FIELDS)
    frames = []
    for line in stdout.splitlines():
        vals = line.split("\t")
        rec = dict(zip(fields, vals + [""] * (len(fields) - len(vals))))
        f = Frame()
        f.num = int(rec["frame.number"])
        f.protocols = rec["frame.protocols"]
        if rec["ipv6.src"]:
            f.ipv, f.src, f.dst = 6, rec["ipv6.src"], rec["ipv6.dst"]
        else:
            f.ipv, f.src, f.dst = 4, rec["ip.src"], rec["ip.dst"]
        f.src = str(ipaddress.ip_address(f.src))
        f.dst = str(ipaddress.ip_address(f.dst))
        f.sport, f.dport = int(rec["udp.srcport"]), int(rec["udp.dstport"])
        f.udp_len = int(rec["udp.length"])
        f.data = bytes.fromhex(rec["udp.payload"].replace(":", ""))
        f.malformed = rec.get("_ws.malformed", "")
        f.ip_hdr = ip_udp_header(f, rec)
        f.ts = {k: v for k, v in rec.items() if k in CHECK_FIELDS and v}
        frames.append(f)
    return frames


def ts_int(frame, field):
    v = frame.ts.get(field)
    return None if v is None else int(v, 0)


# --------------------------------------------------------------------------
# RoCEv2 packets


class Pkt:
    """One RoCEv2 packet, decoded from the UDP payload."""

    __slots__ = ("f", "opcode", "pad", "destqp", "psn", "reth", "aeth",
                 "deth", "hdr", "payload", "payload_len", "upsn")

    @property
    def num(self):
        return self.f.num

    @property
    def name(self):
        if self.opcode in RC_OPS:
            return RC_OPS[self.opcode]
        return "opcode 0x%02x" % self.opcode


def icrc(frame_bytes_ip, ipv):
    """Invariant CRC of a RoCEv2 packet: CRC-32 over 8 bytes of ones, the IP
    and UDP headers and the transport packet, with the fields routers may
    change (TOS/traffic class, TTL/hop limit, flow label, checksums, BTH
    resv8a) masked to ones.  frame_bytes_ip starts at the IP header."""
    b = bytearray(frame_bytes_ip)
    if ipv == 4:
        ihl = (b[0] & 0x0F) * 4
        b[1] = 0xFF
        b[8] = 0xFF
        b[10:12] = b"\xff\xff"
    else:
        ihl = 40
        b[0] |= 0x0F
        b[1:4] = b"\xff\xff\xff"
        b[7] = 0xFF
    b[ihl + 6:ihl + 8] = b"\xff\xff"
    b[ihl + 8 + 4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(b[:-4]))


def ip_udp_header(f, rec):
    """The IP and UDP headers of a frame, rebuilt from tshark's fields with
    what the ICRC covers; None if the IPv4 header has options."""
    total = f.udp_len
    if f.ipv == 4:
        if int(rec["ip.hdr_len"]) != 20:
            return None
        # TOS, TTL and the checksum are masked by the ICRC: left 0 here.
        frag = int(rec["ip.flags"], 0) << 13 | int(rec["ip.frag_offset"])
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + total,
                         int(rec["ip.id"], 0), frag, 0, 17, 0,
                         ipaddress.ip_address(f.src).packed,
                         ipaddress.ip_address(f.dst).packed)
    else:
        # Traffic class, flow label and hop limit are masked.
        ip = struct.pack(">IHBB16s16s", 0x60000000, total, 17, 0,
                         ipaddress.ip_address(f.src).packed,
                         ipaddress.ip_address(f.dst).packed)
    return ip + struct.pack(">HHHH", f.sport, f.dport, total, 0)


def icrc_ok(f):
    """True/False, or None when the capture holds too little to tell."""
    if f.ip_hdr is None or len(f.data) != f.udp_len - 8 or len(f.data) < 16:
        return None
    want = struct.unpack("<I", f.data[-4:])[0]
    return icrc(f.ip_hdr + f.data, f.ipv) == want


def parse_pkt(f):
    d = f.data
    if len(d) < 12:
        V.add("transport", f.num, "RoCEv2 datagram of %d bytes: no BTH" % len(d))
        return None
    p = Pkt()
    p.f = f
    p.opcode = d[0]
    p.pad = (d[1] >> 4) & 3
    p.destqp = int.from_bytes(d[5:8], "big")
    p.psn = int.from_bytes(d[9:12], "big")
    p.reth = p.aeth = p.deth = None
    off = 12
    op = p.opcode
    need = 0
    if op in (UD_SEND_ONLY, UD_SEND_ONLY_IMM):
        need += 8
    if op < 0x20:
        need += 16 if op in RETH_OPS else 0
        need += 4 if op in AETH_OPS else 0
        need += 4 if op in IMM_OPS or op in IETH_OPS else 0
        need += 8 if op == ATOMIC_ACK else 0
        need += 28 if op in (19, 20) else 0
    if len(d) < off + need:
        V.add("transport", f.num, "%s: capture holds %d bytes, headers need %d"
              % (p.name, len(d), off + need))
        return None
    if op in (UD_SEND_ONLY, UD_SEND_ONLY_IMM):
        p.deth = struct.unpack_from(">II", d, off)
        off += 8
        if op == UD_SEND_ONLY_IMM:
            off += 4
    elif op < 0x20:
        if op in RETH_OPS:
            p.reth = struct.unpack_from(">QII", d, off)  # va, rkey, dma len
            off += 16
        if op in AETH_OPS:
            p.aeth = (d[off], int.from_bytes(d[off + 1:off + 4], "big"))
            off += 4
        if op in IMM_OPS or op in IETH_OPS:
            off += 4
        if op == ATOMIC_ACK:
            off += 8
        if op in (19, 20):
            off += 28
    p.hdr = off
    # The true payload length comes from the UDP length (the capture may be
    # cut short); the ICRC (4) and the pad bytes follow the payload.
    p.payload_len = f.udp_len - 8 - off - 4 - p.pad
    p.payload = d[off:off + max(p.payload_len, 0)]
    if p.payload_len < 0:
        V.add("transport", f.num, "%s: UDP length %d too short for its headers"
              % (p.name, f.udp_len))
        return None
    return p


# --------------------------------------------------------------------------
# CM (IBTA vol. 1, ch. 12) and the SDP Hello / HelloAck


def gid_addr(raw):
    """A RoCEv2 GID as an IP address string (IPv4-mapped for IPv4)."""
    a = ipaddress.IPv6Address(raw)
    return str(a.ipv4_mapped) if a.ipv4_mapped else str(a)


def cm_addr(raw, ipv):
    """An address of the IP CM private data header (IPv4 in the last 4)."""
    if ipv == 4:
        return str(ipaddress.IPv4Address(raw[12:16]))
    return str(ipaddress.IPv6Address(raw))


def decode_bsdh(b):
    mid, flags, bufs, length, mseq, ack = struct.unpack_from(">BBHIII", b, 0)
    return {"mid": mid, "flags": flags, "bufs": bufs, "len": length,
            "mseq": mseq, "ack": ack}


class Conn:
    """One SDP connection: client (active, sent the REQ) and server."""

    def __init__(self, idx, req_pkt, comm_id):
        self.idx = idx
        self.comm_id = comm_id
        self.req = req_pkt
        self.rep = self.rtu = None
        self.server_comm_id = None
        self.ipv = req_pkt.f.ipv
        self.client, self.server = req_pkt.f.src, req_pkt.f.dst
        self.client_qpn = self.server_qpn = None
        self.req_psn = self.rep_psn = None
        self.mtu = 1024
        self.service_id = None
        self.port = self.client_port = None
        self.hello = self.hello_ack = None  # decoded BSDH + extra header
        self.cm_events = []  # (frame, name) after the RTU: DREQ, DREP, ...
        self.rejected = False
        self.cm_repeats = 0
        self.dirs = {}

    def label(self):
        if self.ipv == 6:
            return "[%s]:%s -> [%s]:%s" % (self.client, self.client_port,
                                         self.server, self.port)
        return "%s:%s -> %s:%s" % (self.client, self.client_port, self.server,
                                   self.port)


def decode_hello(f, priv):
    """The SDP Hello in the REQ's IP CM consumer private data (56 bytes)."""
    if len(priv) < BSDH:
        V.add("cm", f, "REQ private data holds no SDP Hello")
        return None
    h = decode_bsdh(priv)
    if h["mid"] != MID_HELLO:
        V.add("cm", f, "REQ private data carries %s, not a Hello"
              % mid_name(h["mid"]))
        return None
    if h["len"] != 32 and h["len"] < 64:
        V.add("cm", f, "Hello len %d: neither 32 (modern) nor >= 64 "
              "(historical)" % h["len"])
        return None
    if h["len"] > len(priv):
        V.add("cm", f, "Hello len %d, the REQ private data holds %d bytes "
              "after the IP CM header" % (h["len"], len(priv)))
        return None
    e = priv[BSDH:]
    h.update(majv=e[0], ipv=e[1] >> 4, caps=e[1] & 0x0F, max_adverts=e[3],
             desremrcvsz=struct.unpack_from(">I", e, 4)[0],
             localrcvsz=struct.unpack_from(">I", e, 8)[0],
             local_port=struct.unpack_from(">H", e, 12)[0])
    if h["len"] >= 64 and len(e) >= 48:
        h["src_ip"], h["dst_ip"] = e[16:32], e[32:48]
    return h


def decode_hello_ack(f, priv):
    h = decode_bsdh(priv)
    if h["mid"] != MID_HELLO_ACK:
        V.add("cm", f, "REP private data carries %s, not a HelloAck"
              % mid_name(h["mid"]))
        return None
    if h["len"] != 24:
        V.add("cm", f, "HelloAck len %d, not 24" % h["len"])
        return None
    e = priv[BSDH:]
    h.update(majv=e[0], ipv=e[1] >> 4, caps=e[1] & 0x0F,
             ext_max_adverts=e[3], actrcvsz=struct.unpack_from(">I", e, 4)[0])
    return h


def check_hello(conn, f):
    """Field checks of the Hello against the REQ's own headers."""
    h = conn.hello
    if h["majv"] != 0x22:
        V.add("cm", f, "Hello version %d.%d, sdp.ko speaks 2.2"
              % (h["majv"] >> 4, h["majv"] & 15))
    if h["flags"] or h["mseq"] or h["ack"]:
        V.add("cm", f, "Hello BSDH flags 0x%02x mseq %d mseq_ack %d: all must "
              "be 0" % (h["flags"], h["mseq"], h["ack"]))
    if h["bufs"] == 0:
        V.add("cm", f, "Hello grants 0 buffers: the server could never send")
    if h["ipv"] != conn.ipv:
        V.add("cm", f, "Hello says IPv%d, the REQ travels over IPv%d"
              % (h["ipv"], conn.ipv))
    if h["max_adverts"] == 0:
        V.add("cm", f, "Hello max_adverts 0")
    for name in ("desremrcvsz", "localrcvsz"):
        if h[name] < MIN_RCV_SIZE:
            V.add("cm", f, "Hello %s %d: smaller than a BSDH and a byte"
                  % (name, h[name]))
    if h["local_port"] != conn.client_port:
        V.add("cm", f, "Hello local port %d, the IP CM header says %d"
              % (h["local_port"], conn.client_port))
    if "src_ip" in h:
        if cm_addr(h["src_ip"], conn.ipv) != conn.client or \
                cm_addr(h["dst_ip"], conn.ipv) != conn.server:
            V.add("cm", f, "Hello addresses do not match the IP header")


def check_hello_ack(conn, f):
    h = conn.hello_ack
    if h["majv"] != 0x22:
        V.add("cm", f, "HelloAck version %d.%d, sdp.ko speaks 2.2"
              % (h["majv"] >> 4, h["majv"] & 15))
    if h["flags"] or h["mseq"] or h["ack"]:
        V.add("cm", f, "HelloAck BSDH flags 0x%02x mseq %d mseq_ack %d: all "
              "must be 0" % (h["flags"], h["mseq"], h["ack"]))
    if h["bufs"] == 0:
        V.add("cm", f, "HelloAck grants 0 buffers: the client could never send")
    # The HelloAck's IP version is not used by the protocol (OFED and sdp.ko
    # send 0); if set it must be the connection's.
    if h["ipv"] not in (0, conn.ipv):
        V.add("cm", f, "HelloAck says IPv%d on an IPv%d connection"
              % (h["ipv"], conn.ipv))
    if h["actrcvsz"] < MIN_RCV_SIZE:
        V.add("cm", f, "HelloAck actrcvsz %d: smaller than a BSDH and a byte"
              % h["actrcvsz"])


def handle_req(conns, by_comm, p, cm):
    f = p.f
    comm_id = struct.unpack_from(">I", cm, 0)[0]
    key = (f.src, comm_id)
    if key in by_comm:
        by_comm[key].cm_repeats += 1  # the CM resends unanswered MADs
        return
    conn = Conn(len(conns) + 1, p, comm_id)
    conns.append(conn)
    by_comm[key] = conn
    conn.service_id = struct.unpack_from(">Q", cm, 8)[0]
    conn.client_qpn = int.from_bytes(cm[32:35], "big")
    conn.req_psn = int.from_bytes(cm[44:47], "big")
    mtu_code = cm[50] >> 4
    if 1 <= mtu_code <= 5:
        conn.mtu = 128 << mtu_code
    else:
        V.add("cm", f.num, "REQ path MTU code %d is not defined" % mtu_code)
    local_gid, remote_gid = gid_addr(cm[56:72]), gid_addr(cm[72:88])
    if (local_gid, remote_gid) != (f.src, f.dst):
        V.add("cm", f.num, "REQ primary GIDs %s -> %s differ from the IP "
              "header %s -> %s" % (local_gid, remote_gid, f.src, f.dst))
    # sdp.ko uses the RDMA CM's IB port space with IP addressing: service
    # id 0x00000000013F<port>, IP CM header at the start of the private
    # data (the Wireshark SDP heuristic needs bit 0x10000, set by 0x3F).
    if conn.service_id >> 16 != 0x013F:
        V.add("cm", f.num, "REQ service id 0x%016x is not in the RDMA CM IB "
              "port space (0x00000000013Fpppp)" % conn.service_id)
    conn.port = conn.service_id & 0xFFFF
    priv = cm[140:232]
    ipcm_ver, ipv = priv[0], priv[1] >> 4
    conn.client_port = struct.unpack_from(">H", priv, 2)[0]
    if ipcm_ver != 0:
        V.add("cm", f.num, "IP CM header version 0x%02x, not 0.0" % ipcm_ver)
    if ipv != f.ipv:
        V.add("cm", f.num, "IP CM header says IPv%d, the REQ travels over "
              "IPv%d" % (ipv, f.ipv))
    elif (cm_addr(priv[4:20], ipv), cm_addr(priv[20:36], ipv)) != (f.src, f.dst):
        V.add("cm", f.num, "IP CM addresses %s -> %s differ from the IP "
              "header %s -> %s" % (cm_addr(priv[4:20], ipv),
                                   cm_addr(priv[20:36], ipv), f.src, f.dst))
    conn.hello = decode_hello(f.num, priv[36:])
    if conn.hello:
        check_hello(conn, f.num)
    # Cross-check tshark's decode of the same REQ.
    sid = ts_int(f, "infiniband.cm.req.serviceid")
    qpn = ts_int(f, "infiniband.cm.req.localqpn")
    if (sid is not None and sid != conn.service_id) or \
            (qpn is not None and qpn != conn.client_qpn):
        V.add("decoder", f.num, "REQ: tshark reads service id %s QPN %s, this "
              "script 0x%x 0x%x" % (sid, qpn, conn.service_id, conn.client_qpn))


def handle_cm(conns, by_comm, p):
    f = p.f
    mad = p.payload
    if len(mad) < 24 + 232 or mad[1] != MAD_CLASS_CM:
        return
    attr = struct.unpack_from(">H", mad, 16)[0]
    cm = mad[24:24 + 232]
    kind = CM_ATTRS.get(attr, "attribute 0x%04x" % attr)
    if kind == "REQ":
        handle_req(conns, by_comm, p, cm)
        return
    local_id, remote_id = struct.unpack_from(">II", cm, 0)
    # Every other CM message names the client's communication id as local
    # (from the client) or remote (from the server) id.
    conn = by_comm.get((f.src, local_id)) or by_comm.get((f.dst, remote_id))
    if conn is None:
        if kind in ("REP", "RTU"):
            V.add("cm", f.num, "%s for no REQ in the capture" % kind)
        return
    from_client = f.src == conn.client
    if kind == "REP":
        if conn.rep is not None:
            conn.cm_repeats += 1
            return
        if from_client:
            V.add("cm", f.num, "REP sent by the client")
            return
        conn.rep = p
        conn.server_comm_id = local_id
        conn.server_qpn = int.from_bytes(cm[12:15], "big")
        conn.rep_psn = int.from_bytes(cm[20:23], "big")
        conn.hello_ack = decode_hello_ack(f.num, cm[36:232])
        if conn.hello_ack:
            check_hello_ack(conn, f.num)
        qpn = ts_int(f, "infiniband.cm.rep.localqpn")
        if qpn is not None and qpn != conn.server_qpn:
            V.add("decoder", f.num, "REP: tshark reads QPN 0x%x, this script "
                  "0x%x" % (qpn, conn.server_qpn))
        if conn.hello_ack:
            cross_check_bsdh(f, conn.hello_ack)
    elif kind == "RTU":
        if conn.rtu is not None:
            conn.cm_repeats += 1
            return
        if not from_client:
            V.add("cm", f.num, "RTU sent by the server")
        if conn.rep is None:
            V.add("cm", f.num, "RTU before any REP")
        conn.rtu = p
    elif kind == "REJ":
        conn.rejected = True
        conn.cm_events.append((f.num, "REJ"))
    else:
        conn.cm_events.append((f.num, kind))


def check_cm_exchange(conn):
    """Each connection: REQ, REP, RTU, in that order, from the right side."""
    if conn.rejected:
        return
    if conn.rep is None:
        V.add("cm", conn.req.num, "connection %d: REQ never answered by a REP"
              % conn.idx)
    elif conn.rtu is None:
        V.add("cm", conn.rep.num, "connection %d: REP never followed by an RTU"
              % conn.idx)


# --------------------------------------------------------------------------
# Streams: the packets of one sender on one connection, ordered by PSN


class Msg:
    """An SDP message: one SEND, possibly of several packets."""

    __slots__ = ("d", "hdr", "length", "frames", "psn", "opcodes",
                 "complete", "mid", "flags", "bufs", "len", "mseq", "ack",
                 "ext", "first", "last")

    def desc(self):
        return "%s mseq %d" % (mid_name(self.mid), self.mseq)


class RdmaOp:
    """An RDMA Read Request or an RDMA Write (all its packets)."""

    __slots__ = ("d", "kind", "va", "rkey", "dmalen", "length", "frames",
                 "psn", "complete", "first", "last", "offer")

    def desc(self):
        return "RDMA %s (rkey 0x%x, va 0x%x, %d bytes)" % (
            self.kind, self.rkey, self.va, self.dmalen)


class Dir:
    """One direction of a connection: what `sender` sends to `receiver`."""

    def __init__(self, conn, name, sender, receiver, dest_qpn):
        self.conn = conn
        self.name = name
        self.sender, self.receiver = sender, receiver
        self.dest_qpn = dest_qpn
        self.requests = []  # SENDs, RDMA Write/Read Request packets
        self.responses = []  # Read Responses, ACKs to the peer's requests
        self.events = []  # Msg and RdmaOp in PSN order
        self.msgs = []
        self.repeats = 0
        self.repeat_of = {}  # frame of a repeated request -> the original's
        self.packets = 0
        self.naks = Counter()
        self.incomplete = 0
        self.rcv_size = None  # the receiver's advertised receive size
        self.hello_bufs = 0  # the receiver's initial grant to the sender
        self.peer = None


def unwrap_all(pkts, anchor):
    """Give every packet an unwrapped PSN (24-bit PSNs wrap), relative to
    the previous packet in capture order."""
    prev = anchor
    for p in pkts:
        if prev is None:
            p.upsn = p.psn
        else:
            delta = (p.psn - prev) & 0xFFFFFF
            if delta >= 1 << 23:
                delta -= 1 << 24
            p.upsn = prev + delta
        prev = p.upsn


def consumed_psns(p, mtu):
    """PSNs a request takes: an RDMA Read takes one per response packet."""
    if p.opcode == READ_REQ:
        return max(1, -(-p.reth[2] // mtu))
    return 1


def order_requests(d, anchor):
    """Drop repeated requests (same PSN, or a Read retried from inside an
    earlier Read's range) and return the rest in PSN order.  A repeat is a
    retransmission; it is counted, not flagged, but it must carry what the
    original carried."""
    mtu = d.conn.mtu
    unwrap_all(d.requests, anchor)
    first = {}
    for p in d.requests:
        orig = first.get(p.upsn)
        if orig is not None:
            d.repeats += 1
            d.repeat_of[p.num] = orig.num
            if orig.opcode != p.opcode or orig.payload != p.payload:
                V.add("transport", p.num, "%s %s PSN 0x%06x repeats frame %d "
                      "with different content" % (d.name, p.name, p.psn,
                                                  orig.num))
            continue
        first[p.upsn] = p
    ordered = []
    expect = None
    for upsn in sorted(first):
        p = first[upsn]
        if expect is not None and upsn < expect:
            # Inside the PSN range of an earlier Read Request: the requester
            # retried the rest of that read.
            d.repeats += 1
            continue
        if expect is not None and upsn > expect:
            V.add("transport", p.num, "%s: PSNs 0x%06x..0x%06x missing from "
                  "the capture before this %s" % (
                      d.name, expect & 0xFFFFFF, (upsn - 1) & 0xFFFFFF, p.name))
        ordered.append(p)
        expect = upsn + consumed_psns(p, mtu)
    return ordered


def order_responses(d, anchor):
    """Read Response packets by PSN, repeats dropped; ACKs are counted (the
    NAKs) and otherwise ignored."""
    resp = [p for p in d.responses if p.opcode in READ_RESP]
    for p in d.responses:
        if p.aeth is None:
            continue
        syndrome = p.aeth[0]
        kind = syndrome >> 5
        if kind == 1:
            d.naks["RNR NAK"] += 1
            V.add("transport", p.num, "%s: RNR NAK for PSN 0x%06x: a SEND "
                  "found no posted receive buffer (credits overrun)"
                  % (d.name, p.psn))
        elif kind == 3:
            code = syndrome & 0x1F
            name = {0: "PSN sequence error", 1: "invalid request",
                    2: "remote access error", 3: "remote operational error",
                    4: "invalid RD request"}.get(code, "code %d" % code)
            d.naks["NAK " + name] += 1
            if code != 0:  # a sequence error is loss recovery
                V.add("transport", p.num, "%s: NAK (%s) for PSN 0x%06x"
                      % (d.name, name, p.psn))
    unwrap_all(resp, anchor)
    first = {}
    for p in resp:
        if p.upsn in first:
            d.repeats += 1
            continue
        first[p.upsn] = p
    return first


def build_events(d, requests):
    """Reassemble SENDs into messages and RDMA operations from the ordered
    request packets.  IB sends a message's packets back to back in PSN
    order, so anything else inside one is a broken sequence."""
    cur = None  # the open Msg or RdmaOp
    for p in requests:
        op = p.opcode
        cont = op in SEND_MIDDLE | SEND_LAST | WRITE_MIDDLE | WRITE_LAST
        if cur is not None and not cont:
            V.add("transport", p.num, "%s: %s inside the %s begun in frame %d"
                  % (d.name, p.name, "SEND" if isinstance(cur, Msg) else
                     "RDMA Write", cur.frames[0]))
            cur = None
        if op in SEND_FIRST | SEND_ONLY:
            m = Msg()
            m.d, m.hdr, m.length = d, p.payload[:BSDH + 20], p.payload_len
            m.frames, m.psn, m.opcodes = [p.num], p.upsn, {op}
            m.complete = op in SEND_ONLY
            d.events.append(m)
            cur = None if m.complete else m
        elif op in WRITE_FIRST | WRITE_ONLY or op == READ_REQ:
            r = RdmaOp()
            r.d, r.kind = d, "Read" if op == READ_REQ else "Write"
            r.va, r.rkey, r.dmalen = p.reth
            r.length = 0 if op == READ_REQ else p.payload_len
            r.frames, r.psn, r.offer = [p.num], p.upsn, None
            r.complete = op != 6
            d.events.append(r)
            cur = None if r.complete else r
        elif cont:
            is_send = op in SEND_MIDDLE | SEND_LAST
            if cur is None or isinstance(cur, Msg) != is_send:
                V.add("transport", p.num, "%s: %s without its First packet"
                      % (d.name, p.name))
                continue
            cur.frames.append(p.num)
            cur.length += p.payload_len
            if isinstance(cur, Msg):
                cur.opcodes.add(op)
            if op in SEND_LAST | WRITE_LAST:
                cur.complete = True
                cur = None
        else:
            V.add("transport", p.num, "%s: %s is not used by SDP"
                  % (d.name, p.name))
    for e in d.events:
        e.first, e.last = min(e.frames), max(e.frames)
    # A message still open at the end was cut off by the end of the capture.
    while d.events and not d.events[-1].complete:
        d.events.pop()
        d.incomplete += 1
    for e in d.events:
        if isinstance(e, Msg):
            h = decode_bsdh(e.hdr) if len(e.hdr) >= BSDH else None
            if h is None:
                V.add("bsdh", e.frames[0], "%s: SEND of %d bytes, shorter than "
                      "a BSDH" % (d.name, e.length))
                continue
            for k, v in h.items():
                setattr(e, k, v)
            e.ext = e.hdr[BSDH:]
            d.msgs.append(e)
        elif e.kind == "Write" and e.length != e.dmalen:
            V.add("transport", e.frames[0], "%s: RDMA Write of %d bytes, its "
                  "RETH says %d" % (d.name, e.length, e.dmalen))


def match_read_responses(d, responses):
    """Each of our Read Requests is answered (by the peer, in its response
    stream) with packets that carry exactly the requested bytes."""
    mtu = d.conn.mtu
    last_resp = max(responses) if responses else None
    for r in d.events:
        if not isinstance(r, RdmaOp) or r.kind != "Read":
            continue
        n = max(1, -(-r.dmalen // mtu))
        got, frames = 0, []
        for i in range(n):
            p = responses.get(r.psn + i)
            if p is None:
                if last_resp is not None and last_resp > r.psn + i:
                    V.add("transport", r.frames[0], "%s: %s: response PSN "
                          "0x%06x missing from the capture" % (
                              d.name, r.desc(), (r.psn + i) & 0xFFFFFF))
                got = None
                break
            # First ... Middle ... Last, or Only.  A requester that lost
            # responses retries the rest of the read with a new request
            # inside the old PSN range: its answer starts again with First
            # (or is an Only) at a middle PSN, and a capture near the
            # requester holds only that copy.
            if n == 1:
                want = {16}
            elif i == 0:
                want = {13}
            elif i == n - 1:
                want = {15, 16}
            else:
                want = {13, 14}
            if p.opcode not in want:
                V.add("transport", p.num, "%s: %s for packet %d of %d of the "
                      "RDMA Read in frame %d" % (d.peer.name, p.name, i + 1, n,
                                                 r.frames[0]))
            got += p.payload_len
            frames.append(p.num)
        if got is None:
            r.complete = False
            continue
        r.length = got
        r.frames += frames
        r.last = max(r.frames)
        if got != r.dmalen:
            V.add("transport", r.frames[0], "%s: RDMA Read of %d bytes "
                  "answered with %d" % (d.name, r.dmalen, got))


# --------------------------------------------------------------------------
# SDP checks


def check_bsdh(d):
    """Each message on its own: MID, length, flags, size limits."""
    for m in d.msgs:
        where = "%s: %s" % (d.name, m.desc())
        if m.mid not in MIDS:
            V.add("bsdh", m.first, "%s: unknown MID 0x%02x" % (d.name, m.mid))
            continue
        name, size = MIDS[m.mid]
        if size == "cm":
            V.add("bsdh", m.first, "%s: %s after connection setup" % (d.name,
                                                                     name))
            continue
        if size is None:
            V.add("bsdh", m.first, "%s: %s, which sdp.ko does not speak (its "
                  "peer resets the connection)" % (where, name))
            continue
        if m.len != m.length:
            V.add("bsdh", m.first, "%s: BSDH len %d, the SEND is %d bytes"
                  % (where, m.len, m.length))
        if isinstance(size, int) and m.length != size:
            V.add("bsdh", m.first, "%s: %d bytes, %s is %d" % (
                where, m.length, name, size))
        elif isinstance(size, tuple) and m.length < size[0]:
            V.add("bsdh", m.first, "%s: %d bytes, %s is at least %d" % (
                where, m.length, name, size[0]))
        if m.mid == MID_SRC_AVAIL and m.length > 32:
            V.add("bsdh", m.first, "%s: SrcAvail with %d bytes of inline "
                  "payload (sdp.ko refuses them)" % (where, m.length - 32))
        rcv_size = receive_size_at(d, m.first)
        if rcv_size is not None and m.length > rcv_size:
            V.add("bsdh", m.first, "%s: %d bytes, the receiver's buffers hold "
                  "%d" % (where, m.length, rcv_size))
        check_resize(d, m, where)
        check_flags(d, m, where)
        if m.opcodes & {3, 5}:
            V.add("bsdh", m.first, "%s: SEND with immediate data" % where)
        if m.opcodes & {22, 23} and not (d.peer_caps & 0x01):
            V.add("bsdh", m.first, "%s: SEND with invalidate to a peer that "
                  "did not advertise INVALIDATE" % where)
        check_extra_header(d, m, where)


def receive_size_at(d, frame):
    """The receiver's buffer size a message of d starting at `frame` may
    fill: its Hello's or HelloAck's, then the size of each ChRcvBufAck that
    went by (the sender learns of it no earlier than the capture shows it),
    and no more than a ChRcvBuf of d's that asks for smaller buffers: every
    message after such a request fits the size it asks for."""
    if d.rcv_size is None:
        return None
    events = [(m.first, 0, ext_u32(m, 0)) for m in d.peer.msgs
              if m.mid == MID_CH_RCV_BUF_ACK and m.first < frame and
              len(m.ext) >= 4]
    events += [(m.first, 1, ext_u32(m, 0)) for m in d.msgs
               if m.mid == MID_CH_RCV_BUF and m.first < frame and
               len(m.ext) >= 4]
    size = d.rcv_size
    for _, asks, value in sorted(events):
        size = min(size, value) if asks else value
    return size


def check_resize(d, m, where):
    """ChRcvBuf only to a peer that announced it answers them; its answer
    only to a request."""
    if m.mid == MID_CH_RCV_BUF and not (d.peer_caps & CAP_RESIZE):
        V.add("bsdh", m.first, "%s: ChRcvBuf to a peer that did not announce "
              "CAP_RESIZE" % where)
    if m.mid == MID_CH_RCV_BUF_ACK and not any(
            p.mid == MID_CH_RCV_BUF and p.first < m.first
            for p in d.peer.msgs):
        V.add("bsdh", m.first, "%s: ChRcvBufAck that answers no ChRcvBuf"
              % where)


def check_flags(d, m, where):
    if m.flags & ~0x07:
        V.add("bsdh", m.first, "%s: undefined flag bits 0x%02x" % (
            where, m.flags & ~0x07))
    if m.flags & FLAG_REQ_PIPE:
        V.add("bsdh", m.first, "%s: REQ_PIPE (pipelined mode is never "
              "negotiated by sdp.ko)" % where)
    if m.flags & (FLAG_OOB_PRES | FLAG_OOB_PEND) and m.mid != MID_DATA:
        V.add("bsdh", m.first, "%s: urgent-data flags on a message without "
              "stream bytes" % where)
    if m.flags & FLAG_OOB_PRES and m.mid == MID_DATA and m.length <= BSDH:
        V.add("bsdh", m.first, "%s: OOB_PRES on a Data without payload"
              % where)


def ext_u32(m, off):
    return struct.unpack_from(">I", m.ext, off)[0]


def check_extra_header(d, m, where):
    if m.mid in (MID_SRC_AVAIL, MID_SINK_AVAIL) and len(m.ext) >= 16:
        length, rkey, va = struct.unpack_from(">IIQ", m.ext, 0)
        if length == 0 or length > ZC_MAX_LEN or va + length > 1 << 64:
            V.add("zcopy", m.first, "%s: offers %d bytes at 0x%x (0 < len <= "
                  "64 MiB, no wrap)" % (where, length, va))
    if m.mid in (MID_RD_COMPL, MID_WR_COMPL) and len(m.ext) >= 4:
        if ext_u32(m, 0) == 0:
            V.add("zcopy", m.first, "%s: completion of 0 bytes" % where)


def avail_times(msgs):
    """For message k of a direction, the frame by which messages 1..k had
    all been seen (a receiver takes them in order)."""
    out, t = {}, 0
    for m in msgs:
        t = max(t, m.last)
        out[m.mseq] = t
    return out


def check_sequence(d):
    """mseq, mseq_ack and credits of one direction against the other."""
    peer = d.peer
    expect = 1
    last_ack = 0
    seen_by = avail_times(peer.msgs)
    peer_max = peer.msgs[-1].mseq if peer.msgs else 0
    # Credits: message mseq m needs m <= mseq_ack + bufs of some message the
    # receiver had sent before (its Hello/HelloAck counts: mseq_ack 0).
    grants = [(d.hello_frame, d.hello_bufs)]
    for pm in peer.msgs:
        grants.append((pm.last, pm.ack + pm.bufs))
    grants.sort()
    gi, grant = 0, -1
    for m in d.msgs:
        if m.mseq != expect:
            V.add("sequence", m.first, "%s: %s, expected mseq %d" % (
                d.name, m.desc(), expect))
            expect = m.mseq
        expect += 1
        if m.ack < last_ack:
            V.add("sequence", m.first, "%s: %s acknowledges mseq %d after %d"
                  % (d.name, m.desc(), m.ack, last_ack))
        last_ack = max(last_ack, m.ack)
        if m.ack > peer_max:
            V.add("sequence", m.first, "%s: %s acknowledges mseq %d, the peer "
                  "sent up to %d" % (d.name, m.desc(), m.ack, peer_max))
        elif m.ack > 0 and seen_by.get(m.ack, 0) > m.first:
            V.add("sequence", m.first, "%s: %s acknowledges mseq %d before "
                  "it was complete on the wire (frame %d)" % (
                      d.name, m.desc(), m.ack, seen_by[m.ack]))
        while gi < len(grants) and grants[gi][0] < m.first:
            grant = max(grant, grants[gi][1])
            gi += 1
        if m.mseq > grant:
            V.add("sequence", m.first, "%s: %s exceeds the peer's credits "
                  "(grants up to mseq %d)" % (d.name, m.desc(), grant))
    check_disconn(d)


def check_disconn(d):
    """After its DisConn a side sends no stream bytes."""
    disconn = None
    for e in d.events:
        if isinstance(e, Msg):
            if e.mid == MID_DISCONN:
                if disconn is not None:
                    V.add("sequence", e.first, "%s: second DisConn (first mseq "
                          "%d)" % (d.name, disconn.mseq))
                disconn = disconn or e
                continue
            carries = (e.mid == MID_DATA and e.length > BSDH) or \
                e.mid in (MID_SRC_AVAIL, MID_WR_COMPL)
        else:
            carries = e.kind == "Write"
        if disconn is not None and carries:
            V.add("sequence", e.first, "%s: %s after its DisConn (mseq %d)"
                  % (d.name, e.desc(), disconn.mseq))


def next_ack_bound(events):
    """For each RDMA op: what its sender can have known of the peer's
    messages - at most what the next message it sends acknowledges."""
    bound, out = None, {}
    for e in reversed(events):
        if isinstance(e, Msg):
            bound = e.ack
        else:
            out[id(e)] = bound
    return out


def latest(items, pred):
    found = None
    for it in items:
        if pred(it):
            found = it
    return found


class Offer:
    """A SrcAvail or SinkAvail and what became of it."""

    def __init__(self, m):
        self.m = m
        self.len, self.rkey, self.va = struct.unpack_from(">IIQ", m.ext, 0)
        self.done = 0  # bytes read (SrcAvail) or written (SinkAvail)
        self.reported = 0  # bytes the completions reported
        self.closed_by = None  # mseq of the sink's message that ended it
        self.gave_up = False  # the sink's SendSM
        self.consumed = False  # RdmaWrCompl for a SinkAvail


def check_src_avail(src, sink):
    """SrcAvails from `src` (up to the sink's max_adverts outstanding, read
    in order), RDMA Reads and RdmaRdCompl/SendSM from `sink`."""
    offers = [Offer(m) for m in src.msgs if m.mid == MID_SRC_AVAIL and
              len(m.ext) >= 16]
    limit = getattr(sink, "max_adverts", 1)
    bounds = next_ack_bound(sink.events)
    for e in sink.events:
        if isinstance(e, RdmaOp):
            if e.kind != "Read":
                continue
            bound = bounds.get(id(e))
            o = latest(offers, lambda o: o.rkey == e.rkey and
                       (bound is None or o.m.mseq <= bound))
            if o is None:
                V.add("zcopy", e.first, "%s: %s matches no SrcAvail from the "
                      "peer" % (sink.name, e.desc()))
                continue
            e.offer = o
            where = "%s: %s of SrcAvail mseq %d" % (sink.name, e.desc(),
                                                  o.m.mseq)
            if o.gave_up:
                V.add("zcopy", e.first, "%s after the sink's SendSM" % where)
            elif o.closed_by is not None:
                V.add("zcopy", e.first, "%s after it was read in full" % where)
            # Offers are read in stream order: each earlier one still open
            # read to its end, none given up by a SendSM the source had
            # not seen when it offered this one (the source cancels such
            # offers; they are never read).
            for p in offers:
                if p is o or p.m.mseq > o.m.mseq:
                    continue
                if p.gave_up and p.closed_by > o.m.ack:
                    V.add("zcopy", e.first, "%s, offered across the sink's "
                          "SendSM mseq %d" % (where, p.closed_by))
                    break
                if p.closed_by is None and p.done < p.len:
                    V.add("zcopy", e.first, "%s before SrcAvail mseq %d, the "
                          "offer before it, was read" % (where, p.m.mseq))
                    break
            if e.va != o.va + o.done:
                V.add("zcopy", e.first, "%s: reads at 0x%x, the next unread "
                      "byte is at 0x%x" % (where, e.va, o.va + o.done))
            if e.va < o.va or e.va + e.dmalen > o.va + o.len:
                V.add("zcopy", e.first, "%s: outside the offered 0x%x+%d" % (
                    where, o.va, o.len))
            o.done += e.dmalen
            continue
        if e.mid not in (MID_RD_COMPL, MID_SEND_SM):
            continue
        # The offers the sink talks about: those it had received, oldest
        # first, not yet ended.
        opens = [o for o in offers if o.closed_by is None and
                 o.m.mseq <= e.ack]
        if e.mid == MID_SEND_SM:
            # Gives up every open offer (their bytes follow the first's
            # rest); one answering a cancel may find none open.
            for o in opens:
                if o.reported != o.done:
                    V.add("zcopy", e.first, "%s: SendSM before reporting all "
                          "bytes read of SrcAvail mseq %d (read %d, reported "
                          "%d)" % (sink.name, o.m.mseq, o.done, o.reported))
                o.gave_up = True
                o.closed_by = e.mseq
            continue
        n = ext_u32(e, 0) if len(e.ext) >= 4 else 0
        where = "%s: %s (%d bytes)" % (sink.name, e.desc(), n)
        if not opens:
            o = latest(offers, lambda o: o.m.mseq <= e.ack)
            if o is not None and o.gave_up:
                V.add("zcopy", e.first, "%s after its SendSM gave SrcAvail "
                      "mseq %d up" % (where, o.m.mseq))
            else:
                V.add("zcopy", e.first, "%s without an outstanding SrcAvail"
                      % where)
            continue
        # One RdmaRdCompl may report the bytes of several offers: the
        # source applies them in order, the last one taking the rest.
        left = n
        for o in opens:
            take = left if o is opens[-1] else min(left, o.len - o.reported)
            if take == 0:
                break
            if o.reported + take > o.done:
                V.add("zcopy", e.first, "%s: reports %d bytes of SrcAvail "
                      "mseq %d, RDMA Read moved %d" % (
                          where, o.reported + take, o.m.mseq, o.done))
            o.reported += take
            left -= take
            if o.reported >= o.len:
                o.closed_by = e.mseq
    # The source: nothing overtakes the bytes of its outstanding SrcAvails,
    # and no more of them than the sink accepts.
    bounds = next_ack_bound(src.events)
    src.most_offers = 0
    for e in src.events:
        if isinstance(e, Msg):
            blocked = (e.mid == MID_DATA and e.length > BSDH) or \
                e.mid in (MID_SRC_AVAIL, MID_DISCONN)
            known = e.ack
        else:
            blocked = e.kind == "Write"
            known = bounds.get(id(e))
        if not blocked:
            continue
        # The source's SrcAvails before this message or Write (both in its
        # own stream, so PSN order is sending order) that it did not know
        # ended.
        out = [o for o in offers if o.m.psn < e.psn and
               (o.closed_by is None or
                (known is not None and o.closed_by > known))]
        if isinstance(e, Msg) and e.mid == MID_SRC_AVAIL:
            src.most_offers = max(src.most_offers, len(out) + 1)
            if len(out) >= limit:
                V.add("zcopy", e.first, "%s: SrcAvail mseq %d while SrcAvail "
                      "mseq %d is outstanding (%d at once, the peer accepts "
                      "%d)" % (src.name, e.mseq, out[-1].m.mseq,
                               len(out) + 1, limit))
        elif out:
            V.add("zcopy", e.first, "%s: %s while its SrcAvail mseq %d is "
                  "outstanding" % (src.name, e.desc(), out[-1].m.mseq))
    src.zc_read = sum(o.done for o in offers)


def check_sink_avail(sink, src):
    """SinkAvail from `sink`; RDMA Write and RdmaWrCompl from `src`."""
    adverts = [Offer(m) for m in sink.msgs if m.mid == MID_SINK_AVAIL and
               len(m.ext) >= 16]
    enders = lambda m: (m.mid == MID_DATA and m.length > BSDH) or m.mid in (
        MID_SRC_AVAIL, MID_DISCONN, MID_WR_COMPL, MID_SINK_CANCEL_ACK)
    # One receive's advertisements at a time: the previous one ended by a
    # message of the source that the sink had received when it advertised
    # again, or the next piece of the same buffer (sent with it, nothing
    # of the source's received between: the same mseq_ack), no more than
    # the source accepts.
    limit = getattr(src, "max_adverts", 1)
    group = 1
    sink.most_pieces = 1 if adverts else 0
    for a1, a2 in zip(adverts, adverts[1:]):
        a2.prev = a1
        if any(a1.m.ack < m.mseq <= a2.m.ack and enders(m) for m in src.msgs):
            group = 1
            continue
        group += 1
        if a2.m.ack != a1.m.ack or group > limit:
            V.add("zcopy", a2.m.first, "%s: SinkAvail mseq %d while SinkAvail "
                  "mseq %d is outstanding (%d of one receive, the peer "
                  "accepts %d)" % (sink.name, a2.m.mseq, a1.m.mseq, group,
                                   limit))
        else:
            a2.piece_of = a1
            sink.most_pieces = max(sink.most_pieces, group)
    for a in adverts:
        dis = latest(src.msgs, lambda m: m.mid == MID_DISCONN)
        if dis is not None and dis.mseq <= a.m.ack:
            V.add("zcopy", a.m.first, "%s: SinkAvail mseq %d after the peer's "
                  "DisConn" % (sink.name, a.m.mseq))
    bounds = next_ack_bound(src.events)
    last_data = 0  # mseq of the source's last message carrying stream bytes
    filled = None  # ... if that was the RdmaWrCompl filling a SinkAvail
    writes = []  # RDMA Writes not yet reported by an RdmaWrCompl
    for e in src.events:
        if isinstance(e, RdmaOp):
            if e.kind != "Write":
                continue
            bound = bounds.get(id(e))
            a = latest(adverts, lambda a: a.rkey == e.rkey and
                       (bound is None or a.m.mseq <= bound))
            if a is None:
                V.add("zcopy", e.first, "%s: %s matches no SinkAvail from the "
                      "peer" % (src.name, e.desc()))
                continue
            e.offer = a
            where = "%s: %s into SinkAvail mseq %d" % (src.name, e.desc(),
                                                     a.m.mseq)
            if a.consumed:
                V.add("zcopy", e.first, "%s after its RdmaWrCompl" % where)
            # The next piece of a buffer whose piece before it the source
            # filled may be written although the sink advertised it
            # before it knew.
            piece_ok = filled is not None and \
                getattr(a, "piece_of", None) is filled and a.done == 0
            if last_data > a.m.ack and not piece_ok:
                V.add("zcopy", e.first, "%s, advertised before the sink had "
                      "the stream bytes of mseq %d" % (where, last_data))
            prev = getattr(a, "piece_of", None)
            if prev is not None and prev.done != prev.len and a.done == 0:
                V.add("zcopy", e.first, "%s before SinkAvail mseq %d, the "
                      "piece before it, was filled" % (where, prev.m.mseq))
            if e.va != a.va + a.done:
                V.add("zcopy", e.first, "%s: writes at 0x%x, the next free "
                      "byte is at 0x%x" % (where, e.va, a.va + a.done))
            if e.va < a.va or e.va + e.dmalen > a.va + a.len:
                V.add("zcopy", e.first, "%s: outside the advertised 0x%x+%d"
                      % (where, a.va, a.len))
            a.done += e.length
            writes.append(e)
            continue
        if e.mid == MID_WR_COMPL:
            n = ext_u32(e, 0) if len(e.ext) >= 4 else 0
            written = sum(w.length for w in writes)
            if not writes:
                V.add("zcopy", e.first, "%s: %s (%d bytes) without an RDMA "
                      "Write" % (src.name, e.desc(), n))
            elif n != written:
                V.add("zcopy", e.first, "%s: %s reports %d bytes, RDMA Write "
                      "moved %d" % (src.name, e.desc(), n, written))
            for w in writes:
                if w.offer is not writes[0].offer:
                    V.add("zcopy", w.first, "%s: one RdmaWrCompl for writes "
                          "into two SinkAvails" % src.name)
                w.offer.consumed = True
            last_data = e.mseq
            filled = writes[0].offer if writes and \
                writes[0].offer.done == writes[0].offer.len else None
            writes = []
        elif (e.mid == MID_DATA and e.length > BSDH) or e.mid == MID_SRC_AVAIL:
            if writes:
                V.add("zcopy", e.first, "%s: %s before the RdmaWrCompl of the "
                      "RDMA Write in frame %d" % (src.name, e.desc(),
                                                  writes[0].first))
            last_data = e.mseq
            filled = None
    src.zc_write = sum(a.done for a in adverts)


def check_cancels(src, sink):
    """`src`'s SrcAvailCancels, answered by `sink`'s SendSM, and `sink`'s
    SinkAvailCancels, answered by `src`'s SinkCancelAck."""
    # A SrcAvailCancel is answered with SendSM (after the RdmaRdCompl of a
    # read in progress); the source sends no stream bytes before it has
    # that answer.
    bounds = next_ack_bound(src.events)
    send_sms = [m for m in sink.msgs if m.mid == MID_SEND_SM]
    for c in (m for m in src.msgs if m.mid == MID_SRC_CANCEL):
        if not any(m.mid == MID_SRC_AVAIL and m.psn < c.psn
                   for m in src.msgs):
            V.add("zcopy", c.first, "%s: %s without a SrcAvail before it"
                  % (src.name, c.desc()))
            continue
        answer = next((m for m in send_sms if m.ack >= c.mseq), None)
        if answer is None:
            if any(m.ack >= c.mseq for m in sink.msgs):
                V.add("zcopy", c.first, "%s: %s never answered with SendSM"
                      % (src.name, c.desc()))
            continue
        for e in src.events:
            if e.psn <= c.psn:
                continue
            if isinstance(e, Msg):
                carries = (e.mid == MID_DATA and e.length > BSDH) or \
                    e.mid == MID_SRC_AVAIL
                known = e.ack
            else:
                carries = e.kind == "Write"
                known = bounds.get(id(e))
            if known is not None and known >= answer.mseq:
                break
            if carries:
                V.add("zcopy", e.first, "%s: %s before the SendSM answering "
                      "its %s" % (src.name, e.desc(), c.desc()))
                break
    # A SinkAvailCancel is answered with SinkCancelAck (after the
    # RdmaWrCompl of a write in progress), unless the source sent DisConn;
    # the sink advertises again only once it has the answer.
    cancels = [m for m in sink.msgs if m.mid == MID_SINK_CANCEL]
    acks = [m for m in src.msgs if m.mid == MID_SINK_CANCEL_ACK]
    for i, a in enumerate(acks):
        if i >= len(cancels) or a.ack < cancels[i].mseq:
            V.add("zcopy", a.first, "%s: %s answers no SinkAvailCancel"
                  % (src.name, a.desc()))
            break
    src_dis = any(m.mid == MID_DISCONN for m in src.msgs)
    for i, c in enumerate(cancels):
        answer = acks[i] if i < len(acks) else None
        if answer is None:
            if not src_dis and any(m.ack >= c.mseq for m in src.msgs):
                V.add("zcopy", c.first, "%s: %s never answered with "
                      "SinkCancelAck" % (sink.name, c.desc()))
            continue
        nxt = next((m for m in sink.msgs if m.mid == MID_SINK_AVAIL and
                    m.psn > c.psn), None)
        if nxt is not None and nxt.ack < answer.mseq:
            V.add("zcopy", nxt.first, "%s: %s before the SinkCancelAck "
                  "answering its %s" % (sink.name, nxt.desc(), c.desc()))


# --------------------------------------------------------------------------
# tshark's view: Malformed frames and the decoders' agreement


def triage_malformed(frames, sdp_frames, flagged):
    """Each frame tshark marks Malformed: a known quirk (Q1-Q3) or a
    violation.  sdp_frames: frame -> (Pkt, Msg or None, is_first)."""
    quirks = defaultdict(list)
    for f in frames:
        if not f.malformed:
            continue
        info = sdp_frames.get(f.num)
        bad_msg = flagged.get(f.num)
        text = f.malformed.split(",")[0].strip("[]")
        if info is None:
            V.add("malformed", f.num, "tshark: %s (not a packet of an SDP "
                  "connection)" % text)
            continue
        p, m, is_first = info
        if bad_msg:
            # Already a violation of ours: tshark agrees.
            continue
        if "RPCoRDMA" in text or "rpcordma" in f.protocols:
            quirks["Q1"].append(f.num)
        elif "SDP" in text and m is not None and is_first and \
                m.mid == MID_DATA and m.len == BSDH == m.length:
            quirks["Q2"].append(f.num)
        elif "SDP" in text and p.opcode not in SEND_FIRST | SEND_ONLY:
            quirks["Q3"].append(f.num)
        else:
            V.add("malformed", f.num, "tshark: %s; no known quirk explains it "
                  "(this script finds the message sane: look at the bytes)"
                  % text)
    return quirks


def cross_check(p, m):
    """tshark's BTH/RETH and, on Send First/Only, BSDH fields against ours."""
    f = p.f
    for field, mine in (("infiniband.bth.opcode", p.opcode),
                        ("infiniband.bth.destqp", p.destqp),
                        ("infiniband.bth.psn", p.psn)):
        theirs = ts_int(f, field)
        if theirs is not None and theirs != mine:
            V.add("decoder", f.num, "%s: tshark %d, this script %d"
                  % (field, theirs, mine))
    if p.reth is not None:
        for field, mine in zip(("infiniband.reth.va", "infiniband.reth.r_key",
                                "infiniband.reth.dmalen"), p.reth):
            theirs = ts_int(f, field)
            if theirs is not None and theirs != mine:
                V.add("decoder", f.num, "%s: tshark 0x%x, this script 0x%x"
                      % (field, theirs, mine))
    if m is not None and "rpcordma" not in f.protocols:
        cross_check_bsdh(f, {"mid": m.mid, "flags": m.flags, "bufs": m.bufs,
                             "len": m.len, "mseq": m.mseq, "ack": m.ack})


def cross_check_bsdh(f, h):
    """tshark's BSDH fields (where its SDP dissector ran) against ours."""
    if "infiniband_sdp.bsdh.mid" not in f.ts:
        return
    for field, mine in (("mid", h["mid"]), ("flags", h["flags"]),
                        ("bufs", h["bufs"]), ("len", h["len"]),
                        ("mseq", h["mseq"]), ("mseqack", h["ack"])):
        theirs = ts_int(f, "infiniband_sdp.bsdh." + field)
        if theirs is not None and theirs != mine:
            V.add("decoder", f.num, "BSDH %s: tshark %d, this script %d"
                  % (field, theirs, mine))


# --------------------------------------------------------------------------
# Putting it together


def assign_packets(conns, pkts):
    """RC packets to their connection and direction, by destination address
    and QP; a QP number is reused by a later connection only after its CM
    exchange, so the latest connection set up before the packet wins."""
    stray = defaultdict(list)
    for c in conns:
        if c.rep is None:
            continue
        c.dirs["c2s"] = Dir(c, "conn %d client->server" % c.idx, c.client,
                            c.server, c.server_qpn)
        c.dirs["s2c"] = Dir(c, "conn %d server->client" % c.idx, c.server,
                            c.client, c.client_qpn)
        c2s, s2c = c.dirs["c2s"], c.dirs["s2c"]
        c2s.peer, s2c.peer = s2c, c2s
        c2s.rcv_size = c.hello_ack["actrcvsz"] if c.hello_ack else None
        s2c.rcv_size = c.hello["localrcvsz"] if c.hello else None
        c2s.hello_bufs = c.hello_ack["bufs"] if c.hello_ack else 0
        s2c.hello_bufs = c.hello["bufs"] if c.hello else 0
        # Each direction's first grant is the receiver's Hello (in the REQ)
        # or HelloAck (in the REP).
        s2c.hello_frame, c2s.hello_frame = c.req.num, c.rep.num
        c2s.peer_caps = c.hello_ack["caps"] if c.hello_ack else 0
        s2c.peer_caps = c.hello["caps"] if c.hello else 0
        # The advertisements each direction's sender accepts outstanding
        # (its Hello max_adverts, its HelloAck ext_max_adverts; 0 there
        # means 1).
        c2s.max_adverts = c.hello["max_adverts"] if c.hello else 1
        s2c.max_adverts = max(c.hello_ack["ext_max_adverts"], 1) \
            if c.hello_ack else 1
    index = defaultdict(list)
    for c in conns:
        for d in c.dirs.values():
            index[(d.receiver, d.dest_qpn)].append(d)
    sdp = {}
    for p in pkts:
        if p.opcode >= 0x20:
            continue
        cands = [d for d in index.get((p.f.dst, p.destqp), [])
                 if d.conn.rep.num < p.num]
        if not cands:
            stray[(p.f.src, p.f.dst, p.destqp)].append(p.num)
            continue
        d = cands[-1]
        d.packets += 1
        if p.opcode in RESPONSES:
            d.responses.append(p)
        else:
            d.requests.append(p)
        sdp[p.num] = p
    for (src, dst, qp), nums in stray.items():
        V.add("cm", nums[0], "%d RC packets %s -> %s QP 0x%x (frames %d-%d) "
              "belong to no connection set up in the capture"
              % (len(nums), src, dst, qp, nums[0], nums[-1]))
    return sdp


def check_conn(c):
    check_cm_exchange(c)
    if not c.dirs:
        return
    c2s, s2c = c.dirs["c2s"], c.dirs["s2c"]
    # As Linux's CM sets the QPs up: the client sends from the REP's
    # starting PSN, the server from the REQ's.
    anchors = {"c2s": c.rep_psn, "s2c": c.req_psn}
    for key, d in c.dirs.items():
        reqs = order_requests(d, anchors[key])
        if reqs and reqs[0].psn != anchors[key]:
            V.add("transport", reqs[0].num, "%s: first request PSN 0x%06x, "
                  "the CM set up 0x%06x" % (d.name, reqs[0].psn, anchors[key]))
        build_events(d, reqs)
    # Responses travel in the other direction, in the requester's PSN space.
    responses = {"c2s": order_responses(c2s, anchors["s2c"]),
                 "s2c": order_responses(s2c, anchors["c2s"])}
    match_read_responses(c2s, responses["s2c"])
    match_read_responses(s2c, responses["c2s"])
    for d in (c2s, s2c):
        # A Read still unanswered at the end was cut off by the capture.
        while d.events and not d.events[-1].complete:
            d.events.pop()
            d.incomplete += 1
        d.msgs = [e for e in d.events if isinstance(e, Msg) and
                  hasattr(e, "mid")]
    # The first packets of each side follow the CM exchange.
    first_c = min((p.num for p in c2s.requests), default=None)
    first_s = min((p.num for p in s2c.requests), default=None)
    if first_s is not None and c.rtu is not None and \
            first_s < min(c.rtu.num, first_c or c.rtu.num):
        V.add("cm", first_s, "conn %d: the server sends before the RTU and "
              "before any packet of the client" % c.idx)
    for d in (c2s, s2c):
        check_bsdh(d)
        check_sequence(d)
    check_src_avail(c2s, s2c)
    check_src_avail(s2c, c2s)
    check_sink_avail(s2c, c2s)
    check_sink_avail(c2s, s2c)
    check_cancels(c2s, s2c)
    check_cancels(s2c, c2s)


def event_text(e):
    """One decoded SDP message or RDMA operation, for --dump."""
    if isinstance(e, RdmaOp):
        s = e.desc()
        if e.kind == "Read":
            s += " answered with %d" % e.length
        return s
    s = "%-14s mseq %d ack %d bufs %d len %d" % (mid_name(e.mid), e.mseq,
                                                e.ack, e.bufs, e.len)
    if e.flags:
        s += " flags 0x%02x" % e.flags
    if e.mid in (MID_SRC_AVAIL, MID_SINK_AVAIL) and len(e.ext) >= 16:
        s += " (%d bytes, rkey 0x%x, va 0x%x)" % struct.unpack_from(
            ">IIQ", e.ext, 0)
    elif e.mid in (MID_RD_COMPL, MID_WR_COMPL) and len(e.ext) >= 4:
        s += " (%d bytes)" % ext_u32(e, 0)
    return s


def dump(conns):
    """Every message and RDMA operation, in the order each side sent them
    (by first frame)."""
    out = []
    for c in conns:
        out.append("connection %d: %s" % (c.idx, c.label()))
        events = [(e.first, d.name.split(" ", 2)[2], e)
                  for d in c.dirs.values() for e in d.events
                  if not isinstance(e, Msg) or hasattr(e, "mid")]
        for first, name, e in sorted(events, key=lambda t: t[0]):
            out.append("  %6d %-14s %s" % (first, name, event_text(e)))
    return out


def fmt_counts(counter):
    return ", ".join("%s %d" % (k, v) for k, v in sorted(counter.items())) \
        or "none"


def summarize(capture, nframes, conns, quirks, expect_zcopy,
              expect_offers=0):
    out = []
    w = out.append
    w("wire-check: %s: %d RoCEv2 frames, %d SDP connection(s)"
      % (capture, nframes, len(conns)))
    zc_total = most_offers = 0
    for c in conns:
        w("")
        w("connection %d: %s, IPv%d, QP 0x%x -> 0x%x, MTU %d" % (
            c.idx, c.label(), c.ipv, c.client_qpn or 0, c.server_qpn or 0,
            c.mtu))
        cm = ["REQ %d" % c.req.num]
        if c.hello:
            h = c.hello
            cm[0] += " (Hello v%d.%d bufs %d rcvsz %d/%d max_adverts %d)" % (
                h["majv"] >> 4, h["majv"] & 15, h["bufs"], h["localrcvsz"],
                h["desremrcvsz"], h["max_adverts"])
        if c.rep:
            s = "REP %d" % c.rep.num
            if c.hello_ack:
                h = c.hello_ack
                s += " (HelloAck v%d.%d bufs %d rcvsz %d)" % (
                    h["majv"] >> 4, h["majv"] & 15, h["bufs"], h["actrcvsz"])
            cm.append(s)
        if c.rtu:
            cm.append("RTU %d" % c.rtu.num)
        cm += ["%s %d" % (k, n) for n, k in c.cm_events]
        if c.cm_repeats:
            cm.append("%d repeated MAD(s)" % c.cm_repeats)
        w("  CM: " + ", ".join(cm))
        for d in c.dirs.values():
            mids = Counter(mid_name(m.mid) for m in d.msgs)
            data = sum(m.length - BSDH for m in d.msgs
                       if m.mid == MID_DATA and m.length > BSDH)
            zr, zw = getattr(d, "zc_read", 0), getattr(d, "zc_write", 0)
            zc_total += zr + zw
            w("  %s: %d packets, %d messages (%s)" % (
                d.name.split(" ", 2)[2], d.packets, len(d.msgs),
                fmt_counts(mids)))
            w("    stream bytes: Data %d, RDMA Read %d, RDMA Write %d; "
              "retransmissions dropped %d%s%s" % (
                  data, zr, zw, d.repeats,
                  "; NAKs: " + fmt_counts(d.naks) if d.naks else "",
                  "; %d cut off at the end" % d.incomplete
                  if d.incomplete else ""))
            most = getattr(d, "most_offers", 0)
            pieces = getattr(d, "most_pieces", 0)
            most_offers = max(most_offers, most)
            at_once = (["up to %d SrcAvail(s) outstanding" % most] if most
                       else []) + (["up to %d SinkAvail(s) of one receive"
                                    % pieces] if pieces else [])
            if at_once:
                w("    at once: " + ", ".join(at_once))
    if most_offers < expect_offers:
        V.add("zcopy", 0, "--expect-offers %d: no connection had more than %d "
              "SrcAvail(s) outstanding at once" % (expect_offers, most_offers))
    if expect_zcopy and zc_total == 0:
        V.add("zcopy", 0, "--expect-zcopy: no connection moved a byte by RDMA "
              "Read or Write")
    if quirks:
        w("")
        w("tshark quirks (explained, not violations; see the script's header):")
        names = {"Q1": "RPC-over-RDMA heuristic claims an SDP SEND",
                 "Q2": "16-byte Data (credit update) marked Malformed",
                 "Q3": "packet without a BSDH decoded as one"}
        for q in sorted(quirks):
            nums = quirks[q]
            w("  %s %s: %d frame(s): %s%s" % (
                q, names[q], len(nums), " ".join(map(str, nums[:12])),
                " ..." if len(nums) > 12 else ""))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--report", metavar="FILE",
                    help="write the summary and every violation to FILE")
    ap.add_argument("--expect-zcopy", action="store_true",
                    help="fail unless some connection used RDMA Read/Write")
    ap.add_argument("--expect-offers", metavar="N", type=int, default=0,
                    help="fail unless some connection had N SrcAvails "
                    "outstanding at once")
    ap.add_argument("--dump", action="store_true",
                    help="list every SDP message and RDMA operation")
    args = ap.parse_args()

    frames = run_tshark(args.capture)
    pkts = []
    for f in frames:
        ok = icrc_ok(f)
        if ok is False:
            # The receiver drops such a packet; the sender repeats it.
            V.add("transport", f.num, "bad ICRC")
            continue
        p = parse_pkt(f)
        if p is not None:
            pkts.append(p)
    conns, by_comm = [], {}
    for p in pkts:
        if p.opcode in (UD_SEND_ONLY, UD_SEND_ONLY_IMM) and p.destqp == CM_QP:
            handle_cm(conns, by_comm, p)
    if not conns:
        V.add("cm", 0, "no SDP connection (CM REQ) in the capture")
    sdp = assign_packets(conns, pkts)
    for c in conns:
        check_conn(c)

    # Which frame carries which message, for the cross-checks and triage.
    info, flagged = {}, {}
    bad_frames = {fr for check, fr, _ in V.items if check in
                  ("bsdh", "transport")}
    for c in conns:
        for d in c.dirs.values():
            for m in d.msgs:
                for i, num in enumerate(m.frames):
                    info[num] = (sdp[num], m, i == 0)
                if m.first in bad_frames:
                    flagged.update((n, True) for n in m.frames)
    # A retransmission carries its original's bytes (order_requests()
    # checks it), so tshark's view of it is triaged as the original's.
    for c in conns:
        for d in c.dirs.values():
            for num, orig in d.repeat_of.items():
                if orig in info and num in sdp:
                    info[num] = (sdp[num],) + info[orig][1:]
    for num, p in sdp.items():
        info.setdefault(num, (p, None, False))
        cross_check(p, info[num][1] if info[num][2] else None)
    for p in pkts:
        if p.opcode in (UD_SEND_ONLY, UD_SEND_ONLY_IMM):
            info.setdefault(p.num, (p, None, True))
    quirks = triage_malformed(frames, info, flagged)

    if args.dump:
        print("\n".join(dump(conns)))
        print()
    lines = summarize(args.capture, len(frames), conns, quirks,
                      args.expect_zcopy, args.expect_offers)
    by_check = V.by_check()
    full = list(lines)
    short = list(lines)
    if by_check:
        for out, limit in ((short, 20), (full, None)):
            out.append("")
            out.append("VIOLATIONS: %d" % len(V.items))
            for check in sorted(by_check):
                items = sorted(by_check[check])
                out.append("  %s (%d):" % (check, len(items)))
                for frame, text in items[:limit]:
                    out.append("    frame %d: %s" % (frame, text)
                               if frame else "    " + text)
                if limit and len(items) > limit:
                    out.append("    ... %d more (--report FILE lists all)"
                               % (len(items) - limit))
    verdict = "wire-check: %s" % ("FAIL" if by_check else "PASS")
    short.append(verdict)
    full.append(verdict)
    print("\n".join(short))
    if args.report:
        with open(args.report, "w") as fh:
            fh.write("\n".join(full) + "\n")
    return 1 if by_check else 0


if __name__ == "__main__":
    sys.exit(main())
