// SPDX-License-Identifier: GPL-2.0
//
// The simulation's checks (sim_world.h): the credit properties, the
// model's own account of registrations, offers and advertisements and the
// checks of every RDMA access and zero-copy message against it, the stream
// bytes, the invariants after every step and at the end, and the state
// dump and trace of the last events for a failure.  Out-of-line
// definitions of World's member functions (sim_world_decl.h).
#ifndef SDP_TESTS_UNIT_SIM_CHECKER_H
#define SDP_TESTS_UNIT_SIM_CHECKER_H

#include "sim_world_decl.h"

#include <algorithm>
#include <sstream>
#include <string>

namespace sdpsim {

// ---- failures and the trace of the last events -----------------------------------

inline const char* World::ev_name(Ev e)
{
    static const char* const kNames[] = {
        "write",     "read",     "arrive", "ack",      "poll",  "cork",    "uncork", "shutdown",
        "ack-timer", "zc-write", "signal", "adv-wake", "grace", "rd-done", "post",   "rdma-write"};
    return kNames[static_cast<unsigned>(e)];
}

inline void World::trace(Ev ev, int s, std::size_t arg, unsigned arg2)
{
    trace_[trace_pos_++ % trace_.size()] = {steps_,
                                            ev,
                                            static_cast<unsigned char>(s),
                                            static_cast<unsigned>(arg),
                                            arg2,
                                            sdp_core_tx_credits(&sides_[s].conn),
                                            posted_rx(s)};
}

inline void World::fail(const std::string& what)
{
    if (failed_)
        return;
    failed_ = true;
    error_ = "seed " + std::to_string(seed_) + ", step " + std::to_string(steps_) + ": " + what +
             "\n" + dump();
}

// ---- credits and what may be posted ----------------------------------------------

// What the core must never exceed: the peer's empty posted buffers minus
// our messages already on their way to them.
inline long World::true_credits(int s) const
{
    return static_cast<long>(sides_[1 - s].n_hw) - static_cast<long>(sends_on_wire_[s]);
}

// Credits for a SrcAvail or SinkAvail: like data, never the reserve.
inline bool World::avail_credits_ok(int s, const char* what)
{
    const Side& d = me(s);
    if (sdp_core_tx_credits(&d.conn) > kReserve && true_credits(s) > kReserve)
        return true;
    fail(d.name + ": " + what + " posted into the control reserve (core credits " +
         std::to_string(sdp_core_tx_credits(&d.conn)) + ", real " +
         std::to_string(true_credits(s)) + ")");
    return false;
}

// Messages a side may still send after its DisConn: credit updates and
// what a sink says (it still reads).  Not SinkCancelAck: the DisConn
// ended the sink's advertisement.
inline bool World::after_disconn_ok(unsigned mid, std::size_t payload)
{
    switch (mid) {
    case SDP_MID_DATA:
        return payload == 0;
    case SDP_MID_RDMA_RD_COMPL:
    case SDP_MID_SEND_SM:
    case SDP_MID_SINK_AVAIL:
    case SDP_MID_SINK_AVAIL_CANCEL:
    case SDP_MID_CH_RCV_BUF_ACK: // the peer's data still comes
        return true;
    default:
        return false;
    }
}

inline bool World::may_post(int s, unsigned mid, std::size_t payload)
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
    // A receive buffer of the peer must hold the whole message (the
    // buffer it lands in: arrive()).
    const unsigned peer_max = std::max(peer(s).cfg.rx_buf_size, peer(s).rx_size);
    if (hdr_size(mid) + payload > peer_max) {
        fail(d.name + ": mid " + std::to_string(mid) + " of " +
             std::to_string(hdr_size(mid) + payload) + " bytes for " + peer(s).name +
             "'s receive buffers of " + std::to_string(peer_max));
        return false;
    }
    return true;
}

// ---- stream bytes ----------------------------------------------------------------

// Stream bytes the peer handed over: written, or offered by a SrcAvail.
inline std::size_t World::exposed(const Side& p)
{
    return p.written + (p.zw_active && p.zw_phase == ZcPhase::kSrc ? p.src.len : 0);
}

// Bytes [from, got) just read must be the peer's next bytes, and the
// peer must have handed them over (written, or offered by its SrcAvail).
inline void World::check_got(int s, std::size_t from)
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

// Why the advertisement sink_take() handed out may not be written into
// (empty: it may).
inline std::string World::unusable(int s, unsigned want, const sdp_core_zc& zc) const
{
    const Side& d = sides_[s];
    const Side& p = sides_[1 - s];
    const Peer* a = nullptr;
    for (const Peer& x : d.padvs) {
        if (x.rkey == zc.rkey)
            a = &x;
    }
    if (a == nullptr)
        return "no SinkAvail with its key arrived";
    if (a->stopped)
        return "its SinkAvailCancel arrived";
    if (a->used)
        return "it was written into already";
    if (zc.vaddr != a->vaddr || zc.len == 0 || zc.len > want || zc.len > a->len) {
        return "address or length differ from the SinkAvail's (" + std::to_string(zc.len) + " of " +
               std::to_string(a->len) + ", want " + std::to_string(want) + ")";
    }
    const Piece* piece = p.sink.live ? find_piece(p.sink, zc.rkey) : nullptr;
    if (piece == nullptr)
        return "the sink no longer has it registered";
    if (p.sink.off + piece->at != d.written) {
        return "it was made for stream bytes from " + std::to_string(p.sink.off + piece->at) +
               ", the writer is at " + std::to_string(d.written);
    }
    if (d.disconn_posted)
        return "our DisConn is out";
    return {};
}

// The RDMA Read of n bytes at (rkey, vaddr) reaches the source's memory:
// a live registration, inside it, at the next unread byte.
inline std::string World::bad_read(const Side& p, unsigned rkey, unsigned long long vaddr,
                                   unsigned n)
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

inline void World::check_rdma_read(int s, unsigned rkey, unsigned long long vaddr, unsigned n)
{
    const Side& d = me(s);
    const Side& p = peer(s);
    const std::string bad = bad_read(p, rkey, vaddr, n);
    if (!bad.empty())
        fail(d.name + ": RDMA Read of " + std::to_string(n) + " bytes of " + p.name +
             "'s memory: " + bad);
}

// Why the reader may not RDMA-read the peer's offer now (empty: it may).
inline std::string World::unreadable(const Side& d, const sdp_core_zc_status& st)
{
    const Peer& o = d.offer;
    if (!o.present)
        return "no SrcAvail is offered (or its SendSM went)";
    if (o.stopped)
        return "the offer was cancelled, abandoned or refused";
    if (st.rsa_rkey != o.rkey || st.rsa_vaddr != o.vaddr + o.read ||
        st.rsa_left != o.len - o.read) {
        return "the core's rsa fields differ from the SrcAvail (" + std::to_string(st.rsa_left) +
               " left, " + std::to_string(o.len - o.read) + " unread)";
    }
    if (d.got.size() != o.off + o.read) {
        return "the reader is at stream byte " + std::to_string(d.got.size()) +
               ", the offer's next byte is " + std::to_string(o.off + o.read);
    }
    return {};
}

// An RDMA Write arrives: its bytes land in the sink's buffer, which must
// be the live advertisement it was made for.
inline std::string World::bad_write(const Side& p, const WireMsg& m)
{
    const Piece* piece = p.sink.live ? find_piece(p.sink, m.rkey) : nullptr;
    if (piece == nullptr)
        return "key " + std::to_string(m.rkey) + " is not registered (any more)";
    if (m.vaddr != piece->vaddr || m.len > piece->len)
        return "outside the advertised piece";
    if (piece->done != 0)
        return "the piece was written into already";
    for (const Piece& q : p.sink.pieces) {
        if (&q == piece)
            break;
        if (q.done != q.len)
            return "a piece before it is not full";
    }
    if (m.off != p.sink.off + piece->at) {
        return "stream bytes from " + std::to_string(m.off) + " into a piece for bytes from " +
               std::to_string(p.sink.off + piece->at);
    }
    return {};
}

// After every receive and every step: a transfer DONE in the core is
// checked and its key invalidated at once (the owner's later wake-up
// changes nothing the peer could see); the core's zero-copy state agrees
// with the model's.
inline void World::observe_zc(int s)
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
            fail(d.name + ": SrcAvail DONE with src_acked " + std::to_string(st.src_acked) + ", " +
                 p.name + " read " + std::to_string(d.src.done));
        d.src.live = false;
    }
    if (d.rd != RdState::kAdv && st.adv_state != SDP_ZC_IDLE) {
        fail(d.name + ": SinkAvail state " + std::to_string(st.adv_state) + " with none posted");
        return;
    }
    if (d.rd == RdState::kAdv && !d.adv_done && st.adv_state == SDP_ZC_DONE) {
        d.adv_done = true;
        d.stats.overtaken += d.adv_cancelled && !d.adv_acked ? 1 : 0;
        if (st.adv_written != d.sink.done) {
            fail(d.name + ": SinkAvail DONE with adv_written " + std::to_string(st.adv_written) +
                 ", " + std::to_string(d.sink.done) + " bytes landed");
        }
        d.sink.live = false;
    }
    const Peer& o = d.offer;
    const bool readable = o.present && !o.stopped && o.read < o.len;
    if (readable ? st.rsa_left != o.len - o.read || st.rsa_rkey != o.rkey : st.rsa_left != 0) {
        fail(d.name + ": rsa_left " + std::to_string(st.rsa_left) + ", the model has " +
             (readable ? std::to_string(o.len - o.read) : std::string("no offer")) + " readable");
    }
}

inline unsigned World::new_key(int s, unsigned long long vaddr, unsigned len)
{
    keys_.push_back({vaddr, len, s});
    return kFirstKey + static_cast<unsigned>(keys_.size() - 1);
}

inline const World::Piece* World::find_piece(const Reg& r, unsigned rkey)
{
    for (const Piece& q : r.pieces) {
        if (q.rkey == rkey)
            return &q;
    }
    return nullptr;
}

inline World::Piece* World::find_piece(Reg& r, unsigned rkey)
{
    return const_cast<Piece*>(find_piece(static_cast<const Reg&>(r), rkey));
}

// A SrcAvail or SinkAvail as received describes a registration of side s.
inline bool World::registered(int s, const Peer& a) const
{
    if (a.rkey < kFirstKey || a.rkey - kFirstKey >= keys_.size())
        return false;
    const KeyInfo& k = keys_[a.rkey - kFirstKey];
    return k.owner == s && k.vaddr == a.vaddr && k.len == a.len;
}

// A zero-copy message was received (after on_recv accepted it).
inline void World::zc_received(int s, const Bytes& msg, const sdp_core_rx& rx)
{
    Side& d = me(s);
    const Side& p = sides_[1 - s];
    switch (rx.mid) {
    case SDP_MID_SRC_AVAIL: {
        Peer o = decode_avail(msg);
        o.off = d.rx_stream;
        if (!p.src.live || p.src.rkey != o.rkey || !registered(1 - s, o) || rx.zc_bytes != o.len) {
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
        d.padvs.push_back(a);
        if (d.padvs.size() > std::size_t{2} * SDP_CORE_MAX_ADVERTS)
            d.padvs.erase(d.padvs.begin());
        break;
    }
    case SDP_MID_SINK_AVAIL_CANCEL:
        for (Peer& a : d.padvs)
            a.stopped = true;
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
    case SDP_MID_RDMA_WR_COMPL: {
        // It reports the first piece not reported yet, which must be the
        // one written.
        Piece* piece = nullptr;
        for (Piece& q : d.sink.pieces) {
            if (!q.reported) {
                piece = &q;
                break;
            }
        }
        if (d.rd != RdState::kAdv || piece == nullptr || rx.zc_bytes == 0 ||
            rx.zc_bytes != piece->done) {
            fail(d.name + ": RdmaWrCompl(" + std::to_string(rx.zc_bytes) + ") accepted, " +
                 std::to_string(piece != nullptr ? piece->done : 0) +
                 " bytes landed in the next piece");
            return;
        }
        piece->reported = true;
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
inline std::string World::not_owed(const Side& d, unsigned mid)
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

inline bool World::zc_control_owed(int s, unsigned mid)
{
    const Side& d = me(s);
    const std::string bad = not_owed(d, mid);
    if (bad.empty())
        return true;
    fail(d.name + ": the core chose mid " + std::to_string(mid) + " but " + bad);
    return false;
}

// ... and went: the model's account follows.
inline void World::zc_control_sent(int s, unsigned mid, const Bytes& msg)
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

// ---- invariants, the end of a run, the state dump --------------------------------

inline void World::check_invariants()
{
    for (int s = 0; s < 2 && !failed_; s++) {
        const Side& d = me(s);
        const unsigned credits = sdp_core_tx_credits(&d.conn);
        if (true_credits(s) < 0)
            fail(d.name + ": more messages on the wire than buffers posted at the peer");
        else if (static_cast<long>(credits) > true_credits(s))
            fail(d.name + ": core credits " + std::to_string(credits) + " exceed the real " +
                 std::to_string(true_credits(s)));
        if (rx_bufs_in_use(d) > d.rx_live || d.rx_live < d.cfg.rx_bufs || d.rx_live > rx_cap(d) ||
            d.rx.size() > rx_slots(d) || d.tx.size() > d.cfg.tx_bufs ||
            d.ctl_in_flight > d.cfg.ctl_bufs || d.tx_posted > d.tx.size())
            fail(d.name + ": ring accounting broken");
        std::size_t data_out = 0;
        for (const Sent& sent : d.sends)
            data_out += sent.mid == SDP_MID_DATA ? 1 : 0;
        if (sdp_core_data_in_flight(&d.conn) != data_out) {
            fail(d.name + ": core data_in_flight " +
                 std::to_string(sdp_core_data_in_flight(&d.conn)) + ", Data SENDs outstanding " +
                 std::to_string(data_out));
        }
        if (!failed_ && zc_)
            observe_zc(s);
    }
}

inline bool World::finished() const
{
    for (int s = 0; s < 2; s++) {
        const Side& d = sides_[s];
        if (!d.shut || !d.disconn_posted || !d.eof || !d.tx.empty() || !d.sends.empty() ||
            d.n_unpolled > 0 || !wire_[s].empty() || d.zw_active || d.rd != RdState::kIdle)
            return false;
    }
    return true;
}

inline void World::final_checks()
{
    for (int s = 0; s < 2 && !failed_; s++) {
        const Side& d = me(s);
        const Side& p = peer(s);
        if (d.got.size() != p.limit || !std::equal(d.got.begin(), d.got.end(), source(p).begin())) {
            fail(d.name + " did not read exactly what " + p.name + " wrote");
        } else if (d.urgent_seen != p.urgent_written) {
            fail(d.name + " saw " + std::to_string(d.urgent_seen.size()) + " urgent marks, " +
                 p.name + " sent " + std::to_string(p.urgent_written.size()) +
                 " (or at other offsets)");
        } else if (sdp_core_control_due(&d.conn, 0) != 0) {
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
        const unsigned want =
            SDP_CS_ESTABLISHED | SDP_CS_SHUT_REQUESTED | SDP_CS_DISCONN_SENT | SDP_CS_DISCONN_RCVD;
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

inline std::string World::dump() const
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
          << ") data_in_flight=" << sdp_core_data_in_flight(&d.conn)
          << " control_due=" << sdp_core_control_due(&d.conn, static_cast<unsigned>(tx_queued(d)))
          << "\n   tx: written " << d.written << "/"
          << (d.limit == kUnknown ? std::string("?") : std::to_string(d.limit))
          << (d.cfg.echo ? " of " + std::to_string(d.got.size()) + " read" : "")
          << (d.shut ? " shut" : "") << (d.corked ? " corked" : "") << ", ring " << d.tx.size()
          << "/" << c.tx_bufs << " (" << d.tx_posted << " posted, " << tx_queued(d) << " queued";
        if (tx_queued(d) > 0)
            o << ", next " << d.tx[d.tx_posted].data.size() << " B";
        o << "), ctl " << d.ctl_in_flight << "/" << c.ctl_bufs << ", sends not completed "
          << d.sends.size() << (d.disconn_posted ? ", DisConn posted" : "") << "\n   rx: posted_rx "
          << posted_rx(s) << " (empty " << d.n_hw << ", unpolled " << d.n_unpolled << "), unread "
          << d.n_held << " bufs/" << d.unread << " B, slots " << d.rx.size() << "/"
          << (c.rx_slots_per_buf == kNoSlotLimit ? std::string("any") : std::to_string(rx_slots(d)))
          << " (" << stuck << " freed), live " << d.rx_live << "/" << rx_cap(d)
          << (d.rx_trim ? " trim" : "") << ", read " << d.got.size()
          << (d.disconn_rcvd ? ", DisConn rcvd" : "") << (d.eof ? ", EOF" : "")
          << (d.paused > 0 ? " (reader asleep)" : "") << "\n   stats: writes " << d.stats.writes
          << " sends " << d.stats.sends << " data " << d.stats.data_sends << " updates "
          << d.stats.updates << " after DisConn " << d.stats.after_disconn << "\n";
        if (c.zcopy_thresh > 0 || d.stats.src_avails + d.stats.sink_avails > 0 || d.offer.present) {
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
              << d.acks_awaited << "\n       core: src " << st.src_state << " len " << st.src_len
              << " acked " << st.src_acked << (st.src_sink_stopped != 0 ? " sink-stopped" : "")
              << ", rsa_left " << st.rsa_left << (st.rsa_reading != 0 ? " reading" : "") << ", adv "
              << st.adv_state << " written " << st.adv_written
              << (st.psink_usable != 0 ? ", peer sink usable" : "")
              << (st.wr_compl_pending != 0 ? ", RdmaWrCompl due" : "") << "\n"
              << "       stats: SrcAvail " << d.stats.src_avails << " SinkAvail "
              << d.stats.sink_avails << " reads " << d.stats.rdma_reads << "/" << d.stats.read_bytes
              << " B writes " << d.stats.rdma_writes << "/" << d.stats.write_bytes << " B SendSM "
              << d.stats.send_sms << "\n";
        }
        o << "   wire " << d.name << "->" << sides_[1 - s].name << ": " << wire_[s].size()
          << " messages\n";
    }
    o << "last events (step side event bytes [mid] credits/posted_rx after):\n";
    const std::size_t n = std::min<std::size_t>(trace_pos_, trace_.size());
    for (std::size_t i = trace_pos_ - n; i < trace_pos_; i++) {
        const Trace& t = trace_[i % trace_.size()];
        o << "   " << t.step << " " << sides_[t.side].name << " " << ev_name(t.ev) << " " << t.arg;
        if (t.ev == Ev::kPost || t.ev == Ev::kArrive || t.ev == Ev::kPoll || t.ev == Ev::kAck)
            o << " [0x" << std::hex << t.arg2 << std::dec << "]";
        if (t.ev == Ev::kWrite && t.arg2 != 0) {
            static const char* const kHow[] = {"", " OOB", " zcopy", " rest-by-bcopy",
                                               " chunk-by-bcopy"};
            o << kHow[t.arg2];
        }
        if (t.ev == Ev::kRead && t.arg2 != 0) {
            static const char* const kHow[] = {"", " RDMA-Read", " PEEK-abandon", " SinkAvail",
                                               " small-reads-abandon"};
            o << kHow[t.arg2];
        }
        if (t.ev == Ev::kSignal)
            o << (t.arg2 == 1 ? " writer" : " reader");
        if (t.ev == Ev::kZcWrite && t.arg2 != 0)
            o << (t.arg2 == 1 ? " sink-stopped" : t.arg2 == 2 ? " no-credit" : " too-big");
        o << " c" << t.credits << "/p" << t.posted << "\n";
    }
    return o.str();
}

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_CHECKER_H
