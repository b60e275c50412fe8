// Longformer self-attention as LED's encoder uses it (Beltagy et al. 2020, §3.1; LEDEncoderSelfAttention
// inside LEDEncoderLayer, post-LayerNorm as BART):
//
//   local token i:   q, k, v = s·(x·Wqᵀ + bq), x·Wkᵀ + bk, x·Wvᵀ + bv              s = d_head^−½
//                    ctx_i = softmax_{j ∈ W(i) ∪ G}(q_i·k_jᵀ) · v     W(i) = {|i − j| ≤ w/2, j valid, j ∉ G}
//   global token g:  q̃, k̃, ṽ = s·(x·W̃qᵀ + b̃q), x·W̃kᵀ + b̃k, x·W̃vᵀ + b̃v          (the *_global projections)
//                    ctx_g = softmax_{j valid}(q̃_g·k̃_jᵀ) · ṽ
//   x = LayerNorm(x + ctx·Woᵀ + bo)
//
// G: the row's global positions. Global tokens are left out of every window and reach each query
// through the second key/value segment (their local keys/values k, v), so none is counted twice;
// a global token's own row is then replaced by its global attention over the whole row. The local
// part is layers/local_attention's sliding window; the global rows are |G| queries over L keys,
// one more call of the attention op: O(L·(w + |G|)) in all.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "../ops/copy.hpp"
#include "../ops/embedding.hpp"
#include "bart_attention.hpp"
#include "local_attention.hpp"

namespace locost::layers {

struct longformer_weights {
    biased_attention_weights local;    // query/key/value/output with biases, self_attn_layer_norm
    tensor<float> qg, kg, vg;          // (I, H): query_global, key_global, value_global
    tensor<float> bqg, bkg, bvg;       // (I)
};

// Global positions of B rows: row b's in increasing order (valid positions only).
struct global_positions {
    std::vector<std::vector<index_t>> rows;

    index_t max_count() const {
        std::size_t m = 0;
        for (const auto& r : rows) m = std::max(m, r.size());
        return static_cast<index_t>(m);
    }
    bool is_global(index_t b, index_t i) const {
        const auto& r = rows[static_cast<std::size_t>(b)];
        return std::binary_search(r.begin(), r.end(), i);
    }
};

template <class Scalar, class Backend>
class longformer_self_attention : public biased_self_attention_base<Scalar, Backend> {
    using base = biased_self_attention_base<Scalar, Backend>;

public:
    longformer_self_attention() = default;
    // p: the projections' precision (bf16_products under compute = bf16).
    longformer_self_attention(const longformer_weights& w, double eps, index_t heads, index_t window,
                              weight_precision p = weight_precision::native)
        : base(w.local, eps, heads, p),
          window_(window),
          wqg_(detail::scaled(w.qg, this->scale_), p),
          bqg_(to_backend<Scalar, Backend>(detail::scaled(w.bqg, this->scale_))),
          wkvg_(stack_rows(w.kg, w.vg), p),
          bkvg_(to_backend<Scalar, Backend>(detail::concat({&w.bkg, &w.bvg}))) {}

    index_t window() const noexcept { return window_; }

    index_t scratch_size(index_t B, index_t L, index_t) const noexcept { return scratch_elements(this->H_, this->inner_, B, L); }
    // The same from the dimensions alone (the memory estimate, before any layer exists).
    static constexpr index_t scratch_elements(index_t H, index_t I, index_t B, index_t L) noexcept {
        const index_t n = B * L;
        return n * (4 * I + 1) + n * 2 * I + n * (H + 4 * I + 1);  // local; global k, v; global rows (≤ L per row)
    }

    // x (B·L, H) = LayerNorm(x + LongformerSelfAttention(x)); mask (B, L) of 0/1 or nullptr.
    void forward(Scalar* x, index_t B, index_t L, const float* mask, const global_positions& globals, Scalar* scratch) const {
        const index_t n = B * L, I = this->inner_, G = globals.max_count();
        Scalar* qkv = scratch;            // (n, 3I)
        Scalar* ctx = qkv + n * 3 * I;    // (n, I)
        Scalar* key_bias = ctx + n * I;   // (B, L): padding and global positions masked
        this->project(x, qkv, n);
        fill_key_bias<Backend>(mask, B, L, [&](index_t b, index_t i) { return globals.is_global(b, i); }, key_bias);
        // The global tokens' own keys/values, gathered per row: the second segment.
        Scalar* gkv = key_bias + n;       // (B·G, 2I)
        std::vector<std::int64_t> at = rows_of(globals, B, L, G);
        gather_kv(qkv, at, gkv, B * G);
        global_segment<Scalar> seg;
        if (G > 0) {
            seg = {gkv, gkv + I, 2 * I, G * 2 * I, {}};
            for (const auto& r : globals.rows) seg.count.push_back(static_cast<index_t>(r.size()));
        }
        const local_qkv<Scalar> in{qkv, qkv + I, qkv + 2 * I, 3 * I, 3 * I, 3 * I};
        const index_t one_sided = window_ / 2;
        local_attention<Scalar, Backend>(in, B, L, this->heads_, this->d_, sliding_window{one_sided}, std::max<index_t>(16, one_sided),
                                         key_bias, nullptr, seg, {}, ctx, I);
        if (G > 0) global_rows(x, B, L, mask, globals, at, ctx, gkv + B * G * 2 * I);
        this->output(x, ctx, n);
    }

private:
    // Row index (b·L + position) of each global token, B·G entries (−1: none).
    static std::vector<std::int64_t> rows_of(const global_positions& globals, index_t B, index_t L, index_t G) {
        std::vector<std::int64_t> at(static_cast<std::size_t>(B * G), -1);
        for (index_t b = 0; b < B; ++b)
            for (std::size_t g = 0; g < globals.rows[static_cast<std::size_t>(b)].size(); ++g)
                at[static_cast<std::size_t>(b * G) + g] = b * L + globals.rows[static_cast<std::size_t>(b)][g];
        return at;
    }

    // gkv (rows, 2I) = the k | v columns of qkv at the rows `at` (zeros where none): a gather of
    // one row per slot, none for an empty slot.
    void gather_kv(const Scalar* qkv, const std::vector<std::int64_t>& at, Scalar* gkv, index_t rows) const {
        const index_t I = this->inner_;
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows + 1), 0), src;
        for (index_t r = 0; r < rows; ++r) {
            const std::int64_t a = at[static_cast<std::size_t>(r)];
            if (a >= 0) src.push_back(a);
            offsets[static_cast<std::size_t>(r + 1)] = static_cast<std::int64_t>(src.size());
        }
        const backend_array<std::int64_t, Backend> off(offsets.data(), rows + 1), from(src.data(), static_cast<index_t>(src.size()));
        ops::gather_sum<Backend>(qkv + I, 3 * I, 2 * I, off.data(), from.data(), rows, gkv, 2 * I);
    }

    // ctx rows of the global tokens = their global attention over every valid key of their row.
    void global_rows(const Scalar* x, index_t B, index_t L, const float* mask, const global_positions& globals,
                     const std::vector<std::int64_t>& at, Scalar* ctx, Scalar* scratch) const {
        const index_t n = B * L, I = this->inner_, H = this->H_, G = globals.max_count();
        Scalar* kvg = scratch;              // (n, 2I): k̃ | ṽ of every token
        Scalar* xg = kvg + n * 2 * I;       // (B·G, H): the global tokens' states
        Scalar* qg = xg + B * G * H;        // (B·G, I)
        Scalar* cg = qg + B * G * I;        // (B·G, I)
        Scalar* pad = cg + B * G * I;       // (B, L): padding masked
        wkvg_.apply(x, kvg, n);
        ops::add_rows<Backend>(kvg, bkvg_.data(), n, 2 * I);
        std::vector<std::int64_t> rows(at);
        for (auto& r : rows) r = std::max<std::int64_t>(r, 0);  // empty slots read row 0; never used
        const backend_array<std::int64_t, Backend> rows_on_backend(rows.data(), B * G);  // a device's copy
        ops::embedding<Backend>(x, H, rows_on_backend.data(), B * G, xg);
        wqg_.apply(xg, qg, B * G);
        ops::add_rows<Backend>(qg, bqg_.data(), B * G, I);
        fill_key_bias<Backend>(mask, B, L, [](index_t, index_t) { return false; }, pad);
        std::vector<ops::attention_problem<Scalar>> problems;
        for (index_t b = 0; b < B; ++b) {
            const index_t count = static_cast<index_t>(globals.rows[static_cast<std::size_t>(b)].size());
            if (count == 0) continue;
            for (index_t h = 0; h < this->heads_; ++h) {
                ops::attention_problem<Scalar> p;
                p.q = qg + b * G * I + h * this->d_;
                p.nq = count;
                p.ldq = I;
                p.k = native_rows(kvg + b * L * 2 * I + h * this->d_, 2 * I);
                p.v = native_rows(kvg + b * L * 2 * I + I + h * this->d_, 2 * I);
                p.nk = L;
                p.key_bias = pad + b * L;
                p.out = cg + b * G * I + h * this->d_;
                p.ldo = I;
                problems.push_back(p);
            }
        }
        ops::attention<Backend>(problems, this->d_);
        for (index_t r = 0; r < B * G; ++r)
            if (at[static_cast<std::size_t>(r)] >= 0) transfer<Backend>::copy(ctx + at[static_cast<std::size_t>(r)] * I, cg + r * I, static_cast<std::size_t>(I));
    }

    index_t window_ = 0;
    weight_matrix<Scalar, Backend> wqg_;
    tensor<Scalar, Backend> bqg_;
    weight_matrix<Scalar, Backend> wkvg_;
    tensor<Scalar, Backend> bkvg_;
};

} // namespace locost::layers
