// GEMM at the base model's shapes (M tokens × K in → N out; fp32), Eigen's own kernels
// against OpenBLAS's cblas_sgemm, each with the thread count given. This is the measurement
// behind the LOCOST_USE_OPENBLAS default (README "Speed"). Counter: GFLOP/s (2·M·N·K).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <Eigen/Core>
#include <random>

namespace {

using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct operands {
    mat x, w, y;
    operands(long m, long k, long n) : x(mat::Random(m, k)), w(mat::Random(n, k)), y(m, n) {}
};

void set_counters(benchmark::State& s, long m, long k, long n) {
    s.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// y = x · wᵀ, weights stored (out, in) as PyTorch Linear does.
void BM_gemm_eigen(benchmark::State& s) {
    const long m = s.range(0), k = s.range(1), n = s.range(2);
    const int threads = static_cast<int>(s.range(3));
    Eigen::setNbThreads(threads);
    operands o(m, k, n);
    for (auto _ : s) {
        o.y.noalias() = o.x * o.w.transpose();
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, m, k, n);
}

void BM_gemm_openblas(benchmark::State& s) {
    const long m = s.range(0), k = s.range(1), n = s.range(2);
    openblas_set_num_threads(static_cast<int>(s.range(3)));
    operands o(m, k, n);
    for (auto _ : s) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                    1.0f, o.x.data(), static_cast<int>(k), o.w.data(), static_cast<int>(k), 0.0f, o.y.data(), static_cast<int>(n));
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, m, k, n);
}

void shapes(benchmark::internal::Benchmark* b) {
    // (M, K, N, threads): S4D projections 768→768, FFN in 768→2048, FFN out 2048→768.
    for (long t : {1, 2})
        for (auto [k, n] : {std::pair{768L, 768L}, {768L, 2048L}, {2048L, 768L}}) b->Args({4096, k, n, t});
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

} // namespace

BENCHMARK(BM_gemm_eigen)->Apply(shapes);
BENCHMARK(BM_gemm_openblas)->Apply(shapes);
BENCHMARK_MAIN();
