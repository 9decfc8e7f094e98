// SPDX-License-Identifier: GPL-2.0
//
// How many receive buffers a connection keeps (sdp_core.h,
// sdp_core_rx_ring).  The peer's credits come from the buffers posted, so
// when the ring adds or gives back a buffer is a protocol decision: it
// lives here, where the simulation runs it, and the host only carries it
// out (kernel/sdp_rx.c: allocation, registration, the completion queue).

#include "sdp_core.h"

extern "C" int sdp_core_rx_free_buffer(const sdp_core_rx_ring* r)
{
    // Added buffers go back while the peer's stream idles (trim), and as
    // they come free once the reader caught up: they were added for a
    // backlog that is gone.  If one builds up again, more are added.
    if (r->trim == 0 && r->unread != 0)
        return SDP_RX_FREE_POST;
    // Buffers holding unread data are live but take nothing in: counting
    // live buffers alone, a ring full of unread data would give back the
    // very buffers the peer's control messages land in, and leave the peer
    // with no credit at all while our blocked send waits for its answer
    // and our reader waits for that send (an echo server).  Not below the
    // first number posted, then (ring_min, at least 4: above the peer's
    // control reserve of 2, credits.h); the ring shrinks as the reader
    // catches up.
    if (r->posted < r->base)
        return SDP_RX_FREE_POST;
    if (r->live <= r->base)
        return SDP_RX_FREE_AT_BASE;
    return SDP_RX_FREE_GIVE_BACK;
}

extern "C" int sdp_core_rx_more_wanted(const sdp_core_rx_ring* r)
{
    // Not while added buffers are being given back; not while free ones
    // wait to be posted; only once unread data has taken all but a quarter
    // of the ring, and up to unread_max unread bytes.
    const bool wanted = r->trim == 0 && r->live < r->limit && r->free == 0 &&
                        r->posted <= r->live / 4 && r->unread < r->unread_max;
    return wanted ? 1 : 0;
}

extern "C" unsigned int sdp_core_rx_add_count(const sdp_core_rx_ring* r)
{
    if (r->live >= r->cap)
        return 0;
    // Half the ring again: a few steps to the cap.
    const unsigned int half = r->live / 2 != 0 ? r->live / 2 : 1;
    const unsigned int room = r->cap - r->live;
    return half < room ? half : room;
}
