// locost chunks: SLED's window plan for a document length, as JSON (absolute document positions).
#pragma once
#include <cstdio>

namespace locost::cli {

inline int run_chunks(const args& a) {
    constexpr index_t M = io::max_config_dim;
    const index_t n = a.integer<index_t>("length", 0, 1, M);
    const index_t c = a.integer<index_t>("context", 0, 1, M);
    const double f = a.real("window-fraction", 0.5, -1e9, 1e9);
    const index_t p = a.integer<index_t>("prefix-length", 0, 0, M);
    a.required("length");
    a.required("context");
    a.required("window-fraction");
    models::sled_options o;
    o.context_size = c;
    o.window_fraction = f;
    o.prefix_length = p;
    models::check_sled_options(o, std::nullopt, "chunks");
    // With a prefix, the length counts the prefix too (as the ids of a row do); the plan covers
    // the document after it.
    if (n - p < 1)
        throw error("cli.bad_value",
                    "chunks: option '--length' is " + std::to_string(n) + ", leaving no document after the prefix of " + std::to_string(p) +
                        " tokens");
    // The plan is printed whole: a length that makes it larger than a million chunks (~100 MB of
    // JSON) is refused before any is made.
    constexpr index_t max_chunks = 1000000;
    if (const index_t k = models::sled_window_count(n - p, c, f); k > max_chunks)
        throw error("cli.bad_value",
                    "chunks: option '--length' " + std::to_string(n) + " makes " + std::to_string(k) + " chunks of " + std::to_string(c) +
                        " tokens, more than the " + std::to_string(max_chunks) + " this command prints");
    nlohmann::ordered_json plan = nlohmann::ordered_json::array();  // keys in the documented order
    for (const auto& w : models::sled_windows(n - p, c, f))
        plan.push_back({{"start", w.start}, {"end", w.end}, {"effective_start", w.keep_start}, {"effective_end", w.keep_end}});
    std::printf("%s\n", plan.dump().c_str());
    return 0;
}

}  // namespace locost::cli
