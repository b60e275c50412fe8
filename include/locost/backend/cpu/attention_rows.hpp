// What both CPU attention kernels do to rows: read a block of stored key/value rows in the
// scalar type, and exponentiate a row of scores for the softmax. Shared by ops::attention
// (attention.hpp) and ops::shared_kv_attention (shared_kv_attention.hpp), so the two compute
// these parts with the same bits.
//
// Below them, what the strategies of ops::attention share (attention.hpp and the
// attention_*.hpp files it includes): a bias term's rows, a row added, and whether a matrix's
// rows are read where they lie.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "../../core/dtype.hpp"
#include "../../ops/attention.hpp"
#include "elementwise.hpp"
#include "linear.hpp"

namespace locost {

namespace cpu_detail {

// Rows [j0, j0 + n) of a stored K/V matrix as Scalar, (n, d) dense; returns a pointer to them
// (into buf, or straight into the storage when no conversion is needed) and its row stride.
template <class Scalar>
const Scalar* kv_rows(const ops::kv_matrix& m, index_t j0, index_t n, index_t d, Scalar* buf, index_t& ld) {
    if (m.precision == ops::kv_precision::native) {
        ld = m.ld;
        return static_cast<const Scalar*>(m.data) + j0 * m.ld;
    }
    if (m.precision == ops::kv_precision::f32) {
        const float* src = static_cast<const float*>(m.data) + j0 * m.ld;
        if constexpr (std::is_same_v<Scalar, float>) {
            ld = m.ld;
            return src;
        } else {
            for (index_t r = 0; r < n; ++r)
                for (index_t c = 0; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(src[r * m.ld + c]);
        }
    } else if (m.precision == ops::kv_precision::bf16) {
        const auto* src = static_cast<const std::uint16_t*>(m.data) + j0 * m.ld;
        for (index_t r = 0; r < n; ++r) {
            index_t c = 0;
            if constexpr (std::is_same_v<Scalar, float>)
                for (; c + flanes <= d; c += flanes) widen(src + r * m.ld + c).store_unaligned(buf + r * d + c);
            for (; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(bf16_to_float(src[r * m.ld + c]));
        }
    } else {
        const auto* src = static_cast<const std::int8_t*>(m.data) + j0 * m.ld;
        for (index_t r = 0; r < n; ++r) {
            const Scalar s = static_cast<Scalar>(m.scale[j0 + r]);
            index_t c = 0;
            if constexpr (std::is_same_v<Scalar, float>)
                for (; c + flanes <= d; c += flanes) (widen(src + r * m.ld + c) * fvec(s)).store_unaligned(buf + r * d + c);
            for (; c < d; ++c) buf[r * d + c] = static_cast<Scalar>(src[r * m.ld + c]) * s;
        }
    }
    ld = d;
    return buf;
}

// The largest of n entries (−∞ for none); float at the process's level (row_kernels.ipp).
template <class Scalar>
Scalar max_row(const Scalar* row, index_t n) {
    if constexpr (std::is_same_v<Scalar, float>) {
        LOCOST_RETURN_AT_LEVEL(max_row(row, n));
    } else {
        Scalar m = -std::numeric_limits<Scalar>::infinity();
        for (index_t j = 0; j < n; ++j) m = std::max(m, row[j]);
        return m;
    }
}

// row = e^(row − m) over n entries; returns their sum. Float at the process's level.
template <class Scalar>
Scalar exp_row(Scalar* row, Scalar m, index_t n) {
    if constexpr (std::is_same_v<Scalar, float>) {
        LOCOST_RETURN_AT_LEVEL(exp_row(row, m, n));
    } else {
        Scalar sum = 0;
        for (index_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - m));
        return sum;
    }
}

// row[0, n) += b[0, n); float at the process's level.
template <class Scalar>
void add_row(Scalar* row, const Scalar* b, index_t n) {
    if constexpr (std::is_same_v<Scalar, float>) {
        LOCOST_RETURN_AT_LEVEL(add_row(row, b, n));
    } else {
        for (index_t j = 0; j < n; ++j) row[j] += b[j];
    }
}

// Bias row i of a term stored with row stride ld (ops::dense_bias: n per row).
template <class Scalar>
const Scalar* bias_row(const Scalar* b, index_t ld, index_t n, index_t i) {
    return b + i * (ld == ops::dense_bias ? n : ld);
}

// Whether kv_rows hands out m's rows where they lie (no widening into the buffer): then all keys
// go into one product: fewer calls, and the values' product runs over the whole key range at
// once instead of re-reading and re-writing its output per block of keys.
template <class Scalar>
bool read_in_place(const ops::kv_matrix& m) {
    return m.precision == ops::kv_precision::native || (std::is_same_v<Scalar, float> && m.precision == ops::kv_precision::f32);
}

}  // namespace cpu_detail

}  // namespace locost
