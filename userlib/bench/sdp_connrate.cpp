// SPDX-License-Identifier: GPL-2.0
//
// sdp-connrate: how fast connections are set up, and what an idle one
// costs, for TCP, SDP, rsockets and the raw RDMA CM (the ceiling: an
// rdma_cm connect/accept with a QP and its CQs, nothing else).  One process
// holds both ends: a thread accepts, the main thread connects `--count`
// times one after another and keeps every connection open, then measures
// the memory the guest lost (MemAvailable, Slab and VmallocUsed from
// /proc/meminfo, both ends, kernel and user) and checks data on a subset of
// them.  Slab plus VmallocUsed is the kernel memory the connections hold
// (VmallocUsed counts mapped pages, not guard pages): the providers'
// queues are vmalloc memory (Soft-RoCE's), the rest is slab.
// `sdp-connrate --help` for the options.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_core.h"

namespace {

enum class Family { kTcp, kSdp, kRsocket, kRdmaCm };

struct Options {
    Family family = Family::kTcp;
    std::string family_name = "tcp";
    std::string addr = "127.0.0.1";
    int port = 7300;
    int count = 100;
    int verify = 10;
    bool csv = false;
};

void usage(FILE* to)
{
    std::fprintf(to, "usage: sdp-connrate --family tcp|inet|sdp|rsocket|rdmacm [--addr IPV4]\n"
                     "                    [--port N]\n"
                     "                    [--count N] [--verify K] [--csv]\n"
                     "Opens N connections to a listener of its own, one after another, keeps\n"
                     "them open, and reports connections/s, the memory each cost (both ends)\n"
                     "and whether K of them, picked at random, carry data both ways.\n"
                     "sdp: socket(AF_INET_SDP); rsocket: librdmacm's rsockets with their\n"
                     "defaults, the ends librdmacm's own thread accepts (no raccept(), no data\n"
                     "check); rdmacm: rdma_create_ep + rdma_connect with a one-entry RC QP\n"
                     "(no data check).\n");
}

bool parse_int(const char* s, int min, int* out)
{
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > 1000000)
        return false;
    *out = static_cast<int>(v);
    return true;
}

bool parse(int argc, char** argv, Options* o)
{
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--help") {
            usage(stdout);
            std::exit(0);
        }
        if (a == "--csv") {
            o->csv = true;
            continue;
        }
        if (i + 1 >= argc)
            return false;
        const char* v = argv[++i];
        if (a == "--family") {
            o->family_name = v;
            if (o->family_name == "tcp" || o->family_name == "inet")
                o->family = Family::kTcp;
            else if (o->family_name == "sdp")
                o->family = Family::kSdp;
            else if (o->family_name == "rsocket" || o->family_name == "rsockets")
                o->family = Family::kRsocket;
            else if (o->family_name == "rdmacm")
                o->family = Family::kRdmaCm;
            else
                return false;
        } else if (a == "--addr") {
            o->addr = v;
        } else if (a == "--port") {
            if (!parse_int(v, 1, &o->port) || o->port > 65535)
                return false;
        } else if (a == "--count") {
            if (!parse_int(v, 1, &o->count))
                return false;
        } else if (a == "--verify") {
            if (!parse_int(v, 0, &o->verify))
                return false;
        } else {
            return false;
        }
    }
    in_addr probe{};
    return inet_pton(AF_INET, o->addr.c_str(), &probe) == 1;
}

// /proc/meminfo fields, KiB.
struct Mem {
    long available = 0;
    long slab = 0;
    long vmalloc = 0;
};

Mem meminfo()
{
    Mem m;
    std::ifstream in("/proc/meminfo");
    std::string key;
    long value = 0;
    std::string unit;
    while (in >> key >> value) {
        std::getline(in, unit);
        if (key == "MemAvailable:")
            m.available = value;
        else if (key == "Slab:")
            m.slab = value;
        else if (key == "VmallocUsed:")
            m.vmalloc = value;
    }
    return m;
}

struct Result {
    int connected = 0;
    int accepted = 0;
    double seconds = 0;
    int err = 0; // errno of the connect that failed
    std::string failed_call;
    int verified = 0;
    int verify_failed = 0;
};

// The socket calls of a run: the kernel's, or rsockets' (librdmacm's
// user-space sockets, whose descriptors only its own calls know).
struct SocketApi {
    int (*socket)(int, int, int);
    int (*setsockopt)(int, int, int, const void*, socklen_t);
    int (*bind)(int, const sockaddr*, socklen_t);
    int (*listen)(int, int);
    int (*accept)(int, sockaddr*, socklen_t*);
    int (*connect)(int, const sockaddr*, socklen_t);
    int (*poll)(pollfd*, nfds_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recv)(int, void*, size_t, int);
    int (*close)(int);
    int (*fcntl)(int, int, ...);
    int send_flags; // rsockets raise no SIGPIPE and know no MSG_NOSIGNAL
    // rsockets: librdmacm's own thread accepts the connections (QP,
    // buffers, rdma_accept()); raccept() only hands them over, and with
    // librdmacm 44 (Debian 12) it hangs after a few: it gives the socket
    // to the library's CM thread, which then dispatches a stale poll
    // result and waits for good in rdma_get_cm_event() on a channel with
    // no event (fixed upstream by "librdmacm: cm_svc: don't dispatch
    // stale CM events after add/remove", 2026), even with every
    // connection up before the first raccept().  So the run counts what
    // rconnect() set up, with the library's accepted ends, and leaves out
    // raccept(), the data check and the closes (the exit frees them).
    bool library_accepts;
};

const SocketApi kKernelSockets = {::socket,  ::setsockopt, ::bind, ::listen, ::accept,
                                  ::connect, ::poll,       ::send, ::recv,   ::close,
                                  ::fcntl,   MSG_NOSIGNAL, false};
const SocketApi kRsockets = {rsocket, rsetsockopt, rbind,  rlisten, raccept, rconnect, rpoll,
                             rsend,   rrecv,       rclose, rfcntl,  0,       true};

// Both ends of `count` connections between sockets of one family.
class SocketRun {
  public:
    explicit SocketRun(const Options& o)
        : o_(o), api_(o.family == Family::kRsocket ? kRsockets : kKernelSockets)
    {
        domain_ = o.family == Family::kSdp ? sdp::bench::sdp_family_number() : AF_INET;
        to_.sin_family = AF_INET; // SDP addresses as TCP does
        to_.sin_port = htons(static_cast<uint16_t>(o.port));
        inet_pton(AF_INET, o.addr.c_str(), &to_.sin_addr);
    }

    bool listen(std::string* why)
    {
        lfd_ = api_.socket(domain_, SOCK_STREAM, 0);
        const int one = 1;
        if (lfd_ >= 0)
            api_.setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (lfd_ < 0 ||
            api_.bind(lfd_, reinterpret_cast<const sockaddr*>(&to_), sizeof(to_)) != 0 ||
            api_.listen(lfd_, 4096) != 0 || api_.fcntl(lfd_, F_SETFL, O_NONBLOCK) != 0) {
            *why = std::string("listener: ") + std::strerror(errno);
            return false;
        }
        return true;
    }

    void accept_loop()
    {
        while (!stop_.load()) {
            const int fd = api_.accept(lfd_, nullptr, nullptr);
            if (fd < 0) {
                pollfd p{lfd_, POLLIN, 0};
                api_.poll(&p, 1, 100);
                continue;
            }
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "accepted\n");
            std::lock_guard<std::mutex> g(mu_);
            server_.push_back(fd);
        }
    }

    void connect_all(Result* r)
    {
        for (int i = 0; i < o_.count; i++) {
            const int fd = api_.socket(domain_, SOCK_STREAM, 0);
            if (fd < 0) {
                r->err = errno;
                r->failed_call = "socket";
                return;
            }
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "connect %d\n", i);
            if (api_.connect(fd, reinterpret_cast<const sockaddr*>(&to_), sizeof(to_)) != 0) {
                r->err = errno;
                r->failed_call = "connect";
                api_.close(fd);
                return;
            }
            client_.push_back(fd);
            r->connected++;
        }
    }

    int accepted()
    {
        std::lock_guard<std::mutex> g(mu_);
        return static_cast<int>(server_.size());
    }

    bool library_accepts() const { return api_.library_accepts; }

    void stop() { stop_.store(true); }

    // K connections at random: 64 bytes each way.  The server's end is the
    // one accepted socket the bytes arrive on.
    void verify(Result* r)
    {
        std::vector<pollfd> server;
        {
            std::lock_guard<std::mutex> g(mu_);
            for (const int fd : server_)
                server.push_back(pollfd{fd, POLLIN, 0});
        }
        std::mt19937 rng(12345);
        std::vector<int> pick(client_.size());
        for (size_t i = 0; i < pick.size(); i++)
            pick[i] = static_cast<int>(i);
        std::shuffle(pick.begin(), pick.end(), rng);
        const int k = std::min(o_.verify, static_cast<int>(pick.size()));
        for (int j = 0; j < k; j++) {
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "verify %d\n", j);
            const int c = client_[static_cast<size_t>(pick[static_cast<size_t>(j)])];
            if (exchange(c, &server, pick[static_cast<size_t>(j)]))
                r->verified++;
            else
                r->verify_failed++;
        }
    }

    void close_all()
    {
        for (const int fd : client_)
            api_.close(fd);
        std::lock_guard<std::mutex> g(mu_);
        for (const int fd : server_)
            api_.close(fd);
        if (lfd_ >= 0)
            api_.close(lfd_);
    }

  private:
    // All n bytes from fd, each wait bounded (5 s).
    bool recv_all(int fd, char* buf, size_t n)
    {
        size_t got = 0;
        while (got < n) {
            pollfd p{fd, POLLIN, 0};
            if (api_.poll(&p, 1, 5000) != 1)
                return false;
            const ssize_t r = api_.recv(fd, buf + got, n - got, 0);
            if (r <= 0)
                return false;
            got += static_cast<size_t>(r);
        }
        return true;
    }

    // Client c sends 64 bytes; exactly one accepted socket gets them and
    // sends them back inverted.  Every wait is bounded (5 s).
    bool exchange(int c, std::vector<pollfd>* server, int index)
    {
        char out[64];
        char in[64];
        for (size_t i = 0; i < sizeof(out); i++)
            out[i] = static_cast<char>(index * 31 + static_cast<int>(i));
        if (api_.send(c, out, sizeof(out), api_.send_flags) != static_cast<ssize_t>(sizeof(out)))
            return false;
        for (pollfd& p : *server)
            p.revents = 0;
        if (api_.poll(server->data(), server->size(), 5000) != 1)
            return false;
        int s = -1;
        for (const pollfd& p : *server)
            if (p.revents != 0)
                s = p.fd;
        if (s < 0 || !recv_all(s, in, sizeof(in)) || std::memcmp(in, out, sizeof(in)) != 0)
            return false;
        for (char& b : in)
            b = static_cast<char>(~b);
        char back[64];
        return api_.send(s, in, sizeof(in), api_.send_flags) == static_cast<ssize_t>(sizeof(in)) &&
               recv_all(c, back, sizeof(back)) && std::memcmp(back, in, sizeof(back)) == 0;
    }

    const Options& o_;
    const SocketApi& api_;
    int domain_ = AF_INET;
    sockaddr_in to_{};
    int lfd_ = -1;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<int> server_;
    std::vector<int> client_;
};

// The raw RDMA CM: synchronous endpoints (rdma_create_ep), each with an RC
// QP of one entry per queue and the CQs librdmacm makes for it.
class CmRun {
  public:
    explicit CmRun(const Options& o) : o_(o)
    {
        attr_.cap.max_send_wr = 1;
        attr_.cap.max_recv_wr = 1;
        attr_.cap.max_send_sge = 1;
        attr_.cap.max_recv_sge = 1;
        attr_.qp_type = IBV_QPT_RC;
        attr_.sq_sig_all = 0;
    }

    ~CmRun()
    {
        if (passive_info_ != nullptr)
            rdma_freeaddrinfo(passive_info_);
        if (active_info_ != nullptr)
            rdma_freeaddrinfo(active_info_);
    }

    bool listen(std::string* why)
    {
        const std::string port = std::to_string(o_.port);
        rdma_addrinfo hints{};
        hints.ai_flags = RAI_PASSIVE;
        hints.ai_port_space = RDMA_PS_TCP;
        if (rdma_getaddrinfo(o_.addr.c_str(), port.c_str(), &hints, &passive_info_) != 0) {
            *why = std::string("rdma_getaddrinfo (passive): ") + std::strerror(errno);
            return false;
        }
        hints.ai_flags = 0;
        if (rdma_getaddrinfo(o_.addr.c_str(), port.c_str(), &hints, &active_info_) != 0) {
            *why = std::string("rdma_getaddrinfo: ") + std::strerror(errno);
            return false;
        }
        ibv_qp_init_attr attr = attr_;
        if (rdma_create_ep(&listen_, passive_info_, nullptr, &attr) != 0 ||
            rdma_listen(listen_, 4096) != 0) {
            *why = std::string("listener: ") + std::strerror(errno);
            return false;
        }
        return true;
    }

    void accept_loop()
    {
        while (!stop_.load()) {
            pollfd p{listen_->channel->fd, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0)
                continue;
            rdma_cm_id* id = nullptr;
            if (rdma_get_request(listen_, &id) != 0)
                continue;
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "request\n");
            if (rdma_accept(id, nullptr) != 0) {
                rdma_destroy_ep(id);
                continue;
            }
            std::lock_guard<std::mutex> g(mu_);
            server_.push_back(id);
        }
    }

    void connect_all(Result* r)
    {
        for (int i = 0; i < o_.count; i++) {
            rdma_cm_id* id = nullptr;
            ibv_qp_init_attr attr = attr_;
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "connect %d\n", i);
            if (rdma_create_ep(&id, active_info_, nullptr, &attr) != 0) {
                r->err = errno;
                r->failed_call = "rdma_create_ep";
                return;
            }
            if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
                std::fprintf(stderr, "created %d\n", i);
            if (rdma_connect(id, nullptr) != 0) {
                r->err = errno;
                r->failed_call = "rdma_connect";
                rdma_destroy_ep(id);
                return;
            }
            client_.push_back(id);
            r->connected++;
        }
    }

    int accepted()
    {
        std::lock_guard<std::mutex> g(mu_);
        return static_cast<int>(server_.size());
    }

    void stop() { stop_.store(true); }

    void close_all()
    {
        // No rdma_disconnect(): on a synchronous id it waits for the
        // peer's DREP; destroying the id ends the connection as well.
        for (rdma_cm_id* id : client_)
            rdma_destroy_ep(id);
        std::lock_guard<std::mutex> g(mu_);
        for (rdma_cm_id* id : server_)
            rdma_destroy_ep(id);
        if (listen_ != nullptr)
            rdma_destroy_ep(listen_);
    }

  private:
    const Options& o_;
    ibv_qp_init_attr attr_{};
    rdma_addrinfo* passive_info_ = nullptr;
    rdma_addrinfo* active_info_ = nullptr;
    rdma_cm_id* listen_ = nullptr;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<rdma_cm_id*> server_;
    std::vector<rdma_cm_id*> client_;
};

// Enough descriptors for both ends of every connection (and the CM's
// event channels).
void raise_nofile()
{
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

template <class Run> int measure(const Options& o, Run* run, Result* r)
{
    std::string why;
    if (!run->listen(&why)) {
        std::fprintf(stderr, "sdp-connrate: %s\n", why.c_str());
        return 1;
    }
    bool library_accepts = false;
    if constexpr (std::is_same_v<Run, SocketRun>)
        library_accepts = run->library_accepts();
    std::thread acceptor;
    if (!library_accepts)
        acceptor = std::thread([run] { run->accept_loop(); });
    const Mem before = meminfo();
    const auto t0 = std::chrono::steady_clock::now();
    run->connect_all(r);
    // The acceptor may be a little behind the last connect.
    for (int i = 0; i < 3000 && !library_accepts && run->accepted() < r->connected; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto t1 = std::chrono::steady_clock::now();
    r->accepted = library_accepts ? r->connected : run->accepted();
    r->seconds = std::chrono::duration<double>(t1 - t0).count();
    const Mem after = meminfo();
    // The acceptor stops first: rsockets' rpoll() is not for two threads
    // at once (the second one's never returned).
    run->stop();
    if (acceptor.joinable())
        acceptor.join();
    if constexpr (std::is_same_v<Run, SocketRun>) {
        if (!library_accepts)
            run->verify(r);
    }

    const int n = r->connected > 0 ? r->connected : 1;
    const double mem_kib = static_cast<double>(before.available - after.available) / n;
    const double slab_kib = static_cast<double>(after.slab - before.slab) / n;
    const double vmalloc_kib = static_cast<double>(after.vmalloc - before.vmalloc) / n;
    const double rate = r->seconds > 0 ? r->connected / r->seconds : 0;
    const bool checked = o.family != Family::kRdmaCm && !library_accepts;
    const std::string error = r->err != 0 ? r->failed_call + " " + std::strerror(r->err) + " at " +
                                                std::to_string(r->connected + 1)
                                          : "";
    if (o.csv) {
        std::printf("family,connections,accepted,seconds,conns_per_s,mem_kib_per_conn,"
                    "slab_kib_per_conn,vmalloc_kib_per_conn,verified,verify_failed,error\n");
        std::printf("%s,%d,%d,%.3f,%.1f,%.1f,%.1f,%.1f,%s,%d,%s\n", o.family_name.c_str(),
                    r->connected, r->accepted, r->seconds, rate, mem_kib, slab_kib, vmalloc_kib,
                    checked ? std::to_string(r->verified).c_str() : "n/a", r->verify_failed,
                    error.c_str());
    } else {
        std::printf("%s: %d connections (%d accepted) in %.3f s: %.1f/s; %.1f KiB of memory per "
                    "connection, both ends (slab %.1f KiB, vmalloc %.1f KiB)",
                    o.family_name.c_str(), r->connected, r->accepted, r->seconds, rate, mem_kib,
                    slab_kib, vmalloc_kib);
        if (checked)
            std::printf("; data both ways on %d of %d", r->verified,
                        r->verified + r->verify_failed);
        std::printf("%s%s\n", error.empty() ? "" : "; failed: ", error.c_str());
    }
    std::fflush(stdout);
    if (std::getenv("SDP_CONNRATE_TRACE") != nullptr)
        std::fprintf(stderr, "closing\n");
    if (!library_accepts)
        run->close_all();
    const bool ok = r->err == 0 && r->accepted == r->connected && r->verify_failed == 0;
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    if (!parse(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    raise_nofile();
    Result r;
    if (o.family == Family::kRdmaCm) {
        CmRun run(o);
        return measure(o, &run, &r);
    }
    SocketRun run(o);
    return measure(o, &run, &r);
}
