// Decoding on one GPU (the CUDA backend, -DLOCOST_CUDA=ON), against the GPU's memory speed.
//
//   bm_cuda_decode attention   one decoder layer's cross-attention call, alone, as a decoding step
//                              makes it: cached (12 heads of 64 over the layer's keys and values;
//                              1 query row per head for greedy, 4 for beam 4) and folded (12 or 48
//                              queries over the 768-wide states), over L keys in float32, bfloat16
//                              and int8. GPU time per call (CUDA events, mean of repeated calls
//                              after a warm-up), the read rate it achieves, and its ratio to the
//                              time to read those bytes once at the H200's 4.8 TB/s (its data
//                              sheet; what the goals are stated in: "within 2x the cache's
//                              read-once time"). The measured device-to-device copy rate is
//                              printed beside it.
//   bm_cuda_decode steps       whole decoding steps of a checkpoint (env LOCOST_BENCH_MODEL: the
//                              base demo, UNTRAINED weights) after encoding L random ids once:
//                              host wall time per step (the search reads each step's logits on the
//                              host), mean of steps 9..8+N, greedy (1 row) and 4 rows of one
//                              document (beam 4's rows, without its reordering), in the
//                              cross-attention forms and weight storages asked for.
//
// Options: --lengths 4096,65536,696580  --reps 20  --steps 32  --forms cached,folded
//          --weights float32,int8  --rows 1,4  --json FILE (the figures as JSON too).
// Output: markdown tables on stdout. Without a GPU it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <locost/backend/cuda/cuda.hpp>
#include <locost/locost.hpp>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../bench_common.hpp"

namespace {

using locost::cuda;
using locost::index_t;
using locost::ops::kv_precision;

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

const char* name_of(kv_precision p) { return p == kv_precision::f32 ? "float32" : p == kv_precision::bf16 ? "bfloat16" : "int8"; }

// Device-to-device copy rate, bytes read + written per second, over a 4 GB buffer.
double copy_rate() {
    const index_t n = index_t{1} << 30;  // floats: 4 GB
    locost::tensor<float, cuda> a({n}), b({n});
    locost::ops::fill<cuda>(a.data(), n, 1.0f);
    locost::transfer<cuda>::copy(b.data(), a.data(), static_cast<std::size_t>(n));  // warm-up
    locost::cuda_detail::gpu_timer t;
    const int reps = 5;
    t.start();
    for (int r = 0; r < reps; ++r) locost::transfer<cuda>::copy(b.data(), a.data(), static_cast<std::size_t>(n));
    const double ms = t.stop_ms() / reps;
    return 2.0 * static_cast<double>(n) * 4 / (ms * 1e-3);
}

// rows × width values in precision p on the device, from a float block of random values repeated.
struct stored {
    locost::tensor<std::byte, cuda> data;
    locost::tensor<float, cuda> scale;
    kv_precision p;
    index_t rows, width;
    stored(kv_precision prec, index_t n, index_t w, unsigned seed) : p(prec), rows(n), width(w) {
        const std::size_t e = prec == kv_precision::f32 ? 4 : prec == kv_precision::bf16 ? 2 : 1;
        data = locost::tensor<std::byte, cuda>({static_cast<index_t>(static_cast<std::size_t>(n * w) * e)});
        if (prec == kv_precision::i8) scale = locost::tensor<float, cuda>({n});
        const index_t block_rows = std::min<index_t>(n, 8192);
        std::vector<float> h(static_cast<std::size_t>(block_rows * w));
        std::mt19937 g(seed);
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (auto& x : h) x = d(g);
        locost::tensor<float, cuda> src({block_rows * w});
        locost::transfer<cuda>::upload(src.data(), h.data(), h.size());
        for (index_t r0 = 0; r0 < n; r0 += block_rows) {
            const index_t k = std::min(block_rows, n - r0);
            locost::ops::store_rows<cuda>(prec, static_cast<const float*>(src.data()), w, k, w,
                                          static_cast<void*>(data.data() + static_cast<std::size_t>(r0 * w) * e),
                                          prec == kv_precision::i8 ? scale.data() + r0 : nullptr);
        }
    }
    locost::ops::kv_matrix matrix(index_t row0 = 0) const {
        const std::size_t e = p == kv_precision::f32 ? 4 : p == kv_precision::bf16 ? 2 : 1;
        return {p, data.data() + static_cast<std::size_t>(row0 * width) * e, p == kv_precision::i8 ? scale.data() + row0 : nullptr, width};
    }
    std::size_t bytes() const { return static_cast<std::size_t>(data.numel()) + static_cast<std::size_t>(scale.numel()) * 4; }
};

struct row {
    std::string form, precision, plan;
    index_t L = 0, queries = 0;
    double us = 0, read_once_us = 0, bytes = 0;
};

// Mean GPU time of f() over reps calls after two warm-up calls, in microseconds.
template <class F>
double time_us(int reps, F&& f) {
    f();
    f();
    locost::cuda_detail::gpu_timer t;
    t.start();
    for (int r = 0; r < reps; ++r) f();
    return t.stop_ms() * 1e3 / reps;
}

// The H200's memory bandwidth by its data sheet, bytes per second.
constexpr double read_once_rate = 4.8e12;

std::vector<row> attention_table(const std::vector<index_t>& lengths, int reps) {
    std::vector<row> out;
    const index_t heads = 12, dk = 64, H = 768;
    for (index_t L : lengths)
        for (kv_precision p : {kv_precision::f32, kv_precision::bf16, kv_precision::i8}) {
            {
                // One layer's cache: keys and values of every head, head-major as layers/cross_kv.hpp stores them.
                const stored k(p, heads * L, dk, 1), v(p, heads * L, dk, 2);
                for (index_t nq : {index_t{1}, index_t{4}}) {
                    locost::tensor<float, cuda> q({nq * heads * dk}), o({nq * heads * dk});
                    locost::ops::fill<cuda>(q.data(), q.numel(), 0.05f);
                    std::vector<locost::ops::attention_problem<float>> probs;
                    for (index_t h = 0; h < heads; ++h) {
                        locost::ops::attention_problem<float> a;
                        a.q = q.data() + h * dk, a.nq = nq, a.ldq = heads * dk;
                        a.k = k.matrix(h * L), a.v = v.matrix(h * L), a.nk = L;
                        a.out = o.data() + h * dk, a.ldo = heads * dk;
                        probs.push_back(a);
                    }
                    row r{"cached", name_of(p), locost::cuda_detail::attention_plan(probs, dk), L, nq * heads};
                    r.bytes = static_cast<double>(k.bytes() + v.bytes());
                    r.us = time_us(reps, [&] { locost::ops::attention<cuda>(probs, dk); });
                    r.read_once_us = r.bytes / read_once_rate * 1e6;
                    out.push_back(r);
                }
            }
            {
                const stored s(p, L, H, 3);
                for (index_t nq : {heads, 4 * heads}) {
                    locost::tensor<float, cuda> q({nq * H}), o({nq * H});
                    locost::ops::fill<cuda>(q.data(), q.numel(), 0.01f);
                    std::vector<locost::ops::attention_problem<float>> probs(1);
                    probs[0].q = q.data(), probs[0].nq = nq, probs[0].ldq = H;
                    probs[0].k = probs[0].v = s.matrix();
                    probs[0].nk = L, probs[0].out = o.data(), probs[0].ldo = H;
                    row r{"folded", name_of(p), locost::cuda_detail::attention_plan(probs, H), L, nq};
                    r.bytes = static_cast<double>(s.bytes());
                    r.us = time_us(reps,
                                   [&] { locost::ops::shared_kv_attention<cuda, float>(q.data(), nq, H, s.matrix(), L, H, o.data(), H); });
                    r.read_once_us = r.bytes / read_once_rate * 1e6;
                    out.push_back(r);
                }
            }
            std::fprintf(stderr, "bm_cuda_decode: attention at %lld tokens, %s done\n", static_cast<long long>(L), name_of(p));
        }
    return out;
}

struct step_row {
    std::string form, weights, cache;
    index_t L = 0, rows = 0, steps = 0;
    double ms = 0, first_ms = 0, encode_s = 0, peak_gb = 0;
};

std::vector<step_row> step_table(const std::string& model_dir, const std::vector<index_t>& lengths, const std::vector<std::string>& forms,
                                 const std::vector<std::string>& weights, const std::vector<index_t>& rows_list, index_t steps) {
    using clock = std::chrono::steady_clock;
    std::vector<step_row> out;
    const auto ck = locost::io::checkpoint::open(model_dir);
    for (const auto& form : forms)
        for (const auto& w : weights) {
            locost::models::model_options o;
            o.cross_attention =
                form == "folded" ? locost::models::cross_attention_form::folded : locost::models::cross_attention_form::cached;
            o.weights = w == "int8" ? locost::models::weight_precision::i8
                : w == "bfloat16"   ? locost::models::weight_precision::bf16
                                    : locost::models::weight_precision::native;
            o.encoder.tile_rows = 32768;
            auto m = locost::models::load_model<float, cuda>(ck, o);
            const index_t V = m.config().vocab_size;
            for (index_t L : lengths) {
                const auto ids = bench::random_ids(L, V);
                locost::cuda_detail::release_cached_memory();
                locost::cuda_detail::reset_peak_memory();
                const auto t0 = clock::now();
                auto e = m.encode(ids.data(), nullptr, 1, L);
                locost::cuda_detail::synchronize();
                const double enc_s = std::chrono::duration<double>(clock::now() - t0).count();
                for (index_t R : rows_list) {
                    auto st = m.start(e, R, 8 + steps + 1);
                    std::vector<float> logits(static_cast<std::size_t>(R * V));
                    std::vector<std::int64_t> tok(static_cast<std::size_t>(R), m.config().decoder_start_token_id);
                    double first = 0;
                    for (index_t t = 0; t < 8; ++t) {  // warm-up: the allocator's lists, the band
                        const auto a = clock::now();
                        m.step(st, tok.data(), 1, logits.data());
                        if (t == 0) first = std::chrono::duration<double, std::milli>(clock::now() - a).count();
                        for (index_t r = 0; r < R; ++r)
                            tok[static_cast<std::size_t>(r)] =
                                std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) - (logits.begin() + r * V);
                    }
                    const auto a = clock::now();
                    for (index_t t = 0; t < steps; ++t) {
                        m.step(st, tok.data(), 1, logits.data());
                        for (index_t r = 0; r < R; ++r)
                            tok[static_cast<std::size_t>(r)] =
                                std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) - (logits.begin() + r * V);
                    }
                    step_row s;
                    s.form = form, s.weights = w, s.L = L, s.rows = R, s.steps = steps;
                    s.ms = std::chrono::duration<double, std::milli>(clock::now() - a).count() / static_cast<double>(steps);
                    s.first_ms = first, s.encode_s = enc_s;
                    s.cache = locost::models::precision_name(e.precision);
                    s.peak_gb = static_cast<double>(locost::cuda_detail::memory_stats().peak_reserved) / 1e9;
                    out.push_back(s);
                    std::fprintf(stderr, "bm_cuda_decode: %s %s L=%lld rows=%lld: %.3f ms/step\n", form.c_str(), w.c_str(),
                                 static_cast<long long>(L), static_cast<long long>(R), s.ms);
                }
            }
        }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "attention";
    std::map<std::string, std::string> opt = {
        {"lengths", "4096,65536,696580"}, {"reps", "20"},  {"steps", "32"}, {"forms", "cached,folded"},
        {"weights", "float32"},           {"rows", "1,4"}, {"json", ""}};
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k.rfind("--", 0) != 0 || !opt.count(k.substr(2))) {
            std::fprintf(stderr, "bm_cuda_decode: unknown option %s\n", k.c_str());
            return 2;
        }
        opt[k.substr(2)] = argv[i + 1];
    }
    std::vector<index_t> lengths;
    for (const auto& s : split(opt["lengths"])) lengths.push_back(std::stoll(s));
    try {
        const auto gpus = locost::cuda_devices();
        std::printf("GPU: %s, %d multiprocessors\n\n", gpus.front().name.c_str(), gpus.front().multiprocessors);
    } catch (const locost::error& e) {
        std::printf("bm_cuda_decode: nothing to measure without a GPU (%s)\n", e.what());
        return 0;
    }
    std::ostringstream js;
    try {
        if (mode == "attention") {
            const double rate = copy_rate();
            std::printf("device-to-device copy: %.0f GB/s (bytes read + written); read-once time = bytes / 4.8 TB/s\n\n", rate / 1e9);
            const auto rows = attention_table(lengths, std::stoi(opt["reps"]));
            std::printf("| form | L | queries | storage | bytes read (MB) | µs per call | GB/s | read-once µs | ratio | plan |\n");
            std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n");
            js << "{\"copy_rate_GBps\": " << rate / 1e9 << ", \"attention\": [";
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const auto& r = rows[i];
                std::printf("| %s | %lld | %lld | %s | %.1f | %.1f | %.0f | %.1f | %.2fx | %s |\n", r.form.c_str(),
                            static_cast<long long>(r.L), static_cast<long long>(r.queries), r.precision.c_str(), r.bytes / 1e6, r.us,
                            r.bytes / r.us * 1e-3, r.read_once_us, r.us / r.read_once_us, r.plan.c_str());
                js << (i ? "," : "") << "{\"form\":\"" << r.form << "\",\"L\":" << r.L << ",\"queries\":" << r.queries << ",\"storage\":\""
                   << r.precision << "\",\"bytes\":" << r.bytes << ",\"us\":" << r.us << ",\"read_once_us\":" << r.read_once_us << "}";
            }
            js << "]}";
        } else if (mode == "steps") {
            const char* model = std::getenv("LOCOST_BENCH_MODEL");
            if (!model) {
                std::printf("bm_cuda_decode steps: set LOCOST_BENCH_MODEL to a checkpoint directory (the base demo)\n");
                return 2;
            }
            std::vector<index_t> rows_list;
            for (const auto& s : split(opt["rows"])) rows_list.push_back(std::stoll(s));
            const auto rows = step_table(model, lengths, split(opt["forms"]), split(opt["weights"]), rows_list, std::stoll(opt["steps"]));
            std::printf("| L | form | cache | weights | rows | ms per step | first step ms | encode s | peak GB |\n");
            std::printf("|---:|---|---|---|---:|---:|---:|---:|---:|\n");
            js << "{\"steps\": [";
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const auto& r = rows[i];
                std::printf("| %lld | %s | %s | %s | %lld | %.3f | %.1f | %.2f | %.2f |\n", static_cast<long long>(r.L), r.form.c_str(),
                            r.cache.c_str(), r.weights.c_str(), static_cast<long long>(r.rows), r.ms, r.first_ms, r.encode_s, r.peak_gb);
                js << (i ? "," : "") << "{\"L\":" << r.L << ",\"form\":\"" << r.form << "\",\"cache\":\"" << r.cache << "\",\"weights\":\""
                   << r.weights << "\",\"rows\":" << r.rows << ",\"ms\":" << r.ms << ",\"first_ms\":" << r.first_ms
                   << ",\"encode_s\":" << r.encode_s << ",\"peak_GB\":" << r.peak_gb << "}";
            }
            js << "]}";
        } else {
            std::fprintf(stderr, "bm_cuda_decode: mode is attention or steps, got %s\n", mode.c_str());
            return 2;
        }
    } catch (const locost::error& e) {
        std::fprintf(stderr, "bm_cuda_decode: %s\n", e.what());
        return 1;
    }
    if (!opt["json"].empty()) std::ofstream(opt["json"]) << js.str() << "\n";
    return 0;
}
