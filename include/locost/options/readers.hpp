// The options a call was given (options/given.hpp), turned into the settings they fill: the
// model's run-time options over the checkpoint's SLED config, and the generation options over the
// checkpoint's defaults. The tool, the Python module and the server call these, so that a
// default, a check and an error are the same wherever the options came from.
#pragma once
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../generation/options.hpp"
#include "../models/registry.hpp"
#include "given.hpp"

namespace locost::options {

// The model's run-time options: the checkpoint's SLED config.json (if any), with the given
// options on top. Errors: cli.missing_option (a SLED option without SLED; the front end's id
// elsewhere). --threads is the caller's to apply (it sets the thread pool).
inline models::model_options read_model_options(const given& a, const io::checkpoint& ck) {
    models::model_options o;
    o.sled = models::read_sled_options(ck);
    const bool sled = o.sled.has_value() || a.has("sled_context");
    for (const record* r : records_of({group::model}))
        if (r->needs_sled && (r->type == value_type::flag ? a.flag(std::string(r->name)) : a.has(std::string(r->name))) && !sled)
            throw error(a.style() == spelling::flag ? "cli.missing_option" : a.bad_value_id(),
                        a.command() + ": " + a.named(std::string(r->name)) + " applies to SLED: give '" + a.spelled("sled_context") +
                            (a.style() == spelling::flag ? " C" : "") + "' too (or use a SLED checkpoint)");
    targets t{&o, nullptr};
    for (const record* r : records_of({group::model}))
        if (r->fill && a.has(std::string(r->name))) r->fill(t, a.value(std::string(r->name)));
    return o;
}

// The checkpoint's generation defaults (`checkpoint`: generation_config.json or config.json's
// fields, after --task), the family's beam convention, and every given generation option on top.
// Errors: the front end's bad-value id when a given minimum exceeds a given maximum;
// generate.invalid_option from validation.
inline generation::generation_options read_generation_options(const given& a, const models::any_config& family_cfg,
                                                              const std::optional<io::generation_config>& checkpoint) {
    const models::model_config& cfg = models::common(family_cfg);
    auto o = generation::default_generation_options(cfg, checkpoint);
    // Beam search as the family's users run it: LOCOST's code pins transformers 4.27.1; T5 and
    // SLED checkpoints are run with current transformers.
    o.beam_convention = models::traits(family_cfg).beam_convention;
    targets t{nullptr, &o};
    for (const record* r : records_of({group::generation}))
        if (r->fill && a.has(std::string(r->name))) r->fill(t, a.value(std::string(r->name)));
    // Options that contradict each other are an error, not a run that silently obeys one of them.
    // Only the given minimum counts: one from the checkpoint's file (bart-large-cnn's min_length
    // 56) under a smaller given maximum stops at the maximum, as transformers does.
    const bool min_given = a.has("min_new_tokens") || a.has("min_length"), max_given = a.has("max_new_tokens") || a.has("max_length");
    if (min_given && max_given) {
        const index_t at_most = o.total_length() - 1,
                      at_least =
                          std::max(a.has("min_new_tokens") ? o.min_new_tokens.value_or(0) : 0, a.has("min_length") ? o.min_length - 1 : 0);
        if (at_least > at_most)
            throw error(a.bad_value_id(),
                        a.command() + ": the minimum of " + std::to_string(at_least) + " new tokens (" +
                            a.spelled(a.has("min_new_tokens") ? "min_new_tokens" : "min_length") + ") exceeds the maximum of " +
                            std::to_string(at_most) + " (" + a.spelled(a.has("max_new_tokens") ? "max_new_tokens" : "max_length") + ")");
    }
    generation::validate(o, cfg);
    return o;
}

// The generation settings in force, with where each came from: an option given, the task's
// parameters, the defaults' file (`file`: generation_config.json, config.json, or the
// --generation-config file) when it set the value (`in_file`), else the record's default source.
struct setting {
    std::string name, value, source;
};
inline std::vector<setting> generation_settings(const given& a, const generation::generation_options& go, const std::string& file,
                                                const std::set<std::string>& in_file, const std::set<std::string>& from_task) {
    targets t{nullptr, const_cast<generation::generation_options*>(&go)};
    std::vector<setting> out;
    for (const record* r : records_of({group::generation})) {
        if (!r->show) continue;
        const std::string name(r->name);
        std::string from(r->default_source);
        if (a.has(name)) from = a.spelled(name);
        else if (from_task.count(name)) from = a.has("task") ? a.spelled("task") : std::string("task_specific_params");
        else if (in_file.count(name)) from = file;
        out.push_back({name, r->show(t), from});
    }
    return out;
}

}  // namespace locost::options
