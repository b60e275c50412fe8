// Where BART-style checkpoints keep their tensors — BART's, and LED's and Pegasus-X's, which
// transformers derived from it: the task model's base model under a root module ("model"; LED's
// "led"), "<root>.shared.weight", each stack at "<root>.<stack>." and its layers at
// "<root>.<stack>.layers.<i>.". The layers name what is inside (layers/post_norm_attention.hpp, ...).
#pragma once
#include <string_view>

#include "../../layers/tensor_source.hpp"
#include "../config.hpp"

namespace locost::models::bart_style_layout {

inline layers::tensor_source stack(const layers::tensor_source& root, std::string_view module, layers::model_stack s) {
    return root.for_stack(s) / module / (s == layers::model_stack::encoder ? "encoder" : "decoder");
}
inline layers::tensor_source layer(const layers::tensor_source& root, std::string_view module, layers::model_stack s, index_t i) {
    return stack(root, module, s) / "layers" / i;
}
inline tensor<float> shared(const layers::tensor_source& root, std::string_view module, layers::model_stack s, const model_config& c) {
    return (root.for_stack(s) / module).get("shared.weight", {c.vocab_size, c.d_model}, {layers::param_kind::embedding});
}

} // namespace locost::models::bart_style_layout
