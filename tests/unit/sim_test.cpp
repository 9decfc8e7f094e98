// SPDX-License-Identifier: GPL-2.0
//
// Two protocol engines connected through the simulated transport of
// sim_world.h (the kernel glue's rings, send queue, control ring, options,
// completions and re-posting, modelled in userspace: sim_host.h and
// sim_wire.h), driven by seeded random workloads.
//
// Every run checks, on the fly: no SEND without a posted buffer at the peer
// (RNR), the core never believes in more credits than the peer really has,
// data never takes the control reserve, every byte is read once and in order,
// urgent marks land on the urgent bytes, DisConn follows all data and only
// credit updates follow it (none once both sides sent theirs), an idle
// connection goes quiet, and the run ends (no deadlock, no livelock) with both
// sides at EOF.  With zero copy (SimZcopy), every RDMA access, zero-copy
// message and cancel too (see there).  A failure prints the seed, the state
// of both sides and the last events.
#include "sim_world.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace {

using sdpsim::kNoSlotLimit;
using sdpsim::Result;
using sdpsim::Rng;
using sdpsim::SideConfig;
using sdpsim::SideStats;
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

// Receive buffers that grow: a writer whose send buffers are larger than
// the reader's receive buffers asks once (ChRcvBuf), the reader posts
// larger buffers and answers once every buffer the writer can reach has
// the new size, and the writer's segments grow.  A reader that refuses
// answers with its current size and the segments stay as they were.  The
// model fails the run if a message lands in a buffer too small for it.
// A writer whose send buffers (1 KiB) are larger than the 64-byte receive
// buffers both sides start with.
SideConfig GrowingWriter()
{
    SideConfig writer;
    writer.bytes = 60000;
    writer.max_write = 3000;
    writer.rx_buf_size = 64;
    writer.tx_buf_size = 1024;
    writer.tx_bufs = 4;
    return writer;
}

TEST(Sim, ReceiveBuffersGrowWhenTheWriterAsks)
{
    const SideConfig writer = GrowingWriter();
    SideConfig reader = writer;
    reader.bytes = 0;
    reader.rx_bufs = 4;
    for (const unsigned grow_max : {0u, 512u, 4096u}) {
        reader.rx_grow_max = grow_max;
        for (std::uint64_t seed = 1; seed <= 10; seed++) {
            const Result r = Simulate(seed, writer, reader);
            ASSERT_SIM_OK(r);
            EXPECT_EQ(r.stats[1].resizes, 1u) << "seed " << seed;
            EXPECT_EQ(r.stats[0].grown, 1u) << "seed " << seed;
            const std::size_t want =
                (grow_max == 0 ? 64 : std::min(grow_max, 1024u)) - SDP_BSDH_SIZE;
            EXPECT_EQ(r.stats[0].largest_data, want) << "seed " << seed << " grow " << grow_max;
        }
    }
    // Buffers as large as the writer's from the start: nothing to ask.
    reader.rx_buf_size = 1024;
    const Result same = Simulate(3, writer, reader);
    ASSERT_SIM_OK(same);
    EXPECT_EQ(same.stats[0].grown, 0u);
    EXPECT_EQ(same.stats[1].resizes, 0u);
}

// A writer that idles now and then asks the reader to shrink its buffers
// back, and grows them again with its next stream: every message of the
// run still fits the buffer it lands in (the model fails the run if not),
// and the stream arrives whole.
TEST(Sim, ReceiveBuffersShrinkWhenTheWriterIdles)
{
    SideConfig writer = GrowingWriter();
    writer.nodelay = true; // segments go at once: often nothing queued
    writer.idle_per_mille = 50;
    SideConfig reader = writer;
    reader.bytes = 0;
    reader.rx_bufs = 16;
    reader.max_read = 4096;
    reader.rx_grow_max = 1024;
    reader.idle_per_mille = 0;
    std::size_t shrinks = 0;
    std::size_t answers = 0;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Result r = Simulate(seed, writer, reader);
        ASSERT_SIM_OK(r);
        shrinks += r.stats[0].shrinks;
        answers += r.stats[0].grown;
        EXPECT_EQ(r.stats[0].grown, r.stats[1].resizes) << "seed " << seed;
    }
    EXPECT_GT(shrinks, 20u);
    EXPECT_GT(answers, 2 * shrinks) << "each shrink answered, and a growth after it";
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
    // Half the sinks grow their buffers when asked, some only part way.
    if (rng.per_mille(500))
        c.rx_grow_max = rng.per_mille(700) ? 4096 : PickBufSize(rng);
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
    c.idle_per_mille = rng.per_mille(300) ? 30 : 0;
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
    client.max_write = static_cast<unsigned>(rng.range(1, std::uint64_t{3} * up));
    client.max_read = static_cast<unsigned>(rng.range(1, std::uint64_t{3} * down));
    client.pause_per_mille = rng.per_mille(500) ? static_cast<unsigned>(rng.range(10, 300)) : 0;
    client.pause_steps = static_cast<unsigned>(rng.range(10, 2000));
    server.echo = true;
    server.bytes = 0;
    server.max_read = static_cast<unsigned>(
        shape.small_reads ? rng.range(1, 8) : rng.range(1, std::uint64_t{server.rx_bufs} * up));
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

// ---- zero copy -----------------------------------------------------------------
//
// The same engines with zero copy as the glue uses it (sim_host.h): big
// writes go by SrcAvail + RDMA Read, or by RDMA Write into the reader's
// SinkAvail, a chunk at a time, a chunk by bcopy when the writer is short of
// credits; SendSM turns the rest of a write to bcopy (MSG_PEEK, the grace
// timer, the send/send deadlock rule); signals cancel.  On top of the checks
// above, every run checks each RDMA access against the owner's registration
// (live key, inside the range, at the right stream offset, never after
// DONE), each zero-copy message against what it must say (the reported
// bytes, the deadlock rule, SendSM only after the completions), that every
// cancel is answered unless the DisConn or stream bytes made that moot, and
// that the bytes arrive once and in order whichever way they went.

struct ZcTotals {
    std::size_t runs = 0;
    std::size_t steps = 0;
    SideStats s; // both sides of every run
};

void Add(ZcTotals* t, const Result& r)
{
    t->runs++;
    t->steps += r.steps;
    for (const SideStats& st : r.stats) {
        t->s.data_sends += st.data_sends;
        t->s.src_avails += st.src_avails;
        t->s.sink_avails += st.sink_avails;
        t->s.sink_pieces += st.sink_pieces;
        t->s.sink_trims += st.sink_trims;
        t->s.rdma_reads += st.rdma_reads;
        t->s.read_bytes += st.read_bytes;
        t->s.rdma_writes += st.rdma_writes;
        t->s.write_bytes += st.write_bytes;
        t->s.send_sms += st.send_sms;
        t->s.deadlock_sms += st.deadlock_sms;
        t->s.peeks += st.peeks;
        t->s.small_read_sms += st.small_read_sms;
        t->s.adv_skipped += st.adv_skipped;
        t->s.src_cancels += st.src_cancels;
        t->s.sink_cancels += st.sink_cancels;
        t->s.adv_unused += st.adv_unused;
        t->s.bcopy_chunks += st.bcopy_chunks;
        t->s.chunk_bytes += st.chunk_bytes;
        t->s.too_big += st.too_big;
        t->s.grace_sms += st.grace_sms;
        t->s.grace_agains += st.grace_agains;
        t->s.last_credit += st.last_credit;
        t->s.late_sinks += st.late_sinks;
        t->s.overtaken += st.overtaken;
        t->s.stale_acks += st.stale_acks;
    }
}

void Print(const char* what, const ZcTotals& t)
{
    std::printf("%s: %zu runs, %zu steps; %zu SrcAvail, %zu RDMA Reads (%zu B), %zu SinkAvail "
                "(%zu further pieces, %zu reads took pieces back, "
                "%zu unused, %zu after DisConn, %zu chances skipped), %zu RDMA Writes (%zu B), "
                "%zu SendSM (%zu by the deadlock rule, %zu MSG_PEEK, %zu small reads, %zu grace "
                "timer, %zu periods restarted), "
                "%zu SrcAvailCancel, %zu "
                "SinkAvailCancel (%zu overtaken, %zu stale acks), %zu chunks by bcopy (%zu B), "
                "%zu writes too big, %zu answers with the last credit\n",
                what, t.runs, t.steps, t.s.src_avails, t.s.rdma_reads, t.s.read_bytes,
                t.s.sink_avails, t.s.sink_pieces, t.s.sink_trims, t.s.adv_unused, t.s.late_sinks,
                t.s.adv_skipped, t.s.rdma_writes, t.s.write_bytes, t.s.send_sms, t.s.deadlock_sms,
                t.s.peeks, t.s.small_read_sms, t.s.grace_sms, t.s.grace_agains, t.s.src_cancels,
                t.s.sink_cancels, t.s.overtaken, t.s.stale_acks, t.s.bcopy_chunks, t.s.chunk_bytes,
                t.s.too_big, t.s.last_credit);
}

// Seeds of a zero-copy scenario: SDP_SIM_SEEDS=n runs n instead if that is
// more (the totals each test expects are for its default).
std::uint64_t Seeds(std::uint64_t dflt)
{
    const char* env = std::getenv("SDP_SIM_SEEDS");
    return env != nullptr ? std::max<std::uint64_t>(dflt, std::strtoull(env, nullptr, 10)) : dflt;
}

// A writer whose every write is a zero-copy one and a reader: every byte goes
// by RDMA (nothing stops an offer: no signal, no MSG_PEEK, no grace timer, no
// SrcAvail the other way), by RDMA Read, or by RDMA Write when the reader
// advertises - except a chunk now and then that goes by bcopy because the
// writer found no credit or control buffer for its SrcAvail.
TEST(SimZcopy, ZeroCopyOnlyOneWay)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(60);
    std::uint64_t strict = 0; // runs where every byte must go by zero copy
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x9e3779b97f4a7c15ull + 0x2c);
        SideConfig w;
        w.rx_bufs = static_cast<unsigned>(rng.range(4, 16));
        w.tx_bufs = static_cast<unsigned>(rng.range(1, 8));
        w.rx_buf_size = w.tx_buf_size = rng.per_mille(500) ? 1024 : 256;
        w.zcopy_thresh = 1; // the stream's tail too
        w.zcopy_chunk = static_cast<unsigned>(rng.range(500, 16000));
        w.min_write = static_cast<unsigned>(rng.range(1, 4000));
        w.max_write = 4 * w.min_write;
        w.bytes = rng.range(10000, 100000);
        SideConfig r = w;
        r.bytes = 0;
        r.zcopy_thresh = static_cast<unsigned>(rng.range(500, 4000)); // its SinkAvails
        r.max_read = static_cast<unsigned>(rng.range(100, 20000));
        r.sink_avail = (seed & 1) != 0;
        r.sink_pieces = 1 + static_cast<unsigned>((seed >> 2) % SDP_CORE_MAX_ADVERTS);
        r.pause_per_mille = rng.per_mille(300) ? 100 : 0;
        r.pause_steps = 200;
        const Result res = (seed & 2) != 0 ? Simulate(seed, w, r, RandomWeights(rng))
                                           : Simulate(seed, r, w, RandomWeights(rng));
        ASSERT_SIM_OK(res);
        const SideStats& ws = res.stats[(seed & 2) != 0 ? 0 : 1];
        const SideStats& rs = res.stats[(seed & 2) != 0 ? 1 : 0];
        Add(&t, res);
        // A reader of small pieces gets the rest of an offer by bcopy
        // after SDP_CORE_SMALL_READS of them (sdp_core_rsa_next()).
        if (rs.small_read_sms != 0)
            continue;
        strict++;
        if (ws.bcopy_chunks == 0)
            EXPECT_EQ(ws.data_sends, 0u) << "seed " << seed << ": a byte went by bcopy";
        EXPECT_EQ(rs.read_bytes + ws.write_bytes + ws.chunk_bytes, w.bytes) << "seed " << seed;
    }
    Print("zero copy only", t);
    std::printf("zero copy only: %llu of %llu runs without small-read give-ups\n",
                static_cast<unsigned long long>(strict), static_cast<unsigned long long>(seeds));
    EXPECT_GE(strict * 3, seeds) << "the strict check ran too rarely to mean much";
    EXPECT_GT(t.s.read_bytes, 0u);
    EXPECT_GT(t.s.write_bytes, 0u);
    EXPECT_GT(t.s.sink_pieces, 0u) << "no read advertised its buffer in pieces";
    EXPECT_LT(t.s.chunk_bytes * 20, t.s.read_bytes + t.s.write_bytes)
        << "most bytes go by zero copy";
}

// Now and then too small for some zero-copy messages (a peer may announce
// 17 bytes; SinkAvail needs 36, SrcAvail 32, the completions 20).
unsigned PickZcBufSize(Rng& rng)
{
    static const unsigned kTiny[] = {17, 20, 32, 36};
    static const unsigned kSizes[] = {64, 100, 256, 1000, 4096};
    if (rng.per_mille(150))
        return kTiny[rng.below(sizeof(kTiny) / sizeof(kTiny[0]))];
    return kSizes[rng.below(sizeof(kSizes) / sizeof(kSizes[0]))];
}

// Everything at random on both sides, write and read sizes spanning the
// threshold, with the bcopy features (Nagle, cork, MSG_MORE, urgent data,
// early shutdown, sleeping readers), writers and readers interrupted now and
// then, offers given up by the grace timer, receive buffers down to those
// too small for zero copy.
SideConfig RandomZcSide(Rng& rng)
{
    SideConfig c;
    c.rx_bufs = static_cast<unsigned>(rng.per_mille(600) ? rng.range(3, 4) : rng.range(5, 16));
    c.tx_bufs = static_cast<unsigned>(rng.per_mille(600) ? rng.range(1, 2) : rng.range(3, 8));
    c.rx_buf_size = PickZcBufSize(rng);
    c.tx_buf_size = rng.per_mille(500) ? c.rx_buf_size : PickZcBufSize(rng);
    c.ctl_bufs = static_cast<unsigned>(rng.per_mille(700) ? 8 : rng.range(1, 3));
    c.nodelay = rng.per_mille(300);
    c.cork = rng.per_mille(200);
    const unsigned seg = std::min(c.rx_buf_size, c.tx_buf_size) - SDP_BSDH_SIZE;
    c.zcopy_thresh =
        rng.per_mille(100) ? 0 : static_cast<unsigned>(rng.range(1, std::uint64_t{4} * seg));
    c.zcopy_chunk = static_cast<unsigned>(rng.range(1, std::uint64_t{6} * seg));
    c.bytes = rng.per_mille(100) ? 0 : rng.range(1, std::min(20 * seg, 20000u));
    const std::uint64_t big = std::uint64_t{3} * std::max(seg, c.zcopy_thresh);
    c.max_write = static_cast<unsigned>(rng.range(1, big));
    c.max_read = static_cast<unsigned>(rng.range(1, big));
    c.sink_avail = rng.per_mille(500);
    c.peek_per_mille = rng.per_mille(200) ? 200 : 0;
    c.more_per_mille = rng.per_mille(200) ? 300 : 0;
    c.urgent_per_mille = rng.per_mille(200) ? 50 : 0;
    c.shutdown_per_mille = rng.per_mille(200) ? 20 : 0;
    c.pause_per_mille = rng.per_mille(300) ? static_cast<unsigned>(rng.range(10, 300)) : 0;
    c.pause_steps = static_cast<unsigned>(rng.range(10, 2000));
    return c;
}

TEST(SimZcopy, MixedSizesAcrossTheThreshold)
{
    const auto start = std::chrono::steady_clock::now();
    ZcTotals t;
    const std::uint64_t seeds = Seeds(400);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x51ed2701ull + 7);
        SideConfig a = RandomZcSide(rng);
        SideConfig b = RandomZcSide(rng);
        a.sink_pieces = 1 + static_cast<unsigned>(seed % SDP_CORE_MAX_ADVERTS);
        b.sink_pieces = 1 + static_cast<unsigned>((seed / 4) % SDP_CORE_MAX_ADVERTS);
        // Tiny receive buffers at the peer make tiny segments: at most
        // ~1000 bytes then (many steps per byte).
        a.bytes = std::min<std::size_t>(a.bytes, std::size_t{20} * std::max(SegMax(a, b), 48u));
        b.bytes = std::min<std::size_t>(b.bytes, std::size_t{20} * std::max(SegMax(b, a), 48u));
        Weights w = RandomWeights(rng);
        w.signal = static_cast<unsigned>(rng.range(0, 3));
        w.grace = static_cast<unsigned>(rng.range(0, 2));
        const Result r = Simulate(seed, a, b, w);
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("mixed", t);
    std::printf("  in %.2f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_GT(t.s.read_bytes, 0u);
    EXPECT_GT(t.s.write_bytes, 0u);
    EXPECT_GT(t.s.src_cancels, 0u);
    EXPECT_GT(t.s.sink_cancels, 0u);
    EXPECT_GT(t.s.peeks, 0u);
    EXPECT_GT(t.s.grace_sms, 0u);
    EXPECT_GT(t.s.bcopy_chunks, 0u);
    EXPECT_GT(t.s.too_big, 0u);
    EXPECT_GT(t.s.sink_pieces, 0u);
    EXPECT_GT(t.s.sink_trims, 0u);
}

// Writers interrupted often while their SrcAvail waits for a slow reader,
// readers while their SinkAvail waits for a writer: the cancels cross reads
// in progress, RdmaRdCompls, SendSMs, data and DisConns in every order; each
// write returns what the sink read and the stream goes on.
// One FrequentCancels run: both sides cancel their offers and
// advertisements at random (signals), readers pause.
Result FrequentCancelsRun(std::uint64_t seed, unsigned sink_pieces = 1)
{
    Rng rng(seed * 0x2545f4914f6cdd1dull + 11);
    SideConfig c;
    c.rx_bufs = static_cast<unsigned>(rng.range(3, 12));
    c.tx_bufs = static_cast<unsigned>(rng.range(1, 4));
    c.rx_buf_size = c.tx_buf_size = 256;
    c.zcopy_thresh = static_cast<unsigned>(rng.range(100, 1000));
    c.zcopy_chunk = static_cast<unsigned>(rng.range(200, 3000));
    c.max_write = 3 * c.zcopy_thresh;
    c.max_read = static_cast<unsigned>(rng.range(50, 1000));
    c.bytes = rng.range(2000, 15000);
    c.pause_per_mille = 300;
    c.pause_steps = static_cast<unsigned>(rng.range(10, 200));
    c.sink_avail = rng.per_mille(500);
    c.sink_pieces = sink_pieces;
    SideConfig d = c;
    d.bytes = (seed & 1) != 0 ? 0 : rng.range(2000, 15000);
    Weights w = RandomWeights(rng);
    w.signal = static_cast<unsigned>(rng.range(10, 40));
    return Simulate(seed, c, d, w);
}

TEST(SimZcopy, FrequentCancels)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(40);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        const Result r =
            FrequentCancelsRun(seed, 1 + static_cast<unsigned>((seed >> 1) % SDP_CORE_MAX_ADVERTS));
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("frequent cancels", t);
    EXPECT_GT(t.s.src_cancels, 1000u);
    EXPECT_GT(t.s.sink_cancels, 10u);
}

// Used to go wrong: both sides' own cancels (SrcAvailCancel and
// SinkAvailCancel, crossing on the wire) took the last credit on each side,
// and nobody could answer anything any more.  Fixed: only answers and
// completions may take the last credit; our own cancels keep it back.
// These seeds (of 10 000) reached that state.
TEST(SimZcopyRegressions, CrossingCancelsKeepTheLastCredit)
{
    for (const std::uint64_t seed : {906u, 3554u, 6626u, 7252u}) {
        const Result r = FrequentCancelsRun(seed);
        ASSERT_SIM_OK(r);
    }
}

// Readers that meet offers with MSG_PEEK give them up: SendSM, and the
// bytes come by bcopy instead.
TEST(SimZcopy, PeekAbandonsTheOffer)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(40);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x9e3779b97f4a7c15ull + 0x9ee);
        SideConfig c;
        c.rx_bufs = static_cast<unsigned>(rng.range(3, 12));
        c.tx_bufs = static_cast<unsigned>(rng.range(1, 6));
        c.rx_buf_size = c.tx_buf_size = rng.per_mille(500) ? 1024 : 100;
        c.zcopy_thresh = static_cast<unsigned>(rng.range(100, 3000));
        c.zcopy_chunk = static_cast<unsigned>(rng.range(100, 6000));
        c.max_write = 3 * c.zcopy_thresh;
        c.max_read = static_cast<unsigned>(rng.range(50, 6000));
        c.bytes = rng.range(2000, 20000);
        c.peek_per_mille = static_cast<unsigned>(rng.range(300, 1000));
        const Result r = Simulate(seed, c, c, RandomWeights(rng));
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("MSG_PEEK", t);
    EXPECT_GT(t.s.peeks, 50u);
    EXPECT_GE(t.s.send_sms, t.s.peeks);
    EXPECT_GT(t.s.data_sends, 0u);
}

// Readers that sleep for long stretches (or only read after writing
// everything): the grace timer gives their offers up (SendSM), the writers'
// SrcAvailCancel answers, and the rest of each write goes by bcopy.
TEST(SimZcopy, GraceTimerGivesUpUnreadOffers)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(40);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x5851f42d4c957f2dull + 0x6ace);
        SideConfig c;
        c.rx_bufs = static_cast<unsigned>(rng.range(3, 12));
        c.tx_bufs = static_cast<unsigned>(rng.range(1, 6));
        c.rx_buf_size = c.tx_buf_size = rng.per_mille(500) ? 1024 : 256;
        c.zcopy_thresh = static_cast<unsigned>(rng.range(100, 2000));
        c.zcopy_chunk = static_cast<unsigned>(rng.range(100, 6000));
        c.max_write = 3 * c.zcopy_thresh;
        c.max_read = static_cast<unsigned>(rng.range(50, 6000));
        c.bytes = rng.range(2000, 20000);
        c.pause_per_mille = static_cast<unsigned>(rng.range(300, 1000));
        c.pause_steps = static_cast<unsigned>(rng.range(100, 1000));
        c.write_all_before_read = rng.per_mille(300);
        c.sink_avail = rng.per_mille(300);
        SideConfig d = c;
        d.bytes = (seed & 1) != 0 ? 0 : rng.range(2000, 20000);
        Weights w = RandomWeights(rng);
        w.grace = static_cast<unsigned>(rng.range(1, 10));
        w.signal = static_cast<unsigned>(rng.range(0, 2));
        const Result r = Simulate(seed, c, d, w);
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("grace timer", t);
    EXPECT_GT(t.s.grace_sms, 50u);
    EXPECT_GT(t.s.grace_agains, 0u); // a period with reading restarts
    EXPECT_GE(t.s.send_sms, t.s.grace_sms);
    EXPECT_GT(t.s.data_sends, 0u);
}

// A reader that advertises its buffer whenever it would block, and a writer
// of mostly small writes (bcopy, which ends the advertisement unused) with a
// big one now and then (the RDMA Write into it), writing slowly so that the
// advertisement is often there first.
TEST(SimZcopy, SinkAvailWithSmallWriters)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(120);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x5851f42d4c957f2dull + 3);
        SideConfig w;
        w.rx_bufs = static_cast<unsigned>(rng.range(3, 12));
        w.tx_bufs = static_cast<unsigned>(rng.range(1, 6));
        w.rx_buf_size = w.tx_buf_size = rng.per_mille(500) ? 1024 : 256;
        w.nodelay = rng.per_mille(500);
        w.zcopy_thresh = static_cast<unsigned>(rng.range(300, 2000));
        w.zcopy_chunk = static_cast<unsigned>(rng.range(300, 8000));
        w.max_write = w.zcopy_thresh + w.zcopy_thresh / 4;
        w.bytes = rng.range(2000, 30000);
        SideConfig r = w;
        r.bytes = 0;
        r.sink_avail = true;
        r.sink_pieces = 1 + static_cast<unsigned>((seed >> 1) % SDP_CORE_MAX_ADVERTS);
        r.max_read =
            static_cast<unsigned>(rng.range(w.zcopy_thresh, std::uint64_t{4} * w.zcopy_thresh));
        Weights wt = RandomWeights(rng);
        wt.write = static_cast<unsigned>(rng.range(1, 3));
        wt.read = static_cast<unsigned>(rng.range(20, 50));
        wt.signal = static_cast<unsigned>(rng.range(0, 2));
        wt.grace = static_cast<unsigned>(rng.range(0, 1));
        const Result res = (seed & 1) != 0 ? Simulate(seed, w, r, wt) : Simulate(seed, r, w, wt);
        ASSERT_SIM_OK(res);
        Add(&t, res);
    }
    Print("SinkAvail, small writers", t);
    EXPECT_GT(t.s.rdma_writes, 20u);
    EXPECT_GT(t.s.adv_unused, 50u);
}

// Both applications write everything before reading (a request/response
// protocol with big messages): their SrcAvails cross with nobody reading,
// the deadlock rule answers each with SendSM and the writes finish by bcopy,
// into rings that hold it all; a SrcAvail that does not cross waits until
// the other side is done writing and reads it.  (Through rings that cannot
// hold it all, see SimZcopyRegressions.ZeroCopyAnswersStarveForCredits.)
TEST(SimZcopy, SendSendDeadlockEndsBySendSm)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(60);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x9e3779b97f4a7c15ull + 0xdead);
        SideConfig c;
        c.rx_bufs = static_cast<unsigned>(rng.range(24, 64));
        c.tx_bufs = static_cast<unsigned>(rng.range(1, 8));
        c.rx_buf_size = c.tx_buf_size = 4096;
        c.zcopy_thresh = static_cast<unsigned>(rng.range(500, 3000));
        c.zcopy_chunk = static_cast<unsigned>(rng.range(500, 8000));
        c.min_write = c.zcopy_thresh;
        c.max_write = 3 * c.zcopy_thresh;
        c.max_read = static_cast<unsigned>(rng.range(100, 5000));
        c.write_all_before_read = true;
        c.bytes = rng.range(5000, 40000);
        SideConfig d = c;
        d.bytes = rng.range(5000, 40000);
        d.sink_avail = rng.per_mille(500);
        const Result r = Simulate(seed, c, d, RandomWeights(rng));
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("send/send", t);
    EXPECT_GT(t.s.deadlock_sms, 30u);
}

// The client of a zero-copy echo run: it writes by SrcAvail (random
// threshold and chunk), reads up to three thresholds at a time (from
// min_read bytes, 0: from the threshold, so that it may advertise) and
// advertises its buffer sink_per_mille of the runs.
void ZeroCopyEchoClient(Rng& rng, SideConfig* client, unsigned min_read, unsigned sink_per_mille)
{
    client->zcopy_thresh = static_cast<unsigned>(rng.range(50, 2000));
    client->zcopy_chunk = static_cast<unsigned>(rng.range(50, 4000));
    client->max_write =
        static_cast<unsigned>(rng.range(1, std::uint64_t{3} * client->zcopy_thresh));
    client->max_read = static_cast<unsigned>(rng.range(
        min_read != 0 ? min_read : client->zcopy_thresh, std::uint64_t{3} * client->zcopy_thresh));
    client->sink_avail = rng.per_mille(sink_per_mille);
    client->bytes = std::max<std::size_t>(client->bytes, 3000);
}

// A zero-copy client and an echo server (which reads the client's SrcAvails
// by RDMA Read and writes back by bcopy).
TEST(SimZcopy, EchoServerReadsByRdma)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(100);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Echo e = RandomEcho(seed, EchoShape{});
        Rng rng(seed * 31 + 5);
        ZeroCopyEchoClient(rng, e.a.echo ? &e.b : &e.a, 1, 500);
        e.w.signal = static_cast<unsigned>(rng.range(0, 2));
        e.w.grace = static_cast<unsigned>(rng.range(0, 1));
        const Result r = Simulate(seed, e.a, e.b, e.w);
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("echo", t);
    EXPECT_GT(t.s.read_bytes, 0u);
}

// The echo server writes back by zero copy too, as sdp_kecho does (a kernel
// consumer offers SrcAvails and never advertises its memory); the client
// writes by SrcAvail and reads into SinkAvails.
TEST(SimZcopy, EchoServerWritesByZeroCopy)
{
    ZcTotals t;
    const std::uint64_t seeds = Seeds(200);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Echo e = RandomEcho(seed, EchoShape{});
        Rng rng(seed * 37 + 11);
        SideConfig& client = e.a.echo ? e.b : e.a;
        SideConfig& server = e.a.echo ? e.a : e.b;
        ZeroCopyEchoClient(rng, &client, 0, 800);
        client.sink_pieces = static_cast<unsigned>(rng.range(1, 4));
        server.zcopy_thresh = static_cast<unsigned>(rng.range(50, 2000));
        server.zcopy_chunk = static_cast<unsigned>(rng.range(50, 4000));
        server.max_write = ~0u;
        const Result r = Simulate(seed, e.a, e.b, e.w);
        ASSERT_SIM_OK(r);
        Add(&t, r);
    }
    Print("zero-copy echo", t);
    EXPECT_GT(t.s.read_bytes, 0u);
}

// ---- a receive ring that grows and shrinks ---------------------------------------
//
// The echo server of the last test with a receive ring that changes size as
// the core decides (sdp_core_rx_free_buffer(), sdp_core_rx_more_wanted()):
// its ring fills with unread data while it writes back, so buffers are
// added; the client's stream idles (it asks for the first buffer size
// again) and grows again, and a growth is refused when the ring's memory
// would exceed its bound: both set the ring to give added buffers back as
// they come free.  Meanwhile the server's zero-copy send waits for the
// client's RdmaRdCompl, which needs a credit, and its reader waits for that
// send: the kernel echo server that stalled in sdp.ko (dec0339).

struct RingTotals {
    std::size_t runs = 0;
    std::size_t failed = 0;
    std::size_t added = 0;
    std::size_t given_back = 0;
    std::size_t client_added = 0;   // of those added, the client's
    std::size_t most_over_base = 0; // most buffers added at once, any run
    std::size_t shrinks = 0;
    std::size_t refused = 0;
    std::size_t read_bytes = 0;
    std::string first_error;
};

RingTotals RunGrowingRingEcho(std::uint64_t seeds, bool trim_below_posted_base)
{
    RingTotals t;
    for (std::uint64_t seed = 1; seed <= seeds && (!trim_below_posted_base || t.failed == 0);
         seed++) {
        Echo e = RandomEcho(seed, EchoShape{});
        Rng rng(seed * 53 + 7);
        SideConfig& client = e.a.echo ? e.b : e.a;
        SideConfig& server = e.a.echo ? e.a : e.b;
        ZeroCopyEchoClient(rng, &client, 0, 300);
        // Larger send buffers than the server's receive buffers: the
        // client asks them to grow, and to shrink back when it idles.
        client.tx_buf_size = static_cast<unsigned>(
            std::min<std::uint64_t>(4096, server.rx_buf_size * rng.range(2, 8)));
        client.idle_per_mille = static_cast<unsigned>(rng.range(20, 200));
        client.bytes = std::max<std::size_t>(client.bytes, 20000);
        server.rx_grow_max = client.tx_buf_size;
        server.rx_cap = server.rx_bufs * static_cast<unsigned>(rng.range(2, 4));
        server.rx_unread_max = std::size_t{server.rx_bufs} * server.rx_buf_size * rng.range(1, 4);
        server.zcopy_thresh = static_cast<unsigned>(rng.range(50, 2000));
        server.zcopy_chunk = static_cast<unsigned>(rng.range(50, 4000));
        server.max_write = ~0u;
        server.trim_below_posted_base = trim_below_posted_base;
        // The client's ring grows too, one seed in two: its reader lags
        // behind the echo while it writes.
        client.rx_cap = client.rx_bufs * static_cast<unsigned>(rng.range(1, 3));
        client.rx_unread_max = std::size_t{client.rx_bufs} * client.rx_buf_size * rng.range(1, 4);
        const Result r = Simulate(seed, e.a, e.b, e.w);
        t.runs++;
        if (!r.ok && t.failed++ == 0)
            t.first_error = "seed " + std::to_string(seed) + ": " + r.error;
        const SideStats& st = r.stats[e.a.echo ? 0 : 1];
        const SideStats& client_st = r.stats[e.a.echo ? 1 : 0];
        t.added += st.rx_added + client_st.rx_added;
        t.given_back += st.rx_given_back + client_st.rx_given_back;
        t.client_added += client_st.rx_added;
        t.most_over_base = std::max(t.most_over_base,
                                    st.rx_most - std::min(st.rx_most, std::size_t{server.rx_bufs}));
        t.refused += st.grow_refused;
        t.shrinks += r.stats[e.a.echo ? 1 : 0].shrinks;
        t.read_bytes += st.read_bytes;
    }
    return t;
}

TEST(SimEcho, ReceiveRingGrowsAndShrinksUnderAZeroCopyEchoServer)
{
    const RingTotals t = RunGrowingRingEcho(Seeds(200), false);
    ASSERT_EQ(t.failed, 0u) << t.first_error;
    std::printf("growing ring echo: %zu runs; %zu buffers added (%zu by clients; the server "
                "at most %zu over its first number), %zu given back; %zu idle shrinks, %zu "
                "growths refused; %zu B by RDMA Read\n",
                t.runs, t.added, t.client_added, t.most_over_base, t.given_back, t.shrinks,
                t.refused, t.read_bytes);
    EXPECT_GT(t.added, 0u);
    EXPECT_GT(t.client_added, 0u);
    EXPECT_GT(t.given_back, 0u);
    EXPECT_GT(t.shrinks, 0u);
    EXPECT_GT(t.refused, 0u);
    EXPECT_GT(t.read_bytes, 0u);
}

// The same with a glue that gives free buffers back counting only the live
// ones, as sdp.ko did: the server runs out of posted buffers, the client of
// credits.
TEST(SimChecks, CatchRingTrimmedBelowItsPostedBase)
{
    const RingTotals t = RunGrowingRingEcho(2000, true);
    ASSERT_GT(t.failed, 0u) << t.runs << " runs";
    std::printf("caught after %zu runs: %s\n", t.runs,
                t.first_error.substr(0, t.first_error.find('\n')).c_str());
    EXPECT_NE(t.first_error.find("deadlock"), std::string::npos) << t.first_error;
}

// A glue that offers its chunk while segments are still queued ahead of it
// sends stream bytes out of order: caught when the SrcAvail arrives.
TEST(SimChecks, CatchZeroCopyOvertakingQueuedSegments)
{
    SideConfig w;
    w.bytes = 20000;
    w.max_write = 3000;
    w.zcopy_thresh = 1000;
    w.more_per_mille = 1000; // MSG_MORE: a partial segment stays queued
    w.zcopy_skip_flush = true;
    SideConfig r;
    r.bytes = 0;
    const Weights wt;
    std::string error;
    for (std::uint64_t seed = 1; seed <= 20 && error.empty(); seed++) {
        const Result res = Simulate(seed, w, r, wt);
        if (!res.ok)
            error = res.error;
    }
    EXPECT_NE(error.find("out of order"), std::string::npos) << error;
}

// ---- regressions: core bugs the zero-copy simulation found ---------------------------
//
// Each scenario used to fail (deadlock, protocol error or a check) in most of
// its seeds; the comment on each says what went wrong and how it was fixed.
// Each also checks that its runs still reach the situation it is about.

struct Regression {
    std::size_t failed = 0;
    std::string first; // the first failure
    ZcTotals t;
};

// Seeds 1..runs (or SDP_SIM_SEEDS) of the scenario `make` builds (every failure printed with
// SDP_SIM_PRINT set).
template <typename Make> Regression RunRegression(const char* what, std::uint64_t runs, Make make)
{
    Regression g;
    const std::uint64_t seeds = Seeds(runs);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        Rng rng(seed * 0x9e3779b97f4a7c15ull + 0xb06);
        SideConfig a;
        SideConfig b;
        Weights w;
        make(rng, &a, &b, &w);
        const Result r = Simulate(seed, a, b, w);
        if (!r.ok && g.failed++ == 0)
            g.first = r.error;
        if (!r.ok && std::getenv("SDP_SIM_PRINT") != nullptr)
            std::printf("%s\n", r.error.c_str());
        Add(&g.t, r);
    }
    Print(what, g.t);
    return g;
}

// tx_sink_avail() lets a reader advertise after its own shutdown(SHUT_WR) (a
// half-closed socket still reads), but the peer's on_recv used to reject a
// SinkAvail after the DisConn (zc_rx, kSinkAvail: SDP_CS_DISCONN_RCVD) with
// EPROTO: the connection was aborted.  Now accepted.
TEST(SimZcopyRegressions, SinkAvailAfterOwnShutdown)
{
    const Regression g = RunRegression(
        "SinkAvailAfterOwnShutdown", 20, [](Rng&, SideConfig* a, SideConfig* b, Weights* w) {
            a->bytes = 50000;
            a->rx_buf_size = a->tx_buf_size = 1024;
            a->min_write = 2000;
            a->max_write = 9000;
            a->zcopy_thresh = 2000;
            b->bytes = 0;
            b->rx_buf_size = b->tx_buf_size = 1024;
            b->max_read = 5000;
            b->zcopy_thresh = 2000;
            b->sink_avail = true;
            w->shutdown = 1000; // the reader shuts its sending side down at once
        });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.late_sinks, 20u) << "SinkAvails after the reader's DisConn";
    EXPECT_GT(g.t.s.write_bytes, 0u);
}

// A zero-copy writer on the active side used to wait for the third credit
// of its SrcAvail with nothing queued, while the passive peer had 3 buffers
// posted and believed the writer had 2: control_due() asks for credits only
// for queued data that tx_decide() found credit-blocked, and the passive
// side does not volunteer an update at exactly the reserve.  Deadlock (bcopy
// in the same state would ask and be answered).  Now the glue sends that
// chunk by bcopy (whose credit requests get it going) and tries zero copy
// again for the next.
TEST(SimZcopyRegressions, WriterAtTheCreditReserve)
{
    const Regression g = RunRegression("WriterAtTheCreditReserve", 40,
                                       [](Rng& rng, SideConfig* a, SideConfig* b, Weights* w) {
                                           a->rx_bufs = 8;
                                           a->rx_buf_size = a->tx_buf_size = 256;
                                           a->bytes = 20000;
                                           a->max_write = 1000;
                                           a->zcopy_thresh = 400;
                                           a->zcopy_chunk = 1000;
                                           *b = *a;
                                           b->rx_bufs = 3;
                                           b->bytes = rng.range(0, 3000);
                                           *w = RandomWeights(rng);
                                       });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.bcopy_chunks, 40u) << "chunks by bcopy for want of credits";
    EXPECT_GT(g.t.s.read_bytes, 0u);
}

// Zero-copy answers used to starve for credits.  A writer waits for its
// SrcAvail (it does not read meanwhile), its ring full of the peer's unread
// bcopy data; the peer read the offer but has 1 credit left, and
// control_due() sent zero-copy messages (RdmaRdCompl, SendSM, SinkCancelAck)
// only with 2; the writer, with 2 or fewer buffers posted, never sends a
// credit update.  The control reserve does not cover two answers in a row (a
// partial RdmaRdCompl then the last one or SendSM).  Now zero-copy answers
// may take the last credit.
TEST(SimZcopyRegressions, ZeroCopyAnswersStarveForCredits)
{
    const Regression g =
        RunRegression("ZeroCopyAnswersStarveForCredits", 60,
                      [](Rng& rng, SideConfig* a, SideConfig* b, Weights* w) {
                          a->rx_bufs = static_cast<unsigned>(rng.range(3, 16));
                          a->tx_bufs = static_cast<unsigned>(rng.range(1, 8));
                          a->rx_buf_size = a->tx_buf_size = rng.per_mille(500) ? 1024 : 256;
                          a->zcopy_thresh = static_cast<unsigned>(rng.range(500, 3000));
                          a->zcopy_chunk = static_cast<unsigned>(rng.range(500, 8000));
                          a->min_write = a->zcopy_thresh;
                          a->max_write = 3 * a->zcopy_thresh;
                          a->max_read = static_cast<unsigned>(rng.range(100, 5000));
                          a->bytes = rng.range(5000, 40000);
                          a->write_all_before_read = true;
                          *b = *a;
                          b->bytes = rng.range(5000, 40000);
                          *w = RandomWeights(rng);
                      });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.last_credit, 10u) << "zero-copy answers sent with the last credit";
}

// A reader interrupted while its SinkAvail is out cancels it and used to
// wait for SinkCancelAck.  Stream bytes that arrived meanwhile (Data the
// writer sent before it saw the advertisement) ended an ACTIVE advertisement
// but not a CANCELLING one (data_received()), so the reader stayed asleep
// while that data held its receive ring, and the writer, out of credits,
// could not send the SinkCancelAck it owed.  Deadlock.  Now stream bytes end
// a CANCELLING advertisement too: a cancel not sent yet is dropped, the
// SinkCancelAck of one sent is ignored when it comes (and no new SinkAvail
// goes before it came).
TEST(SimZcopyRegressions, CancelledSinkAvailHoldsItsReader)
{
    const Regression g = RunRegression("CancelledSinkAvailHoldsItsReader", 100,
                                       [](Rng& rng, SideConfig* a, SideConfig* b, Weights* w) {
                                           // A streams bcopy data; B's reader advertises whenever
                                           // it has nothing to read and is interrupted often.
                                           a->rx_bufs = 4;
                                           a->tx_bufs = static_cast<unsigned>(rng.range(1, 4));
                                           a->rx_buf_size = a->tx_buf_size = 64;
                                           a->bytes = 3000;
                                           a->max_write = static_cast<unsigned>(rng.range(10, 100));
                                           *b = *a;
                                           b->bytes = 0;
                                           b->zcopy_thresh = 30;
                                           b->sink_avail = true;
                                           b->max_read = static_cast<unsigned>(rng.range(30, 200));
                                           *w = RandomWeights(rng);
                                           w->signal = static_cast<unsigned>(rng.range(10, 50));
                                       });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.overtaken, 50u) << "cancelled advertisements ended by stream bytes";
    EXPECT_GT(g.t.s.stale_acks, 10u) << "SinkCancelAcks answering nothing";
}

// A reader cancels its SinkAvail while the writer's DisConn is on its way.
// The DisConn used to end neither an ACTIVE nor a CANCELLING advertisement;
// the writer answered the SinkAvailCancel after its DisConn, after both
// DisConns if the reader had shut down too (the glue closes the connection
// there), or could not send it at all (no credit updates flow once both
// sides sent DisConn).  The reader waited for an answer that never came.
// Now the DisConn ends the advertisement, and a SinkAvailCancel that
// arrives after our own DisConn is not answered.
TEST(SimZcopyRegressions, SinkAvailCancelCrossingDisConn)
{
    const Regression g = RunRegression("SinkAvailCancelCrossingDisConn", 300,
                                       [](Rng& rng, SideConfig* a, SideConfig* b, Weights* w) {
                                           a->rx_bufs = 4;
                                           a->rx_buf_size = a->tx_buf_size = 256;
                                           a->bytes = rng.range(1, 100);
                                           *b = *a;
                                           b->bytes = rng.range(0, 100);
                                           b->zcopy_thresh = 50;
                                           b->sink_avail = true;
                                           b->max_read = 500;
                                           *w = RandomWeights(rng);
                                           w->signal = 10;
                                           w->shutdown = 20;
                                       });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.overtaken, 20u) << "cancelled advertisements ended by the DisConn";
}

// Zero-copy messages used to be longer than the peer's receive buffers: a
// peer may announce buffers down to 17 bytes (on_hello), but tx_src_avail()
// (32 bytes), tx_sink_avail() (36) and the RdmaRdCompl / RdmaWrCompl a
// transfer then needs (20) did not look at the peer's size: the message did
// not fit the buffer it landed in.  Now they return ETOOBIG unless the
// peer's buffers hold 36 bytes and ours 20, and the write goes by bcopy.
TEST(SimZcopyRegressions, MessagesLongerThanReceiveBuffers)
{
    const Regression g = RunRegression("MessagesLongerThanReceiveBuffers", 10,
                                       [](Rng& rng, SideConfig* a, SideConfig* b, Weights* w) {
                                           static const unsigned kSizes[] = {17, 20, 24, 32, 35};
                                           a->rx_buf_size = a->tx_buf_size = 1000;
                                           a->bytes = 2000;
                                           a->max_write = 200;
                                           a->zcopy_thresh = 50;
                                           *b = *a;
                                           b->bytes = 0;
                                           b->rx_buf_size = b->tx_buf_size = kSizes[rng.below(5)];
                                           b->sink_avail = rng.per_mille(500);
                                           if (rng.per_mille(500))
                                               std::swap(*a, *b);
                                           *w = Weights{};
                                       });
    EXPECT_EQ(g.failed, 0u) << g.first;
    EXPECT_GT(g.t.s.too_big, 10u) << "writes turned to bcopy by ETOOBIG";
    EXPECT_EQ(g.t.s.src_avails, 0u);
}

} // namespace
