// SPDX-License-Identifier: GPL-2.0
//
// Helpers for tests that run as root inside the test VM: module load and
// unload through the raw syscalls (so errno is the kernel's own), the kernel
// log, and small /proc and /sys readers.
#ifndef SDP_TESTS_VM_UTIL_H
#define SDP_TESTS_VM_UTIL_H

#include <optional>
#include <string>
#include <vector>

namespace sdp::vmtest {

// finit_module(path, params): 0 or the errno the kernel returned.
int load_module(const std::string& path, const std::string& params);
// delete_module(name, O_NONBLOCK): 0 or errno.
int unload_module(const std::string& name);
bool module_loaded(const std::string& name);
// The loaded sdp.ko's load-time parameters as finit_module takes them
// ("family=27 ipproto=257 fallback=0"; fallback is net.sdp.fallback's
// current value), so that a test that unloads it can load it back as the
// tier set it up.
std::string sdp_module_params();

// Environment variable that the tier script must set; aborts the test
// binary with a message naming it when missing.
std::string required_env(const char* name);

std::optional<std::string> read_file(const std::string& path);
bool write_file(const std::string& path, const std::string& text);

// "sockets" column of a protocol's line in /proc/net/protocols, or -1.
long protocol_sockets_in_use(const std::string& protocol);

// /sys/module/NAME/refcnt, or -1.
long module_refcnt(const std::string& name);
// /proc/sys/net/sdp/NAME as a number, or -1.
long sdp_sysctl(const std::string& name);
// Pages pinned with FOLL_PIN and unpinned, system-wide
// (nr_foll_pin_acquired, nr_foll_pin_released of /proc/vmstat), exact: the
// per-CPU deltas are folded first (vm.stat_refresh), else /proc/vmstat
// may lag by a CPU's threshold in either direction.  {-1, -1} if absent.
struct PinCounts {
    long long acquired = -1;
    long long released = -1;
};
PinCounts pin_counts();
// /proc/net/sdp with a title line, for failure messages.
std::string proc_listing();
// An "address:port" endpoint of /proc/net/sdp ends with this port.
bool ends_with_port(const std::string& endpoint, int port);

// Where a cgroup2 hierarchy is mounted (mounting one if none is), or "" with
// the reasons in *why.
std::string cgroup2_root(std::string* why);
// "name value" lines (/proc/vmstat, memory.events, memory.stat).
std::optional<long long> keyed_value(const std::string& path, const std::string& key);
// A file holding one number (memory.current, ...), or -1.
long long read_ll(const std::string& path);

// Kernel log records written after construction (reads /dev/kmsg).
class KmsgCapture {
  public:
    KmsgCapture();
    ~KmsgCapture();
    KmsgCapture(const KmsgCapture&) = delete;
    KmsgCapture& operator=(const KmsgCapture&) = delete;

    // Message texts of all records since construction (kmsg prefix removed).
    const std::vector<std::string>& lines();
    // True if some new record contains `needle`.
    bool contains(const std::string& needle);

  private:
    int fd_ = -1;
    std::vector<std::string> seen_;
};

} // namespace sdp::vmtest

#endif // SDP_TESTS_VM_UTIL_H
