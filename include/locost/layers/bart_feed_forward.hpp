// BART's feed-forward sub-layer with biases and post-LayerNorm (fc1, fc2, final_layer_norm of
// BartEncoderLayer / BartDecoderLayer):
//
//     x = LayerNorm(x + act(x·W1ᵀ + b1)·W2ᵀ + b2)
//
// act is activation_function ("gelu" is the exact erf form). The second GEMM accumulates into
// x (beta = 1); callers pass rows in tiles to bound the (rows, F) buffer.
//
// PreNorm (Pegasus-X's PegasusXEncoderLayer / PegasusXDecoderLayer): the same weights with the
// LayerNorm first,  x = x + act(LayerNorm(x)·W1ᵀ + b1)·W2ᵀ + b2.
#pragma once
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "layer_norm.hpp"
#include "parameter.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

template <class Scalar, class Backend, activation Act, bool PreNorm = false>
class bart_feed_forward {
public:
    struct weights {
        tensor<float> w1, b1;          // (F, H), (F)
        tensor<float> w2, b2;          // (H, F), (H)
        tensor<float> norm_w, norm_b;  // (H)
    };

    bart_feed_forward() = default;
    // p: storage of w1 and w2 (reduced precisions for decoders, layers/weight_matrix.hpp).
    bart_feed_forward(const weights& w, double eps, weight_precision p = weight_precision::native)
        : w1_(w.w1, p),
          b1_(to_backend<Scalar, Backend>(w.b1)),
          w2_(w.w2, p),
          b2_(to_backend<Scalar, Backend>(w.b2)),
          norm_(w.norm_w, w.norm_b, eps),
          H_(w.w2.dim(0)),
          F_(w.w2.dim(1)) {}

    index_t scratch_per_row() const noexcept { return scratch_per_row(H_, F_); }
    static constexpr index_t scratch_per_row(index_t H, index_t F) noexcept { return F + (PreNorm ? H : 0); }

    // x (rows, H) = LayerNorm(x + FF(x)) (PreNorm: x + FF(LayerNorm(x))); scratch holds rows ·
    // scratch_per_row() elements.
    void forward(Scalar* x, index_t rows, Scalar* scratch) const {
        Scalar* h = scratch;  // (rows, F)
        const Scalar* in = x;
        if constexpr (PreNorm) {
            Scalar* u = h + rows * F_;  // (rows, H)
            norm_.forward(x, u, rows);
            in = u;
        }
        w1_.apply(in, h, rows);
        ops::add_rows<Backend>(h, b1_.data(), rows, F_);
        ops::activate<Act, Backend>(h, rows * F_);
        w2_.apply(h, x, rows, /*accumulate=*/true);
        ops::add_rows<Backend>(x, b2_.data(), rows, H_);
        if constexpr (!PreNorm) norm_.forward(x, x, rows);
    }

private:
    weight_matrix<Scalar, Backend> w1_;
    tensor<Scalar, Backend> b1_;
    weight_matrix<Scalar, Backend> w2_;
    tensor<Scalar, Backend> b2_;
    layer_norm<Scalar, Backend> norm_;
    index_t H_ = 0, F_ = 0;
};

} // namespace locost::layers
