// SPDX-License-Identifier: GPL-2.0
//
// sdp_conformance: runs every scenario over a reference family (TCP) and
// over the family under test (AF_INET_SDP) and compares the traces.
//
//   sdp_conformance [--families A,B] [--filter GLOB[,GLOB...]] [--list]
//                   [--scale N] [--timeout S] [--zerocopy] [--verbose]
//
// Each run of a scenario is a forked child (own process group) with a
// watchdog; it streams its trace records through a pipe, so a hang or a
// crash is reported with the trace up to that point.
#include "conformance.h"
#include "uapi/sdp.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fnmatch.h>
#include <fstream>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace sdp::conformance {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::vector<Family> families{Family::kInet, Family::kSdp};
    std::vector<std::string> filters;
    bool list = false;
    bool verbose = false;
    int timeout_s = 0; // 0: per scenario
};

const char* family_name(Family f)
{
    switch (f) {
    case Family::kInet:
        return "inet";
    case Family::kSdp:
        return "sdp";
    case Family::kIpproto:
        return "ipproto";
    case Family::kSdpToTcp:
        return "sdp-tcp";
    case Family::kTcpToSdp:
        return "tcp-sdp";
    }
    return "?";
}

[[noreturn]] void usage(const char* msg)
{
    if (msg != nullptr)
        fprintf(stderr, "sdp_conformance: %s\n", msg);
    fprintf(stderr, "usage: sdp_conformance [--families A,B] [--filter GLOB[,GLOB...]] [--list]\n"
                    "                       [--scale N] [--timeout S] [--zerocopy] [--verbose]\n"
                    "  families: inet (TCP over AF_INET/AF_INET6), sdp (AF_INET_SDP),\n"
                    "  ipproto (AF_INET/AF_INET6 with IPPROTO_SDP); mixed, with IPPROTO_SDP\n"
                    "  sockets that may fall back: sdp-tcp (SDP clients, TCP listeners),\n"
                    "  tcp-sdp (TCP clients, SDP listeners);\n"
                    "  the first is the reference.  A GLOB starting with '-' excludes.\n");
    exit(2);
}

std::vector<std::string> split(const std::string& s, char sep)
{
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        const size_t pos = s.find(sep, start);
        out.push_back(s.substr(start, pos - start));
        if (pos == std::string::npos)
            return out;
        start = pos + 1;
    }
}

Options parse_args(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "--families") {
            o.families.clear();
            for (const std::string& f : split(value(), ',')) {
                if (f == "inet" || f == "tcp")
                    o.families.push_back(Family::kInet);
                else if (f == "sdp")
                    o.families.push_back(Family::kSdp);
                else if (f == "ipproto")
                    o.families.push_back(Family::kIpproto);
                else if (f == "sdp-tcp")
                    o.families.push_back(Family::kSdpToTcp);
                else if (f == "tcp-sdp")
                    o.families.push_back(Family::kTcpToSdp);
                else
                    usage(("unknown family " + f).c_str());
            }
            if (o.families.empty() || o.families.size() > 2)
                usage("--families takes one or two families");
        } else if (a == "--filter") {
            for (const std::string& g : split(value(), ','))
                o.filters.push_back(g);
        } else if (a == "--list") {
            o.list = true;
        } else if (a == "--scale") {
            const double s = atof(value().c_str());
            if (s <= 0)
                usage("--scale must be positive");
            config().scale = s;
        } else if (a == "--timeout") {
            o.timeout_s = atoi(value().c_str());
            if (o.timeout_s <= 0)
                usage("--timeout must be positive");
        } else if (a == "--zerocopy") {
            zerocopy_mode(true);
        } else if (a == "--verbose" || a == "-v") {
            o.verbose = true;
        } else if (a == "--help" || a == "-h") {
            usage(nullptr);
        } else {
            usage(("unknown argument " + a).c_str());
        }
    }
    return o;
}

std::string env_or(const char* name, const char* def)
{
    const char* v = getenv(name);
    return (v != nullptr && *v != '\0') ? v : def;
}

void load_config()
{
    Config& c = config();
    c.addr4_a = env_or("SDP_TEST_ADDR4_A", "10.77.0.1");
    c.addr4_b = env_or("SDP_TEST_ADDR4_B", "10.77.0.2");
    c.addr6_a = env_or("SDP_TEST_ADDR6_A", "fd77::1");
    c.addr6_b = env_or("SDP_TEST_ADDR6_B", "fd77::2");
    c.port_base = atoi(env_or("SDP_TEST_PORT_BASE", "20000").c_str());
    c.priv_port = atoi(env_or("SDP_TEST_PRIV_PORT", "700").c_str());
    c.host = env_or("SDP_CONFORMANCE_HOST", "0") == "1";
    c.wait_scale = std::max(1, atoi(env_or("SDP_VM_WAIT_SCALE", "1").c_str()));
    c.sdp_family = AF_INET_SDP;
    const char* fam = getenv("SDP_FAMILY");
    if (fam != nullptr && *fam != '\0') {
        c.sdp_family = atoi(fam);
    } else {
        std::ifstream in(SDP_FAMILY_SYSFS_PATH);
        int v = 0;
        if (in >> v)
            c.sdp_family = v;
    }
    c.sdp_ipproto = IPPROTO_SDP;
    const char* proto = getenv("SDP_IPPROTO");
    if (proto != nullptr && *proto != '\0') {
        c.sdp_ipproto = atoi(proto);
    } else {
        std::ifstream in(SDP_IPPROTO_SYSFS_PATH);
        int v = 0;
        if (in >> v)
            c.sdp_ipproto = v;
    }
}

bool selected(const Options& o, const std::string& name)
{
    bool any_include = false;
    bool included = false;
    for (const std::string& g : o.filters) {
        if (!g.empty() && g[0] == '-') {
            if (fnmatch(g.c_str() + 1, name.c_str(), 0) == 0)
                return false;
        } else {
            any_include = true;
            if (fnmatch(g.c_str(), name.c_str(), 0) == 0)
                included = true;
        }
    }
    return !any_include || included;
}

// --- one run of one scenario ------------------------------------------------

struct RunResult {
    std::vector<std::string> trace;
    std::string problem; // empty: the run completed and its checks passed
    double seconds = 0;
};

[[noreturn]] void child_main(const Scenario& s, int index, Family fam, int run_pos, int fd)
{
    setpgid(0, 0);
    signal(SIGPIPE, SIG_IGN);
    {
        zerocopy_trace_fd(fd);
        Ctx ctx(fam, s.ip, index, run_pos, fd);
        s.fn(ctx);
        zerocopy_finish();
    }
    std::string end(kTraceEnd);
    end += '\n';
    if (write(fd, end.data(), end.size()) < 0)
        _exit(1);
    _exit(check_failed() ? kExitCheckFailed : kExitOk);
}

RunResult run_one(const Scenario& s, int index, Family fam, int run_pos, int timeout_s)
{
    RunResult res;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        res.problem = "pipe failed";
        return res;
    }
    fflush(stdout);
    fflush(stderr);
    const auto start = Clock::now();
    const pid_t pid = fork();
    if (pid < 0) {
        res.problem = "fork failed";
        close(p[0]);
        close(p[1]);
        return res;
    }
    if (pid == 0) {
        close(p[0]);
        child_main(s, index, fam, run_pos, p[1]);
    }
    setpgid(pid, pid);
    close(p[1]);

    const auto deadline = start + std::chrono::seconds(timeout_s);
    std::string buf;
    bool ended = false;
    bool timed_out = false;
    std::vector<std::pair<std::string, std::string>> records;
    auto take_lines = [&] {
        size_t nl = 0;
        while ((nl = buf.find('\n')) != std::string::npos) {
            const std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            if (line == kTraceEnd) {
                ended = true;
                continue;
            }
            if (ended)
                continue; // a leftover helper process
            const size_t sep = line.find('\x1f');
            if (sep == std::string::npos)
                records.emplace_back("?", line);
            else
                records.emplace_back(line.substr(0, sep), line.substr(sep + 1));
        }
    };
    while (!ended) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd pfd{p[0], POLLIN, 0};
        const int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        char chunk[8192];
        const ssize_t got = read(p[0], chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; // EOF: the child died (checked below)
        buf.append(chunk, static_cast<size_t>(got));
        take_lines();
    }
    close(p[0]);
    if (!timed_out) {
        // The child exits right after its END record; allow a little time.
        // WNOWAIT leaves it a zombie, so its process group id stays ours
        // until the kill below.
        const auto reap_deadline = Clock::now() + std::chrono::seconds(10);
        bool exited = false;
        while (!exited && Clock::now() < reap_deadline) {
            siginfo_t info{};
            if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
                break;
            exited = info.si_pid == pid;
            if (!exited)
                usleep(2000);
        }
        timed_out = !exited;
    }
    kill(-pid, SIGKILL); // the child's process group: helpers too
    int status = 0;
    waitpid(pid, &status, 0);
    res.seconds = std::chrono::duration<double>(Clock::now() - start).count();

    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [lane, text] : records) {
        std::string line = lane;
        line += ": ";
        line += text;
        res.trace.push_back(std::move(line));
    }

    if (timed_out) {
        res.problem = "timeout after " + std::to_string(timeout_s) + " s";
    } else if (WIFSIGNALED(status)) {
        res.problem = std::string("killed by signal ") + strsignal(WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitAborted) {
        res.problem = "aborted";
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitCheckFailed) {
        res.problem = "checks failed";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !ended) {
        res.problem = "exit status " + std::to_string(WEXITSTATUS(status));
    }
    if (!res.problem.empty())
        res.trace.push_back("!! " + res.problem);
    return res;
}

// --- trace diff ------------------------------------------------------------------

void print_diff(const std::vector<std::string>& a, const std::vector<std::string>& b,
                const char* name_a, const char* name_b)
{
    const size_t n = a.size();
    const size_t m = b.size();
    // LCS table, traces are small (hundreds of lines).
    std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
    for (size_t i = n; i-- > 0;) {
        for (size_t j = m; j-- > 0;) {
            lcs[i][j] =
                a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
        }
    }
    std::vector<std::pair<char, std::string>> ops;
    size_t i = 0;
    size_t j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) {
            ops.emplace_back(' ', a[i]);
            i++;
            j++;
        } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
            ops.emplace_back('-', a[i]);
            i++;
        } else {
            ops.emplace_back('+', b[j]);
            j++;
        }
    }
    printf("    --- %s (reference)\n    +++ %s\n", name_a, name_b);
    constexpr size_t kContext = 3;
    constexpr int kMaxLines = 400;
    int printed = 0;
    size_t last_printed = SIZE_MAX;
    for (size_t k = 0; k < ops.size(); k++) {
        bool near_change = false;
        const size_t lo = k >= kContext ? k - kContext : 0;
        const size_t hi = std::min(ops.size() - 1, k + kContext);
        for (size_t q = lo; q <= hi; q++)
            near_change = near_change || ops[q].first != ' ';
        if (!near_change)
            continue;
        if (last_printed != SIZE_MAX && k > last_printed + 1)
            printf("    ...\n");
        if (printed++ >= kMaxLines) {
            printf("    ... (diff truncated)\n");
            return;
        }
        printf("    %c %s\n", ops[k].first, ops[k].second.c_str());
        last_printed = k;
    }
}

void print_trace(const std::vector<std::string>& t, const char* name)
{
    printf("    --- %s trace\n", name);
    for (const std::string& line : t)
        printf("      %s\n", line.c_str());
}

} // namespace
} // namespace sdp::conformance

int main(int argc, char** argv)
{
    using namespace sdp::conformance;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    load_config();
    const Options opt = parse_args(argc, argv);

    std::vector<Scenario> all = registry();
    std::sort(all.begin(), all.end(),
              [](const Scenario& a, const Scenario& b) { return a.name < b.name; });
    for (size_t k = 1; k < all.size(); k++) {
        if (all[k].name == all[k - 1].name) {
            fprintf(stderr, "sdp_conformance: duplicate scenario %s\n", all[k].name.c_str());
            return 2;
        }
    }
    if (opt.list) {
        for (const Scenario& s : all) {
            const bool testbed =
                (s.flags & kTestbed) != 0 || ((s.flags & kTestbedV6) != 0 && s.ip == Ip::kV6);
            printf("%s%s\n", s.name.c_str(), testbed ? "  [testbed]" : "");
        }
        return 0;
    }

    const Config& c = config();
    std::string fam_list;
    for (const Family f : opt.families)
        fam_list += std::string(fam_list.empty() ? "" : ",") + family_name(f);
    printf("sdp_conformance: families %s (AF_INET_SDP = %d), A=%s/%s B=%s/%s, ports from %d, "
           "scale %g%s\n",
           fam_list.c_str(), c.sdp_family, c.addr4_a.c_str(), c.addr6_a.c_str(), c.addr4_b.c_str(),
           c.addr6_b.c_str(), c.port_base, c.scale, c.host ? ", host mode" : "");

    const auto t0 = Clock::now();
    int passed = 0;
    int skipped = 0;
    std::vector<std::string> failed;
    for (size_t idx = 0; idx < all.size(); idx++) {
        const Scenario& s = all[idx];
        if (!selected(opt, s.name))
            continue;
        const bool testbed =
            (s.flags & kTestbed) != 0 || ((s.flags & kTestbedV6) != 0 && s.ip == Ip::kV6);
        if (testbed && c.host) {
            printf("[ SKIP ] %s  (needs the VM test bed; SDP_CONFORMANCE_HOST=1)\n",
                   s.name.c_str());
            skipped++;
            continue;
        }
        const int timeout = opt.timeout_s > 0
                                ? opt.timeout_s
                                : static_cast<int>(s.timeout_s * std::max(1.0, c.scale));
        std::vector<RunResult> runs;
        std::string times;
        for (size_t r = 0; r < opt.families.size(); r++) {
            runs.push_back(
                run_one(s, static_cast<int>(idx), opt.families[r], static_cast<int>(r), timeout));
            char t[64];
            snprintf(t, sizeof(t), "  %s %.3fs", family_name(opt.families[r]), runs.back().seconds);
            times += t;
        }
        bool ok = true;
        std::string why;
        for (size_t r = 0; r < runs.size(); r++) {
            if (!runs[r].problem.empty()) {
                ok = false;
                why += std::string(why.empty() ? "" : ", ") + family_name(opt.families[r]) + ": " +
                       runs[r].problem;
            }
        }
        if (runs.size() == 2 && runs[0].trace != runs[1].trace) {
            ok = false;
            why += std::string(why.empty() ? "" : ", ") + "traces differ";
        }
        printf("[%s] %s%s%s\n", ok ? " OK " : "FAIL", s.name.c_str(), times.c_str(),
               why.empty() ? "" : ("  (" + why + ")").c_str());
        if (runs.size() == 2 && !ok && runs[0].trace != runs[1].trace) {
            print_diff(runs[0].trace, runs[1].trace, family_name(opt.families[0]),
                       family_name(opt.families[1]));
        } else if (runs.size() == 1 || !ok || opt.verbose) {
            print_trace(runs[0].trace, family_name(opt.families[0]));
        }
        if (ok)
            passed++;
        else
            failed.push_back(s.name);
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const int total = passed + static_cast<int>(failed.size()) + skipped;
    printf("sdp_conformance: %d scenarios, %d passed, %zu failed, %d skipped (%s) in %.1f s\n",
           total, passed, failed.size(), skipped, fam_list.c_str(), secs);
    for (const std::string& f : failed)
        printf("  FAILED: %s\n", f.c_str());
    if (total == 0) {
        printf("sdp_conformance: no scenario selected\n");
        return 1;
    }
    return failed.empty() ? 0 : 1;
}
