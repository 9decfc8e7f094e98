// SPDX-License-Identifier: GPL-2.0
//
// Whether a connect that SDP could not carry goes on over TCP
// (Documentation/fallback.md).  The host reports how the attempt ended;
// the decision, and which ends count as "the peer does not speak SDP
// here", live in this one place.

#include "sdp_core.h"

namespace {

int reason_for(int end)
{
    switch (end) {
    case SDP_CORE_CE_NO_ROUTE:
        return SDP_CORE_FB_NO_ROUTE;
    case SDP_CORE_CE_REJECTED:
        return SDP_CORE_FB_REJECTED;
    case SDP_CORE_CE_BUSY:
        return SDP_CORE_FB_BUSY;
    case SDP_CORE_CE_NO_ANSWER:
        return SDP_CORE_FB_TIMEOUT;
    case SDP_CORE_CE_RESOURCES:
        return SDP_CORE_FB_RESOURCES;
    default:
        // The peer took the connection (it answered, or it was up): a
        // second connection over TCP would not be the same stream.
        return SDP_CORE_FB_NONE;
    }
}

} // namespace

extern "C" int sdp_core_fallback_reason(int policy, int end)
{
    switch (policy) {
    case SDP_CORE_POLICY_TCP:
        return SDP_CORE_FB_POLICY;
    case SDP_CORE_POLICY_FALLBACK:
        return end == SDP_CORE_CE_START ? SDP_CORE_FB_NONE : reason_for(end);
    default:
        return SDP_CORE_FB_NONE;
    }
}
