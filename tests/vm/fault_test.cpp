// SPDX-License-Identifier: GPL-2.0
//
// Process-level faults during zero copy (review 2026-11-24, section 6 item
// 12) and a stalled page fault that must not stall the RDMA CM (finding F6):
//
// * KillBlocked: SIGKILL of a process blocked in a large zero-copy send()
//   or recv(), with an idle or a busy peer: the process is reaped within a
//   few seconds, the peer sees the connection end (EOF or ECONNRESET), and
//   afterwards no page stays pinned and no socket of the test is listed.
//   Every case also runs over TCP, the oracle for what the peer sees.
// * ForkDuringZeroCopy: fork() from another thread, again and again, while
//   zero-copy sends and receives run both ways; the children scribble over
//   their copies of the buffers and exit 0; every byte arrives intact.
// * BufferYanked: munmap() or madvise(MADV_DONTNEED) of the buffer of a
//   zero-copy send or receive in progress, from another thread: the calls
//   return bytes or EFAULT, the stream stays consistent (counts match, the
//   bytes are the ones the buffer held), pins are released, no kernel
//   report.  Also over TCP.
// * StalledFault: a send() or recv() whose buffer is a userfaultfd range
//   with an unresolved fault stays stuck in the kernel holding the socket
//   lock; meanwhile unrelated RDMA CM work must go on: new SDP connections
//   (rxe0 and rxe1), a CM disconnect of the stuck socket itself, rping.
// * FailedPost: a work-request post fails (sdp.ko's fault hook, finding
//   F17) on either end, during bcopy or zero copy: both ends hear a reset
//   within seconds, nothing leaks, the next connection works.
// * At the end (global tear-down): sdp.ko's reference count is back to its
//   value at the start of the binary once no SDP socket is left.
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded (rdma_ucm and ib_uverbs too for rping).
#include "socket_util.h"

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <functional>
#include <linux/userfaultfd.h>
#include <mutex>
#include <optional>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

namespace sdp::vmtest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMiB = 1 << 20;
constexpr size_t kKiB = 1024;

long ms_since(Clock::time_point t)
{
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

void sleep_ms(int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// ---- data -------------------------------------------------------------------------

// Byte i of a test stream: position-dependent, so misplaced or duplicated
// blocks show, not only corrupted ones (as in zcopy_test.cpp).
unsigned char pattern(uint64_t i, uint64_t seed = 0)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z ^= z >> 29;
    return static_cast<unsigned char>(z ^ (z >> 13));
}

void fill(unsigned char* buf, size_t len, uint64_t at, uint64_t seed = 0)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(at + i, seed);
}

// ---- /proc, /sys ------------------------------------------------------------------

// Pages pinned (FOLL_PIN) and not yet unpinned, system-wide.
long long pins_outstanding()
{
    const PinCounts c = pin_counts();
    return c.acquired - c.released;
}

std::string pin_text()
{
    const PinCounts c = pin_counts();
    return "nr_foll_pin_acquired " + std::to_string(c.acquired) + ", nr_foll_pin_released " +
           std::to_string(c.released);
}

// /proc/net/sdp lines with `port` at either end.
size_t sockets_on_port(int port)
{
    size_t n = 0;
    for (const auto& l : proc_sockets())
        if (ends_with_port(l.local, port) || ends_with_port(l.remote, port))
            n++;
    return n;
}

// No SDP socket of `port` left and every pinned page released (bounded waits).
void expect_released(int port)
{
    EXPECT_TRUE(eventually([&] { return sockets_on_port(port) == 0; }, 20))
        << "sockets of port " << port << " still listed 20 s after close\n"
        << proc_listing();
    EXPECT_TRUE(eventually([] { return pins_outstanding() == 0; }, 10))
        << "pinned pages not released: " << pin_text();
}

// Kernel reports that must never follow a user-space fault (check-dmesg.sh
// catches them too, but only at the end of the boot, without the test's name).
void expect_no_kernel_reports(KmsgCapture& kmsg)
{
    static const char* const kBad[] = {"WARNING:",
                                       "BUG:",
                                       "Oops",
                                       "general protection",
                                       "refcount_t:",
                                       "list_add corr",
                                       "list_del corr",
                                       "INFO: task",
                                       "UBSAN:",
                                       "KASAN:",
                                       "cannot stop the QP",
                                       "leaking pages",
                                       "zero-copy post failed"};
    // A post failure that sdp.ko's fault hook injected (FailedPost) is
    // logged as such right before the glue's own report of it.
    bool injected = false;
    for (const auto& line : kmsg.lines()) {
        const bool expected = injected && line.find("post failed") != std::string::npos;
        injected = line.find("injected post failure") != std::string::npos;
        if (expected)
            continue;
        for (const char* b : kBad)
            if (line.find(b) != std::string::npos)
                ADD_FAILURE() << "kernel log: " << line;
    }
}

// Pages pinned before a test (by someone else) make its pin checks fail
// later; say so up front.
void warn_if_pinned()
{
    if (pins_outstanding() != 0)
        std::cout << "[ WARNING  ] pinned pages outstanding before the test: " << pin_text()
                  << "\n";
}

void set_sysctl(const char* name, const std::string& value)
{
    ASSERT_TRUE(write_file(std::string("/proc/sys/net/sdp/") + name, value)) << name;
}

// ---- sockets ----------------------------------------------------------------------

enum class Family { kTcp, kSdp };

const char* family_name(Family f)
{
    return f == Family::kTcp ? "TCP" : "SDP";
}

int family_of(Family f)
{
    return f == Family::kTcp ? AF_INET : sdp_family();
}

void set_timeouts(int fd, int seconds)
{
    timeval tv{};
    tv.tv_sec = seconds;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void set_linger0(int fd)
{
    linger l{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

// TCP with small buffers, so that a large blocking call stays blocked as
// long as SDP's does (SDP's zero copy holds the whole call).
void small_tcp_buffers(int fd)
{
    const int size = 64 * kKiB;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

// A connected pair over `family`; server end in `server`.
Pair family_pair(Family f, const char* ip, int port)
{
    Pair p;
    p.listener = Fd(socket(family_of(f), SOCK_STREAM, 0));
    EXPECT_GE(p.listener.get(), 0) << strerror(errno);
    const int one = 1;
    setsockopt(p.listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (f == Family::kTcp)
        small_tcp_buffers(p.listener.get());
    const sockaddr_in a = make_addr(ip, port);
    EXPECT_EQ(bind(p.listener.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << family_name(f) << " bind " << port << ": " << strerror(errno);
    EXPECT_EQ(listen(p.listener.get(), 8), 0) << strerror(errno);
    p.client = Fd(socket(family_of(f), SOCK_STREAM, 0));
    if (f == Family::kTcp)
        small_tcp_buffers(p.client.get());
    if (connect(p.client.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
        ADD_FAILURE() << family_name(f) << " connect " << ip << ":" << port << ": "
                      << strerror(errno);
        return p;
    }
    p.server = Fd(accept(p.listener.get(), nullptr, nullptr));
    EXPECT_GE(p.server.get(), 0) << strerror(errno);
    return p;
}

// How a reader's stream ended.
struct ReadEnd {
    uint64_t bytes = 0;
    bool eof = false;
    int err = 0; // errno of the failing recv, if not EOF
    std::string mismatch;

    std::string describe() const
    {
        std::string how = eof ? std::string("EOF") : std::string("error ") + strerror(err);
        return how + " after " + std::to_string(bytes) + " bytes" +
               (mismatch.empty() ? "" : " (" + mismatch + ")");
    }
    // What TCP gives the peer of a killed process: EOF, or a reset when the
    // killed end had unread data.
    bool ended_as_tcp_may() const { return eof || err == ECONNRESET; }
};

// recv() of up to `chunk` until EOF or an error, each byte checked with
// ok(stream offset, byte); `pause_ms` between reads (a slow reader).
ReadEnd read_to_end(int fd, size_t chunk, int pause_ms,
                    const std::function<bool(uint64_t, unsigned char)>& ok)
{
    ReadEnd end;
    std::vector<unsigned char> buf(chunk);
    for (;;) {
        const ssize_t r = recv(fd, buf.data(), buf.size(), 0);
        if (r == 0) {
            end.eof = true;
            return end;
        }
        if (r < 0) {
            end.err = errno;
            return end;
        }
        for (ssize_t i = 0; i < r && end.mismatch.empty(); i++) {
            const uint64_t at = end.bytes + static_cast<uint64_t>(i);
            if (!ok(at, buf[static_cast<size_t>(i)]))
                end.mismatch = "unexpected byte " + std::to_string(buf[static_cast<size_t>(i)]) +
                               " at stream offset " + std::to_string(at);
        }
        end.bytes += static_cast<uint64_t>(r);
        if (pause_ms > 0)
            sleep_ms(pause_ms);
    }
}

// The reader got the whole pattern stream of `bytes`, then EOF.
void expect_whole_stream(const ReadEnd& end, uint64_t bytes)
{
    EXPECT_TRUE(end.eof) << end.describe();
    EXPECT_TRUE(end.mismatch.empty()) << end.describe();
    EXPECT_EQ(end.bytes, bytes);
}

// Whether `pid` has exited within `ms`; reaps it and stores its status.
bool reaped_within(pid_t pid, int ms, int* status)
{
    const auto t0 = Clock::now();
    for (;;) {
        const pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 || ms_since(t0) > ms)
            return false;
        sleep_ms(5);
    }
}

// An anonymous private mapping, unmapped on scope exit unless released.
struct Mapping {
    unsigned char* addr = nullptr;
    size_t len = 0;
    explicit Mapping(size_t n) : len(n)
    {
        void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        addr = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
    }
    ~Mapping()
    {
        if (addr != nullptr)
            munmap(addr, len);
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
};

// Common fixture: kernel log watch, sysctls restored.
class FaultBase : public ::testing::Test {
  protected:
    void SetUp() override
    {
        kmsg_ = std::make_unique<KmsgCapture>();
        sink_wait_ = sdp_sysctl("zcopy_sink_wait_ms");
        ASSERT_GT(sdp_sysctl("zcopy_thresh"), 0) << "zero copy is off (net.sdp.zcopy_thresh)";
        before_ = counters();
    }
    void TearDown() override
    {
        if (sink_wait_ >= 0)
            set_sysctl("zcopy_sink_wait_ms", std::to_string(sink_wait_));
        expect_no_kernel_reports(*kmsg_);
    }
    unsigned long long delta(const char* name) { return counter_delta(before_, name); }

    std::unique_ptr<KmsgCapture> kmsg_;
    long sink_wait_ = -1;
    std::map<std::string, unsigned long long> before_;
};

// ---- 1. SIGKILL of a blocked zero-copy sender or receiver ------------------------

enum class Blocked { kSend, kRecv };
enum class Peer { kIdle, kBusy };

struct KillCase {
    const char* name;
    Family family;
    Blocked blocked;
    Peer peer;
    int port;
};

void PrintTo(const KillCase& c, std::ostream* os)
{
    *os << family_name(c.family) << c.name << " port " << c.port;
}

class KillBlocked : public FaultBase, public ::testing::WithParamInterface<KillCase> {};

constexpr size_t kKillSend = 8 * kMiB;

TEST_P(KillBlocked, ReapedPromptlyPeerSeesEndPinsReleased)
{
    const KillCase& c = GetParam();
    const bool sdp = c.family == Family::kSdp;
    // A zero-copy offer nobody reads stays an offer (pinned) while the
    // process is killed, instead of going by bcopy after 200 ms.  (Only for
    // the blocked sender: the receiver's peer keeps the default.)
    if (c.blocked == Blocked::kSend)
        set_sysctl("zcopy_sink_wait_ms", "60000");
    warn_if_pinned();

    Pair p = family_pair(c.family, kAddrA, c.port);
    ASSERT_GE(p.server.get(), 0);
    // The blocked end goes to the child; the parent keeps the peer only, so
    // the kill closes the blocked socket.
    Fd& victim = c.blocked == Blocked::kSend ? p.client : p.server;
    Fd& peer = c.blocked == Blocked::kSend ? p.server : p.client;
    set_timeouts(peer.get(), 20);
    std::vector<unsigned char> buf(kKillSend);
    if (c.blocked == Blocked::kSend)
        fill(buf.data(), buf.size(), 0);

    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << strerror(errno);
    if (pid == 0) {
        // Child: large blocking calls, one after the other, until killed.
        const int fd = victim.get();
        uint64_t off = 0;
        for (;;) {
            const size_t at = static_cast<size_t>(off % buf.size());
            const ssize_t r = c.blocked == Blocked::kSend
                                  ? send(fd, buf.data() + at, buf.size() - at, MSG_NOSIGNAL)
                                  : recv(fd, buf.data() + at, buf.size() - at, MSG_WAITALL);
            if (r <= 0)
                _exit(3);
            off += static_cast<uint64_t>(r);
            if (c.blocked == Blocked::kSend && off % buf.size() == 0)
                fill(buf.data(), buf.size(), off);
        }
    }
    victim.reset();
    ReadEnd busy_read;
    ssize_t busy_send_result = 0;
    int busy_send_errno = 0;
    uint64_t busy_sent = 0;
    Clock::time_point busy_send_failed;
    // On any early return: unblock the busy peer, then join it.
    std::thread busy;
    struct Join {
        std::thread& t;
        int fd;
        ~Join()
        {
            if (t.joinable()) {
                shutdown(fd, SHUT_RDWR);
                t.join();
            }
        }
    } join_busy{busy, peer.get()};

    // Busy peer: reads slowly (blocked send) or streams (blocked receive).
    if (c.peer == Peer::kBusy) {
        if (c.blocked == Blocked::kSend) {
            busy = std::thread([&] {
                busy_read =
                    read_to_end(peer.get(), 64 * kKiB, 50,
                                [](uint64_t at, unsigned char b) { return b == pattern(at); });
            });
        } else {
            busy = std::thread([&] {
                std::vector<unsigned char> out(kMiB);
                for (;;) {
                    fill(out.data(), out.size(), busy_sent, 1);
                    const ssize_t r = send(peer.get(), out.data(), out.size(), MSG_NOSIGNAL);
                    if (r <= 0) {
                        busy_send_result = r;
                        busy_send_errno = errno;
                        busy_send_failed = Clock::now();
                        return;
                    }
                    busy_sent += static_cast<uint64_t>(r);
                }
            });
        }
    }

    // The child is blocked in the kernel, in zero copy for SDP: an offer
    // (SrcAvail) or an advertisement (SinkAvail) with its pages pinned.
    bool in_zcopy = true;
    if (sdp) {
        const char* msg = c.blocked == Blocked::kSend ? "tx_src_avail" : "tx_sink_avail";
        in_zcopy = eventually(
            [&] { return counter_delta(before_, msg) >= 1 && pins_outstanding() > 0; }, 10);
        EXPECT_TRUE(in_zcopy) << "no " << msg << " with pinned pages: " << pin_text();
    }
    sleep_ms(500);
    int status = 0;
    const bool early = reaped_within(pid, 0, &status);
    EXPECT_FALSE(early) << "the child's call returned before the kill (status " << status << ")";

    const auto t_kill = Clock::now();
    EXPECT_EQ(kill(pid, SIGKILL), early ? -1 : 0);
    const bool reaped = early || reaped_within(pid, 30000, &status);
    const long kill_ms = ms_since(t_kill);
    ASSERT_TRUE(reaped) << "child not reaped 30 s after SIGKILL";
    EXPECT_LT(kill_ms, 5000) << "SIGKILL took " << kill_ms << " ms to complete";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

    // The peer sees the connection end.
    ReadEnd end;
    if (c.peer == Peer::kBusy) {
        busy.join();
        if (c.blocked == Blocked::kSend) {
            end = busy_read;
        } else {
            EXPECT_EQ(busy_send_result, -1);
            EXPECT_TRUE(busy_send_errno == ECONNRESET || busy_send_errno == EPIPE)
                << "the streaming peer's send ended with " << strerror(busy_send_errno) << " after "
                << busy_sent << " bytes";
            const long fail_ms = static_cast<long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(busy_send_failed - t_kill)
                    .count());
            // TCP resets a connection whose closed end receives data.
            EXPECT_LT(fail_ms, 5000)
                << "the streaming peer's send failed only " << fail_ms << " ms after the kill";
            std::cout << "[ INFO     ] " << family_name(c.family)
                      << " streaming peer: send failed (" << strerror(busy_send_errno) << ") "
                      << fail_ms << " ms after the kill, " << busy_sent << " bytes sent\n";
        }
    }
    if (c.peer == Peer::kIdle || c.blocked == Blocked::kRecv) {
        end = read_to_end(peer.get(), kMiB, 0,
                          [](uint64_t at, unsigned char b) { return b == pattern(at); });
    }
    std::cout << "[ INFO     ] " << family_name(c.family) << " " << c.name << ": kill took "
              << kill_ms << " ms; the peer's reads: " << end.describe() << "\n";
    EXPECT_TRUE(end.ended_as_tcp_may()) << "peer: " << end.describe();
    EXPECT_TRUE(end.mismatch.empty()) << end.mismatch;
    if (c.blocked == Blocked::kRecv)
        EXPECT_EQ(end.bytes, 0u) << "the killed receiver never sent anything";

    p = Pair();
    expect_released(c.port);
}

INSTANTIATE_TEST_SUITE_P(
    Fault, KillBlocked,
    ::testing::Values(
        KillCase{"SendIdlePeer", Family::kTcp, Blocked::kSend, Peer::kIdle, 8101},
        KillCase{"SendIdlePeer", Family::kSdp, Blocked::kSend, Peer::kIdle, 8102},
        KillCase{"SendSlowReader", Family::kTcp, Blocked::kSend, Peer::kBusy, 8103},
        KillCase{"SendSlowReader", Family::kSdp, Blocked::kSend, Peer::kBusy, 8104},
        KillCase{"RecvIdlePeer", Family::kTcp, Blocked::kRecv, Peer::kIdle, 8105},
        KillCase{"RecvIdlePeer", Family::kSdp, Blocked::kRecv, Peer::kIdle, 8106},
        KillCase{"RecvStreamingPeer", Family::kTcp, Blocked::kRecv, Peer::kBusy, 8107},
        KillCase{"RecvStreamingPeer", Family::kSdp, Blocked::kRecv, Peer::kBusy, 8108}),
    [](const ::testing::TestParamInfo<KillCase>& i) {
        return std::string(family_name(i.param.family)) + i.param.name;
    });

// ---- 2. fork() while zero copy runs both ways ------------------------------------

class ForkDuringZeroCopy : public FaultBase {};

TEST_F(ForkDuringZeroCopy, DataIntactChildrenExitCleanly)
{
    constexpr size_t kTotal = 24 * kMiB;
    constexpr size_t kSendChunk = 4 * kMiB;
    constexpr size_t kRecvChunk = kMiB;
    constexpr int kPort = 8120;
    warn_if_pinned();
    Pair p = family_pair(Family::kSdp, kAddrA, kPort);
    ASSERT_GE(p.server.get(), 0);
    set_timeouts(p.client.get(), 60);
    set_timeouts(p.server.get(), 60);
    // Open sockets hold module references (else the end-of-binary check of
    // the reference count would prove nothing).
    EXPECT_GT(module_refcnt("sdp"), 0) << "open SDP sockets hold no sdp.ko reference";

    // Fixed buffers (never reallocated), so the children know them.
    std::vector<unsigned char> send_a(kSendChunk), send_b(kSendChunk);
    std::vector<unsigned char> recv_a(kRecvChunk), recv_b(kRecvChunk);
    unsigned char* const scribble[] = {send_a.data(), send_b.data(), recv_a.data(), recv_b.data()};
    const size_t scribble_len[] = {kSendChunk, kSendChunk, kRecvChunk, kRecvChunk};

    // The senders go on past kTotal until the forking thread has forked
    // kMinForks times, so a slow guest cannot end the transfers before the
    // forks this test is about; the receivers read to the end of the stream.
    constexpr int kMinForks = 5;
    std::atomic<int> running{4};
    std::atomic<bool> forked_enough{false};
    auto sender = [&](int fd, std::vector<unsigned char>& buf, uint64_t seed, std::string* err) {
        for (size_t off = 0; off < kTotal || !forked_enough.load();) {
            const size_t n = off < kTotal ? std::min(buf.size(), kTotal - off) : buf.size();
            fill(buf.data(), n, off, seed);
            size_t done = 0;
            while (done < n) {
                const ssize_t r = send(fd, buf.data() + done, n - done, MSG_NOSIGNAL);
                if (r <= 0) {
                    *err = "send at " + std::to_string(off + done) + ": " + strerror(errno);
                    running--;
                    return;
                }
                done += static_cast<size_t>(r);
            }
            off += n;
        }
        shutdown(fd, SHUT_WR);
        running--;
    };
    auto receiver = [&](int fd, std::vector<unsigned char>& buf, uint64_t seed, std::string* err) {
        size_t off = 0;
        for (;;) {
            const ssize_t r = recv(fd, buf.data(), buf.size(), 0);
            if (r == 0 && off >= kTotal)
                break;
            if (r <= 0) {
                *err = "recv at " + std::to_string(off) + ": " +
                       (r == 0 ? std::string("EOF") : std::string(strerror(errno)));
                running--;
                return;
            }
            for (ssize_t i = 0; i < r; i++) {
                if (buf[static_cast<size_t>(i)] != pattern(off + static_cast<size_t>(i), seed)) {
                    *err = "wrong byte at stream offset " + std::to_string(off + i);
                    running--;
                    return;
                }
            }
            off += static_cast<size_t>(r);
        }
        running--;
    };

    std::string err_sa, err_sb, err_ra, err_rb;
    std::thread ta(sender, p.client.get(), std::ref(send_a), 21, &err_sa);
    std::thread tb(sender, p.server.get(), std::ref(send_b), 22, &err_sb);
    std::thread ra(receiver, p.server.get(), std::ref(recv_a), 21, &err_ra);
    std::thread rb(receiver, p.client.get(), std::ref(recv_b), 22, &err_rb);

    // The forking thread.
    int forks = 0, forks_while_pinned = 0, bad_children = 0;
    std::string child_status;
    while (running.load() == 4 && forks < 60) {
        if (forks >= kMinForks)
            forked_enough = true;
        sleep_ms(40);
        const bool pinned = pins_outstanding() > 0;
        const pid_t pid = fork();
        if (pid < 0) {
            ADD_FAILURE() << "fork: " << strerror(errno);
            break;
        }
        if (pid == 0) {
            // Writes to its copies: any page still shared with the parent
            // is copied now, never under the device's feet in the parent.
            for (size_t i = 0; i < 4; i++)
                memset(scribble[i], 0x5a, scribble_len[i]);
            _exit(0);
        }
        int status = 0;
        if (!reaped_within(pid, 20000, &status)) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            bad_children++;
            child_status += " (hung, killed)";
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad_children++;
            child_status += " status " + std::to_string(status);
        }
        forks++;
        if (pinned)
            forks_while_pinned++;
    }
    forked_enough = true;
    ta.join();
    tb.join();
    ra.join();
    rb.join();

    EXPECT_EQ(err_sa, "");
    EXPECT_EQ(err_sb, "");
    EXPECT_EQ(err_ra, "");
    EXPECT_EQ(err_rb, "");
    EXPECT_EQ(bad_children, 0) << child_status;
    EXPECT_GE(forks, 5) << "too few forks during the transfers";
    EXPECT_GE(forks_while_pinned, 1) << "no fork happened while zero-copy pages were pinned";
    std::cout << "[ INFO     ] " << forks << " forks, " << forks_while_pinned
              << " with zero-copy pages pinned\n";
    // Both directions went (mostly) by zero copy.
    sdp_sock_stats st_c{}, st_s{};
    socklen_t len = sizeof(st_c);
    ASSERT_EQ(getsockopt(p.client.get(), SOL_SDP, SDP_STATS, &st_c, &len), 0);
    len = sizeof(st_s);
    ASSERT_EQ(getsockopt(p.server.get(), SOL_SDP, SDP_STATS, &st_s, &len), 0);
    EXPECT_GT(st_c.zc_tx_bytes, kTotal / 4) << "client -> server hardly used zero copy";
    EXPECT_GT(st_s.zc_tx_bytes, kTotal / 4) << "server -> client hardly used zero copy";

    p = Pair();
    expect_released(kPort);
}

// ---- 3. munmap() / MADV_DONTNEED of the buffer during zero copy -----------------

enum class Yank { kMunmap, kDontNeed };

struct YankCase {
    const char* name;
    Family family;
    Blocked op;
    Yank yank;
    int port;
};

void PrintTo(const YankCase& c, std::ostream* os)
{
    *os << family_name(c.family) << c.name << " port " << c.port;
}

class BufferYanked : public FaultBase, public ::testing::WithParamInterface<YankCase> {};

constexpr size_t kYankRegion = 8 * kMiB;
constexpr size_t kYankTotal = 10 * kMiB; // the stream: the region, then a tail

TEST_P(BufferYanked, CallsReturnStreamConsistentPinsReleased)
{
    const YankCase& c = GetParam();
    const bool sdp = c.family == Family::kSdp;
    warn_if_pinned();
    Pair p = family_pair(c.family, kAddrA, c.port);
    ASSERT_GE(p.server.get(), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);

    auto* region = static_cast<unsigned char*>(
        mmap(nullptr, kYankRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(region, MAP_FAILED) << strerror(errno);
    if (c.op == Blocked::kSend)
        fill(region, kYankRegion, 0);
    unsigned char* const base = region; // what the workers use
    std::atomic<bool> yanked{false};
    std::atomic<bool> done{false};

    // Bytes that came from (or went to) the region may be zeros after
    // MADV_DONTNEED (a fresh zero page under the address); after munmap
    // they are what the pages held: the pattern.
    const bool zeros_ok = c.yank == Yank::kDontNeed;
    auto ok_byte = [&](uint64_t at, unsigned char b) {
        return b == pattern(at) || (zeros_ok && at < kYankRegion && b == 0);
    };

    // Result of the calls on the region.
    std::vector<std::string> region_calls;
    std::string stream_err;
    ReadEnd peer_end;
    std::thread worker, peer;
    const auto resend_from = [&](int fd, uint64_t off) {
        std::vector<unsigned char> good(kMiB);
        while (off < kYankTotal) {
            const size_t n = std::min(good.size(), static_cast<size_t>(kYankTotal - off));
            fill(good.data(), n, off);
            const ssize_t r = send(fd, good.data(), n, MSG_NOSIGNAL);
            if (r <= 0) {
                stream_err = "send at " + std::to_string(off) + ": " + strerror(errno);
                return;
            }
            off += static_cast<uint64_t>(r);
        }
        shutdown(fd, SHUT_WR);
    };

    if (c.op == Blocked::kSend) {
        // The sender sends the region in one call (a slow reader keeps it
        // in progress), then the rest of the stream from a good buffer.
        worker = std::thread([&] {
            uint64_t off = 0;
            while (off < kYankRegion && !yanked.load()) {
                const ssize_t r = send(p.client.get(), base + off, kYankRegion - off, MSG_NOSIGNAL);
                region_calls.push_back(r >= 0 ? std::to_string(r)
                                              : std::string("-1 ") + strerror(errno));
                if (r < 0) {
                    if (errno != EFAULT)
                        stream_err = "send from the region: " + std::string(strerror(errno));
                    break;
                }
                off += static_cast<uint64_t>(r);
            }
            if (stream_err.empty())
                resend_from(p.client.get(), off);
            done = true;
        });
        peer =
            std::thread([&] { peer_end = read_to_end(p.server.get(), 128 * kKiB, 20, ok_byte); });
    } else {
        // The peer streams slowly; the receiver reads into the region with
        // MSG_WAITALL until it is yanked, then into a good buffer.
        peer = std::thread([&] {
            std::vector<unsigned char> out(256 * kKiB);
            for (uint64_t off = 0; off < kYankTotal;) {
                const size_t n = std::min(out.size(), static_cast<size_t>(kYankTotal - off));
                fill(out.data(), n, off);
                const ssize_t r = send(p.client.get(), out.data(), n, MSG_NOSIGNAL);
                if (r <= 0) {
                    peer_end.err = errno;
                    return;
                }
                off += static_cast<uint64_t>(r);
                sleep_ms(20);
            }
            shutdown(p.client.get(), SHUT_WR);
            peer_end.eof = true;
        });
        worker = std::thread([&] {
            uint64_t off = 0;
            while (!yanked.load()) {
                const ssize_t r = recv(p.server.get(), base, kYankRegion, MSG_WAITALL);
                region_calls.push_back(r >= 0 ? std::to_string(r)
                                              : std::string("-1 ") + strerror(errno));
                if (r == 0)
                    break; // the whole stream went into the region: checked below
                if (r < 0) {
                    if (errno != EFAULT)
                        stream_err = "recv into the region: " + std::string(strerror(errno));
                    break;
                }
                // After munmap the region may be gone: look only after
                // MADV_DONTNEED (still mapped).
                if (c.yank == Yank::kDontNeed) {
                    for (ssize_t i = 0; i < r && stream_err.empty(); i++)
                        if (!ok_byte(off + static_cast<uint64_t>(i), base[i]))
                            stream_err = "wrong byte at stream offset " + std::to_string(off + i);
                }
                off += static_cast<uint64_t>(r);
            }
            if (!stream_err.empty()) {
                done = true;
                return;
            }
            // The rest of the stream, intact, at the right offsets.
            ReadEnd rest = read_to_end(p.server.get(), kMiB, 0, [&](uint64_t at, unsigned char b) {
                return b == pattern(off + at);
            });
            if (!rest.eof) {
                stream_err = "after the region: " + rest.describe();
            } else if (!rest.mismatch.empty()) {
                stream_err =
                    "after the region (offset " + std::to_string(off) + "): " + rest.mismatch;
            } else if (off + rest.bytes != kYankTotal) {
                stream_err = "stream of " + std::to_string(off + rest.bytes) + " bytes, sent " +
                             std::to_string(kYankTotal);
            }
            done = true;
        });
    }

    // Strike while the region is in a zero-copy transfer (pinned).
    bool pinned = true;
    if (sdp)
        pinned = eventually([] { return pins_outstanding() > 0; }, 10);
    else
        sleep_ms(300);
    sleep_ms(150);
    EXPECT_TRUE(pinned) << "the region was never pinned: " << pin_text();
    EXPECT_FALSE(done.load()) << "the transfer finished before the buffer was yanked";
    yanked = true;
    int rc = 0;
    if (c.yank == Yank::kMunmap) {
        rc = munmap(region, kYankRegion);
        // Keep the range unusable, so that a call racing the yank gets
        // EFAULT rather than writing into whatever is mapped there next.
        void* hole = mmap(region, kYankRegion, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (hole == MAP_FAILED)
            hole = nullptr;
        region = static_cast<unsigned char*>(hole);
    } else {
        rc = madvise(region, kYankRegion, MADV_DONTNEED);
    }
    EXPECT_EQ(rc, 0) << strerror(errno);

    worker.join();
    peer.join();
    if (region != nullptr)
        munmap(region, kYankRegion);

    std::string calls;
    for (const auto& s : region_calls)
        calls += " " + s;
    std::cout << "[ INFO     ] " << family_name(c.family) << " " << c.name
              << ": calls on the region returned" << calls << "\n";
    EXPECT_EQ(stream_err, "") << "calls on the region:" << calls;
    if (c.op == Blocked::kSend) {
        EXPECT_TRUE(peer_end.eof) << peer_end.describe();
        EXPECT_EQ(peer_end.mismatch, "");
        EXPECT_EQ(peer_end.bytes, kYankTotal) << "the stream lost or gained bytes";
    } else {
        EXPECT_TRUE(peer_end.eof) << "the streaming peer: " << strerror(peer_end.err);
    }
    if (sdp)
        EXPECT_GT(delta(c.op == Blocked::kSend ? "tx_src_avail" : "tx_sink_avail"), 0u);

    p = Pair();
    expect_released(c.port);
}

INSTANTIATE_TEST_SUITE_P(
    Fault, BufferYanked,
    ::testing::Values(YankCase{"SendMunmap", Family::kTcp, Blocked::kSend, Yank::kMunmap, 8131},
                      YankCase{"SendMunmap", Family::kSdp, Blocked::kSend, Yank::kMunmap, 8132},
                      YankCase{"SendDontNeed", Family::kTcp, Blocked::kSend, Yank::kDontNeed, 8133},
                      YankCase{"SendDontNeed", Family::kSdp, Blocked::kSend, Yank::kDontNeed, 8134},
                      YankCase{"RecvMunmap", Family::kTcp, Blocked::kRecv, Yank::kMunmap, 8135},
                      YankCase{"RecvMunmap", Family::kSdp, Blocked::kRecv, Yank::kMunmap, 8136},
                      YankCase{"RecvDontNeed", Family::kTcp, Blocked::kRecv, Yank::kDontNeed, 8137},
                      YankCase{"RecvDontNeed", Family::kSdp, Blocked::kRecv, Yank::kDontNeed,
                               8138}),
    [](const ::testing::TestParamInfo<YankCase>& i) {
        return std::string(family_name(i.param.family)) + i.param.name;
    });

// ---- 4. a stalled page fault must not stall the RDMA CM (F6) --------------------

// A userfaultfd over an anonymous range (MISSING mode): the first access
// faults and waits until resolve() copies the pages in.
class Uffd {
  public:
    explicit Uffd(size_t len) : map_(len) {}
    ~Uffd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    Uffd(const Uffd&) = delete;
    Uffd& operator=(const Uffd&) = delete;

    // "" or why userfaultfd cannot be used.
    std::string open_and_register()
    {
        if (map_.addr == nullptr)
            return std::string("mmap: ") + strerror(errno);
        fd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        std::string why;
        if (fd_ < 0) {
            why = std::string("userfaultfd(2): ") + strerror(errno);
#ifdef USERFAULTFD_IOC_NEW
            const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
            if (dev >= 0) {
                fd_ = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
                if (fd_ < 0)
                    why += std::string("; /dev/userfaultfd: ") + strerror(errno);
                close(dev);
            } else {
                why += std::string("; open /dev/userfaultfd: ") + strerror(errno);
            }
#endif
            if (fd_ < 0)
                return why;
        }
        uffdio_api api{};
        api.api = UFFD_API;
        if (ioctl(fd_, UFFDIO_API, &api) != 0)
            return std::string("UFFDIO_API: ") + strerror(errno);
        uffdio_register reg{};
        reg.range.start = reinterpret_cast<uintptr_t>(map_.addr);
        reg.range.len = map_.len;
        reg.mode = UFFDIO_REGISTER_MODE_MISSING;
        if (ioctl(fd_, UFFDIO_REGISTER, &reg) != 0)
            return std::string("UFFDIO_REGISTER: ") + strerror(errno);
        if ((reg.ioctls & (1ull << _UFFDIO_COPY)) == 0)
            return "UFFDIO_COPY not offered for the range";
        return "";
    }

    // The address of the next page fault, if one comes within `ms`.
    std::optional<uintptr_t> wait_fault(int ms)
    {
        pollfd pfd{fd_, POLLIN, 0};
        if (poll(&pfd, 1, ms) != 1)
            return std::nullopt;
        uffd_msg msg{};
        if (read(fd_, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
            return std::nullopt;
        return static_cast<uintptr_t>(msg.arg.pagefault.address);
    }

    // Fill the whole range with `src` and wake the faulting thread; "" or
    // the error.
    std::string resolve(const unsigned char* src)
    {
        size_t off = 0;
        while (off < map_.len) {
            uffdio_copy cp{};
            cp.dst = reinterpret_cast<uintptr_t>(map_.addr) + off;
            cp.src = reinterpret_cast<uintptr_t>(src) + off;
            cp.len = map_.len - off;
            if (ioctl(fd_, UFFDIO_COPY, &cp) == 0)
                return "";
            if (errno == EAGAIN && cp.copy > 0) {
                off += static_cast<size_t>(cp.copy);
                continue;
            }
            if (errno == EAGAIN)
                continue;
            return std::string("UFFDIO_COPY: ") + strerror(errno);
        }
        return "";
    }

    unsigned char* addr() const
    {
        return map_.addr;
    }
    size_t len() const
    {
        return map_.len;
    }

  private:
    Mapping map_;
    int fd_ = -1;
};

// connect + accept + a few bytes each way over a new SDP connection;
// how long it took, or why it failed.
struct ConnTiming {
    bool ok = false;
    long ms = 0;
    std::string err;
};

ConnTiming timed_connection(const char* ip, int port)
{
    ConnTiming t;
    const auto t0 = Clock::now();
    auto fail = [&](const std::string& what) {
        t.err = what + ": " + strerror(errno);
        t.ms = ms_since(t0);
        return t;
    };
    Fd l(socket(sdp_family(), SOCK_STREAM, 0));
    const sockaddr_in a = make_addr(ip, port);
    if (l.get() < 0 || bind(l.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(l.get(), 4) != 0)
        return fail("listener");
    Fd c(socket(sdp_family(), SOCK_STREAM, 0));
    set_timeouts(c.get(), 20);
    if (connect(c.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0)
        return fail("connect");
    pollfd pfd{l.get(), POLLIN, 0};
    if (poll(&pfd, 1, 20000) != 1)
        return fail("no connection to accept");
    Fd s(accept(l.get(), nullptr, nullptr));
    if (s.get() < 0)
        return fail("accept");
    set_timeouts(s.get(), 20);
    char in[4] = {};
    if (send(c.get(), "ping", 4, MSG_NOSIGNAL) != 4 || recv(s.get(), in, 4, MSG_WAITALL) != 4 ||
        memcmp(in, "ping", 4) != 0)
        return fail("client -> server bytes");
    if (send(s.get(), "pong", 4, MSG_NOSIGNAL) != 4 || recv(c.get(), in, 4, MSG_WAITALL) != 4 ||
        memcmp(in, "pong", 4) != 0)
        return fail("server -> client bytes");
    t.ok = true;
    t.ms = ms_since(t0);
    return t;
}

// Runs argv under timeout(1) with output to `log`; its pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log)
{
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

int wait_exit(pid_t pid)
{
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// rping server and client over RDMA CM (another RDMA CM user of the host);
// retries the client while the server starts.  "" or what failed.
std::string rping_once(const char* ip, int port)
{
    const std::string log = "/tmp/fault-rping-" + std::to_string(port) + ".log";
    const std::string p = std::to_string(port);
    const pid_t server = spawn({"timeout", "20", "rping", "-s", "-a", ip, "-p", p, "-C", "2"}, log);
    if (server < 0)
        return "cannot start rping";
    sleep_ms(200);
    int rc = -1;
    for (int attempt = 0; attempt < 10 && rc != 0; attempt++) {
        if (attempt > 0)
            sleep_ms(200);
        rc = wait_exit(
            spawn({"timeout", "10", "rping", "-c", "-a", ip, "-p", p, "-C", "2", "-v"}, log));
    }
    const int src = wait_exit(server);
    if (rc == 0 && src == 0)
        return "";
    return "rping client exit " + std::to_string(rc) + ", server exit " + std::to_string(src) +
           "\n" + read_file(log).value_or("");
}

struct StallCase {
    const char* name;
    Blocked op;
    int port; // uses port .. port + 5
};

void PrintTo(const StallCase& c, std::ostream* os)
{
    *os << c.name << " ports " << c.port << ".." << c.port + 5;
}

class StalledFault : public FaultBase, public ::testing::WithParamInterface<StallCase> {};

constexpr size_t kStallLen = 256 * kKiB; // >= zcopy_thresh: a send pins it
constexpr size_t kStallRecv = 1000;      // a bcopy receive: copy_to_iter faults
constexpr long kFastMs = 2000;           // "well under the stall"
constexpr long kStallMs = 5000;          // the fault stays unresolved at least this long
constexpr long kHardResolveMs = 20000;   // and at most this long, whatever happens

TEST_P(StalledFault, RdmaCmWorkGoesOnWhileASocketIsStuckInAFault)
{
    const StallCase& c = GetParam();
    const bool is_send = c.op == Blocked::kSend;

    // Without a stall: the reference time of a new connection.
    const ConnTiming ref = timed_connection(kAddrA, c.port + 1);
    ASSERT_TRUE(ref.ok) << ref.err;
    std::cout << "[ INFO     ] new SDP connection without a stall: " << ref.ms << " ms\n";
    ASSERT_LT(ref.ms, kFastMs) << "too slow even without a stall for the timing to mean anything";

    Uffd uffd(kStallLen);
    const std::string why = uffd.open_and_register();
    ASSERT_EQ(why, "") << "userfaultfd is required for this test (root in the guest, "
                          "CONFIG_USERFAULTFD): "
                       << why;
    std::vector<unsigned char> contents(kStallLen);
    fill(contents.data(), contents.size(), 0, 5);

    Pair p = connected_pair(kAddrA, c.port);
    ASSERT_GE(p.server.get(), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);
    if (!is_send) {
        std::vector<unsigned char> small(kStallRecv);
        fill(small.data(), small.size(), 0, 7);
        ASSERT_EQ(send(p.client.get(), small.data(), small.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(kStallRecv));
        ASSERT_TRUE(eventually([&] {
            int n = 0;
            return ioctl(p.server.get(), FIONREAD, &n) == 0 && n >= static_cast<int>(kStallRecv);
        }));
    }
    int peer_lport = 0, peer_rport = 0;
    {
        Fd& peer = is_send ? p.server : p.client;
        sockaddr_in a{};
        socklen_t len = sizeof(a);
        getsockname(peer.get(), reinterpret_cast<sockaddr*>(&a), &len);
        peer_lport = ntohs(a.sin_port);
        len = sizeof(a);
        getpeername(peer.get(), reinterpret_cast<sockaddr*>(&a), &len);
        peer_rport = ntohs(a.sin_port);
    }

    // The stuck call: it faults on the first page and waits in the kernel,
    // with the socket lock held.
    std::atomic<bool> returned{false};
    ssize_t result = 0;
    int result_errno = 0;
    Clock::time_point t_returned;
    std::thread stuck([&] {
        // Signals for the process (SIGCHLD of the rping children spawned
        // below) go to other threads: while posix_spawn() has them blocked
        // in the spawning thread, the kernel may deliver one here, and a
        // send with SO_SNDTIMEO then returns EINTR, as TCP's would.
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
        result = is_send ? send(p.client.get(), uffd.addr(), kStallLen, MSG_NOSIGNAL)
                         : recv(p.server.get(), uffd.addr(), kStallRecv, 0);
        result_errno = errno;
        t_returned = Clock::now();
        returned = true;
    });

    // The resolver: at resolve_now, or at the hard deadline in any case (an
    // old module blocks the checks below until then).
    std::mutex mu;
    std::condition_variable cv;
    bool resolve_now = false;
    std::string resolve_err;
    Clock::time_point t_resolved;
    const auto t_start = Clock::now();
    std::thread resolver([&] {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_until(lk, t_start + std::chrono::milliseconds(kHardResolveMs),
                      [&] { return resolve_now; });
        lk.unlock();
        t_resolved = Clock::now();
        resolve_err = uffd.resolve(contents.data());
    });
    struct Finish {
        std::function<void()> f;
        ~Finish() { f(); }
    } finish{[&] {
        {
            std::lock_guard<std::mutex> lk(mu);
            resolve_now = true;
        }
        cv.notify_all();
        if (resolver.joinable())
            resolver.join();
        if (stuck.joinable())
            stuck.join();
    }};

    const auto fault = uffd.wait_fault(10000);
    ASSERT_TRUE(fault.has_value())
        << "the " << c.name << " never faulted on the userfaultfd range"
        << (returned ? " (it returned " + std::to_string(result) + ")" : std::string());
    const auto t_fault = Clock::now();
    EXPECT_GE(*fault, reinterpret_cast<uintptr_t>(uffd.addr()));
    EXPECT_LT(*fault, reinterpret_cast<uintptr_t>(uffd.addr()) + uffd.len());
    sleep_ms(200);
    ASSERT_FALSE(returned.load()) << "the call returned " << result
                                  << " without the fault resolved";

    // (a) An unrelated connection while the socket is stuck.
    const ConnTiming a = timed_connection(kAddrA, c.port + 2);
    std::cout << "[ INFO     ] (a) new connection during the stall: " << a.ms << " ms\n";
    EXPECT_TRUE(a.ok) << a.err;
    EXPECT_LT(a.ms, kFastMs) << "(a) a new SDP connection waited for the stalled socket";
    EXPECT_FALSE(returned.load()) << "(a) the stall ended early";

    // (b) The stuck socket's peer resets: a CM disconnect for the stuck
    //     socket, whose handler must not wait for its lock.
    {
        Fd& peer = is_send ? p.server : p.client;
        set_linger0(peer.get());
        peer.reset();
    }
    const bool peer_gone = eventually(
        [&] {
            for (const auto& l : proc_sockets())
                if (ends_with_port(l.local, peer_lport) && ends_with_port(l.remote, peer_rport))
                    return false;
            return true;
        },
        5);
    EXPECT_TRUE(peer_gone) << "(b) the peer's socket is still listed 5 s after close\n"
                           << proc_listing();
    sleep_ms(500); // the DREQ reaches the stuck socket's CM id
    const ConnTiming b = timed_connection(kAddrA, c.port + 3);
    std::cout << "[ INFO     ] (b) new connection after the stuck socket's peer closed: " << b.ms
              << " ms\n";
    EXPECT_TRUE(b.ok) << b.err;
    EXPECT_LT(b.ms, kFastMs)
        << "(b) a CM disconnect of the stuck socket stalled an unrelated connection";
    EXPECT_FALSE(returned.load()) << "(b) the stall ended early";

    // (c) A second SDP connection on the other device (rxe1), and rping, a
    //     non-SDP RDMA CM user, when it is available.
    const ConnTiming c2 = timed_connection(kAddrB, c.port + 4);
    std::cout << "[ INFO     ] (c) new connection on rxe1: " << c2.ms << " ms\n";
    EXPECT_TRUE(c2.ok) << c2.err;
    EXPECT_LT(c2.ms, kFastMs) << "(c) a connection on the other device was stalled";
    struct stat st {};
    if (stat("/dev/infiniband/rdma_cm", &st) == 0 && system("command -v rping >/dev/null") == 0) {
        const auto t0 = Clock::now();
        const std::string r = rping_once(kAddrA, c.port + 5);
        std::cout << "[ INFO     ] (c) rping: " << ms_since(t0) << " ms\n";
        EXPECT_EQ(r, "") << "(c) rping during the stall";
    } else {
        std::cout << "[ INFO     ] (c) rping not run (no rping or /dev/infiniband/rdma_cm: "
                     "modprobe rdma_ucm); the rxe1 connection above covers (c)\n";
    }
    EXPECT_FALSE(returned.load()) << "(c) the stall ended early";

    // Hold the fault at least kStallMs, then resolve it: the call returns.
    const long held = ms_since(t_fault);
    if (held < kStallMs)
        sleep_ms(static_cast<int>(kStallMs - held));
    EXPECT_FALSE(returned.load()) << "the stuck call returned before the fault was resolved";
    const bool resolved_on_time = ms_since(t_start) < kHardResolveMs;
    EXPECT_TRUE(resolved_on_time) << "the checks above outlasted the stall: the fault was "
                                     "resolved by the deadline, not after them";
    {
        std::lock_guard<std::mutex> lk(mu);
        resolve_now = true;
    }
    cv.notify_all();
    resolver.join();
    EXPECT_EQ(resolve_err, "");
    if (!eventually([&] { return returned.load(); }, 20)) {
        // Nothing can join a thread stuck for good: end the binary.
        fprintf(stderr,
                "[  FAILED  ] StalledFault/%s: the call is still stuck 20 s after the "
                "fault was resolved; exiting\n",
                c.name);
        fflush(stdout);
        _exit(1);
    }
    stuck.join();
    const long ret_ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(t_returned - t_resolved).count());
    std::cout << "[ INFO     ] the stuck " << c.name << " returned " << result
              << (result < 0 ? std::string(" (") + strerror(result_errno) + ")" : std::string())
              << " " << ret_ms << " ms after the fault was resolved\n";
    if (is_send) {
        // The peer reset during the send: TCP's send would fail the same
        // way, or report the bytes taken before.
        EXPECT_TRUE(result > 0 || result_errno == ECONNRESET || result_errno == EPIPE)
            << "send: " << result << " " << strerror(result_errno);
    } else {
        // The bytes were there before the reset: TCP returns them.
        EXPECT_TRUE(result == static_cast<ssize_t>(kStallRecv) ||
                    (result < 0 && result_errno == ECONNRESET))
            << "recv: " << result << " " << strerror(result_errno);
        if (result == static_cast<ssize_t>(kStallRecv)) {
            for (size_t i = 0; i < kStallRecv; i++)
                ASSERT_EQ(uffd.addr()[i], pattern(i, 7)) << "byte " << i;
        }
    }

    p = Pair();
    for (int port = c.port; port <= c.port + 4; port++)
        expect_released(port);
}

INSTANTIATE_TEST_SUITE_P(Fault, StalledFault,
                         ::testing::Values(StallCase{"send", Blocked::kSend, 8150},
                                           StallCase{"recv", Blocked::kRecv, 8160}),
                         [](const ::testing::TestParamInfo<StallCase>& i) {
                             return std::string(i.param.name);
                         });

// ---- 5. a post to the QP fails (F17) ----------------------------------------------

// sdp.ko's test hook (kernel/sdp_fault.c): the next `count` posts of the
// kinds in `kinds` fail as a broken device would make them fail.
constexpr const char* kFailPosts = "/sys/module/sdp/parameters/fail_posts";
constexpr const char* kFailPostKinds = "/sys/module/sdp/parameters/fail_post_kinds";

struct PostCase {
    const char* name;
    int kinds; // 1 sends, 2 receives, 4 zero copy and probes
    bool zcopy;
    int port; // uses port and port + 1
};

void PrintTo(const PostCase& c, std::ostream* os)
{
    *os << c.name << " port " << c.port;
}

class FailedPost : public FaultBase, public ::testing::WithParamInterface<PostCase> {
  protected:
    void TearDown() override
    {
        write_file(kFailPosts, "0");
        write_file(kFailPostKinds, "7");
        FaultBase::TearDown();
    }
};

// A stream runs client to server; one post fails on either end.  TCP has
// no equivalent (its transmit never fails this way): what is asserted is
// what sdp_qp_failed() promises, and what a reset TCP connection gives.
// Before F17 was fixed a failed data post set qp_error and nothing else:
// the connection stayed ESTABLISHED and both ends waited for ever.
TEST_P(FailedPost, ConnectionResetsBothEndsHearNothingLeaks)
{
    const PostCase& c = GetParam();
    warn_if_pinned();
    Pair p = family_pair(Family::kSdp, kAddrA, c.port);
    ASSERT_GE(p.server.get(), 0);
    const int thresh = c.zcopy ? 4096 : 0;
    ASSERT_EQ(setsockopt(p.client.get(), SOL_SDP, SDP_ZCOPY_THRESH, &thresh, sizeof(thresh)), 0);
    ASSERT_EQ(setsockopt(p.server.get(), SOL_SDP, SDP_ZCOPY_THRESH, &thresh, sizeof(thresh)), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);

    std::atomic<int> ended{0};
    ReadEnd read_end;
    Clock::time_point read_ended;
    std::thread reader([&] {
        read_end = read_to_end(p.server.get(), 256 * kKiB, 0,
                               [](uint64_t at, unsigned char b) { return b == pattern(at); });
        read_ended = Clock::now();
        ended++;
    });
    int send_errno = 0;
    std::atomic<uint64_t> sent{0};
    Clock::time_point send_ended;
    std::thread sender([&] {
        std::vector<unsigned char> buf(kMiB);
        for (;;) {
            fill(buf.data(), buf.size(), sent);
            const ssize_t r = send(p.client.get(), buf.data(), buf.size(), MSG_NOSIGNAL);
            if (r <= 0) {
                send_errno = r < 0 ? errno : 0;
                break;
            }
            sent += static_cast<uint64_t>(r);
        }
        send_ended = Clock::now();
        ended++;
    });
    sleep_ms(300); // streaming
    EXPECT_TRUE(write_file(kFailPostKinds, std::to_string(c.kinds)));
    const auto armed = Clock::now();
    EXPECT_TRUE(write_file(kFailPosts, "1"));
    // Both threads end on their own; if they do not within 20 s, the test
    // failed, and shutdown() ends them.
    if (!eventually([&] { return ended.load() == 2; }, 20)) {
        ADD_FAILURE() << "the connection did not end 20 s after the failed post (sent "
                      << sent.load() << ", read " << read_end.bytes << ")";
        shutdown(p.client.get(), SHUT_RDWR);
        shutdown(p.server.get(), SHUT_RDWR);
    }
    sender.join();
    reader.join();
    EXPECT_EQ(read_file(kFailPosts).value_or("?"), "0\n") << "the injected failure never fired";
    EXPECT_GE(delta("conn_err_transport"), 1u);
    EXPECT_TRUE(send_errno == ECONNRESET || send_errno == EPIPE)
        << "sender: " << strerror(send_errno) << " after " << sent.load() << " bytes";
    EXPECT_TRUE(read_end.eof || read_end.err == ECONNRESET) << "reader: " << read_end.describe();
    EXPECT_TRUE(read_end.mismatch.empty()) << read_end.describe();
    // The bytes read are the stream's (pattern checked): at most the send
    // in flight beyond what the sender counted, since a zero-copy send
    // counts only what the peer acknowledged, and the reset can overtake
    // the acknowledgement of bytes the peer read.
    EXPECT_LE(read_end.bytes, sent.load() + kMiB);
    const auto ms = [&](Clock::time_point t) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(t - armed).count();
    };
    EXPECT_LT(ms(send_ended), 10000) << "the sender heard of the reset late";
    EXPECT_LT(ms(read_ended), 10000) << "the reader heard of the reset late";
    std::cout << "[ INFO     ] " << c.name << ": sender " << strerror(send_errno) << " after "
              << ms(send_ended) << " ms, reader " << read_end.describe() << " after "
              << ms(read_ended) << " ms\n";
    p = Pair();
    expect_released(c.port);

    // The device is fine: the next connection works.
    Pair q = family_pair(Family::kSdp, kAddrA, c.port + 1);
    ASSERT_GE(q.server.get(), 0);
    const char out = 'x';
    char in = 0;
    ASSERT_EQ(send(q.client.get(), &out, 1, 0), 1) << strerror(errno);
    ASSERT_EQ(recv(q.server.get(), &in, 1, 0), 1) << strerror(errno);
    EXPECT_EQ(in, out);
    q = Pair();
    expect_released(c.port + 1);
}

INSTANTIATE_TEST_SUITE_P(
    Fault, FailedPost,
    ::testing::Values(PostCase{"send_bcopy", 1, false, 8170}, PostCase{"send_zcopy", 1, true, 8172},
                      PostCase{"recv", 2, false, 8174}, PostCase{"zcopy_rdma", 4, true, 8176}),
    [](const ::testing::TestParamInfo<PostCase>& i) { return std::string(i.param.name); });

// A send buffer is allocated when a send first needs it (sdp.ko's send
// ring starts empty).  If that allocation fails, as it can under memory
// pressure, the send does what TCP's does when its allocation fails: a
// non-blocking one gets EAGAIN, a blocking one waits for memory and goes
// on; no kernel warning, and the stream arrives whole.
class FailedAlloc : public FaultBase {
  protected:
    void TearDown() override
    {
        write_file(kFailPosts, "0");
        write_file(kFailPostKinds, "7");
        FaultBase::TearDown();
    }
};

TEST_F(FailedAlloc, SendWaitsForMemoryAsTcpsDoes)
{
    Pair p = family_pair(Family::kSdp, kAddrA, 8178);
    ASSERT_GE(p.server.get(), 0);
    const int off = 0; // bcopy: the stream after the failures fills the send ring
    ASSERT_EQ(setsockopt(p.client.get(), SOL_SDP, SDP_ZCOPY_THRESH, &off, sizeof(off)), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);
    ASSERT_TRUE(write_file(kFailPostKinds, "8"));
    const unsigned char first[3] = {pattern(0), pattern(1), pattern(2)};
    // Non-blocking: EAGAIN, nothing sent.
    ASSERT_TRUE(write_file(kFailPosts, "1"));
    errno = 0;
    EXPECT_EQ(send(p.client.get(), first, sizeof(first), MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN) << strerror(errno);
    EXPECT_EQ(read_file(kFailPosts).value_or("?"), "0\n") << "the injected failure never fired";
    // Blocking: three failures in a row, then the memory is there.
    ASSERT_TRUE(write_file(kFailPosts, "3"));
    EXPECT_EQ(send(p.client.get(), first, sizeof(first), 0), 3) << strerror(errno);
    EXPECT_EQ(read_file(kFailPosts).value_or("?"), "0\n") << "the injected failures never fired";
    EXPECT_EQ(delta("conn_err_reset"), 0u);
    // The stream goes on from there, checked from its first byte.
    constexpr size_t kBytes = 2 * kMiB;
    ReadEnd read_end;
    std::thread reader([&] {
        read_end = read_to_end(p.server.get(), 64 * kKiB, 0,
                               [](uint64_t at, unsigned char b) { return b == pattern(at); });
    });
    std::vector<unsigned char> buf(100 * kKiB);
    uint64_t sent = sizeof(first);
    while (sent < kBytes) {
        const size_t n = std::min<uint64_t>(buf.size(), kBytes - sent);
        fill(buf.data(), n, sent);
        const ssize_t r = send(p.client.get(), buf.data(), n, MSG_NOSIGNAL);
        ASSERT_GT(r, 0) << strerror(errno);
        sent += static_cast<uint64_t>(r);
    }
    shutdown(p.client.get(), SHUT_WR);
    reader.join();
    expect_whole_stream(read_end, kBytes);
    p = Pair();
    expect_released(8178);
}

// A reader that lags makes its receive ring add buffers, and the ring
// first grows its completion queue (each posted buffer needs room for its
// completion).  If that resize fails, as a device without resizable CQs
// or a lack of memory makes it fail, the ring stays within the room the
// CQ has: no CQ overrun, no reset, and the stream arrives whole.
TEST_F(FailedAlloc, ARingWhoseCqCannotGrowStaysWithinIt)
{
    Pair p = family_pair(Family::kSdp, kAddrA, 8180);
    ASSERT_GE(p.server.get(), 0);
    // bcopy: the unread data fills receive buffers, and the reader's
    // first zero-copy receive would grow the CQ for zero copy.
    const int off = 0;
    ASSERT_EQ(setsockopt(p.client.get(), SOL_SDP, SDP_ZCOPY_THRESH, &off, sizeof(off)), 0);
    ASSERT_EQ(setsockopt(p.server.get(), SOL_SDP, SDP_ZCOPY_THRESH, &off, sizeof(off)), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);
    const auto cq_entries = [](int fd) {
        sdp_sock_stats st{};
        socklen_t len = sizeof(st);
        return getsockopt(fd, SOL_SDP, SDP_STATS, &st, &len) == 0 ? st.cq_entries : 0;
    };
    const uint64_t fresh = cq_entries(p.server.get());
    ASSERT_GT(fresh, 0u);
    // The reader's first growth of its buffers is refused (32), so that
    // it takes the unread data in more small buffers than the CQ has room
    // for; then the CQ's resize fails (16).
    ASSERT_TRUE(write_file(kFailPostKinds, "48"));
    ASSERT_TRUE(write_file(kFailPosts, "2"));
    constexpr size_t kBytes = 400000;
    std::atomic<bool> written{false};
    std::thread writer([&] {
        std::vector<unsigned char> buf(kBytes);
        fill(buf.data(), buf.size(), 0);
        size_t sent = 0;
        while (sent < kBytes) {
            const ssize_t r = send(p.client.get(), buf.data() + sent, kBytes - sent, MSG_NOSIGNAL);
            if (r <= 0)
                break;
            sent += static_cast<size_t>(r);
        }
        written = sent == kBytes;
        shutdown(p.client.get(), SHUT_WR);
    });
    // Nothing is read until the ring has added what it can.
    EXPECT_TRUE(eventually([&] { return delta("cq_grow_refused") == 1; }))
        << delta("rx_buffers_added") << " receive buffers added";
    EXPECT_EQ(read_file(kFailPosts).value_or("?"), "0\n") << "the injected failures never fired";
    EXPECT_EQ(delta("rx_buffers_grow_refused"), 1u);
    EXPECT_EQ(cq_entries(p.server.get()), fresh) << "the CQ grew after all";
    const ReadEnd read_end =
        read_to_end(p.server.get(), 64 * kKiB, 0,
                    [](uint64_t at, unsigned char b) { return b == pattern(at); });
    writer.join();
    EXPECT_TRUE(written.load());
    expect_whole_stream(read_end, kBytes);
    EXPECT_EQ(delta("cq_grown"), 0u);
    EXPECT_EQ(delta("conn_err_transport"), 0u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
    p = Pair();
    expect_released(8180);
}

// The first zero-copy transfer of a connection makes room in its CQ for
// zero copy's work requests.  If that resize fails (no memory, a device
// that says no), zero copy stays off for the connection: its transfers go
// by bcopy, whole, and the connection lives.
TEST_F(FailedAlloc, ACqWithoutRoomForZeroCopyLeavesItOff)
{
    // Receive buffers as large as they get from the start: a ring of small
    // ones adds buffers for the lagging reader, and resizes the CQ for them
    // (cq_grown), before or after the reader's first zero copy.
    const SysctlFor full_size("buf_size_initial", "0");
    Pair p = family_pair(Family::kSdp, kAddrA, 8182);
    ASSERT_GE(p.server.get(), 0);
    set_timeouts(p.client.get(), 30);
    set_timeouts(p.server.get(), 30);
    ASSERT_TRUE(write_file(kFailPostKinds, "16"));
    ASSERT_TRUE(write_file(kFailPosts, "2")); // both ends' first zero copy
    constexpr size_t kBytes = size_t{4} * 1024 * 1024;
    std::atomic<bool> written{false};
    std::thread writer([&] {
        std::vector<unsigned char> buf(kBytes);
        fill(buf.data(), buf.size(), 0);
        written =
            send(p.client.get(), buf.data(), kBytes, MSG_NOSIGNAL) == static_cast<ssize_t>(kBytes);
        shutdown(p.client.get(), SHUT_WR);
    });
    const ReadEnd read_end =
        read_to_end(p.server.get(), 256 * kKiB, 0,
                    [](uint64_t at, unsigned char b) { return b == pattern(at); });
    writer.join();
    EXPECT_TRUE(written.load());
    expect_whole_stream(read_end, kBytes);
    EXPECT_EQ(read_file(kFailPosts).value_or("?"), "0\n") << "the injected failures never fired";
    EXPECT_EQ(delta("cq_grow_refused"), 2u);
    EXPECT_EQ(delta("cq_grown"), 0u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u) << "zero copy without room in the CQ";
    EXPECT_EQ(delta("conn_err_transport"), 0u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
    p = Pair();
    expect_released(8182);
}

// ---- 6. at the end: no module reference left ------------------------------------

// sdp.ko's reference count with no SDP socket, at the start of the binary;
// after the last test (global tear-down, which fails the binary like a
// test) it must be the same once every socket is gone.
struct ModuleReferences : ::testing::Environment {
    long refs = -1;
    bool clean_start = false;

    static int fin_bound_s()
    {
        const long fin_ms = sdp_sysctl("fin_timeout_ms");
        return static_cast<int>((fin_ms > 0 ? fin_ms : 30000) / 1000 + 10);
    }
    void SetUp() override
    {
        signal(SIGPIPE, SIG_IGN);
        clean_start = eventually([] { return proc_sockets().empty(); }, fin_bound_s());
        refs = module_refcnt("sdp");
        if (!clean_start)
            std::cout << "[ WARNING  ] SDP sockets of earlier runs at the start:\n"
                      << proc_listing();
        std::cout << "[ INFO     ] sdp.ko refcnt at the start: " << refs << "\n";
    }
    void TearDown() override
    {
        ASSERT_GE(refs, 0) << "sdp.ko was not loaded at the start";
        const int bound = fin_bound_s();
        EXPECT_TRUE(eventually([] { return proc_sockets().empty(); }, bound))
            << "SDP sockets left " << bound << " s after the last test\n"
            << proc_listing();
        EXPECT_TRUE(eventually([] { return pins_outstanding() == 0; }, 10)) << pin_text();
        // Sockets of earlier binaries may have held references at the start.
        const bool back = eventually(
            [&] {
                return clean_start ? module_refcnt("sdp") == refs : module_refcnt("sdp") <= refs;
            },
            5);
        EXPECT_TRUE(back) << "sdp.ko refcnt " << module_refcnt("sdp") << ", at the start " << refs;
        std::cout << "[ INFO     ] sdp.ko refcnt at the end: " << module_refcnt("sdp") << "\n";
    }
};
[[maybe_unused]] const auto* const kModuleReferences =
    ::testing::AddGlobalTestEnvironment(new ModuleReferences);

} // namespace
} // namespace sdp::vmtest
