// SPDX-License-Identifier: GPL-2.0
//
// libFuzzer target: sdp::wire::decode on arbitrary bytes, with oracles.
//
// Every receive completion and every CM private data blob is peer-controlled,
// so decode() must (a) never read outside [buf, buf + size) and (b) only
// accept what it can describe faithfully.  ASan checks (a) because the input
// is copied into an exactly sized heap buffer.  For (b), every accepted
// message is checked against the bytes it came from, re-encoded and decoded
// again: the re-encoded bytes must equal the input except for reserved
// fields, and the fields must survive the round trip.
//
// The same input is also run through CreditLedger as a stream of
// back-to-back messages, checking its documented arithmetic.
#include "credits.h"
#include "wire.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

using sdp::CreditLedger;
using sdp::u16;
using sdp::u32;
using sdp::u64;
using sdp::u8;
using sdp::usize;
namespace wire = sdp::wire;
using wire::DecodeError;
using wire::EncodeError;
using wire::Message;
using wire::Mid;

[[noreturn]] void Fail(const char* what, int line)
{
    std::fprintf(stderr, "fuzz_wire_decode.cpp:%d: invariant violated: %s\n", line, what);
    std::abort();
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            Fail(#cond, __LINE__);                                                                 \
    } while (0)

// An exactly sized heap copy, so ASan flags any access past the end.
std::unique_ptr<u8[]> HeapCopy(const u8* data, usize size)
{
    std::unique_ptr<u8[]> copy(new u8[size]);
    if (size != 0)
        std::memcpy(copy.get(), data, size);
    return copy;
}

bool IsFixedSize(Mid mid)
{
    return mid != Mid::kHello && mid != Mid::kSrcAvail && mid != Mid::kData;
}

// Where the payload of a decoded message starts: the historical Hello's
// reserved tail belongs to its header.
u32 DecodedHeaderLen(const Message& m)
{
    return m.bsdh.mid == Mid::kHello ? m.bsdh.len : wire::header_size(m.bsdh.mid);
}

// Header length the encoder produces for m.
u32 EncodedHeaderLen(const Message& m)
{
    if (m.bsdh.mid == Mid::kHello)
        return m.hello.has_addresses ? SDP_HELLO_FULL_SIZE : SDP_HELLO_MODERN_SIZE;
    return wire::header_size(m.bsdh.mid);
}

// Reserved bytes, which decode ignores and encode writes as zero.
bool IsReservedByte(Mid mid, usize i)
{
    if (mid == Mid::kHello)
        return i == 18 || i == 30 || i == 31;
    if (mid == Mid::kHelloAck)
        return i == 18;
    return false;
}

void CheckAcceptedMessage(const u8* buf, usize size, const Message& m)
{
    // The BSDH is exactly the first 16 bytes.
    CHECK(size >= SDP_BSDH_SIZE);
    CHECK(static_cast<u8>(m.bsdh.mid) == buf[0]);
    CHECK(m.bsdh.flags == buf[1]);
    CHECK(m.bsdh.bufs == sdp::load_be16(buf + 2));
    CHECK(m.bsdh.len == sdp::load_be32(buf + 4));
    CHECK(m.bsdh.mseq == sdp::load_be32(buf + 8));
    CHECK(m.bsdh.mseq_ack == sdp::load_be32(buf + 12));

    // Lengths: header <= len <= size, payload = the rest of len.
    const u32 min_header = wire::header_size(m.bsdh.mid);
    CHECK(min_header >= SDP_BSDH_SIZE);
    CHECK(m.bsdh.len >= min_header);
    CHECK(m.bsdh.len <= size);
    const u32 headers = DecodedHeaderLen(m);
    CHECK(static_cast<u64>(headers) + m.payload_len == m.bsdh.len);
    if (m.payload_len == 0) {
        CHECK(m.payload == nullptr);
    } else {
        CHECK(m.payload == buf + headers);
        CHECK(m.payload >= buf && m.payload < buf + size);
        CHECK(m.payload_len <= size - headers);
    }
    if (IsFixedSize(m.bsdh.mid))
        CHECK(m.bsdh.len == min_header && m.payload_len == 0);

    // Per-message constraints decode promises to enforce.
    switch (m.bsdh.mid) {
    case Mid::kHello:
        CHECK(m.bsdh.len == SDP_HELLO_MODERN_SIZE || m.bsdh.len >= SDP_HELLO_FULL_SIZE);
        CHECK(m.hello.major == SDP_VERSION_MAJOR);
        CHECK(m.hello.minor <= 0xf && m.hello.caps <= 0xf);
        CHECK(m.hello.ip_version == wire::IpVersion::kV4 ||
              m.hello.ip_version == wire::IpVersion::kV6);
        CHECK(m.hello.max_adverts != 0);
        CHECK(m.hello.has_addresses == (m.bsdh.len >= SDP_HELLO_FULL_SIZE));
        CHECK(m.payload_len == 0);
        break;
    case Mid::kHelloAck:
        CHECK(m.hello_ack.major == SDP_VERSION_MAJOR);
        CHECK(m.hello_ack.minor <= 0xf && m.hello_ack.ip_version <= 0xf && m.hello_ack.caps <= 0xf);
        break;
    case Mid::kSrcAvail:
        CHECK(m.src_avail.len != 0);
        break;
    case Mid::kSinkAvail:
        CHECK(m.sink_avail.len != 0);
        break;
    default:
        break;
    }
}

bool SameFields(const Message& a, const Message& b)
{
    if (a.bsdh.mid != b.bsdh.mid || a.bsdh.flags != b.bsdh.flags || a.bsdh.bufs != b.bsdh.bufs ||
        a.bsdh.mseq != b.bsdh.mseq || a.bsdh.mseq_ack != b.bsdh.mseq_ack ||
        a.payload_len != b.payload_len)
        return false;
    if (a.payload_len != 0 && std::memcmp(a.payload, b.payload, a.payload_len) != 0)
        return false;
    switch (a.bsdh.mid) {
    case Mid::kHello: {
        const wire::Hello& x = a.hello;
        const wire::Hello& y = b.hello;
        return x.major == y.major && x.minor == y.minor && x.ip_version == y.ip_version &&
               x.caps == y.caps && x.max_adverts == y.max_adverts &&
               x.desired_remote_rcv_size == y.desired_remote_rcv_size &&
               x.local_rcv_size == y.local_rcv_size && x.local_port == y.local_port &&
               x.has_addresses == y.has_addresses &&
               std::memcmp(x.src_addr, y.src_addr, sizeof(x.src_addr)) == 0 &&
               std::memcmp(x.dst_addr, y.dst_addr, sizeof(x.dst_addr)) == 0;
    }
    case Mid::kHelloAck: {
        const wire::HelloAck& x = a.hello_ack;
        const wire::HelloAck& y = b.hello_ack;
        return x.major == y.major && x.minor == y.minor && x.ip_version == y.ip_version &&
               x.caps == y.caps && x.ext_max_adverts == y.ext_max_adverts &&
               x.actual_rcv_size == y.actual_rcv_size;
    }
    case Mid::kSrcAvail:
        return a.src_avail.len == b.src_avail.len && a.src_avail.rkey == b.src_avail.rkey &&
               a.src_avail.vaddr == b.src_avail.vaddr;
    case Mid::kSinkAvail:
        return a.sink_avail.len == b.sink_avail.len && a.sink_avail.rkey == b.sink_avail.rkey &&
               a.sink_avail.vaddr == b.sink_avail.vaddr &&
               a.sink_avail.non_discard == b.sink_avail.non_discard;
    case Mid::kRdmaWrCompl:
    case Mid::kRdmaRdCompl:
        return a.rdma_compl_len == b.rdma_compl_len;
    case Mid::kChRcvBuf:
    case Mid::kChRcvBufAck:
        return a.rcv_buf_size == b.rcv_buf_size;
    default:
        return true;
    }
}

// Round-trip oracle: re-encode an accepted message, compare the bytes with
// the input and decode the result again.
void CheckRoundTrip(const u8* buf, const Message& m)
{
    const u32 headers = EncodedHeaderLen(m);
    const usize total = static_cast<usize>(headers) + m.payload_len;
    std::unique_ptr<u8[]> out(new u8[total]);
    usize written = 0;
    // Exactly `headers` bytes of room: the encoder must not need more.
    CHECK(wire::encode_header(m, out.get(), headers, &written) == EncodeError::kNone);
    CHECK(written == headers);
    if (m.payload_len != 0)
        std::memcpy(out.get() + headers, m.payload, m.payload_len);

    // A historical Hello longer than 64 bytes re-encodes as exactly 64: its
    // len field and reserved tail are the only legitimate differences.
    const bool shortened = m.bsdh.mid == Mid::kHello && m.bsdh.len != headers;
    CHECK(sdp::load_be32(out.get() + 4) == total);
    for (usize i = 0; i < total; i++) {
        if (IsReservedByte(m.bsdh.mid, i)) {
            CHECK(out[i] == 0);
            continue;
        }
        if (shortened && i >= 4 && i < 8)
            continue;
        CHECK(out[i] == buf[i]);
    }

    Message again{};
    CHECK(wire::decode(out.get(), total, &again) == DecodeError::kNone);
    CHECK(SameFields(m, again));
    CHECK(again.bsdh.len == total);
    CHECK(shortened || again.bsdh.len == m.bsdh.len);
}

// ---------------------------------------------------------------------------
// Credit ledger, checked against the formulas in credits.h.
// ---------------------------------------------------------------------------

struct LedgerState {
    u32 credits, next_tx, last_rx, remote;
    bool operator==(const LedgerState& o) const
    {
        return credits == o.credits && next_tx == o.next_tx && last_rx == o.last_rx &&
               remote == o.remote;
    }
};

LedgerState StateOf(const CreditLedger& c)
{
    return {c.tx_credits(), c.next_tx_mseq(), c.last_rx_mseq(), c.remote_credits()};
}

void CheckDueRule(const CreditLedger& c, u16 posted)
{
    const u64 remote = c.remote_credits();
    const bool want =
        posted > remote && (2ull * posted > 3 * remote || remote <= CreditLedger::kControlReserve);
    CHECK(c.credit_update_due(posted) == want);
}

void StampChecked(CreditLedger* c, u16 posted)
{
    // The caller contract: only send with a credit in hand.
    if (!c->may_send_control())
        return;
    const LedgerState before = StateOf(*c);
    wire::Bsdh out{};
    c->stamp_send(&out, posted);
    CHECK(out.mseq == before.next_tx);
    CHECK(out.mseq_ack == before.last_rx);
    CHECK(out.bufs == posted);
    CHECK(c->next_tx_mseq() == before.next_tx + 1);
    CHECK(c->tx_credits() == before.credits - 1);
    CHECK(c->remote_credits() == posted); // nothing received since telling the peer
    CHECK(c->may_send_data() == (c->tx_credits() > CreditLedger::kControlReserve));
}

void ReceiveChecked(CreditLedger* c, const wire::Bsdh& in)
{
    const LedgerState before = StateOf(*c);
    const u32 last_sent = before.next_tx - 1;
    const u32 in_flight = last_sent - in.mseq_ack;
    CreditLedger::RxError want = CreditLedger::RxError::kNone;
    if (in.mseq != static_cast<u32>(before.last_rx + 1))
        want = CreditLedger::RxError::kSequenceGap;
    else if (in_flight > 0x7fffffffu)
        want = CreditLedger::RxError::kAckFromFuture;

    const CreditLedger::RxError got = c->on_receive(in);
    CHECK(got == want);
    if (got != CreditLedger::RxError::kNone) {
        CHECK(StateOf(*c) == before); // the caller aborts; nothing half-applied
        return;
    }
    CHECK(c->last_rx_mseq() == in.mseq);
    CHECK(c->next_tx_mseq() == before.next_tx);
    CHECK(c->tx_credits() == (in.bufs > in_flight ? in.bufs - in_flight : 0));
    CHECK(c->tx_credits() <= in.bufs);
    // One more of our buffers used by the peer.
    CHECK(c->remote_credits() == (before.remote > 0 ? before.remote - 1 : 0));
}

// Knobs taken from a message so the fuzzer steers them.
u16 PostedFor(const wire::Bsdh& b)
{
    return static_cast<u16>(b.bufs ^ (b.flags << 8));
}
int SendsBefore(const wire::Bsdh& b)
{
    return b.flags & 0x7;
}

// A single decoded message, received by a ledger that expects its mseq and
// has sent a few messages, so that its mseq_ack meets a live window.
void LedgerSingle(const wire::Bsdh& in)
{
    CreditLedger c;
    const wire::Bsdh hello{Mid::kHelloAck, 0, in.bufs, SDP_HELLO_ACK_SIZE, in.mseq - 1, 0};
    c.start(hello, PostedFor(in));
    CHECK(c.tx_credits() == in.bufs && c.next_tx_mseq() == 1 && c.last_rx_mseq() == in.mseq - 1);
    for (int i = 0; i < SendsBefore(in); i++)
        StampChecked(&c, PostedFor(in));
    ReceiveChecked(&c, in);
    CheckDueRule(c, PostedFor(in));
}

// The input as a receive stream: the first message plays the peer's
// HelloAck, every later one is received after a few sends of our own.
void LedgerStream(const u8* buf, usize size)
{
    CreditLedger c;
    usize off = 0;
    for (int n = 0; n < 256 && off < size; n++) {
        Message m{};
        if (wire::decode(buf + off, size - off, &m) != DecodeError::kNone)
            return;
        const u16 posted = PostedFor(m.bsdh);
        if (n == 0) {
            c.start(m.bsdh, posted);
        } else {
            for (int i = 0; i < SendsBefore(m.bsdh); i++)
                StampChecked(&c, posted);
            ReceiveChecked(&c, m.bsdh);
        }
        CheckDueRule(c, posted);
        off += m.bsdh.len; // >= 16 for any accepted message
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::unique_ptr<u8[]> buf = HeapCopy(data, size);

    Message m{};
    const DecodeError err = wire::decode(buf.get(), size, &m);
    CHECK(err <= DecodeError::kBadField);
    if (size < SDP_BSDH_SIZE)
        CHECK(err == DecodeError::kShortBuffer);
    else if (wire::header_size(static_cast<Mid>(buf[0])) == 0)
        CHECK(err == DecodeError::kUnknownId || err == DecodeError::kUnsupported);

    if (err == DecodeError::kNone) {
        CheckAcceptedMessage(buf.get(), size, m);
        CheckRoundTrip(buf.get(), m);

        // Bytes after len are ignored: the message alone decodes the same.
        if (m.bsdh.len < size) {
            const std::unique_ptr<u8[]> exact = HeapCopy(buf.get(), m.bsdh.len);
            Message alone{};
            CHECK(wire::decode(exact.get(), m.bsdh.len, &alone) == DecodeError::kNone);
            // Payload pointers differ (different buffers); contents must not.
            CHECK(SameFields(m, alone) && alone.bsdh.len == m.bsdh.len);
        }
        LedgerSingle(m.bsdh);
    }
    LedgerStream(buf.get(), size);
    return 0;
}
