// The LOCOST encoder on one GPU (the CUDA backend, -DLOCOST_CUDA=ON).
//
//  BM_cuda_encoder/L   encoder forward, batch 1, with the kernel cache dropped before each
//                      iteration (outside the timing), so every forward generates its S4D kernels
//                      as the original code's does. Time: the forward and a synchronisation of the
//                      stream (manual time), the states left on the GPU as a pipeline would.
//      model: the checkpoint directory in env LOCOST_BENCH_MODEL (the base demo checkpoint);
//      env LOCOST_BENCH_COMPUTE=bf16 runs the linear layers on bfloat16 inputs (cuBLAS, float32
//      sums); LOCOST_BENCH_TILE_ROWS (default 32768) sets encoder_options::tile_rows, the rows per
//      GEMM of the pointwise sub-layers (the CPU's default, 1024, is sized for its caches; a GPU
//      wants far more rows per launch). Counters: tokens/s; peak_GB = the most device memory the backend held during the
//      iteration (its own buffers: weights, states, convolution and kernel scratch; cuBLAS's and
//      cuFFT's workspaces are not counted).
// Without a GPU nothing is registered and a line says why. Lengths: 4K, 16K, 64K, 256K and
// 696,580 (War and Peace's length through the repository's SentencePiece model).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <locost/locost.hpp>
#include <locost/backend/cuda/cuda.hpp>
#include <memory>
#include <string>

#include "../bench_common.hpp"

namespace {

using locost::cuda;
using locost::index_t;

locost::models::any_encoder<float, cuda>& model() {
    static std::unique_ptr<locost::models::any_encoder<float, cuda>> m = [] {
        locost::models::model_options o;
        const char* tile = std::getenv("LOCOST_BENCH_TILE_ROWS");
        o.encoder.tile_rows = tile ? std::atoll(tile) : 32768;
        if (const char* c = std::getenv("LOCOST_BENCH_COMPUTE"); c && std::string(c) == "bf16")
            o.encoder.compute = locost::models::compute_precision::bf16;
        return std::make_unique<locost::models::any_encoder<float, cuda>>(
            locost::models::load_encoder<float, cuda>(locost::io::checkpoint::open(std::getenv("LOCOST_BENCH_MODEL")), o));
    }();
    return *m;
}

void BM_cuda_encoder(benchmark::State& state) {
    const index_t L = state.range(0);
    auto& enc = model();
    const auto ids = bench::random_ids(L, enc.config().vocab_size);
    std::size_t peak = 0, peak_tensors = 0;
    for (auto _ : state) {
        enc.drop_caches();
        // Every document starts from an empty cache, as one run of the tool does: the peak is what
        // the GPU had to hold for this length, cached blocks included.
        locost::cuda_detail::release_cached_memory();
        locost::cuda_detail::reset_peak_memory();
        const auto t0 = std::chrono::steady_clock::now();
        auto h = enc.forward(ids.data(), nullptr, 1, L);
        locost::cuda_detail::synchronize();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        const auto m = locost::cuda_detail::memory_stats();
        peak = std::max(peak, m.peak_reserved);
        peak_tensors = std::max(peak_tensors, m.peak);
        benchmark::DoNotOptimize(h.data());
    }
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_GB"] = static_cast<double>(peak) / 1e9;  // held from the driver
    state.counters["tensors_GB"] = static_cast<double>(peak_tensors) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    try {
        const auto gpus = locost::cuda_devices();
        if (!std::getenv("LOCOST_BENCH_MODEL")) {
            std::printf("bm_cuda_encoder: set LOCOST_BENCH_MODEL to a LOCOST checkpoint directory (e.g. the base demo)\n");
            return 0;
        }
        std::printf("GPU: %s\n", gpus.front().name.c_str());
        for (index_t L : {4096, 16384, 65536, 262144, 696580})
            benchmark::RegisterBenchmark("BM_cuda_encoder", BM_cuda_encoder)->Arg(L)->UseManualTime()->Unit(benchmark::kMillisecond);
    } catch (const locost::error& e) {
        std::printf("bm_cuda_encoder: nothing to measure: %s\n", e.what());
        return 0;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
