// The projections of multi-head attention, as every attention layer here holds them:
//
//   self-attention:   [q | k | v] = u·[s·Wq ; Wk ; Wv]ᵀ + [s·bq ; bk ; bv]    one GEMM over (3I, H)
//   cross-attention:  q = u·(s·Wq)ᵀ + s·bq                                   each step
//                     [k | v] = h·[Wk ; Wv]ᵀ + [bk ; bv]                      once per document (h:
//                                                 encoder states), or folded into the attention
//   output:           x += ctx·Woᵀ + bo
//
// s = d_head^−½ for layers that scale their scores (BART and its descendants); T5's layers learnt
// it into Wq and pass s = 1. Scaling q at load (s·(u·Wqᵀ + bq) = u·(s·Wq)ᵀ + s·bq) keeps the
// attention op unscaled. Biases are optional: an empty tensor is none.
//
// Names: each projection `p` of the module is read as p.weight (and p.bias when biased); the
// layer says what its module calls them (projection_names).
#pragma once
#include <cmath>
#include <string_view>
#include <vector>

#include "../ops/elementwise.hpp"
#include "kv_cache.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

// What a checkpoint's attention module calls its four projections.
struct projection_names {
    std::string_view q, k, v, o;
};

struct projection_weights {
    tensor<float> q, k, v, o;      // (I, H) ×3, (H, I)
    tensor<float> bq, bk, bv, bo;  // (I) ×3, (H); empty without biases (bo also where o is not read)

    bool biased() const noexcept { return !bq.empty(); }

    // The projections of `module`, named `n`; `qo`, `kv`: how the runtime keeps the query/output
    // and the key/value projections (they differ in a decoder's cross-attention). Weights first,
    // then biases, as the checkpoints list them.
    static projection_weights read(const tensor_source& module, const projection_names& n, index_t H, index_t inner, bool biased,
                                   param_storage qo, param_storage kv) {
        projection_weights w;
        w.q = (module / n.q).get("weight", {inner, H}, {param_kind::query, qo});
        w.k = (module / n.k).get("weight", {inner, H}, {param_kind::key, kv});
        w.v = (module / n.v).get("weight", {inner, H}, {param_kind::value, kv});
        w.o = (module / n.o).get("weight", {H, inner}, {param_kind::attention_out, qo});
        if (!biased) return w;
        w.bq = (module / n.q).get("bias", {inner}, {param_kind::bias});
        w.bk = (module / n.k).get("bias", {inner}, {param_kind::bias});
        w.bv = (module / n.v).get("bias", {inner}, {param_kind::bias});
        w.bo = (module / n.o).get("bias", {H}, {param_kind::bias});
        return w;
    }

    // The fused forms, each with its bias (empty without biases): [s·Wq ; Wk ; Wv], s·Wq, [Wk ; Wv].
    tensor<float> qkv(double s) const { return stack_rows(stack_rows(scaled(q, s), k), v); }
    tensor<float> qkv_bias(double s) const {
        if (!biased()) return {};
        const tensor<float> sq = scaled(bq, s);
        return concat({&sq, &bk, &bv});
    }
    tensor<float> query(double s) const { return scaled(q, s); }
    tensor<float> query_bias(double s) const { return biased() ? scaled(bq, s) : tensor<float>{}; }
    tensor<float> kv() const { return stack_rows(k, v); }
    tensor<float> kv_bias() const { return biased() ? concat({&bk, &bv}) : tensor<float>{}; }
};

// The sizes every attention layer works with: model width H, inner = heads × d.
struct attention_dims {
    index_t H = 0, inner = 0, heads = 0, d = 0;

    attention_dims() = default;
    attention_dims(const projection_weights& w, index_t n_heads) : H(w.o.dim(0)), inner(w.o.dim(1)), heads(n_heads), d(inner / n_heads) {}
    // d_head^−½, the score scale of the layers that apply one.
    double scale() const noexcept { return 1.0 / std::sqrt(static_cast<double>(d)); }
};

// y = x·Wᵀ + b, b optional; p: W's storage (layers/weight_matrix.hpp).
template <class Scalar, class Backend>
class linear_projection {
public:
    linear_projection() = default;
    linear_projection(const tensor<float>& w, const tensor<float>& b, weight_precision p) : w_(w, p), out_(w.dim(0)) {
        if (!b.empty()) b_ = to_backend<Scalar, Backend>(b);
    }

    // y (n, out) (+)= x·Wᵀ + b.
    void apply(const Scalar* x, Scalar* y, index_t n, bool accumulate = false) const {
        w_.apply(x, y, n, accumulate);
        if (!b_.empty()) ops::add_rows<Backend>(y, b_.data(), n, out_);
    }
    const weight_matrix<Scalar, Backend>& matrix() const noexcept { return w_; }

private:
    weight_matrix<Scalar, Backend> w_;
    tensor<Scalar, Backend> b_;
    index_t out_ = 0;
};

// A cross-attention's keys and values: projected once per document into a cross_kv, or folded
// into the attention over the document's states (folded_cross_attention, layers/kv_cache.hpp).
template <class Scalar, class Backend>
class document_projection {
public:
    document_projection() = default;
    // kv_p: the projection's storage (once per document over every encoder position: a large
    // product, native or bf16/int8 products).
    document_projection(const projection_weights& w, const attention_dims& dims, weight_precision kv_p, bool folded)
        : dims_(dims), products_(document_products(kv_p)) {
        if (folded) folded_ = folded_cross_attention<Scalar, Backend>(w.k, w.v, w.bv, dims.heads, products_);
        else kv_ = linear_projection<Scalar, Backend>(w.kv(), w.kv_bias(), kv_p);
    }

    // Scratch per decoder row that attend() needs beyond the context.
    index_t scratch_per_row() const noexcept { return folded_.active() ? folded_.scratch_per_row() : 0; }

    // k, v for encoder rows [j0, j0 + n) of one document's states h, into `kv` (projected form
    // only). scratch: n · 2·inner elements.
    void project(const Scalar* h, index_t j0, index_t n, cross_kv& kv, Scalar* scratch) const {
        LOCOST_ASSERT(!folded_.active());
        const index_t I = dims_.inner;
        kv_.apply(h, scratch, n);
        kv.store<Backend>(0, j0, n, scratch, 2 * I);
        kv.store<Backend>(1, j0, n, scratch + I, 2 * I);
    }

    // ctx (n, I) for queries q (n = R·T rows); rows [row_begin[d], row_begin[d+1]) attend to
    // document d. scratch: n · scratch_per_row() elements.
    void attend(const Scalar* q, index_t T, const std::vector<const cross_kv*>& docs, const std::vector<index_t>& row_begin, Scalar* ctx,
                Scalar* scratch) const {
        if (folded_.active()) folded_.attend(q, T, docs, row_begin, ctx, scratch);
        else document_attention<Scalar, Backend>(q, T, dims_.heads, dims_.d, docs, row_begin, ctx, products_);
    }

private:
    attention_dims dims_;
    ops::attention_products products_ = ops::attention_products::exact;  // how attend() multiplies (--compute)
    linear_projection<Scalar, Backend> kv_;                              // (2I, H): k | v (projected form)
    folded_cross_attention<Scalar, Backend> folded_;                     // (folded form)
};

}  // namespace locost::layers
