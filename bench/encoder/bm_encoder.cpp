// An encoder (LOCOST's by default, any family's checkpoint) and LOCOST's two S4D building blocks on
// the CPU.
//
//  BM_encoder_warm/L/threads   encoder forward, batch 1, after a first call at the same length
//                              (the steady state of repeated calls; for LOCOST that call fills
//                              the kernel cache: with the default 1 GiB budget the base model
//                              caches ~14.5K tokens of kernels for all 12 layers, so at 16K two
//                              layers still generate theirs)
//  BM_encoder_cold/L/threads   the same with drop_caches() before each iteration (outside the
//                              timing): includes S4D kernel generation, as the original code's every
//                              forward does
//      model: the checkpoint directory in env LOCOST_BENCH_MODEL (the base demo checkpoint; without
//      it these are not registered, and a message says so). Env LOCOST_BENCH_KERNEL_CACHE_MB
//      overrides the kernel cache budget; LOCOST_BENCH_LENGTHS (e.g. 512,2048) and
//      LOCOST_BENCH_THREADS replace the default lengths 1024, 4096, 16384 and 2 threads.
//      Counters: tokens/s; GEMM GFLOP/s = 2 · layers · (3·H² + 3·H·F) · L / s (the q/k/output
//      projections and the gated feed-forward; the convolution and kernel generation are not
//      counted, so this is the GEMM rate the whole forward would need); foreign = CPU share other
//      processes used meanwhile (shared machine). For another family the GEMM counter is only a
//      lower bound (T5's attention has four H × H projections, not three): read its tokens/s.
//  BM_ssm_kernels/L/threads    S4D kernel generation, all H = 768 channels, both directions, N/2 = 256
//                              modes (d_state 512), original init. GFLOP/s counts the generation's
//                              GEMM (2 · 2L · N flops per channel, N = 512); GB/s the kernels written.
//  BM_bidirectional_conv/L/threads  the FFT convolution of (L, 768) with precomputed kernels (copied in
//                              per channel group, as from the kernel cache). GFLOP/s: the nominal
//                              2.5·M·log2(M) flops of each of the 3 real FFTs of size M per channel;
//                              GB/s: activations read + written (2·L·H floats) + kernels read.
//  BM_conv_generating/L/threads     the convolution generating each group's kernels on the fly (the
//                              path of inputs longer than the kernel cache holds: whole books).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <locost/locost.hpp>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "../bench_common.hpp"

namespace {

using bench::foreign_load;
using bench::random_ids;
using locost::index_t;

// ---- the encoder ------------------------------------------------------------------------
struct loaded_model {
    locost::models::any_encoder<float, locost::cpu> enc;
    index_t H, F, layers, vocab;
};

loaded_model& model() {
    static std::unique_ptr<loaded_model> m = [] {
        const char* dir = std::getenv("LOCOST_BENCH_MODEL");
        locost::models::model_options o;
        if (const char* mb = std::getenv("LOCOST_BENCH_KERNEL_CACHE_MB"))
            o.encoder.kernel_cache_bytes = static_cast<std::size_t>(std::atoll(mb)) << 20;
        const auto ck = locost::io::checkpoint::open(dir);
        auto enc = locost::models::load_encoder(ck, o);
        const auto& c = enc.config();
        return std::make_unique<loaded_model>(loaded_model{std::move(enc), c.d_model, c.d_ff, c.num_layers, c.vocab_size});
    }();
    return *m;
}

void encoder_counters(benchmark::State& s, const loaded_model& m, index_t L, double foreign) {
    const double gemm_flops = 2.0 * static_cast<double>(m.layers) *
        (3.0 * static_cast<double>(m.H * m.H) + 3.0 * static_cast<double>(m.H * m.F)) * static_cast<double>(L);
    s.counters["tokens/s"] = benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
    s.counters["GEMM_GFLOP/s"] = benchmark::Counter(gemm_flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["foreign"] = foreign;
    s.counters["threads"] = static_cast<double>(locost::num_threads());
}

void BM_encoder_warm(benchmark::State& s) {
    const index_t L = s.range(0);
    locost::set_num_threads(static_cast<int>(s.range(1)));
    auto& m = model();
    const auto ids = random_ids(L, m.vocab);
    m.enc.drop_caches();
    benchmark::DoNotOptimize(m.enc.forward(ids.data(), nullptr, 1, L).data());  // fills the kernel cache
    foreign_load fl;
    for (auto _ : s) {
        auto h = m.enc.forward(ids.data(), nullptr, 1, L);
        benchmark::DoNotOptimize(h.data());
    }
    encoder_counters(s, m, L, fl.share());
}

void BM_encoder_cold(benchmark::State& s) {
    const index_t L = s.range(0);
    locost::set_num_threads(static_cast<int>(s.range(1)));
    auto& m = model();
    const auto ids = random_ids(L, m.vocab);
    m.enc.drop_caches();
    benchmark::DoNotOptimize(m.enc.forward(ids.data(), nullptr, 1, std::min<index_t>(L, 1024)).data());  // FFTW plans etc.
    foreign_load fl;
    for (auto _ : s) {
        s.PauseTiming();
        m.enc.drop_caches();
        s.ResumeTiming();
        auto h = m.enc.forward(ids.data(), nullptr, 1, L);
        benchmark::DoNotOptimize(h.data());
    }
    encoder_counters(s, m, L, fl.share());
}

// Lengths 1024, 4096 and 16384 on 2 threads, or those of env LOCOST_BENCH_LENGTHS (comma-separated)
// and LOCOST_BENCH_THREADS (bench/peers/compare_onnxruntime.py sets both).
void encoder_args(benchmark::internal::Benchmark* b) {
    std::vector<index_t> lengths{1024, 4096, 16384};
    if (const char* e = std::getenv("LOCOST_BENCH_LENGTHS")) {
        lengths.clear();
        for (const char* p = e; *p;) {
            char* end = nullptr;
            const long long v = std::strtoll(p, &end, 10);
            if (end == p || v <= 0) {
                std::fprintf(stderr, "bm_encoder: LOCOST_BENCH_LENGTHS='%s': expected positive integers separated by commas\n", e);
                std::exit(2);
            }
            lengths.push_back(static_cast<index_t>(v));
            p = *end == ',' ? end + 1 : end;
        }
    }
    const char* t = std::getenv("LOCOST_BENCH_THREADS");
    const index_t threads = t ? std::max<index_t>(1, std::atoll(t)) : 2;
    for (const index_t L : lengths) b->Args({L, threads});
    b->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(3);
}

// ---- S4D kernel generation and the convolution, base width ------------------------------
constexpr index_t base_H = 768, base_modes = 256;

locost::layers::s4d_kernel_parameters original_init(index_t H, index_t modes, index_t channels) {
    // SSKernelDiag / ssm_init "diag-lin" as the original initialises it:
    // log_dt ~ U[log 1e-3, log 1e-1], A = -0.5 + i·pi·n, B = 1, C complex normal.
    std::mt19937_64 g(7);
    std::uniform_real_distribution<double> u(std::log(1e-3), std::log(1e-1));
    std::normal_distribution<double> nrm(0.0, std::sqrt(0.5));
    locost::layers::s4d_kernel_parameters p;
    p.channels = channels;
    p.H = H;
    p.modes = modes;
    for (index_t h = 0; h < H; ++h) p.log_dt.push_back(static_cast<float>(u(g)));
    for (index_t h = 0; h < H; ++h)
        for (index_t n = 0; n < modes; ++n) {
            p.inv_A_real.push_back(static_cast<float>(std::log(0.5)));
            p.A_imag.push_back(static_cast<float>(std::numbers::pi * static_cast<double>(n)));
            p.B.push_back(1.0f);
            p.B.push_back(0.0f);
        }
    for (index_t i = 0; i < channels * H * modes * 2; ++i) p.C.push_back(static_cast<float>(nrm(g)));
    return p;
}

using s4d = locost::layers::s4d_kernel<float, locost::cpu>;

void BM_ssm_kernels(benchmark::State& s) {
    const index_t L = s.range(0);
    locost::set_num_threads(static_cast<int>(s.range(1)));
    const s4d k(original_init(base_H, base_modes, 2));
    locost::tensor<float> out({base_H, 2, L});
    locost::ops::ssm_kernels<locost::cpu>(k, 0, base_H, L, out.data());  // touch the pages
    foreign_load fl;
    for (auto _ : s) {
        locost::ops::ssm_kernels<locost::cpu>(k, 0, base_H, L, out.data());
        benchmark::DoNotOptimize(out.data());
    }
    const double N = 2.0 * base_modes;
    s.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(base_H) * 2.0 * (2.0 * static_cast<double>(L)) * N * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
    s.counters["GB/s"] = benchmark::Counter(static_cast<double>(out.numel()) * 4e-9, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["foreign"] = fl.share();
}

struct conv_setup {
    index_t L, H = base_H;
    locost::tensor<float> v, y, D, kernels;
    explicit conv_setup(index_t len, bool with_kernels) : L(len), v({len, base_H}), y({len, base_H}), D({base_H}) {
        std::mt19937 g(3);
        std::normal_distribution<float> n(0.0f, 1.0f);
        for (index_t i = 0; i < v.numel(); ++i) v[i] = n(g);
        for (index_t i = 0; i < H; ++i) D[i] = n(g);
        std::memset(y.data(), 0, static_cast<std::size_t>(y.numel()) * sizeof(float));
        if (with_kernels) {
            const s4d k(original_init(base_H, base_modes, 2));
            kernels = locost::tensor<float>({base_H, 2, len});
            locost::ops::ssm_kernels<locost::cpu>(k, 0, base_H, len, kernels.data());
        }
    }
    void counters(benchmark::State& s, double foreign) const {
        const double M = static_cast<double>(locost::ops::conv_geometry::make(L, {}).M);
        const double flops = static_cast<double>(H) * 3.0 * 2.5 * M * std::log2(M);
        s.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
        s.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(L * H) * (kernels.empty() ? 2.0 : 4.0) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
        s.counters["M"] = M;
        s.counters["foreign"] = foreign;
    }
};

void BM_bidirectional_conv(benchmark::State& s) {
    const index_t L = s.range(0);
    locost::set_num_threads(static_cast<int>(s.range(1)));
    conv_setup c(L, true);
    auto source = [&](index_t h0, index_t h1, index_t len, float* out, int) {
        std::memcpy(out, c.kernels.data() + h0 * 2 * len, static_cast<std::size_t>((h1 - h0) * 2 * len) * sizeof(float));
    };
    locost::ops::bidirectional_conv<locost::cpu>(c.v.data(), c.y.data(), 1, L, c.H, 2, c.D.data(), source, {});  // plans
    foreign_load fl;
    for (auto _ : s) {
        locost::ops::bidirectional_conv<locost::cpu>(c.v.data(), c.y.data(), 1, L, c.H, 2, c.D.data(), source, {});
        benchmark::DoNotOptimize(c.y.data());
    }
    c.counters(s, fl.share());
}

void BM_conv_generating(benchmark::State& s) {
    const index_t L = s.range(0);
    locost::set_num_threads(static_cast<int>(s.range(1)));
    conv_setup c(L, false);
    const s4d k(original_init(base_H, base_modes, 2));
    std::vector<s4d::scratch> scratch(static_cast<std::size_t>(locost::num_threads()));
    auto source = [&](index_t h0, index_t h1, index_t len, float* out, int thread) {
        for (index_t h = h0; h < h1; ++h) k.compute(h, len, out + (h - h0) * 2 * len, scratch[static_cast<std::size_t>(thread)]);
    };
    locost::ops::bidirectional_conv<locost::cpu>(c.v.data(), c.y.data(), 1, L, c.H, 2, c.D.data(), source, {});
    foreign_load fl;
    for (auto _ : s) {
        locost::ops::bidirectional_conv<locost::cpu>(c.v.data(), c.y.data(), 1, L, c.H, 2, c.D.data(), source, {});
        benchmark::DoNotOptimize(c.y.data());
    }
    c.counters(s, fl.share());
}

void micro_args(benchmark::internal::Benchmark* b) {
    for (long t : {1, 2}) b->Args({4096, t})->Args({65536, t});
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

int register_all() {
    if (std::getenv("LOCOST_BENCH_MODEL")) {
        benchmark::RegisterBenchmark("BM_encoder_warm", BM_encoder_warm)->Apply(encoder_args);
        benchmark::RegisterBenchmark("BM_encoder_cold", BM_encoder_cold)->Apply(encoder_args);
    } else {
        std::fprintf(stderr,
                     "bm_encoder: LOCOST_BENCH_MODEL is not set: skipping BM_encoder_* (set it to a checkpoint directory, "
                     "e.g. build/demo-base from 'locost demo-checkpoint --config base')\n");
    }
    benchmark::RegisterBenchmark("BM_ssm_kernels", BM_ssm_kernels)->Apply(micro_args);
    benchmark::RegisterBenchmark("BM_bidirectional_conv", BM_bidirectional_conv)->Apply(micro_args);
    benchmark::RegisterBenchmark("BM_conv_generating", BM_conv_generating)->Apply(micro_args);
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
