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
    enum class Ring : unsigned char { kTx, kCtl };
    enum class SendState : unsigned char { kOnWire, kArrived, kAcked };
    struct Sent {
        Ring ring;
        unsigned mid;
        unsigned payload;
        SendState state;
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
        bool shut = false;
        bool ack_timer = false; // delayed-ack timer armed (sdp_arm_ack_timer)
        bool corked = false;
        bool disconn_posted = false;
        bool disconn_rcvd = false;
        bool eof = false;
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
        kPost, // not an event: traced when a SEND is posted
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
        static const char* const kNames[] = {"write", "read",   "arrive",   "ack",       "poll",
                                             "cork",  "uncork", "shutdown", "ack-timer", "post"};
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
            p += d.written + d.data_posted + d.got.size();
            for (bool flag : {d.disconn_posted, d.disconn_rcvd, d.eof, d.shut})
                p += flag ? 1 : 0;
        }
        return p;
    }

    Side& me(int s) { return sides_[s]; }
    Side& peer(int s) { return sides_[1 - s]; }

    std::deque<Bytes>& wire(int s) { return wire_[s]; }

    // What the core must never exceed: the peer's empty posted buffers minus
    // our messages already on their way to them.
    long true_credits(int s) const
    {
        return static_cast<long>(sides_[1 - s].n_hw) - static_cast<long>(wire_[s].size());
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
            return !d.shut && pending(d) > 0 && write_room(d) > 0;
        case Ev::kShutdown:
            return !d.shut && d.written == d.limit && (!d.cfg.cork_until_eof || d.eof);
        case Ev::kRead:
            // An echo server reads only with nothing left to write back.
            return d.paused == 0 && (!d.cfg.echo || pending(d) == 0) &&
                   (d.unread > 0 || (d.disconn_rcvd && !d.eof));
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
            return d.cfg.cork && !d.corked && enabled(Ev::kWrite, s);
        case Ev::kUncork:
            return d.corked &&
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
        for (int d = 0; d < 2; d++)
            for (Ev app : {Ev::kWrite, Ev::kRead, Ev::kCork, Ev::kUncork, Ev::kShutdown})
                app_can_act = app_can_act || (enabled(app, d) && weight(app) > 0);
        const bool transport =
            ev == Ev::kArrive || ev == Ev::kAck || ev == Ev::kPoll || ev == Ev::kAckTimer;
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
            sdp_core_shutdown_send(&me(s).conn);
            pump(s, SDP_TXO_PUSH);
            break;
        default:
            break;
        }
        return true;
    }

    // ---- application -----------------------------------------------------------

    // sdp_sendmsg(): fill segments in place, push when one is full, push at
    // the end (CORK for MSG_MORE).
    void app_write(int s)
    {
        Side& d = me(s);
        // An echo server writes back everything it has.
        std::size_t n = d.cfg.echo ? pending(d) : rng_.range(d.cfg.min_write, d.cfg.max_write);
        n = std::min({n, pending(d), write_room(d)}); // a short write
        if (!d.cfg.echo && d.cfg.shutdown_per_mille > 0 && rng_.per_mille(d.cfg.shutdown_per_mille))
            d.limit = d.written + n; // the last write before an early shutdown
        const bool urgent =
            !d.cfg.echo && d.cfg.urgent_per_mille > 0 && rng_.per_mille(d.cfg.urgent_per_mille);
        const bool more = d.cfg.more_per_mille > 0 && rng_.per_mille(d.cfg.more_per_mille);
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
        trace(Ev::kWrite, s, n, urgent ? 1 : 0);
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
        d.stats.writes++;
        pump(s, more ? SDP_TXO_CORK : 0);
    }

    // sdp_recvmsg(): read in order, free consumed buffers, then refill and
    // push.  EOF once the peer's DisConn is in and nothing is left to read.
    void app_read(int s)
    {
        Side& d = me(s);
        if (d.unread == 0) {
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
        const Side& p = peer(s);
        const std::size_t from = d.got.size() - taken;
        if (d.got.size() > p.written ||
            !std::equal(d.got.begin() + static_cast<long>(from), d.got.end(),
                        source(p).begin() + static_cast<long>(from)))
            fail(d.name + ": read bytes [" + std::to_string(from) + ", " +
                 std::to_string(d.got.size()) + ") differ from what " + p.name + " wrote");
        if (d.cfg.pause_per_mille > 0 && rng_.per_mille(d.cfg.pause_per_mille))
            d.paused = rng_.range(1, d.cfg.pause_steps);
        release_rx(s);
        post_recvs(s);
        // Everything read: the reader goes back to waiting for more, which
        // asks for the acknowledgement a Nagle-holding writer needs.
        if (d.unread == 0)
            sdp_core_ack_request(&d.conn);
        pump(s, 0);
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
        Bytes msg = std::move(wire(s).front());
        wire(s).pop_front();
        trace(Ev::kArrive, s, msg.size(), msg[0]);
        if (p.n_hw == 0) {
            fail("RNR: a message from " + me(s).name + " arrived with no receive buffer posted");
            return;
        }
        // The first posted buffer: the posted ones are at the end, in order.
        RxSlot& slot = p.rx[p.rx.size() - p.n_hw];
        slot.state = RxState::kUnpolled;
        slot.msg = std::move(msg);
        p.n_hw--;
        p.n_unpolled++;
        for (Sent& sent : me(s).sends) {
            if (sent.state == SendState::kOnWire) {
                sent.state = SendState::kArrived;
                break;
            }
        }
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
                d.urgent_seen.push_back(d.rx_bytes + rx.payload_len - 1);
            d.unread += rx.payload_len;
            d.rx_bytes += rx.payload_len;
            if (rx.ack_timer != 0)
                d.ack_timer = true;
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
            // DisConn follows all data: everything the peer wrote is here.
            if (d.rx_bytes != peer(s).limit || !peer(s).shut)
                fail(d.name + ": DisConn after " + std::to_string(d.rx_bytes) + " bytes of " +
                     std::to_string(peer(s).limit));
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
        if (sent.ring == Ring::kTx) {
            d.tx.pop_front();
            d.tx_posted--;
        } else {
            d.ctl_in_flight--;
        }
        sdp_core_tx_done(&d.conn, sent.mid);
        trace(Ev::kPoll, s, sent.payload, sent.mid);
    }

    // ---- sdp_push() ---------------------------------------------------------------

    void pump(int s, unsigned extra_opts)
    {
        Side& d = me(s);
        const unsigned opts =
            (d.cfg.nodelay ? SDP_TXO_NODELAY : 0) | (d.corked ? SDP_TXO_CORK : 0) | extra_opts;
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
        const int mid =
            sdp_core_control_due(&d.conn, static_cast<unsigned>(tx_queued(d)), posted_rx(s));
        if (mid == 0 || d.ctl_in_flight >= d.cfg.ctl_bufs)
            return;
        if (mid == SDP_MID_DISCONN) {
            if (tx_queued(d) > 0 || !d.shut)
                fail(d.name + ": DisConn due with data queued or no shutdown");
            post(s, Ring::kCtl, SDP_MID_DISCONN, {}, 0);
        } else if (mid == SDP_MID_DATA) {
            post(s, Ring::kCtl, SDP_MID_DATA, {}, 0);
        } else {
            fail(d.name + ": control_due returned mid " + std::to_string(mid));
        }
    }

    void post(int s, Ring ring, unsigned mid, const Bytes& payload, unsigned flags)
    {
        Side& d = me(s);
        // The credits exist to prevent this: a SEND with no receive buffer
        // waiting for it at the peer (RNR).
        if (true_credits(s) <= 0) {
            fail(d.name + ": RNR: SEND of mid " + std::to_string(mid) + " while " + peer(s).name +
                 " has no free receive buffer for it (core credits " +
                 std::to_string(sdp_core_tx_credits(&d.conn)) + ")");
            return;
        }
        if (d.disconn_posted && d.disconn_rcvd) {
            fail(d.name + ": mid " + std::to_string(mid) +
                 " posted after both DisConns: nothing is left to say");
            return;
        }
        if (d.disconn_posted && (mid != SDP_MID_DATA || !payload.empty())) {
            fail(d.name + ": mid " + std::to_string(mid) + " with " +
                 std::to_string(payload.size()) + " bytes posted after DisConn");
            return;
        }
        Bytes msg(SDP_BSDH_SIZE + payload.size());
        const int n = sdp_core_tx_build(&d.conn, msg.data(), mid,
                                        static_cast<unsigned>(payload.size()), flags, posted_rx(s));
        if (n != SDP_BSDH_SIZE) {
            fail(d.name + ": tx_build of mid " + std::to_string(mid) +
                 " failed: " + sdp_core_err_name(n));
            return;
        }
        std::copy(payload.begin(), payload.end(), msg.begin() + n);
        trace(Ev::kPost, s, payload.size(), mid);
        if (ring == Ring::kCtl)
            d.ctl_in_flight++;
        d.sends.push_back({ring, mid, static_cast<unsigned>(payload.size()), SendState::kOnWire});
        wire(s).push_back(std::move(msg));
        d.stats.sends++;
        if (d.disconn_posted)
            d.stats.after_disconn++;
        if (mid == SDP_MID_DISCONN) {
            d.disconn_posted = true;
        } else if (payload.empty()) {
            d.stats.updates++;
        } else {
            d.stats.data_sends++;
            d.data_posted += payload.size();
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
        }
    }

    bool finished() const
    {
        for (int s = 0; s < 2; s++) {
            const Side& d = sides_[s];
            if (!d.shut || !d.disconn_posted || !d.eof || !d.tx.empty() || !d.sends.empty() ||
                d.n_unpolled > 0 || !wire_[s].empty())
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
            }
            const unsigned want = SDP_CS_ESTABLISHED | SDP_CS_SHUT_REQUESTED | SDP_CS_DISCONN_SENT |
                                  SDP_CS_DISCONN_RCVD;
            if (sdp_core_state(&d.conn) != want)
                fail(d.name + ": final state " + std::to_string(sdp_core_state(&d.conn)));
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
              << d.stats.updates << " after DisConn " << d.stats.after_disconn << "\n   wire "
              << d.name << "->" << sides_[1 - s].name << ": " << wire_[s].size() << " messages\n";
        }
        o << "last events (step side event bytes [mid] credits/posted_rx after):\n";
        const std::size_t n = std::min<std::size_t>(trace_pos_, trace_.size());
        for (std::size_t i = trace_pos_ - n; i < trace_pos_; i++) {
            const Trace& t = trace_[i % trace_.size()];
            o << "   " << t.step << " " << sides_[t.side].name << " " << ev_name(t.ev) << " "
              << t.arg;
            if (t.ev == Ev::kPost || t.ev == Ev::kArrive || t.ev == Ev::kPoll || t.ev == Ev::kAck)
                o << " [0x" << std::hex << t.arg2 << std::dec << "]";
            if (t.ev == Ev::kWrite && t.arg2 != 0)
                o << " OOB";
            o << " c" << t.credits << "/p" << t.posted << "\n";
        }
        return o.str();
    }

    Rng rng_;
    std::uint64_t seed_;
    Weights w_;
    std::array<Side, 2> sides_;
    std::array<std::deque<Bytes>, 2> wire_; // [s]: from side s to the other
    std::size_t steps_ = 0;
    // Transport events since an application event was last possible.
    static constexpr std::size_t kMaxIdleSteps = 1000;
    std::size_t idle_steps_ = 0;
    bool failed_ = false;
    std::string error_;
    std::array<Trace, 40> trace_{};
    std::size_t trace_pos_ = 0;
};

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_WORLD_H
