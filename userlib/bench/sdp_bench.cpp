// SPDX-License-Identifier: GPL-2.0
//
// sdp-bench: stream goodput and ping-pong latency over TCP (AF_INET,
// AF_INET6) or SDP (AF_INET_SDP), the same code path for every family so
// their numbers compare.  `sdp-bench --help` for the options; the protocol
// between client and server is described in bench_core.h.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#if SDP_BENCH_HAVE_URING
#include <liburing.h>
#endif

#include "bench_core.h"
#include "uapi/sdp.h"

namespace sdp::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string errno_text(int err)
{
    return std::strerror(err);
}

std::string seconds_text(double s)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", s);
    return buf;
}

[[noreturn]] void fail_errno(const std::string& what, int err)
{
    throw std::runtime_error(what + ": " + errno_text(err));
}

// --- families and addresses --------------------------------------------------

struct Endpoint {
    int domain = AF_INET; // socket() domain
    sockaddr_storage addr{};
    socklen_t len = 0;
    std::string text; // "addr:port" for messages
    std::string family_text;
};

std::string sockaddr_text(const sockaddr* sa)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        return std::string(host) + ":" + std::to_string(port);
    }
    if (sa->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        return "[" + std::string(host) + "]:" + std::to_string(port);
    }
    return "?";
}

Endpoint resolve(const Options& o)
{
    Endpoint ep;
    int addr_family = AF_INET;
    std::string addr = o.addr;
    switch (o.family) {
    case Family::kInet:
        ep.domain = AF_INET;
        ep.family_text = "inet";
        break;
    case Family::kInet6:
        ep.domain = AF_INET6;
        addr_family = AF_INET6;
        ep.family_text = "inet6";
        break;
    case Family::kSdp:
        ep.domain = sdp_family_number();
        // Same addresses as TCP: IPv4 unless the address is IPv6.
        addr_family = addr.find(':') != std::string::npos ? AF_INET6 : AF_INET;
        ep.family_text = "sdp (AF_INET_SDP = " + std::to_string(ep.domain) + ")";
        break;
    }
    if (addr.empty()) {
        if (o.role == Role::kServer)
            addr = addr_family == AF_INET6 ? "::" : "0.0.0.0";
        else
            addr = addr_family == AF_INET6 ? "::1" : "127.0.0.1";
    }
    addrinfo hints{};
    hints.ai_family = addr_family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(o.port);
    const int rc = getaddrinfo(addr.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        throw std::runtime_error("cannot resolve '" + addr + "' as an " +
                                 (addr_family == AF_INET6 ? "IPv6" : "IPv4") +
                                 " address: " + gai_strerror(rc));
    }
    std::memcpy(&ep.addr, res->ai_addr, res->ai_addrlen);
    ep.len = res->ai_addrlen;
    freeaddrinfo(res);
    ep.text = sockaddr_text(reinterpret_cast<const sockaddr*>(&ep.addr));
    return ep;
}

class Fd {
  public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    ~Fd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

// --zcopy-thresh: SDP_ZCOPY_THRESH on an SDP socket; throws (closing fd)
// when the module refuses it.
void apply_zcopy_thresh(int fd, const Options& o)
{
    if (o.family != Family::kSdp || o.zcopy_thresh < 0)
        return;
    const int v = static_cast<int>(o.zcopy_thresh);
    if (setsockopt(fd, SOL_SDP, SDP_ZCOPY_THRESH, &v, sizeof v) == 0)
        return;
    const int err = errno;
    close(fd);
    fail_errno("setsockopt(SOL_SDP, SDP_ZCOPY_THRESH, " + std::to_string(v) +
                   ") (an sdp.ko without zero copy?)",
               err);
}

// This SDP socket's transfer counters; nullopt when the module has none.
std::optional<SdpSocketStats> sdp_socket_stats(int fd)
{
    sdp_sock_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(fd, SOL_SDP, SDP_STATS, &st, &len) != 0 || len < sizeof st)
        return std::nullopt;
    SdpSocketStats s;
    s.tx_bytes = st.tx_bytes;
    s.rx_bytes = st.rx_bytes;
    s.tx_bcopy_bytes = st.tx_bcopy_bytes;
    s.rx_bcopy_bytes = st.rx_bcopy_bytes;
    s.zc_tx_bytes = st.zc_tx_bytes;
    s.zc_rx_bytes = st.zc_rx_bytes;
    s.src_avail_sent = st.src_avail_sent;
    s.sink_avail_sent = st.sink_avail_sent;
    s.rdma_writes = st.rdma_writes;
    s.rdma_reads = st.rdma_reads;
    s.fallbacks = st.fallback_send_sm + st.fallback_memlock + st.fallback_pin + st.fallback_reg +
                  st.fallback_peek + st.fallback_no_reader;
    return s;
}

int make_socket(const Endpoint& ep, const Options& o)
{
    const int fd = socket(ep.domain, SOCK_STREAM, 0);
    if (fd >= 0) {
        apply_zcopy_thresh(fd, o);
        return fd;
    }
    const int err = errno;
    std::string msg = "socket(" + ep.family_text + ", SOCK_STREAM)";
    if (o.family == Family::kSdp && (err == EAFNOSUPPORT || err == EINVAL)) {
        msg += " failed: " + errno_text(err) +
               " (is sdp.ko loaded? insmod build/kmod/$(uname -r)/sdp.ko)";
    } else {
        msg += ": " + errno_text(err);
    }
    throw std::runtime_error(msg);
}

void set_nodelay(int fd, const Options& o)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0)
        return;
    const int err = errno;
    if (o.family != Family::kSdp)
        fail_errno("setsockopt(TCP_NODELAY)", err);
    // An SDP module without the TCP-level option still gets measured, with
    // whatever coalescing it does.
    static bool warned = false;
    if (!warned) {
        std::fprintf(stderr,
                     "sdp-bench: warning: TCP_NODELAY on the SDP socket: %s; latency includes "
                     "any send coalescing\n",
                     errno_text(err).c_str());
        warned = true;
    }
}

// --- I/O: blocking syscalls or io_uring ------------------------------------------

class Io {
  public:
    virtual ~Io() = default;
    // One call: bytes moved (recv: 0 at end of stream); throws on error.
    virtual std::size_t send_some(int fd, const std::uint8_t* p, std::size_t n) = 0;
    virtual std::size_t recv_some(int fd, std::uint8_t* p, std::size_t n) = 0;
    // A new connection on fd (its MSG_ZEROCOPY numbers start again at 0).
    virtual void on_connect(int /*fd*/) {}
    // What the zero-copy sends reported, for the end of a run; "" if none.
    virtual std::string summary() const { return ""; }

    void send_all(int fd, const std::uint8_t* p, std::size_t n)
    {
        while (n > 0) {
            const std::size_t k = send_some(fd, p, n);
            p += k;
            n -= k;
        }
    }
    // Bytes received before the end of the stream (n unless the peer closed).
    std::size_t recv_all(int fd, std::uint8_t* p, std::size_t n)
    {
        std::size_t got = 0;
        while (got < n) {
            const std::size_t k = recv_some(fd, p + got, n - got);
            if (k == 0)
                break;
            got += k;
        }
        return got;
    }
    // Each buffer in order, `len` bytes each.  A zero-copy Io may return
    // with sends in flight: a buffer is the program's again only after
    // release_buffers().
    virtual void send_each(int fd, const std::vector<std::uint8_t*>& bufs, std::size_t count,
                           std::size_t len)
    {
        for (std::size_t i = 0; i < count; i++)
            send_all(fd, bufs[i], len);
    }
    // Wait until no send of send_each() uses its buffer any more.
    virtual void release_buffers(int /*fd*/) {}
};

class BlockingIo : public Io {
  public:
    std::size_t send_some(int fd, const std::uint8_t* p, std::size_t n) override
    {
        while (true) {
            const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
            if (k >= 0)
                return static_cast<std::size_t>(k);
            if (errno != EINTR)
                fail_errno("send", errno);
        }
    }
    std::size_t recv_some(int fd, std::uint8_t* p, std::size_t n) override
    {
        while (true) {
            const ssize_t k = recv(fd, p, n, 0);
            if (k >= 0)
                return static_cast<std::size_t>(k);
            if (errno != EINTR)
                fail_errno("recv", errno);
        }
    }
};

#if SDP_BENCH_HAVE_URING
// io_uring with one request in flight for send/recv (the same semantics as
// the blocking calls), and a chain of linked sends for the stream sender.
class UringIo : public Io {
  public:
    static constexpr unsigned kDepth = 16;

    // nullptr, with the errno in `err`, when io_uring cannot be set up.
    static std::unique_ptr<UringIo> create(int& err) { return open_ring<UringIo>(err); }
    ~UringIo() override
    {
        if (live_)
            io_uring_queue_exit(&ring_);
    }

    std::size_t send_some(int fd, const std::uint8_t* p, std::size_t n) override
    {
        while (true) {
            io_uring_sqe* sqe = get_sqe();
            io_uring_prep_send(sqe, fd, p, n, MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, 0);
            const int res = submit_one();
            if (res >= 0)
                return static_cast<std::size_t>(res);
            if (res != -EINTR)
                fail_errno("io_uring send", -res);
        }
    }
    std::size_t recv_some(int fd, std::uint8_t* p, std::size_t n) override
    {
        while (true) {
            io_uring_sqe* sqe = get_sqe();
            io_uring_prep_recv(sqe, fd, p, n, 0);
            io_uring_sqe_set_data64(sqe, 0);
            const int res = submit_one();
            if (res >= 0)
                return static_cast<std::size_t>(res);
            if (res != -EINTR)
                fail_errno("io_uring recv", -res);
        }
    }
    // Up to `kDepth` linked sends per submission: they run in order, and a
    // short one cancels the rest of the chain, which is then sent again
    // from where it stopped.
    void send_each(int fd, const std::vector<std::uint8_t*>& bufs, std::size_t count,
                   std::size_t len) override
    {
        std::size_t done = 0;
        while (done < count) {
            const std::size_t n = std::min<std::size_t>(count - done, kDepth);
            for (std::size_t i = 0; i < n; i++) {
                io_uring_sqe* sqe = get_sqe();
                io_uring_prep_send(sqe, fd, bufs[done + i], len, MSG_NOSIGNAL | MSG_WAITALL);
                io_uring_sqe_set_data64(sqe, i);
                if (i + 1 < n)
                    sqe->flags |= IOSQE_IO_LINK;
            }
            int res[kDepth] = {};
            wait_all(static_cast<unsigned>(n), res);
            std::size_t i = 0;
            for (; i < n && res[i] == static_cast<int>(len); i++) {
            }
            if (i < n) {
                // Finish the short message, then the ones the chain dropped.
                if (res[i] < 0 && res[i] != -EINTR && res[i] != -ECANCELED)
                    fail_errno("io_uring send", -res[i]);
                const std::size_t sent = res[i] > 0 ? static_cast<std::size_t>(res[i]) : 0;
                send_all(fd, bufs[done + i] + sent, len - sent);
                for (std::size_t j = i + 1; j < n; j++)
                    send_all(fd, bufs[done + j], len);
            }
            done += n;
        }
    }

  protected:
    UringIo() = default;

    // A T (this class or a subclass) with its ring set up, or nullptr.
    template <class T> static std::unique_ptr<T> open_ring(int& err)
    {
        std::unique_ptr<T> io(new T);
        const int rc = io_uring_queue_init(kDepth, &io->ring_, 0);
        if (rc < 0) {
            err = -rc;
            return nullptr;
        }
        io->live_ = true;
        return io;
    }

    io_uring_sqe* get_sqe()
    {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr)
            throw std::runtime_error("io_uring: submission queue full");
        return sqe;
    }
    int submit_one()
    {
        int res[1] = {};
        wait_all(1, res);
        return res[0];
    }
    // Submit what is queued and collect `n` completions, indexed by user_data
    // (which io_uring_prep_* leaves alone: every request sets it).
    void wait_all(unsigned n, int* res)
    {
        std::uint32_t seen = 0;
        int rc = 0;
        do {
            rc = io_uring_submit_and_wait(&ring_, n);
        } while (rc == -EINTR);
        if (rc < 0)
            fail_errno("io_uring_submit", -rc);
        for (unsigned got = 0; got < n; got++) {
            io_uring_cqe* cqe = nullptr;
            do {
                rc = io_uring_wait_cqe(&ring_, &cqe);
            } while (rc == -EINTR);
            if (rc < 0)
                fail_errno("io_uring_wait_cqe", -rc);
            const std::uint64_t idx = io_uring_cqe_get_data64(cqe);
            const int r = cqe->res;
            io_uring_cqe_seen(&ring_, cqe);
            if (idx >= n || (seen & (1U << idx)) != 0)
                throw std::runtime_error("io_uring: unexpected completion " + std::to_string(idx));
            seen |= 1U << idx;
            res[idx] = r;
        }
    }

    io_uring ring_{};
    bool live_ = false;
};

// io_uring's SEND_ZC for sends (one at a time, each waiting for its NOTIF
// completion before the buffer is reused), io_uring for receives.
class UringZcIo : public UringIo {
  public:
    static std::unique_ptr<UringZcIo> create_zc(int& err) { return open_ring<UringZcIo>(err); }

    void on_connect(int /*fd*/) override { notifications_ = 0; }
    std::size_t send_some(int fd, const std::uint8_t* p, std::size_t n) override
    {
        while (true) {
            io_uring_sqe* sqe = get_sqe();
            io_uring_prep_send_zc(sqe, fd, p, n, MSG_NOSIGNAL, 0);
            io_uring_sqe_set_data64(sqe, 0);
            int rc = 0;
            do {
                rc = io_uring_submit_and_wait(&ring_, 1);
            } while (rc == -EINTR);
            if (rc < 0)
                fail_errno("io_uring_submit", -rc);
            int res = 0;
            bool more = true, notified = false;
            while (more) {
                io_uring_cqe* cqe = nullptr;
                do {
                    rc = io_uring_wait_cqe(&ring_, &cqe);
                } while (rc == -EINTR);
                if (rc < 0)
                    fail_errno("io_uring_wait_cqe", -rc);
                if ((cqe->flags & IORING_CQE_F_NOTIF) != 0) {
                    notified = true;
                } else {
                    res = cqe->res;
                    more = (cqe->flags & IORING_CQE_F_MORE) != 0;
                }
                if (notified)
                    more = false;
                io_uring_cqe_seen(&ring_, cqe);
            }
            if (notified)
                notifications_++;
            if (res >= 0)
                return static_cast<std::size_t>(res);
            if (res != -EINTR)
                fail_errno("io_uring send_zc", -res);
        }
    }
    // As a program keeps its buffers busy: one request at a time, each
    // waiting for its result but not for its NOTIF; a buffer is sent again
    // only after the NOTIF of its previous request.
    void send_each(int fd, const std::vector<std::uint8_t*>& bufs, std::size_t count,
                   std::size_t len) override
    {
        for (std::size_t i = 0; i < count; i++) {
            auto it = in_flight_.find(bufs[i]);
            if (it != in_flight_.end())
                wait_notif(it->second);
            std::size_t done = 0;
            while (done < len) {
                const std::uint64_t id = next_id_++;
                io_uring_sqe* sqe = get_sqe();
                io_uring_prep_send_zc(sqe, fd, bufs[i] + done, len - done, MSG_NOSIGNAL, 0);
                io_uring_sqe_set_data64(sqe, id);
                int rc = 0;
                do {
                    rc = io_uring_submit(&ring_);
                } while (rc == -EINTR);
                if (rc < 0)
                    fail_errno("io_uring_submit", -rc);
                const int res = wait_result(id);
                if (res < 0 && res != -EINTR)
                    fail_errno("io_uring send_zc", -res);
                if (res > 0)
                    done += static_cast<std::size_t>(res);
                in_flight_[bufs[i]] = id;
            }
        }
    }
    void release_buffers(int /*fd*/) override
    {
        if (next_id_ > 0)
            wait_notif(next_id_ - 1);
        in_flight_.clear();
    }
    std::string summary() const override
    {
        return "io_uring SEND_ZC: " + std::to_string(notifications_) + " NOTIF completions";
    }

  private:
    friend class UringIo; // open_ring()
    UringZcIo() = default;

    // Reap one completion: a request's result (kept in results_) or a NOTIF.
    void reap_one()
    {
        io_uring_cqe* cqe = nullptr;
        int rc = 0;
        do {
            rc = io_uring_wait_cqe(&ring_, &cqe);
        } while (rc == -EINTR);
        if (rc < 0)
            fail_errno("io_uring_wait_cqe", -rc);
        const std::uint64_t id = io_uring_cqe_get_data64(cqe);
        if ((cqe->flags & IORING_CQE_F_NOTIF) != 0) {
            notifications_++;
            mark_notified(id);
        } else {
            results_[id] = cqe->res;
            // A request that fails or sends nothing has no NOTIF.
            if ((cqe->flags & IORING_CQE_F_MORE) == 0)
                mark_notified(id);
        }
        io_uring_cqe_seen(&ring_, cqe);
    }
    void mark_notified(std::uint64_t id)
    {
        notified_.insert(id);
        while (!notified_.empty() && *notified_.begin() == notified_below_) {
            notified_.erase(notified_.begin());
            notified_below_++;
        }
    }
    int wait_result(std::uint64_t id)
    {
        while (results_.find(id) == results_.end())
            reap_one();
        const int res = results_[id];
        results_.erase(id);
        return res;
    }
    // Until every request up to id has its NOTIF (in any order).
    void wait_notif(std::uint64_t id)
    {
        while (notified_below_ <= id)
            reap_one();
    }

    std::uint64_t notifications_ = 0;
    std::uint64_t next_id_ = 0;
    std::map<const std::uint8_t*, std::uint64_t> in_flight_; // buffer: its last request
    std::map<std::uint64_t, int> results_;
    std::set<std::uint64_t> notified_; // above notified_below_
    std::uint64_t notified_below_ = 0; // every request below it has its NOTIF
};
#endif

// SO_ZEROCOPY on fd: at SOL_SOCKET, or as SOL_SDP/SDP_ZEROCOPY where the
// kernel refuses it for SDP sockets (before 6.12).
void enable_zerocopy(int fd)
{
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0)
        return;
    const int err = errno;
    if (err != EOPNOTSUPP || setsockopt(fd, SOL_SDP, SDP_ZEROCOPY, &one, sizeof one) != 0)
        fail_errno("setsockopt(SO_ZEROCOPY)", err);
}

// MSG_ZEROCOPY sends.  send_some() waits for its own notification on the
// error queue, so the buffer is the program's again when it returns, as
// after a blocking send(); send_each() keeps its buffers busy.
class MsgZerocopyIo : public BlockingIo {
  public:
    void on_connect(int fd) override
    {
        enable_zerocopy(fd);
        next_id_ = 0;
        notified_ = 0;
        sends_ = 0;
        copied_ = 0;
        in_flight_.clear();
    }
    std::size_t send_some(int fd, const std::uint8_t* p, std::size_t n) override
    {
        const std::size_t k = send_zc(fd, p, n);
        if (k > 0)
            wait_notified(fd, next_id_ - 1);
        return k;
    }
    // As a program keeps its buffers busy: a buffer is sent again only
    // after the notification of its previous send, not at once.
    void send_each(int fd, const std::vector<std::uint8_t*>& bufs, std::size_t count,
                   std::size_t len) override
    {
        for (std::size_t i = 0; i < count; i++) {
            auto it = in_flight_.find(bufs[i]);
            if (it != in_flight_.end())
                wait_notified(fd, it->second);
            for (std::size_t done = 0; done < len;) {
                const std::size_t k = send_zc(fd, bufs[i] + done, len - done);
                if (k == 0)
                    throw std::runtime_error("send(MSG_ZEROCOPY) sent nothing");
                done += k;
            }
            in_flight_[bufs[i]] = next_id_ - 1;
        }
    }
    void release_buffers(int fd) override
    {
        if (next_id_ > 0)
            wait_notified(fd, next_id_ - 1);
        in_flight_.clear();
    }
    std::string summary() const override
    {
        return "MSG_ZEROCOPY: " + std::to_string(sends_) + " sends notified, " +
               std::to_string(copied_) + " of them as copied";
    }

  private:
    // One send(MSG_ZEROCOPY); a send of some bytes takes the next number.
    std::size_t send_zc(int fd, const std::uint8_t* p, std::size_t n)
    {
        while (true) {
            const ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_ZEROCOPY);
            if (k > 0) {
                next_id_++;
                return static_cast<std::size_t>(k);
            }
            if (k == 0)
                return 0;
            if (errno != EINTR)
                fail_errno("send(MSG_ZEROCOPY)", errno);
        }
    }
    // Read notifications until the one numbered id has come (ranges).
    void wait_notified(int fd, std::uint32_t id)
    {
        while (notified_ <= id) {
            pollfd pf{fd, 0, 0};
            const int r = poll(&pf, 1, 10000);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                fail_errno("poll for MSG_ZEROCOPY notifications", errno);
            if (r == 0)
                throw std::runtime_error("no MSG_ZEROCOPY notification for send " +
                                         std::to_string(id) + " within 10 s");
            read_notifications(fd);
        }
    }
    void read_notifications(int fd)
    {
        while (true) {
            alignas(cmsghdr) char control[128] = {};
            msghdr m{};
            m.msg_control = control;
            m.msg_controllen = sizeof control;
            if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    return;
                fail_errno("recvmsg(MSG_ERRQUEUE)", errno);
            }
            for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm != nullptr; cm = CMSG_NXTHDR(&m, cm)) {
                sock_extended_err ee{};
                std::memcpy(&ee, CMSG_DATA(cm), sizeof ee);
                if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                    throw std::runtime_error("error queue: " +
                                             errno_text(static_cast<int>(ee.ee_errno)));
                const std::uint64_t range = ee.ee_data - ee.ee_info + 1ULL;
                sends_ += range;
                if ((ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0)
                    copied_ += range;
                notified_ = ee.ee_data + 1;
            }
        }
    }

    std::uint32_t next_id_ = 0;
    std::uint32_t notified_ = 0;                             // every number below it was notified
    std::map<const std::uint8_t*, std::uint32_t> in_flight_; // buffer: its last send
    std::uint64_t sends_ = 0;
    std::uint64_t copied_ = 0;
};

std::unique_ptr<Io> make_io(const Options& o)
{
    if (o.zerocopy == Zerocopy::kMsg)
        return std::make_unique<MsgZerocopyIo>();
    if (o.zerocopy == Zerocopy::kUring) {
#if SDP_BENCH_HAVE_URING
        int err = 0;
        if (auto io = UringZcIo::create_zc(err))
            return io;
        fail_errno("--zerocopy uring: io_uring", err);
#else
        throw std::runtime_error("--zerocopy uring: built without liburing");
#endif
    }
    if (!o.async)
        return std::make_unique<BlockingIo>();
#if SDP_BENCH_HAVE_URING
    int err = 0;
    if (auto io = UringIo::create(err))
        return io;
    std::fprintf(stderr,
                 "sdp-bench: --async: io_uring is unavailable (%s); falling back to blocking "
                 "send/recv\n",
                 errno_text(err).c_str());
#else
    std::fprintf(stderr, "sdp-bench: --async: built without liburing; falling back to blocking "
                         "send/recv\n");
#endif
    return std::make_unique<BlockingIo>();
}

// --- server ----------------------------------------------------------------------

std::uint64_t elapsed_ns(Clock::time_point t0, Clock::time_point t1)
{
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

// One run on an accepted connection; returns the line to print.
std::string serve_one(Io& io, int fd, const Options& o)
{
    std::uint8_t hbuf[kHeaderLen];
    const std::size_t got = io.recv_all(fd, hbuf, kHeaderLen);
    if (got == 0)
        throw std::runtime_error("client closed without sending a header");
    if (got < kHeaderLen)
        throw std::runtime_error("client closed in the middle of the header");
    std::string error;
    const auto h = decode_header(hbuf, error);
    if (!h)
        throw std::runtime_error("bad header: " + error);
    const bool verify = (h->flags & kFlagVerify) != 0;

    Result r;
    if (h->mode == Mode::kStream) {
        std::vector<std::uint8_t> buf(std::max<std::size_t>(h->size, std::size_t{256} << 10));
        const std::uint64_t want = h->count * h->size; // 0: until end of stream
        const auto t0 = Clock::now();
        auto t1 = t0;
        bool bad = false;
        while (want == 0 || r.bytes < want) {
            std::size_t n = buf.size();
            if (want != 0)
                n = static_cast<std::size_t>(std::min<std::uint64_t>(n, want - r.bytes));
            const std::size_t k = io.recv_some(fd, buf.data(), n);
            if (k == 0)
                break;
            t1 = Clock::now();
            if (verify && !bad) {
                const std::size_t at = pattern_check(buf.data(), k, r.bytes);
                if (at != k) {
                    bad = true;
                    r.status = 1;
                    r.bad_offset = r.bytes + at;
                }
            }
            r.bytes += k;
        }
        if (want != 0 && r.bytes < want)
            throw std::runtime_error("client closed after " + std::to_string(r.bytes) + " of " +
                                     std::to_string(want) + " bytes");
        r.elapsed_ns = elapsed_ns(t0, t1);
    } else {
        // Requests of h->request bytes answered with h->size, or an echo.
        const std::uint32_t req = h->request != 0 ? h->request : h->size;
        std::vector<std::uint8_t> buf(req), response;
        if (h->request != 0) {
            response.resize(h->size);
            pattern_fill(response.data(), h->size, 0);
        }
        const auto t0 = Clock::now();
        for (std::uint64_t i = 0; h->count == 0 || i < h->count; i++) {
            const std::size_t k = io.recv_all(fd, buf.data(), req);
            if (k == 0 && h->count == 0)
                break;
            if (k < req)
                throw std::runtime_error("client closed in the middle of round trip " +
                                         std::to_string(i));
            if (verify && r.status == 0) {
                const std::size_t at = pattern_check(buf.data(), k, r.bytes);
                if (at != k) {
                    r.status = 1;
                    r.bad_offset = r.bytes + at;
                }
            }
            r.bytes += k;
            if (h->request == 0) {
                io.send_all(fd, buf.data(), h->size);
                continue;
            }
            if (verify)
                pattern_fill(response.data(), h->size, i * h->size);
            io.send_all(fd, response.data(), h->size);
        }
        r.elapsed_ns = elapsed_ns(t0, Clock::now());
    }
    std::uint8_t rbuf[kResultLen];
    encode_result(r, rbuf);
    io.send_all(fd, rbuf, kResultLen);

    const double s = static_cast<double>(r.elapsed_ns) / 1e9;
    std::string line = std::string(mode_name(h->mode)) + " " + std::to_string(h->size) +
                       " B: " + std::to_string(r.bytes) + " bytes received";
    if (h->request != 0)
        line += " in requests of " + std::to_string(h->request) + " B";
    if (h->mode == Mode::kStream && s > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, ", %.2f MB/s", static_cast<double>(r.bytes) / s / 1e6);
        line += buf;
    }
    if (verify)
        line += r.status == 0 ? ", verify ok"
                              : ", VERIFY FAILED at offset " + std::to_string(r.bad_offset);
    if (o.family == Family::kSdp) {
        if (const auto st = sdp_socket_stats(fd))
            line += "; socket " + format_sdp_stats(*st);
    }
    return line;
}

int run_server(const Options& o)
{
    const Endpoint ep = resolve(o);
    Fd lfd(make_socket(ep, o));
    int one = 1;
    setsockopt(lfd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd.get(), reinterpret_cast<const sockaddr*>(&ep.addr), ep.len) != 0)
        fail_errno("bind " + ep.text + " (" + ep.family_text + ")", errno);
    if (listen(lfd.get(), 16) != 0)
        fail_errno("listen on " + ep.text + " (" + ep.family_text + ")", errno);
    sockaddr_storage bound{};
    socklen_t blen = sizeof bound;
    std::string where = ep.text;
    if (getsockname(lfd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) == 0)
        where = sockaddr_text(reinterpret_cast<const sockaddr*>(&bound));
    std::printf("sdp-bench: server listening on %s, %s\n", where.c_str(), ep.family_text.c_str());
    std::fflush(stdout);

    const std::unique_ptr<Io> io = make_io(o);
    int status = 0;
    for (std::uint64_t served = 0; o.connections == 0 || served < o.connections; served++) {
        sockaddr_storage peer{};
        socklen_t plen = sizeof peer;
        const int cfd = accept(lfd.get(), reinterpret_cast<sockaddr*>(&peer), &plen);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                served--;
                continue;
            }
            fail_errno("accept on " + where, errno);
        }
        Fd conn(cfd);
        const std::string who = sockaddr_text(reinterpret_cast<const sockaddr*>(&peer));
        try {
            // Whether the listener passes it on or not.
            if (o.family == Family::kSdp && o.zcopy_thresh >= 0) {
                const int v = static_cast<int>(o.zcopy_thresh);
                if (setsockopt(cfd, SOL_SDP, SDP_ZCOPY_THRESH, &v, sizeof v) != 0)
                    fail_errno("setsockopt(SDP_ZCOPY_THRESH) on the accepted socket", errno);
            }
            io->on_connect(cfd);
            const std::string line = serve_one(*io, cfd, o);
            if (!o.quiet)
                std::printf("sdp-bench: server: %s: %s\n", who.c_str(), line.c_str());
            if (line.find("VERIFY FAILED") != std::string::npos)
                status = 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "sdp-bench: server: %s: %s\n", who.c_str(), e.what());
            status = 1;
        }
        std::fflush(stdout);
    }
    return status;
}

// --- client ----------------------------------------------------------------------

int connect_with_retry(const Endpoint& ep, const Options& o)
{
    const auto t0 = Clock::now();
    while (true) {
        const int fd = make_socket(ep, o);
        if (connect(fd, reinterpret_cast<const sockaddr*>(&ep.addr), ep.len) == 0)
            return fd;
        const int err = errno;
        close(fd);
        // The server may not listen yet: retry refusals for a while.
        if (err == ECONNREFUSED && seconds_since(t0) < o.connect_timeout_s) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            continue;
        }
        std::string msg = "connect to " + ep.text + " (" + ep.family_text + "): " + errno_text(err);
        if (err == ECONNREFUSED)
            msg += " (no server after " + seconds_text(o.connect_timeout_s) + ")";
        if (o.family == Family::kSdp && err == EOPNOTSUPP)
            msg += " (this sdp.ko cannot connect yet)";
        throw std::runtime_error(msg);
    }
}

Measurement run_stream(Io& io, int fd, const Options& o, std::uint32_t size)
{
    const std::uint64_t count = o.bytes != 0 ? (o.bytes + size - 1) / size : 0;
    Header h;
    h.mode = Mode::kStream;
    h.flags = o.verify ? kFlagVerify : 0;
    h.size = size;
    h.count = count;
    std::uint8_t hbuf[kHeaderLen];
    encode_header(h, hbuf);
    io.send_all(fd, hbuf, kHeaderLen);

    // A few buffers so io_uring can keep several sends in flight.
    const std::size_t nbufs = std::clamp<std::size_t>((16u << 20) / size, 1, 16);
    std::vector<std::vector<std::uint8_t>> storage(nbufs, std::vector<std::uint8_t>(size));
    std::vector<std::uint8_t*> bufs;
    bufs.reserve(nbufs);
    for (auto& b : storage)
        bufs.push_back(b.data());
    if (!o.verify) {
        for (std::size_t i = 0; i < nbufs; i++)
            pattern_fill(bufs[i], size, i * std::uint64_t{size});
    }

    // Check the clock about every 256 KiB (and at least every 16 messages).
    const std::size_t per_check = std::clamp<std::size_t>((256u << 10) / size, 1, 16);
    const std::size_t batch = std::min(nbufs, per_check);
    const auto t0 = Clock::now();
    std::uint64_t sent = 0; // messages
    // The buffers go round (a zero-copy Io may still be sending the last
    // ones); with --verify each is refilled once every send is done with it.
    std::vector<std::uint8_t*> round;
    while (count == 0 ? seconds_since(t0) < o.duration_s : sent < count) {
        std::size_t n = batch;
        if (count != 0)
            n = static_cast<std::size_t>(std::min<std::uint64_t>(n, count - sent));
        round.clear();
        for (std::size_t i = 0; i < n; i++)
            round.push_back(bufs[(sent + i) % nbufs]);
        if (o.verify) {
            io.release_buffers(fd);
            for (std::size_t i = 0; i < n; i++)
                pattern_fill(round[i], size, (sent + i) * size);
        }
        io.send_each(fd, round, n, size);
        sent += n;
    }
    io.release_buffers(fd);
    if (count == 0 && shutdown(fd, SHUT_WR) != 0)
        fail_errno("shutdown(SHUT_WR) to end the stream", errno);

    std::uint8_t rbuf[kResultLen];
    if (io.recv_all(fd, rbuf, kResultLen) < kResultLen)
        throw std::runtime_error("server closed without a result (see its output)");
    const auto r = decode_result(rbuf);
    if (!r)
        throw std::runtime_error("bad result from the server");
    const std::uint64_t bytes = sent * size;
    if (r->bytes != bytes)
        throw std::runtime_error("server received " + std::to_string(r->bytes) +
                                 " bytes, client sent " + std::to_string(bytes));
    Measurement m;
    m.family = o.family;
    m.mode = Mode::kStream;
    m.size = size;
    m.bytes = r->bytes;
    const double s = static_cast<double>(r->elapsed_ns) / 1e9;
    if (s > 0) {
        m.throughput_MBps = static_cast<double>(r->bytes) / s / 1e6;
        m.msgs_per_s = static_cast<double>(r->bytes) / size / s;
    }
    m.verified = !o.verify ? Verified::kOff : r->status == 0 ? Verified::kOk : Verified::kFailed;
    if (m.verified == Verified::kFailed)
        throw std::runtime_error("verification FAILED: the server saw a wrong byte at offset " +
                                 std::to_string(r->bad_offset));
    return m;
}

Measurement run_pingpong(Io& io, int fd, const Options& o, std::uint32_t size)
{
    const std::uint64_t count = o.iterations != 0 ? o.warmup + o.iterations : 0;
    Header h;
    h.mode = Mode::kPingpong;
    h.flags = o.verify ? kFlagVerify : 0;
    h.size = size;
    h.request = o.request;
    h.count = count;
    std::uint8_t hbuf[kHeaderLen];
    encode_header(h, hbuf);
    io.send_all(fd, hbuf, kHeaderLen);

    // Requests of o.request bytes, each answered with `size`; or an echo.
    const std::uint32_t req = o.request != 0 ? o.request : size;
    std::vector<std::uint8_t> out(req), in(size);
    pattern_fill(out.data(), req, 0);
    std::vector<double> rtt_us;
    rtt_us.reserve(o.iterations != 0 ? o.iterations : 100000);
    double measured_s = 0;
    const auto t0 = Clock::now();
    Clock::time_point measure_start = t0;
    std::uint64_t i = 0;
    for (;; i++) {
        if (count != 0 && i >= count)
            break;
        if (count == 0 && i >= o.warmup && seconds_since(measure_start) >= o.duration_s)
            break;
        if (i == o.warmup)
            measure_start = Clock::now();
        const std::uint64_t offset = i * size;
        if (o.verify)
            pattern_fill(out.data(), req, i * req);
        const auto a = Clock::now();
        io.send_all(fd, out.data(), req);
        if (io.recv_all(fd, in.data(), size) < size)
            throw std::runtime_error("server closed during round trip " + std::to_string(i));
        const auto b = Clock::now();
        if (o.verify) {
            const std::size_t at = pattern_check(in.data(), size, offset);
            if (at != size)
                throw std::runtime_error("verification FAILED: received byte at offset " +
                                         std::to_string(offset + at) + " differs");
        }
        if (i >= o.warmup) {
            const double us = std::chrono::duration<double, std::micro>(b - a).count();
            rtt_us.push_back(us);
            measured_s += us / 1e6;
        }
    }
    if (count == 0 && shutdown(fd, SHUT_WR) != 0)
        fail_errno("shutdown(SHUT_WR) to end the run", errno);
    std::uint8_t rbuf[kResultLen];
    if (io.recv_all(fd, rbuf, kResultLen) < kResultLen)
        throw std::runtime_error("server closed without a result (see its output)");
    const auto r = decode_result(rbuf);
    if (!r)
        throw std::runtime_error("bad result from the server");
    if (r->bytes != i * req)
        throw std::runtime_error("server received " + std::to_string(r->bytes) +
                                 " bytes, client sent " + std::to_string(i * req));
    if (r->status != 0)
        throw std::runtime_error("verification FAILED: the server saw a wrong byte at offset " +
                                 std::to_string(r->bad_offset));

    Measurement m;
    m.family = o.family;
    m.mode = Mode::kPingpong;
    m.size = size;
    m.request = o.request;
    m.bytes = i * req;
    if (!rtt_us.empty()) {
        m.p50_us = percentile(rtt_us, 50);
        m.p99_us = percentile(rtt_us, 99);
    }
    if (measured_s > 0) {
        m.msgs_per_s = static_cast<double>(rtt_us.size()) / measured_s;
        m.throughput_MBps = m.msgs_per_s * size / 1e6;
    }
    m.verified = o.verify ? Verified::kOk : Verified::kOff;
    return m;
}

int run_client(const Options& o)
{
    const Endpoint ep = resolve(o);
    const std::unique_ptr<Io> io = make_io(o);
    if (o.csv) {
        std::printf("%s\n", csv_header().c_str());
        std::fflush(stdout);
    }
    for (const std::uint32_t size : o.sizes) {
        Fd fd(connect_with_retry(ep, o));
        io->on_connect(fd.get());
        if (o.mode == Mode::kPingpong)
            set_nodelay(fd.get(), o);
        const auto t0 = Clock::now();
        Measurement m;
        try {
            m = o.mode == Mode::kStream ? run_stream(*io, fd.get(), o, size)
                                        : run_pingpong(*io, fd.get(), o, size);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string(family_name(o.family)) + " " + mode_name(o.mode) +
                                     " " + std::to_string(size) + " B to " + ep.text + ": " +
                                     e.what());
        }
        const double s = m.throughput_MBps > 0
                             ? static_cast<double>(m.bytes) / m.throughput_MBps / 1e6
                             : seconds_since(t0);
        if (o.csv)
            std::printf("%s\n", format_csv(m).c_str());
        else
            std::printf("sdp-bench: %s\n", format_human(m, s).c_str());
        std::fflush(stdout);
        // How the bytes went (the CSV line keeps its columns: on stderr).
        if (o.family == Family::kSdp) {
            const auto st = sdp_socket_stats(fd.get());
            const std::string what =
                std::string("sdp-bench: ") + family_name(o.family) + " " + mode_name(o.mode) + " " +
                std::to_string(size) + " B: socket " +
                (st ? format_sdp_stats(*st) : "counters unavailable (getsockopt SDP_STATS failed)");
            std::fprintf(o.csv ? stderr : stdout, "%s\n", what.c_str());
            std::fflush(o.csv ? stderr : stdout);
        }
        const std::string zc = io->summary();
        if (!zc.empty()) {
            std::fprintf(o.csv ? stderr : stdout, "sdp-bench: %s %u B: %s\n", mode_name(o.mode),
                         size, zc.c_str());
            std::fflush(o.csv ? stderr : stdout);
        }
    }
    return 0;
}

} // namespace
} // namespace sdp::bench

int main(int argc, char** argv)
{
    using namespace sdp::bench;
    const ParseResult p = parse_args(argc, argv);
    if (!p.ok) {
        std::fprintf(stderr, "sdp-bench: %s\n%s", p.error.c_str(), usage().c_str());
        return 2;
    }
    if (p.help) {
        std::printf("%s", usage().c_str());
        return 0;
    }
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return p.opts.role == Role::kServer ? run_server(p.opts) : run_client(p.opts);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sdp-bench: %s: %s\n",
                     p.opts.role == Role::kServer ? "server" : "client", e.what());
        return 1;
    }
}
