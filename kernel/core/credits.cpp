// SPDX-License-Identifier: GPL-2.0
#include "credits.h"

namespace sdp {

void CreditLedger::start(const wire::Bsdh& peer_hello, u16 advertised_bufs)
{
    next_tx_mseq_ = 1;
    last_rx_mseq_ = peer_hello.mseq;
    tx_credits_ = peer_hello.bufs;
    advertised_bufs_ = advertised_bufs;
    advertised_at_mseq_ = peer_hello.mseq;
}

void CreditLedger::stamp_send(wire::Bsdh* out, u16 posted_rx_bufs)
{
    out->mseq = next_tx_mseq_++;
    out->mseq_ack = last_rx_mseq_;
    out->bufs = posted_rx_bufs;
    advertised_bufs_ = posted_rx_bufs;
    advertised_at_mseq_ = last_rx_mseq_;
    if (tx_credits_ > 0)
        tx_credits_--;
}

CreditLedger::RxError CreditLedger::on_receive(const wire::Bsdh& in)
{
    // Sequence numbers wrap; compare by unsigned difference.
    if (in.mseq != last_rx_mseq_ + 1)
        return RxError::kSequenceGap;
    const u32 last_sent = next_tx_mseq_ - 1;
    // The peer can acknowledge at most what we sent: in_flight must not be
    // "negative" (mod 2^32, 2^31 and above is).
    const u32 in_flight = last_sent - in.mseq_ack;
    if (in_flight > 0x7fffffffu)
        return RxError::kAckFromFuture;

    last_rx_mseq_ = in.mseq;
    tx_credits_ = in.bufs > in_flight ? in.bufs - in_flight : 0;
    return RxError::kNone;
}

u32 CreditLedger::remote_credits() const
{
    const u32 consumed = last_rx_mseq_ - advertised_at_mseq_;
    return advertised_bufs_ > consumed ? advertised_bufs_ - consumed : 0;
}

bool CreditLedger::credit_update_due(u16 posted_rx_bufs) const
{
    const u32 remote = remote_credits();
    if (posted_rx_bufs <= remote)
        return false;
    // The peer is short of what we could take: tell it once the gap is large
    // (posted > 1.5 x what it knows) or it is down to the control reserve.
    return remote * 3 < static_cast<u32>(posted_rx_bufs) * 2 || remote <= kControlReserve;
}

} // namespace sdp
