// The T5 and BART families and SLED over either, against Hugging Face transformers 5.17's own outputs
// (tests/data/hf/README.md): encoder states, teacher-forced logits, every cached greedy step's
// logits, and the generation cases' sequences; SLED's window plan against the original's and a
// tiling property; the errors of bad SLED settings and unsupported variants.
#include "emulated_device.hpp"
#include "helpers.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace {

using namespace test;
using locost::cpu;
using json = nlohmann::json;
namespace models = locost::models;
namespace fs = std::filesystem;

const std::string hf_dir = data_dir + "/hf";

template <class Backend, class Scalar>
struct config {
    using backend = Backend;
    using scalar = Scalar;
};
#define LOCOST_CONFIGS config<locost::cpu, float>, config<locost::cpu, double>
// The whole-model tests also run on the emulated device (tests/emulated_device.hpp): the host-side
// half of a GPU run, checked without one.
#define MODEL_CONFIGS LOCOST_CONFIGS, config<test::emulated, float>

// A reference case: its checkpoint folder and, for SLED, the settings the references used.
struct hf_case {
    const char* name;
    const char* checkpoint;
    index_t prefix = -1;  // SLED prefix length; -1: no SLED
    std::vector<index_t> global_tokens = {0};  // LED
};
const hf_case hf_cases[] = {{"t5_v11", "t5_v11"},          {"t5_v10", "t5_v10"},          {"sled_t5_p0", "t5_v11", 0},
                            {"sled_t5_p6", "t5_v11", 6},   {"bart", "bart"},              {"sled_bart_p0", "bart", 0},
                            {"sled_bart_p6", "bart", 6},   {"longt5_local", "longt5_local"}, {"longt5_tglobal", "longt5_tglobal"},
                            {"led_g0", "led_g0"},          {"led_g1", "led_g0", -1, {0, 5, 50}},
                            {"pegasus_x", "pegasus_x"}};

models::model_options options_of(const hf_case& c) {
    models::model_options o;
    o.encoder.global_tokens = c.global_tokens;
    if (c.prefix >= 0) o.sled = models::sled_options{32, 0.5, c.prefix, true, true, 0};
    return o;
}

json read_json(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return json::parse(s.str());
}

struct batch {
    std::vector<std::int64_t> ids;
    std::vector<float> mask;
    std::vector<std::int64_t> mask01;
    index_t B = 0, L = 0;
};

batch encoder_batch(const reference& ref) {
    batch b;
    b.ids = ref.ints("enc.input_ids");
    b.mask01 = ref.ints("enc.attention_mask");
    b.mask.assign(b.mask01.begin(), b.mask01.end());
    b.B = ref.shape("enc.input_ids")[0];
    b.L = ref.shape("enc.input_ids")[1];
    return b;
}

// Each row's ids without its padding (what generation takes as the encoder's input rows).
locost::generation::token_rows unpadded_rows(const batch& in) {
    locost::generation::token_rows rows;
    for (index_t b = 0; b < in.B; ++b) {
        std::vector<std::int64_t> r;
        for (index_t l = 0; l < in.L; ++l)
            if (in.mask01[static_cast<std::size_t>(b * in.L + l)]) r.push_back(in.ids[static_cast<std::size_t>(b * in.L + l)]);
        rows.push_back(r);
    }
    return rows;
}

locost::generation::token_rows rows_of(const json& j) { return j.get<locost::generation::token_rows>(); }

} // namespace

TEST_CASE_TEMPLATE("t5, bart and sled: encoder states and teacher-forced logits equal transformers 5.17", C, MODEL_CONFIGS) {
    using S = typename C::scalar;
    for (const auto& c : hf_cases) {
        CAPTURE(c.name);
        const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
        const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
        const batch in = encoder_batch(ref);
        auto enc = models::load_encoder<S, typename C::backend>(ck, options_of(c));
        const auto h = enc.forward(in.ids.data(), in.mask.data(), in.B, in.L);
        REQUIRE(h.shape() == ref.shape("enc.last_hidden_state"));
        CHECK(rel_error(host_values(h).data(), ref.floats("enc.last_hidden_state"), expand_mask(in.mask01, enc.d_model())) < parity);

        auto m = models::load_model<S, typename C::backend>(ck, options_of(c));
        const auto dec = ref.ints("dec.decoder_input_ids");
        const auto logits = m.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), ref.shape("dec.decoder_input_ids")[1]);
        REQUIRE(logits.shape() == ref.shape("dec.logits"));
        CHECK(rel_error(logits.data(), ref.floats("dec.logits")) < parity);
    }
}

TEST_CASE_TEMPLATE("t5, bart and sled: every cached greedy step's logits equal transformers 5.17", C, MODEL_CONFIGS) {
    using S = typename C::scalar;
    for (const auto& c : hf_cases) {
        CAPTURE(c.name);
        const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
        const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
        const auto seqs = rows_of(read_json(hf_dir + "/" + c.name + "/cases.json")["greedy"]["sequences"]);
        const batch in = encoder_batch(ref);
        auto m = models::load_model<S, typename C::backend>(ck, options_of(c));
        const auto e = m.encode(in.ids.data(), in.mask.data(), in.B, in.L);
        const index_t steps = ref.shape("greedy.logits")[0], V = m.config().vocab_size;
        auto s = m.start(e, 1, steps);
        const auto want = ref.floats("greedy.logits");
        std::vector<S> logits(static_cast<std::size_t>(in.B * V));
        double worst = 0;
        for (index_t t = 0; t < steps; ++t) {  // HF's own tokens, so every step sees the same input
            std::vector<std::int64_t> tok;
            for (const auto& r : seqs) tok.push_back(r[static_cast<std::size_t>(t)]);
            m.step(s, tok.data(), 1, logits.data());
            const std::vector<float> w(want.begin() + t * in.B * V, want.begin() + (t + 1) * in.B * V);
            worst = std::max(worst, rel_error(logits.data(), w));
        }
        CHECK(worst < parity);
    }
}

TEST_CASE("t5, bart and sled: greedy, repetition-penalised, early-eos and beam sequences identical to transformers 5.17") {
    for (const auto& c : hf_cases) {
        const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
        const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
        const json cases = read_json(hf_dir + "/" + c.name + "/cases.json");
        const batch in = encoder_batch(ref);
        auto m = models::load_model<float, cpu>(ck, options_of(c));
        const auto e = m.encode(in.ids.data(), in.mask.data(), in.B, in.L);
        const auto enc_rows = unpadded_rows(in);
        for (const char* name : {"greedy", "greedy_nr", "greedy_nr_eos", "beam"}) {
            CAPTURE(c.name);
            CAPTURE(name);
            const json& k = cases.at(name);
            // HF's generate(**settings) starts from the checkpoint's generation_config (Pegasus-X:
            // forced_eos_token_id 1 comes from there) and lets the settings override it.
            const std::string gen_path = hf_dir + "/" + c.checkpoint + "/generation_config.json";
            json settings = std::ifstream(gen_path).good() ? read_json(gen_path) : json::object();
            settings.update(k.at("settings"));
            auto o = locost::generation::default_generation_options(
                m.config(), locost::io::parse_generation_config(settings.dump(), name));
            o.beam_convention = locost::generation::beam_convention::hf_5;
            const auto r = locost::generation::generate(m, e, enc_rows, o);
            CHECK(r.sequences == rows_of(k.at("sequences")));
        }
    }
}

namespace {

// A model that forwards to another and records how many rows each decoding step ran.
template <class Model>
struct rows_per_step {
    using scalar = typename Model::scalar;
    using encoded = typename Model::encoded;
    using state = typename Model::state;
    const Model& m;
    mutable std::vector<index_t> rows;
    const locost::models::model_config& config() const { return m.config(); }
    state start(const encoded& e, index_t per, index_t capacity) const { return m.start(e, per, capacity); }
    void step(state& s, const std::int64_t* tokens, index_t T, scalar* logits) const {
        rows.push_back(s.rows);
        m.step(s, tokens, T, logits);
    }
    void reorder(state& s, const std::vector<index_t>& src) const { m.reorder(s, src); }
    void retain(state& s, const std::vector<index_t>& keep) const { m.retain(s, keep); }
};

std::string show(const locost::generation::token_rows& rows) { return nlohmann::json(rows).dump(); }

std::vector<std::int64_t> without_trailing(std::vector<std::int64_t> r, std::int64_t pad) {
    while (r.size() > 1 && r.back() == pad) r.pop_back();
    return r;
}

} // namespace

TEST_CASE("generation: a greedy batch drops the documents it has finished, and every document's ids equal its own run") {
    int drops = 0;
    for (const auto& c : hf_cases) {
        CAPTURE(std::string(c.name));
        const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
        const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
        const batch in = encoder_batch(ref);
        REQUIRE(in.B >= 2);
        auto m = models::load_model<float, cpu>(ck, options_of(c));
        const auto enc_rows = unpadded_rows(in);
        // Each document encoded alone, decoded together (what --max-batch-tokens runs).
        const auto e = models::encode_each(m, enc_rows);
        auto o = m.default_generation_options();
        const index_t V = m.config().vocab_size;
        o.max_new_tokens = 12;
        // As transformers' greedy_nr_eos case: plain greedy decoding of these tiny random models
        // repeats one token; the processors (run over the rows left in the batch) vary it.
        o.repetition_penalty = 1.5;
        o.no_repeat_ngram_size = 2;
        o.min_length = 0;
        o.forced_eos_token_id.clear();
        o.eos_token_id = {V - 1};
        const auto first = locost::generation::generate(m, e, enc_rows, o);
        // The eos becomes a token that some document decodes first at step f while another has
        // not decoded it by then (the earliest such step): that document ends at f, another later.
        auto first_at = [](const std::vector<std::int64_t>& r, std::int64_t t) {
            const auto it = std::find(r.begin() + 1, r.end(), t);
            return it == r.end() ? std::size_t{13} : static_cast<std::size_t>(it - r.begin());
        };
        std::size_t f = 1;
        std::int64_t eos = first.sequences[0][1];
        for (std::size_t i = 1, found = 0; i < first.sequences[0].size() && !found; ++i)
            for (const auto& r : first.sequences) {
                bool later = false;
                for (const auto& other : first.sequences) later = later || first_at(other, r[i]) > i;
                if (first_at(r, r[i]) == i && later) {
                    f = i, eos = r[i], found = 1;
                    break;
                }
            }
        const std::string first_ids = show(first.sequences);
        CAPTURE(first_ids);
        o.eos_token_id = {static_cast<index_t>(eos)};
        std::size_t last_end = 0;  // the step where the last document ends (12: it does not)
        for (const auto& r : first.sequences) last_end = std::max(last_end, std::min<std::size_t>(12, first_at(r, eos)));
        rows_per_step<decltype(m)> counted{m, {}};
        const auto batched = locost::generation::generate(counted, e, enc_rows, o);
        REQUIRE(counted.rows.size() == last_end);
        CHECK(counted.rows[0] == in.B);
        CHECK(counted.rows[f - 1] == in.B);  // the step that ends a document still runs it
        if (last_end > f) {
            CHECK(counted.rows[f] < in.B);  // it is gone from the next
            ++drops;
        }
        for (std::size_t i = 1; i < counted.rows.size(); ++i) CHECK(counted.rows[i] <= counted.rows[i - 1]);
        // The padded batch encoded at once gives the same ids too, except through SLED, whose
        // chunks are laid over the padded length (as the original SLED code does).
        if (c.prefix < 0) {
            const auto padded = m.encode(in.ids.data(), in.mask.data(), in.B, in.L);
            CHECK(locost::generation::generate(m, padded, enc_rows, o).sequences == batched.sequences);
        }
        // Each document alone: the same ids.
        for (index_t b = 0; b < in.B; ++b) {
            CAPTURE(b);
            const auto& row = enc_rows[static_cast<std::size_t>(b)];
            const auto one = m.encode(row.data(), nullptr, 1, static_cast<index_t>(row.size()));
            const auto alone = locost::generation::generate(m, one, {row}, o);
            const std::string batched_ids = show(batched.sequences), alone_ids = show(alone.sequences);
            CAPTURE(batched_ids);
            CAPTURE(alone_ids);
            CHECK(without_trailing(batched.sequences[static_cast<std::size_t>(b)], o.pad_token()) ==
                  without_trailing(alone.sequences[0], o.pad_token()));
        }
    }
    CHECK(drops >= 6);  // most cases exercise a drop
}

TEST_CASE("reduced precision (bfloat16, int8 weights; bfloat16, int8 compute) and folded cross-attention: every family's step logits against transformers 5.17, and its greedy ids") {
    // Each case decodes with its decoder and LM head stored in bfloat16 and in int8 (per output
    // channel), the encoder in float32; and then with float32 weights and compute = bf16 or int8
    // (the encoder's linear layers and the cross-attention projection in bfloat16 or int8
    // products): (1) HF's own greedy tokens fed step by step, the largest
    // logit error over all steps relative to max|logit|; (2) our own greedy search against HF's
    // ids. A reduced precision may pick another token only where HF's own logits leave less than
    // twice the measured error between HF's token and ours (a near tie, which these tiny random
    // models have); such divergences are counted and reported, any other fails. Bounds: about
    // twice what the storage rounding gives here (reported in bench/RESULTS.md).
    using P = models::weight_precision;
    using C = models::compute_precision;
    struct variant {
        P weights;
        C compute;
        double bound;  // measured: 4.4e-3, 1.5e-2, 2.1e-2, 4.8e-2; folded: float32 arithmetic, the parity bound
        std::string name;
        bool folded = false;  // folded cross-attention over float32 states: every greedy id must match
    };
    for (const variant& run : {variant{P::bf16, C::f32, 1e-2, "bfloat16 weights"}, variant{P::i8, C::f32, 3e-2, "int8 weights"},
                               variant{P::native, C::bf16, 4e-2, "bf16 compute"}, variant{P::native, C::i8, 1e-1, "int8 compute"},
                               variant{P::native, C::f32, parity, "folded cross-attention", true}}) {
        double worst_all = 0;
        int agree = 0, total = 0, near_ties = 0;
        for (const auto& c : hf_cases) {
            const std::string precision = run.name, name = c.name;
            CAPTURE(name);
            CAPTURE(precision);
            const auto ck = locost::io::checkpoint::open(hf_dir + "/" + c.checkpoint);
            const reference ref(hf_dir + "/" + c.name + "/reference.safetensors");
            const json cases = read_json(hf_dir + "/" + c.name + "/cases.json");
            const auto seqs = rows_of(cases["greedy"]["sequences"]);
            const batch in = encoder_batch(ref);
            auto o = options_of(c);
            o.weights = run.weights;
            o.encoder.compute = run.compute;
            if (run.folded) {
                o.cross_attention = models::cross_attention_form::folded;
                o.cross_cache = models::cross_cache_precision::f32;
            }
            auto m = models::load_model<float, cpu>(ck, o);
            const auto e = m.encode(in.ids.data(), in.mask.data(), in.B, in.L);
            const index_t steps = ref.shape("greedy.logits")[0], V = m.config().vocab_size;
            auto s = m.start(e, 1, steps);
            const auto want = ref.floats("greedy.logits");
            std::vector<float> logits(static_cast<std::size_t>(in.B * V));
            double worst = 0, scale = 0;
            for (index_t t = 0; t < steps; ++t) {
                std::vector<std::int64_t> tok;
                for (const auto& r : seqs) tok.push_back(r[static_cast<std::size_t>(t)]);
                m.step(s, tok.data(), 1, logits.data());
                const std::vector<float> w(want.begin() + t * in.B * V, want.begin() + (t + 1) * in.B * V);
                worst = std::max(worst, rel_error(logits.data(), w));
                for (float v : w) scale = std::max(scale, std::abs(static_cast<double>(v)));
            }
            CHECK(worst < run.bound);
            worst_all = std::max(worst_all, worst);
            // our own greedy search
            const std::string gen_path = hf_dir + "/" + c.checkpoint + "/generation_config.json";
            json settings = std::ifstream(gen_path).good() ? read_json(gen_path) : json::object();
            settings.update(cases.at("greedy").at("settings"));
            auto g = locost::generation::default_generation_options(m.config(), locost::io::parse_generation_config(settings.dump(), "greedy"));
            const auto enc_rows = unpadded_rows(in);
            const auto r = locost::generation::generate(m, e, enc_rows, g);
            REQUIRE(r.sequences.size() == seqs.size());
            for (std::size_t b = 0; b < seqs.size(); ++b) {
                ++total;
                const auto& ours = r.sequences[b];
                const auto& theirs = seqs[b];
                if (ours == theirs) {
                    ++agree;
                    continue;
                }
                // the first position where they part; sequences start with the decoder start id,
                // and HF's logits of step t predict position t + 1
                std::size_t t = 1;
                while (t < ours.size() && t < theirs.size() && ours[t] == theirs[t]) ++t;
                REQUIRE(t < ours.size());
                REQUIRE(t < theirs.size());
                REQUIRE(static_cast<index_t>(t) <= steps);
                const float* row = want.data() + ((static_cast<index_t>(t) - 1) * in.B + static_cast<index_t>(b)) * V;
                const double gap = static_cast<double>(row[theirs[t]]) - static_cast<double>(row[ours[t]]);
                INFO("row " << b << " parts at position " << t << ": HF's logit gap " << gap << " vs allowed " << 2 * worst * scale);
                CHECK(gap <= 2 * worst * scale);
                ++near_ties;
            }
        }
        if (run.folded) CHECK(near_ties == 0);
        MESSAGE(run.name << ": largest step-logit error / max|logit| over " << std::size(hf_cases)
                                        << " reference cases " << worst_all << "; greedy sequences identical to HF's: " << agree << " of "
                                        << total << " (the others part at a near tie of HF's logits: " << near_ties << ")");
    }
}

TEST_CASE("t5: v1.0's tied head is scaled, transformers 5's scale_decoder_outputs false is not") {
    // The same weights read with the other scaling rule must miss the references by far: the
    // parity above is not an accident of the head.
    const reference ref(hf_dir + "/t5_v11/reference.safetensors");
    const batch in = encoder_batch(ref);
    const std::string dir = scratch_dir("t5_scaled");
    auto cfg = read_json(hf_dir + "/t5_v11/config.json");
    cfg["scale_decoder_outputs"] = true;
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto m = models::load_model<float, cpu>(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/config.json"));
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto logits = m.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), ref.shape("dec.decoder_input_ids")[1]);
    CHECK(rel_error(logits.data(), ref.floats("dec.logits")) > 0.1);
}

TEST_CASE("sled: windows equal the original's _window_indices") {
    using W = models::sled_window;
    // docs/models.md §3 (context 512, f 0.5), keep offsets there relative to the window start.
    CHECK(models::sled_windows(514, 512, 0.5) == std::vector<W>{{0, 512, 0, 384}, {2, 514, 384, 514}});
    CHECK(models::sled_windows(780, 512, 0.5) == std::vector<W>{{0, 512, 0, 384}, {256, 768, 384, 640}, {268, 780, 640, 780}});
    CHECK(models::sled_margin(100, 0.9) == 4);  // truncated, not rounded (100·0.1/2 = 4.999…)
    CHECK(models::sled_windows(300, 512, 0.5) == std::vector<W>{{0, 300, 0, 300}});
    // The references' notes: n = 150 document tokens (156 with the 6-token prefix), c 32, f 0.5.
    const json notes = read_json(hf_dir + "/sled_t5_p6/cases.json")["notes"];
    std::vector<W> want;  // "[(0, 32, 0, 24), (16, 48, 8, 24), …]": (start, end, keep offsets)
    std::string s = notes.get<std::string>();
    s = s.substr(s.find("windows [") + 9);
    for (std::size_t at = 0; (at = s.find('(', at)) != std::string::npos; ++at) {
        long a, b, c, d;
        REQUIRE(std::sscanf(s.c_str() + at, "(%ld, %ld, %ld, %ld)", &a, &b, &c, &d) == 4);
        want.push_back({a, b, a + c, a + d});
    }
    CHECK(want.size() == 9);
    CHECK(models::sled_windows(150, 32, 0.5) == want);
}

TEST_CASE("sled: for every n up to 3c the kept ranges tile [0, n) exactly once, inside full-width windows") {
    std::size_t plans = 0;
    for (index_t c : {1, 2, 3, 5, 8, 16, 31, 32, 33, 100}) {
        for (double f : {0.1, 0.25, 1.0 / 3.0, 0.5, 0.6, 0.75, 0.9, 0.999, 1.0}) {
            const index_t m = models::sled_margin(c, f);
            for (index_t n = 1; n <= 3 * c; ++n) {
                CAPTURE(c);
                CAPTURE(f);
                CAPTURE(n);
                const auto w = models::sled_windows(n, c, f);
                REQUIRE_FALSE(w.empty());
                CHECK(static_cast<index_t>(w.size()) == models::sled_window_count(n, c, f));
                index_t next = 0;
                bool ok = true;
                for (std::size_t i = 0; i < w.size(); ++i) {
                    const auto& x = w[i];
                    ok = ok && x.start >= 0 && x.end <= n && x.end - x.start == std::min(c, n);  // full width
                    ok = ok && x.keep_start == next && x.keep_end > x.keep_start;              // tiles, in order
                    ok = ok && x.start <= x.keep_start && x.keep_end <= x.end;                 // kept inside the window
                    // Every kept token has m tokens of context on each side, except at the ends.
                    ok = ok && (x.keep_start == 0 || x.keep_start - x.start >= m) && (x.keep_end == n || x.end - x.keep_end >= m);
                    next = x.keep_end;
                }
                CHECK(ok);
                CHECK(next == n);
                ++plans;
            }
        }
    }
    CHECK(plans > 2000);
}

TEST_CASE("sled: bad settings and unsupported variants fail with their exact error") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/t5_v11");
    const std::string src = hf_dir + "/t5_v11/config.json";
    auto with = [&](index_t c, double f, index_t p) {
        models::model_options o;
        o.sled = models::sled_options{c, f, p, true, true, 0};
        return o;
    };
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 0.0, 0)); }, "sled.bad_window_fraction",
                src + ": SLED window fraction is 0, expected a number in (0, 1] (the kept share of each chunk)");
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 1.5, 0)); }, "sled.bad_window_fraction",
                src + ": SLED window fraction is 1.5, expected a number in (0, 1] (the kept share of each chunk)");
    // A fraction so small that the margins take the whole chunk: the windows would never advance.
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 1e-17, 0)); }, "sled.bad_window_fraction",
                src + ": SLED window fraction 1e-17 keeps no token of a chunk of 32 tokens (the windows would not advance); expected at least 1/32");
    check_error([&] { models::sled_windows(1000, 256, 1e-300); }, "sled.bad_window_fraction",
                "sled: SLED window fraction 1e-300 keeps no token of a chunk of 256 tokens (the windows would not advance); expected at least 1/256");
    CHECK(models::sled_windows(100, 33, 1e-17).size() == 68);  // odd: one token kept per window
    check_error([&] { models::load_encoder<float, cpu>(ck, with(0, 0.5, 0)); }, "sled.bad_context",
                src + ": SLED context size is 0, expected at least 1 token");
    check_error([&] { models::load_encoder<float, cpu>(ck, with(32, 0.5, 33)); }, "sled.bad_prefix",
                src + ": SLED prefix of 33 tokens is longer than the context of 32 tokens");
    // A backbone with a position limit (BART's max_position_embeddings, LOCOST none, T5 none).
    check_error([&] { models::check_sled_options({512, 0.5, 6, true, true, 0}, 512, "bart"); }, "sled.context_too_long",
                "bart: SLED chunks of 512 tokens + a prefix of 6 exceed the 512 positions the backbone encoder reads");
    auto e = models::load_encoder<float, cpu>(ck, with(32, 0.5, 6));
    const std::vector<std::int64_t> only_prefix = {5, 6, 7, 8, 9, 1};
    check_error([&] { e.forward(only_prefix.data(), nullptr, 1, 6); }, "sled.no_document",
                src + ": the input has 6 tokens, all of them the prefix of 6 (nothing to encode after it)");

    const std::string dir = scratch_dir("sled_config");
    auto cfg = read_json(hf_dir + "/t5_v11/config.json");

    // A SLED config.json whose backbone is a repository id the Hugging Face cache does not hold.
    const std::string empty_cache = scratch_dir("sled_empty_hub_cache");
    setenv("HF_HUB_CACHE", empty_cache.c_str(), 1);
    json sled = {{"model_type", "tau/sled"}, {"underlying_config", "google/t5-v1_1-base"}, {"context_size", 256}};
    const std::string with_weights = scratch_dir("sled_hub_backbone");
    fs::copy_file(hf_dir + "/t5_v11/model.safetensors", with_weights + "/model.safetensors", fs::copy_options::overwrite_existing);
    std::ofstream(with_weights + "/config.json") << sled.dump();
    check_error([&] { models::read_config(locost::io::checkpoint::open(with_weights)); }, "sled.backbone_not_found",
                with_weights + "/config.json: underlying_config 'google/t5-v1_1-base' names the backbone google/t5-v1_1-base: no such directory, "
                               "and not in the Hugging Face cache (looked for " + empty_cache + "/models--google--t5-v1_1-base; the cache is "
                               "$HF_HUB_CACHE). locost never downloads: where there is network, run `hf download google/t5-v1_1-base` "
                               "(huggingface_hub) and copy models--google--t5-v1_1-base into " + empty_cache + " here, or give the checkpoint's directory");
    // With the weights of a backbone directory (a SLED repository shipping none), that directory's
    // config.json describes them.
    std::ofstream(dir + "/sled.json") << sled.dump();
    CHECK(models::common(*models::read_config(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled.json"))).d_model == 64);
    unsetenv("HF_HUB_CACHE");
    // … and one whose backbone is a dict or a local path: SLED settings from the file.
    sled["underlying_config"] = cfg;
    sled["underlying_config"]["model_type"] = "t5";
    sled["context_size"] = 32;
    sled["window_fraction"] = 0.75;
    std::ofstream(dir + "/sled_dict.json") << sled.dump();
    const auto sd = locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled_dict.json");
    CHECK(models::common(*models::read_config(sd)).model_type == "t5");
    REQUIRE(models::read_sled_options(sd).has_value());
    CHECK(models::read_sled_options(sd)->context_size == 32);
    CHECK(models::read_sled_options(sd)->window_fraction == 0.75);
    sled["underlying_config"] = hf_dir + "/t5_v11";
    std::ofstream(dir + "/sled_path.json") << sled.dump();
    CHECK(models::common(*models::read_config(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/sled_path.json"))).d_model == 64);
}

TEST_CASE("sled: over LOCOST too, and one chunk equals the plain encoder") {
    // SLED's adaptor takes any encoder: over LOCOST with a context longer than the input it is
    // the plain encoder; with chunks, states stay finite and close in scale.
    const auto ck = locost::io::checkpoint::open(tiny_dir);
    const reference ref(reference_dir + "/locost_encoder.safetensors");
    std::vector<std::int64_t> ids;
    for (index_t i = 0; i < 200; ++i) ids.push_back(2 + (i * 37) % 500);
    auto plain = models::load_encoder<float, cpu>(ck);
    models::model_options o;
    o.sled = models::sled_options{256, 0.5, 0, true, true, 0};
    auto one = models::load_encoder<float, cpu>(ck, o);
    const auto a = plain.forward(ids.data(), nullptr, 1, 200), b = one.forward(ids.data(), nullptr, 1, 200);
    const std::vector<float> af(a.data(), a.data() + a.numel());
    CHECK(rel_error(b.data(), af) == 0.0);
    o.sled = models::sled_options{64, 0.5, 0, true, true, 3};
    auto chunked = models::load_encoder<float, cpu>(ck, o);
    const auto c = chunked.forward(ids.data(), nullptr, 1, 200);
    const double err = rel_error(c.data(), af);
    CHECK(err > 0.0);  // chunks see less context …
    CHECK(err < 1.0);  // … but the same model
}

TEST_CASE("sled: without encode_prefix the output drops the prefix states and keeps the document's") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/t5_v11");
    const reference ref(hf_dir + "/sled_t5_p6/reference.safetensors");
    const batch in = encoder_batch(ref);
    models::model_options with, without;
    with.sled = models::sled_options{32, 0.5, 6, true, true, 0};
    without.sled = models::sled_options{32, 0.5, 6, true, false, 0};
    auto a = models::load_encoder<float, cpu>(ck, with), b = models::load_encoder<float, cpu>(ck, without);
    CHECK(b.output_span(in.L).offset == 6);
    CHECK(b.output_span(in.L).length == in.L - 6);
    const auto ha = a.forward(in.ids.data(), in.mask.data(), in.B, in.L), hb = b.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    REQUIRE(hb.shape() == locost::shape_t{in.B, in.L - 6, 64});
    double diff = 0;
    for (index_t r = 0; r < in.B; ++r)
        for (index_t l = 6; l < in.L; ++l)
            if (in.mask01[static_cast<std::size_t>(r * in.L + l)])
                for (index_t h = 0; h < 64; ++h)
                    diff = std::max(diff, std::abs(double(ha[(r * in.L + l) * 64 + h]) - double(hb[(r * (in.L - 6) + l - 6) * 64 + h])));
    CHECK(diff == 0.0);
    // The decoder then cross-attends over the document only: other logits than with the prefix.
    auto ma = models::load_model<float, cpu>(ck, with), mb = models::load_model<float, cpu>(ck, without);
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto la = ma.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    const auto lb = mb.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    CHECK(rel_error(lb.data(), ref.floats("dec.logits")) > parity);
    CHECK(rel_error(la.data(), ref.floats("dec.logits")) < parity);
}

namespace {

// The bart reference checkpoint rewritten: each stored tensor passes through `edit(name, values)`,
// which returns the name to store it under ("" drops it); config.json through `config`.
std::string rewritten_bart(const std::string& name, const std::function<std::string(const std::string&, std::vector<float>&)>& edit,
                           const std::function<void(json&)>& config = {}) {
    const std::string dir = scratch_dir(name);
    const auto src = locost::io::safetensors_file::open(hf_dir + "/bart/model.safetensors");
    locost::io::safetensors_writer w;
    std::vector<std::vector<float>> keep;
    keep.reserve(src.records().size());
    for (const auto& r : src.records()) {
        std::vector<float> v(static_cast<std::size_t>(r.shape.numel()));
        REQUIRE(locost::convert_to_f32(r.type, r.bytes, v.data(), v.size()));
        const std::string to = edit(r.name, v);
        if (to.empty()) continue;
        keep.push_back(std::move(v));
        w.add(to, locost::view<const float>{keep.back().data(), r.shape});
    }
    w.write(dir + "/model.safetensors");
    json cfg = read_json(hf_dir + "/bart/config.json");
    if (config) config(cfg);
    std::ofstream(dir + "/config.json") << cfg.dump();
    return dir;
}

} // namespace

TEST_CASE("bart: a bare BartModel checkpoint (no model. prefix, no final_logits_bias) reads the same weights") {
    const reference ref(hf_dir + "/bart/reference.safetensors");
    const batch in = encoder_batch(ref);
    std::vector<float> logits_bias;
    const std::string dir = rewritten_bart("bart_base_model", [&](const std::string& n, std::vector<float>& v) {
        if (n == "final_logits_bias") {
            logits_bias = v;
            return std::string();
        }
        return n.rfind("model.", 0) == 0 ? n.substr(6) : n;
    });
    const auto ck = locost::io::checkpoint::open(dir);
    CHECK(test::validate(ck).ok());
    CHECK(test::validate(ck).unexpected.empty());
    auto m = models::load_model<float, cpu>(ck);
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto logits = m.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), 12);
    // Without the buffer the head adds zeros: the reference minus final_logits_bias.
    std::vector<float> want = ref.floats("dec.logits");
    const index_t V = 2000;
    REQUIRE(logits_bias.size() == static_cast<std::size_t>(V));
    for (std::size_t i = 0; i < want.size(); ++i) want[i] -= logits_bias[i % V];
    CHECK(rel_error(logits.data(), want) < parity);
}

TEST_CASE("bart: scale_embedding multiplies token embeddings by sqrt(d_model)") {
    // Embeddings stored divided by 8 = √64 with scale_embedding true: the encoder sees the same
    // vectors, so its states equal the reference's.
    const reference ref(hf_dir + "/bart/reference.safetensors");
    const batch in = encoder_batch(ref);
    const std::string dir = rewritten_bart(
        "bart_scaled",
        [](const std::string& n, std::vector<float>& v) {
            if (n == "model.shared.weight")
                for (float& x : v) x /= 8.0f;
            return n;
        },
        [](json& c) { c["scale_embedding"] = true; });
    auto e = models::load_encoder<float, cpu>(locost::io::checkpoint::open(dir));
    const auto h = e.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    CHECK(rel_error(h.data(), ref.floats("enc.last_hidden_state"), expand_mask(in.mask01, 64)) < parity);
}

TEST_CASE("bart: inputs past the learned positions are refused unless run through SLED") {
    const auto ck = locost::io::checkpoint::open(hf_dir + "/bart");
    const std::string cfg = hf_dir + "/bart/config.json";
    std::vector<std::int64_t> ids(300, 5);
    auto m = models::load_model<float, cpu>(ck);
    check_error([&] { m.encode(ids.data(), nullptr, 1, 300); }, "encode.too_long",
                cfg + ": 300 tokens exceed max_position_embeddings (128, BART's learned positions); run longer inputs through SLED "
                      "(--sled-context 128)");
    const auto e = m.encode(ids.data(), nullptr, 1, 128);
    check_error([&] { m.start(e, 1, 129); }, "decode.too_long", cfg + ": 129 decoder positions exceed max_position_embeddings (128)");
    models::model_options o;
    o.sled = models::sled_options{129, 0.5, 0, true, true, 0};
    check_error([&] { models::load_model<float, cpu>(ck, o); }, "sled.context_too_long",
                cfg + ": SLED chunks of 129 tokens exceed the 128 positions the backbone encoder reads");
    o.sled = models::sled_options{128, 0.5, 0, true, true, 0};
    auto s = models::load_model<float, cpu>(ck, o);
    const auto long_doc = s.encode(ids.data(), nullptr, 1, 300);
    CHECK(long_doc.docs.at(0).length == 300);
}

TEST_CASE("bart: config errors name the field") {
    const std::string src = "bart-config";
    auto parse = [&](const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/bart/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    CHECK(std::holds_alternative<models::bart_config>(*parse([](json&) {})));
    check_error([&] { parse([](json& j) { j["encoder_attention_heads"] = 5; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_heads' is 5, expected a divisor of d_model (64)");
    check_error([&] { parse([](json& j) { j["activation_function"] = "tanh"; }); }, "config.invalid_value",
                src + ": field 'activation_function' is \"tanh\", expected one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");
    check_error([&] { parse([](json& j) { j["tie_word_embeddings"] = false; }); }, "config.invalid_value",
                src + ": field 'tie_word_embeddings' is false, expected true (BART's LM head is the shared embedding)");
    check_error([&] { parse([](json& j) { j.erase("decoder_layers"); }); }, "config.missing_field",
                src + ": missing required field 'decoder_layers' (expected an integer)");
    check_error([&] { parse([](json& j) { j["normalize_before"] = true; }); }, "config.invalid_value",
                src + ": field 'normalize_before' is true, expected false (BART; this setting describes another architecture)");
    CHECK(models::common(*parse([](json& j) { j["normalize_before"] = false; })).model_type == "bart");
    check_error([&] { parse([](json& j) { j["pad_token_id"] = 2000; }); }, "config.invalid_value",
                src + ": field 'pad_token_id' is 2000, expected an integer in [0, 1999]");
}

TEST_CASE("led and longt5: config errors name the field; inputs past LED's positions or global tokens past the input are refused") {
    const std::string src = "led-config";
    auto parse = [&](const std::string& dir, const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/" + dir + "/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    const auto led = parse("led_g0", [](json&) {});
    REQUIRE(std::holds_alternative<models::led_config>(*led));
    CHECK(std::get<models::led_config>(*led).attention_window == std::vector<index_t>{16, 16});
    CHECK(std::get<models::led_config>(*parse("led_g0", [](json& j) { j["attention_window"] = 8; })).attention_window ==
          std::vector<index_t>{8, 8});
    const std::string want = "an even positive integer, or a list of 2 of them (one per encoder layer)";
    check_error([&] { parse("led_g0", [](json& j) { j["attention_window"] = {16, 15}; }); }, "config.invalid_value",
                src + ": field 'attention_window' is [16,15], expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["attention_window"] = {16}; }); }, "config.invalid_value",
                src + ": field 'attention_window' is [16], expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["attention_window"] = "16"; }); }, "config.wrong_type",
                src + ": field 'attention_window' is a JSON string, expected " + want);
    check_error([&] { parse("led_g0", [](json& j) { j["max_encoder_position_embeddings"] = 0; }); }, "config.invalid_value",
                src + ": field 'max_encoder_position_embeddings' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse("longt5_local", [](json& j) { j["encoder_attention_type"] = "global"; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_type' is \"global\", expected \"local\" or \"transient-global\"");

    const auto ck = locost::io::checkpoint::open(hf_dir + "/led_g0");
    const std::string cfg = hf_dir + "/led_g0/config.json";
    std::vector<std::int64_t> ids(600, 5);
    auto m = models::load_model<float, cpu>(ck);
    check_error([&] { m.encode(ids.data(), nullptr, 1, 600); }, "encode.too_long",
                cfg + ": 600 tokens exceed max_encoder_position_embeddings (512, LED's learned positions); run longer inputs through "
                      "SLED (--sled-context 512)");
    const auto e = m.encode(ids.data(), nullptr, 1, 512);
    check_error([&] { m.start(e, 1, 65); }, "decode.too_long", cfg + ": 65 decoder positions exceed max_decoder_position_embeddings (64)");
    models::model_options o;
    o.encoder.global_tokens = {0, 40};
    auto g = models::load_model<float, cpu>(ck, o);
    check_error([&] { g.encode(ids.data(), nullptr, 1, 40); }, "encode.bad_global_token",
                cfg + ": global token position 40 is outside the input's 40 positions");
    // No global token at all is Longformer's plain sliding window; it runs.
    o.encoder.global_tokens = {};
    CHECK(models::load_model<float, cpu>(ck, o).encode(ids.data(), nullptr, 1, 40).docs.at(0).length == 40);
}

// ---- Local attention (layers/local_attention.hpp, layers/longt5_attention.hpp) ----

namespace {

// The simple reference: for every query, a dense softmax over the keys allowed(b, i, j) (plus
// the global keys of its row), in double.
template <class Allowed>
std::vector<double> naive_local(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, index_t B, index_t L,
                                index_t heads, index_t d, const Allowed& allowed, const std::vector<double>& gk = {},
                                const std::vector<double>& gv = {}, index_t G = 0) {
    const index_t I = heads * d;
    std::vector<double> out(static_cast<std::size_t>(B * L * I), 0.0);
    for (index_t b = 0; b < B; ++b)
        for (index_t h = 0; h < heads; ++h)
            for (index_t i = 0; i < L; ++i) {
                std::vector<std::pair<double, const double*>> s;
                auto dot = [&](const double* a, const double* c) {
                    double t = 0;
                    for (index_t x = 0; x < d; ++x) t += a[x] * c[x];
                    return t;
                };
                const double* qi = q.data() + (b * L + i) * I + h * d;
                for (index_t j = 0; j < L; ++j)
                    if (allowed(b, i, j)) s.push_back({dot(qi, k.data() + (b * L + j) * I + h * d), v.data() + (b * L + j) * I + h * d});
                for (index_t j = 0; j < G; ++j) s.push_back({dot(qi, gk.data() + (b * G + j) * I + h * d), gv.data() + (b * G + j) * I + h * d});
                double m = -1e300, z = 0;
                for (auto& e : s) m = std::max(m, e.first);
                for (auto& e : s) z += std::exp(e.first - m);
                double* o = out.data() + (b * L + i) * I + h * d;
                for (auto& e : s)
                    for (index_t x = 0; x < d; ++x) o[x] += std::exp(e.first - m) / z * e.second[x];
            }
    return out;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    std::uint64_t s = seed;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<double>((s >> 11) % 2000001) / 1e6 - 1.0;
    }
    return v;
}

} // namespace

TEST_CASE("local attention: a mask without padding adds no key bias; with padding, -inf at the padded keys") {
    namespace L_ = locost::layers;
    std::vector<float> ones(10, 1.0f), padded(10, 1.0f);
    padded[7] = 0.0f;
    L_::padding_bias<float, cpu> b;
    b.prepare(ones.data(), 10);
    CHECK(b.data() == nullptr);  // no pass over the scores for nothing
    b.prepare(ones.data(), 10, /*always=*/true);  // a caller that masks more keys itself gets zeros
    REQUIRE(b.data() != nullptr);
    CHECK(std::all_of(b.data(), b.data() + 10, [](float x) { return x == 0.0f; }));
    b.prepare(padded.data(), 10);
    REQUIRE(b.data() != nullptr);
    CHECK(b.data()[6] == 0.0f);
    CHECK(b.data()[7] == -std::numeric_limits<float>::infinity());
    b.prepare(nullptr, 10);
    CHECK(b.data() == nullptr);
}

TEST_CASE_TEMPLATE("local attention: sliding windows, blocks and global keys equal a dense softmax over the allowed keys", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    namespace L_ = locost::layers;
    const index_t B = 2, L = 61, heads = 2, d = 8, I = heads * d, G = 3;
    const auto q = random_vector(static_cast<std::size_t>(B * L * I), 1), k = random_vector(static_cast<std::size_t>(B * L * I), 2),
               v = random_vector(static_cast<std::size_t>(B * L * I), 3), gk = random_vector(static_cast<std::size_t>(B * G * I), 4),
               gv = random_vector(static_cast<std::size_t>(B * G * I), 5);
    auto to_s = [](const std::vector<double>& x) { return std::vector<S>(x.begin(), x.end()); };
    const auto qs = to_s(q), ks = to_s(k), vs = to_s(v), gks = to_s(gk), gvs = to_s(gv);
    // Row 1 has 45 valid positions: its padded keys are masked.
    std::vector<float> mask(static_cast<std::size_t>(B * L), 1.0f);
    for (index_t i = 45; i < L; ++i) mask[static_cast<std::size_t>(L + i)] = 0.0f;
    L_::padding_bias<S, cpu> key_bias;
    key_bias.prepare(mask.data(), B * L);
    auto valid = [&](index_t b, index_t j) { return mask[static_cast<std::size_t>(b * L + j)] != 0.0f; };
    const L_::local_qkv<S> in{qs.data(), ks.data(), vs.data(), I, I, I};
    const double tol = std::is_same_v<S, float> ? 1e-5 : 1e-12;
    auto run = [&](const auto& window, index_t query_block, bool globals) {
        L_::global_segment<S> seg;
        if (globals) seg = {gks.data(), gvs.data(), I, G * I, {G, G}};
        // A sliding window's mask is a band over the distances a query group meets; blocks need none.
        L_::position_band<S, cpu> band;
        constexpr bool sliding = std::is_same_v<std::remove_cvref_t<decltype(window)>, L_::sliding_window>;
        if constexpr (sliding)
            band.ensure(window.max_distance(query_block) + 1, 0,
                        [&](index_t r, index_t) { return window.within(r) ? 0.0f : L_::position_band<S, cpu>::masked; });
        std::vector<S> out(static_cast<std::size_t>(B * L * I));
        L_::local_attention<S, cpu>(in, B, L, heads, d, window, query_block, key_bias.data(), sliding ? &band : nullptr, seg, {}, out.data(), I);
        return out;
    };
    auto compare = [&](const std::vector<S>& ours, const std::vector<double>& want) {
        double worst = 0;
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i)
                if (valid(b, i))
                    for (index_t x = 0; x < I; ++x) {
                        const std::size_t at = static_cast<std::size_t>((b * L + i) * I + x);
                        worst = std::max(worst, std::abs(static_cast<double>(ours[at]) - want[at]));
                    }
        return worst;
    };
    for (index_t r : {0, 1, 5, 13, 60, 100}) {
        CAPTURE(r);
        const auto want = naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) { return valid(b, j) && std::abs(i - j) <= r; });
        const auto want_g = naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) { return valid(b, j) && std::abs(i - j) <= r; },
                                        gk, gv, G);
        // Blockwise with overlap (LongT5's blocks of r + 1 against their neighbours) is the
        // sliding window of radius r: any query grouping gives the same numbers.
        for (index_t qb : {index_t{1}, r + 1, index_t{7}, index_t{64}}) {
            CAPTURE(qb);
            CHECK(compare(run(L_::sliding_window{r}, qb, false), want) < tol);
            CHECK(compare(run(L_::sliding_window{r}, qb, true), want_g) < tol);
        }
    }
    // A window covering the whole input is dense attention.
    const auto dense = naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t, index_t j) { return valid(b, j); });
    CHECK(compare(run(L_::sliding_window{L}, 16, false), dense) < tol);
    CHECK(compare(run(L_::disjoint_blocks{L, 0}, 16, false), dense) < tol);
    // Disjoint blocks, plain and shifted by half a block (Pegasus-X's staggered layers).
    for (index_t blk : {1, 4, 16, 25})
        for (index_t shift : {index_t{0}, blk / 2}) {
            CAPTURE(blk);
            CAPTURE(shift);
            const L_::disjoint_blocks w{blk, shift};
            const auto want = naive_local(q, k, v, B, L, heads, d, [&](index_t b, index_t i, index_t j) {
                return valid(b, j) && w.start_of(i) == w.start_of(j);
            }, gk, gv, G);
            CHECK(compare(run(w, 64, true), want) < tol);
            CHECK(compare(run(w, 3, true), want) < tol);
        }
}

TEST_CASE_TEMPLATE("longt5 attention layers equal the original LOCOST code's (local r127, r31, transient-global, dense)", C, LOCOST_CONFIGS) {
    using S = typename C::scalar;
    namespace L_ = locost::layers;
    const reference ref(reference_dir + "/longt5_attention.safetensors");
    const index_t B = 2, L = 300, H = 64, heads = 4;
    const auto input = ref.floats("attn.input");
    const std::vector<S> u(input.begin(), input.end());
    const auto mask_f = ref.floats("attn.mask");
    std::vector<bool> keep(static_cast<std::size_t>(B * L * H));
    for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = mask_f[i / static_cast<std::size_t>(H)] != 0.0f;
    auto tensor_of = [&](const std::string& name) {
        const auto& r = ref.record(name);
        locost::tensor<float> t(r.shape);
        const auto f = ref.floats(name);
        std::copy(f.begin(), f.end(), t.data());
        return t;
    };
    auto check_case = [&](const std::string& name, index_t radius, index_t global_block, auto transient) {
        CAPTURE(name);
        constexpr bool TG = decltype(transient)::value;
        const std::string w = "attn." + name + ".weights.";
        using layer_t = L_::sliding_window_attention<S, cpu, TG>;
        typename layer_t::weights a;
        a.attention.norm = locost::tensor<float>({H});
        std::fill_n(a.attention.norm.data(), H, 1.0f);
        a.attention.p.q = tensor_of(w + "q.weight");
        a.attention.p.k = tensor_of(w + "k.weight");
        a.attention.p.v = tensor_of(w + "v.weight");
        a.attention.p.o = tensor_of(w + "o.weight");
        if (TG) a.global_norm = tensor_of(w + "global_input_layer_norm.weight");
        const layer_t layer(a, 1e-6, heads);
        typename layer_t::inputs::tables tables;
        tables.rel = tensor_of(w + "relative_attention_bias.weight");
        if (TG) tables.global_rel = tensor_of(w + "global_relative_attention_bias.weight");
        typename layer_t::inputs in(tables, heads, radius, global_block, 128);
        in.prepare(mask_f.data(), B, L);
        std::vector<S> out(static_cast<std::size_t>(B * L * H)), scratch(static_cast<std::size_t>(layer.scratch_size(B, L)));
        layer.attend(u.data(), B, L, in, out.data(), false, scratch.data());
        CHECK(rel_error(out.data(), ref.floats("attn." + name + ".output"), keep) < parity);
        return in.blocks();
    };
    check_case("local_r127", 127, 1 << 20, std::false_type{});
    check_case("local_r31", 31, 1 << 20, std::false_type{});
    // A window covering the whole input is T5's dense attention (LongT5Attention, bidirectional).
    check_case("full_bidir", 300, 1 << 20, std::false_type{});
    const auto blocks = check_case("tglobal", 127, 16, std::true_type{});
    // 18 global tokens; row 0's 12-token orphan tail joins block 17, row 1 (250 valid) uses 15.
    CHECK(blocks.globals == 18);
    CHECK(blocks.count == std::vector<index_t>{18, 15});
    CHECK(blocks.id[299] == 17);
    CHECK(blocks.id[300 + 249] == 14);
    CHECK(blocks.id[300 + 250] == -1);
}

TEST_CASE("pegasus_x: config errors name the field") {
    const std::string src = "pegasus-x-config";
    auto parse = [&](const std::function<void(json&)>& edit) {
        json j = read_json(hf_dir + "/pegasus_x/config.json");
        edit(j);
        return models::parse_config(j, src);
    };
    const auto ok = parse([](json&) {});
    const auto* c = std::get_if<models::pegasus_x_config>(ok.get());
    REQUIRE(c != nullptr);
    CHECK(c->block_size == 16);
    CHECK(c->num_global_tokens == 4);
    CHECK(c->staggered(1));
    CHECK_FALSE(c->staggered(0));
    CHECK(c->layer_norm_epsilon == 1e-5);
    // PegasusXConfig's defaults for what a config may leave out.
    const auto d = parse([](json& j) {
        for (const char* k : {"block_size", "num_global_tokens", "stagger_local_blocks", "scale_embedding", "pad_token_id", "eos_token_id",
                              "decoder_start_token_id"})
            j.erase(k);
    });
    const auto* dc = std::get_if<models::pegasus_x_config>(d.get());
    CHECK(dc->block_size == 512);
    CHECK(dc->num_global_tokens == 32);
    CHECK(dc->stagger_local_blocks);
    CHECK(dc->scale_embedding);
    CHECK(dc->pad_token_id == 0);
    CHECK(dc->eos_token_id == 1);
    CHECK(dc->decoder_start_token_id == 0);
    check_error([&] { parse([](json& j) { j["encoder_attention_heads"] = 5; }); }, "config.invalid_value",
                src + ": field 'encoder_attention_heads' is 5, expected a divisor of d_model (64)");
    check_error([&] { parse([](json& j) { j["decoder_attention_heads"] = 3; }); }, "config.invalid_value",
                src + ": field 'decoder_attention_heads' is 3, expected a divisor of d_model (64)");
    check_error([&] { parse([](json& j) { j["d_model"] = 63; j["encoder_attention_heads"] = 1; j["decoder_attention_heads"] = 1; }); },
                "config.invalid_value",
                src + ": field 'd_model' is 63, expected an even number of at least 4 (sinusoidal positions: sines and cosines, H/2 each)");
    check_error([&] { parse([](json& j) { j["block_size"] = 0; }); }, "config.invalid_value",
                src + ": field 'block_size' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse([](json& j) { j["num_global_tokens"] = 0; }); }, "config.invalid_value",
                src + ": field 'num_global_tokens' is 0, expected an integer in [1, 2147483647]");
    check_error([&] { parse([](json& j) { j["stagger_local_blocks"] = "yes"; }); }, "config.wrong_type",
                src + ": field 'stagger_local_blocks' is a JSON string, expected a boolean");
    check_error([&] { parse([](json& j) { j["activation_function"] = "tanh"; }); }, "config.invalid_value",
                src + ": field 'activation_function' is \"tanh\", expected one of \"gelu\", \"gelu_new\", \"relu\", \"silu\", \"swish\"");
    check_error([&] { parse([](json& j) { j["tie_word_embeddings"] = false; }); }, "config.invalid_value",
                src + ": field 'tie_word_embeddings' is false, expected true (Pegasus-X's LM head is the shared embedding)");
    check_error([&] { parse([](json& j) { j.erase("encoder_layers"); }); }, "config.missing_field",
                src + ": missing required field 'encoder_layers' (expected an integer)");
    check_error([&] { parse([](json& j) { j["eos_token_id"] = 512; }); }, "config.invalid_value",
                src + ": field 'eos_token_id' is 512, expected an integer in [0, 511]");
}

TEST_CASE("pegasus_x: staggering matters, and inputs of any length run (sinusoidal positions, blocks clipped)") {
    const reference ref(hf_dir + "/pegasus_x/reference.safetensors");
    const batch in = encoder_batch(ref);
    // Without staggering the odd layer's blocks differ: the states must miss the reference.
    const std::string dir = scratch_dir("pegasus_x_unstaggered");
    auto cfg = read_json(hf_dir + "/pegasus_x/config.json");
    cfg["stagger_local_blocks"] = false;
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto e = models::load_encoder<float, cpu>(locost::io::checkpoint::open(hf_dir + "/pegasus_x", dir + "/config.json"));
    const auto h = e.forward(in.ids.data(), in.mask.data(), in.B, in.L);
    CHECK(rel_error(h.data(), ref.floats("enc.last_hidden_state"), expand_mask(in.mask01, 64)) > 1e-3);
    // Past max_position_embeddings (512) and not a multiple of the block: finite states.
    auto plain = models::load_encoder<float, cpu>(locost::io::checkpoint::open(hf_dir + "/pegasus_x"));
    CHECK_FALSE(plain.max_context().has_value());
    std::vector<std::int64_t> ids(601);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(2 + (i * 37) % 500);
    const auto long_h = plain.forward(ids.data(), nullptr, 1, 601);
    bool finite = true;
    for (index_t i = 0; i < long_h.numel(); ++i) finite = finite && std::isfinite(long_h[i]);
    CHECK(finite);
}
