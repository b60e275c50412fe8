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
#include "relative_position_bias.hpp"
#include "rms_norm.hpp"

namespace locost::layers {

struct attention_weights {
    tensor<float> norm;        // (H)
    tensor<float> q, k, v, o;  // (inner, H) ×3, (H, inner)
};

// Keys and values of past positions for R rows: (R, heads, capacity, d_kv) each.
template <class Scalar, class Backend>
struct self_cache {
    tensor<Scalar, Backend> k, v;
    index_t rows = 0, heads = 0, capacity = 0, d = 0;

    void allocate(index_t R, index_t n_heads, index_t cap, index_t d_kv) {
        rows = R, heads = n_heads, capacity = cap, d = d_kv;
        k = tensor<Scalar, Backend>({R, n_heads, cap, d_kv});
        v = tensor<Scalar, Backend>({R, n_heads, cap, d_kv});
    }
    Scalar* k_at(index_t r, index_t h) { return k.data() + ((r * heads + h) * capacity) * d; }
    Scalar* v_at(index_t r, index_t h) { return v.data() + ((r * heads + h) * capacity) * d; }

    // Row r takes the cache of row src[r] (beam search), for the first `len` positions.
    void reorder(const std::vector<index_t>& src, index_t len) {
        const index_t per_row = heads * capacity * d;
        tensor<Scalar, Backend> nk({rows, heads, capacity, d}), nv({rows, heads, capacity, d});
        for (index_t r = 0; r < rows; ++r)
            for (index_t h = 0; h < heads; ++h) {
                const index_t off = (r * heads + h) * capacity * d, from = src[static_cast<std::size_t>(r)] * per_row + h * capacity * d;
                std::memcpy(nk.data() + off, k.data() + from, static_cast<std::size_t>(len * d) * sizeof(Scalar));
                std::memcpy(nv.data() + off, v.data() + from, static_cast<std::size_t>(len * d) * sizeof(Scalar));
            }
        k = std::move(nk);
        v = std::move(nv);
    }
};

// Cross-attention keys and values of one document for one layer, head-major:
// (heads, L, d_kv) each, in the chosen precision (int8 with one scale per (head, position)).
struct cross_kv {
    ops::kv_precision precision = ops::kv_precision::f32;
    index_t heads = 0, length = 0, d = 0;
    aligned_ptr<std::byte> k, v;
    aligned_ptr<float> k_scale, v_scale;  // (heads, L), int8 only

    static std::size_t element_size(ops::kv_precision p) {
        return p == ops::kv_precision::f32 ? 4 : p == ops::kv_precision::bf16 ? 2 : 1;  // never native
    }
    std::size_t bytes() const {
        const std::size_t n = static_cast<std::size_t>(heads * length * d);
        return 2 * n * element_size(precision) + (precision == ops::kv_precision::i8 ? 2 * static_cast<std::size_t>(heads * length) * 4 : 0);
    }
    void allocate(ops::kv_precision p, index_t n_heads, index_t L, index_t d_kv) {
        precision = p, heads = n_heads, length = L, d = d_kv;
        const std::size_t n = static_cast<std::size_t>(n_heads * L * d_kv) * element_size(p);
        k = aligned_alloc_n<std::byte>(n);
        v = aligned_alloc_n<std::byte>(n);
        if (p == ops::kv_precision::i8) {
            k_scale = aligned_alloc_n<float>(static_cast<std::size_t>(n_heads * L));
            v_scale = aligned_alloc_n<float>(static_cast<std::size_t>(n_heads * L));
        }
    }
    ops::kv_matrix key(index_t h) const { return matrix(k.get(), k_scale.get(), h); }
    ops::kv_matrix value(index_t h) const { return matrix(v.get(), v_scale.get(), h); }

    // Stores rows [j0, j0 + n) of a (n, heads·d) projection into key (which = 0) or value storage.
    template <class Scalar>
    void store(int which, index_t j0, index_t n, const Scalar* src, index_t ld) {
        std::byte* base = which == 0 ? k.get() : v.get();
        float* scale = which == 0 ? k_scale.get() : v_scale.get();
        for (index_t h = 0; h < heads; ++h)
            for (index_t r = 0; r < n; ++r) {
                const Scalar* x = src + r * ld + h * d;
                const index_t row = h * length + j0 + r;
                if (precision == ops::kv_precision::f32) {
                    float* dst = reinterpret_cast<float*>(base) + row * d;
                    for (index_t c = 0; c < d; ++c) dst[c] = static_cast<float>(x[c]);
                } else if (precision == ops::kv_precision::bf16) {
                    auto* dst = reinterpret_cast<std::uint16_t*>(base) + row * d;
                    for (index_t c = 0; c < d; ++c) dst[c] = float_to_bf16(static_cast<float>(x[c]));
                } else {
                    // Symmetric int8 per (head, position): scale = max|x| / 127.
                    float m = 0;
                    for (index_t c = 0; c < d; ++c) m = std::max(m, std::abs(static_cast<float>(x[c])));
                    const float s = m > 0 ? m / 127.0f : 1.0f, inv = 1.0f / s;
                    scale[row] = s;
                    auto* dst = reinterpret_cast<std::int8_t*>(base) + row * d;
                    for (index_t c = 0; c < d; ++c) dst[c] = static_cast<std::int8_t>(std::lrint(static_cast<float>(x[c]) * inv));
                }
            }
    }

private:
    ops::kv_matrix matrix(const std::byte* base, const float* scale, index_t h) const {
        ops::kv_matrix m;
        m.precision = precision;
        m.data = base + static_cast<std::size_t>(h * length * d) * element_size(precision);
        m.scale = scale ? scale + h * length : nullptr;
        m.ld = d;
        return m;
    }
};

// What the self-attention layers share: the pre-norm, q/k/v stacked into one (3I, H) matrix so
// that all three projections are one GEMM, the output projection, and the sizes.
template <class Scalar, class Backend>
class fused_qkv_attention {
public:
    fused_qkv_attention() = default;
    fused_qkv_attention(const attention_weights& w, double eps, index_t heads)
        : norm_(w.norm, eps),
          wqkv_(to_backend<Scalar, Backend>(stack_rows(stack_rows(w.q, w.k), w.v))),
          wo_(to_backend<Scalar, Backend>(w.o)),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {}

protected:
    rms_norm<Scalar, Backend> norm_;
    tensor<Scalar, Backend> wqkv_;  // (3I, H)
    tensor<Scalar, Backend> wo_;    // (H, I)
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

template <class Scalar, class Backend>
class t5_self_attention : fused_qkv_attention<Scalar, Backend> {
    using base = fused_qkv_attention<Scalar, Backend>;
    using base::norm_, base::wqkv_, base::wo_, base::H_, base::inner_, base::heads_, base::d_;

public:
    t5_self_attention() = default;
    t5_self_attention(const attention_weights& w, double eps, index_t heads) : base(w, eps, heads) {}

    index_t heads() const noexcept { return heads_; }
    index_t d_kv() const noexcept { return d_; }
    index_t scratch_per_row() const noexcept { return H_ + 4 * inner_; }

    // x (R·T, H): T new positions P … P+T−1 of each of R rows. Appends their keys/values to
    // `cache`; bias (heads, T, P+T) holds the position bias and the causal mask.
    void forward(Scalar* x, index_t R, index_t T, index_t P, self_cache<Scalar, Backend>& cache, const Scalar* bias,
                 Scalar* scratch) const {
        const index_t n = R * T, I = inner_;
        Scalar* u = scratch;                // (n, H)
        Scalar* qkv = u + n * H_;          // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;     // (n, I)
        norm_.forward(x, u, n);
        ops::matmul_wt<Backend>(u, wqkv_.data(), qkv, n, H_, 3 * I);
        for (index_t r = 0; r < R; ++r)
            for (index_t h = 0; h < heads_; ++h)
                for (index_t t = 0; t < T; ++t) {
                    const Scalar* row = qkv + (r * T + t) * 3 * I;
                    std::memcpy(cache.k_at(r, h) + (P + t) * d_, row + I + h * d_, static_cast<std::size_t>(d_) * sizeof(Scalar));
                    std::memcpy(cache.v_at(r, h) + (P + t) * d_, row + 2 * I + h * d_, static_cast<std::size_t>(d_) * sizeof(Scalar));
                }
        std::vector<ops::attention_problem<Scalar>> problems;
        problems.reserve(static_cast<std::size_t>(R * heads_));
        for (index_t r = 0; r < R; ++r)
            for (index_t h = 0; h < heads_; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = qkv + r * T * 3 * I + h * d_;
                p.nq = T;
                p.ldq = 3 * I;
                p.k = host_matrix(cache.k_at(r, h));
                p.v = host_matrix(cache.v_at(r, h));
                p.nk = P + T;
                p.bias = bias + h * T * (P + T);
                p.out = ctx + r * T * I + h * d_;
                p.ldo = I;
                problems.push_back(p);
            }
        ops::attention<Backend>(problems, d_);
        ops::matmul_wt<Backend>(ctx, wo_.data(), x, n, I, H_, /*accumulate=*/true);
    }

private:
    ops::kv_matrix host_matrix(const Scalar* p) const {
        ops::kv_matrix m;  // the self-attention cache holds the scalar type itself
        m.precision = ops::kv_precision::native;
        m.data = p;
        m.ld = d_;
        return m;
    }
};

// The encoder's bidirectional self-attention over whole sequences (no cache).
template <class Scalar, class Backend>
class t5_encoder_self_attention : fused_qkv_attention<Scalar, Backend> {
    using base = fused_qkv_attention<Scalar, Backend>;
    using base::norm_, base::wqkv_, base::wo_, base::H_, base::inner_, base::heads_, base::d_;

public:
    t5_encoder_self_attention() = default;
    t5_encoder_self_attention(const attention_weights& w, double eps, index_t heads) : base(w, eps, heads) {}

    // Scratch forward() needs for B rows of L positions with queries in blocks of `block`.
    index_t scratch_size(index_t B, index_t L, index_t block) const noexcept {
        return B * L * (H_ + 4 * inner_) + heads_ * std::min(block, L) * L;
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
        ops::matmul_wt<Backend>(u, wqkv_.data(), qkv, n, H_, 3 * I);
        std::vector<ops::attention_problem<Scalar>> problems;
        for (index_t i0 = 0; i0 < L; i0 += block) {
            const index_t nq = std::min(block, L - i0);
            // Without a mask every row shares one bias block; with one, each row has its own.
            const index_t groups = mask ? B : 1;
            for (index_t g = 0; g < groups; ++g) {
                bias.fill(i0, nq, L, /*causal=*/false, b_, mask ? mask + g * L : nullptr);
                problems.clear();
                for (index_t b = mask ? g : 0; b < (mask ? g + 1 : B); ++b)
                    for (index_t h = 0; h < heads_; ++h) {
                        ops::attention_problem<Scalar> p;
                        p.q = qkv + (b * L + i0) * 3 * I + h * d_;
                        p.nq = nq;
                        p.ldq = 3 * I;
                        p.k = rows_of(qkv + b * L * 3 * I + I + h * d_);
                        p.v = rows_of(qkv + b * L * 3 * I + 2 * I + h * d_);
                        p.nk = L;
                        p.bias = b_ + h * nq * L;
                        p.out = ctx + (b * L + i0) * I + h * d_;
                        p.ldo = I;
                        problems.push_back(p);
                    }
                ops::attention<Backend>(problems, d_);
            }
        }
        ops::matmul_wt<Backend>(ctx, wo_.data(), x, n, I, H_, /*accumulate=*/true);
    }

private:
    ops::kv_matrix rows_of(const Scalar* p) const {
        ops::kv_matrix m;  // keys/values straight from the fused projection: row stride 3I
        m.precision = ops::kv_precision::native;
        m.data = p;
        m.ld = 3 * inner_;
        return m;
    }
};

template <class Scalar, class Backend>
class t5_cross_attention {
public:
    t5_cross_attention() = default;
    t5_cross_attention(const attention_weights& w, double eps, index_t heads)
        : norm_(w.norm, eps),
          wq_(to_backend<Scalar, Backend>(w.q)),
          wkv_(to_backend<Scalar, Backend>(stack_rows(w.k, w.v))),
          wo_(to_backend<Scalar, Backend>(w.o)),
          H_(w.o.dim(0)),
          inner_(w.o.dim(1)),
          heads_(heads),
          d_(inner_ / heads) {}

    index_t inner() const noexcept { return inner_; }
    index_t scratch_per_row() const noexcept { return H_ + 2 * inner_; }

    // k, v = h·Wkᵀ, h·Wvᵀ for encoder rows [j0, j0 + n) of one document, into `kv`.
    // scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        ops::matmul_wt<Backend>(h, wkv_.data(), scratch, n, H_, 2 * inner_);
        kv.store(0, j0, n, scratch, 2 * inner_);
        kv.store(1, j0, n, scratch + inner_, 2 * inner_);
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
        ops::matmul_wt<Backend>(u, wq_.data(), q, n, H_, I);
        std::vector<ops::attention_problem<Scalar>> problems;
        for (std::size_t d = 0; d < docs.size(); ++d) {
            const index_t r0 = row_begin[d], r1 = row_begin[d + 1];
            if (r0 == r1) continue;
            for (index_t h = 0; h < heads_; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = q + r0 * T * I + h * d_;
                p.nq = (r1 - r0) * T;
                p.ldq = I;
                p.k = docs[d]->key(h);
                p.v = docs[d]->value(h);
                p.nk = docs[d]->length;
                p.out = ctx + r0 * T * I + h * d_;
                p.ldo = I;
                problems.push_back(p);
            }
        }
        ops::attention<Backend>(problems, d_);
        ops::matmul_wt<Backend>(ctx, wo_.data(), x, n, I, H_, /*accumulate=*/true);
    }

private:
    rms_norm<Scalar, Backend> norm_;
    tensor<Scalar, Backend> wq_, wkv_, wo_;
    index_t H_ = 0, inner_ = 0, heads_ = 0, d_ = 0;
};

} // namespace locost::layers
