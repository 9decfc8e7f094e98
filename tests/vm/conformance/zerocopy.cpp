// SPDX-License-Identifier: GPL-2.0
//
// --zerocopy: every scenario as a program written for TCP's MSG_ZEROCOPY
// runs it.  Each socket the harness creates has SO_ZEROCOPY on, and every
// send(), sendto() and sendmsg() of the scenario carries MSG_ZEROCOPY
// (this binary's own definitions of them come before libc's).  The traces
// must stay TCP's.
//
// The completion notifications are not traced: TCP queues them when the
// peer acknowledges, so when one arrives depends on timing.  They are
// drained here instead and checked on each socket: ranges of the ids of
// the sends that carried bytes, each id at most once.
// A pending notification makes poll() report POLLERR (select() readable
// and writable, epoll EPOLLERR); the wrappers of poll(), select() and
// epoll_wait() drain the queues before and after the call and report
// readiness as it is without them, so the scenarios' poll masks are the
// program's view of the stream, the same over both protocols.
#include "conformance.h"
#include "uapi/sdp.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <linux/errqueue.h>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace sdp::conformance {
namespace {

std::atomic<bool> g_on{false};
int g_trace_fd = -1;

// What one socket's notifications showed so far.
struct ZcState {
    uint32_t sends = 0;    // MSG_ZEROCOPY sends with SO_ZEROCOPY on that took bytes
    uint32_t notified = 0; // ids notified so far
    // The ids notified, as merged inclusive ranges lo -> hi.  TCP queues a
    // notification when the last reference to a send's pages goes, which
    // is in order in the common case only (msg_zerocopy.rst).
    std::map<uint32_t, uint32_t> ranges;
    uint32_t inflight = 0; // sends in progress
    bool bad = false;
    // The bytes of the sends not yet notified (see Bounce).
    std::vector<std::unique_ptr<std::vector<char>>> bufs;
};
std::mutex g_mu;
std::map<int, ZcState> g_socks;
// Buffers of sockets closed before every notification came: the kernel may
// still send from them.  Kept until the run (a child process) exits.
std::vector<std::unique_ptr<std::vector<char>>> g_closed_bufs;

template <class F> F real(const char* name)
{
    static_assert(sizeof(F) == sizeof(void*));
    void* p = dlsym(RTLD_NEXT, name);
    if (p == nullptr)
        _exit(97);
    F f;
    std::memcpy(&f, &p, sizeof(f));
    return f;
}

using SendFn = ssize_t (*)(int, const void*, size_t, int);
using SendtoFn = ssize_t (*)(int, const void*, size_t, int, const sockaddr*, socklen_t);
using SendmsgFn = ssize_t (*)(int, const msghdr*, int);
using PollFn = int (*)(pollfd*, nfds_t, int);
using SelectFn = int (*)(int, fd_set*, fd_set*, fd_set*, timeval*);
using EpollWaitFn = int (*)(int, epoll_event*, int, int);
using CloseFn = int (*)(int);

void fail(int fd, const std::string& why)
{
    // The record lands in this family's trace only: the traces differ, and
    // the failed check fails the run on its own too.
    if (g_trace_fd >= 0) {
        std::string rec = "zerocopy";
        rec += '\x1f';
        rec += "CHECK FAILED: fd " + std::to_string(fd) + ": " + why + '\n';
        (void)(write(g_trace_fd, rec.data(), rec.size()) < 0);
    }
    note_check_failed();
}

bool zerocopy_on(int fd)
{
    int v = 0;
    socklen_t len = sizeof(v);
    return getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &v, &len) == 0 && v == 1;
}

// Record the ids [lo, hi] as notified: false if the range is inverted,
// reaches past the sends or overlaps one notified before.
bool note_range(ZcState& st, uint32_t lo, uint32_t hi)
{
    if (hi < lo || hi >= st.sends)
        return false;
    auto next = st.ranges.upper_bound(lo);
    if (next != st.ranges.begin() && std::prev(next)->second >= lo)
        return false;
    if (next != st.ranges.end() && next->first <= hi)
        return false;
    st.notified += hi - lo + 1;
    if (next != st.ranges.end() && next->first == hi + 1) {
        hi = next->second;
        next = st.ranges.erase(next);
    }
    if (next != st.ranges.begin() && std::prev(next)->second + 1 == lo) {
        std::prev(next)->second = hi;
        return true;
    }
    st.ranges.emplace(lo, hi);
    return true;
}

// Read fd's queued notifications; true if there were any.  g_mu held.
bool drain_locked(int fd, ZcState& st)
{
    bool any = false;
    for (;;) {
        alignas(cmsghdr) char control[128];
        msghdr m{};
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return any;
        any = true;
        const cmsghdr* cm = CMSG_FIRSTHDR(&m);
        if (cm == nullptr || cm->cmsg_len < CMSG_LEN(sizeof(sock_extended_err))) {
            fail(fd, "an error-queue message without a sock_extended_err");
            st.bad = true;
            continue;
        }
        sock_extended_err ee{};
        std::memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
        if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0) {
            fail(fd, "error-queue message of origin " + std::to_string(ee.ee_origin) + " errno " +
                         std::to_string(ee.ee_errno));
            st.bad = true;
            continue;
        }
        if (st.bad)
            continue;
        // One range each, [ee_info, ee_data]: ids of sends that took
        // bytes, none notified before.
        if (!note_range(st, ee.ee_info, ee.ee_data)) {
            fail(fd, "notification [" + std::to_string(ee.ee_info) + ", " +
                         std::to_string(ee.ee_data) + "]: " + std::to_string(st.sends) +
                         " sends, " + std::to_string(st.notified) + " notified before");
            st.bad = true;
            continue;
        }
        if (st.notified == st.sends && st.inflight == 0)
            st.bufs.clear();
    }
}

// Drain every socket that has sent with MSG_ZEROCOPY; true if any had some.
bool drain_all()
{
    if (!g_on.load())
        return false;
    const std::lock_guard<std::mutex> lock(g_mu);
    bool any = false;
    for (auto& [fd, st] : g_socks)
        any |= drain_locked(fd, st);
    return any;
}

// A MSG_ZEROCOPY send of a socket with SO_ZEROCOPY on.  The kernel may
// read the buffer until the send's notification, and the scenarios, written
// for plain sends, reuse theirs at once: the send goes from a copy, kept
// until every send of the socket so far is notified (its id is not known
// here when threads share the socket).  Counted before the call (SDP queues
// its notification before the call returns, and another thread may drain
// it), taken back if the call took no bytes.
class Bounce {
  public:
    Bounce(int fd, const void* data, size_t len) : fd_(fd), active_(zerocopy_on(fd))
    {
        if (!active_)
            return;
        buf_ = std::make_unique<std::vector<char>>(static_cast<const char*>(data),
                                                   static_cast<const char*>(data) + len);
        const std::lock_guard<std::mutex> lock(g_mu);
        ZcState& st = g_socks[fd];
        st.sends++;
        st.inflight++;
    }
    // Where the send goes from: the copy, or the caller's buffer.
    const void* data(const void* caller) const { return active_ ? buf_->data() : caller; }
    void done(ssize_t r)
    {
        if (!active_)
            return;
        const int saved = errno;
        const std::lock_guard<std::mutex> lock(g_mu);
        ZcState& st = g_socks[fd_];
        st.inflight--;
        if (r <= 0)
            st.sends--;
        else
            st.bufs.push_back(std::move(buf_));
        if (st.notified == st.sends && st.inflight == 0)
            st.bufs.clear();
        errno = saved;
    }

  private:
    int fd_;
    bool active_;
    std::unique_ptr<std::vector<char>> buf_;
};

int stream_flags(int fd, int flags)
{
    if (!g_on.load())
        return flags;
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
        return flags;
    return flags | MSG_ZEROCOPY;
}

int ms_left(std::chrono::steady_clock::time_point deadline, int timeout)
{
    if (timeout < 0)
        return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

} // namespace

void zerocopy_mode(bool on)
{
    g_on = on;
}

bool zerocopy_mode()
{
    return g_on.load();
}

void zerocopy_trace_fd(int fd)
{
    g_trace_fd = fd;
}

int zerocopy_enable(int fd)
{
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0)
        return 0;
    // Kernels before 6.12 refuse SO_ZEROCOPY on SDP sockets before SDP
    // sees it; SDP takes it at its own level (what libsdp.so does).
    if (errno == EOPNOTSUPP && setsockopt(fd, SOL_SDP, SDP_ZEROCOPY, &one, sizeof(one)) == 0)
        return 0;
    return -errno;
}

void zerocopy_finish()
{
    if (!g_on.load())
        return;
    const std::lock_guard<std::mutex> lock(g_mu);
    for (auto& [fd, st] : g_socks)
        drain_locked(fd, st);
}

} // namespace sdp::conformance

using sdp::conformance::Bounce;
using sdp::conformance::drain_all;
using sdp::conformance::ms_left;
using sdp::conformance::real;
using sdp::conformance::stream_flags;

extern "C" {

ssize_t send(int fd, const void* buf, size_t len, int flags)
{
    static const auto kReal = real<sdp::conformance::SendFn>("send");
    flags = stream_flags(fd, flags);
    if ((flags & MSG_ZEROCOPY) == 0)
        return kReal(fd, buf, len, flags);
    Bounce b(fd, buf, len);
    const ssize_t r = kReal(fd, b.data(buf), len, flags);
    b.done(r);
    return r;
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to, socklen_t tolen)
{
    static const auto kReal = real<sdp::conformance::SendtoFn>("sendto");
    flags = stream_flags(fd, flags);
    if ((flags & MSG_ZEROCOPY) == 0)
        return kReal(fd, buf, len, flags, to, tolen);
    Bounce b(fd, buf, len);
    const ssize_t r = kReal(fd, b.data(buf), len, flags, to, tolen);
    b.done(r);
    return r;
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags)
{
    static const auto kReal = real<sdp::conformance::SendmsgFn>("sendmsg");
    flags = stream_flags(fd, flags);
    if ((flags & MSG_ZEROCOPY) == 0 || msg == nullptr)
        return kReal(fd, msg, flags);
    // The iovecs gathered into one copy; the rest of msg as it is.
    std::vector<char> gathered;
    for (size_t i = 0; i < msg->msg_iovlen; i++) {
        const char* base = static_cast<const char*>(msg->msg_iov[i].iov_base);
        gathered.insert(gathered.end(), base, base + msg->msg_iov[i].iov_len);
    }
    Bounce b(fd, gathered.data(), gathered.size());
    iovec one{const_cast<void*>(b.data(gathered.data())), gathered.size()};
    msghdr m = *msg;
    m.msg_iov = &one;
    m.msg_iovlen = 1;
    const ssize_t r = kReal(fd, &m, flags);
    b.done(r);
    return r;
}

// The readiness without notifications: drained before the call; any that
// came during it are drained and the readiness is asked for again, without
// waiting; if that finds nothing ready the wait goes on for the rest of the
// timeout.
int poll(pollfd* fds, nfds_t n, int timeout)
{
    static const auto kReal = real<sdp::conformance::PollFn>("poll");
    if (!sdp::conformance::zerocopy_mode())
        return kReal(fds, n, timeout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
    drain_all();
    int r = kReal(fds, n, timeout);
    while (r > 0 && drain_all()) {
        r = kReal(fds, n, 0);
        if (r == 0 && ms_left(deadline, timeout) != 0)
            r = kReal(fds, n, ms_left(deadline, timeout));
    }
    return r;
}

int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* tv)
{
    static const auto kReal = real<sdp::conformance::SelectFn>("select");
    if (!sdp::conformance::zerocopy_mode())
        return kReal(nfds, rd, wr, ex, tv);
    const fd_set rd0 = rd != nullptr ? *rd : fd_set{}, wr0 = wr != nullptr ? *wr : fd_set{},
                 ex0 = ex != nullptr ? *ex : fd_set{};
    drain_all();
    int r = kReal(nfds, rd, wr, ex, tv);
    while (r > 0 && drain_all()) {
        if (rd != nullptr)
            *rd = rd0;
        if (wr != nullptr)
            *wr = wr0;
        if (ex != nullptr)
            *ex = ex0;
        timeval zero{};
        r = kReal(nfds, rd, wr, ex, &zero);
        if (r == 0 && (tv == nullptr || tv->tv_sec != 0 || tv->tv_usec != 0)) {
            if (rd != nullptr)
                *rd = rd0;
            if (wr != nullptr)
                *wr = wr0;
            if (ex != nullptr)
                *ex = ex0;
            r = kReal(nfds, rd, wr, ex, tv); // Linux: tv holds the time left
        }
    }
    return r;
}

// epoll_wait consumes edge-triggered events, so it is not asked again.  A
// notification that came during the wait woke it (an edge-triggered
// registration reports that wake-up too): unless some socket has an error
// of its own, EPOLLERR comes off the events, those left empty are dropped,
// and if none is left the wait goes on for the rest of the timeout.
int epoll_wait(int ep, epoll_event* evs, int max, int timeout)
{
    static const auto kReal = real<sdp::conformance::EpollWaitFn>("epoll_wait");
    static const auto kRealPoll = real<sdp::conformance::PollFn>("poll");
    if (!sdp::conformance::zerocopy_mode())
        return kReal(ep, evs, max, timeout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
    drain_all();
    for (;;) {
        const int r = kReal(ep, evs, max, ms_left(deadline, timeout));
        if (r <= 0 || !drain_all())
            return r;
        std::vector<pollfd> fds;
        {
            const std::lock_guard<std::mutex> lock(sdp::conformance::g_mu);
            for (const auto& [fd, st] : sdp::conformance::g_socks)
                fds.push_back(pollfd{fd, 0, 0});
        }
        kRealPoll(fds.data(), fds.size(), 0);
        for (const pollfd& p : fds) {
            if ((p.revents & POLLERR) != 0)
                return r;
        }
        int kept = 0;
        for (int i = 0; i < r; i++) {
            evs[i].events &= ~static_cast<uint32_t>(EPOLLERR);
            if (evs[i].events != 0)
                evs[kept++] = evs[i];
        }
        if (kept > 0 || ms_left(deadline, timeout) == 0)
            return kept;
    }
}

int close(int fd)
{
    static const auto kReal = real<sdp::conformance::CloseFn>("close");
    if (sdp::conformance::zerocopy_mode()) {
        const std::lock_guard<std::mutex> lock(sdp::conformance::g_mu);
        auto it = sdp::conformance::g_socks.find(fd);
        if (it != sdp::conformance::g_socks.end()) {
            sdp::conformance::drain_locked(fd, it->second);
            for (auto& b : it->second.bufs)
                sdp::conformance::g_closed_bufs.push_back(std::move(b));
            sdp::conformance::g_socks.erase(it);
        }
    }
    return kReal(fd);
}

} // extern "C"
