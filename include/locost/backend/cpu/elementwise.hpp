// Elementwise and row-wise kernels of the CPU backend, vectorised with xsimd (the widest ISA the
// build targets: AVX-512 with -march=native on such a machine) and split over rows with OpenMP;
// the float activations also at the process's level where it is above the build's (isa.hpp,
// activations.ipp).
// Tails shorter than a vector use the same formulas in scalar code.
#pragma once
#include <xsimd/xsimd.hpp>

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

// A sum over x[0, n), vectorised: vec(acc, v) adds a vector v's terms into the vector sum acc,
// one(s, x_i) a tail element's into the scalar sum. (Two functions, not one generic one, so
// that each may be written as it is fastest: an FMA in the vector, a plain sum in the tail.)
template <class T, class Vec, class One>
T row_sum(const T* x, index_t n, Vec&& vec, One&& one) {
    using B = xsimd::batch<T>;
    constexpr index_t W = static_cast<index_t>(B::size);
    B acc(T(0));
    index_t i = 0;
    for (; i + W <= n; i += W) acc = vec(acc, B::load_unaligned(x + i));
    T s = xsimd::hadd(acc);
    for (; i < n; ++i) s = one(s, x[i]);
    return s;
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

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
namespace at_avx512 {
#include "activations.ipp"
}  // namespace at_avx512
LOCOST_END_ISA
LOCOST_BEGIN_ISA_AVX2
namespace at_avx2 {
#include "activations.ipp"
}  // namespace at_avx2
LOCOST_END_ISA
#endif

// The float activations at the process's level where it is above the build's own (isa.hpp):
// whether they ran. (gelu-erf, double, and a level the build compiles for: xsimd's kernels.)
template <activation Act>
bool activate_at_level(float* x, index_t count) {
#if LOCOST_ISA_REGIONS
    if constexpr (Act != activation::gelu_erf) {
        if constexpr (compiled_isa_level() < isa_level::avx512)
            if (isa_at_least(isa_level::avx512)) {
                parallel_span(count, [&](index_t b, index_t e) { at_avx512::activate_span<Act>(x, b, e); });
                return true;
            }
        if constexpr (compiled_isa_level() < isa_level::avx2)
            if (isa_at_least(isa_level::avx2)) {
                parallel_span(count, [&](index_t b, index_t e) { at_avx2::activate_span<Act>(x, b, e); });
                return true;
            }
    }
#endif
    (void)x, (void)count;
    return false;
}

template <activation Act>
bool gate_at_level(float* a, const float* bsrc, index_t rows, index_t n, index_t ld) {
#if LOCOST_ISA_REGIONS
    if constexpr (Act != activation::gelu_erf) {
        if constexpr (compiled_isa_level() < isa_level::avx512)
            if (isa_at_least(isa_level::avx512)) {
                for_rows(rows, n, [&](index_t rb, index_t re) { at_avx512::gate_rows<Act>(a, bsrc, rb, re, n, ld); });
                return true;
            }
        if constexpr (compiled_isa_level() < isa_level::avx2)
            if (isa_at_least(isa_level::avx2)) {
                for_rows(rows, n, [&](index_t rb, index_t re) { at_avx2::gate_rows<Act>(a, bsrc, rb, re, n, ld); });
                return true;
            }
    }
#endif
    (void)a, (void)bsrc, (void)rows, (void)n, (void)ld;
    return false;
}

}  // namespace cpu_detail

template <class T>
struct kernel<ops::rms_norm_op, cpu, T> {
    static void run(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t rows, index_t n) {
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        cpu_detail::each_row(x, ldx, y, ldy, rows, n, [&](const T* xr, T* yr) {
            const T ss = cpu_detail::row_sum(
                xr, n, [](B acc, B v) { return xsimd::fma(v, v, acc); }, [](T s, T v) { return s + v * v; });
            const T inv = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
            index_t i = 0;
            for (; i + W <= n; i += W) (B::load_unaligned(xr + i) * B(inv) * B::load_unaligned(w + i)).store_unaligned(yr + i);
            for (; i < n; ++i) yr[i] = xr[i] * inv * w[i];
        });
    }
};

// Two passes over the row (mean, then the centred sum of squares) as PyTorch's LayerNorm does,
// rather than E[x²] − E[x]², which cancels badly when |mean| ≫ std.
template <class T>
struct kernel<ops::layer_norm_op, cpu, T> {
    static void run(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t rows, index_t n) {
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        cpu_detail::each_row(x, ldx, y, ldy, rows, n, [&](const T* xr, T* yr) {
            const T mean = cpu_detail::row_sum(
                               xr, n, [](B acc, B v) { return acc + v; }, [](T s, T v) { return s + v; }) /
                static_cast<T>(n);
            const T ss = cpu_detail::row_sum(
                xr, n,
                [&](B acc, B v) {
                    const B c = v - B(mean);
                    return xsimd::fma(c, c, acc);
                },
                [&](T s, T v) { return s + (v - mean) * (v - mean); });
            const T inv = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
            index_t i = 0;
            for (; i + W <= n; i += W)
                xsimd::fma((B::load_unaligned(xr + i) - B(mean)) * B(inv), B::load_unaligned(w + i), B::load_unaligned(b + i))
                    .store_unaligned(yr + i);
            for (; i < n; ++i) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
        });
    }
};

template <class T>
struct kernel<ops::activate_op, cpu, T> {
    template <activation Act>
    static void run(T* x, index_t count) {
        if constexpr (std::is_same_v<T, float>)
            if (cpu_detail::activate_at_level<Act>(x, count)) return;
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        cpu_detail::parallel_span(count, [&](index_t b, index_t e) {
            index_t i = b;
            for (; i + W <= e; i += W) cpu_detail::apply_act<Act>(B::load_unaligned(x + i)).store_unaligned(x + i);
            for (; i < e; ++i) x[i] = cpu_detail::apply_act<Act>(x[i]);
        });
    }
};

template <class T>
struct kernel<ops::gate_op, cpu, T> {
    template <activation Act>
    static void run(T* a, const T* bsrc, index_t rows, index_t n, index_t ld) {
        if constexpr (std::is_same_v<T, float>)
            if (cpu_detail::gate_at_level<Act>(a, bsrc, rows, n, ld)) return;
        using B = xsimd::batch<T>;
        constexpr index_t W = static_cast<index_t>(B::size);
        auto body = [&](index_t rb, index_t re) {
            for (index_t r = rb; r < re; ++r) {
                T* ar = a + r * ld;
                const T* br = bsrc + r * ld;
                index_t i = 0;
                for (; i + W <= n; i += W)
                    (cpu_detail::apply_act<Act>(B::load_unaligned(ar + i)) * B::load_unaligned(br + i)).store_unaligned(ar + i);
                for (; i < n; ++i) ar[i] = cpu_detail::apply_act<Act>(ar[i]) * br[i];
            }
        };
        cpu_detail::for_rows(rows, n, body);
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
