// SPDX-License-Identifier: GPL-2.0
//
// The testable part of sdp-decode: hex line parsing, message formatting and
// the line-by-line driver.  main() in sdp_decode.cpp only handles arguments
// and opens the input, so everything the tool prints is produced (and tested)
// here.
#ifndef SDP_USERLIB_TOOLS_SDP_DECODE_LIB_H
#define SDP_USERLIB_TOOLS_SDP_DECODE_LIB_H

#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "wire.h"

namespace sdp::tools {

// Exit statuses of sdp-decode.
constexpr int kExitOk = 0;
constexpr int kExitDecodeError = 1; // some message did not decode
constexpr int kExitUsage = 2;       // bad arguments, unreadable input, invalid hex

// One input line as bytes.  Bytes are pairs of hex digits; whitespace and ':'
// may separate groups of bytes, and '#' starts a comment that runs to the end
// of the line.  A line with no bytes (blank or comment only) parses to an
// empty vector.
struct HexLine {
    bool ok = false;
    std::vector<u8> bytes;
    std::string error; // when !ok: what is wrong and at which column (1-based)
};

HexLine parse_hex_line(std::string_view line);

// Every field of a decoded message, named, on one line, e.g.
// "Data mseq=7 ack=5 bufs=3 len=116 flags=0x00 payload=100".
std::string format_message(const wire::Message& msg);

// Why `size` bytes at `buf` did not decode: the decode error name, followed by
// the message id's name when the first byte is a known id, e.g.
// "bad length (HelloAck)" or "unknown message id (mid 0x42)".
std::string format_decode_error(wire::DecodeError err, const u8* buf, usize size);

// Decode one message and describe it: format_message() plus "trailing=N" when
// bytes follow BSDH.len (CM private data is zero padded), or the
// format_decode_error() text.
struct DecodedText {
    wire::DecodeError error = wire::DecodeError::kNone;
    std::string text;
};

DecodedText decode_and_format(const std::vector<u8>& bytes);

// Read lines from `in` until EOF: one output line per message on `out`
// ("line N: <error>" for a message that does not decode), invalid hex
// reported on `err` naming the line.  Lines after an invalid one are still
// decoded.  Returns the exit status: kExitUsage if any line was not valid hex
// or `in` failed, else kExitDecodeError if any message failed to decode, else
// kExitOk.
int decode_stream(std::istream& in, std::ostream& out, std::ostream& err);

} // namespace sdp::tools

#endif // SDP_USERLIB_TOOLS_SDP_DECODE_LIB_H
