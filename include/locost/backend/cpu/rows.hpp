// CPU kernels of ops/rows.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../ops/rows.hpp"
#include "elementwise.hpp"  // cpu_detail::for_rows

namespace locost {

template <class T>
struct kernel<ops::add_position_rows_op, cpu, T> {
    static void run(const T* table, index_t dim, index_t first, index_t rows, index_t count, T* x) {
        cpu_detail::for_rows(rows * count, dim, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                const T* src = table + (first + i % count) * dim;
                T* dst = x + i * dim;
                for (index_t c = 0; c < dim; ++c) dst[c] += src[c];
            }
        });
    }
};

template <class T>
struct kernel<ops::add_sinusoid_op, cpu, T> {
    static void run(const float* omega, index_t dim, index_t first, index_t rows, index_t count, T* x) {
        const index_t half = dim / 2;
        cpu_detail::for_rows(rows * count, dim, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                const float p = static_cast<float>(first + i % count);
                T* dst = x + i * dim;
                for (index_t k = 0; k < half; ++k) {
                    const float a = p * omega[k];
                    dst[k] += static_cast<T>(std::sin(a));
                    dst[half + k] += static_cast<T>(std::cos(a));
                }
            }
        });
    }
};

template <class T>
struct kernel<ops::key_bias_op, cpu, T> {
    static void run(const float* mask, index_t n, T* out) {
        constexpr T masked = -std::numeric_limits<T>::infinity();
        for (index_t i = 0; i < n; ++i) out[i] = !mask || mask[i] != 0.0f ? T(0) : masked;
    }
};

template <class T>
struct kernel<ops::fill_at_op, cpu, T> {
    static void run(T* x, const std::int64_t* index, index_t count, T value) {
        for (index_t k = 0; k < count; ++k)
            if (index[k] >= 0) x[index[k]] = value;
    }
};

template <class T>
struct kernel<ops::gather_rows_op, cpu, T> {
    static void run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
        for (index_t s = 0; s < S; ++s) {
            if (index[s] >= 0) std::copy_n(src + index[s] * lds, n, dst + s * ldd);
            else std::fill_n(dst + s * ldd, n, T(0));
        }
    }
};

template <class T>
struct kernel<ops::scatter_rows_op, cpu, T> {
    static void run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
        for (index_t s = 0; s < S; ++s)
            if (index[s] >= 0) std::copy_n(src + s * lds, n, dst + index[s] * ldd);
    }
};

}  // namespace locost
