// SPDX-License-Identifier: GPL-2.0
#include "conn.h"

namespace sdp {
namespace {

constexpr u32 kBsdh = SDP_BSDH_SIZE;

// Smallest receive buffer a peer may announce: a header and one byte.
constexpr u32 kMinRcvSize = kBsdh + 1;

int decode_error_to_core(wire::DecodeError err)
{
    switch (err) {
    case wire::DecodeError::kNone:
        return SDP_CORE_OK;
    case wire::DecodeError::kBadVersion:
        return -SDP_CORE_EVERSION;
    case wire::DecodeError::kUnsupported:
        return -SDP_CORE_EPROTO;
    default:
        return -SDP_CORE_EMALFORMED;
    }
}

// Whether re-posted receive buffers are worth a zero-payload Data message
// (CreditLedger::credit_update_due(), made safe against endless exchanges).
//
// Every message, an update too, consumes one of its receiver's buffers, which
// the receiver re-posts once it is free.  With the ledger's rule alone, an update
// that leaves its receiver with the peer at the reserve (posted 3, remote 2)
// is answered, the answer leaves the first side in the same state, and so on
// for ever: a 3-buffer ring, or any ring whose buffers wait to be read on
// both sides, never goes quiet.  So at exactly the reserve only the active
// side answers; the passive side answers a peer below the reserve.  A single
// update then draws at most one answer, and when both sides are blocked at
// the reserve (updates crossing on the wire would never acknowledge each
// other) the active side breaks the tie.  A passive peer blocked at the
// reserve is released by the active side's rule; an active side blocked
// there asks for credits itself (control_due()).
//
// An update is worth sending only if it lets the peer send data (more than
// the reserve posted) - or if the peer has no credit at all and could not
// even send a control message.
bool credit_update_needed(const CreditLedger& credits, u32 posted, bool active)
{
    constexpr u32 kReserve = CreditLedger::kControlReserve;
    const u32 remote = credits.remote_credits();
    if (posted <= remote)
        return false;
    if (remote == 0)
        return true;
    if (posted <= kReserve)
        return false;
    if (remote * 3 < posted * 2)
        return true;
    return active ? remote <= kReserve : remote < kReserve;
}

} // namespace

void Connection::init(u32 rx_buf_size, u32 tx_buf_size)
{
    *this = Connection{};
    rx_buf_size_ = rx_buf_size;
    tx_buf_size_ = tx_buf_size;
}

void Connection::set_timers(u32 ack_delay_ms, u32 zc_grace_ms)
{
    if (ack_delay_ms != 0)
        ack_delay_ms_ = ack_delay_ms;
    if (zc_grace_ms != 0)
        zc_grace_ms_ = zc_grace_ms;
}

void Connection::start(const wire::Bsdh& peer, u16 advertised)
{
    credits_.start(peer, advertised);
    state_ |= SDP_CS_ESTABLISHED;
}

int Connection::build_hello(u8* buf, u32 size, u16 local_port, bool ipv6)
{
    if ((state_ & SDP_CS_ESTABLISHED) != 0)
        return -SDP_CORE_ESTATE;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kHello;
    msg.bsdh.bufs = posted_rx_;
    msg.hello.major = SDP_VERSION_MAJOR;
    msg.hello.minor = SDP_VERSION_MINOR;
    msg.hello.ip_version = ipv6 ? wire::IpVersion::kV6 : wire::IpVersion::kV4;
    msg.hello.caps = SDP_CAP_RESIZE;
    msg.hello.max_adverts = SDP_CORE_MAX_ADVERTS;
    msg.hello.desired_remote_rcv_size = tx_buf_size_;
    msg.hello.local_rcv_size = rx_buf_size_;
    msg.hello.local_port = local_port;
    usize written = 0;
    if (wire::encode_header(msg, buf, size, &written) != wire::EncodeError::kNone)
        return -SDP_CORE_ENOROOM;
    advertised_hello_bufs_ = posted_rx_;
    return static_cast<int>(written);
}

int Connection::on_hello_ack(const u8* buf, u32 size)
{
    if ((state_ & SDP_CS_ESTABLISHED) != 0)
        return -SDP_CORE_ESTATE;
    wire::Message msg{};
    const int err = decode_error_to_core(wire::decode(buf, size, &msg));
    if (err != 0)
        return err;
    if (msg.bsdh.mid != wire::Mid::kHelloAck)
        return -SDP_CORE_EPROTO;
    if (msg.hello_ack.actual_rcv_size < kMinRcvSize || msg.bsdh.mseq != 0)
        return -SDP_CORE_EPROTO;
    peer_rcv_size_ = msg.hello_ack.actual_rcv_size;
    peer_initial_rcv_ = peer_rcv_size_;
    peer_resizes_ = (msg.hello_ack.caps & SDP_CAP_RESIZE) != 0;
    // An extension: 0 (a peer that does not know it) means one.
    peer_max_adverts_ = msg.hello_ack.ext_max_adverts != 0 ? msg.hello_ack.ext_max_adverts : 1;
    active_ = true;
    start(msg.bsdh, advertised_hello_bufs_);
    return 0;
}

int Connection::on_hello(const u8* buf, u32 size)
{
    if ((state_ & SDP_CS_ESTABLISHED) != 0)
        return -SDP_CORE_ESTATE;
    wire::Message msg{};
    const int err = decode_error_to_core(wire::decode(buf, size, &msg));
    if (err != 0)
        return err;
    if (msg.bsdh.mid != wire::Mid::kHello)
        return -SDP_CORE_EPROTO;
    if (msg.hello.local_rcv_size < kMinRcvSize || msg.bsdh.mseq != 0)
        return -SDP_CORE_EPROTO;
    peer_rcv_size_ = msg.hello.local_rcv_size;
    peer_initial_rcv_ = peer_rcv_size_;
    peer_resizes_ = (msg.hello.caps & SDP_CAP_RESIZE) != 0;
    peer_max_adverts_ = msg.hello.max_adverts;
    peer_hello_ = msg.bsdh;
    have_peer_hello_ = true;
    return 0;
}

int Connection::build_hello_ack(u8* buf, u32 size)
{
    if (!have_peer_hello_ || (state_ & SDP_CS_ESTABLISHED) != 0)
        return -SDP_CORE_ESTATE;
    wire::Message msg{};
    msg.bsdh.mid = wire::Mid::kHelloAck;
    msg.bsdh.bufs = posted_rx_;
    msg.hello_ack.major = SDP_VERSION_MAJOR;
    msg.hello_ack.minor = SDP_VERSION_MINOR;
    msg.hello_ack.ip_version = 0;
    msg.hello_ack.caps = SDP_CAP_RESIZE;
    msg.hello_ack.actual_rcv_size = rx_buf_size_;
    msg.hello_ack.ext_max_adverts = SDP_CORE_MAX_ADVERTS;
    usize written = 0;
    if (wire::encode_header(msg, buf, size, &written) != wire::EncodeError::kNone)
        return -SDP_CORE_ENOROOM;
    start(peer_hello_, posted_rx_);
    return static_cast<int>(written);
}

u32 Connection::seg_max() const
{
    u32 limit = tx_buf_size_;
    if (peer_rcv_size_ != 0 && peer_rcv_size_ < limit)
        limit = peer_rcv_size_;
    return limit > kBsdh ? limit - kBsdh : 0;
}

int Connection::rx_resized(u32 rx_buf_size)
{
    if (!rx_resize_pending_ || rx_buf_size < kMinRcvSize)
        return -SDP_CORE_ESTATE;
    // The peer's messages after its request are at most the size it asked
    // for and at most what our buffers took before: smaller buffers than
    // both would not hold them.
    const u32 floor = resize_asked_ < rx_buf_size_ ? resize_asked_ : rx_buf_size_;
    if (rx_buf_size < floor)
        return -SDP_CORE_ESTATE;
    rx_resize_pending_ = false;
    // Every buffer the peer can reach now has this size: so may its
    // messages, once our answer is there.
    rx_buf_size_ = rx_buf_size;
    resize_answer_ = rx_buf_size;
    resize_ack_due_ = true;
    return 0;
}

// Our stream went idle (the host's timer): ask the peer to take its
// receive buffers back to the size it started with, so an idle connection
// holds no more memory than a new one.  A later stream asks again.
int Connection::tx_idle()
{
    constexpr u32 kShut = SDP_CS_DISCONN_SENT | SDP_CS_SHUT_REQUESTED;
    if ((state_ & SDP_CS_ESTABLISHED) == 0 || (state_ & (SDP_CS_ABORTED | kShut)) != 0)
        return 0;
    // The peer may have the memory for a growth it refused by now.
    grow_refused_ = false;
    if (!peer_resizes_ || resize_req_ != 0 || resize_out_ != 0 ||
        peer_rcv_size_ <= peer_initial_rcv_ || rx_buf_size_ < SDP_CH_RCV_BUF_SIZE)
        return 0;
    resize_req_ = peer_initial_rcv_;
    return 1;
}

// A buffer size message due: our answer first (the peer's sends wait for
// it), then our own request.  The answer goes as long as the peer may
// send data, after our own DisConn too (a client that shut down its side
// and reads a long answer); our request only while we may.  A request that
// shrinks waits for the queued segments to go: they may be larger than the
// size it asks for, and every segment built after it fits that size.
int Connection::resize_due(u32 tx_queued) const
{
    if ((state_ & SDP_CS_ESTABLISHED) == 0 || (state_ & SDP_CS_ABORTED) != 0)
        return 0;
    if (resize_ack_due_)
        return (state_ & SDP_CS_DISCONN_RCVD) == 0 ? SDP_MID_CH_RCV_BUF_ACK : 0;
    constexpr u32 kShut = SDP_CS_DISCONN_SENT | SDP_CS_SHUT_REQUESTED;
    if (resize_req_ != 0 && (state_ & kShut) == 0 &&
        (resize_req_ > peer_rcv_size_ || tx_queued == 0))
        return SDP_MID_CH_RCV_BUF;
    return 0;
}

// While our request to shrink waits for its answer, the peer's buffers
// posted before it are still large, and an idle stream would never consume
// them: credit updates do, one buffer each, and the peer posts small ones
// in their place and answers once every posted buffer is small.  They stay
// above the control reserve and stop when the stream has data again.
bool Connection::shrink_flush_due(u32 tx_queued) const
{
    constexpr u32 kShut = SDP_CS_DISCONN_SENT | SDP_CS_SHUT_REQUESTED;
    return shrink_flush_ && tx_queued == 0 && (state_ & kShut) == 0 && credits_.may_send_data();
}

int Connection::resize_rx(const wire::Message& msg, sdp_core_rx* out)
{
    const u32 size = msg.rcv_buf_size;
    if (msg.bsdh.mid == wire::Mid::kChRcvBuf) {
        // One request at a time: the next after our answer.
        // Our answer must fit the peer's buffers.
        if (rx_resize_pending_ || resize_ack_due_ || size < kMinRcvSize ||
            peer_rcv_size_ < SDP_CH_RCV_BUF_SIZE)
            return -SDP_CORE_EPROTO;
        rx_resize_pending_ = true;
        resize_asked_ = size;
    } else {
        if (resize_out_ == 0 || size < kMinRcvSize)
            return -SDP_CORE_EPROTO;
        if (shrink_flush_) {
            // Our segments have fitted the size asked since the request:
            // buffers smaller than that would have lost them.  A larger
            // answer is a refusal, and what its buffers take.
            if (size < resize_out_)
                return -SDP_CORE_EPROTO;
            shrink_flush_ = false;
            peer_rcv_size_ = size < tx_buf_size_ ? size : tx_buf_size_;
        } else {
            // Never more than we asked for; a smaller answer is a refusal.
            const u32 granted = size < resize_out_ ? size : resize_out_;
            if (granted > peer_rcv_size_)
                peer_rcv_size_ = granted;
            if (granted < resize_out_)
                grow_refused_ = true;
        }
        resize_out_ = 0;
    }
    out->kind = SDP_RX_RESIZE;
    out->resize_bytes = size;
    return 0;
}

sdp_core_tx_verdict Connection::tx_verdict(u32 seg_bytes, bool full, u32 opts) const
{
    credit_blocked_ = false;
    if ((state_ & SDP_CS_ESTABLISHED) == 0 ||
        (state_ & (SDP_CS_DISCONN_SENT | SDP_CS_ABORTED)) != 0)
        return SDP_TX_CLOSED;
    // A partial segment waits for more bytes when the user asked for it
    // (cork, MSG_MORE), or - Nagle - while earlier data is unacknowledged:
    // by the transport (a payload SEND not completed), or by the peer (our
    // last partial message not yet covered by its mseq_ack).  The transport
    // alone acknowledges within microseconds on a local link, before the
    // writer's next call, and would let every small write go alone.  The
    // peer acknowledges once its reader has taken the data (it waits for
    // more, or its delayed-ack timer fires) or with its own data, as TCP's
    // receiver does; that release carries every small write made meanwhile.
    // Stream order: our SrcAvail's bytes, or an RDMA Write's completion,
    // come first.
    if (zc_blocks_data())
        return SDP_TX_HOLD;
    if (!full && (opts & SDP_TXO_PUSH) == 0) {
        if ((opts & SDP_TXO_CORK) != 0)
            return SDP_TX_HOLD;
        if ((opts & SDP_TXO_NODELAY) == 0 && (payload_in_flight() || nagle_wait_) &&
            seg_bytes < seg_max())
            return SDP_TX_HOLD;
    }
    if (!credits_.may_send_data()) {
        credit_blocked_ = true;
        return SDP_TX_NO_CREDIT;
    }
    return SDP_TX_POST;
}

int Connection::tx_build(u8* hdr, u32 mid, u32 payload_len, u32 flags)
{
    if ((state_ & SDP_CS_ESTABLISHED) == 0)
        return -SDP_CORE_ESTATE;
    if ((state_ & SDP_CS_ABORTED) != 0)
        return -SDP_CORE_ESTATE;
    wire::Message msg{};
    msg.bsdh.mid = static_cast<wire::Mid>(mid);
    msg.payload_len = payload_len;
    switch (msg.bsdh.mid) {
    case wire::Mid::kData:
        // After our DisConn no more data, but still credit updates: the
        // peer may go on sending and must hear of re-posted buffers.
        if ((state_ & SDP_CS_DISCONN_SENT) != 0 && payload_len != 0)
            return -SDP_CORE_ESTATE;
        if (payload_len != 0 && zc_blocks_data())
            return -SDP_CORE_ESTATE;
        if (payload_len > seg_max())
            return -SDP_CORE_ETOOBIG;
        // A zero-payload credit update may take a control credit.
        if (payload_len != 0 ? !credits_.may_send_data() : !credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        msg.bsdh.flags = static_cast<u8>(flags & SDP_FLAG_OOB_PRES);
        break;
    case wire::Mid::kDisConn:
        if ((state_ & SDP_CS_DISCONN_SENT) != 0 || !credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        break;
    case wire::Mid::kAbortConn:
        // Best effort: an abort goes out even on the last credit.
        if (!credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        break;
    case wire::Mid::kRdmaWrCompl:
    case wire::Mid::kRdmaRdCompl:
    case wire::Mid::kSendSm:
    case wire::Mid::kSrcAvailCancel:
    case wire::Mid::kSinkAvailCancel:
    case wire::Mid::kSinkCancelAck:
        // Only when due: their fields are the core's.
        if (zc_control_due() != static_cast<int>(mid) || !credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        break;
    case wire::Mid::kChRcvBuf:
        if (resize_due(0) != static_cast<int>(mid) || !credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        msg.rcv_buf_size = resize_req_;
        break;
    case wire::Mid::kChRcvBufAck:
        if (resize_due(0) != static_cast<int>(mid) || !credits_.may_send_control())
            return -SDP_CORE_ESTATE;
        msg.rcv_buf_size = resize_answer_;
        break;
    default:
        return -SDP_CORE_EPROTO;
    }
    // Only Data has a payload.  Checked before the message is accounted: a
    // build that fails must not spend a credit or a sequence number.
    if (msg.bsdh.mid != wire::Mid::kData && payload_len != 0)
        return -SDP_CORE_EPROTO;
    credits_.stamp_send(&msg.bsdh, posted_rx_);
    // Every message acknowledges everything received so far.
    ack_owed_ = false;
    ack_requested_ = false;
    if (msg.bsdh.mid == wire::Mid::kData && payload_len != 0) {
        data_sent(msg.bsdh.mseq);
        if (payload_len < seg_max()) {
            nagle_mseq_ = msg.bsdh.mseq;
            nagle_wait_ = true;
        }
    }
    if (!wire::is_control(msg.bsdh.mid) || msg.bsdh.mid == wire::Mid::kDisConn ||
        msg.bsdh.mid == wire::Mid::kAbortConn) {
        // Data, DisConn, AbortConn: nothing more to fill in.
    } else if (msg.bsdh.mid == wire::Mid::kChRcvBuf) {
        resize_out_ = resize_req_;
        resize_req_ = 0;
        // Smaller: every segment from here on fits the size asked for.
        if (resize_out_ < peer_rcv_size_) {
            peer_rcv_size_ = resize_out_;
            shrink_flush_ = true;
        }
    } else if (msg.bsdh.mid == wire::Mid::kChRcvBufAck) {
        resize_ack_due_ = false;
    } else if (zc_tx_build(&msg) != 0) {
        return -SDP_CORE_EPROTO;
    }
    usize written = 0;
    if (wire::encode_header(msg, hdr, wire::header_size(msg.bsdh.mid), &written) !=
        wire::EncodeError::kNone)
        return -SDP_CORE_ENOROOM;
    // Every Data SEND, credit updates included: tx_done() gets only the mid
    // and cannot tell an update's completion from a data segment's.
    if (msg.bsdh.mid == wire::Mid::kData)
        data_in_flight_++;
    else if (msg.bsdh.mid == wire::Mid::kDisConn)
        state_ |= SDP_CS_DISCONN_SENT;
    else if (msg.bsdh.mid == wire::Mid::kAbortConn)
        state_ |= SDP_CS_ABORTED;
    sends_in_flight_++;
    if (msg.bsdh.mid == wire::Mid::kData && payload_len != 0)
        sends_since_payload_ = 0;
    else if (sends_since_payload_ != 0xffffffffu)
        sends_since_payload_++;
    return static_cast<int>(written);
}

void Connection::tx_done(u32 mid)
{
    if (mid == SDP_MID_DATA && data_in_flight_ > 0)
        data_in_flight_--;
    if (sends_in_flight_ > 0)
        sends_in_flight_--;
}

int Connection::control_due(u32 tx_queued) const
{
    if ((state_ & SDP_CS_ESTABLISHED) == 0 || (state_ & SDP_CS_ABORTED) != 0)
        return 0;
    if (!credits_.may_send_control())
        return 0;
    // Zero-copy answers and completions may take the last credit: the peer
    // waits for them (a blocked send, a cancel), they answer a message that
    // brought a fresh advertisement, and they release the peer's buffers at
    // once, so its credit update follows.  Our own cancels are not answers:
    // two crossing cancels would spend both sides' last credits and leave
    // them mute (found by the simulation), so they keep it back.
    const int zc = zc_control_due();
    if (zc != 0 && (credits_.tx_credits() >= 2 ||
                    (zc != SDP_MID_SRC_AVAIL_CANCEL && zc != SDP_MID_SINK_AVAIL_CANCEL)))
        return zc;
    if ((state_ & SDP_CS_SHUT_REQUESTED) != 0 && (state_ & SDP_CS_DISCONN_SENT) == 0 &&
        tx_queued == 0 && !zc_blocks_data())
        return SDP_MID_DISCONN;
    // Closed both ways: no data follows in either direction, so neither side
    // needs credits any more, not even for updates.  Our DisConn stays the
    // last message.
    constexpr u32 kBothClosed = SDP_CS_DISCONN_SENT | SDP_CS_DISCONN_RCVD;
    if ((state_ & kBothClosed) == kBothClosed)
        return 0;
    // The last credit is kept for the one update that can always unblock the
    // peer: when the peer cannot send data (its credits, as far as we know,
    // are at or below the reserve) and our posted buffers would let it.
    // Spent earlier, on an update that messages still in flight from the
    // peer make stale, it would leave us unable to speak while the peer
    // waits for credits and its reader waits for its writer (an echo server
    // with a full receive ring).  With the peer unable to send data, nothing
    // but control messages can be in flight from it, so this update's
    // acknowledgement and advertisement are as good as final.
    if (credits_.tx_credits() == 1 &&
        !(credits_.remote_credits() <= CreditLedger::kControlReserve &&
          posted_rx_ > CreditLedger::kControlReserve && posted_rx_ > credits_.remote_credits()))
        return 0;
    const int resize = resize_due(tx_queued);
    if (resize != 0)
        return resize;
    if (shrink_flush_due(tx_queued))
        return SDP_MID_DATA;
    // An acknowledgement the host asked for (a sender may hold small data
    // until it comes).  Data, if any could go, would have carried it.
    if (ack_requested_)
        return SDP_MID_DATA;
    // Queued data does not stand in for the update: the host asks after
    // posting what may go, so data still queued here is held (Nagle, cork)
    // or blocked, and a corked sender must still release a blocked peer.
    if (credit_update_needed(credits_, posted_rx_, active_))
        return SDP_MID_DATA;
    // Active side, data blocked for credits (the last tx_decide() said so:
    // corked or Nagle-held data does not ask) exactly at the reserve, where
    // the passive peer does not answer (see credit_update_needed()): ask,
    // with an update that takes us below the reserve, which the peer answers
    // as soon as it has buffers to give.  Not if the peer is below the
    // reserve itself: our own rule releases it first, and its answer brings
    // our credits.
    if (active_ && tx_queued != 0 && credit_blocked_ &&
        credits_.tx_credits() == CreditLedger::kControlReserve &&
        credits_.remote_credits() >= CreditLedger::kControlReserve)
        return SDP_MID_DATA;
    return 0;
}

int Connection::tx_next(const sdp_core_tx_ring& ring, sdp_core_tx_action* act)
{
    *act = sdp_core_tx_action{};
    act->kind = SDP_TXN_NONE;
    act->data = SDP_TX_POST;
    // A buffer size message goes before data that could take its credit
    // (a stream would hold it back until it stalls), never on the last
    // credit, which control_due() keeps for a credit update.
    // A request to shrink that has not gone when data queues again is
    // stale: the stream is back.
    if (resize_req_ != 0 && resize_req_ < peer_rcv_size_ && ring.segs_queued != 0)
        resize_req_ = 0;
    const int resize = resize_due(ring.segs_queued);
    if (resize != 0 && ring.ctl_hdr != nullptr && credits_.tx_credits() >= 2 &&
        ring.ctl_size >= wire::header_size(static_cast<wire::Mid>(resize)))
        return tx_control(ring, resize, act);
    if (ring.segs_queued != 0) {
        // Full: it cannot take more bytes, or bytes queue behind it, or it
        // ends with urgent data (which must go at once).
        const bool full = ring.seg_bytes >= seg_max() || ring.seg_full != 0 ||
                          ring.seg_urgent != 0 || ring.segs_queued > 1;
        act->data = tx_verdict(ring.seg_bytes, full, ring.opts);
        if (act->data == SDP_TX_POST) {
            // A segment as large as the peer takes: ask for larger
            // buffers if ours are larger (again after an idle spell).  (The host posts each segment
            // as it fills while credits last, so "more queued behind it"
            // would wait for a credit stall to notice a stream.)
            if (ring.seg_bytes >= seg_max() && peer_resizes_ && resize_req_ == 0 &&
                resize_out_ == 0 && !grow_refused_ && peer_rcv_size_ < tx_buf_size_ &&
                peer_rcv_size_ >= SDP_CH_RCV_BUF_SIZE && rx_buf_size_ >= SDP_CH_RCV_BUF_SIZE)
                resize_req_ = tx_buf_size_;
            const int n = tx_build(ring.seg_hdr, SDP_MID_DATA, ring.seg_bytes,
                                   ring.seg_urgent != 0 ? SDP_FLAG_OOB_PRES : 0);
            if (n < 0)
                return n;
            act->kind = SDP_TXN_DATA;
            act->mid = SDP_MID_DATA;
            act->hdr_len = static_cast<u32>(n);
            return 0;
        }
    }
    // Data that cannot go leaves the turn to control messages, which may
    // be due because of it (a credit request) or regardless of it.
    if (ring.ctl_hdr == nullptr)
        return 0;
    const int mid = control_due(ring.segs_queued);
    if (mid == 0)
        return 0;
    if (ring.ctl_size < wire::header_size(static_cast<wire::Mid>(mid)))
        return -SDP_CORE_ENOROOM;
    return tx_control(ring, mid, act);
}

// Build control message `mid` into the control ring's next buffer.
int Connection::tx_control(const sdp_core_tx_ring& ring, int mid, sdp_core_tx_action* act)
{
    const int n = tx_build(ring.ctl_hdr, static_cast<u32>(mid), 0, 0);
    if (n < 0)
        return n;
    act->kind = SDP_TXN_CONTROL;
    act->mid = static_cast<u32>(mid);
    act->hdr_len = static_cast<u32>(n);
    return 0;
}

int Connection::rx(const u8* buf, u32 byte_len, sdp_core_rx* out)
{
    if ((state_ & (SDP_CS_ABORTED | SDP_CS_RX_FAILED)) != 0) {
        *out = sdp_core_rx{};
        return -SDP_CORE_ESTATE;
    }
    const int err = rx_checked(buf, byte_len, out);
    if (err != 0)
        rx_fail();
    return err;
}

int Connection::rx_checked(const u8* buf, u32 byte_len, sdp_core_rx* out)
{
    *out = sdp_core_rx{};
    if ((state_ & SDP_CS_ESTABLISHED) == 0)
        return -SDP_CORE_ESTATE;
    if (byte_len > rx_buf_size_)
        return -SDP_CORE_ETOOBIG;
    wire::Message msg{};
    const wire::DecodeError derr = wire::decode(buf, byte_len, &msg);
    if (derr != wire::DecodeError::kNone)
        return decode_error_to_core(derr);
    // A SEND carries exactly one message.
    if (msg.bsdh.len != byte_len)
        return -SDP_CORE_EMALFORMED;
    out->mid = static_cast<u32>(msg.bsdh.mid);
    if (credits_.on_receive(msg.bsdh) != CreditLedger::RxError::kNone)
        return -SDP_CORE_ESEQUENCE;
    // mseq_ack is at most our last mseq (on_receive() checked): the peer
    // has our last partial message once it is not before nagle_mseq_.
    if (nagle_wait_ && static_cast<s32>(msg.bsdh.mseq_ack - nagle_mseq_) >= 0)
        nagle_wait_ = false;

    switch (msg.bsdh.mid) {
    case wire::Mid::kData:
        if ((state_ & SDP_CS_DISCONN_RCVD) != 0 && msg.payload_len != 0)
            return -SDP_CORE_EPROTO;
        if (msg.payload_len != 0) {
            // Nothing may overtake the bytes of the peer's own SrcAvails.
            // Once our SendSM gave them up, a source that sends the rest
            // without cancelling them first has ended them all.
            if (rsa_count_ != 0 && !rsa_cancel_awaited_)
                return -SDP_CORE_EPROTO;
            if (rsa_cancel_awaited_)
                rsa_end_all();
            data_received();
        }
        out->kind = SDP_RX_DATA;
        // No payload: no pointer to subtract (a null difference is UB).
        out->payload_off = msg.payload != nullptr ? static_cast<u32>(msg.payload - buf) : 0;
        out->payload_len = msg.payload_len;
        out->urgent = msg.payload_len != 0 && (msg.bsdh.flags & SDP_FLAG_OOB_PRES) != 0 ? 1 : 0;
        // A partial message may be the first of a sender's Nagle hold: it
        // needs our acknowledgement.  The host arms its delayed-ack timer
        // when one becomes owed.
        if (msg.payload_len != 0 && msg.payload_len < rx_buf_size_ - kBsdh && !ack_owed_) {
            ack_owed_ = true;
            out->ack_timer_ms = ack_delay_ms_;
        }
        return 0;
    case wire::Mid::kDisConn:
        if ((state_ & SDP_CS_DISCONN_RCVD) != 0)
            return -SDP_CORE_EPROTO;
        state_ |= SDP_CS_DISCONN_RCVD;
        // The peer sends nothing more: our SinkAvail will not be written.
        data_received();
        out->kind = SDP_RX_DISCONN;
        return 0;
    case wire::Mid::kAbortConn:
        state_ |= SDP_CS_ABORTED;
        out->kind = SDP_RX_ABORT;
        return 0;
    case wire::Mid::kChRcvBuf:
    case wire::Mid::kChRcvBufAck:
        return resize_rx(msg, out);
    case wire::Mid::kHello:
    case wire::Mid::kHelloAck:
        // Hello/HelloAck after setup are protocol errors.
        return -SDP_CORE_EPROTO;
    default:
        return zc_rx(msg, out);
    }
}

} // namespace sdp
