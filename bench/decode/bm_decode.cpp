// Decoding speed of the LOCOST seq2seq model: one generated token per step through all decoder
// layers (self-attention with its cache, cross-attention over the document's cached K/V, the
// feed-forward) and the LM head.
//
//  BM_decode/L/beams/threads   generation of 32 new tokens (min_new_tokens = 32, so eos never
//                              ends it early) after encoding L random token ids once (outside the
//                              timing); greedy for beams = 1, beam search with 4 beams sharing
//                              the document's cross-attention cache otherwise.
//      model: the checkpoint directory in env LOCOST_BENCH_MODEL (the base demo checkpoint;
//      without it nothing is registered, and a message says so). Env LOCOST_BENCH_CROSS_CACHE =
//      f32 | bf16 | int8 fixes the cross-attention cache precision (default: the automatic one);
//      LOCOST_BENCH_WEIGHTS = f32 | bf16 | int8 stores the decoder's per-step weights and LM
//      head in that precision (model_options::weights; default f32).
//      Counters: ms/token = median wall time of steps 2..32 (step 1 includes setting up the
//      decoder state; the original's baseline reports the same median); first_step_ms; MB_read =
//      decoder weights + LM head at their precision + the cross-attention K/V at its precision, the bytes one step
//      must read at least (divide by bm_bandwidth's GB/s for the read-once time); foreign = CPU
//      share other processes used meanwhile.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <locost/locost.hpp>
#include <map>
#include <type_traits>
#include <variant>
#include <memory>
#include <string>
#include <vector>

#include "../bench_common.hpp"

namespace {

using locost::index_t;
using clock_type = std::chrono::steady_clock;

using model_type = locost::models::any_model<float, locost::cpu>;

locost::models::weight_precision weights() {
    const char* p = std::getenv("LOCOST_BENCH_WEIGHTS");
    const std::string s = p ? p : "f32";
    return s == "bf16" ? locost::models::weight_precision::bf16
        : s == "int8"  ? locost::models::weight_precision::i8
                       : locost::models::weight_precision::native;
}

model_type& model() {
    static std::unique_ptr<model_type> m = [] {
        locost::models::model_options o;
        if (const char* p = std::getenv("LOCOST_BENCH_CROSS_CACHE")) {
            const std::string s = p;
            o.cross_cache = s == "f32" ? locost::models::cross_cache_precision::f32
                : s == "bf16"          ? locost::models::cross_cache_precision::bf16
                : s == "int8"          ? locost::models::cross_cache_precision::i8
                                       : locost::models::cross_cache_precision::automatic;
        }
        o.weights = weights();
        const auto ck = locost::io::checkpoint::open(std::getenv("LOCOST_BENCH_MODEL"));
        return std::make_unique<model_type>(locost::models::load_model<float, locost::cpu>(ck, o));
    }();
    return *m;
}

// Whether the decoder's feed-forward is gated: T5-shaped configs say so (feed_forward_proj
// "gated-..."), BART-shaped ones never are.
bool gated_feed_forward() {
    static const bool gated = [] {
        const auto ck = locost::io::checkpoint::open(std::getenv("LOCOST_BENCH_MODEL"));
        return std::visit(
            [](const auto& c) {
                if constexpr (std::is_base_of_v<locost::models::t5_style_fields, std::decay_t<decltype(c)>>) return c.is_gated_act;
                else return false;
            },
            *locost::models::read_config(ck));
    }();
    return gated;
}

// Bytes of the decoder's weights one step reads: per layer the self-attention q, k, v, o, the
// cross-attention q and o (its k and v are in the cache), the feed-forward, three norms; the
// final norm and the LM head. Matrices at the stored precision (int8: + a float scale per
// output channel), norms in float32.
double decoder_weight_bytes(const locost::models::model_config& c) {
    const double H = static_cast<double>(c.d_model), I = static_cast<double>(c.num_heads * c.d_kv), F = static_cast<double>(c.d_ff),
                 V = static_cast<double>(c.vocab_size);
    const auto p = weights();
    const double e = p == locost::models::weight_precision::bf16 ? 2 : p == locost::models::weight_precision::i8 ? 1 : 4;
    const double scales = p == locost::models::weight_precision::i8 ? 4 : 0;
    const double k = gated_feed_forward() ? 3 : 2;
    const double matrices = static_cast<double>(c.num_decoder_layers) * (6 * H * I + k * H * F) + V * H;
    const double channels = static_cast<double>(c.num_decoder_layers) * (3 * I + H + I + H + (k - 1) * F + H) + V;
    return e * matrices + scales * channels + 4.0 * (static_cast<double>(c.num_decoder_layers) * 3 * H + H);
}

void BM_decode(benchmark::State& s) {
    const index_t L = s.range(0), beams = s.range(1);
    locost::set_num_threads(static_cast<int>(s.range(2)));
    auto& m = model();
    static std::map<index_t, std::pair<std::vector<std::int64_t>, model_type::encoded>> encoded;
    if (!encoded.count(L)) {
        encoded.clear();  // one document's cache at a time
        auto ids = bench::random_ids(L, m.config().vocab_size);
        auto e = m.encode(ids.data(), nullptr, 1, L);
        encoded.emplace(L, std::make_pair(std::move(ids), std::move(e)));
    }
    const auto& [ids, enc] = encoded.at(L);
    auto o = locost::generation::default_generation_options(m.config(), m.generation_config());
    o.max_new_tokens = 32;
    o.min_new_tokens = 32;
    o.num_beams = beams;
    std::vector<double> steps, firsts;
    const bench::foreign_load fl;
    for (auto _ : s) {
        std::vector<clock_type::time_point> t{clock_type::now()};
        const auto r = locost::generation::generate(m, enc, {ids}, o, [&](const locost::generation::step_event&) {
            t.push_back(clock_type::now());
            return true;
        });
        benchmark::DoNotOptimize(r.sequences.data());
        for (std::size_t i = 1; i < t.size(); ++i)
            (i == 1 ? firsts : steps).push_back(std::chrono::duration<double>(t[i] - t[i - 1]).count());
        s.SetIterationTime(std::chrono::duration<double>(t.back() - t.front()).count());
    }
    std::sort(steps.begin(), steps.end());
    s.counters["ms/token"] = steps.empty() ? 0.0 : 1e3 * steps[steps.size() / 2];
    s.counters["first_step_ms"] = firsts.empty() ? 0.0 : 1e3 * firsts[0];
    s.counters["MB_read"] = (decoder_weight_bytes(m.config()) + static_cast<double>(enc.bytes())) * 1e-6;
    s.counters["cross_MB"] = static_cast<double>(enc.bytes()) * 1e-6;
    s.counters["foreign"] = fl.share();
    s.SetLabel(std::string(locost::models::weights_name(weights())) + " weights, " + locost::models::precision_name(enc.precision) +
               " cache");
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (std::getenv("LOCOST_BENCH_MODEL"))
        for (long L : {4096L, 16384L})
            for (long beams : {1L, 4L})
                benchmark::RegisterBenchmark("BM_decode", BM_decode)
                    ->Args({L, beams, 2})
                    ->ArgNames({"L", "beams", "threads"})
                    ->UseManualTime()
                    ->Iterations(2)
                    ->Unit(benchmark::kSecond);
    else
        std::fprintf(stderr, "bm_decode: set LOCOST_BENCH_MODEL to a LOCOST checkpoint directory (locost demo-checkpoint --config base)\n");
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
