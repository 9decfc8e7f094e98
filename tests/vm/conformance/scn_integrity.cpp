// SPDX-License-Identifier: GPL-2.0
//
// Data integrity: volumes of pattern data with random write and read
// sizes (fixed seeds), checked with FNV-1a over every byte.  --scale
// multiplies the volumes.
#include "conformance.h"

#include <algorithm>
#include <cstring>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

namespace sdp::conformance {
namespace {

constexpr size_t kMiB = size_t{1024} * 1024;

size_t scaled(Ctx& ctx, size_t bytes)
{
    return std::max<size_t>(4096, static_cast<size_t>(static_cast<double>(bytes) * ctx.scale()));
}

// Writes `total` bytes of pattern `seed` in chunks of [lo, hi] bytes.
uint64_t write_stream(int fd, uint64_t seed, size_t total, size_t lo, size_t hi, uint64_t rng_seed)
{
    Rng rng(rng_seed);
    std::vector<char> buf(hi);
    uint64_t h = kFnvInit;
    size_t off = 0;
    while (off < total) {
        const size_t n = std::min(total - off, rng.range(lo, hi));
        pattern_fill(seed, off, buf.data(), n);
        h = fnv(h, buf.data(), n);
        if (!send_all(fd, buf.data(), n))
            break;
        off += n;
    }
    return h;
}

// Reads to EOF in reads of [lo, hi] bytes; also checks against the pattern.
struct ReadResult {
    uint64_t bytes = 0;
    uint64_t hash = kFnvInit;
    uint64_t first_bad = UINT64_MAX;
    std::string end;
};

ReadResult read_stream(int fd, uint64_t seed, size_t lo, size_t hi, uint64_t rng_seed,
                       int flags = 0)
{
    Rng rng(rng_seed);
    std::vector<char> buf(hi);
    std::vector<char> want(hi);
    ReadResult r;
    for (;;) {
        const size_t n = rng.range(lo, hi);
        const ssize_t got = recv(fd, buf.data(), n, flags);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            r.end = got == 0 ? "EOF" : errname(errno);
            return r;
        }
        const auto g = static_cast<size_t>(got);
        pattern_fill(seed, r.bytes, want.data(), g);
        if (r.first_bad == UINT64_MAX && memcmp(buf.data(), want.data(), g) != 0) {
            size_t k = 0;
            while (buf[k] == want[k])
                k++;
            r.first_bad = r.bytes + k;
        }
        r.hash = fnv(r.hash, buf.data(), g);
        r.bytes += g;
    }
}

void report(Lane& l, const std::string& what, const ReadResult& r, size_t total, uint64_t hash)
{
    l.flag(what + " bytes == sent", r.bytes == total);
    l.flag(what + " hash matches", r.hash == hash);
    l.txt(what + " first bad offset",
          r.first_bad == UINT64_MAX ? "none" : std::to_string(r.first_bad));
    l.txt(what + " end", r.end);
    l.check(r.bytes == total && r.hash == hash && r.first_bad == UINT64_MAX, what + " intact");
}

} // namespace

// One direction, random chunk sizes on both sides.
SCENARIO46_X("integ", "unidirectional", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, ctx.ip() == Ip::kV4 ? 16 * kMiB : 4 * kMiB);
    uint64_t hash = 0;
    ReadResult r;
    {
        Thread w([&] {
            hash = write_stream(c, 500, total, 1, 65536, 501);
            shutdown(c, SHUT_WR);
        });
        r = read_stream(s, 500, 1, 131072, 502);
    }
    report(l, "srv", r, total, hash);
}

// Both directions at once, each end with a writer and a reader thread.
SCENARIO_X("integ.bidirectional", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, 8 * kMiB);
    uint64_t h_cs = 0;
    uint64_t h_sc = 0;
    ReadResult r_s;
    ReadResult r_c;
    {
        Thread cw([&] {
            h_cs = write_stream(c, 510, total, 1, 32768, 511);
            shutdown(c, SHUT_WR);
        });
        Thread sw([&] {
            h_sc = write_stream(s, 520, total, 1000, 100000, 521);
            shutdown(s, SHUT_WR);
        });
        Thread cr([&] { r_c = read_stream(c, 520, 1, 65536, 522); });
        r_s = read_stream(s, 510, 100, 200000, 512);
    }
    report(l, "srv", r_s, total, h_cs);
    report(l, "cli", r_c, total, h_sc);
}

// Many tiny writes, large MSG_WAITALL reads.
SCENARIO_X("integ.small_writes_large_reads", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, 2 * kMiB);
    uint64_t hash = 0;
    ReadResult r;
    {
        Thread w([&] {
            hash = write_stream(c, 530, total, 1, 100, 531);
            shutdown(c, SHUT_WR);
        });
        r = read_stream(s, 530, 262144, 262144, 532, MSG_WAITALL);
    }
    report(l, "srv", r, total, hash);
}

// Large writes, many tiny reads.
SCENARIO_X("integ.large_writes_small_reads", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, 2 * kMiB);
    uint64_t hash = 0;
    ReadResult r;
    {
        Thread w([&] {
            hash = write_stream(c, 540, total, kMiB, kMiB, 541);
            shutdown(c, SHUT_WR);
        });
        r = read_stream(s, 540, 1, 100, 542);
    }
    report(l, "srv", r, total, hash);
}

// Non-blocking echo: both ends run poll() loops; the client checks that
// the echoed stream equals what it sent.
SCENARIO_X("integ.nonblocking_poll_echo", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    set_nonblock(c, true);
    set_nonblock(s, true);
    const size_t total = scaled(ctx, 4 * kMiB);
    bool echo_ok = true;
    Thread echo([&] {
        std::vector<char> buf(262144);
        size_t have = 0; // bytes in buf not yet echoed
        size_t off = 0;
        bool eof = false;
        while (!eof || have > 0) {
            pollfd pf{s, 0, 0};
            if (!eof && have < buf.size())
                pf.events |= POLLIN;
            if (have > 0)
                pf.events |= POLLOUT;
            if (poll(&pf, 1, 20000) <= 0) {
                echo_ok = false;
                return;
            }
            if (have > 0 && (pf.revents & (POLLOUT | POLLERR)) != 0) {
                const ssize_t n = send(s, buf.data() + off, have, MSG_NOSIGNAL);
                if (n > 0) {
                    off += static_cast<size_t>(n);
                    have -= static_cast<size_t>(n);
                    if (have == 0)
                        off = 0;
                } else if (errno != EAGAIN) {
                    echo_ok = false;
                    return;
                }
            }
            if (!eof && off == 0 && have < buf.size() &&
                (pf.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                const ssize_t n = recv(s, buf.data() + have, buf.size() - have, 0);
                if (n > 0)
                    have += static_cast<size_t>(n);
                else if (n == 0)
                    eof = true;
                else if (errno != EAGAIN) {
                    echo_ok = false;
                    return;
                }
            }
        }
        shutdown(s, SHUT_WR);
    });
    Rng rng(551);
    std::vector<char> out(65536);
    std::vector<char> in(65536);
    std::vector<char> want(65536);
    size_t sent = 0;
    size_t got = 0;
    uint64_t bad = UINT64_MAX;
    bool shut = false;
    bool eof = false;
    bool stuck = false;
    size_t pending = 0; // bytes of `out` generated but not yet sent
    size_t pend_off = 0;
    while (!eof) {
        pollfd pf{c, POLLIN, 0};
        if (!shut)
            pf.events |= POLLOUT;
        if (poll(&pf, 1, 20000) <= 0) {
            stuck = true;
            break;
        }
        if (!shut && (pf.revents & POLLOUT) != 0) {
            if (pending == 0) {
                pending = std::min(total - sent, rng.range(1, out.size()));
                pend_off = 0;
                pattern_fill(550, sent, out.data(), pending);
            }
            const ssize_t n = send(c, out.data() + pend_off, pending, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<size_t>(n);
                pend_off += static_cast<size_t>(n);
                pending -= static_cast<size_t>(n);
            }
            if (sent == total) {
                shutdown(c, SHUT_WR);
                shut = true;
            }
        }
        if ((pf.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            const ssize_t n = recv(c, in.data(), rng.range(1, in.size()), 0);
            if (n == 0) {
                eof = true;
            } else if (n > 0) {
                const auto g = static_cast<size_t>(n);
                pattern_fill(550, got, want.data(), g);
                if (bad == UINT64_MAX && memcmp(in.data(), want.data(), g) != 0)
                    bad = got;
                got += g;
            } else if (errno != EAGAIN) {
                break;
            }
        }
    }
    echo.join();
    l.flag("echo side ok", echo_ok);
    l.flag("client stuck", stuck);
    l.flag("sent == total", sent == total);
    l.flag("echoed == total", got == total);
    l.flag("echo intact", bad == UINT64_MAX);
    l.check(!stuck && echo_ok && got == total && bad == UINT64_MAX, "echo");
}

// Eight connections in parallel.
SCENARIO_X("integ.parallel_connections", 0, 120)
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a, 16));
    constexpr int kConns = 8;
    const size_t each = scaled(ctx, kMiB);
    std::vector<Ctx::Pair> pairs;
    pairs.reserve(kConns);
    for (int i = 0; i < kConns; i++)
        pairs.push_back(ctx.pair_via(l, ls, a));
    std::vector<uint64_t> hashes(kConns);
    std::vector<ReadResult> results(kConns);
    {
        std::vector<std::unique_ptr<Thread>> threads;
        for (size_t i = 0; i < kConns; i++) {
            threads.push_back(std::make_unique<Thread>([&, i] {
                hashes[i] = write_stream(pairs[i].cli, 600 + i, each, 1, 16384, 700 + i);
                shutdown(pairs[i].cli, SHUT_WR);
            }));
            threads.push_back(std::make_unique<Thread>(
                [&, i] { results[i] = read_stream(pairs[i].srv, 600 + i, 1, 16384, 800 + i); }));
        }
    }
    int good = 0;
    for (size_t i = 0; i < kConns; i++) {
        const bool ok = results[i].bytes == each && results[i].hash == hashes[i] &&
                        results[i].first_bad == UINT64_MAX && results[i].end == "EOF";
        good += ok ? 1 : 0;
        close(pairs[i].cli);
        close(pairs[i].srv);
    }
    l.val("intact connections", good);
    l.check(good == kConns, "all connections intact");
}

// writev/readv with random iovec layouts.
SCENARIO_X("integ.readv_writev_random", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, 4 * kMiB);
    uint64_t hash = kFnvInit;
    Thread w([&] {
        Rng rng(561);
        std::vector<char> buf(size_t{8} * 8192);
        size_t off = 0;
        while (off < total) {
            iovec iov[8];
            const auto n_iov = static_cast<int>(rng.range(1, 8));
            size_t len = 0;
            for (int i = 0; i < n_iov; i++) {
                const size_t n = std::min(total - off - len, rng.range(0, 8192));
                iov[i] = {buf.data() + len, n};
                len += n;
            }
            pattern_fill(560, off, buf.data(), len);
            hash = fnv(hash, buf.data(), len);
            size_t done = 0;
            while (done < len) {
                // Resume a partial writev with a plain send of the rest.
                const ssize_t n = done == 0 ? writev(c, iov, n_iov)
                                            : send(c, buf.data() + done, len - done, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0)
                    return;
                done += static_cast<size_t>(n);
            }
            off += len;
        }
        shutdown(c, SHUT_WR);
    });
    Rng rng(562);
    std::vector<char> buf(size_t{8} * 8192);
    std::vector<char> want(size_t{8} * 8192);
    uint64_t got = 0;
    uint64_t h = kFnvInit;
    uint64_t bad = UINT64_MAX;
    for (;;) {
        iovec iov[8];
        const auto n_iov = static_cast<int>(rng.range(1, 8));
        size_t len = 0;
        for (int i = 0; i < n_iov; i++) {
            const size_t n = rng.range(1, 8192);
            iov[i] = {buf.data() + len, n};
            len += n;
        }
        const ssize_t n = readv(s, iov, n_iov);
        if (n <= 0)
            break;
        const auto g = static_cast<size_t>(n);
        pattern_fill(560, got, want.data(), g);
        if (bad == UINT64_MAX && memcmp(buf.data(), want.data(), g) != 0)
            bad = got;
        h = fnv(h, buf.data(), g);
        got += g;
    }
    w.join();
    l.flag("bytes == sent", got == total);
    l.flag("hash matches", h == hash);
    l.flag("intact", bad == UINT64_MAX);
    l.check(got == total && h == hash && bad == UINT64_MAX, "readv/writev stream intact");
}

// MSG_PEEK then recv of the same amount: both see the same bytes.
SCENARIO_X("integ.peek_then_read", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, kMiB);
    uint64_t hash = 0;
    Thread w([&] {
        hash = write_stream(c, 570, total, 1, 8192, 571);
        shutdown(c, SHUT_WR);
    });
    Rng rng(572);
    std::vector<char> peek(16384);
    std::vector<char> in(16384);
    uint64_t got = 0;
    uint64_t h = kFnvInit;
    int mismatches = 0;
    for (;;) {
        const ssize_t n = recv(s, peek.data(), rng.range(1, peek.size()), MSG_PEEK);
        if (n <= 0)
            break;
        const ssize_t m = recv(s, in.data(), static_cast<size_t>(n), MSG_WAITALL);
        if (m != n || memcmp(peek.data(), in.data(), static_cast<size_t>(n)) != 0)
            mismatches++;
        if (m <= 0)
            break;
        h = fnv(h, in.data(), static_cast<size_t>(m));
        got += static_cast<uint64_t>(m);
    }
    w.join();
    l.flag("bytes == sent", got == total);
    l.flag("hash matches", h == hash);
    l.val("peek/read mismatches", mismatches);
    l.check(got == total && h == hash && mismatches == 0, "peek stream intact");
}

// A mix of send calls and flags on one side, of receive calls on the other.
SCENARIO_X("integ.mixed_calls", 0, 120)
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t total = scaled(ctx, 4 * kMiB);
    uint64_t hash = kFnvInit;
    Thread w([&] {
        Rng rng(581);
        std::vector<char> buf(65536);
        size_t off = 0;
        while (off < total) {
            const size_t n = std::min(total - off, rng.range(1, buf.size()));
            pattern_fill(580, off, buf.data(), n);
            hash = fnv(hash, buf.data(), n);
            ssize_t done = 0;
            switch (rng.next() % 4) {
            case 0:
                done = write(c, buf.data(), n);
                break;
            case 1:
                done = send(c, buf.data(), n, MSG_MORE | MSG_NOSIGNAL);
                break;
            case 2: {
                iovec iv{buf.data(), n};
                msghdr m{};
                m.msg_iov = &iv;
                m.msg_iovlen = 1;
                done = sendmsg(c, &m, MSG_NOSIGNAL);
                break;
            }
            default:
                done = send(c, buf.data(), n, MSG_NOSIGNAL);
                break;
            }
            if (done < 0)
                return;
            if (static_cast<size_t>(done) < n &&
                !send_all(c, buf.data() + done, n - static_cast<size_t>(done)))
                return;
            off += n;
        }
        shutdown(c, SHUT_WR);
    });
    Rng rng(582);
    std::vector<char> buf(65536);
    std::vector<char> want(65536);
    uint64_t got = 0;
    uint64_t h = kFnvInit;
    uint64_t bad = UINT64_MAX;
    for (;;) {
        const size_t n = rng.range(1, buf.size());
        ssize_t r = 0;
        switch (rng.next() % 4) {
        case 0:
            r = read(s, buf.data(), n);
            break;
        case 1:
            r = recv(s, buf.data(), n, MSG_WAITALL);
            break;
        case 2: {
            iovec iv{buf.data(), n};
            msghdr m{};
            m.msg_iov = &iv;
            m.msg_iovlen = 1;
            r = recvmsg(s, &m, 0);
            break;
        }
        default: {
            iovec iv[2] = {{buf.data(), n / 2}, {buf.data() + n / 2, n - n / 2}};
            r = readv(s, iv, 2);
            break;
        }
        }
        if (r <= 0)
            break;
        const auto g = static_cast<size_t>(r);
        pattern_fill(580, got, want.data(), g);
        if (bad == UINT64_MAX && memcmp(buf.data(), want.data(), g) != 0)
            bad = got;
        h = fnv(h, buf.data(), g);
        got += g;
    }
    w.join();
    l.flag("bytes == sent", got == total);
    l.flag("hash matches", h == hash);
    l.flag("intact", bad == UINT64_MAX);
    l.check(got == total && h == hash && bad == UINT64_MAX, "mixed stream intact");
}

} // namespace sdp::conformance
