// Greedy and beam search end to end (generation/search.hpp) against references of Hugging Face
// transformers 4.27.1 semantics driving the original LOCOST model (ids exact, beam scores to
// 1e-5); then the two beam search conventions (hf_4_27, hf_5: generation/beam_hf_4_27.hpp,
// generation/beam_hf_5.hpp) on a scripted toy model where transformers 4.27.1 and 5.x return
// different beams, the expectations derived by hand from their source.
#include "generation/hf_generation.hpp"

#include <array>
#include <map>
#include <string>
#include <vector>

TEST_CASE("generation: greedy end to end, ids identical (processors, batches, tied head)") {
    for (const auto& c : cases().at("greedy_cases")) {
        CAPTURE(c.at("name").get<std::string>());
        const auto r = run_case(c);
        CHECK(r.sequences == rows_of(c.at("sequences")));
    }
}

TEST_CASE("generation: beam search end to end, ids identical and scores to 1e-5") {
    for (const auto& c : cases().at("beam_cases")) {
        CAPTURE(c.at("name").get<std::string>());
        const auto r = run_case(c);
        CHECK(r.sequences == rows_of(c.at("sequences")));
        const auto want = c.at("sequence_scores").get<std::vector<double>>();
        REQUIRE(r.scores.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(r.scores[i] == doctest::Approx(want[i]).epsilon(1e-5));
    }
}

// ---- the two beam conventions on a scripted toy model ----------------------------------------
//
// The tiny references give the same beams under both conventions, so here a toy model whose
// next-token distribution is scripted per decoded history makes them part. Vocabulary of 6:
// 0 = pad = decoder start, 1 = eos, 2..5 ordinary. The model returns logits ln p (p sums to 1),
// so log_softmax gives back ln p (to float32 rounding) and every sum log-prob below is the log
// of a product of the scripted probabilities. K = num_beams = 2, 2 rows returned per document.
// [a,b] names the tokens generated after the start token, [0,a,b] a whole row.
// Scores: 4.27.1 divides the sum log-prob by the hypothesis length (start token + tokens before
// the eos; max_length for a beam added at finalize); 5.x by the number of generated tokens,
// eos included, i.e. by c = HF 5's cur_len before the step (max_length - 1 at the last step).
namespace {

struct scripted_model {
    using scalar = float;
    using distribution = std::array<double, 6>;
    using script = std::map<std::vector<std::int64_t>, distribution>;  // generated tokens → next p
    struct encoded {
        std::vector<int> docs;  // one entry per document (only its size is read)
    };
    struct state {
        locost::generation::token_rows hist;  // per row: the tokens fed so far (start first)
        std::size_t rows_per_doc = 1;
    };

    locost::models::model_config cfg;
    std::vector<script> scripts;                                // per document
    distribution fallback{0.31, 0.24, 0.19, 0.13, 0.08, 0.05};  // any history not scripted

    explicit scripted_model(std::vector<script> s) : scripts(std::move(s)) {
        cfg.vocab_size = 6;
        cfg.pad_token_id = 0;
        cfg.eos_token_id = 1;
        cfg.eos_token_ids = {1};
        cfg.decoder_start_token_id = 0;
        for (const auto& sc : scripts)
            for (const auto& entry : sc) {
                double sum = 0;
                for (double x : entry.second) sum += x;
                REQUIRE(std::abs(sum - 1.0) < 1e-12);
            }
    }
    const locost::models::model_config& config() const { return cfg; }
    state start(const encoded& e, locost::index_t rows_per_doc, locost::index_t /*capacity*/) const {
        REQUIRE(e.docs.size() == scripts.size());
        const auto per = static_cast<std::size_t>(rows_per_doc);
        return state{locost::generation::token_rows(e.docs.size() * per), per};
    }
    void step(state& s, const std::int64_t* tokens, locost::index_t T, float* logits) const {
        REQUIRE(T == 1);
        for (std::size_t r = 0; r < s.hist.size(); ++r) {
            auto& h = s.hist[r];
            h.push_back(tokens[r]);
            REQUIRE(h.front() == 0);
            const script& sc = scripts[r / s.rows_per_doc];
            const auto it = sc.find(std::vector<std::int64_t>(h.begin() + 1, h.end()));
            const distribution& p = it == sc.end() ? fallback : it->second;
            for (std::size_t i = 0; i < 6; ++i) logits[r * 6 + i] = static_cast<float>(std::log(p[i]));
        }
    }
    void reorder(state& s, const std::vector<locost::index_t>& src) const {
        locost::generation::token_rows next;
        for (auto i : src) next.push_back(s.hist.at(static_cast<std::size_t>(i)));
        s.hist = std::move(next);
    }
};

struct scripted_case {
    std::vector<scripted_model::script> docs;  // one script per document
    locost::index_t max_new_tokens = 2;
    double length_penalty = 1.0;
    locost::generation::early_stopping_mode early = locost::generation::early_stopping_mode::heuristic;
};

locost::generation::generation_result run_scripted(const scripted_case& c, locost::generation::beam_convention conv) {
    const scripted_model m(c.docs);
    auto o = locost::generation::default_generation_options(m.config());
    o.num_beams = 2;
    o.num_return_sequences = 2;
    o.max_new_tokens = c.max_new_tokens;
    o.length_penalty = c.length_penalty;
    o.early_stopping = c.early;
    o.beam_convention = conv;
    return locost::generation::generate(m, scripted_model::encoded{std::vector<int>(c.docs.size())}, {}, o);
}

void check_beams(const locost::generation::generation_result& r, const locost::generation::token_rows& rows,
                 const std::vector<double>& scores, locost::index_t steps) {
    const auto text = [](const locost::generation::token_rows& t) {
        std::string out;
        for (const auto& row : t) {
            out += "[";
            for (std::size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + std::to_string(row[i]);
            out += "] ";
        }
        return out;
    };
    CAPTURE(text(r.sequences));
    CAPTURE(text(rows));
    CHECK(r.sequences == rows);
    REQUIRE(r.scores.size() == scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) CHECK(r.scores[i] == doctest::Approx(scores[i]).epsilon(1e-5));
    CHECK(r.steps == steps);
    CHECK_FALSE(r.cancelled);
}

}  // namespace

TEST_CASE("generation: beam conventions hf_4_27 and hf_5 part where transformers does (scripted model)") {
    using locost::generation::beam_convention;
    using locost::generation::early_stopping_mode;
    //                 p of:  pad    eos    2      3      4      5
    const scripted_model::distribution start{0.04, 0.5, 0.3, 0.12, 0.025, 0.015};
    // the early_stopping false case below (its derivation there), reused with two documents
    const scripted_model::script heuristic_script = {{{}, start},
                                                     {{2}, {0.005, 0.6, 0.03, 0.015, 0.3, 0.05}},
                                                     {{3}, {0.02, 0.1, 0.05, 0.03, 0.3, 0.5}},
                                                     {{2, 4}, {0.004, 0.9, 0.04, 0.03, 0.02, 0.006}},
                                                     {{3, 5}, {0.02, 0.2, 0.5, 0.15, 0.1, 0.03}}};

    SUBCASE("max_length: 4.27.1 adds open beams at finalize over max_length, 5.x finishes them over max_length - 1") {
        // max_new_tokens 2 (max_length 3), length_penalty 1, early_stopping false.
        //   step 1 (from the start token): eos 0.5, 2 0.3, 3 0.12 lead. Both: eos (rank 0 < K)
        //     finishes E = [0] (+eos), sum ln 0.5 = -0.693147, score /1 = -0.693147. Running
        //     [2] ln 0.3, [3] ln 0.12. Neither stops (one hypothesis; 5.x has an empty slot).
        //   step 2 (the last): [2,4] ln 0.18 = -1.714798, [2,5] ln 0.06 = -2.813411,
        //     [3,5] ln 0.054 = -2.918771, [3,4] ln 0.042 = -3.170086 lead; no eos among them.
        //   4.27.1: running [2,4], [2,5]; max_length ends the loop; finalize adds them with
        //     len 3: [0,2,4] -1.714798/3 = -0.571599 (beats E), [0,2,5] -0.937804 (not > worst
        //     E). Best first: [0,2,4] -0.571599, then E -0.693147, written [0,1] + pad.
        //   5.x: every candidate hits max_length; the first K finish with /2: [0,2,4]
        //     -0.857399, [0,2,5] -1.406705. Slots: E -0.693147, [0,2,4] -0.857399; E's row is
        //     filled with eos (pad_token_id 0 → eos_token_id[0]).
        scripted_case c;
        c.docs = {{{{}, start}, {{2}, {0.02, 0.03, 0.05, 0.1, 0.6, 0.2}}, {{3}, {0.02, 0.1, 0.05, 0.03, 0.35, 0.45}}}};
        c.max_new_tokens = 2;
        check_beams(run_scripted(c, beam_convention::hf_4_27), {{0, 2, 4}, {0, 1, 0}}, {std::log(0.18) / 3, std::log(0.5)}, 2);
        check_beams(run_scripted(c, beam_convention::hf_5), {{0, 1, 1}, {0, 2, 4}}, {std::log(0.5), std::log(0.18) / 2}, 2);
    }

    SUBCASE("early_stopping false: 4.27.1 bounds by best candidate / (c + 1), 5.x by best running beam / c") {
        // max_new_tokens 3 (max_length 4), length_penalty 1, early_stopping false.
        //   step 1: as above, E1 = [0] -0.693147; running [2] ln 0.3, [3] ln 0.12.
        //   step 2 (c = 2): [2,eos] ln 0.18 = -1.714798, [2,4] ln 0.09 = -2.407946,
        //     [3,5] ln 0.06 = -2.813411, [3,4] ln 0.036 = -3.324236 lead. Both: [2,eos] (rank 0)
        //     finishes E2 = [0,2] -1.714798/2 = -0.857399; K hypotheses, worst -0.857399;
        //     running [2,4], [3,5].
        //     4.27.1: done iff worst >= best candidate (-1.714798, the eos one) / (c + 1 = 3)
        //       = -0.571599: no, go on.
        //     5.x: improvable iff best running / c = -2.407946/2 = -1.203973 > worst: no, the
        //       search stops. Result E1, E2 (rows filled with eos).
        //     (With 4.27.1's bound 5.x would go on and end as 4.27.1 does.)
        //   4.27.1 step 3 (the last): [2,4,eos] ln 0.081 = -2.513306 (rank 0) finishes [0,2,4]
        //     -2.513306/3 = -0.837769 > worst, replacing E2; running [3,5,2] ln 0.03, [3,5,3]
        //     ln 0.009 ([3,5,eos] ranks 2 ≥ K: dropped). Finalize: [0,3,5,2] -3.506558/4 =
        //     -0.876640 and [0,3,5,3] do not beat the worst (-0.837769). Result E1, [0,2,4];
        //     width min(3 + 1, 4) = 4, eos appended to the shorter rows, then pad.
        scripted_case c;
        c.docs = {heuristic_script};
        c.max_new_tokens = 3;
        check_beams(run_scripted(c, beam_convention::hf_4_27), {{0, 1, 0, 0}, {0, 2, 4, 1}}, {std::log(0.5), std::log(0.081) / 3}, 3);
        check_beams(run_scripted(c, beam_convention::hf_5), {{0, 1, 1}, {0, 2, 1}}, {std::log(0.5), std::log(0.18) / 2}, 2);
    }

    SUBCASE("early_stopping \"never\": 4.27.1 bounds by best / max_length, 5.x by best / (max_length - 1)") {
        // max_new_tokens 4 (max_length L = 5), length_penalty 1, early_stopping "never".
        //   step 1: eos 0.55, 2 0.4 lead: E1 = [0] ln 0.55 = -0.597837; running [2] ln 0.4,
        //     [3] ln 0.03.
        //   step 2: [2,eos] ln 0.28 = -1.272966 (rank 0), [2,4] ln 0.1 = -2.302585,
        //     [3,5] ln 0.015, [2,5] ln 0.012 lead. Both: E2 = [0,2] -1.272966/2 = -0.636483;
        //     worst -0.636483; running [2,4], [3,5]. 4.27.1: -1.272966/5 = -0.254593 > worst,
        //     go on. 5.x: -2.302585/4 = -0.575646 > worst, go on.
        //   step 3: [2,4,5] ln 0.06 = -2.813411, [2,4,4] ln 0.03, [2,4,2] ln 0.005, [3,5,0]
        //     ln 0.00465 (history [3,5] is not scripted: the fallback) lead; no eos among them,
        //     the hypotheses stay. The best candidate is the running [2,4,5]:
        //     4.27.1: done iff worst >= -2.813411/L = -0.562682: no, go on.
        //     5.x: improvable iff -2.813411/(L - 1) = -0.703353 > worst: no, the search stops.
        //       Result E1, E2. (Over L, as 4.27.1, it would run step 4 too, its slots
        //       unchanged: the step count shows it; over L - 1, 4.27.1 would stop here with
        //       E1, E2 too.)
        //   4.27.1 step 4 (the last): [2,4,5,3] ln 0.048 = -3.036554, [2,4,4,0] ln 0.0093
        //     lead (both running). Finalize: [0,2,4,5,3] -3.036554/5 = -0.607311 beats the
        //     worst and replaces E2; [0,2,4,4,0] -4.677741/5 does not. Result E1 -0.597837,
        //     [0,2,4,5,3] -0.607311; width min(5 + 1, 5) = 5.
        scripted_case c;
        c.docs = {{{{}, {0.01, 0.55, 0.4, 0.03, 0.006, 0.004}},
                   {{2}, {0.004, 0.7, 0.006, 0.01, 0.25, 0.03}},
                   {{3}, {0.02, 0.1, 0.05, 0.03, 0.3, 0.5}},
                   {{2, 4}, {0.005, 0.03, 0.05, 0.015, 0.3, 0.6}},
                   {{2, 4, 5}, {0.005, 0.05, 0.1, 0.8, 0.03, 0.015}}}};
        c.max_new_tokens = 4;
        c.early = early_stopping_mode::never;
        check_beams(run_scripted(c, beam_convention::hf_4_27), {{0, 1, 0, 0, 0}, {0, 2, 4, 5, 3}}, {std::log(0.55), std::log(0.048) / 5},
                    4);
        check_beams(run_scripted(c, beam_convention::hf_5), {{0, 1, 1}, {0, 2, 1}}, {std::log(0.55), std::log(0.28) / 2}, 3);
    }

    SUBCASE("two documents: 5.x decodes on a done document but keeps nothing it produces") {
        // max_new_tokens 3 (max_length 4), length_penalty 1, early_stopping false; document 0
        // is the early_stopping false case above, document 1 goes on to max_length:
        //   step 1: 2 0.9, 3 0.05 lead (eos 0.02 ranks 2 ≥ K: nothing finishes).
        //   step 2: [2,3] ln 0.81, [2,4] ln 0.045 lead, [2,eos] ln 0.018 ranks 2: nothing
        //     finishes; running [2,3], [2,4].
        //   step 3 (the last): [2,3,eos] ln 0.729 = -0.316082, [2,3,4] ln 0.0405 = -3.206453,
        //     [2,3,5] ln 0.0243, [2,4,0] ln 0.01395 (fallback) lead.
        //     4.27.1: [2,3,eos] finishes [0,2,3] -0.316082/3 = -0.105361; finalize adds
        //       [0,2,3,4] -3.206453/4 = -0.801613 (fewer than K) but not [0,2,3,5]
        //       (-3.717279/4 = -0.929320 ≤ worst).
        //     5.x: the first K finish over 3: [0,2,3,eos] -0.105361, [0,2,3,4] -1.068818.
        // 5.x: document 0 is done after step 2 but document 1 is not, so step 3 runs for both;
        // document 0's [2,4,eos] (-2.513306/3 = -0.837769, better than its E2 -0.857399) gets
        // −1e9 for the done document and must not enter its slots. 4.27.1 runs step 3 too and
        // gives document 0 what it gave alone (document 1 never fills K hypotheses before the
        // end, so 4.27.1's per-document cur_len increment decides nothing here).
        // Width 4 in both (4.27.1: min(longest 4 + 1, max_length 4); 5.x: the longest row).
        scripted_case c;
        c.docs = {heuristic_script,
                  {{{}, {0.015, 0.02, 0.9, 0.05, 0.01, 0.005}},
                   {{2}, {0.01, 0.02, 0.005, 0.9, 0.05, 0.015}},
                   {{2, 3}, {0.004, 0.9, 0.01, 0.006, 0.05, 0.03}}}};
        c.max_new_tokens = 3;
        check_beams(run_scripted(c, beam_convention::hf_4_27), {{0, 1, 0, 0}, {0, 2, 4, 1}, {0, 2, 3, 1}, {0, 2, 3, 4}},
                    {std::log(0.5), std::log(0.081) / 3, std::log(0.729) / 3, std::log(0.0405) / 4}, 3);
        check_beams(run_scripted(c, beam_convention::hf_5), {{0, 1, 1, 1}, {0, 2, 1, 1}, {0, 2, 3, 1}, {0, 2, 3, 4}},
                    {std::log(0.5), std::log(0.18) / 2, std::log(0.729) / 3, std::log(0.0405) / 3}, 3);
    }
}

TEST_CASE("generation: token_logprobs gives each greedy or sampled token's log-probability (scripted model)") {
    using namespace locost::generation;
    //                   p of:  pad    eos    2      3      4      5
    const scripted_model::script s = {
        {{}, {0.05, 0.15, 0.6, 0.1, 0.05, 0.05}}, {{2}, {0.1, 0.1, 0.1, 0.1, 0.5, 0.1}}, {{2, 4}, {0.05, 0.7, 0.1, 0.05, 0.05, 0.05}}};
    const scripted_model m({s, s});
    auto o = default_generation_options(m.config());
    o.max_new_tokens = 5;
    o.token_logprobs = true;
    std::vector<std::vector<float>> seen;
    std::vector<std::vector<std::int64_t>> tokens;
    auto record = [&](const step_event& e) {
        REQUIRE(e.logprobs != nullptr);
        seen.push_back(*e.logprobs);
        tokens.push_back(*e.tokens);
        return true;
    };
    const auto r = generate(m, scripted_model::encoded{{0, 0}}, {}, o, record);
    CHECK(r.sequences == token_rows{{0, 2, 4, 1}, {0, 2, 4, 1}});
    REQUIRE(seen.size() == 3);
    for (std::size_t row = 0; row < 2; ++row) {
        CHECK(seen[0][row] == doctest::Approx(std::log(0.6)).epsilon(1e-6));
        CHECK(seen[1][row] == doctest::Approx(std::log(0.5)).epsilon(1e-6));
        CHECK(seen[2][row] == doctest::Approx(std::log(0.7)).epsilon(1e-6));
    }
    // Sampling at temperature 0.5: the distribution drawn from is p² renormalized.
    o.do_sample = true;
    o.temperature = 0.5;
    o.top_k = 0;
    o.seed = 11;
    seen.clear();
    tokens.clear();
    const scripted_model one({s});
    const auto sampled = generate(one, scripted_model::encoded{{0}}, {}, o, record);
    REQUIRE_FALSE(seen.empty());
    std::vector<std::int64_t> history;
    for (std::size_t k = 0; k < seen.size(); ++k) {
        const auto it = s.find(history);
        const scripted_model::distribution& p = it == s.end() ? one.fallback : it->second;
        double z = 0;
        for (double x : p) z += x * x;
        const auto t = static_cast<std::size_t>(tokens[k][0]);
        CHECK(seen[k][0] == doctest::Approx(std::log(p[t] * p[t] / z)).epsilon(1e-5));
        history.push_back(tokens[k][0]);
    }
    CHECK(sampled.steps == static_cast<locost::index_t>(seen.size()));
    // Not asked for: none, and no work for them.
    o.token_logprobs = false;
    generate(one, scripted_model::encoded{{0}}, {}, o, [](const step_event& e) {
        CHECK(e.logprobs == nullptr);
        return true;
    });
}
