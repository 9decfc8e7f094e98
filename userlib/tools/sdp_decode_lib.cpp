// SPDX-License-Identifier: GPL-2.0
#include "sdp_decode_lib.h"

#include <arpa/inet.h>

#include <cstdio>
#include <string>

namespace sdp::tools {
namespace {

bool is_separator(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f' || c == ':';
}

int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// A character as it can be shown in an error message: pasted captures can
// hold control or non-ASCII bytes that would garble the terminal.
std::string printable(char c)
{
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x21 && byte <= 0x7e)
        return std::string("'") + c + "'";
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", byte);
    return buf;
}

std::string hex(u64 value, int digits)
{
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%0*llx", digits, static_cast<unsigned long long>(value));
    return buf;
}

struct BitName {
    u8 bit;
    const char* name;
};

// "0x05(OOB_PRES|REQ_PIPE)": the raw value for exactness, the names because
// nobody remembers which bit is which; bits without a name stay in hex.
template <usize N> std::string bits(u8 value, int digits, const BitName (&names)[N])
{
    std::string out = hex(value, digits);
    if (value == 0)
        return out;
    std::string list;
    u8 unnamed = value;
    for (const BitName& b : names) {
        if ((value & b.bit) == 0)
            continue;
        list += list.empty() ? "" : "|";
        list += b.name;
        unnamed = static_cast<u8>(unnamed & ~b.bit);
    }
    if (unnamed != 0) {
        list += list.empty() ? "" : "|";
        list += hex(unnamed, 2);
    }
    return out + "(" + list + ")";
}

constexpr BitName kFlagNames[] = {
    {SDP_FLAG_OOB_PRES, "OOB_PRES"},
    {SDP_FLAG_OOB_PEND, "OOB_PEND"},
    {SDP_FLAG_REQ_PIPE, "REQ_PIPE"},
};

constexpr BitName kCapNames[] = {
    {SDP_CAP_INVALIDATE, "INVALIDATE"},
    {SDP_CAP_EXT_MAX_ADVERTS, "EXT_MAX_ADVERTS"},
};

// Hello addresses are 16 bytes whatever the family; an IPv4 address sits in
// the last four.
std::string format_address(wire::IpVersion ipv, const u8 (&addr)[16])
{
    char buf[INET6_ADDRSTRLEN];
    if (ipv == wire::IpVersion::kV4) {
        std::snprintf(buf, sizeof(buf), "%u.%u.%u.%u", addr[12], addr[13], addr[14], addr[15]);
        return buf;
    }
    if (inet_ntop(AF_INET6, addr, buf, sizeof(buf)) == nullptr)
        return "?";
    return buf;
}

std::string version(u8 major, u8 minor)
{
    return std::to_string(major) + "." + std::to_string(minor);
}

std::string field(const char* name, u64 value)
{
    return std::string(" ") + name + "=" + std::to_string(value);
}

std::string field(const char* name, const std::string& value)
{
    return std::string(" ") + name + "=" + value;
}

} // namespace

HexLine parse_hex_line(std::string_view line)
{
    HexLine result;
    const std::string_view content = line.substr(0, line.find('#'));
    usize pos = 0;
    while (pos < content.size()) {
        if (is_separator(content[pos])) {
            pos++;
            continue;
        }
        // A group runs to the next separator and must hold whole bytes: an odd
        // digit count means a digit was lost or doubled in the paste, and
        // guessing which would shift every later field.
        const usize start = pos;
        while (pos < content.size() && !is_separator(content[pos])) {
            if (hex_value(content[pos]) < 0) {
                result.error = "invalid hex: " + printable(content[pos]) + " at column " +
                               std::to_string(pos + 1);
                return result;
            }
            pos++;
        }
        const std::string_view group = content.substr(start, pos - start);
        if (group.size() % 2 != 0) {
            result.error = "invalid hex: odd number of digits in \"" + std::string(group) +
                           "\" at column " + std::to_string(start + 1);
            return result;
        }
        // Every character was checked above, so hex_value() is 0..15 here.
        for (usize i = 0; i < group.size(); i += 2) {
            const auto high = static_cast<unsigned>(hex_value(group[i]));
            const auto low = static_cast<unsigned>(hex_value(group[i + 1]));
            result.bytes.push_back(static_cast<u8>((high << 4) | low));
        }
    }
    result.ok = true;
    return result;
}

std::string format_message(const wire::Message& msg)
{
    const wire::Bsdh& bsdh = msg.bsdh;
    std::string out = wire::mid_name(static_cast<u8>(bsdh.mid));
    out += field("mseq", bsdh.mseq);
    out += field("ack", bsdh.mseq_ack);
    out += field("bufs", bsdh.bufs);
    out += field("len", bsdh.len);
    out += field("flags", bits(bsdh.flags, 2, kFlagNames));

    switch (bsdh.mid) {
    case wire::Mid::kHello: {
        const wire::Hello& h = msg.hello;
        out += field("version", version(h.major, h.minor));
        out += field("ipv", static_cast<u8>(h.ip_version));
        out += field("caps", bits(h.caps, 1, kCapNames));
        out += field("max_adverts", h.max_adverts);
        out += field("desremrcvsz", h.desired_remote_rcv_size);
        out += field("localrcvsz", h.local_rcv_size);
        out += field("port", h.local_port);
        if (h.has_addresses) {
            out += field("src", format_address(h.ip_version, h.src_addr));
            out += field("dst", format_address(h.ip_version, h.dst_addr));
        }
        break;
    }
    case wire::Mid::kHelloAck: {
        const wire::HelloAck& h = msg.hello_ack;
        out += field("version", version(h.major, h.minor));
        out += field("ipv", h.ip_version);
        out += field("caps", bits(h.caps, 1, kCapNames));
        out += field("ext_max_adverts", h.ext_max_adverts);
        out += field("actrcvsz", h.actual_rcv_size);
        break;
    }
    case wire::Mid::kSrcAvail:
        out += field("rdma_len", msg.src_avail.len);
        out += field("rkey", hex(msg.src_avail.rkey, 8));
        out += field("vaddr", hex(msg.src_avail.vaddr, 16));
        out += field("inline", msg.payload_len);
        break;
    case wire::Mid::kSinkAvail:
        out += field("rdma_len", msg.sink_avail.len);
        out += field("rkey", hex(msg.sink_avail.rkey, 8));
        out += field("vaddr", hex(msg.sink_avail.vaddr, 16));
        out += field("non_disc", msg.sink_avail.non_discard);
        break;
    case wire::Mid::kRdmaRdCompl:
    case wire::Mid::kRdmaWrCompl:
        out += field("compl_len", msg.rdma_compl_len);
        break;
    case wire::Mid::kChRcvBuf:
    case wire::Mid::kChRcvBufAck:
        out += field("size", msg.rcv_buf_size);
        break;
    case wire::Mid::kData:
        out += field("payload", msg.payload_len);
        break;
    default:
        break; // BSDH-only messages
    }
    return out;
}

std::string format_decode_error(wire::DecodeError err, const u8* buf, usize size)
{
    std::string out = wire::decode_error_name(err);
    if (size == 0)
        return out;
    // Ids the spec defines (spoken by the core or not) have a name; for the
    // rest the raw id is what the operator has to look at.
    const u8 mid = buf[0];
    if (!wire::is_sdp_mid(mid))
        return out + " (mid " + hex(mid, 2) + ")";
    return out + " (" + std::string(wire::mid_name(mid)) + ")";
}

DecodedText decode_and_format(const std::vector<u8>& bytes)
{
    DecodedText result;
    wire::Message msg{};
    result.error = wire::decode(bytes.data(), bytes.size(), &msg);
    if (result.error != wire::DecodeError::kNone) {
        result.text = format_decode_error(result.error, bytes.data(), bytes.size());
        return result;
    }
    result.text = format_message(msg);
    if (bytes.size() > msg.bsdh.len)
        result.text += field("trailing", bytes.size() - msg.bsdh.len);
    return result;
}

int decode_stream(std::istream& in, std::ostream& out, std::ostream& err)
{
    bool bad_input = false;
    bool decode_failed = false;
    std::string line;
    for (unsigned long line_no = 1; std::getline(in, line); line_no++) {
        const HexLine parsed = parse_hex_line(line);
        if (!parsed.ok) {
            err << "sdp-decode: line " << line_no << ": " << parsed.error << "\n";
            bad_input = true;
            continue;
        }
        if (parsed.bytes.empty())
            continue;
        const DecodedText decoded = decode_and_format(parsed.bytes);
        if (decoded.error != wire::DecodeError::kNone) {
            out << "line " << line_no << ": " << decoded.text << "\n";
            decode_failed = true;
        } else {
            out << decoded.text << "\n";
        }
    }
    // getline() stops on EOF and on read errors alike; only badbit tells a
    // truncated read (e.g. EIO, or a directory given as the file) from EOF.
    if (in.bad()) {
        err << "sdp-decode: error reading input\n";
        bad_input = true;
    }
    out.flush();
    if (bad_input)
        return kExitUsage;
    return decode_failed ? kExitDecodeError : kExitOk;
}

} // namespace sdp::tools
