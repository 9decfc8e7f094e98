// SPDX-License-Identifier: GPL-2.0
#include "vm_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sdp::vmtest {

int load_module(const std::string& path, const std::string& params)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    const long rc = syscall(SYS_finit_module, fd, params.c_str(), 0);
    const int err = rc == 0 ? 0 : errno;
    close(fd);
    return err;
}

int unload_module(const std::string& name)
{
    return syscall(SYS_delete_module, name.c_str(), O_NONBLOCK) == 0 ? 0 : errno;
}

bool module_loaded(const std::string& name)
{
    struct stat st {};
    return stat(("/sys/module/" + name + "/initstate").c_str(), &st) == 0;
}

std::string sdp_module_params()
{
    std::string params;
    for (const char* name : {"family", "ipproto", "fallback"}) {
        auto value = read_file(std::string("/sys/module/sdp/parameters/") + name);
        if (!value)
            continue;
        while (!value->empty() && value->back() == '\n')
            value->pop_back();
        params += (params.empty() ? "" : " ") + std::string(name) + "=" + *value;
    }
    return params;
}

std::string required_env(const char* name)
{
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') {
        fprintf(stderr, "vm test: environment variable %s must be set (see tests/vm/*.sh)\n", name);
        exit(2);
    }
    return value;
}

std::optional<std::string> read_file(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

bool write_file(const std::string& path, const std::string& text)
{
    std::ofstream out(path);
    out << text;
    out.close();
    return static_cast<bool>(out);
}

long protocol_sockets_in_use(const std::string& protocol)
{
    std::ifstream in("/proc/net/protocols");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string name;
        long size = 0;
        long sockets = 0;
        if (fields >> name >> size >> sockets && name == protocol)
            return sockets;
    }
    return -1;
}

KmsgCapture::KmsgCapture()
{
    fd_ = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ >= 0)
        lseek(fd_, 0, SEEK_END);
}

KmsgCapture::~KmsgCapture()
{
    if (fd_ >= 0)
        close(fd_);
}

const std::vector<std::string>& KmsgCapture::lines()
{
    char record[8192];
    for (;;) {
        const ssize_t n = read(fd_, record, sizeof(record) - 1);
        if (n < 0) {
            if (errno == EPIPE) // records overwritten: keep reading newer ones
                continue;
            break; // EAGAIN: no more records
        }
        record[n] = '\0';
        // "prio,seq,usec,flags;text\n" followed by continuation lines.
        std::string text(record);
        const auto semi = text.find(';');
        if (semi != std::string::npos)
            text = text.substr(semi + 1);
        const auto nl = text.find('\n');
        if (nl != std::string::npos)
            text.resize(nl);
        seen_.push_back(text);
    }
    return seen_;
}

bool KmsgCapture::contains(const std::string& needle)
{
    for (const auto& line : lines()) {
        if (line.find(needle) != std::string::npos)
            return true;
    }
    return false;
}

long module_refcnt(const std::string& name)
{
    const auto text = read_file("/sys/module/" + name + "/refcnt");
    return text ? std::atol(text->c_str()) : -1;
}

long sdp_sysctl(const std::string& name)
{
    const auto text = read_file("/proc/sys/net/sdp/" + name);
    return text ? std::atol(text->c_str()) : -1;
}

PinCounts pin_counts()
{
    write_file("/proc/sys/vm/stat_refresh", "1");
    PinCounts counts;
    std::istringstream in(read_file("/proc/vmstat").value_or(""));
    std::string name;
    long long value = 0;
    while (in >> name >> value) {
        if (name == "nr_foll_pin_acquired")
            counts.acquired = value;
        else if (name == "nr_foll_pin_released")
            counts.released = value;
    }
    return counts;
}

std::string proc_listing()
{
    return "/proc/net/sdp:\n" + read_file("/proc/net/sdp").value_or("(missing)");
}

bool ends_with_port(const std::string& endpoint, int port)
{
    const std::string tail = ":" + std::to_string(port);
    return endpoint.size() >= tail.size() &&
           endpoint.compare(endpoint.size() - tail.size(), tail.size(), tail) == 0;
}

std::string cgroup2_root(std::string* why)
{
    std::istringstream in(read_file("/proc/self/mounts").value_or(""));
    std::string dev, mnt, type, rest;
    while (in >> dev >> mnt >> type && std::getline(in, rest))
        if (type == "cgroup2")
            return mnt;
    for (const char* dir : {"/sys/fs/cgroup", "/tmp/sdp-cgroup2"}) {
        mkdir(dir, 0755);
        if (mount("cgroup2", dir, "cgroup2", 0, nullptr) == 0)
            return dir;
        *why += std::string("mount cgroup2 on ") + dir + ": " + strerror(errno) + "; ";
    }
    return "";
}

std::optional<long long> keyed_value(const std::string& path, const std::string& key)
{
    std::istringstream in(read_file(path).value_or(""));
    std::string name;
    long long value = 0;
    while (in >> name >> value)
        if (name == key)
            return value;
    return std::nullopt;
}

long long read_ll(const std::string& path)
{
    const auto text = read_file(path);
    return text ? std::atoll(text->c_str()) : -1;
}

} // namespace sdp::vmtest
