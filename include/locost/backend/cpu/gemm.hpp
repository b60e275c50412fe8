// GEMM on the CPU. Products with many rows go to the float32 provider gemm_provider.hpp chooses
// by what the CPU can do (oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm, whichever runs the CPU's
// widest ISA, else Eigen); double-precision ones to OpenBLAS when LOCOST_USE_OPENBLAS is
// defined, else Eigen.
//
// Why a BLAS over Eigen: at the base model's shapes (M 1024–4096, K/N 768–2048) OpenBLAS's and
// oneDNN's kernels run 1.02–1.28× faster than Eigen 3.4's own on two cores (bench/kernels/bm_gemm,
// bench/RESULTS.md).
//
// Threads: one pool. OpenBLAS keeps a pthread pool of its own whose idle workers spin in
// sched_yield while our OpenMP loops run, and OpenMP's idle workers spin while OpenBLAS runs;
// on two cores that contention cost 10–15 % of an encoder pass (perf). So OpenBLAS is set to one
// thread and a large product is split over the OpenMP threads here, each slice one
// single-threaded library call (along M when it has enough rows, else along N; oneDNN and Eigen
// run single-threaded when called inside a parallel region). A product requested from inside a
// parallel region (the per-channel products of S4D kernel generation) runs serially on the
// calling thread.
//
// Products with at most 8 rows (decoding steps: one row per hypothesis; attention of a few
// queries over a block of keys) are memory-bound and go to the few-rows kernels below instead of
// sgemm, which reads B at a third of the machine's bandwidth there (bench/kernels/bm_gemm, M = 1 and 4).
#pragma once
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <xsimd/xsimd.hpp>

#include "../../ops/gemm.hpp"
#include "gemm_provider.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

template <class T>
void eigen_gemm(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
    using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
    const cmap A(a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, Eigen::OuterStride<>(g.lda));
    const cmap B(b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
    map C(c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
    if (beta == T(0)) C.setZero();
    else if (beta != T(1)) C *= beta;
    if (g.trans_a && g.trans_b) C.noalias() += alpha * (A.transpose() * B.transpose());
    else if (g.trans_a) C.noalias() += alpha * (A.transpose() * B);
    else if (g.trans_b) C.noalias() += alpha * (A * B.transpose());
    else C.noalias() += alpha * (A * B);
}

}  // namespace cpu_detail

namespace cpu_detail {

#ifdef LOCOST_USE_OPENBLAS
inline void openblas_single_threaded() {
    static const bool once = [] {
        openblas_set_num_threads(1);
        return true;
    }();
    (void)once;
}

template <class T>
void blas_gemm(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    const auto ta = g.trans_a ? CblasTrans : CblasNoTrans, tb = g.trans_b ? CblasTrans : CblasNoTrans;
    const auto M = static_cast<blasint>(g.m), N = static_cast<blasint>(g.n), K = static_cast<blasint>(g.k);
    const auto lda = static_cast<blasint>(g.lda), ldb = static_cast<blasint>(g.ldb), ldc = static_cast<blasint>(g.ldc);
    if constexpr (std::is_same_v<T, float>) cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    else cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif

// A many-row product on the provider in force (float32) or OpenBLAS/Eigen (double).
template <class T>
void many_rows(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    if constexpr (std::is_same_v<T, float>) {
        switch (active_float32_gemm()) {
#ifdef LOCOST_USE_ONEDNN
        case gemm_provider::onednn:
            // Row-major like cblas; inside a parallel region oneDNN runs on the calling thread.
            if (dnnl_sgemm(g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.m, g.n, g.k, alpha, a, g.lda, b, g.ldb, beta, c, g.ldc) ==
                dnnl_success)
                return;
            break;  // it refused the arguments (it never has): Eigen below
#endif
#ifdef LOCOST_USE_OPENBLAS
        case gemm_provider::openblas: return blas_gemm(g, alpha, a, b, beta, c);
#endif
        default: break;
        }
        eigen_gemm(g, alpha, a, b, beta, c);
    } else {
#ifdef LOCOST_USE_OPENBLAS
        blas_gemm(g, alpha, a, b, beta, c);
#else
        eigen_gemm(g, alpha, a, b, beta, c);
#endif
    }
}

// A product with a few rows (a decoding step: one row per live hypothesis) is memory-bound: the
// cost is reading B once. OpenBLAS's gemm reads it at 6 GB/s for M = 1 where its gemv reaches
// 15 GB/s per core (bench/kernels/bm_gemm), so such products run as matrix-vector products, over blocks
// of B small enough (≤ 1 MiB) to stay in L2 while every row uses them: B is read once.
inline constexpr index_t few_rows = 8;

#ifdef LOCOST_USE_OPENBLAS
template <class T>
void blas_few_rows(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    const auto K = static_cast<blasint>(g.k), ldb = static_cast<blasint>(g.ldb);
    const auto inc_a = static_cast<blasint>(g.trans_a ? g.lda : 1);
    const index_t a_row = g.trans_a ? 1 : g.lda;
    const index_t block = std::max<index_t>(16, (index_t{1} << 20) / static_cast<index_t>(sizeof(T) * static_cast<std::size_t>(g.k)));
    for (index_t n0 = 0; n0 < g.n; n0 += block) {
        const auto nb = static_cast<blasint>(std::min(block, g.n - n0));
        for (index_t i = 0; i < g.m; ++i) {
            const T* x = a + i * a_row;
            T* y = c + i * g.ldc + n0;
            // gemv scales y by beta = 0 by multiplying: clear it so stale NaNs cannot survive
            if (beta == T(0)) std::fill(y, y + nb, T(0));
            if constexpr (std::is_same_v<T, float>) {
                if (g.trans_b) cblas_sgemv(CblasRowMajor, CblasNoTrans, nb, K, alpha, b + n0 * g.ldb, ldb, x, inc_a, beta, y, 1);
                else cblas_sgemv(CblasRowMajor, CblasTrans, K, nb, alpha, b + n0, ldb, x, inc_a, beta, y, 1);
            } else {
                if (g.trans_b) cblas_dgemv(CblasRowMajor, CblasNoTrans, nb, K, alpha, b + n0 * g.ldb, ldb, x, inc_a, beta, y, 1);
                else cblas_dgemv(CblasRowMajor, CblasTrans, K, nb, alpha, b + n0, ldb, x, inc_a, beta, y, 1);
            }
        }
    }
}
#endif

// y = x·Bᵀ for R rows x (B stored (n, k) as a Linear layer's weight): every row of B is loaded
// once and multiplied into all R rows while it is in registers, two rows of B at a time (2·R
// vector accumulators). gemv per row would read B R times; from L2 that still halved beam
// search's rate with 4 beams (bench/kernels/bm_gemm, M = 4).
template <class T, int R>
void few_rows_wt(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    using V = xsimd::batch<T>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t K = g.k, kv = K / w * w;
    auto finish = [&](index_t i, index_t j, T dot) {
        T& y = c[i * g.ldc + j];
        y = beta == T(0) ? alpha * dot : alpha * dot + beta * y;
    };
    index_t j = 0;
    for (; j + 2 <= g.n; j += 2) {
        const T* b0 = b + j * g.ldb;
        const T* b1 = b0 + g.ldb;
        V s0[R], s1[R];
        for (int i = 0; i < R; ++i) s0[i] = s1[i] = V(T(0));
        for (index_t k = 0; k < kv; k += w) {
            const V w0 = V::load_unaligned(b0 + k), w1 = V::load_unaligned(b1 + k);
            for (int i = 0; i < R; ++i) {
                const V x = V::load_unaligned(a + i * g.lda + k);
                s0[i] = xsimd::fma(x, w0, s0[i]);
                s1[i] = xsimd::fma(x, w1, s1[i]);
            }
        }
        for (int i = 0; i < R; ++i) {
            T d0 = xsimd::hadd(s0[i]), d1 = xsimd::hadd(s1[i]);
            for (index_t k = kv; k < K; ++k) {
                d0 += a[i * g.lda + k] * b0[k];
                d1 += a[i * g.lda + k] * b1[k];
            }
            finish(i, j, d0);
            finish(i, j + 1, d1);
        }
    }
    for (; j < g.n; ++j)
        for (int i = 0; i < R; ++i) {
            T d = 0;
            for (index_t k = 0; k < K; ++k) d += a[i * g.lda + k] * b[j * g.ldb + k];
            finish(i, j, d);
        }
}

// C = x·B for R rows x and B stored (k, n) (attention's probabilities times a block of values):
// each row of B, loaded once, is scaled by every row's x[k] into register accumulators covering
// two vectors of columns.
template <class T, int R>
void few_rows_n(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    using V = xsimd::batch<T>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = g.n / (2 * w) * (2 * w);
    auto finish = [&](index_t i, index_t j, const V& acc) {
        T* y = c + i * g.ldc + j;
        const V r = V(alpha) * acc;
        (beta == T(0) ? r : xsimd::fma(V(beta), V::load_unaligned(y), r)).store_unaligned(y);
    };
    for (index_t j = 0; j < nv; j += 2 * w) {
        V s0[R], s1[R];
        for (int i = 0; i < R; ++i) s0[i] = s1[i] = V(T(0));
        for (index_t k = 0; k < g.k; ++k) {
            const V b0 = V::load_unaligned(b + k * g.ldb + j), b1 = V::load_unaligned(b + k * g.ldb + j + w);
            for (int i = 0; i < R; ++i) {
                const V x(a[i * g.lda + k]);
                s0[i] = xsimd::fma(x, b0, s0[i]);
                s1[i] = xsimd::fma(x, b1, s1[i]);
            }
        }
        for (int i = 0; i < R; ++i) {
            finish(i, j, s0[i]);
            finish(i, j + w, s1[i]);
        }
    }
    for (index_t j = nv; j < g.n; ++j)
        for (int i = 0; i < R; ++i) {
            T d = 0;
            for (index_t k = 0; k < g.k; ++k) d += a[i * g.lda + k] * b[k * g.ldb + j];
            T& y = c[i * g.ldc + j];
            y = beta == T(0) ? alpha * d : alpha * d + beta * y;
        }
}

template <class T, int R = 1>
void few_rows_n_dispatch(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    if constexpr (R < few_rows) {
        if (g.m != R) return few_rows_n_dispatch<T, R + 1>(g, alpha, a, b, beta, c);
    }
    few_rows_n<T, R>(g, alpha, a, b, beta, c);
}

template <class T, int R = 1>
void few_rows_wt_dispatch(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    if constexpr (R < few_rows) {
        if (g.m != R) return few_rows_wt_dispatch<T, R + 1>(g, alpha, a, b, beta, c);
    }
    few_rows_wt<T, R>(g, alpha, a, b, beta, c);
}

template <class T>
void blas_product(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    if (g.m > few_rows) many_rows(g, alpha, a, b, beta, c);
    else if (g.trans_b && !g.trans_a) few_rows_wt_dispatch(g, alpha, a, b, beta, c);
    else if (!g.trans_b && !g.trans_a && g.n <= 256) few_rows_n_dispatch(g, alpha, a, b, beta, c);
#ifdef LOCOST_USE_OPENBLAS
    else blas_few_rows(g, alpha, a, b, beta, c);
#else
    else many_rows(g, alpha, a, b, beta, c);
#endif
}

}  // namespace cpu_detail

template <class T>
struct kernel<ops::gemm_op, cpu, T> {
    static void run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
        cpu_detail::poll_interrupt();  // one product of a long input can take a second
        if (g.k == 0) {
            cpu_detail::eigen_gemm(g, alpha, a, b, beta, c);
            return;
        }
#ifdef LOCOST_USE_OPENBLAS
        cpu_detail::openblas_single_threaded();
#endif
        const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
        // Below ~0.1 MFLOP a parallel region (a few µs) costs more than it saves; decoding's
        // matrix-vector products (768 × 768 and up) are above it and memory-bound, so they
        // gain from both cores' bandwidth.
        if (threads == 1 || g.m * g.n * g.k < (index_t{1} << 16)) {
            cpu_detail::blas_product(g, alpha, a, b, beta, c);
            return;
        }
        const bool split_m = g.m >= 16 * threads;
        const index_t extent = split_m ? g.m : g.n;
        cpu_detail::parallel_region(threads, [&](index_t t, index_t nt) {
            // Slices aligned to 16 rows/columns (one AVX-512 vector of floats).
            const index_t per = (extent + nt * 16 - 1) / (nt * 16) * 16;
            const index_t begin = std::min(extent, t * per), end = std::min(extent, begin + per);
            if (begin < end) {
                ops::gemm_args s = g;
                if (split_m) {
                    s.m = end - begin;
                    cpu_detail::blas_product(s, alpha, a + (g.trans_a ? begin : begin * g.lda), b, beta, c + begin * g.ldc);
                } else {
                    s.n = end - begin;
                    cpu_detail::blas_product(s, alpha, a, b + (g.trans_b ? begin * g.ldb : begin), beta, c + begin);
                }
            }
        });
    }
};

}  // namespace locost
