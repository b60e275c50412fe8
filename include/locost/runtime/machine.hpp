// What this machine is and what it can do: the CPU's name and vector features, and two short
// measurements to set a GEMM's rate against (`locost inspect --system`, bench/kernels/bm_peak): the
// float32 FMA peak and the rate of the float32 GEMM in force at an encoder's shape.
#pragma once
#include <omp.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "../backend/cpu/cpu.hpp"
#include "../backend/cpu/isa.hpp"
#include "../backend/cpu/simd_levels.hpp"
#include "../ops/gemm.hpp"

namespace locost::runtime {

struct cpu_description {
    std::string name = "unknown CPU";   // /proc/cpuinfo's "model name"
    int family = -1, model = -1;        // "cpu family", "model" (x86)
    std::vector<std::string> features;  // the vector features that matter for GEMM, as cpuid has them
};

inline cpu_description describe_cpu() {
    cpu_description d;
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    auto value = [](const std::string& l) {
        const auto c = l.find(':');
        std::string v = c == std::string::npos ? std::string() : l.substr(c + 1);
        const auto b = v.find_first_not_of(" \t");
        return b == std::string::npos ? std::string() : v.substr(b);
    };
    while (std::getline(f, line)) {
        if (line.empty()) break;  // the first processor is enough
        if (line.rfind("model name", 0) == 0) d.name = value(line);
        else if (line.rfind("cpu family", 0) == 0) d.family = std::atoi(value(line).c_str());
        else if (line.rfind("model", 0) == 0 && line.find(':') != std::string::npos && line.rfind("model name", 0) != 0)
            d.model = std::atoi(value(line).c_str());
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#define LOCOST_FEATURE(name)                                                                                                               \
    if (__builtin_cpu_supports(name)) d.features.push_back(name)
    LOCOST_FEATURE("sse4.2");
    LOCOST_FEATURE("avx");
    LOCOST_FEATURE("avx2");
    LOCOST_FEATURE("fma");
    LOCOST_FEATURE("avx512f");
    LOCOST_FEATURE("avx512bw");
    LOCOST_FEATURE("avx512vl");
    LOCOST_FEATURE("avx512vnni");
    LOCOST_FEATURE("avx512bf16");
#undef LOCOST_FEATURE
#endif
    return d;
}

}  // namespace locost::runtime

namespace locost::cpu_detail {
#define LOCOST_LEVEL_BODY "fma_chains.ipp"
#include "../backend/cpu/at_levels.ipp"
}  // namespace locost::cpu_detail

namespace locost::runtime {

// The FMA chains at the widest vector of this CPU (or of the build, where that is wider).
struct fma_chain_kernel {
    double (*run)(long iters);
    int lanes;         // float32 lanes per FMA
    std::string name;  // "AVX-512", "AVX2", or xsimd's name of the build's vector
};

inline fma_chain_kernel widest_fma_chains() {
    // (the CPU's level, not the process's: the machine's peak, whatever LOCOST_ISA says)
    const int build_lanes = static_cast<int>(cpu_detail::flanes);
#if LOCOST_ISA_REGIONS
    if (cpu_isa() >= isa_level::avx512 && build_lanes < 16) return {cpu_detail::at_avx512::fma_chains, 16, "AVX-512"};
    if (cpu_isa() >= isa_level::avx2 && build_lanes < 8) return {cpu_detail::at_avx2::fma_chains, 8, "AVX2"};
#endif
    return {cpu_detail::at_build::fma_chains, build_lanes, xsimd::default_arch::name()};
}

inline double fma_chains(long iters) { return widest_fma_chains().run(iters); }

// Floating-point operations of fma_chains(iters) on one thread.
inline double fma_chains_flops(long iters) { return 2.0 * widest_fma_chains().lanes * 12.0 * static_cast<double>(iters); }

// The float32 FMA peak of `threads` threads in GFLOP/s, measured for about `seconds`.
inline double measure_fma_peak(int threads, double seconds) {
    using clock = std::chrono::steady_clock;
    long iters = 1'000'000;
    double sink = 0;
    for (;;) {
        const auto t0 = clock::now();
#pragma omp parallel for num_threads(threads) reduction(+ : sink)
        for (int t = 0; t < threads; ++t) sink += fma_chains(iters);
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        if (s >= seconds / 2 || iters > (1L << 34)) {
            volatile double keep = sink;
            (void)keep;
            return fma_chains_flops(iters) * threads / s * 1e-9;
        }
        iters *= 2;
    }
}

// The GFLOP/s of the float32 GEMM in force (ops::matmul_wt on the CPU backend, the library's
// threads) at y (m, n) = x (m, k) · Wᵀ, best of repeats within about `seconds`.
inline double measure_gemm(index_t m, index_t k, index_t n, double seconds) {
    using clock = std::chrono::steady_clock;
    std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 89) * 0.01f - 0.4f;
    ops::matmul_wt<cpu>(x.data(), w.data(), y.data(), m, k, n);  // warm: caches, oneDNN's JIT
    double best = 0;
    const auto start = clock::now();
    do {
        const auto t0 = clock::now();
        ops::matmul_wt<cpu>(x.data(), w.data(), y.data(), m, k, n);
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        best = std::max(best, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / s * 1e-9);
    } while (std::chrono::duration<double>(clock::now() - start).count() < seconds);
    return best;
}

}  // namespace locost::runtime
