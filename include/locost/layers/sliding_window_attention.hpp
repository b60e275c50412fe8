// Sliding-window self-attention with an RMSNorm first, optionally with transient global tokens
// (Guo et al. 2022, §3.1; LongT5LayerLocalSelfAttention and LongT5LayerTransientGlobalSelfAttention),
// an RMSNorm-first attention sub-layer (layers/normed_attention.hpp, rms_before) whose keys are local:
//
//   local:            u = RMSNorm(x);  q, k, v = u·Wqᵀ, u·Wkᵀ, u·Wvᵀ
//                     x = x + softmax_{|i−j| ≤ r}(q·kᵀ + β(j − i) + padding mask) · v · Woᵀ
//   transient-global: the same keys plus one global token per block of g positions,
//                     ḡ_c = RMSNorm_g( Σ_{i : block(i) = c} u_i ),  k̄, v̄ = ḡ·Wkᵀ, ḡ·Wvᵀ,
//                     seen by query i with β_g(c − block(i)) (its own bucket table, block 0's)
//
// block(i) = ⌊i/g⌋ for valid positions, clamped to the last full block (the "orphan" tail joins
// it), −1 for padding; a row has one global token per full block. Block ids are computed with
// the same float32 operations as the reference (a cumulative sum of 1/g), so even a g that 1/g
// does not represent exactly assigns the same blocks. The window is layers/local_attention's
// sliding window of radius r = local_radius: LongT5 computes it in 3-block chunks of r + 1 with
// |i − j| < r + 1, the same set of keys.
//
// What all layers of a stack read for one input — the padding, β over the window, the blocks and
// β_g — is made once per input by sliding_window_inputs, not per layer.
//
// Names: rms_before's under the module and the norm the family gives (LocalSelfAttention or
// TransientGlobalSelfAttention, layer_norm) and, transient-global, the module's
// global_input_layer_norm.weight.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../ops/copy.hpp"
#include "../ops/linear.hpp"
#include "local_attention.hpp"
#include "position_band.hpp"
#include "relative_position_bias.hpp"
#include "normed_attention.hpp"
#include "rms_norm.hpp"

namespace locost::layers {

// Transient-global block ids of B rows of L positions (mask (B, L) of 0/1 or nullptr), and the
// lists that sum each block's positions (gather_sum), all host metadata of the input like its ids.
struct transient_blocks {
    index_t block_size = 16, globals = 0;  // globals = L / block_size per row (some may be unused)
    std::vector<index_t> id;               // (B, L): block of each position, −1 for padding
    std::vector<index_t> count;            // per row: globals in use (max block id + 1)
    std::vector<std::int64_t> offsets;     // (B·globals + 1): block s sums rows[offsets[s] … offsets[s+1])
    std::vector<std::int64_t> rows;        // row indices b·L + i, block by block in position order

    transient_blocks() = default;
    transient_blocks(const float* mask, index_t B, index_t L, index_t g) : block_size(g), globals(L / g) {
        id.resize(static_cast<std::size_t>(B * L));
        count.resize(static_cast<std::size_t>(B));
        const float step = 1.0f / static_cast<float>(g);
        for (index_t b = 0; b < B; ++b) {
            double cumulative = 0;  // torch.cumsum on the CPU accumulates in double
            index_t full_blocks = 0;
            for (index_t i = 0; i < L; ++i) {
                const bool valid = !mask || mask[b * L + i] != 0.0f;
                cumulative += step;
                const float before = static_cast<float>(static_cast<float>(cumulative) - step);
                const float m = valid ? 1.0f : -1000.0f;
                index_t c = static_cast<index_t>(std::floor((m + before) - 1.0f));
                c = valid ? std::max<index_t>(c, -1) : -1;
                id[static_cast<std::size_t>(b * L + i)] = c;
                if (i % g == g - 1 && c >= 0) ++full_blocks;
            }
            index_t top = -1;
            for (index_t i = 0; i < L; ++i) {
                index_t& c = id[static_cast<std::size_t>(b * L + i)];
                c = std::min(c, full_blocks - 1);  // orphans join the last full block
                top = std::max(top, c);
            }
            count[static_cast<std::size_t>(b)] = std::min(globals, top + 1);
        }
        // Counting sort of the positions by block, keeping position order within a block.
        const index_t G = globals;
        offsets.assign(static_cast<std::size_t>(B * G + 1), 0);
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i)
                if (const index_t c = id[static_cast<std::size_t>(b * L + i)]; c >= 0) ++offsets[static_cast<std::size_t>(b * G + c + 1)];
        for (std::size_t s = 1; s < offsets.size(); ++s) offsets[s] += offsets[s - 1];
        rows.resize(static_cast<std::size_t>(offsets.back()));
        std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i)
                if (const index_t c = id[static_cast<std::size_t>(b * L + i)]; c >= 0)
                    rows[static_cast<std::size_t>(next[static_cast<std::size_t>(b * G + c)]++)] = b * L + i;
    }

    // The block whose global bias applies to row b's query group [i0, i0 + n) (groups are blocks).
    index_t block_of_group(index_t b, index_t L, index_t i0, index_t n) const {
        index_t c = 0;
        for (index_t i = i0; i < i0 + n; ++i)
            if (id[static_cast<std::size_t>(b * L + i)] >= 0) c = id[static_cast<std::size_t>(b * L + i)];
        return c;
    }
};

// What every sliding-window layer of one stack reads for one input. Made by the stack: the
// relative bias tables are its block 0's, the radius and block size its config's.
template <class Scalar, class Backend, bool TransientGlobal>
class sliding_window_inputs {
public:
    struct tables {
        tensor<float> rel, global_rel;  // (buckets, heads): β, and β_g (transient-global only)
    };
    // Block 0's tables, under its attention module's prefix.
    static tables read(const tensor_source& module, index_t buckets, index_t heads) {
        tables t{relative_position_bias::read(module, buckets, heads), {}};
        if constexpr (TransientGlobal)
            t.global_rel = module.get("global_relative_attention_bias.weight", {buckets, heads}, {param_kind::relative_bias});
        return t;
    }

    sliding_window_inputs() = default;
    // radius: local_radius; g: global_block_size; max_distance: relative_attention_max_distance.
    sliding_window_inputs(const tables& t, index_t heads, index_t radius, index_t g, index_t max_distance)
        : rel_(t.rel, /*bidirectional=*/true, max_distance), heads_(heads), radius_(radius), g_(g) {
        if constexpr (TransientGlobal) global_rel_ = relative_position_bias(t.global_rel, /*bidirectional=*/true, max_distance);
        // β over the window, −∞ beyond it, for every distance a query group meets.
        const sliding_window w{radius_};
        band_.ensure(band_reach(radius_, g_), heads_,
                     [&](index_t r, index_t h) { return w.within(r) ? rel_.value(r, h) : position_band<Scalar, Backend>::masked; });
    }

    // Queries are taken in groups of a transient block (so a group has one global bias row), or
    // of a window's radius + 1 (the reference's chunks).
    index_t query_block() const noexcept { return query_block(radius_, g_); }
    static index_t query_block(index_t radius, index_t g) noexcept { return TransientGlobal ? g : radius + 1; }

    // What the memory estimate counts: the window's band (heads rows, from construction on) and
    // the transient-global band over an input of L tokens (heads rows, while the input is held).
    static index_t band_reach(index_t radius, index_t g) { return sliding_window{radius}.max_distance(query_block(radius, g)) + 1; }
    static index_t global_band_reach(index_t L, index_t g) { return TransientGlobal ? std::max<index_t>(L / g, 1) : 0; }
    index_t radius() const noexcept { return radius_; }

    // For the input's padding mask (B, L) of 0/1 or nullptr.
    void prepare(const float* mask, index_t B, index_t L) {
        padding_.prepare(mask, B * L);
        L_ = L;
        if constexpr (TransientGlobal) {
            blocks_ = transient_blocks(mask, B, L, g_);
            offsets_ = backend_array<std::int64_t, Backend>(blocks_.offsets);
            rows_ = backend_array<std::int64_t, Backend>(blocks_.rows);
            global_band_.ensure(std::max<index_t>(blocks_.globals, 1), heads_,
                                [&](index_t r, index_t h) { return global_rel_.value(r, h); });
        }
    }

    const Scalar* key_bias() const noexcept { return padding_.data(); }
    const position_band<Scalar, Backend>& band() const noexcept { return band_; }
    const transient_blocks& blocks() const noexcept { return blocks_; }
    const std::int64_t* block_offsets() const noexcept { return offsets_.data(); }
    const std::int64_t* block_rows() const noexcept { return rows_.data(); }
    // Row b's query group [i0, i0 + n) against its global tokens, head h: β_g(c' − c) for every c'.
    const Scalar* global_bias(index_t b, index_t i0, index_t n, index_t h) const {
        return global_band_.at(h, -blocks_.block_of_group(b, L_, i0, n));
    }

private:
    relative_position_bias rel_, global_rel_;
    index_t heads_ = 0, radius_ = 0, g_ = 16, L_ = 0;
    position_band<Scalar, Backend> band_, global_band_;
    padding_bias<Scalar, Backend> padding_;
    transient_blocks blocks_;
    backend_array<std::int64_t, Backend> offsets_, rows_;
};

template <class Scalar, class Backend, bool TransientGlobal>
class sliding_window_attention : public normed_qkv_attention<Scalar, Backend, rms_before> {
    using base = normed_qkv_attention<Scalar, Backend, rms_before>;

public:
    using inputs = sliding_window_inputs<Scalar, Backend, TransientGlobal>;

    struct weights {
        normed_attention_weights<rms_before> attention;
        tensor<float> global_norm;  // (H): global_input_layer_norm (transient-global only)

        static weights read(const tensor_source& module, const tensor_source& norm, index_t H, index_t inner) {
            constexpr auto large = param_storage::large_product;
            weights w{normed_attention_weights<rms_before>::read(module, norm, H, inner, large, large), {}};
            if constexpr (TransientGlobal) w.global_norm = rms_norm<float, cpu>::read(module / "global_input_layer_norm", H);
            return w;
        }
    };

    sliding_window_attention() = default;
    // p: the projections' precision (bf16/int8 products under compute = bf16/int8).
    sliding_window_attention(const weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : base(w.attention, eps, heads, p) {
        if constexpr (TransientGlobal) global_norm_ = rms_norm<Scalar, Backend>(w.global_norm, eps);
    }

    // Scratch for B rows of L positions (global tokens: at most L of them per row).
    index_t scratch_size(index_t B, index_t L) const noexcept { return scratch_elements(this->dims_.H, this->dims_.inner, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t B, index_t L) noexcept {
        const index_t n = B * L, globals = TransientGlobal ? n : 0;
        return n * (H + 4 * inner) + globals * (H + 2 * inner);
    }

    // x (B·L, H) += Attention(RMSNorm(x)) for the input `in` describes.
    void forward(Scalar* x, index_t B, index_t L, const inputs& in, Scalar* scratch) const {
        Scalar* u = scratch;  // (B·L, H)
        this->norm_.forward(x, u, B * L);
        attend(u, B, L, in, x, /*accumulate=*/true, u + B * L * this->dims_.H);
    }

    // out (B·L, H) (+)= Attention(u): the attention module alone, on normed states u.
    void attend(const Scalar* u, index_t B, index_t L, const inputs& in, Scalar* out, bool accumulate, Scalar* scratch) const {
        const index_t n = B * L, I = this->dims_.inner, H = this->dims_.H;
        Scalar* qkv = scratch;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;  // (n, I)
        this->qkv_.apply(u, qkv, n);
        const local_qkv<Scalar> q{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        global_segment<Scalar> globals;
        global_bias_fn<Scalar> global_bias;
        if constexpr (TransientGlobal) {
            const index_t G = in.blocks().globals;
            Scalar* sums = ctx + n * I;      // (B·G, H)
            Scalar* gkv = sums + B * G * H;  // (B·G, 2I): k̄ | v̄
            // Σ of u over each block's positions, in position order.
            ops::gather_sum<Backend>(u, H, H, in.block_offsets(), in.block_rows(), B * G, sums, H);
            global_norm_.forward(sums, sums, B * G);
            ops::linear<Backend>(this->qkv_.matrix().rows(I, 2 * I), sums, gkv, B * G);  // rows I … 3I of Wqkv: Wk, Wv
            globals = {gkv, gkv + I, 2 * I, G * 2 * I, in.blocks().count};
            global_bias = [&in](index_t b, index_t i0, index_t nq, index_t h) { return in.global_bias(b, i0, nq, h); };
        }
        local_attention<Scalar, Backend>(q, B, L, this->dims_.heads, this->dims_.d, sliding_window{in.radius()}, in.query_block(),
                                         in.key_bias(), &in.band(), globals, global_bias, ctx, I);
        this->o_.apply(ctx, out, n, accumulate);
    }

private:
    rms_norm<Scalar, Backend> global_norm_;
};

}  // namespace locost::layers
