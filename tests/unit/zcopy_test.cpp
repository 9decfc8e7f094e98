// SPDX-License-Identifier: GPL-2.0
//
// The zero-copy state machines of the connection engine through the C ABI
// (sdp_core.h): SrcAvail / RDMA Read, SinkAvail / RDMA Write, SendSM, the
// cancels and the send/send deadlock rule, with two engines passing real
// encoded messages, and the messages a rogue peer may try.
#include "posted_calls.h"
#include "sdp_core.h"
#include "sdp_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<unsigned char>;
constexpr unsigned kBuf = 4096;
constexpr unsigned short kPosted = 16;

unsigned Be32(const unsigned char* p)
{
    return (static_cast<unsigned>(p[0]) << 24) | (static_cast<unsigned>(p[1]) << 16) |
           (static_cast<unsigned>(p[2]) << 8) | p[3];
}

void PutBe32(unsigned char* p, unsigned v)
{
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

std::string Err(int rc)
{
    return std::to_string(rc) + " (" + sdp_core_err_name(rc) + ")";
}

class Zcopy : public ::testing::Test {
  protected:
    void SetUp() override
    {
        sdp_core_conn_init(&a_, kBuf, kBuf);
        sdp_core_conn_init(&b_, kBuf, kBuf);
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        ASSERT_GT(BuildHello(&a_, req, sizeof(req), kPosted, 5001, 0), 0);
        ASSERT_EQ(sdp_core_on_hello(&b_, req, sizeof(req)), 0);
        ASSERT_GT(BuildHelloAck(&b_, rep, sizeof(rep), kPosted), 0);
        ASSERT_EQ(sdp_core_on_hello_ack(&a_, rep, sizeof(rep)), 0);
    }

    sdp_core_conn* A() { return &a_; }
    sdp_core_conn* B() { return &b_; }

    static sdp_core_zc_status St(sdp_core_conn* c)
    {
        sdp_core_zc_status st{};
        sdp_core_zc_query(c, &st);
        return st;
    }

    static Bytes SrcAvail(sdp_core_conn* from, unsigned len, unsigned rkey = 0x1234,
                          unsigned long long vaddr = 0x10000)
    {
        Bytes m(SDP_SRC_AVAIL_HDR_SIZE);
        const sdp_core_zc zc{len, rkey, vaddr};
        const int n = TxSrcAvail(from, m.data(), static_cast<unsigned>(m.size()), &zc, kPosted);
        EXPECT_EQ(n, SDP_SRC_AVAIL_HDR_SIZE) << Err(n);
        return m;
    }

    static Bytes SinkAvail(sdp_core_conn* from, unsigned len, unsigned rkey = 0x5678,
                           unsigned long long vaddr = 0x20000)
    {
        Bytes m(SDP_SINK_AVAIL_SIZE);
        const sdp_core_zc zc{len, rkey, vaddr};
        const int n = TxSinkAvail(from, m.data(), static_cast<unsigned>(m.size()), &zc, kPosted);
        EXPECT_EQ(n, SDP_SINK_AVAIL_SIZE) << Err(n);
        return m;
    }

    static Bytes Data(sdp_core_conn* from, unsigned payload)
    {
        Bytes m(SDP_BSDH_SIZE + payload, 0x5a);
        const int n = TxBuild(from, m.data(), SDP_MID_DATA, payload, 0, kPosted);
        EXPECT_EQ(n, SDP_BSDH_SIZE) << Err(n);
        return m;
    }

    // The control message due on `from` (which must be `mid`), built.
    static Bytes Control(sdp_core_conn* from, int mid)
    {
        EXPECT_EQ(ControlDue(from, 0, kPosted), mid);
        Bytes m(SDP_SINK_AVAIL_SIZE);
        const int n = TxBuild(from, m.data(), static_cast<unsigned>(mid), 0, 0, kPosted);
        EXPECT_GT(n, 0) << Err(n);
        m.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        return m;
    }

    // A fresh pair a (active) and b (passive) through the Hello exchange;
    // the Hello's max_adverts and the HelloAck's ext_max_adverts are set
    // to the given values unless negative.
    static void Handshake(sdp_core_conn* a, sdp_core_conn* b, int hello_adverts, int ack_adverts,
                          unsigned char* req_out = nullptr, unsigned char* rep_out = nullptr)
    {
        sdp_core_conn_init(a, kBuf, kBuf);
        sdp_core_conn_init(b, kBuf, kBuf);
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        ASSERT_GT(BuildHello(a, req, sizeof(req), kPosted, 5001, 0), 0);
        if (req_out != nullptr)
            *req_out = req[19];
        if (hello_adverts >= 0)
            req[19] = static_cast<unsigned char>(hello_adverts);
        ASSERT_EQ(sdp_core_on_hello(b, req, sizeof(req)), 0);
        ASSERT_GT(BuildHelloAck(b, rep, sizeof(rep), kPosted), 0);
        if (rep_out != nullptr)
            *rep_out = rep[19];
        if (ack_adverts >= 0)
            rep[19] = static_cast<unsigned char>(ack_adverts);
        ASSERT_EQ(sdp_core_on_hello_ack(a, rep, sizeof(rep)), 0);
    }

    // Messages of a rogue source in place of A (A sends one SrcAvail at a
    // time): mseq as given, acknowledging nothing of B's.
    static Bytes RawMessage(unsigned mseq, int mid, unsigned size)
    {
        Bytes m(size, 0x5a);
        m[0] = static_cast<unsigned char>(mid);
        m[1] = 0;
        m[2] = 0;
        m[3] = kPosted;
        PutBe32(m.data() + 4, size);
        PutBe32(m.data() + 8, mseq);
        PutBe32(m.data() + 12, 0);
        return m;
    }
    static Bytes RawSrcAvail(unsigned mseq, unsigned len, unsigned long long vaddr,
                             unsigned rkey = 0x4321)
    {
        Bytes m = RawMessage(mseq, SDP_MID_SRC_AVAIL, SDP_SRC_AVAIL_HDR_SIZE);
        PutBe32(m.data() + 16, len);
        PutBe32(m.data() + 20, rkey);
        PutBe32(m.data() + 24, static_cast<unsigned>(vaddr >> 32));
        PutBe32(m.data() + 28, static_cast<unsigned>(vaddr));
        return m;
    }
    static Bytes RawControl(unsigned mseq, int mid) { return RawMessage(mseq, mid, SDP_BSDH_SIZE); }
    // A rogue RdmaRdCompl or RdmaWrCompl of n bytes, acknowledging mseq_ack.
    static Bytes RawCompl(int mid, unsigned mseq, unsigned mseq_ack, unsigned n)
    {
        Bytes m = RawMessage(mseq, mid, SDP_RDMA_COMPL_SIZE);
        PutBe32(m.data() + 12, mseq_ack);
        PutBe32(m.data() + 16, n);
        return m;
    }
    static Bytes RawData(unsigned mseq, unsigned payload)
    {
        return RawMessage(mseq, SDP_MID_DATA, SDP_BSDH_SIZE + payload);
    }
    // A scratch copy of a connection, for a message that must fail.
    static sdp_core_conn* Scratch(const sdp_core_conn* c)
    {
        static sdp_core_conn scratch;
        scratch = *c;
        return &scratch;
    }

    static int Deliver(sdp_core_conn* to, const Bytes& m, sdp_core_rx* rx = nullptr)
    {
        sdp_core_rx local{};
        Bytes copy(m);
        return sdp_core_on_recv(to, copy.data(), static_cast<unsigned>(copy.size()),
                                rx != nullptr ? rx : &local);
    }

  private:
    sdp_core_conn a_{};
    sdp_core_conn b_{};
};

// ---- SrcAvail + RDMA Read ---------------------------------------------------------

// The host asks sdp_core_may_offer() before it registers memory for an
// offer: its answer must be exactly whether the offer would be accepted.
TEST_F(Zcopy, MayOfferSaysWhetherCreditsAllowAnOffer)
{
    // B has the credits A has: may offer, and does.
    EXPECT_EQ(sdp_core_may_offer(B()), 1);
    SrcAvail(B(), 4096);
    unsigned sent = 0;
    while (sdp_core_may_offer(A()) != 0) {
        Data(A(), 1);
        ASSERT_LT(++sent, kPosted) << "credits never ran out";
    }
    // Down to the reserve for control: no offer of either kind.
    EXPECT_EQ(sdp_core_tx_credits(A()), 2u);
    Bytes m(SDP_SINK_AVAIL_SIZE);
    const sdp_core_zc zc{4096, 1, 0x10000};
    EXPECT_EQ(TxSrcAvail(A(), m.data(), static_cast<unsigned>(m.size()), &zc, kPosted),
              -SDP_CORE_ESTATE);
    EXPECT_EQ(TxSinkAvail(A(), m.data(), static_cast<unsigned>(m.size()), &zc, kPosted),
              -SDP_CORE_ESTATE);
    EXPECT_EQ(sdp_core_may_offer(A()), 0);
}

// The grace period of the peer's offer (sdp_zc_grace_work): given up only
// after a whole period with nothing read and no reader at work.
TEST_F(Zcopy, GracePeriodGivesUpAnOfferOnlyWhenNothingWasRead)
{
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 0), SDP_GRACE_NONE); // no offer
    sdp_core_rx rx{};
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 10000), &rx), 0);
    EXPECT_EQ(sdp_core_rsa_grace_start(B()), unsigned{SDP_CORE_ZC_GRACE_MS});
    sdp_core_set_timers(B(), 0, 5000);
    EXPECT_EQ(sdp_core_rsa_grace_start(B()), 5000u) << "the host's period";
    // Read a piece during the period: another period.
    ASSERT_EQ(sdp_core_rd_start(B(), 4000), 0);
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 0), SDP_GRACE_AGAIN); // read in flight
    sdp_core_rd_done(B(), 4000);
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 0), SDP_GRACE_AGAIN); // progress since
    // A reader at work (copying, about to read) is never cut off.
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 1), SDP_GRACE_AGAIN);
    EXPECT_EQ(St(B()).rsa_left, 6000u);
    // A whole period without reading: SendSM, the rest by bcopy.
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 0), SDP_GRACE_ABANDONED);
    EXPECT_EQ(St(B()).rsa_left, 0u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), SDP_MID_RDMA_RD_COMPL);
    EXPECT_EQ(sdp_core_rsa_grace_end(B(), 0), SDP_GRACE_NONE);
}

TEST_F(Zcopy, SrcAvailIsReadInPiecesThenDone)
{
    sdp_core_rx rx{};
    const Bytes sa = SrcAvail(A(), 10000, 0xabc, 0x7000);
    EXPECT_EQ(sa[0], SDP_MID_SRC_AVAIL);
    EXPECT_EQ(Be32(&sa[4]), unsigned{SDP_SRC_AVAIL_HDR_SIZE});
    EXPECT_EQ(Be32(&sa[16]), 10000u);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_ACTIVE});
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), sa, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_ZCOPY});
    EXPECT_EQ(rx.mid, unsigned{SDP_MID_SRC_AVAIL});
    EXPECT_EQ(rx.zc_bytes, 10000u);
    EXPECT_EQ(St(B()).rsa_left, 10000u);
    EXPECT_EQ(St(B()).rsa_rkey, 0xabcu);
    EXPECT_EQ(St(B()).rsa_vaddr, 0x7000u);

    // A recv of 4000 bytes reads part and leaves the rest.
    ASSERT_EQ(sdp_core_rd_start(B(), 4000), 0);
    EXPECT_EQ(sdp_core_rd_start(B(), 1), -SDP_CORE_ESTATE) << "one read at a time";
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "nothing to report while reading";
    sdp_core_rd_done(B(), 4000);
    EXPECT_EQ(St(B()).rsa_left, 6000u);
    EXPECT_EQ(St(B()).rsa_vaddr, 0x7000u + 4000u);
    const Bytes c1 = Control(B(), SDP_MID_RDMA_RD_COMPL);
    EXPECT_EQ(Be32(&c1[16]), 4000u);
    ASSERT_EQ(Deliver(A(), c1, &rx), 0);
    EXPECT_EQ(rx.zc_bytes, 4000u);
    EXPECT_EQ(St(A()).src_acked, 4000u);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_ACTIVE});

    EXPECT_EQ(sdp_core_rd_start(B(), 6001), -SDP_CORE_ESTATE) << "past the offer";
    ASSERT_EQ(sdp_core_rd_start(B(), 6000), 0);
    sdp_core_rd_done(B(), 6000);
    EXPECT_EQ(St(B()).rsa_left, 0u);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(A()).src_acked, 10000u);
    EXPECT_FALSE(St(A()).src_sink_stopped);
    sdp_core_src_release(A());
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_IDLE});
    // The next bytes may go by bcopy, and B accepts them.
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_POST);
    EXPECT_EQ(Deliver(B(), Data(A(), 100)), 0);
}

// How an offer ended decides how the writer goes on (sdp_zc_send): all
// read, the next chunk; stopped by the sink, the rest by bcopy; cancelled
// by the writer, the send returns what was read.
TEST_F(Zcopy, SrcEndSaysHowTheOfferEnded)
{
    unsigned acked = 1;
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_NONE);
    EXPECT_EQ(acked, 0u);
    sdp_core_set_reader_waiting(B(), 1);

    // Read in full.
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_PENDING);
    sdp_core_zc offer{};
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_READ);
    EXPECT_EQ(offer.len, 1000u);
    EXPECT_EQ(offer.rkey, 0x1234u);
    EXPECT_EQ(offer.vaddr, 0x10000u);
    ASSERT_EQ(sdp_core_rd_start(B(), 1000), 0);
    sdp_core_rd_done(B(), 1000);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_READ);
    EXPECT_EQ(acked, 1000u);
    sdp_core_src_release(A());
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_NONE);

    // Stopped by the sink after 400 bytes (its reader peeked).
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000)), 0);
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_READ);
    ASSERT_EQ(sdp_core_rd_start(B(), 400), 0);
    sdp_core_rd_done(B(), 400);
    ASSERT_EQ(sdp_core_rsa_next(B(), SDP_RSA_PEEK, &offer), SDP_RSA_GIVE_UP_PEEK);
    sdp_core_rsa_abandon(B());
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_PENDING) << "its cancel is unanswered";
    EXPECT_EQ(sdp_core_src_cancel(A()), 0) << "a cancel is on its way already";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_STOPPED);
    EXPECT_EQ(acked, 400u);
    sdp_core_src_release(A());

    // Cancelled by the writer (a signal): the sink's SendSM is only the
    // answer, not a reason to go on by bcopy.
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000)), 0);
    EXPECT_EQ(sdp_core_src_cancel(A()), 1);
    EXPECT_EQ(sdp_core_src_cancel(A()), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_CANCELLED);
    EXPECT_EQ(acked, 0u);
}

// A reader of small pieces is served by RDMA Read SDP_CORE_SMALL_READS
// times per offer, then the offer is given up; big reads are not counted,
// a peek never reads, and a new offer starts the count again.
TEST_F(Zcopy, RsaNextLimitsSmallReadsAndNeverReadsForAPeek)
{
    sdp_core_zc offer{};
    EXPECT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_NONE) << "no offer";
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 10000)), 0);
    EXPECT_EQ(sdp_core_rsa_left(B()), 10000u);
    EXPECT_EQ(sdp_core_rsa_next(B(), SDP_RSA_PEEK | SDP_RSA_SMALL, &offer), SDP_RSA_GIVE_UP_PEEK);
    unsigned read = 0;
    for (int i = 0; i < SDP_CORE_SMALL_READS; i++) {
        ASSERT_EQ(sdp_core_rsa_next(B(), SDP_RSA_SMALL, &offer), SDP_RSA_READ) << i;
        EXPECT_EQ(offer.len, 10000u - read);
        EXPECT_EQ(offer.vaddr, 0x10000u + read);
        ASSERT_EQ(sdp_core_rd_start(B(), 100), 0);
        EXPECT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_NONE) << "a read is in progress";
        sdp_core_rd_done(B(), 100);
        read += 100;
        ASSERT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_READ) << "big reads are not counted";
    }
    EXPECT_EQ(sdp_core_rsa_next(B(), SDP_RSA_SMALL, &offer), SDP_RSA_GIVE_UP_SMALL);
    EXPECT_EQ(sdp_core_rsa_left(B()), 10000u - read) << "only the host gives it up";
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &offer), SDP_RSA_READ);
    ASSERT_EQ(sdp_core_rd_start(B(), offer.len), 0);
    sdp_core_rd_done(B(), offer.len);
    EXPECT_EQ(sdp_core_rsa_left(B()), 0u);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    ASSERT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_READ);
    sdp_core_src_release(A());
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 500)), 0);
    EXPECT_EQ(sdp_core_rsa_next(B(), SDP_RSA_SMALL, &offer), SDP_RSA_READ) << "a new offer";
}

TEST_F(Zcopy, NothingOvertakesTheOfferedBytes)
{
    const Bytes sa = SrcAvail(A(), 8192);
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_HOLD);
    unsigned char hdr[SDP_BSDH_SIZE];
    EXPECT_EQ(TxBuild(A(), hdr, SDP_MID_DATA, 100, 0, kPosted), -SDP_CORE_ESTATE);
    Bytes second(SDP_SRC_AVAIL_HDR_SIZE);
    const sdp_core_zc zc{100, 1, 0x1000};
    EXPECT_EQ(TxSrcAvail(A(), second.data(), SDP_SRC_AVAIL_HDR_SIZE, &zc, kPosted),
              -SDP_CORE_ESTATE)
        << "one SrcAvail at a time";
    // A rogue peer that sends Data or a second SrcAvail meanwhile.
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), sa), 0);
    sdp_core_conn copy = *B();
    unsigned char raw[SDP_BSDH_SIZE + 10] = {SDP_MID_DATA, 0, 0, kPosted};
    PutBe32(raw + 4, sizeof(raw));
    PutBe32(raw + 8, 2);
    sdp_core_rx rx{};
    EXPECT_EQ(sdp_core_on_recv(B(), raw, sizeof(raw), &rx), -SDP_CORE_EPROTO);
    // More SrcAvails than B accepts at once (its Hello said how many).
    const unsigned max = St(A()).peer_max_adverts;
    ASSERT_EQ(max, unsigned{SDP_CORE_MAX_ADVERTS});
    for (unsigned mseq = 2; mseq <= max; mseq++)
        ASSERT_EQ(Deliver(&copy, RawSrcAvail(mseq, 100, 0x1000 + 100 * mseq)), 0) << mseq;
    EXPECT_EQ(St(&copy).rsa_offers, max);
    EXPECT_EQ(Deliver(&copy, RawSrcAvail(max + 1, 100, 0x9000)), -SDP_CORE_EPROTO);
}

// Hello and HelloAck say how many offers each side queues; a HelloAck
// without the extension (0) means one.
TEST_F(Zcopy, HelloExchangeSaysHowManyOffersEachSideQueues)
{
    EXPECT_EQ(St(A()).peer_max_adverts, unsigned{SDP_CORE_MAX_ADVERTS});
    EXPECT_EQ(St(B()).peer_max_adverts, unsigned{SDP_CORE_MAX_ADVERTS});
    sdp_core_conn a{};
    sdp_core_conn b{};
    unsigned char hello_adverts = 0;
    unsigned char ack_adverts = 0;
    ASSERT_NO_FATAL_FAILURE(Handshake(&a, &b, 2, 0, &hello_adverts, &ack_adverts));
    EXPECT_EQ(hello_adverts, SDP_CORE_MAX_ADVERTS) << "Hello max_adverts";
    EXPECT_EQ(ack_adverts, SDP_CORE_MAX_ADVERTS) << "HelloAck ext_max_adverts";
    EXPECT_EQ(St(&b).peer_max_adverts, 2u);
    EXPECT_EQ(St(&a).peer_max_adverts, 1u);
}

// A source with several SrcAvails out (raw messages here): the sink reads
// them in stream order, one read at a time, and reports the bytes in order.
TEST_F(Zcopy, QueuedOffersAreReadInStreamOrder)
{
    sdp_core_set_reader_waiting(B(), 1);
    sdp_core_rx rx{};
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000), &rx), 0);
    EXPECT_EQ(rx.zc_bytes, 1000u);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(3, 3000, 0x90000)), 0);
    EXPECT_EQ(St(B()).rsa_left, 6000u);
    EXPECT_EQ(St(B()).rsa_offers, 3u);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &zc), SDP_RSA_READ);
    EXPECT_EQ(zc.len, 1000u) << "the first offer's bytes";
    EXPECT_EQ(zc.vaddr, 0x10000u);
    EXPECT_EQ(sdp_core_rd_start(B(), 6001), -SDP_CORE_ESTATE) << "more than is offered";
    EXPECT_EQ(sdp_core_rd_start(B(), 0), -SDP_CORE_ESTATE);
    ASSERT_EQ(sdp_core_rd_start(B(), 1000), 0);
    EXPECT_EQ(sdp_core_rsa_next(B(), 0, &zc), SDP_RSA_NONE) << "one read at a time";
    sdp_core_rd_done(B(), 1000);
    EXPECT_EQ(St(B()).rsa_offers, 2u);
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &zc), SDP_RSA_READ);
    EXPECT_EQ(zc.vaddr, 0x50000u);
    EXPECT_EQ(zc.len, 2000u);
    ASSERT_EQ(sdp_core_rd_start(B(), 500), 0);
    sdp_core_rd_done(B(), 500);
    ASSERT_EQ(sdp_core_rsa_next(B(), 0, &zc), SDP_RSA_READ);
    EXPECT_EQ(zc.vaddr, 0x50000u + 500);
    EXPECT_EQ(zc.len, 1500u);
    ASSERT_EQ(sdp_core_rd_start(B(), 1500), 0);
    sdp_core_rd_done(B(), 1500);
    EXPECT_EQ(St(B()).rsa_left, 3000u);
    EXPECT_EQ(St(B()).rsa_vaddr, 0x90000u);
    // One RdmaRdCompl may cover the end of one offer and more.
    const Bytes compl_msg = Control(B(), SDP_MID_RDMA_RD_COMPL);
    EXPECT_EQ(Be32(compl_msg.data() + SDP_BSDH_SIZE), 3000u);
    ASSERT_EQ(sdp_core_rd_start(B(), 3000), 0);
    sdp_core_rd_done(B(), 3000);
    EXPECT_EQ(St(B()).rsa_offers, 0u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), SDP_MID_RDMA_RD_COMPL);
}

// One read may take several queued offers at once: one RDMA Read per
// offer (rsa_piece names each), one RdmaRdCompl for all their bytes, the
// offers read to their end gone, the next read where the last one ended.
TEST_F(Zcopy, OneReadSpansSeveralQueuedOffers)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000, 1)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000, 2)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(3, 3000, 0x90000, 3)), 0);
    // The pieces of the 6000 unread bytes, by their offset.
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_rsa_piece(B(), 0, &zc), 1);
    EXPECT_EQ(zc.len, 1000u);
    EXPECT_EQ(zc.vaddr, 0x10000u);
    EXPECT_EQ(zc.rkey, 1u);
    ASSERT_EQ(sdp_core_rsa_piece(B(), 1000, &zc), 1);
    EXPECT_EQ(zc.len, 2000u);
    EXPECT_EQ(zc.vaddr, 0x50000u);
    EXPECT_EQ(zc.rkey, 2u);
    ASSERT_EQ(sdp_core_rsa_piece(B(), 1500, &zc), 1);
    EXPECT_EQ(zc.len, 1500u) << "from the middle of the second offer";
    EXPECT_EQ(zc.vaddr, 0x50000u + 500);
    ASSERT_EQ(sdp_core_rsa_piece(B(), 5999, &zc), 1);
    EXPECT_EQ(zc.len, 1u);
    EXPECT_EQ(zc.rkey, 3u);
    EXPECT_EQ(sdp_core_rsa_piece(B(), 6000, &zc), 0) << "past the last offered byte";
    // The first two offers and half the third in one read.
    ASSERT_EQ(sdp_core_rd_start(B(), 4500), 0);
    EXPECT_EQ(sdp_core_rd_start(B(), 1), -SDP_CORE_ESTATE) << "one read at a time";
    EXPECT_EQ(sdp_core_rsa_next(B(), 0, &zc), SDP_RSA_NONE);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "nothing to report before the read ends";
    sdp_core_rd_done(B(), 4500);
    EXPECT_EQ(St(B()).rsa_offers, 1u) << "the offers read to their end are gone";
    EXPECT_EQ(St(B()).rsa_left, 1500u);
    EXPECT_EQ(St(B()).rsa_vaddr, 0x90000u + 1500);
    const Bytes compl_msg = Control(B(), SDP_MID_RDMA_RD_COMPL);
    EXPECT_EQ(Be32(compl_msg.data() + SDP_BSDH_SIZE), 4500u) << "one RdmaRdCompl for all";
    ASSERT_EQ(sdp_core_rsa_piece(B(), 0, &zc), 1);
    EXPECT_EQ(zc.vaddr, 0x90000u + 1500);
    EXPECT_EQ(zc.len, 1500u);
    ASSERT_EQ(sdp_core_rd_start(B(), 1500), 0);
    sdp_core_rd_done(B(), 1500);
    EXPECT_EQ(St(B()).rsa_offers, 0u);
    EXPECT_EQ(Be32(Control(B(), SDP_MID_RDMA_RD_COMPL).data() + SDP_BSDH_SIZE), 1500u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "read in full: no SendSM";
}

// A MSG_PEEK (in another thread) during a read that takes every queued
// offer gives nothing up: no SendSM once the read ended, and the source
// may send Data next.  During one that leaves bytes unread, the SendSM
// follows the RdmaRdCompl.
TEST_F(Zcopy, GivingUpDuringAReadOfSeveralOffersGivesUpOnlyWhatIsLeft)
{
    sdp_core_set_reader_waiting(B(), 1);
    sdp_core_conn partial{};
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000)), 0);
    partial = *B();
    ASSERT_EQ(sdp_core_rd_start(B(), 3000), 0);
    sdp_core_rsa_abandon(B());
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "the read is in progress";
    sdp_core_rd_done(B(), 3000);
    EXPECT_EQ(Be32(Control(B(), SDP_MID_RDMA_RD_COMPL).data() + SDP_BSDH_SIZE), 3000u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "nothing was left to give up";
    ASSERT_EQ(Deliver(B(), RawData(3, 100)), 0) << "the source goes on by bcopy";

    ASSERT_EQ(sdp_core_rd_start(&partial, 1500), 0);
    sdp_core_rsa_abandon(&partial);
    EXPECT_EQ(ControlDue(&partial, 0, kPosted), 0) << "the read is in progress";
    sdp_core_rd_done(&partial, 1500);
    EXPECT_EQ(Be32(Control(&partial, SDP_MID_RDMA_RD_COMPL).data() + SDP_BSDH_SIZE), 1500u);
    Control(&partial, SDP_MID_SEND_SM);
    EXPECT_EQ(St(&partial).rsa_offers, 1u) << "counted until the source's cancel";
    EXPECT_EQ(St(&partial).rsa_left, 0u);
}

// A read of several offers that fails (the transport went down) reads no
// more: the offers are given up after the RdmaRdCompl of nothing.
TEST_F(Zcopy, AFailedReadOfSeveralOffersGivesThemUp)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 3000), 0);
    sdp_core_rd_done(B(), 0);
    EXPECT_EQ(St(B()).rsa_left, 0u);
    EXPECT_EQ(St(B()).rsa_offers, 2u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), SDP_MID_SEND_SM);
}

// Giving up the first offer gives up those behind it (their bytes come
// after its rest); the source cancels every offer it has out, even one
// that crossed our SendSM, and the queue counts them until the answer.
TEST_F(Zcopy, GivingUpAnOfferGivesUpTheOnesBehindItUntilTheCancel)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 400), 0);
    sdp_core_rsa_abandon(B()); // MSG_PEEK in another thread
    EXPECT_EQ(St(B()).rsa_left, 0u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "the read is in progress";
    sdp_core_rd_done(B(), 400);
    Control(B(), SDP_MID_RDMA_RD_COMPL);
    Control(B(), SDP_MID_SEND_SM);
    // Crossing our SendSM: stopped, and counted.
    sdp_core_rx rx{};
    ASSERT_EQ(Deliver(B(), RawSrcAvail(3, 3000, 0x90000), &rx), 0);
    EXPECT_EQ(St(B()).rsa_left, 0u) << "cancelled by the source already";
    EXPECT_EQ(St(B()).rsa_offers, 3u);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(4, 3000, 0xd0000)), 0);
    EXPECT_EQ(Deliver(Scratch(B()), RawSrcAvail(5, 3000, 0x110000)), -SDP_CORE_EPROTO)
        << "more offers out than B accepts";
    // Data cannot overtake the offers while the source owes the cancel...
    sdp_core_conn before_cancel = *B();
    // ... the cancel comes, its answer ends them all.
    ASSERT_EQ(Deliver(B(), RawControl(5, SDP_MID_SRC_AVAIL_CANCEL)), 0);
    EXPECT_EQ(Deliver(Scratch(B()), RawData(6, 100)), -SDP_CORE_EPROTO)
        << "bcopy before the answer to the cancel";
    Control(B(), SDP_MID_SEND_SM);
    EXPECT_EQ(St(B()).rsa_offers, 0u);
    ASSERT_EQ(Deliver(B(), RawData(6, 100)), 0) << "the rest by bcopy";
    ASSERT_EQ(Deliver(B(), RawSrcAvail(7, 5000, 0x200000)), 0);
    EXPECT_EQ(St(B()).rsa_left, 5000u) << "a new offer is read again";
    // A source that sends the rest without cancelling (not this one) ended
    // the offers: tolerated, as a single offer's was.
    ASSERT_EQ(Deliver(&before_cancel, RawData(5, 100)), 0);
    EXPECT_EQ(St(&before_cancel).rsa_offers, 0u);
}

// The source cancels (a signal) while two offers are queued and the first
// is being read: its RdmaRdCompl, then one SendSM ends both.
TEST_F(Zcopy, ACancelEndsEveryQueuedOffer)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(1, 1000, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), RawSrcAvail(2, 2000, 0x50000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 1000), 0);
    ASSERT_EQ(Deliver(B(), RawControl(3, SDP_MID_SRC_AVAIL_CANCEL)), 0);
    EXPECT_EQ(St(B()).rsa_left, 0u);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "the read is in progress";
    sdp_core_rd_done(B(), 1000);
    const Bytes compl_msg = Control(B(), SDP_MID_RDMA_RD_COMPL);
    EXPECT_EQ(Be32(compl_msg.data() + SDP_BSDH_SIZE), 1000u);
    Control(B(), SDP_MID_SEND_SM);
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "one SendSM answers the cancel";
    EXPECT_EQ(St(B()).rsa_offers, 0u);
    ASSERT_EQ(Deliver(B(), RawData(4, 2000)), 0);
}

// ---- several SrcAvails of the source -------------------------------------------

// As many offers as the host allows and the peer accepts, no more.
TEST_F(Zcopy, SeveralSrcAvailsUpToTheHostsAndThePeersLimit)
{
    unsigned char hdr[SDP_SRC_AVAIL_HDR_SIZE];
    const sdp_core_zc zc{1000, 1, 0x1000};
    ASSERT_GT(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), 0);
    EXPECT_EQ(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), -SDP_CORE_ESTATE)
        << "one at a time until the host says more";
    sdp_core_set_src_limit(A(), 3);
    ASSERT_GT(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), 0);
    ASSERT_GT(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), 0);
    EXPECT_EQ(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), -SDP_CORE_ESTATE);
    EXPECT_EQ(St(A()).src_offers, 3u);
    // A peer whose HelloAck says nothing (0): one.
    sdp_core_conn a{};
    sdp_core_conn b{};
    ASSERT_NO_FATAL_FAILURE(Handshake(&a, &b, -1, 0));
    sdp_core_set_src_limit(&a, 4);
    ASSERT_GT(TxSrcAvail(&a, hdr, sizeof(hdr), &zc, kPosted), 0);
    EXPECT_EQ(TxSrcAvail(&a, hdr, sizeof(hdr), &zc, kPosted), -SDP_CORE_ESTATE);
}

// RdmaRdCompl bytes apply in order across offers; each ends when read in
// full, and the host releases the oldest.  A new offer may follow one read
// in full before its release, not one that ended with bytes left.
TEST_F(Zcopy, QueuedSrcAvailsEndInStreamOrder)
{
    sdp_core_set_src_limit(A(), 4);
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000, 1, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 2000, 2, 0x20000)), 0);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 3000, 3, 0x30000)), 0);
    EXPECT_EQ(St(B()).rsa_left, 6000u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_HOLD) << "no Data behind the offers";
    ASSERT_EQ(sdp_core_rd_start(B(), 1000), 0);
    sdp_core_rd_done(B(), 1000);
    ASSERT_EQ(sdp_core_rd_start(B(), 500), 0);
    sdp_core_rd_done(B(), 500);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0); // 1500
    unsigned acked = 0;
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_READ);
    EXPECT_EQ(acked, 1000u);
    EXPECT_EQ(St(A()).src_offers, 3u);
    // Read in full, not released yet: a new offer may follow it.
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 4000, 4, 0x40000)), 0);
    sdp_core_src_release(A());
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_PENDING);
    EXPECT_EQ(acked, 500u);
    sdp_core_src_release(A()); // not ended: nothing
    EXPECT_EQ(St(A()).src_offers, 3u);
    ASSERT_EQ(sdp_core_rd_start(B(), 1500), 0);
    sdp_core_rd_done(B(), 1500);
    ASSERT_EQ(sdp_core_rd_start(B(), 3000), 0);
    sdp_core_rd_done(B(), 3000);
    ASSERT_EQ(sdp_core_rd_start(B(), 4000), 0);
    sdp_core_rd_done(B(), 4000);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0); // 8500
    for (unsigned want : {2000u, 3000u, 4000u}) {
        EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_READ);
        EXPECT_EQ(acked, want);
        sdp_core_src_release(A());
    }
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_NONE);
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_POST);
    // More than is left unread is a lie.
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 100, 5, 0x50000)), 0);
    sdp_core_conn copy = *A();
    EXPECT_EQ(Deliver(&copy, RawCompl(SDP_MID_RDMA_RD_COMPL, 3, 5, 101)), -SDP_CORE_EPROTO);
}

// A SendSM about the first offer cancels every offer (their bytes follow
// its rest), one that crossed the SendSM too; the answer to the one cancel
// ends them all, each with what was read of it, and the rest goes by bcopy.
TEST_F(Zcopy, SendSmCancelsEveryOfferOneCrossingItToo)
{
    sdp_core_set_src_limit(A(), 4);
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000, 1, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 2000, 2, 0x20000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 300), 0);
    sdp_core_rd_done(B(), 300);
    sdp_core_rsa_abandon(B()); // MSG_PEEK
    const Bytes rd = Control(B(), SDP_MID_RDMA_RD_COMPL);
    const Bytes sm = Control(B(), SDP_MID_SEND_SM);
    const Bytes crossing = SrcAvail(A(), 3000, 3, 0x30000);
    ASSERT_EQ(Deliver(A(), rd), 0);
    ASSERT_EQ(Deliver(A(), sm), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING});
    unsigned char hdr[SDP_SRC_AVAIL_HDR_SIZE];
    const sdp_core_zc zc{1000, 1, 0x1000};
    EXPECT_EQ(TxSrcAvail(A(), hdr, sizeof(hdr), &zc, kPosted), -SDP_CORE_ESTATE)
        << "no new offer while cancelling";
    ASSERT_EQ(Deliver(B(), crossing), 0);
    EXPECT_EQ(St(B()).rsa_left, 0u) << "crossed the SendSM: never read";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    EXPECT_EQ(ControlDue(A(), 0, kPosted), 0) << "one cancel for all";
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    unsigned acked = 99;
    for (unsigned want : {300u, 0u, 0u}) {
        EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_STOPPED);
        EXPECT_EQ(acked, want);
        sdp_core_src_release(A());
    }
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_NONE);
    EXPECT_EQ(St(B()).rsa_offers, 0u);
    ASSERT_EQ(Deliver(B(), Data(A(), 1000)), 0) << "the rest by bcopy";
}

// The host takes its offers back (a signal): one cancel for all; the
// sink's RdmaRdCompl for a read in progress still counts.
TEST_F(Zcopy, SrcCancelTakesBackEveryOffer)
{
    sdp_core_set_src_limit(A(), 4);
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 1000, 1, 0x10000)), 0);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 2000, 2, 0x20000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 1000), 0);
    EXPECT_EQ(sdp_core_src_cancel(A()), 1);
    EXPECT_EQ(sdp_core_src_cancel(A()), 0) << "cancelled already";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    sdp_core_rd_done(B(), 1000);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    EXPECT_EQ(sdp_core_src_end(A(), nullptr), SDP_SRC_PENDING) << "until the answer";
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    unsigned acked = 0;
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_READ);
    EXPECT_EQ(acked, 1000u);
    sdp_core_src_release(A());
    EXPECT_EQ(sdp_core_src_end(A(), &acked), SDP_SRC_CANCELLED);
    EXPECT_EQ(acked, 0u);
    sdp_core_src_release(A());
    EXPECT_EQ(St(A()).src_offers, 0u);
}

TEST_F(Zcopy, DisConnWaitsForTheSrcAvail)
{
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 8192)), 0);
    sdp_core_shutdown_send(A());
    EXPECT_NE(ControlDue(A(), 0, kPosted), SDP_MID_DISCONN);
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(sdp_core_rd_start(B(), 8192), 0);
    sdp_core_rd_done(B(), 8192);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    sdp_core_src_release(A());
    EXPECT_EQ(ControlDue(A(), 0, kPosted), SDP_MID_DISCONN);
}

TEST_F(Zcopy, SendSmEndsTheSrcAvailAndTheRestGoesByBcopy)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 20000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 5000), 0);
    sdp_core_rd_done(B(), 5000);
    // MSG_PEEK: give up the rest.
    sdp_core_rsa_abandon(B());
    EXPECT_EQ(St(B()).rsa_left, 0u) << "an abandoned offer is not readable";
    EXPECT_EQ(sdp_core_rd_start(B(), 1), -SDP_CORE_ESTATE);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    // The source cancels the rest, as the specification asks; the sink's
    // answer ends the SrcAvail.
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING});
    EXPECT_TRUE(St(A()).src_sink_stopped);
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_HOLD) << "no bcopy before the answer";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(A()).src_acked, 5000u);
    sdp_core_src_release(A());
    ASSERT_EQ(Deliver(B(), Data(A(), 1000)), 0) << "the rest by bcopy";
    // A RdmaRdCompl after SendSM is a lie (B sent RdmaRdCompl and two
    // SendSMs; A sent SrcAvail, SrcAvailCancel and Data).
    EXPECT_EQ(Deliver(A(), RawCompl(SDP_MID_RDMA_RD_COMPL, 4, 3, 1)), -SDP_CORE_EPROTO);
}

TEST_F(Zcopy, CancelIsAnsweredAfterTheReadInProgress)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 20000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 7000), 0);
    // The sender is interrupted by a signal.
    sdp_core_src_cancel(A());
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING});
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    EXPECT_EQ(St(B()).rsa_left, 0u) << "cancelled: no new reads";
    EXPECT_EQ(ControlDue(B(), 0, kPosted), 0) << "the read is still in progress";
    sdp_core_rd_done(B(), 7000);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_RDMA_RD_COMPL)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING});
    EXPECT_EQ(St(A()).src_acked, 7000u);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(A()).src_acked, 7000u) << "the send returns 7000";
}

TEST_F(Zcopy, ACancelOfAFinishedOfferIsStillAnswered)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 3000)), 0);
    ASSERT_EQ(sdp_core_rd_start(B(), 3000), 0);
    sdp_core_rd_done(B(), 3000);
    const Bytes compl_msg = Control(B(), SDP_MID_RDMA_RD_COMPL);
    sdp_core_src_cancel(A()); // crosses the final RdmaRdCompl
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(A(), compl_msg), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING}) << "waits for the answer";
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(A()).src_acked, 3000u);
}

// A SendSM the sink sent before it saw our cancel ends its reading but is not
// the answer: the answer still comes, and must not meet our next SrcAvail.
TEST_F(Zcopy, ASendSmCrossingTheCancelIsNotItsAnswer)
{
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 9000)), 0);
    sdp_core_set_reader_waiting(B(), 1);
    sdp_core_rsa_abandon(B());
    const Bytes sm1 = Control(B(), SDP_MID_SEND_SM);
    sdp_core_src_cancel(A());
    const Bytes cancel = Control(A(), SDP_MID_SRC_AVAIL_CANCEL);
    ASSERT_EQ(Deliver(A(), sm1), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_CANCELLING});
    EXPECT_TRUE(St(A()).src_sink_stopped);
    ASSERT_EQ(Deliver(B(), cancel), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(A()).src_acked, 0u);
}

TEST_F(Zcopy, SendSendDeadlockIsBrokenBySendSm)
{
    // Both sides blocked in large sends, nobody receiving.
    const Bytes sa_a = SrcAvail(A(), 65536);
    const Bytes sa_b = SrcAvail(B(), 65536);
    sdp_core_rx rx{};
    ASSERT_EQ(Deliver(B(), sa_a, &rx), 0);
    EXPECT_EQ(rx.zc_bytes, 65536u);
    EXPECT_EQ(St(B()).rsa_left, 0u) << "never offered to the reader";
    ASSERT_EQ(Deliver(A(), sa_b), 0);
    EXPECT_EQ(St(A()).rsa_left, 0u);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SEND_SM)), 0);
    EXPECT_TRUE(St(A()).src_sink_stopped);
    EXPECT_TRUE(St(B()).src_sink_stopped);
    // Each cancels its SrcAvail; the answer to each cancel ends it.
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SEND_SM)), 0) << "answers go first";
    EXPECT_EQ(St(A()).src_state, unsigned{SDP_ZC_DONE});
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SRC_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SEND_SM)), 0);
    EXPECT_EQ(St(B()).src_state, unsigned{SDP_ZC_DONE});
    // Both finish by bcopy.
    sdp_core_src_release(A());
    sdp_core_src_release(B());
    EXPECT_EQ(Deliver(B(), Data(A(), 4000)), 0);
    EXPECT_EQ(Deliver(A(), Data(B(), 4000)), 0);
}

TEST_F(Zcopy, OfferWithAReaderWaitingIsReadEvenWhileOwnSrcAvailIsOut)
{
    const Bytes sa_b = SrcAvail(B(), 65536);
    SrcAvail(A(), 65536);
    sdp_core_set_reader_waiting(A(), 1);
    ASSERT_EQ(Deliver(A(), sa_b), 0);
    EXPECT_EQ(St(A()).rsa_left, 65536u);
    EXPECT_EQ(ControlDue(A(), 0, kPosted), 0) << "no SendSM";
}

TEST_F(Zcopy, ImpossibleOffersAbortTheConnection)
{
    struct Case {
        unsigned len;
        unsigned long long vaddr;
        const char* what;
    };
    const Case cases[] = {
        {SDP_ZC_MAX_LEN + 1, 0x1000, "longer than any offer"},
        {0xffffffffu, 0x1000, "4 GiB"},
        {4096, 0xfffffffffffff800ull, "wraps the address space"},
    };
    for (const Case& k : cases) {
        for (unsigned mid : {unsigned{SDP_MID_SRC_AVAIL}, unsigned{SDP_MID_SINK_AVAIL}}) {
            SetUp();
            const unsigned size =
                mid == SDP_MID_SRC_AVAIL ? SDP_SRC_AVAIL_HDR_SIZE : SDP_SINK_AVAIL_SIZE;
            Bytes m(size, 0);
            m[0] = static_cast<unsigned char>(mid);
            m[3] = kPosted;
            PutBe32(&m[4], size);
            PutBe32(&m[8], 1);
            PutBe32(&m[16], k.len);
            PutBe32(&m[20], 0x42);
            PutBe32(&m[24], static_cast<unsigned>(k.vaddr >> 32));
            PutBe32(&m[28], static_cast<unsigned>(k.vaddr));
            EXPECT_EQ(Deliver(B(), m), -SDP_CORE_EPROTO) << k.what << ", mid " << mid;
        }
    }
    // Nor does the core build one.
    Bytes m(SDP_SRC_AVAIL_HDR_SIZE);
    const sdp_core_zc big{SDP_ZC_MAX_LEN + 1, 1, 0x1000};
    EXPECT_EQ(TxSrcAvail(A(), m.data(), SDP_SRC_AVAIL_HDR_SIZE, &big, kPosted), -SDP_CORE_EPROTO);
}

TEST_F(Zcopy, RdmaRdComplBeyondTheOfferAbortsTheConnection)
{
    const Bytes sa = SrcAvail(A(), 1000);
    (void)sa;
    sdp_core_conn copy = *A();
    EXPECT_EQ(Deliver(A(), RawCompl(SDP_MID_RDMA_RD_COMPL, 1, 1, 1001)), -SDP_CORE_EPROTO);
    EXPECT_EQ(Deliver(&copy, RawCompl(SDP_MID_RDMA_RD_COMPL, 1, 1, 0)), -SDP_CORE_EPROTO);
}

// ---- SinkAvail + RDMA Write -------------------------------------------------------

TEST_F(Zcopy, SinkAvailIsWrittenOnce)
{
    sdp_core_rx rx{};
    const Bytes adv = SinkAvail(B(), 8192, 0x77, 0x9000);
    EXPECT_EQ(adv[0], SDP_MID_SINK_AVAIL);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_ACTIVE});
    ASSERT_EQ(Deliver(A(), adv, &rx), 0);
    EXPECT_EQ(rx.kind, unsigned{SDP_RX_ZCOPY});
    EXPECT_TRUE(St(A()).psink_usable);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 5000, &zc), 1);
    EXPECT_EQ(zc.len, 5000u);
    EXPECT_EQ(zc.rkey, 0x77u);
    EXPECT_EQ(zc.vaddr, 0x9000u);
    EXPECT_EQ(sdp_core_sink_take(A(), 5000, &zc), 0) << "used once";
    // The completion goes before any data.
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_HOLD);
    const Bytes wr = Control(A(), SDP_MID_RDMA_WR_COMPL);
    EXPECT_EQ(Be32(&wr[16]), 5000u);
    EXPECT_EQ(sdp_core_tx_decide(A(), 100, 1, 0), SDP_TX_POST);
    ASSERT_EQ(Deliver(B(), wr, &rx), 0);
    EXPECT_EQ(rx.zc_bytes, 5000u);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(B()).adv_written, 5000u);
    sdp_core_adv_release(B());
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_IDLE});
    // A second RdmaWrCompl has no advertisement to go to.
    EXPECT_EQ(Deliver(B(), RawCompl(SDP_MID_RDMA_WR_COMPL, 2, 1, 10)), -SDP_CORE_EPROTO);
}

TEST_F(Zcopy, AnAdvertisementMadeBeforeOurDataArrivedIsNotUsed)
{
    const Bytes data = Data(A(), 500); // in flight
    const Bytes adv = SinkAvail(B(), 8192);
    ASSERT_EQ(Deliver(A(), adv), 0);
    EXPECT_FALSE(St(A()).psink_usable) << "the sink had not seen all our bytes";
    ASSERT_EQ(Deliver(B(), data), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE}) << "data ends the advertisement";
    EXPECT_EQ(St(B()).adv_written, 0u);
}

TEST_F(Zcopy, DataSentAfterSeeingAnAdvertisementEndsIt)
{
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    ASSERT_TRUE(St(A()).psink_usable);
    const Bytes data = Data(A(), 10); // a small write goes by bcopy
    EXPECT_FALSE(St(A()).psink_usable);
    ASSERT_EQ(Deliver(B(), data), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
}

// A reader whose advertisements go unused skips 1, 3, 7, ... 63 chances
// after as many misses in a row; one that is written into starts over.
TEST_F(Zcopy, AdvertisementsBackOffWhileTheyGoUnused)
{
    const auto miss = [this] {
        ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
        sdp_core_adv_cancel(B());
        EXPECT_EQ(sdp_core_adv_end(B(), nullptr), SDP_ADV_PENDING);
        ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SINK_AVAIL_CANCEL)), 0);
        ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SINK_CANCEL_ACK)), 0);
        unsigned written = 1;
        EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_ENDED);
        EXPECT_EQ(written, 0u);
        sdp_core_adv_release(B());
        EXPECT_EQ(sdp_core_adv_end(B(), nullptr), SDP_ADV_NONE);
    };
    const auto skipped = [this] {
        unsigned n = 0;
        while (sdp_core_adv_try(B()) == 0 && n < 1000)
            n++;
        return n;
    };
    EXPECT_EQ(skipped(), 0u);
    for (const unsigned expect : {1u, 3u, 7u, 15u, 31u, 63u, 63u}) {
        miss();
        EXPECT_EQ(skipped(), expect);
    }
    // Written into: no chance skipped after it, one after the next miss.
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    EXPECT_EQ(sdp_core_sink_len(A()), 8192u);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 3000, &zc), 1);
    EXPECT_EQ(sdp_core_wr_compl_pending(A()), 1);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_RDMA_WR_COMPL)), 0);
    EXPECT_EQ(sdp_core_wr_compl_pending(A()), 0);
    unsigned written = 0;
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_ENDED);
    EXPECT_EQ(written, 3000u);
    sdp_core_adv_release(B());
    EXPECT_EQ(skipped(), 0u);
    miss();
    EXPECT_EQ(skipped(), 1u);
}

// A receive advertises its buffer in pieces, all sent together: the
// source writes into each in turn, also into one that arrives while the
// RdmaWrCompl of the write before is still due.
TEST_F(Zcopy, SeveralSinkAvailsAreFilledInOrder)
{
    EXPECT_EQ(sdp_core_adv_room(B()), unsigned{SDP_CORE_MAX_ADVERTS});
    const Bytes a1 = SinkAvail(B(), 8192, 0x71, 0x10000);
    EXPECT_EQ(sdp_core_adv_room(B()), unsigned{SDP_CORE_MAX_ADVERTS} - 1);
    const Bytes a2 = SinkAvail(B(), 8192, 0x72, 0x12000);
    const Bytes a3 = SinkAvail(B(), 4096, 0x73, 0x14000);
    EXPECT_EQ(St(B()).adv_count, 3u);
    ASSERT_EQ(Deliver(A(), a1), 0);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 100000, &zc), 1);
    EXPECT_EQ(zc.len, 8192u);
    EXPECT_EQ(zc.rkey, 0x71u);
    EXPECT_EQ(sdp_core_sink_take(A(), 100000, &zc), 0) << "the RdmaWrCompl goes first";
    ASSERT_EQ(Deliver(A(), a2), 0) << "the next piece, while the write's completion is due";
    ASSERT_EQ(Deliver(A(), a3), 0);
    EXPECT_EQ(St(A()).psink_count, 2u);
    const Bytes w1 = Control(A(), SDP_MID_RDMA_WR_COMPL);
    EXPECT_EQ(sdp_core_sink_len(A()), 8192u) << "a filled piece leaves the next usable";
    ASSERT_EQ(sdp_core_sink_take(A(), 100000, &zc), 1);
    EXPECT_EQ(zc.rkey, 0x72u);
    EXPECT_EQ(zc.vaddr, 0x12000u);
    const Bytes w2 = Control(A(), SDP_MID_RDMA_WR_COMPL);
    ASSERT_EQ(sdp_core_sink_take(A(), 1000, &zc), 1);
    EXPECT_EQ(zc.rkey, 0x73u);
    EXPECT_EQ(zc.len, 1000u);
    const Bytes w3 = Control(A(), SDP_MID_RDMA_WR_COMPL);
    unsigned written = 0;
    sdp_core_rx rx{};
    ASSERT_EQ(Deliver(B(), w1, &rx), 0);
    EXPECT_EQ(rx.zc_bytes, 8192u);
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_PENDING);
    EXPECT_EQ(written, 8192u);
    EXPECT_EQ(sdp_core_adv_room(B()), 0u) << "no piece added once one was written";
    ASSERT_EQ(Deliver(B(), w2), 0);
    ASSERT_EQ(Deliver(B(), w3), 0);
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_ENDED);
    EXPECT_EQ(written, 8192u + 8192u + 1000u);
    sdp_core_adv_release(B());
    EXPECT_EQ(sdp_core_adv_end(B(), nullptr), SDP_ADV_NONE);
    EXPECT_EQ(sdp_core_adv_room(B()), unsigned{SDP_CORE_MAX_ADVERTS});
    // The sink's next receive knows of all three writes: usable.
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    EXPECT_EQ(sdp_core_sink_len(A()), 8192u);
}

// A write that leaves room in its piece ends the pieces after it, on both
// sides, also one still on its way to the source.
TEST_F(Zcopy, APartialWriteEndsThePiecesAfterIt)
{
    const Bytes a1 = SinkAvail(B(), 8192);
    const Bytes a2 = SinkAvail(B(), 8192);
    const Bytes a3 = SinkAvail(B(), 8192);
    ASSERT_EQ(Deliver(A(), a1), 0);
    ASSERT_EQ(Deliver(A(), a2), 0);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 5000, &zc), 1);
    EXPECT_EQ(sdp_core_sink_len(A()), 0u) << "the next piece would leave a hole";
    ASSERT_EQ(Deliver(A(), a3), 0);
    EXPECT_EQ(sdp_core_sink_len(A()), 0u);
    const Bytes w = Control(A(), SDP_MID_RDMA_WR_COMPL);
    EXPECT_EQ(sdp_core_sink_take(A(), 5000, &zc), 0);
    ASSERT_EQ(Deliver(B(), w), 0);
    unsigned written = 0;
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_ENDED);
    EXPECT_EQ(written, 5000u);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
    sdp_core_adv_release(B());
    // A fresh advertisement, made after the partial write arrived, is used.
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    EXPECT_EQ(sdp_core_sink_len(A()), 8192u);
}

// After a write that left room in its piece, a completion for a later
// piece is a protocol error, also while our cancel still holds the piece.
TEST_F(Zcopy, NoWriteIntoAPieceAfterAPartialOne)
{
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    sdp_core_adv_cancel(B());
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 100, &zc), 1);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_RDMA_WR_COMPL)), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_CANCELLING});
    // A rogue's RdmaWrCompl for the second piece.
    EXPECT_EQ(Deliver(B(), RawCompl(SDP_MID_RDMA_WR_COMPL, 2, 2, 100)), -SDP_CORE_EPROTO);
}

// Once a piece is not usable (our data crossed it), neither are the
// pieces behind it: they would take the bytes meant for it.
TEST_F(Zcopy, APieceAfterAnUnusableOneIsNotUsed)
{
    const Bytes data = Data(A(), 500); // in flight
    const Bytes a1 = SinkAvail(B(), 8192);
    const Bytes a2 = SinkAvail(B(), 8192);
    ASSERT_EQ(Deliver(A(), a1), 0);
    ASSERT_EQ(Deliver(A(), a2), 0);
    EXPECT_EQ(St(A()).psink_count, 0u);
    ASSERT_EQ(Deliver(B(), data), 0);
    EXPECT_EQ(sdp_core_adv_end(B(), nullptr), SDP_ADV_ENDED) << "data ends every piece";
}

// A reader that has what it needs from the first piece takes the others
// back with one cancel; a write the source already made into one of them
// still counts.
TEST_F(Zcopy, OneCancelTakesBackTheRemainingPieces)
{
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 8192, &zc), 1);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_RDMA_WR_COMPL)), 0);
    unsigned written = 0;
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_PENDING);
    EXPECT_EQ(written, 8192u);
    ASSERT_EQ(sdp_core_sink_take(A(), 8192, &zc), 1); // crosses the cancel
    sdp_core_adv_cancel(B());
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_CANCELLING});
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SINK_AVAIL_CANCEL)), 0);
    EXPECT_EQ(sdp_core_sink_len(A()), 0u) << "the third piece is taken back";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_RDMA_WR_COMPL)), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SINK_CANCEL_ACK)), 0);
    EXPECT_EQ(sdp_core_adv_end(B(), &written), SDP_ADV_ENDED);
    EXPECT_EQ(written, 2u * 8192u);
}

// At most max_adverts pieces out: the sink adds no more, and a source
// that receives more resets the connection.
TEST_F(Zcopy, NoMoreSinkAvailsThanMaxAdverts)
{
    for (unsigned i = 0; i < SDP_CORE_MAX_ADVERTS; i++)
        ASSERT_EQ(Deliver(A(), SinkAvail(B(), 4096)), 0) << i;
    EXPECT_EQ(sdp_core_adv_room(B()), 0u);
    Bytes m(SDP_SINK_AVAIL_SIZE);
    const sdp_core_zc zc{4096, 1, 0x1000};
    EXPECT_EQ(TxSinkAvail(B(), m.data(), SDP_SINK_AVAIL_SIZE, &zc, kPosted), -SDP_CORE_ESTATE);
    // A rogue sink's fifth, built on a copy of B that believes it may.
    sdp_core_conn rogue{};
    sdp_core_conn peer{};
    Handshake(&peer, &rogue, -1, -1);
    for (unsigned i = 0; i < SDP_CORE_MAX_ADVERTS; i++)
        ASSERT_EQ(Deliver(&peer, SinkAvail(&rogue, 4096)), 0) << i;
    sdp_core_zc_status st{};
    sdp_core_zc_query(&peer, &st);
    ASSERT_EQ(st.psink_count, unsigned{SDP_CORE_MAX_ADVERTS});
    Bytes fifth(SDP_SINK_AVAIL_SIZE, 0);
    fifth[0] = SDP_MID_SINK_AVAIL;
    fifth[3] = kPosted;
    PutBe32(&fifth[4], SDP_SINK_AVAIL_SIZE);
    PutBe32(&fifth[8], SDP_CORE_MAX_ADVERTS + 1);
    PutBe32(&fifth[16], 4096);
    PutBe32(&fifth[20], 0x42);
    PutBe32(&fifth[28], 0x9000);
    EXPECT_EQ(Deliver(&peer, fifth), -SDP_CORE_EPROTO);
}

// A peer that accepts one advertisement at a time gets one piece.
TEST_F(Zcopy, OnePieceForAPeerOfOneAdvert)
{
    sdp_core_conn a{};
    sdp_core_conn b{};
    Handshake(&a, &b, 1, -1);
    EXPECT_EQ(sdp_core_adv_room(&b), 1u);
    SinkAvail(&b, 4096);
    EXPECT_EQ(sdp_core_adv_room(&b), 0u);
}

TEST_F(Zcopy, SinkCancelIsAnsweredAfterTheWrite)
{
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    sdp_core_zc zc{};
    ASSERT_EQ(sdp_core_sink_take(A(), 8192, &zc), 1);
    sdp_core_adv_cancel(B()); // a signal, crossing the write
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_CANCELLING});
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SINK_AVAIL_CANCEL)), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_RDMA_WR_COMPL)), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_CANCELLING});
    EXPECT_EQ(St(B()).adv_written, 8192u) << "the recv returns the written bytes";
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SINK_CANCEL_ACK)), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
}

TEST_F(Zcopy, SinkCancelOfAnUnusedAdvertisement)
{
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    sdp_core_adv_cancel(B());
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_SINK_AVAIL_CANCEL)), 0);
    EXPECT_FALSE(St(A()).psink_usable);
    sdp_core_zc zc{};
    EXPECT_EQ(sdp_core_sink_take(A(), 100, &zc), 0);
    ASSERT_EQ(Deliver(B(), Control(A(), SDP_MID_SINK_CANCEL_ACK)), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(B()).adv_written, 0u);
}

TEST_F(Zcopy, ASrcAvailEndsAnAdvertisementItCrossed)
{
    const Bytes adv = SinkAvail(B(), 8192);
    const Bytes sa = SrcAvail(A(), 65536);
    ASSERT_EQ(Deliver(A(), adv), 0);
    EXPECT_FALSE(St(A()).psink_usable);
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), sa), 0);
    EXPECT_EQ(St(B()).adv_state, unsigned{SDP_ZC_DONE});
    EXPECT_EQ(St(B()).rsa_left, 65536u) << "the reader reads it instead";
}

// A peer that shut down its sending side still receives: its SinkAvail is
// valid after its DisConn, ours is not after our DisConn.
TEST_F(Zcopy, SinkAvailAfterTheSinksDisConn)
{
    sdp_core_shutdown_send(B());
    ASSERT_EQ(Deliver(A(), Control(B(), SDP_MID_DISCONN)), 0);
    ASSERT_EQ(Deliver(A(), SinkAvail(B(), 8192)), 0);
    EXPECT_TRUE(St(A()).psink_usable);
    Bytes m(SDP_SINK_AVAIL_SIZE);
    const sdp_core_zc zc{4096, 1, 0x1000};
    EXPECT_EQ(TxSinkAvail(A(), m.data(), SDP_SINK_AVAIL_SIZE, &zc, kPosted), -SDP_CORE_ESTATE)
        << "nothing more will come from B";
}

TEST_F(Zcopy, SinkAvailOnlyWithNothingOfTheSourcePending)
{
    sdp_core_set_reader_waiting(B(), 1);
    ASSERT_EQ(Deliver(B(), SrcAvail(A(), 4096)), 0);
    Bytes m(SDP_SINK_AVAIL_SIZE);
    const sdp_core_zc zc{4096, 1, 0x1000};
    EXPECT_EQ(TxSinkAvail(B(), m.data(), SDP_SINK_AVAIL_SIZE, &zc, kPosted), -SDP_CORE_ESTATE)
        << "an offer is waiting to be read";
}

} // namespace
