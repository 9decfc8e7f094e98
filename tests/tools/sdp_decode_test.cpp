// SPDX-License-Identifier: GPL-2.0
//
// sdp-decode's parsing and output, checked against messages written by hand
// from the wire layout (include/sdp_wire.h, notes/protocol.md) rather than
// produced by the encoder, so a codec bug cannot hide behind a matching
// encode/decode pair.
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "sdp_decode_lib.h"

namespace sdp::tools {
namespace {

// What the tool prints for one line of hex, or the hex parse error.
std::string decode_hex(const std::string& line)
{
    const HexLine parsed = parse_hex_line(line);
    if (!parsed.ok)
        return "hex: " + parsed.error;
    return decode_and_format(parsed.bytes).text;
}

std::string repeat(const std::string& s, int n)
{
    std::string out;
    for (int i = 0; i < n; i++)
        out += s;
    return out;
}

// --- hex parsing -------------------------------------------------------------

TEST(ParseHexLine, AcceptsSpacesColonsAndRunsOfDigits)
{
    const std::vector<u8> expected = {0xff, 0x00, 0xab, 0xcd};
    for (const char* line :
         {"ff 00 ab cd", "ff:00:ab:cd", "ff00abcd", "FF00ABCD", "  ff00 \tab:cd \r", "ff00:abcd"}) {
        const HexLine parsed = parse_hex_line(line);
        EXPECT_TRUE(parsed.ok) << line << ": " << parsed.error;
        EXPECT_EQ(parsed.bytes, expected) << line;
    }
}

TEST(ParseHexLine, BlankAndCommentLinesHaveNoBytes)
{
    for (const char* line : {"", "   ", "\r", "# Hello from the CM REQ", "  # indented", ": :"}) {
        const HexLine parsed = parse_hex_line(line);
        EXPECT_TRUE(parsed.ok) << line;
        EXPECT_TRUE(parsed.bytes.empty()) << line;
    }
}

TEST(ParseHexLine, CommentEndsTheBytes)
{
    const HexLine parsed = parse_hex_line("04 00 # SendSM, not 0x77: zz");
    ASSERT_TRUE(parsed.ok) << parsed.error;
    EXPECT_EQ(parsed.bytes, (std::vector<u8>{0x04, 0x00}));
}

TEST(ParseHexLine, RejectsOddDigitCountNamingTheGroup)
{
    HexLine parsed = parse_hex_line("ff 0 00");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: odd number of digits in \"0\" at column 4");

    // A whole-line run with a lost digit must not be silently re-paired.
    parsed = parse_hex_line("ff000");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: odd number of digits in \"ff000\" at column 1");
}

TEST(ParseHexLine, RejectsNonHexCharactersNamingTheColumn)
{
    HexLine parsed = parse_hex_line("ff 0g");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: 'g' at column 5");

    // No "0x" prefixes: the 'x' is reported, not skipped.
    parsed = parse_hex_line("0xff");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: 'x' at column 2");

    // Commas are not separators (tshark joins repeated fields with them).
    parsed = parse_hex_line("ff,00");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: ',' at column 3");

    // Unprintable bytes are escaped so the message stays readable.
    parsed = parse_hex_line("ff\x01");
    EXPECT_FALSE(parsed.ok);
    EXPECT_EQ(parsed.error, "invalid hex: \\x01 at column 3");
}

// --- golden messages -----------------------------------------------------------

TEST(Format, DataWithPayload)
{
    const std::string header = "ff 00 00 03 00 00 00 74 00 00 00 07 00 00 00 05 ";
    EXPECT_EQ(decode_hex(header + repeat("5a ", 100)),
              "Data mseq=7 ack=5 bufs=3 len=116 flags=0x00 payload=100");
}

TEST(Format, DataFlagsAreNamedAndUnknownBitsKept)
{
    EXPECT_EQ(decode_hex("ff 03 00 01 00 00 00 11 00 00 00 02 00 00 00 01 21"),
              "Data mseq=2 ack=1 bufs=1 len=17 flags=0x03(OOB_PRES|OOB_PEND) payload=1");
    EXPECT_EQ(decode_hex("ff 84 00 01 00 00 00 10 00 00 00 02 00 00 00 01"),
              "Data mseq=2 ack=1 bufs=1 len=16 flags=0x84(REQ_PIPE|0x80) payload=0");
}

TEST(Format, SrcAvail)
{
    EXPECT_EQ(decode_hex("fe 00 00 10 00 00 00 20 00 00 00 0a 00 00 00 06 "
                         "00 01 00 00 11 22 33 44 01 02 03 04 05 06 07 08"),
              "SrcAvail mseq=10 ack=6 bufs=16 len=32 flags=0x00 rdma_len=65536 rkey=0x11223344 "
              "vaddr=0x0102030405060708 inline=0");
    // Inline payload: counted in BSDH.len, not in the advertised RDMA length.
    EXPECT_EQ(decode_hex("fe 00 00 10 00 00 00 23 00 00 00 0b 00 00 00 06 "
                         "00 00 10 00 ca fe ba be ff ff 88 80 00 00 00 00 61 62 63"),
              "SrcAvail mseq=11 ack=6 bufs=16 len=35 flags=0x00 rdma_len=4096 rkey=0xcafebabe "
              "vaddr=0xffff888000000000 inline=3");
}

TEST(Format, SinkAvail)
{
    EXPECT_EQ(decode_hex("fd:00:00:20:00:00:00:24:00:00:00:07:00:00:00:0b:"
                         "00:00:40:00:55:66:77:88:00:00:7f:00:00:00:10:00:00:00:00:01"),
              "SinkAvail mseq=7 ack=11 bufs=32 len=36 flags=0x00 rdma_len=16384 rkey=0x55667788 "
              "vaddr=0x00007f0000001000 non_disc=1");
}

TEST(Format, ModernHelloWithCmPadding)
{
    // 56 bytes of CM REQ private data: a 32-byte Hello and zero padding.
    EXPECT_EQ(decode_hex("00 00 00 40 00 00 00 20 00 00 00 00 00 00 00 00 "
                         "22 41 00 04 00 01 00 00 00 00 80 00 13 89 00 00 " +
                         repeat("00 ", 24)),
              "Hello mseq=0 ack=0 bufs=64 len=32 flags=0x00 version=2.2 ipv=4 "
              "caps=0x1(INVALIDATE) max_adverts=4 desremrcvsz=65536 localrcvsz=32768 port=5001 "
              "trailing=24");
}

TEST(Format, HistoricalHelloIpv4Addresses)
{
    EXPECT_EQ(decode_hex("00 00 00 40 00 00 00 40 00 00 00 00 00 00 00 00 "
                         "21 40 00 01 00 00 80 00 00 00 80 00 04 d2 00 00 " +
                         repeat("00 ", 12) + "c0 a8 01 0a " + repeat("00 ", 12) + "c0 a8 01 fe"),
              "Hello mseq=0 ack=0 bufs=64 len=64 flags=0x00 version=2.1 ipv=4 caps=0x0 "
              "max_adverts=1 desremrcvsz=32768 localrcvsz=32768 port=1234 src=192.168.1.10 "
              "dst=192.168.1.254");
}

TEST(Format, HistoricalHelloIpv6Addresses)
{
    EXPECT_EQ(decode_hex("00000040000000400000000000000000 226300020000400000004000c3500000 "
                         "fe800000000000000000000000000001 20010db8000000000000000000000002"),
              "Hello mseq=0 ack=0 bufs=64 len=64 flags=0x00 version=2.2 ipv=6 "
              "caps=0x3(INVALIDATE|EXT_MAX_ADVERTS) max_adverts=2 desremrcvsz=16384 "
              "localrcvsz=16384 port=50000 src=fe80::1 dst=2001:db8::2");
}

TEST(Format, HelloAck)
{
    EXPECT_EQ(decode_hex("01 00 00 40 00 00 00 18 00 00 00 00 00 00 00 00 "
                         "22 43 00 08 00 01 00 00"),
              "HelloAck mseq=0 ack=0 bufs=64 len=24 flags=0x00 version=2.2 ipv=4 "
              "caps=0x3(INVALIDATE|EXT_MAX_ADVERTS) ext_max_adverts=8 actrcvsz=65536");
}

TEST(Format, CompletionsAndBufferSizeChanges)
{
    EXPECT_EQ(decode_hex("06 00 00 10 00 00 00 14 00 00 00 0c 00 00 00 07 00 01 00 00"),
              "RdmaRdCompl mseq=12 ack=7 bufs=16 len=20 flags=0x00 compl_len=65536");
    EXPECT_EQ(decode_hex("05 00 00 20 00 00 00 14 00 00 00 08 00 00 00 0c 00 00 40 00"),
              "RdmaWrCompl mseq=8 ack=12 bufs=32 len=20 flags=0x00 compl_len=16384");
    EXPECT_EQ(decode_hex("0b 00 00 10 00 00 00 14 00 00 00 10 00 00 00 09 00 00 80 00"),
              "ChRcvBuf mseq=16 ack=9 bufs=16 len=20 flags=0x00 size=32768");
    EXPECT_EQ(decode_hex("0c 00 00 20 00 00 00 14 00 00 00 0a 00 00 00 10 00 02 00 00"),
              "ChRcvBufAck mseq=10 ack=16 bufs=32 len=20 flags=0x00 size=131072");
}

TEST(Format, BsdhOnlyMessages)
{
    EXPECT_EQ(decode_hex("04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08"),
              "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00");
    EXPECT_EQ(decode_hex("02 00 00 10 00 00 00 10 00 00 00 11 00 00 00 0a"),
              "DisConn mseq=17 ack=10 bufs=16 len=16 flags=0x00");
    EXPECT_EQ(decode_hex("03 00 00 00 00 00 00 10 ff ff ff ff 00 00 00 0a"),
              "AbortConn mseq=4294967295 ack=10 bufs=0 len=16 flags=0x00");
    EXPECT_EQ(decode_hex("08 00 00 10 00 00 00 10 00 00 00 0e 00 00 00 08"),
              "SrcAvailCancel mseq=14 ack=8 bufs=16 len=16 flags=0x00");
    EXPECT_EQ(decode_hex("09 00 00 20 00 00 00 10 00 00 00 09 00 00 00 0e"),
              "SinkAvailCancel mseq=9 ack=14 bufs=32 len=16 flags=0x00");
    EXPECT_EQ(decode_hex("0a 00 00 10 00 00 00 10 00 00 00 0f 00 00 00 09"),
              "SinkCancelAck mseq=15 ack=9 bufs=16 len=16 flags=0x00");
}

TEST(Format, TrailingBytesAfterBsdhLenAreCounted)
{
    EXPECT_EQ(decode_hex("04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08 00 00 00"),
              "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00 trailing=3");
}

// --- malformed messages --------------------------------------------------------

TEST(FormatError, NamesTheErrorAndTheMessage)
{
    struct Case {
        const char* hex;
        wire::DecodeError error;
        const char* text;
    };
    const Case cases[] = {
        {"ff 00 00 03", wire::DecodeError::kShortBuffer, "short buffer (Data)"},
        {"ff 00 00 03 00 00 00 74 00 00 00 07 00 00 00 05 68 65 6c 6c",
         wire::DecodeError::kShortBuffer, "short buffer (Data)"},
        {"01 00 00 40 00 00 00 20 00 00 00 00 00 00 00 00 22 43 00 08 00 01 00 00 "
         "00 00 00 00 00 00 00 00",
         wire::DecodeError::kBadLength, "bad length (HelloAck)"},
        {"00 00 00 40 00 00 00 24 00 00 00 00 00 00 00 00 22 41 00 04 00 01 00 00 "
         "00 00 80 00 13 89 00 00 00 00 00 00",
         wire::DecodeError::kBadLength, "bad length (Hello)"},
        {"42 00 00 10 00 00 00 10 00 00 00 01 00 00 00 00", wire::DecodeError::kUnknownId,
         "unknown message id (mid 0x42)"},
        {"07 00 00 10 00 00 00 10 00 00 00 01 00 00 00 00", wire::DecodeError::kUnsupported,
         "unsupported message (ModeChange)"},
        {"00 00 00 40 00 00 00 20 00 00 00 00 00 00 00 00 12 41 00 04 00 01 00 00 "
         "00 00 80 00 13 89 00 00",
         wire::DecodeError::kBadVersion, "bad protocol version (Hello)"},
        {"00 00 00 40 00 00 00 20 00 00 00 00 00 00 00 00 22 41 00 00 00 01 00 00 "
         "00 00 80 00 13 89 00 00",
         wire::DecodeError::kBadField, "bad header field (Hello)"},
        {"fe 00 00 10 00 00 00 20 00 00 00 0a 00 00 00 06 00 00 00 00 11 22 33 44 "
         "01 02 03 04 05 06 07 08",
         wire::DecodeError::kBadField, "bad header field (SrcAvail)"},
        // Too short to hold a BSDH and not a defined id either.
        {"99", wire::DecodeError::kShortBuffer, "short buffer (mid 0x99)"},
    };
    for (const Case& c : cases) {
        const HexLine parsed = parse_hex_line(c.hex);
        ASSERT_TRUE(parsed.ok) << c.hex;
        const DecodedText decoded = decode_and_format(parsed.bytes);
        EXPECT_EQ(decoded.error, c.error) << c.hex;
        EXPECT_EQ(decoded.text, c.text) << c.hex;
    }
}

// --- the whole stream ------------------------------------------------------------

struct StreamResult {
    int status;
    std::string out;
    std::string err;
};

StreamResult run(const std::string& input)
{
    std::istringstream in(input);
    std::ostringstream out;
    std::ostringstream err;
    const int status = decode_stream(in, out, err);
    return {status, out.str(), err.str()};
}

TEST(DecodeStream, AllGoodExitsZero)
{
    const StreamResult r = run("# capture\n"
                               "\n"
                               "04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08\n"
                               "02 00 00 10 00 00 00 10 00 00 00 0e 00 00 00 08");
    EXPECT_EQ(r.status, kExitOk);
    EXPECT_EQ(r.out, "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00\n"
                     "DisConn mseq=14 ack=8 bufs=16 len=16 flags=0x00\n");
    EXPECT_EQ(r.err, "");
}

TEST(DecodeStream, DecodeErrorNamesThePhysicalLineAndExitsOne)
{
    const StreamResult r = run("# line 1 is a comment, line 2 is blank\n"
                               "\n"
                               "04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08\n"
                               "ff 00 00 03\n"
                               "02 00 00 10 00 00 00 10 00 00 00 0e 00 00 00 08\n");
    EXPECT_EQ(r.status, kExitDecodeError);
    EXPECT_EQ(r.out, "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00\n"
                     "line 4: short buffer (Data)\n"
                     "DisConn mseq=14 ack=8 bufs=16 len=16 flags=0x00\n");
    EXPECT_EQ(r.err, "");
}

TEST(DecodeStream, InvalidHexIsReportedAndTheRestStillDecoded)
{
    const StreamResult r = run("ff 00 00 03\n"
                               "04 00 00 1\n"
                               "04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08\n");
    // Invalid input outranks a decode failure.
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.out, "line 1: short buffer (Data)\n"
                     "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00\n");
    EXPECT_EQ(r.err,
              "sdp-decode: line 2: invalid hex: odd number of digits in \"1\" at column 10\n");
}

TEST(DecodeStream, EmptyInputExitsZeroAndPrintsNothing)
{
    const StreamResult r = run("");
    EXPECT_EQ(r.status, kExitOk);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
}

// A stream whose reads fail after the first line, as a file on a failing disk
// (or a directory given as the input) does.
class FailingBuf : public std::streambuf {
  public:
    explicit FailingBuf(std::string first) : first_(std::move(first))
    {
        setg(first_.data(), first_.data(), first_.data() + first_.size());
    }

  protected:
    int_type underflow() override { throw std::runtime_error("EIO"); }

  private:
    std::string first_;
};

TEST(DecodeStream, ReadErrorIsNotMistakenForEndOfInput)
{
    FailingBuf buf("04 00 00 10 00 00 00 10 00 00 00 0d 00 00 00 08\n");
    std::istream in(&buf);
    std::ostringstream out;
    std::ostringstream err;
    EXPECT_EQ(decode_stream(in, out, err), kExitUsage);
    EXPECT_EQ(out.str(), "SendSM mseq=13 ack=8 bufs=16 len=16 flags=0x00\n");
    EXPECT_EQ(err.str(), "sdp-decode: error reading input\n");
}

} // namespace
} // namespace sdp::tools
