// SPDX-License-Identifier: GPL-2.0
//
// The core learns how many receive buffers are posted as an event
// (sdp_core_rx_posted), as the glue reports it when the number changes.
// Tests that build messages by hand name that number at each call instead:
// these wrappers report it, then make the call.
#ifndef SDP_TESTS_POSTED_CALLS_H
#define SDP_TESTS_POSTED_CALLS_H

#include "sdp_core.h"

inline int BuildHello(sdp_core_conn* c, unsigned char* buf, unsigned size, unsigned posted,
                      unsigned short local_port, int ipv6)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_build_hello(c, buf, size, local_port, ipv6);
}

inline int BuildHelloAck(sdp_core_conn* c, unsigned char* buf, unsigned size, unsigned posted)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_build_hello_ack(c, buf, size);
}

inline int TxBuild(sdp_core_conn* c, unsigned char* hdr, unsigned mid, unsigned payload_len,
                   unsigned flags, unsigned posted)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_tx_build(c, hdr, mid, payload_len, flags);
}

inline int ControlDue(sdp_core_conn* c, unsigned tx_queued, unsigned posted)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_control_due(c, tx_queued);
}

inline int TxSrcAvail(sdp_core_conn* c, unsigned char* hdr, unsigned size, const sdp_core_zc* zc,
                      unsigned posted)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_tx_src_avail(c, hdr, size, zc);
}

inline int TxSinkAvail(sdp_core_conn* c, unsigned char* hdr, unsigned size, const sdp_core_zc* zc,
                       unsigned posted)
{
    sdp_core_rx_posted(c, posted);
    return sdp_core_tx_sink_avail(c, hdr, size, zc);
}

#endif // SDP_TESTS_POSTED_CALLS_H
