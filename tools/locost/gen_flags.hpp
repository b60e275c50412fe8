// The tool's side of the option table (locost/options/table.hpp): the names of the model and
// generation options as commands declare them, their --help text, and the readers with the tool's
// own steps (the thread pool) added.
#pragma once
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"

namespace locost::cli {

inline std::set<std::string> joined(std::initializer_list<std::set<std::string>> sets) {
    std::set<std::string> out;
    for (const auto& s : sets) out.insert(s.begin(), s.end());
    return out;
}

// What every command that loads a model takes: the model group, --backbone, --cache-dir and --threads.
inline const std::set<std::string> model_valued =
    joined({options::tool_names({options::group::model}, false), {"backbone", "cache-dir", "threads"}});
inline const std::set<std::string> model_flags = options::tool_names({options::group::model}, true);
inline const std::set<std::string> generation_valued = options::tool_names({options::group::generation}, false);
inline const std::set<std::string> generation_flags = options::tool_names({options::group::generation}, true);

// --backbone, --cache-dir and --threads head the model options.
inline std::string model_help() {
    std::string out;
    for (const char* n : {"backbone", "cache_dir", "threads"}) {
        const auto* r = options::find(n);
        out += options::help_text_of({r});
    }
    return out + options::help_text({options::group::model});
}

inline std::string generation_help() {
    return "generation options (Hugging Face names; defaults: the checkpoint's generation_config.json, else the\n"
           "generation fields of its config.json, else Hugging Face's GenerationConfig defaults; lengths count the\n"
           "decoder start token):\n" +
        options::help_text({options::group::generation}, 31);
}

// The model's run-time options; SLED options over the checkpoint's SLED config.json (if any);
// the thread pool sized. Errors: cli.bad_value, cli.missing_option (a SLED option without SLED),
// sled.*.
inline models::model_options read_model_options(const args& a, const std::string& /*command*/, const io::checkpoint& ck) {
    auto o = options::read_model_options(a, ck);
    set_num_threads(a.integer<int>("threads", 0, 0, 1024));
    flush_denormals_unless_kept();  // in the pool of that size
    return o;
}

// The checkpoint's defaults with every option given applied on top. Errors: cli.bad_value, and
// generate.invalid_option from validation.
inline generation::generation_options read_generation_options(const args& a, const std::string& /*command*/,
                                                              const models::any_config& family_cfg,
                                                              const std::optional<io::generation_config>& ckpt) {
    return options::read_generation_options(a, family_cfg, ckpt);
}

// The generation settings in force, with where each came from: an option, the defaults' file
// (generation_config.json, config.json, --generation-config) or the --task's parameters, or
// transformers' default. --dry-run and inspect print them.
using generation_setting = options::setting;
using options::generation_settings;

// --dry-run's account: one line each, "generation NAME VALUE (SOURCE)".
inline std::string generation_settings_text(const args& a, const generation::generation_options& go, const std::string& source,
                                            const std::set<std::string>& given, const std::set<std::string>& from_task) {
    std::string out;
    for (const auto& s : generation_settings(a, go, source, given, from_task))
        out += "generation " + s.name + " " + s.value + " (" + s.source + ")\n";
    return out;
}

// What summarize says (once) when a summary stopped at transformers' bare default length
// (max_length 20, which neither the call nor the checkpoint set), as transformers warns: such a
// summary looks cut, and nothing else says why. Empty when no sequence stopped there.
inline std::string default_length_note(const args& a, const std::string& command, bool default_length,
                                       const generation::generation_options& go, const generation::token_rows& sequences) {
    if (!default_length) return {};
    bool cut = false;
    // A row reached the limit when its first end-of-sequence after the start token (BART's start
    // token is its end token) is missing or is the last position, where forced_eos_token_id puts
    // it. (A batch's rows are padded to the longest: an earlier end is the row's own.)
    for (const auto& s : sequences) {
        if (static_cast<index_t>(s.size()) < go.total_length()) continue;
        const auto end = std::find_if(s.begin() + 1, s.end(), [&](std::int64_t t) { return go.is_eos(t); });
        if (end == s.end() || end - s.begin() >= go.total_length() - 1) cut = true;
    }
    if (!cut) return {};
    return command + ": the summary stopped at " + std::to_string(go.total_length() - 1) +
        " tokens, transformers' default length (max_length 20), which neither the call nor the checkpoint sets; give " +
        a.spelled("max_new_tokens") + " for a longer one";
}

}  // namespace locost::cli
