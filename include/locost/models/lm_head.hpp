// The LM head of every decoder:  logits = alpha · h · Wᵀ,  W (vocab, d_model) the token
// embedding (tied) or lm_head.weight.
//
// In the scalar type it shares the embedding's storage. In a reduced precision
// (model_options::weights) it keeps its own bfloat16 or int8 copy while the embedding stays as
// it was: a step reads the whole head but only one embedding row per token, so the head is
// where the bytes are (base model: 98.6 MB of float32, a fifth of a step's weight reads).
#pragma once
#include <memory>
#include <optional>

#include "../core/tensor.hpp"
#include "../layers/weight_matrix.hpp"
#include "../layers/parameter.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/gemm.hpp"

namespace locost::models {

template <class Scalar, class Backend>
class logits_head {
public:
    logits_head() = default;
    // Errors: weights.precision (a reduced precision with a non-float32 scalar).
    logits_head(std::shared_ptr<tensor<Scalar, Backend>> w, ops::weight_precision p) : native_(std::move(w)) {
        if (p == ops::weight_precision::native) return;
        if constexpr (std::is_same_v<Scalar, float>) {
            if constexpr (is_host<Backend>) {
                reduced_.emplace(*native_, p);
            } else {  // quantized on the host, from a copy of the uploaded matrix
                tensor<float> host(native_->shape());
                transfer<Backend>::download(host.data(), native_->data(), static_cast<std::size_t>(host.numel()));
                reduced_.emplace(std::move(host), p);
            }
            native_.reset();  // the embedding, when tied, is still held by the decoder
        } else {
            throw error("weights.precision", "reduced-precision weights (bfloat16, int8) need float32 computation");
        }
    }

    // logits (rows, vocab) = alpha · h (rows, d_model) · Wᵀ [+ bias (vocab)]. h and bias are in the
    // backend's memory, logits in the host's (search reads them there): a device computes them in
    // its own memory and copies them back once.
    void apply(const Scalar* h, index_t rows, index_t d_model, index_t vocab, Scalar alpha, Scalar* logits,
               const Scalar* bias = nullptr) const {
        Scalar* out = logits;
        if constexpr (!is_host<Backend>) out = device_logits_.get(rows * vocab);
        if (reduced_) reduced_->apply(h, d_model, rows, out, vocab, alpha, /*accumulate=*/false);
        else ops::gemm<Backend, Scalar>({false, true, rows, vocab, d_model, d_model, d_model, vocab}, alpha, h, native_->data(), Scalar(0), out);
        if (bias) ops::add_rows<Backend>(out, bias, rows, vocab);
        if constexpr (!is_host<Backend>) transfer<Backend>::download(logits, out, static_cast<std::size_t>(rows * vocab));
    }

private:
    mutable layers::scratch_buffer<Scalar, Backend> device_logits_;
    std::shared_ptr<tensor<Scalar, Backend>> native_;
    std::optional<layers::weight_matrix<Scalar, Backend>> reduced_;
};

} // namespace locost::models
