// The encoder every family runs, written once: an input, N blocks, a final step.
//
//     x = Input(ids)                        token embedding, and the family's positions and norm
//     for each block i:  x = Mixer_i(x)                attention or S4D over the whole batch
//                        x = FeedForward_i(x)          in tiles of tile_rows rows
//     h = Final(x)                          a norm, or nothing (BART's stack ends with its last layer)
//
// A family describes its encoder as a layout (models/<family>/encoder.hpp): which layers, and
// where their tensors live. The stack holds what every family shares: loading, the layer loop
// with progress and per-block observers, scratch sized once for all blocks, the encoder concept
// (models/concepts.hpp), and handing the states to a sink tile by tile. What every block reads for
// one input — the padding as a key bias, a position band, global tokens — is the mixer's
// `inputs`, which the Input prepares once per call while embedding.
//
// A layout (derived from encoder_layout, which names its types) provides:
//   input     static weights read(root, config); input(weights&&, config, encoder_options)
//             void embed(ids, mask, B, L, x, mixer::inputs&) const   ids, mask: the caller's host arrays
//             std::optional<index_t> max_context() const
//             [inputs make_inputs() const]: the inputs' per-model part, when they have one
//   mixer     index_t scratch_size(B, L) const;  void forward(x, B, L, inputs&, scratch) const
//             [void drop_cache()]: what it keeps between calls to go faster
//   feed_forward   layers::rms_feed_forward or layers::biased_feed_forward
//   final     static weights read(root, config); final(weights&&, config); void forward(x, rows) const
//   static read_mixer(root, config, i), read_feed_forward(root, config, i): block i's weights
//   static mixer make_mixer(mixer weights&&, config, i, encoder_options, const input&): built as
//             encoder_layout builds attention, unless the layout says otherwise
// Inputs that carry rows of their own through the blocks (Pegasus-X's global tokens) expose them
// as extra_rows() → {pointer, count}, and the feed-forward runs over them too.
//
// Loading reads each part and builds it before reading the next, so at most one layer's float32
// tensors wait beside the built model; record() runs the same reads against a recorder and builds
// nothing (layers/tensor_source.hpp).
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "../backend/transfer.hpp"
#include "../core/tensor.hpp"
#include "../layers/parameter.hpp"
#include "../layers/tensor_source.hpp"
#include "concepts.hpp"
#include "options.hpp"

namespace locost::models {

// Where a block observer is called: after a block's mixing sub-layer (attention or S4D) and after
// its feed-forward (the block's output, before the final step).
enum class block_stage { after_mixer, after_ff };
template <class Scalar>
using block_observer = std::function<void(index_t block, block_stage stage, view<const Scalar> hidden)>;

// The types a layout names, and the mixer built as the attention layers are: (weights, eps, heads,
// the precision of the products over every position).
template <class Scalar, class Backend, class Config, class Input, class Mixer, class FeedForward, class Final>
struct encoder_layout {
    static_assert(locost::scalar<Scalar>, "locost: Scalar must be float or double");
    using scalar = Scalar;
    using backend = Backend;
    using config = Config;
    using input = Input;
    using mixer = Mixer;
    using feed_forward = FeedForward;
    using final = Final;

    static Mixer make_mixer(typename Mixer::weights&& w, const Config& c, index_t, const encoder_options& o, const Input&) {
        return Mixer(w, c.layer_norm_epsilon, c.num_heads, large_products(o.compute));
    }
};

// A stack's closing norm (Norm: layers::rms_norm or layers::layer_norm), read where
// Where::at(root, config) says its family keeps it.
template <class Norm, class Where>
class stack_norm {
public:
    using weights = decltype(Norm::read(std::declval<const layers::tensor_source&>(), index_t{}));
    template <class Config>
    static weights read(const layers::tensor_source& root, const Config& c) {
        return Norm::read(Where::at(root, c), c.d_model);
    }
    stack_norm() = default;
    template <class Config>
    stack_norm(weights&& w, const Config& c) : norm_(w, c.layer_norm_epsilon) {}
    template <class Scalar>
    void forward(Scalar* x, index_t rows) const {
        norm_.forward(x, x, rows);
    }

private:
    Norm norm_;
};

// The final step of a stack that has none.
template <class Scalar, class Backend>
struct no_final {
    struct weights {};
    template <class Config>
    static weights read(const layers::tensor_source&, const Config&) {
        return {};
    }
    no_final() = default;
    template <class Config>
    no_final(weights&&, const Config&) {}
    void forward(Scalar*, index_t) const {}
};

// Hands a dense (B, L, H) output to `sink` in tiles of `tile` positions, releasing each tile's
// pages once consumed (the states are not needed again; the cache being filled is).
template <class Scalar, class Backend>
void stream_dense_states(tensor<Scalar, Backend>& x, index_t B, index_t L, index_t tile, const state_sink<Scalar>& sink) {
    const index_t H = x.numel() / std::max<index_t>(1, B * L);
    tile = std::max<index_t>(1, tile);
    for (index_t b = 0; b < B; ++b)
        for (index_t l = 0; l < L; l += tile) {
            const index_t n = std::min(tile, L - l);
            sink(b, l, n, x.data() + (b * L + l) * H);
            release_consumed<Backend>(x.data(), static_cast<std::size_t>(b * L + l + n) * static_cast<std::size_t>(H) * sizeof(Scalar));
        }
}

template <class Layout>
class encoder_stack {
public:
    using scalar = typename Layout::scalar;
    using backend = typename Layout::backend;
    using config = typename Layout::config;
    using input = typename Layout::input;
    using mixer = typename Layout::mixer;
    using feed_forward = typename Layout::feed_forward;
    using final = typename Layout::final;
    using inputs = typename mixer::inputs;

    // Reads and builds the encoder of the checkpoint behind `root` (the family's config `c`).
    encoder_stack(const layers::tensor_source& root, const config& c, const encoder_options& o)
        : parts_(std::make_shared<parts>(root, c, o)), opt_(o), d_model_(c.d_model), vocab_(c.vocab_size) {
        if constexpr (requires { parts_->in.make_inputs(); }) inputs_ = parts_->in.make_inputs();
    }

    // The tensors the stack reads, recorded (nothing is built).
    static void record(const layers::tensor_source& root, const config& c) {
        input::read(root, c);
        for (index_t i = 0; i < c.num_layers; ++i) {
            Layout::read_mixer(root, c, i);
            Layout::read_feed_forward(root, c, i);
        }
        final::read(root, c);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const noexcept { return d_model_; }
    index_t vocab_size() const noexcept { return vocab_; }
    output_positions output_span(index_t L) const noexcept { return {0, L}; }
    std::optional<index_t> max_context() const { return parts_->in.max_context(); }

    // ids (B, L), mask (B, L) of 0/1 or nullptr (all valid; checked by the caller) → (B, L, H).
    tensor<scalar, backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& progress,
                                    const block_observer<scalar>& observe = {}) {
        const parts& p = *parts_;
        const index_t H = d_model_, rows = B * L, layers = static_cast<index_t>(p.mixers.size());
        tensor<scalar, backend> x({B, L, H});
        p.in.embed(ids, mask, B, L, x.data(), inputs_);
        const index_t tile = std::max<index_t>(1, std::min(opt_.tile_rows, rows));
        index_t need = 0;
        for (std::size_t i = 0; i < p.mixers.size(); ++i)
            need = std::max({need, p.mixers[i].scratch_size(B, L), tile * p.ffs[i].scratch_per_row()});
        scalar* scratch = scratch_.get(need);
        for (index_t i = 0; i < layers; ++i) {
            const feed_forward& ff = p.ffs[static_cast<std::size_t>(i)];
            if (progress) progress({i, layers, 0, rows});
            p.mixers[static_cast<std::size_t>(i)].forward(x.data(), B, L, inputs_, scratch);
            if (observe) observe(i, block_stage::after_mixer, x.v());
            for (index_t r0 = 0; r0 < rows; r0 += tile) {
                const index_t n = std::min(tile, rows - r0);
                ff.forward(x.data() + r0 * H, n, scratch);
                if (progress) progress({i, layers, r0 + n, rows});
            }
            if constexpr (requires { inputs_.extra_rows(); }) {
                const auto [extra, count] = inputs_.extra_rows();
                for (index_t r0 = 0; r0 < count; r0 += tile) ff.forward(extra + r0 * H, std::min(tile, count - r0), scratch);
            }
            if (observe) observe(i, block_stage::after_ff, x.v());
        }
        p.out.forward(x.data(), rows);
        return x;
    }

    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p,
                const state_sink<scalar>& sink, const block_observer<scalar>& observe = {}) {
        tensor<scalar, backend> x = forward(ids, mask, B, L, p, observe);
        // The layers' scratch (LongT5 local at 700K tokens: 10.7 GB) is not kept while the
        // cross-attention cache fills.
        scratch_.release();
        stream_dense_states(x, B, L, opt_.tile_rows, sink);
    }

    // Gives back the layers' scratch, which forward() keeps for the next call.
    void release_scratch() { scratch_.release(); }
    // Drops what the layers keep between calls to go faster (LOCOST's S4D kernels).
    void drop_caches() {
        if constexpr (requires(mixer & m) { m.drop_cache(); })
            for (mixer& m : parts_->mixers) m.drop_cache();
    }
    const mixer& block_mixer(index_t i) const { return parts_->mixers[static_cast<std::size_t>(i)]; }

private:
    struct parts {
        input in;
        std::vector<mixer> mixers;
        std::vector<feed_forward> ffs;
        final out;
        parts(const layers::tensor_source& root, const config& c, const encoder_options& o) : in(input::read(root, c), c, o) {
            mixers.reserve(static_cast<std::size_t>(c.num_layers));
            ffs.reserve(static_cast<std::size_t>(c.num_layers));
            for (index_t i = 0; i < c.num_layers; ++i) {
                mixers.push_back(Layout::make_mixer(Layout::read_mixer(root, c, i), c, i, o, in));
                ffs.emplace_back(Layout::read_feed_forward(root, c, i), c.layer_norm_epsilon, large_products(o.compute));
            }
            out = final(final::read(root, c), c);
        }
    };
    // Shared by copies of the handle (SLED's chunks and the caller's encoder are one model).
    std::shared_ptr<parts> parts_;
    encoder_options opt_;
    index_t d_model_ = 0, vocab_ = 0;
    inputs inputs_;
    layers::scratch_buffer<scalar, backend> scratch_;
};

}  // namespace locost::models
