// Helpers shared by the benchmark programs: how much of the machine other processes used while
// a benchmark ran (the machines are shared), and reproducible random token ids.
#pragma once
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <locost/core/tensor.hpp>
#include <random>
#include <string>
#include <vector>

namespace bench {

// Busy CPU seconds of the whole machine (all cores), from /proc/stat.
inline double machine_busy_s() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    long long v[8] = {};
    f >> cpu;
    for (auto& x : v) f >> x;
    return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of this process.
inline double own_cpu_s() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + 1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// Share of the machine's CPU capacity that other processes used since construction.
struct foreign_load {
    double b0 = machine_busy_s(), o0 = own_cpu_s();
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    double share() const {
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double foreign = std::max(0.0, (machine_busy_s() - b0) - (own_cpu_s() - o0));
        return foreign / std::max(1e-9, wall * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)));
    }
};

// L token ids drawn uniformly from [2, vocab) with a fixed seed (no pad, no eos).
inline std::vector<std::int64_t> random_ids(locost::index_t L, locost::index_t vocab) {
    std::mt19937_64 g(1);
    std::uniform_int_distribution<std::int64_t> d(2, vocab - 1);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(L));
    for (auto& x : ids) x = d(g);
    return ids;
}

}  // namespace bench
