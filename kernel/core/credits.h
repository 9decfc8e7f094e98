// SPDX-License-Identifier: GPL-2.0
//
// SDP credit-based flow control for one connection.
//
// Every message carries `bufs` (receive buffers its sender has posted) and
// `mseq_ack` (last message sequence number it received).  When a message
// arrives, the credits for sending to the peer are
//
//     credits = bufs - in_flight,   in_flight = (next_mseq - 1) - mseq_ack
//
// i.e. the peer's posted buffers minus the messages we sent that it had not
// seen yet.  Each SEND spends one credit.  Data never takes the last
// kControlReserve credits so that control messages (RdmaRdCompl, SendSM,
// DisConn, credit updates) can always go out.  Only SENDs count: RDMA reads
// and writes consume no receive buffer.
//
// The Hello/HelloAck exchange (CM private data) counts as mseq 0 on each side;
// the first SEND carries mseq 1.
#ifndef SDP_CORE_CREDITS_H
#define SDP_CORE_CREDITS_H

#include "types.h"
#include "wire.h"

namespace sdp {

class CreditLedger {
  public:
    // Credits kept back from data for control messages (OFED used 2).
    static constexpr u32 kControlReserve = 2;

    enum class RxError : u8 {
        kNone = 0,
        kSequenceGap,  // mseq is not the next one: a lost or replayed message
        kAckFromFuture // mseq_ack names a message we have not sent
    };

    // Start once Hello and HelloAck were exchanged: `peer_hello` is the BSDH
    // the peer sent, `advertised_bufs` the bufs our own Hello/HelloAck sent.
    void start(const wire::Bsdh& peer_hello, u16 advertised_bufs);

    u32 tx_credits() const { return tx_credits_; }
    bool may_send_data() const { return tx_credits_ > kControlReserve; }
    bool may_send_control() const { return tx_credits_ > 0; }

    // Fill the flow-control fields of an outgoing SEND (mseq, mseq_ack, bufs)
    // and spend one credit.  The caller checked may_send_*() first;
    // `posted_rx_bufs` is the number of receive buffers posted right now.
    void stamp_send(wire::Bsdh* out, u16 posted_rx_bufs);

    // Account a received SEND.  On error the connection must be aborted:
    // credits and sequence numbers are left as they were.
    RxError on_receive(const wire::Bsdh& in);

    // Credits the peer believes it has, from what we last told it.
    u32 remote_credits() const;

    // Whether a credit update (zero-payload Data) should go out now because
    // many receive buffers were re-posted and the peer has not been told.
    bool credit_update_due(u16 posted_rx_bufs) const;

    u32 next_tx_mseq() const { return next_tx_mseq_; }
    u32 last_rx_mseq() const { return last_rx_mseq_; }

  private:
    u32 next_tx_mseq_ = 1;
    u32 last_rx_mseq_ = 0;
    u32 tx_credits_ = 0;
    // Last advertisement we sent and the peer mseq it acknowledged.
    u16 advertised_bufs_ = 0;
    u32 advertised_at_mseq_ = 0;
};

} // namespace sdp

#endif // SDP_CORE_CREDITS_H
