// SPDX-License-Identifier: GPL-2.0
//
// One SDP connection's protocol state: the Hello exchange, credits and
// sequence numbers (CreditLedger), Nagle/cork decisions, the DisConn /
// AbortConn state machine and validation of every received message.
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

    int build_hello(u8* buf, u32 size, u16 posted_rx, u16 local_port, bool ipv6);
    int on_hello_ack(const u8* buf, u32 size);
    int on_hello(const u8* buf, u32 size);
    int build_hello_ack(u8* buf, u32 size, u16 posted_rx);

    u32 seg_max() const;
    sdp_core_tx_verdict tx_verdict(u32 seg_bytes, bool full, u32 opts) const;
    int tx_build(u8* hdr, u32 mid, u32 payload_len, u32 flags, u16 posted_rx);
    void tx_done(u32 mid);
    int control_due(u32 tx_queued, u16 posted_rx) const;
    void shutdown_send() { state_ |= SDP_CS_SHUT_REQUESTED; }
    void ack_request() { ack_requested_ = ack_owed_; }

    int rx(const u8* buf, u32 byte_len, sdp_core_rx* out);

    u32 state() const { return state_; }
    u32 tx_credits() const { return credits_.tx_credits(); }
    u32 data_in_flight() const { return data_in_flight_; }
    const CreditLedger& credits() const { return credits_; }

  private:
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
