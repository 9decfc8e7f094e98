// SPDX-License-Identifier: GPL-2.0
//
// The simulation's wire (sim_world.h): what travels between the two sides.
// SENDs go into the peer's next posted receive buffer, in order; arrival,
// ack and send completion are separate events, and send completions come
// in posting order.  RDMA Writes are ordered with the SENDs of their side;
// RDMA Reads start and complete as separate events.  Out-of-line
// definitions of World's member functions (sim_world_decl.h).
#ifndef SDP_TESTS_UNIT_SIM_WIRE_H
#define SDP_TESTS_UNIT_SIM_WIRE_H

#include "sim_world_decl.h"

#include <algorithm>
#include <deque>
#include <utility>

namespace sdpsim {

// ---- the wire --------------------------------------------------------------------

inline std::deque<World::WireMsg>& World::wire(int s)
{
    return wire_[s];
}

// ---- message sizes and decoding --------------------------------------------------

inline unsigned World::hdr_size(unsigned mid)
{
    switch (mid) {
    case SDP_MID_RDMA_RD_COMPL:
    case SDP_MID_RDMA_WR_COMPL:
        return SDP_RDMA_COMPL_SIZE;
    case SDP_MID_SRC_AVAIL:
        return SDP_SRC_AVAIL_HDR_SIZE;
    case SDP_MID_SINK_AVAIL:
        return SDP_SINK_AVAIL_SIZE;
    case SDP_MID_CH_RCV_BUF:
    case SDP_MID_CH_RCV_BUF_ACK:
        return SDP_CH_RCV_BUF_SIZE;
    default:
        return SDP_BSDH_SIZE;
    }
}

inline unsigned World::be32(const Bytes& m, std::size_t at)
{
    return (static_cast<unsigned>(m[at]) << 24) | (static_cast<unsigned>(m[at + 1]) << 16) |
           (static_cast<unsigned>(m[at + 2]) << 8) | m[at + 3];
}

// SrcAvail and SinkAvail: len, rkey, vaddr after the BSDH.
inline World::Peer World::decode_avail(const Bytes& m)
{
    Peer a;
    a.len = be32(m, 16);
    a.rkey = be32(m, 20);
    a.vaddr = (static_cast<unsigned long long>(be32(m, 24)) << 32) | be32(m, 28);
    a.present = true;
    return a;
}

// ---- SENDs: posted, arriving, acknowledged (send completions in posting order) ----

// Post a built SEND.
inline void World::send(int s, Ring ring, unsigned mid, Bytes msg, std::size_t payload,
                        unsigned flags)
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

inline void World::arrive(int s)
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
    // The HCA's local length error: a message longer than its buffer.
    if (m.msg.size() > slot.size) {
        fail("a message of " + std::to_string(m.msg.size()) + " bytes from " + me(s).name +
             " arrived in a receive buffer of " + std::to_string(slot.size));
        return;
    }
    slot.state = RxState::kUnpolled;
    slot.msg = std::move(m.msg);
    p.n_hw--;
    p.n_unpolled++;
}

// The peer's ack for the oldest SEND that arrived: its completion is in
// the CQ.
inline void World::ack(int s)
{
    for (Sent& sent : me(s).sends) {
        if (sent.state == SendState::kArrived) {
            sent.state = SendState::kAcked;
            trace(Ev::kAck, s, sent.payload, sent.mid);
            return;
        }
    }
}

inline std::size_t World::acked_sends(const Side& d) const
{
    std::size_t n = 0;
    while (n < d.sends.size() && d.sends[n].state == SendState::kAcked)
        n++;
    return n;
}

// ---- RDMA Writes and RDMA Reads --------------------------------------------------

inline void World::rdma_write(int s, unsigned want, const sdp_core_zc& zc)
{
    Side& d = me(s);
    const std::string bad = unusable(s, want, zc);
    if (!bad.empty()) {
        fail(d.name +
             ": sdp_core_sink_take() handed out an advertisement that is not usable: " + bad);
        return;
    }
    for (Peer& a : d.padvs) {
        if (a.rkey == zc.rkey)
            a.used = true;
    }
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

inline void World::rdma_arrive(int s, const WireMsg& m)
{
    Side& p = peer(s);
    const std::string bad = bad_write(p, m);
    if (!bad.empty()) {
        fail(me(s).name + ": RDMA Write of " + std::to_string(m.len) + " bytes into " + p.name +
             "'s memory: " + bad);
        return;
    }
    const Bytes& src = source(me(s));
    Piece* piece = find_piece(p.sink, m.rkey);
    std::copy(src.begin() + static_cast<long>(m.off),
              src.begin() + static_cast<long>(m.off + m.len),
              p.sink.buf.begin() + static_cast<long>(piece->at));
    piece->done = m.len;
    p.sink.done += m.len;
}

inline void World::rd_start(int s, unsigned n)
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
        fail(d.name + ": rd_start(" + std::to_string(n) + ") of " + std::to_string(st.rsa_left) +
             " offered failed: " + sdp_core_err_name(rc));
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
inline void World::rd_done(int s)
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

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_WIRE_H
