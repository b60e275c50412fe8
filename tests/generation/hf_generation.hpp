// Shared by the generation tests (tests/generation/test_logits_processors.cpp,
// tests/generation/test_search.cpp): the references of Hugging Face transformers 4.27.1 semantics
// (tests/data/own/generation), the processors by their transformers class names, and end-to-end
// runs of the tiny LOCOST model.
#pragma once
#include "helpers.hpp"

#include <memory>
#include <string>
#include <vector>

namespace {

using namespace test;
using locost::generation::generation_options;
using locost::generation::token_rows;
using json = nlohmann::json;

const std::string gen_dir = own_dir + "/generation";

const json& cases() {
    static const json j = json::parse(locost::io::read_text_file(gen_dir + "/generation.json"));
    return j;
}
const reference& arrays() {
    static const reference r(gen_dir + "/generation.safetensors");
    return r;
}

token_rows rows_of(const json& j) {
    token_rows out;
    for (const auto& r : j) out.push_back(r.get<std::vector<std::int64_t>>());
    return out;
}

// -inf must match exactly; finite values to 1e-6 relative (float32 arithmetic in the same order).
void check_scores(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    std::size_t mismatched_inf = 0;
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::isinf(want[i]) || std::isinf(got[i])) {
            mismatched_inf += got[i] != want[i];
            continue;
        }
        diff = std::max(diff, std::abs(double(got[i]) - want[i]));
        scale = std::max(scale, std::abs(double(want[i])));
    }
    CHECK(mismatched_inf == 0);
    CHECK(diff <= 1e-6 * std::max(scale, 1.0));
}

std::unique_ptr<locost::generation::logits_processor> processor_named(const std::string& cls, const json& p) {
    using namespace locost::generation;
    auto eos = [&] {
        const auto& e = p.at("eos_token_id");
        return e.is_array() ? e.get<std::vector<index_t>>() : std::vector<index_t>{e.get<index_t>()};
    };
    const index_t keep = p.value("min_tokens_to_keep", index_t{1});
    if (cls == "MinLengthLogitsProcessor") return std::make_unique<min_length>(p.at("min_length").get<index_t>(), 0, eos());
    if (cls == "MinNewTokensLengthLogitsProcessor")
        return std::make_unique<min_length>(p.at("min_new_tokens").get<index_t>(), p.at("prompt_length_to_skip").get<index_t>(), eos());
    if (cls == "RepetitionPenaltyLogitsProcessor") return std::make_unique<repetition_penalty>(p.at("penalty").get<double>());
    if (cls == "NoRepeatNGramLogitsProcessor") return std::make_unique<no_repeat_ngram>(p.at("ngram_size").get<index_t>());
    if (cls == "EncoderNoRepeatNGramLogitsProcessor")
        return std::make_unique<encoder_no_repeat_ngram>(p.at("encoder_ngram_size").get<index_t>(), rows_of(p.at("encoder_input_ids")));
    if (cls == "NoBadWordsLogitsProcessor")
        return std::make_unique<no_bad_words>(p.at("bad_words_ids").get<std::vector<std::vector<index_t>>>(), eos());
    if (cls == "ForcedBOSTokenLogitsProcessor")
        return std::make_unique<forced_token>(1, std::vector<index_t>{p.at("bos_token_id").get<index_t>()});
    if (cls == "ForcedEOSTokenLogitsProcessor") return std::make_unique<forced_token>(p.at("max_length").get<index_t>() - 1, eos());
    if (cls == "TemperatureLogitsWarper") return std::make_unique<temperature>(p.at("temperature").get<double>());
    if (cls == "TopKLogitsWarper") return std::make_unique<top_k>(p.at("top_k").get<index_t>(), keep);
    if (cls == "TopPLogitsWarper") return std::make_unique<top_p>(p.at("top_p").get<double>(), keep);
    FAIL("unknown processor class " << cls);
    return nullptr;
}

locost::models::any_model<float> tiny_model(const std::string& config) {
    const auto ck = config == "tiny_tied" ? locost::io::checkpoint::open(tiny_dir, tiny_dir + "/config_tied.json")
                                          : locost::io::checkpoint::open(tiny_dir);
    return locost::models::load_model<float, locost::cpu>(ck);
}

generation_options options_of(const json& c, const locost::models::model_config& cfg) {
    const auto g = locost::io::parse_generation_config(c.at("options").dump(), c.at("name").get<std::string>());
    return locost::generation::default_generation_options(cfg, g);
}

// Runs one end-to-end case through the model.
locost::generation::generation_result run_case(const json& c) {
    auto m = tiny_model(c.at("config").get<std::string>());
    const token_rows enc = rows_of(c.at("enc_input_ids")), mask = rows_of(c.at("attention_mask"));
    const index_t B = static_cast<index_t>(enc.size()), L = static_cast<index_t>(enc[0].size());
    std::vector<std::int64_t> ids;
    std::vector<float> m01;
    for (index_t b = 0; b < B; ++b)
        for (index_t l = 0; l < L; ++l) {
            ids.push_back(enc[b][l]);
            m01.push_back(static_cast<float>(mask[b][l]));
        }
    const auto e = m.encode(ids.data(), m01.data(), B, L);
    return locost::generation::generate(m, e, enc, options_of(c, m.config()));
}

}  // namespace
