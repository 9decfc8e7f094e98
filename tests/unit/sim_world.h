// SPDX-License-Identifier: GPL-2.0
//
// A deterministic userspace model of two SDP endpoints connected by an RC
// queue pair, each driving its own protocol engine (sdp_core.h) the way the
// kernel glue does (kernel/sdp_tx.c, sdp_rx.c, sdp_qp.c).  Used by
// sim_test.cpp.
//
// Per side, as in the glue:
//   receive ring  R buffers of B bytes (sdp_post_recvs): every free buffer
//                 is posted; messages land in posting order.  A buffer whose
//                 message leaves nothing to read (credit update, DisConn)
//                 goes back to the free list at once (sdp_rx_complete), even
//                 behind unread data; a data buffer is freed once the reader
//                 has consumed it, in stream order (sdp_rx_release_read).  A
//                 data message of at most B/8 payload bytes joins the newest
//                 unread data buffer if it fits there (sdp_rx_coalesce), and
//                 its own buffer is free at once too.  The model keeps its
//                 buffers in a ring of slots; SideConfig::rx_slots_per_buf
//                 can bound the window between the oldest unread data and
//                 the newest posted buffer to replay the earlier glue (one
//                 slot per buffer: freed only in ring order; four: the slot
//                 window), which deadlocks an echo server.
//                 Free buffers are re-posted after every batch of
//                 completions and after every read.
//   send ring     T buffers.  write() fills segments in place: the tail
//                 segment while it is not posted, not urgent and not full,
//                 else a fresh buffer if the ring has one (else the write is
//                 short).  A buffer comes back only when its SEND completes.
//   control ring  C buffers for DisConn and credit updates: data waiting for
//                 credits never blocks them.
//   pump          sdp_push(): post queued segments while the core says
//                 SDP_TX_POST, then at most one control message if one is due
//                 and the control ring has room.  Run after a write fills a
//                 segment and at its end (with CORK for MSG_MORE), after a
//                 read, after every batch of completions, and with PUSH on
//                 uncork and shutdown.
//
// The wire: a SEND goes into the peer's next posted receive buffer, in order,
// reliably.  Its arrival, the peer's polling of the receive completion, the
// ack that generates the sender's send completion, and the sender's polling
// of that completion are separate events, so completions and deliveries
// interleave on both sides in every order the hardware allows.  Send
// completions come in posting order (one send queue for both rings).
//
// Zero copy (SideConfig::zcopy_thresh), as the glue uses it (kernel/
// sdp_tx.c sdp_sendmsg, sdp_zcopy.c):
//   source        a write() of at least zcopy_thresh bytes blocks in
//                 chunks of at most zcopy_chunk (sdp_zc_send): queued
//                 segments are pushed first (the chunk waits while any is
//                 queued).  Then, with no credit for a SrcAvail (core
//                 credits at the reserve) or no room on the control ring,
//                 ONE chunk goes by bcopy instead (normal segments, the
//                 bcopy path's credit rules; the glue's bcopy_budget: whole
//                 segment fills until zcopy_chunk bytes are copied) and zero
//                 copy is tried again for the next.  Else a usable SinkAvail
//                 of the peer (sdp_core_sink_take) is filled by an RDMA
//                 Write, whose RdmaWrCompl control_due() returns, or a
//                 SrcAvail goes and the writer sleeps until the core says
//                 SDP_ZC_DONE (src_acked bytes delivered; after a SendSM the
//                 rest of the write goes by bcopy).  A SrcAvail the core
//                 refuses with ETOOBIG (receive buffers too small for zero-
//                 copy messages) turns the rest of the write to bcopy, and
//                 so does a rest shorter than zcopy_thresh.  A signal may
//                 interrupt the sleep: sdp_core_src_cancel(), wait for DONE,
//                 and the write returns what was delivered (the application
//                 writes the rest later: the stream is the same).
//   sink          a reader with nothing unread reads the peer's SrcAvail by
//                 RDMA Read (rd_start, a later completion event, rd_done),
//                 or abandons it (MSG_PEEK: SendSM, the bytes then come by
//                 bcopy).  An offer nobody reads (the reader is not in the
//                 middle of reading it) may be given up by the grace timer
//                 (net.sdp.zcopy_sink_wait_ms: rsa_abandon, SendSM;
//                 Weights::grace).  A reader about to block for at least
//                 zcopy_thresh bytes may advertise its buffer (SinkAvail)
//                 and sleep until the advertisement is DONE (written into,
//                 or ended by the peer's stream bytes or DisConn), or cancel
//                 it on a signal.  set_reader_waiting() tells the core
//                 whether the reader is in recv() (the send/send deadlock
//                 rule); write_all_before_read keeps it out until its own
//                 writes are done or blocked on anything but its SrcAvail.
//   wire          SrcAvail and SinkAvail spend a credit like data and go on
//                 the control ring; an RDMA Write is ordered with the SENDs
//                 of its side (its bytes land in the advertised buffer when
//                 it arrives, before the RdmaWrCompl behind it), consumes no
//                 receive buffer and completes in send-queue order.
// The model keeps its own account of every registration (key, range, live
// from registration until the owner sees DONE) and of every offer and
// advertisement as decoded from the wire, and checks each RDMA access, each
// zero-copy message and each answer against it (see the zero-copy section
// below).
//
// Each step picks one enabled event at random (seeded PRNG).  Every property
// the credit scheme promises is checked on the fly; the first violation stops
// the run with a state dump and the last events (Result::error).
#ifndef SDP_TESTS_UNIT_SIM_WORLD_H
#define SDP_TESTS_UNIT_SIM_WORLD_H

#include "sdp_core.h"
#include "sdp_wire.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <sstream>
#include <string>
#include <vector>

namespace sdpsim {

using Bytes = std::vector<unsigned char>;

// SplitMix64: tiny, fast and the same sequence on every platform (the
// standard distributions are not).
class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next()
    {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, n); n > 0.
    std::uint64_t below(std::uint64_t n) { return next() % n; }
    // Uniform in [lo, hi].
    std::uint64_t range(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); }
    bool per_mille(unsigned p) { return below(1000) < p; }

  private:
    std::uint64_t state_;
};

constexpr unsigned kNoSlotLimit = 0;

struct SideConfig {
    unsigned rx_bufs = 8;            // R
    unsigned rx_buf_size = 256;      // B, BSDH included
    unsigned tx_bufs = 8;            // T: queued and in-flight segments
    unsigned tx_buf_size = 256;      // BSDH included
    unsigned ctl_bufs = 8;           // C (SDP_CTL_RING)
    bool nodelay = false;            // TCP_NODELAY
    bool cork = false;               // the application sets and clears TCP_CORK at random
    std::size_t bytes = 4096;        // the application writes this much, then shuts down
    unsigned min_write = 1;          // bytes per write() ...
    unsigned max_write = 600;        // ... uniformly in [min_write, max_write]
    unsigned max_read = 600;         // bytes per read(), uniformly in [1, max_read]
    unsigned more_per_mille = 0;     // write() with MSG_MORE
    unsigned urgent_per_mille = 0;   // write() with MSG_OOB
    unsigned shutdown_per_mille = 0; // a write() is the last one (shutdown early)
    unsigned pause_per_mille = 0;    // after a read() the reader sleeps ...
    unsigned pause_steps = 500;      // ... up to this many steps
    // Receive posting window in slots per buffer.  kNoSlotLimit is the glue
    // (kernel/sdp_rx.c: a FIFO of posted buffers and one of unread data
    // buffers, every free buffer re-posted at once, whatever lies unread);
    // 1 is the first glue (buffers freed in ring order only) and 2..4 a
    // later one that posted through a window of slots; both deadlock an
    // echo server (SimChecks) and are kept to show the checker catches it.
    unsigned rx_slots_per_buf = kNoSlotLimit;
    bool rx_coalesce = true; // small messages join the previous unread buffer (see above)
    // Echo server: reads only when everything it read so far is written
    // back (its reader waits for its own writer, as a single-threaded
    // non-blocking server does), then writes all of it back (short writes
    // when the send ring is full) and shuts down after the peer's EOF once
    // everything is echoed.  Its stream is what it read: `bytes`,
    // `max_write`, `shutdown_per_mille` and `urgent_per_mille` do not apply.
    bool echo = false;
    // Request/response style: TCP_CORK set from the start, cleared and the
    // socket shut down only after reading the peer's whole stream (EOF).
    // Corked data then stays queued while the peer sends, so nothing but a
    // credit update can release the peer when it runs out of credits.
    bool cork_until_eof = false;
    // Deliberately broken glue, to show the checks catch it: advertise this
    // many receive buffers more than are posted; never re-post one in this
    // many freed buffers (0: off).
    unsigned overstate_posted = 0;
    unsigned leak_every = 0;
    // ... and a zero-copy writer that neither pushes nor waits for the
    // segments queued ahead of its chunk.
    bool zcopy_skip_flush = false;
    // Zero copy (0: off): writes of at least this many bytes (a blocking
    // writer) go by SrcAvail or into the peer's SinkAvail, in chunks of at
    // most zcopy_chunk bytes.  The reader reads the peer's SrcAvails in any
    // case (the sink side needs no threshold).
    unsigned zcopy_thresh = 0;
    unsigned zcopy_chunk = 65536;
    // A reader about to block advertises its buffer (SinkAvail) for a read
    // of zcopy_thresh to max_read bytes.
    bool sink_avail = false;
    // ... also after its own shutdown(SHUT_WR), as the glue does (a
    // half-closed socket still reads).
    bool sink_avail_after_shut = true;
    // Weights::signal interrupts this side's reader asleep on its SinkAvail
    // too (else only its writer).
    bool reader_signals = true;
    unsigned peek_per_mille = 0; // a read meeting a SrcAvail is MSG_PEEK: SendSM
    // The reader starts only once the writer is done, or blocked on anything
    // but its own SrcAvail (the send/send deadlock scenario).
    bool write_all_before_read = false;
};

// Relative frequency of each kind of event (0: only when nothing else can
// happen).
struct Weights {
    unsigned write = 10;
    unsigned read = 10;
    unsigned arrive = 10;   // a SEND lands in the peer's buffer
    unsigned ack = 10;      // its send completion reaches the sender's CQ
    unsigned poll = 10;     // a side handles a batch of completions
    unsigned cork = 2;      // TCP_CORK set / cleared
    unsigned shutdown = 5;  // once everything is written
    unsigned ack_timer = 3; // the delayed-ack timer of a side fires (when armed)
    // A writer or reader asleep in a zero-copy transfer is interrupted (0:
    // never, not "when nothing else can happen": that would hide deadlocks).
    unsigned signal = 0;
    // The sink's grace timer gives up an offer nobody is reading (0: never,
    // for the same reason).
    unsigned grace = 0;
};

struct SideStats {
    std::size_t writes = 0;
    std::size_t reads = 0;
    std::size_t sends = 0;         // every SEND posted
    std::size_t data_sends = 0;    // Data with payload
    std::size_t updates = 0;       // zero-payload Data (credit updates)
    std::size_t after_disconn = 0; // SENDs posted after our DisConn
    std::size_t urgent_sent = 0;
    std::size_t coalesced = 0;     // messages received into the previous unread buffer
    std::size_t stuck_rx_bufs = 0; // most freed slots waiting behind unread data
    // zero copy
    std::size_t src_avails = 0;   // SrcAvails posted
    std::size_t sink_avails = 0;  // SinkAvails posted
    std::size_t rdma_reads = 0;   // RDMA Reads completed by this side's reader
    std::size_t read_bytes = 0;   // ... and their bytes
    std::size_t rdma_writes = 0;  // RDMA Writes posted by this side's writer
    std::size_t write_bytes = 0;  // ... and their bytes
    std::size_t send_sms = 0;     // SendSMs posted
    std::size_t deadlock_sms = 0; // SrcAvails refused by the send/send deadlock rule
    std::size_t peeks = 0;        // SrcAvails abandoned for MSG_PEEK
    std::size_t src_cancels = 0;  // SrcAvailCancels posted
    std::size_t sink_cancels = 0; // SinkAvailCancels posted
    std::size_t adv_unused = 0;   // advertisements that ended with nothing written
    std::size_t bcopy_chunks = 0; // chunks of zero-copy writes sent by bcopy for want of credits
    std::size_t chunk_bytes = 0;  // ... and their bytes
    std::size_t too_big = 0;      // zero-copy writes turned to bcopy by ETOOBIG
    std::size_t grace_sms = 0;    // offers given up by the grace timer
    std::size_t grace_agains = 0; // grace periods restarted: the offer was being read
    std::size_t last_credit = 0;  // zero-copy control messages sent with the last credit
    std::size_t late_sinks = 0;   // SinkAvails posted after our own DisConn
    std::size_t overtaken = 0;    // cancelled advertisements ended by stream bytes or DisConn
    std::size_t stale_acks = 0;   // SinkCancelAcks that came after that (answering nothing)
};

struct Result {
    bool ok = false;
    std::string error; // first failure and a state dump
    std::size_t steps = 0;
    std::array<SideStats, 2> stats{};
};

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
    Result run(std::size_t stall_steps = 20000, std::size_t max_steps = 20000000)
    {
        Result r;
        connect();
        const std::size_t stall_limit =
            stall_steps + std::max(sides_[0].cfg.pause_steps, sides_[1].cfg.pause_steps);
        std::size_t last_progress = progress();
        std::size_t last_progress_step = 0;
        while (!failed_) {
            if (progress() != last_progress) {
                last_progress = progress();
                last_progress_step = steps_;
            }
            if (steps_ - last_progress_step > stall_limit) {
                fail("no progress for " + std::to_string(stall_limit) +
                     " steps (livelock or starvation)");
                break;
            }
            if (steps_ >= max_steps) {
                fail("not finished after " + std::to_string(max_steps) + " steps");
                break;
            }
            if (!step()) {
                if (!finished())
                    fail("deadlock: no event can happen and the transfer is not complete");
                break;
            }
            check_invariants();
        }
        if (!failed_)
            final_checks();
        r.ok = !failed_;
        r.error = error_;
        r.steps = steps_;
        r.stats = {sides_[0].stats, sides_[1].stats};
        return r;
    }

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
    struct Reg {
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
        Bytes msg;           // the message, once it arrived
        std::size_t off = 0; // kHeld: payload [off, end) not read yet
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
        unsigned n_hw = 0;   // posted and empty
        unsigned n_held = 0; // buffers holding payload not read yet
        unsigned leaked = 0; // leak_every
        // zero copy, source: a write() in progress up to zw_end; after a
        // SendSM (or ETOOBIG, or with less than zcopy_thresh left) the rest
        // of it goes by bcopy, up to bcopy_end; with bcopy_budget set only
        // that much (short of credits), then zero copy again
        Reg src;
        Peer padv; // the peer's SinkAvail
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

    static const char* ev_name(Ev e)
    {
        static const char* const kNames[] = {"write",     "read",     "arrive", "ack",
                                             "poll",      "cork",     "uncork", "shutdown",
                                             "ack-timer", "zc-write", "signal", "adv-wake",
                                             "grace",     "rd-done",  "post",   "rdma-write"};
        return kNames[static_cast<unsigned>(e)];
    }

    void trace(Ev ev, int s, std::size_t arg, unsigned arg2 = 0)
    {
        trace_[trace_pos_++ % trace_.size()] = {steps_,
                                                ev,
                                                static_cast<unsigned char>(s),
                                                static_cast<unsigned>(arg),
                                                arg2,
                                                sdp_core_tx_credits(&sides_[s].conn),
                                                posted_rx(s)};
    }

    void fail(const std::string& what)
    {
        if (failed_)
            return;
        failed_ = true;
        error_ = "seed " + std::to_string(seed_) + ", step " + std::to_string(steps_) + ": " +
                 what + "\n" + dump();
    }

    // Grows with every step of the transfer the applications can see.
    std::size_t progress() const
    {
        std::size_t p = 0;
        for (const Side& d : sides_) {
            p += d.written + d.data_posted + d.got.size() + d.rx_stream;
            for (bool flag : {d.disconn_posted, d.disconn_rcvd, d.eof, d.shut})
                p += flag ? 1 : 0;
        }
        return p;
    }

    Side& me(int s) { return sides_[s]; }
    Side& peer(int s) { return sides_[1 - s]; }

    std::deque<WireMsg>& wire(int s) { return wire_[s]; }

    // What the core must never exceed: the peer's empty posted buffers minus
    // our messages already on their way to them.
    long true_credits(int s) const
    {
        return static_cast<long>(sides_[1 - s].n_hw) - static_cast<long>(sends_on_wire_[s]);
    }

    // The glue's posted_rx: posted and not completed (sdp_rx_posted).
    unsigned short posted_rx(int s) const
    {
        return static_cast<unsigned short>(sides_[s].n_unpolled + sides_[s].n_hw +
                                           sides_[s].cfg.overstate_posted);
    }

    std::size_t tx_queued(const Side& d) const { return d.tx.size() - d.tx_posted; }

    // An echo server's limit until the peer's EOF tells it.
    static constexpr std::size_t kUnknown = static_cast<std::size_t>(-1);

    // What a side writes: its own stream, or an echo server's input.
    static const Bytes& source(const Side& d) { return d.cfg.echo ? d.got : d.stream; }

    // Bytes the application still has to hand to write() now.
    static std::size_t pending(const Side& d)
    {
        return (d.cfg.echo ? std::min(d.limit, d.got.size()) : d.limit) - d.written;
    }

    void connect()
    {
        for (int s = 0; s < 2; s++) {
            Side& d = me(s);
            sdp_core_conn_init(&d.conn, d.cfg.rx_buf_size, d.cfg.tx_buf_size);
            post_recvs(s);
            d.corked = d.cfg.cork_until_eof;
            if (d.cfg.echo) {
                d.limit = kUnknown; // what the peer writes, known at EOF
                continue;
            }
            d.limit = d.cfg.bytes;
            d.stream.resize(d.cfg.bytes);
            for (auto& byte : d.stream)
                byte = static_cast<unsigned char>(rng_.next());
        }
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        if (sdp_core_build_hello(&me(0).conn, req, sizeof(req), posted_rx(0), 5001, 0) <= 0 ||
            sdp_core_on_hello(&me(1).conn, req, sizeof(req)) != 0 ||
            sdp_core_build_hello_ack(&me(1).conn, rep, sizeof(rep), posted_rx(1)) <= 0 ||
            sdp_core_on_hello_ack(&me(0).conn, rep, sizeof(rep)) != 0) {
            fail("Hello exchange failed");
            return;
        }
        for (int s = 0; s < 2; s++) {
            const unsigned want =
                std::min(peer(s).cfg.rx_buf_size, me(s).cfg.tx_buf_size) - SDP_BSDH_SIZE;
            if (sdp_core_seg_max(&me(s).conn) != want)
                fail(me(s).name + ": seg_max " + std::to_string(sdp_core_seg_max(&me(s).conn)) +
                     ", want " + std::to_string(want));
        }
    }

    // ---- one step ----------------------------------------------------------

    struct Choice {
        Ev ev;
        int side;
        unsigned weight;
    };
    using Choices = std::array<Choice, 2 * static_cast<std::size_t>(Ev::kCount)>;

    // Bytes a write() could take now without blocking.
    std::size_t write_room(const Side& d) const
    {
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
        std::size_t room = (d.cfg.tx_bufs - d.tx.size()) * seg_max;
        if (tx_queued(d) > 0 && !d.tx.back().urgent)
            room += seg_max - d.tx.back().data.size();
        return room;
    }

    std::size_t acked_sends(const Side& d) const
    {
        std::size_t n = 0;
        while (n < d.sends.size() && d.sends[n].state == SendState::kAcked)
            n++;
        return n;
    }

    bool enabled(Ev ev, int s) const
    {
        const Side& d = sides_[s];
        switch (ev) {
        case Ev::kWrite:
            // A blocking writer with a big write starts it whatever the
            // ring holds (zero copy); the parts of one that go by bcopy go
            // when there is room.
            return !d.shut && !d.zw_active && pending(d) > 0 &&
                   (write_room(d) > 0 ||
                    (zcopy_writer(d) && d.bcopy_end <= d.written &&
                     pending(d) >= d.cfg.zcopy_thresh && d.cfg.max_write >= d.cfg.zcopy_thresh));
        case Ev::kShutdown:
            return !d.shut && !d.zw_active && d.written == d.limit &&
                   (!d.cfg.cork_until_eof || d.eof);
        case Ev::kRead: {
            // An echo server reads only with nothing left to write back.
            if (d.rd != RdState::kIdle || !reader_active(d))
                return false;
            return d.unread > 0 || (d.disconn_rcvd && !d.eof) ||
                   (d.offer.present && zc_readable(d)) || may_advertise(s);
        }
        case Ev::kZcWrite:
            return d.zw_active && zc_writer_may_go(s);
        case Ev::kSignal:
            return w_.signal > 0 && (d.zw_active || d.rd == RdState::kAdv) && zc_interruptible(d);
        case Ev::kAdvWake:
            return d.rd == RdState::kAdv && zc_adv_done(d);
        case Ev::kGrace:
            return w_.grace > 0 && d.rd == RdState::kIdle && zc_readable(d);
        case Ev::kRdDone:
            return d.rd == RdState::kReading;
        case Ev::kArrive:
            return !wire_[s].empty();
        case Ev::kAck:
            return std::any_of(d.sends.begin(), d.sends.end(),
                               [](const Sent& x) { return x.state == SendState::kArrived; });
        case Ev::kPoll:
            return d.n_unpolled > 0 || acked_sends(d) > 0;
        case Ev::kAckTimer:
            return d.ack_timer;
        // Only between writes: an application blocked in write() (the ring
        // full of full segments, which cork does not hold) cannot toggle.
        case Ev::kCork:
            return d.cfg.cork && !d.corked && d.bcopy_end <= d.written && enabled(Ev::kWrite, s);
        case Ev::kUncork:
            return d.corked && d.bcopy_end <= d.written &&
                   (d.cfg.cork_until_eof ? d.eof : enabled(Ev::kWrite, s) || d.written == d.limit);
        default:
            return false;
        }
    }

    unsigned weight(Ev ev) const
    {
        switch (ev) {
        case Ev::kWrite:
            return w_.write;
        case Ev::kRead:
            return w_.read;
        case Ev::kArrive:
            return w_.arrive;
        case Ev::kAck:
            return w_.ack;
        case Ev::kPoll:
            return w_.poll;
        case Ev::kCork:
        case Ev::kUncork:
            return w_.cork;
        case Ev::kShutdown:
            return w_.shutdown;
        case Ev::kAckTimer:
            return w_.ack_timer;
        case Ev::kZcWrite:
            return std::max(w_.write, 1u);
        case Ev::kAdvWake:
            return std::max(w_.read, 1u);
        case Ev::kSignal:
            return w_.signal;
        case Ev::kGrace:
            return w_.grace;
        case Ev::kRdDone:
            return std::max(w_.arrive, 1u);
        default:
            return 0;
        }
    }

    // The enabled events with a weight, or (zero_weight) those without: an
    // event with weight 0 is taken only when nothing else can happen.  The
    // model disfavours it, it does not forbid it.
    unsigned collect(bool zero_weight, Choices* choices, unsigned* total) const
    {
        unsigned n = 0;
        *total = 0;
        for (int s = 0; s < 2; s++) {
            for (unsigned e = 0; e < static_cast<unsigned>(Ev::kPost); e++) {
                const Ev ev = static_cast<Ev>(e);
                if (!enabled(ev, s) || (weight(ev) == 0) != zero_weight)
                    continue;
                const unsigned wt = std::max(weight(ev), 1u);
                (*choices)[n++] = {ev, s, wt};
                *total += wt;
            }
        }
        return n;
    }

    bool step()
    {
        if (zc_)
            for (int d = 0; d < 2; d++)
                sync_reader(d);
        Choices choices{};
        unsigned total = 0;
        unsigned n = collect(false, &choices, &total);
        if (n == 0) {
            // Nothing to do but a reader is asleep: let time pass.
            for (Side& d : sides_)
                d.paused = 0;
            n = collect(false, &choices, &total);
        }
        if (n == 0)
            n = collect(true, &choices, &total);
        if (n == 0)
            return false;
        steps_++;
        for (Side& d : sides_)
            if (d.paused > 0)
                d.paused--;
        std::uint64_t pick = rng_.below(total);
        unsigned i = 0;
        while (pick >= choices[i].weight) {
            pick -= choices[i].weight;
            i++;
        }
        const int s = choices[i].side;
        const Ev ev = choices[i].ev;
        // With no application event possible (a zero-weight one happens only
        // when nothing else can) the connection must go quiet: the wire may
        // carry what is in flight and its consequences, not an endless
        // exchange of control messages.
        bool app_can_act = false;
        for (int d = 0; d < 2; d++) {
            for (Ev app : {Ev::kWrite, Ev::kRead, Ev::kCork, Ev::kUncork, Ev::kShutdown,
                           Ev::kZcWrite, Ev::kSignal, Ev::kAdvWake})
                app_can_act = app_can_act || (enabled(app, d) && weight(app) > 0);
        }
        const bool transport = ev == Ev::kArrive || ev == Ev::kAck || ev == Ev::kPoll ||
                               ev == Ev::kAckTimer || ev == Ev::kRdDone || ev == Ev::kGrace;
        if (app_can_act)
            idle_steps_ = 0;
        else if (transport)
            idle_steps_++;
        if (idle_steps_ > kMaxIdleSteps) {
            fail("livelock: the applications are idle and the wire does not go quiet");
            return false;
        }
        switch (ev) {
        case Ev::kWrite:
            app_write(s);
            break;
        case Ev::kRead:
            app_read(s);
            break;
        case Ev::kArrive:
            arrive(s);
            break;
        case Ev::kAck:
            ack(s);
            break;
        case Ev::kPoll:
            poll_cq(s);
            break;
        case Ev::kAckTimer: // sdp_ack_work()
            trace(Ev::kAckTimer, s, 0);
            me(s).ack_timer = false;
            sdp_core_ack_request(&me(s).conn);
            pump(s, 0);
            break;
        case Ev::kCork:
            trace(Ev::kCork, s, 0);
            me(s).corked = true;
            break;
        case Ev::kUncork: // setsockopt(TCP_CORK, 0)
            trace(Ev::kUncork, s, tx_queued(me(s)));
            me(s).corked = false;
            pump(s, SDP_TXO_PUSH);
            break;
        case Ev::kShutdown: // shutdown(SHUT_WR) or close()
            trace(Ev::kShutdown, s, tx_queued(me(s)));
            me(s).shut = true;
            me(s).shut_after_peer = me(s).disconn_rcvd;
            sdp_core_shutdown_send(&me(s).conn);
            close_event(s, SDP_CLOSE_SHUTDOWN_SEND);
            pump(s, SDP_TXO_PUSH);
            break;
        case Ev::kZcWrite:
            zc_write_step(s);
            break;
        case Ev::kSignal:
            signal(s);
            break;
        case Ev::kAdvWake:
            adv_wake(s);
            break;
        case Ev::kGrace: // sdp_zc_grace_work()
            grace_ends(s);
            break;
        case Ev::kRdDone:
            rd_done(s);
            break;
        default:
            break;
        }
        return true;
    }

    // ---- application -----------------------------------------------------------

    // sdp_sendmsg(): fill segments in place, push when one is full, push at
    // the end (CORK for MSG_MORE).  A write of zcopy_thresh bytes or more
    // goes by zero copy (zc_write_start); the parts of one that go by bcopy
    // (a chunk short of credits, the rest after a SendSM) go on here.
    void app_write(int s)
    {
        Side& d = me(s);
        if (d.bcopy_end > d.written) {
            const bool chunk_only = d.bcopy_budget > 0;
            std::size_t n = std::min(d.bcopy_end - d.written, write_room(d));
            if (chunk_only)
                n = budget_bytes(d, n);
            trace(Ev::kWrite, s, n, chunk_only ? 4 : 3);
            bcopy_write(s, n, false, false);
            d.bcopy_budget -= std::min(d.bcopy_budget, n);
            d.stats.chunk_bytes += chunk_only ? n : 0;
            if (d.bcopy_end <= d.written) {
                d.bcopy_budget = 0;
                d.stats.writes++; // the write() returns
            } else if (chunk_only && d.bcopy_budget == 0 &&
                       d.zw_end - d.written >= d.cfg.zcopy_thresh) {
                zc_write_next(s); // zero copy again (else bcopy to the end)
            }
            return;
        }
        // An echo server writes back everything it has.
        std::size_t n = d.cfg.echo ? pending(d) : rng_.range(d.cfg.min_write, d.cfg.max_write);
        if (zcopy_writer(d) && write_room(d) == 0) // only a big write can start now
            n = rng_.range(d.cfg.zcopy_thresh, std::max(d.cfg.zcopy_thresh, d.cfg.max_write));
        n = std::min(n, pending(d));
        const bool zcopy = zcopy_writer(d) && n >= d.cfg.zcopy_thresh;
        if (!zcopy)
            n = std::min(n, write_room(d)); // a short write
        if (!d.cfg.echo && d.cfg.shutdown_per_mille > 0 && rng_.per_mille(d.cfg.shutdown_per_mille))
            d.limit = d.written + n; // the last write before an early shutdown
        if (zcopy) {
            zc_write_start(s, n);
            return;
        }
        const bool urgent =
            !d.cfg.echo && d.cfg.urgent_per_mille > 0 && rng_.per_mille(d.cfg.urgent_per_mille);
        const bool more = d.cfg.more_per_mille > 0 && rng_.per_mille(d.cfg.more_per_mille);
        trace(Ev::kWrite, s, n, urgent ? 1 : 0);
        bcopy_write(s, n, urgent, more);
        d.stats.writes++;
    }

    void bcopy_write(int s, std::size_t n, bool urgent, bool more)
    {
        Side& d = me(s);
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
        std::size_t off = d.written;
        const std::size_t end = d.written + n;
        while (off < end) {
            if (tx_queued(d) == 0 || d.tx.back().urgent || d.tx.back().data.size() >= seg_max)
                d.tx.emplace_back();
            Segment& seg = d.tx.back();
            const std::size_t take = std::min(end - off, seg_max - seg.data.size());
            const Bytes& src = source(d);
            seg.data.insert(seg.data.end(), src.begin() + static_cast<long>(off),
                            src.begin() + static_cast<long>(off + take));
            off += take;
            if (off == end && urgent) {
                seg.urgent = true;
                d.urgent_written.push_back(end - 1);
            }
            d.written = off;
            if (seg.data.size() >= seg_max)
                pump(s, 0);
        }
        pump(s, more ? SDP_TXO_CORK : 0);
    }

    // sdp_recvmsg(): read in order, free consumed buffers, then refill and
    // push.  EOF once the peer's DisConn is in and nothing is left to read.
    // With nothing unread: the peer's SrcAvail by RDMA Read (or MSG_PEEK
    // gives it up), else a SinkAvail for the reader's buffer.
    void app_read(int s)
    {
        Side& d = me(s);
        if (d.unread == 0 && zc_status(d).rsa_left == 0) {
            if (!d.disconn_rcvd) {
                advertise(s);
                return;
            }
            trace(Ev::kRead, s, 0);
            d.eof = true;
            if (d.cfg.echo)
                d.limit = d.got.size(); // echo the rest, then shut down
            if (d.got.size() != peer(s).limit || !peer(s).shut)
                fail(d.name + ": EOF after " + std::to_string(d.got.size()) +
                     " bytes, peer wrote " + std::to_string(peer(s).limit));
            return;
        }
        std::size_t n = rng_.range(1, d.cfg.max_read);
        std::size_t taken = 0;
        for (RxSlot& slot : d.rx) {
            if (n == 0 || slot.state == RxState::kUnpolled || slot.state == RxState::kPosted)
                break;
            if (slot.state != RxState::kHeld)
                continue;
            const std::size_t take = std::min(n, slot.end - slot.off);
            d.got.insert(d.got.end(), slot.msg.begin() + static_cast<long>(slot.off),
                         slot.msg.begin() + static_cast<long>(slot.off + take));
            slot.off += take;
            n -= take;
            taken += take;
            if (slot.off == slot.end) {
                slot.state = RxState::kConsumed;
                d.n_held--;
            }
        }
        d.unread -= taken;
        d.stats.reads++;
        trace(Ev::kRead, s, taken);
        // Every byte read must be the next byte the peer wrote.
        check_got(s, d.got.size() - taken);
        // All unread data consumed and the read wants more: the SrcAvail
        // queued behind it.
        const unsigned left = zc_status(d).rsa_left;
        if (!failed_ && n > 0 && d.unread == 0 && left > 0) {
            if (taken == 0 && d.cfg.peek_per_mille > 0 && rng_.per_mille(d.cfg.peek_per_mille))
                give_up_offer(s, true);
            else
                rd_start(s, static_cast<unsigned>(std::min<std::size_t>(n, left)));
        }
        if (d.rd == RdState::kIdle && d.cfg.pause_per_mille > 0 &&
            rng_.per_mille(d.cfg.pause_per_mille))
            d.paused = rng_.range(1, d.cfg.pause_steps);
        release_rx(s);
        post_recvs(s);
        // Everything read: the reader goes back to waiting for more, which
        // asks for the acknowledgement a Nagle-holding writer needs.
        if (d.unread == 0)
            sdp_core_ack_request(&d.conn);
        pump(s, 0);
    }

    // Bytes [from, got) just read must be the peer's next bytes, and the
    // peer must have handed them over (written, or offered by its SrcAvail).
    void check_got(int s, std::size_t from)
    {
        const Side& d = me(s);
        const Side& p = peer(s);
        if (d.got.size() > exposed(p) ||
            !std::equal(d.got.begin() + static_cast<long>(from), d.got.end(),
                        source(p).begin() + static_cast<long>(from)))
            fail(d.name + ": read bytes [" + std::to_string(from) + ", " +
                 std::to_string(d.got.size()) + ") differ from what " + p.name + " wrote");
    }

    // ---- zero copy ----------------------------------------------------------------
    //
    // Checked against the model's own account (Reg, Peer), not the core's:
    //  * RDMA Reads only with a live key of the source, inside its range, at
    //    the next unread byte of the offer, never after the sink's SendSM,
    //    after SrcAvailCancel or MSG_PEEK reached it, or past the last byte;
    //  * RDMA Writes only into the sink's live advertisement, at the stream
    //    offset it was made for, once; sink_take only hands out the latest
    //    advertisement the peer did not cancel;
    //  * a SrcAvail describes the source's registration and arrives at its
    //    stream offset; the send/send deadlock rule refuses exactly the
    //    offers it must;
    //  * at DONE the source's src_acked is the bytes the sink read (none in
    //    progress), the sink's adv_written the bytes that landed; then the
    //    key is invalidated, so any later access fails the first check;
    //  * RdmaRdCompl / RdmaWrCompl report exactly what was read / written;
    //    SendSM comes only for a stopped offer or an owed answer, after the
    //    completion of every byte read; SinkCancelAck after the RdmaWrCompl
    //    of a write made; every cancel is answered (final_checks).

    static sdp_core_zc_status zc_status(const Side& d)
    {
        sdp_core_zc_status st{};
        sdp_core_zc_query(&d.conn, &st);
        return st;
    }

    static bool zcopy_writer(const Side& d) { return d.cfg.zcopy_thresh > 0 && !d.cfg.echo; }

    static unsigned long long src_base(int s) { return 0x100000000000ull * (s + 1); }

    // Stream bytes the peer handed over: written, or offered by a SrcAvail.
    static std::size_t exposed(const Side& p)
    {
        return p.written + (p.zw_active && p.zw_phase == ZcPhase::kSrc ? p.src.len : 0);
    }

    static unsigned hdr_size(unsigned mid)
    {
        switch (mid) {
        case SDP_MID_RDMA_RD_COMPL:
        case SDP_MID_RDMA_WR_COMPL:
            return SDP_RDMA_COMPL_SIZE;
        case SDP_MID_SRC_AVAIL:
            return SDP_SRC_AVAIL_HDR_SIZE;
        case SDP_MID_SINK_AVAIL:
            return SDP_SINK_AVAIL_SIZE;
        default:
            return SDP_BSDH_SIZE;
        }
    }

    static unsigned be32(const Bytes& m, std::size_t at)
    {
        return (static_cast<unsigned>(m[at]) << 24) | (static_cast<unsigned>(m[at + 1]) << 16) |
               (static_cast<unsigned>(m[at + 2]) << 8) | m[at + 3];
    }

    // SrcAvail and SinkAvail: len, rkey, vaddr after the BSDH.
    static Peer decode_avail(const Bytes& m)
    {
        Peer a;
        a.len = be32(m, 16);
        a.rkey = be32(m, 20);
        a.vaddr = (static_cast<unsigned long long>(be32(m, 24)) << 32) | be32(m, 28);
        a.present = true;
        return a;
    }

    // The reader is in recv() or about to call it.
    static bool reader_active(const Side& d)
    {
        return d.paused == 0 && (!d.cfg.echo || pending(d) == 0) &&
               (!d.cfg.write_all_before_read || d.reader_started);
    }

    // Before every step: the reader of a write-all-before-read side starts
    // once its writer is done or blocked on something other than its own
    // SrcAvail; the core learns whether a reader waits in recv().
    void sync_reader(int s)
    {
        Side& d = me(s);
        if (d.cfg.write_all_before_read && !d.reader_started) {
            const bool blocked = d.zw_active ? d.zw_phase == ZcPhase::kFlush && !zc_writer_may_go(s)
                                             : !enabled(Ev::kWrite, s);
            if (d.written == d.limit || blocked)
                d.reader_started = true;
        }
        const bool waiting = !d.eof && (d.rd != RdState::kIdle || reader_active(d));
        if (waiting != d.reader_waiting) {
            d.reader_waiting = waiting;
            sdp_core_set_reader_waiting(&d.conn, waiting ? 1 : 0);
        }
    }

    // Room on the control ring and the core's leave to offer, as
    // sdp_zc_can_offer() asks (the real credits are checked on posting).
    bool may_post_avail(int s) const
    {
        const Side& d = sides_[s];
        return d.ctl_in_flight < d.cfg.ctl_bufs && sdp_core_may_offer(&d.conn) != 0;
    }

    // Whether the core would build this SinkAvail now (tried on a copy of
    // the connection).
    bool sink_avail_ok(int s, unsigned len) const
    {
        const Side& d = sides_[s];
        if (!may_post_avail(s))
            return false;
        sdp_core_conn c = d.conn;
        unsigned char hdr[SDP_SINK_AVAIL_SIZE];
        const sdp_core_zc zc{len, 1, kSinkBase};
        return sdp_core_tx_sink_avail(&c, hdr, sizeof(hdr), &zc, posted_rx(s)) > 0;
    }

    unsigned chunk(const Side& d) const
    {
        return static_cast<unsigned>(
            std::min<std::size_t>(d.cfg.zcopy_chunk, d.zw_end - d.written));
    }

    // What enabled() asks about zero copy.  Out of line (noinline): their
    // locals would otherwise be enabled()'s, whose every call then sets up
    // their ASan redzones, zero copy or not.
    //
    // Whether the blocked zero-copy writer has something to do (kFlush:
    // sdp_zc_wait_tx_ready(); what it then does, zc_write_step() decides).
    [[gnu::noinline]] bool zc_writer_may_go(int s) const
    {
        const Side& d = sides_[s];
        switch (d.zw_phase) {
        case ZcPhase::kFlush:
            return tx_queued(d) == 0 || d.cfg.zcopy_skip_flush;
        case ZcPhase::kWrite:
            return d.zw_completed;
        case ZcPhase::kSrc:
            return zc_status(d).src_state == SDP_ZC_DONE;
        }
        return false;
    }

    [[gnu::noinline]] static bool zc_readable(const Side& d) { return zc_status(d).rsa_left > 0; }

    [[gnu::noinline]] static bool zc_adv_done(const Side& d)
    {
        return zc_status(d).adv_state == SDP_ZC_DONE;
    }

    [[gnu::noinline]] bool zc_interruptible(const Side& d) const
    {
        return src_interruptible(d) || adv_signalable(d);
    }

    bool src_interruptible(const Side& d) const
    {
        return d.zw_active && d.zw_phase == ZcPhase::kSrc && !d.zw_cancelled &&
               zc_status(d).src_state == SDP_ZC_ACTIVE;
    }

    bool adv_interruptible(const Side& d) const
    {
        return d.rd == RdState::kAdv && !d.adv_cancelled && zc_status(d).adv_state == SDP_ZC_ACTIVE;
    }

    bool adv_signalable(const Side& d) const
    {
        return d.cfg.reader_signals && adv_interruptible(d);
    }

    // A reader about to block for a big read advertises its buffer.
    [[gnu::noinline]] bool may_advertise(int s) const
    {
        const Side& d = sides_[s];
        return d.cfg.sink_avail && d.cfg.zcopy_thresh > 0 && !d.cfg.echo &&
               d.cfg.max_read >= d.cfg.zcopy_thresh && d.unread == 0 && !d.disconn_rcvd && !d.eof &&
               (d.cfg.sink_avail_after_shut || !d.shut) && d.adv_miss != d.rx_stream &&
               zc_status(d).rsa_left == 0 && sink_avail_ok(s, d.cfg.zcopy_thresh);
    }

    // Credits for a SrcAvail or SinkAvail: like data, never the reserve.
    bool avail_credits_ok(int s, const char* what)
    {
        const Side& d = me(s);
        if (sdp_core_tx_credits(&d.conn) > kReserve && true_credits(s) > kReserve)
            return true;
        fail(d.name + ": " + what + " posted into the control reserve (core credits " +
             std::to_string(sdp_core_tx_credits(&d.conn)) + ", real " +
             std::to_string(true_credits(s)) + ")");
        return false;
    }

    // -- source --

    void zc_write_start(int s, std::size_t n)
    {
        Side& d = me(s);
        trace(Ev::kWrite, s, n, 2);
        d.zw_end = d.written + n;
        zc_write_next(s);
    }

    // The next chunk of the write goes by zero copy: queued segments first.
    void zc_write_next(int s)
    {
        Side& d = me(s);
        d.zw_active = true;
        d.zw_phase = ZcPhase::kFlush;
        pump(s, d.cfg.zcopy_skip_flush ? 0 : SDP_TXO_PUSH); // queued segments go first
        if (!failed_ && zc_writer_may_go(s))
            zc_write_step(s);
    }

    // A zero-copy transfer of the write ended (not interrupted): on by zero
    // copy while zcopy_thresh bytes or more are left, else by bcopy
    // (sdp_sendmsg()).
    void zc_write_on(int s)
    {
        Side& d = me(s);
        if (d.written == d.zw_end) {
            zc_write_end(s);
        } else if (d.zw_end - d.written >= d.cfg.zcopy_thresh) {
            d.zw_phase = ZcPhase::kFlush;
            pump(s, SDP_TXO_PUSH);
        } else {
            zc_to_bcopy(s, 0);
        }
    }

    // The rest of the write (budget 0), or one chunk of it (then zero copy
    // again), goes by bcopy: app_write() takes it from here.
    void zc_to_bcopy(int s, std::size_t budget)
    {
        Side& d = me(s);
        d.zw_active = false;
        d.bcopy_end = d.zw_end;
        d.bcopy_budget = budget;
        pump(s, 0);
    }

    // Bytes the glue's bcopy loop copies now, at most `limit`, before its
    // bcopy_budget runs out: it fills a segment at a time (the tail one
    // first) and looks at the budget only between segments.
    std::size_t budget_bytes(const Side& d, std::size_t limit) const
    {
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
        std::size_t room = 0;
        if (tx_queued(d) > 0 && !d.tx.back().urgent)
            room = seg_max - std::min(seg_max, d.tx.back().data.size());
        if (room == 0)
            room = seg_max;
        std::size_t n = 0;
        while (n < limit && n < d.bcopy_budget) {
            n += std::min(room, limit - n);
            room = seg_max;
        }
        return n;
    }

    void zc_write_end(int s)
    {
        Side& d = me(s);
        d.zw_active = false;
        d.stats.writes++;
        pump(s, 0);
    }

    void zc_write_step(int s)
    {
        Side& d = me(s);
        switch (d.zw_phase) {
        case ZcPhase::kFlush: {
            // No credit for a SrcAvail (or the RdmaWrCompl), or the control
            // ring full: the receiver is behind, this chunk goes by bcopy.
            if (!may_post_avail(s)) {
                trace(Ev::kZcWrite, s, d.written, 2);
                d.stats.bcopy_chunks++;
                zc_to_bcopy(s, d.cfg.zcopy_chunk);
                return;
            }
            const unsigned want = chunk(d);
            sdp_core_zc zc{};
            if (sdp_core_sink_take(&d.conn, want, &zc) == 1)
                rdma_write(s, want, zc);
            else
                post_src_avail(s, want);
            return;
        }
        case ZcPhase::kWrite:
            trace(Ev::kZcWrite, s, d.written);
            zc_write_on(s);
            return;
        case ZcPhase::kSrc:
            src_done(s);
            return;
        }
    }

    // Why the advertisement sink_take() handed out may not be written into
    // (empty: it may).
    std::string unusable(int s, unsigned want, const sdp_core_zc& zc) const
    {
        const Side& d = sides_[s];
        const Side& p = sides_[1 - s];
        if (!d.padv.present)
            return "no SinkAvail ever arrived";
        if (d.padv.stopped)
            return "its SinkAvailCancel arrived";
        if (d.padv.used)
            return "it was written into already";
        if (zc.rkey != d.padv.rkey || zc.vaddr != d.padv.vaddr || zc.len == 0 || zc.len > want ||
            zc.len > d.padv.len) {
            return "key, address or length differ from the SinkAvail's (" + std::to_string(zc.len) +
                   " of " + std::to_string(d.padv.len) + ", want " + std::to_string(want) + ")";
        }
        if (!p.sink.live || p.sink.rkey != zc.rkey)
            return "the sink no longer has it registered";
        if (p.sink.off != d.written) {
            return "it was made for stream bytes from " + std::to_string(p.sink.off) +
                   ", the writer is at " + std::to_string(d.written);
        }
        if (d.disconn_posted)
            return "our DisConn is out";
        return {};
    }

    void rdma_write(int s, unsigned want, const sdp_core_zc& zc)
    {
        Side& d = me(s);
        const std::string bad = unusable(s, want, zc);
        if (!bad.empty()) {
            fail(d.name +
                 ": sdp_core_sink_take() handed out an advertisement that is not usable: " + bad);
            return;
        }
        d.padv.used = true;
        d.wr_unreported = zc.len;
        WireMsg m;
        m.rdma = true;
        m.rkey = zc.rkey;
        m.vaddr = zc.vaddr;
        m.off = d.written;
        m.len = zc.len;
        wire(s).push_back(std::move(m));
        d.sends.push_back({Ring::kRdma, 0, zc.len, SendState::kOnWire});
        trace(Ev::kRdma, s, zc.len);
        d.stats.rdma_writes++;
        d.stats.write_bytes += zc.len;
        d.written += zc.len;
        d.zw_phase = ZcPhase::kWrite;
        d.zw_completed = false;
        pump(s, 0); // the RdmaWrCompl
    }

    // Whether the core refuses zero copy for the size of the receive buffers
    // (tried on a copy of the connection); false after failing if it does
    // while the zero-copy messages would fit.
    bool too_big_for_zcopy(int s, unsigned len)
    {
        const Side& d = me(s);
        sdp_core_conn c = d.conn;
        unsigned char hdr[SDP_SRC_AVAIL_HDR_SIZE];
        const sdp_core_zc zc{len, 1, src_base(s)};
        if (sdp_core_tx_src_avail(&c, hdr, sizeof(hdr), &zc, posted_rx(s)) != -SDP_CORE_ETOOBIG)
            return false;
        if (peer(s).cfg.rx_buf_size >= SDP_SINK_AVAIL_SIZE &&
            d.cfg.rx_buf_size >= SDP_RDMA_COMPL_SIZE) {
            fail(d.name + ": tx_src_avail says ETOOBIG, but the receive buffers are " +
                 std::to_string(d.cfg.rx_buf_size) + " B here and " +
                 std::to_string(peer(s).cfg.rx_buf_size) + " B at the peer");
            return false;
        }
        return true;
    }

    void post_src_avail(int s, unsigned len)
    {
        Side& d = me(s);
        // Zero-copy messages do not fit the receive buffers: the rest of
        // this write by bcopy (sdp_zc_offer() -> -ENOBUFS).
        if (too_big_for_zcopy(s, len)) {
            trace(Ev::kZcWrite, s, d.written, 3);
            d.stats.too_big++;
            zc_to_bcopy(s, 0);
            return;
        }
        if (failed_ || !avail_credits_ok(s, "SrcAvail") || !may_post(s, SDP_MID_SRC_AVAIL, 0))
            return;
        Reg reg;
        reg.vaddr = src_base(s) + d.written;
        reg.rkey = new_key(s, reg.vaddr, len);
        reg.off = d.written;
        reg.len = len;
        reg.live = true;
        Bytes msg(SDP_SRC_AVAIL_HDR_SIZE);
        const sdp_core_zc zc{len, reg.rkey, reg.vaddr};
        const int n = sdp_core_tx_src_avail(&d.conn, msg.data(), static_cast<unsigned>(msg.size()),
                                            &zc, posted_rx(s));
        if (n != SDP_SRC_AVAIL_HDR_SIZE) {
            fail(d.name + ": tx_src_avail failed: " + sdp_core_err_name(n));
            return;
        }
        d.src = reg;
        d.zw_phase = ZcPhase::kSrc;
        d.zw_cancelled = false;
        d.zw_sm = false;
        d.zw_done = false;
        d.stats.src_avails++;
        send(s, Ring::kCtl, SDP_MID_SRC_AVAIL, std::move(msg), 0, 0);
        pump(s, 0);
    }

    // The writer wakes: its SrcAvail is DONE.
    void src_done(int s)
    {
        Side& d = me(s);
        observe_zc(s);
        const sdp_core_zc_status st = zc_status(d);
        sdp_core_src_release(&d.conn);
        trace(Ev::kZcWrite, s, st.src_acked, st.src_sink_stopped != 0 ? 1 : 0);
        if (zc_status(d).src_state != SDP_ZC_IDLE) {
            fail(d.name + ": src_release left the SrcAvail in state " +
                 std::to_string(zc_status(d).src_state));
            return;
        }
        if (st.src_acked > d.src.len) {
            fail(d.name + ": src_acked " + std::to_string(st.src_acked) + " of a " +
                 std::to_string(d.src.len) + "-byte SrcAvail");
            return;
        }
        d.written += st.src_acked;
        // Interrupted: the write returns what was delivered.
        if (d.zw_cancelled || d.written == d.zw_end) {
            zc_write_end(s);
        } else if (st.src_acked == d.src.len) {
            zc_write_on(s); // the next chunk
        } else if (st.src_sink_stopped != 0) {
            zc_to_bcopy(s, 0); // the rest of this write() by bcopy
        } else {
            fail(d.name + ": SrcAvail DONE after " + std::to_string(st.src_acked) + " of " +
                 std::to_string(d.src.len) + " bytes, neither cancelled nor stopped by SendSM");
        }
    }

    // A signal interrupts a zero-copy writer or reader asleep.
    void signal(int s)
    {
        Side& d = me(s);
        const bool writer = src_interruptible(d);
        if (writer && (!adv_signalable(d) || rng_.per_mille(500))) {
            trace(Ev::kSignal, s, 0, 1);
            d.zw_cancelled = true;
            sdp_core_src_cancel(&d.conn);
            if (zc_status(d).src_state != SDP_ZC_CANCELLING)
                fail(d.name + ": src_cancel of an active SrcAvail did not make it CANCELLING");
            pump(s, SDP_TXO_PUSH);
            return;
        }
        trace(Ev::kSignal, s, 0, 2);
        adv_cancel(s);
    }

    // -- sink --

    // The grace period of the peer's offer ends with no reader at work: the
    // core gives the offer up if nothing was read since the period began,
    // else another period starts.
    void grace_ends(int s)
    {
        Side& d = me(s);
        switch (sdp_core_rsa_grace_end(&d.conn, 0)) {
        case SDP_GRACE_AGAIN:
            trace(Ev::kGrace, s, zc_status(d).rsa_left, 1);
            d.stats.grace_agains++;
            sdp_core_rsa_grace_start(&d.conn);
            break;
        case SDP_GRACE_ABANDONED:
            give_up_offer(s, false);
            break;
        default:
            fail(d.name + ": the grace timer found no offer to read, rsa_left " +
                 std::to_string(zc_status(d).rsa_left));
        }
    }

    // The reader gives the peer's offer up (peek: MSG_PEEK; else the grace
    // timer): SendSM, the bytes then come by bcopy.
    void give_up_offer(int s, bool peek)
    {
        Side& d = me(s);
        if (peek) {
            trace(Ev::kRead, s, 0, 2);
            d.stats.peeks++;
        } else {
            trace(Ev::kGrace, s, zc_status(d).rsa_left);
            d.stats.grace_sms++;
        }
        sdp_core_rsa_abandon(&d.conn);
        d.offer.stopped = true;
        if (zc_status(d).rsa_left != 0)
            fail(d.name + ": an abandoned SrcAvail is still offered to the reader");
        pump(s, 0);
    }

    // The RDMA Read of n bytes at (rkey, vaddr) reaches the source's memory:
    // a live registration, inside it, at the next unread byte.
    static std::string bad_read(const Side& p, unsigned rkey, unsigned long long vaddr, unsigned n)
    {
        if (!p.src.live || p.src.rkey != rkey)
            return "key " + std::to_string(rkey) + " is not registered (any more)";
        if (vaddr < p.src.vaddr || vaddr + n > p.src.vaddr + p.src.len)
            return "outside the offered range";
        if (vaddr != p.src.vaddr + p.src.done) {
            return "not the next unread byte (" + std::to_string(vaddr - p.src.vaddr) + ", " +
                   std::to_string(p.src.done) + " read)";
        }
        return {};
    }

    void check_rdma_read(int s, unsigned rkey, unsigned long long vaddr, unsigned n)
    {
        const Side& d = me(s);
        const Side& p = peer(s);
        const std::string bad = bad_read(p, rkey, vaddr, n);
        if (!bad.empty())
            fail(d.name + ": RDMA Read of " + std::to_string(n) + " bytes of " + p.name +
                 "'s memory: " + bad);
    }

    // Why the reader may not RDMA-read the peer's offer now (empty: it may).
    static std::string unreadable(const Side& d, const sdp_core_zc_status& st)
    {
        const Peer& o = d.offer;
        if (!o.present)
            return "no SrcAvail is offered (or its SendSM went)";
        if (o.stopped)
            return "the offer was cancelled, abandoned or refused";
        if (st.rsa_rkey != o.rkey || st.rsa_vaddr != o.vaddr + o.read ||
            st.rsa_left != o.len - o.read) {
            return "the core's rsa fields differ from the SrcAvail (" +
                   std::to_string(st.rsa_left) + " left, " + std::to_string(o.len - o.read) +
                   " unread)";
        }
        if (d.got.size() != o.off + o.read) {
            return "the reader is at stream byte " + std::to_string(d.got.size()) +
                   ", the offer's next byte is " + std::to_string(o.off + o.read);
        }
        return {};
    }

    void rd_start(int s, unsigned n)
    {
        Side& d = me(s);
        const sdp_core_zc_status st = zc_status(d);
        const std::string bad = unreadable(d, st);
        if (!bad.empty()) {
            fail(d.name + ": RDMA Read of the peer's SrcAvail: " + bad);
            return;
        }
        const int rc = sdp_core_rd_start(&d.conn, n);
        if (rc != 0) {
            fail(d.name + ": rd_start(" + std::to_string(n) + ") of " +
                 std::to_string(st.rsa_left) + " offered failed: " + sdp_core_err_name(rc));
            return;
        }
        trace(Ev::kRead, s, n, 1);
        check_rdma_read(s, st.rsa_rkey, st.rsa_vaddr, n);
        d.rd = RdState::kReading;
        d.rd_rkey = st.rsa_rkey;
        d.rd_vaddr = st.rsa_vaddr;
        d.rd_len = n;
    }

    // The RDMA Read completes: its bytes are the reader's.
    void rd_done(int s)
    {
        Side& d = me(s);
        Side& p = peer(s);
        trace(Ev::kRdDone, s, d.rd_len);
        check_rdma_read(s, d.rd_rkey, d.rd_vaddr, d.rd_len);
        if (failed_)
            return;
        const std::size_t at = p.src.off + (d.rd_vaddr - p.src.vaddr);
        const std::size_t from = d.got.size();
        d.got.insert(d.got.end(), source(p).begin() + static_cast<long>(at),
                     source(p).begin() + static_cast<long>(at + d.rd_len));
        p.src.done += d.rd_len;
        d.offer.read += d.rd_len;
        d.rd_unreported += d.rd_len;
        d.rx_stream += d.rd_len;
        d.stats.rdma_reads++;
        d.stats.read_bytes += d.rd_len;
        sdp_core_rd_done(&d.conn, d.rd_len);
        d.rd = RdState::kIdle;
        if (d.offer.read == d.offer.len && !d.offer.stopped)
            d.offer.present = false; // read to the end: over without a SendSM
        check_got(s, from);
        if (d.cfg.pause_per_mille > 0 && rng_.per_mille(d.cfg.pause_per_mille))
            d.paused = rng_.range(1, d.cfg.pause_steps);
        pump(s, 0);
    }

    void advertise(int s)
    {
        Side& d = me(s);
        const unsigned len = static_cast<unsigned>(rng_.range(d.cfg.zcopy_thresh, d.cfg.max_read));
        if (!avail_credits_ok(s, "SinkAvail") || !may_post(s, SDP_MID_SINK_AVAIL, 0))
            return;
        if (d.got.size() != d.rx_stream) {
            fail(d.name + ": model: advertising with received bytes unread");
            return;
        }
        // It would take that answer for its own (sdp_core.h: sink_ack_stale_).
        if (d.acks_awaited != 0) {
            fail(d.name + ": tx_sink_avail() accepted a SinkAvail while the SinkCancelAck of the "
                          "previous advertisement may still come");
            return;
        }
        Reg reg;
        reg.vaddr = kSinkBase + static_cast<unsigned long long>(keys_.size()) * 0x1000000ull;
        reg.rkey = new_key(s, reg.vaddr, len);
        reg.off = d.got.size();
        reg.len = len;
        reg.buf.resize(len);
        reg.live = true;
        Bytes msg(SDP_SINK_AVAIL_SIZE);
        const sdp_core_zc zc{len, reg.rkey, reg.vaddr};
        const int n = sdp_core_tx_sink_avail(&d.conn, msg.data(), static_cast<unsigned>(msg.size()),
                                             &zc, posted_rx(s));
        if (n != SDP_SINK_AVAIL_SIZE) {
            fail(d.name + ": tx_sink_avail failed: " + sdp_core_err_name(n));
            return;
        }
        trace(Ev::kRead, s, len, 3);
        d.stats.late_sinks += d.disconn_posted ? 1 : 0;
        d.sink = std::move(reg);
        d.rd = RdState::kAdv;
        d.adv_cancelled = false;
        d.adv_done = false;
        d.adv_acked = false;
        d.stats.sink_avails++;
        send(s, Ring::kCtl, SDP_MID_SINK_AVAIL, std::move(msg), 0, 0);
        pump(s, 0);
    }

    void adv_cancel(int s)
    {
        Side& d = me(s);
        d.adv_cancelled = true;
        sdp_core_adv_cancel(&d.conn);
        if (zc_status(d).adv_state != SDP_ZC_CANCELLING)
            fail(d.name + ": adv_cancel of an active SinkAvail did not make it CANCELLING");
        pump(s, SDP_TXO_PUSH);
    }

    // The reader wakes: its SinkAvail is DONE.  The read returns what was
    // written there, or goes on reading normally.
    void adv_wake(int s)
    {
        Side& d = me(s);
        observe_zc(s);
        const unsigned written = zc_status(d).adv_written;
        sdp_core_adv_release(&d.conn);
        trace(Ev::kAdvWake, s, written);
        if (zc_status(d).adv_state != SDP_ZC_IDLE) {
            fail(d.name + ": adv_release left the SinkAvail in state " +
                 std::to_string(zc_status(d).adv_state));
            return;
        }
        d.rd = RdState::kIdle;
        if (written == 0) {
            // Interrupted, or the bytes come another way: no new
            // advertisement before more bytes arrived (the glue backs off
            // too), or a reader and a signal could take turns for ever.
            d.adv_miss = d.rx_stream;
            d.stats.adv_unused++;
            return;
        }
        const std::size_t from = d.got.size();
        d.got.insert(d.got.end(), d.sink.buf.begin(), d.sink.buf.begin() + written);
        d.stats.reads++;
        check_got(s, from);
        if (d.cfg.pause_per_mille > 0 && rng_.per_mille(d.cfg.pause_per_mille))
            d.paused = rng_.range(1, d.cfg.pause_steps);
        pump(s, 0);
    }

    // An RDMA Write arrives: its bytes land in the sink's buffer, which must
    // be the live advertisement it was made for.
    static std::string bad_write(const Side& p, const WireMsg& m)
    {
        if (!p.sink.live || p.sink.rkey != m.rkey)
            return "key " + std::to_string(m.rkey) + " is not registered (any more)";
        if (m.vaddr != p.sink.vaddr || m.len > p.sink.len)
            return "outside the advertised buffer";
        if (p.sink.done != 0)
            return "the advertisement was written into already";
        if (m.off != p.sink.off) {
            return "stream bytes from " + std::to_string(m.off) + " into a buffer for bytes from " +
                   std::to_string(p.sink.off);
        }
        return {};
    }

    void rdma_arrive(int s, const WireMsg& m)
    {
        Side& p = peer(s);
        const std::string bad = bad_write(p, m);
        if (!bad.empty()) {
            fail(me(s).name + ": RDMA Write of " + std::to_string(m.len) + " bytes into " + p.name +
                 "'s memory: " + bad);
            return;
        }
        const Bytes& src = source(me(s));
        std::copy(src.begin() + static_cast<long>(m.off),
                  src.begin() + static_cast<long>(m.off + m.len), p.sink.buf.begin());
        p.sink.done = m.len;
    }

    // After every receive and every step: a transfer DONE in the core is
    // checked and its key invalidated at once (the owner's later wake-up
    // changes nothing the peer could see); the core's zero-copy state agrees
    // with the model's.
    void observe_zc(int s)
    {
        Side& d = me(s);
        const sdp_core_zc_status st = zc_status(d);
        const bool own_src = d.zw_active && d.zw_phase == ZcPhase::kSrc;
        if (!own_src && st.src_state != SDP_ZC_IDLE) {
            fail(d.name + ": SrcAvail state " + std::to_string(st.src_state) + " with none posted");
            return;
        }
        if (own_src && !d.zw_done && st.src_state == SDP_ZC_DONE) {
            d.zw_done = true;
            const Side& p = peer(s);
            if (p.rd == RdState::kReading && p.rd_rkey == d.src.rkey)
                fail(d.name + ": SrcAvail DONE while " + p.name + "'s RDMA Read of it runs");
            else if (st.src_acked != d.src.done)
                fail(d.name + ": SrcAvail DONE with src_acked " + std::to_string(st.src_acked) +
                     ", " + p.name + " read " + std::to_string(d.src.done));
            d.src.live = false;
        }
        if (d.rd != RdState::kAdv && st.adv_state != SDP_ZC_IDLE) {
            fail(d.name + ": SinkAvail state " + std::to_string(st.adv_state) +
                 " with none posted");
            return;
        }
        if (d.rd == RdState::kAdv && !d.adv_done && st.adv_state == SDP_ZC_DONE) {
            d.adv_done = true;
            d.stats.overtaken += d.adv_cancelled && !d.adv_acked ? 1 : 0;
            if (st.adv_written != d.sink.done) {
                fail(d.name + ": SinkAvail DONE with adv_written " +
                     std::to_string(st.adv_written) + ", " + std::to_string(d.sink.done) +
                     " bytes landed");
            }
            d.sink.live = false;
        }
        const Peer& o = d.offer;
        const bool readable = o.present && !o.stopped && o.read < o.len;
        if (readable ? st.rsa_left != o.len - o.read || st.rsa_rkey != o.rkey : st.rsa_left != 0) {
            fail(d.name + ": rsa_left " + std::to_string(st.rsa_left) + ", the model has " +
                 (readable ? std::to_string(o.len - o.read) : std::string("no offer")) +
                 " readable");
        }
    }

    // Every registration ever made, by key (from kFirstKey): owner, range.
    struct KeyInfo {
        unsigned long long vaddr;
        unsigned len;
        int owner;
    };

    unsigned new_key(int s, unsigned long long vaddr, unsigned len)
    {
        keys_.push_back({vaddr, len, s});
        return kFirstKey + static_cast<unsigned>(keys_.size() - 1);
    }

    // A SrcAvail or SinkAvail as received describes a registration of side s.
    bool registered(int s, const Peer& a) const
    {
        if (a.rkey < kFirstKey || a.rkey - kFirstKey >= keys_.size())
            return false;
        const KeyInfo& k = keys_[a.rkey - kFirstKey];
        return k.owner == s && k.vaddr == a.vaddr && k.len == a.len;
    }

    // A zero-copy message was received (after on_recv accepted it).
    void zc_received(int s, const Bytes& msg, const sdp_core_rx& rx)
    {
        Side& d = me(s);
        const Side& p = sides_[1 - s];
        switch (rx.mid) {
        case SDP_MID_SRC_AVAIL: {
            Peer o = decode_avail(msg);
            o.off = d.rx_stream;
            if (!p.src.live || p.src.rkey != o.rkey || !registered(1 - s, o) ||
                rx.zc_bytes != o.len) {
                fail(d.name + ": SrcAvail does not describe " + p.name + "'s registration");
                return;
            }
            if (p.src.off != d.rx_stream) {
                fail(d.name + ": SrcAvail for stream bytes from " + std::to_string(p.src.off) +
                     " after " + std::to_string(d.rx_stream) + " bytes received (out of order)");
                return;
            }
            if (d.offer.present) {
                fail(d.name + ": SrcAvail accepted while the previous one is not over");
                return;
            }
            // The send/send deadlock rule: refused (SendSM at once) iff our
            // own SrcAvail is out and no reader waits in recv().
            const bool own = d.zw_active && d.zw_phase == ZcPhase::kSrc && !d.zw_done;
            const bool refuse = own && !d.reader_waiting;
            const sdp_core_zc_status st = zc_status(d);
            if (refuse ? st.rsa_left != 0 : st.rsa_left != o.len) {
                fail(d.name + ": SrcAvail " + (refuse ? "should be refused" : "should be offered") +
                     " (own SrcAvail " + (own ? "out" : "not out") + ", reader " +
                     (d.reader_waiting ? "waiting" : "not waiting") + "), rsa_left " +
                     std::to_string(st.rsa_left));
                return;
            }
            o.stopped = refuse;
            d.stats.deadlock_sms += refuse ? 1 : 0;
            d.offer = o;
            if (!refuse)
                sdp_core_rsa_grace_start(&d.conn); // sdp_zc_grace_arm()
            break;
        }
        case SDP_MID_SRC_AVAIL_CANCEL:
            d.sms_owed++;
            if (d.offer.present)
                d.offer.stopped = true;
            break;
        case SDP_MID_SINK_AVAIL: {
            // It may have ended already (crossing our data or SrcAvail).
            const Peer a = decode_avail(msg);
            if (!registered(1 - s, a) || rx.zc_bytes != a.len) {
                fail(d.name + ": SinkAvail does not describe a registration of " + p.name);
                return;
            }
            d.padv = a;
            break;
        }
        case SDP_MID_SINK_AVAIL_CANCEL:
            d.padv.stopped = true;
            // After our DisConn nobody answers: the DisConn ended the
            // advertisement at the sink.
            if (d.disconn_posted) {
                if (peer(s).acks_awaited == 0)
                    fail(d.name + ": model: SinkAvailCancel with none awaiting an answer");
                else
                    peer(s).acks_awaited--;
            } else {
                d.acks_owed++;
            }
            break;
        case SDP_MID_RDMA_WR_COMPL:
            if (d.rd != RdState::kAdv || rx.zc_bytes == 0 || rx.zc_bytes != d.sink.done) {
                fail(d.name + ": RdmaWrCompl(" + std::to_string(rx.zc_bytes) + ") accepted, " +
                     std::to_string(d.sink.done) + " bytes landed");
                return;
            }
            d.rx_stream += rx.zc_bytes;
            break;
        case SDP_MID_SINK_CANCEL_ACK:
            // The answer to our SinkAvailCancel: it ends the advertisement
            // if nothing else did (then observe_zc() sees it DONE), else it
            // answers nothing.
            if (d.acks_awaited == 0) {
                fail(d.name + ": SinkCancelAck accepted with no SinkAvailCancel out");
                break;
            }
            d.acks_awaited--;
            if (d.rd == RdState::kAdv && d.adv_cancelled && !d.adv_done)
                d.adv_acked = true;
            else
                d.stats.stale_acks++;
            break;
        case SDP_MID_SEND_SM:
            if (d.zw_active && d.zw_phase == ZcPhase::kSrc && !d.zw_done)
                d.zw_sm = true;
            break;
        default: // RdmaRdCompl: the core's account, checked at DONE
            break;
        }
    }

    // A zero-copy control message control_due() returned is about to go:
    // is it owed?  Returns false (after failing) if not.
    // Why this zero-copy control message is not owed now (empty: it is).
    static std::string not_owed(const Side& d, unsigned mid)
    {
        switch (mid) {
        case SDP_MID_RDMA_RD_COMPL:
            return d.rd_unreported == 0 ? "nothing was read" : "";
        case SDP_MID_RDMA_WR_COMPL:
            return d.wr_unreported == 0 ? "nothing was written" : "";
        case SDP_MID_SEND_SM:
            if (!(d.offer.present && d.offer.stopped) && d.sms_owed == 0)
                return "no offer was stopped and no cancel is owed an answer";
            if (d.rd == RdState::kReading)
                return "an RDMA Read is in progress";
            if (d.rd_unreported != 0) {
                return "the RdmaRdCompl of " + std::to_string(d.rd_unreported) +
                       " bytes read has not gone";
            }
            return {};
        case SDP_MID_SRC_AVAIL_CANCEL:
            // Interrupted, or the answer to a SendSM (the specification's).
            if (!d.zw_active || d.zw_phase != ZcPhase::kSrc || (!d.zw_cancelled && !d.zw_sm))
                return "the writer was not interrupted and no SendSM came";
            return {};
        case SDP_MID_SINK_AVAIL_CANCEL:
            if (d.rd != RdState::kAdv || !d.adv_cancelled)
                return "the reader did not cancel";
            if (d.adv_done)
                return "the advertisement ended already (stream bytes or the DisConn came)";
            return {};
        case SDP_MID_SINK_CANCEL_ACK:
            if (d.acks_owed == 0)
                return "no SinkAvailCancel is owed an answer";
            if (d.wr_unreported != 0)
                return "the RdmaWrCompl of the write made has not gone";
            return {};
        default:
            return "not a zero-copy control message";
        }
    }

    bool zc_control_owed(int s, unsigned mid)
    {
        const Side& d = me(s);
        const std::string bad = not_owed(d, mid);
        if (bad.empty())
            return true;
        fail(d.name + ": control_due returned mid " + std::to_string(mid) + " but " + bad);
        return false;
    }

    // ... and went: the model's account follows.
    void zc_control_sent(int s, unsigned mid, const Bytes& msg)
    {
        Side& d = me(s);
        switch (mid) {
        case SDP_MID_RDMA_RD_COMPL:
            if (be32(msg, 16) != d.rd_unreported)
                fail(d.name + ": RdmaRdCompl(" + std::to_string(be32(msg, 16)) + ") after " +
                     std::to_string(d.rd_unreported) + " bytes read");
            d.rd_unreported = 0;
            break;
        case SDP_MID_RDMA_WR_COMPL:
            if (be32(msg, 16) != d.wr_unreported)
                fail(d.name + ": RdmaWrCompl(" + std::to_string(be32(msg, 16)) + ") after " +
                     std::to_string(d.wr_unreported) + " bytes written");
            d.wr_unreported = 0;
            break;
        case SDP_MID_SEND_SM:
            d.offer = Peer{}; // over: the source sends the rest by bcopy
            d.sms_owed = 0;
            d.stats.send_sms++;
            break;
        case SDP_MID_SRC_AVAIL_CANCEL:
            d.stats.src_cancels++;
            break;
        case SDP_MID_SINK_AVAIL_CANCEL:
            d.stats.sink_cancels++;
            d.acks_awaited++;
            break;
        case SDP_MID_SINK_CANCEL_ACK:
            d.acks_owed--;
            break;
        default:
            break;
        }
    }

    // ---- receive ring ------------------------------------------------------------

    // sdp_rx_release_read(): advance the head of the slot ring past slots
    // whose buffers are free (consumed data, and messages without payload,
    // which sdp_rx_complete() freed at once).
    void release_rx(int s)
    {
        Side& d = me(s);
        while (!d.rx.empty() && d.rx.front().state == RxState::kConsumed)
            d.rx.pop_front();
        std::size_t stuck = 0;
        for (const RxSlot& slot : d.rx)
            stuck += slot.state == RxState::kConsumed ? 1 : 0;
        d.stats.stuck_rx_bufs = std::max(d.stats.stuck_rx_bufs, stuck);
    }

    // Receive buffers not on the free list (leaked ones included).
    static std::size_t rx_bufs_in_use(const Side& d)
    {
        return std::size_t{d.n_hw} + d.n_unpolled + d.n_held + d.leaked;
    }

    static std::size_t rx_slots(const Side& d)
    {
        if (d.cfg.rx_slots_per_buf == kNoSlotLimit)
            return static_cast<std::size_t>(-1);
        return std::size_t{d.cfg.rx_bufs} * d.cfg.rx_slots_per_buf;
    }

    // sdp_post_recvs(): post every free buffer while the slot window has
    // room.
    void post_recvs(int s)
    {
        Side& d = me(s);
        while (rx_bufs_in_use(d) < d.cfg.rx_bufs && d.rx.size() < rx_slots(d)) {
            if (d.cfg.leak_every > 0 && ++d.reposts % d.cfg.leak_every == 0) {
                d.leaked++;
                continue;
            }
            d.rx.emplace_back();
            d.n_hw++;
        }
    }

    // ---- transport ---------------------------------------------------------------

    void arrive(int s)
    {
        Side& p = peer(s);
        WireMsg m = std::move(wire(s).front());
        wire(s).pop_front();
        for (Sent& sent : me(s).sends) {
            if (sent.state == SendState::kOnWire) {
                sent.state = SendState::kArrived;
                break;
            }
        }
        if (m.rdma) {
            trace(Ev::kArrive, s, m.len, 0);
            rdma_arrive(s, m);
            return;
        }
        sends_on_wire_[s]--;
        trace(Ev::kArrive, s, m.msg.size(), m.msg[0]);
        if (p.n_hw == 0) {
            fail("RNR: a message from " + me(s).name + " arrived with no receive buffer posted");
            return;
        }
        // The first posted buffer: the posted ones are at the end, in order.
        RxSlot& slot = p.rx[p.rx.size() - p.n_hw];
        slot.state = RxState::kUnpolled;
        slot.msg = std::move(m.msg);
        p.n_hw--;
        p.n_unpolled++;
    }

    // The peer's ack for the oldest SEND that arrived: its completion is in
    // the CQ.
    void ack(int s)
    {
        for (Sent& sent : me(s).sends) {
            if (sent.state == SendState::kArrived) {
                sent.state = SendState::kAcked;
                trace(Ev::kAck, s, sent.payload, sent.mid);
                return;
            }
        }
    }

    // sdp_cq_work(): a batch of completions, receive and send interleaved in
    // any order (each kind in its own order), then re-post and push once.
    void poll_cq(int s)
    {
        Side& d = me(s);
        std::size_t budget = rng_.range(1, d.n_unpolled + acked_sends(d));
        while (budget-- > 0 && !failed_) {
            const std::size_t rx = d.n_unpolled;
            const std::size_t tx = acked_sends(d);
            if (rx + tx == 0)
                break;
            if (rng_.below(rx + tx) < rx)
                rx_complete(s);
            else
                tx_complete(s);
            if (!failed_ && zc_)
                observe_zc(s);
        }
        if (failed_)
            return;
        release_rx(s);
        post_recvs(s);
        pump(s, 0);
    }

    // sdp_rx_complete()
    void rx_complete(int s)
    {
        Side& d = me(s);
        const std::size_t at = d.rx.size() - d.n_hw - d.n_unpolled;
        RxSlot& slot = d.rx[at];
        d.n_unpolled--;
        sdp_core_rx rx{};
        const int rc =
            sdp_core_on_recv(&d.conn, slot.msg.data(), static_cast<unsigned>(slot.msg.size()), &rx);
        trace(Ev::kPoll, s, rx.payload_len, slot.msg[0]);
        if (rc != 0) {
            fail(d.name + ": on_recv of mid " + std::to_string(slot.msg[0]) +
                 " failed: " + sdp_core_err_name(rc));
            return;
        }
        if (rx.mid != slot.msg[0])
            fail(d.name + ": on_recv says mid " + std::to_string(rx.mid) + " for mid " +
                 std::to_string(slot.msg[0]));
        // Stream bytes by another way than our SinkAvail, or the DisConn:
        // the peer will never write into it, so it is over, cancelled or
        // not (the reader must not wait for a SinkCancelAck the peer may
        // have no credit to send).
        const bool stream_end = (rx.kind == SDP_RX_DATA && rx.payload_len > 0) ||
                                rx.kind == SDP_RX_DISCONN ||
                                (rx.kind == SDP_RX_ZCOPY && rx.mid == SDP_MID_SRC_AVAIL);
        if (zc_ && stream_end) {
            const unsigned adv = zc_status(d).adv_state;
            if (adv == SDP_ZC_ACTIVE || adv == SDP_ZC_CANCELLING)
                fail(d.name + ": mid " + std::to_string(rx.mid) +
                     " did not end our SinkAvail (state " + std::to_string(adv) + ")");
        }
        // Nothing for the reader (unless it is data, below): the buffer is
        // free again at once, wherever its slot is.
        slot.state = RxState::kConsumed;
        switch (rx.kind) {
        case SDP_RX_DATA:
            if (rx.payload_len == 0)
                break; // a credit update
            if (d.disconn_rcvd)
                fail(d.name + ": data accepted after DisConn");
            if (rx.urgent != 0)
                d.urgent_seen.push_back(d.rx_stream + rx.payload_len - 1);
            d.unread += rx.payload_len;
            d.rx_bytes += rx.payload_len;
            d.rx_stream += rx.payload_len;
            if (rx.ack_timer != 0)
                d.ack_timer = true;
            if (d.offer.present)
                fail(d.name + ": Data accepted while the SrcAvail before it is not over");
            if (coalesce(d, at, rx)) {
                d.stats.coalesced++;
                break;
            }
            slot.state = RxState::kHeld;
            d.n_held++;
            slot.off = rx.payload_off;
            slot.end = rx.payload_off + rx.payload_len;
            break;
        case SDP_RX_DISCONN:
            if (d.disconn_rcvd)
                fail(d.name + ": second DisConn accepted");
            d.disconn_rcvd = true;
            close_event(s, SDP_CLOSE_PEER_DISCONN);
            // DisConn follows all data: everything the peer wrote is here.
            if (d.rx_stream != peer(s).limit || !peer(s).shut)
                fail(d.name + ": DisConn after " + std::to_string(d.rx_stream) + " bytes of " +
                     std::to_string(peer(s).limit));
            break;
        case SDP_RX_ZCOPY:
            zc_received(s, slot.msg, rx);
            break;
        default:
            fail(d.name + ": unexpected receive kind " + std::to_string(rx.kind));
            return;
        }
    }

    // sdp_rx_coalesce(): a small message joins the newest unread data buffer
    // before its slot if it fits there (the buffer's size counts from its
    // start, header included); its own buffer is then free.
    static bool coalesce(Side& d, std::size_t at, const sdp_core_rx& rx)
    {
        if (!d.cfg.rx_coalesce || rx.payload_len > d.cfg.rx_buf_size / 8)
            return false;
        const RxSlot& slot = d.rx[at];
        for (std::size_t i = at; i-- > 0;) {
            RxSlot& prev = d.rx[i];
            if (prev.state == RxState::kConsumed)
                continue;
            if (prev.state != RxState::kHeld || prev.end + rx.payload_len > d.cfg.rx_buf_size)
                return false;
            const auto from = slot.msg.begin() + static_cast<long>(rx.payload_off);
            prev.msg.resize(prev.end);
            prev.msg.insert(prev.msg.end(), from, from + static_cast<long>(rx.payload_len));
            prev.end += rx.payload_len;
            return true;
        }
        return false;
    }

    // sdp_tx_complete()
    void tx_complete(int s)
    {
        Side& d = me(s);
        const Sent sent = d.sends.front();
        d.sends.pop_front();
        if (sent.ring == Ring::kRdma) {
            // The writer's buffer is free again (no core event).
            trace(Ev::kPoll, s, sent.payload, 0);
            if (!d.zw_active || d.zw_phase != ZcPhase::kWrite)
                fail(d.name + ": RDMA Write completion with no writer waiting for it");
            d.zw_completed = true;
            return;
        }
        if (sent.ring == Ring::kTx) {
            d.tx.pop_front();
            d.tx_posted--;
        } else {
            d.ctl_in_flight--;
        }
        sdp_core_tx_done(&d.conn, sent.mid);
        if (sent.mid == SDP_MID_DISCONN)
            close_event(s, SDP_CLOSE_DISCONN_DONE);
        trace(Ev::kPoll, s, sent.payload, sent.mid);
    }

    // sdp_close_event(): the state may only move along TCP's close
    // sequence, and never once closed.
    void close_event(int s, unsigned event)
    {
        Side& d = me(s);
        const unsigned next = sdp_core_close_state(d.tcp_state, event);
        if (d.tcp_state == SDP_TCP_CLOSE && next != SDP_TCP_CLOSE)
            fail(d.name + ": TCP state left CLOSE");
        d.tcp_state = next;
    }

    // ---- sdp_push() ---------------------------------------------------------------

    void pump(int s, unsigned extra_opts)
    {
        Side& d = me(s);
        // A zero-copy writer flushing what is queued ahead of its chunk
        // pushes on every wake-up.
        const bool flush = d.zw_active && d.zw_phase == ZcPhase::kFlush && !d.cfg.zcopy_skip_flush;
        const unsigned opts = (d.cfg.nodelay ? SDP_TXO_NODELAY : 0) |
                              (d.corked ? SDP_TXO_CORK : 0) | (flush ? SDP_TXO_PUSH : 0) |
                              extra_opts;
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
        while (!failed_ && tx_queued(d) > 0) {
            const Segment& seg = d.tx[d.tx_posted];
            const bool full =
                seg.data.size() >= seg_max || seg.urgent || d.tx_posted + 1 != d.tx.size();
            const sdp_core_tx_verdict v = sdp_core_tx_decide(
                &d.conn, static_cast<unsigned>(seg.data.size()), full ? 1 : 0, opts);
            if (v == SDP_TX_CLOSED) {
                fail(d.name + ": SDP_TX_CLOSED with data queued");
                return;
            }
            if (v != SDP_TX_POST)
                break;
            // The control reserve: data never takes the last credits, by the
            // core's count nor by the real one.
            if (sdp_core_tx_credits(&d.conn) <= kReserve || true_credits(s) <= kReserve) {
                fail(d.name + ": data posted into the control reserve (core credits " +
                     std::to_string(sdp_core_tx_credits(&d.conn)) + ", real " +
                     std::to_string(true_credits(s)) + ")");
                return;
            }
            d.tx_posted++;
            post(s, Ring::kTx, SDP_MID_DATA, seg.data, seg.urgent ? SDP_FLAG_OOB_PRES : 0);
        }
        if (failed_)
            return;
        // As sdp_push(): every control message due goes while the control
        // ring has room (several can be due at once: a zero-copy
        // completion, then SendSM), until one cannot be posted.
        for (;;) {
            const int mid =
                sdp_core_control_due(&d.conn, static_cast<unsigned>(tx_queued(d)), posted_rx(s));
            if (failed_ || mid == 0 || d.ctl_in_flight >= d.cfg.ctl_bufs)
                return;
            const std::size_t sends_before = d.stats.sends;
            if (mid == SDP_MID_DISCONN) {
                if (tx_queued(d) > 0 || !d.shut)
                    fail(d.name + ": DisConn due with data queued or no shutdown");
                post(s, Ring::kCtl, SDP_MID_DISCONN, {}, 0);
            } else if (mid == SDP_MID_DATA) {
                post(s, Ring::kCtl, SDP_MID_DATA, {}, 0);
            } else if (zc_control_owed(s, static_cast<unsigned>(mid))) {
                post(s, Ring::kCtl, static_cast<unsigned>(mid), {}, 0);
            }
            if (d.stats.sends == sends_before)
                return; // not posted (no credit, or not owed)
        }
    }

    void post(int s, Ring ring, unsigned mid, const Bytes& payload, unsigned flags)
    {
        Side& d = me(s);
        if (!may_post(s, mid, payload.size()))
            return;
        const unsigned hdr = hdr_size(mid);
        Bytes msg(hdr + payload.size());
        const int n = sdp_core_tx_build(&d.conn, msg.data(), mid,
                                        static_cast<unsigned>(payload.size()), flags, posted_rx(s));
        if (n != static_cast<int>(hdr)) {
            fail(d.name + ": tx_build of mid " + std::to_string(mid) +
                 " failed: " + sdp_core_err_name(n));
            return;
        }
        std::copy(payload.begin(), payload.end(), msg.begin() + n);
        if (mid != SDP_MID_DATA && mid != SDP_MID_DISCONN) {
            zc_control_sent(s, mid, msg);
            d.stats.last_credit += sdp_core_tx_credits(&d.conn) == 0 ? 1 : 0;
        }
        send(s, ring, mid, std::move(msg), payload.size(), flags);
    }

    // Messages a side may still send after its DisConn: credit updates and
    // what a sink says (it still reads).  Not SinkCancelAck: the DisConn
    // ended the sink's advertisement.
    static bool after_disconn_ok(unsigned mid, std::size_t payload)
    {
        switch (mid) {
        case SDP_MID_DATA:
            return payload == 0;
        case SDP_MID_RDMA_RD_COMPL:
        case SDP_MID_SEND_SM:
        case SDP_MID_SINK_AVAIL:
        case SDP_MID_SINK_AVAIL_CANCEL:
            return true;
        default:
            return false;
        }
    }

    bool may_post(int s, unsigned mid, std::size_t payload)
    {
        const Side& d = me(s);
        // The credits exist to prevent this: a SEND with no receive buffer
        // waiting for it at the peer (RNR).
        if (true_credits(s) <= 0) {
            fail(d.name + ": RNR: SEND of mid " + std::to_string(mid) + " while " + peer(s).name +
                 " has no free receive buffer for it (core credits " +
                 std::to_string(sdp_core_tx_credits(&d.conn)) + ")");
            return false;
        }
        if (d.disconn_posted && d.disconn_rcvd) {
            fail(d.name + ": mid " + std::to_string(mid) +
                 " posted after both DisConns: nothing is left to say");
            return false;
        }
        if (d.disconn_posted && !after_disconn_ok(mid, payload)) {
            fail(d.name + ": mid " + std::to_string(mid) + " with " + std::to_string(payload) +
                 " bytes posted after DisConn");
            return false;
        }
        // A receive buffer of the peer must hold the whole message.
        if (hdr_size(mid) + payload > peer(s).cfg.rx_buf_size) {
            fail(d.name + ": mid " + std::to_string(mid) + " of " +
                 std::to_string(hdr_size(mid) + payload) + " bytes for " + peer(s).name +
                 "'s receive buffers of " + std::to_string(peer(s).cfg.rx_buf_size));
            return false;
        }
        return true;
    }

    // Post a built SEND.
    void send(int s, Ring ring, unsigned mid, Bytes msg, std::size_t payload, unsigned flags)
    {
        Side& d = me(s);
        trace(Ev::kPost, s, payload, mid);
        if (ring == Ring::kCtl)
            d.ctl_in_flight++;
        d.sends.push_back({ring, mid, static_cast<unsigned>(payload), SendState::kOnWire});
        WireMsg m;
        m.msg = std::move(msg);
        wire(s).push_back(std::move(m));
        sends_on_wire_[s]++;
        d.stats.sends++;
        if (d.disconn_posted)
            d.stats.after_disconn++;
        if (mid == SDP_MID_DISCONN) {
            d.disconn_posted = true;
            close_event(s, SDP_CLOSE_DISCONN_POSTED);
        } else if (mid != SDP_MID_DATA) {
            // zero copy: counted where it is built
        } else if (payload == 0) {
            d.stats.updates++;
        } else {
            d.stats.data_sends++;
            d.data_posted += payload;
            if ((flags & SDP_FLAG_OOB_PRES) != 0)
                d.stats.urgent_sent++;
        }
    }

    // ---- checks --------------------------------------------------------------------------

    static constexpr long kReserve = 2;

    void check_invariants()
    {
        for (int s = 0; s < 2 && !failed_; s++) {
            const Side& d = me(s);
            const unsigned credits = sdp_core_tx_credits(&d.conn);
            if (true_credits(s) < 0)
                fail(d.name + ": more messages on the wire than buffers posted at the peer");
            else if (static_cast<long>(credits) > true_credits(s))
                fail(d.name + ": core credits " + std::to_string(credits) + " exceed the real " +
                     std::to_string(true_credits(s)));
            if (rx_bufs_in_use(d) > d.cfg.rx_bufs || d.rx.size() > rx_slots(d) ||
                d.tx.size() > d.cfg.tx_bufs || d.ctl_in_flight > d.cfg.ctl_bufs ||
                d.tx_posted > d.tx.size())
                fail(d.name + ": ring accounting broken");
            std::size_t data_out = 0;
            for (const Sent& sent : d.sends)
                data_out += sent.mid == SDP_MID_DATA ? 1 : 0;
            if (sdp_core_data_in_flight(&d.conn) != data_out) {
                fail(d.name + ": core data_in_flight " +
                     std::to_string(sdp_core_data_in_flight(&d.conn)) +
                     ", Data SENDs outstanding " + std::to_string(data_out));
            }
            if (!failed_ && zc_)
                observe_zc(s);
        }
    }

    bool finished() const
    {
        for (int s = 0; s < 2; s++) {
            const Side& d = sides_[s];
            if (!d.shut || !d.disconn_posted || !d.eof || !d.tx.empty() || !d.sends.empty() ||
                d.n_unpolled > 0 || !wire_[s].empty() || d.zw_active || d.rd != RdState::kIdle)
                return false;
        }
        return true;
    }

    void final_checks()
    {
        for (int s = 0; s < 2 && !failed_; s++) {
            const Side& d = me(s);
            const Side& p = peer(s);
            if (d.got.size() != p.limit ||
                !std::equal(d.got.begin(), d.got.end(), source(p).begin())) {
                fail(d.name + " did not read exactly what " + p.name + " wrote");
            } else if (d.urgent_seen != p.urgent_written) {
                fail(d.name + " saw " + std::to_string(d.urgent_seen.size()) + " urgent marks, " +
                     p.name + " sent " + std::to_string(p.urgent_written.size()) +
                     " (or at other offsets)");
            } else if (sdp_core_control_due(&d.conn, 0, posted_rx(s)) != 0) {
                fail(d.name + ": a control message is still due at the end");
            } else if (d.rx_stream != p.limit) {
                fail(d.name + ": received " + std::to_string(d.rx_stream) + " stream bytes of " +
                     std::to_string(p.limit));
            }
            const sdp_core_zc_status st = zc_status(d);
            if (st.src_state != SDP_ZC_IDLE || st.adv_state != SDP_ZC_IDLE || st.rsa_left != 0 ||
                st.rsa_reading != 0 || st.wr_compl_pending != 0 || d.src.live || d.sink.live ||
                d.offer.present) {
                fail(d.name + ": zero-copy state left at the end");
            } else if (d.sms_owed != 0 || d.acks_owed != 0 || d.acks_awaited != 0) {
                fail(d.name + ": a cancel was never answered (" + std::to_string(d.sms_owed) +
                     " SendSM, " + std::to_string(d.acks_owed) + " SinkCancelAck owed, " +
                     std::to_string(d.acks_awaited) + " awaited)");
            } else if (d.rd_unreported != 0 || d.wr_unreported != 0) {
                fail(d.name + ": RDMA transfers never reported");
            }
            const unsigned want = SDP_CS_ESTABLISHED | SDP_CS_SHUT_REQUESTED | SDP_CS_DISCONN_SENT |
                                  SDP_CS_DISCONN_RCVD;
            if (sdp_core_state(&d.conn) != want)
                fail(d.name + ": final state " + std::to_string(sdp_core_state(&d.conn)));
            // Both DisConns through and ours completed: the side that shut
            // down first waits in TIME_WAIT for the CM disconnect, the
            // other is closed (as TCP's LAST_ACK after the last ACK).
            const unsigned tcp_want = d.shut_after_peer ? SDP_TCP_CLOSE : SDP_TCP_TIME_WAIT;
            if (d.tcp_state != tcp_want)
                fail(d.name + ": TCP state " + std::to_string(d.tcp_state) +
                     " after both DisConns, not " + std::to_string(tcp_want));
        }
    }

    std::string dump() const
    {
        std::ostringstream o;
        for (int s = 0; s < 2; s++) {
            const Side& d = sides_[s];
            const SideConfig& c = d.cfg;
            std::size_t stuck = 0;
            for (const RxSlot& slot : d.rx)
                stuck += slot.state == RxState::kConsumed ? 1 : 0;
            o << d.name << ": R=" << c.rx_bufs << " B=" << c.rx_buf_size << " T=" << c.tx_bufs
              << " txbuf=" << c.tx_buf_size << " C=" << c.ctl_bufs
              << (c.nodelay ? " nodelay" : " nagle") << (c.cork ? "+cork" : "")
              << (c.cork_until_eof ? " cork-until-EOF" : "") << " slots/buf=" << c.rx_slots_per_buf
              << (c.echo ? " echo" : "") << " seg_max=" << sdp_core_seg_max(&d.conn) << "\n"
              << "   core: state=0x" << std::hex << sdp_core_state(&d.conn) << std::dec
              << " credits=" << sdp_core_tx_credits(&d.conn) << " (real " << true_credits(s)
              << ") data_in_flight=" << sdp_core_data_in_flight(&d.conn) << " control_due="
              << sdp_core_control_due(&d.conn, static_cast<unsigned>(tx_queued(d)), posted_rx(s))
              << "\n   tx: written " << d.written << "/"
              << (d.limit == kUnknown ? std::string("?") : std::to_string(d.limit))
              << (d.cfg.echo ? " of " + std::to_string(d.got.size()) + " read" : "")
              << (d.shut ? " shut" : "") << (d.corked ? " corked" : "") << ", ring " << d.tx.size()
              << "/" << c.tx_bufs << " (" << d.tx_posted << " posted, " << tx_queued(d)
              << " queued";
            if (tx_queued(d) > 0)
                o << ", next " << d.tx[d.tx_posted].data.size() << " B";
            o << "), ctl " << d.ctl_in_flight << "/" << c.ctl_bufs << ", sends not completed "
              << d.sends.size() << (d.disconn_posted ? ", DisConn posted" : "")
              << "\n   rx: posted_rx " << posted_rx(s) << " (empty " << d.n_hw << ", unpolled "
              << d.n_unpolled << "), unread " << d.n_held << " bufs/" << d.unread << " B, slots "
              << d.rx.size() << "/"
              << (c.rx_slots_per_buf == kNoSlotLimit ? std::string("any")
                                                     : std::to_string(rx_slots(d)))
              << " (" << stuck << " freed), read " << d.got.size()
              << (d.disconn_rcvd ? ", DisConn rcvd" : "") << (d.eof ? ", EOF" : "")
              << (d.paused > 0 ? " (reader asleep)" : "") << "\n   stats: writes " << d.stats.writes
              << " sends " << d.stats.sends << " data " << d.stats.data_sends << " updates "
              << d.stats.updates << " after DisConn " << d.stats.after_disconn << "\n";
            if (c.zcopy_thresh > 0 || d.stats.src_avails + d.stats.sink_avails > 0 ||
                d.offer.present) {
                const sdp_core_zc_status st = zc_status(d);
                static const char* const kPhase[] = {"flush", "rdma-write", "srcavail"};
                static const char* const kRd[] = {"idle", "rdma-read", "sinkavail"};
                o << "   zc: thresh " << c.zcopy_thresh << " chunk " << c.zcopy_chunk
                  << (c.sink_avail ? " sinkavail" : "")
                  << (c.write_all_before_read ? " write-all-before-read" : "") << "; writer ";
                if (d.zw_active) {
                    o << kPhase[static_cast<unsigned>(d.zw_phase)] << " to " << d.zw_end
                      << (d.zw_cancelled ? " cancelled" : "") << (d.zw_sm ? " SendSM" : "")
                      << (d.zw_done ? " done" : "");
                } else {
                    o << "idle";
                }
                o << (d.bcopy_end > d.written ? ", bcopy to " + std::to_string(d.bcopy_end) : "")
                  << (d.bcopy_budget > 0 ? " budget " + std::to_string(d.bcopy_budget) : "")
                  << "; src reg " << (d.src.live ? "live" : "dead") << " key " << d.src.rkey << " ["
                  << d.src.off << "+" << d.src.len << "] read " << d.src.done << "\n       reader "
                  << kRd[static_cast<unsigned>(d.rd)] << (d.adv_cancelled ? " cancelled" : "")
                  << (d.reader_waiting ? " waiting" : " not waiting") << "; sink reg "
                  << (d.sink.live ? "live" : "dead") << " key " << d.sink.rkey << " [" << d.sink.off
                  << "+" << d.sink.len << "] landed " << d.sink.done << "; offer "
                  << (d.offer.present ? "" : "none ") << "key " << d.offer.rkey << " read "
                  << d.offer.read << "/" << d.offer.len << (d.offer.stopped ? " stopped" : "")
                  << "; owed SendSM " << d.sms_owed << " ack " << d.acks_owed << " awaited "
                  << d.acks_awaited << "\n       core: src " << st.src_state << " len "
                  << st.src_len << " acked " << st.src_acked
                  << (st.src_sink_stopped != 0 ? " sink-stopped" : "") << ", rsa_left "
                  << st.rsa_left << (st.rsa_reading != 0 ? " reading" : "") << ", adv "
                  << st.adv_state << " written " << st.adv_written
                  << (st.psink_usable != 0 ? ", peer sink usable" : "")
                  << (st.wr_compl_pending != 0 ? ", RdmaWrCompl due" : "") << "\n"
                  << "       stats: SrcAvail " << d.stats.src_avails << " SinkAvail "
                  << d.stats.sink_avails << " reads " << d.stats.rdma_reads << "/"
                  << d.stats.read_bytes << " B writes " << d.stats.rdma_writes << "/"
                  << d.stats.write_bytes << " B SendSM " << d.stats.send_sms << "\n";
            }
            o << "   wire " << d.name << "->" << sides_[1 - s].name << ": " << wire_[s].size()
              << " messages\n";
        }
        o << "last events (step side event bytes [mid] credits/posted_rx after):\n";
        const std::size_t n = std::min<std::size_t>(trace_pos_, trace_.size());
        for (std::size_t i = trace_pos_ - n; i < trace_pos_; i++) {
            const Trace& t = trace_[i % trace_.size()];
            o << "   " << t.step << " " << sides_[t.side].name << " " << ev_name(t.ev) << " "
              << t.arg;
            if (t.ev == Ev::kPost || t.ev == Ev::kArrive || t.ev == Ev::kPoll || t.ev == Ev::kAck)
                o << " [0x" << std::hex << t.arg2 << std::dec << "]";
            if (t.ev == Ev::kWrite && t.arg2 != 0) {
                static const char* const kHow[] = {"", " OOB", " zcopy", " rest-by-bcopy",
                                                   " chunk-by-bcopy"};
                o << kHow[t.arg2];
            }
            if (t.ev == Ev::kRead && t.arg2 != 0)
                o << (t.arg2 == 1 ? " RDMA-Read" : t.arg2 == 2 ? " PEEK-abandon" : " SinkAvail");
            if (t.ev == Ev::kSignal)
                o << (t.arg2 == 1 ? " writer" : " reader");
            if (t.ev == Ev::kZcWrite && t.arg2 != 0)
                o << (t.arg2 == 1 ? " sink-stopped" : t.arg2 == 2 ? " no-credit" : " too-big");
            o << " c" << t.credits << "/p" << t.posted << "\n";
        }
        return o.str();
    }

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

#endif // SDP_TESTS_UNIT_SIM_WORLD_H
