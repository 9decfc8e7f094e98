// SPDX-License-Identifier: GPL-2.0
//
// libsdp.conf: every rule form, first match wins, and every class of
// malformed input reported with its line and leaving no rule applied.
#include "sdp_conf.h"

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <netinet/in.h>
#include <string>
#include <unistd.h>

namespace {

struct Addr {
    sockaddr_storage ss{};
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&ss); }
};

Addr v4(const char* ip, int port)
{
    Addr a;
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(inet_pton(AF_INET, ip, &in->sin_addr), 1) << ip;
    return a;
}

Addr v6(const char* ip, int port)
{
    Addr a;
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1) << ip;
    return a;
}

class Conf : public ::testing::Test {
  protected:
    void SetUp() override
    {
        conf_ = std::make_unique<sdp_conf>();
        sdp_conf_init(conf_.get());
    }
    int parse(const std::string& text) { return sdp_conf_parse(conf_.get(), text.c_str()); }
    sdp_conf_use client(const char* prog, const Addr& a, int* line = nullptr)
    {
        return sdp_conf_match(conf_.get(), SDP_ROLE_CLIENT, prog, a.get(), line);
    }
    sdp_conf_use server(const char* prog, const Addr& a, int* line = nullptr)
    {
        return sdp_conf_match(conf_.get(), SDP_ROLE_SERVER, prog, a.get(), line);
    }
    std::string error() const { return conf_->error; }
    std::unique_ptr<sdp_conf> conf_;
};

TEST_F(Conf, EmptyAndCommentsHaveNoRule)
{
    ASSERT_EQ(parse("\n# a comment\n   \t\n# use sdp client * *:*\n"), 0) << error();
    EXPECT_EQ(conf_->nr_rules, 0);
    EXPECT_EQ(client("prog", v4("10.0.0.1", 80)), SDP_USE_NONE);
    EXPECT_EQ(conf_->log_level, SDP_LOG_ERROR);
    EXPECT_EQ(conf_->log_dest, SDP_LOG_STDERR);
}

TEST_F(Conf, EachUseAndRoleKeyword)
{
    ASSERT_EQ(parse("use sdp server * *:1\n"
                    "use tcp listen * *:2\n"
                    "use both client * *:3\n"
                    "USE Both Connect * *:4   # trailing comment\n"),
              0)
        << error();
    EXPECT_EQ(server("p", v4("1.2.3.4", 1)), SDP_USE_SDP);
    EXPECT_EQ(server("p", v4("1.2.3.4", 2)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("1.2.3.4", 3)), SDP_USE_BOTH);
    EXPECT_EQ(client("p", v4("1.2.3.4", 4)), SDP_USE_BOTH);
    // Roles are separate: a server rule says nothing about connect().
    EXPECT_EQ(client("p", v4("1.2.3.4", 1)), SDP_USE_NONE);
    EXPECT_EQ(server("p", v4("1.2.3.4", 3)), SDP_USE_NONE);
}

TEST_F(Conf, FirstMatchWinsAndReportsItsLine)
{
    ASSERT_EQ(parse("use tcp client * 10.0.0.5:*\n"
                    "use sdp client * 10.0.0.0/24:*\n"
                    "use both client * *:*\n"),
              0)
        << error();
    int line = 0;
    EXPECT_EQ(client("p", v4("10.0.0.5", 9), &line), SDP_USE_TCP);
    EXPECT_EQ(line, 1);
    EXPECT_EQ(client("p", v4("10.0.0.6", 9), &line), SDP_USE_SDP);
    EXPECT_EQ(line, 2);
    EXPECT_EQ(client("p", v4("10.0.1.6", 9), &line), SDP_USE_BOTH);
    EXPECT_EQ(line, 3);
}

TEST_F(Conf, ProgramGlobs)
{
    ASSERT_EQ(parse("use sdp client iperf* *:*\n"
                    "use tcp client ?ed[ia]s-* *:*\n"
                    "use both client * *:*\n"),
              0)
        << error();
    EXPECT_EQ(client("iperf3", v4("1.1.1.1", 1)), SDP_USE_SDP);
    EXPECT_EQ(client("redis-server", v4("1.1.1.1", 1)), SDP_USE_TCP);
    EXPECT_EQ(client("nginx", v4("1.1.1.1", 1)), SDP_USE_BOTH);
    EXPECT_TRUE(sdp_conf_program_may_use_sdp(conf_.get(), "nginx"));
}

TEST_F(Conf, ProgramWithOnlyTcpRulesNeverUsesSdp)
{
    ASSERT_EQ(
        parse("use tcp client curl *:*\nuse tcp server curl *:*\nuse sdp client iperf3 *:*\n"), 0)
        << error();
    EXPECT_FALSE(sdp_conf_program_may_use_sdp(conf_.get(), "curl"));
    EXPECT_FALSE(sdp_conf_program_may_use_sdp(conf_.get(), "wget"));
    EXPECT_TRUE(sdp_conf_program_may_use_sdp(conf_.get(), "iperf3"));
}

TEST_F(Conf, Ipv4AddressesPrefixesAndPorts)
{
    ASSERT_EQ(parse("use sdp client * 192.168.1.7\n"      // any port
                    "use sdp client * 10.1.0.0/16:5000\n" // one port
                    "use sdp client * 172.16.0.0/12:100-200\n"
                    "use sdp client * 0.0.0.0/0:7000-*\n"
                    "use tcp client * *:*\n"),
              0)
        << error();
    EXPECT_EQ(client("p", v4("192.168.1.7", 1)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("192.168.1.8", 1)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("10.1.255.3", 5000)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("10.1.255.3", 5001)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("10.2.0.1", 5000)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("172.31.255.255", 100)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("172.31.255.255", 200)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("172.32.0.0", 150)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("8.8.8.8", 65535)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("8.8.8.8", 6999)), SDP_USE_TCP);
}

TEST_F(Conf, Ipv4RulesMatchV4MappedIpv6)
{
    ASSERT_EQ(parse("use sdp client * 10.0.0.0/8:*\n"), 0) << error();
    EXPECT_EQ(client("p", v6("::ffff:10.9.8.7", 1)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v6("::ffff:11.9.8.7", 1)), SDP_USE_NONE);
    EXPECT_EQ(client("p", v6("fd00::1", 1)), SDP_USE_NONE);
}

TEST_F(Conf, Ipv6Forms)
{
    ASSERT_EQ(parse("use sdp client * [fd00::1]:80\n"
                    "use sdp client * [fd01::]/16:90-91\n"
                    "use sdp client * fe80::/10\n"
                    "use sdp client * [2001:db8::]/32\n"
                    "use sdp client * [::1]\n"),
              0)
        << error();
    EXPECT_EQ(client("p", v6("fd00::1", 80)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v6("fd00::1", 81)), SDP_USE_NONE);
    EXPECT_EQ(client("p", v6("fd01:ffff::9", 91)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v6("fd02::9", 91)), SDP_USE_NONE);
    EXPECT_EQ(client("p", v6("fe80::1234", 4)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v6("2001:db8:5::1", 4)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v6("::1", 4)), SDP_USE_SDP);
    // An IPv6 rule says nothing about IPv4 destinations.
    EXPECT_EQ(client("p", v4("127.0.0.1", 4)), SDP_USE_NONE);
}

TEST_F(Conf, WildcardAddressMatchesBothFamilies)
{
    ASSERT_EQ(parse("use both server * *:6379\n"), 0) << error();
    EXPECT_EQ(server("redis-server", v4("0.0.0.0", 6379)), SDP_USE_BOTH);
    EXPECT_EQ(server("redis-server", v6("::", 6379)), SDP_USE_BOTH);
    EXPECT_EQ(server("redis-server", v6("::", 6380)), SDP_USE_NONE);
}

TEST_F(Conf, PrefixBoundaries)
{
    ASSERT_EQ(parse("use sdp client * 10.0.0.128/25:*\nuse tcp client * 10.0.0.0/0:*\n"), 0)
        << error();
    EXPECT_EQ(client("p", v4("10.0.0.127", 1)), SDP_USE_TCP);
    EXPECT_EQ(client("p", v4("10.0.0.128", 1)), SDP_USE_SDP);
    EXPECT_EQ(client("p", v4("10.0.0.255", 1)), SDP_USE_SDP);
}

TEST_F(Conf, LogSettings)
{
    ASSERT_EQ(parse("log destination file /tmp/libsdp.log min-level 4\n"), 0) << error();
    EXPECT_EQ(conf_->log_dest, SDP_LOG_FILE);
    EXPECT_STREQ(conf_->log_path, "/tmp/libsdp.log");
    EXPECT_EQ(conf_->log_level, 4);
    ASSERT_EQ(parse("log min-level 1 destination syslog\n"), 0) << error();
    EXPECT_EQ(conf_->log_dest, SDP_LOG_SYSLOG);
    EXPECT_EQ(conf_->log_level, 1);
    ASSERT_EQ(parse("log destination stderr\n"), 0) << error();
    EXPECT_EQ(conf_->log_dest, SDP_LOG_STDERR);
}

struct Bad {
    const char* text;
    const char* error;
};

class Malformed : public Conf, public ::testing::WithParamInterface<Bad> {};

TEST_P(Malformed, IsReportedWithItsLineAndAppliesNoRule)
{
    const std::string text = std::string("use sdp client * *:*\n# fine so far\n") + GetParam().text;
    EXPECT_EQ(parse(text), -1);
    EXPECT_EQ(conf_->nr_rules, 0) << "a file that does not parse is not half applied";
    EXPECT_EQ(error().rfind("line 3: ", 0), 0U) << error();
    EXPECT_NE(error().find(GetParam().error), std::string::npos) << error();
    EXPECT_EQ(client("p", v4("1.2.3.4", 5)), SDP_USE_NONE);
}

INSTANTIATE_TEST_SUITE_P(
    EveryClass, Malformed,
    ::testing::Values(
        Bad{"frobnicate sdp\n", "unknown keyword 'frobnicate'"},
        Bad{"use\n", "needs sdp, tcp or both"}, Bad{"use udp client * *:*\n", "not 'udp'"},
        Bad{"use sdp\n", "missing role"}, Bad{"use sdp both * *:*\n", "role must be"},
        Bad{"use sdp client\n", "missing program"}, Bad{"use sdp client *\n", "missing address"},
        Bad{"use sdp client * 10.0.0.300:1\n", "bad address"},
        Bad{"use sdp client * 10.0.0.0/33:1\n", "bad address"},
        Bad{"use sdp client * 10.0.0.0/x:1\n", "bad address"},
        Bad{"use sdp client * 10.0.0.1:70000\n", "bad address"},
        Bad{"use sdp client * 10.0.0.1:20-10\n", "bad address"},
        Bad{"use sdp client * 10.0.0.1:-5\n", "bad address"},
        Bad{"use sdp client * 10.0.0.1:\n", "bad address"},
        Bad{"use sdp client * [fd00::1:80\n", "bad address"},
        Bad{"use sdp client * [fd00::1]x\n", "bad address"},
        Bad{"use sdp client * fd00::/129\n", "bad address"},
        Bad{"use sdp client * host.example:80\n", "bad address"},
        Bad{"use sdp client * *:* extra\n", "unexpected 'extra'"}, Bad{"log\n", "'log' needs"},
        Bad{"log destination\n", "destination needs"}, Bad{"log destination mail\n", "not 'mail'"},
        Bad{"log destination file\n", "needs a path"}, Bad{"log min-level 0\n", "min-level needs"},
        Bad{"log min-level 10\n", "min-level needs"}, Bad{"log verbosity 3\n", "not 'verbosity'"},
        Bad{"use sdp client * *:* a b c d e\n", "too many words"}));

TEST_F(Conf, OverlongLineAndNulAreMalformed)
{
    EXPECT_EQ(parse("use sdp client " + std::string(2000, 'x') + " *:*\n"), -1);
    EXPECT_NE(error().find("line 1: longer than"), std::string::npos) << error();
    // What parse() gets is a C string: it ends at a NUL (load() refuses
    // a file with one).
    const std::string with_nul = std::string("use sdp client * *:*\n") + '\0' + "garbage\n";
    EXPECT_EQ(sdp_conf_parse(conf_.get(), with_nul.c_str()), 0) << error();
    EXPECT_EQ(conf_->nr_rules, 1);
}

TEST_F(Conf, TooManyRules)
{
    std::string text;
    for (int i = 0; i <= SDP_CONF_MAX_RULES; i++)
        text += "use sdp client * *:" + std::to_string(i) + "\n";
    EXPECT_EQ(parse(text), -1);
    EXPECT_NE(error().find("line 257: more than 256 rules"), std::string::npos) << error();
}

TEST_F(Conf, LoadReadsAFileAndNamesItInErrors)
{
    char path[] = "/tmp/libsdp-conf-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string good = "use both client * *:*\n";
    ASSERT_EQ(write(fd, good.data(), good.size()), static_cast<ssize_t>(good.size()));
    EXPECT_EQ(sdp_conf_load(conf_.get(), path), 0) << error();
    EXPECT_EQ(conf_->nr_rules, 1);
    ASSERT_EQ(ftruncate(fd, 0), 0);
    ASSERT_EQ(pwrite(fd, "use x\n", 6, 0), 6);
    EXPECT_EQ(sdp_conf_load(conf_.get(), path), -1);
    EXPECT_NE(error().find(std::string(path) + ": line 1: "), std::string::npos) << error();
    const std::string binary("use\0", 4);
    ASSERT_EQ(pwrite(fd, binary.data(), binary.size(), 0), 4);
    EXPECT_EQ(sdp_conf_load(conf_.get(), path), -1);
    EXPECT_NE(error().find("NUL"), std::string::npos) << error();
    close(fd);
    unlink(path);
    EXPECT_EQ(sdp_conf_load(conf_.get(), path), -1);
    EXPECT_NE(error().find("cannot open"), std::string::npos) << error();
    EXPECT_EQ(sdp_conf_load(conf_.get(), "/tmp"), -1);
    EXPECT_NE(error().find("not a regular file"), std::string::npos) << error();
}

} // namespace
