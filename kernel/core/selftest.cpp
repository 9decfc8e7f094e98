// SPDX-License-Identifier: GPL-2.0
//
// Known-answer checks run by sdp.ko at load (and by the host unit tests):
// the core compiled with the kernel's code model and flags must produce the
// same bytes and the same verdicts as the unit-tested host build.
#include "credits.h"
#include "sdp_core.h"
#include "wire.h"

namespace sdp {
namespace {

// Hello, modern layout: bufs 64, len 32, IPv4, max_adverts 1,
// desired remote rcv 32 KiB, local rcv 32 KiB, port 0x1389 (5001).
constexpr u8 kHelloBytes[SDP_HELLO_MODERN_SIZE] = {
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x22, 0x40, 0x00, 0x01, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80, 0x00, 0x13, 0x89, 0x00, 0x00,
};

// SrcAvail: mseq 7, ack 5, bufs 3, len 64 KiB, rkey 0x11223344,
// vaddr 0x0102030405060708, no inline payload.
constexpr u8 kSrcAvailBytes[SDP_SRC_AVAIL_HDR_SIZE] = {
    0xfe, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x05,
    0x00, 0x01, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
};

bool same(const u8* a, const u8* b, usize n)
{
    for (usize i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

struct Check {
    const char* name;
    bool (*run)();
};

bool hello_encodes()
{
    wire::Message m{};
    m.bsdh.mid = wire::Mid::kHello;
    m.bsdh.bufs = 64;
    m.hello = {2, 2, wire::IpVersion::kV4, 0, 1, 32768, 32768, 5001, false, {}, {}};
    u8 out[SDP_HELLO_MODERN_SIZE + 8] = {};
    usize n = 0;
    return wire::encode_header(m, out, sizeof(out), &n) == wire::EncodeError::kNone &&
           n == sizeof(kHelloBytes) && same(out, kHelloBytes, n);
}

bool hello_decodes()
{
    wire::Message m{};
    return wire::decode(kHelloBytes, sizeof(kHelloBytes), &m) == wire::DecodeError::kNone &&
           m.bsdh.mid == wire::Mid::kHello && m.bsdh.bufs == 64 && m.hello.major == 2 &&
           m.hello.ip_version == wire::IpVersion::kV4 && m.hello.local_port == 5001 &&
           m.hello.desired_remote_rcv_size == 32768 && !m.hello.has_addresses;
}

bool src_avail_round_trips()
{
    wire::Message m{};
    if (wire::decode(kSrcAvailBytes, sizeof(kSrcAvailBytes), &m) != wire::DecodeError::kNone ||
        m.src_avail.len != 65536 || m.src_avail.rkey != 0x11223344 ||
        m.src_avail.vaddr != 0x0102030405060708ull || m.bsdh.mseq != 7 || m.payload_len != 0)
        return false;
    u8 out[SDP_SRC_AVAIL_HDR_SIZE];
    usize n = 0;
    return wire::encode_header(m, out, sizeof(out), &n) == wire::EncodeError::kNone &&
           n == sizeof(out) && same(out, kSrcAvailBytes, n);
}

bool malformed_rejected()
{
    wire::Message m{};
    u8 bad[SDP_HELLO_MODERN_SIZE];
    for (usize i = 0; i < sizeof(bad); i++)
        bad[i] = kHelloBytes[i];
    bad[16] = 0x12; // version 1.2
    if (wire::decode(bad, sizeof(bad), &m) != wire::DecodeError::kBadVersion)
        return false;
    // A BSDH whose len claims more than was received.
    return wire::decode(kSrcAvailBytes, sizeof(kSrcAvailBytes) - 1, &m) ==
               wire::DecodeError::kShortBuffer &&
           wire::decode(kSrcAvailBytes, 15, &m) == wire::DecodeError::kShortBuffer;
}

bool credits_flow()
{
    CreditLedger c;
    wire::Bsdh hello{wire::Mid::kHelloAck, 0, 4, SDP_HELLO_ACK_SIZE, 0, 0};
    c.start(hello, 4);
    wire::Bsdh out{};
    // 4 credits, 2 reserved for control: two data sends, then only control.
    for (int i = 0; i < 2; i++) {
        if (!c.may_send_data())
            return false;
        c.stamp_send(&out, 4);
    }
    if (c.may_send_data() || !c.may_send_control() || out.mseq != 2)
        return false;
    // The peer saw mseq 1 and has 4 buffers posted: 4 - 1 in flight.
    wire::Bsdh in{wire::Mid::kData, 0, 4, SDP_BSDH_SIZE, 1, 1};
    return c.on_receive(in) == CreditLedger::RxError::kNone && c.tx_credits() == 3 &&
           c.on_receive(in) == CreditLedger::RxError::kSequenceGap;
}

// A grown ring full of unread data keeps its first number posted, gives
// back once the reader caught up, and grows by half.
bool rx_ring_decides()
{
    sdp_core_rx_ring r{};
    r.live = 16;
    r.posted = 3;
    r.base = 8;
    r.cap = 32;
    r.limit = 32;
    r.unread = 5000;
    r.unread_max = 65536;
    r.trim = 1;
    if (sdp_core_rx_free_buffer(&r) != SDP_RX_FREE_POST || sdp_core_rx_add_count(&r) != 8)
        return false;
    r.posted = 8;
    r.trim = 0;
    r.unread = 0;
    return sdp_core_rx_free_buffer(&r) == SDP_RX_FREE_GIVE_BACK;
}

constexpr Check kChecks[] = {
    {"hello encodes to its golden bytes", hello_encodes},
    {"hello golden bytes decode", hello_decodes},
    {"srcavail round trip", src_avail_round_trips},
    {"malformed messages rejected", malformed_rejected},
    {"credit accounting", credits_flow},
    {"receive ring size", rx_ring_decides},
};

} // namespace
} // namespace sdp

extern "C" int sdp_core_selftest(const char** failed)
{
    int number = 1;
    for (const auto& check : sdp::kChecks) {
        if (!check.run()) {
            *failed = check.name;
            return number;
        }
        number++;
    }
    *failed = nullptr;
    return 0;
}
