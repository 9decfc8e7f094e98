// SPDX-License-Identifier: GPL-2.0
//
// Zero-copy state machines of one connection: our SrcAvail and the peer's
// (RDMA Read), our SinkAvail and the peer's (RDMA Write), SendSM and the
// cancels.  The protocol is described in sdp_core.h and in
// Documentation/zcopy.md; this file decides what each side may do next and
// rejects everything a peer may not send.
//
// One transfer of each kind at a time (max_adverts 1): a source never has
// two SrcAvails outstanding, a sink never two SinkAvails.  The rules that
// keep both sides in agreement without extra messages:
//
//  * A SendSM about our SrcAvail (mseq_ack at or after it) makes us cancel
//    it with SrcAvailCancel, as the specification asks; only the SendSM
//    acknowledging a cancel ends the SrcAvail, so a SendSM that crossed the
//    cancel is never mistaken for the answer and the next SrcAvail never
//    meets a stale one.
//  * A SinkAvail is usable only if the sink had received every stream byte
//    we sent (its mseq_ack covers our last data-bearing message), so bytes
//    written into it are exactly the next ones in the stream.  Once we send
//    stream bytes by any other message, we never use it; the sink, receiving
//    such a message, knows the advertisement ended without asking.
#include "conn.h"

namespace sdp {
namespace {

// a is at or after b in sequence space (mseq numbers wrap).
bool seq_at_or_after(u32 a, u32 b)
{
    return static_cast<s32>(a - b) >= 0;
}

// Unused SinkAvails in a row after which the back-off stops growing
// (63 chances skipped).
constexpr u32 kAdvMaxMisses = 6;

bool valid_offer(u32 len, u64 vaddr)
{
    // A zero length never decodes; longer than we ever offer or accept, or
    // wrapping the address space, cannot describe a real buffer.
    return len != 0 && len <= SDP_ZC_MAX_LEN && vaddr + len > vaddr;
}

} // namespace

// Our stream bytes went in message mseq: no earlier SinkAvail of the peer
// may be used any more.
void Connection::data_sent(u32 mseq)
{
    last_data_mseq_ = mseq;
    psink_.usable = false;
}

// The peer sent stream bytes by a message other than RdmaWrCompl, or its
// DisConn: it will never write into our SinkAvail now.  A cancel of ours is
// then pointless: not sent yet, it is dropped; already sent, its answer is
// expected and ignored.  The reader need not wait for it (the peer may have
// no credit left to send it while its bytes fill our ring).
void Connection::data_received()
{
    if (adv_.state == Zc::kActive) {
        adv_.state = Zc::kDone;
    } else if (adv_.state == Zc::kCancelling) {
        if (sink_cancel_due_)
            sink_cancel_due_ = false;
        else
            sink_ack_stale_ = true;
        adv_.state = Zc::kDone;
    }
}

bool Connection::zc_blocks_data() const
{
    // Stream order: nothing may overtake the bytes our SrcAvail offers, and
    // after an RDMA Write its RdmaWrCompl goes first.
    return src_.state == Zc::kActive || src_.state == Zc::kCancelling || wr_compl_due_ != 0;
}

// Zero-copy messages are up to 36 bytes (SinkAvail) and their answers 20:
// a peer announcing tinier receive buffers gets bcopy only.
bool Connection::zc_fits() const
{
    return peer_rcv_size_ >= SDP_SINK_AVAIL_SIZE && rx_buf_size_ >= SDP_RDMA_COMPL_SIZE;
}

// The answer to the peer's offer, RdmaRdCompl or RdmaWrCompl (20 bytes),
// must fit the peer's receive buffers too: a peer announcing tinier ones
// gets its SrcAvail answered with SendSM and its SinkAvail unused (bcopy).
bool Connection::zc_answer_fits() const
{
    return peer_rcv_size_ >= SDP_RDMA_COMPL_SIZE;
}

// Stamp and encode a SrcAvail or SinkAvail (msg's extra header filled in).
// Checked before anything is accounted: a failure spends nothing.
int Connection::send_offer(wire::Message* msg, u8* hdr, u32 size)
{
    if (size < wire::header_size(msg->bsdh.mid))
        return -SDP_CORE_ENOROOM;
    credits_.stamp_send(&msg->bsdh, posted_rx_);
    ack_owed_ = false;
    ack_requested_ = false;
    usize written = 0;
    if (wire::encode_header(*msg, hdr, size, &written) != wire::EncodeError::kNone)
        return -SDP_CORE_ENOROOM;
    sends_in_flight_++;
    if (sends_since_payload_ != 0xffffffffu)
        sends_since_payload_++;
    return static_cast<int>(written);
}

int Connection::tx_src_avail(u8* hdr, u32 size, const sdp_core_zc& zc)
{
    if (!zc_fits())
        return -SDP_CORE_ETOOBIG;
    if ((state_ & SDP_CS_ESTABLISHED) == 0 ||
        (state_ & (SDP_CS_SHUT_REQUESTED | SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return -SDP_CORE_ESTATE;
    if (src_.state != Zc::kIdle || wr_compl_due_ != 0 || !credits_.may_send_data())
        return -SDP_CORE_ESTATE;
    if (!valid_offer(zc.len, zc.vaddr))
        return -SDP_CORE_EPROTO;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kSrcAvail;
    msg.src_avail = {zc.len, zc.rkey, zc.vaddr};
    const int written = send_offer(&msg, hdr, size);
    if (written > 0) {
        src_ = OwnSrcAvail{msg.bsdh.mseq, zc.len, 0, 0, Zc::kActive, false, false};
        data_sent(msg.bsdh.mseq);
    }
    return written;
}

bool Connection::src_cancel()
{
    if (src_.state != Zc::kActive)
        return false;
    src_.state = Zc::kCancelling;
    src_.cancelled = true;
    src_cancel_due_ = true;
    return true;
}

void Connection::src_release()
{
    if (src_.state == Zc::kDone)
        src_ = OwnSrcAvail{};
}

int Connection::src_end(u32* acked) const
{
    if (acked != nullptr)
        *acked = src_.acked;
    switch (src_.state) {
    case Zc::kIdle:
        return SDP_SRC_NONE;
    case Zc::kActive:
    case Zc::kCancelling:
        return SDP_SRC_PENDING;
    default:
        break;
    }
    if (src_.acked == src_.len)
        return SDP_SRC_READ;
    // A SendSM answers our own cancel too: that one was not the sink's
    // choice, and the write returns (signal, timeout) instead of going on.
    return src_.sink_stopped && !src_.cancelled ? SDP_SRC_STOPPED : SDP_SRC_CANCELLED;
}

u32 Connection::rsa_left() const
{
    if (!rsa_.active || rsa_.stopped || (state_ & (SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return 0;
    return rsa_.len - rsa_.read;
}

int Connection::rsa_next(u32 flags, sdp_core_zc* zc)
{
    const u32 left = rsa_left();
    if (left == 0 || rsa_.reading != 0)
        return SDP_RSA_NONE;
    if ((flags & SDP_RSA_PEEK) != 0)
        return SDP_RSA_GIVE_UP_PEEK;
    const bool small = (flags & SDP_RSA_SMALL) != 0;
    if (small && rsa_.small_reads >= SDP_CORE_SMALL_READS)
        return SDP_RSA_GIVE_UP_SMALL;
    if (small)
        rsa_.small_reads++;
    *zc = sdp_core_zc{left, rsa_.rkey, rsa_.vaddr + rsa_.read};
    return SDP_RSA_READ;
}

int Connection::sink_take(u32 want, sdp_core_zc* out)
{
    if (!psink_.usable || want == 0 || src_.state != Zc::kIdle || wr_compl_due_ != 0 ||
        (state_ & (SDP_CS_DISCONN_SENT | SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return 0;
    const u32 n = want < psink_.len ? want : psink_.len;
    *out = sdp_core_zc{n, psink_.rkey, psink_.vaddr};
    psink_.usable = false;
    wr_compl_due_ = n;
    return 1;
}

int Connection::rd_start(u32 n)
{
    // A reset connection reads nothing more of what the peer offered.
    if (!rsa_.active || rsa_.stopped || rsa_.reading != 0 || n == 0 || n > rsa_.len - rsa_.read ||
        (state_ & (SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return -SDP_CORE_ESTATE;
    rsa_.reading = n;
    return 0;
}

void Connection::rd_done(u32 n)
{
    if (!rsa_.active || rsa_.reading == 0)
        return;
    if (n > rsa_.reading)
        n = rsa_.reading;
    rsa_.reading = 0;
    rsa_.read += n;
    rd_compl_due_ += n;
    if (n == 0) {
        // The read failed (the transport is going down): read no more.
        rsa_.stopped = true;
        send_sm_due_ = true;
    } else if (rsa_.read == rsa_.len) {
        // Read in full: nothing is left to give up.  Our own abandon
        // during the read needs no SendSM (the source ends the offer with
        // the RdmaRdCompl and may send Data next); the SendSM answering a
        // SrcAvailCancel is already due.
        rsa_ = PeerSrcAvail{};
    } else if (rsa_.stopped) {
        send_sm_due_ = true;
    }
}

void Connection::rsa_abandon()
{
    if (!rsa_.active || rsa_.stopped)
        return;
    rsa_.stopped = true;
    if (rsa_.reading == 0)
        send_sm_due_ = true;
}

int Connection::rsa_grace_end(bool reader_busy)
{
    if (!rsa_.active || rsa_.stopped || rsa_.read == rsa_.len ||
        (state_ & (SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return SDP_GRACE_NONE;
    const u64 at = rsa_.vaddr + rsa_.read;
    if (rsa_.reading != 0 || reader_busy || at != rsa_.grace_mark) {
        rsa_.grace_mark = at;
        return SDP_GRACE_AGAIN;
    }
    rsa_abandon();
    return SDP_GRACE_ABANDONED;
}

int Connection::tx_sink_avail(u8* hdr, u32 size, const sdp_core_zc& zc)
{
    if (!zc_fits())
        return -SDP_CORE_ETOOBIG;
    if ((state_ & SDP_CS_ESTABLISHED) == 0 ||
        (state_ & (SDP_CS_DISCONN_RCVD | SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return -SDP_CORE_ESTATE;
    // A stale SinkCancelAck still to come would look like the answer to
    // the next advertisement's cancel.
    if (adv_.state != Zc::kIdle || rsa_.active || sink_ack_stale_ || !credits_.may_send_data())
        return -SDP_CORE_ESTATE;
    if (!valid_offer(zc.len, zc.vaddr))
        return -SDP_CORE_EPROTO;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kSinkAvail;
    msg.sink_avail = {zc.len, zc.rkey, zc.vaddr, 0};
    const int written = send_offer(&msg, hdr, size);
    if (written > 0)
        adv_ = OwnSinkAvail{msg.bsdh.mseq, zc.len, 0, Zc::kActive};
    return written;
}

void Connection::adv_cancel()
{
    if (adv_.state != Zc::kActive)
        return;
    adv_.state = Zc::kCancelling;
    sink_cancel_due_ = true;
}

int Connection::adv_end(u32* written) const
{
    if (written != nullptr)
        *written = adv_.written;
    switch (adv_.state) {
    case Zc::kIdle:
        return SDP_ADV_NONE;
    case Zc::kActive:
    case Zc::kCancelling:
        return SDP_ADV_PENDING;
    default:
        return SDP_ADV_ENDED;
    }
}

// An ended advertisement is a hit or a miss for the back-off (adv_try).
void Connection::adv_release()
{
    if (adv_.state != Zc::kDone)
        return;
    if (adv_.written != 0) {
        adv_misses_ = 0;
    } else {
        if (adv_misses_ < kAdvMaxMisses)
            adv_misses_++;
        adv_skip_ = static_cast<u8>((1u << adv_misses_) - 1);
    }
    adv_ = OwnSinkAvail{};
}

bool Connection::adv_try()
{
    if (adv_skip_ == 0)
        return true;
    adv_skip_--;
    return false;
}

void Connection::zc_status(struct sdp_core_zc_status* out) const
{
    *out = sdp_core_zc_status{};
    out->src_state = static_cast<u32>(src_.state);
    out->src_len = src_.len;
    out->src_acked = src_.acked;
    out->src_sink_stopped = static_cast<int>(src_.sink_stopped);
    if (rsa_left() != 0) {
        out->rsa_left = rsa_left();
        out->rsa_rkey = rsa_.rkey;
        out->rsa_vaddr = rsa_.vaddr + rsa_.read;
    }
    out->rsa_reading = static_cast<int>(rsa_.reading != 0);
    out->adv_state = static_cast<u32>(adv_.state);
    out->adv_written = adv_.written;
    out->psink_usable = static_cast<int>(psink_.usable);
    out->psink_len = psink_.usable ? psink_.len : 0;
    out->wr_compl_pending = static_cast<int>(wr_compl_due_ != 0);
}

// The next zero-copy control message, most urgent first: the completion
// that must follow an RDMA Write, the completion a blocked source waits
// for, the answers a peer waits for, then our own cancels.
int Connection::zc_control_due() const
{
    if (wr_compl_due_ != 0)
        return SDP_MID_RDMA_WR_COMPL;
    if (rd_compl_due_ != 0)
        return SDP_MID_RDMA_RD_COMPL;
    if (send_sm_due_ && rsa_.reading == 0)
        return SDP_MID_SEND_SM;
    if (sink_cancel_ack_due_)
        return SDP_MID_SINK_CANCEL_ACK;
    if (src_cancel_due_)
        return SDP_MID_SRC_AVAIL_CANCEL;
    if (sink_cancel_due_)
        return SDP_MID_SINK_AVAIL_CANCEL;
    return 0;
}

// Fill the zero-copy control message `msg` (mid set) from the state and
// account it; called after the sequence number was stamped.
int Connection::zc_tx_build(wire::Message* msg)
{
    switch (msg->bsdh.mid) {
    case wire::Mid::kRdmaWrCompl:
        msg->rdma_compl_len = wr_compl_due_;
        wr_compl_due_ = 0;
        data_sent(msg->bsdh.mseq);
        return 0;
    case wire::Mid::kRdmaRdCompl:
        msg->rdma_compl_len = rd_compl_due_;
        rd_compl_due_ = 0;
        return 0;
    case wire::Mid::kSendSm:
        send_sm_due_ = false;
        // The offer ends here: the source sends the rest by bcopy.
        rsa_ = PeerSrcAvail{};
        return 0;
    case wire::Mid::kSinkCancelAck:
        sink_cancel_ack_due_ = false;
        return 0;
    case wire::Mid::kSrcAvailCancel:
        src_cancel_due_ = false;
        src_.cancel_mseq = msg->bsdh.mseq;
        return 0;
    case wire::Mid::kSinkAvailCancel:
        sink_cancel_due_ = false;
        return 0;
    default:
        return -SDP_CORE_EPROTO;
    }
}

// A received zero-copy message (or Data, for its effect on the
// advertisements), after the credit ledger accepted it.
int Connection::zc_rx(const wire::Message& msg, sdp_core_rx* out)
{
    out->kind = SDP_RX_ZCOPY;
    switch (msg.bsdh.mid) {
    case wire::Mid::kSrcAvail: {
        const wire::SrcAvail& sa = msg.src_avail;
        // One offer at a time, none after the peer's DisConn, no inline
        // payload (we never accept it), and the range must be real.
        if (rsa_.active || (state_ & SDP_CS_DISCONN_RCVD) != 0 || msg.payload_len != 0 ||
            !valid_offer(sa.len, sa.vaddr))
            return -SDP_CORE_EPROTO;
        data_received();
        out->zc_bytes = sa.len;
        rsa_ = PeerSrcAvail{sa.vaddr, sa.rkey, sa.len, 0, 0, true, false, 0, sa.vaddr};
        // The send/send deadlock: our own SrcAvail waits for the peer's
        // reader while this one would wait for ours, and nobody reads.
        // Nor can we read what we could not acknowledge.
        if (!zc_answer_fits() ||
            ((src_.state == Zc::kActive || src_.state == Zc::kCancelling) && !reader_waiting_)) {
            rsa_.stopped = true;
            send_sm_due_ = true;
        }
        return 0;
    }
    case wire::Mid::kRdmaRdCompl: {
        const u32 n = msg.rdma_compl_len;
        if ((src_.state != Zc::kActive && src_.state != Zc::kCancelling) || src_.sink_stopped ||
            n == 0 || n > src_.len - src_.acked)
            return -SDP_CORE_EPROTO;
        src_.acked += n;
        out->zc_bytes = n;
        if (src_.acked == src_.len && src_.state == Zc::kActive)
            src_.state = Zc::kDone;
        return 0;
    }
    case wire::Mid::kSendSm:
        if (src_.state == Zc::kActive && seq_at_or_after(msg.bsdh.mseq_ack, src_.mseq)) {
            // The sink reads no more: cancel what it has not read (the
            // specification's answer to SendSM), send the rest by bcopy
            // once the cancel is acknowledged.
            src_.sink_stopped = true;
            src_.state = Zc::kCancelling;
            src_cancel_due_ = true;
        } else if (src_.state == Zc::kCancelling) {
            src_.sink_stopped = true;
            // Only the answer to our cancel ends it (src_cancel_due_: the
            // cancel has not even gone yet).
            if (!src_cancel_due_ && seq_at_or_after(msg.bsdh.mseq_ack, src_.cancel_mseq))
                src_.state = Zc::kDone;
        }
        // Otherwise a SendSM about a SrcAvail that already ended: nothing.
        return 0;
    case wire::Mid::kSrcAvailCancel:
        // Always answered with SendSM, after the RdmaRdCompl of a read in
        // progress; an offer already finished is answered too.
        if (rsa_.active)
            rsa_.stopped = true;
        send_sm_due_ = true;
        return 0;
    case wire::Mid::kSinkAvail: {
        const wire::SinkAvail& sk = msg.sink_avail;
        // (After the peer's DisConn too: it closed its sending side only.)
        if (wr_compl_due_ != 0 || sink_cancel_ack_due_ || !valid_offer(sk.len, sk.vaddr))
            return -SDP_CORE_EPROTO;
        psink_ = PeerSinkAvail{sk.vaddr, sk.rkey, sk.len, false};
        // Usable only if the sink had every stream byte we sent.
        psink_.usable = zc_answer_fits() && (src_.state == Zc::kIdle || src_.state == Zc::kDone) &&
                        seq_at_or_after(msg.bsdh.mseq_ack, last_data_mseq_) &&
                        (state_ & SDP_CS_SHUT_REQUESTED) == 0;
        out->zc_bytes = sk.len;
        return 0;
    }
    case wire::Mid::kSinkAvailCancel:
        psink_.usable = false;
        // After our DisConn the sink needs no answer: the DisConn ended its
        // advertisement.
        if ((state_ & SDP_CS_DISCONN_SENT) == 0)
            sink_cancel_ack_due_ = true;
        return 0;
    case wire::Mid::kRdmaWrCompl: {
        const u32 n = msg.rdma_compl_len;
        if ((adv_.state != Zc::kActive && adv_.state != Zc::kCancelling) || adv_.written != 0 ||
            n == 0 || n > adv_.len || (state_ & SDP_CS_DISCONN_RCVD) != 0)
            return -SDP_CORE_EPROTO;
        adv_.written = n;
        if (adv_.state == Zc::kActive)
            adv_.state = Zc::kDone;
        out->zc_bytes = n;
        return 0;
    }
    case wire::Mid::kSinkCancelAck:
        if (sink_ack_stale_) {
            sink_ack_stale_ = false;
            return 0;
        }
        if (adv_.state != Zc::kCancelling || sink_cancel_due_)
            return -SDP_CORE_EPROTO;
        adv_.state = Zc::kDone;
        return 0;
    default:
        return -SDP_CORE_EPROTO;
    }
}

} // namespace sdp
