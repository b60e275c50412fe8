// LayerNorm with a bias (BART, LED, Pegasus-X) — torch.nn.LayerNorm over the last dimension:
//
//     y = w ⊙ (x − mean(x)) / sqrt(var(x) + eps) + b        per row of width H; var is biased (÷H)
//
// eps is the family's (BART: 1e-5, PyTorch's default). Statistics accumulate in the scalar type,
// as PyTorch does for float32.
#pragma once
#include "../ops/elementwise.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

struct layer_norm_weights {
    tensor<float> w, b;  // (H) each
};

template <class Scalar, class Backend>
class layer_norm {
public:
    using weights = layer_norm_weights;
    // The module's "weight" and "bias" under `at`.
    static weights read(const tensor_source& at, index_t H) {
        return {at.get("weight", {H}, {param_kind::norm_scale}), at.get("bias", {H}, {param_kind::norm_shift})};
    }

    layer_norm() = default;
    layer_norm(const weights& w, double eps) : layer_norm(w.w, w.b, eps) {}
    layer_norm(const tensor<float>& w, const tensor<float>& b, double eps)
        : w_(to_backend<Scalar, Backend>(w)), b_(to_backend<Scalar, Backend>(b)), eps_(static_cast<Scalar>(eps)) {}

    index_t width() const { return w_.numel(); }

    // y (rows, H) = LayerNorm(x (rows, H)); x and y may be the same buffer.
    void forward(const Scalar* x, Scalar* y, index_t rows) const {
        ops::layer_norm<Backend>(x, width(), w_.data(), b_.data(), eps_, y, width(), rows, width());
    }

private:
    tensor<Scalar, Backend> w_, b_;
    Scalar eps_ = Scalar(1e-5);
};

}  // namespace locost::layers
