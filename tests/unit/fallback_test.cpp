// SPDX-License-Identifier: GPL-2.0
//
// The connect policy of kernel/core/fallback.cpp: which ends of an SDP
// connect attempt go on over TCP, under each socket policy.

#include <gtest/gtest.h>

#include "sdp_core.h"
#include "uapi/sdp.h"

namespace {

// The core's values are the UAPI's: the kernel hands them to users as is.
static_assert(SDP_CORE_POLICY_SDP == SDP_POLICY_SDP);
static_assert(SDP_CORE_POLICY_FALLBACK == SDP_POLICY_FALLBACK);
static_assert(SDP_CORE_POLICY_TCP == SDP_POLICY_TCP);
static_assert(SDP_CORE_FB_REJECTED == SDP_FB_REJECTED);
static_assert(SDP_CORE_FB_TIMEOUT == SDP_FB_TIMEOUT);
static_assert(SDP_CORE_FB_RESOURCES == SDP_FB_RESOURCES);

constexpr int kEnds[] = {
    SDP_CORE_CE_START,     SDP_CORE_CE_NO_ROUTE,  SDP_CORE_CE_REJECTED, SDP_CORE_CE_BUSY,
    SDP_CORE_CE_NO_ANSWER, SDP_CORE_CE_RESOURCES, SDP_CORE_CE_NOT_SDP,  SDP_CORE_CE_LOST,
};

TEST(Fallback, SdpOnlyNeverFallsBack)
{
    for (int end : kEnds)
        EXPECT_EQ(sdp_core_fallback_reason(SDP_CORE_POLICY_SDP, end), SDP_CORE_FB_NONE) << end;
}

TEST(Fallback, TcpOnlyGoesOverTcpFromTheStart)
{
    for (int end : kEnds)
        EXPECT_EQ(sdp_core_fallback_reason(SDP_CORE_POLICY_TCP, end), SDP_CORE_FB_POLICY) << end;
}

TEST(Fallback, EachWayThePeerCannotTakeSdpHasItsReason)
{
    const int p = SDP_CORE_POLICY_FALLBACK;
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_START), SDP_CORE_FB_NONE);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_NO_ROUTE), SDP_CORE_FB_NO_ROUTE);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_REJECTED), SDP_CORE_FB_REJECTED);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_BUSY), SDP_CORE_FB_BUSY);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_NO_ANSWER), SDP_CORE_FB_TIMEOUT);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_RESOURCES), SDP_CORE_FB_RESOURCES);
}

TEST(Fallback, APeerThatTookTheConnectionIsNotRetriedOverTcp)
{
    const int p = SDP_CORE_POLICY_FALLBACK;
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_NOT_SDP), SDP_CORE_FB_NONE);
    EXPECT_EQ(sdp_core_fallback_reason(p, SDP_CORE_CE_LOST), SDP_CORE_FB_NONE);
    EXPECT_EQ(sdp_core_fallback_reason(p, 99), SDP_CORE_FB_NONE);
    EXPECT_EQ(sdp_core_fallback_reason(7, SDP_CORE_CE_REJECTED), SDP_CORE_FB_NONE);
}

} // namespace
