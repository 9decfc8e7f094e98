// SPDX-License-Identifier: GPL-2.0
//
// The simulation's host model of one side (sim_world.h), as the kernel glue
// does it: the receive, send and control rings, completions, the pump
// (sdp_push()), the application's reads and writes, and zero copy as
// source and sink.  Out-of-line definitions of World's member functions
// (sim_world_decl.h).
#ifndef SDP_TESTS_UNIT_SIM_HOST_H
#define SDP_TESTS_UNIT_SIM_HOST_H

#include "sim_world_decl.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sdpsim {

// ---- setup, and the glue's ring counts -------------------------------------------

inline void World::connect()
{
    for (int s = 0; s < 2; s++) {
        Side& d = me(s);
        sdp_core_conn_init(&d.conn, d.cfg.rx_buf_size, d.cfg.tx_buf_size);
        d.rx_size = d.cfg.rx_buf_size;
        d.rx_live = d.cfg.rx_bufs;
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
    if (sdp_core_build_hello(&me(0).conn, req, sizeof(req), 5001, 0) <= 0 ||
        sdp_core_on_hello(&me(1).conn, req, sizeof(req)) != 0 ||
        sdp_core_build_hello_ack(&me(1).conn, rep, sizeof(rep)) <= 0 ||
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

// The glue's posted_rx: posted and not completed (sdp_rx_posted).
inline unsigned short World::posted_rx(int s) const
{
    return static_cast<unsigned short>(sides_[s].n_unpolled + sides_[s].n_hw +
                                       sides_[s].cfg.overstate_posted);
}

inline std::size_t World::tx_queued(const Side& d) const
{
    return d.tx.size() - d.tx_posted;
}

// Bytes a write() could take now without blocking.
inline std::size_t World::write_room(const Side& d) const
{
    const std::size_t seg_max = sdp_core_seg_max(&d.conn);
    std::size_t room = (d.cfg.tx_bufs - d.tx.size()) * seg_max;
    if (tx_queued(d) > 0 && !d.tx.back().urgent)
        room += seg_max - d.tx.back().data.size();
    return room;
}

// What a side writes: its own stream, or an echo server's input.
inline const Bytes& World::source(const Side& d)
{
    return d.cfg.echo ? d.got : d.stream;
}

// Bytes the application still has to hand to write() now.
inline std::size_t World::pending(const Side& d)
{
    return (d.cfg.echo ? std::min(d.limit, d.got.size()) : d.limit) - d.written;
}

// ---- application -----------------------------------------------------------------

// sdp_sendmsg(): fill segments in place, push when one is full, push at
// the end (CORK for MSG_MORE).  A write of zcopy_thresh bytes or more
// goes by zero copy (zc_write_start); the parts of one that go by bcopy
// (a chunk short of credits, the rest after a SendSM) go on here.
inline void World::app_write(int s)
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
    if (d.cfg.idle_per_mille > 0 && rng_.per_mille(d.cfg.idle_per_mille))
        d.paused = static_cast<unsigned>(rng_.range(50, 500)); // the stream idles
}

inline void World::bcopy_write(int s, std::size_t n, bool urgent, bool more)
{
    Side& d = me(s);
    std::size_t off = d.written;
    const std::size_t end = d.written + n;
    while (off < end) {
        // Read each time, as sdp_tx_seg_cap(): a request to shrink the
        // peer's buffers may have gone in pump().
        const std::size_t seg_max = sdp_core_seg_max(&d.conn);
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
inline void World::app_read(int s)
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
            fail(d.name + ": EOF after " + std::to_string(d.got.size()) + " bytes, peer wrote " +
                 std::to_string(peer(s).limit));
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
    // Read it or give it up, as the core says (sdp_zc_recv_offer).
    if (!failed_ && n > 0 && d.unread == 0 && zc_status(d).rsa_left > 0) {
        unsigned flags = 0;
        if (taken == 0 && d.cfg.peek_per_mille > 0 && rng_.per_mille(d.cfg.peek_per_mille))
            flags |= SDP_RSA_PEEK;
        if (n < d.cfg.zcopy_thresh)
            flags |= SDP_RSA_SMALL;
        sdp_core_zc offer{};
        switch (sdp_core_rsa_next(&d.conn, flags, &offer)) {
        case SDP_RSA_READ:
            rd_start(s, static_cast<unsigned>(std::min<std::size_t>(n, offer.len)));
            break;
        case SDP_RSA_GIVE_UP_PEEK:
            give_up_offer(s, GiveUp::kPeek);
            break;
        case SDP_RSA_GIVE_UP_SMALL:
            give_up_offer(s, GiveUp::kSmallReads);
            break;
        default:
            fail(d.name + ": rsa_next found nothing to read in an offer with " +
                 std::to_string(zc_status(d).rsa_left) + " bytes left and no read");
            break;
        }
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

// ---- zero copy: what the glue and enabled() ask ----------------------------------

inline sdp_core_zc_status World::zc_status(const Side& d)
{
    sdp_core_zc_status st{};
    sdp_core_zc_query(&d.conn, &st);
    return st;
}

inline bool World::zcopy_writer(const Side& d)
{
    return d.cfg.zcopy_thresh > 0;
}

inline unsigned long long World::src_base(int s)
{
    return 0x100000000000ull * (s + 1);
}

// The reader is in recv() or about to call it.
inline bool World::reader_active(const Side& d)
{
    return d.paused == 0 && (!d.cfg.echo || pending(d) == 0) &&
           (!d.cfg.write_all_before_read || d.reader_started);
}

// Before every step: the reader of a write-all-before-read side starts
// once its writer is done or blocked on something other than its own
// SrcAvail; the core learns whether a reader waits in recv().
inline void World::sync_reader(int s)
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
inline bool World::may_post_avail(int s) const
{
    const Side& d = sides_[s];
    return d.ctl_in_flight < d.cfg.ctl_bufs && sdp_core_may_offer(&d.conn) != 0;
}

// Whether the core would build this SinkAvail now (tried on a copy of
// the connection).
inline bool World::sink_avail_ok(int s, unsigned len) const
{
    const Side& d = sides_[s];
    if (!may_post_avail(s))
        return false;
    sdp_core_conn c = d.conn;
    unsigned char hdr[SDP_SINK_AVAIL_SIZE];
    const sdp_core_zc zc{len, 1, kSinkBase};
    return sdp_core_tx_sink_avail(&c, hdr, sizeof(hdr), &zc) > 0;
}

inline unsigned World::chunk(const Side& d) const
{
    return static_cast<unsigned>(std::min<std::size_t>(d.cfg.zcopy_chunk, d.zw_end - d.written));
}

// What enabled() asks about zero copy.  Out of line (noinline): their
// locals would otherwise be enabled()'s, whose every call then sets up
// their ASan redzones, zero copy or not.
//
// Whether the blocked zero-copy writer has something to do (kFlush:
// sdp_zc_wait_tx_ready(); what it then does, zc_write_step() decides).
[[gnu::noinline]] inline bool World::zc_writer_may_go(int s) const
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

[[gnu::noinline]] inline bool World::zc_readable(const Side& d)
{
    return zc_status(d).rsa_left > 0;
}

[[gnu::noinline]] inline bool World::zc_adv_done(const Side& d)
{
    return zc_status(d).adv_state == SDP_ZC_DONE;
}

[[gnu::noinline]] inline bool World::zc_interruptible(const Side& d) const
{
    return src_interruptible(d) || adv_signalable(d);
}

inline bool World::src_interruptible(const Side& d) const
{
    return d.zw_active && d.zw_phase == ZcPhase::kSrc && !d.zw_cancelled &&
           zc_status(d).src_state == SDP_ZC_ACTIVE;
}

inline bool World::adv_interruptible(const Side& d) const
{
    return d.rd == RdState::kAdv && !d.adv_cancelled && zc_status(d).adv_state == SDP_ZC_ACTIVE;
}

// Some pieces written, some still unused and not cancelled yet.
[[gnu::noinline]] inline bool World::adv_trimmable(const Side& d)
{
    unsigned written = 0;
    return d.rd == RdState::kAdv && !d.adv_cancelled &&
           sdp_core_adv_end(&d.conn, &written) == SDP_ADV_PENDING && written != 0;
}

inline bool World::adv_signalable(const Side& d) const
{
    return d.cfg.reader_signals && adv_interruptible(d);
}

// A reader about to block for a big read advertises its buffer.
[[gnu::noinline]] inline bool World::may_advertise(int s) const
{
    const Side& d = sides_[s];
    return d.cfg.sink_avail && d.cfg.zcopy_thresh > 0 && !d.cfg.echo &&
           d.cfg.max_read >= d.cfg.zcopy_thresh && d.unread == 0 && !d.disconn_rcvd && !d.eof &&
           (d.cfg.sink_avail_after_shut || !d.shut) && d.adv_miss != d.rx_stream &&
           zc_status(d).rsa_left == 0 && sink_avail_ok(s, d.cfg.zcopy_thresh);
}

// ---- zero copy, source -----------------------------------------------------------

inline void World::zc_write_start(int s, std::size_t n)
{
    Side& d = me(s);
    trace(Ev::kWrite, s, n, 2);
    d.zw_end = d.written + n;
    zc_write_next(s);
}

// The next chunk of the write goes by zero copy: queued segments first.
inline void World::zc_write_next(int s)
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
inline void World::zc_write_on(int s)
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
inline void World::zc_to_bcopy(int s, std::size_t budget)
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
inline std::size_t World::budget_bytes(const Side& d, std::size_t limit) const
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

inline void World::zc_write_end(int s)
{
    Side& d = me(s);
    d.zw_active = false;
    d.stats.writes++;
    pump(s, 0);
}

inline void World::zc_write_step(int s)
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

// Whether the core refuses zero copy for the size of the receive buffers
// (tried on a copy of the connection); false after failing if it does
// while the zero-copy messages would fit.
inline bool World::too_big_for_zcopy(int s, unsigned len)
{
    const Side& d = me(s);
    sdp_core_conn c = d.conn;
    unsigned char hdr[SDP_SRC_AVAIL_HDR_SIZE];
    const sdp_core_zc zc{len, 1, src_base(s)};
    if (sdp_core_tx_src_avail(&c, hdr, sizeof(hdr), &zc) != -SDP_CORE_ETOOBIG)
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

inline void World::post_src_avail(int s, unsigned len)
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
    const int n =
        sdp_core_tx_src_avail(&d.conn, msg.data(), static_cast<unsigned>(msg.size()), &zc);
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
inline void World::src_done(int s)
{
    Side& d = me(s);
    observe_zc(s);
    // How it ended decides how the write goes on (sdp_zc_send).
    unsigned acked = 0;
    const int end = sdp_core_src_end(&d.conn, &acked);
    sdp_core_src_release(&d.conn);
    trace(Ev::kZcWrite, s, acked, end == SDP_SRC_STOPPED ? 1 : 0);
    if (zc_status(d).src_state != SDP_ZC_IDLE) {
        fail(d.name + ": src_release left the SrcAvail in state " +
             std::to_string(zc_status(d).src_state));
        return;
    }
    if (acked > d.src.len || (end == SDP_SRC_READ) != (acked == d.src.len)) {
        fail(d.name + ": SrcAvail ended as " + std::to_string(end) + " with " +
             std::to_string(acked) + " of " + std::to_string(d.src.len) + " bytes read");
        return;
    }
    d.written += acked;
    // Interrupted: the write returns what was delivered.
    if (d.zw_cancelled || d.written == d.zw_end) {
        zc_write_end(s);
    } else if (end == SDP_SRC_READ) {
        zc_write_on(s); // the next chunk
    } else if (end == SDP_SRC_STOPPED) {
        zc_to_bcopy(s, 0); // the rest of this write() by bcopy
    } else {
        fail(d.name + ": SrcAvail ended (" + std::to_string(end) + ") after " +
             std::to_string(acked) + " of " + std::to_string(d.src.len) +
             " bytes, neither cancelled by the writer nor stopped by SendSM");
    }
}

// A signal interrupts a zero-copy writer or reader asleep.
inline void World::signal(int s)
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

// ---- zero copy, sink -------------------------------------------------------------

// The grace period of the peer's offer ends with no reader at work: the
// core gives the offer up if nothing was read since the period began,
// else another period starts.
inline void World::grace_ends(int s)
{
    Side& d = me(s);
    switch (sdp_core_rsa_grace_end(&d.conn, 0)) {
    case SDP_GRACE_AGAIN:
        trace(Ev::kGrace, s, zc_status(d).rsa_left, 1);
        d.stats.grace_agains++;
        sdp_core_rsa_grace_start(&d.conn);
        break;
    case SDP_GRACE_ABANDONED:
        give_up_offer(s, GiveUp::kGrace);
        break;
    default:
        fail(d.name + ": the grace timer found no offer to read, rsa_left " +
             std::to_string(zc_status(d).rsa_left));
    }
}

// The reader gives the peer's offer up (MSG_PEEK, small reads, or the
// grace timer): SendSM, the bytes then come by bcopy.
inline void World::give_up_offer(int s, GiveUp why)
{
    Side& d = me(s);
    switch (why) {
    case GiveUp::kPeek:
        trace(Ev::kRead, s, 0, 2);
        d.stats.peeks++;
        break;
    case GiveUp::kSmallReads:
        trace(Ev::kRead, s, 0, 4);
        d.stats.small_read_sms++;
        break;
    case GiveUp::kGrace:
        trace(Ev::kGrace, s, zc_status(d).rsa_left);
        d.stats.grace_sms++;
        break;
    }
    sdp_core_rsa_abandon(&d.conn);
    d.offer.stopped = true;
    if (zc_status(d).rsa_left != 0)
        fail(d.name + ": an abandoned SrcAvail is still offered to the reader");
    pump(s, 0);
}

inline void World::advertise(int s)
{
    Side& d = me(s);
    const unsigned len = static_cast<unsigned>(rng_.range(d.cfg.zcopy_thresh, d.cfg.max_read));
    if (!avail_credits_ok(s, "SinkAvail") || !may_post(s, SDP_MID_SINK_AVAIL, 0))
        return;
    // As sdp_zc_recv_advertise(): a reader whose advertisements went unused skips some (adv_try):
    // it reads normally, and tries again once more bytes came.
    if (sdp_core_adv_try(&d.conn) == 0) {
        d.adv_miss = d.rx_stream;
        d.stats.adv_skipped++;
        return;
    }
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
    // In pieces of at most zcopy_chunk when it may use several, each its
    // own registration; the later ones only while the core has room, the
    // credits allow and two control buffers stay free (the glue's rule).
    const unsigned piece_max = d.cfg.sink_pieces > 1 ? std::max(d.cfg.zcopy_chunk, 1u) : len;
    const unsigned long long base =
        kSinkBase + static_cast<unsigned long long>(keys_.size()) * 0x1000000ull;
    d.sink = Reg{};
    d.sink.vaddr = base;
    d.sink.off = d.got.size();
    d.sink.live = true;
    unsigned at = 0;
    while (at < len) {
        const unsigned plen = std::min(piece_max, len - at);
        if (at != 0 &&
            (d.sink.pieces.size() >= d.cfg.sink_pieces || sdp_core_adv_room(&d.conn) == 0 ||
             d.ctl_in_flight + 2 >= d.cfg.ctl_bufs || !sink_avail_ok(s, plen)))
            break;
        Piece piece;
        piece.vaddr = base + at;
        piece.at = at;
        piece.len = plen;
        piece.rkey = new_key(s, piece.vaddr, plen);
        Bytes msg(SDP_SINK_AVAIL_SIZE);
        const sdp_core_zc zc{plen, piece.rkey, piece.vaddr};
        const int n =
            sdp_core_tx_sink_avail(&d.conn, msg.data(), static_cast<unsigned>(msg.size()), &zc);
        if (n != SDP_SINK_AVAIL_SIZE) {
            fail(d.name + ": tx_sink_avail failed for piece " +
                 std::to_string(d.sink.pieces.size()) + ": " + sdp_core_err_name(n));
            return;
        }
        if (at == 0) {
            d.sink.rkey = piece.rkey;
            d.rd = RdState::kAdv;
            d.adv_cancelled = false;
            d.adv_done = false;
            d.adv_acked = false;
            d.stats.late_sinks += d.disconn_posted ? 1 : 0;
        }
        d.sink.pieces.push_back(piece);
        d.stats.sink_avails++;
        d.stats.sink_pieces += at != 0 ? 1 : 0;
        send(s, Ring::kCtl, SDP_MID_SINK_AVAIL, std::move(msg), 0, 0);
        at += plen;
    }
    d.sink.len = at;
    d.sink.buf.resize(at);
    trace(Ev::kRead, s, at, 3);
    pump(s, 0);
}

inline void World::adv_cancel(int s)
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
inline void World::adv_wake(int s)
{
    Side& d = me(s);
    observe_zc(s);
    unsigned written = 0;
    if (sdp_core_adv_end(&d.conn, &written) != SDP_ADV_ENDED) {
        // A read that has bytes takes the pieces still unused back (the
        // glue's rule: a receive returns once it has what it needs).
        if (adv_trimmable(d)) {
            trace(Ev::kAdvWake, s, written, 1);
            d.stats.sink_trims++;
            adv_cancel(s);
            return;
        }
        fail(d.name + ": the reader woke with its SinkAvail not ended");
        return;
    }
    sdp_core_adv_release(&d.conn); // a hit or a miss for adv_try
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
    if (written != d.sink.done) {
        fail(d.name + ": the advertisement ended with " + std::to_string(written) +
             " bytes written, " + std::to_string(d.sink.done) + " landed");
        return;
    }
    d.got.insert(d.got.end(), d.sink.buf.begin(), d.sink.buf.begin() + written);
    d.stats.reads++;
    check_got(s, from);
    if (d.cfg.pause_per_mille > 0 && rng_.per_mille(d.cfg.pause_per_mille))
        d.paused = rng_.range(1, d.cfg.pause_steps);
    pump(s, 0);
}

// ---- receive ring ----------------------------------------------------------------

// sdp_rx_release_read(): advance the head of the slot ring past slots
// whose buffers are free (consumed data, and messages without payload,
// which sdp_rx_complete() freed at once).
inline void World::release_rx(int s)
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
inline std::size_t World::rx_bufs_in_use(const Side& d)
{
    return std::size_t{d.n_hw} + d.n_unpolled + d.n_held + d.leaked;
}

inline std::size_t World::rx_slots(const Side& d)
{
    if (d.cfg.rx_slots_per_buf == kNoSlotLimit)
        return static_cast<std::size_t>(-1);
    return std::size_t{d.cfg.rx_bufs} * d.cfg.rx_slots_per_buf;
}

inline unsigned World::rx_cap(const Side& d)
{
    return std::max(d.cfg.rx_cap, d.cfg.rx_bufs);
}

// sdp_rx_ring_state()
inline sdp_core_rx_ring World::rx_ring(int s) const
{
    const Side& d = sides_[s];
    sdp_core_rx_ring r{};
    r.live = d.rx_live;
    r.posted = d.n_hw + d.n_unpolled;
    r.free = static_cast<unsigned>(d.rx_live - rx_bufs_in_use(d));
    r.base = d.cfg.rx_bufs;
    r.cap = rx_cap(d);
    r.limit = r.cap;
    r.unread = d.unread;
    r.unread_max = d.cfg.rx_unread_max;
    r.trim = d.rx_trim ? 1 : 0;
    return r;
}

// sdp_rx_trim(): one free buffer given back instead of posted, if the core
// says so.
inline bool World::rx_give_back(int s)
{
    Side& d = me(s);
    sdp_core_rx_ring r = rx_ring(s);
    if (d.cfg.trim_below_posted_base)
        r.posted = std::max(r.posted, r.base);
    switch (sdp_core_rx_free_buffer(&r)) {
    case SDP_RX_FREE_GIVE_BACK:
        d.rx_live--;
        d.stats.rx_given_back++;
        return true;
    case SDP_RX_FREE_AT_BASE:
        d.rx_trim = false;
        return false;
    default:
        return false;
    }
}

// sdp_post_recvs(): post every free buffer while the slot window has
// room; then sdp_rx_more_check() and the work item's sdp_rx_add(), at
// once here, and post those too.
inline void World::post_recvs(int s)
{
    Side& d = me(s);
    for (int pass = 0; pass < 2; pass++) {
        while (rx_bufs_in_use(d) < d.rx_live && d.rx.size() < rx_slots(d)) {
            if (d.cfg.leak_every > 0 && ++d.reposts % d.cfg.leak_every == 0) {
                d.leaked++;
                continue;
            }
            if (rx_give_back(s))
                continue;
            d.rx.emplace_back();
            d.rx.back().size = d.rx_size;
            d.n_hw++;
        }
        const sdp_core_rx_ring r = rx_ring(s);
        if (pass > 0 || sdp_core_rx_more_wanted(&r) == 0)
            break;
        const unsigned add = sdp_core_rx_add_count(&r);
        d.rx_live += add;
        d.stats.rx_added += add;
        d.stats.rx_most = std::max<std::size_t>(d.stats.rx_most, d.rx_live);
    }
    sdp_core_rx_posted(&d.conn, posted_rx(s));
    answer_resize(s);
}

// The glue's answer to a ChRcvBuf: once every buffer posted and not
// consumed has the new size (sdp_rx_resize_check()).
inline void World::answer_resize(int s)
{
    Side& d = me(s);
    if (d.rx_resize_to == 0)
        return;
    for (std::size_t i = d.rx.size() - d.n_hw; i < d.rx.size(); i++) {
        if (d.rx[i].size < d.rx_resize_to)
            return;
    }
    const int rc = sdp_core_rx_resized(&d.conn, d.rx_resize_to);
    if (rc != 0)
        fail(d.name + ": rx_resized(" + std::to_string(d.rx_resize_to) +
             ") failed: " + sdp_core_err_name(rc));
    d.rx_resize_to = 0;
    d.stats.resizes++;
}

// ChRcvBuf (we are the sink: buffers of the new size from now on) or
// ChRcvBufAck (we are the source: the segments may grow).
inline void World::resize_received(int s, const sdp_core_rx& rx)
{
    Side& d = me(s);
    if (rx.mid == SDP_MID_CH_RCV_BUF) {
        unsigned size = d.rx_size;
        if (d.cfg.rx_grow_max != 0)
            size = std::max(size, std::min(rx.resize_bytes, d.cfg.rx_grow_max));
        // Smaller (the peer idled): down to the size asked for, never
        // below the first one.
        if (rx.resize_bytes < d.rx_size)
            size = std::max(rx.resize_bytes, d.cfg.rx_buf_size);
        // sdp_rx_grow(): the added buffers go back when the peer idles,
        // and when a growth would take too much memory (refused, and the
        // buffers added for a backlog go back so the next one fits).
        if (size < d.rx_size) {
            d.rx_trim = true;
        } else if (size > d.rx_size) {
            d.rx_trim = false;
            if (std::size_t{d.rx_live} * size > 2 * d.cfg.rx_unread_max) {
                size = d.rx_size;
                d.rx_trim = d.rx_live > d.cfg.rx_bufs;
                d.stats.grow_refused++;
            }
        }
        d.rx_size = size;
        d.rx_resize_to = size;
        return;
    }
    d.stats.grown++;
    const unsigned want =
        std::min(std::max(rx.resize_bytes, peer(s).cfg.rx_buf_size), d.cfg.tx_buf_size) -
        SDP_BSDH_SIZE;
    if (rx.mid != SDP_MID_CH_RCV_BUF_ACK || sdp_core_seg_max(&d.conn) != want)
        fail(d.name + ": after ChRcvBufAck(" + std::to_string(rx.resize_bytes) + ") seg_max " +
             std::to_string(sdp_core_seg_max(&d.conn)) + ", want " + std::to_string(want));
}

// ---- completions -----------------------------------------------------------------

// sdp_cq_work(): a batch of completions, receive and send interleaved in
// any order (each kind in its own order), then re-post and push once.
inline void World::poll_cq(int s)
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
inline void World::rx_complete(int s)
{
    Side& d = me(s);
    const std::size_t at = d.rx.size() - d.n_hw - d.n_unpolled;
    RxSlot& slot = d.rx[at];
    d.n_unpolled--;
    sdp_core_rx_posted(&d.conn, posted_rx(s));
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
            fail(d.name + ": mid " + std::to_string(rx.mid) + " did not end our SinkAvail (state " +
                 std::to_string(adv) + ")");
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
        if (rx.ack_timer_ms != 0)
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
    case SDP_RX_RESIZE:
        resize_received(s, rx);
        break;
    default:
        fail(d.name + ": unexpected receive kind " + std::to_string(rx.kind));
        return;
    }
}

// sdp_rx_coalesce(): a small message joins the newest unread data buffer
// before its slot if it fits there (the buffer's size counts from its
// start, header included); its own buffer is then free.
inline bool World::coalesce(Side& d, std::size_t at, const sdp_core_rx& rx)
{
    if (!d.cfg.rx_coalesce || rx.payload_len > d.rx_size / 8)
        return false;
    const RxSlot& slot = d.rx[at];
    for (std::size_t i = at; i-- > 0;) {
        RxSlot& prev = d.rx[i];
        if (prev.state == RxState::kConsumed)
            continue;
        if (prev.state != RxState::kHeld || prev.end + rx.payload_len > prev.size)
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
inline void World::tx_complete(int s)
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
inline void World::close_event(int s, unsigned event)
{
    Side& d = me(s);
    const unsigned next = sdp_core_close_state(d.tcp_state, event);
    if (d.tcp_state == SDP_TCP_CLOSE && next != SDP_TCP_CLOSE)
        fail(d.name + ": TCP state left CLOSE");
    d.tcp_state = next;
}

// ---- sdp_push() ------------------------------------------------------------------

inline void World::pump(int s, unsigned extra_opts)
{
    Side& d = me(s);
    // A zero-copy writer flushing what is queued ahead of its chunk
    // pushes on every wake-up.
    const bool flush = d.zw_active && d.zw_phase == ZcPhase::kFlush && !d.cfg.zcopy_skip_flush;
    const unsigned opts = (d.cfg.nodelay ? SDP_TXO_NODELAY : 0) | (d.corked ? SDP_TXO_CORK : 0) |
                          (flush ? SDP_TXO_PUSH : 0) | extra_opts;
    // As sdp_push(): post what sdp_core_tx_next() says goes next until it
    // says nothing can, the rings described as the glue describes them.
    while (!failed_) {
        sdp_core_tx_ring ring{};
        ring.opts = opts;
        const std::size_t queued = tx_queued(d);
        Bytes seg_hdr(SDP_BSDH_SIZE);
        Bytes ctl(kCtlBufSize);
        if (queued > 0) {
            const Segment& seg = d.tx[d.tx_posted];
            ring.seg_bytes = static_cast<unsigned>(seg.data.size());
            ring.segs_queued = static_cast<unsigned>(queued);
            ring.seg_urgent = seg.urgent ? 1 : 0;
            ring.seg_hdr = seg_hdr.data();
        }
        if (d.ctl_in_flight < d.cfg.ctl_bufs) {
            ring.ctl_hdr = ctl.data();
            ring.ctl_size = static_cast<unsigned>(ctl.size());
        }
        // Checked against the state before the message is accounted.
        const unsigned core_credits = sdp_core_tx_credits(&d.conn);
        const long real_credits = true_credits(s);
        sdp_core_tx_action act{};
        const int rc = sdp_core_tx_next(&d.conn, &ring, &act);
        if (rc < 0) {
            fail(d.name + ": tx_next failed: " + sdp_core_err_name(rc));
            return;
        }
        if (queued > 0 && act.data == SDP_TX_CLOSED) {
            fail(d.name + ": SDP_TX_CLOSED with data queued");
            return;
        }
        if (act.kind == SDP_TXN_NONE)
            return;
        const unsigned mid = act.mid;
        const bool data = act.kind == SDP_TXN_DATA;
        if (data) {
            // The control reserve: data never takes the last credits, by
            // the core's count nor by the real one.
            if (core_credits <= kReserve || real_credits <= kReserve) {
                fail(d.name + ": data posted into the control reserve (core credits " +
                     std::to_string(core_credits) + ", real " + std::to_string(real_credits) + ")");
                return;
            }
        } else if (mid == SDP_MID_DISCONN) {
            if (queued > 0 || !d.shut)
                fail(d.name + ": DisConn due with data queued or no shutdown");
        } else if (mid == SDP_MID_CH_RCV_BUF) {
            if (sdp_core_seg_max(&d.conn) + SDP_BSDH_SIZE >= d.cfg.tx_buf_size)
                fail(d.name + ": ChRcvBuf with segments as large as our buffers already");
        } else if (mid == SDP_MID_CH_RCV_BUF_ACK) {
            if (d.stats.resizes == 0)
                fail(d.name + ": ChRcvBufAck before the buffers were posted");
        } else if (mid != SDP_MID_DATA && !zc_control_owed(s, mid)) {
            return;
        }
        if (failed_)
            return;
        const Bytes payload = data ? d.tx[d.tx_posted].data : Bytes{};
        const unsigned flags = data && d.tx[d.tx_posted].urgent ? SDP_FLAG_OOB_PRES : 0;
        if (data)
            d.tx_posted++;
        Bytes msg(data ? seg_hdr : ctl);
        msg.resize(act.hdr_len);
        post(s, data ? Ring::kTx : Ring::kCtl, mid, msg, payload, flags);
    }
}

// A SEND the core built (its header msg): checked, then on the wire.
inline void World::post(int s, Ring ring, unsigned mid, Bytes msg, const Bytes& payload,
                        unsigned flags)
{
    Side& d = me(s);
    if (!may_post(s, mid, payload.size()))
        return;
    if (msg.size() != hdr_size(mid)) {
        fail(d.name + ": header of mid " + std::to_string(mid) + " is " +
             std::to_string(msg.size()) + " bytes");
        return;
    }
    msg.insert(msg.end(), payload.begin(), payload.end());
    d.stats.largest_data = std::max(d.stats.largest_data, payload.size());
    if (mid == SDP_MID_CH_RCV_BUF || mid == SDP_MID_CH_RCV_BUF_ACK) {
        d.stats.last_credit += sdp_core_tx_credits(&d.conn) == 0 ? 1 : 0;
    } else if (mid != SDP_MID_DATA && mid != SDP_MID_DISCONN) {
        zc_control_sent(s, mid, msg);
        d.stats.last_credit += sdp_core_tx_credits(&d.conn) == 0 ? 1 : 0;
    }
    send(s, ring, mid, std::move(msg), payload.size(), flags);
}

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_HOST_H
