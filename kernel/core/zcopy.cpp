// SPDX-License-Identifier: GPL-2.0
//
// Zero-copy state machines of one connection: our SrcAvail and the peer's
// (RDMA Read), our SinkAvail and the peer's (RDMA Write), SendSM and the
// cancels.  The protocol is described in sdp_core.h and in
// Documentation/zcopy.md; this file decides what each side may do next and
// rejects everything a peer may not send.
//
// As a source we offer one SrcAvail at a time, as a sink one SinkAvail; the
// peer's SrcAvails queue, up to the max_adverts we announced, and are read
// in stream order.  The rules that keep both sides in agreement without
// extra messages:
//
//  * A SendSM about our SrcAvail (mseq_ack at or after it) makes us cancel
//    it with SrcAvailCancel, as the specification asks; only the SendSM
//    acknowledging a cancel ends the SrcAvail, so a SendSM that crossed the
//    cancel is never mistaken for the answer and the next SrcAvail never
//    meets a stale one.
//  * A SendSM gives up every queued offer of the peer (their bytes follow
//    the first one's rest); the source cancels all it has out, one that
//    crossed the SendSM too, so such offers are counted and never read
//    until the SendSM answering that cancel.
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
// may be used any more.  (An RdmaWrCompl that filled its SinkAvail is not
// such a message: the peer's next SinkAvail of the same receive follows
// that one in its buffer.)
void Connection::data_sent(u32 mseq)
{
    last_data_mseq_ = mseq;
    psink_count_ = 0;
}

// The peer sent stream bytes by a message other than RdmaWrCompl, or its
// DisConn: it will never write into our SinkAvail now.  A cancel of ours is
// then pointless: not sent yet, it is dropped; already sent, its answer is
// expected and ignored.  The reader need not wait for it (the peer may have
// no credit left to send it while its bytes fill our ring).
void Connection::data_received()
{
    bool cancelled = false;
    for (u32 i = 0; i < adv_count_; i++) {
        OwnSinkAvail& a = adv_q_[i];
        cancelled |= a.state == Zc::kCancelling;
        if (a.state == Zc::kActive || a.state == Zc::kCancelling)
            a.state = Zc::kDone;
    }
    if (!cancelled)
        return;
    if (sink_cancel_due_)
        sink_cancel_due_ = false;
    else
        sink_ack_stale_ = true;
}

bool Connection::zc_blocks_data() const
{
    // Stream order: nothing may overtake the bytes our SrcAvail offers, and
    // after an RDMA Write its RdmaWrCompl goes first.
    return src_pending() || wr_compl_due_ != 0;
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

// Another SrcAvail of ours may go now (credits aside).
bool Connection::src_room() const
{
    if ((state_ & SDP_CS_ESTABLISHED) == 0 ||
        (state_ & (SDP_CS_SHUT_REQUESTED | SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return false;
    if (src_count_ >= src_limit_ || src_count_ >= peer_max_adverts_ || wr_compl_due_ != 0)
        return false;
    // The new offer's bytes follow the earlier offers' bytes: none of them
    // may be cancelled, or ended with bytes left for bcopy.
    for (u32 i = 0; i < src_count_; i++) {
        const OwnSrcAvail& o = src_at(i);
        if (o.state != Zc::kActive && !(o.state == Zc::kDone && o.acked == o.len))
            return false;
    }
    return true;
}

int Connection::tx_src_avail(u8* hdr, u32 size, const sdp_core_zc& zc)
{
    if (!zc_fits())
        return -SDP_CORE_ETOOBIG;
    if (!src_room() || !credits_.may_send_data())
        return -SDP_CORE_ESTATE;
    if (!valid_offer(zc.len, zc.vaddr))
        return -SDP_CORE_EPROTO;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kSrcAvail;
    msg.src_avail = {zc.len, zc.rkey, zc.vaddr};
    const int written = send_offer(&msg, hdr, size);
    if (written > 0) {
        src_at(src_count_) = OwnSrcAvail{msg.bsdh.mseq, zc.len, 0, Zc::kActive, false, false};
        src_count_++;
        data_sent(msg.bsdh.mseq);
    }
    return written;
}

// An offer of ours the sink may still read, or whose cancel waits for its
// answer.
bool Connection::src_pending() const
{
    for (u32 i = 0; i < src_count_; i++)
        if (src_at(i).state == Zc::kActive || src_at(i).state == Zc::kCancelling)
            return true;
    return false;
}

// One SrcAvailCancel takes back every offer the sink may still read.
bool Connection::src_cancel()
{
    bool any = false;
    for (u32 i = 0; i < src_count_; i++) {
        OwnSrcAvail& o = src_at(i);
        if (o.state != Zc::kActive)
            continue;
        o.state = Zc::kCancelling;
        o.cancelled = true;
        any = true;
    }
    if (any)
        src_cancel_due_ = true;
    return any;
}

// Offers end in stream order (RdmaRdCompl bytes apply in order; a cancel
// ends them all at once): the host releases the oldest.
void Connection::src_release()
{
    if (src_count_ == 0 || src_at(0).state != Zc::kDone)
        return;
    src_drop();
}

// The connection is gone: the oldest offer is forgotten as it stands.
void Connection::src_drop()
{
    if (src_count_ == 0)
        return;
    src_at(0) = OwnSrcAvail{};
    src_head_ = static_cast<u8>((src_head_ + 1) % SDP_CORE_MAX_ADVERTS);
    src_count_--;
}

int Connection::src_end(u32* acked) const
{
    if (acked != nullptr)
        *acked = src_count_ != 0 ? src_at(0).acked : 0;
    if (src_count_ == 0)
        return SDP_SRC_NONE;
    const OwnSrcAvail& o = src_at(0);
    if (o.state != Zc::kDone)
        return SDP_SRC_PENDING;
    if (o.acked == o.len)
        return SDP_SRC_READ;
    // A SendSM answers our own cancel too: that one was not the sink's
    // choice, and the write returns (signal, timeout) instead of going on.
    return o.sink_stopped && !o.cancelled ? SDP_SRC_STOPPED : SDP_SRC_CANCELLED;
}

// RdmaRdCompl(n): the sink read n more bytes of our offers, in order (one
// report may finish one offer and cover part of the next).
int Connection::src_rd_compl(u32 n)
{
    u32 unread = 0;
    for (u32 i = 0; i < src_count_; i++) {
        const OwnSrcAvail& o = src_at(i);
        if (o.state != Zc::kActive && o.state != Zc::kCancelling)
            continue;
        // After its SendSM the sink reads nothing more.
        if (o.sink_stopped)
            return -SDP_CORE_EPROTO;
        unread += o.len - o.acked;
    }
    if (n == 0 || n > unread)
        return -SDP_CORE_EPROTO;
    for (u32 i = 0; i < src_count_ && n != 0; i++) {
        OwnSrcAvail& o = src_at(i);
        if (o.state != Zc::kActive && o.state != Zc::kCancelling)
            continue;
        const u32 take = n < o.len - o.acked ? n : o.len - o.acked;
        o.acked += take;
        n -= take;
        // A cancelled one ends with the answer to the cancel.
        if (o.acked == o.len && o.state == Zc::kActive)
            o.state = Zc::kDone;
    }
    return 0;
}

void Connection::src_send_sm(u32 mseq_ack)
{
    const OwnSrcAvail* first_active = nullptr;
    bool cancelling = false;
    for (u32 i = 0; i < src_count_; i++) {
        const OwnSrcAvail& o = src_at(i);
        if (o.state == Zc::kActive && first_active == nullptr)
            first_active = &o;
        cancelling = cancelling || o.state == Zc::kCancelling;
    }
    if (first_active != nullptr && seq_at_or_after(mseq_ack, first_active->mseq)) {
        // The sink reads no more: cancel what it has not read (the
        // specification's answer to SendSM), every offer of ours, since
        // their bytes follow; send the rest by bcopy once the cancel is
        // acknowledged.
        for (u32 i = 0; i < src_count_; i++) {
            OwnSrcAvail& o = src_at(i);
            if (o.state == Zc::kActive)
                o.state = Zc::kCancelling;
            if (o.state == Zc::kCancelling)
                o.sink_stopped = true;
        }
        src_cancel_due_ = true;
        return;
    }
    if (!cancelling)
        return; // about offers that already ended: nothing
    // Only the answer to our cancel ends them (src_cancel_due_: the cancel
    // has not even gone yet).
    const bool answer = !src_cancel_due_ && seq_at_or_after(mseq_ack, src_cancel_mseq_);
    for (u32 i = 0; i < src_count_; i++) {
        OwnSrcAvail& o = src_at(i);
        if (o.state != Zc::kCancelling)
            continue;
        o.sink_stopped = true;
        if (answer)
            o.state = Zc::kDone;
    }
}

u32 Connection::rsa_left() const
{
    if (rsa_count_ == 0 || rsa_stopped_ || (state_ & (SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return 0;
    u32 left = 0;
    for (u32 i = 0; i < rsa_count_; i++) {
        const PeerSrcAvail& o = rsa_q_[(rsa_head_ + i) % SDP_CORE_MAX_ADVERTS];
        left += o.len - o.read;
    }
    return left;
}

int Connection::rsa_next(u32 flags, sdp_core_zc* zc)
{
    if (rsa_left() == 0 || rsa_reading_ != 0)
        return SDP_RSA_NONE;
    if ((flags & SDP_RSA_PEEK) != 0)
        return SDP_RSA_GIVE_UP_PEEK;
    const bool small = (flags & SDP_RSA_SMALL) != 0;
    if (small && rsa_small_reads_ >= SDP_CORE_SMALL_READS)
        return SDP_RSA_GIVE_UP_SMALL;
    if (small)
        rsa_small_reads_++;
    const PeerSrcAvail& o = rsa_head();
    *zc = sdp_core_zc{o.len - o.read, o.rkey, o.vaddr + o.read};
    return SDP_RSA_READ;
}

int Connection::sink_take(u32 want, sdp_core_zc* out)
{
    if (psink_count_ == 0 || want == 0 || src_count_ != 0 || wr_compl_due_ != 0 ||
        (state_ & (SDP_CS_DISCONN_SENT | SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0)
        return 0;
    const PeerSinkAvail& head = psink_q_[psink_head_];
    const u32 n = want < head.len ? want : head.len;
    *out = sdp_core_zc{n, head.rkey, head.vaddr};
    psink_head_ = static_cast<u8>((psink_head_ + 1) % SDP_CORE_MAX_ADVERTS);
    psink_count_--;
    wr_compl_due_ = n;
    // A write that leaves room in its SinkAvail ends the receive's later
    // pieces too (the sink's buffer would have a hole): they are not used,
    // and the RdmaWrCompl counts as stream bytes for what comes after.
    wr_partial_ = n < head.len;
    if (wr_partial_)
        psink_count_ = 0;
    return 1;
}

int Connection::rsa_piece(u32 skip, sdp_core_zc* zc) const
{
    if (skip >= rsa_left())
        return 0;
    for (u32 i = 0; i < rsa_count_; i++) {
        const PeerSrcAvail& o = rsa_q_[(rsa_head_ + i) % SDP_CORE_MAX_ADVERTS];
        const u32 unread = o.len - o.read;
        if (skip < unread) {
            *zc = sdp_core_zc{unread - skip, o.rkey, o.vaddr + o.read + skip};
            return 1;
        }
        skip -= unread;
    }
    return 0;
}

int Connection::rd_start(u32 n)
{
    // A reset connection reads nothing more of what the peer offered.
    // rsa_left() is 0 then, and once the offers were given up.
    if (rsa_reading_ != 0 || n == 0 || n > rsa_left())
        return -SDP_CORE_ESTATE;
    rsa_reading_ = n;
    return 0;
}

u32 Connection::rsa_unread() const
{
    u32 unread = 0;
    for (u32 i = 0; i < rsa_count_; i++) {
        const PeerSrcAvail& o = rsa_q_[(rsa_head_ + i) % SDP_CORE_MAX_ADVERTS];
        unread += o.len - o.read;
    }
    return unread;
}

// The head offer was read in full: the next one is read next.
void Connection::rsa_pop()
{
    rsa_q_[rsa_head_] = PeerSrcAvail{};
    rsa_head_ = static_cast<u8>((rsa_head_ + 1) % SDP_CORE_MAX_ADVERTS);
    rsa_count_--;
    rsa_small_reads_ = 0;
}

// The source ended every offer (it sends the rest by bcopy).
void Connection::rsa_end_all()
{
    for (PeerSrcAvail& o : rsa_q_)
        o = PeerSrcAvail{};
    rsa_head_ = 0;
    rsa_count_ = 0;
    rsa_small_reads_ = 0;
    rsa_stopped_ = false;
    rsa_cancel_awaited_ = false;
}

// Read no more of the queued offers; the SendSM saying so goes once no
// read is in progress (its RdmaRdCompl goes first).
void Connection::rsa_stop()
{
    rsa_stopped_ = true;
    send_sm_due_ = true;
}

void Connection::rd_done(u32 n)
{
    if (rsa_count_ == 0 || rsa_reading_ == 0)
        return;
    if (n > rsa_reading_)
        n = rsa_reading_;
    rsa_reading_ = 0;
    rsa_total_read_ += n;
    rd_compl_due_ += n;
    if (n == 0) {
        // The read failed (the transport is going down): read no more.
        rsa_stop();
        return;
    }
    // The read may have spanned several offers: each read to its end goes.
    while (n != 0 && rsa_count_ != 0) {
        PeerSrcAvail& o = rsa_head();
        const u32 take = n < o.len - o.read ? n : o.len - o.read;
        o.read += take;
        n -= take;
        if (o.read == o.len)
            rsa_pop();
    }
    if (!rsa_stopped_ || send_sm_due_)
        return;
    // Our own abandon during the read: a SendSM gives up what is left.
    // If nothing is, none is needed (the source ends the offer with the
    // RdmaRdCompl and may send Data next).
    if (rsa_count_ != 0)
        send_sm_due_ = true;
    else
        rsa_stopped_ = false;
}

void Connection::rsa_abandon()
{
    if (rsa_count_ == 0 || rsa_stopped_)
        return;
    rsa_stopped_ = true;
    // A read in progress that takes every byte left gives nothing up:
    // rd_done() decides whether its end leaves anything (a failed read).
    if (rsa_reading_ == 0 || rsa_unread() > rsa_reading_)
        send_sm_due_ = true;
}

int Connection::rsa_grace_end(bool reader_busy)
{
    if (rsa_left() == 0)
        return SDP_GRACE_NONE;
    if (rsa_reading_ != 0 || reader_busy || rsa_total_read_ != rsa_grace_mark_) {
        rsa_grace_mark_ = rsa_total_read_;
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
    if (adv_room() == 0 || rsa_count_ != 0 || !credits_.may_send_data())
        return -SDP_CORE_ESTATE;
    if (!valid_offer(zc.len, zc.vaddr))
        return -SDP_CORE_EPROTO;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kSinkAvail;
    msg.sink_avail = {zc.len, zc.rkey, zc.vaddr, 0};
    const int written = send_offer(&msg, hdr, size);
    if (written > 0)
        adv_q_[adv_count_++] = OwnSinkAvail{zc.len, 0, Zc::kActive};
    return written;
}

// More SinkAvails this receive may add: a first one, or further pieces
// while every one before is still untouched (none written, ended or
// cancelled), so that they follow each other in the stream.
u32 Connection::adv_room() const
{
    // A stale SinkCancelAck still to come would look like the answer to
    // the next advertisement's cancel.
    if (sink_ack_stale_)
        return 0;
    const u32 limit =
        peer_max_adverts_ < SDP_CORE_MAX_ADVERTS ? peer_max_adverts_ : SDP_CORE_MAX_ADVERTS;
    for (u32 i = 0; i < adv_count_; i++) {
        if (adv_q_[i].state != Zc::kActive || adv_q_[i].written != 0)
            return 0;
    }
    return adv_count_ < limit ? limit - adv_count_ : 0;
}

void Connection::adv_cancel()
{
    bool any = false;
    for (u32 i = 0; i < adv_count_; i++) {
        if (adv_q_[i].state == Zc::kActive) {
            adv_q_[i].state = Zc::kCancelling;
            any = true;
        }
    }
    // One SinkAvailCancel takes back every piece; a cancel already sent
    // or due covers those it found active.
    if (any)
        sink_cancel_due_ = true;
}

// The bytes written are those of the pieces filled in order: a write that
// leaves room in its piece ends the pieces after it unused.
int Connection::adv_end(u32* written) const
{
    u32 sum = 0;
    bool pending = false;
    for (u32 i = 0; i < adv_count_; i++) {
        sum += adv_q_[i].written;
        pending |= adv_q_[i].state == Zc::kActive || adv_q_[i].state == Zc::kCancelling;
    }
    if (written != nullptr)
        *written = sum;
    if (adv_count_ == 0)
        return SDP_ADV_NONE;
    return pending ? SDP_ADV_PENDING : SDP_ADV_ENDED;
}

// An ended advertisement is a hit or a miss for the back-off (adv_try).
void Connection::adv_release()
{
    u32 written = 0;
    if (adv_end(&written) != SDP_ADV_ENDED)
        return;
    if (written != 0) {
        adv_misses_ = 0;
    } else {
        if (adv_misses_ < kAdvMaxMisses)
            adv_misses_++;
        adv_skip_ = static_cast<u8>((1u << adv_misses_) - 1);
    }
    adv_count_ = 0;
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
    if (src_count_ != 0) {
        const OwnSrcAvail& o = src_at(0);
        out->src_state = static_cast<u32>(o.state);
        out->src_len = o.len;
        out->src_acked = o.acked;
        out->src_sink_stopped = static_cast<int>(o.sink_stopped);
    }
    out->src_offers = src_count_;
    out->src_pending = static_cast<int>(src_pending());
    if (rsa_left() != 0) {
        out->rsa_left = rsa_left();
        out->rsa_rkey = rsa_head().rkey;
        out->rsa_vaddr = rsa_head().vaddr + rsa_head().read;
    }
    out->rsa_reading = static_cast<int>(rsa_reading_ != 0);
    out->rsa_offers = rsa_count_;
    out->peer_max_adverts = peer_max_adverts_;
    // Our SinkAvails as one: cancelling if any is, else active if any is.
    bool active = false;
    bool cancelling = false;
    for (u32 i = 0; i < adv_count_; i++) {
        active |= adv_q_[i].state == Zc::kActive;
        cancelling |= adv_q_[i].state == Zc::kCancelling;
        out->adv_written += adv_q_[i].written;
    }
    const Zc adv_state = adv_count_ == 0 ? Zc::kIdle
                         : cancelling    ? Zc::kCancelling
                         : active        ? Zc::kActive
                                         : Zc::kDone;
    out->adv_state = static_cast<u32>(adv_state);
    out->adv_count = adv_count_;
    out->psink_usable = static_cast<int>(psink_count_ != 0);
    out->psink_len = sink_len();
    out->psink_count = psink_count_;
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
    if (send_sm_due_ && rsa_reading_ == 0)
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
        if (wr_partial_)
            data_sent(msg->bsdh.mseq);
        wr_partial_ = false;
        return 0;
    case wire::Mid::kRdmaRdCompl:
        msg->rdma_compl_len = rd_compl_due_;
        rd_compl_due_ = 0;
        return 0;
    case wire::Mid::kSendSm:
        send_sm_due_ = false;
        if (!send_sm_answers_cancel_) {
            // We give the offers up: the source cancels every offer it
            // has out, and the queue counts them until then.
            rsa_cancel_awaited_ = true;
            return 0;
        }
        // The answer to the source's cancel ends every offer: it sends
        // the rest by bcopy.
        rsa_end_all();
        send_sm_answers_cancel_ = false;
        return 0;
    case wire::Mid::kSinkCancelAck:
        sink_cancel_ack_due_ = false;
        return 0;
    case wire::Mid::kSrcAvailCancel:
        src_cancel_due_ = false;
        src_cancel_mseq_ = msg->bsdh.mseq;
        return 0;
    case wire::Mid::kSinkAvailCancel:
        sink_cancel_due_ = false;
        return 0;
    default:
        return -SDP_CORE_EPROTO;
    }
}

// The peer's SrcAvail: queued behind the offers before it.
int Connection::rsa_offer(const wire::Message& msg, sdp_core_rx* out)
{
    const wire::SrcAvail& sa = msg.src_avail;
    // No more offers than we accept at once (the ones we gave up count
    // until the source's cancel), none after the peer's DisConn, no
    // inline payload (we never accept it), and the range must be real.
    if (rsa_count_ >= SDP_CORE_MAX_ADVERTS || (state_ & SDP_CS_DISCONN_RCVD) != 0 ||
        msg.payload_len != 0 || !valid_offer(sa.len, sa.vaddr))
        return -SDP_CORE_EPROTO;
    data_received();
    out->zc_bytes = sa.len;
    if (rsa_count_ == 0)
        rsa_small_reads_ = 0;
    rsa_q_[(rsa_head_ + rsa_count_) % SDP_CORE_MAX_ADVERTS] =
        PeerSrcAvail{sa.vaddr, sa.rkey, sa.len, 0};
    rsa_count_++;
    // Given up already (our SendSM or the source's cancel crossed it):
    // the source cancels it too.
    if (rsa_stopped_)
        return 0;
    // The send/send deadlock: our own SrcAvail waits for the peer's
    // reader while this one would wait for ours, and nobody reads.  Nor
    // can we read what we could not acknowledge.
    if (!zc_answer_fits() || (src_pending() && !reader_waiting_))
        rsa_abandon();
    return 0;
}

// A received zero-copy message (or Data, for its effect on the
// advertisements), after the credit ledger accepted it.
int Connection::zc_rx(const wire::Message& msg, sdp_core_rx* out)
{
    out->kind = SDP_RX_ZCOPY;
    switch (msg.bsdh.mid) {
    case wire::Mid::kSrcAvail:
        return rsa_offer(msg, out);
    case wire::Mid::kRdmaRdCompl: {
        const int err = src_rd_compl(msg.rdma_compl_len);
        if (err != 0)
            return err;
        out->zc_bytes = msg.rdma_compl_len;
        return 0;
    }
    case wire::Mid::kSendSm:
        src_send_sm(msg.bsdh.mseq_ack);
        return 0;
    case wire::Mid::kSrcAvailCancel:
        // It cancels every offer the source has out.  Always answered
        // with SendSM, after the RdmaRdCompl of a read in progress; an
        // offer already finished is answered too.
        rsa_stop();
        send_sm_answers_cancel_ = true;
        rsa_cancel_awaited_ = false;
        return 0;
    case wire::Mid::kSinkAvail: {
        const wire::SinkAvail& sk = msg.sink_avail;
        // (After the peer's DisConn too: it closed its sending side only.)
        // More than we accept outstanding, or one before our answer to
        // the sink's cancel, is an error.
        if (psink_count_ >= SDP_CORE_MAX_ADVERTS || sink_cancel_ack_due_ ||
            !valid_offer(sk.len, sk.vaddr))
            return -SDP_CORE_EPROTO;
        out->zc_bytes = sk.len;
        // Usable only if the sink had every stream byte we sent, those of
        // RDMA Writes into its earlier pieces of the same receive aside,
        // and if the piece before it in that receive was.
        if (psink_dropping_ && msg.bsdh.mseq_ack == psink_drop_ack_)
            return 0;
        psink_dropping_ = false;
        if (!zc_answer_fits() || src_pending() || (wr_compl_due_ != 0 && wr_partial_) ||
            !seq_at_or_after(msg.bsdh.mseq_ack, last_data_mseq_) ||
            (state_ & SDP_CS_SHUT_REQUESTED) != 0) {
            psink_dropping_ = true;
            psink_drop_ack_ = msg.bsdh.mseq_ack;
            return 0;
        }
        psink_q_[(psink_head_ + psink_count_) % SDP_CORE_MAX_ADVERTS] =
            PeerSinkAvail{sk.vaddr, sk.rkey, sk.len};
        psink_count_++;
        return 0;
    }
    case wire::Mid::kSinkAvailCancel:
        psink_count_ = 0;
        // After our DisConn the sink needs no answer: the DisConn ended its
        // advertisement.
        if ((state_ & SDP_CS_DISCONN_SENT) == 0)
            sink_cancel_ack_due_ = true;
        return 0;
    case wire::Mid::kRdmaWrCompl: {
        // It fills our pieces in order: the first not written yet, and
        // only after a full one (a piece left with room ended the rest,
        // also those our cancel still holds).
        const u32 n = msg.rdma_compl_len;
        u32 i = 0;
        while (i < adv_count_ && adv_q_[i].written != 0)
            i++;
        if (i == adv_count_ || (i != 0 && adv_q_[i - 1].written != adv_q_[i - 1].len) ||
            (adv_q_[i].state != Zc::kActive && adv_q_[i].state != Zc::kCancelling) || n == 0 ||
            n > adv_q_[i].len || (state_ & SDP_CS_DISCONN_RCVD) != 0)
            return -SDP_CORE_EPROTO;
        adv_q_[i].written = n;
        if (adv_q_[i].state == Zc::kActive)
            adv_q_[i].state = Zc::kDone;
        // A piece left with room ends those after it: the source uses
        // them no more (a cancel in flight is still answered).
        for (u32 k = i + 1; n < adv_q_[i].len && k < adv_count_; k++) {
            if (adv_q_[k].state == Zc::kActive)
                adv_q_[k].state = Zc::kDone;
        }
        out->zc_bytes = n;
        return 0;
    }
    case wire::Mid::kSinkCancelAck:
        if (sink_ack_stale_) {
            sink_ack_stale_ = false;
            return 0;
        }
        {
            bool cancelling = false;
            for (u32 i = 0; i < adv_count_; i++)
                cancelling |= adv_q_[i].state == Zc::kCancelling;
            if (!cancelling || sink_cancel_due_)
                return -SDP_CORE_EPROTO;
            for (u32 i = 0; i < adv_count_; i++) {
                if (adv_q_[i].state == Zc::kCancelling)
                    adv_q_[i].state = Zc::kDone;
            }
        }
        return 0;
    default:
        return -SDP_CORE_EPROTO;
    }
}

} // namespace sdp
