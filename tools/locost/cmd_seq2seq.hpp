// locost score, generate and summarize: the encoder-decoder commands.
#pragma once
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "budget.hpp"
#include "gen_flags.hpp"
#include "input.hpp"
#include "progress.hpp"

namespace locost::cli {

inline std::string ids_json(const std::vector<std::int64_t>& ids) { return nlohmann::json(ids).dump(); }

// Teacher-forced logits on the host, the model run on Backend.
template <class Backend>
tensor<float> score_on(const io::checkpoint& ck, const models::model_options& opts, const batch_input& enc,
                       const std::vector<std::int64_t>& dec_ids, index_t T, const models::progress_callback& progress) {
    auto model = [&] {
        const phase_scope phase("loading the weights");
        return models::load_model<float, Backend>(ck, opts);
    }();
    const phase_scope phase("scoring");
    return model.score(enc.ids.data(), enc.mask.data(), enc.B, enc.L, dec_ids.data(), T, progress);
}
// The same on the GPU (cuda_device.cpp; no_cuda.cpp reports device.no_cuda_build).
tensor<float> score_on_cuda(const io::checkpoint& ck, const models::model_options& opts, const batch_input& enc,
                            const std::vector<std::int64_t>& dec_ids, index_t T, const models::progress_callback& progress);

inline int run_score(const args& a) {
    const std::string out = checked_output(a, "score");
    const auto ck = open_checkpoint(a);
    const auto opts = read_model_options(a, "score", ck);
    const auto cfg_ptr = models::read_config(ck);
    const auto& cfg = models::common(*cfg_ptr);
    models::require_matching_weights(ck, *cfg_ptr);
    const auto enc = make_cut_batch(a, read_ids_file(a.required("ids"), cfg.vocab_size).rows, cfg, opts.sled ? opts.sled->prefix_length : 0,
                                    "score: " + a.required("ids"));
    const std::string dec_path = a.required("decoder-ids");
    const auto dec = read_ids_file(dec_path, cfg.vocab_size, "--decoder-ids");
    const index_t T = static_cast<index_t>(dec.rows[0].size());
    for (std::size_t r = 0; r < dec.rows.size(); ++r)
        if (static_cast<index_t>(dec.rows[r].size()) != T)
            throw error("cli.bad_value",
                        "score: " + dec_path + ": row " + std::to_string(r) + " has " + std::to_string(dec.rows[r].size()) +
                            " decoder ids, row 0 has " + std::to_string(T) + " (rows must have equal lengths)");
    if (static_cast<index_t>(dec.rows.size()) != enc.B)
        throw error("cli.bad_value",
                    "score: " + dec_path + " has " + std::to_string(dec.rows.size()) + " rows of decoder ids for " + std::to_string(enc.B) +
                        " rows of --ids");
    std::vector<std::int64_t> dec_ids;
    for (const auto& r : dec.rows) dec_ids.insert(dec_ids.end(), r.begin(), r.end());
    auto request = batch_request(enc);
    request.decoder = request.teacher_forcing = true;
    request.decoder_positions = T;
    request.positions_driver = "the length of the decoder ids (" + std::to_string(T) + ")";
    if (check_memory(a, "score", ck, *cfg_ptr, opts, request)) return 0;
    progress_display progress(a.flag("progress"), "score");
    const auto logits = read_device(a, "score") == device_kind::cuda ? score_on_cuda(ck, opts, enc, dec_ids, T, encode_progress(progress))
                                                                     : score_on<cpu>(ck, opts, enc, dec_ids, T, encode_progress(progress));
    progress.finish();
    io::safetensors_writer w;
    w.add_borrowed("logits", logits.v());
    w.metadata["locost_command"] = "score";
    w.metadata["model"] = ck.dir();
    w.write(out);
    return 0;
}

// Runs generation for `in` and reports timing; shared by generate and summarize.
struct generation_run {
    generation::generation_result result;
    double encode_s = 0, decode_s = 0;
    std::string cache;
};

template <class Backend>
generation_run run_generation(const args& a, models::any_model<float, Backend>& model, const generation::generation_options& go,
                              const batch_input& in, const char* what) {
    progress_display progress(a.flag("progress"), what);
    generation_run run;
    const auto encoded = in.encode_each ? models::encode_each(model, in.rows, encode_progress(progress))
                                        : model.encode(in.ids.data(), in.mask.data(), in.B, in.L, encode_progress(progress));
    run.encode_s = progress.seconds();
    char cache[96];
    const bool folded = !encoded.docs.empty() && encoded.docs.front().folded;  // the cache is the encoder states
    std::snprintf(cache, sizeof cache, "%.2f GB %s%s", static_cast<double>(encoded.bytes()) / 1e9,
                  models::precision_name(encoded.precision), folded ? " folded" : "");
    run.cache = cache;
    const index_t total = go.total_length() - 1;
    run.result = generation::generate(model, encoded, in.rows, go, [&](const generation::step_event& e) {
        progress.update(static_cast<double>(e.step + 1), static_cast<double>(total),
                        "decoding step " + std::to_string(e.step + 1) + "/" + std::to_string(total));
        return true;
    });
    progress.finish();
    run.decode_s = progress.seconds() - run.encode_s;
    return run;
}

// A model loaded once on its device, generating for one batch per call (summarize over a corpus
// calls it per document).
using generator = std::function<generation_run(const batch_input& in, const char* what)>;

template <class Backend>
generator make_generator(const args& a, const io::checkpoint& ck, const models::model_options& mo,
                         const generation::generation_options& go) {
    const phase_scope loading("loading the weights");
    auto model = std::make_shared<models::any_model<float, Backend>>(models::load_model<float, Backend>(ck, mo));
    return [model, &a, go](const batch_input& in, const char* what) {
        const phase_scope phase("generating");
        return run_generation(a, *model, go, in, what);
    };
}
// The same on the GPU (cuda_device.cpp; no_cuda.cpp reports device.no_cuda_build).
generator make_generator_cuda(const args& a, const io::checkpoint& ck, const models::model_options& mo,
                              const generation::generation_options& go);

// On the device --device names.
inline generator make_generator(const args& a, const io::checkpoint& ck, const models::model_options& mo,
                                const generation::generation_options& go, const std::string& command) {
    return read_device(a, command) == device_kind::cuda ? make_generator_cuda(a, ck, mo, go) : make_generator<cpu>(a, ck, mo, go);
}

inline generation_run run_generation(const args& a, const io::checkpoint& ck, const models::model_options& mo,
                                     const generation::generation_options& go, const batch_input& in, const char* what) {
    return make_generator(a, ck, mo, go, what)(in, what);
}

// The closing line of generate and summarize on stderr (bench/architectures/compare_architectures reads it):
// "WHAT: L input tokens; encode S s (R tokens/s, incl. cross-attention cache G GB P); decode K
// steps, D ms/token; peak memory M GB; float32 GEMM PROVIDER (KERNEL, ISA)" (the last part on the
// CPU only: which library the speed came from, see inspect --system).
inline void print_run_summary(const args& a, const char* what, index_t L, const generation_run& run) {
    const double steps = static_cast<double>(std::max<index_t>(run.result.steps, 1));
    std::fprintf(stderr,
                 "%s: %lld input tokens; encode %.1f s (%.0f tokens/s, incl. cross-attention cache %s); "
                 "decode %lld steps, %.1f ms/token; peak memory %.2f GB%s\n",
                 what, static_cast<long long>(L), run.encode_s, static_cast<double>(L) / std::max(run.encode_s, 1e-9), run.cache.c_str(),
                 static_cast<long long>(run.result.steps), 1000.0 * run.decode_s / steps, static_cast<double>(peak_rss_bytes()) / 1e9,
                 gemm_note(a, what).c_str());
}

inline int run_generate(const args& a) {
    const std::string out = a.has("out") ? checked_output(a, "generate") : std::string();
    const auto ck = open_checkpoint(a);
    const auto mo = read_model_options(a, "generate", ck);
    const auto cfg_ptr = models::read_config(ck);
    const auto& cfg = models::common(*cfg_ptr);
    models::require_matching_weights(ck, *cfg_ptr);
    const auto defaults = read_generation_defaults(a, ck, "generate");
    const auto go = read_generation_options(a, "generate", *cfg_ptr, defaults.config);
    const auto in = make_cut_batch(a, read_ids_file(a.required("ids"), cfg.vocab_size).rows, cfg, mo.sled ? mo.sled->prefix_length : 0,
                                   "generate: " + a.required("ids"));
    auto request = batch_request(in);
    add_generation(request, a, go, defaults.source);
    if (check_memory(a, "generate", ck, *cfg_ptr, mo, request)) {
        std::fputs(generation_settings_text(a, go, defaults.file, defaults.given, defaults.from_task).c_str(), stdout);
        return 0;
    }
    const auto run = run_generation(a, ck, mo, go, in, "generate");
    for (const auto& s : run.result.sequences) std::printf("%s\n", ids_json(s).c_str());
    std::fflush(stdout);
    print_run_summary(a, "generate", in.L, run);
    if (!out.empty()) io::write_file_atomically(out, nlohmann::json(run.result.sequences).dump() + "\n");
    return 0;
}

int run_summarize_corpus(const args& a);

// What summarize needs before its first document, for one document or a corpus: the checkpoint,
// its options, its config (checked against the weights), the generation options, the tokenizer,
// and the --prefix ids (a question tokenized with the document's conventions; through SLED it is
// prepended to every chunk, so SLED is told its length).
struct summarize_setup {
    io::checkpoint ck;
    models::model_options mo;
    std::shared_ptr<const models::any_config> cfg;
    generation::generation_options go;
    text::tokenizer tok;
    std::vector<std::int64_t> prefix;
    generation_defaults defaults;  // where the generation defaults came from; the text prefix (config.json's or the task's "prefix")
};
inline summarize_setup prepare_summarize(const args& a, const std::string& command = "summarize") {
    auto ck = open_checkpoint(a);
    auto mo = read_model_options(a, command, ck);
    auto cfg = models::read_config(ck);
    models::require_matching_weights(ck, *cfg);
    const auto defaults = read_generation_defaults(a, ck, command, "summarization");
    auto go = read_generation_options(a, command, *cfg, defaults.config);
    auto tok = open_tokenizer(a, ck, command);
    std::vector<std::int64_t> prefix;
    if (a.has("prefix")) {
        if (a.has("prefix-length")) throw error("cli.bad_value", command + ": give either '--prefix' or '--prefix-length', not both");
        prefix =
            text_ids(a.required("prefix"), models::common(*cfg).vocab_size, tok, host_memory_budget(a, command), command + ": --prefix");
        if (mo.sled) mo.sled->prefix_length = static_cast<index_t>(prefix.size());
    }
    return {std::move(ck), std::move(mo), std::move(cfg), std::move(go), std::move(tok), std::move(prefix), defaults};
}

inline int run_summarize(const args& a) {
    if (a.has("inputs")) return run_summarize_corpus(a);
    if (!a.has("input"))
        throw error("cli.missing_option", "summarize: option '--input' or '--inputs' is required (see 'locost summarize --help')");
    for (const char* f : {"out", "shard", "resume", "max-batch-tokens"})
        if (a.has(f))
            throw error("cli.missing_option",
                        std::string("summarize: option '--") + f + "' belongs to corpus jobs: give '--inputs LIST' too");
    const auto setup = prepare_summarize(a);
    const auto& [ck, mo, cfg_ptr, go, tok, prefix, defaults] = setup;
    const auto& cfg = models::common(*cfg_ptr);
    std::vector<std::int64_t> ids = read_text_ids(a, "summarize", cfg.vocab_size, tok, defaults.prefix);
    ids.insert(ids.begin(), prefix.begin(), prefix.end());
    const auto in = make_cut_batch(a, {ids}, cfg, static_cast<index_t>(prefix.size()), "summarize");
    auto request = batch_request(in);
    add_generation(request, a, go, defaults.source);
    if (check_memory(a, "summarize", ck, *cfg_ptr, mo, request)) {
        std::fputs(generation_settings_text(a, go, defaults.file, defaults.given, defaults.from_task).c_str(), stdout);
        return 0;
    }
    const auto run = run_generation(a, ck, mo, go, in, "summarize");
    int extra_total = 0;
    for (const auto& s : run.result.sequences) {
        std::vector<int> ids(s.begin(), s.end());
        int extra = 0;
        std::printf("%s\n", tok.decode(ids, static_cast<int>(cfg.vocab_size), &extra).c_str());
        extra_total += extra;
    }
    std::fflush(stdout);
    if (extra_total > 0)
        std::fprintf(stderr,
                     "summarize: %d generated ids lie beyond the tokenizer's %d pieces (extra/sentinel ids of the model's "
                     "%lld-entry vocabulary) and are skipped like other special tokens\n",
                     extra_total, tok.vocab_size(), static_cast<long long>(cfg.vocab_size));
    if (const auto note = default_length_note(a, "summarize", defaults.default_length(a), go, run.result.sequences); !note.empty())
        std::fprintf(stderr, "%s\n", note.c_str());
    print_run_summary(a, "summarize", in.L, run);
    return 0;
}

}  // namespace locost::cli
