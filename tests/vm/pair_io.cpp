// SPDX-License-Identifier: GPL-2.0
//
// sdp_pair_io: the traffic of the two-guest tier (tests/vm/tier-pair.sh),
// the same code over TCP and SDP.
//
//   sdp_pair_io serve   --family inet|sdp --addr A --port P [--count N] [--zcopy-thresh N]
//   sdp_pair_io connect --family inet|sdp --addr A --port P --plan PLAN [--seed S]
//                       [--t0-file F] [--timeout S] [--zcopy-thresh N] [--keepalive I,C]
//                       [--user-timeout MS] [--policy sdp|fallback|tcp]
//
// PLAN is a comma-separated list of connections, each MODE[:BYTES]; the
// client opens them all at once, each in its own thread, and tells the
// server the mode in a header:
//   duplex:N  both directions N bytes at once, random write and read sizes
//             (1 B to 1 MiB) and pauses; every byte checked against a
//             pattern of its stream offset (a lost, duplicated or reordered
//             byte fails), then a half-close each way and EOF at exactly N
//   send      the client sends until the connection fails (the server reads)
//   recv      the server sends until the connection fails (the client reads)
//   stall     the client sends, the server never reads: the client blocks
//   silent    neither sends: the client blocks in recv
//   idle      neither sends: the client waits in epoll
//   lazy      the server sends until the connection fails; the client reads
//             only once t0 has come (the server's data wait in between)
//   connect   connects again and again until one fails
//   abort     connects and resets at once (SO_LINGER 0), before the header:
//             the server prints `served: no header: ERRNO|EOF`
//   hold:N    the client sends the header, keeps the connection N seconds
//             without traffic, then closes it; the server waits for EOF
// Each connection prints one line: `conn I MODE: RESULT after T s (sent S,
// received R)`, where RESULT is ok, EOF or an errno name and T counts from
// --t0-file's appearance (the fault), or from the start without one; with
// an epoll watcher's first EPOLLERR/EPOLLHUP on that socket (`epoll ERR|HUP
// after T s`).  With --policy (SDP_TRANSPORT_POLICY), each connect that
// succeeds prints `transport tcp|sdp reason N after T s` (T from its
// connect() call; N is SDP_FALLBACK_REASON).  Exit status 0 when every duplex connection verified
// and nothing else failed before t0, 1 otherwise, 2 for usage.
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "uapi/sdp.h"

namespace {

constexpr uint32_t kMagic = 0x53445050; // "SDPP"
constexpr size_t kKiB = 1024;
constexpr size_t kMaxChunk = 1 << 20;

enum class Mode : uint32_t {
    kDuplex = 1,
    kSend,
    kRecv,
    kStall,
    kSilent,
    kIdle,
    kConnect,
    kLazy,
    kAbort,
    kHold,
};

struct Header {
    uint32_t magic;
    uint32_t mode;
    uint64_t bytes;
    uint64_t seed;
};

struct Options {
    bool serve = false;
    bool sdp = false;
    std::string addr;
    int port = 0;
    int count = 0;
    long zcopy_thresh = -1;
    std::string plan;
    uint64_t seed = 1;
    std::string t0_file;
    int timeout_s = 600;
    int ka_idle = 0;
    int ka_count = 0;
    int user_timeout_ms = 0;
    int policy = -1; // SDP_TRANSPORT_POLICY, -1: the default
};
Options opt;

std::atomic<bool> failed{false};
std::mutex out_mu;
void say(const std::string& s)
{
    const std::lock_guard<std::mutex> lock(out_mu);
    std::fputs((s + "\n").c_str(), stdout);
    std::fflush(stdout);
}

[[noreturn]] void usage(const char* why)
{
    std::fprintf(stderr, "sdp_pair_io: %s (see the comment at the top of tests/vm/pair_io.cpp)\n",
                 why);
    std::exit(2);
}

using Clock = std::chrono::steady_clock;
const Clock::time_point kStartTime = Clock::now();
std::atomic<int64_t> t0_ns{-1}; // steady-clock ns of the fault, once seen

double since_t0(Clock::time_point t)
{
    const int64_t t0 = t0_ns.load();
    const auto base = t0 >= 0 ? kStartTime + std::chrono::nanoseconds(t0) : kStartTime;
    return std::chrono::duration<double>(t - base).count();
}

bool before_t0()
{
    return t0_ns.load() < 0;
}

std::string errname(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case ECONNRESET:
        return "ECONNRESET";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EPIPE:
        return "EPIPE";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case ECONNABORTED:
        return "ECONNABORTED";
    case EHOSTUNREACH:
        return "EHOSTUNREACH";
    case ENETUNREACH:
        return "ENETUNREACH";
    case ENOTCONN:
        return "ENOTCONN";
    case ENETDOWN:
        return "ENETDOWN";
    case ENODEV:
        return "ENODEV";
    case EIO:
        return "EIO";
    case ENOBUFS:
        return "ENOBUFS";
    case EADDRNOTAVAIL:
        return "EADDRNOTAVAIL";
    default:
        return "errno" + std::to_string(err);
    }
}

int sdp_family()
{
    std::ifstream in("/sys/module/sdp/parameters/family");
    int n = 0;
    if (in >> n && n > 0)
        return n;
    return 27;
}

sockaddr_storage endpoint(socklen_t* len)
{
    sockaddr_storage ss{};
    if (opt.addr.find(':') != std::string::npos) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(static_cast<uint16_t>(opt.port));
        if (inet_pton(AF_INET6, opt.addr.c_str(), &a->sin6_addr) != 1)
            usage("bad --addr");
        *len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(static_cast<uint16_t>(opt.port));
        if (inet_pton(AF_INET, opt.addr.c_str(), &a->sin_addr) != 1)
            usage("bad --addr");
        *len = sizeof *a;
    }
    return ss;
}

int new_socket(const sockaddr_storage& ss)
{
    const int domain = opt.sdp ? sdp_family() : ss.ss_family;
    const int fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (opt.sdp && opt.zcopy_thresh >= 0) {
        const int v = static_cast<int>(opt.zcopy_thresh);
        if (setsockopt(fd, SOL_SDP, SDP_ZCOPY_THRESH, &v, sizeof v) != 0) {
            close(fd);
            return -1;
        }
    }
    if (opt.sdp && opt.policy >= 0 &&
        setsockopt(fd, SOL_SDP, SDP_TRANSPORT_POLICY, &opt.policy, sizeof opt.policy) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void keepalive(int fd)
{
    if (opt.ka_idle <= 0)
        return;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &opt.ka_idle, sizeof opt.ka_idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &opt.ka_idle, sizeof opt.ka_idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &opt.ka_count, sizeof opt.ka_count);
}

// TCP_USER_TIMEOUT (TCP only): a vanished peer costs TCP minutes of
// retransmissions otherwise; the fault tests want its errno, not its patience.
void user_timeout(int fd)
{
    if (opt.user_timeout_ms > 0 && !opt.sdp)
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &opt.user_timeout_ms,
                   sizeof opt.user_timeout_ms);
}

// --- the byte pattern and random sizes ----------------------------------------

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint8_t pattern_at(uint64_t seed, uint64_t off)
{
    return static_cast<uint8_t>(mix(seed ^ (off >> 3)) >> ((off & 7) * 8));
}

void pattern_fill(uint64_t seed, uint64_t off, uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n;) {
        const uint64_t o = off + i;
        if ((o & 7) == 0 && n - i >= 8) {
            const uint64_t w = mix(seed ^ (o >> 3));
            std::memcpy(p + i, &w, 8);
            i += 8;
        } else {
            p[i] = pattern_at(seed, o);
            i++;
        }
    }
}

// First offset in [off, off+n) whose byte is wrong, or UINT64_MAX.
uint64_t pattern_check(uint64_t seed, uint64_t off, const uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n;) {
        const uint64_t o = off + i;
        if ((o & 7) == 0 && n - i >= 8) {
            const uint64_t w = mix(seed ^ (o >> 3));
            if (std::memcmp(p + i, &w, 8) != 0) {
                for (size_t j = 0; j < 8; j++)
                    if (p[i + j] != pattern_at(seed, o + j))
                        return o + j;
            }
            i += 8;
        } else {
            if (p[i] != pattern_at(seed, o))
                return o;
            i++;
        }
    }
    return UINT64_MAX;
}

struct Rng {
    uint64_t s;
    uint64_t next() { return s = mix(s); }
    size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

// Write sizes: mostly small, some around the zero-copy thresholds, some large.
size_t chunk_size(Rng& r)
{
    const size_t k = r.below(100);
    if (k < 45)
        return 1 + r.below(4096);
    if (k < 80)
        return 4096 + r.below(64 * kKiB);
    return 64 * kKiB + r.below(kMaxChunk - 64 * kKiB + 1);
}

void maybe_pause(Rng& r)
{
    if (r.below(200) == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(r.below(20000)));
}

// --- data movers ---------------------------------------------------------------

struct Outcome {
    int err = 0;      // 0: ok
    bool eof = false; // the peer's FIN where none was expected
    uint64_t bytes = 0;
    uint64_t bad_at = UINT64_MAX;
    Clock::time_point when{};
};

// Sends `bytes` of the pattern (UINT64_MAX: until an error).
Outcome send_pattern(int fd, uint64_t seed, uint64_t bytes, uint64_t rng_seed)
{
    Outcome o;
    Rng r{rng_seed};
    std::vector<uint8_t> buf(kMaxChunk);
    while (o.bytes < bytes) {
        size_t n = chunk_size(r);
        if (n > bytes - o.bytes)
            n = static_cast<size_t>(bytes - o.bytes);
        pattern_fill(seed, o.bytes, buf.data(), n);
        size_t done = 0;
        while (done < n) {
            const ssize_t w = send(fd, buf.data() + done, n - done, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                o.err = errno;
                o.when = Clock::now();
                return o;
            }
            done += static_cast<size_t>(w);
            o.bytes += static_cast<uint64_t>(w);
        }
        maybe_pause(r);
    }
    o.when = Clock::now();
    return o;
}

// Receives and checks up to `bytes` (UINT64_MAX: until EOF or an error); with
// a finite count, EOF must come right after it.
Outcome recv_pattern(int fd, uint64_t seed, uint64_t bytes, uint64_t rng_seed)
{
    Outcome o;
    Rng r{rng_seed};
    std::vector<uint8_t> buf(kMaxChunk);
    for (;;) {
        const size_t want = 1 + r.below(r.below(4) == 0 ? kMaxChunk : 16384);
        const ssize_t n = recv(fd, buf.data(), want, r.below(8) == 0 ? MSG_WAITALL : 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            o.err = errno;
            break;
        }
        if (n == 0) {
            o.eof = bytes == UINT64_MAX || o.bytes != bytes;
            break;
        }
        const uint64_t bad = pattern_check(seed, o.bytes, buf.data(), static_cast<size_t>(n));
        if (bad != UINT64_MAX && o.bad_at == UINT64_MAX)
            o.bad_at = bad;
        o.bytes += static_cast<uint64_t>(n);
        if (o.bytes > bytes && o.bad_at == UINT64_MAX)
            o.bad_at = bytes; // more than was sent
        maybe_pause(r);
    }
    o.when = Clock::now();
    return o;
}

Outcome wait_error(int fd)
{
    Outcome o;
    char c = 0;
    for (;;) {
        const ssize_t n = recv(fd, &c, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            o.err = errno;
        else if (n == 0)
            o.eof = true;
        else
            o.bytes++;
        if (n <= 0)
            break;
    }
    o.when = Clock::now();
    return o;
}

// Waits in epoll until the socket reports an error or a hang-up (EPOLLERR,
// EPOLLHUP, or EPOLLRDHUP: the peer's FIN); `epoll_events` says which.
// With `consume`, it also takes the socket's error (SO_ERROR clears it);
// a watcher beside a blocked call must not, or the call would miss it.
Outcome wait_epoll(int fd, uint32_t* epoll_events, bool consume)
{
    Outcome o;
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLRDHUP;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    for (;;) {
        epoll_event got{};
        const int n = epoll_wait(ep, &got, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 1) {
            *epoll_events = got.events;
            int err = 0;
            socklen_t len = sizeof err;
            if (consume)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            o.err = err;
            o.eof = err == 0 && consume;
            break;
        }
    }
    close(ep);
    o.when = Clock::now();
    return o;
}

std::string epoll_text(uint32_t e)
{
    std::string s;
    if ((e & EPOLLERR) != 0u)
        s += "ERR|";
    if ((e & EPOLLHUP) != 0u)
        s += "HUP|";
    if ((e & EPOLLRDHUP) != 0u)
        s += "RDHUP|";
    if (s.empty())
        return "none";
    s.pop_back();
    return s;
}

std::string outcome_text(const Outcome& o)
{
    std::string s = o.err != 0 ? errname(o.err) : o.eof ? "EOF" : "ok";
    if (o.bad_at != UINT64_MAX)
        s += " CORRUPT at offset " + std::to_string(o.bad_at);
    return s;
}

bool send_all(int fd, const void* p, size_t n)
{
    const auto* c = static_cast<const uint8_t*>(p);
    while (n > 0) {
        const ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

bool recv_all(int fd, void* p, size_t n)
{
    auto* c = static_cast<uint8_t*>(p);
    while (n > 0) {
        const ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

// --- server --------------------------------------------------------------------

void serve_one(int fd)
{
    Header h{};
    errno = 0;
    if (!recv_all(fd, &h, sizeof h)) {
        say(std::string("served: no header: ") + (errno != 0 ? errname(errno) : "EOF"));
        close(fd);
        return;
    }
    if (h.magic != kMagic) {
        close(fd);
        return;
    }
    switch (static_cast<Mode>(h.mode)) {
    case Mode::kDuplex: {
        Outcome tx;
        std::thread t([&] {
            tx = send_pattern(fd, h.seed + 1, h.bytes, h.seed * 7 + 2);
            if (tx.err == 0)
                shutdown(fd, SHUT_WR);
        });
        const Outcome rx = recv_pattern(fd, h.seed, h.bytes, h.seed * 7 + 3);
        t.join();
        if (tx.err != 0 || rx.err != 0 || rx.eof || rx.bad_at != UINT64_MAX || rx.bytes != h.bytes)
            failed = true;
        say("served duplex: sent " + std::to_string(tx.bytes) + " " + outcome_text(tx) +
            ", received " + std::to_string(rx.bytes) + " " + outcome_text(rx));
        break;
    }
    case Mode::kSend: // the client sends: read and check until the end
        recv_pattern(fd, h.seed, UINT64_MAX, h.seed * 7 + 3);
        break;
    case Mode::kRecv:
    case Mode::kLazy:
        send_pattern(fd, h.seed + 1, UINT64_MAX, h.seed * 7 + 2);
        break;
    case Mode::kStall:
    case Mode::kSilent:
    case Mode::kIdle:
    case Mode::kConnect:
        wait_error(fd);
        break;
    case Mode::kAbort: // never sent in a header
        break;
    case Mode::kHold: {
        const Outcome o = wait_error(fd);
        say("served hold: " + outcome_text(o));
        break;
    }
    }
    close(fd);
}

int serve()
{
    socklen_t len = 0;
    sockaddr_storage ss = endpoint(&len);
    const int lfd = new_socket(ss);
    if (lfd < 0) {
        std::perror("sdp_pair_io: socket");
        return 1;
    }
    const int on = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(lfd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(lfd, 64) != 0) {
        std::perror("sdp_pair_io: bind/listen");
        return 1;
    }
    say("listening");
    std::vector<std::thread> threads;
    for (int i = 0; opt.count == 0 || i < opt.count; i++) {
        const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                i--;
                continue;
            }
            std::perror("sdp_pair_io: accept");
            return 1;
        }
        keepalive(fd);
        user_timeout(fd);
        threads.emplace_back(serve_one, fd);
    }
    for (auto& t : threads)
        t.join();
    close(lfd);
    return failed ? 1 : 0;
}

// --- client --------------------------------------------------------------------

struct Conn {
    Mode mode = Mode::kDuplex;
    std::string name;
    uint64_t bytes = 0;
};

std::vector<Conn> parse_plan(const std::string& plan)
{
    std::vector<Conn> out;
    size_t pos = 0;
    while (pos <= plan.size()) {
        const size_t comma = plan.find(',', pos);
        const std::string item =
            plan.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        Conn c;
        const size_t colon = item.find(':');
        c.name = item.substr(0, colon);
        if (colon != std::string::npos) {
            char* end = nullptr;
            c.bytes = std::strtoull(item.c_str() + colon + 1, &end, 0);
            if (*end == 'M')
                c.bytes <<= 20;
            else if (*end == 'G')
                c.bytes <<= 30;
            else if (*end == 'K')
                c.bytes <<= 10;
        }
        if (c.name == "duplex")
            c.mode = Mode::kDuplex;
        else if (c.name == "send")
            c.mode = Mode::kSend;
        else if (c.name == "recv")
            c.mode = Mode::kRecv;
        else if (c.name == "stall")
            c.mode = Mode::kStall;
        else if (c.name == "silent")
            c.mode = Mode::kSilent;
        else if (c.name == "idle")
            c.mode = Mode::kIdle;
        else if (c.name == "connect")
            c.mode = Mode::kConnect;
        else if (c.name == "lazy")
            c.mode = Mode::kLazy;
        else if (c.name == "abort")
            c.mode = Mode::kAbort;
        else if (c.name == "hold")
            c.mode = Mode::kHold;
        else
            usage(("bad plan item '" + item + "'").c_str());
        out.push_back(c);
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return out;
}

int connect_one(Outcome* fail)
{
    socklen_t len = 0;
    const sockaddr_storage ss = endpoint(&len);
    const int fd = new_socket(ss);
    if (fd < 0) {
        fail->err = errno;
        return -1;
    }
    keepalive(fd);
    user_timeout(fd);
    const auto start = Clock::now();
    if (connect(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        fail->err = errno;
        close(fd);
        return -1;
    }
    if (opt.sdp && opt.policy >= 0) {
        int transport = -1, reason = -1;
        socklen_t n = sizeof transport;
        getsockopt(fd, SOL_SDP, SDP_TRANSPORT, &transport, &n);
        n = sizeof reason;
        getsockopt(fd, SOL_SDP, SDP_FALLBACK_REASON, &reason, &n);
        const double secs = std::chrono::duration<double>(Clock::now() - start).count();
        say(std::string("transport ") +
            (transport == SDP_TRANSPORT_TCP   ? "tcp"
             : transport == SDP_TRANSPORT_SDP ? "sdp"
                                              : "none") +
            " reason " + std::to_string(reason) + " after " + std::to_string(secs) + " s");
    }
    return fd;
}

void run_conn(size_t index, const Conn& c)
{
    const std::string tag = "conn " + std::to_string(index) + " " + c.name;
    const uint64_t seed = mix(opt.seed + index);
    Outcome o;
    Outcome ep; // epoll watcher's view
    uint32_t ep_events = 0;
    if (c.mode == Mode::kConnect) {
        // Connect, say hello, close, again: until one attempt fails.
        uint64_t n = 0;
        for (;;) {
            const int fd = connect_one(&o);
            if (fd < 0)
                break;
            const Header h{kMagic, static_cast<uint32_t>(Mode::kConnect), 0, seed};
            const bool ok = send_all(fd, &h, sizeof h);
            close(fd);
            if (!ok) {
                o.err = errno;
                break;
            }
            n++;
        }
        o.when = Clock::now();
        o.bytes = n;
        if (before_t0() && !opt.t0_file.empty())
            failed = true;
        say(tag + ": " + outcome_text(o) + " after " + std::to_string(since_t0(o.when)) + " s (" +
            std::to_string(n) + " connections before)");
        return;
    }
    const int fd = connect_one(&o);
    if (fd < 0) {
        failed = true;
        say(tag + ": connect failed: " + errname(o.err));
        return;
    }
    if (c.mode == Mode::kAbort) {
        const linger reset{1, 0};
        if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset) != 0) {
            o.err = errno;
            failed = true;
        }
        close(fd);
        o.when = Clock::now();
        say(tag + ": " + outcome_text(o) + " after " + std::to_string(since_t0(o.when)) + " s");
        return;
    }
    const Header h{kMagic, static_cast<uint32_t>(c.mode), c.bytes, seed};
    if (!send_all(fd, &h, sizeof h)) {
        failed = true;
        say(tag + ": header: " + errname(errno));
        close(fd);
        return;
    }
    if (c.mode == Mode::kHold) {
        std::this_thread::sleep_for(std::chrono::seconds(c.bytes));
        close(fd);
        o.when = Clock::now();
        say(tag + ": " + outcome_text(o) + " after " + std::to_string(since_t0(o.when)) + " s");
        return;
    }
    std::thread watcher([&] { ep = wait_epoll(fd, &ep_events, c.mode == Mode::kIdle); });
    Outcome rx;
    switch (c.mode) {
    case Mode::kDuplex: {
        std::thread t([&] { rx = recv_pattern(fd, seed + 1, c.bytes, seed * 7 + 5); });
        o = send_pattern(fd, seed, c.bytes, seed * 7 + 4);
        if (o.err == 0)
            shutdown(fd, SHUT_WR);
        t.join();
        if (o.err != 0 || rx.err != 0 || rx.eof || rx.bad_at != UINT64_MAX || rx.bytes != c.bytes)
            failed = true;
        break;
    }
    case Mode::kSend:
    case Mode::kStall:
        o = send_pattern(fd, seed, UINT64_MAX, seed * 7 + 4);
        break;
    case Mode::kRecv:
        rx = recv_pattern(fd, seed + 1, UINT64_MAX, seed * 7 + 5);
        o = rx;
        break;
    case Mode::kLazy:
        while (before_t0())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        rx = recv_pattern(fd, seed + 1, UINT64_MAX, seed * 7 + 5);
        o = rx;
        break;
    case Mode::kSilent:
        o = wait_error(fd);
        break;
    case Mode::kIdle:
        watcher.join(); // the watcher is the test
        o = ep;
        break;
    case Mode::kConnect:
    case Mode::kAbort:
    case Mode::kHold: // all returned above
        break;
    }
    // The socket is dead or done: the watcher must have seen it; give it a
    // moment (an ok duplex connection only sees the peer's FIN).
    for (int i = 0; i < 50 && ep.when == Clock::time_point{}; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const bool watcher_done = ep.when != Clock::time_point{};
    if (!watcher_done)
        shutdown(fd, SHUT_RDWR); // wakes the watcher
    if (watcher.joinable())
        watcher.join();
    if (c.mode != Mode::kDuplex && before_t0() && !opt.t0_file.empty())
        failed = true; // ended before the fault
    if (c.mode != Mode::kDuplex && rx.bad_at != UINT64_MAX)
        failed = true;
    std::string line =
        tag + ": " + outcome_text(o) + " after " + std::to_string(since_t0(o.when)) + " s (sent " +
        std::to_string(c.mode == Mode::kRecv || c.mode == Mode::kLazy ? 0 : o.bytes) +
        ", received " + std::to_string(rx.bytes);
    if (rx.err != 0 || rx.eof || rx.bad_at != UINT64_MAX)
        line += " " + outcome_text(rx);
    line += "); epoll ";
    line += watcher_done
                ? epoll_text(ep_events) + " after " + std::to_string(since_t0(ep.when)) + " s"
                : "nothing";
    say(line);
    close(fd);
}

int connect_plan()
{
    const std::vector<Conn> conns = parse_plan(opt.plan);
    std::atomic<bool> done{false};
    std::thread t0_watch([&] {
        if (opt.t0_file.empty())
            return;
        struct stat st {};
        while (!done && stat(opt.t0_file.c_str(), &st) != 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!done)
            t0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - kStartTime)
                        .count();
    });
    std::vector<std::thread> threads;
    threads.reserve(conns.size());
    for (size_t i = 0; i < conns.size(); i++)
        threads.emplace_back(run_conn, i, conns[i]);
    for (auto& t : threads)
        t.join();
    done = true;
    t0_watch.join();
    const double secs = std::chrono::duration<double>(Clock::now() - kStartTime).count();
    say(std::string(failed ? "FAILED" : "PASSED") + " after " + std::to_string(secs) + " s");
    return failed ? 1 : 0;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 2)
        usage("serve or connect?");
    const std::string verb = argv[1];
    if (verb == "serve")
        opt.serve = true;
    else if (verb != "connect")
        usage("serve or connect?");
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc)
                usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "--family") {
            const std::string f = val();
            if (f != "inet" && f != "sdp")
                usage("--family inet|sdp");
            opt.sdp = f == "sdp";
        } else if (a == "--addr") {
            opt.addr = val();
        } else if (a == "--port") {
            opt.port = std::atoi(val().c_str());
        } else if (a == "--count") {
            opt.count = std::atoi(val().c_str());
        } else if (a == "--zcopy-thresh") {
            opt.zcopy_thresh = std::atol(val().c_str());
        } else if (a == "--plan") {
            opt.plan = val();
        } else if (a == "--seed") {
            opt.seed = std::strtoull(val().c_str(), nullptr, 0);
        } else if (a == "--t0-file") {
            opt.t0_file = val();
        } else if (a == "--timeout") {
            opt.timeout_s = std::atoi(val().c_str());
        } else if (a == "--user-timeout") {
            opt.user_timeout_ms = std::atoi(val().c_str());
        } else if (a == "--policy") {
            const std::string p = val();
            if (p == "sdp")
                opt.policy = SDP_POLICY_SDP;
            else if (p == "fallback")
                opt.policy = SDP_POLICY_FALLBACK;
            else if (p == "tcp")
                opt.policy = SDP_POLICY_TCP;
            else
                usage("--policy sdp|fallback|tcp");
        } else if (a == "--keepalive") {
            if (std::sscanf(val().c_str(), "%d,%d", &opt.ka_idle, &opt.ka_count) != 2)
                usage("--keepalive IDLE,COUNT");
        } else {
            usage(("unknown option " + a).c_str());
        }
    }
    if (opt.addr.empty() || opt.port <= 0)
        usage("--addr and --port are required");
    // The watchdog: a hung run fails instead of stalling the tier.
    std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(opt.timeout_s));
        say("TIMEOUT after " + std::to_string(opt.timeout_s) + " s");
        std::_Exit(1);
    }).detach();
    if (opt.serve)
        return serve();
    if (opt.plan.empty())
        usage("--plan is required");
    return connect_plan();
}
