// T5 attention sub-layers with pre-norm and residual — docs/models.md §2 (T5LayerSelfAttention,
// T5LayerCrossAttention):
//
//   encoder self:  u = RMSNorm(x);  q, k, v = u·Wqᵀ, u·Wkᵀ, u·Wvᵀ
//                  x = x + softmax(q·kᵀ + position_bias + padding mask) · v · Woᵀ
//                  (bidirectional buckets; queries in blocks so that no L × L matrix is formed)
//   self:   u = RMSNorm(x);  q, k, v = u·Wqᵀ, u·Wkᵀ, u·Wvᵀ
//           x = x + softmax(q·kᵀ + position_bias + causal mask) · v · Woᵀ
//   cross:  u = RMSNorm(x);  q = u·Wqᵀ;  k, v = h·Wkᵀ, h·Wvᵀ  (h: encoder states)
//           x = x + softmax(q·kᵀ + encoder padding mask) · v · Woᵀ
//
// Per head: heads × d_kv = inner (not necessarily d_model). No 1/√d_kv scaling and no biases
// (T5 folds the scaling into Wq). The self-attention keys/values of past positions live in a
// cache (self_cache); the cross-attention keys/values of a document are computed once
// (cross_kv) and shared by every row (beam) decoding that document. Padded encoder positions
// are left out of cross_kv altogether, which is the same as masking them (cross-attention has
// no position bias, so the order of keys does not matter).
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "../core/dtype.hpp"
#include "../ops/attention.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "parameter.hpp"
#include "kv_cache.hpp"
#include "relative_position_bias.hpp"
#include "rms_norm.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

struct attention_weights {
    tensor<float> norm;        // (H)
    tensor<float> q, k, v, o;  // (inner, H) ×3, (H, inner)
};

// What the self-attention layers share: the pre-norm, q/k/v stacked into one (3I, H) matrix so
// that all three projections are one GEMM, the output projection, and the sizes. The decoder's
// layers may keep their projections in a reduced precision (layers/weight_matrix.hpp).
template <class Scalar, class Backend>
class fused_qkv_attention {
public:
    fused_qkv_attention() = default;
    fused_qkv_attention(const attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : norm_(w.norm, eps),
          wqkv_(stack_rows(stack_rows(w.q, w.k), w.v), p),
          wo_(w.o, p),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {}

protected:
    rms_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wqkv_;  // (3I, H)
    weight_matrix<Scalar, Backend> wo_;    // (H, I)
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

template <class Scalar, class Backend>
class t5_self_attention : fused_qkv_attention<Scalar, Backend> {
    using base = fused_qkv_attention<Scalar, Backend>;
    using base::norm_, base::wqkv_, base::wo_, base::H_, base::inner_, base::heads_, base::d_;

public:
    t5_self_attention() = default;
    t5_self_attention(const attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : base(w, eps, heads, p) {}

    index_t heads() const noexcept { return heads_; }
    index_t d_kv() const noexcept { return d_; }
    index_t scratch_per_row() const noexcept { return H_ + 4 * inner_; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows. Appends their keys/values to
    // `cache`; `band` holds the position bias and the causal mask.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const causal_band<Scalar, Backend>& band,
                 Scalar* scratch) const {
        const index_t n = R * T, I = inner_;
        Scalar* u = scratch;                // (n, H)
        Scalar* qkv = u + n * H_;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;     // (n, I)
        norm_.forward(x, u, n);
        wqkv_.apply(u, qkv, n);
        cached_self_attention<Scalar, Backend>(qkv, R, T, P, cache, band, ctx);
        wo_.apply(ctx, x, n, /*accumulate=*/true);
    }
};

// The encoder's bidirectional self-attention over whole sequences (no cache).
template <class Scalar, class Backend>
class t5_encoder_self_attention : fused_qkv_attention<Scalar, Backend> {
    using base = fused_qkv_attention<Scalar, Backend>;
    using base::norm_, base::wqkv_, base::wo_, base::H_, base::inner_, base::heads_, base::d_;

public:
    t5_encoder_self_attention() = default;
    // p: the projections' precision (bf16_products under compute = bf16).
    t5_encoder_self_attention(const attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native)
        : base(w, eps, heads, p) {}

    // Scratch forward() needs for B rows of L positions with queries in blocks of `block`.
    index_t scratch_size(index_t B, index_t L, index_t block) const noexcept { return scratch_elements(H_, inner_, heads_, B, L, block); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t inner, index_t heads, index_t B, index_t L, index_t block) noexcept {
        return B * L * (H + 4 * inner) + heads * std::min(block, L) * L;
    }

    // x (B·L, H) += SelfAttention(x); mask (B, L) of 0/1 or nullptr masks keys; `bias` is the
    // stack's relative position bias (bidirectional).
    void forward(Scalar* x, index_t B, index_t L, const float* mask, const relative_position_bias<Scalar, Backend>& bias, index_t block,
                 Scalar* scratch) const {
        const index_t n = B * L, I = inner_;
        block = std::max<index_t>(1, std::min(block, L));
        Scalar* u = scratch;               // (n, H)
        Scalar* qkv = u + n * H_;         // (n, 3I): q | k | v
        Scalar* ctx = qkv + n * 3 * I;    // (n, I)
        Scalar* b_ = ctx + n * I;         // (heads, block, L)
        norm_.forward(x, u, n);
        wqkv_.apply(u, qkv, n);
        // Without a mask every row shares one bias block; with one, each row has its own.
        bidirectional_attention<Scalar, Backend>(
            qkv, B, L, heads_, d_, block, /*per_row=*/mask != nullptr, /*bias_head_stride=*/1,
            [&](index_t i0, index_t nq, index_t row, Scalar* out) {
                host_written<Scalar, Backend> staged(out, heads_ * nq * L);  // filled on the host; a device gets a copy
                bias.fill(i0, nq, L, /*causal=*/false, staged.data(), row >= 0 ? mask + row * L : nullptr);
                staged.commit();
                return true;
            },
            b_, ctx);
        wo_.apply(ctx, x, n, /*accumulate=*/true);
    }
};

template <class Scalar, class Backend>
class t5_cross_attention {
public:
    t5_cross_attention() = default;
    // p: the precision of the per-step projections (q, o). kv_p: that of the key/value
    // projection, which runs once per document over every encoder position (a large GEMM:
    // native, or bf16_products under compute = bf16). folded: attend over the encoder states
    // with the key/value projections folded in (folded_cross_attention); no projection then.
    t5_cross_attention(const attention_weights& w, double eps, index_t heads, weight_precision p = weight_precision::native,
                       weight_precision kv_p = weight_precision::native, bool folded = false)
        : norm_(w.norm, eps),
          wq_(w.q, p),
          wo_(w.o, p),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {
        if (folded) folded_ = folded_cross_attention<Scalar, Backend>(w.k, w.v, {}, heads, folded_products(kv_p));
        else wkv_ = weight_matrix<Scalar, Backend>(stack_rows(w.k, w.v), kv_p);
    }

    index_t inner() const noexcept { return inner_; }
    index_t scratch_per_row() const noexcept { return H_ + 2 * inner_ + (folded_.active() ? folded_.scratch_per_row() : 0); }

    // k, v = h·Wkᵀ, h·Wvᵀ for encoder rows [j0, j0 + n) of one document, into `kv` (cached
    // form only). scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        LOCOST_ASSERT(!folded_.active());
        wkv_.apply(h, scratch, n);
        kv.store<Backend>(0, j0, n, scratch, 2 * inner_);
        kv.store<Backend>(1, j0, n, scratch + inner_, 2 * inner_);
    }

    // x (R·T, H) for R rows of T positions; rows [row_begin[d], row_begin[d+1]) attend to
    // document d's keys/values docs[d].
    void forward(Scalar* x, index_t R, index_t T, const std::vector<const cross_kv*>& docs,
                 const std::vector<index_t>& row_begin, Scalar* scratch) const {
        const index_t n = R * T, I = inner_;
        Scalar* u = scratch;         // (n, H)
        Scalar* q = u + n * H_;      // (n, I)
        Scalar* ctx = q + n * I;     // (n, I)
        norm_.forward(x, u, n);
        wq_.apply(u, q, n);
        if (folded_.active()) folded_.attend(q, T, docs, row_begin, ctx, ctx + n * I);
        else document_attention<Scalar, Backend>(q, T, heads_, d_, docs, row_begin, ctx);
        wo_.apply(ctx, x, n, /*accumulate=*/true);
    }

private:
    rms_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wq_;
    weight_matrix<Scalar, Backend> wkv_;  // (2I, H): k | v (cached form)
    folded_cross_attention<Scalar, Backend> folded_;  // (folded form)
    weight_matrix<Scalar, Backend> wo_;
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

} // namespace locost::layers
