// SPDX-License-Identifier: GPL-2.0
//
// Zero copy over Soft-RoCE: large blocking transfers go by RDMA Read
// (SrcAvail) or RDMA Write (SinkAvail) straight between the applications'
// buffers, and every TCP guarantee still holds: partial reads, MSG_PEEK,
// signals, send/send deadlock, memlock limits, registration failures.
// The counters of /proc/net/sdpstats and SDP_STATS say which path moved
// the bytes and how many the CPU copied.
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded and net.sdp.zcopy_thresh at its default (64 KiB).
#include "socket_util.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <liburing.h>
#include <linux/capability.h>
#include <linux/errqueue.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

namespace sdp::vmtest {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1 << 20;

// Byte i of the test stream: position-dependent, so a misplaced or
// duplicated block is caught, not only a corrupted one.
unsigned char pattern(uint64_t i, uint64_t seed = 0)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z ^= z >> 29;
    return static_cast<unsigned char>(z ^ (z >> 13));
}

void fill(std::vector<unsigned char>& buf, uint64_t at, uint64_t seed = 0)
{
    for (size_t i = 0; i < buf.size(); i++)
        buf[i] = pattern(at + i, seed);
}

// Send `total` pattern bytes in blocking sends of `chunk`.
void send_stream(int fd, size_t total, size_t chunk, uint64_t seed = 0)
{
    std::vector<unsigned char> buf;
    size_t off = 0;
    while (off < total) {
        buf.resize(std::min(chunk, total - off));
        fill(buf, off, seed);
        size_t done = 0;
        while (done < buf.size()) {
            const ssize_t r = send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL);
            ASSERT_GT(r, 0) << "at " << off + done << ": " << strerror(errno);
            done += static_cast<size_t>(r);
        }
        off += buf.size();
    }
}

// Receive `total` bytes with recv() of up to `chunk` and check every one.
void recv_stream(int fd, size_t total, size_t chunk, uint64_t seed = 0, int flags = 0)
{
    std::vector<unsigned char> buf(chunk);
    size_t off = 0;
    while (off < total) {
        const ssize_t r = recv(fd, buf.data(), std::min(chunk, total - off), flags);
        ASSERT_GT(r, 0) << "at " << off << " of " << total << ": " << strerror(errno);
        for (ssize_t i = 0; i < r; i++)
            ASSERT_EQ(buf[static_cast<size_t>(i)], pattern(off + static_cast<size_t>(i), seed))
                << "byte " << off + static_cast<size_t>(i);
        off += static_cast<size_t>(r);
    }
}

sdp_sock_stats sock_stats(int fd)
{
    sdp_sock_stats st{};
    socklen_t len = sizeof(st);
    EXPECT_EQ(getsockopt(fd, SOL_SDP, SDP_STATS, &st, &len), 0) << strerror(errno);
    EXPECT_EQ(len, sizeof(st));
    return st;
}

// The running kernel's version as major * 1000 + minor (6.12: 6012), or 0.
int kernel_version()
{
    utsname u{};
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
        return 0;
    return major * 1000 + minor;
}

// A small ext2 file system on a loop device, its image in /tmp (tmpfs):
// a file system whose shared writable mappings need dirty tracking
// (page_mkwrite, writeback), unlike tmpfs or the guest's 9p root.
// Unmounted and removed on destruction.
class Ext2Mount {
  public:
    Ext2Mount()
    {
        char base[] = "/tmp/sdp-ext2-XXXXXX";
        if (mkdtemp(base) == nullptr) {
            error_ = std::string("mkdtemp: ") + strerror(errno);
            return;
        }
        base_ = base;
        image_ = base_ + "/fs.img";
        dir_ = base_ + "/mnt";
        if (mkdir(dir_.c_str(), 0700) != 0) {
            error_ = "mkdir " + dir_ + ": " + strerror(errno);
            return;
        }
        {
            Fd img(open(image_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
            if (img.get() < 0 || ftruncate(img.get(), 16 * kMiB) != 0) {
                error_ = "image " + image_ + ": " + strerror(errno);
                return;
            }
        }
        // loop and ext4 (which serves ext2) are modules on Debian's kernels.
        if (!run("modprobe -a loop ext4") || !run("mkfs.ext2 -q -F " + image_) ||
            !run("mount -t ext2 -o loop " + image_ + " " + dir_))
            return;
        mounted_ = true;
        struct statfs fs {};
        if (statfs(dir_.c_str(), &fs) != 0 || fs.f_type != 0xEF53 /* EXT2_SUPER_MAGIC */) {
            error_ = dir_ + " is not an ext2 mount";
            return;
        }
        ok_ = true;
    }
    ~Ext2Mount()
    {
        // Lazy as a last resort, so a failed test leaves no busy mount;
        // the loop device goes with the mount (mount -o loop: autoclear).
        if (mounted_ && umount2(dir_.c_str(), 0) != 0) {
            ADD_FAILURE() << "umount " << dir_ << ": " << strerror(errno);
            umount2(dir_.c_str(), MNT_DETACH);
        }
        if (!image_.empty())
            unlink(image_.c_str());
        if (!dir_.empty())
            rmdir(dir_.c_str());
        if (!base_.empty())
            rmdir(base_.c_str());
    }
    Ext2Mount(const Ext2Mount&) = delete;
    Ext2Mount& operator=(const Ext2Mount&) = delete;

    bool ok() const { return ok_; }
    const std::string& error() const { return error_; }
    const std::string& dir() const { return dir_; }

  private:
    bool run(const std::string& cmd)
    {
        const int rc = std::system((cmd + " 2>&1").c_str());
        if (rc != 0)
            error_ = "'" + cmd + "' failed: status " + std::to_string(rc);
        return rc == 0;
    }

    std::string base_, image_, dir_, error_;
    bool mounted_ = false;
    bool ok_ = false;
};

// A shared mapping, unmapped on scope exit.
class Mapping {
  public:
    Mapping(int fd, size_t len)
        : len_(len), p_(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
    {
    }
    ~Mapping()
    {
        if (p_ != MAP_FAILED)
            munmap(p_, len_);
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;

    bool ok() const { return p_ != MAP_FAILED; }
    unsigned char* data() const { return static_cast<unsigned char*>(p_); }

  private:
    size_t len_;
    void* p_;
};

void set_sysctl(const char* name, const std::string& value)
{
    ASSERT_TRUE(write_file(std::string("/proc/sys/net/sdp/") + name, value)) << name;
}

class ZeroCopy : public ::testing::Test {
  protected:
    void SetUp() override
    {
        port_ = next_port++;
        p_ = connected_pair(kAddrA, port_);
        ASSERT_GE(p_.server.get(), 0);
        before_ = counters();
    }
    void TearDown() override
    {
        set_sysctl("zcopy_fail_reg", "0");
        set_sysctl("zcopy_thresh", "65536");
        set_sysctl("zcopy_sink_wait_ms", "200");
    }
    unsigned long long delta(const char* name) { return counter_delta(before_, name); }

    Pair p_;
    std::map<std::string, unsigned long long> before_;
    int port_ = 0;
    static inline int next_port = 7400;
};

TEST_F(ZeroCopy, SrcAvailWhenTheSenderComesFirst)
{
    set_sysctl("zcopy_sink_wait_ms", "5000"); // the offer waits for the late reader
    constexpr size_t kTotal = 8 * kMiB;
    std::thread sender([&] { send_stream(p_.client.get(), kTotal, kMiB); });
    // Let the first SrcAvail wait for the reader.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    recv_stream(p_.server.get(), kTotal, kMiB);
    sender.join();
    EXPECT_GT(delta("zcopy_rdma_reads"), 0u);
    EXPECT_GE(delta("zcopy_tx_bytes"), kTotal / 2);
    EXPECT_EQ(delta("zcopy_tx_bytes"), delta("zcopy_rx_bytes"));
    // RDMA moved the bytes: the CPU copied (almost) none of them.
    EXPECT_LT(delta("cpu_copy_bytes"), kTotal / 8);
    const sdp_sock_stats tx = sock_stats(p_.client.get());
    const sdp_sock_stats rx = sock_stats(p_.server.get());
    EXPECT_EQ(tx.tx_bytes, kTotal);
    EXPECT_EQ(rx.rx_bytes, kTotal);
    EXPECT_EQ(tx.zc_tx_bytes + tx.tx_bcopy_bytes, kTotal);
    EXPECT_EQ(rx.zc_rx_bytes + rx.rx_bcopy_bytes, kTotal);
    EXPECT_GT(tx.src_avail_sent, 0u);
    EXPECT_GT(rx.rdma_reads, 0u);
}

// While one thread's zero-copy send owns the stream, a non-blocking send
// of another gets EAGAIN; poll() must agree (no POLLOUT), or an event loop
// spins on a socket that takes nothing.  POLLOUT comes back when it ends.
TEST_F(ZeroCopy, PollSaysNotWritableWhileAZeroCopySendOwnsTheStream)
{
    set_sysctl("zcopy_sink_wait_ms", "5000"); // the offer waits for the reader
    constexpr size_t kTotal = 4 * kMiB;
    const int c = p_.client.get();
    std::thread sender([&] { send_stream(c, kTotal, kTotal); });
    bool offered = false;
    for (int i = 0; i < 400 && !offered; i++) {
        offered = sock_stats(c).src_avail_sent > 0;
        if (!offered)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(offered) << "no SrcAvail within 2 s";
    pollfd pfd{c, POLLOUT, 0};
    EXPECT_EQ(poll(&pfd, 1, 0), 0) << "revents " << pfd.revents;
    const char byte = 'x';
    errno = 0;
    EXPECT_EQ(send(c, &byte, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    recv_stream(p_.server.get(), kTotal, kMiB);
    sender.join();
    pfd.revents = 0;
    EXPECT_EQ(poll(&pfd, 1, 5000), 1);
    EXPECT_TRUE((pfd.revents & POLLOUT) != 0);
    EXPECT_GT(delta("zcopy_rdma_reads"), 0u);
}

TEST_F(ZeroCopy, SinkAvailWhenTheReceiverWaitsFirst)
{
    constexpr size_t kTotal = 8 * kMiB;
    std::thread reader([&] { recv_stream(p_.server.get(), kTotal, 2 * kMiB); });
    // The receiver first: its SinkAvail is out before the sender starts.
    // A fixed pause was not enough on a loaded host, where the sender's
    // SrcAvail then crossed the advertisement.
    const bool advertised =
        eventually([&] { return sock_stats(p_.server.get()).sink_avail_sent > 0; }, 10);
    EXPECT_TRUE(advertised) << "the waiting receiver never advertised";
    send_stream(p_.client.get(), kTotal, 2 * kMiB);
    reader.join();
    if (delta("zcopy_rdma_writes") == 0) {
        // Seen twice in a whole tier on a busy host, never alone: say why.
        std::string moved;
        for (const auto& [name, value] : counters()) {
            const auto b = before_.find(name);
            const unsigned long long was = b == before_.end() ? 0 : b->second;
            if (value != was)
                moved += " " + name + " +" + std::to_string(value - was);
        }
        ADD_FAILURE() << "no RDMA Write; counters that moved:" << moved;
    }
    EXPECT_GT(delta("zcopy_rdma_writes"), 0u);
    EXPECT_GT(delta("tx_sink_avail"), 0u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), delta("zcopy_rx_bytes"));
    EXPECT_LT(delta("cpu_copy_bytes"), kTotal / 8);
    EXPECT_GT(sock_stats(p_.server.get()).sink_avail_sent, 0u);
    EXPECT_GT(sock_stats(p_.client.get()).rdma_writes, 0u);
}

TEST_F(ZeroCopy, SmallRecvsReadPartOfAnOffer)
{
    set_sysctl("zcopy_sink_wait_ms", "5000");
    constexpr size_t kTotal = 2 * kMiB;
    std::thread sender([&] { send_stream(p_.client.get(), kTotal, kTotal); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // 100 000-byte reads: each takes exactly that much of the offer.
    std::vector<unsigned char> buf(100000);
    size_t off = 0;
    while (off < kTotal) {
        const size_t want = std::min(buf.size(), kTotal - off);
        const ssize_t r = recv(p_.server.get(), buf.data(), want, MSG_WAITALL);
        ASSERT_EQ(r, static_cast<ssize_t>(want)) << strerror(errno);
        for (size_t i = 0; i < want; i++)
            ASSERT_EQ(buf[i], pattern(off + i)) << off + i;
        off += want;
    }
    sender.join();
    EXPECT_GT(delta("zcopy_rdma_reads"), 1u);
}

TEST_F(ZeroCopy, TinyRecvsGiveTheOfferUp)
{
    set_sysctl("zcopy_sink_wait_ms", "5000");
    constexpr size_t kTotal = kMiB;
    std::thread sender([&] { send_stream(p_.client.get(), kTotal, kTotal); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // 100-byte reads: a few by RDMA Read, then SendSM and the rest by
    // bcopy (not 10 000 RDMA Reads of 100 bytes each).
    std::vector<unsigned char> buf(100);
    size_t off = 0;
    while (off < kTotal) {
        const ssize_t r = recv(p_.server.get(), buf.data(), buf.size(), 0);
        ASSERT_GT(r, 0) << strerror(errno);
        for (ssize_t i = 0; i < r; i++)
            ASSERT_EQ(buf[static_cast<size_t>(i)], pattern(off + static_cast<size_t>(i)))
                << off + static_cast<size_t>(i);
        off += static_cast<size_t>(r);
    }
    sender.join();
    EXPECT_EQ(off, kTotal);
    EXPECT_GE(delta("zcopy_fallback_small_reads"), 1u);
    EXPECT_GE(delta("tx_send_sm"), 1u);
    EXPECT_LE(delta("zcopy_rdma_reads"), 16u);
}

TEST_F(ZeroCopy, PeekOverAnOfferFallsBackToBcopy)
{
    set_sysctl("zcopy_sink_wait_ms", "5000");
    constexpr size_t kTotal = 512 * kKiB;
    std::thread sender([&] { send_stream(p_.client.get(), kTotal, kTotal); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<unsigned char> peek(1000);
    const ssize_t r = recv(p_.server.get(), peek.data(), peek.size(), MSG_PEEK);
    ASSERT_GT(r, 0) << strerror(errno);
    for (ssize_t i = 0; i < r; i++)
        ASSERT_EQ(peek[static_cast<size_t>(i)], pattern(static_cast<uint64_t>(i)));
    recv_stream(p_.server.get(), kTotal, 64 * kKiB);
    sender.join();
    EXPECT_EQ(delta("zcopy_fallback_peek"), 1u);
    EXPECT_GE(delta("tx_send_sm"), 1u);
}

TEST_F(ZeroCopy, NonblockingSendsAndThresholdZeroUseBcopy)
{
    int zero = 0;
    ASSERT_EQ(setsockopt(p_.client.get(), SOL_SDP, SDP_ZCOPY_THRESH, &zero, sizeof(zero)), 0);
    int got = -1;
    socklen_t len = sizeof(got);
    ASSERT_EQ(getsockopt(p_.client.get(), SOL_TCP, SDP_ZCOPY_THRESH, &got, &len), 0);
    EXPECT_EQ(got, 0);
    std::thread reader([&] { recv_stream(p_.server.get(), 2 * kMiB, 64 * kKiB); });
    send_stream(p_.client.get(), kMiB, kMiB);
    // Non-blocking: whatever fits, by bcopy.
    int thresh = 4096;
    ASSERT_EQ(setsockopt(p_.client.get(), SOL_TCP, SDP_ZCOPY_THRESH, &thresh, sizeof(thresh)), 0);
    std::vector<unsigned char> buf(kMiB);
    fill(buf, kMiB);
    size_t off = 0;
    while (off < buf.size()) {
        const ssize_t r = send(p_.client.get(), buf.data() + off, buf.size() - off, MSG_DONTWAIT);
        if (r < 0) {
            ASSERT_EQ(errno, EAGAIN);
            pollfd pfd{p_.client.get(), POLLOUT, 0};
            poll(&pfd, 1, 1000);
            continue;
        }
        off += static_cast<size_t>(r);
    }
    reader.join();
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    EXPECT_EQ(sock_stats(p_.client.get()).tx_bcopy_bytes, 2 * kMiB);
    const int bad = -1;
    EXPECT_EQ(setsockopt(p_.client.get(), SOL_SDP, SDP_ZCOPY_THRESH, &bad, sizeof(bad)), -1);
    EXPECT_EQ(errno, EINVAL);
}

TEST_F(ZeroCopy, RegistrationFailureFallsBackToBcopy)
{
    set_sysctl("zcopy_fail_reg", "1");
    constexpr size_t kTotal = 4 * kMiB;
    std::thread sender([&] { send_stream(p_.client.get(), kTotal, kMiB); });
    recv_stream(p_.server.get(), kTotal, kMiB);
    sender.join();
    EXPECT_GT(delta("zcopy_reg_failures"), 0u);
    EXPECT_GT(delta("zcopy_fallback_reg"), 0u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    EXPECT_EQ(sock_stats(p_.client.get()).tx_bytes, kTotal);
}

// Without CAP_IPC_LOCK, pinning is bounded by RLIMIT_MEMLOCK: beyond it the
// bytes go by bcopy, never as an error.
TEST_F(ZeroCopy, MemlockLimitFallsBackToBcopy)
{
    constexpr size_t kTotal = 4 * kMiB;
    std::thread reader([&] { recv_stream(p_.server.get(), kTotal, 64 * kKiB); });
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        rlimit lim{64 * kKiB, 64 * kKiB};
        if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0)
            _exit(2);
        __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2]{};
        if (syscall(SYS_capget, &hdr, data) != 0)
            _exit(3);
        data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
        data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
        if (syscall(SYS_capset, &hdr, data) != 0)
            _exit(4);
        std::vector<unsigned char> buf(kMiB);
        for (size_t off = 0; off < kTotal; off += buf.size()) {
            fill(buf, off);
            size_t done = 0;
            while (done < buf.size()) {
                const ssize_t r = send(p_.client.get(), buf.data() + done, buf.size() - done, 0);
                if (r <= 0)
                    _exit(5);
                done += static_cast<size_t>(r);
            }
        }
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    reader.join();
    EXPECT_GT(delta("zcopy_fallback_memlock"), 0u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
}

// Both sides blocked in large sends before reading: the sink of each
// SrcAvail detects the deadlock (own SrcAvail out, no receive posted) and
// answers SendSM; both finish by bcopy.
TEST_F(ZeroCopy, SendSendDeadlockResolvedBySendSm)
{
    constexpr size_t kSmall = 256 * kKiB; // fits the rings, as it would TCP's buffers
    auto side = [](int fd, uint64_t seed_out, uint64_t seed_in) {
        send_stream(fd, kSmall, kSmall, seed_out);
        recv_stream(fd, kSmall, kSmall, seed_in);
    };
    std::thread a(side, p_.client.get(), 1, 2);
    std::thread b(side, p_.server.get(), 2, 1);
    a.join();
    b.join();
    EXPECT_GE(delta("tx_send_sm"), 1u);
    EXPECT_GE(delta("zcopy_fallback_send_sm"), 1u);
}

TEST_F(ZeroCopy, BothSend64MiBBeforeReading)
{
    constexpr size_t kTotal = 64 * kMiB;
    std::atomic<int> sending{2};
    auto side = [&](int fd, uint64_t seed_out, uint64_t seed_in) {
        std::thread sender([&] {
            send_stream(fd, kTotal, 4 * kMiB, seed_out);
            sending--;
        });
        // Reading starts only once both sends are under way.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        recv_stream(fd, kTotal, kMiB, seed_in);
        sender.join();
    };
    std::thread a(side, p_.client.get(), 3, 4);
    std::thread b(side, p_.server.get(), 4, 3);
    a.join();
    b.join();
    EXPECT_EQ(sending.load(), 0);
    EXPECT_GE(delta("tx_send_sm"), 1u) << "both blocked in sends: a deadlock to break";
}

// A single-threaded program that sends and then reads the other end, as it
// may over TCP: the offer nobody reads goes by bcopy after
// net.sdp.zcopy_sink_wait_ms, and the send returns.
TEST_F(ZeroCopy, SendThenReadInOneThreadWorksAsOverTcp)
{
    send_stream(p_.client.get(), 300 * kKiB, 300 * kKiB, 5);
    recv_stream(p_.server.get(), 300 * kKiB, 300 * kKiB, 5, MSG_WAITALL);
    EXPECT_GE(delta("zcopy_fallback_no_reader"), 1u);
    EXPECT_GE(delta("rx_send_sm"), 1u);
    EXPECT_GE(delta("rx_src_avail_cancel"), 1u) << "the source cancels on SendSM";
}

volatile sig_atomic_t g_alarms = 0;
void on_alarm(int)
{
    g_alarms = g_alarms + 1;
}

// A zero-copy send interrupted by a signal before the sink read any of it:
// the SrcAvail is cancelled, and the send returns what the ring takes
// without waiting (TCP's would have buffered that much before it slept);
// EINTR only when nothing fits.  The stream stays consistent: the peer
// reads those bytes, then what follows.
TEST_F(ZeroCopy, SignalCancelsABlockedSend)
{
    set_sysctl("zcopy_sink_wait_ms", "60000"); // the offer waits for a reader
    struct sigaction sa {};
    sa.sa_handler = on_alarm; // no SA_RESTART
    ASSERT_EQ(sigaction(SIGALRM, &sa, nullptr), 0);
    std::vector<unsigned char> big(4 * kMiB);
    fill(big, 0, 8);
    ualarm(300000, 0);
    const ssize_t r = send(p_.client.get(), big.data(), big.size(), 0);
    const int e = errno;
    // The ring was empty: some bytes fit, not 4 MiB.
    EXPECT_GT(r, 0) << strerror(e);
    EXPECT_LT(r, static_cast<ssize_t>(big.size()));
    EXPECT_GE(g_alarms, 1);
    EXPECT_GE(delta("tx_src_avail_cancel"), 1u);
    EXPECT_EQ(delta("zcopy_tx_bytes"), 0u);
    // The connection goes on: the bytes the send took (read first: they
    // fill the ring), then the next.  (Single-threaded: the next send
    // returns once its offer goes by bcopy.)
    if (r > 0)
        recv_stream(p_.server.get(), static_cast<size_t>(r), static_cast<size_t>(r), 8,
                    MSG_WAITALL);
    set_sysctl("zcopy_sink_wait_ms", "200");
    std::vector<unsigned char> next(100000);
    fill(next, 0, 9);
    ASSERT_EQ(send(p_.client.get(), next.data(), next.size(), 0),
              static_cast<ssize_t>(next.size()));
    recv_stream(p_.server.get(), next.size(), next.size(), 9, MSG_WAITALL);
    int avail = -1;
    ASSERT_EQ(ioctl(p_.server.get(), FIONREAD, &avail), 0);
    EXPECT_EQ(avail, 0);
    signal(SIGALRM, SIG_DFL);
}

// A blocking zero-copy send under a stream of signals (every 20 ms, well
// inside zcopy_sink_wait_ms) with SA_RESTART and a peer that reads only
// after the send returned: over TCP the send buffers bytes and the first
// signal ends it with their count.  It must not start over with a new
// offer at each restart and never return.
TEST_F(ZeroCopy, SignalStormSendReturnsAPartialCount)
{
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    ASSERT_EQ(sigaction(SIGALRM, &sa, nullptr), 0);
    std::vector<unsigned char> big(16 * kMiB);
    fill(big, 0, 7);
    std::atomic<bool> done{false};
    ssize_t r = 0;
    pthread_t sender_thread{};
    std::thread sender([&] {
        r = send(p_.client.get(), big.data(), big.size(), MSG_NOSIGNAL);
        done = true;
    });
    sender_thread = sender.native_handle();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done.load() && std::chrono::steady_clock::now() < deadline) {
        pthread_kill(sender_thread, SIGALRM);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const bool returned = done.load();
    EXPECT_TRUE(returned) << "the send made no progress under signals for 20 s";
    if (!returned)
        shutdown(p_.client.get(), SHUT_RDWR); // let it end
    sender.join();
    if (returned) {
        EXPECT_GT(r, 0);
        EXPECT_LT(r, static_cast<ssize_t>(big.size()));
        EXPECT_EQ(shutdown(p_.client.get(), SHUT_WR), 0);
        if (r > 0)
            recv_stream(p_.server.get(), static_cast<size_t>(r), kMiB, 7);
        char c = 0;
        EXPECT_EQ(recv(p_.server.get(), &c, 1, 0), 0) << "EOF after the count";
    }
    signal(SIGALRM, SIG_DFL);
}

// ---- blocking sends larger than one registration ------------------------------

// Wait (bounded) until the peer's first bytes are offered to `fd` (FIONREAD).
void wait_offered(int fd)
{
    int avail = 0;
    for (int i = 0; i < 500 * wait_scale() && avail <= 0; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ASSERT_EQ(ioctl(fd, FIONREAD, &avail), 0) << strerror(errno);
    }
    ASSERT_GT(avail, 0) << "nothing offered";
}

// A blocking send larger than a registration (net.sdp.zcopy_chunk) offers
// each registration without waiting for the last to be read (held offers,
// up to net.sdp.zcopy_async_offers in flight), and returns once the peer
// has read them all and their keys are invalid.  With
// net.sdp.zcopy_pipeline 0 it offers one at a time.
TEST_F(ZeroCopy, BlockingSendLargerThanARegistrationKeepsSeveralOffersInFlight)
{
    const SysctlFor wait("zcopy_sink_wait_ms", "5000"); // the offers wait for the reader
    // Not a multiple of a registration: a buffer that does not start on a
    // page boundary fills the last one less (on Soft-RoCE a registration
    // holds 2 MiB less a page), and a tail under zcopy_thresh goes by bcopy.
    constexpr size_t kLen = 7 * kMiB;
    const int c = p_.client.get();
    const int s = p_.server.get();
    std::vector<unsigned char> a(kLen);
    fill(a, 0, 21);
    const sdp_sock_stats st0 = sock_stats(c);
    ssize_t r = -1;
    // The sender first: its offers, not the reader's SinkAvail.
    std::thread sender([&] { r = send(c, a.data(), kLen, MSG_NOSIGNAL); });
    ASSERT_NO_FATAL_FAILURE(wait_offered(s));
    recv_stream(s, kLen, kLen, 21, MSG_WAITALL);
    sender.join();
    EXPECT_EQ(r, static_cast<ssize_t>(kLen)) << strerror(errno);
    const sdp_sock_stats st1 = sock_stats(c);
    const uint64_t offers = st1.src_avail_sent - st0.src_avail_sent;
    EXPECT_GE(offers, 4u) << "one offer per registration";
    EXPECT_EQ(delta("zcopy_held_offers"), offers);
    EXPECT_GE(delta("zcopy_held_joined"), 1u) << "no offer went while another was in flight";
    EXPECT_EQ(delta("zcopy_async_sends"), 0u) << "not MSG_ZEROCOPY";
    EXPECT_EQ(st1.zc_tx_bytes - st0.zc_tx_bytes, kLen);
    EXPECT_EQ(delta("cpu_copy_bytes"), 0u);

    const SysctlFor one_by_one("zcopy_pipeline", "0");
    const auto held_before = delta("zcopy_held_offers");
    std::thread sender2([&] { r = send(c, a.data(), kLen, MSG_NOSIGNAL); });
    recv_stream(s, kLen, kLen, 21, MSG_WAITALL);
    sender2.join();
    EXPECT_EQ(r, static_cast<ssize_t>(kLen)) << strerror(errno);
    EXPECT_EQ(delta("zcopy_held_offers"), held_before) << "zcopy_pipeline 0";
    EXPECT_EQ(sock_stats(c).zc_tx_bytes - st0.zc_tx_bytes, 2 * kLen);
}

// The receiver reads the first of a blocking send's offers in tiny pieces:
// it gives the offer up (SendSM), which stops the offers behind it too.
// The send takes back every byte not read and sends it by bcopy, in order,
// and returns the whole length.
TEST_F(ZeroCopy, SendSmStopsHeldOffersAndTheSendCopiesTheRestInOrder)
{
    const SysctlFor wait("zcopy_sink_wait_ms", "5000");
    constexpr size_t kLen = 8 * kMiB;
    const int c = p_.client.get();
    const int s = p_.server.get();
    std::vector<unsigned char> a(kLen);
    fill(a, 0, 22);
    ssize_t r = -1;
    std::thread sender([&] { r = send(c, a.data(), kLen, MSG_NOSIGNAL); });
    ASSERT_NO_FATAL_FAILURE(wait_offered(s));
    std::vector<unsigned char> tiny(100);
    size_t off = 0;
    while (off < 64 * kKiB) {
        const ssize_t n = recv(s, tiny.data(), tiny.size(), 0);
        ASSERT_GT(n, 0) << strerror(errno);
        for (ssize_t i = 0; i < n; i++)
            ASSERT_EQ(tiny[static_cast<size_t>(i)], pattern(off + static_cast<size_t>(i), 22))
                << off + static_cast<size_t>(i);
        off += static_cast<size_t>(n);
    }
    std::vector<unsigned char> rest(kLen - off);
    ASSERT_EQ(recv(s, rest.data(), rest.size(), MSG_WAITALL), static_cast<ssize_t>(rest.size()))
        << strerror(errno);
    for (size_t i = 0; i < rest.size(); i++)
        ASSERT_EQ(rest[i], pattern(off + i, 22)) << "byte " << off + i;
    sender.join();
    EXPECT_EQ(r, static_cast<ssize_t>(kLen)) << strerror(errno);
    EXPECT_GE(delta("zcopy_held_offers"), 2u);
    EXPECT_GE(delta("rx_send_sm"), 1u);
    EXPECT_GE(delta("zcopy_fallback_small_reads"), 1u);
    EXPECT_GT(delta("cpu_copy_bytes"), 0u) << "the rest went by bcopy";
    int avail = -1;
    ASSERT_EQ(ioctl(s, FIONREAD, &avail), 0);
    EXPECT_EQ(avail, 0) << "bytes sent twice";
}

// A blocking send of 32 MiB that a signal (no SA_RESTART) ends after the
// peer read its first MiB and stopped: the send returns a count, and the
// peer then reads exactly that many bytes, intact, and EOF after
// shutdown(SHUT_WR).  The same over TCP (the count is what its buffers
// took) and SDP (the count is what the peer read).  Returns the count.
ssize_t send_interrupted_after_a_partial_read(int c, int s, uint64_t seed)
{
    struct sigaction sa {};
    sa.sa_handler = on_alarm; // no SA_RESTART
    EXPECT_EQ(sigaction(SIGALRM, &sa, nullptr), 0);
    constexpr size_t kLen = 32 * kMiB;
    std::vector<unsigned char> a(kLen);
    fill(a, 0, seed);
    std::atomic<bool> done{false};
    ssize_t r = -1;
    int e = 0;
    std::thread sender([&] {
        r = send(c, a.data(), kLen, MSG_NOSIGNAL);
        e = errno;
        done = true;
    });
    std::vector<unsigned char> first(kMiB);
    EXPECT_EQ(recv(s, first.data(), first.size(), MSG_WAITALL), static_cast<ssize_t>(kMiB))
        << strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(done.load()) << "returned before the peer read its bytes";
    pthread_kill(sender.native_handle(), SIGALRM);
    sender.join();
    signal(SIGALRM, SIG_DFL);
    EXPECT_GE(r, static_cast<ssize_t>(kMiB)) << strerror(e);
    EXPECT_LT(r, static_cast<ssize_t>(kLen));
    for (size_t i = 0; i < first.size(); i++)
        EXPECT_EQ(first[i], pattern(i, seed)) << "byte " << i;
    EXPECT_EQ(shutdown(c, SHUT_WR), 0);
    // The rest up to EOF: exactly the count, each byte where it belongs.
    size_t off = kMiB;
    for (;;) {
        const ssize_t n = recv(s, first.data(), first.size(), 0);
        EXPECT_GE(n, 0) << "at " << off << ": " << strerror(errno);
        if (n <= 0)
            break;
        for (size_t i = 0; i < static_cast<size_t>(n); i++) {
            if (first[i] != pattern(off + i, seed)) {
                ADD_FAILURE() << "byte " << off + i << " of the stream";
                return r;
            }
        }
        off += static_cast<size_t>(n);
    }
    EXPECT_EQ(static_cast<ssize_t>(off), r) << "the peer read other than the send's count";
    return r;
}

// Over SDP its offers are in flight when the signal comes, the first read
// in part: they are taken back (SrcAvailCancel) and the count is what the
// peer read.  (ZeroCopyOverTcp.SendInterruptedAfterAPartialRead: the same
// scenario over TCP.)
TEST_F(ZeroCopy, SignalDuringHeldOffersReturnsWhatThePeerRead)
{
    const SysctlFor wait("zcopy_sink_wait_ms", "60000");
    send_interrupted_after_a_partial_read(p_.client.get(), p_.server.get(), 23);
    EXPECT_GE(delta("zcopy_held_offers"), 2u);
    EXPECT_GE(delta("tx_src_avail_cancel"), 1u);
    EXPECT_EQ(delta("zcopy_fallback_no_reader"), 0u) << "given up before the signal";
}

// Page-aligned pattern bytes, so that each registration of a transfer
// covers exactly zcopy_chunk bytes on both sides.
class AlignedBuffer {
  public:
    explicit AlignedBuffer(size_t len)
        : len_(len), p_(static_cast<unsigned char*>(aligned_alloc(4096, len)))
    {
    }
    ~AlignedBuffer() { free(p_); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    unsigned char* data() const { return p_; }
    void fill_pattern(uint64_t at, uint64_t seed)
    {
        for (size_t i = 0; i < len_; i++)
            p_[i] = pattern(at + i, seed);
    }
    // The first byte that differs from the pattern, or len.
    size_t mismatch(size_t n, uint64_t at, uint64_t seed) const
    {
        for (size_t i = 0; i < n; i++) {
            if (p_[i] != pattern(at + i, seed))
                return i;
        }
        return n;
    }

  private:
    size_t len_;
    unsigned char* p_;
};

// A waiting receive larger than a registration advertises its buffer in
// pieces, a SinkAvail each, all at once (up to the peer's max_adverts and
// the registrations free): the sender writes into one piece after the
// other, each without waiting for a new advertisement, and nothing goes
// by RDMA Read or by copy.
TEST_F(ZeroCopy, AWaitingReceiveAdvertisesItsBufferInPieces)
{
    const SysctlFor chunk("zcopy_chunk", "262144");
    constexpr size_t kLen = kMiB; // four pieces of 256 KiB
    const int c = p_.client.get();
    const int s = p_.server.get();
    AlignedBuffer out(kLen), in(kLen);
    out.fill_pattern(0, 31);
    const sdp_sock_stats rx0 = sock_stats(s);
    const sdp_sock_stats tx0 = sock_stats(c);
    ssize_t got = -1;
    std::thread reader([&] { got = recv(s, in.data(), kLen, MSG_WAITALL); });
    const bool advertised =
        eventually([&] { return sock_stats(s).sink_avail_sent - rx0.sink_avail_sent >= 4; }, 10);
    EXPECT_TRUE(advertised) << "SinkAvails sent: "
                            << sock_stats(s).sink_avail_sent - rx0.sink_avail_sent;
    EXPECT_EQ(send(c, out.data(), kLen, MSG_NOSIGNAL), static_cast<ssize_t>(kLen))
        << strerror(errno);
    reader.join();
    ASSERT_EQ(got, static_cast<ssize_t>(kLen)) << strerror(errno);
    EXPECT_EQ(in.mismatch(kLen, 0, 31), kLen);
    const sdp_sock_stats rx1 = sock_stats(s);
    const sdp_sock_stats tx1 = sock_stats(c);
    EXPECT_EQ(rx1.sink_avail_sent - rx0.sink_avail_sent, 4u) << "one per piece";
    EXPECT_EQ(tx1.rdma_writes - tx0.rdma_writes, 4u) << "each piece written";
    EXPECT_EQ(tx1.src_avail_sent - tx0.src_avail_sent, 0u);
    EXPECT_EQ(rx1.zc_rx_bytes - rx0.zc_rx_bytes, kLen);
    EXPECT_EQ(delta("cpu_copy_bytes"), 0u);
    EXPECT_EQ(delta("tx_sink_avail_cancel"), 0u);
}

// A receive without MSG_WAITALL returns once it has bytes, as over TCP:
// when the first piece is filled and the sender has nothing more, the
// pieces left are taken back with one cancel; a write that fills a piece
// only in part ends the pieces after it without one.  The bytes that come
// next arrive in order either way.
TEST_F(ZeroCopy, AReceiveInPiecesReturnsWhatTheSenderSent)
{
    const SysctlFor chunk("zcopy_chunk", "262144");
    constexpr size_t kLen = kMiB;
    const int c = p_.client.get();
    const int s = p_.server.get();
    AlignedBuffer in(kLen);
    uint64_t at = 0;
    for (const size_t piece : {size_t{256} << 10, size_t{100} << 10}) {
        SCOPED_TRACE(piece);
        const sdp_sock_stats rx0 = sock_stats(s);
        const auto cancels = delta("tx_sink_avail_cancel");
        ssize_t got = -1;
        std::thread reader([&] { got = recv(s, in.data(), kLen, 0); });
        const bool advertised = eventually(
            [&] { return sock_stats(s).sink_avail_sent - rx0.sink_avail_sent >= 4; }, 10);
        EXPECT_TRUE(advertised);
        AlignedBuffer out(piece);
        out.fill_pattern(at, 32);
        EXPECT_EQ(send(c, out.data(), piece, MSG_NOSIGNAL), static_cast<ssize_t>(piece))
            << strerror(errno);
        reader.join();
        ASSERT_EQ(got, static_cast<ssize_t>(piece)) << strerror(errno);
        EXPECT_EQ(in.mismatch(piece, at, 32), piece);
        at += piece;
        if (piece == (size_t{256} << 10))
            EXPECT_EQ(delta("tx_sink_avail_cancel") - cancels, 1u) << "the rest taken back";
        else
            EXPECT_EQ(delta("tx_sink_avail_cancel") - cancels, 0u) << "ended by the write";
        // What follows, by whichever path, lands after those bytes.
        std::thread sender([&] { send_stream(c, 300 << 10, 300 << 10, 0); });
        std::vector<unsigned char> next(300 << 10);
        size_t off = 0;
        while (off < next.size()) {
            const ssize_t r = recv(s, next.data() + off, next.size() - off, 0);
            ASSERT_GT(r, 0) << strerror(errno);
            off += static_cast<size_t>(r);
        }
        sender.join();
        for (size_t i = 0; i < next.size(); i++)
            ASSERT_EQ(next[i], pattern(i, 0)) << "byte " << i;
    }
}

// A blocked zero-copy receive (SinkAvail) interrupted by a signal returns
// EINTR; the advertisement is cancelled and later data arrives normally.
TEST_F(ZeroCopy, SignalCancelsABlockedReceive)
{
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    ASSERT_EQ(sigaction(SIGALRM, &sa, nullptr), 0);
    std::vector<unsigned char> buf(kMiB);
    ualarm(300000, 0);
    const ssize_t r = recv(p_.server.get(), buf.data(), buf.size(), 0);
    EXPECT_EQ(r, -1);
    EXPECT_EQ(errno, EINTR);
    EXPECT_GE(delta("tx_sink_avail"), 1u);
    EXPECT_GE(delta("tx_sink_avail_cancel"), 1u);
    EXPECT_GE(delta("rx_sink_cancel_ack"), 1u);
    std::thread sender([&] { send_stream(p_.client.get(), 2 * kMiB, kMiB); });
    recv_stream(p_.server.get(), 2 * kMiB, kMiB);
    sender.join();
    signal(SIGALRM, SIG_DFL);
}

// F14: zero copy pins the application's pages with FOLL_LONGTERM (the peer
// decides how long the pin lasts).  Since Linux 6.5 the kernel refuses a
// long-term writable pin of a shared file mapping that needs dirty tracking
// (writable_file_mapping_allowed(): the file system would write back, or
// reclaim, pages the device is still writing): a receive into an mmap'ed
// ext2 file then goes by bcopy (zcopy_fallback_pin), its bytes intact in
// the file.  A short-term pin (the module before the fix) succeeds there
// and the receive goes by RDMA Write (zcopy_rx_bytes): this test fails.
// Linux 6.1 has no such rule and grants the long-term pin: there the bytes
// go by zero copy, and the test asserts that and that they arrive intact in
// the file.  The expectation depends on the running kernel (uname).
TEST_F(ZeroCopy, LongTermPinOfASharedFileMappingFallsBackToBcopy)
{
    constexpr size_t kTotal = kMiB;
    const int kver = kernel_version();
    ASSERT_GT(kver, 0) << "uname";
    const bool refuses_file_pins = kver >= 6005;

    Ext2Mount fs;
    ASSERT_TRUE(fs.ok()) << fs.error();
    const std::string path = fs.dir() + "/rx-buffer";
    Fd file(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_GE(file.get(), 0) << path << ": " << strerror(errno);
    {
        // Allocated blocks written back: clean pages whose next write the
        // file system must see (no hole, no dirty page).
        const std::vector<unsigned char> junk(kTotal, 0xee);
        ASSERT_EQ(pwrite(file.get(), junk.data(), kTotal, 0), static_cast<ssize_t>(kTotal));
        ASSERT_EQ(fsync(file.get()), 0) << strerror(errno);
    }
    {
        Mapping map(file.get(), kTotal);
        ASSERT_TRUE(map.ok()) << strerror(errno);
        // The receiver waits first in one blocking 1 MiB recv (SinkAvail);
        // the sender's 1 MiB send follows (SrcAvail if no SinkAvail came).
        std::thread sender([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            send_stream(p_.client.get(), kTotal, kTotal);
        });
        size_t off = 0;
        std::string err;
        while (off < kTotal) {
            const ssize_t r = recv(p_.server.get(), map.data() + off, kTotal - off, 0);
            if (r <= 0) {
                err = r == 0 ? "EOF" : strerror(errno);
                shutdown(p_.server.get(), SHUT_RDWR); // unblock the sender
                break;
            }
            off += static_cast<size_t>(r);
        }
        sender.join();
        ASSERT_EQ(off, kTotal) << err;
        for (size_t i = 0; i < kTotal; i++)
            ASSERT_EQ(map.data()[i], pattern(i)) << "byte " << i << " of the mapping";
        ASSERT_EQ(msync(map.data(), kTotal, MS_SYNC), 0) << strerror(errno);
    }
    // The bytes are the file's, read back through the page cache.
    std::vector<unsigned char> back(kTotal);
    ASSERT_EQ(pread(file.get(), back.data(), kTotal, 0), static_cast<ssize_t>(kTotal));
    for (size_t i = 0; i < kTotal; i++)
        ASSERT_EQ(back[i], pattern(i)) << "byte " << i << " of the file";
    file.reset();

    const sdp_sock_stats rx = sock_stats(p_.server.get());
    std::cout << "[ INFO     ] kernel " << kver / 1000 << "." << kver % 1000 << ": fallback_pin "
              << rx.fallback_pin << ", zc_rx_bytes " << rx.zc_rx_bytes << ", rx_bcopy_bytes "
              << rx.rx_bcopy_bytes << "\n";
    EXPECT_EQ(rx.rx_bytes, kTotal);
    EXPECT_EQ(rx.zc_rx_bytes + rx.rx_bcopy_bytes, kTotal);
    if (refuses_file_pins) {
        EXPECT_GE(delta("zcopy_fallback_pin"), 1u) << "the long-term pin was not refused";
        EXPECT_GE(rx.fallback_pin, 1u);
        EXPECT_EQ(delta("zcopy_rx_bytes"), 0u) << "DMA into a file mapping under writeback";
        EXPECT_EQ(rx.zc_rx_bytes, 0u);
        EXPECT_EQ(rx.rx_bcopy_bytes, kTotal);
    } else {
        // 6.1: the long-term pin of the file mapping is granted.
        EXPECT_EQ(rx.fallback_pin, 0u);
        EXPECT_GT(rx.zc_rx_bytes, 0u);
    }
}

// Random sizes around the threshold, both directions at once, bcopy and
// zero copy interleaved; every byte checked.
TEST_F(ZeroCopy, MixedSizesBothDirections)
{
    constexpr size_t kTotal = 24 * kMiB;
    auto writer = [](int fd, uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::vector<unsigned char> buf;
        size_t off = 0;
        while (off < kTotal) {
            const size_t sizes[] = {1, 100, 4096, 65535, 65536, 65537, 300000, 1500000};
            size_t n = sizes[rng() % 8];
            n = std::min(n, kTotal - off);
            buf.resize(n);
            fill(buf, off, seed);
            size_t done = 0;
            while (done < n) {
                const ssize_t r = send(fd, buf.data() + done, n - done, 0);
                ASSERT_GT(r, 0) << strerror(errno);
                done += static_cast<size_t>(r);
            }
            off += n;
        }
    };
    auto reader = [](int fd, uint64_t seed) {
        std::mt19937_64 rng(seed * 7);
        std::vector<unsigned char> buf(2 * kMiB);
        size_t off = 0;
        while (off < kTotal) {
            const size_t sizes[] = {1, 1000, 65536, 70000, 1 << 20, 2 << 20};
            const size_t n = std::min(sizes[rng() % 6], kTotal - off);
            const ssize_t r = recv(fd, buf.data(), n, rng() % 4 == 0 ? MSG_WAITALL : 0);
            ASSERT_GT(r, 0) << strerror(errno);
            for (ssize_t i = 0; i < r; i++)
                ASSERT_EQ(buf[static_cast<size_t>(i)], pattern(off + static_cast<size_t>(i), seed))
                    << off + static_cast<size_t>(i);
            off += static_cast<size_t>(r);
        }
    };
    std::thread w1(writer, p_.client.get(), 11);
    std::thread w2(writer, p_.server.get(), 12);
    std::thread r1(reader, p_.server.get(), 11);
    std::thread r2(reader, p_.client.get(), 12);
    w1.join();
    w2.join();
    r1.join();
    r2.join();
    EXPECT_GT(delta("zcopy_tx_bytes"), 0u);
    EXPECT_GT(delta("tx_data"), 0u);
}

// ---- MSG_ZEROCOPY: TCP's notification stream ------------------------------

// One notification read from the error queue, as a program sees it.
struct ZcNote {
    int level = 0, type = 0;
    size_t cmsg_len = 0;
    int msg_flags = 0;
    sock_extended_err ee{};
};

// recvmsg(MSG_ERRQUEUE) once; false when the queue is empty (EAGAIN).
bool read_note(int fd, ZcNote* out)
{
    alignas(cmsghdr) char control[128] = {};
    msghdr m{};
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    const ssize_t r = recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (r < 0) {
        EXPECT_EQ(errno, EAGAIN) << strerror(errno);
        return false;
    }
    EXPECT_EQ(r, 0) << "a notification carries no data";
    const cmsghdr* cm = CMSG_FIRSTHDR(&m);
    if (cm == nullptr) {
        ADD_FAILURE() << "a notification without a control message";
        return false;
    }
    out->level = cm->cmsg_level;
    out->type = cm->cmsg_type;
    out->cmsg_len = cm->cmsg_len;
    out->msg_flags = m.msg_flags;
    std::memcpy(&out->ee, CMSG_DATA(cm), sizeof(out->ee));
    EXPECT_EQ(CMSG_NXTHDR(&m, const_cast<cmsghdr*>(cm)), nullptr) << "one control message";
    return true;
}

// Wait (poll POLLERR, bounded) for notifications up to id `last`; appends
// them to `notes`.
void collect_notes(int fd, uint32_t last, std::vector<ZcNote>* notes)
{
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10 * wait_scale());
    while (std::chrono::steady_clock::now() < deadline) {
        if (!notes->empty() && notes->back().ee.ee_data >= last)
            return;
        pollfd p{fd, 0, 0};
        ASSERT_GE(poll(&p, 1, 100), 0) << strerror(errno);
        if ((p.revents & POLLERR) == 0)
            continue;
        ZcNote n;
        while (read_note(fd, &n))
            notes->push_back(n);
    }
    ADD_FAILURE() << "no notification up to id " << last;
}

// What one protocol's run showed.
struct ZcRun {
    std::vector<ZcNote> singles; // read after each send: one id each
    std::vector<bool> bcopied;   // SDP only: the send copied some bytes
    std::vector<ZcNote> batch;   // read after three sends
    bool quiet_before = false;   // no notification without SO_ZEROCOPY
    bool quiet_after = false;    // and none left once all were read
    short revents_after = 0;
};

// The sends of the scenario: small (bcopy on SDP), below and above the
// zero-copy threshold, 1 and 2 MiB (zero copy on SDP).
const std::vector<size_t> kZcSizes = {100, 4096, 256 * kKiB, kMiB, 2 * kMiB};
constexpr size_t kZcBatch = 3;

size_t zc_total()
{
    size_t t = 0;
    for (size_t s : kZcSizes)
        t += s;
    return t + kZcBatch * 64 * 1024 + 1000 + 10;
}

// SO_ZEROCOPY on, as a program for TCP sets it: SOL_SOCKET.  On an SDP
// socket that works from 6.12 on (SOCK_CUSTOM_SOCKOPT); before, the kernel
// refuses it with EOPNOTSUPP before SDP sees the call, and SOL_SDP's
// SDP_ZEROCOPY (what libsdp.so maps it to) sets the same flag.
void enable_zerocopy(int fd, bool sdp)
{
    const int one = 1;
    const int r = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one));
    if (!sdp || kernel_version() >= 6012) {
        EXPECT_EQ(r, 0) << strerror(errno);
    } else {
        EXPECT_EQ(r, -1);
        EXPECT_EQ(errno, EOPNOTSUPP);
        EXPECT_EQ(setsockopt(fd, SOL_SDP, SDP_ZEROCOPY, &one, sizeof(one)), 0) << strerror(errno);
    }
    int v = -1;
    socklen_t len = sizeof(v);
    EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &v, &len), 0) << strerror(errno);
    EXPECT_EQ(v, 1);
}

// A connected client and server at kAddrA:port.  family: AF_INET, or
// sdp_family() for AF_INET_SDP sockets (SDP only); proto: 0 (TCP) or
// IPPROTO_SDP.  server is -1 (with a failure recorded) if none came.
struct ConnectedPair {
    Fd client, server;
};

ConnectedPair connected_pair(int family, int proto, int port)
{
    auto make = [&] {
        return family == AF_INET ? Fd(socket(AF_INET, SOCK_STREAM, proto)) : sdp_only_socket();
    };
    ConnectedPair p;
    Fd listener = make();
    const int one = 1;
    EXPECT_EQ(setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    const sockaddr_in a = make_addr(kAddrA, port);
    EXPECT_EQ(bind(listener.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    EXPECT_EQ(listen(listener.get(), 4), 0);
    p.client = make();
    EXPECT_EQ(connect(p.client.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    p.server = Fd(accept(listener.get(), nullptr, nullptr));
    EXPECT_GE(p.server.get(), 0) << strerror(errno);
    return p;
}

// The oracle of ZeroCopy.SignalDuringHeldOffersReturnsWhatThePeerRead.
TEST(ZeroCopyOverTcp, SendInterruptedAfterAPartialRead)
{
    ConnectedPair p = connected_pair(AF_INET, 0, 7396);
    ASSERT_GE(p.server.get(), 0);
    send_interrupted_after_a_partial_read(p.client.get(), p.server.get(), 23);
}

// A connected pair (connected_pair()) and the scenario's sends.
ZcRun run_zerocopy(int family, int proto, int port)
{
    ZcRun run;
    const bool sdp = family != AF_INET || proto == IPPROTO_SDP;
    ConnectedPair pair = connected_pair(family, proto, port);
    const Fd& client = pair.client;
    const Fd& server = pair.server;
    if (server.get() < 0)
        return run;
    std::thread reader([&] { recv_stream(server.get(), zc_total(), kMiB); });
    size_t off = 0;
    // A buffer per send: with MSG_ZEROCOPY a buffer is the application's
    // again only at its notification (TCP may still read it after send()
    // returns), and the batch below sends before reading any.
    std::vector<std::vector<unsigned char>> bufs;
    auto send_at = [&](size_t n, int flags) {
        std::vector<unsigned char>& buf = bufs.emplace_back(n);
        fill(buf, off);
        EXPECT_EQ(send(client.get(), buf.data(), n, MSG_NOSIGNAL | flags), static_cast<ssize_t>(n))
            << strerror(errno);
        off += n;
    };
    // MSG_ZEROCOPY before SO_ZEROCOPY is ignored; so is an empty send.
    send_at(1000, MSG_ZEROCOPY);
    ZcNote n;
    run.quiet_before = !read_note(client.get(), &n);
    enable_zerocopy(client.get(), sdp);
    EXPECT_EQ(send(client.get(), bufs.back().data(), 0, MSG_ZEROCOPY), 0);
    // Plain sends take no number either.
    send_at(10, 0);
    uint32_t id = 0;
    for (size_t size : kZcSizes) {
        const sdp_sock_stats before = sdp ? sock_stats(client.get()) : sdp_sock_stats{};
        send_at(size, MSG_ZEROCOPY);
        std::vector<ZcNote> got;
        collect_notes(client.get(), id, &got);
        // Up to the notification: a send may return with its offer in
        // flight, and the rest of an offer given up goes by bcopy then.
        if (sdp)
            run.bcopied.push_back(sock_stats(client.get()).tx_bcopy_bytes != before.tx_bcopy_bytes);
        EXPECT_EQ(got.size(), 1u) << "send " << id;
        if (!got.empty())
            run.singles.push_back(got.front());
        id++;
    }
    for (size_t i = 0; i < kZcBatch; i++)
        send_at(64 * kKiB, MSG_ZEROCOPY);
    collect_notes(client.get(), id + kZcBatch - 1, &run.batch);
    reader.join();
    run.quiet_after = !read_note(client.get(), &n);
    pollfd p{client.get(), 0, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0);
    run.revents_after = p.revents;
    return run;
}

// A program written for TCP's MSG_ZEROCOPY sees the same notifications
// from an SDP socket (IPPROTO_SDP, and AF_INET_SDP with an IPv4
// connection): numbered sends, ranges, the control message and its length,
// POLLERR while one waits; only SO_EE_CODE_ZEROCOPY_COPIED differs (TCP
// over loopback copies every byte; SDP reports a copy exactly when its
// bcopy path took bytes of the send).
TEST(MsgZerocopy, NotificationsAsTcps)
{
    const ZcRun tcp = run_zerocopy(AF_INET, 0, 7390);
    const ZcRun sdp = run_zerocopy(AF_INET, IPPROTO_SDP, 7391);
    const ZcRun sdp_family_run = run_zerocopy(sdp_family(), 0, 7392);
    for (const ZcRun* r : {&tcp, &sdp, &sdp_family_run}) {
        const char* who = r == &tcp ? "TCP" : r == &sdp ? "IPPROTO_SDP" : "AF_INET_SDP";
        EXPECT_TRUE(r->quiet_before) << who << ": a notification without SO_ZEROCOPY";
        EXPECT_TRUE(r->quiet_after) << who << ": a notification left over";
        EXPECT_EQ(r->revents_after, 0) << who << ": POLLERR with nothing queued";
        ASSERT_EQ(r->singles.size(), kZcSizes.size()) << who;
        for (uint32_t i = 0; i < r->singles.size(); i++) {
            const ZcNote& n = r->singles[i];
            EXPECT_EQ(n.level, SOL_IP) << who;
            EXPECT_EQ(n.type, IP_RECVERR) << who;
            EXPECT_EQ(n.cmsg_len, CMSG_LEN(sizeof(sock_extended_err) + sizeof(sockaddr_in))) << who;
            EXPECT_NE(n.msg_flags & MSG_ERRQUEUE, 0) << who;
            EXPECT_EQ(n.ee.ee_errno, 0u) << who;
            EXPECT_EQ(n.ee.ee_origin, SO_EE_ORIGIN_ZEROCOPY) << who;
            EXPECT_EQ(n.ee.ee_info, i) << who << ": first id of the range";
            EXPECT_EQ(n.ee.ee_data, i) << who << ": last id of the range";
        }
        // Three sends, read together: ascending ranges that cover them.
        ASSERT_FALSE(r->batch.empty()) << who;
        uint32_t next = static_cast<uint32_t>(kZcSizes.size());
        for (const ZcNote& n : r->batch) {
            EXPECT_EQ(n.ee.ee_origin, SO_EE_ORIGIN_ZEROCOPY) << who;
            EXPECT_EQ(n.ee.ee_info, next) << who;
            EXPECT_GE(n.ee.ee_data, n.ee.ee_info) << who;
            next = n.ee.ee_data + 1;
        }
        EXPECT_EQ(next, kZcSizes.size() + kZcBatch) << who;
    }
    // COPIED is the truth about each SDP send: those below the module's
    // threshold were copied, and the zero-copy path carried at least one of
    // the large ones whole.
    const long thresh = sdp_sysctl("zcopy_thresh");
    ASSERT_GT(thresh, 0) << "zero copy is off";
    ASSERT_LE(thresh, static_cast<long>(2 * kMiB)) << "no send reaches the threshold";
    for (const ZcRun* r : {&sdp, &sdp_family_run}) {
        ASSERT_EQ(r->bcopied.size(), kZcSizes.size());
        bool some_zero_copy = false;
        for (size_t i = 0; i < kZcSizes.size(); i++) {
            const bool copied = (r->singles[i].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0;
            EXPECT_EQ(copied, r->bcopied[i]) << "send of " << kZcSizes[i] << " bytes";
            if (kZcSizes[i] < static_cast<size_t>(thresh))
                EXPECT_TRUE(copied) << "send of " << kZcSizes[i] << " bytes";
            some_zero_copy |= !copied;
        }
        EXPECT_TRUE(some_zero_copy) << "no send of 1 or 2 MiB went by zero copy";
    }
}

// SO_EE_CODE_ZEROCOPY_COPIED tells about the send it numbers, not about the
// socket: while another thread's small sends go by bcopy on the same
// socket, a MSG_ZEROCOPY send that the zero-copy path carried whole is not
// reported copied, and one that copied some bytes is.
TEST(MsgZerocopy, CopiedIsPerSend)
{
    ConnectedPair pair = connected_pair(AF_INET, IPPROTO_SDP, 7395);
    const int fd = pair.client.get();
    ASSERT_GE(pair.server.get(), 0);
    enable_zerocopy(fd, true);
    std::atomic<bool> stop{false};
    std::atomic<size_t> small_bytes{0};
    std::thread reader([&] {
        std::vector<unsigned char> buf(2 * kMiB);
        for (;;) {
            const ssize_t r = recv(pair.server.get(), buf.data(), buf.size(), 0);
            if (r <= 0) {
                EXPECT_EQ(r, 0) << strerror(errno);
                return;
            }
        }
    });
    std::thread chatter([&] {
        const std::vector<unsigned char> small(100, 0x5a);
        while (!stop.load()) {
            const ssize_t r = send(fd, small.data(), small.size(), MSG_NOSIGNAL);
            ASSERT_EQ(r, static_cast<ssize_t>(small.size())) << strerror(errno);
            small_bytes += small.size();
        }
    });
    constexpr int kSends = 6;
    std::vector<unsigned char> big(kMiB, 0xa5);
    int zero_copied = 0;
    for (uint32_t id = 0; id < kSends; id++) {
        const uint64_t zc_before = sock_stats(fd).zc_tx_bytes;
        ASSERT_EQ(send(fd, big.data(), big.size(), MSG_ZEROCOPY | MSG_NOSIGNAL),
                  static_cast<ssize_t>(big.size()))
            << strerror(errno);
        std::vector<ZcNote> got;
        collect_notes(fd, id, &got);
        ASSERT_EQ(got.size(), 1u) << "send " << id;
        // Only this thread sends by zero copy: the counter's growth up to
        // the notification (a send may return with its offer in flight)
        // is what this send carried without a copy.
        const bool whole = sock_stats(fd).zc_tx_bytes - zc_before == big.size();
        EXPECT_EQ(got[0].ee.ee_info, id);
        EXPECT_EQ(got[0].ee.ee_data, id);
        const bool copied = (got[0].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0;
        EXPECT_EQ(copied, !whole) << "send " << id;
        zero_copied += whole ? 1 : 0;
    }
    stop = true;
    chatter.join();
    EXPECT_EQ(shutdown(fd, SHUT_WR), 0);
    reader.join();
    EXPECT_GT(small_bytes.load(), 0u) << "the other thread sent nothing";
    EXPECT_GT(zero_copied, 0) << "no 1 MiB send went whole by zero copy";
}

// ---- MSG_ZEROCOPY sends that return with the transfer in flight --------------

// VmPin of this process in KiB (pages pinned for zero copy are charged to
// it, as ib_umem_get()'s are); -1 if unreadable.
long vm_pin_kib()
{
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmPin:", 0) == 0)
            return std::strtol(line.c_str() + 6, nullptr, 10);
    return -1;
}

// No notification on the error queue now.
bool no_note_yet(int fd)
{
    ZcNote n;
    return !read_note(fd, &n);
}

// The client of p with SO_ZEROCOPY set; offers wait 5 s for a reader
// (the fixture restores zcopy_sink_wait_ms).
int zerocopy_client(const Pair& p)
{
    set_sysctl("zcopy_sink_wait_ms", "5000");
    enable_zerocopy(p.client.get(), true);
    return p.client.get();
}

// Send len bytes from p by non-blocking MSG_ZEROCOPY calls, waiting with
// poll after EAGAIN; appends what each successful call sent to `counts` and
// the notifications that came meanwhile to `notes` (pending notifications
// make poll say POLLERR: read, as a program would, so it waits for POLLOUT).
void send_zerocopy_nonblocking(int fd, const unsigned char* p, size_t len,
                               std::vector<size_t>* counts, std::vector<ZcNote>* notes)
{
    size_t done = 0;
    while (done < len) {
        const ssize_t n =
            send(fd, p + done, len - done, MSG_ZEROCOPY | MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            ASSERT_EQ(errno, EAGAIN) << strerror(errno);
            pollfd pfd{fd, POLLOUT, 0};
            ASSERT_EQ(poll(&pfd, 1, 10000 * wait_scale()), 1) << "no POLLOUT";
            ZcNote note;
            while ((pfd.revents & POLLERR) != 0 && read_note(fd, &note))
                notes->push_back(note);
            continue;
        }
        ASSERT_GT(n, 0);
        done += static_cast<size_t>(n);
        counts->push_back(static_cast<size_t>(n));
    }
}

// Notifications numbered 0 to count - 1 without a gap, none COPIED.
void expect_zero_copy_notes(const std::vector<ZcNote>& notes, uint32_t count)
{
    uint32_t next = 0;
    for (const ZcNote& n : notes) {
        EXPECT_EQ(n.ee.ee_info, next) << "a gap in the numbers";
        EXPECT_EQ(n.ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0) << "ids " << n.ee.ee_info;
        next = n.ee.ee_data + 1;
    }
    EXPECT_EQ(next, count);
}

// A MSG_ZEROCOPY send of an SDP socket returns once the SrcAvail is out,
// without waiting for the peer to read; until the peer has read the buffer
// and its key is invalid there is no notification, the pages stay pinned
// (VmPin) and the stream is the offer's (SIOCOUTQ counts the bytes; a
// plain send gets EAGAIN, while POLLOUT says another MSG_ZEROCOPY send
// would join the offer).  Then the notification comes (zero copy, not COPIED), the pin
// goes, and the next send takes the next number.
TEST_F(ZeroCopy, MsgZerocopySendReturnsBeforeThePeerReads)
{
    const int c = zerocopy_client(p_);
    const long pin_before = vm_pin_kib();
    std::vector<unsigned char> a(kMiB), b(kMiB);
    fill(a, 0);
    fill(b, 0, 1);
    ASSERT_EQ(send(c, a.data(), a.size(), MSG_ZEROCOPY | MSG_NOSIGNAL),
              static_cast<ssize_t>(a.size()))
        << strerror(errno);
    EXPECT_EQ(sock_stats(c).src_avail_sent, 1u);
    EXPECT_EQ(delta("zcopy_async_sends"), 1u);
    EXPECT_TRUE(no_note_yet(c)) << "notified before the peer read the buffer";
    EXPECT_GE(vm_pin_kib() - pin_before, 1024) << "the buffer is not pinned";
    int outq = -1;
    EXPECT_EQ(ioctl(c, SIOCOUTQ, &outq), 0);
    EXPECT_EQ(outq, static_cast<int>(kMiB));
    pollfd pfd{c, POLLOUT, 0};
    EXPECT_EQ(poll(&pfd, 1, 0), 1) << "another MSG_ZEROCOPY send would go";
    EXPECT_EQ(pfd.revents, POLLOUT);
    const char byte = 'x';
    errno = 0;
    EXPECT_EQ(send(c, &byte, 1, MSG_DONTWAIT), -1) << "bytes overtaking the offer";
    EXPECT_EQ(errno, EAGAIN);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(no_note_yet(c)) << "notified while nobody read";

    recv_stream(p_.server.get(), kMiB, kMiB);
    std::vector<ZcNote> notes;
    collect_notes(c, 0, &notes);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0].ee.ee_info, 0u);
    EXPECT_EQ(notes[0].ee.ee_data, 0u);
    EXPECT_EQ(notes[0].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0) << "read by RDMA, not copied";
    EXPECT_EQ(vm_pin_kib(), pin_before) << "the pin outlived the notification";
    pfd.revents = 0;
    EXPECT_EQ(poll(&pfd, 1, 5000), 1);
    EXPECT_NE(pfd.revents & POLLOUT, 0);

    // The next one takes number 1, read while it is offered.
    std::thread reader([&] { recv_stream(p_.server.get(), kMiB, kMiB / 4, 1, MSG_WAITALL); });
    ASSERT_EQ(send(c, b.data(), b.size(), MSG_ZEROCOPY | MSG_NOSIGNAL),
              static_cast<ssize_t>(b.size()))
        << strerror(errno);
    collect_notes(c, 1, &notes);
    reader.join();
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_EQ(notes[1].ee.ee_info, 1u);
    EXPECT_EQ(notes[1].ee.ee_data, 1u);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.tx_bytes, 2 * kMiB);
    EXPECT_EQ(st.zc_tx_bytes + st.tx_bcopy_bytes, 2 * kMiB);
    EXPECT_EQ(ioctl(c, SIOCOUTQ, &outq), 0);
    EXPECT_EQ(outq, 0);
    EXPECT_TRUE(no_note_yet(c));
}

// Wait (bounded) until `fd` has `want` bytes to read (FIONREAD): the
// peer's offers arrived.
void wait_readable_bytes(int fd, int want)
{
    int avail = -1;
    for (int i = 0; i < 500 * wait_scale(); i++) {
        ASSERT_EQ(ioctl(fd, FIONREAD, &avail), 0) << strerror(errno);
        if (avail >= want)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(avail, want);
}

// `count` buffers of `len` pattern bytes (seed) at consecutive stream
// offsets, each sent by one blocking MSG_ZEROCOPY send; they stay the
// caller's (and must live) until their notifications.
std::vector<std::vector<unsigned char>> send_zerocopy_each(int fd, uint32_t count, size_t len,
                                                           uint64_t seed)
{
    std::vector<std::vector<unsigned char>> bufs(count, std::vector<unsigned char>(len));
    for (uint32_t k = 0; k < count; k++) {
        fill(bufs[k], k * len, seed);
        const ssize_t n = send(fd, bufs[k].data(), len, MSG_ZEROCOPY | MSG_NOSIGNAL);
        if (n != static_cast<ssize_t>(len)) {
            ADD_FAILURE() << "send " << k << " returned " << n << ": " << strerror(errno);
            break;
        }
    }
    return bufs;
}

// Several MSG_ZEROCOPY sends in flight at once (net.sdp.zcopy_async_offers,
// 4): each returns once its SrcAvail is out while the reader has read
// nothing; the sink queues the offers (FIONREAD counts them all) and reads
// them in stream order by RDMA Read; the notifications come in order, none
// COPIED.  A fifth send waits for room.
TEST_F(ZeroCopy, MsgZerocopySeveralSendsInFlightAtOnce)
{
    const int c = zerocopy_client(p_);
    constexpr uint32_t kInFlight = 4;
    constexpr size_t kLen = 256 * kKiB;
    const auto bufs = send_zerocopy_each(c, kInFlight, kLen, 5);
    ASSERT_FALSE(HasFailure());
    std::vector<unsigned char> fifth(kLen);
    fill(fifth, kInFlight * kLen, 5);
    EXPECT_EQ(sock_stats(c).src_avail_sent, kInFlight) << "one SrcAvail each";
    EXPECT_EQ(delta("zcopy_async_joined"), kInFlight - 1) << "joined the offers in flight";
    EXPECT_TRUE(no_note_yet(c));
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(p_.server.get(), kInFlight * kLen));
    // No room for a fifth: EAGAIN, and no POLLOUT.
    pollfd pfd{c, POLLOUT, 0};
    EXPECT_EQ(poll(&pfd, 1, 0), 0) << "revents " << pfd.revents;
    errno = 0;
    EXPECT_EQ(send(c, fifth.data(), kLen, MSG_ZEROCOPY | MSG_NOSIGNAL | MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    std::thread sender([&] {
        EXPECT_EQ(send(c, fifth.data(), kLen, MSG_ZEROCOPY | MSG_NOSIGNAL),
                  static_cast<ssize_t>(kLen))
            << strerror(errno);
    });
    recv_stream(p_.server.get(), (kInFlight + 1) * kLen, (kInFlight + 1) * kLen, 5, MSG_WAITALL);
    sender.join();
    std::vector<ZcNote> notes;
    collect_notes(c, kInFlight, &notes);
    expect_zero_copy_notes(notes, kInFlight + 1);
    EXPECT_EQ(delta("zcopy_rx_bytes"), (kInFlight + 1) * kLen);
    EXPECT_EQ(delta("zcopy_fallback_send_sm"), 0u);
    EXPECT_EQ(delta("cpu_copy_bytes"), 0u);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.zc_tx_bytes, (kInFlight + 1) * kLen);
    int outq = -1;
    EXPECT_EQ(ioctl(c, SIOCOUTQ, &outq), 0);
    EXPECT_EQ(outq, 0);
}

// Blocking MSG_ZEROCOPY sends while a reader takes several at a time with
// MSG_WAITALL: the reader posts SinkAvails whenever it has read all that
// was offered, while the last offer's key may still be being invalidated.
// A send that joins offers in flight offers too, rather than writing into
// the SinkAvail and returning (notified) before them: the notifications
// come in order, without a gap, and the bytes arrive intact.
TEST_F(ZeroCopy, MsgZerocopyNotificationsStayInOrderWhileTheReaderAdvertises)
{
    const int c = zerocopy_client(p_);
    constexpr uint32_t kSends = 200;
    constexpr size_t kLen = 256 * kKiB;
    std::thread reader(
        [&] { recv_stream(p_.server.get(), kSends * kLen, 5 * kLen, 9, MSG_WAITALL); });
    // Pauses of 0 to 4 ms between the sends sweep the moment the next send
    // comes across that of the reader's SinkAvail and the last offer's
    // invalidation.
    std::vector<std::vector<unsigned char>> bufs(kSends, std::vector<unsigned char>(kLen));
    for (uint32_t k = 0; k < kSends; k++) {
        fill(bufs[k], k * kLen, 9);
        const ssize_t n = send(c, bufs[k].data(), kLen, MSG_ZEROCOPY | MSG_NOSIGNAL);
        if (n != static_cast<ssize_t>(kLen)) {
            ADD_FAILURE() << "send " << k << " returned " << n << ": " << strerror(errno);
            shutdown(c, SHUT_RDWR); // the reader sees the end
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(250 * (k % 17)));
    }
    reader.join();
    ASSERT_FALSE(HasFailure());
    std::vector<ZcNote> notes;
    collect_notes(c, kSends - 1, &notes);
    uint32_t next = 0;
    for (const ZcNote& n : notes) {
        EXPECT_EQ(n.ee.ee_info, next) << "a gap or a number out of order";
        EXPECT_LE(n.ee.ee_info, n.ee.ee_data);
        next = n.ee.ee_data + 1;
    }
    EXPECT_EQ(next, kSends);
    EXPECT_TRUE(no_note_yet(c));
}

// A receive with room for several queued offers reads them at once: one
// registration, an RDMA Read per offer, all in flight together, one
// transfer and one RdmaRdCompl; the bytes in stream order, the
// notifications in order and none COPIED.  A smaller receive reads the
// first offer and as much of the next as it has room for.
TEST_F(ZeroCopy, MsgZerocopyOneReceiveReadsSeveralOffersAtOnce)
{
    const int c = zerocopy_client(p_);
    const int s = p_.server.get();
    constexpr uint32_t kInFlight = 4;
    constexpr size_t kLen = 64 * kKiB;
    const auto bufs = send_zerocopy_each(c, kInFlight, kLen, 8);
    ASSERT_FALSE(HasFailure());
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(s, kInFlight * kLen));
    std::vector<unsigned char> in(kInFlight * kLen + 4096);
    // 1.5 offers: the first and half the second.
    const sdp_sock_stats st0 = sock_stats(s);
    ssize_t n = recv(s, in.data(), kLen + kLen / 2, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(kLen + kLen / 2)) << strerror(errno);
    const sdp_sock_stats st1 = sock_stats(s);
    EXPECT_EQ(st1.rdma_reads - st0.rdma_reads, 2u) << "one RDMA Read per offer";
    EXPECT_EQ(st1.zc_rx_segs - st0.zc_rx_segs, 1u) << "both in one transfer";
    // The rest of the second, the third and the fourth: all that is left,
    // with room to spare.
    n = recv(s, in.data() + kLen + kLen / 2, in.size() - kLen - kLen / 2, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(2 * kLen + kLen / 2)) << strerror(errno);
    const sdp_sock_stats st2 = sock_stats(s);
    EXPECT_EQ(st2.rdma_reads - st1.rdma_reads, 3u);
    EXPECT_EQ(st2.zc_rx_segs - st1.zc_rx_segs, 1u);
    for (size_t i = 0; i < kInFlight * kLen; i++)
        ASSERT_EQ(in[i], pattern(i, 8)) << "byte " << i;
    std::vector<ZcNote> notes;
    collect_notes(c, kInFlight - 1, &notes);
    expect_zero_copy_notes(notes, kInFlight);
    EXPECT_EQ(delta("zcopy_rx_bytes"), kInFlight * kLen);
    EXPECT_EQ(delta("zcopy_fallback_send_sm"), 0u);
    EXPECT_EQ(delta("cpu_copy_bytes"), 0u);
    EXPECT_TRUE(no_note_yet(c));
}

// The sink gives up the first of several offers in flight (MSG_PEEK): all
// of them end with one cancel; the first's bytes and the others' go by
// bcopy from their pinned buffers, in stream order, and every notification
// says COPIED.
TEST_F(ZeroCopy, MsgZerocopyGivingUpOneOfSeveralOffersCopiesThemInOrder)
{
    const int c = zerocopy_client(p_);
    constexpr uint32_t kInFlight = 3;
    constexpr size_t kLen = 256 * kKiB;
    const auto bufs = send_zerocopy_each(c, kInFlight, kLen, 6);
    ASSERT_FALSE(HasFailure());
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(p_.server.get(), kInFlight * kLen));
    unsigned char head[100];
    ASSERT_EQ(recv(p_.server.get(), head, sizeof(head), MSG_PEEK),
              static_cast<ssize_t>(sizeof(head)))
        << strerror(errno);
    for (size_t i = 0; i < sizeof(head); i++)
        ASSERT_EQ(head[i], pattern(i, 6)) << "byte " << i;
    recv_stream(p_.server.get(), kInFlight * kLen, 64 * kKiB, 6);
    std::vector<ZcNote> notes;
    collect_notes(c, kInFlight - 1, &notes);
    uint32_t next = 0;
    for (const ZcNote& n : notes) {
        EXPECT_EQ(n.ee.ee_info, next) << "a gap in the numbers";
        EXPECT_NE(n.ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0) << "ids " << n.ee.ee_info;
        next = n.ee.ee_data + 1;
    }
    EXPECT_EQ(next, kInFlight);
    EXPECT_GE(delta("zcopy_fallback_send_sm"), 1u);
    EXPECT_EQ(delta("zcopy_rx_bytes"), 0u);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.tx_bcopy_bytes, kInFlight * kLen);
}

// Several offers in flight and the peer resets the connection (it closes
// with the offers unread): every send is still notified, in order, once
// its pages are released, as TCP's are when it frees its queue; the pins
// go; the socket reports the reset.
TEST_F(ZeroCopy, MsgZerocopySeveralInFlightAndAPeerThatResets)
{
    const int c = zerocopy_client(p_);
    const long pin_before = vm_pin_kib();
    constexpr uint32_t kInFlight = 4;
    constexpr size_t kLen = 256 * kKiB;
    const auto bufs = send_zerocopy_each(c, kInFlight, kLen, 7);
    ASSERT_FALSE(HasFailure());
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(p_.server.get(), kInFlight * kLen));
    EXPECT_EQ(delta("zcopy_async_joined"), kInFlight - 1);
    p_.server.reset();
    std::vector<ZcNote> notes;
    collect_notes(c, kInFlight - 1, &notes);
    uint32_t next = 0;
    for (const ZcNote& n : notes) {
        EXPECT_EQ(n.ee.ee_info, next) << "a gap in the numbers";
        next = n.ee.ee_data + 1;
    }
    EXPECT_EQ(next, kInFlight);
    EXPECT_TRUE(no_note_yet(c));
    EXPECT_EQ(vm_pin_kib(), pin_before) << "pins outlived the notifications";
    char byte = 0;
    errno = 0;
    EXPECT_EQ(send(c, &byte, 1, MSG_NOSIGNAL), -1);
    EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE) << strerror(errno);
}

// Send `len` pattern bytes (seed) from an anonymous mapping with
// MSG_ZEROCOPY; returns the mapping (the caller unmaps it).
unsigned char* send_mapped(int fd, size_t len, uint64_t seed, int flags = 0)
{
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED) << strerror(errno);
    if (p == MAP_FAILED)
        return nullptr;
    auto* buf = static_cast<unsigned char*>(p);
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(i, seed);
    EXPECT_EQ(send(fd, buf, len, MSG_ZEROCOPY | MSG_NOSIGNAL | flags), static_cast<ssize_t>(len))
        << strerror(errno);
    return buf;
}

// The sink stops reading an offer after send() returned (MSG_PEEK over it:
// SendSM): the rest goes by bcopy from the still pinned buffer, in order,
// and the notification says COPIED.
TEST_F(ZeroCopy, MsgZerocopyRestOfAGivenUpOfferGoesByBcopy)
{
    const int c = zerocopy_client(p_);
    std::vector<unsigned char> a(kMiB);
    fill(a, 0, 7);
    ASSERT_EQ(send(c, a.data(), a.size(), MSG_ZEROCOPY | MSG_NOSIGNAL),
              static_cast<ssize_t>(a.size()))
        << strerror(errno);
    EXPECT_TRUE(no_note_yet(c));
    unsigned char head[100];
    ASSERT_EQ(recv(p_.server.get(), head, sizeof(head), MSG_PEEK),
              static_cast<ssize_t>(sizeof(head)))
        << strerror(errno);
    for (size_t i = 0; i < sizeof(head); i++)
        ASSERT_EQ(head[i], pattern(i, 7)) << "byte " << i;
    recv_stream(p_.server.get(), kMiB, 256 * kKiB, 7);
    std::vector<ZcNote> notes;
    collect_notes(c, 0, &notes);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0);
    EXPECT_GE(delta("zcopy_fallback_send_sm"), 1u);
    EXPECT_GE(delta("zcopy_fallback_peek"), 1u);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.zc_tx_bytes + st.tx_bcopy_bytes, kMiB);
    EXPECT_GT(st.tx_bcopy_bytes, 0u);
}

// sdp.ko's fault hook (kernel/sdp_fault.c), kind 8: the next send-buffer
// allocations fail; restored to none when the test ends.
class FailedAllocs {
  public:
    explicit FailedAllocs(int count)
    {
        armed_ = write_file(kKinds, "8") && write_file(kCount, std::to_string(count));
    }
    ~FailedAllocs()
    {
        write_file(kCount, "0");
        write_file(kKinds, "7");
    }
    FailedAllocs(const FailedAllocs&) = delete;
    FailedAllocs& operator=(const FailedAllocs&) = delete;
    bool armed() const { return armed_; }
    static bool spent() { return read_file(kCount).value_or("?") == "0\n"; }

  private:
    static constexpr const char* kCount = "/sys/module/sdp/parameters/fail_posts";
    static constexpr const char* kKinds = "/sys/module/sdp/parameters/fail_post_kinds";
    bool armed_ = false;
};

// The same when the send buffers that rest needs have no memory at first
// (send buffers come with the first segment that needs them, and three
// allocations fail): the copy waits for memory, as a blocking send does,
// and no byte is lost though send() had returned.
TEST_F(ZeroCopy, MsgZerocopyRestOfAGivenUpOfferWaitsForMemory)
{
    const int c = zerocopy_client(p_);
    ASSERT_EQ(sock_stats(c).tx_ring_bytes, 0u) << "the send ring has buffers already";
    std::vector<unsigned char> a(kMiB);
    fill(a, 0, 9);
    ASSERT_EQ(send(c, a.data(), a.size(), MSG_ZEROCOPY | MSG_NOSIGNAL),
              static_cast<ssize_t>(a.size()))
        << strerror(errno);
    const FailedAllocs fail(3);
    ASSERT_TRUE(fail.armed());
    unsigned char head[100];
    ASSERT_EQ(recv(p_.server.get(), head, sizeof(head), MSG_PEEK),
              static_cast<ssize_t>(sizeof(head)))
        << strerror(errno);
    recv_stream(p_.server.get(), kMiB, 256 * kKiB, 9);
    EXPECT_TRUE(FailedAllocs::spent()) << "the injected failures never fired";
    std::vector<ZcNote> notes;
    collect_notes(c, 0, &notes);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0);
    EXPECT_GE(delta("zcopy_fallback_send_sm"), 1u);
    EXPECT_EQ(delta("conn_err_reset"), 0u);
}

// Once send() returned, the program may unmap the buffer before the
// notification, or fork and let the child write to its copy: the pages
// the peer reads stay pinned and unchanged, as TCP's skbs hold theirs.
TEST_F(ZeroCopy, MsgZerocopyUnmapOrForkAfterTheSendKeepsTheBytes)
{
    const int c = zerocopy_client(p_);
    unsigned char* buf = send_mapped(c, kMiB, 3);
    ASSERT_NE(buf, nullptr);
    ASSERT_EQ(munmap(buf, kMiB), 0);
    recv_stream(p_.server.get(), kMiB, kMiB, 3, MSG_WAITALL);

    buf = send_mapped(c, kMiB, 4);
    ASSERT_NE(buf, nullptr);
    const pid_t child = fork();
    ASSERT_GE(child, 0) << strerror(errno);
    if (child == 0) {
        std::memset(buf, 0xee, kMiB); // its own copy
        _exit(0);
    }
    int status = -1;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    recv_stream(p_.server.get(), kMiB, kMiB, 4, MSG_WAITALL);
    std::vector<ZcNote> notes;
    collect_notes(c, 1, &notes);
    ASSERT_FALSE(notes.empty());
    EXPECT_EQ(notes.back().ee.ee_data, 1u);
    for (size_t i = 0; i < kMiB; i++)
        ASSERT_EQ(buf[i], pattern(i, 4)) << "the parent's buffer changed at " << i;
    munmap(buf, kMiB);
    EXPECT_EQ(delta("zcopy_async_sends"), 2u);
}

// close() and shutdown(SHUT_WR) right after a send that returned with its
// offer in flight: the peer reads every byte, then the end of the stream,
// as over TCP (the FIN goes after the queue).
TEST_F(ZeroCopy, MsgZerocopyShutdownAndCloseGoAfterTheBytes)
{
    const int c = zerocopy_client(p_);
    unsigned char* buf = send_mapped(c, kMiB, 5);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(shutdown(c, SHUT_WR), 0) << strerror(errno);
    errno = 0;
    EXPECT_EQ(send(c, buf, 10, MSG_NOSIGNAL), -1);
    EXPECT_EQ(errno, EPIPE);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    recv_stream(p_.server.get(), kMiB, kMiB, 5, MSG_WAITALL);
    char byte = 0;
    EXPECT_EQ(recv(p_.server.get(), &byte, 1, 0), 0) << "no end of stream after the bytes";
    std::vector<ZcNote> notes;
    collect_notes(c, 0, &notes);
    munmap(buf, kMiB);

    // The same with close(), on a second connection.
    Pair q = ::sdp::vmtest::connected_pair(kAddrA, port_ + 1000);
    ASSERT_GE(q.server.get(), 0);
    enable_zerocopy(q.client.get(), true);
    buf = send_mapped(q.client.get(), kMiB, 6);
    ASSERT_NE(buf, nullptr);
    q.client.reset();
    munmap(buf, kMiB);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    recv_stream(q.server.get(), kMiB, 256 * kKiB, 6);
    EXPECT_EQ(recv(q.server.get(), &byte, 1, 0), 0) << "no end of stream after the bytes";
    EXPECT_EQ(delta("zcopy_async_sends"), 2u);
}

// A non-blocking MSG_ZEROCOPY send goes by zero copy too (it waits for
// nobody); a plain send gets EAGAIN while the offer owns the stream.  If
// the peer resets the connection instead of reading, the notification
// still comes (the buffer is free), as TCP's does.
TEST_F(ZeroCopy, MsgZerocopyNonblockingSendAndAPeerThatResets)
{
    const int c = zerocopy_client(p_);
    unsigned char* buf = send_mapped(c, kMiB, 8, MSG_DONTWAIT);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(sock_stats(c).src_avail_sent, 1u);
    errno = 0;
    EXPECT_EQ(send(c, buf, 1, MSG_DONTWAIT | MSG_NOSIGNAL), -1) << "a byte overtaking the offer";
    EXPECT_EQ(errno, EAGAIN);
    pollfd pfd{c, POLLOUT, 0};
    recv_stream(p_.server.get(), kMiB, kMiB, 8, MSG_WAITALL);
    std::vector<ZcNote> notes;
    collect_notes(c, 0, &notes);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0].ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED, 0);
    EXPECT_EQ(poll(&pfd, 1, 5000), 1);

    // Offered, then the peer closes without reading: a reset.
    ASSERT_EQ(send(c, buf, kMiB, MSG_ZEROCOPY | MSG_DONTWAIT | MSG_NOSIGNAL),
              static_cast<ssize_t>(kMiB))
        << strerror(errno);
    p_.server.reset();
    collect_notes(c, 1, &notes);
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_EQ(notes[1].ee.ee_info, 1u);
    char byte = 0;
    errno = 0;
    EXPECT_EQ(send(c, &byte, 1, MSG_NOSIGNAL), -1);
    EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE) << strerror(errno);
    munmap(buf, kMiB);
}

// A non-blocking MSG_ZEROCOPY send larger than one registration (2 MiB
// less a page on Soft-RoCE) offers one and returns its length, as TCP's
// returns what its send buffer took; the program sends the rest when
// POLLOUT comes.  Every byte goes by RDMA, none copied; each send that
// returned a count has its number, no notification says COPIED.
TEST_F(ZeroCopy, MsgZerocopyNonblockingSendLargerThanARegistration)
{
    const int c = zerocopy_client(p_);
    constexpr size_t kLen = 5 * kMiB;
    std::vector<unsigned char> a(kLen);
    fill(a, 0, 10);
    std::thread reader([&] { recv_stream(p_.server.get(), kLen, 2 * kMiB, 10); });
    std::vector<size_t> counts;
    std::vector<ZcNote> notes;
    send_zerocopy_nonblocking(c, a.data(), kLen, &counts, &notes);
    reader.join();
    ASSERT_FALSE(counts.empty());
    EXPECT_LE(counts[0], 2 * kMiB) << "more than one registration at once";
    const auto sends = static_cast<uint32_t>(counts.size());
    EXPECT_GE(sends, 3u);
    collect_notes(c, sends - 1, &notes);
    expect_zero_copy_notes(notes, sends);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.zc_tx_bytes, kLen);
    EXPECT_EQ(st.tx_bcopy_bytes, 0u);
    EXPECT_EQ(delta("zcopy_async_sends"), sends);
}

// A blocking MSG_ZEROCOPY send larger than one registration offers each
// registration and keeps them all in flight, up to zcopy_async_offers:
// one of 5 MiB (three registrations on Soft-RoCE) returns before the peer
// reads a byte, with the peer's queue holding it all; one of 11 MiB waits
// only for room, not for each transfer.  Each send has one number,
// notified once the peer read its last byte, not COPIED; nothing copied.
TEST_F(ZeroCopy, MsgZerocopyBlockingSendLargerThanARegistrationKeepsItsOffersInFlight)
{
    const int c = zerocopy_client(p_);
    const int s = p_.server.get();
    constexpr size_t kLen = 5 * kMiB, kLong = 11 * kMiB;
    std::vector<unsigned char> a(kLen), b(kLong);
    fill(a, 0, 12);
    fill(b, kLen, 12);
    const sdp_sock_stats st0 = sock_stats(c);
    ASSERT_EQ(send(c, a.data(), kLen, MSG_ZEROCOPY | MSG_NOSIGNAL), static_cast<ssize_t>(kLen))
        << strerror(errno);
    const sdp_sock_stats st1 = sock_stats(c);
    const uint64_t offers = st1.src_avail_sent - st0.src_avail_sent;
    EXPECT_GE(offers, 3u) << "one offer per registration";
    EXPECT_EQ(delta("zcopy_async_sends"), offers) << "all of them in flight";
    EXPECT_TRUE(no_note_yet(c));
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(s, static_cast<int>(kLen)));
    std::thread reader([&] { recv_stream(s, kLen + kLong, 2 * kMiB, 12); });
    ASSERT_EQ(send(c, b.data(), kLong, MSG_ZEROCOPY | MSG_NOSIGNAL), static_cast<ssize_t>(kLong))
        << strerror(errno);
    reader.join();
    std::vector<ZcNote> notes;
    collect_notes(c, 1, &notes);
    expect_zero_copy_notes(notes, 2);
    const sdp_sock_stats st2 = sock_stats(c);
    EXPECT_EQ(st2.zc_tx_bytes - st0.zc_tx_bytes, kLen + kLong);
    EXPECT_EQ(st2.tx_bcopy_bytes - st0.tx_bcopy_bytes, 0u);
    EXPECT_EQ(delta("zcopy_async_sends"), st2.src_avail_sent - st0.src_avail_sent);
    EXPECT_EQ(delta("cpu_copy_bytes"), 0u);
    EXPECT_TRUE(no_note_yet(c));
}

// A non-blocking MSG_ZEROCOPY send right after bcopy sends finds Soft-RoCE's
// send queue busy, where a registration may not go yet (reg_idle_sq).  It
// gets EAGAIN, as TCP's send with a full buffer, and POLLOUT comes once the
// queue is idle; then it goes by RDMA.  Copying it instead would keep the
// queue busy for the next one: such a stream would never see zero copy.
TEST_F(ZeroCopy, MsgZerocopyNonblockingSendAfterBcopyWaitsForTheQueue)
{
    const int c = zerocopy_client(p_);
    constexpr int kRounds = 6;
    constexpr size_t kSmall = 48 * kKiB, kSmalls = 4, kBig = kMiB;
    constexpr size_t kRound = kSmalls * kSmall + kBig, kLen = kRounds * kRound;
    std::vector<unsigned char> a(kLen);
    fill(a, 0, 11);
    std::thread reader([&] { recv_stream(p_.server.get(), kLen, 2 * kMiB, 11); });
    std::vector<size_t> counts;
    std::vector<ZcNote> notes;
    size_t off = 0;
    for (int r = 0; r < kRounds; r++) {
        for (size_t i = 0; i < kSmalls; i++, off += kSmall)
            ASSERT_EQ(send(c, a.data() + off, kSmall, MSG_NOSIGNAL), static_cast<ssize_t>(kSmall))
                << strerror(errno);
        send_zerocopy_nonblocking(c, a.data() + off, kBig, &counts, &notes);
        off += kBig;
    }
    reader.join();
    const auto sends = static_cast<uint32_t>(counts.size());
    collect_notes(c, sends - 1, &notes);
    expect_zero_copy_notes(notes, sends);
    const sdp_sock_stats st = sock_stats(c);
    EXPECT_EQ(st.zc_tx_bytes, kRounds * kBig);
    EXPECT_EQ(st.tx_bcopy_bytes, kRounds * kSmalls * kSmall);
    // The case this test is about happened (else it proves nothing).
    EXPECT_GE(delta("zcopy_sq_busy_again"), 1u);
}

// The receiving side of the same rule: a non-blocking receive that meets
// the peer's offer while its own send queue is busy (its last RdmaRdCompl,
// credit updates) gets EAGAIN, and POLLIN once the queue is idle, instead
// of giving the offer up.  Given up, most offers of a stream of
// non-blocking MSG_ZEROCOPY sends read by non-blocking receives (event
// loops, io_uring) went by bcopy (SendSM).
TEST_F(ZeroCopy, NonblockingReceiveOfAnOfferWaitsForTheQueue)
{
    const int c = zerocopy_client(p_);
    constexpr size_t kLen = 24 * kMiB, kBuf = 4 * kMiB;
    std::vector<unsigned char> a(kLen);
    fill(a, 0, 12);
    std::thread writer([&] {
        std::vector<size_t> counts;
        std::vector<ZcNote> notes;
        for (size_t done = 0; done < kLen; done += kBuf)
            send_zerocopy_nonblocking(c, a.data() + done, kBuf, &counts, &notes);
    });
    const int s = p_.server.get();
    std::vector<unsigned char> buf(kBuf);
    size_t off = 0;
    while (off < kLen) {
        const ssize_t r = recv(s, buf.data(), std::min(kBuf, kLen - off), MSG_DONTWAIT);
        if (r < 0) {
            ASSERT_EQ(errno, EAGAIN) << strerror(errno);
            pollfd pfd{s, POLLIN, 0};
            ASSERT_EQ(poll(&pfd, 1, 10000 * wait_scale()), 1) << "no POLLIN at " << off;
            continue;
        }
        ASSERT_GT(r, 0) << "EOF at " << off;
        for (ssize_t i = 0; i < r; i++)
            ASSERT_EQ(buf[static_cast<size_t>(i)], pattern(off + static_cast<size_t>(i), 12))
                << "byte " << off + static_cast<size_t>(i);
        off += static_cast<size_t>(r);
    }
    writer.join();
    // Nothing given up: only the stream's tail, shorter than the
    // threshold after the last whole registration, came by bcopy.
    EXPECT_EQ(delta("zcopy_fallback_send_sm"), 0u);
    const sdp_sock_stats st = sock_stats(s);
    EXPECT_LT(st.rx_bcopy_bytes, 64u * 1024);
    EXPECT_EQ(st.zc_rx_bytes + st.rx_bcopy_bytes, kLen);
}

// The option itself answers as TCP's: 0 and 1 only, an int at least,
// read back through getsockopt(SOL_SOCKET, SO_ZEROCOPY); on SDP sockets
// of both kinds also at SOL_SDP (SDP_ZEROCOPY), and at SOL_SOCKET where
// the kernel lets SDP take it (6.12 on, see enable_zerocopy()).
TEST(MsgZerocopy, OptionAsTcps)
{
    struct Kind {
        const char* name;
        Fd fd;
        int level, optname;
    };
    const bool sol_socket = kernel_version() >= 6012;
    std::vector<Kind> kinds;
    kinds.push_back({"TCP", Fd(socket(AF_INET, SOCK_STREAM, 0)), SOL_SOCKET, SO_ZEROCOPY});
    kinds.push_back(
        {"IPPROTO_SDP", Fd(socket(AF_INET, SOCK_STREAM, IPPROTO_SDP)), SOL_SDP, SDP_ZEROCOPY});
    kinds.push_back({"AF_INET_SDP", sdp_only_socket(), SOL_SDP, SDP_ZEROCOPY});
    if (sol_socket) {
        kinds.push_back({"IPPROTO_SDP at SOL_SOCKET", Fd(socket(AF_INET, SOCK_STREAM, IPPROTO_SDP)),
                         SOL_SOCKET, SO_ZEROCOPY});
        kinds.push_back({"AF_INET_SDP at SOL_SOCKET", sdp_only_socket(), SOL_SOCKET, SO_ZEROCOPY});
    }
    for (const Kind& k : kinds) {
        const int fd = k.fd.get();
        ASSERT_GE(fd, 0) << k.name;
        auto set = [&](int v, socklen_t len) {
            errno = 0;
            return setsockopt(fd, k.level, k.optname, &v, len) == 0 ? 0 : errno;
        };
        auto get = [&] {
            int v = -1;
            socklen_t len = sizeof(v);
            EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &v, &len), 0) << k.name;
            return v;
        };
        EXPECT_EQ(get(), 0) << k.name << ": off by default";
        EXPECT_EQ(set(2, sizeof(int)), EINVAL) << k.name;
        EXPECT_EQ(set(-1, sizeof(int)), EINVAL) << k.name;
        EXPECT_EQ(set(1, 2), EINVAL) << k.name << ": short option";
        EXPECT_EQ(get(), 0) << k.name;
        EXPECT_EQ(set(1, sizeof(int)), 0) << k.name;
        EXPECT_EQ(get(), 1) << k.name;
        if (k.level == SOL_SDP) {
            int v = -1;
            socklen_t len = sizeof(v);
            EXPECT_EQ(getsockopt(fd, SOL_SDP, SDP_ZEROCOPY, &v, &len), 0) << k.name;
            EXPECT_EQ(v, 1) << k.name;
        }
        EXPECT_EQ(set(0, sizeof(int)), 0) << k.name;
        EXPECT_EQ(get(), 0) << k.name;
    }
}

// ---- io_uring SEND_ZC and SENDMSG_ZC --------------------------------------

// liburing 2.3 (bookworm) predates the opcode; the kernel has it from 6.1.
constexpr uint8_t kOpSendmsgZc = IORING_OP_SEND_ZC + 1;

// One completion as the program sees it; flags reduced to MORE and NOTIF.
struct UringCqe {
    uint64_t data = 0;
    int res = 0;
    uint32_t flags = 0;
    bool operator==(const UringCqe& o) const
    {
        return data == o.data && res == o.res && flags == o.flags;
    }
};

std::ostream& operator<<(std::ostream& os, const UringCqe& c)
{
    return os << "{" << c.data << ", " << c.res << ", 0x" << std::hex << c.flags << std::dec << "}";
}

// For a test's scope: offers wait 5 s for a reader (zcopy_sink_wait_ms,
// back to its default of 200 after).
struct LongSinkWait {
    LongSinkWait() { set_sysctl("zcopy_sink_wait_ms", "5000"); }
    ~LongSinkWait() { set_sysctl("zcopy_sink_wait_ms", "200"); }
    LongSinkWait(const LongSinkWait&) = delete;
    LongSinkWait& operator=(const LongSinkWait&) = delete;
};

// The next completion, within 10 s (scaled); false on timeout.
bool next_cqe(io_uring* ring, UringCqe* out)
{
    __kernel_timespec ts{};
    ts.tv_sec = 10LL * wait_scale();
    io_uring_cqe* cqe = nullptr;
    int rc = 0;
    do {
        rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
    } while (rc == -EINTR);
    if (rc < 0) {
        ADD_FAILURE() << "no completion: " << strerror(-rc);
        return false;
    }
    out->data = io_uring_cqe_get_data64(cqe);
    out->res = cqe->res;
    out->flags = cqe->flags & (IORING_CQE_F_MORE | IORING_CQE_F_NOTIF);
    io_uring_cqe_seen(ring, cqe);
    return true;
}

// Sizes of the zero-copy requests: bcopy-sized, the threshold, 1 MiB.
const std::vector<size_t> kUringSizes = {100, 64 * kKiB, kMiB, 4096, 256 * kKiB};
constexpr size_t kUringPlain = 8192;
constexpr size_t kUringReply = 3000;

struct UringRun {
    std::vector<UringCqe> cqes;
    bool reply_intact = false;
    uint64_t zc_tx_bytes = 0; // SDP: bytes the peer read by RDMA
};

// A connected pair; the client sends each size with SEND_ZC (even
// requests) or SENDMSG_ZC (odd), MSG_WAITALL, one request at a time, then
// a plain IORING_OP_SEND; the server checks every byte and answers, and
// the client reads the answer with IORING_OP_RECV.  Every completion of
// the client's ring, in order.
UringRun run_uring_zc(int proto, int port)
{
    UringRun run;
    ConnectedPair pair = connected_pair(AF_INET, proto, port);
    const Fd& client = pair.client;
    const Fd& server = pair.server;
    if (server.get() < 0)
        return run;
    size_t total = kUringPlain;
    for (size_t size : kUringSizes)
        total += size;
    std::thread reader([&] {
        recv_stream(server.get(), total, kMiB);
        std::vector<unsigned char> reply(kUringReply);
        fill(reply, 0, 7);
        EXPECT_EQ(send(server.get(), reply.data(), reply.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(reply.size()));
    });

    io_uring ring{};
    const int rc = io_uring_queue_init(8, &ring, 0);
    if (rc < 0) {
        ADD_FAILURE() << "io_uring_queue_init: " << strerror(-rc);
        reader.join();
        return run;
    }
    size_t off = 0;
    uint64_t id = 0;
    for (size_t size : kUringSizes) {
        // The buffer stays untouched until its NOTIF completion.
        std::vector<unsigned char> buf(size);
        fill(buf, off);
        iovec iov{buf.data(), size};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (id % 2 == 0) {
            io_uring_prep_send_zc(sqe, client.get(), buf.data(), size, MSG_WAITALL | MSG_NOSIGNAL,
                                  0);
        } else {
            io_uring_prep_sendmsg(sqe, client.get(), &mh, MSG_WAITALL | MSG_NOSIGNAL);
            sqe->opcode = kOpSendmsgZc;
        }
        io_uring_sqe_set_data64(sqe, id);
        EXPECT_EQ(io_uring_submit(&ring), 1);
        // The send's completion (MORE: a notification follows), then the
        // notification.
        for (int k = 0; k < 2; k++) {
            UringCqe c;
            if (!next_cqe(&ring, &c))
                break;
            run.cqes.push_back(c);
        }
        off += size;
        id++;
    }
    std::vector<unsigned char> plain(kUringPlain);
    fill(plain, off);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send(sqe, client.get(), plain.data(), plain.size(), MSG_WAITALL | MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, id++);
    std::vector<unsigned char> reply(kUringReply);
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recv(sqe, client.get(), reply.data(), reply.size(), MSG_WAITALL);
    io_uring_sqe_set_data64(sqe, id++);
    EXPECT_EQ(io_uring_submit(&ring), 2);
    for (int k = 0; k < 2; k++) {
        UringCqe c;
        if (next_cqe(&ring, &c))
            run.cqes.push_back(c);
    }
    reader.join();
    std::vector<unsigned char> want(kUringReply);
    fill(want, 0, 7);
    run.reply_intact = reply == want;
    if (proto == IPPROTO_SDP)
        run.zc_tx_bytes = sock_stats(client.get()).zc_tx_bytes;
    io_uring_queue_exit(&ring);
    return run;
}

// A program written for io_uring's zero-copy sends on TCP works unchanged
// on SDP (the socket advertises SOCK_SUPPORT_ZC): the same completions in
// the same order, each request's result with IORING_CQE_F_MORE and then
// its IORING_CQE_F_NOTIF completion (the buffer is the program's again),
// every byte delivered; plain io_uring send and recv on the same socket.
TEST(IoUringZerocopy, CompletionsAsTcps)
{
    const UringRun tcp = run_uring_zc(0, 7393);
    const UringRun sdp = run_uring_zc(IPPROTO_SDP, 7394);
    std::vector<UringCqe> want;
    uint64_t id = 0;
    for (size_t size : kUringSizes) {
        want.push_back({id, static_cast<int>(size), IORING_CQE_F_MORE});
        want.push_back({id, 0, IORING_CQE_F_NOTIF});
        id++;
    }
    const std::vector<UringCqe> tail = {{id, static_cast<int>(kUringPlain), 0},
                                        {id + 1, static_cast<int>(kUringReply), 0}};
    for (const UringRun* r : {&tcp, &sdp}) {
        const char* who = r == &tcp ? "TCP" : "SDP";
        ASSERT_EQ(r->cqes.size(), want.size() + tail.size()) << who;
        for (size_t i = 0; i < want.size(); i++)
            EXPECT_EQ(r->cqes[i], want[i]) << who << " completion " << i;
        // The plain send and the receive complete in either order.
        std::vector<UringCqe> last(r->cqes.end() - 2, r->cqes.end());
        if (last[0].data > last[1].data)
            std::swap(last[0], last[1]);
        EXPECT_EQ(last, tail) << who;
        EXPECT_TRUE(r->reply_intact) << who;
    }
    // The requests of 64 KiB and more went by zero copy: io_uring issues
    // them without blocking, and such a send offers its buffer and returns.
    EXPECT_GE(sdp.zc_tx_bytes, kMiB) << "SEND_ZC copied on SDP";
}

// A SEND_ZC request on SDP completes once its SrcAvail is out; its NOTIF
// completion comes only when the peer has read the buffer, not before.
TEST(IoUringZerocopy, NotifOnlyOnceThePeerRead)
{
    const LongSinkWait sink_wait;
    ConnectedPair pair = connected_pair(AF_INET, IPPROTO_SDP, 7392);
    ASSERT_GE(pair.server.get(), 0);
    io_uring ring{};
    ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
    std::vector<unsigned char> buf(kMiB);
    fill(buf, 0, 9);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send_zc(sqe, pair.client.get(), buf.data(), buf.size(), MSG_NOSIGNAL, 0);
    io_uring_sqe_set_data64(sqe, 1);
    ASSERT_EQ(io_uring_submit(&ring), 1);
    UringCqe c;
    ASSERT_TRUE(next_cqe(&ring, &c));
    EXPECT_EQ(c, (UringCqe{1, static_cast<int>(kMiB), IORING_CQE_F_MORE}));
    EXPECT_EQ(sock_stats(pair.client.get()).src_avail_sent, 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    io_uring_cqe* early = nullptr;
    EXPECT_EQ(io_uring_peek_cqe(&ring, &early), -EAGAIN) << "NOTIF before the peer read";
    recv_stream(pair.server.get(), kMiB, kMiB, 9, MSG_WAITALL);
    ASSERT_TRUE(next_cqe(&ring, &c));
    EXPECT_EQ(c, (UringCqe{1, 0, IORING_CQE_F_NOTIF}));
    EXPECT_EQ(sock_stats(pair.client.get()).zc_tx_bytes, kMiB);
    io_uring_queue_exit(&ring);
}

// A SEND_ZC larger than one registration with MSG_WAITALL: io_uring's
// non-blocking issue gets one registration's offer (a short count), and
// goes on by itself when POLLOUT comes; one result for all of it, one
// NOTIF, every byte by RDMA and none copied, in one transfer per
// registration at least.  A transfer is a SrcAvail the reader reads, or
// an RDMA Write into the reader's SinkAvail when the reader, waiting in
// recv() between two offers, made its own first (one run in 40).
TEST(IoUringZerocopy, WaitallLargerThanARegistrationCopiesNothing)
{
    const LongSinkWait sink_wait;
    ConnectedPair pair = connected_pair(AF_INET, IPPROTO_SDP, 7393);
    ASSERT_GE(pair.server.get(), 0);
    io_uring ring{};
    ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
    constexpr size_t kLen = 5 * kMiB;
    std::vector<unsigned char> buf(kLen);
    fill(buf, 0, 11);
    std::thread reader([&] { recv_stream(pair.server.get(), kLen, 2 * kMiB, 11); });
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send_zc(sqe, pair.client.get(), buf.data(), buf.size(),
                          MSG_NOSIGNAL | MSG_WAITALL, 0);
    io_uring_sqe_set_data64(sqe, 1);
    ASSERT_EQ(io_uring_submit(&ring), 1);
    UringCqe c;
    ASSERT_TRUE(next_cqe(&ring, &c));
    EXPECT_EQ(c, (UringCqe{1, static_cast<int>(kLen), IORING_CQE_F_MORE}));
    ASSERT_TRUE(next_cqe(&ring, &c));
    EXPECT_EQ(c, (UringCqe{1, 0, IORING_CQE_F_NOTIF}));
    reader.join();
    const sdp_sock_stats st = sock_stats(pair.client.get());
    EXPECT_EQ(st.zc_tx_bytes, kLen);
    EXPECT_EQ(st.tx_bcopy_bytes, 0u);
    EXPECT_GE(st.zc_tx_segs, 3u) << st.src_avail_sent << " SrcAvails, " << st.rdma_writes
                                 << " RDMA Writes";
    io_uring_queue_exit(&ring);
}

} // namespace
} // namespace sdp::vmtest
