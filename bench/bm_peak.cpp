// Peak float32 FMA throughput of this machine, the yardstick for the GEMM benchmarks'
// GFLOP/s. Twelve independent FMA chains per thread hide the FMA latency (4 cycles × 2-3
// pipes); the vector width is the widest the build targets (AVX-512 with -march=native on
// a machine that has it). Counters: GFLOP/s (2 flops per lane per FMA).
#include <benchmark/benchmark.h>
#include <omp.h>
#include <xsimd/xsimd.hpp>

namespace {

using batch = xsimd::batch<float>;
constexpr int chains = 12;

double fma_kernel(long iters) {
    batch acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = batch(1.0f + 0.001f * static_cast<float>(c));
    const batch a(0.999999f), b(1e-7f);
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], a, b);
    batch s = acc[0];
    for (int c = 1; c < chains; ++c) s += acc[c];
    return static_cast<double>(xsimd::hadd(s));
}

void BM_fma_peak(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const long iters = 20'000'000;
    double sink = 0;
    for (auto _ : state) {
#pragma omp parallel for num_threads(threads) reduction(+ : sink)
        for (int t = 0; t < threads; ++t) sink += fma_kernel(iters);
    }
    benchmark::DoNotOptimize(sink);
    const double flops = 2.0 * batch::size * chains * static_cast<double>(iters) * threads;
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["lanes"] = batch::size;
    state.counters["threads"] = threads;
}

} // namespace

BENCHMARK(BM_fma_peak)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
