// SPDX-License-Identifier: GPL-2.0
//
// The simulation's scheduler (sim_world.h): which events are enabled and
// their weights, one step (a seeded random pick among them) and run().
// Out-of-line definitions of World's member functions (sim_world_decl.h).
#ifndef SDP_TESTS_UNIT_SIM_SCHEDULER_H
#define SDP_TESTS_UNIT_SIM_SCHEDULER_H

#include "sim_world_decl.h"

#include <algorithm>
#include <string>

namespace sdpsim {

// ---- one step --------------------------------------------------------------------

// Grows with every step of the transfer the applications can see.
inline std::size_t World::progress() const
{
    std::size_t p = 0;
    for (const Side& d : sides_) {
        p += d.written + d.data_posted + d.got.size() + d.rx_stream;
        for (bool flag : {d.disconn_posted, d.disconn_rcvd, d.eof, d.shut})
            p += flag ? 1 : 0;
    }
    return p;
}

inline bool World::enabled(Ev ev, int s) const
{
    const Side& d = sides_[s];
    switch (ev) {
    case Ev::kWrite:
        // A blocking writer with a big write starts it whatever the
        // ring holds (zero copy); the parts of one that go by bcopy go
        // when there is room.
        return !d.shut && !d.zw_active && pending(d) > 0 &&
               (write_room(d) > 0 ||
                (zcopy_writer(d) && d.bcopy_end <= d.written && pending(d) >= d.cfg.zcopy_thresh &&
                 d.cfg.max_write >= d.cfg.zcopy_thresh));
    case Ev::kShutdown:
        return !d.shut && !d.zw_active && d.written == d.limit && (!d.cfg.cork_until_eof || d.eof);
    case Ev::kRead: {
        // An echo server reads only with nothing left to write back.
        if (d.rd != RdState::kIdle || !reader_active(d))
            return false;
        return d.unread > 0 || (d.disconn_rcvd && !d.eof) || (d.offer.present && zc_readable(d)) ||
               may_advertise(s);
    }
    case Ev::kZcWrite:
        return d.zw_active && zc_writer_may_go(s);
    case Ev::kSignal:
        return w_.signal > 0 && (d.zw_active || d.rd == RdState::kAdv) && zc_interruptible(d);
    case Ev::kAdvWake:
        return d.rd == RdState::kAdv && (zc_adv_done(d) || adv_trimmable(d));
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

inline unsigned World::weight(Ev ev) const
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
inline unsigned World::collect(bool zero_weight, Choices* choices, unsigned* total) const
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

inline bool World::step()
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
    // The glue's idle timer fires during a writer's pause, with nothing
    // queued.
    for (int d = 0; d < 2; d++) {
        Side& side = sides_[d];
        if (side.cfg.idle_per_mille > 0 && side.paused > 0 && tx_queued(side) == 0 &&
            rng_.per_mille(50) && sdp_core_tx_idle(&side.conn) == 1) {
            side.stats.shrinks++;
            pump(d, 0);
        }
    }
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
        for (Ev app : {Ev::kWrite, Ev::kRead, Ev::kCork, Ev::kUncork, Ev::kShutdown, Ev::kZcWrite,
                       Ev::kSignal, Ev::kAdvWake})
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

// ---- the run ---------------------------------------------------------------------

// Run until both sides have read everything and seen EOF and the wire is
// quiet, or until the first failure.  Fails if nothing progresses (no
// byte written, posted or read, no DisConn or EOF) for longer than a
// reader can sleep plus stall_steps, or after max_steps in all.
inline Result World::run(std::size_t stall_steps, std::size_t max_steps)
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

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_SCHEDULER_H
