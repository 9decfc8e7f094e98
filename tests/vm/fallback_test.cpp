// SPDX-License-Identifier: GPL-2.0
//
// Fallback to TCP on the same socket (Documentation/fallback.md): an SDP
// socket whose policy allows it goes on as a TCP connection when SDP cannot
// carry the connection, and from then on behaves as a TCP socket.  TCP is
// the oracle: where a plain TCP socket can do the same thing, both do it
// and their observable results are compared.
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with
// sdp.ko loaded (tests/vm/tier-socket.sh).
#include "socket_util.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <gtest/gtest.h>
#include <iostream>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sstream>
#include <string>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sdp::vmtest {
namespace {

constexpr const char* kAddr6A = "fd77::1";

sockaddr_in6 make_addr6(const char* ip, int port)
{
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return a;
}

int int_opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);
    if (getsockopt(fd, level, name, &v, &len) != 0)
        return -errno - 1000;
    return v;
}

// A plain TCP listener (the server without SDP).
Fd tcp_listener(const sockaddr* a, socklen_t len)
{
    Fd fd(socket(a->sa_family, SOCK_STREAM, 0));
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    EXPECT_EQ(bind(fd.get(), a, len), 0) << strerror(errno);
    EXPECT_EQ(listen(fd.get(), 8), 0) << strerror(errno);
    return fd;
}

Fd tcp_listener(const char* ip, int port)
{
    const sockaddr_in a = make_addr(ip, port);
    return tcp_listener(reinterpret_cast<const sockaddr*>(&a), sizeof(a));
}

// accept(), bounded: a connection that went elsewhere fails the test.
int accept_within(int listener)
{
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 20000 * wait_scale()) != 1)
        return -1;
    return accept(listener, nullptr, nullptr);
}

// An SDP socket with a transport policy.  SO_SNDTIMEO bounds a blocking
// connect(): a fallback that never comes fails the test, not the tier.
Fd sdp_socket(int policy, int flags = 0)
{
    Fd fd(socket(sdp_family(), SOCK_STREAM | flags, 0));
    EXPECT_GE(fd.get(), 0) << strerror(errno);
    EXPECT_EQ(setsockopt(fd.get(), SOL_SDP, SDP_TRANSPORT_POLICY, &policy, sizeof(policy)), 0)
        << strerror(errno);
    const timeval bound{30L * wait_scale(), 0};
    EXPECT_EQ(setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)), 0);
    return fd;
}

int connect_to(int fd, const char* ip, int port)
{
    const sockaddr_in a = make_addr(ip, port);
    return connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0 ? 0 : errno;
}

std::vector<char> pattern(size_t n, unsigned seed)
{
    std::mt19937 rng(seed);
    std::vector<char> v(n);
    for (auto& c : v)
        c = static_cast<char>(rng());
    return v;
}

void send_all(int fd, const std::vector<char>& data)
{
    size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        ASSERT_GT(n, 0) << strerror(errno);
        off += static_cast<size_t>(n);
    }
}

std::vector<char> recv_all(int fd, size_t n)
{
    std::vector<char> out(n);
    size_t got = 0;
    while (got < n) {
        const ssize_t r = recv(fd, out.data() + got, n - got, 0);
        if (r <= 0) {
            ADD_FAILURE() << "recv after " << got << " of " << n << ": "
                          << (r == 0 ? "EOF" : strerror(errno));
            out.resize(got);
            return out;
        }
        got += static_cast<size_t>(r);
    }
    return out;
}

// Both directions carry verified bytes, then each side's shutdown reaches
// the other as EOF: what a TCP connection does.
void expect_stream_works(int client, int server)
{
    const auto up = pattern(1 << 20, 1);
    const auto down = pattern(300000, 2);
    std::thread writer([&] { send_all(client, up); });
    EXPECT_EQ(recv_all(server, up.size()), up);
    writer.join();
    send_all(server, down);
    EXPECT_EQ(recv_all(client, down.size()), down);
    ASSERT_EQ(shutdown(client, SHUT_WR), 0) << strerror(errno);
    char c = 0;
    EXPECT_EQ(recv(server, &c, 1, 0), 0);
    ASSERT_EQ(shutdown(server, SHUT_WR), 0) << strerror(errno);
    EXPECT_EQ(recv(client, &c, 1, 0), 0);
}

std::string name_of(const sockaddr_storage& a)
{
    char ip[INET6_ADDRSTRLEN] = "";
    int port = 0;
    if (a.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        port = ntohs(in6->sin6_port);
    }
    return std::to_string(a.ss_family) + "/" + ip + ":" + std::to_string(port);
}

std::string sock_name(int fd, bool peer)
{
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                        : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return rc == 0 ? name_of(a) : std::string("error ") + strerror(errno);
}

// The columns of fd's line in /proc/net/sdp (found by its inode), or none.
std::vector<std::string> proc_columns(int fd)
{
    struct stat st {};
    if (fstat(fd, &st) != 0)
        return {};
    std::istringstream in(read_file("/proc/net/sdp").value_or(""));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::vector<std::string> cols;
        for (std::string w; words >> w;)
            cols.push_back(w);
        // sl local remote st tx_queue rx_queue uid inode, 6 SDP columns,
        // transport.
        if (cols.size() == 15 && cols[7] == std::to_string(st.st_ino))
            return cols;
    }
    return {};
}

TEST(Fallback, NoSdpListenerTheTcpServerGetsTheConnection)
{
    const auto before = counters();
    Fd srv = tcp_listener(kAddrA, 7601);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7601), 0) << strerror(errno);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_REJECTED);
    EXPECT_EQ(counter_delta(before, "conn_fallback_rejected"), 1U);
    // The names are the TCP connection's, seen the same from both ends.
    EXPECT_EQ(sock_name(c.get(), true), sock_name(s.get(), false));
    EXPECT_EQ(sock_name(c.get(), false), sock_name(s.get(), true));
    // /proc/net/sdp lists it with the TCP connection's endpoints and state
    // and the reason.
    const std::vector<std::string> cols = proc_columns(c.get());
    ASSERT_EQ(cols.size(), 15U) << proc_listing();
    EXPECT_EQ(cols[2], "10.77.0.1:7601") << proc_listing();
    EXPECT_EQ("2/" + cols[1], sock_name(c.get(), false)) << proc_listing();
    EXPECT_EQ(cols[3], "ESTABLISHED");
    EXPECT_EQ(cols[14], "tcp:rejected");
    expect_stream_works(c.get(), s.get());
}

TEST(Fallback, NonBlockingConnectBecomesWritableAndReadsAsTcp)
{
    Fd srv = tcp_listener(kAddrA, 7602);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK, SOCK_NONBLOCK);
    // Over loopback TCP's own non-blocking connect may complete at once.
    const int rc = connect_to(c.get(), kAddrA, 7602);
    ASSERT_TRUE(rc == EINPROGRESS || rc == 0) << strerror(rc);
    pollfd p{c.get(), POLLOUT, 0};
    ASSERT_EQ(poll(&p, 1, 20000 * wait_scale()), 1);
    EXPECT_EQ(p.revents, POLLOUT);
    EXPECT_EQ(int_opt(c.get(), SOL_SOCKET, SO_ERROR), 0);
    // As TCP: the connect() after an EINPROGRESS that completed returns 0
    // once, and EISCONN from then on.
    if (rc == EINPROGRESS)
        EXPECT_EQ(connect_to(c.get(), kAddrA, 7602), 0);
    EXPECT_EQ(connect_to(c.get(), kAddrA, 7602), EISCONN);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);

    // A level-triggered reader blocked in epoll_wait() wakes for TCP data.
    Fd ep(epoll_create1(0));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(epoll_ctl(ep.get(), EPOLL_CTL_ADD, c.get(), &ev), 0);
    std::atomic<int> woke{-1};
    std::atomic<unsigned> events{0};
    std::thread reader([&] {
        epoll_event out{};
        woke = epoll_wait(ep.get(), &out, 1, 10000 * wait_scale());
        events = out.events;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(send(s.get(), "x", 1, 0), 1);
    reader.join();
    EXPECT_EQ(woke.load(), 1);
    EXPECT_TRUE(events.load() & EPOLLIN) << std::hex << events.load();
    char b = 0;
    EXPECT_EQ(recv(c.get(), &b, 1, 0), 1);
    EXPECT_EQ(b, 'x');
    // Non-blocking as the SDP socket is: an empty TCP queue is EAGAIN.
    EXPECT_EQ(recv(c.get(), &b, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
}

// What a non-blocking connect shows where nothing listens, TCP or SDP.
struct Refusal {
    int connect_errno = 0;
    short revents = 0;
    int so_error = 0;
    short revents_after = 0; // once SO_ERROR has taken the error
    int connect_again = 0;   // errno of a second connect()
};

Refusal refused(int fd, int port)
{
    Refusal r;
    r.connect_errno = connect_to(fd, kAddrA, port);
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (poll(&p, 1, 10000 * wait_scale()) == 1)
        r.revents = p.revents;
    r.so_error = int_opt(fd, SOL_SOCKET, SO_ERROR);
    p.revents = 0;
    if (poll(&p, 1, 0) == 1)
        r.revents_after = p.revents;
    r.connect_again = connect_to(fd, kAddrA, port);
    return r;
}

TEST(Fallback, NothingListensAnywhereGivesTcpsRefusal)
{
    Fd blocking = sdp_socket(SDP_POLICY_FALLBACK);
    EXPECT_EQ(connect_to(blocking.get(), kAddrA, 7603), ECONNREFUSED);
    EXPECT_EQ(int_opt(blocking.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_REJECTED);

    Fd tcp(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    Fd c = sdp_socket(SDP_POLICY_FALLBACK, SOCK_NONBLOCK);
    const Refusal want = refused(tcp.get(), 7603);
    const Refusal got = refused(c.get(), 7603);
    EXPECT_EQ(got.connect_errno, want.connect_errno);
    EXPECT_EQ(got.revents, want.revents) << std::hex << got.revents << " vs " << want.revents;
    EXPECT_EQ(got.so_error, want.so_error) << strerror(got.so_error);
    EXPECT_EQ(want.so_error, ECONNREFUSED);
    EXPECT_EQ(got.revents_after, want.revents_after)
        << std::hex << got.revents_after << " vs " << want.revents_after;
    EXPECT_EQ(got.connect_again, want.connect_again)
        << strerror(got.connect_again) << " vs " << strerror(want.connect_again);
}

TEST(Fallback, PolicyTcpConnectsOverTcpAtOnce)
{
    const auto before = counters();
    Fd srv = tcp_listener(kAddrA, 7604);
    Fd c = sdp_socket(SDP_POLICY_TCP);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7604), 0) << strerror(errno);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_POLICY);
    EXPECT_EQ(counter_delta(before, "conn_fallback_policy"), 1U);
    EXPECT_EQ(counter_delta(before, "conn_err_refused"), 0U); // no SDP attempt
    expect_stream_works(c.get(), s.get());
}

TEST(Fallback, SdpOnlyKeepsItsErrorAndThePolicyIsChosenBeforeConnect)
{
    Fd srv = tcp_listener(kAddrA, 7605);
    Fd c = sdp_socket(SDP_POLICY_SDP);
    EXPECT_EQ(connect_to(c.get(), kAddrA, 7605), ECONNREFUSED);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_NONE);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_NONE);

    int bad = 3;
    EXPECT_EQ(setsockopt(c.get(), SOL_SDP, SDP_TRANSPORT_POLICY, &bad, sizeof(bad)), -1);
    EXPECT_EQ(errno, EINVAL);
    Fd d = sdp_socket(SDP_POLICY_TCP);
    ASSERT_EQ(connect_to(d.get(), kAddrA, 7605), 0);
    const int sdp_only = SDP_POLICY_SDP;
    EXPECT_EQ(setsockopt(d.get(), SOL_SDP, SDP_TRANSPORT_POLICY, &sdp_only, sizeof(sdp_only)), -1);
    EXPECT_EQ(errno, EISCONN);
    EXPECT_EQ(int_opt(d.get(), SOL_SDP, SDP_TRANSPORT_POLICY), SDP_POLICY_TCP);
}

TEST(Fallback, AnSdpListenerKeepsTheConnectionOnSdp)
{
    const auto before = counters();
    Fd l = sdp_listener(kAddrA, 7606);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7606), 0) << strerror(errno);
    Fd s(accept_within(l.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_SDP);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_NONE);
    for (const char* n :
         {"conn_fallback_rejected", "conn_fallback_timeout", "conn_fallback_no_route"})
        EXPECT_EQ(counter_delta(before, n), 0U) << n;
    expect_stream_works(c.get(), s.get());
}

TEST(Fallback, OptionsSetBeforeConnectAreTheTcpSockets)
{
    Fd srv = tcp_listener(kAddrA, 7607);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    const int one = 1, idle = 77;
    const timeval rcvtimeo{0, 200000};
    ASSERT_EQ(setsockopt(c.get(), SOL_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    ASSERT_EQ(setsockopt(c.get(), SOL_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), 0);
    ASSERT_EQ(setsockopt(c.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0);
    ASSERT_EQ(setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo)), 0);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7607), 0) << strerror(errno);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0);
    ASSERT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    // SOL_TCP answers come from the TCP socket now.
    EXPECT_EQ(int_opt(c.get(), SOL_TCP, TCP_NODELAY), 1);
    EXPECT_EQ(int_opt(c.get(), SOL_TCP, TCP_KEEPIDLE), 77);
    tcp_info info{};
    socklen_t len = sizeof(info);
    ASSERT_EQ(getsockopt(c.get(), SOL_TCP, TCP_INFO, &info, &len), 0) << strerror(errno);
    EXPECT_EQ(info.tcpi_state, TCP_ESTABLISHED);
    // SO_RCVTIMEO holds for the TCP receive: EAGAIN, not a hang.
    char b = 0;
    EXPECT_EQ(recv(c.get(), &b, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    // And one changed after the fallback too.
    const timeval shorter{0, 50000};
    ASSERT_EQ(setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &shorter, sizeof(shorter)), 0);
    EXPECT_EQ(recv(c.get(), &b, 1, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    // FIONREAD counts TCP's queue.
    ASSERT_EQ(send(s.get(), "abc", 3, 0), 3);
    ASSERT_TRUE(eventually([&] {
        int n = 0;
        return ioctl(c.get(), FIONREAD, &n) == 0 && n == 3;
    }));
}

TEST(Fallback, Ipv6ServerWithoutSdp)
{
    const sockaddr_in6 a = make_addr6(kAddr6A, 7608);
    Fd srv = tcp_listener(reinterpret_cast<const sockaddr*>(&a), sizeof(a));
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(connect(c.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_REJECTED);
    EXPECT_EQ(sock_name(c.get(), true), sock_name(s.get(), false));
    expect_stream_works(c.get(), s.get());
}

// A host that drops RoCE frames answers nothing: the CM would retry for
// tens of seconds; net.sdp.fallback_ms bounds the wait.  Here every RoCEv2
// frame (UDP 4791) that crosses lo is dropped for the test; the clients
// bind to the other address (kAddrB), since a connection between one
// address and itself never leaves Soft-RoCE (its own loopback).
class RoceDropped : public ::testing::Test {
  protected:
    static Fd client(int flags = 0)
    {
        Fd c = sdp_socket(SDP_POLICY_FALLBACK, flags);
        const sockaddr_in b = make_addr(kAddrB, 0);
        EXPECT_EQ(bind(c.get(), reinterpret_cast<const sockaddr*>(&b), sizeof(b)), 0)
            << strerror(errno);
        return c;
    }

    void SetUp() override
    {
        // On ingress: a frame dropped on egress is a send error that
        // Soft-RoCE (6.12) answers by putting the sending QP, the CM's
        // too, in the error state (Documentation/reliability.md).
        ASSERT_EQ(system("tc qdisc add dev lo handle ffff: ingress && "
                         "tc filter add dev lo parent ffff: protocol ip prio 1 u32 "
                         "match ip protocol 17 0xff match ip dport 4791 0xffff action drop"),
                  0);
    }
    void TearDown() override { EXPECT_EQ(system("tc qdisc del dev lo ingress"), 0); }
};

TEST_F(RoceDropped, TheConnectGoesOverTcpAfterTheBound)
{
    const auto before = counters();
    const long bound_ms = sdp_sysctl("fallback_ms");
    ASSERT_GT(bound_ms, 0);
    Fd l = sdp_listener(kAddrA, 7609); // unreachable: its REQs are lost
    Fd srv = tcp_listener(kAddrA, 7609);
    Fd c = client();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7609), 0) << strerror(errno);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_TIMEOUT);
    EXPECT_EQ(counter_delta(before, "conn_fallback_timeout"), 1U);
    // Not the CM's retry schedule (tens of seconds): the bound, plus TCP's
    // handshake and room for TCG.
    std::printf("fallback_test: connect over TCP %lld ms after connect() (fallback_ms %ld)\n",
                static_cast<long long>(ms), bound_ms);
    EXPECT_GE(ms, bound_ms);
    EXPECT_LT(ms, bound_ms + 5000L * wait_scale());
    expect_stream_works(c.get(), s.get());
}

// The fallback comes net.sdp.fallback_ms after connect(): an edge-triggered
// epoll waiter is certainly blocked at that moment, on the socket's own
// wait queue, and must see TCP's connect.
TEST_F(RoceDropped, AnEpollWaiterBlockedAtTheFallbackSeesTcpsConnect)
{
    Fd srv = tcp_listener(kAddrA, 7610);
    Fd c = client(SOCK_NONBLOCK);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7610), EINPROGRESS);
    Fd ep(epoll_create1(0));
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLET;
    ASSERT_EQ(epoll_ctl(ep.get(), EPOLL_CTL_ADD, c.get(), &ev), 0);
    epoll_event out{};
    ASSERT_EQ(epoll_wait(ep.get(), &out, 1, 20000 * wait_scale()), 1);
    EXPECT_EQ(out.events, static_cast<unsigned>(EPOLLOUT));
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_TIMEOUT);
    EXPECT_EQ(int_opt(c.get(), SOL_SOCKET, SO_ERROR), 0);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
}

// A send() blocked waiting for the connection when it falls back is sent
// by TCP, as a send() waiting for TCP's handshake would be.
TEST_F(RoceDropped, ASendWaitingForTheConnectionIsSentByTcp)
{
    Fd srv = tcp_listener(kAddrA, 7611);
    Fd c = client();
    std::atomic<int> connected{-1};
    std::thread connector([&] { connected = connect_to(c.get(), kAddrA, 7611); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto data = pattern(100000, 3);
    send_all(c.get(), data); // waits for the connection
    connector.join();
    EXPECT_EQ(connected.load(), 0) << strerror(connected.load());
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_TIMEOUT);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(recv_all(s.get(), data.size()), data);
}

// An SDP listener with SDP_POLICY_FALLBACK listens over TCP too.
Fd both_listener(const sockaddr* a, socklen_t len)
{
    Fd fd = sdp_socket(SDP_POLICY_FALLBACK);
    EXPECT_EQ(bind(fd.get(), a, len), 0) << strerror(errno);
    EXPECT_EQ(listen(fd.get(), 8), 0) << strerror(errno);
    return fd;
}

Fd both_listener(const char* ip, int port)
{
    const sockaddr_in a = make_addr(ip, port);
    return both_listener(reinterpret_cast<const sockaddr*>(&a), sizeof(a));
}

Fd tcp_client(const char* ip, int port)
{
    Fd fd(socket(AF_INET, SOCK_STREAM, 0));
    EXPECT_EQ(connect_to(fd.get(), ip, port), 0) << strerror(errno);
    return fd;
}

// The peer's answer came in time but still waits for the socket's CM work
// when the fallback timer expires, as on a loaded machine (the test hook
// fallback_race makes the timer expire at that moment).  The connection is
// the SDP one the server accepted: going over TCP then would leave the
// server an SDP connection that the abandoned attempt resets, a connection
// TCP would never have shown it.
TEST(Fallback, AnAnswerWaitingWhenTheTimerExpiresKeepsTheConnectionOnSdp)
{
    const std::string race = "/sys/module/sdp/parameters/fallback_race";
    SysctlFor bound("fallback_ms", "60000"); // expires by the hook only
    KmsgCapture kmsg;
    const auto before = counters();
    Fd l = both_listener(kAddrA, 7612);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_TRUE(write_file(race, "1"));
    const int rc = connect_to(c.get(), kAddrA, 7612);
    EXPECT_TRUE(write_file(race, "0"));
    ASSERT_EQ(rc, 0) << strerror(rc);
    EXPECT_TRUE(kmsg.contains("fallback timer expired with the CM's answer queued"));
    Fd s(accept_within(l.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_NONE);
    EXPECT_EQ(counter_delta(before, "conn_fallback_timeout"), 0U);
    // Else the stream below would wait for a peer that is not there.
    ASSERT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_SDP);
    ASSERT_EQ(int_opt(s.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_SDP);
    expect_stream_works(c.get(), s.get());
    // No second connection (an abandoned attempt's) waits to be accepted.
    pollfd p{l.get(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 300 * wait_scale()), 0);
}

TEST(Listener, TakesPlainTcpClientsAndSdpOnes)
{
    const auto before = counters();
    Fd l = both_listener(kAddrA, 7620);
    Fd tc = tcp_client(kAddrA, 7620);
    Fd ts(accept_within(l.get()));
    ASSERT_GE(ts.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_PEER_TCP);
    EXPECT_EQ(counter_delta(before, "conn_fallback_peer_tcp"), 1U);
    EXPECT_EQ(sock_name(ts.get(), true), sock_name(tc.get(), false));
    EXPECT_EQ(sock_name(ts.get(), false), sock_name(tc.get(), true));
    ASSERT_EQ(proc_columns(ts.get()).size(), 15U) << proc_listing();
    EXPECT_EQ(proc_columns(ts.get())[14], "tcp:peer_tcp") << proc_listing();
    ASSERT_EQ(proc_columns(l.get()).size(), 15U) << proc_listing();
    EXPECT_EQ(proc_columns(l.get())[3], "LISTEN");
    EXPECT_EQ(proc_columns(l.get())[14], "sdp+tcp") << proc_listing();
    expect_stream_works(tc.get(), ts.get());

    Fd sc = sdp_socket(SDP_POLICY_SDP);
    ASSERT_EQ(connect_to(sc.get(), kAddrA, 7620), 0) << strerror(errno);
    Fd ss(accept_within(l.get()));
    ASSERT_GE(ss.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(ss.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_SDP);
    ASSERT_EQ(proc_columns(ss.get()).size(), 15U) << proc_listing();
    EXPECT_EQ(proc_columns(ss.get())[14], "sdp");
    expect_stream_works(sc.get(), ss.get());
}

TEST(Listener, APortTakenOverTcpFailsTheListenAsTcpWould)
{
    Fd tcp = tcp_listener(kAddrA, 7621);
    Fd both = sdp_socket(SDP_POLICY_FALLBACK);
    const sockaddr_in a = make_addr(kAddrA, 7621);
    // bind() reserves the port in TCP's space too: it fails as TCP's.
    EXPECT_EQ(bind(both.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), -1);
    EXPECT_EQ(errno, EADDRINUSE);
    // SDP's own port space is separate: SDP only listens there.
    both.reset();
    Fd sdp_only = sdp_listener(kAddrA, 7621);
}

// A TCP-only listener: TCP clients, by policy; SDP ones are refused (no
// SDP listener), or go over TCP if they may.
TEST(Listener, TcpOnlyTakesTcpClients)
{
    for (const bool bound : {true, false}) {
        SCOPED_TRACE(bound ? "bound" : "unbound");
        Fd l = sdp_socket(SDP_POLICY_TCP);
        if (bound) {
            const sockaddr_in b = make_addr(kAddrA, 7622);
            ASSERT_EQ(bind(l.get(), reinterpret_cast<const sockaddr*>(&b), sizeof(b)), 0)
                << strerror(errno);
        }
        ASSERT_EQ(listen(l.get(), 8), 0) << strerror(errno);
        sockaddr_in name{};
        socklen_t len = sizeof(name);
        ASSERT_EQ(getsockname(l.get(), reinterpret_cast<sockaddr*>(&name), &len), 0);
        const int port = ntohs(name.sin_port);
        if (bound)
            EXPECT_EQ(port, 7622);
        ASSERT_NE(port, 0);
        ASSERT_EQ(proc_columns(l.get()).size(), 15U) << proc_listing();
        EXPECT_EQ(proc_columns(l.get())[14], "tcp") << proc_listing();

        Fd tc = tcp_client(kAddrA, port);
        Fd ts(accept_within(l.get()));
        ASSERT_GE(ts.get(), 0) << strerror(errno);
        EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
        EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_POLICY);
        EXPECT_EQ(sock_name(ts.get(), true), sock_name(tc.get(), false));
        expect_stream_works(tc.get(), ts.get());

        Fd only = sdp_socket(SDP_POLICY_SDP);
        EXPECT_EQ(connect_to(only.get(), kAddrA, port), ECONNREFUSED);
        Fd may = sdp_socket(SDP_POLICY_FALLBACK);
        ASSERT_EQ(connect_to(may.get(), kAddrA, port), 0) << strerror(errno);
        Fd ms(accept_within(l.get()));
        ASSERT_GE(ms.get(), 0) << strerror(errno);
        EXPECT_EQ(int_opt(may.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_REJECTED);
        expect_stream_works(may.get(), ms.get());
    }
}

// Each alone: an accept() and an epoll waiter both woken by one client
// race for it, and the loser's epoll_wait() rightly sees nothing (as with
// a TCP listener).
TEST(Listener, ABlockedAcceptWakesForATcpClient)
{
    Fd l = both_listener(kAddrA, 7623);
    // Bounded: an accept() never woken fails the test, not the tier.
    const timeval bound{30L * wait_scale(), 0};
    ASSERT_EQ(setsockopt(l.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound)), 0);
    std::atomic<int> accepted{-1};
    std::thread acceptor([&] { accepted = accept(l.get(), nullptr, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Fd tc = tcp_client(kAddrA, 7623);
    acceptor.join();
    ASSERT_GE(accepted.load(), 0) << "accept() did not return a connection";
    Fd ts(accepted.load());
    EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_PEER_TCP);
    expect_stream_works(tc.get(), ts.get());
}

TEST(Listener, AnEdgeTriggeredEpollWaiterWakesForATcpClient)
{
    Fd l = both_listener(kAddrA, 7627);
    Fd ep(epoll_create1(0));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ASSERT_EQ(epoll_ctl(ep.get(), EPOLL_CTL_ADD, l.get(), &ev), 0);
    std::atomic<int> woke{-1};
    std::thread waiter([&] {
        epoll_event out{};
        woke = epoll_wait(ep.get(), &out, 1, 20000 * wait_scale());
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Fd tc = tcp_client(kAddrA, 7627);
    waiter.join();
    EXPECT_EQ(woke.load(), 1);
    Fd ts(accept_within(l.get()));
    ASSERT_GE(ts.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(ts.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
}

TEST(Listener, ClosingItResetsTcpClientsNotAcceptedAsTcpDoes)
{
    std::vector<int> got;
    for (bool sdp : {false, true}) {
        Fd l = sdp ? both_listener(kAddrA, 7624) : tcp_listener(kAddrA, 7625);
        Fd tc = tcp_client(kAddrA, sdp ? 7624 : 7625);
        pollfd p{l.get(), POLLIN, 0};
        ASSERT_EQ(poll(&p, 1, 20000 * wait_scale()), 1);
        l.reset();
        char b = 0;
        got.push_back(recv(tc.get(), &b, 1, 0) < 0 ? errno : 0);
    }
    EXPECT_EQ(got[1], got[0]) << strerror(got[1]) << " vs " << strerror(got[0]);
    EXPECT_EQ(got[0], ECONNRESET);
}

TEST(Listener, Ipv6WildcardTakesIpv4TcpClients)
{
    const sockaddr_in6 any = make_addr6("::", 7626);
    Fd l = both_listener(reinterpret_cast<const sockaddr*>(&any), sizeof(any));
    Fd tc = tcp_client(kAddrA, 7626);
    Fd ts(accept_within(l.get()));
    ASSERT_GE(ts.get(), 0) << strerror(errno);
    EXPECT_EQ(sock_name(ts.get(), true).rfind("10/::ffff:10.77.0.1:", 0), 0U)
        << sock_name(ts.get(), true);
    expect_stream_works(tc.get(), ts.get());
}

// bind() of a socket that may go over TCP reserves the port in TCP's space
// too, and fails as TCP's bind would.
TEST(Bind, ReservesThePortInTcpsSpaceToo)
{
    const sockaddr_in a = make_addr(kAddrA, 7630);
    const auto* sa = reinterpret_cast<const sockaddr*>(&a);
    {
        Fd s = sdp_socket(SDP_POLICY_FALLBACK);
        ASSERT_EQ(bind(s.get(), sa, sizeof(a)), 0) << strerror(errno);
        Fd t(socket(AF_INET, SOCK_STREAM, 0));
        EXPECT_EQ(bind(t.get(), sa, sizeof(a)), -1);
        EXPECT_EQ(errno, EADDRINUSE);
    }
    {
        // TCP's port taken first: the same errno as a second TCP bind.
        Fd t(socket(AF_INET, SOCK_STREAM, 0));
        ASSERT_EQ(bind(t.get(), sa, sizeof(a)), 0) << strerror(errno);
        Fd s = sdp_socket(SDP_POLICY_FALLBACK);
        EXPECT_EQ(bind(s.get(), sa, sizeof(a)), -1);
        EXPECT_EQ(errno, EADDRINUSE);
        // SDP only has its own port space.
        Fd o = sdp_socket(SDP_POLICY_SDP);
        EXPECT_EQ(bind(o.get(), sa, sizeof(a)), 0) << strerror(errno);
    }
    {
        // An ephemeral port: the same in both spaces.
        const sockaddr_in any = make_addr(kAddrA, 0);
        Fd s = sdp_socket(SDP_POLICY_FALLBACK);
        ASSERT_EQ(bind(s.get(), reinterpret_cast<const sockaddr*>(&any), sizeof(any)), 0)
            << strerror(errno);
        sockaddr_in got{};
        socklen_t len = sizeof(got);
        ASSERT_EQ(getsockname(s.get(), reinterpret_cast<sockaddr*>(&got), &len), 0);
        ASSERT_NE(got.sin_port, 0);
        Fd t(socket(AF_INET, SOCK_STREAM, 0));
        EXPECT_EQ(bind(t.get(), reinterpret_cast<const sockaddr*>(&got), sizeof(got)), -1);
        EXPECT_EQ(errno, EADDRINUSE);
    }
}

// A local address on a netdev without RDMA: one end of a veth pair with no
// rxe device (veth, not dummy: the debug kernel has no dummy driver).
class NoRdmaAddress : public ::testing::Test {
  protected:
    static constexpr const char* kAddr = "10.78.0.1";
    void SetUp() override
    {
        ASSERT_EQ(std::system("ip link add sdptest0 type veth peer name sdptest1 && "
                              "ip addr add 10.78.0.1/24 dev sdptest0 && "
                              "ip link set sdptest1 up && ip link set sdptest0 up"),
                  0);
    }
    void TearDown() override { std::system("ip link del sdptest0"); }
};

// An address with no RDMA device behind it: SDP only cannot bind it; a
// socket that may go over TCP binds it and connects over TCP at once.
TEST_F(NoRdmaAddress, IsTcpsOnly)
{
    const sockaddr_in lo = make_addr(kAddr, 0);
    const auto* sa = reinterpret_cast<const sockaddr*>(&lo);
    Fd only = sdp_socket(SDP_POLICY_SDP);
    EXPECT_EQ(bind(only.get(), sa, sizeof(lo)), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);

    const auto before = counters();
    Fd srv = tcp_listener(kAddr, 7631);
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(bind(c.get(), sa, sizeof(lo)), 0) << strerror(errno);
    const std::string bound = sock_name(c.get(), false);
    EXPECT_NE(bound, "2/10.78.0.1:0");
    ASSERT_EQ(connect_to(c.get(), kAddr, 7631), 0) << strerror(errno);
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_NO_ROUTE);
    EXPECT_EQ(counter_delta(before, "conn_fallback_no_route"), 1U);
    EXPECT_EQ(sock_name(c.get(), false), bound) << "the bound port changed";
    EXPECT_EQ(sock_name(s.get(), true), bound);
    expect_stream_works(c.get(), s.get());

    // A listener there would take TCP clients only: refused, as SDP's.
    Fd l = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(bind(l.get(), sa, sizeof(lo)), 0) << strerror(errno);
    EXPECT_EQ(listen(l.get(), 8), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);
}

// ---- resources exhausted: a memory cgroup at its limit ------------------------
//
// SDP's rings are charged to the memory cgroup of the socket's owner, a
// listener's for its connections.  At the largest size from the start
// (net.sdp.buf_size 256 KiB and buf_size_initial 0, set for these tests)
// the receive ring takes 8 x 256 KiB, 2 MiB a socket, at setup (send
// buffers come with the first send).  A child process in a cgroup whose
// limit leaves it 256 KiB: no receive ring fits, even with what reclaim may
// find in the cgroup, while TCP's socket does.  With the fallback policy the
// connection goes over TCP instead of failing: RESOURCES on the connecting side, BUSY when the
// listener's side could not allocate.  The failed attempt's partial rings are freed by the CM's
// worker, which may run after TCP's connection is up; TCP charges its buffers with __GFP_NOFAIL (an
// OOM kill at the limit, as for any TCP program), so the limit is lifted once the fallback
// happened, before the bytes go, and the children make no charged
// allocation (a file, a pipe's page) while it holds.

constexpr long long kHeadroom = 256LL * 1024;
constexpr size_t kProbeBytes = size_t{16} * 1024;

class MemcgFallback : public ::testing::Test {
  protected:
    void SetUp() override
    {
        std::string why;
        const std::string root = cgroup2_root(&why);
        ASSERT_FALSE(root.empty()) << "no cgroup2 hierarchy: " << why;
        ASSERT_TRUE(write_file(root + "/cgroup.subtree_control", "+memory"));
        cg_ = root + "/sdp-fallback";
        rmdir(cg_.c_str()); // a leftover of an earlier run
        ASSERT_EQ(mkdir(cg_.c_str(), 0755), 0) << cg_ << ": " << strerror(errno);
        write_file(cg_ + "/memory.swap.max", "0"); // absent without swap accounting
        snprintf(current_, sizeof(current_), "%s/memory.current", cg_.c_str());
        snprintf(max_, sizeof(max_), "%s/memory.max", cg_.c_str());
        saved_initial_ = read_file(kInitial).value_or("");
        saved_size_ = read_file(kSize).value_or("");
        ASSERT_TRUE(write_file(kSize, "262144"));
        ASSERT_TRUE(write_file(kInitial, "0"));
    }

    void TearDown() override
    {
        if (!saved_initial_.empty())
            write_file(kInitial, saved_initial_);
        if (!saved_size_.empty())
            write_file(kSize, saved_size_);
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        EXPECT_EQ(keyed_value(cg_ + "/memory.events", "oom_kill"), 0) << "the OOM killer ran";
        rmdir(cg_.c_str());
    }

    // Runs body in a child process inside the cgroup; body's result is
    // the child's exit status, its report goes through report_fd, and a
    // byte it writes to ready_fd ends wait_ready().
    void spawn(const std::function<int(int report_fd, int ready_fd)>& body)
    {
        int report[2], go[2], ready[2];
        ASSERT_EQ(pipe(report), 0);
        ASSERT_EQ(pipe(go), 0);
        ASSERT_EQ(pipe(ready), 0);
        pid_ = fork();
        ASSERT_GE(pid_, 0) << strerror(errno);
        if (pid_ == 0) {
            close(report[0]);
            close(go[1]);
            close(ready[0]);
            char c = 0;
            if (read(go[0], &c, 1) != 1)
                _exit(90);
            _exit(body(report[1], ready[1]));
        }
        close(report[1]);
        close(go[0]);
        close(ready[1]);
        report_ = Fd(report[0]);
        ready_ = Fd(ready[0]);
        ASSERT_TRUE(write_file(cg_ + "/cgroup.procs", std::to_string(pid_)));
        ASSERT_EQ(write(go[1], "g", 1), 1);
        close(go[1]);
    }

    // In the child: memory.max, opened while there is room (a struct
    // file is charged to the cgroup; a write to it is not).
    int open_max() const { return open(max_, O_WRONLY); }

    // In the child: no limit, through open_max()'s descriptor.
    static bool lift_limit(int max_fd) { return write(max_fd, "max", 3) == 3; }

    // In the child: the limit becomes what the cgroup uses now plus
    // kHeadroom.  Reads and writes with no allocation of its own.
    bool leave_headroom(int out) const
    {
        char buf[32] = {};
        const int in = open(current_, O_RDONLY);
        const ssize_t n = in < 0 ? -1 : read(in, buf, sizeof(buf) - 1);
        if (in >= 0)
            close(in);
        const long long used = n > 0 ? std::atoll(buf) : -1;
        if (used < 0) {
            say(out, "reading memory.current: %s", strerror(errno));
            return false;
        }
        const int len = snprintf(buf, sizeof(buf), "%lld", used + kHeadroom);
        const int o = open(max_, O_WRONLY);
        const bool ok = o >= 0 && write(o, buf, static_cast<size_t>(len)) == len;
        if (o >= 0)
            close(o);
        if (!ok)
            say(out, "writing memory.max: %s", strerror(errno));
        return ok;
    }

    bool wait_ready()
    {
        pollfd p{ready_.get(), POLLIN, 0};
        char c = 0;
        return poll(&p, 1, 30000) == 1 && read(ready_.get(), &c, 1) == 1;
    }

    // The child's exit status (-1: killed after timeout_s) and report.
    int finish(int timeout_s, std::string* text)
    {
        int status = 0;
        for (int i = 0; i < timeout_s * 10; i++) {
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            usleep(100000);
        }
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
            status = -1;
        }
        char buf[512];
        ssize_t n = 0;
        while ((n = read(report_.get(), buf, sizeof(buf))) > 0)
            text->append(buf, static_cast<size_t>(n));
        return status < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    }

    static void say(int fd, const char* fmt, ...) __attribute__((format(printf, 2, 3)))
    {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n > 0)
            (void)(write(fd, buf, std::min(static_cast<size_t>(n), sizeof(buf) - 1)) < 0);
    }

    static bool send_bytes(int fd, const std::vector<char>& data)
    {
        size_t off = 0;
        while (off < data.size()) {
            const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
            if (n <= 0)
                return false;
            off += static_cast<size_t>(n);
        }
        return true;
    }

    static bool recv_bytes(int fd, const std::vector<char>& expect)
    {
        std::vector<char> got(expect.size());
        size_t off = 0;
        while (off < got.size()) {
            const ssize_t n = recv(fd, got.data() + off, got.size() - off, 0);
            if (n <= 0)
                return false;
            off += static_cast<size_t>(n);
        }
        return got == expect;
    }

    static constexpr const char* kInitial = "/proc/sys/net/sdp/buf_size_initial";
    static constexpr const char* kSize = "/proc/sys/net/sdp/buf_size";
    std::string saved_initial_;
    std::string saved_size_;
    std::string cg_;
    char current_[256] = {};
    char max_[256] = {};
    pid_t pid_ = -1;
    Fd report_;
    Fd ready_;
};

TEST_F(MemcgFallback, TheConnectingSideOutOfMemoryGoesOverTcp)
{
    const auto before = counters();
    const auto probe = pattern(kProbeBytes, 7);
    Fd srv = tcp_listener(kAddrA, 7640);
    spawn([&](int out, int /*ready*/) {
        const sockaddr_in a = make_addr(kAddrA, 7640);
        const int fd = socket(sdp_family(), SOCK_STREAM, 0);
        const int policy = SDP_POLICY_FALLBACK;
        const timeval bound{30, 0};
        const int max_fd = open_max();
        if (fd < 0 || max_fd < 0 ||
            setsockopt(fd, SOL_SDP, SDP_TRANSPORT_POLICY, &policy, sizeof(policy)) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)) != 0)
            return 2;
        if (!leave_headroom(out))
            return 3;
        if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
            say(out, "connect: %s", strerror(errno));
            return 4;
        }
        const int transport = int_opt(fd, SOL_SDP, SDP_TRANSPORT);
        const int reason = int_opt(fd, SOL_SDP, SDP_FALLBACK_REASON);
        // Lifted before anything that may charge (a pipe's page too).
        if (!lift_limit(max_fd))
            return 5;
        say(out, "transport %d reason %d", transport, reason);
        if (!send_bytes(fd, probe))
            return 5;
        return transport == SDP_TRANSPORT_TCP && reason == SDP_FB_RESOURCES ? 0 : 6;
    });
    Fd s(accept_within(srv.get()));
    ASSERT_GE(s.get(), 0) << strerror(errno);
    EXPECT_TRUE(recv_bytes(s.get(), probe)) << "the bytes over TCP";
    std::string report;
    EXPECT_EQ(finish(60, &report), 0) << report;
    EXPECT_EQ(counter_delta(before, "conn_fallback_resources"), 1U);
}

TEST_F(MemcgFallback, AListenerOutOfMemoryIsBusyAndTakesTheClientOverTcp)
{
    const auto before = counters();
    const auto probe = pattern(kProbeBytes, 8);
    spawn([&](int out, int ready) {
        // Made in the cgroup: its connections are charged there.
        const int l = socket(sdp_family(), SOCK_STREAM, 0);
        const int policy = SDP_POLICY_FALLBACK;
        const sockaddr_in a = make_addr(kAddrA, 7641);
        const int max_fd = open_max();
        if (l < 0 || max_fd < 0 ||
            setsockopt(l, SOL_SDP, SDP_TRANSPORT_POLICY, &policy, sizeof(policy)) != 0 ||
            bind(l, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 8) != 0) {
            say(out, "listener: %s", strerror(errno));
            return 2;
        }
        if (!leave_headroom(out))
            return 3;
        (void)(write(ready, "r", 1) < 0);
        pollfd p{l, POLLIN, 0};
        if (poll(&p, 1, 30000) != 1) {
            say(out, "nothing to accept in 30 s");
            return 4;
        }
        if (!lift_limit(max_fd))
            return 4;
        const int s = accept(l, nullptr, nullptr);
        if (s < 0) {
            say(out, "accept: %s", strerror(errno));
            return 5;
        }
        const int transport = int_opt(s, SOL_SDP, SDP_TRANSPORT);
        const int reason = int_opt(s, SOL_SDP, SDP_FALLBACK_REASON);
        say(out, "accepted: transport %d reason %d", transport, reason);
        const bool intact = recv_bytes(s, probe);
        return transport == SDP_TRANSPORT_TCP && reason == SDP_FB_PEER_TCP && intact ? 0 : 6;
    });
    ASSERT_TRUE(wait_ready()) << "the child did not listen";
    Fd c = sdp_socket(SDP_POLICY_FALLBACK);
    ASSERT_EQ(connect_to(c.get(), kAddrA, 7641), 0) << strerror(errno);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_TRANSPORT), SDP_TRANSPORT_TCP);
    EXPECT_EQ(int_opt(c.get(), SOL_SDP, SDP_FALLBACK_REASON), SDP_FB_BUSY);
    EXPECT_TRUE(send_bytes(c.get(), probe));
    std::string report;
    EXPECT_EQ(finish(60, &report), 0) << report;
    EXPECT_EQ(counter_delta(before, "conn_fallback_busy"), 1U);
}

TEST(Afterwards, NoSdpSocketIsLeft)
{
    // Every socket of the tests above is closed: their SDP side and their
    // TCP socket are gone (the TCP ones may linger in TIME_WAIT, which is
    // TCP's, not a socket anybody holds).
    EXPECT_TRUE(eventually([] { return protocol_sockets_in_use("SDP") == 0; }, 60))
        << read_file("/proc/net/sdp").value_or("");
}

} // namespace
} // namespace sdp::vmtest
