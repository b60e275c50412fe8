// A linear layer's weight W (out, in), kept in the precision the model was asked for:
//
//     native    W as given, in the layer's scalar type (the default; exact)
//     bf16      round-to-nearest-even bfloat16 of W
//     i8        q[o, :] = round(W[o, :] / s[o]) in [−127, 127],  s[o] = max|W[o, :]| / 127
//     bf16_products  stored as bf16; products of many rows round x to bfloat16 too
//     i8_products    stored as i8; products of many rows quantize x to int8 per row too
//
// apply() is y = x·Wᵀ (ops::linear), whatever the storage. Reduced precisions exist for the
// decoder and LM head, whose every weight a decoding step reads once; bf16_products and
// i8_products for the encoder's and the cross-attention cache's large products (ops/linear.hpp
// says why).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../config/error.hpp"
#include "../core/dtype.hpp"
#include "../ops/linear.hpp"
#include "parameter.hpp"

namespace locost::layers {

using ops::weight_precision;

template <class Scalar, class Backend>
class weight_matrix {
public:
    weight_matrix() = default;
    // Errors: weights.precision when a reduced precision is asked of a non-float32 scalar.
    explicit weight_matrix(const tensor<float>& w, weight_precision p = weight_precision::native) : weight_matrix(w.clone(), p) {}
    // A temporary (a stacked matrix, a freshly loaded tensor) is kept without a copy.
    explicit weight_matrix(tensor<float>&& w, weight_precision p = weight_precision::native)
        : precision_(p), out_(w.dim(0)), in_(w.dim(1)) {
        if (p != weight_precision::native && !std::is_same_v<Scalar, float>)
            throw error("weights.precision", "reduced-precision weights (bfloat16, int8) need float32 computation");
        const index_t n = w.numel();
        switch (p) {
        case weight_precision::native: native_ = to_backend<Scalar, Backend>(std::move(w)); break;
        case weight_precision::bf16:
        case weight_precision::bf16_products: {
            tensor<std::uint16_t> half(w.shape());
            for (index_t i = 0; i < n; ++i) half[i] = float_to_bf16(w[i]);
            half_ = move_to_backend<Backend>(std::move(half));
            break;
        }
        case weight_precision::i8:
        case weight_precision::i8_products: {
            tensor<std::int8_t> quant(w.shape());
            tensor<float> scale({out_});
            for (index_t o = 0; o < out_; ++o) {
                const float* row = w.data() + o * in_;
                float m = 0;
                for (index_t k = 0; k < in_; ++k) m = std::max(m, std::fabs(row[k]));
                const float s = m > 0 ? m / 127.0f : 1.0f;
                scale[o] = s;
                for (index_t k = 0; k < in_; ++k)
                    quant[o * in_ + k] = static_cast<std::int8_t>(std::clamp(round_half_even(row[k] / s), -127.0f, 127.0f));
            }
            quant_ = move_to_backend<Backend>(std::move(quant));
            scale_ = move_to_backend<Backend>(std::move(scale));
            break;
        }
        }
    }

    weight_precision precision() const noexcept { return precision_; }
    index_t out() const noexcept { return out_; }
    index_t in() const noexcept { return in_; }
    // Bytes held (the int8 scales included).
    std::size_t bytes() const noexcept {
        const auto n = static_cast<std::size_t>(out_ * in_);
        switch (precision_) {
        case weight_precision::native: return n * sizeof(Scalar);
        case weight_precision::bf16:
        case weight_precision::bf16_products: return n * 2;
        case weight_precision::i8:
        case weight_precision::i8_products: return n + static_cast<std::size_t>(out_) * sizeof(float);
        }
        return 0;
    }

    ops::weight_view view() const noexcept {
        switch (precision_) {
        case weight_precision::native: return {precision_, native_.data(), nullptr, out_, in_};
        case weight_precision::bf16:
        case weight_precision::bf16_products: return {precision_, half_.data(), nullptr, out_, in_};
        case weight_precision::i8:
        case weight_precision::i8_products: return {precision_, quant_.data(), scale_.data(), out_, in_};
        }
        return {};
    }

    // Output channels [r0, r0 + n) alone, as a matrix of their own.
    ops::weight_view rows(index_t r0, index_t n) const noexcept {
        ops::weight_view v = view();
        const std::size_t elem = precision_ == weight_precision::native ? sizeof(Scalar) : ops::stored_bf16(precision_) ? 2 : 1;
        v.data = static_cast<const char*>(v.data) + static_cast<std::size_t>(r0 * in_) * elem;
        if (v.scale) v.scale += r0;
        v.out = n;
        return v;
    }

    // y (rows, out) = x (rows, in)·Wᵀ [+ y].
    void apply(const Scalar* x, Scalar* y, index_t rows, bool accumulate = false) const {
        ops::linear<Backend>(view(), x, y, rows, accumulate);
    }
    // The same with row strides and a factor: y = alpha·x·Wᵀ [+ y].
    void apply(const Scalar* x, index_t ldx, index_t rows, Scalar* y, index_t ldy, Scalar alpha, bool accumulate) const {
        ops::linear<Backend>(view(), x, ldx, rows, y, ldy, alpha, accumulate);
    }

private:
    weight_precision precision_ = weight_precision::native;
    index_t out_ = 0, in_ = 0;
    tensor<Scalar, Backend> native_;
    tensor<std::uint16_t, Backend> half_;
    tensor<std::int8_t, Backend> quant_;
    tensor<float, Backend> scale_;
};

}  // namespace locost::layers
