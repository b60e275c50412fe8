// RMSNorm, the T5 LayerNorm — docs/models.md §1.5:
//
//     y = w ⊙ x / sqrt(mean(x²) + eps)          per row of width H; no mean subtraction, no bias
//
// eps is layer_norm_epsilon (1e-6). The sum of squares accumulates in the scalar type (float32
// for production), as the reference does.
#pragma once
#include "../ops/elementwise.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class rms_norm {
public:
    using weights = tensor<float>;

    rms_norm() = default;
    // The module's weight: `at` + "weight", (H).
    static tensor<float> read(const tensor_source& at, index_t H) { return at.get("weight", {H}, {param_kind::norm_scale}); }
    rms_norm(const tensor<float>& w, double eps) : w_(to_backend<Scalar, Backend>(w)), eps_(static_cast<Scalar>(eps)) {}

    index_t width() const { return w_.numel(); }

    // y (rows, H) = RMSNorm(x (rows, H)); x and y may be the same buffer.
    void forward(const Scalar* x, Scalar* y, index_t rows) const {
        ops::rms_norm<Backend>(x, width(), w_.data(), eps_, y, width(), rows, width());
    }

private:
    tensor<Scalar, Backend> w_;
    Scalar eps_ = Scalar(1e-6);
};

}  // namespace locost::layers
