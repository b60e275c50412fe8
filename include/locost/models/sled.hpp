// SLED — Ivgi, Shaham & Berant 2022, §3 and appendix A; docs/models.md §3: any short-context
// encoder reads a long document by sliding over it in overlapping chunks, keeping the middle of
// each chunk, and the decoder cross-attends over all kept states.
//
//   windows (document of n tokens, chunk c, kept fraction f):
//     m = ⌊c·(1 − f)/2⌋ (truncated), stride s = c − 2m
//     n ≤ c: one window [0, n) keeping all of it
//     else:  [0, c) keeps [0, c − m); then while the context end e < n:
//              e ← min(n, e + s);  start ← start + s if e < n else n − c
//              keep_start ← max(keep_start + s, keep_end);  keep_end ← min(n, keep_end + s) if e < n else n
//     so every token is kept exactly once, by a window where it has ≥ m tokens of context on
//     each side (except at the document's ends).
//   prefix (a question, the first p ids of every row): each chunk is prefix ⧺ document[start, end)
//     (p + c tokens), its prefix states are dropped; with encode_prefix the prefix is also
//     encoded alone and its p states come first. The cross-attention mask follows: the input's
//     mask over the output positions (prefix included only with encode_prefix).
//
// The plan is made over the batch's padded width (as the original does: it slices the padded
// tensors), so all rows share it; a chunk whose document part is all padding for a row is not
// encoded for that row (its states would be masked anyway) and nothing is handed over for it.
//
// Memory: chunks are encoded chunk_batch at a time and their kept states go straight to the
// sink (the decoder's cross-attention cache), so peak memory is the weights + the cache + one
// chunk batch's activations, whatever the number of chunks.
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../config/error.hpp"
#include "../core/tensor.hpp"
#include "../ops/copy.hpp"
#include "concepts.hpp"
#include "options.hpp"

namespace locost::models {

// One chunk of the plan, in document positions (prefix excluded): the chunk reads [start, end)
// and keeps the states of [keep_start, keep_end).
struct sled_window {
    index_t start = 0, end = 0, keep_start = 0, keep_end = 0;
    bool operator==(const sled_window&) const = default;
};

// The margin m = ⌊c·(1 − f)/2⌋, computed as the original does (in double, truncated).
inline index_t sled_margin(index_t context, double window_fraction) {
    return static_cast<index_t>(static_cast<double>(context) * (1.0 - window_fraction) / 2.0);
}

// Errors: sled.bad_context, sled.bad_window_fraction (messages name the flag/field `what`).
inline void check_sled_plan(index_t context, double window_fraction, const std::string& source) {
    if (context < 1)
        throw error("sled.bad_context", source + ": SLED context size is " + std::to_string(context) + ", expected at least 1 token");
    if (!(window_fraction > 0.0 && window_fraction <= 1.0)) {
        char b[64];
        std::snprintf(b, sizeof b, "%g", window_fraction);
        throw error("sled.bad_window_fraction",
                    source + ": SLED window fraction is " + std::string(b) +
                        ", expected a number in (0, 1] (the kept share of each chunk)");
    }
    // A fraction so small that the margins take the whole chunk (c even, 1 − f rounding to 1)
    // keeps nothing and the windows would never advance.
    if (context - 2 * sled_margin(context, window_fraction) < 1) {
        char b[64];
        std::snprintf(b, sizeof b, "%g", window_fraction);
        throw error("sled.bad_window_fraction",
                    source + ": SLED window fraction " + std::string(b) + " keeps no token of a chunk of " + std::to_string(context) +
                        " tokens (the windows would not advance); expected at least 1/" + std::to_string(context));
    }
}

// How many windows sled_windows(n, context, window_fraction) makes (n ≥ 1), without making them.
inline index_t sled_window_count(index_t n, index_t context, double window_fraction) {
    check_sled_plan(context, window_fraction, "sled");
    if (n <= context) return n > 0 ? 1 : 0;
    const index_t s = context - 2 * sled_margin(context, window_fraction);
    return 1 + (n - context + s - 1) / s;
}

// The window plan of a document of n tokens (n ≥ 1).
inline std::vector<sled_window> sled_windows(index_t n, index_t context, double window_fraction) {
    check_sled_plan(context, window_fraction, "sled");
    std::vector<sled_window> w;
    if (n <= 0) return w;
    if (n <= context) {
        w.push_back({0, n, 0, n});
        return w;
    }
    const index_t m = sled_margin(context, window_fraction), s = context - 2 * m;
    index_t start = 0, end = context, keep_start = 0, keep_end = context - m;
    w.push_back({start, end, keep_start, keep_end});
    while (end < n) {
        end = std::min(n, end + s);
        start = end < n ? start + s : n - context;
        keep_start = std::max(keep_start + s, keep_end);
        keep_end = end < n ? std::min(n, keep_end + s) : n;
        w.push_back({start, end, keep_start, keep_end});
    }
    return w;
}

// Checks SLED settings against the backbone. Errors: sled.bad_context, sled.bad_window_fraction,
// sled.bad_prefix, sled.context_too_long.
inline void check_sled_options(const sled_options& o, std::optional<index_t> backbone_max, const std::string& source) {
    check_sled_plan(o.context_size, o.window_fraction, source);
    if (o.prefix_length < 0)
        throw error("sled.bad_prefix",
                    source + ": SLED prefix length is " + std::to_string(o.prefix_length) + ", expected 0 or more tokens");
    if (o.prefix_length > o.context_size)
        throw error("sled.bad_prefix",
                    source + ": SLED prefix of " + std::to_string(o.prefix_length) + " tokens is longer than the context of " +
                        std::to_string(o.context_size) + " tokens");
    const index_t p = o.prepend_prefix ? o.prefix_length : 0;
    if (backbone_max && o.context_size + p > *backbone_max)
        throw error("sled.context_too_long",
                    source + ": SLED chunks of " + std::to_string(o.context_size) + " tokens" +
                        (p ? " + a prefix of " + std::to_string(p) : std::string()) + " exceed the " + std::to_string(*backbone_max) +
                        " positions the backbone encoder reads");
}

template <dense_encoder Encoder>
class sled {
public:
    using scalar = typename Encoder::scalar;
    using backend = typename Encoder::backend;

    // Errors: those of check_sled_options().
    sled(Encoder backbone, const sled_options& o, std::string source)
        : backbone_(std::move(backbone)), opt_(o), source_(std::move(source)) {
        check_sled_options(opt_, backbone_.max_context(), source_);
    }

    const sled_options& options() const noexcept { return opt_; }
    Encoder& backbone() noexcept { return backbone_; }
    // The prefix (a question) is a property of each request, not of the checkpoint: a caller that
    // keeps one model for many requests (the Python module) sets its length before each encode.
    // Errors: those of check_sled_options().
    void set_prefix_length(index_t n) {
        sled_options o = opt_;
        o.prefix_length = n;
        check_sled_options(o, backbone_.max_context(), source_);
        opt_ = o;
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const { return backbone_.d_model(); }
    index_t vocab_size() const { return backbone_.vocab_size(); }
    output_positions output_span(index_t L) const {
        const index_t p = prefix();
        return opt_.encode_prefix || p == 0 ? output_positions{0, L} : output_positions{p, L - p};
    }
    std::optional<index_t> max_context() const { return std::nullopt; }  // any length, chunk by chunk

    // ids (B, L): each row's first prefix_length ids are its prefix, the rest its document.
    // Error: sled.no_document (nothing after the prefix).
    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress,
                const state_sink<scalar>& sink) {
        const index_t p = prefix(), n = L - p, H = d_model();
        if (n < 1)
            throw error("sled.no_document",
                        source_ + ": the input has " + std::to_string(L) + " tokens, all of them the prefix of " + std::to_string(p) +
                            " (nothing to encode after it)");
        const std::vector<sled_window> plan = sled_windows(n, opt_.context_size, opt_.window_fraction);
        const index_t out0 = opt_.encode_prefix ? p : 0;  // output position of document position 0

        if (p > 0 && opt_.encode_prefix) {  // the prefix alone, its states first
            tensor<std::int64_t> pid({B, p});
            tensor<float> pm({B, p}, 1.0f);
            for (index_t b = 0; b < B; ++b)
                for (index_t j = 0; j < p; ++j) {
                    pid[b * p + j] = ids[b * L + j];
                    if (mask) pm[b * p + j] = mask[b * L + j];
                }
            auto h = backbone_.forward(pid.data(), mask ? pm.data() : nullptr, B, p, {});
            for (index_t b = 0; b < B; ++b) sink(b, 0, p, h.data() + b * p * H);
        }

        // (window, row) items in window-major order, so each row's positions arrive in order.
        struct item {
            index_t window, row;
        };
        std::vector<item> items;
        for (index_t w = 0; w < static_cast<index_t>(plan.size()); ++w)
            for (index_t b = 0; b < B; ++b)
                if (!mask || has_valid(mask + b * L + p, plan[static_cast<std::size_t>(w)])) items.push_back({w, b});

        const index_t width = p + (plan.front().end - plan.front().start);  // every window has the same width
        const index_t batch = opt_.chunk_batch > 0 ? opt_.chunk_batch : std::max<index_t>(1, 4096 / width);
        tensor<std::int64_t> cid({std::min<index_t>(batch, static_cast<index_t>(items.size())), width});
        tensor<float> cm(cid.shape());
        const index_t total = static_cast<index_t>(items.size());
        for (index_t i0 = 0; i0 < total; i0 += batch) {
            const index_t nb = std::min(batch, total - i0);
            bool all_valid = true;
            for (index_t i = 0; i < nb; ++i) {  // chunk = prefix ⧺ document[start, end)
                const item& it = items[static_cast<std::size_t>(i0 + i)];
                const sled_window& w = plan[static_cast<std::size_t>(it.window)];
                const std::int64_t* row = ids + it.row * L;
                const float* mrow = mask ? mask + it.row * L : nullptr;
                for (index_t j = 0; j < width; ++j) {
                    const index_t src = j < p ? j : p + w.start + (j - p);
                    cid[i * width + j] = row[src];
                    cm[i * width + j] = mrow ? mrow[src] : 1.0f;
                    all_valid = all_valid && cm[i * width + j] != 0.0f;
                }
            }
            auto h = backbone_.forward(cid.data(), all_valid ? nullptr : cm.data(), nb, width, {});
            for (index_t i = 0; i < nb; ++i) {
                const item& it = items[static_cast<std::size_t>(i0 + i)];
                const sled_window& w = plan[static_cast<std::size_t>(it.window)];
                sink(it.row, out0 + w.keep_start, w.keep_end - w.keep_start, h.data() + (i * width + p + w.keep_start - w.start) * H);
            }
            if (progress) progress({0, 0, 0, 0, false, i0 + nb, total});
        }
        // The backbone's scratch is not needed while decoding (on a device it would stay committed).
        backbone_.release_scratch();
    }

    // The merged output (B, output_span(L).length, H); positions no chunk handed over (padding
    // only) are zero.
    tensor<scalar, backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress) {
        const output_positions span = output_span(L);
        const index_t H = d_model();
        tensor<scalar, backend> out({B, span.length, H});
        ops::fill<backend>(out.data(), out.numel(), scalar(0));
        encode(ids, mask, B, L, progress, [&](index_t b, index_t pos, index_t n, const scalar* h) {
            transfer<backend>::copy(out.data() + (b * span.length + pos) * H, h, static_cast<std::size_t>(n * H));
        });
        return out;
    }

private:
    index_t prefix() const noexcept { return opt_.prepend_prefix ? opt_.prefix_length : 0; }
    static bool has_valid(const float* doc_mask, const sled_window& w) {
        for (index_t j = w.start; j < w.end; ++j)
            if (doc_mask[j] != 0.0f) return true;
        return false;
    }

    Encoder backbone_;
    sled_options opt_;
    std::string source_;
};

}  // namespace locost::models
