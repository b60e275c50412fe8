// Peak float32 FMA throughput of this machine, the yardstick for the GEMM benchmarks'
// GFLOP/s: runtime::fma_chains (runtime/machine.hpp, which `locost inspect --system` runs too),
// twelve independent FMA chains per thread at the widest vector the build targets (AVX-512 with
// -march=native on a machine that has it). Counters: GFLOP/s (2 flops per lane per FMA).
#include <benchmark/benchmark.h>
#include <omp.h>
#include <locost/runtime/machine.hpp>

namespace {

void BM_fma_peak(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const long iters = 20'000'000;
    double sink = 0;
    for (auto _ : state) {
#pragma omp parallel for num_threads(threads) reduction(+ : sink)
        for (int t = 0; t < threads; ++t) sink += locost::runtime::fma_chains(iters);
    }
    benchmark::DoNotOptimize(sink);
    const double flops = locost::runtime::fma_chains_flops(iters) * threads;
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["lanes"] = xsimd::batch<float>::size;
    state.counters["threads"] = threads;
}

}  // namespace

BENCHMARK(BM_fma_peak)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
