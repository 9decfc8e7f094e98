// SPDX-License-Identifier: GPL-2.0
//
// Unit tests of one connection's protocol engine (kernel/core/conn.{h,cpp}),
// driven only through the C ABI of sdp_core.h, the way the kernel glue uses
// it.
//
// Incoming messages are either produced by a second engine (sdp_core_tx_build
// on the peer) or written out here byte by byte (Raw()), so that malformed
// and hostile input can be fed too.  Every input is an exactly sized heap
// buffer: under ASan a read past byte_len fails the test.
#include "posted_calls.h"
#include "sdp_core.h"
#include "sdp_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<unsigned char>;

constexpr unsigned kBsdh = SDP_BSDH_SIZE;
constexpr unsigned kReserve = 2; // CreditLedger::kControlReserve

unsigned Be16(const unsigned char* p)
{
    return (static_cast<unsigned>(p[0]) << 8) | p[1];
}

unsigned Be32(const unsigned char* p)
{
    return (static_cast<unsigned>(p[0]) << 24) | (static_cast<unsigned>(p[1]) << 16) |
           (static_cast<unsigned>(p[2]) << 8) | p[3];
}

void PutBe16(unsigned char* p, unsigned v)
{
    p[0] = static_cast<unsigned char>(v >> 8);
    p[1] = static_cast<unsigned char>(v);
}

void PutBe32(unsigned char* p, unsigned v)
{
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

// A message written field by field: BSDH, then `extra` header bytes (zero),
// then `payload` bytes (0xa5).  BSDH.len is the real length unless given.
Bytes Raw(unsigned mid, unsigned flags, unsigned bufs, unsigned mseq, unsigned mseq_ack,
          unsigned payload = 0, unsigned extra = 0, long len = -1)
{
    Bytes b(kBsdh + extra + payload, 0);
    b[0] = static_cast<unsigned char>(mid);
    b[1] = static_cast<unsigned char>(flags);
    PutBe16(&b[2], bufs);
    PutBe32(&b[4], len < 0 ? static_cast<unsigned>(b.size()) : static_cast<unsigned>(len));
    PutBe32(&b[8], mseq);
    PutBe32(&b[12], mseq_ack);
    for (unsigned i = 0; i < payload; i++)
        b[kBsdh + extra + i] = 0xa5;
    return b;
}

// Feed a message to on_recv from an exactly sized heap copy.
int Recv(sdp_core_conn* c, const Bytes& msg, sdp_core_rx* out)
{
    std::vector<unsigned char> copy(msg);
    copy.shrink_to_fit();
    return sdp_core_on_recv(c, copy.data(), static_cast<unsigned>(copy.size()), out);
}

std::string ErrName(int rc)
{
    return std::to_string(rc) + " (" + sdp_core_err_name(rc) + ")";
}

#define EXPECT_RC(expr, want) EXPECT_EQ((expr), (want)) << ErrName(expr)
#define ASSERT_RC(expr, want) ASSERT_EQ((expr), (want)) << ErrName(expr)

struct Sizes {
    unsigned active_rx = 4096;
    unsigned active_tx = 4096;
    unsigned passive_rx = 4096;
    unsigned passive_tx = 4096;
    unsigned short active_posted = 8;
    unsigned short passive_posted = 8;
};

// Two engines connected through the Hello exchange, and a helper that moves a
// message from one to the other as the glue would (tx_build, payload, SEND,
// receive completion, on_recv).
class Pair {
  public:
    explicit Pair(const Sizes& s = Sizes{}) : sizes_(s)
    {
        sdp_core_conn_init(&active, s.active_rx, s.active_tx);
        sdp_core_conn_init(&passive, s.passive_rx, s.passive_tx);
    }

    void Connect()
    {
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        const int n = BuildHello(&active, req, sizeof(req), sizes_.active_posted, 5001, 0);
        ASSERT_EQ(n, SDP_HELLO_MODERN_SIZE) << ErrName(n);
        ASSERT_RC(sdp_core_on_hello(&passive, req, sizeof(req)), 0);
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        const int m = BuildHelloAck(&passive, rep, sizeof(rep), sizes_.passive_posted);
        ASSERT_EQ(m, SDP_HELLO_ACK_SIZE) << ErrName(m);
        ASSERT_RC(sdp_core_on_hello_ack(&active, rep, sizeof(rep)), 0);
    }

    // Build a message on `from` and return its bytes (headers + payload).
    static Bytes Build(sdp_core_conn* from, unsigned mid, unsigned payload, unsigned flags,
                       unsigned short posted)
    {
        Bytes b(kBsdh + payload, 0x5a);
        const int n = TxBuild(from, b.data(), mid, payload, flags, posted);
        EXPECT_EQ(n, static_cast<int>(kBsdh)) << ErrName(n);
        return b;
    }

    // from -> to; returns on_recv's result.
    static int Send(sdp_core_conn* from, sdp_core_conn* to, unsigned mid, unsigned payload,
                    sdp_core_rx* out, unsigned flags = 0, unsigned short posted = 8)
    {
        return Recv(to, Build(from, mid, payload, flags, posted), out);
    }

    sdp_core_conn active{};
    sdp_core_conn passive{};

  private:
    Sizes sizes_;
};

// ---- setup ------------------------------------------------------------------

TEST(ConnSetup, InitialState)
{
    sdp_core_conn c;
    std::memset(&c, 0xff, sizeof(c)); // init must not depend on prior contents
    sdp_core_conn_init(&c, 4096, 2048);
    EXPECT_EQ(sdp_core_state(&c), 0u);
    EXPECT_EQ(sdp_core_tx_credits(&c), 0u);
    EXPECT_EQ(sdp_core_data_in_flight(&c), 0u);
    EXPECT_EQ(sdp_core_seg_max(&c), 2048u - kBsdh) << "before the peer is known: own tx buffer";
}

TEST(ConnSetup, HelloBytesAsSpecified)
{
    sdp_core_conn c;
    sdp_core_conn_init(&c, 8192, 4096);
    unsigned char buf[SDP_CM_REQ_PRIVATE_DATA];
    std::memset(buf, 0xee, sizeof(buf));
    ASSERT_EQ(BuildHello(&c, buf, sizeof(buf), 63, 0x1389, 0), SDP_HELLO_MODERN_SIZE);
    EXPECT_EQ(buf[0], SDP_MID_HELLO);
    EXPECT_EQ(buf[1], 0) << "flags";
    EXPECT_EQ(Be16(buf + 2), 63u) << "bufs: the posted receive buffers";
    EXPECT_EQ(Be32(buf + 4), unsigned{SDP_HELLO_MODERN_SIZE}) << "len";
    EXPECT_EQ(Be32(buf + 8), 0u) << "the Hello is mseq 0";
    EXPECT_EQ(Be32(buf + 12), 0u);
    EXPECT_EQ(buf[16], 0x22) << "version 2.2";
    EXPECT_EQ(buf[17] >> 4, 4) << "IPv4";
    EXPECT_GT(buf[19], 0) << "max_adverts must be > 0";
    EXPECT_EQ(Be32(buf + 20), 4096u) << "desremrcvsz: our tx buffer";
    EXPECT_EQ(Be32(buf + 24), 8192u) << "localrcvsz: our rx buffer";
    EXPECT_EQ(Be16(buf + 28), 0x1389u) << "local port";
    EXPECT_EQ(buf[SDP_HELLO_MODERN_SIZE], 0xee) << "nothing written past the Hello";
    EXPECT_EQ(sdp_core_state(&c), 0u) << "not established before the HelloAck";

    sdp_core_conn c6;
    sdp_core_conn_init(&c6, 8192, 4096);
    ASSERT_EQ(BuildHello(&c6, buf, sizeof(buf), 1, 1, 1), SDP_HELLO_MODERN_SIZE);
    EXPECT_EQ(buf[17] >> 4, 6) << "IPv6";
}

TEST(ConnSetup, HelloAckBytesAsSpecified)
{
    Pair p;
    unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHello(&p.active, req, sizeof(req), 8, 1, 0), 0);
    ASSERT_RC(sdp_core_on_hello(&p.passive, req, sizeof(req)), 0);
    EXPECT_EQ(sdp_core_state(&p.passive), 0u) << "established only once the HelloAck is built";
    unsigned char rep[SDP_CM_REP_PRIVATE_DATA];
    std::memset(rep, 0xee, sizeof(rep));
    ASSERT_EQ(BuildHelloAck(&p.passive, rep, sizeof(rep), 17), SDP_HELLO_ACK_SIZE);
    EXPECT_EQ(rep[0], SDP_MID_HELLO_ACK);
    EXPECT_EQ(Be16(rep + 2), 17u);
    EXPECT_EQ(Be32(rep + 4), unsigned{SDP_HELLO_ACK_SIZE});
    EXPECT_EQ(Be32(rep + 8), 0u);
    EXPECT_EQ(Be32(rep + 12), 0u);
    EXPECT_EQ(rep[16], 0x22);
    EXPECT_EQ(Be32(rep + 20), 4096u) << "actrcvsz: our rx buffer";
    EXPECT_EQ(rep[SDP_HELLO_ACK_SIZE], 0xee);
}

TEST(ConnSetup, ExchangeEstablishesBothWithCreditsFromHelloBufs)
{
    Sizes s;
    s.active_posted = 5;
    s.passive_posted = 11;
    Pair p(s);
    p.Connect();
    EXPECT_EQ(sdp_core_state(&p.active), unsigned{SDP_CS_ESTABLISHED});
    EXPECT_EQ(sdp_core_state(&p.passive), unsigned{SDP_CS_ESTABLISHED});
    EXPECT_EQ(sdp_core_tx_credits(&p.active), 11u) << "from the HelloAck's bufs";
    EXPECT_EQ(sdp_core_tx_credits(&p.passive), 5u) << "from the Hello's bufs";
    EXPECT_EQ(sdp_core_data_in_flight(&p.active), 0u);

    // The first SENDs are mseq 1 on each side, acknowledging mseq 0.
    sdp_core_rx rx{};
    const Bytes first = Pair::Build(&p.active, SDP_MID_DATA, 3, 0, 5);
    EXPECT_EQ(Be32(&first[8]), 1u);
    EXPECT_EQ(Be32(&first[12]), 0u);
    EXPECT_RC(Recv(&p.passive, first, &rx), 0);
    EXPECT_RC(Pair::Send(&p.passive, &p.active, SDP_MID_DATA, 3, &rx), 0);
}

// sdp_push()'s iterator: the rings described, the next SEND answered.
struct TxNext {
    sdp_core_tx_action act{};
    unsigned char seg[kBsdh] = {};
    unsigned char ctl[64] = {};
    int rc = 0;
};

TxNext Next(sdp_core_conn* c, unsigned seg_bytes, unsigned queued, bool urgent = false,
            unsigned opts = 0, bool ctl_room = true)
{
    TxNext n;
    sdp_core_tx_ring ring{};
    ring.seg_bytes = seg_bytes;
    ring.segs_queued = queued;
    ring.seg_urgent = urgent ? 1 : 0;
    ring.seg_hdr = n.seg;
    ring.ctl_hdr = ctl_room ? n.ctl : nullptr;
    ring.ctl_size = ctl_room ? sizeof(n.ctl) : 0;
    ring.opts = opts;
    n.rc = sdp_core_tx_next(c, &ring, &n.act);
    return n;
}

TEST(ConnSetup, ZeroPostedGivesNoCredits)
{
    Sizes s;
    s.active_posted = 0;
    s.passive_posted = 0;
    Pair p(s);
    p.Connect();
    EXPECT_EQ(sdp_core_tx_credits(&p.active), 0u);
    EXPECT_EQ(sdp_core_tx_decide(&p.active, 10, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(ControlDue(&p.active, 0, 0), 0) << "nothing can go without a credit";
    // The iterator says nothing goes, and why the data waits.
    const TxNext n = Next(&p.active, 10, 1);
    ASSERT_RC(n.rc, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_NONE);
    EXPECT_EQ(n.act.data, SDP_TX_NO_CREDIT);
}

TEST(ConnSetup, HistoricalHelloWithAddressesAccepted)
{
    // A peer may send the historical 64+ byte Hello (IP addresses included).
    Bytes h = Raw(SDP_MID_HELLO, 0, 9, 0, 0, 0, SDP_HELLO_FULL_SIZE - kBsdh);
    h[16] = 0x22;
    h[17] = 0x40;
    h[19] = 1;
    PutBe32(&h[20], 4096);
    PutBe32(&h[24], 1000);
    sdp_core_conn c;
    sdp_core_conn_init(&c, 4096, 4096);
    ASSERT_RC(sdp_core_on_hello(&c, h.data(), static_cast<unsigned>(h.size())), 0);
    unsigned char rep[SDP_HELLO_ACK_SIZE];
    ASSERT_EQ(BuildHelloAck(&c, rep, sizeof(rep), 4), SDP_HELLO_ACK_SIZE);
    EXPECT_EQ(sdp_core_tx_credits(&c), 9u);
    EXPECT_EQ(sdp_core_seg_max(&c), 1000u - kBsdh);
}

TEST(ConnSetup, VersionMismatch)
{
    // Hello with major 3.
    Pair p;
    unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHello(&p.active, req, sizeof(req), 8, 1, 0), 0);
    req[16] = 0x32;
    EXPECT_RC(sdp_core_on_hello(&p.passive, req, sizeof(req)), -SDP_CORE_EVERSION);
    unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
    EXPECT_RC(BuildHelloAck(&p.passive, rep, sizeof(rep), 8), -SDP_CORE_ESTATE)
        << "no HelloAck for a rejected Hello";
    EXPECT_EQ(sdp_core_state(&p.passive), 0u);

    // HelloAck with major 1.
    Pair q;
    ASSERT_GT(BuildHello(&q.active, req, sizeof(req), 8, 1, 0), 0);
    ASSERT_RC(sdp_core_on_hello(&q.passive, req, sizeof(req)), 0);
    ASSERT_GT(BuildHelloAck(&q.passive, rep, sizeof(rep), 8), 0);
    rep[16] = 0x12;
    EXPECT_RC(sdp_core_on_hello_ack(&q.active, rep, sizeof(rep)), -SDP_CORE_EVERSION);
    EXPECT_EQ(sdp_core_state(&q.active), 0u);
    // Minor versions are not checked.
    rep[16] = 0x2f;
    EXPECT_RC(sdp_core_on_hello_ack(&q.active, rep, sizeof(rep)), 0);
}

TEST(ConnSetup, BadSizes)
{
    sdp_core_conn c;
    sdp_core_conn_init(&c, 4096, 4096);
    unsigned char buf[SDP_CM_REP_PRIVATE_DATA] = {};
    EXPECT_RC(BuildHello(&c, buf, SDP_HELLO_MODERN_SIZE - 1, 8, 1, 0), -SDP_CORE_ENOROOM);
    EXPECT_RC(BuildHello(&c, buf, 0, 8, 1, 0), -SDP_CORE_ENOROOM);

    // A valid Hello to mutate.
    Bytes hello(SDP_HELLO_MODERN_SIZE);
    ASSERT_EQ(BuildHello(&c, hello.data(), static_cast<unsigned>(hello.size()), 8, 1, 0),
              SDP_HELLO_MODERN_SIZE);
    auto on_hello = [](const Bytes& b) {
        sdp_core_conn p;
        sdp_core_conn_init(&p, 4096, 4096);
        Bytes copy(b);
        const int rc = sdp_core_on_hello(&p, copy.data(), static_cast<unsigned>(copy.size()));
        if (rc != 0)
            EXPECT_EQ(sdp_core_state(&p), 0u);
        return rc;
    };
    EXPECT_RC(on_hello(hello), 0);
    EXPECT_RC(on_hello(Bytes(hello.begin(), hello.begin() + 15)), -SDP_CORE_EMALFORMED)
        << "shorter than a BSDH";
    EXPECT_RC(on_hello(Bytes(hello.begin(), hello.end() - 1)), -SDP_CORE_EMALFORMED)
        << "shorter than BSDH.len";
    Bytes bad_len = hello;
    PutBe32(&bad_len[4], 40); // between the modern and the historical layout
    bad_len.resize(40);
    EXPECT_RC(on_hello(bad_len), -SDP_CORE_EMALFORMED);
    Bytes tiny_rcv = hello;
    PutBe32(&tiny_rcv[24], kBsdh); // a receive buffer that holds no payload
    EXPECT_RC(on_hello(tiny_rcv), -SDP_CORE_EPROTO);
    PutBe32(&tiny_rcv[24], kBsdh + 1);
    EXPECT_RC(on_hello(tiny_rcv), 0) << "one payload byte is enough";
    Bytes nonzero_mseq = hello;
    PutBe32(&nonzero_mseq[8], 1);
    EXPECT_RC(on_hello(nonzero_mseq), -SDP_CORE_EPROTO);
    Bytes not_hello = Raw(SDP_MID_DATA, 0, 8, 0, 0, 16);
    EXPECT_RC(on_hello(not_hello), -SDP_CORE_EPROTO);

    // HelloAck side.
    Pair p;
    ASSERT_GT(BuildHello(&p.active, buf, SDP_CM_REQ_PRIVATE_DATA, 8, 1, 0), 0);
    ASSERT_RC(sdp_core_on_hello(&p.passive, buf, SDP_CM_REQ_PRIVATE_DATA), 0);
    EXPECT_RC(BuildHelloAck(&p.passive, buf, SDP_HELLO_ACK_SIZE - 1, 8), -SDP_CORE_ENOROOM);
    EXPECT_EQ(sdp_core_state(&p.passive), 0u) << "a failed build does not establish";
    Bytes ack(SDP_HELLO_ACK_SIZE);
    ASSERT_EQ(BuildHelloAck(&p.passive, ack.data(), SDP_HELLO_ACK_SIZE, 8), SDP_HELLO_ACK_SIZE);
    auto on_ack = [](const Bytes& b) {
        sdp_core_conn a;
        sdp_core_conn_init(&a, 4096, 4096);
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA];
        EXPECT_GT(BuildHello(&a, req, sizeof(req), 8, 1, 0), 0);
        Bytes copy(b);
        const int rc = sdp_core_on_hello_ack(&a, copy.data(), static_cast<unsigned>(copy.size()));
        if (rc != 0)
            EXPECT_EQ(sdp_core_state(&a), 0u);
        return rc;
    };
    EXPECT_RC(on_ack(ack), 0);
    EXPECT_RC(on_ack(Bytes(ack.begin(), ack.end() - 1)), -SDP_CORE_EMALFORMED);
    Bytes long_ack = ack;
    long_ack.push_back(0);
    PutBe32(&long_ack[4], SDP_HELLO_ACK_SIZE + 1);
    EXPECT_RC(on_ack(long_ack), -SDP_CORE_EMALFORMED) << "HelloAck has a fixed size";
    Bytes tiny_ack = ack;
    PutBe32(&tiny_ack[20], 10);
    EXPECT_RC(on_ack(tiny_ack), -SDP_CORE_EPROTO);
    Bytes hello_as_ack = hello;
    EXPECT_RC(on_ack(hello_as_ack), -SDP_CORE_EPROTO);
}

TEST(ConnSetup, CallsOutOfOrder)
{
    sdp_core_conn c;
    sdp_core_conn_init(&c, 4096, 4096);
    unsigned char buf[SDP_CM_REP_PRIVATE_DATA] = {};
    EXPECT_RC(BuildHelloAck(&c, buf, sizeof(buf), 8), -SDP_CORE_ESTATE)
        << "HelloAck without a Hello";
    unsigned char hdr[kBsdh];
    EXPECT_RC(TxBuild(&c, hdr, SDP_MID_DATA, 1, 0, 8), -SDP_CORE_ESTATE);
    EXPECT_RC(TxBuild(&c, hdr, SDP_MID_DISCONN, 0, 0, 8), -SDP_CORE_ESTATE);
    EXPECT_EQ(sdp_core_tx_decide(&c, 1, 1, 0), SDP_TX_CLOSED);
    EXPECT_EQ(ControlDue(&c, 0, 8), 0);
    sdp_core_shutdown_send(&c);
    EXPECT_EQ(ControlDue(&c, 0, 8), 0) << "no DisConn before the connection exists";
    sdp_core_rx rx{};
    EXPECT_RC(Recv(&c, Raw(SDP_MID_DATA, 0, 8, 1, 0, 4), &rx), -SDP_CORE_ESTATE);

    // Established: no second setup in either role.
    Pair p;
    p.Connect();
    EXPECT_RC(BuildHello(&p.active, buf, sizeof(buf), 8, 1, 0), -SDP_CORE_ESTATE);
    EXPECT_RC(BuildHello(&p.passive, buf, sizeof(buf), 8, 1, 0), -SDP_CORE_ESTATE);
    EXPECT_RC(BuildHelloAck(&p.passive, buf, sizeof(buf), 8), -SDP_CORE_ESTATE);
}

TEST(ConnSetup, SetupMessagesRejectedOnceEstablished)
{
    Pair p;
    p.Connect();
    unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
    sdp_core_conn other;
    sdp_core_conn_init(&other, 4096, 4096);
    ASSERT_GT(BuildHello(&other, req, sizeof(req), 8, 1, 0), 0);
    EXPECT_RC(sdp_core_on_hello(&p.passive, req, sizeof(req)), -SDP_CORE_ESTATE);
    EXPECT_RC(sdp_core_on_hello(&p.active, req, sizeof(req)), -SDP_CORE_ESTATE);
    unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
    EXPECT_RC(sdp_core_on_hello_ack(&p.active, rep, sizeof(rep)), -SDP_CORE_ESTATE);
    EXPECT_EQ(sdp_core_tx_credits(&p.active), 8u) << "credits untouched";
}

TEST(ConnSetup, SegMaxIsMinOfPeerRcvAndOwnTxLessBsdh)
{
    struct Case {
        unsigned a_rx, a_tx, p_rx, p_tx, a_seg, p_seg;
    };
    const Case cases[] = {
        {4096, 4096, 4096, 4096, 4080, 4080},
        {8192, 2048, 4096, 65536, 2032, 8176}, // active tx-bound, passive peer-bound
        {1024, 65536, 300, 256, 284, 240},
        {17, 17, 17, 17, 1, 1}, // one payload byte per message
    };
    for (const Case& k : cases) {
        Sizes s;
        s.active_rx = k.a_rx;
        s.active_tx = k.a_tx;
        s.passive_rx = k.p_rx;
        s.passive_tx = k.p_tx;
        Pair p(s);
        p.Connect();
        EXPECT_EQ(sdp_core_seg_max(&p.active), k.a_seg)
            << k.a_rx << "/" << k.a_tx << " vs " << k.p_rx << "/" << k.p_tx;
        EXPECT_EQ(sdp_core_seg_max(&p.passive), k.p_seg);
        // A segment of exactly seg_max is accepted, one byte more is not.
        unsigned char hdr[kBsdh];
        EXPECT_RC(TxBuild(&p.active, hdr, SDP_MID_DATA, k.a_seg + 1, 0, 8), -SDP_CORE_ETOOBIG);
        EXPECT_EQ(TxBuild(&p.active, hdr, SDP_MID_DATA, k.a_seg, 0, 8), int{kBsdh});
        EXPECT_EQ(Be32(hdr + 4), k.a_seg + kBsdh);
    }
}

// ---- transmit decisions -------------------------------------------------------

class ConnTx : public ::testing::Test {
  protected:
    void SetUp() override { p_.Connect(); }
    // A new connected pair: a protocol error leaves a connection dead.
    void Fresh()
    {
        p_ = Pair{};
        p_.Connect();
    }
    sdp_core_conn* A() { return &p_.active; }
    sdp_core_conn* P() { return &p_.passive; }
    unsigned Seg() { return sdp_core_seg_max(A()); }
    // One Data message from the active side, left in flight.
    void SendData(unsigned len = 100)
    {
        unsigned char hdr[kBsdh];
        ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, len, 0, 8), int{kBsdh});
    }
    Pair p_;
};

TEST_F(ConnTx, FullSegmentPostsWithCredits)
{
    EXPECT_EQ(sdp_core_tx_decide(A(), Seg(), 1, 0), SDP_TX_POST);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << "full: more queued behind it";
    EXPECT_EQ(sdp_core_tx_decide(A(), Seg(), 0, 0), SDP_TX_POST) << "seg_max bytes is full";
}

TEST_F(ConnTx, NagleHoldsPartialSegmentOnlyWhileDataInFlight)
{
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST) << "nothing in flight: goes now";
    SendData(Seg()); // full segments: no acknowledgement from the peer is awaited
    EXPECT_EQ(sdp_core_data_in_flight(A()), 1u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD);
    EXPECT_EQ(sdp_core_tx_decide(A(), Seg() - 1, 0, 0), SDP_TX_HOLD);
    EXPECT_EQ(sdp_core_tx_decide(A(), Seg(), 0, 0), SDP_TX_POST);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << "full segments are not held";
    SendData(Seg());
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD) << "one of two still in flight";
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_data_in_flight(A()), 0u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST) << "the completion releases it";
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_data_in_flight(A()), 0u) << "a stray completion does not wrap";
}

TEST_F(ConnTx, TxNextPostsTheOldestSegmentWithItsHeaderWritten)
{
    sdp_core_rx_posted(A(), 6);
    const unsigned credits = sdp_core_tx_credits(A());
    const TxNext n = Next(A(), 10, 1);
    ASSERT_RC(n.rc, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_DATA);
    EXPECT_EQ(n.act.mid, unsigned{SDP_MID_DATA});
    EXPECT_EQ(n.act.hdr_len, kBsdh);
    EXPECT_EQ(n.act.data, SDP_TX_POST);
    EXPECT_EQ(n.seg[0], SDP_MID_DATA);
    EXPECT_EQ(n.seg[1], 0u) << "no urgent data";
    EXPECT_EQ(Be16(&n.seg[2]), 6u) << "the posted buffers last reported";
    EXPECT_EQ(Be32(&n.seg[4]), kBsdh + 10) << "BSDH.len covers the payload";
    EXPECT_EQ(sdp_core_tx_credits(A()), credits - 1) << "accounted";
    EXPECT_EQ(sdp_core_data_in_flight(A()), 1u);
}

// Fullness is the core's: a partial segment waits for the one in flight
// (Nagle) unless more segments queue behind it or it ends with urgent data.
TEST_F(ConnTx, TxNextHoldsAPartialSegmentAloneOnly)
{
    SendData(Seg());
    TxNext n = Next(A(), 1, 1);
    ASSERT_RC(n.rc, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_NONE);
    EXPECT_EQ(n.act.data, SDP_TX_HOLD);
    n = Next(A(), 1, 1, false, SDP_TXO_NODELAY);
    EXPECT_EQ(n.act.kind, SDP_TXN_DATA) << "TCP_NODELAY";
    n = Next(A(), 1, 2);
    EXPECT_EQ(n.act.kind, SDP_TXN_DATA) << "a segment queued behind it";
    n = Next(A(), 1, 1, true);
    EXPECT_EQ(n.act.kind, SDP_TXN_DATA) << "urgent data goes at once";
    EXPECT_EQ(n.seg[1], unsigned{SDP_FLAG_OOB_PRES});
    n = Next(A(), Seg(), 1, false, SDP_TXO_CORK);
    EXPECT_EQ(n.act.kind, SDP_TXN_DATA) << "a full segment is not corked";
    n = Next(A(), 1, 1, false, SDP_TXO_CORK | SDP_TXO_NODELAY);
    EXPECT_EQ(n.act.data, SDP_TX_HOLD) << "cork holds a partial one";
}

// Data that cannot go leaves the turn to a control message due, if the
// control ring has a buffer for it.
TEST_F(ConnTx, TxNextPostsTheControlMessageDueWhenDataWaits)
{
    sdp_core_rx rx{};
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx), 0);
    sdp_core_ack_request(P());
    TxNext n = Next(P(), 0, 0, false, 0, false);
    ASSERT_RC(n.rc, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_NONE) << "no control buffer free";
    EXPECT_EQ(n.act.data, SDP_TX_POST) << "no data queued";
    n = Next(P(), 0, 0);
    ASSERT_RC(n.rc, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_CONTROL);
    EXPECT_EQ(n.act.mid, unsigned{SDP_MID_DATA}) << "the acknowledgement, as a credit update";
    EXPECT_EQ(n.act.hdr_len, kBsdh);
    EXPECT_EQ(Be32(&n.ctl[4]), kBsdh) << "no payload";
    EXPECT_EQ(Next(P(), 0, 0).act.kind, SDP_TXN_NONE) << "acknowledged once";
    // Shut down with nothing queued: DisConn is next.
    sdp_core_shutdown_send(P());
    n = Next(P(), 0, 0);
    EXPECT_EQ(n.act.kind, SDP_TXN_CONTROL);
    EXPECT_EQ(n.act.mid, unsigned{SDP_MID_DISCONN});
    EXPECT_EQ(n.ctl[0], SDP_MID_DISCONN);
}

// Minshall's Nagle on the peer's acknowledgement: after a partial message,
// small data waits until the peer's mseq_ack covers it, however soon the
// transport completes the SEND (on a local link, before the next write).
TEST_F(ConnTx, NagleHoldsSmallDataUntilThePeerAcknowledges)
{
    sdp_core_rx rx{};
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, unsigned{SDP_CORE_ACK_DELAY_MS})
        << "a partial message makes an acknowledgement owed";
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD) << "completed, not acknowledged";
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_NODELAY), SDP_TX_POST);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << "full segments are not held";
    // The passive side owes the acknowledgement but sends it only when asked.
    EXPECT_EQ(ControlDue(P(), 0, 8), 0);
    sdp_core_ack_request(P());
    ASSERT_EQ(ControlDue(P(), 0, 8), SDP_MID_DATA);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    EXPECT_EQ(ControlDue(P(), 0, 8), 0) << "acknowledged once";
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST) << "the acknowledgement releases it";
}

TEST_F(ConnTx, PeerDataCarriesTheAcknowledgement)
{
    sdp_core_rx rx{};
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 10, &rx), 0);
    ASSERT_EQ(rx.ack_timer_ms, unsigned{SDP_CORE_ACK_DELAY_MS});
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 10, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 0u) << "already owed: the timer is armed";
    sdp_core_tx_done(A(), SDP_MID_DATA);
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD);
    // A reply (request/response) acknowledges without an extra message.
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 5, &rx), 0);
    sdp_core_ack_request(P()); // the timer fires later: nothing is owed
    EXPECT_EQ(ControlDue(P(), 0, 8), 0);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST);
}

// The host's ack delay is the timer the core asks for, from the next
// acknowledgement owed; zero keeps the value in force.
TEST_F(ConnTx, TheDelayedAckTimerRunsForTheConfiguredDelay)
{
    sdp_core_rx rx{};
    sdp_core_set_timers(P(), 40, 0);
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 40u);
    sdp_core_set_timers(P(), 7, 0);
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 0u) << "owed already: the running timer covers it";
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 3, &rx), 0); // acknowledges
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 7u);
}

TEST_F(ConnTx, FullMessagesOweNoAcknowledgement)
{
    sdp_core_rx rx{};
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, Seg(), &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 0u);
    sdp_core_ack_request(P());
    EXPECT_EQ(ControlDue(P(), 0, 8), 0);
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 0, &rx), 0);
    EXPECT_EQ(rx.ack_timer_ms, 0u) << "a credit update is not data to acknowledge";
}

TEST_F(ConnTx, NodelayAndPushOverrideNagle)
{
    SendData();
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_NODELAY), SDP_TX_POST);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_PUSH), SDP_TX_POST);
}

TEST_F(ConnTx, CorkHoldsPartialEvenWithNothingInFlight)
{
    ASSERT_EQ(sdp_core_data_in_flight(A()), 0u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_CORK), SDP_TX_HOLD);
    EXPECT_EQ(sdp_core_tx_decide(A(), Seg() - 1, 0, SDP_TXO_CORK), SDP_TX_HOLD);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_CORK | SDP_TXO_NODELAY), SDP_TX_HOLD)
        << "cork wins over nodelay, as in TCP";
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, SDP_TXO_CORK), SDP_TX_POST) << "full goes";
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_CORK | SDP_TXO_PUSH), SDP_TX_POST)
        << "uncork/urgent/close pushes";
}

TEST_F(ConnTx, NoCreditAtTheControlReserve)
{
    // 8 credits: data may take 6, never the last 2.
    for (unsigned i = 0; i < 8 - kReserve; i++) {
        ASSERT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << i;
        SendData(1);
    }
    EXPECT_EQ(sdp_core_tx_credits(A()), kReserve);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, SDP_TXO_PUSH | SDP_TXO_NODELAY), SDP_TX_NO_CREDIT);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD) << "Nagle first: data is in flight";
    unsigned char hdr[kBsdh];
    EXPECT_RC(TxBuild(A(), hdr, SDP_MID_DATA, 1, 0, 8), -SDP_CORE_ESTATE)
        << "tx_build enforces the reserve too";
    // The reserve is for control messages: a credit update and a DisConn.
    EXPECT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_tx_credits(A()), 0u);

    // New credits from the peer (it saw all 8 messages) release data again.
    sdp_core_rx rx{};
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 8), &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 8u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_CLOSED) << "but the DisConn went";
}

TEST_F(ConnTx, CreditsFollowPeerBufsAndAcks)
{
    for (int i = 0; i < 4; i++)
        SendData(1); // mseq 1..4
    EXPECT_EQ(sdp_core_tx_credits(A()), 4u);
    sdp_core_rx rx{};
    // The peer has seen nothing of ours (ack 0) and posts 8: 8 - 4 in flight.
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0), &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 4u);
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 2, 3), &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 7u);
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 3, 3, 4), &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 3u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST);
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 2, 4, 4), &rx), 0);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_NO_CREDIT);
}

TEST_F(ConnTx, ClosedAfterDisConn)
{
    sdp_core_shutdown_send(A());
    EXPECT_EQ(sdp_core_state(A()) & SDP_CS_SHUT_REQUESTED, unsigned{SDP_CS_SHUT_REQUESTED});
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << "queued data still goes";
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(hdr[0], SDP_MID_DISCONN);
    EXPECT_EQ(Be32(hdr + 4), kBsdh);
    EXPECT_NE(sdp_core_state(A()) & SDP_CS_DISCONN_SENT, 0u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_CLOSED);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_PUSH), SDP_TX_CLOSED);
    EXPECT_RC(TxBuild(A(), hdr, SDP_MID_DATA, 1, 0, 8), -SDP_CORE_ESTATE)
        << "no data after DisConn";
    EXPECT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh})
        << "but credit updates: the peer may still be sending";
    EXPECT_RC(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), -SDP_CORE_ESTATE) << "one DisConn";
    EXPECT_EQ(TxBuild(A(), hdr, SDP_MID_ABORT_CONN, 0, 0, 8), int{kBsdh})
        << "an abort may still follow";
    EXPECT_NE(sdp_core_state(A()) & SDP_CS_ABORTED, 0u);
    EXPECT_RC(TxBuild(A(), hdr, SDP_MID_ABORT_CONN, 0, 0, 8), -SDP_CORE_ESTATE);
    EXPECT_RC(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), -SDP_CORE_ESTATE);
}

TEST_F(ConnTx, ClosedAfterAbortEitherWay)
{
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_ABORT_CONN, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(hdr[0], SDP_MID_ABORT_CONN);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_CLOSED);
    EXPECT_EQ(ControlDue(A(), 0, 8), 0);

    sdp_core_rx rx{};
    ASSERT_RC(Recv(P(), Bytes(hdr, hdr + kBsdh), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_ABORT});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_ABORT_CONN});
    EXPECT_NE(sdp_core_state(P()) & SDP_CS_ABORTED, 0u);
    EXPECT_EQ(sdp_core_tx_decide(P(), 1, 1, 0), SDP_TX_CLOSED);
    sdp_core_shutdown_send(P());
    EXPECT_EQ(ControlDue(P(), 0, 8), 0) << "no DisConn after an abort";
}

TEST_F(ConnTx, BuildHeaders)
{
    sdp_core_rx rx{};
    // Two messages from the peer first, so there is something to acknowledge.
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 10, &rx), 0);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);

    unsigned char hdr[kBsdh + 4];
    std::memset(hdr, 0xee, sizeof(hdr));
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 100, 0, 7), int{kBsdh});
    EXPECT_EQ(hdr[0], SDP_MID_DATA);
    EXPECT_EQ(hdr[1], 0);
    EXPECT_EQ(Be16(hdr + 2), 7u) << "bufs = posted_rx";
    EXPECT_EQ(Be32(hdr + 4), 116u) << "len = BSDH + payload";
    EXPECT_EQ(Be32(hdr + 8), 1u) << "mseq";
    EXPECT_EQ(Be32(hdr + 12), 2u) << "mseq_ack = last received";
    EXPECT_EQ(hdr[kBsdh], 0xee) << "only the header is written";
    EXPECT_EQ(sdp_core_data_in_flight(A()), 1u);

    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 1, SDP_FLAG_OOB_PRES | 0xf0, 65535), int{kBsdh});
    EXPECT_EQ(hdr[1], SDP_FLAG_OOB_PRES) << "only OOB_PRES passes through";
    EXPECT_EQ(Be16(hdr + 2), 65535u);
    EXPECT_EQ(Be32(hdr + 8), 2u);
    EXPECT_EQ(Be32(hdr + 12), 2u);

    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, SDP_FLAG_OOB_PRES, 0), int{kBsdh});
    EXPECT_EQ(hdr[0], SDP_MID_DISCONN);
    EXPECT_EQ(hdr[1], 0) << "no flags on DisConn";
    EXPECT_EQ(Be16(hdr + 2), 0u);
    EXPECT_EQ(Be32(hdr + 4), kBsdh);
    EXPECT_EQ(Be32(hdr + 8), 3u);
    EXPECT_EQ(Be32(hdr + 12), 3u);
    EXPECT_EQ(sdp_core_tx_credits(A()), 8u - 3u + 0u) << "one credit per SEND";
}

TEST_F(ConnTx, BuildRejectsWhatTheCoreDoesNotSend)
{
    unsigned char hdr[kBsdh];
    const unsigned mids[] = {SDP_MID_HELLO,         SDP_MID_HELLO_ACK,  SDP_MID_SEND_SM,
                             SDP_MID_RDMA_RD_COMPL, SDP_MID_SRC_AVAIL,  SDP_MID_SINK_AVAIL,
                             SDP_MID_MODE_CHANGE,   SDP_MID_CH_RCV_BUF, 0x42};
    for (unsigned mid : mids)
        EXPECT_LT(TxBuild(A(), hdr, mid, 0, 0, 8), 0) << "mid " << mid;
    EXPECT_LT(TxBuild(A(), hdr, SDP_MID_DISCONN, 1, 0, 8), 0) << "DisConn carries no payload";
    EXPECT_LT(TxBuild(A(), hdr, SDP_MID_ABORT_CONN, 1, 0, 8), 0) << "AbortConn carries no payload";
    EXPECT_EQ(sdp_core_tx_credits(A()), 8u) << "failed builds spend no credit";
    EXPECT_EQ(sdp_core_state(A()), unsigned{SDP_CS_ESTABLISHED}) << "nor change the state";
    // ... nor a sequence number: the next message is still mseq 1.
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 1, 0, 8), int{kBsdh});
    EXPECT_EQ(Be32(hdr + 8), 1u);
}

TEST_F(ConnTx, DataInFlightCountsDataSendsCreditUpdatesToo)
{
    // tx_done() gets only the mid, so a completed credit update must have
    // been counted when it was built.
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 5, 0, 8), int{kBsdh});
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_data_in_flight(A()), 2u);
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_data_in_flight(A()), 2u) << "DisConn is not Data";
    sdp_core_tx_done(A(), SDP_MID_DATA);
    sdp_core_tx_done(A(), SDP_MID_DATA);
    EXPECT_EQ(sdp_core_data_in_flight(A()), 0u);
    sdp_core_tx_done(A(), SDP_MID_DISCONN);
    EXPECT_EQ(sdp_core_data_in_flight(A()), 0u);
}

TEST_F(ConnTx, NagleWaitsForPayloadNotForCreditUpdates)
{
    // Completions come in posting order.  A credit update in flight does
    // not hold a small segment back...
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST);
    // ... payload does, even with updates posted after it (full segments
    // here: a partial one would wait for the peer's acknowledgement too) ...
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, Seg(), 0, 8), int{kBsdh});
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD);
    sdp_core_tx_done(A(), SDP_MID_DATA); // the first update
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_HOLD);
    sdp_core_tx_done(A(), SDP_MID_DATA); // the payload
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, 0), SDP_TX_POST) << "only updates are left in flight";
    EXPECT_EQ(sdp_core_data_in_flight(A()), 2u);
}

// ---- control messages -------------------------------------------------------------

TEST_F(ConnTx, DisConnDueOnlyAfterShutdownWithNothingQueued)
{
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "nothing to say";
    sdp_core_shutdown_send(A());
    EXPECT_EQ(ControlDue(A(), 2, 8), 0) << "data queued: it goes first";
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DISCONN);
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "one DisConn";
}

TEST_F(ConnTx, DisConnWaitsForACredit)
{
    // Spend every credit (6 data + 2 updates) and shut down.
    for (unsigned i = 0; i < 8 - kReserve; i++)
        SendData(1);
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    sdp_core_shutdown_send(A());
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "no credit: the DisConn waits";
    sdp_core_rx rx{};
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 8), &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DISCONN);
}

TEST_F(ConnTx, HalfClosedSideStillGrantsCredits)
{
    // We shut down and sent our DisConn; the peer goes on sending into our
    // ring.  Our reader frees buffers: the peer must hear of them.
    sdp_core_shutdown_send(A());
    unsigned char hdr[kBsdh];
    ASSERT_EQ(ControlDue(A(), 0, 8), SDP_MID_DISCONN);
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DISCONN, 0, 0, 8), int{kBsdh});
    sdp_core_rx rx{};
    ASSERT_RC(Recv(P(), Bytes(hdr, hdr + kBsdh), &rx), 0);
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(sdp_core_tx_decide(P(), 1, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DATA);
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 0, &rx), 0);
    EXPECT_EQ(sdp_core_tx_decide(P(), 1, 1, 0), SDP_TX_POST);

    // Once the peer's DisConn is in too, nothing is left to say.
    for (int i = 0; i < 5; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DATA);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DISCONN, 0, &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "our DisConn stays the last message";
    EXPECT_EQ(ControlDue(P(), 0, 8), 0);
}

TEST_F(ConnTx, CreditUpdateFollowsLedgerRule)
{
    // We (active) advertised 8 in the Hello.  The peer sends 4 messages: as
    // far as it knows it has 4 credits left.
    sdp_core_rx rx{};
    for (int i = 0; i < 4; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 4), 0) << "nothing new to announce";
    EXPECT_EQ(ControlDue(A(), 0, 5), 0);
    EXPECT_EQ(ControlDue(A(), 0, 6), 0) << "6 is not more than 1.5 x 4";
    EXPECT_EQ(ControlDue(A(), 0, 7), SDP_MID_DATA) << "7 > 1.5 x 4";

    // The update is a zero-payload Data message advertising what is posted.
    const Bytes update = Pair::Build(A(), SDP_MID_DATA, 0, 0, 7);
    EXPECT_EQ(update[0], SDP_MID_DATA);
    EXPECT_EQ(Be16(&update[2]), 7u);
    EXPECT_EQ(Be32(&update[4]), kBsdh);
    EXPECT_EQ(Be32(&update[12]), 4u);
    ASSERT_RC(Recv(P(), update, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_DATA});
    EXPECT_EQ(rx.payload_len, 0u);
    EXPECT_EQ(sdp_core_tx_credits(P()), 7u) << "the peer now has what we posted";
    EXPECT_EQ(ControlDue(A(), 0, 7), 0) << "told";
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "8 is not more than 1.5 x 7";

    // The peer spends 5 more: 2 left, the control reserve.  Any re-posted
    // buffer is then worth an update, or the peer could not send data.
    for (int i = 0; i < 5; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(P()), 2u);
    EXPECT_EQ(ControlDue(A(), 0, 2), 0);
    EXPECT_EQ(ControlDue(A(), 0, 3), SDP_MID_DATA);
}

TEST_F(ConnTx, CreditUpdateUsesTheControlReserve)
{
    sdp_core_rx rx{};
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    // Our own credits down to 1: no data, but the update can still go.
    for (unsigned i = 0; i < 8 - kReserve; i++)
        SendData(1);
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 2), int{kBsdh});
    ASSERT_EQ(sdp_core_tx_credits(A()), 1u);
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DATA);
    EXPECT_EQ(ControlDue(A(), 3, 8), SDP_MID_DATA) << "queued data does not hold it back";
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    ASSERT_EQ(sdp_core_tx_credits(A()), 0u);
    // An update from the peer that has not seen our messages: no news.
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 0u);
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "without a credit nothing can go";
}

// The last credit goes only on the update that lets a peer at its reserve
// send data again: spent on one that does not, it would leave us mute while
// the peer waits for credits.
TEST_F(ConnTx, LastCreditOnlyForTheUpdateThatUnblocksThePeer)
{
    // Seven of our eight credits spent; the peer, not having seen them,
    // spends all eight we gave it (6 data, 2 updates from its reserve).
    for (unsigned i = 0; i < 8 - kReserve; i++)
        SendData(1);
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    sdp_core_rx rx{};
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 1u);
    EXPECT_EQ(ControlDue(A(), 0, 8), SDP_MID_DATA) << "the peer is below its reserve";
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 1u);
    // The peer has no credit left at all.  One or two buffers would let it
    // speak but not send data: not worth the last credit.
    EXPECT_EQ(ControlDue(A(), 0, 1), 0);
    EXPECT_EQ(ControlDue(A(), 0, 2), 0);
    EXPECT_EQ(ControlDue(A(), 0, 3), SDP_MID_DATA) << "three let it send data";

    // A peer above its reserve can still send data: it gets no update on
    // our last credit, however many buffers we re-posted.
    Pair q;
    q.Connect();
    for (unsigned i = 0; i < 8 - kReserve + 1; i++)
        ASSERT_EQ(TxBuild(&q.active, hdr, SDP_MID_DATA, i < 6 ? 1 : 0, 0, 8), int{kBsdh});
    for (int i = 0; i < 5; i++)
        ASSERT_RC(Pair::Send(&q.passive, &q.active, SDP_MID_DATA, 1, &rx), 0);
    ASSERT_EQ(sdp_core_tx_credits(&q.active), 1u);
    EXPECT_EQ(ControlDue(&q.active, 0, 8), 0) << "the peer has 3";
}

TEST_F(ConnTx, QueuedDataDoesNotHoldAnUpdateBack)
{
    // Corked (or Nagle-held) data may stay queued for long: the peer must
    // still hear about re-posted buffers, or a request/response exchange
    // deadlocks (the peer blocks for credits, we wait for its answer).
    sdp_core_rx rx{};
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    EXPECT_EQ(sdp_core_tx_decide(A(), 10, 0, SDP_TXO_CORK), SDP_TX_HOLD);
    EXPECT_EQ(ControlDue(A(), 1, 8), SDP_MID_DATA);
}

TEST_F(ConnTx, UpdateOnlyWhenItLetsThePeerSendData)
{
    // The peer spends 7 of the 8 credits we gave it.
    sdp_core_rx rx{};
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx), 0);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 2), 0)
        << "2 buffers are the peer's control reserve: no data would follow";
    EXPECT_EQ(ControlDue(A(), 0, 3), SDP_MID_DATA);
    // The peer spends its last credit: now even one buffer is worth telling,
    // or it could not send so much as a DisConn.
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DISCONN, 0, &rx), 0);
    EXPECT_EQ(ControlDue(A(), 0, 1), SDP_MID_DATA);
}

// At exactly the control reserve, the active side answers and the passive
// side does not; below it both do.
TEST_F(ConnTx, AtTheReserveOnlyTheActiveSideAnswers)
{
    sdp_core_rx rx{};
    // We send 6 of our 8 credits' worth; the peer, holding them unread
    // (2 posted), sends 6: both sides at the reserve, and both know it.
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 1, &rx, 0, 8), 0);
    for (int i = 0; i < 6; i++)
        ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 1, &rx, 0, 2), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 2u);
    ASSERT_EQ(sdp_core_tx_credits(P()), 2u);
    // One buffer read and re-posted on each side (3 posted, the peer knows
    // of 2).
    EXPECT_EQ(ControlDue(A(), 0, 3), SDP_MID_DATA) << "active";
    EXPECT_EQ(ControlDue(P(), 0, 3), 0) << "passive";
    EXPECT_EQ(ControlDue(P(), 0, 4), SDP_MID_DATA) << "4 > 1.5 x 2: both";
    // The active side's update leaves it at 1, below the reserve: the
    // passive side answers that.
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 0, &rx, 0, 3), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 1u);
    EXPECT_EQ(ControlDue(P(), 0, 3), SDP_MID_DATA);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 0, &rx, 0, 3), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 3u);
    EXPECT_EQ(sdp_core_tx_credits(P()), 2u);
    // That left the passive side at the reserve: the active side answers
    // once more, and the passive side, at 3 now, lets it be.
    EXPECT_EQ(ControlDue(A(), 0, 3), SDP_MID_DATA);
    ASSERT_RC(Pair::Send(A(), P(), SDP_MID_DATA, 0, &rx, 0, 3), 0);
    EXPECT_EQ(sdp_core_tx_credits(P()), 3u);
    EXPECT_EQ(ControlDue(P(), 0, 3), 0);
    EXPECT_EQ(ControlDue(A(), 0, 3), 0);
}

// Deliver whatever control_due() asks for, both ways, until both are quiet;
// each side has `posted` buffers posted throughout (updates are re-posted at
// once).  Returns the number of messages, or -1 if they never stop.
int DrainControl(sdp_core_conn* a, sdp_core_conn* b, unsigned short posted)
{
    int sent = 0;
    for (int round = 0; round < 50; round++) {
        bool any = false;
        for (int s = 0; s < 2; s++) {
            sdp_core_conn* from = s == 0 ? a : b;
            sdp_core_conn* to = s == 0 ? b : a;
            const int mid = ControlDue(from, 0, posted);
            if (mid == 0)
                continue;
            sdp_core_rx rx{};
            if (Pair::Send(from, to, static_cast<unsigned>(mid), 0, &rx, 0, posted) != 0)
                return -1;
            sent++;
            any = true;
        }
        if (!any)
            return sent;
    }
    return -1;
}

TEST(ConnCredits, ThreeBufferRingsGoQuiet)
{
    // With 3 buffers a side, one credit is above the reserve: every message
    // leaves its sender at the reserve.  An update must not be answered by
    // an update answered by an update...
    for (int first = 0; first < 2; first++) {
        Sizes s;
        s.active_posted = s.passive_posted = 3;
        Pair p(s);
        p.Connect();
        sdp_core_conn* x = first == 0 ? &p.active : &p.passive;
        sdp_core_conn* y = first == 0 ? &p.passive : &p.active;
        sdp_core_rx rx{};
        // x sends data; y reads it and re-posts: y has 3 posted, x 2 credits.
        ASSERT_RC(Pair::Send(x, y, SDP_MID_DATA, 10, &rx, 0, 3), 0);
        const int n = DrainControl(x, y, 3);
        EXPECT_GE(n, 0) << "credit updates never stop (first sender "
                        << (first == 0 ? "active)" : "passive)");
        EXPECT_LE(n, 2);
        // x has its next segment queued.  As a host's pump: post data when
        // the core says so, else send the control message due, both sides.
        int msgs = 0;
        while (sdp_core_tx_decide(x, 10, 1, 0) != SDP_TX_POST) {
            ASSERT_LT(msgs, 10) << "no progress";
            int sent = 0;
            for (sdp_core_conn* from : {x, y}) {
                sdp_core_conn* to = from == x ? y : x;
                const int mid = ControlDue(from, from == x ? 1 : 0, 3);
                if (mid != 0) {
                    ASSERT_RC(Pair::Send(from, to, static_cast<unsigned>(mid), 0, &rx, 0, 3), 0);
                    sent++;
                }
                if (sdp_core_tx_decide(x, 10, 1, 0) == SDP_TX_POST)
                    break;
            }
            ASSERT_GT(sent, 0) << "data blocked and nobody speaks: deadlock";
            msgs += sent;
        }
        EXPECT_LE(msgs, 2) << "the blocked side asks (active) or is released (passive)";
    }
}

TEST_F(ConnTx, ActiveSideBlockedAtTheReserveAsksForCredits)
{
    for (unsigned i = 0; i < 8 - kReserve; i++)
        SendData(1);
    // The peer read everything and told us (8 posted) ... then we sent 6
    // more: at the reserve again, the peer knows of 8 - ... as in the test
    // above, a peer at the reserve with nothing new does not speak.
    sdp_core_rx rx{};
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 3, 1, 6), &rx), 0);
    ASSERT_EQ(sdp_core_tx_credits(A()), 3u);
    SendData(1);
    ASSERT_EQ(sdp_core_tx_credits(A()), 2u);
    // Not while the data is held for cork or Nagle: only when blocked.
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 0, SDP_TXO_CORK), SDP_TX_HOLD);
    EXPECT_EQ(ControlDue(A(), 1, 8), 0);
    EXPECT_EQ(ControlDue(A(), 0, 8), 0) << "nothing queued";
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(ControlDue(A(), 1, 8), SDP_MID_DATA);
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 0, 0, 8), int{kBsdh});
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(ControlDue(A(), 1, 8), 0) << "asked once";
}

TEST_F(ConnTx, PassiveSideDoesNotAsk)
{
    // The passive side blocked at the reserve is released by the active
    // side's rule; asking too would make two blocked sides bounce requests.
    for (unsigned i = 0; i < 8 - kReserve; i++) {
        unsigned char hdr[kBsdh];
        ASSERT_EQ(TxBuild(P(), hdr, SDP_MID_DATA, 1, 0, 8), int{kBsdh});
    }
    ASSERT_EQ(sdp_core_tx_credits(P()), 2u);
    EXPECT_EQ(sdp_core_tx_decide(P(), 1, 1, 0), SDP_TX_NO_CREDIT);
    EXPECT_EQ(ControlDue(P(), 1, 8), 0);
}

// ---- receive -----------------------------------------------------------------

class ConnRx : public ConnTx {};

TEST_F(ConnRx, DataPayloadAndUrgentFlag)
{
    sdp_core_rx rx{};
    const Bytes msg = Pair::Build(P(), SDP_MID_DATA, 100, 0, 8);
    ASSERT_RC(Recv(A(), msg, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_DATA});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_DATA});
    EXPECT_EQ(rx.payload_off, kBsdh);
    EXPECT_EQ(rx.payload_len, 100u);
    EXPECT_EQ(rx.urgent, 0);

    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 7, &rx, SDP_FLAG_OOB_PRES), 0);
    EXPECT_EQ(rx.payload_len, 7u);
    EXPECT_NE(rx.urgent, 0) << "the last byte is urgent";

    // OOB_PRES on an empty message has no byte to mark.
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, SDP_FLAG_OOB_PRES, 8, 3, 0), &rx), 0);
    EXPECT_EQ(rx.payload_len, 0u);
    EXPECT_EQ(rx.urgent, 0);
    // Other flags are ignored.
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, SDP_FLAG_OOB_PEND | SDP_FLAG_REQ_PIPE, 8, 4, 0, 3), &rx),
              0);
    EXPECT_EQ(rx.payload_len, 3u);
    EXPECT_EQ(rx.urgent, 0);
}

TEST_F(ConnRx, ReceiveOverwritesStaleOutput)
{
    sdp_core_rx rx{};
    rx.kind = 99;
    rx.urgent = 1;
    rx.payload_len = 1234;
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DISCONN, 0, 8, 1, 0), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_DISCONN});
    EXPECT_EQ(rx.payload_len, 0u);
    EXPECT_EQ(rx.urgent, 0);
}

TEST_F(ConnRx, DisConnThenOnlyCreditUpdates)
{
    sdp_core_rx rx{};
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DATA, 5, &rx), 0);
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DISCONN, 0, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_DISCONN});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_DISCONN});
    EXPECT_EQ(rx.payload_len, 0u);
    EXPECT_NE(sdp_core_state(A()) & SDP_CS_DISCONN_RCVD, 0u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_POST) << "half-closed: we may still send";

    // A zero-payload Data (credit update) after DisConn is fine...
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 3, 0), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_DATA});
    EXPECT_EQ(rx.payload_len, 0u);
    // ... data is not, nor a second DisConn.
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 4, 0, 1), &rx), -SDP_CORE_EPROTO);
    Pair q;
    q.Connect();
    ASSERT_RC(Pair::Send(&q.passive, &q.active, SDP_MID_DISCONN, 0, &rx), 0);
    EXPECT_RC(Recv(&q.active, Raw(SDP_MID_DISCONN, 0, 8, 2, 0), &rx), -SDP_CORE_EPROTO)
        << "second DisConn";
}

TEST_F(ConnRx, AbortConn)
{
    sdp_core_rx rx{};
    sdp_core_shutdown_send(P());
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_DISCONN, 0, &rx), 0);
    // An abort is accepted even after a DisConn.
    ASSERT_RC(Pair::Send(P(), A(), SDP_MID_ABORT_CONN, 0, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_ABORT});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_ABORT_CONN});
    EXPECT_NE(sdp_core_state(A()) & SDP_CS_ABORTED, 0u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 1, 1, 0), SDP_TX_CLOSED);
}

TEST_F(ConnRx, SequenceGapAndReplay)
{
    sdp_core_rx rx{};
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 2, 0, 1), &rx), -SDP_CORE_ESEQUENCE) << "gap";
    EXPECT_EQ(sdp_core_tx_credits(A()), 8u) << "errors change no credits";
    Fresh();
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 0, 0, 1), &rx), -SDP_CORE_ESEQUENCE)
        << "mseq 0 is the Hello";
    Fresh();
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), 0);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), -SDP_CORE_ESEQUENCE) << "replay";
    Fresh();
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), 0);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 0xffffffffu, 0, 1), &rx), -SDP_CORE_ESEQUENCE);
    Fresh();
    ASSERT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), 0);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DISCONN, 0, 8, 3, 0), &rx), -SDP_CORE_ESEQUENCE)
        << "control messages are sequenced too";
}

TEST_F(ConnRx, NothingIsAcceptedAfterAProtocolError)
{
    sdp_core_rx rx{};
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 2, 0, 1), &rx), -SDP_CORE_ESEQUENCE);
    EXPECT_NE(sdp_core_state(A()) & SDP_CS_RX_FAILED, 0u);
    // The next message in sequence would have been fine: the connection is
    // reset, and what the peer sends after the violation is not delivered.
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), -SDP_CORE_ESTATE);
    EXPECT_EQ(rx.payload_len, 0u);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 2, 0, 1), &rx), -SDP_CORE_ESTATE);
}

TEST_F(ConnRx, NothingIsAcceptedAfterAnAbort)
{
    sdp_core_rx rx{};
    ASSERT_RC(Recv(A(), Raw(SDP_MID_ABORT_CONN, 0, 8, 1, 0), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_ABORT});
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 2, 0, 1), &rx), -SDP_CORE_ESTATE)
        << "Data after the peer's AbortConn";

    Fresh();
    sdp_core_rx_fail(A());
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), -SDP_CORE_ESTATE)
        << "after an error the host found (a receive that is no SEND)";

    Fresh();
    unsigned char hdr[kBsdh];
    ASSERT_EQ(TxBuild(A(), hdr, SDP_MID_ABORT_CONN, 0, 0, 8), int{kBsdh});
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 1), &rx), -SDP_CORE_ESTATE)
        << "after our own AbortConn";
}

TEST_F(ConnRx, AckFromTheFuture)
{
    sdp_core_rx rx{};
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 1), &rx), -SDP_CORE_ESEQUENCE)
        << "we have sent nothing";
    Fresh();
    SendData(1);
    SendData(1);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 3), &rx), -SDP_CORE_ESEQUENCE);
    EXPECT_EQ(sdp_core_tx_credits(A()), 6u);
    Fresh();
    SendData(1);
    SendData(1);
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 2), &rx), 0);
    EXPECT_EQ(sdp_core_tx_credits(A()), 8u);
}

TEST_F(ConnRx, ByteLenMustMatchBsdhLen)
{
    sdp_core_rx rx{};
    Bytes trailing = Raw(SDP_MID_DATA, 0, 8, 1, 0, 4);
    trailing.push_back(0);
    EXPECT_RC(Recv(A(), trailing, &rx), -SDP_CORE_EMALFORMED)
        << "a SEND carries one message, nothing after it";
    Fresh();
    Bytes truncated = Raw(SDP_MID_DATA, 0, 8, 1, 0, 4);
    truncated.pop_back();
    EXPECT_RC(Recv(A(), truncated, &rx), -SDP_CORE_EMALFORMED);
    Fresh();
    EXPECT_RC(Recv(A(), Raw(SDP_MID_DATA, 0, 8, 1, 0, 0, 0, 15), &rx), -SDP_CORE_EMALFORMED)
        << "BSDH.len shorter than a BSDH";
    Fresh();
    EXPECT_RC(Recv(A(), Bytes(10, 0xff), &rx), -SDP_CORE_EMALFORMED) << "shorter than a BSDH";
    Fresh();
    Bytes disconn_with_payload = Raw(SDP_MID_DISCONN, 0, 8, 1, 0, 1);
    EXPECT_RC(Recv(A(), disconn_with_payload, &rx), -SDP_CORE_EMALFORMED);
    EXPECT_EQ(sdp_core_state(A()), unsigned{SDP_CS_ESTABLISHED | SDP_CS_RX_FAILED})
        << "only the failure is recorded";
}

TEST(ConnRxSizes, LongerThanReceiveBuffer)
{
    Sizes s;
    s.active_rx = 64;
    Pair p(s);
    p.Connect();
    EXPECT_EQ(sdp_core_seg_max(&p.passive), 64u - kBsdh) << "the peer is told the limit";
    sdp_core_rx rx{};
    EXPECT_RC(Recv(&p.active, Raw(SDP_MID_DATA, 0, 8, 1, 0, 64 - kBsdh + 1), &rx),
              -SDP_CORE_ETOOBIG);
    // Even when the bytes beyond BSDH.len were never there.
    Pair q(s);
    q.Connect();
    EXPECT_RC(Recv(&q.active, Raw(SDP_MID_DATA, 0, 8, 1, 0, 0, 0, 100), &rx), -SDP_CORE_EMALFORMED);
    Pair r(s);
    r.Connect();
    EXPECT_RC(Recv(&r.active, Raw(SDP_MID_DATA, 0, 8, 1, 0, 64 - kBsdh), &rx), 0);
    EXPECT_EQ(rx.payload_len, 64u - kBsdh);
}

TEST_F(ConnRx, SetupMessagesAfterSetup)
{
    sdp_core_rx rx{};
    Bytes hello = Raw(SDP_MID_HELLO, 0, 8, 1, 0, 0, SDP_HELLO_MODERN_SIZE - kBsdh);
    hello[16] = 0x22;
    hello[17] = 0x40;
    hello[19] = 1;
    PutBe32(&hello[24], 4096);
    EXPECT_RC(Recv(A(), hello, &rx), -SDP_CORE_EPROTO);
    Bytes ack = Raw(SDP_MID_HELLO_ACK, 0, 8, 1, 0, 0, SDP_HELLO_ACK_SIZE - kBsdh);
    ack[16] = 0x22;
    PutBe32(&ack[20], 4096);
    EXPECT_RC(Recv(P(), ack, &rx), -SDP_CORE_EPROTO);
}

// What each message means to a fresh connection (no transfer of any kind
// in progress); the zero-copy state machines are tested in zcopy_test.cpp.
TEST_F(ConnRx, MessagesOnAnIdleConnection)
{
    struct Case {
        unsigned mid;
        unsigned extra;
        unsigned payload;
        int want;
    };
    const Case cases[] = {
        {SDP_MID_SRC_AVAIL, 16, 0, 0},                     // an offer to read
        {SDP_MID_SRC_AVAIL, 16, 100, -SDP_CORE_EPROTO},    // inline payload: never accepted
        {SDP_MID_SINK_AVAIL, 20, 0, 0},                    // an offer to be written
        {SDP_MID_RDMA_RD_COMPL, 4, 0, -SDP_CORE_EPROTO},   // no SrcAvail of ours
        {SDP_MID_RDMA_WR_COMPL, 4, 0, -SDP_CORE_EPROTO},   // no SinkAvail of ours
        {SDP_MID_SEND_SM, 0, 0, 0},                        // about nothing: ignored
        {SDP_MID_SRC_AVAIL_CANCEL, 0, 0, 0},               // answered with SendSM
        {SDP_MID_SINK_AVAIL_CANCEL, 0, 0, 0},              // answered with SinkCancelAck
        {SDP_MID_SINK_CANCEL_ACK, 0, 0, -SDP_CORE_EPROTO}, // we cancelled nothing
        {SDP_MID_CH_RCV_BUF, 4, 0, -SDP_CORE_EPROTO},
        {SDP_MID_CH_RCV_BUF_ACK, 4, 0, -SDP_CORE_EPROTO},
        {SDP_MID_MODE_CHANGE, 0, 0, -SDP_CORE_EPROTO},
        {SDP_MID_SUSP_COMM, 0, 0, -SDP_CORE_EPROTO},
        {SDP_MID_SUSP_COMM_ACK, 0, 0, -SDP_CORE_EPROTO},
        {0x42, 0, 0, -SDP_CORE_EMALFORMED}, // not an SDP message
        {0xf0, 0, 0, -SDP_CORE_EMALFORMED},
    };
    for (const Case& k : cases) {
        Bytes m = Raw(k.mid, 0, 8, 1, 0, k.payload, k.extra);
        if (k.mid == SDP_MID_SRC_AVAIL || k.mid == SDP_MID_SINK_AVAIL)
            PutBe32(&m[16], 4096); // a valid, nonzero advertised length
        // A fresh connection each: after an error the connection is dead.
        Pair p;
        p.Connect();
        sdp_core_rx rx{};
        EXPECT_RC(Recv(&p.active, m, &rx), k.want) << "mid 0x" << std::hex << k.mid;
        if (k.want == 0 && k.mid != SDP_MID_DATA) {
            EXPECT_EQ(rx.kind, unsigned{SDP_RX_ZCOPY}) << "mid 0x" << std::hex << k.mid;
        }
    }
}

// ---- receive buffers that grow (ChRcvBuf / ChRcvBufAck) ------------------------

// A tx_next() on `c` with `queued` full segments of `seg` bytes queued;
// returns the action (header written into hdr or ctl).
sdp_core_tx_action TxNext(sdp_core_conn* c, unsigned seg, unsigned queued, unsigned char* hdr,
                          unsigned char* ctl)
{
    sdp_core_rx_posted(c, 8);
    sdp_core_tx_ring ring{};
    ring.seg_bytes = seg;
    ring.segs_queued = queued;
    ring.seg_hdr = hdr;
    ring.ctl_hdr = ctl;
    ring.ctl_size = 64;
    sdp_core_tx_action act{};
    EXPECT_EQ(sdp_core_tx_next(c, &ring, &act), 0);
    return act;
}

// A writer with 64 KiB send buffers, a reader with 4 KiB receive buffers.
Sizes GrowingSizes()
{
    Sizes s;
    s.active_tx = 65536;
    s.passive_rx = 4096;
    return s;
}

Bytes ResizeMsg(unsigned mid, unsigned size, unsigned mseq, unsigned mseq_ack)
{
    Bytes m = Raw(mid, 0, 8, mseq, mseq_ack, 0, 4);
    PutBe32(&m[kBsdh], size);
    return m;
}

TEST(ConnResize, HelloAndHelloAckAnnounceIt)
{
    sdp_core_conn c;
    sdp_core_conn_init(&c, 4096, 65536);
    unsigned char buf[SDP_CM_REQ_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHello(&c, buf, sizeof(buf), 8, 1, 0), 0);
    EXPECT_EQ(buf[17] & 0x0f, SDP_CAP_RESIZE);
    Pair p;
    ASSERT_GT(BuildHello(&p.active, buf, sizeof(buf), 8, 1, 0), 0);
    ASSERT_RC(sdp_core_on_hello(&p.passive, buf, sizeof(buf)), 0);
    unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHelloAck(&p.passive, rep, sizeof(rep), 8), 0);
    EXPECT_EQ(rep[17] & 0x0f, SDP_CAP_RESIZE);
}

// The writer with 64 KiB send buffers asks a reader with 4 KiB receive
// buffers, once, when full segments queue; the reader answers once the
// host says its buffers are posted; the writer's segments grow.
TEST(ConnResize, TheSourceAsksAndGrowsOnTheAnswer)
{
    Pair p(GrowingSizes());
    p.Connect();
    ASSERT_EQ(sdp_core_seg_max(&p.active), 4096 - kBsdh);
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    // A partial segment does not ask.
    sdp_core_tx_action act = TxNext(&p.active, 100, 2, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_DATA);
    EXPECT_EQ(sdp_core_control_due(&p.active, 0), 0);
    // A full one does: the next SEND asks.
    act = TxNext(&p.active, 4096 - kBsdh, 1, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_DATA);
    act = TxNext(&p.active, 4096 - kBsdh, 2, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_CONTROL);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF});
    ASSERT_EQ(act.hdr_len, unsigned{SDP_CH_RCV_BUF_SIZE});
    EXPECT_EQ(Be32(ctl + kBsdh), 65536u) << "asks for our send buffer size";
    const Bytes req(ctl, ctl + SDP_CH_RCV_BUF_SIZE);
    // One request at a time.
    act = TxNext(&p.active, 4096 - kBsdh, 2, hdr, ctl);
    EXPECT_EQ(act.kind, SDP_TXN_DATA);

    // The reader: the request (after the two Data messages).
    sdp_core_rx rx{};
    for (int i = 0; i < 2; i++)
        ASSERT_RC(Recv(&p.passive, Raw(SDP_MID_DATA, 0, 8, i + 1, 0, 10), &rx), 0);
    ASSERT_RC(Recv(&p.passive, req, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_RESIZE});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_CH_RCV_BUF});
    EXPECT_EQ(rx.resize_bytes, 65536u);
    EXPECT_NE(sdp_core_control_due(&p.passive, 0), SDP_MID_CH_RCV_BUF_ACK)
        << "no answer before the host's";
    // Messages of the new size are refused until the answer.
    ASSERT_RC(sdp_core_rx_resized(&p.passive, 32768), 0);
    EXPECT_RC(sdp_core_rx_resized(&p.passive, 32768), -SDP_CORE_ESTATE) << "answered once";
    act = TxNext(&p.passive, 0, 0, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_CONTROL);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF_ACK});
    EXPECT_EQ(Be32(ctl + kBsdh), 32768u);
    const Bytes ack(ctl, ctl + SDP_CH_RCV_BUF_SIZE);

    ASSERT_RC(Recv(&p.active, ack, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_RESIZE});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_CH_RCV_BUF_ACK});
    EXPECT_EQ(rx.resize_bytes, 32768u);
    EXPECT_EQ(sdp_core_seg_max(&p.active), 32768 - kBsdh);
    // The reader now takes a message of the new size.
    ASSERT_RC(Recv(&p.passive, Raw(SDP_MID_DATA, 0, 8, 4, 1, 32768 - kBsdh), &rx), 0);
    EXPECT_EQ(rx.payload_len, 32768 - kBsdh);
}

TEST(ConnResize, RefusedAnswerKeepsTheSegments)
{
    Pair p(GrowingSizes());
    p.Connect();
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    TxNext(&p.active, 4096 - kBsdh, 1, hdr, ctl);
    sdp_core_tx_action act = TxNext(&p.active, 4096 - kBsdh, 2, hdr, ctl);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF});
    sdp_core_rx rx{};
    // The answer with the current size: a refusal.
    ASSERT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 4096, 1, 2), &rx), 0);
    EXPECT_EQ(sdp_core_seg_max(&p.active), 4096 - kBsdh);
    // A second answer answers nothing.
    EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 4096, 2, 2), &rx),
              -SDP_CORE_EPROTO);
}

TEST(ConnResize, ProtocolErrors)
{
    sdp_core_rx rx{};
    {
        Pair p;
        p.Connect();
        EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 8192, 1, 0), &rx),
                  -SDP_CORE_EPROTO)
            << "an answer to no request";
    }
    {
        Pair p;
        p.Connect();
        ASSERT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF, 8192, 1, 0), &rx), 0);
        EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF, 8192, 2, 0), &rx), -SDP_CORE_EPROTO)
            << "a second request before our answer";
    }
    {
        Pair p;
        p.Connect();
        EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF, kBsdh, 1, 0), &rx),
                  -SDP_CORE_EPROTO)
            << "a size that holds no payload";
        EXPECT_RC(sdp_core_rx_resized(&p.passive, 8192), -SDP_CORE_ESTATE) << "nothing asked";
    }
    {
        // A peer whose buffers cannot hold our answer must not ask.
        Sizes s;
        s.passive_rx = kBsdh + 1;
        Pair p(s);
        p.Connect();
        EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF, 8192, 1, 0), &rx),
                  -SDP_CORE_EPROTO);
    }
}

// The writer of the first test, its buffers grown to 64 KiB: the
// connection after DATA (mseq 1), ChRcvBuf (2) and the answer.
void GrowActive(Pair& p, unsigned char* hdr, unsigned char* ctl)
{
    TxNext(&p.active, 4096 - kBsdh, 1, hdr, ctl);
    const sdp_core_tx_action act = TxNext(&p.active, 4096 - kBsdh, 2, hdr, ctl);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF});
    sdp_core_rx rx{};
    ASSERT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 65536, 1, 2), &rx), 0);
    ASSERT_EQ(sdp_core_seg_max(&p.active), 65536 - kBsdh);
}

// An idle writer asks the reader to go back to the size of its Hello: after
// the segments queued before the request, which may be large, every
// segment fits the smaller size.  Credit updates consume the reader's large
// buffers until the answer; then a stream asks to grow again.
TEST(ConnResize, AnIdleSourceShrinksThePeerThenGrowsAgain)
{
    Pair p(GrowingSizes());
    p.Connect();
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    GrowActive(p, hdr, ctl);
    ASSERT_EQ(sdp_core_tx_idle(&p.active), 1);
    EXPECT_EQ(sdp_core_tx_idle(&p.active), 0) << "one request at a time";
    // Data queued before the request went: the stream is back, at full
    // size, and the request is dropped.
    sdp_core_tx_action act = TxNext(&p.active, 65536 - kBsdh, 1, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_DATA);
    EXPECT_EQ(Be32(hdr + 4), 65536u);
    ASSERT_EQ(sdp_core_tx_idle(&p.active), 1) << "idle again";
    act = TxNext(&p.active, 0, 0, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_CONTROL);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF});
    EXPECT_EQ(Be32(ctl + kBsdh), 4096u) << "the size of the reader's Hello";
    EXPECT_EQ(sdp_core_seg_max(&p.active), 4096 - kBsdh) << "smaller as the request goes";
    // A queued segment goes before the updates, and fits.
    act = TxNext(&p.active, 4096 - kBsdh, 1, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_DATA);
    // Nothing queued: credit updates, while credits stay above the reserve.
    unsigned updates = 0;
    for (;;) {
        act = TxNext(&p.active, 0, 0, hdr, ctl);
        if (act.kind != SDP_TXN_CONTROL || act.mid != SDP_MID_DATA)
            break;
        EXPECT_EQ(Be32(ctl + 4), unsigned{kBsdh}) << "no payload";
        updates++;
    }
    EXPECT_GE(updates, 1u);
    EXPECT_GE(sdp_core_tx_credits(&p.active), 2u) << "the reserve stays";
    const unsigned last = 5 + updates; // DATA, ChRcvBuf, DATA, ChRcvBuf, DATA, updates
    sdp_core_rx rx{};
    ASSERT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 4096, 2, last), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_RESIZE});
    EXPECT_EQ(sdp_core_seg_max(&p.active), 4096 - kBsdh);
    EXPECT_EQ(sdp_core_control_due(&p.active, 0), 0) << "no more updates after the answer";
    EXPECT_EQ(sdp_core_tx_idle(&p.active), 0) << "nothing left to shrink";
    // The next stream asks again.
    TxNext(&p.active, 4096 - kBsdh, 1, hdr, ctl);
    act = TxNext(&p.active, 4096 - kBsdh, 2, hdr, ctl);
    ASSERT_EQ(act.kind, SDP_TXN_CONTROL);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF});
    EXPECT_EQ(Be32(ctl + kBsdh), 65536u);
}

TEST(ConnResize, ShrinkProtocolErrorsAndRefusals)
{
    const Sizes s = GrowingSizes();
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    sdp_core_rx rx{};
    {
        // Nothing grew: nothing to ask.
        Pair p(s);
        p.Connect();
        EXPECT_EQ(sdp_core_tx_idle(&p.active), 0);
    }
    {
        // Our segments fit 4 KiB since the request: a smaller answer would
        // have lost them.
        Pair p(s);
        p.Connect();
        GrowActive(p, hdr, ctl);
        ASSERT_EQ(sdp_core_tx_idle(&p.active), 1);
        ASSERT_EQ(TxNext(&p.active, 0, 0, hdr, ctl).mid, unsigned{SDP_MID_CH_RCV_BUF});
        EXPECT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 2048, 2, 3), &rx),
                  -SDP_CORE_EPROTO);
    }
    {
        // A refusal (the reader keeps its buffers): segments of that size.
        Pair p(s);
        p.Connect();
        GrowActive(p, hdr, ctl);
        ASSERT_EQ(sdp_core_tx_idle(&p.active), 1);
        ASSERT_EQ(TxNext(&p.active, 0, 0, hdr, ctl).mid, unsigned{SDP_MID_CH_RCV_BUF});
        ASSERT_RC(Recv(&p.active, ResizeMsg(SDP_MID_CH_RCV_BUF_ACK, 65536, 2, 3), &rx), 0);
        EXPECT_EQ(sdp_core_seg_max(&p.active), 65536 - kBsdh);
    }
    {
        // Closing: no request.
        Pair p(s);
        p.Connect();
        GrowActive(p, hdr, ctl);
        sdp_core_shutdown_send(&p.active);
        EXPECT_EQ(sdp_core_tx_idle(&p.active), 0);
    }
}

// The reader's side: a request to shrink is answered with at least the
// size asked for, and from the answer on larger messages are refused.
TEST(ConnResize, TheSinkShrinksOnRequest)
{
    Sizes s;
    s.passive_rx = 4096;
    Pair p(s);
    p.Connect();
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    sdp_core_rx rx{};
    ASSERT_RC(Recv(&p.passive, ResizeMsg(SDP_MID_CH_RCV_BUF, 65536, 1, 0), &rx), 0);
    ASSERT_RC(sdp_core_rx_resized(&p.passive, 65536), 0);
    ASSERT_EQ(TxNext(&p.passive, 0, 0, hdr, ctl).mid, unsigned{SDP_MID_CH_RCV_BUF_ACK});
    ASSERT_RC(Recv(&p.passive, Raw(SDP_MID_DATA, 0, 8, 2, 1, 65536 - kBsdh), &rx), 0);
    ASSERT_RC(Recv(&p.passive, ResizeMsg(SDP_MID_CH_RCV_BUF, 4096, 3, 1), &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_RESIZE});
    EXPECT_EQ(rx.resize_bytes, 4096u);
    EXPECT_RC(sdp_core_rx_resized(&p.passive, 2048), -SDP_CORE_ESTATE) << "smaller than asked";
    ASSERT_RC(sdp_core_rx_resized(&p.passive, 4096), 0);
    const sdp_core_tx_action act = TxNext(&p.passive, 0, 0, hdr, ctl);
    ASSERT_EQ(act.mid, unsigned{SDP_MID_CH_RCV_BUF_ACK});
    EXPECT_EQ(Be32(ctl + kBsdh), 4096u);
    ASSERT_RC(Recv(&p.passive, Raw(SDP_MID_DATA, 0, 8, 4, 2, 4096 - kBsdh), &rx), 0);
    EXPECT_RC(Recv(&p.passive, Raw(SDP_MID_DATA, 0, 8, 5, 2, 4096 - kBsdh + 1), &rx),
              -SDP_CORE_ETOOBIG);
}

// A peer that does not announce SDP_CAP_RESIZE is never asked.
TEST(ConnResize, NotAskedOfAPeerWithoutTheCapability)
{
    sdp_core_conn a;
    sdp_core_conn b;
    sdp_core_conn_init(&a, 4096, 65536);
    sdp_core_conn_init(&b, 4096, 4096);
    unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHello(&a, req, sizeof(req), 8, 1, 0), 0);
    ASSERT_RC(sdp_core_on_hello(&b, req, sizeof(req)), 0);
    unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
    ASSERT_GT(BuildHelloAck(&b, rep, sizeof(rep), 8), 0);
    rep[17] &= 0xf0; // an implementation without the extension
    ASSERT_RC(sdp_core_on_hello_ack(&a, rep, sizeof(rep)), 0);
    unsigned char hdr[kBsdh];
    unsigned char ctl[64];
    for (int i = 0; i < 4; i++) {
        const sdp_core_tx_action act = TxNext(&a, 4096 - kBsdh, 3, hdr, ctl);
        EXPECT_EQ(act.kind, SDP_TXN_DATA) << i;
    }
}

TEST_F(ConnRx, RoundTripBothDirections)
{
    // Ping-pong 50 messages each way through the engines and check every
    // sequence/ack field the peer sees.
    sdp_core_rx rx{};
    for (unsigned i = 1; i <= 50; i++) {
        const Bytes a = Pair::Build(A(), SDP_MID_DATA, i, 0, 8);
        EXPECT_EQ(Be32(&a[8]), i);
        EXPECT_EQ(Be32(&a[12]), i - 1);
        ASSERT_RC(Recv(P(), a, &rx), 0);
        EXPECT_EQ(rx.payload_len, i);
        EXPECT_EQ(a[rx.payload_off], 0x5a);
        const Bytes b = Pair::Build(P(), SDP_MID_DATA, 0, 0, 8);
        EXPECT_EQ(Be32(&b[8]), i);
        EXPECT_EQ(Be32(&b[12]), i);
        ASSERT_RC(Recv(A(), b, &rx), 0);
        EXPECT_EQ(sdp_core_tx_credits(A()), 8u);
    }
}

TEST(ConnErrNames, EveryCodeNamed)
{
    for (int e = SDP_CORE_OK; e <= SDP_CORE_ESTATE; e++) {
        const std::string name = sdp_core_err_name(-e);
        EXPECT_FALSE(name.empty());
        EXPECT_NE(name, "unknown error") << e;
        EXPECT_EQ(name, sdp_core_err_name(e)) << "sign does not matter";
    }
    EXPECT_STREQ(sdp_core_err_name(-999), "unknown error");
}

} // namespace
