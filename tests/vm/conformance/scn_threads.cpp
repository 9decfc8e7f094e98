// SPDX-License-Identifier: GPL-2.0
//
// Many threads on one socket, and many sockets at once.
#include "conformance.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <poll.h>
#include <unistd.h>
#include <vector>

namespace sdp::conformance {

// Four writer threads send 1 KiB records, each record in one send() call
// under a mutex (a blocking send may be split when the buffer fills, so
// the mutex is what keeps records whole); a fifth thread polls and queries
// the socket meanwhile.  The reader checks every record and the per-thread
// order.
SCENARIO("mt.writers_locked_records")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    constexpr int kThreads = 4;
    const int records = static_cast<int>(500 * ctx.scale());
    constexpr size_t kRecord = 1024;
    std::mutex mu;
    std::atomic<int> failures{0};
    std::atomic<bool> writing{true};
    {
        std::vector<std::unique_ptr<Thread>> writers;
        for (uint32_t t = 0; t < kThreads; t++) {
            writers.push_back(std::make_unique<Thread>([&, t] {
                std::array<char, kRecord> rec{};
                for (uint32_t seq = 0; seq < static_cast<uint32_t>(records); seq++) {
                    memcpy(rec.data(), &t, 4);
                    memcpy(rec.data() + 4, &seq, 4);
                    pattern_fill(100 + t, seq * kRecord, rec.data() + 8, kRecord - 8);
                    const std::lock_guard<std::mutex> lock(mu);
                    if (send(c, rec.data(), rec.size(), MSG_NOSIGNAL) !=
                        static_cast<ssize_t>(rec.size()))
                        failures++;
                }
            }));
        }
        Thread observer([&] {
            while (writing.load()) {
                poll_now(c);
                outq(c);
                int_opt(c, SOL_SOCKET, SO_ERROR);
                sleep_ms(1);
            }
        });
        Thread closer([&] {
            for (auto& w : writers)
                w->join();
            writing = false;
            shutdown(c, SHUT_WR);
        });
        std::array<uint32_t, kThreads> next{};
        int bad = 0;
        int total = 0;
        std::array<char, kRecord> rec{};
        std::array<char, kRecord> want{};
        while (recv_exact(s, rec.data(), rec.size()) == rec.size()) {
            uint32_t t = 0;
            uint32_t seq = 0;
            memcpy(&t, rec.data(), 4);
            memcpy(&seq, rec.data() + 4, 4);
            if (t >= kThreads || seq != next[t]) {
                bad++;
                continue;
            }
            next[t]++;
            pattern_fill(100 + t, seq * kRecord, want.data() + 8, kRecord - 8);
            if (memcmp(rec.data() + 8, want.data() + 8, kRecord - 8) != 0)
                bad++;
            total++;
        }
        l.val("records", total);
        l.val("bad records", bad);
        for (int t = 0; t < kThreads; t++)
            l.flag("thread " + std::to_string(t) + " complete",
                   next[t] == static_cast<uint32_t>(records));
    }
    l.val("send failures", failures.load());
}

// Four threads send concurrently without a lock, each a stream of bytes
// from its own value range in random-size chunks.  Chunks may interleave
// anywhere, so the reader checks the multiset of bytes: a histogram.
SCENARIO("mt.writers_unlocked_histogram")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    constexpr int kThreads = 4;
    const auto per_thread = static_cast<size_t>(256 * 1024 * ctx.scale());
    std::array<uint64_t, 256> expected{};
    std::mutex exp_mu;
    std::atomic<int> failures{0};
    std::atomic<int> first_error{0};
    std::array<uint64_t, 256> seen{};
    uint64_t got = 0;
    {
        Thread reader([&] {
            std::vector<uint8_t> buf(100000);
            for (;;) {
                const ssize_t n = recv(s, buf.data(), buf.size(), 0);
                if (n <= 0)
                    return;
                for (ssize_t i = 0; i < n; i++)
                    seen[buf[static_cast<size_t>(i)]]++;
                got += static_cast<uint64_t>(n);
            }
        });
        std::vector<std::unique_ptr<Thread>> writers;
        writers.reserve(kThreads);
        for (int t = 0; t < kThreads; t++) {
            writers.push_back(std::make_unique<Thread>([&, t] {
                Rng rng(static_cast<uint64_t>(200 + t));
                std::array<uint64_t, 256> mine{};
                std::vector<uint8_t> buf(8192);
                size_t left = per_thread;
                while (left > 0) {
                    const size_t n = std::min(left, rng.range(1, buf.size()));
                    for (size_t i = 0; i < n; i++) {
                        buf[i] = static_cast<uint8_t>(t * 64 + static_cast<int>(rng.next() % 64));
                        mine[buf[i]]++;
                    }
                    if (!send_all(c, buf.data(), n)) {
                        int none = 0;
                        first_error.compare_exchange_strong(none, errno);
                        failures++;
                    }
                    left -= n;
                }
                const std::lock_guard<std::mutex> lock(exp_mu);
                for (size_t i = 0; i < 256; i++)
                    expected[i] += mine[i];
            }));
        }
        for (auto& w : writers)
            w->join();
        shutdown(c, SHUT_WR);
    }
    l.val("bytes", static_cast<long long>(got));
    l.flag("histogram matches", seen == expected);
    l.val("send failures", failures.load());
    l.txt("first send error", first_error.load() != 0 ? errname(first_error.load()) : "none");
}

// One thread sends while another receives on the same socket, on both
// ends at once.
SCENARIO("mt.duplex_one_socket")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const auto size = static_cast<size_t>(2 * 1024 * 1024 * ctx.scale());
    struct Side {
        uint64_t sent_hash = kFnvInit;
        Drain got;
    };
    Side cs;
    Side ss;
    auto writer = [size](int fd, uint64_t seed, uint64_t* hash) {
        std::vector<char> buf(32768);
        for (size_t off = 0; off < size; off += buf.size()) {
            const size_t n = std::min(buf.size(), size - off);
            pattern_fill(seed, off, buf.data(), n);
            *hash = fnv(*hash, buf.data(), n);
            if (!send_all(fd, buf.data(), n))
                return;
        }
        shutdown(fd, SHUT_WR);
    };
    {
        Thread cw([&] { writer(c, 300, &cs.sent_hash); });
        Thread sw([&] { writer(s, 301, &ss.sent_hash); });
        Thread cr([&] { cs.got = drain(c, 16384); });
        Thread sr([&] { ss.got = drain(s, 16384); });
    }
    l.val("srv got bytes", static_cast<long long>(ss.got.bytes));
    l.flag("srv got intact", ss.got.hash == cs.sent_hash);
    l.txt("srv end", ss.got.end);
    l.val("cli got bytes", static_cast<long long>(cs.got.bytes));
    l.flag("cli got intact", cs.got.hash == ss.sent_hash);
    l.txt("cli end", cs.got.end);
}

// shutdown() from another thread wakes a thread blocked in recv().
SCENARIO("mt.shutdown_wakes_recv")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    for (const int how : {SHUT_RD, SHUT_RDWR}) {
        Ctx::Pair p = ctx.pair(l, how == SHUT_RD ? 0 : 1);
        Fd c(p.cli);
        Fd s(p.srv);
        Thread t([&] {
            char buf[4];
            b.rec("recv", CALL(recv(s, buf, sizeof(buf), 0)));
        });
        sleep_ms(100);
        l.rec(how == SHUT_RD ? "shutdown RD" : "shutdown RDWR", CALL(shutdown(s, how)));
        t.join();
    }
}

// Three threads block in accept() on one listener.
SCENARIO("mt.accept_threads")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    std::mutex mu;
    std::vector<int> ids;
    constexpr int kAcceptors = 3;
    constexpr int kClients = 6;
    {
        std::vector<std::unique_ptr<Thread>> acceptors;
        acceptors.reserve(kAcceptors);
        for (int i = 0; i < kAcceptors; i++) {
            acceptors.push_back(std::make_unique<Thread>([&] {
                for (;;) {
                    const int fd = accept(ls, nullptr, nullptr);
                    if (fd < 0)
                        return;
                    unsigned char id = 0;
                    const size_t n = recv_exact(fd, &id, 1);
                    send(fd, "a", 1, MSG_NOSIGNAL);
                    close(fd);
                    if (n != 1 || id == 0xff)
                        return;
                    const std::lock_guard<std::mutex> lock(mu);
                    ids.push_back(id);
                }
            }));
        }
        int acked = 0;
        for (int i = 0; i < kClients + kAcceptors; i++) {
            Fd c(ctx.socket(l));
            if (connect(c, a.sa(), a.len) != 0)
                l.abort("connect");
            const auto id = static_cast<unsigned char>(i < kClients ? i : 0xff);
            send(c, &id, 1, MSG_NOSIGNAL);
            char r = 0;
            acked += recv(c, &r, 1, 0) == 1 ? 1 : 0;
        }
        l.val("acknowledged", acked);
    }
    std::sort(ids.begin(), ids.end());
    std::string text;
    for (const int id : ids)
        text += std::to_string(id) + " ";
    l.txt("ids", text);
}

// Eight connections, each driven by its own pair of threads.
SCENARIO("mt.concurrent_connections")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a, 16));
    constexpr int kConns = 8;
    std::vector<Ctx::Pair> pairs;
    pairs.reserve(kConns);
    for (int i = 0; i < kConns; i++)
        pairs.push_back(ctx.pair_via(l, ls, a));
    std::atomic<int> good{0};
    {
        std::vector<std::unique_ptr<Thread>> threads;
        for (int i = 0; i < kConns; i++) {
            const Ctx::Pair pr = pairs[static_cast<size_t>(i)];
            threads.push_back(std::make_unique<Thread>([pr] {
                char buf[64];
                while (recv_exact(pr.srv, buf, 64) == 64) {
                    if (!send_all(pr.srv, buf, 64))
                        return;
                }
            }));
            threads.push_back(std::make_unique<Thread>([pr, i, &good] {
                for (uint64_t k = 0; k < 200; k++) {
                    char out[64];
                    char in[64];
                    pattern_fill(400 + static_cast<uint64_t>(i), k * 64, out, 64);
                    if (!send_all(pr.cli, out, 64) || recv_exact(pr.cli, in, 64) != 64 ||
                        memcmp(in, out, 64) != 0)
                        return;
                    good++;
                }
                shutdown(pr.cli, SHUT_WR);
            }));
        }
    }
    for (const Ctx::Pair& pr : pairs) {
        close(pr.cli);
        close(pr.srv);
    }
    l.val("round trips", good.load());
}

} // namespace sdp::conformance
