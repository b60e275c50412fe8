// Elementwise and row-wise kernels of the CPU backend, split over rows with OpenMP. For float,
// the activations and the norms run at the process's level (isa.hpp: activations.ipp,
// row_kernels.ipp, compiled per level); double, gelu-erf and the simple loops are vectorised with
// xsimd at the build's width (or by the compiler).
// Tails shorter than a vector use the same formulas in scalar code.
#pragma once
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../../ops/elementwise.hpp"
#include "isa.hpp"
#include "simd_levels.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

// Below this many elements a loop runs on the calling thread (a parallel region costs ~µs).
inline constexpr index_t parallel_threshold = 1 << 15;

template <class F>
void parallel_span(index_t count, F&& f) {
    if (count < parallel_threshold) {
        f(index_t{0}, count);
        return;
    }
    parallel_rows(count, parallel_threshold, f);
}

// body(rb, re) over row ranges; parallel when rows·n is large enough to pay for it.
template <class F>
void for_rows(index_t rows, index_t n, F&& body) {
    if (rows * n < parallel_threshold) body(index_t{0}, rows);
    else parallel_rows(rows, std::max<index_t>(1, parallel_threshold / std::max<index_t>(n, 1)), body);
}

// f(xr, yr) for each row of x (row stride ldx) and its row of y (stride ldy), split as for_rows.
template <class T, class F>
void each_row(const T* x, index_t ldx, T* y, index_t ldy, index_t rows, index_t n, F&& f) {
    for_rows(rows, n, [&](index_t rb, index_t re) {
        for (index_t r = rb; r < re; ++r) f(x + r * ldx, y + r * ldy);
    });
}

template <class V>
struct scalar_of {
    using type = typename V::value_type;
};
template <class V>
requires std::is_floating_point_v<V>
struct scalar_of<V> {
    using type = V;
};

template <activation Act, class V>
inline V apply_act(const V& x) {
    using S = typename scalar_of<V>::type;
    if constexpr (Act == activation::relu) {
        if constexpr (std::is_floating_point_v<V>) return x > S(0) ? x : S(0);
        else return xsimd::max(x, V(S(0)));
    } else if constexpr (Act == activation::gelu_tanh) {
        // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
        const S c = S(0.7978845608028654), k = S(0.044715);
        if constexpr (std::is_floating_point_v<V>) return S(0.5) * x * (S(1) + std::tanh(c * (x + k * x * x * x)));
        else return V(S(0.5)) * x * (V(S(1)) + xsimd::tanh(V(c) * (x + V(k) * x * x * x)));
    } else if constexpr (Act == activation::gelu_erf) {
        const S r = S(0.7071067811865476);
        if constexpr (std::is_floating_point_v<V>) return S(0.5) * x * (S(1) + std::erf(x * r));
        else return V(S(0.5)) * x * (V(S(1)) + xsimd::erf(x * V(r)));
    } else {  // silu: x·σ(x)
        if constexpr (std::is_floating_point_v<V>) return x / (S(1) + std::exp(-x));
        else return x / (V(S(1)) + xsimd::exp(-x));
    }
}

#define LOCOST_LEVEL_BODY "activations.ipp"
#include "at_levels.ipp"
#define LOCOST_LEVEL_BODY "row_kernels.ipp"
#include "at_levels.ipp"

template <activation Act>
void activate_span_at_level(float* x, index_t b, index_t e) {
    LOCOST_RETURN_AT_LEVEL(activate_span<Act>(x, b, e));
}
template <activation Act>
void gate_rows_at_level(float* a, const float* bsrc, index_t rb, index_t re, index_t n, index_t ld) {
    LOCOST_RETURN_AT_LEVEL(gate_rows<Act>(a, bsrc, rb, re, n, ld));
}
inline void rms_norm_row_at_level(const float* x, const float* w, float eps, float* y, index_t n) {
    LOCOST_RETURN_AT_LEVEL(rms_norm_row(x, w, eps, y, n));
}
inline void layer_norm_row_at_level(const float* x, const float* w, const float* b, float eps, float* y, index_t n) {
    LOCOST_RETURN_AT_LEVEL(layer_norm_row(x, w, b, eps, y, n));
}

// The float activations compiled per level (activations.ipp); gelu-erf runs xsimd's erf.
template <class T, activation Act>
inline constexpr bool activation_at_level = std::is_same_v<T, float>&& Act != activation::gelu_erf;

}  // namespace cpu_detail

template <class T>
struct kernel<ops::rms_norm_op, cpu, T> {
    static void run(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t rows, index_t n) {
        cpu_detail::each_row(x, ldx, y, ldy, rows, n, [&](const T* xr, T* yr) {
            if constexpr (std::is_same_v<T, float>) {
                cpu_detail::rms_norm_row_at_level(xr, w, eps, yr, n);
            } else {
                T ss = 0;
                for (index_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
                const T inv = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
                for (index_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * w[i];
            }
        });
    }
};

// Two passes over the row (mean, then the centred sum of squares) as PyTorch's LayerNorm does,
// rather than E[x²] − E[x]², which cancels badly when |mean| ≫ std.
template <class T>
struct kernel<ops::layer_norm_op, cpu, T> {
    static void run(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t rows, index_t n) {
        cpu_detail::each_row(x, ldx, y, ldy, rows, n, [&](const T* xr, T* yr) {
            if constexpr (std::is_same_v<T, float>) {
                cpu_detail::layer_norm_row_at_level(xr, w, b, eps, yr, n);
            } else {
                T sum = 0, ss = 0;
                for (index_t i = 0; i < n; ++i) sum += xr[i];
                const T mean = sum / static_cast<T>(n);
                for (index_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
                const T inv = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
                for (index_t i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
            }
        });
    }
};

template <class T>
struct kernel<ops::activate_op, cpu, T> {
    template <activation Act>
    static void run(T* x, index_t count) {
        if constexpr (cpu_detail::activation_at_level<T, Act>) {
            cpu_detail::parallel_span(count, [&](index_t b, index_t e) { cpu_detail::activate_span_at_level<Act>(x, b, e); });
        } else {
            using B = xsimd::batch<T>;
            constexpr index_t W = static_cast<index_t>(B::size);
            cpu_detail::parallel_span(count, [&](index_t b, index_t e) {
                index_t i = b;
                for (; i + W <= e; i += W) cpu_detail::apply_act<Act>(B::load_unaligned(x + i)).store_unaligned(x + i);
                for (; i < e; ++i) x[i] = cpu_detail::apply_act<Act>(x[i]);
            });
        }
    }
};

template <class T>
struct kernel<ops::gate_op, cpu, T> {
    template <activation Act>
    static void run(T* a, const T* bsrc, index_t rows, index_t n, index_t ld) {
        if constexpr (cpu_detail::activation_at_level<T, Act>) {
            cpu_detail::for_rows(rows, n, [&](index_t rb, index_t re) { cpu_detail::gate_rows_at_level<Act>(a, bsrc, rb, re, n, ld); });
        } else {
            using B = xsimd::batch<T>;
            constexpr index_t W = static_cast<index_t>(B::size);
            cpu_detail::for_rows(rows, n, [&](index_t rb, index_t re) {
                for (index_t r = rb; r < re; ++r) {
                    T* ar = a + r * ld;
                    const T* br = bsrc + r * ld;
                    index_t i = 0;
                    for (; i + W <= n; i += W)
                        (cpu_detail::apply_act<Act>(B::load_unaligned(ar + i)) * B::load_unaligned(br + i)).store_unaligned(ar + i);
                    for (; i < n; ++i) ar[i] = cpu_detail::apply_act<Act>(ar[i]) * br[i];
                }
            });
        }
    }
};

template <class T>
struct kernel<ops::mul_op, cpu, T> {
    static void run(T* y, const T* q, index_t count) {
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        cpu_detail::parallel_span(count, [&](index_t b, index_t e) {
            index_t i = b;
            for (; i + W <= e; i += W) (B::load_unaligned(y + i) * B::load_unaligned(q + i)).store_unaligned(y + i);
            for (; i < e; ++i) y[i] *= q[i];
        });
    }
};

template <class T>
struct kernel<ops::add_rows_op, cpu, T> {
    static void run(T* y, const T* bias, index_t rows, index_t n) {
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        for (index_t r = 0; r < rows; ++r) {
            T* yr = y + r * n;
            index_t i = 0;
            for (; i + W <= n; i += W) (B::load_unaligned(yr + i) + B::load_unaligned(bias + i)).store_unaligned(yr + i);
            for (; i < n; ++i) yr[i] += bias[i];
        }
    }
};

template <class T>
struct kernel<ops::scale_rows_op, cpu, T> {
    static void run(T* y, const T* s, index_t rows, index_t n) {
        for (index_t r = 0; r < rows; ++r)
            if (s[r] != T(1))
                for (index_t i = 0; i < n; ++i) y[r * n + i] *= s[r];
    }
};

template <class T>
struct kernel<ops::softmax_rows_op, cpu, T> {
    static void run(T* x, index_t rows, index_t n, index_t ld) {
        for (index_t r = 0; r < rows; ++r) {
            T* xr = x + r * ld;
            T m = -std::numeric_limits<T>::infinity();
            for (index_t i = 0; i < n; ++i) m = std::max(m, xr[i]);
            if (m == -std::numeric_limits<T>::infinity()) {
                std::fill_n(xr, n, T(0));
                continue;
            }
            T s = 0;
            for (index_t i = 0; i < n; ++i) s += (xr[i] = std::exp(xr[i] - m));
            const T inv = T(1) / s;
            for (index_t i = 0; i < n; ++i) xr[i] *= inv;
        }
    }
};

}  // namespace locost

#include "../../ops/embedding.hpp"

namespace locost {

template <class T>
struct kernel<ops::embedding_op, cpu, T> {
    static void run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out, T scale) {
        cpu_detail::for_rows(n, dim, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                const T* src = table + ids[i] * dim;
                T* dst = out + i * dim;
                if (scale == T(1)) std::copy_n(src, dim, dst);
                else
                    for (index_t c = 0; c < dim; ++c) dst[c] = src[c] * scale;
            }
        });
    }
};

template <class T>
struct kernel<ops::add_embedding_op, cpu, T> {
    static void run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out) {
        cpu_detail::for_rows(n, dim, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                const T* src = table + ids[i] * dim;
                T* dst = out + i * dim;
                for (index_t c = 0; c < dim; ++c) dst[c] += src[c];
            }
        });
    }
};

}  // namespace locost
