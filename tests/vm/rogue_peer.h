// SPDX-License-Identifier: GPL-2.0
//
// A userspace SDP peer on libibverbs + librdmacm, for the rogue-peer VM
// tests (rogue_test.cpp): it connects to or accepts from the kernel's
// AF_INET_SDP sockets exactly like a real SDP peer, then misbehaves on
// purpose when a test asks it to.
//
// Honest by default, as Documentation/wire-protocol.md describes the wire:
//  * RDMA CM in the IB port space with IP addressing; Hello (32 bytes) in
//    the REQ private data, HelloAck (24 bytes) in the REP; responder
//    resources and initiator depth 1.
//  * Receive buffers posted before the Hello goes out and re-posted as soon
//    as a message is taken out of them; every BSDH carries bufs (receive
//    buffers posted now), mseq (+1 per SEND, the Hello being 0) and
//    mseq_ack (the last mseq received).  Credits are recomputed from every
//    received message (bufs - (last mseq sent - mseq_ack)); data never takes
//    the last two.
//  * Data both ways; zero-payload Data as a credit update when the peer runs
//    short, and as the acknowledgement a Nagle-holding sender waits for
//    when our reader waits.
//  * RDMA Read of a SrcAvail followed by RdmaRdCompl, RDMA Write into a
//    SinkAvail followed by RdmaWrCompl, when a test does them in order.
//
// Misbehaving is always an explicit call: raw messages with any header
// field or Hello, RDMA operations anywhere, SENDs with immediate or
// invalidate and RDMA Writes with immediate, lying about bufs, not
// re-posting receive buffers, a QP that dies silently, and (ReqFlood)
// connection requests that never complete.  Sequence numbers and acknowledgements stay correct
// unless a test overrides them, so the kernel rejects exactly the
// violation the test is about.
//
// Single-threaded: every call runs the completion queue and the CM event
// channel itself (pump()); nothing happens between calls.
#ifndef SDP_TESTS_VM_ROGUE_PEER_H
#define SDP_TESTS_VM_ROGUE_PEER_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

struct ibv_comp_channel;
struct ibv_cq;
struct ibv_mr;
struct ibv_pd;
struct ibv_qp;
struct rdma_cm_id;
struct rdma_event_channel;

namespace sdp::rogue {

// BSDH, host order.
struct Bsdh {
    uint8_t mid = 0;
    uint8_t flags = 0;
    uint16_t bufs = 0;
    uint32_t len = 0;
    uint32_t mseq = 0;
    uint32_t mseq_ack = 0;
};

// A received message, decoded as far as the rogue needs.
struct Message {
    Bsdh h;
    std::vector<uint8_t> bytes; // the whole message as received
    // SrcAvail / SinkAvail
    uint32_t zc_len = 0;
    uint32_t rkey = 0;
    uint64_t vaddr = 0;
    // RdmaRdCompl / RdmaWrCompl / ChRcvBuf(Ack)
    uint32_t compl_len = 0;
    size_t payload_off = 0;
    size_t payload_len() const { return bytes.size() - payload_off; }
};

struct Options {
    uint32_t rx_buf_size = 65536; // our receive buffers: Hello localrcvsz
    uint16_t rx_bufs = 16;        // receive buffers
    int initial_posted = -1;      // >= 0: post only this many before the Hello
    int claimed_bufs = -1;        // >= 0: the bufs field says this instead (a lie)
    uint32_t tx_slots = 16;       // send buffers (SENDs in flight)
    uint8_t max_adverts = 1;
    // The RNR retry count in our REQ or REP.  The CM gives it to the
    // peer's QP (IBA: how often the receiver of the REQ/REP retries RNR
    // NAKs), so it is the kernel's retry count, not ours; 7 is infinite.
    uint8_t rnr_retry = 7;
    // Rewrites the Hello (32 bytes, BSDH + HH) before connect() sends it
    // in the REQ: any field, or fewer bytes (the CM zero-pads the rest).
    std::function<void(std::vector<uint8_t>&)> edit_hello;
};

// How a raw message goes on the wire: a plain SEND (the only opcode SDP
// uses), or one of the RC opcodes that also consume a receive buffer.
enum class SendOp { kSend, kSendWithImm, kSendWithInv };

// Results of an RDMA operation: the work completion status (0 success,
// IBV_WC_REM_ACCESS_ERR = 10, ...), or kTimedOut / kPostFailed.
constexpr int kTimedOut = -1;
constexpr int kPostFailed = -2;

class RoguePeer {
  public:
    explicit RoguePeer(Options opt = Options{});
    ~RoguePeer();
    RoguePeer(const RoguePeer&) = delete;
    RoguePeer& operator=(const RoguePeer&) = delete;

    // ---- connection setup ----
    // Active side: connect from ip to ip:port (the kernel listens there).
    bool connect(const char* ip, int port, int timeout_ms = 10000);
    // Passive side: listen on ip:port, then accept one connection.
    bool listen(const char* ip, int port);
    bool accept(int timeout_ms = 10000);
    // Why the last call failed.
    const std::string& error() const { return error_; }
    // The CM event that ended the last failed setup call (the one that was
    // not what it waited for), e.g. RDMA_CM_EVENT_REJECTED; -1 if none.
    int last_cm_event() const { return last_cm_event_; }

    // What the peer's Hello or HelloAck said.
    uint32_t peer_rcv_size() const { return peer_rcv_size_; }
    uint16_t peer_hello_bufs() const { return peer_hello_bufs_; }
    // SrcAvails the kernel accepts outstanding (its max_adverts).
    uint8_t peer_max_adverts() const { return peer_max_adverts_; }

    // ---- the engine ----
    // Handle the completions and CM events there are; if there were none,
    // wait up to timeout_ms for some.  Returns whether anything happened.
    bool pump(int timeout_ms);
    // Pump until pred() holds; false on timeout.
    template <typename Pred> bool pump_until(Pred pred, int timeout_ms);

    // ---- honest traffic ----
    // Send n stream bytes as Data segments, waiting for credits.
    bool send_data(const void* p, size_t n, int timeout_ms = 10000);
    // Receive exactly n stream bytes (Data, and SrcAvail read honestly by
    // RDMA Read + RdmaRdCompl).  Acknowledges when it has to wait.
    bool recv_data(void* p, size_t n, int timeout_ms = 10000);
    // Stream bytes received and not yet taken by recv_data().
    size_t data_available() const { return stream_.size(); }

    // The next message (not Data with payload, not a credit update) with
    // this mid, removed from the inbox; messages before it stay.
    std::optional<Message> wait_for(uint8_t mid, int timeout_ms = 10000);
    // The next message with any of these mids.
    std::optional<Message> wait_for_any(const std::vector<uint8_t>& mids, int timeout_ms = 10000);
    // Everything received and not taken, oldest first.
    const std::deque<Message>& inbox() const { return inbox_; }

    // ---- raw messages (misbehaving ones too) ----
    // Build and post one SEND: BSDH with correct bufs/mseq/mseq_ack (unless
    // overridden) + extra header + payload.  Waits for one credit and a
    // send slot.  len_override replaces the BSDH len field.
    bool send_raw(uint8_t mid, const std::vector<uint8_t>& extra,
                  const std::vector<uint8_t>& payload = {}, uint8_t flags = 0,
                  std::optional<uint32_t> len_override = std::nullopt,
                  std::optional<uint32_t> mseq_override = std::nullopt, int timeout_ms = 5000);
    // As send_raw, but with another opcode: imm_or_rkey is the immediate
    // (kSendWithImm) or the rkey the peer's HCA invalidates (kSendWithInv).
    bool send_raw_op(SendOp op, uint32_t imm_or_rkey, uint8_t mid,
                     const std::vector<uint8_t>& extra, const std::vector<uint8_t>& payload = {});
    bool send_src_avail(uint32_t len, uint32_t rkey, uint64_t vaddr,
                        const std::vector<uint8_t>& inline_payload = {});
    bool send_sink_avail(uint32_t len, uint32_t rkey, uint64_t vaddr);
    bool send_rd_compl(uint32_t n);
    bool send_wr_compl(uint32_t n);
    bool send_control(uint8_t mid); // DisConn, SendSM, cancels, ...
    bool send_credit_update();      // zero-payload Data

    // ---- RDMA ----
    // Register len bytes at p (kept until destruction).  access: IBV_ACCESS_*.
    ibv_mr* register_memory(void* p, size_t len, int access);
    // RDMA Read len bytes from (raddr, rkey) to local p, which must lie in
    // an MR from register_memory().  Returns the completion status.
    int rdma_read(ibv_mr* mr, void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                  int timeout_ms = 10000);
    int rdma_write(ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                   int timeout_ms = 10000);
    // RDMA Write with Immediate: consumes one of the peer's receive
    // buffers.  len 0 needs no MR, no address and no key.
    int rdma_write_imm(ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                       uint32_t imm, int timeout_ms = 10000);

    // ---- knobs ----
    void set_repost(bool on) { repost_ = on; } // re-post receive buffers
    bool post_receives();                      // post every buffer not posted
    void set_claimed_bufs(int n) { opt_.claimed_bufs = n; }
    void set_auto_credit_updates(bool on) { auto_updates_ = on; }
    // The peer dies without a word: our QP goes to the error state, so our
    // HCA answers nothing more (no ACK, no NAK, no DREQ), as a host that
    // lost power.  The CM id stays.
    bool kill_qp();

    // ---- connection state ----
    void disconnect();
    bool disconnected() const { return disconnected_; }
    bool qp_failed() const { return qp_failed_; }
    uint32_t tx_credits() const { return tx_credits_; }
    uint32_t posted() const { return posted_; }
    uint32_t last_rx_mseq() const { return last_rx_mseq_; }
    uint32_t next_tx_mseq() const { return next_tx_mseq_; }
    // Messages received per mid, and what looked wrong in what the kernel
    // sent (a sequence gap, a bad length): empty for a correct kernel.
    unsigned long rx_count(uint8_t mid) const;
    const std::vector<std::string>& kernel_errors() const { return kernel_errors_; }
    // Text for failure messages: state, credits, what arrived.
    std::string describe() const;

  private:
    struct Buf {
        std::vector<uint8_t> mem;
        ibv_mr* mr = nullptr;
    };

    bool wait_cm_event(int expect, int timeout_ms, std::vector<uint8_t>* private_data,
                       rdma_cm_id** evid);
    bool setup_resources(rdma_cm_id* id);
    bool post_recv(uint32_t slot);
    void handle_cm_events();
    void handle_wc(const void* wc);
    void on_message(const uint8_t* p, uint32_t n);
    void maybe_credit_update();
    uint16_t bufs_field() const;
    uint32_t remote_credits() const;
    bool wait_send_slot(int timeout_ms);
    bool post_message(SendOp op, uint32_t imm_or_rkey, uint8_t mid,
                      const std::vector<uint8_t>& extra, const std::vector<uint8_t>& payload,
                      uint8_t flags, std::optional<uint32_t> len_override,
                      std::optional<uint32_t> mseq_override, int timeout_ms);
    int rdma_op(int opcode, ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                uint32_t imm, int timeout_ms);
    bool fail(const std::string& why);

    Options opt_;
    std::string error_;
    int last_cm_event_ = -1;
    rdma_event_channel* ch_ = nullptr;
    rdma_cm_id* listen_id_ = nullptr;
    rdma_cm_id* id_ = nullptr;
    ibv_pd* pd_ = nullptr;
    ibv_comp_channel* cc_ = nullptr;
    ibv_cq* cq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    bool connected_ = false;
    bool disconnected_ = false;
    bool qp_failed_ = false;
    bool repost_ = true;
    bool auto_updates_ = true;

    std::vector<Buf> rx_;
    std::vector<bool> rx_posted_;
    std::vector<Buf> tx_;
    std::vector<bool> tx_busy_;
    uint32_t posted_ = 0;
    std::vector<ibv_mr*> user_mrs_;

    // Credits and sequence numbers (Documentation/wire-protocol.md).
    uint32_t next_tx_mseq_ = 1;
    uint32_t last_rx_mseq_ = 0;
    uint32_t tx_credits_ = 0;
    uint16_t advertised_bufs_ = 0; // bufs of our last message
    uint32_t advertised_at_ = 0;   // last_rx_mseq_ when it went
    uint32_t acked_rx_mseq_ = 0;   // mseq_ack of our last message
    uint32_t peer_rcv_size_ = 0;
    uint16_t peer_hello_bufs_ = 0;
    uint8_t peer_max_adverts_ = 0;

    std::deque<uint8_t> stream_;
    std::deque<Message> inbox_;
    std::map<uint8_t, unsigned long> rx_count_;
    std::vector<std::string> kernel_errors_;
    uint64_t next_wr_id_ = 1;
    std::map<uint64_t, int> rdma_status_; // wr_id -> status, once complete
};

// A flood of connection requests that never complete: QP-less RDMA CM ids
// (conn_param.qp_num names a QP that does not exist) each send a REQ with a
// valid Hello, get the REP as RDMA_CM_EVENT_CONNECT_RESPONSE and never call
// rdma_establish(), so no RTU goes: the listener's children stay half-open
// until their REP retries run out (about a minute) or they are evicted.
// Destroying the ids sends REJs (ending the children).
class ReqFlood {
  public:
    ReqFlood();
    ~ReqFlood();
    ReqFlood(const ReqFlood&) = delete;
    ReqFlood& operator=(const ReqFlood&) = delete;

    // Send n more REQs to ip:port, one id after the other; returns how
    // many went out (error() says why the others did not).
    int send(const char* ip, int port, int n, int timeout_ms = 10000);
    // Handle the CM events there are, waiting up to timeout_ms for one.
    void pump(int timeout_ms);
    // Pump until every REQ sent has had an answer (REP, REJ, or the CM
    // gave up); false on timeout.
    bool wait_answered(int timeout_ms);
    // Destroy every id (the CM sends a REJ for each half-open one).
    void destroy();

    int sent() const { return static_cast<int>(ids_.size()); }
    int responses() const { return responses_; } // REPs (CONNECT_RESPONSE)
    int rejected() const { return rejected_; }   // REJ before or after the REP
    int failed() const { return failed_; }       // UNREACHABLE, CONNECT_ERROR
    const std::string& error() const { return error_; }

  private:
    bool wait_event(rdma_cm_id* id, int expect, int timeout_ms);
    void handle(rdma_cm_id* id, int event);

    rdma_event_channel* ch_ = nullptr;
    std::vector<rdma_cm_id*> ids_;
    std::map<rdma_cm_id*, int> last_event_; // per id, the last CM event
    int responses_ = 0;
    int rejected_ = 0;
    int failed_ = 0;
    std::string error_;
};

template <typename Pred> bool RoguePeer::pump_until(Pred pred, int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (pred())
            return true;
        if (std::chrono::steady_clock::now() >= end)
            return false;
        pump(10);
    }
}

} // namespace sdp::rogue

#endif // SDP_TESTS_VM_ROGUE_PEER_H
