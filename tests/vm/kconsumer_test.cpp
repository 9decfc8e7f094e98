// SPDX-License-Identifier: GPL-2.0
//
// In-kernel consumers of AF_INET_SDP (tests/kmod/sdp_kecho.c), checked from
// userspace: a kernel echo server built on sock_create_kern/kernel_accept
// that receives with kernel_recvmsg (kvec) or an ITER_BVEC sock_recvmsg and
// echoes with kernel_sendmsg (kvec into kmalloc, vmalloc and page memory)
// or sock_sendmsg on ITER_BVEC iterators (alloc_page, vmalloc and compound
// pages), and a kernel client self-test run against a userspace echo
// server.  Message sizes span the 64 KiB zero-copy threshold.  Unloading
// the test module must release every kernel socket: /proc/net/sdp empties
// and sdp.ko unloads.
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded; the tier script sets SDP_MODULE (sdp.ko, reloaded at the end) and
// SDP_KECHO_MODULE (sdp_kecho.ko).  The tests run in order and share the
// loaded module.
#include "socket_util.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <iostream>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sdp::vmtest {
namespace {

constexpr const char* kAddr = "10.77.0.1"; // veth0, rxe0: both ends use it
constexpr int kKernelPort = 7300;          // sdp_kecho's echo server
constexpr int kUserPort = 7301;            // our echo server, for the kernel client
constexpr int kBusyPort = 7302;
constexpr const char* kParams = "/sys/module/sdp_kecho/parameters/";

// Blocking calls give up after this long instead of hanging the tier.
void set_timeouts(int fd, int seconds)
{
    timeval tv{};
    tv.tv_sec = seconds;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// A connection whose blocking calls time out (see set_timeouts()).
Fd sdp_connect_timed(const char* ip, int port)
{
    Fd fd(socket(sdp_family(), SOCK_STREAM, 0));
    if (fd.get() < 0) {
        ADD_FAILURE() << "socket: " << strerror(errno);
        return fd;
    }
    set_timeouts(fd.get(), 30);
    const sockaddr_in a = make_addr(ip, port);
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
        ADD_FAILURE() << "connect " << ip << ":" << port << ": " << strerror(errno);
        return Fd();
    }
    return fd;
}

// "key=value" lines of a sdp_kecho parameter file.
std::map<std::string, std::string> read_kv(const std::string& name)
{
    std::map<std::string, std::string> out;
    std::istringstream in(read_file(kParams + name).value_or(""));
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq != std::string::npos)
            out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return out;
}

unsigned long long num(const std::map<std::string, std::string>& kv, const std::string& key)
{
    const auto it = kv.find(key);
    return it == kv.end() ? ~0ULL : std::strtoull(it->second.c_str(), nullptr, 10);
}

// Write a parameter with write(2), so the kernel's errno is seen.
int write_param(const std::string& name, const std::string& value)
{
    Fd fd(open((kParams + name).c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0)
        return errno;
    return write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size())
               ? 0
               : errno;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> v(n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t r = rng();
        memcpy(&v[i], &r, 8);
    }
    for (; i < n; i++)
        v[i] = static_cast<uint8_t>(rng());
    return v;
}

bool send_all(int fd, const uint8_t* p, size_t n, std::string* err)
{
    while (n != 0) {
        const ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
        if (r <= 0) {
            *err = std::string("send: ") + (r == 0 ? "returned 0" : strerror(errno));
            return false;
        }
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

// Send `sizes` as separate messages of `data` over fd from a second thread
// while this one reads the echo and compares byte for byte.  Empty string on
// success, else what went wrong.
std::string echo_round_trip(int fd, const std::vector<size_t>& sizes, uint64_t seed)
{
    size_t total = 0;
    for (size_t s : sizes)
        total += s;
    const std::vector<uint8_t> data = random_bytes(total, seed);
    std::string write_err;
    std::thread writer([&] {
        size_t off = 0;
        for (size_t s : sizes) {
            if (!send_all(fd, data.data() + off, s, &write_err))
                return;
            off += s;
        }
    });
    std::vector<uint8_t> buf(1 << 20);
    std::string err;
    size_t got = 0, msg = 0, msg_end = sizes.empty() ? 0 : sizes[0];
    while (got < total) {
        const ssize_t r = recv(fd, buf.data(), std::min(buf.size(), total - got), 0);
        if (r <= 0) {
            err = "echo ended after " + std::to_string(got) + " of " + std::to_string(total) +
                  " bytes: " + (r == 0 ? "EOF" : strerror(errno));
            break;
        }
        const auto n = static_cast<size_t>(r);
        if (memcmp(buf.data(), data.data() + got, n) != 0) {
            size_t i = 0;
            while (buf[i] == data[got + i])
                i++;
            while (got + i >= msg_end && msg + 1 < sizes.size())
                msg_end += sizes[++msg];
            err = "byte " + std::to_string(got + i) + " (message " + std::to_string(msg) + " of " +
                  std::to_string(sizes[msg]) + " B) differs: got " + std::to_string(buf[i]) +
                  ", want " + std::to_string(data[got + i]);
            break;
        }
        got += n;
    }
    if (!err.empty())
        shutdown(fd, SHUT_RDWR); // unblock the writer
    writer.join();
    if (err.empty() && !write_err.empty())
        err = write_err;
    return err;
}

std::string kecho_module()
{
    return required_env("SDP_KECHO_MODULE");
}

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = kKiB * kKiB;

// A userspace echo server for the kernel client: one connection, echoed
// until EOF.  corrupt_at flips the byte at that stream offset.
struct UserEchoServer {
    Fd listener;
    std::thread thread;
    std::atomic<unsigned long long> bytes{0};
    std::atomic<bool> clean_eof{false};
    std::string error;

    // zcopy_off: the accepted socket's SDP_ZCOPY_THRESH is 0, so it
    // echoes by bcopy and advertises no SinkAvail.
    explicit UserEchoServer(int port, long long corrupt_at = -1, bool zcopy_off = false)
    {
        listener = sdp_listener(kAddr, port);
        if (listener.get() < 0)
            return;
        thread = std::thread([this, corrupt_at, zcopy_off] { run(corrupt_at, zcopy_off); });
    }
    ~UserEchoServer()
    {
        if (thread.joinable())
            thread.join();
    }
    UserEchoServer(const UserEchoServer&) = delete;
    UserEchoServer& operator=(const UserEchoServer&) = delete;

    void run(long long corrupt_at, bool zcopy_off)
    {
        pollfd pfd{listener.get(), POLLIN, 0};
        if (poll(&pfd, 1, 120000) != 1) {
            error = "no connection from the kernel client";
            return;
        }
        Fd c(accept(listener.get(), nullptr, nullptr));
        if (c.get() < 0) {
            error = std::string("accept: ") + strerror(errno);
            return;
        }
        set_timeouts(c.get(), 60);
        const int off = 0;
        if (zcopy_off && setsockopt(c.get(), SOL_SDP, SDP_ZCOPY_THRESH, &off, sizeof(off)) != 0) {
            error = std::string("SDP_ZCOPY_THRESH: ") + strerror(errno);
            return;
        }
        std::vector<uint8_t> buf(256 * kKiB);
        unsigned long long pos = 0;
        for (;;) {
            const ssize_t r = recv(c.get(), buf.data(), buf.size(), 0);
            if (r == 0) {
                clean_eof = true;
                return;
            }
            if (r < 0) {
                error = std::string("recv: ") + strerror(errno);
                return;
            }
            const auto n = static_cast<size_t>(r);
            if (corrupt_at >= 0 && pos <= static_cast<unsigned long long>(corrupt_at) &&
                static_cast<unsigned long long>(corrupt_at) < pos + n)
                buf[static_cast<size_t>(corrupt_at - static_cast<long long>(pos))] ^= 0x40;
            pos += n;
            std::string err;
            if (!send_all(c.get(), buf.data(), n, &err)) {
                error = err;
                return;
            }
            bytes += n;
        }
    }
};

// Wait for the kernel client's run to end; its result.
std::map<std::string, std::string> wait_client_result(int seconds)
{
    std::map<std::string, std::string> r;
    eventually(
        [&] {
            r = read_kv("result");
            return r["state"] != "running";
        },
        seconds);
    return r;
}

std::string dump(const std::map<std::string, std::string>& kv)
{
    std::string s;
    for (const auto& [k, v] : kv)
        s.append("  ").append(k).append("=").append(v).append("\n");
    return s;
}

// ---- the tests, in order ---------------------------------------------------

TEST(KernelConsumer, TestBedIsReady)
{
    ASSERT_TRUE(module_loaded("sdp")) << "the tier loads sdp.ko first";
    ASSERT_FALSE(module_loaded("sdp_kecho")) << "left over from an earlier run";
    // Sockets of earlier tests may still be finishing their teardown.
    ASSERT_TRUE(eventually([] { return proc_sockets().empty(); }, 30))
        << read_file("/proc/net/sdp").value_or("");
}

// An address that is not an IPv4 address, and a port another SDP socket
// listens on: insmod fails and leaves no socket behind.
TEST(KernelConsumer, LoadFailuresLeaveNothingBehind)
{
    const std::string family = "family=" + std::to_string(sdp_family());
    EXPECT_EQ(load_module(kecho_module(), family + " addr=not-an-address"), EINVAL);
    {
        Fd busy = sdp_listener(kAddr, kBusyPort);
        ASSERT_GE(busy.get(), 0);
        EXPECT_EQ(load_module(kecho_module(), family + " port=" + std::to_string(kBusyPort)),
                  EADDRINUSE);
        EXPECT_FALSE(module_loaded("sdp_kecho"));
    }
    EXPECT_TRUE(eventually([] { return proc_sockets().empty(); }, 30))
        << read_file("/proc/net/sdp").value_or("");
}

TEST(KernelConsumer, LoadStartsTheKernelEchoServer)
{
    ASSERT_EQ(load_module(kecho_module(), "family=" + std::to_string(sdp_family()) + " addr=" +
                                              kAddr + " port=" + std::to_string(kKernelPort)),
              0);
    const std::string local = std::string(kAddr) + ":" + std::to_string(kKernelPort);
    bool listening = false;
    for (const auto& l : proc_sockets())
        listening |= l.local == local && l.state == "LISTEN";
    EXPECT_TRUE(listening) << read_file("/proc/net/sdp").value_or("");
    // Kernel sockets hold sdp.ko like any other socket.
    EXPECT_EQ(unload_module("sdp"), EWOULDBLOCK);
    const auto r = read_kv("result");
    EXPECT_EQ(r.at("state"), "idle");
}

// Userspace to the kernel server: sizes on both sides of the zero-copy
// threshold, interleaved, every byte compared.
TEST(KernelConsumer, KernelServerEchoesEverySize)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    const std::vector<size_t> sizes = {1,
                                       1000,
                                       64 * kKiB,
                                       256 * kKiB,
                                       3 * kMiB,
                                       1,
                                       64 * kKiB - 1,
                                       64 * kKiB + 1,
                                       1000,
                                       256 * kKiB + 1,
                                       3 * kMiB,
                                       64 * kKiB,
                                       1,
                                       1 * kMiB,
                                       7,
                                       128 * kKiB,
                                       4 * kMiB + 3,
                                       2,
                                       512 * kKiB,
                                       1000};
    Fd fd = sdp_connect_timed(kAddr, kKernelPort);
    ASSERT_GE(fd.get(), 0);
    EXPECT_EQ(echo_round_trip(fd.get(), sizes, 1), "");
    // Half-close: the server echoes what is left, then closes.
    ASSERT_EQ(shutdown(fd.get(), SHUT_WR), 0);
    char c = 0;
    EXPECT_EQ(recv(fd.get(), &c, 1, 0), 0) << strerror(errno);
    sdp_sock_stats st{};
    socklen_t len = sizeof(st);
    if (getsockopt(fd.get(), SOL_SDP, SDP_STATS, &st, &len) == 0) {
        std::cout << "[ INFO     ] this connection: zc_tx_bytes " << st.zc_tx_bytes
                  << ", zc_rx_bytes " << st.zc_rx_bytes << ", bcopy tx " << st.tx_bcopy_bytes
                  << ", bcopy rx " << st.rx_bcopy_bytes << "\n";
    }
}

TEST(KernelConsumer, KernelServerHandlesConcurrentConnections)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    constexpr int kClients = 3;
    std::vector<std::string> errors(kClients);
    std::vector<std::thread> threads;
    threads.reserve(kClients);
    for (int i = 0; i < kClients; i++) {
        threads.emplace_back([i, &errors] {
            Fd fd = sdp_connect_timed(kAddr, kKernelPort);
            if (fd.get() < 0) {
                errors[static_cast<size_t>(i)] = "connect failed";
                return;
            }
            const std::vector<size_t> sizes = {64 * kKiB + static_cast<size_t>(i), 1, 1 * kMiB,
                                               3000, 512 * kKiB - 1};
            errors[static_cast<size_t>(i)] =
                echo_round_trip(fd.get(), sizes, 100 + static_cast<uint64_t>(i));
        });
    }
    for (auto& t : threads)
        t.join();
    for (int i = 0; i < kClients; i++)
        EXPECT_EQ(errors[static_cast<size_t>(i)], "") << "client " << i;
}

// F3 for kernel consumers: kernel memory is never advertised with a
// SinkAvail.  The sink of a SinkAvail learns from the peer's RdmaWrCompl how
// many bytes the peer wrote; nothing proves it (an RDMA Write gives the sink
// no completion), so a lying peer would make a kernel consumer "receive"
// whatever its buffer held before: stale kernel memory.  Kernel buffers
// receive by RDMA Read of the peer's SrcAvail (complete when the bytes have
// landed) or by bcopy.
//
// Before each large message the client waits until the server's thread is
// blocked in its next receive, of up to 1 MiB into kmalloc, vmalloc, page
// or compound-page memory (kvec and bvec): a receive that the module before
// the fix advertised with a SinkAvail, which the client's send then filled
// by RDMA Write.  The client reads the echo in receives below the zero-copy
// threshold, so it never advertises either: no SinkAvail may cross the
// test bed (/proc/net/sdpstats counts both ends, which live on this host).
TEST(KernelConsumer, KernelServerNeverAdvertisesKernelMemory)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    const long thresh = sdp_sysctl("zcopy_thresh");
    ASSERT_EQ(thresh, 65536) << "the tier runs with the default threshold";
    constexpr size_t kClientRecv = 32 * kKiB; // below the threshold: no SinkAvail of ours
    const std::vector<size_t> sizes = {1 * kMiB,       1 * kMiB + 1000, 2 * kMiB,       512 * kKiB,
                                       1 * kMiB - 3,   3 * kMiB,        768 * kKiB + 5, 1 * kMiB,
                                       200 * kKiB + 1, 2 * kMiB + 7};
    size_t total = 0;
    for (size_t s : sizes)
        total += s;
    const std::vector<uint8_t> data = random_bytes(total, 42);

    Fd fd = sdp_connect_timed(kAddr, kKernelPort);
    ASSERT_GE(fd.get(), 0);
    const auto before = counters();
    std::vector<uint8_t> buf(kClientRecv);
    size_t off = 0;
    for (size_t m = 0; m < sizes.size(); m++) {
        // The server's thread is blocked in its receive by now.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::string write_err;
        std::thread writer([&, m] { send_all(fd.get(), data.data() + off, sizes[m], &write_err); });
        size_t got = 0;
        std::string err;
        while (got < sizes[m]) {
            const ssize_t r = recv(fd.get(), buf.data(), std::min(buf.size(), sizes[m] - got), 0);
            if (r <= 0) {
                err = "echo of message " + std::to_string(m) + " ended after " +
                      std::to_string(got) + " bytes: " + (r == 0 ? "EOF" : strerror(errno));
                break;
            }
            const auto n = static_cast<size_t>(r);
            if (memcmp(buf.data(), data.data() + off + got, n) != 0) {
                size_t i = 0;
                while (buf[i] == data[off + got + i])
                    i++;
                err = "message " + std::to_string(m) + " byte " + std::to_string(got + i) +
                      " differs: got " + std::to_string(buf[i]) + ", want " +
                      std::to_string(data[off + got + i]);
                break;
            }
            got += n;
        }
        if (!err.empty())
            shutdown(fd.get(), SHUT_RDWR); // unblock the writer
        writer.join();
        ASSERT_EQ(err, "");
        ASSERT_EQ(write_err, "");
        off += sizes[m];
    }

    sdp_sock_stats st{};
    socklen_t len = sizeof(st);
    ASSERT_EQ(getsockopt(fd.get(), SOL_SDP, SDP_STATS, &st, &len), 0) << strerror(errno);
    std::cout << "[ INFO     ] client: src_avail_sent " << st.src_avail_sent << ", zc_tx_bytes "
              << st.zc_tx_bytes << ", rdma_writes " << st.rdma_writes << ", zc_rx_bytes "
              << st.zc_rx_bytes << ", sink_avail_sent " << st.sink_avail_sent << "\n";
    EXPECT_EQ(st.tx_bytes, total);
    EXPECT_EQ(st.rx_bytes, total);
    // Our side advertised nothing, so any SinkAvail would be the server's.
    EXPECT_EQ(st.sink_avail_sent, 0u);
    EXPECT_EQ(counter_delta(before, "tx_sink_avail"), 0u)
        << "the kernel server advertised kernel memory with a SinkAvail";
    EXPECT_EQ(counter_delta(before, "rx_sink_avail"), 0u);
    // Nothing was RDMA-written into the server's buffers...
    EXPECT_EQ(st.rdma_writes, 0u);
    EXPECT_EQ(counter_delta(before, "zcopy_rdma_writes"), 0u);
    // ... while zero copy into kernel memory still works by RDMA Read: the
    // server read our SrcAvails.
    EXPECT_GT(st.src_avail_sent, 0u);
    EXPECT_GT(st.zc_tx_bytes, 0u);
    EXPECT_GT(counter_delta(before, "zcopy_rdma_reads"), 0u);
}

// A client that aborts the connection while the server is stuck sending to
// it (the client stopped reading): the server's thread gets ECONNRESET or
// EPIPE, releases its socket, nothing leaks.
TEST(KernelConsumer, KernelServerSurvivesAReset)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    const auto before = read_kv("server_stats");
    {
        Fd fd = sdp_connect_timed(kAddr, kKernelPort);
        ASSERT_GE(fd.get(), 0);
        const std::vector<uint8_t> data = random_bytes(4 * kMiB, 7);
        std::string err;
        std::thread writer([&] { send_all(fd.get(), data.data(), data.size(), &err); });
        // Read part of the echo, then stop reading: both directions fill.
        std::vector<uint8_t> buf(100000);
        size_t got = 0;
        while (got < 300000) {
            const ssize_t r = recv(fd.get(), buf.data(), buf.size(), 0);
            if (r <= 0)
                break;
            got += static_cast<size_t>(r);
        }
        EXPECT_GE(got, 300000u) << strerror(errno);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        // connect(AF_UNSPEC) aborts (AbortConn), waking our blocked writer.
        sockaddr unspec{};
        unspec.sa_family = AF_UNSPEC;
        EXPECT_EQ(connect(fd.get(), &unspec, sizeof(unspec)), 0) << strerror(errno);
        writer.join();
        EXPECT_NE(err, "") << "the writer was not stopped by the abort";
    }
    EXPECT_TRUE(eventually([] { return num(read_kv("server_stats"), "active") == 0; }, 30))
        << dump(read_kv("server_stats"));
    const auto after = read_kv("server_stats");
    EXPECT_EQ(num(after, "connections"), num(before, "connections") + 1);
    EXPECT_EQ(num(after, "resets"), num(before, "resets") + 1) << dump(after);
    EXPECT_EQ(num(after, "errors"), 0u) << dump(after);
}

// Every receive/send mode of the server ran, none failed, and each byte the
// clients sent came back.
TEST(KernelConsumer, KernelServerUsedEveryMethod)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    const auto s = read_kv("server_stats");
    std::cout << "[ INFO     ] server_stats:\n" << dump(s);
    EXPECT_EQ(num(s, "errors"), 0u) << s.at("first_error");
    EXPECT_EQ(num(s, "active"), 0u);
    for (int i = 0;; i++) {
        const auto it = s.find("mode" + std::to_string(i));
        if (it == s.end()) {
            EXPECT_GE(i, 9) << "server_stats lists fewer modes than sdp_kecho has";
            break;
        }
        std::istringstream f(it->second);
        std::string name, sends, max;
        f >> name >> sends >> max;
        EXPECT_NE(sends, "sends=0") << "mode " << name << " never ran";
    }
}

// The kernel client against a userspace echo server: every byte verified,
// clean EOF after its half-close.  Its blocking sends of 3 and 4 MiB from
// kernel memory (kvec, bvec) are larger than one registration and offer
// them together (held offers); the server's sends are 256 KiB at most,
// within one, so every held offer is the client's.  The client poisons its
// buffer as each send returns: a held offer read after its send returned
// would fail the byte check.  Whether a held offer is joined by the next
// depends on timing here (next test).
TEST(KernelConsumer, KernelClientSelfTestPasses)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    ASSERT_EQ(sdp_sysctl("zcopy_pipeline"), 1) << "the tier runs with the default";
    UserEchoServer server(kUserPort);
    ASSERT_GE(server.listener.get(), 0);
    const auto before = counters();
    const std::string target = std::string(kAddr) + ":" + std::to_string(kUserPort);
    ASSERT_EQ(write_param("client", target), 0);
    // One run at a time.
    EXPECT_EQ(write_param("client", target), EBUSY);
    const auto r = wait_client_result(240);
    std::cout << "[ INFO     ] result:\n" << dump(r);
    EXPECT_EQ(r.at("state"), "passed") << r.at("first_error");
    EXPECT_EQ(num(r, "errors"), 0u);
    EXPECT_EQ(num(r, "bad_bytes"), 0u);
    EXPECT_GT(num(r, "bytes_total"), 20 * kMiB);
    EXPECT_EQ(num(r, "bytes_verified"), num(r, "bytes_total"));
    EXPECT_EQ(num(r, "bytes_sent"), num(r, "bytes_total"));
    EXPECT_EQ(num(r, "messages_verified"), num(r, "messages"));
    EXPECT_EQ(r.at("first_error"), "");
    if (server.thread.joinable())
        server.thread.join();
    EXPECT_EQ(server.error, "");
    EXPECT_TRUE(server.clean_eof);
    EXPECT_EQ(server.bytes.load(), num(r, "bytes_total"));
    EXPECT_GT(counter_delta(before, "zcopy_held_offers"), 0u);
}

// The same run against an echo server without zero copy: its echoes go by
// bcopy and it advertises no SinkAvail, so each of the client's sends
// larger than one registration offers them all, and the second joins the
// first in flight (zcopy_held_joined).  Against the zero-copy server above
// a join depends on timing: the server's own offer of an echo, pending
// while the client's next offer arrives and no reader waits, is the
// send/send deadlock, which its SendSM ends (the rest goes by bcopy).
TEST(KernelConsumer, KernelClientHeldOffersJoin)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    ASSERT_EQ(sdp_sysctl("zcopy_pipeline"), 1) << "the tier runs with the default";
    UserEchoServer server(kUserPort + 3, -1, true);
    ASSERT_GE(server.listener.get(), 0);
    const auto before = counters();
    ASSERT_EQ(write_param("client", std::string(kAddr) + ":" + std::to_string(kUserPort + 3)), 0);
    const auto r = wait_client_result(240);
    std::cout << "[ INFO     ] result:\n" << dump(r);
    EXPECT_EQ(r.at("state"), "passed") << r.at("first_error");
    EXPECT_EQ(num(r, "bytes_verified"), num(r, "bytes_total"));
    if (server.thread.joinable())
        server.thread.join();
    EXPECT_EQ(server.error, "");
    EXPECT_TRUE(server.clean_eof);
    EXPECT_GT(counter_delta(before, "zcopy_held_offers"), 0u);
    EXPECT_GT(counter_delta(before, "zcopy_held_joined"), 0u);
}

// The self-test's checker is live: one flipped byte fails the run and is
// reported with its position.
TEST(KernelConsumer, KernelClientSelfTestCatchesACorruptByte)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    constexpr long long kCorrupt = 70000; // inside the 256 KiB message
    UserEchoServer server(kUserPort + 1, kCorrupt);
    ASSERT_GE(server.listener.get(), 0);
    ASSERT_EQ(write_param("client", std::string(kAddr) + ":" + std::to_string(kUserPort + 1)), 0);
    const auto r = wait_client_result(120);
    std::cout << "[ INFO     ] result:\n" << dump(r);
    EXPECT_EQ(r.at("state"), "failed");
    EXPECT_GE(num(r, "errors"), 1u);
    EXPECT_EQ(num(r, "bad_bytes"), 1u);
    // Messages 0..2 are 1, 1000 and 65536 bytes: offset 70000 is byte
    // 70000 - 66537 of message 3.
    EXPECT_NE(r.at("first_error").find("message 3 "), std::string::npos) << r.at("first_error");
    EXPECT_NE(r.at("first_error").find("byte 3463:"), std::string::npos) << r.at("first_error");
    EXPECT_LE(num(r, "bytes_verified"), static_cast<unsigned long long>(kCorrupt));
}

// rmmod in the middle of everything: a server connection open and the
// client self-test moving data.  Every thread is stopped, every socket shut
// down and released (the peers see EOF or a reset), then no kernel socket
// is left and sdp.ko unloads.
TEST(KernelConsumer, UnloadMidTransferReleasesEverySocket)
{
    ASSERT_TRUE(module_loaded("sdp_kecho"));
    Fd fd = sdp_connect_timed(kAddr, kKernelPort);
    ASSERT_GE(fd.get(), 0);
    ASSERT_EQ(send(fd.get(), "ping", 4, 0), 4);
    char buf[8];
    ASSERT_EQ(recv(fd.get(), buf, 4, MSG_WAITALL), 4) << strerror(errno);
    ASSERT_EQ(memcmp(buf, "ping", 4), 0);
    ASSERT_TRUE(eventually([] { return num(read_kv("server_stats"), "active") == 1; }, 10));

    UserEchoServer server(kUserPort + 2);
    ASSERT_GE(server.listener.get(), 0);
    ASSERT_EQ(write_param("rounds", "50"), 0); // far more than we wait for
    ASSERT_EQ(write_param("client", std::string(kAddr) + ":" + std::to_string(kUserPort + 2)), 0);
    ASSERT_TRUE(eventually([] { return num(read_kv("result"), "bytes_verified") > 4 * kMiB; }, 60))
        << dump(read_kv("result"));
    ASSERT_EQ(read_kv("result")["state"], "running");

    KmsgCapture kmsg;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(unload_module("sdp_kecho"), 0);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::cout << "[ INFO     ] rmmod took " << ms << " ms\n";
    EXPECT_FALSE(module_loaded("sdp_kecho"));
    EXPECT_TRUE(kmsg.contains("sdp_kecho: unloaded"));
    const ssize_t r = recv(fd.get(), buf, sizeof(buf), 0);
    EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET)) << r << " " << strerror(errno);
    fd.reset();
    if (server.thread.joinable())
        server.thread.join(); // its connection ended too
    EXPECT_TRUE(server.clean_eof || !server.error.empty());
    server.listener.reset();

    EXPECT_TRUE(eventually([] { return protocol_sockets_in_use("SDP") == 0; }, 60))
        << read_file("/proc/net/sdp").value_or("");
    EXPECT_TRUE(eventually([] { return proc_sockets().empty(); }, 60))
        << read_file("/proc/net/sdp").value_or("");
    // Which paths the bytes took (zero-copy counters exist once it does).
    std::istringstream stats(read_file("/proc/net/sdpstats").value_or(""));
    for (std::string line; std::getline(stats, line);)
        if (line.find("zc") != std::string::npos || line.find("bytes") != std::string::npos)
            std::cout << "[ INFO     ] sdpstats: " << line << "\n";
    const std::string params = sdp_module_params();
    EXPECT_TRUE(eventually([] { return unload_module("sdp") == 0; }, 30));
    // Leave sdp.ko loaded for whatever the tier runs next, as it was.
    ASSERT_EQ(load_module(required_env("SDP_MODULE"), params), 0) << params;
}

} // namespace
} // namespace sdp::vmtest
