// SPDX-License-Identifier: GPL-2.0
//
// The close path's TCP states (kernel/core/close.cpp): every transition
// sdp.ko makes, and that events which do not apply leave a state alone.
#include <gtest/gtest.h>

#include "sdp_core.h"

namespace {

unsigned int after(unsigned int state, unsigned int event)
{
    return sdp_core_close_state(state, event);
}

constexpr unsigned int kAllStates[] = {
    SDP_TCP_ESTABLISHED, SDP_TCP_SYN_SENT,  SDP_TCP_SYN_RECV, SDP_TCP_FIN_WAIT1,
    SDP_TCP_FIN_WAIT2,   SDP_TCP_TIME_WAIT, SDP_TCP_CLOSE,    SDP_TCP_CLOSE_WAIT,
    SDP_TCP_LAST_ACK,    SDP_TCP_LISTEN,    SDP_TCP_CLOSING,
};

TEST(CloseState, ActiveCloseGoesThroughFinWaitToTimeWait)
{
    unsigned int s = after(SDP_TCP_ESTABLISHED, SDP_CLOSE_SHUTDOWN_SEND);
    EXPECT_EQ(s, SDP_TCP_FIN_WAIT1);
    EXPECT_EQ(after(s, SDP_CLOSE_DISCONN_POSTED), SDP_TCP_FIN_WAIT1);
    s = after(s, SDP_CLOSE_DISCONN_DONE);
    EXPECT_EQ(s, SDP_TCP_FIN_WAIT2);
    s = after(s, SDP_CLOSE_PEER_DISCONN);
    EXPECT_EQ(s, SDP_TCP_TIME_WAIT);
    EXPECT_EQ(after(s, SDP_CLOSE_FINISHED), SDP_TCP_CLOSE);
}

TEST(CloseState, PassiveCloseGoesThroughCloseWaitAndLastAck)
{
    unsigned int s = after(SDP_TCP_ESTABLISHED, SDP_CLOSE_PEER_DISCONN);
    EXPECT_EQ(s, SDP_TCP_CLOSE_WAIT);
    s = after(s, SDP_CLOSE_SHUTDOWN_SEND);
    EXPECT_EQ(s, SDP_TCP_LAST_ACK);
    // Posting the last DisConn ends it for the user: RC delivers in order.
    EXPECT_EQ(after(s, SDP_CLOSE_DISCONN_POSTED), SDP_TCP_CLOSE);
}

TEST(CloseState, SimultaneousCloseSkipsClosing)
{
    const unsigned int s = after(SDP_TCP_ESTABLISHED, SDP_CLOSE_SHUTDOWN_SEND);
    EXPECT_EQ(after(s, SDP_CLOSE_PEER_DISCONN), SDP_TCP_TIME_WAIT);
}

TEST(CloseState, ResetAndFinishCloseFromEveryState)
{
    for (const unsigned int s : kAllStates) {
        EXPECT_EQ(after(s, SDP_CLOSE_RESET), SDP_TCP_CLOSE) << s;
        EXPECT_EQ(after(s, SDP_CLOSE_FINISHED), SDP_TCP_CLOSE) << s;
    }
}

TEST(CloseState, EventsThatDoNotApplyLeaveTheStateAlone)
{
    for (const unsigned int s : kAllStates) {
        if (s != SDP_TCP_ESTABLISHED && s != SDP_TCP_CLOSE_WAIT) {
            EXPECT_EQ(after(s, SDP_CLOSE_SHUTDOWN_SEND), s) << s;
        }
        if (s != SDP_TCP_ESTABLISHED && s != SDP_TCP_FIN_WAIT1 && s != SDP_TCP_FIN_WAIT2) {
            EXPECT_EQ(after(s, SDP_CLOSE_PEER_DISCONN), s) << s;
        }
        if (s != SDP_TCP_LAST_ACK) {
            EXPECT_EQ(after(s, SDP_CLOSE_DISCONN_POSTED), s) << s;
        }
        if (s != SDP_TCP_FIN_WAIT1) {
            EXPECT_EQ(after(s, SDP_CLOSE_DISCONN_DONE), s) << s;
        }
    }
    EXPECT_EQ(after(SDP_TCP_ESTABLISHED, 99), SDP_TCP_ESTABLISHED);
}

} // namespace
