// SPDX-License-Identifier: GPL-2.0
//
// sdpstat's parsing, formatting, command line and driver.  The /proc text is
// written by hand from the format in userlib/sdpstat/README.md (what the
// module promises), and the driver runs over a fake System so missing files,
// interval rates and the reporting schedule are checked without /proc or
// real time.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sdpstat_lib.h"

namespace sdp::sdpstat {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// The example of README.md, columns padded as the module pads them.
const char* const kSocketsExample =
    "  sl local_address                                 remote_address                         "
    "       st          tx_queue rx_queue uid   inode\n"
    "   0: 10.77.0.1:5001                               0.0.0.0:0                              "
    "       LISTEN      0        0        0     12345\n"
    "   1: 10.77.0.1:5001                               10.77.0.2:40312                        "
    "       ESTABLISHED 0        1024     1000  12350\n"
    "   2: [fd77::1]:6000                               [fd77::2]:51000                        "
    "       CLOSE_WAIT  12       0        0     12351\n";

// /proc/net/sdpinfo for the sockets of kSocketsExample, as the module
// writes it (the listener all zeros, 12350 with an offer out, 12351 not
// listed).
const char* const kInfoExample =
    "inode rx_bufs rx_base rx_size rx_trim tx_bufs tx_size seg_max src src_offers src_len "
    "src_acked rsa_offers rsa_left rsa_reading sink sink_count sink_written peer_sinks "
    "peer_adverts\n"
    "12345 0 0 0 0 0 0 0 - 0 0 0 0 0 0 - 0 0 0 0\n"
    "12350 8 8 2048 0 8 2048 2032 active 1 1048576 0 0 0 0 - 0 0 0 4\n";

const char* const kCountersExample = "tx_hello 3\n"
                                     "rx_hello_ack 3\n"
                                     "tx_data 1500\n"
                                     "rx_data 1498\n"
                                     "tx_bytes 1048576\n"
                                     "rx_bytes 1048576\n"
                                     "credit_stalls 4\n"
                                     "conn_err_refused 1\n";

std::string Header()
{
    return "  sl local_address remote_address st tx_queue rx_queue uid inode\n";
}

// The errors of a parse as "line: message" strings, easy to compare.
std::vector<std::string> Errors(const std::vector<LineError>& errors)
{
    std::vector<std::string> out;
    out.reserve(errors.size());
    for (const LineError& e : errors)
        out.push_back(std::to_string(e.line) + ": " + e.message);
    return out;
}

Socket MakeSocket(std::uint64_t sl, const std::string& local, const std::string& remote,
                  const std::string& state, std::uint64_t tx, std::uint64_t rx, std::uint32_t uid,
                  std::uint64_t inode)
{
    Socket s;
    s.sl = sl;
    s.local = parse_endpoint(local).value();
    s.remote = parse_endpoint(remote).value();
    s.state = state;
    s.tx_queue = tx;
    s.rx_queue = rx;
    s.uid = uid;
    s.inode = inode;
    return s;
}

// --- numbers and addresses --------------------------------------------------------

TEST(ParseU64, DecimalUpToTheMaximum)
{
    EXPECT_EQ(parse_u64("0"), 0U);
    EXPECT_EQ(parse_u64("1048576"), 1048576U);
    EXPECT_EQ(parse_u64("007"), 7U);
    EXPECT_EQ(parse_u64("18446744073709551615"), kU64Max);
}

TEST(ParseU64, RejectsOverflowSignsAndJunk)
{
    for (const char* text : {"", "18446744073709551616", "99999999999999999999", "-1", "+1", " 1",
                             "1 ", "0x10", "1e3", "12a", "1.0"}) {
        EXPECT_FALSE(parse_u64(text).has_value()) << text;
    }
}

TEST(ParseEndpoint, Ipv4)
{
    const std::optional<Endpoint> ep = parse_endpoint("10.77.0.1:5001");
    ASSERT_TRUE(ep.has_value());
    EXPECT_FALSE(ep->ipv6);
    EXPECT_EQ(ep->address, "10.77.0.1");
    EXPECT_EQ(ep->port, 5001);
    EXPECT_EQ(format_endpoint(*ep), "10.77.0.1:5001");

    const std::optional<Endpoint> any = parse_endpoint("0.0.0.0:0");
    ASSERT_TRUE(any.has_value());
    EXPECT_EQ(any->port, 0);
    EXPECT_EQ(parse_endpoint("255.255.255.255:65535").value().port, 65535);
}

TEST(ParseEndpoint, Ipv6InBrackets)
{
    const std::optional<Endpoint> ep = parse_endpoint("[fd77::1]:6000");
    ASSERT_TRUE(ep.has_value());
    EXPECT_TRUE(ep->ipv6);
    EXPECT_EQ(ep->address, "fd77::1");
    EXPECT_EQ(ep->port, 6000);
    EXPECT_EQ(format_endpoint(*ep), "[fd77::1]:6000");

    for (const char* text : {"[::]:0", "[::1]:1", "[2001:db8:0:1:2:3:4:5]:65535",
                             "[::ffff:10.77.0.1]:5001", "[fe80::1%rxe0]:5001"}) {
        const std::optional<Endpoint> parsed = parse_endpoint(text);
        ASSERT_TRUE(parsed.has_value()) << text;
        EXPECT_TRUE(parsed->ipv6) << text;
        EXPECT_EQ(format_endpoint(*parsed), text);
    }
}

TEST(ParseEndpoint, RejectsMalformed)
{
    for (const char* text : {"",
                             "10.77.0.1",
                             "10.77.0.1:",
                             "10.77.0.1:65536",
                             "10.77.0.1:-1",
                             "10.77.0.256:1",
                             "10.77.0:1",
                             "host:80",
                             ":80",
                             "fd77::1:6000",
                             "[fd77::1]",
                             "[fd77::1]:",
                             "[fd77::1]6000",
                             "[fd77::1:6000",
                             "[]:1",
                             "[zz::1]:1",
                             "[10.77.0.1]:1",
                             "[fe80::1%]:1",
                             "[fe80::1%a b]:1",
                             "[fd77::1]:0x10"}) {
        EXPECT_FALSE(parse_endpoint(text).has_value()) << text;
    }
}

// --- /proc/net/sdp ------------------------------------------------------------------

TEST(ParseSockets, TheDocumentedExample)
{
    const SocketTable table = parse_sockets(kSocketsExample);
    EXPECT_EQ(Errors(table.errors), std::vector<std::string>{});
    ASSERT_EQ(table.sockets.size(), 3U);

    const Socket& listen = table.sockets[0];
    EXPECT_EQ(listen.sl, 0U);
    EXPECT_EQ(format_endpoint(listen.local), "10.77.0.1:5001");
    EXPECT_EQ(format_endpoint(listen.remote), "0.0.0.0:0");
    EXPECT_EQ(listen.state, "LISTEN");
    EXPECT_EQ(listen.inode, 12345U);

    const Socket& established = table.sockets[1];
    EXPECT_EQ(established.sl, 1U);
    EXPECT_EQ(established.remote.address, "10.77.0.2");
    EXPECT_EQ(established.remote.port, 40312);
    EXPECT_EQ(established.state, "ESTABLISHED");
    EXPECT_EQ(established.tx_queue, 0U);
    EXPECT_EQ(established.rx_queue, 1024U);
    EXPECT_EQ(established.uid, 1000U);
    EXPECT_EQ(established.inode, 12350U);

    const Socket& v6 = table.sockets[2];
    EXPECT_TRUE(v6.local.ipv6);
    EXPECT_EQ(v6.local.address, "fd77::1");
    EXPECT_EQ(v6.remote.address, "fd77::2");
    EXPECT_EQ(v6.remote.port, 51000);
    EXPECT_EQ(v6.state, "CLOSE_WAIT");
    EXPECT_EQ(v6.tx_queue, 12U);
}

TEST(ParseSockets, EveryTcpStateAndTabsAndCarriageReturns)
{
    std::string text = Header();
    const char* const states[] = {"ESTABLISHED", "SYN_SENT",  "SYN_RECV", "FIN_WAIT1",
                                  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",    "CLOSE_WAIT",
                                  "LAST_ACK",    "LISTEN",    "CLOSING"};
    int sl = 0;
    for (const char* state : states) {
        text += "\t" + std::to_string(sl++) + ":\t1.2.3.4:1 5.6.7.8:2\t" + state + " 0 0 0 1\r\n";
    }
    const SocketTable table = parse_sockets(text);
    EXPECT_EQ(Errors(table.errors), std::vector<std::string>{});
    ASSERT_EQ(table.sockets.size(), std::size(states));
    for (std::size_t i = 0; i < std::size(states); i++)
        EXPECT_EQ(table.sockets[i].state, states[i]);
}

TEST(ParseSockets, HugeValues)
{
    const SocketTable table =
        parse_sockets(Header() + "18446744073709551615: 1.2.3.4:1 5.6.7.8:2 ESTABLISHED "
                                 "18446744073709551615 18446744073709551615 4294967295 "
                                 "18446744073709551615\n");
    EXPECT_EQ(Errors(table.errors), std::vector<std::string>{});
    ASSERT_EQ(table.sockets.size(), 1U);
    EXPECT_EQ(table.sockets[0].sl, kU64Max);
    EXPECT_EQ(table.sockets[0].tx_queue, kU64Max);
    EXPECT_EQ(table.sockets[0].rx_queue, kU64Max);
    EXPECT_EQ(table.sockets[0].uid, 4294967295U);
    EXPECT_EQ(table.sockets[0].inode, kU64Max);
}

TEST(ParseSockets, BlankLinesSkippedExtraColumnsIgnored)
{
    const SocketTable table = parse_sockets(
        Header() + "\n   \n" + "0: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7 extra 42\n" + "\n");
    EXPECT_EQ(Errors(table.errors), std::vector<std::string>{});
    ASSERT_EQ(table.sockets.size(), 1U);
    EXPECT_EQ(table.sockets[0].inode, 7U);
}

TEST(ParseSockets, AWellFormedUnknownStateIsKept)
{
    // Room for states the module may report that TCP also has (NEW_SYN_RECV).
    const SocketTable table =
        parse_sockets(Header() + "0: 1.2.3.4:1 5.6.7.8:2 NEW_SYN_RECV 0 0 0 7\n");
    EXPECT_EQ(Errors(table.errors), std::vector<std::string>{});
    ASSERT_EQ(table.sockets.size(), 1U);
    EXPECT_EQ(table.sockets[0].state, "NEW_SYN_RECV");
}

TEST(ParseSockets, MalformedLinesAreReportedAndTheRestKept)
{
    const std::string text = Header() +                                                      // 1
                             "0: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7\n" +                     // 2
                             "1: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0\n" +                       // 3
                             "2 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7\n" +                      // 4
                             "x: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7\n" +                     // 5
                             "3: 1.2.3.400:1 5.6.7.8:2 LISTEN 0 0 0 7\n" +                   // 6
                             "4: 1.2.3.4:1 [fd77::1]:99999 LISTEN 0 0 0 7\n" +               // 7
                             "5: 1.2.3.4:1 5.6.7.8:2 listen 0 0 0 7\n" +                     // 8
                             "6: 1.2.3.4:1 5.6.7.8:2 10 0 0 0 7\n" +                         // 9
                             "7: 1.2.3.4:1 5.6.7.8:2 LISTEN -1 0 0 7\n" +                    // 10
                             "8: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0x10 0 7\n" +                  // 11
                             "9: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 4294967296 7\n" +            // 12
                             "10: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 18446744073709551616\n" + // 13
                             "11: 1.2.3.4:1 5.6.7.8:2 CLOSE 0 0 0 8\n";                      // 14
    const SocketTable table = parse_sockets(text);
    const std::string columns =
        "expected 8 columns (sl local_address remote_address st tx_queue rx_queue uid inode)";
    const std::vector<std::string> expected = {
        "3: " + columns + ", found 7",
        "4: bad sl \"2\": expected a number and ':'",
        "5: bad sl \"x:\": expected a number and ':'",
        "6: bad local_address \"1.2.3.400:1\": expected a.b.c.d:port or [ipv6]:port",
        "7: bad remote_address \"[fd77::1]:99999\": expected a.b.c.d:port or [ipv6]:port",
        "8: bad st \"listen\": expected a state name such as ESTABLISHED",
        "9: bad st \"10\": expected a state name such as ESTABLISHED",
        "10: bad tx_queue \"-1\": expected an unsigned 64-bit decimal",
        "11: bad rx_queue \"0x10\": expected an unsigned 64-bit decimal",
        "12: bad uid \"4294967296\": expected an unsigned 32-bit decimal",
        "13: bad inode \"18446744073709551616\": expected an unsigned 64-bit decimal",
    };
    EXPECT_EQ(Errors(table.errors), expected);
    ASSERT_EQ(table.sockets.size(), 2U);
    EXPECT_EQ(table.sockets[0].inode, 7U);
    EXPECT_EQ(table.sockets[1].inode, 8U);
}

TEST(ParseSockets, HeaderIsRequired)
{
    SocketTable table = parse_sockets("");
    EXPECT_EQ(Errors(table.errors),
              std::vector<std::string>{"1: missing the header line (\"sl local_address ...\")"});

    table = parse_sockets("\n\n");
    EXPECT_EQ(Errors(table.errors),
              std::vector<std::string>{"3: missing the header line (\"sl local_address ...\")"});

    // A first line that is not the header is reported and not used; the
    // sockets after it still are.
    table = parse_sockets("0: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7\n"
                          "1: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 8\n");
    EXPECT_EQ(Errors(table.errors),
              std::vector<std::string>{"1: expected the header line (\"sl local_address ...\")"});
    ASSERT_EQ(table.sockets.size(), 1U);
    EXPECT_EQ(table.sockets[0].inode, 8U);

    // Header only: no sockets, no errors.
    table = parse_sockets(Header());
    EXPECT_TRUE(table.errors.empty());
    EXPECT_TRUE(table.sockets.empty());
}

TEST(ParseSockets, ControlBytesInErrorsAreEscapedAndLongTokensCut)
{
    const SocketTable table =
        parse_sockets(Header() + "0: 1.2.3.4:1 5.6.7.8:2 LI\x1bST 0 0 0 7\n" +
                      "1: " + std::string(100, 'a') + " 5.6.7.8:2 LISTEN 0 0 0 7\n");
    const std::vector<std::string> expected = {
        "2: bad st \"LI\\x1bST\": expected a state name such as ESTABLISHED",
        "3: bad local_address \"" + std::string(64, 'a') +
            "...\": expected a.b.c.d:port or [ipv6]:port",
    };
    EXPECT_EQ(Errors(table.errors), expected);
}

// --- /proc/net/sdpstats ----------------------------------------------------------------

TEST(ParseCounters, TheDocumentedExampleInFileOrder)
{
    const CounterSet set = parse_counters(kCountersExample);
    EXPECT_TRUE(set.errors.empty());
    ASSERT_EQ(set.counters.size(), 8U);
    EXPECT_EQ(set.counters[0].name, "tx_hello");
    EXPECT_EQ(set.counters[0].value, 3U);
    EXPECT_EQ(set.counters[4].name, "tx_bytes");
    EXPECT_EQ(set.counters[4].value, 1048576U);
    EXPECT_EQ(set.counters[7].name, "conn_err_refused");
    EXPECT_EQ(set.counters[7].value, 1U);
}

TEST(ParseCounters, UnknownNamesAreKept)
{
    const CounterSet set = parse_counters("zcopy_fallbacks 2\ntx_hello 1\nrx_mode_change 0\n");
    EXPECT_TRUE(set.errors.empty());
    ASSERT_EQ(set.counters.size(), 3U);
    EXPECT_EQ(set.counters[0].name, "zcopy_fallbacks");
    EXPECT_EQ(set.counters[2].name, "rx_mode_change");
}

TEST(ParseCounters, HugeValuesAndLooseWhitespace)
{
    const CounterSet set =
        parse_counters("tx_bytes 18446744073709551615\n\n  rx_bytes\t\t7  \r\nlast 1");
    EXPECT_TRUE(set.errors.empty());
    ASSERT_EQ(set.counters.size(), 3U);
    EXPECT_EQ(set.counters[0].value, kU64Max);
    EXPECT_EQ(set.counters[1].name, "rx_bytes");
    EXPECT_EQ(set.counters[1].value, 7U);
    EXPECT_EQ(set.counters[2].name, "last"); // no final newline
}

TEST(ParseCounters, MalformedLinesAreReportedAndTheRestKept)
{
    const CounterSet set = parse_counters("tx_hello 3\n"                    // 1
                                          "tx_data\n"                       // 2
                                          "tx_data 1 2\n"                   // 3
                                          "tx_bytes 18446744073709551616\n" // 4
                                          "rx_bytes -1\n"                   // 5
                                          "credit_stalls 4k\n"              // 6
                                          "Credit_Stalls 4\n"               // 7
                                          "2nd_try 1\n"                     // 8
                                          "tx-data 1\n"                     // 9
                                          "tx_hello 4\n"                    // 10
                                          "rx_data 9\n");                   // 11
    const std::string u64 = "expected an unsigned 64-bit decimal";
    const std::vector<std::string> expected = {
        "2: expected \"name value\", found 1 columns",
        "3: expected \"name value\", found 3 columns",
        "4: bad value \"18446744073709551616\" for tx_bytes: " + u64,
        "5: bad value \"-1\" for rx_bytes: " + u64,
        "6: bad value \"4k\" for credit_stalls: " + u64,
        "7: bad counter name \"Credit_Stalls\": expected a lowercase identifier",
        "8: bad counter name \"2nd_try\": expected a lowercase identifier",
        "9: bad counter name \"tx-data\": expected a lowercase identifier",
        "10: duplicate counter tx_hello (first on line 1)",
    };
    EXPECT_EQ(Errors(set.errors), expected);
    ASSERT_EQ(set.counters.size(), 2U);
    EXPECT_EQ(set.counters[0].value, 3U); // the first tx_hello wins
    EXPECT_EQ(set.counters[1].name, "rx_data");
}

TEST(ParseCounters, EmptyFileHasNoCounters)
{
    const CounterSet set = parse_counters("");
    EXPECT_TRUE(set.errors.empty());
    EXPECT_TRUE(set.counters.empty());
}

// --- groups -----------------------------------------------------------------------------

TEST(Classify, Groups)
{
    for (const std::string_view msg : message_names()) {
        EXPECT_EQ(classify("tx_" + std::string(msg)), Group::kMessage) << msg;
        EXPECT_EQ(classify("rx_" + std::string(msg)), Group::kMessage) << msg;
    }
    for (const char* name : {"tx_bytes", "rx_bytes", "tx_inline", "credit_updates", "credit_stalls",
                             "nagle_holds", "cpu_copy_bytes"}) {
        EXPECT_EQ(classify(name), Group::kDataPath) << name;
    }
    for (const char* name : {"zcopy_tx_bytes", "zcopy_fallback_memlock", "zcopy_rdma_reads"})
        EXPECT_EQ(classify(name), Group::kZeroCopy) << name;
    for (const char* name : {"conn_err_refused", "conn_active_open", "conn_err_timeout"})
        EXPECT_EQ(classify(name), Group::kConnection) << name;
    for (const char* name : {"tx_mode_change", "rx_", "tx_datax", "zcopy", "hello", "rx_inline",
                             "connections", "credit_stall"}) {
        EXPECT_EQ(classify(name), Group::kOther) << name;
    }
    EXPECT_EQ(message_names().size(), 15U);
}

// --- text output ---------------------------------------------------------------------------

TEST(FormatSockets, AlignedColumnsRecvQIsRxQueue)
{
    const std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    EXPECT_EQ(format_sockets(sockets, false),
              "State        Recv-Q  Send-Q  Local Address:Port  Peer Address:Port   uid  inode\n"
              "LISTEN            0       0  10.77.0.1:5001      0.0.0.0:0             0  12345\n"
              "ESTABLISHED    1024       0  10.77.0.1:5001      10.77.0.2:40312    1000  12350\n"
              "CLOSE_WAIT        0      12  [fd77::1]:6000      [fd77::2]:51000       0  12351\n");
}

TEST(FormatSockets, ListeningOnlyAndEmpty)
{
    const std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    EXPECT_EQ(format_sockets(sockets, true),
              "State   Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  uid  inode\n"
              "LISTEN       0       0  10.77.0.1:5001      0.0.0.0:0            0  12345\n");
    const std::string header =
        "State  Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  uid  inode\n";
    EXPECT_EQ(format_sockets({}, false), header);
    EXPECT_EQ(format_sockets({sockets[1]}, true), header);
}

TEST(FormatSockets, WideValuesWidenTheirColumn)
{
    const std::vector<Socket> sockets = {
        MakeSocket(0, "[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65535", "[::]:0", "LISTEN", 0,
                   kU64Max, 4294967295U, kU64Max),
    };
    EXPECT_EQ(
        format_sockets(sockets, false),
        "State                 Recv-Q  Send-Q  Local Address:Port                              "
        "Peer Address:Port         uid                 inode\n"
        "LISTEN  18446744073709551615       0  [2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65535  "
        "[::]:0             4294967295  18446744073709551615\n");
}

TEST(ParseInfo, ColumnsByTheHeadersNames)
{
    const InfoTable t = parse_info(kInfoExample);
    EXPECT_TRUE(t.errors.empty());
    ASSERT_EQ(t.rows.size(), 2U);
    EXPECT_EQ(t.rows[0].inode, 12345U);
    EXPECT_EQ(t.rows[1].inode, 12350U);
    ASSERT_EQ(t.rows[1].fields.size(), 19U);
    EXPECT_EQ(t.rows[1].fields[0].name, "rx_bufs");
    EXPECT_EQ(t.rows[1].fields[0].value, "8");
    EXPECT_EQ(t.rows[1].fields[7].name, "src");
    EXPECT_EQ(t.rows[1].fields[7].value, "active");
    // A column the tool does not know is taken as it comes.
    const InfoTable more = parse_info("inode rx_bufs new_one\n7 4 x\n");
    ASSERT_EQ(more.rows.size(), 1U);
    EXPECT_EQ(more.rows[0].fields[1].name, "new_one");
}

TEST(ParseInfo, MalformedLinesAreReportedAndTheRestKept)
{
    const InfoTable t = parse_info("inode a b\n1 2 3\n2 3\nx 1 2\n\n4 5 6\n");
    ASSERT_EQ(t.rows.size(), 2U);
    EXPECT_EQ(t.rows[1].inode, 4U);
    ASSERT_EQ(t.errors.size(), 2U);
    EXPECT_EQ(t.errors[0].line, 3U);
    EXPECT_EQ(t.errors[1].line, 4U);
    EXPECT_EQ(parse_info("rx_bufs 1\n1 2\n").errors.size(), 2U) << "no header";
    EXPECT_EQ(parse_info("").errors.size(), 1U);
}

TEST(FormatSockets, ExtendedAddsEachSocketsNonzeroInfo)
{
    std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    attach_info(&sockets, parse_info(kInfoExample).rows);
    EXPECT_TRUE(sockets[0].info.size() == 19U && sockets[2].info.empty());
    EXPECT_EQ(format_sockets(sockets, false),
              "State        Recv-Q  Send-Q  Local Address:Port  Peer Address:Port   uid  inode\n"
              "LISTEN            0       0  10.77.0.1:5001      0.0.0.0:0             0  12345\n"
              "ESTABLISHED    1024       0  10.77.0.1:5001      10.77.0.2:40312    1000  12350\n"
              "    rx_bufs:8 rx_base:8 rx_size:2048 tx_bufs:8 tx_size:2048 seg_max:2032 "
              "src:active src_offers:1 src_len:1048576 peer_adverts:4\n"
              "CLOSE_WAIT        0      12  [fd77::1]:6000      [fd77::2]:51000       0  12351\n");
}

TEST(FormatCounters, GroupsNonzeroOnly)
{
    const CounterSet set = parse_counters(std::string(kCountersExample) +
                                          "rx_hello 0\nnagle_holds 0\nzcopy_fallbacks 2\n"
                                          "tx_mode_change 0\nconn_active_open 0\n");
    EXPECT_EQ(format_counters(set.counters, false), "Messages       tx    rx\n"
                                                    "  hello         3     0\n"
                                                    "  hello_ack     -     3\n"
                                                    "  data       1500  1498\n"
                                                    "\n"
                                                    "Data path\n"
                                                    "  tx_bytes       1048576\n"
                                                    "  rx_bytes       1048576\n"
                                                    "  credit_stalls        4\n"
                                                    "\n"
                                                    "Zero copy\n"
                                                    "  zcopy_fallbacks  2\n"
                                                    "\n"
                                                    "Connections\n"
                                                    "  conn_err_refused  1\n");
}

TEST(FormatCounters, AllIncludesZerosMessagesInProtocolOrder)
{
    // File order does not matter for the messages table; it does elsewhere.
    const CounterSet set = parse_counters("rx_data 0\ntx_hello 0\nrx_disconn 0\nnagle_holds 0\n"
                                          "tx_bytes 0\nz_last 0\na_first 0\n");
    EXPECT_EQ(format_counters(set.counters, true), "Messages   tx  rx\n"
                                                   "  hello     0   -\n"
                                                   "  disconn   -   0\n"
                                                   "  data      -   0\n"
                                                   "\n"
                                                   "Data path\n"
                                                   "  nagle_holds  0\n"
                                                   "  tx_bytes     0\n"
                                                   "\n"
                                                   "Other\n"
                                                   "  z_last   0\n"
                                                   "  a_first  0\n");
}

TEST(FormatCounters, NothingToShow)
{
    EXPECT_EQ(format_counters({}, false), "No counters\n");
    EXPECT_EQ(format_counters({}, true), "No counters\n");
    const CounterSet zeros = parse_counters("tx_hello 0\nconn_err_refused 0\n");
    EXPECT_EQ(format_counters(zeros.counters, false), "No nonzero counters (-a shows all)\n");
}

TEST(FormatCounters, HugeValues)
{
    const CounterSet set =
        parse_counters("tx_data 18446744073709551615\nrx_data 1\nrx_bytes 18446744073709551615\n");
    EXPECT_EQ(format_counters(set.counters, false), "Messages                    tx  rx\n"
                                                    "  data    18446744073709551615   1\n"
                                                    "\n"
                                                    "Data path\n"
                                                    "  rx_bytes  18446744073709551615\n");
}

// --- rates -----------------------------------------------------------------------------------

TEST(ComputeRates, DeltaPerSecondResetsAndNewCounters)
{
    const std::vector<Counter> before = {{"tx_data", 100}, {"rx_data", 50}, {"conn_x", 900}};
    const std::vector<Counter> after = {
        {"tx_data", 300}, {"rx_data", 50}, {"conn_x", 20}, {"new_one", 7}};
    const std::vector<Rate> rates = compute_rates(before, after, 2.0);
    ASSERT_EQ(rates.size(), 3U);
    EXPECT_EQ(rates[0].name, "tx_data");
    EXPECT_EQ(rates[0].delta, 200U);
    EXPECT_DOUBLE_EQ(rates[0].per_second, 100.0);
    EXPECT_EQ(rates[1].delta, 0U);
    EXPECT_DOUBLE_EQ(rates[1].per_second, 0.0);
    // Went down: the module was reloaded, counting restarted from zero.
    EXPECT_EQ(rates[2].name, "conn_x");
    EXPECT_EQ(rates[2].delta, 20U);
    EXPECT_DOUBLE_EQ(rates[2].per_second, 10.0);
}

TEST(ComputeRates, FullRangeDelta)
{
    const std::vector<Rate> rates = compute_rates({{"tx_bytes", 0}}, {{"tx_bytes", kU64Max}}, 0.5);
    ASSERT_EQ(rates.size(), 1U);
    EXPECT_EQ(rates[0].delta, kU64Max);
    EXPECT_DOUBLE_EQ(rates[0].per_second, 2.0 * static_cast<double>(kU64Max));
}

TEST(FormatRates, GroupedWithOneDecimal)
{
    const std::vector<Rate> rates = compute_rates(
        {{"tx_data", 0}, {"rx_data", 0}, {"tx_bytes", 0}, {"credit_stalls", 5}, {"other", 1}},
        {{"tx_data", 3}, {"rx_data", 0}, {"tx_bytes", 3000}, {"credit_stalls", 5}, {"other", 2}},
        2.0);
    EXPECT_EQ(format_rates(rates, false, 7), "Interval 7, per second\n"
                                             "Messages  tx/s  rx/s\n"
                                             "  data     1.5   0.0\n"
                                             "\n"
                                             "Data path\n"
                                             "  tx_bytes  1500.0\n"
                                             "\n"
                                             "Other\n"
                                             "  other  0.5\n");
    EXPECT_EQ(format_rates(rates, true, 1), "Interval 1, per second\n"
                                            "Messages  tx/s  rx/s\n"
                                            "  data     1.5   0.0\n"
                                            "\n"
                                            "Data path\n"
                                            "  tx_bytes       1500.0\n"
                                            "  credit_stalls     0.0\n"
                                            "\n"
                                            "Other\n"
                                            "  other  0.5\n");
}

TEST(FormatRates, NothingChanged)
{
    const std::vector<Rate> rates = compute_rates({{"tx_data", 4}}, {{"tx_data", 4}}, 1.0);
    EXPECT_EQ(format_rates(rates, false, 2), "Interval 2, per second\nNo counter changed\n");
    EXPECT_EQ(format_rates({}, false, 1), "Interval 1, per second\nNo counters\n");
}

// --- JSON ------------------------------------------------------------------------------------

TEST(FormatJson, SocketsAndCounters)
{
    const std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    const std::vector<Counter> counters = {{"tx_hello", 3}, {"zcopy", kU64Max}, {"rx_data", 0}};
    const std::string socket0 =
        "{\"sl\": 0, \"state\": \"LISTEN\", \"family\": \"inet\", \"local_address\": "
        "\"10.77.0.1\", \"local_port\": 5001, \"remote_address\": \"0.0.0.0\", "
        "\"remote_port\": 0, \"tx_queue\": 0, \"rx_queue\": 0, \"uid\": 0, \"inode\": 12345}";
    const std::string socket2 =
        "{\"sl\": 2, \"state\": \"CLOSE_WAIT\", \"family\": \"inet6\", \"local_address\": "
        "\"fd77::1\", \"local_port\": 6000, \"remote_address\": \"fd77::2\", "
        "\"remote_port\": 51000, \"tx_queue\": 12, \"rx_queue\": 0, \"uid\": 0, "
        "\"inode\": 12351}";
    EXPECT_EQ(format_json(&sockets, true, &counters), "{\n"
                                                      "  \"sockets\": [\n"
                                                      "    " +
                                                          socket0 +
                                                          "\n"
                                                          "  ],\n"
                                                          "  \"counters\": {\n"
                                                          "    \"tx_hello\": 3,\n"
                                                          "    \"zcopy\": 18446744073709551615,\n"
                                                          "    \"rx_data\": 0\n"
                                                          "  }\n"
                                                          "}\n");
    const std::string all = format_json(&sockets, false, nullptr);
    EXPECT_EQ(all.find("\"counters\""), std::string::npos);
    EXPECT_NE(all.find(socket2 + "\n  ]\n}\n"), std::string::npos) << all;
}

TEST(FormatJson, EmptyAndCountersOnly)
{
    const std::vector<Socket> no_sockets;
    const std::vector<Counter> no_counters;
    EXPECT_EQ(format_json(&no_sockets, false, &no_counters),
              "{\n  \"sockets\": [],\n  \"counters\": {}\n}\n");
    const std::vector<Counter> counters = {{"a", 1}};
    EXPECT_EQ(format_json(nullptr, false, &counters),
              "{\n  \"counters\": {\n    \"a\": 1\n  }\n}\n");
}

TEST(FormatJson, RatesOnOneLine)
{
    const std::vector<Rate> rates =
        compute_rates({{"tx_data", 0}, {"rx_data", 0}}, {{"tx_data", 5}, {"rx_data", 0}}, 2.0);
    EXPECT_EQ(format_rates_json(rates, 3),
              "{\"interval\": 3, \"rates\": {\"tx_data\": 2.5, \"rx_data\": 0.0}}\n");
    EXPECT_EQ(format_rates_json({}, 1), "{\"interval\": 1, \"rates\": {}}\n");
}

// --- command line ------------------------------------------------------------------------------

ParsedArgs Parse(const std::vector<std::string>& args)
{
    return parse_args(args);
}

TEST(ParseArgs, Defaults)
{
    const ParsedArgs p = Parse({});
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_FALSE(p.help);
    EXPECT_TRUE(p.options.sockets);
    EXPECT_TRUE(p.options.counters);
    EXPECT_FALSE(p.options.all);
    EXPECT_FALSE(p.options.listening);
    EXPECT_FALSE(p.options.json);
    EXPECT_EQ(p.options.interval, 0.0);
    EXPECT_EQ(p.options.count, 0U);
    EXPECT_EQ(p.options.proc_dir, "/proc/net");
}

TEST(ParseArgs, Sections)
{
    ParsedArgs p = Parse({"-s"});
    ASSERT_TRUE(p.ok);
    EXPECT_TRUE(p.options.sockets);
    EXPECT_FALSE(p.options.counters);

    p = Parse({"--counters"});
    ASSERT_TRUE(p.ok);
    EXPECT_FALSE(p.options.sockets);
    EXPECT_TRUE(p.options.counters);

    p = Parse({"-s", "-c"});
    ASSERT_TRUE(p.ok);
    EXPECT_TRUE(p.options.sockets);
    EXPECT_TRUE(p.options.counters);
}

TEST(ParseArgs, ShortClustersLongFormsAndValues)
{
    ParsedArgs p = Parse({"-sla", "--json", "--proc", "/tmp/x"});
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(p.options.listening);
    EXPECT_TRUE(p.options.all);
    EXPECT_TRUE(p.options.json);
    EXPECT_FALSE(p.options.counters);
    EXPECT_EQ(p.options.proc_dir, "/tmp/x");

    p = Parse({"--all", "--listening", "--proc=/tmp/y"});
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(p.options.all);
    EXPECT_EQ(p.options.proc_dir, "/tmp/y");

    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"-i", "0.5", "-n", "3"},
             {"-i0.5", "-n3"},
             {"--interval", "0.5", "--count", "3"},
             {"--interval=0.5", "--count=3"},
             {"-ai", "0.5", "-n", "3", "-c"},
         }) {
        p = Parse(args);
        ASSERT_TRUE(p.ok) << args[0] << ": " << p.error;
        EXPECT_DOUBLE_EQ(p.options.interval, 0.5) << args[0];
        EXPECT_EQ(p.options.count, 3U) << args[0];
        EXPECT_FALSE(p.options.sockets) << args[0]; // -i reports counters
        EXPECT_TRUE(p.options.counters) << args[0];
    }

    p = Parse({"-i", "2"});
    ASSERT_TRUE(p.ok);
    EXPECT_DOUBLE_EQ(p.options.interval, 2.0);
    EXPECT_EQ(p.options.count, 0U);
}

TEST(ParseArgs, Help)
{
    for (const char* arg : {"-h", "--help"}) {
        const ParsedArgs p = Parse({"-a", arg});
        EXPECT_TRUE(p.ok) << arg;
        EXPECT_TRUE(p.help) << arg;
    }
    // Help wins over combinations that would otherwise be refused.
    EXPECT_TRUE(Parse({"-n", "3", "-h"}).help);
}

TEST(ParseArgs, Errors)
{
    const std::map<std::vector<std::string>, std::string> cases = {
        {{"--frobnicate"}, "unknown option --frobnicate"},
        {{"--frobnicate=1"}, "unknown option --frobnicate"},
        {{"-x"}, "unknown option -x"},
        {{"-sx"}, "unknown option -x"},
        {{"--"}, ""}, // fine: nothing after it
        {{"--", "-s"}, "unexpected argument \"-s\""},
        {{"extra"}, "unexpected argument \"extra\""},
        {{"-"}, "unexpected argument \"-\""},
        {{"-i"}, "option -i needs a value"},
        {{"--interval"}, "option --interval needs a value"},
        {{"--proc"}, "option --proc needs a value"},
        {{"--proc="}, "--proc needs a directory"},
        {{"--json=yes"}, "option --json takes no value"},
        {{"-i", "0"}, "bad interval \"0\": expected a positive number of seconds"},
        {{"-i", "0.0"}, "bad interval \"0.0\": expected a positive number of seconds"},
        {{"-i", "-1"}, "bad interval \"-1\": expected a positive number of seconds"},
        {{"-i", "1s"}, "bad interval \"1s\": expected a positive number of seconds"},
        {{"-i", "inf"}, "bad interval \"inf\": expected a positive number of seconds"},
        {{"-i", "1e3"}, "bad interval \"1e3\": expected a positive number of seconds"},
        {{"-i", "."}, "bad interval \".\": expected a positive number of seconds"},
        {{"-i", "1.2.3"}, "bad interval \"1.2.3\": expected a positive number of seconds"},
        {{"-i", "1", "-n", "0"}, "bad count \"0\": expected a positive integer"},
        {{"-i", "1", "-n", "x"}, "bad count \"x\": expected a positive integer"},
        {{"-n", "3"}, "-n needs -i"},
        {{"-s", "-i", "1"}, "-i reports counters; it cannot be combined with -s"},
        {{"-c", "-e"}, "-e adds to the socket table; it cannot be combined with -c or -i"},
        {{"-e", "-i", "1"}, "-e adds to the socket table; it cannot be combined with -c or -i"},
        {{"-sce"}, ""}, // both sections, as neither
    };
    for (const auto& [args, error] : cases) {
        const ParsedArgs p = Parse(args);
        EXPECT_EQ(p.ok, error.empty()) << args[0];
        EXPECT_EQ(p.error, error) << args[0];
    }
}

TEST(Usage, NamesEveryOptionAndTheExitStatuses)
{
    const std::string text = usage();
    EXPECT_EQ(text.rfind("usage: sdpstat ", 0), 0U);
    for (const char* option :
         {"--sockets", "--counters", "--all", "--listening", "--extended", "--interval", "--count",
          "--json", "--proc", "--help", "Exit status: 0 ok"}) {
        EXPECT_NE(text.find(option), std::string::npos) << option;
    }
}

// --- driver --------------------------------------------------------------------------------------

// Files as successive contents (each read takes the next; the last one
// stays), and a clock that sleeps exactly to the deadline plus `lag`.
class FakeSystem : public System {
  public:
    std::map<std::string, std::vector<std::string>> files;
    std::map<std::string, std::string> errors; // path -> strerror text
    std::map<std::string, int> reads;
    std::vector<double> sleeps;
    double time = 1000.0;
    double lag = 0.0;

    ReadResult read_file(const std::string& path) override
    {
        ReadResult r;
        reads[path]++;
        const auto error = errors.find(path);
        if (error != errors.end()) {
            r.status = ReadStatus::kError;
            r.error = error->second;
            return r;
        }
        const auto it = files.find(path);
        if (it == files.end() || it->second.empty()) {
            r.status = ReadStatus::kNotFound;
            return r;
        }
        r.status = ReadStatus::kOk;
        r.text = it->second.front();
        if (it->second.size() > 1)
            it->second.erase(it->second.begin());
        return r;
    }

    double now() override { return time; }

    void sleep_until(double when) override
    {
        sleeps.push_back(when);
        time = std::max(time, when) + lag;
    }
};

struct RunResult {
    int status = -1;
    std::string out;
    std::string err;
};

RunResult RunTool(const std::vector<std::string>& args, FakeSystem& sys)
{
    const ParsedArgs p = parse_args(args);
    EXPECT_TRUE(p.ok) << p.error;
    std::ostringstream out;
    std::ostringstream err;
    RunResult r;
    r.status = run(p.options, sys, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
}

void AddExampleFiles(FakeSystem& sys)
{
    sys.files["/proc/net/sdp"] = {kSocketsExample};
    sys.files["/proc/net/sdpstats"] = {kCountersExample};
}

TEST(Run, DefaultPrintsSocketsThenCounters)
{
    FakeSystem sys;
    AddExampleFiles(sys);
    const RunResult r = RunTool({}, sys);
    EXPECT_EQ(r.status, kExitOk);
    EXPECT_EQ(r.err, "");
    const std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    const std::vector<Counter> counters = parse_counters(kCountersExample).counters;
    EXPECT_EQ(r.out, format_sockets(sockets, false) + "\n" + format_counters(counters, false));
}

TEST(Run, SectionsReadOnlyTheFilesTheyNeed)
{
    FakeSystem sys;
    sys.files["/proc/net/sdp"] = {kSocketsExample};
    RunResult r = RunTool({"-s"}, sys);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    EXPECT_EQ(sys.reads.count("/proc/net/sdpstats"), 0U);

    FakeSystem counters_only;
    counters_only.files["/proc/net/sdpstats"] = {kCountersExample};
    r = RunTool({"-c"}, counters_only);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    EXPECT_EQ(counters_only.reads.count("/proc/net/sdp"), 0U);
    EXPECT_EQ(r.out, format_counters(parse_counters(kCountersExample).counters, false));
}

TEST(Run, ExtendedReadsTheInfoFileToo)
{
    FakeSystem sys;
    AddExampleFiles(sys);
    sys.files["/proc/net/sdpinfo"] = {kInfoExample};
    RunResult r = RunTool({"-se"}, sys);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    attach_info(&sockets, parse_info(kInfoExample).rows);
    EXPECT_EQ(r.out, format_sockets(sockets, false));
    r = RunTool({"--extended", "--json", "-s"}, sys);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    EXPECT_NE(r.out.find("\"inode\": 12350, \"info\": {\"rx_bufs\": 8, "), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("\"src\": \"active\", \"src_offers\": 1"), std::string::npos) << r.out;
    // Without -e the file is not read.
    FakeSystem plain;
    AddExampleFiles(plain);
    r = RunTool({"-s"}, plain);
    EXPECT_EQ(plain.reads.count("/proc/net/sdpinfo"), 0U);
    EXPECT_EQ(r.out.find("rx_bufs"), std::string::npos);
    // A module without the file: a usage error, nothing printed.
    r = RunTool({"-e"}, plain);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("/proc/net/sdpinfo"), std::string::npos);
    // A malformed line: reported, the rest shown.
    FakeSystem bad;
    AddExampleFiles(bad);
    bad.files["/proc/net/sdpinfo"] = {std::string(kInfoExample) + "12351 1\n"};
    r = RunTool({"-s", "-e"}, bad);
    EXPECT_EQ(r.status, kExitMalformed);
    EXPECT_NE(r.err.find("sdpinfo:4:"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("src:active"), std::string::npos);
}

TEST(Run, ModuleNotLoaded)
{
    FakeSystem sys;
    RunResult r = RunTool({}, sys);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdp not found: is sdp.ko loaded? (modprobe sdp)\n");

    r = RunTool({"-c", "--json"}, sys);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdpstats not found: is sdp.ko loaded? (modprobe sdp)\n");
}

TEST(Run, NothingPrintedWhenTheSecondFileIsMissing)
{
    FakeSystem sys;
    sys.files["/proc/net/sdp"] = {kSocketsExample};
    const RunResult r = RunTool({}, sys);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdpstats not found: is sdp.ko loaded? (modprobe sdp)\n");
}

TEST(Run, UnreadableFile)
{
    FakeSystem sys;
    AddExampleFiles(sys);
    sys.errors["/proc/net/sdp"] = "Permission denied";
    const RunResult r = RunTool({}, sys);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "sdpstat: cannot read /proc/net/sdp: Permission denied\n");
}

TEST(Run, ProcDirWithOrWithoutSlash)
{
    for (const char* dir : {"/srv/ns1", "/srv/ns1/"}) {
        FakeSystem sys;
        sys.files["/srv/ns1/sdp"] = {Header()};
        sys.files["/srv/ns1/sdpstats"] = {""};
        const RunResult r = RunTool({"--proc", dir}, sys);
        EXPECT_EQ(r.status, kExitOk) << dir << ": " << r.err;
    }
}

TEST(Run, MalformedLinesReportedRestPrinted)
{
    FakeSystem sys;
    sys.files["/proc/net/sdp"] = {Header() + "0: 1.2.3.4:1 5.6.7.8:2 LISTEN 0 0 0 7\nbad\n"};
    sys.files["/proc/net/sdpstats"] = {"tx_data 5\ntx_data x\n"};
    const RunResult r = RunTool({}, sys);
    EXPECT_EQ(r.status, kExitMalformed);
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdp:3: expected 8 columns (sl local_address "
                     "remote_address st tx_queue rx_queue uid inode), found 1\n"
                     "sdpstat: /proc/net/sdpstats:2: bad value \"x\" for tx_data: expected an "
                     "unsigned 64-bit decimal\n");
    EXPECT_EQ(r.out, "State   Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  uid  inode\n"
                     "LISTEN       0       0  1.2.3.4:1           5.6.7.8:2            0      7\n"
                     "\n"
                     "Messages  tx  rx\n"
                     "  data     5   -\n");
}

TEST(Run, Json)
{
    FakeSystem sys;
    AddExampleFiles(sys);
    const RunResult r = RunTool({"--json", "-l"}, sys);
    EXPECT_EQ(r.status, kExitOk);
    const std::vector<Socket> sockets = parse_sockets(kSocketsExample).sockets;
    const std::vector<Counter> counters = parse_counters(kCountersExample).counters;
    EXPECT_EQ(r.out, format_json(&sockets, true, &counters));
}

TEST(Run, IntervalRatesOnAFixedSchedule)
{
    FakeSystem sys;
    sys.files["/proc/net/sdpstats"] = {
        "tx_data 100\nrx_data 50\ntx_bytes 1000\n",
        "tx_data 300\nrx_data 50\ntx_bytes 3000\n",
        "tx_data 300\nrx_data 90\ntx_bytes 3000\n",
    };
    sys.lag = 0.25; // every wake-up late, every read slow: no drift anyway
    const RunResult r = RunTool({"-i", "2", "-n", "3"}, sys);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    EXPECT_EQ(sys.sleeps, (std::vector<double>{1002.0, 1004.0, 1006.0}));
    // The first interval is 2.25 s long (wake-up lag), the others 2 s.
    EXPECT_EQ(r.out, "Interval 1, per second\n"
                     "Messages  tx/s  rx/s\n"
                     "  data    88.9   0.0\n"
                     "\n"
                     "Data path\n"
                     "  tx_bytes  888.9\n"
                     "\n"
                     "Interval 2, per second\n"
                     "Messages  tx/s  rx/s\n"
                     "  data     0.0  20.0\n"
                     "\n"
                     "Interval 3, per second\n"
                     "No counter changed\n");
}

TEST(Run, IntervalJson)
{
    FakeSystem sys;
    sys.files["/proc/net/sdpstats"] = {"tx_data 0\n", "tx_data 10\n"};
    const RunResult r = RunTool({"-i", "0.5", "-n", "2", "--json"}, sys);
    EXPECT_EQ(r.status, kExitOk) << r.err;
    EXPECT_EQ(r.out, "{\"interval\": 1, \"rates\": {\"tx_data\": 20.0}}\n"
                     "{\"interval\": 2, \"rates\": {\"tx_data\": 0.0}}\n");
}

TEST(Run, IntervalAfterAStallStartsANewSchedule)
{
    FakeSystem sys;
    sys.files["/proc/net/sdpstats"] = {"tx_data 0\n"};
    sys.lag = 5; // e.g. the machine was suspended
    RunTool({"-i", "1", "-n", "3"}, sys);
    EXPECT_EQ(sys.sleeps, (std::vector<double>{1001.0, 1007.0, 1013.0}));
}

TEST(Run, IntervalReportsAMalformedLineOnce)
{
    FakeSystem sys;
    sys.files["/proc/net/sdpstats"] = {"tx_data 0\nbad line here\n"};
    const RunResult r = RunTool({"-i", "1", "-n", "3"}, sys);
    EXPECT_EQ(r.status, kExitMalformed);
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdpstats:2: expected \"name value\", found 3 columns\n");
    EXPECT_EQ(sys.reads["/proc/net/sdpstats"], 4);
}

// The module unloaded between two reports: the fake loses its files after
// the second read.
class VanishingSystem : public FakeSystem {
  public:
    ReadResult read_file(const std::string& path) override
    {
        if (reads[path] == 2)
            files.clear();
        return FakeSystem::read_file(path);
    }
};

TEST(Run, IntervalStopsWhenTheModuleGoes)
{
    VanishingSystem sys;
    sys.files["/proc/net/sdpstats"] = {"tx_data 0\n", "tx_data 1\n"};
    const RunResult r = RunTool({"-i", "1"}, sys);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "Interval 1, per second\n"
                     "Messages  tx/s  rx/s\n"
                     "  data     1.0     -\n");
    EXPECT_EQ(r.err, "sdpstat: /proc/net/sdpstats not found: is sdp.ko loaded? (modprobe sdp)\n");
}

} // namespace
} // namespace sdp::sdpstat
