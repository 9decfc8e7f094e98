// SPDX-License-Identifier: GPL-2.0
//
// sdpstat: the SDP sockets and counters of this network namespace, from
// /proc/net/sdp and /proc/net/sdpstats.  See usage() and README.md.  All the
// parsing and printing is in sdpstat_lib; this file only provides the real
// files and clock.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "sdpstat_lib.h"

namespace {

using sdp::sdpstat::System;

class PosixSystem final : public System {
  public:
    ReadResult read_file(const std::string& path) override
    {
        ReadResult result;
        // open(2) rather than ifstream: a missing file (module not loaded)
        // must be told from other failures, and /proc files report size 0.
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            result.status = errno == ENOENT ? ReadStatus::kNotFound : ReadStatus::kError;
            result.error = std::strerror(errno);
            return result;
        }
        char buf[65536];
        for (;;) {
            const ssize_t n = read(fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                result.error = std::strerror(errno);
                close(fd);
                return result;
            }
            if (n == 0)
                break;
            result.text.append(buf, static_cast<std::size_t>(n));
        }
        close(fd);
        result.status = ReadStatus::kOk;
        return result;
    }

    double now() override
    {
        timespec ts{};
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    }

    void sleep_until(double when) override
    {
        timespec ts{};
        const double seconds = std::floor(when);
        ts.tv_sec = static_cast<time_t>(seconds);
        ts.tv_nsec = static_cast<long>((when - seconds) * 1e9);
        if (ts.tv_nsec > 999999999)
            ts.tv_nsec = 999999999;
        // Absolute deadline, so a signal that interrupts the sleep costs
        // nothing: sleep again until the same instant.
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
        }
    }
};

} // namespace

int main(int argc, char** argv)
{
    const std::vector<std::string> args(argv + 1, argv + argc);
    const sdp::sdpstat::ParsedArgs parsed = sdp::sdpstat::parse_args(args);
    if (!parsed.ok) {
        std::cerr << "sdpstat: " << parsed.error << "\n" << sdp::sdpstat::usage();
        return sdp::sdpstat::kExitUsage;
    }
    if (parsed.help) {
        std::cout << sdp::sdpstat::usage();
        return sdp::sdpstat::kExitOk;
    }
    PosixSystem sys;
    return sdp::sdpstat::run(parsed.options, sys, std::cout, std::cerr);
}
