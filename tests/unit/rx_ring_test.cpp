// SPDX-License-Identifier: GPL-2.0
//
// The receive ring's size decisions of kernel/core/rx_ring.cpp: when a free
// buffer goes back, when buffers are added and how many.  The simulation
// runs them under traffic (SimEcho.ReceiveRingGrowsAndShrinks...).

#include <gtest/gtest.h>

#include "sdp_core.h"

namespace {

// A ring of 8 that grew to 16, its reader caught up, 8 posted.
sdp_core_rx_ring Grown()
{
    sdp_core_rx_ring r{};
    r.live = 16;
    r.posted = 8;
    r.free = 1;
    r.base = 8;
    r.cap = 32;
    r.limit = 32;
    r.unread = 0;
    r.unread_max = 65536;
    r.trim = 0;
    return r;
}

TEST(RxRing, AddedBuffersGoBackOnceTheReaderCaughtUp)
{
    sdp_core_rx_ring r = Grown();
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_GIVE_BACK);
    r.unread = 100; // a backlog again: keep them
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_POST);
    r.trim = 1; // the peer idled: they go even with data unread
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_GIVE_BACK);
}

TEST(RxRing, NeverBelowTheFirstNumberPosted)
{
    // Unread data holds 12 buffers, 3 are posted: a buffer given back here
    // would leave the peer without the credits of its control reserve.
    sdp_core_rx_ring r = Grown();
    r.trim = 1;
    r.unread = 5000;
    r.posted = 3;
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_POST);
    r.posted = r.base - 1;
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_POST);
    r.posted = r.base;
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_GIVE_BACK);
}

TEST(RxRing, BackAtTheFirstNumberTrimmingEnds)
{
    sdp_core_rx_ring r = Grown();
    r.trim = 1;
    r.live = r.base;
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_AT_BASE);
    r.trim = 0;
    EXPECT_EQ(sdp_core_rx_free_buffer(&r), SDP_RX_FREE_AT_BASE);
}

TEST(RxRing, MoreWhenUnreadDataTakesAllButAQuarter)
{
    sdp_core_rx_ring r = Grown();
    r.free = 0;
    r.unread = 4000;
    r.posted = 4; // 16 / 4
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 1);
    r.posted = 5;
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 0) << "a quarter still posted";
    r.posted = 4;
    r.free = 1;
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 0) << "free buffers are posted first";
    r.free = 0;
    r.trim = 1;
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 0) << "not while giving back";
    r.trim = 0;
    r.unread = r.unread_max;
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 0) << "unread bytes at their bound";
    r.unread = 4000;
    r.limit = r.live;
    EXPECT_EQ(sdp_core_rx_more_wanted(&r), 0) << "the completion queue holds no more";
}

TEST(RxRing, HalfTheRingAgainUpToTheCap)
{
    sdp_core_rx_ring r = Grown();
    EXPECT_EQ(sdp_core_rx_add_count(&r), 8u);
    r.live = 28;
    EXPECT_EQ(sdp_core_rx_add_count(&r), 4u);
    r.live = 32;
    EXPECT_EQ(sdp_core_rx_add_count(&r), 0u);
    r.live = 1;
    EXPECT_EQ(sdp_core_rx_add_count(&r), 1u);
}

} // namespace
