// What the two beam searches (beam_hf_4_27.hpp, beam_hf_5.hpp) share: both transformers versions
// take log_softmax of a step's logits before the processors.
#pragma once
#include <algorithm>
#include <cmath>

#include "decoding_rows.hpp"

namespace locost::generation::detail {

// log_softmax of one float32 row, in place.
inline void log_softmax(float* s, index_t V) {
    float m = neg_inf;
    for (index_t i = 0; i < V; ++i) m = std::max(m, s[i]);
    double sum = 0;
    for (index_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(s[i] - m));
    const float lse = static_cast<float>(std::log(sum));
    for (index_t i = 0; i < V; ++i) s[i] = s[i] - m - lse;
}

} // namespace locost::generation::detail
