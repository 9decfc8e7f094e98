// SPDX-License-Identifier: GPL-2.0
//
// One SDP connection's protocol state: the Hello exchange, credits and
// sequence numbers (CreditLedger), Nagle/cork decisions, the DisConn /
// AbortConn state machine, the zero-copy state machines (zcopy.cpp) and
// validation of every received message.
//
// Sans-I/O: the host (kernel glue or a userspace simulation) owns buffers
// and queue pairs, calls in with events and gets decisions back.  The C ABI
// over this class is in sdp_core.h; this header is for C++ users (tests).
#ifndef SDP_CORE_CONN_H
#define SDP_CORE_CONN_H

#include "credits.h"
#include "sdp_core.h"
#include "types.h"
#include "wire.h"

namespace sdp {

class Connection {
  public:
    void init(u32 rx_buf_size, u32 tx_buf_size);
    void set_timers(u32 ack_delay_ms, u32 zc_grace_ms);

    int build_hello(u8* buf, u32 size, u16 local_port, bool ipv6);
    int on_hello_ack(const u8* buf, u32 size);
    int on_hello(const u8* buf, u32 size);
    int build_hello_ack(u8* buf, u32 size);
    void rx_posted(u32 posted)
    {
        posted_rx_ = posted < 0xffffu ? static_cast<u16>(posted) : 0xffffu;
    }

    u32 seg_max() const;
    int rx_resized(u32 rx_buf_size);
    int tx_idle();
    sdp_core_tx_verdict tx_verdict(u32 seg_bytes, bool full, u32 opts) const;
    int tx_build(u8* hdr, u32 mid, u32 payload_len, u32 flags);
    void tx_done(u32 mid);
    int control_due(u32 tx_queued) const;
    int tx_next(const sdp_core_tx_ring& ring, sdp_core_tx_action* act);
    void shutdown_send() { state_ |= SDP_CS_SHUT_REQUESTED; }
    void ack_request() { ack_requested_ = ack_owed_; }

    // A received message; after a reset (ours or the peer's, or a
    // protocol error) every message is refused.
    int rx(const u8* buf, u32 byte_len, sdp_core_rx* out);
    void rx_fail() { state_ |= SDP_CS_RX_FAILED; }

    // Zero copy (zcopy.cpp); see sdp_core.h for the protocol.
    int tx_src_avail(u8* hdr, u32 size, const sdp_core_zc& zc);
    bool src_cancel();
    void src_release();
    void src_drop();
    int src_end(u32* acked) const;
    bool src_room() const;
    void set_src_limit(u32 n)
    {
        // At most SDP_CORE_MAX_ADVERTS (4): the narrowing keeps the value.
        src_limit_ = static_cast<u8>(n == 0                     ? 1
                                     : n < SDP_CORE_MAX_ADVERTS ? n
                                                                : SDP_CORE_MAX_ADVERTS);
    }
    u32 sink_len() const { return psink_count_ != 0 ? psink_q_[psink_head_].len : 0; }
    bool wr_compl_pending() const { return wr_compl_due_ != 0; }
    int sink_take(u32 want, sdp_core_zc* out);
    u32 rsa_left() const;
    int rsa_next(u32 flags, sdp_core_zc* zc);
    int rsa_piece(u32 skip, sdp_core_zc* zc) const;
    int rd_start(u32 n);
    void rd_done(u32 n);
    void rsa_abandon();
    u32 rsa_grace_start()
    {
        rsa_grace_mark_ = rsa_total_read_;
        return zc_grace_ms_;
    }
    int rsa_grace_end(bool reader_busy);
    void set_reader_waiting(bool waiting) { reader_waiting_ = waiting; }
    int tx_sink_avail(u8* hdr, u32 size, const sdp_core_zc& zc);
    void adv_cancel();
    int adv_end(u32* written) const;
    void adv_release();
    bool adv_try();
    u32 adv_room() const;
    void zc_status(struct sdp_core_zc_status* out) const;

    u32 state() const { return state_; }
    u32 tx_credits() const { return credits_.tx_credits(); }
    bool may_send_data() const { return credits_.may_send_data(); }
    u32 data_in_flight() const { return data_in_flight_; }
    const CreditLedger& credits() const { return credits_; }

  private:
    int rx_checked(const u8* buf, u32 byte_len, sdp_core_rx* out);
    // Zero-copy transfer states (zcopy.cpp).
    enum class Zc : u8 { kIdle, kActive, kCancelling, kDone };
    // One of our SrcAvails (we are the data source).
    struct OwnSrcAvail {
        u32 mseq;
        u32 len;
        u32 acked; // RdmaRdCompl bytes
        Zc state;
        bool sink_stopped; // a SendSM: the sink reads no more
        bool cancelled;    // the host cancelled it (signal, timeout)
    };
    // One of the peer's SrcAvails (we are the sink).
    struct PeerSrcAvail {
        u64 vaddr;
        u32 rkey;
        u32 len;
        u32 read; // bytes read and reported (or being reported)
    };
    // Our SinkAvail (we are the sink): a piece of the receive's buffer.
    struct OwnSinkAvail {
        u32 len;
        u32 written; // RdmaWrCompl bytes
        Zc state;
    };
    // A usable SinkAvail of the peer (we are the source).
    struct PeerSinkAvail {
        u64 vaddr;
        u32 rkey;
        u32 len;
    };
    int zc_rx(const wire::Message& msg, sdp_core_rx* out);
    int rsa_offer(const wire::Message& msg, sdp_core_rx* out);
    OwnSrcAvail& src_at(u32 i) { return src_q_[(src_head_ + i) % SDP_CORE_MAX_ADVERTS]; }
    const OwnSrcAvail& src_at(u32 i) const
    {
        return src_q_[(src_head_ + i) % SDP_CORE_MAX_ADVERTS];
    }
    bool src_pending() const;
    int src_rd_compl(u32 n);
    void src_send_sm(u32 mseq_ack);
    PeerSrcAvail& rsa_head() { return rsa_q_[rsa_head_]; }
    const PeerSrcAvail& rsa_head() const { return rsa_q_[rsa_head_]; }
    void rsa_pop();
    u32 rsa_unread() const; // of every queued offer, given up or not
    void rsa_stop();
    void rsa_end_all();
    int send_offer(wire::Message* msg, u8* hdr, u32 size);
    int zc_tx_build(wire::Message* msg);
    int zc_control_due() const;
    bool zc_blocks_data() const;
    bool zc_fits() const;
    bool zc_answer_fits() const;
    void data_sent(u32 mseq);
    void data_received();
    int resize_due(u32 tx_queued) const;
    bool shrink_flush_due(u32 tx_queued) const;
    int tx_control(const sdp_core_tx_ring& ring, int mid, sdp_core_tx_action* act);
    int resize_rx(const wire::Message& msg, sdp_core_rx* out);

    // Our Hello/HelloAck as a BSDH, so the ledger can start from it.
    void start(const wire::Bsdh& peer, u16 advertised);
    // SENDs complete in posting order, so payload is in flight iff the last
    // payload SEND is among the SENDs not completed yet.
    bool payload_in_flight() const { return sends_since_payload_ < sends_in_flight_; }

    CreditLedger credits_;
    u32 rx_buf_size_ = 0;
    u32 tx_buf_size_ = 0;
    u32 peer_rcv_size_ = 0;
    u32 data_in_flight_ = 0; // posted Data SENDs (updates too) not yet completed
    // Nagle waits for payload only, not for credit updates (payload_in_flight()).
    u32 sends_in_flight_ = 0;               // every SEND not completed yet
    u32 sends_since_payload_ = 0xffffffffu; // SENDs posted after the last payload
    u32 state_ = 0;                         // SDP_CS_*
    // Receive buffers posted and not yet consumed, as the host last reported
    // (rx_posted()): what every message we send advertises.
    u16 posted_rx_ = 0;
    // Timer durations (set_timers): the host runs the timers, we say when.
    u32 ack_delay_ms_ = SDP_CORE_ACK_DELAY_MS;
    u32 zc_grace_ms_ = SDP_CORE_ZC_GRACE_MS;
    // Passive side: the peer's Hello until our HelloAck goes out.
    wire::Bsdh peer_hello_{};
    bool have_peer_hello_ = false;
    // Active side: the bufs our Hello advertised.
    u16 advertised_hello_bufs_ = 0;
    // Nagle on the peer's acknowledgement (Minshall's variant): the mseq of
    // our last partial payload message and whether the peer's mseq_ack has
    // not reached it yet.
    u32 nagle_mseq_ = 0;
    bool nagle_wait_ = false;
    // Receiving side of the same: a partial payload message arrived and no
    // message of ours has acknowledged it yet (ack_owed_); the host asked for
    // that acknowledgement to go (delayed-ack timer, reader waiting).
    bool ack_owed_ = false;
    bool ack_requested_ = false;
    // Zero copy.
    // Our SrcAvails in stream order, ended ones first until the host
    // releases them; at most min(src_limit_, peer_max_adverts_) of them.
    OwnSrcAvail src_q_[SDP_CORE_MAX_ADVERTS]{};
    u8 src_head_ = 0;
    u8 src_count_ = 0;
    u8 src_limit_ = 1;        // the host's limit (set_src_limit())
    u32 src_cancel_mseq_ = 0; // our SrcAvailCancel, which ends them all
    // The peer's SrcAvails in stream order, up to the max_adverts our
    // Hello or HelloAck announced; a read starts at the head and may go on
    // into the offers behind it.
    PeerSrcAvail rsa_q_[SDP_CORE_MAX_ADVERTS]{};
    u8 rsa_head_ = 0;
    u8 rsa_count_ = 0;
    // Read no more of the queued offers: the source cancelled them, or we
    // gave them up (a SendSM is due or went).  A SendSM we sent to give
    // them up makes the source cancel every offer it has out, those still
    // on their way to us included, so the queue stays stopped (and counts
    // them) until the SendSM answering that SrcAvailCancel.
    bool rsa_stopped_ = false;
    bool rsa_cancel_awaited_ = false;     // our SendSM gave them up, no cancel yet
    bool send_sm_answers_cancel_ = false; // the SendSM due answers a cancel
    u8 rsa_small_reads_ = 0;              // reads of the head of less than the threshold
    u32 rsa_reading_ = 0;                 // bytes of the RDMA Reads in progress, from the head
    u64 rsa_total_read_ = 0;              // bytes ever read: the grace period's progress
    u64 rsa_grace_mark_ = 0;              // rsa_total_read_ when the period started
    // How many SrcAvails the peer accepts outstanding (its Hello's
    // max_adverts or HelloAck's ext_max_adverts, 0 read as 1).
    u8 peer_max_adverts_ = 1;
    // Our SinkAvails: consecutive pieces of one receive's buffer, filled
    // in this order (adv_q_[0] first), at most peer_max_adverts_ of them.
    OwnSinkAvail adv_q_[SDP_CORE_MAX_ADVERTS]{};
    u8 adv_count_ = 0;
    // The peer's usable SinkAvails in the order it sent them, which is the
    // order their bytes take in the stream.  The pieces of one receive come
    // together, all with the same mseq_ack (nothing of ours arrived between
    // them); once one of them is not usable, none after it is either
    // (psink_drop_*): they would take the stream bytes meant for it.
    PeerSinkAvail psink_q_[SDP_CORE_MAX_ADVERTS]{};
    u8 psink_head_ = 0;
    u8 psink_count_ = 0;
    bool psink_dropping_ = false;
    u32 psink_drop_ack_ = 0;
    // The RDMA Write whose RdmaWrCompl is due did not fill its SinkAvail:
    // the sink ends the pieces after it, so none of them is usable.
    bool wr_partial_ = false;
    u32 last_data_mseq_ = 0; // our last message carrying stream bytes
    u32 rd_compl_due_ = 0;   // bytes read, RdmaRdCompl not yet sent
    u32 wr_compl_due_ = 0;   // bytes written, RdmaWrCompl not yet sent
    bool send_sm_due_ = false;
    bool src_cancel_due_ = false;
    bool sink_cancel_due_ = false;
    bool sink_cancel_ack_due_ = false;
    // Our SinkAvailCancel went, then stream bytes ended the advertisement
    // first: the SinkCancelAck still comes and answers nothing.
    bool sink_ack_stale_ = false;
    bool reader_waiting_ = false; // an application receive is posted (deadlock rule)
    // SinkAvail back-off (adv_try): unused advertisements in a row, and
    // chances to skip before the next.
    u8 adv_misses_ = 0;
    u8 adv_skip_ = 0;
    // Receive buffers that change size (ChRcvBuf/ChRcvBufAck; sdp_core.h).
    // As the data source we ask for tx_buf_size_ when a stream fills the
    // peer's buffers, and for the peer's first size when we go idle, one
    // request at a time; as the sink we answer each request once the host
    // has the buffers posted.
    bool peer_resizes_ = false;      // the peer's Hello/HelloAck had SDP_CAP_RESIZE
    u32 peer_initial_rcv_ = 0;       // the peer's size in its Hello/HelloAck
    u32 resize_req_ = 0;             // the size our next ChRcvBuf asks for (0: none due)
    u32 resize_out_ = 0;             // the size our ChRcvBuf in flight asked for (0: none)
    bool shrink_flush_ = false;      // it shrinks: send updates until the answer
    bool grow_refused_ = false;      // the peer answered our growth with less
    bool rx_resize_pending_ = false; // the peer asked; the host has not answered
    bool resize_ack_due_ = false;    // our ChRcvBufAck should go
    u32 resize_asked_ = 0;           // the size of the peer's pending ChRcvBuf
    u32 resize_answer_ = 0;          // the size our ChRcvBufAck carries
    // We sent the Hello (breaks ties in the credit update rule).
    bool active_ = false;
    // The last tx_verdict() was SDP_TX_NO_CREDIT: queued data waits for
    // credits, not for cork or Nagle (control_due() asks for credits then).
    mutable bool credit_blocked_ = false;
};

static_assert(sizeof(Connection) <= SDP_CORE_CONN_BYTES, "grow SDP_CORE_CONN_BYTES");
static_assert(alignof(Connection) <= alignof(unsigned long long), "alignment");

} // namespace sdp

#endif // SDP_CORE_CONN_H
