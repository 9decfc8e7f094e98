// SPDX-License-Identifier: GPL-2.0
//
// The simulation's configuration and result types (sim_world.h): its PRNG,
// each side's configuration, the weights of the events, and the
// statistics and result of a run.
#ifndef SDP_TESTS_UNIT_SIM_CONFIG_H
#define SDP_TESTS_UNIT_SIM_CONFIG_H

#include <array>
#include <cstddef>
#include <cstdint>
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
    unsigned rx_bufs = 8;       // R
    unsigned rx_buf_size = 256; // B, BSDH included
    unsigned tx_bufs = 8;       // T: queued and in-flight segments
    unsigned tx_buf_size = 256; // BSDH included
    // The sink's answer to the peer's ChRcvBuf: receive buffers up to this
    // size (0: the current size, a refusal).
    unsigned rx_grow_max = 0;
    // Receive buffers added for a reader that lags, up to this many in all
    // (0: rx_bufs, none added), while unread data stays below
    // rx_unread_max bytes, and given back as they come free once it caught
    // up or the peer's stream idles: as the core decides
    // (sdp_core_rx_free_buffer(), sdp_core_rx_more_wanted()), as sdp.ko
    // asks it (kernel/sdp_rx.c).  The refusal of a growth that would take
    // more than twice rx_unread_max of buffer memory is the glue's.
    unsigned rx_cap = 0;
    std::size_t rx_unread_max = std::size_t{1} << 40;
    // Deliberately broken glue: give free buffers back counting only the
    // live ones, however few are posted (sdp.ko before dec0339): a ring
    // full of unread data leaves the peer without the credit its answer
    // needs.
    bool trim_below_posted_base = false;
    // After a write() the stream idles this often, for a while; its idle
    // timer (sdp_core_tx_idle()) fires during that pause with nothing queued.
    unsigned idle_per_mille = 0;
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
    // With zcopy_thresh it writes back by zero copy, as a kernel consumer
    // does; it never advertises (sink_avail), as kernel memory is not.
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
    // ... in up to this many pieces (SinkAvails) of at most zcopy_chunk
    // each, as sdp_zc_recv_advertise() does with a buffer larger than a
    // registration, within what sdp_core_adv_room() allows.
    unsigned sink_pieces = 1;
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
    std::size_t largest_data = 0;  // payload bytes of the largest Data sent
    std::size_t resizes = 0;       // ChRcvBufAcks sent (receive buffers grown or not)
    std::size_t grown = 0;         // ChRcvBufAcks received
    std::size_t shrinks = 0;       // idle requests to shrink the peer's buffers
    std::size_t rx_added = 0;      // receive buffers added for a lagging reader
    std::size_t rx_given_back = 0; // ... and given back
    std::size_t rx_most = 0;       // most receive buffers at once
    std::size_t grow_refused = 0;  // ChRcvBufs refused for the ring's memory
    std::size_t stuck_rx_bufs = 0; // most freed slots waiting behind unread data
    // zero copy
    std::size_t src_avails = 0;     // SrcAvails posted
    std::size_t sink_avails = 0;    // SinkAvails posted
    std::size_t sink_pieces = 0;    // ... of them after the first of a read
    std::size_t sink_trims = 0;     // reads that took their unused pieces back
    std::size_t rdma_reads = 0;     // RDMA Reads completed by this side's reader
    std::size_t read_bytes = 0;     // ... and their bytes
    std::size_t rdma_writes = 0;    // RDMA Writes posted by this side's writer
    std::size_t write_bytes = 0;    // ... and their bytes
    std::size_t send_sms = 0;       // SendSMs posted
    std::size_t deadlock_sms = 0;   // SrcAvails refused by the send/send deadlock rule
    std::size_t peeks = 0;          // SrcAvails abandoned for MSG_PEEK
    std::size_t small_read_sms = 0; // SrcAvails given up to a reader of small pieces
    std::size_t adv_skipped = 0;    // chances to advertise the back-off skipped
    std::size_t src_cancels = 0;    // SrcAvailCancels posted
    std::size_t sink_cancels = 0;   // SinkAvailCancels posted
    std::size_t adv_unused = 0;     // advertisements that ended with nothing written
    std::size_t bcopy_chunks = 0;   // chunks of zero-copy writes sent by bcopy for want of credits
    std::size_t chunk_bytes = 0;    // ... and their bytes
    std::size_t too_big = 0;        // zero-copy writes turned to bcopy by ETOOBIG
    std::size_t grace_sms = 0;      // offers given up by the grace timer
    std::size_t grace_agains = 0;   // grace periods restarted: the offer was being read
    std::size_t last_credit = 0;    // zero-copy control messages sent with the last credit
    std::size_t late_sinks = 0;     // SinkAvails posted after our own DisConn
    std::size_t overtaken = 0;      // cancelled advertisements ended by stream bytes or DisConn
    std::size_t stale_acks = 0;     // SinkCancelAcks that came after that (answering nothing)
};

struct Result {
    bool ok = false;
    std::string error; // first failure and a state dump
    std::size_t steps = 0;
    std::array<SideStats, 2> stats{};
};

} // namespace sdpsim

#endif // SDP_TESTS_UNIT_SIM_CONFIG_H
