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
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded (net.sdp defaults: zcopy_thresh 64 KiB), rdma_ucm and ib_uverbs
// loaded for the userspace verbs.  Both ends use 10.77.0.1 (rxe0).
#include "rogue_peer.h"
#include "sdp_wire.h"
#include "socket_util.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <infiniband/verbs.h>
#include <memory>
#include <mutex>
#include <poll.h>

namespace sdp::vmtest {
namespace {

using rogue::Message;
using rogue::Options;
using rogue::RoguePeer;

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
        if ((pfd.revents & POLLERR) || std::chrono::steady_clock::now() >= end)
            return pfd.revents;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// A net.sdp sysctl set for the scope of a test, if the module has it.
class SysctlOverride {
  public:
    SysctlOverride(const std::string& name, const std::string& value)
        : path_("/proc/sys/net/sdp/" + name), old_(read_file(path_))
    {
        if (old_)
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
        port_ = next_port_++;
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

    // The rogue connects to a kernel listener; kfd_ is the accepted socket.
    void rogue_connects(RoguePeer& r)
    {
        listener_ = sdp_listener(kAddrA, port_);
        ASSERT_GE(listener_.get(), 0);
        ASSERT_TRUE(r.connect(kAddrA, port_)) << r.error();
        kfd_ = Fd(accept(listener_.get(), nullptr, nullptr));
        ASSERT_GE(kfd_.get(), 0) << strerror(errno);
        EXPECT_EQ(r.peer_rcv_size(), 65536u) << "the kernel's HelloAck actrcvsz";
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
        EXPECT_EQ(r.peer_rcv_size(), 65536u) << "the kernel's Hello localrcvsz";
    }

    // A blocking send of the whole buffer from the kernel socket.
    KernelCall kernel_send(std::shared_ptr<std::vector<uint8_t>> buf)
    {
        const int fd = kfd_.get();
        return KernelCall([fd, buf] { return send(fd, buf->data(), buf->size(), MSG_NOSIGNAL); });
    }

    KernelCall kernel_recv(std::shared_ptr<std::vector<uint8_t>> buf, int flags = 0)
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
        if (!(ev & POLLERR)) {
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

    void expect_clean_rogue(const RoguePeer& r)
    {
        EXPECT_TRUE(r.kernel_errors().empty()) << "the kernel broke the protocol: " << r.describe();
    }

    Fd listener_;
    Fd kfd_;
    std::unique_ptr<KmsgCapture> kmsg_;
    std::map<std::string, unsigned long long> before_;
    int port_ = 0;
    static inline int next_port_ = 7600;
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
    char c;
    EXPECT_EQ(recv(fd, &c, 1, 0), 0) << strerror(errno);
    EXPECT_TRUE(r.pump_until([&] { return r.disconnected(); }, 10000)) << r.describe();
    expect_clean_rogue(r);
    EXPECT_EQ(delta("conn_err_protocol"), 0u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
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

// ---- 1, 2, 3: the kernel is the source (SrcAvail) ----------------------------

// The rogue gets the kernel's SrcAvail for a 256 KiB send.
struct Offer {
    std::shared_ptr<std::vector<uint8_t>> buf;
    std::unique_ptr<KernelCall> call;
    Message sa;
};

class RogueSource : public Rogue {
  protected:
    void offer(RoguePeer& r, Offer* o, size_t len = 256 * kKiB)
    {
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        o->buf = pattern_buffer(len, 8);
        o->call = std::make_unique<KernelCall>(kernel_send(o->buf));
        const auto sa = r.wait_for(SDP_MID_SRC_AVAIL);
        ASSERT_TRUE(sa) << "no SrcAvail: " << r.describe();
        ASSERT_EQ(sa->zc_len, len);
        o->sa = *sa;
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
        if (read) {
            ASSERT_EQ(r.rdma_read(mr, in.data(), read, o.sa.vaddr, o.sa.rkey), IBV_WC_SUCCESS);
            ASSERT_TRUE(r.send_rd_compl(read)) << r.error();
        }
        ASSERT_TRUE(r.send_rd_compl(claim)) << r.error();
        const std::string what = "send() after RdmaRdCompl(" + std::to_string(claim) + ")";
        if (read) {
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
        expect_kernel_aborted(r);
        EXPECT_EQ(delta("conn_err_protocol"), 1u);
        EXPECT_EQ(delta("zcopy_rdma_reads"), 0u);
        expect_clean_rogue(r);
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

// Case 4: a second SrcAvail while the first is outstanding (nobody reads:
// recv() is called only afterwards, so the first stays unread).
TEST_F(RogueSink, SecondSrcAvailWhileOneOutstandingResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
    const uint64_t va = reinterpret_cast<uintptr_t>(s.mem.data());
    ASSERT_TRUE(r.send_src_avail(64 * kKiB, s.mr->rkey, va)) << r.error();
    ASSERT_TRUE(r.send_src_avail(64 * kKiB, s.mr->rkey, va + 64 * kKiB)) << r.error();
    expect_kernel_aborted(r);
    expect_socket_reset(r, "recv() after a second SrcAvail");
    EXPECT_EQ(delta("conn_err_protocol"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u) << "bytes of an aborted connection's offer were read";
    expect_clean_rogue(r);
}

// Case 4: Data overtaking the bytes of the rogue's own outstanding SrcAvail.
TEST_F(RogueSink, DataWhileSrcAvailOutstandingResets)
{
    RoguePeer r;
    ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
    Src s;
    ASSERT_NO_FATAL_FAILURE(make_src(r, &s));
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
        changed += b != 0x22;
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
    void advert(RoguePeer& r, Advert* a, uint8_t fill = 0x11)
    {
        ASSERT_NO_FATAL_FAILURE(rogue_connects(r));
        a->buf = std::make_shared<std::vector<uint8_t>>(256 * kKiB, fill);
        a->call = std::make_unique<KernelCall>(kernel_recv(a->buf));
        const auto sk = r.wait_for(SDP_MID_SINK_AVAIL);
        ASSERT_TRUE(sk) << "no SinkAvail: " << r.describe();
        ASSERT_EQ(sk->zc_len, a->buf->size());
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
        expect_kernel_aborted(r);
        EXPECT_EQ(delta("conn_err_protocol"), 1u);
        EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
        expect_clean_rogue(r);
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
            if (!mr || r.rdma_write(mr, out->data(), a.sk.zc_len, a.sk.vaddr, a.sk.rkey) != 0)
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
        changed += b != 0x11;
    EXPECT_EQ(changed, 0u) << "bytes of the application's buffer changed after recv() returned";
    expect_clean_rogue(r);
}

} // namespace
} // namespace sdp::vmtest
