// What the operating system says this process may still use: the memory budget a request is
// checked against before it allocates (models/memory_estimate.hpp). The one place that reads
// /proc and the cgroup files.
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace locost::runtime {

// The memory a request may use: by default what the machine has available now — the smallest of
// /proc/meminfo's MemAvailable, the cgroup's memory.max less its memory.current (containers,
// Kubernetes limits) and RLIMIT_AS less the address space already mapped (ulimit -v).
struct memory_budget {
    double bytes = 0;
    std::string source;
};
inline memory_budget available_memory() {
    memory_budget b{1.8e19, "no limit found"};
    auto take = [&](double v, const char* why) {
        if (v >= 0 && v < b.bytes) b = {v, why};
    };
    auto read_kb = [](const char* file, const char* key) -> double {
        std::ifstream f(file);
        std::string k;
        double v;
        std::string unit;
        while (f >> k >> v) {
            std::getline(f, unit);
            if (k == key) return v * 1024.0;
        }
        return -1;
    };
    take(read_kb("/proc/meminfo", "MemAvailable:"), "available memory");
    {
        std::ifstream mx("/sys/fs/cgroup/memory.max"), cur("/sys/fs/cgroup/memory.current");
        std::string m;
        double c = 0;
        if (mx >> m && m != "max" && cur >> c) take(std::stod(m) - c, "the cgroup's memory.max");
    }
    rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const double used = read_kb("/proc/self/status", "VmSize:");
        take(static_cast<double>(rl.rlim_cur) - std::max(0.0, used), "RLIMIT_AS (ulimit -v)");
    }
    return b;
}

}  // namespace locost::runtime
