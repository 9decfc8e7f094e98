// SPDX-License-Identifier: GPL-2.0
//
// Rogue-peer tests: the kernel's AF_INET_SDP socket is the victim of a
// userspace SDP peer (rogue_peer.h) that speaks the protocol correctly and
// then breaks it on purpose, above all the zero-copy rules: RDMA outside
// what was offered or advertised, keys used after they were given back,
// completions claiming more than was moved, offers that cannot describe a
// real buffer, messages the state does not allow.
//
// Every misbehaving case asserts that the kernel socket sees the connection
// aborted (ECONNRESET, or POLLERR) within a few seconds, that the relevant
// counter of /proc/net/sdpstats moved, and that the kernel log has no
// WARNING or BUG.  The Control cases prove that the rogue speaks the
// protocol: with it behaving, data, RDMA Read of a SrcAvail and RDMA Write
// into a SinkAvail all work, so the failures are the kernel's answers to
// the violations and not a broken tool.
//
// Beyond zero copy (the findings of the 2026-11-24 security review): offers
// that carry no kernel address (F13), no SinkAvail for kernel memory and no
// stale bytes for a lying RdmaWrCompl (F3), nothing delivered after a reset
// (F9), non-blocking receives that never sleep (F10), cancels the peer never
// answers (F11), keepalive against a dead peer without credits (F12),
// receive completions that are not a plain SEND (F18), a peer that grants
// credits without receive buffers (F19), malformed Hellos and floods of
// connection requests that never complete (F4).
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded (net.sdp defaults: zcopy_thresh 64 KiB), rdma_ucm and ib_uverbs
// loaded for the userspace verbs.  Both ends use 10.77.0.1 (rxe0).
#include "rogue_peer.h"
#include "sdp_wire.h"
#include "socket_util.h"

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <functional>
#include <infiniband/verbs.h>
#include <linux/errqueue.h>
#include <memory>
#include <mutex>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/ioctl.h>

namespace sdp::vmtest {
namespace {

using rogue::Message;
using rogue::Options;
using rogue::ReqFlood;
using rogue::RoguePeer;
using rogue::SendOp;

constexpr size_t kKiB = 1024;
// How long the kernel may take to notice an abort on its own.
constexpr int kDetectMs = 5000;

unsigned char pattern(uint64_t i, uint64_t seed = 0)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z ^= z >> 29;
    return static_cast<unsigned char>(z ^ (z >> 13));
}

std::shared_ptr<std::vector<uint8_t>> pattern_buffer(size_t n, uint64_t seed = 0)
{
    auto buf = std::make_shared<std::vector<uint8_t>>(n);
    for (size_t i = 0; i < n; i++)
        (*buf)[i] = pattern(i, seed);
    return buf;
}

// Index of the first byte that differs from the pattern, or -1.
long mismatch(const uint8_t* p, size_t n, uint64_t at = 0, uint64_t seed = 0)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(at + i, seed))
            return static_cast<long>(i);
    return -1;
}

// F13: the address in a SrcAvail or SinkAvail the kernel sends must not be
// a kernel address.  The registration's DMA address is one on Soft-RoCE (a
// direct-map pointer, 0xffff8...), a bus or physical address elsewhere.
void expect_no_kernel_address(const Message& m, const char* what)
{
    EXPECT_EQ(m.vaddr >> 47, 0u) << what << " vaddr 0x" << std::hex << m.vaddr << std::dec
                                 << ": the kernel gave its peer a kernel address";
}

std::vector<uint8_t> pattern_vector(size_t n, uint64_t seed, uint64_t at = 0)
{
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = pattern(at + i, seed);
    return v;
}

std::chrono::milliseconds::rep ms_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t0)
        .count();
}

// /proc/meminfo field in KiB, -1 if missing.
long long meminfo_kib(const std::string& field)
{
    std::istringstream in(read_file("/proc/meminfo").value_or(""));
    std::string name;
    long long v = 0;
    std::string unit;
    while (in >> name >> v) {
        std::getline(in, unit);
        if (name == field + ":")
            return v;
    }
    return -1;
}

// QPs of every RDMA device (`rdma res show`: "0: rxe0: pd 3 cq 6 qp 6 ..."),
// -1 if the tool said nothing.
long rdma_qp_count()
{
    FILE* p = popen("rdma res show 2>/dev/null", "r");
    if (p == nullptr)
        return -1;
    std::string text;
    char buf[512];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
        text.append(buf, n);
    pclose(p);
    std::istringstream in(text);
    std::string word;
    long total = -1;
    while (in >> word) {
        if (word == "qp") {
            long v = 0;
            if (in >> v)
                total = (total < 0 ? 0 : total) + v;
        }
    }
    return total;
}

// Children of the listener on port that are half-open (SYN_RECV in
// /proc/net/sdp).
int half_open(int port)
{
    const std::string suffix = ":" + std::to_string(port);
    int n = 0;
    for (const ProcLine& p : proc_sockets()) {
        if (p.state == "SYN_RECV" && p.local.size() > suffix.size() &&
            p.local.compare(p.local.size() - suffix.size(), suffix.size(), suffix) == 0)
            n++;
    }
    return n;
}

// A blocking socket call on its own thread, waited for with a deadline.  A
// call that never returns is left behind (detached) with everything it
// uses, so a kernel hang fails the test instead of stopping the binary.
class KernelCall {
  public:
    struct Result {
        ssize_t ret;
        int err;
    };
    template <typename F> explicit KernelCall(F f) : st_(std::make_shared<State>())
    {
        std::thread([st = st_, f]() mutable {
            errno = 0;
            const ssize_t r = f();
            const int e = errno;
            {
                std::lock_guard<std::mutex> lock(st->mu);
                st->res = Result{r, e};
            }
            st->cv.notify_all();
        }).detach();
    }
    std::optional<Result> wait(int ms)
    {
        std::unique_lock<std::mutex> lock(st_->mu);
        st_->cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return st_->res.has_value(); });
        return st_->res;
    }

  private:
    struct State {
        std::mutex mu;
        std::condition_variable cv;
        std::optional<Result> res;
    };
    std::shared_ptr<State> st_;
};

// poll() revents of fd after waiting up to ms for POLLERR.
short wait_pollerr(int fd, int ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    pollfd pfd{fd, POLLIN | POLLOUT, 0};
    for (;;) {
        pfd.revents = 0;
        poll(&pfd, 1, 0);
        if (((pfd.revents & POLLERR) != 0) || std::chrono::steady_clock::now() >= end)
            return pfd.revents;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// A net.sdp sysctl set for the scope of a test.  A sysctl the module does
// not have (renamed, not implemented yet) fails the test: the test would
// otherwise run under conditions it does not describe.
class SysctlOverride {
  public:
    SysctlOverride(const std::string& name, const std::string& value)
        : path_("/proc/sys/net/sdp/" + name), old_(read_file(path_))
    {
        if (!old_) {
            ADD_FAILURE() << path_ << " does not exist: the test cannot set " << name << " to "
                          << value;
            return;
        }
        EXPECT_TRUE(write_file(path_, value)) << path_;
    }
    ~SysctlOverride()
    {
        if (old_)
            write_file(path_, *old_);
    }
    SysctlOverride(const SysctlOverride&) = delete;
    SysctlOverride& operator=(const SysctlOverride&) = delete;

  private:
    std::string path_;
    std::optional<std::string> old_;
};

std::string describe_call(const std::optional<KernelCall::Result>& r)
{
    if (!r)
        return "still blocked";
    return "returned " + std::to_string(r->ret) + " errno " + strerror(r->err);
}

class Rogue : public ::testing::Test {
  protected:
    void SetUp() override
    {
        port_ = next_port++;
        kmsg_ = std::make_unique<KmsgCapture>();
        before_ = counters();
    }

    void TearDown() override
    {
        for (const std::string& line : kmsg_->lines()) {
            EXPECT_EQ(line.find("WARNING"), std::string::npos) << line;
            EXPECT_EQ(line.find("BUG"), std::string::npos) << line;
            EXPECT_EQ(line.find("Oops"), std::string::npos) << line;
            EXPECT_EQ(line.find("refcount"), std::string::npos) << line;
            EXPECT_EQ(line.find("corruption"), std::string::npos) << line;
        }
    }

    unsigned long long delta(const char* name) { return counter_delta(before_, name); }

    // The receive buffer size a new kernel connection announces:
    // net.sdp.buf_size_initial (0, or out of range: net.sdp.buf_size).
    static uint32_t initial_rcv_size()
    {
        const long full = sdp_sysctl("buf_size");
        const long initial = sdp_sysctl("buf_size_initial");
        return static_cast<uint32_t>(initial >= 1024 && initial <= full ? initial : full);
    }

    // The rogue connects to a kernel listener; kfd_ is the accepted socket.
    void rogue_connects(RoguePeer& r)
    {
        listener_ = sdp_listener(kAddrA, port_);
        ASSERT_GE(listener_.get(), 0);
        ASSERT_TRUE(r.connect(kAddrA, port_)) << r.error();
        kfd_ = Fd(accept(listener_.get(), nullptr, nullptr));
        ASSERT_GE(kfd_.get(), 0) << strerror(errno);
        EXPECT_EQ(r.peer_rcv_size(), initial_rcv_size()) << "the kernel's HelloAck actrcvsz";
        EXPECT_GE(r.peer_hello_bufs(), 8u) << "the kernel's HelloAck bufs";
    }

    // The kernel socket connects to the rogue's listener.
    void kernel_connects(RoguePeer& r)
    {
        ASSERT_TRUE(r.listen(kAddrA, port_)) << r.error();
        const int fam = sdp_family();
        const int port = port_;
        auto fd = std::make_shared<int>(-1);
        KernelCall conn([fd, fam, port]() -> ssize_t {
            *fd = socket(fam, SOCK_STREAM, 0);
            const sockaddr_in a = make_addr(kAddrA, port);
            return connect(*fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
        });
        ASSERT_TRUE(r.accept()) << r.error();
        const auto res = conn.wait(10000);
        ASSERT_TRUE(res) << "connect() still blocked after the rogue accepted";
        ASSERT_EQ(res->ret, 0) << strerror(res->err);
        kfd_ = Fd(*fd);
        EXPECT_EQ(r.peer_rcv_size(), initial_rcv_size()) << "the kernel's Hello localrcvsz";
    }

    // A blocking send of the whole buffer from the kernel socket.
    KernelCall kernel_send(const std::shared_ptr<std::vector<uint8_t>>& buf, int flags = 0)
    {
        const int fd = kfd_.get();
        return KernelCall(
            [fd, buf, flags] { return send(fd, buf->data(), buf->size(), MSG_NOSIGNAL | flags); });
    }

    KernelCall kernel_recv(const std::shared_ptr<std::vector<uint8_t>>& buf, int flags = 0)
    {
        const int fd = kfd_.get();
        return KernelCall([fd, buf, flags] { return recv(fd, buf->data(), buf->size(), flags); });
    }

    // The kernel reset the connection because of what the rogue sent: it
    // said AbortConn and ended the RDMA connection.
    void expect_kernel_aborted(RoguePeer& r)
    {
        EXPECT_TRUE(r.pump_until([&] { return r.rx_count(SDP_MID_ABORT_CONN) > 0; }, kDetectMs))
            << "no AbortConn from the kernel: " << r.describe();
        EXPECT_TRUE(r.pump_until([&] { return r.disconnected(); }, kDetectMs))
            << "the kernel did not end the RDMA connection: " << r.describe();
    }

    // The kernel reset the connection for one protocol violation of the
    // rogue: its AbortConn and the RDMA disconnect came, conn_err_protocol
    // counted it once, no zero-copy byte moved (zc_counter, if given), and
    // the kernel itself broke no rule.
    void expect_protocol_reset(RoguePeer& r, const char* zc_counter = nullptr)
    {
        expect_kernel_aborted(r);
        EXPECT_EQ(delta("conn_err_protocol"), 1u);
        if (zc_counter != nullptr)
            EXPECT_EQ(delta(zc_counter), 0u) << zc_counter;
        expect_clean_rogue(r);
    }

    // A blocked kernel call must fail within kDetectMs with ECONNRESET (or
    // EPIPE) with the rogue silent.  If it does not, the rogue disconnects so
    // the test can go on, and the hang is reported.  Returns what the call
    // said and whether it ended on its own.
    std::string expect_call_reset(KernelCall& call, RoguePeer& r, const std::string& what)
    {
        auto res = call.wait(kDetectMs);
        EXPECT_TRUE(res) << what << ": the kernel call still blocks " << kDetectMs
                         << " ms later although its connection is dead; " << r.describe();
        const bool alone = res.has_value();
        if (!res) {
            r.disconnect();
            res = call.wait(10000);
            if (!res) {
                ADD_FAILURE() << what << ": still blocked 10 s after the rogue disconnected too";
                return "hung";
            }
        }
        EXPECT_EQ(res->ret, -1) << what << ": " << describe_call(res);
        EXPECT_TRUE(res->err == ECONNRESET || res->err == EPIPE)
            << what << ": " << describe_call(res);
        return describe_call(res) + (alone ? "" : " after the rogue disconnected");
    }

    // The socket is reset: POLLERR within kDetectMs, then recv() fails with
    // ECONNRESET.
    void expect_socket_reset(RoguePeer& r, const std::string& what)
    {
        short ev = wait_pollerr(kfd_.get(), kDetectMs);
        EXPECT_TRUE(ev & POLLERR) << what << ": no POLLERR " << kDetectMs << " ms later (revents 0x"
                                  << std::hex << ev << std::dec << "); " << r.describe();
        if ((ev & POLLERR) == 0) {
            r.disconnect();
            ev = wait_pollerr(kfd_.get(), 10000);
            ASSERT_TRUE(ev & POLLERR) << what << ": no POLLERR after the rogue disconnected";
        }
        auto buf = std::make_shared<std::vector<uint8_t>>(4096);
        KernelCall rc = kernel_recv(buf);
        const auto res = rc.wait(kDetectMs);
        ASSERT_TRUE(res) << what << ": recv() blocks on a reset socket";
        EXPECT_EQ(res->ret, -1) << what << ": " << describe_call(res);
        EXPECT_EQ(res->err, ECONNRESET) << what << ": " << describe_call(res);
    }

    // A kernel call that must end within ms on its own.  If it does not,
    // the test fails, and the rogue disconnects so that the call ends and
    // the test goes on; nullopt if even that did not end it.
    std::optional<KernelCall::Result> bounded(KernelCall& call, RoguePeer& r, int ms,
                                              const std::string& what)
    {
        auto res = call.wait(ms);
        EXPECT_TRUE(res) << what << ": still blocked " << ms << " ms later; " << r.describe();
        if (!res) {
            r.disconnect();
            res = call.wait(10000);
            if (!res)
                ADD_FAILURE() << what << ": still blocked 10 s after the rogue disconnected too";
        }
        return res;
    }

    // F9: after the reset was reported, recv() says EOF, times times, and
    // never returns bytes.
    void expect_eof_after_reset(const std::string& what, int times = 2)
    {
        for (int i = 0; i < times; i++) {
            if (i != 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(300));
            auto buf = std::make_shared<std::vector<uint8_t>>(64 * kKiB, 0x33);
            KernelCall rc = kernel_recv(buf);
            const auto res = rc.wait(kDetectMs);
            ASSERT_TRUE(res) << what << ": recv() #" << i + 2 << " blocks on a reset socket";
            EXPECT_EQ(res->ret, 0) << what << ": recv() #" << i + 2
                                   << " after the reset was reported: " << describe_call(res);
        }
    }

    // A kernel listener with this backlog on port_.
    void listen_with_backlog(int backlog)
    {
        listener_ = Fd(socket(sdp_family(), SOCK_STREAM, 0));
        ASSERT_GE(listener_.get(), 0) << strerror(errno);
        const sockaddr_in a = make_addr(kAddrA, port_);
        ASSERT_EQ(bind(listener_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
            << strerror(errno);
        ASSERT_EQ(listen(listener_.get(), backlog), 0) << strerror(errno);
    }

    void expect_clean_rogue(const RoguePeer& r)
    {
        EXPECT_TRUE(r.kernel_errors().empty()) << "the kernel broke the protocol: " << r.describe();
    }

    Fd listener_;
    Fd kfd_;
    std::unique_ptr<KmsgCapture> kmsg_;
    std::map<std::string, unsigned long long> before_;
    int port_ = 0;
    static inline int next_port = 7600;
};

// ---- 7. controls: the rogue speaks the protocol --------------------------

// Data both ways with the rogue as the active side; the rings are small
// enough (8 kernel buffers) that both sides run out of credits many times.
TEST_F(Rogue, ControlDataBothWaysRogueConnects)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    constexpr size_t kTotal = kKiB * kKiB;
    const int fd = kfd_.get();
    // Kernel: 1 MiB out in 16 KiB sends (below the zero-copy threshold),
    // then 1 MiB in.
    KernelCall k([fd]() -> ssize_t {
        auto out = pattern_buffer(kTotal, 1);
        for (size_t off = 0; off < kTotal; off += 16 * kKiB)
            if (send(fd, out->data() + off, 16 * kKiB, MSG_NOSIGNAL) != 16 * kKiB)
                return -1;
        std::vector<uint8_t> in(kTotal);
        size_t got = 0;
        while (got < kTotal) {
            const ssize_t n = recv(fd, in.data() + got, kTotal - got, 0);
            if (n <= 0)
                return -2;
            got += static_cast<size_t>(n);
        }
        return mismatch(in.data(), in.size(), 0, 2) == -1 ? static_cast<ssize_t>(got) : -3;
    });
    std::vector<uint8_t> in(kTotal);
    ASSERT_TRUE(r.recv_data(in.data(), in.size(), 60000)) << r.error();
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 1), -1);
    auto out = pattern_buffer(kTotal, 2);
    ASSERT_TRUE(r.send_data(out->data(), out->size(), 60000)) << r.error();
    const auto res = k.wait(60000);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(kTotal)) << describe_call(res);
    expect_clean_rogue(r);
    EXPECT_GT(delta("rx_data"), 16u);
    EXPECT_GT(delta("tx_data"), 16u);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
}

// The kernel connects to the rogue; data both ways, then an orderly close
// (DisConn each way): the kernel reads EOF.
TEST_F(Rogue, ControlDataBothWaysKernelConnectsAndCloses)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(kernel_connects(r));
    constexpr size_t kTotal = kKiB * kKiB;
    const int fd = kfd_.get();
    // More than the kernel's receive ring holds: the rogue waits for the
    // kernel's credit updates while the kernel reads.
    KernelCall k([fd]() -> ssize_t {
        std::vector<uint8_t> in(kTotal);
        const ssize_t n = recv(fd, in.data(), in.size(), MSG_WAITALL);
        return n == static_cast<ssize_t>(kTotal) && mismatch(in.data(), in.size(), 0, 3) == -1 ? n
                                                                                               : -1;
    });
    auto out = pattern_buffer(kTotal, 3);
    ASSERT_TRUE(r.send_data(out->data(), out->size(), 60000)) << r.error();
    const auto res = k.wait(60000);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(kTotal)) << describe_call(res);
    const auto back = pattern_buffer(40000, 4);
    ASSERT_EQ(send(fd, back->data(), back->size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(back->size()));
    std::vector<uint8_t> echo(back->size());
    ASSERT_TRUE(r.recv_data(echo.data(), echo.size())) << r.error();
    EXPECT_EQ(mismatch(echo.data(), echo.size(), 0, 4), -1);
    // Orderly close: the kernel's DisConn, then ours; the kernel sees EOF.
    ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
    ASSERT_TRUE(r.wait_for(SDP_MID_DISCONN)) << r.describe();
    ASSERT_TRUE(r.send_control(SDP_MID_DISCONN)) << r.error();
    char c = 0;
    EXPECT_EQ(recv(fd, &c, 1, 0), 0) << strerror(errno);
    EXPECT_TRUE(r.pump_until([&] { return r.disconnected(); }, 10000)) << r.describe();
    expect_clean_rogue(r);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
}

// A connection reset while it waits in the accept queue (the rogue's
// AbortConn, its CM left to time out) is still handed out by accept(), with
// the peer's address, as TCP hands out a child reset before accept(): the
// caller reads the reset from it.  accept() failed with ECONNABORTED when
// the address was asked for (getname refused a closed child), which a
// server that does not retry (Python's socket.accept()) dies of.
TEST_F(Rogue, AcceptOfAConnectionResetInTheQueueReturnsItAsTcpDoes)
{
    listener_ = sdp_listener(kAddrA, port_);
    ASSERT_GE(listener_.get(), 0);
    RoguePeer r;
    ASSERT_TRUE(r.connect(kAddrA, port_)) << r.error();
    pollfd pl{listener_.get(), POLLIN, 0};
    ASSERT_EQ(poll(&pl, 1, kDetectMs), 1) << "the connection never reached the accept queue";
    ASSERT_TRUE(r.send_control(SDP_MID_ABORT_CONN)) << r.error();
    ASSERT_TRUE(eventually([&] { return delta("conn_err_reset") > 0; }, 5))
        << "the queued connection never took the AbortConn";
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    kfd_ = Fd(accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK));
    ASSERT_GE(kfd_.get(), 0) << strerror(errno);
    EXPECT_EQ(len, sizeof(peer));
    EXPECT_EQ(peer.sin_family, AF_INET);
    EXPECT_EQ(peer.sin_addr.s_addr, make_addr(kAddrA, 0).sin_addr.s_addr);
    char c = 0;
    EXPECT_EQ(recv(kfd_.get(), &c, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET) << strerror(errno);
    // As TCP: a reset socket has no peer any more.
    len = sizeof(peer);
    EXPECT_EQ(getpeername(kfd_.get(), reinterpret_cast<sockaddr*>(&peer), &len), -1);
    EXPECT_EQ(errno, ENOTCONN) << strerror(errno);
}

// Case 7a: the kernel's SrcAvail, read correctly in two RDMA Reads, each
// answered with its RdmaRdCompl: send() returns everything, the bytes are
// right, and the connection goes on.
TEST_F(Rogue, ControlReadsSrcAvailCorrectly)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    constexpr size_t kLen = 256 * kKiB;
    KernelCall k = kernel_send(pattern_buffer(kLen, 5));
    const auto sa = r.wait_for(SDP_MID_SRC_AVAIL);
    ASSERT_TRUE(sa) << r.describe();
    EXPECT_EQ(sa->zc_len, kLen);
    EXPECT_EQ(sa->payload_len(), 0u);
    // F13: no kernel address, and the RDMA Reads below at that address work.
    expect_no_kernel_address(*sa, "SrcAvail");
    std::vector<uint8_t> in(kLen);
    ibv_mr* mr = r.register_memory(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(mr) << r.error();
    const uint32_t half = kLen / 2;
    ASSERT_EQ(r.rdma_read(mr, in.data(), half, sa->vaddr, sa->rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_rd_compl(half)) << r.error();
    EXPECT_FALSE(k.wait(200)) << "send() returned after half was read";
    ASSERT_EQ(r.rdma_read(mr, in.data() + half, half, sa->vaddr + half, sa->rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_rd_compl(half)) << r.error();
    const auto res = k.wait(10000);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(kLen)) << describe_call(res);
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 5), -1);
    // The stream goes on by bcopy.
    const auto more = pattern_buffer(1000, 6);
    ASSERT_EQ(send(kfd_.get(), more->data(), more->size(), 0), 1000);
    std::vector<uint8_t> small(1000);
    ASSERT_TRUE(r.recv_data(small.data(), small.size())) << r.error();
    EXPECT_EQ(mismatch(small.data(), small.size(), 0, 6), -1);
    expect_clean_rogue(r);
    EXPECT_EQ(delta("zcopy_tx_bytes"), kLen);
    EXPECT_EQ(delta("rx_rdma_rd_compl"), 2u);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
}

// Case 7b: the kernel's SinkAvail, used correctly (RDMA Write of part of it,
// then RdmaWrCompl): recv() returns those bytes.
TEST_F(Rogue, ControlWritesSinkAvailCorrectly)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    auto in = std::make_shared<std::vector<uint8_t>>(256 * kKiB);
    KernelCall k = kernel_recv(in);
    const auto sk = r.wait_for(SDP_MID_SINK_AVAIL);
    ASSERT_TRUE(sk) << r.describe();
    EXPECT_EQ(sk->zc_len, in->size());
    // F13: no kernel address, and the RDMA Write below at that address works.
    expect_no_kernel_address(*sk, "SinkAvail");
    constexpr uint32_t kLen = 200000;
    auto out = pattern_buffer(kLen, 7);
    ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_EQ(r.rdma_write(mr, out->data(), kLen, sk->vaddr, sk->rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_wr_compl(kLen)) << r.error();
    const auto res = k.wait(10000);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(kLen)) << describe_call(res);
    EXPECT_EQ(mismatch(in->data(), kLen, 0, 7), -1);
    // And the stream goes on.
    ASSERT_TRUE(r.send_data(out->data(), 1000)) << r.error();
    char small[1000];
    ASSERT_EQ(recv(kfd_.get(), small, sizeof(small), MSG_WAITALL), 1000);
    EXPECT_EQ(mismatch(reinterpret_cast<uint8_t*>(small), 1000, 0, 7), -1);
    expect_clean_rogue(r);
    EXPECT_EQ(delta("zcopy_rx_bytes"), kLen);
    EXPECT_EQ(delta("tx_sink_avail"), 1u);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
}

// A source that accepts two advertisements at once (Hello max_adverts 2)
// gets a 512 KiB MSG_WAITALL receive, with zcopy_chunk at 256 KiB, as two
// SinkAvails of 256 KiB and no third: it writes into them in the order
// they came, each followed by its RdmaWrCompl, and the receive returns the
// bytes in that order.
TEST_F(Rogue, ControlWritesSinkAvailsInPiecesInOrder)
{
    const SysctlFor chunk("zcopy_chunk", "262144");
    Options opt;
    opt.max_adverts = 2;
    RoguePeer r(opt);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    constexpr uint32_t kPiece = 256 * kKiB;
    auto in = std::make_shared<std::vector<uint8_t>>(2 * kPiece);
    KernelCall k = kernel_recv(in, MSG_WAITALL);
    const auto a1 = r.wait_for(SDP_MID_SINK_AVAIL);
    ASSERT_TRUE(a1) << r.describe();
    const auto a2 = r.wait_for(SDP_MID_SINK_AVAIL);
    ASSERT_TRUE(a2) << r.describe();
    EXPECT_EQ(a1->zc_len, kPiece);
    EXPECT_EQ(a2->zc_len, kPiece);
    EXPECT_NE(a1->rkey, a2->rkey) << "a registration each";
    expect_no_kernel_address(*a2, "SinkAvail");
    auto out = pattern_buffer(size_t{2} * kPiece, 8);
    ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_EQ(r.rdma_write(mr, out->data(), kPiece, a1->vaddr, a1->rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_wr_compl(kPiece)) << r.error();
    ASSERT_EQ(r.rdma_write(mr, out->data() + kPiece, kPiece, a2->vaddr, a2->rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_wr_compl(kPiece)) << r.error();
    const auto res = k.wait(10000);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(2 * kPiece)) << describe_call(res);
    EXPECT_EQ(mismatch(in->data(), size_t{2} * kPiece, 0, 8), -1);
    EXPECT_EQ(r.rx_count(SDP_MID_SINK_AVAIL), 2u) << "more than the rogue's max_adverts";
    expect_clean_rogue(r);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 2 * kPiece);
    EXPECT_EQ(delta("tx_sink_avail"), 2u);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
}

// Case 4 for SinkAvails: more of them unused at once than the kernel
// accepts (its max_adverts) resets the connection.
TEST_F(Rogue, MoreSinkAvailsThanAdvertisedResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const unsigned max = r.peer_max_adverts();
    ASSERT_GE(max, 2u);
    std::vector<uint8_t> mem(size_t{max + 1} * 16 * kKiB);
    ibv_mr* mr =
        r.register_memory(mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(mr) << r.error();
    const uint64_t va = reinterpret_cast<uintptr_t>(mem.data());
    for (unsigned i = 0; i <= max; i++)
        ASSERT_TRUE(r.send_sink_avail(16 * kKiB, mr->rkey, va + uint64_t{i} * 16 * kKiB))
            << r.error();
    expect_kernel_aborted(r);
    expect_socket_reset(r, "recv() after one SinkAvail too many");
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    expect_clean_rogue(r);
}

// ---- 1, 2, 3: the kernel is the source (SrcAvail) ----------------------------

// The rogue gets the kernel's SrcAvail for a 256 KiB send.
struct Offer {
    std::shared_ptr<std::vector<uint8_t>> buf;
    std::unique_ptr<KernelCall> call;
    Message sa;
};

class RogueSource : public Rogue {
  protected:
    // send_flags: MSG_ZEROCOPY sets SO_ZEROCOPY first (at SOL_SDP where
    // the kernel refuses it, before 6.12).
    void offer(RoguePeer& r, Offer* o, size_t len = 256 * kKiB, int sndtimeo_ms = 0,
               int send_flags = 0)
    {
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        if (sndtimeo_ms != 0) {
            const timeval tv{sndtimeo_ms / 1000,
                             static_cast<suseconds_t>(sndtimeo_ms % 1000) * 1000};
            ASSERT_EQ(setsockopt(kfd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0)
                << strerror(errno);
        }
        if ((send_flags & MSG_ZEROCOPY) != 0) {
            const int one = 1;
            if (setsockopt(kfd_.get(), SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0)
                ASSERT_EQ(setsockopt(kfd_.get(), SOL_SDP, SDP_ZEROCOPY, &one, sizeof(one)), 0)
                    << strerror(errno);
        }
        o->buf = pattern_buffer(len, 8);
        o->call = std::make_unique<KernelCall>(kernel_send(o->buf, send_flags));
        const auto sa = r.wait_for(SDP_MID_SRC_AVAIL);
        ASSERT_TRUE(sa) << "no SrcAvail: " << r.describe();
        ASSERT_EQ(sa->zc_len, len);
        expect_no_kernel_address(*sa, "SrcAvail");
        o->sa = *sa;
    }

    // The kernel's SrcAvail, the rogue's SendSM, the kernel's SrcAvailCancel.
    void offer_then_send_sm(RoguePeer& r, Offer* o, int sndtimeo_ms = 0)
    {
        ASSERT_NO_FATAL_FAILURE(offer(r, o, 256 * kKiB, sndtimeo_ms));
        ASSERT_TRUE(r.send_control(SDP_MID_SEND_SM)) << r.error();
        EXPECT_TRUE(r.wait_for(SDP_MID_SRC_AVAIL_CANCEL, kDetectMs))
            << "no SrcAvailCancel after SendSM; " << r.describe();
    }

    // RDMA-read [vaddr + off, + len) of the offer: must fail with a remote
    // access error, and the kernel's send must fail.
    void read_outside(int64_t off, uint32_t len)
    {
        RoguePeer r;
        Offer o;
        ASSERT_NO_FATAL_FAILURE(offer(r, &o));
        std::vector<uint8_t> in(len);
        ibv_mr* mr = r.register_memory(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_TRUE(mr) << r.error();
        const int st = r.rdma_read(mr, in.data(), len, o.sa.vaddr + static_cast<uint64_t>(off),
                                   o.sa.rkey, kDetectMs);
        EXPECT_EQ(st, IBV_WC_REM_ACCESS_ERR) << "RDMA Read outside the offer";
        const std::string how =
            expect_call_reset(*o.call, r, "send() after an RDMA Read outside its SrcAvail");
        EXPECT_GE(delta("conn_err_transport") + delta("conn_err_reset"), 1u)
            << "no counter says why send() " << how;
        EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
        expect_clean_rogue(r);
    }

    // A bad RdmaRdCompl (after reading and reporting `read` bytes correctly)
    // resets.  send() returns what was reported before, as TCP returns a
    // short count; with nothing reported it fails with ECONNRESET.
    void bad_rd_compl(uint32_t read, uint32_t claim)
    {
        RoguePeer r;
        Offer o;
        ASSERT_NO_FATAL_FAILURE(offer(r, &o));
        std::vector<uint8_t> in(o.sa.zc_len);
        ibv_mr* mr = r.register_memory(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_TRUE(mr) << r.error();
        if (read != 0u) {
            ASSERT_EQ(r.rdma_read(mr, in.data(), read, o.sa.vaddr, o.sa.rkey), IBV_WC_SUCCESS);
            ASSERT_TRUE(r.send_rd_compl(read)) << r.error();
        }
        ASSERT_TRUE(r.send_rd_compl(claim)) << r.error();
        const std::string what = "send() after RdmaRdCompl(" + std::to_string(claim) + ")";
        if (read != 0u) {
            const auto res = o.call->wait(kDetectMs);
            ASSERT_TRUE(res) << what << ": " << r.describe();
            EXPECT_EQ(res->ret, static_cast<ssize_t>(read)) << what << ": " << describe_call(res);
            expect_kernel_aborted(r);
            expect_socket_reset(r, what);
        } else {
            expect_call_reset(*o.call, r, what);
            expect_kernel_aborted(r);
        }
        EXPECT_EQ(delta("conn_err_protocol"), 1u);
        EXPECT_EQ(delta("zcopy_tx_bytes"), read);
        expect_clean_rogue(r);
    }
};

// Case 1: an RDMA Read starting before the offered range.
TEST_F(RogueSource, ReadBeforeTheOfferFails)
{
    read_outside(-16, 32);
}

// Case 1: an RDMA Read running past vaddr + len.
TEST_F(RogueSource, ReadPastTheOfferFails)
{
    read_outside(256 * kKiB - 16, 32);
}

// Case 1: an RDMA Read entirely after the offer (the next page).
TEST_F(RogueSource, ReadAfterTheOfferFails)
{
    read_outside(256 * kKiB, 4096);
}

// Case 2: everything read and acknowledged, send() returned: the key is
// invalid, a second read with it fails and the connection is reset.
TEST_F(RogueSource, ReadAgainAfterRdmaRdComplFails)
{
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer(r, &o));
    std::vector<uint8_t> in(o.sa.zc_len);
    ibv_mr* mr = r.register_memory(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_EQ(r.rdma_read(mr, in.data(), o.sa.zc_len, o.sa.vaddr, o.sa.rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_rd_compl(o.sa.zc_len)) << r.error();
    const auto res = o.call->wait(10000);
    ASSERT_TRUE(res) << r.describe();
    ASSERT_EQ(res->ret, static_cast<ssize_t>(o.sa.zc_len)) << describe_call(res);
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 8), -1);
    // send() returned: the application may reuse its buffer.
    std::fill(o.buf->begin(), o.buf->end(), 0x5a);
    std::vector<uint8_t> again(4096, 0);
    const int st = r.rdma_read(mr, again.data(), 4096, o.sa.vaddr, o.sa.rkey, kDetectMs);
    EXPECT_EQ(st, IBV_WC_REM_ACCESS_ERR) << "the key of a finished send() still reads";
    EXPECT_NE(again[0], 0x5a) << "read the application's buffer after send() returned";
    expect_socket_reset(r, "after a read with an invalidated key");
    EXPECT_GE(delta("conn_err_transport") + delta("conn_err_reset"), 1u);
    expect_clean_rogue(r);
}

// Case 2 for MSG_ZEROCOPY: the send's completion notification gives the
// buffer back to the application; by then the key is invalid, a read with
// it fails and the connection is reset.
TEST_F(RogueSource, ReadAfterTheZerocopyNotificationFails)
{
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer(r, &o, 256 * kKiB, 0, MSG_ZEROCOPY));
    std::vector<uint8_t> in(o.sa.zc_len);
    ibv_mr* mr = r.register_memory(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_EQ(r.rdma_read(mr, in.data(), o.sa.zc_len, o.sa.vaddr, o.sa.rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_rd_compl(o.sa.zc_len)) << r.error();
    const auto res = o.call->wait(10000);
    ASSERT_TRUE(res) << r.describe();
    ASSERT_EQ(res->ret, static_cast<ssize_t>(o.sa.zc_len)) << describe_call(res);
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 8), -1);
    // The notification, as a MSG_ZEROCOPY program waits for it.
    pollfd p{kfd_.get(), 0, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1) << strerror(errno);
    ASSERT_NE(p.revents & POLLERR, 0);
    alignas(cmsghdr) char control[128] = {};
    msghdr m{};
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    ASSERT_EQ(recvmsg(kfd_.get(), &m, MSG_ERRQUEUE | MSG_DONTWAIT), 0) << strerror(errno);
    const cmsghdr* cm = CMSG_FIRSTHDR(&m);
    ASSERT_NE(cm, nullptr);
    sock_extended_err ee{};
    std::memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
    EXPECT_EQ(ee.ee_origin, SO_EE_ORIGIN_ZEROCOPY);
    EXPECT_EQ(ee.ee_info, 0u);
    EXPECT_EQ(ee.ee_data, 0u);
    EXPECT_EQ(ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0) << "the offer was read, not copied";
    // The buffer is the application's again.
    std::fill(o.buf->begin(), o.buf->end(), 0x5a);
    std::vector<uint8_t> again(4096, 0);
    const int st = r.rdma_read(mr, again.data(), 4096, o.sa.vaddr, o.sa.rkey, kDetectMs);
    EXPECT_EQ(st, IBV_WC_REM_ACCESS_ERR) << "the key of a notified send still reads";
    EXPECT_NE(again[0], 0x5a) << "read the application's buffer after its notification";
    expect_socket_reset(r, "after a read with an invalidated key");
    EXPECT_GE(delta("conn_err_transport") + delta("conn_err_reset"), 1u);
    expect_clean_rogue(r);
}

// Case 3: RdmaRdCompl for more than was offered.
TEST_F(RogueSource, RdmaRdComplMoreThanOfferedResets)
{
    bad_rd_compl(0, 256 * kKiB + 1);
}

// Case 3: RdmaRdCompl for zero bytes.
TEST_F(RogueSource, RdmaRdComplZeroResets)
{
    bad_rd_compl(0, 0);
}

// Case 3: half read and reported, then a completion for more than is left.
TEST_F(RogueSource, RdmaRdComplBeyondWhatIsLeftResets)
{
    bad_rd_compl(128 * kKiB, 128 * kKiB + 1);
}

// Case 2 when send() fails: a protocol violation ends the send with
// ECONNRESET, so the buffer is the application's again and the key must be
// dead too.  The rogue keeps the kernel's AbortConn from completing (it
// claims receive buffers it never posted: RNR, retried forever), so the
// kernel's QP stays up: only the invalidation protects the buffer.
TEST_F(RogueSource, KeyIsInvalidAfterSendFailed)
{
    Options opt;
    opt.rx_bufs = 1; // the SrcAvail takes it
    opt.claimed_bufs = 16;
    RoguePeer r(opt);
    r.set_repost(false);
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer(r, &o));
    ASSERT_EQ(r.posted(), 0u);
    ASSERT_TRUE(r.send_rd_compl(0)) << r.error(); // a violation: reset
    const auto res = o.call->wait(kDetectMs);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_EQ(res->err, ECONNRESET) << describe_call(res);
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    // send() returned: the buffer is the application's.
    std::fill(o.buf->begin(), o.buf->end(), 0x5a);
    std::vector<uint8_t> leak(4096, 0);
    ibv_mr* mr = r.register_memory(leak.data(), leak.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(mr) << r.error();
    const int st = r.rdma_read(mr, leak.data(), 4096, o.sa.vaddr, o.sa.rkey, kDetectMs);
    EXPECT_NE(st, IBV_WC_SUCCESS)
        << "the rogue read the application's buffer after send() returned ECONNRESET";
    EXPECT_NE(leak[0], 0x5a) << "and saw what the application wrote there afterwards";
    expect_clean_rogue(r);
}

// ---- 4, 5: the kernel is the sink of the rogue's SrcAvail --------------------

class RogueSink : public Rogue {
  protected:
    // A registered, remotely readable buffer of the rogue.
    struct Src {
        std::vector<uint8_t> mem;
        ibv_mr* mr = nullptr;
    };
    void make_src(RoguePeer& r, Src* s, size_t len = 128 * kKiB)
    {
        s->mem.assign(len, 0);
        for (size_t i = 0; i < len; i++)
            s->mem[i] = pattern(i, 9);
        s->mr = r.register_memory(s->mem.data(), s->mem.size(),
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        ASSERT_TRUE(s->mr) << r.error();
    }

    // A SrcAvail the kernel must reject, sent while a small recv() waits
    // (too small to advertise a SinkAvail): recv() fails with ECONNRESET.
    void rejected_offer(uint32_t len, uint64_t vaddr_off, std::optional<uint64_t> vaddr_abs,
                        const std::vector<uint8_t>& inline_payload = {})
    {
        RoguePeer r;
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        Src s;
        ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
        auto in = std::make_shared<std::vector<uint8_t>>(4096);
        KernelCall k = kernel_recv(in);
        EXPECT_FALSE(k.wait(100));
        const uint64_t vaddr =
            vaddr_abs ? *vaddr_abs : reinterpret_cast<uintptr_t>(s.mem.data()) + vaddr_off;
        ASSERT_TRUE(r.send_src_avail(len, s.mr->rkey, vaddr, inline_payload)) << r.error();
        expect_call_reset(k, r, "recv() after an impossible SrcAvail");
        expect_protocol_reset(r, "zcopy_rdma_reads");
    }
};

// Case 4: length 0 (the decoder rejects it).
TEST_F(RogueSink, SrcAvailOfZeroBytesResets)
{
    rejected_offer(0, 0, std::nullopt);
}

// Case 4: longer than the 64 MiB any SrcAvail may offer.
TEST_F(RogueSink, SrcAvailOver64MiBResets)
{
    rejected_offer((64u << 20) + 1, 0, std::nullopt);
}

// Case 4: vaddr + len wraps past 2^64.
TEST_F(RogueSink, SrcAvailWrappingTheAddressSpaceResets)
{
    rejected_offer(8192, 0, ~0ull - 4095);
}

// Case 4: inline payload after the SrcAvail header.
TEST_F(RogueSink, SrcAvailWithInlinePayloadResets)
{
    rejected_offer(64 * kKiB, 0, std::nullopt, std::vector<uint8_t>(100, 0x42));
}

// Case 4: more SrcAvails outstanding than the kernel accepts (its
// max_adverts); nobody reads: recv() is called only afterwards.
TEST_F(RogueSink, MoreSrcAvailsThanAdvertisedResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const unsigned max = r.peer_max_adverts();
    ASSERT_GE(max, 2u) << "the kernel queues several offers";
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s, size_t{max + 1} * 16 * kKiB));
    const uint64_t va = reinterpret_cast<uintptr_t>(s.mem.data());
    for (unsigned i = 0; i <= max; i++)
        ASSERT_TRUE(r.send_src_avail(16 * kKiB, s.mr->rkey, va + uint64_t{i} * 16 * kKiB))
            << r.error();
    expect_kernel_aborted(r);
    expect_socket_reset(r, "recv() after one SrcAvail too many");
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u) << "bytes of an aborted connection's offer were read";
    expect_clean_rogue(r);
}

// A source with its max_adverts of SrcAvails out: one recv() reads them
// all by RDMA Read, in stream order (the rogue's pieces lie in its memory
// in reverse), and the rogue gets RdmaRdCompl for every byte.
TEST_F(RogueSink, QueuedSrcAvailsAreReadInStreamOrder)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const unsigned n = r.peer_max_adverts();
    ASSERT_GE(n, 2u) << "the kernel queues several offers";
    constexpr size_t kPiece = 64 * kKiB;
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s, n * kPiece));
    for (unsigned k = 0; k < n; k++)
        for (size_t i = 0; i < kPiece; i++)
            s.mem[(n - 1 - k) * kPiece + i] = pattern(k * kPiece + i, 9);
    const uint64_t va = reinterpret_cast<uintptr_t>(s.mem.data());
    for (unsigned k = 0; k < n; k++)
        ASSERT_TRUE(r.send_src_avail(kPiece, s.mr->rkey, va + (n - 1 - k) * kPiece)) << r.error();
    auto in = std::make_shared<std::vector<uint8_t>>(n * kPiece, 0x33);
    KernelCall k = kernel_recv(in, MSG_WAITALL);
    uint64_t reported = 0;
    while (reported < n * kPiece) {
        const auto m = r.wait_for_any({SDP_MID_RDMA_RD_COMPL, SDP_MID_SEND_SM}, kDetectMs);
        ASSERT_TRUE(m) << "reported " << reported << " bytes read; " << r.describe();
        ASSERT_EQ(m->h.mid, SDP_MID_RDMA_RD_COMPL) << "an offer was given up; " << r.describe();
        reported += m->compl_len;
    }
    EXPECT_EQ(reported, n * kPiece);
    const auto res = k.wait(kDetectMs);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(n * kPiece)) << describe_call(res);
    EXPECT_EQ(mismatch(in->data(), in->size(), 0, 9), -1) << "the offers' bytes out of order";
    EXPECT_GE(delta("zcopy_rdma_reads"), n);
    EXPECT_EQ(delta("zcopy_rx_bytes"), n * kPiece);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
    expect_clean_rogue(r);
}

// A peek gives up the first of the queued offers and with it the ones
// behind it, even one the rogue sent after the kernel's SendSM: one
// SrcAvailCancel cancels them all, the kernel's SendSM answers it, and the
// bytes come by Data, in order.
TEST_F(RogueSink, GivingUpAnOfferGivesUpTheQueueBehindIt)
{
    SysctlOverride grace("zcopy_sink_wait_ms", "20000"); // the offers stay
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    ASSERT_GE(r.peer_max_adverts(), 3u) << "the kernel queues several offers";
    constexpr size_t kPiece = 16 * kKiB;
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s, 3 * kPiece));
    const uint64_t va = reinterpret_cast<uintptr_t>(s.mem.data());
    ASSERT_TRUE(r.send_src_avail(kPiece, s.mr->rkey, va)) << r.error();
    ASSERT_TRUE(r.send_src_avail(kPiece, s.mr->rkey, va + kPiece)) << r.error();
    pollfd pfd{kfd_.get(), POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, kDetectMs), 1) << "the offers do not make the socket readable";
    // The first offer makes it readable; the second may be a completion
    // behind it.
    int avail = -1;
    EXPECT_TRUE(eventually(
        [&] {
            return ioctl(kfd_.get(), FIONREAD, &avail) == 0 &&
                   avail == static_cast<int>(2 * kPiece);
        },
        5))
        << "FIONREAD counts every queued offer: " << avail;
    char peek[100];
    EXPECT_EQ(recv(kfd_.get(), peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    ASSERT_TRUE(r.wait_for(SDP_MID_SEND_SM, kDetectMs)) << "no SendSM; " << r.describe();
    // Sent before the rogue "saw" the SendSM: cancelled with the others.
    ASSERT_TRUE(r.send_src_avail(kPiece, s.mr->rkey, va + 2 * kPiece)) << r.error();
    ASSERT_TRUE(r.send_control(SDP_MID_SRC_AVAIL_CANCEL)) << r.error();
    ASSERT_TRUE(r.wait_for(SDP_MID_SEND_SM, kDetectMs))
        << "the cancel unanswered; " << r.describe();
    ASSERT_TRUE(r.send_data(s.mem.data(), s.mem.size())) << r.error();
    std::vector<uint8_t> got(3 * kPiece, 0x33);
    ASSERT_EQ(recv(kfd_.get(), got.data(), got.size(), MSG_WAITALL),
              static_cast<ssize_t>(got.size()))
        << strerror(errno);
    EXPECT_EQ(mismatch(got.data(), got.size(), 0, 9), -1);
    EXPECT_EQ(r.rx_count(SDP_MID_RDMA_RD_COMPL), 0u) << "a given-up offer was read";
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
    expect_clean_rogue(r);
}

// Case 4: Data overtaking the bytes of the rogue's own outstanding SrcAvail.
TEST_F(RogueSink, DataWhileSrcAvailOutstandingResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
    ASSERT_NE(s.mr, nullptr);
    ASSERT_TRUE(r.send_src_avail(64 * kKiB, s.mr->rkey, reinterpret_cast<uintptr_t>(s.mem.data())))
        << r.error();
    ASSERT_TRUE(r.send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(100, 0x42))) << r.error();
    expect_kernel_aborted(r);
    expect_socket_reset(r, "recv() after Data overtook a SrcAvail");
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u) << "bytes of an aborted connection's offer were read";
    expect_clean_rogue(r);
}

// As above, but the kernel's AbortConn cannot complete yet: the rogue claims
// receive buffers it has not posted (RNR, retried forever), so the kernel's
// QP stays up.  recv() must fail without reading the offer of a connection
// the kernel reset - and nothing it queued may land in the application's
// buffer after recv() returned, once the rogue posts its buffers.
TEST_F(RogueSink, OfferOfAResetConnectionIsNotRead)
{
    // An unread offer is otherwise given up (SendSM) after a grace period
    // (net.sdp.zcopy_sink_wait_ms): keep it, so recv() meets it.
    SysctlOverride grace("zcopy_sink_wait_ms", "20000");
    Options opt;
    opt.rx_bufs = 4;
    opt.initial_posted = 0;
    opt.claimed_bufs = 16;
    RoguePeer r(opt);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
    ASSERT_NE(s.mr, nullptr);
    ASSERT_TRUE(r.send_src_avail(64 * kKiB, s.mr->rkey, reinterpret_cast<uintptr_t>(s.mem.data())))
        << r.error();
    ASSERT_TRUE(r.send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(100, 0x42))) << r.error();
    EXPECT_EQ(wait_pollerr(kfd_.get(), kDetectMs) & POLLERR, POLLERR) << r.describe();
    auto in = std::make_shared<std::vector<uint8_t>>(64 * kKiB, 0x11);
    KernelCall k = kernel_recv(in);
    const auto res = k.wait(kDetectMs);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, -1) << "recv() on a reset connection: " << describe_call(res);
    EXPECT_EQ(res->err, ECONNRESET) << describe_call(res);
    EXPECT_EQ(delta("zcopy_rdma_reads"), 0u) << "the kernel RDMA-read a reset peer's offer";
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    // recv() returned: the buffer is the application's.  Now let the
    // kernel's send queue move (its AbortConn finds a buffer).
    std::fill(in->begin(), in->end(), 0x22);
    ASSERT_TRUE(r.post_receives()) << r.error();
    expect_kernel_aborted(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    size_t changed = 0;
    for (uint8_t b : *in)
        changed += b != 0x22 ? 1 : 0;
    EXPECT_EQ(changed, 0u) << "an RDMA Read the kernel queued wrote into the application's "
                              "buffer after recv() returned";
    expect_clean_rogue(r);
}

// Case 5: a SrcAvail whose rkey is not the rogue's: the kernel's RDMA Read
// fails; recv() fails with ECONNRESET within seconds, no warning.
TEST_F(RogueSink, SrcAvailWithBogusRkeyFailsTheRead)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
    auto in = std::make_shared<std::vector<uint8_t>>(128 * kKiB);
    ASSERT_TRUE(r.send_src_avail(128 * kKiB, s.mr->rkey ^ 0x00ffff00u,
                                 reinterpret_cast<uintptr_t>(s.mem.data())))
        << r.error();
    KernelCall k = kernel_recv(in);
    expect_call_reset(k, r, "recv() of an offer with a bogus rkey");
    EXPECT_GE(delta("zcopy_rdma_reads"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
    EXPECT_GE(delta("conn_err_transport"), 1u);
    expect_clean_rogue(r);
}

// Case 5, the address: a valid rkey, but the offer lies outside the memory
// it registered.
TEST_F(RogueSink, SrcAvailOutsideItsRegistrationFailsTheRead)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
    auto in = std::make_shared<std::vector<uint8_t>>(128 * kKiB);
    KernelCall k = kernel_recv(in);
    EXPECT_FALSE(k.wait(100));
    ASSERT_TRUE(r.send_src_avail(128 * kKiB, s.mr->rkey,
                                 reinterpret_cast<uintptr_t>(s.mem.data()) + 64 * kKiB))
        << r.error();
    expect_call_reset(k, r, "recv() of an offer outside the registration");
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
    EXPECT_GE(delta("conn_err_transport"), 1u);
    expect_clean_rogue(r);
}

// ---- 6: the kernel advertises a SinkAvail ------------------------------------

class RogueSinkAvail : public Rogue {
  protected:
    struct Advert {
        std::shared_ptr<std::vector<uint8_t>> buf;
        std::unique_ptr<KernelCall> call;
        Message sk;
    };
    // A blocking 256 KiB recv() with nothing queued: after its busy poll the
    // kernel advertises the buffer.
    void advert(RoguePeer& r, Advert* a, uint8_t fill = 0x11, int rcvtimeo_ms = 0)
    {
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        if (rcvtimeo_ms != 0) {
            const timeval tv{rcvtimeo_ms / 1000,
                             static_cast<suseconds_t>(rcvtimeo_ms % 1000) * 1000};
            ASSERT_EQ(setsockopt(kfd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0)
                << strerror(errno);
        }
        a->buf = std::make_shared<std::vector<uint8_t>>(256 * kKiB, fill);
        a->call = std::make_unique<KernelCall>(kernel_recv(a->buf));
        const auto sk = r.wait_for(SDP_MID_SINK_AVAIL);
        ASSERT_TRUE(sk) << "no SinkAvail: " << r.describe();
        ASSERT_EQ(sk->zc_len, a->buf->size());
        expect_no_kernel_address(*sk, "SinkAvail");
        a->sk = *sk;
    }

    void write_outside(int64_t off, uint32_t len)
    {
        RoguePeer r;
        Advert a;
        ASSERT_NO_FATAL_FAILURE(advert(r, &a));
        auto out = pattern_buffer(len, 10);
        ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
        ASSERT_TRUE(mr) << r.error();
        const int st = r.rdma_write(mr, out->data(), len, a.sk.vaddr + static_cast<uint64_t>(off),
                                    a.sk.rkey, kDetectMs);
        EXPECT_EQ(st, IBV_WC_REM_ACCESS_ERR) << "RDMA Write outside the SinkAvail";
        const std::string how =
            expect_call_reset(*a.call, r, "recv() after an RDMA Write outside its SinkAvail");
        EXPECT_GE(delta("conn_err_transport") + delta("conn_err_reset"), 1u)
            << "no counter says why recv() " << how;
        EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
        expect_clean_rogue(r);
    }

    // A message the advertisement's state does not allow resets.
    void bad_after_advert(const std::function<bool(RoguePeer&, const Advert&)>& violate,
                          const std::string& what)
    {
        RoguePeer r;
        Advert a;
        ASSERT_NO_FATAL_FAILURE(advert(r, &a));
        ASSERT_TRUE(violate(r, a)) << r.error();
        expect_call_reset(*a.call, r, "recv() after " + what);
        expect_protocol_reset(r, "zcopy_rx_bytes");
    }
};

// Case 6: an RDMA Write running past the advertised range.
TEST_F(RogueSinkAvail, WritePastTheAdvertisementFails)
{
    write_outside(256 * kKiB - 16, 32);
}

// Case 6: an RDMA Write starting before it.
TEST_F(RogueSinkAvail, WriteBeforeTheAdvertisementFails)
{
    write_outside(-16, 32);
}

// Case 6: RdmaWrCompl for more bytes than advertised (after writing all of
// them): the kernel must not return them.
TEST_F(RogueSinkAvail, RdmaWrComplMoreThanAdvertisedResets)
{
    bad_after_advert(
        [](RoguePeer& r, const Advert& a) {
            auto out = pattern_buffer(a.sk.zc_len, 11);
            ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
            if ((mr == nullptr) ||
                r.rdma_write(mr, out->data(), a.sk.zc_len, a.sk.vaddr, a.sk.rkey) != 0)
                return false;
            return r.send_wr_compl(a.sk.zc_len + 1);
        },
        "RdmaWrCompl(len + 1)");
}

// Case 6: RdmaWrCompl for zero bytes.
TEST_F(RogueSinkAvail, RdmaWrComplZeroResets)
{
    bad_after_advert([](RoguePeer& r, const Advert&) { return r.send_wr_compl(0); },
                     "RdmaWrCompl(0)");
}

// Case 6: SinkCancelAck although the kernel never cancelled.
TEST_F(RogueSinkAvail, SinkCancelAckWithoutCancelResets)
{
    bad_after_advert(
        [](RoguePeer& r, const Advert&) { return r.send_control(SDP_MID_SINK_CANCEL_ACK); },
        "SinkCancelAck without SinkAvailCancel");
}

// Case 6 when recv() fails: after a violation recv() returns ECONNRESET and
// the buffer is the application's again, so the advertised key must be
// dead.  The rogue keeps the kernel's AbortConn from completing (claimed,
// never posted receive buffers), so the kernel's QP stays up.
TEST_F(RogueSinkAvail, KeyIsInvalidAfterRecvFailed)
{
    Options opt;
    opt.rx_bufs = 1; // the SinkAvail takes it
    opt.claimed_bufs = 16;
    RoguePeer r(opt);
    r.set_repost(false);
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a, 0x11));
    ASSERT_EQ(r.posted(), 0u);
    ASSERT_TRUE(r.send_control(SDP_MID_SINK_CANCEL_ACK)) << r.error();
    const auto res = a.call->wait(kDetectMs);
    ASSERT_TRUE(res) << r.describe();
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_EQ(res->err, ECONNRESET) << describe_call(res);
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    // recv() returned: the rogue must no longer be able to write there.
    std::vector<uint8_t> junk(4096, 0xee);
    ibv_mr* mr = r.register_memory(junk.data(), junk.size(), 0);
    ASSERT_TRUE(mr) << r.error();
    const int st = r.rdma_write(mr, junk.data(), 4096, a.sk.vaddr, a.sk.rkey, kDetectMs);
    EXPECT_NE(st, IBV_WC_SUCCESS)
        << "the rogue wrote into the application's buffer after recv() returned ECONNRESET";
    size_t changed = 0;
    for (uint8_t b : *a.buf)
        changed += b != 0x11 ? 1 : 0;
    EXPECT_EQ(changed, 0u) << "bytes of the application's buffer changed after recv() returned";
    expect_clean_rogue(r);
}

// ---- F3: lying RdmaWrCompl, and no SinkAvail for kernel memory ---------------

// F3, user memory: RdmaWrCompl for the whole advertisement without any RDMA
// Write.  Nothing can prove a write happened (RDMA Write gives the sink no
// completion), so recv() returns the claimed bytes; what it must never do
// is return bytes from anywhere but the application's own buffer: every
// byte is what the application had there (0x11), i.e. no kernel memory and
// no memory of anybody else (Documentation/security.md, F3).  Kernel memory
// is never advertised (SpliceFromTheSocketNeverAdvertisesKernelMemory).
TEST_F(RogueSinkAvail, RdmaWrComplWithoutAWriteReturnsOnlyTheApplicationsOwnBytes)
{
    RoguePeer r;
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a, 0x11));
    ASSERT_TRUE(r.send_wr_compl(a.sk.zc_len)) << r.error();
    const auto res = bounded(*a.call, r, kDetectMs, "recv() after a lying RdmaWrCompl");
    ASSERT_TRUE(res);
    if (res->ret == -1) {
        EXPECT_EQ(res->err, ECONNRESET) << describe_call(res);
    } else {
        EXPECT_EQ(res->ret, static_cast<ssize_t>(a.sk.zc_len)) << describe_call(res);
        size_t foreign = 0;
        for (ssize_t i = 0; i < res->ret; i++)
            foreign += (*a.buf)[static_cast<size_t>(i)] != 0x11 ? 1 : 0;
        EXPECT_EQ(foreign, 0u) << "recv() returned bytes that were neither written by the peer "
                                  "nor the application's own";
    }
    expect_clean_rogue(r);
}

// F3, user memory: 100 KiB written, RdmaWrCompl claims all 256 KiB.  recv()
// returns the written bytes, then (the claim) the application's own bytes
// that were there before, never anything else; or the connection resets.
TEST_F(RogueSinkAvail, RdmaWrComplClaimingMoreThanWrittenReturnsOnlyKnownBytes)
{
    RoguePeer r;
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a, 0x11));
    constexpr uint32_t kWritten = 100 * kKiB;
    auto out = pattern_buffer(kWritten, 12);
    ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_EQ(r.rdma_write(mr, out->data(), kWritten, a.sk.vaddr, a.sk.rkey), IBV_WC_SUCCESS);
    ASSERT_TRUE(r.send_wr_compl(a.sk.zc_len)) << r.error();
    const auto res = bounded(*a.call, r, kDetectMs, "recv() after an RdmaWrCompl claiming more");
    ASSERT_TRUE(res);
    if (res->ret == -1) {
        EXPECT_EQ(res->err, ECONNRESET) << describe_call(res);
    } else {
        EXPECT_GT(res->ret, 0) << describe_call(res);
        const size_t got = static_cast<size_t>(std::max<ssize_t>(res->ret, 0));
        EXPECT_EQ(mismatch(a.buf->data(), std::min(got, static_cast<size_t>(kWritten)), 0, 12), -1)
            << "the bytes the peer wrote";
        size_t foreign = 0;
        for (size_t i = kWritten; i < got; i++)
            foreign += (*a.buf)[i] != 0x11 ? 1 : 0;
        EXPECT_EQ(foreign, 0u) << "beyond what was written: not the application's own bytes";
    }
    expect_clean_rogue(r);
}

// F3, kernel memory: splice() from the socket into a pipe receives into
// pages the kernel allocated (on >= 6.5 copy_splice_read()'s fresh pages).
// With the threshold lowered so that the pipe would qualify, the kernel
// must never advertise them (SinkAvail): an RdmaWrCompl cannot be checked,
// and a lie would give the pipe uninitialised kernel memory.  The rogue
// waits before each piece so that the splice reader sleeps (where it would
// advertise), answers any SinkAvail with the lie, sends its bytes by Data
// and, for the last piece, by a SrcAvail (an RDMA Read into the pipe's
// pages completes only once the bytes landed: allowed); the pipe must get
// exactly the rogue's bytes.
TEST_F(Rogue, SpliceFromTheSocketNeverAdvertisesKernelMemory)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const int thresh = 4096;
    ASSERT_EQ(setsockopt(kfd_.get(), SOL_SDP, SDP_ZCOPY_THRESH, &thresh, sizeof(thresh)), 0)
        << strerror(errno);
    int p[2];
    ASSERT_EQ(pipe(p), 0) << strerror(errno);
    Fd rd(p[0]), wr(p[1]);
    ASSERT_GE(fcntl(wr.get(), F_SETPIPE_SZ, 1 << 20), 1 << 20) << strerror(errno);
    constexpr size_t kPiece = 64 * kKiB;
    constexpr int kDataPieces = 4;
    constexpr size_t kTotal = kPiece * (kDataPieces + 1);
    const int fd = kfd_.get();
    const int wfd = wr.get();
    KernelCall k([fd, wfd]() -> ssize_t {
        size_t got = 0;
        while (got < kTotal) {
            const ssize_t n = splice(fd, nullptr, wfd, nullptr, 256 * kKiB, 0);
            if (n <= 0)
                return n < 0 ? -1 : static_cast<ssize_t>(got);
            got += static_cast<size_t>(n);
        }
        return static_cast<ssize_t>(got);
    });
    const auto data = pattern_vector(kTotal, 13);
    unsigned long lies = 0;
    auto answer_sink_avails = [&] {
        for (;;) {
            const auto sk = r.wait_for(SDP_MID_SINK_AVAIL, 0);
            if (!sk)
                return;
            lies++;
            ASSERT_TRUE(r.send_wr_compl(sk->zc_len)) << r.error();
        }
    };
    for (int i = 0; i < kDataPieces; i++) {
        r.pump_until([] { return false; }, 300); // the reader goes to sleep
        ASSERT_NO_FATAL_FAILURE(answer_sink_avails());
        ASSERT_TRUE(r.send_data(data.data() + i * kPiece, kPiece)) << r.error();
    }
    // The last piece by SrcAvail: read (RdmaRdCompl) or given up (SendSM,
    // then the rest by Data).
    r.pump_until([] { return false; }, 300);
    ASSERT_NO_FATAL_FAILURE(answer_sink_avails());
    std::vector<uint8_t> src(data.end() - kPiece, data.end());
    ibv_mr* mr = r.register_memory(src.data(), src.size(), IBV_ACCESS_REMOTE_READ);
    ASSERT_TRUE(mr) << r.error();
    ASSERT_TRUE(r.send_src_avail(kPiece, mr->rkey, reinterpret_cast<uintptr_t>(src.data())))
        << r.error();
    uint32_t was_read = 0;
    while (was_read < kPiece) {
        const auto m = r.wait_for_any({SDP_MID_RDMA_RD_COMPL, SDP_MID_SEND_SM}, 10000);
        ASSERT_TRUE(m) << "no RdmaRdCompl or SendSM for the SrcAvail: " << r.describe();
        if (m->h.mid == SDP_MID_RDMA_RD_COMPL) {
            was_read += m->compl_len;
            continue;
        }
        ASSERT_TRUE(r.send_data(src.data() + was_read, kPiece - was_read)) << r.error();
        break;
    }
    const auto res = bounded(k, r, 20000, "splice()");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->ret, static_cast<ssize_t>(kTotal)) << describe_call(res);
    std::vector<uint8_t> got(kTotal + 256 * kKiB);
    size_t n = 0;
    ASSERT_EQ(fcntl(rd.get(), F_SETFL, O_NONBLOCK), 0);
    for (ssize_t m = 0; (m = read(rd.get(), got.data() + n, got.size() - n)) > 0;)
        n += static_cast<size_t>(m);
    EXPECT_EQ(n, kTotal) << "bytes in the pipe";
    EXPECT_EQ(mismatch(got.data(), std::min(n, kTotal), 0, 13), -1)
        << "the pipe holds bytes the rogue never sent";
    EXPECT_EQ(lies, 0u) << "the kernel advertised kernel memory (SinkAvail) during splice()";
    EXPECT_EQ(r.rx_count(SDP_MID_SINK_AVAIL), 0u);
    EXPECT_EQ(delta("tx_sink_avail"), 0u);
    expect_clean_rogue(r);
}

// ---- F9: nothing is delivered after a reset ----------------------------------

class RogueAfterReset : public RogueSink {
  protected:
    // A violation resets the connection; the rogue keeps the kernel's
    // AbortConn from completing (it claims receive buffers it has not
    // posted), so the RC connection stays up, and sends more: Data with the
    // mseq the kernel did not account for the violating message, Data with
    // the next mseq, a new SrcAvail.  recv() reports ECONNRESET once and EOF
    // after that; none of those bytes reaches the application, the new
    // offer is never read.
    void nothing_after(const std::function<bool(RoguePeer&, const Src&)>& violate,
                       const std::string& what)
    {
        SysctlOverride grace("zcopy_sink_wait_ms", "20000");
        Options opt;
        opt.rx_bufs = 4;
        opt.initial_posted = 0;
        opt.claimed_bufs = 16;
        RoguePeer r(opt);
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        Src s;
        ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
        ASSERT_TRUE(violate(r, s)) << r.error();
        const uint32_t bad_mseq = r.next_tx_mseq() - 1;
        ASSERT_EQ(wait_pollerr(kfd_.get(), kDetectMs) & POLLERR, POLLERR)
            << what << ": no POLLERR; " << r.describe();
        const auto after = pattern_vector(300, 14);
        ASSERT_TRUE(r.send_raw(SDP_MID_DATA, {}, {after.begin(), after.begin() + 100}, 0,
                               std::nullopt, bad_mseq))
            << r.error();
        ASSERT_TRUE(r.send_raw(SDP_MID_DATA, {}, {after.begin() + 100, after.end()})) << r.error();
        ASSERT_TRUE(r.send_src_avail(64 * kKiB, s.mr->rkey,
                                     reinterpret_cast<uintptr_t>(s.mem.data()) + 64 * kKiB))
            << r.error();
        r.pump_until([] { return false; }, 300);
        auto in = std::make_shared<std::vector<uint8_t>>(128 * kKiB, 0x33);
        KernelCall k = kernel_recv(in);
        const auto res = k.wait(kDetectMs);
        ASSERT_TRUE(res) << what << ": recv() blocks on a reset connection; " << r.describe();
        EXPECT_EQ(res->ret, -1) << what << ": recv() #1: " << describe_call(res);
        EXPECT_EQ(res->err, ECONNRESET) << what << ": recv() #1: " << describe_call(res);
        ASSERT_NO_FATAL_FAILURE(expect_eof_after_reset(what, 3));
        size_t changed = 0;
        for (uint8_t b : *in)
            changed += b != 0x33 ? 1 : 0;
        EXPECT_EQ(changed, 0u) << what << ": bytes landed in the application's buffer";
        EXPECT_EQ(delta("zcopy_rdma_reads"), 0u) << what << ": the kernel read an offer";
        EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
        EXPECT_EQ(delta("conn_err_protocol"), 1u);
        // Let the kernel's AbortConn through; the connection ends.
        ASSERT_TRUE(r.post_receives()) << r.error();
        EXPECT_TRUE(r.pump_until([&] { return r.disconnected() || r.qp_failed(); }, 15000))
            << what << ": the RC connection did not end; " << r.describe();
        expect_clean_rogue(r);
    }
};

// F9 after the violation of DataWhileSrcAvailOutstandingResets.
TEST_F(RogueAfterReset, NothingIsDeliveredAfterDataOvertookASrcAvail)
{
    nothing_after(
        [](RoguePeer& r, const Src& s) {
            return r.send_src_avail(64 * kKiB, s.mr->rkey,
                                    reinterpret_cast<uintptr_t>(s.mem.data())) &&
                   r.send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(100, 0x42));
        },
        "Data overtaking a SrcAvail");
}

// F9 after an unknown mid.
TEST_F(RogueAfterReset, NothingIsDeliveredAfterAnUnknownMid)
{
    nothing_after([](RoguePeer& r, const Src&) { return r.send_raw(0x42, {}); }, "mid 0x42");
}

// F9 after a Data whose BSDH length is not the SEND's length, shorter or
// longer (the review's BSDH abuse at VM level).
TEST_F(RogueAfterReset, NothingIsDeliveredAfterABsdhLengthShorterThanTheSend)
{
    nothing_after(
        [](RoguePeer& r, const Src&) {
            return r.send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(100, 0x5a), 0,
                              SDP_BSDH_SIZE + 50);
        },
        "BSDH len 66 in a SEND of 116 bytes");
}

TEST_F(RogueAfterReset, NothingIsDeliveredAfterABsdhLengthLongerThanTheSend)
{
    nothing_after(
        [](RoguePeer& r, const Src&) {
            return r.send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(100, 0x5a), 0,
                              SDP_BSDH_SIZE + 1000);
        },
        "BSDH len 1016 in a SEND of 116 bytes");
}

// ---- F10: non-blocking receives over a rogue SrcAvail never sleep ----------------

class RogueNonBlocking : public RogueSink {
  protected:
    // A non-blocking recv() with the rogue's offer (64 KiB of pattern 9) the
    // next thing in the stream and the rogue silent: it returns well under
    // a second, EAGAIN or bytes of the offer.  Returns what it returned.
    ssize_t nonblocking_recv(int flags, const std::string& what)
    {
        auto in = std::make_shared<std::vector<uint8_t>>(64 * kKiB, 0x33);
        const auto t0 = std::chrono::steady_clock::now();
        KernelCall k = kernel_recv(in, flags);
        const auto res = k.wait(15000);
        const auto ms = ms_since(t0);
        EXPECT_TRUE(res) << what << ": still blocked after 15 s";
        if (!res)
            return -2;
        EXPECT_LT(ms, 1000) << what << " slept " << ms << " ms: " << describe_call(res);
        if (res->ret > 0) {
            EXPECT_EQ(mismatch(in->data(), static_cast<size_t>(res->ret), 0, 9), -1) << what;
        } else {
            EXPECT_EQ(res->ret, -1) << what << ": " << describe_call(res);
            EXPECT_EQ(res->err, EAGAIN) << what << ": " << describe_call(res);
        }
        return res->ret;
    }

    void offer_64k(RoguePeer& r, Src* s)
    {
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        ASSERT_NO_FATAL_FAILURE(make_src(r, s, 64 * kKiB));
        ASSERT_TRUE(
            r.send_src_avail(64 * kKiB, s->mr->rkey, reinterpret_cast<uintptr_t>(s->mem.data())))
            << r.error();
        pollfd pfd{kfd_.get(), POLLIN, 0};
        ASSERT_EQ(poll(&pfd, 1, kDetectMs), 1) << "the offer does not make the socket readable";
    }
};

// F10: MSG_DONTWAIT | MSG_PEEK gives the offer up (SendSM) and must not then
// wait for the bytes; neither must a second one, nor a plain MSG_DONTWAIT.
// Then the rogue sends the bytes by Data as the protocol asks, and they
// arrive intact.
TEST_F(RogueNonBlocking, PeekOverAnOutstandingOfferReturnsAtOnce)
{
    SysctlOverride grace("zcopy_sink_wait_ms", "20000"); // the offer stays
    RoguePeer r;
    Src s;
    ASSERT_NO_FATAL_FAILURE(offer_64k(r, &s));
    nonblocking_recv(MSG_DONTWAIT | MSG_PEEK, "recv(MSG_DONTWAIT | MSG_PEEK) over an offer");
    nonblocking_recv(MSG_DONTWAIT | MSG_PEEK, "a second recv(MSG_DONTWAIT | MSG_PEEK)");
    const ssize_t got = nonblocking_recv(MSG_DONTWAIT, "recv(MSG_DONTWAIT) after the peek");
    ASSERT_GE(got, -1);
    const size_t taken = got > 0 ? static_cast<size_t>(got) : 0;
    if (taken < s.mem.size()) {
        ASSERT_TRUE(r.wait_for(SDP_MID_SEND_SM))
            << "the peek did not give the offer up; " << r.describe();
        ASSERT_TRUE(r.send_data(s.mem.data() + taken, s.mem.size() - taken)) << r.error();
        std::vector<uint8_t> rest(s.mem.size() - taken);
        ASSERT_EQ(recv(kfd_.get(), rest.data(), rest.size(), MSG_WAITALL),
                  static_cast<ssize_t>(rest.size()))
            << strerror(errno);
        EXPECT_EQ(mismatch(rest.data(), rest.size(), taken, 9), -1);
    }
    expect_clean_rogue(r);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
}

// F10: MSG_DONTWAIT over an offer: read at once by RDMA Read, or EAGAIN.
TEST_F(RogueNonBlocking, DontwaitOverAnOutstandingOfferReturnsAtOnce)
{
    SysctlOverride grace("zcopy_sink_wait_ms", "20000");
    RoguePeer r;
    Src s;
    ASSERT_NO_FATAL_FAILURE(offer_64k(r, &s));
    nonblocking_recv(MSG_DONTWAIT, "recv(MSG_DONTWAIT) over an offer");
    expect_clean_rogue(r);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
}

// F10: O_NONBLOCK recv() over an offer that cannot be registered (the
// registration-failure knob): given up for bcopy, and then no sleep.
TEST_F(RogueNonBlocking, NonblockingRecvOfAnOfferThatCannotBeRegisteredReturnsAtOnce)
{
    SysctlOverride grace("zcopy_sink_wait_ms", "20000");
    SysctlOverride fail_reg("zcopy_fail_reg", "1");
    RoguePeer r;
    Src s;
    ASSERT_NO_FATAL_FAILURE(offer_64k(r, &s));
    ASSERT_EQ(fcntl(kfd_.get(), F_SETFL, fcntl(kfd_.get(), F_GETFL) | O_NONBLOCK), 0);
    nonblocking_recv(0, "O_NONBLOCK recv() over an offer that cannot be registered");
    nonblocking_recv(0, "a second O_NONBLOCK recv()");
    expect_clean_rogue(r);
}

// ---- F11: cancels the rogue never answers -------------------------------------------

constexpr int kCancelMs = 1000;
// What the kernel may take beyond zcopy_cancel_ms to give up and return.
constexpr int kCancelSlackMs = 3000;

// F11: after SendSM the kernel cancels its SrcAvail; the rogue answers the
// cancel only 3 zcopy_cancel_ms later (a live peer slow to grant the credit
// for the answer).  Like a TCP sender facing a closed window, send() waits
// (the send watch probes the peer meanwhile), then sends the rest by bcopy:
// nothing is reset.  A bound of zcopy_cancel_ms from the cancel reset such
// connections under loss.
TEST_F(RogueSource, SendSmThenASlowAnswerKeepsTheConnection)
{
    SysctlOverride cancel("zcopy_cancel_ms", std::to_string(kCancelMs));
    SysctlOverride stall("tx_stall_ms", "1000");
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer_then_send_sm(r, &o));
    r.pump_until([] { return false; }, 3 * kCancelMs);
    EXPECT_FALSE(o.call->wait(0)) << "send() returned before the cancel was answered: "
                                  << describe_call(o.call->wait(0));
    EXPECT_EQ(r.rx_count(SDP_MID_ABORT_CONN), 0u) << r.describe();
    ASSERT_TRUE(r.send_control(SDP_MID_SEND_SM)) << r.error(); // the answer
    std::vector<uint8_t> got(o.buf->size());
    ASSERT_TRUE(r.recv_data(got.data(), got.size(), 2 * kDetectMs))
        << "the rest did not come by bcopy; " << r.describe();
    EXPECT_EQ(mismatch(got.data(), got.size(), 0, 8), -1);
    const auto res = o.call->wait(kDetectMs);
    ASSERT_TRUE(res) << "send() still blocked after its bytes went; " << r.describe();
    EXPECT_EQ(res->ret, static_cast<ssize_t>(o.buf->size())) << describe_call(res);
    EXPECT_EQ(delta("zcopy_timeouts"), 0u);
    EXPECT_EQ(delta("conn_err_timeout"), 0u);
    EXPECT_GE(delta("persist_probes"), 1u) << "the peer was not probed during the wait";
    expect_clean_rogue(r);
}

// F11: SendSM, then the cancel is never answered: the wait ends as a send's
// does, at SO_SNDTIMEO (or a signal), and then waits zcopy_cancel_ms more
// for the answer before resetting the connection.
TEST_F(RogueSource, SendSmThenNoAnswerEndsAtTheSendTimeout)
{
    constexpr int kSndTimeoMs = 3 * kCancelMs;
    SysctlOverride cancel("zcopy_cancel_ms", std::to_string(kCancelMs));
    RoguePeer r;
    Offer o;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(offer_then_send_sm(r, &o, kSndTimeoMs));
    const auto res =
        bounded(*o.call, r, kSndTimeoMs + kCancelMs + kCancelSlackMs, "send() after SendSM");
    ASSERT_TRUE(res);
    EXPECT_GE(ms_since(t0), kSndTimeoMs - 100) << "ended before SO_SNDTIMEO";
    EXPECT_LE(ms_since(t0), kSndTimeoMs + kCancelMs + kCancelSlackMs + 200);
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_TRUE(res->err == EAGAIN || res->err == ECONNRESET) << describe_call(res);
    expect_kernel_aborted(r);
    EXPECT_EQ(delta("zcopy_timeouts"), 1u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    expect_clean_rogue(r);
}

// F11: SendSM, then the peer dies before answering the cancel: the send
// watch finds it dead and the send fails, with no send timeout.  Which
// way depends on whether our cancel was on the wire before the peer died:
// its send completed, and the watch's probe (persist_probes) fails; or it
// never completes, and the watch ends the stalled send itself (seen on
// the debug kernel).  Either is a timeout; the old code's was a reset
// after zcopy_cancel_ms.
TEST_F(RogueSource, SendSmThenThePeerDiesEndsTheSend)
{
    SysctlOverride stall("tx_stall_ms", "1000");
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer_then_send_sm(r, &o));
    ASSERT_TRUE(r.kill_qp()) << r.error();
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kLimitMs = 2 * 1000 + 8000; // as for the persist probe
    const auto res = bounded(*o.call, r, kLimitMs, "send() after SendSM, the peer dead");
    ASSERT_TRUE(res);
    EXPECT_LE(ms_since(t0), kLimitMs + 200);
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_EQ(res->err, ETIMEDOUT) << describe_call(res);
    EXPECT_GE(delta("conn_err_timeout"), 1u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
}

// F11: SO_SNDTIMEO makes the kernel cancel its SrcAvail; the rogue never
// answers the cancel.
TEST_F(RogueSource, SendTimeoutCancelNeverAnsweredIsBounded)
{
    SysctlOverride cancel("zcopy_cancel_ms", std::to_string(kCancelMs));
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer(r, &o, 256 * kKiB, 500));
    const auto c = r.wait_for(SDP_MID_SRC_AVAIL_CANCEL, kDetectMs);
    ASSERT_TRUE(c) << "no SrcAvailCancel after SO_SNDTIMEO; " << r.describe();
    const auto t0 = std::chrono::steady_clock::now();
    const auto res = bounded(*o.call, r, kCancelMs + kCancelSlackMs, "send() with SO_SNDTIMEO");
    ASSERT_TRUE(res);
    EXPECT_LE(ms_since(t0), kCancelMs + kCancelSlackMs + 200);
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_TRUE(res->err == EAGAIN || res->err == ECONNRESET) << describe_call(res);
    expect_kernel_aborted(r);
    EXPECT_EQ(delta("zcopy_timeouts"), 1u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    expect_clean_rogue(r);
}

// F11: SO_RCVTIMEO makes the kernel cancel its SinkAvail; the rogue never
// answers (no SinkCancelAck).  The buffer is the application's again when
// recv() returns: unchanged, and the key dead.
TEST_F(RogueSinkAvail, RecvTimeoutCancelNeverAnsweredIsBounded)
{
    SysctlOverride cancel("zcopy_cancel_ms", std::to_string(kCancelMs));
    RoguePeer r;
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a, 0x11, 500));
    const auto c = r.wait_for(SDP_MID_SINK_AVAIL_CANCEL, kDetectMs);
    ASSERT_TRUE(c) << "no SinkAvailCancel after SO_RCVTIMEO; " << r.describe();
    const auto t0 = std::chrono::steady_clock::now();
    const auto res = bounded(*a.call, r, kCancelMs + kCancelSlackMs, "recv() with SO_RCVTIMEO");
    ASSERT_TRUE(res);
    EXPECT_LE(ms_since(t0), kCancelMs + kCancelSlackMs + 200);
    EXPECT_EQ(res->ret, -1) << describe_call(res);
    EXPECT_TRUE(res->err == EAGAIN || res->err == ECONNRESET) << describe_call(res);
    expect_kernel_aborted(r);
    std::vector<uint8_t> junk(4096, 0xee);
    ibv_mr* mr = r.register_memory(junk.data(), junk.size(), 0);
    ASSERT_TRUE(mr) << r.error();
    EXPECT_NE(r.rdma_write(mr, junk.data(), 4096, a.sk.vaddr, a.sk.rkey, kDetectMs),
              IBV_WC_SUCCESS);
    size_t changed = 0;
    for (uint8_t b : *a.buf)
        changed += b != 0x11 ? 1 : 0;
    EXPECT_EQ(changed, 0u);
    EXPECT_EQ(delta("zcopy_timeouts"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
    expect_clean_rogue(r);
}

// ---- F12: keepalive without credits -----------------------------------------------

// 1000 bytes (pattern `seed`) sent while the rogue grants no credit: the
// send() returns at once, the bytes wait in the socket, as TCP buffers them.
void send_without_credits(int fd, uint64_t seed)
{
    const auto out = pattern_buffer(1000, seed);
    KernelCall s([fd, out] { return send(fd, out->data(), out->size(), MSG_NOSIGNAL); });
    const auto sres = s.wait(2000);
    ASSERT_TRUE(sres) << "a 1000-byte send() blocks without credits (TCP would buffer it)";
    EXPECT_EQ(sres->ret, 1000) << describe_call(sres);
}

// F12: the rogue never grants the kernel a credit (bufs 0 in its Hello and
// nothing after), the kernel has data queued, and then the rogue dies
// without a word (its QP stops answering: no ACK, no DREQ).  SO_KEEPALIVE
// with idle 1 s, interval 1 s, 2 probes must report ETIMEDOUT within
// idle + count * interval and a few seconds (the RC retries of a probe).
TEST_F(Rogue, KeepaliveDetectsADeadPeerThatGrantedNoCredits)
{
    Options opt;
    opt.claimed_bufs = 0;
    RoguePeer r(opt);
    r.set_auto_credit_updates(false);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const int fd = kfd_.get();
    ASSERT_NO_FATAL_FAILURE(send_without_credits(fd, 15));
    const int one = 1, idle = 1, intvl = 1, cnt = 2;
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0) << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), 0) << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)), 0)
        << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)), 0) << strerror(errno);
    EXPECT_EQ(r.tx_credits(), r.peer_hello_bufs()) << "the rogue sent something";
    ASSERT_TRUE(r.kill_qp()) << r.error();
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kLimitMs = (1 + 2 * 1) * 1000 + 8000;
    const short ev = wait_pollerr(fd, kLimitMs);
    EXPECT_TRUE(ev & POLLERR) << "keepalive did not end the connection " << kLimitMs
                              << " ms after the peer died (revents 0x" << std::hex << ev << ")";
    if ((ev & POLLERR) != 0) {
        auto buf = std::make_shared<std::vector<uint8_t>>(4096);
        KernelCall rc = kernel_recv(buf);
        const auto res = rc.wait(kDetectMs);
        ASSERT_TRUE(res) << "recv() blocks on a timed-out socket";
        EXPECT_EQ(res->ret, -1) << describe_call(res);
        EXPECT_EQ(res->err, ETIMEDOUT) << describe_call(res);
    }
    EXPECT_LE(ms_since(t0), kLimitMs + 100);
}

// F12, the other half: a peer that is alive but grants no credits (a reader
// that stopped reading) keeps its connection, as TCP's window probes keep
// one: the keepalive probe (a zero-length RDMA Write) needs no credit and
// the rogue's HCA answers it.  Once the rogue grants credits, the queued
// bytes arrive.
TEST_F(Rogue, KeepaliveKeepsALivePeerThatGrantsNoCredits)
{
    Options opt;
    opt.claimed_bufs = 0;
    RoguePeer r(opt);
    r.set_auto_credit_updates(false);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const int fd = kfd_.get();
    ASSERT_NO_FATAL_FAILURE(send_without_credits(fd, 15));
    const int one = 1, idle = 1, intvl = 1, cnt = 2;
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0) << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), 0) << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)), 0)
        << strerror(errno);
    ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)), 0) << strerror(errno);
    // Three times idle + count * interval: a probe that went unanswered
    // would have ended the connection long before.
    constexpr int kWaitMs = 3 * (1 + 2 * 1) * 1000;
    const short ev = wait_pollerr(fd, kWaitMs);
    EXPECT_FALSE(ev & (POLLERR | POLLHUP))
        << "keepalive ended a connection whose peer is alive (revents 0x" << std::hex << ev << ")";
    EXPECT_GE(delta("keepalive_probes"), 3u) << "no probes went out without credits";
    EXPECT_EQ(delta("conn_err_timeout"), 0u);
    ASSERT_TRUE(r.post_receives()) << r.error();
    r.set_claimed_bufs(16);
    ASSERT_TRUE(r.send_credit_update()) << r.error();
    std::vector<uint8_t> in(1000);
    ASSERT_TRUE(r.recv_data(in.data(), in.size())) << r.error();
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 15), -1);
    expect_clean_rogue(r);
}

// ---- F12b: a sender waiting for credits probes without keepalive -------------------

// F12b: as F12 but without SO_KEEPALIVE.  A sender whose bytes wait for
// credits probes the peer on its own, as TCP's persist timer probes a zero
// window: a peer that died without a word (or reset the connection while
// the link was down, its CM disconnect lost) must not leave it waiting for
// ever.  The probe goes unanswered; the send-progress watch (tx_stall_ms,
// 1 s here) ends the connection within two periods.
TEST_F(Rogue, PersistProbeDetectsADeadPeerThatGrantedNoCredits)
{
    SysctlOverride stall("tx_stall_ms", "1000");
    Options opt;
    opt.claimed_bufs = 0;
    RoguePeer r(opt);
    r.set_auto_credit_updates(false);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const int fd = kfd_.get();
    ASSERT_NO_FATAL_FAILURE(send_without_credits(fd, 16));
    ASSERT_TRUE(r.kill_qp()) << r.error();
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kLimitMs = 2 * 1000 + 8000;
    const short ev = wait_pollerr(fd, kLimitMs);
    EXPECT_TRUE(ev & POLLERR) << "nothing ended the connection " << kLimitMs
                              << " ms after the peer died with our bytes waiting for credits"
                              << " (revents 0x" << std::hex << ev << ")";
    if ((ev & POLLERR) != 0) {
        auto buf = std::make_shared<std::vector<uint8_t>>(4096);
        KernelCall rc = kernel_recv(buf);
        const auto res = rc.wait(kDetectMs);
        ASSERT_TRUE(res) << "recv() blocks on a timed-out socket";
        EXPECT_EQ(res->ret, -1) << describe_call(res);
        EXPECT_EQ(res->err, ETIMEDOUT) << describe_call(res);
    }
    EXPECT_LE(ms_since(t0), kLimitMs + 100);
    EXPECT_GE(delta("persist_probes"), 1u);
    EXPECT_EQ(delta("keepalive_probes"), 0u);
}

// F12b, the other half: a live peer that grants no credits answers every
// probe, so the connection stays however long it waits, and the bytes
// arrive once the peer grants credits.
TEST_F(Rogue, PersistProbesKeepALivePeerThatGrantsNoCredits)
{
    SysctlOverride stall("tx_stall_ms", "1000");
    Options opt;
    opt.claimed_bufs = 0;
    RoguePeer r(opt);
    r.set_auto_credit_updates(false);
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    const int fd = kfd_.get();
    ASSERT_NO_FATAL_FAILURE(send_without_credits(fd, 17));
    // Five watch periods: an unanswered probe ends it within two.
    const short ev = wait_pollerr(fd, 5000);
    EXPECT_FALSE(ev & (POLLERR | POLLHUP))
        << "a probe ended a connection whose peer is alive (revents 0x" << std::hex << ev << ")";
    EXPECT_GE(delta("persist_probes"), 3u) << "no probes while the bytes waited for credits";
    EXPECT_EQ(delta("conn_err_timeout"), 0u);
    ASSERT_TRUE(r.post_receives()) << r.error();
    r.set_claimed_bufs(16);
    ASSERT_TRUE(r.send_credit_update()) << r.error();
    std::vector<uint8_t> in(1000);
    ASSERT_TRUE(r.recv_data(in.data(), in.size())) << r.error();
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 17), -1);
    expect_clean_rogue(r);
}

// ---- F18: receive completions that are not a plain SEND ------------------------------

// F18 helper: Data from the rogue arrives (the connection works) before
// the violation.
void data_arrives(RoguePeer& r, int fd)
{
    const auto v = pattern_vector(100, 16);
    ASSERT_TRUE(r.send_data(v.data(), v.size())) << r.error();
    std::vector<uint8_t> in(100);
    ASSERT_EQ(recv(fd, in.data(), in.size(), MSG_WAITALL), 100) << strerror(errno);
    EXPECT_EQ(mismatch(in.data(), in.size(), 0, 16), -1);
}

// F18: an RDMA Write with Immediate of 0 bytes (no key needed) consumes a
// receive buffer holding a stale message: the kernel must reset, and never
// deliver the buffer's bytes.
TEST_F(Rogue, RdmaWriteWithImmediateOfZeroBytesResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    ASSERT_NO_FATAL_FAILURE(data_arrives(r, kfd_.get()));
    EXPECT_EQ(r.rdma_write_imm(nullptr, nullptr, 0, 0, 0, 0x5a5a5a5a), IBV_WC_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(expect_socket_reset(r, "after an RDMA Write with Immediate of 0"));
    ASSERT_NO_FATAL_FAILURE(expect_eof_after_reset("RDMA Write with Immediate of 0"));
    expect_protocol_reset(r);
}

// F18: Send with Immediate carrying a well-formed Data message.
TEST_F(Rogue, SendWithImmediateResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    ASSERT_NO_FATAL_FAILURE(data_arrives(r, kfd_.get()));
    ASSERT_TRUE(r.send_raw_op(SendOp::kSendWithImm, 0x12345678, SDP_MID_DATA, {},
                              std::vector<uint8_t>(100, 0x42)))
        << r.error();
    ASSERT_NO_FATAL_FAILURE(expect_socket_reset(r, "after a Send with Immediate"));
    ASSERT_NO_FATAL_FAILURE(expect_eof_after_reset("Send with Immediate"));
    expect_protocol_reset(r);
}

// F18: an RDMA Write with Immediate of 1000 bytes into the kernel's
// SinkAvail (the advertised key, in range): the immediate consumes a
// receive buffer; recv() must fail, not return those bytes or a stale
// message.
TEST_F(RogueSinkAvail, RdmaWriteWithImmediateResets)
{
    RoguePeer r;
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a));
    auto out = pattern_buffer(1000, 17);
    ibv_mr* mr = r.register_memory(out->data(), out->size(), 0);
    ASSERT_TRUE(mr) << r.error();
    EXPECT_EQ(r.rdma_write_imm(mr, out->data(), 1000, a.sk.vaddr, a.sk.rkey, 0x5a5a5a5a),
              IBV_WC_SUCCESS);
    expect_call_reset(*a.call, r, "recv() after an RDMA Write with Immediate");
    expect_protocol_reset(r, "zcopy_rx_bytes");
}

// F18: Send with Invalidate of the kernel's SinkAvail key (a credit update
// that makes the kernel's HCA invalidate the key).
TEST_F(RogueSinkAvail, SendWithInvalidateOfTheAdvertisedKeyResets)
{
    RoguePeer r;
    Advert a;
    ASSERT_NO_FATAL_FAILURE(advert(r, &a));
    ASSERT_TRUE(r.send_raw_op(SendOp::kSendWithInv, a.sk.rkey, SDP_MID_DATA, {})) << r.error();
    expect_call_reset(*a.call, r, "recv() after a Send with Invalidate of its key");
    expect_protocol_reset(r, "zcopy_rx_bytes");
}

// F18: Send with Invalidate of the kernel's SrcAvail key.
TEST_F(RogueSource, SendWithInvalidateOfTheOfferedKeyResets)
{
    RoguePeer r;
    Offer o;
    ASSERT_NO_FATAL_FAILURE(offer(r, &o));
    ASSERT_TRUE(r.send_raw_op(SendOp::kSendWithInv, o.sa.rkey, SDP_MID_DATA, {})) << r.error();
    expect_call_reset(*o.call, r, "send() after a Send with Invalidate of its key");
    expect_protocol_reset(r, "zcopy_tx_bytes");
}

// ---- F19: credits granted, no receive buffers behind them --------------------------

class RogueRnr : public Rogue {
  protected:
    // The rogue's Hello or HelloAck grants 16 buffers but it never posts
    // one: every SEND of the kernel meets RNR.  The socket must get
    // ETIMEDOUT or ECONNRESET within bounded time instead of a send() that
    // blocks for ever.  rnr_retry is the count the rogue puts in its REQ or
    // REP, which the CM gives to the kernel's QP: with 7 (for ever) only the
    // kernel's own watch of sends that never complete (net.sdp.tx_stall_ms,
    // lowered here) ends it.
    void no_receive_buffers(bool kernel_is_active, uint8_t rnr_retry)
    {
        SysctlOverride stall("tx_stall_ms", "3000");
        Options opt;
        opt.rx_bufs = 4;
        opt.initial_posted = 0;
        opt.claimed_bufs = 16;
        opt.rnr_retry = rnr_retry;
        RoguePeer r(opt);
        r.set_repost(false);
        r.set_auto_credit_updates(false);
        if (kernel_is_active)
            ASSERT_NO_FATAL_FAILURE(kernel_connects(r));
        else
            ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        ASSERT_EQ(r.posted(), 0u);
        const int fd = kfd_.get();
        KernelCall k([fd]() -> ssize_t {
            const auto out = pattern_buffer(16 * kKiB, 18);
            for (size_t total = 0; total < 64 * kKiB * kKiB; total += 16 * kKiB)
                if (send(fd, out->data(), out->size(), MSG_NOSIGNAL) < 0)
                    return -1;
            return 0;
        });
        const auto res = bounded(k, r, 20000, "send() to a peer that posts no receive buffers");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->ret, -1) << describe_call(res);
        EXPECT_TRUE(res->err == ETIMEDOUT || res->err == ECONNRESET) << describe_call(res);
        EXPECT_TRUE(wait_pollerr(fd, 1000) & (POLLERR | POLLHUP));
    }
};

// F19, the rogue connects with RNR retry 7 (infinite, what OFED SDP and
// this rogue always asked for) in its REQ.
TEST_F(RogueRnr, PeerWithoutReceiveBuffersErrorsTheSocket)
{
    no_receive_buffers(false, 7);
}

// F19, the kernel connects; the rogue's REP asks for RNR retry 7.
TEST_F(RogueRnr, PeerWithoutReceiveBuffersErrorsTheActiveSocket)
{
    no_receive_buffers(true, 7);
}

// F19, the rogue connects and asks for 6 RNR retries: the kernel's QP gives
// up after them and the socket reports it.
TEST_F(RogueRnr, PeerWithoutReceiveBuffersAskingFiniteRnrRetryErrorsTheSocket)
{
    no_receive_buffers(false, 6);
}

// ---- F4: handshake abuse ------------------------------------------------------------

void put_be32(std::vector<uint8_t>& v, size_t off, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        v[off + i] = static_cast<uint8_t>(x >> (24 - 8 * i));
}

// F4: Hellos the kernel must reject (REJ; conn_err_protocol counts each);
// the listener then still accepts a correct one, and no child is left.
TEST_F(Rogue, MalformedHellosAreRejected)
{
    listener_ = sdp_listener(kAddrA, port_);
    ASSERT_GE(listener_.get(), 0);
    using Edit = std::function<void(std::vector<uint8_t>&)>;
    const std::vector<std::pair<std::string, Edit>> cases = {
        {"major version 1", [](std::vector<uint8_t>& h) { h[16] = 0x12; }},
        {"major version 3", [](std::vector<uint8_t>& h) { h[16] = 0x32; }},
        {"IP version 5", [](std::vector<uint8_t>& h) { h[17] = 5 << 4; }},
        {"IP version 0", [](std::vector<uint8_t>& h) { h[17] = 0; }},
        {"local_rcv_size 0", [](std::vector<uint8_t>& h) { put_be32(h, 24, 0); }},
        {"local_rcv_size 16", [](std::vector<uint8_t>& h) { put_be32(h, 24, 16); }},
        {"mseq 1", [](std::vector<uint8_t>& h) { put_be32(h, 8, 1); }},
        {"max_adverts 0", [](std::vector<uint8_t>& h) { h[19] = 0; }},
        {"len 20 (truncated Hello)", [](std::vector<uint8_t>& h) { put_be32(h, 4, 20); }},
        {"private data of 16 bytes", [](std::vector<uint8_t>& h) { h.resize(16); }},
        {"private data of 24 bytes", [](std::vector<uint8_t>& h) { h.resize(24); }},
        {"no private data", [](std::vector<uint8_t>& h) { h.clear(); }},
        {"HelloAck instead of Hello", [](std::vector<uint8_t>& h) { h[0] = SDP_MID_HELLO_ACK; }},
    };
    unsigned long long n = 0;
    for (const auto& [name, edit] : cases) {
        SCOPED_TRACE(name);
        Options opt;
        opt.edit_hello = edit;
        RoguePeer r(opt);
        EXPECT_FALSE(r.connect(kAddrA, port_, 10000)) << "a Hello with " << name << " accepted";
        EXPECT_EQ(r.last_cm_event(), RDMA_CM_EVENT_REJECTED) << r.error();
        n++;
        EXPECT_EQ(delta("conn_err_protocol"), n);
    }
    RoguePeer good;
    ASSERT_TRUE(good.connect(kAddrA, port_)) << good.error();
    pollfd pfd{listener_.get(), POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, kDetectMs), 1)
        << "a correct Hello after the rejected ones: established, but nothing to accept";
    kfd_ = Fd(accept(listener_.get(), nullptr, nullptr));
    ASSERT_GE(kfd_.get(), 0) << strerror(errno);
    ASSERT_NO_FATAL_FAILURE(data_arrives(good, kfd_.get()));
    ASSERT_EQ(fcntl(listener_.get(), F_SETFL, O_NONBLOCK), 0) << strerror(errno);
    Fd none(accept(listener_.get(), nullptr, nullptr));
    EXPECT_LT(none.get(), 0) << "a rejected Hello left a connection to accept";
    EXPECT_EQ(errno, EAGAIN) << strerror(errno);
    EXPECT_EQ(half_open(port_), 0);
    EXPECT_EQ(delta("conn_err_protocol"), cases.size());
}

class RogueFlood : public Rogue {
  protected:
    // A legitimate SDP client connects during the flood and carries 256 KiB
    // each way, verified.
    void legitimate_client_works(const std::string& what)
    {
        const int fam = sdp_family();
        const int port = port_;
        auto cfd = std::make_shared<int>(-1);
        KernelCall conn([cfd, fam, port]() -> ssize_t {
            *cfd = socket(fam, SOCK_STREAM, 0);
            const sockaddr_in a = make_addr(kAddrA, port);
            return connect(*cfd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
        });
        const auto res = conn.wait(30000);
        ASSERT_TRUE(res) << what << ": connect() still blocked after 30 s";
        Fd client(*cfd);
        ASSERT_EQ(res->ret, 0) << what << ": connect(): " << strerror(res->err);
        pollfd pfd{listener_.get(), POLLIN, 0};
        ASSERT_EQ(poll(&pfd, 1, 10000), 1) << what << ": nothing to accept";
        Fd server(accept(listener_.get(), nullptr, nullptr));
        ASSERT_GE(server.get(), 0) << strerror(errno);
        constexpr size_t kLen = 256 * kKiB;
        for (int dir = 0; dir < 2; dir++) {
            const int from = dir != 0 ? server.get() : client.get();
            const int to = dir != 0 ? client.get() : server.get();
            auto out = pattern_buffer(kLen, 19 + dir);
            KernelCall tx([from, out] { return send(from, out->data(), out->size(), 0); });
            std::vector<uint8_t> in(kLen);
            ASSERT_EQ(recv(to, in.data(), in.size(), MSG_WAITALL), static_cast<ssize_t>(kLen))
                << what << ": " << strerror(errno);
            EXPECT_EQ(mismatch(in.data(), in.size(), 0, 19 + dir), -1) << what;
            const auto t = tx.wait(10000);
            ASSERT_TRUE(t) << what;
            EXPECT_EQ(t->ret, static_cast<ssize_t>(kLen)) << describe_call(t);
        }
    }
};

// F4: 200 connection requests that never complete (no RTU) against one
// listener with a large backlog: the kernel keeps at most
// net.sdp.max_half_open (32) of them half-open, evicting the oldest
// (conn_half_open_evicted), kernel memory and QPs stay bounded, and a
// legitimate client still connects and carries data.
TEST_F(RogueFlood, HalfOpenFloodIsBounded)
{
    constexpr int kMaxHalfOpen = 32;
    constexpr int kFlood = 200;
    SysctlOverride limit("max_half_open", std::to_string(kMaxHalfOpen));
    ASSERT_NO_FATAL_FAILURE(listen_with_backlog(1024));
    const long long avail0 = meminfo_kib("MemAvailable"), slab0 = meminfo_kib("Slab");
    const long qp0 = rdma_qp_count();
    ASSERT_GE(avail0, 0);
    ASSERT_GE(slab0, 0);
    ASSERT_GE(qp0, 0) << "`rdma res show` reports no QP count";
    ReqFlood f;
    ASSERT_EQ(f.send(kAddrA, port_, kFlood), kFlood) << f.error();
    EXPECT_TRUE(f.wait_answered(60000))
        << "REQs without an answer: " << f.responses() << " REPs, " << f.rejected() << " REJs";
    const int open = half_open(port_);
    const long long avail1 = meminfo_kib("MemAvailable"), slab1 = meminfo_kib("Slab");
    const long qp1 = rdma_qp_count();
    std::cout << "flood of " << kFlood << ": " << f.responses() << " REPs, " << f.rejected()
              << " REJs, " << f.failed() << " failed; half-open " << open << "; MemAvailable -"
              << (avail0 - avail1) / 1024 << " MiB, Slab +" << (slab1 - slab0) / 1024
              << " MiB, QPs " << qp0 << " -> " << qp1 << "\n";
    EXPECT_LE(open, kMaxHalfOpen);
    EXPECT_GE(delta("conn_half_open_evicted"),
              static_cast<unsigned long long>(kFlood - kMaxHalfOpen));
    EXPECT_LE(qp1 - qp0, kMaxHalfOpen + 2) << "QPs of half-open children";
    EXPECT_LE(avail0 - avail1, 3LL * 1024 * kMaxHalfOpen) << "KiB of memory taken by the flood";
    EXPECT_LE(slab1 - slab0, 3LL * 1024 * kMaxHalfOpen) << "KiB of slab taken by the flood";
    ASSERT_NO_FATAL_FAILURE(legitimate_client_works("a client during the flood"));
    // The peer destroys its ids oldest first: the REJs of the newest, the
    // children still half-open, go last.
    const auto t0 = std::chrono::steady_clock::now();
    const auto ms = [&t0] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
            .count();
    };
    f.destroy();
    const auto destroyed_ms = ms();
    EXPECT_TRUE(eventually([&] { return half_open(port_) == 0; }, 30))
        << half_open(port_) << " half-open children left after the flood's REJs";
    std::cout << "[ INFO     ] the peer destroyed its ids in " << destroyed_ms
              << " ms; no child half-open " << ms() << " ms after it began\n";
    EXPECT_TRUE(eventually([&] { return rdma_qp_count() <= qp0; }, 30))
        << "QPs " << qp0 << " before the flood, " << rdma_qp_count() << " after";
}

// F4: the same flood against listen(fd, 4): the flood must not fill the
// backlog for good; eviction makes room for a legitimate client.
TEST_F(RogueFlood, HalfOpenFloodDoesNotFillASmallBacklog)
{
    constexpr int kFlood = 64;
    SysctlOverride limit("max_half_open", "32");
    ASSERT_NO_FATAL_FAILURE(listen_with_backlog(4));
    ReqFlood f;
    ASSERT_EQ(f.send(kAddrA, port_, kFlood), kFlood) << f.error();
    EXPECT_TRUE(f.wait_answered(60000))
        << "REQs without an answer: " << f.responses() << " REPs, " << f.rejected() << " REJs";
    std::cout << "flood of " << kFlood << " against backlog 4: " << f.responses() << " REPs, "
              << f.rejected() << " REJs, " << f.failed() << " failed; half-open "
              << half_open(port_) << "\n";
    EXPECT_LE(half_open(port_), 5);
    EXPECT_GE(delta("conn_half_open_evicted"), 1u);
    ASSERT_NO_FATAL_FAILURE(legitimate_client_works("a client after the flood, backlog 4"));
    f.destroy();
    EXPECT_TRUE(eventually([&] { return half_open(port_) == 0; }, 30));
}

} // namespace
} // namespace sdp::vmtest
