// The option table: every option the tool, the Python module and the server share, one record
// each (options/record.hpp): its name, value type, allowed values, default, help, and the setting
// it fills. Adding an option is adding its record here and using the setting it fills.
//
// Groups, in the order --help lists them:
//   checkpoint   what to load (model, backbone, cache_dir, tokenizer)
//   run          where and within what (device, threads, memory_budget, dry_run)
//   model        the model's run-time options (models::model_options), SLED's among them
//   generation   Hugging Face's generation options (generation::generation_options), plus
//                generation_config, task and the sampling seed
//   server       locost serve's
//   eval         how locost eval (Python's Model.evaluate) scores summaries
// The generation records come in the order --dry-run lists the settings.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <set>
#include <cstdio>
#include <string>
#include <vector>

#include "../backend/device.hpp"
#include "../generation/options.hpp"
#include "../io/config.hpp"
#include "../models/options.hpp"
#include "record.hpp"

namespace locost::options {

enum class group { checkpoint, run, model, generation, server, eval };

// What records fill: the readers (options/readers.hpp) point these at the options they build.
struct targets {
    models::model_options* model = nullptr;
    generation::generation_options* generation = nullptr;
};

struct grouped_record : record {
    options::group group = group::checkpoint;
};

namespace detail {

inline std::string ids_text(const std::vector<index_t>& v) {
    std::string s;
    for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s.empty() ? std::string("none") : s;
}
inline std::vector<index_t> ids_of(const json& v) { return v.get<std::vector<index_t>>(); }
template <class T>
std::string opt_text(const std::optional<T>& v, const char* none) {
    return v ? std::to_string(*v) : std::string(none);
}

constexpr double M = static_cast<double>(io::max_config_dim);

// The table's records, built once. Designated initializers keep each record readable as a row,
// naming only the fields it sets (the rest keep their defaults, which -Wextra would warn about).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
inline std::vector<grouped_record> build_table() {
    auto gen = [](record r) {
        grouped_record g{r};
        g.group = group::generation;
        return g;
    };
    auto of = [](group gr, record r) {
        grouped_record g{r};
        g.group = gr;
        return g;
    };
    std::vector<grouped_record> t;
    // clang-format off
    // ---- checkpoint ----
    t.push_back(of(group::checkpoint, {.name = "model", .type = value_type::text, .metavar = "DIR|ORG/NAME",
                                       .help = "checkpoint directory, or ORG/NAME[@REVISION] from the Hugging Face cache (never downloaded)"}));
    t.push_back(of(group::checkpoint, {.name = "backbone", .type = value_type::text, .metavar = "DIR|ORG/NAME",
                                       .help = "a SLED checkpoint that ships no weights (tau/bart-base-sled): the backbone model's checkpoint "
                                               "(default: the repository its underlying_config names, from the Hugging Face cache)"}));
    t.push_back(of(group::checkpoint, {.name = "cache_dir", .type = value_type::text, .metavar = "DIR",
                                       .help = "the Hugging Face cache to find ORG/NAME names in, as from_pretrained's cache_dir (default: "
                                               "$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)"}));
    t.push_back(of(group::checkpoint, {.name = "tokenizer", .type = value_type::text, .metavar = "SPM|DIR",
                                       .help = "SentencePiece model or tokenizer directory, or ORG/NAME from the Hugging Face cache (default: "
                                               "the checkpoint's)"}));
    // ---- run ----
    t.push_back(of(group::run, {.name = "device", .type = value_type::choice, .metavar = "D",
                                .help = "cpu (default) or cuda: run the model on the first GPU (a tool built with -DLOCOST_CUDA=ON; "
                                        "tested and measured on an H200: see docs/design.md)",
                                .choices = choices_of(device_kind_names), .default_text = "cpu"}));
    t.push_back(of(group::run, {.name = "threads", .type = value_type::integer, .metavar = "N", .help = "worker threads (default: all cores)",
                                .lo = 0, .hi = 1024, .default_text = "0 (all cores)"}));
    t.push_back(of(group::run, {.name = "memory_budget", .type = value_type::size, .metavar = "SIZE",
                                .help = "refuse before loading when the estimated peak memory exceeds SIZE: bytes, or a number with K, M, "
                                        "G, T (powers of 1000) or KiB, MiB, GiB, TiB; 'unlimited' turns the check off (default: the memory "
                                        "available now: MemAvailable, the cgroup's memory.max and ulimit -v, whichever is least); with "
                                        "--device cuda the GPU's memory is checked instead (default: its free memory)",
                                .default_text = "the memory available now"}));
    t.push_back(of(group::run, {.name = "dry_run", .type = value_type::flag,
                                .help = "print the input's shape, the work and the memory estimate per phase, check the budget, and exit "
                                        "without loading the weights"}));
    // ---- eval (locost eval, Model.evaluate) ----
    t.push_back(of(group::eval, {.name = "rouge_stemmer", .type = value_type::choice, .metavar = "S",
                                 .help = "porter (default): words are stemmed before they are compared, as rouge-score's use_stemmer=True "
                                         "(NLTK's Porter stemmer); none: compared as they are",
                                 .choices = {{"porter", 1}, {"none", 0}}, .default_text = "porter"}));
    t.push_back(of(group::eval, {.name = "bootstrap_samples", .type = value_type::integer, .metavar = "N",
                                 .help = "resamples of the documents behind each 95% interval, as rouge-score's BootstrapAggregator "
                                         "(default 1000)",
                                 .lo = 1, .hi = 1000000, .default_text = "1000"}));
    // ---- server (locost serve) ----
    t.push_back(of(group::server, {.name = "host", .type = value_type::text, .metavar = "ADDR",
                                   .help = "address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)",
                                   .default_text = "127.0.0.1"}));
    t.push_back(of(group::server, {.name = "port", .type = value_type::integer, .metavar = "N",
                                   .help = "TCP port (default 8080; 0 picks a free one, printed on stderr)", .lo = 0, .hi = 65535,
                                   .default_text = "8080"}));
    t.push_back(of(group::server, {.name = "api_key", .type = value_type::text, .metavar = "KEY",
                                   .help = "require 'Authorization: Bearer KEY' on /v1/ requests (default: $LOCOST_API_KEY; none: no key)",
                                   .default_text = "$LOCOST_API_KEY"}));
    t.push_back(of(group::server, {.name = "max_queue", .type = value_type::integer, .metavar = "N",
                                   .help = "documents that may wait for memory before requests are refused with 429 (default 64)", .lo = 1,
                                   .hi = 1000000, .default_text = "64"}));
    t.push_back(of(group::server, {.name = "max_batch_tokens", .type = value_type::integer, .metavar = "N",
                                   .help = "input tokens of the documents decoded together in one batch, at most (default 65536; a longer "
                                           "document decodes alone; summarize --inputs reads it too: see its --help)",
                                   .lo = 0, .hi = 1099511627776.0, .default_text = "65536"}));
    t.push_back(of(group::server, {.name = "encoder_lanes", .type = value_type::integer, .metavar = "N",
                                   .help = "2 (default): short documents (up to 8192 tokens) are encoded beside a long one, by a second "
                                           "copy of the model (its weights counted against the budget; one lane when two copies would take "
                                           "over half of it); 1: one encoder, one copy",
                                   .lo = 1, .hi = 2, .default_text = "2"}));
    t.push_back(of(group::server, {.name = "max_body", .type = value_type::size, .metavar = "SIZE",
                                   .help = "largest request body (default 64M; a larger one gets 413)", .default_text = "64M"}));
    t.push_back(of(group::server, {.name = "read_timeout", .type = value_type::integer, .metavar = "S",
                                   .help = "seconds a client has to send a whole request, headers and body (default 30; a slower one is "
                                           "disconnected)",
                                   .lo = 1, .hi = 3600, .default_text = "30"}));
    t.push_back(of(group::server, {.name = "shutdown_grace", .type = value_type::integer, .metavar = "S",
                                   .help = "on SIGTERM or SIGINT, seconds the requests in flight get to finish before they are cancelled "
                                           "(default 10)",
                                   .lo = 0, .hi = 3600, .default_text = "10"}));
    // ---- model ----
    t.push_back(of(group::model, {.name = "cross_cache", .type = value_type::choice, .metavar = "P",
                                  .help = "precision of the cross-attention cache: auto (default), float32, bfloat16, int8; auto: float32 up "
                                          "to 128 MiB of cache (base model: 1820 tokens), bfloat16 up to 16 GiB of float32 cache (233K "
                                          "tokens), int8 beyond",
                                  .choices = choices_of(models::cross_cache_precision_names), .default_text = "auto",
                                  .fill = [](targets& t, const json& v) {
                                      enum_of(models::cross_cache_precision_names, v.get<std::string>(), t.model->cross_cache);
                                  }}));
    t.push_back(of(group::model, {.name = "weights", .type = value_type::choice, .metavar = "P",
                                  .help = "storage of the decoder's per-step weights and LM head: float32 (default, exact), bfloat16, int8 "
                                          "(a scale per output channel); decoding reads them once per step, so fewer bytes per weight make "
                                          "each token faster",
                                  .choices = choices_of(models::weight_precision_names), .default_text = "float32",
                                  .fill = [](targets& t, const json& v) {
                                      enum_of(models::weight_precision_names, v.get<std::string>(), t.model->weights);
                                  }}));
    t.push_back(of(group::model, {.name = "cross_attention", .type = value_type::choice, .metavar = "F",
                                  .help = "cached (default): every layer's keys/values projected once and kept; folded: keep only the "
                                          "encoder states (24x less memory for the base model, in the --cross-cache precision) and fold the "
                                          "key/value projections into each step (heads times more arithmetic per step)",
                                  .choices = choices_of(models::cross_attention_form_names), .default_text = "cached",
                                  .fill = [](targets& t, const json& v) {
                                      enum_of(models::cross_attention_form_names, v.get<std::string>(), t.model->cross_attention);
                                  }}));
    t.push_back(of(group::model, {.name = "compute", .type = value_type::choice, .metavar = "P",
                                  .help = "arithmetic of the products over every input position (the encoder's linear layers and, in T5, "
                                          "BART and SLED, its self-attention; the cross-attention cache's projection; folded attention over "
                                          "the states): float32 (default, exact), bfloat16 (bfloat16 inputs, float32 sums: ~2x faster with "
                                          "AVX512-BF16 or AMX) or int8 (inputs quantized per row, weights per output channel, int32 sums, "
                                          "with AVX512-VNNI or AMX; cross-attention over int8 states (folded) or an int8 cache (cached, up "
                                          "to 4 rows per document): queries and probabilities quantized to 8 bits, int32 sums, with "
                                          "AVX512-VNNI; folded over bfloat16 states and the encoders' self-attention as under bfloat16; fp32 and "
                                          "bf16 name float32 and bfloat16 too)",
                                  .choices = choices_of(models::compute_precision_names), .default_text = "float32",
                                  .fill = [](targets& t, const json& v) {
                                      enum_of(models::compute_precision_names, v.get<std::string>(), t.model->encoder.compute);
                                  }}));
    t.push_back(of(group::model, {.name = "conv_mode", .type = value_type::choice, .metavar = "M",
                                  .help = "LOCOST: exact (default) or original-cuda: the FFT-size quirk of the original CUDA path, which the "
                                          "released checkpoints were trained with",
                                  .choices = choices_of(models::conv_mode_names), .default_text = "exact",
                                  .fill = [](targets& t, const json& v) {
                                      enum_of(models::conv_mode_names, v.get<std::string>(), t.model->encoder.conv);
                                  }}));
    t.push_back(of(group::model, {.name = "global_tokens", .type = value_type::positions, .metavar = "P,Q,...",
                                  .help = "LED: positions with global attention in every row (default 0: the first token; an empty value: none)",
                                  .default_text = "0",
                                  .fill = [](targets& t, const json& v) { t.model->encoder.global_tokens = ids_of(v); }}));
    // Read by the front ends where they make the rows (cli::cut_rows), not by the model.
    t.push_back(of(group::model, {.name = "max_input_tokens", .type = value_type::integer, .metavar = "N",
                                  .help = "read at most N tokens of each input: a longer one is cut to its first N, its closing </s> kept "
                                          "(transformers' truncation=True; a question in front counts); default: the whole input",
                                  .lo = 1, .hi = M}));
    const char* sled_section = "SLED (any checkpoint; a SLED config.json sets the first two itself):";
    t.push_back(of(group::model, {.name = "sled_context", .type = value_type::integer, .metavar = "C",
                                  .help = "encode the input in chunks of C tokens (SLED), keeping each chunk's middle", .lo = 1, .hi = M,
                                  .section = sled_section, .fill = [](targets& t, const json& v) {
                                      if (!t.model->sled) t.model->sled = models::sled_options{};
                                      t.model->sled->context_size = v.get<index_t>();
                                  }}));
    t.push_back(of(group::model, {.name = "sled_window_fraction", .type = value_type::real, .metavar = "F",
                                  .help = "the kept share of each chunk, in (0, 1] (default 0.5)", .lo = -1e9, .hi = 1e9, .default_text = "0.5",
                                  .section = sled_section, .needs_sled = true,
                                  .fill = [](targets& t, const json& v) { t.model->sled->window_fraction = v.get<double>(); }}));
    t.push_back(of(group::model, {.name = "prefix_length", .type = value_type::integer, .metavar = "P",
                                  .help = "the first P ids of every row are a prefix (a question): prepended to every chunk and encoded "
                                          "alone first (default 0)",
                                  .lo = 0, .hi = M, .default_text = "0", .section = sled_section, .needs_sled = true,
                                  .fill = [](targets& t, const json& v) { t.model->sled->prefix_length = v.get<index_t>(); }}));
    t.push_back(of(group::model, {.name = "no_encode_prefix", .type = value_type::flag,
                                  .help = "do not encode the prefix alone (the decoder then sees no prefix states)", .section = sled_section,
                                  .needs_sled = true, .fill = [](targets& t, const json& v) {
                                      if (v.get<bool>()) t.model->sled->encode_prefix = false;
                                  }}));
    // ---- generation ----
    t.push_back(gen({.name = "generation_config", .type = value_type::text, .metavar = "FILE",
                     .help = "the defaults from FILE instead (generation_config_for_summarization.json)"}));
    t.push_back(gen({.name = "task", .type = value_type::text, .metavar = "NAME",
                     .help = "config.json's task_specific_params[NAME] over the defaults, as a transformers pipeline for that task applies "
                             "them; summarize also puts the task's \"prefix\" (else config.json's \"prefix\", which summarize always "
                             "applies) before the text"}));
    // The generation settings, in the order --dry-run lists them. Lengths count the decoder start
    // token, as transformers' do.
    t.push_back(gen({.name = "max_length", .type = value_type::integer, .metavar = "N",
                     .help = "total length incl. the start token (if --max-new-tokens is unset)", .lo = 2, .hi = M, .default_text = "20",
                     // (max_new_tokens, filled after it when given, wins over it)
                     .fill = [](targets& t, const json& v) {
                         t.generation->max_length = v.get<index_t>();
                         t.generation->max_new_tokens.reset();
                     },
                     .show = [](const targets& t) { return std::to_string(t.generation->max_length); }}));
    t.push_back(gen({.name = "max_new_tokens", .type = value_type::integer, .metavar = "N",
                     .help = "tokens to generate at most (default: max_length 20 in all)", .lo = 1, .hi = M,
                     .fill = [](targets& t, const json& v) { t.generation->max_new_tokens = v.get<index_t>(); },
                     .show = [](const targets& t) { return opt_text(t.generation->max_new_tokens, "unset"); }}));
    t.push_back(gen({.name = "min_length", .type = value_type::integer, .metavar = "N",
                     .help = "eos is masked while the length (incl. start) is below N", .lo = 0, .hi = M, .default_text = "0",
                     .fill = [](targets& t, const json& v) { t.generation->min_length = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->min_length); }}));
    t.push_back(gen({.name = "min_new_tokens", .type = value_type::integer, .metavar = "N",
                     .help = "eos is masked until N tokens are generated", .lo = 0, .hi = M,
                     .fill = [](targets& t, const json& v) { t.generation->min_new_tokens = v.get<index_t>(); },
                     .show = [](const targets& t) { return opt_text(t.generation->min_new_tokens, "unset"); }}));
    t.push_back(gen({.name = "num_beams", .type = value_type::integer, .metavar = "K",
                     .help = "beam search with K beams (1: greedy or sampling)", .lo = 1, .hi = M, .default_text = "1",
                     .fill = [](targets& t, const json& v) { t.generation->num_beams = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->num_beams); }}));
    t.push_back(gen({.name = "length_penalty", .type = value_type::real, .metavar = "X",
                     .help = "beam score = sum log p / length^X (default 1.0)", .lo = -1e9, .hi = 1e9, .default_text = "1.0",
                     .fill = [](targets& t, const json& v) { t.generation->length_penalty = v.get<double>(); },
                     .show = [](const targets& t) { return number_text(t.generation->length_penalty); }}));
    t.push_back(gen({.name = "early_stopping", .type = value_type::choice, .metavar = "V",
                     .help = "true, false (default) or never", .choices = choices_of(io::early_stopping_mode_names), .default_text = "false",
                     .fill = [](targets& t, const json& v) {
                         enum_of(io::early_stopping_mode_names, v.get<std::string>(), t.generation->early_stopping);
                     },
                     .show = [](const targets& t) { return std::string(name_of(io::early_stopping_mode_names, t.generation->early_stopping)); }}));
    t.push_back(gen({.name = "no_repeat_ngram_size", .type = value_type::integer, .metavar = "N",
                     .help = "no n-gram of size N twice in the output", .lo = 0, .hi = M, .default_text = "0",
                     .fill = [](targets& t, const json& v) { t.generation->no_repeat_ngram_size = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->no_repeat_ngram_size); }}));
    t.push_back(gen({.name = "encoder_no_repeat_ngram_size", .type = value_type::integer, .metavar = "N",
                     .help = "no n-gram of size N of the input in the output", .lo = 0, .hi = M, .default_text = "0",
                     .fill = [](targets& t, const json& v) { t.generation->encoder_no_repeat_ngram_size = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->encoder_no_repeat_ngram_size); }}));
    t.push_back(gen({.name = "repetition_penalty", .type = value_type::real, .metavar = "X",
                     .help = "divide (multiply if negative) scores of tokens already generated", .lo = 1e-9, .hi = 1e9, .default_text = "1.0",
                     .fill = [](targets& t, const json& v) { t.generation->repetition_penalty = v.get<double>(); },
                     .show = [](const targets& t) { return number_text(t.generation->repetition_penalty); }}));
    t.push_back(gen({.name = "do_sample", .type = value_type::flag, .help = "sample instead of greedy",
                     .fill = [](targets& t, const json& v) { t.generation->do_sample = v.get<bool>(); },
                     .show = [](const targets& t) { return std::string(t.generation->do_sample ? "true" : "false"); }}));
    t.push_back(gen({.name = "temperature", .type = value_type::real, .metavar = "X", .help = "sampling: divide the scores by X (default 1.0)",
                     .lo = 1e-9, .hi = 1e9, .default_text = "1.0",
                     .fill = [](targets& t, const json& v) { t.generation->temperature = v.get<double>(); },
                     .show = [](const targets& t) { return number_text(t.generation->temperature); }}));
    t.push_back(gen({.name = "top_k", .type = value_type::integer, .metavar = "N", .help = "sampling: keep the N best tokens (default 50; 0: all)",
                     .lo = 0, .hi = M, .default_text = "50",
                     .fill = [](targets& t, const json& v) { t.generation->top_k = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->top_k); }}));
    t.push_back(gen({.name = "top_p", .type = value_type::real, .metavar = "X",
                     .help = "sampling: keep the most likely tokens whose probabilities sum to X (default 1.0)", .lo = 0.0, .hi = 1.0,
                     .default_text = "1.0",
                     .fill = [](targets& t, const json& v) { t.generation->top_p = v.get<double>(); },
                     .show = [](const targets& t) { return number_text(t.generation->top_p); }}));
    t.push_back(gen({.name = "num_return_sequences", .type = value_type::integer, .metavar = "N",
                     .help = "sequences per input (<= num-beams; or samples with --do-sample)", .lo = 1, .hi = M, .default_text = "1",
                     .fill = [](targets& t, const json& v) { t.generation->num_return_sequences = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->num_return_sequences); }}));
    t.push_back(gen({.name = "bad_words_ids", .type = value_type::id_lists, .metavar = "JSON",
                     .help = "e.g. [[5],[7,8]]: token sequences never generated",
                     .fill = [](targets& t, const json& v) { t.generation->bad_words_ids = v.get<std::vector<std::vector<index_t>>>(); },
                     .show = [](const targets& t) {
                         return t.generation->bad_words_ids.empty() ? std::string("none") : json(t.generation->bad_words_ids).dump();
                     }}));
    t.push_back(gen({.name = "suppress_tokens", .type = value_type::id_list, .metavar = "JSON",
                     .help = "e.g. [5,7]: ids never generated ([] clears the checkpoint's)",
                     .fill = [](targets& t, const json& v) { t.generation->suppress_tokens = ids_of(v); },
                     .show = [](const targets& t) { return ids_text(t.generation->suppress_tokens); }}));
    t.push_back(gen({.name = "begin_suppress_tokens", .type = value_type::id_list, .metavar = "JSON",
                     .help = "ids not generated at the first position (after a forced BOS)",
                     .fill = [](targets& t, const json& v) { t.generation->begin_suppress_tokens = ids_of(v); },
                     .show = [](const targets& t) { return ids_text(t.generation->begin_suppress_tokens); }}));
    t.push_back(gen({.name = "forced_bos_token_id", .type = value_type::integer, .metavar = "ID", .help = "first generated token", .lo = 0,
                     .hi = M, .fill = [](targets& t, const json& v) { t.generation->forced_bos_token_id = v.get<index_t>(); },
                     .show = [](const targets& t) { return opt_text(t.generation->forced_bos_token_id, "none"); }}));
    t.push_back(gen({.name = "forced_eos_token_id", .type = value_type::id_or_ids, .metavar = "ID",
                     .help = "token forced at the last position (an id or a JSON list)",
                     .fill = [](targets& t, const json& v) { t.generation->forced_eos_token_id = ids_of(v); },
                     .show = [](const targets& t) { return ids_text(t.generation->forced_eos_token_id); }}));
    // Their defaults come from config.json (default_generation_options).
    t.push_back(gen({.name = "decoder_start_token_id", .type = value_type::integer, .metavar = "ID",
                     .help = "the decoder's first input (default: config.json's)", .lo = 0, .hi = M,
                     .fill = [](targets& t, const json& v) { t.generation->decoder_start_token_id = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->start_token()); }, .default_source = "config.json"}));
    t.push_back(gen({.name = "eos_token_id", .type = value_type::id_or_ids, .metavar = "ID",
                     .help = "the token (or a JSON list of tokens) that ends a sequence (default: config.json's)",
                     .fill = [](targets& t, const json& v) { t.generation->eos_token_id = ids_of(v); },
                     .show = [](const targets& t) { return ids_text(t.generation->eos_token_id); }, .default_source = "config.json"}));
    t.push_back(gen({.name = "pad_token_id", .type = value_type::integer, .metavar = "ID",
                     .help = "the token that pads finished sequences (default: config.json's)", .lo = 0, .hi = M,
                     .fill = [](targets& t, const json& v) { t.generation->pad_token_id = v.get<index_t>(); },
                     .show = [](const targets& t) { return std::to_string(t.generation->pad_token()); }, .default_source = "config.json"}));
    // Not listed among the settings.
    t.push_back(gen({.name = "seed", .type = value_type::integer, .metavar = "S",
                     .help = "sampling seed (default 0): the same seed gives the same tokens", .lo = 0, .hi = 1.8446744073709552e19,
                     .default_text = "0", .fill = [](targets& t, const json& v) { t.generation->seed = v.get<std::uint64_t>(); }}));
    t.push_back(gen({.name = "beam_convention", .type = value_type::choice, .metavar = "V",
                     .help = "transformers-4.27 or transformers-5: how beam search measures and finishes hypotheses (default: the "
                             "family's users' version: LOCOST 4.27, the version its code pins; T5 and SLED 5)",
                     .choices = choices_of(generation::beam_convention_names),
                     .fill = [](targets& t, const json& v) {
                         enum_of(generation::beam_convention_names, v.get<std::string>(), t.generation->beam_convention);
                     }}));
    return t;
    // clang-format on
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail

// The table, built once.
inline const std::vector<grouped_record>& table() {
    static const std::vector<grouped_record> t = detail::build_table();
    return t;
}

inline const grouped_record* find(std::string_view name) {
    for (const auto& r : table())
        if (r.name == name) return &r;
    return nullptr;
}

// The records of some groups, in table order.
inline std::vector<const record*> records_of(std::initializer_list<group> groups) {
    std::vector<const record*> out;
    for (const auto& r : table())
        if (std::find(groups.begin(), groups.end(), r.group) != groups.end()) out.push_back(&r);
    return out;
}

// The tool's names of a group's options (--max-new-tokens as "max-new-tokens"), split into those
// that take a value and flags.
inline std::set<std::string> tool_names(std::initializer_list<group> groups, bool flags) {
    std::set<std::string> out;
    for (const record* r : records_of(groups))
        if ((r->type == value_type::flag) == flags) out.insert(r->flag_name().substr(2));
    return out;
}

// --help lines: "  --name METAVAR" padded to `column`, then the help wrapped at 104 columns (a
// name too long for the column keeps two spaces before its help), under each record's section
// heading.
inline std::string help_text_of(const std::vector<const record*>& records, std::size_t column = 21) {
    std::string out, section;
    for (const record* r : records) {
        if (r->help.empty()) continue;
        if (r->section != section) {
            section = std::string(r->section);
            if (!section.empty()) out += section + "\n";
        }
        std::string head = "  " + r->flag_name() + (r->metavar.empty() ? "" : " " + std::string(r->metavar));
        head += head.size() + 1 < column ? std::string(column - head.size(), ' ') : std::string("  ");
        std::string line = head;
        std::size_t at = 0;
        const std::string help(r->help);
        while (at < help.size()) {
            std::size_t end = help.find(' ', at);
            if (end == std::string::npos) end = help.size();
            const std::string word = help.substr(at, end - at);
            if (line.size() + word.size() > 104 && line.size() > column) {
                while (!line.empty() && line.back() == ' ') line.pop_back();
                out += line + "\n";
                line = std::string(column, ' ');
            }
            line += word + (end < help.size() ? " " : "");
            at = end + 1;
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}
// A group's --help lines, in table order.
inline std::string help_text(std::initializer_list<group> groups, std::size_t column = 21) {
    return help_text_of(records_of(groups), column);
}

}  // namespace locost::options
