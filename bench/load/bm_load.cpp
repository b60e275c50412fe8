// Checkpoint loading: open a checkpoint directory and convert every tensor to float32, as a
// model load does. Directories come from LOCOST_BENCH_CHECKPOINTS (colon-separated), e.g. the
// base demo checkpoint and its .bin / F16 / BF16 copies made by bench/load/make_checkpoint_variants.py.
// Counters: GB/s of float32 produced. Peak RSS: run one directory at a time under
// /usr/bin/time -v (bench/RESULTS.md has the commands).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <locost/locost.hpp>
#include <sstream>

namespace {

void BM_load_f32(benchmark::State& s, std::string dir) {
    double bytes = 0;
    for (auto _ : s) {
        const auto ck = locost::io::checkpoint::open(dir);
        bytes = 0;
        for (const auto& r : ck.records()) {
            auto t = ck.load_f32(r.name, r.shape);
            benchmark::DoNotOptimize(t.data());
            bytes += 4.0 * static_cast<double>(t.numel());
        }
    }
    s.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["GB"] = bytes * 1e-9;
}

// The conversion kernels alone, on 64 M elements (256 MB of float32 out).
void BM_convert(benchmark::State& s, locost::dtype t) {
    const std::size_t n = std::size_t{1} << 26;
    std::vector<std::uint16_t> src(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::uint16_t>(i * 2654435761u >> 17) & 0x7bffu;
    std::vector<float> dst(n);
    for (auto _ : s) {
        if (t == locost::dtype::f16) locost::f16_to_f32_n(src.data(), dst.data(), n);
        else locost::bf16_to_f32_n(src.data(), dst.data(), n);
        benchmark::DoNotOptimize(dst.data());
    }
    s.counters["GB/s out"] = benchmark::Counter(4.0 * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
    if (const char* env = std::getenv("LOCOST_BENCH_CHECKPOINTS")) {
        std::stringstream ss(env);
        std::string dir;
        while (std::getline(ss, dir, ':'))
            if (!dir.empty())
                benchmark::RegisterBenchmark(("BM_load_f32/" + dir).c_str(), BM_load_f32, dir)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime()
                    ->Iterations(3);
    }
    benchmark::RegisterBenchmark("BM_convert/f16", BM_convert, locost::dtype::f16)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_convert/bf16", BM_convert, locost::dtype::bf16)->Unit(benchmark::kMillisecond);
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
