// The LOCOST encoder stack — LOCOST §3, docs/models.md §1.6:
//
//     x = shared[ids]                         (no scaling)
//     for each block:  x = GatedS4D(x)  then  x = FeedForward(x)      (pre-norm, residual)
//     h = RMSNorm(x)                          encoder.final_layer_norm
//
// locost_encoder_stack<Traits> is the compile-time model; locost_encoder<Scalar, Backend> is the
// family's handle (a dense_encoder, models/concepts.hpp, with LOCOST's own extras: per-block
// observers and kernels), made by load_locost_encoder() from a checkpoint (the config chooses
// the traits in locost/traits.hpp). One encode() runs at a time per encoder object.
//
// Memory for B documents of L tokens (Scalar = float, base model H = 768, F = 2048):
//     output x            B·L·H floats
//   + convolution buffer  B·L·H floats
//   + tiles               tile_rows·(H + 2F) floats              (1024 rows: 19 MB)
//   + conv groups         threads·4·min(16·M, 2^22) floats       (M ≈ 2L; ≤ 64 MB per thread)
//   + kernel cache        ≤ kernel_cache_bytes                   (default 1 GiB)
//   + the weights.
// So peak ≈ 8·B·L·H bytes + a constant: 6.1 KB per token for the base model (4.3 GB at 700K).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../config/error.hpp"
#include "../../core/tensor.hpp"
#include "../../io/checkpoint.hpp"
#include "../../layers/feed_forward.hpp"
#include "../../layers/gated_s4d.hpp"
#include "../../layers/parameter.hpp"
#include "../../layers/rms_norm.hpp"
#include "../../ops/embedding.hpp"
#include "../concepts.hpp"
#include "../feed_forward_weights.hpp"
#include "../options.hpp"
#include "../seq2seq.hpp"
#include "parameters.hpp"
#include "traits.hpp"

namespace locost::models {

// Sees the hidden state (B, L, H) inside each block (block index from 0): after the S4D
// sub-layer and after the feed-forward (the block's output, before the final norm).
enum class block_stage { after_ssm, after_ff };
template <class Scalar>
using block_observer = std::function<void(index_t block, block_stage stage, view<const Scalar> hidden)>;

template <class Traits>
class locost_encoder_stack {
public:
    using Scalar = typename Traits::scalar;
    using Backend = typename Traits::backend;
    using ssm_layer = layers::gated_s4d<Scalar, Backend, Traits::bidirectional, Traits::gating>;
    using ff_layer = layers::feed_forward<Scalar, Backend, Traits::act, Traits::gated_ff>;

    locost_encoder_stack(const io::checkpoint& ck, const locost_config& c, const encoder_options& o)
        : cfg_(c), opt_(o), budget_(std::make_unique<layers::kernel_cache_budget>(o.kernel_cache_bytes)) {
        const index_t H = c.d_model, F = c.d_ff, m = c.d_state / 2, ch = Traits::bidirectional ? 2 : 1;
        shared_ = layers::to_backend<Scalar, Backend>(ck.load_f32(t5_names::shared, {c.vocab_size, H}));
        for (index_t i = 0; i < c.num_layers; ++i) {
            const std::string s = locost_names::ssm(i);
            typename ssm_layer::weights w;
            w.prenorm = ck.load_f32(locost_names::prenorm(i), {H});
            w.kernel.channels = ch;
            w.kernel.H = H;
            w.kernel.modes = m;
            auto vec = [&](const std::string& n, shape_t shape) {
                const tensor<float> t = ck.load_f32(s + n, shape);
                return std::vector<float>(t.data(), t.data() + t.numel());
            };
            w.kernel.log_dt = vec("kernel.log_dt", {H});
            w.kernel.inv_A_real = vec("kernel.inv_A_real", {H, m});
            w.kernel.A_imag = vec("kernel.A_imag", {H, m});
            w.kernel.B = vec("kernel.B", {H, m, 2});
            w.kernel.C = vec("kernel.C", {ch, H, m, 2});
            w.D = ck.load_f32(s + "D", {H});
            if constexpr (Traits::gating) {
                w.q_weight = ck.load_f32(s + "q_proj.weight", {H, H});
                w.q_bias = ck.load_f32(s + "q_proj.bias", {H});
            }
            w.k_weight = ck.load_f32(s + "k_proj.weight", {H, H});
            w.k_bias = ck.load_f32(s + "k_proj.bias", {H});
            w.o_weight = ck.load_f32(s + "output_linear.weight", {H, H});
            w.o_bias = ck.load_f32(s + "output_linear.bias", {H});
            ssm_.emplace_back(w, c.layer_norm_epsilon, budget_.get(), large_products(o.compute));

            ff_.emplace_back(load_feed_forward<Traits::gated_ff, typename ff_layer::weights>(ck, t5_names::layer("encoder", i, 1), H, F),
                             c.layer_norm_epsilon, large_products(o.compute));
        }
        final_norm_ = layers::rms_norm<Scalar, Backend>(ck.load_f32(t5_names::encoder_final_norm, {H}), c.layer_norm_epsilon);
    }

    // ids (B·L), mask (B·L) of 0/1 or nullptr (all valid). Returns (B, L, H).
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const Scalar* mask, index_t B, index_t L,
                                    const progress_callback& progress, const block_observer<Scalar>& observe) {
        const index_t H = cfg_.d_model, rows = B * L, layers = cfg_.num_layers;
        const index_t tile = std::max<index_t>(1, std::min(opt_.tile_rows, rows));
        const layers::backend_array<std::int64_t, Backend> ids_b(ids, rows);
        const layers::backend_array<Scalar, Backend> mask_b(mask, rows);
        tensor<Scalar, Backend> x({B, L, H});
        ops::embedding<Backend>(shared_.data(), H, ids_b.data(), rows, x.data());
        tensor<Scalar, Backend> v({rows, H});
        index_t per_row = 0;
        for (index_t i = 0; i < layers; ++i)
            per_row = std::max({per_row, ssm_[static_cast<std::size_t>(i)].scratch_per_row(), ff_[static_cast<std::size_t>(i)].scratch_per_row()});
        layers::scratch_buffer<Scalar, Backend> scratch;
        Scalar* tbuf = scratch.get(tile * per_row);
        const ops::conv_options conv{opt_.conv};
        for (index_t i = 0; i < layers; ++i) {
            if (progress) progress({i, layers, 0, rows});
            ssm_[static_cast<std::size_t>(i)].forward(x.data(), B, L, mask_b.data(), v.data(), tbuf, tile, conv);
            if (observe) observe(i, block_stage::after_ssm, x.v());
            for (index_t r0 = 0; r0 < rows; r0 += tile) {
                const index_t n = std::min(tile, rows - r0);
                ff_[static_cast<std::size_t>(i)].forward(x.data() + r0 * H, n, tbuf);
                if (progress) progress({i, layers, r0 + n, rows});
            }
            if (observe) observe(i, block_stage::after_ff, x.v());
        }
        final_norm_.forward(x.data(), x.data(), rows);
        return x;
    }

    const locost_config& config() const noexcept { return cfg_; }
    void drop_kernel_cache() {
        for (auto& s : ssm_) s.drop_cache();
    }
    const ssm_layer& ssm(index_t i) const { return ssm_[static_cast<std::size_t>(i)]; }
    // Frees the encoder's weights (a seq2seq model that will only decode from now on).
    void release_weights() {
        shared_ = {};
        ssm_.clear();
        ff_.clear();
    }

private:
    locost_config cfg_;
    encoder_options opt_;
    std::unique_ptr<layers::kernel_cache_budget> budget_;  // stable address: layers point to it
    tensor<Scalar, Backend> shared_;
    std::vector<ssm_layer> ssm_;
    std::vector<ff_layer> ff_;
    layers::rms_norm<Scalar, Backend> final_norm_;
};

// The LOCOST family's encoder handle: any LOCOST structure, chosen from config.json at load
// time. A dense_encoder (models/concepts.hpp), so the registry can erase it into any_encoder and
// SLED can slide it over chunks; tests use its extras (observers, kernels).
template <class Scalar = float, class Backend = cpu>
class locost_encoder {
public:
    using scalar = Scalar;
    using backend = Backend;

    struct iface {
        virtual ~iface() = default;
        virtual tensor<Scalar, Backend> forward(const std::int64_t* ids, const Scalar* mask, index_t B, index_t L,
                                                const progress_callback&, const block_observer<Scalar>&) = 0;
        virtual const locost_config& config() const = 0;
        virtual void drop_kernel_cache() = 0;
        // Kernel of layer `layer` for one channel: K[c, h, 0..L) (channels × L), for tests.
        virtual std::vector<Scalar> layer_kernel(index_t layer, index_t h, index_t L) const = 0;
    };

    explicit locost_encoder(std::shared_ptr<iface> impl, std::string source) : impl_(std::move(impl)), source_(std::move(source)) {}

    // One document: ids (L) → (1, L, H).
    tensor<Scalar, Backend> encode(const std::vector<int>& ids, const progress_callback& progress = {}) {
        std::vector<std::int64_t> v(ids.begin(), ids.end());
        return encode(v.data(), nullptr, 1, static_cast<index_t>(v.size()), progress);
    }

    // A batch: ids (B, L), mask (B, L) of 0/1 (nullptr: all valid) → (B, L, H). Errors:
    // encode.empty_input, ids.out_of_vocab, encode.bad_mask.
    tensor<Scalar, Backend> encode(const std::int64_t* ids, const float* mask, index_t B, index_t L,
                                   const progress_callback& progress = {}, const block_observer<Scalar>& observe = {}) {
        check_encoder_input(source_, impl_->config().vocab_size, ids, mask, B, L);
        std::vector<Scalar> m;
        if (mask) {
            bool all_ones = true;
            m.resize(static_cast<std::size_t>(B * L));
            for (index_t i = 0; i < B * L; ++i) {
                m[static_cast<std::size_t>(i)] = static_cast<Scalar>(mask[i]);
                all_ones = all_ones && mask[i] == 1.0f;
            }
            if (all_ones) m.clear();
        }
        return impl_->forward(ids, m.empty() ? nullptr : m.data(), B, L, progress, observe);
    }

    // The encoder concept (models/concepts.hpp).
    index_t d_model() const { return impl_->config().d_model; }
    index_t vocab_size() const { return impl_->config().vocab_size; }
    output_positions output_span(index_t L) const { return {0, L}; }
    std::optional<index_t> max_context() const { return std::nullopt; }  // O(L log L) at any length
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p) {
        return encode(ids, mask, B, L, p);
    }
    void encode(const std::int64_t* ids, const float* mask, index_t B, index_t L, const progress_callback& p, const state_sink<Scalar>& sink) {
        tensor<Scalar, Backend> x = encode(ids, mask, B, L, p);
        stream_dense_states(x, B, L, tile_rows_, sink);
    }

    const locost_config& config() const { return impl_->config(); }
    void drop_kernel_cache() { impl_->drop_kernel_cache(); }
    std::vector<Scalar> layer_kernel(index_t layer, index_t h, index_t L) const { return impl_->layer_kernel(layer, h, L); }
    void set_tile_rows(index_t n) { tile_rows_ = n; }

private:
    std::shared_ptr<iface> impl_;
    std::string source_;
    index_t tile_rows_ = 1024;
};

namespace detail {
template <class Traits>
class encoder_model final : public locost_encoder<typename Traits::scalar, typename Traits::backend>::iface {
public:
    using Scalar = typename Traits::scalar;
    using Backend = typename Traits::backend;
    encoder_model(const io::checkpoint& ck, const locost_config& c, const encoder_options& o) : stack_(ck, c, o) {}
    tensor<Scalar, Backend> forward(const std::int64_t* ids, const Scalar* mask, index_t B, index_t L,
                                    const progress_callback& p, const block_observer<Scalar>& obs) override {
        return stack_.forward(ids, mask, B, L, p, obs);
    }
    const locost_config& config() const override { return stack_.config(); }
    void drop_kernel_cache() override { stack_.drop_kernel_cache(); }
    std::vector<Scalar> layer_kernel(index_t layer, index_t h, index_t L) const override {
        const auto& k = stack_.ssm(layer).kernel();
        std::vector<Scalar> out(static_cast<std::size_t>(k.channels() * L));
        typename std::remove_cvref_t<decltype(k)>::scratch s;
        k.compute(h, L, out.data(), s);
        return out;
    }

private:
    locost_encoder_stack<Traits> stack_;
};
} // namespace detail

// Checks that the checkpoint holds a LOCOST model this library runs. Errors:
// model.unsupported, checkpoint.invalid.
inline void check_locost_checkpoint(const io::checkpoint& ck, const locost_config& c) {
    if (c.num_ssm_heads != 1)
        throw error("model.unsupported",
                    ck.dir() + ": num_ssm_heads is " + std::to_string(c.num_ssm_heads) +
                        ", only 1 is supported (the original code runs num_ssm_heads > 1 only on its CUDA path, whose channel "
                        "grouping is not specified; the released LOCOST checkpoints use 1)");
    check_layers_fit(c, ck.records().size(), ck.weights_path());
    ck.require_valid(locost_parameters(c));
}

// The encoder of a LOCOST checkpoint whose config is `c` (weights converted to Scalar on Backend).
template <class Backend = cpu, class Scalar = float>
locost_encoder<Scalar, Backend> make_locost_encoder(const io::checkpoint& ck, const locost_config& c, const encoder_options& o = {}) {
    check_locost_checkpoint(ck, c);
    auto impl = dispatch_locost<Scalar, Backend>(c, c.source, [&]<class Traits>() -> std::shared_ptr<typename locost_encoder<Scalar, Backend>::iface> {
        return std::make_shared<detail::encoder_model<Traits>>(ck, c, o);
    });
    locost_encoder<Scalar, Backend> e(std::move(impl), ck.dir());
    e.set_tile_rows(o.tile_rows);
    return e;
}

} // namespace locost::models
