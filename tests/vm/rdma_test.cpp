// SPDX-License-Identifier: GPL-2.0
//
// sdp.ko over Soft-RoCE: what the conformance suite (TCP differential) does
// not cover because TCP has no equivalent: /proc/net/sdp and the counters,
// the cost of small writes in RDMA SENDs, RDMA device removal under live
// connections, and module unload with connections.
//
// Runs as root inside the test VM after scripts/vm/rxe-setup.sh, with sdp.ko
// loaded (tests/vm/tier-rdma.sh sets SDP_MODULE).
#include "socket_util.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <map>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sdp::vmtest {
namespace {

constexpr size_t kKiB = 1024;

unsigned long long inode_of(int fd)
{
    struct stat st {};
    fstat(fd, &st);
    return st.st_ino;
}

bool wait_no_sdp_sockets()
{
    return eventually([] { return protocol_sockets_in_use("SDP") == 0; }, 60);
}

TEST(ProcNetSdp, ListsListenerAndBothEndsWithQueues)
{
    Pair p = connected_pair(kAddrA, 7101);
    ASSERT_GE(p.server.get(), 0);
    const char msg[100] = {};
    ASSERT_EQ(send(p.client.get(), msg, sizeof(msg), 0), 100);
    // The bytes sit unread on the server side: rx_queue shows them.
    ASSERT_TRUE(eventually([&] {
        for (const auto& l : proc_sockets())
            if (l.inode == inode_of(p.server.get()) && l.rxq == 100)
                return true;
        return false;
    })) << read_file("/proc/net/sdp").value_or("");

    sockaddr_in client_addr{};
    socklen_t len = sizeof(client_addr);
    getsockname(p.client.get(), reinterpret_cast<sockaddr*>(&client_addr), &len);
    const std::string client_ep =
        std::string(kAddrA) + ":" + std::to_string(ntohs(client_addr.sin_port));
    bool saw_listener = false, saw_client = false, saw_server = false;
    for (const auto& l : proc_sockets()) {
        if (l.inode == inode_of(p.listener.get())) {
            saw_listener = true;
            EXPECT_EQ(l.local, std::string(kAddrA) + ":7101");
            EXPECT_EQ(l.state, "LISTEN");
        } else if (l.inode == inode_of(p.client.get())) {
            saw_client = true;
            EXPECT_EQ(l.local, client_ep);
            EXPECT_EQ(l.remote, std::string(kAddrA) + ":7101");
            EXPECT_EQ(l.state, "ESTABLISHED");
            EXPECT_EQ(l.uid, 0u);
        } else if (l.inode == inode_of(p.server.get())) {
            saw_server = true;
            EXPECT_EQ(l.local, std::string(kAddrA) + ":7101");
            EXPECT_EQ(l.remote, client_ep);
            EXPECT_EQ(l.state, "ESTABLISHED");
        }
    }
    EXPECT_TRUE(saw_listener && saw_client && saw_server)
        << read_file("/proc/net/sdp").value_or("");
    // No kernel pointers: every field is an address, a name or a number.
    EXPECT_EQ(read_file("/proc/net/sdp").value_or("").find("ffff"), std::string::npos);
}

// Zero copy off on `fd` (SDP_ZCOPY_THRESH 0): every byte goes by bcopy,
// through the ring buffers these tests watch.
bool bcopy_only(int fd)
{
    const int off = 0;
    return setsockopt(fd, SOL_SDP, SDP_ZCOPY_THRESH, &off, sizeof(off)) == 0;
}

TEST(ProcNetSdp, ShutdownStatesAreReported)
{
    Pair p = connected_pair(kAddrA, 7102);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_EQ(shutdown(p.client.get(), SHUT_WR), 0);
    char c = 0;
    ASSERT_EQ(recv(p.server.get(), &c, 1, 0), 0); // EOF
    std::string client_state, server_state;
    ASSERT_TRUE(eventually([&] {
        for (const auto& l : proc_sockets()) {
            if (l.inode == inode_of(p.client.get()))
                client_state = l.state;
            if (l.inode == inode_of(p.server.get()))
                server_state = l.state;
        }
        return client_state == "FIN_WAIT2" && server_state == "CLOSE_WAIT";
    })) << client_state
        << " / " << server_state;
}

// The fields of /proc/net/sdpinfo for the socket with this inode, by the
// header's names; empty if it is not listed.
std::map<std::string, std::string> sdpinfo_of(unsigned long long inode)
{
    std::istringstream in(read_file("/proc/net/sdpinfo").value_or(""));
    std::string line;
    std::getline(in, line);
    std::vector<std::string> names;
    std::istringstream header(line);
    for (std::string name; header >> name;)
        names.push_back(name);
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::map<std::string, std::string> fields;
        std::string value;
        for (size_t i = 0; i < names.size() && ls >> value; i++)
            fields[names[i]] = value;
        if (fields.size() == names.size() && fields["inode"] == std::to_string(inode))
            return fields;
    }
    return {};
}

unsigned long field_num(const std::map<std::string, std::string>& f, const std::string& name)
{
    const auto it = f.find(name);
    return it == f.end() ? 0 : std::stoul(it->second);
}

// /proc/net/sdpinfo shows each socket's buffers and the zero-copy transfer
// in flight: a blocking 1 MiB send offered to a reader that has not read
// yet is the sender's active offer and the receiver's queued one, and both
// are gone once the bytes are read.
TEST(ProcNetSdp, InfoShowsBuffersAndAnOfferNotReadYet)
{
    // The offer stays unread for as long as the test looks at it.
    SysctlFor wait("zcopy_sink_wait_ms", "60000");
    Pair p = connected_pair(kAddrA, 7127);
    ASSERT_GE(p.server.get(), 0);
    const size_t n = size_t{1} << 20;
    std::vector<char> out(n, 'i');
    std::atomic<ssize_t> sent{-2};
    std::thread writer([&] { sent = send(p.client.get(), out.data(), n, 0); });
    std::map<std::string, std::string> cli, srv;
    const bool offered = eventually([&] {
        cli = sdpinfo_of(inode_of(p.client.get()));
        srv = sdpinfo_of(inode_of(p.server.get()));
        return cli["src"] == "active" && field_num(srv, "rsa_offers") > 0;
    });
    const std::string file = read_file("/proc/net/sdpinfo").value_or("");
    std::printf("/proc/net/sdpinfo with the offer out:\n%s", file.c_str());
    if (offered) {
        EXPECT_GT(field_num(cli, "src_len"), 0u) << file;
        EXPECT_EQ(field_num(cli, "src_acked"), 0u) << file;
        EXPECT_GE(field_num(cli, "src_offers"), 1u) << file;
        EXPECT_GT(field_num(srv, "rsa_left"), 0u) << file;
        EXPECT_EQ(srv["src"], "-") << file;
    }
    for (const auto* f : {&cli, &srv}) {
        EXPECT_GE(field_num(*f, "rx_base"), 4u) << file;
        EXPECT_GE(field_num(*f, "rx_bufs"), field_num(*f, "rx_base")) << file;
        EXPECT_GT(field_num(*f, "rx_size"), 0u) << file;
        EXPECT_GT(field_num(*f, "seg_max"), 0u) << file;
        EXPECT_GE(field_num(*f, "peer_adverts"), 1u) << file;
    }
    EXPECT_FALSE(sdpinfo_of(inode_of(p.listener.get())).empty()) << file;
    EXPECT_EQ(file.find("ffff"), std::string::npos) << file;
    read_exactly(p.server.get(), n);
    writer.join();
    ASSERT_TRUE(offered) << file;
    EXPECT_EQ(sent.load(), static_cast<ssize_t>(n));
    EXPECT_TRUE(eventually([&] {
        cli = sdpinfo_of(inode_of(p.client.get()));
        srv = sdpinfo_of(inode_of(p.server.get()));
        return cli["src"] == "-" && field_num(cli, "src_offers") == 0 &&
               field_num(srv, "rsa_offers") == 0 && field_num(srv, "rsa_left") == 0;
    })) << read_file("/proc/net/sdpinfo").value_or("");
}

TEST(Counters, ConnectionsMessagesAndBytesAreCounted)
{
    const auto before = counters();
    {
        Pair p = connected_pair(kAddrA, 7103);
        ASSERT_GE(p.server.get(), 0);
        // Data messages are counted here; zero copy has its own tests.
        ASSERT_TRUE(bcopy_only(p.client.get()));
        ASSERT_TRUE(bcopy_only(p.server.get()));
        std::vector<char> buf(200000, 'x');
        std::thread reader([&] { read_exactly(p.server.get(), buf.size()); });
        size_t sent = 0;
        while (sent < buf.size()) {
            const ssize_t r = send(p.client.get(), buf.data() + sent, buf.size() - sent, 0);
            ASSERT_GT(r, 0);
            sent += static_cast<size_t>(r);
        }
        reader.join();
    }
    EXPECT_EQ(counter_delta(before, "conn_established"), 1u);
    EXPECT_EQ(counter_delta(before, "conn_accepted"), 1u);
    EXPECT_EQ(counter_delta(before, "tx_hello"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_hello_ack"), 1u);
    EXPECT_GE(counter_delta(before, "tx_bytes"), 200000u);
    EXPECT_GE(counter_delta(before, "rx_bytes"), 200000u);
    // 200000 bytes in segments of at most buf_size - 16 bytes.
    const auto bufsz = std::stoull(read_file("/proc/sys/net/sdp/buf_size").value_or("16384"));
    EXPECT_GE(counter_delta(before, "tx_data"), 200000u / (bufsz - 16));
    EXPECT_TRUE(eventually([&] { return counter_delta(before, "rx_disconn") >= 2; }));
}

// /proc/net/sdpstats counts the reader's network namespace only, as
// /proc/net/snmp does: a container sees nothing of the host's SDP traffic,
// and its own sockets count in its own namespace.
unsigned long long fallbacks(const std::map<std::string, unsigned long long>& c)
{
    unsigned long long n = 0;
    for (const auto& [name, value] : c)
        if (name.rfind("conn_fallback_", 0) == 0)
            n += value;
    return n;
}

TEST(Counters, EachNetworkNamespaceHasItsOwn)
{
    {
        Pair p = connected_pair(kAddrA, 7108);
        ASSERT_GE(p.server.get(), 0);
    }
    const auto host = counters();
    ASSERT_GT(host.at("conn_established"), 0u);
    ASSERT_GT(host.at("tx_hello"), 0u);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Exit codes: 2 setup failed, 3 a counter not zero, 4 no socket
        // or no count of its failed connect.
        if (unshare(CLONE_NEWNET) != 0)
            _exit(2);
        const auto fresh = counters();
        if (fresh.size() != host.size())
            _exit(2);
        for (const auto& [name, value] : fresh)
            if (value != 0)
                _exit(3);
        // A fallback connect to a TCP listener on lo goes over TCP (no
        // route, or rejected: RDMA devices are shared between namespaces),
        // and its conn_fallback_* counter counts in this namespace.
        const int ctl = socket(AF_INET, SOCK_DGRAM, 0);
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
        if (ctl < 0 || ioctl(ctl, SIOCGIFFLAGS, &ifr) != 0)
            _exit(2);
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
        if (ioctl(ctl, SIOCSIFFLAGS, &ifr) != 0)
            _exit(2);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(7109);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const int tcp = socket(AF_INET, SOCK_STREAM, 0);
        if (tcp < 0 || bind(tcp, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
            listen(tcp, 1) != 0)
            _exit(2);
        const int fd = socket(sdp_family(), SOCK_STREAM, 0);
        if (fd < 0)
            _exit(4);
        const int fallback = SDP_POLICY_FALLBACK;
        setsockopt(fd, SOL_SDP, SDP_TRANSPORT_POLICY, &fallback, sizeof(fallback));
        const int rc = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
        close(fd);
        _exit(rc == 0 && fallbacks(counters()) == 1 ? 0 : 4);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setup, 3: a counter not zero, 4: no own count";
    // The namespace's fallback did not count here.
    EXPECT_EQ(fallbacks(counters()), fallbacks(host));
}

TEST(Counters, RefusedConnectIsCountedByCause)
{
    const auto before = counters();
    Fd fd(socket(sdp_family(), SOCK_STREAM, 0));
    const sockaddr_in a = make_addr(kAddrA, 7199); // nobody listens
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), -1);
    EXPECT_EQ(errno, ECONNREFUSED);
    EXPECT_EQ(counter_delta(before, "conn_err_refused"), 1u);
}

// shutdown(SHUT_RDWR) during a non-blocking connect (SYN_SENT) puts the
// socket back to CLOSE, as tcp_disconnect() does; the RDMA CM's resolution
// and handshake, which go on in the background, must not connect it
// behind the application's back, and the listener gets nothing to keep.
// A connect may also complete before shutdown() runs (a descheduled vCPU
// on a loaded host); shutdown() then closes the sending half of a
// connected socket, as TCP's does, which is not this scenario: getpeername()
// right after shutdown() tells the two apart, and such an attempt is
// repeated on a fresh port.
TEST(Connect, ShutdownWhileConnectingAbandonsTheAttempt)
{
    constexpr int kAttempts = 5;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        const uint16_t port = static_cast<uint16_t>(7190 + attempt);
        Fd l = sdp_listener(kAddrA, port);
        ASSERT_GE(l.get(), 0) << strerror(errno);
        Fd c(socket(sdp_family(), SOCK_STREAM | SOCK_NONBLOCK, 0));
        ASSERT_GE(c.get(), 0) << strerror(errno);
        const sockaddr_in a = make_addr(kAddrA, port);
        ASSERT_EQ(connect(c.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), -1);
        ASSERT_EQ(errno, EINPROGRESS) << strerror(errno);
        ASSERT_EQ(shutdown(c.get(), SHUT_RDWR), 0) << strerror(errno);
        sockaddr_in peer{};
        socklen_t len = sizeof(peer);
        if (getpeername(c.get(), reinterpret_cast<sockaddr*>(&peer), &len) == 0)
            continue; // connected before shutdown(): not SYN_SENT
        ASSERT_EQ(errno, ENOTCONN) << strerror(errno);
        // Long enough for address and route resolution and the CM exchange.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        len = sizeof(peer);
        EXPECT_EQ(getpeername(c.get(), reinterpret_cast<sockaddr*>(&peer), &len), -1)
            << "the abandoned attempt connected";
        EXPECT_EQ(errno, ENOTCONN) << strerror(errno);
        const std::string remote = ":" + std::to_string(port);
        for (const auto& s : proc_sockets()) {
            EXPECT_FALSE(s.state != "LISTEN" && s.state != "CLOSE" &&
                         s.remote.find(remote) != std::string::npos)
                << "a connection of the abandoned attempt is still up, in " << s.state;
        }
        // Whatever the listener accepted of it has been reset.
        ASSERT_EQ(fcntl(l.get(), F_SETFL, O_NONBLOCK), 0);
        Fd acc(accept(l.get(), nullptr, nullptr));
        if (acc.get() >= 0) {
            char b = 0;
            pollfd pfd{acc.get(), POLLIN, 0};
            EXPECT_EQ(poll(&pfd, 1, 5000), 1) << "the accepted half of the attempt stays up";
            EXPECT_LE(recv(acc.get(), &b, 1, 0), 0);
        }
        return;
    }
    FAIL() << "all " << kAttempts << " connects completed before shutdown() could catch them";
}

// Receives exactly n bytes into buf; false on EOF, error or SO_RCVTIMEO.
bool recv_all(int fd, char* buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        const ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0)
            return false;
        got += static_cast<size_t>(r);
    }
    return true;
}

// Payload-carrying Data messages sent since `before`: every Data message
// minus the credit updates (zero-payload Data a receiver sends back).
unsigned long long payload_sends(const std::map<std::string, unsigned long long>& before)
{
    return counter_delta(before, "tx_data") - counter_delta(before, "credit_updates");
}

// Nagle: a stream of 1-byte writes must not cost one RDMA SEND each.  The
// first write goes at once; the following ones wait until the peer has
// acknowledged it and then go together.  Here the reader does not read
// until the writes are done, so only the receiver's delayed-ack timer
// acknowledges, and the count is bounded by the writer's time: one send,
// then one per timer firing.  (With a reader that keeps up, how many
// writes share a send depends on how the round trip compares with one
// write() call, which the host's speed decides, not the protocol.)  The
// writes fit one message of the smallest receive buffer, so none goes
// because a message is full.  With TCP_NODELAY the writes go as long as
// the peer has buffers posted, one each: more sends than Nagle's.
TEST(Coalescing, OneByteWritesShareSends)
{
    constexpr int kWrites = 1000;
    constexpr long kAckDelayMs = 200;
    SysctlFor delay("ack_delay_ms", std::to_string(kAckDelayMs));
    unsigned long long nagle_sends = 0;
    for (const bool nodelay : {false, true}) {
        SCOPED_TRACE(nodelay ? "TCP_NODELAY" : "Nagle");
        Pair p = connected_pair(kAddrA, nodelay ? 7120 : 7104);
        ASSERT_GE(p.server.get(), 0);
        const int on = nodelay ? 1 : 0;
        ASSERT_EQ(setsockopt(p.client.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)), 0);
        const auto before = counters();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kWrites; i++) {
            const char c = static_cast<char>('a' + i % 26);
            ASSERT_EQ(send(p.client.get(), &c, 1, 0), 1) << strerror(errno);
        }
        const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count();
        const auto sends = payload_sends(before);
        // A held write the timer never releases fails here, not hangs.
        const timeval bound{10L * wait_scale(), 0};
        ASSERT_EQ(setsockopt(p.server.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound)), 0);
        std::string got(kWrites, '\0');
        ASSERT_TRUE(recv_all(p.server.get(), got.data(), got.size()));
        for (int i = 0; i < kWrites; i++)
            ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<char>('a' + i % 26)) << "byte " << i;
        std::cout << "[ INFO     ] " << kWrites << " 1-byte writes in " << elapsed_ms << " ms"
                  << (nodelay ? " with TCP_NODELAY" : "") << " took " << sends
                  << " SENDs with payload\n";
        if (nodelay) {
            EXPECT_GT(sends, nagle_sends) << "TCP_NODELAY writes waited as Nagle's do";
        } else {
            nagle_sends = sends;
            EXPECT_LE(sends, static_cast<unsigned long long>(2 + elapsed_ms / kAckDelayMs))
                << "small writes went out while one was unacknowledged";
        }
    }
}

// With TCP_CORK the bytes wait for the uncork and go as one message.
TEST(Coalescing, CorkHoldsUntilUncork)
{
    Pair p = connected_pair(kAddrA, 7105);
    ASSERT_GE(p.server.get(), 0);
    int one = 1, zero = 0;
    ASSERT_EQ(setsockopt(p.client.get(), IPPROTO_TCP, TCP_CORK, &one, sizeof(one)), 0);
    const auto before = counters();
    for (int i = 0; i < 100; i++)
        ASSERT_EQ(send(p.client.get(), "y", 1, 0), 1);
    pollfd pfd{p.server.get(), POLLIN, 0};
    EXPECT_EQ(poll(&pfd, 1, 300), 0) << "corked bytes arrived before the uncork";
    ASSERT_EQ(setsockopt(p.client.get(), IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero)), 0);
    read_exactly(p.server.get(), 100);
    EXPECT_LE(counter_delta(before, "tx_data"), 3u);
}

// ---- completion handling -------------------------------------------------------

// A ping-pong whose readers sleep in recvmsg(): a sleeping reader claims
// the CQ, so the completion handler only wakes it, and a completion work
// queued before the claim must wake it too (it leaves the CQ to the
// claimer).  A wake-up lost between them leaves a completion unhandled
// and the exchange stalls; SO_RCVTIMEO turns a stall into a failure.  With
// no busy polling every read sleeps; with a short one, polls run out
// mid-way, the mix in which a lost wake-up showed.
TEST(CompletionQueue, PingPongWithSleepingReadersNeverStalls)
{
    constexpr int kRounds = 5000;
    constexpr size_t kSize = 1024;
    int port = 7124;
    for (const char* poll_us : {"0", "20"}) {
        SCOPED_TRACE(std::string("recv_poll_us ") + poll_us);
        SysctlFor polling("recv_poll_us", poll_us);
        Pair p = connected_pair(kAddrA, port++);
        ASSERT_GE(p.server.get(), 0);
        const timeval tv{10, 0};
        for (int fd : {p.client.get(), p.server.get()})
            for (int opt : {SO_RCVTIMEO, SO_SNDTIMEO})
                ASSERT_EQ(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)), 0);
        std::atomic<int> echoed{0};
        std::thread echo([&] {
            std::vector<char> buf(kSize);
            for (int i = 0; i < kRounds; i++) {
                if (!recv_all(p.server.get(), buf.data(), kSize) ||
                    send(p.server.get(), buf.data(), kSize, 0) != static_cast<ssize_t>(kSize))
                    return;
                echoed++;
            }
        });
        std::vector<char> out(kSize), in(kSize);
        int done = 0;
        for (; done < kRounds; done++) {
            std::fill(out.begin(), out.end(), static_cast<char>(done));
            if (send(p.client.get(), out.data(), kSize, 0) != static_cast<ssize_t>(kSize) ||
                !recv_all(p.client.get(), in.data(), kSize))
                break;
            if (in != out)
                break;
        }
        const int err = errno;
        // A stalled echo thread times out on its own call.
        echo.join();
        EXPECT_EQ(done, kRounds) << "round trip " << done << " stalled or failed (" << strerror(err)
                                 << "), the echo side had answered " << echoed;
    }
}

// ---- receive buffers that grow ---------------------------------------------------

int max_seg(int fd)
{
    int v = 0;
    socklen_t len = sizeof(v);
    EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, &len), 0) << strerror(errno);
    return v;
}

// `n` pattern bytes from `from` to `to`, checked byte by byte as they
// arrive; bcopy only (zero copy would not use the rings).
void stream_checked(int from, int to, size_t n)
{
    ASSERT_TRUE(bcopy_only(from));
    ASSERT_TRUE(bcopy_only(to));
    size_t bad = n;
    std::thread reader([&] {
        std::vector<unsigned char> buf(100000);
        size_t got = 0;
        while (got < n) {
            const ssize_t r = recv(to, buf.data(), std::min(buf.size(), n - got), 0);
            if (r <= 0)
                return;
            for (ssize_t i = 0; i < r; i++) {
                if (buf[i] != static_cast<unsigned char>((got + i) * 7 + 3))
                    return;
            }
            got += static_cast<size_t>(r);
        }
        bad = 0;
    });
    std::vector<unsigned char> out(300000);
    size_t sent = 0;
    std::string send_err;
    while (sent < n) {
        const size_t len = std::min(out.size(), n - sent);
        for (size_t i = 0; i < len; i++)
            out[i] = static_cast<unsigned char>((sent + i) * 7 + 3);
        const ssize_t r = send(from, out.data(), len, 0);
        if (r <= 0) {
            send_err = strerror(errno);
            shutdown(to, SHUT_RDWR); // the reader waits for bytes that never come
            break;
        }
        sent += static_cast<size_t>(r); // a short write: the rest goes next
    }
    reader.join(); // before any return: a joinable thread would abort the run
    EXPECT_EQ(send_err, "") << "send failed after " << sent << " bytes";
    EXPECT_EQ(bad, 0u) << "the stream arrived incomplete or corrupted";
}

// The socket's SDP_STATS (zero if the call fails, which the test then sees).
sdp_sock_stats sock_stats(int fd)
{
    sdp_sock_stats st{};
    socklen_t len = sizeof(st);
    EXPECT_EQ(getsockopt(fd, SOL_SDP, SDP_STATS, &st, &len), 0) << strerror(errno);
    return st;
}

// With net.sdp.buf_size_initial set, a connection starts with receive and
// send buffers of that size; a stream makes the writer ask for larger ones
// (ChRcvBuf), the reader grows its receive buffers and answers
// (ChRcvBufAck), and the writer's segments and send buffers grow to
// net.sdp.buf_size.  Once per direction, whatever else the stream does.
TEST(BufferGrowth, AStreamGrowsTheBuffersOncePerDirection)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor never_idle("buf_idle_ms", "0"); // counts without shrinks
    const long initial = sdp_sysctl("buf_size_initial");
    const long full = sdp_sysctl("buf_size");
    ASSERT_EQ(initial, 4096);
    ASSERT_GT(full, initial);
    Pair p = connected_pair(kAddrA, 7110);
    ASSERT_GE(p.server.get(), 0);
    EXPECT_EQ(max_seg(p.client.get()), initial - 16);
    EXPECT_EQ(max_seg(p.server.get()), initial - 16);
    const auto before = counters();
    stream_checked(p.client.get(), p.server.get(), 8u << 20);
    EXPECT_EQ(counter_delta(before, "tx_ch_rcv_buf"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_ch_rcv_buf"), 1u);
    EXPECT_EQ(counter_delta(before, "tx_ch_rcv_buf_ack"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_ch_rcv_buf_ack"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grow_refused"), 0u);
    EXPECT_EQ(max_seg(p.client.get()), full - 16) << "the writer's segments grew";
    EXPECT_EQ(max_seg(p.server.get()), initial - 16) << "the other direction did not";
    // Segments of the full size went: far fewer messages than 4 KiB ones.
    const auto data = counter_delta(before, "tx_data");
    EXPECT_LT(data, (8u << 20) / static_cast<unsigned long>(initial - 16) / 2)
        << data << " Data messages for 8 MiB";
    // The other way, and again: one more request, from the other end.
    stream_checked(p.server.get(), p.client.get(), 4u << 20);
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
    EXPECT_EQ(counter_delta(before, "tx_ch_rcv_buf"), 2u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 2u);
    EXPECT_EQ(max_seg(p.server.get()), full - 16);
}

// A receiver that reads nothing while the writer streams: the request
// waits behind unread data, is answered once the reader drains it, and
// no byte is lost or reordered on the way.
TEST(BufferGrowth, GrowsWhileTheReaderLagsBehind)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor never_idle("buf_idle_ms", "0");
    const auto before = counters();
    Pair p = connected_pair(kAddrA, 7111);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_TRUE(bcopy_only(p.client.get()));
    const int fl = fcntl(p.client.get(), F_GETFL);
    ASSERT_EQ(fcntl(p.client.get(), F_SETFL, fl | O_NONBLOCK), 0);
    std::vector<unsigned char> out(1u << 20);
    for (size_t i = 0; i < out.size(); i++)
        out[i] = static_cast<unsigned char>(i * 13 + 1);
    size_t sent = 0;
    // Until the rings are full: nothing is read yet.
    for (;;) {
        const ssize_t r =
            send(p.client.get(), out.data() + sent % out.size(), out.size() - sent % out.size(), 0);
        if (r < 0) {
            ASSERT_EQ(errno, EAGAIN) << strerror(errno);
            break;
        }
        sent += static_cast<size_t>(r);
    }
    ASSERT_EQ(fcntl(p.client.get(), F_SETFL, fl), 0);
    std::thread writer([&] {
        size_t more = 0;
        while (more < (4u << 20)) {
            const ssize_t r = send(p.client.get(), out.data() + (sent + more) % out.size(),
                                   out.size() - (sent + more) % out.size(), 0);
            if (r <= 0)
                return;
            more += static_cast<size_t>(r);
        }
        sent += more;
        shutdown(p.client.get(), SHUT_WR);
    });
    std::vector<unsigned char> buf(70000);
    size_t got = 0;
    bool ok = true;
    for (;;) {
        const ssize_t r = recv(p.server.get(), buf.data(), buf.size(), 0);
        ASSERT_GE(r, 0) << strerror(errno);
        if (r == 0)
            break;
        for (ssize_t i = 0; i < r && ok; i++)
            ok = buf[i] == static_cast<unsigned char>(((got + i) % out.size()) * 13 + 1);
        got += static_cast<size_t>(r);
    }
    writer.join();
    EXPECT_TRUE(ok) << "a byte arrived wrong";
    EXPECT_EQ(got, sent);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 1u);
}

// `n` pattern bytes written to `w` before anything reads `r`.  Returns
// whether the writer finished within the bound; the bytes are then read and
// checked either way (reading is also what unblocks a stalled writer).
bool written_before_read(int w, int r, size_t n)
{
    std::vector<unsigned char> out(n);
    for (size_t i = 0; i < n; i++)
        out[i] = static_cast<unsigned char>(i * 11 + 5);
    std::atomic<bool> done{false};
    std::thread writer([&] {
        size_t sent = 0;
        while (sent < n) {
            const ssize_t k = send(w, out.data() + sent, n - sent, 0);
            if (k <= 0)
                break;
            sent += static_cast<size_t>(k);
        }
        done = true;
    });
    const bool finished = eventually([&] { return done.load(); });
    std::vector<unsigned char> in(n);
    size_t got = 0;
    while (got < n) {
        const ssize_t k = recv(r, in.data() + got, n - got, 0);
        if (k <= 0)
            break;
        got += static_cast<size_t>(k);
    }
    writer.join();
    EXPECT_EQ(got, n);
    EXPECT_TRUE(in == out) << "the stream arrived corrupted";
    return finished;
}

// A writer far ahead of its reader: TCP takes a few hundred kilobytes
// before the peer reads anything, and so must small receive buffers, which
// add buffers while the unread data piles up.  TCP is the oracle.
TEST(BufferGrowth, AWriterAheadOfItsReaderDoesNotStall)
{
    const size_t n = 400000;
    {
        Pair t = tcp_pair(kAddrA, 7113);
        ASSERT_GE(t.server.get(), 0);
        ASSERT_TRUE(written_before_read(t.server.get(), t.client.get(), n)) << "TCP stalled";
    }
    const SysctlFor small("buf_size_initial", "4096");
    const auto before = counters();
    Pair p = connected_pair(kAddrA, 7114);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_TRUE(bcopy_only(p.server.get()));
    EXPECT_TRUE(written_before_read(p.server.get(), p.client.get(), n)) << "SDP stalled";
    EXPECT_GT(counter_delta(before, "rx_buffers_added"), 0u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grow_refused"), 0u);
    // And the connection goes on, both ways.
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
    stream_checked(p.server.get(), p.client.get(), 1u << 20);
}

// An idle stream gives its memory back (net.sdp.buf_idle_ms): the writer
// asks the reader to go back to its first size, its credit updates consume
// the reader's large buffers still posted, the receive ring ends with small
// buffers and the writer with no send buffer, as when new, and the next
// stream grows them again, every byte checked.
TEST(BufferGrowth, AnIdleStreamShrinksTheBuffersThenGrowsThemAgain)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    const long full = sdp_sysctl("buf_size");
    Pair p = connected_pair(kAddrA, 7115);
    ASSERT_GE(p.server.get(), 0);
    const sdp_sock_stats fresh_c = sock_stats(p.client.get());
    const sdp_sock_stats fresh_s = sock_stats(p.server.get());
    ASSERT_EQ(fresh_c.tx_ring_bytes, 0u) << "a socket that never sent holds send buffers";
    ASSERT_GT(fresh_s.rx_ring_bytes, 0u);
    const auto before = counters();
    stream_checked(p.client.get(), p.server.get(), 4u << 20);
    EXPECT_GE(counter_delta(before, "rx_buffers_grown"), 1u);
    // Every request answered, the last one a shrink.
    const auto settled = [&] {
        const auto asked = counter_delta(before, "tx_ch_rcv_buf");
        return max_seg(p.client.get()) == 4096 - 16 &&
               counter_delta(before, "rx_ch_rcv_buf_ack") == asked &&
               counter_delta(before, "tx_buffers_shrunk") >= 1;
    };
    ASSERT_TRUE(eventually(settled)) << "segments " << max_seg(p.client.get());
    EXPECT_GE(counter_delta(before, "tx_ch_rcv_buf"), 2u);
    EXPECT_GE(counter_delta(before, "rx_buffers_shrunk"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grow_refused"), 0u);
    EXPECT_EQ(max_seg(p.server.get()), 4096 - 16) << "the other direction never grew";
    // The memory too: both rings hold what they held when new.
    EXPECT_TRUE(eventually([&] {
        return sock_stats(p.client.get()).tx_ring_bytes == fresh_c.tx_ring_bytes &&
               sock_stats(p.server.get()).rx_ring_bytes == fresh_s.rx_ring_bytes;
    })) << "send ring "
        << sock_stats(p.client.get()).tx_ring_bytes << " B, new " << fresh_c.tx_ring_bytes
        << "; receive ring " << sock_stats(p.server.get()).rx_ring_bytes << " B, new "
        << fresh_s.rx_ring_bytes;
    // Streams again, both ways, after another idle spell.
    const auto grown = counter_delta(before, "rx_buffers_grown");
    stream_checked(p.client.get(), p.server.get(), 2u << 20);
    EXPECT_GT(counter_delta(before, "rx_buffers_grown"), grown);
    stream_checked(p.server.get(), p.client.get(), 2u << 20);
    EXPECT_TRUE(eventually([&] {
        return max_seg(p.client.get()) == 4096 - 16 && max_seg(p.server.get()) == 4096 - 16;
    })) << "segments "
        << max_seg(p.client.get()) << " and " << max_seg(p.server.get());
    EXPECT_LE(counter_delta(before, "tx_ch_rcv_buf"), 16u) << "requests run away";
    EXPECT_GT(full, 4096);
}

// Send buffers come when a send needs them, one per segment slot used and
// of the connection's first size, so a socket that only reads, or has not
// written yet, holds none; every byte still arrives.
TEST(BufferGrowth, SendBuffersComeWithTheFirstSend)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor never_idle("buf_idle_ms", "0");
    Pair p = connected_pair(kAddrA, 7117);
    ASSERT_GE(p.server.get(), 0);
    EXPECT_EQ(sock_stats(p.client.get()).tx_ring_bytes, 0u);
    EXPECT_EQ(sock_stats(p.server.get()).tx_ring_bytes, 0u);
    const char out = 'q';
    char in = 0;
    ASSERT_EQ(send(p.client.get(), &out, 1, 0), 1) << strerror(errno);
    ASSERT_EQ(recv(p.server.get(), &in, 1, 0), 1) << strerror(errno);
    EXPECT_EQ(in, out);
    EXPECT_EQ(sock_stats(p.client.get()).tx_ring_bytes, 4096u) << "one segment, one buffer";
    EXPECT_EQ(sock_stats(p.server.get()).tx_ring_bytes, 0u) << "the reader sent nothing";
    // A stream takes as many as the ring has slots, no more: a buffer of
    // each at most, and a replacement waiting for some (grown segments).
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
    int sndbuf = 0;
    socklen_t len = sizeof(sndbuf);
    ASSERT_EQ(getsockopt(p.client.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
    const long full = sdp_sysctl("buf_size");
    const long slots = std::clamp(sndbuf / full, sdp_sysctl("ring_min"), sdp_sysctl("ring_max"));
    const auto ring = sock_stats(p.client.get()).tx_ring_bytes;
    EXPECT_GT(ring, 4096u);
    EXPECT_LE(ring, static_cast<uint64_t>(slots * (full + 4096)));
    stream_checked(p.server.get(), p.client.get(), 1u << 20);
    EXPECT_GT(sock_stats(p.server.get()).tx_ring_bytes, 0u);
}

// A writer whose segments never grew gives its send buffers back when it
// idles, as one that streamed does, and its next send takes one again.
TEST(BufferGrowth, AnIdleWriterGivesBackItsSendBuffers)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    Pair p = connected_pair(kAddrA, 7118);
    ASSERT_GE(p.server.get(), 0);
    for (int round = 0; round < 2; round++) {
        const std::string out = "request " + std::to_string(round);
        ASSERT_EQ(send(p.client.get(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()))
            << strerror(errno);
        std::string in(out.size(), '\0');
        ASSERT_EQ(recv(p.server.get(), in.data(), in.size(), MSG_WAITALL),
                  static_cast<ssize_t>(in.size()))
            << strerror(errno);
        EXPECT_EQ(in, out);
        EXPECT_TRUE(eventually([&] { return sock_stats(p.client.get()).tx_ring_bytes == 0; }))
            << "round " << round << ": the idle writer still holds "
            << sock_stats(p.client.get()).tx_ring_bytes << " B of send buffers";
    }
    EXPECT_EQ(max_seg(p.client.get()), 4096 - 16) << "the segments grew";
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
}

// A reader that lagged made its ring add buffers; once the writer's stream
// idles they are given back as they come free, down to the ring's first
// number, and the next stream still arrives whole.
TEST(BufferGrowth, AddedBuffersGoBackWhenTheStreamIdles)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    Pair p = connected_pair(kAddrA, 7116);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_TRUE(bcopy_only(p.client.get()));
    const sdp_sock_stats fresh_s = sock_stats(p.server.get());
    const auto before = counters();
    EXPECT_TRUE(written_before_read(p.client.get(), p.server.get(), 400000)) << "SDP stalled";
    const auto added = counter_delta(before, "rx_buffers_added");
    ASSERT_GT(added, 0u);
    EXPECT_TRUE(eventually([&] { return counter_delta(before, "rx_buffers_removed") == added; }))
        << counter_delta(before, "rx_buffers_removed") << " of " << added << " given back";
    EXPECT_TRUE(eventually([&] {
        return sock_stats(p.server.get()).rx_ring_bytes == fresh_s.rx_ring_bytes;
    })) << "receive ring "
        << sock_stats(p.server.get()).rx_ring_bytes << " B, new " << fresh_s.rx_ring_bytes;
    EXPECT_TRUE(eventually([&] {
        return counter_delta(before, "rx_ch_rcv_buf_ack") == counter_delta(before, "tx_ch_rcv_buf");
    })) << "a request unanswered";
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
    stream_checked(p.server.get(), p.client.get(), 1u << 20);
}

// A receive ring full of unread data still takes in the messages its own
// sends wait for.  The client's stream fills the server's ring, which added
// buffers for it, and idles, so the ring gives its added buffers back as
// they come free; then the server, still not reading, sends, and the client
// reads.  Each of the client's answers (RdmaRdCompl, SinkAvail, credit
// updates) takes one of the server's posted buffers.  Given back instead of
// posted again, they left the client without a credit while the server's
// send waited for its RdmaRdCompl: the kernel echo server (which reads only
// after its send returned) met that deadlock under load.  Returns what went
// wrong, "" if nothing.
std::string sends_behind_unread_data(int client, int server)
{
    constexpr size_t kUp = 200000; // client to server, left unread
    constexpr size_t kMsg = 128 * kKiB;
    constexpr size_t kMsgs = 48; // server to client, read as they come
    std::vector<unsigned char> up(kUp);
    for (size_t i = 0; i < kUp; i++)
        up[i] = static_cast<unsigned char>(i * 11 + 5);
    for (size_t sent = 0; sent < kUp;) {
        // Below the zero-copy threshold: into the server's ring.
        const ssize_t k = send(client, up.data() + sent, std::min<size_t>(32768, kUp - sent), 0);
        if (k <= 0)
            return std::string("client send: ") + strerror(errno);
        sent += static_cast<size_t>(k);
    }
    // Long enough for the client's stream to count as idle (buf_idle_ms).
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const timeval bound{20, 0};
    if (setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound)) != 0 ||
        setsockopt(server, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)) != 0)
        return std::string("SO_RCVTIMEO/SO_SNDTIMEO: ") + strerror(errno);
    std::string send_err;
    std::thread writer([&] {
        std::vector<unsigned char> out(kMsg);
        for (size_t m = 0; m < kMsgs; m++) {
            for (size_t i = 0; i < kMsg; i++)
                out[i] = static_cast<unsigned char>((m * kMsg + i) * 7 + 3);
            for (size_t off = 0; off < kMsg;) {
                const ssize_t k = send(server, out.data() + off, kMsg - off, 0);
                if (k <= 0) {
                    send_err =
                        "server send of message " + std::to_string(m) + ": " + strerror(errno);
                    return;
                }
                off += static_cast<size_t>(k);
            }
        }
    });
    std::string err;
    std::vector<unsigned char> in(1 << 20);
    for (size_t got = 0; got < kMsg * kMsgs && err.empty();) {
        const ssize_t r = recv(client, in.data(), std::min(in.size(), kMsg * kMsgs - got), 0);
        if (r <= 0) {
            err = "the client received " + std::to_string(got) + " of " +
                  std::to_string(kMsg * kMsgs) + " bytes: " + (r == 0 ? "EOF" : strerror(errno));
            break;
        }
        for (ssize_t i = 0; i < r && err.empty(); i++) {
            if (in[i] != static_cast<unsigned char>((got + i) * 7 + 3))
                err = "byte " + std::to_string(got + i) + " from the server differs";
        }
        got += static_cast<size_t>(r);
    }
    writer.join();
    if (err.empty())
        err = send_err;
    if (!err.empty())
        return err;
    std::vector<unsigned char> back(kUp);
    for (size_t got = 0; got < kUp;) {
        const ssize_t r = recv(server, back.data() + got, kUp - got, 0);
        if (r <= 0)
            return "the server read " + std::to_string(got) + " of the client's bytes";
        got += static_cast<size_t>(r);
    }
    return back == up ? "" : "the client's bytes arrived corrupted";
}

TEST(BufferGrowth, SendsGoOnWhileTheRingIsFullOfUnreadData)
{
    {
        Pair t = tcp_pair(kAddrA, 7125);
        ASSERT_GE(t.server.get(), 0);
        ASSERT_EQ(sends_behind_unread_data(t.client.get(), t.server.get()), "") << "over TCP";
    }
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    const auto before = counters();
    Pair p = connected_pair(kAddrA, 7126);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_EQ(sends_behind_unread_data(p.client.get(), p.server.get()), "");
    EXPECT_GT(counter_delta(before, "rx_buffers_added"), 0u) << "the ring never grew";
    EXPECT_GT(counter_delta(before, "zcopy_rdma_reads"), 0u) << "no zero copy";
    // And the connection goes on, both ways.
    stream_checked(p.client.get(), p.server.get(), 1u << 20);
    stream_checked(p.server.get(), p.client.get(), 1u << 20);
}

// sdp.ko's test hook (kernel/sdp_fault.c): the next allocation of `kind`
// fails, as when the memory is not there: 32 the growth of receive
// buffers at the peer's request (the ring then takes a lagging reader's
// data in more 4 KiB buffers instead of larger ones), 64 a ring buffer
// larger than a page.
struct FailNextAllocation {
    explicit FailNextAllocation(const char* kind)
    {
        EXPECT_TRUE(write_file("/sys/module/sdp/parameters/fail_post_kinds", kind));
        EXPECT_TRUE(write_file("/sys/module/sdp/parameters/fail_posts", "1"));
    }
    ~FailNextAllocation()
    {
        write_file("/sys/module/sdp/parameters/fail_posts", "0");
        write_file("/sys/module/sdp/parameters/fail_post_kinds", "7");
    }
    FailNextAllocation(const FailNextAllocation&) = delete;
    FailNextAllocation& operator=(const FailNextAllocation&) = delete;
};

// A new connection's completion queue has room for the receive ring's
// first buffers only (and what the device's rounding adds); a reader that
// lags makes the ring add buffers, and the CQ is resized first, so that
// each posted buffer has room for its completion.  When the ring is back
// to its first buffers the CQ goes back to its first size, and the next
// lag grows it again.
//
// The ring adds 4 KiB buffers when the growth of their size was refused
// (the hook below); they go back as they come free once the reader has
// caught up, and the next stream grows the buffers.
TEST(BufferGrowth, TheCompletionQueueGrowsWithTheRingAndShrinksBack)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    Pair p = connected_pair(kAddrA, 7119);
    ASSERT_GE(p.server.get(), 0);
    // Zero copy would make room in the CQ for its own work requests.
    ASSERT_TRUE(bcopy_only(p.client.get()));
    ASSERT_TRUE(bcopy_only(p.server.get()));
    const sdp_sock_stats fresh = sock_stats(p.server.get());
    ASSERT_GT(fresh.cq_entries, 0u);
    const auto before = counters();
    const auto idle_spell = [] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); };
    for (int round = 1; round <= 2; round++) {
        const auto grown_before = counter_delta(before, "cq_grown");
        {
            // 4 KiB buffers: more of them than the CQ has room for at
            // first, fewer than the ring's cap (30 at 4 KiB with the default
            // SO_RCVBUF), which bounds what a writer ahead of its reader
            // can queue at that size.
            const FailNextAllocation small_buffers("32");
            // Whether the writer stalls at this size is not the point
            // (the bytes are checked either way).
            written_before_read(p.client.get(), p.server.get(), 180000);
            EXPECT_EQ(read_file("/sys/module/sdp/parameters/fail_posts").value_or("?"), "0\n")
                << "round " << round << ": the growth was not refused";
        }
        // At least once: a writer that stalled (ring full) goes on once
        // the reader caught up, and the ring may have been back to its
        // first buffers, and the CQ to its first size, in between.
        EXPECT_GE(counter_delta(before, "cq_grown"), grown_before + 1)
            << "round " << round << ": " << counter_delta(before, "rx_buffers_added")
            << " buffers added";
        idle_spell();
        stream_checked(p.client.get(), p.server.get(), 1u << 20);
        EXPECT_TRUE(eventually([&] {
            return sock_stats(p.server.get()).rx_ring_bytes == fresh.rx_ring_bytes;
        })) << "round "
            << round << ": receive ring " << sock_stats(p.server.get()).rx_ring_bytes << " B, new "
            << fresh.rx_ring_bytes;
        EXPECT_TRUE(eventually([&] {
            return sock_stats(p.server.get()).cq_entries == fresh.cq_entries;
        })) << "round "
            << round << ": " << sock_stats(p.server.get()).cq_entries << " CQ entries, new "
            << fresh.cq_entries;
        idle_spell();
    }
    EXPECT_EQ(counter_delta(before, "cq_grow_refused"), 0u);
    EXPECT_EQ(sock_stats(p.client.get()).cq_entries, fresh.cq_entries)
        << "the writer's CQ grew: its ring added no buffers";
    // And the buffers can grow again.
    const auto grown = counter_delta(before, "rx_buffers_grown");
    stream_checked(p.client.get(), p.server.get(), 2u << 20);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), grown + 1);
    EXPECT_EQ(max_seg(p.client.get()), sdp_sysctl("buf_size") - 16) << "the segments grew";
    stream_checked(p.server.get(), p.client.get(), 1u << 20);
}

// `n` pattern bytes (seed) from `from` to `to` by one blocking send and
// one MSG_WAITALL receive: zero copy at the default threshold.
void transfer_checked(int from, int to, size_t n, unsigned seed)
{
    std::vector<unsigned char> out(n), in(n);
    for (size_t i = 0; i < n; i++)
        out[i] = static_cast<unsigned char>((i + seed) * 13 + 5);
    ssize_t sent = -1;
    std::thread writer([&] { sent = send(from, out.data(), n, MSG_NOSIGNAL); });
    const ssize_t got = recv(to, in.data(), n, MSG_WAITALL);
    writer.join();
    EXPECT_EQ(sent, static_cast<ssize_t>(n)) << strerror(errno);
    ASSERT_EQ(got, static_cast<ssize_t>(n)) << strerror(errno);
    EXPECT_TRUE(in == out) << "the bytes differ";
}

// A new connection's completion queue has no room for zero copy's work
// requests: most connections never make a zero-copy transfer.  The first
// one makes it on each end (cq_grown), later ones find it there; bcopy
// before it leaves the CQ as it is.
TEST(CompletionQueue, ZeroCopyMakesItsRoomOnFirstUse)
{
    Pair p = connected_pair(kAddrA, 7121);
    ASSERT_GE(p.server.get(), 0);
    const uint64_t fresh_client = sock_stats(p.client.get()).cq_entries;
    const uint64_t fresh_server = sock_stats(p.server.get()).cq_entries;
    ASSERT_GT(fresh_client, 0u);
    const auto before = counters();
    transfer_checked(p.client.get(), p.server.get(), 1000, 1);
    transfer_checked(p.server.get(), p.client.get(), 1000, 2);
    EXPECT_EQ(sock_stats(p.client.get()).cq_entries, fresh_client) << "bcopy grew the CQ";
    EXPECT_EQ(counter_delta(before, "cq_grown"), 0u);
    constexpr size_t kZc = 256 * kKiB;
    transfer_checked(p.client.get(), p.server.get(), kZc, 3);
    EXPECT_EQ(counter_delta(before, "zcopy_rx_bytes"), kZc) << "not by zero copy";
    EXPECT_EQ(counter_delta(before, "cq_grown"), 2u) << "one resize on each end";
    EXPECT_GT(sock_stats(p.client.get()).cq_entries, fresh_client);
    EXPECT_GT(sock_stats(p.server.get()).cq_entries, fresh_server);
    transfer_checked(p.server.get(), p.client.get(), kZc, 4);
    transfer_checked(p.client.get(), p.server.get(), kZc, 5);
    EXPECT_EQ(counter_delta(before, "zcopy_rx_bytes"), 3 * kZc);
    EXPECT_EQ(counter_delta(before, "cq_grown"), 2u) << "the room was there already";
    EXPECT_EQ(counter_delta(before, "cq_grow_refused"), 0u);
}

// net.sdp.buf_size_initial 0: buffers of net.sdp.buf_size
// from the start, nothing to ask for.
TEST(BufferGrowth, InitialZeroStartsAtTheFullSize)
{
    const SysctlFor full_size("buf_size_initial", "0");
    Pair p = connected_pair(kAddrA, 7112);
    ASSERT_GE(p.server.get(), 0);
    const long full = sdp_sysctl("buf_size");
    EXPECT_EQ(max_seg(p.client.get()), full - 16);
    const auto before = counters();
    stream_checked(p.client.get(), p.server.get(), 2u << 20);
    EXPECT_EQ(counter_delta(before, "tx_ch_rcv_buf"), 0u);
}

// Ring buffers of `pages` pages that sdp.ko holds: the vmalloc() areas of
// sdp_bigbuf_alloc() in /proc/vmallocinfo.
unsigned big_ring_buffers(unsigned long pages)
{
    std::istringstream in(read_file("/proc/vmallocinfo").value_or(""));
    const std::string want = " pages=" + std::to_string(pages) + " ";
    std::string line;
    unsigned n = 0;
    while (std::getline(in, line)) {
        if (line.find("sdp_bigbuf_alloc") != std::string::npos &&
            line.find(want) != std::string::npos)
            n++;
    }
    return n;
}

// Grown buffers are page-sized allocations (vmalloc(), no order-4 block),
// each registered with an MR of its own before the device uses it: 64 KiB
// buffers are 16 pages.  The stream arrives whole, and the buffers go with
// the connection.
TEST(BufferGrowth, GrownBuffersArePagesWithTheirOwnRegistration)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor never_idle("buf_idle_ms", "0");
    const long full = sdp_sysctl("buf_size");
    ASSERT_EQ(full % 4096, 0);
    const auto pages = static_cast<unsigned long>(full / 4096);
    // Earlier tests' connections finish their teardown first.
    ASSERT_TRUE(eventually([] { return proc_sockets().empty(); }, 30));
    const unsigned areas_before = big_ring_buffers(pages);
    const auto before = counters();
    {
        Pair p = connected_pair(kAddrA, 7122);
        ASSERT_GE(p.server.get(), 0);
        ASSERT_TRUE(bcopy_only(p.client.get()));
        stream_checked(p.client.get(), p.server.get(), 4u << 20);
        EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 1u);
        EXPECT_EQ(max_seg(p.client.get()), full - 16) << "the writer's segments grew";
        const unsigned grown = big_ring_buffers(pages) - areas_before;
        // Every receive buffer of the reader, and the writer's send buffers.
        EXPECT_GE(grown, static_cast<unsigned>(sdp_sysctl("ring_min")) + 1);
        EXPECT_GE(counter_delta(before, "ring_mr_registered"), grown)
            << "a buffer in use without its registration";
        EXPECT_EQ(counter_delta(before, "ring_mr_refused"), 0u);
        stream_checked(p.server.get(), p.client.get(), 1u << 20);
    }
    EXPECT_TRUE(eventually([] { return proc_sockets().empty(); }, 30))
        << read_file("/proc/net/sdp").value_or("");
    EXPECT_TRUE(eventually([&] { return big_ring_buffers(pages) == areas_before; }))
        << big_ring_buffers(pages) - areas_before << " large ring buffers left";
}

// Without memory for a large buffer (sdp.ko's test hook: the next one
// fails as under memory pressure), the growth is refused without a
// warning and the stream goes on in the small buffers; the writer asks
// again after an idle spell, and the buffers grow.
TEST(BufferGrowth, NoMemoryForALargeBufferRefusesTheGrowth)
{
    const SysctlFor small("buf_size_initial", "4096");
    const SysctlFor idle("buf_idle_ms", "200");
    Pair p = connected_pair(kAddrA, 7123);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_TRUE(bcopy_only(p.client.get()));
    const auto before = counters();
    {
        const FailNextAllocation no_large_buffer("64");
        stream_checked(p.client.get(), p.server.get(), 2u << 20);
        EXPECT_EQ(read_file("/sys/module/sdp/parameters/fail_posts").value_or("?"), "0\n")
            << "no large buffer was allocated";
    }
    EXPECT_EQ(counter_delta(before, "rx_buffers_grow_refused"), 1u);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 0u);
    EXPECT_EQ(max_seg(p.client.get()), 4096 - 16) << "segments grew without the buffers";
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    stream_checked(p.client.get(), p.server.get(), 2u << 20);
    EXPECT_EQ(counter_delta(before, "rx_buffers_grown"), 1u);
    EXPECT_EQ(max_seg(p.client.get()), sdp_sysctl("buf_size") - 16);
}

// Module unload is refused while SDP sockets exist and works once they are
// gone (connections torn down, nothing leaked).
TEST(Lifecycle, UnloadRefusedWithConnectionsAndWorksAfter)
{
    const std::string module = required_env("SDP_MODULE");
    {
        Pair p = connected_pair(kAddrA, 7106);
        ASSERT_GE(p.server.get(), 0);
        ASSERT_EQ(send(p.client.get(), "hello", 5, 0), 5);
        read_exactly(p.server.get(), 5);
        EXPECT_EQ(unload_module("sdp"), EWOULDBLOCK);
    }
    ASSERT_TRUE(wait_no_sdp_sockets()) << read_file("/proc/net/sdp").value_or("");
    // Closed sockets finish their teardown (DisConn both ways, disconnect)
    // in the background, as TCP's do, holding the module until then.
    EXPECT_TRUE(eventually([] { return proc_sockets().empty(); }, 30))
        << read_file("/proc/net/sdp").value_or("");
    const std::string params = sdp_module_params();
    EXPECT_TRUE(eventually([] { return unload_module("sdp") == 0; }, 10));
    ASSERT_EQ(load_module(module, params), 0) << params;
    // And it works again.
    Pair p = connected_pair(kAddrA, 7107);
    ASSERT_GE(p.server.get(), 0);
    ASSERT_EQ(send(p.client.get(), "again", 5, 0), 5);
    read_exactly(p.server.get(), 5);
}

// Documented difference from TCP: the RDMA CM refuses a listener on a port
// that another SO_REUSEADDR socket holds bound (TCP allows it while the other
// does not listen).  Once the other socket is closed, listen works.
TEST(PortSpace, ListenWithAnotherReuseaddrSocketBoundIsEaddrinuse)
{
    const sockaddr_in a = make_addr(kAddrA, 7109);
    const int one = 1;
    Fd s1(socket(sdp_family(), SOCK_STREAM, 0));
    Fd s2(socket(sdp_family(), SOCK_STREAM, 0));
    setsockopt(s1.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(s2.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ASSERT_EQ(bind(s1.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(bind(s2.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(s1.get(), 4), -1);
    EXPECT_EQ(errno, EADDRINUSE);
    s2.reset();
    EXPECT_EQ(listen(s1.get(), 4), 0) << strerror(errno);
}

// SDP ports are not TCP ports: the same number can be used by both.
TEST(PortSpace, SdpAndTcpPortsAreSeparate)
{
    Fd tcp(socket(AF_INET, SOCK_STREAM, 0));
    const sockaddr_in a = make_addr(kAddrA, 7110);
    ASSERT_EQ(bind(tcp.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(tcp.get(), 4), 0);
    Fd sdp = sdp_listener(kAddrA, 7110);
    Fd c = sdp_connect(kAddrA, 7110);
    Fd s(accept(sdp.get(), nullptr, nullptr));
    EXPECT_GE(s.get(), 0);
}

int run(const std::string& cmd)
{
    return std::system(cmd.c_str());
}

bool rxe_active(const std::string& dev)
{
    return run("rdma link show " + dev + "/1 2>/dev/null | grep -q 'state ACTIVE'") == 0;
}

// Deleting the RDMA device under live connections resets them (no kernel
// warnings: the tier fails on any); the other device keeps working.
TEST(Lifecycle, DeviceRemovalResetsConnectionsOtherDeviceWorks)
{
    Fd listener(socket(sdp_family(), SOCK_STREAM, 0));
    const sockaddr_in any = make_addr("0.0.0.0", 7108);
    ASSERT_EQ(bind(listener.get(), reinterpret_cast<const sockaddr*>(&any), sizeof(any)), 0);
    ASSERT_EQ(listen(listener.get(), 8), 0);
    Fd client = sdp_connect(kAddrA, 7108); // both ends on rxe0
    Fd server(accept(listener.get(), nullptr, nullptr));
    ASSERT_GE(server.get(), 0);
    ASSERT_EQ(send(client.get(), "abc", 3, 0), 3);
    read_exactly(server.get(), 3);

    ASSERT_EQ(run("rdma link delete rxe0"), 0);
    pollfd pfd{client.get(), POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, 10000), 1);
    EXPECT_TRUE(pfd.revents & POLLERR) << "revents " << pfd.revents;
    EXPECT_TRUE(pfd.revents & POLLHUP) << "revents " << pfd.revents;
    char c = 0;
    EXPECT_EQ(recv(client.get(), &c, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET);
    EXPECT_EQ(send(client.get(), "x", 1, MSG_NOSIGNAL), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(send(server.get(), "x", 1, MSG_NOSIGNAL), -1);
    EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE) << strerror(errno);

    // The wildcard listener still accepts over rxe1.
    Fd client2 = sdp_connect(kAddrB, 7108);
    Fd server2(accept(listener.get(), nullptr, nullptr));
    ASSERT_GE(server2.get(), 0);
    ASSERT_EQ(send(client2.get(), "defg", 4, 0), 4);
    read_exactly(server2.get(), 4);

    client.reset();
    server.reset();
    ASSERT_EQ(run("rdma link add rxe0 type rxe netdev veth0"), 0);
    EXPECT_TRUE(eventually([] { return rxe_active("rxe0"); }));
}

} // namespace
} // namespace sdp::vmtest
