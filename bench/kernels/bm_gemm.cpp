// GEMM at the base model's shapes (M tokens × K in → N out; fp32, y = x · Wᵀ with W stored
// (out, in) as PyTorch's Linear stores it), each with the thread count given:
//   eigen     Eigen 3.4's own kernels (Eigen::setNbThreads)
//   openblas  cblas_sgemm with OpenBLAS's own thread pool (openblas_set_num_threads)
//   onednn    dnnl_sgemm with oneDNN's own OpenMP threads (the library picks its kernel from the
//             CPU's feature bits)
//   locost    locost::ops::matmul_wt<locost::cpu> → ops::gemm<cpu, float>, the library's kernel:
//             the product split over OpenMP threads, each slice a single-threaded call to the
//             float32 provider in force (backend/cpu/gemm_provider.hpp; the label names it)
//   sgemv     cblas_sgemv (OpenBLAS threads), for the M = 1 shapes only: the reference for a
//             matrix-vector product
//   linear_bf16_products  a locost linear layer under compute = bf16 (encoder shapes only): W
//             stored bfloat16, x rounded to bfloat16 per block of rows, oneDNN's matmul with
//             float32 sums (backend/cpu/bf16_products.hpp); the rounding of x is included
//   linear_i8_products  the same under compute = int8: W stored int8 (a scale per output
//             channel), x quantized to int8 per row, oneDNN's int8 matmul with int32 sums, the
//             scales applied after (backend/cpu/i8_products.hpp); quantizing x is included
// This is the measurement behind the LOCOST_USE_OPENBLAS default (docs/performance.md, "Where the time goes").
// Shapes (M, K, N, threads, rotate): M = 4096 and 1024 (the encoder's tile of 1024 rows) against
// the S4D projections 768→768, FFN in 768→2048 and FFN out 2048→768; and M = 1 (one decoding
// step: 768→768, 768→2048 and the 768→32100 LM head), which is memory-bound. rotate = 0: the
// same W every iteration (it stays in cache when it fits: L2 2 MiB/core here); rotate = 1: each
// iteration uses the next of enough copies of W to fill 1 GiB, so W comes from DRAM as it does
// when a decoder step reads all its layers' weights.
// Counters: GFLOP/s (2·M·N·K); for M = 1 also GB/s (W + x + y bytes per product).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <Eigen/Core>
#include <cstring>
#include <locost/locost.hpp>
#include <vector>

namespace {

using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const mat>;

struct operands {
    long m, k, n;
    mat x, y;
    std::vector<float> w;  // `copies` copies of W (n, k), back to back
    long copies = 1, next = 0;
    operands(long m_, long k_, long n_, bool rotate) : m(m_), k(k_), n(n_), x(mat::Random(m_, k_)), y(m_, n_) {
        const mat w0 = mat::Random(n, k);
        const std::size_t one = static_cast<std::size_t>(n * k);
        if (rotate) copies = std::max<long>(2, static_cast<long>((std::size_t{1} << 30) / (one * sizeof(float))));
        w.resize(one * static_cast<std::size_t>(copies));
        for (long c = 0; c < copies; ++c) std::memcpy(w.data() + one * static_cast<std::size_t>(c), w0.data(), one * sizeof(float));
    }
    // W of this iteration
    const float* W() {
        const float* p = w.data() + static_cast<std::size_t>(n * k) * static_cast<std::size_t>(next);
        next = (next + 1) % copies;
        return p;
    }
};

void set_counters(benchmark::State& s, const operands& o) {
    const double m = static_cast<double>(o.m), k = static_cast<double>(o.k), n = static_cast<double>(o.n);
    s.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    if (o.m <= 8)
        s.counters["GB/s"] = benchmark::Counter(4.0 * (n * k + m * (k + n)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_gemm_eigen(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    Eigen::setNbThreads(static_cast<int>(s.range(3)));
    for (auto _ : s) {
        o.y.noalias() = o.x * cmap(o.W(), o.n, o.k).transpose();
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}

void BM_gemm_openblas(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    openblas_set_num_threads(static_cast<int>(s.range(3)));
    const int M = static_cast<int>(o.m), N = static_cast<int>(o.n), K = static_cast<int>(o.k);
    for (auto _ : s) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, o.x.data(), K, o.W(), K, 0.0f, o.y.data(), N);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}

#ifdef LOCOST_USE_ONEDNN
void BM_gemm_onednn(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    omp_set_num_threads(static_cast<int>(s.range(3)));
    for (auto _ : s) {
        dnnl_sgemm('N', 'T', o.m, o.n, o.k, 1.0f, o.x.data(), o.k, o.W(), o.k, 0.0f, o.y.data(), o.n);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}
#endif

// The library's GEMM (what every projection of the model calls).
void BM_gemm_locost(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    locost::set_num_threads(static_cast<int>(s.range(3)));
    s.SetLabel(locost::float32_gemm().describe());
    for (auto _ : s) {
        locost::ops::matmul_wt<locost::cpu>(o.x.data(), o.W(), o.y.data(), o.m, o.k, o.n);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}

// y = W · x for M = 1 with OpenBLAS's matrix-vector kernel.
void BM_gemm_sgemv(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    openblas_set_num_threads(static_cast<int>(s.range(3)));
    const int N = static_cast<int>(o.n), K = static_cast<int>(o.k);
    for (auto _ : s) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, o.W(), K, o.x.data(), 1, 0.0f, o.y.data(), 1);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}

// A linear layer with weight precision p (bf16_products: what --compute bf16 makes of the
// encoder; i8_products: --compute int8).
void linear_products(benchmark::State& s, locost::ops::weight_precision p) {
    operands o(s.range(0), s.range(1), s.range(2), false);
    locost::set_num_threads(static_cast<int>(s.range(3)));
    locost::tensor<float> w({o.n, o.k});
    std::memcpy(w.data(), o.W(), static_cast<std::size_t>(o.n * o.k) * sizeof(float));
    const locost::layers::weight_matrix<float, locost::cpu> m(std::move(w), p);
    for (auto _ : s) {
        m.apply(o.x.data(), o.y.data(), o.m);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}
void BM_linear_bf16_products(benchmark::State& s) { linear_products(s, locost::ops::weight_precision::bf16_products); }
// A float32 linear layer over the few rows of a decoding step (one row per document of a batch
// decoding together, up to 64: the fused kernel, backend/cpu/linear.hpp), W from DRAM (rotate 1)
// as a decoder step reads it.
void BM_linear_native_rows(benchmark::State& s) {
    operands o(s.range(0), s.range(1), s.range(2), s.range(4) != 0);
    locost::set_num_threads(static_cast<int>(s.range(3)));
    locost::ops::weight_view view;
    view.out = o.n;
    view.in = o.k;
    for (auto _ : s) {
        view.data = o.W();
        locost::ops::linear<locost::cpu, float>(view, o.x.data(), o.k, o.m, o.y.data(), o.n);
        benchmark::DoNotOptimize(o.y.data());
    }
    set_counters(s, o);
}
void BM_linear_i8_products(benchmark::State& s) { linear_products(s, locost::ops::weight_precision::i8_products); }

void encoder_shapes(benchmark::internal::Benchmark* b) {
    for (long t : {1, 2})
        for (long m : {4096L, 1024L, 1144L, 682L})  // 1144, 682: a short document's rows, not a multiple of 64
            for (auto [k, n] : {std::pair{768L, 768L}, {768L, 2048L}, {2048L, 768L}}) b->Args({m, k, n, t, 0});
    b->ArgNames({"M", "K", "N", "threads", "rotate"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

#ifdef LOCOST_USE_ONEDNN
// oneDNN's int8 matmul called directly with M rows as they come (what i8_products did before it
// padded the rows to a multiple of 64): int8 values that are not all zero (AMX runs all-zero
// tiles faster), int32 sums. On a Xeon with AMX some row counts run several times slower than
// their neighbours (bench/RESULTS.md, "oneDNN's AMX matmul").
void BM_onednn_s8_rows(benchmark::State& s) {
    const long m = s.range(0), k = s.range(1), n = s.range(2);
    locost::set_num_threads(static_cast<int>(s.range(3)));
    std::vector<std::int8_t> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(static_cast<int>(i * 53 % 255) - 127);
    std::vector<std::int32_t> y(static_cast<std::size_t>(m * n));
    locost::ops::weight_view view;
    view.data = w.data();
    view.out = n;
    view.in = k;
    for (auto _ : s) {
        if (!locost::cpu_detail::onednn_products::instance().run(x.data(), m, view, y.data(), n)) {
            s.SkipWithError("oneDNN has no int8 matmul on this machine");
            break;
        }
        benchmark::DoNotOptimize(y.data());
    }
    s.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_onednn_s8_rows)
    ->ArgsProduct({{106, 128, 682, 683, 704, 1144, 1152}, {768}, {1536, 2304}, {2}})
    ->ArgNames({"M", "K", "N", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
#endif

void decode_shapes(benchmark::internal::Benchmark* b, std::initializer_list<long> rows) {
    // one decoding step through 768→768, 768→2048, 2048→768 and the 768→32100 LM head, for one
    // hypothesis (M = 1) and for four beams (M = 4)
    for (long m : rows)
        for (long rotate : {0, 1})
            for (long t : {1, 2})
                for (auto [k, n] : {std::pair{768L, 768L}, {768L, 2048L}, {2048L, 768L}, {768L, 32100L}}) b->Args({m, k, n, t, rotate});
    b->ArgNames({"M", "K", "N", "threads", "rotate"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void batch_decode_shapes(benchmark::internal::Benchmark* b) {
    // T5 base's decoder (768→768, FFN 768→3072→768, the 768→32128 LM head), rows of a batch
    for (long m : {1L, 8L, 15L, 16L, 24L, 32L})
        for (auto [k, n] : {std::pair{768L, 768L}, {768L, 3072L}, {3072L, 768L}, {768L, 32128L}})
            for (long rotate : {0L, 1L}) b->Args({m, k, n, 2, rotate});
    b->ArgNames({"M", "K", "N", "threads", "rotate"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void gemv_shapes(benchmark::internal::Benchmark* b) { decode_shapes(b, {1}); }

void shapes(benchmark::internal::Benchmark* b) {
    // S4D projections 768→768, FFN in 768→2048, FFN out 2048→768
    for (long t : {1, 2})
        for (long m : {4096L, 1024L})
            for (auto [k, n] : {std::pair{768L, 768L}, {768L, 2048L}, {2048L, 768L}}) b->Args({m, k, n, t, 0});
    decode_shapes(b, {1, 4});
}

}  // namespace

BENCHMARK(BM_gemm_eigen)->Apply(shapes);
BENCHMARK(BM_gemm_openblas)->Apply(shapes);
#ifdef LOCOST_USE_ONEDNN
BENCHMARK(BM_gemm_onednn)->Apply(encoder_shapes);
#endif
BENCHMARK(BM_gemm_locost)->Apply(shapes);
BENCHMARK(BM_gemm_sgemv)->Apply(gemv_shapes);
BENCHMARK(BM_linear_bf16_products)->Apply(encoder_shapes);
BENCHMARK(BM_linear_native_rows)->Apply(batch_decode_shapes);
BENCHMARK(BM_linear_i8_products)->Apply(encoder_shapes);
BENCHMARK_MAIN();
