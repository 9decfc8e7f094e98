// SPDX-License-Identifier: GPL-2.0
//
// The testable part of sdpstat: parsing /proc/net/sdp and /proc/net/sdpstats,
// formatting the socket table, the counters and their rates (text and JSON),
// the command line, and the driver run() that ties them together over an
// injectable System (files, clock, sleep).  main() in sdpstat.cpp only
// provides the real System, so everything the tool prints is produced (and
// tested) here.  The file formats are described in README.md.
#ifndef SDP_USERLIB_SDPSTAT_SDPSTAT_LIB_H
#define SDP_USERLIB_SDPSTAT_SDPSTAT_LIB_H

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace sdp::sdpstat {

// Exit statuses of sdpstat.
constexpr int kExitOk = 0;
constexpr int kExitMalformed = 1; // some line of a /proc file did not parse
constexpr int kExitUsage = 2;     // bad arguments, a /proc file missing or unreadable

// --- parsing -------------------------------------------------------------------

// A problem with one line of a /proc file (1-based line number).
struct LineError {
    unsigned long line = 0;
    std::string message;
};

// "10.77.0.1:5001" or "[fd77::1]:6000".  `address` is kept as the kernel
// wrote it, without the brackets.
struct Endpoint {
    bool ipv6 = false;
    std::string address;
    std::uint16_t port = 0;
};

std::optional<Endpoint> parse_endpoint(std::string_view text);

// "10.77.0.1:5001", "[fd77::1]:6000": how /proc/net/sdp writes it.
std::string format_endpoint(const Endpoint& ep);

// Decimal digits only (no sign, no spaces), at most UINT64_MAX.
std::optional<std::uint64_t> parse_u64(std::string_view text);

// One column of /proc/net/sdpinfo: its header's name and the value as the
// module wrote it (a number, or a name such as "active" or "-").
struct InfoField {
    std::string name;
    std::string value;
};

// One line of /proc/net/sdp.
struct Socket {
    std::uint64_t sl = 0;
    Endpoint local;
    Endpoint remote;
    std::string state; // "ESTABLISHED", "LISTEN", ...
    std::uint64_t tx_queue = 0;
    std::uint64_t rx_queue = 0;
    std::uint32_t uid = 0;
    std::uint64_t inode = 0;
    // Its line of /proc/net/sdpinfo but the inode (-e; attach_info()), in
    // column order; empty if not read or not listed there.
    std::vector<InfoField> info;
};

struct SocketTable {
    std::vector<Socket> sockets; // the lines that parsed, in file order
    std::vector<LineError> errors;
};

// The whole of /proc/net/sdp: the header line, then one socket per line.
// Blank lines are skipped; columns after inode are ignored (room for the
// module to add some).  A line that does not parse is reported in `errors`
// and the others are still returned.
SocketTable parse_sockets(std::string_view text);

// /proc/net/sdpinfo: a header line naming the columns, the first of which
// is `inode`, then one line per SDP socket.  The columns are taken by the
// header's names, so the module may add some.
struct SocketInfo {
    std::uint64_t inode = 0;
    std::vector<InfoField> fields; // every column but the inode
};

struct InfoTable {
    std::vector<SocketInfo> rows; // the lines that parsed, in file order
    std::vector<LineError> errors;
};

InfoTable parse_info(std::string_view text);

// Gives each socket its /proc/net/sdpinfo line, by inode.
void attach_info(std::vector<Socket>* sockets, const std::vector<SocketInfo>& info);

struct Counter {
    std::string name;
    std::uint64_t value = 0;
};

struct CounterSet {
    std::vector<Counter> counters; // the lines that parsed, in file order
    std::vector<LineError> errors;
};

// The whole of /proc/net/sdpstats: "name value" per line.  Blank lines are
// skipped; a malformed line or a repeated name is reported in `errors`.
CounterSet parse_counters(std::string_view text);

// --- counter groups --------------------------------------------------------------

enum class Group { kMessage, kDataPath, kZeroCopy, kConnection, kOther };

// tx_<msg>/rx_<msg> for a known SDP message: kMessage; tx_bytes, rx_bytes,
// tx_inline, credit_updates, credit_stalls, nagle_holds, cpu_copy_bytes:
// kDataPath; zcopy_*: kZeroCopy; conn_*: kConnection; anything else
// (including names the tool does not know yet): kOther.
Group classify(std::string_view name);

// The message names of the tx_/rx_ counters, in protocol (message id) order.
const std::vector<std::string_view>& message_names();

// --- formatting --------------------------------------------------------------------

// The socket table, aligned, header first, one line per socket (only LISTEN
// sockets when `listening_only`), each followed by its info fields as
// "name:value" on an indented line when it has any (a field that is 0 or
// "-" is left out, as is the line when none is left).  Ends with a newline.
std::string format_sockets(const std::vector<Socket>& sockets, bool listening_only);

// The counters grouped: messages as a tx/rx table, then data path,
// connections and other.  Zero counters are left out unless `all` (a message
// row is shown when tx or rx is nonzero).  Ends with a newline.
std::string format_counters(const std::vector<Counter>& counters, bool all);

// The change of one counter between two reads, per second.
struct Rate {
    std::string name;
    std::uint64_t delta = 0;
    double per_second = 0;
};

// Rates of the counters in `after` (in its order) since `before`, `seconds`
// apart.  A counter absent from `before` (new, or its line did not parse
// last time) has no rate yet and is left out rather than reported as a burst;
// one that went down was reset (module reloaded) and counts from zero.
std::vector<Rate> compute_rates(const std::vector<Counter>& before,
                                const std::vector<Counter>& after, double seconds);

// One interval report: "Interval N, per second" then the groups of
// format_counters() with rates ("%.1f"); zero rates are left out unless `all`.
std::string format_rates(const std::vector<Rate>& rates, bool all, std::uint64_t interval);

// The socket table and/or the counters (whichever is non-null) as one JSON
// object.  Every counter is included, zero or not.
std::string format_json(const std::vector<Socket>* sockets, bool listening_only,
                        const std::vector<Counter>* counters);

// One interval report as a JSON object on one line (JSON Lines), every
// counter included.
std::string format_rates_json(const std::vector<Rate>& rates, std::uint64_t interval);

// --- command line and driver ---------------------------------------------------------

struct Options {
    bool sockets = true;  // print the socket table
    bool counters = true; // print the counters
    bool all = false;
    bool listening = false;
    bool json = false;
    bool extended = false;   // -e: each socket's /proc/net/sdpinfo line too
    double interval = 0;     // seconds; 0: print once
    std::uint64_t count = 0; // interval reports; 0: until interrupted
    std::string proc_dir = "/proc/net";
};

struct ParsedArgs {
    bool ok = false;
    bool help = false;
    Options options;
    std::string error; // when !ok
};

// argv[1..]: the options of usage().  -s and -c select sections (both or
// neither: both); -n needs -i; -i cannot be combined with -s; -e needs the
// socket table (not with -c alone or -i).
ParsedArgs parse_args(const std::vector<std::string>& args);

std::string usage();

// What run() needs from the system, so tests can fake files and time.
class System {
  public:
    enum class ReadStatus { kOk, kNotFound, kError };
    struct ReadResult {
        ReadStatus status = ReadStatus::kError;
        std::string text;  // kOk
        std::string error; // kError: strerror text
    };

    System() = default;
    System(const System&) = delete;
    System& operator=(const System&) = delete;
    System(System&&) = delete;
    System& operator=(System&&) = delete;
    virtual ~System() = default;

    virtual ReadResult read_file(const std::string& path) = 0;
    virtual double now() = 0; // seconds, monotonic
    virtual void sleep_until(double when) = 0;
};

// The whole tool after argument parsing.  Returns the exit status:
// kExitUsage when a needed file is missing or unreadable (nothing printed on
// `out`), else kExitMalformed when some line did not parse (what did parse is
// still printed; each bad line reported once on `err` as "sdpstat:
// FILE:LINE: ..."), else kExitOk.
int run(const Options& options, System& sys, std::ostream& out, std::ostream& err);

} // namespace sdp::sdpstat

#endif // SDP_USERLIB_SDPSTAT_SDPSTAT_LIB_H
