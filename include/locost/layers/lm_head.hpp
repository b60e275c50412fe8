// The LM head of every decoder:  logits = alpha · h · Wᵀ [+ b],  W (vocab, d_model) the token
// embedding (tied) or lm_head.weight, b final_logits_bias (BART, LED) when the family has one.
//
// In the scalar type a tied head shares the embedding's storage. In a reduced precision
// (model_options::weights) it keeps its own bfloat16 or int8 copy while the embedding stays as
// it was: a step reads the whole head but only one embedding row per token, so the head is
// where the bytes are (base model: 98.6 MB of float32, a fifth of a step's weight reads).
//
// Names, at the checkpoint's top level: lm_head.weight (untied), final_logits_bias (optional: a
// bare base model's checkpoint lacks the buffer, which then counts as zeros).
#pragma once
#include <algorithm>
#include <memory>
#include <optional>

#include "../backend/transfer.hpp"
#include "../core/tensor.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/linear.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"
#include "weight_matrix.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class logits_head {
public:
    struct weights {
        tensor<float> head;  // (vocab, d_model), untied only
        tensor<float> bias;  // (1, vocab), or empty
    };
    // tied: the head is the embedding (recorded, not read); with_bias: the family has a
    // final_logits_bias.
    static weights read(const tensor_source& root, index_t vocab, index_t H, bool tied, bool with_bias) {
        weights w;
        const param_info head{param_kind::head, param_storage::per_step};
        if (tied) root.alias("lm_head.weight", {vocab, H}, head);
        else w.head = root.get("lm_head.weight", {vocab, H}, head);
        if (with_bias)
            w.bias = root.get("final_logits_bias", {1, vocab}, {param_kind::logits_bias, param_storage::scalar, /*optional=*/true});
        return w;
    }

    logits_head() = default;
    // embedding: the decoder's token table, the head when w.head is empty (tied). alpha: the
    // factor on h (T5 v1.0's d_model^−½, else 1). Errors: weights.precision (a reduced precision
    // with a non-float32 scalar).
    logits_head(weights&& w, std::shared_ptr<tensor<Scalar, Backend>> embedding, ops::weight_precision p, Scalar alpha)
        : alpha_(alpha), vocab_(embedding->dim(0)) {
        native_ = !w.head.empty() ? std::make_shared<tensor<Scalar, Backend>>(to_backend<Scalar, Backend>(std::move(w.head)))
                                  : std::move(embedding);
        if (!w.bias.empty()) bias_ = to_backend<Scalar, Backend>(w.bias);
        if (p == ops::weight_precision::native) return;
        if constexpr (std::is_same_v<Scalar, float>) {
            reduced_.emplace(host_copy(*native_), p);
            native_.reset();  // the embedding, when tied, is still held by the decoder
        } else {
            throw error("weights.precision", "reduced-precision weights (bfloat16, int8) need float32 computation");
        }
    }

    // logits (rows, vocab) = alpha · h (rows, d_model) · Wᵀ [+ b]. h is in the backend's memory,
    // logits in the host's (search reads them there): a device computes them in its own memory
    // and copies them back once.
    void apply(const Scalar* h, index_t rows, index_t d_model, Scalar* logits) const {
        const host_output<Scalar, Backend, scratch_buffer<Scalar, Backend>> out(logits, rows * vocab_, device_logits_);
        if (reduced_) reduced_->apply(h, d_model, rows, out.data(), vocab_, alpha_, /*accumulate=*/false);
        else
            ops::linear<Backend>(ops::weight_view{ops::weight_precision::native, native_->data(), nullptr, vocab_, d_model}, h, d_model,
                                 rows, out.data(), vocab_, alpha_, /*accumulate=*/false);
        if (!bias_.empty()) ops::add_rows<Backend>(out.data(), bias_.data(), rows, vocab_);
        out.finish();
    }

private:
    Scalar alpha_ = Scalar(1);
    index_t vocab_ = 0;
    mutable scratch_buffer<Scalar, Backend> device_logits_;
    std::shared_ptr<tensor<Scalar, Backend>> native_;
    std::optional<weight_matrix<Scalar, Backend>> reduced_;
    tensor<Scalar, Backend> bias_;
};

}  // namespace locost::layers
