// SPDX-License-Identifier: GPL-2.0
//
// Two protocol engines connected through the simulated transport of
// sim_world.h (the kernel glue's rings, send queue, control ring, options,
// completions and re-posting, modelled in userspace), driven by seeded random
// workloads.
//
// Every run checks, on the fly: no SEND without a posted buffer at the peer
// (RNR), the core never believes in more credits than the peer really has,
// data never takes the control reserve, every byte is read once and in order,
// urgent marks land on the urgent bytes, DisConn follows all data and only
// credit updates follow it (none once both sides sent theirs), an idle
// connection goes quiet, and the run ends (no deadlock, no livelock) with both
// sides at EOF.  A failure prints the seed, the state of both sides and the
// last events.
#include "sim_world.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace {

using sdpsim::kNoSlotLimit;
using sdpsim::Result;
using sdpsim::Rng;
using sdpsim::SideConfig;
using sdpsim::Weights;
using sdpsim::World;

Result Simulate(std::uint64_t seed, const SideConfig& a, const SideConfig& b, const Weights& w = {})
{
    World world(seed, a, b, w);
    return world.run();
}

// The argument is a Result (evaluated twice: pass a variable).
#define ASSERT_SIM_OK(r) ASSERT_TRUE((r).ok) << (r).error

// ---- fixed scenarios -------------------------------------------------------------

TEST(Sim, BulkBothWays)
{
    SideConfig c;
    c.bytes = 50000;
    const Result r = Simulate(1, c, c);
    ASSERT_SIM_OK(r);
    for (const auto& st : r.stats) {
        EXPECT_GT(st.data_sends, 50000u / 240) << "at least one SEND per full segment";
    }
}

TEST(Sim, OneWayAndImmediateClose)
{
    SideConfig writer;
    writer.bytes = 20000;
    SideConfig silent;
    silent.bytes = 0;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Result ab = Simulate(seed, writer, silent);
        ASSERT_SIM_OK(ab);
        const Result ba = Simulate(seed, silent, writer);
        ASSERT_SIM_OK(ba);
    }
    const Result none = Simulate(7, silent, silent);
    ASSERT_SIM_OK(none) << "connect and close without data";
}

// The peer shuts down at once (DisConn first) and then only reads a long
// stream through a tiny ring: it must keep granting credits after its own
// DisConn or the writer stalls for ever.
TEST(Sim, HalfCloseKeepsGrantingCredits)
{
    SideConfig writer;
    writer.bytes = 30000;
    writer.rx_bufs = 3;
    writer.tx_bufs = 2;
    writer.rx_buf_size = writer.tx_buf_size = 64;
    SideConfig closer = writer;
    closer.bytes = 0;
    Weights w;
    w.shutdown = 1000; // the silent side closes right away
    for (std::uint64_t seed = 1; seed <= 12; seed++) {
        const Result r = Simulate(seed, closer, writer, w);
        ASSERT_SIM_OK(r);
        EXPECT_GT(r.stats[0].after_disconn, 0u)
            << "seed " << seed << ": the closer sent credit updates after its DisConn";
    }
}

// Slow readers: the receiving application sleeps for long stretches, so the
// sender runs out of credits again and again and must be released by credit
// updates once the reader catches up.
TEST(Sim, SlowReaderCreditStarvation)
{
    SideConfig c;
    c.bytes = 20000;
    c.rx_bufs = 4;
    c.tx_bufs = 2;
    c.pause_per_mille = 200;
    c.pause_steps = 3000;
    c.max_read = 50;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Result r = Simulate(seed, c, c);
        ASSERT_SIM_OK(r);
    }
}

// A corked application with a partial segment queued still re-posts what it
// reads, and the peer, which is out of credits, must hear about it: the
// corked data must not hold the credit update back.  Here the corked side
// uncorks only after reading the peer's whole stream (a request/response
// pattern), so a withheld update is a deadlock.
TEST(Sim, CorkedSenderStillGrantsCredits)
{
    SideConfig corked;
    corked.bytes = 100;
    corked.max_write = 10;
    corked.cork_until_eof = true;
    corked.rx_bufs = 4;
    SideConfig bulk;
    bulk.bytes = 30000;
    bulk.rx_bufs = 4;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Result r = Simulate(seed, corked, bulk);
        ASSERT_SIM_OK(r);
    }
}

// Both applications write a lot while their readers sleep for long
// stretches: the rings fill up on both sides, both writers block on credits,
// and the wire must then go quiet (no credit-update ping-pong) until a reader
// wakes up.
TEST(Sim, BothReadersAsleepWireGoesQuiet)
{
    for (unsigned r = 3; r <= 10; r++) {
        SideConfig c;
        c.bytes = 20000;
        c.rx_bufs = r;
        c.tx_bufs = 2;
        c.pause_per_mille = 300;
        c.pause_steps = 5000;
        for (std::uint64_t seed = 1; seed <= 5; seed++) {
            const Result res = Simulate(seed, c, c);
            ASSERT_SIM_OK(res) << "R=" << r;
        }
    }
}

// 10000 one-byte writes under Nagle, completions much slower than writes: the
// small writes coalesce, so SENDs are a small fraction of the writes.
TEST(Sim, NagleCoalescesSmallWrites)
{
    SideConfig writer;
    writer.bytes = 10000;
    writer.min_write = writer.max_write = 1;
    writer.rx_bufs = writer.tx_bufs = 16;
    writer.rx_buf_size = writer.tx_buf_size = 1024;
    SideConfig reader = writer;
    reader.bytes = 0;
    Weights w;
    w.write = 200;
    w.ack = 1;
    w.arrive = 20;
    w.poll = 20;
    w.read = 20;
    std::size_t nagle_sends = 0;
    for (std::uint64_t seed = 1; seed <= 3; seed++) {
        const Result r = Simulate(seed, writer, reader, w);
        ASSERT_SIM_OK(r);
        EXPECT_EQ(r.stats[0].writes, 10000u);
        EXPECT_LT(r.stats[0].data_sends * 10, r.stats[0].writes)
            << "seed " << seed << ": " << r.stats[0].data_sends << " SENDs for "
            << r.stats[0].writes << " writes";
        nagle_sends += r.stats[0].data_sends;
    }
    // Without Nagle every write goes while credits and send buffers last.
    writer.nodelay = true;
    const Result r = Simulate(1, writer, reader, w);
    ASSERT_SIM_OK(r);
    const std::size_t nodelay_sends = r.stats[0].data_sends;
    EXPECT_GT(nodelay_sends, nagle_sends / 3 * 10);
    std::printf("10000 1-byte writes: %zu SENDs under Nagle (mean of 3 runs), %zu with "
                "TCP_NODELAY\n",
                nagle_sends / 3, nodelay_sends);
}

TEST(Sim, UrgentMarksLandOnTheUrgentByte)
{
    SideConfig c;
    c.bytes = 20000;
    c.urgent_per_mille = 100;
    c.rx_bufs = 4;
    c.tx_bufs = 2;
    std::size_t urgent = 0;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Result r = Simulate(seed, c, c);
        ASSERT_SIM_OK(r);
        urgent += r.stats[0].urgent_sent + r.stats[1].urgent_sent;
    }
    EXPECT_GT(urgent, 100u);
}

// With the applications idle (shutdown happens only when nothing else can),
// the connection must go quiet: no endless exchange of credit updates.
TEST(Sim, IdleConnectionGoesQuiet)
{
    for (unsigned r = 3; r <= 8; r++) {
        SideConfig c;
        c.bytes = 3000;
        c.rx_bufs = r;
        c.tx_bufs = 2;
        c.rx_buf_size = c.tx_buf_size = 128;
        Weights w;
        w.shutdown = 0;
        for (std::uint64_t seed = 1; seed <= 10; seed++) {
            const Result res = Simulate(seed, c, c, w);
            ASSERT_SIM_OK(res) << "R=" << r;
        }
    }
}

// ---- the checks themselves ----------------------------------------------------------

// A glue that advertises one receive buffer more than it posted gives the
// peer a credit it does not have: caught as a core that believes in more
// credits than the peer has, or as a SEND without a buffer (RNR).
TEST(SimChecks, CatchGlueOverstatingPostedBuffers)
{
    SideConfig liar;
    liar.bytes = 0;
    liar.rx_bufs = 4;
    liar.overstate_posted = 1;
    SideConfig writer;
    writer.bytes = 20000;
    const Result r = Simulate(1, liar, writer);
    ASSERT_FALSE(r.ok);
    EXPECT_TRUE(r.error.find("exceed the real") != std::string::npos ||
                r.error.find("RNR") != std::string::npos)
        << r.error;
}

// A glue that loses receive buffers ends up with none posted: the
// simulation reports the stall instead of spinning.
TEST(SimChecks, CatchGlueLeakingReceiveBuffers)
{
    SideConfig leaky;
    leaky.bytes = 0;
    leaky.rx_bufs = 4;
    leaky.leak_every = 3;
    SideConfig writer;
    writer.bytes = 20000;
    const Result r = Simulate(1, leaky, writer);
    ASSERT_FALSE(r.ok);
    EXPECT_TRUE(r.error.find("deadlock") != std::string::npos ||
                r.error.find("no progress") != std::string::npos)
        << r.error;
}

// ---- randomized ------------------------------------------------------------------

unsigned SegMax(const SideConfig& me, const SideConfig& peer)
{
    return std::min(me.tx_buf_size, peer.rx_buf_size) - SDP_BSDH_SIZE;
}

unsigned PickBufSize(Rng& rng)
{
    static const unsigned kSizes[] = {17, 18, 20, 32, 64, 100, 256, 1000, 4096};
    return kSizes[rng.below(sizeof(kSizes) / sizeof(kSizes[0]))];
}

SideConfig RandomSide(Rng& rng)
{
    SideConfig c;
    // Mostly tiny rings: that is where credits run out.
    c.rx_bufs = static_cast<unsigned>(rng.per_mille(700) ? rng.range(3, 4) : rng.range(5, 32));
    c.tx_bufs = static_cast<unsigned>(rng.per_mille(700) ? rng.range(1, 2) : rng.range(3, 16));
    c.rx_buf_size = PickBufSize(rng);
    c.tx_buf_size = rng.per_mille(500) ? c.rx_buf_size : PickBufSize(rng);
    c.nodelay = rng.per_mille(300);
    c.cork = rng.per_mille(300);
    c.bytes = rng.per_mille(100) ? 0 : rng.range(1, 6000);
    const std::uint64_t seg = std::min(c.rx_buf_size, c.tx_buf_size) - SDP_BSDH_SIZE;
    c.min_write = 1;
    c.max_write =
        static_cast<unsigned>(rng.per_mille(300) ? rng.range(1, 8) : rng.range(1, 3 * seg));
    c.max_read = static_cast<unsigned>(rng.range(1, 3 * seg));
    c.ctl_bufs = static_cast<unsigned>(rng.per_mille(700) ? 8 : rng.range(1, 3));
    // Mostly the glue (every free buffer re-posted at once); also the
    // earlier in-order and slot-window receive rings, which are correct
    // outside echo workloads; mostly with small messages received into the
    // previous unread buffer, as the glue does.
    const std::uint64_t ring = rng.below(10);
    c.rx_slots_per_buf = ring < 1 ? 1 : ring < 3 ? 4 : kNoSlotLimit;
    c.rx_coalesce = rng.per_mille(800);
    c.more_per_mille = rng.per_mille(300) ? 300 : 0;
    c.urgent_per_mille = rng.per_mille(300) ? 50 : 0;
    c.shutdown_per_mille = rng.per_mille(300) ? 20 : 0;
    c.pause_per_mille = rng.per_mille(300) ? static_cast<unsigned>(rng.range(10, 300)) : 0;
    c.pause_steps = static_cast<unsigned>(rng.range(10, 2000));
    return c;
}

Weights RandomWeights(Rng& rng)
{
    Weights w;
    w.write = static_cast<unsigned>(rng.range(1, 50));
    w.read = static_cast<unsigned>(rng.range(1, 50));
    w.arrive = static_cast<unsigned>(rng.range(1, 50));
    w.poll = static_cast<unsigned>(rng.range(1, 50));
    w.ack = static_cast<unsigned>(rng.range(1, 50));
    w.cork = static_cast<unsigned>(rng.range(0, 5));
    w.shutdown = static_cast<unsigned>(rng.range(0, 5));
    return w;
}

TEST(Sim, RandomizedWorkloads)
{
    constexpr std::uint64_t kSeeds = 500;
    const auto start = std::chrono::steady_clock::now();
    std::size_t steps = 0;
    std::size_t sends = 0;
    std::size_t updates = 0;
    std::size_t after_disconn = 0;
    std::size_t coalesced = 0;
    for (std::uint64_t seed = 1; seed <= kSeeds; seed++) {
        Rng rng(seed * 0x2545f4914f6cdd1dull);
        SideConfig a = RandomSide(rng);
        SideConfig b = RandomSide(rng);
        // At most ~40 segments each way: tiny segments make many messages
        // (and steps) per byte, and 40 are plenty to exhaust the rings.
        a.bytes = std::min<std::size_t>(a.bytes, std::size_t{40} * SegMax(a, b));
        b.bytes = std::min<std::size_t>(b.bytes, std::size_t{40} * SegMax(b, a));
        const Weights w = RandomWeights(rng);
        const Result r = Simulate(seed, a, b, w);
        ASSERT_SIM_OK(r);
        steps += r.steps;
        for (const auto& st : r.stats) {
            sends += st.sends;
            updates += st.updates;
            after_disconn += st.after_disconn;
            coalesced += st.coalesced;
        }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%llu seeds: %zu steps, %zu SENDs (%zu credit updates, %zu after a DisConn, %zu "
                "received into the previous buffer) in %.2f s\n",
                static_cast<unsigned long long>(kSeeds), steps, sends, updates, after_disconn,
                coalesced, secs);
}

// ---- echo server -------------------------------------------------------------------
//
// integ.nonblocking_poll_echo deadlocked in the VM: an echo server whose
// reader waits for its own writer (it reads only once everything it read is
// written back), talking to a client that writes and reads at once.  The
// server's ring filled with unread data; the client's credit updates landed
// behind it, where the glue of the time (buffers freed in ring order) left
// them unposted, so the server had nothing posted and the client no credit
// to say that it had re-posted its own buffers: the server waited at its
// reserve with data queued, the client at 0 credits.

struct Echo {
    SideConfig a;
    SideConfig b;
    Weights w;
};

struct EchoShape {
    unsigned slots_per_buf = SideConfig{}.rx_slots_per_buf;
    bool same_size = true;     // one buffer size on both sides (one net.sdp.buf_size)
    bool small_reads = false;  // the server reads 1..8 bytes at a time
    std::size_t max_bytes = 0; // cap on the client's stream (0: ~40 segments)
};

// A client writing a random stream (random writes, random reads of the echo,
// sometimes a sleeping reader) and an echo server, on side B (the passive
// side, as in the conformance scenario) or, one seed in four, side A.
// Rings of 4..16 receive and 1..8 send buffers; Nagle or TCP_NODELAY on
// each side, all four combinations in turn.  The server reads a few bytes
// at a time, or up to everything its ring can hold (the scenario's server
// reads up to 256 KiB).
Echo RandomEcho(std::uint64_t seed, const EchoShape& shape)
{
    static const unsigned kSizes[] = {32, 64, 128, 256, 1024};
    Rng rng(seed * 0x9e3779b97f4a7c15ull + 0x5eed);
    SideConfig client;
    SideConfig server;
    const unsigned size = kSizes[rng.below(sizeof(kSizes) / sizeof(kSizes[0]))];
    for (SideConfig* c : {&client, &server}) {
        c->rx_bufs = static_cast<unsigned>(rng.range(4, 16));
        c->tx_bufs = static_cast<unsigned>(rng.range(1, 8));
        c->rx_buf_size = c->tx_buf_size =
            shape.same_size ? size : kSizes[rng.below(sizeof(kSizes) / sizeof(kSizes[0]))];
        c->rx_slots_per_buf = shape.slots_per_buf;
    }
    client.nodelay = (seed & 1) != 0;
    server.nodelay = (seed & 2) != 0;
    const unsigned up = SegMax(client, server);
    const unsigned down = SegMax(server, client);
    // At most ~40 segments each way, as in RandomizedWorkloads.
    client.bytes = rng.range(1, std::uint64_t{40} * std::min(up, down));
    if (shape.max_bytes != 0)
        client.bytes = std::min(client.bytes, shape.max_bytes);
    client.max_write = static_cast<unsigned>(rng.range(1, 3 * up));
    client.max_read = static_cast<unsigned>(rng.range(1, 3 * down));
    client.pause_per_mille = rng.per_mille(500) ? static_cast<unsigned>(rng.range(10, 300)) : 0;
    client.pause_steps = static_cast<unsigned>(rng.range(10, 2000));
    server.echo = true;
    server.bytes = 0;
    server.max_read = static_cast<unsigned>(shape.small_reads ? rng.range(1, 8)
                                                              : rng.range(1, server.rx_bufs * up));
    Weights w = RandomWeights(rng);
    w.cork = 0;
    w.shutdown = std::max(w.shutdown, 1u);
    if ((seed >> 2) % 4 == 3)
        return {server, client, w};
    return {client, server, w};
}

struct EchoTotals {
    std::size_t runs = 0;
    std::size_t failed = 0;
    std::size_t steps = 0;
    std::size_t updates = 0;
    std::size_t freed_slots = 0; // most freed slots behind unread data, any run
    std::string first_error;
};

// Seeds 1..seeds, or up to the first failure.
EchoTotals RunEcho(std::uint64_t seeds, const EchoShape& shape, bool stop_at_failure = false)
{
    EchoTotals t;
    for (std::uint64_t seed = 1; seed <= seeds && !(stop_at_failure && t.failed > 0); seed++) {
        const Echo e = RandomEcho(seed, shape);
        const Result r = Simulate(seed, e.a, e.b, e.w);
        t.runs++;
        t.steps += r.steps;
        if (!r.ok && t.failed++ == 0)
            t.first_error = r.error;
        for (const auto& st : r.stats) {
            t.updates += st.updates;
            t.freed_slots = std::max(t.freed_slots, st.stuck_rx_bufs);
        }
    }
    return t;
}

// The protocol engine is deadlock-free for the echo pattern as long as the
// receive ring posts every free buffer at once (see the disabled test below
// for the glue's slot ring, which does not): one buffer size on both sides
// (one net.sdp.buf_size) or two, a server that reads what has arrived or a
// few bytes at a time.
TEST(SimEcho, EchoedIntactWhenFreeBuffersArePostedAtOnce)
{
    for (bool small_reads : {false, true}) {
        for (bool same_size : {true, false}) {
            EchoShape shape;
            shape.slots_per_buf = kNoSlotLimit;
            shape.same_size = same_size;
            shape.small_reads = small_reads;
            shape.max_bytes = small_reads ? 1000 : 0; // many steps per byte
            const EchoTotals t = RunEcho(small_reads ? 75 : 100, shape);
            ASSERT_EQ(t.failed, 0u) << t.first_error;
            std::printf("echo, %s reads, %s sizes: %zu runs, %zu steps, %zu credit updates, at "
                        "most %zu freed slots behind unread data\n",
                        small_reads ? "small" : "large", same_size ? "same" : "mixed", t.runs,
                        t.steps, t.updates, t.freed_slots);
        }
    }
}

// An echo server's unread data collects freed slots behind it: credit
// updates and requests for credits from the client (each small SEND the
// server echoes draws one once the server is at its reserve), and the
// client's small data messages received into that unread buffer.  Nothing
// bounds how many (the test above sees hundreds).  Through a ring that
// posts every free buffer at once that costs nothing.  The glue's slot
// ring, though, posts only while the oldest unread slot is less than
// SDP_RX_SLOTS_PER_BUF x R slots behind: the window fills with freed slots,
// free buffers stay unposted, and the VM deadlock is back (the server at
// its reserve with data queued and nothing posted, the client at 0
// credits).  Two shapes where that happens in many runs: the client's
// receive buffers smaller than the server's (the server's SENDs are then
// small, each drawing an update), and one buffer size with a client that
// writes small pieces and sometimes sleeps in its reader (the server,
// blocked on credits, holds unread data that the client's pieces join).
// `runs` per shape, the stream cut to bytes_per_mille of its length.
// Returns the failed runs and the first failure.
std::pair<std::size_t, std::string>
SlotRingOverflowScenarios(unsigned slots_per_buf, std::uint64_t runs, std::size_t bytes_per_mille)
{
    std::size_t failed = 0;
    std::string first;
    for (bool same_size : {false, true}) {
        SideConfig client;
        SideConfig server;
        Weights w;
        if (same_size) {
            client.rx_bufs = 4;
            client.tx_bufs = 4;
            client.rx_buf_size = client.tx_buf_size = 1024;
            client.bytes = 15000;
            client.max_write = 40;
            client.max_read = 1100;
            client.nodelay = true;
            client.pause_per_mille = 200;
            client.pause_steps = 2000;
            server.rx_bufs = 12;
            server.rx_buf_size = server.tx_buf_size = 1024;
            server.max_read = 5000;
            w.write = 27;
            w.read = 13;
            w.arrive = 24;
            w.poll = 24;
            w.ack = 11;
            w.shutdown = 1;
        } else {
            client.rx_bufs = 6;
            client.tx_bufs = 4;
            client.rx_buf_size = 64;
            client.tx_buf_size = 256;
            client.bytes = 5000;
            client.max_write = 300;
            client.max_read = 200;
            server.rx_bufs = 6;
            server.rx_buf_size = server.tx_buf_size = 256;
            server.max_read = 4;
            server.nodelay = true;
        }
        client.bytes = client.bytes * bytes_per_mille / 1000;
        client.rx_slots_per_buf = slots_per_buf;
        server.echo = true;
        server.bytes = 0;
        server.tx_bufs = 1;
        server.rx_slots_per_buf = slots_per_buf;
        for (std::uint64_t seed = 1; seed <= runs; seed++) {
            const Result r = Simulate(seed, client, server, w);
            if (!r.ok && failed++ == 0)
                first = r.error;
        }
    }
    return {failed, first};
}

// A sample: these runs are long (small SENDs).
TEST(SimEcho, SmallSendsBehindUnreadDataWhenFreeBuffersArePostedAtOnce)
{
    const auto [failed, first] = SlotRingOverflowScenarios(kNoSlotLimit, 6, 300);
    EXPECT_EQ(failed, 0u) << first;
}

// The glue before the slot ring (buffers freed in ring order only) deadlocks
// the echo pattern as the VM did, whatever the credit rules: the simulation
// reproduces the bug it was blind to.
TEST(SimChecks, CatchEchoDeadlockWithInOrderRelease)
{
    EchoShape shape;
    shape.slots_per_buf = 1;
    const EchoTotals t = RunEcho(200, shape, true);
    ASSERT_GT(t.failed, 0u);
    EXPECT_NE(t.first_error.find("deadlock"), std::string::npos) << t.first_error;
}

} // namespace
