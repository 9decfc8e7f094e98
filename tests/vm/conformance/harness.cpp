// SPDX-License-Identifier: GPL-2.0
//
// Scenario harness: trace lanes, per-family sockets and addresses, bounded
// waits and data helpers.
#include "conformance.h"
#include "uapi/sdp.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace sdp::conformance {

Config& config()
{
    static Config cfg;
    return cfg;
}

// --- text ---------------------------------------------------------------------

std::string errname(int err)
{
    if (err == 0)
        return "0";
    const char* name = strerrorname_np(err);
    if (name != nullptr)
        return name;
    return "errno" + std::to_string(err);
}

std::string res_text(Res r)
{
    if (r.rc >= 0)
        return std::to_string(r.rc);
    return std::to_string(r.rc) + " " + errname(r.err);
}

namespace {

template <class T> std::string mask_text(T bits, const std::pair<T, const char*>* names, size_t n)
{
    if (bits == 0)
        return "0";
    std::string out;
    for (size_t i = 0; i < n; i++) {
        if ((bits & names[i].first) != 0) {
            if (!out.empty())
                out += '|';
            out += names[i].second;
            bits = static_cast<T>(bits & ~names[i].first);
        }
    }
    if (bits != 0) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%s0x%x", out.empty() ? "" : "|", static_cast<unsigned>(bits));
        out += buf;
    }
    return out;
}

} // namespace

std::string poll_text(int revents)
{
    static const std::pair<int, const char*> kNames[] = {
        {POLLIN, "IN"},         {POLLPRI, "PRI"},       {POLLOUT, "OUT"},
        {POLLRDHUP, "RDHUP"},   {POLLERR, "ERR"},       {POLLHUP, "HUP"},
        {POLLNVAL, "NVAL"},     {POLLRDNORM, "RDNORM"}, {POLLRDBAND, "RDBAND"},
        {POLLWRNORM, "WRNORM"}, {POLLWRBAND, "WRBAND"}, {POLLMSG, "MSG"}};
    return mask_text(revents, kNames, std::size(kNames));
}

std::string epoll_text(uint32_t events)
{
    static const std::pair<uint32_t, const char*> kNames[] = {
        {EPOLLIN, "IN"},          {EPOLLPRI, "PRI"},       {EPOLLOUT, "OUT"},
        {EPOLLRDHUP, "RDHUP"},    {EPOLLERR, "ERR"},       {EPOLLHUP, "HUP"},
        {EPOLLRDNORM, "RDNORM"},  {EPOLLRDBAND, "RDBAND"}, {EPOLLWRNORM, "WRNORM"},
        {EPOLLWRBAND, "WRBAND"},  {EPOLLMSG, "MSG"},       {EPOLLET, "ET"},
        {EPOLLONESHOT, "ONESHOT"}};
    return mask_text(events, kNames, std::size(kNames));
}

std::string hex_text(const void* data, size_t len)
{
    static const char kDigits[] = "0123456789abcdef";
    const auto* p = static_cast<const uint8_t*>(data);
    std::string out;
    for (size_t i = 0; i < len; i++) {
        out += kDigits[p[i] >> 4];
        out += kDigits[p[i] & 0xf];
    }
    return out;
}

// --- trace ----------------------------------------------------------------

namespace {

std::mutex g_trace_mu;
std::atomic<bool> g_check_failed{false};

void write_record(int fd, const std::string& lane, std::string_view text)
{
    // One write() per record, under PIPE_BUF, so records stay whole even
    // when a forked helper process writes to the same pipe.
    std::string rec = lane;
    rec += '\x1f';
    std::string_view t = text.substr(0, 3000);
    for (const char c : t)
        rec += (c == '\n' || c == '\x1f') ? ' ' : c;
    rec += '\n';
    const std::lock_guard<std::mutex> lock(g_trace_mu);
    size_t off = 0;
    while (off < rec.size()) {
        const ssize_t n = write(fd, rec.data() + off, rec.size() - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        off += static_cast<size_t>(n);
    }
}

} // namespace

bool check_failed()
{
    return g_check_failed.load();
}

void note_check_failed()
{
    g_check_failed = true;
}

void Lane::log(std::string_view text)
{
    write_record(fd_, name_, text);
}

Res Lane::rec(std::string_view what, Res r)
{
    std::string line(what);
    line += " = ";
    line += res_text(r);
    log(line);
    return r;
}

void Lane::val(std::string_view what, long long v)
{
    std::string line(what);
    line += " = ";
    line += std::to_string(v);
    log(line);
}

void Lane::opt(std::string_view what, int v)
{
    if (v >= 0)
        val(what, v);
    else
        txt(what, "-1 " + errname(-v));
}

Res Lane::rec_fd(std::string_view what, Res r)
{
    if (r.ok())
        txt(what, "fd");
    else
        rec(what, r);
    return r;
}

void Lane::txt(std::string_view what, std::string_view v)
{
    std::string line(what);
    line += " = ";
    line += v;
    log(line);
}

void Lane::check(bool ok, std::string_view what)
{
    std::string line(ok ? "check ok: " : "CHECK FAILED: ");
    line += what;
    log(line);
    if (!ok)
        g_check_failed = true;
}

void Lane::abort(std::string_view what)
{
    std::string line("ABORT: ");
    line += what;
    log(line);
    _exit(kExitAborted);
}

void Lane::abort(std::string_view what, Res r)
{
    std::string line(what);
    line += " = ";
    line += res_text(r);
    abort(line);
}

// --- context -----------------------------------------------------------------

Ctx::~Ctx() = default;

Lane& Ctx::lane(const std::string& name)
{
    const std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : lanes_) {
        if (l->name() == name)
            return *l;
    }
    lanes_.push_back(std::make_unique<Lane>(name, trace_fd_));
    return *lanes_.back();
}

int Ctx::domain(Ip ip) const
{
    if (family_ == Family::kSdp)
        return config().sdp_family;
    return ip == Ip::kV4 ? AF_INET : AF_INET6;
}

int Ctx::protocol(bool listener) const
{
    switch (family_) {
    case Family::kIpproto:
        return config().sdp_ipproto;
    case Family::kSdpToTcp:
        return listener ? 0 : config().sdp_ipproto;
    case Family::kTcpToSdp:
        return listener ? config().sdp_ipproto : 0;
    default:
        return 0;
    }
}

int Ctx::socket(Lane& l, Ip ip, int type_flags, bool listener)
{
    const int proto = protocol(listener);
    const Res r = CALL(::socket(domain(ip), SOCK_STREAM | type_flags, proto));
    if (!r.ok())
        l.abort("socket", r);
    if (zerocopy_mode()) {
        // Not traced: the same call on every family.
        const int err = zerocopy_enable(static_cast<int>(r.rc));
        if (err != 0)
            l.abort("SO_ZEROCOPY", Res{-1, -err});
    }
    const bool mixed = family_ == Family::kSdpToTcp || family_ == Family::kTcpToSdp;
    if (mixed && proto != 0) {
        // Not traced: the reference (TCP) has no such call.
        const int policy = SDP_POLICY_FALLBACK;
        if (setsockopt(static_cast<int>(r.rc), SOL_SDP, SDP_TRANSPORT_POLICY, &policy,
                       sizeof(policy)) != 0)
            l.abort("SDP_TRANSPORT_POLICY", Res{-1, errno});
    }
    return static_cast<int>(r.rc);
}

uint16_t Ctx::port(int i) const
{
    return static_cast<uint16_t>(config().port_base + index_ * 2 * kPortsPerRun +
                                 run_pos_ * kPortsPerRun + i);
}

Addr Ctx::addr(Ip ip, Host host, int port_idx) const
{
    return addr_port(ip, host, port_idx < 0 ? 0 : port(port_idx));
}

Addr Ctx::addr_port(Ip ip, Host host, uint16_t port_no) const
{
    const Config& c = config();
    Addr a;
    const bool v6 = ip == Ip::kV6 || host == Host::kMappedA || host == Host::kMappedB;
    if (!v6) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&a.ss);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port_no);
        const char* text = "0.0.0.0";
        switch (host) {
        case Host::kA:
            text = c.addr4_a.c_str();
            break;
        case Host::kB:
            text = c.addr4_b.c_str();
            break;
        case Host::kLoopback:
            text = "127.0.0.1";
            break;
        case Host::kNonLocal:
            text = "198.51.100.1";
            break;
        default:
            break;
        }
        inet_pton(AF_INET, text, &sin->sin_addr);
        a.len = sizeof(sockaddr_in);
        return a;
    }
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port_no);
    std::string text = "::";
    switch (host) {
    case Host::kA:
        text = c.addr6_a;
        break;
    case Host::kB:
        text = c.addr6_b;
        break;
    case Host::kMappedA:
        text = "::ffff:" + c.addr4_a;
        break;
    case Host::kMappedB:
        text = "::ffff:" + c.addr4_b;
        break;
    case Host::kLoopback:
        text = "::1";
        break;
    case Host::kNonLocal:
        text = "2001:db8::1";
        break;
    default:
        break;
    }
    inet_pton(AF_INET6, text.c_str(), &sin6->sin6_addr);
    a.len = sizeof(sockaddr_in6);
    return a;
}

std::string Ctx::fmt(const sockaddr* sa, socklen_t len) const
{
    char buf[INET6_ADDRSTRLEN] = "";
    unsigned port_no = 0;
    std::string out;
    if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
        inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
        port_no = ntohs(sin->sin_port);
        out = buf;
    } else if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
        inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
        port_no = ntohs(sin6->sin6_port);
        out = std::string("[") + buf + "]";
        if (sin6->sin6_flowinfo != 0 || sin6->sin6_scope_id != 0)
            out += "(flow/scope set)";
    } else {
        return "family=" + std::to_string(sa->sa_family) + " len=" + std::to_string(len);
    }
    const unsigned first = port(0);
    if (port_no == 0)
        out += ":0";
    else if (port_no >= first && port_no < first + kPortsPerRun)
        out += ":P" + std::to_string(port_no - first);
    else if (port_no == priv_port())
        out += ":PRIV";
    else if (port_no >= 1024 && (port_no < static_cast<unsigned>(config().port_base) ||
                                 port_no >= static_cast<unsigned>(config().port_base) + 8192))
        out += ":eph";
    else
        out += ":port" + std::to_string(port_no);
    return out;
}

std::string Ctx::sockname(int fd) const
{
    Addr a;
    a.len = sizeof(a.ss);
    const Res r = CALL(getsockname(fd, a.sa(), &a.len));
    if (!r.ok())
        return res_text(r);
    return fmt(a.sa(), a.len) + " len=" + std::to_string(a.len);
}

std::string Ctx::peername(int fd) const
{
    Addr a;
    a.len = sizeof(a.ss);
    const Res r = CALL(getpeername(fd, a.sa(), &a.len));
    if (!r.ok())
        return res_text(r);
    return fmt(a.sa(), a.len) + " len=" + std::to_string(a.len);
}

int Ctx::listener(Lane& l, const Addr& a, int backlog, bool reuse, int type_flags)
{
    const Ip ip = a.ss.ss_family == AF_INET ? Ip::kV4 : Ip::kV6;
    const int fd = socket(l, ip, type_flags, true);
    if (reuse) {
        const Res r = set_int_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
        if (!r.ok())
            l.abort("listener SO_REUSEADDR", r);
    }
    Res r = CALL(bind(fd, a.sa(), a.len));
    if (!r.ok())
        l.abort("listener bind " + fmt(a.sa(), a.len), r);
    r = CALL(listen(fd, backlog));
    if (!r.ok())
        l.abort("listener listen", r);
    return fd;
}

int Ctx::accept_one(Lane& l, int listen_fd, int flags, int timeout_ms)
{
    const int ev = wait_poll(listen_fd, POLLIN, timeout_ms);
    if ((ev & POLLIN) == 0)
        l.abort("accept: no pending connection, listener poll = " + poll_text(ev));
    Res r;
    do {
        r = CALL(accept4(listen_fd, nullptr, nullptr, flags));
    } while (r.is(EINTR));
    if (!r.ok())
        l.abort("accept", r);
    if (zerocopy_mode()) {
        // Whether the accepted socket inherits the listener's SO_ZEROCOPY.
        int v = -1;
        socklen_t len = sizeof(v);
        getsockopt(static_cast<int>(r.rc), SOL_SOCKET, SO_ZEROCOPY, &v, &len);
        l.val("accepted SO_ZEROCOPY", v);
    }
    return static_cast<int>(r.rc);
}

Ctx::Pair Ctx::pair(Lane& l, Ip ip, int listen_port_idx)
{
    const Addr a = addr(ip, Host::kA, listen_port_idx);
    const int ls = listener(l, a);
    Pair p = pair_via(l, ls, a);
    close(ls);
    return p;
}

Ctx::Pair Ctx::pair_via(Lane& l, int listen_fd, const Addr& dst)
{
    Pair p;
    p.cli = socket(l, dst.ss.ss_family == AF_INET ? Ip::kV4 : Ip::kV6, SOCK_NONBLOCK);
    const Res r = CALL(connect(p.cli, dst.sa(), dst.len));
    if (!r.ok() && !r.is(EINPROGRESS))
        l.abort("pair: connect " + fmt(dst.sa(), dst.len), r);
    p.srv = accept_one(l, listen_fd);
    const int ev = wait_poll(p.cli, POLLOUT);
    if ((ev & POLLOUT) == 0)
        l.abort("pair: connect did not complete, poll = " + poll_text(ev));
    const int err = int_opt(p.cli, SOL_SOCKET, SO_ERROR);
    if (err != 0)
        l.abort("pair: SO_ERROR = " + (err < 0 ? res_text(Res{-1, -err}) : errname(err)));
    set_nonblock(p.cli, false);
    return p;
}

// --- helpers -------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline)
{
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

} // namespace

void sleep_ms(int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int wait_poll(int fd, int events, int timeout_ms)
{
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        pollfd p{fd, static_cast<short>(events), 0};
        const int n = poll(&p, 1, remaining_ms(deadline));
        if (n > 0)
            return p.revents;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return POLLNVAL;
    }
}

constexpr int kFullMask = POLLIN | POLLPRI | POLLOUT | POLLRDHUP;

int poll_now(int fd)
{
    pollfd p{fd, kFullMask, 0};
    while (poll(&p, 1, 0) < 0) {
        if (errno != EINTR)
            return POLLNVAL;
    }
    return p.revents;
}

int poll_until(int fd, int want, int timeout_ms)
{
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const int cur = poll_now(fd);
        const int left = remaining_ms(deadline);
        if ((cur & want) == want || left == 0)
            return cur;
        pollfd p{fd, static_cast<short>(want & ~cur & kFullMask), 0};
        poll(&p, 1, std::min(left, 20));
    }
}

bool wait_until(const std::function<bool()>& pred, int timeout_ms)
{
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (pred())
            return true;
        if (Clock::now() >= deadline)
            return false;
        sleep_ms(2);
    }
}

int inq(int fd)
{
    int v = 0;
    if (ioctl(fd, SIOCINQ, &v) != 0)
        return -errno;
    return v;
}

int outq(int fd)
{
    int v = 0;
    if (ioctl(fd, SIOCOUTQ, &v) != 0)
        return -errno;
    return v;
}

int int_opt(int fd, int level, int name)
{
    int v = 0;
    socklen_t len = sizeof(v);
    if (getsockopt(fd, level, name, &v, &len) != 0)
        return -errno;
    return v;
}

Res set_int_opt(int fd, int level, int name, int value)
{
    return CALL(setsockopt(fd, level, name, &value, sizeof(value)));
}

void set_nonblock(int fd, bool on)
{
    const int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

bool is_nonblock(int fd)
{
    return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

bool send_all(int fd, const void* buf, size_t len)
{
    const auto* p = static_cast<const char*>(buf);
    while (len > 0) {
        const ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

size_t recv_exact(int fd, void* buf, size_t len)
{
    auto* p = static_cast<char*>(buf);
    size_t got = 0;
    while (got < len) {
        const ssize_t n = recv(fd, p + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    return got;
}

Drain drain(int fd, size_t chunk)
{
    Drain d;
    d.hash = kFnvInit;
    std::vector<char> buf(chunk);
    for (;;) {
        const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            d.end = errname(errno);
            return d;
        }
        if (n == 0) {
            d.end = "EOF";
            return d;
        }
        d.bytes += static_cast<uint64_t>(n);
        d.hash = fnv(d.hash, buf.data(), static_cast<size_t>(n));
    }
}

uint64_t fnv(uint64_t h, const void* data, size_t len)
{
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

std::string hash_text(uint64_t h)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

namespace {

uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

} // namespace

uint64_t Rng::next()
{
    s_ += 0x9e3779b97f4a7c15ULL;
    return mix(s_);
}

void Rng::fill(void* buf, size_t len)
{
    auto* p = static_cast<uint8_t*>(buf);
    while (len > 0) {
        uint64_t v = next();
        const size_t n = std::min<size_t>(len, 8);
        memcpy(p, &v, n);
        p += n;
        len -= n;
    }
}

uint8_t pattern_byte(uint64_t seed, uint64_t i)
{
    return static_cast<uint8_t>(mix(seed * 0x100000001b3ULL + (i >> 3)) >> ((i & 7) * 8));
}

void pattern_fill(uint64_t seed, uint64_t offset, void* buf, size_t len)
{
    auto* p = static_cast<uint8_t*>(buf);
    for (size_t k = 0; k < len;) {
        const uint64_t i = offset + k;
        if ((i & 7) == 0 && len - k >= 8) {
            const uint64_t w = mix(seed * 0x100000001b3ULL + (i >> 3));
            memcpy(p + k, &w, 8);
            k += 8;
        } else {
            p[k] = pattern_byte(seed, i);
            k++;
        }
    }
}

void Event::set()
{
    {
        const std::lock_guard<std::mutex> lock(mu_);
        set_ = true;
    }
    cv_.notify_all();
}

bool Event::is_set()
{
    const std::lock_guard<std::mutex> lock(mu_);
    return set_;
}

void Event::wait(Lane& l, std::string_view what, int timeout_ms)
{
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return set_; }))
        l.abort("timed out waiting for " + std::string(what));
}

void Fd::reset(int fd)
{
    if (fd_ >= 0)
        close(fd_);
    fd_ = fd;
}

// --- registration --------------------------------------------------------------

std::vector<Scenario>& registry()
{
    static std::vector<Scenario> scenarios;
    return scenarios;
}

Registrar::Registrar(const char* name, ScenarioFn fn, unsigned flags, int timeout_s)
{
    registry().push_back(Scenario{name, fn, Ip::kV4, flags, timeout_s});
}

Registrar::Registrar(const char* group, const char* name, ScenarioFn fn, unsigned flags,
                     int timeout_s)
{
    const std::string g(group);
    registry().push_back(Scenario{g + ".v4." + name, fn, Ip::kV4, flags, timeout_s});
    registry().push_back(Scenario{g + ".v6." + name, fn, Ip::kV6, flags, timeout_s});
}

} // namespace sdp::conformance
