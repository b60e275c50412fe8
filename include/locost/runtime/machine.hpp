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

// Independent FMA chains in registers: 12 chains hide the FMA latency (4 cycles × 2–3 pipes).
// Each returns a value the compiler cannot drop. fma_chains_build: at the widest vector the build
// targets (xsimd's); the others at the CPU's own width whatever the build (isa.hpp's regions), so
// that a portable build measures the machine's peak rather than SSE2's.
inline double fma_chains_build(long iters) {
    using batch = xsimd::batch<float>;
    constexpr int chains = 12;
    batch acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = batch(1.0f + 0.001f * static_cast<float>(c));
    const batch a(0.999999f), b(1e-7f);
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], a, b);
    batch s = acc[0];
    for (int c = 1; c < chains; ++c) s += acc[c];
    return static_cast<double>(xsimd::hadd(s));
}

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
inline double fma_chains_avx512(long iters) {
    constexpr int chains = 12;
    __m512 acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(c));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    alignas(64) float lanes[16];
    __m512 s = acc[0];
    for (int c = 1; c < chains; ++c) s = _mm512_add_ps(s, acc[c]);
    _mm512_store_ps(lanes, s);
    double sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}
LOCOST_END_ISA

LOCOST_BEGIN_ISA_AVX2
inline double fma_chains_avx2(long iters) {
    constexpr int chains = 12;
    __m256 acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(c));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    alignas(32) float lanes[8];
    __m256 s = acc[0];
    for (int c = 1; c < chains; ++c) s = _mm256_add_ps(s, acc[c]);
    _mm256_store_ps(lanes, s);
    double sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}
LOCOST_END_ISA
#endif

// The FMA chains at the widest vector of this CPU (or of the build, where that is wider).
struct fma_chain_kernel {
    double (*run)(long iters);
    int lanes;         // float32 lanes per FMA
    std::string name;  // "AVX-512", "AVX2", or xsimd's name of the build's vector
};

inline fma_chain_kernel widest_fma_chains() {
    const int build_lanes = static_cast<int>(xsimd::batch<float>::size);
#if LOCOST_ISA_REGIONS
    if (cpu_isa() >= isa_level::avx512 && build_lanes < 16) return {fma_chains_avx512, 16, "AVX-512"};
    if (cpu_isa() >= isa_level::avx2 && build_lanes < 8) return {fma_chains_avx2, 8, "AVX2"};
#endif
    return {fma_chains_build, build_lanes, xsimd::default_arch::name()};
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
