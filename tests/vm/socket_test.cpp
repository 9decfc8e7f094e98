// SPDX-License-Identifier: GPL-2.0
//
// sdp.ko in a real kernel: module load and unload, the `family` parameter,
// autoloading through the net-pf alias, socket creation and release, and
// socket() errors compared against AF_INET (TCP is the oracle).
//
// Runs as root inside the test VM (tests/vm/tier-socket.sh), which sets
// SDP_MODULE (the built sdp.ko) and SDP_MODROOT (a module root where sdp.ko
// is installed and indexed by depmod).
#include "uapi/sdp.h"
#include "vm_util.h"

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
    // Point the kernel's module loader at the staging root where sdp.ko is
    // installed and indexed by depmod, as `make modules_install` would.
    const std::string modroot = required_env("SDP_MODROOT");
    const std::string wrapper = "/tmp/sdp-modprobe";
    ASSERT_TRUE(
        write_file(wrapper, "#!/bin/sh\nexec /sbin/modprobe -d '" + modroot + "' \"$@\"\n"));
    ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
    ASSERT_TRUE(write_file(kModprobeSysctl, wrapper + "\n"));

    ASSERT_FALSE(module_loaded(kModuleName));
    const int fd = open_socket(AF_INET_SDP);
    ASSERT_GE(fd, 0) << "autoload through net-pf-27 failed: " << strerror(errno);
    EXPECT_TRUE(module_loaded(kModuleName));
    EXPECT_EQ(int_sockopt(fd, SO_DOMAIN), AF_INET_SDP);
}

} // namespace
} // namespace sdp::vmtest
