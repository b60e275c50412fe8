// SLED over an encoder against an encoder alone, as whole-program runs: one process per
// configuration, so that its peak resident memory is its own.
//
//   bm_sled MODEL_DIR LENGTH [CONTEXT FRACTION] [CHUNK_BATCH]
//
// Encodes LENGTH reproducible random ids (bench_common.hpp) with MODEL_DIR's encoder — through SLED
// with chunks of CONTEXT tokens keeping FRACTION of each when CONTEXT is given — and streams the
// states to a sink that only reads them (what the decoder's cross-attention cache does with them,
// minus the cache itself, whose size depends on the length alone). Prints one JSON line: tokens/s
// (document tokens per second of encoding), chunks, peak RSS (VmHWM, whole process: weights
// included) and the CPU share other processes took meanwhile. bench/sled/sled_vs_locost.sh runs the
// table of bench/RESULTS.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <locost/locost.hpp>
#include <string>

#include "../bench_common.hpp"

namespace {

std::size_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 && argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: bm_sled MODEL_DIR LENGTH [CONTEXT FRACTION [CHUNK_BATCH]]\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        const locost::index_t L = std::atoll(argv[2]);
        locost::models::model_options o;
        if (argc >= 5) {
            o.sled =
                locost::models::sled_options{std::atoll(argv[3]), std::atof(argv[4]), 0, true, true, argc == 6 ? std::atoll(argv[5]) : 0};
        }
        const auto ck = locost::io::checkpoint::open(dir);
        auto enc = locost::models::load_encoder<float, locost::cpu>(ck, o);
        const auto ids = bench::random_ids(L, enc.vocab_size());
        const double load_rss = static_cast<double>(peak_rss_bytes()) / 1e6;
        double checksum = 0;
        locost::index_t chunks = 0;
        bench::foreign_load foreign;
        const auto t0 = std::chrono::steady_clock::now();
        enc.encode(
            ids.data(), nullptr, 1, L, [&](const locost::models::encode_progress& p) { chunks = std::max(chunks, p.chunks); },
            [&](locost::index_t, locost::index_t, locost::index_t n, const float* h) {
                for (locost::index_t i = 0; i < n; ++i) checksum += h[i * enc.d_model()];
            });
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("{\"model\": \"%s\", \"model_type\": \"%s\", \"length\": %lld, \"context\": %lld, \"fraction\": %g, \"chunks\": %lld, "
                    "\"seconds\": %.2f, \"tokens_per_s\": %.1f, \"peak_rss_mb\": %.0f, \"rss_after_load_mb\": %.0f, \"foreign\": %.3f, "
                    "\"checksum\": %.6g}\n",
                    dir.c_str(), enc.config().model_type.c_str(), static_cast<long long>(L),
                    static_cast<long long>(o.sled ? o.sled->context_size : 0), o.sled ? o.sled->window_fraction : 0.0,
                    static_cast<long long>(chunks), secs, static_cast<double>(L) / secs, static_cast<double>(peak_rss_bytes()) / 1e6,
                    load_rss, foreign.share(), checksum);
    } catch (const locost::error& e) {
        std::fprintf(stderr, "bm_sled: %s\n", e.what());
        return 1;
    }
}
