// SPDX-License-Identifier: GPL-2.0
//
// The differential TCP-vs-SDP conformance suite: scenario harness.
//
// A scenario is a function of a Ctx.  It opens sockets through the Ctx (so
// the same code runs over AF_INET/AF_INET6 TCP and over AF_INET_SDP) and
// appends what it observes to lanes of a trace: one lane per thread of the
// scenario ("srv", "cli", ...), each written by that one thread only, so the
// trace does not depend on thread scheduling.  The runner (main.cpp) runs
// every scenario once per family in a forked child and compares the traces.
#ifndef SDP_TESTS_CONFORMANCE_H
#define SDP_TESTS_CONFORMANCE_H

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <type_traits>
#include <vector>

namespace sdp::conformance {

// --- configuration -----------------------------------------------------------

// kInet: TCP over AF_INET/AF_INET6.  kSdp: AF_INET_SDP.  kIpproto: SDP as
// IPPROTO_SDP of AF_INET/AF_INET6, addressed exactly as TCP is.  Mixed, with
// IPPROTO_SDP sockets whose policy is SDP_POLICY_FALLBACK: kSdpToTcp, SDP
// clients (every socket but the harness's listeners) and TCP listeners;
// kTcpToSdp, TCP clients and SDP listeners.
enum class Family { kInet, kSdp, kIpproto, kSdpToTcp, kTcpToSdp };
enum class Ip { kV4, kV6 };

struct Config {
    int sdp_family = 27;
    int sdp_ipproto = 257;
    std::string addr4_a = "10.77.0.1";
    std::string addr4_b = "10.77.0.2";
    std::string addr6_a = "fd77::1";
    std::string addr6_b = "fd77::2";
    int port_base = 20000;
    int priv_port = 700;
    double scale = 1.0;
    // SDP_VM_WAIT_SCALE (default 1): the debug kernel of `make check-debug`
    // is several times slower, and pauses that wait for a state to settle
    // (fill_until_stable()) last that much longer there.
    int wait_scale = 1;
    bool host = false; // SDP_CONFORMANCE_HOST=1: testbed-only scenarios are skipped
};
Config& config();

// Scenario flags.
constexpr unsigned kTestbed = 1U << 0;   // needs the VM test bed (distinct addresses)
constexpr unsigned kTestbedV6 = 1U << 1; // the IPv6 variant needs the VM test bed

// Ports: each scenario run owns kPortsPerRun consecutive ports.
constexpr int kPortsPerRun = 8;

// --- results of calls ----------------------------------------------------------

// A syscall result with the errno captured right after the call:
//   Res r = CALL(recv(fd, buf, n, 0));
struct Res {
    long rc = 0;
    int err = 0;
    static Res capture(long rc) { return Res{rc, rc < 0 ? errno : 0}; }
    bool ok() const { return rc >= 0; }
    bool is(int e) const { return rc < 0 && err == e; }
};
#define CALL(expr) ::sdp::conformance::Res::capture(static_cast<long>(expr))

std::string errname(int err);
// "5", "0", "-1 EAGAIN"
std::string res_text(Res r);
std::string poll_text(int revents);
std::string epoll_text(uint32_t events);
std::string hex_text(const void* data, size_t len);

// --- trace ----------------------------------------------------------------

class Lane {
  public:
    Lane(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
    // One line of the trace.
    void log(std::string_view text);
    // "what = <result>"; returns the result.
    Res rec(std::string_view what, Res r);
    void val(std::string_view what, long long v);
    void flag(std::string_view what, bool v) { val(what, v ? 1 : 0); }
    // A value that is negative on failure (-errno), e.g. int_opt() or inq().
    void opt(std::string_view what, int v);
    // A call that returns a descriptor: "fd" instead of its number.
    Res rec_fd(std::string_view what, Res r);
    void txt(std::string_view what, std::string_view v);
    // A property the scenario requires regardless of the family (e.g. data
    // checksums).  A failed check fails the run even if both traces agree.
    void check(bool ok, std::string_view what);
    // Setup failed: log and end the scenario run (the child exits).
    [[noreturn]] void abort(std::string_view what);
    [[noreturn]] void abort(std::string_view what, Res r);
    const std::string& name() const { return name_; }

  private:
    std::string name_;
    int fd_;
};

// True once some Lane::check failed in this process.
bool check_failed();
// Fails the run as a failed Lane::check does.
void note_check_failed();

// --zerocopy (zerocopy.cpp): SO_ZEROCOPY on the harness's sockets and
// MSG_ZEROCOPY on every send, notifications drained and checked.
void zerocopy_mode(bool on);
bool zerocopy_mode();
void zerocopy_trace_fd(int fd);
// SO_ZEROCOPY on fd (at SOL_SDP where the kernel refuses it); 0 or -errno.
int zerocopy_enable(int fd);
// The run's end: drain and check every socket still open.
void zerocopy_finish();

// Terminates the stream of trace records (written by the child at the end).
constexpr std::string_view kTraceEnd = "\x01"
                                       "END";
// Exit codes of a scenario child.
constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 2;
constexpr int kExitAborted = 3;

// --- addresses ---------------------------------------------------------------

enum class Host { kA, kB, kAny, kMappedA, kMappedB, kLoopback, kNonLocal };

struct Addr {
    sockaddr_storage ss{};
    socklen_t len = 0;
    const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
    sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
};

// --- context -----------------------------------------------------------------

class Ctx {
  public:
    Ctx(Family family, Ip ip, int index, int run_pos, int trace_fd)
        : family_(family), ip_(ip), index_(index), run_pos_(run_pos), trace_fd_(trace_fd)
    {
    }
    ~Ctx();
    Ctx(const Ctx&) = delete;
    Ctx& operator=(const Ctx&) = delete;

    Family family() const { return family_; }
    Ip ip() const { return ip_; }
    bool sdp() const { return family_ != Family::kInet; }
    double scale() const { return config().scale; }

    // Lanes are created on first use; each must be written by one thread.
    Lane& lane(const std::string& name);

    // socket() of this family for an IP version (default: the scenario's).
    int domain(Ip ip) const;
    int domain() const { return domain(ip_); }
    // The protocol socket() gives for a listener of listener() or for any
    // other socket: 0, or IPPROTO_SDP's number.
    int protocol(bool listener = false) const;
    // The socket's SO_PROTOCOL: IPPROTO_TCP for protocol 0.
    int stream_protocol(bool listener = false) const
    {
        return protocol(listener) != 0 ? protocol(listener) : IPPROTO_TCP;
    }
    // Aborts on failure (logged on `l`).
    int socket(Lane& l, int type_flags = 0) { return socket(l, ip_, type_flags); }
    int socket(Lane& l, Ip ip, int type_flags = 0, bool listener = false);

    uint16_t port(int i) const;
    // The port below 1024 of this run (SDP_TEST_PRIV_PORT + run position).
    uint16_t priv_port() const { return static_cast<uint16_t>(config().priv_port + run_pos_); }
    Addr addr(Host host, int port_idx) const { return addr(ip_, host, port_idx); }
    Addr addr(Ip ip, Host host, int port_idx) const;
    Addr addr_port(Ip ip, Host host, uint16_t port) const;
    // "10.77.0.1:P0", "[fd77::2]:eph", "0.0.0.0:0" (+ " len=16" when asked).
    std::string fmt(const sockaddr* sa, socklen_t len) const;
    std::string sockname(int fd) const;
    std::string peername(int fd) const;

    // SO_REUSEADDR (unless !reuse), bind, listen; aborts on failure.
    int listener(Lane& l, const Addr& a, int backlog = 16, bool reuse = true, int type_flags = 0);
    // Connected pair for scenarios about something else than connection
    // setup: a non-blocking connect, accept, wait for completion (bounded),
    // both ends blocking.  Aborts on failure.
    struct Pair {
        int cli = -1;
        int srv = -1;
    };
    Pair pair(Lane& l, int listen_port_idx = 0) { return pair(l, ip_, listen_port_idx); }
    Pair pair(Lane& l, Ip ip, int listen_port_idx = 0);
    // Pair through an existing listener.
    Pair pair_via(Lane& l, int listen_fd, const Addr& dst);
    // Accept with a bounded wait for the pending connection.
    int accept_one(Lane& l, int listen_fd, int flags = 0, int timeout_ms = 10000);

  private:
    Family family_;
    Ip ip_;
    int index_;
    int run_pos_;
    int trace_fd_;
    std::mutex mu_;
    std::vector<std::unique_ptr<Lane>> lanes_;
};

// --- helpers ---------------------------------------------------------------

// poll() for `events` up to timeout; returns revents (0 on timeout).
int wait_poll(int fd, int events, int timeout_ms = 10000);
// Current revents for the full mask (IN|PRI|OUT|RDHUP), no waiting.
int poll_now(int fd);
// Poll until (revents & want) == want, then return the full current mask.
int poll_until(int fd, int want, int timeout_ms = 10000);
// What to wait for to see a closed connection's final mask.  TCP's
// tcp_done() sets TCP_CLOSE (poll: HUP) before it sets sk_shutdown
// (IN|RDHUP, and no more OUT): a poll between the two sees OUT|ERR|HUP, a
// window a slow kernel widens.  Every connection that ends, by reset or by
// FIN both ways, ends with both bits.
constexpr int kClosedMask = POLLHUP | POLLRDHUP;
bool wait_until(const std::function<bool()>& pred, int timeout_ms = 10000);
void sleep_ms(int ms);
int inq(int fd);                          // SIOCINQ or -errno
int outq(int fd);                         // SIOCOUTQ or -errno
int int_opt(int fd, int level, int name); // value or -errno
Res set_int_opt(int fd, int level, int name, int value);
void set_nonblock(int fd, bool on);
bool is_nonblock(int fd);

// Write all of buf (blocking socket, MSG_NOSIGNAL); false on error.
bool send_all(int fd, const void* buf, size_t len);
// Read exactly len bytes unless EOF/error first; returns bytes read.
size_t recv_exact(int fd, void* buf, size_t len);
// Read until EOF or error: bytes, FNV-1a hash, and how it ended.
struct Drain {
    uint64_t bytes = 0;
    uint64_t hash = 0;
    std::string end; // "EOF", "ECONNRESET", ...
};
Drain drain(int fd, size_t chunk = 65536);

// FNV-1a 64.
constexpr uint64_t kFnvInit = 14695981039346656037ULL;
uint64_t fnv(uint64_t h, const void* data, size_t len);
inline uint64_t fnv(const void* data, size_t len)
{
    return fnv(kFnvInit, data, len);
}
std::string hash_text(uint64_t h);

// Deterministic generator (splitmix64).
class Rng {
  public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next();
    // Uniform in [lo, hi].
    size_t range(size_t lo, size_t hi) { return lo + static_cast<size_t>(next() % (hi - lo + 1)); }
    void fill(void* buf, size_t len);

  private:
    uint64_t s_;
};

// Pattern byte stream: byte i of stream `seed` (cheap to regenerate).
uint8_t pattern_byte(uint64_t seed, uint64_t i);
void pattern_fill(uint64_t seed, uint64_t offset, void* buf, size_t len);

// A one-shot event between threads; waits are bounded and abort the run.
class Event {
  public:
    void set();
    bool is_set();
    void wait(Lane& l, std::string_view what, int timeout_ms = 20000);

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool set_ = false;
};

// std::thread that joins when it goes out of scope.
class Thread {
  public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Thread>>>
    explicit Thread(F&& f) : t_(std::forward<F>(f))
    {
    }
    ~Thread()
    {
        if (t_.joinable())
            t_.join();
    }
    Thread(const Thread&) = delete;
    Thread& operator=(const Thread&) = delete;
    void join() { t_.join(); }
    std::thread::native_handle_type handle() { return t_.native_handle(); }

  private:
    std::thread t_;
};

// Closes a descriptor when it goes out of scope.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept
    {
        reset(o.release());
        return *this;
    }
    int get() const { return fd_; }
    operator int() const { return fd_; } // NOLINT(google-explicit-constructor)
    int release()
    {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1);

  private:
    int fd_ = -1;
};

// --- registration --------------------------------------------------------------

using ScenarioFn = void (*)(Ctx&);

struct Scenario {
    std::string name;
    ScenarioFn fn;
    Ip ip;
    unsigned flags;
    int timeout_s; // watchdog per run (before --scale)
};
std::vector<Scenario>& registry();

struct Registrar {
    Registrar(const char* name, ScenarioFn fn, unsigned flags = 0, int timeout_s = 30);
    // Registers GROUP.v4.NAME and GROUP.v6.NAME.
    Registrar(const char* group, const char* name, ScenarioFn fn, unsigned flags = 0,
              int timeout_s = 30);
};

#define CONF_CAT2(a, b) a##b
#define CONF_CAT(a, b) CONF_CAT2(a, b)
#define CONF_DEFINE(...)                                                                           \
    static void CONF_CAT(scn_, __LINE__)(::sdp::conformance::Ctx & ctx);                           \
    static const ::sdp::conformance::Registrar CONF_CAT(reg_, __LINE__)(__VA_ARGS__);              \
    static void CONF_CAT(scn_, __LINE__)(::sdp::conformance::Ctx & ctx)
// SCENARIO("group.name") { body using `ctx` }
#define SCENARIO(name) CONF_DEFINE(name, CONF_CAT(scn_, __LINE__))
#define SCENARIO_X(name, flags, timeout_s)                                                         \
    CONF_DEFINE(name, CONF_CAT(scn_, __LINE__), flags, timeout_s)
// SCENARIO46("group", "name"): group.v4.name and group.v6.name; ctx.ip() tells which.
#define SCENARIO46(group, name) CONF_DEFINE(group, name, CONF_CAT(scn_, __LINE__))
#define SCENARIO46_X(group, name, flags, timeout_s)                                                \
    CONF_DEFINE(group, name, CONF_CAT(scn_, __LINE__), flags, timeout_s)

} // namespace sdp::conformance

#endif // SDP_TESTS_CONFORMANCE_H
