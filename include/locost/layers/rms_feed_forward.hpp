// Feed-forward sub-layer with an RMSNorm first, no biases, and the residual — T5LayerFF of T5,
// LongT5 and LOCOST (docs/models.md §1.4):
//
//     u = RMSNorm(x)
//     gated:  x = x + ( act(u·W0ᵀ) ⊙ (u·W1ᵀ) ) · Woᵀ       (DenseReluDense.wi_0, wi_1, wo)
//     plain:  x = x + act(u·Wiᵀ) · Woᵀ                     (DenseReluDense.wi, wo)
//
// No biases. act is a template parameter ("gated-gelu" = gelu_tanh, "relu" = relu, ...).
// W0 and W1 are stacked into one (2F, H) matrix so both projections are one GEMM; the output
// projection accumulates straight into x (GEMM with beta = 1), so the layer needs only a
// (rows, 2F) buffer. Callers pass rows in tiles to bound that buffer.
//
// Names, under the sub-layer's prefix: layer_norm.weight, DenseReluDense.wi_0 and wi_1 (gated)
// or wi, and DenseReluDense.wo.
#pragma once
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"
#include "parameter.hpp"
#include "rms_norm.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

template <class Scalar, class Backend, activation Act, bool Gated>
class rms_feed_forward {
public:
    struct weights {
        tensor<float> norm;        // (H)
        tensor<float> wi_0, wi_1;  // (F, H) each; plain: wi in wi_0, wi_1 empty
        tensor<float> wo;          // (H, F)
    };
    // The sub-layer at `sub`; `storage`: how the runtime keeps wi and wo.
    static weights read(const tensor_source& sub, index_t H, index_t F, param_storage storage) {
        const tensor_source m = sub / "DenseReluDense";
        weights w;
        w.norm = rms_norm<float, cpu>::read(sub / "layer_norm", H);
        if constexpr (Gated) {
            w.wi_0 = m.get("wi_0.weight", {F, H}, {param_kind::ff_in, storage});
            w.wi_1 = m.get("wi_1.weight", {F, H}, {param_kind::ff_in, storage});
        } else {
            w.wi_0 = m.get("wi.weight", {F, H}, {param_kind::ff_in, storage});
        }
        w.wo = m.get("wo.weight", {H, F}, {param_kind::ff_out, storage});
        return w;
    }

    rms_feed_forward() = default;
    // p: the storage of wi and wo (reduced precisions for the decoder, layers/weight_matrix.hpp).
    rms_feed_forward(const weights& w, double eps, weight_precision p = weight_precision::native)
        : norm_(w.norm, eps), wi_(Gated ? stack_rows(w.wi_0, w.wi_1) : w.wi_0.clone(), p), wo_(w.wo, p), H_(w.wo.dim(0)), F_(w.wo.dim(1)) {}

    index_t d_ff() const noexcept { return F_; }
    // Scratch per row that forward() needs: H + (Gated ? 2F : F).
    index_t scratch_per_row() const noexcept { return scratch_per_row(H_, F_); }
    static constexpr index_t scratch_per_row(index_t H, index_t F) noexcept { return H + (Gated ? 2 : 1) * F; }

    // x (rows, H) += FF(x); scratch holds rows · scratch_per_row() elements.
    void forward(Scalar* x, index_t rows, Scalar* scratch) const {
        constexpr index_t k = Gated ? 2 : 1;
        Scalar* u = scratch;              // (rows, H)
        Scalar* h = scratch + rows * H_;  // (rows, k·F): [u·W0ᵀ | u·W1ᵀ]
        norm_.forward(x, u, rows);
        wi_.apply(u, h, rows);
        if constexpr (Gated) ops::gate<Act, Backend>(h, h + F_, rows, F_, 2 * F_);
        else ops::activate<Act, Backend>(h, rows * F_);
        wo_.apply(h, k * F_, rows, x, H_, Scalar(1), /*accumulate=*/true);
    }

private:
    rms_norm<Scalar, Backend> norm_;
    weight_matrix<Scalar, Backend> wi_;  // (k·F, H)
    weight_matrix<Scalar, Backend> wo_;  // (H, F)
    index_t H_ = 0, F_ = 0;
};

}  // namespace locost::layers
