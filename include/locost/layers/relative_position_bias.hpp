// T5 relative position bias — docs/models.md §2 (Raffel et al., T5 §2.1; Mesh TensorFlow's
// relative_position_bucket). For a query at position i and a key at j, r = j − i:
//
//   unidirectional (decoder):  n = max(−r, 0)
//   bidirectional (encoder):   nb ← nb/2,  offset = nb if r > 0 else 0,  n = |r|
//   max_exact = nb/2
//   bucket = n                                                          if n < max_exact
//          = min(nb − 1, max_exact + ⌊log(n/max_exact) / log(max_distance/max_exact) · (nb − max_exact)⌋)
//   bias[h, i, j] = table[offset + bucket, h]           (table: relative_attention_bias.weight)
//
// The logarithm branch is evaluated exactly as the reference does, in float32 operations in the
// same order (log of the float quotient, divided by the float-rounded log ratio, times the
// bucket count, truncated), so bucket boundaries agree with it bit for bit.
#pragma once
#include <cmath>
#include <cstdint>

#include "../core/tensor.hpp"
#include "parameter.hpp"
#include "tensor_source.hpp"

namespace locost::layers {

inline index_t relative_position_bucket(index_t relative_position, bool bidirectional, index_t num_buckets, index_t max_distance) {
    index_t bucket = 0, n = 0;
    if (bidirectional) {
        num_buckets /= 2;
        if (relative_position > 0) bucket += num_buckets;
        n = relative_position < 0 ? -relative_position : relative_position;
    } else {
        n = relative_position < 0 ? -relative_position : 0;
    }
    const index_t max_exact = num_buckets / 2;
    if (n < max_exact) return bucket + n;
    const float ratio = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
    const float scaled =
        std::log(static_cast<float>(n) / static_cast<float>(max_exact)) / ratio * static_cast<float>(num_buckets - max_exact);
    const index_t large = max_exact + static_cast<index_t>(scaled);
    return bucket + (large < num_buckets - 1 ? large : num_buckets - 1);
}

// The bias table of one attention stack (block 0 owns it; every block reuses it), kept on the
// host: the bands made from it (layers/position_band.hpp) are what the backend reads.
class relative_position_bias {
public:
    // The attention module's relative_attention_bias.weight (buckets, heads).
    static tensor<float> read(const tensor_source& module, index_t buckets, index_t heads) {
        return module.get("relative_attention_bias.weight", {buckets, heads}, {param_kind::relative_bias});
    }

    relative_position_bias() = default;
    relative_position_bias(const tensor<float>& table, bool bidirectional, index_t max_distance)
        : table_(table.clone()), buckets_(table.dim(0)), heads_(table.dim(1)), bidirectional_(bidirectional), max_distance_(max_distance) {}

    index_t heads() const noexcept { return heads_; }
    bool empty() const noexcept { return table_.numel() == 0; }

    // The bias of head h for a key `relative_position` = j − i away from its query.
    float value(index_t relative_position, index_t h) const {
        return table_[relative_position_bucket(relative_position, bidirectional_, buckets_, max_distance_) * heads_ + h];
    }

private:
    tensor<float> table_;  // (buckets, heads)
    index_t buckets_ = 32, heads_ = 0;
    bool bidirectional_ = false;
    index_t max_distance_ = 128;
};

}  // namespace locost::layers
