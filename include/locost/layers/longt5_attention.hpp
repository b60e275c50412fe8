// LongT5's encoder self-attention (Guo et al. 2022, §3.1; LongT5LayerLocalSelfAttention and
// LongT5LayerTransientGlobalSelfAttention), a T5 attention sub-layer whose keys are local:
//
//   local:            u = RMSNorm(x);  q, k, v = u·Wqᵀ, u·Wkᵀ, u·Wvᵀ
//                     x = x + softmax_{|i−j| ≤ r}(q·kᵀ + bias(j − i) + padding mask) · v · Woᵀ
//   transient-global: the same keys plus one global token per block of g positions,
//                     ḡ_c = RMSNorm_g( Σ_{i : block(i) = c} u_i ),  k̄, v̄ = ḡ·Wkᵀ, ḡ·Wvᵀ,
//                     seen by query i with bias_g(c − block(i)) (own bucket table, block 0's)
//
// block(i) = ⌊i/g⌋ for valid positions, clamped to the last full block (the "orphan" tail joins
// it), −1 for padding; a row has one global token per full block. Block ids are computed with
// the same float32 operations as the reference (a cumulative sum of 1/g), so even a g that 1/g
// does not represent exactly assigns the same blocks. The local window is layers/local_attention's
// sliding window of radius local_radius: LongT5 computes it in 3-block chunks of local_radius + 1
// with |i − j| < local_radius + 1, the same set of keys.
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "../ops/copy.hpp"
#include "local_attention.hpp"
#include "rms_norm.hpp"
#include "t5_attention.hpp"

namespace locost::layers {

// Transient-global block ids of B rows of L positions (mask (B, L) of 0/1 or nullptr).
struct transient_blocks {
    index_t block_size = 16, globals = 0;  // globals = L / block_size per row (some may be unused)
    std::vector<index_t> id;               // (B, L): block of each position, −1 for padding
    std::vector<index_t> count;            // per row: globals in use (max block id + 1)

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
    }
};

template <class Scalar, class Backend, bool TransientGlobal>
class longt5_self_attention : fused_qkv_attention<Scalar, Backend> {
    using base = fused_qkv_attention<Scalar, Backend>;
    using base::norm_, base::wqkv_, base::wo_, base::H_, base::inner_, base::heads_, base::d_;

public:
    longt5_self_attention() = default;
    // global_norm: global_input_layer_norm's weight (transient-global only).
    // p: the projections' precision (bf16_products under compute = bf16).
    longt5_self_attention(const attention_weights& w, double eps, index_t heads, index_t radius, const tensor<float>& global_norm = {},
                          weight_precision p = weight_precision::native)
        : base(w, eps, heads, p), radius_(radius) {
        if constexpr (TransientGlobal) global_norm_ = rms_norm<Scalar, Backend>(global_norm, eps);
    }

    index_t radius() const noexcept { return radius_; }

    // Scratch for B rows of L positions (global tokens: at most L of them per row).
    index_t scratch_size(index_t B, index_t L, index_t) const noexcept { return scratch_elements(H_, inner_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t B, index_t L) noexcept {
        const index_t n = B * L, globals = TransientGlobal ? n : 0;
        return n * (H + 4 * inner + 1) + globals * (H + 2 * inner);
    }

    // x (B·L, H) += LocalSelfAttention(RMSNorm(x)). mask (B, L) of 0/1 or nullptr; rel: the
    // stack's relative bias; transient-global: blocks of this input and the stack's global bias.
    void forward(Scalar* x, index_t B, index_t L, const float* mask, const relative_position_bias<Scalar, Backend>& rel,
                 const transient_blocks* blocks, const relative_position_bias<Scalar, Backend>* global_rel, Scalar* scratch) const {
        Scalar* u = scratch;  // (B·L, H)
        norm_.forward(x, u, B * L);
        attend(u, B, L, mask, rel, blocks, global_rel, x, /*accumulate=*/true, u + B * L * H_);
    }

    // out (B·L, H) (+)= LocalSelfAttention(u): the attention module alone, on normed states u.
    void attend(const Scalar* u, index_t B, index_t L, const float* mask, const relative_position_bias<Scalar, Backend>& rel,
                const transient_blocks* blocks, const relative_position_bias<Scalar, Backend>* global_rel, Scalar* out, bool accumulate,
                Scalar* scratch) const {
        const index_t n = B * L, I = inner_;
        Scalar* qkv = scratch;             // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;     // (n, I)
        Scalar* key_bias = ctx + n * I;    // (n)
        wqkv_.apply(u, qkv, n);
        fill_key_bias<Backend>(mask, B, L, [](index_t, index_t) { return false; }, key_bias);
        const local_qkv<Scalar> in{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        global_segment<Scalar> globals;
        global_bias_fn<Scalar> global_bias;
        std::vector<Scalar> global_band;
        std::optional<backend_array<Scalar, Backend>> band_on_backend;
        index_t query_block = radius_ + 1;
        if constexpr (TransientGlobal) {
            const index_t G = blocks->globals;
            Scalar* sums = key_bias + n;        // (B·G, H)
            Scalar* gkv = sums + B * G * H_;    // (B·G, 2I): k̄ | v̄
            aggregate(u, B, L, *blocks, sums);
            global_norm_.forward(sums, sums, B * G);
            ops::linear<Backend>(wqkv_.rows(I, 2 * I), sums, gkv, B * G);  // rows I … 3I of Wqkv: Wk, Wv
            globals = {gkv, gkv + I, 2 * I, G * 2 * I, blocks->count};
            // Queries in groups of one transient block, so the global bias is one row per group; it
            // depends on k − c only (c: the group's block): a band over distances −(G−1) … G−1.
            query_block = blocks->block_size;
            const index_t width = 2 * G - 1;
            global_band.resize(static_cast<std::size_t>(heads_ * std::max<index_t>(width, 0)));
            for (index_t h = 0; h < heads_; ++h)
                for (index_t r = -(G - 1); r <= G - 1; ++r) global_band[static_cast<std::size_t>(h * width + r + G - 1)] = global_rel->value(r, h);
            band_on_backend.emplace(global_band.data(), static_cast<index_t>(global_band.size()));  // a device's copy
            global_bias = [&, G, width](index_t b, index_t i0, index_t nq, index_t h) {
                index_t c = 0;
                for (index_t i = i0; i < i0 + nq; ++i)
                    if (blocks->id[static_cast<std::size_t>(b * L + i)] >= 0) c = blocks->id[static_cast<std::size_t>(b * L + i)];
                return band_on_backend->data() + h * width + (G - 1) - c;
            };
        }
        local_attention<Scalar, Backend>(in, B, L, heads_, d_, sliding_window{radius_}, query_block, key_bias, &rel, globals, global_bias,
                                         ctx, I);
        wo_.apply(ctx, out, n, accumulate);
    }

private:
    // sums (B·G, H): Σ of u over the positions of each block, in position order (one gather_sum:
    // the positions of each block listed on the host).
    void aggregate(const Scalar* u, index_t B, index_t L, const transient_blocks& blocks, Scalar* sums) const {
        const index_t G = blocks.globals;
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(B * G + 1), 0), rows;
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i) {
                const index_t c = blocks.id[static_cast<std::size_t>(b * L + i)];
                if (c >= 0) ++offsets[static_cast<std::size_t>(b * G + c + 1)];
            }
        for (std::size_t s = 1; s < offsets.size(); ++s) offsets[s] += offsets[s - 1];
        rows.resize(static_cast<std::size_t>(offsets.back()));
        std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
        for (index_t b = 0; b < B; ++b)
            for (index_t i = 0; i < L; ++i) {
                const index_t c = blocks.id[static_cast<std::size_t>(b * L + i)];
                if (c >= 0) rows[static_cast<std::size_t>(next[static_cast<std::size_t>(b * G + c)]++)] = b * L + i;
            }
        const backend_array<std::int64_t, Backend> off(offsets.data(), static_cast<index_t>(offsets.size()));
        const backend_array<std::int64_t, Backend> at(rows.data(), static_cast<index_t>(rows.size()));
        ops::gather_sum<Backend>(u, H_, H_, off.data(), at.data(), B * G, sums, H_);
    }

    index_t radius_ = 0;
    rms_norm<Scalar, Backend> global_norm_;
};

} // namespace locost::layers
