// Command-line flags shared by score, generate and summarize: the model's run-time options and
// every generation option, named after Hugging Face's with dashes (--max-new-tokens, ...).
#pragma once
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace locost::cli {

inline const std::set<std::string> model_valued = {"backbone", "threads", "cross-cache", "weights", "compute", "cross-attention", "conv-mode", "sled-context", "sled-window-fraction",
                                                   "prefix-length", "global-tokens"};
inline const std::set<std::string> model_flags = {"no-encode-prefix"};

inline const std::set<std::string> generation_valued = {
    "max-new-tokens", "max-length", "min-new-tokens", "min-length", "num-beams", "length-penalty", "early-stopping",
    "num-return-sequences", "temperature", "top-k", "top-p", "seed", "no-repeat-ngram-size",
    "encoder-no-repeat-ngram-size", "repetition-penalty", "bad-words-ids", "forced-bos-token-id", "forced-eos-token-id",
    "suppress-tokens", "begin-suppress-tokens", "decoder-start-token-id", "eos-token-id", "pad-token-id", "beam-convention", "generation-config", "task"};

inline std::set<std::string> joined(std::initializer_list<std::set<std::string>> sets) {
    std::set<std::string> out;
    for (const auto& s : sets) out.insert(s.begin(), s.end());
    return out;
}

inline constexpr const char* model_help =
    "  --backbone DIR|ORG/NAME  a SLED checkpoint that ships no weights (tau/bart-base-sled): the backbone\n"
    "                     model's checkpoint (default: the repository its underlying_config names, from the\n"
    "                     Hugging Face cache)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --cross-cache P    precision of the cross-attention cache: auto (default), float32, bfloat16, int8;\n"
    "                     auto: float32 up to 128 MiB of cache (base model: 1820 tokens), bfloat16 up\n"
    "                     to 16 GiB of float32 cache (233K tokens), int8 beyond\n"
    "  --weights P        storage of the decoder's per-step weights and LM head: float32 (default,\n"
    "                     exact), bfloat16, int8 (a scale per output channel); decoding reads them\n"
    "                     once per step, so fewer bytes per weight make each token faster\n"
    "  --cross-attention F  cached (default): every layer's keys/values projected once and kept;\n"
    "                     folded: keep only the encoder states (24x less memory for the base model,\n"
    "                     in the --cross-cache precision) and fold the key/value projections into\n"
    "                     each step (heads times more arithmetic per step)\n"
    "  --compute P        arithmetic of the products over every input position (the encoder's linear\n"
    "                     layers and, in T5, BART and SLED, its self-attention; the cross-attention\n"
    "                     cache's projection; folded attention over the states): fp32 (default,\n"
    "                     exact), bf16 (bfloat16 inputs, float32 sums: ~2x faster with AVX512-BF16\n"
    "                     or AMX) or int8 (inputs quantized per row,\n"
    "                     weights per output channel, int32 sums, with AVX512-VNNI or AMX; cross-\n"
    "                     attention over int8 states (folded) or an int8 cache (cached, up to 4 rows\n"
    "                     per document): queries and probabilities quantized to 8 bits, int32 sums,\n"
    "                     with AVX512-VNNI; folded over bfloat16 states and the encoders' self-\n"
    "                     attention as under bf16)\n"
    "  --conv-mode M      LOCOST: exact (default) or original-cuda: the FFT-size quirk of the original\n"
    "                     CUDA path, which the released checkpoints were trained with\n"
    "  --global-tokens P,Q,...  LED: positions with global attention in every row (default 0: the\n"
    "                     first token; an empty value: none)\n"
    "SLED (any checkpoint; a SLED config.json sets the first two itself):\n"
    "  --sled-context C          encode the input in chunks of C tokens (SLED), keeping each chunk's middle\n"
    "  --sled-window-fraction F  the kept share of each chunk, in (0, 1] (default 0.5)\n"
    "  --prefix-length P         the first P ids of every row are a prefix (a question): prepended to every\n"
    "                            chunk and encoded alone first (default 0)\n"
    "  --no-encode-prefix        do not encode the prefix alone (the decoder then sees no prefix states)\n";

inline constexpr const char* generation_help =
    "generation options (Hugging Face names; defaults: the checkpoint's generation_config.json, else the\n"
    "generation fields of its config.json, else Hugging Face's GenerationConfig defaults; lengths count the\n"
    "decoder start token):\n"
    "  --generation-config FILE     the defaults from FILE instead (generation_config_for_summarization.json)\n"
    "  --task NAME                  config.json's task_specific_params[NAME] over the defaults, as a transformers\n"
    "                               pipeline for that task applies them; summarize also puts the task's \"prefix\"\n"
    "                               (else config.json's \"prefix\", which summarize always applies) before the text\n"
    "  --max-new-tokens N           tokens to generate at most (default: max_length 20 in all)\n"
    "  --max-length N               total length incl. the start token (if --max-new-tokens is unset)\n"
    "  --min-new-tokens N           eos is masked until N tokens are generated\n"
    "  --min-length N               eos is masked while the length (incl. start) is below N\n"
    "  --num-beams K                beam search with K beams (1: greedy or sampling)\n"
    "  --length-penalty X           beam score = sum log p / length^X (default 1.0)\n"
    "  --early-stopping V           true, false (default) or never\n"
    "  --num-return-sequences N     sequences per input (<= num-beams; or samples with --do-sample)\n"
    "  --do-sample                  sample instead of greedy\n"
    "  --temperature X  --top-k N  --top-p X   sampling warpers (defaults 1.0, 50, 1.0)\n"
    "  --seed S                     sampling seed (default 0): the same seed gives the same tokens\n"
    "  --no-repeat-ngram-size N     no n-gram of size N twice in the output\n"
    "  --encoder-no-repeat-ngram-size N   no n-gram of size N of the input in the output\n"
    "  --repetition-penalty X       divide (multiply if negative) scores of tokens already generated\n"
    "  --bad-words-ids JSON         e.g. [[5],[7,8]]: token sequences never generated\n"
    "  --forced-bos-token-id ID     first generated token\n"
    "  --forced-eos-token-id ID     token forced at the last position (an id or a JSON list)\n"
    "  --suppress-tokens JSON       e.g. [5,7]: ids never generated ([] clears the checkpoint's)\n"
    "  --begin-suppress-tokens JSON ids not generated at the first position (after a forced BOS)\n"
    "  --decoder-start-token-id ID  --eos-token-id ID  --pad-token-id ID\n"
    "  --beam-convention V          transformers-4.27 or transformers-5: how beam search measures and\n"
    "                               finishes hypotheses (default: the family's users' version: LOCOST\n"
    "                               4.27, the version its code pins; T5 and SLED 5)\n";

// "0,5,50" → {0, 5, 50}; "" → none. Error: cli.bad_value naming the flag.
inline std::vector<index_t> global_token_positions(const std::string& v, const std::string& command) {
    std::vector<index_t> out;
    std::size_t at = 0;
    while (at < v.size()) {
        const std::size_t end = std::min(v.find(',', at), v.size());
        const std::string item = v.substr(at, end - at);
        index_t p = -1;
        const bool digits = !item.empty() && item.size() <= 10 && item.find_first_not_of("0123456789") == std::string::npos;
        if (digits) p = static_cast<index_t>(std::stoll(item));
        if (!digits || p > io::max_config_dim)
            throw error("cli.bad_value", command + ": option '--global-tokens' expects comma-separated positions (integers >= 0), got '" +
                                             io::detail::printable(v) + "'");
        out.push_back(p);
        at = end + 1;
    }
    return out;
}

// The model's run-time options; SLED flags over the checkpoint's SLED config.json (if any).
// Errors: cli.bad_value, cli.missing_option (a SLED flag without SLED), sled.*.
inline models::model_options read_model_options(const args& a, const std::string& command, const io::checkpoint& ck) {
    models::model_options o;
    std::optional<models::sled_options> sled = models::read_sled_options(ck);
    if (a.has("sled-context")) {
        if (!sled) sled = models::sled_options{};
        sled->context_size = a.integer<index_t>("sled-context", 256, 1, io::max_config_dim);
    }
    for (const char* f : {"sled-window-fraction", "prefix-length", "no-encode-prefix"})
        if (a.has(f) && !sled)
            throw error("cli.missing_option", command + ": option '--" + std::string(f) +
                                                  "' applies to SLED: give '--sled-context C' too (or use a SLED checkpoint)");
    if (sled) {
        if (a.has("sled-window-fraction")) sled->window_fraction = a.real("sled-window-fraction", 0.5, -1e9, 1e9);
        sled->prefix_length = a.integer<index_t>("prefix-length", 0, 0, io::max_config_dim);
        if (a.flag("no-encode-prefix")) sled->encode_prefix = false;
        o.sled = sled;
    }
    const std::string cc = a.get("cross-cache", "auto");
    if (cc == "auto") o.cross_cache = models::cross_cache_precision::automatic;
    else if (cc == "float32") o.cross_cache = models::cross_cache_precision::f32;
    else if (cc == "bfloat16") o.cross_cache = models::cross_cache_precision::bf16;
    else if (cc == "int8") o.cross_cache = models::cross_cache_precision::i8;
    else throw error("cli.bad_value", command + ": option '--cross-cache' expects auto, float32, bfloat16 or int8, got '" + cc + "'");
    const std::string wp = a.get("weights", "float32");
    if (wp == "float32") o.weights = models::weight_precision::native;
    else if (wp == "bfloat16") o.weights = models::weight_precision::bf16;
    else if (wp == "int8") o.weights = models::weight_precision::i8;
    else throw error("cli.bad_value", command + ": option '--weights' expects float32, bfloat16 or int8, got '" + wp + "'");
    const std::string ca = a.get("cross-attention", "cached");
    if (ca == "cached") o.cross_attention = models::cross_attention_form::cached;
    else if (ca == "folded") o.cross_attention = models::cross_attention_form::folded;
    else throw error("cli.bad_value", command + ": option '--cross-attention' expects cached or folded, got '" + ca + "'");
    const std::string cp = a.get("compute", "fp32");
    if (cp == "fp32" || cp == "float32") o.encoder.compute = models::compute_precision::f32;
    else if (cp == "bf16" || cp == "bfloat16") o.encoder.compute = models::compute_precision::bf16;
    else if (cp == "int8") o.encoder.compute = models::compute_precision::i8;
    else throw error("cli.bad_value", command + ": option '--compute' expects fp32, bf16 or int8, got '" + cp + "'");
    const std::string cm = a.get("conv-mode", "exact");
    if (cm == "exact") o.encoder.conv = models::conv_mode::exact;
    else if (cm == "original-cuda") o.encoder.conv = models::conv_mode::original_cuda;
    else throw error("cli.bad_value", command + ": option '--conv-mode' expects exact or original-cuda, got '" + cm + "'");
    if (a.has("global-tokens")) o.encoder.global_tokens = global_token_positions(a.get("global-tokens", ""), command);
    const int threads = a.integer<int>("threads", 0, 0, 1024);
    set_num_threads(threads);
    flush_denormals_unless_kept();  // in the pool of that size
    return o;
}

// The checkpoint's defaults with every flag given applied on top. Errors: cli.bad_value, and
// generate.invalid_option from validation.
inline generation::generation_options read_generation_options(const args& a, const std::string& command,
                                                             const models::any_config& family_cfg,
                                                             const std::optional<io::generation_config>& ckpt) {
    const models::model_config& cfg = models::common(family_cfg);
    auto o = generation::default_generation_options(cfg, ckpt);
    // Beam search as the family's users run it: LOCOST's code pins transformers 4.27.1; T5 and
    // SLED checkpoints are run with current transformers.
    o.beam_convention = models::traits(family_cfg).beam_convention;
    if (a.has("beam-convention")) {
        const std::string v = a.required("beam-convention");
        if (v == "transformers-4.27") o.beam_convention = generation::beam_convention::hf_4_27;
        else if (v == "transformers-5") o.beam_convention = generation::beam_convention::hf_5;
        else throw error("cli.bad_value", command + ": option '--beam-convention' expects transformers-4.27 or transformers-5, got '" + v + "'");
    }
    constexpr index_t M = io::max_config_dim;
    auto int_opt = [&](const char* n, index_t lo) { return a.integer<index_t>(n, 0, lo, M); };
    // An id, or a JSON list of ids.
    // A token id: a JSON integer in [0, 2^31), never a number rounded to one ([-0.5] is no id 0,
    // and 1e30 no id at all).
    auto is_id = [](const nlohmann::json& e) {
        return e.is_number_integer() && (e.is_number_unsigned() || e.get<std::int64_t>() >= 0) && e.get<std::uint64_t>() <= io::max_config_dim;
    };
    auto ids_of = [&](const nlohmann::json& j, std::vector<index_t>& out) {
        for (const auto& e : j) {
            if (!is_id(e)) return false;
            out.push_back(e.get<index_t>());
        }
        return true;
    };
    auto id_list = [&](const char* n) {
        const std::string v = a.required(n);
        try {
            const auto j = nlohmann::json::parse(v);
            std::vector<index_t> out;
            if (is_id(j)) return std::vector<index_t>{j.get<index_t>()};
            if (j.is_array() && !j.empty() && ids_of(j, out)) return out;
        } catch (const nlohmann::json::exception&) {
        }
        throw error("cli.bad_value", command + ": option '--" + std::string(n) + "' expects a token id or a JSON list of ids, got '" +
                                         io::detail::printable(v) + "'");
    };
    if (a.has("max-new-tokens")) o.max_new_tokens = int_opt("max-new-tokens", 1);
    if (a.has("max-length")) {
        o.max_length = int_opt("max-length", 2);
        if (!a.has("max-new-tokens")) o.max_new_tokens.reset();
    }
    if (a.has("min-new-tokens")) o.min_new_tokens = int_opt("min-new-tokens", 0);
    if (a.has("min-length")) o.min_length = int_opt("min-length", 0);
    if (a.has("num-beams")) o.num_beams = int_opt("num-beams", 1);
    if (a.has("length-penalty")) o.length_penalty = a.real("length-penalty", 1.0, -1e9, 1e9);
    if (a.has("early-stopping")) {
        const std::string v = a.required("early-stopping");
        if (v == "true") o.early_stopping = io::early_stopping_mode::on;
        else if (v == "false") o.early_stopping = io::early_stopping_mode::heuristic;
        else if (v == "never") o.early_stopping = io::early_stopping_mode::never;
        else throw error("cli.bad_value", command + ": option '--early-stopping' expects true, false or never, got '" + v + "'");
    }
    if (a.has("num-return-sequences")) o.num_return_sequences = int_opt("num-return-sequences", 1);
    if (a.flag("do-sample")) o.do_sample = true;
    if (a.has("temperature")) o.temperature = a.real("temperature", 1.0, 1e-9, 1e9);
    if (a.has("top-k")) o.top_k = int_opt("top-k", 0);
    if (a.has("top-p")) o.top_p = a.real("top-p", 1.0, 0.0, 1.0);
    if (a.has("seed")) o.seed = a.integer<std::uint64_t>("seed", 0, 0, ~std::uint64_t{0});
    if (a.has("no-repeat-ngram-size")) o.no_repeat_ngram_size = int_opt("no-repeat-ngram-size", 0);
    if (a.has("encoder-no-repeat-ngram-size")) o.encoder_no_repeat_ngram_size = int_opt("encoder-no-repeat-ngram-size", 0);
    if (a.has("repetition-penalty")) o.repetition_penalty = a.real("repetition-penalty", 1.0, 1e-9, 1e9);
    if (a.has("bad-words-ids")) {
        const std::string v = a.required("bad-words-ids");
        bool ok = false;
        try {
            const auto j = nlohmann::json::parse(v);
            if (j.is_array()) {
                std::vector<std::vector<index_t>> words;
                ok = true;
                for (const auto& w : j) {
                    words.emplace_back();
                    ok = ok && w.is_array() && ids_of(w, words.back());
                }
                if (ok) o.bad_words_ids = std::move(words);
            }
        } catch (const nlohmann::json::exception&) {
        }
        if (!ok)
            throw error("cli.bad_value", command + ": option '--bad-words-ids' expects a JSON list of lists of ids like [[5],[7,8]], got '" +
                                             io::detail::printable(v) + "'");
    }
    if (a.has("forced-bos-token-id")) o.forced_bos_token_id = int_opt("forced-bos-token-id", 0);
    if (a.has("forced-eos-token-id")) o.forced_eos_token_id = id_list("forced-eos-token-id");
    // A JSON list of ids, possibly empty (to clear the checkpoint's).
    auto id_list_or_none = [&](const char* n) {
        const std::string v = a.required(n);
        try {
            const auto j = nlohmann::json::parse(v);
            std::vector<index_t> out;
            if (j.is_array() && ids_of(j, out)) return out;
        } catch (const nlohmann::json::exception&) {
        }
        throw error("cli.bad_value", command + ": option '--" + std::string(n) + "' expects a JSON list of ids like [5,7], got '" +
                                         io::detail::printable(v) + "'");
    };
    if (a.has("suppress-tokens")) o.suppress_tokens = id_list_or_none("suppress-tokens");
    if (a.has("begin-suppress-tokens")) o.begin_suppress_tokens = id_list_or_none("begin-suppress-tokens");
    if (a.has("decoder-start-token-id")) o.decoder_start_token_id = int_opt("decoder-start-token-id", 0);
    if (a.has("eos-token-id")) o.eos_token_id = id_list("eos-token-id");
    if (a.has("pad-token-id")) o.pad_token_id = int_opt("pad-token-id", 0);
    // Flags that contradict each other are a command-line error, not a run that silently obeys
    // one of them. (A minimum from the checkpoint's generation_config.json below a --max-new-tokens
    // is not: transformers stops at the maximum, and so do we.)
    const bool min_flag = a.has("min-new-tokens") || a.has("min-length"), max_flag = a.has("max-new-tokens") || a.has("max-length");
    if (min_flag && max_flag) {
        // Only the flags' own minimum: one from the checkpoint's file (bart-large-cnn's min_length 56)
        // under a smaller --max-new-tokens is the case above, where generation stops at the maximum.
        const index_t at_most = o.total_length() - 1,
                      at_least = std::max(a.has("min-new-tokens") ? o.min_new_tokens.value_or(0) : 0, a.has("min-length") ? o.min_length - 1 : 0);
        if (at_least > at_most)
            throw error("cli.bad_value", command + ": the minimum of " + std::to_string(at_least) + " new tokens (" +
                                             (a.has("min-new-tokens") ? "--min-new-tokens" : "--min-length") + ") exceeds the maximum of " +
                                             std::to_string(at_most) + " (" + (a.has("max-new-tokens") ? "--max-new-tokens" : "--max-length") +
                                             ")");
    }
    generation::validate(o, cfg);
    return o;
}

// The generation settings in force, with where each came from: a flag, the defaults' file
// (generation_config.json, config.json, --generation-config) or the --task's parameters, or
// transformers' default. --dry-run and inspect print them.
struct generation_setting {
    std::string name, value, source;
};
inline std::vector<generation_setting> generation_settings(const args& a, const generation::generation_options& go, const std::string& source,
                                                           const std::set<std::string>& given, const std::set<std::string>& from_task) {
    auto ids = [](const std::vector<index_t>& v) {
        std::string s;
        for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
        return s.empty() ? std::string("none") : s;
    };
    auto words = [](const std::vector<std::vector<index_t>>& v) {
        return v.empty() ? std::string("none") : nlohmann::json(v).dump();
    };
    auto num = [](double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", x);
        return std::string(b);
    };
    const std::string es = go.early_stopping == io::early_stopping_mode::on ? "true" : go.early_stopping == io::early_stopping_mode::never ? "never" : "false";
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"max_length", std::to_string(go.max_length)},
        {"max_new_tokens", go.max_new_tokens ? std::to_string(*go.max_new_tokens) : "unset"},
        {"min_length", std::to_string(go.min_length)},
        {"min_new_tokens", go.min_new_tokens ? std::to_string(*go.min_new_tokens) : "unset"},
        {"num_beams", std::to_string(go.num_beams)},
        {"length_penalty", num(go.length_penalty)},
        {"early_stopping", es},
        {"no_repeat_ngram_size", std::to_string(go.no_repeat_ngram_size)},
        {"encoder_no_repeat_ngram_size", std::to_string(go.encoder_no_repeat_ngram_size)},
        {"repetition_penalty", num(go.repetition_penalty)},
        {"do_sample", go.do_sample ? "true" : "false"},
        {"temperature", num(go.temperature)},
        {"top_k", std::to_string(go.top_k)},
        {"top_p", num(go.top_p)},
        {"num_return_sequences", std::to_string(go.num_return_sequences)},
        {"bad_words_ids", words(go.bad_words_ids)},
        {"suppress_tokens", ids(go.suppress_tokens)},
        {"begin_suppress_tokens", ids(go.begin_suppress_tokens)},
        {"forced_bos_token_id", go.forced_bos_token_id ? std::to_string(*go.forced_bos_token_id) : "none"},
        {"forced_eos_token_id", ids(go.forced_eos_token_id)},
        {"decoder_start_token_id", std::to_string(go.start_token())},
        {"eos_token_id", ids(go.eos_token_id)},
        {"pad_token_id", std::to_string(go.pad_token())},
    };
    std::vector<generation_setting> out;
    for (const auto& [name, value] : rows) {
        std::string flag = name;
        std::replace(flag.begin(), flag.end(), '_', '-');
        std::string from = "default";
        if (a.has(flag) || (flag == "do-sample" && a.flag("do-sample"))) from = "--" + flag;
        else if (from_task.count(name)) from = "--task";
        else if (given.count(name)) from = source;
        else if (name == "decoder_start_token_id" || name == "eos_token_id" || name == "pad_token_id") from = "config.json";
        out.push_back({name, value, from});
    }
    return out;
}

// --dry-run's account: one line each, "generation NAME VALUE (SOURCE)".
inline std::string generation_settings_text(const args& a, const generation::generation_options& go, const std::string& source,
                                            const std::set<std::string>& given, const std::set<std::string>& from_task) {
    std::string out;
    for (const auto& s : generation_settings(a, go, source, given, from_task))
        out += "generation " + s.name + " " + s.value + " (" + s.source + ")\n";
    return out;
}

} // namespace locost::cli
