// SPDX-License-Identifier: GPL-2.0
//
// Unit tests for sdp::CreditLedger (kernel/core/credits.{h,cpp}).
//
// Expectations follow the formulas of the credits.h header comment:
//   credits   = bufs - in_flight,  in_flight = (next_mseq - 1) - mseq_ack
//   data needs credits > kControlReserve, control needs credits > 0
// and the credit update rule: due when posted > remote and either
// posted > 1.5 x remote or remote <= kControlReserve.
#include "credits.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace sdp {
std::ostream& operator<<(std::ostream& os, CreditLedger::RxError e)
{
    switch (e) {
    case CreditLedger::RxError::kNone:
        return os << "kNone";
    case CreditLedger::RxError::kSequenceGap:
        return os << "kSequenceGap";
    case CreditLedger::RxError::kAckFromFuture:
        return os << "kAckFromFuture";
    }
    return os << "RxError(" << static_cast<int>(e) << ")";
}
} // namespace sdp

namespace {

using sdp::CreditLedger;
using sdp::u16;
using sdp::u32;
using sdp::wire::Bsdh;
using sdp::wire::Mid;
using RxError = CreditLedger::RxError;

constexpr u32 kReserve = CreditLedger::kControlReserve;

// The BSDH of the peer's HelloAck (or Hello): its bufs are our first credits.
Bsdh PeerHello(u16 bufs, u32 mseq = 0)
{
    return Bsdh{Mid::kHelloAck, 0, bufs, SDP_HELLO_ACK_SIZE, mseq, 0};
}

Bsdh Incoming(u32 mseq, u32 mseq_ack, u16 bufs)
{
    return Bsdh{Mid::kData, 0, bufs, SDP_BSDH_SIZE, mseq, mseq_ack};
}

// Everything observable about a ledger, to check that errors change nothing.
struct Snapshot {
    u32 tx_credits;
    u32 next_tx_mseq;
    u32 last_rx_mseq;
    u32 remote_credits;
    bool may_send_data;
    bool may_send_control;

    explicit Snapshot(const CreditLedger& c)
        : tx_credits(c.tx_credits()), next_tx_mseq(c.next_tx_mseq()),
          last_rx_mseq(c.last_rx_mseq()), remote_credits(c.remote_credits()),
          may_send_data(c.may_send_data()), may_send_control(c.may_send_control())
    {
    }
    bool operator==(const Snapshot& o) const
    {
        return tx_credits == o.tx_credits && next_tx_mseq == o.next_tx_mseq &&
               last_rx_mseq == o.last_rx_mseq && remote_credits == o.remote_credits &&
               may_send_data == o.may_send_data && may_send_control == o.may_send_control;
    }
};

std::ostream& operator<<(std::ostream& os, const Snapshot& s)
{
    return os << "{credits " << s.tx_credits << ", next_tx " << s.next_tx_mseq << ", last_rx "
              << s.last_rx_mseq << ", remote " << s.remote_credits << "}";
}

void SendN(CreditLedger* c, int n, u16 posted = 8)
{
    Bsdh out{};
    for (int i = 0; i < n; i++)
        c->stamp_send(&out, posted);
}

TEST(Credits, StartTakesCreditsFromPeerHelloBufs)
{
    CreditLedger c;
    c.start(PeerHello(10), 8);
    EXPECT_EQ(c.tx_credits(), 10u);
    EXPECT_EQ(c.next_tx_mseq(), 1u) << "the Hello exchange is mseq 0, the first SEND mseq 1";
    EXPECT_EQ(c.last_rx_mseq(), 0u);
    EXPECT_EQ(c.remote_credits(), 8u) << "what our own Hello/HelloAck advertised";
    EXPECT_TRUE(c.may_send_data());
    EXPECT_TRUE(c.may_send_control());
}

TEST(Credits, PeerWithoutBuffersGivesNoCredits)
{
    CreditLedger c;
    c.start(PeerHello(0), 8);
    EXPECT_EQ(c.tx_credits(), 0u);
    EXPECT_FALSE(c.may_send_data());
    EXPECT_FALSE(c.may_send_control());
}

TEST(Credits, DataStopsAtControlReserveControlStillGoes)
{
    CreditLedger c;
    c.start(PeerHello(5), 16);
    Bsdh out{};
    u32 data_sent = 0;
    while (c.may_send_data()) {
        c.stamp_send(&out, 16);
        data_sent++;
        ASSERT_LE(data_sent, 5u);
    }
    EXPECT_EQ(data_sent, 5 - kReserve);
    EXPECT_EQ(c.tx_credits(), kReserve);
    EXPECT_TRUE(c.may_send_control()) << "the reserve is for control messages";

    for (u32 i = 0; i < kReserve; i++) {
        ASSERT_TRUE(c.may_send_control());
        c.stamp_send(&out, 16);
    }
    EXPECT_EQ(c.tx_credits(), 0u);
    EXPECT_FALSE(c.may_send_control());
    EXPECT_FALSE(c.may_send_data());
    EXPECT_EQ(out.mseq, 5u);
}

TEST(Credits, ReserveBoundary)
{
    // Data needs more than the reserve; control needs one credit.
    for (u16 bufs = 0; bufs <= 6; bufs++) {
        CreditLedger c;
        c.start(PeerHello(bufs), 4);
        EXPECT_EQ(c.may_send_data(), bufs > kReserve) << "bufs " << bufs;
        EXPECT_EQ(c.may_send_control(), bufs > 0) << "bufs " << bufs;
    }
}

TEST(Credits, StampFillsFlowControlFieldsOnly)
{
    CreditLedger c;
    c.start(PeerHello(8), 8);
    ASSERT_EQ(c.on_receive(Incoming(1, 0, 8)), RxError::kNone);
    ASSERT_EQ(c.on_receive(Incoming(2, 0, 8)), RxError::kNone);

    Bsdh out{Mid::kSendSm, 0x05, 0, 0x1234, 0, 0};
    c.stamp_send(&out, 33);
    EXPECT_EQ(out.mseq, 1u);
    EXPECT_EQ(out.mseq_ack, 2u) << "acknowledges the last message received";
    EXPECT_EQ(out.bufs, 33u) << "advertises what is posted now";
    EXPECT_EQ(out.mid, Mid::kSendSm);
    EXPECT_EQ(out.flags, 0x05);
    EXPECT_EQ(out.len, 0x1234u);
    EXPECT_EQ(c.tx_credits(), 7u);

    c.stamp_send(&out, 34);
    EXPECT_EQ(out.mseq, 2u);
    EXPECT_EQ(c.next_tx_mseq(), 3u);
    EXPECT_EQ(c.tx_credits(), 6u);
}

TEST(Credits, StampWithoutCreditsDoesNotWrap)
{
    // A caller bug must not turn 0 credits into 2^32 - 1.
    CreditLedger c;
    c.start(PeerHello(1), 8);
    SendN(&c, 3);
    EXPECT_EQ(c.tx_credits(), 0u);
    EXPECT_FALSE(c.may_send_control());
}

TEST(Credits, OnReceiveRecomputesCreditsAsBufsMinusInFlight)
{
    CreditLedger c;
    c.start(PeerHello(8), 8);
    SendN(&c, 5); // mseq 1..5
    ASSERT_EQ(c.tx_credits(), 3u);

    // Peer saw none of them: in_flight = 5 - 0.
    ASSERT_EQ(c.on_receive(Incoming(1, 0, 8)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 3u);
    // Peer saw up to mseq 3: in_flight 2.
    ASSERT_EQ(c.on_receive(Incoming(2, 3, 8)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 6u);
    // Peer saw everything.
    ASSERT_EQ(c.on_receive(Incoming(3, 5, 8)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 8u);
    // Recomputed, not accumulated: the peer shrinking its grant shrinks ours.
    ASSERT_EQ(c.on_receive(Incoming(4, 5, 2)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 2u);
    EXPECT_FALSE(c.may_send_data());

    // More in flight than the peer has posted: zero, not a wrapped count.
    SendN(&c, 2); // mseq 6, 7
    ASSERT_EQ(c.on_receive(Incoming(5, 5, 1)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 0u);
    EXPECT_FALSE(c.may_send_control());
    // bufs equal to in_flight: still zero.
    ASSERT_EQ(c.on_receive(Incoming(6, 5, 2)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 0u);
    ASSERT_EQ(c.on_receive(Incoming(7, 7, 0xffff)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 0xffffu);
    EXPECT_EQ(c.last_rx_mseq(), 7u);
}

TEST(Credits, SequenceGapIsRejectedAndChangesNothing)
{
    CreditLedger c;
    c.start(PeerHello(4), 6);
    SendN(&c, 1);
    ASSERT_EQ(c.on_receive(Incoming(1, 1, 4)), RxError::kNone);
    const Snapshot before(c);

    // Replays, skips and the Hello's own mseq; bufs 50 would show if applied.
    for (u32 mseq : {1u, 0u, 3u, 4u, 0x80000000u, 0xffffffffu}) {
        EXPECT_EQ(c.on_receive(Incoming(mseq, 1, 50)), RxError::kSequenceGap) << "mseq " << mseq;
        EXPECT_EQ(Snapshot(c), before) << "after mseq " << mseq;
    }
    // The expected message is still accepted afterwards.
    EXPECT_EQ(c.on_receive(Incoming(2, 1, 50)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 50u);
}

TEST(Credits, AckFromTheFutureIsRejectedAndChangesNothing)
{
    CreditLedger c;
    c.start(PeerHello(4), 6);
    SendN(&c, 2); // last sent mseq 2
    const Snapshot before(c);
    for (u32 ack : {3u, 4u, 1000u, 0x7fffffffu, 0x80000000u, 0x80000002u}) {
        EXPECT_EQ(c.on_receive(Incoming(1, ack, 50)), RxError::kAckFromFuture) << "ack " << ack;
        EXPECT_EQ(Snapshot(c), before) << "after ack " << ack;
    }
    // Acknowledging exactly what was sent is fine, and mseq 1 is still next.
    EXPECT_EQ(c.on_receive(Incoming(1, 2, 50)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 50u);
    EXPECT_EQ(c.last_rx_mseq(), 1u);
}

TEST(Credits, AckOfOnlyTheHelloBeforeAnySend)
{
    CreditLedger c;
    c.start(PeerHello(4), 6);
    EXPECT_EQ(c.on_receive(Incoming(1, 1, 9)), RxError::kAckFromFuture)
        << "nothing was sent after the Hello";
    EXPECT_EQ(c.on_receive(Incoming(1, 0, 9)), RxError::kNone);
    EXPECT_EQ(c.tx_credits(), 9u);
}

TEST(Credits, ReceiveSequenceWrapsAround)
{
    CreditLedger c;
    c.start(PeerHello(4, 0xfffffffdu), 10);
    EXPECT_EQ(c.last_rx_mseq(), 0xfffffffdu);
    for (u32 mseq : {0xfffffffeu, 0xffffffffu, 0u, 1u}) {
        ASSERT_EQ(c.on_receive(Incoming(mseq, 0, 4)), RxError::kNone) << "mseq " << mseq;
        EXPECT_EQ(c.last_rx_mseq(), mseq);
    }
    // Four messages consumed four of the ten buffers we advertised, across
    // the wrap.
    EXPECT_EQ(c.remote_credits(), 6u);

    Bsdh out{};
    c.stamp_send(&out, 10);
    EXPECT_EQ(out.mseq_ack, 1u);
    EXPECT_EQ(c.remote_credits(), 10u);

    // Gap detection still works after the wrap.
    EXPECT_EQ(c.on_receive(Incoming(3, 1, 4)), RxError::kSequenceGap);
    EXPECT_EQ(c.on_receive(Incoming(0xffffffffu, 1, 4)), RxError::kSequenceGap);
    EXPECT_EQ(c.on_receive(Incoming(2, 1, 4)), RxError::kNone);
}

TEST(Credits, GapAcrossTheWrapIsDetected)
{
    CreditLedger c;
    c.start(PeerHello(4, 0xfffffffeu), 10);
    ASSERT_EQ(c.on_receive(Incoming(0xffffffffu, 0, 4)), RxError::kNone);
    const Snapshot before(c);
    EXPECT_EQ(c.on_receive(Incoming(1, 0, 4)), RxError::kSequenceGap) << "0 was skipped";
    EXPECT_EQ(Snapshot(c), before);
    EXPECT_EQ(c.on_receive(Incoming(0, 0, 4)), RxError::kNone);
}

TEST(Credits, RemoteCreditsTrackWhatWeAdvertised)
{
    CreditLedger c;
    c.start(PeerHello(4), 10);
    EXPECT_EQ(c.remote_credits(), 10u);
    for (u32 mseq = 1; mseq <= 3; mseq++)
        ASSERT_EQ(c.on_receive(Incoming(mseq, 0, 4)), RxError::kNone);
    EXPECT_EQ(c.remote_credits(), 7u) << "each received SEND used one of our buffers";

    Bsdh out{};
    c.stamp_send(&out, 12);
    EXPECT_EQ(c.remote_credits(), 12u) << "a new advertisement replaces the old one";
    ASSERT_EQ(c.on_receive(Incoming(4, 1, 4)), RxError::kNone);
    ASSERT_EQ(c.on_receive(Incoming(5, 1, 4)), RxError::kNone);
    EXPECT_EQ(c.remote_credits(), 10u);
}

TEST(Credits, RemoteCreditsNeverWrapBelowZero)
{
    // A peer that sends more than we advertised.
    CreditLedger c;
    c.start(PeerHello(4), 2);
    for (u32 mseq = 1; mseq <= 4; mseq++)
        ASSERT_EQ(c.on_receive(Incoming(mseq, 0, 4)), RxError::kNone);
    EXPECT_EQ(c.remote_credits(), 0u);
}

// The rule, written from its description rather than from credits.cpp.
bool UpdateDueByRule(u32 remote, u32 posted)
{
    if (posted <= remote)
        return false;
    return 2 * posted > 3 * remote || remote <= kReserve;
}

bool DueWithRemote(u16 remote, u16 posted)
{
    CreditLedger c;
    c.start(PeerHello(4), remote);
    EXPECT_EQ(c.remote_credits(), remote);
    return c.credit_update_due(posted);
}

TEST(Credits, CreditUpdateDueCases)
{
    struct Case {
        u16 remote;
        u16 posted;
        bool due;
    };
    const Case cases[] = {
        {10, 10, false},       // peer already knows everything
        {10, 5, false},        // fewer posted than the peer believes
        {10, 0, false},        //
        {10, 15, false},       // exactly 1.5x is not more than 1.5x
        {10, 16, true},        // more than 1.5x
        {3, 4, false},         // above the reserve and under 1.5x
        {3, 5, true},          // 5 > 4.5
        {2, 3, true},          // remote down to the reserve: 3 is not > 1.5 x 2
        {2, 2, false},         // at the reserve but nothing new to tell
        {1, 2, true},          //
        {0, 1, true},          //
        {0, 0, false},         //
        {65535, 65535, false}, // no overflow at the top of u16
        {43690, 65535, false}, // 1.5 x 43690 = 65535 exactly
        {43689, 65535, true},  //
    };
    for (const Case& k : cases) {
        EXPECT_EQ(DueWithRemote(k.remote, k.posted), k.due)
            << "remote " << k.remote << " posted " << k.posted;
        ASSERT_EQ(UpdateDueByRule(k.remote, k.posted), k.due) << "table vs rule";
    }
}

TEST(Credits, CreditUpdateDueMatchesRuleExhaustively)
{
    for (u16 remote = 0; remote <= 80; remote++) {
        for (u16 posted = 0; posted <= 200; posted++) {
            ASSERT_EQ(DueWithRemote(remote, posted), UpdateDueByRule(remote, posted))
                << "remote " << remote << " posted " << posted;
        }
    }
}

TEST(Credits, CreditUpdateClearsOnceSent)
{
    CreditLedger c;
    c.start(PeerHello(8), 4);
    ASSERT_EQ(c.on_receive(Incoming(1, 0, 8)), RxError::kNone);
    ASSERT_EQ(c.on_receive(Incoming(2, 0, 8)), RxError::kNone);
    ASSERT_EQ(c.remote_credits(), 2u);
    // We re-posted the two buffers the peer used: it is down to the reserve.
    EXPECT_TRUE(c.credit_update_due(4));

    Bsdh update{Mid::kData, 0, 0, SDP_BSDH_SIZE, 0, 0};
    c.stamp_send(&update, 4);
    EXPECT_EQ(update.bufs, 4u);
    EXPECT_EQ(c.remote_credits(), 4u);
    EXPECT_FALSE(c.credit_update_due(4));
}

} // namespace
