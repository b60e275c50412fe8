// The names of how ops store and compute, on their own so that the public API's light headers
// (locost/api.hpp) can carry model options without the ops themselves. What each means is said
// where it is implemented: kv_precision and kv_matrix in ops/attention.hpp, weight_precision in
// ops/linear.hpp, conv_mode in ops/bidirectional_conv.hpp.
#pragma once
#include "../core/index.hpp"

namespace locost::ops {

// How K/V rows are stored: in the computation's own scalar type (native), or as float32,
// bfloat16, or int8 with a per-row scale.
enum class kv_precision { native, f32, bf16, i8 };

// One (nk, d) matrix of keys or values: row j at data + j·ld elements of the storage type;
// scale[j] for int8.
struct kv_matrix {
    kv_precision precision = kv_precision::f32;
    const void* data = nullptr;
    const float* scale = nullptr;
    index_t ld = 0;
};

// A linear layer's stored weights (ops/linear.hpp).
enum class weight_precision { native, bf16, i8, bf16_products, i8_products };

// The bidirectional convolution's definition (ops/bidirectional_conv.hpp).
enum class conv_mode { exact, original_cuda };

}  // namespace locost::ops
