// Feed-forward sub-layer with biases and a LayerNorm after the residual (fc1, fc2,
// final_layer_norm of BartEncoderLayer / BartDecoderLayer: BART, LED):
//
//     x = LayerNorm(x + act(x·W1ᵀ + b1)·W2ᵀ + b2)
//
// act is activation_function ("gelu" is the exact erf form). The second GEMM accumulates into
// x (beta = 1); callers pass rows in tiles to bound the (rows, F) buffer.
//
// PreNorm (Pegasus-X's PegasusXEncoderLayer / PegasusXDecoderLayer): the same weights with the
// LayerNorm first,  x = x + act(LayerNorm(x)·W1ᵀ + b1)·W2ᵀ + b2.
//
// Names, under the encoder or decoder layer's prefix: fc1 and fc2 (.weight, .bias) and
// final_layer_norm (.weight, .bias), as all three families name them.
#pragma once
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "layer_norm.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

template <class Scalar, class Backend, activation Act, bool PreNorm = false>
class biased_feed_forward {
public:
    struct weights {
        tensor<float> w1, b1;          // (F, H), (F)
        tensor<float> w2, b2;          // (H, F), (H)
        tensor<float> norm_w, norm_b;  // (H)
    };
    // The layer at `layer`; `storage`: how the runtime keeps w1 and w2.
    static weights read(const tensor_source& layer, index_t H, index_t F, param_storage storage) {
        weights w;
        w.w1 = layer.get("fc1.weight", {F, H}, {param_kind::ff_in, storage});
        w.b1 = layer.get("fc1.bias", {F}, {param_kind::bias});
        w.w2 = layer.get("fc2.weight", {H, F}, {param_kind::ff_out, storage});
        w.b2 = layer.get("fc2.bias", {H}, {param_kind::bias});
        auto n = layer_norm<float, cpu>::read(layer / "final_layer_norm", H);
        w.norm_w = std::move(n.w);
        w.norm_b = std::move(n.b);
        return w;
    }

    biased_feed_forward() = default;
    // p: storage of w1 and w2 (reduced precisions for decoders, layers/weight_matrix.hpp).
    biased_feed_forward(const weights& w, double eps, weight_precision p = weight_precision::native)
        : w1_(w.w1, p), b1_(to_backend<Scalar, Backend>(w.b1)), w2_(w.w2, p), b2_(to_backend<Scalar, Backend>(w.b2)),
          norm_(w.norm_w, w.norm_b, eps), H_(w.w2.dim(0)), F_(w.w2.dim(1)) {}

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

}  // namespace locost::layers
