// SPDX-License-Identifier: GPL-2.0
//
// The TCP state of an SDP socket on its way to closed.  SDP has no FIN
// and no ACK of its own: DisConn is the FIN, the completion of its SEND on
// a reliable connection is the ACK of it, and the RDMA CM disconnect after
// both DisConns is the end of TIME_WAIT.  Applications see TCP's states
// (poll, shutdown and close rules, /proc/net/sdp), so the mapping is
// written once, here, for every path of sdp.ko (user shutdown and close,
// the peer's DisConn, our DisConn's completion, reset).

#include "sdp_core.h"

namespace {

unsigned int after_shutdown_send(unsigned int s)
{
    switch (s) {
    case SDP_TCP_ESTABLISHED:
        return SDP_TCP_FIN_WAIT1;
    case SDP_TCP_CLOSE_WAIT:
        return SDP_TCP_LAST_ACK;
    default:
        return s;
    }
}

// The peer's FIN.  From FIN_WAIT1 (our DisConn not yet acknowledged: a
// simultaneous close) TCP goes to CLOSING; SDP goes to TIME_WAIT at once.
// What an application sees is the same in both (both directions shut,
// EPOLLHUP, a close() that lingers returns), and SDP's end of the
// connection is the RC disconnect after both DisConns, not a timer.
unsigned int after_peer_disconn(unsigned int s)
{
    switch (s) {
    case SDP_TCP_ESTABLISHED:
        return SDP_TCP_CLOSE_WAIT;
    case SDP_TCP_FIN_WAIT1:
    case SDP_TCP_FIN_WAIT2:
        return SDP_TCP_TIME_WAIT;
    default:
        return s;
    }
}

} // namespace

extern "C" unsigned int sdp_core_close_state(unsigned int tcp_state, unsigned int event)
{
    switch (event) {
    case SDP_CLOSE_SHUTDOWN_SEND:
        return after_shutdown_send(tcp_state);
    case SDP_CLOSE_PEER_DISCONN:
        return after_peer_disconn(tcp_state);
    case SDP_CLOSE_DISCONN_POSTED:
        // Both directions closed and RC delivers in order: done for the
        // user, as TCP's socket is once its last FIN is acknowledged.
        return tcp_state == SDP_TCP_LAST_ACK ? unsigned{SDP_TCP_CLOSE} : tcp_state;
    case SDP_CLOSE_DISCONN_DONE:
        return tcp_state == SDP_TCP_FIN_WAIT1 ? unsigned{SDP_TCP_FIN_WAIT2} : tcp_state;
    case SDP_CLOSE_FINISHED:
    case SDP_CLOSE_RESET:
        return SDP_TCP_CLOSE;
    default:
        return tcp_state;
    }
}
