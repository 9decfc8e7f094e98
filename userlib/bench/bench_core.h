// SPDX-License-Identifier: GPL-2.0
//
// The pure parts of sdp-bench: command line, the tiny client/server
// protocol, the data pattern of --verify, percentiles and the output
// formats.  No sockets here, so the unit test (bench_core_test.cpp) covers
// exactly what the tool uses.
#ifndef SDP_BENCH_CORE_H
#define SDP_BENCH_CORE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sdp::bench {

enum class Role { kServer, kClient };
enum class Family { kInet, kInet6, kSdp };
enum class Mode : std::uint8_t { kStream = 1, kPingpong = 2 };
// How sends ask for zero copy: plain send(), MSG_ZEROCOPY with SO_ZEROCOPY
// (notifications on the error queue), io_uring's SEND_ZC.
enum class Zerocopy : std::uint8_t { kNone, kMsg, kUring };

const char* family_name(Family f);
const char* mode_name(Mode m);

struct Options {
    Role role = Role::kClient;
    Family family = Family::kInet;
    std::string addr; // empty: wildcard (server) / loopback (client)
    std::uint16_t port = 18520;
    Mode mode = Mode::kStream;
    std::vector<std::uint32_t> sizes = {65536};
    double duration_s = 0;        // stream / pingpong by time; 0: not given
    std::uint64_t bytes = 0;      // stream by volume, per size; 0: not given
    std::uint64_t iterations = 0; // pingpong; 0: not given
    std::uint64_t warmup = 0;     // pingpong warm-up round trips
    // Ping-pong: bytes of each request, the server answering each with a
    // message of the run's size (a storage read, a GET); 0: an echo.
    std::uint32_t request = 0;
    bool warmup_given = false;
    bool async = false;
    Zerocopy zerocopy = Zerocopy::kNone;
    bool csv = false;
    bool verify = false;
    bool quiet = false;
    std::uint64_t connections = 0; // server: exit after this many runs (0: never)
    double connect_timeout_s = 10; // client: retry refused connections this long
    // SDP_ZCOPY_THRESH for every socket (--family sdp only): 0 turns zero
    // copy off; -1: not given, the module's default (net.sdp.zcopy_thresh).
    std::int64_t zcopy_thresh = -1;
};

struct ParseResult {
    bool ok = false;
    bool help = false; // --help: print usage, exit 0
    std::string error; // when !ok
    Options opts;
};

// argv[1..argc-1]; argv[1] is the role.
ParseResult parse_args(int argc, const char* const* argv);
std::string usage();

// "64", "1k", "16K", "1m", "2G", "65536" (binary multiples).  nullopt when
// not a positive number that fits.
std::optional<std::uint64_t> parse_quantity(const std::string& text);
// "64,1k,64k": every element a positive quantity below 1 GiB.
std::optional<std::vector<std::uint32_t>> parse_sizes(const std::string& text);

// Defaults that depend on what was given (called by parse_args).
constexpr double kDefaultStreamDurationS = 3.0;
constexpr std::uint64_t kDefaultIterations = 1000;
std::uint64_t default_warmup(std::uint64_t iterations);

// --- protocol --------------------------------------------------------------
// The client opens one connection per size and sends a 24-byte header; all
// integers little-endian.
//   stream:   the client then sends count messages of `size` bytes (count 0:
//             until it shuts down its sending side); the receiver answers
//             with a Result once it has everything.
//   pingpong: the server echoes each `size`-byte message; count 0: until the
//             client shuts down.  Then the server sends a Result as well.
//             With a request size (bytes 12 to 15, 0: none) the client's
//             messages are requests of that size and the server answers
//             each with `size` bytes (the pattern at offset i x size).
constexpr std::uint32_t kHeaderMagic = 0x42504453; // "SDPB"
constexpr std::uint32_t kResultMagic = 0x52504453; // "SDPR"
constexpr std::uint8_t kFlagVerify = 1;
constexpr std::size_t kHeaderLen = 24;
constexpr std::size_t kResultLen = 32;

struct Header {
    Mode mode = Mode::kStream;
    std::uint8_t flags = 0;
    std::uint32_t size = 0;
    std::uint32_t request = 0; // pingpong: request bytes; 0: echo `size`
    std::uint64_t count = 0;
};

struct Result {
    std::uint32_t status = 0;     // 0 ok, 1 verify mismatch
    std::uint64_t bytes = 0;      // received by the server
    std::uint64_t elapsed_ns = 0; // server: first to last byte
    std::uint64_t bad_offset = 0; // first mismatching stream offset
};

void encode_header(const Header& h, std::uint8_t out[kHeaderLen]);
// nullopt, with `error` set, on bad magic, mode, size or request size.
std::optional<Header> decode_header(const std::uint8_t in[kHeaderLen], std::string& error);
void encode_result(const Result& r, std::uint8_t out[kResultLen]);
std::optional<Result> decode_result(const std::uint8_t in[kResultLen]);

// --- data pattern (--verify) -----------------------------------------------
// Byte at stream offset o; depends on the whole offset, so a lost,
// duplicated or reordered chunk shows.
std::uint8_t pattern_byte(std::uint64_t offset);
void pattern_fill(std::uint8_t* buf, std::size_t len, std::uint64_t offset);
// Index of the first byte differing from the pattern, or len.
std::size_t pattern_check(const std::uint8_t* buf, std::size_t len, std::uint64_t offset);

// --- statistics and output -------------------------------------------------
// Nearest-rank percentile (p in [0, 100]) of unsorted samples; 0 when empty.
double percentile(std::vector<double> samples, double p);

enum class Verified { kOff, kOk, kFailed };

struct Measurement {
    Family family = Family::kInet;
    Mode mode = Mode::kStream;
    std::uint32_t size = 0;
    std::uint32_t request = 0;  // pingpong with requests: their size (0: an echo)
    double throughput_MBps = 0; // 10^6 bytes per second
    double msgs_per_s = 0;
    std::optional<double> p50_us; // pingpong only
    std::optional<double> p99_us;
    std::uint64_t bytes = 0;
    Verified verified = Verified::kOff;
};

// An SDP socket's transfer counters (getsockopt SDP_STATS, struct
// sdp_sock_stats in uapi/sdp.h), the part sdp-bench reports.
struct SdpSocketStats {
    std::uint64_t tx_bytes = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t tx_bcopy_bytes = 0;
    std::uint64_t rx_bcopy_bytes = 0;
    std::uint64_t zc_tx_bytes = 0;
    std::uint64_t zc_rx_bytes = 0;
    std::uint64_t src_avail_sent = 0;
    std::uint64_t sink_avail_sent = 0;
    std::uint64_t rdma_writes = 0; // into the peer's SinkAvail
    std::uint64_t rdma_reads = 0;  // of the peer's SrcAvail
    std::uint64_t fallbacks = 0;   // zero-copy attempts that ended in bcopy, every reason
};
// "sent N B: x% by zero copy (...), y% by bcopy; received ...": the
// directions that moved bytes.
std::string format_sdp_stats(const SdpSocketStats& s);

const char* verified_name(Verified v);
std::string csv_header();
std::string format_csv(const Measurement& m);
std::string format_human(const Measurement& m, double seconds);

// The family number sdp.ko registered (its sysfs parameter), else the
// historical AF_INET_SDP.
int sdp_family_number();

} // namespace sdp::bench

#endif // SDP_BENCH_CORE_H
