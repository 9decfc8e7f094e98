// SPDX-License-Identifier: GPL-2.0
//
// sdp.ko in a real kernel: module load and unload, the `family` and
// `ipproto` parameters, autoloading through the net-pf aliases, socket
// creation and release, and socket() and address errors compared against
// AF_INET (TCP is the oracle).
//
// Runs as root inside the test VM (tests/vm/tier-socket.sh), which sets
// SDP_MODULE (the built sdp.ko) and SDP_MODROOT (a module root where sdp.ko
// is installed and indexed by depmod).
#include "uapi/sdp.h"
#include "vm_util.h"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace sdp::vmtest {
namespace {

constexpr const char* kModuleName = "sdp";
constexpr const char* kModprobeSysctl = "/proc/sys/kernel/modprobe";

// socket() result as something gtest can compare and print: the errno, or 0
// for success (the descriptor is closed right away).
int socket_errno(int family, int type, int protocol)
{
    const int fd = socket(family, type, protocol);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

int int_sockopt(int fd, int name)
{
    int value = -1;
    socklen_t len = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, name, &value, &len) != 0)
        return -errno;
    return value;
}

class SdpModule : public ::testing::Test {
  protected:
    void SetUp() override
    {
        module_path_ = required_env("SDP_MODULE");
        // Autoload must not find sdp.ko unless a test asks for it: the
        // distro tree in /lib/modules does not have it.
        saved_modprobe_ = read_file(kModprobeSysctl).value_or("/sbin/modprobe\n");
        ASSERT_TRUE(write_file(kModprobeSysctl, "/sbin/modprobe\n"));
        if (module_loaded(kModuleName)) {
            ASSERT_EQ(unload_module(kModuleName), 0) << "a previous test left sdp loaded";
        }
    }

    void TearDown() override
    {
        for (const int fd : open_fds_)
            close(fd);
        if (module_loaded(kModuleName)) {
            EXPECT_EQ(unload_module(kModuleName), 0);
        }
        write_file(kModprobeSysctl, saved_modprobe_);
    }

    void load(const std::string& params = "")
    {
        ASSERT_EQ(load_module(module_path_, params), 0) << "loading sdp.ko " << params;
    }

    int open_socket(int family, int type = SOCK_STREAM, int protocol = 0)
    {
        const int fd = socket(family, type, protocol);
        if (fd >= 0)
            open_fds_.push_back(fd);
        return fd;
    }

    // Point the kernel's module loader at the staging root where sdp.ko is
    // installed and indexed by depmod, as `make modules_install` would.
    void use_staging_modprobe()
    {
        const std::string modroot = required_env("SDP_MODROOT");
        const std::string wrapper = "/tmp/sdp-modprobe";
        ASSERT_TRUE(
            write_file(wrapper, "#!/bin/sh\nexec /sbin/modprobe -d '" + modroot + "' \"$@\"\n"));
        ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
        ASSERT_TRUE(write_file(kModprobeSysctl, wrapper + "\n"));
    }

    void close_all()
    {
        for (const int fd : open_fds_)
            EXPECT_EQ(close(fd), 0);
        open_fds_.clear();
    }

    std::string module_path_;
    std::string saved_modprobe_;
    std::vector<int> open_fds_;
};

TEST_F(SdpModule, LoadRegistersFamilyAfterCoreSelfCheck)
{
    KmsgCapture kmsg;
    load();
    EXPECT_EQ(read_file("/sys/module/sdp/parameters/family").value_or(""), "27\n");
    // Logged only after the C++ core's known-answer self-check passed.
    EXPECT_TRUE(kmsg.contains("sdp: registered socket family 27"));
    EXPECT_GE(open_socket(AF_INET_SDP), 0) << strerror(errno);
}

TEST_F(SdpModule, StreamSocketLooksLikeTcp)
{
    load();
    for (const int protocol : {0, static_cast<int>(IPPROTO_TCP)}) {
        SCOPED_TRACE(protocol);
        const int sdp = open_socket(AF_INET_SDP, SOCK_STREAM, protocol);
        const int tcp = open_socket(AF_INET, SOCK_STREAM, protocol);
        ASSERT_GE(sdp, 0) << strerror(errno);
        ASSERT_GE(tcp, 0) << strerror(errno);
        EXPECT_EQ(int_sockopt(sdp, SO_TYPE), int_sockopt(tcp, SO_TYPE));
        EXPECT_EQ(int_sockopt(sdp, SO_PROTOCOL), int_sockopt(tcp, SO_PROTOCOL));
        EXPECT_EQ(int_sockopt(sdp, SO_DOMAIN), AF_INET_SDP);
    }
}

TEST_F(SdpModule, SocketTypeFlagsApply)
{
    load();
    const int fd = open_socket(AF_INET_SDP, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

TEST_F(SdpModule, SocketsAreCountedAndFreedOnClose)
{
    load();
    ASSERT_EQ(protocol_sockets_in_use("SDP"), 0);
    constexpr int kSockets = 1000;
    for (int i = 0; i < kSockets; i++)
        ASSERT_GE(open_socket(AF_INET_SDP), 0) << "socket " << i << ": " << strerror(errno);
    EXPECT_EQ(protocol_sockets_in_use("SDP"), kSockets);
    close_all();
    EXPECT_EQ(protocol_sockets_in_use("SDP"), 0);
    // Freed for real: nothing holds the module any more.
    EXPECT_EQ(unload_module(kModuleName), 0);
}

// What socket(AF_INET, type, protocol) returns on a kernel whose only
// AF_INET protocol is TCP: the family SDP models.  sdp.ko must answer this for
// every request.
int tcp_only_inet_errno(int type, int protocol)
{
    constexpr int kSockTypeMask = 0xf;
    if ((type & ~(kSockTypeMask | SOCK_NONBLOCK | SOCK_CLOEXEC)) != 0 ||
        (type & kSockTypeMask) >= 11 /* SOCK_MAX */)
        return EINVAL; // rejected by the socket layer before any family
    if (protocol < 0 || protocol >= 263 /* IPPROTO_MAX */)
        return EINVAL;
    if (type != SOCK_STREAM)
        return ESOCKTNOSUPPORT;
    if (protocol != 0 && protocol != IPPROTO_TCP)
        return EPROTONOSUPPORT;
    return 0;
}

constexpr int kSockPacket = 10; // AF_INET hands SOCK_PACKET to AF_PACKET

TEST_F(SdpModule, SocketErrorsMatchInet)
{
    // No module autoloading while probing AF_INET: every unknown protocol
    // would otherwise run modprobe twice, seconds each under TCG.
    ASSERT_TRUE(write_file(kModprobeSysctl, "\n"));
    load();
    const int types[] = {
        SOCK_STREAM, SOCK_DGRAM, SOCK_RAW,    SOCK_RDM, SOCK_SEQPACKET,     SOCK_DCCP, 7,
        8,           9,          kSockPacket, 11,       SOCK_STREAM | 0x100};
    const int protocols[] = {0,      IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, 262 /* MPTCP */,
                             253,    IPPROTO_RAW, 263,         -1,           1000,
                             INT_MAX};
    int compared_with_inet = 0;
    for (const int type : types) {
        for (const int protocol : protocols) {
            SCOPED_TRACE("type " + std::to_string(type) + " protocol " + std::to_string(protocol));
            const int sdp = socket_errno(AF_INET_SDP, type, protocol);
            EXPECT_EQ(sdp, tcp_only_inet_errno(type, protocol)) << strerror(sdp);

            // The real AF_INET must agree wherever its answer does not come
            // from a protocol SDP lacks (UDP, raw IP, SCTP, MPTCP...): bad
            // arguments, unknown types, and every stream request it refuses.
            const int inet = socket_errno(AF_INET, type, protocol);
            const bool inet_knows_nothing_more =
                type != kSockPacket &&
                (inet == EINVAL || inet == ESOCKTNOSUPPORT || (type == SOCK_STREAM && inet != 0));
            if (inet_knows_nothing_more) {
                EXPECT_EQ(sdp, inet) << "AF_INET: " << strerror(inet) << ", SDP: " << strerror(sdp);
                compared_with_inet++;
            }
        }
    }
    // The differential part must cover the failure paths, not only a few.
    EXPECT_GT(compared_with_inet, 60);
    EXPECT_EQ(protocol_sockets_in_use("SDP"), 0) << "a failed socket() leaked a sock";
}

TEST_F(SdpModule, UnloadRefusedWhileASocketIsOpen)
{
    load();
    const int fd = open_socket(AF_INET_SDP);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(unload_module(kModuleName), EWOULDBLOCK);
    EXPECT_TRUE(module_loaded(kModuleName));
    // The socket still works after the refused unload.
    EXPECT_EQ(int_sockopt(fd, SO_DOMAIN), AF_INET_SDP);
    close_all();
    EXPECT_EQ(unload_module(kModuleName), 0);
    EXPECT_FALSE(module_loaded(kModuleName));
    EXPECT_EQ(socket_errno(AF_INET_SDP, SOCK_STREAM, 0), EAFNOSUPPORT);
}

TEST_F(SdpModule, FamilyParameterIsHonoured)
{
    constexpr int kOtherFamily = 28; // AF_MPLS: a number with no socket family
    KmsgCapture kmsg;
    load("family=28");
    EXPECT_EQ(read_file("/sys/module/sdp/parameters/family").value_or(""), "28\n");
    EXPECT_TRUE(kmsg.contains("sdp: registered socket family 28"));
    const int fd = open_socket(kOtherFamily);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(int_sockopt(fd, SO_DOMAIN), kOtherFamily);
    EXPECT_EQ(socket_errno(AF_INET_SDP, SOCK_STREAM, 0), EAFNOSUPPORT);
    // Read-only once loaded: the registered family cannot change under it.
    EXPECT_FALSE(write_file("/sys/module/sdp/parameters/family", "27"));
}

int transport_policy(int fd)
{
    int value = -1;
    socklen_t len = sizeof(value);
    if (getsockopt(fd, SOL_SDP, SDP_TRANSPORT_POLICY, &value, &len) != 0)
        return -errno;
    return value;
}

// New sockets may fall back to TCP unless the host says otherwise: with the
// sysctl once loaded, or with the module parameter from the first socket on.
TEST_F(SdpModule, FallbackIsTheDefaultPolicyAndTheParameterSetsIt)
{
    constexpr const char* kSysctl = "/proc/sys/net/sdp/fallback";
    load();
    EXPECT_EQ(read_file(kSysctl).value_or(""), "1\n");
    const int fd = open_socket(AF_INET_SDP);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(transport_policy(fd), SDP_POLICY_FALLBACK);
    ASSERT_TRUE(write_file(kSysctl, "0"));
    const int sdp_only = open_socket(AF_INET_SDP);
    ASSERT_GE(sdp_only, 0) << strerror(errno);
    EXPECT_EQ(transport_policy(sdp_only), SDP_POLICY_SDP);
    EXPECT_EQ(transport_policy(fd), SDP_POLICY_FALLBACK) << "the sysctl changed a live socket";
    close_all();
    ASSERT_EQ(unload_module(kModuleName), 0);

    for (const char* params : {"fallback=0", "fallback=n"}) {
        SCOPED_TRACE(params);
        load(params);
        EXPECT_EQ(read_file(kSysctl).value_or(""), "0\n");
        EXPECT_EQ(read_file("/sys/module/sdp/parameters/fallback").value_or(""), "0\n");
        const int s = open_socket(AF_INET_SDP);
        ASSERT_GE(s, 0) << strerror(errno);
        EXPECT_EQ(transport_policy(s), SDP_POLICY_SDP);
        close_all();
        ASSERT_EQ(unload_module(kModuleName), 0);
    }
    KmsgCapture kmsg;
    EXPECT_EQ(load_module(module_path_, "fallback=2"), EINVAL);
    EXPECT_FALSE(module_loaded(kModuleName));
    EXPECT_TRUE(kmsg.contains("invalid for parameter `fallback'"));
}

TEST_F(SdpModule, BadFamilyParameterIsRejectedWithAReason)
{
    struct Case {
        const char* params;
        int expected_errno;
        const char* log;
    };
    const Case cases[] = {
        {"family=2", EEXIST, "family 2 is already registered"}, // AF_INET
        {"family=0", EINVAL, "family=0 is out of range"},
        {"family=-1", EINVAL, "family=-1 is out of range"},
        {"family=1000", EINVAL, "family=1000 is out of range"},
        {"family=abc", EINVAL, "invalid for parameter `family'"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.params);
        KmsgCapture kmsg;
        EXPECT_EQ(load_module(module_path_, c.params), c.expected_errno);
        EXPECT_FALSE(module_loaded(kModuleName));
        EXPECT_TRUE(kmsg.contains(c.log)) << "no kernel log line naming the problem";
    }
    // AF_INET itself is untouched.
    EXPECT_EQ(socket_errno(AF_INET, SOCK_STREAM, 0), 0);
}

TEST_F(SdpModule, SocketAutoloadsTheInstalledModule)
{
    use_staging_modprobe();

    ASSERT_FALSE(module_loaded(kModuleName));
    const int fd = open_socket(AF_INET_SDP);
    ASSERT_GE(fd, 0) << "autoload through net-pf-27 failed: " << strerror(errno);
    EXPECT_TRUE(module_loaded(kModuleName));
    EXPECT_EQ(int_sockopt(fd, SO_DOMAIN), AF_INET_SDP);
}

// ---- IPPROTO_SDP: SDP as a protocol of AF_INET and AF_INET6 ----------------

TEST_F(SdpModule, IpprotoSocketsAreInetSockets)
{
    KmsgCapture kmsg;
    load();
    EXPECT_EQ(read_file(SDP_IPPROTO_SYSFS_PATH).value_or(""), "257\n");
    EXPECT_TRUE(kmsg.contains("and protocol 257 of AF_INET and AF_INET6"));
    for (const int family : {AF_INET, AF_INET6}) {
        SCOPED_TRACE(family);
        const int fd = open_socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_SDP);
        ASSERT_GE(fd, 0) << strerror(errno);
        EXPECT_EQ(int_sockopt(fd, SO_DOMAIN), family);
        EXPECT_EQ(int_sockopt(fd, SO_PROTOCOL), IPPROTO_SDP);
        EXPECT_EQ(int_sockopt(fd, SO_TYPE), SOCK_STREAM);
        EXPECT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
        EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    }
    EXPECT_EQ(protocol_sockets_in_use("SDP"), 1);
    EXPECT_EQ(protocol_sockets_in_use("SDPv6"), 1);
    // The wildcard protocol still means TCP.
    const int tcp = open_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(tcp, 0) << strerror(errno);
    EXPECT_EQ(int_sockopt(tcp, SO_PROTOCOL), IPPROTO_TCP);
    EXPECT_EQ(unload_module(kModuleName), EWOULDBLOCK);
    close_all();
    EXPECT_EQ(protocol_sockets_in_use("SDP"), 0);
    EXPECT_EQ(protocol_sockets_in_use("SDPv6"), 0);
    EXPECT_EQ(unload_module(kModuleName), 0);
    // Gone with the module (autoload off): as on a kernel that never had it.
    ASSERT_TRUE(write_file(kModprobeSysctl, "\n"));
    EXPECT_EQ(socket_errno(AF_INET, SOCK_STREAM, IPPROTO_SDP), EPROTONOSUPPORT);
    EXPECT_EQ(socket_errno(AF_INET6, SOCK_STREAM, IPPROTO_SDP), EPROTONOSUPPORT);
    EXPECT_EQ(socket_errno(AF_INET, SOCK_STREAM, 0), 0);
}

struct AddrCase {
    const char* name;
    sockaddr_storage ss;
    socklen_t len;
};

std::vector<AddrCase> address_cases()
{
    std::vector<AddrCase> cases;
    auto add4 = [&](const char* name, sa_family_t fam, const char* ip, socklen_t len) {
        AddrCase c{name, {}, len};
        auto* a = reinterpret_cast<sockaddr_in*>(&c.ss);
        a->sin_family = fam;
        inet_pton(AF_INET, ip, &a->sin_addr);
        cases.push_back(c);
    };
    auto add6 = [&](const char* name, sa_family_t fam, const char* ip, socklen_t len) {
        AddrCase c{name, {}, len};
        auto* a = reinterpret_cast<sockaddr_in6*>(&c.ss);
        a->sin6_family = fam;
        inet_pton(AF_INET6, ip, &a->sin6_addr);
        cases.push_back(c);
    };
    add4("sockaddr_in any", AF_INET, "0.0.0.0", sizeof(sockaddr_in));
    add4("sockaddr_in short", AF_INET, "0.0.0.0", sizeof(sockaddr_in) - 1);
    add4("AF_UNSPEC any", AF_UNSPEC, "0.0.0.0", sizeof(sockaddr_in));
    add4("AF_UNSPEC loopback", AF_UNSPEC, "127.0.0.1", sizeof(sockaddr_in));
    add4("AF_UNIX", AF_UNIX, "0.0.0.0", sizeof(sockaddr_in));
    add6("sockaddr_in6 any", AF_INET6, "::", sizeof(sockaddr_in6));
    add6("sockaddr_in6 RFC 2133", AF_INET6, "::", 24);
    add6("sockaddr_in6 short", AF_INET6, "::", 23);
    add6("sockaddr_in6 v4-mapped", AF_INET6, "::ffff:127.0.0.1", sizeof(sockaddr_in6));
    add6("AF_INET in a long buffer", AF_INET, "::", sizeof(sockaddr_in6));
    add6("family only", AF_INET6, "::", sizeof(sa_family_t));
    return cases;
}

// An IPPROTO_SDP socket takes its family's addresses as TCP does, errno for
// errno: the address checks come before anything RDMA.
TEST_F(SdpModule, IpprotoAddressErrorsMatchTcp)
{
    load();
    int compared = 0;
    for (const int family : {AF_INET, AF_INET6}) {
        for (const AddrCase& c : address_cases()) {
            for (const bool bind_op : {true, false}) {
                SCOPED_TRACE(std::string(bind_op ? "bind " : "connect ") + c.name + " on " +
                             (family == AF_INET ? "AF_INET" : "AF_INET6"));
                auto op = [&](int protocol) {
                    const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK, protocol);
                    if (fd < 0)
                        return -1000 - errno;
                    const auto* sa = reinterpret_cast<const sockaddr*>(&c.ss);
                    const int rc = bind_op ? bind(fd, sa, c.len) : connect(fd, sa, c.len);
                    const int err = rc == 0 ? 0 : errno;
                    close(fd);
                    return err;
                };
                const int tcp = op(0);
                const int sdp = op(IPPROTO_SDP);
                if (tcp == EINVAL || tcp == EAFNOSUPPORT) {
                    EXPECT_EQ(sdp, tcp) << "TCP: " << strerror(tcp) << ", SDP: " << strerror(sdp);
                    compared++;
                } else if (bind_op) {
                    // TCP took the address: SDP may lack a device for it,
                    // not call it malformed.
                    EXPECT_NE(sdp, EINVAL) << "TCP: " << strerror(tcp);
                    EXPECT_NE(sdp, EAFNOSUPPORT) << "TCP: " << strerror(tcp);
                }
            }
        }
    }
    EXPECT_GE(compared, 12);
}

TEST_F(SdpModule, IpprotoParameterIsHonoured)
{
    ASSERT_TRUE(write_file(kModprobeSysctl, "\n"));
    load("ipproto=258");
    EXPECT_EQ(read_file(SDP_IPPROTO_SYSFS_PATH).value_or(""), "258\n");
    const int fd = open_socket(AF_INET6, SOCK_STREAM, 258);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(int_sockopt(fd, SO_PROTOCOL), 258);
    EXPECT_EQ(socket_errno(AF_INET, SOCK_STREAM, IPPROTO_SDP), EPROTONOSUPPORT);
    EXPECT_FALSE(write_file(SDP_IPPROTO_SYSFS_PATH, "257"));
    close_all();
    ASSERT_EQ(unload_module(kModuleName), 0);

    // 0: the family only.
    KmsgCapture kmsg;
    load("ipproto=0");
    EXPECT_TRUE(kmsg.contains("sdp: registered socket family 27"));
    EXPECT_FALSE(kmsg.contains("and protocol"));
    EXPECT_EQ(socket_errno(AF_INET, SOCK_STREAM, IPPROTO_SDP), EPROTONOSUPPORT);
    EXPECT_EQ(socket_errno(AF_INET_SDP, SOCK_STREAM, 0), 0);
}

TEST_F(SdpModule, BadIpprotoParameterIsRejectedWithAReason)
{
    struct Case {
        const char* params;
        const char* log;
    };
    const Case cases[] = {
        {"ipproto=6", "ipproto=6 is out of range or used by the kernel"},     // TCP
        {"ipproto=132", "ipproto=132 is out of range or used by the kernel"}, // SCTP
        {"ipproto=256", "ipproto=256 is out of range or used by the kernel"}, // SMC
        {"ipproto=262", "ipproto=262 is out of range or used by the kernel"}, // MPTCP
        {"ipproto=263", "ipproto=263 is out of range"},
        {"ipproto=-1", "ipproto=-1 is out of range"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.params);
        KmsgCapture kmsg;
        EXPECT_EQ(load_module(module_path_, c.params), EINVAL);
        EXPECT_FALSE(module_loaded(kModuleName));
        EXPECT_TRUE(kmsg.contains(c.log)) << "no kernel log line naming the problem";
    }
    // TCP is untouched.
    const int fd = open_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_EQ(int_sockopt(fd, SO_PROTOCOL), IPPROTO_TCP);
}

TEST_F(SdpModule, IpprotoSocketAutoloadsTheInstalledModule)
{
    use_staging_modprobe();

    ASSERT_FALSE(module_loaded(kModuleName));
    const int fd = open_socket(AF_INET6, SOCK_STREAM, IPPROTO_SDP);
    ASSERT_GE(fd, 0) << "autoload through net-pf-10-proto-257-type-1 failed: " << strerror(errno);
    EXPECT_TRUE(module_loaded(kModuleName));
    EXPECT_EQ(int_sockopt(fd, SO_PROTOCOL), IPPROTO_SDP);
}

} // namespace
} // namespace sdp::vmtest
