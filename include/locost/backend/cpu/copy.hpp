// CPU kernels of ops/copy.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../core/dtype.hpp"
#include "../../ops/copy.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
inline index_t round_to_i8_avx512(const float* x, index_t n, float inv, std::int8_t* out) {
    const __m512 vinv = _mm512_set1_ps(inv);
    index_t c = 0;
    for (; c + 16 <= n; c += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c), vinv))));
    return c;
}
LOCOST_END_ISA
#endif

// out[c] = x[c]·inv rounded as lrint (the current mode: nearest even) for c < the count returned,
// sixteen at a time at the avx512 level (0 below it: the caller rounds the rest one by one). A
// cache's store of a whole book called lrint 10^10 times.
inline index_t round_to_i8(const float* x, index_t n, float inv, std::int8_t* out) {
#if LOCOST_ISA_REGIONS
    if (isa_at_least(isa_level::avx512)) return round_to_i8_avx512(x, n, inv, out);
#endif
    (void)x, (void)n, (void)inv, (void)out;
    return 0;
}

}  // namespace cpu_detail

template <class T>
struct kernel<ops::strided_copy_op, cpu, T> {
    static void run(T* dst, const T* src, const ops::copy_layout& l) {
        for (index_t i = 0; i < l.n0; ++i)
            for (index_t j = 0; j < l.n1; ++j)
                for (index_t k = 0; k < l.n2; ++k)
                    std::memmove(dst + i * l.dst0 + j * l.dst1 + k * l.dst2, src + i * l.src0 + j * l.src1 + k * l.src2,
                                 static_cast<std::size_t>(l.width) * sizeof(T));
    }
};

template <class T>
struct kernel<ops::fill_op, cpu, T> {
    static void run(T* x, index_t count, T value) { std::fill_n(x, count, value); }
};

template <class T>
struct kernel<ops::store_rows_op, cpu, T> {
    static void run(ops::kv_precision p, const T* x, index_t ldx, index_t rows, index_t n, void* dst, float* scale) {
        for (index_t r = 0; r < rows; ++r) {
            const T* row = x + r * ldx;
            if (p == ops::kv_precision::f32) {
                float* out = static_cast<float*>(dst) + r * n;
                for (index_t c = 0; c < n; ++c) out[c] = static_cast<float>(row[c]);
            } else if (p == ops::kv_precision::bf16) {
                auto* out = static_cast<std::uint16_t*>(dst) + r * n;
                for (index_t c = 0; c < n; ++c) out[c] = float_to_bf16(static_cast<float>(row[c]));
            } else {
                // Symmetric int8 per row: scale = max|x| / 127.
                float m = 0;
                for (index_t c = 0; c < n; ++c) m = std::max(m, std::abs(static_cast<float>(row[c])));
                const float s = m > 0 ? m / 127.0f : 1.0f, inv = 1.0f / s;
                scale[r] = s;
                auto* out = static_cast<std::int8_t*>(dst) + r * n;
                index_t c = 0;
                if constexpr (std::is_same_v<T, float>) c = cpu_detail::round_to_i8(row, n, inv, out);
                for (; c < n; ++c) out[c] = static_cast<std::int8_t>(round_half_even(static_cast<float>(row[c]) * inv));
            }
        }
    }
};

template <class T>
struct kernel<ops::gather_sum_op, cpu, T> {
    static void run(const T* x, index_t ldx, index_t n, const std::int64_t* offsets, const std::int64_t* rows, index_t S, T* out,
                    index_t ldo) {
        for (index_t s = 0; s < S; ++s) {
            T* o = out + s * ldo;
            std::fill_n(o, n, T(0));
            for (std::int64_t k = offsets[s]; k < offsets[s + 1]; ++k) {
                const T* r = x + rows[k] * ldx;
                for (index_t c = 0; c < n; ++c) o[c] += r[c];
            }
        }
    }
};

}  // namespace locost
