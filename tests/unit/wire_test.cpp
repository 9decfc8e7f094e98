// SPDX-License-Identifier: GPL-2.0
//
// Unit tests for the SDP wire codec (kernel/core/wire.{h,cpp}).
//
// The golden vectors are written out by hand, field by field, from the layout
// (include/sdp_wire.h; BSDH = mid u8, flags u8, bufs u16, len u32, mseq u32,
// mseq_ack u32, all big-endian, then the per-message extra header).  They are
// never produced by the encoder: a test comparing the encoder with its own
// output could not catch a layout mistake made the same way in both
// directions.
//
// Every decode runs on an exactly sized heap copy of its input, so that under
// ASan a read one byte past `size` fails the test instead of reading a
// neighbouring stack or vector byte.
#include "wire.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace sdp::wire {
// Readable failure messages: gtest would print these enums as raw bytes.
std::ostream& operator<<(std::ostream& os, DecodeError e)
{
    return os << decode_error_name(e) << " (" << static_cast<int>(e) << ")";
}
std::ostream& operator<<(std::ostream& os, EncodeError e)
{
    static const char* const kNames[] = {"ok", "no room", "too long", "not encodable", "bad field"};
    const auto i = static_cast<unsigned>(e);
    return os << (i < 5 ? kNames[i] : "?") << " (" << i << ")";
}
std::ostream& operator<<(std::ostream& os, Mid mid)
{
    const auto v = static_cast<u8>(mid);
    return os << mid_name(v) << " (0x" << std::hex << static_cast<int>(v) << std::dec << ")";
}
} // namespace sdp::wire

namespace {

using sdp::u16;
using sdp::u32;
using sdp::u64;
using sdp::u8;
using sdp::usize;
using namespace sdp::wire;

using Bytes = std::vector<u8>;

// An exactly sized heap copy: ASan reports any access outside [0, size).
class HeapCopy {
  public:
    HeapCopy() = default;
    explicit HeapCopy(const Bytes& b) : size_(b.size()), data_(new u8[b.size()])
    {
        if (size_ != 0)
            std::memcpy(data_.get(), b.data(), size_);
    }
    const u8* data() const { return data_.get(); }
    usize size() const { return size_; }

  private:
    usize size_ = 0;
    std::unique_ptr<u8[]> data_;
};

std::string Hex(const u8* p, usize n)
{
    std::string s;
    char tmp[4];
    for (usize i = 0; i < n; i++) {
        std::snprintf(tmp, sizeof(tmp), "%02x%s", p[i], (i % 16 == 15) ? "\n" : " ");
        s += tmp;
    }
    return s;
}
std::string Hex(const Bytes& b)
{
    return Hex(b.data(), b.size());
}

Message MakeMsg(Mid mid, u8 flags, u16 bufs, u32 len, u32 mseq, u32 mseq_ack)
{
    Message m{};
    m.bsdh.mid = mid;
    m.bsdh.flags = flags;
    m.bsdh.bufs = bufs;
    m.bsdh.len = len;
    m.bsdh.mseq = mseq;
    m.bsdh.mseq_ack = mseq_ack;
    return m;
}

// ---------------------------------------------------------------------------
// Golden vectors.  Each BSDH uses distinct mseq/mseq_ack/bufs values so that
// swapped fields cannot cancel out.
// ---------------------------------------------------------------------------

// Hello, modern layout: what fits in the 56 bytes of CM REQ private data left
// after the CM's own header; the IP addresses travel in that header.
const Bytes kHelloModern = {
    0x00,                   // mid: Hello
    0x00,                   // flags
    0x00, 0x40,             // bufs: 64
    0x00, 0x00, 0x00, 0x20, // len: 32 (BSDH 16 + HH up to the port 16)
    0x00, 0x00, 0x00, 0x00, // mseq: 0, the Hello counts as mseq 0
    0x00, 0x00, 0x00, 0x00, // mseq_ack: 0
    0x22,                   // majv_minv: 2.2
    0x41,                   // ipv_cap: IPv4 in the high nibble, caps INVALIDATE
    0x00,                   // reserved
    0x04,                   // max_adverts: 4
    0x00, 0x00, 0x80, 0x00, // desremrcvsz: 32768
    0x00, 0x01, 0x00, 0x00, // localrcvsz: 65536
    0x13, 0x89,             // local port: 5001
    0x00, 0x00,             // reserved
};
Message HelloModernFields()
{
    Message m = MakeMsg(Mid::kHello, 0, 64, 32, 0, 0);
    m.hello.major = 2;
    m.hello.minor = 2;
    m.hello.ip_version = IpVersion::kV4;
    m.hello.caps = SDP_CAP_INVALIDATE;
    m.hello.max_adverts = 4;
    m.hello.desired_remote_rcv_size = 32768;
    m.hello.local_rcv_size = 65536;
    m.hello.local_port = 5001;
    m.hello.has_addresses = false;
    return m;
}

// Hello, historical 64-byte layout with IPv4 addresses.
const Bytes kHelloFullV4 = {
    0x00,                   // mid: Hello
    0x00,                   // flags
    0x00, 0x20,             // bufs: 32
    0x00, 0x00, 0x00, 0x40, // len: 64 (BSDH 16 + HH 16 + two 16-byte addresses)
    0x00, 0x00, 0x00, 0x00, // mseq: 0
    0x00, 0x00, 0x00, 0x00, // mseq_ack: 0
    0x22,                   // majv_minv: 2.2
    0x43,                   // ipv_cap: IPv4, caps INVALIDATE | EXT_MAX_ADVERTS
    0x00,                   // reserved
    0x08,                   // max_adverts: 8
    0x00, 0x00, 0x40, 0x00, // desremrcvsz: 16384
    0x00, 0x00, 0x20, 0x00, // localrcvsz: 8192
    0xc3, 0x50,             // local port: 50000
    0x00, 0x00,             // reserved
    // source IP 192.168.1.10: IPv4 sits in the last four bytes
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x0a, //
    // destination IP 192.168.1.20
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x14, //
};
Message HelloFullV4Fields()
{
    Message m = MakeMsg(Mid::kHello, 0, 32, 64, 0, 0);
    m.hello.major = 2;
    m.hello.minor = 2;
    m.hello.ip_version = IpVersion::kV4;
    m.hello.caps = SDP_CAP_INVALIDATE | SDP_CAP_EXT_MAX_ADVERTS;
    m.hello.max_adverts = 8;
    m.hello.desired_remote_rcv_size = 16384;
    m.hello.local_rcv_size = 8192;
    m.hello.local_port = 50000;
    m.hello.has_addresses = true;
    const u8 src[4] = {192, 168, 1, 10};
    const u8 dst[4] = {192, 168, 1, 20};
    std::memcpy(m.hello.src_addr + 12, src, 4);
    std::memcpy(m.hello.dst_addr + 12, dst, 4);
    return m;
}

// Hello, historical 64-byte layout with IPv6 addresses.
const Bytes kHelloFullV6 = {
    0x00,                   // mid: Hello
    0x04,                   // flags: REQ_PIPE
    0x00, 0x10,             // bufs: 16
    0x00, 0x00, 0x00, 0x40, // len: 64
    0x00, 0x00, 0x00, 0x00, // mseq: 0
    0x00, 0x00, 0x00, 0x00, // mseq_ack: 0
    0x23,                   // majv_minv: 2.3 (any minor is accepted)
    0x60,                   // ipv_cap: IPv6, no caps
    0x00,                   // reserved
    0x01,                   // max_adverts: 1
    0x00, 0x02, 0x00, 0x00, // desremrcvsz: 131072
    0x00, 0x00, 0x10, 0x00, // localrcvsz: 4096
    0x00, 0x16,             // local port: 22
    0x00, 0x00,             // reserved
    // source IP fe80::1
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
    // destination IP 2001:db8::2
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
};
Message HelloFullV6Fields()
{
    Message m = MakeMsg(Mid::kHello, SDP_FLAG_REQ_PIPE, 16, 64, 0, 0);
    m.hello.major = 2;
    m.hello.minor = 3;
    m.hello.ip_version = IpVersion::kV6;
    m.hello.caps = 0;
    m.hello.max_adverts = 1;
    m.hello.desired_remote_rcv_size = 131072;
    m.hello.local_rcv_size = 4096;
    m.hello.local_port = 22;
    m.hello.has_addresses = true;
    const u8 src[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
    const u8 dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};
    std::memcpy(m.hello.src_addr, src, 16);
    std::memcpy(m.hello.dst_addr, dst, 16);
    return m;
}

const Bytes kHelloAck = {
    0x01,                   // mid: HelloAck
    0x00,                   // flags
    0x00, 0x3f,             // bufs: 63
    0x00, 0x00, 0x00, 0x18, // len: 24 (BSDH 16 + HAH 8)
    0x00, 0x00, 0x00, 0x00, // mseq: 0
    0x00, 0x00, 0x00, 0x00, // mseq_ack: 0
    0x21,                   // majv_minv: 2.1
    0x61,                   // ipv_cap: IPv6, caps INVALIDATE
    0x00,                   // reserved
    0x05,                   // ext_max_adverts: 5
    0x00, 0x00, 0xc0, 0x00, // actrcvsz: 49152
};
Message HelloAckFields()
{
    Message m = MakeMsg(Mid::kHelloAck, 0, 63, 24, 0, 0);
    m.hello_ack.major = 2;
    m.hello_ack.minor = 1;
    m.hello_ack.ip_version = 6;
    m.hello_ack.caps = SDP_CAP_INVALIDATE;
    m.hello_ack.ext_max_adverts = 5;
    m.hello_ack.actual_rcv_size = 49152;
    return m;
}

const Bytes kDisConn = {
    0x02,                   // mid: DisConn
    0x00,                   // flags
    0x00, 0x05,             // bufs: 5
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x00, 0x2a, // mseq: 42
    0x00, 0x00, 0x00, 0x29, // mseq_ack: 41
};
Message DisConnFields()
{
    return MakeMsg(Mid::kDisConn, 0, 5, 16, 42, 41);
}

const Bytes kAbortConn = {
    0x03,                   // mid: AbortConn
    0x00,                   // flags
    0x00, 0x00,             // bufs: 0
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x01, 0x00, // mseq: 256
    0x00, 0x00, 0x00, 0xff, // mseq_ack: 255
};
Message AbortConnFields()
{
    return MakeMsg(Mid::kAbortConn, 0, 0, 16, 256, 255);
}

const Bytes kSendSm = {
    0x04,                   // mid: SendSM
    0x00,                   // flags
    0x00, 0x07,             // bufs: 7
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x00, 0x0b, // mseq: 11
    0x00, 0x00, 0x00, 0x0a, // mseq_ack: 10
};
Message SendSmFields()
{
    return MakeMsg(Mid::kSendSm, 0, 7, 16, 11, 10);
}

const Bytes kRdmaWrCompl = {
    0x05,                   // mid: RdmaWrCompl
    0x00,                   // flags
    0x00, 0x08,             // bufs: 8
    0x00, 0x00, 0x00, 0x14, // len: 20 (BSDH 16 + len 4)
    0x00, 0x00, 0x00, 0x11, // mseq: 17
    0x00, 0x00, 0x00, 0x10, // mseq_ack: 16
    0x00, 0x10, 0x00, 0x00, // bytes written: 1 MiB
};
Message RdmaWrComplFields()
{
    Message m = MakeMsg(Mid::kRdmaWrCompl, 0, 8, 20, 17, 16);
    m.rdma_compl_len = 1u << 20;
    return m;
}

const Bytes kRdmaRdCompl = {
    0x06,                   // mid: RdmaRdCompl
    0x00,                   // flags
    0x00, 0x09,             // bufs: 9
    0x00, 0x00, 0x00, 0x14, // len: 20 (BSDH 16 + len 4)
    0x00, 0x00, 0x00, 0x12, // mseq: 18
    0x00, 0x00, 0x00, 0x0f, // mseq_ack: 15
    0x00, 0x01, 0x00, 0x00, // bytes read: 64 KiB
};
Message RdmaRdComplFields()
{
    Message m = MakeMsg(Mid::kRdmaRdCompl, 0, 9, 20, 18, 15);
    m.rdma_compl_len = 65536;
    return m;
}

const Bytes kSrcAvailCancel = {
    0x08,                   // mid: SrcAvailCancel
    0x00,                   // flags
    0x00, 0x03,             // bufs: 3
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x00, 0x13, // mseq: 19
    0x00, 0x00, 0x00, 0x0c, // mseq_ack: 12
};
Message SrcAvailCancelFields()
{
    return MakeMsg(Mid::kSrcAvailCancel, 0, 3, 16, 19, 12);
}

const Bytes kSinkAvailCancel = {
    0x09,                   // mid: SinkAvailCancel
    0x00,                   // flags
    0x00, 0x02,             // bufs: 2
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x00, 0x14, // mseq: 20
    0x00, 0x00, 0x00, 0x0d, // mseq_ack: 13
};
Message SinkAvailCancelFields()
{
    return MakeMsg(Mid::kSinkAvailCancel, 0, 2, 16, 20, 13);
}

const Bytes kSinkCancelAck = {
    0x0a,                   // mid: SinkCancelAck
    0x00,                   // flags
    0x00, 0x01,             // bufs: 1
    0x00, 0x00, 0x00, 0x10, // len: 16, BSDH only
    0x00, 0x00, 0x00, 0x15, // mseq: 21
    0x00, 0x00, 0x00, 0x0e, // mseq_ack: 14
};
Message SinkCancelAckFields()
{
    return MakeMsg(Mid::kSinkCancelAck, 0, 1, 16, 21, 14);
}

const Bytes kChRcvBuf = {
    0x0b,                   // mid: ChRcvBuf
    0x00,                   // flags
    0x00, 0x0a,             // bufs: 10
    0x00, 0x00, 0x00, 0x14, // len: 20 (BSDH 16 + size 4)
    0x00, 0x00, 0x00, 0x16, // mseq: 22
    0x00, 0x00, 0x00, 0x11, // mseq_ack: 17
    0x00, 0x00, 0x40, 0x00, // new receive buffer size: 16 KiB
};
Message ChRcvBufFields()
{
    Message m = MakeMsg(Mid::kChRcvBuf, 0, 10, 20, 22, 17);
    m.rcv_buf_size = 16384;
    return m;
}

const Bytes kChRcvBufAck = {
    0x0c,                   // mid: ChRcvBufAck
    0x00,                   // flags
    0x00, 0x0b,             // bufs: 11
    0x00, 0x00, 0x00, 0x14, // len: 20 (BSDH 16 + size 4)
    0x00, 0x00, 0x00, 0x17, // mseq: 23
    0x00, 0x00, 0x00, 0x16, // mseq_ack: 22
    0x00, 0x00, 0x80, 0x00, // acknowledged size: 32 KiB
};
Message ChRcvBufAckFields()
{
    Message m = MakeMsg(Mid::kChRcvBufAck, 0, 11, 20, 23, 22);
    m.rcv_buf_size = 32768;
    return m;
}

const Bytes kSinkAvail = {
    0xfd,                   // mid: SinkAvail
    0x00,                   // flags
    0x00, 0x06,             // bufs: 6
    0x00, 0x00, 0x00, 0x24, // len: 36 (BSDH 16 + SinkAH 20)
    0x00, 0x00, 0x00, 0x18, // mseq: 24
    0x00, 0x00, 0x00, 0x12, // mseq_ack: 18
    0x00, 0x02, 0x00, 0x00, // len: 128 KiB
    0x0a, 0x0b, 0x0c, 0x0d, // rkey
    0x00, 0x00, 0x7f, 0xff, // vaddr, high word
    0x12, 0x34, 0x50, 0x00, // vaddr, low word
    0x00, 0x00, 0x00, 0x01, // non_disc: 1
};
Message SinkAvailFields()
{
    Message m = MakeMsg(Mid::kSinkAvail, 0, 6, 36, 24, 18);
    m.sink_avail.len = 131072;
    m.sink_avail.rkey = 0x0a0b0c0d;
    m.sink_avail.vaddr = 0x00007fff12345000ull;
    m.sink_avail.non_discard = 1;
    return m;
}

const Bytes kSrcAvail = {
    0xfe,                   // mid: SrcAvail
    0x00,                   // flags
    0x00, 0x04,             // bufs: 4
    0x00, 0x00, 0x00, 0x20, // len: 32 (BSDH 16 + SrcAH 16), no inline payload
    0x00, 0x00, 0x00, 0x19, // mseq: 25
    0x00, 0x00, 0x00, 0x13, // mseq_ack: 19
    0x00, 0x04, 0x00, 0x00, // len: 256 KiB offered for RDMA Read
    0x00, 0x00, 0x12, 0x34, // rkey
    0x00, 0x00, 0x7f, 0x00, // vaddr, high word
    0xde, 0xad, 0xb0, 0x00, // vaddr, low word
};
Message SrcAvailFields()
{
    Message m = MakeMsg(Mid::kSrcAvail, 0, 4, 32, 25, 19);
    m.src_avail.len = 262144;
    m.src_avail.rkey = 0x1234;
    m.src_avail.vaddr = 0x00007f00deadb000ull;
    return m;
}

const u8 kInlinePayload[8] = {'i', 'n', 'l', 'i', 'n', 'e', '!', '!'};
const Bytes kSrcAvailInline = {
    0xfe,                   // mid: SrcAvail
    0x00,                   // flags
    0x00, 0x0c,             // bufs: 12
    0x00, 0x00, 0x00, 0x28, // len: 40 (BSDH 16 + SrcAH 16 + 8 inline bytes)
    0x00, 0x00, 0x00, 0x21, // mseq: 33
    0x00, 0x00, 0x00, 0x1f, // mseq_ack: 31
    0x00, 0x10, 0x00, 0x00, // len: 1 MiB (the inline bytes are not counted)
    0x55, 0x66, 0x77, 0x88, // rkey
    0x00, 0x00, 0x7f, 0x12, // vaddr, high word
    0x34, 0x56, 0x70, 0x00, // vaddr, low word
    'i',  'n',  'l',  'i',  // inline payload
    'n',  'e',  '!',  '!',  //
};
Message SrcAvailInlineFields()
{
    Message m = MakeMsg(Mid::kSrcAvail, 0, 12, 40, 33, 31);
    m.src_avail.len = 1u << 20;
    m.src_avail.rkey = 0x55667788;
    m.src_avail.vaddr = 0x00007f1234567000ull;
    m.payload = kInlinePayload;
    m.payload_len = sizeof(kInlinePayload);
    return m;
}

const u8 kDataPayload[5] = {'h', 'e', 'l', 'l', 'o'};
const Bytes kData = {
    0xff,                   // mid: Data
    0x01,                   // flags: OOB_PRES (the last byte is urgent)
    0x00, 0x3e,             // bufs: 62
    0x00, 0x00, 0x00, 0x15, // len: 21 (BSDH 16 + 5 payload bytes)
    0x00, 0x00, 0x00, 0x64, // mseq: 100
    0x00, 0x00, 0x00, 0x63, // mseq_ack: 99
    'h',  'e',  'l',  'l',  // payload
    'o',                    //
};
Message DataFields()
{
    Message m = MakeMsg(Mid::kData, SDP_FLAG_OOB_PRES, 62, 21, 100, 99);
    m.payload = kDataPayload;
    m.payload_len = sizeof(kDataPayload);
    return m;
}

// Zero-payload Data: a pure credit update.
const Bytes kDataCreditUpdate = {
    0xff,                   // mid: Data
    0x00,                   // flags
    0x00, 0x40,             // bufs: 64, the re-posted buffers being announced
    0x00, 0x00, 0x00, 0x10, // len: 16, no payload
    0x00, 0x00, 0x00, 0x65, // mseq: 101
    0x00, 0x00, 0x00, 0x64, // mseq_ack: 100
};
Message DataCreditUpdateFields()
{
    return MakeMsg(Mid::kData, 0, 64, 16, 101, 100);
}

struct Golden {
    const char* name;
    const Bytes* bytes;
    u32 header_len; // where the payload starts
    Message (*fields)();
};

const Golden kGoldens[] = {
    {"HelloModern", &kHelloModern, 32, HelloModernFields},
    {"HelloFullV4", &kHelloFullV4, 64, HelloFullV4Fields},
    {"HelloFullV6", &kHelloFullV6, 64, HelloFullV6Fields},
    {"HelloAck", &kHelloAck, 24, HelloAckFields},
    {"DisConn", &kDisConn, 16, DisConnFields},
    {"AbortConn", &kAbortConn, 16, AbortConnFields},
    {"SendSM", &kSendSm, 16, SendSmFields},
    {"RdmaWrCompl", &kRdmaWrCompl, 20, RdmaWrComplFields},
    {"RdmaRdCompl", &kRdmaRdCompl, 20, RdmaRdComplFields},
    {"SrcAvailCancel", &kSrcAvailCancel, 16, SrcAvailCancelFields},
    {"SinkAvailCancel", &kSinkAvailCancel, 16, SinkAvailCancelFields},
    {"SinkCancelAck", &kSinkCancelAck, 16, SinkCancelAckFields},
    {"ChRcvBuf", &kChRcvBuf, 20, ChRcvBufFields},
    {"ChRcvBufAck", &kChRcvBufAck, 20, ChRcvBufAckFields},
    {"SinkAvail", &kSinkAvail, 36, SinkAvailFields},
    {"SrcAvail", &kSrcAvail, 32, SrcAvailFields},
    {"SrcAvailInline", &kSrcAvailInline, 32, SrcAvailInlineFields},
    {"Data", &kData, 16, DataFields},
    {"DataCreditUpdate", &kDataCreditUpdate, 16, DataCreditUpdateFields},
};

// The spec's message ids, written out independently of wire.cpp's table.
bool IsSpecMid(unsigned v)
{
    return v <= 0x0e || v == 0xfd || v == 0xfe || v == 0xff;
}
bool IsUnsupportedMid(unsigned v)
{
    return v == SDP_MID_MODE_CHANGE || v == SDP_MID_SUSP_COMM || v == SDP_MID_SUSP_COMM_ACK;
}
// Messages whose BSDH.len must equal their header size.
bool IsFixedSize(Mid mid)
{
    return mid != Mid::kHello && mid != Mid::kSrcAvail && mid != Mid::kData;
}

// Field-by-field comparison, the union member chosen by want's mid.
void ExpectSameFields(const Message& want, const Message& got)
{
    EXPECT_EQ(got.bsdh.mid, want.bsdh.mid);
    EXPECT_EQ(got.bsdh.flags, want.bsdh.flags);
    EXPECT_EQ(got.bsdh.bufs, want.bsdh.bufs);
    EXPECT_EQ(got.bsdh.len, want.bsdh.len);
    EXPECT_EQ(got.bsdh.mseq, want.bsdh.mseq);
    EXPECT_EQ(got.bsdh.mseq_ack, want.bsdh.mseq_ack);
    switch (want.bsdh.mid) {
    case Mid::kHello:
        EXPECT_EQ(got.hello.major, want.hello.major);
        EXPECT_EQ(got.hello.minor, want.hello.minor);
        EXPECT_EQ(static_cast<int>(got.hello.ip_version), static_cast<int>(want.hello.ip_version));
        EXPECT_EQ(got.hello.caps, want.hello.caps);
        EXPECT_EQ(got.hello.max_adverts, want.hello.max_adverts);
        EXPECT_EQ(got.hello.desired_remote_rcv_size, want.hello.desired_remote_rcv_size);
        EXPECT_EQ(got.hello.local_rcv_size, want.hello.local_rcv_size);
        EXPECT_EQ(got.hello.local_port, want.hello.local_port);
        EXPECT_EQ(got.hello.has_addresses, want.hello.has_addresses);
        // Without addresses decode zeroes them, so this holds in both layouts.
        EXPECT_EQ(Hex(got.hello.src_addr, 16), Hex(want.hello.src_addr, 16));
        EXPECT_EQ(Hex(got.hello.dst_addr, 16), Hex(want.hello.dst_addr, 16));
        break;
    case Mid::kHelloAck:
        EXPECT_EQ(got.hello_ack.major, want.hello_ack.major);
        EXPECT_EQ(got.hello_ack.minor, want.hello_ack.minor);
        EXPECT_EQ(got.hello_ack.ip_version, want.hello_ack.ip_version);
        EXPECT_EQ(got.hello_ack.caps, want.hello_ack.caps);
        EXPECT_EQ(got.hello_ack.ext_max_adverts, want.hello_ack.ext_max_adverts);
        EXPECT_EQ(got.hello_ack.actual_rcv_size, want.hello_ack.actual_rcv_size);
        break;
    case Mid::kSrcAvail:
        EXPECT_EQ(got.src_avail.len, want.src_avail.len);
        EXPECT_EQ(got.src_avail.rkey, want.src_avail.rkey);
        EXPECT_EQ(got.src_avail.vaddr, want.src_avail.vaddr);
        break;
    case Mid::kSinkAvail:
        EXPECT_EQ(got.sink_avail.len, want.sink_avail.len);
        EXPECT_EQ(got.sink_avail.rkey, want.sink_avail.rkey);
        EXPECT_EQ(got.sink_avail.vaddr, want.sink_avail.vaddr);
        EXPECT_EQ(got.sink_avail.non_discard, want.sink_avail.non_discard);
        break;
    case Mid::kRdmaWrCompl:
    case Mid::kRdmaRdCompl:
        EXPECT_EQ(got.rdma_compl_len, want.rdma_compl_len);
        break;
    case Mid::kChRcvBuf:
    case Mid::kChRcvBufAck:
        EXPECT_EQ(got.rcv_buf_size, want.rcv_buf_size);
        break;
    default:
        break;
    }
    ASSERT_EQ(got.payload_len, want.payload_len);
    if (want.payload_len == 0) {
        EXPECT_EQ(got.payload, nullptr);
    } else {
        ASSERT_NE(got.payload, nullptr);
        EXPECT_EQ(Hex(got.payload, got.payload_len), Hex(want.payload, want.payload_len));
    }
}

// Encode msg's headers into an exactly sized buffer and append `payload`.
Bytes EncodeWithPayload(const Message& msg, usize header_len, const Bytes& payload)
{
    Bytes out(header_len);
    usize written = 0;
    EXPECT_EQ(encode_header(msg, out.data(), out.size(), &written), EncodeError::kNone);
    EXPECT_EQ(written, header_len);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

Bytes PayloadOf(const Message& m)
{
    return m.payload_len != 0 ? Bytes(m.payload, m.payload + m.payload_len) : Bytes();
}

// Overwrite BSDH.len of an encoded message.
void SetLen(Bytes* b, u32 len)
{
    sdp::store_be32(b->data() + 4, len);
}

// Decode an exactly sized heap copy of `b`.  A decoded payload points into
// that copy, so callers that read it pass `keep` to hold the copy.
DecodeError DecodeCopy(const Bytes& b, Message* out, HeapCopy* keep = nullptr)
{
    HeapCopy copy(b);
    const DecodeError err = decode(copy.data(), copy.size(), out);
    if (keep != nullptr)
        *keep = std::move(copy); // moves ownership; the bytes stay where they are
    return err;
}

// ---------------------------------------------------------------------------
// Per-golden tests
// ---------------------------------------------------------------------------

void PrintTo(const Golden& g, std::ostream* os)
{
    *os << g.name;
}

class GoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenTest, DecodesToHandWrittenFields)
{
    const Golden& g = GetParam();
    HeapCopy buf(*g.bytes);
    Message got{};
    ASSERT_EQ(decode(buf.data(), buf.size(), &got), DecodeError::kNone);
    ExpectSameFields(g.fields(), got);
    // The payload is not copied: it points into the caller's buffer.
    if (got.payload_len != 0)
        EXPECT_EQ(got.payload, buf.data() + g.header_len);
}

TEST_P(GoldenTest, EncodesToHandWrittenBytes)
{
    const Golden& g = GetParam();
    const Message m = g.fields();
    // Exactly the header size: ASan catches a write past it.
    std::unique_ptr<u8[]> hdr(new u8[g.header_len]);
    std::memset(hdr.get(), 0xcc, g.header_len);
    usize written = 0;
    ASSERT_EQ(encode_header(m, hdr.get(), g.header_len, &written), EncodeError::kNone);
    ASSERT_EQ(written, g.header_len);
    Bytes out(hdr.get(), hdr.get() + written);
    const Bytes payload = PayloadOf(m);
    out.insert(out.end(), payload.begin(), payload.end());
    EXPECT_EQ(Hex(out), Hex(*g.bytes));
}

TEST_P(GoldenTest, EncodeIgnoresStaleLenAndPayloadPointer)
{
    // BSDH.len is derived from header size + payload_len, never copied.
    const Golden& g = GetParam();
    Message m = g.fields();
    m.bsdh.len = 0xdeadbeef;
    m.payload = nullptr; // only payload_len matters to the encoder
    const Bytes out = EncodeWithPayload(m, g.header_len, PayloadOf(g.fields()));
    EXPECT_EQ(Hex(out), Hex(*g.bytes));
}

TEST_P(GoldenTest, RoundTrips)
{
    const Golden& g = GetParam();
    const Message want = g.fields();
    const Bytes wire = EncodeWithPayload(want, g.header_len, PayloadOf(want));
    Message got{};
    HeapCopy keep;
    ASSERT_EQ(DecodeCopy(wire, &got, &keep), DecodeError::kNone);
    ExpectSameFields(want, got);
}

TEST_P(GoldenTest, EveryTruncationIsShortAndStaysInBounds)
{
    const Golden& g = GetParam();
    for (usize n = 0; n < g.bytes->size(); n++) {
        SCOPED_TRACE("truncated to " + std::to_string(n));
        const Bytes cut(g.bytes->begin(), g.bytes->begin() + static_cast<long>(n));
        Message m{};
        EXPECT_EQ(DecodeCopy(cut, &m), DecodeError::kShortBuffer);
    }
}

TEST_P(GoldenTest, TrailingBytesBeyondLenAreIgnored)
{
    // Receive buffers and CM private data are longer than the message.
    const Golden& g = GetParam();
    Bytes padded = *g.bytes;
    padded.insert(padded.end(), 9, 0xa5);
    Message got{};
    HeapCopy keep;
    ASSERT_EQ(DecodeCopy(padded, &got, &keep), DecodeError::kNone);
    ExpectSameFields(g.fields(), got);
}

TEST_P(GoldenTest, EncoderRejectsEveryTooSmallDestination)
{
    const Golden& g = GetParam();
    const Message m = g.fields();
    for (usize size = 0; size < g.header_len; size++) {
        SCOPED_TRACE("destination of " + std::to_string(size) + " bytes");
        std::unique_ptr<u8[]> dst(new u8[size]);
        std::memset(dst.get(), 0xcc, size);
        usize written = 12345;
        EXPECT_EQ(encode_header(m, dst.get(), size, &written), EncodeError::kNoRoom);
        EXPECT_EQ(written, 12345u) << "written set on failure";
        for (usize i = 0; i < size; i++)
            EXPECT_EQ(dst[i], 0xcc) << "byte " << i << " written on kNoRoom";
    }
}

TEST_P(GoldenTest, LenBelowHeaderSizeIsBadLength)
{
    const Golden& g = GetParam();
    const u32 min_len = header_size(g.fields().bsdh.mid);
    ASSERT_GE(min_len, 16u);
    for (u32 len = 0; len < min_len; len++) {
        SCOPED_TRACE("len " + std::to_string(len));
        Bytes b = *g.bytes;
        SetLen(&b, len);
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kBadLength);
    }
}

TEST_P(GoldenTest, LenBeyondBufferIsRejected)
{
    const Golden& g = GetParam();
    const Mid mid = g.fields().bsdh.mid;
    for (u32 len : {static_cast<u32>(g.bytes->size() + 1), static_cast<u32>(g.bytes->size() + 64),
                    0x80000000u, 0xffffffffu}) {
        SCOPED_TRACE("len " + std::to_string(len));
        // A len the message id does not allow is malformed whatever was
        // received (a fixed size, or the gap between the Hello layouts); a
        // len the id allows is merely incomplete.
        const bool len_allowed = mid == Mid::kHello ? (len == 32 || len >= 64) : !IsFixedSize(mid);
        Bytes b = *g.bytes;
        SetLen(&b, len);
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m),
                  len_allowed ? DecodeError::kShortBuffer : DecodeError::kBadLength);
    }
}

std::string GoldenName(const ::testing::TestParamInfo<Golden>& info)
{
    return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(AllMessages, GoldenTest, ::testing::ValuesIn(kGoldens), GoldenName);

// Every message the decoder accepts has a golden vector above.
TEST(WireGolden, CoversEverySupportedMessage)
{
    for (unsigned v = 0; v < 256; v++) {
        if (!IsSpecMid(v) || IsUnsupportedMid(v))
            continue;
        bool found = false;
        for (const Golden& g : kGoldens)
            found = found || (*g.bytes)[0] == v;
        EXPECT_TRUE(found) << "no golden vector for mid 0x" << std::hex << v;
    }
}

// ---------------------------------------------------------------------------
// Decode: specific layouts
// ---------------------------------------------------------------------------

TEST(WireDecode, HelloPaddedToCmReqPrivateData)
{
    // The CM delivers the REQ private data zero padded to its full 56 bytes.
    Bytes b = kHelloModern;
    b.resize(SDP_CM_REQ_PRIVATE_DATA, 0);
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    ExpectSameFields(HelloModernFields(), m);
    EXPECT_EQ(m.payload_len, 0u);
    EXPECT_EQ(m.payload, nullptr);
}

TEST(WireDecode, HelloAckPaddedToCmRepPrivateData)
{
    Bytes b = kHelloAck;
    b.resize(SDP_CM_REP_PRIVATE_DATA, 0);
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    ExpectSameFields(HelloAckFields(), m);
}

TEST(WireDecode, HistoricalHelloReservedTailIsHeaderNotPayload)
{
    // OFED sent a 92-byte Hello (len 0x5c): the tail after the addresses is
    // reserved and must not surface as payload.
    Bytes b = kHelloFullV4;
    b.resize(92, 0x77);
    SetLen(&b, 92);
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    Message want = HelloFullV4Fields();
    want.bsdh.len = 92;
    ExpectSameFields(want, m);
    EXPECT_EQ(m.payload_len, 0u);
    EXPECT_EQ(m.payload, nullptr);
}

TEST(WireDecode, HelloLenBetweenLayoutsIsBadLength)
{
    // 33..63 is neither the modern (32) nor the historical (>= 64) layout.
    for (u32 len = 33; len < 64; len++) {
        SCOPED_TRACE("len " + std::to_string(len));
        Bytes b = kHelloFullV4;
        SetLen(&b, len);
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kBadLength);
    }
    // Both ends of the gap are fine.
    Bytes b = kHelloFullV4;
    Message m{};
    SetLen(&b, 32);
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    EXPECT_FALSE(m.hello.has_addresses);
    SetLen(&b, 64);
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    EXPECT_TRUE(m.hello.has_addresses);
}

TEST(WireDecode, ModernHelloInsideLongerBufferDoesNotReadAddresses)
{
    // len 32 in a 64-byte buffer: the bytes after len are not addresses.
    Bytes b = kHelloFullV4;
    SetLen(&b, 32);
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    EXPECT_FALSE(m.hello.has_addresses);
    EXPECT_EQ(Hex(m.hello.src_addr, 16), Hex(Bytes(16, 0)));
    EXPECT_EQ(Hex(m.hello.dst_addr, 16), Hex(Bytes(16, 0)));
}

// ---------------------------------------------------------------------------
// Decode: rejections
// ---------------------------------------------------------------------------

TEST(WireDecode, EveryLengthBelowBsdhIsShortBuffer)
{
    for (int fill : {0x00, 0xff, 0x07, 0x42}) {
        for (usize n = 0; n < SDP_BSDH_SIZE; n++) {
            SCOPED_TRACE("fill " + std::to_string(fill) + " size " + std::to_string(n));
            Message m{};
            EXPECT_EQ(DecodeCopy(Bytes(n, static_cast<u8>(fill)), &m), DecodeError::kShortBuffer);
        }
    }
    // Size 0 must not touch the buffer at all.
    Message m{};
    EXPECT_EQ(decode(nullptr, 0, &m), DecodeError::kShortBuffer);
}

TEST(WireDecode, FixedSizeMessageWithWrongLenIsBadLength)
{
    for (const Golden& g : kGoldens) {
        const Mid mid = g.fields().bsdh.mid;
        if (!IsFixedSize(mid))
            continue;
        for (u32 extra : {1u, 3u, 4u, 8u}) {
            SCOPED_TRACE(std::string(g.name) + " len header+" + std::to_string(extra));
            // The buffer holds all of len, so only the len/mid mismatch is wrong.
            Bytes b = *g.bytes;
            b.resize(b.size() + extra, 0);
            SetLen(&b, g.header_len + extra);
            Message m{};
            EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kBadLength);
        }
    }
}

TEST(WireDecode, VariableSizeLenLargerThanBufferIsShortBuffer)
{
    Bytes b = kData; // len 21, 21 bytes
    b.pop_back();
    Message m{};
    EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kShortBuffer);
    // One more byte than received, for the zero-payload form too.
    b = kDataCreditUpdate;
    SetLen(&b, 17);
    EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kShortBuffer);
}

TEST(WireDecode, VariableSizeLenSmallerThanBufferUsesLen)
{
    // len 18 in a 21-byte buffer: 2 payload bytes, the rest is ignored.
    Bytes b = kData;
    SetLen(&b, 18);
    Message m{};
    HeapCopy keep;
    ASSERT_EQ(DecodeCopy(b, &m, &keep), DecodeError::kNone);
    EXPECT_EQ(m.bsdh.len, 18u);
    ASSERT_EQ(m.payload_len, 2u);
    EXPECT_EQ(m.payload[0], 'h');
    EXPECT_EQ(m.payload[1], 'e');
}

TEST(WireDecode, EveryMessageIdIsClassified)
{
    for (unsigned v = 0; v < 256; v++) {
        SCOPED_TRACE("mid " + std::to_string(v));
        // 64 bytes with len 64: long enough for any header, so only the id
        // decides between unknown, unsupported and the rest.
        Bytes b = kHelloFullV4;
        b[0] = static_cast<u8>(v);
        Message m{};
        const DecodeError err = DecodeCopy(b, &m);
        EXPECT_EQ(is_sdp_mid(static_cast<u8>(v)), IsSpecMid(v));
        if (!IsSpecMid(v)) {
            EXPECT_EQ(err, DecodeError::kUnknownId);
            EXPECT_STREQ(mid_name(static_cast<u8>(v)), "Unknown");
            EXPECT_EQ(header_size(static_cast<Mid>(v)), 0u);
        } else if (IsUnsupportedMid(v)) {
            EXPECT_EQ(err, DecodeError::kUnsupported);
            EXPECT_STRNE(mid_name(static_cast<u8>(v)), "Unknown");
            EXPECT_EQ(header_size(static_cast<Mid>(v)), 0u);
        } else {
            EXPECT_NE(err, DecodeError::kUnknownId);
            EXPECT_NE(err, DecodeError::kUnsupported);
            EXPECT_GE(header_size(static_cast<Mid>(v)), 16u);
        }
    }
}

TEST(WireDecode, UnknownAndUnsupportedIdsWinOverBadLength)
{
    // The id is judged before BSDH.len, whatever len holds.
    for (u8 mid : {u8{0x07}, u8{0x0d}, u8{0x0e}, u8{0x0f}, u8{0x10}, u8{0x80}, u8{0xfc}}) {
        for (u32 len : {0u, 15u, 16u, 0xffffffffu}) {
            SCOPED_TRACE("mid " + std::to_string(mid) + " len " + std::to_string(len));
            Bytes b(16, 0);
            b[0] = mid;
            SetLen(&b, len);
            Message m{};
            EXPECT_EQ(DecodeCopy(b, &m),
                      IsUnsupportedMid(mid) ? DecodeError::kUnsupported : DecodeError::kUnknownId);
        }
    }
}

TEST(WireDecode, UnsupportedMessagesByName)
{
    for (u8 mid : {u8{SDP_MID_MODE_CHANGE}, u8{SDP_MID_SUSP_COMM}, u8{SDP_MID_SUSP_COMM_ACK}}) {
        Bytes b = kDisConn;
        b[0] = mid;
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kUnsupported) << "mid " << int{mid};
    }
    EXPECT_STREQ(mid_name(SDP_MID_MODE_CHANGE), "ModeChange");
    EXPECT_STREQ(mid_name(SDP_MID_SUSP_COMM), "SuspComm");
    EXPECT_STREQ(mid_name(SDP_MID_SUSP_COMM_ACK), "SuspCommAck");
}

TEST(WireDecode, HelloAndHelloAckNeedMajorVersion2)
{
    for (const Bytes* golden : {&kHelloModern, &kHelloFullV4, &kHelloFullV6, &kHelloAck}) {
        for (u8 major = 0; major < 16; major++) {
            for (u8 minor : {u8{0}, u8{2}, u8{15}}) {
                SCOPED_TRACE("mid " + std::to_string((*golden)[0]) + " version " +
                             std::to_string(major) + "." + std::to_string(minor));
                Bytes b = *golden;
                b[16] = static_cast<u8>(major << 4 | minor);
                Message m{};
                EXPECT_EQ(DecodeCopy(b, &m),
                          major == 2 ? DecodeError::kNone : DecodeError::kBadVersion);
            }
        }
    }
}

TEST(WireDecode, HelloIpVersionMustBe4Or6)
{
    for (const Bytes* golden : {&kHelloModern, &kHelloFullV4, &kHelloFullV6}) {
        for (u8 ipv = 0; ipv < 16; ipv++) {
            SCOPED_TRACE("ip version " + std::to_string(ipv));
            Bytes b = *golden;
            b[17] = static_cast<u8>(ipv << 4 | (b[17] & 0x0f)); // keep the caps
            Message m{};
            const DecodeError err = DecodeCopy(b, &m);
            if (ipv == 4 || ipv == 6) {
                ASSERT_EQ(err, DecodeError::kNone);
                EXPECT_EQ(static_cast<int>(m.hello.ip_version), ipv);
            } else {
                EXPECT_EQ(err, DecodeError::kBadField);
            }
        }
    }
}

TEST(WireDecode, HelloMaxAdvertsZeroIsBadField)
{
    for (const Bytes* golden : {&kHelloModern, &kHelloFullV4}) {
        Bytes b = *golden;
        b[19] = 0;
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kBadField);
        b[19] = 0xff;
        ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
        EXPECT_EQ(m.hello.max_adverts, 0xff);
    }
}

TEST(WireDecode, HelloAckExtMaxAdvertsZeroIsAccepted)
{
    // Only the Hello's max_adverts must be positive; HelloAck's is an extension.
    Bytes b = kHelloAck;
    b[19] = 0;
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    EXPECT_EQ(m.hello_ack.ext_max_adverts, 0);
}

TEST(WireDecode, AvailWithZeroLenIsBadField)
{
    for (const Bytes* golden : {&kSrcAvail, &kSrcAvailInline, &kSinkAvail}) {
        Bytes b = *golden;
        b[16] = b[17] = b[18] = b[19] = 0; // SrcAH/SinkAH len
        Message m{};
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kBadField) << "mid " << int{b[0]};
        b[19] = 1;
        EXPECT_EQ(DecodeCopy(b, &m), DecodeError::kNone) << "mid " << int{b[0]};
    }
}

TEST(WireDecode, ReservedHelloBytesAreIgnored)
{
    Bytes b = kHelloModern;
    b[18] = 0xff;         // reserved after ipv_cap
    b[30] = b[31] = 0xff; // reserved after the port
    Message m{};
    ASSERT_EQ(DecodeCopy(b, &m), DecodeError::kNone);
    ExpectSameFields(HelloModernFields(), m);
}

// ---------------------------------------------------------------------------
// Encode: rejections
// ---------------------------------------------------------------------------

TEST(WireEncode, PayloadOnFixedSizeMessageIsBadField)
{
    for (const Golden& g : kGoldens) {
        Message m = g.fields();
        if (!IsFixedSize(m.bsdh.mid) && m.bsdh.mid != Mid::kHello)
            continue;
        SCOPED_TRACE(g.name);
        m.payload_len = 1;
        u8 buf[128];
        usize written = 0;
        EXPECT_EQ(encode_header(m, buf, sizeof(buf), &written), EncodeError::kBadField);
    }
}

TEST(WireEncode, UnknownAndUnsupportedIdsAreNotEncodable)
{
    for (unsigned v = 0; v < 256; v++) {
        if (IsSpecMid(v) && !IsUnsupportedMid(v))
            continue;
        SCOPED_TRACE("mid " + std::to_string(v));
        Message m = MakeMsg(static_cast<Mid>(v), 0, 1, 0, 1, 0);
        u8 buf[128];
        usize written = 0;
        EXPECT_EQ(encode_header(m, buf, sizeof(buf), &written), EncodeError::kNotEncodable);
    }
}

TEST(WireEncode, LenOverflowingU32IsTooLong)
{
    u8 buf[64];
    usize written = 0;

    Message data = DataCreditUpdateFields();
    data.payload_len = 0xffffffffu - 16; // len 0xffffffff: the largest that fits
    ASSERT_EQ(encode_header(data, buf, sizeof(buf), &written), EncodeError::kNone);
    EXPECT_EQ(sdp::load_be32(buf + 4), 0xffffffffu);
    data.payload_len = 0xffffffffu - 15; // len would be 2^32
    EXPECT_EQ(encode_header(data, buf, sizeof(buf), &written), EncodeError::kTooLong);
    data.payload_len = 0xffffffffu;
    EXPECT_EQ(encode_header(data, buf, sizeof(buf), &written), EncodeError::kTooLong);

    Message src = SrcAvailFields();
    src.payload_len = 0xffffffffu - 32;
    ASSERT_EQ(encode_header(src, buf, sizeof(buf), &written), EncodeError::kNone);
    EXPECT_EQ(sdp::load_be32(buf + 4), 0xffffffffu);
    src.payload_len = 0xffffffffu - 31;
    EXPECT_EQ(encode_header(src, buf, sizeof(buf), &written), EncodeError::kTooLong);
}

TEST(WireEncode, HelloFieldsDecodeWouldRejectAreBadField)
{
    u8 buf[64];
    usize written = 0;
    const auto encode = [&](const Message& m) {
        return encode_header(m, buf, sizeof(buf), &written);
    };
    Message m = HelloModernFields();
    m.hello.major = 1;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m.hello.major = 3;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloModernFields();
    m.hello.minor = 16; // does not fit its nibble
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloModernFields();
    m.hello.caps = 16;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloModernFields();
    m.hello.max_adverts = 0;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    for (u8 ipv : {u8{0}, u8{5}, u8{15}, u8{0x46}}) {
        m = HelloModernFields();
        m.hello.ip_version = static_cast<IpVersion>(ipv);
        EXPECT_EQ(encode(m), EncodeError::kBadField) << "ip version " << int{ipv};
    }
    // The limits themselves are fine.
    m = HelloModernFields();
    m.hello.minor = 15;
    m.hello.caps = 15;
    EXPECT_EQ(encode(m), EncodeError::kNone);
}

TEST(WireEncode, HelloAckFieldsThatDoNotFitAreBadField)
{
    u8 buf[64];
    usize written = 0;
    const auto encode = [&](const Message& m) {
        return encode_header(m, buf, sizeof(buf), &written);
    };
    Message m = HelloAckFields();
    m.hello_ack.major = 0;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloAckFields();
    m.hello_ack.minor = 16;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloAckFields();
    m.hello_ack.ip_version = 16;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
    m = HelloAckFields();
    m.hello_ack.caps = 16;
    EXPECT_EQ(encode(m), EncodeError::kBadField);
}

TEST(WireEncode, AvailWithZeroLenIsBadField)
{
    u8 buf[64];
    usize written = 0;
    Message src = SrcAvailFields();
    src.src_avail.len = 0;
    EXPECT_EQ(encode_header(src, buf, sizeof(buf), &written), EncodeError::kBadField);
    Message sink = SinkAvailFields();
    sink.sink_avail.len = 0;
    EXPECT_EQ(encode_header(sink, buf, sizeof(buf), &written), EncodeError::kBadField);
}

TEST(WireEncode, ReservedBytesAreWrittenAsZero)
{
    u8 buf[64];
    std::memset(buf, 0xff, sizeof(buf));
    usize written = 0;
    ASSERT_EQ(encode_header(HelloModernFields(), buf, sizeof(buf), &written), EncodeError::kNone);
    EXPECT_EQ(buf[18], 0);
    EXPECT_EQ(buf[30], 0);
    EXPECT_EQ(buf[31], 0);
    std::memset(buf, 0xff, sizeof(buf));
    ASSERT_EQ(encode_header(HelloAckFields(), buf, sizeof(buf), &written), EncodeError::kNone);
    EXPECT_EQ(buf[18], 0);
}

// ---------------------------------------------------------------------------
// Round trips at the extremes of every field
// ---------------------------------------------------------------------------

void ExpectRoundTrip(Message m, usize header_len, const Bytes& payload)
{
    m.bsdh.len = static_cast<u32>(header_len + payload.size());
    m.payload = payload.empty() ? nullptr : payload.data();
    m.payload_len = static_cast<u32>(payload.size());
    const Bytes wire = EncodeWithPayload(m, header_len, payload);
    ASSERT_EQ(wire.size(), header_len + payload.size());
    Message got{};
    HeapCopy keep;
    ASSERT_EQ(DecodeCopy(wire, &got, &keep), DecodeError::kNone);
    ExpectSameFields(m, got);
}

TEST(WireRoundTrip, ExtremeBsdhValues)
{
    const Bytes payload = {0x00, 0xff, 0x80};
    for (u32 seq : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu}) {
        SCOPED_TRACE("mseq " + std::to_string(seq));
        ExpectRoundTrip(MakeMsg(Mid::kData, 0xff, 0xffff, 0, seq, ~seq), 16, payload);
        ExpectRoundTrip(MakeMsg(Mid::kData, 0, 0, 0, ~seq, seq), 16, {});
        ExpectRoundTrip(MakeMsg(Mid::kDisConn, 0xff, 0xffff, 0, seq, seq), 16, {});
    }
}

TEST(WireRoundTrip, ExtremeExtraHeaderValues)
{
    for (u64 vaddr : {0ull, 0x8000000000000000ull, 0x8000000000000001ull, 0xffffffffffffffffull,
                      0x00000000ffffffffull, 0xffffffff00000000ull}) {
        SCOPED_TRACE("vaddr " + std::to_string(vaddr));
        Message src = MakeMsg(Mid::kSrcAvail, 0, 0xffff, 0, 0xffffffffu, 0xffffffffu);
        src.src_avail = {0xffffffffu, 0xffffffffu, vaddr};
        ExpectRoundTrip(src, 32, {});
        ExpectRoundTrip(src, 32, {0x42});
        Message sink = MakeMsg(Mid::kSinkAvail, 0, 0xffff, 0, 0xffffffffu, 0);
        sink.sink_avail = {1, 0, vaddr, 0xffffffffu};
        ExpectRoundTrip(sink, 36, {});
    }
    for (Mid mid : {Mid::kRdmaWrCompl, Mid::kRdmaRdCompl}) {
        for (u32 v : {0u, 1u, 0x80000000u, 0xffffffffu}) {
            Message m = MakeMsg(mid, 0, 0xffff, 0, 0xffffffffu, 0xffffffffu);
            m.rdma_compl_len = v;
            ExpectRoundTrip(m, 20, {});
        }
    }
    for (Mid mid : {Mid::kChRcvBuf, Mid::kChRcvBufAck}) {
        for (u32 v : {0u, 0xffffffffu}) {
            Message m = MakeMsg(mid, 0xff, 0, 0, 0, 0xffffffffu);
            m.rcv_buf_size = v;
            ExpectRoundTrip(m, 20, {});
        }
    }
}

TEST(WireRoundTrip, ExtremeHelloValues)
{
    for (bool addresses : {false, true}) {
        SCOPED_TRACE(addresses ? "historical" : "modern");
        Message m = MakeMsg(Mid::kHello, 0xff, 0xffff, 0, 0xffffffffu, 0xffffffffu);
        m.hello.major = 2;
        m.hello.minor = 0xf;
        m.hello.ip_version = IpVersion::kV6;
        m.hello.caps = 0xf;
        m.hello.max_adverts = 0xff;
        m.hello.desired_remote_rcv_size = 0xffffffffu;
        m.hello.local_rcv_size = 0xffffffffu;
        m.hello.local_port = 0xffff;
        m.hello.has_addresses = addresses;
        if (addresses) {
            std::memset(m.hello.src_addr, 0xff, 16);
            std::memset(m.hello.dst_addr, 0x80, 16);
        }
        ExpectRoundTrip(m, addresses ? 64 : 32, {});
    }

    Message ack = MakeMsg(Mid::kHelloAck, 0xff, 0xffff, 0, 0xffffffffu, 0xffffffffu);
    ack.hello_ack = {2, 0xf, 0xf, 0xf, 0xff, 0xffffffffu};
    ExpectRoundTrip(ack, 24, {});
    ack.hello_ack = {2, 0, 0, 0, 0, 0};
    ExpectRoundTrip(ack, 24, {});
}

TEST(WireRoundTrip, RandomFieldsForEveryEncodableMessage)
{
    std::mt19937_64 rng(0x5d9);
    const auto u32r = [&] { return static_cast<u32>(rng()); };
    const Mid mids[] = {Mid::kHello,         Mid::kHelloAck,       Mid::kDisConn,
                        Mid::kAbortConn,     Mid::kSendSm,         Mid::kRdmaWrCompl,
                        Mid::kRdmaRdCompl,   Mid::kSrcAvailCancel, Mid::kSinkAvailCancel,
                        Mid::kSinkCancelAck, Mid::kChRcvBuf,       Mid::kChRcvBufAck,
                        Mid::kSinkAvail,     Mid::kSrcAvail,       Mid::kData};
    for (int iter = 0; iter < 300; iter++) {
        for (Mid mid : mids) {
            SCOPED_TRACE("iteration " + std::to_string(iter));
            Message m =
                MakeMsg(mid, static_cast<u8>(rng()), static_cast<u16>(rng()), 0, u32r(), u32r());
            usize header_len = header_size(mid);
            Bytes payload;
            switch (mid) {
            case Mid::kHello:
                m.hello.major = 2;
                m.hello.minor = static_cast<u8>(rng() & 0xf);
                m.hello.ip_version = (rng() & 1) != 0 ? IpVersion::kV4 : IpVersion::kV6;
                m.hello.caps = static_cast<u8>(rng() & 0xf);
                m.hello.max_adverts = static_cast<u8>(1 + rng() % 255);
                m.hello.desired_remote_rcv_size = u32r();
                m.hello.local_rcv_size = u32r();
                m.hello.local_port = static_cast<u16>(rng());
                m.hello.has_addresses = (rng() & 1) != 0;
                if (m.hello.has_addresses) {
                    for (int i = 0; i < 16; i++) {
                        m.hello.src_addr[i] = static_cast<u8>(rng());
                        m.hello.dst_addr[i] = static_cast<u8>(rng());
                    }
                    header_len = SDP_HELLO_FULL_SIZE;
                }
                break;
            case Mid::kHelloAck:
                m.hello_ack = {2,
                               static_cast<u8>(rng() & 0xf),
                               static_cast<u8>(rng() & 0xf),
                               static_cast<u8>(rng() & 0xf),
                               static_cast<u8>(rng()),
                               u32r()};
                break;
            case Mid::kRdmaWrCompl:
            case Mid::kRdmaRdCompl:
                m.rdma_compl_len = u32r();
                break;
            case Mid::kChRcvBuf:
            case Mid::kChRcvBufAck:
                m.rcv_buf_size = u32r();
                break;
            case Mid::kSinkAvail:
                m.sink_avail = {u32r() | 1, u32r(), rng(), u32r()};
                break;
            case Mid::kSrcAvail:
                m.src_avail = {u32r() | 1, u32r(), rng()};
                payload.resize(rng() % 40);
                break;
            case Mid::kData:
                payload.resize(rng() % 40);
                break;
            default:
                break;
            }
            for (u8& byte : payload)
                byte = static_cast<u8>(rng());
            ExpectRoundTrip(m, header_len, payload);
            if (::testing::Test::HasFatalFailure())
                return;
        }
    }
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

TEST(WireTables, HeaderSizes)
{
    EXPECT_EQ(header_size(Mid::kHello), 32u); // the modern layout
    EXPECT_EQ(header_size(Mid::kHelloAck), 24u);
    EXPECT_EQ(header_size(Mid::kDisConn), 16u);
    EXPECT_EQ(header_size(Mid::kAbortConn), 16u);
    EXPECT_EQ(header_size(Mid::kSendSm), 16u);
    EXPECT_EQ(header_size(Mid::kRdmaWrCompl), 20u);
    EXPECT_EQ(header_size(Mid::kRdmaRdCompl), 20u);
    EXPECT_EQ(header_size(Mid::kModeChange), 0u);
    EXPECT_EQ(header_size(Mid::kSrcAvailCancel), 16u);
    EXPECT_EQ(header_size(Mid::kSinkAvailCancel), 16u);
    EXPECT_EQ(header_size(Mid::kSinkCancelAck), 16u);
    EXPECT_EQ(header_size(Mid::kChRcvBuf), 20u);
    EXPECT_EQ(header_size(Mid::kChRcvBufAck), 20u);
    EXPECT_EQ(header_size(Mid::kSuspComm), 0u);
    EXPECT_EQ(header_size(Mid::kSuspCommAck), 0u);
    EXPECT_EQ(header_size(Mid::kSinkAvail), 36u);
    EXPECT_EQ(header_size(Mid::kSrcAvail), 32u);
    EXPECT_EQ(header_size(Mid::kData), 16u);
}

TEST(WireTables, ControlMessagesHaveHighNibbleZero)
{
    for (unsigned v = 0; v < 256; v++)
        EXPECT_EQ(is_control(static_cast<Mid>(v)), v < 0x10) << "mid " << v;
}

TEST(WireTables, Names)
{
    EXPECT_STREQ(mid_name(SDP_MID_HELLO), "Hello");
    EXPECT_STREQ(mid_name(SDP_MID_HELLO_ACK), "HelloAck");
    EXPECT_STREQ(mid_name(SDP_MID_DISCONN), "DisConn");
    EXPECT_STREQ(mid_name(SDP_MID_ABORT_CONN), "AbortConn");
    EXPECT_STREQ(mid_name(SDP_MID_SEND_SM), "SendSM");
    EXPECT_STREQ(mid_name(SDP_MID_RDMA_WR_COMPL), "RdmaWrCompl");
    EXPECT_STREQ(mid_name(SDP_MID_RDMA_RD_COMPL), "RdmaRdCompl");
    EXPECT_STREQ(mid_name(SDP_MID_SRC_AVAIL_CANCEL), "SrcAvailCancel");
    EXPECT_STREQ(mid_name(SDP_MID_SINK_AVAIL_CANCEL), "SinkAvailCancel");
    EXPECT_STREQ(mid_name(SDP_MID_SINK_CANCEL_ACK), "SinkCancelAck");
    EXPECT_STREQ(mid_name(SDP_MID_CH_RCV_BUF), "ChRcvBuf");
    EXPECT_STREQ(mid_name(SDP_MID_CH_RCV_BUF_ACK), "ChRcvBufAck");
    EXPECT_STREQ(mid_name(SDP_MID_SINK_AVAIL), "SinkAvail");
    EXPECT_STREQ(mid_name(SDP_MID_SRC_AVAIL), "SrcAvail");
    EXPECT_STREQ(mid_name(SDP_MID_DATA), "Data");

    // Every error has its own name, and none falls through to "?".
    const DecodeError errors[] = {DecodeError::kNone,        DecodeError::kShortBuffer,
                                  DecodeError::kBadLength,   DecodeError::kUnknownId,
                                  DecodeError::kUnsupported, DecodeError::kBadVersion,
                                  DecodeError::kBadField};
    for (DecodeError a : errors) {
        EXPECT_STRNE(decode_error_name(a), "?") << static_cast<int>(a);
        for (DecodeError b : errors)
            if (a != b)
                EXPECT_STRNE(decode_error_name(a), decode_error_name(b));
    }
    EXPECT_STREQ(decode_error_name(DecodeError::kNone), "ok");
}

} // namespace
