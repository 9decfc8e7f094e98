// SPDX-License-Identifier: GPL-2.0
//
// Socket helpers for the VM tests over Soft-RoCE (rdma_test, zcopy_test):
// the test bed's addresses, descriptors closed on scope exit, connected
// SDP pairs and the counters (of the network namespace) in /proc/net/sdpstats.
#ifndef SDP_TESTS_VM_SOCKET_UTIL_H
#define SDP_TESTS_VM_SOCKET_UTIL_H

#include "uapi/sdp.h"
#include "vm_util.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sdp::vmtest {

constexpr const char* kAddrA = "10.77.0.1"; // veth0, rxe0
constexpr const char* kAddrB = "10.77.0.2"; // veth1, rxe1

inline int sdp_family()
{
    const auto text = read_file(SDP_FAMILY_SYSFS_PATH);
    return text ? std::atoi(text->c_str()) : AF_INET_SDP;
}

inline sockaddr_in make_addr(const char* ip, int port)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

// A descriptor closed on scope exit.
class Fd {
  public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Fd& operator=(Fd&& other) noexcept
    {
        if (this != &other) {
            reset();
            fd_ = other.fd_;
            other.fd_ = -1;
        }
        return *this;
    }
    int get() const { return fd_; }
    void reset()
    {
        if (fd_ >= 0)
            close(fd_);
        fd_ = -1;
    }

  private:
    int fd_;
};

// An SDP socket that stays on SDP (SDP_POLICY_SDP): these helpers serve the
// tests of SDP itself, which must fail, not pass over TCP, when SDP cannot
// carry the connection, whatever net.sdp.fallback says.
inline Fd sdp_only_socket()
{
    Fd fd(socket(sdp_family(), SOCK_STREAM, 0));
    EXPECT_GE(fd.get(), 0) << strerror(errno);
    const int policy = SDP_POLICY_SDP;
    EXPECT_EQ(setsockopt(fd.get(), SOL_SDP, SDP_TRANSPORT_POLICY, &policy, sizeof(policy)), 0)
        << strerror(errno);
    return fd;
}

inline Fd sdp_listener(const char* ip, int port)
{
    Fd fd = sdp_only_socket();
    const sockaddr_in a = make_addr(ip, port);
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    EXPECT_EQ(listen(fd.get(), 8), 0) << strerror(errno);
    return fd;
}

inline Fd sdp_connect(const char* ip, int port)
{
    Fd fd = sdp_only_socket();
    const sockaddr_in a = make_addr(ip, port);
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
        ADD_FAILURE() << "connect " << ip << ":" << port << ": " << strerror(errno);
        return Fd();
    }
    return fd;
}

struct Pair {
    Fd listener;
    Fd client;
    Fd server;
};

inline Pair connected_pair(const char* ip, int port)
{
    Pair p;
    p.listener = sdp_listener(ip, port);
    p.client = sdp_connect(ip, port);
    p.server = Fd(accept(p.listener.get(), nullptr, nullptr));
    EXPECT_GE(p.server.get(), 0) << strerror(errno);
    return p;
}

// The same over TCP, for the tests that run a scenario over TCP first (the
// oracle).
inline Pair tcp_pair(const char* ip, int port)
{
    Pair p;
    const sockaddr_in a = make_addr(ip, port);
    p.listener = Fd(socket(AF_INET, SOCK_STREAM, 0));
    EXPECT_EQ(bind(p.listener.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    EXPECT_EQ(listen(p.listener.get(), 1), 0) << strerror(errno);
    p.client = Fd(socket(AF_INET, SOCK_STREAM, 0));
    EXPECT_EQ(connect(p.client.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    p.server = Fd(accept(p.listener.get(), nullptr, nullptr));
    EXPECT_GE(p.server.get(), 0) << strerror(errno);
    return p;
}

inline std::map<std::string, unsigned long long> counters()
{
    std::map<std::string, unsigned long long> out;
    std::istringstream in(read_file("/proc/net/sdpstats").value_or(""));
    std::string name;
    unsigned long long value = 0;
    while (in >> name >> value)
        out[name] = value;
    return out;
}

inline unsigned long long counter_delta(const std::map<std::string, unsigned long long>& before,
                                        const std::string& name)
{
    const auto now = counters();
    const auto b = before.find(name);
    const auto n = now.find(name);
    EXPECT_NE(n, now.end()) << name << " missing from /proc/net/sdpstats";
    if (n == now.end())
        return 0;
    return n->second - (b == before.end() ? 0 : b->second);
}

// SDP_VM_WAIT_SCALE (an integer, default 1) multiplies the bounded waits of
// eventually(): they detect what never happens (a socket never freed, a
// reset never seen), they do not measure speed, and the debug kernel of
// `make check-debug` (KASAN and lockdep under TCG) is several times slower.
inline int wait_scale()
{
    const char* v = getenv("SDP_VM_WAIT_SCALE");
    const int n = v != nullptr ? atoi(v) : 1;
    return n >= 1 ? n : 1;
}

// Poll until pred() holds or the deadline passes (seconds * wait_scale()).
template <typename Pred> bool eventually(Pred pred, int seconds = 20)
{
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds) * wait_scale();
    while (std::chrono::steady_clock::now() < end) {
        if (pred())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
}

inline void read_exactly(int fd, size_t n)
{
    std::vector<char> buf(65536);
    size_t got = 0;
    while (got < n) {
        const ssize_t r = recv(fd, buf.data(), std::min(buf.size(), n - got), 0);
        ASSERT_GT(r, 0) << "after " << got << " of " << n << ": " << strerror(errno);
        got += static_cast<size_t>(r);
    }
}

// The lines of /proc/net/sdp.
struct ProcLine {
    std::string local, remote, state;
    unsigned long long txq = 0, rxq = 0, uid = 0, inode = 0;
};

inline std::vector<ProcLine> proc_sockets()
{
    std::vector<ProcLine> out;
    std::istringstream in(read_file("/proc/net/sdp").value_or(""));
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string sl;
        ProcLine p;
        if (ls >> sl >> p.local >> p.remote >> p.state >> p.txq >> p.rxq >> p.uid >> p.inode)
            out.push_back(p);
    }
    return out;
}

// A net.sdp sysctl set for one test, its value restored after.
class SysctlFor {
  public:
    SysctlFor(const std::string& name, const std::string& value)
        : path_("/proc/sys/net/sdp/" + name), saved_(read_file(path_).value_or(""))
    {
        EXPECT_TRUE(write_file(path_, value)) << path_;
    }
    ~SysctlFor()
    {
        if (!saved_.empty())
            write_file(path_, saved_);
    }
    SysctlFor(const SysctlFor&) = delete;
    SysctlFor& operator=(const SysctlFor&) = delete;

  private:
    std::string path_;
    std::string saved_;
};

} // namespace sdp::vmtest

#endif // SDP_TESTS_VM_SOCKET_UTIL_H
