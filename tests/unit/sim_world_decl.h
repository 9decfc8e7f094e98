// SPDX-License-Identifier: GPL-2.0
//
// The simulation's class World (sim_world.h): its types, its data and the
// declarations of its member functions.  The definitions are grouped by
// concern: sim_wire.h (what travels), sim_host.h (each side's glue and
// application), sim_checker.h (the checks and the state dump) and
// sim_scheduler.h (event selection and run()).  Include sim_world.h.
#ifndef SDP_TESTS_UNIT_SIM_WORLD_DECL_H
#define SDP_TESTS_UNIT_SIM_WORLD_DECL_H

#include "sdp_core.h"
#include "sdp_wire.h"
#include "sim_config.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace sdpsim {

class World {
  public:
    World(std::uint64_t seed, const SideConfig& a, const SideConfig& b, const Weights& w)
        : rng_(seed), seed_(seed), w_(w)
    {
        sides_[0].cfg = a;
        sides_[1].cfg = b;
        sides_[0].name = "A";
        sides_[1].name = "B";
        // Only a side with a threshold makes SrcAvails (and SinkAvails).
        zc_ = a.zcopy_thresh > 0 || b.zcopy_thresh > 0;
    }

    // Run until both sides have read everything and seen EOF and the wire is
    // quiet, or until the first failure.  Fails if nothing progresses (no
    // byte written, posted or read, no DisConn or EOF) for longer than a
    // reader can sleep plus stall_steps, or after max_steps in all.
    Result run(std::size_t stall_steps = 20000, std::size_t max_steps = 20000000);

  private:
    struct Segment {
        Bytes data;
        bool urgent = false; // ends at an urgent byte: nothing may be appended
    };
    // kRdma: an RDMA Write (no ring buffer, no receive buffer at the peer).
    enum class Ring : unsigned char { kTx, kCtl, kRdma };
    enum class SendState : unsigned char { kOnWire, kArrived, kAcked };
    struct Sent {
        Ring ring;
        unsigned mid;
        unsigned payload;
        SendState state;
    };
    // What travels on the wire: a SEND, or an RDMA Write of stream bytes
    // [off, off + len) of the writer into (rkey, vaddr) at the peer.
    struct WireMsg {
        Bytes msg;
        unsigned long long vaddr = 0;
        std::size_t off = 0;
        unsigned rkey = 0;
        unsigned len = 0;
        bool rdma = false;
    };
    // A registration as its owner made it: live from registration until the
    // owner sees the transfer DONE (then it invalidates the key).  Source:
    // stream bytes [off, off + len) at vaddr; done = bytes RDMA-read.
    // Sink: the reader's buffer for stream bytes from off; done = bytes
    // landed there, buf their content.
    // A sink's buffer is advertised in one or more pieces, a key each, for
    // consecutive stream bytes: piece bytes [at, at + len) of buf.
    struct Piece {
        unsigned long long vaddr = 0;
        unsigned at = 0;
        unsigned rkey = 0;
        unsigned len = 0;
        unsigned done = 0;     // bytes RDMA-written into it
        bool reported = false; // its RdmaWrCompl arrived
    };
    struct Reg {
        std::vector<Piece> pieces; // sink: its SinkAvails, in order
        Bytes buf;
        unsigned long long vaddr = 0;
        std::size_t off = 0;
        unsigned rkey = 0;
        unsigned len = 0;
        unsigned done = 0;
        bool live = false;
    };
    // The other side's SrcAvail or SinkAvail as decoded from the wire, and
    // what became of it.  Offer (we are its sink): read = bytes RDMA-read,
    // stopped = we may read no more (cancel received, abandoned, refused),
    // off = its stream offset.  Advertisement (we are its source): stopped
    // = SinkAvailCancel received, used = written into.
    struct Peer {
        unsigned long long vaddr = 0;
        std::size_t off = 0;
        unsigned rkey = 0;
        unsigned len = 0;
        unsigned read = 0;
        bool present = false;
        bool stopped = false;
        bool used = false;
    };
    // A blocking write() going by zero copy, one chunk at a time.
    enum class ZcPhase : unsigned char {
        kFlush, // queued segments go first, then an RDMA Write or a SrcAvail
        kWrite, // our RDMA Write is posted: wait for its completion
        kSrc,   // our SrcAvail is out: asleep until DONE
    };
    // The reader inside recv(), between events.
    enum class RdState : unsigned char {
        kIdle,
        kReading, // an RDMA Read of the peer's SrcAvail is in progress
        kAdv,     // asleep on its SinkAvail until DONE
    };
    // kConsumed: the slot's buffer is back on the free list (its message had
    // no payload, or the reader consumed it); the slot is reused once every
    // slot before it is.
    enum class RxState : unsigned char { kPosted, kUnpolled, kHeld, kConsumed };
    struct RxSlot {
        RxState state = RxState::kPosted;
        Bytes msg;            // the message, once it arrived
        std::size_t size = 0; // bytes of the buffer posted
        std::size_t off = 0;  // kHeld: payload [off, end) not read yet
        std::size_t end = 0;
    };
    // Members grouped by size (counters and flags last): no padding holes.
    struct Side {
        sdp_core_conn conn{};
        std::string name;
        SideConfig cfg;
        SideStats stats;
        // application, writing
        Bytes stream;          // everything it will write
        std::size_t limit = 0; // bytes it writes in total (lowered by an early shutdown)
        std::size_t written = 0;
        std::vector<std::size_t> urgent_written; // stream offsets of urgent bytes
        // send ring: [0, tx_posted) posted, the rest queued
        std::deque<Segment> tx;
        std::size_t tx_posted = 0;
        std::deque<Sent> sends;      // every SEND not completed, in posting order
        std::size_t data_posted = 0; // payload bytes posted
        // receive slots, in ring order, from the oldest slot not reusable
        std::deque<RxSlot> rx;
        std::size_t reposts = 0; // leak_every
        std::size_t unread = 0;
        std::size_t rx_bytes = 0; // payload received (polled)
        std::vector<std::size_t> urgent_seen;
        // application, reading
        Bytes got;
        std::size_t paused = 0;
        unsigned ctl_in_flight = 0;
        unsigned n_unpolled = 0;
        unsigned n_hw = 0;         // posted and empty
        unsigned rx_size = 0;      // receive buffers posted from now on: their size
        unsigned rx_resize_to = 0; // the peer's ChRcvBuf, answered at this size
        unsigned n_held = 0;       // buffers holding payload not read yet
        unsigned rx_live = 0;      // receive buffers it has (rx_bufs, more if added)
        bool rx_trim = false;      // added ones go back as they come free
        unsigned leaked = 0;       // leak_every
        // zero copy, source: a write() in progress up to zw_end; after a
        // SendSM (or ETOOBIG, or with less than zcopy_thresh left) the rest
        // of it goes by bcopy, up to bcopy_end; with bcopy_budget set only
        // that much (short of credits), then zero copy again
        Reg src;
        std::vector<Peer> padvs; // the peer's SinkAvails, as they came (the last few)
        std::size_t zw_end = 0;
        std::size_t bcopy_end = 0;
        std::size_t bcopy_budget = 0;
        unsigned wr_unreported = 0; // RDMA-written, RdmaWrCompl not posted
        unsigned acks_owed = 0;     // SinkAvailCancels not answered yet
        ZcPhase zw_phase = ZcPhase::kFlush;
        bool zw_active = false;
        bool zw_completed = false; // kWrite: the RDMA Write completed
        bool zw_cancelled = false; // kSrc: interrupted, SrcAvailCancel
        bool zw_sm = false;        // kSrc: a SendSM about it arrived
        bool zw_done = false;      // kSrc: DONE seen, key invalidated
        // zero copy, sink
        Reg sink;
        Peer offer; // the peer's SrcAvail
        unsigned long long rd_vaddr = 0;
        std::size_t rx_stream = 0;       // stream bytes received, every path
        std::size_t adv_miss = kUnknown; // rx_stream when an advertisement ended unused
        unsigned rd_rkey = 0;
        unsigned rd_len = 0;
        unsigned rd_unreported = 0; // RDMA-read, RdmaRdCompl not posted
        unsigned sms_owed = 0;      // SrcAvailCancels not answered yet
        // Our SinkAvailCancels whose SinkCancelAck may still come (the
        // peer got them before its DisConn, or has not got them yet).
        unsigned acks_awaited = 0;
        RdState rd = RdState::kIdle;
        bool adv_cancelled = false;
        bool adv_done = false;  // DONE seen, key invalidated
        bool adv_acked = false; // its SinkCancelAck came
        bool reader_started = false;
        bool reader_waiting = false; // as last told to the core
        bool shut = false;
        bool ack_timer = false; // delayed-ack timer armed (sdp_arm_ack_timer)
        bool corked = false;
        bool disconn_posted = false;
        bool disconn_rcvd = false;
        bool eof = false;
        // The socket's TCP state, moved by the core's close table at the
        // points sdp.ko calls sdp_close_event().
        unsigned tcp_state = SDP_TCP_ESTABLISHED;
        bool shut_after_peer = false; // shut down after the peer's DisConn came
    };

    enum class Ev : unsigned char {
        kWrite,
        kRead,
        kArrive,
        kAck,
        kPoll,
        kCork,
        kUncork,
        kShutdown,
        kAckTimer,
        kZcWrite, // a writer blocked in a zero-copy write() goes on
        kSignal,  // ... or a zero-copy writer or reader is interrupted
        kAdvWake, // the reader's SinkAvail is DONE
        kGrace,   // the grace timer gives up an offer nobody reads
        kRdDone,  // an RDMA Read completes
        kPost,    // not an event: traced when a SEND is posted
        kRdma,    // not an event: traced when an RDMA Write is posted
        kCount
    };
    struct Trace {
        std::size_t step;
        Ev ev;
        unsigned char side;
        unsigned arg;
        unsigned arg2;
        unsigned credits; // the side's core credits after the event
        unsigned posted;  // the side's posted_rx after the event
    };

    // An enabled event and its weight (sim_scheduler.h).
    struct Choice {
        Ev ev;
        int side;
        unsigned weight;
    };
    using Choices = std::array<Choice, 2 * static_cast<std::size_t>(Ev::kCount)>;

    // Every registration ever made, by key (from kFirstKey): owner, range.
    struct KeyInfo {
        unsigned long long vaddr;
        unsigned len;
        int owner;
    };

    // An echo server's limit until the peer's EOF tells it.
    static constexpr std::size_t kUnknown = static_cast<std::size_t>(-1);
    // The control reserve: data, SrcAvail and SinkAvail never take these
    // credits (by the core's count nor by the real one).
    static constexpr long kReserve = 2;
    // The glue's control-ring buffers (SDP_CTL_BUF_SIZE).
    static constexpr std::size_t kCtlBufSize = 64;

    // Shared by every part.
    Side& me(int s) { return sides_[s]; }
    Side& peer(int s) { return sides_[1 - s]; }

    // ---- sim_wire.h ------------------------------------------------------------
    // the wire
    std::deque<WireMsg>& wire(int s);
    // message sizes and decoding
    static unsigned hdr_size(unsigned mid);
    static unsigned be32(const Bytes& m, std::size_t at);
    static Peer decode_avail(const Bytes& m);
    // SENDs: posted, arriving, acknowledged (send completions in posting order)
    void send(int s, Ring ring, unsigned mid, Bytes msg, std::size_t payload, unsigned flags);
    void arrive(int s);
    void ack(int s);
    std::size_t acked_sends(const Side& d) const;
    // RDMA Writes and RDMA Reads
    void rdma_write(int s, unsigned want, const sdp_core_zc& zc);
    void rdma_arrive(int s, const WireMsg& m);
    void rd_start(int s, unsigned n);
    void rd_done(int s);

    // ---- sim_host.h ------------------------------------------------------------
    // setup, and the glue's ring counts
    void connect();
    unsigned short posted_rx(int s) const;
    std::size_t tx_queued(const Side& d) const;
    std::size_t write_room(const Side& d) const;
    static const Bytes& source(const Side& d);
    static std::size_t pending(const Side& d);
    // application
    void app_write(int s);
    void bcopy_write(int s, std::size_t n, bool urgent, bool more);
    void app_read(int s);
    // zero copy: what the glue and enabled() ask
    static sdp_core_zc_status zc_status(const Side& d);
    static bool zcopy_writer(const Side& d);
    static unsigned long long src_base(int s);
    static bool reader_active(const Side& d);
    void sync_reader(int s);
    bool may_post_avail(int s) const;
    bool sink_avail_ok(int s, unsigned len) const;
    unsigned chunk(const Side& d) const;
    [[gnu::noinline]] bool zc_writer_may_go(int s) const;
    [[gnu::noinline]] static bool zc_readable(const Side& d);
    [[gnu::noinline]] static bool zc_adv_done(const Side& d);
    [[gnu::noinline]] bool zc_interruptible(const Side& d) const;
    bool src_interruptible(const Side& d) const;
    bool adv_interruptible(const Side& d) const;
    bool adv_signalable(const Side& d) const;
    [[gnu::noinline]] static bool adv_trimmable(const Side& d);
    [[gnu::noinline]] bool may_advertise(int s) const;
    // zero copy, source
    void zc_write_start(int s, std::size_t n);
    void zc_write_next(int s);
    void zc_write_on(int s);
    void zc_to_bcopy(int s, std::size_t budget);
    std::size_t budget_bytes(const Side& d, std::size_t limit) const;
    void zc_write_end(int s);
    void zc_write_step(int s);
    bool too_big_for_zcopy(int s, unsigned len);
    void post_src_avail(int s, unsigned len);
    void src_done(int s);
    void signal(int s);
    // zero copy, sink
    void grace_ends(int s);
    enum class GiveUp { kPeek, kSmallReads, kGrace };
    void give_up_offer(int s, GiveUp why);
    void advertise(int s);
    void adv_cancel(int s);
    void adv_wake(int s);
    // receive ring
    void release_rx(int s);
    static std::size_t rx_bufs_in_use(const Side& d);
    static std::size_t rx_slots(const Side& d);
    static unsigned rx_cap(const Side& d);
    sdp_core_rx_ring rx_ring(int s) const;
    bool rx_give_back(int s);
    void post_recvs(int s);
    // completions
    void poll_cq(int s);
    void rx_complete(int s);
    static bool coalesce(Side& d, std::size_t at, const sdp_core_rx& rx);
    void tx_complete(int s);
    void close_event(int s, unsigned event);
    // sdp_push()
    void pump(int s, unsigned extra_opts);
    void post(int s, Ring ring, unsigned mid, Bytes msg, const Bytes& payload, unsigned flags);

    // ---- sim_checker.h ---------------------------------------------------------
    // failures and the trace of the last events
    static const char* ev_name(Ev e);
    void trace(Ev ev, int s, std::size_t arg, unsigned arg2 = 0);
    void fail(const std::string& what);
    // credits and what may be posted
    long true_credits(int s) const;
    bool avail_credits_ok(int s, const char* what);
    static bool after_disconn_ok(unsigned mid, std::size_t payload);
    bool may_post(int s, unsigned mid, std::size_t payload);
    // stream bytes
    static std::size_t exposed(const Side& p);
    void check_got(int s, std::size_t from);
    // zero copy
    std::string unusable(int s, unsigned want, const sdp_core_zc& zc) const;
    static std::string bad_read(const Side& p, unsigned rkey, unsigned long long vaddr, unsigned n);
    void check_rdma_read(int s, unsigned rkey, unsigned long long vaddr, unsigned n);
    static std::string unreadable(const Side& d, const sdp_core_zc_status& st);
    static std::string bad_write(const Side& p, const WireMsg& m);
    void observe_zc(int s);
    unsigned new_key(int s, unsigned long long vaddr, unsigned len);
    bool registered(int s, const Peer& a) const;
    static const Piece* find_piece(const Reg& r, unsigned rkey);
    static Piece* find_piece(Reg& r, unsigned rkey);
    void zc_received(int s, const Bytes& msg, const sdp_core_rx& rx);
    static std::string not_owed(const Side& d, unsigned mid);
    void answer_resize(int s);
    void resize_received(int s, const sdp_core_rx& rx);
    bool zc_control_owed(int s, unsigned mid);
    void zc_control_sent(int s, unsigned mid, const Bytes& msg);
    // invariants, the end of a run, the state dump
    void check_invariants();
    bool finished() const;
    void final_checks();
    std::string dump() const;

    // ---- sim_scheduler.h -------------------------------------------------------
    // one step
    std::size_t progress() const;
    bool enabled(Ev ev, int s) const;
    unsigned weight(Ev ev) const;
    unsigned collect(bool zero_weight, Choices* choices, unsigned* total) const;
    bool step();

    Rng rng_;
    std::uint64_t seed_;
    Weights w_;
    std::array<Side, 2> sides_;
    std::array<std::deque<WireMsg>, 2> wire_;    // [s]: from side s to the other
    std::array<std::size_t, 2> sends_on_wire_{}; // SENDs in wire_[s] (not RDMA Writes)
    static constexpr unsigned long long kSinkBase = 0x700000000000ull;
    static constexpr unsigned kFirstKey = 0x100;
    std::vector<KeyInfo> keys_;
    std::size_t steps_ = 0;
    // Transport events since an application event was last possible.
    static constexpr std::size_t kMaxIdleSteps = 1000;
    std::size_t idle_steps_ = 0;
    bool zc_ = false; // zero copy in play
    bool failed_ = false;
    std::string error_;
    std::array<Trace, 80> trace_{};
    std::size_t trace_pos_ = 0;
};

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_WORLD_DECL_H
