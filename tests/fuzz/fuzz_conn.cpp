// SPDX-License-Identifier: GPL-2.0
//
// libFuzzer target: the connection engine and its zero-copy state machines,
// driven through the C ABI (sdp_core.h) by sequences of operations.
//
// The input is a small configuration (buffer sizes, ring sizes, an optional
// corruption of the Hello or HelloAck) followed by a stream of operations.
// Two engines are connected by an in-memory wire that delivers every SEND
// into a posted receive buffer of the peer, in order, as the kernel glue and
// the simulation (tests/unit/sim_world.h) do.  The simulation's World picks
// its own events from a PRNG and cannot take foreign messages, so this is a
// smaller model whose every step comes from the input.  Each side's host
// model is an honest glue: an application writes and reads stream bytes,
// segments go out when tx_decide() says so, control_due() messages go out,
// sends complete, and zero copy moves bytes by SrcAvail + RDMA Read and
// SinkAvail + RDMA Write against registrations the model keeps.  Operations
// may also inject hostile messages into either side, built from the input:
// arbitrary BSDH fields, mids, lengths, bufs, mseq/mseq_ack, offers with any
// len/vaddr/rkey, completions of any byte count, or raw bytes.
//
// Oracles (abort() on violation; ASan and UBSan catch the rest):
//  * every message the engine builds decodes, is stamped with the next mseq,
//    acknowledges the last message received and advertises the posted
//    buffers; it needed a credit (Data with payload, SrcAvail and SinkAvail
//    one above the control reserve) and spent exactly one; it is never
//    longer than the peer's receive buffer (nor, for Data, our send buffer);
//  * credits never exceed the bufs of the last message accepted, and while
//    nothing hostile happened, never the receive buffers the peer really has
//    posted and empty minus our SENDs on their way (no SEND without a posted
//    receive);
//  * before the Hello exchange completes, and once the engine reported a
//    protocol error or is in SDP_CS_ABORTED (AbortConn sent or received),
//    on_recv() refuses every message; an aborted engine lets nothing out;
//  * state bits are never cleared; data_in_flight() counts the Data SENDs
//    not completed;
//  * zero copy: an accepted RdmaRdCompl/RdmaWrCompl falls inside what our
//    SrcAvails offered (up to four in flight, acknowledged in stream order)
//    or our SinkAvail advertised (one write per
//    advertisement), acknowledged counts never exceed the offer, accepted
//    offers are real ranges and are reported back faithfully, completions we
//    build report exactly the bytes read or written, and with no hostile
//    message an RDMA Read or Write only touches a live registration of the
//    peer at the next stream offset;
//  * with no hostile message, the engine never rejects a message of its
//    honest peer (unless it aborted), and the bytes each reader receives
//    (Data payloads, RDMA Reads, RDMA Writes) are exactly the peer's stream,
//    in order and complete at DisConn.
#include "credits.h"
#include "sdp_core.h"
#include "sdp_wire.h"
#include "wire.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <vector>

namespace {

using sdp::u16;
using sdp::u32;
using sdp::u64;
using sdp::u8;
namespace wire = sdp::wire;
using Bytes = std::vector<u8>;

[[noreturn]] void fail(const char* what, int line)
{
    std::fprintf(stderr, "fuzz_conn.cpp:%d: invariant violated: %s\n", line, what);
    std::abort();
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail(#cond, __LINE__);                                                                 \
    } while (0)

constexpr u32 kReserve = sdp::CreditLedger::kControlReserve;
constexpr u32 kBsdh = SDP_BSDH_SIZE;
// Stream bytes one application writes at most, operations per input.
constexpr u64 kMaxStream = 1u << 16;
constexpr unsigned kMaxOps = 2048;

// SDP_FUZZ_CONN_VERBOSE=1: trace every message and where a run ended (to
// write seeds or read a reproducer).
bool verbose()
{
    static const bool kVerbose = std::getenv("SDP_FUZZ_CONN_VERBOSE") != nullptr;
    return kVerbose;
}

// The input, consumed front to back; zeros once it is exhausted.
class Input {
  public:
    Input(const u8* data, std::size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    u8 byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    u16 u16v()
    {
        const u32 lo = byte();
        return static_cast<u16>(lo | (static_cast<u32>(byte()) << 8));
    }
    u32 u32v()
    {
        const u32 lo = u16v();
        return lo | (static_cast<u32>(u16v()) << 16);
    }
    u64 u64v()
    {
        const u64 lo = u32v();
        return lo | (static_cast<u64>(u32v()) << 32);
    }
    // One of `values` (selector below 0x80), or a value from the input.
    u32 pick(std::initializer_list<u32> values)
    {
        const u8 sel = byte();
        if (sel < 0x80)
            return values.begin()[sel % values.size()];
        return (sel & 1) != 0 ? u32v() : byte();
    }

  private:
    const u8* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

// Byte i of side s's stream.
u8 pattern(int s, u64 i)
{
    return static_cast<u8>(i * 7 + (i >> 8) * 13 + (i >> 16) + static_cast<u64>(s) * 101);
}

bool fits_zcopy(u32 len, u64 vaddr)
{
    return len != 0 && len <= SDP_ZC_MAX_LEN && vaddr + len > vaddr;
}

// A registration as its owner made it (live until the owner releases it).
// Source: stream bytes [off, off + len) at vaddr.  Sink: the reader's buffer
// for stream bytes from off; landed = bytes an RDMA Write put there.
struct Reg {
    Bytes buf;
    u64 vaddr = 0;
    u64 off = 0;
    u32 rkey = 0;
    u32 len = 0;
    u32 landed = 0;
    u32 acked = 0; // source: bytes the sink reported read (RdmaRdCompl)
    bool live = false;
    bool settled = false; // source: ended and the stream accounted
};

// A SEND (msg) or an RDMA Write of stream bytes [off, off + len) to
// (rkey, vaddr), in the order the sender posted them.
struct WireItem {
    Bytes msg;
    u64 id = 0; // SENDs: posting order
    u64 vaddr = 0;
    u64 off = 0;
    u32 rkey = 0;
    u32 len = 0;
    bool rdma = false;
};

struct Sent {
    u64 id;
    u32 mid;
};

struct Side {
    sdp_core_conn conn{};
    u32 rx_buf_size = 0;
    u32 tx_buf_size = 0;
    u32 rx_bufs = 0;
    u32 rx_empty = 0;     // receive buffers posted and empty
    std::deque<u32> held; // per buffer holding unread payload: bytes left
    u32 peer_rcv_size = 0;
    u32 sent = 0;      // messages built: the mseq of the last one
    u32 accepted = 0;  // messages accepted: the last mseq received
    u32 last_bufs = 0; // bufs of the last message accepted (or Hello)
    u32 state = 0;     // as last seen
    bool dead = false; // on_recv() reported an error
    bool shut = false;
    // writer
    u64 stream_sent = 0; // stream offset of the next byte to send
    u64 pending = 0;     // bytes written by the application, not yet sent
    std::deque<Sent> sends;
    u64 next_id = 0;
    u32 data_sends = 0; // Data SENDs among `sends`
    // reader
    u64 got = 0; // stream bytes received, every path
    // zero copy
    std::deque<Reg> srcs;  // our SrcAvails, oldest first, until released
    u32 src_limit = 1;     // sdp_core_set_src_limit()
    std::vector<Reg> advs; // our SinkAvails: the pieces of one receive, in order
    u32 rd_reading = 0;
    u32 rd_unreported = 0;
    u32 wr_unreported = 0;
    u32 next_key = 1;
};

// Our SrcAvail with this key, if it is not released.
const Reg* find_src(const Side& d, u32 rkey)
{
    for (const Reg& r : d.srcs)
        if (r.rkey == rkey)
            return &r;
    return nullptr;
}

const Reg* find_adv(const Side& d, u32 rkey)
{
    for (const Reg& r : d.advs)
        if (r.rkey == rkey)
            return &r;
    return nullptr;
}

Reg* find_adv(Side& d, u32 rkey)
{
    return const_cast<Reg*>(find_adv(static_cast<const Side&>(d), rkey));
}

sdp_core_zc_status zc_of(const Side& d)
{
    sdp_core_zc_status st{};
    sdp_core_zc_query(&d.conn, &st);
    return st;
}

class Harness {
  public:
    explicit Harness(Input* in) : in_(*in) {}
    void run();

  private:
    Side& me(int s) { return sides_[s]; }
    Side& peer(int s) { return sides_[1 - s]; }
    u16 posted(int s) const { return static_cast<u16>(sides_[s].rx_empty); }
    u32 queued(int s) const { return sides_[s].pending != 0 ? 1 : 0; }
    u32 sends_on_wire(int s) const
    {
        u32 n = 0;
        for (const WireItem& w : wire_[s])
            n += w.rdma ? 0 : 1;
        return n;
    }
    bool aborted(int s) const { return (sides_[s].state & SDP_CS_ABORTED) != 0; }
    bool established(int s) const { return (sides_[s].state & SDP_CS_ESTABLISHED) != 0; }

    void setup();
    void op();
    void check_invariants();
    void refresh_state(int s);

    // transmit
    int build(int s, u32 mid, u32 payload, u32 flags);
    void after_build(int s, const u8* hdr, int rc, u32 mid, u32 payload, u32 credits0);
    void post(int s, Bytes msg);
    void push(int s, u32 opts, u32 max_segs);
    void push_next(int s, u32 opts, u32 max_sends);
    void control(int s);
    void tx_done(int s);
    void src_avail(int s);
    void sink_avail(int s);
    void sink_take(int s);
    void raw_build(int s);
    void late_hello(int s);
    void release(int s);

    // receive
    void deliver(int s);
    void receive(int s, const Bytes& msg);
    void accepted(int s, const Bytes& msg, const sdp_core_rx& rx, u32 state0,
                  const sdp_core_zc_status& zc0);
    void settle(int s);
    void read(int s, u32 n);
    void rd_start(int s);
    void rd_done(int s);
    void inject(int s);
    void inject_raw(int s);

    Input& in_;
    std::array<Side, 2> sides_{};
    std::array<std::deque<WireItem>, 2> wire_{}; // wire_[s]: from s to its peer
    std::array<u64, 2> delivered_{};             // SENDs of s that arrived
    bool hostile_ = false;                       // something no honest peer does happened
    u32 max_srcs_ = 0;                           // for the verbose summary
};

// ---- setup -------------------------------------------------------------------

constexpr u32 kSizes[] = {17, 20, 24, 35, 36, 37, 48, 64, 100, 256, 1024, 4096, 65536};

u32 size_from(u8 b)
{
    return kSizes[b % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

void Harness::setup()
{
    for (int s = 0; s < 2; s++) {
        Side& d = me(s);
        d.rx_buf_size = size_from(in_.byte());
        d.tx_buf_size = size_from(in_.byte());
        const u8 bufs = in_.byte();
        d.rx_bufs = 1 + bufs % 16;
        d.rx_empty = d.rx_bufs;
        sdp_core_conn_init(&d.conn, d.rx_buf_size, d.tx_buf_size);
        // Several SrcAvails of ours in flight, as sdp.ko's asynchronous
        // sends make them (the high bits: old seeds keep one).
        d.src_limit = 1 + (bufs >> 4) % SDP_CORE_MAX_ADVERTS;
        sdp_core_set_src_limit(&d.conn, d.src_limit);
        sdp_core_rx_posted(&d.conn, d.rx_empty);
        CHECK(sdp_core_state(&d.conn) == 0 && sdp_core_tx_credits(&d.conn) == 0);
    }
    // Corruption of the Hello (1) or HelloAck (2), and its size.
    const u8 mode = in_.byte();
    const u8 target = mode >= 0xe0 ? 1 + (mode & 1) : 0;
    const u8 at = in_.byte();
    const u8 xor_with = in_.byte();
    const u8 cut = in_.byte();

    // Nothing goes before the exchange.
    u8 hdr[64] = {};
    CHECK(sdp_core_tx_build(&me(0).conn, hdr, SDP_MID_DATA, 0, 0) < 0);
    CHECK(sdp_core_build_hello_ack(&me(1).conn, hdr, sizeof(hdr)) < 0);

    u8 req[SDP_CM_REQ_PRIVATE_DATA] = {};
    CHECK(sdp_core_build_hello(&me(0).conn, req, SDP_HELLO_MODERN_SIZE - 1, 1, 0) ==
          -SDP_CORE_ENOROOM);
    const int n = sdp_core_build_hello(&me(0).conn, req, sizeof(req), 5001, 0);
    CHECK(n == SDP_HELLO_MODERN_SIZE);
    wire::Message m{};
    CHECK(wire::decode(req, sizeof(req), &m) == wire::DecodeError::kNone);
    CHECK(m.bsdh.mid == wire::Mid::kHello && m.bsdh.mseq == 0 && m.bsdh.bufs == posted(0));
    CHECK(m.hello.local_rcv_size == me(0).rx_buf_size);
    CHECK(m.hello.desired_remote_rcv_size == me(0).tx_buf_size);

    u32 req_size = sizeof(req);
    if (target == 1) {
        req[at % sizeof(req)] ^= xor_with;
        req_size = cut < 0x80 ? req_size : cut % (req_size + 1);
        hostile_ = true;
    }
    if (sdp_core_on_hello(&me(1).conn, req, req_size) != 0)
        return; // neither side is established; every call below must say so
    CHECK(wire::decode(req, req_size, &m) == wire::DecodeError::kNone);
    me(1).peer_rcv_size = m.hello.local_rcv_size;
    me(1).last_bufs = m.bsdh.bufs;

    u8 rep[SDP_CM_REP_PRIVATE_DATA] = {};
    CHECK(sdp_core_build_hello_ack(&me(1).conn, rep, SDP_HELLO_ACK_SIZE - 1) == -SDP_CORE_ENOROOM);
    CHECK((sdp_core_state(&me(1).conn) & SDP_CS_ESTABLISHED) == 0);
    const int k = sdp_core_build_hello_ack(&me(1).conn, rep, sizeof(rep));
    CHECK(k == SDP_HELLO_ACK_SIZE);
    CHECK(wire::decode(rep, sizeof(rep), &m) == wire::DecodeError::kNone);
    CHECK(m.bsdh.mid == wire::Mid::kHelloAck && m.bsdh.mseq == 0 && m.bsdh.bufs == posted(1));
    CHECK(m.hello_ack.actual_rcv_size == me(1).rx_buf_size);
    CHECK(sdp_core_tx_credits(&me(1).conn) == me(1).last_bufs);

    u32 rep_size = sizeof(rep);
    if (target == 2) {
        rep[at % sizeof(rep)] ^= xor_with;
        rep_size = cut < 0x80 ? rep_size : cut % (rep_size + 1);
        hostile_ = true;
    }
    if (sdp_core_on_hello_ack(&me(0).conn, rep, rep_size) == 0) {
        CHECK(wire::decode(rep, rep_size, &m) == wire::DecodeError::kNone);
        me(0).peer_rcv_size = m.hello_ack.actual_rcv_size;
        me(0).last_bufs = m.bsdh.bufs;
        CHECK(sdp_core_tx_credits(&me(0).conn) == me(0).last_bufs);
    }
    for (int s = 0; s < 2; s++) {
        refresh_state(s);
        if (!established(s))
            continue;
        // Largest payload: both our send buffer and the peer's receive
        // buffer hold it with its BSDH.
        const Side& d = me(s);
        const u32 limit = d.tx_buf_size < d.peer_rcv_size ? d.tx_buf_size : d.peer_rcv_size;
        CHECK(d.peer_rcv_size > kBsdh);
        CHECK(sdp_core_seg_max(&d.conn) == limit - kBsdh);
    }
}

// ---- invariants -----------------------------------------------------------------

void Harness::refresh_state(int s)
{
    Side& d = me(s);
    const u32 now = sdp_core_state(&d.conn);
    CHECK((now & d.state) == d.state); // no state bit is ever cleared
    d.state = now;
}

void Harness::check_invariants()
{
    for (int s = 0; s < 2; s++) {
        refresh_state(s);
        settle(s);
        Side& d = me(s);
        const u32 credits = sdp_core_tx_credits(&d.conn);
        CHECK(sdp_core_data_in_flight(&d.conn) == d.data_sends);
        const sdp_core_zc_status st = zc_of(d);
        CHECK(st.src_state <= SDP_ZC_DONE && st.adv_state <= SDP_ZC_DONE);
        CHECK(st.src_acked <= st.src_len);
        CHECK(st.rsa_left <= SDP_CORE_MAX_ADVERTS * SDP_ZC_MAX_LEN &&
              st.psink_len <= SDP_ZC_MAX_LEN);
        CHECK((st.rsa_reading != 0) == (d.rd_reading != 0));
        CHECK((st.wr_compl_pending != 0) == (d.wr_unreported != 0));
        // Our offers: no more than either side's limit; src_* is the oldest.
        CHECK(st.src_offers == d.srcs.size() && st.src_offers <= d.src_limit);
        CHECK(st.src_offers <= 1 || st.src_offers <= st.peer_max_adverts);
        CHECK((st.src_state != SDP_ZC_IDLE) == !d.srcs.empty());
        CHECK(st.src_pending == 0 || !d.srcs.empty());
        if (!d.srcs.empty()) {
            const Reg& head = d.srcs.front();
            CHECK(head.live && st.src_len == head.len && st.src_acked == head.acked);
        }
        CHECK(st.adv_count == d.advs.size());
        CHECK(st.adv_count <= SDP_CORE_MAX_ADVERTS && st.psink_count <= SDP_CORE_MAX_ADVERTS);
        if (st.adv_state != SDP_ZC_IDLE) {
            u64 total = 0;
            for (const Reg& a : d.advs) {
                CHECK(a.live);
                total += a.len;
            }
            CHECK(st.adv_written <= total);
        }
        if (!established(s)) {
            CHECK(credits == 0);
            CHECK(sdp_core_tx_decide(&d.conn, 1, 1, SDP_TXO_PUSH) == SDP_TX_CLOSED);
            CHECK(sdp_core_control_due(&d.conn, 0) == 0);
            continue;
        }
        CHECK(credits <= d.last_bufs);
        if (aborted(s)) {
            CHECK(sdp_core_tx_decide(&d.conn, 1, 1, SDP_TXO_PUSH) == SDP_TX_CLOSED);
            CHECK(sdp_core_control_due(&d.conn, queued(s)) == 0);
        }
        // The credits the engine believes in are real: the peer posted
        // that many empty buffers beyond our SENDs on their way.
        if (!hostile_) {
            const long real = static_cast<long>(peer(s).rx_empty) - sends_on_wire(s);
            CHECK(real >= 0);
            CHECK(static_cast<long>(credits) <= real);
        }
    }
}

// ---- transmit ---------------------------------------------------------------------

void Harness::post(int s, Bytes msg)
{
    Side& d = me(s);
    WireItem w;
    w.msg = std::move(msg);
    w.id = d.next_id++;
    const u32 mid = w.msg[0];
    d.sends.push_back({w.id, mid});
    if (mid == SDP_MID_DATA)
        d.data_sends++;
    wire_[s].push_back(std::move(w));
}

// Checks on a message the engine built (rc: tx_build's result), which then
// goes on the wire with its payload (the next stream bytes).
void Harness::after_build(int s, const u8* hdr, int rc, u32 mid, u32 payload, u32 credits0)
{
    Side& d = me(s);
    if (rc < 0) {
        CHECK(sdp_core_tx_credits(&d.conn) == credits0); // a failed build spends nothing
        return;
    }
    CHECK(established(s) && !aborted(s));
    CHECK(!d.dead || mid == SDP_MID_ABORT_CONN);
    CHECK(credits0 > 0);
    const bool stream = (mid == SDP_MID_DATA && payload != 0) || mid == SDP_MID_SRC_AVAIL ||
                        mid == SDP_MID_SINK_AVAIL;
    if (stream)
        CHECK(credits0 > kReserve);
    CHECK(sdp_core_tx_credits(&d.conn) == credits0 - 1);
    CHECK(static_cast<u32>(rc) == wire::header_size(static_cast<wire::Mid>(mid)));
    if (mid != SDP_MID_DATA)
        CHECK(payload == 0);
    else
        CHECK(payload <= sdp_core_seg_max(&d.conn));

    if (verbose())
        std::fprintf(stderr, "%d tx mid %#x payload %u mseq %u credits %u\n", s, mid, payload,
                     d.sent + 1, credits0);
    Bytes msg(hdr, hdr + rc);
    for (u32 i = 0; i < payload; i++)
        msg.push_back(pattern(s, d.stream_sent + i));
    wire::Message m{};
    CHECK(wire::decode(msg.data(), msg.size(), &m) == wire::DecodeError::kNone);
    CHECK(static_cast<u32>(m.bsdh.mid) == mid && m.bsdh.len == msg.size());
    CHECK(m.bsdh.mseq == d.sent + 1);
    // A message refused after its sequence number was taken is acknowledged too.
    CHECK(m.bsdh.mseq_ack == d.accepted || (d.dead && m.bsdh.mseq_ack == d.accepted + 1));
    CHECK(m.bsdh.bufs == posted(s));
    // Never longer than the peer's receive buffer, Data never longer than ours.
    CHECK(m.bsdh.len <= d.peer_rcv_size);
    if (mid == SDP_MID_DATA)
        CHECK(m.bsdh.len <= d.tx_buf_size);
    // A request to shrink: every message after it fits the size it asks.
    if (mid == SDP_MID_CH_RCV_BUF && m.rcv_buf_size < d.peer_rcv_size)
        d.peer_rcv_size = m.rcv_buf_size;
    d.sent++;
    d.stream_sent += payload;
    d.pending -= payload;

    switch (mid) {
    case SDP_MID_RDMA_RD_COMPL:
        // Exactly the bytes our RDMA Reads brought.
        CHECK(m.rdma_compl_len == d.rd_unreported && m.rdma_compl_len != 0);
        d.rd_unreported = 0;
        break;
    case SDP_MID_RDMA_WR_COMPL:
        CHECK(m.rdma_compl_len == d.wr_unreported && m.rdma_compl_len != 0);
        d.wr_unreported = 0;
        break;
    case SDP_MID_SEND_SM:
        CHECK(d.rd_reading == 0); // never while a read may still land
        break;
    default:
        break;
    }
    post(s, std::move(msg));
    refresh_state(s);
    if (mid == SDP_MID_ABORT_CONN)
        CHECK(aborted(s));
    if (mid == SDP_MID_DISCONN)
        CHECK((d.state & SDP_CS_DISCONN_SENT) != 0);
}

int Harness::build(int s, u32 mid, u32 payload, u32 flags)
{
    Side& d = me(s);
    u8 hdr[64];
    std::memset(hdr, 0xa5, sizeof(hdr));
    const u32 credits0 = sdp_core_tx_credits(&d.conn);
    const int rc = sdp_core_tx_build(&d.conn, hdr, mid, payload, flags);
    after_build(s, hdr, rc, mid, payload, credits0);
    return rc;
}

// sdp_push(): post the queued segments the engine lets go, then a control
// message if one is due.
void Harness::push(int s, u32 opts, u32 max_segs)
{
    Side& d = me(s);
    for (u32 i = 0; i < max_segs && d.pending != 0; i++) {
        const u32 seg_max = sdp_core_seg_max(&d.conn);
        const u32 seg = d.pending < seg_max ? static_cast<u32>(d.pending) : seg_max;
        const bool full = seg == seg_max || d.pending > seg;
        const sdp_core_tx_verdict v = sdp_core_tx_decide(&d.conn, seg, full ? 1 : 0, opts);
        CHECK(v <= SDP_TX_CLOSED);
        if (!established(s) || aborted(s) || (d.state & SDP_CS_DISCONN_SENT) != 0)
            CHECK(v == SDP_TX_CLOSED);
        if (v != SDP_TX_POST)
            break;
        CHECK(seg != 0);
        CHECK(sdp_core_tx_credits(&d.conn) > kReserve);
        // What tx_decide() lets go, tx_build() builds.
        CHECK(build(s, SDP_MID_DATA, seg, 0) == static_cast<int>(kBsdh));
    }
    control(s);
}

// sdp_push() as the kernel runs it: sdp_core_tx_next() until it says
// nothing goes, the pending bytes described as segments of seg_max.
void Harness::push_next(int s, u32 opts, u32 max_sends)
{
    Side& d = me(s);
    for (u32 i = 0; i < max_sends; i++) {
        const u32 seg_max = sdp_core_seg_max(&d.conn);
        const u32 seg = d.pending < seg_max ? static_cast<u32>(d.pending) : seg_max;
        u8 seg_hdr[kBsdh];
        u8 ctl[64];
        std::memset(seg_hdr, 0xa5, sizeof(seg_hdr));
        std::memset(ctl, 0xa5, sizeof(ctl));
        sdp_core_tx_ring ring{};
        ring.seg_bytes = seg;
        ring.segs_queued = d.pending == 0 ? 0 : (d.pending > seg ? 2 : 1);
        ring.seg_hdr = seg_hdr;
        ring.ctl_hdr = ctl;
        ring.ctl_size = sizeof(ctl);
        ring.opts = opts;
        const u32 credits0 = sdp_core_tx_credits(&d.conn);
        sdp_core_tx_action act{};
        CHECK(sdp_core_tx_next(&d.conn, &ring, &act) == 0);
        CHECK(act.data <= SDP_TX_CLOSED);
        if (act.kind == SDP_TXN_NONE) {
            CHECK(sdp_core_tx_credits(&d.conn) == credits0);
            CHECK(d.pending == 0 || act.data != SDP_TX_POST);
            return;
        }
        const bool data = act.kind == SDP_TXN_DATA;
        CHECK(data || act.kind == SDP_TXN_CONTROL);
        if (data)
            CHECK(seg != 0 && act.mid == SDP_MID_DATA && act.data == SDP_TX_POST);
        else
            CHECK(act.mid != SDP_MID_ABORT_CONN && act.mid != SDP_MID_SRC_AVAIL &&
                  act.mid != SDP_MID_SINK_AVAIL);
        // Posted as built: the same checks as a tx_build() by hand.
        after_build(s, data ? seg_hdr : ctl, static_cast<int>(act.hdr_len), act.mid, data ? seg : 0,
                    credits0);
    }
}

void Harness::control(int s)
{
    const int due = sdp_core_control_due(&me(s).conn, queued(s));
    if (due == 0)
        return;
    CHECK(established(s) && !aborted(s));
    CHECK(due == SDP_MID_DATA || due == SDP_MID_DISCONN || due == SDP_MID_SEND_SM ||
          due == SDP_MID_RDMA_WR_COMPL || due == SDP_MID_RDMA_RD_COMPL ||
          due == SDP_MID_SRC_AVAIL_CANCEL || due == SDP_MID_SINK_AVAIL_CANCEL ||
          due == SDP_MID_SINK_CANCEL_ACK || due == SDP_MID_CH_RCV_BUF ||
          due == SDP_MID_CH_RCV_BUF_ACK);
    // What control_due() asks for, tx_build() builds.
    CHECK(build(s, static_cast<u32>(due), 0, 0) > 0);
}

// The oldest SEND that reached the peer completes.
void Harness::tx_done(int s)
{
    Side& d = me(s);
    if (d.sends.empty() || d.sends.front().id >= delivered_[s])
        return;
    const u32 mid = d.sends.front().mid;
    d.sends.pop_front();
    if (mid == SDP_MID_DATA)
        d.data_sends--;
    sdp_core_tx_done(&d.conn, mid);
}

void Harness::src_avail(int s)
{
    Side& d = me(s);
    u32 len = 1 + static_cast<u32>(in_.u16v() % (d.pending != 0 ? d.pending : 1));
    u64 vaddr = 0x100000000000ull * static_cast<u64>(s + 1) + (static_cast<u64>(in_.byte()) << 20);
    const u8 how = in_.byte();
    const u32 size = how < 8 ? SDP_SRC_AVAIL_HDR_SIZE - 1 - how : SDP_SRC_AVAIL_HDR_SIZE;
    bool valid = true;
    if (how != 0xff && d.pending == 0)
        return; // nothing to offer
    if (how == 0xff) {
        // An offer no host may make (empty, too long, wrapping): refused.
        len = in_.pick({0, SDP_ZC_MAX_LEN + 1, 0xffffffffu, 1});
        if (in_.pick({0, 1}) != 0)
            vaddr = ~0ull - in_.byte();
        if (fits_zcopy(len, vaddr))
            return;
        valid = false;
    }
    const sdp_core_zc_status zc0 = zc_of(d);
    const bool room = sdp_core_src_room(&d.conn) != 0;
    // A full queue (our limit or the peer's max_adverts) has no room, nor
    // one whose offers ended with bytes left for bcopy.
    if (zc0.src_offers >= d.src_limit ||
        (zc0.src_offers != 0 && zc0.src_offers >= zc0.peer_max_adverts))
        CHECK(!room);
    if ((zc0.src_pending == 0) && !d.srcs.empty() && d.srcs.back().acked != d.srcs.back().len)
        CHECK(!room);
    const u32 credits0 = sdp_core_tx_credits(&d.conn);
    const sdp_core_zc zc{len, d.next_key, vaddr};
    u8 hdr[SDP_SRC_AVAIL_HDR_SIZE];
    const int rc = sdp_core_tx_src_avail(&d.conn, hdr, size, &zc);
    if (!valid || size < SDP_SRC_AVAIL_HDR_SIZE || !established(s) || aborted(s) || d.shut || !room)
        CHECK(rc < 0);
    if (rc < 0) {
        CHECK(sdp_core_tx_credits(&d.conn) == credits0);
        const sdp_core_zc_status st = zc_of(d);
        CHECK(st.src_state == zc0.src_state && st.src_offers == zc0.src_offers);
        return;
    }
    Reg r;
    r.vaddr = vaddr;
    r.rkey = d.next_key++;
    r.len = len;
    r.off = d.stream_sent;
    r.live = true;
    d.srcs.push_back(std::move(r));
    if (d.srcs.size() > max_srcs_)
        max_srcs_ = static_cast<u32>(d.srcs.size());
    // The offered bytes leave the queue; whatever is not read comes back.
    after_build(s, hdr, rc, SDP_MID_SRC_AVAIL, 0, credits0);
    d.stream_sent += len;
    d.pending -= len;
    const sdp_core_zc_status st = zc_of(d);
    CHECK(st.src_offers == zc0.src_offers + 1 && st.src_pending != 0);
    if (zc0.src_offers == 0)
        CHECK(st.src_state == SDP_ZC_ACTIVE && st.src_len == len && st.src_acked == 0);
    else // queued behind the others: the oldest is still described
        CHECK(st.src_state == zc0.src_state && st.src_len == zc0.src_len &&
              st.src_acked == zc0.src_acked);
}

void Harness::sink_avail(int s)
{
    Side& d = me(s);
    u32 len = 1 + in_.u16v();
    const u64 vaddr = 0x200000000000ull * static_cast<u64>(s + 1) + in_.byte();
    const u8 how = in_.byte();
    bool valid = true;
    if (how == 0xff) {
        len = in_.pick({0, SDP_ZC_MAX_LEN + 1, 0xffffffffu, SDP_ZC_MAX_LEN});
        valid = fits_zcopy(len, vaddr);
    }
    const u32 size = how < 8 ? SDP_SINK_AVAIL_SIZE - 1 - how : SDP_SINK_AVAIL_SIZE;
    const sdp_core_zc_status zc0 = zc_of(d);
    const u32 room0 = sdp_core_adv_room(&d.conn);
    const u32 credits0 = sdp_core_tx_credits(&d.conn);
    const sdp_core_zc zc{len, d.next_key, vaddr};
    u8 hdr[SDP_SINK_AVAIL_SIZE];
    const int rc = sdp_core_tx_sink_avail(&d.conn, hdr, size, &zc);
    // A further piece only while every one before is untouched, and no
    // more than the peer accepts.
    CHECK(room0 <= SDP_CORE_MAX_ADVERTS && room0 + zc0.adv_count <= zc0.peer_max_adverts);
    if (!valid || size < SDP_SINK_AVAIL_SIZE || !established(s) || aborted(s) || room0 == 0 ||
        (zc0.adv_count != 0 && (zc0.adv_state != SDP_ZC_ACTIVE || zc0.adv_written != 0)) ||
        (d.state & SDP_CS_DISCONN_RCVD) != 0)
        CHECK(rc < 0);
    if (rc < 0) {
        CHECK(sdp_core_tx_credits(&d.conn) == credits0);
        CHECK(zc_of(d).adv_state == zc0.adv_state && zc_of(d).adv_count == zc0.adv_count);
        return;
    }
    CHECK(d.advs.size() == zc0.adv_count);
    Reg a;
    a.vaddr = vaddr;
    a.rkey = d.next_key++;
    a.len = len;
    // The bytes written there come next in the stream, after the pieces
    // before it.
    a.off = d.advs.empty() ? d.got : d.advs.back().off + d.advs.back().len;
    a.buf.assign(len < kMaxStream ? len : kMaxStream, 0);
    a.live = true;
    d.advs.push_back(std::move(a));
    after_build(s, hdr, rc, SDP_MID_SINK_AVAIL, 0, credits0);
    const sdp_core_zc_status st = zc_of(d);
    CHECK(st.adv_state == SDP_ZC_ACTIVE && st.adv_written == 0);
    CHECK(st.adv_count == zc0.adv_count + 1 && sdp_core_adv_room(&d.conn) == room0 - 1);
}

// The writer fills the peer's SinkAvail by RDMA Write.
void Harness::sink_take(int s)
{
    Side& d = me(s);
    const u32 want = in_.u16v();
    if (want > d.pending)
        return;
    const sdp_core_zc_status zc0 = zc_of(d);
    sdp_core_zc zc{};
    const int r = sdp_core_sink_take(&d.conn, want, &zc);
    CHECK(r == 0 || r == 1);
    if (r == 0)
        return;
    CHECK(established(s) && !aborted(s) && want != 0);
    CHECK(zc0.psink_usable != 0 && zc0.src_offers == 0 && zc0.wr_compl_pending == 0);
    CHECK(zc.len != 0 && zc.len <= want && zc.len <= zc0.psink_len);
    // One write per advertisement; one that leaves room in it ends the
    // pieces behind it.
    const sdp_core_zc_status now = zc_of(d);
    CHECK(now.psink_count == (zc.len < zc0.psink_len ? 0 : zc0.psink_count - 1));
    if (!hostile_) {
        // Into a live advertisement of the peer, at the next stream offset.
        const Reg* a = find_adv(peer(s), zc.rkey);
        CHECK(a != nullptr && a->live && zc.vaddr == a->vaddr && zc.len <= a->len);
        CHECK(a->off == d.stream_sent && a->landed == 0);
    }
    WireItem w;
    w.rdma = true;
    w.rkey = zc.rkey;
    w.vaddr = zc.vaddr;
    w.len = zc.len;
    w.off = d.stream_sent;
    wire_[s].push_back(std::move(w));
    d.stream_sent += zc.len;
    d.pending -= zc.len;
    d.wr_unreported = zc.len;
    // Its completion goes before anything else.
    if (sdp_core_tx_credits(&d.conn) > 0)
        CHECK(sdp_core_control_due(&d.conn, queued(s)) == SDP_MID_RDMA_WR_COMPL);
    CHECK(sdp_core_tx_decide(&d.conn, 1, 1, SDP_TXO_PUSH) != SDP_TX_POST);
}

// A host that asks for any message: the engine refuses what is not due.
void Harness::raw_build(int s)
{
    static constexpr u8 kMids[] = {SDP_MID_DATA,
                                   SDP_MID_DISCONN,
                                   SDP_MID_ABORT_CONN,
                                   SDP_MID_SEND_SM,
                                   SDP_MID_RDMA_WR_COMPL,
                                   SDP_MID_RDMA_RD_COMPL,
                                   SDP_MID_SRC_AVAIL,
                                   SDP_MID_SINK_AVAIL,
                                   SDP_MID_SRC_AVAIL_CANCEL,
                                   SDP_MID_SINK_AVAIL_CANCEL,
                                   SDP_MID_SINK_CANCEL_ACK,
                                   SDP_MID_HELLO,
                                   SDP_MID_HELLO_ACK,
                                   SDP_MID_CH_RCV_BUF,
                                   SDP_MID_MODE_CHANGE};
    Side& d = me(s);
    const u8 sel = in_.byte();
    const u32 mid = sel < sizeof(kMids) ? kMids[sel] : in_.byte();
    const u32 payload = in_.pick({0, 1, sdp_core_seg_max(&d.conn), sdp_core_seg_max(&d.conn) + 1});
    const u32 flags = in_.byte();
    // Stream bytes only as the application wrote them, DisConn only after
    // shutdown and the last byte.
    if (mid == SDP_MID_DATA && payload != 0 && payload <= sdp_core_seg_max(&d.conn) &&
        payload > d.pending)
        return;
    // (tx_build() itself does not hold a DisConn behind our SrcAvail or
    // RdmaWrCompl: only control_due() does, and the glue asks it.)
    const sdp_core_zc_status zc0 = zc_of(d);
    if (mid == SDP_MID_DISCONN &&
        (!d.shut || d.pending != 0 || zc0.src_pending != 0 || zc0.wr_compl_pending != 0))
        return;
    // Offers need their own call, Hello and the rest are never sent.  (A
    // ChRcvBuf, like its answer, goes when the engine has one due, as
    // sdp_push() sends it.)
    const bool refuse = mid == SDP_MID_SRC_AVAIL || mid == SDP_MID_SINK_AVAIL ||
                        mid == SDP_MID_HELLO || mid == SDP_MID_HELLO_ACK ||
                        mid == SDP_MID_MODE_CHANGE || (mid != SDP_MID_DATA && payload != 0) ||
                        payload > sdp_core_seg_max(&d.conn) || sdp_core_tx_credits(&d.conn) == 0 ||
                        (mid == SDP_MID_DISCONN && (d.state & SDP_CS_DISCONN_SENT) != 0);
    const int rc = build(s, mid, payload, flags);
    if (refuse)
        CHECK(rc < 0);
}

// Hello calls once the exchange is over change nothing.
void Harness::late_hello(int s)
{
    Side& d = me(s);
    if (!established(s))
        return;
    const u32 credits0 = sdp_core_tx_credits(&d.conn);
    const u32 seg0 = sdp_core_seg_max(&d.conn);
    u8 buf[SDP_CM_REP_PRIVATE_DATA] = {};
    wire::Message m{};
    m.bsdh.mid = wire::Mid::kHelloAck;
    m.bsdh.bufs = in_.u16v();
    m.hello_ack.major = SDP_VERSION_MAJOR;
    m.hello_ack.actual_rcv_size = in_.u32v();
    sdp::usize n = 0;
    CHECK(wire::encode_header(m, buf, sizeof(buf), &n) == wire::EncodeError::kNone);
    CHECK(sdp_core_on_hello_ack(&d.conn, buf, sizeof(buf)) < 0);
    CHECK(sdp_core_on_hello(&d.conn, buf, sizeof(buf)) < 0);
    CHECK(sdp_core_build_hello(&d.conn, buf, sizeof(buf), 1, 0) < 0);
    CHECK(sdp_core_build_hello_ack(&d.conn, buf, sizeof(buf)) < 0);
    CHECK(sdp_core_tx_credits(&d.conn) == credits0 && sdp_core_seg_max(&d.conn) == seg0);
}

// The host sees a transfer DONE, invalidates its key and releases it.
void Harness::release(int s)
{
    Side& d = me(s);
    const sdp_core_zc_status st = zc_of(d);
    if ((in_.byte() & 1) == 0) {
        // The oldest offer goes, once it ended; the next becomes the oldest.
        sdp_core_src_release(&d.conn);
        const sdp_core_zc_status now = zc_of(d);
        if (st.src_state == SDP_ZC_DONE) {
            CHECK(!d.srcs.empty() && d.srcs.front().settled);
            d.srcs.pop_front();
            CHECK(now.src_offers == st.src_offers - 1);
            CHECK(now.src_pending == st.src_pending);
        } else {
            CHECK(now.src_state == st.src_state && now.src_offers == st.src_offers);
        }
    } else {
        sdp_core_adv_release(&d.conn);
        if (st.adv_state == SDP_ZC_DONE) {
            d.advs.clear();
            CHECK(zc_of(d).adv_state == SDP_ZC_IDLE && zc_of(d).adv_count == 0);
        } else {
            CHECK(zc_of(d).adv_state == st.adv_state);
        }
    }
}

// ---- receive --------------------------------------------------------------------------

// Our SrcAvails, in stream order: one read in full is settled at once.  The
// others end together (a SendSM or our cancel ends them all), and once none
// is pending, what the sink did not read goes again: from the first byte
// not read to the end of the last offer, since the sink reads in order.
void Harness::settle(int s)
{
    Side& d = me(s);
    const sdp_core_zc_status st = zc_of(d);
    bool rewound = false;
    for (Reg& r : d.srcs) {
        if (r.settled)
            continue;
        if (r.acked == r.len) {
            CHECK(!rewound); // nothing read after a byte not read
            r.settled = true;
            continue;
        }
        if (st.src_pending != 0)
            break;
        if (!rewound) {
            const u64 back = r.off + r.acked;
            CHECK(back <= d.stream_sent);
            d.pending += d.stream_sent - back;
            d.stream_sent = back;
            rewound = true;
        } else {
            CHECK(r.acked == 0);
        }
        r.settled = true;
    }
}

// The next SEND or RDMA Write from s reaches its peer.
void Harness::deliver(int s)
{
    if (wire_[s].empty())
        return;
    const int r = 1 - s;
    Side& to = me(r);
    WireItem& w = wire_[s].front();
    if (w.rdma) {
        if (!hostile_) {
            // An RDMA Write lands only in a live advertisement, after the
            // pieces before it were filled.
            Reg* a = find_adv(to, w.rkey);
            CHECK(a != nullptr && a->live && w.vaddr == a->vaddr && w.len <= a->len);
            CHECK(a->landed == 0 && w.off == a->off);
            for (const Reg& q : to.advs) {
                if (&q == a)
                    break;
                CHECK(q.landed == q.len);
            }
            for (u32 i = 0; i < w.len && i < a->buf.size(); i++)
                a->buf[i] = pattern(s, w.off + i);
            a->landed = w.len;
        }
        wire_[s].pop_front();
        return;
    }
    if (to.rx_empty == 0) {
        // RNR: an honest sender never gets here (credits), a hostile
        // injection may have used the buffer its credit stood for.
        CHECK(hostile_);
        return;
    }
    const Bytes msg = std::move(w.msg);
    wire_[s].pop_front();
    delivered_[s]++;
    receive(r, msg);
}

void Harness::receive(int s, const Bytes& msg)
{
    Side& d = me(s);
    refresh_state(s);
    const u32 state0 = d.state;
    const sdp_core_zc_status zc0 = zc_of(d);
    const bool refuse = d.dead || !established(s) || aborted(s);
    // An honest peer's message is accepted unless this side aborted.
    const bool honest = !hostile_ && !refuse && msg.size() <= d.rx_buf_size;
    d.rx_empty--;
    sdp_core_rx_posted(&d.conn, d.rx_empty);

    // Exactly sized, so ASan sees any read past the message.
    const std::unique_ptr<u8[]> buf(new u8[msg.empty() ? 1 : msg.size()]);
    if (!msg.empty())
        std::memcpy(buf.get(), msg.data(), msg.size());
    sdp_core_rx rx{};
    std::memset(&rx, 0xa5, sizeof(rx));
    const int rc = sdp_core_on_recv(&d.conn, buf.get(), static_cast<u32>(msg.size()), &rx);
    if (verbose())
        std::fprintf(stderr, "%d rx mid %#x len %zu: %d (%s)\n", s, msg.empty() ? 0u : msg[0],
                     msg.size(), rc, sdp_core_err_name(rc));
    if (refuse) {
        // Before setup, after a protocol error or an abort: nothing more.
        CHECK(rc < 0);
    }
    if (honest)
        CHECK(rc == 0);
    if (msg.size() > d.rx_buf_size)
        CHECK(rc < 0);
    refresh_state(s);
    if (rc < 0) {
        CHECK(rc >= -SDP_CORE_ESTATE);
        d.rx_empty++;
        sdp_core_rx_posted(&d.conn, d.rx_empty);
        // A message refused after the ledger took it may have set the credits.
        wire::Message m{};
        if (wire::decode(msg.data(), msg.size(), &m) == wire::DecodeError::kNone &&
            m.bsdh.bufs > d.last_bufs)
            d.last_bufs = m.bsdh.bufs;
        if (!d.dead && established(s) && !aborted(s)) {
            // sdp_abort(): AbortConn if a credit allows.
            d.dead = true;
            build(s, SDP_MID_ABORT_CONN, 0, 0);
        }
        d.dead = true;
        return;
    }
    CHECK(rc == 0);
    accepted(s, msg, rx, state0, zc0);
}

void Harness::accepted(int s, const Bytes& msg, const sdp_core_rx& rx, u32 state0,
                       const sdp_core_zc_status& zc0)
{
    Side& d = me(s);
    wire::Message m{};
    // Only a message that decodes is accepted, and only the next one.
    CHECK(wire::decode(msg.data(), msg.size(), &m) == wire::DecodeError::kNone);
    CHECK(m.bsdh.len == msg.size() && rx.mid == msg[0]);
    CHECK(m.bsdh.mseq == d.accepted + 1);
    CHECK(static_cast<sdp::s32>(d.sent - m.bsdh.mseq_ack) >= 0);
    d.accepted++;
    d.last_bufs = m.bsdh.bufs;
    CHECK(sdp_core_tx_credits(&d.conn) <= m.bsdh.bufs);
    CHECK(rx.kind <= SDP_RX_RESIZE &&
          (rx.ack_timer_ms == 0 || rx.ack_timer_ms == SDP_CORE_ACK_DELAY_MS));
    bool free_now = true;
    switch (rx.kind) {
    case SDP_RX_DATA: {
        CHECK(m.bsdh.mid == wire::Mid::kData);
        CHECK(rx.urgent == 0 || (rx.urgent == 1 && rx.payload_len != 0));
        CHECK(rx.payload_off <= msg.size()); // FuzzRegressions.EmptyDataPayloadOffset
        if (rx.payload_len == 0)
            break;
        CHECK(rx.payload_off >= kBsdh && rx.payload_off <= msg.size());
        CHECK(rx.payload_len == msg.size() - rx.payload_off);
        // No stream bytes after the peer's DisConn, none overtaking its offer.
        CHECK((state0 & SDP_CS_DISCONN_RCVD) == 0);
        CHECK(zc0.rsa_left == 0 && zc0.rsa_reading == 0);
        if (!hostile_) {
            for (u32 i = 0; i < rx.payload_len; i++)
                CHECK(msg[rx.payload_off + i] == pattern(1 - s, d.got + i));
        }
        d.got += rx.payload_len;
        d.held.push_back(rx.payload_len);
        free_now = false;
        break;
    }
    case SDP_RX_DISCONN:
        CHECK(m.bsdh.mid == wire::Mid::kDisConn);
        CHECK((state0 & SDP_CS_DISCONN_RCVD) == 0 && (d.state & SDP_CS_DISCONN_RCVD) != 0);
        if (!hostile_) // EOF: the whole stream arrived
            CHECK(d.got == peer(s).stream_sent && peer(s).pending == 0);
        break;
    case SDP_RX_ABORT:
        CHECK(m.bsdh.mid == wire::Mid::kAbortConn && aborted(s));
        break;
    case SDP_RX_ZCOPY: {
        const sdp_core_zc_status st = zc_of(d);
        const u32 n = rx.zc_bytes;
        switch (m.bsdh.mid) {
        case wire::Mid::kSrcAvail:
            // Real offers, no more than we announced, none after DisConn;
            // queued behind the earlier ones (or all given up at once),
            // reported faithfully.
            CHECK(fits_zcopy(m.src_avail.len, m.src_avail.vaddr));
            CHECK(zc0.rsa_offers < SDP_CORE_MAX_ADVERTS && st.rsa_offers == zc0.rsa_offers + 1);
            CHECK((state0 & SDP_CS_DISCONN_RCVD) == 0);
            CHECK(n == m.src_avail.len);
            CHECK(st.rsa_left == zc0.rsa_left + n || st.rsa_left == 0);
            if (zc0.rsa_left != 0 && st.rsa_left != 0)
                CHECK(st.rsa_vaddr == zc0.rsa_vaddr && st.rsa_rkey == zc0.rsa_rkey);
            else if (st.rsa_left != 0)
                CHECK(st.rsa_vaddr == m.src_avail.vaddr && st.rsa_rkey == m.src_avail.rkey);
            if (!hostile_) {
                // An offer of the peer's queue, whose bytes follow those
                // received and those offered before it.
                const Reg* src = find_src(peer(s), m.src_avail.rkey);
                CHECK(src != nullptr && src->live && src->len == n &&
                      src->vaddr == m.src_avail.vaddr);
                if (st.rsa_left != 0)
                    CHECK(src->off == d.got + zc0.rsa_left);
            }
            break;
        case wire::Mid::kRdmaRdCompl: {
            // Inside what our SrcAvails offered, applied in stream order (one
            // report may end one offer and cover part of the next).
            CHECK(zc0.src_pending != 0);
            u64 unread = 0;
            for (const Reg& r : d.srcs)
                unread += r.len - r.acked;
            CHECK(n == m.rdma_compl_len && n != 0 && n <= unread);
            u32 left = n;
            for (Reg& r : d.srcs) {
                const u32 take = left < r.len - r.acked ? left : r.len - r.acked;
                r.acked += take;
                left -= take;
            }
            CHECK(st.src_acked == d.srcs.front().acked);
            break;
        }
        case wire::Mid::kRdmaWrCompl: {
            // Inside the next of our pieces not written yet, once: the
            // pieces before it full.
            CHECK(zc0.adv_state == SDP_ZC_ACTIVE || zc0.adv_state == SDP_ZC_CANCELLING);
            Reg* a = nullptr;
            u32 before = 0;
            for (Reg& q : d.advs) {
                if (q.acked == 0) {
                    a = &q;
                    break;
                }
                CHECK(q.acked == q.len);
                before += q.acked;
            }
            CHECK(a != nullptr && a->live);
            CHECK(zc0.adv_written == before);
            CHECK(n == m.rdma_compl_len && n != 0 && n <= a->len);
            CHECK(st.adv_written == before + n);
            CHECK((state0 & SDP_CS_DISCONN_RCVD) == 0);
            a->acked = n;
            if (!hostile_) {
                CHECK(a->off == d.got && a->landed == n);
                for (u32 i = 0; i < n && i < a->buf.size(); i++)
                    CHECK(a->buf[i] == pattern(1 - s, d.got + i));
            }
            // A piece left with room ends those after it.
            if (n < a->len && zc0.adv_state == SDP_ZC_ACTIVE && st.adv_state != SDP_ZC_CANCELLING)
                CHECK(st.adv_state == SDP_ZC_DONE);
            d.got += n;
            break;
        }
        case wire::Mid::kSinkAvail:
            CHECK(fits_zcopy(m.sink_avail.len, m.sink_avail.vaddr));
            CHECK(n == m.sink_avail.len);
            // Queued behind the usable ones (the head's length is the
            // one told), or not usable at all.
            CHECK(st.psink_count == zc0.psink_count + 1 || st.psink_count == zc0.psink_count);
            if (st.psink_count == 1 && zc0.psink_count == 0)
                CHECK(st.psink_len == n);
            else if (zc0.psink_count != 0)
                CHECK(st.psink_len == zc0.psink_len);
            break;
        case wire::Mid::kSendSm:
        case wire::Mid::kSrcAvailCancel:
        case wire::Mid::kSinkAvailCancel:
        case wire::Mid::kSinkCancelAck:
            break;
        default:
            CHECK(false); // nothing else is a zero-copy message
        }
        settle(s);
        break;
    }
    case SDP_RX_RESIZE:
        CHECK(rx.resize_bytes == m.rcv_buf_size && m.rcv_buf_size > kBsdh);
        if (m.bsdh.mid == wire::Mid::kChRcvBuf) {
            // The host keeps its buffers (a refusal), answered at once:
            // every posted buffer has that size already.  Once only.
            CHECK(sdp_core_rx_resized(&d.conn, d.rx_buf_size) == 0);
            CHECK(sdp_core_rx_resized(&d.conn, d.rx_buf_size) == -SDP_CORE_ESTATE);
        } else {
            // Our segments may grow to the answer, never past our buffers.
            CHECK(m.bsdh.mid == wire::Mid::kChRcvBufAck);
            const u32 granted = m.rcv_buf_size < d.tx_buf_size ? m.rcv_buf_size : d.tx_buf_size;
            if (granted > d.peer_rcv_size)
                d.peer_rcv_size = granted;
        }
        break;
    default:
        CHECK(false);
    }
    if (free_now) {
        d.rx_empty++;
        sdp_core_rx_posted(&d.conn, d.rx_empty);
    }
    if (rx.ack_timer_ms != 0 && (in_.byte() & 3) == 0)
        sdp_core_ack_request(&d.conn); // the delayed-ack timer fires
}

// The application reads up to n bytes: emptied buffers are re-posted.
void Harness::read(int s, u32 n)
{
    Side& d = me(s);
    while (n != 0 && !d.held.empty()) {
        u32& left = d.held.front();
        const u32 k = left < n ? left : n;
        left -= k;
        n -= k;
        if (left == 0) {
            d.held.pop_front();
            d.rx_empty++;
            sdp_core_rx_posted(&d.conn, d.rx_empty);
        }
    }
    if (d.held.empty() && (in_.byte() & 1) != 0)
        sdp_core_ack_request(&d.conn); // the reader took everything and waits
}

void Harness::rd_start(int s)
{
    Side& d = me(s);
    const sdp_core_zc_status zc0 = zc_of(d);
    // What is left of the first offer, or some of the offers behind it.
    sdp_core_zc first{};
    const u32 head_left = sdp_core_rsa_piece(&d.conn, 0, &first) != 0 ? first.len : 0;
    const u32 n = in_.pick(
        {head_left, 1, 0, zc0.rsa_left + 1, zc0.rsa_left / 2, zc0.rsa_left, head_left + 1});
    const int rc = sdp_core_rd_start(&d.conn, n);
    CHECK(rc == 0 || rc == -SDP_CORE_ESTATE);
    if (rc != 0) {
        CHECK(zc_of(d).rsa_reading == zc0.rsa_reading);
        return;
    }
    CHECK(n != 0 && n <= zc0.rsa_left && zc0.rsa_reading == 0);
    // One RDMA Read per offer the read spans (sdp_zc_recv_offer()): each
    // inside one live SrcAvail of the peer, at our next stream offset.
    for (u32 at = 0; at < n && !hostile_;) {
        sdp_core_zc piece{};
        CHECK(sdp_core_rsa_piece(&d.conn, at, &piece) == 1 && piece.len != 0);
        const Reg* reg = find_src(peer(s), piece.rkey);
        const u32 len = piece.len < n - at ? piece.len : n - at;
        CHECK(reg != nullptr && reg->live);
        CHECK(piece.vaddr >= reg->vaddr && piece.vaddr + len <= reg->vaddr + reg->len);
        CHECK(reg->off + (piece.vaddr - reg->vaddr) == d.got + at);
        at += len;
    }
    d.rd_reading = n;
}

void Harness::rd_done(int s)
{
    Side& d = me(s);
    const u32 n = in_.pick({d.rd_reading, 0, d.rd_reading / 2, d.rd_reading + 1});
    sdp_core_rd_done(&d.conn, n);
    if (d.rd_reading == 0)
        return;
    const u32 landed = n < d.rd_reading ? n : d.rd_reading;
    d.got += landed;
    d.rd_unreported += landed;
    d.rd_reading = 0;
}

// A message of the peer as a hostile peer may write it.
void Harness::inject(int s)
{
    static constexpr u8 kMids[] = {SDP_MID_DATA,
                                   SDP_MID_SRC_AVAIL,
                                   SDP_MID_SINK_AVAIL,
                                   SDP_MID_RDMA_RD_COMPL,
                                   SDP_MID_RDMA_WR_COMPL,
                                   SDP_MID_SEND_SM,
                                   SDP_MID_SRC_AVAIL_CANCEL,
                                   SDP_MID_SINK_AVAIL_CANCEL,
                                   SDP_MID_SINK_CANCEL_ACK,
                                   SDP_MID_DISCONN,
                                   SDP_MID_ABORT_CONN,
                                   SDP_MID_HELLO,
                                   SDP_MID_HELLO_ACK,
                                   SDP_MID_CH_RCV_BUF,
                                   SDP_MID_CH_RCV_BUF_ACK,
                                   SDP_MID_MODE_CHANGE,
                                   SDP_MID_SUSP_COMM,
                                   SDP_MID_SUSP_COMM_ACK};
    Side& d = me(s);
    if (d.rx_empty == 0)
        return;
    const u8 sel = in_.byte();
    const u8 mid = sel < sizeof(kMids) ? kMids[sel] : in_.byte();
    u32 hdr = wire::header_size(static_cast<wire::Mid>(mid));
    if (hdr == 0)
        hdr = kBsdh;
    if (mid == SDP_MID_HELLO)
        hdr = SDP_HELLO_MODERN_SIZE;
    const u32 payload = in_.pick({0, 1, d.rx_buf_size - hdr, d.rx_buf_size - hdr + 1, 16});
    if (hdr + static_cast<u64>(payload) > 2 * static_cast<u64>(d.rx_buf_size) + 64)
        return;
    Bytes msg(hdr + payload, 0);
    msg[0] = mid;
    msg[1] = static_cast<u8>(in_.pick({0, SDP_FLAG_OOB_PRES}));
    sdp::store_be16(&msg[2], static_cast<u16>(in_.pick({d.rx_bufs, 0, 1, 3, 0xffff})));
    const u32 len = static_cast<u32>(msg.size());
    sdp::store_be32(&msg[4], in_.pick({len, len - 1, len + 1, hdr, 0}));
    sdp::store_be32(&msg[8], in_.pick({d.accepted + 1, d.accepted, d.accepted + 2, 0}));
    sdp::store_be32(&msg[12], in_.pick({d.sent, d.sent - 1, d.sent + 1, 0, 0x80000000u}));
    const sdp_core_zc_status st = zc_of(d);
    u8* ext = msg.data() + kBsdh;
    switch (mid) {
    case SDP_MID_SRC_AVAIL:
    case SDP_MID_SINK_AVAIL:
        sdp::store_be32(ext, in_.pick({1, 4096, SDP_ZC_MAX_LEN, SDP_ZC_MAX_LEN + 1, 0}));
        sdp::store_be32(ext + 4, in_.pick({1, d.srcs.empty() ? 0 : d.srcs.front().rkey,
                                           d.advs.empty() ? 2 : d.advs.front().rkey}));
        sdp::store_be64(ext + 8, in_.pick({0, 1}) == 0 ? in_.u64v() : ~0ull - in_.byte());
        if (mid == SDP_MID_SINK_AVAIL)
            sdp::store_be32(ext + 16, in_.pick({0, 1}));
        break;
    case SDP_MID_RDMA_RD_COMPL:
        sdp::store_be32(ext, in_.pick({st.src_len - st.src_acked, 1, 0, st.src_len,
                                       st.src_len - st.src_acked + 1, 0xffffffffu}));
        break;
    case SDP_MID_RDMA_WR_COMPL: {
        const u32 alen = d.advs.empty() ? 4096 : d.advs.front().len;
        sdp::store_be32(ext, in_.pick({alen, 1, 0, alen + 1, 0xffffffffu}));
    } break;
    default:
        for (u32 i = kBsdh; i < hdr; i++)
            msg[i] = in_.byte();
        break;
    }
    for (u32 i = hdr; i < msg.size(); i++)
        msg[i] = in_.byte();
    hostile_ = true;
    receive(s, msg);
}

// Any bytes at all as a receive completion.
void Harness::inject_raw(int s)
{
    Side& d = me(s);
    if (d.rx_empty == 0)
        return;
    const u32 n = in_.u16v() % (d.rx_buf_size + 8 < 512 ? d.rx_buf_size + 8 : 512);
    Bytes msg(n);
    for (u8& b : msg)
        b = in_.byte();
    hostile_ = true;
    receive(s, msg);
}

// ---- the operations -------------------------------------------------------------------

enum class Op : u8 {
    kWrite,
    kPush,
    kControl,
    kDeliver,
    kDeliverMore,
    kTxDone,
    kRead,
    kAckRequest,
    kShutdown,
    kSrcAvail,
    kSrcCancel,
    kSinkAvail,
    kAdvCancel,
    kRdStart,
    kRdDone,
    kRsaAbandon,
    kReaderWaiting,
    kSinkTake,
    kRelease,
    kInject,
    kInjectRaw,
    kRawBuild,
    kLateHello,
    kCount
};

void Harness::op()
{
    const u8 code = in_.byte();
    const int s = code & 1;
    Side& d = me(s);
    const Op what = static_cast<Op>((code >> 1) % static_cast<u8>(Op::kCount));
    // After a protocol error the host sends nothing but its AbortConn.
    if (d.dead && (what == Op::kPush || what == Op::kControl || what == Op::kShutdown ||
                   what == Op::kSrcAvail || what == Op::kSinkAvail || what == Op::kSinkTake ||
                   what == Op::kRawBuild))
        return;
    switch (what) {
    case Op::kWrite: {
        const u64 unit = in_.byte();
        const u64 n = 1 + unit * (1 + (in_.byte() & 0x3f));
        if (!d.shut && d.stream_sent + d.pending + n <= kMaxStream)
            d.pending += n;
        break;
    }
    case Op::kPush: {
        const u8 how = in_.byte();
        const u32 opts = how & 7;
        if ((how & 8) != 0)
            push_next(s, opts, 1 + (in_.byte() & 7));
        else
            push(s, opts, 1 + (in_.byte() & 7));
        break;
    }
    case Op::kControl:
        control(s);
        break;
    case Op::kDeliver:
        deliver(s);
        break;
    case Op::kDeliverMore:
        for (int i = 0; i < 4; i++)
            deliver(s);
        break;
    case Op::kTxDone:
        tx_done(s);
        break;
    case Op::kRead:
        read(s, in_.u16v());
        break;
    case Op::kAckRequest:
        sdp_core_ack_request(&d.conn);
        // The host's idle timer too, as it fires: with nothing queued.
        if (d.pending == 0 && sdp_core_tx_idle(&d.conn) == 1)
            push_next(s, 0, 4);
        break;
    case Op::kShutdown:
        d.shut = true;
        sdp_core_shutdown_send(&d.conn);
        CHECK((sdp_core_state(&d.conn) & SDP_CS_SHUT_REQUESTED) != 0);
        push(s, SDP_TXO_PUSH, 8);
        break;
    case Op::kSrcAvail:
        src_avail(s);
        break;
    case Op::kSrcCancel: {
        const sdp_core_zc_status zc0 = zc_of(d);
        sdp_core_src_cancel(&d.conn);
        const u32 now = zc_of(d).src_state;
        CHECK(now == (zc0.src_state == SDP_ZC_ACTIVE ? SDP_ZC_CANCELLING : zc0.src_state));
        break;
    }
    case Op::kSinkAvail:
        sink_avail(s);
        break;
    case Op::kAdvCancel: {
        const sdp_core_zc_status zc0 = zc_of(d);
        sdp_core_adv_cancel(&d.conn);
        const u32 now = zc_of(d).adv_state;
        CHECK(now == (zc0.adv_state == SDP_ZC_ACTIVE ? SDP_ZC_CANCELLING : zc0.adv_state));
        break;
    }
    case Op::kRdStart:
        rd_start(s);
        break;
    case Op::kRdDone:
        rd_done(s);
        break;
    case Op::kRsaAbandon:
        // Also during a read, which the C ABI allows (the glue does not
        // today): FuzzRegressions.AbandonDuringReadOfWholeOffer.
        sdp_core_rsa_abandon(&d.conn);
        CHECK(zc_of(d).rsa_left == 0);
        break;
    case Op::kReaderWaiting:
        sdp_core_set_reader_waiting(&d.conn, in_.byte() & 1);
        break;
    case Op::kSinkTake:
        sink_take(s);
        break;
    case Op::kRelease:
        release(s);
        break;
    case Op::kInject:
        inject(s);
        break;
    case Op::kInjectRaw:
        inject_raw(s);
        break;
    case Op::kRawBuild:
        raw_build(s);
        break;
    case Op::kLateHello:
        late_hello(s);
        break;
    case Op::kCount:
        break;
    }
}

void Harness::run()
{
    setup();
    check_invariants();
    for (unsigned i = 0; i < kMaxOps && !in_.empty(); i++) {
        op();
        check_invariants();
    }
    if (!verbose())
        return;
    for (int s = 0; s < 2; s++) {
        const Side& d = me(s);
        const sdp_core_zc_status st = zc_of(d);
        std::fprintf(stderr,
                     "side %d: state %#x%s credits %u sent %u accepted %u stream %llu "
                     "pending %llu got %llu src %u/%u/%u adv %u/%u\n",
                     s, d.state, d.dead ? " dead" : "", sdp_core_tx_credits(&d.conn), d.sent,
                     d.accepted, static_cast<unsigned long long>(d.stream_sent),
                     static_cast<unsigned long long>(d.pending),
                     static_cast<unsigned long long>(d.got), st.src_state, st.src_acked, st.src_len,
                     st.adv_state, st.adv_written);
    }
    std::fprintf(stderr, "hostile %d, at most %u SrcAvails of one side in flight\n",
                 hostile_ ? 1 : 0, max_srcs_);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Input in(data, size);
    Harness h(&in);
    h.run();
    return 0;
}
