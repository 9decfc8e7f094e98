// SPDX-License-Identifier: GPL-2.0
//
// sdp-bench: command line, protocol encoding, data pattern, statistics and
// output formatting (see bench_core.h).
#include "bench_core.h"

#include "uapi/sdp.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace sdp::bench {

const char* family_name(Family f)
{
    switch (f) {
    case Family::kInet:
        return "inet";
    case Family::kInet6:
        return "inet6";
    case Family::kSdp:
        return "sdp";
    }
    return "?";
}

const char* mode_name(Mode m)
{
    switch (m) {
    case Mode::kStream:
        return "stream";
    case Mode::kPingpong:
        return "pingpong";
    }
    return "?";
}

const char* verified_name(Verified v)
{
    switch (v) {
    case Verified::kOff:
        return "off";
    case Verified::kOk:
        return "ok";
    case Verified::kFailed:
        return "FAILED";
    }
    return "?";
}

std::string usage()
{
    return "usage: sdp-bench server|client [options]\n"
           "\n"
           "  --family inet|inet6|sdp   address family (default inet); sdp is AF_INET_SDP\n"
           "                            (the number in /sys/module/sdp/parameters/family,\n"
           "                            else 27), with IPv4 or IPv6 addresses like TCP\n"
           "  --addr A                  server: address to bind (default: any);\n"
           "                            client: server address (default: loopback)\n"
           "  --port P                  TCP-style port (default 18520; server: 0 picks one)\n"
           "  --mode stream|pingpong    one-way goodput or round-trip latency (default stream)\n"
           "  --sizes 64,1k,64k         message sizes, one run (connection) each (default 64k)\n"
           "  --duration S              stream/pingpong: seconds per size (stream default 3)\n"
           "  --bytes N                 stream: bytes per size instead of a duration\n"
           "  --iterations N            pingpong: round trips per size (default 1000)\n"
           "  --warmup N                pingpong: round trips not measured (default 10%,\n"
           "                            at most 100)\n"
           "  --request N               pingpong: send N-byte requests, the server answering\n"
           "                            each with a message of the run's size (default: the\n"
           "                            server echoes each message)\n"
           "  --async                   send/recv through io_uring (liburing)\n"
           "  --zerocopy msg|uring      sends with MSG_ZEROCOPY (SO_ZEROCOPY) or io_uring\n"
           "                            SEND_ZC; a buffer is sent again only after its\n"
           "                            previous send's notification\n"
           "  --verify                  send a pattern and check it on receipt\n"
           "  --csv                     one CSV line per size (header first):\n"
           "                            family,mode,size,throughput_MBps,msgs_per_s,p50_us,\n"
           "                            p99_us,bytes,verified\n"
           "  --quiet                   server: no line per run\n"
           "  --connections N           server: exit after N runs (default: serve forever)\n"
           "  --connect-timeout S       client: retry a refused connect this long (default 10)\n"
           "  --zcopy-thresh N          sdp: SDP_ZCOPY_THRESH on every socket (server: the\n"
           "                            accepted ones); 0 turns zero copy off (default: the\n"
           "                            module's net.sdp.zcopy_thresh)\n"
           "\n"
           "Stream goodput is measured by the receiver (the server) and sent back; MB is\n"
           "10^6 bytes.  Ping-pong reports round-trip percentiles after the warm-up.\n"
           "With --family sdp each run also reports how its socket moved the bytes (zero\n"
           "copy or bcopy, getsockopt SDP_STATS): on stdout, or on stderr with --csv.\n"
           "Exit status: 0 ok, 1 run failed (connection, I/O, verification), 2 usage.\n";
}

std::optional<std::uint64_t> parse_quantity(const std::string& text)
{
    if (text.empty() || text[0] < '0' || text[0] > '9')
        return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0)
        return std::nullopt;
    std::string suffix(end);
    unsigned shift = 0;
    if (!suffix.empty()) {
        switch (suffix[0]) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            return std::nullopt;
        }
        suffix.erase(0, 1);
        if (!suffix.empty() && suffix != "i" && suffix != "iB" && suffix != "B")
            return std::nullopt;
    }
    if (n == 0 || n > (UINT64_MAX >> shift))
        return std::nullopt;
    return static_cast<std::uint64_t>(n) << shift;
}

std::optional<std::vector<std::uint32_t>> parse_sizes(const std::string& text)
{
    std::vector<std::uint32_t> sizes;
    std::size_t pos = 0;
    while (true) {
        const std::size_t comma = text.find(',', pos);
        const std::string item =
            text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const auto q = parse_quantity(item);
        if (!q || *q >= (1ULL << 30))
            return std::nullopt;
        sizes.push_back(static_cast<std::uint32_t>(*q));
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return sizes;
}

std::uint64_t default_warmup(std::uint64_t iterations)
{
    return std::min<std::uint64_t>(100, iterations / 10);
}

namespace {

bool parse_seconds(const std::string& text, double& out)
{
    if (text.empty())
        return false;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(v) || v <= 0)
        return false;
    out = v;
    return true;
}

} // namespace

ParseResult parse_args(int argc, const char* const* argv)
{
    ParseResult r;
    Options& o = r.opts;
    auto fail = [&r](const std::string& msg) {
        r.ok = false;
        r.error = msg;
        return r;
    };
    if (argc < 2)
        return fail("missing role: server or client");
    const std::string role = argv[1];
    if (role == "--help" || role == "-h") {
        r.ok = true;
        r.help = true;
        return r;
    }
    if (role == "server")
        o.role = Role::kServer;
    else if (role == "client")
        o.role = Role::kClient;
    else
        return fail("unknown role '" + role + "' (server or client)");

    bool duration_given = false;
    bool bytes_given = false;
    bool iterations_given = false;
    for (int i = 2; i < argc; i++) {
        std::string arg = argv[i];
        std::string value;
        bool has_value = false;
        const std::size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg.erase(eq);
            has_value = true;
        }
        auto flag = [&](bool& field) {
            if (has_value)
                return false;
            field = true;
            return true;
        };
        // Options with an argument take it from "--opt=value" or the next word.
        auto need = [&]() -> bool {
            if (has_value)
                return true;
            if (i + 1 >= argc)
                return false;
            value = argv[++i];
            return true;
        };
        if (arg == "--help" || arg == "-h") {
            r.ok = true;
            r.help = true;
            return r;
        }
        if (arg == "--async") {
            if (!flag(o.async))
                return fail("--async takes no value");
        } else if (arg == "--csv") {
            if (!flag(o.csv))
                return fail("--csv takes no value");
        } else if (arg == "--verify") {
            if (!flag(o.verify))
                return fail("--verify takes no value");
        } else if (arg == "--quiet") {
            if (!flag(o.quiet))
                return fail("--quiet takes no value");
        } else if (arg == "--family" || arg == "--addr" || arg == "--port" || arg == "--mode" ||
                   arg == "--sizes" || arg == "--duration" || arg == "--bytes" ||
                   arg == "--iterations" || arg == "--warmup" || arg == "--connections" ||
                   arg == "--connect-timeout" || arg == "--zcopy-thresh" || arg == "--zerocopy" ||
                   arg == "--request") {
            if (!need())
                return fail(arg + " needs a value");
            if (arg == "--family") {
                if (value == "inet")
                    o.family = Family::kInet;
                else if (value == "inet6")
                    o.family = Family::kInet6;
                else if (value == "sdp")
                    o.family = Family::kSdp;
                else
                    return fail("unknown family '" + value + "' (inet, inet6 or sdp)");
            } else if (arg == "--addr") {
                if (value.empty())
                    return fail("--addr needs a value");
                o.addr = value;
            } else if (arg == "--port") {
                char* end = nullptr;
                errno = 0;
                const unsigned long p = std::strtoul(value.c_str(), &end, 10);
                if (value.empty() || *end != '\0' || errno != 0 || p > 65535 || value[0] == '-')
                    return fail("bad port '" + value + "'");
                o.port = static_cast<std::uint16_t>(p);
            } else if (arg == "--zerocopy") {
                if (value == "msg")
                    o.zerocopy = Zerocopy::kMsg;
                else if (value == "uring")
                    o.zerocopy = Zerocopy::kUring;
                else
                    return fail("unknown --zerocopy '" + value + "' (msg or uring)");
            } else if (arg == "--mode") {
                if (value == "stream")
                    o.mode = Mode::kStream;
                else if (value == "pingpong")
                    o.mode = Mode::kPingpong;
                else
                    return fail("unknown mode '" + value + "' (stream or pingpong)");
            } else if (arg == "--sizes") {
                const auto s = parse_sizes(value);
                if (!s)
                    return fail("bad --sizes '" + value +
                                "' (comma-separated sizes, e.g. 64,1k,64k; each below 1 GiB)");
                o.sizes = *s;
            } else if (arg == "--duration") {
                if (!parse_seconds(value, o.duration_s))
                    return fail("bad --duration '" + value + "' (positive seconds)");
                duration_given = true;
            } else if (arg == "--connect-timeout") {
                if (!parse_seconds(value, o.connect_timeout_s))
                    return fail("bad --connect-timeout '" + value + "' (positive seconds)");
            } else if (arg == "--zcopy-thresh") {
                if (value == "0") {
                    o.zcopy_thresh = 0;
                } else {
                    const auto q = parse_quantity(value);
                    if (!q || *q > static_cast<std::uint64_t>(INT_MAX))
                        return fail("bad --zcopy-thresh '" + value +
                                    "' (bytes, e.g. 64k; 0 turns zero copy off)");
                    o.zcopy_thresh = static_cast<std::int64_t>(*q);
                }
            } else if (arg == "--request") {
                const auto q = parse_quantity(value);
                if (!q || *q >= (std::uint64_t{1} << 30))
                    return fail("bad --request '" + value + "' (bytes below 1 GiB, e.g. 64)");
                o.request = static_cast<std::uint32_t>(*q);
            } else if (arg == "--warmup" && value == "0") {
                o.warmup = 0;
                o.warmup_given = true;
            } else {
                const auto q = parse_quantity(value);
                if (!q) {
                    std::string msg = "bad " + arg;
                    msg += " '" + value + "' (a positive number)";
                    return fail(msg);
                }
                if (arg == "--bytes") {
                    o.bytes = *q;
                    bytes_given = true;
                } else if (arg == "--iterations") {
                    o.iterations = *q;
                    iterations_given = true;
                } else if (arg == "--warmup") {
                    o.warmup = *q;
                    o.warmup_given = true;
                } else {
                    o.connections = *q;
                }
            }
        } else {
            return fail("unknown option '" + arg + "'");
        }
    }

    if (duration_given && bytes_given)
        return fail("--duration and --bytes exclude each other");
    if (o.mode == Mode::kPingpong && bytes_given)
        return fail("--bytes is for --mode stream; ping-pong takes --iterations or --duration");
    if (o.mode == Mode::kStream && (iterations_given || o.warmup_given))
        return fail("--iterations and --warmup are for --mode pingpong");
    if (o.mode == Mode::kStream && o.request != 0)
        return fail("--request is for --mode pingpong");
    if (o.role == Role::kServer && o.request != 0)
        return fail("the client sets --request");
    if (duration_given && iterations_given)
        return fail("--duration and --iterations exclude each other");
    if (o.role == Role::kServer &&
        (duration_given || bytes_given || iterations_given || o.warmup_given))
        return fail("the client sets --duration, --bytes, --iterations and --warmup");
    if (o.zcopy_thresh >= 0 && o.family != Family::kSdp)
        return fail("--zcopy-thresh is for --family sdp");
    if (o.role == Role::kClient && o.port == 0)
        return fail("the client needs a port other than 0");
    if (o.mode == Mode::kStream && !duration_given && !bytes_given)
        o.duration_s = kDefaultStreamDurationS;
    if (o.mode == Mode::kPingpong && !duration_given && !iterations_given)
        o.iterations = kDefaultIterations;
    if (o.mode == Mode::kPingpong && !o.warmup_given)
        o.warmup = o.iterations != 0 ? default_warmup(o.iterations) : 10;
    r.ok = true;
    return r;
}

// --- protocol ----------------------------------------------------------------

namespace {

void put32(std::uint8_t* p, std::uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

void put64(std::uint8_t* p, std::uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint32_t get32(const std::uint8_t* p)
{
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

std::uint64_t get64(const std::uint8_t* p)
{
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

} // namespace

// magic(4) mode(1) flags(1) reserved(2) size(4) reserved(4) count(8)
void encode_header(const Header& h, std::uint8_t out[kHeaderLen])
{
    std::memset(out, 0, kHeaderLen);
    put32(out, kHeaderMagic);
    out[4] = static_cast<std::uint8_t>(h.mode);
    out[5] = h.flags;
    put32(out + 8, h.size);
    put32(out + 12, h.request);
    put64(out + 16, h.count);
}

std::optional<Header> decode_header(const std::uint8_t in[kHeaderLen], std::string& error)
{
    if (get32(in) != kHeaderMagic) {
        error = "bad magic (not an sdp-bench client?)";
        return std::nullopt;
    }
    Header h;
    if (in[4] != static_cast<std::uint8_t>(Mode::kStream) &&
        in[4] != static_cast<std::uint8_t>(Mode::kPingpong)) {
        error = "unknown mode " + std::to_string(in[4]);
        return std::nullopt;
    }
    h.mode = static_cast<Mode>(in[4]);
    h.flags = in[5];
    h.size = get32(in + 8);
    h.request = get32(in + 12);
    h.count = get64(in + 16);
    if (h.size == 0 || h.size >= (1U << 30)) {
        error = "bad message size " + std::to_string(h.size);
        return std::nullopt;
    }
    if (h.request >= (1U << 30) || (h.request != 0 && h.mode != Mode::kPingpong)) {
        error = "bad request size " + std::to_string(h.request);
        return std::nullopt;
    }
    return h;
}

// magic(4) status(4) bytes(8) elapsed_ns(8) bad_offset(8)
void encode_result(const Result& r, std::uint8_t out[kResultLen])
{
    put32(out, kResultMagic);
    put32(out + 4, r.status);
    put64(out + 8, r.bytes);
    put64(out + 16, r.elapsed_ns);
    put64(out + 24, r.bad_offset);
}

std::optional<Result> decode_result(const std::uint8_t in[kResultLen])
{
    if (get32(in) != kResultMagic)
        return std::nullopt;
    Result r;
    r.status = get32(in + 4);
    r.bytes = get64(in + 8);
    r.elapsed_ns = get64(in + 16);
    r.bad_offset = get64(in + 24);
    return r;
}

// --- pattern -------------------------------------------------------------------

namespace {

// One 64-bit word per 8-byte block of the stream (splitmix64 finaliser).
std::uint64_t pattern_word(std::uint64_t block)
{
    std::uint64_t z = block + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

} // namespace

std::uint8_t pattern_byte(std::uint64_t offset)
{
    return static_cast<std::uint8_t>(pattern_word(offset / 8) >> (8 * (offset % 8)));
}

void pattern_fill(std::uint8_t* buf, std::size_t len, std::uint64_t offset)
{
    std::size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        buf[i] = pattern_byte(offset + i);
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        const std::uint64_t w = pattern_word((offset + i) / 8);
        put64(buf + i, w);
    }
    for (; i < len; i++)
        buf[i] = pattern_byte(offset + i);
}

std::size_t pattern_check(const std::uint8_t* buf, std::size_t len, std::uint64_t offset)
{
    std::size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        if (buf[i] != pattern_byte(offset + i))
            return i;
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        if (get64(buf + i) != pattern_word((offset + i) / 8))
            break;
    }
    for (; i < len; i++) {
        if (buf[i] != pattern_byte(offset + i))
            return i;
    }
    return len;
}

// --- statistics and output ---------------------------------------------------------

double percentile(std::vector<double> samples, double p)
{
    if (samples.empty())
        return 0;
    std::sort(samples.begin(), samples.end());
    p = std::clamp(p, 0.0, 100.0);
    // Nearest rank: the smallest sample with at least p% of the samples at or
    // below it.
    const double rank = std::ceil(p / 100.0 * static_cast<double>(samples.size()));
    std::size_t idx = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
    idx = std::min(idx, samples.size() - 1);
    return samples[idx];
}

std::string csv_header()
{
    return "family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified";
}

namespace {

std::string fmt(const char* format, double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

} // namespace

std::string format_csv(const Measurement& m)
{
    std::string s;
    s += family_name(m.family);
    s += ',';
    s += mode_name(m.mode);
    s += ',' + std::to_string(m.size);
    s += ',' + fmt("%.3f", m.throughput_MBps);
    s += ',' + fmt("%.1f", m.msgs_per_s);
    s += ',' + (m.p50_us ? fmt("%.2f", *m.p50_us) : std::string());
    s += ',' + (m.p99_us ? fmt("%.2f", *m.p99_us) : std::string());
    s += ',' + std::to_string(m.bytes);
    s += ',';
    s += verified_name(m.verified);
    return s;
}

namespace {

std::string share(std::uint64_t part, std::uint64_t whole)
{
    return fmt("%.1f%%",
               whole != 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
}

} // namespace

std::string format_sdp_stats(const SdpSocketStats& s)
{
    std::string out;
    if (s.tx_bytes != 0 || s.rx_bytes == 0) {
        out += "sent " + std::to_string(s.tx_bytes) + " B: " + share(s.zc_tx_bytes, s.tx_bytes) +
               " by zero copy (" + std::to_string(s.src_avail_sent) + " SrcAvail, " +
               std::to_string(s.rdma_writes) + " RDMA Writes), " +
               share(s.tx_bcopy_bytes, s.tx_bytes) + " by bcopy";
    }
    if (s.rx_bytes != 0) {
        if (!out.empty())
            out += "; ";
        out += "received " + std::to_string(s.rx_bytes) +
               " B: " + share(s.zc_rx_bytes, s.rx_bytes) + " by zero copy (" +
               std::to_string(s.sink_avail_sent) + " SinkAvail, " + std::to_string(s.rdma_reads) +
               " RDMA Reads), " + share(s.rx_bcopy_bytes, s.rx_bytes) + " by bcopy";
    }
    if (s.fallbacks != 0)
        out += "; " + std::to_string(s.fallbacks) + " zero-copy fallbacks to bcopy";
    return out;
}

std::string format_human(const Measurement& m, double seconds)
{
    std::string s = std::string(family_name(m.family)) + " " + mode_name(m.mode) + " " +
                    std::to_string(m.size) + " B: ";
    if (m.mode == Mode::kStream) {
        s += fmt("%.2f MB/s, ", m.throughput_MBps) + fmt("%.0f msg/s, ", m.msgs_per_s) +
             std::to_string(m.bytes) + " bytes in " + fmt("%.2f s", seconds) + " (at the receiver)";
    } else if (m.request != 0) {
        s += std::to_string(m.request) + " B requests, round trip p50 " +
             fmt("%.2f us", m.p50_us.value_or(0)) + ", p99 " +
             fmt("%.2f us", m.p99_us.value_or(0)) + ", " +
             fmt("%.0f round trips/s, ", m.msgs_per_s) +
             fmt("%.2f MB/s of responses", m.throughput_MBps);
    } else {
        s += "round trip p50 " + fmt("%.2f us", m.p50_us.value_or(0)) + ", p99 " +
             fmt("%.2f us", m.p99_us.value_or(0)) + ", " +
             fmt("%.0f round trips/s, ", m.msgs_per_s) +
             fmt("%.2f MB/s each way", m.throughput_MBps);
    }
    s += std::string(", verify ") + verified_name(m.verified);
    return s;
}

int sdp_family_number()
{
    std::ifstream in(SDP_FAMILY_SYSFS_PATH);
    int n = 0;
    if (in >> n && n > 0)
        return n;
    return AF_INET_SDP;
}

} // namespace sdp::bench
