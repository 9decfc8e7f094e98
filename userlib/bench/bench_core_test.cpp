// SPDX-License-Identifier: GPL-2.0
//
// sdp-bench's pure parts: argument parsing, the client/server protocol
// encoding, the --verify pattern, percentiles and the CSV line.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench_core.h"

namespace sdp::bench {
namespace {

ParseResult parse(std::vector<const char*> args)
{
    args.insert(args.begin(), "sdp-bench");
    return parse_args(static_cast<int>(args.size()), args.data());
}

// --- arguments ---------------------------------------------------------------

TEST(ParseArgs, ClientDefaults)
{
    const ParseResult r = parse({"client"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_FALSE(r.help);
    EXPECT_EQ(r.opts.role, Role::kClient);
    EXPECT_EQ(r.opts.family, Family::kInet);
    EXPECT_EQ(r.opts.mode, Mode::kStream);
    EXPECT_EQ(r.opts.port, 18520);
    EXPECT_EQ(r.opts.sizes, std::vector<std::uint32_t>{65536});
    EXPECT_EQ(r.opts.duration_s, kDefaultStreamDurationS);
    EXPECT_EQ(r.opts.bytes, 0u);
    EXPECT_FALSE(r.opts.async);
    EXPECT_FALSE(r.opts.csv);
    EXPECT_FALSE(r.opts.verify);
}

TEST(ParseArgs, EveryOptionBothSpellings)
{
    const ParseResult r =
        parse({"client", "--family", "sdp", "--addr=10.77.0.1", "--port", "7000", "--mode=pingpong",
               "--sizes", "64,1k,16K,64KiB", "--iterations=500", "--warmup", "20", "--async",
               "--csv", "--verify", "--connect-timeout", "2.5"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.family, Family::kSdp);
    EXPECT_EQ(r.opts.addr, "10.77.0.1");
    EXPECT_EQ(r.opts.port, 7000);
    EXPECT_EQ(r.opts.mode, Mode::kPingpong);
    EXPECT_EQ(r.opts.sizes, (std::vector<std::uint32_t>{64, 1024, 16384, 65536}));
    EXPECT_EQ(r.opts.iterations, 500u);
    EXPECT_EQ(r.opts.warmup, 20u);
    EXPECT_TRUE(r.opts.async);
    EXPECT_TRUE(r.opts.csv);
    EXPECT_TRUE(r.opts.verify);
    EXPECT_EQ(r.opts.connect_timeout_s, 2.5);
}

TEST(ParseArgs, StreamByBytes)
{
    const ParseResult r = parse({"client", "--bytes", "64M", "--sizes", "65536"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.bytes, 64u << 20);
    EXPECT_EQ(r.opts.duration_s, 0);
}

TEST(ParseArgs, PingpongDefaultsAndWarmup)
{
    ParseResult r = parse({"client", "--mode", "pingpong"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.iterations, kDefaultIterations);
    EXPECT_EQ(r.opts.warmup, 100u);

    r = parse({"client", "--mode", "pingpong", "--iterations", "50"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.warmup, 5u);

    r = parse({"client", "--mode", "pingpong", "--warmup", "0"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.warmup, 0u);

    r = parse({"client", "--mode", "pingpong", "--duration", "1"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.iterations, 0u);
    EXPECT_EQ(r.opts.duration_s, 1);
}

TEST(ParseArgs, PingpongWithRequests)
{
    ParseResult r = parse({"client", "--mode", "pingpong", "--sizes", "1m", "--request", "64"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.request, 64u);
    EXPECT_EQ(r.opts.sizes, std::vector<std::uint32_t>{1u << 20});

    r = parse({"client", "--mode=pingpong", "--request=4k"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.request, 4096u);

    r = parse({"client", "--mode", "pingpong"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.request, 0u) << "an echo unless asked";
}

TEST(ParseArgs, Server)
{
    const ParseResult r =
        parse({"server", "--family", "inet6", "--port", "0", "--connections", "3", "--quiet"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.role, Role::kServer);
    EXPECT_EQ(r.opts.family, Family::kInet6);
    EXPECT_EQ(r.opts.port, 0);
    EXPECT_EQ(r.opts.connections, 3u);
    EXPECT_TRUE(r.opts.quiet);
}

TEST(ParseArgs, Zerocopy)
{
    ParseResult r = parse({"client"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zerocopy, Zerocopy::kNone);
    r = parse({"client", "--zerocopy", "msg"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zerocopy, Zerocopy::kMsg);
    r = parse({"client", "--zerocopy=uring"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zerocopy, Zerocopy::kUring);
    r = parse({"client", "--zerocopy", "splice"});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("msg or uring"), std::string::npos) << r.error;
    r = parse({"client", "--zerocopy"});
    EXPECT_FALSE(r.ok);
}

TEST(ParseArgs, ZcopyThresh)
{
    ParseResult r = parse({"client", "--family", "sdp"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zcopy_thresh, -1); // not given: the module's default

    r = parse({"client", "--zcopy-thresh", "0", "--family", "sdp"}); // any order
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zcopy_thresh, 0);

    r = parse({"server", "--family=sdp", "--zcopy-thresh=64k"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zcopy_thresh, 65536);

    r = parse({"client", "--family", "sdp", "--zcopy-thresh", "2147483647"});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.opts.zcopy_thresh, 2147483647);
}

TEST(ParseArgs, Help)
{
    for (const auto& args :
         {std::vector<const char*>{"--help"}, {"client", "--help"}, {"server", "-h"}}) {
        const ParseResult r = parse(args);
        EXPECT_TRUE(r.ok);
        EXPECT_TRUE(r.help);
    }
    EXPECT_NE(usage().find("--family inet|inet6|sdp"), std::string::npos);
}

TEST(ParseArgs, Errors)
{
    struct Case {
        std::vector<const char*> args;
        const char* message;
    };
    const Case cases[] = {
        {{}, "missing role"},
        {{"listen"}, "unknown role 'listen'"},
        {{"client", "--family", "ib"}, "unknown family 'ib'"},
        {{"client", "--family"}, "--family needs a value"},
        {{"client", "--mode", "rr"}, "unknown mode 'rr'"},
        {{"client", "--sizes", "64,,1k"}, "bad --sizes '64,,1k'"},
        {{"client", "--sizes", "0"}, "bad --sizes"},
        {{"client", "--sizes", "1G"}, "bad --sizes"},
        {{"client", "--sizes", "64x"}, "bad --sizes"},
        {{"client", "--port", "65536"}, "bad port '65536'"},
        {{"client", "--port", "-1"}, "bad port"},
        {{"client", "--port", "0"}, "port other than 0"},
        {{"client", "--duration", "0"}, "bad --duration '0'"},
        {{"client", "--duration", "x"}, "bad --duration"},
        {{"client", "--bytes", "-5"}, "bad --bytes '-5'"},
        {{"client", "--duration", "1", "--bytes", "1M"}, "exclude each other"},
        {{"client", "--iterations", "10"}, "are for --mode pingpong"},
        {{"client", "--mode", "pingpong", "--bytes", "1M"}, "--bytes is for --mode stream"},
        {{"client", "--mode", "pingpong", "--duration", "1", "--iterations", "5"},
         "exclude each other"},
        {{"server", "--duration", "1"}, "the client sets"},
        {{"client", "--csv=yes"}, "--csv takes no value"},
        {{"client", "--frobnicate"}, "unknown option '--frobnicate'"},
        {{"client", "--zcopy-thresh", "0"}, "--zcopy-thresh is for --family sdp"},
        {{"client", "--family", "inet6", "--zcopy-thresh", "1M"}, "is for --family sdp"},
        {{"client", "--family", "sdp", "--zcopy-thresh", "-1"}, "bad --zcopy-thresh '-1'"},
        {{"client", "--family", "sdp", "--zcopy-thresh", "2G"}, "bad --zcopy-thresh '2G'"},
        {{"client", "--family", "sdp", "--zcopy-thresh", "off"}, "bad --zcopy-thresh"},
        {{"client", "--family", "sdp", "--zcopy-thresh"}, "--zcopy-thresh needs a value"},
        {{"client", "--request", "64"}, "--request is for --mode pingpong"},
        {{"client", "--mode", "pingpong", "--request", "0"}, "bad --request '0'"},
        {{"client", "--mode", "pingpong", "--request", "1G"}, "bad --request '1G'"},
        {{"client", "--mode", "pingpong", "--request"}, "--request needs a value"},
        {{"server", "--mode", "pingpong", "--request", "64"}, "the client sets --request"},
    };
    for (const Case& c : cases) {
        const ParseResult r = parse(c.args);
        EXPECT_FALSE(r.ok) << c.message;
        EXPECT_NE(r.error.find(c.message), std::string::npos)
            << "error \"" << r.error << "\" lacks \"" << c.message << "\"";
    }
}

TEST(ParseQuantity, SuffixesAndLimits)
{
    EXPECT_EQ(parse_quantity("64"), 64u);
    EXPECT_EQ(parse_quantity("1k"), 1024u);
    EXPECT_EQ(parse_quantity("1KiB"), 1024u);
    EXPECT_EQ(parse_quantity("2M"), 2u << 20);
    EXPECT_EQ(parse_quantity("1g"), 1u << 30);
    EXPECT_EQ(parse_quantity("3KB"), 3u * 1024);
    EXPECT_FALSE(parse_quantity(""));
    EXPECT_FALSE(parse_quantity("0"));
    EXPECT_FALSE(parse_quantity("k"));
    EXPECT_FALSE(parse_quantity("1kk"));
    EXPECT_FALSE(parse_quantity("1.5k"));
    EXPECT_FALSE(parse_quantity(" 1"));
    EXPECT_FALSE(parse_quantity("99999999999999999999"));
    EXPECT_FALSE(parse_quantity("17179869184G")); // 2^34 GiB overflows 64 bits
}

// --- protocol ----------------------------------------------------------------

TEST(Protocol, HeaderLayoutIsLittleEndian)
{
    Header h;
    h.mode = Mode::kPingpong;
    h.flags = kFlagVerify;
    h.size = 0x00010203;
    h.count = 0x0102030405060708ULL;
    std::uint8_t b[kHeaderLen];
    encode_header(h, b);
    const std::uint8_t expected[kHeaderLen] = {
        'S', 'D', 'P', 'B', 2, 1, 0, 0, 0x03, 0x02, 0x01, 0x00, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    EXPECT_EQ(0, std::memcmp(b, expected, kHeaderLen));
    std::string error;
    const auto d = decode_header(b, error);
    ASSERT_TRUE(d) << error;
    EXPECT_EQ(d->mode, Mode::kPingpong);
    EXPECT_EQ(d->flags, kFlagVerify);
    EXPECT_EQ(d->size, h.size);
    EXPECT_EQ(d->count, h.count);
}

TEST(Protocol, RequestSizeTravelsInTheHeader)
{
    Header h;
    h.mode = Mode::kPingpong;
    h.size = 1u << 20;
    h.request = 0x01020304;
    h.count = 12;
    std::uint8_t b[kHeaderLen];
    encode_header(h, b);
    EXPECT_EQ(b[12], 0x04);
    EXPECT_EQ(b[15], 0x01);
    std::string error;
    const auto d = decode_header(b, error);
    ASSERT_TRUE(d) << error;
    EXPECT_EQ(d->request, h.request);
    EXPECT_EQ(d->size, h.size);
    EXPECT_EQ(d->count, h.count);

    h.request = 1u << 30;
    encode_header(h, b);
    EXPECT_FALSE(decode_header(b, error));
    EXPECT_NE(error.find("bad request size"), std::string::npos) << error;

    h.mode = Mode::kStream; // a stream has no requests
    h.request = 64;
    encode_header(h, b);
    EXPECT_FALSE(decode_header(b, error));
    EXPECT_NE(error.find("bad request size 64"), std::string::npos) << error;
}

TEST(Protocol, BadHeadersAreRejected)
{
    Header h;
    h.size = 64;
    std::uint8_t b[kHeaderLen];
    std::string error;

    encode_header(h, b);
    b[0] = 'X';
    EXPECT_FALSE(decode_header(b, error));
    EXPECT_NE(error.find("bad magic"), std::string::npos);

    encode_header(h, b);
    b[4] = 9;
    EXPECT_FALSE(decode_header(b, error));
    EXPECT_NE(error.find("unknown mode 9"), std::string::npos);

    h.size = 0;
    encode_header(h, b);
    EXPECT_FALSE(decode_header(b, error));
    EXPECT_NE(error.find("bad message size 0"), std::string::npos);
}

TEST(Protocol, ResultRoundTrip)
{
    Result r;
    r.status = 1;
    r.bytes = 1ULL << 40;
    r.elapsed_ns = 3'000'000'123ULL;
    r.bad_offset = 4097;
    std::uint8_t b[kResultLen];
    encode_result(r, b);
    EXPECT_EQ(b[0], 'S');
    EXPECT_EQ(b[3], 'R');
    const auto d = decode_result(b);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->status, 1u);
    EXPECT_EQ(d->bytes, r.bytes);
    EXPECT_EQ(d->elapsed_ns, r.elapsed_ns);
    EXPECT_EQ(d->bad_offset, 4097u);
    b[1] = 0;
    EXPECT_FALSE(decode_result(b));
}

// --- pattern -------------------------------------------------------------------

TEST(Pattern, FillMatchesBytewiseAtAnyAlignment)
{
    for (std::uint64_t offset : {0ULL, 1ULL, 7ULL, 8ULL, 13ULL, 4096ULL, (1ULL << 33) + 5}) {
        for (std::size_t len : {0u, 1u, 7u, 8u, 9u, 64u, 1000u}) {
            std::vector<std::uint8_t> buf(len);
            pattern_fill(buf.data(), len, offset);
            for (std::size_t i = 0; i < len; i++)
                ASSERT_EQ(buf[i], pattern_byte(offset + i)) << offset << "+" << i;
            EXPECT_EQ(pattern_check(buf.data(), len, offset), len);
        }
    }
}

TEST(Pattern, CheckFindsTheFirstWrongByte)
{
    std::vector<std::uint8_t> buf(100);
    pattern_fill(buf.data(), buf.size(), 3);
    buf[42] ^= 1;
    buf[77] ^= 1;
    EXPECT_EQ(pattern_check(buf.data(), buf.size(), 3), 42u);
}

TEST(Pattern, ShiftedOrRepeatedDataDoesNotPass)
{
    // A chunk delivered at the wrong place in the stream must not verify,
    // whatever the shift (the pattern has no short period).
    std::vector<std::uint8_t> buf(256);
    pattern_fill(buf.data(), buf.size(), 0);
    for (std::uint64_t shift : {1ULL, 8ULL, 256ULL, 4096ULL, 65536ULL})
        EXPECT_LT(pattern_check(buf.data(), buf.size(), shift), 16u) << shift;
}

// --- statistics ------------------------------------------------------------------

TEST(Percentile, NearestRank)
{
    std::vector<double> v;
    for (int i = 100; i >= 1; i--)
        v.push_back(i); // unsorted on purpose
    EXPECT_EQ(percentile(v, 50), 50);
    EXPECT_EQ(percentile(v, 99), 99);
    EXPECT_EQ(percentile(v, 100), 100);
    EXPECT_EQ(percentile(v, 0), 1);
    EXPECT_EQ(percentile(v, 99.5), 100);
    EXPECT_EQ(percentile(v, 0.5), 1);
}

TEST(Percentile, SmallAndEmptySets)
{
    EXPECT_EQ(percentile({}, 50), 0);
    EXPECT_EQ(percentile({7}, 50), 7);
    EXPECT_EQ(percentile({7}, 99), 7);
    EXPECT_EQ(percentile({3, 1}, 50), 1);
    EXPECT_EQ(percentile({3, 1}, 51), 3);
    EXPECT_EQ(percentile({5, 1, 3}, 50), 3);
    EXPECT_EQ(percentile({5, 1, 3}, 99), 5);
    EXPECT_EQ(percentile({5, 1, 3}, 150), 5); // clamped
    EXPECT_EQ(percentile({5, 1, 3}, -1), 1);
}

TEST(Percentile, TailIsNotTheMaximum)
{
    // 1000 samples of 10 us and 5 outliers: p99 ignores the outliers.
    std::vector<double> v(1000, 10.0);
    for (int i = 0; i < 5; i++)
        v.push_back(5000);
    EXPECT_EQ(percentile(v, 99), 10);
    EXPECT_EQ(percentile(v, 100), 5000);
}

// --- output ------------------------------------------------------------------------

TEST(Csv, HeaderAndStreamLine)
{
    EXPECT_EQ(csv_header(),
              "family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified");
    Measurement m;
    m.family = Family::kSdp;
    m.mode = Mode::kStream;
    m.size = 65536;
    m.throughput_MBps = 1234.56789;
    m.msgs_per_s = 18838.25;
    m.bytes = 3703570432;
    m.verified = Verified::kOk;
    EXPECT_EQ(format_csv(m), "sdp,stream,65536,1234.568,18838.2,,,3703570432,ok");
}

TEST(Csv, PingpongLineHasPercentiles)
{
    Measurement m;
    m.family = Family::kInet6;
    m.mode = Mode::kPingpong;
    m.size = 64;
    m.throughput_MBps = 1.5;
    m.msgs_per_s = 23437.5;
    m.p50_us = 40.123;
    m.p99_us = 81.999;
    m.bytes = 70400;
    EXPECT_EQ(format_csv(m), "inet6,pingpong,64,1.500,23437.5,40.12,82.00,70400,off");
    // As many fields as the header.
    const std::string line = format_csv(m);
    const std::string header = csv_header();
    EXPECT_EQ(std::count(line.begin(), line.end(), ','),
              std::count(header.begin(), header.end(), ','));
}

TEST(Human, SaysTheRequestSize)
{
    Measurement m;
    m.family = Family::kSdp;
    m.mode = Mode::kPingpong;
    m.size = 1048576;
    m.request = 64;
    m.p50_us = 12345.0;
    m.p99_us = 23456.0;
    const std::string s = format_human(m, 1.0);
    EXPECT_NE(s.find("pingpong 1048576 B: 64 B requests, round trip p50 12345.00 us"),
              std::string::npos)
        << s;
    EXPECT_NE(s.find("MB/s of responses"), std::string::npos) << s;
}

TEST(Human, MentionsTheNumbers)
{
    Measurement m;
    m.family = Family::kInet;
    m.mode = Mode::kStream;
    m.size = 1024;
    m.throughput_MBps = 99.5;
    m.msgs_per_s = 97167;
    m.bytes = 298500000;
    m.verified = Verified::kFailed;
    const std::string s = format_human(m, 3.0);
    EXPECT_NE(s.find("inet stream 1024 B: 99.50 MB/s"), std::string::npos) << s;
    EXPECT_NE(s.find("verify FAILED"), std::string::npos) << s;
}

TEST(SdpStats, SenderByZeroCopy)
{
    SdpSocketStats st;
    st.tx_bytes = 1048576 * 4 + 24;
    st.zc_tx_bytes = 4ULL * 1048576;
    st.tx_bcopy_bytes = 24;
    st.src_avail_sent = 3;
    st.rdma_writes = 1;
    st.rx_bytes = 32;
    st.rx_bcopy_bytes = 32;
    EXPECT_EQ(format_sdp_stats(st),
              "sent 4194328 B: 100.0% by zero copy (3 SrcAvail, 1 RDMA Writes), 0.0% by bcopy; "
              "received 32 B: 0.0% by zero copy (0 SinkAvail, 0 RDMA Reads), 100.0% by bcopy");
}

TEST(SdpStats, ReceiverAndFallbacks)
{
    SdpSocketStats st;
    st.rx_bytes = 1000;
    st.zc_rx_bytes = 750;
    st.rx_bcopy_bytes = 250;
    st.sink_avail_sent = 2;
    st.rdma_reads = 5;
    st.fallbacks = 1;
    EXPECT_EQ(format_sdp_stats(st), "received 1000 B: 75.0% by zero copy (2 SinkAvail, 5 RDMA "
                                    "Reads), 25.0% by bcopy; 1 zero-copy fallbacks to bcopy");
    // Nothing moved: the sending side, all zero, no division by zero.
    EXPECT_EQ(format_sdp_stats(SdpSocketStats{}),
              "sent 0 B: 0.0% by zero copy (0 SrcAvail, 0 RDMA Writes), 0.0% by bcopy");
}

} // namespace
} // namespace sdp::bench
