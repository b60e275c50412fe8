// Memory read bandwidth of this machine: the sum of a large float array (1, 2, 4 GB; far beyond
// any cache), with 1 and 2 threads. This is the yardstick for decoding speed, which per generated
// token reads every decoder weight and the cross-attention keys/values of the whole input: at
// B GB/s a token costs at least (bytes read) / B seconds.
// Counters: GB/s (bytes read per second), foreign (CPU share other processes used meanwhile).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <locost/core/aligned.hpp>
#include <string>
#include <xsimd/xsimd.hpp>

#include "../bench_common.hpp"

namespace {

using batch = xsimd::batch<float>;

// Sum of x[0..n), n a multiple of 4 vectors; four accumulators hide the add latency.
float sum_range(const float* x, std::size_t n) {
    batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
    constexpr std::size_t w = batch::size;
    for (std::size_t i = 0; i < n; i += 4 * w) {
        a0 += batch::load_aligned(x + i);
        a1 += batch::load_aligned(x + i + w);
        a2 += batch::load_aligned(x + i + 2 * w);
        a3 += batch::load_aligned(x + i + 3 * w);
    }
    return xsimd::hadd((a0 + a1) + (a2 + a3));
}

void BM_read_sum(benchmark::State& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.range(0)) << 20;  // MiB
    const int threads = static_cast<int>(s.range(1));
    const std::size_t n = bytes / sizeof(float);
    auto x = locost::aligned_alloc_n<float>(n);
    // first touch by the threads that will read (one NUMA node here, but keeps it honest)
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) x[i] = 1.0f;
    const bench::foreign_load fl;
    float total = 0;
    for (auto _ : s) {
        float acc = 0;
        const std::size_t chunk = 4 * batch::size;
        const std::size_t chunks = n / chunk;
#pragma omp parallel num_threads(threads) reduction(+ : acc)
        {
            const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()), nt = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t c0 = chunks * t / nt, c1 = chunks * (t + 1) / nt;
            acc += sum_range(x.get() + c0 * chunk, (c1 - c0) * chunk);
        }
        total += acc;
        benchmark::DoNotOptimize(total);
    }
    s.counters["GB/s"] = benchmark::Counter(static_cast<double>(n * sizeof(float)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["GB"] = static_cast<double>(bytes) * 1e-9;
    s.counters["foreign"] = fl.share();
}

}  // namespace

BENCHMARK(BM_read_sum)
    ->ArgsProduct({{1024, 2048, 4096}, {1, 2}})
    ->ArgNames({"MiB", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_MAIN();
